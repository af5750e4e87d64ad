//! The loader's checks of an ExecuteGraph: every structural rule a graph must keep before
//! an engine may run it, reported all at once.
//!
//! [`check`] collects every problem rather than stopping at the first, each naming the
//! graph path (`Main`, `Main/If_3.then`) and the node. The rules:
//! - every kernel type is known ([`kernel_type`]) and the node's class is that type's class;
//! - an input names a node of the same graph and an output index below that node's
//!   `outputs`; a control input names a node of the same graph; no node depends on itself;
//! - data and control edges together form no cycle within a graph;
//! - node names are unique within a graph;
//! - `free_launch` relations name nodes of the graph, the first a `FreeMemory` or
//!   `FreeMemoryHoldAddr`, the second a Launch-class node;
//! - boundaries (see [`crate::exec::graph`]): `Data` only in Main, with `index` attributes
//!   exactly `0..inputs.len()`; `InnerData` with an `index` below Init's export count (Main,
//!   DeInit) or the owner's input count (subgraphs), and none in Init itself; at most one
//!   `NetOutput`, only in Main, with two inputs (shape, memory) per model output; at most
//!   one `InnerNetOutput` per graph; a subgraph's `InnerNetOutput` has one input per owner
//!   output, except a While's cond, which yields the condition, and a Loop's body, which
//!   yields the condition first;
//! - `If` owns 2 subgraphs, `Case` at least 1, `While` 2, `Loop` 1, every other node none;
//! - a tensor attribute's dims are non-negative and its bytes match shape and dtype.
//!
//! The checks only read: they never panic and never allocate by a number taken from the
//! graph without it being bounded by the graph's own size.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;

use foldhash::fast::FixedState;
use rayon::prelude::*;
use std::hash::BuildHasher;

use crate::exec::graph::{
    ExecuteGraph, GraphKind, KernelAttr, KernelClass, KernelGraph, KernelNode,
};
use crate::exec::kernel_types::kernel_type;

/// One violated rule, with the place it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Graph path: `Init`, `Main`, `DeInit`, or `<parent>/<owner node>.<subgraph name>`.
    pub graph: String,
    /// The node's index and name, when the problem belongs to one node.
    pub node: Option<(u32, String)>,
    /// What is wrong, lowercase, without a trailing period.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            Some((i, name)) => write!(f, "{}: node {i} {name:?}: {}", self.graph, self.message),
            None => write!(f, "{}: {}", self.graph, self.message),
        }
    }
}

/// Where a graph sits, which decides its boundary rules.
#[derive(Clone, Copy)]
enum Place<'a> {
    Root(GraphKind),
    /// Subgraph `index` of `owner`.
    Sub {
        owner: &'a KernelNode,
        index: usize,
    },
}

/// Nodes per task when a large graph's nodes are checked on all cores (smaller graphs
/// stay on one).
const CHECK_CHUNK: usize = 8192;

struct Checker<'a> {
    eg: &'a ExecuteGraph,
    /// Inputs of Init's (first) InnerNetOutput: how many values Init exports.
    init_exports: usize,
    problems: Vec<Problem>,
}

/// What the one pass over a chunk of a graph's nodes found.
#[derive(Default)]
struct Scan {
    problems: Vec<Problem>,
    /// Each node's name hashed, with the node's index, by [`name_bucket`] of the hash.
    names: Vec<Vec<(u64, u32)>>,
    /// Whether an edge points from a later node to an earlier one.
    forward: bool,
    /// The nodes with a boundary kernel type.
    boundaries: Vec<usize>,
}

/// Whether the boundary rules look at a node of kernel type `kernel`.
fn is_boundary(kernel: &str) -> bool {
    matches!(
        kernel,
        "Data" | "InnerData" | "NetOutput" | "InnerNetOutput"
    )
}

/// The unique-name check's buckets: the top bits of a name's hash.
const NAME_BUCKETS: usize = 64;

fn name_bucket(h: u64) -> usize {
    (h >> (64 - NAME_BUCKETS.trailing_zeros())) as usize
}

