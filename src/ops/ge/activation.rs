//! GE's activations and fake quantization that no library op computes, each as its
//! prototype documents it (`prototypes/nonlinear_fuc_ops.txt`,
//! `elewise_calculation_ops.txt`; graphengine `nonlinear_fuc_ops.h`,
//! `elewise_calculation_ops.h`, ops-nn's and ops-math's op docs; TensorFlow's
//! `fake_quant_with_min_max_*` for the FakeQuant family):
//!
//! - GLU(x; dim -1): x cut in two halves `a`, `b` along `dim` (which must be even),
//!   `y = a * sigmoid(b)`, half as long along `dim`.
//! - ReluV2(x): `y = max(x, 0)` and a uint8 `mask`, 1 where `x > 0` and 0 elsewhere
//!   (ops-nn's documentation of the mask), one element per element of x.
//! - ThresholdV2(x, threshold, value optional): `y = x > threshold ? x : value`, value 0
//!   when left out (PyTorch's Threshold); threshold and value hold one element of x's type.
//! - FakeQuantWithMinMaxArgs(x; min -6, max 6, num_bits 8, narrow_range false),
//!   FakeQuantWithMinMaxVars(x, min, max; num_bits 8, narrow_range false) and
//!   FakeQuantWithMinMaxVarsPerChannel (min and max one per element of x's last dim):
//!   TensorFlow's. The range `[min, max]` is nudged so that 0 is exactly representable:
//!   with `qmin = narrow_range ? 1 : 0`, `qmax = 2^num_bits - 1`,
//!   `scale = (max - min) / (qmax - qmin)` and the zero point `qmin - min / scale`
//!   clamped to `[qmin, qmax]` and rounded half away from zero, the nudged bounds are
//!   `(qmin - zp) scale` and `(qmax - zp) scale`; then
//!   `y = floor((clamp(x) - nmin) / scale + 0.5) * scale + nmin`, all in float32 as
//!   TensorFlow computes it (the division a multiplication by `1 / scale`). num_bits must
//!   be in `[2, 16]`; the Args form's min must be below its max, as TensorFlow checks.
//!
//! Floats compute in f64 (GLU) or float32 (FakeQuant) and round once into the type.
//!
//! rt2's choice where GE documents nothing: ReluV2's mask has x's shape, one byte per
//! element; GE's kernel packs it into bits (whence its "last dim divisible by 8").

use super::attrs::given;
use super::stats::is_float;
use crate::dispatch;
use crate::ops::nn::scalar::Scalar;
use crate::ops::{
    DType, InferCtx, OpError, OpRegistry, TensorMeta, TensorMut, TensorRef, UNKNOWN, meta,
};

/// The op types this file registers.
const OPS: &super::table::Table = &[
    ("GLU", &[]),
    ("ReluV2", &[]),
    ("ThresholdV2", &[]),
    ("FakeQuantWithMinMaxArgs", &[]),
    ("FakeQuantWithMinMaxVars", &[]),
    ("FakeQuantWithMinMaxVarsPerChannel", &[]),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "GLU" => (infer_glu, glu),
        "ReluV2" => (infer_relu_v2, relu_v2),
        "ThresholdV2" => (infer_threshold, threshold),
        _ => (infer_fake_quant, fake_quant),
    });
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::names(OPS)
}

fn unsupported(ctx: &InferCtx, i: usize, d: DType) -> OpError {
    ctx.input_error(i, format!("{d} is not supported by this op"))
}

// ---------------------------------------------------------------------------------------
// GLU

fn infer_glu(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    if !is_float(x.dtype) {
        return Err(unsupported(ctx, 0, x.dtype));
    }
    let Some(s) = &x.shape else {
        return Ok(vec![x.clone()]);
    };
    let d = ctx.axis(ctx.attr_int("dim", -1)?, s.len(), "dim")?;
    let mut out = s.clone();
    if s[d] != UNKNOWN {
        if s[d] % 2 != 0 {
            return Err(ctx.input_error(0, format!("dim {d} of {s:?} is odd; GLU halves it")));
        }
        out[d] = s[d] / 2;
    }
    Ok(meta(x.dtype, Some(out)))
}

