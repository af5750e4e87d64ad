//! Pools: MaxPool (with its Indices output), AveragePool, LpPool, GlobalAveragePool and
//! GlobalMaxPool, over 1-D to 3-D windows.
//!
//! Each (image, channel) plane is independent, so large inputs run planes in parallel.
//! Within a plane, every output position walks its window's taps through [`taps`], which
//! reports each tap's input position or that it lies in the padding; the ops differ only
//! in how they fold the taps.

use rayon::prelude::*;

use super::scalar::Scalar;
use super::window::Window;
use crate::dispatch;
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// Elements below which the planes run on the calling thread.
const PARALLEL_ELEMS: usize = 1 << 14;

/// Where one tap of a window falls.
#[derive(Clone, Copy)]
enum Tap {
    /// Inside the input, at these (promoted 3-D) coordinates.
    Input([usize; 3]),
    /// In the explicit padding (counts for `count_include_pad`).
    Pad,
    /// Past the padding (only ceil mode's last window reaches there).
    Beyond,
}

/// Calls `f` for each tap of the window at output position `o`.
#[inline]
fn taps(win: &Window, o: [usize; 3], mut f: impl FnMut(Tap)) {
    let pos = |d: usize, k: usize| -> isize {
        (o[d] * win.stride[d] + k * win.dilation[d]) as isize - win.pad_begin[d]
    };
    let class = |d: usize, p: isize| -> u8 {
        if p >= 0 && (p as usize) < win.input[d] {
            0
        } else if p >= -win.pad_begin[d] && p < win.input[d] as isize + win.pad_end[d] {
            1
        } else {
            2
        }
    };
    for a in 0..win.kernel[0] {
        let z = pos(0, a);
        let cz = class(0, z);
        for b in 0..win.kernel[1] {
            let y = pos(1, b);
            let cy = class(1, y).max(cz);
            for e in 0..win.kernel[2] {
                let x = pos(2, e);
                f(match class(2, x).max(cy) {
                    0 => Tap::Input([z as usize, y as usize, x as usize]),
                    1 => Tap::Pad,
                    _ => Tap::Beyond,
                });
            }
        }
    }
}

/// Runs `plane(index, input plane, output plane)` over every (image, channel) plane.
fn planes<T: Scalar, F>(x: &[T], ilen: usize, y: &mut [T], olen: usize, plane: F)
where
    F: Fn(usize, &[T], &mut [T]) + Sync,
{
    if olen == 0 || ilen == 0 {
        return;
    }
    if x.len() >= PARALLEL_ELEMS {
        y.par_chunks_mut(olen)
            .enumerate()
            .for_each(|(i, out)| plane(i, &x[i * ilen..][..ilen], out));
    } else {
        for (i, out) in y.chunks_mut(olen).enumerate() {
            plane(i, &x[i * ilen..][..ilen], out);
        }
    }
}

/// The pool's window over input 0, sized by output 0.
fn pool_window(ctx: &InferCtx, x: &TensorRef, y: &TensorMut) -> Result<Window, OpError> {
    let kernel: Vec<usize> = ctx
        .attr_ints("kernel_shape")?
        .ok_or_else(|| ctx.attr_error("kernel_shape", "is missing"))?
        .iter()
        .map(|&k| usize::try_from(k).ok().filter(|&k| k > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| ctx.attr_error("kernel_shape", "must be positive"))?;
    if x.rank() < 3 || y.rank() != x.rank() {
        return Err(ctx.input_error(0, format!("is {:?}; a pool needs [N, C, D...]", x.shape)));
    }
    Window::new(ctx, &x.shape[2..], &kernel, &y.shape[2..])
}

fn each_output(win: &Window, mut f: impl FnMut(usize, [usize; 3])) {
    let [od, oh, ow] = win.output;
    let mut i = 0;
    for z in 0..od {
        for y in 0..oh {
            for x in 0..ow {
                f(i, [z, y, x]);
                i += 1;
            }
        }
    }
}

/// MaxPool; Indices (output 1) are flat positions in X, row-major, or with
/// `storage_order` 1 column-major within each plane.
pub fn max_pool(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16, i8, u8]
        => max_pool_typed::<T>(ctx, inputs, outputs),
        other => Err(ctx.compute_error(format!("computes float, int8 and uint8 types, not {other}"))))
}

