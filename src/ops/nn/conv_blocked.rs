//! The direct convolution with output channels in the vector lanes, for windows with
//! many output channels over a large enough image (see [`Blocked::plan`]), on
//! conv_direct.rs's plan: the same polyphase planes, padded by that module's code, and
//! the same tap offsets. conv.rs chooses between the two kernels.
//!
//! Why a second kernel: conv_direct.rs's tile puts output positions in the lanes, so per
//! tap it loads a vector of inputs at every position offset the tap has. Those offsets
//! are arbitrary, so on a 64-byte line three of every four such loads straddle two lines,
//! and on this Xeon (Sapphire Rapids) that split is what bounds it: about 130 GFLOP/s
//! for a 96 -> 32 channel 3x3 over 128x128, where C models of the same loop with every
//! load aligned reach 165-180 (docs/PERFORMANCE.md). Here the lanes are `L` output
//! channels (16 on AVX-512, 8 on AVX2), as in ONNX Runtime's NCHWc kernels:
//!
//! - per (input channel, tap) the kernel loads `MB` weight vectors (the `MB * L` output
//!   channels of a group, packed contiguous and aligned) and broadcasts the input at
//!   each of `P` consecutive positions: a 4-byte load, which never splits a line; then
//!   `MB * P` FMAs into a tile of sums that stays in registers for the whole reduction
//!   (AVX-512: 4 x 6, 3 x 8, 2 x 12 or 1 x 24 of the 32 registers).
//! - positions run along the padded planes (`q = y * wp + x`, as conv_direct.rs's
//!   narrow rows do), so the `P` positions of a tile are `P` consecutive floats of every
//!   tap's plane: one base pointer, constant displacements. The `wp - ow` positions past
//!   each row's end are computed and dropped (2 of 130 for a 3x3 kernel over 128
//!   columns; [`Blocked::plan`] declines where they would be more than a fifth).
//! - a tile's sums are position-major (a vector per position holds `L` channels); the
//!   output is channel-major. Tiles of a strip of [`STRIP`] positions go into a small
//!   buffer, which is then transposed `L` x `L` in registers and stored as rows of
//!   consecutive positions per channel.
//! - the weights are packed per call ([`Blocked::pack`], `M * C * taps` floats
//!   transposed in `L` x `L` squares): [`Blocked::plan`] takes only images of at least
//!   [`MIN_POSITIONS`] outputs, where that pass is a few percent of the FMAs' time
//!   (2.5% for a 128 -> 128 channel 3x3 over 32x32).
//!
//! The AVX2 tiles (2 x 6 and 1 x 12 of 8 lanes) are built and tested, but
//! [`Blocked::plan`] chooses the kernel on AVX-512 only: it has not been measured on an
//! AVX2 machine against conv_direct.rs's tile there.
//!
//! The sums start from the bias and take the (input channel, tap) products in sequence,
//! with the same FMA as conv_direct.rs's tile, so the results are bit for bit that
//! kernel's wherever it sums in sequence too (all but its chunked reductions along the
//! padded planes, which add each chunk's sums to the output).

use rayon::prelude::*;

use super::conv_direct::{Direct, Isa, MAX_LANES, SharedOut};
use super::epilogue::Epilogue;

/// Output positions per strip: a multiple of every tile's `P` and of both vector widths.
const STRIP: usize = 48;
/// Most positions of any tile.
const MAX_P: usize = 24;
/// Most output channels of any group (AVX-512's 4 x 16).
const MAX_GROUP: usize = 64;
/// Bytes of input window conv_direct.rs's tile may read and still keep in L1 (48 KB on
/// Sapphire Rapids, beside the tile's weights and the stack).
const TILE_WINDOW: usize = 32 << 10;
/// Shortest reduction (input channels times taps) for which a single block's layer
/// takes this kernel on several threads: a 3 -> 16 channel 3x3 (27) ran 28% slower here.
const MIN_REDUCTION: usize = 64;
/// Fewest outputs per channel for which packing the weights per call pays.
const MIN_POSITIONS: usize = 256;
/// Most bytes of packed weights for which strips run outermost, every group's weights
/// staying in L2 while a strip's input window is reused by all of them; larger weights
/// run group by group.
const L2_WEIGHTS: usize = 1 << 20;
/// Bytes of a group's weights one channel chunk of a strip's reduction may take, so that
/// they stay in L2 across the strip's tiles.
const CHUNK_WEIGHTS: usize = 512 << 10;
/// Output elements times taps below which the kernel runs on the calling thread.
const PARALLEL_WORK: usize = 1 << 14;