/// Duplicate node names of `g`, from the names' hashes (`scans`, in node order, already
/// split into [`NAME_BUCKETS`] buckets by the hash's top bits). Each bucket is one task
/// with a hash map of its hashes small enough to stay in cache (one map of the whole
/// graph's 300,000 names missed the cache on nearly every insert and cost as much as all
/// the other checks together); a name that only shares another's hash is compared by
/// string. Equal names have equal hashes and so meet in one bucket, which sees its nodes
/// in order: the result does not depend on how the work was split.
fn names(g: &KernelGraph, path: &str, scans: &[Scan]) -> Vec<Problem> {
    let mut problems: Vec<Problem> = (0..NAME_BUCKETS)
        .into_par_iter()
        // A small graph is one task.
        .with_min_len(if g.nodes.len() < CHECK_CHUNK {
            NAME_BUCKETS
        } else {
            1
        })
        .flat_map_iter(|b| {
            let entries = || {
                scans
                    .iter()
                    .flat_map(move |s| s.names.get(b).into_iter().flatten())
            };
            let mut first: HashMap<u64, usize, FixedState> =
                HashMap::with_capacity_and_hasher(entries().count(), FixedState::default());
            let mut collided: HashMap<&str, usize, FixedState> = HashMap::default();
            let mut problems = Vec::new();
            for &(h, i) in entries() {
                let i = i as usize;
                let n = &g.nodes[i];
                let f = match first.entry(h) {
                    Entry::Vacant(v) => {
                        v.insert(i);
                        continue;
                    }
                    Entry::Occupied(o) => *o.get(),
                };
                let earlier = if g.nodes[f].name == n.name {
                    Some(f)
                } else {
                    match collided.get(n.name.as_str()) {
                        Some(&f) => Some(f),
                        None => {
                            collided.insert(&n.name, i);
                            None
                        }
                    }
                };
                if let Some(f) = earlier {
                    problems.push(Problem {
                        graph: path.to_string(),
                        node: Some((i as u32, n.name.to_string())),
                        message: format!("duplicate node name, also node {f}"),
                    });
                }
            }
            problems
        })
        .collect();
    problems.sort_by_key(|p| p.node.as_ref().map_or(0, |(i, _)| *i));
    problems
}

/// Every problem of `eg`, in graph order (Init, Main, DeInit, subgraphs after their
/// parent's nodes); empty when the graph may be loaded.
pub fn check(eg: &ExecuteGraph) -> Vec<Problem> {
    let init_exports = eg
        .init
        .nodes
        .iter()
        .find(|n| n.kernel == "InnerNetOutput")
        .map_or(0, |n| n.inputs.len());
    let mut c = Checker {
        eg,
        init_exports,
        problems: Vec::new(),
    };
    for kind in GraphKind::ALL {
        c.graph(eg.graph(kind), kind.name(), Place::Root(kind));
    }
    c.problems
}

impl<'a> Checker<'a> {
    fn push(&mut self, path: &str, node: Option<(usize, &KernelNode)>, message: String) {
        self.problems.push(Problem {
            graph: path.to_string(),
            node: node.map(|(i, n)| (i as u32, n.name.to_string())),
            message,
        });
    }

