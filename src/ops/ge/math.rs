//! GE's own elementwise math: the unary functions and activations, the scalar-attribute
//! ops, fills, and the binary ops TensorFlow and PyTorch brought in, each as its prototype
//! documents it (`prototypes/elewise_calculation_ops.txt`, `nonlinear_fuc_ops.txt`;
//! graphengine `elewise_calculation_ops.h`, `nonlinear_fuc_ops.h`, ops-math's
//! `*_proto.h` and op docs).
//!
//! Float ops compute in the type's [`Real`] (float32 for float16 and bfloat16, float64 for
//! float64), rounding once on the way out, on the library's maps ([`Float::map_r`],
//! [`broadcast::zip`]): each op is matched once per launch and gets its own monomorphized
//! loop. The unary float functions are arms of the library's one unary map
//! (`elementwise::unary`), beside ONNX's; this file registers them with GE's contract
//! (required attributes, integer forms) and computes the rest.
//!
//! - Unary: Rsqrt `1/sqrt(x)`, Square `x*x`, Inv `1/x`, Log1p, Expm1, Rint (round half to
//!   even), Erfinv, LogSigmoid `-softplus(-x)`, BNLL `ln(1+e^x)` (Caffe's), FastGelu
//!   `x / (1 + e^(-1.702|x|)) * e^(0.851 (x - |x|))`, FastGeluV2 (ops-nn's polynomial
//!   form, below), Relu6 `min(max(x, 0), 6)`, Relu6D (`scale` 1: `min(max(x, 0), 6 scale)`),
//!   SoftplusV2 (`beta` 1, `threshold` 20: x where `beta*x > threshold`, else
//!   `ln(1 + e^(beta x)) / beta`), CeluV2 (`alpha` 1, ONNX's Celu), HardShrink and
//!   SoftShrink (`lambd` 0.5), ThresholdV2D (`threshold`, `value` required: x where
//!   `x > threshold`, else value), Threshold (`threshold` 0, Caffe's: 1 where
//!   `x > threshold`, else 0), NanToNum (`nan`, `posinf`, `neginf` required).
//! - A scalar attribute `value` (required): Muls `x*value`, Adds `x+value`, Fills (x's
//!   shape and type filled with value). OnesLike, ZerosLike. On integer x, `value` is
//!   converted to x's type first (toward zero), and the arithmetic wraps.
//! - Binary, broadcast as NumPy's: SquaredDifference `(x1-x2)^2`, FloorDiv, FloorMod
//!   (the divisor's sign, as Python's `%`), TruncateDiv, TruncateMod (C's `fmod`),
//!   DivNoNan (0 where x2 is 0), MulNoNan (0 where x2 is 0, even when x1 is inf or NaN),
//!   Atan2 `atan2(x1, x2)`, Xlogy (0 where x1 is 0 and x2 is not NaN, else `x1 ln x2`,
//!   as ops-math's), Axpy (`alpha`
//!   required: `x1 + alpha*x2`), NotEqual and IsClose (`rtol` 1e-5, `atol` 1e-8,
//!   `equal_nan` false: `|x1-x2| <= atol + rtol|x2|`) to bool, Lerp
//!   `start + weight (end - start)`. Integer division by zero gives 0 (the library's
//!   rule; GE's kernels leave it undefined).

use half::{bf16, f16};

use super::attrs::required_float;
use crate::dispatch;
use crate::ops::elementwise::binary::{binary as binary_map, mismatch, unsupported};
use crate::ops::elementwise::broadcast;
use crate::ops::elementwise::num::{Float, Num, Real};
use crate::ops::elementwise::{infer_arithmetic, infer_comparison};
use crate::ops::{
    DType, InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut, TensorRef, meta,
};

/// The unary float functions (input and output of x's type and shape).
const UNARY: &[&str] = &[
    "Rsqrt",
    "Square",
    "Inv",
    "Log1p",
    "Expm1",
    "Rint",
    "Erfinv",
    "LogSigmoid",
    "BNLL",
    "FastGelu",
    "Relu6",
    "Relu6D",
    "FastGeluV2",
    "SoftplusV2",
    "CeluV2",
    "HardShrink",
    "SoftShrink",
    "ThresholdV2D",
    "Threshold",
    "NanToNum",
    "Muls",
    "Adds",
];

