//! GE's normalizations beyond LayerNorm (`norm.rs`), each as its prototype documents it
//! (`prototypes/nn_norm_ops.txt`, `nn_batch_norm_ops.txt`, `reduce_ops.txt`; graphengine
//! `nn_norm_ops.h`, `nn_batch_norm_ops.h`, `reduce_ops.h`, ops-nn's `*_proto.h` and op
//! docs; Caffe's MVN and SSD Normalize layers for the Caffe-born ones):
//!
//! - InstanceNorm(x, gamma, beta; data_format "NDHWC", epsilon 1e-6): y, mean, variance.
//!   Each (image, channel) is normalized over its spatial dims,
//!   `(x - mean) / sqrt(variance + eps) * gamma[c] + beta[c]` (population variance).
//!   NCHW / NHWC take 4-D x, NCDHW / NDHWC 5-D, ND 2- to 8-D with C at dim 1; mean and
//!   variance have x's rank with 1 at each reduced dim, in gamma's type.
//! - GroupNormRelu(x, gamma, beta; num_groups required, eps 1e-5): x `[N, C, ...]`, each
//!   image's channels in `num_groups` groups normalized together, scaled by `gamma[c]`,
//!   shifted by `beta[c]`, then `max(., 0)`.
//! - RmsNorm(x, gamma; epsilon 1e-6): over x's trailing dims that gamma covers,
//!   `rstd = 1 / sqrt(mean(x^2) + eps)`, `y = x * rstd * gamma`; rstd (float32) has x's
//!   leading dims and a 1 for each normalized one.
//! - AddLayerNorm(x1, x2, gamma, beta, bias optional; epsilon 1e-5, additional_output
//!   false): `x = x1 + x2 (+ bias)`, then LayerNorm over gamma's trailing dims: y, mean,
//!   rstd (float32, shaped as RmsNorm's) and the sum x.
//! - DeepNorm(x, gx, beta, gamma; alpha 0.3, epsilon 1e-6): LayerNorm of
//!   `x * alpha + gx` over gamma's dims: mean, rstd (float32), y.
//! - LayerNormV4(x, normalized_shape, gamma optional, beta optional; epsilon 1e-5):
//!   LayerNorm over x's last `len(normalized_shape)` dims: y, mean, rstd in x's type.
//! - MVN(x; normalize_variance true, across_channels false, eps 1e-9): Caffe's, x NCHW:
//!   per image and channel (per image when across_channels) `x - mean`, divided by
//!   `sqrt(variance) + eps` when normalize_variance.
//! - MVNV2(x; eps 1e-9, axes [0, 2, 3]): `(x - mean) / (sqrt(variance) + eps)` over axes
//!   (ONNX's MeanVarianceNormalization).
//! - Normalize(x1, x2; across_spatial true, channel_shared true, eps 1e-10): Caffe SSD's
//!   L2 normalization of NCHW x1, `x / sqrt(sum(x^2) + eps) * scale`, the sum over C, H, W
//!   of each image (across_spatial) or over C at each position; scale is x2's one value
//!   (channel_shared) or `x2[c]`.
//! - L2Normalize(x; axis [], eps 1e-4): `x / sqrt(max(sum(x^2), eps))` over `axis`.
//! - Renorm(x; p, dim, maxnorm required): PyTorch's: each slice `x[.., i, ..]` along `dim`
//!   whose p-norm exceeds maxnorm is scaled by `maxnorm / (norm + 1e-7)`.
//! - BNInfer(x, scale, offset, mean, variance; epsilon required): per channel
//!   `(x - mean) / sqrt(variance + eps) * scale + offset`; C is dim 1, or the last dim
//!   when the graph records x's origin format as NHWC.
//!
//! Statistics are taken in f64 in two passes (mean, then squared deviations), and every
//! output element is rounded once into its type, as the library's norm kernels do.
//!
//! rt2's choices where GE documents nothing: L2Normalize's empty `axis` normalizes over
//! every dim (TensorFlow's `axis=None`); AddLayerNorm writes the sum x whatever
//! additional_output says, normalizes the unrounded sum, takes x2 of x1's shape and a
//! bias of gamma's or x1's shape; LayerNormV4's mean and rstd are in x's type; Normalize
//! refuses int8 (quantized) x1; Renorm's `p` of 0 counts non-zero elements, as PyTorch's
//! norm does.
//!
//! Not computed: InstanceNormV2, INInferV2 and INInferV2D, whose statistics inputs are
//! laid out in NC1HWC0 (`[N, C1, 1, 1, C0]`) and whose use of given against computed
//! statistics GE does not document.

