//! Views of large ComputeModels: one (sub)graph, the subgraphs of one node, the
//! neighbourhood of a node, and folding into summary nodes under a node budget.
//!
//! [`filter`] returns a smaller [`ComputeModel`] that the views ([`super::dot`],
//! [`super::json`] through [`super::ir`]) render as they render any model. What was left
//! out shows in it as nodes of two op types of rt2's own, never GE's:
//! - [`FOLDED_OP`], a summary standing for consecutive nodes of one graph, with attributes
//!   `nodes` (how many), `op_types` and `op_type_counts` (what they are, most frequent
//!   first) and `members` (their names, in order); it takes over the edges and the
//!   subgraphs of its members.
//! - [`CUT_OP`], a marker that the graph goes on: it feeds a node whose producers were left
//!   out, or is fed by a node whose consumers were, with attribute `nodes` (how many).
//!
//! This file flattens the model for [`crate::graphview::focus`], which decides what to
//! show, and builds the result from its plan. Must not: change the model it is given, or
//! depend on hash order.

use std::collections::{BTreeMap, BTreeSet};

use crate::graphview::focus::{self, Item, Plan};
use crate::graphview::fold::{Flat, Key};
use crate::om::NodeId;
use crate::om::graph::{
    AttrValue, ComputeGraph, ComputeModel, ComputeNode, ListAttr, OutPort, is_data_type,
};

pub use crate::graphview::focus::{FilterError, ViewFilter};

/// The op type of a summary node.
pub const FOLDED_OP: &str = "rt2.Folded";
/// The op type of a marker for left-out producers or consumers.
pub const CUT_OP: &str = "rt2.Cut";

/// The part of `model` that `f` shows, with summaries and cut markers where nodes were
/// left out (see the module doc). An empty filter gives the model unchanged.
pub fn filter(model: &ComputeModel, f: &ViewFilter) -> Result<ComputeModel, FilterError> {
    let mut layout = Layout::default();
    for g in std::iter::once(&model.root).chain(&model.detached) {
        layout.add(g, None);
    }
    let plan = focus::plan(&layout.flat, &|i, name| layout.nodes[i].name == name, f)?;
    let rebuild = Rebuild {
        layout: &layout,
        plan: &plan,
    };
    let mut tops = (0..layout.graphs.len())
        .filter(|&g| layout.flat.graphs[g].owner.is_none() && plan.visible(&layout.flat, g))
        .map(|g| rebuild.graph(g));
    let Some(root) = tops.next() else {
        return Ok(model.clone());
    };
    Ok(ComputeModel {
        name: model.name.clone(),
        version: model.version,
        custom_version: model.custom_version.clone(),
        attrs: model.attrs.clone(),
        attr_groups: model.attr_groups.clone(),
        root,
        detached: tops.collect(),
    })
}

/// The model's graphs flattened, numbered depth first (root, then each node's subgraphs
/// before the next node's), with the graphs and nodes behind the numbers.
#[derive(Default)]
struct Layout<'a> {
    flat: Flat,
    graphs: Vec<&'a ComputeGraph>,
    nodes: Vec<&'a ComputeNode>,
}

impl<'a> Layout<'a> {
    fn add(&mut self, g: &'a ComputeGraph, owner: Option<usize>) {
        let offset = self.flat.len();
        self.flat
            .add_graph(vec![g.name.clone()], owner, g.nodes.len());
        self.graphs.push(g);
        self.nodes.extend(&g.nodes);
        for (i, n) in g.nodes.iter().enumerate() {
            self.flat.input[offset + i] = is_data_type(&n.op_type);
            let sources = n.inputs.iter().flatten().map(|p| p.node);
            for s in sources.chain(n.control_inputs.iter().copied()) {
                if s.index() < g.nodes.len() {
                    self.flat.add_edge(offset + s.index(), offset + i, false);
                }
            }
        }
        for (i, n) in g.nodes.iter().enumerate() {
            for sub in &n.subgraphs {
                let at = self.flat.len();
                self.add(sub, Some(offset + i));
                for (j, m) in sub.nodes.iter().enumerate() {
                    if m.inputs.iter().all(Option::is_none) && m.control_inputs.is_empty() {
                        self.flat.add_edge(offset + i, at + j, true);
                    }
                }
            }
        }
    }
}

