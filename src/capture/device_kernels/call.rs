//! One launch of a built-in kernel: [`Buf`], a buffer of device memory as a kernel sees
//! it, and [`DeviceKernelCall`], a kernel with its resolved arguments: the checks
//! `aclrtLaunchKernel` makes, name resolution from a [`DeviceKernel`], and the device
//! [`Launch`] of the op that computes it (the ops are in [`super::ops`]).

use crate::npu::device::{DevicePtr, Launch, TensorArg};
use crate::ops::{Attr, AttrMap, DType};

use crate::capture::error::AclError;
use crate::capture::types::{BufDtype, Scalar};

use super::named::DeviceKernel;

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
pub enum DeviceKernelCall<H = DevicePtr> {
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

impl<H: Copy> DeviceKernelCall<H> {
    /// The kernel's name (its op name on the device).
    pub fn name(&self) -> &'static str {
        match self {
            DeviceKernelCall::Fill { .. } => "fill",
            DeviceKernelCall::Copy { .. } => "copy",
            DeviceKernelCall::Add { .. } => "add",
            DeviceKernelCall::AddScalar { .. } => "add_scalar",
            DeviceKernelCall::MulScalar { .. } => "mul_scalar",
            DeviceKernelCall::Increment { .. } => "increment",
            DeviceKernelCall::SetCond { .. } => "set_cond",
            DeviceKernelCall::SetCondLt { .. } => "set_cond_lt",
        }
    }

