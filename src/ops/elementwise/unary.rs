//! Unary compute functions: the math functions and activations (one generic map over a slice per
//! op), ONNX's and GE's own (Rsqrt, Muls, FastGelu, ..., registered by `ge::math`), the
//! integer forms of Abs, Neg, Sign and Relu, BitwiseNot, Not, IsNaN, IsInf and Identity.
//!
//! Float ops run in the type's [`Real`] (f32 for float16 and bfloat16, rounding once per
//! element on the way out). Each op is matched once per launch and its arm is its own
//! monomorphized loop, so the per-element work is the formula alone.

use half::{bf16, f16};

use super::broadcast::par_map;
use super::num::{Float, Int, Num, Real};
use super::vmath::Fun;
use crate::dispatch;
use crate::ops::DType;
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

fn unsupported(ctx: &InferCtx, dtype: DType) -> OpError {
    ctx.input_error(0, format!("{dtype} is not supported by this op"))
}

/// Compute of the unary math ops and activations.
pub fn compute(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, out) = (&inputs[0], &mut outputs[0]);
    let int_op = matches!(ctx.op, "Abs" | "Neg" | "Sign" | "Relu");
    if int_op && x.dtype.is_int() {
        return dispatch!(x.dtype, T in [i8, i16, i32, i64, u8, u16, u32, u64] =>
            int_unary::<T>(ctx, x.slice::<T>()?, out.slice_mut::<T>()?),
            other => Err(unsupported(ctx, other)));
    }
    dispatch!(x.dtype, T in [f32, f64, f16, bf16] =>
        float_unary::<T>(ctx, x.slice::<T>()?, out.slice_mut::<T>()?),
        other => Err(unsupported(ctx, other)))
}

fn int_unary<T: Num>(ctx: &InferCtx, x: &[T], out: &mut [T]) -> Result<(), OpError> {
    match ctx.op {
        "Abs" => par_map(x, out, T::abs),
        "Neg" => par_map(x, out, T::neg),
        "Sign" => par_map(x, out, T::sign),
        "Relu" => par_map(x, out, move |v| v.max_nan(T::zero())),
        _ => return Err(unsupported(ctx, T::DTYPE)),
    }
    Ok(())
}

