//! float32 3x3 convolutions of stride 1 by Winograd's minimal filtering, F(2x2, 3x3) and
//! F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
//! 2016).
//!
//! Why: a direct 3x3 convolution spends 9 multiply-adds per output, input channel and
//! output channel, and the direct kernels here (conv_direct.rs, conv_blocked.rs) already
//! run those near the FMA units' peak; ONNX Runtime's NCHWc kernels do too. Past the
//! peak the only way to be faster is fewer multiplies. F(2x2, 3x3) computes a 2x2 output
//! tile from a 4x4 input tile with 16 products instead of 36, 2.25 times fewer; F(4x4,
//! 3x3) a 4x4 tile from a 6x6 one with 36 instead of 144, 4 times fewer:
//!
//! - the weights of each (output channel, input channel) become an `a x a` `U = G g Gᵀ`
//!   (`a` = 4 or 6, the window's side);
//! - each `a x a` input tile of each channel becomes `V = Bᵀ d B` (additions, and for
//!   F(4x4) multiplies by 2, 4 and 5 fused into them);
//! - for each of the `a²` positions ξ, the products over the input channels are one
//!   matrix product `M_ξ = U_ξ [out x in] · V_ξ [in x tiles]`, rt2's sgemm;
//! - each output tile is `Aᵀ M A`, plus the bias, then the activation.
//!
//! F(2x2, 3x3)'s transforms multiply by 1, -1 and 1/2 only, so its error is that of a
//! direct sum of the same terms. F(4x4, 3x3)'s (the points 0, ±1, ±2) scale by up to 8
//! and by 1/24 and lose bits: measured in the tests against the definition, its worst
//! error is 3e-6 to 7e-6 of the output's largest magnitude, ten times F(2x2)'s (on the
//! UNet, 143 of 262144 outputs differ from ONNX Runtime's by more than 3e-5 relative and
//! 3e-6 absolute, against one with F(2x2) alone; none by 1e-4 and 1e-5). The larger
//! variants, F(6x6, 3x3) and up, lose several bits more and are not used.
//! [`Winograd::tile_for`] takes F(4x4) where its grid of tiles (rounded up to whole
//! groups of them) costs at most three quarters of F(2x2)'s products, F(2x2) elsewhere.
//!
//! The tiles are taken in blocks sized for L2 (the block's V and M for every ξ), each
//! block transformed, multiplied and transformed back before the next. Threads take
//! whole blocks; on an image too small for a block of useful width per thread, each
//! takes every block, transforms all of its input channels and multiplies and
//! transforms back a share of its output channels ([`Split`]). The input is
//! copied into zero-padded planes whose width is a whole number of vectors of tiles, so
//! the transforms run without bounds checks in vectors of `LANES` tiles: a tile row's
//! 4x4 windows start two columns apart, and the even and odd columns of two vectors give
//! the window's four columns for `LANES` tiles at once; 6x6 windows start four apart,
//! and four vectors split by parity twice give columns 0 to 3, those moved down a lane
//! columns 4 and 5. The tiles of the rounding, past the output's edge, are computed
//! and not stored.
//!
//! Each block pads only the input rows its tiles read, into a window of its task's
//! buffers, just before it transforms them: the copy lands in L2 and the transform reads
//! it from there. Padding the whole image first wrote a second copy of the input to
//! memory and read it back: for a UNet decoder's 48 -> 32 layer over 256 x 256 that is
//! 25 MB of traffic, and the copy alone was a tenth of the model's time.
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

/// Which of Winograd's algorithms a convolution runs: the side of its output tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tile {
    /// F(2x2, 3x3): 2x2 outputs from a 4x4 window, 16 products.
    F2,
    /// F(4x4, 3x3): 4x4 outputs from a 6x6 window, 36 products.
    F4,
}

impl Tile {
    /// The side of an output tile.
    pub(super) const fn out(self) -> usize {
        match self {
            Tile::F2 => 2,
            Tile::F4 => 4,
        }
    }

    /// The side of a tile's input window: the output's and the kernel's less one.
    pub(super) const fn side(self) -> usize {
        self.out() + 2
    }

    /// The positions ξ of the transformed window, each one product.
    pub(super) const fn positions(self) -> usize {
        self.side() * self.side()
    }

    /// The algorithm whose `U` has `positions` rows of `[m, c]`.
    pub(super) fn of_positions(positions: usize) -> Option<Tile> {
        [Tile::F2, Tile::F4]
            .into_iter()
            .find(|t| t.positions() == positions)
    }

    /// Tile rows and tile columns (these rounded up to [`GROUP`]) covering an `oh` x
    /// `ow` output, and how many of those tiles hold outputs.
    fn grid(self, oh: usize, ow: usize) -> (usize, usize, usize) {
        let (th, used_w) = (oh.div_ceil(self.out()), ow.div_ceil(self.out()));
        (th, used_w.next_multiple_of(GROUP), th * used_w)
    }
}

/// A 3x3 stride-1 convolution of one (image, group) block by Winograd's F(2x2, 3x3) or
/// F(4x4, 3x3).
#[derive(Debug, Clone)]
pub(super) struct Winograd {
    isa: Isa,
    tile: Tile,
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
    /// Every thread takes every block: it pads and transforms all the block's input
    /// channels into buffers of its own, then multiplies and transforms back its share
    /// of the output channels. Images too small for a block of at least
    /// [`MIN_SPLIT_BLOCK`] tiles per thread, whose products, cut into narrower blocks,
    /// would be too narrow for sgemm's tiles (a 48 -> 48 layer over 8 x 32 took longer
    /// in four blocks of 16 tiles on two threads than the direct kernel).
    ///
    /// The input transform is done once per thread rather than shared, because sharing
    /// it is what costs: threads that split the input channels must meet after the
    /// transform of each block, and each then reads the other's half of V (V is
    /// `ξs c n` floats, 512 KB for 128 channels over 64 tiles of F(2x2)). On a machine
    /// whose two cores share no cache (this one's two vCPUs, some of the time) that
    /// read crosses the chip: the CRNN's five Winograd layers took 465 us at two
    /// threads split that way, against 230 us on one thread; now 280 us, and 181 us
    /// (against 196) when the cores share their L3. The transform repeated is a small
    /// part of a layer's work: about `ξs c n` of its loads and adds against the
    /// products' `ξs c m n / threads` multiply-adds.
    Outputs,
}

