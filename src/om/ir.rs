//! Conversion between GE IR (`ge.proto.ModelDef`) and the typed [`ComputeModel`].
//!
//! GE IR stores a model flat: `graph[0]` is the root and every subgraph follows it, linked
//! to its caller by name through the caller's `subgraph_name` list. Edges are strings:
//! each `OpDef.input` entry is `"src:idx"` (a data edge to the next input index), `""` (an
//! unconnected input, which still uses up an index) or `"src:-1"` (a control edge); the
//! source and index are split at the last `:`. This module turns that into owned subgraphs
//! and `NodeId`-based edges, and back.
//!
//! Invariants: conversion does no IO, never panics on any `ModelDef`, and reports the graph
//! and node of every fault. Attribute compression must already be undone (see `compress`).
//! The round trip is lossless: `into_model_def(from_model_def(m)?) == m` for every `m`
//! that converts, including fields rt2 does not model (carried in `rest`) and lists that
//! do not follow the `val_type` convention (carried as [`AttrValue::RawList`]).
//!
//! Both directions *move* strings, maps and tensors rather than copying them: a graph of
//! 100,000 nodes holds millions of attribute entries, and a copy of each would cost as much
//! as decoding the file.

use std::collections::BTreeMap;

// foldhash's randomly seeded hasher, not SipHash: the keys are the file's names, and
// linking a graph looks up every edge's source by name.
use foldhash::{HashMap, HashMapExt};

use rayon::prelude::*;

use crate::om::graph::{
    AttrMap, AttrValue, ComputeGraph, ComputeModel, ComputeNode, ListAttr, NodeId, OutPort, Shape,
    Tensor, TensorDesc,
};
use crate::om::intern::AttrInterner;
use crate::om::{DataType, OmError, Place, Result};
use crate::proto::ge_ir::{self, attr_def, attr_def::list_value::ListValueType};

/// Subgraphs nest at most this deep; deeper nesting in a file is an error, not a stack
/// overflow.
const MAX_SUBGRAPH_DEPTH: usize = 256;

/// Builds the typed model from GE IR, consuming it.
pub fn from_model_def(mut md: ge_ir::ModelDef) -> Result<ComputeModel> {
    let graphs = std::mem::take(&mut md.graph)
        .into_iter()
        .map(|mut g| {
            let nodes = pending_nodes(std::mem::take(&mut g.op), Ok)?;
            Ok(pending_graph(g, nodes))
        })
        .collect::<Result<Vec<_>>>()?;
    assemble(md, graphs)
}

/// A node converted on its own, before the graph it belongs to is known: its edges and
/// subgraphs are still GE IR strings.
pub struct PendingNode {
    node: ComputeNode,
    input: Vec<String>,
    subgraph_name: Vec<String>,
}

impl PendingNode {
    /// A node typed already, its data inputs (`op:index`, as GE IR names them) and
    /// subgraphs (by name) still to be linked.
    pub fn new(node: ComputeNode, input: Vec<String>, subgraph_name: Vec<String>) -> Self {
        PendingNode {
            node,
            input,
            subgraph_name,
        }
    }
}

/// A graph whose nodes are converted but not yet linked.
pub struct PendingGraph {
    def: ge_ir::GraphDef,
    nodes: Vec<PendingNode>,
}

