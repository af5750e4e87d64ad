//! Inference batch normalization folded into the convolution before it.
//!
//! Exported CNNs (ResNet, MobileNet, DenseNet, ShuffleNet, ...) follow nearly every
//! convolution with an inference BatchNormalization, `y = (c - mean) * s + offset` per
//! output channel with `s = scale / sqrt(var + eps)`. With constant statistics that is an
//! affine map per channel, which folds into the convolution's filter and bias:
//!
//! ```text
//! W'[o] = W[o] * s[o]        b'[o] = (b[o] - mean[o]) * s[o] + offset[o]
//! ```
//!
//! computed in f64 from the stored values and rounded once to float32. The normalization's
//! pass over the feature map disappears, and the activation after it now follows the
//! convolution directly, so it fuses into the convolution too (the parent module). ONNX
//! Runtime folds the same pair at session creation; like its fold, this one changes the
//! result by float32 rounding (the product is rounded once into the weights instead of
//! once per output), where the other fusions keep the bits.
//!
//! Folded: a float32 `Conv` (ONNX's, output channels first in its filter) or `Conv2D`
//! with `data_format` NCHW (its filter NCHW), whose filter and optional bias are constants
//! and whose output only the normalization reads; then ONNX's `BatchNormalization`
//! (`training_mode` 0) or GE's `BatchNorm` (`is_training` false, NCHW, what the importer
//! makes of ONNX's), with constant scale, offset, mean and variance of one value per
//! channel, of which only `y` is read. The convolution keeps its place in the graph under
//! the normalization's name and output descriptor; its new filter and bias are new
//! constants, and the old ones are removed when nothing else reads them.

use std::collections::HashSet;

use crate::om::DataType;
use crate::om::graph::{
    AttrValue, ComputeGraph, ComputeNode, ListAttr, OutPort, Shape, Tensor, TensorDesc,
    is_const_type,
};
use crate::ops::{DType, FUSED_ACTIVATION_ATTR, HostTensor};

use super::super::attrs::ONNX_OPSET_ATTR;
use super::view::{ORIGINAL_OP_NAMES, View, remove};

/// One convolution and the normalization after it.
struct Pair {
    conv: usize,
    bn: usize,
    epsilon: f64,
}

/// The normalization's per-channel inputs, in the order both forms take them.
const SCALE: usize = 1;
const OFFSET: usize = 2;
const MEAN: usize = 3;
const VARIANCE: usize = 4;

/// Whether `g` has a pair to fold, judged by op types, attributes and which inputs are
/// constants, without evaluating a value (the cheap test before the model is copied).
pub(super) fn any(v: &View) -> bool {
    let side = side_outputs_read(v.g);
    v.g.nodes
        .iter()
        .enumerate()
        .any(|(i, n)| pair(v, &side, i, n).is_some())
}

/// Folds every pair of `g` (not of its subgraphs); the convolutions and normalizations
/// folded, and the constants only they read, are removed.
pub(super) fn fold_all(g: &mut ComputeGraph) {
    let (folded, dead) = {
        let v = View::new(g);
        let side = side_outputs_read(g);
        let pairs = g
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| pair(&v, &side, i, n));
        let mut dead = vec![false; g.nodes.len()];
        let mut folded = Vec::new();
        for p in pairs {
            if let Some((filter, bias)) = weights(&v, &p) {
                dead[p.conv] = true;
                unread_constants(&v, &p, &mut dead);
                folded.push((p, filter, bias));
            }
        }
        (folded, dead)
    };
    if folded.is_empty() {
        return;
    }
    let mut names: HashSet<String> = g.nodes.iter().map(|n| n.name.clone()).collect();
    for (p, filter, bias) in folded {
        rewrite(g, &p, filter, bias, &mut names);
    }
    let mut dead = dead;
    dead.resize(g.nodes.len(), false);
    remove(g, &dead);
}

/// For each node, whether an output other than its first is read (by a node or as a graph
/// output): a normalization whose batch statistics are read is not folded.
fn side_outputs_read(g: &ComputeGraph) -> Vec<bool> {
    let mut side = vec![false; g.nodes.len()];
    let ports = g.nodes.iter().flat_map(|n| n.inputs.iter().flatten());
    for p in ports.chain(&g.outputs) {
        if p.index != 0
            && let Some(s) = side.get_mut(p.node.index())
        {
            *s = true;
        }
    }
    side
}

