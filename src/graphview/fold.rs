//! What a view of a large graph keeps: the neighbourhood of a node, and folding runs of
//! nodes into summary nodes so that a view stays within a node budget.
//!
//! Works on a [`Flat`] graph (nodes numbered in view order, each with the graph it is drawn
//! in, and directed edges between them), so it knows nothing of ComputeGraphs or
//! ExecuteGraphs: a caller (`om::filter`, `exec::view::filter`) flattens its graph,
//! [`super::focus`] decides what to keep with these functions, and the caller rebuilds a
//! graph of its own type from the answer.
//!
//! Deterministic: the answers depend on node order and edges only, never on hash order.

use std::collections::{BTreeMap, BTreeSet};

/// A model's graphs flattened for selection: every node of every graph numbered in one
/// sequence, graph by graph.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flat {
    /// The graph each node is drawn in; each graph's nodes are contiguous.
    pub graph: Vec<u32>,
    /// Directed edges between nodes.
    pub edges: Vec<Edge>,
    /// The graphs, in the order their nodes were added.
    pub graphs: Vec<FlatGraph>,
    /// The graphs each node owns.
    pub owned: Vec<Vec<u32>>,
    /// The nodes that bring values into their graph (a model's or an owner's inputs), as
    /// opposed to constants: what depends on them stays in place in [`fold_order`].
    pub input: Vec<bool>,
}

/// One graph of a [`Flat`] graph.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlatGraph {
    /// The number of its first node.
    pub offset: usize,
    pub len: usize,
    /// The node that owns it, `None` for a top-level graph.
    pub owner: Option<usize>,
    /// The names it answers to; the first names it in messages.
    pub names: Vec<String>,
}

/// One directed edge of a [`Flat`] graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub from: u32,
    pub to: u32,
    /// A link from a node to a node without inputs of a subgraph it owns, rather than a
    /// data or control edge: it steers neighbourhoods into subgraphs, and is drawn as the
    /// subgraph's cluster hanging off its owner rather than as an edge.
    pub link: bool,
}

impl Flat {
    pub fn len(&self) -> usize {
        self.graph.len()
    }

    pub fn is_empty(&self) -> bool {
        self.graph.is_empty()
    }

    /// Appends a graph of `len` nodes, owned by node `owner` (`None`: a top-level graph)
    /// and answering to `names`; returns its number. Its nodes are numbered from the
    /// current [`Flat::len`].
    pub fn add_graph(&mut self, names: Vec<String>, owner: Option<usize>, len: usize) -> u32 {
        let g = self.graphs.len() as u32;
        self.graphs.push(FlatGraph {
            offset: self.len(),
            len,
            owner,
            names,
        });
        if let Some(o) = owner {
            self.owned[o].push(g);
        }
        self.graph.extend(std::iter::repeat_n(g, len));
        self.owned.extend(std::iter::repeat_n(Vec::new(), len));
        self.input.extend(std::iter::repeat_n(false, len));
        g
    }

    /// Adds a data or control edge (`link: false`) or a link into a subgraph.
    pub fn add_edge(&mut self, from: usize, to: usize, link: bool) {
        self.edges.push(Edge {
            from: from as u32,
            to: to as u32,
            link,
        });
    }

    /// The graph node `i` is in.
    pub fn graph_of(&self, i: usize) -> &FlatGraph {
        &self.graphs[self.graph[i] as usize]
    }

    /// Undirected adjacency lists.
    fn adjacency(&self) -> Vec<Vec<u32>> {
        let mut adj = vec![Vec::new(); self.len()];
        for e in &self.edges {
            adj[e.from as usize].push(e.to);
            adj[e.to as usize].push(e.from);
        }
        adj
    }
}

/// Consumers a node may feed before it counts as a hub: a shared constant, or the stream
/// and allocator every launch of an ExecuteGraph takes. The DOT views name a hub again
/// beside each consumer instead of drawing its edges; a neighbourhood reaches a hub but
/// does not go on through it.
pub const HUB_FANOUT: usize = 8;

