//! Normalizations by a norm or a statistic of a group of elements: RMSNormalization (the
//! root mean square over the trailing dims from `axis`), LpNormalization (the L1 or L2
//! norm along one axis) and GroupNormalization (mean and variance per group of channels).
//! Shape and dtype inference and CPU compute.
//!
//! Statistics are computed in f32 (f64 for float64) whatever `stash_type` names, which is
//! at least as precise as what it asks; each output element is rounded once. Rows are
//! independent, so large inputs split across threads by rows.

use half::{bf16, f16};
use rayon::prelude::*;

use super::operands::{broadcast_offsets, check_float_type, not_float};
use super::real::{Acc, Real, min_chunks};
use crate::dispatch;
use crate::ops::tensor::{TensorMut, TensorRef};
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, meta};

/// Registers the norms.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new("RMSNormalization", infer_rms).computes(compute_rms));
    reg.add(OpSpec::new("LpNormalization", infer_lp).computes(compute_lp));
    reg.add(OpSpec::new("GroupNormalization", infer_group).computes(compute_group));
}

/// RMSNormalization: Y has X's shape and the scale's type.
fn infer_rms(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    check_float_type(ctx, "stash_type", 1)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape {
        ctx.axis(ctx.attr_int("axis", -1)?, s.len(), "axis")?;
    }
    Ok(meta(ctx.inputs[1].dtype, x.shape.clone()))
}

fn compute_rms(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f16, bf16, f64] => rms::<T>(ctx, inputs, outputs),
        other => Err(not_float(ctx, 0, other)))
}

/// y = x / sqrt(mean(x^2) + epsilon) * scale over each row of the dims from `axis` on.
fn rms<T: Real>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (xt, st) = (&inputs[0], &inputs[1]);
    if st.dtype != T::DTYPE {
        return Err(ctx.input_error(1, format!("scale is {}, X is {}", st.dtype, T::DTYPE)));
    }
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, xt.rank(), "axis")?;
    let eps = T::Acc::from_f64(ctx.attr_float("epsilon", 1e-5)? as f64);
    let inner: usize = xt.shape[axis..].iter().product();
    // The scale broadcasts over X; split its offsets into a row part and a column part.
    let bad = || {
        ctx.input_error(
            1,
            format!("scale {:?} does not broadcast to {:?}", st.shape, xt.shape),
        )
    };
    let cols =
        broadcast_offsets(tail(st.shape, xt.rank() - axis), &xt.shape[axis..]).ok_or_else(bad)?;
    let rows = row_offsets(st.shape, xt.shape, axis).ok_or_else(bad)?;
    let (x, scale) = (xt.slice::<T>()?, st.slice::<T>()?);
    let y = outputs[0].slice_mut::<T>()?;
    if inner == 0 {
        return Ok(());
    }
    let mean_of = T::Acc::from_f64(1.0 / inner as f64);
    y.par_chunks_mut(inner)
        .zip(x.par_chunks(inner))
        .enumerate()
        .with_min_len(min_chunks(inner))
        .for_each(|(r, (y, x))| {
            let ss = x
                .iter()
                .fold(T::Acc::ZERO, |s, &v| s + v.widen() * v.widen());
            let inv = T::Acc::ONE / (ss * mean_of + eps).sqrt();
            let base = rows[r];
            for ((o, &v), &c) in y.iter_mut().zip(x).zip(&cols) {
                *o = T::narrow(v.widen() * inv * scale[base + c].widen());
            }
        });
    Ok(())
}

/// The last `n` dims of `shape` (all of it when shorter).
fn tail(shape: &[usize], n: usize) -> &[usize] {
    &shape[shape.len().saturating_sub(n)..]
}

/// Offsets of each row (the dims before `axis`) into a tensor of `shape` broadcast to
/// `dims`, where the row part of `shape` is what lies before its last `rank - axis` dims.
fn row_offsets(shape: &[usize], dims: &[usize], axis: usize) -> Option<Vec<usize>> {
    let inner_rank = dims.len() - axis;
    let k = shape.len().saturating_sub(inner_rank);
    let inner: usize = tail(shape, inner_rank).iter().product();
    let lead = broadcast_offsets(&shape[..k], &dims[..axis])?;
    Some(lead.into_iter().map(|o| o * inner).collect())
}

fn infer_lp(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let p = ctx.attr_int("p", 2)?;
    if p != 1 && p != 2 {
        return Err(ctx.attr_error("p", format!("{p} is not 1 or 2")));
    }
    if let Some(s) = &ctx.inputs[0].shape {
        ctx.axis(ctx.attr_int("axis", -1)?, s.len(), "axis")?;
    }
    Ok(vec![ctx.inputs[0].clone()])
}

