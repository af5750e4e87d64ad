//! GE's `*D` data-movement and reduction ops (their axes are attributes, where the newer
//! forms take inputs) and SoftmaxV2, on the library's kernels:
//!
//! - `ConcatD`, `ConcatV2D` (graphengine `split_combination_ops.h`): dynamic input x;
//!   `concat_dim` required, `N` 1 (when given, the input count).
//! - `SplitD` (same file): x; `split_dim` and `num_split` required; equal parts.
//! - `TransposeD` (graphengine `transformation_ops.h`): x; `perm` (required in effect: an
//!   empty or missing `perm` is an error).
//! - `ReduceMeanD`, `ReduceSumD` (graphengine `reduce_ops.h`): x; `axes` required,
//!   `keep_dims` false, `noop_with_empty_axes` false (empty `axes` reduces every axis
//!   unless it is set).
//! - `SoftmaxV2` (ops-nn softmax proto, graphengine `nn_norm_ops.h`): x; `axes` `[-1]`,
//!   `half_to_float` false. Several axes must be adjacent: they are one softmax over
//!   their flattened extent. `half_to_float` gives a float32 y for a float16 or bfloat16 x.

use super::attrs::{onnx_attrs, required_int, required_list, with_attrs};
use crate::ops::nn::agree;
use crate::ops::nn::scalar::read_f64s;
use crate::ops::nn::softmax;
use crate::ops::reduce::compute as reduce_kernel;
use crate::ops::shape::args::{bytes, bytes_mut, output};
use crate::ops::shape::compute as shape_kernel;
use crate::ops::{
    Attr, Attrs, DType, InferCtx, OpError, Tensor, TensorMeta, TensorMut, TensorRef, Translation,
    UNKNOWN, meta,
};

/// ConcatD / ConcatV2D: dims agree but on `concat_dim`, which adds up.
pub fn infer_concat(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, usize::MAX)?;
    let dim = required_int(ctx, "concat_dim")?;
    if ctx.attrs.get("N").is_some() && ctx.attr_int("N", 1)? != ctx.inputs.len() as i64 {
        return Err(ctx.attr_error(
            "N",
            format!(
                "is {}, but the node has {} inputs",
                ctx.attr_int("N", 1)?,
                ctx.inputs.len()
            ),
        ));
    }
    let dtype = ctx.inputs[0].dtype;
    let mut out: Option<Vec<i64>> = None;
    let mut axis = 0;
    for (i, t) in ctx.inputs.iter().enumerate() {
        if t.dtype != dtype {
            return Err(ctx.input_error(i, format!("is {}, input 0 is {dtype}", t.dtype)));
        }
        let Some(s) = &t.shape else {
            return Ok(meta(dtype, None));
        };
        match &mut out {
            None => {
                axis = ctx.axis(dim, s.len(), "concat_dim")?;
                out = Some(s.clone());
            }
            Some(o) => {
                let fits = o.len() == s.len()
                    && (0..s.len()).all(|d| d == axis || agree(o[d], s[d]).is_some());
                if !fits {
                    return Err(ctx.input_error(
                        i,
                        format!("{s:?} does not concatenate with {o:?} on dim {axis}"),
                    ));
                }
                o[axis] = if o[axis] < 0 || s[axis] < 0 {
                    UNKNOWN
                } else {
                    o[axis] + s[axis]
                };
            }
        }
    }
    Ok(meta(dtype, out))
}

pub fn concat(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let attrs = onnx_attrs(vec![("axis", Attr::Int(required_int(ctx, "concat_dim")?))]);
    shape_kernel::concat(&with_attrs(ctx, &attrs), inputs, outputs)
}

/// ConcatD and ConcatV2D as Concat.
pub fn translate_concat(ctx: &InferCtx) -> Option<Translation> {
    let axis = required_int(ctx, "concat_dim").ok()?;
    Some(Translation {
        first: 0,
        op: "Concat",
        attrs: onnx_attrs(vec![("axis", Attr::Int(axis))]),
        inputs: ctx.inputs.len(),
    })
}

/// SplitD's (axis, parts) for x of rank `rank`.
fn split_attrs(ctx: &InferCtx, rank: usize) -> Result<(usize, i64), OpError> {
    let axis = ctx.axis(required_int(ctx, "split_dim")?, rank, "split_dim")?;
    let parts = required_int(ctx, "num_split")?;
    if parts < 1 {
        return Err(ctx.attr_error("num_split", format!("{parts} is not positive")));
    }
    if ctx.outputs > 0 && ctx.outputs as i64 != parts {
        return Err(ctx.attr_error(
            "num_split",
            format!("is {parts}, but the node has {} outputs", ctx.outputs),
        ));
    }
    Ok((axis, parts))
}

