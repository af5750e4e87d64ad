//! Running ExecuteGraphs: the kernel registry, the prepared graphs, the engines and the
//! model executor (GE's `gert` runtime: `ModelV2Executor`, `StreamExecutor`, the
//! sequential and topological executors, `KernelRegistry`).
//!
//! Layers, top down:
//! - [`executor`]: [`ModelV2Executor`] (Load runs Init and prepares Main; Execute binds
//!   inputs, runs Main, hands out outputs; UnLoad runs DeInit) and [`StreamExecutor`].
//! - [`engine`]: the four executor types over a prepared graph.
//! - [`plan`]: a graph prepared once per load: node records, value slots, run order,
//!   successor lists, relations.
//! - [`kernels`]: what each kernel type does, on the emulated device.
//! - [`registry`], [`context`], [`value`]: the kernel interface.

pub mod context;
pub mod engine;
mod engine_mt;
pub mod error;
pub mod executor;
pub mod kernels;
pub mod plan;
pub mod registry;
pub mod session;
pub mod subscriber;
pub mod subscribers;
pub mod value;

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::Arc;

use crate::npu::device::Device;
use crate::ops::OpRegistry;

pub use context::{KernelContext, KernelResult};
pub use engine::ExecutorType;
pub use engine_mt::MtData;
pub use error::{ExecError, ExecutorStatus, IoError, KernelError, LoadError, StateError};
pub use executor::{
    ExecutorOptions, ModelExecuteArg, ModelV2Executor, OutputTensor, StreamExecutor,
};
pub use plan::{NodeData, NodeInfo, NodeState, OpData, Plan, prepare};
pub use registry::{KernelFuncs, KernelInfo, KernelRegistry, ProfilingInfo, Role};
pub use subscriber::Subscriber;
pub use value::{CachingAllocator, DeviceAllocator, Mem, Value};

/// What every kernel call of one executor shares.
pub struct Env {
    pub device: Device,
    pub ops: Arc<OpRegistry>,
    pub executor: ExecutorType,
    /// Called around every node when set (the engines' callback variant).
    pub subscriber: Option<Arc<dyn Subscriber>>,
}

/// A prepared graph's mutable side, one per executor (per stream).
pub struct ExecState {
    pub(crate) arena: value::Arena,
    pub(crate) states: Box<[UnsafeCell<NodeState>]>,
    /// The topological engines' counters, reset in place per execution.
    pub(crate) indegree: Vec<u32>,
    pub(crate) queue: VecDeque<u32>,
    /// The topological-priority engine's ready nodes: a binary min-heap of the plan's
    /// packed keys (`Plan::prio_key`).
    pub(crate) heap: Vec<u64>,
    /// The multi-thread engine's pool (counters, queues, worker threads), made at the
    /// state's first topo-mt run; dropping it joins the workers.
    pub(crate) mt: Option<engine_mt::MtPool>,
}

// SAFETY: the `UnsafeCell`s shared this way are the arena's (`Sync` under its own
// contract) and `states`: a node's state is reached only through `engine::call` for that
// node, whose contract (the schedule, as for value slots: see `value::Arena`) has one
// thread run the node at a time, after the previous run's accesses happened before.
// `NodeState` is `Send`, so a state used by one thread and then another is sound. The
// other fields are mutated only through `&mut ExecState`. (`Send` needs no `unsafe impl`:
// every field is `Send`.)
unsafe impl Sync for ExecState {}