fn compute_lp(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f16, bf16, f64] => lp::<T>(ctx, inputs, outputs),
        other => Err(not_float(ctx, 0, other)))
}

/// y = x / ||x||_p along `axis` (0 where the norm is 0, as the reference does).
fn lp<T: Real>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let xt = &inputs[0];
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, xt.rank(), "axis")?;
    let p = ctx.attr_int("p", 2)?;
    let (len, inner) = (
        xt.shape[axis],
        xt.shape[axis + 1..].iter().product::<usize>(),
    );
    let x = xt.slice::<T>()?;
    let y = outputs[0].slice_mut::<T>()?;
    let block = len * inner;
    if block == 0 {
        return Ok(());
    }
    // One block is [len, inner]: each of its `inner` columns is normalized along `len`.
    y.par_chunks_mut(block)
        .zip(x.par_chunks(block))
        .with_min_len(min_chunks(block))
        .for_each(|(y, x)| {
            for d in 0..inner {
                let norm = (0..len).fold(T::Acc::ZERO, |s, k| {
                    let v = x[k * inner + d].widen();
                    s + if p == 1 { v.abs() } else { v * v }
                });
                let norm = if p == 1 { norm } else { norm.sqrt() };
                for k in 0..len {
                    let v = x[k * inner + d].widen();
                    y[k * inner + d] = T::narrow(if norm == T::Acc::ZERO {
                        T::Acc::ZERO
                    } else {
                        v / norm
                    });
                }
            }
        });
    Ok(())
}

fn infer_group(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    check_float_type(ctx, "stash_type", 1)?;
    let groups = ctx.attr_int("num_groups", 0)?;
    if groups < 1 {
        return Err(ctx.attr_error("num_groups", "is required and positive"));
    }
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape {
        if s.len() < 2 {
            return Err(ctx.input_error(0, format!("is {s:?}; needs [N, C, ...]")));
        }
        if s[1] >= 0 && s[1] % groups != 0 {
            return Err(ctx.attr_error(
                "num_groups",
                format!("{groups} does not divide {} channels", s[1]),
            ));
        }
    }
    Ok(vec![x.clone()])
}

fn compute_group(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f16, bf16, f64] => group::<T>(ctx, inputs, outputs),
        other => Err(not_float(ctx, 0, other)))
}