/// Which of `len` nodes feed more than [`HUB_FANOUT`] distinct others along `edges`
/// (producer, consumer); an edge from a node out of range is left out, and repeated edges
/// count once. The DOT views pass their graph's data and control edges.
pub fn hubs_of(len: usize, edges: impl IntoIterator<Item = (usize, usize)>) -> Vec<bool> {
    let mut pairs: Vec<(usize, usize)> = edges.into_iter().filter(|&(s, _)| s < len).collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut fanout = vec![0usize; len];
    for (from, _) in pairs {
        fanout[from] += 1;
    }
    fanout.into_iter().map(|f| f > HUB_FANOUT).collect()
}

/// [`hubs_of`] a flat graph over its data and control edges (links into subgraphs do not
/// count).
pub fn hubs(flat: &Flat) -> Vec<bool> {
    let edges = flat.edges.iter().filter(|e| !e.link);
    hubs_of(flat.len(), edges.map(|e| (e.from as usize, e.to as usize)))
}

/// The nodes within `depth` edges of `center`, following edges either way and stepping
/// only on nodes for which `allowed` holds (`center` is always in). A hub (see [`hubs`])
/// other than `center` is reached but not walked through: two edges from any consumer of
/// a shared constant would otherwise be every other consumer of it.
pub fn neighbourhood(flat: &Flat, allowed: &[bool], center: usize, depth: usize) -> Vec<bool> {
    let adj = flat.adjacency();
    let hub = hubs(flat);
    let mut seen = vec![false; flat.len()];
    seen[center] = true;
    let mut frontier = vec![center as u32];
    for _ in 0..depth {
        let mut next = Vec::new();
        for &u in &frontier {
            for &v in &adj[u as usize] {
                if allowed[v as usize] && !seen[v as usize] {
                    seen[v as usize] = true;
                    if !hub[v as usize] {
                        next.push(v);
                    }
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    seen
}

/// What a node of the flat graph became in the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rep {
    /// Not shown (outside the scope or the neighbourhood).
    Dropped,
    /// Shown as itself.
    Kept,
    /// Shown as part of summary node `k` (an index into [`Folding::folds`]).
    Folded(u32),
}

/// A node of the view: a kept node of the flat graph, or a summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    Node(u32),
    Fold(u32),
}

/// The answer of [`fold`]: what each node became, and the members of each summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folding {
    pub rep: Vec<Rep>,
    /// Each summary's members: shown nodes of one graph, consecutive in [`fold_order`].
    pub folds: Vec<Vec<u32>>,
}

impl Folding {
    /// The view node that shows node `i`, `None` when it is dropped.
    pub fn key(&self, i: usize) -> Option<Key> {
        match self.rep[i] {
            Rep::Dropped => None,
            Rep::Kept => Some(Key::Node(i as u32)),
            Rep::Folded(k) => Some(Key::Fold(k)),
        }
    }

    /// Nodes of the view: kept nodes and summaries.
    pub fn view_nodes(&self) -> usize {
        self.rep.iter().filter(|r| **r == Rep::Kept).count() + self.folds.len()
    }
}

/// The order runs are taken in: node order, except that what a node computes from
/// constants alone (no [`Flat::input`] upstream: a weight, the shape a ConstantOfShape is
/// given, a resource handle) moves to just before its first consumer, so that it folds
/// with the node it feeds rather than with the other constants.
pub fn fold_order(flat: &Flat) -> Vec<u32> {
    let n = flat.len();
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut first_consumer = vec![u32::MAX; n];
    for e in flat.edges.iter().filter(|e| !e.link) {
        preds[e.to as usize].push(e.from);
        let c = &mut first_consumer[e.from as usize];
        *c = (*c).min(e.to);
    }
    let mut constant = vec![false; n];
    for i in 0..n {
        let input = flat.input.get(i).copied().unwrap_or(false);
        constant[i] = !input
            && preds[i]
                .iter()
                .all(|&p| (p as usize) < i && constant[p as usize]);
    }
    let moves =
        |i: usize| constant[i] && first_consumer[i] != u32::MAX && first_consumer[i] as usize > i;
    let mut before: Vec<Vec<u32>> = vec![Vec::new(); n];
    for i in (0..n).filter(|&i| moves(i)) {
        before[first_consumer[i] as usize].push(i as u32);
    }
    // Each node after what moves before it, depth first: a constant's own constants go
    // before it. An explicit stack, for chains of any length.
    let mut order = Vec::with_capacity(n);
    let mut stack: Vec<(u32, usize)> = Vec::new();
    for i in (0..n).filter(|&i| !moves(i)) {
        stack.push((i as u32, 0));
        while let Some((v, k)) = stack.last_mut() {
            match before[*v as usize].get(*k) {
                Some(&u) => {
                    *k += 1;
                    stack.push((u, 0));
                }
                None => {
                    order.push(*v);
                    stack.pop();
                }
            }
        }
    }
    order
}

/// Folds the `shown` nodes so that at most `budget` view nodes remain: runs of shown
/// nodes of one graph, consecutive in [`fold_order`], are cut into pieces of about equal
/// length, as many as the budget allows, and a piece of more than one node becomes a
/// summary. `pinned` nodes stay themselves and end runs, unless keeping them leaves no
/// room for the runs between them. Each graph needs at least one view node, so a view of
/// more graphs than `budget` ends up above it.
pub fn fold(flat: &Flat, shown: &[bool], pinned: &[bool], budget: usize) -> Folding {
    let mut rep: Vec<Rep> = shown
        .iter()
        .map(|&s| if s { Rep::Kept } else { Rep::Dropped })
        .collect();
    let count = shown.iter().filter(|&&s| s).count();
    let mut folds = Vec::new();
    if count <= budget {
        return Folding { rep, folds };
    }
    let order = fold_order(flat);
    let mut runs = runs_in(&flat.graph, &order, shown, |i| pinned[i]);
    let mut pins = count - runs.iter().map(Vec::len).sum::<usize>();
    if pins + runs.len() > budget {
        runs = runs_in(&flat.graph, &order, shown, |_| false);
        pins = 0;
    }
    let room = budget.saturating_sub(pins).max(runs.len());
    let lengths: Vec<usize> = runs.iter().map(Vec::len).collect();
    for (run, pieces) in runs.iter().zip(pieces(&lengths, room)) {
        for p in 0..pieces {
            let piece = &run[p * run.len() / pieces..(p + 1) * run.len() / pieces];
            if piece.len() > 1 {
                for &m in piece {
                    rep[m as usize] = Rep::Folded(folds.len() as u32);
                }
                folds.push(piece.to_vec());
            }
        }
    }
    Folding { rep, folds }
}

/// How many pieces to cut runs of these lengths into, `room` pieces in all (at least one
/// per run, at most one per node): one each, and the rest shared out in proportion to
/// length, largest remainders first.
fn pieces(lengths: &[usize], room: usize) -> Vec<usize> {
    let extra_room = (room.saturating_sub(lengths.len()) as u128)
        .min(lengths.iter().map(|&l| l as u128 - 1).sum());
    let extra_len: u128 = lengths.iter().map(|&l| l as u128 - 1).sum();
    if extra_len == 0 {
        return vec![1; lengths.len()];
    }
    let share = |l: usize| extra_room * (l as u128 - 1);
    let mut out: Vec<usize> = lengths
        .iter()
        .map(|&l| 1 + (share(l) / extra_len) as usize)
        .collect();
    let given: u128 = out.iter().map(|&p| p as u128 - 1).sum();
    let mut by_remainder: Vec<usize> = (0..lengths.len()).collect();
    by_remainder.sort_by_key(|&i| std::cmp::Reverse(share(lengths[i]) % extra_len));
    for &i in by_remainder.iter().take((extra_room - given) as usize) {
        out[i] += 1;
    }
    out
}

/// Maximal runs of shown, unpinned nodes of one graph, in `order`; pinned nodes end a
/// run, dropped ones do not.
fn runs_in(
    graph: &[u32],
    order: &[u32],
    shown: &[bool],
    pinned: impl Fn(usize) -> bool,
) -> Vec<Vec<u32>> {
    let mut runs: Vec<Vec<u32>> = Vec::new();
    let mut open = false;
    for i in order.iter().map(|&i| i as usize).filter(|&i| shown[i]) {
        if pinned(i) {
            open = false;
            continue;
        }
        match runs.last_mut() {
            Some(run) if open && graph[run[0] as usize] == graph[i] => run.push(i as u32),
            _ => runs.push(vec![i as u32]),
        }
        open = true;
    }
    runs
}

/// For each view node with edges to dropped nodes, how many dropped nodes feed it
/// (`into`) and how many it feeds (`out_of`). A link counts only when the subgraph it
/// leads into shows nothing at all (otherwise the subgraph's own cluster is in view).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cuts {
    pub into: BTreeMap<Key, usize>,
    pub out_of: BTreeMap<Key, usize>,
}

