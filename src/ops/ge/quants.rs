//! GE's quantized matrix product QuantBatchMatmulV3 (`prototypes/matrix_calculation_ops.txt`)
//! and the tensor-parameter quantization ops AscendQuantV2 and AscendAntiQuantV2
//! (`prototypes/quantize_ops.txt`, graphengine `quantize_ops.h`).
//!
//! - QuantBatchMatmulV3(x1 int8, x2 int8, scale, offset?, bias? int32; transpose_x1,
//!   transpose_x2 false): `y = (x1 @ x2 + bias) * scale + offset` (the ops-nn
//!   `matmul/quant_batch_matmul_v3` README), the product accumulated in int32, batch
//!   dims broadcast. `scale` is float32 or the uint64 quantization parameter (the
//!   float32's bits in bits 0 to 31, as AscendDequant reads it; an offset in bits 37 to
//!   45 refused), one value or one per column; `offset` (float32) likewise. y is float16
//!   or int8 (rounded to nearest, ties to even, and saturated); the prototype rt2 holds
//!   has no `dtype` attribute, so rt2 reads ops-nn's `dtype` (1 float16, 2 int8) where a
//!   node carries one, else makes y int8 when `offset` is given (the README's tables pair
//!   an offset only with an int8 y) and float16 otherwise (rt2's choice).
//! - AscendQuantV2(x, scale, offset?; sqrt_mode false, round_mode "round", dst_type
//!   DT_INT8, axis -1): `y = round(x * scale + offset)` (`x * scale * scale` with
//!   sqrt_mode), saturated to int8 (the ops-nn `quant/ascend_quant_v2` README), scale and
//!   offset one value or one per index of x's dimension `axis`. round_mode `round` is to
//!   nearest with ties to even (AscendC's AscendQuant: "四舍六入五成双"), `floor`, `ceil`,
//!   `trunc`; int4 dst_type is refused.
//! - AscendAntiQuantV2(x int8, scale, offset?; dst_type DT_FLOAT16, sqrt_mode false):
//!   `y = (x + offset) * scale` (times `scale` again with sqrt_mode; AscendC's
//!   AscendAntiQuant formula), scale and offset one value or one per index of x's last
//!   dimension (the header), y float16 or bfloat16 as dst_type asks.
//!
//! Arithmetic is in f32, as the device's vector unit does, and a half result is rounded
//! once. AscendDequantS16, AscendRequantS16 and AscendWeightQuant are not computed: their
//! headers give no formula for the int16 `x1` operands, the dual outputs or the weight
//! offset.

use half::{bf16, f16};

use super::attrs::given;
use super::int8;
use super::matmul::batch_offset;
use crate::ops::elementwise::{broadcast, ge_type_attr};
use crate::ops::nn::agree;
use crate::ops::nn::scalar::read_f64s;
use crate::ops::{
    Attr, DType, InferCtx, OpError, OpRegistry, TensorMeta, TensorMut, TensorRef, meta,
};

const OPS: &[(&str, &[usize])] = &[
    ("QuantBatchMatmulV3", &[]),
    ("AscendQuantV2", &[]),
    ("AscendAntiQuantV2", &[]),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "QuantBatchMatmulV3" => (infer_qbmm, qbmm),
        "AscendQuantV2" => (infer_quant_v2, quant_v2),
        _ => (infer_anti_quant_v2, anti_quant_v2),
    });
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::names(OPS)
}

/// The bits of a uint64 quantization parameter that hold an offset.
const OFFSET_BITS: u64 = 0x1FF << 37;

/// Input `i`'s values as f32: float types as they are, a uint64 parameter's scale bits.
fn params(ctx: &InferCtx, t: &TensorRef, i: usize) -> Result<Vec<f32>, OpError> {
    if t.dtype == DType::U64 {
        let raw = t.slice::<u64>()?;
        if let Some(v) = raw.iter().find(|&&v| v & OFFSET_BITS != 0) {
            return Err(ctx.input_error(i, format!("{v:#x} has an offset (bits 37 to 45)")));
        }
        return Ok(raw.iter().map(|&v| f32::from_bits(v as u32)).collect());
    }
    let v = read_f64s(t).map_err(|_| ctx.input_error(i, format!("is {}", t.dtype)))?;
    Ok(v.iter().map(|&x| x as f32).collect())
}

