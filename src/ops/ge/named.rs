//! GE op types Netron's metadata names whose `REG_OP` prototype was found in a public
//! header (`prototypes/random_ops.txt`, `sparse_ops.txt`, `ops_cv.txt`,
//! `nn_batch_norm_ops.txt`: graphengine `random_ops.h`, `sparse_ops.h`,
//! `nn_batch_norm_ops.h`, ops-cv `non_max_suppression_v6_proto.h`), each computed as the
//! framework op its header says it is compatible with:
//!
//! - ShuffleChannel(x; group 1), Caffe's ShuffleChannel: x's C channels (dim 1, NCHW) are
//!   `group` groups of `k = C / group`; output channel `i group + g` is input channel
//!   `g k + i` (the `[group, k]` channel grid transposed). `group` is positive and divides
//!   C. Values are copied, so every element type moves.
//! - SparseToDense(indices, output_shape, values, default_value; validate_indices true),
//!   TensorFlow's: a tensor of shape `output_shape` holding `default_value` except at
//!   each index `indices[i]`, which holds `values[i]` (or the one value of a scalar
//!   `values`). indices is 0-D or 1-D (indices into a 1-D output) or `[n, rank]`. An
//!   index outside the shape is an error; with `validate_indices` the indices must also
//!   be strictly increasing in row-major order (no repeats). Values are copied.
//! - NonMaxSuppressionV6(boxes `[B, N, 4]`, scores `[B, C, N]`, max_output_size?,
//!   iou_threshold?, score_threshold?; center_point_box 0, max_boxes_size 0), ONNX's
//!   NonMaxSuppression: for each batch `b` and class `c`, the boxes whose score is
//!   strictly above `score_threshold` (all boxes when it is left out), visited by
//!   descending score (ties to the lower index), each kept when its IoU with every box
//!   kept before for that class is at most `iou_threshold` (default 0), until
//!   `max_output_size` (default 0: none) are kept. Output int32 `[M, 3]`, rows
//!   `[b, c, box]`, batch-major, then class, then selection order. Boxes are
//!   `[y1, x1, y2, x2]` with the corners in either order (`center_point_box` 0) or
//!   `[x_center, y_center, width, height]` (1). IoU is `inter / (area_a + area_b -
//!   inter)` and a pair with no intersection or a box of no area never suppresses. Boxes,
//!   scores and thresholds are read into f32. `iou_threshold` must lie in [0, 1].
//! - BatchNormExt2(input_x, input_scale, input_offset, input_mean?, input_variance?;
//!   epsilon 1e-4, data_format "NHWC", is_training true), TensorFlow's FusedBatchNormV2
//!   on 4-D x (C last for NHWC, dim 1 for NCHW): `y = (x - mean) / sqrt(var + eps) *
//!   scale + offset` per channel. Training takes the mean and the population variance
//!   over N, H and W; output_mean is that mean, output_variance the variance times
//!   `m / (m - 1)` (`m` = N H W, Bessel's correction; `m / 1` when m is 1), reserve_space_1
//!   the mean and reserve_space_2 the population variance, as TensorFlow's CPU kernel
//!   gives them. Inference (is_training false) uses input_mean and input_variance, which
//!   it requires, and returns them as output_mean / reserve_space_1 and output_variance /
//!   reserve_space_2 (the header's constraint). x is float16, bfloat16, float32 or
//!   float64; the statistics are float32 (the prototype's), taken in f64 in two passes,
//!   every output rounded once.
//!
//! rt2's choices where the headers leave it open: ShuffleChannel takes any rank from 2 with
//! C at dim 1 (the trailing dims moved as one block); SparseToDense takes a
//! `default_value` of one element of any rank and, with validate_indices false, writes
//! repeated indices in order (the last wins, TensorFlow's CPU kernel); NonMaxSuppressionV6's
//! `max_boxes_size`, documented nowhere, is accepted at 0 only (what GE's ONNX plugin
//! leaves it at), a negative max_output_size selects nothing (ONNX Runtime's clamp), and
//! the output has one row per selected box (the header's "`[M]`" shape contradicts its own
//! "2-D"; ops-cv's aclnn documentation gives `[num_selected_indices, 3]`);
//! BatchNormExt2 in training ignores given input_mean and input_variance (the header says
//! they "cannot be used" there).

