//! The node converters: each compute node becomes its RT2 kernel sequence in the level
//! being built (see [`super::builder`] for levels, globals and tensor forms).
//!
//! Converters are chosen by op type ([`converter_for`]): graph boundaries (`Data`,
//! `Const`, `NetOutput`), control flow (`If`, `Case`, `While`, ONNX `Loop`, converted in
//! [`super::control`]; `PartitionedCall`, inlined, or a launch of the sub-model it names
//! when neither the model nor its file holds the graph), and every op the op library has, which
//! takes one of two shapes:
//!
//! - **Shape known before the launch** (almost every op):
//!   `InferShape` (left out when lowering proved every output shape static; its inputs are
//!   the input shapes, or host values for the inputs whose values inference reads) ->
//!   `CalcTensorSizeFromShape` (left out for a static shape: the allocation carries the
//!   size) -> `AllocMemHbm` per output -> `LaunchKernelWithHandle`
//!   (the op's device task; no outputs) -> later a `FreeMemory` per output after its last
//!   reader.
//! - **Data-dependent** (NonZero, Unique, ...): `LaunchKernelAllocOutputs` runs the op and
//!   allocates each output once its shape is known.
//!
//! Before any of that, a node whose inputs are all known is evaluated
//! ([`super::const_eval`]) and emits nothing. Launches are ordered after the launches that write their inputs by
//! control edges, since the device runs one stream's tasks in submission order.

use std::collections::BTreeSet;
use std::sync::Arc;

use compact_str::format_compact;
use smallvec::smallvec;

use super::attrs::{self, dtype};
use super::builder::{Builder, Global, TVal, dtype_list, node};
use super::const_eval;
use super::error::{LowerError, NO_CONVERTER, Unsupported};
use crate::exec::{Inputs, KernelAttr, KernelGraph, KernelNodeId, Origin, ValueRef};
use crate::om::graph::{
    AttrValue, ComputeGraph, ComputeNode, END, NodeId, PLACEHOLDER, Tensor, is_const_type,
    is_data_type,
};
use crate::om::onnx::PARENT_NODE_INDEX;
use crate::om::{Shape, TensorDesc};
use crate::ops::{Attrs, InferCtx, OpRegistry, OpSpec, TensorMeta};
use crate::ops::{DType, HostTensor};

/// What a converter does with a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converter {
    /// A graph input: `Data` (and its kin), or a partitioned subgraph's `PlaceHolder`.
    Data,
    Const,
    NetOutput,
    /// A partitioned subgraph's output.
    End,
    If,
    Case,
    While,
    Loop,
    Call,
    /// An op of the op library.
    Op,
}

/// The converter for `op_type`, `None` when rt2 cannot lower it.
pub fn converter_for(reg: &OpRegistry, op_type: &str) -> Option<Converter> {
    Some(match op_type {
        t if is_data_type(t) || t == PLACEHOLDER => Converter::Data,
        t if is_const_type(t) => Converter::Const,
        "NetOutput" => Converter::NetOutput,
        END => Converter::End,
        "If" | "_If" | "StatelessIf" => Converter::If,
        "Case" | "StatelessCase" => Converter::Case,
        "While" | "_While" | "StatelessWhile" => Converter::While,
        "Loop" => Converter::Loop,
        "PartitionedCall" | "StatefulPartitionedCall" => Converter::Call,
        t if reg.get(t).is_some() => Converter::Op,
        _ => return None,
    })
}

/// How a graph's `Data` nodes get their values.
pub enum Bind<'a> {
    /// The root graph: model inputs, with `Data` index = position among the model inputs.
    Root,
    /// A subgraph: by the Data node's parent index (or its `index` when it has none). The
    /// forms the subgraph makes of a value are written back when the graph is done, so an
    /// inlined subgraph's uploads serve the caller too.
    Parent(&'a mut [Option<TVal>]),
}

/// A model input as lowering found it: a root graph input node (Data, PlaceHolder) or a
/// weight the model was written without.
#[derive(Debug, Clone)]
pub struct RootInput {
    /// The Main `Data` node's `index`.
    pub index: usize,
    pub name: String,
    pub meta: TensorMeta,
    /// A Const without a stored value, which the caller supplies.
    pub weight: bool,
}

/// One lowering run over a model.
pub struct Lowering<'r> {
    pub b: Builder,
    pub reg: &'r OpRegistry,
    pub unsupported: Vec<Unsupported>,
    /// Model inputs in the order lowering met them; [`RootInput::index`] orders them.
    pub root_inputs: Vec<RootInput>,
    /// The number of the root graph's input nodes: the first weight's input index.
    weights_base: usize,
    /// Dims a model input is specialized to, by its name ([`crate::lower::lower_specialized`]):
    /// each of its unknown dims (or its unknown rank) takes the given one.
    pub fixed_inputs: Vec<(String, Vec<i64>)>,
    /// Prepare constant inputs in the layouts their ops ask for (see
    /// [`Lowering::prepacked`]); off keeps every weight as the model stores it.
    pub pack_weights: bool,
    /// Each constant prepared so far, by its constant id, the op it was prepared for and
    /// the packing (its function's address): its prepared constant's id.
    packed: foldhash::HashMap<(u32, &'static str, usize), u32>,
    /// When set, every node's output metas as lowering inferred them, one entry per graph
    /// lowered (a subgraph once per time it is lowered), in the order lowering began them.
    pub metas: Option<Vec<GraphMetas>>,
    /// The last descriptor [`Lowering::carry_format`] found plain: nearly every
    /// descriptor of a graph shares its formats with the one before (one shared
    /// attribute map, the same layout and shape), which then need not be read again.
    last_plain: Option<TensorDesc>,
    /// The last launch's attribute set and what it was made of: a run of ops configured
    /// alike (a chain of Adds) shares one set without building and hashing it per op.
    last_launch: Option<LaunchAttrs>,
}

/// A launch's attribute set ([`Lowering::emit_launch`]) with what it was made of.
struct LaunchAttrs {
    op_attrs: Attrs,
    op_type: String,
    compiled: Option<String>,
    in_types: Vec<Option<crate::ops::DType>>,
    out_types: Vec<crate::ops::DType>,
    shared: Attrs,
}

/// One graph's output metas, as [`Lowering::metas`] records them: the graph's name and,
/// per node by index, one meta per output (`None` where lowering made none), or `None`
/// for a node lowering made no outputs for.
pub type GraphMetas = (String, Vec<Option<Vec<Option<TensorMeta>>>>);

pub(super) type Result<T> = std::result::Result<T, LowerError>;

pub(super) fn node_error(path: &str, n: &ComputeNode, msg: impl Into<String>) -> LowerError {
    LowerError::Node {
        graph: path.to_string(),
        node: n.name.clone(),
        op_type: n.op_type.clone(),
        message: msg.into(),
    }
}

