//! Broadcasting compute functions: arithmetic (Add ... Mod, Pow, PRelu), the variadic Max, Min, Sum
//! and Mean, comparisons, logic, the bitwise ops and BitShift, Where and Clip.
//!
//! Every compute function is a per-element function handed to the broadcasting engine
//! ([`super::broadcast`](mod@super::broadcast)); the op is matched once per launch, never per
//! element.

use half::{bf16, f16};

use super::broadcast::{
    Mismatch, PAR_MIN, accumulate, expand, par_map, same_dims, zip, zip_run, zip3,
};
use super::num::{Float, Int, Kind, Num, Real};
use crate::dispatch;
use crate::ops::DType;
use crate::ops::{InferCtx, OpError, SpecialFn, TensorMeta, TensorMut, TensorRef};

pub(crate) fn unsupported(ctx: &InferCtx, dtype: DType) -> OpError {
    ctx.input_error(0, format!("{dtype} is not supported by this op"))
}

pub(crate) fn mismatch<'a>(
    ctx: &'a InferCtx,
    out_shape: &'a [usize],
) -> impl Fn(Mismatch) -> OpError + 'a {
    move |m| {
        ctx.input_error(
            m.input,
            format!("does not broadcast to the output shape {out_shape:?}"),
        )
    }
}

/// `out = f(inputs[0], inputs[1])`, broadcast.
pub(crate) fn binary<A: Num, B: Num, O: Num>(
    ctx: &InferCtx,
    a: &TensorRef,
    b: &TensorRef,
    out: &mut TensorMut,
    f: impl Fn(A, B) -> O + Sync,
) -> Result<(), OpError> {
    let shape = out.shape;
    zip(
        (a.slice::<A>()?, a.shape),
        (b.slice::<B>()?, b.shape),
        (out.slice_mut::<O>()?, shape),
        f,
    )
    .map_err(mismatch(ctx, shape))
}

/// Add, Sub, Mul, Div/RealDiv, Mod, and the variadic Max, Min, Sum and Mean.
pub fn compute_arithmetic(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let out = &mut outputs[0];
    match ctx.op {
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "BitShift" => {
            dispatch!(inputs[0].dtype, T in [i8, i16, i32, i64, u8, u16, u32, u64] =>
                bitwise::<T>(ctx, inputs, out),
                other => Err(unsupported(ctx, other)))
        }
        // The input count first: a two-input Add then costs no string comparison here.
        _ if inputs.len() > 2 && matches!(ctx.op, "Sum" | "Mean") && !inputs[0].dtype.is_int() => {
            dispatch!(inputs[0].dtype, T in [f32, f64, f16, bf16] =>
                float_sum::<T>(ctx, inputs, out),
                other => Err(unsupported(ctx, other)))
        }
        _ => dispatch!(inputs[0].dtype,
            T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
                arithmetic::<T>(ctx, inputs, out),
            other => Err(unsupported(ctx, other))),
    }
}

/// Chooses a compute function specialized for a two-input Add, Sub, Mul, Div, Max, Min or Sum
/// launch (see [`SpecialFn`]) whose operands and output share one numeric dtype, each
/// operand read whole (the output's dims) or as one element, into a small output: the
/// case `zip` takes its shortcut for, decided once here instead of at every run. Larger
/// outputs keep the general path, which splits them over the compute cores and whose
/// dispatch is nothing beside their work.
pub fn specialize_arithmetic(ctx: &InferCtx, outputs: &[TensorMeta]) -> Option<SpecialFn> {
    let ([a, b], [out]) = (ctx.inputs, outputs) else {
        return None;
    };
    let dims = out.shape.as_deref()?;
    let len = dims.iter().try_fold(1usize, |n, &d| {
        usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
    })?;
    if len == 0 || len >= 2 * PAR_MIN {
        return None;
    }
    // Whole: the output's dims, leading ones aside (as `zip` compares them). One element:
    // every dim 1. Either way no more dims than the output has (or the output's shape
    // would be the wrong broadcast).
    let fits = |m: &TensorMeta| {
        m.dtype == out.dtype
            && m.shape.as_deref().is_some_and(|s| {
                s.len() <= dims.len() && (s.iter().all(|&d| d == 1) || same_dims(s, dims))
            })
    };
    if !fits(a) || !fits(b) {
        return None;
    }
    fn pick<T: Num>(op: &str) -> Option<SpecialFn> {
        Some(match op {
            "Add" | "Sum" => flat::<T, ADD>,
            "Sub" => flat::<T, SUB>,
            "Mul" => flat::<T, MUL>,
            "Div" | "RealDiv" => flat::<T, DIV>,
            "Max" => flat::<T, MAX>,
            "Min" => flat::<T, MIN>,
            _ => return None,
        })
    }
    dispatch!(out.dtype,
        T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] => pick::<T>(ctx.op),
        _other => None)
}

/// The ops [`flat`] is instantiated for: a const parameter, so each instance has its
/// operation inlined into its loops.
const ADD: u8 = 0;
const SUB: u8 = 1;
const MUL: u8 = 2;
const DIV: u8 = 3;
const MAX: u8 = 4;
const MIN: u8 = 5;

/// The per-element function of op `OP`: the one `arithmetic` hands `fold` for it.
#[inline(always)]
fn apply<T: Num, const OP: u8>(a: T, b: T) -> T {
    match OP {
        ADD => a.add(b),
        SUB => a.sub(b),
        MUL => a.mul(b),
        DIV => a.div(b),
        MAX => a.max_nan(b),
        _ => a.min_nan(b),
    }
}