fn float_unary<T: Float>(ctx: &InferCtx, x: &[T], out: &mut [T]) -> Result<(), OpError> {
    if let Some(fun) = vector_fun(ctx)?
        && T::map_fun(fun, x, out)
    {
        return Ok(());
    }
    // Each arm maps `|v| expr` with `v` already in the compute type `R`.
    macro_rules! map {
        (|$v:ident| $e:expr) => {
            T::map_r(x, out, move |$v: R<T>| $e)
        };
    }
    type R<T> = <T as Float>::R;
    let c = |v: f64| R::<T>::c(v);
    let attr = |name: &str, default: f32| -> Result<R<T>, OpError> {
        Ok(c(ctx.attr_float(name, default)? as f64))
    };
    let (zero, one) = (c(0.0), c(1.0));
    // `v < 0` rather than `v > 0` picks the branch so NaN passes through, as NumPy's
    // maximum(x, 0) does.
    let max0 = move |v: R<T>| if v < zero { zero } else { v };
    match ctx.op {
        "Abs" => map!(|v| v.abs()),
        "Neg" => map!(|v| -v),
        "Sign" => par_map(x, out, T::sign),
        "Acos" => map!(|v| v.acos()),
        "Acosh" => map!(|v| v.acosh()),
        "Asin" => map!(|v| v.asin()),
        "Asinh" => map!(|v| v.asinh()),
        "Atan" => map!(|v| v.atan()),
        "Atanh" => map!(|v| v.atanh()),
        "Cos" => map!(|v| v.cos()),
        "Cosh" => map!(|v| v.cosh()),
        "Sin" => map!(|v| v.sin()),
        "Sinh" => map!(|v| v.sinh()),
        "Tan" => map!(|v| v.tan()),
        "Tanh" => map!(|v| v.tanh()),
        "Ceil" => map!(|v| v.ceil()),
        "Floor" => map!(|v| v.floor()),
        "Round" => map!(|v| v.round_even()),
        "Erf" => map!(|v| v.erf()),
        "Exp" => map!(|v| v.exp()),
        "Log" => map!(|v| v.ln()),
        "Sqrt" => map!(|v| v.sqrt()),
        "Reciprocal" => map!(|v| one / v),
        "Relu" => map!(|v| max0(v)),
        "LeakyRelu" => {
            // ONNX's `alpha` (the importer always writes it), else GE's `negative_slope`,
            // whose default is 0 (REG_OP(LeakyRelu) in ops-nn's leaky_relu_proto.h).
            let alpha = if ctx.attrs.get("alpha").is_some() {
                attr("alpha", 0.01)?
            } else {
                attr("negative_slope", 0.0)?
            };
            map!(|v| if v < zero { alpha * v } else { v })
        }
        "ThresholdedRelu" => {
            let alpha = attr("alpha", 1.0)?;
            map!(|v| if v > alpha { v } else { zero })
        }
        "Elu" => {
            let alpha = attr("alpha", 1.0)?;
            map!(|v| if v < zero { alpha * v.exp_m1() } else { v })
        }
        "Celu" => {
            let alpha = attr("alpha", 1.0)?;
            map!(|v| if v < zero {
                alpha * (v / alpha).exp_m1()
            } else {
                v
            })
        }
        "Selu" => {
            let alpha = attr("alpha", 1.673_263_2)?;
            let gamma = attr("gamma", 1.050_701)?;
            map!(|v| if v <= zero {
                gamma * alpha * v.exp_m1()
            } else {
                gamma * v
            })
        }
        "Sigmoid" => map!(|v| sigmoid(v)),
        "HardSigmoid" => {
            let (alpha, beta) = (attr("alpha", 0.2)?, attr("beta", 0.5)?);
            map!(|v| hard_sigmoid(v, alpha, beta))
        }
        "HardSwish" => {
            let (alpha, beta) = (c(1.0 / 6.0), c(0.5));
            map!(|v| v * hard_sigmoid(v, alpha, beta))
        }
        "Softplus" => map!(|v| softplus(v)),
        "Softsign" => map!(|v| v / (one + v.abs())),
        "Mish" => map!(|v| v * softplus(v).tanh()),
        "Gelu" => match ctx.attr_str("approximate", "none")? {
            "none" => {
                let s = c(std::f64::consts::FRAC_1_SQRT_2);
                map!(|v| c(0.5) * v * (one + (v * s).erf()))
            }
            "tanh" => {
                let k = c((2.0 / std::f64::consts::PI).sqrt());
                map!(|v| c(0.5) * v * (one + (k * (v + c(0.044_715) * v * v * v)).tanh()))
            }
            other => {
                return Err(ctx.attr_error("approximate", format!("{other:?} is not none or tanh")));
            }
        },
        "Shrink" => {
            let (lambd, bias) = (attr("lambd", 0.5)?, attr("bias", 0.0)?);
            map!(|v| if v < -lambd {
                v + bias
            } else if v > lambd {
                v - bias
            } else {
                zero
            })
        }
        _ => return ge_float_unary(ctx, x, out),
    }
    Ok(())
}

/// The ops [`super::vmath`] computes for float32, float16 and bfloat16 (float64 keeps the
/// scalar formulas below): the transcendental functions and the activations made of
/// them, which would otherwise cost a libm call per element.
fn vector_fun(ctx: &InferCtx) -> Result<Option<Fun>, OpError> {
    Ok(Some(match ctx.op {
        "Exp" => Fun::Exp,
        "Log" => Fun::Log,
        "Erf" => Fun::Erf,
        "Tanh" => Fun::Tanh,
        "Sigmoid" => Fun::Sigmoid,
        "Softplus" | "BNLL" => Fun::Softplus,
        "Mish" => Fun::Mish,
        "Gelu" => match ctx.attr_str("approximate", "none")? {
            "none" => Fun::Gelu,
            "tanh" => Fun::GeluTanh,
            _ => return Ok(None),
        },
        _ => return Ok(None),
    }))
}