/// Converts one op on its own (it needs nothing of the rest of the graph), so that a
/// reader can convert each op as it decodes it and never hold the whole GE IR and the
/// typed graph at once.
fn pending_node(op: ge_ir::OpDef) -> PendingNode {
    // What rt2 models is taken out; everything else stays in `rest`, verbatim.
    let mut rest = op;
    let input = std::mem::take(&mut rest.input);
    let subgraph_name = std::mem::take(&mut rest.subgraph_name);
    let id = std::mem::take(&mut rest.id);
    let node = ComputeNode {
        name: std::mem::take(&mut rest.name),
        op_type: std::mem::take(&mut rest.r#type),
        inputs: Vec::new(),
        control_inputs: Vec::new(),
        input_descs: std::mem::take(&mut rest.input_desc)
            .into_iter()
            .map(convert_desc)
            .collect(),
        output_descs: std::mem::take(&mut rest.output_desc)
            .into_iter()
            .map(convert_desc)
            .collect(),
        attrs: convert_attrs(std::mem::take(&mut rest.attr)),
        subgraphs: Vec::new(),
        id,
        rest: (rest != ge_ir::OpDef::default()).then(|| Box::new(rest)),
    };
    PendingNode {
        node,
        input,
        subgraph_name,
    }
}

/// Types one graph's ops, `op_def` giving each op's GE IR from its item (the op itself,
/// or its bytes for a reader that decodes op by op), each with its descriptors' attribute
/// maps shared ([`intern_desc_attrs`]); a large graph on all cores, one interner per
/// worker. The first error ends it.
pub fn pending_nodes<T: Send>(
    items: Vec<T>,
    op_def: impl Fn(T) -> Result<ge_ir::OpDef> + Sync + Send,
) -> Result<Vec<PendingNode>> {
    let convert = |interner: &mut AttrInterner, item: T| -> Result<PendingNode> {
        let mut node = pending_node(op_def(item)?);
        intern_desc_attrs(&mut node, interner);
        Ok(node)
    };
    if items.len() >= PARALLEL_NODES {
        items
            .into_par_iter()
            .map_init(AttrInterner::new, convert)
            .collect()
    } else {
        let mut interner = AttrInterner::new();
        items
            .into_iter()
            .map(|item| convert(&mut interner, item))
            .collect()
    }
}

/// Shares the attribute maps of the node's descriptors (and of the descriptors of the
/// tensors its attributes hold) with the equal maps `interner` met before: the node is
/// the same value, in a fraction of the memory when the graph's descriptors repeat.
pub fn intern_desc_attrs(pending: &mut PendingNode, interner: &mut AttrInterner) {
    let node = &mut pending.node;
    let descs = node.input_descs.iter_mut().chain(&mut node.output_descs);
    for d in descs {
        d.attrs = interner.intern(std::mem::take(&mut d.attrs));
    }
    for v in node.attrs.values_mut() {
        if let AttrValue::Tensor(t) = v {
            t.desc.attrs = interner.intern(std::mem::take(&mut t.desc.attrs));
        }
    }
}

/// A graph's own fields (its `op` list is ignored) with its converted nodes.
pub fn pending_graph(def: ge_ir::GraphDef, nodes: Vec<PendingNode>) -> PendingGraph {
    PendingGraph { def, nodes }
}

/// Links pending graphs into a model: the first is the root, the rest are subgraphs found
/// by name from their callers, or detached. `md` gives the model's own fields; its `graph`
/// list is ignored.
///
/// Names resolve as GE's `ModelSerializeImp::UnserializeModel` resolves them (docs/
/// OM_MODELS.md): every graph after the first goes into a table by name, in any order; a
/// name may be called from several nodes (each call site gets its own copy here, since a
/// ComputeGraph owns its subgraphs); graphs no node calls are kept as detached. A name
/// the table lacks is an error when the `ModelDef` holds more than one graph, and an
/// [external](ComputeGraph::external) reference when it holds only the root, which GE
/// reads without looking names up. Empty names, which GE skips, stay external too.
pub fn assemble(md: ge_ir::ModelDef, graphs: Vec<PendingGraph>) -> Result<ComputeModel> {
    let ge_ir::ModelDef {
        name,
        version,
        custom_version,
        graph: _,
        attr,
        attr_groups,
    } = md;
    if graphs.is_empty() {
        return Err(OmError::graph(
            Place::new("model"),
            "the model has no graph",
        ));
    }
    let mut by_name: HashMap<String, usize> = HashMap::with_capacity(graphs.len());
    for (i, g) in graphs.iter().enumerate().skip(1) {
        if g.def.name == graphs[0].def.name || by_name.insert(g.def.name.clone(), i).is_some() {
            return Err(OmError::graph(
                Place::graph(&g.def.name),
                "two graphs in the model have this name",
            ));
        }
    }
    let strict = graphs.len() > 1;
    let mut entries = graphs
        .into_iter()
        .map(link_graph)
        .collect::<Result<Vec<_>>>()?;
    let plan = plan_instances(&entries, &by_name, strict)?;
    let mut build = Instantiate {
        entries: &mut entries,
        by_name: &by_name,
        remaining: plan.uses,
    };
    let root = build.graph(0)?;
    let detached = plan
        .detached
        .into_iter()
        .map(|i| build.graph(i))
        .collect::<Result<Vec<_>>>()?;
    Ok(ComputeModel {
        name,
        version,
        custom_version,
        attrs: convert_attrs(attr),
        attr_groups,
        root,
        detached,
    })
}

/// A graph linked on its own: its nodes' edges resolved, the subgraph names each node
/// calls still names.
#[derive(Clone)]
struct Linked {
    graph: ComputeGraph,
    calls: Vec<Vec<String>>,
}

/// How many copies of each graph the model needs, and which graphs are detached roots.
struct Plan {
    uses: Vec<u64>,
    detached: Vec<usize>,
}

/// Sharing lets a small file describe a huge tree (each graph calling the next twice);
/// past this many nodes after copying, and past [`EXPANSION_FACTOR`] times the file's own
/// node count, the file is refused rather than expanded.
const MAX_EXPANDED_NODES: u64 = 1 << 22;
const EXPANSION_FACTOR: u64 = 16;

/// Walks the calls from the root and then from the graphs nothing reachable calls:
/// finds cycles, names the root cannot resolve (when `strict`), the detached roots, and
/// the number of instances of each graph.
fn plan_instances(
    entries: &[Linked],
    by_name: &HashMap<String, usize>,
    strict: bool,
) -> Result<Plan> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    struct Walk<'a> {
        entries: &'a [Linked],
        by_name: &'a HashMap<String, usize>,
        marks: Vec<Mark>,
        post: Vec<usize>,
    }
    impl Walk<'_> {
        fn visit(&mut self, i: usize, depth: usize, strict: bool) -> Result<()> {
            let g = &self.entries[i].graph;
            if depth > MAX_SUBGRAPH_DEPTH {
                return Err(OmError::graph(
                    Place::graph(&g.name),
                    format!("subgraphs nest deeper than {MAX_SUBGRAPH_DEPTH} levels"),
                ));
            }
            self.marks[i] = Mark::Open;
            for (n, names) in g.nodes.iter().zip(&self.entries[i].calls) {
                for name in names {
                    let Some(&c) = self.by_name.get(name.as_str()) else {
                        if strict && !name.is_empty() {
                            return Err(OmError::graph(
                                Place::node(&g.name, &n.name),
                                format!("subgraph {name:?} is not in the model"),
                            ));
                        }
                        continue;
                    };
                    match self.marks[c] {
                        Mark::Open => {
                            return Err(OmError::graph(
                                Place::node(&g.name, &n.name),
                                format!("subgraph {name:?} calls itself"),
                            ));
                        }
                        Mark::New => self.visit(c, depth + 1, strict)?,
                        Mark::Done => {}
                    }
                }
            }
            self.marks[i] = Mark::Done;
            self.post.push(i);
            Ok(())
        }
    }
    let mut walk = Walk {
        entries,
        by_name,
        marks: vec![Mark::New; entries.len()],
        post: Vec::with_capacity(entries.len()),
    };
    walk.visit(0, 0, strict)?;
    // GE drops the graphs no node reachable from the root calls; rt2 keeps them (they are
    // written back) without holding them to the root's rules. The detached roots are those
    // no other unreachable graph calls; what is left after them is a cycle.
    let unreachable: Vec<usize> = (0..entries.len())
        .filter(|&i| walk.marks[i] == Mark::New)
        .collect();
    let mut called = vec![false; entries.len()];
    for &i in &unreachable {
        for name in entries[i].calls.iter().flatten() {
            if let Some(&c) = by_name.get(name.as_str()) {
                called[c] = true;
            }
        }
    }
    let mut detached: Vec<usize> = unreachable
        .iter()
        .copied()
        .filter(|&i| !called[i])
        .collect();
    for &i in &detached {
        walk.visit(i, 0, false)?;
    }
    for &i in &unreachable {
        if walk.marks[i] == Mark::New {
            walk.visit(i, 0, false)?;
            detached.push(i);
        }
    }
    // Reverse post-order puts every caller before the graphs it calls.
    let mut uses = vec![0u64; entries.len()];
    uses[0] = 1;
    for &i in &detached {
        uses[i] = 1;
    }
    // A graph first met near the root may lie deep on another path: the depth that
    // counts is the longest path's.
    let mut level = vec![0usize; entries.len()];
    let mut expanded = 0u64;
    let mut own = 0u64;
    for &i in walk.post.iter().rev() {
        let e = &entries[i];
        let nodes = e.graph.nodes.len() as u64;
        own += nodes;
        expanded = expanded.saturating_add(uses[i].saturating_mul(nodes));
        for name in e.calls.iter().flatten() {
            if let Some(&c) = by_name.get(name.as_str()) {
                uses[c] = uses[c].saturating_add(uses[i]);
                level[c] = level[c].max(level[i] + 1);
                if level[c] > MAX_SUBGRAPH_DEPTH {
                    return Err(OmError::graph(
                        Place::graph(name),
                        format!("subgraphs nest deeper than {MAX_SUBGRAPH_DEPTH} levels"),
                    ));
                }
            }
        }
    }
    let limit = MAX_EXPANDED_NODES.max(own.saturating_mul(EXPANSION_FACTOR));
    if expanded > limit {
        return Err(OmError::graph(
            Place::graph(&entries[0].graph.name),
            format!(
                "subgraphs called from several nodes expand the model to {expanded} nodes, \
                 more than {limit}"
            ),
        ));
    }
    Ok(Plan { uses, detached })
}

