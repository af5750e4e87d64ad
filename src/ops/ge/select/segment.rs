//! TensorFlow's segment reductions: output row `s` reduces the rows of x whose segment id
//! is `s`. Sums and products accumulate in the library's accumulator type ([`Acc`]:
//! float32 for float16 and bfloat16, wrapping 64-bit for integers) and round once.
//!
//! - SegmentSum / SegmentMax (x, segment_ids): ids sorted and non-negative, one per row of
//!   x's dim 0; `max(id) + 1` rows, an empty segment 0 (both).
//! - UnsortedSegmentSum / Max / Min / Prod (x, segment_ids, num_segments): ids shaped as a
//!   prefix of x's dims; `num_segments` rows, each started from the reduction's identity
//!   (0, the type's lowest finite value, its highest, 1) so an empty segment is that
//!   identity; a negative id drops its row (TensorFlow's rule), an id past `num_segments`
//!   is an error.

use half::{bf16, f16};

use super::kernel::{compatible, index_type, int_values, numeric, one_int};
use crate::ops::reduce::accumulate::{Acc, Num};
use crate::ops::shape::args::{input, output};
use crate::ops::{InferCtx, OpError, TensorMeta, TensorMut, TensorRef, UNKNOWN, meta};

/// Which reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reduce {
    Sum,
    Prod,
    Max,
    Min,
}

fn reduction(op: &str) -> Reduce {
    match op.trim_start_matches("Unsorted") {
        "SegmentMax" => Reduce::Max,
        "SegmentMin" => Reduce::Min,
        "SegmentProd" => Reduce::Prod,
        _ => Reduce::Sum,
    }
}

/// The finite ends of an element type: TensorFlow's `numeric_limits<T>::lowest()` and
/// `max()`, the identities its unsorted max and min start from (not the infinities).
trait Bounds: Num {
    const LOWEST: Self;
    const HIGHEST: Self;
}

macro_rules! bounds {
    ($($t:ty),*) => {$(
        impl Bounds for $t {
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
        }
    )*};
}
bounds!(f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64);

fn combine<A: Acc>(how: Reduce, a: A, b: A) -> A {
    match how {
        Reduce::Sum => a.add(b),
        Reduce::Prod => a.mul(b),
        Reduce::Max => a.maximum(b),
        Reduce::Min => a.minimum(b),
    }
}

