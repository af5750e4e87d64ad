//! CPU compute of the reduction family: one reducer for the ten Reduce ops, ArgMax and
//! ArgMin, CumSum and CumProd.
//!
//! Every compute function works on the input seen as `(outer, reduced, inner)`: the reduced axes
//! are one block of dims, the dims before it are `outer`, those after it `inner`. When the
//! reduced axes are not adjacent, the input is first copied with its kept axes moved in
//! front of the reduced ones (one strided copy), which makes them adjacent. The inner
//! loops then run over `inner` contiguous accumulators per reduced row, so they stream
//! through memory and vectorize.

use half::{bf16, f16};
use rayon::prelude::*;

use crate::ops::DType;
use crate::ops::reduce::accumulate::{Acc, Num};
use crate::ops::shape::args::{input, output};
use crate::ops::shape::indices::{ints, optional_ints};
use crate::ops::shape::movement::{PAR_MIN, View, copy_view};
use crate::ops::simd::lane_fold;
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// A tensor as three dims: before, along, and after the reduced block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    outer: usize,
    reduced: usize,
    inner: usize,
}

/// The input laid out for a reduction over the marked axes: the layout, and the
/// permutation to copy the input through first when the marked axes are not adjacent.
fn layout(shape: &[usize], mark: &[bool]) -> (Layout, Option<Vec<usize>>) {
    // Dims of 1 do not affect the layout, so they neither split nor join a block.
    let live: Vec<usize> = (0..shape.len()).filter(|&k| shape[k] != 1).collect();
    let first = live.iter().position(|&k| mark[k]);
    let last = live.iter().rposition(|&k| mark[k]);
    let product = |ks: &[usize]| ks.iter().map(|&k| shape[k]).product::<usize>();
    let (Some(a), Some(b)) = (first, last) else {
        return (
            Layout {
                outer: product(&live),
                reduced: 1,
                inner: 1,
            },
            None,
        );
    };
    if live[a..=b].iter().all(|&k| mark[k]) {
        let l = Layout {
            outer: product(&live[..a]),
            reduced: product(&live[a..=b]),
            inner: product(&live[b + 1..]),
        };
        return (l, None);
    }
    let kept: Vec<usize> = (0..shape.len()).filter(|&k| !mark[k]).collect();
    let gone: Vec<usize> = (0..shape.len()).filter(|&k| mark[k]).collect();
    let l = Layout {
        outer: product(&kept),
        reduced: product(&gone),
        inner: 1,
    };
    (l, Some(kept.into_iter().chain(gone).collect()))
}

/// The input's elements in `perm` order (or as they are, without one).
fn arranged<'a, T: Num>(
    ctx: &InferCtx,
    x: &TensorRef<'a>,
    perm: Option<&[usize]>,
) -> Result<std::borrow::Cow<'a, [T]>, OpError> {
    let src = x.slice::<T>()?;
    let Some(perm) = perm else {
        return Ok(std::borrow::Cow::Borrowed(src));
    };
    let mut moved = vec![T::zeroed(); src.len()];
    let view = View::contiguous(x.shape).permute(perm);
    copy_view(
        std::mem::size_of::<T>(),
        bytemuck::cast_slice(src),
        &view,
        bytemuck::cast_slice_mut(&mut moved),
    )
    .map_err(|e| ctx.compute_error(e.to_string()))?;
    Ok(std::borrow::Cow::Owned(moved))
}

/// Which Reduce op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

impl Kind {
    fn of(op: &str) -> Option<Kind> {
        Some(match op {
            "ReduceSum" => Kind::Sum,
            "ReduceMean" => Kind::Mean,
            "ReduceMax" => Kind::Max,
            "ReduceMin" => Kind::Min,
            "ReduceProd" => Kind::Prod,
            "ReduceL1" => Kind::L1,
            "ReduceL2" => Kind::L2,
            "ReduceLogSum" => Kind::LogSum,
            "ReduceLogSumExp" => Kind::LogSumExp,
            "ReduceSumSquare" => Kind::SumSquare,
            _ => return None,
        })
    }
}

