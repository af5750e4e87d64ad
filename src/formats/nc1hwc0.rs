//! The hot pair: NCHW and NHWC to and from NC1HWC0, the transfer every convolution's
//! activations take on the device, at memory bandwidth.
//!
//! Why the loops are shaped as they are. NCHW to NC1HWC0 is, for each (n, c1), a transpose
//! of a `[C0, H*W]` slab (C0 channel planes) into `[H*W, C0]`. Element by element, either
//! the reads or the writes stride by a whole plane and touch a new cache line each time.
//! The slab is therefore cut into tiles of [`TILE`] positions: a tile's C0 source rows and
//! its destination block (`TILE * C0` elements, a few KiB) stay in L1 while they are
//! transposed, so memory sees each line once, in order, on both sides. That is the portable
//! path (and the one for 1- and 8-byte elements); on x86-64, 2- and 4-byte elements with C0
//! a multiple of 8 (or 4) take [`sse2`] instead, which moves 8x8 (4x4) blocks through
//! registers, 16 bytes a load and a store, instead of one element an iteration. Offsets advance by
//! adding strides; nothing divides or takes a modulo per element, and the padding channels
//! of the last C1 block are written as zeros once per position, never tested per element.
//! NHWC to NC1HWC0 needs no transpose: each position's C channels are cut into runs of C0
//! (the last run padded), so it is a sequence of short copies, walked in source order so
//! both sides stream. Large tensors split over (n, c1) blocks (or n) on rayon's pool;
//! nothing allocates.

use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
mod sse2;

/// Positions per tile of the NCHW slab transpose: with C0 = 16 and 4-byte elements a tile
/// is 4 KiB on each side, well inside L1.
const TILE: usize = 64;

/// Bytes of destination above which a transfer is split over rayon's pool. With the
/// register-blocked transposes a core moves 1 MiB in the order of 100 us; below that,
/// waking the pool's workers (tens of microseconds when the cores are busy) costs as much
/// as it saves, and the data sits in L2/L3 where one core is not bandwidth-bound.
const PARALLEL_BYTES: usize = 1024 * 1024;

/// The dims of an NC1HWC0 transfer: the plain tensor's C and H*W, and C0 (N follows from
/// the buffers).
#[derive(Debug, Clone, Copy)]
pub(super) struct Dims {
    pub c: usize,
    pub hw: usize,
    pub c0: usize,
}

impl Dims {
    fn c1(self) -> usize {
        self.c.div_ceil(self.c0)
    }
}

/// NCHW (`channels_last` false) or NHWC to NC1HWC0, elements of `N` bytes. `src` and `dst`
/// hold exactly the two tensors' bytes.
pub(super) fn to_nc1hwc0<const N: usize>(d: Dims, channels_last: bool, src: &[u8], dst: &mut [u8]) {
    let (src, _) = src.as_chunks::<N>();
    let (dst, _) = dst.as_chunks_mut::<N>();
    if dst.is_empty() {
        return;
    }
    let parallel = dst.len() * N > PARALLEL_BYTES;
    if channels_last {
        let per_n = d.c1() * d.hw * d.c0;
        let one = |(n, out): (usize, &mut [[u8; N]])| {
            nhwc_image(&src[n * d.hw * d.c..][..d.hw * d.c], d, out);
        };
        if parallel {
            dst.par_chunks_mut(per_n).enumerate().for_each(one);
        } else {
            dst.chunks_mut(per_n).enumerate().for_each(one);
        }
        return;
    }
    let c1 = d.c1();
    let block = d.hw * d.c0;
    let one = |(b, out): (usize, &mut [[u8; N]])| {
        let (n, k) = (b / c1, b % c1);
        let rows = d.c0.min(d.c - k * d.c0);
        let plane = &src[(n * d.c + k * d.c0) * d.hw..][..rows * d.hw];
        nchw_slab(plane, d.hw, rows, d.c0, out);
    };
    if parallel {
        dst.par_chunks_mut(block).enumerate().for_each(one);
    } else {
        dst.chunks_mut(block).enumerate().for_each(one);
    }
}