/// Optional input `i`'s values, one or `n`.
fn per(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    i: usize,
    n: usize,
) -> Result<Option<Vec<f32>>, OpError> {
    let Some(t) = inputs.get(i).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let v = params(ctx, t, i)?;
    if v.len() != 1 && v.len() != n {
        return Err(ctx.input_error(i, format!("has {} values, not 1 or {n}", v.len())));
    }
    Ok(Some(v))
}

/// The `k`-th of one value or one per index.
fn pick(v: &[f32], k: usize) -> f32 {
    if v.len() == 1 { v[0] } else { v[k] }
}

// ---------------------------------------------------------------------------------------
// QuantBatchMatmulV3

fn qbmm_type(ctx: &InferCtx) -> Result<DType, OpError> {
    let d = match ctx.attrs.get("dtype") {
        Some(_) => ge_type_attr(ctx, "dtype", None)?,
        None if given(ctx, 3) => DType::I8,
        None => DType::F16,
    };
    match d {
        DType::F16 | DType::I8 => Ok(d),
        other => Err(ctx.attr_error("dtype", format!("is {other}, not float16 or int8"))),
    }
}

fn flags(ctx: &InferCtx) -> Result<(bool, bool), OpError> {
    Ok((
        ctx.attr_bool("transpose_x1", false)?,
        ctx.attr_bool("transpose_x2", false)?,
    ))
}

fn infer_qbmm(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 5)?;
    for i in [0, 1] {
        if ctx.inputs[i].dtype != DType::I8 {
            return Err(ctx.input_error(i, format!("is {}, not int8", ctx.inputs[i].dtype)));
        }
    }
    if !matches!(ctx.inputs[2].dtype, DType::U64 | DType::F32) {
        return Err(ctx.input_error(
            2,
            format!("is {}, not uint64 or float32", ctx.inputs[2].dtype),
        ));
    }
    if given(ctx, 3) && ctx.inputs[3].dtype != DType::F32 {
        return Err(ctx.input_error(3, format!("is {}, not float32", ctx.inputs[3].dtype)));
    }
    if given(ctx, 4) && ctx.inputs[4].dtype != DType::I32 {
        return Err(ctx.input_error(4, format!("is {}, not int32", ctx.inputs[4].dtype)));
    }
    let y = qbmm_type(ctx)?;
    let (ta, tb) = flags(ctx)?;
    let (Some(a), Some(b)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(y, None));
    };
    for (i, s) in [(0, a), (1, b)] {
        if s.len() < 2 {
            return Err(ctx.input_error(i, format!("is {s:?}; a matrix operand is at least 2-D")));
        }
    }
    let split = |s: &[i64], t: bool| {
        let r = s.len();
        let (x, z) = (s[r - 2], s[r - 1]);
        if t { (z, x) } else { (x, z) }
    };
    let ((m, k), (k2, n)) = (split(a, ta), split(b, tb));
    if agree(k, k2).is_none() {
        return Err(ctx.input_error(1, format!("inner dims differ: {a:?} x {b:?}")));
    }
    let mut out = broadcast(&[Some(&a[..a.len() - 2]), Some(&b[..b.len() - 2])])
        .map_err(|_| ctx.input_error(1, format!("batch dims do not broadcast: {a:?} x {b:?}")))?
        .unwrap_or_default();
    out.extend([m, n]);
    Ok(meta(y, Some(out)))
}

