//! The selection ops that read or write a tensor at the positions an index (or a mask)
//! names: TensorFlow's scatters, PyTorch's gather, index_add and masked_fill, and two
//! index sequences (InvertPermutation, RangeD). The scatters run on the library's ScatterND
//! (a first-dim index of ScatterUpdate/ScatterAdd is an index tuple of one), GatherD on its
//! GatherElements, MaskedFill on its Cast and Where, after TensorFlow's or PyTorch's checks
//! (every index in `[0, dim)`, shapes as they require).

use half::{bf16, f16};

use super::super::attrs::{onnx_attrs, required_float, required_list};
use super::kernel::{
    compatible, dims, in_range, index_type, int_values, library_compute, numeric, one_int,
};
use crate::ops::elementwise::num::Num;
use crate::ops::reduce::accumulate::{Acc, Num as Accumulate};
use crate::ops::shape::args::{bytes, bytes_mut, input, output};
use crate::ops::{
    Attr, Attrs, DType, InferCtx, OpError, Tensor, TensorMeta, TensorMut, TensorRef, UNKNOWN, meta,
};

// ---------------------------------------------------------------------------------------
// The scatters

/// Whether the op adds its updates (else each replaces what is there).
fn adds(op: &str) -> bool {
    matches!(
        op,
        "ScatterNd" | "ScatterNdD" | "ScatterNdAdd" | "ScatterAdd" | "TensorScatterAdd"
    )
}

/// Whether the op indexes var's first dim with each index (TensorFlow's scatter_update
/// and scatter_add), rather than with index tuples along the indices' last dim.
fn first_dim(op: &str) -> bool {
    matches!(op, "ScatterUpdate" | "ScatterAdd")
}

/// TensorFlow's shape rule of an nd scatter into `data`: indices `[..., K]` with K at most
/// data's rank, updates of `indices[:-1] + data[K:]`. Unknown dims pass. `u` is the
/// updates' input.
fn nd_shapes(
    ctx: &InferCtx,
    data: &[i64],
    indices: &[i64],
    updates: &[i64],
    u: usize,
) -> Result<(), OpError> {
    let Some((&k, lead)) = indices.split_last() else {
        return Err(ctx.input_error(u - 1, "indices are a scalar, not [..., K]"));
    };
    if k == UNKNOWN {
        return Ok(());
    }
    let k = usize::try_from(k).unwrap_or(usize::MAX);
    if k > data.len() {
        return Err(ctx.input_error(
            u - 1,
            format!("{indices:?} indexes {k} dims of a tensor of {}", data.len()),
        ));
    }
    let want: Vec<i64> = lead.iter().chain(&data[k..]).copied().collect();
    if !compatible(&want, updates) {
        return Err(ctx.input_error(u, format!("is {updates:?}, the indices need {want:?}")));
    }
    Ok(())
}

/// The library's ScatterND of `updates` into `data` at `indices` (`[..., K]`), into `out`,
/// adding or replacing: after TensorFlow's checks, with index input `k` named in errors.
fn scatter_into(
    ctx: &InferCtx,
    [data, indices, updates]: [TensorRef; 3],
    k: usize,
    out: &mut TensorMut,
) -> Result<(), OpError> {
    nd_shapes(
        ctx,
        &dims(data.shape),
        &dims(indices.shape),
        &dims(updates.shape),
        k + 1,
    )?;
    let idx = int_values(ctx, &[indices], 0).map_err(|_| ctx.input_error(k, "is not integers"))?;
    let depth = indices.shape.last().copied().unwrap_or(0);
    if depth > 0 {
        for tuple in idx.chunks_exact(depth) {
            for (&i, &dim) in tuple.iter().zip(data.shape) {
                in_range(ctx, k, i, dim)?;
            }
        }
    }
    let reduction = if adds(ctx.op) { "add" } else { "none" };
    let attrs = onnx_attrs(vec![("reduction", Attr::Str(reduction.to_string()))]);
    let out = TensorMut::new(out.dtype, out.shape, &mut *out.data);
    library_compute("ScatterND", &attrs, &[data, indices, updates], &mut [out])
}