/// The compute graph's nodes in an order where every producer (data or control) comes
/// first; file order among independent nodes.
pub fn compute_order(g: &ComputeGraph) -> std::result::Result<Vec<NodeId>, String> {
    let len = g.nodes.len();
    let preds = |i: usize| {
        let n = &g.nodes[i];
        n.inputs
            .iter()
            .flatten()
            .map(|p| p.node.index())
            .chain(n.control_inputs.iter().map(|c| c.index()))
    };
    for (i, n) in g.nodes.iter().enumerate() {
        if let Some(p) = preds(i).find(|&p| p >= len) {
            return Err(format!(
                "node {:?} reads node {}, which does not exist",
                n.name,
                NodeId(p as u32)
            ));
        }
    }
    crate::exec::graph::kahn_order(len, preds)
        .map(|o| o.into_iter().map(NodeId).collect())
        .map_err(|left| {
            let on = left.first().map_or(0, |&i| i as usize);
            format!("edges form a cycle through node {:?}", g.nodes[on].name)
        })
}

/// The device meta of a descriptor, `None` for a type the device does not compute on.
pub fn desc_meta(d: &TensorDesc) -> Option<TensorMeta> {
    Some(TensorMeta {
        dtype: dtype(d.dtype)?,
        shape: match &d.shape {
            Shape::Dims(dims) => Some(dims.iter().map(|&x| if x < 0 { -1 } else { x }).collect()),
            Shape::UnknownRank => None,
        },
    })
}

/// The least general meta covering both: differing dims become unknown, differing ranks an
/// unknown rank. `None` when the dtypes differ.
pub(super) fn merge_meta(a: &TensorMeta, b: &TensorMeta) -> Option<TensorMeta> {
    if a.dtype != b.dtype {
        return None;
    }
    let shape = match (&a.shape, &b.shape) {
        (Some(x), Some(y)) if x.len() == y.len() => Some(
            x.iter()
                .zip(y)
                .map(|(&p, &q)| if p == q { p } else { -1 })
                .collect(),
        ),
        _ => None,
    };
    Some(TensorMeta {
        dtype: a.dtype,
        shape,
    })
}

/// Calls `f` on each present input in order, once per value: an input that is a clone of
/// an earlier one (a node reading one tensor twice) gets the earlier one's forms instead, so
/// nothing is uploaded or downloaded twice.
pub(super) fn for_each_value(ins: &mut [Option<TVal>], mut f: impl FnMut(&mut TVal)) {
    let before: Vec<Option<TVal>> = ins.to_vec();
    for i in 0..ins.len() {
        let Some(b) = &before[i] else { continue };
        let dup = (0..i).find(|&j| before[j].as_ref().is_some_and(|a| a.same_value(b)));
        match dup {
            Some(j) => ins[i] = ins[j].clone(),
            None => {
                if let Some(t) = ins[i].as_mut() {
                    f(t);
                }
            }
        }
    }
}

/// Why a node of a supported op type is still unsupported: an element type the device
/// does not compute on (float8, int4, ...), on an output or named by a type attribute.
/// Such a model is valid; rt2 lacks the type, so it is reported with the unsupported ops
/// (exit 1), not refused as bad input.
fn unsupported_type(n: &ComputeNode, attrs: &Attrs) -> Option<String> {
    for (k, d) in n.output_descs.iter().enumerate() {
        if d.dtype != crate::om::DataType::Undefined && dtype(d.dtype).is_none() {
            return Some(format!(
                "output {k} is {}, an element type the device does not compute on",
                d.dtype.name()
            ));
        }
    }
    for key in attrs::TYPE_ATTRS {
        // Converted to an element type when the device has it; left a number otherwise.
        if let Some(crate::ops::Attr::Int(v)) = attrs.get(key) {
            let name = attrs::type_number_name(&n.attrs, *v);
            return Some(format!(
                "attribute {key:?} names {name}, an element type the device does not compute on"
            ));
        }
    }
    None
}

/// Whether a Const's `value` holds its elements. A dump written without weights (GE's
/// default `DUMP_GE_GRAPH` level strips them) keeps the descriptor and drops the bytes,
/// or drops the attribute; an empty tensor legitimately has no bytes.
fn stored_value(t: &Tensor) -> bool {
    !t.data.is_empty() || t.desc.shape.element_count() == Some(0)
}

/// A tensor of a trial lowering (see [`Builder::dry`]): every form present, pointing
/// nowhere, since the trial's graph is thrown away.
pub(super) fn stub(m: &TensorMeta) -> Option<TVal> {
    let nowhere = ValueRef {
        node: KernelNodeId(0),
        output: 0,
    };
    let mut t = TVal::new(m.clone());
    t.shape = Some(nowhere);
    t.mem = Some(nowhere);
    t.host = Some(nowhere);
    Some(t)
}

/// Copies a known value's form over to a bound subgraph input.
pub(super) fn bound(meta: &TensorMeta, konst: Option<u32>) -> TVal {
    let mut t = TVal::new(meta.clone());
    t.konst = konst;
    t
}

/// The attribute GE's engine placement writes on every op: the op kernel library that
/// builds and launches it, so which engine runs it.
pub const KERNEL_LIB_ATTR: &str = "_ge_attr_op_kernel_lib_name";

pub use crate::exec::kernel_types::KERNEL_NAME_ATTR;

/// The compiled-kernel name of a launch of a separately compiled sub-model: this prefix
/// and the graph's name.
pub const SUBMODEL_KERNEL_PREFIX: &str = "model:";

/// The launch of an op placed on no engine rt2 tells apart: GE's AI Core launch.
pub const DEFAULT_LAUNCH: &str = "LaunchKernelWithHandle";

/// The launch kernel type GE's engine for op kernel library `lib` launches an op with
/// (runtime/v2 `AicpuNodeConverter` for the AI CPU and host CPU libraries, the AI Core
/// converter for the rest).
pub fn launch_kernel(lib: Option<&str>) -> &'static str {
    match lib {
        Some("aicpu_ascend_kernel") => "AicpuLaunchCCKernel",
        Some("aicpu_tf_kernel") => "AicpuLaunchTfKernel",
        Some("DNN_VM_HOST_CPU_OP_STORE") => "AicpuHostCompute",
        _ => DEFAULT_LAUNCH,
    }
}

/// Whether `n` reads a value lowering could not produce: such a node is reported through
/// its producer, and emitting anything for it would only add noise.
fn reads_a_missing_value(n: &ComputeNode, ins: &[Option<TVal>]) -> bool {
    n.inputs
        .iter()
        .zip(ins)
        .any(|(p, t)| p.is_some() && t.is_none())
}

/// The name of the kernel GE compiled for `n`: `_kernelname`, else the
/// `<node name>_kernelname` the TBE task builder reads (an uncompressed model), else the
/// op type.
pub fn compiled_kernel_name(n: &ComputeNode) -> String {
    let key = format!("{}_kernelname", n.name);
    n.attr("_kernelname")
        .or_else(|| n.attr(&key))
        .and_then(AttrValue::as_str)
        .filter(|k| !k.is_empty())
        .unwrap_or(&n.op_type)
        .to_string()
}

