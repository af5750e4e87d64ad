//! What each kernel type does, on the emulated device. One file per family, each with a
//! `register` that adds its kernels to the registry (as tract registers op families).
//!
//! Every kernel type of `crate::exec::kernels` that lowering emits has an implementation
//! here; `Tiling`, `FindTilingFunc`, `TilingParse` and `AllocMemHost` have none yet (no op
//! of the library needs tiling or host outputs), and a graph naming them fails to load,
//! naming the node.

mod boundary;
mod control;
mod launch;
mod memory;
mod resource;

use super::error::LoadError;
use super::registry::KernelRegistry;

pub(crate) fn register_all(r: &mut KernelRegistry) {
    boundary::register(r);
    resource::register(r);
    memory::register(r);
    launch::register(r);
    control::register(r);
}

/// The dims of a shape as device dims; a negative dim is an error naming it.
pub(crate) fn dims_of(
    shape: &[i64],
) -> Result<impl Iterator<Item = usize> + '_, super::KernelError> {
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        return Err(super::KernelError::new(format!(
            "shape {shape:?} has the unknown dim {d} at run time"
        )));
    }
    Ok(shape.iter().map(|&d| d as usize))
}

/// Bytes of a tensor of `dtype` and `shape`, checked.
pub(crate) fn tensor_bytes(
    dtype: crate::ops::DType,
    shape: &[i64],
) -> Result<usize, super::KernelError> {
    dims_of(shape)?
        .try_fold(dtype.size(), |n, d| n.checked_mul(d))
        .ok_or_else(|| super::KernelError::new(format!("a {dtype} tensor of {shape:?} overflows")))
}

/// The op named by attribute `key` in the op library.
pub(crate) fn op_spec(
    node: &crate::exec::ExecNode,
    ops: &crate::ops::OpRegistry,
    key: &str,
) -> Result<crate::ops::OpSpec, LoadError> {
    let op = node
        .attrs
        .get(key)
        .and_then(|a| a.as_str())
        .ok_or_else(|| format!("attribute {key:?} is missing"))?;
    ops.get(op)
        .copied()
        .ok_or_else(|| LoadError::UnknownOp(op.to_string()))
}