/// Builds the owned tree: each use of a graph takes a copy, the last one the graph itself,
/// so a graph called once is moved, never copied.
struct Instantiate<'a> {
    entries: &'a mut [Linked],
    by_name: &'a HashMap<String, usize>,
    remaining: Vec<u64>,
}

impl Instantiate<'_> {
    fn graph(&mut self, i: usize) -> Result<ComputeGraph> {
        self.remaining[i] = self.remaining[i].saturating_sub(1);
        let Linked { mut graph, calls } = if self.remaining[i] == 0 {
            std::mem::replace(
                &mut self.entries[i],
                Linked {
                    graph: ComputeGraph::default(),
                    calls: Vec::new(),
                },
            )
        } else {
            self.entries[i].clone()
        };
        for (node, names) in graph.nodes.iter_mut().zip(calls) {
            node.subgraphs = names
                .into_iter()
                .map(|name| match self.by_name.get(name.as_str()) {
                    Some(&c) => self.graph(c),
                    None => Ok(ComputeGraph::external(name)),
                })
                .collect::<Result<_>>()?;
        }
        Ok(graph)
    }
}

/// Serializes the typed model to GE IR: the root graph first, then every subgraph depth
/// first in call order, then detached graphs. A subgraph called from several nodes is
/// written once (at its first call); an [external](ComputeGraph::external) one is only
/// named by its caller.
pub fn to_model_def(model: &ComputeModel) -> ge_ir::ModelDef {
    into_model_def(model.clone())
}

/// [`to_model_def`], consuming the model.
pub fn into_model_def(model: ComputeModel) -> ge_ir::ModelDef {
    let graphs = flatten(model.root, model.detached)
        .into_iter()
        .map(graph_def)
        .collect();
    ge_ir::ModelDef {
        name: model.name,
        version: model.version,
        custom_version: model.custom_version,
        graph: graphs,
        attr: attrs_to_proto(model.attrs),
        attr_groups: model.attr_groups,
    }
}

/// One graph of a model as GE IR lays it out: the graph with its nodes' subgraphs taken
/// out (each is a graph of its own), and per node the names of the subgraphs it calls.
pub(crate) struct FlatGraph {
    pub graph: ComputeGraph,
    pub calls: Vec<Vec<String>>,
}

