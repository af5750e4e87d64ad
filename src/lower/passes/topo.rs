//! Topological sort: renumbers an KernelGraph's nodes so that every node comes after the
//! nodes it reads from or is ordered after.
//!
//! Lowering emits nodes in whatever order its converters find convenient; every dependency
//! is an edge, so the emission order carries no meaning. The sequential engine runs nodes
//! in array order, so the array order must be a topological order. Among nodes that are
//! ready at the same time the one emitted first goes first, which keeps the result
//! deterministic and close to the compute graph's order. Subgraphs are sorted too.
//!
//! Then every Free goes right after the last node it waits for (see [`place_frees`]).

use crate::exec::{KernelGraph, KernelNodeId};

/// A cycle was found; the names are some of the nodes on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("graph {graph:?}: edges form a cycle through {count} node(s), among them {names:?}")]
pub struct CycleError {
    pub graph: String,
    pub count: usize,
    pub names: Vec<String>,
}

/// Sorts `g` and every subgraph below it in place.
pub fn sort(g: &mut KernelGraph) -> Result<(), CycleError> {
    for n in &mut g.nodes {
        for s in &mut n.subgraphs {
            sort(s)?;
        }
    }
    // Lowering emits every node after what it depends on, so the array is usually sorted
    // already; then the sort (lowest id first among ready nodes) is the identity, and a
    // scan of the edges proves it without building an order or moving a node.
    if !g.is_sorted() {
        let order = order(g)?;
        apply(g, &order);
    }
    place_frees(g);
    Ok(())
}

/// Moves each Free that nothing waits for to right after the last node it waits for (its
/// memory's producer, its readers, the launch that writes it); every other node keeps its
/// place. Lowering emits a level's Frees at its end, and the sequential engine runs the
/// array in order: a Free there would hold its block until the level's last node, so a
/// chain of N ops would hold all N intermediates at once, each execution would take
/// fresh blocks instead of the few its free lists hold, and no launch would ever see the
/// same addresses twice. A Free that another node waits for stays where it is. `g` must
/// be sorted; the result is.
fn place_frees(g: &mut KernelGraph) {
    let n = g.nodes.len();
    let mut waited_for = vec![false; n];
    for node in &g.nodes {
        for v in &node.inputs {
            waited_for[v.node.index()] = true;
        }
        for c in &node.control_inputs {
            waited_for[c.index()] = true;
        }
    }
    // The Frees to place after each node, in their old order.
    let mut after: Vec<Vec<KernelNodeId>> = vec![Vec::new(); n];
    let mut moved = vec![false; n];
    let mut any = false;
    for (j, node) in g.nodes.iter().enumerate() {
        if !is_free(&node.kernel) || waited_for[j] {
            continue;
        }
        let last = node
            .inputs
            .iter()
            .map(|v| v.node.index())
            .chain(node.control_inputs.iter().map(|c| c.index()))
            .max();
        if let Some(last) = last
            && last + 1 < j
        {
            after[last].push(KernelNodeId(j as u32));
            moved[j] = true;
            any = true;
        }
    }
    if !any {
        return;
    }
    let mut order = Vec::with_capacity(n);
    for j in 0..n {
        if !moved[j] {
            order.push(KernelNodeId(j as u32));
        }
        order.append(&mut after[j]);
    }
    apply(g, &order);
}

fn is_free(kernel: &str) -> bool {
    matches!(kernel, "FreeMemory" | "FreeMemoryHoldAddr")
}

/// Moves node `p` and every node that depends on it after all the others, each group in
/// its old order. When `g` was sorted before edges into `p` from later nodes were added
/// (a pass that appends nodes for a sink to read), that is the order [`sort`] would give
/// it (the lowest id first among ready nodes), made without building the order by
/// Kahn's algorithm: every node that does not wait for `p` is ready in its turn, and `p`
/// and those that wait for it are ready only after the last node `p` now reads.
pub fn defer(g: &mut KernelGraph, p: usize) {
    let n = g.nodes.len();
    if p >= n {
        return;
    }
    let mut waits = vec![false; n];
    waits[p] = true;
    let mut any_after = false;
    for i in p + 1..n {
        waits[i] = g.predecessors(i).any(|q| waits[q]);
        any_after |= !waits[i];
    }
    if !any_after {
        return;
    }
    let order: Vec<KernelNodeId> = (0..n)
        .filter(|&i| !waits[i])
        .chain((p..n).filter(|&i| waits[i]))
        .map(|i| KernelNodeId(i as u32))
        .collect();
    apply(g, &order);
}