use super::attrs::{given, input_format, required_float, required_int};
use super::stats::{axes_mask, broadcast_strides, group_strides, is_float, moments, walk};
use crate::dispatch;
use crate::ops::nn::scalar::{Scalar, read_f64s, write_f64s};
use crate::ops::{DType, InferCtx, OpError, OpRegistry, TensorMeta, TensorMut, TensorRef, UNKNOWN};

/// The op types this file registers.
const OPS: &super::table::Table = &[
    ("InstanceNorm", &[]),
    ("GroupNormRelu", &[]),
    ("RmsNorm", &[]),
    ("AddLayerNorm", &[]),
    ("DeepNorm", &[]),
    ("LayerNormV4", &[]),
    ("MVN", &[]),
    ("MVNV2", &[]),
    ("Normalize", &[]),
    ("L2Normalize", &[]),
    ("Renorm", &[]),
    ("BNInfer", &[]),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "InstanceNorm" => (infer_instance_norm, instance_norm),
        "RmsNorm" | "AddLayerNorm" | "DeepNorm" | "LayerNormV4" => (infer_rows, rows),
        _ => (infer_same, same),
    });
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::names(OPS)
}

fn unsupported(ctx: &InferCtx, i: usize, d: DType) -> OpError {
    ctx.input_error(i, format!("{d} is not a float type this op takes"))
}

/// The small float parameter tensor `i`, as f64.
fn params(ctx: &InferCtx, inputs: &[TensorRef], i: usize) -> Result<Vec<f64>, OpError> {
    read_f64s(&inputs[i]).map_err(|_| unsupported(ctx, i, inputs[i].dtype))
}