/// The graphs of a model in the order GE IR holds them ([`to_model_def`]): `root`, then
/// every subgraph depth first in call order, then the detached graphs. A subgraph called
/// from several nodes is kept once (at its first call); an external one is only named.
pub(crate) fn flatten(root: ComputeGraph, detached: Vec<ComputeGraph>) -> Vec<FlatGraph> {
    let mut out = Vec::new();
    let mut written = std::collections::HashSet::new();
    push_flat(root, &mut out, &mut written);
    for g in detached {
        push_flat(g, &mut out, &mut written);
    }
    out
}

fn push_flat(
    mut g: ComputeGraph,
    out: &mut Vec<FlatGraph>,
    written: &mut std::collections::HashSet<String>,
) {
    if g.external || (!out.is_empty() && !written.insert(g.name.clone())) {
        return;
    }
    let mut subgraphs = Vec::new();
    let calls = g
        .nodes
        .iter_mut()
        .map(|n| {
            let names = n.subgraphs.iter().map(|s| s.name.clone()).collect();
            subgraphs.append(&mut n.subgraphs);
            names
        })
        .collect();
    out.push(FlatGraph { graph: g, calls });
    for sub in subgraphs {
        push_flat(sub, out, written);
    }
}

/// A port as GE IR names it: `<node>:<index>` (`-1` for a control edge).
pub(crate) fn port_name(node: &str, index: i64) -> String {
    format!("{node}:{index}")
}

fn graph_def(flat: FlatGraph) -> ge_ir::GraphDef {
    let g = flat.graph;
    let names: Vec<String> = g.nodes.iter().map(|n| n.name.clone()).collect();
    let name_of = |i: usize| names[i].as_str();
    let port = |p: &OutPort| port_name(name_of(p.node.index()), i64::from(p.index));
    let ops = g
        .nodes
        .into_iter()
        .zip(flat.calls)
        .map(|(n, calls)| node_to_op(n, calls, &name_of))
        .collect();
    ge_ir::GraphDef {
        name: g.name,
        input: g.inputs.iter().map(port).collect(),
        output: g.outputs.iter().map(port).collect(),
        op: ops,
        attr: attrs_to_proto(g.attrs),
        attr_groups: g.attr_groups,
    }
}

/// The GE IR op of a node whose subgraphs are named `calls`; `name_of` names the nodes of
/// its graph by index.
pub(crate) fn node_to_op<'a>(
    n: ComputeNode,
    calls: Vec<String>,
    name_of: &impl Fn(usize) -> &'a str,
) -> ge_ir::OpDef {
    let mut op = n.rest.map(|r| *r).unwrap_or_default();
    op.id = n.id;
    op.input = n
        .inputs
        .iter()
        .map(|i| {
            i.as_ref()
                .map(|p| port_name(name_of(p.node.index()), i64::from(p.index)))
                .unwrap_or_default()
        })
        .chain(
            n.control_inputs
                .iter()
                .map(|c| port_name(name_of(c.index()), -1)),
        )
        .collect();
    op.name = n.name;
    op.r#type = n.op_type;
    op.attr = attrs_to_proto(n.attrs);
    op.input_desc = n.input_descs.into_iter().map(desc_to_proto).collect();
    op.output_desc = n.output_descs.into_iter().map(desc_to_proto).collect();
    op.subgraph_name = calls;
    op
}

/// Splits `"name:idx"` at the last colon. `None` when there is no colon or the index is
/// not an integer.
pub fn split_port(s: &str) -> Option<(&str, i64)> {
    let (name, idx) = s.rsplit_once(':')?;
    Some((name, idx.trim().parse().ok()?))
}

/// Resolves one graph's edges; the names of the subgraphs its nodes call are set aside.
fn link_graph(pg: PendingGraph) -> Result<Linked> {
    let PendingGraph {
        def,
        nodes: pending,
    } = pg;
    let ge_ir::GraphDef {
        name: gname,
        input,
        output,
        op: _,
        attr,
        attr_groups,
    } = def;
    let mut ids: HashMap<&str, NodeId> = HashMap::with_capacity(pending.len());
    for (i, p) in pending.iter().enumerate() {
        if ids.insert(p.node.name.as_str(), NodeId(i as u32)).is_some() {
            return Err(OmError::graph(
                Place::node(&gname, &p.node.name),
                "two nodes in the graph have this name",
            ));
        }
    }
    let resolve = |s: &str, place: &dyn Fn() -> Place, what: &str| -> Result<(NodeId, i64)> {
        let (src, idx) = split_port(s).ok_or_else(|| {
            OmError::graph(
                place(),
                format!("{what} {s:?} is not of the form \"node:index\""),
            )
        })?;
        let id = ids.get(src).copied().ok_or_else(|| {
            OmError::graph(place(), format!("{what} {s:?} names no node of the graph"))
        })?;
        Ok((id, idx))
    };
    let mut edges = Vec::with_capacity(pending.len());
    for p in &pending {
        let place = || Place::node(&gname, &p.node.name);
        let mut inputs = Vec::with_capacity(p.input.len());
        let mut control_inputs = Vec::new();
        for entry in &p.input {
            if entry.is_empty() {
                inputs.push(None);
                continue;
            }
            let (src, idx) = resolve(entry, &place, "input")?;
            match idx {
                -1 => control_inputs.push(src),
                i if i >= 0 && i <= u32::MAX as i64 => inputs.push(Some(OutPort {
                    node: src,
                    index: i as u32,
                })),
                _ => {
                    return Err(OmError::graph(
                        place(),
                        format!("input {entry:?} has an invalid output index"),
                    ));
                }
            }
        }
        edges.push((inputs, control_inputs));
    }
    let port = |s: &String, what: &str| -> Result<OutPort> {
        let place = || Place::graph(&gname);
        let (node, idx) = resolve(s, &place, what)?;
        u32::try_from(idx)
            .map(|index| OutPort { node, index })
            .map_err(|_| {
                OmError::graph(place(), format!("{what} {s:?} has an invalid output index"))
            })
    };
    let inputs = input
        .iter()
        .map(|s| port(s, "graph input"))
        .collect::<Result<_>>()?;
    let outputs = output
        .iter()
        .map(|s| port(s, "graph output"))
        .collect::<Result<_>>()?;
    drop(ids);

    let mut nodes = Vec::with_capacity(pending.len());
    let mut calls = Vec::with_capacity(pending.len());
    for (p, (inputs, control_inputs)) in pending.into_iter().zip(edges) {
        let PendingNode {
            mut node,
            subgraph_name,
            ..
        } = p;
        node.inputs = inputs;
        node.control_inputs = control_inputs;
        nodes.push(node);
        calls.push(subgraph_name);
    }
    Ok(Linked {
        graph: ComputeGraph {
            name: gname,
            inputs,
            outputs,
            nodes,
            attrs: convert_attrs(attr),
            attr_groups,
            external: false,
        },
        calls,
    })
}

