//! CPU compute of the indexing family.
//!
//! Indices are resolved once into element (or slice) offsets of the data, checked against
//! its shape: GatherElements and ScatterElements share [`element_offsets`], GatherND and
//! ScatterND share [`slice_offsets`]. The gathers and an unreduced scatter then move
//! elements as fixed-width units without reading them; a reducing scatter combines values
//! in the element type's accumulator ([`Num`]). Compress and Unique size their outputs
//! from the data and allocate them.

use std::cmp::Ordering;

use half::{bf16, f16};

use crate::ops::DType;
use crate::ops::reduce::accumulate::{Acc, Num, total_cmp};
use crate::ops::shape::args::{bytes, bytes_mut, input, moved, output};
use crate::ops::shape::indices::{floats, ints, resolve};
use crate::ops::shape::movement::{View, by_width, copy_view, strides, units, units_mut};
use crate::ops::{InferCtx, OpError, Tensor, TensorMut, TensorRef};

/// The integer values of input `k`.
fn index_input(ctx: &InferCtx, inputs: &[TensorRef], k: usize) -> Result<Vec<i64>, OpError> {
    let t = input(ctx, inputs, k)?;
    ints(t).ok_or_else(|| ctx.input_error(k, format!("is {}, not integers", t.dtype)))
}

/// For every element of `indices` (shaped `ishape`, the data's rank), the flat offset in
/// data of `data[p with p[axis] = index]`: the positions GatherElements reads and
/// ScatterElements writes.
fn element_offsets(
    ctx: &InferCtx,
    dshape: &[usize],
    ishape: &[usize],
    idx: &[i64],
    axis: usize,
) -> Result<Vec<usize>, OpError> {
    if ishape.len() != dshape.len()
        || ishape
            .iter()
            .zip(dshape)
            .enumerate()
            .any(|(d, (&i, &n))| d != axis && i > n)
    {
        return Err(ctx.input_error(1, format!("{ishape:?} does not index {dshape:?}")));
    }
    let ds = strides(dshape);
    let dim = dshape[axis];
    let mut coord = vec![0usize; ishape.len()];
    let mut out = Vec::with_capacity(idx.len());
    let mut base = 0usize; // the offset of `coord` without its axis component
    for &i in idx {
        let j = resolve(i, dim)
            .ok_or_else(|| ctx.input_error(1, format!("index {i} is out of range for {dim}")))?;
        out.push(base + j * ds[axis]);
        // Step the odometer over the indices' shape, keeping `base` in step.
        for d in (0..ishape.len()).rev() {
            coord[d] += 1;
            if d != axis {
                base += ds[d];
            }
            if coord[d] < ishape[d] {
                break;
            }
            if d != axis {
                base -= ds[d] * ishape[d];
            }
            coord[d] = 0;
        }
    }
    Ok(out)
}

/// GatherElements: `out[p] = data[p with p[axis] = indices[p]]`.
pub fn gather_elements(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, x.rank(), "axis")?;
    let idx = index_input(ctx, inputs, 1)?;
    let at = element_offsets(ctx, x.shape, input(ctx, inputs, 1)?.shape, &idx, axis)?;
    let src = bytes(ctx, x, 0)?;
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    moved(
        ctx,
        by_width!(x.dtype.size(), W => (|| {
            let (s, d) = (units::<W>(src)?, units_mut::<W>(dst)?);
            for (o, &a) in d.iter_mut().zip(&at) {
                *o = s[a];
            }
            Ok(())
        })(), w => Err(crate::ops::shape::movement::MoveError::Width(w))),
    )
}

/// How a scatter combines an update with what is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

fn reduction(ctx: &InferCtx) -> Result<Reduction, OpError> {
    Ok(match ctx.attr_str("reduction", "none")? {
        "none" => Reduction::None,
        "add" => Reduction::Add,
        "mul" => Reduction::Mul,
        "max" => Reduction::Max,
        "min" => Reduction::Min,
        r => return Err(ctx.attr_error("reduction", format!("{r:?} is not a reduction"))),
    })
}

