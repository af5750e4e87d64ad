//! GE op types that are a library op under another name and other attribute names, or
//! with an attribute given as an input: each is one row of [`ALIASES`], saying which
//! library op it is and how its attributes (and the values of its axis inputs) become that
//! op's. Lowering launches the library op itself ([`OpSpec::translates`]), so the
//! translation is made once; only a node whose axis input is not a constant computes
//! through the alias, translating per launch (an attribute map built each time).
//!
//! Sources, the prototypes in `prototypes/`: Maximum, Minimum, AddV2, Select
//! (`elewise_calculation_ops`, `selection_ops`), ExpandDims (`array_ops`), ConcatV2
//! (`split_combination_ops`), GatherV2, GatherV2D (`selection_ops`), ReduceMaxD,
//! ReduceMinD, ReduceProdD (`reduce_ops`), LogSoftmaxV2 (`nn_norm_ops`), ClipByValue
//! (`elewise_calculation_ops`), TopKV2 (`selection_ops`), SqueezeV3, UnsqueezeV3,
//! StridedSliceV2 (`array_ops`, `selection_ops`), BatchNorm (`nn_batch_norm_ops`).

use super::attrs::onnx_attrs;
use crate::ops::registry::library;
use crate::ops::{
    Attr, Attrs, Compute, InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut, TensorRef,
    Translation,
};

/// What a GE node of an alias is: the library op, its attributes and how many of the
/// node's leading inputs it takes.
type TargetFn = fn(&InferCtx) -> Result<Translation, OpError>;

/// (GE op type, inputs whose values the translation reads, the translation).
const ALIASES: &[(&str, &[usize], TargetFn)] = &[
    ("Maximum", &[], |ctx| same("Max", ctx, 2)),
    ("Minimum", &[], |ctx| same("Min", ctx, 2)),
    ("AddV2", &[], |ctx| same("Add", ctx, 2)),
    ("Select", &[], select),
    ("ExpandDims", &[1], expand_dims),
    // Its axis is its last input, whichever that is: a constant, or the node does not
    // lower (the value is needed for the output shape).
    ("ConcatV2", &[], concat_v2),
    ("GatherV2", &[2], gather_v2),
    ("GatherV2D", &[], gather_v2d),
    ("ReduceMaxD", &[], |ctx| reduce_d("ReduceMax", ctx)),
    ("ReduceMinD", &[], |ctx| reduce_d("ReduceMin", ctx)),
    ("ReduceProdD", &[], |ctx| reduce_d("ReduceProd", ctx)),
    ("LogSoftmaxV2", &[], log_softmax_v2),
    ("ClipByValue", &[], |ctx| same("Clip", ctx, 3)),
    ("TopKV2", &[1], top_k),
    // What GE's ONNX plugins make: Squeeze and Unsqueeze from opset 13 (axes an input),
    // Slice from opset 10, BatchNormalization.
    ("SqueezeV3", &[1], |ctx| leading("Squeeze", ctx, 1, 2)),
    ("UnsqueezeV3", &[1], |ctx| leading("Unsqueeze", ctx, 2, 2)),
    ("StridedSliceV2", &[1, 2, 3, 4], strided_slice_v2),
    ("BatchNorm", &[], batch_norm),
];

/// The library op `op` on the node's inputs (between `min` and `max` of them), no
/// attributes.
fn leading(
    op: &'static str,
    ctx: &InferCtx,
    min: usize,
    max: usize,
) -> Result<Translation, OpError> {
    ctx.arity(min, max)?;
    Ok(Translation {
        op,
        attrs: Attrs::new(),
        inputs: ctx.inputs.len(),
    })
}

/// StridedSliceV2(x, begin, end, axes?, strides?; the five masks 0): Slice, whose inputs
/// (data, starts, ends, axes, steps) these are. A mask (TensorFlow's bit-per-axis
/// modifiers) is refused.
fn strided_slice_v2(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(3, 5)?;
    for mask in [
        "begin_mask",
        "end_mask",
        "ellipsis_mask",
        "new_axis_mask",
        "shrink_axis_mask",
    ] {
        if ctx.attr_int(mask, 0)? != 0 {
            return Err(ctx.attr_error(mask, "only 0 is computed (no TensorFlow masks)"));
        }
    }
    leading("Slice", ctx, 3, 5)
}

