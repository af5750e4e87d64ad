//! ConvTranspose: one product of the weights by the input per image and group (taps of
//! every output channel by input positions), laid into the output by [`col2im`], or, where
//! the taps tile the output (a decoder's 2x2 upsampling of stride 2), written once per
//! element by [`tile_taps`].

use std::ops::Add;

use super::conv::{PARALLEL_ELEMS, bias_values, channels, check_weights, init_bias, over_blocks};
use super::gemm::{Mat, gemm};
use super::scalar::{Scalar, widened};
use super::scratch::with_scratch;
use super::window::Window;
use crate::dispatch;
use crate::ops::{DType, InferCtx, OpError, TensorMut, TensorRef};

/// ConvTranspose: X `[N, C, D...]`, W `[C, M/group, K...]`, optional B `[M]` -> Y
/// `[N, M, D'...]`.
pub fn conv_transpose(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    match inputs[0].dtype {
        DType::F16 => widened::<half::f16>(inputs, outputs, |i, o| {
            conv_transpose_typed::<f32>(ctx, i, o)
        }),
        DType::Bf16 => widened::<half::bf16>(inputs, outputs, |i, o| {
            conv_transpose_typed::<f32>(ctx, i, o)
        }),
        _ => dispatch!(inputs[0].dtype, T in [f32, f64]
            => conv_transpose_typed::<T>(ctx, inputs, outputs),
            other => Err(ctx.compute_error(format!("computes float types, not {other}")))),
    }
}

/// ConvTranspose's geometry: the output's padding comes from `pads`, or, with
/// `output_shape` or SAME auto-padding, from the total padding that yields the output
/// size (split as ONNX says: SAME_UPPER puts the odd unit at the end, otherwise at the
/// beginning).
fn transpose_window(
    ctx: &InferCtx,
    x: &[usize],
    k: &[usize],
    y: &[usize],
) -> Result<Window, OpError> {
    let n = x.len();
    let stride = super::window::positive(ctx, "strides", n)?;
    let dilation = super::window::positive(ctx, "dilations", n)?;
    let out_pad = ctx.attr_ints_or("output_padding", 0, n)?;
    let pads = ctx.attr_ints_or("pads", 0, 2 * n)?;
    if out_pad.len() != n || pads.len() != 2 * n || n > super::window::MAX_SPATIAL {
        return Err(ctx.attr_error(
            "pads/output_padding",
            format!("do not fit {n} spatial dims"),
        ));
    }
    let auto_pad = ctx.attr_str("auto_pad", "NOTSET")?;
    let derived = ctx.attr_ints("output_shape")?.is_some() || auto_pad.starts_with("SAME");
    let mut begin = vec![0isize; n];
    for i in 0..n {
        begin[i] = if derived {
            let full = (stride[i] * (x[i].max(1) - 1)) as isize
                + out_pad[i] as isize
                + ((k[i] - 1) * dilation[i] + 1) as isize;
            let total = full - y[i] as isize;
            if auto_pad == "SAME_UPPER" {
                total.div_euclid(2)
            } else {
                total - total.div_euclid(2)
            }
        } else {
            pads[i] as isize
        };
    }
    use super::window::promote;
    Ok(Window {
        input: promote(x, 1),
        output: promote(y, 1),
        kernel: promote(k, 1),
        stride: promote(&stride, 1),
        dilation: promote(&dilation, 1),
        pad_begin: promote(&begin, 0),
        pad_end: [0; 3],
    })
}

fn conv_transpose_typed<T: Scalar + Add<Output = T>>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let y_shape = outputs[0].shape.to_vec();
    let (batch, c, m, group) = channels(ctx, x, &y_shape, w)?;
    let (cg, mg) = (c / group, m / group);
    check_weights(ctx, w, [c, mg], c, m, group)?;
    let win = transpose_window(ctx, &x.shape[2..], &w.shape[2..], &y_shape[2..])?;
    let (xv, wv) = (x.slice::<T>()?, w.slice::<T>()?);
    let y = outputs[0].slice_mut::<T>()?;
    let (ilen, olen, klen) = (win.input_len(), win.output_len(), win.kernel_len());
    // Taps that tile the output write each element once, with its bias: nothing to
    // initialize first.
    let tiles = tiles_output(&win);
    let bias = bias_values::<T>(ctx, inputs.get(2), m)?;
    if !tiles {
        init_bias(ctx, inputs.get(2), y, m, olen)?;
    }
    if y.is_empty() || ilen == 0 {
        return Ok(());
    }
    let rows = mg * klen;
    // The product of each group, in this thread's scratch: the gemm writes all of it
    // (beta 0), so it is neither allocated nor zeroed per launch (1 MB for a UNet's
    // 128 -> 64 channel 2x2 upsampling of a 32 x 32 map).
    with_scratch::<T, _>(rows * ilen, |col| {
        for n in 0..batch {
            for g in 0..group {
                let xg = Mat::row_major(&xv[(n * c + g * cg) * ilen..][..cg * ilen], cg, ilen);
                let wg = Mat::row_major(&wv[g * cg * rows..][..cg * rows], cg, rows).t();
                gemm(1.0, wg, xg, 0.0, col, ilen);
                let out = &mut y[(n * m + g * mg) * olen..][..mg * olen];
                if tiles {
                    let b = bias.map(|b| &b[g * mg..][..mg]);
                    tile_taps(col, &win, b, out);
                } else {
                    col2im(col, &win, out);
                }
            }
        }
    });
    Ok(())
}

