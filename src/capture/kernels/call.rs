//! One launch of a built-in kernel: [`Buf`], a buffer of device memory as a kernel sees
//! it, and [`KernelCall`], a kernel with its resolved arguments: the checks
//! `aclrtLaunchKernel` makes, name resolution from a [`Kernel`], and the device
//! [`Launch`] of the op that computes it (the ops are in [`super::ops`]).

use crate::npu::device::{DevicePtr, Launch, TensorArg};
use crate::ops::{Attr, AttrMap, DType};

use crate::capture::error::AclError;
use crate::capture::types::{BufDtype, Scalar};

use super::named::Kernel;

/// A buffer of device memory as a kernel sees it: `len` elements of `dtype` at `ptr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Buf {
    pub ptr: DevicePtr,
    pub dtype: BufDtype,
    pub len: usize,
}

impl Buf {
    fn arg(self) -> TensorArg {
        TensorArg::new(self.ptr, device_dtype(self.dtype), &[self.len])
    }
}

fn device_dtype(d: BufDtype) -> DType {
    match d {
        BufDtype::Int32 => DType::I32,
        BufDtype::Int64 => DType::I64,
        BufDtype::Float32 => DType::F32,
    }
}

/// One launch of a built-in kernel (`aclrtLaunchKernel` with the kernel's arguments).
/// `cond` is the device address of a condition handle's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelCall<H = DevicePtr> {
    Fill {
        dst: Buf,
        value: Scalar,
    },
    Copy {
        dst: Buf,
        src: Buf,
    },
    Add {
        dst: Buf,
        a: Buf,
        b: Buf,
    },
    AddScalar {
        dst: Buf,
        src: Buf,
        value: Scalar,
    },
    MulScalar {
        dst: Buf,
        src: Buf,
        value: Scalar,
    },
    Increment {
        dst: Buf,
        index: usize,
        by: Scalar,
    },
    SetCond {
        cond: H,
        src: Buf,
        index: usize,
    },
    SetCondLt {
        cond: H,
        src: Buf,
        index: usize,
        limit: Scalar,
    },
}

impl<H: Copy> KernelCall<H> {
    /// The kernel's name (its op name on the device).
    pub fn name(&self) -> &'static str {
        match self {
            KernelCall::Fill { .. } => "fill",
            KernelCall::Copy { .. } => "copy",
            KernelCall::Add { .. } => "add",
            KernelCall::AddScalar { .. } => "add_scalar",
            KernelCall::MulScalar { .. } => "mul_scalar",
            KernelCall::Increment { .. } => "increment",
            KernelCall::SetCond { .. } => "set_cond",
            KernelCall::SetCondLt { .. } => "set_cond_lt",
        }
    }

    /// The same call with its condition handle mapped (`f` may fail).
    pub fn map_cond<G, E>(self, f: impl FnOnce(H) -> Result<G, E>) -> Result<KernelCall<G>, E> {
        Ok(match self {
            KernelCall::Fill { dst, value } => KernelCall::Fill { dst, value },
            KernelCall::Copy { dst, src } => KernelCall::Copy { dst, src },
            KernelCall::Add { dst, a, b } => KernelCall::Add { dst, a, b },
            KernelCall::AddScalar { dst, src, value } => KernelCall::AddScalar { dst, src, value },
            KernelCall::MulScalar { dst, src, value } => KernelCall::MulScalar { dst, src, value },
            KernelCall::Increment { dst, index, by } => KernelCall::Increment { dst, index, by },
            KernelCall::SetCond { cond, src, index } => KernelCall::SetCond {
                cond: f(cond)?,
                src,
                index,
            },
            KernelCall::SetCondLt {
                cond,
                src,
                index,
                limit,
            } => KernelCall::SetCondLt {
                cond: f(cond)?,
                src,
                index,
                limit,
            },
        })
    }

    /// The buffers the call touches, in argument order.
    pub fn buffers(&self) -> Vec<Buf> {
        match *self {
            KernelCall::Fill { dst, .. } | KernelCall::Increment { dst, .. } => vec![dst],
            KernelCall::Copy { dst, src }
            | KernelCall::AddScalar { dst, src, .. }
            | KernelCall::MulScalar { dst, src, .. } => vec![dst, src],
            KernelCall::Add { dst, a, b } => vec![dst, a, b],
            KernelCall::SetCond { src, .. } | KernelCall::SetCondLt { src, .. } => vec![src],
        }
    }

    /// Checks the arguments agree (what `aclrtLaunchKernel` refuses with
    /// `ACL_ERROR_INVALID_PARAM` rather than fault on the device): operands of one type and
    /// length, an index inside its buffer, scalars that fit the buffer's type.
    pub fn check(&self) -> Result<(), AclError> {
        let same = |x: Buf, y: Buf| x.dtype == y.dtype && x.len == y.len;
        let fits = |v: Scalar, b: Buf| v.fit(b.dtype).is_ok();
        let ok = match *self {
            KernelCall::Fill { dst, value } => fits(value, dst),
            KernelCall::Copy { dst, src } => same(dst, src),
            KernelCall::Add { dst, a, b } => same(dst, a) && same(dst, b),
            KernelCall::AddScalar { dst, src, value }
            | KernelCall::MulScalar { dst, src, value } => same(dst, src) && fits(value, dst),
            KernelCall::Increment { dst, index, by } => index < dst.len && fits(by, dst),
            KernelCall::SetCond { src, index, .. } => index < src.len,
            KernelCall::SetCondLt {
                src, index, limit, ..
            } => index < src.len && fits(limit, src),
        };
        let nonempty = self.buffers().iter().all(|b| b.len > 0);
        if ok && nonempty {
            Ok(())
        } else {
            Err(AclError::InvalidParam)
        }
    }
}

