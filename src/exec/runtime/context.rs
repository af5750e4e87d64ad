//! The kernel interface: what a kernel is given and what it is (GE's `KernelContext`,
//! `KernelFuncs`, compute node info, and the executor's shared environment).
//!
//! A [`KernelContext`] is built on the engine's stack for each node call from the node's
//! record (its input slot ids and first output slot) and handed to the kernel's run
//! function. Inputs are shared views of their slots, outputs mutable views of this node's
//! own slots; the accessors check kinds and name what was wrong, so a kernel can use `?`
//! throughout and the engine adds the node's name. The node's kernel state is an opaque
//! [`NodeState`] whose type the kernel's own module defines.
//!
//! Everything here is below the plan, the kernels and the engines: a kernel runs an owner
//! node's subgraph through the [`Subgraph`] trait (the plan implements it with the
//! engines), and a [`Subscriber`] sees a graph by its path. The context, the node info
//! (which holds the kernel's functions), the environment and the subscriber name each
//! other, so they share this file.

use std::fmt;
use std::sync::Arc;

use crate::exec::{KernelClass, KernelNode, Origin};
use crate::npu::device::{Device, StreamId};
use crate::ops::{AttrMap, DType, HostTensor, OpRegistry, OpSpec};

use super::error::{KernelError, LoadError};
use super::state::NodeState;
use super::value::{Arena, DeviceAllocator, Mem, Value};

pub type KernelResult = Result<(), KernelError>;

/// Runs the kernel: GE's `KernelFunc`.
pub type KernelFn = fn(&mut KernelContext<'_>) -> KernelResult;
/// Creates a node's outputs once, at load (GE's `CreateOutputsFunc`): a constant's value.
pub type OutputsCreator = fn(&KernelNode, &mut [Value]) -> Result<(), LoadError>;
/// Resolves what a node needs at run time from its attributes, once, at load (GE's kernel
/// extend info and compute node info): the op of a launch, its dtypes.
pub type Prepare = fn(&KernelNode, &OpRegistry) -> Result<NodeData, LoadError>;
/// Lines describing a node's current inputs and outputs, for the trace (GE's
/// `TracePrinter`).
pub type TracePrinter = fn(&KernelContext<'_>) -> Vec<String>;
/// The op a node's time is attributed to in the profile (GE's profiling filler).
pub type ProfilingFiller = for<'a> fn(&KernelContext<'a>) -> Option<ProfilingInfo<'a>>;

/// What a [`ProfilingFiller`] names: the op type and the op (compute node) a kernel serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfilingInfo<'a> {
    pub op_type: &'a str,
    pub op_name: &'a str,
}

/// A kernel's functions (GE's `KernelFuncs`).
#[derive(Debug, Clone, Copy)]
pub struct KernelFuncs {
    pub run: KernelFn,
    pub outputs_creator: Option<OutputsCreator>,
    pub prepare: Option<Prepare>,
    pub trace_printer: Option<TracePrinter>,
    pub profiling_filler: Option<ProfilingFiller>,
}

/// What a kernel resolved at load from its node's attributes.
#[derive(Debug, Clone, Default)]
pub enum NodeData {
    #[default]
    None,
    Op(Box<OpData>),
    /// A byte count read from an attribute (`AllocMemHbm`'s `size`).
    Bytes(usize),
}

/// An op kernel's resolved op: the spec, the element types of its present inputs (`None`
/// for an omitted optional input, which has no slots) and of its outputs.
#[derive(Debug, Clone)]
pub struct OpData {
    pub spec: OpSpec,
    pub inputs: Vec<Option<DType>>,
    pub outputs: Vec<DType>,
}

impl NodeData {
    pub fn op(&self) -> Option<&OpData> {
        match self {
            NodeData::Op(o) => Some(o),
            NodeData::None | NodeData::Bytes(_) => None,
        }
    }
}

/// The cold part of a node: what errors, traces and profiles name, and what kernels read.
#[derive(Debug)]
pub struct NodeInfo {
    pub id: u32,
    pub name: String,
    pub kernel: &'static str,
    pub class: KernelClass,
    pub funcs: KernelFuncs,
    pub critical_section: &'static str,
    pub attrs: AttrMap,
    pub origin: Option<Arc<Origin>>,
    pub priority: i64,
    pub data: NodeData,
    /// An owner node's subgraphs, prepared with it.
    pub subgraphs: Vec<Arc<dyn Subgraph>>,
}