/// `out = a OP b` for operands that are each the output's length or one element, as
/// [`specialize_arithmetic`] chose it: the same run `zip` makes of such a launch.
/// Declines (`false`, nothing written) when the bytes do not fit that.
fn flat<T: Num, const OP: u8>(ins: &[&[u8]], outs: &mut [&mut [u8]]) -> bool {
    let ([a, b], [out]) = (ins, outs) else {
        return false;
    };
    let (Ok(a), Ok(b), Ok(out)) = (
        bytemuck::try_cast_slice::<u8, T>(a),
        bytemuck::try_cast_slice::<u8, T>(b),
        bytemuck::try_cast_slice_mut::<u8, T>(out),
    ) else {
        return false;
    };
    let n = out.len();
    let step = |x: &[T]| match x.len() {
        l if l == n => Some(1),
        1 => Some(0),
        _ => None,
    };
    let (Some(sa), Some(sb)) = (step(a), step(b)) else {
        return false;
    };
    zip_run(out, a, b, [sa, sb], &apply::<T, OP>);
    true
}

fn arithmetic<T: Num>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    // Each arm hands `fold` its own function item (not a shared `fn` pointer), so every op
    // gets a loop with the operation inlined: Add of two f32 tensors is a vectorized zip.
    match ctx.op {
        "Add" | "Sum" => fold(ctx, inputs, out, T::add),
        "Sub" => fold(ctx, inputs, out, T::sub),
        "Mul" => fold(ctx, inputs, out, T::mul),
        "Div" | "RealDiv" => fold(ctx, inputs, out, T::div),
        "Mod" if ctx.attr_int("fmod", 0)? != 0 => fold(ctx, inputs, out, T::fmod),
        "Mod" if T::KIND == Kind::Float => {
            Err(ctx.attr_error("fmod", "must be 1 for floating-point inputs"))
        }
        "Mod" => fold(ctx, inputs, out, T::modulo),
        "Max" => fold(ctx, inputs, out, T::max_nan),
        "Min" => fold(ctx, inputs, out, T::min_nan),
        // Mean of one or two inputs here; more go through `float_sum`.
        "Mean" if T::KIND != Kind::Float => Err(unsupported(ctx, T::DTYPE)),
        "Mean" if inputs.len() == 2 => fold(ctx, inputs, out, |a: T, b: T| {
            T::from_f64((a.to_f64() + b.to_f64()) / 2.0)
        }),
        "Mean" => fold(ctx, inputs, out, |a: T, _| a),
        _ => Err(unsupported(ctx, T::DTYPE)),
    }
}

/// `out = f(...f(f(x0, x1), x2)..., xn)`, all broadcast: the binary ops (two inputs) and
/// the variadic ones.
fn fold<T: Num>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    out: &mut TensorMut,
    f: impl Fn(T, T) -> T + Sync + Copy,
) -> Result<(), OpError> {
    if inputs.len() == 2 {
        return binary(ctx, &inputs[0], &inputs[1], out, f);
    }
    // Broadcast the first input into the output, then fold the rest in.
    let shape = out.shape;
    let acc = out.slice_mut::<T>()?;
    expand(
        (inputs[0].slice::<T>()?, inputs[0].shape),
        (acc, shape),
        |v| v,
    )
    .map_err(mismatch(ctx, shape))?;
    for (k, x) in inputs.iter().enumerate().skip(1) {
        accumulate((acc, shape), (x.slice::<T>()?, x.shape), f)
            .map_err(|_| mismatch(ctx, shape)(Mismatch { input: k }))?;
    }
    Ok(())
}

/// Sum and Mean of three or more float inputs: accumulated in the compute type and rounded
/// once, so float16 does not round after every addition.
fn float_sum<T: Float>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let shape = out.shape;
    let mut acc = vec![T::R::c(0.0); out.len()];
    for (k, x) in inputs.iter().enumerate() {
        accumulate((&mut acc, shape), (x.slice::<T>()?, x.shape), |s, v: T| {
            s + v.to_r()
        })
        .map_err(|_| mismatch(ctx, shape)(Mismatch { input: k }))?;
    }
    let n = if ctx.op == "Mean" { inputs.len() } else { 1 };
    let scale = T::R::c(1.0 / n as f64);
    par_map(&acc, out.slice_mut::<T>()?, move |s| T::from_r(s * scale));
    Ok(())
}

fn bitwise<T: Int>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let (a, b) = (&inputs[0], &inputs[1]);
    match ctx.op {
        "BitwiseAnd" => binary(ctx, a, b, out, T::and),
        "BitwiseOr" => binary(ctx, a, b, out, T::or),
        "BitwiseXor" => binary(ctx, a, b, out, T::xor),
        _ => match ctx.attr_str("direction", "")? {
            "LEFT" => binary(ctx, a, b, out, T::shl),
            "RIGHT" => binary(ctx, a, b, out, T::shr),
            other => Err(ctx.attr_error("direction", format!("{other:?} is not LEFT or RIGHT"))),
        },
    }
}