/// Writes the updates at `at` (each `block` elements long) into `out`, which already
/// holds the data, combining by `how`. Updates land in order, so with no reduction the
/// last write to a position wins.
fn scatter_into(
    ctx: &InferCtx,
    how: Reduction,
    updates: &TensorRef,
    at: &[usize],
    block: usize,
    out: &mut TensorMut,
) -> Result<(), OpError> {
    if updates.len() != at.len() * block {
        return Err(ctx.input_error(2, format!("{:?} does not fit the indices", updates.shape)));
    }
    if out.len() < at.iter().map(|&a| a + block).max().unwrap_or(0) {
        return Err(ctx.compute_error("an update lands past the output"));
    }
    if how == Reduction::None {
        let width = out.dtype.size();
        let (src, dst) = (bytes(ctx, updates, 2)?, bytes_mut(ctx, out)?);
        let b = block * width;
        for (k, &a) in at.iter().enumerate() {
            dst[a * width..a * width + b].copy_from_slice(&src[k * b..(k + 1) * b]);
        }
        return Ok(());
    }
    crate::dispatch!(out.dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
        combine::<T>(how, updates.slice::<T>()?, at, block, out.slice_mut::<T>()?),
        other => return Err(ctx.input_error(0, format!("{other} cannot be combined"))));
    Ok(())
}

fn combine<T: Num>(how: Reduction, updates: &[T], at: &[usize], block: usize, out: &mut [T]) {
    let f = |a: T::Acc, u: T::Acc| match how {
        Reduction::Add => a.add(u),
        Reduction::Mul => a.mul(u),
        Reduction::Max => a.maximum(u),
        Reduction::Min => a.minimum(u),
        Reduction::None => u,
    };
    for (k, &a) in at.iter().enumerate() {
        for (o, &u) in out[a..a + block]
            .iter_mut()
            .zip(&updates[k * block..(k + 1) * block])
        {
            *o = T::from_acc(f(o.to_acc(), u.to_acc()));
        }
    }
}

/// The data copied to the output, the one start every scatter makes.
fn copy_data(ctx: &InferCtx, inputs: &[TensorRef], out: &mut TensorMut) -> Result<(), OpError> {
    let src = bytes(ctx, input(ctx, inputs, 0)?, 0)?;
    let dst = bytes_mut(ctx, out)?;
    if src.len() != dst.len() {
        return Err(ctx.compute_error("the output is not the data's size"));
    }
    dst.copy_from_slice(src);
    Ok(())
}

/// ScatterElements (and opset 9's Scatter): `out[p with p[axis] = indices[p]] (op)=
/// updates[p]`.
pub fn scatter_elements(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, x.rank(), "axis")?;
    let idx = index_input(ctx, inputs, 1)?;
    let at = element_offsets(ctx, x.shape, input(ctx, inputs, 1)?.shape, &idx, axis)?;
    let how = reduction(ctx)?;
    let out = output(ctx, outputs, 0)?;
    copy_data(ctx, inputs, out)?;
    scatter_into(ctx, how, input(ctx, inputs, 2)?, &at, 1, out)
}