/// The taps `k` in `0..kernel` of a window starting at `start` (stride applied, padding
/// subtracted) whose positions `start + k * dilation` fall inside `0..n`: one range, as
/// the positions only grow with `k`.
#[inline]
fn inside(start: isize, dilation: usize, kernel: usize, n: usize) -> std::ops::Range<usize> {
    let dil = dilation as isize;
    let lo = if start >= 0 {
        0
    } else {
        (-start + dil - 1) / dil
    };
    let hi = if start >= n as isize {
        0
    } else {
        (n as isize - 1 - start) / dil + 1
    };
    let (lo, hi) = (lo as usize, (hi as usize).min(kernel));
    lo..hi.max(lo)
}

/// MaxPool's values alone (no Indices asked for): per output, the taps inside the input
/// in window order, the first kept and replaced only by a greater value, exactly as the
/// general walk ([`max_pool_typed`] with indices) picks them, so NaN handling and ties
/// give the same bits. The valid taps of each dim are one range computed per output
/// coordinate ([`inside`]), so the inner loop is a plain scan of input rows with no
/// per-tap classification, callback or index bookkeeping, and nothing is allocated.
fn max_pool_values<T: Scalar>(win: &Window, x: &[T], y: &mut [T]) {
    if win.input[0] == 1 && win.kernel[0] == 1 && win.output[0] == 1 && win.pad_begin[0] == 0 {
        return max_pool_rows(win, x, y);
    }
    let [_, h, w] = win.input;
    let [od, oh, ow] = win.output;
    let start = |d: usize, o: usize| (o * win.stride[d]) as isize - win.pad_begin[d];
    let (ilen, olen) = (win.input_len(), win.output_len());
    let empty = T::from_f64(f64::NEG_INFINITY);
    planes(x, ilen, y, olen, |_, xs, out| {
        let mut i = 0;
        for oz in 0..od {
            let sz = start(0, oz);
            let rz = inside(sz, win.dilation[0], win.kernel[0], win.input[0]);
            for oy in 0..oh {
                let sy = start(1, oy);
                let ry = inside(sy, win.dilation[1], win.kernel[1], h);
                for ox in 0..ow {
                    let sx = start(2, ox);
                    let rx = inside(sx, win.dilation[2], win.kernel[2], w);
                    let mut best: Option<T> = None;
                    for a in rz.clone() {
                        let z = (sz + (a * win.dilation[0]) as isize) as usize;
                        for b in ry.clone() {
                            let yy = (sy + (b * win.dilation[1]) as isize) as usize;
                            let row = &xs[(z * h + yy) * w..][..w];
                            for e in rx.clone() {
                                let v = row[(sx + (e * win.dilation[2]) as isize) as usize];
                                if best.is_none_or(|b| v > b) {
                                    best = Some(v);
                                }
                            }
                        }
                    }
                    out[i] = best.unwrap_or(empty);
                    i += 1;
                }
            }
        }
    });
}

/// [`max_pool_values`] of a 2-D window (the pools of CNNs), row by row: each output
/// row keeps one running maximum per output column, and each tap of the window updates
/// the whole row at once, `acc[ox] = max(acc[ox], x[ox * stride + offset])`. The
/// columns whose window lies inside the row (all but a few at the edges) run that loop
/// with no bounds logic, which the compiler vectorizes; the edge columns take the
/// per-output walk. Taps are visited in window order and each running maximum starts
/// at its first valid tap and is replaced only by a greater value, as in the general
/// walk, so the result has the same bits (NaN and ties included). Per output the old
/// walk spent a bounds test, an `Option` and a branch on every tap: SqueezeNet's three
/// MaxPools were half its time.
fn max_pool_rows<T: Scalar>(win: &Window, x: &[T], y: &mut [T]) {
    let [_, h, w] = win.input;
    let ow = win.output[2];
    let ([_, kh, kw], [_, sh, sw], [_, dh, dw]) = (win.kernel, win.stride, win.dilation);
    let (ph, pw) = (win.pad_begin[1], win.pad_begin[2]);
    // Output columns ox in lo..hi read taps ox*sw - pw + kx*dw all inside 0..w.
    let reach = ((kw - 1) * dw) as isize;
    let lo = ((pw + sw as isize - 1) / sw as isize).max(0) as usize;
    let hi = if w as isize - 1 - reach + pw < 0 {
        0
    } else {
        (((w as isize - 1 - reach + pw) / sw as isize) + 1) as usize
    };
    let (lo, hi) = (lo.min(ow), hi.min(ow).max(lo.min(ow)));
    let empty = T::from_f64(f64::NEG_INFINITY);
    planes(x, win.input_len(), y, win.output_len(), |_, xs, out| {
        for (oy, acc) in out.chunks_exact_mut(ow).enumerate() {
            let sy = (oy * sh) as isize - ph;
            let ry = inside(sy, dh, kh, h);
            let mut first = true;
            for b in ry {
                let row = &xs[(sy + (b * dh) as isize) as usize * w..][..w];
                for kx in 0..kw {
                    // The tap of output column lo, then every `sw`-th element after it.
                    let start = lo * sw + kx * dw - pw as usize;
                    let n = hi - lo;
                    if n == 0 {
                        break;
                    }
                    let src = &row[start..start + (n - 1) * sw + 1];
                    let acc = &mut acc[lo..hi];
                    match sw {
                        1 => running_max::<T, 1>(acc, src, first),
                        2 => running_max::<T, 2>(acc, src, first),
                        _ => {
                            for (a, c) in acc.iter_mut().zip(src.chunks(sw)) {
                                *a = if first || c[0] > *a { c[0] } else { *a };
                            }
                        }
                    }
                    first = false;
                }
            }
            if first {
                // No row of the window is inside the input.
                acc[lo..hi].fill(empty);
            }
            // The edge columns, whose windows leave the row.
            for ox in (0..lo).chain(hi..ow) {
                let sx = (ox * sw) as isize - pw;
                let rx = inside(sx, dw, kw, w);
                let mut best: Option<T> = None;
                for b in inside(sy, dh, kh, h) {
                    let row = &xs[(sy + (b * dh) as isize) as usize * w..][..w];
                    for e in rx.clone() {
                        let v = row[(sx + (e * dw) as isize) as usize];
                        if best.is_none_or(|b| v > b) {
                            best = Some(v);
                        }
                    }
                }
                acc[ox] = best.unwrap_or(empty);
            }
        }
    });
}

