//! The ONNX -> GE IR conversion: one `GraphDef` per ONNX graph, root first, then every
//! subgraph flat, linked to its parent op by `subgraph_name`.
//!
//! The driver walks a graph in a fixed order (real inputs as `Data`, initializers as
//! `Const` sorted by name, nodes in ONNX order, one `NetOutput`), so the same bytes always
//! give the same `ModelDef`. Outer-scope values a subgraph reads are made explicit the way
//! GE's ONNX parser does it for If (`subgraph_adapter/if_subgraph_adapter.cc`): the parent
//! op gets them as extra inputs, the subgraph gets `Data` ops carrying
//! `_parent_node_index`. Every error names the graph and the node.
//!
//! Each op is GE IR while the importer builds it ([`Op`]: GE IR's fields with typed
//! descriptors) and becomes a typed [`ComputeNode`] the moment it is finished, so reading
//! an ONNX model never holds the model twice; [`import`] gives the same model back as a
//! `ModelDef`. Descriptors are typed from the start: nearly every one is the standard
//! descriptor of its value's type ([`descriptor`]), made and typed once per type
//! ([`Descs`]) and cloned from there, the clone sharing its attribute map.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

// foldhash's randomly seeded hasher, not SipHash: names come from the file (so not a
// fixed seed), and hashing them is a good part of importing a large graph.
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use prost::Message;
use prost::bytes::Bytes;

use super::ops::{NCHW_OPS, NodeFacts, apply_defaults};
use super::plugins;
use super::tensor::{
    Shape, ValueType, attr_i, attr_ints, attr_s, attr_strings, attribute_kind, convert_attribute,
    descriptor, set_layout, tensor_value,
};
use crate::om::graph::{AttrValue, Tensor};
use crate::om::intern::AttrInterner;
use crate::om::ir::{self, PendingGraph, PendingNode, convert_attr, convert_desc};
use crate::om::{ComputeModel, ComputeNode, DataType, OmError, Place, Result, TensorDesc};
use crate::proto::ge_ir::attr_def::Value;
use crate::proto::ge_ir::{AttrDef, GraphDef, ModelDef, TensorDef, TensorDescriptor};
use crate::proto::onnx::attribute_proto::AttributeType;
use crate::proto::onnx::{AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto};

/// What the caller may decide about an import.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// The model name; `None` takes the ONNX graph's name.
    pub name: Option<String>,
    /// Fixed shapes for named root-graph inputs (`--input-shape`). The rank must match
    /// the model's when the model knows it; `-1` keeps a dim dynamic. Naming an input
    /// the graph does not have is an error.
    pub input_shapes: Vec<(String, Vec<i64>)>,
    /// Keep every node's ONNX op type and attributes instead of mapping them as GE's ONNX
    /// plugins do ([`super::plugins`]); `rt2 compile --onnx-types`.
    pub onnx_types: bool,
}

/// The attr holding the parent op's input (on subgraph `Data`) or output (on subgraph
/// `NetOutput` input descs) index, GE's `ATTR_NAME_PARENT_NODE_INDEX`.
pub const PARENT_NODE_INDEX: &str = "_parent_node_index";

/// The attr rt2 writes on a `Loop` op: how many of its inputs after the trip count and
/// condition are loop-carried. The inputs after those are captured outer values, which
/// nothing else tells apart.
pub const LOOP_CARRIED: &str = "_loop_carried_count";

/// The format of root-graph `Data` ops: ATC's `--input_format` default for ONNX.
pub const ROOT_DATA_LAYOUT: &str = "NCHW";

/// Decodes `bytes` as an `onnx.ModelProto` and converts it. See the module docs of
/// [`super`] for the conventions.
pub fn import(bytes: &[u8], opts: &ImportOptions) -> Result<ModelDef> {
    let mut md = ir::into_model_def(import_typed(bytes, opts)?);
    // The typed model is written depth first, in call order; GE's ONNX parser lists
    // subgraphs breadth first, which is that order stably sorted by depth (a graph is
    // written after the one that calls it, so its caller's depth is known).
    let mut depth: HashMap<String, usize> = HashMap::new();
    let mut graphs: Vec<(usize, GraphDef)> = Vec::with_capacity(md.graph.len());
    for g in std::mem::take(&mut md.graph) {
        let d = depth.get(&g.name).copied().unwrap_or(0);
        for name in g.op.iter().flat_map(|op| &op.subgraph_name) {
            depth.insert(name.clone(), d + 1);
        }
        graphs.push((d, g));
    }
    graphs.sort_by_key(|(d, _)| *d);
    md.graph = graphs.into_iter().map(|(_, g)| g).collect();
    Ok(md)
}

/// [`import`] straight to the typed ComputeGraph, which is what reading a model wants:
/// each op is made typed as the importer finishes it, so the GE IR of the whole model
/// is never held beside the typed graph (on a graph of 10,000 nodes the two together
/// were most of `rt2 inspect`'s memory and, through fresh pages, of its time).
pub fn import_typed(bytes: &[u8], opts: &ImportOptions) -> Result<ComputeModel> {
    crate::timing::mark("decode onnx");
    crate::om::error::check_nesting(bytes, "onnx.ModelProto", &Place::new("onnx model"))?;
    let model = ModelProto::decode(bytes).map_err(|source| OmError::Protobuf {
        place: Place::new("onnx model"),
        message: "onnx.ModelProto",
        source,
    })?;
    import_model(model, opts)
}

