//! GE's elementwise and per-channel float ops. Eltwise and Power compute here in float64
//! over chunks of stack memory that the compiler vectorizes (every float type converts
//! exactly, and each output is rounded once); Scale and BNInference fold to a per-channel `x * a + b` and run
//! BatchNormalization's kernel for it (in float64):
//!
//! - `Eltwise` (graphengine `elewise_calculation_ops.h`): dynamic input x (N tensors of
//!   one shape), `N` required, `mode` 1 (0 product, 1 sum, 2 max), `coeff` [] (one weight
//!   per input, for the sum only).
//! - `Power` (same file): `power` 1, `scale` 1, `shift` 0; y = (shift + scale * x)^power.
//! - `Scale` (graphengine `nn_norm_ops.h`, Caffe-born): x, scale, optional bias; `axis`
//!   1, `num_axes` 1, `scale_from_blob` true; scale and bias cover x's dims from `axis` on,
//!   as many as they have, and broadcast over the rest.
//! - `BNInference` (graphengine `nn_norm_ops.h`, ops-nn `bn_inference` proto): x, mean,
//!   variance, momentum, optional scale, optional offset; `epsilon` 1e-5,
//!   `use_global_stats` true, `mode` 1. Per channel (dim 1): without scale and offset,
//!   Caffe's BatchNorm with its moving-average factor in `momentum` (the statistics are
//!   divided by `momentum[0]`, 0 meaning 0); with both, `(x - mean) / sqrt(variance +
//!   epsilon) * scale + offset` and `momentum` unused (canndev's BnHost folding, as ops-nn's
//!   golden documents it); with one of them, the same with the other taken as 1 or 0.
//!   `mode` does not change the result (as on every product but Ascend 950's mode 0).

use rayon::prelude::*;

use super::attrs::given;
use crate::dispatch;
use crate::ops::nn::agree;
use crate::ops::nn::norm::{groups, rescale};
use crate::ops::nn::scalar::{Scalar, read_f64s};
use crate::ops::{InferCtx, OpError, TensorMeta, TensorMut, TensorRef, UNKNOWN, meta};

/// Elements each chunk of work converts and combines at once.
const CHUNK: usize = 4096;
/// Elements below which the chunks run on the calling thread.
const PARALLEL_ELEMS: usize = 1 << 14;

/// Runs `f(first element, output chunk)` over `y` in chunks of [`CHUNK`], in parallel
/// when `y` is large.
fn chunks<T: Send>(y: &mut [T], f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if y.len() >= PARALLEL_ELEMS {
        y.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, c)| f(i * CHUNK, c));
    } else {
        for (i, c) in y.chunks_mut(CHUNK).enumerate() {
            f(i * CHUNK, c);
        }
    }
}

/// `x`'s elements as f64, into `buf` (same length): exact for every float type, so an
/// f64 tensor loses nothing and the others are rounded once, by [`store`].
#[inline]
fn load<T: Scalar>(x: &[T], buf: &mut [f64]) {
    for (b, v) in buf.iter_mut().zip(x) {
        *b = v.to_f64();
    }
}

#[inline]
fn store<T: Scalar>(buf: &[f64], y: &mut [T]) {
    for (d, &v) in y.iter_mut().zip(buf) {
        *d = T::from_f64(v);
    }
}

/// The small float parameter tensor `i` (a scale, a mean), as f64.
fn params(ctx: &InferCtx, inputs: &[TensorRef], i: usize) -> Result<Vec<f64>, OpError> {
    read_f64s(&inputs[i])
        .map_err(|_| ctx.input_error(i, format!("is {}, expected a float type", inputs[i].dtype)))
}

/// Eltwise's mode.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Product,
    Sum,
    Max,
}

