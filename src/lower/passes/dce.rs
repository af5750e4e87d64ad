//! Dead-node elimination on KernelGraphs: removes pure nodes whose outputs nobody reads.
//!
//! A node can go when its kernel type is pure (it only computes outputs from inputs and
//! attributes; see `exec::kernel_types`) and no node of its graph reads any of its outputs.
//! Removing one can make its producers dead too, so the pass runs to a fixed point; a
//! control edge from a removed node is dropped with it (ordering after a node that no
//! longer runs orders nothing). Nodes of an unknown kernel type are kept: the verifier
//! reports them. Subgraphs are cleaned the same way; their boundary nodes are not pure.

use crate::exec::KernelGraph;
use crate::exec::kernel_types::kernel_type;

/// Removes dead nodes from `g` and its subgraphs; returns how many were removed.
pub fn eliminate(g: &mut KernelGraph) -> usize {
    let mut removed = 0;
    for n in &mut g.nodes {
        for s in &mut n.subgraphs {
            removed += eliminate(s);
        }
    }
    let len = g.nodes.len();
    let mut readers = vec![0u32; len];
    for n in &g.nodes {
        for v in &n.inputs {
            if let Some(r) = readers.get_mut(v.node.index()) {
                *r += 1;
            }
        }
    }
    let removable = |i: usize, g: &KernelGraph| {
        kernel_type(&g.nodes[i].kernel).is_some_and(|k| k.pure) && g.nodes[i].subgraphs.is_empty()
    };
    let mut dead = vec![false; len];
    let mut work: Vec<usize> = (0..len)
        .filter(|&i| readers[i] == 0 && removable(i, g))
        .collect();
    while let Some(i) = work.pop() {
        if dead[i] {
            continue;
        }
        dead[i] = true;
        for v in &g.nodes[i].inputs {
            let p = v.node.index();
            if p < len {
                readers[p] -= 1;
                if readers[p] == 0 && !dead[p] && removable(p, g) {
                    work.push(p);
                }
            }
        }
    }
    removed + super::remove_nodes(g, &dead)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{KernelNode, KernelNodeId};

    fn node(name: &str, kernel: &str, inputs: &[u32]) -> KernelNode {
        crate::lower::passes::test_node(name, kernel, inputs, &[])
    }

    #[test]
    fn removes_chains_of_unread_pure_nodes_and_keeps_effects() {
        let mut g = KernelGraph::new("Main");
        g.add(node("shape_src", "InnerData", &[])); // 0: read only by dead nodes
        g.add(node("infer", "InferShape", &[0])); // 1: dead
        g.add(node("size", "CalcTensorSizeFromShape", &[1])); // 2: dead, unread
        g.add(node("x", "Data", &[])); // 3: kept, model input
        g.add(node("alloc", "AllocMemHbm", &[])); // 4: not pure
        g.add(node("launch", "LaunchKernelWithHandle", &[3, 4])); // 5: effect
        let mut free = node("free", "FreeMemory", &[4]); // 6
        free.control_inputs.push(KernelNodeId(1)); // ordered after a dead node: edge dropped
        free.control_inputs.push(KernelNodeId(5));
        g.add(free);
        g.free_launch.push((KernelNodeId(6), KernelNodeId(5)));
        assert_eq!(eliminate(&mut g), 3);
        let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["x", "alloc", "launch", "free"]);
        assert_eq!(
            g.nodes[2]
                .inputs
                .iter()
                .map(|v| v.node.0)
                .collect::<Vec<_>>(),
            [0, 1]
        );
        assert_eq!(g.nodes[3].control_inputs[..], [KernelNodeId(2)]);
        assert_eq!(g.free_launch, vec![(KernelNodeId(3), KernelNodeId(2))]);
        assert_eq!(eliminate(&mut g), 0, "a fixed point");
    }
}
