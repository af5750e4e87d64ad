//! The float32 pools of CNNs, row by row: AveragePool over 2-D windows, MaxPool's values
//! (other types take a generic row walk, see [`max_pool_2d`]) and GlobalAveragePool,
//! each compiled once per instruction set ([`Isa`]) so that the loops the compiler
//! vectorizes use the widest
//! vectors this CPU has (the crate itself is built for baseline x86-64, whose SSE2
//! vectors are four floats wide and have no blend).
//!
//! A 2-D pool folds a `kh x kw` window; both row kernels fold it in two passes: first
//! the window's input rows into one row (`col[x]`, a running sum or maximum down each
//! input column: unit-stride loads over the whole row), then each output column's `kw`
//! taps of that row (`out[ox] = fold(col[ox * sw + kx * dw - pw])`). The second pass is
//! the only strided one, and its stride is a constant for the strides CNNs use
//! ([`tap`]), so it vectorizes as loads and a de-interleave. Folding all taps per output
//! (the general walk) costs `kh * kw` strided passes; this costs `kh - 1` contiguous and
//! `kw` strided ones, and nothing per output but the division.

use super::scalar::Scalar;
use super::window::Window;
use crate::ops::simd::{Isa, per_isa};

/// Input elements below which all planes run in one call on the calling thread.
const PARALLEL_ELEMS: usize = 1 << 14;

/// The taps `k` in `0..kernel` of a window starting at `start` (stride applied, padding
/// subtracted) whose positions `start + k * dilation` fall inside `0..n`: one range, as
/// the positions only grow with `k`.
#[inline]
pub(super) fn inside(
    start: isize,
    dilation: usize,
    kernel: usize,
    n: usize,
) -> std::ops::Range<usize> {
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

/// Whether `win` is a 2-D window (its promoted first dim trivial), which the row
/// kernels take.
pub(super) fn is_2d(win: &Window) -> bool {
    win.input[0] == 1 && win.kernel[0] == 1 && win.output[0] == 1 && win.pad_begin[0] == 0
}

/// The output columns `lo..hi` of a 2-D window whose taps all lie inside the input row:
/// the columns the vector loops take; the few others (the edges) take a scalar walk.
fn interior(win: &Window) -> (usize, usize) {
    let (w, ow) = (win.input[2], win.output[2]);
    let (kw, sw, dw, pw) = (
        win.kernel[2],
        win.stride[2],
        win.dilation[2],
        win.pad_begin[2],
    );
    let reach = ((kw - 1) * dw) as isize;
    let lo = ((pw + sw as isize - 1) / sw as isize).max(0) as usize;
    let hi = if w as isize - 1 - reach + pw < 0 {
        0
    } else {
        (((w as isize - 1 - reach + pw) / sw as isize) + 1) as usize
    };
    (lo.min(ow), hi.min(ow).max(lo.min(ow)))
}

/// Runs `f(input planes, output planes)` over groups of whole (image, channel) planes:
/// one group on the calling thread for small inputs, else groups of at least
/// [`PARALLEL_ELEMS`] input elements in parallel. Groups, not single planes, so that a
/// pool over many small planes (a squeeze-excite's 576 planes of 7 x 7) pays one task
/// and one instruction-set dispatch per group, not per plane.
fn plane_groups<T: Scalar, F>(x: &[T], ilen: usize, y: &mut [T], olen: usize, f: F)
where
    F: Fn(&[T], &mut [T]) + Sync,
{
    use rayon::prelude::*;
    if olen == 0 || ilen == 0 {
        return;
    }
    if x.len() < PARALLEL_ELEMS {
        return f(x, y);
    }
    let per = PARALLEL_ELEMS.div_ceil(ilen);
    y.par_chunks_mut(per * olen)
        .enumerate()
        .for_each(|(g, out)| f(&x[g * per * ilen..][..out.len() / olen * ilen], out));
}

/// Per-thread scratch for the folded row (one row of the input, at most a few KB).
fn with_row<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    thread_local! {
        static ROW: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    ROW.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, 0.0);
            }
            f(&mut buf[..len])
        }
        // Re-entered on this thread (not expected: the kernels call nothing that pools).
        Err(_) => f(&mut vec![0.0; len]),
    })
}

/// `acc[i] = src[i * S]` (`first`), else `acc[i] += src[i * S]`: one tap of a window over
/// a row of outputs. With the stride a constant and the reads whole chunks of `S`, the
/// loop has no bounds checks and vectorizes (a de-interleave for `S` of 2 and 3); with a
/// run-time stride it stays one scalar load per element.
#[inline(always)]
fn tap<const S: usize>(acc: &mut [f32], src: &[f32], first: bool) {
    let Some((last, init)) = acc.split_last_mut() else {
        return;
    };
    let n = init.len();
    let body = &src[..n * S];
    if first {
        for (a, c) in init.iter_mut().zip(body.chunks_exact(S)) {
            *a = c[0];
        }
        *last = src[n * S];
    } else {
        for (a, c) in init.iter_mut().zip(body.chunks_exact(S)) {
            *a += c[0];
        }
        *last += src[n * S];
    }
}

/// [`tap`] for any stride.
#[inline(always)]
fn tap_any(acc: &mut [f32], src: &[f32], stride: usize, first: bool) {
    match stride {
        1 => tap::<1>(acc, src, first),
        2 => tap::<2>(acc, src, first),
        3 => tap::<3>(acc, src, first),
        _ => {
            for (a, &v) in acc.iter_mut().zip(src.iter().step_by(stride)) {
                *a = if first { v } else { *a + v };
            }
        }
    }
}

