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
//! block transformed, multiplied and transformed back before the next. Threads take
//! whole blocks; on an image too small for a block of useful width per thread, they
//! share each block instead, a share of its input channels to transform, then a share
//! of its output channels to multiply and transform back ([`Split`]). The input is
//! copied into zero-padded planes whose width is a whole number of vectors of tiles, so
//! the transforms run without bounds checks in vectors of `LANES` tiles: a tile row's
//! 4x4 windows start two columns apart, and the even and odd columns of two vectors give
//! the window's four columns for `LANES` tiles at once. The tiles of the rounding, past
//! the output's edge, are computed and not stored.
//!
//! Where threads take whole blocks (or there is one thread), each block pads only the
//! input rows its tiles read, into a window of its own buffers, just before it
//! transforms them: the copy lands in L2 and the transform reads it from there. Padding
//! the whole image first (as shared blocks still do, their images being small) wrote a
//! second copy of the input to memory and read it back: for a UNet decoder's 48 -> 32
//! layer over 256 x 256 that is 25 MB of traffic, and the copy alone was a tenth of
//! the model's time.
//!
//! Each output is a fixed sequence of operations whatever the block, thread or executor,
//! so every executor gets the same bits; they are not the direct kernels' bits.

use std::ops::Range;

use rayon::prelude::*;

use super::conv_direct::SharedOut;
use super::epilogue::Epilogue;
use super::window::Window;
use crate::ops::linalg::sgemm::sgemm;
use crate::ops::simd::Isa;

/// Tiles in a vector group, on every ISA: the padded planes' tile columns are a multiple
/// of it (AVX-512's lanes, twice AVX2's).
const GROUP: usize = 16;

/// L2 bytes a block's transformed inputs and products may take.
const BLOCK_BYTES: usize = 1 << 20;

/// A 3x3 kernel's weights as [`Winograd::run`] takes them.
#[derive(Debug, Clone, Copy)]
pub(super) enum Weights<'a> {
    /// `[m, c, 3, 3]`, transformed into `U` in the call's scratch.
    Raw(&'a [f32]),
    /// `U` itself, `[16, m, c]` ([`transform`]): lowering transformed them once.
    Transformed(&'a [f32]),
}

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
    /// How a call splits across threads.
    split: Split,
}

/// How a call splits its work across threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Split {
    /// It does not: one thread does everything.
    None,
    /// Threads take whole blocks of tiles, each with its own buffers: images of many
    /// tiles.
    Blocks,
    /// Threads share each block: each transforms a share of the input channels, then
    /// (after all have) multiplies and transforms back a share of the output channels.
    /// Images too small for a block of at least [`MIN_SPLIT_BLOCK`] tiles per thread,
    /// whose products, cut into narrower blocks, would be too narrow for sgemm's tiles
    /// (a 48 -> 48 layer over 8 x 32 took longer in four blocks of 16 tiles on two
    /// threads than the direct kernel).
    Channels,
}

