//! Depthwise float32 convolution (one input and one output channel per group) of column
//! stride 2 along output rows, reading each channel's input where it lies, on x86-64
//! with AVX-512 or AVX2 and FMA.
//!
//! Why not conv_direct.rs's depthwise kernel, which runs on its zero-bordered polyphase
//! copy of the input: over the wide images of a network's first stages the copy cost
//! more than the convolution. A 3x3 of stride 2 over 8 channels of 112 x 112 spent half
//! its time de-interleaving the input into four planes and a quarter in the FMAs (about
//! twice ONNX Runtime's time). Here nothing is copied:
//!
//! - An output vector whose taps all read inside the input row (all but a row's first
//!   and last vector or so on a wide image) loads its taps from the input itself: one
//!   pair of vectors per two adjacent taps, split into even and odd lanes in registers
//!   ([`Simd::load_even_odd`]), the even lanes one tap's inputs and the odd ones the
//!   next tap's; the permutes run beside the FMAs.
//! - A tap row above or below the input reads a row of zeros, so a tile's rows need
//!   no test.
//! - An edge vector (one whose taps reach past a row's first or last column) loads
//!   through masks ([`Simd::load_even_odd_mask`]), one vector over all the tile's rows
//!   (the masks are worked out once per tap for them all): the columns outside the row
//!   read as zeros and touch no memory.
//! - A tile is up to [`ACCS`] vectors of sums over up to eight output rows, each its own
//!   chain of FMAs, stored straight from registers (a row's last vector through a masked
//!   store); the fused activation ([`Epilogue`]) then runs over the plane in cache.
//!
//! Why stride 2 only: at stride 1 the same in-place kernel measured 15-20% slower than
//! conv_direct.rs's on its copy (64 and 144 channels of 56 x 56). That kernel is bound by
//! its loads, one per FMA, and the copy, a sequential read the prefetchers follow, puts
//! them all in L1; read in place, they come from L2 in an order the prefetchers do not
//! follow (software prefetches of the next tile's rows did not help). At stride 2 the
//! permutes, not the loads, bound the kernel, and the copy's de-interleave was the cost.
//!
//! Each output lane is the bias plus the taps in turn, each an FMA, a tap in the padding
//! an FMA with zero: the bits of conv_direct.rs's depthwise and tile kernels and of
//! conv_dw.rs's channel blocks.
//!
//! [`Simd::load_even_odd`]: crate::ops::simd::Simd::load_even_odd
//! [`Simd::load_even_odd_mask`]: crate::ops::simd::Simd::load_even_odd_mask

use rayon::prelude::*;

use super::epilogue::Epilogue;
use super::scratch::with_scratch;
use super::window::{Flat, Window};
use crate::ops::simd::Isa;

/// Vectors of sums one tile keeps in registers: enough independent FMA chains to cover
/// the FMA's latency, with registers left on AVX2's 16 for the loads and weights.
const ACCS: usize = 8;
/// Most input rows a tile reads.
const MAX_TILE_ROWS: usize = 32;
/// Most taps of a window.
const MAX_TAPS: usize = 64;

/// A depthwise window over one image, run along its output rows; see the module doc.
#[derive(Debug, Clone)]
pub(super) struct DwRows {
    isa: Isa,
    g: Flat,
    /// The vectors (`ox0 = v * lanes`) `lo..hi` of a row read in place; the others
    /// load through masks.
    lo: usize,
    hi: usize,
}

impl DwRows {
    /// The plan for `win` on `isa`, if it applies: at most two spatial dims, a column
    /// stride of 2 and column dilation of 1, at most [`MAX_TAPS`] taps, every tile's
    /// rows within [`MAX_TILE_ROWS`], and padding that is not negative. `isa` must be a
    /// set this CPU has, from [`Isa::detect`] or [`Isa::available`].
    pub(super) fn plan(win: &Window, isa: Isa) -> Option<DwRows> {
        let g = win.flat(MAX_TAPS)?;
        if (g.sw, g.dw) != (2, 1) {
            return None;
        }
        let rows = (ACCS - 1)
            .checked_mul(g.sh)?
            .checked_add((g.kh - 1).checked_mul(g.dh)?)?
            .checked_add(1)?;
        if rows > MAX_TILE_ROWS {
            return None;
        }
        let (lo, hi) = in_place(&g, isa.lanes())?;
        Some(DwRows { isa, g, lo, hi })
    }