fn import_model(mut model: ModelProto, opts: &ImportOptions) -> Result<ComputeModel> {
    let mut graph = model
        .graph
        .take()
        .ok_or_else(|| OmError::graph(Place::new("onnx model"), "model has no graph"))?;
    let mut opsets = BTreeMap::new();
    for o in &model.opset_import {
        let domain = match o.domain.as_deref() {
            None | Some("") => "ai.onnx",
            Some(d) => d,
        };
        opsets.insert(domain.to_string(), o.version.unwrap_or(0));
    }
    let name = opts
        .name
        .clone()
        .or_else(|| graph.name.clone().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "onnx_model".to_string());
    crate::timing::mark("import graph");
    name_unnamed_nodes(&mut graph);

    let mut imp = Importer {
        onnx_types: opts.onnx_types,
        opsets,
        subgraphs: Vec::new(),
    };
    let root = imp.graph(&graph, &name, "", None, &opts.input_shapes)?;
    // The typed model links subgraphs by name, so their order here does not matter
    // ([`import`] gives the `ModelDef` GE's order).
    let mut graphs = vec![root];
    graphs.append(&mut imp.subgraphs);
    // The ONNX model is no longer needed; its initializers' bytes live on in the Consts.
    drop(graph);

    let mut attr = BTreeMap::new();
    let (domains, versions): (Vec<&str>, Vec<i64>) =
        imp.opsets.iter().map(|(d, v)| (d.as_str(), *v)).unzip();
    attr.insert("onnx_opset_domains".to_string(), attr_strings(&domains));
    attr.insert("onnx_opset_versions".to_string(), attr_ints(&versions));
    if let Some(p) = &model.producer_name {
        attr.insert("onnx_producer_name".to_string(), attr_s(p));
    }
    if let Some(p) = &model.producer_version {
        attr.insert("onnx_producer_version".to_string(), attr_s(p));
    }
    if let Some(v) = model.ir_version {
        attr.insert("onnx_ir_version".to_string(), attr_i(v));
    }
    let md = ModelDef {
        name,
        attr,
        ..Default::default()
    };
    crate::timing::mark("link graph");
    ir::assemble(md, graphs)
}

/// Names every unnamed node `<op_type>_<n>` with one counter over all graphs, visited
/// breadth-first, as GE's `AdaptAndFindAllOnnxGraph` does.
fn name_unnamed_nodes(root: &mut GraphProto) {
    let mut queue: VecDeque<&mut GraphProto> = VecDeque::from([root]);
    let mut n = 0usize;
    while let Some(g) = queue.pop_front() {
        for node in g.node.iter_mut() {
            if node.name.as_deref().unwrap_or("").is_empty() {
                node.name = Some(format!("{}_{n}", node.op_type.as_deref().unwrap_or("")));
                n += 1;
            }
            for a in node.attribute.iter_mut() {
                if let Some(sub) = a.g.as_mut() {
                    queue.push_back(sub);
                }
                queue.extend(a.graphs.iter_mut());
            }
        }
    }
}

/// How a subgraph's inputs and outputs line up with its parent op.
struct Link {
    /// Parent input index per declared subgraph input.
    declared_inputs: Vec<Option<i64>>,
    /// Outer-scope values the subgraph reads: name, type, parent input index.
    captures: Vec<(String, ValueType, i64)>,
    /// Parent output index per subgraph output.
    outputs: Vec<Option<i64>>,
}

/// A value visible in the graph being converted.
struct ValueRef {
    op: String,
    index: i64,
    vt: ValueType,
    /// The value's descriptor: the standard one of `vt`, which nearly every value's is
    /// ([`Descs::standard`]), found once when the value is defined rather than looked up
    /// by type for each reader; or its own.
    desc: DescOf,
}

/// Where a value's descriptor is ([`ValueRef::desc`]).
enum DescOf {
    /// [`Descs::held`] at this index.
    Standard(u32),
    Own(Box<TensorDesc>),
}

impl ValueRef {
    /// The GE IR input naming this value: `<op>:<index>`. Made for every input of every
    /// op, so without the formatting machinery.
    fn port(&self) -> String {
        let mut s = String::with_capacity(self.op.len() + 4);
        s.push_str(&self.op);
        s.push(':');
        match u8::try_from(self.index) {
            Ok(d @ 0..=9) => s.push(char::from(b'0' + d)),
            _ => {
                use std::fmt::Write;
                let _ = write!(s, "{}", self.index);
            }
        }
        s
    }

    /// The descriptor a reader of this value copies.
    fn desc(&self, descs: &Descs) -> TensorDesc {
        match &self.desc {
            DescOf::Own(d) => (**d).clone(),
            DescOf::Standard(i) => descs.held[*i as usize].1.clone(),
        }
    }
}

/// An op as the importer builds it: the GE IR `OpDef` fields it sets, its descriptors
/// already typed. [`Scope::push`] makes it a typed node.
#[derive(Debug, Clone, Default)]
struct Op {
    name: String,
    r#type: String,
    input: Vec<String>,
    input_desc: Vec<TensorDesc>,
    output_desc: Vec<TensorDesc>,
    attr: BTreeMap<String, AttrDef>,
    subgraph_name: Vec<String>,
    /// A Const's value, typed, which becomes its `value` attribute.
    value: Option<Tensor>,
}

/// The standard descriptor ([`descriptor`], layout ND) of each value type met so far, in
/// GE IR and typed: nearly every descriptor of an imported graph is one of a few, so
/// each is made and typed once and cloned from here (the clones share one attribute
/// map), instead of built as a GE IR map of five attributes and typed per descriptor.
struct Descs {
    /// Index into `held` by value type: one lookup per value defined
    /// ([`Descs::standard_id`]), not one per reader.
    nd: HashMap<ValueType, u32>,
    /// The descriptors in GE IR and typed; the first is that of the unknown type.
    held: Vec<(TensorDescriptor, TensorDesc)>,
}

impl Default for Descs {
    fn default() -> Self {
        let mut d = Descs {
            nd: HashMap::default(),
            held: Vec::new(),
        };
        d.standard_id(&ValueType::default());
        d
    }
}

