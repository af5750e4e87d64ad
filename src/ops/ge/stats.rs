//! GE's reductions to statistics and norms, each as its prototype documents it
//! (`prototypes/reduce_ops.txt`, `elewise_calculation_ops.txt`,
//! `matrix_calculation_ops.txt`; graphengine `reduce_ops.h`, `elewise_calculation_ops.h`,
//! ops-math's op docs), and the reduction walk the normalizations of `normalize.rs` share.
//!
//! - ReduceStd(x; dim [], unbiased true, keepdim false): PyTorch's `std_mean`: y1 the
//!   standard deviation (divided by `n - 1` when unbiased, so one element gives NaN), y2
//!   the mean. An empty `dim` reduces every dim (PyTorch's `dim=None`).
//! - ReduceMeanVariance(x; axes [], keep_dims true): mean and the population variance
//!   over `axes` (empty: every dim).
//! - EuclideanNorm(x, axes; keep_dims false) and EuclideanNormD(x; axes [], keep_dims
//!   false): TensorFlow's `sqrt(sum(x^2))` over the axes. On integers the root is
//!   truncated toward zero.
//! - ReduceAll / ReduceAny(x, axes; keep_dims false) and their D forms (axes a required
//!   attribute): logical and / or over the axes, on bool.
//! - Reduction(x; operation 1, axis 0, coeff 1.0): Caffe's: every dim from `axis` on
//!   reduced (the output is x's dims before it) by SUM (1), ASUM (2, of `|x|`), SUMSQ (3)
//!   or MEAN (4), times `coeff`.
//! - SquareSumV1(x; axis required, keep_dims false): `sum(x^2)` over `axis`.
//! - L2Loss(x): TensorFlow's `sum(x^2) / 2`, a scalar.
//! - CosineSimilarity(input_x1, input_x2; dim 1, eps 1e-8): PyTorch's,
//!   `sum(x1 x2) / max(|x1| |x2|, eps)` along `dim` of the broadcast shape, which the
//!   output drops.
//! - Dot(input_x, input_y): the inner product of two 1-D tensors of one length.
//!
//! Float statistics accumulate in f64 and are rounded once into the output's type
//! (float16 and bfloat16 included); the variance is two passes (mean, then squared
//! deviations). Integer Dot sums in i64 and wraps to the type.
//!
//! rt2's choices where GE documents nothing: TensorFlow-born ops (EuclideanNorm,
//! ReduceAll, ReduceAny and their D forms) reduce nothing for an empty axis list, as
//! TensorFlow's kernels do (its `axis=None` reaches the graph as the full list), while
//! ReduceMeanVariance's and SquareSumV1's empty lists reduce every dim; Dot's result has
//! shape `[]` (PyTorch's), where GE's text says "1d".

use super::attrs::required_list;
use crate::dispatch;
use crate::ops::nn::scalar::{Scalar, write_f64s};
use crate::ops::{
    DType, InferCtx, OpError, OpRegistry, TensorMeta, TensorMut, TensorRef, UNKNOWN, meta,
};

/// The op types this file registers, with the inputs whose values their inference reads.
const OPS: &[(&str, &[usize])] = &[
    ("ReduceStd", &[]),
    ("ReduceMeanVariance", &[]),
    ("EuclideanNorm", &[1]),
    ("EuclideanNormD", &[]),
    ("ReduceAll", &[1]),
    ("ReduceAllD", &[]),
    ("ReduceAny", &[1]),
    ("ReduceAnyD", &[]),
    ("Reduction", &[]),
    ("SquareSumV1", &[]),
    ("L2Loss", &[]),
    ("CosineSimilarity", &[]),
    ("Dot", &[]),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "CosineSimilarity" => (infer_cosine, cosine),
        "Dot" => (infer_dot, dot),
        _ => (infer_reduce, reduce),
    });
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::names(OPS)
}

// ---------------------------------------------------------------------------------------
// The reduction walk, shared with the normalizations.

/// Which of `rank` dims the list `axes` (attribute or input `name`) marks; an empty list
/// marks every dim when `empty_all`, else none.
pub(super) fn axes_mask(
    ctx: &InferCtx,
    name: &str,
    axes: &[i64],
    rank: usize,
    empty_all: bool,
) -> Result<Vec<bool>, OpError> {
    if axes.is_empty() {
        return Ok(vec![empty_all; rank]);
    }
    let r = rank as i64;
    let mut mask = vec![false; rank];
    for &a in axes {
        if !(-r..r).contains(&a) {
            return Err(ctx.attr_error(name, format!("axis {a} is outside [-{r}, {r})")));
        }
        mask[if a < 0 { a + r } else { a } as usize] = true;
    }
    Ok(mask)
}