impl<H> KernelCall<H> {
    /// A script kernel (buffers and handles by name) with its names resolved: `buf` and
    /// `cond` look a buffer or a handle up, or fail with the caller's error.
    pub fn from_named<E>(
        k: &Kernel,
        buf: impl Fn(&str) -> Result<Buf, E>,
        cond: impl Fn(&str) -> Result<H, E>,
    ) -> Result<KernelCall<H>, E> {
        Ok(match k {
            Kernel::Fill { dst, value } => KernelCall::Fill {
                dst: buf(dst)?,
                value: *value,
            },
            Kernel::Copy { dst, src } => KernelCall::Copy {
                dst: buf(dst)?,
                src: buf(src)?,
            },
            Kernel::Add { dst, a, b } => KernelCall::Add {
                dst: buf(dst)?,
                a: buf(a)?,
                b: buf(b)?,
            },
            Kernel::AddScalar { dst, src, value } => KernelCall::AddScalar {
                dst: buf(dst)?,
                src: buf(src)?,
                value: *value,
            },
            Kernel::MulScalar { dst, src, value } => KernelCall::MulScalar {
                dst: buf(dst)?,
                src: buf(src)?,
                value: *value,
            },
            Kernel::Increment { dst, index, by } => KernelCall::Increment {
                dst: buf(dst)?,
                index: *index,
                by: *by,
            },
            Kernel::SetCond { handle, src, index } => KernelCall::SetCond {
                cond: cond(handle)?,
                src: buf(src)?,
                index: *index,
            },
            Kernel::SetCondLt {
                handle,
                src,
                index,
                limit,
            } => KernelCall::SetCondLt {
                cond: cond(handle)?,
                src: buf(src)?,
                index: *index,
                limit: *limit,
            },
        })
    }
}

impl KernelCall<DevicePtr> {
    /// The device launch. Call [`KernelCall::check`] first.
    pub fn launch(&self) -> Launch {
        let mut attrs = AttrMap::new();
        let scalar = |attrs: &mut AttrMap, key: &str, v: Scalar| {
            attrs.insert(
                key.to_string(),
                match v {
                    Scalar::Int(i) => Attr::Int(i),
                    Scalar::Float(f) => Attr::Float(f),
                },
            );
        };
        let cond_arg = |p: DevicePtr| TensorArg::new(p, DType::U64, &[1]);
        let (inputs, outputs) = match *self {
            KernelCall::Fill { dst, value } => {
                scalar(&mut attrs, "value", value);
                // The output's length rides in an attribute: inference has no input to
                // take it from.
                attrs.insert("len".into(), Attr::Int(dst.len as i64));
                attrs.insert("dtype".into(), Attr::DType(device_dtype(dst.dtype)));
                (vec![], vec![dst.arg()])
            }
            KernelCall::Copy { dst, src } => (vec![src.arg()], vec![dst.arg()]),
            KernelCall::Add { dst, a, b } => (vec![a.arg(), b.arg()], vec![dst.arg()]),
            KernelCall::AddScalar { dst, src, value }
            | KernelCall::MulScalar { dst, src, value } => {
                scalar(&mut attrs, "value", value);
                (vec![src.arg()], vec![dst.arg()])
            }
            KernelCall::Increment { dst, index, by } => {
                attrs.insert("index".into(), Attr::Int(index as i64));
                scalar(&mut attrs, "by", by);
                (vec![dst.arg()], vec![dst.arg()])
            }
            KernelCall::SetCond { cond, src, index } => {
                attrs.insert("index".into(), Attr::Int(index as i64));
                (vec![src.arg()], vec![cond_arg(cond)])
            }
            KernelCall::SetCondLt {
                cond,
                src,
                index,
                limit,
            } => {
                attrs.insert("index".into(), Attr::Int(index as i64));
                scalar(&mut attrs, "limit", limit);
                (vec![src.arg()], vec![cond_arg(cond)])
            }
        };
        Launch::new(self.name(), attrs, inputs, outputs)
    }
}