impl Descs {
    /// The index in `held` of the standard descriptor of `vt`, made on first use.
    fn standard_id(&mut self, vt: &ValueType) -> u32 {
        if let Some(&i) = self.nd.get(vt) {
            return i;
        }
        let proto = descriptor(vt, "ND");
        let typed = convert_desc(proto.clone());
        let i = self.held.len() as u32;
        self.held.push((proto, typed));
        self.nd.insert(vt.clone(), i);
        i
    }

    fn standard(&mut self, vt: &ValueType) -> &(TensorDescriptor, TensorDesc) {
        let i = self.standard_id(vt);
        &self.held[i as usize]
    }

    /// The descriptor of a value nothing describes (an output left to inference).
    fn unknown(&self) -> TensorDesc {
        self.held[0].1.clone()
    }

    /// `descriptor(vt, layout)`, typed.
    fn with_layout(&mut self, vt: &ValueType, layout: &str) -> TensorDesc {
        if layout == "ND" {
            self.standard(vt).1.clone()
        } else {
            convert_desc(descriptor(vt, layout))
        }
    }

    /// A Const's value ([`tensor_value`]'s bytes), typed, with its Const's output
    /// descriptor: both the standard descriptor `held[id]` of the value's type, made once
    /// for every Const of the type.
    fn standard_tensor(&self, id: u32, data: Bytes) -> ConstValue {
        let desc = self.held[id as usize].1.clone();
        ConstValue {
            desc: desc.clone(),
            value: Tensor { desc, data },
        }
    }

    /// A Const's value typed, with its Const's output descriptor.
    fn tensor(&mut self, t: TensorDef) -> ConstValue {
        let vt = const_type(&t);
        let TensorDef { desc, data } = t;
        let Some(desc) = desc else {
            return ConstValue {
                desc: convert_desc(TensorDescriptor::default()),
                value: Tensor {
                    desc: TensorDesc::default(),
                    data,
                },
            };
        };
        let held = self.standard(&vt);
        let typed = if desc == held.0 {
            held.1.clone()
        } else {
            convert_desc(desc)
        };
        ConstValue {
            desc: typed.clone(),
            value: Tensor { desc: typed, data },
        }
    }
}

/// A Const's value typed ([`Descs::tensor`], [`Descs::standard_tensor`]).
struct ConstValue {
    /// The Const's output descriptor: the value's own, or an empty one.
    desc: TensorDesc,
    value: Tensor,
}

/// [`set_layout`] on a typed descriptor.
fn set_layout_typed(d: &mut TensorDesc, layout: &str) {
    let mut proto = TensorDescriptor::default();
    set_layout(&mut proto, layout);
    d.layout = proto.layout;
    for (k, v) in proto.attr {
        d.attrs.insert(k, convert_attr(v));
    }
}

struct Importer {
    /// [`ImportOptions::onnx_types`].
    onnx_types: bool,
    opsets: BTreeMap<String, i64>,
    /// Converted subgraphs, each after those it calls.
    subgraphs: Vec<PendingGraph>,
}

/// Per-graph state: the ops so far, the values in scope, the names taken.
struct Scope<'a> {
    graph: &'a str,
    prefix: &'a str,
    /// The ops so far, each typed as it is pushed ([`Scope::push`]).
    ops: Vec<PendingNode>,
    values: HashMap<String, ValueRef>,
    /// Names taken, each with the next suffix to try, so that many equal names stay linear.
    names: HashMap<String, usize>,
    /// Ops a plugin's subgraph puts after the op being converted, pushed after it.
    after: Vec<Op>,
    descs: Descs,
    /// The descriptors' attribute maps, one copy of each distinct map: the standard
    /// descriptors share theirs already, the others (a Const's own, an NCHW op's) are
    /// shared here.
    desc_attrs: AttrInterner,
}

impl Scope<'_> {
    /// Appends a finished op, numbered by its place in the graph, as a typed node: no op
    /// is changed once pushed, so none is kept in GE IR form.
    fn push(&mut self, op: Op) {
        let mut attrs = ir::convert_attrs(op.attr);
        if let Some(value) = op.value {
            attrs.insert("value".to_string(), AttrValue::Tensor(Box::new(value)));
        }
        let node = ComputeNode {
            name: op.name,
            op_type: op.r#type,
            input_descs: op.input_desc,
            output_descs: op.output_desc,
            attrs,
            id: self.ops.len() as i64,
            ..Default::default()
        };
        let mut pending = PendingNode::new(node, op.input, op.subgraph_name);
        ir::intern_desc_attrs(&mut pending, &mut self.desc_attrs);
        self.ops.push(pending);
    }
    fn place(&self, node: &str) -> Place {
        Place::node(self.graph, node)
    }
    /// A unique op name in this graph, prefixed for subgraphs as GE's subgraph
    /// post-processing does (`<subgraph>/<node>`).
    /// A unique name for an op a plugin adds for op `name` (already this scope's):
    /// `<name>_<suffix>`, prefixed once.
    fn derived(&mut self, name: &str, suffix: &str) -> String {
        let base = name.strip_prefix(self.prefix).unwrap_or(name);
        self.op_name(&format!("{base}_{suffix}"))
    }

    fn op_name(&mut self, base: &str) -> String {
        let mut first = String::with_capacity(self.prefix.len() + base.len());
        first.push_str(self.prefix);
        first.push_str(base);
        let mut k = match self.names.get(&first) {
            None => {
                self.names.insert(first.clone(), 1);
                return first;
            }
            Some(k) => *k,
        };
        loop {
            let name = format!("{first}_{k}");
            k += 1;
            if !self.names.contains_key(&name) {
                self.names.insert(first, k);
                self.names.insert(name.clone(), 1);
                return name;
            }
        }
    }
    /// Puts value `value`, output `index` of op `op`, in scope with the standard
    /// descriptor of `vt` (a plugin's subgraph may give it its own later,
    /// [`route_outputs`]); returns that descriptor's index in [`Descs::held`].
    fn define(&mut self, value: &str, op: &str, index: i64, vt: ValueType) -> Result<u32> {
        if self.values.contains_key(value) {
            return Err(OmError::graph(
                self.place(op),
                format!("value {value:?} is defined twice"),
            ));
        }
        let id = self.descs.standard_id(&vt);
        self.values.insert(
            value.to_string(),
            ValueRef {
                op: op.to_string(),
                index,
                desc: DescOf::Standard(id),
                vt,
            },
        );
        Ok(id)
    }
}