/// Eltwise's attributes for `n` inputs: the mode and the sum's coefficients.
fn eltwise_attrs(ctx: &InferCtx) -> Result<(Mode, Option<Vec<f32>>), OpError> {
    let n = ctx.inputs.len();
    match ctx.attrs.get("N") {
        None => return Err(ctx.attr_error("N", "is required and missing")),
        Some(_) if ctx.attr_int("N", 0)? != n as i64 => {
            return Err(ctx.attr_error(
                "N",
                format!("is {}, but the node has {n} inputs", ctx.attr_int("N", 0)?),
            ));
        }
        Some(_) => {}
    }
    let mode = match ctx.attr_int("mode", 1)? {
        0 => Mode::Product,
        1 => Mode::Sum,
        2 => Mode::Max,
        other => {
            return Err(ctx.attr_error(
                "mode",
                format!("{other} is not 0 (product), 1 (sum) or 2 (max)"),
            ));
        }
    };
    let coeff = ctx.attr_floats("coeff")?.filter(|c| !c.is_empty());
    if let Some(c) = &coeff {
        if mode != Mode::Sum {
            return Err(ctx.attr_error("coeff", "weights only the sum (mode 1)"));
        }
        if c.len() != n {
            return Err(ctx.attr_error("coeff", format!("has {} values for {n} inputs", c.len())));
        }
    }
    Ok((mode, coeff.map(|c| c.iter().map(|&v| v as f32).collect())))
}

/// Eltwise: every input has input 0's dtype and shape.
pub fn infer_eltwise(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, usize::MAX)?;
    eltwise_attrs(ctx)?;
    let first = &ctx.inputs[0];
    let mut shape = first.shape.clone();
    for (i, t) in ctx.inputs.iter().enumerate().skip(1) {
        if t.dtype != first.dtype {
            return Err(ctx.input_error(i, format!("is {}, input 0 is {}", t.dtype, first.dtype)));
        }
        shape = match (shape, &t.shape) {
            (Some(a), Some(b)) => {
                let merged: Option<Vec<i64>> = (a.len() == b.len())
                    .then(|| a.iter().zip(b).map(|(&p, &q)| agree(p, q)).collect())
                    .flatten();
                Some(merged.ok_or_else(|| {
                    ctx.input_error(
                        i,
                        format!("is {b:?}; Eltwise's inputs share one shape {a:?}"),
                    )
                })?)
            }
            (Some(a), None) => Some(a),
            (None, b) => b.clone(),
        };
    }
    Ok(meta(first.dtype, shape))
}

pub fn eltwise(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (mode, coeff) = eltwise_attrs(ctx)?;
    let len = outputs[0].len();
    if let Some(i) = inputs.iter().position(|t| t.len() != len) {
        return Err(ctx.input_error(
            i,
            format!("{:?} does not match the output", inputs[i].shape),
        ));
    }
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16] => {
        let xs: Vec<&[T]> = inputs.iter().map(|t| t.slice::<T>()).collect::<Result<_, _>>()?;
        eltwise_typed(&xs, mode, coeff.as_deref(), outputs[0].slice_mut::<T>()?);
        Ok(())
    }, other => Err(ctx.compute_error(format!("computes float types, not {other}"))))
}

fn eltwise_typed<T: Scalar + Send + Sync>(
    xs: &[&[T]],
    mode: Mode,
    coeff: Option<&[f32]>,
    y: &mut [T],
) {
    chunks(y, |at, out| {
        let n = out.len();
        // A chunk's accumulator and operand live on the stack (2 x 32 KiB): nothing is
        // allocated per launch or per chunk.
        let (mut acc, mut buf) = ([0f64; CHUNK], [0f64; CHUNK]);
        let (acc, buf) = (&mut acc[..n], &mut buf[..n]);
        load(&xs[0][at..at + n], acc);
        if let Some(c) = coeff {
            acc.iter_mut().for_each(|a| *a *= f64::from(c[0]));
        }
        for (k, x) in xs.iter().enumerate().skip(1) {
            load(&x[at..at + n], buf);
            match (mode, coeff) {
                (Mode::Product, _) => acc.iter_mut().zip(buf.iter()).for_each(|(a, b)| *a *= b),
                (Mode::Sum, None) => acc.iter_mut().zip(buf.iter()).for_each(|(a, b)| *a += b),
                (Mode::Sum, Some(c)) => {
                    let w = f64::from(c[k]);
                    acc.iter_mut()
                        .zip(buf.iter())
                        .for_each(|(a, b)| *a += b * w)
                }
                (Mode::Max, _) => acc
                    .iter_mut()
                    .zip(buf.iter())
                    .for_each(|(a, &b)| *a = a.max(b)),
            }
        }
        store(acc, out);
    });
}

