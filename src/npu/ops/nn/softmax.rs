//! Softmax and LogSoftmax, in both of ONNX's meanings of `axis`: before opset 13 the
//! input is coerced to 2-D at `axis` and each row is normalized; from 13 on only `axis`
//! is reduced.
//!
//! The input is seen as [outer, len, inner] with the reduced dim in the middle. Each
//! outer block is normalized on its own (in parallel when large); within a block the
//! loops run over `inner`, the contiguous dim, so they vectorize for any axis.

use rayon::prelude::*;

use super::scalar::Scalar;
use crate::dispatch;
use crate::npu::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// Elements below which blocks run on the calling thread.
const PARALLEL_ELEMS: usize = 1 << 14;

/// Softmax and LogSoftmax (the op name picks which).
pub fn softmax(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16]
        => softmax_typed::<T>(ctx, inputs, outputs),
        other => Err(ctx.compute_error(format!("computes float types, not {other}"))))
}

fn softmax_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let shape = x.shape;
    let opset = ctx.attr_int("onnx_opset", 13)?;
    let log = ctx.op == "LogSoftmax";
    let xv = x.slice::<T>()?;
    let y = outputs[0].slice_mut::<T>()?;
    if shape.is_empty() {
        // A scalar is its own (only) class.
        if let Some(v) = y.first_mut() {
            *v = T::from_f64(if log { 0.0 } else { 1.0 });
        }
        return Ok(());
    }
    let axis = ctx.axis(
        ctx.attr_int("axis", if opset >= 13 { -1 } else { 1 })?,
        shape.len(),
        "axis",
    )?;
    let outer: usize = shape[..axis].iter().product();
    let (len, inner) = if opset >= 13 {
        (shape[axis], shape[axis + 1..].iter().product())
    } else {
        (shape[axis..].iter().product(), 1)
    };
    let block = len * inner;
    if block == 0 || outer == 0 {
        return Ok(());
    }
    let run = |xs: &[T], out: &mut [T], buf: &mut Vec<f64>| {
        buf.clear();
        buf.extend(xs.iter().map(|v| v.to_f64()));
        // buf = [len rows of inner]; then max, sum per inner column: 2 * inner scratch.
        buf.resize(block + 2 * inner, 0.0);
        let (vals, stats) = buf.split_at_mut(block);
        let (max, sum) = stats.split_at_mut(inner);
        max.copy_from_slice(&vals[..inner]);
        for row in vals.chunks(inner).skip(1) {
            for (m, &v) in max.iter_mut().zip(row) {
                *m = m.max(v);
            }
        }
        sum.fill(0.0);
        for row in vals.chunks_mut(inner) {
            for ((v, &m), s) in row.iter_mut().zip(max.iter()).zip(sum.iter_mut()) {
                *v -= m;
                *s += v.exp();
            }
        }
        for (row, orow) in vals.chunks(inner).zip(out.chunks_mut(inner)) {
            for ((o, &v), &s) in orow.iter_mut().zip(row).zip(sum.iter()) {
                *o = T::from_f64(if log { v - s.ln() } else { v.exp() / s });
            }
        }
    };
    if xv.len() >= PARALLEL_ELEMS && outer > 1 {
        y.par_chunks_mut(block)
            .zip(xv.par_chunks(block))
            .for_each_init(Vec::new, |buf, (out, xs)| run(xs, out, buf));
    } else {
        let mut buf = Vec::new();
        for (out, xs) in y.chunks_mut(block).zip(xv.chunks(block)) {
            run(xs, out, &mut buf);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::npu::Attr;
    use crate::npu::ops::{OpRegistry, Tensor};

    fn run(op: &str, attrs: &[(&str, Attr)], x: Tensor) -> Vec<f32> {
        let attrs = crate::npu::ops::test_attrs(attrs);
        let out = OpRegistry::new().run_on_host(op, &attrs, &[x], 1).unwrap();
        out[0].slice::<f32>().unwrap().to_vec()
    }

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn softmax_over_a_middle_axis_and_coerced() {
        let ln2 = std::f32::consts::LN_2;
        // [1, 2, 2]: axis 1 pairs (0, ln2) and (0, 0) column-wise.
        let x = Tensor::from_vec(&[1, 2, 2], &[0.0f32, 0.0, ln2, 0.0]);
        let a = [("axis", Attr::Int(1)), ("onnx_opset", Attr::Int(13))];
        assert!(close(
            &run("Softmax", &a, x.clone()),
            &[1.0 / 3.0, 0.5, 2.0 / 3.0, 0.5]
        ));
        // Opset 11, axis 1: the 4 trailing values form one row.
        let old = [("axis", Attr::Int(1)), ("onnx_opset", Attr::Int(11))];
        assert!(close(
            &run("Softmax", &old, x.clone()),
            &[0.2, 0.2, 0.4, 0.2]
        ));
        let l = run("LogSoftmax", &old, x);
        assert!(close(
            &l,
            &[0.2f32.ln(), 0.2f32.ln(), 0.4f32.ln(), 0.2f32.ln()]
        ));
    }

    #[test]
    fn large_inputs_do_not_overflow() {
        let x = Tensor::from_vec(&[1, 2], &[1000.0f32, 1000.0]);
        assert_eq!(run("Softmax", &[], x), [0.5, 0.5]);
    }
}
