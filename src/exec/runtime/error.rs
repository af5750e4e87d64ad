//! The runtime's errors: [`KernelError`] (one kernel call's failure) and [`ExecError`]
//! (loading or running a graph), with what each wraps.
//!
//! Sources are carried, not stringified: a caller tells out-of-memory
//! (`NpuError::OutOfMemory` under [`KernelError::Device`], or [`ExecError::npu_error`])
//! from a bad shape ([`KernelError::Op`], or [`ExecError::op_error`]), an unsupported op ([`LoadError::UnknownOp`],
//! [`LoadError::NoKernel`], [`ExecError::NoCompute`], `OpError::NoCompute`) and a misused executor
//! ([`StateError`]) by matching. The two are mutually recursive (an owner kernel's
//! failure is its subgraph's `ExecError`), so they share this file, the runtime's lowest.

use crate::npu::device::NpuError;
use crate::ops::OpError;

/// A kernel's failure; the engine wraps it with the graph and the node.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KernelError {
    /// The device refused or failed the work: out of memory, a bad address, a launch
    /// whose op failed. Boxed, as is `Op`: every kernel returns a `KernelResult`, which
    /// stays small this way.
    #[error("{0}")]
    Device(#[source] Box<NpuError>),
    /// The op library refused the node's tensors or attributes (shape inference).
    #[error("{0}")]
    Op(#[source] Box<OpError>),
    /// A subgraph an owner kernel ran failed.
    #[error("{0}")]
    Subgraph(#[source] Box<ExecError>),
    /// The node's inputs, attributes or outputs are not what the kernel takes.
    #[error("{0}")]
    Invalid(String),
    /// A loop kernel ran its body `limit` times in one execution and would run it again
    /// (the executor's `max_iterations`): a trip count or a condition that never ends.
    #[error(
        "the loop ran its body {limit} times in one execution and would run it again \
         (the iteration limit is {limit})"
    )]
    IterationLimit { limit: u64 },
    /// The host could not give the memory of a host tensor (a download, a host value):
    /// out of host memory, an error rather than an abort.
    #[error("out of host memory: {bytes} bytes for a host tensor cannot be had")]
    HostMemory { bytes: usize },
}

impl From<NpuError> for KernelError {
    fn from(e: NpuError) -> Self {
        KernelError::Device(Box::new(e))
    }
}

impl From<OpError> for KernelError {
    fn from(e: OpError) -> Self {
        KernelError::Op(Box::new(e))
    }
}

impl KernelError {
    /// A kernel's own complaint about its node ([`KernelError::Invalid`]).
    pub fn new(msg: impl Into<String>) -> Self {
        KernelError::Invalid(msg.into())
    }

    /// The device error at the root of this one, through subgraphs.
    pub fn npu_error(&self) -> Option<&NpuError> {
        match self {
            KernelError::Device(e) => Some(e),
            KernelError::Subgraph(e) => e.kernel_error().and_then(KernelError::npu_error),
            KernelError::Op(_)
            | KernelError::Invalid(_)
            | KernelError::IterationLimit { .. }
            | KernelError::HostMemory { .. } => None,
        }
    }

    /// The iteration limit a loop reached, at the root of this error, through subgraphs.
    pub fn iteration_limit(&self) -> Option<u64> {
        match self {
            KernelError::IterationLimit { limit } => Some(*limit),
            KernelError::Subgraph(e) => e.kernel_error().and_then(KernelError::iteration_limit),
            KernelError::Device(_)
            | KernelError::Op(_)
            | KernelError::Invalid(_)
            | KernelError::HostMemory { .. } => None,
        }
    }

    /// The op library's error at the root of this one: from shape inference, or from a
    /// launch the device ran (`NpuError::Kernel`), through subgraphs.
    pub fn op_error(&self) -> Option<&OpError> {
        match self {
            KernelError::Op(e) => Some(e),
            KernelError::Device(e) => match &**e {
                NpuError::Kernel { source, .. } => Some(source),
                _ => None,
            },
            KernelError::Subgraph(e) => e.kernel_error().and_then(KernelError::op_error),
            KernelError::Invalid(_)
            | KernelError::IterationLimit { .. }
            | KernelError::HostMemory { .. } => None,
        }
    }
}

/// Why a node cannot be loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// The node's kernel type has no implementation in the registry.
    #[error("kernel type {0:?} has no implementation in rt2's kernel registry")]
    NoKernel(String),
    /// The node names an op the op library does not have.
    #[error("op {0:?} is not in the op library")]
    UnknownOp(String),
    /// The node's attributes, inputs or place in the graph are not what its kernel takes.
    #[error("{0}")]
    Invalid(String),
}

impl From<String> for LoadError {
    fn from(msg: String) -> Self {
        LoadError::Invalid(msg)
    }
}

impl From<&str> for LoadError {
    fn from(msg: &str) -> Self {
        LoadError::Invalid(msg.to_string())
    }
}