/// For indices shaped `[..., k]` into data after `batch` batch dims: the flat offset of
/// each indexed slice, and the slice's length (the data's dims after the first
/// `batch + k`).
fn slice_offsets(
    ctx: &InferCtx,
    dshape: &[usize],
    ishape: &[usize],
    idx: &[i64],
    batch: usize,
) -> Result<(Vec<usize>, usize), OpError> {
    let bad = || {
        ctx.input_error(
            1,
            format!("{ishape:?} with {batch} batch dims does not index {dshape:?}"),
        )
    };
    let &k = ishape.last().ok_or_else(bad)?;
    if batch + k > dshape.len() || batch >= ishape.len() || ishape[..batch] != dshape[..batch] {
        return Err(bad());
    }
    let ds = strides(dshape);
    let block: usize = dshape[batch + k..].iter().product();
    let per_batch: usize = ishape[batch..ishape.len() - 1].iter().product();
    let batch_stride: usize = dshape[batch..].iter().product();
    // With k = 0 every tuple is empty and picks its whole batch slice.
    let tuples = idx
        .len()
        .checked_div(k)
        .unwrap_or_else(|| ishape[..ishape.len() - 1].iter().product());
    let mut out = Vec::with_capacity(tuples);
    for t in 0..tuples {
        let mut at = t.checked_div(per_batch).unwrap_or(0) * batch_stride;
        for (j, &i) in idx[t * k..(t + 1) * k].iter().enumerate() {
            let dim = dshape[batch + j];
            let r = resolve(i, dim).ok_or_else(|| {
                ctx.input_error(1, format!("index {i} is out of range for {dim}"))
            })?;
            at += r * ds[batch + j];
        }
        out.push(at);
    }
    Ok((out, block))
}

/// GatherND: each index tuple picks a slice of the data.
pub fn gather_nd(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let batch = ctx.attr_int("batch_dims", 0)?.max(0) as usize;
    let idx = index_input(ctx, inputs, 1)?;
    let (at, block) = slice_offsets(ctx, x.shape, input(ctx, inputs, 1)?.shape, &idx, batch)?;
    let width = x.dtype.size();
    let (src, b) = (bytes(ctx, x, 0)?, block * width);
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    if dst.len() != at.len() * b {
        return Err(ctx.compute_error("the output does not hold the gathered slices"));
    }
    if b > 0 {
        for (o, &a) in dst.chunks_exact_mut(b).zip(&at) {
            o.copy_from_slice(&src[a * width..a * width + b]);
        }
    }
    Ok(())
}

/// ScatterND (and GE's TensorScatterUpdate): each index tuple's slice of the output
/// takes (or combines with) the matching slice of the updates.
pub fn scatter_nd(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let idx = index_input(ctx, inputs, 1)?;
    let (at, block) = slice_offsets(ctx, x.shape, input(ctx, inputs, 1)?.shape, &idx, 0)?;
    let how = reduction(ctx)?;
    let out = output(ctx, outputs, 0)?;
    copy_data(ctx, inputs, out)?;
    scatter_into(ctx, how, input(ctx, inputs, 2)?, &at, block, out)
}

/// OneHot: along a new axis of `depth`, `on` at each index and `off` elsewhere. An index
/// outside `[-depth, depth)` gives a row of `off`.
pub fn one_hot(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let idx_t = input(ctx, inputs, 0)?;
    let idx = floats(idx_t).ok_or_else(|| ctx.input_error(0, "indices are not numbers"))?;
    let values = input(ctx, inputs, 2)?;
    let y = output(ctx, outputs, 0)?;
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, y.rank(), "axis")?;
    let depth = y.shape[axis];
    let width = y.dtype.size();
    let vb = bytes(ctx, values, 2)?;
    if values.len() != 2 || values.dtype != y.dtype {
        return Err(ctx.input_error(2, "values are not [off, on] of the output type"));
    }
    let (off, on) = (&vb[..width], &vb[width..]);
    let inner: usize = idx_t.shape[axis..].iter().product();
    let dst = bytes_mut(ctx, y)?;
    if dst.len() != idx.len() * depth * width {
        return Err(ctx.compute_error("the output does not hold depth values per index"));
    }
    for o in dst.chunks_exact_mut(width) {
        o.copy_from_slice(off);
    }
    for (n, &v) in idx.iter().enumerate() {
        let Some(d) = resolve(v as i64, depth) else {
            continue;
        };
        let (o, i) = (n / inner.max(1), n % inner.max(1));
        let at = ((o * depth + d) * inner + i) * width;
        dst[at..at + width].copy_from_slice(on);
    }
    Ok(())
}