/// Unary ops that also take integer x.
const UNARY_INT: &[&str] = &["Square", "Relu6", "Relu6D", "Inv", "Muls", "Adds"];

/// Fills of x's shape and type.
const FILLS: &[&str] = &["Fills", "OnesLike", "ZerosLike"];

/// Binary ops of one type in and out.
const BINARY: &[&str] = &[
    "SquaredDifference",
    "FloorDiv",
    "FloorMod",
    "TruncateDiv",
    "TruncateMod",
    "DivNoNan",
    "MulNoNan",
    "Atan2",
    "Xlogy",
    "Axpy",
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    for &name in UNARY {
        reg.add(OpSpec::new(name, infer_unary).computes(unary));
    }
    for &name in FILLS {
        reg.add(OpSpec::new(name, infer_unary).computes(fill));
    }
    for &name in BINARY {
        reg.add(OpSpec::new(name, infer_binary).computes(binary));
    }
    reg.add(OpSpec::new("NotEqual", infer_comparison).computes(compare));
    reg.add(OpSpec::new("IsClose", infer_comparison).computes(compare));
    reg.add(OpSpec::new("Lerp", infer_lerp).computes(lerp));
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    UNARY
        .iter()
        .chain(FILLS)
        .chain(BINARY)
        .chain(&["NotEqual", "IsClose", "Lerp"])
        .copied()
}

/// The attributes each op requires, checked at inference so a node without them does not
/// lower.
fn required_attrs(op: &str) -> &'static [&'static str] {
    match op {
        "Muls" | "Adds" | "Fills" => &["value"],
        "ThresholdV2D" => &["threshold", "value"],
        "NanToNum" => &["nan", "posinf", "neginf"],
        "Axpy" => &["alpha"],
        _ => &[],
    }
}

fn check_required(ctx: &InferCtx) -> Result<(), OpError> {
    for name in required_attrs(ctx.op) {
        required_float(ctx, name)?;
    }
    Ok(())
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::Bf16)
}

fn infer_unary(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    check_required(ctx)?;
    let x = &ctx.inputs[0];
    let ints = UNARY_INT.contains(&ctx.op) && (x.dtype.is_int() && x.dtype != DType::Bool);
    let any = FILLS.contains(&ctx.op);
    if !(is_float(x.dtype) || ints || any) {
        return Err(unsupported(ctx, x.dtype));
    }
    Ok(vec![x.clone()])
}

fn infer_binary(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    check_required(ctx)?;
    let out = infer_arithmetic(ctx)?;
    let d = ctx.inputs[0].dtype;
    let float_only = matches!(ctx.op, "Atan2" | "Xlogy");
    if !(is_float(d) || (!float_only && d.is_int() && d != DType::Bool)) {
        return Err(unsupported(ctx, d));
    }
    Ok(out)
}

fn infer_lerp(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    let d = ctx.inputs[0].dtype;
    if !is_float(d) {
        return Err(unsupported(ctx, d));
    }
    for (i, t) in ctx.inputs.iter().enumerate() {
        if t.dtype != d {
            return Err(ctx.input_error(i, format!("is {}, input 0 is {d}", t.dtype)));
        }
    }
    let shapes: Vec<Option<&[i64]>> = ctx.inputs.iter().map(|t| t.shape.as_deref()).collect();
    let shape = crate::ops::elementwise::broadcast(&shapes)
        .map_err(|(a, b)| ctx.input_error(b, format!("does not broadcast with input {a}")))?;
    Ok(meta(d, shape))
}

/// The unary ops.
fn unary(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let (x, out) = (&inputs[0], &mut outputs[0]);
    if x.dtype.is_int() {
        return dispatch!(x.dtype, T in [i8, i16, i32, i64, u8, u16, u32, u64] =>
            int_unary::<T>(ctx, x.slice::<T>()?, out.slice_mut::<T>()?),
            other => Err(unsupported(ctx, other)));
    }
    // The float functions are the library's unary maps, one match for both vocabularies.
    crate::ops::elementwise::unary::compute(ctx, inputs, outputs)
}

