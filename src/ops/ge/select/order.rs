//! The selection ops that rank values along a dim: arg reductions, top-k, sorts and order
//! statistics. Their arithmetic is the library's ArgMax / ArgMin (the first extreme, NaN
//! the extreme) and TopK (ties to the lower index, NaN above every number) wherever they
//! mean the same; ArgMaxWithK ranks its own columns, in Caffe's order.

use std::cmp::Ordering;

use half::{bf16, f16};

use super::super::attrs::{onnx_attrs, required_int};
use super::kernel::{
    dims, float, index_type, int_values, library_compute, library_infer, numeric, one_int,
};
use crate::ops::elementwise::num::Num;
use crate::ops::reduce::accumulate::total_cmp;
use crate::ops::shape::args::{bytes, bytes_mut, input, output};
use crate::ops::shape::indices::floats;
use crate::ops::{
    Attr, Attrs, DType, Elem, InferCtx, OpError, Tensor, TensorMeta, TensorMut, TensorRef, UNKNOWN,
    meta,
};

/// x's dims with `axis` dropped (`keep`: made 1).
fn reduced(shape: &[i64], axis: usize, keep: bool) -> Vec<i64> {
    let mut out = shape.to_vec();
    if keep {
        out[axis] = 1;
    } else {
        out.remove(axis);
    }
    out
}

