//! The element types the neural-network compute functions compute on, and how each converts to the
//! precision the arithmetic runs in.
//!
//! Pools, normalizations, resampling and recurrences read each element as `f64`, compute,
//! and round once per output element: float16/bfloat16 results are then as exact as
//! ONNX Runtime's (which computes those in f32) and float32 results carry no accumulated
//! rounding. The products (Conv, ConvTranspose, MatMul, Gemm) compute float32 in float32,
//! for speed, and float16/bfloat16 in float32 on widened copies ([`widened`]), rounding
//! each output once.

use std::cell::RefCell;

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use smallvec::SmallVec;

use crate::dispatch;
use crate::ops::{DType, Elem, OpError, TensorMut, TensorRef};

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

/// A half-precision float type whose arithmetic runs in f32: widened exactly, rounded
/// back to nearest-even once per result.
pub trait Half: Scalar {
    /// `dst[i] = src[i]` as f32 (exact; F16C instructions where the CPU has them).
    fn widen(src: &[Self], dst: &mut [f32]);
    /// `dst[i] = src[i]` rounded to nearest, ties to even.
    fn narrow(src: &[f32], dst: &mut [Self]);
}

macro_rules! half_widen {
    ($($t:ty),*) => {$(
        impl Half for $t {
            #[inline]
            fn widen(src: &[Self], dst: &mut [f32]) { src.convert_to_f32_slice(dst) }
            #[inline]
            fn narrow(src: &[f32], dst: &mut [Self]) { dst.convert_from_f32_slice(src) }
        }
    )*};
}
half_widen!(f16, bf16);

thread_local! {
    /// The f32 copies of one half-precision launch's operands: grown to the largest launch
    /// this thread has run and kept, so steady-state executions allocate nothing here.
    static WIDE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f`, an f32 compute function, on operands of the half type `T`, as Ascend's Cube
/// and Vector units compute on float16 storage: every `T` input widened to f32, `f`
/// accumulating in f32, every `T` output rounded once. Operands of other types pass
/// through as they are.
///
/// This is how the products (Conv, ConvTranspose, MatMul, Gemm) compute float16 and
/// bfloat16: a product's cost is its multiply-adds, which the f32 kernels do at full
/// vector width, while the two conversions are one pass each over the operands.
pub fn widened<T: Half>(
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
    f: impl FnOnce(&[TensorRef], &mut [TensorMut]) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let wide = |dtype: DType, len: usize| if dtype == T::DTYPE { len } else { 0 };
    let in_len: usize = inputs.iter().map(|t| wide(t.dtype, t.len())).sum();
    let out_len: usize = outputs.iter().map(|t| wide(t.dtype, t.len())).sum();
    let run = |buf: &mut [f32]| -> Result<(), OpError> {
        let (in_buf, out_buf) = buf.split_at_mut(in_len);
        let mut rest = &mut *in_buf;
        for t in inputs.iter().filter(|t| t.dtype == T::DTYPE) {
            let (part, tail) = rest.split_at_mut(t.len());
            T::widen(t.slice::<T>()?, part);
            rest = tail;
        }
        let mut rest = &*in_buf;
        let ins: SmallVec<[TensorRef; 6]> = inputs
            .iter()
            .map(|t| {
                if t.dtype != T::DTYPE {
                    return *t;
                }
                let (part, tail) = rest.split_at(t.len());
                rest = tail;
                TensorRef::new(DType::F32, t.shape, bytemuck::cast_slice(part))
            })
            .collect();
        {
            let mut rest = &mut *out_buf;
            let mut outs: SmallVec<[TensorMut; 2]> = outputs
                .iter_mut()
                .map(|t| {
                    if t.dtype != T::DTYPE {
                        return TensorMut::new(t.dtype, t.shape, &mut *t.data);
                    }
                    let (part, tail) = std::mem::take(&mut rest).split_at_mut(t.len());
                    rest = tail;
                    TensorMut::new(DType::F32, t.shape, bytemuck::cast_slice_mut(part))
                })
                .collect();
            f(&ins, &mut outs)?;
        }
        let mut rest = &*out_buf;
        for t in outputs.iter_mut().filter(|t| t.dtype == T::DTYPE) {
            let (part, tail) = rest.split_at(t.len());
            T::narrow(part, t.slice_mut::<T>()?);
            rest = tail;
        }
        Ok(())
    };
    let len = in_len + out_len;
    WIDE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, 0.0);
            }
            run(&mut buf[..len])
        }
        // Re-entered on this thread (a nested parallel call ran another product here):
        // that one gets its own memory.
        Err(_) => run(&mut vec![0.0; len]),
    })
}

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
