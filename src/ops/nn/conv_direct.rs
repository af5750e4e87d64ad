//! Direct float32 convolution of 1-D and 2-D windows, any strides, on x86-64 with AVX-512
//! or AVX2 and FMA (detected at run time); everything else, and every other machine, takes
//! conv.rs's im2col + GEMM.
//!
//! Why not im2col + GEMM for these: a 3x3 kernel's im2col matrix is nine times the input
//! (7 MB for 64 channels of 56x56), written once, then read and packed again by the GEMM,
//! whose kernel (matrixmultiply's 8x8 on 16 ymm registers) also leaves half of AVX-512's
//! registers and width unused. Here nothing is expanded:
//!
//! - The input of one (image, group) is copied once into zero-bordered planes `hp` x `wp`.
//!   Output position (y, x) is the linear index `q = y * wp + x`, and every tap reads its
//!   plane at `q` plus a constant offset: for every tap, consecutive outputs read
//!   consecutive inputs, so a vector of outputs takes one unaligned load per tap, with no
//!   gather and no index arithmetic. The `wp - ow` positions past each output row's end
//!   are computed and dropped (2 of 58 for a 3x3 kernel over 56 columns).
//! - A stride `s` would break that (output x reads input `s x + tap`), so a strided
//!   input is split into its polyphase planes while it is copied: plane `(ry, rx)` holds
//!   the padded input's rows `s_h i + ry` and columns `s_w j + rx`, and tap (a, b) reads
//!   plane `(a d_h mod s_h, b d_w mod s_w)` at `(a d_h div s_h) wp + (b d_w div s_w)`.
//!   Each tap is again a unit-stride read; the planes together are the input's size, and
//!   only the planes some tap reads are made (a 1x1 kernel of stride 2 reads one).
//! - The taps' offsets are a table, computed once per call ([`MAX_TAPS`] at most; larger
//!   kernels take im2col + GEMM).
//! - A micro-kernel keeps an `MR` output channels x `NV` vectors tile of sums in registers
//!   across every input channel and tap (24 of AVX-512's 32 registers: 4 channels x 96
//!   positions), so each output is written once per channel chunk; per tap it loads `NV`
//!   input vectors and broadcasts `MR` weights straight from the [M, C, kh, kw] weights.
//! - Tiles run over positions with output channels innermost: the input window a tile
//!   reads (its channels' rows under the kernel) is then reused by every channel group
//!   while it is in cache, and the weights of a task stay in L2. Channels are chunked so
//!   those weights fit ([`WEIGHT_BYTES`]); later chunks start from what the chunk before
//!   stored.
//! - A tile's vectors are columns of output rows (see `Direct::task`): its sums start
//!   from the bias and go from registers straight into the output, a row's last vector
//!   through a masked store, and a fused activation ([`Epilogue`]) is applied to them in
//!   registers. An output row whose kernel rows partly fall in the padding above or
//!   below the input runs only the taps of the others. Narrow rows, which would leave
//!   most lanes of their vectors spare, run along the padded planes instead and are
//!   copied out through a buffer.
//!
//! Sums run in a different order than the GEMM's, so results agree to rounding, not bits.

use std::ops::Range;

use rayon::prelude::*;

use super::epilogue::Epilogue;
use super::window::{Flat, Window};

/// Widest vector (floats) of any kernel: the padded input carries this much slack after
/// its last plane, which the last tile's vectors may read past the last position.
pub(super) const MAX_LANES: usize = 16;
/// Largest tile (floats per output channel) of any kernel.
const TILE_FLOATS: usize = 6 * MAX_LANES;
/// Output channels per tile in every kernel.
const MR: usize = 4;
/// Output channels one task computes: its weights per chunk are this many rows.
const TASK_CHANNELS: usize = 64;
/// Bytes of weights one channel chunk of a task may take (fits in L2 beside the input).
const WEIGHT_BYTES: usize = 256 << 10;
/// Output elements times taps below which a block runs on the calling thread.
const PARALLEL_WORK: usize = 1 << 14;
/// Plane width from which [`Direct::pad`] zeroes only each plane's border, not the
/// whole plane before copying the input into it.
const BORDER_ONLY_WIDTH: usize = 64;
/// Most taps (kernel elements) the offset table holds: 16x16, or a 1-D kernel of 256.
pub(super) const MAX_TAPS: usize = 256;

pub(super) use crate::ops::simd::Isa;
use crate::ops::simd::per_isa;

/// Floats per vector and vectors per tile row of `isa`'s kernel.
fn shape(isa: Isa) -> (usize, usize) {
    match isa {
        Isa::Avx512 => (16, 6),
        Isa::Avx2 => (8, 3),
    }
}

/// A window over one (image, group) as the direct kernel computes it.
#[derive(Debug, Clone)]
pub(super) struct Direct {
    pub(super) isa: Isa,
    /// Input channels.
    pub(super) channels: usize,
    pub(super) g: Flat,
    /// Each polyphase plane's height and width.
    hp: usize,
    pub(super) wp: usize,
    /// The polyphase plane (`ry * sw + rx`) made in each slot below `slots`, in the
    /// order the taps first read them; the planes no tap reads are not made.
    phase: [usize; MAX_PHASES],
    /// Planes made per channel.
    slots: usize,
    /// Each tap's offset from a position's index in its channel's planes.
    pub(super) offs: [usize; MAX_TAPS],
}

/// Most polyphase planes a window may have (strides up to 4 x 4, or 16 along one dim).
const MAX_PHASES: usize = 16;