/// (before, along, after) `axis` of `shape`.
fn split(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

// ---------------------------------------------------------------------------------------
// ArgMaxD, ArgMinD, ArgMaxWithValue, ArgMinWithValue, HardMax

/// ArgMaxD / ArgMinD (x; dimension, dtype int64) and ArgMaxWithValue / ArgMinWithValue
/// (x; dimension, keep_dims false).
pub fn infer_arg(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    numeric(ctx, 0)?;
    let dimension = required_int(ctx, "dimension")?;
    let with_value = ctx.op.ends_with("WithValue");
    if !with_value {
        match ctx.attrs.get("dtype") {
            None | Some(Attr::DType(DType::I32 | DType::I64)) => {}
            Some(other) => {
                return Err(ctx.attr_error("dtype", format!("{other:?} is not int32 or int64")));
            }
        }
    }
    let keep = with_value && ctx.attr_bool("keep_dims", false)?;
    let x = &ctx.inputs[0];
    let shape = match &x.shape {
        Some(s) => Some(reduced(s, ctx.axis(dimension, s.len(), "dimension")?, keep)),
        None => None,
    };
    let mut out = meta(DType::I32, shape.clone());
    if with_value {
        out.push(TensorMeta {
            dtype: x.dtype,
            shape,
        });
    }
    Ok(out)
}

/// The index of the first extreme along `axis` of each column of x: the library's ArgMax
/// (or ArgMin), int64, x's shape without `axis`.
fn extreme_indices(
    ctx: &InferCtx,
    x: &TensorRef,
    axis: usize,
    max: bool,
) -> Result<Tensor, OpError> {
    if i32::try_from(x.shape[axis]).is_err() {
        return Err(ctx.input_error(0, "has more elements along the dim than int32 indexes"));
    }
    let mut shape = x.shape.to_vec();
    shape.remove(axis);
    let mut idx = Tensor::zeroed(DType::I64, &shape);
    let attrs = onnx_attrs(vec![
        ("axis", Attr::Int(axis as i64)),
        ("keepdims", Attr::Int(0)),
    ]);
    let op = if max { "ArgMax" } else { "ArgMin" };
    library_compute(op, &attrs, &[*x], &mut [idx.as_mut()])?;
    Ok(idx)
}

/// The arg reductions: int32 indices, and with WithValue the extremes themselves.
pub fn arg(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let axis = ctx.axis(required_int(ctx, "dimension")?, x.rank(), "dimension")?;
    if x.is_empty() {
        // Nothing to index (an empty dim has no extreme: the outputs are empty only when
        // another dim is 0, else the library refuses it).
        if outputs.iter().all(|o| o.is_empty()) {
            return Ok(());
        }
    }
    let idx = extreme_indices(ctx, x, axis, ctx.op.starts_with("ArgMax"))?;
    let idx = idx.slice::<i64>()?;
    let y = output(ctx, outputs, 0)?.slice_mut::<i32>()?;
    if y.len() != idx.len() {
        return Err(ctx.compute_error("the output does not hold one index per column"));
    }
    for (o, &i) in y.iter_mut().zip(idx) {
        *o = i as i32;
    }
    if outputs.len() < 2 {
        return Ok(());
    }
    // The extremes, moved as bytes from where their indices point.
    let width = x.dtype.size();
    let src = bytes(ctx, x, 0)?;
    let dst = bytes_mut(ctx, output(ctx, outputs, 1)?)?;
    let (_, r, inner) = split(x.shape, axis);
    if dst.len() != idx.len() * width {
        return Err(ctx.compute_error("the values output does not hold one value per column"));
    }
    for (p, (d, &i)) in dst.chunks_exact_mut(width).zip(idx).enumerate() {
        let at = ((p / inner) * r + i as usize) * inner + p % inner;
        d.copy_from_slice(&src[at * width..(at + 1) * width]);
    }
    Ok(())
}

/// HardMax (x; axis -1): x's shape and type.
pub fn infer_hard_max(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    float(ctx, 0)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape {
        ctx.axis(ctx.attr_int("axis", -1)?, s.len(), "axis")?;
    }
    Ok(vec![x.clone()])
}

/// HardMax: 1 at the first maximum along `axis`, 0 elsewhere.
pub fn hard_max(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    fn put<T: Num>(y: &mut [T], idx: &[i64], (r, inner): (usize, usize)) {
        y.fill(T::zero());
        for (p, &i) in idx.iter().enumerate() {
            y[((p / inner) * r + i as usize) * inner + p % inner] = T::from_f64(1.0);
        }
    }
    let x = input(ctx, inputs, 0)?;
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.rank(), "axis")?;
    if x.is_empty() {
        return Ok(());
    }
    let idx = extreme_indices(ctx, x, axis, true)?;
    let idx = idx.slice::<i64>()?;
    let (_, r, inner) = split(x.shape, axis);
    let y = output(ctx, outputs, 0)?;
    if y.len() != x.len() {
        return Err(ctx.compute_error("the output is not x's size"));
    }
    crate::dispatch!(y.dtype, T in [f32, f64, f16, bf16] =>
        put::<T>(y.slice_mut::<T>()?, idx, (r, inner)),
        other => return Err(ctx.input_error(0, format!("{other} is not a float type"))));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// ArgMaxWithK

/// ArgMaxWithK's `axis` when the Caffe layer gives none.
const NO_AXIS: i64 = 10000;

/// ArgMaxWithK's axis (`None`: Caffe's unset axis, each of dim 0's entries over the rest
/// of x flattened) and `topk`, checked against x's dims.
fn with_k(ctx: &InferCtx, shape: &[i64]) -> Result<(Option<usize>, i64), OpError> {
    let axis = ctx.attr_int("axis", NO_AXIS)?;
    let k = ctx.attr_int("topk", 1)?;
    let (axis, len) = if axis == NO_AXIS {
        if shape.len() < 2 {
            return Err(ctx.input_error(0, "has fewer than 2 dims, which no axis needs"));
        }
        let rest = shape[1..]
            .iter()
            .try_fold(1i64, |n, &d| (d != UNKNOWN).then(|| n.saturating_mul(d)));
        (None, rest)
    } else {
        let a = ctx.axis(axis, shape.len(), "axis")?;
        (Some(a), (shape[a] != UNKNOWN).then_some(shape[a]))
    };
    if k < 1 || len.is_some_and(|n| k > n) {
        return Err(ctx.attr_error("topk", format!("{k} is outside [1, {len:?}]")));
    }
    Ok((axis, k))
}

/// ArgMaxWithK (x; axis 10000, out_max_val false, topk 1): indices and values.
pub fn infer_arg_max_with_k(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    float(ctx, 0)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(vec![
            TensorMeta::unknown_rank(DType::I32),
            TensorMeta::unknown_rank(x.dtype),
        ]);
    };
    let (axis, k) = with_k(ctx, s)?;
    let shape = match axis {
        None => vec![s[0], k],
        Some(a) => {
            let mut out = s.clone();
            out[a] = k;
            out
        }
    };
    // Caffe's layer gives the values alone when it has an axis and out_max_val: GE's
    // kernel writes them to its first output, in x's type.
    let first = if axis.is_some() && ctx.attr_bool("out_max_val", false)? {
        x.dtype
    } else {
        DType::I32
    };
    Ok(vec![
        TensorMeta::new(first, &shape),
        TensorMeta::new(x.dtype, &shape),
    ])
}