/// float32 AveragePool over a 2-D window ([`is_2d`]): `count_include_pad` divides by
/// the taps in the explicit padding too, never by those past it (ceil mode's last
/// window), exactly as the general walk counts them.
///
/// The sums are float32, as ONNX Runtime's (MLAS's) are: each output is its input
/// columns' sums (rows first) added in column order, then divided by the count. The
/// general walk's float64 sum rounds once; this one rounds once per addition, a few
/// units in the last place for the windows of CNNs (the conformance cases' tolerance).
pub(super) fn average_pool_2d(win: &Window, include_pad: bool, x: &[f32], y: &mut [f32]) {
    if win.input[1] == win.kernel[1]
        && win.input[2] == win.kernel[2]
        && win.output == [1, 1, 1]
        && win.pad_begin == [0; 3]
        && win.dilation == [1; 3]
    {
        // The window is the plane (ResNet's last pool): the global average, whose
        // one contiguous sum per plane has none of the row pass's per-row overhead.
        return global_average(x, win.input_len(), y);
    }
    plane_groups(x, win.input_len(), y, win.output_len(), |xs, out| {
        with_row(win.input[2], |col| {
            average_planes(win, include_pad, xs, out, col)
        })
    });
}

per_isa! {
    /// [`average_planes_any`] in the widest vectors this CPU has.
    fn average_planes(win: &Window, include_pad: bool, xs: &[f32], out: &mut [f32], col: &mut [f32])
        => average_planes_any
}

/// [`average_pool_2d`] of whole planes `xs` into `out`, `col` one input row of scratch.
#[inline(always)]
fn average_planes_any(
    win: &Window,
    include_pad: bool,
    xs: &[f32],
    out: &mut [f32],
    col: &mut [f32],
) {
    let [_, h, w] = win.input;
    let ow = win.output[2];
    let ([_, kh, kw], [_, sh, sw], [_, dh, dw]) = (win.kernel, win.stride, win.dilation);
    let (ph, pw) = (win.pad_begin[1], win.pad_begin[2]);
    // With count_include_pad, a tap counts when it lies inside the padded extent.
    let (hp, wp) = (
        (h as isize + ph + win.pad_end[1]).max(0) as usize,
        (w as isize + pw + win.pad_end[2]).max(0) as usize,
    );
    let (lo, hi) = interior(win);
    let olen = win.output_len();
    for (xs, out) in xs.chunks_exact(h * w).zip(out.chunks_exact_mut(olen)) {
        for (oy, orow) in out.chunks_exact_mut(ow).enumerate() {
            let sy = (oy * sh) as isize - ph;
            let ry = inside(sy, dh, kh, h);
            let rows = if include_pad {
                inside(sy + ph, dh, kh, hp).len()
            } else {
                ry.len()
            };
            if ry.is_empty() {
                // No input row: the sum is 0, and so is the average (or the count is
                // 0, which the general walk also makes 0).
                orow.fill(0.0);
                continue;
            }
            let row = |b: usize| &xs[(sy + (b * dh) as isize) as usize * w..][..w];
            // The column sums of the window's rows; a single row is used in place.
            let src: &[f32] = if ry.len() == 1 {
                row(ry.start)
            } else {
                col.copy_from_slice(row(ry.start));
                for b in ry.start + 1..ry.end {
                    for (c, &v) in col.iter_mut().zip(row(b)) {
                        *c += v;
                    }
                }
                col
            };
            if hi > lo {
                let acc = &mut orow[lo..hi];
                let n = hi - lo;
                for kx in 0..kw {
                    let start = ((lo * sw + kx * dw) as isize - pw) as usize;
                    tap_any(acc, &src[start..start + (n - 1) * sw + 1], sw, kx == 0);
                }
                let count = (rows * kw) as f32;
                for a in acc.iter_mut() {
                    *a /= count;
                }
            }
            // The edge columns, whose windows leave the row.
            for ox in (0..lo).chain(hi..ow) {
                let sx = (ox * sw) as isize - pw;
                let rx = inside(sx, dw, kw, w);
                let cols = if include_pad {
                    inside(sx + pw, dw, kw, wp).len()
                } else {
                    rx.len()
                };
                let mut sum = 0.0f32;
                for e in rx {
                    sum += src[(sx + (e * dw) as isize) as usize];
                }
                let count = rows * cols;
                orow[ox] = if count == 0 { 0.0 } else { sum / count as f32 };
            }
        }
    }
}

/// GlobalAveragePool in float32: each `ilen`-long plane of `x` summed into one of `y`.
pub(super) fn global_average(x: &[f32], ilen: usize, y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = Isa::detect() {
        // SAFETY: `Isa::detect` found `isa` on this CPU.
        return plane_groups(x, ilen, y, 1, |xs, out| unsafe {
            x86::global_average(isa, xs, out)
        });
    }
    plane_groups(x, ilen, y, 1, global_average_any);
}