/// The node's outputs as its descriptors declare them, when there is at least one and
/// each has a static shape and an element type the device has: what a compiled kernel
/// is lowered with when no shape inference knows the op.
pub fn declared_outputs(n: &ComputeNode) -> Option<Vec<TensorMeta>> {
    if n.output_descs.is_empty() {
        return None;
    }
    n.output_descs
        .iter()
        .map(|d| desc_meta(d).filter(TensorMeta::is_static))
        .collect()
}

/// What a launch runs and how: the op, the engine's launch kernel type, and whether it
/// is a compiled kernel rt2 cannot compute.
pub struct LaunchOp<'a> {
    /// The op library's entry; `None` for an op it does not know, whose outputs are then
    /// the node's declared static ones.
    pub spec: Option<&'a OpSpec>,
    /// The op type the launch names (`_op_type`).
    pub op_type: &'a str,
    /// One of `kernel_types::OP_LAUNCHES` ([`launch_kernel`]).
    pub kernel: &'static str,
    /// The compiled kernel's name ([`KERNEL_NAME_ATTR`]) when rt2 cannot compute the op.
    pub compiled: Option<String>,
}

impl<'r> Lowering<'r> {
    pub fn new(reg: &'r OpRegistry) -> Self {
        Lowering {
            b: Builder::new(),
            reg,
            unsupported: Vec::new(),
            root_inputs: Vec::new(),
            weights_base: 0,
            fixed_inputs: Vec::new(),
            pack_weights: true,
            metas: None,
            packed: Default::default(),
            last_plain: None,
            last_launch: None,
        }
    }

    fn unsupported(&mut self, path: &str, n: &ComputeNode, why: &str) {
        if self.b.dry {
            return;
        }
        self.unsupported.push(Unsupported {
            graph: path.to_string(),
            node: n.name.clone(),
            op_type: n.op_type.clone(),
            reason: why.to_string(),
        });
    }

    /// Lowers `g` into the current level; returns its outputs (the NetOutput's inputs, or
    /// `GraphDef.output` when it has no NetOutput).
    pub fn graph(
        &mut self,
        g: &ComputeGraph,
        path: &str,
        bind: &mut Bind,
    ) -> Result<Vec<Option<TVal>>> {
        let order = compute_order(g).map_err(|m| LowerError::Graph {
            graph: path.to_string(),
            message: m,
        })?;
        let mut vals: Vec<Vec<Option<TVal>>> = g
            .nodes
            .iter()
            .map(|n| vec![None; n.output_descs.len().max(1)])
            .collect();
        // Root input nodes get consecutive model input indices: Data nodes in `index`
        // order, then PlaceHolders in `peerIndex` order; weights come after them.
        let mut root_index = std::collections::HashMap::new();
        if matches!(bind, Bind::Root) {
            let inputs = g.input_nodes();
            self.weights_base = inputs.len();
            for (k, id) in inputs.into_iter().enumerate() {
                root_index.insert(id, k);
            }
        }
        let metas_at = self.metas.as_mut().map(|m| {
            m.push((g.name.clone(), vec![None; g.nodes.len()]));
            m.len() - 1
        });
        let mut outputs: Option<Vec<Option<TVal>>> = None;
        // A partitioned subgraph's End nodes, by node id: outputs after the NetOutput's.
        let mut ends: std::collections::BTreeMap<NodeId, Option<TVal>> = Default::default();
        for id in order {
            let n = g.node(id);
            let mut ins: Vec<Option<TVal>> = n
                .inputs
                .iter()
                .map(|p| {
                    p.and_then(|p| {
                        vals.get(p.node.index())
                            .and_then(|v| v.get(p.index as usize))
                            .cloned()
                            .flatten()
                    })
                })
                .collect();
            let origin = Arc::new(Origin {
                graph: g.name.as_str().into(),
                node: n.name.as_str().into(),
                op_type: n.op_type.as_str().into(),
                index: id.0,
            });
            let conv = match converter_for(self.reg, &n.op_type) {
                Some(c) => c,
                // An op the library does not know still lowers as its compiled kernel
                // when the node declares its outputs.
                None if declared_outputs(n).is_some() => Converter::Op,
                None => {
                    self.unsupported(path, n, NO_CONVERTER);
                    continue;
                }
            };
            let outs: Vec<Option<TVal>> = match conv {
                Converter::Data => {
                    vec![self.data(path, n, bind, root_index.get(&id).copied())?]
                }
                Converter::Const => vec![self.konst(path, n)?],
                Converter::NetOutput => {
                    outputs = Some(ins);
                    continue;
                }
                Converter::End => {
                    ends.insert(id, ins.into_iter().next().flatten());
                    continue;
                }
                Converter::If | Converter::Case => self.branch(path, n, &mut ins, &origin, conv)?,
                Converter::While => self.while_loop(path, n, &mut ins, &origin)?,
                Converter::Loop => self.onnx_loop(path, n, &mut ins, &origin)?,
                Converter::Call => {
                    let sub = n
                        .subgraphs
                        .first()
                        .ok_or_else(|| node_error(path, n, "calls no subgraph"))?;
                    if sub.external {
                        self.submodel_launch(path, n, &mut ins, origin, &sub.name)
                    } else {
                        let sub_path = format!("{path}/{}", n.name);
                        self.graph(sub, &sub_path, &mut Bind::Parent(&mut ins))?
                    }
                }
                Converter::Op => self.op(path, n, &mut ins, origin)?,
            };
            if let (Some(metas), Some(at)) = (&mut self.metas, metas_at) {
                let m = outs.iter().map(|t| t.as_ref().map(|t| t.meta.clone()));
                metas[at].1[id.index()] = Some(m.collect());
            }
            // The forms the converter made of its inputs serve later readers too.
            for (p, t) in n.inputs.iter().zip(ins) {
                if let (Some(p), Some(t)) = (p, t)
                    && let Some(slot) = vals
                        .get_mut(p.node.index())
                        .and_then(|v| v.get_mut(p.index as usize))
                {
                    *slot = Some(t);
                }
            }
            // Control edges between compute nodes order their launches.
            if !n.control_inputs.is_empty() {
                self.order_after(n, g, &vals, &outs);
            }
            let slot = &mut vals[id.index()];
            for (k, o) in outs.into_iter().enumerate() {
                if k < slot.len() {
                    slot[k] = o;
                } else {
                    slot.push(o);
                }
            }
        }
        if let Bind::Parent(values) = bind {
            for (id, n) in g.data_nodes() {
                let p = n
                    .attr_int(PARENT_NODE_INDEX)
                    .or_else(|| n.attr_int("index"));
                if let Some(slot) = p
                    .and_then(|p| usize::try_from(p).ok())
                    .and_then(|p| values.get_mut(p))
                    && let Some(Some(t)) = vals[id.index()].first()
                {
                    *slot = Some(t.clone());
                }
            }
        }
        let mut outputs = match outputs {
            Some(o) => o,
            None => g
                .outputs
                .iter()
                .map(|p| {
                    vals.get(p.node.index())
                        .and_then(|v| v.get(p.index as usize))
                        .cloned()
                        .flatten()
                })
                .collect(),
        };
        for id in g.end_nodes() {
            outputs.push(ends.remove(&id).flatten());
        }
        Ok(outputs)
    }