/// Whether the node producing `p` holds a value known at lowering: a constant, or a Fill
/// (ONNX's ConstantOfShape, as the importer writes it) of constants.
fn constant_node(v: &View, p: Option<OutPort>) -> bool {
    let Some(n) = p.and_then(|p| v.node(p)) else {
        return false;
    };
    is_const_type(&n.op_type)
        || (n.op_type == "Fill"
            && n.inputs.len() == 2
            && n.inputs.iter().all(|i| {
                i.and_then(|i| v.node(i))
                    .is_some_and(|c| is_const_type(&c.op_type))
            }))
}

fn int_attr(n: &ComputeNode, k: &str) -> Option<i64> {
    match n.attr(k)? {
        AttrValue::Int(i) => Some(*i),
        AttrValue::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

fn str_attr<'a>(n: &'a ComputeNode, k: &str) -> Option<&'a [u8]> {
    match n.attr(k)? {
        AttrValue::Str(s) => Some(s),
        _ => None,
    }
}

/// The pair ending at `bn`, when it has the form the module folds (values unchecked).
fn pair(v: &View, side: &[bool], bn: usize, n: &ComputeNode) -> Option<Pair> {
    let onnx = n.attr(ONNX_OPSET_ATTR).is_some();
    let epsilon = match n.op_type.as_str() {
        "BatchNormalization" if onnx => {
            if int_attr(n, "training_mode").unwrap_or(0) != 0 {
                return None;
            }
            1e-5
        }
        // GE's is_training defaults to true (training statistics).
        "BatchNorm" if !onnx => {
            let nchw = str_attr(n, "data_format").is_some_and(|f| f == b"NCHW");
            if int_attr(n, "is_training").unwrap_or(1) != 0 || !nchw {
                return None;
            }
            1e-4
        }
        _ => return None,
    };
    let epsilon = match n.attr("epsilon") {
        Some(AttrValue::Float(e)) => f64::from(*e),
        None => epsilon,
        Some(_) => return None,
    };
    if side[bn] || n.inputs.len() != 5 || !n.subgraphs.is_empty() {
        return None;
    }
    let x = n.inputs[0]?;
    let conv = v.sole(x, &["Conv", "Conv2D"])?;
    let ci = x.node.index();
    let nchw = match conv.op_type.as_str() {
        "Conv" => conv.attr(ONNX_OPSET_ATTR).is_some(),
        _ => str_attr(conv, "data_format").is_some_and(|f| f == b"NCHW"),
    };
    let plain = conv.attr(FUSED_ACTIVATION_ATTR).is_none() && conv.subgraphs.is_empty();
    if !nchw || !plain || v.types[ci] != Some(DType::F32) || !(2..=3).contains(&conv.inputs.len()) {
        return None;
    }
    let consts = conv.inputs[1..]
        .iter()
        .enumerate()
        // The bias is optional.
        .all(|(k, &p)| (k == 1 && p.is_none()) || constant_node(v, p))
        && n.inputs[1..].iter().all(|&p| constant_node(v, p));
    consts.then_some(Pair {
        conv: ci,
        bn,
        epsilon,
    })
}

/// The folded filter and bias of `p`, when the values are what the fold needs: a float32
/// filter with output channels first, a float32 bias of one value per channel, and float
/// statistics of one value per channel.
fn weights(v: &View, p: &Pair) -> Option<(HostTensor, HostTensor)> {
    let conv = &v.g.nodes[p.conv];
    let bn = &v.g.nodes[p.bn];
    let filter = v.constant(conv.inputs[1]?)?;
    if filter.dtype != DType::F32 || filter.shape.len() < 3 || filter.shape[0] <= 0 {
        return None;
    }
    let m = usize::try_from(filter.shape[0]).ok()?;
    let channel = |t: &HostTensor| {
        (t.dtype.is_float() && t.element_count() == Some(m))
            .then(|| (0..m).map(|k| t.float_at(k)).collect::<Option<Vec<f64>>>())
            .flatten()
    };
    let bias = match conv.inputs.get(2).copied().flatten() {
        Some(b) => {
            let b = v.constant(b)?;
            (b.dtype == DType::F32).then(|| channel(&b))??
        }
        None => vec![0.0; m],
    };
    let stat = |i: usize| channel(&v.constant(bn.inputs[i]?)?);
    let (scale, offset, mean, var) = (stat(SCALE)?, stat(OFFSET)?, stat(MEAN)?, stat(VARIANCE)?);
    let s: Vec<f64> = (0..m)
        .map(|o| scale[o] / (var[o] + p.epsilon).sqrt())
        .collect();
    let per = filter.data.len() / m;
    let mut data = Vec::with_capacity(filter.data.len());
    for (o, w) in filter.data.chunks_exact(per).enumerate() {
        for b in w.chunks_exact(4) {
            let w = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            data.extend_from_slice(&((f64::from(w) * s[o]) as f32).to_le_bytes());
        }
    }
    let folded_bias: Vec<u8> = (0..m)
        .flat_map(|o| (((bias[o] - mean[o]) * s[o] + offset[o]) as f32).to_le_bytes())
        .collect();
    Some((
        HostTensor {
            data: data.into(),
            ..filter
        },
        HostTensor {
            dtype: DType::F32,
            shape: vec![m as i64],
            data: folded_bias.into(),
        },
    ))
}