/// Vector width (floats), channel blocks per full group, and vectors of sums per tile
/// of `isa`: 24 of AVX-512's 32 registers, 12 of AVX2's 16, the rest for the weights
/// and the broadcast.
fn shape(isa: Isa) -> (usize, usize, usize) {
    match isa {
        Isa::Avx512 => (16, 4, 24),
        Isa::Avx2 => (8, 2, 12),
    }
}

/// Positions per tile of `isa` for a group of `blocks` channel blocks: the tile is
/// `blocks` x this many vectors of sums.
fn tile_positions(isa: Isa, blocks: usize) -> usize {
    shape(isa).2 / blocks
}

/// A direct plan's convolution with `m` output channels in the lanes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Blocked<'a> {
    d: &'a Direct,
    m: usize,
    /// Floats per lane vector, channel blocks per full group.
    lanes: usize,
    group_blocks: usize,
}

impl<'a> Blocked<'a> {
    /// The blocked kernel for `d`'s window with `m` output channels, if it pays (on
    /// this Xeon, per op in the UNet, against conv_direct.rs's tile):
    /// - the CPU has AVX-512 (see the module doc);
    /// - either at least two channel blocks, and a window of input that outgrows L1 for
    ///   conv_direct.rs's tile ([`TILE_WINDOW`]): while it fits, that tile's split loads
    ///   hit L1 and it is faster (by 7-21% for 16 -> 32, 32 -> 64 and 64 -> 128
    ///   channels), and past it slower (7% for 96 -> 32 over 128 x 128);
    /// - or, split across threads (`parallel` with more than one), one block of at least
    ///   half its lanes over a reduction of at least [`MIN_REDUCTION`]: the tile kernel
    ///   splits output channels, so each of two threads took 8 of 16 and read all of
    ///   the input, where this kernel splits positions (48 -> 16 and 16 -> 16 over 256 x
    ///   256: 19-22% faster on two threads; 10% slower on one, where its 1 x 24 tile is
    ///   bound by its broadcasts);
    /// - more than one input channel (one takes conv_direct.rs's depthwise kernel);
    /// - at least [`MIN_POSITIONS`] outputs per channel, and at most a fifth of the
    ///   positions along the planes past rows' ends.
    pub(super) fn plan(d: &'a Direct, m: usize, parallel: bool) -> Option<Blocked<'a>> {
        Self::forced(d, m).filter(|b| {
            let olen = d.g.oh * d.g.ow;
            // The tile's window: its input channels' kernel rows under a tile's width of
            // positions (six vectors), or the whole row.
            let window = d.channels * d.g.kh * d.wp.min(6 * b.lanes + d.g.kw) * 4;
            let wide = m >= 2 * b.lanes && window > TILE_WINDOW;
            let split = parallel
                && rayon::current_num_threads() > 1
                && 2 * m > b.lanes
                && m <= b.lanes
                && d.channels * d.g.taps >= MIN_REDUCTION;
            d.isa == Isa::Avx512
                && (wide || split)
                && olen >= MIN_POSITIONS
                && d.positions() * 4 <= olen * 5
        })
    }

    /// The blocked kernel for any window `d` with `m` channels that has enough
    /// positions for one tile (tests run it where [`Blocked::plan`] would decline).
    pub(super) fn forced(d: &'a Direct, m: usize) -> Option<Blocked<'a>> {
        let (lanes, group_blocks, _) = shape(d.isa);
        (d.channels > 1 && m > 0 && d.positions() >= MAX_P).then_some(Blocked {
            d,
            m,
            lanes,
            group_blocks,
        })
    }

    /// Output channels per full group.
    fn group(&self) -> usize {
        self.group_blocks * self.lanes
    }

    /// Groups of output channels (the last may have fewer blocks).
    fn groups(&self) -> usize {
        self.m.div_ceil(self.group())
    }

    /// Floats of packed weights: `m` rounded up to whole blocks, times `channels * taps`.
    pub(super) fn packed_len(&self) -> usize {
        self.m.next_multiple_of(self.lanes) * self.d.channels * self.d.g.taps
    }

    /// Group `g`'s first channel, its channel blocks, and its channels below `m` (the
    /// last block's lanes past `m` are zero weights).
    fn group_at(&self, g: usize) -> (usize, usize, usize) {
        let m0 = g * self.group();
        let blocks = (self.m - m0).div_ceil(self.lanes).min(self.group_blocks);
        (m0, blocks, (self.m - m0).min(blocks * self.lanes))
    }

    /// Floats of scratch [`Blocked::run`] needs: the padded planes, then the packed
    /// weights from the next 64-byte boundary (the scratch starts on one).
    pub(super) fn scratch_len(&self) -> usize {
        self.d.scratch_len().next_multiple_of(MAX_LANES) + self.packed_len()
    }

    /// [`Direct::conv`] in this kernel: `out` (`[m, oh * ow]`) = the convolution of `x`
    /// (`[channels, h * w]`) with `w` (`[m, channels, kh, kw]`) plus `bias`, then
    /// `epilogue`, using `scratch` (at least [`Blocked::scratch_len`] floats, 64-byte
    /// aligned for the weights' aligned loads, contents unspecified).
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
        let planes = self.d.scratch_len();
        let (padded, packed) = scratch.split_at_mut(planes.next_multiple_of(MAX_LANES));
        let padded = &mut padded[..planes];
        self.d.pad(x, padded, parallel);
        self.conv(padded, w, bias, epilogue, packed, out, parallel);
    }

    /// Packs `w` (`[m, channels * taps]`) as the kernel reads it: group by group, each
    /// `[channels * taps, blocks * lanes]`, zero in the lanes past `m`.
    fn pack(&self, w: &[f32], packed: &mut [f32], parallel: bool) {
        let k = self.d.channels * self.d.g.taps;
        let group = |g: usize, dst: &mut [f32]| {
            let (m0, blocks, rows) = self.group_at(g);
            let width = blocks * self.lanes;
            let args = PackArgs {
                w: w[m0 * k..].as_ptr(),
                k,
                rows,
                dst: dst.as_mut_ptr(),
                width,
            };
            // SAFETY: `self.d.isa` is this CPU's (see `Direct::plan`). Reads: rows `m0 ..
            // m0 + rows <= m` of `w`, `k` floats each, inside the `m * k` that `conv`
            // asserted. Writes: `k * width` floats of `dst`, group g's chunk of the
            // packed weights.
            unsafe { pack(self.d.isa, &args) };
        };
        let full = self.group() * k;
        let packed = &mut packed[..self.packed_len()];
        if parallel && self.groups() > 1 {
            packed
                .par_chunks_mut(full)
                .enumerate()
                .for_each(|(g, dst)| group(g, dst));
        } else {
            for (g, dst) in packed.chunks_mut(full).enumerate() {
                group(g, dst);
            }
        }
    }

    /// `out` (`[m, oh * ow]`) = the convolution of the padded planes (at least
    /// [`Direct::scratch_len`] floats) with `w` (`[m, channels, taps]`) plus `bias`, then
    /// `epilogue`; `packed` (at least [`Blocked::packed_len`] floats, contents
    /// unspecified) receives the packed weights. `parallel` splits the positions across
    /// rayon's threads.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn conv(
        &self,
        padded: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        packed: &mut [f32],
        out: &mut [f32],
        parallel: bool,
    ) {
        let d = self.d;
        let (olen, k) = (d.g.oh * d.g.ow, d.channels * d.g.taps);
        assert!(
            padded.len() >= d.scratch_len()
                && w.len() >= self.m * k
                && out.len() == self.m * olen
                && bias.is_none_or(|b| b.len() >= self.m)
                && packed.len() >= self.packed_len(),
            "blocked conv: operands do not fit the window"
        );
        self.pack(w, packed, parallel);
        let packed = &*packed;
        let strips = d.positions().div_ceil(STRIP);
        let out = SharedOut(out.as_mut_ptr());
        let work = self.m * olen * d.g.taps;
        let tasks = if parallel && work >= PARALLEL_WORK {
            (rayon::current_num_threads() * 4).clamp(1, strips)
        } else {
            1
        };
        let per = strips.div_ceil(tasks);
        let task = |t: usize| {
            let range = t * per..((t + 1) * per).min(strips);
            // SAFETY: the tasks' strip ranges are disjoint, so are the output positions
            // they write (see `strip`), and `out` outlives the tasks.
            unsafe { self.task(padded, packed, bias, epilogue, range, out) }
        };
        if tasks > 1 {
            (0..strips.div_ceil(per)).into_par_iter().for_each(task);
        } else {
            task(0);
        }
    }

