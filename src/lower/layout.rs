//! Ascend storage formats lowered to the layouts the ops mean.
//!
//! A graph GE has built keeps its feature maps in NC1HWC0 and its filters in FRACTAL_Z
//! (and friends): each tensor descriptor says how memory holds the tensor (`layout`, the
//! storage shape) and what the op means by it (`origin_format`, `origin_shape`). The
//! ops' semantics, and their attributes, are the origin's: a SoftmaxV2 over axis 1 of a
//! tensor stored as NC1HWC0 is a softmax over C. So lowering computes on the origin
//! layout, and memory in a storage format exists only where somebody can see it:
//!
//! - every descriptor in a storage format with a known origin is rewritten to its origin
//!   (format and shape), and each constant stored so (a FRACTAL_Z filter) is converted
//!   once, here, to its origin layout;
//! - a `TransData` between a tensor's origin and its storage form then converts nothing
//!   and is bypassed: its readers read its input (the node stays, unread, as an
//!   `Identity` for dead-code elimination to drop);
//! - at the model's edges (its root graph's) the storage form is kept, byte for byte: a graph input
//!   (`Data`, `PlaceHolder`) declared in a storage format is converted to its origin by a
//!   `TransData` after it, and a graph output (`NetOutput`, `End`) declared in one gets a
//!   `TransData` from the origin before it;
//! - each op whose output shape does not follow from its inputs
//!   ([`DECLARED_SHAPE_OPS`]: a TransData out of a blocked format, an Aipp cropping the
//!   model input's size) is given its declared output shape, in its origin
//!   ([`DECLARED_SHAPE_ATTR`]).
//!
//! Padding (the channels of the last C1 block past C) is zero in every storage form GE
//! writes, so computing on the origin and converting at the edges gives the bytes GE's
//! kernels would, and costs one conversion per edge instead of one per op. A descriptor
//! whose origin is not recorded (`origin_shape_initialized` false) is left as stored:
//! elementwise ops compute on it as they are, and an op that needs the origin says which
//! node lacks it.

use std::borrow::Cow;

use crate::formats::{Format, StorageFormat, Transfer, c0_for};
use crate::om::graph::{
    AttrValue, ComputeGraph, ComputeModel, ComputeNode, ListAttr, NodeId, OutPort, Shape,
    TensorDesc, is_const_type, is_data_type,
};
use crate::ops::{DECLARED_SHAPE_ATTR, DECLARED_SHAPE_OPS};

use super::attrs::{TensorFormat, dtype};
use super::error::LowerError;

/// The model with every storage format lowered to its origin ([the module](self)), or
/// the model itself when it has neither a descriptor in a storage format nor an op of
/// [`DECLARED_SHAPE_OPS`].
pub fn to_origin(model: &ComputeModel) -> Result<Cow<'_, ComputeModel>, LowerError> {
    let mut any = false;
    // Descriptors come in runs of equal ones sharing one attribute map (the readers
    // share equal maps): the last plain descriptor seen answers for the next that
    // matches it, which is a pointer and a shape compared instead of the formats read
    // out of the map (50,000 descriptors in a graph of 10,000 ops).
    let mut plain: Option<&TensorDesc> = None;
    model.root.walk(&mut |g| {
        any |= g.nodes.iter().any(|n| {
            DECLARED_SHAPE_OPS.contains(&n.op_type.as_str())
                || n.input_descs.iter().chain(&n.output_descs).any(|d| {
                    if plain.is_some_and(|p| same_formats(p, d)) {
                        return false;
                    }
                    let stored = storage_origin(d).is_some();
                    if !stored {
                        plain = Some(d);
                    }
                    stored
                })
        });
    });
    if !any {
        return Ok(Cow::Borrowed(model));
    }
    let mut m = model.clone();
    let name = m.root.name.clone();
    graph(&mut m.root, &name, true)?;
    Ok(Cow::Owned(m))
}

/// A descriptor's storage format and its origin.
#[derive(Debug, Clone, PartialEq)]
struct Forms {
    storage: StorageFormat,
    origin: Format,
    origin_shape: Vec<i64>,
}

