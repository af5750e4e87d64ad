//! Running ExecuteGraphs: the kernel registry, the prepared graphs, the engines and the
//! model executor (GE's `gert` runtime: `ModelV2Executor`, `StreamExecutor`, the
//! sequential and topological executors, `KernelRegistry`).
//!
//! The files form layers; each uses only those below it:
//! - [`executor`]: [`ModelV2Executor`] (Load runs Init and prepares Main; Execute binds
//!   inputs, runs Main, hands out outputs; UnLoad runs DeInit) and [`StreamExecutor`];
//!   `executor/graph_mode.rs` below it, graph mode.
//! - [`engine`]: the four executor types over a prepared graph, and the subgraph runs
//!   of owner kernels; `engine_mt` below it, the multi-thread engine.
//! - [`kernels`]: the builtin registry (`kernels/mod.rs`) over what each kernel type does
//!   on the emulated device (one file per family, each owning its kernels' state types).
//! - [`plan`]: a graph prepared once per load (node records, value slots, run order,
//!   successor lists, relations) and one executor's state of it.
//! - [`registry`]: kernel type names to kernels.
//! - [`context`]: the kernel interface (context, functions, node info, environment,
//!   subscribers, subgraphs); [`state`]: the opaque per-node state; [`value`]: values;
//!   [`error`]: the errors.
//!
//! This file only declares and re-exports.

pub mod context;
pub mod engine;
mod engine_mt;
pub mod error;
pub mod executor;
pub mod kernels;
pub mod plan;
pub mod registry;
pub mod session;
pub mod state;
pub mod subscribers;
pub mod value;

pub use context::{
    DEFAULT_MAX_ITERATIONS, Env, ExecutorType, KernelContext, KernelFuncs, KernelResult, NodeData,
    NodeInfo, OpData, ProfilingInfo, Subgraph, Subscriber,
};
pub use engine_mt::MtData;
pub use error::{
    ExecError, ExecutorStatus, IoError, KernelError, LoadError, NoCompute, StateError,
};
pub use executor::{ExecutorOptions, ModelExecuteArg, ModelInput, ModelV2Executor, StreamExecutor};
pub use kernels::ops_without_compute;
pub use plan::{ExecState, Plan, prepare};
pub use registry::{KernelInfo, KernelRegistry, Role};
pub use state::NodeState;
pub use value::{CachingAllocator, DeviceAllocator, Mem, OutputTensor, Value};