    /// The strips `range` for every group: strips outermost when every group's weights
    /// fit in L2, else group by group.
    ///
    /// # Safety
    /// `out` points at the `[m, oh * ow]` output, which no other thread writes at these
    /// strips' positions while this runs.
    unsafe fn task(
        &self,
        padded: &[f32],
        packed: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        range: std::ops::Range<usize>,
        out: SharedOut,
    ) {
        let mut buf = Buf([f32::NAN; (STRIP + MAX_P) * MAX_GROUP]);
        let mut one = |g: usize, s: usize| {
            // SAFETY: the caller's terms, passed on.
            unsafe { self.strip(padded, packed, bias, epilogue, g, s, &mut buf.0, out) }
        };
        if self.packed_len() * 4 <= L2_WEIGHTS {
            for s in range {
                for g in 0..self.groups() {
                    one(g, s);
                }
            }
        } else {
            for g in 0..self.groups() {
                for s in range.clone() {
                    one(g, s);
                }
            }
        }
    }

    /// Strip `s` (positions `s * STRIP ..`) of group `g`: its tiles into `buf`, then
    /// `buf` transposed into the output.
    ///
    /// # Safety
    /// As [`Blocked::task`]'s.
    #[allow(clippy::too_many_arguments)]
    unsafe fn strip(
        &self,
        padded: &[f32],
        packed: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        g: usize,
        s: usize,
        buf: &mut [f32],
        out: SharedOut,
    ) {
        let d = self.d;
        let (lanes, taps) = (self.lanes, d.g.taps);
        let (m0, blocks, channels) = self.group_at(g);
        let width = blocks * lanes;
        let p = tile_positions(d.isa, blocks);
        let nq = d.positions();
        let (q0, q1) = (s * STRIP, ((s + 1) * STRIP).min(nq));
        let mut b = [0.0f32; MAX_GROUP];
        if let Some(bias) = bias {
            b[..channels].copy_from_slice(&bias[m0..m0 + channels]);
        }
        let w = &packed[m0 * d.channels * taps..][..width * d.channels * taps];
        // Whole tiles from `q0`; the planes' last positions, when they do not fill one,
        // are a tile ending at the last position (`nq >= p`, see `forced`), summed in
        // the buffer's rows from STRIP and copied into place at the end.
        let whole = q0 + (q1 - q0) / p * p;
        let tail = (whole < q1).then(|| nq - p);
        // The reduction in chunks of channels whose weights stay in L2 across the
        // strip's tiles (each tile streams its group's weights: 295 KB for a 128 -> 128
        // channel 3x3, one chunk; 512 -> 512 takes five). Chunks after the first start
        // from the sums the one before left in the buffer (a float32 store and load
        // change nothing). Chunks that fit L1 (24 KB) measured no faster here: the
        // stream from L2 keeps up with the FMAs.
        let chunk = (CHUNK_WEIGHTS / (4 * width * taps)).clamp(1, d.channels);
        for c0 in (0..d.channels).step_by(chunk) {
            let cn = chunk.min(d.channels - c0);
            let last = c0 + cn == d.channels;
            let tiles = (q0..whole).step_by(p).map(|t| (t, t - q0));
            for (t, row) in tiles.chain(tail.map(|t| (t, STRIP))) {
                let args = BlockArgs {
                    x: padded[c0 * d.channel_floats() + t..].as_ptr(),
                    channel: d.channel_floats(),
                    offs: &d.offs[..taps],
                    channels: cn,
                    w: w[c0 * taps * width..].as_ptr(),
                    bias: b.as_ptr(),
                    load: c0 > 0,
                    out: buf[row * width..].as_mut_ptr(),
                    ld: width,
                    epilogue: if last { epilogue } else { None },
                };
                // SAFETY: `d.isa` came from `Isa::detect` or `Isa::available` (see
                // `Direct::plan`), so this CPU has it, and `(blocks, p)` is one of its
                // tiles. Input: position `t + j` for `j < p` is below `nq`, so every read
                // of channel c at tap offset o, `c * channel + o + t + j`, is one of
                // conv_direct.rs's tiles' reads (see `Direct::task`'s bound), inside the
                // planes. Weights: `cn * taps` rows of `width = blocks * lanes` floats of
                // `w` from channel c0's. Bias: `width <= MAX_GROUP` floats of `b`.
                // Buffer: `p` rows of `width` floats from row `t - q0 <= STRIP - p`, or
                // from row STRIP for the tail, ending within `(STRIP + MAX_P) * width <=
                // buf.len()`; with `load`, rows the chunk before wrote.
                unsafe { run(d.isa, blocks, p, &args) };
            }
        }
        if let Some(t) = tail {
            let from = (whole - t + STRIP) * width;
            buf.copy_within(from..from + (q1 - whole) * width, (whole - q0) * width);
        }
        // SAFETY: the caller's terms; the buffer holds every position of `q0..q1`.
        unsafe { self.store(buf, g, q0, q1, out) };
    }