impl Importer {
    /// Converts one graph. `link` is `None` for the root, whose inputs `overrides` may fix.
    fn graph(
        &mut self,
        g: &GraphProto,
        name: &str,
        prefix: &str,
        link: Option<&Link>,
        overrides: &[(String, Vec<i64>)],
    ) -> Result<PendingGraph> {
        let values = g.input.len()
            + g.initializer.len()
            + g.node.iter().map(|n| n.output.len()).sum::<usize>();
        let mut s = Scope {
            graph: name,
            prefix,
            // One op per input, initializer and node and the NetOutput, before plugins
            // add any: a large graph's ops are not copied as the list grows.
            ops: Vec::with_capacity(g.input.len() + g.initializer.len() + g.node.len() + 1),
            // Every input, initializer and node output is a value with an op name: sized
            // once, not rehashed as a large graph fills them.
            values: HashMap::with_capacity(values),
            names: HashMap::with_capacity(values),
            after: Vec::new(),
            descs: Descs::default(),
            desc_attrs: AttrInterner::new(),
        };
        let mut types: HashMap<&str, ValueType> = HashMap::new();
        for vi in g.value_info.iter().chain(&g.output).chain(&g.input) {
            if let Some(n) = vi.name.as_deref() {
                types.insert(n, ValueType::from_type_proto(vi.r#type.as_ref()));
            }
        }
        let mut initializers: BTreeMap<&str, &TensorProto> = BTreeMap::new();
        for t in &g.initializer {
            let n = t.name.as_deref().unwrap_or("");
            if n.is_empty() {
                continue;
            }
            if initializers.insert(n, t).is_some() {
                return Err(OmError::graph(
                    Place::graph(name),
                    format!("initializer {n:?} is defined twice"),
                ));
            }
        }
        if !g.sparse_initializer.is_empty() {
            return Err(OmError::unsupported(
                Place::graph(name),
                "sparse initializers",
            ));
        }

        // Graph inputs: an input that is also an initializer is a weight with a default, not a feed.
        let mut graph_inputs = Vec::new();
        let mut data_index = 0i64;
        let mut fixed: BTreeSet<&str> = BTreeSet::new();
        for (i, vi) in g.input.iter().enumerate() {
            let vname = vi.name.as_deref().unwrap_or("");
            if vname.is_empty() || initializers.contains_key(vname) {
                continue;
            }
            let mut vt = ValueType::from_type_proto(vi.r#type.as_ref());
            if let Some((_, dims)) = overrides.iter().find(|(n, _)| n == vname) {
                fix_shape(&mut vt, dims, vname)?;
                fixed.insert(vname);
            }
            let mut attrs = BTreeMap::from([("index".to_string(), attr_i(data_index))]);
            if let Some(p) = link.and_then(|l| l.declared_inputs.get(i).copied().flatten()) {
                attrs.insert(PARENT_NODE_INDEX.to_string(), attr_i(p));
            }
            // GE's UpdateDataFormat gives root Data ops ATC's --input_format, NCHW by
            // default for ONNX, whatever their rank; subgraph Data ops stay ND.
            let layout = if link.is_none() {
                ROOT_DATA_LAYOUT
            } else {
                "ND"
            };
            graph_inputs.push(data_op(&mut s, vname, vt, attrs, layout)?);
            data_index += 1;
        }
        if let Some((n, _)) = overrides.iter().find(|(n, _)| !fixed.contains(n.as_str())) {
            return Err(OmError::graph(
                Place::graph(name),
                format!("input shape given for {n:?}, which is not an input of the graph"),
            ));
        }
        for (vname, vt, parent) in link.map(|l| l.captures.as_slice()).unwrap_or_default() {
            let attrs = BTreeMap::from([
                ("index".to_string(), attr_i(data_index)),
                (PARENT_NODE_INDEX.to_string(), attr_i(*parent)),
            ]);
            graph_inputs.push(data_op(&mut s, vname, vt.clone(), attrs, "ND")?);
            data_index += 1;
        }

        // Initializers, in name order as GE's std::map walks them.
        for (k, (vname, t)) in initializers.iter().enumerate() {
            let op_name = s.op_name(&format!("{vname}_Initializer_{k}"));
            let (vt, data) = tensor_value(t, &|| s.place(&op_name))?;
            const_op(&mut s, &op_name, vname, vt, data)?;
        }

        // Pass 1: every node output is in scope before any input is resolved, so edges
        // do not depend on node order.
        let mut op_names = Vec::with_capacity(g.node.len());
        let mut constants: Vec<Option<(ValueType, Bytes)>> = Vec::with_capacity(g.node.len());
        for node in &g.node {
            let op_name = s.op_name(node.name.as_deref().unwrap_or(""));
            let constant = if is_constant(node) {
                Some(constant_value(node, &s.place(&op_name))?)
            } else {
                None
            };
            for (k, out) in node.output.iter().enumerate() {
                if out.is_empty() {
                    continue;
                }
                let vt = match &constant {
                    Some((vt, _)) => vt.clone(),
                    // Each name is defined once (a second definition is an error).
                    None => types.remove(out.as_str()).unwrap_or_default(),
                };
                s.define(out, &op_name, k as i64, vt)?;
            }
            op_names.push(op_name);
            constants.push(constant);
        }

        // Pass 2: the ops themselves.
        for ((node, op_name), constant) in g.node.iter().zip(op_names).zip(constants) {
            let op = self.node(&mut s, node, op_name, constant)?;
            s.push(op);
            for op in std::mem::take(&mut s.after) {
                s.push(op);
            }
        }

        // NetOutput: one input per graph output, in order.
        let out_name = s.op_name("Node_Output");
        let mut net = Op {
            name: out_name.clone(),
            r#type: "NetOutput".to_string(),
            ..Default::default()
        };
        let mut outputs = Vec::with_capacity(g.output.len());
        for (i, vi) in g.output.iter().enumerate() {
            let vname = vi.name.as_deref().unwrap_or("");
            let v = s.values.get(vname).ok_or_else(|| {
                OmError::graph(
                    Place::graph(name),
                    format!("graph output {i} names {vname:?}, which no node produces"),
                )
            })?;
            let src = v.port();
            let mut desc = v.desc(&s.descs);
            // The output's name lives on the NetOutput input descriptor: it is what users
            // name outputs by (`rt2 run --output-dir`, `inspect`), and GE IR has no other
            // place for a graph output's name.
            desc.name = vname.to_string();
            if let Some(p) = link.and_then(|l| l.outputs.get(i).copied().flatten()) {
                desc.attrs
                    .insert(PARENT_NODE_INDEX.to_string(), convert_attr(attr_i(p)));
            }
            net.input.push(src.clone());
            net.input_desc.push(desc);
            outputs.push(src);
        }
        s.push(net);
        let def = GraphDef {
            name: name.to_string(),
            input: graph_inputs.iter().map(|n| format!("{n}:0")).collect(),
            output: outputs,
            ..Default::default()
        };
        Ok(ir::pending_graph(def, s.ops))
    }

    /// Converts one node into one op, recursing into its subgraphs.
    fn node(
        &mut self,
        s: &mut Scope,
        node: &NodeProto,
        op_name: String,
        constant: Option<(ValueType, Bytes)>,
    ) -> Result<Op> {
        // Made only for an error: formatting a place per node (and per attribute) was a
        // good part of importing a graph of small ops.
        let graph = s.graph;
        let place = || Place::node(graph, &op_name);
        let onnx_type = node.op_type.as_deref().unwrap_or("");
        let domain = match node.domain.as_deref() {
            None | Some("") => "ai.onnx",
            Some(d) => d,
        };
        let opset = *self.opsets.get(domain).ok_or_else(|| {
            OmError::graph(
                place(),
                format!("domain {domain:?} of op {onnx_type:?} has no opset_import"),
            )
        })?;

        let mut attrs = BTreeMap::new();
        let mut graphs: Vec<(&str, &GraphProto)> = Vec::new();
        for a in &node.attribute {
            let aname = a.name.as_deref().unwrap_or("");
            match attribute_kind(a) {
                AttributeType::Graph => graphs.extend(a.g.as_ref().map(|g| (aname, g))),
                AttributeType::Graphs => graphs.extend(a.graphs.iter().map(|g| (aname, g))),
                _ if constant.is_some() => {} // the value attribute becomes `value` below
                _ => {
                    if let Some(v) = convert_attribute(a, &place)? {
                        attrs.insert(aname.to_string(), v);
                    }
                }
            }
        }
        // GE orders If subgraphs then_branch, else_branch whatever the attribute order.
        graphs.sort_by_key(|(n, _)| match *n {
            "then_branch" => 0,
            "else_branch" => 1,
            _ => 2,
        });

        let mut op = Op {
            name: op_name.clone(),
            input: Vec::with_capacity(node.input.len()),
            input_desc: Vec::with_capacity(node.input.len()),
            output_desc: Vec::with_capacity(node.output.len()),
            ..Default::default()
        };
        if let Some((vt, data)) = constant {
            op.r#type = "Const".to_string();
            let id = s.descs.standard_id(&vt);
            let c = s.descs.standard_tensor(id, data);
            op.output_desc.push(c.desc);
            op.value = Some(c.value);
        } else {
            op.r#type = onnx_type.to_string();
        }

        let mut input_types = Vec::new();
        for inp in &node.input {
            if inp.is_empty() {
                op.input.push(String::new());
                op.input_desc.push(s.descs.unknown());
                input_types.push(None);
                continue;
            }
            let v = s.values.get(inp).ok_or_else(|| {
                OmError::graph(
                    place(),
                    format!("input {inp:?} names a value that does not exist"),
                )
            })?;
            op.input.push(v.port());
            op.input_desc.push(v.desc(&s.descs));
            input_types.push(Some(v.vt.clone()));
        }
        let declared_inputs = op.input.len();

        if !graphs.is_empty() {
            // Outer-scope values read anywhere below this op, sorted by name as GE's std::set.
            let mut free = BTreeMap::new();
            for (_, g) in &graphs {
                free_values(g, &mut free);
            }
            // If keeps input 0 as cond and reuses an existing data input; others append.
            let reuse_from = if onnx_type == "If" {
                1
            } else {
                declared_inputs
            };
            let mut captures = Vec::new();
            for (vname, user) in &free {
                let v = s.values.get(vname).ok_or_else(|| {
                    OmError::graph(
                        place(),
                        format!("node {user:?} in a subgraph reads {vname:?}, which no enclosing graph defines"),
                    )
                })?;
                let src = v.port();
                let parent = match op.input.iter().skip(reuse_from).position(|i| *i == src) {
                    Some(p) => p + reuse_from,
                    None => {
                        op.input.push(src);
                        op.input_desc.push(v.desc(&s.descs));
                        op.input.len() - 1
                    }
                };
                captures.push((vname.clone(), v.vt.clone(), parent as i64));
            }
            for (k, (aname, g)) in graphs.iter().enumerate() {
                let sub_name = format!("{op_name}_{k}_{aname}");
                let link = Link {
                    declared_inputs: (0..g.input.len())
                        .map(|i| match onnx_type {
                            "If" => None,
                            // Scan-8 takes sequence_lens as input 0, before the states.
                            "Scan" if opset < 9 => Some(i as i64 + 1),
                            _ => Some(i as i64),
                        })
                        .collect(),
                    captures: captures.clone(),
                    outputs: (0..g.output.len())
                        .map(|i| match onnx_type {
                            // Loop body output 0 is the next condition, no Loop output.
                            "Loop" => (i > 0).then(|| i as i64 - 1),
                            _ => Some(i as i64),
                        })
                        .collect(),
                };
                let prefix = format!("{sub_name}/");
                let sub = self.graph(g, &sub_name, &prefix, Some(&link), &[])?;
                self.subgraphs.push(sub);
                op.subgraph_name.push(sub_name);
            }
        }

        if op.r#type != "Const" {
            for out in &node.output {
                let desc = match s.values.get(out) {
                    Some(v) if !out.is_empty() => v.desc(&s.descs),
                    _ => s.descs.unknown(),
                };
                op.output_desc.push(desc);
            }
            if domain == "ai.onnx" && NCHW_OPS.contains(&onnx_type) {
                if let Some(d) = op.input_desc.first_mut().filter(|d| rank4(d)) {
                    set_layout_typed(d, "NCHW");
                }
                if let Some(d) = op.output_desc.first_mut().filter(|d| rank4(d)) {
                    set_layout_typed(d, "NCHW");
                }
            }
            let facts = NodeFacts {
                spatial: spatial_rank(&attrs, &input_types),
            };
            if domain == "ai.onnx" {
                apply_defaults(onnx_type, opset, &facts, &mut attrs);
            }
        }
        // GE's plugin for the op, if one maps it: its GE type and attributes replace the
        // ONNX ones, and `onnx_opset` is not written, so the op has GE's contract (a
        // LeakyRelu with `negative_slope`, not ONNX's `alpha`).
        let ge_contract = op.r#type != "Const"
            && domain == "ai.onnx"
            && !self.onnx_types
            && plugin_form(
                s,
                &mut op,
                &mut attrs,
                onnx_type,
                opset,
                &input_types,
                &node.output,
            );
        if domain == "ai.onnx" && onnx_type == "Loop" {
            let declared = node.input.len().saturating_sub(2);
            attrs.insert(LOOP_CARRIED.to_string(), attr_i(declared as i64));
        }
        attrs.insert(
            "original_type".to_string(),
            attr_s(&format!("{domain}::{opset}::{onnx_type}")),
        );
        if !ge_contract {
            attrs.insert("onnx_opset".to_string(), attr_i(opset));
        }
        op.attr = attrs;
        Ok(op)
    }
}

/// Applies GE's ONNX plugin for `onnx_type` to `op` (named `op.name`, its ONNX
/// attributes `attrs`), if one maps it: the GE type, attributes, inputs and the Const
/// inputs the plugin adds (pushed to the scope's ops ahead of `op`). Whether the op now
/// has GE's contract rather than ONNX's meaning.
fn plugin_form(
    s: &mut Scope,
    op: &mut Op,
    attrs: &mut BTreeMap<String, AttrDef>,
    onnx_type: &str,
    opset: i64,
    input_types: &[Option<ValueType>],
    outputs: &[String],
) -> bool {
    let node = plugins::Node {
        opset,
        attrs,
        inputs: input_types,
        outputs,
    };
    let Some(mut m) = plugins::map(onnx_type, &node) else {
        return false;
    };
    let node_op = op.clone();
    // Every op of the plugin's subgraph is the node's, as a profile or a dump names it.
    let original = attr_s(&format!("ai.onnx::{opset}::{onnx_type}"));
    for (i, extra) in std::mem::take(&mut m.before) {
        let mut made = extra_op(s, &op.name, &extra, &node_op, &[], None);
        made.attr.insert("original_type".into(), original.clone());
        op.input[i] = format!("{}:0", made.name);
        op.input_desc[i] = made.output_desc[0].clone();
        s.push(made);
    }
    op.r#type = m.op_type.to_string();
    *attrs = m.attrs;
    if let Some(keep) = m.inputs {
        op.input = keep.iter().map(|&i| op.input[i].clone()).collect();
        op.input_desc = keep.iter().map(|&i| op.input_desc[i].clone()).collect();
    }
    for (k, (suffix, value)) in m.leading_consts.into_iter().enumerate() {
        const_input(s, op, suffix, value, k);
    }
    for (suffix, value) in m.consts {
        const_input(s, op, suffix, value, op.input.len());
    }
    if let Some(n) = m.outputs {
        op.output_desc.resize(n, s.descs.unknown());
    }
    if let Some(routes) = m.node_outputs.take() {
        route_outputs(s, op, &m.after, &node_op, outputs, &routes, &original);
    } else if !m.after.is_empty() {
        // The node's name and outputs go to the last op after it; the mapped op is
        // renamed, and its output, now internal, is left for inference to describe.
        let node_name = std::mem::take(&mut op.name);
        op.name = s.derived(&node_name, m.op_type);
        let outputs = std::mem::take(&mut op.output_desc);
        op.output_desc = vec![s.descs.unknown(); outputs.len()];
        let mut made: Vec<String> = Vec::new();
        let last = m.after.len() - 1;
        for (k, extra) in m.after.iter().enumerate() {
            let last_one = (k == last).then(|| (node_name.clone(), outputs.clone()));
            let e = extra_op(s, &node_name, extra, &node_op, &made, Some(&op.name));
            let mut e = match last_one {
                Some((name, outputs)) => Op {
                    name,
                    output_desc: outputs,
                    ..e
                },
                None => e,
            };
            e.attr.insert("original_type".into(), original.clone());
            made.push(e.name.clone());
            s.after.push(e);
        }
    }
    !m.onnx_meaning
}

/// A plugin's ops after the mapped op `op` when the node's outputs come from several of
/// them ([`plugins::Mapped::node_outputs`]): `op` keeps the node's name, the ops after it
/// are named `<node>_<suffix>`, and each node output read is redefined as the output its
/// route names, which takes over its descriptor.
fn route_outputs(
    s: &mut Scope,
    op: &mut Op,
    after: &[plugins::Extra],
    node_op: &Op,
    outputs: &[String],
    routes: &[plugins::Operand],
    original: &AttrDef,
) {
    let mut made: Vec<Op> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for extra in after {
        let mut e = extra_op(s, &op.name, extra, node_op, &names, Some(&op.name));
        e.attr.insert("original_type".into(), original.clone());
        names.push(e.name.clone());
        made.push(e);
    }
    for (k, route) in routes.iter().enumerate() {
        let Some(value) = outputs.get(k).filter(|o| !o.is_empty()) else {
            continue;
        };
        let (target, index) = match route {
            plugins::Operand::MappedOutput(j) if *j != k => (None, *j),
            plugins::Operand::After(a) if *a < made.len() => (Some(*a), 0),
            _ => continue,
        };
        let Some(slot) = op.output_desc.get_mut(k) else {
            continue;
        };
        let desc = std::mem::replace(slot, s.descs.unknown());
        let name = match target {
            Some(a) => {
                made[a].output_desc[0] = desc.clone();
                made[a].name.clone()
            }
            None => {
                if let Some(d) = op.output_desc.get_mut(index) {
                    *d = desc.clone();
                }
                op.name.clone()
            }
        };
        if let Some(v) = s.values.get_mut(value.as_str()) {
            v.op = name;
            v.index = index as i64;
            v.desc = DescOf::Own(Box::new(desc));
        }
    }
    s.after.extend(made);
}

/// One op of a plugin's subgraph beside the mapped one, named `<node>_<suffix>`: its
/// inputs resolved against the node's own (`node_op`, as the ONNX node wrote them), the
/// ops made after the mapped op so far (`after`) and the mapped op itself (`mapped`), its
/// Consts pushed to the scope. Its output is described by inference.
fn extra_op(
    s: &mut Scope,
    node: &str,
    extra: &plugins::Extra,
    node_op: &Op,
    after: &[String],
    mapped: Option<&str>,
) -> Op {
    let unknown_desc = s.descs.unknown();
    let mut op = Op {
        name: s.derived(node, extra.suffix),
        r#type: extra.op_type.to_string(),
        attr: extra.attrs.clone(),
        output_desc: vec![unknown_desc.clone()],
        ..Default::default()
    };
    let unknown = || unknown_desc.clone();
    for from in &extra.inputs {
        let (input, desc) = match from {
            plugins::Operand::Input(i) => (
                node_op.input.get(*i).cloned().unwrap_or_default(),
                node_op.input_desc.get(*i).cloned().unwrap_or_else(unknown),
            ),
            plugins::Operand::Mapped => (
                mapped.map(|m| format!("{m}:0")).unwrap_or_default(),
                unknown(),
            ),
            plugins::Operand::MappedOutput(k) => (
                mapped.map(|m| format!("{m}:{k}")).unwrap_or_default(),
                unknown(),
            ),
            plugins::Operand::After(k) => (
                after.get(*k).map(|a| format!("{a}:0")).unwrap_or_default(),
                unknown(),
            ),
            plugins::Operand::Const(suffix, value) => {
                let at = op.input.len();
                const_input(s, &mut op, suffix, (**value).clone(), at);
                continue;
            }
        };
        op.input.push(input);
        op.input_desc.push(desc);
    }
    op
}

/// A plugin's Const `<node>_<suffix>` holding `value`, made input `at` of `op`.
fn const_input(s: &mut Scope, op: &mut Op, suffix: &str, value: TensorDef, at: usize) {
    let name = s.derived(&op.name.clone(), suffix);
    op.input.insert(at, format!("{name}:0"));
    let c = s.descs.tensor(value);
    op.input_desc.insert(at, c.desc.clone());
    push_const(s, &name, c.desc, c.value, BTreeMap::new());
}

fn rank4(d: &TensorDesc) -> bool {
    d.has_shape && d.shape.dims().is_some_and(|dims| dims.len() == 4)
}

/// Spatial axes of a conv or pool: from `kernel_shape`, else the weight's rank, else the
/// data input's rank, minus the batch and channel axes.
fn spatial_rank(attrs: &BTreeMap<String, AttrDef>, inputs: &[Option<ValueType>]) -> Option<usize> {
    if let Some(AttrDef {
        value: Some(Value::List(l)),
    }) = attrs.get("kernel_shape")
    {
        return Some(l.i.len());
    }
    let rank = |i: usize| {
        inputs
            .get(i)
            .cloned()
            .flatten()
            .and_then(|v| v.shape.rank())
    };
    rank(1).or_else(|| rank(0)).and_then(|r| r.checked_sub(2))
}

/// Applies one `input_shapes` entry to a graph input's type.
fn fix_shape(vt: &mut ValueType, dims: &[i64], input: &str) -> Result<()> {
    let place = Place::new(format!("input {input:?}"));
    if let Some(rank) = vt.shape.rank()
        && rank != dims.len()
    {
        return Err(OmError::graph(
            place,
            format!("input shape has rank {}, the model says {rank}", dims.len()),
        ));
    }
    if let Some(d) = dims.iter().find(|d| **d < -1) {
        return Err(OmError::graph(
            place,
            format!("input shape dim {d} is neither -1 nor a size"),
        ));
    }
    let old = std::mem::take(&mut vt.shape.names);
    // A ranked shape without names had every dim known: none had a name.
    let unnamed = if vt.shape.dims.is_some() { "" } else { "?" };
    let names = dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if *d == -1 {
                old.get(i).map_or(unnamed, String::as_str).to_string()
            } else {
                String::new()
            }
        })
        .collect();
    vt.shape = Shape::named(dims.to_vec(), names);
    Ok(())
}