/// Builds the filtered graphs from a plan.
struct Rebuild<'a> {
    layout: &'a Layout<'a>,
    plan: &'a Plan,
}

impl Rebuild<'_> {
    fn key(&self, i: usize) -> Option<Key> {
        self.plan.folding.key(i)
    }

    fn graph(&self, g: usize) -> ComputeGraph {
        let src = self.layout.graphs[g];
        let offset = self.layout.flat.graphs[g].offset;
        let items = self.plan.items(&self.layout.flat, g);
        let ids: BTreeMap<Item, NodeId> = items
            .iter()
            .enumerate()
            .map(|(i, &it)| (it, NodeId(i as u32)))
            .collect();
        // What shows an edge from flat node `src` into view node `to` in this graph.
        let source = |src: usize, to: Key| match self.key(src) {
            Some(k) => ids[&Item::View(k)],
            None => ids[&Item::CutIn(to)],
        };
        let port = |p: &OutPort| {
            let k = self
                .key(offset + p.node.index())
                .filter(|_| p.node.index() < src.nodes.len())?;
            Some(OutPort {
                node: ids[&Item::View(k)],
                index: p.index,
            })
        };
        let cuts = &self.plan.cuts;
        let nodes = items
            .iter()
            .map(|&it| match it {
                Item::View(Key::Node(i)) => self.kept(i as usize, &source),
                Item::View(Key::Fold(k)) => self.summary(k, &source),
                Item::CutIn(key) => cut(&format!("{}/cut_in", self.name(key)), cuts.into[&key]),
                Item::CutOut(key) => {
                    let mut c = cut(&format!("{}/cut_out", self.name(key)), cuts.out_of[&key]);
                    c.inputs.push(Some(OutPort {
                        node: ids[&Item::View(key)],
                        index: 0,
                    }));
                    c
                }
            })
            .collect();
        ComputeGraph {
            name: src.name.clone(),
            nodes,
            inputs: src.inputs.iter().filter_map(port).collect(),
            outputs: src.outputs.iter().filter_map(port).collect(),
            attrs: src.attrs.clone(),
            attr_groups: src.attr_groups.clone(),
            external: src.external,
        }
    }

    /// The name a view node has in the rebuilt graph.
    fn name(&self, key: Key) -> String {
        match key {
            Key::Node(i) => self.layout.nodes[i as usize].name.clone(),
            Key::Fold(k) => format!("rt2.folded.{k}"),
        }
    }

    /// The visible subgraphs of flat node `i`, rebuilt.
    fn subgraphs(&self, i: usize) -> impl Iterator<Item = ComputeGraph> + '_ {
        self.layout.flat.owned[i]
            .iter()
            .filter(|&&g| self.plan.visible(&self.layout.flat, g as usize))
            .map(|&g| self.graph(g as usize))
    }

    /// A kept node, its edges pointed at what shows their other ends.
    fn kept(&self, i: usize, source: &impl Fn(usize, Key) -> NodeId) -> ComputeNode {
        let n = self.layout.nodes[i];
        let fg = self.layout.flat.graph_of(i);
        let me = Key::Node(i as u32);
        let mut controls = Vec::new();
        for c in n.control_inputs.iter().filter(|c| c.index() < fg.len) {
            let id = source(fg.offset + c.index(), me);
            if !controls.contains(&id) {
                controls.push(id);
            }
        }
        let inputs = n.inputs.iter().map(|p| {
            p.filter(|p| p.node.index() < fg.len).map(|p| OutPort {
                node: source(fg.offset + p.node.index(), me),
                index: p.index,
            })
        });
        ComputeNode {
            name: n.name.clone(),
            op_type: n.op_type.clone(),
            inputs: inputs.collect(),
            control_inputs: controls,
            input_descs: n.input_descs.clone(),
            output_descs: n.output_descs.clone(),
            attrs: n.attrs.clone(),
            subgraphs: self.subgraphs(i).collect(),
            id: n.id,
            rest: n.rest.clone(),
        }
    }

    /// Summary node `k`: one input per distinct source outside it, its members' subgraphs.
    fn summary(&self, k: u32, source: &impl Fn(usize, Key) -> NodeId) -> ComputeNode {
        let members = &self.plan.folding.folds[k as usize];
        let me = Key::Fold(k);
        let mut node = ComputeNode::new(self.name(me), FOLDED_OP);
        let (mut data, mut control) = (BTreeSet::new(), BTreeSet::new());
        let mut types: BTreeMap<&str, i64> = BTreeMap::new();
        for &m in members {
            let m = m as usize;
            let n = self.layout.nodes[m];
            *types.entry(&n.op_type).or_default() += 1;
            let fg = self.layout.flat.graph_of(m);
            let outside = |s: usize| s < fg.len && self.key(fg.offset + s) != Some(me);
            for p in n
                .inputs
                .iter()
                .flatten()
                .filter(|p| outside(p.node.index()))
            {
                let id = source(fg.offset + p.node.index(), me);
                if data.insert(id) {
                    node.inputs.push(Some(OutPort {
                        node: id,
                        index: p.index,
                    }));
                }
            }
            for c in n.control_inputs.iter().filter(|c| outside(c.index())) {
                let id = source(fg.offset + c.index(), me);
                if !data.contains(&id) && control.insert(id) {
                    node.control_inputs.push(id);
                }
            }
            node.subgraphs.extend(self.subgraphs(m));
        }
        let mut types: Vec<(&str, i64)> = types.into_iter().collect();
        types.sort_by_key(|&(_, c)| std::cmp::Reverse(c));
        let strs = |v: Vec<String>| {
            AttrValue::List(ListAttr::Str(
                v.into_iter().map(String::into_bytes).collect(),
            ))
        };
        let names = members
            .iter()
            .map(|&m| self.layout.nodes[m as usize].name.clone());
        let attrs = [
            ("nodes", AttrValue::Int(members.len() as i64)),
            (
                "op_types",
                strs(types.iter().map(|t| t.0.to_string()).collect()),
            ),
            (
                "op_type_counts",
                AttrValue::List(ListAttr::Int(types.iter().map(|t| t.1).collect())),
            ),
            ("members", strs(names.collect())),
        ];
        node.attrs.extend(attrs.map(|(k, v)| (k.to_string(), v)));
        node
    }
}