    /// Transposes the buffer's positions `q0..q1` (a row each from row 0, group `g`'s
    /// channels each) into the output, dropping positions past rows' ends.
    ///
    /// # Safety
    /// As [`Blocked::task`]'s; the buffer holds rows `0 .. q1 - q0`.
    unsafe fn store(&self, buf: &[f32], g: usize, q0: usize, q1: usize, out: SharedOut) {
        let d = self.d;
        let (wp, ow, olen) = (d.wp, d.g.ow, d.g.oh * d.g.ow);
        let (m0, blocks, channels) = self.group_at(g);
        let width = blocks * self.lanes;
        let args = StoreArgs {
            buf: buf.as_ptr(),
            width,
            channels,
            out: out.0.wrapping_add(m0 * olen),
            olen,
            wp,
            ow,
            q0,
            q1,
        };
        // SAFETY: `d.isa` is this CPU's. Buffer: `STRIP + MAX_P` rows of `width`
        // floats, of which rows below STRIP are read, whole `lanes` chunks. Output:
        // channels `m0..m0 + channels <= m` at positions `q0..q1` that lie inside rows
        // (`q % wp < ow`), mapped to `(q / wp) * ow + q % wp < olen`: the caller's to
        // write.
        unsafe { store(d.isa, &args) };
    }
}