/// Compress: the slices along `axis` (the flattened elements without one) whose
/// condition is true.
pub fn compress(ctx: &InferCtx, inputs: &[TensorRef]) -> Result<Vec<Tensor>, OpError> {
    let x = input(ctx, inputs, 0)?;
    let cond = ints(input(ctx, inputs, 1)?)
        .ok_or_else(|| ctx.input_error(1, "the condition is not bool"))?;
    let axis = match ctx.attrs.get("axis").and_then(|a| a.as_int()) {
        Some(a) => Some(ctx.axis(a, x.rank(), "axis")?),
        None => None,
    };
    let flat = [x.len()];
    let shape: &[usize] = if axis.is_some() { x.shape } else { &flat };
    let a = axis.unwrap_or(0);
    let dim = shape[a];
    let keep: Vec<usize> = cond
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c != 0)
        .map(|(j, _)| j)
        .collect();
    if let Some(&j) = keep.iter().find(|&&j| j >= dim) {
        return Err(ctx.input_error(1, format!("selects index {j} of an axis of {dim}")));
    }
    let width = x.dtype.size();
    let inner = shape[a + 1..].iter().product::<usize>() * width;
    let outer: usize = shape[..a].iter().product();
    let mut out_shape = shape.to_vec();
    out_shape[a] = keep.len();
    let mut y = Tensor::zeroed(x.dtype, &out_shape);
    let src = bytes(ctx, x, 0)?;
    if inner > 0 {
        let mut rows = y.data.as_bytes_mut().chunks_exact_mut(inner);
        for o in 0..outer {
            for &j in &keep {
                let from = (o * dim + j) * inner;
                if let Some(r) = rows.next() {
                    r.copy_from_slice(&src[from..from + inner]);
                }
            }
        }
    }
    Ok(vec![y])
}

/// Unique: the distinct elements (or slices along `axis`), sorted or in order of first
/// occurrence, with their first indices, the inverse map and the counts.
pub fn unique(ctx: &InferCtx, inputs: &[TensorRef]) -> Result<Vec<Tensor>, OpError> {
    let x = input(ctx, inputs, 0)?;
    let sorted = ctx.attr_int("sorted", 1)? != 0;
    let axis = match ctx.attrs.get("axis").and_then(|a| a.as_int()) {
        Some(a) => Some(ctx.axis(a, x.rank(), "axis")?),
        None => None,
    };
    let mut outs = if x.dtype == DType::Bool {
        unique_typed::<u8>(ctx, x, axis, sorted)?
    } else {
        crate::dispatch!(x.dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
            unique_typed::<T>(ctx, x, axis, sorted)?,
            other => return Err(ctx.input_error(0, format!("{other} has no order"))))
    };
    outs.truncate(ctx.outputs.clamp(1, 4));
    Ok(outs)
}

