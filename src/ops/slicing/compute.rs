//! CPU compute of the slicing family. Slice, Tile, DepthToSpace and SpaceToDepth are each
//! one strided [`View`] copy; Pad is one index-mapped copy; Split copies blocks; Range,
//! NonZero, TopK and Trilu compute what they write.

use std::cmp::Ordering;

use half::{bf16, f16};

use crate::ops::reduce::accumulate::total_cmp;
use crate::ops::shape::args::{bytes, bytes_mut, input, moved, output};
use crate::ops::shape::indices::{floats, ints, optional_ints};
use crate::ops::shape::movement::{View, copy_mapped, copy_view};
use crate::ops::{Attr, DType};
use crate::ops::{Elem, InferCtx, OpError, Tensor, TensorMut, TensorRef};

/// The values of Slice's starts, ends, axes or steps: input `k` from opset 10, the
/// attribute before.
fn slice_arg(ctx: &InferCtx, inputs: &[TensorRef], k: usize, attr: &str) -> Option<Vec<i64>> {
    if inputs.len() > 1 {
        optional_ints(inputs, k)
    } else {
        ctx.attrs
            .get(attr)
            .and_then(Attr::as_ints)
            .map(<[i64]>::to_vec)
    }
}

/// Slice: per sliced axis, the view starts at the clamped start and steps by `step`; the
/// output's shape (from inference) says how many elements each axis keeps.
pub fn slice(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let missing = |what: &str| ctx.input_error(0, format!("Slice has no {what}"));
    let starts = slice_arg(ctx, inputs, 1, "starts").ok_or_else(|| missing("starts"))?;
    let ends = slice_arg(ctx, inputs, 2, "ends").ok_or_else(|| missing("ends"))?;
    let axes =
        slice_arg(ctx, inputs, 3, "axes").unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = slice_arg(ctx, inputs, 4, "steps").unwrap_or_else(|| vec![1; starts.len()]);
    if [ends.len(), axes.len(), steps.len()]
        .iter()
        .any(|&n| n != starts.len())
    {
        return Err(ctx.input_error(1, "starts, ends, axes and steps differ in length"));
    }
    let y = output(ctx, outputs, 0)?;
    if y.rank() != x.rank() {
        return Err(ctx.compute_error("the output's rank is not the input's"));
    }
    let base = View::contiguous(x.shape);
    let mut view = View {
        shape: y.shape.to_vec(),
        ..base.clone()
    };
    for k in 0..starts.len() {
        let a = ctx.axis(axes[k], x.rank(), "axes")?;
        let (dim, step) = (x.shape[a] as i64, steps[k]);
        if step == 0 {
            return Err(ctx.input_error(4, "a step is 0"));
        }
        let s = if starts[k] < 0 {
            starts[k].saturating_add(dim)
        } else {
            starts[k]
        };
        // ONNX clamps the start to [0, dim] going forward and to [0, dim - 1] going back.
        let start = if step > 0 {
            s.clamp(0, dim)
        } else {
            s.min(dim - 1).max(0)
        };
        view.offset += start as isize * base.strides[a];
        view.strides[a] = base.strides[a] * step as isize;
    }
    let src = bytes(ctx, x, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

/// Split: output `j` takes the next `dim_j` indices of `axis`, for every outer index.
pub fn split(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, x.rank(), "axis")?;
    let outer: usize = x.shape[..axis].iter().product();
    let inner = x.shape[axis + 1..].iter().product::<usize>() * x.dtype.size();
    let row = x.shape[axis] * inner;
    let src = bytes(ctx, x, 0)?;
    let mut at = 0;
    for y in outputs.iter_mut() {
        if y.rank() != x.rank() {
            return Err(ctx.compute_error("an output's rank is not the input's"));
        }
        let part = y.shape[axis] * inner;
        if at + part > row {
            return Err(ctx.compute_error("the outputs take more than the input holds"));
        }
        let dst = bytes_mut(ctx, y)?;
        if part > 0 {
            for (o, out) in dst.chunks_exact_mut(part).enumerate().take(outer) {
                out.copy_from_slice(&src[o * row + at..o * row + at + part]);
            }
        }
        at += part;
    }
    if at != row {
        return Err(ctx.compute_error("the outputs do not cover the input"));
    }
    Ok(())
}

/// Tile: output axis `k` is `repeats[k]` copies of input axis `k`, which is the input
/// viewed over dims `(r0, d0, r1, d1, ...)` with stride 0 on each `r`.
pub fn tile(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let reps = ints(input(ctx, inputs, 1)?)
        .ok_or_else(|| ctx.input_error(1, "repeats are not integers"))?;
    if reps.len() != x.rank() || reps.iter().any(|&r| r < 0) {
        return Err(ctx.input_error(1, format!("repeats {reps:?} do not fit rank {}", x.rank())));
    }
    let view = tile_view(x.shape, &reps);
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

/// A tensor of `shape` repeated `reps[k]` times along dim `k` (non-negative, one per dim):
/// the tensor viewed over dims `(r0, d0, r1, d1, ...)` with stride 0 on each `r`.
pub(crate) fn tile_view(shape: &[usize], reps: &[i64]) -> View {
    let base = View::contiguous(shape);
    let mut view = View {
        shape: Vec::with_capacity(2 * shape.len()),
        strides: Vec::with_capacity(2 * shape.len()),
        offset: 0,
    };
    for (k, &r) in reps.iter().enumerate() {
        view.shape.extend([r as usize, shape[k]]);
        view.strides.extend([0, base.strides[k]]);
    }
    view
}

/// The little-endian bytes of `v` as one element of `dtype`.
pub(crate) fn element_bytes(dtype: DType, v: f64) -> Vec<u8> {
    match dtype {
        DType::F16 => f16::from_f64(v).to_le_bytes().to_vec(),
        DType::Bf16 => bf16::from_f64(v).to_le_bytes().to_vec(),
        DType::Bool => vec![(v != 0.0) as u8],
        d => crate::dispatch!(d, T in [f32, f64, i8, i16, i32, i64, u8, u16, u32, u64] =>
            bytemuck::bytes_of(&(v as T)).to_vec(),
            _other => vec![0; d.size()]),
    }
}

/// Where output index `o` of a padded axis reads from, in `mode`.
fn pad_source(mode: &str, o: i64, begin: i64, dim: i64) -> Option<usize> {
    let i = o - begin;
    let j = match mode {
        _ if (0..dim).contains(&i) => i,
        "constant" => return None,
        "edge" => i.clamp(0, dim - 1),
        "wrap" => i.rem_euclid(dim),
        // Reflect about the first and last element (which are not repeated): the index
        // pattern has period 2 * (dim - 1).
        _ if dim == 1 => 0,
        _ => {
            let m = i.rem_euclid(2 * (dim - 1));
            if m < dim { m } else { 2 * (dim - 1) - m }
        }
    };
    Some(j as usize)
}

/// Pad in every mode: each output axis maps to input indices (or the constant).
pub fn pad(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let rank = x.rank();
    let mode = ctx.attr_str("mode", "constant")?;
    if !matches!(mode, "constant" | "reflect" | "edge" | "wrap") {
        return Err(ctx.attr_error("mode", format!("{mode:?} is not a padding mode")));
    }
    let pads = match ctx.attr_ints("pads")? {
        Some(p) => p.to_vec(),
        None => optional_ints(inputs, 1).ok_or_else(|| ctx.input_error(1, "pads are missing"))?,
    };
    let axes: Vec<usize> = match optional_ints(inputs, 3) {
        Some(a) => a
            .iter()
            .map(|&v| ctx.axis(v, rank, "axes"))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(ctx.input_error(1, format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    let width = x.dtype.size();
    let fill = match inputs.get(2).filter(|t| !t.is_empty()) {
        Some(v) if v.dtype == x.dtype => bytes(ctx, v, 2)?[..width].to_vec(),
        Some(v) => return Err(ctx.input_error(2, format!("is {}, data is {}", v.dtype, x.dtype))),
        None => element_bytes(x.dtype, ctx.attr_float("value", 0.0)? as f64),
    };
    let y = output(ctx, outputs, 0)?;
    let mut begin = vec![0i64; rank];
    for (k, &a) in axes.iter().enumerate() {
        begin[a] = pads[k];
    }
    let mut maps: Vec<Vec<Option<usize>>> = Vec::with_capacity(rank);
    for (a, &begin) in begin.iter().enumerate() {
        let (dim, out) = (x.shape[a] as i64, y.shape.get(a).copied().unwrap_or(0));
        if dim == 0 && out > 0 && mode != "constant" {
            return Err(ctx.input_error(0, format!("{mode} cannot pad the empty axis {a}")));
        }
        maps.push(
            (0..out as i64)
                .map(|o| pad_source(mode, o, begin, dim))
                .collect(),
        );
    }
    let src = bytes(ctx, x, 0)?;
    moved(
        ctx,
        copy_mapped(width, src, x.shape, &maps, &fill, bytes_mut(ctx, y)?),
    )
}

/// Range: `start + i * delta` for each output element.
pub fn range(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let scalar = |k: usize| -> Result<&TensorRef, OpError> {
        let t = input(ctx, inputs, k)?;
        if t.len() != 1 {
            return Err(ctx.input_error(k, "is not a scalar"));
        }
        Ok(t)
    };
    let (start, delta) = (scalar(0)?, scalar(2)?);
    let y = output(ctx, outputs, 0)?;
    if let (Some(s), Some(d)) = (ints(start), ints(delta)) {
        // Integers step exactly (and wrap as numpy's arange does in the type).
        crate::dispatch!(y.dtype, T in [i8, i16, i32, i64, u8, u16, u32, u64] =>
            for (i, o) in y.slice_mut::<T>()?.iter_mut().enumerate() {
                *o = s[0].wrapping_add((i as i64).wrapping_mul(d[0])) as T;
            },
            other => return Err(ctx.input_error(0, format!("{other} has no range"))));
        return Ok(());
    }
    let first = |t: &TensorRef, k| {
        floats(t)
            .and_then(|v| v.first().copied())
            .ok_or_else(|| ctx.input_error(k, "is not a number"))
    };
    let (s, d) = (first(start, 0)?, first(delta, 2)?);
    let at = |i: usize| s + i as f64 * d;
    match y.dtype {
        DType::F16 => y
            .slice_mut::<f16>()?
            .iter_mut()
            .enumerate()
            .for_each(|(i, o)| *o = f16::from_f64(at(i))),
        DType::Bf16 => y
            .slice_mut::<bf16>()?
            .iter_mut()
            .enumerate()
            .for_each(|(i, o)| *o = bf16::from_f64(at(i))),
        d => crate::dispatch!(d, T in [f32, f64] =>
            y.slice_mut::<T>()?.iter_mut().enumerate().for_each(|(i, o)| *o = at(i) as T),
            other => return Err(ctx.input_error(0, format!("{other} has no range")))),
    }
    Ok(())
}

/// The flat indices of the nonzero elements (NaN is nonzero, -0.0 is zero).
fn nonzero_at<T: Elem>(x: &[T]) -> Vec<usize> {
    let zero = T::zeroed();
    x.iter()
        .enumerate()
        .filter(|&(_, v)| *v != zero)
        .map(|(i, _)| i)
        .collect()
}

/// NonZero: the coordinates of the nonzero elements, one row per axis.
pub fn nonzero(ctx: &InferCtx, inputs: &[TensorRef]) -> Result<Vec<Tensor>, OpError> {
    let x = input(ctx, inputs, 0)?;
    let found = if x.dtype == DType::Bool {
        nonzero_at(x.slice::<u8>()?)
    } else {
        crate::dispatch!(x.dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
            nonzero_at(x.slice::<T>()?),
            other => return Err(ctx.input_error(0, format!("{other} is not numeric"))))
    };
    let (rank, n) = (x.rank(), found.len());
    let mut coords = vec![0i64; rank * n];
    for (k, &flat) in found.iter().enumerate() {
        let mut rest = flat;
        for a in (0..rank).rev() {
            coords[a * n + k] = (rest % x.shape[a]) as i64;
            rest /= x.shape[a];
        }
    }
    Ok(vec![Tensor::from_vec(&[rank, n], &coords)])
}

/// TopK: along `axis`, the k largest (or smallest) values in order, ties to the lower
/// index, and their indices.
pub fn top_k(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.rank(), "axis")?;
    let largest = ctx.attr_int("largest", 1)? != 0;
    let (outer, r, inner) = (
        x.shape[..axis].iter().product::<usize>(),
        x.shape[axis],
        x.shape[axis + 1..].iter().product::<usize>(),
    );
    let [values, indices] = outputs else {
        return Err(ctx.compute_error("TopK has two outputs"));
    };
    let k = values.shape.get(axis).copied().unwrap_or(0);
    if k > r {
        return Err(ctx.input_error(1, format!("k = {k} is more than the {r} elements")));
    }
    // Indices as inference typed them: int64 (ONNX's), or int32 (GE's TopK).
    let mut idx = match indices.dtype {
        DType::I64 => Indices::I64(indices.slice_mut::<i64>()?),
        DType::I32 if i32::try_from(r).is_ok() => Indices::I32(indices.slice_mut::<i32>()?),
        other => {
            return Err(ctx.compute_error(format!("{other} indices cannot index {r} elements")));
        }
    };
    crate::dispatch!(x.dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
        top_k_typed::<T>(x.slice::<T>()?, (outer, r, inner), k, largest, values.slice_mut::<T>()?, &mut idx),
        other => return Err(ctx.input_error(0, format!("{other} has no order"))));
    Ok(())
}

/// TopK's index output, in its element type.
enum Indices<'a> {
    I64(&'a mut [i64]),
    I32(&'a mut [i32]),
}

impl Indices<'_> {
    /// Index `at` at position `p` (`at` fits: checked against the axis length).
    fn put(&mut self, p: usize, at: usize) {
        match self {
            Indices::I64(v) => v[p] = at as i64,
            Indices::I32(v) => v[p] = at as i32,
        }
    }
}

fn top_k_typed<T: Elem + PartialOrd>(
    x: &[T],
    (outer, r, inner): (usize, usize, usize),
    k: usize,
    largest: bool,
    values: &mut [T],
    indices: &mut Indices,
) {
    if k == 0 {
        return;
    }
    // Best first: by value (descending when largest), then by the lower index.
    let order = |a: &(T, usize), b: &(T, usize)| -> Ordering {
        let by_value = if largest {
            total_cmp(&b.0, &a.0)
        } else {
            total_cmp(&a.0, &b.0)
        };
        by_value.then(a.1.cmp(&b.1))
    };
    let mut column: Vec<(T, usize)> = Vec::with_capacity(r);
    for o in 0..outer {
        for i in 0..inner {
            column.clear();
            column.extend((0..r).map(|j| (x[(o * r + j) * inner + i], j)));
            if k < r {
                column.select_nth_unstable_by(k - 1, order);
            }
            column[..k].sort_unstable_by(order);
            for (j, &(v, at)) in column[..k].iter().enumerate() {
                values[(o * k + j) * inner + i] = v;
                indices.put((o * k + j) * inner + i, at);
            }
        }
    }
}

/// The blocksize attribute and the NCHW dims of a DepthToSpace or SpaceToDepth input.
fn block_dims(ctx: &InferCtx, x: &TensorRef) -> Result<(usize, [usize; 4]), OpError> {
    let b = ctx.attr_int("blocksize", 0)?;
    if b < 1 {
        return Err(ctx.attr_error("blocksize", "must be positive"));
    }
    let &[n, c, h, w] = x.shape else {
        return Err(ctx.input_error(0, format!("is {:?}; the op takes NCHW", x.shape)));
    };
    Ok((b as usize, [n, c, h, w]))
}

/// DepthToSpace: channels `(b1, b2, c)` (DCR) or `(c, b1, b2)` (CRD) move to the pixel
/// offsets `(b1, b2)` of each block: the input viewed as `[n, c, h, b1, w, b2]`.
pub fn depth_to_space(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let (b, [n, c, h, w]) = block_dims(ctx, x)?;
    if c % (b * b) != 0 {
        return Err(ctx.input_error(0, format!("{c} channels are not a multiple of {}", b * b)));
    }
    let c2 = c / (b * b);
    let hw = (h * w) as isize;
    let (sc, sb1, sb2) = match ctx.attr_str("mode", "DCR")? {
        "DCR" => (hw, (b * c2) as isize * hw, c2 as isize * hw),
        "CRD" => ((b * b) as isize * hw, b as isize * hw, hw),
        m => return Err(ctx.attr_error("mode", format!("{m:?} is neither DCR nor CRD"))),
    };
    let view = View {
        shape: vec![n, c2, h, b, w, b],
        strides: vec![(c as isize) * hw, sc, w as isize, sb1, 1, sb2],
        offset: 0,
    };
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

/// SpaceToDepth: each `b x b` block's pixel `(b1, b2)` becomes channel block `b1 * b +
/// b2`: the input viewed as `[n, b1, b2, c, h / b, w / b]`.
pub fn space_to_depth(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let (b, [n, c, h, w]) = block_dims(ctx, x)?;
    if h % b != 0 || w % b != 0 {
        return Err(ctx.input_error(0, format!("{h}x{w} is not a multiple of blocksize {b}")));
    }
    let (w_, hw) = (w as isize, (h * w) as isize);
    let b_ = b as isize;
    let view = View {
        shape: vec![n, b, b, c, h / b, w / b],
        strides: vec![(c as isize) * hw, w_, 1, hw, b_ * w_, b_],
        offset: 0,
    };
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

/// Trilu: the upper (or lower) triangle of each matrix in the last two dims, from
/// diagonal `k`; the rest zero.
pub fn trilu(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let k = match optional_ints(inputs, 1).as_deref() {
        None => 0,
        Some(&[k]) => k,
        Some(_) => return Err(ctx.input_error(1, "k is not one integer")),
    };
    let upper = ctx.attr_int("upper", 1)? != 0;
    let &[.., rows, cols] = x.shape else {
        return Err(ctx.input_error(0, "Trilu takes a tensor of rank 2 or more"));
    };
    let width = x.dtype.size();
    let src = bytes(ctx, x, 0)?;
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    if src.len() != dst.len() {
        return Err(ctx.compute_error("the output is not the input's size"));
    }
    let row = cols * width;
    if row == 0 {
        return Ok(());
    }
    for (r, (s, d)) in src
        .chunks_exact(row)
        .zip(dst.chunks_exact_mut(row))
        .enumerate()
    {
        // Row i keeps columns >= i + k (upper) or <= i + k (lower).
        let edge = (r % rows.max(1)) as i64 + k;
        let (lo, hi) = if upper {
            (edge.clamp(0, cols as i64) as usize, cols)
        } else {
            (0, (edge + 1).clamp(0, cols as i64) as usize)
        };
        d.fill(0);
        d[lo * width..hi * width].copy_from_slice(&s[lo * width..hi * width]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::{run, run1};

    fn iota(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_vec(shape, &(0..n as i32).collect::<Vec<_>>())
    }

    fn i64s(v: &[i64]) -> Tensor {
        Tensor::from_vec(&[v.len()], v)
    }

    #[test]
    fn slices_step_backwards_and_clamp() {
        // Rows from the last down by 2, columns 1.. (the end clamped).
        let y = run1(
            "Slice",
            &[],
            &[
                iota(&[4, 3]),
                i64s(&[-1, 1]),
                i64s(&[-100, 100]),
                i64s(&[0, 1]),
                i64s(&[-2, 1]),
            ],
        );
        assert_eq!(y.shape, [2, 2]);
        assert_eq!(y.slice::<i32>().unwrap(), [10, 11, 4, 5]);
    }

    #[test]
    fn split_tile_and_pad() {
        let ys = run(
            "Split",
            &[("axis", Attr::Int(1)), ("split", Attr::Ints(vec![1, 2]))],
            &[iota(&[2, 3])],
            2,
        );
        assert_eq!(ys[0].slice::<i32>().unwrap(), [0, 3]);
        assert_eq!(ys[1].slice::<i32>().unwrap(), [1, 2, 4, 5]);
        let y = run1("Tile", &[], &[iota(&[1, 2]), i64s(&[2, 2])]);
        assert_eq!(y.slice::<i32>().unwrap(), [0, 1, 0, 1, 0, 1, 0, 1]);
        let x = Tensor::from_vec(&[3], &[1.0f32, 2.0, 3.0]);
        let pads = i64s(&[2, 1]);
        let pad = |mode: &str| {
            let y = run1(
                "Pad",
                &[("mode", Attr::Str(mode.into()))],
                &[x.clone(), pads.clone()],
            );
            y.slice::<f32>().unwrap().to_vec()
        };
        assert_eq!(pad("constant"), [0.0, 0.0, 1.0, 2.0, 3.0, 0.0]);
        assert_eq!(pad("reflect"), [3.0, 2.0, 1.0, 2.0, 3.0, 2.0]);
        assert_eq!(pad("edge"), [1.0, 1.0, 1.0, 2.0, 3.0, 3.0]);
        assert_eq!(pad("wrap"), [2.0, 3.0, 1.0, 2.0, 3.0, 1.0]);
        let value = Tensor::from_vec(&[], &[9.0f32]);
        let y = run1("Pad", &[], &[x.clone(), i64s(&[-1, 1]), value]);
        assert_eq!(y.slice::<f32>().unwrap(), [2.0, 3.0, 9.0]);
    }

    #[test]
    fn large_pads_and_slices_match_the_definition() {
        // Big enough for the parallel row chunks.
        let (h, w) = (300usize, 200usize);
        let x = iota(&[h, w]);
        let pads = i64s(&[3, -2, 4, 5]);
        let y = run1(
            "Pad",
            &[("mode", Attr::Str("reflect".into()))],
            &[x.clone(), pads],
        );
        assert_eq!(y.shape, [h + 7, w + 3]);
        let reflect = |i: i64, n: i64| {
            let m = i.rem_euclid(2 * (n - 1));
            if m < n { m } else { 2 * (n - 1) - m }
        };
        let got = y.slice::<i32>().unwrap();
        for (k, &v) in got.iter().enumerate() {
            let (r, c) = ((k / (w + 3)) as i64, (k % (w + 3)) as i64);
            let (sr, sc) = (reflect(r - 3, h as i64), reflect(c + 2, w as i64));
            assert_eq!(v as i64, sr * w as i64 + sc, "at {r},{c}");
        }
        let y = run1(
            "Slice",
            &[],
            &[x, i64s(&[-1]), i64s(&[i64::MIN]), i64s(&[1]), i64s(&[-1])],
        );
        let got = y.slice::<i32>().unwrap();
        assert_eq!(&got[..3], [199, 198, 197]);
        assert_eq!(got[w], 399);
    }

    #[test]
    fn range_nonzero_trilu() {
        let s = |v: i32| Tensor::from_vec(&[], &[v]);
        let y = run1("Range", &[], &[s(10), s(4), s(-3)]);
        assert_eq!(y.slice::<i32>().unwrap(), [10, 7]);
        let x = Tensor::from_vec(&[2, 2], &[0.0f32, 2.0, -0.0, f32::NAN]);
        let y = run1("NonZero", &[], &[x]);
        assert_eq!(y.shape, [2, 2]);
        assert_eq!(y.slice::<i64>().unwrap(), [0, 1, 1, 1]);
        let y = run1(
            "Trilu",
            &[("upper", Attr::Int(0))],
            &[iota(&[3, 3]), Tensor::from_vec(&[], &[1i64])],
        );
        assert_eq!(y.slice::<i32>().unwrap(), [0, 1, 0, 3, 4, 5, 6, 7, 8]);
        let y = run1("Trilu", &[], &[iota(&[2, 3])]);
        assert_eq!(y.slice::<i32>().unwrap(), [0, 1, 2, 0, 4, 5]);
    }

    #[test]
    fn top_k_prefers_the_lower_index_on_ties() {
        let x = Tensor::from_vec(&[1, 5], &[3.0f32, 7.0, 3.0, 7.0, 1.0]);
        let ys = run("TopK", &[], &[x.clone(), i64s(&[3])], 2);
        assert_eq!(ys[0].slice::<f32>().unwrap(), [7.0, 7.0, 3.0]);
        assert_eq!(ys[1].slice::<i64>().unwrap(), [1, 3, 0]);
        let ys = run("TopK", &[("largest", Attr::Int(0))], &[x, i64s(&[2])], 2);
        assert_eq!(ys[1].slice::<i64>().unwrap(), [4, 0]);
    }

    #[test]
    fn depth_and_space_round_trip() {
        let x = iota(&[1, 8, 1, 1]);
        let bs = [("blocksize", Attr::Int(2))];
        let y = run1("DepthToSpace", &bs, std::slice::from_ref(&x));
        assert_eq!(y.shape, [1, 2, 2, 2]);
        // DCR: channel (b1 * 2 + b2) * 2 + c lands at pixel (b1, b2) of channel c.
        assert_eq!(y.slice::<i32>().unwrap(), [0, 2, 4, 6, 1, 3, 5, 7]);
        let crd = [
            ("blocksize", Attr::Int(2)),
            ("mode", Attr::Str("CRD".into())),
        ];
        assert_eq!(
            run1("DepthToSpace", &crd, std::slice::from_ref(&x))
                .slice::<i32>()
                .unwrap(),
            [0, 1, 2, 3, 4, 5, 6, 7]
        );
        let back = run1("SpaceToDepth", &bs, &[y]);
        assert_eq!(back.slice::<i32>().unwrap(), x.slice::<i32>().unwrap());
    }
}
