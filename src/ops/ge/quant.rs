//! GE's quantization ops (graphengine `quantize_ops.h`), the ones ATC writes into a
//! quantized model around its int8 convolutions, with scale and offset as attributes.
//!
//! - AscendQuant(x; scale, offset required, sqrt_mode false, round_mode "Round",
//!   dst_type DT_INT8): `y = round(x * scale + offset)` saturated to int8, with
//!   `x * scale * scale` when sqrt_mode is set (aclnnAscendQuant's formula). round_mode is
//!   one of the header's four: `Round` to nearest with ties to even (C's `rint`, as the
//!   header says), `Floor`, `Ceil`, `Trunc`. dst_type may also ask for int4 (29), which
//!   rt2 has no type for and refuses. A NaN becomes 0 (rt2's choice: the header is silent).
//! - AscendAntiQuant(x int8; scale, offset required, dtype DT_FLOAT, sqrt_mode false):
//!   `y = (x + offset) * scale`, times `scale` once more with sqrt_mode
//!   (aclnnAscendAntiQuant's formula), float32 or float16 as `dtype` asks.
//! - AscendDequant(x int32, deq_scale; sqrt_mode false, relu_flag false, dtype DT_FLOAT):
//!   `y = x * deq_scale` (times `deq_scale` once more with sqrt_mode), then `max(y, 0)`
//!   with relu_flag, float32 or float16 as `dtype` asks. deq_scale holds one scale for the
//!   whole tensor or one per channel, the channel being x's dimension 1 (NCHW's C, the
//!   column of a matrix; rt2's choice for the logical layout of the header's NC1HWC0 and
//!   FRACTAL_NZ). A float16 deq_scale is taken as is; a uint64 one is the device's
//!   quantization parameter as aclnnTransQuantParam documents it: the float32 scale's bits
//!   (their top 19, the rest cleared) in bits 0 to 31, an offset in bits 37 to 45 and a flag
//!   in bit 46. The offset only concerns an int8 result, so a non-zero one is refused.
//! - AscendRequant(x int32, req_scale uint64; relu_flag false):
//!   `y = saturate_int8(round_ties_even(x * scale))`, then `max(y, 0)` with relu_flag
//!   (the ops-nn `quant/ascend_requant` README, read in a gitcode copy of ops-nn), the
//!   scale read from req_scale's bits as for AscendDequant (a non-zero offset refused:
//!   the formula has none). req_scale broadcasts onto x by NumPy's rules, as that README
//!   says.
//!
//! A float x (float16 or float32) and every product are computed in f32, as the device's
//! vector unit does, and a float16 result is rounded from that f32 once.

use half::f16;

use super::attrs::required_float;
use crate::ops::elementwise::ge_type_attr;
use crate::ops::shape::args::{input, output};
use crate::ops::{
    Attr, DType, InferCtx, OpError, OpRegistry, TensorMeta, TensorMut, TensorRef, meta,
};

/// The op types this file registers, with the inputs whose values their inference reads.
const OPS: &[(&str, &[usize])] = &[
    ("AscendQuant", &[]),
    ("AscendAntiQuant", &[]),
    ("AscendDequant", &[]),
    ("AscendRequant", &[]),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "AscendQuant" => (infer_quant, quant),
        "AscendDequant" => (infer_dequant, dequant),
        "AscendRequant" => (infer_requant, requant),
        _ => (infer_anti_quant, anti_quant),
    });
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::names(OPS)
}

/// GE's type number of int4, which AscendQuant's `dst_type` may ask for.
const GE_INT4: i64 = 29;

/// How AscendQuant's `round_mode` takes a float to an integer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum RoundMode {
    /// To nearest, ties to even (C's `rint`).
    Round,
    Floor,
    Ceil,
    Trunc,
}

impl RoundMode {
    fn of(ctx: &InferCtx) -> Result<RoundMode, OpError> {
        match ctx.attr_str("round_mode", "Round")? {
            "Round" => Ok(RoundMode::Round),
            "Floor" => Ok(RoundMode::Floor),
            "Ceil" => Ok(RoundMode::Ceil),
            "Trunc" => Ok(RoundMode::Trunc),
            other => Err(ctx.attr_error(
                "round_mode",
                format!("is {other:?}, not Round, Floor, Ceil or Trunc"),
            )),
        }
    }

    fn apply(self, v: f32) -> f32 {
        match self {
            RoundMode::Round => v.round_ties_even(),
            RoundMode::Floor => v.floor(),
            RoundMode::Ceil => v.ceil(),
            RoundMode::Trunc => v.trunc(),
        }
    }
}

/// `scale`, squared when `sqrt_mode` is set (applied as two multiplications, in order).
fn scale_of(ctx: &InferCtx) -> Result<(f32, bool), OpError> {
    let scale = required_float(ctx, "scale")?;
    let sqrt = ctx.attr_bool("sqrt_mode", false)?;
    Ok((scale, sqrt))
}