impl Direct {
    /// The direct plan for `win` over `channels` input channels on `isa`, if it applies:
    /// at most two spatial dims, strides of at most [`MAX_PHASES`] planes, at most
    /// [`MAX_TAPS`] taps, a non-empty output. `isa` must be a set this CPU has, from
    /// [`Isa::detect`] or [`Isa::available`]: [`Direct::conv`] runs that set's kernels.
    pub(super) fn plan(win: &Window, channels: usize, isa: Isa) -> Option<Direct> {
        let g = win.flat(MAX_TAPS)?;
        if g.sh.checked_mul(g.sw)? > MAX_PHASES {
            return None;
        }
        // The kernels' reads are bounded by the planes' size (see `task`), so that size,
        // and every offset below it, must not wrap: a window too large to address (a
        // crafted dilation, say) goes to im2col + GEMM, whose indexing is checked.
        let hp = ((g.kh - 1).checked_mul(g.dh)? / g.sh).checked_add(g.oh)?;
        let wp = ((g.kw - 1).checked_mul(g.dw)? / g.sw).checked_add(g.ow)?;
        let plane = hp.checked_mul(wp)?;
        let mut slot = [usize::MAX; MAX_PHASES];
        let mut phases = [0; MAX_PHASES];
        let mut slots = 0;
        for a in 0..g.kh {
            for b in 0..g.kw {
                let phase = (a * g.dh % g.sh) * g.sw + b * g.dw % g.sw;
                if slot[phase] == usize::MAX {
                    slot[phase] = slots;
                    phases[slots] = phase;
                    slots += 1;
                }
            }
        }
        channels
            .checked_mul(slots.checked_mul(plane)?)?
            .checked_add(MAX_LANES)?;
        let mut offs = [0; MAX_TAPS];
        for (t, off) in offs[..g.taps].iter_mut().enumerate() {
            let (ta, tb) = (t / g.kw * g.dh, t % g.kw * g.dw);
            *off = slot[(ta % g.sh) * g.sw + tb % g.sw] * plane + ta / g.sh * wp + tb / g.sw;
        }
        Some(Direct {
            isa,
            channels,
            g,
            hp,
            wp,
            phase: phases,
            slots,
            offs,
        })
    }

    /// One polyphase plane's floats.
    fn plane(&self) -> usize {
        self.hp * self.wp
    }
    /// One channel's planes' floats.
    pub(super) fn channel_floats(&self) -> usize {
        self.slots * self.plane()
    }
    /// Linear positions up to the last output: (oh - 1) full padded rows and one output row.
    pub(super) fn positions(&self) -> usize {
        (self.g.oh - 1) * self.wp + self.g.ow
    }
    /// Floats of scratch [`Direct::conv`] needs: the padded planes and the slack after.
    pub(super) fn scratch_len(&self) -> usize {
        self.channels * self.channel_floats() + MAX_LANES
    }