/// The axes a Reduce op reduces: the attribute, or input 1 (absent or empty: every axis,
/// or none with `noop_with_empty_axes`).
fn reduced_axes(ctx: &InferCtx, inputs: &[TensorRef], rank: usize) -> Result<Vec<bool>, OpError> {
    let axes = match ctx.attr_ints("axes")? {
        Some(a) => a.to_vec(),
        None => optional_ints(inputs, 1).unwrap_or_default(),
    };
    if axes.is_empty() {
        let all = ctx.attr_int("noop_with_empty_axes", 0)? == 0;
        return Ok(vec![all; rank]);
    }
    let mut mark = vec![false; rank];
    for a in axes {
        mark[ctx.axis(a, rank, "axes")?] = true;
    }
    Ok(mark)
}

/// The ten Reduce ops.
pub fn reduce(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let kind = Kind::of(ctx.op).ok_or_else(|| ctx.compute_error("is not a reduction"))?;
    let x = input(ctx, inputs, 0)?;
    let mark = reduced_axes(ctx, inputs, x.rank())?;
    let y = output(ctx, outputs, 0)?;
    if x.dtype == DType::Bool {
        // Max is any and Min is all; as bytes, an empty Min gives 255, which is true.
        if !matches!(kind, Kind::Max | Kind::Min) {
            return Err(ctx.input_error(0, format!("bool has no {}", ctx.op)));
        }
        reduce_typed::<u8>(ctx, kind, x, &mark, y)?;
        for v in y.slice_mut::<u8>()? {
            *v = (*v != 0) as u8;
        }
        return Ok(());
    }
    crate::dispatch!(x.dtype, T in [f32, f64, f16, bf16, i32, i64, u32, u64, i8, u8, i16, u16] =>
        reduce_typed::<T>(ctx, kind, x, &mark, y),
        other => Err(ctx.input_error(0, format!("{other} cannot be reduced"))))
}

fn reduce_typed<T: Num>(
    ctx: &InferCtx,
    kind: Kind,
    x: &TensorRef,
    mark: &[bool],
    y: &mut TensorMut,
) -> Result<(), OpError> {
    let (l, perm) = layout(x.shape, mark);
    let data = arranged::<T>(ctx, x, perm.as_deref())?;
    let out = y.slice_mut::<T>()?;
    if out.len() != l.outer * l.inner {
        return Err(ctx.compute_error(format!(
            "{} output elements for {} reductions",
            out.len(),
            l.outer * l.inner
        )));
    }
    let mut acc = vec![<T::Acc as Acc>::ZERO; out.len()];
    // LogSumExp subtracts each output's max before exp, so large inputs do not overflow.
    let shift = if kind == Kind::LogSumExp {
        let mut m = vec![T::lowest().to_acc(); out.len()];
        fold(&data, l, &mut m, &[], |a, v, _| a.maximum(v), Acc::maximum);
        for s in &mut m {
            // An all -inf (or empty) row has nothing to shift by.
            if (*s).partial_cmp(&T::lowest().to_acc()) != Some(std::cmp::Ordering::Greater) {
                *s = <T::Acc as Acc>::ZERO;
            }
        }
        m
    } else {
        Vec::new()
    };
    let init = match kind {
        Kind::Prod => <T::Acc as Acc>::ONE,
        Kind::Max => T::lowest().to_acc(),
        Kind::Min => T::highest().to_acc(),
        _ => <T::Acc as Acc>::ZERO,
    };
    acc.fill(init);
    // Every kind but LogSumExp folds the values as they are; `combine` joins two
    // accumulators as `f` joins an accumulator and a value.
    macro_rules! fold {
        ($f:expr, $combine:expr) => {
            fold(&data, l, &mut acc, &[], $f, $combine)
        };
    }
    match kind {
        Kind::Sum | Kind::Mean | Kind::LogSum => fold!(|a, v, _| a.add(v), Acc::add),
        Kind::Max => fold!(|a, v, _| a.maximum(v), Acc::maximum),
        Kind::Min => fold!(|a, v, _| a.minimum(v), Acc::minimum),
        Kind::Prod => fold!(|a, v, _| a.mul(v), Acc::mul),
        Kind::L1 => fold!(|a, v, _| a.add(v.abs()), Acc::add),
        Kind::L2 | Kind::SumSquare => fold!(|a, v, _| a.add(v.mul(v)), Acc::add),
        Kind::LogSumExp => fold(
            &data,
            l,
            &mut acc,
            &shift,
            |a, v, s| a.add(v.sub(s).exp()),
            Acc::add,
        ),
    }
    for (k, (o, a)) in out.iter_mut().zip(acc).enumerate() {
        let r = match kind {
            Kind::Mean => a.div_count(l.reduced),
            Kind::L2 => a.sqrt(),
            Kind::LogSum => a.ln(),
            Kind::LogSumExp => a.ln().add(shift[k]),
            _ => a,
        };
        *o = T::from_acc(r);
    }
    Ok(())
}