/// Parameter `i` with exactly `n` values.
fn params_n(ctx: &InferCtx, inputs: &[TensorRef], i: usize, n: usize) -> Result<Vec<f64>, OpError> {
    let v = params(ctx, inputs, i)?;
    if v.len() != n {
        return Err(ctx.input_error(i, format!("has {} values, expected {n}", v.len())));
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------
// InstanceNorm

/// InstanceNorm's channel dim for rank `rank`, checked against its data_format.
fn instance_channel(ctx: &InferCtx, rank: usize) -> Result<usize, OpError> {
    let format = ctx.attr_str("data_format", "NDHWC")?;
    let (ranks, last) = match format {
        "NCHW" => (4..=4, false),
        "NHWC" => (4..=4, true),
        "NCDHW" => (5..=5, false),
        "NDHWC" => (5..=5, true),
        "ND" => (2..=8, false),
        other => {
            return Err(ctx.attr_error(
                "data_format",
                format!("{other:?} is not NCHW, NHWC, NCDHW, NDHWC or ND"),
            ));
        }
    };
    if !ranks.contains(&rank) {
        return Err(ctx.input_error(
            0,
            format!("has rank {rank}; data_format {format} takes {ranks:?}"),
        ));
    }
    Ok(if last { rank - 1 } else { 1 })
}

fn infer_instance_norm(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    let x = &ctx.inputs[0];
    if !is_float(x.dtype) {
        return Err(unsupported(ctx, 0, x.dtype));
    }
    let stats = ctx.inputs[1].dtype;
    let Some(s) = &x.shape else {
        let u = TensorMeta::unknown_rank(stats);
        return Ok(vec![x.clone(), u.clone(), u]);
    };
    let c = instance_channel(ctx, s.len())?;
    for i in [1, 2] {
        if let Some(p) = &ctx.inputs[i].shape {
            let n: i64 = p.iter().product();
            if !p.contains(&UNKNOWN) && s[c] != UNKNOWN && n != s[c] {
                return Err(ctx.input_error(i, format!("{p:?} does not hold C = {}", s[c])));
            }
        }
    }
    let st: Vec<i64> = (0..s.len())
        .map(|d| if d == 0 || d == c { s[d] } else { 1 })
        .collect();
    let st = TensorMeta::new(stats, &st);
    Ok(vec![x.clone(), st.clone(), st])
}

fn instance_norm(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let c = instance_channel(ctx, x.rank())?;
    let eps = f64::from(ctx.attr_float("epsilon", 1e-6)?);
    let (gamma, beta) = (
        params_n(ctx, inputs, 1, x.shape[c])?,
        params_n(ctx, inputs, 2, x.shape[c])?,
    );
    let mask: Vec<bool> = (0..x.rank()).map(|d| d != 0 && d != c).collect();
    let g = group_strides(x.shape, &mask);
    let mut p = vec![0; x.rank()];
    p[c] = 1;
    let (mean, var) = dispatch!(x.dtype, T in [f32, f64, half::f16, half::bf16] => {
        let xs = x.slice::<T>()?;
        let (mean, ssd, n) = moments(xs, x.shape, &mask);
        let var: Vec<f64> = ssd.iter().map(|s| s / n as f64).collect();
        let inv: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
        let y = outputs[0].slice_mut::<T>()?;
        walk(x.shape, [&g, &p], |i, [o, ch]| {
            y[i] = T::from_f64((xs[i].to_f64() - mean[o]) * inv[o] * gamma[ch] + beta[ch]);
        });
        (mean, var)
    }, other => return Err(unsupported(ctx, 0, other)));
    write_f64s(&mut outputs[1], &mean)?;
    write_f64s(&mut outputs[2], &var)
}

// ---------------------------------------------------------------------------------------
// RmsNorm, AddLayerNorm, DeepNorm, LayerNormV4: rows of x's trailing dims.

/// What the row ops name their inputs: (data inputs added into the row, gamma, beta).
fn row_inputs(op: &str) -> (&'static [usize], Option<usize>, Option<usize>) {
    match op {
        "RmsNorm" => (&[0], Some(1), None),
        "AddLayerNorm" => (&[0, 1], Some(2), Some(3)),
        "DeepNorm" => (&[0, 1], Some(3), Some(2)),
        _ => (&[0], Some(2), Some(3)),
    }
}

/// How many of x's trailing dims the op normalizes, `None` while unknown.
fn norm_rank(ctx: &InferCtx) -> Result<Option<usize>, OpError> {
    let (i, name) = match ctx.op {
        "LayerNormV4" => (1, "normalized_shape"),
        "DeepNorm" => (3, "gamma"),
        "AddLayerNorm" => (2, "gamma"),
        _ => (1, "gamma"),
    };
    let Some(s) = &ctx.inputs[i].shape else {
        return Ok(None);
    };
    if ctx.op != "LayerNormV4" {
        return Ok(Some(s.len()));
    }
    match s.as_slice() {
        [n] if *n == UNKNOWN => Ok(None),
        [n] => Ok(Some(*n as usize)),
        _ => Err(ctx.input_error(i, format!("{name} {s:?} is not 1-D"))),
    }
}

fn infer_rows(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let (min, max) = match ctx.op {
        "RmsNorm" => (2, 2),
        "AddLayerNorm" => (4, 5),
        "DeepNorm" => (4, 4),
        _ => (2, 4),
    };
    ctx.arity(min, max)?;
    let x = &ctx.inputs[0];
    if !is_float(x.dtype) {
        return Err(unsupported(ctx, 0, x.dtype));
    }
    if ctx.op == "LayerNormV4" && !ctx.inputs[1].dtype.is_int() {
        return Err(ctx.input_error(1, "normalized_shape is not integers"));
    }
    let (data, gamma, beta) = row_inputs(ctx.op);
    if let Some(&i) = data.get(1) {
        let t = &ctx.inputs[i];
        if t.dtype != x.dtype {
            return Err(ctx.input_error(i, format!("is {}, input 0 is {}", t.dtype, x.dtype)));
        }
        if let (Some(a), Some(b)) = (&x.shape, &t.shape)
            && (a.len() != b.len()
                || a.iter()
                    .zip(b)
                    .any(|(&p, &q)| p != q && p != UNKNOWN && q != UNKNOWN))
        {
            return Err(ctx.input_error(i, format!("is {b:?}, input 0 is {a:?}")));
        }
    }
    let stats_type = if ctx.op == "LayerNormV4" {
        x.dtype
    } else {
        DType::F32
    };
    let (Some(s), Some(k)) = (&x.shape, norm_rank(ctx)?) else {
        let u = TensorMeta::unknown_rank(stats_type);
        return Ok(order(ctx.op, x.clone(), u));
    };
    if k > s.len() || k == 0 {
        return Err(ctx.input_error(0, format!("{s:?} has no {k} trailing dims to normalize")));
    }
    let tail = &s[s.len() - k..];
    for i in [gamma, beta].into_iter().flatten() {
        if !given(ctx, i) {
            continue;
        }
        if let Some(p) = &ctx.inputs[i].shape
            && (p.len() > k
                || p.iter()
                    .rev()
                    .zip(tail.iter().rev())
                    .any(|(&a, &b)| a != b && a != 1 && a != UNKNOWN && b != UNKNOWN))
        {
            return Err(ctx.input_error(
                i,
                format!("{p:?} does not cover x's normalized dims {tail:?}"),
            ));
        }
    }
    let mut st = s[..s.len() - k].to_vec();
    st.resize(s.len(), 1);
    Ok(order(ctx.op, x.clone(), TensorMeta::new(stats_type, &st)))
}

/// The row ops' outputs in their prototype's order, from y's and the statistics' metas.
fn order(op: &str, y: TensorMeta, stats: TensorMeta) -> Vec<TensorMeta> {
    match op {
        "RmsNorm" => vec![y, stats],
        "DeepNorm" => vec![stats.clone(), stats, y],
        "AddLayerNorm" => vec![y.clone(), stats.clone(), stats, y],
        _ => vec![y, stats.clone(), stats],
    }
}

fn rows(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16] =>
        rows_typed::<T>(ctx, inputs, outputs),
        other => Err(unsupported(ctx, 0, other)))
}