    /// `out` (`[C, oh * ow]`) = the depthwise convolution of `x` (`[C, h * w]`) with `w`
    /// (`[C, kh * kw]`) plus `bias` (`[C]`, or zeros), then `epilogue`. `parallel`
    /// splits the channels across rayon's threads.
    pub(super) fn conv(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        out: &mut [f32],
        parallel: bool,
    ) {
        let g = &self.g;
        let (plane, olen) = (g.h * g.w, g.oh * g.ow);
        let c = out.len() / olen;
        assert!(
            out.len() == c * olen
                && x.len() >= c * plane
                && w.len() >= c * g.taps
                && bias.is_none_or(|b| b.len() >= c),
            "depthwise conv: operands do not fit the window"
        );
        let channel = |j: usize, y: &mut [f32]| {
            // The row of zeros a tap row outside the input reads: every in-place read
            // ends inside a row (`plan`), so `w` floats.
            with_scratch(g.w, |zeros: &mut [f32]| {
                zeros.fill(0.0);
                self.plane(
                    &x[j * plane..][..plane],
                    &w[j * g.taps..][..g.taps],
                    bias.map_or(0.0, |b| b[j]),
                    zeros,
                    y,
                );
            });
            if let Some(e) = epilogue {
                e.apply_f32(y);
            }
        };
        if parallel && c > 1 {
            out.par_chunks_mut(olen)
                .enumerate()
                .for_each(|(j, y)| channel(j, y));
        } else {
            for (j, y) in out.chunks_mut(olen).enumerate() {
                channel(j, y);
            }
        }
    }

    /// One channel: `y` (`oh * ow`) from `x` (`h * w`), the taps `w` and `bias`;
    /// `zeros` is `w` zeros.
    fn plane(&self, x: &[f32], w: &[f32], bias: f32, zeros: &[f32], y: &mut [f32]) {
        let g = &self.g;
        let l = self.isa.lanes();
        let vectors = g.ow.div_ceil(l);
        // Each tile row's tap rows (`plan` bounds them by MAX_TILE_ROWS).
        let mut rows = [std::ptr::null::<f32>(); ACCS * MAX_TILE_ROWS];
        let y0 = y.as_mut_ptr();
        let mut r0 = 0;
        while r0 < g.oh {
            let tile_rows = 1 << (ACCS.min(g.oh - r0)).ilog2();
            // Each tile row's tap rows: the input's row, or the zeros outside it.
            for i in 0..tile_rows {
                for a in 0..g.kh {
                    let iy = ((r0 + i) * g.sh + a * g.dh).wrapping_sub(g.pt);
                    rows[i * g.kh + a] = if iy < g.h {
                        x[iy * g.w..].as_ptr()
                    } else {
                        zeros.as_ptr()
                    };
                }
            }
            let rows = &rows[..tile_rows * g.kh];
            let tile = |rows, ox0: usize, nv: usize| Tile {
                rows,
                col: (2 * ox0) as isize - g.pl as isize,
                width: g.w,
                w: w.as_ptr(),
                kh: g.kh,
                kw: g.kw,
                bias,
                ow: g.ow,
                n: (g.ow - ox0).min(nv * l),
            };
            // Where a tile from output row `r0 + i`, column `ox0` stores (formed in
            // place of slicing `y` per tile: the kernels write through it, see `run`).
            let out = |i: usize, ox0: usize| y0.wrapping_add((r0 + i) * g.ow + ox0);
            // The vectors read in place: runs of up to four, over as many of the tile's
            // rows at once as keep ACCS sums (more vectors a row, fewer rows: fewer row
            // pointers per FMA).
            let mut v = self.lo;
            while v < self.hi {
                let nv = 1 << (self.hi - v).min(4).ilog2();
                let sub = (ACCS / nv).min(tile_rows);
                for i0 in (0..tile_rows).step_by(sub) {
                    let t = tile(&rows[i0 * g.kh..(i0 + sub) * g.kh], v * l, nv);
                    // SAFETY: `self.isa` came from `Isa::detect` or `Isa::available`
                    // (see `plan`); `sub` is 1, 2, 4 or 8 and `nv` 1, 2 or 4 with their
                    // product at most ACCS; `n` spans `nv` vectors, the last maybe
                    // partly. Reads: vectors `v..v + nv` (up to `hi`) are in place
                    // (`plan`): every vector's reach from `col >= 0` lies inside its
                    // row of `x` (`w` floats) or of `zeros` (`w` floats). Writes: rows
                    // `r0 + i0 ..` plus `sub`, at most `oh`, of `y`, columns `v l ..`
                    // plus `n`, at most `ow`; `y` aliases neither input.
                    unsafe { run(self.isa, sub, nv, false, &t, out(i0, v * l)) };
                }
                v += nv;
            }
            // The edge vectors one at a time over all the tile's rows (a mask per tap
            // is worked out once for them all), through masks.
            for v in (0..self.lo).chain(self.hi.max(self.lo)..vectors) {
                let t = tile(rows, v * l, 1);
                // SAFETY: as above for one vector, masked: it reads only the columns
                // `0..w` of its tap rows.
                unsafe { run(self.isa, tile_rows, 1, true, &t, out(0, v * l)) };
            }
            r0 += tile_rows;
        }
    }
}