/// Folds every reduced row into the accumulators, which hold `f`'s identity:
/// `acc[o * inner + i] = f(acc, x[o, r, i], shift)` for each `r` in order. Accumulators of
/// one outer index are a contiguous row, updated by whole reduced rows, so the inner loop
/// is a straight pass over two slices. A reduction of the last axis folds each row in
/// lanes ([`fold_row`]) and joins them with `combine`, which joins two accumulators as
/// `f` joins an accumulator and a value.
fn fold<T: Num>(
    x: &[T],
    l: Layout,
    acc: &mut [T::Acc],
    shift: &[T::Acc],
    f: impl Fn(T::Acc, T::Acc, T::Acc) -> T::Acc + Sync,
    combine: impl Fn(T::Acc, T::Acc) -> T::Acc + Sync,
) {
    if acc.is_empty() || l.reduced == 0 {
        return;
    }
    let zero = <T::Acc as Acc>::ZERO;
    let rows = |first: usize, acc: &mut [T::Acc]| {
        for (k, a) in acc.chunks_exact_mut(l.inner).enumerate() {
            let o = first + k;
            let block = &x[o * l.reduced * l.inner..(o + 1) * l.reduced * l.inner];
            let s = shift.get(o * l.inner..(o + 1) * l.inner);
            // Reducing the last axis (the common case: LayerNorm's mean, a softmax's
            // max) folds one contiguous block into one accumulator.
            if let [a] = a {
                let s = s.map_or(zero, |s| s[0]);
                *a = fold_row(block, *a, s, &f, &combine);
                continue;
            }
            for row in block.chunks_exact(l.inner) {
                for (i, (a, &v)) in a.iter_mut().zip(row).enumerate() {
                    *a = f(*a, v.to_acc(), s.map_or(zero, |s| s[i]));
                }
            }
        }
    };
    let per_chunk = PAR_MIN.div_ceil(l.reduced * l.inner);
    if l.outer <= per_chunk {
        rows(0, acc);
    } else {
        acc.par_chunks_mut(per_chunk * l.inner)
            .enumerate()
            .for_each(|(c, a)| rows(c * per_chunk, a));
    }
}

crate::ops::simd::per_isa! {
    /// One contiguous reduced row folded from `id`, `f`'s identity, in lanes
    /// ([`lane_fold`]), joined with `combine`.
    ///
    /// Why: a fold one element after another is one chain of dependent operations, an
    /// addition's latency per element (a 768-float row's mean at 1.3 ns an element, 6x
    /// ONNX Runtime's ReduceMean; Max, with its NaN test, 12x); the lanes are independent
    /// chains the vector units run side by side. Their order is fixed whatever the
    /// vector width, so the bits are the same on every CPU.
    fn fold_row<T, F, C>(row: &[T], id: T::Acc, s: T::Acc, f: &F, combine: &C) -> T::Acc
        where [T: Num, F: Fn(T::Acc, T::Acc, T::Acc) -> T::Acc, C: Fn(T::Acc, T::Acc) -> T::Acc]
        => fold_row_any
}