/// A strip's tiles, `STRIP + MAX_P` position rows of at most `MAX_GROUP` channels, on a
/// line boundary so that every row's vectors are aligned.
#[repr(align(64))]
struct Buf([f32; (STRIP + MAX_P) * MAX_GROUP]);

/// One tile: `P` positions from `x` (in the first channel's planes) times `MB` blocks of
/// packed weights from `w` (`MB * lanes` floats per (channel, tap)), summed over
/// `channels` channels `channel` floats apart and the taps at `offs`, from `bias` (or,
/// with `load`, from what `out` holds); then `epilogue`; position j's `MB * lanes` sums
/// go to `out + j * ld`.
struct BlockArgs<'a> {
    x: *const f32,
    channel: usize,
    offs: &'a [usize],
    channels: usize,
    w: *const f32,
    bias: *const f32,
    load: bool,
    out: *mut f32,
    ld: usize,
    epilogue: Option<Epilogue>,
}

/// Transposing a strip's buffer (`width` floats a position row, from `buf`, position
/// `q0` first) into the first `channels` of its output planes (`olen` floats each from
/// `out`), positions `q0..q1` along planes `wp` wide whose rows hold `ow` outputs.
struct StoreArgs {
    buf: *const f32,
    width: usize,
    channels: usize,
    out: *mut f32,
    olen: usize,
    wp: usize,
    ow: usize,
    q0: usize,
    q1: usize,
}

