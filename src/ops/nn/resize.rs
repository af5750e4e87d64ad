//! Resize and Upsample: nearest, (bi/tri)linear and cubic interpolation over any dims,
//! with every ONNX coordinate transformation, `nearest_mode`, `cubic_coeff_a`,
//! `exclude_outside`, `extrapolation_value`, `antialias`, `axes` and
//! `keep_aspect_ratio_policy`, from `scales` or `sizes`.
//!
//! Each of these interpolations is a tensor product of 1-D interpolations, so the
//! kernel resamples one axis at a time: for each output position along the axis it
//! computes the input taps and weights once (what the ONNX reference computes per
//! element), then forms every output row as a weighted sum of whole contiguous input
//! rows. Out-of-range positions in `tf_crop_and_resize` take the extrapolation value;
//! since every weight set sums to one, later axes carry that value through unchanged, as
//! the N-d definition requires.

use rayon::prelude::*;

use super::scalar::{Scalar, read_f64s};
use crate::dispatch;
use crate::ops::simd::Isa;
use crate::ops::{DType, InferCtx, OpError, TensorMut, TensorRef};

/// Elements below which an axis pass runs on the calling thread.
const PARALLEL_ELEMS: usize = 1 << 14;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

/// The attributes that shape the 1-D interpolation.
struct Params<'a> {
    mode: Mode,
    coord: &'a str,
    nearest: &'a str,
    cubic_a: f64,
    exclude_outside: bool,
    extrapolation: f64,
    antialias: bool,
}

/// Input taps and weights for each output position along one axis; `None` is an
/// extrapolated position.
struct AxisTaps {
    spans: Vec<Option<(usize, usize)>>,
    idx: Vec<usize>,
    w: Vec<f64>,
}