    /// Adds control edges from the launches of `n`'s control predecessors to the nodes
    /// writing `n`'s outputs.
    fn order_after(
        &mut self,
        n: &ComputeNode,
        g: &ComputeGraph,
        vals: &[Vec<Option<TVal>>],
        outs: &[Option<TVal>],
    ) {
        let before: BTreeSet<KernelNodeId> = n
            .control_inputs
            .iter()
            .filter(|c| c.index() < g.nodes.len())
            .flat_map(|c| vals[c.index()].iter().flatten().filter_map(|t| t.order))
            .collect();
        let after: BTreeSet<KernelNodeId> = outs.iter().flatten().filter_map(|t| t.order).collect();
        for a in after {
            self.b.add_control(a, &before);
        }
    }

    fn data(
        &mut self,
        path: &str,
        n: &ComputeNode,
        bind: &Bind,
        root_index: Option<usize>,
    ) -> Result<Option<TVal>> {
        match bind {
            Bind::Root => {
                let desc = n.output_descs.first().or(n.input_descs.first());
                let Some(meta) = desc.and_then(desc_meta) else {
                    self.unsupported(path, n, "its type is not one the device computes on");
                    return Ok(None);
                };
                let index = root_index.unwrap_or(0);
                let mut t = self.model_input(n, meta, index, false);
                let maker = t.shape.map(|s| s.node);
                self.carry_format(&mut t, desc, maker);
                Ok(Some(t))
            }
            Bind::Parent(_) if n.op_type == PLACEHOLDER => Err(node_error(
                path,
                n,
                "a PlaceHolder is an input of a partitioned graph, which is a root graph",
            )),
            Bind::Parent(values) => {
                let p = n
                    .attr_int(PARENT_NODE_INDEX)
                    .or_else(|| n.attr_int("index"))
                    .ok_or_else(|| node_error(path, n, "subgraph Data has no parent index"))?;
                let v = usize::try_from(p).ok().and_then(|p| values.get(p));
                match v {
                    Some(v) => Ok(v.clone()),
                    None => Err(node_error(
                        path,
                        n,
                        format!("parent index {p} is out of range 0..{}", values.len()),
                    )),
                }
            }
        }
    }

    /// Main's `Data` node for model input `index` (its shape and host tensor), recorded
    /// in [`Lowering::root_inputs`].
    fn model_input(
        &mut self,
        n: &ComputeNode,
        meta: TensorMeta,
        index: usize,
        weight: bool,
    ) -> TVal {
        let meta = self.specialized(&n.name, meta);
        self.root_inputs.push(RootInput {
            index,
            name: n.name.clone(),
            meta: meta.clone(),
            weight,
        });
        let mut d = node(n.name.clone(), "Data");
        d.outputs = 2;
        d.attrs
            .insert("index".into(), KernelAttr::Int(index as i64));
        let id = self.b.add(d);
        let mut t = TVal::new(meta);
        t.shape = Some(ValueRef {
            node: id,
            output: 0,
        });
        t.host = Some(ValueRef {
            node: id,
            output: 1,
        });
        t
    }

    /// `meta` of model input `name` with the dims [`Lowering::fixed_inputs`] gives it in
    /// place of its unknown ones (a given -1 keeps the input's dim); as it is when none
    /// are given or they contradict a known dim or the rank (which the input's own check
    /// then reports at run time).
    fn specialized(&self, name: &str, meta: TensorMeta) -> TensorMeta {
        let Some((_, dims)) = self.fixed_inputs.iter().find(|(n, _)| n == name) else {
            return meta;
        };
        let shape = match &meta.shape {
            None => dims.iter().map(|&d| d.max(-1)).collect(),
            Some(have) if have.len() == dims.len() => {
                let mut shape = Vec::with_capacity(have.len());
                for (&h, &d) in have.iter().zip(dims) {
                    if h >= 0 && d >= 0 && h != d {
                        return meta;
                    }
                    shape.push(if d >= 0 { d } else { h });
                }
                shape
            }
            Some(_) => return meta,
        };
        TensorMeta {
            dtype: meta.dtype,
            shape: Some(shape),
        }
    }

    /// A Const written without its value (see [`stored_value`]): a weight the caller
    /// supplies, bound as a model input after the model's own. Its type and shape are
    /// the value's descriptor's, or the node's output descriptor's.
    fn weight(&mut self, path: &str, n: &ComputeNode) -> Result<Option<TVal>> {
        let desc = n
            .attr("value")
            .and_then(AttrValue::as_tensor)
            .map(|t| &t.desc)
            .filter(|d| d.dtype != crate::om::DataType::Undefined)
            .or(n.output_descs.first());
        let Some(meta) = desc.and_then(desc_meta) else {
            self.unsupported(
                path,
                n,
                "a Const without a stored value whose type is not one the device computes on",
            );
            return Ok(None);
        };
        if self.b.depth() > 0 {
            // Weights are Main's inputs, and a control-flow subgraph reaches only what
            // its owner passes it (Init's exports through captures).
            self.unsupported(
                path,
                n,
                "a Const without a stored value inside a control-flow subgraph",
            );
            return Ok(None);
        }
        let index = self.weights_base + self.root_inputs.iter().filter(|i| i.weight).count();
        let mut t = self.model_input(n, meta, index, true);
        let maker = t.shape.map(|s| s.node);
        self.carry_format(&mut t, desc, maker);
        Ok(Some(t))
    }

    /// Keeps `desc`'s formats on `t` when they are not plain, and writes them onto the
    /// exec node `maker` that makes the tensor, for views and kernels.
    fn carry_format(
        &mut self,
        t: &mut TVal,
        desc: Option<&TensorDesc>,
        maker: Option<KernelNodeId>,
    ) {
        let Some(desc) = desc else { return };
        if self
            .last_plain
            .as_ref()
            .is_some_and(|p| super::layout::same_formats(p, desc))
        {
            return;
        }
        let Some(f) = attrs::special_format(desc) else {
            self.last_plain = Some(desc.clone());
            return;
        };
        if let Some(id) = maker.filter(|_| !self.b.dry) {
            self.b.annotate_format(id, &f);
        }
        t.format = Some(Arc::new(f));
    }

    /// [`Lowering::carry_format`] for each output of `n`, made by its `AllocMemHbm`.
    fn carry_output_formats(&mut self, n: &ComputeNode, outs: &mut [TVal]) {
        for (t, d) in outs.iter_mut().zip(&n.output_descs) {
            let maker = t
                .mem
                .map(|m| m.node)
                .filter(|&id| self.b.graph().node(id).kernel == "AllocMemHbm");
            self.carry_format(t, Some(d), maker);
        }
    }

