//! Depthwise float32 convolution (one input and one output channel per group) with the
//! channels in the vector lanes, on x86-64 with AVX-512 or AVX2 and FMA.
//!
//! Why not conv_direct.rs's depthwise kernel, which vectorizes along an output row: the
//! depthwise layers of MobileNets and EfficientNets are many channels over small
//! images (576 channels of 7x7 with a 5x5 kernel). A 7-column row fills 7 of AVX-512's
//! 16 lanes, each channel pays its own padded copy and kernel calls, and a channel's
//! rows give too few independent sums to hide the FMA's latency; those layers ran at 3-4
//! times ONNX Runtime's time, whose kernel works on channel-blocked (NCHWc) data. Here:
//!
//! - A block of `LANES` channels is transposed, 16x16 (or 8x8) in registers, into a
//!   zero-bordered plane of channel vectors: element (y, x) of the padded input is one
//!   vector holding the block's channels there. Every lane does useful work whatever
//!   the image's width, and a stride needs no polyphase planes: output (oy, ox) reads
//!   the vectors at `(oy sh + a dh, ox sw + b dw)`, one load per tap.
//! - Per tap, one vector of the block's weights (transposed once per block) is
//!   multiplied into up to [`ACCS`] outputs of a row, each its own chain of FMAs.
//! - The sums, a tile of channel vectors, are transposed back into the block's output
//!   planes, which the fused activation ([`Epilogue`]) then updates while in cache.
//! - A plane of up to [`WHOLE_PLANE`] vectors (7 x 7 images) is transposed in whole,
//!   every transpose filled whatever the rows; a larger one in a band of the rows one
//!   output row reads, each transposed in as the band moves down, and the sums an
//!   output row at a time: the band, the weights and the row stay in L1, where a whole
//!   plane of 28 x 28 (57 KiB of vectors) went through L2 twice.
//!
//! The transposes cost about a quarter of a cycle per float on AVX-512; on large images
//! a row fills the lanes anyway and conv_direct.rs's kernel, which transposes nothing,
//! is faster ([`Depthwise::pays`]). Each output lane is the bias plus the taps in turn,
//! each an FMA, as in that kernel: the two give the same bits.

use rayon::prelude::*;

use super::conv_direct::MAX_TAPS;
use super::epilogue::Epilogue;
use super::window::{Flat, Window};
use crate::ops::simd::Isa;

/// Widest vector (floats) of any set.
const MAX_LANES: usize = 16;
/// Outputs one kernel call sums at once: independent FMA chains enough to cover the
/// FMA's latency on two ports, with registers left on AVX2's 16 for the loads.
const ACCS: usize = 8;
/// Largest padded plane (in vectors) a block transposes whole; past it a block works
/// in a band of rows (`x86::band`). Measured on MobileNetV3's depthwise layers
/// (AVX-512): 5x5 over 7 x 7 (a plane of 11 x 11) is 20% faster whole, its 7-column
/// rows filling under half of each transpose a band makes; 3x3 over 28 x 28 of stride
/// 2 (57 x 57) a third faster in a band, over 14 x 14 of 5x5 (18 x 18) 10%.
const WHOLE_PLANE: usize = 192;

/// The plane rows one output row of `g` reads, `(kh - 1) dh + 1`: what a band holds.
fn band_rows(g: &Flat) -> usize {
    (g.kh - 1) * g.dh + 1
}

/// A depthwise window over one image, channels in the lanes of `isa`'s vectors.
#[derive(Debug, Clone)]
pub(super) struct Depthwise {
    isa: Isa,
    g: Flat,
    /// The padded plane's height and width: every element some tap reads.
    hp: usize,
    wp: usize,
    /// Each tap's offset, in vectors, from the plane element of its output's first tap.
    offs: [usize; MAX_TAPS],
    /// Plane rows a block holds at once when it works in a band (the rows one output
    /// row reads, `(kh - 1) dh + 1`), or 0 when it transposes the whole plane.
    band: usize,
}

