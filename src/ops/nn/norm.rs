//! Normalizations: BatchNormalization (inference, and the training form's batch
//! statistics), LayerNormalization, InstanceNormalization and LRN.
//!
//! Each reduces over a set of dims and rescales: the tensor is viewed as contiguous
//! groups (a channel plane, a normalized row), statistics are taken per group in f64 in
//! two passes (mean, then squared deviations, which stays accurate where `E[x^2] - m^2`
//! cancels), and the rescale is one fused multiply-add per element.

use rayon::prelude::*;

use super::scalar::{Scalar, read_f64s, write_f64s};
use crate::dispatch;
use crate::ops::DType;
use crate::ops::linalg::min_chunks;
use crate::ops::simd::{lane_fold, per_isa};
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// Elements below which groups run on the calling thread.
const PARALLEL_ELEMS: usize = 1 << 14;

fn unsupported(ctx: &InferCtx, d: crate::ops::DType) -> OpError {
    ctx.compute_error(format!("computes float types, not {d}"))
}

per_isa! {
    /// Mean and population variance of `xs`, in f64, each a [`lane_sum`]: the plain sums
    /// were one chain of dependent f64 additions, 4 cycles an element twice over (an
    /// InstanceNormalization over 64 planes of 56 x 56 took 420 us, 6x ONNX Runtime).
    fn moments<T>(xs: &[T]) -> (f64, f64) where [T: Scalar] => moments_any
}

#[inline(always)]
fn moments_any<T: Scalar>(xs: &[T]) -> (f64, f64) {
    let n = xs.len().max(1) as f64;
    let mean = lane_sum(xs, |v| v.to_f64()) / n;
    let var = lane_sum(xs, |v| {
        let d = v.to_f64() - mean;
        d * d
    }) / n;
    (mean, var)
}

per_isa! {
    /// `out = x * a + b` over one group, in f64, in the widest vectors this CPU has.
    pub(crate) fn rescale<T>(xs: &[T], out: &mut [T], a: f64, b: f64)
        where [T: Scalar] => rescale_any
}

#[inline(always)]
fn rescale_any<T: Scalar>(xs: &[T], out: &mut [T], a: f64, b: f64) {
    for (o, v) in out.iter_mut().zip(xs) {
        *o = T::from_f64(v.to_f64() * a + b);
    }
}

/// Runs `f(group index, input group, output group)` over equal contiguous groups.
pub(crate) fn groups<T: Scalar, F>(xs: &[T], out: &mut [T], len: usize, f: F)
where
    F: Fn(usize, &[T], &mut [T]) + Sync,
{
    if len == 0 {
        return;
    }
    if xs.len() >= PARALLEL_ELEMS {
        out.par_chunks_mut(len)
            .zip(xs.par_chunks(len))
            .enumerate()
            .for_each(|(i, (o, x))| f(i, x, o));
    } else {
        for (i, (o, x)) in out.chunks_mut(len).zip(xs.chunks(len)).enumerate() {
            f(i, x, o);
        }
    }
}

/// The `[C]` parameter at input `i`, checked.
fn per_channel(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    i: usize,
    c: usize,
) -> Result<Vec<f64>, OpError> {
    let v = read_f64s(&inputs[i]).map_err(|_| ctx.input_error(i, "expected a float type"))?;
    if v.len() != c {
        return Err(ctx.input_error(i, format!("has {} values for {c} channels", v.len())));
    }
    Ok(v)
}

/// BatchNormalization. Inference: `(x - mean) / sqrt(var + eps) * scale + bias` with the
/// given statistics. `training_mode`: the batch's own mean and (population) variance
/// normalize, and outputs 1 and 2 are the running statistics updated with `momentum`.
pub fn batch_norm(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16]
        => batch_norm_typed::<T>(ctx, inputs, outputs),
        other => Err(unsupported(ctx, other)))
}