    fn konst(&mut self, path: &str, n: &ComputeNode) -> Result<Option<TVal>> {
        let t = match n.attr("value") {
            Some(AttrValue::Tensor(t)) if stored_value(t) => t,
            None | Some(AttrValue::Tensor(_)) => return self.weight(path, n),
            Some(other) => {
                return Err(node_error(
                    path,
                    n,
                    format!(
                        "attribute \"value\" is of kind {}, not a tensor",
                        other.kind()
                    ),
                ));
            }
        };
        let Some(ht) = attrs::tensor(t) else {
            if dtype(t.desc.dtype).is_none() {
                self.unsupported(path, n, "its type is not one the device computes on");
                return Ok(None);
            }
            return Err(node_error(
                path,
                n,
                format!(
                    "value has {} bytes, which does not match {} {}",
                    t.data.len(),
                    t.desc.dtype.name(),
                    t.desc.shape
                ),
            ));
        };
        Ok(Some(self.constant(ht)))
    }

    /// `t` as a constant value of lowering.
    fn constant(&mut self, t: HostTensor) -> TVal {
        let mut v = TVal::new(TensorMeta::new(t.dtype, &t.shape));
        v.konst = Some(self.b.add_const(t));
        v
    }

    /// The value of `t`, when it is a constant.
    fn value(&self, t: &TVal) -> Option<&HostTensor> {
        t.konst.map(|id| self.b.consts[id as usize].as_ref())
    }

    /// A node of the op library.
    /// A call of a subgraph the model does not hold (an external graph that no model of
    /// the file answered): lowered as a launch of the separately compiled model it names,
    /// a compiled kernel named `model:<graph>` shaped by the node's declared outputs, which
    /// rt2 cannot compute. Without static declared outputs the node is unsupported.
    fn submodel_launch(
        &mut self,
        path: &str,
        n: &ComputeNode,
        ins: &mut [Option<TVal>],
        origin: Arc<Origin>,
        graph: &str,
    ) -> Vec<Option<TVal>> {
        if reads_a_missing_value(n, ins) {
            return vec![None; n.output_descs.len()];
        }
        let Some(outs) = declared_outputs(n) else {
            self.unsupported(
                path,
                n,
                &format!(
                    "calls subgraph {graph:?}, which neither the model nor its file holds, \
                     and declares no static outputs"
                ),
            );
            return vec![None; n.output_descs.len()];
        };
        let op = LaunchOp {
            spec: None,
            op_type: &n.op_type,
            kernel: launch_kernel(n.attr(KERNEL_LIB_ATTR).and_then(AttrValue::as_str)),
            compiled: Some(format!("{SUBMODEL_KERNEL_PREFIX}{graph}")),
        };
        let attrs = attrs::op_attrs(&n.attrs);
        let mut results = self.emit_launch(&n.name, &op, attrs, ins, &outs, Some(origin));
        self.carry_output_formats(n, &mut results);
        results.into_iter().map(Some).collect()
    }

    fn op(
        &mut self,
        path: &str,
        n: &ComputeNode,
        ins: &mut [Option<TVal>],
        origin: Arc<Origin>,
    ) -> Result<Vec<Option<TVal>>> {
        let spec = self.reg.get(&n.op_type).copied();
        let kernel = launch_kernel(n.attr(KERNEL_LIB_ATTR).and_then(AttrValue::as_str));
        if reads_a_missing_value(n, ins) {
            return Ok(vec![None; n.output_descs.len()]);
        }
        let mut attrs = attrs::op_attrs(&n.attrs);
        attrs::add_input_formats(n, &mut attrs);
        if let Some(why) = unsupported_type(n, &attrs) {
            self.unsupported(path, n, &why);
            return Ok(vec![None; n.output_descs.len()]);
        }
        // A GE graph's node of a type the library shares with ONNX is computed by the
        // library op only where GE's contract is made its own; otherwise it is a compiled
        // kernel rt2 cannot compute, never the ONNX op computing something else.
        // GE's Split, say, is launched as SplitD on its input 1: the op and the inputs
        // it takes (`first..first + count`) may change here.
        let (mut spec, mut first, mut count) = (spec, 0, ins.len());
        let refused = match spec.and_then(|s| Some((s, s.ge_contract?))) {
            Some((own, f)) if !n.attrs.contains_key(attrs::ONNX_OPSET_ATTR) => {
                let outputs = n.output_descs.len().max(1);
                let used = self
                    .with_ctx(&n.op_type, ins, &attrs, outputs, f)
                    .and_then(|u| u.resolve(self.reg, own, ins.len()));
                match used {
                    Ok((target, a, range)) => {
                        (spec, attrs, first, count) = (Some(target), a, range.start, range.len());
                        None
                    }
                    Err(why) => Some(why),
                }
            }
            _ => None,
        };
        let computes = refused.is_none() && spec.is_some_and(|s| s.compute.is_some());
        let declared = if computes { None } else { declared_outputs(n) };
        let spec = match (spec, declared) {
            // GE's compiled kernel, shaped by the node's descriptors: lowered as any
            // launch, marked with its kernel name so running refuses it at load.
            (_, Some(outs)) => {
                let op = LaunchOp {
                    spec: spec.as_ref(),
                    op_type: &n.op_type,
                    kernel,
                    compiled: Some(compiled_kernel_name(n)),
                };
                let mut results = self.emit_launch(&n.name, &op, attrs, ins, &outs, Some(origin));
                self.carry_output_formats(n, &mut results);
                return Ok(results.into_iter().map(Some).collect());
            }
            (Some(_), None) if refused.is_some() => {
                let why = refused.unwrap_or_default();
                self.unsupported(path, n, &format!("{why}; without static output descriptors it cannot be lowered as GE's compiled kernel either"));
                return Ok(vec![None; n.output_descs.len()]);
            }
            (Some(spec), None) => spec,
            (None, None) => {
                return Err(node_error(
                    path,
                    n,
                    "has no op library entry and no static output descriptors",
                ));
            }
        };
        let ins = &mut ins[first..first + count];
        let outs = self.infer(path, n, &spec, ins, &attrs)?;
        if let Some(folded) = self.try_fold(&spec, ins, &attrs, &outs) {
            return Ok(folded);
        }
        if const_eval::needs_only_shapes(spec.name)
            && let Some(t) = self.host_shape_op(n, spec.name, ins, &attrs, &outs, &origin)
        {
            return Ok(vec![Some(t)]);
        }
        let name = n.name.clone();
        // A library op without compute (shaped by its inference here) is a compiled
        // kernel as well.
        let compiled = (!computes).then(|| compiled_kernel_name(n));
        let (spec, attrs, ins) = match self.translated(n, &spec, ins, &attrs, &outs) {
            Some((target, attrs, taken)) => (target, attrs, &mut ins[taken]),
            None => (spec, attrs, ins),
        };
        if compiled.is_none()
            && let Some(folded) = self.fold_on_host(&spec, ins, &attrs, &outs)
        {
            return Ok(folded);
        }
        if let Some((target, mut operands, attrs, prepared)) = self.prepacked(&spec, ins, &attrs) {
            let op = LaunchOp {
                spec: Some(&target),
                op_type: target.name,
                kernel,
                compiled: compiled.clone(),
            };
            let mut results =
                self.emit_launch(&name, &op, attrs, &mut operands, &outs, Some(origin));
            self.carry_output_formats(n, &mut results);
            // The forms made of the other operands (an upload, say) serve their later
            // readers too.
            for (i, operand) in operands.into_iter().enumerate() {
                if i != prepared {
                    ins[i] = operand;
                }
            }
            return Ok(results.into_iter().map(Some).collect());
        }
        let op = LaunchOp {
            spec: Some(&spec),
            op_type: spec.name,
            kernel,
            compiled,
        };
        let mut results = self.emit_launch(&name, &op, attrs, ins, &outs, Some(origin));
        self.carry_output_formats(n, &mut results);
        Ok(results.into_iter().map(Some).collect())
    }

