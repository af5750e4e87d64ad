//! The element types the neural-network compute functions compute on, and how each converts to the
//! precision the arithmetic runs in.
//!
//! Pools, normalizations, resampling and recurrences read each element as `f64`, compute,
//! and round once per output element: float16/bfloat16 results are then as exact as
//! ONNX Runtime's (which computes those in f32) and float32 results carry no accumulated
//! rounding. Only the GEMM-backed ops (MatMul, Gemm, Conv) compute in the tensor's own
//! float type, for speed; see `gemm.rs`.

use half::{bf16, f16};

use crate::dispatch;
use crate::ops::{Elem, OpError, TensorMut, TensorRef};

/// A numeric element type with lossless-enough conversions through `f64`.
pub trait Scalar: Elem + Copy + PartialOrd {
    fn to_f64(self) -> f64;
    /// Rounds to nearest for floats; integers round half away from zero and saturate.
    fn from_f64(v: f64) -> Self;
}

macro_rules! float_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            #[inline]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline]
            fn from_f64(v: f64) -> Self { v as $t }
        }
    )*};
}
float_scalar!(f32, f64);

macro_rules! half_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            #[inline]
            fn to_f64(self) -> f64 { self.to_f64() }
            #[inline]
            fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
        }
    )*};
}
half_scalar!(f16, bf16);

macro_rules! int_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            #[inline]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline]
            fn from_f64(v: f64) -> Self { v.round() as $t }
        }
    )*};
}
int_scalar!(i8, u8, i16, u16, i32, u32, i64, u64);

/// The elements of a float tensor of any float type, as `f64` (small parameter tensors:
/// scales, means, biases, whose type may differ from the data's).
pub fn read_f64s(t: &TensorRef) -> Result<Vec<f64>, OpError> {
    dispatch!(t.dtype, T in [f32, f64, f16, bf16]
        => Ok(t.slice::<T>()?.iter().map(|v| v.to_f64()).collect()),
        other => Err(OpError::Input { op: String::new(), index: 0, msg: format!("is {other}, expected a float type") }))
}

/// Writes `v` into a float output of any float type, rounding once per element.
pub fn write_f64s(out: &mut TensorMut, v: &[f64]) -> Result<(), OpError> {
    dispatch!(out.dtype, T in [f32, f64, f16, bf16]
        => {
            for (d, &s) in out.slice_mut::<T>()?.iter_mut().zip(v) {
                *d = T::from_f64(s);
            }
            Ok(())
        },
        other => Err(OpError::Input { op: String::new(), index: 0, msg: format!("output is {other}, expected a float type") }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_once() {
        assert_eq!(f16::from_f64(1.0 + 1e-5), f16::ONE);
        assert_eq!(u8::from_f64(300.0), 255);
        assert_eq!(i8::from_f64(-2.5), -3);
        assert_eq!(bf16::from_f64(2.0).to_f64(), 2.0);
    }
}