fn int_unary<T: Num>(ctx: &InferCtx, x: &[T], out: &mut [T]) -> Result<(), OpError> {
    let value =
        || -> Result<T, OpError> { Ok(T::from_f64(f64::from(required_float(ctx, "value")?))) };
    match ctx.op {
        "Square" => broadcast::par_map(x, out, move |v| v.mul(v)),
        "Relu6" | "Relu6D" => {
            let six = T::from_f64(6.0 * f64::from(ctx.attr_float("scale", 1.0)?));
            broadcast::par_map(x, out, move |v| {
                if v < T::zero() {
                    T::zero()
                } else if v > six {
                    six
                } else {
                    v
                }
            })
        }
        // 1/x truncated (GE computes it in float32 and casts back toward zero); 1/0 is
        // 0, the library's integer division by zero.
        "Inv" => broadcast::par_map(x, out, move |v| T::from_f64(1.0).div(v)),
        "Muls" => {
            let k = value()?;
            broadcast::par_map(x, out, move |v| v.mul(k))
        }
        "Adds" => {
            let k = value()?;
            broadcast::par_map(x, out, move |v| v.add(k))
        }
        _ => return Err(unsupported(ctx, T::DTYPE)),
    }
    Ok(())
}

/// Fills, OnesLike, ZerosLike: every element one value (a bool is 1 where the value is
/// not 0).
fn fill(ctx: &InferCtx, _inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let v = match ctx.op {
        "Fills" => f64::from(required_float(ctx, "value")?),
        "OnesLike" => 1.0,
        _ => 0.0,
    };
    let out = &mut outputs[0];
    if out.dtype == DType::Bool {
        out.slice_mut::<u8>()?.fill(u8::from(v != 0.0));
        return Ok(());
    }
    dispatch!(out.dtype,
        T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
            out.slice_mut::<T>()?.fill(T::from_f64(v)),
        other => return Err(unsupported(ctx, other)));
    Ok(())
}

/// The binary ops.
fn binary(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let (a, b, out) = (&inputs[0], &inputs[1], &mut outputs[0]);
    if a.dtype.is_int() {
        return dispatch!(a.dtype, T in [i8, i16, i32, i64, u8, u16, u32, u64] =>
            int_binary::<T>(ctx, a, b, out),
            other => Err(unsupported(ctx, other)));
    }
    dispatch!(a.dtype, T in [f32, f64, f16, bf16] =>
        float_binary::<T>(ctx, a, b, out),
        other => Err(unsupported(ctx, other)))
}

fn float_binary<T: Float>(
    ctx: &InferCtx,
    a: &TensorRef,
    b: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), OpError> {
    type R<T> = <T as Float>::R;
    // Each arm is `|x, y| expr` on the compute type, rounded once.
    macro_rules! zip_r {
        (|$x:ident, $y:ident| $e:expr) => {
            binary_map(ctx, a, b, out, |p: T, q: T| {
                let ($x, $y): (R<T>, R<T>) = (p.to_r(), q.to_r());
                T::from_r($e)
            })
        };
    }
    let zero = R::<T>::c(0.0);
    match ctx.op {
        "SquaredDifference" => zip_r!(|x, y| (x - y) * (x - y)),
        "FloorDiv" => zip_r!(|x, y| (x / y).floor()),
        "FloorMod" => binary_map(ctx, a, b, out, T::modulo),
        "TruncateDiv" => zip_r!(|x, y| trunc(x / y)),
        "TruncateMod" => binary_map(ctx, a, b, out, T::fmod),
        "DivNoNan" => zip_r!(|x, y| if y == zero { zero } else { x / y }),
        "MulNoNan" => zip_r!(|x, y| if y == zero { zero } else { x * y }),
        "Atan2" => zip_r!(|x, y| R::<T>::c(x.to_f64().atan2(y.to_f64()))),
        // ops-math's xlogy: a NaN x2 gives NaN even where x1 is 0.
        "Xlogy" => zip_r!(|x, y| if x == zero && !y.is_nan() {
            zero
        } else {
            x * y.ln()
        }),
        "Axpy" => {
            let alpha = R::<T>::c(f64::from(required_float(ctx, "alpha")?));
            zip_r!(|x, y| x + alpha * y)
        }
        _ => Err(unsupported(ctx, T::DTYPE)),
    }
}