    /// A shape op (Shape, Size, Rank) whose input shape is known only at run time, as
    /// GE's RT2 lowers Shape: a host kernel (`BuildShapeTensorData`) computing the value
    /// from the input's shape, placed on the host. The input's memory is never read, so
    /// the op waits for no launch, and a reader that wants the value on the host (a
    /// Reshape's shape) takes it there without a copy back from the device; a device
    /// reader gets it uploaded.
    fn host_shape_op(
        &mut self,
        n: &ComputeNode,
        op: &str,
        ins: &mut [Option<TVal>],
        attrs: &Attrs,
        outs: &[TensorMeta],
        origin: &Arc<Origin>,
    ) -> Option<TVal> {
        let [out] = outs else { return None };
        // The result's own shape must be known here (a host tensor carries no shape value
        // for its readers' launches): an input of unknown rank gives a Shape of unknown
        // length, which is launched as any op, its shape inferred at run time.
        if !out.is_static() {
            return None;
        }
        let shape = self.b.shape_of(ins.first_mut()?.as_mut()?)?;
        let mut k = node(
            format_compact!("{}/BuildShapeTensorData", n.name),
            "BuildShapeTensorData",
        );
        k.inputs = smallvec![shape];
        k.outputs = 1;
        k.origin = Some(origin.clone());
        k.attrs.insert("op".into(), KernelAttr::Str(op.into()));
        k.attrs
            .insert("dtype".into(), KernelAttr::Str(out.dtype.name().into()));
        for key in ["start", "end"] {
            if let Some(v) = attrs.get(key) {
                k.attrs.insert(key.into(), v.clone());
            }
        }
        let id = self.b.add(k);
        let mut t = TVal::new(out.clone());
        t.host = Some(ValueRef {
            node: id,
            output: 0,
        });
        Some(t)
    }

    /// The node as its op's prepack hook asks for it ([`crate::ops::Prepack`]): the op
    /// to launch instead, the operands with the chosen constant replaced by its prepared
    /// form, the attributes with the hook's added, and which operand was replaced. Each
    /// constant is prepared once per launched op however many nodes read it; the
    /// constant itself stays for other readers (a constant is uploaded only where a
    /// kernel reads it).
    fn prepacked(
        &mut self,
        spec: &OpSpec,
        ins: &[Option<TVal>],
        attrs: &Attrs,
    ) -> Option<(OpSpec, Vec<Option<TVal>>, Attrs, usize)> {
        let hook = spec.prepack.filter(|_| self.pack_weights)?;
        // An omitted optional input reaches the hook as `with_ctx` spells it (an RNN's
        // sequence_lens between its weights and initial states is usually omitted); the
        // operand chosen must be a constant that is there.
        let plan = self.with_ctx(spec.name, ins, attrs, 1, hook)?;
        let target = *self.reg.get(plan.op)?;
        let id = ins.get(plan.input)?.as_ref()?.konst?;
        // Keyed by the packing too: one op may lay a constant out two ways (Gemm's B,
        // packed as it is or transposed).
        let key = (id, plan.op, plan.pack as usize);
        let prepared = match self.packed.get(&key) {
            Some(&p) => p,
            None => {
                let t = (plan.pack)(&self.b.consts[id as usize])?;
                let p = self.b.add_const(t);
                self.packed.insert(key, p);
                p
            }
        };
        let shape = self.b.consts[prepared as usize].shape.clone();
        let dtype = self.b.consts[prepared as usize].dtype;
        let mut weight = TVal::new(TensorMeta::new(dtype, &shape));
        weight.konst = Some(prepared);
        let mut operands = ins.to_vec();
        operands[plan.input] = Some(weight);
        let mut attrs = attrs.clone();
        for (name, value) in plan.attrs {
            attrs.insert(name.into(), value);
        }
        Some((target, operands, attrs, plan.input))
    }

    /// Calls `f` with the inference context of `op` on `ins`: their metas and known
    /// values, and `attrs`. An omitted optional input reaches it as an empty 1-D tensor of
    /// input 0's type whose (empty) value is known: ONNX's own spelling of "no value".
    fn with_ctx<R>(
        &self,
        op: &str,
        ins: &[Option<TVal>],
        attrs: &Attrs,
        outputs: usize,
        f: impl FnOnce(&InferCtx) -> R,
    ) -> R {
        let fill = ins
            .iter()
            .flatten()
            .next()
            .map(|t| t.meta.dtype)
            .unwrap_or(DType::F32);
        let empty = HostTensor {
            dtype: fill,
            shape: vec![0],
            data: Default::default(),
        };
        let metas: Vec<TensorMeta> = ins
            .iter()
            .map(|t| match t {
                Some(t) => t.meta.clone(),
                None => TensorMeta::new(fill, &[0]),
            })
            .collect();
        let values: Vec<Option<&HostTensor>> = ins
            .iter()
            .map(|t| match t {
                Some(t) => self.value(t),
                None => Some(&empty),
            })
            .collect();
        f(&InferCtx {
            op,
            inputs: &metas,
            values: &values,
            attrs,
            outputs,
        })
    }

    /// The node's output metas from the op library, on the metas and known values of its
    /// inputs ([`Lowering::with_ctx`]). The op is the spec's: a GE node launched as
    /// another op (GE's Pad as PadD) is inferred as that op, whose alias rows and
    /// attribute readers go by its name.
    fn infer(
        &mut self,
        path: &str,
        n: &ComputeNode,
        spec: &OpSpec,
        ins: &[Option<TVal>],
        attrs: &Attrs,
    ) -> Result<Vec<TensorMeta>> {
        let outputs = n.output_descs.len().max(1);
        self.with_ctx(spec.name, ins, attrs, outputs, |ctx| spec.infer_shapes(ctx))
            .map_err(|e| node_error(path, n, e.to_string()))
    }