/// [`Forms`] of `d`, when memory holds it in another layout or shape than its origin's,
/// the origin is recorded, and rt2 has the transfer between the two for its type (an ND
/// tensor whose origin is NCHW is the same bytes, and is left as it is).
fn storage_origin(d: &TensorDesc) -> Option<Forms> {
    let f = TensorFormat::of(d);
    let storage = StorageFormat::from_int(f.format).ok()?;
    let origin = StorageFormat::from_int(f.origin_format).ok()?.primary;
    let origin_shape = f.origin_shape?;
    let Shape::Dims(dims) = &d.shape else {
        return None;
    };
    if storage.primary == origin && *dims == origin_shape {
        return None;
    }
    // TransData's attributes cannot say a C0 other than the type's (GE's strings leave
    // the C0 code out), so a tensor stored with another C0 stays as it is.
    let dt = dtype(d.dtype)?;
    if storage.c0().is_some_and(|c0| c0 != c0_for(dt)) {
        return None;
    }
    Transfer::new(StorageFormat::plain(origin), storage, dt).ok()?;
    Some(Forms {
        storage,
        origin,
        origin_shape,
    })
}

/// Whether `a` and `b` are the same as far as [`storage_origin`] (and
/// [`super::attrs::special_format`]) read them, without reading their formats: one shared
/// attribute map, and equal layouts, shapes and types.
pub(super) fn same_formats(a: &TensorDesc, b: &TensorDesc) -> bool {
    a.attrs.same(&b.attrs) && a.dtype == b.dtype && a.shape == b.shape && a.layout == b.layout
}

/// `d` rewritten to its origin: layout and shape, the format numbers with it.
fn to_origin_desc(d: &mut TensorDesc, f: &Forms) {
    d.layout = f.origin.name().to_string();
    d.shape = Shape::Dims(f.origin_shape.clone());
    d.attrs.insert(
        "format_for_int".into(),
        AttrValue::Int(i64::from(StorageFormat::plain(f.origin).to_int())),
    );
}

fn node_error(graph: &str, n: &ComputeNode, message: impl Into<String>) -> LowerError {
    LowerError::Node {
        graph: graph.to_string(),
        node: n.name.clone(),
        op_type: n.op_type.clone(),
        message: message.into(),
    }
}

/// Rewrites `g` and its subgraphs. Only the `root` graph's inputs and outputs keep their
/// storage forms: a subgraph's Data and NetOutput pass values of the graph that calls it,
/// which are in their origins by then.
fn graph(g: &mut ComputeGraph, path: &str, root: bool) -> Result<(), LowerError> {
    for n in &mut g.nodes {
        for (i, sub) in n.subgraphs.iter_mut().enumerate() {
            graph(sub, &format!("{path}/{}[{i}]", n.name), false)?;
        }
    }
    let count = g.nodes.len();
    // (port, its storage forms): graph inputs to convert after their node.
    let mut inputs: Vec<(OutPort, Forms)> = Vec::new();
    // (output node, input index, storage forms): graph outputs to convert before.
    let mut outputs: Vec<(NodeId, usize, Forms)> = Vec::new();
    for i in 0..count {
        let id = NodeId(i as u32);
        let n = &mut g.nodes[i];
        let is_input = root && (is_data_type(&n.op_type) || n.op_type == "PlaceHolder");
        let is_output = root && matches!(n.op_type.as_str(), "NetOutput" | "End");
        for (k, d) in n.output_descs.iter_mut().enumerate() {
            let Some(f) = storage_origin(d) else { continue };
            if is_input {
                // The caller hands the storage form; its readers see the origin.
                inputs.push((
                    OutPort {
                        node: id,
                        index: k as u32,
                    },
                    f,
                ));
            } else {
                to_origin_desc(d, &f);
            }
        }
        for (k, d) in n.input_descs.iter_mut().enumerate() {
            let Some(f) = storage_origin(d) else { continue };
            if is_output {
                outputs.push((id, k, f));
            } else {
                to_origin_desc(d, &f);
            }
        }
        if is_const_type(&n.op_type) {
            const_to_origin(n).map_err(|m| node_error(path, &g.nodes[i], m))?;
        }
    }
    for (port, f) in inputs {
        let desc = g.nodes[port.node.index()].output_descs[port.index as usize].clone();
        let name = format!("{}_to_{}", g.nodes[port.node.index()].name, f.origin.name());
        let mut origin = desc.clone();
        to_origin_desc(&mut origin, &f);
        let plain = StorageFormat::plain(f.origin);
        let t = g.add_node(trans_data(name, port, (f.storage, desc), (plain, origin)));
        redirect(g, port, OutPort { node: t, index: 0 }, Some(t));
    }
    // After the inputs' conversions: a TransData reading one then converts nothing.
    bypass_identity_transdata(g);
    // The TransData left convert for real; out of a blocked format their output shape
    // does not follow from their input (the padding hides the true C), nor does an
    // Aipp's when its crop size is 0: they are given the declared one, in its origin.
    for n in &mut g.nodes {
        if !DECLARED_SHAPE_OPS.contains(&n.op_type.as_str()) {
            continue;
        }
        if let (false, Some(Shape::Dims(dims))) = (
            n.attrs.contains_key(DECLARED_SHAPE_ATTR),
            n.output_descs.first().map(|d| &d.shape),
        ) {
            let dims = AttrValue::List(ListAttr::Int(dims.clone()));
            n.attrs.insert(DECLARED_SHAPE_ATTR.into(), dims);
        }
    }
    for (out, k, f) in outputs {
        let Some(port) = g.nodes[out.index()].inputs.get(k).copied().flatten() else {
            continue;
        };
        let storage = g.nodes[out.index()].input_descs[k].clone();
        let mut origin = storage.clone();
        to_origin_desc(&mut origin, &f);
        let name = format!(
            "{}_{k}_to_{}",
            g.nodes[out.index()].name,
            f.storage.primary.name()
        );
        let plain = StorageFormat::plain(f.origin);
        let t = g.add_node(trans_data(
            name,
            port,
            (plain, origin),
            (f.storage, storage),
        ));
        g.nodes[out.index()].inputs[k] = Some(OutPort { node: t, index: 0 });
    }
    Ok(())
}

