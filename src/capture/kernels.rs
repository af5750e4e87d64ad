//! The built-in device kernels of capture scripts (fill, copy, add, add_scalar, mul_scalar,
//! increment, set_cond, set_cond_lt): [`KernelCall`], one launch with its arguments, and
//! the ops that compute them, registered into the device's op library beside the ONNX ops
//! (their lowercase names cannot collide with ONNX's CamelCase ones).
//!
//! Every kernel is an ordinary device launch, so it runs wherever a launch runs: at once on
//! a stream that is not capturing, or later, recorded in a captured model. Arithmetic
//! wraps on integer buffers (a device has no overflow trap) and rounds to `f32` on float
//! ones. A kernel that writes `dst` also reads it where it needs to (`increment`), and the
//! device gives an input that overlaps an output a copy, so in-place updates are exact.

use crate::npu::device::{DevicePtr, Launch, TensorArg};
use crate::ops::{Attr, AttrMap, DType};
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut, TensorRef};

use super::error::AclError;
use super::script::Kernel;
use super::types::{BufDtype, Scalar};

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

/// Registers the built-in kernels as a family of the op library, beside the library's
/// own ops.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new("fill", infer_fill).computes(fill));
    reg.add(OpSpec::new("copy", infer_like_input).computes(copy));
    reg.add(OpSpec::new("add", infer_like_input).computes(add));
    reg.add(OpSpec::new("add_scalar", infer_like_input).computes(add_scalar));
    reg.add(OpSpec::new("mul_scalar", infer_like_input).computes(mul_scalar));
    reg.add(OpSpec::new("increment", infer_like_input).computes(increment));
    reg.add(OpSpec::new("set_cond", infer_cond).computes(set_cond));
    reg.add(OpSpec::new("set_cond_lt", infer_cond).computes(set_cond_lt));
}

fn infer_fill(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let len = ctx.attr_int("len", -1)?;
    let dtype = match ctx.attrs.get("dtype") {
        Some(Attr::DType(d)) => *d,
        _ => return Err(ctx.attr_error("dtype", "missing")),
    };
    if len < 1 {
        return Err(ctx.attr_error("len", "must be positive"));
    }
    Ok(vec![TensorMeta::new(dtype, &[len])])
}

fn infer_like_input(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 2)?;
    if let [a, b] = ctx.inputs
        && a != b
    {
        return Err(ctx.input_error(1, format!("{b} differs from input 0, {a}")));
    }
    Ok(vec![ctx.inputs[0].clone()])
}

fn infer_cond(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    Ok(vec![TensorMeta::new(DType::U64, &[1])])
}

/// A scalar attribute as a value of the buffer's element type.
trait FromScalar: Sized {
    fn from_attr(ctx: &InferCtx, name: &str) -> Result<Self, OpError>;
}

impl FromScalar for f32 {
    fn from_attr(ctx: &InferCtx, name: &str) -> Result<f32, OpError> {
        match ctx.attrs.get(name) {
            Some(Attr::Float(v)) => Ok(*v as f32),
            Some(Attr::Int(v)) => Ok(*v as f32),
            _ => Err(ctx.attr_error(name, "missing or not a number")),
        }
    }
}

macro_rules! int_scalar {
    ($($t:ty),*) => {$(
        impl FromScalar for $t {
            fn from_attr(ctx: &InferCtx, name: &str) -> Result<$t, OpError> {
                match ctx.attrs.get(name) {
                    Some(Attr::Int(v)) => <$t>::try_from(*v)
                        .map_err(|_| ctx.attr_error(name, format!("{v} does not fit"))),
                    _ => Err(ctx.attr_error(name, "missing or not an integer")),
                }
            }
        }
    )*};
}
int_scalar!(i32, i64);

/// Element arithmetic: wrapping on integers, IEEE on floats.
trait Arith: Copy + PartialOrd {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// The value a condition handle takes: the bits of an integer as unsigned at its own
    /// width, a float truncated toward zero and saturated (negative and NaN give 0).
    fn as_cond(self) -> u64;
}