/// `acc[i] = src[i * S]` (`first`), else `acc[i] = src[i * S]` where that is greater:
/// one tap of a pool window over a row of outputs. The stride is a constant, so the
/// strided reads are whole chunks and the loop carries no bounds checks: it
/// vectorizes, with a de-interleave for stride 2.
#[inline]
fn running_max<T: Scalar, const S: usize>(acc: &mut [T], src: &[T], first: bool) {
    let (body, last) = src.split_at(src.len() - 1);
    let (init, tail) = acc.split_at_mut(acc.len() - 1);
    if first {
        for (a, c) in init.iter_mut().zip(body.chunks_exact(S)) {
            *a = c[0];
        }
        tail[0] = last[0];
    } else {
        // A select that always stores, not a store under a branch: the compiler turns
        // it into a vector max (x86's `maxps` keeps its second operand unless the first
        // is greater, NaN included: this very rule), where the conditional store became
        // one masked scalar store per lane, ten times slower.
        for (a, c) in init.iter_mut().zip(body.chunks_exact(S)) {
            *a = if c[0] > *a { c[0] } else { *a };
        }
        if last[0] > tail[0] {
            tail[0] = last[0];
        }
    }
}

fn max_pool_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let win = pool_window(ctx, x, &outputs[0])?;
    if outputs.len() == 1 {
        max_pool_values(&win, x.slice::<T>()?, outputs[0].slice_mut::<T>()?);
        return Ok(());
    }
    let column_major = ctx.attr_int("storage_order", 0)? != 0;
    let (ilen, olen) = (win.input_len(), win.output_len());
    let [d, h, w] = win.input;
    let xv = x.slice::<T>()?;
    // Values and indices are found together; both outputs are written in one pass.
    let mut found = vec![(T::from_f64(0.0), 0i64); outputs[0].len()];
    let plane = |p: usize, xs: &[T], out: &mut [(T, i64)]| {
        each_output(&win, |i, o| {
            let mut best: Option<(T, [usize; 3])> = None;
            taps(&win, o, |t| {
                if let Tap::Input(at) = t {
                    let v = xs[(at[0] * h + at[1]) * w + at[2]];
                    if best.is_none_or(|(b, _)| v > b) {
                        best = Some((v, at));
                    }
                }
            });
            out[i] = match best {
                Some((v, at)) => {
                    let local = if column_major {
                        at[0] + at[1] * d + at[2] * d * h
                    } else {
                        (at[0] * h + at[1]) * w + at[2]
                    };
                    (v, (p * ilen + local) as i64)
                }
                None => (T::from_f64(f64::NEG_INFINITY), -1),
            };
        });
    };
    if olen > 0 && ilen > 0 {
        if xv.len() >= PARALLEL_ELEMS {
            found
                .par_chunks_mut(olen)
                .enumerate()
                .for_each(|(p, out)| plane(p, &xv[p * ilen..][..ilen], out));
        } else {
            for (p, out) in found.chunks_mut(olen).enumerate() {
                plane(p, &xv[p * ilen..][..ilen], out);
            }
        }
    }
    for (dst, (v, _)) in outputs[0].slice_mut::<T>()?.iter_mut().zip(&found) {
        *dst = *v;
    }
    if let Some(ind) = outputs.get_mut(1) {
        for (dst, (_, i)) in ind.slice_mut::<i64>()?.iter_mut().zip(&found) {
            *dst = *i;
        }
    }
    Ok(())
}