/// Keys' cubic convolution kernel with coefficient `a`.
fn cubic(x: f64, a: f64) -> f64 {
    let x = x.abs();
    if x <= 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

/// The input coordinate of output position `j` (ONNX's coordinate transformations).
fn source_coord(
    p: &Params,
    j: usize,
    scale: f64,
    out_len: usize,
    in_len: usize,
    roi: (f64, f64),
) -> f64 {
    // The ONNX reference divides by the resized length as a real number, scale * input
    // length, not the rounded output size; the two differ when downsampling.
    let (x, lo, li) = (j as f64, scale * in_len as f64, in_len as f64);
    match p.coord {
        "asymmetric" => x / scale,
        "align_corners" if out_len == 1 => 0.0,
        "align_corners" => x * (li - 1.0) / (lo - 1.0),
        "pytorch_half_pixel" if out_len == 1 => 0.0,
        "tf_half_pixel_for_nn" => (x + 0.5) / scale,
        "half_pixel_symmetric" => {
            let adjustment = out_len as f64 / lo;
            let offset = li / 2.0 * (1.0 - adjustment);
            offset + (x + 0.5) / scale - 0.5
        }
        "tf_crop_and_resize" if out_len == 1 => 0.5 * (roi.0 + roi.1) * (li - 1.0),
        "tf_crop_and_resize" => roi.0 * (li - 1.0) + x * (roi.1 - roi.0) * (li - 1.0) / (lo - 1.0),
        // half_pixel and pytorch_half_pixel with more than one output.
        _ => (x + 0.5) / scale - 0.5,
    }
}

fn axis_taps(p: &Params, scale: f64, out_len: usize, in_len: usize, roi: (f64, f64)) -> AxisTaps {
    let mut t = AxisTaps {
        spans: Vec::with_capacity(out_len),
        idx: Vec::new(),
        w: Vec::new(),
    };
    let last = in_len as isize - 1;
    let mut coeffs: Vec<(isize, f64)> = Vec::new();
    for j in 0..out_len {
        let x = source_coord(p, j, scale, out_len, in_len, roi);
        if p.coord == "tf_crop_and_resize" && (x < 0.0 || x > last as f64) {
            t.spans.push(None);
            continue;
        }
        coeffs.clear();
        if p.mode == Mode::Nearest {
            let i = match p.nearest {
                "floor" => x.floor(),
                "ceil" => x.ceil(),
                "round_prefer_ceil" => (x + 0.5).floor(),
                _ => (x - 0.5).ceil(),
            };
            coeffs.push((i as isize, 1.0));
        } else {
            // As the reference does: an integral coordinate is the right end of the
            // interval below it (ratio 1), which fixes the taps exclude_outside sees.
            let mut base = x.floor();
            let mut r = x - base;
            if r == 0.0 {
                r = 1.0;
                base -= 1.0;
            }
            let base = base as isize;
            let s = if p.antialias { scale.min(1.0) } else { 1.0 };
            let reach = if p.mode == Mode::Linear { 1.0 } else { 2.0 };
            let start = (-reach / s).floor() as isize + 1;
            for i in start..(2 - start) {
                let arg = (i as f64 - r) * s;
                let w = match p.mode {
                    Mode::Linear => (1.0 - arg.abs()).max(0.0),
                    _ => cubic(arg, p.cubic_a),
                };
                coeffs.push((base + i, w));
            }
        }
        if p.exclude_outside {
            for c in coeffs.iter_mut() {
                if c.0 < 0 || c.0 > last {
                    c.1 = 0.0;
                }
            }
        }
        let sum: f64 = coeffs.iter().map(|c| c.1).sum();
        let norm = if p.mode != Mode::Nearest && sum != 0.0 {
            sum
        } else {
            1.0
        };
        let begin = t.idx.len();
        for &(i, w) in &coeffs {
            if w != 0.0 {
                t.idx.push(i.clamp(0, last.max(0)) as usize);
                t.w.push(w / norm);
            }
        }
        t.spans.push(Some((begin, t.idx.len())));
    }
    t
}

/// Resamples axis `d` of `src` (dims `shape`) to `out_len` positions.
fn resample_axis(
    src: &[f64],
    shape: &[usize],
    d: usize,
    out_len: usize,
    taps: &AxisTaps,
    fill: f64,
) -> Vec<f64> {
    let inner: usize = shape[d + 1..].iter().product();
    let in_len = shape[d];
    let outer: usize = shape[..d].iter().product();
    let mut out = vec![0.0f64; outer * out_len * inner];
    let block = |o: usize, dst_block: &mut [f64]| {
        let src_block = &src[o * in_len * inner..][..in_len * inner];
        for (j, dst) in dst_block.chunks_mut(inner).enumerate() {
            match taps.spans[j] {
                None => dst.fill(fill),
                Some((s, e)) => {
                    // Whole rows at a time: the inner loop is a contiguous axpy.
                    for t in s..e {
                        let (row, w) = (&src_block[taps.idx[t] * inner..][..inner], taps.w[t]);
                        for (o, &v) in dst.iter_mut().zip(row) {
                            *o += w * v;
                        }
                    }
                }
            }
        }
    };
    let stride = out_len * inner;
    if stride == 0 || in_len * inner == 0 {
        out.fill(fill);
        return out;
    }
    if out.len() >= PARALLEL_ELEMS {
        out.par_chunks_mut(stride)
            .enumerate()
            .for_each(|(o, b)| block(o, b));
    } else {
        for (o, b) in out.chunks_mut(stride).enumerate() {
            block(o, b);
        }
    }
    out
}

/// One axis's taps when each output position reads one or two input positions: the
/// form of nearest and linear resampling without antialiasing, what the fast float32
/// path ([`resize_planes`]) takes.
struct Taps2 {
    /// First and second input position of each output position (the second equal to
    /// the first for a one-tap position).
    i0: Vec<u32>,
    i1: Vec<u32>,
    /// Their weights, as [`axis_taps`] computed them; `w1` is 0 for a one-tap position.
    w0: Vec<f64>,
    w1: Vec<f64>,
    /// Whether every position has one tap of weight 1 (nearest).
    copies: bool,
    /// Per block of [`BLOCK`] output positions, the first of the 16 consecutive input
    /// positions that hold every tap of the block, or `u32::MAX` when no 16 do (a
    /// downsampling by more than two, an input under 16 long).
    windows: Vec<u32>,
}

/// Output positions per vector of the W pass's AVX-512 kernel ([`x86::columns`]).
const BLOCK: usize = 8;

impl Taps2 {
    /// `t` in this form, or `None` when a position has more than two taps, none (an
    /// extrapolated one) or an input position past `in_len`.
    fn of(t: &AxisTaps, in_len: usize) -> Option<Taps2> {
        let n = t.spans.len();
        let mut r = Taps2 {
            i0: Vec::with_capacity(n),
            i1: Vec::with_capacity(n),
            w0: Vec::with_capacity(n),
            w1: Vec::with_capacity(n),
            copies: true,
            windows: Vec::new(),
        };
        for span in &t.spans {
            let (s, e) = (*span)?;
            if e <= s || e - s > 2 || t.idx[s..e].iter().any(|&i| i >= in_len) {
                return None;
            }
            let last = e - 1;
            r.i0.push(t.idx[s] as u32);
            r.i1.push(t.idx[last] as u32);
            r.w0.push(t.w[s]);
            r.w1.push(if last > s { t.w[last] } else { 0.0 });
            r.copies &= e - s == 1 && t.w[s] == 1.0;
        }
        r.windows = (r.i0.chunks_exact(BLOCK).zip(r.i1.chunks_exact(BLOCK)))
            .map(|(a, b)| {
                let lo = a.iter().chain(b).min().map_or(0, |&i| i as usize);
                let hi = a.iter().chain(b).max().map_or(0, |&i| i as usize);
                let base = lo.min(in_len.saturating_sub(16));
                if in_len >= 16 && hi < base + 16 {
                    base as u32
                } else {
                    u32::MAX
                }
            })
            .collect();
        Some(r)
    }
}

/// Resize of float32 `[.., H, W]` planes `xs` to `[.., OH, OW]` planes `ys` (`dims` is
/// `[H, W, OH, OW]`), each of H and W resampled by its taps or left alone (`None`).
///
/// This is the general path's arithmetic exactly, fused: the general path resamples H
/// over the whole tensor in float64 (`0 + w0 * a + w1 * b`, the taps in order), then W
/// from that, rounding to float32 at the end; here each output row's H pass is one
/// float64 row of scratch, and the W pass reads it through per-output-column indices and
/// weights computed once per call ([`Taps2`]), so the bits are the same (one difference:
/// nearest copies values, so -0 stays -0 where `0 + 1 * -0` gave +0, as ONNX Runtime
/// copies). Nearest (every tap a copy) does no arithmetic at all, and an output row
/// whose source row equals the previous one's is a copy of that output row.
fn resize_planes(
    xs: &[f32],
    ys: &mut [f32],
    dims: [usize; 4],
    th: Option<&Taps2>,
    tw: Option<&Taps2>,
    nearest: bool,
) {
    let [h, w, oh, ow] = dims;
    let (ilen, olen) = (h * w, oh * ow);
    if ilen == 0 || olen == 0 {
        return;
    }
    let run = |xs: &[f32], ys: &mut [f32]| {
        thread_local! {
            static ROW: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        ROW.with(|cell| {
            let mut guard = cell.try_borrow_mut();
            let mut own = Vec::new();
            let row: &mut Vec<f64> = match guard.as_mut() {
                Ok(r) => r,
                Err(_) => &mut own,
            };
            if row.len() < w {
                row.resize(w, 0.0);
            }
            planes_isa(xs, ys, dims, th, tw, nearest, &mut row[..w]);
        })
    };
    if ys.len() >= PARALLEL_ELEMS {
        let per = PARALLEL_ELEMS.div_ceil(olen);
        ys.par_chunks_mut(per * olen)
            .enumerate()
            .for_each(|(g, out)| run(&xs[g * per * ilen..][..out.len() / olen * ilen], out));
    } else {
        run(xs, ys);
    }
}

/// [`planes_any`] in the widest vectors this CPU has.
fn planes_isa(
    xs: &[f32],
    ys: &mut [f32],
    dims: [usize; 4],
    th: Option<&Taps2>,
    tw: Option<&Taps2>,
    nearest: bool,
    row: &mut [f64],
) {
    /// [`planes_any`] compiled for AVX-512F.
    ///
    /// # Safety
    /// This CPU has AVX-512F. (The body is safe code.)
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn wide(
        xs: &[f32],
        ys: &mut [f32],
        dims: [usize; 4],
        th: Option<&Taps2>,
        tw: Option<&Taps2>,
        nearest: bool,
        row: &mut [f64],
    ) {
        planes_any(xs, ys, dims, th, tw, nearest, row, true)
    }
    /// [`planes_any`] compiled for AVX2.
    ///
    /// # Safety
    /// This CPU has AVX2. (The body is safe code.)
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn avx2(
        xs: &[f32],
        ys: &mut [f32],
        dims: [usize; 4],
        th: Option<&Taps2>,
        tw: Option<&Taps2>,
        nearest: bool,
        row: &mut [f64],
    ) {
        planes_any(xs, ys, dims, th, tw, nearest, row, false)
    }
    #[cfg(target_arch = "x86_64")]
    match Isa::detect() {
        // SAFETY: `Isa::detect` found AVX-512F on this CPU, all `wide` needs.
        Some(Isa::Avx512) => return unsafe { wide(xs, ys, dims, th, tw, nearest, row) },
        // SAFETY: `Isa::detect` found AVX2 on this CPU, all `avx2` needs.
        Some(Isa::Avx2) => return unsafe { avx2(xs, ys, dims, th, tw, nearest, row) },
        None => {}
    }
    planes_any(xs, ys, dims, th, tw, nearest, row, false)
}

/// Output columns `from..from + out.len()` of the W pass into `out`: each column's taps
/// of the H pass's `row`, in float64 as the general path sums them. One walk over the
/// tap tables (no index per table per column), the loop every machine without AVX-512
/// runs for the whole row.
#[inline(always)]
fn columns_from(out: &mut [f32], row: &[f64], t: &Taps2, from: usize) {
    let last = row.len() - 1;
    let taps = t.i0[from..].iter().zip(&t.i1[from..]);
    let weights = t.w0[from..].iter().zip(&t.w1[from..]);
    for (o, ((&i0, &i1), (&w0, &w1))) in out.iter_mut().zip(taps.zip(weights)) {
        let one = 0.0 + w0 * row[(i0 as usize).min(last)];
        let two = one + w1 * row[(i1 as usize).min(last)];
        // A one-tap column (w1 = 0) adds nothing, not even 0 * inf.
        *o = if w1 == 0.0 { one } else { two } as f32;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{BLOCK, Taps2, columns_from};

    /// The W pass of one output row, [`BLOCK`] columns per vector: the block's taps lie
    /// among 16 consecutive floats of `row` ([`Taps2::windows`]), loaded as two vectors
    /// and picked by a permute each, where the scalar loop gathered every tap from
    /// memory (a 2x linear upsampling of 64 x 64 x 64 took 1.9 ms, three times ONNX
    /// Runtime's). The same float64 operations in the same order as [`columns_from`], so the
    /// same bits. Blocks without a window, and the columns after the last block, are
    /// left to the caller: returns how many columns from the start it wrote.
    ///
    /// # Safety
    /// This CPU has AVX-512F; `t` is the W axis's taps for `out` (as long) and `row`
    /// (the input row, `t`'s input length).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn columns(out: &mut [f32], row: &[f64], t: &Taps2) -> usize {
        let blocks = (out.len() / BLOCK).min(t.windows.len());
        for (b, &base) in t.windows[..blocks].iter().enumerate() {
            let j = b * BLOCK;
            if base == u32::MAX {
                columns_from(&mut out[j..j + BLOCK], row, t, j);
                continue;
            }
            let base = base as usize;
            assert!(base + 16 <= row.len() && j + BLOCK <= t.i0.len());
            // SAFETY: AVX-512F is this CPU's (the contract). Reads: 16 floats of `row`
            // from `base` (the assert), and `BLOCK` (8) of `t.i0`, `t.i1`, `t.w0` and
            // `t.w1` from `j` (all as long as `t.i0`, the assert). Write: 8 floats of
            // `out` from `j`, below `blocks * BLOCK <= out.len()`. The permutes' indices
            // are the taps less `base`, in 0..16 by `Taps2::windows`' construction (the
            // instruction reads only their low four bits in any case).
            unsafe {
                let lo = _mm512_loadu_pd(row.as_ptr().add(base));
                let hi = _mm512_loadu_pd(row.as_ptr().add(base + 8));
                let at = _mm512_set1_epi64(base as i64);
                let index = |i: &[u32]| {
                    let i = _mm256_loadu_si256(i.as_ptr().add(j).cast());
                    _mm512_sub_epi64(_mm512_cvtepu32_epi64(i), at)
                };
                let a = _mm512_permutex2var_pd(lo, index(&t.i0), hi);
                let b = _mm512_permutex2var_pd(lo, index(&t.i1), hi);
                let w0 = _mm512_loadu_pd(t.w0.as_ptr().add(j));
                let w1 = _mm512_loadu_pd(t.w1.as_ptr().add(j));
                let zero = _mm512_setzero_pd();
                let one = _mm512_add_pd(zero, _mm512_mul_pd(w0, a));
                let two = _mm512_add_pd(one, _mm512_mul_pd(w1, b));
                let single = _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(w1, zero);
                let sum = _mm512_mask_blend_pd(single, two, one);
                _mm256_storeu_ps(out.as_mut_ptr().add(j), _mm512_cvtpd_ps(sum));
            }
        }
        blocks * BLOCK
    }
}

/// [`resize_planes`] of the whole planes `xs` into `ys`, `row` one input row of scratch;
/// `avx512` (true only where this CPU has AVX-512F) takes the W pass's vector kernel.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn planes_any(
    xs: &[f32],
    ys: &mut [f32],
    dims: [usize; 4],
    th: Option<&Taps2>,
    tw: Option<&Taps2>,
    nearest: bool,
    row: &mut [f64],
    avx512: bool,
) {
    let [h, w, oh, ow] = dims;
    // Nearest with both axes copies (or left alone): no arithmetic, bits copied.
    let copies = nearest && th.is_none_or(|t| t.copies) && tw.is_none_or(|t| t.copies);
    // Whether output column j reads input column j / k for an integer k (the
    // upsampling by 2 of UNets, in both nearest modes they use): then a row is each
    // input value repeated k times, which needs no index table.
    let repeat = tw.filter(|_| copies && ow % w == 0).and_then(|t| {
        let k = ow / w;
        t.i0.iter()
            .enumerate()
            .all(|(j, &i)| i as usize == j / k)
            .then_some(k)
    });
    for (xs, ys) in xs.chunks_exact(h * w).zip(ys.chunks_exact_mut(oh * ow)) {
        for oy in 0..oh {
            let (head, tail) = ys.split_at_mut(oy * ow);
            let out = &mut tail[..ow];
            let src_row = |i: u32| &xs[i as usize * w..][..w];
            if copies {
                let sy = th.map_or(oy as u32, |t| t.i0[oy]);
                if oy > 0 && th.is_some_and(|t| t.i0[oy - 1] == sy) {
                    // The same source row as the row above: copy that output row.
                    out.copy_from_slice(&head[(oy - 1) * ow..]);
                    continue;
                }
                let src = src_row(sy);
                match (tw, repeat) {
                    (None, _) => out.copy_from_slice(src),
                    (Some(_), Some(2)) => {
                        for (o, &v) in out.chunks_exact_mut(2).zip(src) {
                            o[0] = v;
                            o[1] = v;
                        }
                    }
                    (Some(_), Some(k)) => {
                        for (o, &v) in out.chunks_exact_mut(k).zip(src) {
                            o.fill(v);
                        }
                    }
                    (Some(t), None) => {
                        // `min` keeps the reads provably in bounds, so the loop has no
                        // panic path and vectorizes as a gather (Taps2::of checked every
                        // index already, the clamp changes none).
                        let last = src.len() - 1;
                        for (o, &i) in out.iter_mut().zip(&t.i0) {
                            *o = src[(i as usize).min(last)];
                        }
                    }
                }
                continue;
            }
            // The H pass into `row`, in float64 as the general path computes it.
            match th {
                None => {
                    for (r, &v) in row.iter_mut().zip(src_row(oy as u32)) {
                        *r = v as f64;
                    }
                }
                Some(t) => {
                    let (a, w0) = (src_row(t.i0[oy]), t.w0[oy]);
                    if t.w1[oy] == 0.0 {
                        for (r, &x) in row.iter_mut().zip(a) {
                            *r = 0.0 + w0 * x as f64;
                        }
                    } else {
                        let (b, w1) = (src_row(t.i1[oy]), t.w1[oy]);
                        for ((r, &x), &y) in row.iter_mut().zip(a).zip(b) {
                            *r = 0.0 + w0 * x as f64 + w1 * y as f64;
                        }
                    }
                }
            }
            // The W pass, each output column's two taps of `row`.
            match tw {
                None => {
                    for (o, &r) in out.iter_mut().zip(row.iter()) {
                        *o = r as f32;
                    }
                }
                Some(t) => {
                    let mut done = 0;
                    #[cfg(target_arch = "x86_64")]
                    if avx512 {
                        // SAFETY: `avx512` is true only in `planes_isa`'s AVX-512F build,
                        // which runs only where `Isa::detect` found AVX-512F.
                        done = unsafe { x86::columns(out, row, t) };
                    }
                    columns_from(&mut out[done..], row, t, done);
                }
            }
        }
    }
}

/// Resize (opset 10: X, scales; 11 on: X, roi, scales, sizes) and Upsample (X, scales).
pub fn resize(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16, i8, u8, i32, i64]
        => resize_typed::<T>(ctx, inputs, outputs),
        other => Err(ctx.compute_error(format!("does not compute {other}"))))
}

