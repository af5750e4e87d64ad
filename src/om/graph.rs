//! The in-memory ComputeGraph: what every reader produces and lowering consumes.
//!
//! A [`ComputeModel`] owns a root [`ComputeGraph`]; every subgraph is owned by the node
//! that calls it (If branches, While cond/body, PartitionedCall bodies), in the order of
//! that node's `subgraph_name` list. Nodes live in one `Vec` per graph and refer to each
//! other by [`NodeId`]; data edges are ordered per input index, control edges are kept
//! apart. Attributes are typed ([`AttrValue`]); tensor descriptors carry dtype, layout and
//! a [`Shape`] that distinguishes unknown dims (-1) from unknown rank (-2).
//!
//! What GE stores that rt2 does not model (op metadata such as workspace sizes, tensor
//! sizes and offsets, attribute groups) is kept verbatim in `rest` fields, so converting
//! back to GE IR loses nothing. This file holds data only: conversion lives in `ir`, checks
//! in `verify`.

use std::fmt;

use crate::om::DataType;
use crate::proto::ge_ir;

/// Index of a node in its graph's `nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// One output of one node: the source end of a data edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OutPort {
    pub node: NodeId,
    pub index: u32,
}

/// Dimension value for an unknown dim.
pub const UNKNOWN_DIM: i64 = -1;
/// The single dimension value that marks an unknown rank.
pub const UNKNOWN_RANK: i64 = -2;

/// A tensor shape as GE records it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Shape {
    /// Known rank; a dim of -1 is unknown. An empty list is a scalar.
    Dims(Vec<i64>),
    /// Unknown rank (`[-2]` in GE IR).
    #[default]
    UnknownRank,
}

impl Shape {
    pub fn scalar() -> Self {
        Shape::Dims(Vec::new())
    }
    /// From GE IR dims: a single -2 is unknown rank.
    pub fn from_dims(dims: &[i64]) -> Self {
        if dims == [UNKNOWN_RANK] {
            Shape::UnknownRank
        } else {
            Shape::Dims(dims.to_vec())
        }
    }
    /// To GE IR dims.
    pub fn to_dims(&self) -> Vec<i64> {
        match self {
            Shape::Dims(d) => d.clone(),
            Shape::UnknownRank => vec![UNKNOWN_RANK],
        }
    }
    pub fn dims(&self) -> Option<&[i64]> {
        match self {
            Shape::Dims(d) => Some(d),
            Shape::UnknownRank => None,
        }
    }
    /// True when the rank and every dim are known.
    pub fn is_static(&self) -> bool {
        matches!(self, Shape::Dims(d) if d.iter().all(|&x| x >= 0))
    }
    /// Element count when static.
    pub fn element_count(&self) -> Option<u64> {
        let dims = self.dims()?;
        dims.iter().try_fold(1u64, |acc, &d| {
            u64::try_from(d).ok().and_then(|d| acc.checked_mul(d))
        })
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::UnknownRank => f.write_str("[-2]"),
            Shape::Dims(d) => {
                f.write_str("[")?;
                for (i, x) in d.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// A tensor descriptor: one input or output of a node, or the descriptor of a tensor value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TensorDesc {
    pub name: String,
    /// `Undefined` also stands for a dtype number rt2 does not know; the number itself is
    /// kept in `rest.dtype`.
    pub dtype: DataType,
    pub shape: Shape,
    /// Whether the GE descriptor has a `shape` field at all (a scalar's may have an empty
    /// one or none).
    pub has_shape: bool,
    /// GE's format string (`ND`, `NCHW`, `NC1HWC0`, ...).
    pub layout: String,
    /// GE's `device_type` (`NPU` on nearly every descriptor), held inline.
    pub device_type: compact_str::CompactString,
    pub attrs: AttrMap,
    /// Every other field of the GE descriptor, verbatim (name, dtype, shape, layout,
    /// device_type and attr cleared, except an unknown dtype number), when any is set.
    /// An imported model's descriptors set none, and a graph of 10,000 nodes holds some
    /// 50,000 descriptors: boxed and optional, an unset rest costs 8 bytes, not 300.
    pub rest: Option<Box<ge_ir::TensorDescriptor>>,
}

/// GE's `FORMAT_RESERVED` in `C_Format` numbering (metadef `c_types.h`).
pub const FORMAT_RESERVED: i64 = 40;

impl TensorDesc {
    pub fn new(dtype: DataType, shape: Shape) -> Self {
        TensorDesc {
            dtype,
            shape,
            layout: "ND".into(),
            ..Default::default()
        }
    }
    /// Whether this is the descriptor GE keeps for an optional input left unconnected:
    /// format `FORMAT_RESERVED`, by layout name or by `format_for_int`. GE serializes
    /// every IR input's descriptor, connected or not, and skips these "invalid"
    /// descriptors when it numbers a node's data inputs, so they are not inputs.
    pub fn is_reserved(&self) -> bool {
        matches!(self.layout.as_str(), "FORMAT_RESERVED" | "RESERVED")
            || matches!(
                self.attrs.get("format_for_int"),
                Some(AttrValue::Int(f)) if f & 0xff == FORMAT_RESERVED
            )
    }
}

/// A constant tensor (an attribute of type `t`, e.g. a Const node's `value`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tensor {
    pub desc: TensorDesc,
    /// Raw little-endian bytes, shared with what is made of them (the ExecuteGraph's
    /// constants) rather than copied.
    pub data: bytes::Bytes,
}

/// Attributes by name, in name order (GE stores them in a map).
pub type AttrMap = crate::om::sorted_map::SortedMap<AttrValue>;

/// A typed attribute value: one arm per `AttrDef` value kind.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// `s`: GE strings are bytes; most are UTF-8.
    Str(Vec<u8>),
    Int(i64),
    Float(f32),
    Bool(bool),
    Bytes(Vec<u8>),
    List(ListAttr),
    /// A list that does not follow the `val_type` convention (no type but values, or
    /// several fields set), kept verbatim.
    RawList(Box<ge_ir::attr_def::ListValue>),
    Func(Box<ge_ir::NamedAttrs>),
    TensorDesc(Box<TensorDesc>),
    Tensor(Box<Tensor>),
    Graph(Box<ge_ir::GraphDef>),
    ListListInt(Vec<Vec<i64>>),
    ListListFloat(Vec<Vec<f32>>),
    /// `dt`: stored in GE's C++ numbering; converted here.
    DataType(DataType),
    /// A `dt` whose C++ number rt2 does not know.
    RawDataType(i64),
    Expression(Vec<u8>),
    /// An `AttrDef` with no value set.
    Empty,
}