fn check_float_x(ctx: &InferCtx, x: &TensorMeta) -> Result<(), OpError> {
    match x.dtype {
        DType::F32 | DType::F16 => Ok(()),
        other => Err(ctx.input_error(0, format!("is {other}, not float16 or float32"))),
    }
}

fn infer_quant(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    check_float_x(ctx, x)?;
    scale_of(ctx)?;
    required_float(ctx, "offset")?;
    RoundMode::of(ctx)?;
    if let Some(Attr::Int(GE_INT4)) = ctx.attrs.get("dst_type") {
        return Err(ctx.attr_error("dst_type", "asks for int4, which rt2 does not compute"));
    }
    match ge_type_attr(ctx, "dst_type", Some(DType::I8))? {
        DType::I8 => Ok(meta(DType::I8, x.shape.clone())),
        other => Err(ctx.attr_error("dst_type", format!("is {other}, not int8"))),
    }
}

fn quant(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let (scale, sqrt) = scale_of(ctx)?;
    let offset = required_float(ctx, "offset")?;
    let mode = RoundMode::of(ctx)?;
    let y = output(ctx, outputs, 0)?;
    if y.len() != x.len() {
        return Err(ctx.compute_error(format!("output {:?} is not x's {:?}", y.shape, x.shape)));
    }
    let dst = y.slice_mut::<i8>()?;
    let one = |v: f32| {
        let mut s = v * scale;
        if sqrt {
            s *= scale;
        }
        let r = mode.apply(s + offset);
        // `as` saturates at -128 and 127 and takes NaN to 0.
        r as i8
    };
    match x.dtype {
        DType::F32 => {
            for (d, &v) in dst.iter_mut().zip(x.slice::<f32>()?) {
                *d = one(v);
            }
        }
        DType::F16 => {
            for (d, &v) in dst.iter_mut().zip(x.slice::<f16>()?) {
                *d = one(v.to_f32());
            }
        }
        other => return Err(ctx.input_error(0, format!("is {other}, not float16 or float32"))),
    }
    Ok(())
}

/// AscendAntiQuant's and AscendDequant's output type: `dtype`, float32 or float16.
fn float_type(ctx: &InferCtx) -> Result<DType, OpError> {
    match ge_type_attr(ctx, "dtype", Some(DType::F32))? {
        d @ (DType::F32 | DType::F16) => Ok(d),
        other => Err(ctx.attr_error("dtype", format!("is {other}, not float32 or float16"))),
    }
}

fn infer_anti_quant(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    if x.dtype != DType::I8 {
        return Err(ctx.input_error(0, format!("is {}, not int8", x.dtype)));
    }
    scale_of(ctx)?;
    required_float(ctx, "offset")?;
    Ok(meta(float_type(ctx)?, x.shape.clone()))
}

fn anti_quant(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let src = x.slice::<i8>()?;
    let (scale, sqrt) = scale_of(ctx)?;
    let offset = required_float(ctx, "offset")?;
    let y = output(ctx, outputs, 0)?;
    if y.len() != x.len() {
        return Err(ctx.compute_error(format!("output {:?} is not x's {:?}", y.shape, x.shape)));
    }
    let one = |v: i8| {
        let mut r = (f32::from(v) + offset) * scale;
        if sqrt {
            r *= scale;
        }
        r
    };
    match y.dtype {
        DType::F32 => {
            for (d, &v) in y.slice_mut::<f32>()?.iter_mut().zip(src) {
                *d = one(v);
            }
        }
        DType::F16 => {
            for (d, &v) in y.slice_mut::<f16>()?.iter_mut().zip(src) {
                *d = f16::from_f32(one(v));
            }
        }
        other => return Err(ctx.compute_error(format!("{other} output"))),
    }
    Ok(())
}

/// The bits of a uint64 deq_scale that hold the requantization offset.
const OFFSET_BITS: u64 = 0x1FF << 37;

fn infer_dequant(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let x = &ctx.inputs[0];
    if x.dtype != DType::I32 {
        return Err(ctx.input_error(0, format!("is {}, not int32", x.dtype)));
    }
    let s = &ctx.inputs[1];
    if !matches!(s.dtype, DType::F16 | DType::U64) {
        return Err(ctx.input_error(1, format!("is {}, not float16 or uint64", s.dtype)));
    }
    ctx.attr_bool("sqrt_mode", false)?;
    ctx.attr_bool("relu_flag", false)?;
    Ok(meta(float_type(ctx)?, x.shape.clone()))
}

/// The float32 scales of a uint64 quantization parameter (input 1): the low 32 bits of
/// each value; a value with an offset is refused.
fn u64_scales(ctx: &InferCtx, s: &TensorRef) -> Result<Vec<f32>, OpError> {
    let raw = s.slice::<u64>()?;
    if let Some(v) = raw.iter().find(|&&v| v & OFFSET_BITS != 0) {
        return Err(ctx.input_error(
            1,
            format!(
                "{v:#x} has an offset (bits 37 to 45), which {} does not apply",
                ctx.op
            ),
        ));
    }
    Ok(raw.iter().map(|&v| f32::from_bits(v as u32)).collect())
}