    /// The same call with its condition handle mapped (`f` may fail).
    pub fn map_cond<G, E>(
        self,
        f: impl FnOnce(H) -> Result<G, E>,
    ) -> Result<DeviceKernelCall<G>, E> {
        Ok(match self {
            DeviceKernelCall::Fill { dst, value } => DeviceKernelCall::Fill { dst, value },
            DeviceKernelCall::Copy { dst, src } => DeviceKernelCall::Copy { dst, src },
            DeviceKernelCall::Add { dst, a, b } => DeviceKernelCall::Add { dst, a, b },
            DeviceKernelCall::AddScalar { dst, src, value } => {
                DeviceKernelCall::AddScalar { dst, src, value }
            }
            DeviceKernelCall::MulScalar { dst, src, value } => {
                DeviceKernelCall::MulScalar { dst, src, value }
            }
            DeviceKernelCall::Increment { dst, index, by } => {
                DeviceKernelCall::Increment { dst, index, by }
            }
            DeviceKernelCall::SetCond { cond, src, index } => DeviceKernelCall::SetCond {
                cond: f(cond)?,
                src,
                index,
            },
            DeviceKernelCall::SetCondLt {
                cond,
                src,
                index,
                limit,
            } => DeviceKernelCall::SetCondLt {
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
            DeviceKernelCall::Fill { dst, .. } | DeviceKernelCall::Increment { dst, .. } => {
                vec![dst]
            }
            DeviceKernelCall::Copy { dst, src }
            | DeviceKernelCall::AddScalar { dst, src, .. }
            | DeviceKernelCall::MulScalar { dst, src, .. } => vec![dst, src],
            DeviceKernelCall::Add { dst, a, b } => vec![dst, a, b],
            DeviceKernelCall::SetCond { src, .. } | DeviceKernelCall::SetCondLt { src, .. } => {
                vec![src]
            }
        }
    }

    /// Checks the arguments agree (what `aclrtLaunchKernel` refuses with
    /// `ACL_ERROR_INVALID_PARAM` rather than fault on the device): operands of one type and
    /// length, an index inside its buffer, scalars that fit the buffer's type.
    pub fn check(&self) -> Result<(), AclError> {
        let same = |x: Buf, y: Buf| x.dtype == y.dtype && x.len == y.len;
        let fits = |v: Scalar, b: Buf| v.fit(b.dtype).is_ok();
        let ok = match *self {
            DeviceKernelCall::Fill { dst, value } => fits(value, dst),
            DeviceKernelCall::Copy { dst, src } => same(dst, src),
            DeviceKernelCall::Add { dst, a, b } => same(dst, a) && same(dst, b),
            DeviceKernelCall::AddScalar { dst, src, value }
            | DeviceKernelCall::MulScalar { dst, src, value } => same(dst, src) && fits(value, dst),
            DeviceKernelCall::Increment { dst, index, by } => index < dst.len && fits(by, dst),
            DeviceKernelCall::SetCond { src, index, .. } => index < src.len,
            DeviceKernelCall::SetCondLt {
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

impl<H> DeviceKernelCall<H> {
    /// A script kernel (buffers and handles by name) with its names resolved: `buf` and
    /// `cond` look a buffer or a handle up, or fail with the caller's error.
    pub fn from_named<E>(
        k: &DeviceKernel,
        buf: impl Fn(&str) -> Result<Buf, E>,
        cond: impl Fn(&str) -> Result<H, E>,
    ) -> Result<DeviceKernelCall<H>, E> {
        Ok(match k {
            DeviceKernel::Fill { dst, value } => DeviceKernelCall::Fill {
                dst: buf(dst)?,
                value: *value,
            },
            DeviceKernel::Copy { dst, src } => DeviceKernelCall::Copy {
                dst: buf(dst)?,
                src: buf(src)?,
            },
            DeviceKernel::Add { dst, a, b } => DeviceKernelCall::Add {
                dst: buf(dst)?,
                a: buf(a)?,
                b: buf(b)?,
            },
            DeviceKernel::AddScalar { dst, src, value } => DeviceKernelCall::AddScalar {
                dst: buf(dst)?,
                src: buf(src)?,
                value: *value,
            },
            DeviceKernel::MulScalar { dst, src, value } => DeviceKernelCall::MulScalar {
                dst: buf(dst)?,
                src: buf(src)?,
                value: *value,
            },
            DeviceKernel::Increment { dst, index, by } => DeviceKernelCall::Increment {
                dst: buf(dst)?,
                index: *index,
                by: *by,
            },
            DeviceKernel::SetCond { handle, src, index } => DeviceKernelCall::SetCond {
                cond: cond(handle)?,
                src: buf(src)?,
                index: *index,
            },
            DeviceKernel::SetCondLt {
                handle,
                src,
                index,
                limit,
            } => DeviceKernelCall::SetCondLt {
                cond: cond(handle)?,
                src: buf(src)?,
                index: *index,
                limit: *limit,
            },
        })
    }
}

impl DeviceKernelCall<DevicePtr> {
    /// The device launch. Call [`DeviceKernelCall::check`] first.
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
            DeviceKernelCall::Fill { dst, value } => {
                scalar(&mut attrs, "value", value);
                // The output's length rides in an attribute: inference has no input to
                // take it from.
                attrs.insert("len".into(), Attr::Int(dst.len as i64));
                attrs.insert("dtype".into(), Attr::DType(device_dtype(dst.dtype)));
                (vec![], vec![dst.arg()])
            }
            DeviceKernelCall::Copy { dst, src } => (vec![src.arg()], vec![dst.arg()]),
            DeviceKernelCall::Add { dst, a, b } => (vec![a.arg(), b.arg()], vec![dst.arg()]),
            DeviceKernelCall::AddScalar { dst, src, value }
            | DeviceKernelCall::MulScalar { dst, src, value } => {
                scalar(&mut attrs, "value", value);
                (vec![src.arg()], vec![dst.arg()])
            }
            DeviceKernelCall::Increment { dst, index, by } => {
                attrs.insert("index".into(), Attr::Int(index as i64));
                scalar(&mut attrs, "by", by);
                (vec![dst.arg()], vec![dst.arg()])
            }
            DeviceKernelCall::SetCond { cond, src, index } => {
                attrs.insert("index".into(), Attr::Int(index as i64));
                (vec![src.arg()], vec![cond_arg(cond)])
            }
            DeviceKernelCall::SetCondLt {
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