/// A row parameter (gamma, beta, bias) as one value per row element; `None` when left out.
fn row_param(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    i: Option<usize>,
    tail: &[usize],
) -> Result<Option<Vec<f64>>, OpError> {
    let Some(i) = i.filter(|&i| inputs.get(i).is_some_and(|t| !t.is_empty())) else {
        return Ok(None);
    };
    let v = params(ctx, inputs, i)?;
    let strides = broadcast_strides(inputs[i].shape, tail).ok_or_else(|| {
        ctx.input_error(i, format!("{:?} does not cover {tail:?}", inputs[i].shape))
    })?;
    let mut out = vec![0.0; tail.iter().product()];
    walk(tail, [&strides], |q, [p]| out[q] = v[p]);
    Ok(Some(out))
}

fn rows_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let k = match ctx.op {
        "LayerNormV4" => inputs[1].len(),
        "DeepNorm" => inputs[3].rank(),
        "AddLayerNorm" => inputs[2].rank(),
        _ => inputs[1].rank(),
    };
    if k == 0 || k > x.rank() {
        return Err(ctx.input_error(
            0,
            format!("{:?} has no {k} trailing dims to normalize", x.shape),
        ));
    }
    let tail = &x.shape[x.rank() - k..];
    let row: usize = tail.iter().product();
    let (_, gamma, beta) = row_inputs(ctx.op);
    let gamma = row_param(ctx, inputs, gamma, tail)?;
    let beta = row_param(ctx, inputs, beta, tail)?;
    let default_eps = match ctx.op {
        "RmsNorm" | "DeepNorm" => 1e-6,
        _ => 1e-5,
    };
    let eps = f64::from(ctx.attr_float("epsilon", default_eps)?);
    let alpha = f64::from(ctx.attr_float("alpha", 0.3)?);
    let x1 = x.slice::<T>()?;
    let x2 = if matches!(ctx.op, "AddLayerNorm" | "DeepNorm") {
        let t = &inputs[1];
        if t.len() != x1.len() {
            return Err(ctx.input_error(1, format!("{:?} is not x's {:?}", t.shape, x.shape)));
        }
        Some(t.slice::<T>()?)
    } else {
        None
    };
    // AddLayerNorm's bias covers the row (gamma's shape) or all of x.
    let bias = match inputs
        .get(4)
        .filter(|t| ctx.op == "AddLayerNorm" && !t.is_empty())
    {
        Some(t) if t.len() == x1.len() => Some((params(ctx, inputs, 4)?, false)),
        Some(_) => row_param(ctx, inputs, Some(4), tail)?.map(|b| (b, true)),
        None => None,
    };
    let rows = x1.len().checked_div(row).unwrap_or(0);
    let (mut means, mut rstds) = (vec![0.0; rows], vec![0.0; rows]);
    let (y_at, sum_at) = match ctx.op {
        "DeepNorm" => (2, None),
        "AddLayerNorm" => (0, Some(3)),
        _ => (0, None),
    };
    let (y, mut sum) = split_two::<T>(outputs, y_at, sum_at)?;
    // One row of the normalized values, reused for every row.
    let mut buf = vec![0.0f64; row];
    for r in 0..rows {
        let at = r * row;
        for (q, b) in buf.iter_mut().enumerate() {
            let v = x1[at + q].to_f64();
            *b = match (ctx.op, x2) {
                ("DeepNorm", Some(g)) => v * alpha + g[at + q].to_f64(),
                (_, Some(g)) => v + g[at + q].to_f64(),
                _ => v,
            };
            if let Some((bv, per_row)) = &bias {
                *b += bv[if *per_row { q } else { at + q }];
            }
        }
        let n = row as f64;
        let (mean, var) = if ctx.op == "RmsNorm" {
            (0.0, buf.iter().map(|v| v * v).sum::<f64>() / n)
        } else {
            let m = buf.iter().sum::<f64>() / n;
            (m, buf.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n)
        };
        let rstd = 1.0 / (var + eps).sqrt();
        (means[r], rstds[r]) = (mean, rstd);
        for (q, &v) in buf.iter().enumerate() {
            let g = gamma.as_ref().map_or(1.0, |g| g[q]);
            let b = beta.as_ref().map_or(0.0, |b| b[q]);
            y[at + q] = T::from_f64((v - mean) * rstd * g + b);
        }
        if let Some(s) = sum.as_deref_mut() {
            for (d, &v) in s[at..at + row].iter_mut().zip(&buf) {
                *d = T::from_f64(v);
            }
        }
    }
    match ctx.op {
        "RmsNorm" => write_f64s(&mut outputs[1], &rstds),
        "DeepNorm" => {
            write_f64s(&mut outputs[0], &means)?;
            write_f64s(&mut outputs[1], &rstds)
        }
        _ => {
            write_f64s(&mut outputs[1], &means)?;
            write_f64s(&mut outputs[2], &rstds)
        }
    }
}