/// GE's own unary float functions (registered by `crate::ops::ge::math`, from their
/// prototypes' documentation): the same maps as [`float_unary`]'s, in their own match.
fn ge_float_unary<T: Float>(ctx: &InferCtx, x: &[T], out: &mut [T]) -> Result<(), OpError> {
    macro_rules! map {
        (|$v:ident| $e:expr) => {
            T::map_r(x, out, move |$v: R<T>| $e)
        };
    }
    type R<T> = <T as Float>::R;
    let c = |v: f64| R::<T>::c(v);
    let attr = |name: &str, default: f32| -> Result<R<T>, OpError> {
        Ok(c(ctx.attr_float(name, default)? as f64))
    };
    // A float attribute GE's prototype requires (Muls' `value`, NanToNum's three).
    let req = |name: &str| -> Result<R<T>, OpError> {
        match ctx.attrs.get(name) {
            None => Err(ctx.attr_error(name, "is required and missing")),
            Some(_) => attr(name, 0.0),
        }
    };
    let (zero, one) = (c(0.0), c(1.0));
    match ctx.op {
        "Rsqrt" => map!(|v| one / v.sqrt()),
        "Square" => map!(|v| v * v),
        "Inv" => map!(|v| one / v),
        "Log1p" => map!(|v| v.ln_1p()),
        "Expm1" => map!(|v| v.exp_m1()),
        "Rint" => map!(|v| v.round_even()),
        "Erfinv" => map!(|v| c(super::num::erfinv(v.to_f64()))),
        "LogSigmoid" => map!(|v| -softplus(-v)),
        "BNLL" => map!(|v| softplus(v)),
        "FastGelu" => {
            let (a, b) = (c(-1.702), c(0.851));
            map!(|v| v / (one + (a * v.abs()).exp()) * (b * (v - v.abs())).exp())
        }
        // ops-nn's fast_gelu_v2 proto: `x (sgn(x) [-0.1444 (min(|0.7071 x|, 1.769) -
        // 1.769)^2 + 0.5] + 0.5)`, sgn(x) = (x + 1e-12) / |x + 1e-12|.
        "FastGeluV2" => {
            let (a, b, k, e) = (
                c(-0.1444),
                c(1.769),
                c(std::f64::consts::FRAC_1_SQRT_2),
                c(1e-12),
            );
            let half = c(0.5);
            map!(|v| {
                let z = (k * v).abs();
                let z = if z < b { z } else { b };
                let sgn = (v + e) / (v + e).abs();
                v * (sgn * (a * (z - b) * (z - b) + half) + half)
            })
        }
        // `v < 0` first so NaN passes through, as the library's Relu.
        "Relu6" | "Relu6D" => {
            let six = c(6.0) * attr("scale", 1.0)?;
            map!(|v| if v < zero {
                zero
            } else if v > six {
                six
            } else {
                v
            })
        }
        "SoftplusV2" => {
            let (beta, threshold) = (attr("beta", 1.0)?, attr("threshold", 20.0)?);
            map!(|v| if beta * v > threshold {
                v
            } else {
                (beta * v).exp().ln_1p() / beta
            })
        }
        "CeluV2" => {
            let alpha = attr("alpha", 1.0)?;
            map!(|v| if v < zero {
                alpha * (v / alpha).exp_m1()
            } else {
                v
            })
        }
        "HardShrink" => {
            let lambd = attr("lambd", 0.5)?;
            map!(|v| if v > lambd || v < -lambd { v } else { zero })
        }
        "SoftShrink" => {
            let lambd = attr("lambd", 0.5)?;
            map!(|v| if v > lambd {
                v - lambd
            } else if v < -lambd {
                v + lambd
            } else {
                zero
            })
        }
        "ThresholdV2D" => {
            let (threshold, value) = (req("threshold")?, req("value")?);
            map!(|v| if v > threshold { v } else { value })
        }
        "Threshold" => {
            let threshold = attr("threshold", 0.0)?;
            map!(|v| if v > threshold { one } else { zero })
        }
        "NanToNum" => {
            let (nan, pos, neg) = (req("nan")?, req("posinf")?, req("neginf")?);
            map!(|v| if v.is_nan() {
                nan
            } else if v.is_infinite() {
                if v > zero { pos } else { neg }
            } else {
                v
            })
        }
        "Muls" => {
            let k = req("value")?;
            map!(|v| v * k)
        }
        "Adds" => {
            let k = req("value")?;
            map!(|v| v + k)
        }
        _ => return Err(unsupported(ctx, T::DTYPE)),
    }
    Ok(())
}