/// GlobalMaxPool in float32: the largest value of each `ilen`-long plane of `x` into `y`,
/// NaNs passed over (a plane of NaNs alone, or an empty one, gives -inf), as the float64
/// fold of the other types gives.
pub(super) fn global_max(x: &[f32], ilen: usize, y: &mut [f32]) {
    if ilen == 0 {
        y.fill(f32::NEG_INFINITY);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = Isa::detect() {
        // SAFETY: `Isa::detect` found `isa` on this CPU.
        return plane_groups(x, ilen, y, 1, |xs, out| unsafe {
            x86::global_max(isa, xs, out)
        });
    }
    plane_groups(x, ilen, y, 1, global_max_any);
}

/// The maximum of each `xs.len() / out.len()`-long plane of `xs` into `out`, in
/// [`LANES`] running maxima folded at the end. Each is updated by a select that keeps
/// the running value unless the new one is greater (so a NaN never enters), which the
/// vectorizer turns into one vector max per chunk; the instruction set's wrappers
/// (`x86::global_max`) compile this same loop for their vector widths. A maximum is
/// exact, so the order of the lanes does not change the result.
#[inline(always)]
fn global_max_any(xs: &[f32], out: &mut [f32]) {
    let ilen = xs.len() / out.len();
    let fold = |a: f32, v: f32| if v > a { v } else { a };
    for (plane, o) in xs.chunks_exact(ilen).zip(out.iter_mut()) {
        let mut lanes = [f32::NEG_INFINITY; LANES];
        let mut chunks = plane.chunks_exact(LANES);
        for c in &mut chunks {
            for (l, &v) in lanes.iter_mut().zip(c) {
                *l = fold(*l, v);
            }
        }
        let rest = chunks.remainder().iter().copied();
        *o = lanes.into_iter().chain(rest).fold(f32::NEG_INFINITY, fold);
    }
}

/// Sums per lane: 16 independent float32 sums (one AVX-512 vector, two AVX2 ones), so the
/// additions pipeline instead of waiting on one running sum, and their order, hence the
/// result's bits, is the same on every instruction set.
const LANES: usize = 16;

/// The mean of each `xs.len() / out.len()`-long plane of `xs` into `out`, in portable
/// code: the order of the sums that `x86::global_average` keeps in vectors.
fn global_average_any(xs: &[f32], out: &mut [f32]) {
    let ilen = xs.len() / out.len();
    for (plane, o) in xs.chunks_exact(ilen).zip(out.iter_mut()) {
        let mut lanes = [0.0f32; LANES];
        let mut chunks = plane.chunks_exact(LANES);
        for c in &mut chunks {
            for (l, &v) in lanes.iter_mut().zip(c) {
                *l += v;
            }
        }
        for (l, &v) in lanes.iter_mut().zip(chunks.remainder()) {
            *l += v;
        }
        // A pairwise fold of the lanes: four dependent additions, not fifteen.
        let mut n = LANES;
        while n > 1 {
            n /= 2;
            for i in 0..n {
                lanes[i] += lanes[i + n];
            }
        }
        *o = lanes[0] / ilen as f32;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{LANES, MaxRow};
    use crate::ops::simd::{Avx2, Avx512, Isa, Simd};

    /// [`super::max_planes_vectors`]' output columns of one row from `row.lo` on, whole
    /// vectors while their taps stay inside the row, the last one overlapping its
    /// neighbour to end at `row.hi`; returns the first column not written (`row.lo` for
    /// a column stride other than 1 or 2). Without the overlapping vector, up to a
    /// vector's worth of columns per row fell to the scalar walk, which took 75% of a
    /// 3x3 stride-2 pool over 64 planes of 112 x 112 (1.0 ms, 6.5x ONNX Runtime).
    ///
    /// # Safety
    /// This CPU has `isa`.
    pub(super) unsafe fn max_row(isa: Isa, sw: usize, row: &MaxRow, out: &mut [f32]) -> usize {
        /// # Safety
        /// This CPU has AVX-512F.
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512<const SW: usize>(row: &MaxRow, out: &mut [f32]) -> usize {
            // SAFETY: this CPU has AVX-512F (the contract), all `Avx512` needs.
            unsafe { max_row_in::<Avx512, SW>(row, out) }
        }
        /// # Safety
        /// This CPU has AVX2 and FMA.
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<const SW: usize>(row: &MaxRow, out: &mut [f32]) -> usize {
            // SAFETY: this CPU has AVX2 and FMA (the contract), all `Avx2` needs.
            unsafe { max_row_in::<Avx2, SW>(row, out) }
        }
        // SAFETY: each arm's set is `isa`, this CPU's (the contract).
        unsafe {
            match (isa, sw) {
                (Isa::Avx512, 1) => avx512::<1>(row, out),
                (Isa::Avx512, 2) => avx512::<2>(row, out),
                (Isa::Avx2, 1) => avx2::<1>(row, out),
                (Isa::Avx2, 2) => avx2::<2>(row, out),
                _ => row.lo,
            }
        }
    }

    /// [`max_row`] in `S`'s vectors, column stride `SW`.
    ///
    /// # Safety
    /// This CPU has `S`'s set.
    #[inline(always)]
    unsafe fn max_row_in<S: Simd, const SW: usize>(t: &MaxRow, out: &mut [f32]) -> usize {
        let (l, kw, dw) = (S::LANES, t.kw, t.dw);
        // Floats a vector reads from its first tap's column: a stride-2 tap reads a
        // pair of vectors, and with adjacent taps (dw 1) one pair serves two of them.
        let reach = match (SW, dw) {
            (1, _) => (kw - 1) * dw + l,
            (_, 1) => (kw - 1) / 2 * 2 + 2 * l,
            _ => (kw - 1) * dw + 2 * l,
        };
        // Floats of the row the taps use: a stride-2 vector's last pair may read one
        // float past them (the odd column after an odd `kw`'s last tap), which must
        // then be inside `xs` though it may be past the row.
        let used = (l - 1) * SW + (kw - 1) * dw + 1;
        let last_row = t.first + (t.rows - 1) * t.step;
        assert!(t.rows > 0 && last_row + t.w <= t.xs.len() && t.hi <= out.len());
        // Interior columns (`lo..hi`) have `ox * SW >= pw`.
        let fits = |ox: usize| {
            let start = ox * SW - t.pw;
            start + used <= t.w && last_row + start + reach <= t.xs.len()
        };
        let mut ox = t.lo;
        loop {
            // The next `l` columns, or the interior's last `l` in one more vector
            // ending at `hi`, which takes some columns again (the same values, stored
            // again), or none.
            let at = if ox + l <= t.hi && fits(ox) {
                ox
            } else if ox < t.hi && t.hi >= t.lo + l && fits(t.hi - l) {
                t.hi - l
            } else {
                break;
            };
            let start = at * SW - t.pw;
            // SAFETY: this CPU has `S`'s set (the contract). Reads: row r's floats
            // `start .. start + reach` from `first + r * step`, for r below `rows`:
            // inside `xs` by `fits(at)`. Write: `l` floats from `at`, with `at + l <=
            // hi <= out.len()`.
            unsafe {
                let x = t.xs.as_ptr().add(t.first + start);
                let mut best = if SW == 1 {
                    S::load(x)
                } else {
                    S::load_even_odd(x).0
                };
                for r in 0..t.rows {
                    let p = x.add(r * t.step);
                    if SW == 1 {
                        for kx in 0..kw {
                            best = S::max(S::load(p.add(kx * dw)), best);
                        }
                    } else if dw == 1 {
                        for kx in (0..kw).step_by(2) {
                            let (even, odd) = S::load_even_odd(p.add(kx));
                            best = S::max(even, best);
                            if kx + 1 < kw {
                                best = S::max(odd, best);
                            }
                        }
                    } else {
                        for kx in 0..kw {
                            best = S::max(S::load_even_odd(p.add(kx * dw)).0, best);
                        }
                    }
                }
                S::store(out.as_mut_ptr().add(at), best);
            }
            ox = at + l;
        }
        ox
    }

    /// [`super::global_max_any`] compiled for `isa`.
    ///
    /// # Safety
    /// This CPU has `isa`'s set.
    pub(super) unsafe fn global_max(isa: Isa, xs: &[f32], out: &mut [f32]) {
        /// # Safety
        /// This CPU has AVX-512F.
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512(xs: &[f32], out: &mut [f32]) {
            super::global_max_any(xs, out)
        }
        /// # Safety
        /// This CPU has AVX2.
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(xs: &[f32], out: &mut [f32]) {
            super::global_max_any(xs, out)
        }
        match isa {
            // SAFETY: the caller's `isa` is this CPU's.
            Isa::Avx512 => unsafe { avx512(xs, out) },
            // SAFETY: as above.
            Isa::Avx2 => unsafe { avx2(xs, out) },
        }
    }

    /// [`super::global_average_any`]'s sums in registers. Written out rather than left
    /// to the compiler: its version of the portable loop kept the 16 sums in memory,
    /// added two floats at a time, and stored the remainder's with a masked store that
    /// the fold's loads then waited on: 3.2 us for 256 planes of 7 x 7 (a
    /// squeeze-excite's; 10 of MobileNet's 11 GlobalAveragePools are such), now 1.0 us.
    ///
    /// # Safety
    /// This CPU has `isa`.
    pub(super) unsafe fn global_average(isa: Isa, xs: &[f32], out: &mut [f32]) {
        match isa {
            // SAFETY: the caller's `isa` is this CPU's.
            Isa::Avx512 => unsafe { avx512(xs, out) },
            // SAFETY: as above.
            Isa::Avx2 => unsafe { avx2(xs, out) },
        }
    }

    /// # Safety
    /// This CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512(xs: &[f32], out: &mut [f32]) {
        // SAFETY: this CPU has AVX-512F (the contract), all `Avx512` needs.
        unsafe { planes::<Avx512>(xs, out) }
    }

    /// # Safety
    /// This CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2(xs: &[f32], out: &mut [f32]) {
        // SAFETY: this CPU has AVX2 and FMA (the contract), all `Avx2` needs.
        unsafe { planes::<Avx2>(xs, out) }
    }

    /// Each plane's 16 lane sums as `LANES / S::LANES` vectors (lane `l` of vector `v`
    /// is sum `v * S::LANES + l`), the remainder added through a zeroing load (a sum is
    /// never -0, so adding +0 to it changes nothing), then folded by halves.
    ///
    /// # Safety
    /// This CPU has `S`'s set.
    #[inline(always)]
    unsafe fn planes<S: Simd>(xs: &[f32], out: &mut [f32]) {
        let ilen = xs.len() / out.len();
        let per = LANES / S::LANES;
        for (plane, o) in xs.chunks_exact(ilen).zip(out.iter_mut()) {
            // SAFETY: every load is within `plane`: whole 16-float chunks, then for the
            // remainder's `r` floats each vector's lanes below `r`, `load_first` taking
            // only those. This CPU has `S`'s set (the contract).
            unsafe {
                let mut acc = [S::zero(); 2];
                let mut chunks = plane.chunks_exact(LANES);
                for c in &mut chunks {
                    for (v, a) in acc.iter_mut().enumerate().take(per) {
                        *a = S::add(*a, S::load(c.as_ptr().add(v * S::LANES)));
                    }
                }
                let rest = chunks.remainder();
                for (v, a) in acc.iter_mut().enumerate().take(per) {
                    let lo = v * S::LANES;
                    if lo < rest.len() {
                        let n = rest.len() - lo;
                        let x = if n >= S::LANES {
                            S::load(rest.as_ptr().add(lo))
                        } else {
                            S::load_first(rest.as_ptr().add(lo), n)
                        };
                        *a = S::add(*a, x);
                    }
                }
                let sum = if per == 2 {
                    S::add(acc[0], acc[1])
                } else {
                    acc[0]
                };
                *o = S::hsum(sum) / ilen as f32;
            }
        }
    }
}

