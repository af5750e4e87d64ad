//! A script buffer's contents on the device: [`read`] them now, and [`BufferReport`], a
//! buffer's name, type and values as a run or a replay reports them.

use super::acl::Acl;
use super::device_kernels::Buf;
use super::error::AclError;
use super::types::{self, BufDtype, Scalar};

/// A buffer's final contents.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferReport {
    pub name: String,
    pub dtype: BufDtype,
    pub values: Vec<Scalar>,
}

/// A buffer's contents now (after the streams that are not capturing ran their work).
pub fn read(acl: &Acl, b: Buf) -> Result<Vec<Scalar>, AclError> {
    let mut bytes = vec![0u8; b.len * b.dtype.size()];
    acl.read(b.ptr, &mut bytes)?;
    Ok(types::decode(b.dtype, &bytes))
}