fn qbmm(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let (ta, tb) = flags(ctx)?;
    let (a, b) = (&inputs[0], &inputs[1]);
    let y = &mut outputs[0];
    if a.rank() < 2 || b.rank() < 2 || y.rank() < 2 {
        return Err(ctx.input_error(0, "matrix operands are at least 2-D"));
    }
    let ys = y.shape.to_vec();
    let (ob, mn) = ys.split_at(ys.len() - 2);
    let (m, n) = (mn[0], mn[1]);
    let k = if ta {
        a.shape[a.rank() - 2]
    } else {
        a.shape[a.rank() - 1]
    };
    let scale = per(ctx, inputs, 2, n)?.ok_or_else(|| ctx.input_error(2, "scale is required"))?;
    let offset = per(ctx, inputs, 3, n)?;
    let bias = int8::bias(ctx, inputs, 4, n)?;
    let (av, bv) = (a.slice::<i8>()?, b.slice::<i8>()?);
    let (abatch, bbatch) = (&a.shape[..a.rank() - 2], &b.shape[..b.rank() - 2]);
    let batches: usize = ob.iter().product();
    let fits = |v: &[i8], batch: &[usize], rows: usize, cols: usize| {
        v.len() == batch.iter().product::<usize>() * rows * cols
    };
    if !fits(av, abatch, m, k) || !fits(bv, bbatch, k, n) {
        return Err(ctx.input_error(
            1,
            format!("{:?} x {:?} does not fit y {ys:?}", a.shape, b.shape),
        ));
    }
    let mut acc = vec![0i32; m * n];
    let out_type = y.dtype;
    for i in 0..batches {
        let ao = batch_offset(i, ob, abatch) * m * k;
        let bo = batch_offset(i, ob, bbatch) * k * n;
        let (ab, bb) = (&av[ao..ao + m * k], &bv[bo..bo + k * n]);
        int8::product(ab, bb, (m, k, n), (ta, tb), 0, bias, &mut acc);
        let value = |j: usize, v: i32| {
            let c = j % n.max(1);
            v as f32 * pick(&scale, c) + offset.as_ref().map_or(0.0, |o| pick(o, c))
        };
        let at = i * m * n;
        match out_type {
            DType::F16 => {
                let dst = &mut y.slice_mut::<f16>()?[at..at + m * n];
                for (j, (d, &v)) in dst.iter_mut().zip(&acc).enumerate() {
                    *d = f16::from_f32(value(j, v));
                }
            }
            DType::I8 => {
                let dst = &mut y.slice_mut::<i8>()?[at..at + m * n];
                for (j, (d, &v)) in dst.iter_mut().zip(&acc).enumerate() {
                    // `as` saturates to int8 and takes NaN to 0.
                    *d = value(j, v).round_ties_even() as i8;
                }
            }
            other => return Err(ctx.compute_error(format!("{other} output"))),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// AscendQuantV2 and AscendAntiQuantV2

/// The rounding of AscendQuantV2's `round_mode`.
fn round_mode(ctx: &InferCtx) -> Result<fn(f32) -> f32, OpError> {
    match ctx.attr_str("round_mode", "round")? {
        "round" => Ok(f32::round_ties_even),
        "floor" => Ok(f32::floor),
        "ceil" => Ok(f32::ceil),
        "trunc" => Ok(f32::trunc),
        other => Err(ctx.attr_error(
            "round_mode",
            format!("is {other:?}, not round, floor, ceil or trunc"),
        )),
    }
}

fn float_input(ctx: &InferCtx, i: usize) -> Result<(), OpError> {
    match ctx.inputs[i].dtype {
        DType::F16 | DType::F32 | DType::Bf16 => Ok(()),
        d => Err(ctx.input_error(i, format!("is {d}, not float16, float32 or bfloat16"))),
    }
}

fn infer_quant_v2(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    float_input(ctx, 0)?;
    float_input(ctx, 1)?;
    if given(ctx, 2) {
        float_input(ctx, 2)?;
    }
    ctx.attr_bool("sqrt_mode", false)?;
    round_mode(ctx)?;
    if let Some(Attr::Int(29)) = ctx.attrs.get("dst_type") {
        return Err(ctx.attr_error("dst_type", "asks for int4, which rt2 does not compute"));
    }
    match ge_type_attr(ctx, "dst_type", Some(DType::I8))? {
        DType::I8 => {}
        other => return Err(ctx.attr_error("dst_type", format!("is {other}, not int8"))),
    }
    if let Some(s) = &ctx.inputs[0].shape {
        ctx.axis(ctx.attr_int("axis", -1)?, s.len(), "axis")?;
    }
    Ok(meta(DType::I8, ctx.inputs[0].shape.clone()))
}

/// (length of x's dimension `axis`, elements after it) for x's shape.
fn along(shape: &[usize], axis: usize) -> (usize, usize) {
    (shape[axis], shape[axis + 1..].iter().product())
}

fn quant_v2(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    if x.rank() == 0 {
        return Err(ctx.input_error(0, "is a scalar; AscendQuantV2 scales along an axis"));
    }
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.rank(), "axis")?;
    let (len, inner) = along(x.shape, axis);
    let scale = per(ctx, inputs, 1, len)?.ok_or_else(|| ctx.input_error(1, "is required"))?;
    let offset = per(ctx, inputs, 2, len)?;
    let sqrt = ctx.attr_bool("sqrt_mode", false)?;
    let round = round_mode(ctx)?;
    let xs = read_f64s(x)?;
    let y = outputs[0].slice_mut::<i8>()?;
    if y.len() != xs.len() {
        return Err(ctx.compute_error(format!("{} outputs for {} inputs", y.len(), xs.len())));
    }
    for (i, (d, &v)) in y.iter_mut().zip(&xs).enumerate() {
        let c = (i / inner.max(1)) % len.max(1);
        let s = pick(&scale, c);
        let mut r = v as f32 * s;
        if sqrt {
            r *= s;
        }
        let o = offset.as_ref().map_or(0.0, |o| pick(o, c));
        // `as` saturates to int8 and takes NaN to 0.
        *d = round(r + o) as i8;
    }
    Ok(())
}

fn infer_anti_quant_v2(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    if ctx.inputs[0].dtype != DType::I8 {
        return Err(ctx.input_error(0, format!("is {}, not int8", ctx.inputs[0].dtype)));
    }
    for i in [1, 2] {
        if given(ctx, i) && !matches!(ctx.inputs[i].dtype, DType::F32 | DType::Bf16) {
            return Err(ctx.input_error(
                i,
                format!("is {}, not float32 or bfloat16", ctx.inputs[i].dtype),
            ));
        }
    }
    ctx.attr_bool("sqrt_mode", false)?;
    match ge_type_attr(ctx, "dst_type", Some(DType::F16))? {
        d @ (DType::F16 | DType::Bf16) => Ok(meta(d, ctx.inputs[0].shape.clone())),
        other => Err(ctx.attr_error("dst_type", format!("is {other}, not float16 or bfloat16"))),
    }
}

fn anti_quant_v2(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let len = x.shape.last().copied().unwrap_or(1);
    let scale = per(ctx, inputs, 1, len)?.ok_or_else(|| ctx.input_error(1, "is required"))?;
    let offset = per(ctx, inputs, 2, len)?;
    let sqrt = ctx.attr_bool("sqrt_mode", false)?;
    let xs = x.slice::<i8>()?;
    let one = |i: usize, v: i8| {
        let c = i % len.max(1);
        let s = pick(&scale, c);
        let mut r = (f32::from(v) + offset.as_ref().map_or(0.0, |o| pick(o, c))) * s;
        if sqrt {
            r *= s;
        }
        r
    };
    let y = &mut outputs[0];
    match y.dtype {
        DType::F16 => {
            for (i, (d, &v)) in y.slice_mut::<f16>()?.iter_mut().zip(xs).enumerate() {
                *d = f16::from_f32(one(i, v));
            }
        }
        DType::Bf16 => {
            for (i, (d, &v)) in y.slice_mut::<bf16>()?.iter_mut().zip(xs).enumerate() {
                *d = bf16::from_f32(one(i, v));
            }
        }
        other => return Err(ctx.compute_error(format!("{other} output"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests;
