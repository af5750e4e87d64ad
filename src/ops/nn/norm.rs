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
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// Elements below which groups run on the calling thread.
const PARALLEL_ELEMS: usize = 1 << 14;

fn unsupported(ctx: &InferCtx, d: crate::ops::DType) -> OpError {
    ctx.compute_error(format!("computes float types, not {d}"))
}

/// Mean and population variance of `xs`.
fn moments<T: Scalar>(xs: &[T]) -> (f64, f64) {
    let n = xs.len().max(1) as f64;
    let mean = xs.iter().map(|v| v.to_f64()).sum::<f64>() / n;
    let var = xs
        .iter()
        .map(|v| {
            let d = v.to_f64() - mean;
            d * d
        })
        .sum::<f64>()
        / n;
    (mean, var)
}

/// `out = x * a + b` over one group.
pub(crate) fn rescale<T: Scalar>(xs: &[T], out: &mut [T], a: f64, b: f64) {
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
        // GE's LayerNorm (`ge::norm`) gives the variance where ONNX gives InvStdDev.
        let third: Vec<f64> = if ctx.op == "LayerNorm" {
            stats.iter().map(|s| s.1).collect()
        } else {
            stats.iter().map(|s| inv(s.1)).collect()
        };
        write_f64s(out, &third)?;
    }
    Ok(())
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
    use crate::ops::testing::run_f32s;

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