fn batch_norm_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    if x.rank() < 2 || inputs.len() < 5 {
        return Err(ctx.input_error(0, "needs X [N, C, ...], scale, B, mean and var"));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let plane: usize = x.shape[2..].iter().product();
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let [scale, bias, mut mean, mut var] = [1, 2, 3, 4].map(|i| per_channel(ctx, inputs, i, c));
    let (scale, bias) = (scale?, bias?);
    let xv = x.slice::<T>()?;
    let training = ctx.attr_int("training_mode", 0)? != 0 && outputs.len() >= 3;
    if training {
        let momentum = ctx.attr_float("momentum", 0.9)? as f64;
        let (run_mean, run_var) = (mean?, var?);
        let mut bm = vec![0.0; c];
        let mut bv = vec![0.0; c];
        for ch in 0..c {
            let count = (n * plane).max(1) as f64;
            let vals = (0..n).flat_map(|i| &xv[(i * c + ch) * plane..][..plane]);
            let m = vals.clone().map(|v| v.to_f64()).sum::<f64>() / count;
            let v = vals.map(|v| (v.to_f64() - m).powi(2)).sum::<f64>() / count;
            (bm[ch], bv[ch]) = (m, v);
        }
        let upd = |run: &[f64], batch: &[f64]| -> Vec<f64> {
            run.iter()
                .zip(batch)
                .map(|(r, b)| r * momentum + b * (1.0 - momentum))
                .collect()
        };
        write_f64s(&mut outputs[1], &upd(&run_mean, &bm))?;
        write_f64s(&mut outputs[2], &upd(&run_var, &bv))?;
        (mean, var) = (Ok(bm), Ok(bv));
    }
    let (mean, var) = (mean?, var?);
    let y = outputs[0].slice_mut::<T>()?;
    groups(xv, y, plane, |i, xs, out| {
        let ch = i % c;
        let a = scale[ch] / (var[ch] + eps).sqrt();
        rescale(xs, out, a, bias[ch] - mean[ch] * a);
    });
    Ok(())
}

/// InstanceNormalization: each (image, channel) plane normalized by its own statistics,
/// then `scale[c]` and `B[c]`.
pub fn instance_norm(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16]
        => instance_norm_typed::<T>(ctx, inputs, outputs),
        other => Err(unsupported(ctx, other)))
}

fn instance_norm_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    if x.rank() < 2 || inputs.len() < 3 {
        return Err(ctx.input_error(0, "needs X [N, C, ...], scale and B"));
    }
    let c = x.shape[1];
    let plane: usize = x.shape[2..].iter().product();
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let (scale, bias) = (
        per_channel(ctx, inputs, 1, c)?,
        per_channel(ctx, inputs, 2, c)?,
    );
    let xv = x.slice::<T>()?;
    let y = outputs[0].slice_mut::<T>()?;
    groups(xv, y, plane, |i, xs, out| {
        let ch = i % c;
        let (m, v) = moments(xs);
        let a = scale[ch] / (v + eps).sqrt();
        rescale(xs, out, a, bias[ch] - m * a);
    });
    Ok(())
}

/// `values` of `from` dims broadcast (right-aligned, NumPy rules) to the `to` dims, as a
/// dense row-major vector.
fn broadcast_to(values: &[f64], from: &[usize], to: &[usize]) -> Option<Vec<f64>> {
    if from.len() > to.len() {
        return None;
    }
    let pad = to.len() - from.len();
    let mut strides = vec![0usize; to.len()];
    let mut s = 1;
    for i in (0..from.len()).rev() {
        let (f, t) = (from[i], to[pad + i]);
        if f != t && f != 1 {
            return None;
        }
        strides[pad + i] = if f == 1 { 0 } else { s };
        s *= f;
    }
    let total: usize = to.iter().product();
    Some(
        (0..total)
            .map(|mut i| {
                let mut at = 0;
                for d in (0..to.len()).rev() {
                    at += (i % to[d]) * strides[d];
                    i /= to[d];
                }
                values[at]
            })
            .collect(),
    )
}

/// LayerNormalization: each row of the dims from `axis` on is normalized, then scaled
/// and shifted by Scale and B (broadcast to those dims). Outputs 1 and 2, Mean and
/// InvStdDev, are the per-row statistics.
pub fn layer_norm(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16]
        => layer_norm_typed::<T>(ctx, inputs, outputs),
        other => Err(unsupported(ctx, other)))
}