/// Whether the taps of a transposed convolution tile its output: kernel and stride
/// equal, no dilation (beyond 1) or padding, and the output the input times the stride
/// (a decoder's 2x2 upsampling of stride 2). Each output element is then one tap's
/// product of one input position.
fn tiles_output(win: &Window) -> bool {
    (0..3).all(|d| {
        win.kernel[d] == win.stride[d]
            && (win.dilation[d] == 1 || win.kernel[d] == 1)
            && win.pad_begin[d] == 0
            && win.output[d] == win.input[d] * win.stride[d]
    })
}

/// [`col2im`] where the taps tile the output ([`tiles_output`]): each output element is
/// its channel's bias (zero without one) plus its one tap's product, written once, row
/// by row: output row `y * kh + ky` interleaves the `kw` taps of row `ky` of input row
/// `y`. The same sum, rounded once, the accumulating form gives (the bias, then the one
/// product, there through f64, which rounds a float32 sum the same).
fn tile_taps<T: Scalar + Add<Output = T>>(
    col: &[T],
    win: &Window,
    bias: Option<&[T]>,
    out: &mut [T],
) {
    let [_, ih, iw] = win.input;
    let [_, oh, ow] = win.output;
    let [kd, kh, kw] = win.kernel;
    let (ilen, olen, klen) = (win.input_len(), win.output_len(), win.kernel_len());
    let channel = |ch: usize, plane: &mut [T]| {
        let b = bias.map_or(T::from_f64(0.0), |b| b[ch]);
        let taps = &col[ch * klen * ilen..][..klen * ilen];
        for (zo, slab) in plane.chunks_exact_mut(oh * ow).enumerate() {
            let (z, a) = (zo / kd, zo % kd);
            for (yo, row) in slab.chunks_exact_mut(ow).enumerate() {
                let (yy, ky) = (yo / kh, yo % kh);
                let tap0 = (a * kh + ky) * kw;
                let src = |kx: usize| &taps[(tap0 + kx) * ilen + (z * ih + yy) * iw..][..iw];
                if kw == 2 {
                    interleave2(row, src(0), src(1), b);
                } else {
                    for (xx, d) in row.chunks_exact_mut(kw).enumerate() {
                        for (kx, v) in d.iter_mut().enumerate() {
                            *v = b + src(kx)[xx];
                        }
                    }
                }
            }
        }
    };
    over_blocks(out, olen, out.len() >= PARALLEL_ELEMS, channel);
}

/// `row[2x] = b + even[x]`, `row[2x + 1] = b + odd[x]`: with the tap count a constant
/// the compiler interleaves whole vectors.
fn interleave2<T: Copy + Add<Output = T>>(row: &mut [T], even: &[T], odd: &[T], b: T) {
    for ((d, &e), &o) in row.chunks_exact_mut(2).zip(even).zip(odd) {
        d[0] = b + e;
        d[1] = b + o;
    }
}

