//! Topological sort: renumbers an ExecGraph's nodes so that every node comes after the
//! nodes it reads from or is ordered after.
//!
//! Lowering emits nodes in whatever order its converters find convenient; every dependency
//! is an edge, so the emission order carries no meaning. The sequential engine runs nodes
//! in array order, so the array order must be a topological order. Among nodes that are
//! ready at the same time the one emitted first goes first, which keeps the result
//! deterministic and close to the compute graph's order. Subgraphs are sorted too.

use crate::exec::{ExecGraph, ExecNodeId};

/// A cycle was found; the names are some of the nodes on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("graph {graph:?}: edges form a cycle through {count} node(s), among them {names:?}")]
pub struct CycleError {
    pub graph: String,
    pub count: usize,
    pub names: Vec<String>,
}

/// Sorts `g` and every subgraph below it in place.
pub fn sort(g: &mut ExecGraph) -> Result<(), CycleError> {
    for n in &mut g.nodes {
        for s in &mut n.subgraphs {
            sort(s)?;
        }
    }
    // Lowering emits every node after what it depends on, so the array is usually sorted
    // already; then the sort (lowest id first among ready nodes) is the identity, and a
    // scan of the edges proves it without building an order or moving a node.
    if g.is_sorted() {
        return Ok(());
    }
    let order = order(g)?;
    apply(g, &order);
    Ok(())
}

/// The topological order of `g`'s nodes (old ids), ties broken by old id.
pub fn order(g: &ExecGraph) -> Result<Vec<ExecNodeId>, CycleError> {
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
pub fn apply(g: &mut ExecGraph, order: &[ExecNodeId]) {
    debug_assert_eq!(order.len(), g.nodes.len());
    let mut new_id = vec![0u32; order.len()];
    for (new, old) in order.iter().enumerate() {
        new_id[old.index()] = new as u32;
    }
    let remap = |id: ExecNodeId| ExecNodeId(new_id[id.index()]);
    let mut old: Vec<Option<crate::exec::ExecNode>> =
        std::mem::take(&mut g.nodes).into_iter().map(Some).collect();
    g.nodes = order
        .iter()
        .filter_map(|id| old[id.index()].take())
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::ExecNode;

    fn node(name: &str, inputs: &[u32], control: &[u32]) -> ExecNode {
        crate::lower::passes::test_node(name, "InferShape", inputs, control)
    }

    fn names(g: &ExecGraph) -> Vec<&str> {
        g.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    #[test]
    fn sorts_and_remaps_every_reference() {
        // Emitted out of order: c reads b reads a; d is ordered after c by a control edge.
        let mut g = ExecGraph::new("Main");
        g.add(node("c", &[2], &[])); // 0
        g.add(node("d", &[], &[0])); // 1
        g.add(node("b", &[3], &[])); // 2
        g.add(node("a", &[], &[])); // 3
        g.free_launch.push((ExecNodeId(1), ExecNodeId(2)));
        sort(&mut g).unwrap();
        assert_eq!(names(&g), ["a", "b", "c", "d"]);
        assert_eq!(g.nodes[1].inputs[0].node, ExecNodeId(0));
        assert_eq!(g.nodes[2].inputs[0].node, ExecNodeId(1));
        assert_eq!(g.nodes[3].control_inputs[..], [ExecNodeId(2)]);
        assert_eq!(g.free_launch, vec![(ExecNodeId(3), ExecNodeId(1))]);
    }

    #[test]
    fn ties_keep_emission_order_and_subgraphs_are_sorted() {
        let mut sub = ExecGraph::new("Main/if.then");
        sub.add(node("y", &[1], &[]));
        sub.add(node("x", &[], &[]));
        let mut g = ExecGraph::new("Main");
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
    fn cycles_are_errors_naming_nodes() {
        let mut g = ExecGraph::new("Main");
        g.add(node("a", &[1], &[]));
        g.add(node("b", &[0], &[]));
        g.add(node("c", &[], &[]));
        let e = sort(&mut g).unwrap_err();
        assert_eq!(e.count, 2);
        assert_eq!(e.names, ["a", "b"]);
        assert!(e.to_string().contains("graph \"Main\""));
    }
}