impl Winograd {
    /// The algorithm that computes `win` over `c` input and `m` output channels, if one
    /// pays for itself, from the shapes alone: lowering decides with it, the same on
    /// every machine (`conv_packed.rs`).
    ///
    /// F(2x2, 3x3) where there are enough channels that the products dominate the
    /// transforms, enough tiles that the weight transform and the products' narrow tiles
    /// cost less than the multiplies saved, and not too many tiles of the rounding.
    /// F(4x4, 3x3) in its place where its grid's products are at most three quarters of
    /// F(2x2)'s (the rounding of its larger tiles can cost it the rest of its 1.78 times
    /// fewer multiplies: a 4 x 32 map is 16 tiles of 4x4 to 32 of 2x2, on more than
    /// twice the positions).
    pub(super) fn tile_for(win: &Window, c: usize, m: usize) -> Option<Tile> {
        if !Self::fits(win) || c < MIN_CHANNELS || m < MIN_CHANNELS {
            return None;
        }
        let [_, oh, ow] = win.output;
        let (th, tw, used) = Tile::F2.grid(oh, ow);
        if used < MIN_TILES || used * 4 < th * tw * 3 {
            return None;
        }
        let (th4, tw4, _) = Tile::F4.grid(oh, ow);
        let products = |tile: Tile, tiles: usize| tile.positions() * tiles;
        match products(Tile::F4, th4 * tw4) * 4 <= products(Tile::F2, th * tw) * 3 {
            true => Some(Tile::F4),
            false => Some(Tile::F2),
        }
    }

    /// Whether the kernels compute `win`: 2-D, 3x3, stride and dilation 1, padding of at
    /// most 2.
    fn fits(win: &Window) -> bool {
        let flat = win.input[0] == 1 && win.kernel[0] == 1;
        flat && win.kernel == [1, 3, 3]
            && win.stride == [1; 3]
            && win.dilation == [1; 3]
            && win.pad_begin[1..]
                .iter()
                .chain(&win.pad_end[1..])
                .all(|&p| (0..=2).contains(&p))
    }