fn glu(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = &inputs[0];
    let d = ctx.axis(ctx.attr_int("dim", -1)?, x.rank(), "dim")?;
    let half = x.shape[d] / 2;
    let inner: usize = x.shape[d + 1..].iter().product();
    // Each outer index holds the `a` half then the `b` half, each `half * inner` long.
    let block = half * inner;
    if block == 0 {
        return Ok(());
    }
    dispatch!(x.dtype, T in [f32, f64, half::f16, half::bf16] => {
        let xs = x.slice::<T>()?;
        let y = outputs[0].slice_mut::<T>()?;
        for (src, dst) in xs.chunks(2 * block).zip(y.chunks_mut(block)) {
            let (a, b) = src.split_at(block);
            for ((o, p), q) in dst.iter_mut().zip(a).zip(b) {
                let g = 1.0 / (1.0 + (-q.to_f64()).exp());
                *o = T::from_f64(p.to_f64() * g);
            }
        }
        Ok(())
    }, other => Err(unsupported(ctx, 0, other)))
}

// ---------------------------------------------------------------------------------------
// ReluV2, ThresholdV2

fn relu_types(d: DType) -> bool {
    is_float(d)
        || matches!(
            d,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U16
        )
}

fn infer_relu_v2(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    if !relu_types(x.dtype) {
        return Err(unsupported(ctx, 0, x.dtype));
    }
    Ok(vec![
        x.clone(),
        TensorMeta {
            dtype: DType::U8,
            shape: x.shape.clone(),
        },
    ])
}

fn relu_v2(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    fn go<T: Scalar>(x: &[T], y: &mut [T], mask: &mut [u8]) {
        let zero = T::from_f64(0.0);
        for ((d, m), &v) in y.iter_mut().zip(mask.iter_mut()).zip(x) {
            let on = v > zero;
            *d = if on { v } else { zero };
            *m = u8::from(on);
        }
    }
    let x = &inputs[0];
    let (lo, hi) = outputs.split_at_mut(1);
    let mask = hi[0].slice_mut::<u8>()?;
    dispatch!(x.dtype, T in [f32, f64, half::f16, half::bf16, i8, i16, i32, i64, u8, u16] => {
        go::<T>(x.slice::<T>()?, lo[0].slice_mut::<T>()?, mask);
        Ok(())
    }, other => Err(unsupported(ctx, 0, other)))
}

fn threshold_types(d: DType) -> bool {
    is_float(d) || matches!(d, DType::I8 | DType::I32 | DType::I64 | DType::U8)
}

fn infer_threshold(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    let x = &ctx.inputs[0];
    if !threshold_types(x.dtype) {
        return Err(unsupported(ctx, 0, x.dtype));
    }
    for i in 1..ctx.inputs.len() {
        if i == 2 && !given(ctx, 2) {
            continue;
        }
        let t = &ctx.inputs[i];
        if t.dtype != x.dtype {
            return Err(ctx.input_error(i, format!("is {}, x is {}", t.dtype, x.dtype)));
        }
        if let Some(s) = &t.shape
            && s.iter().all(|&d| d != UNKNOWN)
            && s.iter().product::<i64>() != 1
        {
            return Err(ctx.input_error(i, format!("{s:?} is not one element")));
        }
    }
    Ok(vec![x.clone()])
}

fn threshold(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    fn one<T: Scalar>(ctx: &InferCtx, t: &TensorRef, i: usize) -> Result<T, OpError> {
        match t.slice::<T>()? {
            [v] => Ok(*v),
            _ => Err(ctx.input_error(i, format!("{:?} is not one element", t.shape))),
        }
    }
    let x = &inputs[0];
    dispatch!(x.dtype, T in [f32, f64, half::f16, half::bf16, i8, i32, i64, u8] => {
        let t = one::<T>(ctx, &inputs[1], 1)?;
        let v = match inputs.get(2).filter(|v| !v.is_empty()) {
            Some(v) => one::<T>(ctx, v, 2)?,
            None => T::from_f64(0.0),
        };
        let y = outputs[0].slice_mut::<T>()?;
        for (d, &e) in y.iter_mut().zip(x.slice::<T>()?) {
            *d = if e > t { e } else { v };
        }
        Ok(())
    }, other => Err(unsupported(ctx, 0, other)))
}

