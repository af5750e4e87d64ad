//! Priority calculation for the topological-priority engine: among ready nodes, the lower
//! priority runs first.
//!
//! rt2's rule (GE does not document its own): memory-releasing kernels (`FreeMemory`,
//! `FreeMemoryHoldAddr`) get the lowest value, so memory goes back as soon as its last
//! reader has run and peak memory stays low; every other node's priority is the negated
//! length of the longest path from it to a sink, so the critical path runs first and the
//! device gets long chains of work early. Subgraphs get their own priorities.

use crate::exec::KernelGraph;

/// The priority of memory-releasing kernels: below any critical-path value.
pub const RELEASE_PRIORITY: i64 = i64::MIN / 2;

/// Sets `priority` on every node of `g` and its subgraphs. `g` must be topologically
/// sorted (every input before its reader).
pub fn assign(g: &mut KernelGraph) {
    for n in &mut g.nodes {
        for s in &mut n.subgraphs {
            assign(s);
        }
    }
    // Longest path to a sink, walking the sorted array backwards: every successor of a
    // node comes after it, so its value is final when the node is reached.
    let len = g.nodes.len();
    let mut depth = vec![0i64; len];
    for i in (0..len).rev() {
        let d = depth[i];
        let n = &g.nodes[i];
        for p in n
            .inputs
            .iter()
            .map(|v| v.node.index())
            .chain(n.control_inputs.iter().map(|c| c.index()))
        {
            if p < i {
                depth[p] = depth[p].max(d + 1);
            }
        }
    }
    for (n, d) in g.nodes.iter_mut().zip(depth) {
        n.priority = if matches!(n.kernel.as_ref(), "FreeMemory" | "FreeMemoryHoldAddr") {
            RELEASE_PRIORITY
        } else {
            -d
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::KernelNode;

    fn node(kernel: &str, inputs: &[u32]) -> KernelNode {
        crate::lower::passes::test_node(kernel, kernel, inputs, &[])
    }

    #[test]
    fn critical_path_first_and_frees_at_once() {
        let mut g = KernelGraph::new("Main");
        g.add(node("Data", &[])); // 0: a -> b -> c -> out: depth 3
        g.add(node("InferShape", &[0])); // 1: depth 2
        g.add(node("AllocMemHbm", &[])); // 2: -> launch -> out: depth 2
        g.add(node("LaunchKernelWithHandle", &[1, 2])); // 3: depth 1
        g.add(node("FreeMemory", &[2])); // 4: release
        g.add(node("NetOutput", &[3])); // 5: sink
        assign(&mut g);
        let p: Vec<i64> = g.nodes.iter().map(|n| n.priority).collect();
        assert_eq!(p, [-3, -2, -2, -1, RELEASE_PRIORITY, 0]);
    }
}
