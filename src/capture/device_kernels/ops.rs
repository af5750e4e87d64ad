//! The ops that compute the built-in kernels of capture scripts (fill, copy, add,
//! add_scalar, mul_scalar, increment, set_cond, set_cond_lt), registered into the
//! device's op library beside the ONNX ops (their lowercase names cannot collide with
//! ONNX's CamelCase ones). They know tensors and attributes, not buffers or scripts:
//! [`super::call::DeviceKernelCall::launch`] is what turns a call into their attributes.
//!
//! Every kernel is an ordinary device launch, so it runs wherever a launch runs: at once on
//! a stream that is not capturing, or later, recorded in a captured model. Arithmetic
//! wraps on integer buffers (a device has no overflow trap) and rounds to `f32` on float
//! ones. A kernel that writes `dst` also reads it where it needs to (`increment`), and the
//! device gives an input that overlaps an output a copy, so in-place updates are exact.

use crate::ops::{Attr, DType};
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut, TensorRef};

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