    /// `out` (`[M, oh * ow]`) = the convolution of `x` (`[channels, h * w]`) with `w`
    /// (`[M, channels, kh, kw]`) plus `bias` (`[M]`, or zeros), then `epilogue`, using
    /// `padded` (at least [`Direct::scratch_len`] floats, contents unspecified) for the
    /// polyphase planes. `parallel` splits the output channels across rayon's threads.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn conv(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        padded: &mut [f32],
        out: &mut [f32],
        parallel: bool,
    ) {
        let (channels, olen) = (self.channels, self.g.oh * self.g.ow);
        let m = out.len() / olen;
        let k = channels * self.g.taps;
        assert!(
            x.len() >= channels * self.g.h * self.g.w
                && w.len() >= m * k
                && out.len() == m * olen
                && bias.is_none_or(|b| b.len() >= m),
            "direct conv: operands do not fit the window"
        );
        let padded = &mut padded[..self.scratch_len()];
        self.pad(x, padded, parallel);
        // One input channel feeding fewer output channels than a tile holds: a depthwise
        // block. With a tile's worth or more (a grayscale image's first layer), the tile
        // kernel loads each input vector once for `MR` channels, which measured faster
        // on every such layer tried (1 -> 16 channels over 32 x 128: 26.8 -> 22.4 us; 1
        // -> 16 by 5 x 5 over 28 x 28: 13.3 -> 9.0 us), with the same bits.
        if channels == 1 && m < MR {
            self.depthwise(padded, w, bias, epilogue, out, parallel);
        } else {
            self.tiles(padded, w, bias, epilogue, out, parallel);
        }
    }

    /// [`Direct::conv`] in this module's tile kernel, from the padded planes.
    pub(super) fn tiles(
        &self,
        padded: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        out: &mut [f32],
        parallel: bool,
    ) {
        let olen = self.g.oh * self.g.ow;
        let m = out.len() / olen;
        let k = self.channels * self.g.taps;
        let threads = if parallel {
            rayon::current_num_threads().max(1)
        } else {
            1
        };
        // Threads split the output channels, each then reading all of the input, or the
        // positions, each then reading all of the weights: whichever repeats fewer
        // floats. Split by channels, a 224 x 224 stem of 3 -> 8 channels read its 600 KB
        // of planes on both threads for 864 bytes of weights, and two threads took
        // longer than one.
        let (count, unit) = self.span();
        let chunk = self.chunk(m);
        if threads > 1 && m * k < self.channels * self.channel_floats() && count > unit {
            let units = count.div_ceil(unit);
            let per = units.div_ceil(threads.min(units)) * unit;
            let y = SharedOut(out.as_mut_ptr());
            (0..count.div_ceil(per)).into_par_iter().for_each(|t| {
                let span = t * per..((t + 1) * per).min(count);
                // SAFETY: `y` is the `[m, oh * ow]` output, borrowed uniquely for the
                // loop, and the tasks' spans are disjoint, so are the positions they
                // write.
                unsafe { self.task(padded, w, bias, epilogue, y, m, chunk, span) };
            });
            return;
        }
        // Enough tasks for every thread, each a multiple of the tile's channels.
        let per = m
            .div_ceil(threads)
            .next_multiple_of(MR)
            .clamp(MR, TASK_CHANNELS);
        let task = |t: usize, y: &mut [f32]| {
            let (m0, mt) = (t * per, y.len() / olen);
            let (b, y) = (bias.map(|b| &b[m0..]), SharedOut(y.as_mut_ptr()));
            // SAFETY: `y` is this task's `mt` channels of the output, its own (a chunk
            // of a unique borrow).
            unsafe { self.task(padded, &w[m0 * k..], b, epilogue, y, mt, chunk, 0..count) };
        };
        if parallel && per < m {
            out.par_chunks_mut(per * olen)
                .enumerate()
                .for_each(|(t, y)| task(t, y));
        } else {
            for (t, y) in out.chunks_mut(per * olen).enumerate() {
                task(t, y);
            }
        }
    }

    /// Copies `x`'s channels into `dst` as their polyphase planes (see the module doc),
    /// zero where a plane's element falls in the padding or past the input, and zeroes
    /// the slack after.
    pub(super) fn pad(&self, x: &[f32], dst: &mut [f32], parallel: bool) {
        let (h, w) = (self.g.h, self.g.w);
        let (planes, slack) = dst.split_at_mut(self.channels * self.channel_floats());
        slack.fill(0.0);
        // Each plane's copy is compiled for this CPU's vectors (`pad_plane`): a stride's
        // copies (`every`) are then de-interleaves of 16 floats per AVX-512 permute,
        // where the baseline build shuffled 4 at a time (the copy of MobileNet's 224 x
        // 224 stem input into its four planes took as long as the convolution; now three
        // quarters of it). Threads take whole planes, not channels: the stem's three
        // channels went two to one thread and one to the other.
        let one = |i: usize, p: &mut [f32]| {
            let (c, s) = (i / self.slots, i % self.slots);
            pad_plane(self, &x[c * h * w..][..h * w], self.phase[s], p);
        };
        if parallel && planes.len() >= PARALLEL_WORK {
            planes
                .par_chunks_mut(self.plane())
                .enumerate()
                .for_each(|(i, p)| one(i, p));
        } else {
            for (i, p) in planes.chunks_mut(self.plane()).enumerate() {
                one(i, p);
            }
        }
    }

    /// [`Direct::pad`] of one plane: `src` its channel's input plane, `phase` the
    /// polyphase plane `ry * sw + rx`, `p` its floats.
    #[inline(always)]
    fn pad_plane_any(&self, src: &[f32], phase: usize, p: &mut [f32]) {
        let (h, w, wp, plane) = (self.g.h, self.g.w, self.wp, self.plane());
        let (sh, sw) = (self.g.sh, self.g.sw);
        let (ry, rx) = (phase / sw, phase % sw);
        let p = &mut p[..plane];
        // Plane columns j read padded column `j sw + rx`, input column
        // `j sw + rx - pl`: inside the input for j in lo..hi.
        let lo = self.g.pl.saturating_sub(rx).div_ceil(sw).min(wp);
        let hi = (w + self.g.pl)
            .saturating_sub(rx)
            .div_ceil(sw)
            .clamp(lo, wp);
        // The padding: on narrow planes zeroed by one fill of the plane (in L1 or
        // L2 on its way), not by up to three calls per row (on a 14x14 image of a
        // depthwise layer the calls cost more than the copy); on wide ones only
        // the border is zeroed, each row's few columns beside its copy (a fill
        // of a 12 MB plane before copying into it writes it twice).
        let hp = plane / wp;
        let rows_inside = ry >= self.g.pt && (hp - 1) * sh + ry - self.g.pt < h;
        let narrow = wp < BORDER_ONLY_WIDTH;
        if narrow && (lo > 0 || hi < wp || !rows_inside) {
            p.fill(0.0);
        }
        for (i, row) in p.chunks_mut(wp).enumerate() {
            let r = (i * sh + ry).wrapping_sub(self.g.pt);
            if r >= h {
                if !narrow {
                    row.fill(0.0);
                }
                continue;
            }
            if !narrow {
                row[..lo].fill(0.0);
                row[hi..].fill(0.0);
            }
            // No column of this phase reads inside the input (padding wider than the
            // plane, a column stride past the image): the row is all padding, and
            // its first input column would lie past the line (or before it).
            if lo == hi {
                continue;
            }
            let line = &src[r * w..][..w];
            let first = lo * sw + rx - self.g.pl;
            let row = &mut row[lo..hi];
            match sw {
                1 => row.copy_from_slice(&line[first..first + row.len()]),
                2 => every::<2>(row, &line[first..]),
                3 => every::<3>(row, &line[first..]),
                4 => every::<4>(row, &line[first..]),
                _ => {
                    for (d, s) in row.iter_mut().zip(line[first..].iter().step_by(sw)) {
                        *d = *s;
                    }
                }
            }
        }
    }

    /// One task: output channels `y.len() / olen` with weights `w` (rows `k` apart).
    ///
    /// A tile's vectors are positions in one of two ways ([`Direct::by_rows`]):
    /// - along output rows: each vector is `lanes` columns of one output row (a row's
    ///   last vector maybe fewer), its input `r * wp + col` into the planes. The sums
    ///   start from the bias, or, after the first channel chunk, from what the chunk
    ///   before stored (exactly: a float32 store and load change nothing), take the
    ///   activation in registers after the last chunk, and go straight into the output.
    ///   Nothing is computed past a row's end but the last vector's spare lanes.
    /// - along the padded planes (narrow rows, where a row's vectors would be mostly
    ///   spare lanes): vectors of consecutive positions `q`, which run on through the
    ///   `wp - ow` positions past each row's end; the tile goes through a buffer from
    ///   which [`Direct::store`] drops those.
    ///
    /// `span` is the part of the output this task computes: vectors in row order
    /// (along rows) or positions (along the planes), from [`Direct::span`]; `chunk` the
    /// input channels of a reduction's chunk, from [`Direct::chunk`].
    ///
    /// # Safety
    /// `y` points at `m` output planes of `oh * ow` floats, whose positions in `span`
    /// no other thread reads or writes while this runs; `w` holds their `m` rows of
    /// weights and `bias` (if any) their `m` biases.
    #[allow(clippy::too_many_arguments)]
    unsafe fn task(
        &self,
        padded: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        y: SharedOut,
        m: usize,
        chunk: usize,
        span: Range<usize>,
    ) {
        let (lanes, nv_max) = shape(self.isa);
        let (channels, ow, olen) = (self.channels, self.g.ow, self.g.oh * self.g.ow);
        let taps = self.g.taps;
        let k = channels * taps;
        assert!(
            w.len() >= m * k && bias.is_none_or(|b| b.len() >= m) && span.end <= self.span().0,
            "direct conv: a task's operands do not fit the window"
        );
        let by_rows = self.by_rows();
        // Vectors per output row.
        let per_row = ow.div_ceil(lanes);
        let mut tile = [0.0f32; MR * TILE_FLOATS];
        for c0 in (0..channels).step_by(chunk) {
            let cn = chunk.min(channels - c0);
            let (first, last) = (c0 == 0, c0 + cn == channels);
            let x = padded[c0 * self.channel_floats()..].as_ptr();
            // Along rows: the kernel rows of the current band of output rows, and the
            // row past its end (each band found once, walking its rows).
            let mut band = (0..0, 0);
            let mut at = span.start;
            while at < span.end {
                let mut v = Vectors::default();
                // The kernel rows the tile's output rows read inside the input: all of
                // them along the planes.
                let mut rows = 0..self.g.kh;
                let (nv, next) = if by_rows {
                    // The next vectors in row order, across rows' ends, over rows that
                    // read the same kernel rows; the last two tiles of such a band
                    // evened out (7 vectors as 4 + 3, not 6 + 1: a one-vector tile is
                    // bound by its loads).
                    let r0 = at / per_row;
                    if r0 >= band.1 {
                        band = (self.kernel_rows(r0), r0 + 1);
                        while band.1 < self.g.oh && self.kernel_rows(band.1) == band.0 {
                            band.1 += 1;
                        }
                    }
                    rows = band.0.clone();
                    let left = (band.1 * per_row).min(span.end) - at;
                    let nv = match left {
                        _ if left <= nv_max => left,
                        _ if left < 2 * nv_max => left.div_ceil(2),
                        _ => nv_max,
                    };
                    for j in 0..nv {
                        let (r, c) = ((at + j) / per_row, (at + j) % per_row);
                        v.x[j] = r * self.wp + c * lanes;
                        v.out[j] = r * ow + c * lanes;
                        v.n[j] = (ow - c * lanes).min(lanes);
                    }
                    (nv, at + nv)
                } else {
                    let nv = (span.end - at).div_ceil(lanes).min(nv_max);
                    for j in 0..nv {
                        v.x[j] = at + j * lanes;
                        v.out[j] = j * lanes;
                        v.n[j] = lanes;
                    }
                    (nv, (at + nv * lanes).min(span.end))
                };
                for m0 in (0..m).step_by(MR) {
                    let mr = MR.min(m - m0);
                    let (out, ld) = if by_rows {
                        // SAFETY: plane m0 < m of the caller's `m`.
                        (unsafe { y.0.add(m0 * olen) }, olen)
                    } else {
                        (tile.as_mut_ptr(), TILE_FLOATS)
                    };
                    // Only the taps of those rows: the others multiply the padding's
                    // zeros (a third of the taps of a 3x3 kernel over rows of a
                    // two-row image).
                    let (t0, t1) = (rows.start * self.g.kw, rows.end * self.g.kw);
                    let args = TileArgs {
                        x,
                        channel: self.channel_floats(),
                        offs: &self.offs[t0..t1],
                        channels: cn,
                        w: w[m0 * k + c0 * taps + t0..].as_ptr(),
                        w_stride: k,
                        w_skip: taps - (t1 - t0),
                        v,
                        out,
                        ld,
                        bias: match bias {
                            Some(b) if first => b[m0..].as_ptr(),
                            _ => std::ptr::null(),
                        },
                        load: by_rows && !first,
                        epilogue: if by_rows && last { epilogue } else { None },
                    };
                    // SAFETY: `self.isa` came from `Isa::detect` or `Isa::available` (see
                    // `plan`), so this CPU has it; `mr <= MR` and `nv <= nv_max`, the
                    // ISA's tile width. Input: every vector reads `lanes` positions from
                    // `v.x[j]` in channels c0.., and every such start is below `nq =
                    // (oh - 1) * wp + ow` (along rows `r * wp + c * lanes` with `r < oh`
                    // and `c * lanes < ow`; along the planes `at + j * lanes < count =
                    // nq` for every `j < nv`). A tap's offset is its plane's start (below
                    // `(slots - 1) * plane`) plus `qa * wp + qb` with `qa <= hp - oh`
                    // and `qb <= wp - ow` (how `plan` sized the planes), so the furthest
                    // read of channel c0 + cn - 1 ends below `(c0 + cn) * slots * plane +
                    // lanes - 1 <= channels * slots * plane + MAX_LANES`: inside
                    // `padded`, cut to `scratch_len` by `conv` (`plan` checked that this
                    // size does not wrap, so neither does any offset below it). Weights:
                    // rows `m0..m0 + mr` (below m, the rows of `y`), columns `c * taps +
                    // j` for c in `c0..c0 + cn` and j in `t0..t1 <= taps` (the weights
                    // from `t0`, `taps - (t1 - t0)` skipped per channel), below `k`, of
                    // `w`, whose `m * k` floats the assert above checked. Bias: `mr`
                    // floats from `m0` of the `m` the same assert checked. Output along
                    // rows: planes `m0..m0 + mr` of `y`'s `m`, each vector's `v.n[j]`
                    // floats from `r * ow + c * lanes`, which end at most at the row's
                    // end `(r + 1) * ow <= olen`, at the span's vectors, which are this
                    // task's alone (the contract; the output aliases no input), and with
                    // `load` (not the first chunk) the chunk before wrote those floats.
                    // Along the planes: the local `tile`, MR rows of TILE_FLOATS >= nv *
                    // lanes floats.
                    unsafe { run_tile(self.isa, mr, nv, &args) };
                    if !by_rows {
                        let qn = next - at;
                        for i in 0..mr {
                            let src = &tile[i * TILE_FLOATS..][..qn];
                            let e = last.then_some(epilogue).flatten();
                            // SAFETY: plane m0 + i < m of the caller's, at positions
                            // `at..next` of its span.
                            unsafe { self.store(src, at, first, e, y.0.add((m0 + i) * olen)) };
                        }
                    }
                }
                at = next;
            }
        }
    }

    /// The kernel rows output row `r` reads inside the input (not in the padding above
    /// or below it): one range, as the input row `r * sh + a * dh - pt` only grows with
    /// the kernel row `a`; empty when every row is padding.
    fn kernel_rows(&self, r: usize) -> std::ops::Range<usize> {
        let g = &self.g;
        let top = (r * g.sh) as isize - g.pt as isize;
        super::pool_f32::inside(top, g.dh, g.kh, g.h)
    }

    /// Whether tiles run along output rows (see [`Direct::task`]): when that computes at
    /// most an eighth more lanes than running along the padded planes, which spends a
    /// copy through the tile buffer and computes the positions past each row's end.
    fn by_rows(&self) -> bool {
        let (lanes, _) = shape(self.isa);
        let rows = self.g.oh * self.g.ow.next_multiple_of(lanes);
        let planes = self.positions().next_multiple_of(lanes);
        rows * 8 <= planes * 9
    }

    /// Input channels per chunk of the reduction of a convolution with `m` output
    /// channels: a task's weights for a chunk fit in L2 ([`WEIGHT_BYTES`]) whichever
    /// way threads split the work. Along the planes each chunk's sums are added to the
    /// output, so the chunks decide the bits, and they do not depend on the split.
    fn chunk(&self, m: usize) -> usize {
        let task = m.next_multiple_of(MR).min(TASK_CHANNELS);
        (WEIGHT_BYTES / (4 * task * self.g.taps)).clamp(1, self.channels)
    }

    /// What [`Direct::task`]'s spans count, and the step a span may be cut at: vectors
    /// in row order and a row's vectors (along rows), or positions and a vector (along
    /// the planes).
    fn span(&self) -> (usize, usize) {
        let (lanes, _) = shape(self.isa);
        let per_row = self.g.ow.div_ceil(lanes);
        match self.by_rows() {
            true => (self.g.oh * per_row, per_row),
            false => (self.positions(), lanes),
        }
    }

    /// The output channels of one input channel (a depthwise convolution's, or a
    /// single-channel convolution's of fewer than [`MR`] outputs): `out` (`[m, oh * ow]`)
    /// from the padded planes and `w` (`[m, taps]`).
    ///
    /// Why not [`Direct::task`]: with one channel its reduction is only the taps, so its
    /// costs per tile (filling the tile with the bias, copying it out and dropping the
    /// `wp - ow` positions past each row, all in memory) outweigh the tile's few FMAs; a
    /// 5x5 depthwise over 14x14 also computed 4 of every 18 positions only to drop them.
    /// Here a tile is up to [`DW_ACCS`] vectors over `R` output rows, the sums go
    /// straight from registers into the output rows (the row's last vector a masked
    /// store), and nothing past a row's end is computed. The sums run in the same order
    /// as the tile kernel's (bias, then the taps in turn), so the bits are the same.
    pub(super) fn depthwise(
        &self,
        padded: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        out: &mut [f32],
        parallel: bool,
    ) {
        let (oh, ow, wp, taps) = (self.g.oh, self.g.ow, self.wp, self.g.taps);
        let olen = oh * ow;
        let (lanes, _) = shape(self.isa);
        let channel = |j: usize, y: &mut [f32]| {
            let wj = &w[j * taps..][..taps];
            let b = bias.map_or(0.0, |b| b[j]);
            for x0 in (0..ow).step_by(DW_ACCS * lanes) {
                let n = (ow - x0).min(DW_ACCS * lanes);
                let nv = n.div_ceil(lanes);
                let mut r0 = 0;
                while r0 < oh {
                    // The most rows (1, 2, 4 or 8) whose tiles fit the accumulators.
                    let fit = (DW_ACCS / nv).min(oh - r0);
                    let rows = 1 << fit.ilog2();
                    let args = DwArgs {
                        x: padded[r0 * wp + x0..].as_ptr(),
                        wp,
                        offs: &self.offs[..taps],
                        w: wj.as_ptr(),
                        bias: b,
                        out: y[r0 * ow + x0..].as_mut_ptr(),
                        ow,
                        n,
                    };
                    // SAFETY: `self.isa` came from `Isa::detect` or `Isa::available`,
                    // so this CPU has it; `rows * nv <= DW_ACCS` with `rows` a power of
                    // two and `nv <= DW_ACCS`, a pair `run_depthwise` has. Input: row i
                    // of the tile, vector v reads positions `(r0 + i) * wp + x0 + v *
                    // lanes + off ..` plus `lanes`, and `x0 + v * lanes < x0 + n <= ow`,
                    // so every read ends below `(oh - 1) * wp + ow + lanes - 1 + off`:
                    // the same bound as `task`'s tiles (see there), inside `padded`.
                    // Weights: `taps` floats of `wj`. Output: rows `r0..r0 + rows <= oh`
                    // of `y` (`oh * ow` floats), columns `x0..x0 + n <= ow`, which the
                    // kernel writes only up to `n` (a masked last vector); `y` is a
                    // unique borrow and aliases no input.
                    unsafe { run_depthwise(self.isa, rows, nv, &args) };
                    r0 += rows;
                }
            }
            // The whole plane at once, while it is in cache: per tile row it would be
            // one call per few floats on small images.
            if let Some(e) = epilogue {
                e.apply_f32(y);
            }
        };
        let m = out.len() / olen;
        if parallel && m > 1 {
            out.par_chunks_mut(olen)
                .enumerate()
                .for_each(|(j, y)| channel(j, y));
        } else {
            for (j, y) in out.chunks_mut(olen).enumerate() {
                channel(j, y);
            }
        }
    }

    /// Writes (first chunk) or adds the tile row `src`, positions `q0..`, into the output
    /// plane at `dst`, dropping the positions past each output row's end; the last chunk
    /// then applies `epilogue` to what it stored.
    ///
    /// # Safety
    /// `dst` points at an output plane of `oh * ow` floats whose elements at positions
    /// `q0..q0 + src.len()` no other thread reads or writes while this runs.
    unsafe fn store(
        &self,
        src: &[f32],
        q0: usize,
        first: bool,
        epilogue: Option<Epilogue>,
        dst: *mut f32,
    ) {
        let (wp, ow) = (self.wp, self.g.ow);
        let end = q0 + src.len();
        let mut q = q0;
        while q < end {
            let (r, col) = (q / wp, q % wp);
            let next = ((r + 1) * wp).min(end);
            if col < ow && r < self.g.oh {
                let n = ow.min(col + next - q) - col;
                let s = &src[q - q0..][..n];
                // SAFETY: columns `col..col + n <= ow` of row r < oh of the plane, at
                // positions `q..next` inside the caller's `q0..end`.
                let d = unsafe { std::slice::from_raw_parts_mut(dst.add(r * ow + col), n) };
                if first {
                    d.copy_from_slice(s);
                } else {
                    for (d, s) in d.iter_mut().zip(s) {
                        *d += s;
                    }
                }
                if let Some(e) = epilogue {
                    e.apply_f32(d);
                }
            }
            q = next;
        }
    }
}