impl Depthwise {
    /// The plan for `win` on `isa`, if it applies: at most two spatial dims, at most
    /// [`MAX_TAPS`] taps, a non-empty output, padding that is not negative, and sizes
    /// whose products do not wrap. `isa` must be a set this CPU has, from
    /// [`Isa::detect`] or [`Isa::available`].
    pub(super) fn plan(win: &Window, isa: Isa) -> Option<Depthwise> {
        let g = win.flat(MAX_TAPS)?;
        let span = |o: usize, s: usize, k: usize, d: usize| -> Option<usize> {
            (o - 1)
                .checked_mul(s)?
                .checked_add((k - 1).checked_mul(d)?)?
                .checked_add(1)
        };
        let hp = span(g.oh, g.sh, g.kh, g.dh)?;
        let wp = span(g.ow, g.sw, g.kw, g.dw)?;
        // Every size the kernels address, in floats, must not wrap (a crafted dilation).
        hp.checked_mul(wp)?
            .checked_add(g.oh.checked_mul(g.ow)?)?
            .checked_add(g.taps + 1)?
            .checked_mul(MAX_LANES)?;
        g.h.checked_mul(g.w)?.checked_mul(MAX_LANES)?;
        let whole = hp * wp <= WHOLE_PLANE;
        let mut plan = Depthwise {
            isa,
            g,
            hp,
            wp,
            offs: [0; MAX_TAPS],
            band: if whole { 0 } else { band_rows(&g) },
        };
        for (t, off) in plan.offs[..g.taps].iter_mut().enumerate() {
            *off = t / g.kw * g.dh * wp + t % g.kw * g.dw;
        }
        Some(plan)
    }

    /// This plan, working in bands (`true`) or on whole planes whatever the size.
    #[cfg(test)]
    fn banded(mut self, on: bool) -> Depthwise {
        self.band = if on { band_rows(&self.g) } else { 0 };
        self
    }

    /// Whether this window runs faster here than on conv_direct.rs's row kernel: when an
    /// output row fills at most two vectors (its last one partly). Measured on
    /// MobileNetV3's depthwise layers (AVX-512): 7 to 28 columns, strided or not, take
    /// 30-70% less time here; 56 columns of stride 2 (16 channels) take 15% more, the
    /// transposes then costing more than the row kernel's partly filled vectors.
    pub(super) fn pays(&self) -> bool {
        self.g.ow <= 2 * self.lanes()
    }

    fn lanes(&self) -> usize {
        self.isa.lanes()
    }

    /// Floats of working memory one block of channels takes: the padded plane (or the
    /// band's rows and a row of zeros), the sums (or one output row's) and the
    /// transposed weights.
    fn scratch_len(&self) -> usize {
        let vectors = if self.band > 0 {
            (self.band + 1) * self.wp + self.g.ow
        } else {
            self.hp * self.wp + self.g.oh * self.g.ow
        };
        (vectors + self.g.taps) * self.lanes()
    }

    /// `out` (`[C, oh * ow]`) = the depthwise convolution of `x` (`[C, h * w]`) with `w`
    /// (`[C, taps]`) plus `bias` (`[C]`, or zeros), then `epilogue`. `parallel` splits
    /// the blocks of channels across rayon's threads.
    pub(super) fn conv(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        out: &mut [f32],
        parallel: bool,
    ) {
        let (plane, olen, l) = (self.g.h * self.g.w, self.g.oh * self.g.ow, self.lanes());
        let c = out.len() / olen;
        assert!(
            out.len() == c * olen
                && x.len() >= c * plane
                && w.len() >= c * self.g.taps
                && bias.is_none_or(|b| b.len() >= c),
            "depthwise conv: operands do not fit the window"
        );
        let block = |i: usize, y: &mut [f32]| {
            let (c0, n) = (i * l, y.len() / olen);
            let xb = &x[c0 * plane..][..n * plane];
            let wb = &w[c0 * self.g.taps..][..n * self.g.taps];
            let bb = bias.map(|b| &b[c0..][..n]);
            super::scratch::with_scratch(self.scratch_len(), |s: &mut [f32]| {
                self.block(xb, wb, bb, y, s);
            });
            if let Some(e) = epilogue {
                e.apply_f32(y);
            }
        };
        if parallel && c > l {
            out.par_chunks_mut(l * olen)
                .enumerate()
                .for_each(|(i, y)| block(i, y));
        } else {
            for (i, y) in out.chunks_mut(l * olen).enumerate() {
                block(i, y);
            }
        }
    }