/// 1 / (1 + e^-x), written so neither branch overflows.
#[inline]
fn sigmoid<R: Real>(x: R) -> R {
    let one = R::c(1.0);
    if x >= R::c(0.0) {
        one / (one + (-x).exp())
    } else {
        let e = x.exp();
        e / (one + e)
    }
}

#[inline]
fn hard_sigmoid<R: Real>(x: R, alpha: R, beta: R) -> R {
    let y = alpha * x + beta;
    let (zero, one) = (R::c(0.0), R::c(1.0));
    if y < zero {
        zero
    } else if y > one {
        one
    } else {
        y
    }
}

/// ln(1 + e^x) without overflow for large x or loss for very negative x.
#[inline]
fn softplus<R: Real>(x: R) -> R {
    if x > R::c(0.0) {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}

/// BitwiseNot on integers.
pub fn compute_bitwise_not(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, out) = (&inputs[0], &mut outputs[0]);
    fn not<T: Int>(x: &[T], out: &mut [T]) {
        par_map(x, out, T::not)
    }
    dispatch!(x.dtype, T in [i8, i16, i32, i64, u8, u16, u32, u64] =>
        not::<T>(x.slice::<T>()?, out.slice_mut::<T>()?),
        other => return Err(unsupported(ctx, other)));
    Ok(())
}

/// Not / LogicalNot on bools.
pub fn compute_not(
    _ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    par_map(
        inputs[0].slice::<u8>()?,
        outputs[0].slice_mut::<u8>()?,
        |v| (v == 0) as u8,
    );
    Ok(())
}

/// IsNaN / IsNan and IsInf (with `detect_positive` and `detect_negative`): float in, bool
/// out.
pub fn compute_is_class(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, out) = (&inputs[0], &mut outputs[0]);
    let inf = ctx.op == "IsInf";
    let pos = ctx.attr_int("detect_positive", 1)? != 0;
    let neg = ctx.attr_int("detect_negative", 1)? != 0;
    fn classify<T: Float>(x: &[T], out: &mut [u8], inf: bool, pos: bool, neg: bool) {
        if inf {
            par_map(x, out, move |v| {
                let v = v.to_r();
                let hit = v.is_infinite() && if v.is_sign_negative() { neg } else { pos };
                hit as u8
            })
        } else {
            par_map(x, out, move |v| v.is_nan() as u8)
        }
    }
    dispatch!(x.dtype, T in [f32, f64, f16, bf16] =>
        classify::<T>(x.slice::<T>()?, out.slice_mut::<u8>()?, inf, pos, neg),
        other => return Err(unsupported(ctx, other)));
    Ok(())
}