/// NC1HWC0 to NCHW (`channels_last` false) or NHWC, elements of `N` bytes.
pub(super) fn from_nc1hwc0<const N: usize>(
    d: Dims,
    channels_last: bool,
    src: &[u8],
    dst: &mut [u8],
) {
    let (src, _) = src.as_chunks::<N>();
    let (dst, _) = dst.as_chunks_mut::<N>();
    if dst.is_empty() {
        return;
    }
    let parallel = dst.len() * N > PARALLEL_BYTES;
    let per_n = d.c1() * d.hw * d.c0;
    if channels_last {
        let one = |(n, out): (usize, &mut [[u8; N]])| {
            nhwc_image_back(&src[n * per_n..][..per_n], d, out);
        };
        if parallel {
            dst.par_chunks_mut(d.hw * d.c).enumerate().for_each(one);
        } else {
            dst.chunks_mut(d.hw * d.c).enumerate().for_each(one);
        }
        return;
    }
    // Each image's C planes cut into runs of C0 planes: one run per (n, c1) block.
    let image = |(n, planes): (usize, &mut [[u8; N]])| {
        let one = |(k, out): (usize, &mut [[u8; N]])| {
            let slab = &src[n * per_n + k * d.hw * d.c0..][..d.hw * d.c0];
            nchw_slab_back(slab, d.hw, out.len() / d.hw, d.c0, out);
        };
        if parallel {
            planes.par_chunks_mut(d.c0 * d.hw).enumerate().for_each(one);
        } else {
            planes.chunks_mut(d.c0 * d.hw).enumerate().for_each(one);
        }
    };
    if parallel {
        dst.par_chunks_mut(d.c * d.hw).enumerate().for_each(image);
    } else {
        dst.chunks_mut(d.c * d.hw).enumerate().for_each(image);
    }
}

/// One (n, c1) block from NCHW: `plane` holds `rows` channel planes of `hw` elements,
/// `out` is the `[hw, c0]` block; channels `rows..c0` are padding.
fn nchw_slab<const N: usize>(
    plane: &[[u8; N]],
    hw: usize,
    rows: usize,
    c0: usize,
    out: &mut [[u8; N]],
) {
    #[cfg(target_arch = "x86_64")]
    if sse2::handles(N, c0) {
        sse2::slab(
            N,
            true,
            plane.as_flattened(),
            (hw, rows, c0),
            out.as_flattened_mut(),
        );
        return;
    }
    for (t0, t1) in tiles(hw) {
        let tile = &mut out[t0 * c0..t1 * c0];
        for c in 0..rows {
            let row = &plane[c * hw + t0..c * hw + t1];
            for (slot, &v) in tile[c..].iter_mut().step_by(c0).zip(row) {
                *slot = v;
            }
        }
        if rows < c0 {
            for position in tile.chunks_exact_mut(c0) {
                position[rows..].fill([0; N]);
            }
        }
    }
}

/// The inverse of [`nchw_slab`]: the `[hw, c0]` block `slab` into `rows` channel planes.
fn nchw_slab_back<const N: usize>(
    slab: &[[u8; N]],
    hw: usize,
    rows: usize,
    c0: usize,
    out: &mut [[u8; N]],
) {
    #[cfg(target_arch = "x86_64")]
    if sse2::handles(N, c0) {
        sse2::slab(
            N,
            false,
            slab.as_flattened(),
            (hw, rows, c0),
            out.as_flattened_mut(),
        );
        return;
    }
    for (t0, t1) in tiles(hw) {
        let tile = &slab[t0 * c0..t1 * c0];
        for c in 0..rows {
            let row = &mut out[c * hw + t0..c * hw + t1];
            for (slot, &v) in row.iter_mut().zip(tile[c..].iter().step_by(c0)) {
                *slot = v;
            }
        }
    }
}

/// The tiles of `hw` positions: `[t0, t1)` ranges of at most [`TILE`].
fn tiles(hw: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..hw)
        .step_by(TILE)
        .map(move |t0| (t0, (t0 + TILE).min(hw)))
}

/// One image from NHWC: `image` is `[hw, c]`, `out` is `[c1, hw, c0]`.
fn nhwc_image<const N: usize>(image: &[[u8; N]], d: Dims, out: &mut [[u8; N]]) {
    let block = d.hw * d.c0;
    for (t, pixel) in image.chunks_exact(d.c).enumerate().take(d.hw) {
        let mut at = t * d.c0;
        for run in pixel.chunks(d.c0) {
            out[at..at + run.len()].copy_from_slice(run);
            out[at + run.len()..at + d.c0].fill([0; N]);
            at += block;
        }
    }
}

/// The inverse of [`nhwc_image`]: `[c1, hw, c0]` into `[hw, c]`.
fn nhwc_image_back<const N: usize>(blocks: &[[u8; N]], d: Dims, out: &mut [[u8; N]]) {
    let block = d.hw * d.c0;
    for (t, pixel) in out.chunks_exact_mut(d.c).enumerate().take(d.hw) {
        let mut at = t * d.c0;
        for run in pixel.chunks_mut(d.c0) {
            run.copy_from_slice(&blocks[at..at + run.len()]);
            at += block;
        }
    }
}