/// MaxPool's values over a 2-D window ([`is_2d`]), any float type (`empty` the value of
/// a window with no input tap): the per-output walk's bits, see [`max_planes_any`].
pub(super) fn max_pool_2d<T: Scalar>(win: &Window, x: &[T], y: &mut [T]) {
    if T::DTYPE == crate::ops::DType::F32 {
        let (x, y): (&[f32], &mut [f32]) = (bytemuck::cast_slice(x), bytemuck::cast_slice_mut(y));
        let w = win.input[2];
        #[cfg(target_arch = "x86_64")]
        if let Some(isa) = Isa::detect()
            && matches!(win.stride[2], 1 | 2)
        {
            return plane_groups(x, win.input_len(), y, win.output_len(), |xs, out| {
                max_planes_vectors(isa, win, xs, out)
            });
        }
        return plane_groups(x, win.input_len(), y, win.output_len(), |xs, out| {
            with_row(3 * w, |scratch| max_planes_f32(win, xs, out, scratch))
        });
    }
    // Other types compare in software (f16, bf16): the generic walk, baseline build.
    plane_groups(x, win.input_len(), y, win.output_len(), |xs, out| {
        max_planes_any::<T>(win, xs, out)
    });
}

/// One output row of a 2-D MaxPool as [`x86::max_row`] takes it: the window's rows
/// inside the input, `rows` of them `step` floats apart from `first` in the planes `xs`,
/// each `w` floats; the taps `kw` columns `dw` apart from column `ox * stride - pw` for
/// output column `ox`, and the interior columns `lo..hi` ([`interior`]).
#[cfg(target_arch = "x86_64")]
struct MaxRow<'a> {
    xs: &'a [f32],
    first: usize,
    step: usize,
    rows: usize,
    w: usize,
    kw: usize,
    dw: usize,
    pw: usize,
    lo: usize,
    hi: usize,
}