/// AveragePool (`count_include_pad` divides by the taps inside the explicit padding
/// too) and LpPool (`p`-norm of the taps inside the input).
pub fn average_pool(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16]
        => sum_pool::<T>(ctx, inputs, outputs),
        other => Err(ctx.compute_error(format!("computes float types, not {other}"))))
}

fn sum_pool<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let win = pool_window(ctx, x, &outputs[0])?;
    let lp = ctx.op == "LpPool";
    let p = ctx.attr_int("p", 2)? as f64;
    let include_pad = ctx.attr_int("count_include_pad", 0)? != 0;
    let [_, h, w] = win.input;
    let (ilen, olen) = (win.input_len(), win.output_len());
    let xv = x.slice::<T>()?;
    let y = outputs[0].slice_mut::<T>()?;
    planes(xv, ilen, y, olen, |_, xs, out| {
        each_output(&win, |i, o| {
            let (mut sum, mut count) = (0.0f64, 0usize);
            taps(&win, o, |t| match t {
                Tap::Input(at) => {
                    let v = xs[(at[0] * h + at[1]) * w + at[2]].to_f64();
                    sum += if lp { v.abs().powf(p) } else { v };
                    count += 1;
                }
                Tap::Pad if include_pad => count += 1,
                _ => {}
            });
            out[i] = T::from_f64(if lp {
                sum.powf(1.0 / p)
            } else if count == 0 {
                0.0
            } else {
                sum / count as f64
            });
        });
    });
    Ok(())
}

/// GlobalAveragePool and GlobalMaxPool: each plane folds to one value.
pub fn global_pool(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16]
        => global_pool_typed::<T>(ctx, inputs, outputs),
        other => Err(ctx.compute_error(format!("computes float types, not {other}"))))
}