/// `shape` reduced over `mask`: a 1 for each reduced dim when `keep`, else without them.
pub(super) fn reduced_shape(shape: &[i64], mask: &[bool], keep: bool) -> Vec<i64> {
    shape
        .iter()
        .zip(mask)
        .filter_map(|(&d, &m)| match (m, keep) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Per dim of `shape`, the stride of the reduced (kept-dims) tensor, 0 for a reduced dim:
/// the group an element falls in is its index dotted with these.
pub(super) fn group_strides(shape: &[usize], mask: &[bool]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut s = 1;
    for d in (0..shape.len()).rev() {
        if !mask[d] {
            strides[d] = s;
            s *= shape[d];
        }
    }
    strides
}

/// Per dim of `to`, the stride of a tensor of `from` broadcast to it (right-aligned, 0
/// where `from` has a 1 or no dim); `None` when it does not broadcast.
pub(super) fn broadcast_strides(from: &[usize], to: &[usize]) -> Option<Vec<usize>> {
    if from.len() > to.len() {
        return None;
    }
    let pad = to.len() - from.len();
    let mut strides = vec![0; to.len()];
    let mut s = 1;
    for (i, &f) in from.iter().enumerate().rev() {
        if f != to[pad + i] && f != 1 {
            return None;
        }
        if f != 1 {
            strides[pad + i] = s;
        }
        s *= f;
    }
    Some(strides)
}

/// Calls `f(i, [o_0, ..])` for every element `i` of a row-major tensor of `shape`, where
/// `o_k` is its index dotted with `strides[k]`: a group or a broadcast operand's element.
/// Offsets advance incrementally, so the inner loop is one add per stride set.
pub(super) fn walk<const K: usize>(
    shape: &[usize],
    strides: [&[usize]; K],
    mut f: impl FnMut(usize, [usize; K]),
) {
    if shape.contains(&0) {
        return;
    }
    let Some((&last, outer)) = shape.split_last() else {
        f(0, [0; K]);
        return;
    };
    let step: [usize; K] = std::array::from_fn(|k| strides[k][outer.len()]);
    let mut idx = vec![0usize; outer.len()];
    let mut base = [0usize; K];
    let mut i = 0;
    loop {
        let mut o = base;
        for j in 0..last {
            f(i + j, o);
            for k in 0..K {
                o[k] += step[k];
            }
        }
        i += last;
        let mut d = outer.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for k in 0..K {
                base[k] += strides[k][d];
            }
            if idx[d] < outer[d] {
                break;
            }
            for k in 0..K {
                base[k] -= strides[k][d] * outer[d];
            }
            idx[d] = 0;
        }
    }
}

/// Per group of `x` (its dims split by `mask`): the mean and the sum of squared
/// deviations from it, two passes in f64; and the elements per group.
pub(super) fn moments<T: Scalar>(
    x: &[T],
    shape: &[usize],
    mask: &[bool],
) -> (Vec<f64>, Vec<f64>, usize) {
    let strides = group_strides(shape, mask);
    let groups: usize = shape
        .iter()
        .zip(mask)
        .filter(|(_, m)| !**m)
        .map(|(d, _)| d)
        .product();
    let count = x.len().checked_div(groups).unwrap_or(0);
    let mut mean = vec![0.0; groups];
    walk(shape, [&strides], |i, [g]| mean[g] += x[i].to_f64());
    mean.iter_mut().for_each(|m| *m /= count as f64);
    let mut ssd = vec![0.0; groups];
    walk(shape, [&strides], |i, [g]| {
        let d = x[i].to_f64() - mean[g];
        ssd[g] += d * d;
    });
    (mean, ssd, count)
}

/// Whether `d` is a float type.
pub(super) fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::Bf16)
}

// ---------------------------------------------------------------------------------------
// The reductions