/// Identity: the bytes, whatever the type.
pub fn compute_identity(
    _ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let n = outputs[0].data.len().min(inputs[0].data.len());
    outputs[0].data[..n].copy_from_slice(&inputs[0].data[..n]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::run1;
    use crate::ops::testing::try_run;
    use half::f16;

    use crate::ops::Attr;
    use crate::ops::Tensor;

    /// 16-bit floats map a block at a time through f32 (`par_map_half`): every length
    /// around the block and the parallel split gives the bits of the per-element map,
    /// for float16 and bfloat16, NaN and infinities included.
    #[test]
    fn half_types_map_in_blocks_with_the_bits_of_the_per_element_map() {
        use half::bf16;
        let value = |i: usize| match i % 11 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => -70000.0,
            _ => (i as f32 * 0.37).sin() * 9.0,
        };
        let alpha = [("alpha", Attr::Float(0.1))];
        type Case<'a> = (&'a str, &'a [(&'a str, Attr)], fn(f32) -> f32);
        let cases: [Case; 3] = [
            ("LeakyRelu", &alpha, |v| if v < 0.0 { 0.1 * v } else { v }),
            ("Exp", &[], f32::exp),
            ("Tanh", &[], f32::tanh),
        ];
        for n in [1, 255, 256, 257, 1000, 2 * (1 << 14) + 3] {
            for (op, attrs, f) in cases {
                let h: Vec<f16> = (0..n).map(|i| f16::from_f32(value(i))).collect();
                let got = run1(op, attrs, &[Tensor::from_vec(&[n], &h)]);
                let want: Vec<u16> = h
                    .iter()
                    .map(|v| f16::from_f32(f(v.to_f32())).to_bits())
                    .collect();
                let got: Vec<u16> = got
                    .slice::<f16>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                assert_eq!(got, want, "{op} float16, {n} elements");
                let b: Vec<bf16> = (0..n).map(|i| bf16::from_f32(value(i))).collect();
                let got = run1(op, attrs, &[Tensor::from_vec(&[n], &b)]);
                let want: Vec<u16> = b
                    .iter()
                    .map(|v| bf16::from_f32(f(v.to_f32())).to_bits())
                    .collect();
                let got: Vec<u16> = got
                    .slice::<bf16>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                assert_eq!(got, want, "{op} bfloat16, {n} elements");
            }
        }
    }

    fn f32s(op: &str, attrs: &[(&str, Attr)], x: &[f32]) -> Vec<f32> {
        run1(op, attrs, &[Tensor::from_vec(&[x.len()], x)])
            .slice::<f32>()
            .unwrap()
            .to_vec()
    }

    fn close(got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= 1e-6 + 1e-5 * w.abs(),
                "{got:?} vs {want:?}"
            );
        }
    }

    #[test]
    fn activations() {
        let x = [-2.0f32, -0.5, 0.0, 0.5, 2.0];
        close(&f32s("Relu", &[], &x), &[0.0, 0.0, 0.0, 0.5, 2.0]);
        close(
            &f32s("LeakyRelu", &[("alpha", Attr::Float(0.1))], &x),
            &[-0.2, -0.05, 0.0, 0.5, 2.0],
        );
        close(
            &f32s("Sigmoid", &[], &[-100.0, 0.0, 100.0]),
            &[0.0, 0.5, 1.0],
        );
        close(&f32s("HardSigmoid", &[], &x), &[0.1, 0.4, 0.5, 0.6, 0.9]);
        close(
            &f32s("HardSwish", &[], &[-4.0, 1.0, 4.0]),
            &[0.0, 1.0 * (1.0 / 6.0 + 0.5), 4.0],
        );
        close(
            &f32s("Softplus", &[], &[-100.0, 0.0, 100.0]),
            &[0.0, std::f32::consts::LN_2, 100.0],
        );
        close(&f32s("Softsign", &[], &[-3.0, 1.0]), &[-0.75, 0.5]);
        close(
            &f32s("Shrink", &[("bias", Attr::Float(1.0))], &x),
            &[-1.0, 0.0, 0.0, 0.0, 1.0],
        );
        close(
            &f32s("ThresholdedRelu", &[], &[0.5, 1.0, 1.5]),
            &[0.0, 0.0, 1.5],
        );
        close(&f32s("Elu", &[], &[-1.0, 1.0]), &[(-1f32).exp_m1(), 1.0]);
        // Gelu(1) = 0.5 (1 + erf(1/sqrt 2)) = 0.8413447.
        close(&f32s("Gelu", &[], &[1.0]), &[0.841_344_7]);
        close(
            &f32s("Gelu", &[("approximate", Attr::Str("tanh".into()))], &[1.0]),
            &[0.841_192],
        );
    }

    #[test]
    fn math_and_rounding() {
        close(
            &f32s("Round", &[], &[0.5, 1.5, 2.5, -0.5, -1.7]),
            &[0.0, 2.0, 2.0, -0.0, -2.0],
        );
        close(&f32s("Reciprocal", &[], &[4.0, -0.5]), &[0.25, -2.0]);
        close(&f32s("Erf", &[], &[0.5]), &[0.520_499_9]);
        let s = f32s("Sign", &[], &[-3.0, 0.0, 2.0, f32::NAN]);
        assert_eq!(&s[..3], &[-1.0, 0.0, 1.0]);
        assert!(s[3].is_nan());
    }

    #[test]
    fn half_precision_computes_through_f32() {
        let x: Vec<f16> = [0.1f32, 1.0].iter().map(|&v| f16::from_f32(v)).collect();
        let y = run1("Exp", &[], &[Tensor::from_vec(&[2], &x)]);
        let want: Vec<f16> = x.iter().map(|v| f16::from_f32(v.to_f32().exp())).collect();
        assert_eq!(y.slice::<f16>().unwrap(), &want[..]);
    }

    #[test]
    fn integers() {
        let x = Tensor::from_vec(&[4], &[-128i8, -3, 0, 5]);
        assert_eq!(
            run1("Abs", &[], std::slice::from_ref(&x))
                .slice::<i8>()
                .unwrap(),
            &[-128, 3, 0, 5]
        );
        assert_eq!(
            run1("Neg", &[], std::slice::from_ref(&x))
                .slice::<i8>()
                .unwrap(),
            &[-128, 3, 0, -5]
        );
        assert_eq!(
            run1("Relu", &[], std::slice::from_ref(&x))
                .slice::<i8>()
                .unwrap(),
            &[0, 0, 0, 5]
        );
        assert_eq!(
            run1("Sign", &[], std::slice::from_ref(&x))
                .slice::<i8>()
                .unwrap(),
            &[-1, -1, 0, 1]
        );
        let u = Tensor::from_vec(&[2], &[0u16, 0xf0f0]);
        assert_eq!(
            run1("BitwiseNot", &[], &[u]).slice::<u16>().unwrap(),
            &[0xffff, 0x0f0f]
        );
        assert!(try_run("Exp", &[], &[x], 1).is_err(), "no integer Exp");
    }

    #[test]
    fn classes_and_not() {
        let x = Tensor::from_vec(&[4], &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.0]);
        assert_eq!(
            run1("IsNaN", &[], std::slice::from_ref(&x))
                .slice::<u8>()
                .unwrap(),
            &[1, 0, 0, 0]
        );
        assert_eq!(
            run1("IsInf", &[], std::slice::from_ref(&x))
                .slice::<u8>()
                .unwrap(),
            &[0, 1, 1, 0]
        );
        assert_eq!(
            run1("IsInf", &[("detect_positive", Attr::Int(0))], &[x])
                .slice::<u8>()
                .unwrap(),
            &[0, 0, 1, 0]
        );
        let mut b = Tensor::zeroed(crate::ops::DType::Bool, &[2]);
        b.as_mut().slice_mut::<u8>().unwrap()[1] = 1;
        assert_eq!(run1("Not", &[], &[b]).slice::<u8>().unwrap(), &[1, 0]);
    }
}