    /// The node as its op's translation hook asks for it ([`crate::ops::Translation`]):
    /// the op to launch instead, its attributes, and the range of inputs it takes.
    /// The translated op's own inference must give the node's output metas exactly, or
    /// the node stays as it is: a translation never changes a shape or a type, and the
    /// values are the translated op's kernel's, which the node's own compute calls too.
    fn translated(
        &self,
        n: &ComputeNode,
        spec: &OpSpec,
        ins: &[Option<TVal>],
        attrs: &Attrs,
        outs: &[TensorMeta],
    ) -> Option<(OpSpec, Attrs, std::ops::Range<usize>)> {
        let hook = spec.translate?;
        let outputs = n.output_descs.len().max(1);
        // The spec's own name: a GE node launched as another op (GE's Split as SplitD)
        // asks that op's hook.
        let plan = self.with_ctx(spec.name, ins, attrs, outputs, hook)?;
        let target = *self.reg.get(plan.op)?;
        let taken = plan.first..plan.first + plan.inputs;
        let ins = ins.get(taken.clone())?;
        let check = self.with_ctx(target.name, ins, &plan.attrs, outputs, |ctx| {
            target.infer_shapes(ctx)
        });
        // The node's outputs lead the target's (MaxPool's optional indices follow).
        (check.ok()?.get(..outs.len())? == outs).then_some((target, plan.attrs, taken))
    }

    /// The node's outputs as constants, when folding applies.
    fn try_fold(
        &mut self,
        spec: &OpSpec,
        ins: &[Option<TVal>],
        attrs: &Attrs,
        outs: &[TensorMeta],
    ) -> Option<Vec<Option<TVal>>> {
        if !outs.iter().all(TensorMeta::is_static) {
            return None;
        }
        let shapes_only = const_eval::needs_only_shapes(spec.name);
        if !shapes_only && !ins.iter().flatten().all(|t| t.konst.is_some()) {
            return None;
        }
        if shapes_only && !ins.first()?.as_ref()?.meta.is_static() {
            return None;
        }
        let metas: Vec<TensorMeta> = ins
            .iter()
            .map(|t| {
                t.as_ref()
                    .map(|t| t.meta.clone())
                    .unwrap_or(TensorMeta::unknown_rank(DType::F32))
            })
            .collect();
        let values: Vec<Option<&HostTensor>> =
            ins.iter().map(|t| self.value(t.as_ref()?)).collect();
        let folded = const_eval::fold(spec.name, attrs, &values, &metas, outs)?;
        Some(folded.into_iter().map(|t| Some(self.constant(t))).collect())
    }

    /// The node's outputs as constants computed now by the op library's own compute
    /// function, when every input is a constant and `const_eval` has no evaluator for the
    /// op: the weight plumbing exporters write around a layer (PyTorch's LSTM cell slices
    /// its weight per gate, concatenates the slices in ONNX's gate order and unsqueezes
    /// the result; a weight transposed or scaled by a constant), which otherwise ran at
    /// every execution and kept the layer's weight from being prepared at lowering
    /// (`prepacked` sees only constants). The device would run the same function on the
    /// same bytes, so the constant has its bits. Not folded: an op whose compute draws
    /// on a seed or an RNG (Dropout, any op with a `seed` attribute), outputs not all
    /// static or larger than [`const_eval::MAX_FOLD_BYTES`] together, a node with an
    /// omitted optional input, and any op the library refuses here; those stay launches,
    /// whose errors the device reports as it would have.
    fn fold_on_host(
        &mut self,
        spec: &OpSpec,
        ins: &[Option<TVal>],
        attrs: &Attrs,
        outs: &[TensorMeta],
    ) -> Option<Vec<Option<TVal>>> {
        let nondeterministic = spec.name == "Dropout" || attrs.contains_key("seed");
        if spec.compute.is_none()
            || nondeterministic
            || ins.is_empty()
            || !const_eval::within_bound(outs)
        {
            return None;
        }
        // Every input a constant (an omitted one, or one known only at run time, is not).
        let inputs: Vec<&HostTensor> = ins
            .iter()
            .map(|t| self.value(t.as_ref()?))
            .collect::<Option<_>>()?;
        let mut results = self
            .reg
            .run_on_host_values(spec.name, attrs, &inputs, outs.len())
            .ok()??;
        // The node's outputs lead the op's (see `translated`).
        results.truncate(outs.len());
        let same = results.len() == outs.len()
            && results
                .iter()
                .zip(outs)
                .all(|(t, m)| TensorMeta::new(t.dtype, &t.shape) == *m);
        same.then(|| {
            results
                .into_iter()
                .map(|t| Some(self.constant(t)))
                .collect()
        })
    }

    /// Emits the kernel sequence of library op `spec` on `ins` with outputs `outs`,
    /// launched as an AI Core op (`LaunchKernelWithHandle`).
    pub fn emit(
        &mut self,
        name: &str,
        spec: &OpSpec,
        attrs: Attrs,
        ins: &mut [Option<TVal>],
        outs: &[TensorMeta],
        origin: Option<Arc<Origin>>,
    ) -> Vec<TVal> {
        let op = LaunchOp {
            spec: Some(spec),
            op_type: spec.name,
            kernel: DEFAULT_LAUNCH,
            compiled: None,
        };
        self.emit_launch(name, &op, attrs, ins, outs, origin)
    }