/// ArgMaxWithK: each column's `topk` largest values, descending, and their indices; equal
/// values rank the higher index first (Caffe's `std::greater` on (value, index) pairs).
pub fn arg_max_with_k(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let (axis, k) = with_k(ctx, &dims(x.shape))?;
    let (outer, r, inner) = match axis {
        None => (x.shape[0], x.shape[1..].iter().product(), 1),
        Some(a) => split(x.shape, a),
    };
    if i32::try_from(r).is_err() {
        return Err(ctx.input_error(0, "has more elements along the dim than int32 indexes"));
    }
    let [indices, values] = outputs else {
        return Err(ctx.compute_error("ArgMaxWithK has two outputs"));
    };
    let n = outer * k as usize * inner;
    if values.len() != n || indices.len() != n {
        return Err(ctx.compute_error("the outputs do not hold topk entries per column"));
    }
    let mut idx = if indices.dtype == DType::I32 {
        Some(indices.slice_mut::<i32>()?)
    } else {
        None
    };
    crate::dispatch!(x.dtype, T in [f32, f64, f16, bf16] =>
        caffe_top_k::<T>(x.slice::<T>()?, (outer, r, inner), k as usize, values.slice_mut::<T>()?, &mut idx),
        other => return Err(ctx.input_error(0, format!("{other} is not a float type"))));
    if idx.is_none() {
        if indices.dtype != values.dtype {
            return Err(ctx.compute_error(format!(
                "the first output is {}, not int32 or x's type",
                indices.dtype
            )));
        }
        // The values in place of the indices (Caffe's one output with an axis).
        let v = bytes(ctx, &values.as_ref(), 1)?.to_vec();
        bytes_mut(ctx, indices)?.copy_from_slice(&v);
    }
    Ok(())
}