/// A list attribute, typed by its `val_type`.
#[derive(Debug, Clone, PartialEq)]
pub enum ListAttr {
    /// `VT_LIST_NONE` with nothing in it.
    None,
    Str(Vec<Vec<u8>>),
    Int(Vec<i64>),
    Float(Vec<f32>),
    Bool(Vec<bool>),
    Bytes(Vec<Vec<u8>>),
    TensorDesc(Vec<TensorDesc>),
    Tensor(Vec<Tensor>),
    Graph(Vec<ge_ir::GraphDef>),
    NamedAttrs(Vec<ge_ir::NamedAttrs>),
    /// C++ numbering, converted where known.
    DataType(Vec<i64>),
}

impl AttrValue {
    /// A UTF-8 string value.
    pub fn str(s: impl Into<String>) -> Self {
        AttrValue::Str(s.into().into_bytes())
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            AttrValue::Int(i) => Some(*i),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttrValue::Str(s) => std::str::from_utf8(s).ok(),
            _ => None,
        }
    }
    pub fn as_ints(&self) -> Option<&[i64]> {
        match self {
            AttrValue::List(ListAttr::Int(v)) => Some(v),
            _ => None,
        }
    }
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            AttrValue::Tensor(t) => Some(t),
            _ => None,
        }
    }
    /// A short name of the value kind, for messages and views.
    pub fn kind(&self) -> &'static str {
        match self {
            AttrValue::Str(_) => "s",
            AttrValue::Int(_) => "i",
            AttrValue::Float(_) => "f",
            AttrValue::Bool(_) => "b",
            AttrValue::Bytes(_) => "bt",
            AttrValue::List(_) | AttrValue::RawList(_) => "list",
            AttrValue::Func(_) => "func",
            AttrValue::TensorDesc(_) => "td",
            AttrValue::Tensor(_) => "t",
            AttrValue::Graph(_) => "g",
            AttrValue::ListListInt(_) => "list_list_int",
            AttrValue::ListListFloat(_) => "list_list_float",
            AttrValue::DataType(_) | AttrValue::RawDataType(_) => "dt",
            AttrValue::Expression(_) => "expression",
            AttrValue::Empty => "none",
        }
    }
}