/// Adds a `Data` op for graph input `value`; returns the op name. `layout` is the Data
/// op's own format; consumers see the value as ND, their own input format.
fn data_op(
    s: &mut Scope,
    value: &str,
    vt: ValueType,
    attrs: BTreeMap<String, AttrDef>,
    layout: &str,
) -> Result<String> {
    let name = s.op_name(value);
    s.define(value, &name, 0, vt.clone())?;
    let desc = s.descs.with_layout(&vt, layout);
    s.push(Op {
        name: name.clone(),
        r#type: "Data".to_string(),
        input: vec![String::new()],
        input_desc: vec![desc.clone()],
        output_desc: vec![desc],
        attr: attrs,
        ..Default::default()
    });
    Ok(name)
}

/// Adds a `Const` op holding `data`, a tensor of type `vt` ([`tensor_value`]), under attr
/// `value`; its descriptor is the standard one of `vt`.
fn const_op(
    s: &mut Scope,
    op_name: &str,
    value_name: &str,
    vt: ValueType,
    data: Bytes,
) -> Result<()> {
    let id = s.define(value_name, op_name, 0, vt)?;
    let c = s.descs.standard_tensor(id, data);
    push_const(s, op_name, c.desc, c.value, BTreeMap::new());
    Ok(())
}