/// `y = (x - mean) / sqrt(var + epsilon) * scale[c] + bias[c]`, the statistics per batch
/// item and group of channels. Scale and bias are per channel (opset 21) or, as opset 18
/// had them, per group.
fn group<T: Real>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let xt = &inputs[0];
    if xt.rank() < 2 {
        return Err(ctx.input_error(0, format!("is {:?}; needs [N, C, ...]", xt.shape)));
    }
    let groups = usize::try_from(ctx.attr_int("num_groups", 0)?).unwrap_or(0);
    let c = xt.shape[1];
    if groups == 0 || !c.is_multiple_of(groups) {
        return Err(ctx.attr_error(
            "num_groups",
            format!("{groups} does not divide {c} channels"),
        ));
    }
    let eps = T::Acc::from_f64(ctx.attr_float("epsilon", 1e-5)? as f64);
    let spatial: usize = xt.shape[2..].iter().product();
    let per_group = c / groups;
    let mut params = [&[][..]; 2];
    for (i, p) in params.iter_mut().enumerate() {
        let t = &inputs[i + 1];
        if t.dtype != T::DTYPE || (t.len() != c && t.len() != groups) {
            return Err(ctx.input_error(
                i + 1,
                format!("is {} {:?}; expected {} [{c}]", t.dtype, t.shape, T::DTYPE),
            ));
        }
        *p = t.slice::<T>()?;
    }
    let [scale, bias] = params;
    // Channel `ch`'s parameter, per channel or per group.
    let at = |p: &[T], ch: usize| {
        if p.len() == c {
            p[ch]
        } else {
            p[ch / per_group]
        }
        .widen()
    };
    let x = xt.slice::<T>()?;
    let y = outputs[0].slice_mut::<T>()?;
    let block = per_group * spatial;
    if block == 0 {
        return Ok(());
    }
    let inv_n = T::Acc::from_f64(1.0 / block as f64);
    y.par_chunks_mut(block)
        .zip(x.par_chunks(block))
        .enumerate()
        .with_min_len(min_chunks(block))
        .for_each(|(k, (y, x))| {
            // Two passes (mean, then the squared deviations) rather than E[x^2] - E[x]^2,
            // which cancels badly when the mean is large.
            let mean = x.iter().fold(T::Acc::ZERO, |s, &v| s + v.widen()) * inv_n;
            let var = x.iter().fold(T::Acc::ZERO, |s, &v| {
                let d = v.widen() - mean;
                s + d * d
            }) * inv_n;
            let inv = T::Acc::ONE / (var + eps).sqrt();
            let first = (k % groups) * per_group;
            for (j, (o, xs)) in y
                .chunks_mut(spatial.max(1))
                .zip(x.chunks(spatial.max(1)))
                .enumerate()
            {
                let (sc, bi) = (at(scale, first + j), at(bias, first + j));
                for (o, &v) in o.iter_mut().zip(xs) {
                    *o = T::narrow((v.widen() - mean) * inv * sc + bi);
                }
            }
        });
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run_f32;

    use crate::ops::assert_close as close;

    #[test]
    fn broadcast_offsets_repeat_along_dims_of_one() {
        assert_eq!(
            crate::ops::linalg::broadcast_offsets(&[3], &[2, 3]),
            Some(vec![0, 1, 2, 0, 1, 2])
        );
        assert_eq!(
            crate::ops::linalg::broadcast_offsets(&[2, 1], &[2, 3]),
            Some(vec![0, 0, 0, 1, 1, 1])
        );
        assert_eq!(crate::ops::linalg::broadcast_offsets(&[4], &[2, 3]), None);
    }

    #[test]
    fn rms_normalizes_rows() {
        // Rows [3, 4] (mean square 12.5) and [1, 1] (mean square 1), epsilon 0.
        let x = Tensor::from_vec(&[2, 2], &[3.0f32, 4.0, 1.0, 1.0]);
        let s = Tensor::from_vec(&[2], &[1.0f32, 2.0]);
        let r = 12.5f32.sqrt();
        let eps0 = ("epsilon", Attr::Float(0.0));
        close(
            &run_f32(
                "RMSNormalization",
                std::slice::from_ref(&eps0),
                &[x.clone(), s],
            ),
            &[3.0 / r, 8.0 / r, 1.0, 2.0],
        );
        // axis 0 normalizes over everything: mean square 27 / 4; a [2, 1] scale
        // broadcasts along the columns.
        let s = Tensor::from_vec(&[2, 1], &[1.0f32, 10.0]);
        let r = 6.75f32.sqrt();
        close(
            &run_f32("RMSNormalization", &[("axis", Attr::Int(0)), eps0], &[x, s]),
            &[3.0 / r, 4.0 / r, 10.0 / r, 10.0 / r],
        );
    }

    #[test]
    fn lp_norms_along_an_axis() {
        let x = Tensor::from_vec(&[2, 2], &[3.0f32, 1.0, 4.0, -1.0]);
        close(
            &run_f32(
                "LpNormalization",
                &[("axis", Attr::Int(0))],
                std::slice::from_ref(&x),
            ),
            &[0.6, 0.5f32.sqrt(), 0.8, -(0.5f32.sqrt())],
        );
        close(
            &run_f32("LpNormalization", &[("p", Attr::Int(1))], &[x]),
            &[0.75, 0.25, 0.8, -0.2],
        );
        let z = Tensor::from_vec(&[2], &[0.0f32, 0.0]);
        close(&run_f32("LpNormalization", &[], &[z]), &[0.0, 0.0]);
    }

    #[test]
    fn group_norm_per_group_of_channels() {
        // N=1, C=2, one element per channel, one group: mean 2, var 1.
        let x = Tensor::from_vec(&[1, 2, 1], &[1.0f32, 3.0]);
        let scale = Tensor::from_vec(&[2], &[1.0f32, 2.0]);
        let bias = Tensor::from_vec(&[2], &[0.0f32, 10.0]);
        let attrs = [("num_groups", Attr::Int(1)), ("epsilon", Attr::Float(0.0))];
        close(
            &run_f32(
                "GroupNormalization",
                &attrs,
                &[x.clone(), scale.clone(), bias.clone()],
            ),
            &[-1.0, 12.0],
        );
        // Two groups of one channel each: every value is its group's mean.
        let attrs = [("num_groups", Attr::Int(2)), ("epsilon", Attr::Float(1.0))];
        close(
            &run_f32("GroupNormalization", &attrs, &[x, scale, bias]),
            &[0.0, 10.0],
        );
    }
}
