//! Cast and CastLike between every pair of device element types.
//!
//! The rules are [`convert`]'s (float to float rounds once to nearest even, float to
//! integer truncates toward zero as NumPy does, integer to integer wraps), plus bool:
//! anything nonzero (NaN included) casts to true, and a bool is a 0 or 1 like any other
//! number on the way out. Each (source, target) pair is its own monomorphized loop.

use half::{bf16, f16};

use super::broadcast::{par_map, par_narrow, par_widen};
use super::num::{Num, convert};
use crate::dispatch;
use crate::ops::DType;
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// Cast (target type from inference, i.e. the `to` attribute) and CastLike (input 1's
/// type): both read the target from the output.
pub fn compute(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    cast(ctx, &inputs[0], &mut outputs[0])
}

fn cast(ctx: &InferCtx, x: &TensorRef, out: &mut TensorMut) -> Result<(), OpError> {
    let bad = |d: DType| ctx.input_error(0, format!("cannot cast {} to {}", x.dtype, d));
    if x.dtype == out.dtype {
        let n = out.data.len().min(x.data.len());
        out.data[..n].copy_from_slice(&x.data[..n]);
        return Ok(());
    }
    // A bool source is its 0/1 byte.
    let src = if x.dtype == DType::Bool {
        DType::U8
    } else {
        x.dtype
    };
    if out.dtype == DType::Bool {
        fn to_bool<S: Num>(x: &[S], out: &mut [u8]) {
            let zero = S::zero();
            par_map(x, out, move |v| (v != zero) as u8)
        }
        dispatch!(src, S in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
            to_bool::<S>(x.slice::<S>()?, out.slice_mut::<u8>()?),
            other => return Err(bad(other)));
        return Ok(());
    }
    // Between float32 and a 16-bit float, the usual casts of a mixed-precision model:
    // whole slices at a time rather than a conversion call per element.
    match (src, out.dtype) {
        (DType::F32, DType::F16) => {
            par_narrow::<f16>(x.slice::<f32>()?, out.slice_mut::<f16>()?);
            return Ok(());
        }
        (DType::F32, DType::Bf16) => {
            par_narrow::<bf16>(x.slice::<f32>()?, out.slice_mut::<bf16>()?);
            return Ok(());
        }
        (DType::F16, DType::F32) => {
            par_widen::<f16>(x.slice::<f16>()?, out.slice_mut::<f32>()?);
            return Ok(());
        }
        (DType::Bf16, DType::F32) => {
            par_widen::<bf16>(x.slice::<bf16>()?, out.slice_mut::<f32>()?);
            return Ok(());
        }
        _ => {}
    }
    fn pair<S: Num, D: Num>(x: &TensorRef, out: &mut TensorMut) -> Result<(), OpError> {
        par_map(x.slice::<S>()?, out.slice_mut::<D>()?, convert::<S, D>);
        Ok(())
    }
    dispatch!(src, S in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
        dispatch!(out.dtype, D in [f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64] =>
            pair::<S, D>(x, out),
            other => Err(bad(other))),
        other => Err(bad(other)))
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::run1;
    use half::{bf16, f16};

    use crate::ops::Tensor;
    use crate::ops::{Attr, DType};

    fn cast(x: Tensor, to: DType) -> Tensor {
        run1("Cast", &[("to", Attr::DType(to))], &[x])
    }

    #[test]
    fn floats_to_integers_truncate_toward_zero() {
        let x = Tensor::from_vec(&[4], &[-2.7f32, -0.5, 0.9, 3.99]);
        assert_eq!(
            cast(x.clone(), DType::I32).slice::<i32>().unwrap(),
            &[-2, 0, 0, 3]
        );
        assert_eq!(cast(x, DType::I64).slice::<i64>().unwrap(), &[-2, 0, 0, 3]);
    }

    #[test]
    fn between_floats_rounds_to_nearest_even() {
        let x = Tensor::from_vec(&[2], &[1.0f64 / 3.0, 70000.0]);
        let h = cast(x.clone(), DType::F16);
        assert_eq!(
            h.slice::<f16>().unwrap(),
            &[f16::from_f64(1.0 / 3.0), f16::INFINITY]
        );
        // 1 + 2^-8 is halfway between two bfloat16s: to the even one, 1.
        let x = Tensor::from_vec(&[2], &[1.0f32 + 1.0 / 256.0, 1.0 + 3.0 / 256.0]);
        let b = cast(x, DType::Bf16);
        assert_eq!(
            b.slice::<bf16>().unwrap(),
            &[bf16::from_f32(1.0), bf16::from_f32(1.0 + 4.0 / 256.0)]
        );
        let back = cast(h, DType::F32);
        assert_eq!(
            back.slice::<f32>().unwrap()[0],
            f16::from_f64(1.0 / 3.0).to_f32()
        );
    }

    /// The whole-slice casts between float32 and the 16-bit floats round as the
    /// conversion of one element does: halfway cases, overflow to infinity, subnormals
    /// of both types, zeros of both signs, NaN, on lengths around a vector.
    #[test]
    fn half_casts_round_as_one_element_does() {
        let specials = [
            0.0f32,
            -0.0,
            1.0 + 1.0 / 2048.0,
            1.0 + 3.0 / 2048.0,
            1.0 + 1.0 / 256.0,
            65504.0,
            65520.0,
            1e-7,
            -6e-8,
            f32::from_bits(1),
            f32::INFINITY,
            f32::NEG_INFINITY,
            3.4e38,
        ];
        for n in [1, 7, 16, 33, 1000] {
            let x: Vec<f32> = (0..n)
                .map(|i| match specials.get(i % 17) {
                    Some(&v) => v,
                    None => (i as f32 * 0.731).sin() * 1000.0,
                })
                .collect();
            let t = Tensor::from_vec(&[n], &x);
            // To the 16-bit type `$h` and back, each bit for bit as one element converts.
            macro_rules! round_trip {
                ($h:ty, $dtype:expr, $what:literal) => {{
                    let half = cast(t.clone(), $dtype);
                    let elements = half.slice::<$h>().unwrap();
                    let got: Vec<u16> = elements.iter().map(|v| v.to_bits()).collect();
                    let want: Vec<u16> = x.iter().map(|&v| <$h>::from_f32(v).to_bits()).collect();
                    assert_eq!(got, want, "{}, {n}", $what);
                    let wide: Vec<u32> = elements.iter().map(|v| v.to_f32().to_bits()).collect();
                    let back = cast(half.clone(), DType::F32);
                    let got: Vec<u32> = back
                        .slice::<f32>()
                        .unwrap()
                        .iter()
                        .map(|v| v.to_bits())
                        .collect();
                    assert_eq!(got, wide, "{} to float32, {n}", $what);
                }};
            }
            round_trip!(f16, DType::F16, "float16");
            round_trip!(bf16, DType::Bf16, "bfloat16");
        }
        // NaN stays NaN both ways.
        let nan = Tensor::from_vec(&[3], &[f32::NAN, -f32::NAN, 1.0]);
        let h = cast(nan, DType::F16);
        assert!(h.slice::<f16>().unwrap()[..2].iter().all(|v| v.is_nan()));
        let back = cast(h, DType::F32);
        assert!(back.slice::<f32>().unwrap()[..2].iter().all(|v| v.is_nan()));
    }

    #[test]
    fn bools_and_integer_wrapping() {
        let x = Tensor::from_vec(&[4], &[0.0f32, -0.0, f32::NAN, 2.0]);
        let b = cast(x, DType::Bool);
        assert_eq!(
            (b.dtype, b.slice::<u8>().unwrap()),
            (DType::Bool, &[0, 0, 1, 1][..])
        );
        let f = cast(b, DType::F32);
        assert_eq!(f.slice::<f32>().unwrap(), &[0.0, 0.0, 1.0, 1.0]);
        let i = Tensor::from_vec(&[3], &[-1i32, 256, 300]);
        assert_eq!(cast(i, DType::U8).slice::<u8>().unwrap(), &[255, 0, 44]);
    }

    #[test]
    fn cast_like_takes_the_second_input_type() {
        let x = Tensor::from_vec(&[2], &[1.5f32, -1.5]);
        let like = Tensor::from_vec(&[1], &[0i16]);
        let y = run1("CastLike", &[], &[x, like]);
        assert_eq!(y.slice::<i16>().unwrap(), &[1, -1]);
    }
}