fn layer_norm_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.rank(), "axis")?;
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let norm_dims = &x.shape[axis..];
    let row: usize = norm_dims.iter().product();
    // GE's LayerNorm (`ge::norm`) gives the variance where ONNX gives InvStdDev.
    let variance = ctx.op == "LayerNorm";
    if let Some(done) = layer_norm_f32(inputs, outputs, row, eps, variance) {
        return done;
    }
    let param = |i: usize| -> Result<Option<Vec<f64>>, OpError> {
        let Some(t) = inputs.get(i).filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        let v = read_f64s(t).map_err(|_| ctx.input_error(i, "expected a float type"))?;
        broadcast_to(&v, t.shape, norm_dims)
            .map(Some)
            .ok_or_else(|| {
                ctx.input_error(
                    i,
                    format!("{:?} does not broadcast to {norm_dims:?}", t.shape),
                )
            })
    };
    let scale = param(1)?.unwrap_or_else(|| vec![1.0; row]);
    let bias = param(2)?.unwrap_or_else(|| vec![0.0; row]);
    let xv = x.slice::<T>()?;
    let rows = xv.len().checked_div(row).unwrap_or(0);
    let mut stats = vec![(0.0f64, 0.0f64); rows];
    // (mean, population variance) per row.
    for (s, xs) in stats.iter_mut().zip(xv.chunks(row.max(1))) {
        *s = moments(xs);
    }
    let inv = |v: f64| 1.0 / (v + eps).sqrt();
    let y = outputs[0].slice_mut::<T>()?;
    groups(xv, y, row, |i, xs, out| {
        let (m, inv) = (stats[i].0, inv(stats[i].1));
        for (((o, v), a), b) in out.iter_mut().zip(xs).zip(&scale).zip(&bias) {
            *o = T::from_f64((v.to_f64() - m) * inv * a + b);
        }
    });
    if let Some(out) = outputs.get_mut(1) {
        write_f64s(out, &stats.iter().map(|s| s.0).collect::<Vec<_>>())?;
    }
    if let Some(out) = outputs.get_mut(2) {
        let third: Vec<f64> = if variance {
            stats.iter().map(|s| s.1).collect()
        } else {
            stats.iter().map(|s| inv(s.1)).collect()
        };
        write_f64s(out, &third)?;
    }
    Ok(())
}

/// LayerNormalization of float32 rows whose Scale (and B, if given) hold one value per
/// element of a row, and whose Mean and InvStdDev, if asked for, are float32: the form
/// every exported transformer has. `None`: not that form, the general path computes it.
///
/// Why a path of its own: the general one reads Scale and B into f64 vectors broadcast
/// element by element, and sums each row's moments in one f64 chain, a dependent add per
/// element; on an encoder at sequence 128 that took 2 ns per element, as long as ONNX
/// Runtime's LayerNorm with the residual Add fused in. Here the parameters are read in
/// place, nothing is allocated, and the moments (in f64, two passes as the general path
/// takes them) keep [`FOLD_LANES`](crate::ops::simd::FOLD_LANES) running sums, a fixed order the vectorizer spreads over any
/// width, so the bits do not depend on the CPU. The rescale is the general path's f64
/// formula.
fn layer_norm_f32(
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
    row: usize,
    eps: f64,
    variance: bool,
) -> Option<Result<(), OpError>> {
    fn f32s<'a>(t: &TensorRef<'a>) -> Option<&'a [f32]> {
        (t.dtype == DType::F32).then(|| t.slice::<f32>().ok())?
    }
    fn f32s_mut<'a>(t: &'a mut TensorMut) -> Option<&'a mut [f32]> {
        (t.dtype == DType::F32).then(|| t.slice_mut::<f32>().ok())?
    }
    let param = |i: usize| match inputs.get(i).filter(|t| !t.is_empty()) {
        None => Some(None),
        Some(t) => f32s(t).filter(|v| v.len() == row).map(Some),
    };
    let (Some(x), Some(Some(scale)), Some(bias)) = (f32s(&inputs[0]), param(1), param(2)) else {
        return None;
    };
    if row == 0 || x.len() % row != 0 {
        return None;
    }
    let rows = x.len() / row;
    // Y, and Mean and InvStdDev (one value per row) when the node has them.
    let (y, stats) = match outputs {
        [y] => (y, None),
        [y, mean, spread] => {
            let (mean, spread) = (f32s_mut(mean)?, f32s_mut(spread)?);
            if mean.len() != rows || spread.len() != rows {
                return None;
            }
            (y, Some((mean, spread)))
        }
        _ => return None,
    };
    let y = match y.slice_mut::<f32>() {
        Ok(y) => y,
        Err(e) => return Some(Err(e)),
    };
    let run = |x: &[f32], y: &mut [f32], stats: Option<(&mut [f32], &mut [f32])>| {
        let stats = stats.map(|(mean, spread)| RowStats {
            mean,
            spread,
            variance,
        });
        normalize_rows(x, y, scale, bias, eps, stats)
    };
    if x.len() >= PARALLEL_ELEMS && rows > 1 {
        let k = min_chunks(row);
        let (ys, xs) = (y.par_chunks_mut(k * row), x.par_chunks(k * row));
        match stats {
            Some((mean, spread)) => ys
                .zip(xs)
                .zip(mean.par_chunks_mut(k).zip(spread.par_chunks_mut(k)))
                .for_each(|((y, x), stats)| run(x, y, Some(stats))),
            None => ys.zip(xs).for_each(|(y, x)| run(x, y, None)),
        }
    } else {
        run(x, y, stats);
    }
    Some(Ok(()))
}