/// The deq_scale values as f32, one or one per channel of x (its dimension 1).
fn deq_scales(ctx: &InferCtx, x: &TensorRef, s: &TensorRef) -> Result<Vec<f32>, OpError> {
    let scales: Vec<f32> = match s.dtype {
        DType::F16 => s.slice::<f16>()?.iter().map(|v| v.to_f32()).collect(),
        DType::U64 => u64_scales(ctx, s)?,
        other => return Err(ctx.input_error(1, format!("is {other}, not float16 or uint64"))),
    };
    let channels = x.shape.get(1).copied();
    if scales.len() == 1 || (x.rank() >= 2 && channels == Some(scales.len())) {
        Ok(scales)
    } else {
        Err(ctx.input_error(
            1,
            format!(
                "has {} values, not 1 or one per channel of x {:?} (its dimension 1)",
                scales.len(),
                x.shape
            ),
        ))
    }
}

fn dequant(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let scales = deq_scales(ctx, x, input(ctx, inputs, 1)?)?;
    let sqrt = ctx.attr_bool("sqrt_mode", false)?;
    let relu = ctx.attr_bool("relu_flag", false)?;
    let src = x.slice::<i32>()?;
    let inner: usize = x.shape.iter().skip(2).product();
    let y = output(ctx, outputs, 0)?;
    if y.len() != x.len() {
        return Err(ctx.compute_error(format!("output {:?} is not x's {:?}", y.shape, x.shape)));
    }
    let one = |i: usize, v: i32| {
        let s = if scales.len() == 1 {
            scales[0]
        } else {
            scales[(i / inner.max(1)) % scales.len()]
        };
        // int32 to f32 as the device converts it, then the scale (twice with sqrt_mode).
        let mut r = v as f32 * s;
        if sqrt {
            r *= s;
        }
        if relu { r.max(0.0) } else { r }
    };
    match y.dtype {
        DType::F32 => {
            for (i, (d, &v)) in y.slice_mut::<f32>()?.iter_mut().zip(src).enumerate() {
                *d = one(i, v);
            }
        }
        DType::F16 => {
            for (i, (d, &v)) in y.slice_mut::<f16>()?.iter_mut().zip(src).enumerate() {
                *d = f16::from_f32(one(i, v));
            }
        }
        other => return Err(ctx.compute_error(format!("{other} output"))),
    }
    Ok(())
}

fn infer_requant(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let x = &ctx.inputs[0];
    if x.dtype != DType::I32 {
        return Err(ctx.input_error(0, format!("is {}, not int32", x.dtype)));
    }
    if ctx.inputs[1].dtype != DType::U64 {
        return Err(ctx.input_error(1, format!("is {}, not uint64", ctx.inputs[1].dtype)));
    }
    ctx.attr_bool("relu_flag", false)?;
    Ok(meta(DType::I8, x.shape.clone()))
}

/// For each dimension of x, the stride of req_scale's element along it when req_scale
/// broadcasts onto x by NumPy's rules (0 where it is broadcast).
fn broadcast_strides(ctx: &InferCtx, x: &[usize], s: &[usize]) -> Result<Vec<usize>, OpError> {
    if s.len() > x.len() {
        return Err(ctx.input_error(1, format!("{s:?} has more dimensions than x {x:?}")));
    }
    let mut strides = vec![0; x.len()];
    let mut step = 1;
    for (k, &d) in s.iter().enumerate().rev() {
        let xk = k + x.len() - s.len();
        if d == x[xk] && d != 1 {
            strides[xk] = step;
        } else if d != 1 {
            return Err(ctx.input_error(1, format!("{s:?} does not broadcast to x {x:?}")));
        }
        step *= d;
    }
    Ok(strides)
}

fn requant(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let s = input(ctx, inputs, 1)?;
    if s.dtype != DType::U64 {
        return Err(ctx.input_error(1, format!("is {}, not uint64", s.dtype)));
    }
    let scales = u64_scales(ctx, s)?;
    let strides = broadcast_strides(ctx, x.shape, s.shape)?;
    let relu = ctx.attr_bool("relu_flag", false)?;
    let src = x.slice::<i32>()?;
    let y = output(ctx, outputs, 0)?;
    if y.len() != x.len() {
        return Err(ctx.compute_error(format!("output {:?} is not x's {:?}", y.shape, x.shape)));
    }
    for (i, (d, &v)) in y.slice_mut::<i8>()?.iter_mut().zip(src).enumerate() {
        // req_scale's element for x's element i: i's index along each dimension times
        // that dimension's broadcast stride.
        let (mut rest, mut at) = (i, 0);
        for (&dim, &stride) in x.shape.iter().zip(&strides).rev() {
            at += (rest % dim) * stride;
            rest /= dim;
        }
        let scale = scales.get(at).copied().unwrap_or(0.0);
        let r = (v as f32 * scale).round_ties_even() as i8;
        *d = if relu { r.max(0) } else { r };
    }
    Ok(())
}

#[cfg(test)]
mod tests;