fn resize_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let rank = x.rank();
    let out_shape = outputs[0].shape.to_vec();
    if out_shape.len() != rank {
        return Err(ctx.compute_error("output rank differs from the input's"));
    }
    // Before opset 11 (and in Upsample) coordinates are asymmetric and nearest floors.
    let legacy = ctx.op == "Upsample" || ctx.attr_int("onnx_opset", 11)? < 11;
    let mode = match ctx.attr_str("mode", "nearest")? {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" | "trilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        other => return Err(ctx.attr_error("mode", format!("{other:?} is not a mode"))),
    };
    let p = Params {
        mode,
        coord: if legacy {
            "asymmetric"
        } else {
            ctx.attr_str("coordinate_transformation_mode", "half_pixel")?
        },
        nearest: if legacy {
            "floor"
        } else {
            ctx.attr_str("nearest_mode", "round_prefer_floor")?
        },
        cubic_a: ctx.attr_float("cubic_coeff_a", -0.75)? as f64,
        exclude_outside: ctx.attr_int("exclude_outside", 0)? != 0,
        extrapolation: ctx.attr_float("extrapolation_value", 0.0)? as f64,
        antialias: ctx.attr_int("antialias", 0)? != 0,
    };
    let axes: Vec<usize> = match ctx.attr_ints("axes")? {
        Some(a) => a
            .iter()
            .map(|&v| ctx.axis(v, rank, "axes"))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    let present = |i: usize| inputs.get(i).filter(|t| !t.is_empty());
    let (roi_at, scales_at, sizes_at) = if inputs.len() <= 2 {
        (None, 1, None)
    } else {
        (Some(1), 2, Some(3))
    };
    let mut scale = vec![1.0f64; rank];
    let mut roi = vec![(0.0f64, 1.0f64); rank];
    if let Some(t) = roi_at.and_then(present) {
        let v = read_f64s(t).map_err(|_| ctx.input_error(1, "roi is a float tensor"))?;
        let k = axes.len();
        if v.len() != 2 * k {
            return Err(ctx.input_error(1, format!("roi has {} values for {k} axes", v.len())));
        }
        for (i, &a) in axes.iter().enumerate() {
            roi[a] = (v[i], v[i + k]);
        }
    }
    if sizes_at.and_then(present).is_some() {
        let policy = ctx.attr_str("keep_aspect_ratio_policy", "stretch")?;
        let ratios = axes
            .iter()
            .map(|&a| out_shape[a] as f64 / x.shape[a] as f64);
        if policy == "stretch" {
            for (&a, r) in axes.iter().zip(ratios) {
                scale[a] = r;
            }
        } else {
            // One scale for every axis: recompute it as inference did, from the sizes.
            let sizes = inputs[3]
                .slice::<i64>()
                .map_err(|_| ctx.input_error(3, "sizes are int64"))?;
            let r = axes
                .iter()
                .zip(sizes.iter())
                .map(|(&a, &s)| s as f64 / x.shape[a] as f64);
            let s = if policy == "not_larger" {
                r.fold(f64::INFINITY, f64::min)
            } else {
                r.fold(0.0, f64::max)
            };
            for &a in &axes {
                scale[a] = s;
            }
        }
    } else if let Some(t) = present(scales_at) {
        let v = read_f64s(t).map_err(|_| ctx.input_error(scales_at, "scales are float"))?;
        let k = if ctx.op == "Upsample" {
            rank
        } else {
            axes.len()
        };
        if v.len() != k {
            return Err(ctx.input_error(scales_at, format!("{} scales for {k} axes", v.len())));
        }
        for (i, &a) in axes.iter().enumerate().take(k) {
            scale[a] = v[i];
        }
    } else if let Some(v) = ctx.attrs.get("scales").and_then(|a| match a {
        crate::ops::Attr::Floats(f) => Some(f.clone()),
        _ => None,
    }) {
        for (a, s) in v.into_iter().enumerate().take(rank) {
            scale[a] = s;
        }
    } else {
        for a in 0..rank {
            scale[a] = out_shape[a] as f64 / x.shape[a].max(1) as f64;
        }
    }
    let resampled = |d: usize| {
        let crops = p.coord == "tf_crop_and_resize" && axes.contains(&d);
        !(out_shape[d] == x.shape[d] && scale[d] == 1.0 && !crops)
    };
    if T::DTYPE == DType::F32 && mode != Mode::Cubic && rank >= 2 && !(0..rank - 2).any(resampled) {
        // The float32 planes of CNNs: see `resize_planes`.
        let (hd, wd) = (rank - 2, rank - 1);
        // Per axis: Some(None) leaves it alone, Some(Some(taps)) resamples it, None is
        // a case the fast path does not take (more than two taps, extrapolation).
        let plan = |d: usize| -> Option<Option<Taps2>> {
            if !resampled(d) {
                return Some(None);
            }
            if scale[d] <= 0.0 || !scale[d].is_finite() {
                return None;
            }
            let taps = axis_taps(&p, scale[d], out_shape[d], x.shape[d], roi[d]);
            Taps2::of(&taps, x.shape[d]).map(Some)
        };
        let (th, tw) = (plan(hd), plan(wd));
        if let (Some(th), Some(tw)) = (th, tw) {
            let (h, w) = (x.shape[hd], x.shape[wd]);
            let (oh, ow) = (out_shape[hd], out_shape[wd]);
            let xs: &[f32] = bytemuck::cast_slice(x.slice::<T>()?);
            let ys: &mut [f32] = bytemuck::cast_slice_mut(outputs[0].slice_mut::<T>()?);
            let nearest = mode == Mode::Nearest;
            resize_planes(xs, ys, [h, w, oh, ow], th.as_ref(), tw.as_ref(), nearest);
            return Ok(());
        }
    }
    let mut shape = x.shape.to_vec();
    let mut cur: Vec<f64> = x.slice::<T>()?.iter().map(|v| v.to_f64()).collect();
    for d in 0..rank {
        let crops = p.coord == "tf_crop_and_resize" && axes.contains(&d);
        if out_shape[d] == shape[d] && scale[d] == 1.0 && !crops {
            continue;
        }
        if scale[d] <= 0.0 || !scale[d].is_finite() {
            return Err(ctx.input_error(
                scales_at,
                format!("scale {} for axis {d} is not positive", scale[d]),
            ));
        }
        let taps = axis_taps(&p, scale[d], out_shape[d], shape[d], roi[d]);
        cur = resample_axis(&cur, &shape, d, out_shape[d], &taps, p.extrapolation);
        shape[d] = out_shape[d];
    }
    for (o, &v) in outputs[0].slice_mut::<T>()?.iter_mut().zip(&cur) {
        *o = T::from_f64(v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::{run, run_f32};

    /// Resize of `x` by `scales`, with an empty roi.
    fn resize(attrs: &[(&str, Attr)], x: Tensor, scales: &[f32]) -> Vec<f32> {
        let roi = Tensor::zeroed(crate::ops::DType::F32, &[0]);
        let s = Tensor::from_vec(&[scales.len()], scales);
        run_f32("Resize", attrs, &[x, roi, s])
    }

    #[test]
    fn nearest_and_linear_upsampling() {
        let x = Tensor::from_vec(&[1, 2], &[1.0f32, 3.0]);
        let nearest = [("mode", Attr::Str("nearest".into()))];
        assert_eq!(
            resize(&nearest, x.clone(), &[1.0, 2.0]),
            [1.0, 1.0, 3.0, 3.0]
        );
        // half_pixel linear: sources -0.25, 0.25, 0.75, 1.25 -> clamped edges.
        let linear = [("mode", Attr::Str("linear".into()))];
        assert_eq!(
            resize(&linear, x.clone(), &[1.0, 2.0]),
            [1.0, 1.5, 2.5, 3.0]
        );
        let corners = [
            ("mode", Attr::Str("linear".into())),
            (
                "coordinate_transformation_mode",
                Attr::Str("align_corners".into()),
            ),
        ];
        // Scale 1.5 gives 3 outputs; align_corners maps the ends onto the ends.
        assert_eq!(resize(&corners, x, &[1.0, 1.5]), [1.0, 2.0, 3.0]);
    }

    #[test]
    fn cubic_weights_sum_to_one_and_reproduce_lines() {
        let x = Tensor::from_vec(&[1, 4], &[0.0f32, 1.0, 2.0, 3.0]);
        let cubic = [
            ("mode", Attr::Str("cubic".into())),
            (
                "coordinate_transformation_mode",
                Attr::Str("asymmetric".into()),
            ),
        ];
        // Keys' kernel reproduces a linear ramp away from the edges.
        let y = resize(&cubic, x, &[1.0, 2.0]);
        assert!(
            (y[3] - 1.5).abs() < 1e-6 && (y[2] - 1.0).abs() < 1e-6,
            "{y:?}"
        );
    }

    /// The float32 fast path (`resize_planes`) against the general path, which float64
    /// tensors take: linear bit for bit (the same float64 arithmetic rounded once),
    /// nearest the same values; and both against the 2-D definitions computed here.
    /// Scales 2, 0.5, 3 and sizes that are no multiple, every coordinate mode UNets
    /// use; outputs start as NaN (the host driver poisons them).
    #[test]
    fn float32_planes_match_the_general_path_and_the_definition() {
        let modes: &[(&str, &str, &str)] = &[
            ("linear", "half_pixel", "round_prefer_floor"),
            ("linear", "align_corners", "round_prefer_floor"),
            ("linear", "asymmetric", "round_prefer_floor"),
            ("linear", "pytorch_half_pixel", "round_prefer_floor"),
            ("nearest", "asymmetric", "floor"),
            ("nearest", "half_pixel", "round_prefer_floor"),
            ("nearest", "align_corners", "round_prefer_ceil"),
            ("nearest", "tf_half_pixel_for_nn", "ceil"),
        ];
        let shapes: &[([usize; 4], [usize; 2])] = &[
            ([1, 3, 8, 8], [16, 16]),
            ([2, 2, 7, 13], [14, 26]),
            ([1, 2, 8, 10], [4, 5]),
            ([1, 1, 5, 6], [15, 18]),
            ([1, 2, 9, 17], [13, 40]),
            ([1, 2, 6, 33], [6, 50]),
            ([1, 1, 11, 4], [3, 4]),
            ([1, 40, 16, 32], [32, 64]),
            // Wide rows downsampled by more than two: no block's taps lie in 16.
            ([1, 1, 3, 120], [3, 37]),
        ];
        for &(mode, coord, nearest) in modes {
            for (si, &(shape, [oh, ow])) in shapes.iter().enumerate() {
                let n: usize = shape.iter().product();
                let x: Vec<f32> = (0..n)
                    .map(|i| ((i * 37 + si * 11) % 101) as f32 / 7.0 - 6.0)
                    .collect();
                let attrs = [
                    ("mode", Attr::Str(mode.into())),
                    ("coordinate_transformation_mode", Attr::Str(coord.into())),
                    ("nearest_mode", Attr::Str(nearest.into())),
                ];
                let sizes = Tensor::from_vec(
                    &[4],
                    &[shape[0] as i64, shape[1] as i64, oh as i64, ow as i64],
                );
                let roi = Tensor::zeroed(crate::ops::DType::F32, &[0]);
                let scales = Tensor::zeroed(crate::ops::DType::F32, &[0]);
                let run_as = |t: Tensor| {
                    run(
                        "Resize",
                        &attrs,
                        &[t, roi.clone(), scales.clone(), sizes.clone()],
                        1,
                    )
                    .remove(0)
                };
                let fast = run_as(Tensor::from_vec(&shape, &x));
                let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                let general = run_as(Tensor::from_vec(&shape, &xd));
                let fast = fast.slice::<f32>().unwrap();
                let general = general.slice::<f64>().unwrap();
                let case = format!("{mode} {coord} {nearest} {shape:?} -> {oh}x{ow}");
                assert_eq!(fast.len(), shape[0] * shape[1] * oh * ow, "{case}");
                for (i, (&f, &g)) in fast.iter().zip(general).enumerate() {
                    assert_eq!(f.to_bits(), (g as f32).to_bits(), "{case} at {i}");
                }
                // The definition: source coordinate per axis, then the taps.
                let (h, w) = (shape[2], shape[3]);
                let coord_of = |j: usize, o: usize, i: usize| -> f64 {
                    let s = o as f64 / i as f64;
                    let j = j as f64;
                    match coord {
                        "align_corners" if o == 1 => 0.0,
                        "align_corners" => j * (i as f64 - 1.0) / (o as f64 - 1.0),
                        "asymmetric" => j / s,
                        "pytorch_half_pixel" if o == 1 => 0.0,
                        "tf_half_pixel_for_nn" => (j + 0.5) / s,
                        _ => (j + 0.5) / s - 0.5,
                    }
                };
                let clamp = |v: f64, i: usize| v.max(0.0).min(i as f64 - 1.0);
                for p in 0..shape[0] * shape[1] {
                    let at = |y: usize, xx: usize| x[(p * h + y) * w + xx] as f64;
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let (cy, cx) = (coord_of(oy, oh, h), coord_of(ox, ow, w));
                            let want = if mode == "nearest" {
                                let r = |c: f64| match nearest {
                                    "floor" => c.floor(),
                                    "ceil" => c.ceil(),
                                    "round_prefer_ceil" => (c + 0.5).floor(),
                                    _ => (c - 0.5).ceil(),
                                };
                                // An axis of scale 1 is left alone (as the general
                                // path does), whatever the rounding would pick.
                                let y = if oh == h {
                                    oy
                                } else {
                                    clamp(r(cy), h) as usize
                                };
                                let xx = if ow == w {
                                    ox
                                } else {
                                    clamp(r(cx), w) as usize
                                };
                                at(y, xx)
                            } else {
                                let (cy, cx) = (clamp(cy, h), clamp(cx, w));
                                let (y0, x0) = (cy.floor() as usize, cx.floor() as usize);
                                let (y1, x1) = ((y0 + 1).min(h - 1), (x0 + 1).min(w - 1));
                                let (fy, fx) = (cy - y0 as f64, cx - x0 as f64);
                                (at(y0, x0) * (1.0 - fx) + at(y0, x1) * fx) * (1.0 - fy)
                                    + (at(y1, x0) * (1.0 - fx) + at(y1, x1) * fx) * fy
                            };
                            let got = fast[(p * oh + oy) * ow + ox] as f64;
                            assert!(
                                (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                                "{case} at {p},{oy},{ox}: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