    /// The plan for a window the kernels compute ([`Winograd::fits`]) by `tile`'s
    /// algorithm (whichever [`Winograd::tile_for`] would choose: lowering may have
    /// transformed the weights for it). With `parallel` (the call splits its work across
    /// threads) the blocks are cut small enough for two per thread, or, when that would
    /// make them too narrow, every thread takes every block and a share of the output
    /// channels ([`Split`]). Which kernel runs
    /// does not depend on the threads, so neither do the bits.
    pub(super) fn plan(
        win: &Window,
        c: usize,
        m: usize,
        tile: Tile,
        isa: Isa,
        parallel: bool,
    ) -> Option<Winograd> {
        if !Self::fits(win) || c == 0 || m == 0 {
            return None;
        }
        let [_, h, w] = win.input;
        let [_, oh, ow] = win.output;
        let (th, tw, _) = tile.grid(oh, ow);
        let tiles = th * tw;
        let per_tile = tile.positions() * (c + m) * 4;
        let mut block = (BLOCK_BYTES / per_tile / GROUP * GROUP).clamp(GROUP, tiles);
        let threads = rayon::current_num_threads();
        let share = tiles / (2 * threads) / GROUP * GROUP;
        let split = match parallel && threads > 1 {
            false => Split::None,
            true if share >= MIN_SPLIT_BLOCK => {
                block = block.min(share);
                Split::Blocks
            }
            true => Split::Outputs,
        };
        Some(Winograd {
            isa,
            tile,
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

    /// Whether every thread takes every block ([`Split::Outputs`]).
    #[cfg(test)]
    pub(super) fn shares_blocks(&self) -> bool {
        self.split == Split::Outputs
    }

    /// Padded plane rows and columns: every tile's window, and the vectors of its
    /// group's last loads (the `2 LANES` floats of F(2x2)'s even/odd loads from its
    /// window's columns 0 and 2, the `4 LANES` and two more of F(4x4)'s), lie inside.
    fn plane(&self) -> (usize, usize) {
        let t = self.tile.out();
        (t * self.th + 2, t * self.tw + 2)
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
            Split::Outputs => rayon::current_num_threads().max(1),
        }
    }

    /// Sets of block buffers a call uses: one per task.
    fn buffers(&self) -> usize {
        self.tasks()
    }

    /// Padded rows each channel's plane holds in a task's buffers: as many as a block's
    /// tiles read (each block pads its own, [`Winograd::window`]): the rows of the tile
    /// rows it spans, at most `block / tw` rounded up and one more, and the two below.
    fn rows_held(&self) -> usize {
        let (ph, _) = self.plane();
        let t = self.tile.out();
        (t * (self.block.div_ceil(self.tw) + 1) + 2).min(ph)
    }

    /// The padded rows the `n` tiles from `first` read: a tile's side per tile row, and
    /// two more.
    fn window(&self, first: usize, n: usize) -> Range<usize> {
        let (top, bottom) = (first / self.tw, (first + n - 1) / self.tw);
        let t = self.tile.out();
        t * top..t * bottom + t + 2
    }

    /// Floats of the padded input one copy holds: `c` planes of [`Winograd::rows_held`]
    /// rows.
    fn padded_len(&self) -> usize {
        let (_, pw) = self.plane();
        self.c * self.rows_held() * pw
    }

    /// Floats of one set of block buffers: V and M for every ξ, and the padded input's
    /// rows the block reads.
    fn task_len(&self) -> usize {
        self.tile.positions() * (self.c + self.m) * self.block + self.padded_len()
    }

    /// Scratch floats [`Winograd::run`] needs: with `transform` (raw weights) room for
    /// `U` too.
    pub(super) fn scratch_len(&self, transform: bool) -> usize {
        let u = if transform {
            self.tile.positions() * self.m * self.c
        } else {
            0
        };
        u + self.buffers() * self.task_len()
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
        let (_, pw) = self.plane();
        let (m, c, xis) = (self.m, self.c, self.tile.positions());
        let (raw, room) = match w {
            Weights::Raw(w) => (Some(w), w.len() >= m * c * 9),
            Weights::Transformed(u) => (None, u.len() >= xis * m * c),
        };
        assert!(
            room && bias.is_none_or(|b| b.len() >= m),
            "winograd conv: weights or bias too short"
        );
        assert!(out.len() >= m * self.oh * self.ow, "output too short");
        let (u, rest) = scratch.split_at_mut(if raw.is_some() { xis * m * c } else { 0 });
        let bufs = &mut rest[..self.buffers() * self.task_len()];
        let tasks = self.tasks();
        // U: made in the scratch from raw weights, else the caller's, only ever read
        // (the pointer is mutable for `SharedOut`'s sake; nothing writes through it).
        let us = match w {
            Weights::Raw(_) => SharedOut(u.as_mut_ptr()),
            Weights::Transformed(u) => SharedOut(u.as_ptr().cast_mut()),
        };
        let out = SharedOut(out.as_mut_ptr());
        // Raw weights: each task transforms its share of them, and all have before any
        // block's products read U (a parallel loop returns when all its tasks have).
        if let Some(w) = raw {
            each(tasks, |t| {
                // SAFETY: this CPU has `self.isa` (from `Isa::detect`); `us` holds U (`ξs
                // m c` floats of the scratch), and task `t` writes only its share of its
                // output channels.
                unsafe { self.transform_weights(w, &us, part(m, t, tasks)) }
            });
        }
        // Task `t`'s blocks and output channels: a consecutive share of the blocks and
        // every channel, or every block and a share of the channels.
        let per = self.blocks().div_ceil(tasks);
        let share = |t: usize| match self.split {
            Split::None | Split::Blocks => (t * per..((t + 1) * per).min(self.blocks()), 0..m),
            Split::Outputs => (0..self.blocks(), part(m, t, tasks)),
        };
        let task = |t: usize, buf: &mut [f32]| {
            let (v, rest) = buf.split_at_mut(xis * c * self.block);
            let (mx, rows) = rest.split_at_mut(xis * m * self.block);
            let (v, mx) = (SharedOut(v.as_mut_ptr()), SharedOut(mx.as_mut_ptr()));
            let (blocks, outs) = share(t);
            for b in blocks {
                let (first, n) = self.span(b);
                let window = self.window(first, n);
                let held = Padded {
                    planes: SharedOut(rows.as_mut_ptr()),
                    stride: self.rows_held() * pw,
                    first_row: window.start,
                };
                // SAFETY: `self.isa` came from `Isa::detect`, so this CPU has it. U is
                // written before this (above) or by no one. The padded rows, V and M
                // are this task's own buffers (`buffers` sets of `task_len`), and the
                // window's rows fit the rows held (`rows_held`). `out` is the `[m, oh,
                // ow]` output (asserted), and the task writes only the tiles of its
                // blocks in its output channels, which no two tasks share.
                unsafe {
                    self.pad(x, &held, window);
                    self.input_tiles(&held, first, n, &v);
                    self.products(&us, &v, n, outs.clone(), &mx);
                    self.output_tiles(&mx, first, n, outs.clone(), bias, epilogue, &out);
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

    /// The padded rows `rows` of every channel of `x` into `padded` (from its first row,
    /// `rows.start`): `x`'s rows at row `pt`, column `pl`, the rest zero.
    ///
    /// # Safety
    /// `padded` holds the `c` planes, each room for `rows` (`rows.end - padded.first_row`
    /// rows of `pw` at most `padded.stride`), which no other thread touches while this
    /// runs.
    unsafe fn pad(&self, x: &[f32], padded: &Padded, rows: Range<usize>) {
        let (_, pw) = self.plane();
        let (h, w, pt, pl) = (self.h, self.w, self.pt, self.pl);
        assert!(
            rows.start >= padded.first_row && (rows.end - padded.first_row) * pw <= padded.stride
        );
        let x = &x[..self.c * h * w];
        for (i, src) in x.chunks_exact(h * w).enumerate() {
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
    /// of each 3x3 `g` ([`transform`]'s `G`).
    ///
    /// # Safety
    /// This CPU has `self.isa`; `u` points at `ξs m c` floats (ξs the tile's positions),
    /// whose rows of `outs` no other thread touches while this runs.
    unsafe fn transform_weights(&self, w: &[f32], u: &SharedOut, outs: Range<usize>) {
        assert!(w.len() >= self.m * self.c * 9 && outs.end <= self.m);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's terms, passed on; `w`'s size is asserted.
        unsafe {
            match (self.isa, self.tile) {
                (Isa::Avx512, Tile::F2) => x86::weights_avx512(self, w, u, outs),
                (Isa::Avx2, Tile::F2) => x86::weights_avx2(self, w, u, outs),
                (Isa::Avx512, Tile::F4) => x86::weights4_avx512(self, w, u, outs),
                (Isa::Avx2, Tile::F4) => x86::weights4_avx2(self, w, u, outs),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no ISA to plan for: {w:p} {:p} {outs:?}", u.0)
    }

    /// `M_ξ = U_ξ V_ξ` for the rows `outs` (output channels) of every ξ, over the `n`
    /// tiles of a block: one sgemm per ξ.
    ///
    /// # Safety
    /// `u` holds U (`ξs m c` floats, ξs the tile's positions), `v` the block's V
    /// (`ξs c n`) and `mx` room for its M (`ξs m n`), whose rows of `outs` no other
    /// thread touches while this runs, and no thread writes U's or V's.
    unsafe fn products(
        &self,
        u: &SharedOut,
        v: &SharedOut,
        n: usize,
        outs: Range<usize>,
        mx: &SharedOut,
    ) {
        let (m, c) = (self.m, self.c);
        for xi in 0..self.tile.positions() {
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

    /// `V_ξ[i][t]` at `v[(ξ c + i) n + t]` for every input channel `i` and the `n` tiles
    /// from `first`.
    ///
    /// # Safety
    /// This CPU has `self.isa`; `padded` holds the `c` padded planes' rows these tiles
    /// read ([`Winograd::window`]), which no thread writes while this runs; `v` points at
    /// `ξs c n` floats (ξs the tile's positions), which no other thread touches while
    /// this runs.
    unsafe fn input_tiles(&self, padded: &Padded, first: usize, n: usize, v: &SharedOut) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's terms, passed on.
        unsafe {
            match (self.isa, self.tile) {
                (Isa::Avx512, Tile::F2) => x86::input_tiles_avx512(self, padded, first, n, v),
                (Isa::Avx2, Tile::F2) => x86::input_tiles_avx2(self, padded, first, n, v),
                (Isa::Avx512, Tile::F4) => x86::input_tiles4_avx512(self, padded, first, n, v),
                (Isa::Avx2, Tile::F4) => x86::input_tiles4_avx2(self, padded, first, n, v),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!(
            "no ISA to plan for: {:p} {first} {n} {:p}",
            padded.planes.0, v.0
        )
    }

    /// The output tiles of the `n` tiles from `first` in the output channels `outs`, from
    /// `M_ξ[o][t]` at `mx[(ξ m + o) n + t]`.
    ///
    /// # Safety
    /// This CPU has `self.isa`; `mx` holds the block's M (`ξs m n` floats), which no
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
            match (self.isa, self.tile) {
                (Isa::Avx512, Tile::F2) => {
                    x86::output_tiles_avx512(self, mx, first, n, outs, bias, epilogue, out)
                }
                (Isa::Avx2, Tile::F2) => {
                    x86::output_tiles_avx2(self, mx, first, n, outs, bias, epilogue, out)
                }
                (Isa::Avx512, Tile::F4) => {
                    x86::output_tiles4_avx512(self, mx, first, n, outs, bias, epilogue, out)
                }
                (Isa::Avx2, Tile::F4) => {
                    x86::output_tiles4_avx2(self, mx, first, n, outs, bias, epilogue, out)
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!(
            "no ISA to plan for: {:p} {first} {n} {outs:?} {bias:?} {epilogue:?} {:p}",
            mx.0, out.0
        )
    }
}

/// `U` of the weights `w` (`[m, c, 3, 3]`) for `tile`'s algorithm: `U_ξ[o][i]` at
/// `(ξ m + o) c + i`, as [`Winograd::run`] makes it from raw weights, done once
/// (lowering's `ConvWinograd`). The operations and their order are the vector code's
/// (`x86::weights`), so are the bits.
pub(super) fn transform(w: &[f32], m: usize, c: usize, tile: Tile) -> Vec<f32> {
    match tile {
        Tile::F2 => transform_with::<4>(w, m, c, g2),
        Tile::F4 => transform_with::<6>(w, m, c, g4),
    }
}

/// [`transform`] with `A`-point `G` as `g`, which maps a kernel row or column to `G r`.
fn transform_with<const A: usize>(
    w: &[f32],
    m: usize,
    c: usize,
    g: fn([f32; 3]) -> [f32; A],
) -> Vec<f32> {
    assert!(
        w.len() >= m * c * 9,
        "winograd transform: weights too short"
    );
    let mut u = vec![0.0; A * A * m * c];
    for o in 0..m {
        for i in 0..c {
            let k = &w[(o * c + i) * 9..][..9];
            let cols: [[f32; A]; 3] = std::array::from_fn(|j| g([k[j], k[3 + j], k[6 + j]]));
            for r in 0..A {
                let row = g([cols[0][r], cols[1][r], cols[2][r]]);
                for (j, v) in row.into_iter().enumerate() {
                    u[((A * r + j) * m + o) * c + i] = v;
                }
            }
        }
    }
    u
}

/// F(2x2, 3x3)'s `G r` for a row or column `r` of three:
/// `G = [[1, 0, 0], [½, ½, ½], [½, -½, ½], [0, 0, 1]]`.
fn g2([a, b, c]: [f32; 3]) -> [f32; 4] {
    [a, (a + b + c) * 0.5, (a - b + c) * 0.5, c]
}

/// F(4x4, 3x3)'s `G r` (Lavin and Gray's, of the points 0, ±1, ±2 and ∞):
/// `G = [[¼, 0, 0], [-⅙, -⅙, -⅙], [-⅙, ⅙, -⅙], [1/24, 1/12, ⅙], [1/24, -1/12, ⅙],
/// [0, 0, 1]]`, each factor the nearest float32 ([`G4`]).
fn g4([a, b, c]: [f32; 3]) -> [f32; 6] {
    let [sixth, twelfth, twenty_fourth] = G4;
    [
        a * 0.25,
        (a + b + c) * -sixth,
        (a - b + c) * -sixth,
        a * twenty_fourth + b * twelfth + c * sixth,
        a * twenty_fourth - b * twelfth + c * sixth,
        c,
    ]
}

/// F(4x4, 3x3)'s factors of `G` other than ¼ and 1: ⅙, 1/12, 1/24.
const G4: [f32; 3] = [1.0 / 6.0, 1.0 / 12.0, 1.0 / 24.0];

/// F(2x2, 3x3)'s `Bᵀ d` of a window's row or column `d`:
/// `Bᵀ = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]`.
fn bt2([d0, d1, d2, d3]: [f32; 4]) -> [f32; 4] {
    [d0 - d2, d1 + d2, d2 - d1, d1 - d3]
}

/// F(4x4, 3x3)'s `Bᵀ d`: `Bᵀ = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0],
/// [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]`,
/// in the vector code's terms (which fuse the multiplies into the additions).
pub(super) fn bt4([d0, d1, d2, d3, d4, d5]: [f32; 6]) -> [f32; 6] {
    let (b, a) = (d3 - d1, d4 - d2);
    [
        4.0 * d0 + (-5.0 * d2 + d4),
        -4.0 * (d1 + d2) + (d3 + d4),
        4.0 * (d1 - d2) + (d4 - d3),
        2.0 * b + a,
        -2.0 * b + a,
        4.0 * d1 + (-5.0 * d3 + d5),
    ]
}

/// F(2x2, 3x3)'s `Aᵀ m` of a column or row `m` of M: `Aᵀ = [[1, 1, 1, 0], [0, 1, -1, -1]]`.
fn at2([m0, m1, m2, m3]: [f32; 4]) -> [f32; 2] {
    [m0 + m1 + m2, m1 - m2 - m3]
}

/// F(4x4, 3x3)'s `Aᵀ m`: `Aᵀ = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0],
/// [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]`, in the vector code's terms.
pub(super) fn at4([m0, m1, m2, m3, m4, m5]: [f32; 6]) -> [f32; 4] {
    let (s12, u12, s34, u34) = (m1 + m2, m1 - m2, m3 + m4, m3 - m4);
    [
        m0 + s12 + s34,
        2.0 * u34 + u12,
        4.0 * s34 + s12,
        8.0 * u34 + u12 + m5,
    ]
}

/// The convolution of [`Winograd::run`] by `tile`'s algorithm from `U` (`[ξs, m, c]`)
/// in portable code, for a CPU without the vector kernels: `out` (`[m, oh, ow]`) from
/// `x` (`[c, h, w]`) by the same transforms (their multiplies not fused into the
/// additions: such a CPU may have no FMA), the products summed in input-channel order.
/// The results agree with the vector kernels' to rounding.
#[allow(clippy::too_many_arguments)]
pub(super) fn portable(
    win: &Window,
    c: usize,
    m: usize,
    tile: Tile,
    x: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    epilogue: Option<Epilogue>,
    out: &mut [f32],
) {
    let shape = Shape { win, c, m };
    match tile {
        Tile::F2 => portable_with::<4, 2>(shape, x, u, bias, out, bt2, at2),
        Tile::F4 => portable_with::<6, 4>(shape, x, u, bias, out, bt4, at4),
    }
    if let Some(e) = epilogue {
        let [_, oh, ow] = win.output;
        e.apply_f32(&mut out[..m * oh * ow]);
    }
}

/// A convolution's window and channels, as [`portable_with`] takes them.
#[derive(Clone, Copy)]
struct Shape<'a> {
    win: &'a Window,
    c: usize,
    m: usize,
}

/// [`portable`] for windows of side `A` and output tiles of side `T`, whose `Bᵀ` and
/// `Aᵀ` are `bt` and `at`; before the activation.
fn portable_with<const A: usize, const T: usize>(
    Shape { win, c, m }: Shape,
    x: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    bt: fn([f32; A]) -> [f32; A],
    at: fn([f32; A]) -> [f32; T],
) {
    let [_, h, w] = win.input;
    let [_, oh, ow] = win.output;
    let (pt, pl) = (win.pad_begin[1], win.pad_begin[2]);
    assert!(x.len() >= c * h * w && u.len() >= A * A * m * c && out.len() >= m * oh * ow);
    let pixel = |i: usize, r: isize, col: isize| -> f32 {
        match (usize::try_from(r), usize::try_from(col)) {
            (Ok(r), Ok(col)) if r < h && col < w => x[(i * h + r) * w + col],
            _ => 0.0,
        }
    };
    // One tile's V for every input channel (`v[ξ c + i]`), then its M per output channel.
    super::scratch::with_scratch(A * A * c, |v: &mut [f32]| {
        for tr in 0..oh.div_ceil(T) {
            for tc in 0..ow.div_ceil(T) {
                let (r0, c0) = ((T * tr) as isize - pt, (T * tc) as isize - pl);
                for i in 0..c {
                    let d: [[f32; A]; A] = std::array::from_fn(|r| {
                        std::array::from_fn(|j| pixel(i, r0 + r as isize, c0 + j as isize))
                    });
                    // d B, then Bᵀ (d B), as the vector code's `input_tiles`.
                    let rows = d.map(bt);
                    for j in 0..A {
                        let col = bt(std::array::from_fn(|r| rows[r][j]));
                        for (a, val) in col.into_iter().enumerate() {
                            v[(A * a + j) * c + i] = val;
                        }
                    }
                }
                for o in 0..m {
                    let mx: [[f32; A]; A] = std::array::from_fn(|a| {
                        std::array::from_fn(|j| {
                            let xi = A * a + j;
                            let (uo, vx) = (&u[(xi * m + o) * c..][..c], &v[xi * c..][..c]);
                            uo.iter().zip(vx).fold(0.0, |s, (a, b)| s + a * b)
                        })
                    });
                    // Aᵀ M (`s[j]` its column j), then (Aᵀ M) A row by row, as
                    // `output_tiles`.
                    let s: [[f32; T]; A] = std::array::from_fn(|j| at(mx.map(|row| row[j])));
                    let b = bias.map_or(0.0, |b| b[o]);
                    for r in 0..T {
                        let y = T * tr + r;
                        if y >= oh {
                            break;
                        }
                        let row = at(s.map(|col| col[r]));
                        for (k, val) in row.into_iter().enumerate() {
                            if T * tc + k < ow {
                                out[(o * oh + y) * ow + T * tc + k] = val + b;
                            }
                        }
                    }
                }
            }
        }
    });
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
/// Output tiles of 2x2 below which the direct kernels are faster: the per-call weight transform
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
    use crate::ops::simd::{Avx2, Avx512, Simd, compiled_for, store_rows, transpose};

    compiled_for!(input_tiles_avx512 = input_tiles_with::<Avx512, F2, 4, 2>(
        k: &Winograd, padded: &Padded, first: usize, n: usize, v: &SharedOut
    ));
    compiled_for!(input_tiles_avx2 = input_tiles_with::<Avx2, F2, 4, 2>(
        k: &Winograd, padded: &Padded, first: usize, n: usize, v: &SharedOut
    ));
    compiled_for!(output_tiles_avx512 = output_tiles_with::<Avx512, F2, 4, 2>(
        k: &Winograd, mx: &SharedOut, first: usize, n: usize, outs: Range<usize>,
        bias: Option<&[f32]>, epilogue: Option<Epilogue>, out: &SharedOut
    ));
    compiled_for!(output_tiles_avx2 = output_tiles_with::<Avx2, F2, 4, 2>(
        k: &Winograd, mx: &SharedOut, first: usize, n: usize, outs: Range<usize>,
        bias: Option<&[f32]>, epilogue: Option<Epilogue>, out: &SharedOut
    ));
    compiled_for!(weights_avx512 = weights::<Avx512>(
        k: &Winograd, w: &[f32], u: &SharedOut, outs: Range<usize>
    ));
    compiled_for!(weights_avx2 = weights::<Avx2>(
        k: &Winograd, w: &[f32], u: &SharedOut, outs: Range<usize>
    ));
    compiled_for!(input_tiles4_avx512 = input_tiles_with::<Avx512, F4, 6, 4>(
        k: &Winograd, padded: &Padded, first: usize, n: usize, v: &SharedOut
    ));
    compiled_for!(input_tiles4_avx2 = input_tiles_with::<Avx2, F4, 6, 4>(
        k: &Winograd, padded: &Padded, first: usize, n: usize, v: &SharedOut
    ));
    compiled_for!(output_tiles4_avx512 = output_tiles_with::<Avx512, F4, 6, 4>(
        k: &Winograd, mx: &SharedOut, first: usize, n: usize, outs: Range<usize>,
        bias: Option<&[f32]>, epilogue: Option<Epilogue>, out: &SharedOut
    ));
    compiled_for!(output_tiles4_avx2 = output_tiles_with::<Avx2, F4, 6, 4>(
        k: &Winograd, mx: &SharedOut, first: usize, n: usize, outs: Range<usize>,
        bias: Option<&[f32]>, epilogue: Option<Epilogue>, out: &SharedOut
    ));
    compiled_for!(weights4_avx512 = weights4::<Avx512>(
        k: &Winograd, w: &[f32], u: &SharedOut, outs: Range<usize>
    ));
    compiled_for!(weights4_avx2 = weights4::<Avx2>(
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
        // SAFETY: the caller's terms.
        unsafe {
            let half = S::splat(0.5);
            // `G r` for a row or column `r` of three, as the scalar `g2`:
            // `[a, (a + b + c) ½, (a - b + c) ½, c]`.
            let gr = |a: S::V, b: S::V, c: S::V| {
                [
                    a,
                    S::mul(S::add(S::add(a, b), c), half),
                    S::mul(S::add(S::sub(a, b), c), half),
                    c,
                ]
            };
            weights_with::<S, 4>(k, w, u, outs, gr)
        }
    }

    /// [`Winograd::transform_weights`] of F(4x4, 3x3) as [`weights`] does F(2x2, 3x3)'s.
    ///
    /// # Safety
    /// As [`weights`].
    #[inline(always)]
    unsafe fn weights4<S: Simd>(k: &Winograd, w: &[f32], u: &SharedOut, outs: Range<usize>) {
        // SAFETY: the caller's terms.
        unsafe {
            let [sixth, twelfth, twenty_fourth] = super::G4.map(|g| S::splat(g));
            let (quarter, minus_sixth) = (S::splat(0.25), S::splat(-super::G4[0]));
            // `G r` as the scalar `g4`, operation for operation.
            let gr = |a: S::V, b: S::V, c: S::V| {
                let (a24, b12, c6) = (
                    S::mul(a, twenty_fourth),
                    S::mul(b, twelfth),
                    S::mul(c, sixth),
                );
                [
                    S::mul(a, quarter),
                    S::mul(S::add(S::add(a, b), c), minus_sixth),
                    S::mul(S::add(S::sub(a, b), c), minus_sixth),
                    S::add(S::add(a24, b12), c6),
                    S::add(S::sub(a24, b12), c6),
                    c,
                ]
            };
            weights_with::<S, 6>(k, w, u, outs, gr)
        }
    }

    /// The weight transform of windows of side `A` whose `G r` is `gr`.
    ///
    /// # Safety
    /// As [`weights`]; `A * A` is the plan's positions.
    #[inline(always)]
    unsafe fn weights_with<S: Simd, const A: usize>(
        k: &Winograd,
        w: &[f32],
        u: &SharedOut,
        outs: Range<usize>,
        gr: impl Fn(S::V, S::V, S::V) -> [S::V; A],
    ) {
        let (m, c, l) = (k.m, k.c, S::LANES);
        assert_eq!(A * A, k.tile.positions());
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
                    let cols: [[S::V; A]; 3] =
                        std::array::from_fn(|j| gr(g[j], g[3 + j], g[6 + j]));
                    let rows: [[S::V; A]; A] =
                        std::array::from_fn(|r| gr(cols[0][r], cols[1][r], cols[2][r]));
                    for (r, row) in rows.iter().enumerate() {
                        for (j, &v) in row.iter().enumerate() {
                            let p = u.0.add(((A * r + j) * m + o) * c + i0);
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

    /// A Winograd algorithm's transforms on vectors of `LANES` tiles: windows of side
    /// `A`, output tiles of side `T`. The scalar forms are `bt2`/`bt4` and `at2`/`at4`.
    trait Points<const A: usize, const T: usize> {
        /// Row `r` of the windows of `LANES` neighbouring tiles, from the first window's
        /// start `p`: column `j` of every window in vector `j`.
        ///
        /// # Safety
        /// This CPU has `S`'s set; the floats from `p` the algorithm reads (F(2x2):
        /// `2 LANES`; F(4x4): `4 LANES + 2`) are readable.
        unsafe fn window_row<S: Simd>(p: *const f32) -> [S::V; A];
        /// `Bᵀ d` of a row or column `d` of the windows.
        ///
        /// # Safety
        /// This CPU has `S`'s set.
        unsafe fn bt<S: Simd>(d: [S::V; A]) -> [S::V; A];
        /// `Aᵀ m` of a column or row `m` of M.
        ///
        /// # Safety
        /// This CPU has `S`'s set.
        unsafe fn at<S: Simd>(m: [S::V; A]) -> [S::V; T];
    }

    /// F(2x2, 3x3).
    struct F2;

    impl Points<4, 2> for F2 {
        /// Windows two columns apart: the even and odd columns from the window's start
        /// (its columns 0 and 1) and from two further (2 and 3).
        #[inline(always)]
        unsafe fn window_row<S: Simd>(p: *const f32) -> [S::V; 4] {
            // SAFETY: the caller's set and floats (`2 LANES` from `p`, and from `p + 2`
            // the same less two, and two more: tiles' windows end two columns after
            // the last one's start, inside the plane's padding).
            unsafe {
                let (d0, d1) = S::load_even_odd(p);
                let (d2, d3) = S::load_even_odd(p.add(2));
                [d0, d1, d2, d3]
            }
        }
        /// The scalar `bt2`.
        #[inline(always)]
        unsafe fn bt<S: Simd>([d0, d1, d2, d3]: [S::V; 4]) -> [S::V; 4] {
            // SAFETY: the caller's set.
            unsafe {
                [
                    S::sub(d0, d2),
                    S::add(d1, d2),
                    S::sub(d2, d1),
                    S::sub(d1, d3),
                ]
            }
        }
        /// The scalar `at2`.
        #[inline(always)]
        unsafe fn at<S: Simd>([m0, m1, m2, m3]: [S::V; 4]) -> [S::V; 2] {
            // SAFETY: the caller's set.
            unsafe { [S::add(S::add(m0, m1), m2), S::sub(S::sub(m1, m2), m3)] }
        }
    }

    /// F(4x4, 3x3).
    struct F4;

    impl Points<6, 4> for F4 {
        /// Windows four columns apart: column `j < 4` of the tiles' windows is every
        /// fourth float from the first window's column j, the `4 LANES` floats from its
        /// start split by parity twice ([`Simd::load_even_odd`], then
        /// [`Simd::even_odd`]); columns 4 and 5 are columns 0 and 1 a tile further on,
        /// those vectors moved down a lane with the next group's first column shifted in
        /// ([`Simd::shift_in`]).
        #[inline(always)]
        unsafe fn window_row<S: Simd>(p: *const f32) -> [S::V; 6] {
            let l = S::LANES;
            // SAFETY: the caller's set and floats, `4 LANES + 2` from `p`.
            unsafe {
                let (e0, o0) = S::load_even_odd(p);
                let (e1, o1) = S::load_even_odd(p.add(2 * l));
                let (d0, d2) = S::even_odd(e0, e1);
                let (d1, d3) = S::even_odd(o0, o1);
                let d4 = S::shift_in(d0, p.add(4 * l));
                let d5 = S::shift_in(d1, p.add(4 * l + 1));
                [d0, d1, d2, d3, d4, d5]
            }
        }
        /// The scalar `bt4`, its multiplies fused.
        #[inline(always)]
        unsafe fn bt<S: Simd>([d0, d1, d2, d3, d4, d5]: [S::V; 6]) -> [S::V; 6] {
            // SAFETY: the caller's set.
            unsafe {
                let (four, minus_five, two) = (S::splat(4.0), S::splat(-5.0), S::splat(2.0));
                let (minus_four, minus_two) = (S::splat(-4.0), S::splat(-2.0));
                let (b, a) = (S::sub(d3, d1), S::sub(d4, d2));
                [
                    S::fma(four, d0, S::fma(minus_five, d2, d4)),
                    S::fma(minus_four, S::add(d1, d2), S::add(d3, d4)),
                    S::fma(four, S::sub(d1, d2), S::sub(d4, d3)),
                    S::fma(two, b, a),
                    S::fma(minus_two, b, a),
                    S::fma(four, d1, S::fma(minus_five, d3, d5)),
                ]
            }
        }
        /// The scalar `at4`, its multiplies fused.
        #[inline(always)]
        unsafe fn at<S: Simd>([m0, m1, m2, m3, m4, m5]: [S::V; 6]) -> [S::V; 4] {
            // SAFETY: the caller's set.
            unsafe {
                let (two, four, eight) = (S::splat(2.0), S::splat(4.0), S::splat(8.0));
                let (s12, u12) = (S::add(m1, m2), S::sub(m1, m2));
                let (s34, u34) = (S::add(m3, m4), S::sub(m3, m4));
                [
                    S::add(S::add(m0, s12), s34),
                    S::fma(two, u34, u12),
                    S::fma(four, s34, s12),
                    S::add(S::fma(eight, u34, u12), m5),
                ]
            }
        }
    }

    /// [`Winograd::input_tiles`] of `P`'s algorithm in `S`'s vectors, `S::LANES` tiles at
    /// a time: each row of their windows loaded ([`Points::window_row`]) and
    /// transformed, then each column of that, stored at its ξ.
    ///
    /// Loops and functions, not closures: a closure is not compiled for the set, and
    /// the intrinsics inside one were calls.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `P` is the plan's algorithm; as
    /// [`Winograd::input_tiles`] for `v`.
    #[inline(always)]
    unsafe fn input_tiles_with<S: Simd, P: Points<A, T>, const A: usize, const T: usize>(
        k: &Winograd,
        padded: &Padded,
        first: usize,
        n: usize,
        v: &SharedOut,
    ) {
        let (_, pw) = k.plane();
        let (c, l) = (k.c, S::LANES);
        assert!(k.tile.side() == A && k.tile.out() == T);
        assert!([first, n, k.tw].iter().all(|v| v.is_multiple_of(l)));
        let rows_held = k.window(first, n);
        assert!(rows_held.start >= padded.first_row);
        assert!((rows_held.end - padded.first_row) * pw <= padded.stride);
        for i in 0..c {
            // SAFETY: plane i < c of the caller's `c`.
            let plane = unsafe { padded.planes.0.add(i * padded.stride) }.cast_const();
            for t in (0..n).step_by(l) {
                let (tr, tc) = ((first + t) / k.tw, (first + t) % k.tw);
                let top = T * tr - padded.first_row;
                // SAFETY: the ISA is the caller's; padded rows T tr .. T tr + A - 1 lie
                // in the tiles' window, which the plane holds from `first_row`
                // (asserted), and the row loads' columns from T tc, inside `pw` (`plane`:
                // tc + LANES <= tw); the stores are at `(ξ c + i) n + t .. + LANES` with
                // t + LANES <= n and i < c, inside `v`, in row i of V_ξ, this call's
                // (the contract).
                unsafe {
                    let mut rows = [[S::zero(); A]; A];
                    for (r, row) in rows.iter_mut().enumerate() {
                        *row = P::bt::<S>(P::window_row::<S>(plane.add((top + r) * pw + T * tc)));
                    }
                    for j in 0..A {
                        for (a, &val) in P::bt::<S>(column(&rows, j)).iter().enumerate() {
                            S::store(v.0.add(((A * a + j) * c + i) * n + t), val);
                        }
                    }
                }
            }
        }
    }

    /// [`Winograd::output_tiles`] of `P`'s algorithm in `S`'s vectors: `Aᵀ M A` for
    /// `S::LANES` tiles, plus the bias, the activation, and each output row's columns
    /// of the tiles interleaved into place (column `k` of tile `q` at `T q + k`).
    ///
    /// # Safety
    /// This CPU has `S`'s set; `P` is the plan's algorithm; as [`Winograd::output_tiles`]
    /// for `mx`, `outs` and `out`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn output_tiles_with<S: Simd, P: Points<A, T>, const A: usize, const T: usize>(
        k: &Winograd,
        mx: &SharedOut,
        first: usize,
        n: usize,
        outs: Range<usize>,
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        out: &SharedOut,
    ) {
        let (m, oh, ow, l) = (k.m, k.oh, k.ow, S::LANES);
        assert!(outs.end <= m && k.tile.side() == A && k.tile.out() == T);
        for o in outs {
            // SAFETY: the ISA is the caller's.
            let b = unsafe { S::splat(bias.map_or(0.0, |b| b[o])) };
            for t in (0..n).step_by(l) {
                let (tr, tc) = ((first + t) / k.tw, (first + t) % k.tw);
                if T * tc >= ow {
                    continue;
                }
                // SAFETY: the ISA is the caller's; the loads are at `(ξ m + o) n + t ..
                // + LANES`, inside `mx` (o < m, t + LANES <= n); the stores write rows
                // T tr .. below oh, columns T tc .. below ow, of plane o of the caller's
                // `[m, oh, ow]` output.
                unsafe {
                    // Aᵀ M: `s[j]` its column j.
                    let mut s = [[S::zero(); T]; A];
                    for (j, s) in s.iter_mut().enumerate() {
                        let mut col = [S::zero(); A];
                        for (a, v) in col.iter_mut().enumerate() {
                            *v = S::load(mx.0.add(((A * a + j) * m + o) * n + t));
                        }
                        *s = P::at::<S>(col);
                    }
                    let width = (ow - T * tc).min(T * l);
                    for r in 0..T {
                        if T * tr + r >= oh {
                            break;
                        }
                        // (Aᵀ M) A: row r's output columns of the tiles.
                        let mut y = P::at::<S>(column(&s, r));
                        for v in &mut y {
                            *v = S::add(*v, b);
                            if let Some(e) = epilogue {
                                *v = e.vector::<S>(*v);
                            }
                        }
                        let p = out.0.add((o * oh + T * tr + r) * ow + T * tc);
                        store_rows::<S, 1, T>(&[interleaved::<S, T>(y)], p, 0, width);
                    }
                }
            }
        }
    }

    /// The lanes of `y` (`T` = 2 or 4 vectors) interleaved: lane q of `y[k]` at `T q +
    /// k` of the `T` vectors returned, in order.
    ///
    /// # Safety
    /// This CPU has `S`'s set.
    #[inline(always)]
    unsafe fn interleaved<S: Simd, const T: usize>(y: [S::V; T]) -> [S::V; T] {
        // SAFETY: the caller's set.
        unsafe {
            let mut out = y;
            match T {
                2 => (out[0], out[1]) = S::interleave(y[0], y[1]),
                4 => {
                    // Two rounds: lanes of 0 and 2 paired, of 1 and 3, then the pairs.
                    let (a0, a1) = S::interleave(y[0], y[2]);
                    let (b0, b1) = S::interleave(y[1], y[3]);
                    (out[0], out[1]) = S::interleave(a0, b0);
                    (out[2], out[3]) = S::interleave(a1, b1);
                }
                _ => unreachable!("tiles of side 2 or 4"),
            }
            out
        }
    }

    /// Column `j` of `rows` (a loop, not `map`'s closure: vectors passed through a
    /// function not compiled for their set go through memory).
    #[inline(always)]
    fn column<V: Copy, const A: usize, const B: usize>(rows: &[[V; B]; A], j: usize) -> [V; A] {
        let mut col = [rows[0][j]; A];
        for (v, row) in col.iter_mut().zip(rows) {
            *v = row[j];
        }
        col
    }
}