    /// One block of `n <= LANES` channels: `y` (`[n, oh * ow]`) from `x` (`[n, h * w]`),
    /// `w` (`[n, taps]`) and `bias`, with `scratch` (at least [`Depthwise::scratch_len`]
    /// floats, contents unspecified) for the padded plane, the sums and the transposed
    /// weights.
    fn block(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        y: &mut [f32],
        scratch: &mut [f32],
    ) {
        let (l, taps, wp) = (self.lanes(), self.g.taps, self.wp);
        let n = y.len() / (self.g.oh * self.g.ow);
        let (plane_rows, sums_len) = if self.band > 0 {
            (self.band + 1, self.g.ow)
        } else {
            (self.hp, self.g.oh * self.g.ow)
        };
        let (plane, rest) = scratch.split_at_mut(plane_rows * wp * l);
        let (sums, rest) = rest.split_at_mut(sums_len * l);
        let wt = &mut rest[..taps * l];
        // The padding: the rows above and below the input, and each input row's columns
        // before and after it (the input past the plane's edge no tap reads). A band's
        // rows are all input rows, over a last row of zeros for the padding rows.
        let (rows, cols) = self.inside();
        for (r, row) in plane.chunks_exact_mut(wp * l).enumerate() {
            let input = if self.band > 0 {
                r < self.band
            } else {
                rows.contains(&r)
            };
            if input {
                let (before, rest) = row.split_at_mut(self.g.pl.min(wp) * l);
                before.fill(0.0);
                rest[cols * l..].fill(0.0);
            } else {
                row.fill(0.0);
            }
        }
        let mut args = BlockArgs {
            plan: self,
            x,
            w,
            bias,
            n,
            plane,
            sums,
            wt,
            y,
        };
        // SAFETY: `self.isa` came from `Isa::detect` or `Isa::available` (see `plan`), so
        // this CPU has it; the slices are sized as `BlockArgs` requires: `plane` and
        // `sums` and `wt` were cut from `scratch` at their sizes (`scratch_len`), `x`
        // holds `n` planes of `h * w`, `w` `n` rows of `taps`, `bias` (if any) `n`
        // floats and `y` `n` planes of `oh * ow` (`conv` sliced them so), with `1 <= n
        // <= LANES`.
        unsafe { run_block(self.isa, &mut args) }
    }

    /// The plane rows that hold input rows, and how many input columns each holds (from
    /// plane column `pl` on).
    fn inside(&self) -> (std::ops::Range<usize>, usize) {
        let top = self.g.pt.min(self.hp);
        let rows = top..(self.g.pt + self.g.h).min(self.hp);
        (rows, self.g.w.min(self.wp.saturating_sub(self.g.pl)))
    }
}

/// One block's operands for the kernel ([`run_block`]).
struct BlockArgs<'a> {
    plan: &'a Depthwise,
    /// The block's `n` input planes, `h * w` floats each.
    x: &'a [f32],
    /// The block's weights, `n` rows of `taps`.
    w: &'a [f32],
    /// The block's bias, `n` floats.
    bias: Option<&'a [f32]>,
    /// Channels in the block, `1..=LANES`.
    n: usize,
    /// The padded plane, `hp * wp` vectors, its padding already zero; in a band, `band`
    /// rows of `wp` vectors (their padding columns zero) and a row of zeros.
    plane: &'a mut [f32],
    /// The sums, `oh * ow` vectors; in a band, `ow`.
    sums: &'a mut [f32],
    /// Room for the weights transposed, `taps` vectors (a lane per channel).
    wt: &'a mut [f32],
    /// The block's `n` output planes, `oh * ow` floats each.
    y: &'a mut [f32],
}