/// Power: y = (shift + scale * x)^power.
pub fn power(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let p = ctx.attr_float("power", 1.0)?;
    let scale = ctx.attr_float("scale", 1.0)?;
    let shift = ctx.attr_float("shift", 0.0)?;
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16] => {
        let x = inputs[0].slice::<T>()?;
        chunks(outputs[0].slice_mut::<T>()?, |at, out| {
            let mut buf = [0f64; CHUNK];
            let buf = &mut buf[..out.len()];
            load(&x[at..at + out.len()], buf);
            for v in buf.iter_mut() {
                *v = (f64::from(shift) + f64::from(scale) * *v).powf(f64::from(p));
            }
            store(buf, out);
        });
        Ok(())
    }, other => Err(ctx.compute_error(format!("computes float types, not {other}"))))
}

/// `y[o, m, i] = x[o, m, i] * a[m] + b[m]` over input 0 viewed as [outer, a.len(), inner],
/// into output 0: BatchNormalization's per-group kernel, in f64.
fn run_affine(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
    inner: usize,
    a: &[f64],
    b: &[f64],
) -> Result<(), OpError> {
    let mid = a.len();
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16] => {
        let y = outputs[0].slice_mut::<T>()?;
        if mid > 0 {
            groups(inputs[0].slice::<T>()?, y, inner, |p, xs, out| {
                rescale(xs, out, a[p % mid], b[p % mid])
            });
        }
        Ok(())
    }, other => Err(ctx.compute_error(format!("computes float types, not {other}"))))
}

/// Scale's first covered axis of x (rank `rank`) and the dims scale covers.
fn scale_axes(ctx: &InferCtx, rank: usize, scale: &[i64]) -> Result<usize, OpError> {
    let axis = ctx.attr_int("axis", 1)?;
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a as usize + scale.len() > rank {
        return Err(ctx.attr_error(
            "axis",
            format!("{axis}: a scale of {scale:?} does not fit x's rank {rank} there"),
        ));
    }
    if ctx.attr_bool("scale_from_blob", true)? {
        let num_axes = ctx.attr_int("num_axes", 1)?;
        let want = if num_axes < 0 {
            rank as i64 - a
        } else {
            num_axes
        };
        let covered = scale.iter().filter(|&&d| d != 1).count() as i64;
        if scale.len() as i64 != want && covered > want {
            return Err(ctx.attr_error(
                "num_axes",
                format!("{num_axes}: scale {scale:?} covers more axes"),
            ));
        }
    }
    Ok(a as usize)
}

/// Scale: y like x.
pub fn infer_scale(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    let x = &ctx.inputs[0];
    if let (Some(xs), Some(s)) = (&x.shape, &ctx.inputs[1].shape) {
        let a = scale_axes(ctx, xs.len(), s)?;
        for (i, t) in ctx.inputs.iter().enumerate().skip(1) {
            if i == 2 && !given(ctx, 2) {
                continue;
            }
            if let Some(ts) = &t.shape
                && (ts.len() != s.len()
                    || ts
                        .iter()
                        .zip(&xs[a..])
                        .any(|(&d, &e)| d != UNKNOWN && e != UNKNOWN && d != e))
            {
                return Err(ctx.input_error(
                    i,
                    format!("is {ts:?}; it must match x {xs:?} from axis {a}"),
                ));
            }
        }
    }
    Ok(vec![x.clone()])
}