/// MaxPool of float32 planes with column stride 1 or 2, in explicit vectors: each output
/// vector takes its taps in the walk's order (row by row, column by column), the first
/// tap's vector and then `max(tap, best)` per tap, which is x86's `max` (`tap > best ?
/// tap : best`): the walk's rule of keeping the first value and replacing it only by a
/// greater one, so the bits are the walk's, NaN and -0 included, with no second pass.
/// A stride-2 tap is the even lanes of a pair of vectors ([`Simd::load_even_odd`]), its
/// neighbour column the odd ones.
///
/// Why not the portable row passes ([`max_planes_f32_any`]): they take the rows' maximum
/// first and the columns' after, an order that needs a scan of the span for NaN and -0
/// to stay exact, and the compiler's stride-2 column pass shuffled one vector at a time:
/// a 2x2 pool of stride 2 over 16 x 32 x 128 took 18 us, twice ONNX Runtime's.
///
/// [`Simd::load_even_odd`]: crate::ops::simd::Simd::load_even_odd
#[cfg(target_arch = "x86_64")]
fn max_planes_vectors(isa: Isa, win: &Window, xs: &[f32], out: &mut [f32]) {
    let [_, _, w] = win.input;
    let ow = win.output[2];
    let ([_, _, kw], [_, _, sw], [_, dh, dw]) = (win.kernel, win.stride, win.dilation);
    let (lo, hi) = interior(win);
    max_rows(win, xs, out, |xs, sy, ry, orow| {
        let row = MaxRow {
            xs,
            first: (sy + (ry.start * dh) as isize) as usize * w,
            step: dh * w,
            rows: ry.len(),
            w,
            kw,
            dw,
            pw: win.pad_begin[2] as usize,
            lo,
            hi,
        };
        // SAFETY: `isa` came from `Isa::detect`, so this CPU has it.
        let done = unsafe { x86::max_row(isa, sw, &row, orow) };
        // The edge columns, whose windows leave the row, and the interior's last few
        // (under a vector, or whose vector would read past the row).
        for ox in (0..lo).chain(done..ow) {
            orow[ox] = max_walk(win, xs, sy, ox);
        }
    });
}

