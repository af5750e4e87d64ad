//! Every op's output descriptor as inference says it, as ATC's OMs carry it: lowering
//! infers each node's output dtype and shape (a dim unknown until run time stays -1), and
//! [`annotate`] writes them into the descriptors a model left untyped or unshaped, so an
//! OM `rt2 compile` writes reads in Netron with every edge typed, as ATC's do.
//!
//! Only what a descriptor does not say is filled: an undefined dtype, an unknown rank, a
//! -1 dim inference knows. A descriptor in a storage format (NC1HWC0, ...) is left alone:
//! lowering infers in the origin layout.

use crate::om::graph::{AttrValue, ComputeGraph, ListAttr, Shape, TensorDesc};
use crate::om::onnx::SYMBOLIC_DIMS_ATTR;
use crate::om::{ComputeModel, DataType};
use crate::ops::{OpRegistry, TensorMeta};

use super::attrs::{TensorFormat, model_dtype};
use super::convert::{Bind, Lowering, NodeMetas};
use super::error::LowerError;
use super::layout;

/// Fills every output descriptor of `model`, and every input descriptor from its
/// producer's, from inference where it said less; how many descriptors changed. Ops
/// lowering cannot handle keep their descriptors.
pub fn annotate(model: &mut ComputeModel) -> Result<usize, LowerError> {
    let metas: Vec<NodeMetas> = {
        let reg = OpRegistry::new();
        let origin = layout::to_origin(model)?;
        let root = &origin.as_ref().root;
        let mut lw = Lowering::new(&reg);
        // Shapes alone are wanted: no weight is packed or transformed for its kernel,
        // which would copy every weight of the model for nothing.
        lw.pack_weights = false;
        lw.metas = Some(Vec::new());
        lw.graph(root, &root.name, &mut Bind::Root)?;
        lw.metas.take().unwrap_or_default()
    };
    let by_node: std::collections::HashMap<(&str, &str), &[Option<TensorMeta>]> = metas
        .iter()
        .map(|(g, n, m)| ((g.as_str(), n.as_str()), &m[..]))
        .collect();
    let mut changed = 0;
    fill_graph(&mut model.root, &by_node, &mut changed);
    Ok(changed)
}

fn fill_graph(
    g: &mut ComputeGraph,
    metas: &std::collections::HashMap<(&str, &str), &[Option<TensorMeta>]>,
    changed: &mut usize,
) {
    let graph = g.name.clone();
    // An input's descriptor is its producer's output's, as GE keeps them.
    let names: Vec<String> = g.nodes.iter().map(|n| n.name.clone()).collect();
    for n in &mut g.nodes {
        if let Some(ms) = metas.get(&(graph.as_str(), n.name.as_str())) {
            for (d, m) in n.output_descs.iter_mut().zip(ms.iter()) {
                if let Some(m) = m
                    && fill(d, m)
                {
                    *changed += 1;
                }
            }
        }
        // Descriptors one per input (not a GE graph's extra ones of unconnected inputs).
        if n.input_descs.len() == n.inputs.len() {
            for (d, p) in n.input_descs.iter_mut().zip(&n.inputs) {
                let Some(p) = p else { continue };
                let m = names
                    .get(p.node.index())
                    .and_then(|src| metas.get(&(graph.as_str(), src.as_str())))
                    .and_then(|ms| ms.get(p.index as usize))
                    .and_then(Option::as_ref);
                if let Some(m) = m
                    && fill(d, m)
                {
                    *changed += 1;
                }
            }
        }
        for sub in &mut n.subgraphs {
            fill_graph(sub, metas, changed);
        }
    }
}

/// Fills what `d` leaves unsaid from `m`; whether anything changed.
fn fill(d: &mut TensorDesc, m: &TensorMeta) -> bool {
    // NCHW, NHWC or ND, the same as its origin: memory holds what inference describes.
    let f = TensorFormat::of(d);
    if f.format != f.origin_format || !matches!(f.format, 0..=2) {
        return false;
    }
    let mut changed = false;
    if d.dtype == DataType::Undefined
        && let Some(t) = model_dtype(m.dtype)
    {
        d.dtype = t;
        changed = true;
    }
    let Some(inferred) = &m.shape else {
        return changed;
    };
    let dims = match &d.shape {
        Shape::UnknownRank => inferred.clone(),
        Shape::Dims(have) if have.len() == inferred.len() => have
            .iter()
            .zip(inferred)
            .map(|(&h, &i)| if h < 0 && i >= 0 { i } else { h })
            .collect(),
        Shape::Dims(_) => return changed,
    };
    if d.shape == Shape::Dims(dims.clone()) {
        return changed;
    }
    // The importer's symbolic names: a dim now known has none.
    let names = match d.attrs.get(SYMBOLIC_DIMS_ATTR) {
        Some(AttrValue::List(ListAttr::Str(v))) if v.len() == dims.len() => Some(
            v.iter()
                .zip(&dims)
                .map(|(name, &x)| if x >= 0 { Vec::new() } else { name.clone() })
                .collect::<Vec<_>>(),
        ),
        _ => None,
    };
    match names {
        Some(v) if v.iter().any(|s| !s.is_empty()) => {
            d.attrs
                .insert(SYMBOLIC_DIMS_ATTR.into(), AttrValue::List(ListAttr::Str(v)));
        }
        _ => {
            d.attrs.remove(SYMBOLIC_DIMS_ATTR);
        }
    }
    if d.attrs.contains_key("origin_shape") {
        d.attrs.insert(
            "origin_shape".into(),
            AttrValue::List(ListAttr::Int(dims.clone())),
        );
    }
    d.shape = Shape::Dims(dims);
    true
}