    /// Emits the kernel sequence of `op` on `ins` with outputs `outs`.
    pub fn emit_launch(
        &mut self,
        name: &str,
        op: &LaunchOp<'_>,
        attrs: Attrs,
        ins: &mut [Option<TVal>],
        outs: &[TensorMeta],
        origin: Option<Arc<Origin>>,
    ) -> Vec<TVal> {
        let stream = self.b.global(Global::Stream);
        let alloc = self.b.global(Global::Allocator);
        let in_types = ins.iter().map(|t| t.as_ref().map(|t| t.meta.dtype));
        let out_types = outs.iter().map(|m| m.dtype);
        let kernel_attrs = match &self.last_launch {
            Some(l)
                if l.op_type == op.op_type
                    && l.compiled == op.compiled
                    && l.in_types.iter().copied().eq(in_types.clone())
                    && l.out_types.iter().copied().eq(out_types.clone())
                    && crate::ops::attr::same_set(&l.op_attrs, &attrs) =>
            {
                l.shared.clone()
            }
            _ => {
                // The op's own attributes (`attrs::op_attrs`) with the kernel's added,
                // shared with every node configured alike.
                let op_attrs = attrs.clone();
                let mut kernel_attrs = attrs;
                kernel_attrs.insert("_op_type".into(), KernelAttr::Str(op.op_type.into()));
                if let Some(k) = &op.compiled {
                    kernel_attrs
                        .insert(KERNEL_NAME_ATTR.into(), KernelAttr::Str(k.as_str().into()));
                }
                kernel_attrs.insert("_in_dtypes".into(), dtype_list(in_types.clone()));
                kernel_attrs.insert(
                    "_out_dtypes".into(),
                    dtype_list(out_types.clone().map(Some)),
                );
                let shared = self.b.share(kernel_attrs);
                self.last_launch = Some(LaunchAttrs {
                    op_attrs,
                    op_type: op.op_type.to_string(),
                    compiled: op.compiled.clone(),
                    in_types: in_types.collect(),
                    out_types: out_types.collect(),
                    shared: shared.clone(),
                });
                shared
            }
        };
        let order: BTreeSet<KernelNodeId> = ins.iter().flatten().filter_map(|t| t.order).collect();
        let with_origin = |mut e: crate::exec::KernelNode| {
            e.origin = origin.clone();
            e
        };

        // Input forms first: shapes and memory of every present input.
        for_each_value(ins, |t| {
            self.b.shape_of(t);
            self.b.mem_of(t, name);
        });
        let in_vals: Vec<ValueRef> = ins
            .iter()
            .flatten()
            .flat_map(|t| [t.shape, t.mem])
            .flatten()
            .collect();

        if op.spec.is_some_and(|s| s.data_dependent) {
            let mut l = with_origin(node(
                format!("{name}/LaunchKernelAllocOutputs"),
                "LaunchKernelAllocOutputs",
            ));
            l.inputs = [stream, alloc].into_iter().chain(in_vals).collect();
            l.outputs = 2 * outs.len() as u32;
            l.attrs = kernel_attrs;
            l.control_inputs = order.into_iter().collect();
            let id = self.b.add(l);
            return outs
                .iter()
                .enumerate()
                .map(|(o, m)| {
                    let mem = ValueRef {
                        node: id,
                        output: 2 * o as u32 + 1,
                    };
                    self.b.own(mem, Some(id));
                    let mut t = TVal::new(m.clone());
                    t.shape = Some(ValueRef {
                        node: id,
                        output: 2 * o as u32,
                    });
                    t.mem = Some(mem);
                    t.order = Some(id);
                    t
                })
                .collect();
        }

        // Output shapes: constants when static, else InferShape.
        let out_shapes: Vec<ValueRef> = if outs.iter().all(TensorMeta::is_static) {
            outs.iter()
                .map(|m| self.b.const_shape(m.shape.as_deref().unwrap_or(&[])))
                .collect()
        } else {
            // Only a library op gets here: a compiled kernel's outputs are static.
            let value_inputs = op.spec.map_or(&[][..], |s| s.value_inputs);
            let func = self.b.global(Global::InferFunc(op.op_type.into()));
            let mut inputs: Inputs = smallvec![func];
            for (i, t) in ins.iter_mut().enumerate() {
                let Some(t) = t else { continue };
                let v = if value_inputs.contains(&i) {
                    self.b.host_of(t, name)
                } else {
                    self.b.shape_of(t)
                };
                inputs.extend(v);
            }
            let mut inf = with_origin(node(format_compact!("{name}/InferShape"), "InferShape"));
            inf.inputs = inputs;
            inf.outputs = outs.len() as u32;
            inf.attrs = kernel_attrs.clone();
            let id = self.b.add(inf);
            (0..outs.len() as u32)
                .map(|o| ValueRef {
                    node: id,
                    output: o,
                })
                .collect()
        };

        let mut results = Vec::with_capacity(outs.len());
        let mut out_vals = Vec::new();
        for (o, m) in outs.iter().enumerate() {
            let mut a = with_origin(node(
                format_compact!("{name}/AllocMemHbm_{o}"),
                "AllocMemHbm",
            ));
            a.inputs = smallvec![alloc];
            match m.shape.as_deref().and_then(|s| m.dtype.tensor_bytes(s)) {
                // A static size is known now: the allocation carries it, as the constant
                // folding pass would leave it (see `passes::const_fold`), without making a
                // CalcTensorSizeFromShape only to fold it away.
                Some(bytes) if m.is_static() => {
                    let mut size = crate::ops::AttrMap::new();
                    size.insert("size".into(), KernelAttr::Int(bytes as i64));
                    a.attrs = self.b.share(size);
                }
                _ => {
                    let mut calc = with_origin(node(
                        format!("{name}/CalcTensorSizeFromShape_{o}"),
                        "CalcTensorSizeFromShape",
                    ));
                    calc.inputs = smallvec![out_shapes[o]];
                    calc.outputs = 1;
                    calc.attrs
                        .insert("dtype".into(), KernelAttr::Str(m.dtype.name().into()));
                    calc.attrs = self.b.share(std::mem::take(&mut calc.attrs));
                    let size = self.b.add(calc);
                    a.inputs.push(ValueRef {
                        node: size,
                        output: 0,
                    });
                }
            }
            a.outputs = 1;
            let mem = ValueRef {
                node: self.b.add(a),
                output: 0,
            };
            self.b.own(mem, None);
            out_vals.push(out_shapes[o]);
            out_vals.push(mem);
            let mut t = TVal::new(m.clone());
            t.shape = Some(out_shapes[o]);
            t.mem = Some(mem);
            results.push(t);
        }
        let mut l = with_origin(node(format!("{name}/{}", op.kernel), op.kernel));
        l.inputs = [stream]
            .into_iter()
            .chain(in_vals)
            .chain(out_vals)
            .collect();
        l.attrs = kernel_attrs;
        l.control_inputs = order.into_iter().collect();
        let launch = self.b.add(l);
        for t in &mut results {
            t.order = Some(launch);
            if let Some(m) = t.mem {
                self.b.set_writer(m, launch);
            }
        }
        results
    }

    /// A copy of `t` into memory the current level owns.
    /// The forms the copy makes of `t` (an upload, say) are kept in `t`.
    pub(super) fn copy(&mut self, name: &str, t: &mut TVal) -> Option<TVal> {
        let spec = *self.reg.get("Identity")?;
        let meta = t.meta.clone();
        let mut ins = [Some(t.clone())];
        let out = self
            .emit(name, &spec, Attrs::new(), &mut ins, &[meta], None)
            .pop();
        if let [Some(done)] = ins {
            *t = done;
        }
        out
    }

    /// The (shape, memory) pairs a graph hands out, each in memory the current level owns
    /// and hands out once (copies where it does not).
    pub fn hand_out(&mut self, name: &str, outs: &mut [TVal]) -> Vec<ValueRef> {
        let mut given = Vec::new();
        let mut pairs = Vec::with_capacity(2 * outs.len());
        for (i, t) in outs.iter_mut().enumerate() {
            let mem = self.b.mem_of(t, name);
            let mine = mem.is_some_and(|m| self.b.holds(m) && !given.contains(&m));
            if !mine && let Some(c) = self.copy(&format!("{name}/copy_{i}"), t) {
                *t = c;
            }
            let (Some(s), Some(m)) = (self.b.shape_of(t), t.mem) else {
                continue;
            };
            self.b.keep(m);
            given.push(m);
            pairs.push(s);
            pairs.push(m);
        }
        pairs
    }

    /// Closes the current level with an `InnerNetOutput` of `inputs`.
    pub(super) fn inner_output(&mut self, inputs: Vec<ValueRef>, outs: &[TVal]) -> KernelGraph {
        self.output_node("InnerNetOutput", inputs, outs);
        self.b.pop_level()
    }

    /// A `NetOutput` or `InnerNetOutput` of `inputs`, ordered after the launches that
    /// write the tensors `outs` it hands out.
    pub fn output_node(&mut self, kernel: &str, inputs: Vec<ValueRef>, outs: &[TVal]) {
        let mut o = node(kernel, kernel);
        o.inputs = inputs.into();
        let after: BTreeSet<KernelNodeId> = outs.iter().filter_map(|t| t.order).collect();
        o.control_inputs = after.into_iter().collect();
        self.b.add(o);
    }
}
