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
//!
//! x may be float16 or float32; everything is computed in f32, as the device's vector
//! unit does, and a float16 result is rounded from that f32 once.

use half::f16;

use super::attrs::required_float;
use crate::ops::elementwise::ge_type_attr;
use crate::ops::shape::args::{input, output};
use crate::ops::{
    Attr, DType, InferCtx, OpError, OpRegistry, TensorMeta, TensorMut, TensorRef, meta,
};

/// The op types this file registers, with the inputs whose values their inference reads.
const OPS: &[(&str, &[usize])] = &[("AscendQuant", &[]), ("AscendAntiQuant", &[])];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "AscendQuant" => (infer_quant, quant),
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

/// AscendAntiQuant's output type: `dtype`, float32 or float16.
fn anti_quant_type(ctx: &InferCtx) -> Result<DType, OpError> {
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
    Ok(meta(anti_quant_type(ctx)?, x.shape.clone()))
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

#[cfg(test)]
mod tests;