/// The dtypes each op takes.
fn accepts(op: &str, d: DType) -> bool {
    match op {
        "ReduceAll" | "ReduceAllD" | "ReduceAny" | "ReduceAnyD" => d == DType::Bool,
        "EuclideanNorm" | "EuclideanNormD" => is_float(d) || matches!(d, DType::I32 | DType::I64),
        _ => is_float(d),
    }
}

/// The axis list of the op, `None` while an axes input's value is unknown.
fn axis_list(ctx: &InferCtx) -> Result<Option<Vec<i64>>, OpError> {
    Ok(Some(match ctx.op {
        "ReduceStd" => ctx.attr_ints("dim")?.unwrap_or_default().to_vec(),
        "ReduceMeanVariance" | "EuclideanNormD" => {
            ctx.attr_ints("axes")?.unwrap_or_default().to_vec()
        }
        "ReduceAllD" | "ReduceAnyD" => required_list(ctx, "axes")?,
        "SquareSumV1" => required_list(ctx, "axis")?,
        "EuclideanNorm" | "ReduceAll" | "ReduceAny" => {
            ctx.arity(2, 2)?;
            return ctx.value_ints(1);
        }
        _ => Vec::new(),
    }))
}

/// The reduced dims of a tensor of rank `rank` and whether they are kept (as 1s), from
/// the op's axis list `axes`.
fn spec(ctx: &InferCtx, axes: &[i64], rank: usize) -> Result<(Vec<bool>, bool), OpError> {
    let tf = matches!(
        ctx.op,
        "EuclideanNorm"
            | "EuclideanNormD"
            | "ReduceAll"
            | "ReduceAllD"
            | "ReduceAny"
            | "ReduceAnyD"
    );
    let name = match ctx.op {
        "ReduceStd" => "dim",
        "SquareSumV1" => "axis",
        _ => "axes",
    };
    match ctx.op {
        "Reduction" => {
            let r = rank as i64;
            let a = ctx.attr_int("axis", 0)?;
            if !(-r..r.max(1)).contains(&a) {
                return Err(ctx.attr_error("axis", format!("{a} is outside [-{r}, {r})")));
            }
            let a = if a < 0 { a + r } else { a } as usize;
            Ok(((0..rank).map(|d| d >= a).collect(), false))
        }
        "L2Loss" => Ok((vec![true; rank], false)),
        "ReduceStd" => Ok((
            axes_mask(ctx, name, axes, rank, true)?,
            ctx.attr_bool("keepdim", false)?,
        )),
        "ReduceMeanVariance" => Ok((
            axes_mask(ctx, name, axes, rank, true)?,
            ctx.attr_bool("keep_dims", true)?,
        )),
        _ => Ok((
            axes_mask(ctx, name, axes, rank, !tf)?,
            ctx.attr_bool("keep_dims", false)?,
        )),
    }
}

fn outputs_of(op: &str) -> usize {
    match op {
        "ReduceStd" | "ReduceMeanVariance" => 2,
        _ => 1,
    }
}

fn infer_reduce(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    if axis_list_is_attr(ctx.op) {
        ctx.arity(1, 1)?;
    }
    let x = &ctx.inputs[0];
    if !accepts(ctx.op, x.dtype) {
        return Err(ctx.input_error(0, format!("{} is not supported by this op", x.dtype)));
    }
    if ctx.op == "Reduction" && !(1..=4).contains(&ctx.attr_int("operation", 1)?) {
        return Err(ctx.attr_error(
            "operation",
            format!(
                "{} is not 1 (SUM), 2 (ASUM), 3 (SUMSQ) or 4 (MEAN)",
                ctx.attr_int("operation", 1)?
            ),
        ));
    }
    let axes = axis_list(ctx)?;
    let out = match (&x.shape, axes) {
        (Some(s), Some(axes)) => {
            let (mask, keep) = spec(ctx, &axes, s.len())?;
            TensorMeta::new(x.dtype, &reduced_shape(s, &mask, keep))
        }
        // Kept dims keep the rank, but which dims are 1 is not known yet.
        (Some(s), None) if ctx.attr_bool("keep_dims", false)? => {
            TensorMeta::new(x.dtype, &vec![UNKNOWN; s.len()])
        }
        _ => TensorMeta::unknown_rank(x.dtype),
    };
    Ok(vec![out; outputs_of(ctx.op)])
}

fn axis_list_is_attr(op: &str) -> bool {
    !matches!(op, "EuclideanNorm" | "ReduceAll" | "ReduceAny")
}