/// For a window of column stride 2 and column dilation 1 read along its output rows in
/// `l`-float vectors, each even tap loading a pair of vectors from its column: the
/// vectors `lo..hi` of a row whose reads all lie inside the input row (the others are
/// edge vectors, read through masks). `None` where a read's column (edge vectors'
/// start before the row) could not be addressed as an isize.
pub(super) fn in_place(g: &Flat, l: usize) -> Option<(usize, usize)> {
    // Floats a vector reads from its first tap's column: a pair of vectors from each
    // even tap.
    let reach = (g.kw - 1) / 2 * 2 + 2 * l;
    let span = g.ow.div_ceil(l).checked_mul(2 * l)?.checked_add(reach)?;
    if span > isize::MAX as usize / 4 || g.w > isize::MAX as usize / 4 {
        return None;
    }
    // Vector v reads columns `2 v l - pl ..` plus `reach`: in place when that lies
    // inside the row. As v grows the start passes 0 once and the end passes w once, so
    // those vectors are one range.
    let vectors = g.ow.div_ceil(l);
    let inside = |v: usize| {
        let c0 = 2 * v * l;
        c0 >= g.pl && c0 - g.pl + reach <= g.w
    };
    let lo = (0..vectors).find(|&v| inside(v)).unwrap_or(vectors);
    let hi = (lo..vectors).find(|&v| !inside(v)).unwrap_or(vectors);
    Some((lo, hi))
}

/// The bits `lo..hi` of a mask, `lo` and `hi` clamped to `0..=n`: the floats `j < n`
/// from column `col` with `0 <= col + j < width` (an edge vector's lanes inside its
/// row).
#[inline(always)]
pub(super) fn columns_inside(col: isize, width: usize, n: usize) -> u64 {
    let lo = (-col).clamp(0, n as isize) as u32;
    let hi = (width as isize - col).clamp(lo as isize, n as isize) as u32;
    let below = |k: u32| if k >= 64 { u64::MAX } else { (1u64 << k) - 1 };
    below(hi) & !below(lo)
}

/// One tile: `R` output rows (`ow` floats apart from where it stores) of `n` columns
/// (`V = n.div_ceil(LANES)` vectors), each the bias plus, per tap `(a, b)`, its weight
/// (`w[a kw + b]`) times every other input from column `col + b` of the tap row
/// `rows[i kh + a]`, `width` floats wide.
struct Tile<'a> {
    rows: &'a [*const f32],
    col: isize,
    width: usize,
    w: *const f32,
    kh: usize,
    kw: usize,
    bias: f32,
    ow: usize,
    n: usize,
}