impl Winograd {
    /// Whether the kernel computes `win` over `c` input and `m` output channels and pays
    /// for itself ([`Winograd::plan`]'s terms), from the shapes alone: lowering decides
    /// with it, the same on every machine (`conv_packed.rs`).
    pub(super) fn takes(win: &Window, c: usize, m: usize) -> bool {
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
            return false;
        }
        let [_, oh, ow] = win.output;
        let (th, tiles_w) = (oh.div_ceil(2), ow.div_ceil(2));
        let (tiles, used) = (th * tiles_w.next_multiple_of(GROUP), th * tiles_w);
        c >= MIN_CHANNELS && m >= MIN_CHANNELS && used >= MIN_TILES && used * 4 >= tiles * 3
    }

    /// The plan for a window, when it is one this kernel computes (2-D, 3x3, stride and
    /// dilation 1, padding of at most 2) and pays for itself: enough channels that the
    /// products dominate the transforms, enough tiles that the per-call weight transform
    /// and the products' narrow tiles cost less than the multiplies saved, and not too
    /// many tiles of the rounding. With `parallel` (the call splits its work across
    /// threads) the blocks are cut small enough for two per thread, or, when that would
    /// make them too narrow, threads share each block ([`Split`]). Which kernel runs
    /// does not depend on the threads, so neither do the bits.
    pub(super) fn plan(
        win: &Window,
        c: usize,
        m: usize,
        isa: Isa,
        parallel: bool,
    ) -> Option<Winograd> {
        if !Self::takes(win, c, m) {
            return None;
        }
        let [_, h, w] = win.input;
        let [_, oh, ow] = win.output;
        let th = oh.div_ceil(2);
        let tw = ow.div_ceil(2).next_multiple_of(GROUP);
        let tiles = th * tw;
        let per_tile = 16 * (c + m) * 4;
        let mut block = (BLOCK_BYTES / per_tile / GROUP * GROUP).clamp(GROUP, tiles);
        let threads = rayon::current_num_threads();
        let share = tiles / (2 * threads) / GROUP * GROUP;
        let split = match parallel && threads > 1 {
            false => Split::None,
            true if share >= MIN_SPLIT_BLOCK => {
                block = block.min(share);
                Split::Blocks
            }
            true => Split::Channels,
        };
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
            split,
        })
    }

    /// Whether threads share each block ([`Split::Channels`]).
    #[cfg(test)]
    pub(super) fn shares_blocks(&self) -> bool {
        self.split == Split::Channels
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

    /// Threads a call's work goes to.
    fn tasks(&self) -> usize {
        match self.split {
            Split::None => 1,
            Split::Blocks => rayon::current_num_threads().clamp(1, self.blocks()),
            Split::Channels => rayon::current_num_threads().max(1),
        }
    }

    /// Sets of block buffers a call uses: one per task when tasks take whole blocks.
    fn buffers(&self) -> usize {
        match self.split {
            Split::Blocks => self.tasks(),
            Split::None | Split::Channels => 1,
        }
    }

    /// Padded rows each channel's plane holds in the padded input: all of them where
    /// blocks are shared (the whole image is padded once), else as many as a block's
    /// tiles read (each block pads its own, [`Winograd::window`]): the rows of the tile
    /// rows it spans, at most `block / tw` rounded up and one more, and the two below.
    fn rows_held(&self) -> usize {
        let (ph, _) = self.plane();
        match self.split {
            Split::Channels => ph,
            Split::None | Split::Blocks => (2 * (self.block.div_ceil(self.tw) + 1) + 2).min(ph),
        }
    }

    /// The padded rows the `n` tiles from `first` read: two per tile row, and two more.
    fn window(&self, first: usize, n: usize) -> Range<usize> {
        let (top, bottom) = (first / self.tw, (first + n - 1) / self.tw);
        2 * top..2 * bottom + 4
    }

    /// Floats of the padded input one copy holds: `c` planes of [`Winograd::rows_held`]
    /// rows.
    fn padded_len(&self) -> usize {
        let (_, pw) = self.plane();
        self.c * self.rows_held() * pw
    }

    /// Floats of the padded image the tasks share: the whole image where blocks are
    /// shared, none where each block pads its own rows (in its task's buffers).
    fn image_len(&self) -> usize {
        match self.split {
            Split::Channels => self.padded_len(),
            Split::None | Split::Blocks => 0,
        }
    }

    /// Floats of one set of block buffers: V and M for every ξ, and the padded input's
    /// rows where each block pads its own.
    fn task_len(&self) -> usize {
        let window = match self.split {
            Split::Channels => 0,
            Split::None | Split::Blocks => self.padded_len(),
        };
        16 * (self.c + self.m) * self.block + window
    }

    /// Scratch floats [`Winograd::run`] needs: with `transform` (raw weights) room for
    /// `U` too.
    pub(super) fn scratch_len(&self, transform: bool) -> usize {
        let u = if transform { 16 * self.m * self.c } else { 0 };
        self.image_len() + u + self.buffers() * self.task_len()
    }

    /// The first tile of block `b` and its tile count.
    fn span(&self, b: usize) -> (usize, usize) {
        let first = b * self.block;
        (first, self.block.min(self.tiles() - first))
    }

    /// The convolution of `x` (`[c, h, w]`) by the weights `w`, plus `bias`, then
    /// `epilogue`, into `out` (`[m, oh, ow]`), using `scratch` (at least
    /// [`Winograd::scratch_len`] floats for `w`, contents unspecified); across threads as
    /// the plan's `parallel` said (see [`Split`]).
    pub(super) fn run(
        &self,
        x: &[f32],
        w: Weights,
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        scratch: &mut [f32],
        out: &mut [f32],
    ) {
        let (ph, pw) = self.plane();
        let (m, c) = (self.m, self.c);
        let (raw, room) = match w {
            Weights::Raw(w) => (Some(w), w.len() >= m * c * 9),
            Weights::Transformed(u) => (None, u.len() >= 16 * m * c),
        };
        assert!(
            room && bias.is_none_or(|b| b.len() >= m),
            "winograd conv: weights or bias too short"
        );
        assert!(out.len() >= m * self.oh * self.ow, "output too short");
        let (padded, rest) = scratch.split_at_mut(self.image_len());
        let (u, rest) = rest.split_at_mut(if raw.is_some() { 16 * m * c } else { 0 });
        let bufs = &mut rest[..self.buffers() * self.task_len()];
        let tasks = self.tasks();
        // The whole padded image, where blocks share it.
        let whole = Padded {
            planes: SharedOut(padded.as_mut_ptr()),
            stride: ph * pw,
            first_row: 0,
        };
        // U: made in the scratch from raw weights, else the caller's, only ever read
        // (the pointer is mutable for `SharedOut`'s sake; nothing writes through it).
        let us = match w {
            Weights::Raw(_) => SharedOut(u.as_mut_ptr()),
            Weights::Transformed(u) => SharedOut(u.as_ptr().cast_mut()),
        };
        let out = SharedOut(out.as_mut_ptr());
        // Each task pads its share of the input channels (where blocks share the padded
        // image) and transforms its share of the weights: one hand-off for both.
        let prepare = |t: usize| {
            // SAFETY: this CPU has `self.isa` (from `Isa::detect`); `whole` holds the `c`
            // planes where blocks are shared and, with raw weights, `us` U (`16 m c`
            // floats of the scratch), and task `t` writes only its shares (`part`) of
            // their channels.
            unsafe {
                if self.split == Split::Channels {
                    self.pad(x, &whole, 0..ph, part(c, t, tasks));
                }
                if let Some(w) = raw {
                    self.transform_weights(w, &us, part(m, t, tasks));
                }
            }
        };
        // The terms every unsafe call below meets ("the run's terms"): `self.isa` came
        // from `Isa::detect`, so this CPU has it. The padded image and U are written by
        // `prepare` only (a transformed U by no one), and read after every task has
        // prepared (a parallel loop returns when all its tasks have), or, in a shared
        // block's first step, by the task that prepared them; a block's own padded rows
        // are written and read by its task alone. `out` is the `[m, oh, ow]` output (asserted) and each
        // call writes the tiles of its own block and output channels. `bufs` holds the
        // block buffers (`buffers` sets of `task_len`), each used by one task at a time,
        // or by the tasks of a shared block in disjoint rows: their input channels' V,
        // then (after the loop that made V) their output channels' M.
        match self.split {
            Split::None | Split::Blocks => {
                each(tasks, prepare);
                let per = self.blocks().div_ceil(tasks);
                let task = |t: usize, buf: &mut [f32]| {
                    let (v, rest) = buf.split_at_mut(16 * c * self.block);
                    let (mx, rows) = rest.split_at_mut(16 * m * self.block);
                    let (v, mx) = (SharedOut(v.as_mut_ptr()), SharedOut(mx.as_mut_ptr()));
                    for b in t * per..((t + 1) * per).min(self.blocks()) {
                        let (first, n) = self.span(b);
                        let window = self.window(first, n);
                        let held = Padded {
                            planes: SharedOut(rows.as_mut_ptr()),
                            stride: self.rows_held() * pw,
                            first_row: window.start,
                        };
                        // SAFETY: the run's terms; this task's buffers, its blocks; the
                        // window's rows fit the rows held (`rows_held`).
                        unsafe {
                            self.pad(x, &held, window, 0..c);
                            self.input_tiles(&held, first, n, 0..c, &v);
                            self.products(&us, &v, n, 0..m, &mx);
                            self.output_tiles(&mx, first, n, 0..m, bias, epilogue, &out);
                        }
                    }
                };
                if tasks > 1 {
                    bufs.par_chunks_mut(self.task_len())
                        .enumerate()
                        .for_each(|(t, buf)| task(t, buf));
                } else {
                    task(0, bufs);
                }
            }
            Split::Channels => {
                let (v, mx) = bufs.split_at_mut(16 * c * self.block);
                let (v, mx) = (SharedOut(v.as_mut_ptr()), SharedOut(mx.as_mut_ptr()));
                for b in 0..self.blocks() {
                    let (first, n) = self.span(b);
                    each(tasks, |t| {
                        if b == 0 {
                            prepare(t);
                        }
                        // SAFETY: the run's terms; the task's share of V's rows.
                        unsafe { self.input_tiles(&whole, first, n, part(c, t, tasks), &v) };
                    });
                    each(tasks, |t| {
                        let outs = part(m, t, tasks);
                        // SAFETY: the run's terms; the task's share of M's rows and of
                        // the output channels.
                        unsafe {
                            self.products(&us, &v, n, outs.clone(), &mx);
                            self.output_tiles(&mx, first, n, outs, bias, epilogue, &out);
                        }
                    });
                }
            }
        }
    }

    /// The padded rows `rows` of `x`'s channels `ins` into `padded` (from its first
    /// row, `rows.start`): `x`'s rows at row `pt`, column `pl`, the rest zero.
    ///
    /// # Safety
    /// `padded` holds the `c` planes, each room for `rows` (`rows.end - padded.first_row`
    /// rows of `pw` at most `padded.stride`), whose planes of `ins` no other thread
    /// touches while this runs.
    unsafe fn pad(&self, x: &[f32], padded: &Padded, rows: Range<usize>, ins: Range<usize>) {
        let (_, pw) = self.plane();
        let (h, w, pt, pl) = (self.h, self.w, self.pt, self.pl);
        assert!(
            rows.start >= padded.first_row && (rows.end - padded.first_row) * pw <= padded.stride
        );
        let x = &x[..self.c * h * w];
        for i in ins {
            let src = &x[i * h * w..][..h * w];
            // SAFETY: plane i of the `c` (i < c: `x` holds c planes), this call's own, its
            // rows `rows` inside it (asserted).
            let plane = unsafe {
                let first = padded
                    .planes
                    .0
                    .add(i * padded.stride + (rows.start - padded.first_row) * pw);
                std::slice::from_raw_parts_mut(first, rows.len() * pw)
            };
            for (r, row) in rows.clone().zip(plane.chunks_exact_mut(pw)) {
                match r.checked_sub(pt).filter(|&y| y < h) {
                    Some(y) => {
                        row[..pl].fill(0.0);
                        row[pl..pl + w].copy_from_slice(&src[y * w..][..w]);
                        row[pl + w..].fill(0.0);
                    }
                    None => row.fill(0.0),
                }
            }
        }
    }

    /// `U_ξ[o][i]`, at `u[(ξ m + o) c + i]`, for the output channels `outs`: `G g Gᵀ`
    /// of each 3x3 `g`, with `G = [[1, 0, 0], [½, ½, ½], [½, -½, ½], [0, 0, 1]]`.
    ///
    /// # Safety
    /// This CPU has `self.isa`; `u` points at `16 m c` floats, whose rows of `outs` no
    /// other thread touches while this runs.
    unsafe fn transform_weights(&self, w: &[f32], u: &SharedOut, outs: Range<usize>) {
        assert!(w.len() >= self.m * self.c * 9 && outs.end <= self.m);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's terms, passed on; `w`'s size is asserted.
        unsafe {
            match self.isa {
                Isa::Avx512 => x86::weights_avx512(self, w, u, outs),
                Isa::Avx2 => x86::weights_avx2(self, w, u, outs),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no ISA to plan for: {w:p} {:p} {outs:?}", u.0)
    }

    /// `M_ξ = U_ξ V_ξ` for the rows `outs` (output channels) of every ξ, over the `n`
    /// tiles of a block: one sgemm per ξ.
    ///
    /// # Safety
    /// `u` holds U (`16 m c` floats), `v` the block's V (`16 c n`) and `mx` room for its
    /// M (`16 m n`), whose rows of `outs` no other thread touches while this runs, and
    /// no thread writes U's or V's.
    unsafe fn products(
        &self,
        u: &SharedOut,
        v: &SharedOut,
        n: usize,
        outs: Range<usize>,
        mx: &SharedOut,
    ) {
        let (m, c) = (self.m, self.c);
        for xi in 0..16 {
            // SAFETY: rows `outs` of U_ξ (m x c at `u + ξ m c`), V_ξ (c x n, rows `n`
            // apart, at `v + ξ c n`) and rows `outs` of M_ξ (m x n at `mx + ξ m n`) lie
            // in the caller's buffers; M's rows alias neither and are only written
            // (beta 0).
            unsafe {
                sgemm(
                    outs.len(),
                    c,
                    n,
                    1.0,
                    u.0.add((xi * m + outs.start) * c),
                    c as isize,
                    1,
                    v.0.add(xi * c * n),
                    n as isize,
                    1,
                    0.0,
                    mx.0.add((xi * m + outs.start) * n),
                    n as isize,
                    1,
                );
            }
        }
    }

    /// `V_ξ[i][t]` at `v[(ξ c + i) n + t]` for the input channels `ins` and the `n`
    /// tiles from `first`.
    ///
    /// # Safety
    /// This CPU has `self.isa`; `padded` holds the `c` padded planes' rows these tiles
    /// read ([`Winograd::window`]), whose planes of `ins` no thread writes while this
    /// runs; `v` points at `16 c n` floats, whose
    /// rows of `ins` no other thread touches while this runs.
    unsafe fn input_tiles(
        &self,
        padded: &Padded,
        first: usize,
        n: usize,
        ins: Range<usize>,
        v: &SharedOut,
    ) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's terms, passed on.
        unsafe {
            match self.isa {
                Isa::Avx512 => x86::input_tiles_avx512(self, padded, first, n, ins, v),
                Isa::Avx2 => x86::input_tiles_avx2(self, padded, first, n, ins, v),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!(
            "no ISA to plan for: {:p} {first} {n} {ins:?} {:p}",
            padded.planes.0, v.0
        )
    }

    /// The output tiles of the `n` tiles from `first` in the output channels `outs`, from
    /// `M_ξ[o][t]` at `mx[(ξ m + o) n + t]`.
    ///
    /// # Safety
    /// This CPU has `self.isa`; `mx` holds the block's M (`16 m n` floats), which no
    /// thread writes while this runs; `out` points at the `[m, oh, ow]` output, whose
    /// tiles of these tiles and channels no other thread touches while this runs.
    #[allow(clippy::too_many_arguments)]
    unsafe fn output_tiles(
        &self,
        mx: &SharedOut,
        first: usize,
        n: usize,
        outs: Range<usize>,
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        out: &SharedOut,
    ) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's terms, passed on.
        unsafe {
            match self.isa {
                Isa::Avx512 => {
                    x86::output_tiles_avx512(self, mx, first, n, outs, bias, epilogue, out)
                }
                Isa::Avx2 => x86::output_tiles_avx2(self, mx, first, n, outs, bias, epilogue, out),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!(
            "no ISA to plan for: {:p} {first} {n} {outs:?} {bias:?} {epilogue:?} {:p}",
            mx.0, out.0
        )
    }
}

/// `U` of the weights `w` (`[m, c, 3, 3]`): `U_ξ[o][i]` at `(ξ m + o) c + i`, as
/// [`Winograd::run`] makes it from raw weights, done once (lowering's `ConvWinograd`).
/// The operations and their order are the vector code's (`x86::weights`), so are the
/// bits.
pub(super) fn transform(w: &[f32], m: usize, c: usize) -> Vec<f32> {
    assert!(
        w.len() >= m * c * 9,
        "winograd transform: weights too short"
    );
    let mut u = vec![0.0; 16 * m * c];
    // `G r` for a row or column `r` of three.
    let gr = |a: f32, b: f32, c: f32| [a, (a + b + c) * 0.5, (a - b + c) * 0.5, c];
    for o in 0..m {
        for i in 0..c {
            let g = &w[(o * c + i) * 9..][..9];
            let cols: [[f32; 4]; 3] = std::array::from_fn(|j| gr(g[j], g[3 + j], g[6 + j]));
            for r in 0..4 {
                let row = gr(cols[0][r], cols[1][r], cols[2][r]);
                for (j, v) in row.into_iter().enumerate() {
                    u[((4 * r + j) * m + o) * c + i] = v;
                }
            }
        }
    }
    u
}

/// The convolution of [`Winograd::run`] from `U` (`[16, m, c]`) in portable code, for a
/// CPU without the vector kernels: `out` (`[m, oh, ow]`) from `x` (`[c, h, w]`) by the
/// same transforms, the products summed in input-channel order. The results agree with
/// the vector kernels' to rounding.
#[allow(clippy::too_many_arguments)]
pub(super) fn portable(
    win: &Window,
    c: usize,
    m: usize,
    x: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    epilogue: Option<Epilogue>,
    out: &mut [f32],
) {
    let [_, h, w] = win.input;
    let [_, oh, ow] = win.output;
    let (pt, pl) = (win.pad_begin[1], win.pad_begin[2]);
    assert!(x.len() >= c * h * w && u.len() >= 16 * m * c && out.len() >= m * oh * ow);
    let at = |i: usize, r: isize, col: isize| -> f32 {
        match (usize::try_from(r), usize::try_from(col)) {
            (Ok(r), Ok(col)) if r < h && col < w => x[(i * h + r) * w + col],
            _ => 0.0,
        }
    };
    // One tile's V for every input channel (`v[ξ c + i]`), then its M per output channel.
    super::scratch::with_scratch(16 * c, |v: &mut [f32]| {
        for tr in 0..oh.div_ceil(2) {
            for tc in 0..ow.div_ceil(2) {
                let (r0, c0) = ((2 * tr) as isize - pt, (2 * tc) as isize - pl);
                for i in 0..c {
                    let d: [[f32; 4]; 4] = std::array::from_fn(|r| {
                        std::array::from_fn(|j| at(i, r0 + r as isize, c0 + j as isize))
                    });
                    // d B, then Bᵀ (d B), as the vector code's `input_tiles`.
                    let rows = d.map(|[d0, d1, d2, d3]| [d0 - d2, d1 + d2, d2 - d1, d1 - d3]);
                    let [a0, a1, a2, a3] = rows;
                    for j in 0..4 {
                        let col = [a0[j] - a2[j], a1[j] + a2[j], a2[j] - a1[j], a1[j] - a3[j]];
                        for (a, val) in col.into_iter().enumerate() {
                            v[(4 * a + j) * c + i] = val;
                        }
                    }
                }
                for o in 0..m {
                    let mx: [f32; 16] = std::array::from_fn(|xi| {
                        let (uo, vx) = (&u[(xi * m + o) * c..][..c], &v[xi * c..][..c]);
                        uo.iter().zip(vx).fold(0.0, |s, (a, b)| s + a * b)
                    });
                    // Aᵀ M A, as `output_tiles`.
                    let s = [
                        std::array::from_fn::<f32, 4, _>(|j| mx[j] + mx[4 + j] + mx[8 + j]),
                        std::array::from_fn::<f32, 4, _>(|j| mx[4 + j] - mx[8 + j] - mx[12 + j]),
                    ];
                    let b = bias.map_or(0.0, |b| b[o]);
                    for (r, s) in s.iter().enumerate() {
                        let y = 2 * tr + r;
                        if y >= oh {
                            break;
                        }
                        let pair = [s[0] + s[1] + s[2] + b, s[1] - s[2] - s[3] + b];
                        for (k, val) in pair.into_iter().enumerate() {
                            if 2 * tc + k < ow {
                                out[(o * oh + y) * ow + 2 * tc + k] = val;
                            }
                        }
                    }
                }
            }
        }
    });
    if let Some(e) = epilogue {
        e.apply_f32(&mut out[..m * oh * ow]);
    }
}

/// Padded input planes as the input transform reads them: channel `i`'s at
/// `planes + i * stride`, holding the padded rows from `first_row` on (all of them, or a
/// block's window).
struct Padded {
    planes: SharedOut,
    stride: usize,
    first_row: usize,
}

/// Runs `f(t)` for each task `t < tasks`: across rayon's threads when there are several.
fn each(tasks: usize, f: impl Fn(usize) + Sync + Send) {
    if tasks > 1 {
        (0..tasks).into_par_iter().for_each(f);
    } else {
        f(0);
    }
}

/// The `t`-th of `tasks` near-equal consecutive shares of `0..len`.
fn part(len: usize, t: usize, tasks: usize) -> Range<usize> {
    len * t / tasks..len * (t + 1) / tasks
}

/// Channels below which the transforms cost too much beside the products.
const MIN_CHANNELS: usize = 16;
/// Output tiles below which the direct kernels are faster: the per-call weight transform
/// and the products' narrow tiles cost more than the multiplies saved. Measured here, one
/// thread, against the direct kernels: at 32 tiles (4 x 32 outputs) 64 -> 64 channels took
/// 25% less, 32 -> 64 and 96 -> 96 20-40% less, 48 -> 64 and 32 -> 32 (8 x 16) the same;
/// at 16 tiles (2 x 32) 128 -> 128 took 30% longer and 64 -> 64 no less.
const MIN_TILES: usize = 32;
/// Tiles below which a block is too narrow to split a call's work by blocks ([`Split`]).
const MIN_SPLIT_BLOCK: usize = 64;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::ops::Range;

    use super::{Epilogue, Padded, SharedOut, Winograd};
    use crate::ops::simd::{Avx2, Avx512, Simd, compiled_for, transpose};

    compiled_for!(input_tiles_avx512 = input_tiles::<Avx512>(
        k: &Winograd, padded: &Padded, first: usize, n: usize, ins: Range<usize>, v: &SharedOut
    ));
    compiled_for!(input_tiles_avx2 = input_tiles::<Avx2>(
        k: &Winograd, padded: &Padded, first: usize, n: usize, ins: Range<usize>, v: &SharedOut
    ));
    compiled_for!(output_tiles_avx512 = output_tiles::<Avx512>(
        k: &Winograd, mx: &SharedOut, first: usize, n: usize, outs: Range<usize>,
        bias: Option<&[f32]>, epilogue: Option<Epilogue>, out: &SharedOut
    ));
    compiled_for!(output_tiles_avx2 = output_tiles::<Avx2>(
        k: &Winograd, mx: &SharedOut, first: usize, n: usize, outs: Range<usize>,
        bias: Option<&[f32]>, epilogue: Option<Epilogue>, out: &SharedOut
    ));
    compiled_for!(weights_avx512 = weights::<Avx512>(
        k: &Winograd, w: &[f32], u: &SharedOut, outs: Range<usize>
    ));
    compiled_for!(weights_avx2 = weights::<Avx2>(
        k: &Winograd, w: &[f32], u: &SharedOut, outs: Range<usize>
    ));

    /// [`Winograd::transform_weights`] in `S`'s vectors, `S::LANES` input channels at a
    /// time: their 3x3 kernels transposed tap-major (a vector per tap), `G g Gᵀ` on the
    /// vectors, each of the 16 results one store of consecutive `U_ξ[o][i]`.
    ///
    /// Why vectors: one (output, input) pair at a time, the 16 results go 4 m c bytes
    /// apart, each store its own cache line; for the 4096 pairs of a 64 -> 64 layer that
    /// took longer than the layer's products on an image of 32 tiles.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `w` holds `m c 9` floats; as [`Winograd::transform_weights`]
    /// for `u` and `outs`.
    #[inline(always)]
    unsafe fn weights<S: Simd>(k: &Winograd, w: &[f32], u: &SharedOut, outs: Range<usize>) {
        let (m, c, l) = (k.m, k.c, S::LANES);
        let mut taps = [0f32; 9 * 16];
        for o in outs {
            for i0 in (0..c).step_by(l) {
                let n = (c - i0).min(l);
                // SAFETY: the set is the caller's. The transposes read `n` rows of the 9
                // floats of pairs (o, i0 ..), inside `w` (`(o c + i0 + n) 9 <= m c 9`),
                // and write 9 vectors into `taps`; the loads read those; the stores
                // write `n` floats at `(ξ m + o) c + i0`, inside `u` (`i0 + n <= c`),
                // in row o of U_ξ, this call's (the contract).
                unsafe {
                    let t = taps.as_mut_ptr();
                    let src = w.as_ptr().add((o * c + i0) * 9);
                    // AVX2's 8 lanes take the 9 taps in two transposes.
                    for k0 in (0..9).step_by(l) {
                        let cols = (9 - k0).min(l);
                        transpose::<S>(src.add(k0), 9, (n, cols), |j| t.add((k0 + j) * l), l);
                    }
                    let g: [S::V; 9] = std::array::from_fn(|j| S::load(t.add(j * l)));
                    let half = S::splat(0.5);
                    // `G r` for a row or column `r` of three, as the scalar form
                    // `[a, (a + b + c) ½, (a - b + c) ½, c]`.
                    let gr = |a: S::V, b: S::V, c: S::V| {
                        [
                            a,
                            S::mul(S::add(S::add(a, b), c), half),
                            S::mul(S::add(S::sub(a, b), c), half),
                            c,
                        ]
                    };
                    let cols: [[S::V; 4]; 3] =
                        std::array::from_fn(|j| gr(g[j], g[3 + j], g[6 + j]));
                    let rows: [[S::V; 4]; 4] =
                        std::array::from_fn(|r| gr(cols[0][r], cols[1][r], cols[2][r]));
                    for (r, row) in rows.iter().enumerate() {
                        for (j, &v) in row.iter().enumerate() {
                            let p = u.0.add(((4 * r + j) * m + o) * c + i0);
                            if n == l {
                                S::store(p, v);
                            } else {
                                S::store_first(p, v, n);
                            }
                        }
                    }
                }
            }
        }
    }

    /// [`Winograd::input_tiles`] in `S`'s vectors, `S::LANES` tiles at a time: row `r`
    /// of the tiles' windows is the even and odd columns from the window's start (its
    /// columns 0 and 1) and from two further (2 and 3).
    ///
    /// # Safety
    /// This CPU has `S`'s set; as [`Winograd::input_tiles`] for `v` and `ins`.
    #[inline(always)]
    unsafe fn input_tiles<S: Simd>(
        k: &Winograd,
        padded: &Padded,
        first: usize,
        n: usize,
        ins: Range<usize>,
        v: &SharedOut,
    ) {
        let (_, pw) = k.plane();
        let c = k.c;
        assert!(ins.end <= c);
        assert!([first, n, k.tw].iter().all(|v| v.is_multiple_of(S::LANES)));
        let rows_held = k.window(first, n);
        assert!(rows_held.start >= padded.first_row);
        assert!((rows_held.end - padded.first_row) * pw <= padded.stride);
        for i in ins {
            // SAFETY: plane i < c of the caller's `c`.
            let plane = unsafe { padded.planes.0.add(i * padded.stride) }.cast_const();
            for t in (0..n).step_by(S::LANES) {
                let (tr, tc) = ((first + t) / k.tw, (first + t) % k.tw);
                let top = 2 * tr - padded.first_row;
                // SAFETY: the ISA is the caller's; padded rows 2 tr .. 2 tr + 3 lie in
                // the tiles' window, which the plane holds from `first_row` (asserted),
                // and columns 2 tc .. 2 tc + 2 LANES + 1 < pw (tc + LANES <= tw) in its
                // rows; the stores are at `(ξ c + i) n + t .. + LANES` with t + LANES
                // <= n and i < c, inside `v`, in row i of V_ξ, this call's (the contract).
                unsafe {
                    let mut rows = [[S::zero(); 4]; 4];
                    for (r, row) in rows.iter_mut().enumerate() {
                        let p = plane.add((top + r) * pw + 2 * tc);
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
                            S::store(v.0.add(((4 * a + j) * c + i) * n + t), val);
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
    /// This CPU has `S`'s set; as [`Winograd::output_tiles`] for `mx`, `outs` and `out`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn output_tiles<S: Simd>(
        k: &Winograd,
        mx: &SharedOut,
        first: usize,
        n: usize,
        outs: Range<usize>,
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        out: &SharedOut,
    ) {
        let (m, oh, ow) = (k.m, k.oh, k.ow);
        assert!(outs.end <= m);
        for o in outs {
            // SAFETY: the ISA is the caller's.
            let b = unsafe { S::splat(bias.map_or(0.0, |b| b[o])) };
            for t in (0..n).step_by(S::LANES) {
                let (tr, tc) = ((first + t) / k.tw, (first + t) % k.tw);
                if 2 * tc >= ow {
                    continue;
                }
                // SAFETY: the ISA is the caller's; the loads are at `(ξ m + o) n + t ..
                // + LANES`, inside `mx` (o < m, t + LANES <= n); the stores write row
                // 2 tr (< oh) and 2 tr + 1 when < oh, columns 2 tc .. < ow, of plane o of
                // the caller's `[m, oh, ow]` output.
                unsafe {
                    let at = |xi: usize| S::load(mx.0.add((xi * m + o) * n + t));
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