/// BatchNorm(x, scale, offset, mean, variance; epsilon 1e-4, data_format NHWC,
/// is_training true) in inference (is_training false): BatchNormalization, on NCHW (or
/// any layout whose channel is dim 1; NHWC is refused).
fn batch_norm(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(5, 5)?;
    if ctx.attr_bool("is_training", true)? {
        return Err(ctx.attr_error(
            "is_training",
            "is true; only inference (false, the running mean and variance) is computed",
        ));
    }
    match ctx.attr_str("data_format", "NHWC")? {
        "NCHW" | "NCDHW" | "ND" => {}
        other => {
            return Err(ctx.attr_error(
                "data_format",
                format!("{other:?}: only a channel-first layout (NCHW) is computed"),
            ));
        }
    }
    let epsilon = f64::from(ctx.attr_float("epsilon", 1e-4)?);
    Ok(Translation {
        op: "BatchNormalization",
        attrs: onnx_attrs(vec![("epsilon", Attr::Float(epsilon))]),
        inputs: 5,
    })
}

/// The library op `op` on the node's `n` inputs, no attributes.
fn same(op: &'static str, ctx: &InferCtx, n: usize) -> Result<Translation, OpError> {
    ctx.arity(n, n)?;
    Ok(Translation {
        op,
        attrs: Attrs::new(),
        inputs: n,
    })
}

/// The int value of input `i` (a scalar or a one-element tensor), which the translation
/// needs: a constant at lowering, or the value run-time inference read.
fn axis_input(ctx: &InferCtx, i: usize) -> Result<i64, OpError> {
    let t = ctx
        .values
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| ctx.input_error(i, "its value is needed and is not known"))?;
    match t.int_values().as_deref() {
        Some([v]) => Ok(*v),
        _ => Err(ctx.input_error(i, format!("is {} {:?}, not one int", t.dtype, t.shape))),
    }
}

/// Select(condition, x1, x2): Where, where the condition broadcasts as NumPy's does. GE's
/// (TensorFlow's) Select also takes a 1-D condition picking rows of higher-rank x1 and
/// x2, which NumPy broadcasting would align with the last dim instead: refused.
fn select(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(3, 3)?;
    let rank = |i: usize| ctx.inputs[i].shape.as_ref().map(Vec::len);
    if let (Some(c), Some(x)) = (rank(0), rank(1))
        && c != 0
        && c != x
    {
        return Err(ctx.input_error(
            0,
            format!(
                "is rank {c} against x1's rank {x}: GE's row-selecting Select is not \
                 computed (only a condition of x1's rank, or a scalar)"
            ),
        ));
    }
    Ok(Translation {
        op: "Where",
        attrs: Attrs::new(),
        inputs: 3,
    })
}

/// ExpandDims(x, axis): Unsqueeze with `axes` `[axis]`.
fn expand_dims(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, 2)?;
    let axis = axis_input(ctx, 1)?;
    Ok(Translation {
        op: "Unsqueeze",
        attrs: onnx_attrs(vec![("axes", Attr::Ints(vec![axis]))]),
        inputs: 1,
    })
}

/// ConcatV2(x..., concat_dim): Concat on `axis` concat_dim; `N`, when given, the count.
fn concat_v2(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, usize::MAX)?;
    let n = ctx.inputs.len() - 1;
    let given = ctx.attr_int("N", n as i64)?;
    if given != n as i64 {
        return Err(ctx.attr_error("N", format!("is {given}, but the node has {n} tensors")));
    }
    let axis = axis_input(ctx, n)?;
    Ok(Translation {
        op: "Concat",
        attrs: onnx_attrs(vec![("axis", Attr::Int(axis))]),
        inputs: n,
    })
}

/// Gather on `axis`; GE's `batch_dims` must be 0 (ONNX's Gather has none).
fn gather(ctx: &InferCtx, axis: i64) -> Result<Translation, OpError> {
    let batch = ctx.attr_int("batch_dims", 0)?;
    if batch != 0 {
        return Err(ctx.attr_error("batch_dims", format!("is {batch}; only 0 is computed")));
    }
    Ok(Translation {
        op: "Gather",
        attrs: onnx_attrs(vec![("axis", Attr::Int(axis))]),
        inputs: 2,
    })
}

/// GatherV2(x, indices, axis).
fn gather_v2(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(3, 3)?;
    gather(ctx, axis_input(ctx, 2)?)
}

