//! ExecuteGraphs and their execution: the graph model, the `.exeg` file, the kernel types.
//!
//! Architecture invariant: `exec` uses `npu` and nothing else of rt2; it knows nothing of
//! model files (`om`) or of how graphs were lowered (`lower`).

pub mod graph;
pub mod kernels;

pub use graph::{
    ExecAttr, ExecGraph, ExecNode, ExecNodeId, ExecTensor, ExecuteGraph, GraphKind, KernelClass,
    ModelIo, Origin, Resources, ValueRef,
};