/// Runs the `rows` x `nv` kernel of `isa`, storing at `out`; `masked`: the edge
/// kernel (one vector), which reads only the columns inside its rows.
///
/// # Safety
/// This CPU has `isa` (from [`Isa::detect`] or [`Isa::available`]); `rows` is 1, 2, 4
/// or 8 and `nv` 1, 2 or 4 (1 if `masked`) with `rows * nv <= ACCS`; `t.n` is in `(nv
/// - 1) * LANES + 1 ..= nv * LANES`; each of `t.rows`' first `rows * kh` pointers is to
/// a row of `t.width` readable floats, and, unless `masked`, every float a vector reads
/// (`2 * LANES` from `col + b + 2 v LANES` for each even tap `b < kw` and `v < nv`)
/// lies inside its row; the taps at `t.w` are readable; and for each row `i` the `t.n`
/// floats at `out + i * t.ow` are writable and alias no read.
unsafe fn run(isa: Isa, rows: usize, nv: usize, masked: bool, t: &Tile, out: *mut f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: each arm calls the kernel compiled for the set `isa` names, which this CPU
    // has (the contract); the rest is forwarded under the same terms.
    unsafe {
        match isa {
            Isa::Avx512 => x86::tile_avx512(rows, nv, masked, t, out),
            Isa::Avx2 => x86::tile_avx2(rows, nv, masked, t, out),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, rows, nv, masked, t, out);
        unreachable!("Isa::detect finds no kernel on this architecture")
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Tile, columns_inside as inside};
    use crate::ops::simd::{Avx2, Avx512, Simd, compiled_for, store_rows};

    /// The tile of [`super::run`], `R` rows of `V` vectors; `MASKED`: the edge kernel.
    ///
    /// # Safety
    /// As [`super::run`]'s contract, on `S`'s set.
    #[inline(always)]
    unsafe fn tile<S: Simd, const R: usize, const V: usize, const MASKED: bool>(
        t: &Tile,
        out: *mut f32,
    ) {
        let l = S::LANES;
        // SAFETY: the set is this CPU's (the contract). Loads, from tap row `a` of tile
        // row `i` (`t.rows[i kh + a]`): `2 l` floats from column `col + b + 2 v l` for
        // even `b < kw` and `v < V`. Unmasked, every one lies inside the row (the
        // contract; `col >= 0`); masked, only the floats of columns `0..width` are read
        // (`inside`), the row's own, and the pointer to the others is formed wrapping
        // and not read. The weight reads are taps `a kw + b (+ 1) < kh kw`. Stores:
        // vector `v` of row `i` covers columns `v l ..` below `t.n`, the last one's first
        // `t.n - v l` lanes only.
        unsafe {
            let mut acc = [[S::splat(t.bias); V]; R];
            for a in 0..t.kh {
                let wrow = t.w.add(a * t.kw);
                // The tile rows' tap row `a`, from `col`: taken once per tap row, not
                // per tap (a pointer load per FMA made the kernel three times slower).
                let ps: [*const f32; R] =
                    std::array::from_fn(|i| t.rows[i * t.kh + a].wrapping_offset(t.col));
                for b in (0..t.kw).step_by(2) {
                    let w0 = S::splat(*wrow.add(b));
                    let pair = b + 1 < t.kw;
                    let w1 = if pair { S::splat(*wrow.add(b + 1)) } else { w0 };
                    let mask = match MASKED {
                        true => inside(t.col + b as isize, t.width, 2 * l),
                        false => 0,
                    };
                    for (p, row) in ps.iter().zip(acc.iter_mut()) {
                        let p = p.wrapping_add(b);
                        for (v, s) in row.iter_mut().enumerate() {
                            let (even, odd) = match MASKED {
                                true => S::load_even_odd_mask(p, mask),
                                false => S::load_even_odd(p.add(2 * v * l)),
                            };
                            *s = S::fma(w0, even, *s);
                            if pair {
                                *s = S::fma(w1, odd, *s);
                            }
                        }
                    }
                }
            }
            store_rows::<S, R, V>(&acc, out, t.ow, t.n);
        }
    }

    /// The `tile::<S, R, V, MASKED>` of the run-time `rows`, `nv` and `masked`.
    ///
    /// # Safety
    /// As [`super::run`]'s contract, on `S`'s set.
    #[inline(always)]
    unsafe fn dispatch<S: Simd>(rows: usize, nv: usize, masked: bool, t: &Tile, out: *mut f32) {
        // SAFETY: the arm run is the contract's kernel, on its terms.
        unsafe {
            match (masked, rows, nv) {
                (false, 1, 1) => tile::<S, 1, 1, false>(t, out),
                (false, 2, 1) => tile::<S, 2, 1, false>(t, out),
                (false, 4, 1) => tile::<S, 4, 1, false>(t, out),
                (false, 8, 1) => tile::<S, 8, 1, false>(t, out),
                (false, 1, 2) => tile::<S, 1, 2, false>(t, out),
                (false, 2, 2) => tile::<S, 2, 2, false>(t, out),
                (false, 4, 2) => tile::<S, 4, 2, false>(t, out),
                (false, 1, 4) => tile::<S, 1, 4, false>(t, out),
                (false, 2, 4) => tile::<S, 2, 4, false>(t, out),
                (true, 1, 1) => tile::<S, 1, 1, true>(t, out),
                (true, 2, 1) => tile::<S, 2, 1, true>(t, out),
                (true, 4, 1) => tile::<S, 4, 1, true>(t, out),
                (true, 8, 1) => tile::<S, 8, 1, true>(t, out),
                _ => unreachable!("tiles are 1, 2, 4 or 8 rows of 1, 2 or 4 vectors"),
            }
        }
    }

    compiled_for!(tile_avx512 = dispatch::<Avx512>(rows: usize, nv: usize, masked: bool, t: &Tile, out: *mut f32));
    compiled_for!(tile_avx2 = dispatch::<Avx2>(rows: usize, nv: usize, masked: bool, t: &Tile, out: *mut f32));
}