fn reduce(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = &inputs[0];
    let axes = if axis_list_is_attr(ctx.op) {
        axis_list(ctx)?.unwrap_or_default()
    } else {
        crate::ops::shape::indices::ints(&inputs[1])
            .ok_or_else(|| ctx.input_error(1, "is not integers"))?
    };
    let (mask, _) = spec(ctx, &axes, x.rank())?;
    if x.dtype == DType::Bool {
        let all = matches!(ctx.op, "ReduceAll" | "ReduceAllD");
        return logical(x.slice::<u8>()?, x.shape, &mask, all, &mut outputs[0]);
    }
    dispatch!(x.dtype, T in [f32, f64, half::f16, half::bf16, i32, i64] =>
        reduce_typed::<T>(ctx, x.slice::<T>()?, x.shape, &mask, outputs),
        other => Err(ctx.input_error(0, format!("{other} is not supported by this op"))))
}

/// ReduceAll / ReduceAny: each group starts at the identity (true / false).
fn logical(
    x: &[u8],
    shape: &[usize],
    mask: &[bool],
    all: bool,
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let y = out.slice_mut::<u8>()?;
    y.fill(u8::from(all));
    let strides = group_strides(shape, mask);
    walk(shape, [&strides], |i, [g]| {
        let v = x[i] != 0;
        y[g] = u8::from(if all { y[g] != 0 && v } else { y[g] != 0 || v });
    });
    Ok(())
}

fn reduce_typed<T: Scalar>(
    ctx: &InferCtx,
    x: &[T],
    shape: &[usize],
    mask: &[bool],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    if matches!(ctx.op, "ReduceStd" | "ReduceMeanVariance") {
        let (mean, ssd, n) = moments(x, shape, mask);
        let unbiased = ctx.op == "ReduceStd" && ctx.attr_bool("unbiased", true)?;
        let div = if unbiased { n as f64 - 1.0 } else { n as f64 };
        let var: Vec<f64> = ssd.iter().map(|s| s / div).collect();
        let (first, second) = if ctx.op == "ReduceStd" {
            (var.iter().map(|v| v.sqrt()).collect(), mean)
        } else {
            (mean, var)
        };
        write_f64s(&mut outputs[0], &first)?;
        return write_f64s(&mut outputs[1], &second);
    }
    let strides = group_strides(shape, mask);
    let groups = outputs[0].len();
    let mut acc = vec![0.0f64; groups];
    let op = ctx.attr_int("operation", 1)?;
    let abs = ctx.op == "Reduction" && op == 2;
    let square = ctx.op != "Reduction" || op == 3;
    walk(shape, [&strides], |i, [g]| {
        let v = x[i].to_f64();
        acc[g] += if square {
            v * v
        } else if abs {
            v.abs()
        } else {
            v
        };
    });
    let count = x.len().checked_div(groups).unwrap_or(0) as f64;
    let coeff = f64::from(ctx.attr_float("coeff", 1.0)?);
    let finish = |s: f64| match ctx.op {
        "EuclideanNorm" | "EuclideanNormD" if T::DTYPE.is_int() => s.sqrt().trunc(),
        "EuclideanNorm" | "EuclideanNormD" => s.sqrt(),
        "L2Loss" => s / 2.0,
        "Reduction" if op == 4 => s / count * coeff,
        "Reduction" => s * coeff,
        _ => s,
    };
    let y = outputs[0].slice_mut::<T>()?;
    for (d, &s) in y.iter_mut().zip(&acc) {
        *d = T::from_f64(finish(s));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// CosineSimilarity, Dot

/// CosineSimilarity's broadcast shape and its `dim` (checked), or `None` for an unknown
/// rank.
fn cosine_dims(ctx: &InferCtx) -> Result<Option<(Vec<i64>, usize)>, OpError> {
    ctx.arity(2, 2)?;
    for (i, t) in ctx.inputs.iter().enumerate() {
        if !is_float(t.dtype) || t.dtype != ctx.inputs[0].dtype {
            return Err(ctx.input_error(i, format!("{} is not input 0's float type", t.dtype)));
        }
    }
    let shapes: Vec<Option<&[i64]>> = ctx.inputs.iter().map(|t| t.shape.as_deref()).collect();
    let shape = crate::ops::elementwise::broadcast(&shapes)
        .map_err(|(a, b)| ctx.input_error(b, format!("does not broadcast with input {a}")))?;
    let Some(shape) = shape else { return Ok(None) };
    let dim = ctx.axis(ctx.attr_int("dim", 1)?, shape.len(), "dim")?;
    Ok(Some((shape, dim)))
}

fn infer_cosine(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let d = ctx.inputs.first().map_or(DType::F32, |t| t.dtype);
    Ok(meta(
        d,
        cosine_dims(ctx)?.map(|(mut s, dim)| {
            s.remove(dim);
            s
        }),
    ))
}

fn cosine(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let (shape, dim) = cosine_dims(ctx)?.ok_or_else(|| ctx.compute_error("unknown rank"))?;
    let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let eps = f64::from(ctx.attr_float("eps", 1e-8)?);
    let mut mask = vec![false; shape.len()];
    mask[dim] = true;
    let g = group_strides(&shape, &mask);
    let strides = |i: usize| {
        broadcast_strides(inputs[i].shape, &shape)
            .ok_or_else(|| ctx.input_error(i, "does not broadcast"))
    };
    let (s1, s2) = (strides(0)?, strides(1)?);
    let groups = outputs[0].len();
    // Per group: sum x1 x2, sum x1^2, sum x2^2.
    let mut acc = vec![[0.0f64; 3]; groups];
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16] => {
        let (a, b) = (inputs[0].slice::<T>()?, inputs[1].slice::<T>()?);
        walk(&shape, [&g, &s1, &s2], |_, [o, i, j]| {
            let (p, q) = (a[i].to_f64(), b[j].to_f64());
            acc[o][0] += p * q;
            acc[o][1] += p * p;
            acc[o][2] += q * q;
        });
    }, other => return Err(ctx.input_error(0, format!("{other} is not a float type"))));
    let y: Vec<f64> = acc
        .iter()
        .map(|[d, n1, n2]| d / (n1.sqrt() * n2.sqrt()).max(eps))
        .collect();
    write_f64s(&mut outputs[0], &y)
}