// ---------------------------------------------------------------------------------------
// FakeQuantWithMinMax*

/// `(qmin, qmax)` from num_bits and narrow_range, checked.
fn quant_range(ctx: &InferCtx) -> Result<(f32, f32), OpError> {
    let bits = ctx.attr_int("num_bits", 8)?;
    if !(2..=16).contains(&bits) {
        return Err(ctx.attr_error("num_bits", format!("{bits} is outside [2, 16]")));
    }
    let qmin = if ctx.attr_bool("narrow_range", false)? {
        1.0
    } else {
        0.0
    };
    Ok((qmin, ((1u32 << bits) - 1) as f32))
}

fn infer_fake_quant(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let per_channel = ctx.op == "FakeQuantWithMinMaxVarsPerChannel";
    if ctx.op == "FakeQuantWithMinMaxArgs" {
        ctx.arity(1, 1)?;
        let (min, max) = (ctx.attr_float("min", -6.0)?, ctx.attr_float("max", 6.0)?);
        if min >= max {
            return Err(ctx.attr_error("min", format!("{min} is not below max {max}")));
        }
    } else {
        ctx.arity(3, 3)?;
    }
    quant_range(ctx)?;
    let x = &ctx.inputs[0];
    for (i, t) in ctx.inputs.iter().enumerate() {
        if t.dtype != DType::F32 {
            return Err(unsupported(ctx, i, t.dtype));
        }
    }
    let last = x.shape.as_ref().and_then(|s| s.last().copied());
    for i in 1..ctx.inputs.len() {
        let Some(s) = &ctx.inputs[i].shape else {
            continue;
        };
        let bad = if per_channel {
            s.len() != 1 || matches!(last, Some(d) if d != UNKNOWN && s[0] != UNKNOWN && s[0] != d)
        } else {
            s.iter().all(|&d| d != UNKNOWN) && s.iter().product::<i64>() != 1
        };
        if bad {
            let want = if per_channel {
                "x's last dim"
            } else {
                "one element"
            };
            return Err(ctx.input_error(i, format!("{s:?} is not {want}")));
        }
    }
    Ok(vec![x.clone()])
}

/// The nudged `(min, max, scale)` of TensorFlow's fake quantization.
fn nudge(min: f32, max: f32, qmin: f32, qmax: f32) -> (f32, f32, f32) {
    let scale = (max - min) / (qmax - qmin);
    let from_min = qmin - min / scale;
    let zp = if from_min < qmin {
        qmin
    } else if from_min > qmax {
        qmax
    } else {
        from_min.round()
    };
    ((qmin - zp) * scale, (qmax - zp) * scale, scale)
}

fn fake_quant(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (qmin, qmax) = quant_range(ctx)?;
    let x = inputs[0].slice::<f32>()?;
    let (mins, maxs): (Vec<f32>, Vec<f32>) = if ctx.op == "FakeQuantWithMinMaxArgs" {
        (
            vec![ctx.attr_float("min", -6.0)?],
            vec![ctx.attr_float("max", 6.0)?],
        )
    } else {
        (
            inputs[1].slice::<f32>()?.to_vec(),
            inputs[2].slice::<f32>()?.to_vec(),
        )
    };
    let channels = if ctx.op == "FakeQuantWithMinMaxVarsPerChannel" {
        inputs[0].shape.last().copied().unwrap_or(1)
    } else {
        1
    };
    for (i, v) in [(1, &mins), (2, &maxs)] {
        if v.len() != channels {
            return Err(ctx.input_error(i, format!("has {} values, expected {channels}", v.len())));
        }
    }
    let bounds: Vec<(f32, f32, f32)> = mins
        .iter()
        .zip(&maxs)
        .map(|(&lo, &hi)| nudge(lo, hi, qmin, qmax))
        .collect();
    let y = outputs[0].slice_mut::<f32>()?;
    if channels == 0 {
        return Ok(());
    }
    for (xr, yr) in x.chunks(channels).zip(y.chunks_mut(channels)) {
        for ((d, &v), &(lo, hi, scale)) in yr.iter_mut().zip(xr).zip(&bounds) {
            let inv = 1.0 / scale;
            let c = v.min(hi).max(lo) - lo;
            *d = (c * inv + 0.5).floor() * scale + lo;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