/// Below this many nodes a graph converts on one thread.
pub const PARALLEL_NODES: usize = 4096;

/// Typed view of a GE tensor descriptor.
pub fn convert_desc(d: ge_ir::TensorDescriptor) -> TensorDesc {
    let mut rest = d;
    let dtype = DataType::from_proto(rest.dtype).unwrap_or(DataType::Undefined);
    // An unknown dtype number is kept so that writing back reproduces it.
    if dtype != DataType::Undefined || rest.dtype == 0 {
        rest.dtype = 0;
    }
    let has_shape = rest.shape.is_some();
    let shape = match rest.shape.take() {
        Some(s) => Shape::from_dims(&s.dim),
        None => Shape::scalar(),
    };
    TensorDesc {
        name: std::mem::take(&mut rest.name),
        dtype,
        shape,
        has_shape,
        layout: std::mem::take(&mut rest.layout),
        device_type: std::mem::take(&mut rest.device_type).into(),
        attrs: convert_attrs(std::mem::take(&mut rest.attr)),
        rest: (rest != ge_ir::TensorDescriptor::default()).then(|| Box::new(rest)),
    }
}

/// GE tensor descriptor of a typed one.
pub fn desc_to_proto(d: TensorDesc) -> ge_ir::TensorDescriptor {
    let mut out = d.rest.map(|r| *r).unwrap_or_default();
    out.name = d.name;
    out.device_type = d.device_type.into();
    if d.dtype != DataType::Undefined {
        out.dtype = d.dtype.to_proto();
    }
    let dims = d.shape.to_dims();
    if d.has_shape || !dims.is_empty() {
        out.shape = Some(ge_ir::ShapeDef { dim: dims });
    }
    out.layout = d.layout;
    out.attr = attrs_to_proto(d.attrs);
    out
}

pub(crate) fn convert_tensor(t: ge_ir::TensorDef) -> Tensor {
    Tensor {
        desc: t.desc.map(convert_desc).unwrap_or_default(),
        data: t.data,
    }
}

fn tensor_to_proto(t: Tensor) -> ge_ir::TensorDef {
    ge_ir::TensorDef {
        desc: Some(desc_to_proto(t.desc)),
        data: t.data,
    }
}

/// Typed view of a GE attribute map.
pub fn convert_attrs(attrs: BTreeMap<String, ge_ir::AttrDef>) -> AttrMap {
    attrs
        .into_iter()
        .map(|(k, v)| (k, convert_attr(v)))
        .collect()
}

/// Typed view of one GE attribute.
pub fn convert_attr(a: ge_ir::AttrDef) -> AttrValue {
    use attr_def::Value as V;
    match a.value {
        None => AttrValue::Empty,
        Some(V::S(s)) => AttrValue::Str(s),
        Some(V::I(i)) => AttrValue::Int(i),
        Some(V::F(f)) => AttrValue::Float(f),
        Some(V::B(b)) => AttrValue::Bool(b),
        Some(V::Bt(b)) => AttrValue::Bytes(b),
        Some(V::List(l)) => convert_list(l),
        Some(V::Func(f)) => AttrValue::Func(f),
        Some(V::Td(td)) => AttrValue::TensorDesc(Box::new(convert_desc(*td))),
        Some(V::T(t)) => AttrValue::Tensor(Box::new(convert_tensor(*t))),
        Some(V::G(g)) => AttrValue::Graph(g),
        Some(V::ListListInt(l)) => {
            AttrValue::ListListInt(l.list_list_i.into_iter().map(|x| x.list_i).collect())
        }
        Some(V::ListListFloat(l)) => {
            AttrValue::ListListFloat(l.list_list_f.into_iter().map(|x| x.list_f).collect())
        }
        Some(V::Dt(d)) => match DataType::from_ge(d) {
            Some(dt) => AttrValue::DataType(dt),
            None => AttrValue::RawDataType(d),
        },
        Some(V::Expression(e)) => AttrValue::Expression(e),
    }
}