/// One operator of a ComputeGraph.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ComputeNode {
    pub name: String,
    pub op_type: String,
    /// Data inputs by input index; `None` is an unconnected input (an empty entry in GE IR).
    pub inputs: Vec<Option<OutPort>>,
    /// Control predecessors, in file order.
    pub control_inputs: Vec<NodeId>,
    pub input_descs: Vec<TensorDesc>,
    pub output_descs: Vec<TensorDesc>,
    pub attrs: AttrMap,
    /// Subgraphs this node calls, in IR order (If: then, else; While: cond, body).
    pub subgraphs: Vec<ComputeGraph>,
    /// GE's `OpDef.id`.
    pub id: i64,
    /// Every other OpDef field, verbatim (stream_id, workspace, ... and attr_groups), when
    /// any is set: boxed and optional, as for [`TensorDesc::rest`], since most ops of an
    /// imported model set none and an empty `OpDef` is some 500 bytes.
    pub rest: Option<Box<ge_ir::OpDef>>,
}

impl ComputeNode {
    pub fn new(name: impl Into<String>, op_type: impl Into<String>) -> Self {
        ComputeNode {
            name: name.into(),
            op_type: op_type.into(),
            ..Default::default()
        }
    }
    pub fn attr(&self, key: &str) -> Option<&AttrValue> {
        self.attrs.get(key)
    }
    pub fn attr_int(&self, key: &str) -> Option<i64> {
        self.attrs.get(key).and_then(AttrValue::as_int)
    }
    /// Number of outputs: the output descriptors, or one past the highest output index a
    /// consumer uses when descriptors were stripped from a dump.
    pub fn output_count(&self) -> usize {
        self.output_descs.len()
    }
    /// The input descriptors that stand for data inputs, in input order: every
    /// descriptor but those of optional inputs left unconnected ([`TensorDesc::is_reserved`]).
    /// When the node lists as many inputs as descriptors, that is all of them.
    pub fn data_input_descs(&self) -> Vec<&TensorDesc> {
        if self.input_descs.len() == self.inputs.len() {
            return self.input_descs.iter().collect();
        }
        self.input_descs
            .iter()
            .filter(|d| !d.is_reserved())
            .collect()
    }
}

/// A graph of compute nodes: the root graph of a model or a subgraph owned by a node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ComputeGraph {
    pub name: String,
    pub nodes: Vec<ComputeNode>,
    /// Graph inputs (GE IR `GraphDef.input`, usually each Data node's output 0).
    pub inputs: Vec<OutPort>,
    /// Graph outputs (GE IR `GraphDef.output`).
    pub outputs: Vec<OutPort>,
    pub attrs: AttrMap,
    pub attr_groups: Option<ge_ir::AttrGroups>,
    /// A name only: the calling node names a subgraph its `ModelDef` does not hold. GE
    /// reads such a name without looking for it when the `ModelDef` holds one graph, and a
    /// dynamic OM's loader then finds the graph among the file's other models by name
    /// (see `om::root_model`). An external graph has no nodes, inputs or outputs, and is
    /// written back as the name alone.
    pub external: bool,
}