/// GatherV2D(x, indices; axis required).
fn gather_v2d(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, 2)?;
    let axis = match ctx.attrs.get("axis") {
        None => return Err(ctx.attr_error("axis", "is required and missing")),
        Some(_) => ctx.attr_int("axis", 0)?,
    };
    gather(ctx, axis)
}

/// Reduce*D(x; axes required, keep_dims false).
fn reduce_d(op: &'static str, ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(1, 1)?;
    let axes = ctx
        .attr_ints("axes")?
        .ok_or_else(|| ctx.attr_error("axes", "is required and missing"))?
        .to_vec();
    let keep = match ctx.attrs.get("keep_dims") {
        Some(Attr::Bool(b)) => i64::from(*b),
        _ => ctx.attr_int("keep_dims", 0)?,
    };
    // An empty `axes` reduces nothing, as TensorFlow's reductions.
    Ok(Translation {
        op,
        attrs: onnx_attrs(vec![
            ("axes", Attr::Ints(axes)),
            ("keepdims", Attr::Int(keep)),
            ("noop_with_empty_axes", Attr::Int(1)),
        ]),
        inputs: 1,
    })
}

/// LogSoftmaxV2(logits; axes [-1]): LogSoftmax over one axis.
fn log_softmax_v2(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(1, 1)?;
    let axes = ctx.attr_ints("axes")?.unwrap_or(&[-1]).to_vec();
    let [axis] = axes[..] else {
        return Err(ctx.attr_error("axes", format!("{axes:?}: one axis is computed")));
    };
    Ok(Translation {
        op: "LogSoftmax",
        attrs: onnx_attrs(vec![("axis", Attr::Int(axis))]),
        inputs: 1,
    })
}

/// GE's TopK and TopKV2 (x, k; sorted true, largest true, dim -1) as the library's TopK
/// on `axis` dim, with int32 indices (GE's).
pub fn top_k(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, 2)?;
    let flag = |name: &str| -> Result<i64, OpError> {
        match ctx.attrs.get(name) {
            Some(Attr::Bool(b)) => Ok(i64::from(*b)),
            _ => ctx.attr_int(name, 1),
        }
    };
    Ok(Translation {
        op: "TopK",
        attrs: onnx_attrs(vec![
            ("axis", Attr::Int(ctx.attr_int("dim", -1)?)),
            ("largest", Attr::Int(flag("largest")?)),
            ("sorted", Attr::Int(flag("sorted")?)),
            ("index_dtype", Attr::DType(crate::ops::DType::I32)),
        ]),
        inputs: 2,
    })
}

fn target_fn(op: &str) -> Result<TargetFn, OpError> {
    ALIASES
        .iter()
        .find(|(name, _, _)| *name == op)
        .map(|(_, _, f)| *f)
        .ok_or_else(|| OpError::NoCompute { op: op.to_string() })
}

/// The target op's spec and a context for it: the node's leading inputs and values, the
/// translated attributes.
fn with_target<R>(
    ctx: &InferCtx,
    f: impl FnOnce(&OpSpec, &InferCtx) -> Result<R, OpError>,
) -> Result<R, OpError> {
    let t = target_fn(ctx.op)?(ctx)?;
    let spec = library().get(t.op).ok_or_else(|| OpError::NoCompute {
        op: t.op.to_string(),
    })?;
    let values = &ctx.values[..t.inputs.min(ctx.values.len())];
    let target = InferCtx {
        op: t.op,
        inputs: &ctx.inputs[..t.inputs],
        values,
        attrs: &t.attrs,
        outputs: ctx.outputs,
    };
    f(spec, &target)
}

fn infer(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    with_target(ctx, |spec, target| spec.infer_shapes(target))
}

fn compute(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    with_target(ctx, |spec, target| match spec.compute {
        Some(Compute::Into(f)) => f(target, &inputs[..target.inputs.len()], outputs),
        _ => Err(OpError::NoCompute {
            op: target.op.to_string(),
        }),
    })
}

fn translate(ctx: &InferCtx) -> Option<Translation> {
    target_fn(ctx.op).ok()?(ctx).ok()
}

/// Registers every alias.
pub fn register(reg: &mut OpRegistry) {
    for &(name, reads, _) in ALIASES {
        let mut spec = OpSpec::new(name, infer)
            .computes(compute)
            .translates(translate);
        if !reads.is_empty() {
            spec = spec.reading(reads);
        }
        reg.add(spec);
    }
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    ALIASES.iter().map(|(name, _, _)| *name)
}