/// Runs `f(plane, sy, rows, out_row)` for each output row of MaxPool's planes `xs` into
/// `out` whose window has a row inside the input: `sy` the window's first row (padding
/// subtracted), `rows` its kernel rows inside the input. The other rows are -inf.
#[inline(always)]
fn max_rows(
    win: &Window,
    xs: &[f32],
    out: &mut [f32],
    mut f: impl FnMut(&[f32], isize, std::ops::Range<usize>, &mut [f32]),
) {
    let [_, h, w] = win.input;
    let ow = win.output[2];
    let ([_, kh, _], [_, sh, _], [_, dh, _]) = (win.kernel, win.stride, win.dilation);
    let olen = win.output_len();
    for (xs, out) in xs.chunks_exact(h * w).zip(out.chunks_exact_mut(olen)) {
        for (oy, orow) in out.chunks_exact_mut(ow).enumerate() {
            let sy = (oy * sh) as isize - win.pad_begin[1];
            let ry = inside(sy, dh, kh, h);
            if ry.is_empty() {
                // No row of the window is inside the input.
                orow.fill(f32::NEG_INFINITY);
            } else {
                f(xs, sy, ry, orow);
            }
        }
    }
}

per_isa! {
    /// [`max_planes_f32_any`] in the widest vectors this CPU has.
    fn max_planes_f32(win: &Window, xs: &[f32], out: &mut [f32], scratch: &mut [f32])
        => max_planes_f32_any
}

/// `dst[i] = if b[i * SB] > a[i * SA] { b[i * SB] } else { a[i * SA] }`: one step of the
/// running maximum, the new value replacing the old only when greater (x86's `maxps`,
/// one instruction). Always into a buffer other than `a`'s and `b`'s: with AVX-512 the
/// compiler turns `a[i] = if b > a[i] { b } else { a[i] }` into a masked store, and the
/// next pass's loads of those floats stall on it (3x slower than SSE2).
#[inline(always)]
fn max2<const SA: usize, const SB: usize>(dst: &mut [f32], a: &[f32], b: &[f32]) {
    let n = dst.len();
    if n == 0 {
        return;
    }
    let (a, b) = (&a[..(n - 1) * SA + 1], &b[..(n - 1) * SB + 1]);
    let (dst, dl) = dst.split_at_mut(n - 1);
    for ((d, x), y) in dst
        .iter_mut()
        .zip(a.chunks_exact(SA))
        .zip(b.chunks_exact(SB))
    {
        *d = if y[0] > x[0] { y[0] } else { x[0] };
    }
    let (x, y) = (a[(n - 1) * SA], b[(n - 1) * SB]);
    dl[0] = if y > x { y } else { x };
}

/// [`max2`] with `a` read at stride `sa` (1 or `sb`) and `b` at `sb`, constants for the
/// strides 1 to 3.
#[inline(always)]
fn max2_any(dst: &mut [f32], a: &[f32], sa: usize, b: &[f32], sb: usize) {
    match (sa, sb) {
        (1, 1) => max2::<1, 1>(dst, a, b),
        (1, 2) => max2::<1, 2>(dst, a, b),
        (2, 2) => max2::<2, 2>(dst, a, b),
        (1, 3) => max2::<1, 3>(dst, a, b),
        (3, 3) => max2::<3, 3>(dst, a, b),
        _ => {
            for (i, d) in dst.iter_mut().enumerate() {
                let (x, y) = (a[i * sa], b[i * sb]);
                *d = if y > x { y } else { x };
            }
        }
    }
}

/// The exact per-output walk of MaxPool's window at output `(sy, ox)`: taps in window
/// order, the first kept and replaced only by a greater value.
#[inline(always)]
fn max_walk(win: &Window, xs: &[f32], sy: isize, ox: usize) -> f32 {
    let [_, h, w] = win.input;
    let ([_, kh, kw], [_, _, sw], [_, dh, dw]) = (win.kernel, win.stride, win.dilation);
    let sx = (ox * sw) as isize - win.pad_begin[2];
    let rx = inside(sx, dw, kw, w);
    let mut best: Option<f32> = None;
    for b in inside(sy, dh, kh, h) {
        let row = &xs[(sy + (b * dh) as isize) as usize * w..][..w];
        for e in rx.clone() {
            let v = row[(sx + (e * dw) as isize) as usize];
            if best.is_none_or(|b| v > b) {
                best = Some(v);
            }
        }
    }
    best.unwrap_or(f32::NEG_INFINITY)
}

