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
        let mut plan = Depthwise {
            isa,
            g,
            hp,
            wp,
            offs: [0; MAX_TAPS],
        };
        for (t, off) in plan.offs[..g.taps].iter_mut().enumerate() {
            *off = t / g.kw * g.dh * wp + t % g.kw * g.dw;
        }
        Some(plan)
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

    /// Floats of working memory one block of channels takes: the padded plane, the
    /// tile of sums and the transposed weights.
    fn scratch_len(&self) -> usize {
        (self.hp * self.wp + self.g.oh * self.g.ow + self.g.taps) * self.lanes()
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
        let (plane, rest) = scratch.split_at_mut(self.hp * wp * l);
        let (sums, rest) = rest.split_at_mut(self.g.oh * self.g.ow * l);
        let wt = &mut rest[..taps * l];
        // The padding: the rows above and below the input, and each input row's columns
        // before and after it (the input past the plane's edge no tap reads).
        let (rows, cols) = self.inside();
        for (r, row) in plane.chunks_exact_mut(wp * l).enumerate() {
            if rows.contains(&r) {
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
    /// The padded plane, `hp * wp` vectors, its padding already zero.
    plane: &'a mut [f32],
    /// The sums, `oh * ow` vectors.
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
    use super::{ACCS, BlockArgs, MAX_LANES};
    use crate::ops::simd::{Avx2, Avx512, Simd, compiled_for, transpose};

    /// `N` consecutive outputs of an output row: each the bias plus, per tap, the tap's weight
    /// vector times the plane vector at `x + off + i * step`, stored at `out + i * LANES`.
    ///
    /// # Safety
    /// This CPU has `S`'s set; for every tap offset `off` (in floats) and `i < N` the
    /// vector at `x + off + i * step` is readable, the `offs.len()` vectors at `wt` are,
    /// and the `N` vectors at `out` are writable and alias no read.
    #[inline(always)]
    unsafe fn outputs<S: Simd, const N: usize>(
        x: *const f32,
        step: usize,
        offs: &[usize],
        wt: *const f32,
        bias: S::V,
        out: *mut f32,
    ) {
        // SAFETY: the loads and stores are those the contract names, on its set.
        unsafe {
            let mut acc = [bias; N];
            for (k, &off) in offs.iter().enumerate() {
                let wv = S::load(wt.add(k * S::LANES));
                let xp = x.add(off * S::LANES);
                for (i, a) in acc.iter_mut().enumerate() {
                    *a = S::fma(wv, S::load(xp.add(i * step)), *a);
                }
            }
            for (i, a) in acc.iter().enumerate() {
                S::store(out.add(i * S::LANES), *a);
            }
        }
    }

    /// One block: the input planes transposed into the padded plane's interior, every
    /// output's sums, and the sums transposed into the output planes.
    ///
    /// # Safety
    /// This CPU has `S`'s set, and `a` is valid for it (see `run_block`).
    #[inline(always)]
    unsafe fn block<S: Simd>(a: &mut BlockArgs) {
        let p = a.plan;
        let l = S::LANES;
        let (wp, olen) = (p.wp, p.g.oh * p.g.ow);
        let (rows, cols) = p.inside();
        let taps = &p.offs[..p.g.taps];
        let xs = a.x.as_ptr();
        let plane = a.plane.as_mut_ptr();
        let sums = a.sums.as_mut_ptr();
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
                // Each position's plane vector, stepped along (no division per column).
                let (mut r, mut c) = (rows.start, 0);
                let mut dst = [plane; MAX_LANES];
                for q0 in (0..count).step_by(l) {
                    let m = (count - q0).min(l);
                    for d in &mut dst[..m] {
                        *d = plane.add((r * wp + p.g.pl + c) * l);
                        c += 1;
                        if c == p.g.w {
                            (r, c) = (r + 1, 0);
                        }
                    }
                    transpose::<S>(xs.add(q0), plane_len, (a.n, m), |j| dst[j], l);
                }
            } else {
                for r in rows {
                    let src = xs.add((r - p.g.pt) * p.g.w);
                    for x0 in (0..cols).step_by(l) {
                        let m = (cols - x0).min(l);
                        let dst = plane.add((r * wp + p.g.pl + x0) * l);
                        transpose::<S>(src.add(x0), plane_len, (a.n, m), |j| dst.add(j * l), l);
                    }
                }
            }
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
            let step = p.g.sw * l;
            for oy in 0..p.g.oh {
                let row = plane.add(oy * p.g.sh * wp * l);
                for ox0 in (0..p.g.ow).step_by(ACCS) {
                    let x = row.add(ox0 * step);
                    let out = sums.add((oy * p.g.ow + ox0) * l);
                    match (p.g.ow - ox0).min(ACCS) {
                        1 => outputs::<S, 1>(x, step, taps, wt, bias, out),
                        2 => outputs::<S, 2>(x, step, taps, wt, bias, out),
                        3 => outputs::<S, 3>(x, step, taps, wt, bias, out),
                        4 => outputs::<S, 4>(x, step, taps, wt, bias, out),
                        5 => outputs::<S, 5>(x, step, taps, wt, bias, out),
                        6 => outputs::<S, 6>(x, step, taps, wt, bias, out),
                        7 => outputs::<S, 7>(x, step, taps, wt, bias, out),
                        _ => outputs::<S, ACCS>(x, step, taps, wt, bias, out),
                    }
                }
            }
            let y = a.y.as_mut_ptr();
            for p0 in (0..olen).step_by(l) {
                let m = (olen - p0).min(l);
                transpose::<S>(sums.add(p0 * l), l, (m, a.n), |j| y.add(p0 + j * olen), m);
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
        ]);
        gives_the_row_kernels_bits(&cases, &|isa, win, x, w, b, e, out, parallel| {
            Depthwise::plan(win, isa)
                .unwrap()
                .conv(x, w, b, e, out, parallel)
        });
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