    fn graph(&mut self, g: &'a KernelGraph, path: &str, place: Place<'a>) {
        // One pass over the nodes, on all cores in chunks for a large graph: each node's
        // own checks, its name's hash (bucketed for the unique-name check), whether an
        // edge points forward (a graph without one needs no cycle search) and which nodes
        // are boundaries. A large graph is tens of megabytes of nodes, so every further pass
        // over them would cost as much as the checks themselves. Problems are put back in
        // node order (a node's name first), so the report is the same however the work
        // was split.
        let hasher = FixedState::default();
        let scans: Vec<Scan> = g
            .nodes
            .par_chunks(CHECK_CHUNK)
            .enumerate()
            .map(|(c, chunk)| {
                let mut local = Checker {
                    eg: self.eg,
                    init_exports: self.init_exports,
                    problems: Vec::new(),
                };
                // Room for a bucket's share and a margin: a large graph's buckets then
                // never grow.
                let room = chunk.len() / NAME_BUCKETS + chunk.len() / (4 * NAME_BUCKETS);
                let mut scan = Scan {
                    names: (0..NAME_BUCKETS)
                        .map(|_| Vec::with_capacity(room))
                        .collect(),
                    ..Default::default()
                };
                for (j, n) in chunk.iter().enumerate() {
                    let i = c * CHECK_CHUNK + j;
                    let h = hasher.hash_one(n.name.as_str());
                    scan.names[name_bucket(h)].push((h, i as u32));
                    scan.forward |= local.node(g, path, i, n);
                    if is_boundary(&n.kernel) {
                        scan.boundaries.push(i);
                    }
                }
                scan.problems = local.problems;
                scan
            })
            .collect();
        let mut found = names(g, path, &scans);
        let sorted = !scans.iter().any(|s| s.forward);
        let mut boundaries = Vec::new();
        for s in scans {
            found.extend(s.problems);
            boundaries.extend(s.boundaries);
        }
        found.sort_by_key(|p| p.node.as_ref().map_or(0, |(i, _)| *i));
        self.problems.extend(found);
        if !sorted {
            self.cycles(g, path);
        }
        self.free_launch(g, path);
        self.boundaries(g, path, place, &boundaries);
        for n in &g.nodes {
            for (s, sub) in n.subgraphs.iter().enumerate() {
                let name = if sub.name.is_empty() {
                    format!("#{s}")
                } else {
                    sub.name.clone()
                };
                let sub_path = format!("{path}/{}.{name}", n.name);
                self.graph(sub, &sub_path, Place::Sub { owner: n, index: s });
            }
        }
    }

    /// The checks of one node that need nothing but the node and its graph; whether the
    /// node has a predecessor after it in the array (over [`KernelGraph::predecessors`]).
    fn node(&mut self, g: &KernelGraph, path: &str, i: usize, n: &KernelNode) -> bool {
        let len = g.nodes.len();
        let mut forward = false;
        let at = Some((i, n));
        match kernel_type(&n.kernel) {
            None => self.push(path, at, format!("unknown kernel type {:?}", n.kernel)),
            Some(k) if k.class != n.class => self.push(
                path,
                at,
                format!(
                    "class {} differs from kernel type {}'s class {}",
                    n.class.name(),
                    k.name,
                    k.class.name()
                ),
            ),
            Some(_) => {}
        }
        for (slot, v) in n.inputs.iter().enumerate() {
            let src = v.node.index();
            forward |= src > i && src < len;
            if src >= len {
                self.push(
                    path,
                    at,
                    format!("input {slot} refers to node {src}, out of range 0..{len}"),
                );
            } else if src == i {
                self.push(path, at, format!("input {slot} is a self-loop"));
            } else if v.output >= g.nodes[src].outputs {
                self.push(
                    path,
                    at,
                    format!(
                        "input {slot} refers to output {} of node {src} {:?}, which has {} outputs",
                        v.output, g.nodes[src].name, g.nodes[src].outputs
                    ),
                );
            }
        }
        for c in &n.control_inputs {
            let src = c.index();
            forward |= src > i && src < len;
            if src >= len {
                self.push(
                    path,
                    at,
                    format!("control input refers to node {src}, out of range 0..{len}"),
                );
            } else if src == i {
                self.push(path, at, "control input is a self-loop".to_string());
            }
        }
        self.attrs(path, i, n);
        self.subgraph_count(path, i, n);
        forward
    }

    fn attrs(&mut self, path: &str, i: usize, n: &KernelNode) {
        for (key, a) in &n.attrs {
            let KernelAttr::Tensor(t) = a else { continue };
            if let Some(d) = t.shape.iter().find(|d| **d < 0) {
                self.push(
                    path,
                    Some((i, n)),
                    format!("tensor attribute {key:?} has negative dim {d}"),
                );
                continue;
            }
            let want = t.dtype.tensor_bytes(&t.shape);
            if want != Some(t.data.len() as u64) {
                let want = want.map_or("more than 2^64".to_string(), |w| w.to_string());
                self.push(
                    path,
                    Some((i, n)),
                    format!(
                        "tensor attribute {key:?} has {} bytes, {:?} of {} needs {want}",
                        t.data.len(),
                        t.shape,
                        t.dtype
                    ),
                );
            }
        }
    }