fn infer_dot(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let (x, y) = (&ctx.inputs[0], &ctx.inputs[1]);
    let ok = is_float(x.dtype) || matches!(x.dtype, DType::U8 | DType::I8 | DType::I32);
    if !ok {
        return Err(ctx.input_error(0, format!("{} is not supported by Dot", x.dtype)));
    }
    if y.dtype != x.dtype {
        return Err(ctx.input_error(1, format!("is {}, input_x is {}", y.dtype, x.dtype)));
    }
    for (i, t) in [x, y].iter().enumerate() {
        if t.shape.as_ref().is_some_and(|s| s.len() != 1) {
            return Err(ctx.input_error(i, format!("{t} is not 1-D")));
        }
    }
    if let (Some(a), Some(b)) = (&x.shape, &y.shape)
        && a[0] != b[0]
        && a[0] != UNKNOWN
        && b[0] != UNKNOWN
    {
        return Err(ctx.input_error(1, format!("has {} elements, input_x {}", b[0], a[0])));
    }
    Ok(meta(x.dtype, Some(Vec::new())))
}

fn dot(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let (x, y) = (&inputs[0], &inputs[1]);
    if x.len() != y.len() {
        return Err(ctx.input_error(1, format!("has {} elements, input_x {}", y.len(), x.len())));
    }
    let out = &mut outputs[0];
    if x.dtype.is_int() {
        return dispatch!(x.dtype, T in [u8, i8, i32] => {
            let s = x.slice::<T>()?.iter().zip(y.slice::<T>()?).fold(0i64, |s, (&p, &q)| {
                s.wrapping_add(i64::from(p).wrapping_mul(i64::from(q)))
            });
            // Wraps to the type, as the sum in it would.
            out.slice_mut::<T>()?[0] = s as T;
            Ok(())
        }, other => Err(ctx.input_error(0, format!("{other} is not supported by Dot"))));
    }
    dispatch!(x.dtype, T in [f32, f64, half::f16, half::bf16] => {
        let s: f64 = x.slice::<T>()?.iter().zip(y.slice::<T>()?).map(|(p, q)| p.to_f64() * q.to_f64()).sum();
        out.slice_mut::<T>()?[0] = T::from_f64(s);
        Ok(())
    }, other => Err(ctx.input_error(0, format!("{other} is not supported by Dot"))))
}

#[cfg(test)]
mod tests;