/// ScatterNd (indices, x, shape) and ScatterNdD (indices, x; shape): x's type, `shape`.
pub fn infer_scatter_nd(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let attr = ctx.op == "ScatterNdD";
    if attr {
        ctx.arity(2, 2)?;
    } else {
        ctx.arity(3, 3)?;
        index_type(ctx, 2)?;
    }
    index_type(ctx, 0)?;
    numeric(ctx, 1)?;
    let shape = if attr {
        let s = required_list(ctx, "shape")?;
        if s.iter().any(|&d| d < 0) {
            return Err(ctx.attr_error("shape", format!("{s:?} has a negative dim")));
        }
        Some(s)
    } else {
        crate::ops::shape::dims_input(ctx, 2)?
    };
    let (indices, x) = (&ctx.inputs[0], &ctx.inputs[1]);
    if let (Some(s), Some(i), Some(u)) = (&shape, &indices.shape, &x.shape) {
        nd_shapes(ctx, s, i, u, 1)?;
    }
    Ok(meta(x.dtype, shape))
}

/// ScatterNd and ScatterNdD: zeros of the output's shape with x added at the indices
/// (TensorFlow's scatter_nd: duplicates sum).
pub fn scatter_nd(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (indices, x) = (input(ctx, inputs, 0)?, input(ctx, inputs, 1)?);
    let out = output(ctx, outputs, 0)?;
    if !attr_shape_matches(ctx, inputs, out.shape)? {
        return Err(ctx.input_error(2, "does not hold the output's shape"));
    }
    let zeros = Tensor::zeroed(x.dtype, out.shape);
    scatter_into(ctx, [zeros.as_ref(), *indices, *x], 0, out)
}

/// Whether ScatterNd's shape input (ScatterNdD's attribute) is the output's shape.
fn attr_shape_matches(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    out: &[usize],
) -> Result<bool, OpError> {
    let shape = if ctx.op == "ScatterNdD" {
        required_list(ctx, "shape")?
    } else {
        int_values(ctx, inputs, 2)?
    };
    Ok(shape == dims(out))
}

/// The scatters into var (ScatterNdAdd, ScatterNdUpdate, ScatterUpdate, ScatterAdd;
/// use_locking read by no one) and TensorScatterAdd (x, indices, updates): var's shape
/// and type.
pub fn infer_scatter(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    index_type(ctx, 1)?;
    let (var, indices, updates) = (&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2]);
    if adds(ctx.op) {
        numeric(ctx, 0)?;
    }
    if updates.dtype != var.dtype {
        return Err(ctx.input_error(2, format!("is {}, var is {}", updates.dtype, var.dtype)));
    }
    if let (Some(v), Some(i), Some(u)) = (&var.shape, &indices.shape, &updates.shape) {
        let mut i = i.clone();
        if first_dim(ctx.op) {
            i.push(1);
        }
        nd_shapes(ctx, v, &i, u, 2)?;
    }
    Ok(vec![var.clone()])
}

/// The scatters into var: var with the updates written (or added) at the indices, as
/// TensorFlow's functional scatters give it.
pub fn scatter(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (var, indices, updates) = (
        input(ctx, inputs, 0)?,
        input(ctx, inputs, 1)?,
        input(ctx, inputs, 2)?,
    );
    // A first-dim index is an index tuple of one: the indices seen with a last dim of 1.
    let tuples: Vec<usize> = indices.shape.iter().copied().chain([1]).collect();
    let indices = if first_dim(ctx.op) {
        TensorRef::new(indices.dtype, &tuples, indices.data)
    } else {
        *indices
    };
    scatter_into(ctx, [*var, indices, *updates], 1, output(ctx, outputs, 0)?)
}

// ---------------------------------------------------------------------------------------
// IndexAdd

/// IndexAdd's axis, checked for rank `rank`.
fn index_axis(ctx: &InferCtx, rank: usize) -> Result<usize, OpError> {
    ctx.axis(ctx.attr_int("axis", 0)?, rank, "axis")
}

/// IndexAdd (var, indices, updates; axis 0): var's shape and type.
pub fn infer_index_add(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    numeric(ctx, 0)?;
    index_type(ctx, 1)?;
    let (var, indices, updates) = (&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2]);
    if updates.dtype != var.dtype {
        return Err(ctx.input_error(2, format!("is {}, var is {}", updates.dtype, var.dtype)));
    }
    if let Some(i) = &indices.shape
        && i.len() != 1
    {
        return Err(ctx.input_error(1, format!("is {i:?}, not 1-D")));
    }
    if let Some(v) = &var.shape {
        let a = index_axis(ctx, v.len())?;
        if let Some(u) = &updates.shape {
            let mut want = v.clone();
            want[a] = indices.shape.as_ref().map_or(UNKNOWN, |i| i[0]);
            if !compatible(&want, u) {
                return Err(ctx.input_error(2, format!("is {u:?}, the indices need {want:?}")));
            }
        }
    }
    Ok(vec![var.clone()])
}