#[cfg(test)]
mod tests {
    use super::super::conv_dw::tests::{Case, gives_the_row_kernels_bits};
    use super::*;

    /// The in-place kernel gives the bits of conv_direct.rs's row kernel (on its
    /// polyphase copies) run on each channel alone (see `gives_the_row_kernels_bits`):
    /// MobileNets' 3x3 of stride 2 over wide images, odd sizes whose last vector reads
    /// past the row, 5x5 and 7x7, a 4-wide kernel (taps in whole pairs), rows narrower
    /// than a vector (every vector an edge), a taller row stride with a row dilation,
    /// pads wider than the kernel reaches (columns that read only padding), one row,
    /// output row counts no tile shape divides.
    #[test]
    fn rows_read_in_place_give_the_padded_kernels_bits() {
        // (channels, image, kernel, strides, dilations, pads).
        let cases = Case::each([
            (2, [112, 112], [3, 3], [2, 2], [1, 1], [1; 4]),
            (2, [113, 111], [3, 3], [2, 2], [1, 1], [0, 1, 1, 0]),
            (3, [28, 70], [5, 5], [2, 2], [1, 1], [2; 4]),
            (2, [17, 67], [5, 5], [1, 2], [1, 1], [2; 4]),
            (2, [11, 9], [3, 3], [2, 2], [1, 1], [1; 4]),
            (1, [13, 300], [3, 3], [3, 2], [2, 1], [2, 3, 1, 4]),
            (1, [9, 40], [3, 4], [1, 2], [1, 1], [3, 5, 4, 6]),
            (2, [1, 45], [1, 3], [1, 2], [1, 1], [0, 1, 0, 1]),
            (2, [23, 37], [7, 7], [1, 2], [1, 1], [3; 4]),
            (1, [30, 250], [3, 3], [2, 2], [1, 1], [1; 4]),
        ]);
        gives_the_row_kernels_bits(&cases, &|isa, win, x, w, b, e, out, parallel| {
            DwRows::plan(win, isa)
                .unwrap()
                .conv(x, w, b, e, out, parallel)
        });
    }

    /// Column strides other than 2, a column dilation, a tile reading more rows than it
    /// addresses and a 3-D window have no plan; a wide image reads most vectors in place.
    #[test]
    fn windows_it_does_not_take_have_no_plan() {
        let window = |k, s, d| {
            Case {
                c: 1,
                hw: [40, 200],
                k,
                s,
                d,
                pads: [1; 4],
            }
            .window()
        };
        for isa in Isa::available() {
            let plan = |k, s, d| DwRows::plan(&window(k, s, d), isa);
            assert!(plan([3, 3], [1, 1], [1, 1]).is_none());
            assert!(plan([3, 3], [1, 3], [1, 1]).is_none());
            assert!(plan([3, 3], [1, 2], [1, 2]).is_none());
            assert!(plan([9, 1], [4, 2], [4, 1]).is_none());
            let mut deep = window([3, 3], [1, 2], [1, 1]);
            (deep.input[0], deep.output[0]) = (2, 2);
            assert!(DwRows::plan(&deep, isa).is_none());
            // 100 output columns; vector v reads columns 2 v l - 1 .. 2 v l + 2 l: the
            // first reads column -1, and the last whole ones end inside the 200.
            let wide = plan([3, 3], [1, 2], [1, 1]).unwrap();
            let (l, vectors) = (isa.lanes(), 100usize.div_ceil(isa.lanes()));
            let hi = (1..vectors)
                .take_while(|v| 2 * v * l - 1 + 2 * l + 2 <= 200)
                .count()
                + 1;
            assert_eq!((wide.lo, wide.hi), (1, hi), "{isa:?}");
            assert!(hi >= vectors - 2, "{isa:?}: {hi} of {vectors}");
        }
    }
}
