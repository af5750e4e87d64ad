//! Passes over KernelGraphs, each followed by the verifier in tests and debug builds:
//! constant folding, dead-node elimination, topological sort, priority calculation, and the two
//! multi-thread passes.

pub mod const_fold;
pub mod dce;
pub mod memory;
pub mod multi_thread;
pub mod priority;
pub mod topo;

/// Removes the nodes of `g` marked in `dead` (no subgraphs are touched); returns how many.
/// The survivors keep their relative order, so a topological order stays one. A control
/// edge from a removed node is dropped with it; no data edge may name one (the caller's
/// guarantee), and no Free-Launch relation either.
pub(crate) fn remove_nodes(g: &mut crate::exec::KernelGraph, dead: &[bool]) -> usize {
    let count = dead.iter().filter(|&&d| d).count();
    if count == 0 {
        return 0;
    }
    let len = g.nodes.len();
    let mut new_id = vec![u32::MAX; len];
    let mut next = 0;
    for (i, d) in dead.iter().enumerate() {
        if !d {
            new_id[i] = next;
            next += 1;
        }
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes
        .into_iter()
        .zip(dead)
        .filter(|(_, d)| !**d)
        .map(|(n, _)| n)
        .collect();
    for n in &mut g.nodes {
        n.control_inputs
            .retain(|c| !dead.get(c.index()).copied().unwrap_or(false));
    }
    renumber(g, &new_id);
    count
}

/// Rewrites every node id `g`'s nodes and relations hold (data inputs, control inputs,
/// Free-Launch pairs) through `new_id` (old id to new), after its nodes moved.
pub(crate) fn renumber(g: &mut crate::exec::KernelGraph, new_id: &[u32]) {
    use crate::exec::KernelNodeId;
    let remap = |id: KernelNodeId| KernelNodeId(new_id[id.index()]);
    for n in &mut g.nodes {
        for v in &mut n.inputs {
            v.node = remap(v.node);
        }
        for c in &mut n.control_inputs {
            *c = remap(*c);
        }
    }
    for (f, l) in &mut g.free_launch {
        *f = remap(*f);
        *l = remap(*l);
    }
}

/// A node for pass tests: `kernel` with its class from the kernel table, one output, data
/// inputs reading output 0 of `inputs`, and control edges from `control`.
#[cfg(test)]
pub(crate) fn test_node(
    name: &str,
    kernel: &str,
    inputs: &[u32],
    control: &[u32],
) -> crate::exec::KernelNode {
    use crate::exec::{KernelNodeId, ValueRef, kernel_types::exec_node};
    let mut n = exec_node(name, kernel);
    n.inputs = inputs
        .iter()
        .map(|&i| ValueRef {
            node: KernelNodeId(i),
            output: 0,
        })
        .collect();
    n.control_inputs = control.iter().map(|&i| KernelNodeId(i)).collect();
    n.outputs = 1;
    n
}