impl ComputeGraph {
    pub fn new(name: impl Into<String>) -> Self {
        ComputeGraph {
            name: name.into(),
            ..Default::default()
        }
    }
    /// True when a descriptor of one of this graph's own nodes (not its subgraphs') has an
    /// unknown dim or rank.
    pub fn has_dynamic_desc(&self) -> bool {
        self.nodes
            .iter()
            .flat_map(|n| n.input_descs.iter().chain(&n.output_descs))
            .any(|d| !d.shape.is_static())
    }
    /// A reference to a subgraph named `name` that this model does not hold (see
    /// [`ComputeGraph::external`]).
    pub fn external(name: impl Into<String>) -> Self {
        ComputeGraph {
            name: name.into(),
            external: true,
            ..Default::default()
        }
    }
    pub fn node(&self, id: NodeId) -> &ComputeNode {
        &self.nodes[id.index()]
    }
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.nodes.len() as u32).map(NodeId)
    }
    /// Appends a node and returns its id.
    pub fn add_node(&mut self, node: ComputeNode) -> NodeId {
        self.nodes.push(node);
        NodeId(self.nodes.len() as u32 - 1)
    }
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| NodeId(i as u32))
    }
    /// The descriptor of an output port, when the producer has one.
    pub fn port_desc(&self, port: OutPort) -> Option<&TensorDesc> {
        self.nodes
            .get(port.node.index())?
            .output_descs
            .get(port.index as usize)
    }
    /// Data nodes of this graph (`Data`, `RefData`, `AippData`), in node order.
    pub fn data_nodes(&self) -> impl Iterator<Item = (NodeId, &ComputeNode)> {
        self.node_ids()
            .map(|id| (id, self.node(id)))
            .filter(|(_, n)| is_data_type(&n.op_type))
    }
    /// The graph's input nodes in model input order: the Data nodes by their `index`
    /// attribute, then the PlaceHolders of a partitioned subgraph by `peerIndex` (ties
    /// and missing attributes in node order).
    pub fn input_nodes(&self) -> Vec<NodeId> {
        let mut data: Vec<(i64, NodeId)> = self
            .data_nodes()
            .map(|(id, n)| (n.attr_int("index").unwrap_or(i64::MAX), id))
            .collect();
        data.sort();
        let mut ids: Vec<NodeId> = data.into_iter().map(|(_, id)| id).collect();
        ids.extend(self.by_peer_index(PLACEHOLDER));
        ids
    }
    /// The End nodes of a partitioned subgraph, the outputs it hands to other partitions,
    /// by `peerIndex` (ties and missing attributes in node order).
    pub fn end_nodes(&self) -> Vec<NodeId> {
        self.by_peer_index(END)
    }
    fn by_peer_index(&self, op_type: &str) -> Vec<NodeId> {
        let mut v: Vec<(i64, NodeId)> = self
            .node_ids()
            .filter(|&id| self.node(id).op_type == op_type)
            .map(|id| (self.node(id).attr_int(PEER_INDEX).unwrap_or(i64::MAX), id))
            .collect();
        v.sort();
        v.into_iter().map(|(_, id)| id).collect()
    }
    /// The graph's NetOutput node, if it has one.
    pub fn net_output(&self) -> Option<NodeId> {
        self.nodes
            .iter()
            .position(|n| n.op_type == "NetOutput")
            .map(|i| NodeId(i as u32))
    }
    /// Visits this graph and every subgraph below it, depth first, parents first.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a ComputeGraph)) {
        f(self);
        for node in &self.nodes {
            for sub in &node.subgraphs {
                sub.walk(f);
            }
        }
    }
    /// Total node count including every subgraph.
    pub fn total_nodes(&self) -> usize {
        let mut n = 0;
        self.walk(&mut |g| n += g.nodes.len());
        n
    }
}

/// The op type of a partitioned subgraph's input: GE's engine partitioner cuts each
/// edge between two engines' subgraphs into an `End` in the producer's subgraph and a
/// `PlaceHolder` in the consumer's (hicann/ge `compiler/graph/partition/
/// engine_partitioner.cc`). The PlaceHolder's output descriptor is the consumer's input
/// descriptor; its attributes name the producer (`_parentNodeName`, `parentOpType`,
/// `parentId` = "graph:node id", `anchorIndex` = the producer's output index) and the End
/// (`_peerNodeName`).
pub const PLACEHOLDER: &str = "PlaceHolder";
/// The op type of a partitioned subgraph's output (see [`PLACEHOLDER`]); its input
/// descriptor is the producer's output descriptor, `parentOpType` the consumer's type.
pub const END: &str = "End";
/// The number GE gives a cut edge, the same on its `End` and its `PlaceHolder`: a
/// counter of the partitioning, so a subgraph's PlaceHolders (and Ends) in `peerIndex`
/// order are in the order GE cut them.
pub const PEER_INDEX: &str = "peerIndex";

/// Op types GE uses for graph inputs.
pub fn is_data_type(op_type: &str) -> bool {
    matches!(op_type, "Data" | "RefData" | "AippData")
}

/// Op types GE uses for constants.
pub fn is_const_type(op_type: &str) -> bool {
    matches!(op_type, "Const" | "Constant")
}

/// A model: one GE IR `ModelDef`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ComputeModel {
    pub name: String,
    pub version: u32,
    /// Platform version string (`ModelDef.custom_version`).
    pub custom_version: String,
    pub attrs: AttrMap,
    pub attr_groups: Option<ge_ir::AttrGroups>,
    pub root: ComputeGraph,
    /// Graphs in the file that no node calls; carried through, reported by the verifier.
    pub detached: Vec<ComputeGraph>,
}

impl ComputeModel {
    /// True when any tensor of any graph has an unknown dim or rank.
    pub fn is_dynamic(&self) -> bool {
        let mut dynamic = false;
        self.root.walk(&mut |g| dynamic |= g.has_dynamic_desc());
        dynamic
    }
}