/// Where [`normalize_rows_any`] puts each row's statistics: its mean, and its
/// `1 / sqrt(var + eps)` (ONNX's InvStdDev) or, with `variance`, its variance (GE's
/// LayerNorm).
struct RowStats<'a> {
    mean: &'a mut [f32],
    spread: &'a mut [f32],
    variance: bool,
}

/// Rows whose moments [`normalize_rows_any`] computes side by side.
const ROW_BLOCK: usize = 8;

per_isa! {
    /// [`normalize_rows_any`] in the widest vectors this CPU has.
    fn normalize_rows(
        x: &[f32],
        y: &mut [f32],
        scale: &[f32],
        bias: Option<&[f32]>,
        eps: f64,
        stats: Option<RowStats>
    ) => normalize_rows_any
}

/// The sum of `f` over `x` in f64, in lanes ([`lane_fold`]).
#[inline(always)]
fn lane_sum<T: Copy>(x: &[T], f: impl Fn(T) -> f64) -> f64 {
    lane_fold(x, 0.0, |s, v| s + f(v), |total, s| total + s)
}

/// Each `scale.len()`-long row of `x` normalized into `y`: `(v - mean) / sqrt(var + eps)
/// * scale + bias`, in f64; each row's statistics into `stats`.
///
/// Rows go in blocks of [`ROW_BLOCK`]: the block's means, then its variances, then its
/// outputs. A row's moments are chains of dependent f64 additions (its lanes, then the
/// lanes in order, then the square root and the division), about 200 cycles of latency
/// for a 128-float row, which one row at a time left the vector units idle (a `[128,
/// 128]` LayerNorm took 20 us); a block's rows are independent chains the core runs side
/// by side. Each row's operations and their order are unchanged, so are the bits.
#[inline(always)]
fn normalize_rows_any(
    x: &[f32],
    y: &mut [f32],
    scale: &[f32],
    bias: Option<&[f32]>,
    eps: f64,
    mut stats: Option<RowStats>,
) {
    let len = scale.len();
    if len == 0 {
        return;
    }
    let rows = (x.len() / len).min(y.len() / len);
    for r0 in (0..rows).step_by(ROW_BLOCK) {
        let n = ROW_BLOCK.min(rows - r0);
        let row = |i: usize| &x[(r0 + i) * len..][..len];
        let mut mean = [0.0f64; ROW_BLOCK];
        let mut inv = [0.0f64; ROW_BLOCK];
        for (i, m) in mean[..n].iter_mut().enumerate() {
            *m = lane_sum(row(i), |v| v as f64) / len as f64;
        }
        for i in 0..n {
            let m = mean[i];
            let var = lane_sum(row(i), |v| {
                let d = v as f64 - m;
                d * d
            }) / len as f64;
            inv[i] = 1.0 / (var + eps).sqrt();
            if let Some(s) = &mut stats {
                s.mean[r0 + i] = m as f32;
                s.spread[r0 + i] = if s.variance { var } else { inv[i] } as f32;
            }
        }
        for i in 0..n {
            let (x, (mean, inv)) = (row(i), (mean[i], inv[i]));
            let y = &mut y[(r0 + i) * len..][..len];
            match bias {
                Some(bias) => {
                    for (((o, &v), &a), &b) in y.iter_mut().zip(x).zip(scale).zip(bias) {
                        *o = ((v as f64 - mean) * inv * a as f64 + b as f64) as f32;
                    }
                }
                None => {
                    for ((o, &v), &a) in y.iter_mut().zip(x).zip(scale) {
                        *o = ((v as f64 - mean) * inv * a as f64 + 0.0) as f32;
                    }
                }
            }
        }
    }
}

