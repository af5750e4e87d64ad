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
//! `to_model_def(from_model_def(m))` keeps every field rt2 models and every field it does
//! not (carried in `rest`).

use std::collections::HashMap;

use crate::om::graph::{
    AttrMap, AttrValue, ComputeGraph, ComputeModel, ComputeNode, ListAttr, NodeId, OutPort, Shape,
    Tensor, TensorDesc,
};
use crate::om::{DataType, OmError, Place, Result};
use crate::proto::ge_ir::{self, attr_def, attr_def::list_value::ListValueType};

/// Subgraphs nest at most this deep; deeper nesting in a file is an error, not a stack
/// overflow.
const MAX_SUBGRAPH_DEPTH: usize = 256;

/// Builds the typed model from GE IR.
pub fn from_model_def(md: &ge_ir::ModelDef) -> Result<ComputeModel> {
    let Some(root_def) = md.graph.first() else {
        return Err(OmError::graph(
            Place::new("model"),
            "the model has no graph",
        ));
    };
    let mut pool: HashMap<&str, &ge_ir::GraphDef> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    for g in &md.graph[1..] {
        if g.name == root_def.name || pool.insert(g.name.as_str(), g).is_some() {
            return Err(OmError::graph(
                Place::graph(&g.name),
                "two graphs in the model have this name",
            ));
        }
        order.push(g.name.as_str());
    }
    let root = convert_graph(root_def, &mut pool, 0)?;
    let mut detached = Vec::new();
    for name in order {
        if let Some(g) = pool.remove(name) {
            detached.push(convert_graph(g, &mut pool, 0)?);
        }
    }
    Ok(ComputeModel {
        name: md.name.clone(),
        version: md.version,
        custom_version: md.custom_version.clone(),
        attrs: convert_attrs(&md.attr),
        attr_groups: md.attr_groups.clone(),
        root,
        detached,
    })
}

/// Serializes the typed model to GE IR: the root graph first, then every subgraph depth
/// first in call order, then detached graphs.
pub fn to_model_def(model: &ComputeModel) -> ge_ir::ModelDef {
    let mut graphs = Vec::new();
    push_graph(&model.root, &mut graphs);
    for g in &model.detached {
        push_graph(g, &mut graphs);
    }
    ge_ir::ModelDef {
        name: model.name.clone(),
        version: model.version,
        custom_version: model.custom_version.clone(),
        graph: graphs,
        attr: attrs_to_proto(&model.attrs),
        attr_groups: model.attr_groups.clone(),
    }
}

/// Splits `"name:idx"` at the last colon. `None` when there is no colon or the index is
/// not an integer.
pub fn split_port(s: &str) -> Option<(&str, i64)> {
    let (name, idx) = s.rsplit_once(':')?;
    Some((name, idx.trim().parse().ok()?))
}