fn global_pool_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    if x.rank() < 2 {
        return Err(ctx.input_error(0, "needs [N, C, D...]"));
    }
    let ilen: usize = x.shape[2..].iter().product();
    let max = ctx.op == "GlobalMaxPool";
    let xv = x.slice::<T>()?;
    let y = outputs[0].slice_mut::<T>()?;
    planes(xv, ilen, y, 1, |_, xs, out| {
        out[0] = T::from_f64(if max {
            xs.iter()
                .map(|v| v.to_f64())
                .fold(f64::NEG_INFINITY, f64::max)
        } else {
            xs.iter().map(|v| v.to_f64()).sum::<f64>() / ilen as f64
        });
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run;

    fn grid() -> Tensor {
        // 1 2 3
        // 4 5 6
        // 7 8 9
        Tensor::from_vec(
            &[1, 1, 3, 3],
            &(1..=9).map(|v| v as f32).collect::<Vec<_>>(),
        )
    }

    /// MaxPool without Indices takes its own loop (`max_pool_values`): over 1-D to 3-D
    /// windows, strides, dilations, explicit and ceil-mode padding, windows wholly in the
    /// padding, NaNs and ties, in float32 and float16, it gives the values of the
    /// general walk that also finds the indices, bit for bit.
    #[test]
    fn max_pool_values_alone_are_the_general_walks_values() {
        use half::f16;
        let value = |i: usize| match (i * 7) % 23 {
            0 => f32::NAN,
            1 | 2 => 0.5, // ties
            k => (k as f32 * 1.7).sin() * 4.0 - 1.0,
        };
        let ints = |v: &[i64]| Attr::Ints(v.to_vec());
        type Case = (Vec<usize>, Vec<(&'static str, Attr)>);
        let cases: Vec<Case> = vec![
            (
                vec![1, 2, 9],
                vec![("kernel_shape", ints(&[3])), ("strides", ints(&[2]))],
            ),
            (
                vec![2, 3, 7, 8],
                vec![
                    ("kernel_shape", ints(&[3, 3])),
                    ("strides", ints(&[2, 2])),
                    ("pads", ints(&[1, 1, 1, 1])),
                ],
            ),
            (
                vec![1, 2, 6, 6],
                vec![
                    ("kernel_shape", ints(&[2, 3])),
                    ("strides", ints(&[3, 2])),
                    ("ceil_mode", Attr::Int(1)),
                    ("pads", ints(&[0, 2, 1, 2])),
                ],
            ),
            (
                vec![1, 1, 9, 9],
                vec![
                    ("kernel_shape", ints(&[3, 2])),
                    ("dilations", ints(&[2, 3])),
                ],
            ),
            (
                vec![1, 2, 4, 5, 6],
                vec![
                    ("kernel_shape", ints(&[2, 2, 3])),
                    ("strides", ints(&[1, 2, 2])),
                    ("pads", ints(&[1, 0, 1, 0, 1, 2])),
                ],
            ),
            // Rows wide enough that most columns take the row-wise loop.
            (
                vec![1, 3, 5, 40],
                vec![
                    ("kernel_shape", ints(&[3, 3])),
                    ("strides", ints(&[2, 2])),
                    ("pads", ints(&[1, 1, 1, 1])),
                ],
            ),
            (
                vec![2, 2, 6, 33],
                vec![
                    ("kernel_shape", ints(&[3, 5])),
                    ("pads", ints(&[1, 2, 1, 2])),
                ],
            ),
            // Windows that start in the padding and see no input tap.
            (
                vec![1, 1, 2, 2],
                vec![
                    ("kernel_shape", ints(&[1, 1])),
                    ("strides", ints(&[2, 2])),
                    ("pads", ints(&[1, 1, 1, 1])),
                ],
            ),
        ];
        for (shape, attrs) in cases {
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n).map(value).collect();
            let h: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
            for x in [Tensor::from_vec(&shape, &v), Tensor::from_vec(&shape, &h)] {
                let alone = run("MaxPool", &attrs, std::slice::from_ref(&x), 1);
                let both = run("MaxPool", &attrs, std::slice::from_ref(&x), 2);
                assert_eq!(alone[0].shape, both[0].shape, "{shape:?} {attrs:?}");
                assert_eq!(
                    alone[0].data.as_bytes(),
                    both[0].data.as_bytes(),
                    "{shape:?} {attrs:?}"
                );
            }
        }
    }

    #[test]
    fn max_pool_values_and_indices() {
        let k = ("kernel_shape", Attr::Ints(vec![2, 2]));
        let out = run("MaxPool", std::slice::from_ref(&k), &[grid()], 2);
        assert_eq!(out[0].slice::<f32>().unwrap(), [5.0, 6.0, 8.0, 9.0]);
        assert_eq!(out[1].slice::<i64>().unwrap(), [4, 5, 7, 8]);
        let out = run(
            "MaxPool",
            &[k, ("storage_order", Attr::Int(1))],
            &[grid()],
            2,
        );
        // Column-major: (h, w) -> h + 3 w.
        assert_eq!(out[1].slice::<i64>().unwrap(), [4, 7, 5, 8]);
    }

    #[test]
    fn average_pool_with_and_without_pad_counting() {
        let attrs = [
            ("kernel_shape", Attr::Ints(vec![2, 2])),
            ("pads", Attr::Ints(vec![1, 1, 0, 0])),
            ("strides", Attr::Ints(vec![2, 2])),
        ];
        let out = run("AveragePool", &attrs, &[grid()], 1);
        // Windows {1}, {2,3}, {4,7}, {5,6,8,9}.
        assert_eq!(out[0].slice::<f32>().unwrap(), [1.0, 2.5, 5.5, 7.0]);
        let mut with_pad = attrs.to_vec();
        with_pad.push(("count_include_pad", Attr::Int(1)));
        let out = run("AveragePool", &with_pad, &[grid()], 1);
        assert_eq!(out[0].slice::<f32>().unwrap(), [0.25, 1.25, 2.75, 7.0]);
    }

    #[test]
    fn lp_and_global_pools() {
        let x = Tensor::from_vec(&[1, 1, 2], &[3.0f32, -4.0]);
        let out = run("LpPool", &[("kernel_shape", Attr::Ints(vec![2]))], &[x], 1);
        assert_eq!(out[0].slice::<f32>().unwrap(), [5.0]);
        assert_eq!(
            run("GlobalAveragePool", &[], &[grid()], 1)[0]
                .slice::<f32>()
                .unwrap(),
            [5.0]
        );
        assert_eq!(
            run("GlobalMaxPool", &[], &[grid()], 1)[0]
                .slice::<f32>()
                .unwrap(),
            [9.0]
        );
    }
}