/// Adds `col` ([channels * taps, input positions]) into the output planes: input
/// position `i` under tap `k` lands on `i * stride + k * dilation - pad_begin`. Channels
/// are independent, so they run in parallel; within one, the taps run in order so each
/// output element's sum is formed in the same order on every run.
fn col2im<T: Scalar>(col: &[T], win: &Window, out: &mut [T]) {
    let [_, ih, iw] = win.input;
    let [_, oh, ow] = win.output;
    let [_, kh, kw] = win.kernel;
    let (ilen, olen, klen) = (win.input_len(), win.output_len(), win.kernel_len());
    // The transpose maps input to output: the window seen from the output side, whose
    // valid range under a tap is the inputs i with 0 <= i * stride + offset < output.
    let seen = Window {
        input: win.output,
        output: win.input,
        ..win.clone()
    };
    let reach = |d: usize, k: usize| seen.valid_range(d, k);
    let channel = |ch: usize, plane: &mut [T]| {
        for tap in 0..klen {
            let (a, b, e) = (tap / (kh * kw), (tap / kw) % kh, tap % kw);
            let src = &col[(ch * klen + tap) * ilen..][..ilen];
            let (d_lo, d_hi, d_off) = reach(0, a);
            let (h_lo, h_hi, h_off) = reach(1, b);
            let (w_lo, w_hi, w_off) = reach(2, e);
            for z in d_lo..d_hi {
                let zo = ((z * win.stride[0]) as isize + d_off) as usize;
                for yy in h_lo..h_hi {
                    let yo = ((yy * win.stride[1]) as isize + h_off) as usize;
                    let s = &src[(z * ih + yy) * iw..][..iw];
                    let dst = &mut plane[(zo * oh + yo) * ow..][..ow];
                    for (xx, v) in s.iter().enumerate().take(w_hi).skip(w_lo) {
                        let xo = ((xx * win.stride[2]) as isize + w_off) as usize;
                        dst[xo] = T::from_f64(dst[xo].to_f64() + v.to_f64());
                    }
                }
            }
        }
    };
    over_blocks(out, olen, out.len() * klen >= PARALLEL_ELEMS, channel);
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run_f32_with_shape;

    /// Where the taps tile the output (kernel = stride, no padding), each element written
    /// once with its bias has the bits the accumulating `col2im` gives over the bias;
    /// the op itself computes the naive sums; an output padded or a tap dilated does not
    /// tile. Output planes start as NaN, so an element left unwritten shows.
    #[test]
    fn taps_that_tile_the_output_give_the_accumulating_bits() {
        use super::super::conv::fill_bias;
        use super::super::window::Window;
        use super::{col2im, tile_taps, tiles_output};
        use crate::ops::testing::seeded;
        /// Input dims, kernel (= stride), input channels, output channels, bias.
        type Case = (&'static [usize], &'static [usize], usize, usize, bool);
        let cases: [Case; 4] = [
            (&[5, 7], &[2, 2], 3, 5, true),
            (&[4, 3], &[3, 3], 2, 4, false),
            (&[9], &[2], 4, 3, true),
            (&[2, 3, 2], &[2, 2, 2], 2, 3, true),
        ];
        for (dims, k, c, m, with_bias) in cases {
            let promote = super::super::window::promote;
            let out: Vec<usize> = dims.iter().zip(k).map(|(d, k)| d * k).collect();
            let win = Window {
                input: promote(dims, 1),
                output: promote(&out, 1),
                kernel: promote(k, 1),
                stride: promote(k, 1),
                dilation: [1; 3],
                pad_begin: [0; 3],
                pad_end: [0; 3],
            };
            assert!(tiles_output(&win));
            let (ilen, olen, klen) = (win.input_len(), win.output_len(), win.kernel_len());
            let x = seeded(c * ilen, 1);
            let w = seeded(c * m * klen, 2);
            let b = seeded(m, 3);
            let bias = with_bias.then_some(&b[..]);
            let rows = m * klen;
            let mut col = vec![0.0f32; rows * ilen];
            let (xm, wm) = (
                super::Mat::row_major(&x, c, ilen),
                super::Mat::row_major(&w, c, rows).t(),
            );
            super::gemm(1.0, wm, xm, 0.0, &mut col, ilen);
            let mut general = vec![0.0f32; m * olen];
            fill_bias(bias.unwrap_or(&[0.0]), &mut general, olen);
            col2im(&col, &win, &mut general);
            let mut tiled = vec![f32::NAN; m * olen];
            tile_taps(&col, &win, bias, &mut tiled);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&tiled), bits(&general), "{dims:?} by {k:?}");
            // Through the op: every element the bias plus the one tap's naive sum.
            let mut shape = vec![1, c];
            shape.extend(dims);
            let mut wshape = vec![c, m];
            wshape.extend(k);
            let kernel: Vec<i64> = k.iter().map(|&v| v as i64).collect();
            let attrs = [
                ("kernel_shape", Attr::Ints(kernel.clone())),
                ("strides", Attr::Ints(kernel)),
            ];
            let mut ins = vec![Tensor::from_vec(&shape, &x), Tensor::from_vec(&wshape, &w)];
            if with_bias {
                ins.push(Tensor::from_vec(&[m], &b));
            }
            let (_, y) = run_f32_with_shape("ConvTranspose", &attrs, &ins);
            let [_, oh, ow] = win.output;
            let [kd, kh, kw] = win.kernel;
            let [_, ih, iw] = win.input;
            let naive: Vec<f32> = (0..m * olen)
                .map(|e| {
                    let (co, o) = (e / olen, e % olen);
                    let (z, yy, xx) = (o / (oh * ow), o / ow % oh, o % ow);
                    let i = ((z / kd) * ih + yy / kh) * iw + xx / kw;
                    let tap = ((z % kd) * kh + yy % kh) * kw + xx % kw;
                    let sum: f64 = (0..c)
                        .map(|ci| x[ci * ilen + i] as f64 * w[(ci * m + co) * klen + tap] as f64)
                        .sum();
                    (sum + bias.map_or(0.0, |b| b[co] as f64)) as f32
                })
                .collect();
            crate::ops::assert_close(&y, &naive);
        }
        // Padding, an output padding or a dilated tap overlap or crop: not tiled.
        let base = Window {
            input: [1, 4, 4],
            output: [1, 8, 8],
            kernel: [1, 2, 2],
            stride: [1, 2, 2],
            dilation: [1; 3],
            pad_begin: [0; 3],
            pad_end: [0; 3],
        };
        for w in [
            Window {
                pad_begin: [0, 1, 0],
                ..base.clone()
            },
            Window {
                output: [1, 9, 8],
                ..base.clone()
            },
            Window {
                dilation: [1, 2, 1],
                ..base.clone()
            },
            Window {
                stride: [1, 1, 2],
                ..base
            },
        ] {
            assert!(!tiles_output(&w));
        }
    }
}