pub fn scale(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let s: Vec<i64> = inputs[1].shape.iter().map(|&d| d as i64).collect();
    let a = scale_axes(ctx, x.rank(), &s)?;
    let mid: usize = inputs[1].len();
    if x.shape[a..a + s.len()].iter().product::<usize>() != mid {
        return Err(ctx.input_error(1, format!("{:?} does not match x {:?}", s, x.shape)));
    }
    let inner: usize = x.shape[a + s.len()..].iter().product();
    let factors = params(ctx, inputs, 1)?;
    let offsets = if inputs.len() > 2 && !inputs[2].is_empty() {
        let b = params(ctx, inputs, 2)?;
        if b.len() != mid {
            return Err(ctx.input_error(2, format!("has {} values for {mid}", b.len())));
        }
        b
    } else {
        vec![0.0; mid]
    };
    run_affine(ctx, inputs, outputs, inner, &factors, &offsets)
}

/// BNInference: y like x; mean and variance are `[C]`.
pub fn infer_bn(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(4, 6)?;
    if !ctx.attr_bool("use_global_stats", true)? {
        return Err(ctx.attr_error(
            "use_global_stats",
            "is false; inference takes the given statistics only",
        ));
    }
    let x = &ctx.inputs[0];
    let channels = match &x.shape {
        Some(s) if s.len() < 2 => {
            return Err(ctx.input_error(0, format!("is {s:?}; BNInference needs [N, C, ...]")));
        }
        Some(s) => Some(s[1]),
        None => None,
    };
    for i in [1, 2, 4, 5] {
        if i >= ctx.inputs.len() || !given(ctx, i) {
            continue;
        }
        if let (Some(s), Some(c)) = (&ctx.inputs[i].shape, channels)
            && (s.iter().product::<i64>() != c && !s.contains(&UNKNOWN) && c != UNKNOWN)
        {
            return Err(ctx.input_error(i, format!("is {s:?}; expected {c} values")));
        }
    }
    Ok(vec![x.clone()])
}

pub fn bn_inference(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    if x.rank() < 2 {
        return Err(ctx.input_error(
            0,
            format!("is {:?}; BNInference needs [N, C, ...]", x.shape),
        ));
    }
    let c = x.shape[1];
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let channel = |i: usize| -> Result<Option<Vec<f64>>, OpError> {
        if i >= inputs.len() || inputs[i].is_empty() {
            return Ok(None);
        }
        let v = params(ctx, inputs, i)?;
        if v.len() != c {
            return Err(ctx.input_error(i, format!("has {} values for {c} channels", v.len())));
        }
        Ok(Some(v))
    };
    let (mean, var) = (
        channel(1)?.unwrap_or_default(),
        channel(2)?.unwrap_or_default(),
    );
    if mean.len() != c || var.len() != c {
        return Err(ctx.input_error(1, "mean and variance are required"));
    }
    let (scale, offset) = (channel(4)?, channel(5)?);
    let mut a = vec![0.0; c];
    let mut b = vec![0.0; c];
    if scale.is_none() && offset.is_none() {
        let m0 = params(ctx, inputs, 3)?.first().copied().unwrap_or(1.0);
        let factor = if m0 == 0.0 { 0.0 } else { 1.0 / m0 };
        for ch in 0..c {
            a[ch] = 1.0 / (factor * var[ch] + eps).sqrt();
            b[ch] = -factor * mean[ch] * a[ch];
        }
    } else {
        for ch in 0..c {
            let s = scale.as_ref().map_or(1.0, |s| s[ch]);
            let o = offset.as_ref().map_or(0.0, |o| o[ch]);
            a[ch] = s / (var[ch] + eps).sqrt();
            b[ch] = o - mean[ch] * a[ch];
        }
    }
    let inner: usize = x.shape[2..].iter().product();
    run_affine(ctx, inputs, outputs, inner, &a, &b)
}