fn unique_typed<T: crate::ops::Elem + PartialOrd>(
    ctx: &InferCtx,
    x: &TensorRef,
    axis: Option<usize>,
    sorted: bool,
) -> Result<Vec<Tensor>, OpError> {
    // Items are rows of `m` elements: single elements without an axis, else the slices
    // along `axis`, copied to rows by viewing the input as [dim, outer, inner].
    let (n, outer, inner) = match axis {
        None => (x.len(), 1, 1),
        Some(a) => (
            x.shape[a],
            x.shape[..a].iter().product::<usize>(),
            x.shape[a + 1..].iter().product::<usize>(),
        ),
    };
    let m = outer * inner;
    let src = x.slice::<T>()?;
    let mut rows = vec![T::zeroed(); src.len()];
    let view = View {
        shape: vec![n, outer, inner],
        strides: vec![inner as isize, (n * inner) as isize, 1],
        offset: 0,
    };
    let width = std::mem::size_of::<T>();
    moved(
        ctx,
        copy_view(
            width,
            bytemuck::cast_slice(src),
            &view,
            bytemuck::cast_slice_mut(&mut rows),
        ),
    )?;
    let row = |j: usize| &rows[j * m..(j + 1) * m];
    let cmp_rows = |a: usize, b: usize| -> Ordering {
        row(a)
            .iter()
            .zip(row(b))
            .map(|(p, q)| total_cmp(p, q))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    };
    // A stable sort keeps equal rows in index order, so each group starts at its first
    // occurrence.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cmp_rows(a, b));
    let mut groups: Vec<(usize, i64)> = Vec::new(); // (first index, count)
    let mut group_of = vec![0usize; n];
    for (k, &j) in order.iter().enumerate() {
        if k == 0 || cmp_rows(order[k - 1], j).is_ne() {
            groups.push((j, 0));
        }
        let g = groups.len() - 1;
        groups[g].1 += 1;
        group_of[j] = g;
    }
    // Output rank of each group: sorted order, or order of first occurrence.
    let mut rank: Vec<usize> = (0..groups.len()).collect();
    if !sorted {
        rank.sort_by_key(|&g| groups[g].0);
    }
    let mut slot = vec![0usize; groups.len()];
    for (s, &g) in rank.iter().enumerate() {
        slot[g] = s;
    }
    let firsts: Vec<i64> = rank.iter().map(|&g| groups[g].0 as i64).collect();
    let counts: Vec<i64> = rank.iter().map(|&g| groups[g].1).collect();
    let inverse: Vec<i64> = group_of.iter().map(|&g| slot[g] as i64).collect();
    let u = groups.len();
    let y = match axis {
        None => Tensor::from_vec(
            &[u],
            &firsts.iter().map(|&j| src[j as usize]).collect::<Vec<T>>(),
        ),
        Some(a) => {
            let mut shape = x.shape.to_vec();
            shape[a] = u;
            let mut v = Vec::with_capacity(outer * u * inner);
            for o in 0..outer {
                for &j in &firsts {
                    let from = (o * n + j as usize) * inner;
                    v.extend_from_slice(&src[from..from + inner]);
                }
            }
            Tensor::from_vec(&shape, &v)
        }
    };
    let y = Tensor {
        dtype: x.dtype,
        ..y
    };
    Ok(vec![
        y,
        Tensor::from_vec(&[u], &firsts),
        Tensor::from_vec(&[n], &inverse),
        Tensor::from_vec(&[u], &counts),
    ])
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::{run, run1, try_run};

    fn iota(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_vec(shape, &(0..n as i32).collect::<Vec<_>>())
    }

    #[test]
    fn gather_elements_and_nd() {
        let idx = Tensor::from_vec(&[2, 2], &[0i64, -1, 1, 0]);
        let y = run1(
            "GatherElements",
            &[("axis", Attr::Int(1))],
            &[iota(&[2, 3]), idx],
        );
        assert_eq!(y.slice::<i32>().unwrap(), [0, 2, 4, 3]);
        let idx = Tensor::from_vec(&[2, 1], &[1i64, 0]);
        let y = run1("GatherND", &[], &[iota(&[2, 2]), idx]);
        assert_eq!(y.slice::<i32>().unwrap(), [2, 3, 0, 1]);
        // One batch dim: batch b picks data[b, idx].
        let idx = Tensor::from_vec(&[2, 1], &[1i64, 0]);
        let y = run1(
            "GatherND",
            &[("batch_dims", Attr::Int(1))],
            &[iota(&[2, 2]), idx],
        );
        assert_eq!(y.slice::<i32>().unwrap(), [1, 2]);
        let bad = Tensor::from_vec(&[1, 1], &[2i64]);
        assert!(
            try_run("GatherND", &[], &[iota(&[2, 2]), bad], 1)
                .unwrap_err()
                .to_string()
                .contains("out of range")
        );
    }

    #[test]
    fn scatters_write_and_reduce() {
        let data = Tensor::from_vec(&[1, 4], &[1.0f32, 1.0, 1.0, 1.0]);
        let idx = Tensor::from_vec(&[1, 3], &[1i64, 3, 1]);
        let upd = Tensor::from_vec(&[1, 3], &[2.0f32, 3.0, 4.0]);
        let axis = ("axis", Attr::Int(1));
        let y = run1(
            "ScatterElements",
            std::slice::from_ref(&axis),
            &[data.clone(), idx.clone(), upd.clone()],
        );
        assert_eq!(y.slice::<f32>().unwrap(), [1.0, 4.0, 1.0, 3.0]);
        let add = ("reduction", Attr::Str("add".into()));
        let y = run1(
            "ScatterElements",
            &[axis.clone(), add],
            &[data.clone(), idx.clone(), upd.clone()],
        );
        assert_eq!(y.slice::<f32>().unwrap(), [1.0, 7.0, 1.0, 4.0]);
        let idx = Tensor::from_vec(&[2, 1], &[1i64, -2]);
        let upd = Tensor::from_vec(&[2, 2], &[5i32, 6, 7, 8]);
        let mul = ("reduction", Attr::Str("mul".into()));
        let y = run1("ScatterND", &[mul], &[iota(&[2, 2]), idx, upd]);
        assert_eq!(y.slice::<i32>().unwrap(), [0, 8, 10, 18]);
    }

    #[test]
    fn one_hot_compress_unique() {
        let idx = Tensor::from_vec(&[3], &[0i64, -1, 5]);
        let depth = Tensor::from_vec(&[], &[3i64]);
        let values = Tensor::from_vec(&[2], &[0i32, 1]);
        let y = run1("OneHot", &[], &[idx, depth, values]);
        assert_eq!(y.shape, [3, 3]);
        assert_eq!(y.slice::<i32>().unwrap(), [1, 0, 0, 0, 0, 1, 0, 0, 0]);
        let cond = Tensor::from_vec(&[2], &[0u8, 1]);
        let cond = Tensor {
            dtype: crate::ops::DType::Bool,
            ..cond
        };
        let y = run1(
            "Compress",
            &[("axis", Attr::Int(1))],
            &[iota(&[2, 2]), cond.clone()],
        );
        assert_eq!(y.shape, [2, 1]);
        assert_eq!(y.slice::<i32>().unwrap(), [1, 3]);
        let y = run1("Compress", &[], &[iota(&[2, 2]), cond]);
        assert_eq!(y.slice::<i32>().unwrap(), [1]);
        let x = Tensor::from_vec(&[5], &[2.0f32, 1.0, 2.0, 3.0, 1.0]);
        let ys = run(
            "Unique",
            &[("sorted", Attr::Int(0))],
            std::slice::from_ref(&x),
            4,
        );
        assert_eq!(ys[0].slice::<f32>().unwrap(), [2.0, 1.0, 3.0]);
        assert_eq!(ys[1].slice::<i64>().unwrap(), [0, 1, 3]);
        assert_eq!(ys[2].slice::<i64>().unwrap(), [0, 1, 0, 2, 1]);
        assert_eq!(ys[3].slice::<i64>().unwrap(), [2, 2, 1]);
        let ys = run("Unique", &[], &[x], 4);
        assert_eq!(ys[0].slice::<f32>().unwrap(), [1.0, 2.0, 3.0]);
        assert_eq!(ys[2].slice::<i64>().unwrap(), [1, 0, 1, 2, 0]);
        let rows = Tensor::from_vec(&[3, 2], &[1i32, 2, 0, 5, 1, 2]);
        let ys = run("Unique", &[("axis", Attr::Int(0))], &[rows], 4);
        assert_eq!(ys[0].shape, [2, 2]);
        assert_eq!(ys[0].slice::<i32>().unwrap(), [0, 5, 1, 2]);
        assert_eq!(ys[3].slice::<i64>().unwrap(), [1, 2]);
    }
}