/// IndexAdd, PyTorch's index_add (alpha 1): `var[.., indices[t], ..] += updates[.., t, ..]`
/// along `axis`, every repeat of an index adding.
pub fn index_add(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (var, updates) = (input(ctx, inputs, 0)?, input(ctx, inputs, 2)?);
    let axis = index_axis(ctx, var.rank())?;
    let r = var.shape[axis];
    let idx = int_values(ctx, inputs, 1)?
        .into_iter()
        .map(|i| in_range(ctx, 1, i, r))
        .collect::<Result<Vec<usize>, OpError>>()?;
    let mut want = var.shape.to_vec();
    want[axis] = idx.len();
    if updates.shape != want || input(ctx, inputs, 1)?.rank() != 1 {
        return Err(ctx.input_error(
            2,
            format!("is {:?}, the indices need {want:?}", updates.shape),
        ));
    }
    let out = output(ctx, outputs, 0)?;
    let src = bytes(ctx, var, 0)?;
    let dst = bytes_mut(ctx, out)?;
    if dst.len() != src.len() {
        return Err(ctx.compute_error("the output is not var's size"));
    }
    dst.copy_from_slice(src);
    let layout = (
        var.shape[..axis].iter().product::<usize>(),
        r,
        var.shape[axis + 1..].iter().product::<usize>(),
    );
    crate::dispatch!(var.dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
        add_rows::<T>(updates.slice::<T>()?, &idx, layout, out.slice_mut::<T>()?),
        other => return Err(ctx.input_error(0, format!("{other} cannot be added"))));
    Ok(())
}

