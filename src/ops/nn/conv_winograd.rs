//! float32 3x3 convolutions of stride 1 by Winograd's minimal filtering F(2x2, 3x3)
//! (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).
//!
//! Why: a direct 3x3 convolution spends 9 multiply-adds per output, input channel and
//! output channel, and the direct kernels here (conv_direct.rs, conv_blocked.rs) already
//! run those near the FMA units' peak; ONNX Runtime's NCHWc kernels do too. Past the
//! peak the only way to be faster is fewer multiplies. F(2x2, 3x3) computes a 2x2 output
//! tile from a 4x4 input tile with 16 products instead of 36, 2.25 times fewer:
//!
//! - the weights of each (output channel, input channel) become a 4x4 `U = G g Gᵀ`;
//! - each 4x4 input tile of each channel becomes `V = Bᵀ d B` (additions only);
//! - for each of the 16 positions ξ of the 4x4, the products over the input channels
//!   are one matrix product `M_ξ = U_ξ [out x in] · V_ξ [in x tiles]`, rt2's sgemm;
//! - each output tile is `Aᵀ M A` (additions only), plus the bias, then the activation.
//!
//! The transforms of F(2x2, 3x3) multiply by 1, -1 and 1/2 only, so the result's error is
//! that of a direct sum of the same terms (the larger variants, F(4x4, 3x3) and up, scale
//! by 1/24 and 4 and lose several bits, which is why they are not used here).
//!
//! The tiles are taken in blocks sized for L2 (the block's V and M for every ξ), each
//! block transformed, multiplied and transformed back before the next; threads take
//! blocks. The input is first copied into zero-padded planes whose width is a whole
//! number of vectors of tiles, so the transforms run without bounds checks in vectors of
//! `LANES` tiles: a tile row's 4x4 windows start two columns apart, and the even and odd
//! columns of two vectors give the window's four columns for `LANES` tiles at once. The
//! tiles of the rounding, past the output's edge, are computed and not stored.
//!
//! Each output is a fixed sequence of operations whatever the block, thread or executor,
//! so every executor gets the same bits; they are not the direct kernels' bits.

use rayon::prelude::*;

use super::conv_blocked::SharedOut;
use super::epilogue::Epilogue;
use super::window::Window;
use crate::ops::linalg::sgemm::sgemm;
use crate::ops::simd::Isa;

/// Tiles in a vector group, on every ISA: the padded planes' tile columns are a multiple
/// of it (AVX-512's lanes, twice AVX2's).
const GROUP: usize = 16;

/// L2 bytes a block's transformed inputs and products may take.
const BLOCK_BYTES: usize = 1 << 20;

/// A 3x3 stride-1 convolution of one (image, group) block by F(2x2, 3x3).
#[derive(Debug, Clone)]
pub(super) struct Winograd {
    isa: Isa,
    /// Input and output channels.
    c: usize,
    m: usize,
    /// Input and output planes.
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    /// Padding before the rows and the columns.
    pt: usize,
    pl: usize,
    /// Tile rows, and tile columns rounded up to [`GROUP`].
    th: usize,
    tw: usize,
    /// Tiles per block: a multiple of [`GROUP`].
    block: usize,
}

