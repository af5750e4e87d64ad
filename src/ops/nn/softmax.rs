//! Softmax and LogSoftmax, in both of ONNX's meanings of `axis`: before opset 13 the
//! input is coerced to 2-D at `axis` and each row is normalized; from 13 on only `axis`
//! is reduced.
//!
//! The input is seen as [outer, len, inner] with the reduced dim in the middle. Each
//! outer block is normalized on its own (in parallel when large); within a block the
//! loops run over `inner`, the contiguous dim, so they vectorize for any axis. That
//! general path computes in f64, as the other normalizations do.
//!
//! Softmax in float32 over the contiguous last axis (`inner` 1: attention's scores, a
//! classifier's logits) has its own path, because there the general one degenerates to
//! a scalar loop with two libm `exp` calls per element in f64 (a fifth of an encoder
//! block's time at sequence 128). It computes in f32, as ONNX Runtime does, with the
//! elementwise ops' vectorized e^x ([`vmath::exp`], within 1 ulp); the max and sum keep 16
//! running lanes. Those lanes fix the order of every addition, so the result has the
//! same bits at any vector width the CPU offers (AVX-512 and AVX2 both fuse the
//! multiply-adds of e^x; only a CPU without FMA rounds them apart).
//! LogSoftmax over that axis takes the same path, `(x - max) - ln(sum)` in f32 as ONNX
//! Runtime computes it: a text recognizer's CTC head ends in one, where f64 `exp` per
//! element took five times ONNX Runtime's time. Other axes keep the f64 path.

use rayon::prelude::*;

use super::scalar::Scalar;
use crate::dispatch;
use crate::ops::DType;
use crate::ops::elementwise::vmath;
use crate::ops::linalg::min_chunks;
use crate::ops::simd::Isa;
use crate::ops::{Attrs, InferCtx, OpError, TensorMut, TensorRef};

/// The factor the input is multiplied by before it is normalized (a positive float32,
/// 1 when absent): where lowering fused the division of attention's scores by a
/// constant into their Softmax (`lower::fuse`). The multiplication is folded into the
/// subtraction of the row's max (see [`rows_any`]), so it costs no pass of its own.
pub const SCALE_ATTR: &str = "_rt2_softmax_scale";

/// `attrs`, the attributes a node of another Softmax op type (GE's SoftmaxV2, its 2020
/// Softmax) launches or computes this one with, plus the node's fused scale
/// ([`SCALE_ATTR`]) where lowering gave it one: every route to the kernel keeps it.
pub(crate) fn with_scale(ctx: &InferCtx, mut attrs: Attrs) -> Attrs {
    if let Some(s) = ctx.attrs.get(SCALE_ATTR) {
        attrs.insert(SCALE_ATTR.to_string(), s.clone());
    }
    attrs
}

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
    let scale = ctx.attr_float(SCALE_ATTR, 1.0)?;
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(ctx.attr_error(SCALE_ATTR, format!("is {scale}, not a positive number")));
    }
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
    if inner == 1
        && let (Some(xs), Some(ys)) = (cast_f32(xv), cast_f32_mut(y))
    {
        let rows = |xs: &[f32], ys: &mut [f32]| match log {
            true => rows_f32::<true>(xs, ys, len, scale),
            false => rows_f32::<false>(xs, ys, len, scale),
        };
        if xs.len() >= PARALLEL_ELEMS && outer > 1 {
            let n = min_chunks(len);
            ys.par_chunks_mut(n * len)
                .zip(xs.par_chunks(n * len))
                .for_each(|(ys, xs)| rows(xs, ys));
        } else {
            rows(xs, ys);
        }
        return Ok(());
    }
    let run = |xs: &[T], out: &mut [T], buf: &mut Vec<f64>| {
        buf.clear();
        buf.extend(xs.iter().map(|v| v.to_f64() * f64::from(scale)));
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

/// `xs` as f32 when `T` is f32.
fn cast_f32<T: Scalar>(xs: &[T]) -> Option<&[f32]> {
    (T::DTYPE == DType::F32).then(|| bytemuck::cast_slice(xs))
}

/// `ys` as f32 when `T` is f32.
fn cast_f32_mut<T: Scalar>(ys: &mut [T]) -> Option<&mut [f32]> {
    (T::DTYPE == DType::F32).then(|| bytemuck::cast_slice_mut(ys))
}

/// Softmax of each `len`-long row of `xs` into `ys`, with the widest vectors this CPU
/// has.
fn rows_f32<const LOG: bool>(xs: &[f32], ys: &mut [f32], len: usize, scale: f32) {
    // Each branch runs the version compiled for the set `Isa::detect` found.
    #[cfg(target_arch = "x86_64")]
    match Isa::detect() {
        // SAFETY: `Isa::detect` found AVX-512F (with AVX2 and FMA) on this CPU, all
        // `rows_avx512` needs.
        Some(Isa::Avx512) => unsafe { rows_avx512::<LOG>(xs, ys, len, scale) },
        // SAFETY: `Isa::detect` found AVX2 and FMA on this CPU, all `rows_avx2` needs.
        Some(Isa::Avx2) => unsafe { rows_avx2::<LOG>(xs, ys, len, scale) },
        None => rows_any::<LOG, false>(xs, ys, len, scale),
    }
    #[cfg(not(target_arch = "x86_64"))]
    rows_any::<LOG, { cfg!(target_arch = "aarch64") }>(xs, ys, len, scale)
}

/// [`rows_any`] compiled for AVX-512F.
///
/// # Safety
/// This CPU has AVX-512F, AVX2 and FMA. (The body is safe code; only the instructions
/// it compiles to need the features.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn rows_avx512<const LOG: bool>(xs: &[f32], ys: &mut [f32], len: usize, scale: f32) {
    rows_any::<LOG, true>(xs, ys, len, scale)
}