/// Pushes a `Const` op holding `value` under attr `value`, defining no value name: a
/// Const input a GE plugin adds is reached only through its consumer's input.
/// `desc` is the op's output descriptor, `value`'s own as [`Descs::tensor`] gave both.
fn push_const(
    s: &mut Scope,
    op_name: &str,
    desc: TensorDesc,
    value: Tensor,
    attrs: BTreeMap<String, AttrDef>,
) {
    s.push(Op {
        name: op_name.to_string(),
        r#type: "Const".to_string(),
        output_desc: vec![desc],
        attr: attrs,
        value: Some(value),
        ..Default::default()
    });
}

fn const_type(t: &TensorDef) -> ValueType {
    match &t.desc {
        Some(d) => desc_type(d),
        None => desc_type(&TensorDescriptor::default()),
    }
}

/// The value type a tensor's descriptor gives: its dtype and its dims, all known.
fn desc_type(d: &TensorDescriptor) -> ValueType {
    ValueType {
        dtype: DataType::from_proto(d.dtype),
        shape: Shape::known(d.shape.as_ref().map_or(&[][..], |s| &s.dim)),
    }
}

fn is_constant(node: &NodeProto) -> bool {
    node.op_type.as_deref() == Some("Constant")
        && matches!(node.domain.as_deref(), None | Some("") | Some("ai.onnx"))
}