impl Winograd {
    /// The plan for a window, when it is one this kernel computes (2-D, 3x3, stride and
    /// dilation 1, padding of at most 2) and pays for itself: enough channels that the
    /// products dominate the transforms, enough tiles that the per-call weight transform
    /// is small beside them, and not too many tiles of the rounding. With `parallel`
    /// (the call splits its work across threads) the blocks are cut small enough for
    /// two per thread, so that a small image still spreads.
    pub(super) fn plan(
        win: &Window,
        c: usize,
        m: usize,
        isa: Isa,
        parallel: bool,
    ) -> Option<Winograd> {
        let flat = win.input[0] == 1 && win.kernel[0] == 1;
        if !flat
            || win.kernel != [1, 3, 3]
            || win.stride != [1; 3]
            || win.dilation != [1; 3]
            || win.pad_begin[1..]
                .iter()
                .chain(&win.pad_end[1..])
                .any(|&p| !(0..=2).contains(&p))
        {
            return None;
        }
        let [_, h, w] = win.input;
        let [_, oh, ow] = win.output;
        let (th, tiles_w) = (oh.div_ceil(2), ow.div_ceil(2));
        let tw = tiles_w.next_multiple_of(GROUP);
        let (tiles, used) = (th * tw, th * tiles_w);
        if c < MIN_CHANNELS || m < MIN_CHANNELS || used < MIN_TILES || used * 4 < tiles * 3 {
            return None;
        }
        let per_tile = 16 * (c + m) * 4;
        let mut block = (BLOCK_BYTES / per_tile / GROUP * GROUP).clamp(GROUP, tiles);
        if parallel {
            let share = tiles / (2 * rayon::current_num_threads());
            block = block.min(share / GROUP * GROUP).max(GROUP);
        }
        Some(Winograd {
            isa,
            c,
            m,
            h,
            w,
            oh,
            ow,
            pt: win.pad_begin[1] as usize,
            pl: win.pad_begin[2] as usize,
            th,
            tw,
            block,
        })
    }

    /// Padded plane rows and columns: every tile's 4x4 window, and the two vectors of
    /// its group's last even/odd load, lie inside.
    fn plane(&self) -> (usize, usize) {
        (2 * self.th + 2, 2 * self.tw + 2)
    }

    /// Tiles in the padded grid, the rounding's included.
    fn tiles(&self) -> usize {
        self.th * self.tw
    }

    fn blocks(&self) -> usize {
        self.tiles().div_ceil(self.block)
    }

    fn tasks(&self, parallel: bool) -> usize {
        match parallel {
            true => rayon::current_num_threads().clamp(1, self.blocks()),
            false => 1,
        }
    }

    /// Floats of one task's block buffers: V and M for every ξ.
    fn task_len(&self) -> usize {
        16 * (self.c + self.m) * self.block
    }

    /// Scratch floats [`Winograd::run`] needs.
    pub(super) fn scratch_len(&self, parallel: bool) -> usize {
        let (ph, pw) = self.plane();
        self.c * ph * pw + 16 * self.m * self.c + self.tasks(parallel) * self.task_len()
    }