/// SplitD: `num_split` equal parts of x along `split_dim`.
pub fn infer_split(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        let parts = required_int(ctx, "num_split")?.max(1) as usize;
        return Ok(vec![TensorMeta::unknown_rank(x.dtype); parts]);
    };
    let (axis, parts) = split_attrs(ctx, s.len())?;
    let mut part = s.clone();
    if s[axis] >= 0 {
        if s[axis] % parts != 0 {
            return Err(ctx.attr_error(
                "num_split",
                format!("{parts} does not divide dim {axis} of {s:?}"),
            ));
        }
        part[axis] = s[axis] / parts;
    }
    Ok(vec![TensorMeta::new(x.dtype, &part); parts as usize])
}

pub fn split(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let (axis, parts) = split_attrs(ctx, x.rank())?;
    let parts = parts as usize;
    let outer: usize = x.shape[..axis].iter().product();
    let row = x.shape[axis..].iter().product::<usize>() * x.dtype.size();
    let block = row / parts;
    let src = bytes(ctx, x, 0)?;
    for k in 0..parts {
        let dst = bytes_mut(ctx, output(ctx, outputs, k)?)?;
        if dst.len() != outer * block {
            return Err(ctx.compute_error(format!("output {k} does not hold one part")));
        }
        if block == 0 {
            continue;
        }
        for (o, d) in dst.chunks_exact_mut(block).enumerate() {
            d.copy_from_slice(&src[o * row + k * block..][..block]);
        }
    }
    Ok(())
}

/// TransposeD's `perm`, checked for rank `rank`.
fn perm(ctx: &InferCtx, rank: usize) -> Result<Vec<i64>, OpError> {
    let p = ctx
        .attr_ints("perm")?
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ctx.attr_error("perm", "is required and missing"))?;
    let mut seen = vec![false; rank];
    if p.len() != rank
        || p.iter().any(|&a| {
            usize::try_from(a)
                .ok()
                .filter(|&a| a < rank)
                .is_none_or(|a| std::mem::replace(&mut seen[a], true))
        })
    {
        return Err(ctx.attr_error("perm", format!("{p:?} is not a permutation of {rank} dims")));
    }
    Ok(p.to_vec())
}

pub fn infer_transpose(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let p = perm(ctx, s.len())?;
    Ok(meta(
        x.dtype,
        Some(p.iter().map(|&a| s[a as usize]).collect()),
    ))
}

pub fn transpose(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let attrs = onnx_attrs(vec![("perm", Attr::Ints(perm(ctx, inputs[0].rank())?))]);
    shape_kernel::transpose(&with_attrs(ctx, &attrs), inputs, outputs)
}

/// TransposeD as Transpose, for x of known rank.
pub fn translate_transpose(ctx: &InferCtx) -> Option<Translation> {
    let rank = ctx.inputs[0].shape.as_ref()?.len();
    Some(Translation {
        first: 0,
        op: "Transpose",
        attrs: onnx_attrs(vec![("perm", Attr::Ints(perm(ctx, rank).ok()?))]),
        inputs: 1,
    })
}

/// The ONNX attributes of the reduce: `axes`, `keep_dims` and `noop_with_empty_axes`
/// under ONNX's names, `axes` required.
fn reduce_attrs(ctx: &InferCtx) -> Result<Attrs, OpError> {
    let axes = required_list(ctx, "axes")?;
    Ok(onnx_attrs(vec![
        ("axes", Attr::Ints(axes)),
        (
            "keepdims",
            Attr::Int(i64::from(ctx.attr_bool("keep_dims", false)?)),
        ),
        (
            "noop_with_empty_axes",
            Attr::Int(i64::from(ctx.attr_bool("noop_with_empty_axes", false)?)),
        ),
    ]))
}

/// `ctx` as the ONNX reduction of the same kind, with `attrs`: the shared kernel picks its
/// reduction by the ONNX op type.
fn onnx_reduce<'a>(ctx: &InferCtx<'a>, attrs: &'a Attrs) -> InferCtx<'a> {
    InferCtx {
        op: onnx_reduce_op(ctx.op),
        ..with_attrs(ctx, attrs)
    }
}