per_isa! {
    /// [`Direct::pad_plane_any`] in the widest vectors this CPU has.
    fn pad_plane(d: &Direct, src: &[f32], phase: usize, p: &mut [f32]) => pad_plane_with
}

/// [`Direct::pad_plane_any`] as a free function, for [`per_isa!`].
#[inline(always)]
fn pad_plane_with(d: &Direct, src: &[f32], phase: usize, p: &mut [f32]) {
    d.pad_plane_any(src, phase, p)
}

/// `dst[j] = src[j * S]` for every j of `dst` (`src` holds at least
/// `(dst.len() - 1) * S + 1` floats). With the stride a constant and the reads in whole chunks of `S`, the
/// compiler turns the loop into vector loads and shuffles; `step_by` with a run-time
/// stride stays one scalar load and store per element, which made the polyphase copy of
/// a strided convolution's input (a depthwise 3x3 of stride 2 over 96 x 112 x 112) take
/// several times the convolution itself.
fn every<const S: usize>(dst: &mut [f32], src: &[f32]) {
    let Some((last, body)) = dst.split_last_mut() else {
        return;
    };
    let n = body.len();
    for (d, c) in body.iter_mut().zip(src[..n * S].chunks_exact(S)) {
        *d = c[0];
    }
    *last = src[n * S];
}

