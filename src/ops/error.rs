//! Why an op cannot be inferred or run: [`OpError`], naming the op and the input or
//! attribute at fault.

/// Why an op cannot be inferred or run on what it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    #[error("{op}: expects {expected} input(s), got {got}")]
    Arity {
        op: String,
        expected: String,
        got: usize,
    },
    #[error("{op}: input {index}: {msg}")]
    Input {
        op: String,
        index: usize,
        msg: String,
    },
    #[error("{op}: attribute {name:?}: {msg}")]
    Attribute {
        op: String,
        name: String,
        msg: String,
    },
    #[error("{op}: the device has shape inference for this op but no compute")]
    NoCompute { op: String },
    #[error("{op}: output {index}: inferred as {meta}, which is not a concrete shape")]
    NotConcrete {
        op: String,
        index: usize,
        meta: String,
    },
    #[error("{op}: {msg}")]
    Compute { op: String, msg: String },
    /// An output whose byte count overflows: no memory holds it, and sizes computed from
    /// it would wrap.
    #[error("{op}: output {index}: shape {shape:?} of {dtype} has more bytes than 64 bits count")]
    TooLarge {
        op: String,
        index: usize,
        shape: Vec<i64>,
        dtype: crate::ops::DType,
    },
    #[error("{op}: inputs {a} and {b} do not broadcast: {a_shape:?} and {b_shape:?}")]
    Broadcast {
        op: String,
        a: usize,
        b: usize,
        a_shape: Vec<i64>,
        b_shape: Vec<i64>,
    },
}
