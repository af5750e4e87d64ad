//! Pools: MaxPool (with its Indices output), AveragePool, LpPool, GlobalAveragePool and
//! GlobalMaxPool, over 1-D to 3-D windows.
//!
//! Each (image, channel) plane is independent, so large inputs run planes in parallel.
//! Within a plane, every output position walks its window's taps through [`taps`], which
//! reports each tap's input position or that it lies in the padding; the ops differ only
//! in how they fold the taps.

use rayon::prelude::*;

use super::pool_f32::{average_pool_2d, global_average, global_max, inside, is_2d, max_pool_2d};
use super::scalar::Scalar;
use super::window::Window;
use crate::dispatch;
use crate::ops::DType;
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
    // GE's lifted 1-D pools ([N, C, L, 1]) run over rows; an index (MaxPool's
    // Indices, in either storage order) is the same in both shapes, one dim being 1.
    Ok(Window::new(ctx, &x.shape[2..], &kernel, &y.shape[2..])?.lying_flat())
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

/// MaxPool's values alone (no Indices asked for): per output, the taps inside the input
/// in window order, the first kept and replaced only by a greater value, exactly as the
/// general walk ([`max_pool_typed`] with indices) picks them, so NaN handling and ties
/// give the same bits. The valid taps of each dim are one range computed per output
/// coordinate ([`inside`]), so the inner loop is a plain scan of input rows with no
/// per-tap classification, callback or index bookkeeping, and nothing is allocated.
fn max_pool_values<T: Scalar>(win: &Window, x: &[T], y: &mut [T]) {
    if is_2d(win) {
        return max_pool_2d(win, x, y);
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
    // Every averaging op (AveragePool, and GE's Pooling, AvgPool and AvgPoolV2, which call
    // this with their own names) takes the same float32 kernel, so a GE pool gives the
    // bits of the AveragePool it translates to; LpPool sums powers.
    if inputs[0].dtype == DType::F32 && ctx.op != "LpPool" {
        let win = pool_window(ctx, &inputs[0], &outputs[0])?;
        if is_2d(&win) {
            let include_pad = ctx.attr_int("count_include_pad", 0)? != 0;
            let y = outputs[0].slice_mut::<f32>()?;
            average_pool_2d(&win, include_pad, inputs[0].slice::<f32>()?, y);
            return Ok(());
        }
    }
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
    if T::DTYPE == DType::F32 {
        let y = outputs[0].slice_mut::<f32>()?;
        let fold = if max { global_max } else { global_average };
        fold(x.slice::<f32>()?, ilen, y);
        return Ok(());
    }
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
            3 => 0.0,
            4 => -0.0, // +0 and -0 tie: the first in window order is kept
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
            // Strides 1 to 4 over rows wider than a vector, zeros winning.
            (
                vec![1, 2, 9, 37],
                vec![("kernel_shape", ints(&[2, 3])), ("strides", ints(&[1, 3]))],
            ),
            (
                vec![1, 2, 8, 45],
                vec![
                    ("kernel_shape", ints(&[4, 2])),
                    ("strides", ints(&[2, 4])),
                    ("pads", ints(&[1, 0, 2, 1])),
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

    /// Pseudo-random values in [-2, 2), no NaN: the same for every call.
    fn noise(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
            })
            .collect()
    }

    /// A 2-D pool's geometry, for the reference definitions below.
    #[derive(Debug, Clone, Copy)]
    struct Geo {
        h: usize,
        w: usize,
        k: [usize; 2],
        s: [usize; 2],
        d: [usize; 2],
        /// Begin and end pads of H, then of W.
        p: [usize; 4],
        ceil: bool,
    }

    impl Geo {
        fn attrs(&self, include_pad: Option<bool>) -> Vec<(&'static str, Attr)> {
            let mut a = vec![
                (
                    "kernel_shape",
                    Attr::Ints(vec![self.k[0] as i64, self.k[1] as i64]),
                ),
                (
                    "strides",
                    Attr::Ints(vec![self.s[0] as i64, self.s[1] as i64]),
                ),
                (
                    "dilations",
                    Attr::Ints(vec![self.d[0] as i64, self.d[1] as i64]),
                ),
                (
                    "pads",
                    Attr::Ints(self.p.iter().map(|&v| v as i64).collect()),
                ),
                ("ceil_mode", Attr::Int(self.ceil as i64)),
            ];
            if let Some(inc) = include_pad {
                a.push(("count_include_pad", Attr::Int(inc as i64)));
            }
            a
        }
        /// The window of output (oy, ox) by definition: each tap's (row, col), signed,
        /// and whether it lies inside the input, in the padding, or past it.
        fn window(&self, oy: usize, ox: usize) -> Vec<(isize, isize, u8)> {
            let mut v = Vec::new();
            for a in 0..self.k[0] {
                for b in 0..self.k[1] {
                    let y = (oy * self.s[0] + a * self.d[0]) as isize - self.p[0] as isize;
                    let x = (ox * self.s[1] + b * self.d[1]) as isize - self.p[1] as isize;
                    let (h, w) = (self.h as isize, self.w as isize);
                    let inside = (0..h).contains(&y) && (0..w).contains(&x);
                    let padded = (-(self.p[0] as isize)..h + self.p[2] as isize).contains(&y)
                        && (-(self.p[1] as isize)..w + self.p[3] as isize).contains(&x);
                    v.push((
                        y,
                        x,
                        if inside {
                            0
                        } else if padded {
                            1
                        } else {
                            2
                        },
                    ));
                }
            }
            v
        }
    }

    /// Many 2-D window shapes: kernels 1 to 7, strides 1 to 3, dilations, pads, ceil
    /// mode, odd sizes and widths that are not a multiple of 16.
    fn geometries() -> Vec<Geo> {
        let mut v = Vec::new();
        let mut i = 0usize;
        for k in 1..=7usize {
            for s in 1..=3usize {
                for (h, w) in [(7, 7), (9, 19), (12, 37), (5, 66)] {
                    i += 1;
                    let kh = 1 + (k + i) % 3;
                    let p = (i % 3).min(k - 1);
                    let d = if i.is_multiple_of(5) { 2 } else { 1 };
                    let g = Geo {
                        h,
                        w,
                        k: [kh, k],
                        s: [1 + i % 3, s],
                        d: [1, d],
                        p: [
                            p.min(kh - 1),
                            p,
                            (i % 2).min(kh - 1),
                            (i / 2 % 2).min(k - 1),
                        ],
                        ceil: i % 4 == 1,
                    };
                    let span = (k - 1) * d + 1;
                    if span <= w + g.p[1] + g.p[3] && kh <= h + g.p[0] + g.p[2] {
                        v.push(g);
                    }
                }
            }
        }
        v
    }

    /// float32 AveragePool (the row kernel) against its definition in float64, over
    /// [`geometries`], both `count_include_pad`s; the outputs start as NaN (the host
    /// driver poisons them), so an unwritten or accumulated-into output fails.
    #[test]
    fn average_pool_rows_match_the_definition() {
        for (gi, g) in geometries().into_iter().enumerate() {
            for include_pad in [false, true] {
                let planes = 3;
                let x = noise(planes * g.h * g.w, gi as u64);
                let t = Tensor::from_vec(&[1, planes, g.h, g.w], &x);
                let out = run("AveragePool", &g.attrs(Some(include_pad)), &[t], 1);
                let (oh, ow) = (out[0].shape[2], out[0].shape[3]);
                assert_eq!(out[0].shape, [1, planes, oh, ow], "{g:?}");
                let got = out[0].slice::<f32>().unwrap();
                for c in 0..planes {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let (mut sum, mut count) = (0.0f64, 0usize);
                            for (y, xx, class) in g.window(oy, ox) {
                                if class == 0 {
                                    sum += x[(c * g.h + y as usize) * g.w + xx as usize] as f64;
                                }
                                count += (class == 0 || (class == 1 && include_pad)) as usize;
                            }
                            let want = if count == 0 { 0.0 } else { sum / count as f64 };
                            let v = got[(c * oh + oy) * ow + ox] as f64;
                            assert!(
                                (v - want).abs() <= 1e-6 + 1e-5 * want.abs(),
                                "{g:?} pad {include_pad} at {c},{oy},{ox}: {v} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// float32 MaxPool's values (the row kernel) against the definition (the first
    /// greatest tap in window order), bit for bit, over [`geometries`] with dilations.
    #[test]
    fn max_pool_rows_match_the_definition() {
        for (gi, g) in geometries().into_iter().enumerate() {
            let mut g = g;
            g.d[0] = 1 + gi % 2;
            if (g.k[0] - 1) * g.d[0] + 1 > g.h + g.p[0] + g.p[2] {
                g.d[0] = 1;
            }
            let mut x = noise(2 * g.h * g.w, 100 + gi as u64);
            // Some exact zeros of both signs, where ReLU output would have them.
            for (i, v) in x.iter_mut().enumerate() {
                if i % 7 == 3 {
                    *v = if i % 2 == 0 { 0.0 } else { -0.0 };
                }
            }
            let t = Tensor::from_vec(&[1, 2, g.h, g.w], &x);
            let out = run("MaxPool", &g.attrs(None), &[t], 1);
            let (oh, ow) = (out[0].shape[2], out[0].shape[3]);
            let got = out[0].slice::<f32>().unwrap();
            for c in 0..2 {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut best: Option<f32> = None;
                        for (y, xx, class) in g.window(oy, ox) {
                            let v = if class == 0 {
                                x[(c * g.h + y as usize) * g.w + xx as usize]
                            } else {
                                continue;
                            };
                            if best.is_none_or(|b| v > b) {
                                best = Some(v);
                            }
                        }
                        let want = best.unwrap_or(f32::NEG_INFINITY);
                        let v = got[(c * oh + oy) * ow + ox];
                        assert_eq!(v.to_bits(), want.to_bits(), "{g:?} at {c},{oy},{ox}");
                    }
                }
            }
        }
    }

    /// float32 GlobalMaxPool (running maxima in lanes) against a float64 fold, over small,
    /// odd and long planes of negative values, with NaNs passed over: a plane of NaNs
    /// alone gives -inf, as the float64 fold of the other types does.
    #[test]
    fn global_max_matches_the_fold() {
        for (c, h, w) in [(512, 508, 1), (3, 1, 1), (5, 3, 17), (2, 33, 1), (4, 4, 4)] {
            let mut x: Vec<f32> = noise(c * h * w, (c * w + h) as u64)
                .into_iter()
                .map(|v| v - 10.0)
                .collect();
            let len = h * w;
            for p in 0..c {
                x[p * len + (p * 7) % len] = f32::NAN;
            }
            x[..len].fill(f32::NAN);
            let t = Tensor::from_vec(&[1, c, h, w], &x);
            let out = &run("GlobalMaxPool", &[], &[t], 1)[0];
            assert_eq!(out.shape, [1, c, 1, 1]);
            for (p, &v) in out.slice::<f32>().unwrap().iter().enumerate() {
                let want = x[p * len..][..len]
                    .iter()
                    .map(|&v| v as f64)
                    .fold(f64::NEG_INFINITY, f64::max);
                assert_eq!(v as f64, want, "{c} {h} {w}: plane {p}");
            }
        }
    }

    /// float32 GlobalAveragePool (lanes of float32 sums) and the AveragePool whose window
    /// is the plane (which takes it) against the float64 mean, over small and odd planes.
    #[test]
    fn global_average_matches_the_mean() {
        for (c, h, w) in [(576, 7, 7), (96, 14, 14), (3, 1, 1), (5, 3, 17), (2, 33, 1)] {
            let x = noise(c * h * w, (c + h) as u64);
            let t = Tensor::from_vec(&[1, c, h, w], &x);
            let gap = run("GlobalAveragePool", &[], std::slice::from_ref(&t), 1);
            let k = [("kernel_shape", Attr::Ints(vec![h as i64, w as i64]))];
            let avg = run("AveragePool", &k, &[t], 1);
            for out in [&gap[0], &avg[0]] {
                assert_eq!(out.shape, [1, c, 1, 1]);
                for (p, &v) in out.slice::<f32>().unwrap().iter().enumerate() {
                    let want = x[p * h * w..][..h * w]
                        .iter()
                        .map(|&v| v as f64)
                        .sum::<f64>()
                        / (h * w) as f64;
                    assert!(
                        (v as f64 - want).abs() <= 1e-6 + 1e-5 * want.abs(),
                        "{c} {h} {w}"
                    );
                }
            }
        }
    }
}
