//! A compute function's inputs and outputs fetched by position, as exactly the bytes their shapes
//! cover: a missing tensor or a short buffer is an [`OpError`] naming the op, so compute functions
//! index nothing that came from a caller unchecked.

use crate::ops::shape::movement::MoveError;
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// Input `k`.
pub fn input<'t, 'a>(
    ctx: &InferCtx,
    inputs: &'t [TensorRef<'a>],
    k: usize,
) -> Result<&'t TensorRef<'a>, OpError> {
    inputs
        .get(k)
        .ok_or_else(|| ctx.input_error(k, "is missing"))
}

/// Output `k`.
pub fn output<'t, 'a>(
    ctx: &InferCtx,
    outputs: &'t mut [TensorMut<'a>],
    k: usize,
) -> Result<&'t mut TensorMut<'a>, OpError> {
    outputs
        .get_mut(k)
        .ok_or_else(|| ctx.compute_error(format!("output {k} is missing")))
}

/// The element bytes of input `k` (`t`), exactly as many as its shape holds.
pub fn bytes<'a>(ctx: &InferCtx, t: &TensorRef<'a>, k: usize) -> Result<&'a [u8], OpError> {
    let n = t.len() * t.dtype.size();
    t.data.get(..n).ok_or_else(|| {
        ctx.input_error(
            k,
            format!(
                "{} bytes hold fewer than {} elements",
                t.data.len(),
                t.len()
            ),
        )
    })
}

/// The element bytes of an output, exactly as many as its shape holds.
pub fn bytes_mut<'t>(ctx: &InferCtx, t: &'t mut TensorMut<'_>) -> Result<&'t mut [u8], OpError> {
    let n = t.len() * t.dtype.size();
    let have = t.data.len();
    t.data.get_mut(..n).ok_or_else(|| {
        ctx.compute_error(format!(
            "an output of {have} bytes is shorter than its shape"
        ))
    })
}

/// A failed copy, as the op's error.
pub fn moved(ctx: &InferCtx, r: Result<(), MoveError>) -> Result<(), OpError> {
    r.map_err(|e| ctx.compute_error(e.to_string()))
}