#[inline(always)]
fn fold_row_any<T: Num, F, C>(row: &[T], id: T::Acc, s: T::Acc, f: &F, combine: &C) -> T::Acc
where
    F: Fn(T::Acc, T::Acc, T::Acc) -> T::Acc,
    C: Fn(T::Acc, T::Acc) -> T::Acc,
{
    lane_fold(row, id, |a, v| f(a, v.to_acc(), s), |r, a| combine(a, r))
}

/// ArgMax and ArgMin: the index of the first (or with `select_last_index`, the last)
/// extreme along `axis`. NaN counts as the extreme, as numpy's argmax has it.
pub fn arg_extreme(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, x.rank(), "axis")?;
    let last = ctx.attr_int("select_last_index", 0)? != 0;
    let max = ctx.op == "ArgMax";
    let l = Layout {
        outer: x.shape[..axis].iter().product(),
        reduced: x.shape[axis],
        inner: x.shape[axis + 1..].iter().product(),
    };
    if l.reduced == 0 {
        return Err(ctx.input_error(0, format!("axis {axis} is empty")));
    }
    let y = output(ctx, outputs, 0)?.slice_mut::<i64>()?;
    if y.len() != l.outer * l.inner {
        return Err(ctx.compute_error("the output does not hold one index per row"));
    }
    if y.is_empty() {
        return Ok(());
    }
    crate::dispatch!(x.dtype, T in [f32, f64, f16, bf16, i32, i64, u32, u64, i8, u8, i16, u16] =>
        { arg_typed::<T>(x.slice::<T>()?, l, max, last, y); Ok(()) },
        other => Err(ctx.input_error(0, format!("{other} has no order"))))
}

fn arg_typed<T: Num>(x: &[T], l: Layout, max: bool, last: bool, y: &mut [i64]) {
    #[allow(clippy::eq_op)]
    let nan = |v: T| v != v;
    // Whether `v` replaces the best so far `b`: strictly beyond it, or equal when the
    // last index wins; a NaN beats any number and the first NaN stays.
    let beats = |v: T, b: T| {
        if nan(b) {
            return false;
        }
        nan(v) || if max { v > b } else { v < b } || (last && v == b)
    };
    let mut best: Vec<T> = Vec::with_capacity(l.inner);
    for (o, out) in y.chunks_exact_mut(l.inner).enumerate() {
        let block = &x[o * l.reduced * l.inner..(o + 1) * l.reduced * l.inner];
        best.clear();
        best.extend_from_slice(&block[..l.inner]);
        out.fill(0);
        for (r, row) in block.chunks_exact(l.inner).enumerate().skip(1) {
            for ((b, i), &v) in best.iter_mut().zip(out.iter_mut()).zip(row) {
                if beats(v, *b) {
                    *b = v;
                    *i = r as i64;
                }
            }
        }
    }
}

/// CumSum and CumProd along the axis input: inclusive or `exclusive`, forward or
/// `reverse`.
pub fn cumulative(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let a = input(ctx, inputs, 1)?;
    let axis = match ints(a).as_deref() {
        Some(&[a]) => ctx.axis(a, x.rank(), "axis")?,
        _ => return Err(ctx.input_error(1, "the axis is not one integer")),
    };
    let l = Layout {
        outer: x.shape[..axis].iter().product(),
        reduced: x.shape[axis],
        inner: x.shape[axis + 1..].iter().product(),
    };
    let exclusive = ctx.attr_int("exclusive", 0)? != 0;
    let reverse = ctx.attr_int("reverse", 0)? != 0;
    let product = ctx.op == "CumProd";
    let y = output(ctx, outputs, 0)?;
    crate::dispatch!(x.dtype, T in [f32, f64, f16, bf16, i32, i64, u32, u64, i8, u8, i16, u16] =>
        {
            let (src, dst) = (x.slice::<T>()?, y.slice_mut::<T>()?);
            if src.len() != dst.len() {
                return Err(ctx.compute_error("the output is not the input's size"));
            }
            cumulate::<T>(src, l, product, exclusive, reverse, dst);
            Ok(())
        },
        other => Err(ctx.input_error(0, format!("{other} cannot be summed"))))
}