impl Arith for f32 {
    fn add(self, o: f32) -> f32 {
        self + o
    }
    fn mul(self, o: f32) -> f32 {
        self * o
    }
    fn as_cond(self) -> u64 {
        self as u64
    }
}

impl Arith for i32 {
    fn add(self, o: i32) -> i32 {
        self.wrapping_add(o)
    }
    fn mul(self, o: i32) -> i32 {
        self.wrapping_mul(o)
    }
    fn as_cond(self) -> u64 {
        u64::from(self as u32)
    }
}

impl Arith for i64 {
    fn add(self, o: i64) -> i64 {
        self.wrapping_add(o)
    }
    fn mul(self, o: i64) -> i64 {
        self.wrapping_mul(o)
    }
    fn as_cond(self) -> u64 {
        self as u64
    }
}

/// Calls `$body` with `$t` bound to the element type of `$dtype`.
macro_rules! by_dtype {
    ($ctx:expr, $dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $t = f32;
                $body
            }
            DType::I32 => {
                type $t = i32;
                $body
            }
            DType::I64 => {
                type $t = i64;
                $body
            }
            d => Err($ctx.compute_error(format!("{d} buffers are not supported"))),
        }
    };
}

fn fill(ctx: &InferCtx, _: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    by_dtype!(ctx, outs[0].dtype, T => {
        let v = T::from_attr(ctx, "value")?;
        outs[0].slice_mut::<T>()?.fill(v);
        Ok(())
    })
}

fn copy(_: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    outs[0].data.copy_from_slice(ins[0].data);
    Ok(())
}

fn add(ctx: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    by_dtype!(ctx, outs[0].dtype, T => {
        let (a, b) = (ins[0].slice::<T>()?, ins[1].slice::<T>()?);
        for ((o, &x), &y) in outs[0].slice_mut::<T>()?.iter_mut().zip(a).zip(b) {
            *o = x.add(y);
        }
        Ok(())
    })
}

fn scalar_map(
    ctx: &InferCtx,
    ins: &[TensorRef],
    outs: &mut [TensorMut],
    mul: bool,
) -> Result<(), OpError> {
    by_dtype!(ctx, outs[0].dtype, T => {
        let v = T::from_attr(ctx, "value")?;
        let src = ins[0].slice::<T>()?;
        for (o, &x) in outs[0].slice_mut::<T>()?.iter_mut().zip(src) {
            *o = if mul { x.mul(v) } else { x.add(v) };
        }
        Ok(())
    })
}

fn add_scalar(ctx: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    scalar_map(ctx, ins, outs, false)
}

fn mul_scalar(ctx: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    scalar_map(ctx, ins, outs, true)
}

fn index_attr(ctx: &InferCtx, len: usize) -> Result<usize, OpError> {
    let i = ctx.attr_int("index", 0)?;
    usize::try_from(i)
        .ok()
        .filter(|&i| i < len)
        .ok_or_else(|| ctx.attr_error("index", format!("{i} is outside {len} elements")))
}

fn increment(ctx: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    outs[0].data.copy_from_slice(ins[0].data);
    by_dtype!(ctx, outs[0].dtype, T => {
        let by = T::from_attr(ctx, "by")?;
        let dst = outs[0].slice_mut::<T>()?;
        let i = index_attr(ctx, dst.len())?;
        dst[i] = dst[i].add(by);
        Ok(())
    })
}

fn set_cond(ctx: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    by_dtype!(ctx, ins[0].dtype, T => {
        let src = ins[0].slice::<T>()?;
        let v = src[index_attr(ctx, src.len())?].as_cond();
        outs[0].slice_mut::<u64>()?[0] = v;
        Ok(())
    })
}

fn set_cond_lt(ctx: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    by_dtype!(ctx, ins[0].dtype, T => {
        let src = ins[0].slice::<T>()?;
        let limit = T::from_attr(ctx, "limit")?;
        let v = src[index_attr(ctx, src.len())?] < limit;
        outs[0].slice_mut::<u64>()?[0] = u64::from(v);
        Ok(())
    })
}
