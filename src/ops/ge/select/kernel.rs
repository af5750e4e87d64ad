//! What the selection ops share, below each of their files: the library ops several of
//! them compute with (TopK, ArgMax, ArgMin, ScatterND, GatherElements, Where, Cast),
//! called under that op's own name with GE's attributes translated to its, and the integer
//! operands (indices, segment ids, a scalar `k` or `n`) read and checked as TensorFlow and
//! PyTorch check them: an index outside its dim is an error, never counted from the end as
//! ONNX's negative indices are.

use std::ops::Range;

use crate::ops::registry::library;
use crate::ops::shape::args::input;
use crate::ops::shape::indices::ints;
use crate::ops::{
    Attrs, Compute, DType, InferCtx, OpError, TensorMeta, TensorMut, TensorRef, UNKNOWN,
};

/// The library op `op`'s inference on the node's inputs `range`, with `attrs` in place of
/// the node's.
pub fn library_infer(
    ctx: &InferCtx,
    op: &'static str,
    attrs: &Attrs,
    range: Range<usize>,
) -> Result<Vec<TensorMeta>, OpError> {
    let spec = library()
        .get(op)
        .ok_or_else(|| OpError::NoCompute { op: op.to_string() })?;
    let inputs = ctx
        .inputs
        .get(range.clone())
        .ok_or_else(|| ctx.compute_error(format!("{op} takes inputs {range:?}")))?;
    let values = ctx.values.get(range).unwrap_or_default();
    spec.infer_shapes(&InferCtx {
        op,
        inputs,
        values,
        attrs,
        outputs: ctx.outputs,
    })
}

/// The library op `op` computed on `inputs` into `outputs`, with `attrs`.
pub fn library_compute(
    op: &'static str,
    attrs: &Attrs,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let spec = library()
        .get(op)
        .ok_or_else(|| OpError::NoCompute { op: op.to_string() })?;
    let Some(Compute::Into(f)) = spec.compute else {
        return Err(OpError::NoCompute { op: op.to_string() });
    };
    let metas: Vec<TensorMeta> = inputs
        .iter()
        .map(|t| TensorMeta::new(t.dtype, &dims(t.shape)))
        .collect();
    let ctx = InferCtx {
        op,
        inputs: &metas,
        values: &[],
        attrs,
        outputs: outputs.len(),
    };
    f(&ctx, inputs, outputs)
}

/// `shape` as inference's dims.
pub fn dims(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

/// Whether two shapes can be the same: equal ranks, and equal dims where both are known.
pub fn compatible(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(&p, &q)| p == q || p == UNKNOWN || q == UNKNOWN)
}

/// That input `i` is int32 or int64, TensorFlow's index types.
pub fn index_type(ctx: &InferCtx, i: usize) -> Result<(), OpError> {
    match ctx.inputs[i].dtype {
        DType::I32 | DType::I64 => Ok(()),
        d => Err(ctx.input_error(i, format!("is {d}, indices are int32 or int64"))),
    }
}

/// That input `i` holds numbers (not bool).
pub fn numeric(ctx: &InferCtx, i: usize) -> Result<(), OpError> {
    match ctx.inputs[i].dtype {
        DType::Bool => Err(ctx.input_error(i, "is bool, not numbers")),
        _ => Ok(()),
    }
}

/// That input `i` is a float type.
pub fn float(ctx: &InferCtx, i: usize) -> Result<(), OpError> {
    match ctx.inputs[i].dtype {
        DType::F32 | DType::F16 | DType::Bf16 | DType::F64 => Ok(()),
        d => Err(ctx.input_error(i, format!("is {d}, not a float type"))),
    }
}

/// The values of integer input `k`.
pub fn int_values(ctx: &InferCtx, inputs: &[TensorRef], k: usize) -> Result<Vec<i64>, OpError> {
    let t = input(ctx, inputs, k)?;
    ints(t).ok_or_else(|| ctx.input_error(k, format!("is {}, not integers", t.dtype)))
}

/// The one value of integer input `k` (a scalar or a one-element tensor).
pub fn one_int(ctx: &InferCtx, inputs: &[TensorRef], k: usize) -> Result<i64, OpError> {
    match int_values(ctx, inputs, k)?[..] {
        [v] => Ok(v),
        ref v => Err(ctx.input_error(k, format!("holds {} values, not one", v.len()))),
    }
}

/// Index `i` of input `k` into a dim of `dim`: in `[0, dim)`, else an error.
pub fn in_range(ctx: &InferCtx, k: usize, i: i64, dim: usize) -> Result<usize, OpError> {
    usize::try_from(i)
        .ok()
        .filter(|&j| j < dim)
        .ok_or_else(|| ctx.input_error(k, format!("index {i} is out of range [0, {dim})")))
}