fn cumulate<T: Num>(
    x: &[T],
    l: Layout,
    product: bool,
    exclusive: bool,
    reverse: bool,
    y: &mut [T],
) {
    if x.is_empty() {
        return;
    }
    let block = l.reduced * l.inner;
    let init = if product {
        <T::Acc as Acc>::ONE
    } else {
        <T::Acc as Acc>::ZERO
    };
    let mut acc = vec![init; l.inner];
    for (xs, ys) in x.chunks_exact(block).zip(y.chunks_exact_mut(block)) {
        acc.fill(init);
        for r in 0..l.reduced {
            let r = if reverse { l.reduced - 1 - r } else { r };
            let (row, out) = (
                &xs[r * l.inner..(r + 1) * l.inner],
                &mut ys[r * l.inner..(r + 1) * l.inner],
            );
            for ((a, o), &v) in acc.iter_mut().zip(out).zip(row) {
                let next = if product {
                    a.mul(v.to_acc())
                } else {
                    a.add(v.to_acc())
                };
                *o = T::from_acc(if exclusive { *a } else { next });
                *a = next;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run1;

    fn x234() -> Tensor {
        Tensor::from_vec(&[2, 3, 4], &(0..24).map(|v| v as f32).collect::<Vec<_>>())
    }

    /// Reductions of the last axis, folded in lanes: long rows with every remainder of
    /// the lanes, against a sum in f64 (within a few ulps), and exactly where the order
    /// cannot matter: Max and Min (NaN anywhere in a row, in a lane or in the tail, is
    /// the result), integer sums and products (wrapping).
    #[test]
    fn last_axis_rows_fold_in_lanes() {
        for len in [1, 15, 16, 17, 40, 768, 1001] {
            let rows = 3;
            let x: Vec<f32> = (0..rows * len)
                .map(|i| ((i * 17 % 101) as f32 - 50.0) * 0.37)
                .collect();
            let t = Tensor::from_vec(&[rows, len], &x);
            let axes = [("axes", Attr::Ints(vec![-1])), ("keepdims", Attr::Int(0))];
            let sum = run1(
                "ReduceSum",
                &axes[1..],
                &[t.clone(), Tensor::from_vec(&[1], &[-1i64])],
            );
            let max = run1("ReduceMax", &axes, std::slice::from_ref(&t));
            let min = run1("ReduceMin", &axes, std::slice::from_ref(&t));
            for r in 0..rows {
                let row = &x[r * len..(r + 1) * len];
                let exact: f64 = row.iter().map(|&v| v as f64).sum();
                let got = sum.slice::<f32>().unwrap()[r] as f64;
                let scale: f64 = row.iter().map(|&v| (v as f64).abs()).sum();
                assert!(
                    (got - exact).abs() <= scale * 4.0 * f32::EPSILON as f64,
                    "{len}"
                );
                let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                assert_eq!(max.slice::<f32>().unwrap()[r], m, "{len}");
                let m = row.iter().copied().fold(f32::INFINITY, f32::min);
                assert_eq!(min.slice::<f32>().unwrap()[r], m, "{len}");
            }
            for at in [0, len / 2, len - 1] {
                let mut y = x.clone();
                y[len + at] = f32::NAN;
                let t = Tensor::from_vec(&[rows, len], &y);
                for op in ["ReduceMax", "ReduceMin"] {
                    let out = run1(op, &axes, std::slice::from_ref(&t));
                    let v = out.slice::<f32>().unwrap();
                    assert!(
                        v[1].is_nan() && !v[0].is_nan() && !v[2].is_nan(),
                        "{op} {len} {at}"
                    );
                }
            }
            let ints: Vec<i32> = (0..rows * len)
                .map(|i| (i as i32 * 7919) % 1000 - 3)
                .collect();
            let t = Tensor::from_vec(&[rows, len], &ints);
            let sum = run1(
                "ReduceSum",
                &axes[1..],
                &[t.clone(), Tensor::from_vec(&[1], &[-1i64])],
            );
            let prod = run1("ReduceProd", &axes, &[t]);
            for r in 0..rows {
                let row = &ints[r * len..(r + 1) * len];
                let s = row.iter().fold(0i32, |a, &v| a.wrapping_add(v));
                let p = row.iter().fold(1i32, |a, &v| a.wrapping_mul(v));
                assert_eq!(sum.slice::<i32>().unwrap()[r], s, "{len}");
                assert_eq!(prod.slice::<i32>().unwrap()[r], p, "{len}");
            }
        }
    }

    #[test]
    fn layouts_join_adjacent_axes_and_permute_the_rest() {
        assert_eq!(
            layout(&[2, 3, 4], &[false, true, false]),
            (
                Layout {
                    outer: 2,
                    reduced: 3,
                    inner: 4
                },
                None
            )
        );
        // A dim of 1 between reduced axes does not split them.
        assert_eq!(
            layout(&[2, 1, 4], &[true, false, true]),
            (
                Layout {
                    outer: 1,
                    reduced: 8,
                    inner: 1
                },
                None
            )
        );
        assert_eq!(
            layout(&[2, 3, 4], &[true, false, true]),
            (
                Layout {
                    outer: 3,
                    reduced: 8,
                    inner: 1
                },
                Some(vec![1, 0, 2])
            )
        );
    }

    #[test]
    fn reductions_over_middle_and_split_axes() {
        let y = run1(
            "ReduceSum",
            &[("axes", Attr::Ints(vec![1])), ("keepdims", Attr::Int(0))],
            &[x234()],
        );
        assert_eq!(y.shape, [2, 4]);
        assert_eq!(
            y.slice::<f32>().unwrap(),
            [12.0, 15.0, 18.0, 21.0, 48.0, 51.0, 54.0, 57.0]
        );
        let y = run1("ReduceMax", &[("axes", Attr::Ints(vec![0, 2]))], &[x234()]);
        assert_eq!(y.shape, [1, 3, 1]);
        assert_eq!(y.slice::<f32>().unwrap(), [15.0, 19.0, 23.0]);
        let axes = Tensor::from_vec(&[1], &[-1i64]);
        let y = run1("ReduceMean", &[], &[x234(), axes]);
        assert_eq!(&y.slice::<f32>().unwrap()[..2], [1.5, 5.5]);
        let x = Tensor::from_vec(&[2], &[3.0f32, 4.0]);
        assert_eq!(
            run1("ReduceL2", &[], std::slice::from_ref(&x))
                .slice::<f32>()
                .unwrap(),
            [5.0]
        );
        assert_eq!(
            run1("ReduceSumSquare", &[], std::slice::from_ref(&x))
                .slice::<f32>()
                .unwrap(),
            [25.0]
        );
        let lse = run1(
            "ReduceLogSumExp",
            &[],
            &[Tensor::from_vec(&[2], &[1000.0f32, 1000.0])],
        );
        assert!((lse.slice::<f32>().unwrap()[0] - (1000.0 + 2f32.ln())).abs() < 1e-3);
    }

    #[test]
    fn empty_reductions_give_the_identity() {
        let x = Tensor::zeroed(crate::ops::DType::F32, &[2, 0]);
        let ax = [("axes", Attr::Ints(vec![1])), ("keepdims", Attr::Int(0))];
        assert_eq!(
            run1("ReduceSum", &ax, std::slice::from_ref(&x))
                .slice::<f32>()
                .unwrap(),
            [0.0, 0.0]
        );
        assert_eq!(
            run1("ReduceProd", &ax, std::slice::from_ref(&x))
                .slice::<f32>()
                .unwrap(),
            [1.0, 1.0]
        );
        assert_eq!(
            run1("ReduceMax", &ax, std::slice::from_ref(&x))
                .slice::<f32>()
                .unwrap(),
            [f32::NEG_INFINITY; 2]
        );
        let i = Tensor::zeroed(crate::ops::DType::I32, &[1, 0]);
        assert_eq!(
            run1("ReduceMin", &ax, &[i]).slice::<i32>().unwrap(),
            [i32::MAX]
        );
    }

    #[test]
    fn integers_wrap_and_halves_accumulate_in_f32() {
        let x = Tensor::from_vec(&[2], &[100i8, 100]);
        assert_eq!(run1("ReduceSum", &[], &[x]).slice::<i8>().unwrap(), [-56]);
        let h: Vec<f16> = [2048.0f32, 1.0, 1.0]
            .iter()
            .map(|&v| f16::from_f32(v))
            .collect();
        let y = run1("ReduceSum", &[], &[Tensor::from_vec(&[3], &h)]);
        assert_eq!(y.slice::<f16>().unwrap(), [f16::from_f32(2050.0)]);
    }

    #[test]
    fn bools_reduce_as_any_and_all() {
        let b = Tensor::from_vec(&[2, 2], &[1u8, 0, 1, 1]);
        let b = Tensor {
            dtype: DType::Bool,
            ..b
        };
        let ax = [("axes", Attr::Ints(vec![1])), ("keepdims", Attr::Int(0))];
        assert_eq!(
            run1("ReduceMin", &ax, std::slice::from_ref(&b))
                .slice::<u8>()
                .unwrap(),
            [0, 1]
        );
        assert_eq!(run1("ReduceMax", &ax, &[b]).slice::<u8>().unwrap(), [1, 1]);
    }

    #[test]
    fn arg_extremes_break_ties_by_index() {
        let x = Tensor::from_vec(&[2, 3], &[1.0f32, 5.0, 5.0, 7.0, 2.0, 7.0]);
        let y = run1(
            "ArgMax",
            &[("axis", Attr::Int(1))],
            std::slice::from_ref(&x),
        );
        assert_eq!(y.shape, [2, 1]);
        assert_eq!(y.slice::<i64>().unwrap(), [1, 0]);
        let y = run1(
            "ArgMax",
            &[("axis", Attr::Int(1)), ("select_last_index", Attr::Int(1))],
            std::slice::from_ref(&x),
        );
        assert_eq!(y.slice::<i64>().unwrap(), [2, 2]);
        let y = run1(
            "ArgMin",
            &[("axis", Attr::Int(0)), ("keepdims", Attr::Int(0))],
            &[x],
        );
        assert_eq!(y.slice::<i64>().unwrap(), [0, 1, 0]);
    }

    #[test]
    fn cumulative_sums_and_products() {
        let x = Tensor::from_vec(&[2, 3], &[1i32, 2, 3, 4, 5, 6]);
        let axis = Tensor::from_vec(&[], &[1i64]);
        let y = run1("CumSum", &[], &[x.clone(), axis.clone()]);
        assert_eq!(y.slice::<i32>().unwrap(), [1, 3, 6, 4, 9, 15]);
        let y = run1(
            "CumSum",
            &[("exclusive", Attr::Int(1)), ("reverse", Attr::Int(1))],
            &[x.clone(), axis.clone()],
        );
        assert_eq!(y.slice::<i32>().unwrap(), [5, 3, 0, 11, 6, 0]);
        let y = run1("CumProd", &[], &[x.clone(), Tensor::from_vec(&[], &[0i32])]);
        assert_eq!(y.slice::<i32>().unwrap(), [1, 2, 3, 4, 10, 18]);
    }
}