/// An op launch whose op rt2 cannot compute: a compiled kernel (GE's kernel for an op
/// the op library does not know, or knows without compute) that lowering kept so the
/// graph is whole. Named by the compute node it was lowered from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoCompute {
    /// The compute graph's name (else the exec graph's).
    pub graph: String,
    pub node: String,
    pub op_type: String,
}

impl std::fmt::Display for NoCompute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} ({})", self.graph, self.node, self.op_type)
    }
}

fn no_compute_list(ops: &[NoCompute]) -> String {
    ops.iter()
        .map(NoCompute::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where an executor is in its lifecycle (GE's `ModelV2Executor` states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorStatus {
    Created,
    Loaded,
    Unloaded,
}

impl ExecutorStatus {
    pub fn name(self) -> &'static str {
        match self {
            ExecutorStatus::Created => "created (not loaded)",
            ExecutorStatus::Loaded => "loaded",
            ExecutorStatus::Unloaded => "unloaded",
        }
    }
}

/// An executor used out of order, or in a way its state does not allow.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StateError {
    /// `action` (load, execute, capture, unload) is not allowed in `status`: executing
    /// before loading or after unloading, loading twice.
    #[error("cannot {action}: the executor is {}", status.name())]
    Status {
        action: &'static str,
        status: ExecutorStatus,
    },
    #[error("the model has no stream")]
    NoStream,
    #[error("the allocator serves stream {allocator}, the execution runs on stream {stream}")]
    AllocatorStream { allocator: u32, stream: u32 },
    /// A plain execution while a captured graph holds Main's memory.
    #[error("cannot execute: a graph is captured (replay it, or release it first)")]
    GraphCaptured,
    #[error("a graph is captured already")]
    GraphExists,
    #[error("no graph is captured")]
    NoGraph,
    /// Main cannot be captured, or a replay's inputs differ from the capture's.
    #[error("graph mode: {0}")]
    NotCapturable(String),
    /// The captured run itself failed.
    #[error("graph mode: {0}")]
    CaptureRun(#[source] Box<ExecError>),
}

/// Inputs or outputs that do not fit the model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IoError {
    #[error("the model has {expected} inputs, {given} were given")]
    InputCount { expected: usize, given: usize },
    #[error("input {index} {name:?}: {msg}")]
    Input {
        index: usize,
        name: String,
        msg: String,
    },
    /// An input's shape has no size (a dim overflows it).
    #[error("input {index} {name:?}: {source}")]
    InputSize {
        index: usize,
        name: String,
        source: KernelError,
    },
    #[error("Data index {index} is beyond the {inputs} inputs")]
    DataIndex { index: usize, inputs: usize },
    #[error("NetOutput has {values} values, the model's {outputs} outputs need {}", 2 * outputs)]
    OutputCount { values: usize, outputs: usize },
    #[error("output {index} {name:?}: {msg}")]
    Output {
        index: usize,
        name: String,
        msg: String,
    },
    /// An output's shape has no size.
    #[error("output {index}: {source}")]
    OutputSize { index: usize, source: KernelError },
    /// A captured output's shape has no size.
    #[error("{0}")]
    Size(#[source] KernelError),
}

/// Why loading or running failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExecError {
    #[error("{graph}: node {node:?}: {source}")]
    Load {
        graph: String,
        node: String,
        source: LoadError,
    },
    /// The graph launches ops rt2 cannot compute: every one of them, refused at load
    /// before anything runs.
    #[error(
        "{} op(s) rt2 cannot compute (compiled kernels only): {}",
        .0.len(),
        no_compute_list(.0)
    )]
    NoCompute(Vec<NoCompute>),
    #[error("{graph}: node {node:?} ({kernel}): {source}")]
    Kernel {
        graph: String,
        node: String,
        kernel: &'static str,
        source: KernelError,
    },
    #[error("{0}")]
    State(#[from] StateError),
    #[error("{0}")]
    Io(#[from] IoError),
    #[error("{0}")]
    Device(#[from] NpuError),
}

impl ExecError {
    /// The failing kernel's error, when a kernel failed.
    pub fn kernel_error(&self) -> Option<&KernelError> {
        match self {
            ExecError::Kernel { source, .. } => Some(source),
            ExecError::State(StateError::CaptureRun(e)) => e.kernel_error(),
            _ => None,
        }
    }

    /// The device error at the root of this one: a kernel's, or one the device reported
    /// when the executor waited for its stream (an asynchronous launch fails there).
    pub fn npu_error(&self) -> Option<&NpuError> {
        match self {
            ExecError::Device(e) => Some(e),
            _ => self.kernel_error().and_then(KernelError::npu_error),
        }
    }

    /// The op library's error at the root of this one: from shape inference, or from a
    /// launch, reported by its kernel or when the executor waited for its stream.
    pub fn op_error(&self) -> Option<&OpError> {
        match self {
            ExecError::Device(NpuError::Kernel { source, .. }) => Some(source),
            _ => self.kernel_error().and_then(KernelError::op_error),
        }
    }
}
