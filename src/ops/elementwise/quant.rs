//! QuantizeLinear and DequantizeLinear with per-tensor, per-axis and blocked scales.
//!
//! `x` is viewed as `[outer, n, inner]` around the quantization axis. The scale (and zero
//! point, which has the scale's shape) is one value (per tensor), one per index along the
//! axis (per axis), or, with `block_size`, one per block of `block_size` indices along the
//! axis and per position elsewhere (blocked). A [`ScaleMap`] turns `(o, a, i)` into the
//! scale's flat index for all three.

use half::{bf16, f16};

use super::num::{Float, Num, Real};
use crate::dispatch;
use crate::ops::DType;
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// Where each element of `x` finds its scale: `o * outer + (a / block) * axis + i * inner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ScaleMap {
    /// x as `[outer, n, inner]`.
    dims: [usize; 3],
    block: usize,
    strides: [usize; 3],
}

impl ScaleMap {
    fn new(ctx: &InferCtx, x: &[usize], scale: &[usize]) -> Result<Self, OpError> {
        let count: usize = scale.iter().product();
        let total: usize = x.iter().product();
        if count == 1 && ctx.attr_int("block_size", 0)? <= 0 {
            return Ok(ScaleMap {
                dims: [1, total, 1],
                block: 1,
                strides: [0; 3],
            });
        }
        let axis = ctx.axis(ctx.attr_int("axis", 1)?, x.len(), "axis")?;
        let outer = x[..axis].iter().product();
        let inner = x[axis + 1..].iter().product();
        let n = x[axis];
        let dims = [outer, n, inner];
        let block = ctx.attr_int("block_size", 0)?;
        if block <= 0 {
            if scale.len() != 1 || scale[0] != n {
                return Err(ctx.input_error(
                    1,
                    format!("scale {scale:?} is neither one value nor one per index of axis {axis} of {x:?}"),
                ));
            }
            return Ok(ScaleMap {
                dims,
                block: 1,
                strides: [0, 1, 0],
            });
        }
        let block = block as usize;
        let blocks = n.div_ceil(block);
        let fits = scale.len() == x.len()
            && scale
                .iter()
                .zip(x)
                .enumerate()
                .all(|(k, (&s, &d))| if k == axis { s == blocks } else { s == d });
        if !fits {
            return Err(ctx.input_error(
                1,
                format!(
                    "scale {scale:?} does not hold blocks of {block} along axis {axis} of {x:?}"
                ),
            ));
        }
        Ok(ScaleMap {
            dims,
            block,
            strides: [blocks * inner, inner, 1],
        })
    }

    /// Calls `f(x_index, scale_index)` for every element, in order.
    fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        let [outer, n, inner] = self.dims;
        let [so, sa, si] = self.strides;
        let mut k = 0;
        for o in 0..outer {
            for a in 0..n {
                let base = o * so + (a / self.block) * sa;
                for i in 0..inner {
                    f(k, base + i * si);
                    k += 1;
                }
            }
        }
    }
}

/// The integer types a tensor quantizes to, with their saturation bounds.
trait Quantized: Num {
    const LO: f64;
    const HI: f64;
}

macro_rules! quantized {
    ($($t:ty),*) => {$( impl Quantized for $t {
        const LO: f64 = <$t>::MIN as f64;
        const HI: f64 = <$t>::MAX as f64;
    } )*};
}
quantized!(i8, u8, i16, u16, i32);

/// The zero point, when given, has the scale's shape.
fn check_zero_point(ctx: &InferCtx, inputs: &[TensorRef]) -> Result<(), OpError> {
    match inputs.get(2).filter(|t| !t.is_empty()) {
        Some(zp) if zp.shape != inputs[1].shape => Err(ctx.input_error(
            2,
            format!("has shape {:?}, the scale {:?}", zp.shape, inputs[1].shape),
        )),
        _ => Ok(()),
    }
}

/// The zero point's values (input 2), or none when it is absent or empty.
fn zero_point<'a, Q: Num>(inputs: &[TensorRef<'a>]) -> Result<Option<&'a [Q]>, OpError> {
    match inputs.get(2).filter(|t| !t.is_empty()) {
        Some(t) => Ok(Some(t.slice::<Q>()?)),
        None => Ok(None),
    }
}

/// QuantizeLinear: `saturate(round_half_even(x / scale) + zero_point)`, the division in the
/// input's compute type as the ONNX reference does it.
pub fn compute_quantize(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, scale, out) = (&inputs[0], &inputs[1], &mut outputs[0]);
    if x.dtype != scale.dtype {
        return Err(ctx.input_error(1, format!("is {}, x is {}", scale.dtype, x.dtype)));
    }
    let map = ScaleMap::new(ctx, x.shape, scale.shape)?;
    check_zero_point(ctx, inputs)?;
    fn quantize<T: Float, Q: Quantized>(
        map: &ScaleMap,
        inputs: &[TensorRef],
        out: &mut TensorMut,
    ) -> Result<(), OpError> {
        let (x, scale) = (inputs[0].slice::<T>()?, inputs[1].slice::<T>()?);
        let zp = zero_point::<Q>(inputs)?;
        let y = out.slice_mut::<Q>()?;
        map.for_each(|k, s| {
            let q = (x[k].to_r() / scale[s].to_r()).round_even();
            let z = zp.map_or(0.0, |z| z[s].to_f64());
            y[k] = Q::from_f64((q.to_f64() + z).clamp(Q::LO, Q::HI));
        });
        Ok(())
    }
    dispatch!(x.dtype, T in [f32, f64, f16, bf16] =>
        dispatch!(out.dtype, Q in [i8, u8, i16, u16, i32] =>
            quantize::<T, Q>(&map, inputs, out),
            other => Err(ctx.input_error(2, format!("cannot quantize to {other}")))),
        other => Err(ctx.input_error(0, format!("cannot quantize {other}"))))
}