/// Marks the constants of `p` that only `p` reads (and the constants of a Fill among
/// them that only the Fill reads).
fn unread_constants(v: &View, p: &Pair, dead: &mut [bool]) {
    let conv = &v.g.nodes[p.conv];
    let bn = &v.g.nodes[p.bn];
    let ports: Vec<OutPort> = conv.inputs[1..]
        .iter()
        .chain(&bn.inputs[1..])
        .flatten()
        .copied()
        .collect();
    let reads = |k: usize| ports.iter().filter(|q| q.node.index() == k).count() as u32;
    for q in &ports {
        let k = q.node.index();
        if dead[k] || v.readers[k] != reads(k) {
            continue;
        }
        dead[k] = true;
        let fill = &v.g.nodes[k];
        if fill.op_type == "Fill" {
            for i in fill.inputs.iter().flatten() {
                if v.readers[i.node.index()] == 1 {
                    dead[i.node.index()] = true;
                }
            }
        }
    }
}

/// A constant node named `name` holding `t`, described by `desc` with `t`'s type and
/// shape.
fn constant(name: String, t: HostTensor, desc: &TensorDesc) -> ComputeNode {
    let desc = TensorDesc {
        dtype: DataType::Float32,
        shape: Shape::Dims(t.shape.clone()),
        ..desc.clone()
    };
    let mut n = ComputeNode {
        name,
        op_type: "Const".to_string(),
        output_descs: vec![desc.clone()],
        ..ComputeNode::default()
    };
    n.attrs.insert(
        "value".to_string(),
        AttrValue::Tensor(Box::new(Tensor {
            desc,
            data: t.data.into_bytes(),
        })),
    );
    n
}

/// The normalization node becomes the convolution reading the folded constants, which
/// are added at the end of the graph.
/// `taken` holds the graph's node names, and gets the new ones.
fn rewrite(
    g: &mut ComputeGraph,
    p: &Pair,
    filter: HostTensor,
    bias: HostTensor,
    taken: &mut HashSet<String>,
) {
    let bn = &g.nodes[p.bn];
    let mut n = g.nodes[p.conv].clone();
    let names = vec![n.name.clone().into_bytes(), bn.name.clone().into_bytes()];
    let mut unique = |suffix: &str| {
        let base = format!("{}/{suffix}", bn.name);
        let mut name = base.clone();
        let mut k = 0;
        while taken.contains(&name) {
            k += 1;
            name = format!("{base}_{k}");
        }
        taken.insert(name.clone());
        name
    };
    let (wname, bname) = (unique("folded_filter"), unique("folded_bias"));
    n.name = bn.name.clone();
    n.output_descs = bn.output_descs.iter().take(1).cloned().collect();
    for c in &bn.control_inputs {
        if !n.control_inputs.contains(c) {
            n.control_inputs.push(*c);
        }
    }
    n.attrs.insert(
        ORIGINAL_OP_NAMES.to_string(),
        AttrValue::List(ListAttr::Str(names)),
    );
    let plain = TensorDesc {
        layout: "ND".to_string(),
        ..TensorDesc::default()
    };
    let wdesc = n.input_descs.get(1).cloned().unwrap_or_else(|| TensorDesc {
        layout: "NCHW".to_string(),
        ..TensorDesc::default()
    });
    let bdesc = n.input_descs.get(2).cloned().unwrap_or(plain);
    let w = constant(wname, filter, &wdesc);
    let b = constant(bname, bias, &bdesc);
    let at = g.nodes.len() as u32;
    n.inputs.truncate(1);
    n.inputs.push(Some(OutPort {
        node: crate::om::graph::NodeId(at),
        index: 0,
    }));
    n.inputs.push(Some(OutPort {
        node: crate::om::graph::NodeId(at + 1),
        index: 0,
    }));
    if n.input_descs.len() >= 2 {
        n.input_descs.truncate(2);
        n.input_descs[1] = w.output_descs[0].clone();
        n.input_descs.push(b.output_descs[0].clone());
    }
    g.nodes[p.bn] = n;
    g.nodes.push(w);
    g.nodes.push(b);
}
