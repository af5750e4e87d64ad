//! Views of large ExecuteGraphs: one subgraph (by name or by the node that owns it), the
//! neighbourhood of a node, and folding into summary nodes under a node budget.
//!
//! [`filter`] returns a smaller [`ExecuteGraph`] and the graphs to show of it, which the
//! views ([`super::dot`], [`super::json`]) render as they render any ExecuteGraph. What was
//! left out shows in it as nodes of two kernel types of the views' own, which no kernel
//! registry knows (a filtered graph is for looking at, never for running):
//! - [`FOLDED_KERNEL`], a summary standing for consecutive nodes of one graph, with
//!   attributes `nodes` (how many), `kernels` and `kernel_counts` (what they are, most
//!   frequent first) and `members` (their names, in order); it takes over the edges and
//!   the subgraphs of its members.
//! - [`CUT_KERNEL`], a marker that the graph goes on: it feeds a node whose producers were
//!   left out, or is fed by a node whose consumers were, with attribute `nodes` (how many).
//!
//! This file flattens the selected graphs for [`crate::graphview::focus`], which decides
//! what to show, and builds the result from its plan. Must not: change the graph it is
//! given, or depend on hash order.

use std::collections::{BTreeMap, BTreeSet};

use crate::exec::graph::{
    ControlInputs, ExecuteGraph, GraphKind, KernelAttr, KernelClass, KernelGraph, KernelNode,
    KernelNodeId, ValueRef,
};
use crate::exec::view::select::GraphSelect;
use crate::graphview::focus::{self, Item, Plan};
use crate::graphview::fold::{Flat, Key};

pub use crate::graphview::focus::{FilterError, ViewFilter};

/// The kernel type of a summary node.
pub const FOLDED_KERNEL: &str = "rt2.Folded";
/// The kernel type of a marker for left-out producers or consumers.
pub const CUT_KERNEL: &str = "rt2.Cut";

/// The part of the `which` graphs of `eg` that `f` shows, with summaries and cut markers
/// where nodes were left out (see the module doc), and the graphs to show of it: `which`,
/// narrowed to the one graph that holds the scope or the neighbourhood when there is one.
/// Graphs not selected are left empty.
pub fn filter(
    eg: &ExecuteGraph,
    which: GraphSelect,
    f: &ViewFilter,
) -> Result<(ExecuteGraph, GraphSelect), FilterError> {
    let mut layout = Layout::default();
    let mut tops = Vec::new();
    for &kind in which.kinds() {
        tops.push((layout.flat.graphs.len(), kind));
        // Init, Main and DeInit answer to their GE names and to their own.
        let g = eg.graph(kind);
        let names = [kind.name(), g.name.as_str()].map(String::from).to_vec();
        layout.add(g, names, None);
    }
    let plan = focus::plan(&layout.flat, &|i, name| layout.nodes[i].name == name, f)?;
    let rebuild = Rebuild {
        layout: &layout,
        plan: &plan,
    };
    let mut out = ExecuteGraph {
        name: eg.name.clone(),
        init: KernelGraph::new(eg.init.name.clone()),
        main: KernelGraph::new(eg.main.name.clone()),
        deinit: KernelGraph::new(eg.deinit.name.clone()),
        resources: eg.resources,
        inputs: eg.inputs.clone(),
        outputs: eg.outputs.clone(),
        multi_thread: eg.multi_thread,
    };
    let mut shown = Vec::new();
    for (g, kind) in tops {
        let slot = match kind {
            GraphKind::Init => &mut out.init,
            GraphKind::Main => &mut out.main,
            GraphKind::DeInit => &mut out.deinit,
        };
        *slot = rebuild.graph(g);
        if plan.visible(&layout.flat, g) {
            shown.push(kind);
        }
    }
    let narrowed = match shown[..] {
        [GraphKind::Init] if f.narrows() => GraphSelect::Init,
        [GraphKind::Main] if f.narrows() => GraphSelect::Main,
        [GraphKind::DeInit] if f.narrows() => GraphSelect::DeInit,
        _ => which,
    };
    Ok((out, narrowed))
}

/// The selected graphs flattened, numbered depth first (each node's subgraphs before the
/// next node's), with the graphs and nodes behind the numbers.
#[derive(Default)]
struct Layout<'a> {
    flat: Flat,
    graphs: Vec<&'a KernelGraph>,
    nodes: Vec<&'a KernelNode>,
}