/// Equal, Less, Greater, LessOrEqual/LessEqual, GreaterOrEqual/GreaterEqual: bool out.
pub fn compute_comparison(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    fn compare<T: Num>(
        ctx: &InferCtx,
        inputs: &[TensorRef],
        out: &mut TensorMut,
    ) -> Result<(), OpError> {
        let (a, b) = (&inputs[0], &inputs[1]);
        match ctx.op {
            "Equal" => binary(ctx, a, b, out, |a: T, b: T| (a == b) as u8),
            "Less" => binary(ctx, a, b, out, |a: T, b: T| (a < b) as u8),
            "Greater" => binary(ctx, a, b, out, |a: T, b: T| (a > b) as u8),
            "LessOrEqual" | "LessEqual" => binary(ctx, a, b, out, |a: T, b: T| (a <= b) as u8),
            _ => binary(ctx, a, b, out, |a: T, b: T| (a >= b) as u8),
        }
    }
    // A bool compares as its byte.
    let dtype = match inputs[0].dtype {
        DType::Bool => DType::U8,
        d => d,
    };
    dispatch!(dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
        compare::<T>(ctx, inputs, &mut outputs[0]),
        other => Err(unsupported(ctx, other)))
}

/// And, Or, Xor (and GE's LogicalAnd, LogicalOr) on bools.
pub fn compute_logic(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (a, b, out) = (&inputs[0], &inputs[1], &mut outputs[0]);
    match ctx.op {
        "And" | "LogicalAnd" => binary(ctx, a, b, out, |a: u8, b: u8| ((a != 0) & (b != 0)) as u8),
        "Or" | "LogicalOr" => binary(ctx, a, b, out, |a: u8, b: u8| ((a != 0) | (b != 0)) as u8),
        _ => binary(ctx, a, b, out, |a: u8, b: u8| ((a != 0) ^ (b != 0)) as u8),
    }
}

/// Whether a 1-D PRelu slope is one value per channel (dim 1): ONNX's PRelu before
/// opset 7, and GE's (`channel_slope`, which lowering sets on a GE graph's PRelu).
pub(crate) fn channel_slope(ctx: &InferCtx) -> Result<bool, OpError> {
    Ok(ctx.attr_int("onnx_opset", 7)? < 7 || ctx.attr_bool("channel_slope", false)?)
}

/// PRelu(x, slope): x where x >= 0, x * slope elsewhere. Before opset 7, and in GE's
/// PRelu, a 1-D slope holds one value per channel (axis 1); inference accepted it, and
/// here it is viewed as `[C, 1, ..., 1]` so it broadcasts the same way.
pub fn compute_prelu(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, slope) = (&inputs[0], &inputs[1]);
    let per_channel =
        channel_slope(ctx)? && slope.rank() == 1 && x.rank() >= 2 && slope.shape[0] == x.shape[1];
    let mut channel_shape = vec![1; x.rank().saturating_sub(1)];
    let slope = if per_channel {
        channel_shape[0] = slope.shape[0];
        TensorRef::new(slope.dtype, &channel_shape, slope.data)
    } else {
        *slope
    };
    fn prelu<T: Num>(
        ctx: &InferCtx,
        x: &TensorRef,
        s: &TensorRef,
        out: &mut TensorMut,
    ) -> Result<(), OpError> {
        let zero = T::zero();
        binary(
            ctx,
            x,
            s,
            out,
            |v: T, s: T| if v < zero { v.mul(s) } else { v },
        )
    }
    dispatch!(x.dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
        prelu::<T>(ctx, x, &slope, &mut outputs[0]),
        other => Err(unsupported(ctx, other)))
}

/// Pow(base, exponent): the output has the base's type; the exponent may be of any
/// numeric type. A float result is computed in f64 (or the base's compute type when the
/// exponent has the base's float type); an integer base with an integer exponent
/// multiplies exactly, wrapping.
pub fn compute_pow(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (base, exp, out) = (&inputs[0], &inputs[1], &mut outputs[0]);
    if let Some(done) = pow_small_exponent(base, exp, out) {
        return done;
    }
    if base.dtype == exp.dtype && !base.dtype.is_int() {
        fn same<T: Float>(
            ctx: &InferCtx,
            b: &TensorRef,
            e: &TensorRef,
            out: &mut TensorMut,
        ) -> Result<(), OpError> {
            binary(ctx, b, e, out, |b: T, e: T| {
                T::from_r(b.to_r().powf(e.to_r()))
            })
        }
        return dispatch!(base.dtype, T in [f32, f64, f16, bf16] =>
            same::<T>(ctx, base, exp, out),
            other => Err(unsupported(ctx, other)));
    }
    // Any other pairing: the exponents as f64 (exact for every float and for integers
    // below 2^53), so the base types need one loop each rather than one per pair.
    fn as_f64<E: Num>(e: &TensorRef) -> Result<Vec<f64>, OpError> {
        Ok(e.slice::<E>()?.iter().map(|v| v.to_f64()).collect())
    }
    let e = dispatch!(exp.dtype,
        E in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] => as_f64::<E>(exp)?,
        other => return Err(ctx.input_error(1, format!("{other} is not supported"))));
    let e_int = exp.dtype.is_int();
    fn pow<T: Num>(
        ctx: &InferCtx,
        b: &TensorRef,
        (e, e_shape, e_int): (&[f64], &[usize], bool),
        out: &mut TensorMut,
    ) -> Result<(), OpError> {
        let shape = out.shape;
        let dst = out.slice_mut::<T>()?;
        let src = (b.slice::<T>()?, b.shape);
        let r = if T::KIND != Kind::Float && e_int {
            zip(src, (e, e_shape), (dst, shape), |b: T, e| {
                int_pow(b, e as i64)
            })
        } else {
            zip(src, (e, e_shape), (dst, shape), |b: T, e| {
                T::from_f64(b.to_f64().powf(e))
            })
        };
        r.map_err(mismatch(ctx, shape))
    }
    dispatch!(base.dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
        pow::<T>(ctx, base, (&e, exp.shape, e_int), out),
        other => Err(unsupported(ctx, other)))
}