/// A buffer the tasks of one call share through its pointer: each writes its own
/// positions (the direct tile kernel's spans; Blocked's output strips; Winograd's planes,
/// U, V and M rows and output tiles), and reads what the others have finished writing.
#[derive(Clone, Copy)]
pub(super) struct SharedOut(pub(super) *mut f32);
// SAFETY: the tasks given one write disjoint positions of it, and read only what no
// task writes meanwhile (`Direct::tiles`, `Blocked::conv`, `Winograd::run`).
unsafe impl Send for SharedOut {}
// SAFETY: as for Send: shared only among tasks writing disjoint positions.
unsafe impl Sync for SharedOut {}

/// Most vectors per tile row of any kernel.
const MAX_NV: usize = 6;

/// Where each vector of a tile row reads and writes: vector `j` reads the `LANES`
/// positions from `x[j]` (from the tile's channel start) and stores its first `n[j]`
/// lanes at `out[j]` (from the row of its output channel).
#[derive(Clone, Copy, Default)]
struct Vectors {
    x: [usize; MAX_NV],
    out: [usize; MAX_NV],
    n: [usize; MAX_NV],
}

/// One micro-kernel call: a tile of output channels (rows `ld` apart from `out`) and
/// vectors `v`, each the sum, over `channels` input channels (`channel` floats apart from
/// `x`) and each tap (its offset in `offs`), of the weights (rows `w_stride` apart, one
/// column per (channel, tap)) times the input under the tap; starting from what `out`
/// holds (`load`), else from each row's `bias` (zero where null); each vector then takes
/// `epilogue` and is stored.
struct TileArgs<'a> {
    x: *const f32,
    channel: usize,
    offs: &'a [usize],
    channels: usize,
    w: *const f32,
    w_stride: usize,
    /// Weights past a channel's last tap to its next channel's first (the taps left out).
    w_skip: usize,
    v: Vectors,
    out: *mut f32,
    ld: usize,
    bias: *const f32,
    load: bool,
    epilogue: Option<Epilogue>,
}