/// The ONNX reduction a GE one is.
fn onnx_reduce_op(op: &str) -> &'static str {
    if op == "ReduceMeanD" {
        "ReduceMean"
    } else {
        "ReduceSum"
    }
}

/// ReduceMeanD and ReduceSumD as ReduceMean and ReduceSum.
pub fn translate_reduce(ctx: &InferCtx) -> Option<Translation> {
    Some(Translation {
        first: 0,
        op: onnx_reduce_op(ctx.op),
        attrs: reduce_attrs(ctx).ok()?,
        inputs: 1,
    })
}

pub fn infer_reduce(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let attrs = reduce_attrs(ctx)?;
    crate::ops::reduce::infer_reduce(&onnx_reduce(ctx, &attrs))
}

pub fn reduce(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let attrs = reduce_attrs(ctx)?;
    reduce_kernel::reduce(&onnx_reduce(ctx, &attrs), &inputs[..1], outputs)
}

/// SoftmaxV2's axes as one range `first..=last` of adjacent dims of a rank-`rank` x.
fn softmax_axes(ctx: &InferCtx, rank: usize) -> Result<(usize, usize), OpError> {
    let given = ctx.attr_ints("axes")?.unwrap_or(&[-1]);
    if given.is_empty() {
        return Err(ctx.attr_error("axes", "is empty"));
    }
    let mut axes = given
        .iter()
        .map(|&a| ctx.axis(a, rank, "axes"))
        .collect::<Result<Vec<_>, _>>()?;
    axes.sort_unstable();
    axes.dedup();
    let (first, last) = (axes[0], axes[axes.len() - 1]);
    if last - first + 1 != axes.len() {
        return Err(ctx.attr_error(
            "axes",
            format!("{given:?}: only adjacent axes are supported"),
        ));
    }
    Ok((first, last))
}

/// The output type: float32 for a half x with `half_to_float`.
fn softmax_dtype(ctx: &InferCtx, x: DType) -> Result<DType, OpError> {
    let widen = ctx.attr_bool("half_to_float", false)? && matches!(x, DType::F16 | DType::Bf16);
    Ok(if widen { DType::F32 } else { x })
}

pub fn infer_softmax(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape
        && !s.is_empty()
    {
        softmax_axes(ctx, s.len())?;
    }
    Ok(meta(softmax_dtype(ctx, x.dtype)?, x.shape.clone()))
}

/// SoftmaxV2 over one axis of x of known rank, without widening, as Softmax.
pub fn translate_softmax(ctx: &InferCtx) -> Option<Translation> {
    let x = &ctx.inputs[0];
    let rank = x.shape.as_ref().map(Vec::len).filter(|&r| r > 0)?;
    let (first, last) = softmax_axes(ctx, rank).ok()?;
    (first == last && softmax_dtype(ctx, x.dtype).ok()? == x.dtype).then(|| Translation {
        first: 0,
        op: "Softmax",
        attrs: softmax::with_scale(ctx, onnx_attrs(vec![("axis", Attr::Int(first as i64))])),
        inputs: 1,
    })
}

pub fn softmax_v2(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let widened;
    let x = if softmax_dtype(ctx, x.dtype)? != x.dtype {
        let v = read_f64s(x).map_err(|_| ctx.input_error(0, "is not a float type"))?;
        let v: Vec<f32> = v.iter().map(|&f| f as f32).collect();
        widened = Tensor::from_vec(x.shape, &v);
        widened.as_ref()
    } else {
        *x
    };
    if x.shape.is_empty() {
        let attrs = softmax::with_scale(ctx, onnx_attrs(vec![]));
        return softmax::softmax(&with_attrs(ctx, &attrs), &[x], outputs);
    }
    // The adjacent axes as one: [outer dims, their product, inner dims].
    let (first, last) = softmax_axes(ctx, x.rank())?;
    let mut merged = x.shape[..first].to_vec();
    merged.push(x.shape[first..=last].iter().product());
    merged.extend_from_slice(&x.shape[last + 1..]);
    let attrs = softmax::with_scale(ctx, onnx_attrs(vec![("axis", Attr::Int(first as i64))]));
    let xv = TensorRef::new(x.dtype, &merged, x.data);
    let y = &mut outputs[0];
    let mut yv = [TensorMut::new(y.dtype, &merged, y.data)];
    softmax::softmax(&with_attrs(ctx, &attrs), &[xv], &mut yv)
}