/// A list whose `val_type` names the one field that holds its values (or an empty list
/// with no type) is typed; anything else (files from before `val_type` existed, lists with
/// several fields set) is kept verbatim so that writing it back changes nothing.
fn convert_list(l: Box<attr_def::ListValue>) -> AttrValue {
    let vt = ListValueType::try_from(l.val_type).ok();
    let filled = [
        !l.s.is_empty(),
        !l.i.is_empty(),
        !l.f.is_empty(),
        !l.b.is_empty(),
        !l.bt.is_empty(),
        !l.td.is_empty(),
        !l.t.is_empty(),
        !l.g.is_empty(),
        !l.na.is_empty(),
        !l.dt.is_empty(),
    ];
    let holder = match vt {
        Some(ListValueType::VtListString) => Some(0),
        Some(ListValueType::VtListInt) => Some(1),
        Some(ListValueType::VtListFloat) => Some(2),
        Some(ListValueType::VtListBool) => Some(3),
        Some(ListValueType::VtListBytes) => Some(4),
        Some(ListValueType::VtListTensorDesc) => Some(5),
        Some(ListValueType::VtListTensor) => Some(6),
        Some(ListValueType::VtListGraph) => Some(7),
        Some(ListValueType::VtListNamedAttrs) => Some(8),
        Some(ListValueType::VtListDataType) => Some(9),
        Some(ListValueType::VtListNone) | None => None,
    };
    let canonical = match (vt, holder) {
        (Some(_), Some(h)) => filled.iter().enumerate().all(|(i, &f)| !f || i == h),
        (Some(ListValueType::VtListNone), None) => filled.iter().all(|f| !f),
        _ => false,
    };
    if !canonical {
        return AttrValue::RawList(l);
    }
    let l = *l;
    AttrValue::List(match vt {
        Some(ListValueType::VtListString) => ListAttr::Str(l.s),
        Some(ListValueType::VtListInt) => ListAttr::Int(l.i),
        Some(ListValueType::VtListFloat) => ListAttr::Float(l.f),
        Some(ListValueType::VtListBool) => ListAttr::Bool(l.b),
        Some(ListValueType::VtListBytes) => ListAttr::Bytes(l.bt),
        Some(ListValueType::VtListTensorDesc) => {
            ListAttr::TensorDesc(l.td.into_iter().map(convert_desc).collect())
        }
        Some(ListValueType::VtListTensor) => {
            ListAttr::Tensor(l.t.into_iter().map(convert_tensor).collect())
        }
        Some(ListValueType::VtListGraph) => ListAttr::Graph(l.g),
        Some(ListValueType::VtListNamedAttrs) => ListAttr::NamedAttrs(l.na),
        Some(ListValueType::VtListDataType) => ListAttr::DataType(l.dt),
        _ => ListAttr::None,
    })
}

/// GE attribute map of a typed one.
pub fn attrs_to_proto(attrs: AttrMap) -> BTreeMap<String, ge_ir::AttrDef> {
    attrs
        .into_iter()
        .map(|(k, v)| (k, attr_to_proto(v)))
        .collect()
}

/// GE attribute of a typed one.
pub fn attr_to_proto(v: AttrValue) -> ge_ir::AttrDef {
    use attr_def::Value as V;
    let value = match v {
        AttrValue::Empty => None,
        AttrValue::Str(s) => Some(V::S(s)),
        AttrValue::Int(i) => Some(V::I(i)),
        AttrValue::Float(f) => Some(V::F(f)),
        AttrValue::Bool(b) => Some(V::B(b)),
        AttrValue::Bytes(b) => Some(V::Bt(b)),
        AttrValue::List(l) => Some(V::List(Box::new(list_to_proto(l)))),
        AttrValue::RawList(l) => Some(V::List(l)),
        AttrValue::Func(f) => Some(V::Func(f)),
        AttrValue::TensorDesc(td) => Some(V::Td(Box::new(desc_to_proto(*td)))),
        AttrValue::Tensor(t) => Some(V::T(Box::new(tensor_to_proto(*t)))),
        AttrValue::Graph(g) => Some(V::G(g)),
        AttrValue::ListListInt(l) => Some(V::ListListInt(Box::new(attr_def::ListListInt {
            list_list_i: l
                .into_iter()
                .map(|x| attr_def::list_list_int::ListInt { list_i: x })
                .collect(),
        }))),
        AttrValue::ListListFloat(l) => Some(V::ListListFloat(Box::new(attr_def::ListListFloat {
            list_list_f: l
                .into_iter()
                .map(|x| attr_def::list_list_float::ListFloat { list_f: x })
                .collect(),
        }))),
        AttrValue::DataType(d) => Some(V::Dt(d.to_ge())),
        AttrValue::RawDataType(d) => Some(V::Dt(d)),
        AttrValue::Expression(e) => Some(V::Expression(e)),
    };
    ge_ir::AttrDef { value }
}