/// float32 MaxPool's values of whole planes, in two passes per output row (see the
/// module): the running maximum down the window's rows into `col`, then across each
/// output's `kw` columns of it, every step a [`max2`] into a fresh buffer. `scratch`
/// holds three input rows.
///
/// The result has the bits of the per-output walk ([`max_walk`]: taps in row-major
/// order, the first kept, replaced only by a greater value), which this order reaches
/// too except in two cases, both checked for per output row and recomputed by the walk:
/// a NaN in a window's first row but not its first tap (the walk skips that NaN, the
/// column pass lets it hide its column), and a maximum of zero (+0 and -0 tie, and the
/// walk keeps the first in row-major order, the column pass in column-major order).
#[inline(always)]
fn max_planes_f32_any(win: &Window, xs: &[f32], out: &mut [f32], scratch: &mut [f32]) {
    let [_, _, w] = win.input;
    let ow = win.output[2];
    let ([_, _, kw], [_, _, sw], [_, dh, dw]) = (win.kernel, win.stride, win.dilation);
    let pw = win.pad_begin[2];
    let (lo, hi) = interior(win);
    let n = hi - lo;
    let (col, rest) = scratch.split_at_mut(w);
    let (alt, tmp) = rest.split_at_mut(w);
    max_rows(win, xs, out, |xs, sy, ry, orow| {
        let row = |b: usize| &xs[(sy + (b * dh) as isize) as usize * w..][..w];
        // Down the rows, alternating between two buffers.
        let mut src: &[f32] = row(ry.start);
        let (mut cur, mut next) = (&mut *col, &mut *alt);
        for b in ry.start + 1..ry.end {
            max2::<1, 1>(next, src, row(b));
            std::mem::swap(&mut cur, &mut next);
            src = cur;
        }
        if n > 0 {
            // Across the columns: tap kx of output ox reads src[ox * sw + off(kx)].
            let at = |kx: usize| ((lo * sw + kx * dw) as isize - pw) as usize;
            let dst = &mut orow[lo..hi];
            let tmp = &mut tmp[..n];
            if kw == 1 {
                for (d, &v) in dst.iter_mut().zip(src[at(0)..].iter().step_by(sw)) {
                    *d = v;
                }
            } else {
                // Taps 0 and 1 into whichever buffer makes the last step land in
                // `dst`, then each further tap into the other one.
                let odd = (kw - 2) % 2 == 1;
                let (mut a, mut b) = if odd { (tmp, dst) } else { (dst, tmp) };
                max2_any(a, &src[at(0)..], sw, &src[at(1)..], sw);
                for kx in 2..kw {
                    max2_any(b, a, 1, &src[at(kx)..], sw);
                    std::mem::swap(&mut a, &mut b);
                }
            }
            // The two cases the order changes (see above), rare in real data: a NaN,
            // or a zero maximum where a -0 could tie with a +0. A -0 the walk would
            // keep, or the column pass return, is in `span` (the first zero of its
            // column in row order stays the column's), so without one every zero
            // maximum is +0 either way: a ReLU's zeros cost nothing here.
            let span = &src[at(0)..at(kw - 1) + (n - 1) * sw + 1];
            let (nan, neg_zero) = span.iter().fold((false, false), |(n, z), v| {
                (n | v.is_nan(), z | (v.to_bits() == (-0.0f32).to_bits()))
            });
            if nan || neg_zero {
                for (ox, o) in orow.iter_mut().enumerate().take(hi).skip(lo) {
                    if nan || *o == 0.0 {
                        *o = max_walk(win, xs, sy, ox);
                    }
                }
            }
        }
        // The edge columns, whose windows leave the row.
        for ox in (0..lo).chain(hi..ow) {
            orow[ox] = max_walk(win, xs, sy, ox);
        }
    });
}