/// Vectors of sums one depthwise tile keeps in registers: enough independent FMA
/// chains to cover the FMA's latency, with registers left for the loads on AVX2's 16.
const DW_ACCS: usize = 8;

/// One depthwise tile: `R` output rows (`ow` floats apart at `out`) of `n` columns
/// (`V = n.div_ceil(LANES)` vectors), each the bias plus, per tap, its weight (the
/// `offs.len()` floats at `w`) times the input at the tap's offset from the row's start
/// (rows `wp` floats apart from `x`).
struct DwArgs<'a> {
    x: *const f32,
    wp: usize,
    offs: &'a [usize],
    w: *const f32,
    bias: f32,
    out: *mut f32,
    ow: usize,
    n: usize,
}

/// Runs the `rows` x `nv` depthwise kernel of `isa`.
///
/// # Safety
/// This CPU has `isa` (from [`Isa::detect`] or [`Isa::available`]), `rows` is 1, 2, 4
/// or 8 and `nv` in `1..=DW_ACCS` with `rows * nv <= DW_ACCS`, `nv` is
/// `args.n.div_ceil(lanes)`, and every read and write `args` implies lies inside live
/// memory, the output aliasing neither input (see `x86::depthwise` and
/// `Direct::depthwise` for the bounds).
unsafe fn run_depthwise(isa: Isa, rows: usize, nv: usize, args: &DwArgs) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: each arm calls the kernel compiled for the set `isa` names, which this
    // CPU has (the contract); `rows`, `nv` and `args` are forwarded under the same terms.
    unsafe {
        match isa {
            Isa::Avx512 => x86::depthwise_avx512(rows, nv, args),
            Isa::Avx2 => x86::depthwise_avx2(rows, nv, args),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, rows, nv, args);
        unreachable!("Isa::detect finds no kernel on this architecture")
    }
}