/// Pow of a float tensor by one exponent that is a small integer or a half, which graphs
/// use for squares (LayerNorm's variance, L2 norms) and roots: products and square roots
/// the loops vectorize, in place of a libm `pow` per element. x² is what `powf` gives
/// (one rounding); x³ rounds twice, as ONNX Runtime's own x·x·x does; x^0.5 keeps
/// `powf`'s +0 for -0 and +inf for -inf. `None` for any other case.
fn pow_small_exponent(
    base: &TensorRef,
    exp: &TensorRef,
    out: &mut TensorMut,
) -> Option<Result<(), OpError>> {
    if base.dtype.is_int() || exp.len() != 1 || out.len() != base.len() {
        return None;
    }
    let e = dispatch!(exp.dtype,
        E in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
            Num::to_f64(exp.slice::<E>().ok()?[0]),
        _other => return None);
    fn run<T: Float>(e: f64, x: &[T], out: &mut [T]) -> bool {
        let inf = <T::R as Real>::c(f64::INFINITY);
        let zero = <T::R as Real>::c(0.0);
        match e {
            1.0 => T::map_r(x, out, move |v| v),
            2.0 => T::map_r(x, out, move |v| v * v),
            3.0 => T::map_r(x, out, move |v| v * v * v),
            0.5 => T::map_r(x, out, move |v| {
                if v == zero {
                    zero
                } else if v == -inf {
                    inf
                } else {
                    v.sqrt()
                }
            }),
            _ => return false,
        }
        true
    }
    let done = dispatch!(base.dtype, T in [f32, f64, f16, bf16] =>
        run::<T>(e, base.slice::<T>().ok()?, out.slice_mut::<T>().ok()?),
        _other => false);
    done.then_some(Ok(()))
}

/// `b^e` for an integer base, by squaring, wrapping. A negative exponent truncates 1/b^e
/// toward zero: 1 for b = 1, ±1 for b = -1, else 0 (0^-e included, rather than a trap).
fn int_pow<T: Num>(b: T, e: i64) -> T {
    let one = T::from_i128(1);
    if e < 0 {
        return match b.to_i128() {
            1 => one,
            -1 if e % 2 == 0 => one,
            -1 => b,
            _ => T::zero(),
        };
    }
    let (mut result, mut base, mut e) = (one, b, e as u64);
    while e > 0 {
        if e & 1 == 1 {
            result = result.mul(base);
        }
        base = base.mul(base);
        e >>= 1;
    }
    result
}

/// Where / SelectV2(condition, x, y): x where the condition holds, else y, all broadcast.
/// It only moves elements, so it runs on the element's bits (one loop per element width).
pub fn compute_where(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (c, x, y) = (&inputs[0], &inputs[1], &inputs[2]);
    let out = &mut outputs[0];
    fn select<U: bytemuck::Pod + Send + Sync>(
        ctx: &InferCtx,
        c: &TensorRef,
        x: &TensorRef,
        y: &TensorRef,
        out: &mut TensorMut,
    ) -> Result<(), OpError> {
        let shape = out.shape;
        let (cond, xs, ys) = (c.slice::<u8>()?, bits::<U>(x)?, bits::<U>(y)?);
        let n = shape.iter().product::<usize>() * size_of::<U>();
        let bytes = out
            .data
            .get_mut(..n)
            .ok_or_else(|| ctx.compute_error("the output holds fewer bytes than its shape"))?;
        let dst: &mut [U] = bytemuck::try_cast_slice_mut(bytes)
            .map_err(|e| ctx.compute_error(format!("output bytes: {e}")))?;
        zip3(
            (cond, c.shape),
            (xs, x.shape),
            (ys, y.shape),
            (dst, shape),
            |c, x, y| if c != 0 { x } else { y },
        )
        .map_err(mismatch(ctx, shape))
    }
    match out.dtype.size() {
        1 => select::<u8>(ctx, c, x, y, out),
        2 => select::<u16>(ctx, c, x, y, out),
        4 => select::<u32>(ctx, c, x, y, out),
        8 => select::<u64>(ctx, c, x, y, out),
        _ => Err(unsupported(ctx, out.dtype)),
    }
}

/// A tensor's elements as raw `U`s of the element's width.
fn bits<'a, U: bytemuck::Pod>(t: &TensorRef<'a>) -> Result<&'a [U], OpError> {
    let n = t.len() * size_of::<U>();
    let bytes = t.data.get(..n).ok_or_else(|| OpError::Input {
        op: String::new(),
        index: 0,
        msg: format!(
            "{} bytes hold fewer than {} elements",
            t.data.len(),
            t.len()
        ),
    })?;
    bytemuck::try_cast_slice(bytes).map_err(|e| OpError::Input {
        op: String::new(),
        index: 0,
        msg: format!("bytes cannot be viewed as elements: {e}"),
    })
}

/// Clip's element: `v` raised to `lo`, then lowered to `hi` (an absent bound does
/// nothing; NaN passes both). Written as selects, which the maps compile to vector
/// compares and blends.
#[inline(always)]
pub(crate) fn clamp<T: PartialOrd + Copy>(v: T, lo: Option<T>, hi: Option<T>) -> T {
    let v = match lo {
        Some(l) if v < l => l,
        _ => v,
    };
    match hi {
        Some(h) if v > h => h,
        _ => v,
    }
}