/// A `TransData` node from `from` (format and descriptor) to `to` reading `input`, with
/// its output shape given ([`DECLARED_SHAPE_ATTR`]).
fn trans_data(
    name: String,
    input: OutPort,
    (from_format, from): (StorageFormat, TensorDesc),
    (to_format, to): (StorageFormat, TensorDesc),
) -> ComputeNode {
    let mut n = ComputeNode {
        name,
        op_type: "TransData".into(),
        inputs: vec![Some(input)],
        ..Default::default()
    };
    for (key, f) in [("src", from_format), ("dst", to_format)] {
        n.attrs
            .insert(format!("{key}_format"), AttrValue::str(f.primary.name()));
        n.attrs.insert(
            format!("{key}_subformat"),
            AttrValue::Int(i64::from(f.sub_format)),
        );
    }
    if let Shape::Dims(dims) = &to.shape {
        n.attrs.insert(
            DECLARED_SHAPE_ATTR.into(),
            AttrValue::List(ListAttr::Int(dims.clone())),
        );
    }
    n.input_descs = vec![from];
    n.output_descs = vec![to];
    n
}

/// Points every reader of `from` in `g` (nodes other than `except`, and the graph's
/// outputs) at `to`.
fn redirect(g: &mut ComputeGraph, from: OutPort, to: OutPort, except: Option<NodeId>) {
    for (i, n) in g.nodes.iter_mut().enumerate() {
        if except == Some(NodeId(i as u32)) {
            continue;
        }
        for p in n.inputs.iter_mut().flatten() {
            if *p == from {
                *p = to;
            }
        }
    }
    for p in &mut g.outputs {
        if *p == from {
            *p = to;
        }
    }
}

/// Bypasses each `TransData` whose input and output, as rewritten, are one layout and
/// shape: its readers read its input.
fn bypass_identity_transdata(g: &mut ComputeGraph) {
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        if n.op_type != "TransData" {
            continue;
        }
        let (Some(Some(src)), Some(out)) = (n.inputs.first(), n.output_descs.first()) else {
            continue;
        };
        let Some(input) = g.port_desc(*src) else {
            continue;
        };
        if input.layout == out.layout && input.shape == out.shape && input.dtype == out.dtype {
            let src = *src;
            // Nothing reads it now; as an Identity it lowers (if at all) to what it is.
            let n = &mut g.nodes[i];
            n.op_type = "Identity".into();
            n.attrs.clear();
            redirect(
                g,
                OutPort {
                    node: NodeId(i as u32),
                    index: 0,
                },
                src,
                None,
            );
        }
    }
}

