//! The elementwise-shaped ops that look across axes: Hardmax (one-hot of the first
//! maximum along an axis) and MeanVarianceNormalization (standardize over `axes`).

use half::{bf16, f16};

use super::broadcast::Layout;
use super::num::{Float, Real};
use crate::dispatch;
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// Hardmax. From opset 13 it works along `axis`; before, the input is flattened to 2-D at
/// `axis` and it works along the second dim.
pub fn compute_hardmax(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let opset = ctx.attr_int("onnx_opset", 13)?;
    let default = if opset >= 13 { -1 } else { 1 };
    let rank = x.rank().max(1);
    let axis = ctx.axis(ctx.attr_int("axis", default)?, rank, "axis")?;
    let shape = if x.rank() == 0 { &[1][..] } else { x.shape };
    let outer: usize = shape[..axis].iter().product();
    let (n, inner): (usize, usize) = if opset >= 13 {
        (shape[axis], shape[axis + 1..].iter().product())
    } else {
        (shape[axis..].iter().product(), 1)
    };
    fn hardmax<T: Float>(x: &[T], y: &mut [T], [outer, n, inner]: [usize; 3]) {
        let (zero, one) = (T::from_r(T::R::c(0.0)), T::from_r(T::R::c(1.0)));
        y.fill(zero);
        for o in 0..outer {
            for i in 0..inner {
                let at = |a: usize| (o * n + a) * inner + i;
                let mut best = 0;
                for a in 1..n {
                    if x[at(a)].to_r() > x[at(best)].to_r() {
                        best = a;
                    }
                }
                if n > 0 {
                    y[at(best)] = one;
                }
            }
        }
    }
    dispatch!(x.dtype, T in [f32, f64, f16, bf16] =>
        hardmax::<T>(x.slice::<T>()?, outputs[0].slice_mut::<T>()?, [outer, n, inner]),
        other => return Err(ctx.input_error(0, format!("{other} is not supported"))));
    Ok(())
}

/// MeanVarianceNormalization: `(x - mean) / (std + 1e-9)` with mean and (population)
/// standard deviation over `axes` (default `[0, 2, 3]`), as the ONNX function defines it.
/// Statistics accumulate in f64, two passes for the variance.
pub fn compute_mvn(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let axes = ctx.attr_ints("axes")?.unwrap_or(&[0, 2, 3]).to_vec();
    let mut kept = x.shape.to_vec();
    for &a in &axes {
        let a = ctx.axis(a, x.rank(), "axes")?;
        kept[a] = 1;
    }
    // The statistics have the kept shape; walking x's shape with them as the broadcast
    // input gives, for every run of x, where its statistics are.
    let layout = Layout::new(x.shape, [&kept[..]])
        .map_err(|_| ctx.compute_error("axes do not fit the input"))?;
    fn mvn<T: Float>(layout: &Layout<1>, groups: usize, x: &[T], y: &mut [T]) {
        let count = (x.len() / groups.max(1)).max(1) as f64;
        let mut mean = vec![0f64; groups];
        let each = |f: &mut dyn FnMut(usize, usize)| {
            layout.for_each_run(0, layout.len(), |r| {
                for j in 0..r.len {
                    f(r.out + j, r.at[0] + j * r.step[0]);
                }
            })
        };
        each(&mut |k, g| mean[g] += x[k].to_r().to_f64());
        mean.iter_mut().for_each(|m| *m /= count);
        let mut var = vec![0f64; groups];
        each(&mut |k, g| {
            let d = x[k].to_r().to_f64() - mean[g];
            var[g] += d * d;
        });
        let inv: Vec<f64> = var
            .iter()
            .map(|v| 1.0 / ((v / count).sqrt() + 1e-9))
            .collect();
        each(&mut |k, g| {
            y[k] = T::from_r(T::R::c((x[k].to_r().to_f64() - mean[g]) * inv[g]));
        });
    }
    let groups = kept.iter().product();
    dispatch!(x.dtype, T in [f32, f64, f16, bf16] =>
        mvn::<T>(&layout, groups, x.slice::<T>()?, outputs[0].slice_mut::<T>()?),
        other => return Err(ctx.input_error(0, format!("{other} is not supported"))));
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run_f32;

    #[test]
    fn hardmax_marks_the_first_maximum() {
        let x = Tensor::from_vec(&[2, 3], &[1.0f32, 3.0, 3.0, -1.0, -2.0, -5.0]);
        assert_eq!(
            run_f32("Hardmax", &[], std::slice::from_ref(&x)),
            [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
        );
        assert_eq!(
            run_f32(
                "Hardmax",
                &[("axis", Attr::Int(0))],
                std::slice::from_ref(&x)
            ),
            [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
        );
        // Opset 11, axis 0: the whole tensor is one row.
        let old = [("onnx_opset", Attr::Int(11)), ("axis", Attr::Int(0))];
        assert_eq!(
            run_f32("Hardmax", &old, &[x]),
            [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
        );
    }

    #[test]
    fn mvn_standardizes_over_axes() {
        let x = Tensor::from_vec(&[2, 2], &[1.0f32, 3.0, 10.0, 30.0]);
        let y = run_f32(
            "MeanVarianceNormalization",
            &[("axes", Attr::Ints(vec![1]))],
            &[x],
        );
        for (g, w) in y.iter().zip([-1.0, 1.0, -1.0, 1.0]) {
            assert!((g - w).abs() < 1e-6, "{y:?}");
        }
    }
}