/// Rounds toward zero.
#[inline]
fn trunc<R: Real>(v: R) -> R {
    if v < R::c(0.0) { v.ceil() } else { v.floor() }
}

fn int_binary<T: Num>(
    ctx: &InferCtx,
    a: &TensorRef,
    b: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), OpError> {
    match ctx.op {
        "SquaredDifference" => binary_map(ctx, a, b, out, |x: T, y: T| {
            let d = x.sub(y);
            d.mul(d)
        }),
        // The truncated quotient, one less where the remainder is non-zero and the signs
        // differ: Python's `//`.
        "FloorDiv" => binary_map(ctx, a, b, out, |x: T, y: T| {
            let q = x.div(y);
            let r = x.fmod(y);
            if r != T::zero() && ((r < T::zero()) != (y < T::zero())) {
                q.sub(T::from_f64(1.0))
            } else {
                q
            }
        }),
        "FloorMod" => binary_map(ctx, a, b, out, T::modulo),
        "TruncateDiv" => binary_map(ctx, a, b, out, T::div),
        "TruncateMod" => binary_map(ctx, a, b, out, T::fmod),
        "DivNoNan" => binary_map(ctx, a, b, out, |x: T, y: T| {
            if y == T::zero() { T::zero() } else { x.div(y) }
        }),
        "MulNoNan" => binary_map(ctx, a, b, out, |x: T, y: T| x.mul(y)),
        "Axpy" => {
            let alpha = T::from_f64(f64::from(required_float(ctx, "alpha")?));
            binary_map(ctx, a, b, out, |x: T, y: T| x.add(alpha.mul(y)))
        }
        _ => Err(unsupported(ctx, T::DTYPE)),
    }
}

/// NotEqual and IsClose, to bool.
fn compare(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    fn go<T: Num>(
        ctx: &InferCtx,
        a: &TensorRef,
        b: &TensorRef,
        out: &mut TensorMut,
    ) -> Result<(), OpError> {
        if ctx.op == "NotEqual" {
            return binary_map(ctx, a, b, out, |x: T, y: T| u8::from(x != y));
        }
        let rtol = f64::from(ctx.attr_float("rtol", 1e-5)?);
        let atol = f64::from(ctx.attr_float("atol", 1e-8)?);
        let equal_nan = ctx.attr_bool("equal_nan", false)?;
        binary_map(ctx, a, b, out, move |x: T, y: T| {
            let (x, y) = (x.to_f64(), y.to_f64());
            u8::from(if x.is_nan() || y.is_nan() {
                equal_nan && x.is_nan() && y.is_nan()
            } else if x == y {
                // Equal infinities are close; `inf - inf` would say otherwise.
                true
            } else {
                (x - y).abs() <= atol + rtol * y.abs()
            })
        })
    }
    let (a, b, out) = (&inputs[0], &inputs[1], &mut outputs[0]);
    // A bool compares as its byte.
    let dtype = match a.dtype {
        DType::Bool => DType::U8,
        d => d,
    };
    dispatch!(dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
        go::<T>(ctx, a, b, out),
        other => Err(unsupported(ctx, other)))
}

/// Lerp(start, end, weight): `start + weight (end - start)`.
fn lerp(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    fn go<T: Float>(ctx: &InferCtx, ins: &[TensorRef], out: &mut TensorMut) -> Result<(), OpError> {
        let shape = out.shape;
        broadcast::zip3(
            (ins[0].slice::<T>()?, ins[0].shape),
            (ins[1].slice::<T>()?, ins[1].shape),
            (ins[2].slice::<T>()?, ins[2].shape),
            (out.slice_mut::<T>()?, shape),
            |s: T, e: T, w: T| {
                let (s, e, w) = (s.to_r(), e.to_r(), w.to_r());
                T::from_r(s + w * (e - s))
            },
        )
        .map_err(mismatch(ctx, shape))
    }
    dispatch!(inputs[0].dtype, T in [f32, f64, f16, bf16] =>
        go::<T>(ctx, inputs, &mut outputs[0]),
        other => Err(unsupported(ctx, other)))
}

#[cfg(test)]
mod tests;