/// The cut edges of a folding: see [`Cuts`].
pub fn cuts(flat: &Flat, folding: &Folding) -> Cuts {
    let graphs = flat
        .graph
        .iter()
        .map(|&g| g as usize + 1)
        .max()
        .unwrap_or(0);
    let mut graph_shown = vec![false; graphs];
    for (i, &g) in flat.graph.iter().enumerate() {
        graph_shown[g as usize] |= folding.rep[i] != Rep::Dropped;
    }
    let mut into = BTreeSet::new();
    let mut out_of = BTreeSet::new();
    for e in &flat.edges {
        let (from, to) = (e.from as usize, e.to as usize);
        match (folding.key(from), folding.key(to)) {
            (None, Some(k)) if !e.link => {
                into.insert((k, e.from));
            }
            (Some(k), None) if !e.link || !graph_shown[flat.graph[to] as usize] => {
                out_of.insert((k, e.to));
            }
            _ => {}
        }
    }
    let count = |set: BTreeSet<(Key, u32)>| {
        let mut m = BTreeMap::new();
        for (k, _) in set {
            *m.entry(k).or_insert(0) += 1;
        }
        m
    };
    Cuts {
        into: count(into),
        out_of: count(out_of),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// a -> b -> c -> d -> e in graph 0, with b -> f and f -> e as well; g alone.
    fn sample() -> Flat {
        let e = |from, to| Edge {
            from,
            to,
            link: false,
        };
        Flat {
            graph: vec![0; 7],
            edges: vec![e(0, 1), e(1, 2), e(2, 3), e(3, 4), e(1, 5), e(5, 4)],
            ..Default::default()
        }
    }

    fn set(v: &[bool]) -> Vec<usize> {
        (0..v.len()).filter(|&i| v[i]).collect()
    }

    #[test]
    fn neighbourhood_follows_edges_both_ways_to_the_depth() {
        let f = sample();
        let all = vec![true; f.len()];
        assert_eq!(set(&neighbourhood(&f, &all, 2, 0)), [2]);
        assert_eq!(set(&neighbourhood(&f, &all, 2, 1)), [1, 2, 3]);
        assert_eq!(set(&neighbourhood(&f, &all, 2, 2)), [0, 1, 2, 3, 4, 5]);
        assert_eq!(set(&neighbourhood(&f, &all, 6, 5)), [6]);
        // Not allowed: not entered, and not passed through.
        let mut allowed = all.clone();
        allowed[1] = false;
        assert_eq!(set(&neighbourhood(&f, &allowed, 2, 3)), [2, 3, 4, 5]);
    }

    /// A constant `c` (node 0) feeding a chain of adds (nodes 1..=n, each also reading
    /// the one before it).
    fn chain_with_shared_constant(n: u32) -> Flat {
        let e = |from, to| Edge {
            from,
            to,
            link: false,
        };
        let mut edges: Vec<Edge> = (1..=n).map(|i| e(0, i)).collect();
        edges.extend((2..=n).map(|i| e(i - 1, i)));
        Flat {
            graph: vec![0; n as usize + 1],
            edges,
            ..Default::default()
        }
    }

    #[test]
    fn a_neighbourhood_reaches_a_hub_but_does_not_walk_through_it() {
        let f = chain_with_shared_constant(20);
        assert_eq!(set(&hubs(&f)), [0], "only the constant feeds more than 8");
        let all = vec![true; f.len()];
        // From add 10: the constant and adds 8..=12, not the constant's other consumers.
        assert_eq!(set(&neighbourhood(&f, &all, 10, 2)), [0, 8, 9, 10, 11, 12]);
        // From the hub itself: its consumers, and theirs.
        assert_eq!(
            set(&neighbourhood(&f, &all, 0, 1)),
            (0..=20).collect::<Vec<_>>()
        );
        // Eight consumers are not a hub: the walk goes through.
        let small = chain_with_shared_constant(8);
        assert!(hubs(&small).iter().all(|&h| !h));
        assert_eq!(
            set(&neighbourhood(&small, &vec![true; small.len()], 4, 2)),
            (0..=8).collect::<Vec<_>>()
        );
    }

    /// Nodes in the given graphs, without edges.
    fn graphs(graph: &[u32]) -> Flat {
        Flat {
            graph: graph.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn fold_keeps_everything_within_the_budget() {
        let f = fold(&graphs(&[0, 0, 0]), &[true; 3], &[false; 3], 3);
        assert_eq!(f.rep, [Rep::Kept; 3]);
        assert!(f.folds.is_empty());
    }

    /// Checks the invariants of a folding and returns the view node count.
    fn check(graph: &[u32], shown: &[bool], f: &Folding) -> usize {
        let mut seen = vec![0; graph.len()];
        for (k, members) in f.folds.iter().enumerate() {
            assert!(members.len() > 1, "a summary stands for several nodes");
            for &m in members {
                seen[m as usize] += 1;
                assert_eq!(f.rep[m as usize], Rep::Folded(k as u32));
                assert_eq!(graph[m as usize], graph[members[0] as usize]);
            }
        }
        for i in 0..graph.len() {
            match f.rep[i] {
                Rep::Kept => seen[i] += 1,
                Rep::Dropped => assert!(!shown[i]),
                Rep::Folded(_) => {}
            }
            assert_eq!(seen[i], usize::from(shown[i]), "node {i} accounted once");
        }
        f.view_nodes()
    }

    #[test]
    fn fold_cuts_runs_within_the_budget_and_accounts_every_node() {
        // Two graphs of 60 and 40 nodes; node 10 pinned; 90 and 91 not shown.
        let graph: Vec<u32> = (0..100).map(|i| u32::from(i >= 60)).collect();
        let mut shown = vec![true; 100];
        shown[90] = false;
        shown[91] = false;
        let mut pinned = vec![false; 100];
        pinned[10] = true;
        for budget in [3, 4, 7, 10, 25, 50, 97] {
            let f = fold(&graphs(&graph), &shown, &pinned, budget);
            let n = check(&graph, &shown, &f);
            assert!(n <= budget, "budget {budget}: {n} view nodes");
            if budget >= 4 {
                assert_eq!(f.rep[10], Rep::Kept, "budget {budget}: the pin holds");
            }
        }
        // Runs: 0..10 and 11..60 in graph 0, 60..100 without 90, 91 in graph 1.
        let f = fold(&graphs(&graph), &shown, &pinned, 10);
        assert_eq!(f.view_nodes(), 10);
        // Room for 9 pieces besides the pin, shared 2, 4 and 3 by length (the largest
        // remainder taking the odd one).
        assert_eq!(f.folds[0], (0..5).collect::<Vec<u32>>());
        assert_eq!(f.folds[1], (5..10).collect::<Vec<u32>>());
        assert_eq!(f.folds.len(), 9);
        assert!(f.folds.iter().all(|m| !m.contains(&10)));
        assert_eq!(f.folds.last().unwrap().last(), Some(&99));
    }

    #[test]
    fn fold_gives_up_pins_before_the_budget() {
        // Every other node pinned: keeping the pins leaves no room.
        let graph = vec![0; 20];
        let pinned: Vec<bool> = (0..20).map(|i| i % 2 == 0).collect();
        let f = fold(&graphs(&graph), &[true; 20], &pinned, 4);
        assert_eq!(check(&graph, &[true; 20], &f), 4);
        // More graphs than the budget: one view node per graph.
        let graph: Vec<u32> = (0..12).map(|i| i / 2).collect();
        let f = fold(&graphs(&graph), &[true; 12], &[false; 12], 3);
        assert_eq!(check(&graph, &[true; 12], &f), 6);
    }

    #[test]
    fn constants_fold_with_their_first_consumer() {
        // Input 0 feeds 3 and 4; constant 1 feeds constant 2, which feeds 4 (and 5);
        // 3 feeds 4; 6 feeds nothing.
        let e = |from, to| Edge {
            from,
            to,
            link: false,
        };
        let mut f = Flat {
            graph: vec![0; 7],
            edges: vec![e(0, 3), e(0, 4), e(1, 2), e(2, 4), e(2, 5), e(3, 4)],
            ..Default::default()
        };
        f.input = vec![true, false, false, false, false, false, false];
        assert_eq!(fold_order(&f), [0, 3, 1, 2, 4, 5, 6]);
        let folding = fold(&f, &[true; 7], &[false; 7], 3);
        assert_eq!(folding.folds, [vec![0, 3], vec![1, 2], vec![4, 5, 6]]);
        // Without inputs, 0 moves too, and 3 and 4, which depend on nothing else: 4 has
        // no consumer and stays, the rest go before it in node order, each after its own.
        f.input = vec![false; 7];
        assert_eq!(fold_order(&f), [1, 2, 0, 3, 4, 5, 6]);
        // A producer further down (6 feeds 3) keeps its consumer in place.
        f.edges.push(e(6, 3));
        assert_eq!(fold_order(&f), [0, 3, 1, 2, 4, 5, 6]);
    }

    #[test]
    fn cuts_count_dropped_neighbours_per_view_node() {
        let mut f = sample();
        // A subgraph (graph 1) of two nodes owned by node 6, linked to its source 7.
        f.graph.extend([1, 1]);
        f.edges.push(Edge {
            from: 6,
            to: 7,
            link: true,
        });
        f.edges.push(Edge {
            from: 7,
            to: 8,
            link: false,
        });
        let mut shown = vec![false; 9];
        for i in [1, 2, 3, 6] {
            shown[i] = true;
        }
        let mut folding = fold(&f, &shown, &[false; 9], 9);
        folding.rep[2] = Rep::Folded(0);
        folding.rep[3] = Rep::Folded(0);
        folding.folds = vec![vec![2, 3]];
        let c = cuts(&f, &folding);
        assert_eq!(c.into, BTreeMap::from([(Key::Node(1), 1)]));
        assert_eq!(
            c.out_of,
            BTreeMap::from([(Key::Node(1), 1), (Key::Fold(0), 1), (Key::Node(6), 1)])
        );
        // With the subgraph in view, its link is no cut.
        folding.rep[8] = Rep::Kept;
        assert!(!cuts(&f, &folding).out_of.contains_key(&Key::Node(6)));
    }
}