impl<'a> Layout<'a> {
    /// Adds `g` and its subgraphs; a subgraph answers to its own name and to
    /// `owner.#index`, and an unnamed one is called by the latter in messages.
    fn add(&mut self, g: &'a KernelGraph, names: Vec<String>, owner: Option<usize>) {
        let offset = self.flat.len();
        self.flat.add_graph(names, owner, g.nodes.len());
        self.graphs.push(g);
        self.nodes.extend(&g.nodes);
        for (i, n) in g.nodes.iter().enumerate() {
            // Model inputs, and in a subgraph the owner's inputs; Main's InnerData are
            // Init's exports, constants for the view.
            self.flat.input[offset + i] =
                n.kernel == "Data" || (owner.is_some() && n.kernel == "InnerData");
            for s in g.predecessors(i) {
                self.flat.add_edge(offset + s, offset + i, false);
            }
        }
        for (i, n) in g.nodes.iter().enumerate() {
            for (s, sub) in n.subgraphs.iter().enumerate() {
                let at = self.flat.len();
                let by_index = format!("{}.#{s}", n.name);
                let names = match sub.name.as_str() {
                    "" => vec![by_index],
                    name => vec![name.to_string(), by_index],
                };
                self.add(sub, names, Some(offset + i));
                for (j, m) in sub.nodes.iter().enumerate() {
                    if m.inputs.is_empty() && m.control_inputs.is_empty() {
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

    fn graph(&self, g: usize) -> KernelGraph {
        let src = self.layout.graphs[g];
        let offset = self.layout.flat.graphs[g].offset;
        let items = self.plan.items(&self.layout.flat, g);
        let ids: BTreeMap<Item, KernelNodeId> = items
            .iter()
            .enumerate()
            .map(|(i, &it)| (it, KernelNodeId(i as u32)))
            .collect();
        // What shows an edge from flat node `src` into view node `to` in this graph.
        let source = |src: usize, to: Key| match self.key(src) {
            Some(k) => ids[&Item::View(k)],
            None => ids[&Item::CutIn(to)],
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
                    c.inputs.push(ValueRef {
                        node: ids[&Item::View(key)],
                        output: 0,
                    });
                    c
                }
            })
            .collect();
        // Free-Launch relations between nodes shown as themselves stay.
        let kept = |n: KernelNodeId| {
            let key = Key::Node((offset + n.index()) as u32);
            (n.index() < src.nodes.len() && self.key(offset + n.index()) == Some(key))
                .then(|| ids[&Item::View(key)])
        };
        let free_launch = src
            .free_launch
            .iter()
            .filter_map(|&(f, l)| Some((kept(f)?, kept(l)?)))
            .collect();
        KernelGraph {
            name: src.name.clone(),
            nodes,
            free_launch,
        }
    }

    /// The name a view node has in the rebuilt graph.
    fn name(&self, key: Key) -> String {
        match key {
            Key::Node(i) => self.layout.nodes[i as usize].name.to_string(),
            Key::Fold(k) => format!("rt2.folded.{k}"),
        }
    }

    /// The visible subgraphs of flat node `i`, rebuilt.
    fn subgraphs(&self, i: usize) -> impl Iterator<Item = KernelGraph> + '_ {
        self.layout.flat.owned[i]
            .iter()
            .filter(|&&g| self.plan.visible(&self.layout.flat, g as usize))
            .map(|&g| self.graph(g as usize))
    }

    /// A kept node, its edges pointed at what shows their other ends.
    fn kept(&self, i: usize, source: &impl Fn(usize, Key) -> KernelNodeId) -> KernelNode {
        let n = self.layout.nodes[i];
        let fg = self.layout.flat.graph_of(i);
        let me = Key::Node(i as u32);
        let mut controls = ControlInputs::new();
        for c in n.control_inputs.iter().filter(|c| c.index() < fg.len) {
            let id = source(fg.offset + c.index(), me);
            if !controls.contains(&id) {
                controls.push(id);
            }
        }
        let inputs = n.inputs.iter().filter(|v| v.node.index() < fg.len);
        KernelNode {
            name: n.name.clone(),
            kernel: n.kernel.clone(),
            class: n.class,
            inputs: inputs
                .map(|v| ValueRef {
                    node: source(fg.offset + v.node.index(), me),
                    output: v.output,
                })
                .collect(),
            outputs: n.outputs,
            control_inputs: controls,
            attrs: n.attrs.clone(),
            origin: n.origin.clone(),
            priority: n.priority,
            subgraphs: self.subgraphs(i).collect(),
        }
    }

    /// Summary node `k`: one input per distinct source outside it, its members' subgraphs.
    fn summary(&self, k: u32, source: &impl Fn(usize, Key) -> KernelNodeId) -> KernelNode {
        let members = &self.plan.folding.folds[k as usize];
        let me = Key::Fold(k);
        let mut node = KernelNode::new(self.name(me), FOLDED_KERNEL, KernelClass::Normal);
        let (mut data, mut control) = (BTreeSet::new(), BTreeSet::new());
        let mut kernels: BTreeMap<&str, i64> = BTreeMap::new();
        for &m in members {
            let m = m as usize;
            let n = self.layout.nodes[m];
            *kernels.entry(&n.kernel).or_default() += 1;
            let fg = self.layout.flat.graph_of(m);
            let outside = |s: usize| s < fg.len && self.key(fg.offset + s) != Some(me);
            for v in n.inputs.iter().filter(|v| outside(v.node.index())) {
                let id = source(fg.offset + v.node.index(), me);
                if data.insert(id) {
                    node.inputs.push(ValueRef {
                        node: id,
                        output: v.output,
                    });
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
        let mut kernels: Vec<(&str, i64)> = kernels.into_iter().collect();
        kernels.sort_by_key(|&(_, c)| std::cmp::Reverse(c));
        let names = members
            .iter()
            .map(|&m| self.layout.nodes[m as usize].name.to_string());
        let attrs = [
            ("nodes", KernelAttr::Int(members.len() as i64)),
            (
                "kernels",
                KernelAttr::Strs(kernels.iter().map(|t| t.0.to_string()).collect()),
            ),
            (
                "kernel_counts",
                KernelAttr::Ints(kernels.iter().map(|t| t.1).collect()),
            ),
            ("members", KernelAttr::Strs(names.collect())),
        ];
        for (k, v) in attrs {
            node.attrs.insert(k.to_string(), v);
        }
        node
    }
}

/// A cut marker standing for `nodes` left-out nodes.
fn cut(name: &str, nodes: usize) -> KernelNode {
    let mut c = KernelNode::new(name, CUT_KERNEL, KernelClass::Normal);
    c.attrs
        .insert("nodes".into(), KernelAttr::Int(nodes as i64));
    c
}

/// Whether `n` is a summary or a cut marker rather than a node of the graph.
pub fn is_synthetic(n: &KernelNode) -> bool {
    n.kernel == FOLDED_KERNEL || n.kernel == CUT_KERNEL
}

/// The label of a summary or cut node in a drawing: how many nodes, which kernel types,
/// the first and last member. `None` for an ordinary node.
pub fn synthetic_label(n: &KernelNode) -> Option<String> {
    let count = || n.attr_int("nodes").unwrap_or(0);
    match &*n.kernel {
        CUT_KERNEL => Some(format!("… {} more", count())),
        FOLDED_KERNEL => {
            let strs = |key: &str| match n.attrs.get(key) {
                Some(KernelAttr::Strs(v)) => v.as_slice(),
                _ => &[],
            };
            let counts = match n.attrs.get("kernel_counts") {
                Some(KernelAttr::Ints(v)) => v.as_slice(),
                _ => &[],
            };
            let kinds = strs("kernels");
            let mut shown: Vec<String> = kinds
                .iter()
                .zip(counts)
                .take(3)
                .map(|(t, c)| format!("{t} ×{c}"))
                .collect();
            if kinds.len() > 3 {
                shown.push(format!("+{} types", kinds.len() - 3));
            }
            let members = strs("members");
            let span = match (members.first(), members.last()) {
                (Some(a), Some(b)) => format!("\n{a} … {b}"),
                _ => String::new(),
            };
            Some(format!("{} nodes\n{}{span}", count(), shown.join(", ")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::testdata::sample;

    fn names(g: &KernelGraph) -> Vec<&str> {
        g.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    fn run(eg: &ExecuteGraph, which: GraphSelect, f: ViewFilter) -> (ExecuteGraph, GraphSelect) {
        filter(eg, which, &f).unwrap_or_else(|e| panic!("{f:?}: {e}"))
    }

    /// Main: x (Data), then `len` nodes each of the one before; Init and DeInit empty.
    fn chain(len: usize) -> ExecuteGraph {
        let mut main = KernelGraph::new("main");
        main.add(crate::exec::kernel_types::exec_node("x", "Data"));
        for i in 0..len {
            let mut n =
                crate::exec::kernel_types::exec_node(format!("n{i}").as_str(), "AllocMemHbm");
            n.inputs.push(ValueRef {
                node: KernelNodeId(i as u32),
                output: 0,
            });
            main.add(n);
        }
        ExecuteGraph {
            main,
            ..Default::default()
        }
    }

    #[test]
    fn an_empty_filter_keeps_the_graphs() {
        assert!(ViewFilter::default().is_empty());
        let (eg, which) = run(&sample(), GraphSelect::All, ViewFilter::default());
        assert_eq!(eg, sample());
        assert_eq!(which, GraphSelect::All);
    }

    #[test]
    fn owner_and_subgraph_select_subgraphs_under_their_owner() {
        let sel = |owner: Option<&str>, sub: Option<&str>| {
            let f = ViewFilter {
                owner: owner.map(String::from),
                subgraph: sub.map(String::from),
                ..Default::default()
            };
            let (eg, which) = run(&sample(), GraphSelect::All, f);
            assert_eq!(which, GraphSelect::Main);
            assert!(eg.init.nodes.is_empty() && eg.deinit.nodes.is_empty());
            assert_eq!(names(&eg.main), ["if/cut_in", "if", "if/cut_out"]);
            let iff = &eg.main.nodes[1];
            // x and conv1_out feed it, conv1_launch goes first: one marker for all three.
            assert_eq!(eg.main.nodes[0].attr_int("nodes"), Some(3));
            assert_eq!(
                iff.inputs.iter().map(|v| v.node.0).collect::<Vec<_>>(),
                [0, 0]
            );
            assert_eq!(iff.control_inputs.as_slice(), [KernelNodeId(0)]);
            let subs: Vec<Vec<String>> = iff
                .subgraphs
                .iter()
                .map(|g| {
                    let mut v = vec![g.name.clone()];
                    v.extend(names(g).into_iter().map(String::from));
                    v
                })
                .collect();
            subs
        };
        assert_eq!(
            sel(Some("if"), None),
            [["then", "in", "out"], ["else", "in", "out"]]
        );
        assert_eq!(sel(Some("if"), Some("else")), [["else", "in", "out"]]);
        assert_eq!(sel(None, Some("then")), [["then", "in", "out"]]);
        assert_eq!(sel(None, Some("if.#1")), [["else", "in", "out"]]);
        let main = ViewFilter {
            subgraph: Some("main".into()),
            ..Default::default()
        };
        let (eg, which) = run(&sample(), GraphSelect::All, main);
        assert_eq!((eg.main, which), (sample().main, GraphSelect::Main));
    }

    #[test]
    fn around_keeps_the_nodes_within_depth() {
        let f = ViewFilter {
            around: Some("conv1_launch".into()),
            depth: 1,
            ..Default::default()
        };
        let (eg, which) = run(&sample(), GraphSelect::All, f);
        assert_eq!(which, GraphSelect::Main);
        assert_eq!(
            names(&eg.main),
            [
                "x",
                "w_dev",
                "conv1_out",
                "conv1_launch",
                "ws",
                "ws_free",
                "if",
                "if/cut_out"
            ]
        );
        // NetOutput and the two branches' inputs, which are not shown.
        assert_eq!(eg.main.nodes[7].attr_int("nodes"), Some(3));
        assert!(eg.main.nodes[6].subgraphs.is_empty());
        assert_eq!(eg.main.free_launch, [(KernelNodeId(5), KernelNodeId(3))]);
        let f = ViewFilter {
            around: Some("in".into()),
            depth: 0,
            owner: Some("if".into()),
            subgraph: Some("else".into()),
            ..Default::default()
        };
        let (eg, _) = run(&sample(), GraphSelect::Main, f);
        assert_eq!(names(&eg.main.nodes[1].subgraphs[0]), ["in", "in/cut_out"]);
    }

    #[test]
    fn unknown_and_ambiguous_names_are_errors() {
        let err = |which, f: ViewFilter| filter(&sample(), which, &f).unwrap_err().to_string();
        let around = |name: &str| ViewFilter {
            around: Some(name.into()),
            ..Default::default()
        };
        assert_eq!(
            err(GraphSelect::All, around("nope")),
            "no node named \"nope\""
        );
        assert_eq!(
            err(GraphSelect::All, around("w_dev")),
            "\"w_dev\" names 2 nodes, in graphs \"Init\", \"Main\": narrow the view to one of them first"
        );
        assert!(filter(&sample(), GraphSelect::Main, &around("w_dev")).is_ok());
        assert_eq!(
            err(GraphSelect::Init, around("if")),
            "no node named \"if\"",
            "only the selected graphs"
        );
        let owner = |name: &str, sub: Option<&str>| ViewFilter {
            owner: Some(name.into()),
            subgraph: sub.map(String::from),
            ..Default::default()
        };
        assert_eq!(
            err(GraphSelect::All, owner("x", None)),
            "node \"x\" owns no subgraphs"
        );
        assert_eq!(
            err(GraphSelect::All, owner("if", Some("main"))),
            "node \"if\" owns no subgraph named \"main\" (it owns \"then\", \"else\")"
        );
        assert_eq!(
            err(
                GraphSelect::Main,
                ViewFilter {
                    subgraph: Some("nope".into()),
                    ..Default::default()
                }
            ),
            "no graph named \"nope\" (the graphs are \"Main\", \"then\", \"else\")"
        );
    }

    /// The names a folded graph shows, each kept node by itself and each summary by its
    /// members, and its edges by name.
    fn shown(g: &KernelGraph) -> (Vec<String>, BTreeSet<(String, String)>) {
        let mut names = Vec::new();
        let mut edges = BTreeSet::new();
        g.walk(&mut |g| {
            for n in &g.nodes {
                match &*n.kernel {
                    FOLDED_KERNEL => match n.attrs.get("members") {
                        Some(KernelAttr::Strs(v)) => names.extend(v.iter().cloned()),
                        other => panic!("members: {other:?}"),
                    },
                    CUT_KERNEL => panic!("folding alone cuts nothing"),
                    _ => names.push(n.name.to_string()),
                }
                for v in &n.inputs {
                    edges.insert((g.nodes[v.node.index()].name.to_string(), n.name.to_string()));
                }
            }
        });
        names.sort();
        (names, edges)
    }

    #[test]
    fn max_nodes_folds_within_the_budget_and_accounts_for_every_node() {
        let eg = chain(300);
        let (mut all, _) = shown(&eg.main);
        all.sort();
        for budget in [1, 5, 20, 150, 301] {
            let f = ViewFilter {
                max_nodes: Some(budget),
                around: Some("n100".into()),
                depth: 1000,
                ..Default::default()
            };
            let (folded, which) = run(&eg, GraphSelect::All, f);
            assert_eq!(which, GraphSelect::Main);
            assert!(folded.main.nodes.len() <= budget.max(1), "budget {budget}");
            let (names, edges) = shown(&folded.main);
            assert_eq!(names, all, "budget {budget}: every node shown once");
            let kept: BTreeSet<&str> = folded
                .main
                .nodes
                .iter()
                .filter(|n| !is_synthetic(n))
                .map(|n| n.name.as_str())
                .collect();
            if budget > 2 {
                assert!(kept.contains("n100"), "budget {budget}: the centre stays");
            }
            for (i, n) in eg.main.nodes.iter().enumerate().skip(1) {
                let from = eg.main.nodes[i - 1].name.as_str();
                if kept.contains(from) && kept.contains(n.name.as_str()) {
                    assert!(edges.contains(&(from.to_string(), n.name.to_string())));
                }
            }
        }
        let fold = |n| {
            let f = ViewFilter {
                max_nodes: Some(n),
                ..Default::default()
            };
            run(&eg, GraphSelect::Main, f).0
        };
        assert_eq!(fold(301), eg);
        let folded = fold(1);
        assert_eq!(
            synthetic_label(&folded.main.nodes[0]).unwrap(),
            "301 nodes\nAllocMemHbm ×300, Data ×1\nx … n299"
        );
    }
}