/// A constant stored in a storage format, converted to its origin layout.
fn const_to_origin(n: &mut ComputeNode) -> Result<(), String> {
    let Some(AttrValue::Tensor(t)) = n.attrs.get_mut("value") else {
        return Ok(());
    };
    let Some(f) = storage_origin(&t.desc) else {
        return Ok(());
    };
    let Shape::Dims(storage_shape) = &t.desc.shape else {
        return Err("a constant in a storage format needs a known shape".into());
    };
    let dt = dtype(t.desc.dtype).ok_or_else(|| {
        format!(
            "a constant of {} cannot be converted from {}",
            t.desc.dtype.name(),
            f.storage.primary.name()
        )
    })?;
    let dims =
        |d: &[i64]| -> Option<Vec<usize>> { d.iter().map(|&v| usize::try_from(v).ok()).collect() };
    let (Some(from), Some(to)) = (dims(storage_shape), dims(&f.origin_shape)) else {
        return Err("a constant in a storage format needs a known shape".into());
    };
    let transfer = Transfer::new(f.storage, StorageFormat::plain(f.origin), dt)
        .map_err(|e| format!("value: {e}"))?;
    let bytes = to
        .iter()
        .try_fold(dt.size(), |n, &d| n.checked_mul(d))
        .ok_or("value: its origin shape overflows")?;
    let mut data = vec![0u8; bytes];
    transfer
        .run(&from, &t.data, &to, &mut data)
        .map_err(|e| format!("value: {e}"))?;
    t.data = data.into();
    to_origin_desc(&mut t.desc, &f);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::DataType;
    use crate::om::graph::AttrMap;

    /// An NC1HWC0 float16 descriptor of a [1, 3, 2, 2] NCHW tensor, as GE writes one.
    fn stored_desc() -> TensorDesc {
        let mut attrs = AttrMap::new();
        attrs.insert("format_for_int".into(), AttrValue::Int(3));
        attrs.insert("origin_format".into(), AttrValue::str("NCHW"));
        attrs.insert(
            "origin_shape".into(),
            AttrValue::List(ListAttr::Int(vec![1, 3, 2, 2])),
        );
        TensorDesc {
            dtype: DataType::Float16,
            shape: Shape::Dims(vec![1, 1, 2, 2, 16]),
            layout: "NC1HWC0".into(),
            attrs,
            ..Default::default()
        }
    }

    fn node(name: &str, op_type: &str, inputs: Vec<Option<OutPort>>) -> ComputeNode {
        ComputeNode {
            name: name.into(),
            op_type: op_type.into(),
            inputs,
            ..Default::default()
        }
    }

    /// The root's input keeps its storage form and gets a TransData after it; a
    /// subgraph's Data (a value of the calling graph, in its origin by then) and
    /// NetOutput are rewritten like any other node, with no conversion.
    #[test]
    fn only_the_root_graphs_edges_keep_storage_forms() {
        let port = |node| {
            Some(OutPort {
                node: NodeId(node),
                index: 0,
            })
        };
        let mut body = ComputeGraph::new("body");
        let mut data = node("arg", "Data", vec![]);
        data.output_descs = vec![stored_desc()];
        body.add_node(data);
        let mut relu = node("relu", "Relu", vec![port(0)]);
        relu.input_descs = vec![stored_desc()];
        relu.output_descs = vec![stored_desc()];
        body.add_node(relu);
        let mut out = node("out", "NetOutput", vec![port(1)]);
        out.input_descs = vec![stored_desc()];
        body.add_node(out);

        let mut model = ComputeModel::default();
        let mut x = node("x", "Data", vec![]);
        x.output_descs = vec![stored_desc()];
        model.root.add_node(x);
        let mut call = node("call", "PartitionedCall", vec![port(0)]);
        call.input_descs = vec![stored_desc()];
        call.output_descs = vec![stored_desc()];
        call.subgraphs = vec![body];
        model.root.add_node(call);

        let m = to_origin(&model).unwrap();
        let root = &m.root;
        assert_eq!(root.nodes[0].output_descs[0].layout, "NC1HWC0");
        assert_eq!(root.nodes.len(), 3, "x, call and x's conversion");
        assert_eq!(root.nodes[2].op_type, "TransData");
        assert_eq!(root.nodes[1].inputs[0], port(2));
        let body = &root.nodes[1].subgraphs[0];
        assert_eq!(body.nodes.len(), 3, "no conversion inside");
        for d in [
            &body.nodes[0].output_descs[0],
            &body.nodes[2].input_descs[0],
        ] {
            assert_eq!(
                (d.layout.as_str(), &d.shape),
                ("NCHW", &Shape::Dims(vec![1, 3, 2, 2]))
            );
        }
    }
}
