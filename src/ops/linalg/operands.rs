//! What the linear-algebra family's ops share in reading their operands and attributes:
//! broadcast offsets, index inputs, absent optional inputs, dim arithmetic that keeps
//! unknown dims unknown, and the errors for float-only kernels. It computes nothing.

use crate::ops::DType;
use crate::ops::tensor::TensorRef;
use crate::ops::{InferCtx, OpError, TensorMeta, UNKNOWN};

/// The offsets into a tensor of `shape` (right-aligned, broadcast along dims of 1) of the
/// elements of `dims`, in row-major order; `None` when it does not broadcast.
pub fn broadcast_offsets(shape: &[usize], dims: &[usize]) -> Option<Vec<usize>> {
    if shape.len() > dims.len() {
        // Extra leading dims must be 1.
        let extra = shape.len() - dims.len();
        if shape[..extra].iter().any(|&d| d != 1) {
            return None;
        }
        return broadcast_offsets(&shape[extra..], dims);
    }
    let lead = dims.len() - shape.len();
    let mut strides = vec![0usize; dims.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        let (s, d) = (shape[i], dims[lead + i]);
        if s != d && s != 1 {
            return None;
        }
        strides[lead + i] = if s == 1 { 0 } else { acc };
        acc *= s;
    }
    let mut out = vec![0usize];
    for (&d, &st) in dims.iter().zip(&strides) {
        out = out
            .iter()
            .flat_map(|&o| (0..d).map(move |k| o + k * st))
            .collect();
    }
    Some(out)
}

/// The values of an int32 or int64 input (labels, positions, lengths), as i64.
pub fn index_values(ctx: &InferCtx, t: &TensorRef, index: usize) -> Result<Vec<i64>, OpError> {
    let typed = |e: OpError| match e {
        OpError::Input { msg, .. } => ctx.input_error(index, msg),
        e => e,
    };
    match t.dtype {
        DType::I64 => Ok(t.slice::<i64>().map_err(typed)?.to_vec()),
        DType::I32 => Ok(t
            .slice::<i32>()
            .map_err(typed)?
            .iter()
            .map(|&v| v as i64)
            .collect()),
        other => Err(ctx.input_error(index, format!("is {other}, expected int32 or int64"))),
    }
}

/// An optional input that was left out: absent from the list, or ONNX's empty 1-D
/// placeholder.
pub fn absent(meta: Option<&TensorMeta>) -> bool {
    meta.is_none_or(|m| m.shape.as_deref() == Some(&[0]))
}

/// A dim product that stays unknown when a factor is; `None` past `i64`.
pub fn dim_mul(a: i64, b: i64) -> Option<i64> {
    if a < 0 || b < 0 {
        Some(UNKNOWN)
    } else {
        a.checked_mul(b)
    }
}

/// A dim quotient that stays unknown when either side is (or the divisor is 0).
pub fn dim_div(a: i64, b: i64) -> i64 {
    if a < 0 || b <= 0 { UNKNOWN } else { a / b }
}

/// A dim sum that stays unknown when a term is; `None` past `i64`.
pub fn dim_add(a: i64, b: i64) -> Option<i64> {
    if a < 0 || b < 0 {
        Some(UNKNOWN)
    } else {
        a.checked_add(b)
    }
}

/// A float stash type attribute (`stash_type`, `softmax_precision`) names one of ONNX's
/// float types; the kernels compute in at least f32 whatever it says.
pub fn check_float_type(ctx: &InferCtx, name: &str, default: i64) -> Result<(), OpError> {
    match ctx.attr_int(name, default)? {
        1 | 10 | 11 | 16 => Ok(()),
        other => Err(ctx.attr_error(name, format!("{other} is not a floating-point ONNX type"))),
    }
}

/// The error for an element type a float kernel does not take.
pub fn not_float(ctx: &InferCtx, index: usize, dtype: DType) -> OpError {
    ctx.input_error(index, format!("is {dtype}; the op computes on float types"))
}