/// The tensor of a `Constant` node, from whichever of its attribute forms is set.
fn constant_value(node: &NodeProto, place: &Place) -> Result<(ValueType, Bytes)> {
    let a: &AttributeProto = match node.attribute.as_slice() {
        [a] => a,
        _ => {
            return Err(OmError::graph(
                place.clone(),
                format!(
                    "Constant needs exactly one attribute, has {}",
                    node.attribute.len()
                ),
            ));
        }
    };
    let scalar = |data_type: i32| TensorProto {
        data_type: Some(data_type),
        ..Default::default()
    };
    let list = |data_type: i32, n: usize| TensorProto {
        data_type: Some(data_type),
        dims: vec![n as i64],
        ..Default::default()
    };
    let t = match a.name.as_deref().unwrap_or("") {
        "value" => {
            a.t.clone()
                .ok_or_else(|| OmError::graph(place.clone(), "Constant value holds no tensor"))?
        }
        "value_float" => TensorProto {
            float_data: vec![a.f.unwrap_or_default()],
            ..scalar(1)
        },
        "value_floats" => TensorProto {
            float_data: a.floats.clone(),
            ..list(1, a.floats.len())
        },
        "value_int" => TensorProto {
            int64_data: vec![a.i.unwrap_or_default()],
            ..scalar(7)
        },
        "value_ints" => TensorProto {
            int64_data: a.ints.clone(),
            ..list(7, a.ints.len())
        },
        "value_string" => TensorProto {
            string_data: vec![a.s.clone().unwrap_or_default()],
            ..scalar(8)
        },
        "value_strings" => TensorProto {
            string_data: a.strings.clone(),
            ..list(8, a.strings.len())
        },
        "sparse_value" => {
            return Err(OmError::unsupported(
                place.clone(),
                "Constant with a sparse_value",
            ));
        }
        other => {
            return Err(OmError::graph(
                place.clone(),
                format!("Constant has unknown attribute {other:?}"),
            ));
        }
    };
    tensor_value(&t, &|| place.clone())
}