/// A cut marker standing for `nodes` left-out nodes.
fn cut(name: &str, nodes: usize) -> ComputeNode {
    let mut c = ComputeNode::new(name, CUT_OP);
    c.attrs.insert("nodes".into(), AttrValue::Int(nodes as i64));
    c
}

/// Whether `n` is a summary or a cut marker rather than a node of the model.
pub fn is_synthetic(n: &ComputeNode) -> bool {
    n.op_type == FOLDED_OP || n.op_type == CUT_OP
}

/// The label of a summary or cut node in a drawing: how many nodes, which op types, the
/// first and last member. `None` for an ordinary node.
pub fn synthetic_label(n: &ComputeNode) -> Option<String> {
    let count = || n.attr_int("nodes").unwrap_or(0);
    match n.op_type.as_str() {
        CUT_OP => Some(format!("… {} more", count())),
        FOLDED_OP => {
            let strs = |key: &str| match n.attr(key) {
                Some(AttrValue::List(ListAttr::Str(v))) => v
                    .iter()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect(),
                _ => Vec::new(),
            };
            let types = strs("op_types");
            let counts = n
                .attr("op_type_counts")
                .and_then(AttrValue::as_ints)
                .unwrap_or(&[]);
            let mut kinds: Vec<String> = types
                .iter()
                .zip(counts)
                .take(3)
                .map(|(t, c)| format!("{t} ×{c}"))
                .collect();
            if types.len() > 3 {
                kinds.push(format!("+{} types", types.len() - 3));
            }
            let members = strs("members");
            let span = match (members.first(), members.last()) {
                (Some(a), Some(b)) => format!("\n{a} … {b}"),
                _ => String::new(),
            };
            Some(format!("{} nodes\n{}{span}", count(), kinds.join(", ")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, op: &str, inputs: &[usize]) -> ComputeNode {
        let mut n = ComputeNode::new(name, op);
        n.inputs = inputs
            .iter()
            .map(|&i| {
                Some(OutPort {
                    node: NodeId(i as u32),
                    index: 0,
                })
            })
            .collect();
        n
    }

    fn graph(name: &str, nodes: Vec<ComputeNode>) -> ComputeGraph {
        let mut g = ComputeGraph::new(name);
        g.nodes = nodes;
        g
    }

    /// Root `m`: x, c (Data), if (If of c, x; branches `then`: tx -> trelu -> tout and
    /// `else`: ex -> eout), out (NetOutput of if).
    fn if_model() -> ComputeModel {
        let then = graph(
            "then",
            vec![
                node("tx", "Data", &[]),
                node("trelu", "Relu", &[0]),
                node("tout", "NetOutput", &[1]),
            ],
        );
        let els = graph(
            "else",
            vec![node("ex", "Data", &[]), node("eout", "NetOutput", &[0])],
        );
        let mut iff = node("if", "If", &[1, 0]);
        iff.subgraphs = vec![then, els];
        ComputeModel {
            name: "m".into(),
            root: graph(
                "m",
                vec![
                    node("x", "Data", &[]),
                    node("c", "Data", &[]),
                    iff,
                    node("out", "NetOutput", &[2]),
                ],
            ),
            ..Default::default()
        }
    }

    /// Root `chain`: x (Data), n0 .. n{len-1} each of the one before, out (NetOutput).
    fn chain(len: usize) -> ComputeModel {
        let mut nodes = vec![node("x", "Data", &[])];
        for i in 0..len {
            nodes.push(node(&format!("n{i}"), "Add", &[i]));
        }
        nodes.push(node("out", "NetOutput", &[len]));
        ComputeModel {
            name: "chain".into(),
            root: graph("chain", nodes),
            ..Default::default()
        }
    }

    fn names(g: &ComputeGraph) -> Vec<&str> {
        g.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    fn run(model: &ComputeModel, f: ViewFilter) -> ComputeModel {
        filter(model, &f).unwrap_or_else(|e| panic!("{f:?}: {e}"))
    }

    #[test]
    fn an_empty_filter_keeps_the_model() {
        let m = if_model();
        assert!(ViewFilter::default().is_empty());
        assert_eq!(run(&m, ViewFilter::default()), m);
    }

    #[test]
    fn subgraph_shows_one_graph_under_its_owner() {
        let m = run(
            &if_model(),
            ViewFilter {
                subgraph: Some("then".into()),
                ..Default::default()
            },
        );
        assert_eq!(names(&m.root), ["if/cut_in", "if", "if/cut_out"]);
        assert_eq!(m.root.nodes[0].op_type, CUT_OP);
        assert_eq!(m.root.nodes[0].attr_int("nodes"), Some(2));
        // The consumer of `if` and the source of the branch not shown.
        assert_eq!(m.root.nodes[2].attr_int("nodes"), Some(2));
        let iff = &m.root.nodes[1];
        assert_eq!(
            iff.inputs,
            vec![
                Some(OutPort {
                    node: NodeId(0),
                    index: 0
                });
                2
            ]
        );
        assert_eq!(iff.subgraphs.len(), 1);
        assert_eq!(names(&iff.subgraphs[0]), ["tx", "trelu", "tout"]);
        assert!(m.detached.is_empty());
        // The root graph by name is the whole of it.
        let whole = run(
            &if_model(),
            ViewFilter {
                subgraph: Some("m".into()),
                ..Default::default()
            },
        );
        assert_eq!(whole, if_model());
    }

    #[test]
    fn owner_shows_the_subgraphs_of_one_node() {
        let sub_names = |f: ViewFilter| -> Vec<String> {
            let m = run(&if_model(), f);
            let iff = m.root.nodes.iter().find(|n| n.name == "if").unwrap();
            iff.subgraphs.iter().map(|g| g.name.clone()).collect()
        };
        let owner = |sub: Option<&str>| ViewFilter {
            owner: Some("if".into()),
            subgraph: sub.map(String::from),
            ..Default::default()
        };
        assert_eq!(sub_names(owner(None)), ["then", "else"]);
        assert_eq!(sub_names(owner(Some("else"))), ["else"]);
    }

    #[test]
    fn unknown_names_are_errors() {
        let m = if_model();
        let cases = [
            (None, None, Some("nope"), "no node named \"nope\""),
            (
                Some("nope"),
                None,
                None,
                "no graph named \"nope\" (the graphs are \"m\", \"then\", \"else\")",
            ),
            (None, Some("x"), None, "node \"x\" owns no subgraphs"),
            (
                Some("m"),
                Some("if"),
                None,
                "node \"if\" owns no subgraph named \"m\" (it owns \"then\", \"else\")",
            ),
            // Around a node outside the scope: not found there.
            (Some("else"), None, Some("trelu"), "no node named \"trelu\""),
        ];
        for (subgraph, owner, around, want) in cases {
            let f = ViewFilter {
                subgraph: subgraph.map(String::from),
                owner: owner.map(String::from),
                around: around.map(String::from),
                ..Default::default()
            };
            assert_eq!(filter(&m, &f).unwrap_err().to_string(), want, "{f:?}");
        }
        let mut twice = if_model();
        twice.root.nodes[3]
            .subgraphs
            .push(graph("then", vec![node("y", "Data", &[])]));
        twice.root.nodes[3].subgraphs[0]
            .nodes
            .push(node("trelu", "Relu", &[0]));
        assert!(matches!(
            filter(
                &twice,
                &ViewFilter {
                    subgraph: Some("then".into()),
                    ..Default::default()
                }
            ),
            Err(FilterError::AmbiguousGraph { count: 2, .. })
        ));
        assert_eq!(
            filter(
                &twice,
                &ViewFilter {
                    around: Some("trelu".into()),
                    ..Default::default()
                }
            )
            .unwrap_err()
            .to_string(),
            "\"trelu\" names 2 nodes, in graphs \"then\", \"then\": narrow the view to one of them first"
        );
    }

    #[test]
    fn around_keeps_the_nodes_within_depth_and_marks_the_cuts() {
        let around = |name: &str, depth| ViewFilter {
            around: Some(name.into()),
            depth,
            ..Default::default()
        };
        let m = run(&chain(10), around("n5", 2));
        assert_eq!(
            names(&m.root),
            ["n3/cut_in", "n3", "n4", "n5", "n6", "n7", "n7/cut_out"]
        );
        assert_eq!(
            m.root.nodes[1].inputs,
            [Some(OutPort {
                node: NodeId(0),
                index: 0
            })]
        );
        assert_eq!(
            m.root.nodes[6].inputs,
            [Some(OutPort {
                node: NodeId(5),
                index: 0
            })]
        );
        let m = run(&chain(10), around("x", 0));
        assert_eq!(names(&m.root), ["x", "x/cut_out"]);
        // Into a subgraph through its owner; the owner of the centre's graph stays.
        let m = run(&if_model(), around("tx", 1));
        assert_eq!(names(&m.root), ["if/cut_in", "if", "if/cut_out"]);
        assert_eq!(
            names(&m.root.nodes[1].subgraphs[0]),
            ["tx", "trelu", "trelu/cut_out"]
        );
        let m = run(&if_model(), around("c", 2));
        assert_eq!(names(&m.root), ["x", "c", "if", "out"]);
        let subs: Vec<Vec<&str>> = m.root.nodes[2].subgraphs.iter().map(names).collect();
        assert_eq!(subs, [vec!["tx", "tx/cut_out"], vec!["ex", "ex/cut_out"]]);
    }

    /// Every node of `original` is shown exactly once, by itself or in a summary; every
    /// edge between two nodes shown as themselves is still there. Returns the node count.
    fn check_folding(original: &ComputeModel, folded: &ComputeModel) -> usize {
        let mut shown: BTreeMap<String, usize> = BTreeMap::new();
        let mut count = 0;
        let mut edges = BTreeSet::new();
        folded.root.walk(&mut |g| {
            count += g.nodes.len();
            for n in &g.nodes {
                match n.op_type.as_str() {
                    FOLDED_OP => match n.attr("members") {
                        Some(AttrValue::List(ListAttr::Str(v))) => {
                            for m in v {
                                *shown
                                    .entry(String::from_utf8(m.clone()).unwrap())
                                    .or_default() += 1;
                            }
                        }
                        other => panic!("members: {other:?}"),
                    },
                    CUT_OP => panic!("folding alone cuts nothing"),
                    _ => *shown.entry(n.name.clone()).or_default() += 1,
                }
                for p in n.inputs.iter().flatten() {
                    edges.insert((g.nodes[p.node.index()].name.clone(), n.name.clone()));
                }
            }
        });
        let kept = folded_names(folded);
        original.root.walk(&mut |g| {
            for n in &g.nodes {
                assert_eq!(shown.remove(&n.name), Some(1), "{} shown once", n.name);
                for p in n.inputs.iter().flatten() {
                    let from = &g.nodes[p.node.index()];
                    if kept.contains(&from.name) && kept.contains(&n.name) {
                        assert!(edges.contains(&(from.name.clone(), n.name.clone())));
                    }
                }
            }
        });
        assert!(shown.is_empty(), "nothing else shown: {shown:?}");
        count
    }

    fn folded_names(m: &ComputeModel) -> BTreeSet<String> {
        let mut s = BTreeSet::new();
        m.root.walk(&mut |g| {
            s.extend(
                g.nodes
                    .iter()
                    .filter(|n| !is_synthetic(n))
                    .map(|n| n.name.clone()),
            )
        });
        s
    }

    #[test]
    fn max_nodes_folds_within_the_budget() {
        let fold = |m: &ComputeModel, n, around: Option<&str>| {
            let f = run(
                m,
                ViewFilter {
                    max_nodes: Some(n),
                    around: around.map(String::from),
                    depth: 1000,
                    ..Default::default()
                },
            );
            (check_folding(m, &f), f)
        };
        let big = chain(500);
        for budget in [1, 2, 7, 50, 501, 502] {
            let (count, _) = fold(&big, budget, None);
            assert!(
                count <= budget.max(1),
                "{count} nodes for a budget of {budget}"
            );
        }
        let (count, f) = fold(&big, 502, None);
        assert_eq!(count, 502);
        assert_eq!(f, big);
        // The centre stays itself; the summaries take over its edges.
        let (count, f) = fold(&big, 9, Some("n250"));
        assert_eq!(count, 9);
        let center = f.root.find("n250").unwrap();
        let before = f.root.nodes[center.index()].inputs[0].unwrap().node;
        let before = &f.root.nodes[before.index()];
        assert_eq!(before.op_type, FOLDED_OP);
        let last = match before.attr("members") {
            Some(AttrValue::List(ListAttr::Str(v))) => v.last().cloned(),
            _ => None,
        };
        assert_eq!(last, Some(b"n249".to_vec()));
        // Subgraphs fold too, and a summary takes over its members' subgraphs.
        let mut m = if_model();
        for i in 0..30 {
            m.root.nodes[2].subgraphs[0]
                .nodes
                .push(node(&format!("t{i}"), "Relu", &[i + 1]));
        }
        let (count, _) = fold(&m, 6, None);
        assert!(count <= 6, "{count}");
        let (count, f) = fold(&m, 3, None);
        assert_eq!(count, 3, "one summary per graph");
        let summary = &f.root.nodes[0];
        assert_eq!(summary.attr_int("nodes"), Some(4));
        assert_eq!(summary.subgraphs.len(), 2);
    }

    #[test]
    fn summaries_label_their_counts_and_types() {
        let f = run(
            &chain(10),
            ViewFilter {
                max_nodes: Some(1),
                ..Default::default()
            },
        );
        let s = &f.root.nodes[0];
        assert_eq!(
            synthetic_label(s).unwrap(),
            "12 nodes\nAdd ×10, Data ×1, NetOutput ×1\nx … out"
        );
        assert_eq!(
            synthetic_label(&f.root.nodes[0].clone()).is_some(),
            is_synthetic(s)
        );
        assert_eq!(synthetic_label(&node("a", "Add", &[])), None);
    }
}