/// Runs the `mr` x `nv` tile kernel of `isa`.
///
/// # Safety
/// This CPU has `isa` (from [`Isa::detect`] or [`Isa::available`]), `mr` is in `1..=MR`,
/// `nv` in 1 to the ISA's tile width ([`shape`]), and every read and write `args`
/// implies for an `mr` x `nv` tile lies inside live memory, the output aliasing neither
/// input (see `x86::tile`, and `Direct::task` for the bounds).
unsafe fn run_tile(isa: Isa, mr: usize, nv: usize, args: &TileArgs) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: each arm calls the kernel compiled for the set `isa` names, which this
    // CPU has (the contract); `mr`, `nv` and `args` are forwarded under the same terms.
    unsafe {
        match isa {
            Isa::Avx512 => x86::tile_avx512(mr, nv, args),
            Isa::Avx2 => x86::tile_avx2(mr, nv, args),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, mr, nv, args);
        unreachable!("Isa::detect finds no kernel on this architecture")
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{DwArgs, TileArgs};
    use crate::ops::simd::{Avx2, Avx512, Simd, store_rows};

    /// The tile kernel: `MR` x `NV` vectors of sums in registers for the whole reduction.
    /// The tap loop's bound is a runtime value; the body (NV loads, MR broadcasts,
    /// MR * NV FMAs) is fully unrolled.
    ///
    /// # Safety
    /// This CPU has `S`'s set. For every channel `c < t.channels`, tap offset `o` in
    /// `t.offs` and vector `v < NV`, the `S::LANES` floats at `t.x + c * t.channel + o +
    /// t.v.x[v]` are readable; for every row `i < MR`, channel `c` and tap `j <
    /// t.offs.len()` the float at `t.w + i * t.w_stride + c * (t.offs.len() + t.w_skip) +
    /// j` is readable, and with a non-null `t.bias` the float at `t.bias + i`; the
    /// `t.v.n[v]` (at most `S::LANES`) floats at `t.out + i * t.ld + t.v.out[v]` are
    /// writable, readable (initialized) with `t.load`, and alias neither input.
    #[inline(always)]
    unsafe fn tile<S: Simd, const MR: usize, const NV: usize>(t: &TileArgs) {
        // SAFETY: the set is this CPU's (the contract), which every `S::` method needs.
        // The loads at `xp + x[v]` are the contract's input vectors of channel c at one
        // tap's offset; the weight read at `wc + i * w_stride` is the contract's weight
        // of row i, channel c, tap j (`wc` steps by one per tap and by `w_skip` per
        // channel); the bias, the tile's loads (`n[v]` lanes: `load_first` below LANES)
        // and stores (`store_first` below LANES) are the contract's. After the last
        // channel `xc` and `wc` point past the last one, which may be past the end of
        // their memory, so those steps use wrapping arithmetic and are never
        // dereferenced.
        unsafe {
            let (xo, oo, n) = (&t.v.x, &t.v.out, &t.v.n);
            // Branch-free loops over the constant tile, so that the compiler unrolls them
            // and keeps `acc` in registers (a branch per vector, on its lane count or on
            // the activation's kind, left the array on the stack: a store after every
            // FMA). Hence the masked loads and stores whatever the count (a full mask
            // costs what a plain store does), and the activation's kind matched outside
            // its loop.
            let mut acc = [[S::zero(); NV]; MR];
            if t.load {
                for (i, row) in acc.iter_mut().enumerate() {
                    let dst = t.out.add(i * t.ld);
                    for (v, a) in row.iter_mut().enumerate() {
                        *a = S::load_first(dst.add(oo[v]), n[v]);
                    }
                }
            } else if !t.bias.is_null() {
                for (i, row) in acc.iter_mut().enumerate() {
                    let b = S::splat(*t.bias.add(i));
                    row.iter_mut().for_each(|a| *a = b);
                }
            }
            let (mut xc, mut wc) = (t.x, t.w);
            for _ in 0..t.channels {
                for &off in t.offs {
                    let xp = xc.add(off);
                    let mut xv = [S::zero(); NV];
                    for (v, x) in xv.iter_mut().enumerate() {
                        *x = S::load(xp.add(xo[v]));
                    }
                    for (i, row) in acc.iter_mut().enumerate() {
                        let wb = S::splat(*wc.add(i * t.w_stride));
                        for (a, x) in row.iter_mut().zip(&xv) {
                            *a = S::fma(wb, *x, *a);
                        }
                    }
                    wc = wc.add(1);
                }
                xc = xc.wrapping_add(t.channel);
                wc = wc.wrapping_add(t.w_skip);
            }
            if let Some(e) = t.epilogue {
                e.tile::<S, MR, NV>(&mut acc);
            }
            for (i, row) in acc.iter().enumerate() {
                let dst = t.out.add(i * t.ld);
                for (v, &a) in row.iter().enumerate() {
                    S::store_first(dst.add(oo[v]), a, n[v]);
                }
            }
        }
    }

    /// The depthwise tile kernel: `R` rows x `V` vectors of sums in registers across
    /// every tap, stored straight into the output rows.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `V` is `t.n.div_ceil(S::LANES)`. For every row `i < R`,
    /// tap offset `o` in `t.offs` and vector `v < V`, the `S::LANES` floats at `t.x + i *
    /// t.wp + o + v * S::LANES` are readable; the `t.offs.len()` floats at `t.w` are
    /// readable; for every row `i < R` the `t.n` floats at `t.out + i * t.ow` are
    /// writable and alias neither input.
    #[inline(always)]
    unsafe fn depthwise<S: Simd, const R: usize, const V: usize>(t: &DwArgs) {
        // SAFETY: the set is this CPU's (the contract), which every `S::` method needs.
        // The loads are the contract's input vectors; the weight read at `t.w + k` is
        // tap k's (`k < offs.len()`). Stores: vector v of row i covers columns `v *
        // LANES ..`, which start below `t.n` (`V = n.div_ceil(LANES)`); a vector that
        // would end past `t.n` stores its first `t.n - v * LANES < LANES` lanes only.
        unsafe {
            let mut acc = [[S::splat(t.bias); V]; R];
            for (k, &off) in t.offs.iter().enumerate() {
                let wb = S::splat(*t.w.add(k));
                for (i, row) in acc.iter_mut().enumerate() {
                    let xp = t.x.add(i * t.wp + off);
                    for (v, a) in row.iter_mut().enumerate() {
                        *a = S::fma(wb, S::load(xp.add(v * S::LANES)), *a);
                    }
                }
            }
            store_rows::<S, R, V>(&acc, t.out, t.ow, t.n);
        }
    }

    /// Calls `depthwise::<$s, rows, nv>` for the pairs with `rows * nv <= DW_ACCS`.
    macro_rules! dispatch_depthwise {
        ($s:ty, $rows:expr, $nv:expr, $t:expr) => {
            match ($rows, $nv) {
                (1, 1) => depthwise::<$s, 1, 1>($t),
                (1, 2) => depthwise::<$s, 1, 2>($t),
                (1, 3) => depthwise::<$s, 1, 3>($t),
                (1, 4) => depthwise::<$s, 1, 4>($t),
                (1, 5) => depthwise::<$s, 1, 5>($t),
                (1, 6) => depthwise::<$s, 1, 6>($t),
                (1, 7) => depthwise::<$s, 1, 7>($t),
                (1, 8) => depthwise::<$s, 1, 8>($t),
                (2, 1) => depthwise::<$s, 2, 1>($t),
                (2, 2) => depthwise::<$s, 2, 2>($t),
                (2, 3) => depthwise::<$s, 2, 3>($t),
                (2, 4) => depthwise::<$s, 2, 4>($t),
                (4, 1) => depthwise::<$s, 4, 1>($t),
                (4, 2) => depthwise::<$s, 4, 2>($t),
                (8, 1) => depthwise::<$s, 8, 1>($t),
                _ => unreachable!(),
            }
        };
    }

    /// # Safety
    /// AVX-512F is available, and `t` is valid for a `rows` x `nv` depthwise tile (see
    /// `run_depthwise`).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn depthwise_avx512(rows: usize, nv: usize, t: &DwArgs) {
        // SAFETY: this CPU has AVX-512F (the contract), all `Avx512` needs; the arm run
        // is `depthwise::<Avx512, rows, nv>`, whose bounds on `t` are the caller's.
        unsafe { dispatch_depthwise!(Avx512, rows, nv, t) }
    }

    /// # Safety
    /// AVX2 and FMA are available, and `t` is valid for a `rows` x `nv` depthwise tile.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn depthwise_avx2(rows: usize, nv: usize, t: &DwArgs) {
        // SAFETY: this CPU has AVX2 and FMA (the contract), all `Avx2` needs; the arm
        // run is `depthwise::<Avx2, rows, nv>`, whose bounds on `t` are the caller's.
        unsafe { dispatch_depthwise!(Avx2, rows, nv, t) }
    }

    /// Calls `tile::<$s, mr, nv>` for the runtime `mr` in 1..=4 and `nv` in 1..=$nv.
    macro_rules! dispatch {
        ($s:ty, $mr:expr, $nv:expr, $t:expr, [$($n:literal)*]) => {
            match $mr {
                1 => match $nv { $($n => tile::<$s, 1, $n>($t),)* _ => unreachable!() },
                2 => match $nv { $($n => tile::<$s, 2, $n>($t),)* _ => unreachable!() },
                3 => match $nv { $($n => tile::<$s, 3, $n>($t),)* _ => unreachable!() },
                4 => match $nv { $($n => tile::<$s, 4, $n>($t),)* _ => unreachable!() },
                _ => unreachable!(),
            }
        };
    }

    /// # Safety
    /// AVX-512F is available, and `t` is valid for an `mr` x `nv` tile (see `run_tile`).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile_avx512(mr: usize, nv: usize, t: &TileArgs) {
        // SAFETY: this CPU has AVX-512F (the contract), all `Avx512` needs; the arm run
        // is `tile::<Avx512, mr, nv>` (other counts panic), whose bounds on `t` are the
        // caller's.
        unsafe { dispatch!(Avx512, mr, nv, t, [1 2 3 4 5 6]) }
    }

    /// # Safety
    /// AVX2 and FMA are available, and `t` is valid for an `mr` x `nv` tile.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_avx2(mr: usize, nv: usize, t: &TileArgs) {
        // SAFETY: this CPU has AVX2 and FMA (the contract), all `Avx2` needs; the arm run
        // is `tile::<Avx2, mr, nv>` (other counts panic), whose bounds on `t` are the
        // caller's.
        unsafe { dispatch!(Avx2, mr, nv, t, [1 2 3]) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dilation whose padded planes' size would wrap around `usize` gets no direct
    /// plan: the kernels' bounds are computed from that size. (Planned only, never run,
    /// so the set named need not be this CPU's.)
    #[test]
    fn a_window_too_large_to_address_has_no_plan() {
        let mut win = Window {
            input: [1, 3, 3],
            output: [1, 3, 3],
            kernel: [1, 3, 3],
            stride: [1; 3],
            dilation: [1, usize::MAX / 2, 1],
            pad_begin: [0, 1, 1],
            pad_end: [0, 1, 1],
        };
        assert!(Direct::plan(&win, 4, Isa::Avx2).is_none());
        win.dilation = [1, 1, usize::MAX / 2];
        assert!(Direct::plan(&win, 4, Isa::Avx2).is_none());
        win.dilation = [1, 1, 1];
        let plan = Direct::plan(&win, 4, Isa::Avx2).expect("a plan");
        assert_eq!((plan.hp, plan.wp), (5, 5));
        assert_eq!(plan.scratch_len(), 4 * 25 + MAX_LANES);
        assert_eq!(plan.offs[..9], [0, 1, 2, 5, 6, 7, 10, 11, 12]);
    }

    /// A strided window reads polyphase planes: a 3x3 kernel of stride 2 over 7x7 (pad
    /// 1, output 4x4) reads all four planes (5x5 each: the output plus one), and tap
    /// (a, b) reads plane (a mod 2, b mod 2) at (a div 2, b div 2); a 1x1 kernel of
    /// stride 2 reads plane (0, 0) alone, and a kernel past [`MAX_TAPS`] has no plan.
    #[test]
    fn a_strided_window_reads_its_polyphase_planes() {
        let mut win = Window {
            input: [1, 7, 7],
            output: [1, 4, 4],
            kernel: [1, 3, 3],
            stride: [1, 2, 2],
            dilation: [1; 3],
            pad_begin: [0, 1, 1],
            pad_end: [0, 1, 1],
        };
        let plan = Direct::plan(&win, 1, Isa::Avx2).expect("a plan");
        assert_eq!((plan.hp, plan.wp, plan.slots), (5, 5, 4));
        let p = 25;
        assert_eq!(
            plan.offs[..9],
            [0, p, 1, 2 * p, 3 * p, 2 * p + 1, 5, p + 5, 6]
        );
        win.kernel = [1, 1, 1];
        win.output = [1, 4, 4];
        let plan = Direct::plan(&win, 1, Isa::Avx2).expect("a plan");
        assert_eq!((plan.hp, plan.wp, plan.slots, plan.g.taps), (4, 4, 1, 1));
        win.kernel = [1, 1, MAX_TAPS + 1];
        assert!(Direct::plan(&win, 1, Isa::Avx2).is_none());
    }
}
