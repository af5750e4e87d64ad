//! Passes over ExecGraphs, each followed by the verifier in tests and debug builds:
//! constant folding, dead-node elimination, topological sort, priority calculation, and the two multi-thread
//! passes.

pub mod dce;
pub mod fold;
pub mod multi_thread;
pub mod priority;
pub mod topo;

/// A node for pass tests: `kernel` with its class from the kernel table, one output, data
/// inputs reading output 0 of `inputs`, and control edges from `control`.
#[cfg(test)]
pub(crate) fn test_node(
    name: &str,
    kernel: &str,
    inputs: &[u32],
    control: &[u32],
) -> crate::exec::ExecNode {
    use crate::exec::{ExecNodeId, ValueRef, kernels::exec_node};
    let mut n = exec_node(name, kernel);
    n.inputs = inputs
        .iter()
        .map(|&i| ValueRef {
            node: ExecNodeId(i),
            output: 0,
        })
        .collect();
    n.control_inputs = control.iter().map(|&i| ExecNodeId(i)).collect();
    n.outputs = 1;
    n
}