/// Collects the values `g` reads but does not define (inputs, initializers, node outputs),
/// including those read by subgraphs nested at any depth, each with the first node that
/// reads it (for error messages).
fn free_values(g: &GraphProto, out: &mut BTreeMap<String, String>) {
    let mut defined: HashSet<&str> = HashSet::new();
    defined.extend(g.input.iter().filter_map(|v| v.name.as_deref()));
    defined.extend(g.initializer.iter().filter_map(|t| t.name.as_deref()));
    for n in &g.node {
        defined.extend(n.output.iter().map(String::as_str));
    }
    for n in &g.node {
        let user = n.name.clone().unwrap_or_default();
        for i in &n.input {
            if !i.is_empty() && !defined.contains(i.as_str()) {
                out.entry(i.clone()).or_insert_with(|| user.clone());
            }
        }
        for a in &n.attribute {
            let mut inner = BTreeMap::new();
            for sub in a.g.iter().chain(&a.graphs) {
                free_values(sub, &mut inner);
            }
            for (v, u) in inner {
                if !defined.contains(v.as_str()) {
                    out.entry(v).or_insert(u);
                }
            }
        }
    }
    for o in &g.output {
        let name = o.name.as_deref().unwrap_or("");
        if !name.is_empty() && !defined.contains(name) {
            out.entry(name.to_string())
                .or_insert_with(|| "graph output".to_string());
        }
    }
}