/// A subgraph of an owner node (`If`, `Case`, `While`, `Loop`), prepared at load. The
/// owner's kernel runs it through this trait with the executor's own engine; the
/// prepared plan implements it (`engine.rs`), so kernels need neither plans nor engines.
pub trait Subgraph: Send + Sync + fmt::Debug {
    /// The graph's path for errors (`Main/if.then`).
    fn path(&self) -> &str;
    /// Runs the subgraph once with `bind` as its owner inputs (its `InnerData(i)` reads
    /// `bind[i]`) and returns its outputs. `state` is the subgraph's execution state,
    /// made on first use and kept by the owner across executions.
    fn run(
        &self,
        env: &Env,
        state: &mut NodeState,
        bind: &[Value],
    ) -> Result<Vec<Value>, KernelError>;
}

/// GE's `ExecutorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ExecutorType {
    Sequential,
    #[default]
    Topological,
    TopologicalPriority,
    TopologicalMultiThread,
}

impl ExecutorType {
    pub const ALL: [ExecutorType; 4] = [
        ExecutorType::Sequential,
        ExecutorType::Topological,
        ExecutorType::TopologicalPriority,
        ExecutorType::TopologicalMultiThread,
    ];
    /// The command line's name.
    pub fn name(self) -> &'static str {
        match self {
            ExecutorType::Sequential => "seq",
            ExecutorType::Topological => "topo",
            ExecutorType::TopologicalPriority => "topo-prio",
            ExecutorType::TopologicalMultiThread => "topo-mt",
        }
    }
    /// GE's name.
    pub fn ge_name(self) -> &'static str {
        match self {
            ExecutorType::Sequential => "kSequentialPriority",
            ExecutorType::Topological => "kTopological",
            ExecutorType::TopologicalPriority => "kTopologicalPriority",
            ExecutorType::TopologicalMultiThread => "kTopologicalMultiThread",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// What every kernel call of one executor shares.
pub struct Env {
    pub device: Device,
    pub ops: Arc<OpRegistry>,
    pub executor: ExecutorType,
    /// Called around every node when set (the engines' callback variant).
    pub subscriber: Option<Arc<dyn Subscriber>>,
    /// The most times a loop kernel (`While`, `Loop`) runs its body in one execution of
    /// the loop node; one more is [`KernelError::IterationLimit`]. A model whose trip
    /// count or condition never ends would otherwise run forever.
    pub max_iterations: u64,
}

/// The default of [`Env::max_iterations`]: the device's WHILE watchdog's default
/// (`DeviceConfig::max_while_iterations`), so a model loop and a captured WHILE are bounded
/// alike. A million iterations of a cheap body take seconds; real models loop far less
/// (a decoder's tokens, an RNN's time steps).
pub const DEFAULT_MAX_ITERATIONS: u64 = 1_000_000;

/// Subscribers to executor events (GE's `ExecutorSubscriber`): model start, each node's
/// execute start and end, model end, each naming the graph by its path (`Main`,
/// `Main/if.then`). When an executor has one, the engines call it around every node; the
/// profiler, the tracer and the tensor dumper are subscribers.
pub trait Subscriber: Send + Sync {
    fn model_start(&self, _graph: &str) {}
    fn node_start(&self, _graph: &str, _cx: &KernelContext<'_>) {}
    fn node_end(&self, _graph: &str, _cx: &KernelContext<'_>, _result: &KernelResult) {}
    fn model_end(&self, _graph: &str, _ok: bool) {}
}

/// One kernel call's view of the execution.
pub struct KernelContext<'a> {
    pub(crate) env: &'a Env,
    pub(crate) info: &'a NodeInfo,
    pub(crate) state: &'a mut NodeState,
    pub(crate) values: &'a Arena,
    pub(crate) inputs: &'a [u32],
    pub(crate) out_start: u32,
    pub(crate) out_len: u32,
}

impl<'a> KernelContext<'a> {
    pub fn device(&self) -> &'a Device {
        &self.env.device
    }
    pub fn info(&self) -> &'a NodeInfo {
        self.info
    }
    pub fn input_count(&self) -> usize {
        self.inputs.len()
    }
    pub fn output_count(&self) -> usize {
        self.out_len as usize
    }

    // The accessors below are inlined into every kernel and their errors kept out of line:
    // a launch reads six inputs, and calling out for each (with its error formatting in
    // the same body) was a tenth of a small launch's instructions.

    /// Input `i`.
    #[inline]
    pub fn input(&self, i: usize) -> Result<&'a Value, KernelError> {
        let Some(&slot) = self.inputs.get(i) else {
            return Err(self.missing(i));
        };
        // SAFETY: the slot is an input of the running node (`get` checks the index): its
        // producer completed, its writes visible, before this node was scheduled (`call`'s
        // contract), and only that producer writes it, in the next execution at the
        // earliest, after this node's run.
        Ok(unsafe { self.values.get(slot) })
    }

    /// Input `i`, or `None` when the node has no such input: for a kernel's checks that
    /// need no error (a launch comparing its record with its inputs, per execution).
    #[inline]
    pub fn try_input(&self, i: usize) -> Option<&'a Value> {
        let &slot = self.inputs.get(i)?;
        // SAFETY: the slot is an input of the running node, as in `input`.
        Some(unsafe { self.values.get(slot) })
    }

    /// Output `i`, to write.
    pub fn output(&mut self, i: usize) -> Result<&mut Value, KernelError> {
        if i >= self.out_len as usize {
            return Err(KernelError::new(format!(
                "output {i} is missing: the node has {}",
                self.out_len
            )));
        }
        // SAFETY: the slot is this node's own output (`i < out_len`), which no other node
        // writes (`prepare` gives each node its own range of slots) and no node reads
        // until this one completed; this node never holds it as an input (`prepare`
        // refuses an input from the node itself), and `&mut self` keeps this the only
        // view of it handed out.
        Ok(unsafe { self.values.get_mut(self.out_start + i as u32) })
    }

    /// The shared environment (a subgraph runs in it).
    pub fn env(&self) -> &'a Env {
        self.env
    }

    /// The node's state across executions as the kernel's own type `T`, made with
    /// `T::default()` on the first call (or when it held another type).
    #[inline(always)]
    pub fn state<T: std::any::Any + Send + Default>(&mut self) -> &mut T {
        self.state.get_or_insert_with(T::default)
    }

    #[cold]
    #[inline(never)]
    fn missing(&self, i: usize) -> KernelError {
        KernelError::new(format!(
            "input {i} is missing: the node has {}",
            self.inputs.len()
        ))
    }

    #[cold]
    #[inline(never)]
    fn wrong(&self, i: usize, want: &str, got: &Value) -> KernelError {
        KernelError::new(format!("input {i} is {}, expected {want}", got.kind()))
    }

    #[inline]
    pub fn input_int(&self, i: usize) -> Result<i64, KernelError> {
        match self.input(i)? {
            Value::Int(v) => Ok(*v),
            v => Err(self.wrong(i, "an integer", v)),
        }
    }
    #[inline]
    pub fn input_shape(&self, i: usize) -> Result<&'a [i64], KernelError> {
        match self.input(i)? {
            Value::Shape(s) => Ok(s),
            v => Err(self.wrong(i, "a shape", v)),
        }
    }
    #[inline]
    pub fn input_mem(&self, i: usize) -> Result<&'a Mem, KernelError> {
        match self.input(i)? {
            Value::Mem(m) => Ok(m),
            v => Err(self.wrong(i, "device memory", v)),
        }
    }
    #[inline]
    pub fn input_host(&self, i: usize) -> Result<&'a Arc<HostTensor>, KernelError> {
        match self.input(i)? {
            Value::Host(h) => Ok(h),
            v => Err(self.wrong(i, "a host tensor", v)),
        }
    }
    /// The model's first stream (the one an execution is bound to).
    #[inline]
    pub fn input_stream(&self, i: usize) -> Result<StreamId, KernelError> {
        match self.input(i)? {
            Value::Streams(s) if !s.is_empty() => Ok(s[0]),
            v => Err(self.wrong(i, "streams", v)),
        }
    }
    #[inline]
    pub fn input_allocator(&self, i: usize) -> Result<&'a Arc<dyn DeviceAllocator>, KernelError> {
        match self.input(i)? {
            Value::Allocator(a) => Ok(a),
            v => Err(self.wrong(i, "an allocator", v)),
        }
    }

    pub fn attr_int(&self, key: &str) -> Result<i64, KernelError> {
        self.info
            .attrs
            .get(key)
            .and_then(|a| a.as_int())
            .ok_or_else(|| KernelError::new(format!("attribute {key:?} (an integer) is missing")))
    }
    pub fn attr_dtype(&self, key: &str) -> Result<DType, KernelError> {
        match self.info.attrs.get(key) {
            Some(crate::ops::Attr::DType(d)) => Ok(*d),
            Some(crate::ops::Attr::Str(s)) => DType::from_name(s)
                .ok_or_else(|| KernelError::new(format!("attribute {key:?}: unknown dtype {s:?}"))),
            _ => Err(KernelError::new(format!(
                "attribute {key:?} (a dtype) is missing"
            ))),
        }
    }
}