/// Outputs `a` and, if given, `b` (`a < b`) as slices of `T`, borrowed together.
fn split_two<'o, T: Scalar>(
    outputs: &'o mut [TensorMut],
    a: usize,
    b: Option<usize>,
) -> Result<(&'o mut [T], Option<&'o mut [T]>), OpError> {
    match b {
        None => Ok((outputs[a].slice_mut::<T>()?, None)),
        Some(b) => {
            let (lo, hi) = outputs.split_at_mut(b);
            Ok((lo[a].slice_mut::<T>()?, Some(hi[0].slice_mut::<T>()?)))
        }
    }
}

// ---------------------------------------------------------------------------------------
// The one-output ops: GroupNormRelu, MVN, MVNV2, Normalize, L2Normalize, Renorm, BNInfer

/// The input count each one-output op takes, and the rank it needs at least.
fn same_arity(op: &str) -> (usize, usize, usize) {
    match op {
        "GroupNormRelu" => (3, 3, 2),
        "MVN" => (1, 1, 4),
        "Normalize" => (2, 2, 2),
        "BNInfer" => (5, 5, 2),
        _ => (1, 1, 0),
    }
}

/// The attributes the op requires, checked at inference.
fn check_attrs(ctx: &InferCtx, rank: Option<usize>) -> Result<(), OpError> {
    match ctx.op {
        "GroupNormRelu" if required_int(ctx, "num_groups")? < 1 => {
            return Err(ctx.attr_error("num_groups", "must be positive"));
        }
        "Renorm" => {
            if required_float(ctx, "p")? < 0.0 {
                return Err(ctx.attr_error("p", "must not be negative"));
            }
            required_float(ctx, "maxnorm")?;
            let dim = required_int(ctx, "dim")?;
            if let Some(r) = rank {
                ctx.axis(dim, r, "dim")?;
            }
        }
        "BNInfer" => {
            required_float(ctx, "epsilon")?;
        }
        "MVNV2" => {
            if let Some(r) = rank {
                axes_mask(
                    ctx,
                    "axes",
                    ctx.attr_ints("axes")?.unwrap_or(&[0, 2, 3]),
                    r,
                    true,
                )?;
            }
        }
        "L2Normalize" => {
            if let Some(r) = rank {
                axes_mask(
                    ctx,
                    "axis",
                    ctx.attr_ints("axis")?.unwrap_or_default(),
                    r,
                    true,
                )?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn infer_same(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let (min, max, min_rank) = same_arity(ctx.op);
    ctx.arity(min, max)?;
    let x = &ctx.inputs[0];
    if !is_float(x.dtype) {
        return Err(unsupported(ctx, 0, x.dtype));
    }
    let rank = x.shape.as_ref().map(Vec::len);
    if let Some(r) = rank
        && (r < min_rank || (ctx.op == "MVN" && r != 4))
    {
        return Err(ctx.input_error(
            0,
            format!("has rank {r}; {} takes {min_rank}-D NCHW", ctx.op),
        ));
    }
    check_attrs(ctx, rank)?;
    if ctx.op == "GroupNormRelu"
        && let Some(s) = &x.shape
        && s[1] != UNKNOWN
        && s[1] % required_int(ctx, "num_groups")? != 0
    {
        return Err(ctx.attr_error("num_groups", format!("does not divide C = {}", s[1])));
    }
    Ok(vec![x.clone()])
}

fn same(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    check_attrs(ctx, Some(inputs[0].rank()))?;
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16] =>
        same_typed::<T>(ctx, inputs, outputs[0].slice_mut::<T>()?),
        other => Err(unsupported(ctx, 0, other)))
}

fn same_typed<T: Scalar>(ctx: &InferCtx, inputs: &[TensorRef], y: &mut [T]) -> Result<(), OpError> {
    let x = &inputs[0];
    let (xs, shape) = (x.slice::<T>()?, x.shape);
    let rank = x.rank();
    let mask: Vec<bool> = match ctx.op {
        "GroupNormRelu" => return group_norm_relu(ctx, inputs, xs, y),
        "Normalize" => return normalize(ctx, inputs, xs, y),
        "BNInfer" => return bn_infer(ctx, inputs, xs, y),
        "MVN" if ctx.attr_bool("across_channels", false)? => (0..rank).map(|d| d > 0).collect(),
        "MVN" => (0..rank).map(|d| d > 1).collect(),
        "MVNV2" => axes_mask(
            ctx,
            "axes",
            ctx.attr_ints("axes")?.unwrap_or(&[0, 2, 3]),
            rank,
            true,
        )?,
        "L2Normalize" => axes_mask(
            ctx,
            "axis",
            ctx.attr_ints("axis")?.unwrap_or_default(),
            rank,
            true,
        )?,
        // Renorm: every dim but `dim` is reduced.
        _ => {
            let dim = ctx.axis(required_int(ctx, "dim")?, rank, "dim")?;
            (0..rank).map(|d| d != dim).collect()
        }
    };
    let g = group_strides(shape, &mask);
    if matches!(ctx.op, "MVN" | "MVNV2") {
        let (mean, ssd, n) = moments(xs, shape, &mask);
        let eps = f64::from(ctx.attr_float("eps", 1e-9)?);
        let scale = ctx.op == "MVNV2" || ctx.attr_bool("normalize_variance", true)?;
        let div: Vec<f64> = ssd
            .iter()
            .map(|s| {
                if scale {
                    (s / n as f64).sqrt() + eps
                } else {
                    1.0
                }
            })
            .collect();
        walk(shape, [&g], |i, [o]| {
            y[i] = T::from_f64((xs[i].to_f64() - mean[o]) / div[o])
        });
        return Ok(());
    }
    let groups: usize = shape
        .iter()
        .zip(&mask)
        .filter(|(_, m)| !**m)
        .map(|(d, _)| d)
        .product();
    let mut acc = vec![0.0f64; groups];
    let factor: Vec<f64> = if ctx.op == "L2Normalize" {
        walk(shape, [&g], |i, [o]| {
            acc[o] += xs[i].to_f64() * xs[i].to_f64()
        });
        let eps = f64::from(ctx.attr_float("eps", 1e-4)?);
        acc.iter().map(|s| 1.0 / s.max(eps).sqrt()).collect()
    } else {
        let p = f64::from(required_float(ctx, "p")?);
        let maxnorm = f64::from(required_float(ctx, "maxnorm")?);
        walk(shape, [&g], |i, [o]| {
            let a = xs[i].to_f64().abs();
            acc[o] = match p {
                0.0 => acc[o] + f64::from(u8::from(a != 0.0)),
                p if p.is_infinite() => acc[o].max(a),
                p => acc[o] + a.powf(p),
            };
        });
        acc.iter()
            .map(|&s| {
                let norm = if p == 0.0 || p.is_infinite() {
                    s
                } else {
                    s.powf(1.0 / p)
                };
                if norm > maxnorm {
                    maxnorm / (norm + 1e-7)
                } else {
                    1.0
                }
            })
            .collect()
    };
    walk(shape, [&g], |i, [o]| {
        y[i] = T::from_f64(xs[i].to_f64() * factor[o])
    });
    Ok(())
}

/// GroupNormRelu: x `[N, C, ...]`, each image's channels in `num_groups` contiguous runs.
fn group_norm_relu<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    xs: &[T],
    y: &mut [T],
) -> Result<(), OpError> {
    let shape = inputs[0].shape;
    let c = shape[1];
    let groups = required_int(ctx, "num_groups")? as usize;
    if !c.is_multiple_of(groups) {
        return Err(ctx.attr_error("num_groups", format!("does not divide C = {c}")));
    }
    let plane: usize = shape[2..].iter().product();
    let (gamma, beta) = (params_n(ctx, inputs, 1, c)?, params_n(ctx, inputs, 2, c)?);
    let eps = f64::from(ctx.attr_float("eps", 1e-5)?);
    let len = c / groups * plane;
    if len == 0 {
        return Ok(());
    }
    for (k, (xg, yg)) in xs.chunks(len).zip(y.chunks_mut(len)).enumerate() {
        let n = len as f64;
        let m = xg.iter().map(|v| v.to_f64()).sum::<f64>() / n;
        let var = xg.iter().map(|v| (v.to_f64() - m).powi(2)).sum::<f64>() / n;
        let inv = 1.0 / (var + eps).sqrt();
        let first = (k % groups) * (c / groups);
        for (j, (d, v)) in yg.iter_mut().zip(xg).enumerate() {
            let ch = first + j / plane.max(1);
            *d = T::from_f64(((v.to_f64() - m) * inv * gamma[ch] + beta[ch]).max(0.0));
        }
    }
    Ok(())
}

/// Normalize (Caffe SSD): x NCHW, sums of squares per image or per image and position.
fn normalize<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    xs: &[T],
    y: &mut [T],
) -> Result<(), OpError> {
    let shape = inputs[0].shape;
    let c = shape[1];
    let scale = params(ctx, inputs, 1)?;
    let shared = ctx.attr_bool("channel_shared", true)?;
    if scale.len() != if shared { 1 } else { c } {
        return Err(ctx.input_error(
            1,
            format!(
                "has {} values; channel_shared {shared} takes {}",
                scale.len(),
                if shared { 1 } else { c }
            ),
        ));
    }
    let eps = f64::from(ctx.attr_float("eps", 1e-10)?);
    let across = ctx.attr_bool("across_spatial", true)?;
    let mask: Vec<bool> = (0..shape.len())
        .map(|d| d > 0 && (across || d == 1))
        .collect();
    let g = group_strides(shape, &mask);
    let mut ch = vec![0; shape.len()];
    ch[1] = usize::from(!shared);
    let groups: usize = shape
        .iter()
        .zip(&mask)
        .filter(|(_, m)| !**m)
        .map(|(d, _)| d)
        .product();
    let mut ss = vec![0.0f64; groups];
    walk(shape, [&g], |i, [o]| {
        ss[o] += xs[i].to_f64() * xs[i].to_f64()
    });
    let inv: Vec<f64> = ss.iter().map(|s| 1.0 / (s + eps).sqrt()).collect();
    walk(shape, [&g, &ch], |i, [o, k]| {
        y[i] = T::from_f64(xs[i].to_f64() * inv[o] * scale[k])
    });
    Ok(())
}

/// BNInfer: per channel of dim 1, or of the last dim for an NHWC origin format.
fn bn_infer<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    xs: &[T],
    y: &mut [T],
) -> Result<(), OpError> {
    let shape = inputs[0].shape;
    let nhwc = input_format(ctx, 0) == Some(crate::formats::Format::Nhwc);
    let c_dim = if nhwc { shape.len() - 1 } else { 1 };
    let c = shape[c_dim];
    let [scale, offset, mean, var] = [1, 2, 3, 4].map(|i| params_n(ctx, inputs, i, c));
    let (scale, offset, mean, var) = (scale?, offset?, mean?, var?);
    let eps = f64::from(required_float(ctx, "epsilon")?);
    let a: Vec<f64> = (0..c).map(|k| scale[k] / (var[k] + eps).sqrt()).collect();
    let b: Vec<f64> = (0..c).map(|k| offset[k] - mean[k] * a[k]).collect();
    let mut ch = vec![0; shape.len()];
    ch[c_dim] = 1;
    walk(shape, [&ch], |i, [k]| {
        y[i] = T::from_f64(xs[i].to_f64() * a[k] + b[k])
    });
    Ok(())
}

#[cfg(test)]
mod tests;