use super::attrs::{data_format, given};
use super::stats::is_float;
use crate::ops::nn::scalar::{read_f64s, write_f64s};
use crate::ops::shape::args::{bytes, bytes_mut, input, output};
use crate::ops::shape::indices::ints;
use crate::ops::{
    DType, InferCtx, OpError, OpRegistry, OpSpec, Tensor, TensorMeta, TensorMut, TensorRef,
    UNKNOWN, meta,
};

/// The op types this file registers.
const OPS: &[&str] = &[
    "ShuffleChannel",
    "SparseToDense",
    "NonMaxSuppressionV6",
    "BatchNormExt2",
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new("ShuffleChannel", infer_shuffle_channel).computes(shuffle_channel));
    reg.add(
        OpSpec::new("SparseToDense", infer_sparse_to_dense)
            .reading(&[1])
            .computes(sparse_to_dense),
    );
    reg.add(
        OpSpec::new("NonMaxSuppressionV6", infer_nms_v6)
            .data_dependent()
            .computes_alloc(nms_v6),
    );
    reg.add(OpSpec::new("BatchNormExt2", infer_batch_norm_ext2).computes(batch_norm_ext2));
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    OPS.iter().copied()
}

// ---------------------------------------------------------------------------------------
// ShuffleChannel

/// `group`, checked positive.
fn shuffle_group(ctx: &InferCtx) -> Result<usize, OpError> {
    match ctx.attr_int("group", 1)? {
        g if g > 0 => Ok(g as usize),
        g => Err(ctx.attr_error("group", format!("is {g}; it must be positive"))),
    }
}

/// Checks `group` divides a known channel count `c`.
fn check_divides(ctx: &InferCtx, group: usize, c: i64) -> Result<(), OpError> {
    if c != UNKNOWN && c % group as i64 != 0 {
        return Err(ctx.attr_error(
            "group",
            format!("is {group}, which does not divide x's {c} channels"),
        ));
    }
    Ok(())
}

fn infer_shuffle_channel(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let group = shuffle_group(ctx)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape {
        if s.len() < 2 {
            return Err(ctx.input_error(0, format!("is {s:?}; it needs a channel dim (dim 1)")));
        }
        check_divides(ctx, group, s[1])?;
    }
    Ok(vec![x.clone()])
}