/// Runs `isa`'s `mb` x `p` tile.
///
/// # Safety
/// This CPU has `isa`, `p` is [`tile_positions`] of `isa` and `mb` blocks, and every
/// read and write `args` implies lies inside live memory, the output aliasing neither
/// input.
unsafe fn run(isa: Isa, mb: usize, p: usize, args: &BlockArgs) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: each arm calls the kernel compiled for the set `isa` names, which this
    // CPU has (the contract); the shape and `args` are forwarded under the same terms.
    unsafe {
        match isa {
            Isa::Avx512 => x86::tile_avx512(mb, p, args),
            Isa::Avx2 => x86::tile_avx2(mb, p, args),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, mb, p, args);
        unreachable!("Isa::detect finds no kernel on this architecture")
    }
}

/// Packing one group's weights: `rows` rows of `k` floats from `w` (the rest of the
/// group's `width` lanes zero) into `[k, width]` at `dst`.
struct PackArgs {
    w: *const f32,
    k: usize,
    rows: usize,
    dst: *mut f32,
    width: usize,
}

/// Runs `isa`'s weight packing.
///
/// # Safety
/// This CPU has `isa`; `args.rows * args.k` floats at `args.w` are readable, `args.k *
/// args.width` at `args.dst` writable, `args.width` a multiple of the vector width.
unsafe fn pack(isa: Isa, args: &PackArgs) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as `run`'s.
    unsafe {
        match isa {
            Isa::Avx512 => x86::pack_avx512(args),
            Isa::Avx2 => x86::pack_avx2(args),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, args);
        unreachable!("Isa::detect finds no kernel on this architecture")
    }
}