/// Adds row `t` of `updates` (`[outer, idx.len(), inner]`) onto row `idx[t]` of `out`
/// (`[outer, r, inner]`), rounding each sum to `T`.
fn add_rows<T: Accumulate>(
    updates: &[T],
    idx: &[usize],
    (outer, r, inner): (usize, usize, usize),
    out: &mut [T],
) {
    let n = idx.len();
    for o in 0..outer {
        for (t, &j) in idx.iter().enumerate() {
            let dst = &mut out[(o * r + j) * inner..(o * r + j + 1) * inner];
            let src = &updates[(o * n + t) * inner..(o * n + t + 1) * inner];
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = T::from_acc(d.to_acc().add(s.to_acc()));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// GatherD, MaskedFill

/// GatherD (x, dim, index; dim 0): index's shape, x's type.
pub fn infer_gather_d(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    index_type(ctx, 1)?;
    index_type(ctx, 2)?;
    let (x, index) = (&ctx.inputs[0], &ctx.inputs[2]);
    if let (Some(x), Some(i)) = (&x.shape, &index.shape)
        && x.len() != i.len()
    {
        return Err(ctx.input_error(2, format!("is {i:?}, not of x's rank {}", x.len())));
    }
    Ok(meta(x.dtype, index.shape.clone()))
}

/// GatherD, PyTorch's gather: `y[p] = x[p with p[dim] = index[p]]`, dim the dim input's
/// value (what MindSpore's adapter feeds; the attribute of the same name is not read).
pub fn gather_d(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let dim = one_int(ctx, inputs, 1)?;
    let rank = x.rank() as i64;
    if !(-rank..rank).contains(&dim) {
        return Err(ctx.input_error(1, format!("dim {dim} is outside [-{rank}, {rank})")));
    }
    let axis = if dim < 0 { dim + rank } else { dim } as usize;
    for i in int_values(ctx, inputs, 2)? {
        in_range(ctx, 2, i, x.shape[axis])?;
    }
    let attrs = onnx_attrs(vec![("axis", Attr::Int(axis as i64))]);
    library_compute(
        "GatherElements",
        &attrs,
        &[*x, *input(ctx, inputs, 2)?],
        outputs,
    )
}

/// MaskedFill (x, mask, value): x's type, the broadcast of the three shapes.
pub fn infer_masked_fill(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    if ctx.inputs[1].dtype != DType::Bool {
        return Err(ctx.input_error(1, format!("is {}, the mask is bool", ctx.inputs[1].dtype)));
    }
    let shapes: Vec<Option<&[i64]>> = ctx.inputs.iter().map(|t| t.shape.as_deref()).collect();
    let shape = crate::ops::elementwise::broadcast(&shapes)
        .map_err(|(a, b)| ctx.input_error(b, format!("does not broadcast with input {a}")))?;
    Ok(meta(ctx.inputs[0].dtype, shape))
}

/// MaskedFill, PyTorch's masked_fill: value (converted to x's type, as the library's Cast
/// converts) where the mask is true, x elsewhere, all three broadcast.
pub fn masked_fill(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, mask, value) = (
        input(ctx, inputs, 0)?,
        input(ctx, inputs, 1)?,
        input(ctx, inputs, 2)?,
    );
    let mut cast = None;
    let value = if value.dtype == x.dtype {
        *value
    } else {
        let t = cast.insert(Tensor::zeroed(x.dtype, value.shape));
        let to = onnx_attrs(vec![("to", Attr::DType(x.dtype))]);
        library_compute("Cast", &to, &[*value], &mut [t.as_mut()])?;
        t.as_ref()
    };
    library_compute("Where", &Attrs::new(), &[*mask, value, *x], outputs)
}

// ---------------------------------------------------------------------------------------
// InvertPermutation, RangeD

/// InvertPermutation (x): a 1-D int32 or int64 permutation, x's shape and type.
pub fn infer_invert_permutation(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    index_type(ctx, 0)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape
        && s.len() != 1
    {
        return Err(ctx.input_error(0, format!("is {s:?}, not 1-D")));
    }
    Ok(vec![x.clone()])
}

/// InvertPermutation, TensorFlow's: `y[x[i]] = i`; x must hold each of `0..n` once.
pub fn invert_permutation(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let p = int_values(ctx, inputs, 0)?;
    let n = p.len();
    let mut inverse = vec![usize::MAX; n];
    for (i, &v) in p.iter().enumerate() {
        let j = in_range(ctx, 0, v, n)?;
        if inverse[j] != usize::MAX {
            return Err(ctx.input_error(0, format!("holds {v} twice: not a permutation")));
        }
        inverse[j] = i;
    }
    let y = output(ctx, outputs, 0)?;
    match y.dtype {
        DType::I32 => {
            for (o, &i) in y.slice_mut::<i32>()?.iter_mut().zip(&inverse) {
                *o = i32::try_from(i).map_err(|_| ctx.input_error(0, "is too long for int32"))?;
            }
        }
        _ => {
            for (o, &i) in y.slice_mut::<i64>()?.iter_mut().zip(&inverse) {
                *o = i as i64;
            }
        }
    }
    Ok(())
}

/// RangeD (x; start, limit, delta required): x's shape and type.
pub fn infer_range_d(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    numeric(ctx, 0)?;
    for name in ["start", "limit", "delta"] {
        required_float(ctx, name)?;
    }
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape
        && s.len() != 1
    {
        return Err(ctx.input_error(0, format!("is {s:?}, not the 1-D assist sequence")));
    }
    Ok(vec![x.clone()])
}

/// RangeD: `start + delta x` per element of the assist sequence x (which holds `0, 1, 2,
/// ...` for the range `[start, limit)`), computed in f64 and rounded (integers: toward
/// zero) once; limit only sized x.
pub fn range_d(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    fn go<T: Num>(x: &[T], y: &mut [T], start: f64, delta: f64) {
        for (o, &v) in y.iter_mut().zip(x) {
            *o = T::from_f64(start + delta * v.to_f64());
        }
    }
    let x = input(ctx, inputs, 0)?;
    let start = f64::from(required_float(ctx, "start")?);
    let delta = f64::from(required_float(ctx, "delta")?);
    required_float(ctx, "limit")?;
    let y = output(ctx, outputs, 0)?;
    if y.len() != x.len() {
        return Err(ctx.compute_error("the output is not x's size"));
    }
    crate::dispatch!(x.dtype, T in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
        go::<T>(x.slice::<T>()?, y.slice_mut::<T>()?, start, delta),
        other => return Err(ctx.input_error(0, format!("{other} is not numbers"))));
    Ok(())
}