/// MaxPool's values of whole planes, row by row: each output row keeps one running
/// maximum per output column, and each tap of the window updates the whole row at once,
/// `acc[ox] = max(acc[ox], x[ox * stride + offset])`. The columns whose window lies
/// inside the row (all but a few at the edges) run that loop with no bounds logic,
/// which the compiler vectorizes; the edge columns take the per-output walk. Taps are
/// visited in window order and each running maximum starts at its first valid tap and
/// is replaced only by a greater value, as in the general walk, so the result has the
/// same bits (NaN and ties included). Per output the old walk spent a bounds test, an
/// `Option` and a branch on every tap: SqueezeNet's three MaxPools were half its time.
#[inline(always)]
fn max_planes_any<T: Scalar>(win: &Window, xs: &[T], out: &mut [T]) {
    let [_, h, w] = win.input;
    let ow = win.output[2];
    let ([_, kh, kw], [_, sh, sw], [_, dh, dw]) = (win.kernel, win.stride, win.dilation);
    let (ph, pw) = (win.pad_begin[1], win.pad_begin[2]);
    let (lo, hi) = interior(win);
    let empty = T::from_f64(f64::NEG_INFINITY);
    let olen = win.output_len();
    for (xs, out) in xs.chunks_exact(h * w).zip(out.chunks_exact_mut(olen)) {
        for (oy, acc) in out.chunks_exact_mut(ow).enumerate() {
            let sy = (oy * sh) as isize - ph;
            let ry = inside(sy, dh, kh, h);
            let mut first = true;
            for b in ry.clone() {
                let row = &xs[(sy + (b * dh) as isize) as usize * w..][..w];
                for kx in 0..kw {
                    // The tap of output column lo, then every `sw`-th element after it.
                    let start = ((lo * sw + kx * dw) as isize - pw) as usize;
                    let n = hi - lo;
                    if n == 0 {
                        break;
                    }
                    let src = &row[start..start + (n - 1) * sw + 1];
                    let acc = &mut acc[lo..hi];
                    match sw {
                        1 => running_max::<T, 1>(acc, src, first),
                        2 => running_max::<T, 2>(acc, src, first),
                        3 => running_max::<T, 3>(acc, src, first),
                        _ => {
                            for (a, &c) in acc.iter_mut().zip(src.iter().step_by(sw)) {
                                *a = if first || c > *a { c } else { *a };
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
                for b in ry.clone() {
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
    }
}

/// `acc[i] = src[i * S]` (`first`), else `acc[i] = src[i * S]` where that is greater:
/// one tap of a pool window over a row of outputs. The stride is a constant, so the
/// strided reads are whole chunks and the loop carries no bounds checks: it
/// vectorizes, with a de-interleave for strides 2 and 3.
#[inline(always)]
fn running_max<T: Scalar, const S: usize>(acc: &mut [T], src: &[T], first: bool) {
    let Some((last, init)) = acc.split_last_mut() else {
        return;
    };
    let n = init.len();
    let body = &src[..n * S];
    if first {
        for (a, c) in init.iter_mut().zip(body.chunks_exact(S)) {
            *a = c[0];
        }
        *last = src[n * S];
    } else {
        // A select that always stores, not a store under a branch: the compiler turns
        // it into a vector max (x86's `maxps` keeps its second operand unless the first
        // is greater, NaN included: this very rule), where the conditional store became
        // one masked scalar store per lane, ten times slower.
        for (a, c) in init.iter_mut().zip(body.chunks_exact(S)) {
            *a = if c[0] > *a { c[0] } else { *a };
        }
        if src[n * S] > *last {
            *last = src[n * S];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector MaxPool gives the per-output walk's bits on every instruction set
    /// this CPU has: strides 1 and 2, adjacent and dilated taps, padding, rows a few
    /// vectors wide with and without a remainder, and NaN, ties and zeros of both signs
    /// among the values (the first of a tie in window order is kept).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_max_pool_gives_the_walks_bits() {
        let value = |i: usize| match (i * 7) % 29 {
            0 => f32::NAN,
            1 | 2 => 0.5,
            3 => 0.0,
            4 => -0.0,
            5 => f32::NEG_INFINITY,
            k => (k as f32 * 1.3).sin() * 3.0,
        };
        // (h, w, kernel, stride, dilation, pad begin, pad end)
        type Case = (
            usize,
            usize,
            [usize; 2],
            [usize; 2],
            [usize; 2],
            [isize; 2],
            [isize; 2],
        );
        let cases: [Case; 12] = [
            // A stem's 3x3 stride-2 pool: the last vector of a row overlaps its
            // neighbour, and in the last rows its one float past the taps is past `xs`.
            (7, 112, [3, 3], [2, 2], [1, 1], [1, 1], [1, 1]),
            (5, 57, [3, 3], [2, 2], [1, 1], [0, 0], [0, 0]),
            (6, 29, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
            (4, 100, [2, 2], [2, 2], [1, 1], [0, 0], [0, 0]),
            (8, 64, [2, 2], [2, 2], [1, 1], [0, 0], [0, 0]),
            (6, 67, [2, 2], [2, 2], [1, 1], [0, 0], [0, 0]),
            (8, 32, [2, 1], [2, 1], [1, 1], [0, 0], [0, 0]),
            (9, 70, [3, 3], [2, 2], [1, 1], [1, 1], [1, 1]),
            (7, 41, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
            (5, 130, [1, 4], [1, 2], [1, 1], [0, 0], [0, 0]),
            (9, 75, [2, 3], [2, 2], [2, 2], [0, 1], [0, 1]),
            (4, 50, [3, 2], [1, 1], [1, 3], [1, 0], [1, 0]),
        ];
        for (h, w, k, st, d, pb, pe) in cases {
            let out = |i: usize| {
                ((h as isize + pb[i] + pe[i] - (d[i] * (k[i] - 1) + 1) as isize) / st[i] as isize
                    + 1) as usize
            };
            let win = Window {
                input: [1, h, w],
                output: [1, out(0), out(1)],
                kernel: [1, k[0], k[1]],
                stride: [1, st[0], st[1]],
                dilation: [1, d[0], d[1]],
                pad_begin: [0, pb[0], pb[1]],
                pad_end: [0, pe[0], pe[1]],
            };
            let planes = 3;
            let x: Vec<f32> = (0..planes * h * w).map(value).collect();
            let mut want = vec![f32::NAN; planes * win.output_len()];
            max_planes_any::<f32>(&win, &x, &mut want);
            for isa in Isa::available() {
                let mut got = vec![1.25; planes * win.output_len()];
                max_planes_vectors(isa, &win, &x, &mut got);
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{isa:?} {win:?}");
            }
        }
    }

    /// The vector GlobalAveragePool gives the portable fold's bits on every instruction
    /// set this CPU has, over plane lengths around the 16 lanes and each vector's width,
    /// with zeros of both signs, infinities, NaN and subnormals among the values.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_global_average_gives_the_portable_bits() {
        let special = [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-42];
        for ilen in (1..=40).chain([49, 63, 64, 65, 196]) {
            for case in 0..3 {
                let planes = 5;
                let x: Vec<f32> = (0..planes * ilen)
                    .map(|i| match (case, i % 11) {
                        (0, _) => ((i * 7919) % 2003) as f32 / 97.0 - 10.0,
                        (1, _) => -0.0,
                        (_, 3) => special[i % special.len()],
                        _ => ((i * 104729) % 1009) as f32 * 1e-3,
                    })
                    .collect();
                let mut want = vec![f32::NAN; planes];
                global_average_any(&x, &mut want);
                for isa in Isa::available() {
                    let mut got = vec![f32::NAN; planes];
                    // SAFETY: `Isa::available` lists only sets this CPU has.
                    unsafe { x86::global_average(isa, &x, &mut got) };
                    // Any NaN for a NaN: which operand's payload an addition keeps is
                    // the compiler's choice in the portable loop.
                    let bits = |v: &[f32]| {
                        v.iter()
                            .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(bits(&got), bits(&want), "{isa:?}, {ilen}, case {case}");
                }
            }
        }
    }
}