/// The topological order of `g`'s nodes (old ids), ties broken by old id.
pub fn order(g: &KernelGraph) -> Result<Vec<KernelNodeId>, CycleError> {
    g.topological_order().map_err(|left| CycleError {
        graph: g.name.clone(),
        count: left.len(),
        names: left
            .iter()
            .take(5)
            .map(|id| g.node(*id).name.to_string())
            .collect(),
    })
}

/// Reorders `g`'s nodes to `order` (a permutation of old ids) and rewrites every id that
/// refers to them: inputs, control inputs and Free-Launch relations.
pub fn apply(g: &mut KernelGraph, order: &[KernelNodeId]) {
    debug_assert_eq!(order.len(), g.nodes.len());
    let mut new_id = vec![0u32; order.len()];
    for (new, old) in order.iter().enumerate() {
        new_id[old.index()] = new as u32;
    }
    // The nodes are permuted in place, cycle by cycle (each swap puts one node where it
    // belongs): a graph of 30,000 nodes is not copied into a second list.
    let mut dest = new_id.clone();
    for i in 0..dest.len() {
        while dest[i] as usize != i {
            let j = dest[i] as usize;
            g.nodes.swap(i, j);
            dest.swap(i, j);
        }
    }
    super::renumber(g, &new_id);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{KernelNode, ValueRef};

    fn node(name: &str, inputs: &[u32], control: &[u32]) -> KernelNode {
        crate::lower::passes::test_node(name, "InferShape", inputs, control)
    }

    fn names(g: &KernelGraph) -> Vec<&str> {
        g.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    #[test]
    fn sorts_and_remaps_every_reference() {
        // Emitted out of order: c reads b reads a; d is ordered after c by a control edge.
        let mut g = KernelGraph::new("Main");
        g.add(node("c", &[2], &[])); // 0
        g.add(node("d", &[], &[0])); // 1
        g.add(node("b", &[3], &[])); // 2
        g.add(node("a", &[], &[])); // 3
        g.free_launch.push((KernelNodeId(1), KernelNodeId(2)));
        sort(&mut g).unwrap();
        assert_eq!(names(&g), ["a", "b", "c", "d"]);
        assert_eq!(g.nodes[1].inputs[0].node, KernelNodeId(0));
        assert_eq!(g.nodes[2].inputs[0].node, KernelNodeId(1));
        assert_eq!(g.nodes[3].control_inputs[..], [KernelNodeId(2)]);
        assert_eq!(g.free_launch, vec![(KernelNodeId(3), KernelNodeId(1))]);
    }

    /// `defer` gives the order the sort gives a graph whose sink was given inputs from
    /// nodes appended after it, including nodes that wait for the sink and ones that do
    /// not, and renumbers every reference.
    #[test]
    fn defer_is_the_sort_of_a_sink_that_reads_appended_nodes() {
        let build = || {
            let mut g = KernelGraph::new("Init");
            g.add(node("a", &[], &[])); // 0
            g.add(node("sink", &[0], &[])); // 1
            g.add(node("b", &[0], &[])); // 2
            g.add(node("after_sink", &[], &[1])); // 3
            g.add(node("c", &[2], &[])); // 4
            g.add(node("after_that", &[3, 4], &[])); // 5
            g.add(node("new1", &[0], &[])); // 6
            g.add(node("new2", &[6], &[])); // 7
            g.nodes[1].inputs.push(ValueRef {
                node: KernelNodeId(7),
                output: 0,
            });
            g.nodes[1].control_inputs.push(KernelNodeId(6));
            g.free_launch.push((KernelNodeId(3), KernelNodeId(4)));
            g
        };
        let mut sorted = build();
        sort(&mut sorted).unwrap();
        let mut deferred = build();
        defer(&mut deferred, 1);
        assert!(deferred.is_sorted());
        assert_eq!(deferred, sorted);
        assert_eq!(
            names(&deferred),
            [
                "a",
                "b",
                "c",
                "new1",
                "new2",
                "sink",
                "after_sink",
                "after_that"
            ]
        );
        // A sink already last, with nothing after it, stays where it is.
        let mut g = KernelGraph::new("DeInit");
        g.add(node("a", &[], &[]));
        g.add(node("sink", &[0], &[]));
        let before = g.clone();
        defer(&mut g, 1);
        assert_eq!(g, before);
    }

    #[test]
    fn ties_keep_emission_order_and_subgraphs_are_sorted() {
        let mut sub = KernelGraph::new("Main/if.then");
        sub.add(node("y", &[1], &[]));
        sub.add(node("x", &[], &[]));
        let mut g = KernelGraph::new("Main");
        g.add(node("p", &[], &[]));
        let mut q = node("q", &[], &[]);
        q.subgraphs.push(sub);
        g.add(q);
        g.add(node("r", &[], &[]));
        sort(&mut g).unwrap();
        assert_eq!(names(&g), ["p", "q", "r"]);
        assert_eq!(names(&g.nodes[1].subgraphs[0]), ["x", "y"]);
    }

    #[test]
    fn each_free_goes_right_after_what_it_waits_for() {
        use crate::lower::passes::test_node;
        // A chain as lowering emits it: allocations and launches, then the level's Frees.
        let mut g = KernelGraph::new("Main");
        g.add(test_node("alloc1", "AllocMemHbm", &[], &[])); // 0
        g.add(test_node("launch1", "LaunchKernelWithHandle", &[0], &[])); // 1
        g.add(test_node("alloc2", "AllocMemHbm", &[], &[])); // 2
        g.add(test_node(
            "launch2",
            "LaunchKernelWithHandle",
            &[0, 2],
            &[1],
        )); // 3
        g.add(test_node("alloc3", "AllocMemHbm", &[], &[])); // 4
        g.add(test_node(
            "launch3",
            "LaunchKernelWithHandle",
            &[2, 4],
            &[3],
        )); // 5
        g.add(test_node("out", "NetOutput", &[4], &[5])); // 6
        g.add(test_node("free1", "FreeMemory", &[0], &[1, 3])); // 7
        g.add(test_node("free2", "FreeMemory", &[2], &[3, 5])); // 8
        // A Free something waits for keeps its place.
        g.add(test_node("free3", "FreeMemory", &[4], &[6])); // 9
        g.add(test_node("after", "NetOutput", &[], &[9])); // 10
        g.free_launch.push((KernelNodeId(8), KernelNodeId(5)));
        sort(&mut g).unwrap();
        assert_eq!(
            names(&g),
            [
                "alloc1", "launch1", "alloc2", "launch2", "free1", "alloc3", "launch3", "free2",
                "out", "free3", "after"
            ]
        );
        assert_eq!(
            g.nodes[4].control_inputs[..],
            [KernelNodeId(1), KernelNodeId(3)]
        );
        assert_eq!(g.nodes[7].inputs[0].node, KernelNodeId(2));
        assert_eq!(g.nodes[10].control_inputs[..], [KernelNodeId(9)]);
        assert_eq!(g.free_launch, vec![(KernelNodeId(7), KernelNodeId(6))]);
        assert!(g.is_sorted());
    }

    #[test]
    fn cycles_are_errors_naming_nodes() {
        let mut g = KernelGraph::new("Main");
        g.add(node("a", &[1], &[]));
        g.add(node("b", &[0], &[]));
        g.add(node("c", &[], &[]));
        let e = sort(&mut g).unwrap_err();
        assert_eq!(e.count, 2);
        assert_eq!(e.names, ["a", "b"]);
        assert!(e.to_string().contains("graph \"Main\""));
    }
}