/// ShuffleChannel: per image, output channel block `o = i group + g` copied from input
/// block `g k + i`, each block the channel's trailing elements.
fn shuffle_channel(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let group = shuffle_group(ctx)?;
    if x.rank() < 2 {
        return Err(ctx.input_error(0, format!("is {:?}; it needs a channel dim", x.shape)));
    }
    let c = x.shape[1];
    check_divides(ctx, group, c as i64)?;
    let k = c / group;
    let block = x.shape[2..].iter().product::<usize>() * x.dtype.size();
    let src = bytes(ctx, x, 0)?;
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    if block * c == 0 {
        return Ok(());
    }
    for (img, out) in src
        .chunks_exact(c * block)
        .zip(dst.chunks_exact_mut(c * block))
    {
        for (o, to) in out.chunks_exact_mut(block).enumerate() {
            let (i, g) = (o / group, o % group);
            to.copy_from_slice(&img[(g * k + i) * block..][..block]);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// SparseToDense

fn infer_sparse_to_dense(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(4, 4)?;
    let [indices, shape, values, default] = [0, 1, 2, 3].map(|k| &ctx.inputs[k]);
    if !matches!(indices.dtype, DType::I32 | DType::I64) {
        return Err(ctx.input_error(0, format!("is {}, not int32 or int64", indices.dtype)));
    }
    if shape.dtype != indices.dtype {
        return Err(ctx.input_error(
            1,
            format!(
                "is {}; it must be indices' type, {}",
                shape.dtype, indices.dtype
            ),
        ));
    }
    if default.dtype != values.dtype {
        return Err(ctx.input_error(
            3,
            format!(
                "is {}; it must be values' type, {}",
                default.dtype, values.dtype
            ),
        ));
    }
    if let Some(s) = &indices.shape
        && s.len() > 2
    {
        return Err(ctx.input_error(0, format!("is {s:?}; it must be 0-D, 1-D or 2-D")));
    }
    if let Some(s) = &shape.shape
        && s.len() != 1
    {
        return Err(ctx.input_error(1, format!("is {s:?}; it must be 1-D")));
    }
    if let Some(s) = &values.shape
        && s.len() > 1
    {
        return Err(ctx.input_error(2, format!("is {s:?}; it must be 0-D or 1-D")));
    }
    if let Some(s) = &default.shape
        && !s.contains(&UNKNOWN)
        && s.iter().product::<i64>() != 1
    {
        return Err(ctx.input_error(3, format!("is {s:?}; it must hold one value")));
    }
    let dims = match ctx.value_ints(1)? {
        Some(v) => {
            if let Some(d) = v.iter().find(|&&d| d < 0) {
                return Err(ctx.input_error(1, format!("{v:?} has the negative dim {d}")));
            }
            Some(v)
        }
        None => match shape.shape.as_deref() {
            Some(&[r]) if r != UNKNOWN => Some(vec![UNKNOWN; r as usize]),
            _ => None,
        },
    };
    Ok(meta(values.dtype, dims))
}

/// The sparse indices as (count, index length): a 0-D or 1-D indices indexes a 1-D
/// output.
fn sparse_layout(ctx: &InferCtx, indices: &TensorRef) -> Result<(usize, usize), OpError> {
    match indices.shape {
        [] => Ok((1, 1)),
        [n] => Ok((*n, 1)),
        [n, d] => Ok((*n, *d)),
        s => Err(ctx.input_error(0, format!("is {s:?}; it must be 0-D, 1-D or 2-D"))),
    }
}

/// SparseToDense: y filled with default_value, then each value copied to its index.
fn sparse_to_dense(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let indices = input(ctx, inputs, 0)?;
    let values = input(ctx, inputs, 2)?;
    let default = input(ctx, inputs, 3)?;
    let (n, d) = sparse_layout(ctx, indices)?;
    let idx = ints(indices).ok_or_else(|| ctx.input_error(0, "is not integers"))?;
    let size = values.dtype.size();
    let vals = bytes(ctx, values, 2)?;
    let scalar = values.rank() == 0;
    if !scalar && values.len() != n {
        return Err(ctx.input_error(2, format!("has {} values for {n} indices", values.len())));
    }
    let fill = bytes(ctx, default, 3)?;
    if default.len() != 1 {
        return Err(ctx.input_error(3, format!("is {:?}; it must hold one value", default.shape)));
    }
    let validate = ctx.attr_bool("validate_indices", true)?;
    let y = output(ctx, outputs, 0)?;
    let dims = y.shape.to_vec();
    if d != dims.len() {
        return Err(ctx.input_error(
            0,
            format!("indexes {d} dims; output_shape {dims:?} has {}", dims.len()),
        ));
    }
    let dst = bytes_mut(ctx, y)?;
    for e in dst.chunks_exact_mut(size) {
        e.copy_from_slice(fill);
    }
    let mut last: Option<usize> = None;
    for (i, at) in idx.chunks_exact(d.max(1)).take(n).enumerate() {
        let mut flat = 0usize;
        for (j, (&v, &dim)) in at.iter().zip(&dims).enumerate() {
            if v < 0 || v as usize >= dim {
                return Err(ctx.input_error(
                    0,
                    format!("indices[{i}] = {at:?} is outside {dims:?} (at dim {j})"),
                ));
            }
            flat = flat * dim + v as usize;
        }
        if validate && last.is_some_and(|p| flat <= p) {
            return Err(ctx.input_error(
                0,
                format!("indices[{i}] = {at:?} is repeated or out of order (validate_indices)"),
            ));
        }
        last = Some(flat);
        let from = if scalar { 0 } else { i * size };
        dst[flat * size..][..size].copy_from_slice(&vals[from..][..size]);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// NonMaxSuppressionV6

/// Checks input `k` is float16 or float32.
fn check_f16_f32(ctx: &InferCtx, k: usize) -> Result<(), OpError> {
    match ctx.inputs[k].dtype {
        DType::F16 | DType::F32 => Ok(()),
        other => Err(ctx.input_error(k, format!("is {other}, not float16 or float32"))),
    }
}

/// center_point_box (0 or 1): whether boxes are centre and size.
fn centered(ctx: &InferCtx) -> Result<bool, OpError> {
    match ctx.attr_int("center_point_box", 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(ctx.attr_error("center_point_box", format!("is {v}, not 0 or 1"))),
    }
}

fn infer_nms_v6(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 5)?;
    centered(ctx)?;
    match ctx.attr_int("max_boxes_size", 0)? {
        0 => {}
        v => {
            return Err(ctx.attr_error(
                "max_boxes_size",
                format!("is {v}; only 0 is supported (GE documents no other value's meaning)"),
            ));
        }
    }
    check_f16_f32(ctx, 0)?;
    check_f16_f32(ctx, 1)?;
    let boxes = ctx.inputs[0].shape.as_deref();
    let scores = ctx.inputs[1].shape.as_deref();
    if let Some(b) = boxes
        && (b.len() != 3 || (b[2] != 4 && b[2] != UNKNOWN))
    {
        return Err(ctx.input_error(0, format!("is {b:?}, not [batches, boxes, 4]")));
    }
    if let Some(s) = scores
        && s.len() != 3
    {
        return Err(ctx.input_error(1, format!("is {s:?}, not [batches, classes, boxes]")));
    }
    if let (Some(b), Some(s)) = (boxes, scores) {
        let clash = |p: i64, q: i64| p != UNKNOWN && q != UNKNOWN && p != q;
        if clash(b[0], s[0]) || clash(b[1], s[2]) {
            return Err(ctx.input_error(
                1,
                format!("is {s:?}; boxes {b:?} need [{}, classes, {}]", b[0], b[1]),
            ));
        }
    }
    if given(ctx, 2) && !matches!(ctx.inputs[2].dtype, DType::I32 | DType::I64) {
        return Err(ctx.input_error(2, format!("is {}, not int32", ctx.inputs[2].dtype)));
    }
    for k in [3, 4] {
        if given(ctx, k) {
            check_f16_f32(ctx, k)?;
        }
    }
    Ok(meta(DType::I32, Some(vec![UNKNOWN, 3])))
}

/// The one value of optional input `k` read as f32, `None` when it is left out.
fn optional_f32(ctx: &InferCtx, inputs: &[TensorRef], k: usize) -> Result<Option<f32>, OpError> {
    if !given(ctx, k) {
        return Ok(None);
    }
    let t = input(ctx, inputs, k)?;
    let v = read_f64s(t).map_err(|_| ctx.input_error(k, format!("is {}, not a float", t.dtype)))?;
    match v.as_slice() {
        [v] => Ok(Some(*v as f32)),
        v => Err(ctx.input_error(k, format!("has {} values, not one", v.len()))),
    }
}

/// A box as `[y_min, x_min, y_max, x_max]`.
fn corners(b: &[f32], centered: bool) -> [f32; 4] {
    if centered {
        let (xc, yc, w, h) = (b[0], b[1], b[2], b[3]);
        [yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0]
    } else {
        [
            b[0].min(b[2]),
            b[1].min(b[3]),
            b[0].max(b[2]),
            b[1].max(b[3]),
        ]
    }
}

/// Whether box `a` suppresses box `b`: their IoU is above `threshold`; boxes without
/// area or overlap never do.
fn suppresses(a: &[f32; 4], b: &[f32; 4], threshold: f32) -> bool {
    let ih = a[2].min(b[2]) - a[0].max(b[0]);
    let iw = a[3].min(b[3]) - a[1].max(b[1]);
    let inter = ih.max(0.0) * iw.max(0.0);
    let area_a = (a[2] - a[0]) * (a[3] - a[1]);
    let area_b = (b[2] - b[0]) * (b[3] - b[1]);
    let union = area_a + area_b - inter;
    if inter <= 0.0 || area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > threshold
}

fn nms_v6(ctx: &InferCtx, inputs: &[TensorRef]) -> Result<Vec<Tensor>, OpError> {
    infer_nms_v6(ctx)?;
    let centered = centered(ctx)?;
    let boxes = input(ctx, inputs, 0)?;
    let scores = input(ctx, inputs, 1)?;
    let (&[nb, n, 4], &[sb, classes, sn]) = (boxes.shape, scores.shape) else {
        return Err(ctx.input_error(0, format!("is {:?}, not [batches, boxes, 4]", boxes.shape)));
    };
    if sb != nb || sn != n {
        return Err(ctx.input_error(
            1,
            format!(
                "is {:?}; boxes {:?} need [{nb}, classes, {n}]",
                scores.shape, boxes.shape
            ),
        ));
    }
    let limit = if given(ctx, 2) {
        let t = input(ctx, inputs, 2)?;
        match ints(t).as_deref() {
            Some(&[v]) => v.max(0) as usize,
            _ => return Err(ctx.input_error(2, format!("is {:?}, not one int", t.shape))),
        }
    } else {
        0
    };
    let threshold = optional_f32(ctx, inputs, 3)?.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&threshold) {
        return Err(ctx.input_error(3, format!("iou_threshold {threshold} is not in [0, 1]")));
    }
    let floor = optional_f32(ctx, inputs, 4)?;
    let b = read_f64s(boxes).map_err(|_| ctx.input_error(0, "is not a float"))?;
    let s = read_f64s(scores).map_err(|_| ctx.input_error(1, "is not a float"))?;
    let to_f32 = |v: &[f64]| -> Vec<f32> { v.iter().map(|&x| x as f32).collect() };
    let (b, s) = (to_f32(&b), to_f32(&s));
    let boxes: Vec<[f32; 4]> = b.chunks_exact(4).map(|v| corners(v, centered)).collect();
    let mut rows: Vec<i32> = Vec::new();
    let mut order: Vec<usize> = Vec::with_capacity(n);
    let mut kept: Vec<usize> = Vec::with_capacity(n);
    for batch in 0..nb {
        let bx = &boxes[batch * n..][..n];
        for class in 0..classes {
            let sc = &s[(batch * classes + class) * n..][..n];
            order.clear();
            order.extend((0..n).filter(|&i| floor.is_none_or(|f| sc[i] > f)));
            order.sort_by(|&i, &j| sc[j].total_cmp(&sc[i]).then(i.cmp(&j)));
            kept.clear();
            for &i in &order {
                if kept.len() >= limit {
                    break;
                }
                if !kept.iter().any(|&j| suppresses(&bx[j], &bx[i], threshold)) {
                    kept.push(i);
                }
            }
            for &i in &kept {
                rows.extend([batch as i32, class as i32, i as i32]);
            }
        }
    }
    Ok(vec![Tensor::from_vec(&[rows.len() / 3, 3], &rows)])
}

// ---------------------------------------------------------------------------------------
// BatchNormExt2

/// Checks input `k`, when its shape is known, is 1-D of `c` (when known).
fn check_channel_vector(ctx: &InferCtx, k: usize, c: i64) -> Result<(), OpError> {
    let t = &ctx.inputs[k];
    if !is_float(t.dtype) {
        return Err(ctx.input_error(k, format!("is {}, not a float type", t.dtype)));
    }
    if let Some(s) = &t.shape
        && (s.len() != 1 || (c != UNKNOWN && s[0] != UNKNOWN && s[0] != c))
    {
        return Err(ctx.input_error(k, format!("is {s:?}, not [{c}] (x's channels)")));
    }
    Ok(())
}

fn infer_batch_norm_ext2(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 5)?;
    let nchw = data_format(ctx, "NHWC")?;
    ctx.attr_float("epsilon", 1e-4)?;
    let training = ctx.attr_bool("is_training", true)?;
    let x = &ctx.inputs[0];
    if !is_float(x.dtype) {
        return Err(ctx.input_error(0, format!("is {}, not a float type", x.dtype)));
    }
    let c = match &x.shape {
        Some(s) if s.len() != 4 => {
            return Err(ctx.input_error(0, format!("is {s:?}, not 4-D")));
        }
        Some(s) => s[if nchw { 1 } else { 3 }],
        None => UNKNOWN,
    };
    for k in [1, 2] {
        check_channel_vector(ctx, k, c)?;
    }
    if !training {
        for (k, name) in [(3, "input_mean"), (4, "input_variance")] {
            if !given(ctx, k) {
                return Err(ctx.input_error(
                    k,
                    format!("{name} is required in inference (is_training false)"),
                ));
            }
            check_channel_vector(ctx, k, c)?;
        }
    }
    let stat = TensorMeta::new(DType::F32, &[c]);
    Ok(vec![
        x.clone(),
        stat.clone(),
        stat.clone(),
        stat.clone(),
        stat,
    ])
}

/// Input `k` as f64, checked to hold `c` values.
fn channel_values(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    k: usize,
    c: usize,
) -> Result<Vec<f64>, OpError> {
    let t = input(ctx, inputs, k)?;
    let v = read_f64s(t).map_err(|_| ctx.input_error(k, format!("is {}, not a float", t.dtype)))?;
    if v.len() != c {
        return Err(ctx.input_error(k, format!("has {} values for {c} channels", v.len())));
    }
    Ok(v)
}

/// BatchNormExt2: the per-channel statistics (the batch's, or the given ones), then y.
fn batch_norm_ext2(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    infer_batch_norm_ext2(ctx)?;
    let nchw = data_format(ctx, "NHWC")?;
    let eps = f64::from(ctx.attr_float("epsilon", 1e-4)?);
    let training = ctx.attr_bool("is_training", true)?;
    let x = input(ctx, inputs, 0)?;
    let &[n, d1, d2, d3] = x.shape else {
        return Err(ctx.input_error(0, format!("is {:?}, not 4-D", x.shape)));
    };
    // Element `e`'s channel is `e / inner % c`.
    let (c, inner) = if nchw { (d1, d2 * d3) } else { (d3, 1) };
    let xs = read_f64s(x).map_err(|_| ctx.input_error(0, "is not a float"))?;
    let scale = channel_values(ctx, inputs, 1, c)?;
    let offset = channel_values(ctx, inputs, 2, c)?;
    let channel = |e: usize| e / inner % c.max(1);
    // The elements per channel.
    let m = n * if nchw { d2 * d3 } else { d1 * d2 };
    let (mean, var) = if training {
        let mut mean = vec![0.0; c];
        for (e, &v) in xs.iter().enumerate() {
            mean[channel(e)] += v;
        }
        mean.iter_mut().for_each(|s| *s /= m as f64);
        let mut var = vec![0.0; c];
        for (e, &v) in xs.iter().enumerate() {
            let dev = v - mean[channel(e)];
            var[channel(e)] += dev * dev;
        }
        var.iter_mut().for_each(|s| *s /= m as f64);
        (mean, var)
    } else {
        (
            channel_values(ctx, inputs, 3, c)?,
            channel_values(ctx, inputs, 4, c)?,
        )
    };
    let a: Vec<f64> = (0..c).map(|k| scale[k] / (var[k] + eps).sqrt()).collect();
    let y: Vec<f64> = xs
        .iter()
        .enumerate()
        .map(|(e, &v)| {
            let k = channel(e);
            (v - mean[k]) * a[k] + offset[k]
        })
        .collect();
    let adjust = if training {
        m as f64 / m.saturating_sub(1).max(1) as f64
    } else {
        1.0
    };
    let reported: Vec<f64> = var.iter().map(|v| v * adjust).collect();
    let results: [&[f64]; 5] = [&y, &mean, &reported, &mean, &var];
    for (k, v) in results.iter().enumerate() {
        write_f64s(output(ctx, outputs, k)?, v).map_err(|e| ctx.compute_error(e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
