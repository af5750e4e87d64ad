//! What the kernel families share: a shape's dims and a tensor's bytes checked at run
//! time, host bytes grown fallibly, and the op a node names looked up at load.

use crate::exec::KernelNode;
use crate::ops::{DType, OpRegistry, OpSpec};

use super::super::error::{KernelError, LoadError};

/// The dims of a shape as device dims; a negative dim is an error naming it.
pub(crate) fn dims_of(shape: &[i64]) -> Result<impl Iterator<Item = usize> + '_, KernelError> {
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        return Err(KernelError::new(format!(
            "shape {shape:?} has the unknown dim {d} at run time"
        )));
    }
    Ok(shape.iter().map(|&d| d as usize))
}

/// Bytes of a tensor of `dtype` and `shape`, checked.
pub(crate) fn tensor_bytes(dtype: DType, shape: &[i64]) -> Result<usize, KernelError> {
    dims_of(shape)?
        .try_fold(dtype.size(), |n, d| n.checked_mul(d))
        .ok_or_else(|| KernelError::new(format!("a {dtype} tensor of {shape:?} overflows")))
}

/// Sets `data` to `bytes` bytes (zeros past what it held), asking the allocator for the
/// room first so that a host that cannot give it is [`KernelError::HostMemory`], not an
/// abort. A buffer that already has the room (every execution after the first, in steady
/// state) allocates nothing.
pub(crate) fn host_resize(data: &mut Vec<u8>, bytes: usize) -> Result<(), KernelError> {
    if let Some(more) = bytes.checked_sub(data.len()) {
        data.try_reserve_exact(more)
            .map_err(|_| KernelError::HostMemory { bytes })?;
    }
    data.resize(bytes, 0);
    Ok(())
}

/// The op named by attribute `key` in the op library.
pub(crate) fn op_spec(node: &KernelNode, ops: &OpRegistry, key: &str) -> Result<OpSpec, LoadError> {
    let op = node
        .attrs
        .get(key)
        .and_then(|a| a.as_str())
        .ok_or_else(|| format!("attribute {key:?} is missing"))?;
    ops.get(op)
        .copied()
        .ok_or_else(|| LoadError::UnknownOp(op.to_string()))
}