fn caffe_top_k<T: Elem + PartialOrd>(
    x: &[T],
    (outer, r, inner): (usize, usize, usize),
    k: usize,
    values: &mut [T],
    indices: &mut Option<&mut [i32]>,
) {
    let order =
        |a: &(T, usize), b: &(T, usize)| -> Ordering { total_cmp(&b.0, &a.0).then(b.1.cmp(&a.1)) };
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
                let p = (o * k + j) * inner + i;
                values[p] = v;
                if let Some(idx) = indices.as_deref_mut() {
                    idx[p] = at as i32;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// TopKD, TopKV2D, SortV2, NthElement

/// How many of the node's leading inputs the library's TopK takes: TopKD's x (k is an
/// attribute), TopKV2D's x and k; the trailing assist_seq (GE's float16 index helper for
/// its device kernel) is not read.
fn top_k_inputs(op: &str) -> usize {
    if op == "TopKD" { 1 } else { 2 }
}

/// The library TopK's attributes for TopKD / TopKV2D (sorted true, dim -1, largest true;
/// TopKD's k required), with GE's int32 indices.
fn top_k_attrs(ctx: &InferCtx) -> Result<Attrs, OpError> {
    let flag = |name: &str| -> Result<Attr, OpError> {
        Ok(Attr::Int(i64::from(ctx.attr_bool(name, true)?)))
    };
    let mut attrs = vec![
        ("axis", Attr::Int(ctx.attr_int("dim", -1)?)),
        ("largest", flag("largest")?),
        ("sorted", flag("sorted")?),
        ("index_dtype", Attr::DType(DType::I32)),
    ];
    if ctx.op == "TopKD" {
        attrs.push(("k", Attr::Int(required_int(ctx, "k")?)));
    }
    Ok(onnx_attrs(attrs))
}

/// TopKD (x, assist_seq; k) and TopKV2D (x, k, assist_seq): values and int32 indices.
pub fn infer_top_k(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let n = top_k_inputs(ctx.op);
    ctx.arity(n + 1, n + 1)?;
    numeric(ctx, 0)?;
    if n == 2 {
        index_type(ctx, 1)?;
    }
    library_infer(ctx, "TopK", &top_k_attrs(ctx)?, 0..n)
}

/// TopKD and TopKV2D: the library's TopK.
pub fn top_k(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let n = top_k_inputs(ctx.op);
    let taken = inputs
        .get(..n)
        .ok_or_else(|| ctx.input_error(n - 1, "is missing"))?;
    library_compute("TopK", &top_k_attrs(ctx)?, taken, outputs)
}

/// The library's TopK along `axis` into `values` (its k the values' dim), ascending or
/// descending, its indices dropped.
fn sorted_values(
    x: &TensorRef,
    axis: usize,
    descending: bool,
    values: &mut TensorMut,
) -> Result<(), OpError> {
    let mut indices = Tensor::zeroed(DType::I64, values.shape);
    let attrs = onnx_attrs(vec![
        ("axis", Attr::Int(axis as i64)),
        ("largest", Attr::Int(i64::from(descending))),
        ("sorted", Attr::Int(1)),
    ]);
    let outs = TensorMut::new(values.dtype, values.shape, &mut *values.data);
    library_compute("TopK", &attrs, &[*x], &mut [outs, indices.as_mut()])
}

/// SortV2 (x; axis -1, descending false): x's shape and type.
pub fn infer_sort(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    numeric(ctx, 0)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape {
        ctx.axis(ctx.attr_int("axis", -1)?, s.len(), "axis")?;
    }
    Ok(vec![x.clone()])
}

/// SortV2: x sorted along `axis` (NaN last ascending, first descending, as PyTorch's sort
/// has it).
pub fn sort(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.rank(), "axis")?;
    let descending = ctx.attr_bool("descending", false)?;
    sorted_values(x, axis, descending, output(ctx, outputs, 0)?)
}

/// NthElement (x, n; reverse false): x's shape without its last dim.
pub fn infer_nth_element(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    numeric(ctx, 0)?;
    index_type(ctx, 1)?;
    let x = &ctx.inputs[0];
    match &x.shape {
        Some(s) if s.is_empty() => Err(ctx.input_error(0, "is a scalar; it needs a last dim")),
        Some(s) => Ok(meta(x.dtype, Some(s[..s.len() - 1].to_vec()))),
        None => Ok(meta(x.dtype, None)),
    }
}

/// NthElement: each row's n-th smallest value along the last dim (`reverse`: n-th
/// largest), TensorFlow's.
pub fn nth_element(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let Some(&last) = x.shape.last() else {
        return Err(ctx.input_error(0, "is a scalar; it needs a last dim"));
    };
    let n = one_int(ctx, inputs, 1)?;
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n < last)
        .ok_or_else(|| ctx.input_error(1, format!("n = {n} is outside [0, {last})")))?;
    let mut shape = x.shape.to_vec();
    shape[x.rank() - 1] = n + 1;
    let mut best = Tensor::zeroed(x.dtype, &shape);
    sorted_values(
        x,
        x.rank() - 1,
        ctx.attr_bool("reverse", false)?,
        &mut best.as_mut(),
    )?;
    let width = x.dtype.size();
    let src = best.data.as_bytes();
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    if dst.len() * (n + 1) != src.len() {
        return Err(ctx.compute_error("the output does not hold one value per row"));
    }
    for (row, d) in dst.chunks_exact_mut(width).enumerate() {
        let at = (row * (n + 1) + n) * width;
        d.copy_from_slice(&src[at..at + width]);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// InTopK

/// InTopK (x1 predictions `[batch, classes]`, x2 targets `[batch]`, k): bool `[batch]`.
pub fn infer_in_top_k(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    float(ctx, 0)?;
    index_type(ctx, 1)?;
    index_type(ctx, 2)?;
    let (p, t) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape);
    if let Some(p) = p
        && p.len() != 2
    {
        return Err(ctx.input_error(0, format!("is {p:?}, not [batch, classes]")));
    }
    if let Some(t) = t
        && (t.len() != 1
            || p.as_ref()
                .is_some_and(|p| !super::kernel::compatible(&p[..1], t)))
    {
        return Err(ctx.input_error(1, format!("is {t:?}, not one target per row of x1")));
    }
    let batch = p.as_ref().map(|p| p[0]).or(t.as_ref().map(|t| t[0]));
    Ok(meta(DType::Bool, Some(vec![batch.unwrap_or(UNKNOWN)])))
}

/// InTopK, TensorFlow's: whether fewer than k predictions of a row are greater than its
/// target's (so ties straddling the boundary are all in). A target outside `[0, classes)`
/// or a row holding a non-finite prediction gives false, as TensorFlow defines.
pub fn in_top_k(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let &[batch, classes] = x.shape else {
        return Err(ctx.input_error(0, format!("is {:?}, not [batch, classes]", x.shape)));
    };
    let p = floats(x).ok_or_else(|| ctx.input_error(0, "is not numbers"))?;
    let targets = int_values(ctx, inputs, 1)?;
    if targets.len() != batch {
        return Err(ctx.input_error(
            1,
            format!("holds {} targets for {batch} rows", targets.len()),
        ));
    }
    let k = one_int(ctx, inputs, 2)?;
    let y = output(ctx, outputs, 0)?.slice_mut::<u8>()?;
    if y.len() != batch {
        return Err(ctx.compute_error("the output does not hold one flag per row"));
    }
    for ((o, &t), row) in y
        .iter_mut()
        .zip(&targets)
        .zip(p.chunks_exact(classes.max(1)))
    {
        let in_top = usize::try_from(t)
            .ok()
            .filter(|&t| t < classes)
            .map(|t| row[t])
            .filter(|_| row.iter().all(|v| v.is_finite()))
            .is_some_and(|target| (row.iter().filter(|&&v| v > target).count() as i64) < k);
        *o = u8::from(in_top);
    }
    if classes == 0 {
        y.fill(0);
    }
    Ok(())
}