/// Runs the block kernel of `isa` (see `x86::block`).
///
/// # Safety
/// This CPU has `isa` (from [`Isa::detect`] or [`Isa::available`]), and `args`'s slices
/// have the sizes [`BlockArgs`] states for its plan, with vectors of `isa`'s width.
unsafe fn run_block(isa: Isa, args: &mut BlockArgs) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: each arm calls the kernel compiled for the set `isa` names, which this CPU
    // has (the contract); `args` is forwarded under the same terms.
    unsafe {
        match isa {
            Isa::Avx512 => x86::block_avx512(args),
            Isa::Avx2 => x86::block_avx2(args),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, args);
        unreachable!("Isa::detect finds no kernel on this architecture")
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::conv_direct::MAX_TAPS;
    use super::super::window::Flat;
    use super::{ACCS, BlockArgs, MAX_LANES};
    use crate::ops::simd::{Avx2, Avx512, Simd, compiled_for, transpose};

    /// `N` consecutive outputs of an output row: each the bias plus, per tap, the tap's
    /// weight vector times the plane vector at `taps[k] + at + i * step`, stored at
    /// `out + i * LANES`.
    ///
    /// # Safety
    /// This CPU has `S`'s set; for every tap pointer `t` and `i < N` the vector at
    /// `t + at + i * step` is readable, the `taps.len()` vectors at `wt` are, and the
    /// `N` vectors at `out` are writable and alias no read.
    #[inline(always)]
    unsafe fn outputs<S: Simd, const N: usize>(
        taps: &[*const f32],
        at: usize,
        step: usize,
        wt: *const f32,
        bias: S::V,
        out: *mut f32,
    ) {
        // SAFETY: the loads and stores are those the contract names, on its set.
        unsafe {
            let mut acc = [bias; N];
            for (k, &t) in taps.iter().enumerate() {
                let wv = S::load(wt.add(k * S::LANES));
                let xp = t.add(at);
                for (i, a) in acc.iter_mut().enumerate() {
                    *a = S::fma(wv, S::load(xp.add(i * step)), *a);
                }
            }
            for (i, a) in acc.iter().enumerate() {
                S::store(out.add(i * S::LANES), *a);
            }
        }
    }

    /// One output row's sums, `ow` vectors from `out` on: [`outputs`] over the row in
    /// runs of [`ACCS`], `taps` pointing at each tap's plane vector for the row's first
    /// output.
    ///
    /// # Safety
    /// As [`outputs`] for every run: each tap's `ow` vectors `step` floats apart are
    /// readable, and the `ow` vectors at `out` writable.
    #[inline(always)]
    unsafe fn row<S: Simd>(
        taps: &[*const f32],
        ow: usize,
        step: usize,
        wt: *const f32,
        bias: S::V,
        out: *mut f32,
    ) {
        // SAFETY: each run reads and writes within the row, as the contract states.
        unsafe {
            for ox0 in (0..ow).step_by(ACCS) {
                let (at, out) = (ox0 * step, out.add(ox0 * S::LANES));
                match (ow - ox0).min(ACCS) {
                    1 => outputs::<S, 1>(taps, at, step, wt, bias, out),
                    2 => outputs::<S, 2>(taps, at, step, wt, bias, out),
                    3 => outputs::<S, 3>(taps, at, step, wt, bias, out),
                    4 => outputs::<S, 4>(taps, at, step, wt, bias, out),
                    5 => outputs::<S, 5>(taps, at, step, wt, bias, out),
                    6 => outputs::<S, 6>(taps, at, step, wt, bias, out),
                    7 => outputs::<S, 7>(taps, at, step, wt, bias, out),
                    _ => outputs::<S, ACCS>(taps, at, step, wt, bias, out),
                }
            }
        }
    }

    /// Transposes input row `iy`'s first `cols` columns of the block's `n` channels into
    /// the plane vectors from `dst` on.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `iy < h`, `cols <= w`, `1 <= n <= LANES`, `x` holds `n`
    /// planes of `h * w` floats and the `cols` vectors at `dst` are writable.
    #[inline(always)]
    unsafe fn pack_row<S: Simd>(
        x: *const f32,
        g: &Flat,
        n: usize,
        iy: usize,
        cols: usize,
        dst: *mut f32,
    ) {
        let l = S::LANES;
        // SAFETY: reads columns `x0..x0 + m <= cols` of row `iy` of each of the `n`
        // planes, writes vectors `x0..x0 + m` from `dst`: the memory the contract names.
        unsafe {
            let src = x.add(iy * g.w);
            for x0 in (0..cols).step_by(l) {
                let m = (cols - x0).min(l);
                transpose::<S>(src.add(x0), g.h * g.w, (n, m), |j| dst.add((x0 + j) * l), l);
            }
        }
    }

    /// Transposes `count` vectors of sums from `sums` into positions `0..count` from
    /// `out` of the block's `n` output planes, `olen` floats apart.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `1 <= n <= LANES`, the `count` vectors at `sums` are
    /// readable and the `count` floats from `out + j * olen` writable for each `j < n`.
    #[inline(always)]
    unsafe fn unpack<S: Simd>(
        sums: *const f32,
        count: usize,
        n: usize,
        out: *mut f32,
        olen: usize,
    ) {
        let l = S::LANES;
        // SAFETY: reads sum vectors `p0..p0 + m <= count`, writes positions `p0..p0 + m`
        // of planes `j < n`: the memory the contract names.
        unsafe {
            for p0 in (0..count).step_by(l) {
                let m = (count - p0).min(l);
                transpose::<S>(sums.add(p0 * l), l, (m, n), |j| out.add(p0 + j * olen), m);
            }
        }
    }

    /// One block: the input planes transposed into the padded plane's interior, every
    /// output's sums, and the sums transposed into the output planes; or, in a band,
    /// the same an output row at a time (see [`band`]).
    ///
    /// # Safety
    /// This CPU has `S`'s set, and `a` is valid for it (see `run_block`).
    #[inline(always)]
    unsafe fn block<S: Simd>(a: &mut BlockArgs) {
        let p = a.plan;
        let l = S::LANES;
        // SAFETY: the set is this CPU's (the contract); the weights transpose reads the
        // `n` rows of `taps` floats of `a.w` and writes the `taps` vectors of `a.wt`;
        // the bias load reads `n` floats of the bias; `whole` and `band` are called on
        // `a` under the contract.
        unsafe {
            // The weights, tap-major: a vector of the block's channels per tap.
            let wt = a.wt.as_mut_ptr();
            for k0 in (0..p.g.taps).step_by(l) {
                let m = (p.g.taps - k0).min(l);
                let src = a.w.as_ptr().add(k0);
                transpose::<S>(src, p.g.taps, (a.n, m), |j| wt.add((k0 + j) * l), l);
            }
            let bias = match a.bias {
                Some(b) if a.n == l => S::load(b.as_ptr()),
                Some(b) => S::load_first(b.as_ptr(), a.n),
                None => S::zero(),
            };
            if p.band > 0 {
                band::<S>(a, bias);
            } else {
                whole::<S>(a, bias);
            }
        }
    }

    /// A block over its whole padded plane, transposed in once: the narrow images,
    /// whose plane fits in L1, fill every transpose with `LANES` positions whatever
    /// their rows.
    ///
    /// # Safety
    /// As [`block`], with the weights transposed into `a.wt`.
    #[inline(always)]
    unsafe fn whole<S: Simd>(a: &mut BlockArgs, bias: S::V) {
        let p = a.plan;
        let l = S::LANES;
        let (wp, olen) = (p.wp, p.g.oh * p.g.ow);
        let (rows, cols) = p.inside();
        let xs = a.x.as_ptr();
        let plane = a.plane.as_mut_ptr();
        let sums = a.sums.as_mut_ptr();
        let wt = a.wt.as_ptr();
        // SAFETY: the set is this CPU's (the contract). Bounds, with `a`'s sizes (see
        // `BlockArgs`):
        // - Packing reads input row `r - pt < h` of each of the `n` planes, columns
        //   `x0..x0 + m` with `x0 + m <= cols <= w`: inside `x`. It writes the vectors of
        //   plane row `r < hp`, columns `pl + x0 .. pl + x0 + m` with `pl + cols <= wp`
        //   (`inside`): inside `plane`.
        // - Output (oy, ox) reads the vectors at `(oy sh + a dh) wp + ox sw + b dw`,
        //   whose row is at most `(oh - 1) sh + (kh - 1) dh = hp - 1` and column at most
        //   `wp - 1` (how `plan` sized the plane): inside `plane`. Its sum is stored
        //   at vector `oy ow + ox < oh ow`: inside `sums`. The weights are `taps`
        //   vectors, the bias one.
        // - Unpacking reads sum vectors `p0..p0 + m <= olen`, and writes positions
        //   `p0..p0 + m` of output planes `j < n`: inside `y`.
        // `plane` and `sums` are written only through these pointers while no
        // reference to them is used, and `y` is a unique borrow aliasing neither.
        unsafe {
            // The input: as whole planes, LANES positions a transpose, when every
            // column lands in the plane (a narrow image fills its transposes so);
            // row by row when the plane drops some.
            let plane_len = p.g.h * p.g.w;
            if cols == p.g.w {
                let count = rows.len() * p.g.w;
                // Each position's plane vector, stepped along: the next vector, past the
                // padding columns at the end of a row (no multiply or division per
                // position; they were most of the packing's instructions).
                let (mut at, mut c) = (plane.add((rows.start * wp + p.g.pl) * l), 0);
                let gap = (wp - p.g.w) * l;
                let mut dst = [plane; MAX_LANES];
                for q0 in (0..count).step_by(l) {
                    let m = (count - q0).min(l);
                    for d in &mut dst[..m] {
                        *d = at;
                        at = at.wrapping_add(l);
                        c += 1;
                        if c == p.g.w {
                            at = at.wrapping_add(gap);
                            c = 0;
                        }
                    }
                    transpose::<S>(xs.add(q0), plane_len, (a.n, m), |j| dst[j], l);
                }
            } else {
                for r in rows {
                    // Wrapping: with padding wider than the plane no column lands in
                    // it (`cols` 0), and nothing is written through this pointer.
                    let dst = plane.wrapping_add((r * wp + p.g.pl) * l);
                    pack_row::<S>(xs, &p.g, a.n, r - p.g.pt, cols, dst);
                }
            }
            let taps = &p.offs[..p.g.taps];
            let mut ptrs = [plane.cast_const(); MAX_TAPS];
            let step = p.g.sw * l;
            for oy in 0..p.g.oh {
                let row0 = plane.add(oy * p.g.sh * wp * l);
                for (t, &off) in ptrs.iter_mut().zip(taps) {
                    *t = row0.add(off * l);
                }
                let out = sums.add(oy * p.g.ow * l);
                row::<S>(&ptrs[..taps.len()], p.g.ow, step, wt, bias, out);
            }
            unpack::<S>(sums, olen, a.n, a.y.as_mut_ptr(), olen);
        }
    }

    /// A block an output row at a time, over a band of the plane's rows: the rows one
    /// output row reads, each transposed in as the rows before it are done with (row
    /// `r` in band row `r % band`), a row of zeros for the padding rows; the row's sums,
    /// then transposed out. Why: a whole plane of a 28 x 28 map is 57 KiB of vectors
    /// (208 KiB at 56 x 56), past L1, so transposing it in wrote to L2 and the FMAs read
    /// it back from there; a band of 3 to 5 rows and one output row stay in L1.
    ///
    /// # Safety
    /// As [`block`], with the weights transposed into `a.wt` and `a.plane` holding
    /// `band + 1` rows of `wp` vectors, their padding zero (the last row all zeros).
    #[inline(always)]
    unsafe fn band<S: Simd>(a: &mut BlockArgs, bias: S::V) {
        let p = a.plan;
        let g = &p.g;
        let l = S::LANES;
        let (wp, olen, band) = (p.wp, g.oh * g.ow, p.band);
        let (rows, cols) = p.inside();
        let xs = a.x.as_ptr();
        let plane = a.plane.as_mut_ptr();
        // The row past the band's (see the contract).
        let zeros = plane.wrapping_add(band * wp * l).cast_const();
        let sums = a.sums.as_mut_ptr();
        let wt = a.wt.as_ptr();
        let y = a.y.as_mut_ptr();
        let mut ptrs = [zeros; MAX_TAPS];
        let step = g.sw * l;
        // The next plane row to transpose in.
        let mut next = 0;
        // SAFETY: the set is this CPU's (the contract). Bounds, with `a`'s sizes (see
        // `BlockArgs`):
        // - Packing reads input row `r - pt < h` (`r` in `rows`), its first `cols <= w`
        //   columns, and writes vectors `pl .. pl + cols <= wp` of band row
        //   `r % band < band`: inside `plane`.
        // - Output row `oy` reads plane rows `oy sh + i dh` for `i < kh`, each in the
        //   band (transposed in by this or an earlier row: rows up to the last one it
        //   reads are in, and a row is overwritten only by row `r + band`, which is
        //   past that last row) or the zeros row; its output `ox` reads vector
        //   `ox sw + j dw <= wp - 1` of it (how `plan` sized the plane). Its sums are the
        //   `ow` vectors of `sums`.
        // - Unpacking reads sum vectors `p0..p0 + m <= ow`, and writes positions
        //   `oy ow + p0 ..+ m` of output planes `j < n`: inside `y`.
        // `plane` and `sums` are written only through these pointers while no
        // reference to them is used, and `y` is a unique borrow aliasing neither.
        unsafe {
            for oy in 0..g.oh {
                let (top, last) = (oy * g.sh, oy * g.sh + (g.kh - 1) * g.dh);
                for r in next.max(top)..=last {
                    if rows.contains(&r) {
                        // Wrapping: as in `whole`, `cols` may be 0.
                        let dst = plane.wrapping_add(((r % band) * wp + g.pl) * l);
                        pack_row::<S>(xs, g, a.n, r - g.pt, cols, dst);
                    }
                }
                next = last + 1;
                // Tap (i, j) of the row reads plane row `top + i dh` from column `j dw`:
                // one division per kernel row, none per tap.
                for (i, taps) in ptrs[..g.taps].chunks_exact_mut(g.kw).enumerate() {
                    let r = top + i * g.dh;
                    let row = if rows.contains(&r) {
                        plane.add((r % band) * wp * l).cast_const()
                    } else {
                        zeros
                    };
                    for (j, tap) in taps.iter_mut().enumerate() {
                        *tap = row.add(j * g.dw * l);
                    }
                }
                row::<S>(&ptrs[..g.taps], g.ow, step, wt, bias, sums);
                unpack::<S>(sums, g.ow, a.n, y.add(oy * g.ow), olen);
            }
        }
    }

    compiled_for!(block_avx512 = block::<Avx512>(a: &mut BlockArgs));
    compiled_for!(block_avx2 = block::<Avx2>(a: &mut BlockArgs));
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::conv_direct::Direct;
    use super::*;
    use crate::ops::testing::seeded as vals;

    /// The register transpose of every set moves element (i, j) to (j, i).
    #[test]
    fn register_transposes_transpose() {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::ops::simd::{Avx2, Avx512, Simd};
            /// Transposes the square of `S::LANES` rows of `src` through `S`.
            fn through<S: Simd>(src: &[f32]) -> Vec<f32> {
                let l = S::LANES;
                let mut out = vec![f32::NAN; l * l];
                // SAFETY: the caller checked that this CPU has `S`'s set; every load
                // and store is one of `src`'s or `out`'s `l` rows of `l` floats.
                unsafe {
                    let mut r = [S::zero(); MAX_LANES];
                    for (i, v) in r[..l].iter_mut().enumerate() {
                        *v = S::load(src[i * l..].as_ptr());
                    }
                    S::transpose(&mut r[..l]);
                    for (j, v) in r[..l].iter().enumerate() {
                        S::store(out[j * l..].as_mut_ptr(), *v);
                    }
                }
                out
            }
            for isa in Isa::available() {
                let l = isa.lanes();
                let src: Vec<f32> = (0..l * l).map(|v| v as f32).collect();
                let got = match isa {
                    Isa::Avx512 => through::<Avx512>(&src),
                    Isa::Avx2 => through::<Avx2>(&src),
                };
                for i in 0..l {
                    for j in 0..l {
                        assert_eq!(got[j * l + i], src[i * l + j], "{isa:?} ({i}, {j})");
                    }
                }
            }
        }
    }

    /// A depthwise case: `c` channels of `h` x `w`, a `k` kernel, strides, dilations and
    /// pads (top, left, bottom, right).
    pub(crate) struct Case {
        pub c: usize,
        pub hw: [usize; 2],
        pub k: [usize; 2],
        pub s: [usize; 2],
        pub d: [usize; 2],
        pub pads: [usize; 4],
    }

    /// A case's (channels, image, kernel, strides, dilations, pads).
    pub(crate) type CaseTuple = (
        usize,
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 4],
    );

    impl Case {
        /// The cases of `(channels, image, kernel, strides, dilations, pads)`.
        pub fn each<const N: usize>(cases: [CaseTuple; N]) -> [Case; N] {
            cases.map(|(c, hw, k, s, d, pads)| Case {
                c,
                hw,
                k,
                s,
                d,
                pads,
            })
        }

        pub fn window(&self) -> Window {
            let out = |i: usize| {
                let span = (self.k[i] - 1) * self.d[i] + 1;
                (self.hw[i] + self.pads[i] + self.pads[i + 2] - span) / self.s[i] + 1
            };
            Window {
                input: [1, self.hw[0], self.hw[1]],
                output: [1, out(0), out(1)],
                kernel: [1, self.k[0], self.k[1]],
                stride: [1, self.s[0], self.s[1]],
                dilation: [1, self.d[0], self.d[1]],
                pad_begin: [0, self.pads[0] as isize, self.pads[1] as isize],
                pad_end: [0, self.pads[2] as isize, self.pads[3] as isize],
            }
        }
    }

    /// A depthwise kernel's call: `(set, window, x, w, bias, epilogue, out, parallel)`.
    pub(crate) type DwCall<'a> = &'a dyn Fn(
        Isa,
        &Window,
        &[f32],
        &[f32],
        Option<&[f32]>,
        Option<Epilogue>,
        &mut [f32],
        bool,
    );

    /// Asserts that `conv` gives the bits of conv_direct.rs's row kernel run on each
    /// channel alone, for each case on every set, with and without bias, with no
    /// activation, HardSwish and LeakyRelu, on one thread and several. Outputs start as
    /// NaN, so an output not written shows.
    pub(crate) fn gives_the_row_kernels_bits(cases: &[Case], conv: DwCall) {
        let epilogues = [
            None,
            Some(Epilogue::HardSwish),
            Some(Epilogue::LeakyRelu { alpha: 0.1 }),
        ];
        for isa in Isa::available() {
            for case in cases {
                let win = case.window();
                let (c, [_, oh, ow]) = (case.c, win.output);
                let (plane, olen, taps) = (case.hw[0] * case.hw[1], oh * ow, case.k[0] * case.k[1]);
                let x = vals(c * plane, 1);
                let w = vals(c * taps, 2);
                let b = vals(c, 3);
                let row = Direct::plan(&win, 1, isa).unwrap();
                for bias in [None, Some(&b[..])] {
                    for e in epilogues {
                        let mut want = vec![f32::NAN; c * olen];
                        let mut padded = vec![f32::NAN; row.scratch_len()];
                        for (j, y) in want.chunks_mut(olen).enumerate() {
                            let bj = bias.map(|b| &b[j..][..1]);
                            let (xj, wj) = (&x[j * plane..][..plane], &w[j * taps..][..taps]);
                            row.conv(xj, wj, bj, e, &mut padded, y, false);
                        }
                        for parallel in [false, true] {
                            let mut got = vec![f32::NAN; c * olen];
                            conv(isa, &win, &x, &w, bias, e, &mut got, parallel);
                            let bits =
                                |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                            assert_eq!(
                                bits(&got),
                                bits(&want),
                                "{isa:?} c {c} {:?} k {:?} s {:?} d {:?} pads {:?} bias {} {e:?} \
                                 parallel {parallel}",
                                case.hw,
                                case.k,
                                case.s,
                                case.d,
                                case.pads,
                                bias.is_some()
                            );
                        }
                    }
                }
            }
        }
    }

    /// The channel-blocked kernel gives the bits of conv_direct.rs's row kernel run on
    /// each channel alone (see `gives_the_row_kernels_bits`): channel counts short of a
    /// block, a block and past one; strides, dilations, asymmetric pads larger than the
    /// kernel; images whose last columns no tap reads (packed row by row); one-column
    /// outputs. Scratch also starts as NaN (debug builds poison the thread's scratch on
    /// every call).
    #[test]
    fn channel_blocks_give_the_row_kernels_bits() {
        // (channels, image, kernel, strides, dilations, pads).
        let cases = Case::each([
            (1, [7, 7], [5, 5], [1, 1], [1, 1], [2; 4]),
            (17, [7, 7], [5, 5], [1, 1], [1, 1], [2; 4]),
            (40, [14, 13], [3, 3], [2, 2], [1, 1], [1; 4]),
            (16, [9, 10], [3, 3], [2, 2], [1, 1], [0; 4]),
            (5, [11, 12], [3, 2], [3, 2], [2, 1], [2, 0, 1, 3]),
            (9, [1, 1], [3, 3], [1, 1], [1, 1], [3, 0, 2, 4]),
            (33, [28, 28], [3, 3], [1, 1], [1, 1], [1; 4]),
            (8, [6, 40], [1, 7], [1, 1], [1, 2], [0, 6, 0, 6]),
            (20, [30, 29], [3, 3], [2, 2], [1, 1], [1, 1, 0, 0]),
            (3, [13, 11], [1, 3], [3, 1], [1, 1], [0, 1, 0, 1]),
            (18, [12, 15], [3, 5], [1, 2], [2, 1], [4, 2, 5, 2]),
            (16, [17, 9], [5, 3], [2, 1], [1, 1], [0, 1, 0, 1]),
            (2, [20, 1], [3, 3], [1, 10], [1, 1], [1, 4, 1, 0]),
        ]);
        // Every case both ways: whole planes and bands (the plan picks one by size).
        for banded in [false, true] {
            gives_the_row_kernels_bits(&cases, &|isa, win, x, w, b, e, out, parallel| {
                Depthwise::plan(win, isa)
                    .unwrap()
                    .banded(banded)
                    .conv(x, w, b, e, out, parallel)
            });
        }
    }

    /// The plan transposes narrow images whole and works on wider ones in bands of the
    /// rows an output row reads.
    #[test]
    fn wide_images_work_in_bands() {
        for isa in Isa::available() {
            let plan = |c: CaseTuple| Depthwise::plan(&Case::each([c])[0].window(), isa).unwrap();
            assert_eq!(plan((256, [7, 7], [5, 5], [1, 1], [1, 1], [2; 4])).band, 0);
            assert_eq!(plan((40, [28, 28], [3, 3], [1, 1], [1, 1], [1; 4])).band, 3);
            assert_eq!(plan((40, [28, 28], [5, 5], [2, 2], [2, 1], [4; 4])).band, 9);
        }
    }

    /// A window too large to address has no plan; a 3-D one neither.
    #[test]
    fn windows_it_cannot_address_have_no_plan() {
        for isa in Isa::available() {
            let small = Case {
                c: 1,
                hw: [4, 4],
                k: [3, 3],
                s: [1, 1],
                d: [1, 1],
                pads: [1; 4],
            };
            let mut win = small.window();
            assert!(Depthwise::plan(&win, isa).is_some());
            win.dilation[2] = usize::MAX / 2;
            assert!(Depthwise::plan(&win, isa).is_none());
            let mut deep = small.window();
            (deep.input[0], deep.output[0]) = (2, 2);
            assert!(Depthwise::plan(&deep, isa).is_none());
        }
    }
}