/// Folds row `r` of x (rows of `block` elements) into output row `ids[r]` of `rows`; a
/// negative id drops its row (the others are checked). Each output row starts from the
/// identity, or with `first`, from its first row (an empty one 0).
fn fold<T: Bounds>(
    x: &[T],
    ids: &[i64],
    (rows, block): (usize, usize),
    (how, first): (Reduce, bool),
    out: &mut [T],
) {
    let start = match (first, how) {
        (true, _) | (false, Reduce::Sum) => T::Acc::ZERO,
        (false, Reduce::Prod) => T::Acc::ONE,
        (false, Reduce::Max) => T::LOWEST.to_acc(),
        (false, Reduce::Min) => T::HIGHEST.to_acc(),
    };
    let mut acc = vec![start; out.len()];
    let mut seen = vec![!first; rows];
    for (r, &id) in ids.iter().enumerate() {
        let Ok(s) = usize::try_from(id) else { continue };
        let row = &x[r * block..(r + 1) * block];
        let dst = &mut acc[s * block..(s + 1) * block];
        if std::mem::replace(&mut seen[s], true) {
            for (a, &v) in dst.iter_mut().zip(row) {
                *a = combine(how, *a, v.to_acc());
            }
        } else {
            for (a, &v) in dst.iter_mut().zip(row) {
                *a = v.to_acc();
            }
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        *o = T::from_acc(a);
    }
}

/// Runs [`fold`] on x's type, x's rows `block` elements each, after checking the ids
/// (each below the output's rows) cover x and the output holds its rows.
fn fold_typed(
    ctx: &InferCtx,
    x: &TensorRef,
    ids: &[i64],
    (block, first): (usize, bool),
    out: &mut TensorMut,
) -> Result<(), OpError> {
    let rows = out.shape.first().copied().unwrap_or(0);
    if ids.len() * block != x.len() || out.len() != rows * block {
        return Err(ctx.input_error(1, "does not hold one segment id per row of x"));
    }
    if let Some(&bad) = ids.iter().find(|&&i| i >= rows as i64) {
        return Err(ctx.input_error(1, format!("id {bad} is out of range [0, {rows})")));
    }
    let how = (reduction(ctx.op), first);
    crate::dispatch!(x.dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
        fold::<T>(x.slice::<T>()?, ids, (rows, block), how, out.slice_mut::<T>()?),
        other => return Err(ctx.input_error(0, format!("{other} is not numbers"))));
    Ok(())
}

/// SegmentSum / SegmentMax's row count: TensorFlow's ids are sorted and non-negative; the
/// last is the last segment.
fn segment_count(ctx: &InferCtx, ids: &[i64]) -> Result<i64, OpError> {
    if let Some(w) = ids.windows(2).find(|w| w[1] < w[0]) {
        return Err(ctx.input_error(1, format!("ids {} then {} are not sorted", w[0], w[1])));
    }
    match ids.first() {
        Some(&i) if i < 0 => Err(ctx.input_error(1, format!("id {i} is negative"))),
        _ => ids.last().map_or(Ok(0), |&l| {
            l.checked_add(1)
                .ok_or_else(|| ctx.input_error(1, format!("id {l} leaves no room for a count")))
        }),
    }
}

/// SegmentSum / SegmentMax (x, segment_ids): `[max id + 1] + x[1:]`, x's type.
pub fn infer_segment(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    numeric(ctx, 0)?;
    index_type(ctx, 1)?;
    let (x, ids) = (&ctx.inputs[0], &ctx.inputs[1]);
    if let Some(i) = &ids.shape
        && (i.len() != 1
            || x.shape
                .as_ref()
                .is_some_and(|s| s.first().is_none_or(|&d| !compatible(&[d], i))))
    {
        return Err(ctx.input_error(1, format!("is {i:?}, not one id per row of x")));
    }
    let rows = match ctx.value_ints(1)? {
        Some(v) => segment_count(ctx, &v)?,
        None => UNKNOWN,
    };
    let shape = match &x.shape {
        Some(s) if s.is_empty() => return Err(ctx.input_error(0, "is a scalar, not rows")),
        Some(s) => Some([rows].iter().chain(&s[1..]).copied().collect()),
        None => None,
    };
    Ok(meta(x.dtype, shape))
}

/// SegmentSum / SegmentMax: each segment's rows reduced, an empty segment 0.
pub fn segment(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let ids = int_values(ctx, inputs, 1)?;
    let rows = segment_count(ctx, &ids)?;
    let out = output(ctx, outputs, 0)?;
    if out.shape.first().map(|&d| d as i64) != Some(rows) || x.shape.first() != Some(&ids.len()) {
        return Err(ctx.input_error(1, "does not give the output's rows"));
    }
    fold_typed(ctx, x, &ids, (x.shape[1..].iter().product(), true), out)
}

/// UnsortedSegment* (x, segment_ids, num_segments): `[num_segments] + x[ids rank:]`, x's
/// type.
pub fn infer_unsorted(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    numeric(ctx, 0)?;
    index_type(ctx, 1)?;
    index_type(ctx, 2)?;
    let (x, ids) = (&ctx.inputs[0], &ctx.inputs[1]);
    let rows = match ctx.value_ints(2)?.as_deref() {
        Some([n]) if *n >= 0 => *n,
        Some(v) => return Err(ctx.input_error(2, format!("{v:?} is not one count"))),
        None => UNKNOWN,
    };
    let (Some(s), Some(i)) = (&x.shape, &ids.shape) else {
        return Ok(meta(x.dtype, None));
    };
    if i.len() > s.len() || !compatible(&s[..i.len()], i) {
        return Err(ctx.input_error(1, format!("is {i:?}, not a prefix of x's {s:?}")));
    }
    let shape = [rows].iter().chain(&s[i.len()..]).copied().collect();
    Ok(meta(x.dtype, Some(shape)))
}

/// UnsortedSegment*: each segment's rows reduced from the identity; negative ids dropped.
pub fn unsorted(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let ids_t = input(ctx, inputs, 1)?;
    if !x.shape.starts_with(ids_t.shape) {
        return Err(ctx.input_error(
            1,
            format!("is {:?}, not a prefix of x's {:?}", ids_t.shape, x.shape),
        ));
    }
    let ids = int_values(ctx, inputs, 1)?;
    let rows = one_int(ctx, inputs, 2)?;
    let out = output(ctx, outputs, 0)?;
    if out.shape.first().map(|&d| d as i64) != Some(rows) {
        return Err(ctx.input_error(2, "does not give the output's rows"));
    }
    let block = x.shape[ids_t.rank()..].iter().product();
    fold_typed(ctx, x, &ids, (block, false), out)
}