    /// The convolution of `x` (`[c, h, w]`) by `w` (`[m, c, 3, 3]`), plus `bias`, then
    /// `epilogue`, into `out` (`[m, oh, ow]`), using `scratch` (at least
    /// [`Winograd::scratch_len`] floats, contents unspecified); blocks across threads when
    /// `parallel`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        scratch: &mut [f32],
        out: &mut [f32],
        parallel: bool,
    ) {
        let (ph, pw) = self.plane();
        let (padded, rest) = scratch.split_at_mut(self.c * ph * pw);
        let (u, rest) = rest.split_at_mut(16 * self.m * self.c);
        self.pad(x, padded, parallel);
        self.transform_weights(w, u);
        let (padded, u) = (&*padded, &*u);
        let (blocks, tasks) = (self.blocks(), self.tasks(parallel));
        let per = blocks.div_ceil(tasks);
        assert!(out.len() >= self.m * self.oh * self.ow, "output too short");
        let out = SharedOut(out.as_mut_ptr());
        let task = |t: usize, buf: &mut [f32]| {
            let (v, mx) = buf.split_at_mut(16 * self.c * self.block);
            for b in t * per..((t + 1) * per).min(blocks) {
                // SAFETY: `out` holds the `[m, oh, ow]` output (asserted above), and the
                // blocks of the tasks are disjoint, so are the output tiles they store.
                unsafe { self.block(b, padded, u, bias, epilogue, v, mx, &out) };
            }
        };
        let bufs = &mut rest[..tasks * self.task_len()];
        if tasks > 1 {
            bufs.par_chunks_mut(self.task_len())
                .enumerate()
                .for_each(|(t, buf)| task(t, buf));
        } else {
            task(0, bufs);
        }
    }

    /// `x`'s channels into `padded`'s planes at row `pt`, column `pl`, the rest zero.
    fn pad(&self, x: &[f32], padded: &mut [f32], parallel: bool) {
        let (ph, pw) = self.plane();
        let (h, w, pt, pl) = (self.h, self.w, self.pt, self.pl);
        let one = |(plane, src): (&mut [f32], &[f32])| {
            let (top, rest) = plane.split_at_mut(pt * pw);
            top.fill(0.0);
            let (inside, bottom) = rest.split_at_mut(h * pw);
            bottom.fill(0.0);
            for (row, src) in inside.chunks_exact_mut(pw).zip(src.chunks_exact(w)) {
                row[..pl].fill(0.0);
                row[pl..pl + w].copy_from_slice(src);
                row[pl + w..].fill(0.0);
            }
        };
        let x = &x[..self.c * h * w];
        if parallel {
            padded
                .par_chunks_exact_mut(ph * pw)
                .zip(x.par_chunks_exact(h * w))
                .for_each(one);
        } else {
            padded
                .chunks_exact_mut(ph * pw)
                .zip(x.chunks_exact(h * w))
                .for_each(one);
        }
    }

    /// `U_ξ[o][i]`, at `u[(ξ m + o) c + i]`: `G g Gᵀ` of each 3x3 `g`, with
    /// `G = [[1, 0, 0], [½, ½, ½], [½, -½, ½], [0, 0, 1]]`.
    fn transform_weights(&self, w: &[f32], u: &mut [f32]) {
        let (m, c) = (self.m, self.c);
        // `G r` for a row or column `r` of three.
        let g = |a: f32, b: f32, c: f32| [a, (a + b + c) * 0.5, (a - b + c) * 0.5, c];
        for (o, wo) in w[..m * c * 9].chunks_exact(c * 9).enumerate() {
            for (i, k) in wo.chunks_exact(9).enumerate() {
                let cols: [[f32; 4]; 3] = std::array::from_fn(|j| g(k[j], k[3 + j], k[6 + j]));
                for r in 0..4 {
                    let row = g(cols[0][r], cols[1][r], cols[2][r]);
                    for (j, &v) in row.iter().enumerate() {
                        u[((4 * r + j) * m + o) * c + i] = v;
                    }
                }
            }
        }
    }

    /// Block `b`: its tiles' V (`v`), the 16 products (`mx`), the outputs.
    ///
    /// # Safety
    /// `out` points at the `[m, oh, ow]` output, whose tiles of block `b` no other
    /// thread writes while this runs.
    #[allow(clippy::too_many_arguments)]
    unsafe fn block(
        &self,
        b: usize,
        padded: &[f32],
        u: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        v: &mut [f32],
        mx: &mut [f32],
        out: &SharedOut,
    ) {
        let first = b * self.block;
        let n = self.block.min(self.tiles() - first);
        let (m, c) = (self.m, self.c);
        // SAFETY: `self.isa` came from `Isa::detect`, so this CPU has it.
        unsafe { self.input_tiles(padded, first, n, v) };
        for xi in 0..16 {
            // SAFETY: U_ξ is m x c at `u[ξ m c..]`, V_ξ c x n (rows `n` apart) at
            // `v[ξ c n..]` and M_ξ m x n at `mx[ξ m n..]`, all inside their slices (`v`
            // and `mx` hold 16 c block and 16 m block floats, block >= n); M_ξ aliases
            // neither and is only written (beta 0).
            unsafe {
                sgemm(
                    m,
                    c,
                    n,
                    1.0,
                    u[xi * m * c..].as_ptr(),
                    c as isize,
                    1,
                    v[xi * c * n..].as_ptr(),
                    n as isize,
                    1,
                    0.0,
                    mx[xi * m * n..].as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
        }
        // SAFETY: the ISA as above; the caller's terms on `out`, passed on.
        unsafe { self.output_tiles(mx, first, n, bias, epilogue, out) };
    }

    /// `V_ξ[i][t]` at `v[(ξ c + i) n + t]` for the `n` tiles from `first`.
    ///
    /// # Safety
    /// This CPU has `self.isa`.
    unsafe fn input_tiles(&self, padded: &[f32], first: usize, n: usize, v: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller ensures the ISA.
        unsafe {
            match self.isa {
                Isa::Avx512 => x86::input_tiles_avx512(self, padded, first, n, v),
                Isa::Avx2 => x86::input_tiles_avx2(self, padded, first, n, v),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no ISA to plan for: {padded:p} {first} {n} {v:p}")
    }

    /// The output tiles of the `n` tiles from `first`, from `M_ξ[o][t]` at
    /// `mx[(ξ m + o) n + t]`.
    ///
    /// # Safety
    /// This CPU has `self.isa`; `out` as for [`Winograd::block`].
    unsafe fn output_tiles(
        &self,
        mx: &[f32],
        first: usize,
        n: usize,
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        out: &SharedOut,
    ) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller ensures the ISA and the terms on `out`.
        unsafe {
            match self.isa {
                Isa::Avx512 => x86::output_tiles_avx512(self, mx, first, n, bias, epilogue, out),
                Isa::Avx2 => x86::output_tiles_avx2(self, mx, first, n, bias, epilogue, out),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no ISA to plan for: {mx:p} {first} {n} {bias:?} {epilogue:?} {out:p}")
    }
}

/// Channels below which the transforms cost too much beside the products.
const MIN_CHANNELS: usize = 16;
/// Output tiles below which the per-call weight transform is not worth it.
const MIN_TILES: usize = 512;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Epilogue, SharedOut, Winograd};
    use crate::ops::simd::{Avx2, Avx512, Simd, compiled_for};

    compiled_for!(input_tiles_avx512 = input_tiles::<Avx512>(
        k: &Winograd, padded: &[f32], first: usize, n: usize, v: &mut [f32]
    ));
    compiled_for!(input_tiles_avx2 = input_tiles::<Avx2>(
        k: &Winograd, padded: &[f32], first: usize, n: usize, v: &mut [f32]
    ));
    compiled_for!(output_tiles_avx512 = output_tiles::<Avx512>(
        k: &Winograd, mx: &[f32], first: usize, n: usize, bias: Option<&[f32]>,
        epilogue: Option<Epilogue>, out: &SharedOut
    ));
    compiled_for!(output_tiles_avx2 = output_tiles::<Avx2>(
        k: &Winograd, mx: &[f32], first: usize, n: usize, bias: Option<&[f32]>,
        epilogue: Option<Epilogue>, out: &SharedOut
    ));

    /// [`Winograd::input_tiles`] in `S`'s vectors, `S::LANES` tiles at a time: row `r`
    /// of the tiles' windows is the even and odd columns from the window's start (its
    /// columns 0 and 1) and from two further (2 and 3).
    ///
    /// # Safety
    /// This CPU has `S`'s set.
    #[inline(always)]
    unsafe fn input_tiles<S: Simd>(
        k: &Winograd,
        padded: &[f32],
        first: usize,
        n: usize,
        v: &mut [f32],
    ) {
        let (ph, pw) = k.plane();
        let c = k.c;
        assert!(padded.len() >= c * ph * pw && v.len() >= 16 * c * n);
        assert!([first, n, k.tw].iter().all(|v| v.is_multiple_of(S::LANES)));
        for i in 0..c {
            let plane = padded[i * ph * pw..].as_ptr();
            for t in (0..n).step_by(S::LANES) {
                let (tr, tc) = ((first + t) / k.tw, (first + t) % k.tw);
                // SAFETY: the ISA is the caller's; rows 2 tr .. 2 tr + 3 < ph (tr < th)
                // and columns 2 tc .. 2 tc + 2 LANES + 1 < pw (tc + LANES <= tw) lie in
                // the plane; the stores are at `(ξ c + i) n + t .. + LANES` with t + LANES
                // <= n, inside `v` (asserted).
                unsafe {
                    let mut rows = [[S::zero(); 4]; 4];
                    for (r, row) in rows.iter_mut().enumerate() {
                        let p = plane.add((2 * tr + r) * pw + 2 * tc);
                        let (d0, d1) = S::load_even_odd(p);
                        let (d2, d3) = S::load_even_odd(p.add(2));
                        // d Bᵀ's columns: d0 - d2, d1 + d2, d2 - d1, d1 - d3.
                        *row = [
                            S::sub(d0, d2),
                            S::add(d1, d2),
                            S::sub(d2, d1),
                            S::sub(d1, d3),
                        ];
                    }
                    let [r0, r1, r2, r3] = rows;
                    for j in 0..4 {
                        let col = [
                            S::sub(r0[j], r2[j]),
                            S::add(r1[j], r2[j]),
                            S::sub(r2[j], r1[j]),
                            S::sub(r1[j], r3[j]),
                        ];
                        for (a, &val) in col.iter().enumerate() {
                            S::store(v.as_mut_ptr().add(((4 * a + j) * c + i) * n + t), val);
                        }
                    }
                }
            }
        }
    }

    /// [`Winograd::output_tiles`] in `S`'s vectors: `Aᵀ M A` with
    /// `Aᵀ = [[1, 1, 1, 0], [0, 1, -1, -1]]` for `S::LANES` tiles, plus the bias, the
    /// activation, and each output row's pairs interleaved into place.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `out` as for [`Winograd::block`].
    #[inline(always)]
    unsafe fn output_tiles<S: Simd>(
        k: &Winograd,
        mx: &[f32],
        first: usize,
        n: usize,
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        out: &SharedOut,
    ) {
        let (m, oh, ow) = (k.m, k.oh, k.ow);
        assert!(mx.len() >= 16 * m * n);
        for o in 0..m {
            // SAFETY: the ISA is the caller's.
            let b = unsafe { S::splat(bias.map_or(0.0, |b| b[o])) };
            for t in (0..n).step_by(S::LANES) {
                let (tr, tc) = ((first + t) / k.tw, (first + t) % k.tw);
                if 2 * tc >= ow {
                    continue;
                }
                // SAFETY: the ISA is the caller's; the loads are at `(ξ m + o) n + t ..
                // + LANES`, inside `mx` (asserted, t + LANES <= n); the stores write row
                // 2 tr (< oh) and 2 tr + 1 when < oh, columns 2 tc .. < ow, of plane o of
                // the caller's `[m, oh, ow]` output.
                unsafe {
                    let at = |xi: usize| S::load(mx.as_ptr().add((xi * m + o) * n + t));
                    // Aᵀ M: rows 0 + 1 + 2 and 1 - 2 - 3 of the 4x4.
                    let cols: [_; 4] =
                        std::array::from_fn(|j| (at(j), at(4 + j), at(8 + j), at(12 + j)));
                    let s = [
                        cols.map(|(m0, m1, m2, _)| S::add(S::add(m0, m1), m2)),
                        cols.map(|(_, m1, m2, m3)| S::sub(S::sub(m1, m2), m3)),
                    ];
                    let width = (ow - 2 * tc).min(2 * S::LANES);
                    for (r, s) in s.iter().enumerate() {
                        if 2 * tr + r >= oh {
                            break;
                        }
                        // (Aᵀ M) A: columns 0 + 1 + 2 and 1 - 2 - 3.
                        let mut y0 = S::add(S::add(S::add(s[0], s[1]), s[2]), b);
                        let mut y1 = S::add(S::sub(S::sub(s[1], s[2]), s[3]), b);
                        if let Some(e) = epilogue {
                            y0 = e.vector::<S>(y0);
                            y1 = e.vector::<S>(y1);
                        }
                        let (lo, hi) = S::interleave(y0, y1);
                        let p = out.0.add((o * oh + 2 * tr + r) * ow + 2 * tc);
                        if width == 2 * S::LANES {
                            S::store(p, lo);
                            S::store(p.add(S::LANES), hi);
                        } else {
                            S::store_first(p, lo, width.min(S::LANES));
                            if width > S::LANES {
                                S::store_first(p.add(S::LANES), hi, width - S::LANES);
                            }
                        }
                    }
                }
            }
        }
    }
}