/// DequantizeLinear: `(x - zero_point) * scale`, in the scale's type.
pub fn compute_dequantize(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, scale, out) = (&inputs[0], &inputs[1], &mut outputs[0]);
    let map = ScaleMap::new(ctx, x.shape, scale.shape)?;
    check_zero_point(ctx, inputs)?;
    fn dequantize<Q: Num, T: Float>(
        map: &ScaleMap,
        inputs: &[TensorRef],
        out: &mut TensorMut,
    ) -> Result<(), OpError> {
        let (x, scale) = (inputs[0].slice::<Q>()?, inputs[1].slice::<T>()?);
        let zp = zero_point::<Q>(inputs)?;
        let y = out.slice_mut::<T>()?;
        map.for_each(|k, s| {
            let z = zp.map_or(0, |z| z[s].to_i128());
            let d = <T::R as Real>::c((x[k].to_i128() - z) as f64);
            y[k] = T::from_r(d * scale[s].to_r());
        });
        Ok(())
    }
    if out.dtype != scale.dtype {
        return Err(ctx.input_error(
            1,
            format!("is {}, the output is {}", scale.dtype, out.dtype),
        ));
    }
    let q = if x.dtype == DType::Bool {
        DType::U8
    } else {
        x.dtype
    };
    dispatch!(q, Q in [i8, u8, i16, u16, i32] =>
        dispatch!(out.dtype, T in [f32, f64, f16, bf16] =>
            dequantize::<Q, T>(&map, inputs, out),
            other => Err(ctx.input_error(1, format!("cannot dequantize to {other}")))),
        other => Err(ctx.input_error(0, format!("cannot dequantize {other}"))))
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run1;
    use crate::ops::testing::try_run;

    #[test]
    fn per_tensor_rounds_half_to_even_and_saturates() {
        let x = Tensor::from_vec(&[5], &[0.0f32, 1.0, 3.0, -1.0, 1000.0]);
        let scale = Tensor::from_vec(&[], &[2.0f32]);
        let zp = Tensor::from_vec(&[], &[10u8]);
        let y = run1("QuantizeLinear", &[], &[x, scale.clone(), zp.clone()]);
        // 0.5 -> 0, 1.5 -> 2, -0.5 -> -0.
        assert_eq!(y.slice::<u8>().unwrap(), &[10, 10, 12, 10, 255]);
        let back = run1("DequantizeLinear", &[], &[y, scale, zp]);
        assert_eq!(back.slice::<f32>().unwrap(), &[0.0, 0.0, 4.0, 0.0, 490.0]);
        // Without a zero point: uint8, zero 0.
        let x = Tensor::from_vec(&[2], &[-3.0f32, 3.0]);
        let y = run1(
            "QuantizeLinear",
            &[],
            &[x, Tensor::from_vec(&[], &[1.0f32])],
        );
        assert_eq!(y.slice::<u8>().unwrap(), &[0, 3]);
    }

    #[test]
    fn per_axis_and_blocked() {
        let x = Tensor::from_vec(&[2, 4], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        let scale = Tensor::from_vec(&[2], &[1.0f32, 0.5]);
        let zp = Tensor::from_vec(&[2], &[0i8, -1]);
        let y = run1(
            "QuantizeLinear",
            &[("axis", Attr::Int(0))],
            &[x.clone(), scale, zp],
        );
        assert_eq!(y.slice::<i8>().unwrap(), &[1, 2, 3, 4, 9, 11, 13, 15]);
        // Blocks of 2 along axis 1: scale [2, 2].
        let scale = Tensor::from_vec(&[2, 2], &[1.0f32, 2.0, 4.0, 8.0]);
        let attrs = [("axis", Attr::Int(1)), ("block_size", Attr::Int(2))];
        let zp = Tensor::from_vec(&[2, 2], &[0i16, 0, 0, 0]);
        let y = run1("QuantizeLinear", &attrs, &[x, scale.clone(), zp.clone()]);
        assert_eq!(y.slice::<i16>().unwrap(), &[1, 2, 2, 2, 1, 2, 1, 1]);
        let back = run1("DequantizeLinear", &attrs, &[y, scale, zp]);
        assert_eq!(
            back.slice::<f32>().unwrap(),
            &[1.0, 2.0, 4.0, 4.0, 4.0, 8.0, 8.0, 8.0]
        );
        let bad = try_run(
            "DequantizeLinear",
            &[],
            &[
                Tensor::from_vec(&[2, 3], &[0i8; 6]),
                Tensor::from_vec(&[2], &[1.0f32, 1.0]),
            ],
            1,
        );
        assert!(bad.is_err(), "two scales for an axis of 3");
    }
}