    fn subgraph_count(&mut self, path: &str, i: usize, n: &KernelNode) {
        let have = n.subgraphs.len();
        let ok = match n.kernel.as_ref() {
            "If" | "While" => have == 2,
            "Case" => have >= 1,
            "Loop" => have == 1,
            _ => have == 0,
        };
        if !ok {
            let need = match n.kernel.as_ref() {
                "If" | "While" => "2",
                "Case" => "at least 1",
                "Loop" => "1",
                _ => "none",
            };
            self.push(
                path,
                Some((i, n)),
                format!(
                    "owns {have} subgraphs, kernel type {} needs {need}",
                    n.kernel
                ),
            );
        }
    }

    /// The nodes a topological order cannot reach lie on or behind a cycle; walking back
    /// through left-over predecessors finds one cycle to name.
    fn cycles(&mut self, g: &KernelGraph, path: &str) {
        let len = g.nodes.len();
        // A graph whose every edge points backwards in the array has no cycle; lowering
        // writes graphs sorted, so loading one costs a scan, not a sort.
        if g.is_sorted() {
            return;
        }
        let Err(stuck) = g.topological_order() else {
            return;
        };
        let mut done = vec![true; len];
        for id in &stuck {
            done[id.index()] = false;
        }
        let preds = |i: usize| g.predecessors(i);
        let left = done.iter().filter(|d| !**d).count();
        let Some(start) = done.iter().position(|d| !*d) else {
            return;
        };
        // Every left-over node has a left-over predecessor, so this walk must revisit.
        let mut seen_at = vec![usize::MAX; len];
        let mut walk = Vec::new();
        let mut at = start;
        while seen_at[at] == usize::MAX {
            seen_at[at] = walk.len();
            walk.push(at);
            match preds(at).find(|&p| !done[p]) {
                Some(p) => at = p,
                None => break,
            }
        }
        let from = seen_at[at].min(walk.len());
        let mut cycle: Vec<usize> = walk[from..].to_vec();
        cycle.reverse();
        let shown: Vec<String> = cycle
            .iter()
            .take(8)
            .map(|&i| format!("{i} {:?}", g.nodes[i].name))
            .collect();
        let more = if cycle.len() > 8 { " -> ..." } else { "" };
        self.push(
            path,
            None,
            format!(
                "cycle over data and control edges through {}{more} ({left} nodes on or behind cycles)",
                shown.join(" -> ")
            ),
        );
    }

    fn free_launch(&mut self, g: &KernelGraph, path: &str) {
        let len = g.nodes.len();
        for (r, (free, launch)) in g.free_launch.iter().enumerate() {
            let (f, l) = (free.index(), launch.index());
            if f >= len || l >= len {
                self.push(
                    path,
                    None,
                    format!("free_launch relation {r} ({f}, {l}) is out of range 0..{len}"),
                );
                continue;
            }
            let fk = &g.nodes[f].kernel;
            if fk != "FreeMemory" && fk != "FreeMemoryHoldAddr" {
                self.push(
                    path,
                    Some((f, &g.nodes[f])),
                    format!(
                        "free_launch relation {r} frees with a {fk} node, not FreeMemory or FreeMemoryHoldAddr"
                    ),
                );
            }
            if g.nodes[l].class != KernelClass::Launch {
                self.push(
                    path,
                    Some((l, &g.nodes[l])),
                    format!(
                        "free_launch relation {r} launches with a {} node of class {}, not launch",
                        g.nodes[l].kernel,
                        g.nodes[l].class.name()
                    ),
                );
            }
        }
    }

    fn index_attr(&mut self, path: &str, i: usize, n: &KernelNode) -> Option<i64> {
        let idx = n.attr_int("index");
        if idx.is_none() {
            self.push(
                path,
                Some((i, n)),
                format!("{} has no int attribute \"index\"", n.kernel),
            );
        }
        idx
    }