fn list_to_proto(l: ListAttr) -> attr_def::ListValue {
    let mut out = attr_def::ListValue::default();
    let vt = match l {
        ListAttr::None => ListValueType::VtListNone,
        ListAttr::Str(v) => {
            out.s = v;
            ListValueType::VtListString
        }
        ListAttr::Int(v) => {
            out.i = v;
            ListValueType::VtListInt
        }
        ListAttr::Float(v) => {
            out.f = v;
            ListValueType::VtListFloat
        }
        ListAttr::Bool(v) => {
            out.b = v;
            ListValueType::VtListBool
        }
        ListAttr::Bytes(v) => {
            out.bt = v;
            ListValueType::VtListBytes
        }
        ListAttr::TensorDesc(v) => {
            out.td = v.into_iter().map(desc_to_proto).collect();
            ListValueType::VtListTensorDesc
        }
        ListAttr::Tensor(v) => {
            out.t = v.into_iter().map(tensor_to_proto).collect();
            ListValueType::VtListTensor
        }
        ListAttr::Graph(v) => {
            out.g = v;
            ListValueType::VtListGraph
        }
        ListAttr::NamedAttrs(v) => {
            out.na = v;
            ListValueType::VtListNamedAttrs
        }
        ListAttr::DataType(v) => {
            out.dt = v;
            ListValueType::VtListDataType
        }
    };
    out.val_type = vt as i32;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, ty: &str, inputs: &[&str]) -> ge_ir::OpDef {
        ge_ir::OpDef {
            name: name.into(),
            r#type: ty.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn desc(dims: &[i64]) -> ge_ir::TensorDescriptor {
        ge_ir::TensorDescriptor {
            dtype: DataType::Float32.to_proto(),
            shape: Some(ge_ir::ShapeDef { dim: dims.to_vec() }),
            layout: "ND".into(),
            ..Default::default()
        }
    }

    fn model() -> ge_ir::ModelDef {
        let mut data = op("x", "Data", &[]);
        data.attr.insert(
            "index".into(),
            ge_ir::AttrDef {
                value: Some(attr_def::Value::I(0)),
            },
        );
        data.output_desc.push(desc(&[-1, 4]));
        let mut cond = op("c", "Data", &[]);
        cond.attr.insert(
            "index".into(),
            ge_ir::AttrDef {
                value: Some(attr_def::Value::I(1)),
            },
        );
        let mut iff = op("if", "If", &["c:0", "x:0", "", "x:-1"]);
        iff.subgraph_name = vec!["then".into(), "else".into()];
        iff.output_desc.push(desc(&[-2]));
        let out = op("out", "NetOutput", &["if:0"]);
        let root = ge_ir::GraphDef {
            name: "root".into(),
            input: vec!["x:0".into(), "c:0".into()],
            output: vec!["if:0".into()],
            op: vec![data, cond, iff, out],
            ..Default::default()
        };
        let branch = |name: &str| ge_ir::GraphDef {
            name: name.into(),
            op: vec![op("d", "Data", &[]), op("o", "NetOutput", &["d:0"])],
            ..Default::default()
        };
        ge_ir::ModelDef {
            name: "m".into(),
            graph: vec![root, branch("then"), branch("else")],
            ..Default::default()
        }
    }

    #[test]
    fn edges_subgraphs_and_shapes() {
        let m = from_model_def(model()).unwrap();
        let g = &m.root;
        let iff = g.node(g.find("if").unwrap());
        assert_eq!(
            iff.inputs,
            vec![
                Some(OutPort {
                    node: NodeId(1),
                    index: 0
                }),
                Some(OutPort {
                    node: NodeId(0),
                    index: 0
                }),
                None
            ]
        );
        assert_eq!(iff.control_inputs, vec![NodeId(0)]);
        assert_eq!(
            iff.subgraphs
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            ["then", "else"]
        );
        assert_eq!(iff.output_descs[0].shape, Shape::UnknownRank);
        assert_eq!(
            g.node(NodeId(0)).output_descs[0].shape,
            Shape::Dims(vec![-1, 4])
        );
        assert_eq!(g.node(NodeId(0)).attr_int("index"), Some(0));
        assert!(m.is_dynamic());
        assert!(m.detached.is_empty());
        assert_eq!(m.root.total_nodes(), 8);
    }

    #[test]
    fn round_trip_is_lossless() {
        let md = model();
        let back = into_model_def(from_model_def(md.clone()).unwrap());
        assert_eq!(back, md);
        assert_eq!(back.graph[0].op[2].input, ["c:0", "x:0", "", "x:-1"]);
        // Every AttrDef variant, every TensorDescriptor field, lists with and without
        // val_type, attribute groups: all come back unchanged.
        // (Its edges name nodes it does not have; they are not what this checks.)
        let mut every = crate::om::testdata_text::every_variant_model();
        for g in &mut every.graph {
            g.input.clear();
            g.output.clear();
            for op in &mut g.op {
                op.input.clear();
            }
        }
        assert_eq!(
            into_model_def(from_model_def(every.clone()).unwrap()),
            every
        );
        let mut untyped = model();
        untyped.graph[0].op[0].attr.insert(
            "old_list".into(),
            ge_ir::AttrDef {
                value: Some(attr_def::Value::List(Box::new(attr_def::ListValue {
                    i: vec![1, 2],
                    ..Default::default()
                }))),
            },
        );
        let m = from_model_def(untyped.clone()).unwrap();
        assert!(matches!(
            m.root.nodes[0].attrs["old_list"],
            AttrValue::RawList(_)
        ));
        assert_eq!(into_model_def(m), untyped);
    }

    #[test]
    fn faults_name_graph_and_node() {
        let mut md = model();
        md.graph[0].op[3].input[0] = "nope:0".into();
        let e = from_model_def(md).unwrap_err().to_string();
        assert!(e.contains("graph \"root\": node \"out\""), "{e}");
        assert!(e.contains("\"nope:0\" names no node"), "{e}");

        let mut md = model();
        md.graph.pop();
        let e = from_model_def(md).unwrap_err().to_string();
        assert_eq!(
            e,
            "graph \"root\": node \"if\": subgraph \"else\" is not in the model"
        );

        let mut md = model();
        md.graph[0].op[3].input[0] = "if".into();
        let e = from_model_def(md).unwrap_err().to_string();
        assert!(e.contains("not of the form"), "{e}");
    }

    #[test]
    fn a_subgraph_called_from_several_nodes_is_copied_per_call_and_written_once() {
        let mut md = model();
        // Both branches name "then"; "else" is left over, detached.
        md.graph[0].op[2].subgraph_name = vec!["then".into(), "then".into()];
        let m = from_model_def(md.clone()).unwrap();
        let iff = &m.root.nodes[2];
        assert_eq!(iff.subgraphs[0], iff.subgraphs[1]);
        assert_eq!(iff.subgraphs[0].name, "then");
        assert_eq!(m.detached.len(), 1);
        assert_eq!(into_model_def(m), md);
    }

    #[test]
    fn subgraphs_resolve_in_any_order() {
        let mut md = model();
        // "then" calls "inner"; a detached "outer" calls "leaf"; each callee is listed
        // before its caller.
        let leaf = |name: &str| ge_ir::GraphDef {
            name: name.into(),
            op: vec![op("d", "Data", &[])],
            ..Default::default()
        };
        let mut call = op("c", "PartitionedCall", &[]);
        call.subgraph_name = vec!["inner".into()];
        md.graph[1].op.push(call.clone());
        call.subgraph_name = vec!["leaf".into()];
        let outer = ge_ir::GraphDef {
            name: "outer".into(),
            op: vec![call],
            ..Default::default()
        };
        md.graph.insert(1, leaf("inner"));
        md.graph.push(leaf("leaf"));
        md.graph.push(outer);
        let m = from_model_def(md).unwrap();
        let then = &m.root.nodes[2].subgraphs[0];
        assert_eq!(then.nodes[2].subgraphs[0].name, "inner");
        let detached: Vec<&str> = m.detached.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(detached, ["outer"]);
        assert_eq!(m.detached[0].nodes[0].subgraphs[0].name, "leaf");
    }

    #[test]
    fn a_model_of_one_graph_names_subgraphs_it_does_not_hold() {
        let mut md = model();
        md.graph.truncate(1);
        let m = from_model_def(md.clone()).unwrap();
        let subs = &m.root.nodes[2].subgraphs;
        assert!(subs.iter().all(|s| s.external && s.nodes.is_empty()));
        assert_eq!(subs[1].name, "else");
        // Written back as the names alone.
        assert_eq!(into_model_def(m), md);
    }

    #[test]
    fn empty_subgraph_names_are_skipped_as_ge_skips_them() {
        let mut md = model();
        md.graph[0].op[2].subgraph_name[1] = String::new();
        let m = from_model_def(md).unwrap();
        let subs = &m.root.nodes[2].subgraphs;
        assert!(!subs[0].external);
        assert!(subs[1].external && subs[1].name.is_empty());
        assert_eq!(m.detached.len(), 1, "else is called by no node now");
    }

    #[test]
    fn cycles_and_explosive_sharing_are_refused() {
        let mut md = model();
        let mut call = op("c", "PartitionedCall", &[]);
        call.subgraph_name = vec!["then".into()];
        md.graph[1].op.push(call);
        let e = from_model_def(md).unwrap_err().to_string();
        assert_eq!(
            e,
            "graph \"then\": node \"c\": subgraph \"then\" calls itself"
        );

        // g0 calls g1 twice, g1 calls g2 twice, ...: 2^40 copies of g40.
        let graphs: Vec<ge_ir::GraphDef> = (0..=40)
            .map(|i| {
                let mut ops = vec![op("d", "Data", &[])];
                if i < 40 {
                    let mut c = op("c", "If", &[]);
                    c.subgraph_name = vec![format!("g{}", i + 1); 2];
                    ops.push(c);
                }
                ge_ir::GraphDef {
                    name: format!("g{i}"),
                    op: ops,
                    ..Default::default()
                }
            })
            .collect();
        let e = from_model_def(ge_ir::ModelDef {
            graph: graphs,
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("expand the model to"), "{e}");
    }

    #[test]
    fn unknown_dtype_numbers_survive() {
        let mut md = model();
        md.graph[0].op[0].output_desc[0].dtype = 99;
        let m = from_model_def(md).unwrap();
        assert_eq!(m.root.nodes[0].output_descs[0].dtype, DataType::Undefined);
        assert_eq!(to_model_def(&m).graph[0].op[0].output_desc[0].dtype, 99);
    }

    #[test]
    fn detached_graphs_are_kept() {
        let mut md = model();
        md.graph.push(ge_ir::GraphDef {
            name: "orphan".into(),
            ..Default::default()
        });
        let m = from_model_def(md).unwrap();
        assert_eq!(m.detached.len(), 1);
        assert_eq!(to_model_def(&m).graph.last().unwrap().name, "orphan");
    }
}
