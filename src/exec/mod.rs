//! ExecuteGraphs and their execution: the graph model, the `.exeg` file, the kernel types.
//!
//! Architecture invariant: `exec` uses `npu` and nothing else of rt2; it knows nothing of
//! model files (`om`) or of how graphs were lowered (`lower`).

pub mod check;
pub mod exeg;
pub mod graph;
pub mod kernel_types;
pub mod runtime;
pub mod testdata;
pub mod view;
pub(crate) mod wire;

pub use check::{Problem, check};
pub use exeg::{ExegError, check_or_err, decode, encode, is_exeg};
pub use graph::{
    ControlInputs, ExecTensor, ExecuteGraph, GraphKind, Inputs, KernelAttr, KernelClass,
    KernelGraph, KernelNode, KernelNodeId, ModelIo, NodeName, Origin, Resources, ValueRef,
};
pub use view::{GraphSelect, from_text, to_dot, to_json, to_text};