    /// The boundary rules; `candidates`: the nodes [`is_boundary`] picked, in order.
    fn boundaries(&mut self, g: &KernelGraph, path: &str, place: Place<'a>, candidates: &[usize]) {
        let is_main = matches!(place, Place::Root(GraphKind::Main));
        let mut data: Vec<(i64, usize)> = Vec::new();
        let mut data_nodes = 0usize;
        let mut net_outputs = Vec::new();
        let mut inner_net_outputs = Vec::new();
        for &i in candidates {
            let n = &g.nodes[i];
            match n.kernel.as_ref() {
                "Data" => {
                    data_nodes += 1;
                    if !is_main {
                        self.push(path, Some((i, n)), "Data outside Main".to_string());
                    }
                    if let Some(idx) = self.index_attr(path, i, n) {
                        data.push((idx, i));
                    }
                }
                "InnerData" => {
                    let limit = match place {
                        Place::Root(GraphKind::Init) => {
                            self.push(
                                path,
                                Some((i, n)),
                                "InnerData in Init, which has nothing to read from".to_string(),
                            );
                            continue;
                        }
                        Place::Root(_) => (self.init_exports, "Init's InnerNetOutput inputs"),
                        Place::Sub { owner, .. } => (owner.inputs.len(), "owner inputs"),
                    };
                    if let Some(idx) = self.index_attr(path, i, n)
                        && (idx < 0 || idx as u64 >= limit.0 as u64)
                    {
                        self.push(
                            path,
                            Some((i, n)),
                            format!(
                                "InnerData index {idx} is out of range 0..{} of {}",
                                limit.0, limit.1
                            ),
                        );
                    }
                }
                "NetOutput" => {
                    if !is_main {
                        self.push(path, Some((i, n)), "NetOutput outside Main".to_string());
                    }
                    net_outputs.push(i);
                }
                "InnerNetOutput" => inner_net_outputs.push(i),
                _ => {}
            }
        }
        if net_outputs.len() > 1 {
            self.push(
                path,
                None,
                format!("{} NetOutput nodes, at most one allowed", net_outputs.len()),
            );
        }
        if inner_net_outputs.len() > 1 {
            self.push(
                path,
                None,
                format!(
                    "{} InnerNetOutput nodes, at most one allowed",
                    inner_net_outputs.len()
                ),
            );
        }
        if is_main {
            let want = 2 * self.eg.outputs.len();
            match net_outputs.first() {
                Some(&i) if g.nodes[i].inputs.len() != want => self.push(
                    path,
                    Some((i, &g.nodes[i])),
                    format!(
                        "NetOutput has {} inputs, the model's {} outputs need {want}",
                        g.nodes[i].inputs.len(),
                        self.eg.outputs.len()
                    ),
                ),
                None if want > 0 => self.push(
                    path,
                    None,
                    format!(
                        "no NetOutput, the model has {} outputs",
                        self.eg.outputs.len()
                    ),
                ),
                _ => {}
            }
            let want = self.eg.inputs.len();
            if data_nodes != want {
                self.push(
                    path,
                    None,
                    format!("{data_nodes} Data nodes, the model has {want} inputs"),
                );
            }
            data.sort_unstable();
            for (k, &(idx, i)) in data.iter().enumerate() {
                if k > 0 && data[k - 1].0 == idx {
                    self.push(
                        path,
                        Some((i, &g.nodes[i])),
                        format!("Data index {idx} repeats node {}'s", data[k - 1].1),
                    );
                } else if idx < 0 || idx as u64 >= data_nodes as u64 {
                    self.push(
                        path,
                        Some((i, &g.nodes[i])),
                        format!("Data index {idx} leaves a gap: indices must be 0..{data_nodes}"),
                    );
                }
            }
        }
        if let Place::Sub { owner, index } = place {
            let is_while_cond = owner.kernel == "While" && index == 0;
            let have = inner_net_outputs.first().map(|&i| g.nodes[i].inputs.len());
            let want = owner.outputs as usize + usize::from(owner.kernel == "Loop");
            if !is_while_cond && have.unwrap_or(0) != want {
                let at = inner_net_outputs.first().map(|&i| (i, &g.nodes[i]));
                let have = match have {
                    Some(h) => format!("InnerNetOutput has {h} inputs"),
                    None => "no InnerNetOutput".to_string(),
                };
                let plus = if owner.kernel == "Loop" {
                    " plus the condition"
                } else {
                    ""
                };
                self.push(
                    path,
                    at,
                    format!(
                        "{have}, owner {:?} has {} outputs{plus}",
                        owner.name, owner.outputs
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::graph::{ExecTensor, KernelNodeId, ModelIo};
    use crate::exec::testdata::sample;
    use crate::ops::DType;

    /// The problems of the sample graph after `edit`, as displayed.
    fn problems(edit: impl FnOnce(&mut ExecuteGraph)) -> Vec<String> {
        let mut eg = sample();
        edit(&mut eg);
        check(&eg).iter().map(Problem::to_string).collect()
    }

    fn one(edit: impl FnOnce(&mut ExecuteGraph), want: &str) {
        assert_eq!(problems(edit), [want]);
    }

    fn id(i: u32) -> KernelNodeId {
        KernelNodeId(i)
    }

    #[test]
    fn unknown_kernel_type() {
        one(
            |eg| eg.main.nodes[4].kernel = "Bogus".into(),
            "Main: node 4 \"ws\": unknown kernel type \"Bogus\"",
        );
    }

    #[test]
    fn class_differs_from_kernel_type() {
        one(
            |eg| eg.init.nodes[0].class = KernelClass::Normal,
            "Init: node 0 \"streams\": class normal differs from kernel type SplitRtStreams's class memory",
        );
    }

    #[test]
    fn input_node_out_of_range() {
        one(
            |eg| eg.main.nodes[3].inputs[1].node = id(99),
            "Main: node 3 \"conv1_launch\": input 1 refers to node 99, out of range 0..8",
        );
    }

    #[test]
    fn input_output_index_out_of_range() {
        one(
            |eg| eg.main.nodes[3].inputs[0].output = 1,
            "Main: node 3 \"conv1_launch\": input 0 refers to output 1 of node 0 \"x\", which has 1 outputs",
        );
    }

    #[test]
    fn control_input_out_of_range() {
        one(
            |eg| eg.deinit.nodes[1].control_inputs.push(id(2)),
            "DeInit: node 1 \"destroy\": control input refers to node 2, out of range 0..2",
        );
    }

    #[test]
    fn self_loops() {
        assert_eq!(
            problems(|eg| {
                eg.main.nodes[5].control_inputs.push(id(5));
                eg.main.nodes[3].inputs[0].node = id(3);
            }),
            [
                "Main: node 3 \"conv1_launch\": input 0 is a self-loop",
                "Main: node 5 \"ws_free\": control input is a self-loop",
            ]
        );
    }

    #[test]
    fn cycle_names_its_nodes() {
        one(
            |eg| eg.main.nodes[2].control_inputs.push(id(3)),
            "Main: cycle over data and control edges through 3 \"conv1_launch\" -> 2 \"conv1_out\" (5 nodes on or behind cycles)",
        );
    }

    #[test]
    fn duplicate_node_names() {
        one(
            |eg| eg.main.nodes[4].name = "conv1_out".into(),
            "Main: node 4 \"conv1_out\": duplicate node name, also node 2",
        );
    }

    #[test]
    fn free_launch_relations() {
        assert_eq!(
            problems(|eg| {
                eg.main.free_launch.push((id(99), id(3)));
                eg.main.free_launch.push((id(2), id(3)));
                eg.main.free_launch.push((id(5), id(2)));
            }),
            [
                "Main: free_launch relation 1 (99, 3) is out of range 0..8",
                "Main: node 2 \"conv1_out\": free_launch relation 2 frees with a AllocMemHbm node, not FreeMemory or FreeMemoryHoldAddr",
                "Main: node 2 \"conv1_out\": free_launch relation 3 launches with a AllocMemHbm node of class memory, not launch",
            ]
        );
    }

    #[test]
    fn data_outside_main() {
        one(
            |eg| {
                let mut d = eg.main.nodes[0].clone();
                d.name = "stray".into();
                eg.deinit.add(d);
            },
            "DeInit: node 2 \"stray\": Data outside Main",
        );
    }

    #[test]
    fn data_without_index() {
        one(
            |eg| {
                eg.main.nodes[0].attrs.clear();
            },
            "Main: node 0 \"x\": Data has no int attribute \"index\"",
        );
    }

    #[test]
    fn data_indices_unique_and_contiguous() {
        assert_eq!(
            problems(|eg| {
                for (name, index) in [("x1", 0), ("x2", 5)] {
                    let mut d = eg.main.nodes[0].clone();
                    d.name = name.into();
                    d.attrs.insert("index".into(), KernelAttr::Int(index));
                    eg.main.add(d);
                    eg.inputs.push(ModelIo::default());
                }
            }),
            [
                "Main: node 8 \"x1\": Data index 0 repeats node 0's",
                "Main: node 9 \"x2\": Data index 5 leaves a gap: indices must be 0..3",
            ]
        );
    }

    #[test]
    fn data_count_matches_model_inputs() {
        one(
            |eg| eg.inputs.push(ModelIo::default()),
            "Main: 1 Data nodes, the model has 2 inputs",
        );
    }

    #[test]
    fn inner_data_in_range_of_init_exports() {
        one(
            |eg| {
                eg.deinit.nodes[0]
                    .attrs
                    .insert("index".into(), KernelAttr::Int(2));
            },
            "DeInit: node 0 \"streams\": InnerData index 2 is out of range 0..2 of Init's InnerNetOutput inputs",
        );
    }

    #[test]
    fn inner_data_in_range_of_owner_inputs() {
        one(
            |eg| {
                eg.main.nodes[6].subgraphs[0].nodes[0]
                    .attrs
                    .insert("index".into(), KernelAttr::Int(-1));
            },
            "Main/if.then: node 0 \"in\": InnerData index -1 is out of range 0..2 of owner inputs",
        );
    }

    #[test]
    fn inner_data_without_index_and_in_init() {
        assert_eq!(
            problems(|eg| {
                eg.main.nodes[1].attrs.clear();
                let mut d = eg.deinit.nodes[0].clone();
                d.name = "stray".into();
                eg.init.add(d);
            }),
            [
                "Init: node 4 \"stray\": InnerData in Init, which has nothing to read from",
                "Main: node 1 \"w_dev\": InnerData has no int attribute \"index\"",
            ]
        );
    }

    #[test]
    fn net_output_only_in_main_and_at_most_once() {
        assert_eq!(
            problems(|eg| {
                let mut n = eg.main.nodes[7].clone();
                n.name = "out2".into();
                eg.main.add(n.clone());
                n.inputs.clear();
                eg.deinit.add(n);
            }),
            [
                "Main: 2 NetOutput nodes, at most one allowed",
                "DeInit: node 2 \"out2\": NetOutput outside Main",
            ]
        );
    }

    #[test]
    fn net_output_inputs_match_model_outputs() {
        one(
            |eg| eg.outputs.push(ModelIo::default()),
            "Main: node 7 \"out\": NetOutput has 2 inputs, the model's 2 outputs need 4",
        );
        one(
            |eg| {
                eg.main.nodes.pop();
            },
            "Main: no NetOutput, the model has 1 outputs",
        );
    }

    #[test]
    fn at_most_one_inner_net_output() {
        one(
            |eg| {
                let mut n = eg.init.nodes[3].clone();
                n.name = "exports2".into();
                eg.init.add(n);
            },
            "Init: 2 InnerNetOutput nodes, at most one allowed",
        );
    }

    #[test]
    fn subgraph_outputs_match_owner_outputs() {
        assert_eq!(
            problems(|eg| {
                eg.main.nodes[6].outputs = 3;
                eg.main.nodes[6].subgraphs[1].nodes.pop();
            }),
            [
                "Main/if.then: node 1 \"out\": InnerNetOutput has 2 inputs, owner \"if\" has 3 outputs",
                "Main/if.else: no InnerNetOutput, owner \"if\" has 3 outputs",
            ]
        );
    }

    #[test]
    fn while_cond_yields_the_condition_not_the_outputs() {
        let mut eg = sample();
        eg.main.nodes[6].kernel = "While".into();
        eg.main.nodes[6].subgraphs[0].nodes[1].inputs.truncate(1);
        assert_eq!(check(&eg), []);
        // A Loop's body yields the condition before the owner's outputs.
        eg.main.nodes[6].kernel = "Loop".into();
        let body = eg.main.nodes[6].subgraphs.pop().unwrap();
        eg.main.nodes[6].subgraphs = vec![body];
        assert_eq!(
            check(&eg)
                .iter()
                .map(Problem::to_string)
                .collect::<Vec<_>>(),
            [
                "Main/if.else: node 1 \"out\": InnerNetOutput has 2 inputs, owner \"if\" has 2 outputs plus the condition"
            ]
        );
        let out = &mut eg.main.nodes[6].subgraphs[0].nodes[1];
        out.inputs.insert(0, out.inputs[0]);
        assert_eq!(check(&eg), []);
    }

    #[test]
    fn control_flow_subgraph_counts() {
        assert_eq!(
            problems(|eg| {
                let sub = eg.main.nodes[6].subgraphs.pop().unwrap();
                eg.main.nodes[4].subgraphs.push(sub);
            }),
            [
                "Main: node 4 \"ws\": owns 1 subgraphs, kernel type AllocMemHbm needs none",
                "Main: node 6 \"if\": owns 1 subgraphs, kernel type If needs 2",
                // A stray subgraph is still checked, against its (wrong) owner.
                "Main/ws.else: node 0 \"in\": InnerData index 0 is out of range 0..0 of owner inputs",
                "Main/ws.else: node 1 \"out\": InnerNetOutput has 2 inputs, owner \"ws\" has 1 outputs",
            ]
        );
        one(
            |eg| {
                eg.main.nodes[6].kernel = "Case".into();
                eg.main.nodes[6].subgraphs.clear();
            },
            "Main: node 6 \"if\": owns 0 subgraphs, kernel type Case needs at least 1",
        );
    }

    #[test]
    fn tensor_attribute_size() {
        assert_eq!(
            problems(|eg| {
                let t = |shape: Vec<i64>| {
                    KernelAttr::Tensor(std::sync::Arc::new(ExecTensor {
                        dtype: DType::F32,
                        shape,
                        data: vec![0; 4].into(),
                    }))
                };
                let a = &mut eg.init.nodes[1].attrs;
                a.insert("value".into(), t(vec![3]));
                a.insert("neg".into(), t(vec![-1]));
                a.insert("huge".into(), t(vec![i64::MAX, i64::MAX]));
            }),
            [
                "Init: node 1 \"w\": tensor attribute \"huge\" has 4 bytes, [9223372036854775807, 9223372036854775807] of float32 needs more than 2^64",
                "Init: node 1 \"w\": tensor attribute \"neg\" has negative dim -1",
                "Init: node 1 \"w\": tensor attribute \"value\" has 4 bytes, [3] of float32 needs 12",
            ]
        );
    }

    #[test]
    fn every_problem_is_reported_not_the_first() {
        let got = problems(|eg| {
            eg.init.nodes[2].kernel = "Nope".into();
            eg.main.nodes[3].control_inputs.push(id(100));
            eg.main.nodes[6].subgraphs[1].nodes[0].name = "out".into();
            eg.deinit.nodes[0].attrs.clear();
            eg.outputs.clear();
        });
        assert_eq!(
            got,
            [
                "Init: node 2 \"w_dev\": unknown kernel type \"Nope\"",
                "Main: node 3 \"conv1_launch\": control input refers to node 100, out of range 0..8",
                "Main: node 7 \"out\": NetOutput has 2 inputs, the model's 0 outputs need 0",
                "Main/if.else: node 1 \"out\": duplicate node name, also node 0",
                "DeInit: node 0 \"streams\": InnerData has no int attribute \"index\"",
            ]
        );
    }

    #[test]
    fn empty_graph_is_valid() {
        assert_eq!(check(&ExecuteGraph::default()), []);
    }
}