/// [`rows_any`] compiled for AVX2.
///
/// # Safety
/// This CPU has AVX2 and FMA. (The body is safe code; only the instructions it compiles
/// to need the features.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2<const LOG: bool>(xs: &[f32], ys: &mut [f32], len: usize, scale: f32) {
    rows_any::<LOG, true>(xs, ys, len, scale)
}

/// Running lanes of the max and the sum: wide enough for AVX-512, and fixed, so the
/// order of the additions does not depend on the vector width.
const LANES: usize = 16;

/// The lanes folded in halves (lane i with lane i + 8, then i + 4, ...) with `f`: a
/// fixed order, which the vectorizer turns into four shuffles and operations instead of
/// a chain of sixteen dependent scalar ones (the row's latency: a 128-wide attention row
/// spent a third of its time here).
#[inline(always)]
fn fold(mut lanes: [f32; LANES], f: impl Fn(f32, f32) -> f32) -> f32 {
    let mut w = LANES / 2;
    while w > 0 {
        for i in 0..w {
            lanes[i] = f(lanes[i], lanes[i + w]);
        }
        w /= 2;
    }
    lanes[0]
}

/// Softmax (`LOG` false) or LogSoftmax of each `len`-long row of `scale * xs` into `ys`
/// (`scale` positive: the division by a constant that attention applies to its scores
/// before the Softmax, fused at lowering; 1 otherwise). As `scale` is positive, the
/// row's largest scaled value is its largest value scaled (rounding is monotonic), so
/// the max is taken of `xs` itself and each term is `exp(x * scale - max)` with one
/// rounding (an FMA; with `scale` 1 exactly `x - max`). LogSoftmax is
/// `(x * scale - max) - ln(sum)`, the sum of the same terms (written to `ys` on the way,
/// then overwritten). `FMA`: e^x fuses its multiply-adds (see [`vmath::exp`]).
#[inline(always)]
fn rows_any<const LOG: bool, const FMA: bool>(xs: &[f32], ys: &mut [f32], len: usize, scale: f32) {
    let shift = |v: f32, max: f32| {
        if FMA {
            v.mul_add(scale, -max)
        } else {
            v * scale - max
        }
    };
    for (x, y) in xs.chunks_exact(len).zip(ys.chunks_exact_mut(len)) {
        // The max: NaN inputs do not take it (they come out NaN below anyway).
        let mut lanes = [f32::NEG_INFINITY; LANES];
        let (body, tail) = x.split_at(len - len % LANES);
        for c in body.chunks_exact(LANES) {
            for (m, &v) in lanes.iter_mut().zip(c) {
                *m = if v > *m { v } else { *m };
            }
        }
        let mut max = tail
            .iter()
            .fold(fold(lanes, |a, b| if b > a { b } else { a }), |m, &v| {
                if v > m { v } else { m }
            });
        if max == f32::NEG_INFINITY {
            // Every input is -inf (or NaN): NumPy's exp(x - max) is NaN throughout.
            max = 0.0;
            if x.iter().all(|&v| v == f32::NEG_INFINITY) {
                y.fill(f32::NAN);
                continue;
            }
        }
        let max = max * scale;
        // exp(x * scale - max) into y, summed in LANES running sums.
        let mut sums = [0.0f32; LANES];
        let (ybody, ytail) = y.split_at_mut(len - len % LANES);
        for (c, o) in body.chunks_exact(LANES).zip(ybody.chunks_exact_mut(LANES)) {
            for ((s, o), &v) in sums.iter_mut().zip(o).zip(c) {
                *o = vmath::exp::<FMA>(shift(v, max));
                *s += *o;
            }
        }
        let mut sum = fold(sums, |a, b| a + b);
        for (o, &v) in ytail.iter_mut().zip(tail) {
            *o = vmath::exp::<FMA>(shift(v, max));
            sum += *o;
        }
        if LOG {
            let ln = sum.ln();
            for (o, &v) in y.iter_mut().zip(x) {
                *o = shift(v, max) - ln;
            }
            continue;
        }
        let inv = 1.0 / sum;
        for o in y.iter_mut() {
            *o *= inv;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::{run_f32, run1};

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
            &run_f32("Softmax", &a, std::slice::from_ref(&x)),
            &[1.0 / 3.0, 0.5, 2.0 / 3.0, 0.5]
        ));
        // Opset 11, axis 1: the 4 trailing values form one row.
        let old = [("axis", Attr::Int(1)), ("onnx_opset", Attr::Int(11))];
        assert!(close(
            &run_f32("Softmax", &old, std::slice::from_ref(&x)),
            &[0.2, 0.2, 0.4, 0.2]
        ));
        let l = run_f32("LogSoftmax", &old, &[x]);
        assert!(close(
            &l,
            &[0.2f32.ln(), 0.2f32.ln(), 0.4f32.ln(), 0.2f32.ln()]
        ));
    }

    /// A fused scale (`SCALE_ATTR`) multiplies the input: by a power of two, whose
    /// products are exact, the bits of Softmax and LogSoftmax of the product, on the
    /// float32 path and the f64 one (a middle axis); a scale that is not positive and
    /// finite is an error naming it.
    #[test]
    fn a_fused_scale_multiplies_the_input() {
        let x: Vec<f32> = (0..3 * 37)
            .map(|i| ((i * 13) % 29) as f32 * 1.7 - 20.0)
            .collect();
        let halved: Vec<f32> = x.iter().map(|v| v * 0.25).collect();
        for (op, axis) in [("Softmax", -1), ("LogSoftmax", -1), ("Softmax", 0)] {
            let plain = [("axis", Attr::Int(axis)), ("onnx_opset", Attr::Int(13))];
            let scaled = [
                ("axis", Attr::Int(axis)),
                ("onnx_opset", Attr::Int(13)),
                (super::SCALE_ATTR, Attr::Float(0.25)),
            ];
            let got = run_f32(op, &scaled, &[Tensor::from_vec(&[3, 37], &x)]);
            let want = run_f32(op, &plain, &[Tensor::from_vec(&[3, 37], &halved)]);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{op} over axis {axis}");
        }
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let a = [(super::SCALE_ATTR, Attr::Float(bad))];
            let x = Tensor::from_vec(&[2], &[1.0f32, 2.0]);
            let err = crate::ops::testing::try_run("Softmax", &a, &[x], 1).expect_err("bad");
            assert!(err.to_string().contains(super::SCALE_ATTR), "{err}");
        }
    }

    #[test]
    fn large_inputs_do_not_overflow() {
        let x = Tensor::from_vec(&[1, 2], &[1000.0f32, 1000.0]);
        assert_eq!(run_f32("Softmax", &[], &[x]), [0.5, 0.5]);
    }

    /// The f32 Softmax and LogSoftmax paths against the f64 one (float64 input, same values), over
    /// rows shorter and longer than the running lanes, large logits, a row of -inf and a
    /// NaN; and each vector width this CPU has gives the same bits.
    #[test]
    fn float32_rows_match_the_f64_path_and_every_width() {
        for len in [1usize, 5, 16, 37, 128] {
            let rows = 3;
            let mut x: Vec<f32> = (0..rows * len)
                .map(|i| ((i * 7919) % 101) as f32 * 0.37 - 18.0)
                .collect();
            x[len] = 1.0e4; // row 1 holds one huge logit
            for op in ["Softmax", "LogSoftmax"] {
                let log = op == "LogSoftmax";
                let a = [("axis", Attr::Int(-1)), ("onnx_opset", Attr::Int(13))];
                let got = run_f32(op, &a, &[Tensor::from_vec(&[rows, len], &x)]);
                let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                let want = run1(op, &a, &[Tensor::from_vec(&[rows, len], &x64)]);
                let want = want.slice::<f64>().unwrap();
                for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
                    let tol = 1e-6 * (1.0 + w.abs());
                    assert!(
                        (g as f64 - w).abs() <= tol,
                        "{op} len {len} [{i}]: {g} vs {w}"
                    );
                }
                let mut any = vec![0.0f32; x.len()];
                let mut best = vec![0.0f32; x.len()];
                // The portable loop, fused as `rows_f32` fuses on this CPU.
                let fused = cfg!(target_arch = "aarch64")
                    || cfg!(target_arch = "x86_64") && crate::ops::simd::Isa::detect().is_some();
                match (log, fused) {
                    (true, true) => super::rows_any::<true, true>(&x, &mut any, len, 1.0),
                    (true, false) => super::rows_any::<true, false>(&x, &mut any, len, 1.0),
                    (false, true) => super::rows_any::<false, true>(&x, &mut any, len, 1.0),
                    (false, false) => super::rows_any::<false, false>(&x, &mut any, len, 1.0),
                }
                if log {
                    super::rows_f32::<true>(&x, &mut best, len, 1.0);
                } else {
                    super::rows_f32::<false>(&x, &mut best, len, 1.0);
                }
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&any), bits(&best), "{op} len {len}");
                assert_eq!(bits(&got), bits(&best), "{op} len {len}");
            }
        }
        let x = [f32::NEG_INFINITY, f32::NEG_INFINITY, 1.0, f32::NAN];
        let out = run_f32("Softmax", &[], &[Tensor::from_vec(&[2, 2], &x)]);
        assert!(out.iter().all(|v| v.is_nan()), "{out:?}");
    }
}