fn convert_graph<'a>(
    def: &'a ge_ir::GraphDef,
    pool: &mut HashMap<&'a str, &'a ge_ir::GraphDef>,
    depth: usize,
) -> Result<ComputeGraph> {
    if depth > MAX_SUBGRAPH_DEPTH {
        return Err(OmError::graph(
            Place::graph(&def.name),
            format!("subgraphs nest deeper than {MAX_SUBGRAPH_DEPTH} levels"),
        ));
    }
    let mut ids: HashMap<&str, NodeId> = HashMap::with_capacity(def.op.len());
    for (i, op) in def.op.iter().enumerate() {
        if ids.insert(op.name.as_str(), NodeId(i as u32)).is_some() {
            return Err(OmError::graph(
                Place::node(&def.name, &op.name),
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

    let mut nodes = Vec::with_capacity(def.op.len());
    for op in &def.op {
        let place = || Place::node(&def.name, &op.name);
        let mut inputs = Vec::new();
        let mut control_inputs = Vec::new();
        for entry in &op.input {
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
        let mut subgraphs = Vec::with_capacity(op.subgraph_name.len());
        for name in &op.subgraph_name {
            let sub = pool.remove(name.as_str()).ok_or_else(|| {
                OmError::graph(
                    place(),
                    format!("subgraph {name:?} is not in the model (or is called twice)"),
                )
            })?;
            subgraphs.push(convert_graph(sub, pool, depth + 1)?);
        }
        let mut rest = op.clone();
        rest.name.clear();
        rest.r#type.clear();
        rest.input.clear();
        rest.attr.clear();
        rest.input_desc.clear();
        rest.output_desc.clear();
        rest.subgraph_name.clear();
        nodes.push(ComputeNode {
            name: op.name.clone(),
            op_type: op.r#type.clone(),
            inputs,
            control_inputs,
            input_descs: op.input_desc.iter().map(convert_desc).collect(),
            output_descs: op.output_desc.iter().map(convert_desc).collect(),
            attrs: convert_attrs(&op.attr),
            subgraphs,
            rest,
        });
    }
    let port = |s: &String, what: &str| -> Result<OutPort> {
        let place = || Place::graph(&def.name);
        let (node, idx) = resolve(s, &place, what)?;
        u32::try_from(idx)
            .map(|index| OutPort { node, index })
            .map_err(|_| {
                OmError::graph(place(), format!("{what} {s:?} has an invalid output index"))
            })
    };
    Ok(ComputeGraph {
        name: def.name.clone(),
        inputs: def
            .input
            .iter()
            .map(|s| port(s, "graph input"))
            .collect::<Result<_>>()?,
        outputs: def
            .output
            .iter()
            .map(|s| port(s, "graph output"))
            .collect::<Result<_>>()?,
        nodes,
        attrs: convert_attrs(&def.attr),
        attr_groups: def.attr_groups.clone(),
    })
}

fn push_graph(g: &ComputeGraph, out: &mut Vec<ge_ir::GraphDef>) {
    let port = |p: &OutPort| format!("{}:{}", g.nodes[p.node.index()].name, p.index);
    let ops = g
        .nodes
        .iter()
        .map(|n| {
            let mut op = n.rest.clone();
            op.name = n.name.clone();
            op.r#type = n.op_type.clone();
            op.input = n
                .inputs
                .iter()
                .map(|i| i.as_ref().map(port).unwrap_or_default())
                .chain(
                    n.control_inputs
                        .iter()
                        .map(|c| format!("{}:-1", g.nodes[c.index()].name)),
                )
                .collect();
            op.attr = attrs_to_proto(&n.attrs);
            op.input_desc = n.input_descs.iter().map(desc_to_proto).collect();
            op.output_desc = n.output_descs.iter().map(desc_to_proto).collect();
            op.subgraph_name = n.subgraphs.iter().map(|s| s.name.clone()).collect();
            op
        })
        .collect();
    out.push(ge_ir::GraphDef {
        name: g.name.clone(),
        input: g.inputs.iter().map(port).collect(),
        output: g.outputs.iter().map(port).collect(),
        op: ops,
        attr: attrs_to_proto(&g.attrs),
        attr_groups: g.attr_groups.clone(),
    });
    for n in &g.nodes {
        for sub in &n.subgraphs {
            push_graph(sub, out);
        }
    }
}

/// Typed view of a GE tensor descriptor.
pub fn convert_desc(d: &ge_ir::TensorDescriptor) -> TensorDesc {
    let dtype = DataType::from_proto(d.dtype).unwrap_or(DataType::Undefined);
    let mut rest = d.clone();
    rest.name.clear();
    rest.shape = None;
    rest.layout.clear();
    rest.attr.clear();
    // An unknown dtype number is kept so that writing back reproduces it.
    if dtype != DataType::Undefined || d.dtype == 0 {
        rest.dtype = 0;
    }
    TensorDesc {
        name: d.name.clone(),
        dtype,
        shape: Shape::from_dims(d.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or(&[])),
        layout: d.layout.clone(),
        attrs: convert_attrs(&d.attr),
        rest,
    }
}

/// GE tensor descriptor of a typed one.
pub fn desc_to_proto(d: &TensorDesc) -> ge_ir::TensorDescriptor {
    let mut out = d.rest.clone();
    out.name = d.name.clone();
    if d.dtype != DataType::Undefined {
        out.dtype = d.dtype.to_proto();
    }
    let dims = d.shape.to_dims();
    out.shape = Some(ge_ir::ShapeDef { dim: dims });
    out.layout = d.layout.clone();
    out.attr = attrs_to_proto(&d.attrs);
    out
}

fn convert_tensor(t: &ge_ir::TensorDef) -> Tensor {
    Tensor {
        desc: t.desc.as_ref().map(convert_desc).unwrap_or_default(),
        data: t.data.clone(),
    }
}

fn tensor_to_proto(t: &Tensor) -> ge_ir::TensorDef {
    ge_ir::TensorDef {
        desc: Some(desc_to_proto(&t.desc)),
        data: t.data.clone(),
    }
}

/// Typed view of a GE attribute map.
pub fn convert_attrs(attrs: &std::collections::BTreeMap<String, ge_ir::AttrDef>) -> AttrMap {
    attrs
        .iter()
        .map(|(k, v)| (k.clone(), convert_attr(v)))
        .collect()
}

/// Typed view of one GE attribute.
pub fn convert_attr(a: &ge_ir::AttrDef) -> AttrValue {
    use attr_def::Value as V;
    match &a.value {
        None => AttrValue::Empty,
        Some(V::S(s)) => AttrValue::Str(s.clone()),
        Some(V::I(i)) => AttrValue::Int(*i),
        Some(V::F(f)) => AttrValue::Float(*f),
        Some(V::B(b)) => AttrValue::Bool(*b),
        Some(V::Bt(b)) => AttrValue::Bytes(b.clone()),
        Some(V::List(l)) => AttrValue::List(convert_list(l)),
        Some(V::Func(f)) => AttrValue::Func(f.clone()),
        Some(V::Td(td)) => AttrValue::TensorDesc(Box::new(convert_desc(td))),
        Some(V::T(t)) => AttrValue::Tensor(Box::new(convert_tensor(t))),
        Some(V::G(g)) => AttrValue::Graph(Box::new(g.clone())),
        Some(V::ListListInt(l)) => {
            AttrValue::ListListInt(l.list_list_i.iter().map(|x| x.list_i.clone()).collect())
        }
        Some(V::ListListFloat(l)) => {
            AttrValue::ListListFloat(l.list_list_f.iter().map(|x| x.list_f.clone()).collect())
        }
        Some(V::Dt(d)) => match DataType::from_ge(*d) {
            Some(dt) => AttrValue::DataType(dt),
            None => AttrValue::RawDataType(*d),
        },
        Some(V::Expression(e)) => AttrValue::Expression(e.clone()),
    }
}

fn convert_list(l: &attr_def::ListValue) -> ListAttr {
    // val_type says which repeated field holds the list; files written before val_type
    // existed leave it unset, so fall back to the first non-empty field.
    let vt = ListValueType::try_from(l.val_type).unwrap_or(ListValueType::VtListNone);
    let vt = if vt == ListValueType::VtListNone {
        if !l.s.is_empty() {
            ListValueType::VtListString
        } else if !l.i.is_empty() {
            ListValueType::VtListInt
        } else if !l.f.is_empty() {
            ListValueType::VtListFloat
        } else if !l.b.is_empty() {
            ListValueType::VtListBool
        } else if !l.bt.is_empty() {
            ListValueType::VtListBytes
        } else if !l.td.is_empty() {
            ListValueType::VtListTensorDesc
        } else if !l.t.is_empty() {
            ListValueType::VtListTensor
        } else if !l.g.is_empty() {
            ListValueType::VtListGraph
        } else if !l.na.is_empty() {
            ListValueType::VtListNamedAttrs
        } else if !l.dt.is_empty() {
            ListValueType::VtListDataType
        } else {
            ListValueType::VtListNone
        }
    } else {
        vt
    };
    match vt {
        ListValueType::VtListNone => ListAttr::None,
        ListValueType::VtListString => ListAttr::Str(l.s.clone()),
        ListValueType::VtListInt => ListAttr::Int(l.i.clone()),
        ListValueType::VtListFloat => ListAttr::Float(l.f.clone()),
        ListValueType::VtListBool => ListAttr::Bool(l.b.clone()),
        ListValueType::VtListBytes => ListAttr::Bytes(l.bt.clone()),
        ListValueType::VtListTensorDesc => {
            ListAttr::TensorDesc(l.td.iter().map(convert_desc).collect())
        }
        ListValueType::VtListTensor => ListAttr::Tensor(l.t.iter().map(convert_tensor).collect()),
        ListValueType::VtListGraph => ListAttr::Graph(l.g.clone()),
        ListValueType::VtListNamedAttrs => ListAttr::NamedAttrs(l.na.clone()),
        ListValueType::VtListDataType => ListAttr::DataType(l.dt.clone()),
    }
}

/// GE attribute map of a typed one.
pub fn attrs_to_proto(attrs: &AttrMap) -> std::collections::BTreeMap<String, ge_ir::AttrDef> {
    attrs
        .iter()
        .map(|(k, v)| (k.clone(), attr_to_proto(v)))
        .collect()
}

/// GE attribute of a typed one.
pub fn attr_to_proto(v: &AttrValue) -> ge_ir::AttrDef {
    use attr_def::Value as V;
    let value = match v {
        AttrValue::Empty => None,
        AttrValue::Str(s) => Some(V::S(s.clone())),
        AttrValue::Int(i) => Some(V::I(*i)),
        AttrValue::Float(f) => Some(V::F(*f)),
        AttrValue::Bool(b) => Some(V::B(*b)),
        AttrValue::Bytes(b) => Some(V::Bt(b.clone())),
        AttrValue::List(l) => Some(V::List(list_to_proto(l))),
        AttrValue::Func(f) => Some(V::Func(f.clone())),
        AttrValue::TensorDesc(td) => Some(V::Td(desc_to_proto(td))),
        AttrValue::Tensor(t) => Some(V::T(tensor_to_proto(t))),
        AttrValue::Graph(g) => Some(V::G((**g).clone())),
        AttrValue::ListListInt(l) => Some(V::ListListInt(attr_def::ListListInt {
            list_list_i: l
                .iter()
                .map(|x| attr_def::list_list_int::ListInt { list_i: x.clone() })
                .collect(),
        })),
        AttrValue::ListListFloat(l) => Some(V::ListListFloat(attr_def::ListListFloat {
            list_list_f: l
                .iter()
                .map(|x| attr_def::list_list_float::ListFloat { list_f: x.clone() })
                .collect(),
        })),
        AttrValue::DataType(d) => Some(V::Dt(d.to_ge())),
        AttrValue::RawDataType(d) => Some(V::Dt(*d)),
        AttrValue::Expression(e) => Some(V::Expression(e.clone())),
    };
    ge_ir::AttrDef { value }
}

fn list_to_proto(l: &ListAttr) -> attr_def::ListValue {
    let mut out = attr_def::ListValue::default();
    let vt = match l {
        ListAttr::None => ListValueType::VtListNone,
        ListAttr::Str(v) => {
            out.s = v.clone();
            ListValueType::VtListString
        }
        ListAttr::Int(v) => {
            out.i = v.clone();
            ListValueType::VtListInt
        }
        ListAttr::Float(v) => {
            out.f = v.clone();
            ListValueType::VtListFloat
        }
        ListAttr::Bool(v) => {
            out.b = v.clone();
            ListValueType::VtListBool
        }
        ListAttr::Bytes(v) => {
            out.bt = v.clone();
            ListValueType::VtListBytes
        }
        ListAttr::TensorDesc(v) => {
            out.td = v.iter().map(desc_to_proto).collect();
            ListValueType::VtListTensorDesc
        }
        ListAttr::Tensor(v) => {
            out.t = v.iter().map(tensor_to_proto).collect();
            ListValueType::VtListTensor
        }
        ListAttr::Graph(v) => {
            out.g = v.clone();
            ListValueType::VtListGraph
        }
        ListAttr::NamedAttrs(v) => {
            out.na = v.clone();
            ListValueType::VtListNamedAttrs
        }
        ListAttr::DataType(v) => {
            out.dt = v.clone();
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
        let m = from_model_def(&model()).unwrap();
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
    fn round_trip_is_identity_on_normalized_input() {
        let md = model();
        let back = to_model_def(&from_model_def(&md).unwrap());
        let again = to_model_def(&from_model_def(&back).unwrap());
        assert_eq!(back, again);
        assert_eq!(back.graph.len(), 3);
        assert_eq!(back.graph[0].op[2].input, ["c:0", "x:0", "", "x:-1"]);
        assert_eq!(back.graph[0].op[2].subgraph_name, ["then", "else"]);
    }

    #[test]
    fn faults_name_graph_and_node() {
        let mut md = model();
        md.graph[0].op[3].input[0] = "nope:0".into();
        let e = from_model_def(&md).unwrap_err().to_string();
        assert!(e.contains("graph \"root\": node \"out\""), "{e}");
        assert!(e.contains("\"nope:0\" names no node"), "{e}");

        let mut md = model();
        md.graph.pop();
        let e = from_model_def(&md).unwrap_err().to_string();
        assert!(e.contains("subgraph \"else\" is not in the model"), "{e}");

        let mut md = model();
        md.graph[0].op[3].input[0] = "if".into();
        let e = from_model_def(&md).unwrap_err().to_string();
        assert!(e.contains("not of the form"), "{e}");
    }

    #[test]
    fn unknown_dtype_numbers_survive() {
        let mut md = model();
        md.graph[0].op[0].output_desc[0].dtype = 99;
        let m = from_model_def(&md).unwrap();
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
        let m = from_model_def(&md).unwrap();
        assert_eq!(m.detached.len(), 1);
        assert_eq!(to_model_def(&m).graph.last().unwrap().name, "orphan");
    }
}