/// Runs `isa`'s strip store.
///
/// # Safety
/// This CPU has `isa`; the buffer holds `(q1 - q0).next_multiple_of(lanes)` readable
/// rows of `width` floats, and the output positions of `q0..q1` inside rows are
/// writable for the first `channels` planes.
unsafe fn store(isa: Isa, args: &StoreArgs) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as `run`'s.
    unsafe {
        match isa {
            Isa::Avx512 => x86::store_avx512(args),
            Isa::Avx2 => x86::store_avx2(args),
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
    use super::{BlockArgs, MAX_LANES, PackArgs, StoreArgs};
    use crate::ops::simd::{Avx2, Avx512, Simd, compiled_for, transpose};

    /// The tile: `MB` x `P` vectors of sums in registers for the whole reduction. Per
    /// (channel, tap): `MB` weight loads, `P` broadcasts, `MB * P` FMAs, all unrolled.
    ///
    /// # Safety
    /// This CPU has `S`'s set. For every channel `c < t.channels`, tap offset `o` in
    /// `t.offs` and `j < P` the float at `t.x + c * t.channel + o + j` is readable; the
    /// `t.channels * t.offs.len() * MB * S::LANES` floats at `t.w` and the `MB *
    /// S::LANES` at `t.bias` are readable; for `j < P` the `MB * S::LANES` floats at
    /// `t.out + j * t.ld` are writable, readable (initialized) with `t.load`, and alias
    /// neither input.
    #[inline(always)]
    unsafe fn tile<S: Simd, const MB: usize, const P: usize>(t: &BlockArgs) {
        // SAFETY: the set is this CPU's; every access is one the contract names (the
        // weights step by one (channel, tap) row of `MB * LANES` floats per tap). After
        // the last channel `xc` points past it, possibly past its memory, so that step
        // wraps and is never dereferenced.
        unsafe {
            let l = S::LANES;
            let mut acc = [[S::zero(); P]; MB];
            for (i, row) in acc.iter_mut().enumerate() {
                let b = S::load(t.bias.add(i * l));
                for (j, a) in row.iter_mut().enumerate() {
                    *a = if t.load {
                        S::load(t.out.add(j * t.ld + i * l))
                    } else {
                        b
                    };
                }
            }
            let (mut xc, mut wc) = (t.x, t.w);
            for _ in 0..t.channels {
                for &off in t.offs {
                    let xp = xc.add(off);
                    let mut wv = [S::zero(); MB];
                    for (i, v) in wv.iter_mut().enumerate() {
                        *v = S::load(wc.add(i * l));
                    }
                    for j in 0..P {
                        let x = S::splat(*xp.add(j));
                        for (row, &wi) in acc.iter_mut().zip(&wv) {
                            // The operands in conv_direct.rs's order (weight, input,
                            // sum): the same FMA, so the same bits.
                            row[j] = S::fma(wi, x, row[j]);
                        }
                    }
                    wc = wc.add(MB * l);
                }
                xc = xc.wrapping_add(t.channel);
            }
            if let Some(e) = t.epilogue {
                e.tile::<S, MB, P>(&mut acc);
            }
            for (i, row) in acc.iter().enumerate() {
                for (j, &a) in row.iter().enumerate() {
                    S::store(t.out.add(j * t.ld + i * l), a);
                }
            }
        }
    }

    /// The strip store: per block of `LANES` channels and run of `LANES` positions, the
    /// square of the buffer transposed in registers (`simd::transpose`), each channel's
    /// positions stored whole where they lie in one output row, else through a small
    /// array, row piece by row piece.
    ///
    /// # Safety
    /// As `super::store`'s.
    #[inline(always)]
    unsafe fn store<S: Simd>(t: &StoreArgs) {
        // SAFETY: the set is this CPU's. Buffer reads: rows `q - q0 + i` for `i < n`
        // with `q - q0 + n <= q1 - q0`, inside the contract's rows; columns `c0 ..
        // c0 + n_ch <= channels <= width`. Output writes: the contract's positions (`x
        // + n <= ow` in row y, or the pieces inside rows) of channel `c0 + j < channels`;
        // the spill array is local.
        unsafe {
            let l = S::LANES;
            let mut spill = [0.0f32; MAX_LANES * MAX_LANES];
            for c0 in (0..t.channels).step_by(l) {
                let n_ch = (t.channels - c0).min(l);
                let planes = t.out.add(c0 * t.olen);
                for q in (t.q0..t.q1).step_by(l) {
                    let n = (t.q1 - q).min(l);
                    let src = t.buf.add((q - t.q0) * t.width + c0);
                    let (y, x) = (q / t.wp, q % t.wp);
                    if x + n <= t.ow {
                        let dst = planes.add(y * t.ow + x);
                        transpose::<S>(src, t.width, (n, n_ch), |j| dst.add(j * t.olen), n);
                        continue;
                    }
                    let tmp = spill.as_mut_ptr();
                    transpose::<S>(src, t.width, (n, n_ch), |j| tmp.add(j * l), n);
                    for j in 0..n_ch {
                        let (from, plane) = (tmp.add(j * l), planes.add(j * t.olen));
                        let mut i = 0;
                        while i < n {
                            let (y, x) = ((q + i) / t.wp, (q + i) % t.wp);
                            let run = (t.wp - x).min(n - i);
                            let keep = t.ow.saturating_sub(x).min(run);
                            std::ptr::copy_nonoverlapping(
                                from.add(i),
                                plane.add(y * t.ow + x),
                                keep,
                            );
                            i += run;
                        }
                    }
                }
            }
        }
    }

    /// The packing: `LANES` x `LANES` squares of the weights (rows are output channels,
    /// columns (channel, tap) pairs) transposed in registers (`simd::transpose`), so
    /// each packed row of `width` lanes is written in whole vectors (a scalar walk took
    /// 0.8 ns a float, 7% of a 128 -> 128 channel 3x3 over 32x32).
    ///
    /// # Safety
    /// As `super::pack`'s.
    #[inline(always)]
    unsafe fn pack<S: Simd>(t: &PackArgs) {
        // SAFETY: the set is this CPU's. Reads: rows `c0 .. c0 + min(rows - c0, LANES)`
        // (`c0 < rows`: a group has as many blocks as its rows need), columns `k0 .. k0 +
        // n <= k`; writes: packed rows `k0 + j < k`, lanes `c0 .. c0 + LANES <= width`
        // (rows past `rows` are zero lanes).
        unsafe {
            let l = S::LANES;
            for c0 in (0..t.width).step_by(l) {
                let rows = (t.rows - c0).min(l);
                for k0 in (0..t.k).step_by(l) {
                    let n = (t.k - k0).min(l);
                    let src = t.w.add(c0 * t.k + k0);
                    let dst = |j: usize| t.dst.add((k0 + j) * t.width + c0);
                    transpose::<S>(src, t.k, (rows, n), dst, l);
                }
            }
        }
    }

    compiled_for!(pack_avx512 = pack::<Avx512>(t: &PackArgs));
    compiled_for!(pack_avx2 = pack::<Avx2>(t: &PackArgs));

    /// Calls `tile::<$s, mb, p>` for the shapes of `super::tile_positions`.
    macro_rules! dispatch {
        ($s:ty, $mb:expr, $p:expr, $t:expr, [$(($m:literal, $n:literal))*]) => {
            match ($mb, $p) {
                $(($m, $n) => tile::<$s, $m, $n>($t),)*
                _ => unreachable!(),
            }
        };
    }

    /// # Safety
    /// AVX-512F is available, and `t` is valid for an `mb` x `p` tile (see `super::run`).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile_avx512(mb: usize, p: usize, t: &BlockArgs) {
        // SAFETY: this CPU has AVX-512F (the contract), all `Avx512` needs; the arm run
        // has the caller's bounds.
        unsafe { dispatch!(Avx512, mb, p, t, [(4, 6)(3, 8)(2, 12)(1, 24)]) }
    }

    /// # Safety
    /// AVX2 and FMA are available, and `t` is valid for an `mb` x `p` tile.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_avx2(mb: usize, p: usize, t: &BlockArgs) {
        // SAFETY: this CPU has AVX2 and FMA (the contract), all `Avx2` needs; the arm
        // run has the caller's bounds.
        unsafe { dispatch!(Avx2, mb, p, t, [(2, 6)(1, 12)]) }
    }

    compiled_for!(store_avx512 = store::<Avx512>(t: &StoreArgs));
    compiled_for!(store_avx2 = store::<Avx2>(t: &StoreArgs));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::nn::window::Window;

    /// A 3x3 window (pad 1) over `c` channels of `side` x `side`, planned for AVX-512
    /// (planned only, never run, so the CPU need not have it).
    fn direct(c: usize, side: usize) -> Direct {
        let win = Window {
            input: [1, side, side],
            output: [1, side, side],
            kernel: [1, 3, 3],
            stride: [1; 3],
            dilation: [1; 3],
            pad_begin: [0, 1, 1],
            pad_end: [0, 1, 1],
        };
        Direct::plan(&win, c, Isa::Avx512).expect("a plan")
    }

    /// On one thread the kernel takes many channels whose tile window outgrows L1 (the
    /// UNet's 96 -> 32 and 64 -> 64 layers), and leaves the tile kernel the windows that
    /// fit (16 -> 32 over 128 x 128), single blocks (48 -> 16), small images (128 ->
    /// 128 over 14 x 14) and AVX2; on one thread `parallel` changes nothing.
    #[test]
    fn the_kernel_takes_the_layers_it_was_measured_faster_on() {
        let takes = |c: usize, side: usize, m: usize| {
            let d = direct(c, side);
            let (serial, parallel) = (Blocked::plan(&d, m, false), Blocked::plan(&d, m, true));
            if rayon::current_num_threads() == 1 {
                assert_eq!(serial.is_some(), parallel.is_some());
            }
            serial.is_some()
        };
        assert!(takes(96, 128, 32));
        assert!(takes(64, 64, 64));
        assert!(takes(128, 32, 128));
        assert!(!takes(16, 128, 32));
        assert!(!takes(48, 256, 16));
        assert!(!takes(128, 14, 128));
        let mut d = direct(96, 128);
        d.isa = Isa::Avx2;
        assert!(Blocked::plan(&d, 32, false).is_none());
        assert!(Blocked::forced(&d, 32).is_some());
    }
}