/// Clip(x, min, max): bounds from the optional scalar inputs (opset 11 on; an empty input
/// is absent) or the `min`/`max` attributes (before). Max is applied after min, so when
/// min > max every element becomes max, as NumPy's clip does.
pub fn compute_clip(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    fn clip<T: Num>(
        ctx: &InferCtx,
        inputs: &[TensorRef],
        out: &mut TensorMut,
    ) -> Result<(), OpError> {
        let bound = |k: usize, name: &str| -> Result<Option<T>, OpError> {
            if let Some(t) = inputs.get(k).filter(|t| !t.is_empty()) {
                return Ok(t.slice::<T>()?.first().copied());
            }
            Ok(match ctx.attrs.get(name) {
                Some(_) => Some(T::from_f64(ctx.attr_float(name, 0.0)? as f64)),
                None => None,
            })
        };
        let (lo, hi) = (bound(1, "min")?, bound(2, "max")?);
        par_map(inputs[0].slice::<T>()?, out.slice_mut::<T>()?, move |v| {
            clamp(v, lo, hi)
        });
        Ok(())
    }
    dispatch!(inputs[0].dtype,
        T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
            clip::<T>(ctx, inputs, &mut outputs[0]),
        other => Err(unsupported(ctx, other)))
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::run1;
    use crate::ops::testing::try_run;
    use half::{bf16, f16};

    use super::Num;
    use crate::ops::Attr;
    use crate::ops::DType;
    use crate::ops::{Attrs, Elem, InferCtx, OpRegistry, Tensor, TensorMeta};

    fn t<T: Elem>(shape: &[usize], v: &[T]) -> Tensor {
        Tensor::from_vec(shape, v)
    }

    fn vals<T: Elem>(t: &Tensor) -> Vec<T> {
        t.slice::<T>().unwrap().to_vec()
    }

    /// What a device does with a launch of `op` on `inputs` into a tensor shaped like
    /// `out`: chooses the op's specialized compute function and runs it on the bytes. `None` when
    /// none is chosen.
    fn specialized(op: &str, inputs: &[Tensor], out: &Tensor) -> Option<Tensor> {
        let reg = OpRegistry::new();
        let meta = |t: &Tensor| {
            let dims: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
            TensorMeta::new(t.dtype, &dims)
        };
        let metas: Vec<TensorMeta> = inputs.iter().map(meta).collect();
        let values = vec![None; inputs.len()];
        let ctx = InferCtx {
            op,
            inputs: &metas,
            values: &values,
            attrs: &Attrs::default(),
            outputs: 1,
        };
        let f = reg.get(op).unwrap().special(&ctx, &[meta(out)])?;
        let mut got = Tensor::zeroed(out.dtype, &out.shape);
        let ins: Vec<&[u8]> = inputs.iter().map(|t| t.data.as_bytes()).collect();
        assert!(f(&ins, &mut [got.data.as_bytes_mut()]), "{op} declined");
        Some(got)
    }

    /// Every specialized op, on every case it is chosen for, writes the general compute's
    /// bytes: wrapping, zero divisors, NaN and infinities included.
    fn specialized_equals_general<T: Num>() {
        let v: Vec<T> = [
            0.0,
            1.0,
            -3.0,
            7.0,
            100.0,
            -128.0,
            2.5,
            f64::NAN,
            f64::INFINITY,
            -0.0,
        ]
        .iter()
        .map(|&x| T::from_f64(x))
        .collect();
        let x = |shape: &[usize], skip: usize| {
            let n = shape.iter().product::<usize>();
            let data: Vec<T> = (0..n).map(|i| v[(i * 3 + skip) % v.len()]).collect();
            t(shape, &data)
        };
        let cases: [(&[usize], &[usize]); 8] = [
            (&[2, 5], &[2, 5]),
            (&[2, 5], &[]),
            (&[], &[2, 5]),
            (&[1], &[2, 5]),
            (&[1, 1, 5], &[5]),
            (&[5], &[1, 1, 5]),
            (&[], &[]),
            (&[1, 10], &[10]),
        ];
        for op in ["Add", "Sub", "Mul", "Div", "RealDiv", "Max", "Min", "Sum"] {
            for (sa, sb) in cases {
                for skip in 0..v.len() {
                    let ins = [x(sa, skip), x(sb, skip + 1)];
                    let want = run1(op, &[], &ins);
                    let got = specialized(op, &ins, &want)
                        .unwrap_or_else(|| panic!("{op} {sa:?} {sb:?} {}: none chosen", T::DTYPE));
                    assert_eq!(
                        got.data.as_bytes(),
                        want.data.as_bytes(),
                        "{op} {sa:?} {sb:?} {}",
                        T::DTYPE
                    );
                }
            }
        }
    }

    #[test]
    fn specialized_kernels_write_what_the_general_compute_writes() {
        specialized_equals_general::<f32>();
        specialized_equals_general::<f64>();
        specialized_equals_general::<f16>();
        specialized_equals_general::<bf16>();
        specialized_equals_general::<i8>();
        specialized_equals_general::<i16>();
        specialized_equals_general::<i32>();
        specialized_equals_general::<i64>();
        specialized_equals_general::<u8>();
        specialized_equals_general::<u16>();
        specialized_equals_general::<u32>();
        specialized_equals_general::<u64>();
    }

    #[test]
    fn specialization_is_chosen_only_where_it_holds() {
        let f = |shape: &[usize]| Tensor::zeroed(DType::F32, shape);
        let chosen = |op: &str, ins: &[Tensor], out: &Tensor| specialized(op, ins, out).is_some();
        assert!(chosen("Add", &[f(&[4]), f(&[4])], &f(&[4])));
        // A row broadcast along another dim, three inputs, ops with none.
        assert!(!chosen("Add", &[f(&[2, 3]), f(&[3])], &f(&[2, 3])));
        assert!(!chosen("Sum", &[f(&[4]), f(&[4]), f(&[4])], &f(&[4])));
        for op in ["Mod", "Mean", "BitwiseAnd"] {
            assert!(!chosen(op, &[f(&[4]), f(&[4])], &f(&[4])), "{op}");
        }
        // Operand and output dtypes differ.
        let d = Tensor::zeroed(DType::F64, &[4]);
        assert!(!chosen("Add", &[f(&[4]), d.clone()], &f(&[4])));
        assert!(!chosen("Add", &[d.clone(), d], &f(&[4])));
        // An output too large not to split, an empty one.
        let big = [2 * super::PAR_MIN];
        assert!(!chosen("Mul", &[f(&big), f(&big)], &f(&big)));
        assert!(!chosen("Mul", &[f(&[0, 3]), f(&[0, 3])], &f(&[0, 3])));
        // An output whose shape is not the operands' broadcast.
        assert!(!chosen("Add", &[f(&[1, 1, 1]), f(&[4])], &f(&[4])));
        assert!(!chosen("Add", &[f(&[4]), f(&[4])], &f(&[5])));
        assert!(chosen("Add", &[f(&[1, 1, 1]), f(&[4])], &f(&[1, 1, 4])));
    }

    #[test]
    fn a_specialized_kernel_declines_bytes_it_was_not_chosen_for() {
        let four = Tensor::from_vec(&[4], &[1.0f32, 2.0, 3.0, 4.0]);
        let out = run1("Add", &[], &[four.clone(), four.clone()]);
        let reg = OpRegistry::new();
        let metas = [
            TensorMeta::new(DType::F32, &[4]),
            TensorMeta::new(DType::F32, &[4]),
        ];
        let ctx = InferCtx {
            op: "Add",
            inputs: &metas,
            values: &[None, None],
            attrs: &Attrs::default(),
            outputs: 1,
        };
        let f = reg.get("Add").unwrap().special(&ctx, &metas[..1]).unwrap();
        let a = four.data.as_bytes();
        let mut o = vec![0u8; 16];
        let short = &a[..12];
        let odd = &a[..15];
        for ins in [&[a, short][..], &[a, odd], &[a], &[a, a, a]] {
            assert!(!f(ins, &mut [&mut o[..]]));
            assert_eq!(o, [0; 16], "nothing written");
        }
        assert!(!f(&[a, a], &mut [&mut o[..12]]));
        assert!(f(&[a, a], &mut [&mut o[..]]));
        assert_eq!(o, out.data.as_bytes());
    }

    #[test]
    fn broadcasting_edge_cases() {
        // Scalar with a matrix, either side.
        let m = t(&[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let s = t(&[], &[10.0f32]);
        let y = run1("Sub", &[], &[s.clone(), m.clone()]);
        assert_eq!(y.shape, [2, 3]);
        assert_eq!(vals::<f32>(&y), [9.0, 8.0, 7.0, 6.0, 5.0, 4.0]);
        assert_eq!(
            vals::<f32>(&run1("Sub", &[], &[m.clone(), s])),
            [-9.0, -8.0, -7.0, -6.0, -5.0, -4.0]
        );
        // Rank difference: a row added to every row.
        let row = t(&[3], &[10.0f32, 20.0, 30.0]);
        assert_eq!(
            vals::<f32>(&run1("Add", &[], &[m.clone(), row])),
            [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]
        );
        // Size-1 dims on both sides: an outer product.
        let col = t(&[3, 1], &[1i32, 2, 3]);
        let row = t(&[1, 2], &[10i32, 100]);
        let y = run1("Mul", &[], &[col, row]);
        assert_eq!(y.shape, [3, 2]);
        assert_eq!(vals::<i32>(&y), [10, 100, 20, 200, 30, 300]);
        // Empty tensors broadcast to empty outputs.
        let e = t::<f32>(&[0, 3], &[]);
        let y = run1("Add", &[], &[e, t(&[1, 3], &[1.0f32, 2.0, 3.0])]);
        assert_eq!(y.shape, [0, 3]);
        assert!(vals::<f32>(&y).is_empty());
        // Rank-0 with rank-0.
        let y = run1("Add", &[], &[t(&[], &[1u8]), t(&[], &[255u8])]);
        assert_eq!((y.shape.len(), vals::<u8>(&y)), (0, vec![0]));
    }

    #[test]
    fn large_inputs_run_in_parallel_chunks() {
        let n = 300_000;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| 2.0 * i as f32).collect();
        let y = run1("Add", &[], &[t(&[n], &a), t(&[n], &b)]);
        assert!(
            vals::<f32>(&y)
                .iter()
                .enumerate()
                .all(|(i, &v)| v == 3.0 * i as f32)
        );
        // A broadcast column over many rows, split mid-row by the chunking.
        let rows = 1000;
        let m: Vec<i64> = (0..rows * 300).map(|i| i as i64).collect();
        let c: Vec<i64> = (0..rows).map(|i| -(i as i64)).collect();
        let y = run1("Add", &[], &[t(&[rows, 300], &m), t(&[rows, 1], &c)]);
        let y = vals::<i64>(&y);
        assert!((0..rows * 300).all(|i| y[i] == (i - i / 300) as i64));
    }

    #[test]
    fn integer_arithmetic_wraps_and_never_traps() {
        let a = t(&[4], &[7i8, -7, 127, -128]);
        let b = t(&[4], &[2i8, 0, 1, -1]);
        assert_eq!(
            vals::<i8>(&run1("Div", &[], &[a.clone(), b.clone()])),
            [3, 0, 127, -128]
        );
        assert_eq!(
            vals::<i8>(&run1("Add", &[], &[a.clone(), b.clone()])),
            [9, -7, -128, 127]
        );
        let m = t(&[4], &[-4i32, 7, -7, 5]);
        let d = t(&[4], &[3i32, -3, 0, 2]);
        assert_eq!(
            vals::<i32>(&run1("Mod", &[], &[m.clone(), d.clone()])),
            [2, -2, 0, 1]
        );
        assert_eq!(
            vals::<i32>(&run1("Mod", &[("fmod", Attr::Int(1))], &[m, d])),
            [-1, 1, 0, 1]
        );
    }

    #[test]
    fn variadic_ops_broadcast_every_input() {
        let a = t(&[3], &[1.0f32, 2.0, 3.0]);
        let b = t(&[2, 1], &[10.0f32, 20.0]);
        let c = t(&[], &[100.0f32]);
        let y = run1("Sum", &[], &[a.clone(), b.clone(), c.clone()]);
        assert_eq!(y.shape, [2, 3]);
        assert_eq!(vals::<f32>(&y), [111.0, 112.0, 113.0, 121.0, 122.0, 123.0]);
        let y = run1("Mean", &[], &[a.clone(), b.clone(), c.clone()]);
        assert_eq!(vals::<f32>(&y)[0], 37.0);
        assert_eq!(
            vals::<f32>(&run1("Max", &[], &[a.clone(), b, c])),
            [100.0; 6]
        );
        assert_eq!(
            vals::<f32>(&run1("Min", &[], std::slice::from_ref(&a))),
            [1.0, 2.0, 3.0]
        );
        assert_eq!(
            vals::<f32>(&run1("Mean", &[], &[a.clone(), a])),
            [1.0, 2.0, 3.0]
        );
        let i = t(&[2], &[5u16, 1]);
        let j = t(&[2], &[3u16, 4]);
        assert_eq!(
            vals::<u16>(&run1("Max", &[], &[i.clone(), j.clone(), i])),
            [5, 4]
        );
        let e = try_run("Mean", &[], &[j.clone(), j], 1);
        assert!(e.is_err(), "Mean is for floats");
    }

    #[test]
    fn comparisons_logic_and_bits() {
        let a = t(&[3], &[1i64, 2, 3]);
        let b = t(&[], &[2i64]);
        for (op, want) in [
            ("Equal", [0u8, 1, 0]),
            ("Less", [1, 0, 0]),
            ("Greater", [0, 0, 1]),
            ("LessOrEqual", [1, 1, 0]),
            ("GreaterEqual", [0, 1, 1]),
        ] {
            let y = run1(op, &[], &[a.clone(), b.clone()]);
            assert_eq!(
                (y.dtype, vals::<u8>(&y)),
                (DType::Bool, want.to_vec()),
                "{op}"
            );
        }
        let mut p = Tensor::zeroed(DType::Bool, &[4]);
        p.as_mut()
            .slice_mut::<u8>()
            .unwrap()
            .copy_from_slice(&[0, 0, 1, 1]);
        let mut q = Tensor::zeroed(DType::Bool, &[4]);
        q.as_mut()
            .slice_mut::<u8>()
            .unwrap()
            .copy_from_slice(&[0, 1, 0, 1]);
        assert_eq!(
            vals::<u8>(&run1("And", &[], &[p.clone(), q.clone()])),
            [0, 0, 0, 1]
        );
        assert_eq!(
            vals::<u8>(&run1("Or", &[], &[p.clone(), q.clone()])),
            [0, 1, 1, 1]
        );
        assert_eq!(
            vals::<u8>(&run1("Xor", &[], &[p.clone(), q.clone()])),
            [0, 1, 1, 0]
        );
        assert_eq!(vals::<u8>(&run1("Equal", &[], &[p, q])), [1, 0, 0, 1]);
        let x = t(&[3], &[16u32, 1, 255]);
        let s = t(&[3], &[1u32, 3, 40]);
        let left = [("direction", Attr::Str("LEFT".into()))];
        let right = [("direction", Attr::Str("RIGHT".into()))];
        assert_eq!(
            vals::<u32>(&run1("BitShift", &left, &[x.clone(), s.clone()])),
            [32, 8, 0]
        );
        assert_eq!(
            vals::<u32>(&run1("BitShift", &right, &[x.clone(), s.clone()])),
            [8, 0, 0]
        );
        assert_eq!(vals::<u32>(&run1("BitwiseXor", &[], &[x, s])), [17, 2, 215]);
    }

    #[test]
    fn pow_mixes_types() {
        let b = t(&[3], &[2.0f32, 4.0, -3.0]);
        assert_eq!(
            vals::<f32>(&run1("Pow", &[], &[b.clone(), t(&[], &[2i64])])),
            [4.0, 16.0, 9.0]
        );
        assert_eq!(
            vals::<f32>(&run1("Pow", &[], &[b, t(&[], &[0.5f32])]))[..2],
            [2.0_f32.sqrt(), 2.0]
        );
        let i = t(&[4], &[2i32, -3, 1, 5]);
        assert_eq!(
            vals::<i32>(&run1(
                "Pow",
                &[],
                &[i.clone(), t(&[4], &[10i64, 3, -2, -1])]
            )),
            [1024, -27, 1, 0]
        );
        // An integer base with a float exponent truncates the result.
        assert_eq!(
            vals::<i32>(&run1("Pow", &[], &[i, t(&[], &[0.5f32])])),
            [1, 0, 1, 2]
        );
    }

    /// The exponents computed without `powf` give what `powf` gives (x³ within one
    /// rounding), at the edges too, and a broadcast exponent of higher rank still takes
    /// the general path.
    #[test]
    fn pow_by_small_exponents_matches_powf() {
        let xs = [
            0.0f32,
            -0.0,
            1.5,
            -2.25,
            1e-20,
            3e19,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            0.1,
            -7.0,
        ];
        let x = t(&[xs.len()], &xs);
        for e in [1.0f32, 2.0, 3.0, 0.5] {
            let got = vals::<f32>(&run1("Pow", &[], &[x.clone(), t(&[], &[e])]));
            for (&v, &g) in xs.iter().zip(&got) {
                let want = v.powf(e);
                let close = g == want
                    || (g.is_nan() && want.is_nan())
                    || (e == 3.0 && (g - want).abs() <= 2.0 * f32::EPSILON * want.abs());
                assert!(close, "{v}^{e} = {g}, powf gives {want}");
                if e != 3.0 && !want.is_nan() {
                    assert_eq!(g.to_bits(), want.to_bits(), "{v}^{e}");
                }
            }
        }
        let h = t(&[2], &[half::f16::from_f32(-1.5), half::f16::from_f32(3.0)]);
        let got = vals::<half::f16>(&run1("Pow", &[], &[h, t(&[1], &[2i32])]));
        assert_eq!(got, [half::f16::from_f32(2.25), half::f16::from_f32(9.0)]);
        let wide = run1(
            "Pow",
            &[],
            &[t(&[2], &[2.0f32, 3.0]), t(&[2, 1], &[2.0f32, 3.0])],
        );
        assert_eq!(wide.shape, [2, 2]);
        assert_eq!(vals::<f32>(&wide), [4.0, 9.0, 8.0, 27.0]);
    }

    #[test]
    fn prelu_where_clip() {
        let x = t(&[1, 2, 2], &[-1.0f32, 1.0, -2.0, 2.0]);
        let slope = t(&[2, 1], &[0.5f32, 0.25]);
        assert_eq!(
            vals::<f32>(&run1("PRelu", &[], &[x.clone(), slope])),
            [-0.5, 1.0, -0.5, 2.0]
        );
        // Before opset 7: one slope per channel along axis 1.
        let old = [("onnx_opset", Attr::Int(6))];
        let slope = t(&[2], &[0.5f32, 0.25]);
        assert_eq!(
            vals::<f32>(&run1(
                "PRelu",
                &old,
                &[t(&[1, 2, 2], &[-1.0f32, 1.0, -2.0, 2.0]), slope]
            )),
            [-0.5, 1.0, -0.5, 2.0]
        );
        let mut c = Tensor::zeroed(DType::Bool, &[2, 1]);
        c.as_mut().slice_mut::<u8>().unwrap()[0] = 1;
        let y = run1("Where", &[], &[c, t(&[2], &[1i64, 2]), t(&[], &[-1i64])]);
        assert_eq!(
            (y.shape.clone(), vals::<i64>(&y)),
            (vec![2, 2], vec![1, 2, -1, -1])
        );
        let x = t(&[4], &[-2i8, 0, 3, 9]);
        let empty = t::<i8>(&[0], &[]);
        assert_eq!(
            vals::<i8>(&run1(
                "Clip",
                &[],
                &[x.clone(), t(&[], &[0i8]), t(&[], &[5i8])]
            )),
            [0, 0, 3, 5]
        );
        assert_eq!(
            vals::<i8>(&run1("Clip", &[], &[x.clone(), empty, t(&[], &[5i8])])),
            [-2, 0, 3, 5]
        );
        assert_eq!(
            vals::<i8>(&run1(
                "Clip",
                &[],
                &[x.clone(), t(&[], &[4i8]), t(&[], &[1i8])]
            )),
            [1; 4]
        );
        assert_eq!(
            vals::<i8>(&run1("Clip", &[], std::slice::from_ref(&x))),
            [-2, 0, 3, 9]
        );
        let attrs = [("min", Attr::Float(-1.0)), ("max", Attr::Float(1.0))];
        assert_eq!(
            vals::<f32>(&run1("Clip", &attrs, &[t(&[3], &[-5.0f32, 0.5, 5.0])])),
            [-1.0, 0.5, 1.0]
        );
    }

    #[test]
    fn half_precision_rounds_once() {
        use half::f16;
        let h = |v: f32| f16::from_f32(v);
        let a = t(&[1], &[h(1.0)]);
        let b = t(&[1], &[h(0.0003)]);
        // float16's spacing at 1 is ~0.00098: 1 + 0.0003 + 0.0003 summed in f32 rounds
        // up to the next float16 once; rounding after each addition would give 1.
        let y = run1("Sum", &[], &[a.clone(), b.clone(), b.clone()]);
        assert_eq!(vals::<f16>(&y), [h(1.0 + 2.0 * h(0.0003).to_f32())]);
    }
}