/// LRN: `x / (bias + alpha / size * sum of x^2 over nearby channels)^beta`, the channels
/// from `c - floor((size - 1) / 2)` to `c + ceil((size - 1) / 2)`. Sums are built a plane
/// at a time so the inner loop runs over contiguous spatial positions.
pub fn lrn(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16]
        => lrn_typed::<T>(ctx, inputs, outputs),
        other => Err(unsupported(ctx, other)))
}

fn lrn_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    if x.rank() < 2 {
        return Err(ctx.input_error(0, "needs X [N, C, ...]"));
    }
    let size = ctx.attr_int("size", 0)?;
    if size < 1 {
        return Err(ctx.attr_error("size", "must be positive"));
    }
    let size = size as usize;
    let alpha = ctx.attr_float("alpha", 1e-4)? as f64;
    let beta = ctx.attr_float("beta", 0.75)? as f64;
    let bias = ctx.attr_float("bias", 1.0)? as f64;
    let c = x.shape[1];
    let plane: usize = x.shape[2..].iter().product();
    // floor((size - 1) / 2) channels before, ceil((size - 1) / 2) = size / 2 after.
    let (before, after) = ((size - 1) / 2, size / 2);
    let xv = x.slice::<T>()?;
    let y = outputs[0].slice_mut::<T>()?;
    let mut sum = vec![0.0f64; plane];
    for (i, (out, xs)) in y
        .chunks_mut(plane.max(1))
        .zip(xv.chunks(plane.max(1)))
        .enumerate()
    {
        let (n, ch) = (i / c, i % c);
        sum.fill(0.0);
        let lo = ch.saturating_sub(before);
        let hi = (ch + after).min(c - 1);
        for other in lo..=hi {
            let src = &xv[(n * c + other) * plane..][..plane];
            for (s, v) in sum.iter_mut().zip(src) {
                let v = v.to_f64();
                *s += v * v;
            }
        }
        for ((o, v), s) in out.iter_mut().zip(xs).zip(&sum) {
            *o = T::from_f64(v.to_f64() / (bias + alpha / size as f64 * s).powf(beta));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::{run, run_f32s};

    fn v(shape: &[usize], x: &[f32]) -> Tensor {
        Tensor::from_vec(shape, x)
    }

    #[test]
    fn batch_norm_inference_and_training() {
        let x = v(&[2, 1, 2], &[1.0, 3.0, 5.0, 7.0]);
        let c = |x: f32| v(&[1], &[x]);
        let eps = ("epsilon", Attr::Float(0.0));
        // mean 2, var 4, scale 2, bias 1: (x - 2) / 2 * 2 + 1 = x - 1.
        let y = run_f32s(
            "BatchNormalization",
            std::slice::from_ref(&eps),
            &[x.clone(), c(2.0), c(1.0), c(2.0), c(4.0)],
            1,
        );
        assert_eq!(y[0], [0.0, 2.0, 4.0, 6.0]);
        // Training: batch mean 4, variance 5; running stats with momentum 0.5.
        let attrs = [
            eps,
            ("training_mode", Attr::Int(1)),
            ("momentum", Attr::Float(0.5)),
        ];
        let y = run_f32s(
            "BatchNormalization",
            &attrs,
            &[x, c(1.0), c(0.0), c(0.0), c(1.0)],
            3,
        );
        let s = 5f32.sqrt();
        assert!(
            y[0].iter()
                .zip([-3.0 / s, -1.0 / s, 1.0 / s, 3.0 / s])
                .all(|(a, b)| (a - b).abs() < 1e-6)
        );
        assert_eq!((y[1].clone(), y[2].clone()), (vec![2.0], vec![3.0]));
    }

    #[test]
    fn layer_and_instance_norm() {
        // Rows [1, 3] (mean 2, std 1) and [0, 4] (mean 2, std 2) both normalize to
        // [-1, 1]; scale [2, 1], bias [0, 1].
        let x = v(&[2, 2], &[1.0, 3.0, 0.0, 4.0]);
        let attrs = [("epsilon", Attr::Float(0.0))];
        let y = run_f32s(
            "LayerNormalization",
            &attrs,
            &[x, v(&[2], &[2.0, 1.0]), v(&[2], &[0.0, 1.0])],
            3,
        );
        assert_eq!(y[0], [-2.0, 2.0, -2.0, 2.0]);
        assert_eq!(y[1], [2.0, 2.0]);
        assert_eq!(y[2], [1.0, 0.5]);
        let x = v(&[1, 1, 2], &[1.0, 3.0]);
        let y = run_f32s(
            "InstanceNormalization",
            &attrs,
            &[x, v(&[1], &[3.0]), v(&[1], &[1.0])],
            1,
        );
        assert_eq!(y[0], [-2.0, 4.0]);
    }

    /// The float32 rows path against the general one (the same values in float64):
    /// rows shorter than and not a multiple of the running lanes, rows enough to split
    /// across threads, with and without B, with Y alone and with Mean and InvStdDev.
    #[test]
    fn float32_rows_give_the_general_paths_values() {
        let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        for (rows, len) in [(3usize, 5usize), (4, 37), (128, 256)] {
            let x: Vec<f32> = (0..rows * len)
                .map(|i| ((i * 7919) % 113) as f32 * 0.21 - 9.0 + (i / len) as f32)
                .collect();
            let scale: Vec<f32> = (0..len).map(|i| 0.5 + (i % 7) as f32 * 0.25).collect();
            let bias: Vec<f32> = (0..len).map(|i| (i % 5) as f32 - 2.0).collect();
            for with_bias in [true, false] {
                let mut ins = vec![v(&[rows, len], &x), v(&[len], &scale)];
                let mut ins64 = vec![
                    Tensor::from_vec(&[rows, len], &f64s(&x)),
                    Tensor::from_vec(&[len], &f64s(&scale)),
                ];
                if with_bias {
                    ins.push(v(&[len], &bias));
                    ins64.push(Tensor::from_vec(&[len], &f64s(&bias)));
                }
                let attrs = [("epsilon", Attr::Float(1e-5))];
                let general = run("LayerNormalization", &attrs, &ins64, 3);
                for outputs in [1, 3] {
                    let fast = run_f32s("LayerNormalization", &attrs, &ins, outputs);
                    for (k, got) in fast.iter().enumerate() {
                        // Y is float64 there; Mean and InvStdDev are float32 either way.
                        let want: Vec<f32> = match general[k].slice::<f64>() {
                            Ok(w) => w.iter().map(|&w| w as f32).collect(),
                            Err(_) => general[k].slice::<f32>().unwrap().to_vec(),
                        };
                        assert_eq!(got.len(), want.len());
                        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                            let ulps = (g.to_bits() as i64 - w.to_bits() as i64).unsigned_abs();
                            assert!(
                                ulps <= 1,
                                "[{rows}, {len}] bias {with_bias} output {k} [{i}]: {g} vs {w}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn lrn_sums_neighbouring_channels() {
        // size 2: channel c sums c-0 .. c+1. alpha = size so the factor is the sum itself.
        let x = v(&[1, 2, 1], &[1.0, 2.0]);
        let attrs = [
            ("size", Attr::Int(2)),
            ("alpha", Attr::Float(2.0)),
            ("beta", Attr::Float(1.0)),
            ("bias", Attr::Float(0.0)),
        ];
        let y = run_f32s("LRN", &attrs, &[x], 1);
        assert_eq!(y[0], [1.0 / 5.0, 2.0 / 4.0]);
    }
}
