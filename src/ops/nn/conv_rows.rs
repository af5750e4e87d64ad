//! float32 convolutions of few input channels and column stride 2 (a CNN's stem: 3
//! channels of an image, 3x3 of stride 2 in MobileNets and EfficientNets, 7x7 in
//! ResNets) along output rows, reading the input where it lies, on x86-64 with AVX-512
//! or AVX2 and FMA.
//!
//! Why not conv_direct.rs's tile kernel: it first copies the input into its zero-bordered
//! polyphase planes (a de-interleave of the whole image, 600 KB for a 224 x 224 RGB
//! input) and then computes one vector of positions for a few output channels per load,
//! so a stem of 8 output channels took 80 us, twice its FMAs' time. Here nothing is
//! copied, and each pair of input vectors loaded serves every output channel of a block:
//!
//! - A tile is one output row's vector of positions for [`MB`] output channels (fewer
//!   for the last block), one FMA chain each. For each input channel and tap row, each
//!   pair of adjacent taps is one pair of vectors split into even and odd lanes
//!   ([`Simd::load_even_odd`]: the even lanes one tap's inputs, the odd ones the next
//!   tap's), then an FMA per output channel and tap with the weight broadcast from
//!   memory. The permutes are one per eight FMAs instead of one per FMA.
//! - A tap row above or below the input reads a row of zeros; an edge vector (one
//!   whose taps reach past a row's first or last column) loads through masks
//!   ([`Simd::load_even_odd_mask`]): columns outside the row read as zeros.
//! - Threads take whole output rows, every channel of them; the fused activation
//!   ([`Epilogue`]) is applied to the sums in registers before they are stored.
//!
//! Each output lane is the bias plus, for each input channel, tap row and tap in turn,
//! an FMA (a tap in the padding an FMA with zero): a fixed sequence whatever the thread
//! or executor, so every executor gets the same bits.
//!
//! [`Simd::load_even_odd`]: crate::ops::simd::Simd::load_even_odd
//! [`Simd::load_even_odd_mask`]: crate::ops::simd::Simd::load_even_odd_mask

use rayon::prelude::*;

use super::conv_direct::SharedOut;
use super::conv_dw_rows::in_place;
use super::epilogue::Epilogue;
use super::scratch::with_scratch;
use super::window::{Flat, Window};
use crate::ops::simd::Isa;

/// Output channels a tile keeps in registers: enough independent FMA chains to cover
/// the FMA's latency, with registers left on AVX2's 16 for the loads.
const MB: usize = 8;
/// Most input rows (input channels times kernel rows) one output row reads: the tile's
/// row pointers live on the stack.
const MAX_ROWS: usize = 24;
/// Most taps of a kernel row.
const MAX_KW: usize = 8;

/// A convolution of one image of few input channels, run along its output rows; see
/// the module doc.
#[derive(Debug, Clone)]
pub(super) struct StemRows {
    isa: Isa,
    g: Flat,
    /// Input channels.
    c: usize,
    /// The vectors (`ox0 = v * lanes`) `lo..hi` of a row read in place; the others
    /// load through masks.
    lo: usize,
    hi: usize,
}

impl StemRows {
    /// The plan for `win` over `c` input channels on `isa`, if it applies: at most two
    /// spatial dims, a column stride of 2 and column dilation of 1, at most
    /// [`MAX_KW`] taps a row and [`MAX_ROWS`] input rows an output row (`c * kh`),
    /// output rows at least a vector wide, and padding that is not negative. `isa`
    /// must be a set this CPU has, from [`Isa::detect`] or [`Isa::available`].
    pub(super) fn plan(win: &Window, c: usize, isa: Isa) -> Option<StemRows> {
        let g = win.flat(MAX_ROWS * MAX_KW)?;
        let l = isa.lanes();
        if (g.sw, g.dw) != (2, 1) || g.kw > MAX_KW || c == 0 || c * g.kh > MAX_ROWS || g.ow < l {
            return None;
        }
        let (lo, hi) = in_place(&g, l)?;
        Some(StemRows { isa, g, c, lo, hi })
    }

    /// `out` (`[M, oh * ow]`) = the convolution of `x` (`[c, h * w]`) with `w` (`[M, c,
    /// kh, kw]`) plus `bias` (`[M]`, or zeros), then `epilogue`. `parallel` splits the
    /// output rows across rayon's threads.
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
        let (plane, olen, ctaps) = (g.h * g.w, g.oh * g.ow, self.c * g.taps);
        let m = out.len() / olen;
        assert!(
            out.len() == m * olen
                && x.len() >= self.c * plane
                && w.len() >= m * ctaps
                && bias.is_none_or(|b| b.len() >= m),
            "stem conv: operands do not fit the window"
        );
        let y = SharedOut(out.as_mut_ptr());
        let rows = |r: std::ops::Range<usize>| {
            // The row of zeros a tap row outside the input reads: every in-place read
            // ends inside a row (`plan`), so `w` floats.
            with_scratch(g.w, |zeros: &mut [f32]| {
                zeros.fill(0.0);
                for oy in r {
                    // SAFETY: `y` is the `[m, oh * ow]` output (asserted), borrowed
                    // uniquely for the call, and each task writes only its own rows.
                    unsafe { self.row(x, w, bias, epilogue, zeros, oy, m, y) };
                }
            });
        };
        if parallel && g.oh > 1 {
            let tasks = (rayon::current_num_threads() * 2).min(g.oh);
            (0..tasks)
                .into_par_iter()
                .for_each(|t| rows(g.oh * t / tasks..g.oh * (t + 1) / tasks));
        } else {
            rows(0..g.oh);
        }
    }

    /// Output row `oy` of every channel.
    ///
    /// # Safety
    /// `y` points at the `[m, oh * ow]` output, whose row `oy` no other thread touches
    /// while this runs; `x`, `w` and `bias` are as [`StemRows::conv`] asserts; `zeros`
    /// is `w` zeros.
    #[allow(clippy::too_many_arguments)]
    unsafe fn row(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<Epilogue>,
        zeros: &[f32],
        oy: usize,
        m: usize,
        y: SharedOut,
    ) {
        let g = &self.g;
        let l = self.isa.lanes();
        let (plane, olen, ctaps) = (g.h * g.w, g.oh * g.ow, self.c * g.taps);
        // The row's tap rows, channel-major: the input's row, or the zeros outside it.
        let mut rows = [std::ptr::null::<f32>(); MAX_ROWS];
        for ci in 0..self.c {
            for a in 0..g.kh {
                let iy = (oy * g.sh + a * g.dh).wrapping_sub(g.pt);
                rows[ci * g.kh + a] = if iy < g.h {
                    x[ci * plane + iy * g.w..].as_ptr()
                } else {
                    zeros.as_ptr()
                };
            }
        }
        let rows = &rows[..self.c * g.kh];
        let zero_bias = [0.0f32; MB];
        for o0 in (0..m).step_by(MB) {
            let mb = (m - o0).min(MB);
            let tile = |v: usize, nv: usize| Tile {
                rows,
                col: (2 * v * l) as isize - g.pl as isize,
                width: g.w,
                w: w[o0 * ctaps..].as_ptr(),
                ctaps,
                kw: g.kw,
                bias: bias.map_or(&zero_bias[..mb], |b| &b[o0..o0 + mb]),
                epilogue,
                olen,
                n: (g.ow - v * l).min(nv * l),
            };
            let vectors = g.ow.div_ceil(l);
            let mut v = 0;
            while v < vectors {
                let masked = !(self.lo..self.hi).contains(&v);
                // Two in-place vectors at once where the registers hold their sums (each
                // weight broadcast then serves both).
                let nv = if !masked && v + 1 < self.hi && self.isa == Isa::Avx512 {
                    2
                } else {
                    1
                };
                // SAFETY: `self.isa` came from `Isa::detect` or `Isa::available` (see
                // `plan`); `mb` is 1..=MB; `nv` is 1, or 2 on AVX-512 and unmasked;
                // `n` spans `nv` vectors, the last maybe partly. Reads: unmasked
                // vectors are in place (`plan`; `v + nv <= hi`): every read from `col
                // >= 0` lies inside its row of `x` or of `zeros` (`w` floats each);
                // masked ones read only columns `0..w`. Weights: `mb` output channels
                // of `ctaps` from `o0` (`w` holds `m` of them, asserted by `conv`).
                // Writes: row `oy`, columns `v l ..` plus `n` (at most `ow`), of
                // channels `o0 .. o0 + mb`, this task's.
                unsafe {
                    let at = y.0.add(o0 * olen + oy * g.ow + v * l);
                    run(self.isa, mb, nv, masked, &tile(v, nv), at)
                };
                v += nv;
            }
        }
    }
}

/// One tile: `n` columns of an output row (`V = n.div_ceil(LANES)` vectors) for
/// `bias.len()` output channels (`olen` floats apart from where it stores), each the
/// bias plus, per tap row `r` and tap `b`, the channel's weight (`w[o ctaps + r kw +
/// b]`) times every other input from column `col + b` of `rows[r]`, `width` floats
/// wide.
struct Tile<'a> {
    rows: &'a [*const f32],
    col: isize,
    width: usize,
    w: *const f32,
    ctaps: usize,
    kw: usize,
    bias: &'a [f32],
    /// Applied to the sums in registers before they are stored.
    epilogue: Option<Epilogue>,
    olen: usize,
    n: usize,
}

/// Runs the kernel of `isa` for `mb` output channels and `nv` vectors, storing at
/// `out`; `masked`: the edge kernel (one vector), which reads only the columns inside
/// its rows.
///
/// # Safety
/// This CPU has `isa` (from [`Isa::detect`] or [`Isa::available`]); `mb` is `1..=MB`
/// and `t.bias.len() == mb`; `nv` is 1, or 2 when `isa` is AVX-512 and not `masked`;
/// `t.n` is in `(nv - 1) * LANES + 1 ..= nv * LANES`; each of `t.rows` is a row of
/// `t.width` readable floats, and, unless `masked`, every float a vector reads (`2 *
/// LANES` from `col + b + 2 v LANES` for each even tap `b < kw` and `v < nv`) lies
/// inside its row; `mb` output
/// channels of `t.ctaps` weights from `t.w` are readable (`t.rows.len() * t.kw <=
/// t.ctaps`); and for each channel `j < mb` the `t.n` floats at `out + j * t.olen` are
/// writable and alias no read.
unsafe fn run(isa: Isa, mb: usize, nv: usize, masked: bool, t: &Tile, out: *mut f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: each arm calls the kernel compiled for the set `isa` names, which this CPU
    // has (the contract); the rest is forwarded under the same terms.
    unsafe {
        match isa {
            Isa::Avx512 => x86::tile_avx512(mb, nv, masked, t, out),
            Isa::Avx2 => x86::tile_avx2(mb, masked, t, out),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, mb, nv, masked, t, out);
        unreachable!("Isa::detect finds no kernel on this architecture")
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::conv_dw_rows::columns_inside as inside;
    use super::{MAX_KW, MB, Tile};
    use crate::ops::simd::{Avx2, Avx512, Simd, compiled_for, store_rows};

    /// The tile of [`super::run`] for `N` output channels and `V` vectors; `MASKED`:
    /// the edge kernel.
    ///
    /// # Safety
    /// As [`super::run`]'s contract, on `S`'s set, with `N == t.bias.len()` and `V`
    /// its `nv`.
    #[inline(always)]
    unsafe fn tile<S: Simd, const N: usize, const V: usize, const MASKED: bool>(
        t: &Tile,
        out: *mut f32,
    ) {
        let l = S::LANES;
        // SAFETY: the set is this CPU's (the contract). Loads: `2 l` floats from column
        // `col + b + 2 v l` of each tap row for even `b < kw` and `v < V`. Unmasked,
        // every one lies inside the row (the contract; `col >= 0`); masked, only the
        // floats of columns `0..width` are read (`inside`), the row's own, and the
        // pointer to the others is formed wrapping and not read. Weights: `w + j ctaps
        // + r kw + b (+ 1)` for `j < N`, `r < rows.len()`, `b (+ 1) < kw`, inside the
        // contract's. Stores: the first `t.n` columns at `out + j olen`, vector `v`
        // covering `v l ..`.
        unsafe {
            // Plain loops, not `array::from_fn`: its closures are not compiled for the
            // set, and calls per vector made the kernel ten times slower.
            let mut acc = [[S::zero(); V]; N];
            for (s, &b) in acc.iter_mut().zip(t.bias) {
                *s = [S::splat(b); V];
            }
            // The edge kernel's mask per pair of taps, the same for every row: worked out
            // per row and tap, its arithmetic took longer than the FMAs.
            let mut masks = [0u64; MAX_KW / 2];
            if MASKED {
                for (k, m) in masks.iter_mut().enumerate().take(t.kw.div_ceil(2)) {
                    *m = inside(t.col + 2 * k as isize, t.width, 2 * l);
                }
            }
            for (r, &row) in t.rows.iter().enumerate() {
                let p = row.wrapping_offset(t.col);
                let wr = t.w.add(r * t.kw);
                for b in (0..t.kw).step_by(2) {
                    let mut pairs = [(S::zero(), S::zero()); V];
                    for (v, pv) in pairs.iter_mut().enumerate() {
                        *pv = match MASKED {
                            true => S::load_even_odd_mask(p.wrapping_add(b), masks[b / 2]),
                            false => S::load_even_odd(p.add(b + 2 * v * l)),
                        };
                    }
                    let pair = b + 1 < t.kw;
                    for (j, s) in acc.iter_mut().enumerate() {
                        let wj = wr.add(j * t.ctaps + b);
                        let w0 = S::splat(*wj);
                        for (s, &(even, _)) in s.iter_mut().zip(&pairs) {
                            *s = S::fma(w0, even, *s);
                        }
                        if pair {
                            let w1 = S::splat(*wj.add(1));
                            for (s, &(_, odd)) in s.iter_mut().zip(&pairs) {
                                *s = S::fma(w1, odd, *s);
                            }
                        }
                    }
                }
            }
            if let Some(e) = t.epilogue {
                e.tile::<S, N, V>(&mut acc);
            }
            store_rows::<S, N, V>(&acc, out, t.olen, t.n);
        }
    }

    /// The `tile::<S, N, V, MASKED>` of the run-time `mb`, `nv` and `masked`.
    ///
    /// # Safety
    /// As [`super::run`]'s contract, on `S`'s set.
    #[inline(always)]
    unsafe fn dispatch<S: Simd>(mb: usize, nv: usize, masked: bool, t: &Tile, out: *mut f32) {
        const { assert!(MB == 8) };
        macro_rules! each {
            ($($n:literal)*) => {
                match (mb, nv, masked) {
                    $(
                        ($n, 1, false) => tile::<S, $n, 1, false>(t, out),
                        ($n, 2, false) => tile::<S, $n, 2, false>(t, out),
                        ($n, 1, true) => tile::<S, $n, 1, true>(t, out),
                    )*
                    _ => unreachable!("tiles are 1 to 8 output channels of 1 or 2 vectors"),
                }
            };
        }
        // SAFETY: the arm run is the contract's kernel, on its terms.
        unsafe { each!(1 2 3 4 5 6 7 8) }
    }

    /// [`dispatch`] of one vector: AVX2's 16 registers hold no more sums.
    ///
    /// # Safety
    /// As [`super::run`]'s contract, on `S`'s set, with `nv` 1.
    #[inline(always)]
    unsafe fn one<S: Simd>(mb: usize, masked: bool, t: &Tile, out: *mut f32) {
        // SAFETY: the caller's terms, with one vector.
        unsafe { dispatch::<S>(mb, 1, masked, t, out) }
    }

    compiled_for!(tile_avx512 = dispatch::<Avx512>(mb: usize, nv: usize, masked: bool, t: &Tile, out: *mut f32));
    compiled_for!(tile_avx2 = one::<Avx2>(mb: usize, masked: bool, t: &Tile, out: *mut f32));
}

#[cfg(test)]
mod tests {
    use super::super::conv_direct::Direct;
    use super::super::conv_dw::tests::Case;
    use super::*;
    use crate::ops::testing::seeded as vals;

    /// The in-place kernel against conv_direct.rs's tile kernel (on its polyphase
    /// copies), which sums each output in the same order (the bias, then each input
    /// channel's taps row by row), so the bits are the same: MobileNet's stem (3 -> 8,
    /// 3x3/2 over 224 x 224), a ResNet-style 7x7/2 stem to 64 channels, output channel
    /// counts no block divides, 5x5 and an even 4-wide kernel, eight input channels (24
    /// rows), row strides and dilations, pads wider than the kernel reaches, odd sizes
    /// whose last vector reads past the row; every set, bias or not, three epilogues, one
    /// thread and several. Outputs start as NaN.
    #[test]
    fn stems_read_in_place_give_the_direct_kernels_bits() {
        // (input channels, output channels, image, kernel, strides, dilations, pads).
        let cases = [
            (3, 8, [224, 224], [3, 3], [2, 2], [1, 1], [1; 4]),
            (3, 64, [40, 70], [7, 7], [2, 2], [1, 1], [3; 4]),
            (3, 13, [33, 67], [5, 5], [2, 2], [1, 1], [2, 1, 2, 3]),
            (8, 10, [19, 75], [3, 3], [1, 2], [2, 1], [2, 1, 1, 0]),
            (2, 9, [21, 70], [3, 4], [3, 2], [1, 1], [4, 5, 3, 6]),
            (1, 3, [5, 40], [1, 3], [1, 2], [1, 1], [0, 1, 0, 1]),
        ];
        let epilogues = [
            None,
            Some(Epilogue::HardSwish),
            Some(Epilogue::LeakyRelu { alpha: 0.1 }),
        ];
        for isa in Isa::available() {
            for (c, m, hw, k, s, d, pads) in cases {
                let win = Case {
                    c,
                    hw,
                    k,
                    s,
                    d,
                    pads,
                }
                .window();
                let olen = win.output[1] * win.output[2];
                let taps = k[0] * k[1];
                let x = vals(c * hw[0] * hw[1], 1);
                let w = vals(m * c * taps, 2);
                let b = vals(m, 3);
                let stem = StemRows::plan(&win, c, isa).expect("the kernel takes the case");
                let direct = Direct::plan(&win, c, isa).unwrap();
                for bias in [None, Some(&b[..])] {
                    for e in epilogues {
                        let mut want = vec![f32::NAN; m * olen];
                        let mut padded = vec![f32::NAN; direct.scratch_len()];
                        direct.conv(&x, &w, bias, e, &mut padded, &mut want, false);
                        for parallel in [false, true] {
                            let mut got = vec![f32::NAN; m * olen];
                            stem.conv(&x, &w, bias, e, &mut got, parallel);
                            let bits =
                                |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                            assert_eq!(
                                bits(&got),
                                bits(&want),
                                "{isa:?} {c} -> {m} {hw:?} k {k:?} s {s:?} d {d:?} pads \
                                 {pads:?} bias {} {e:?} parallel {parallel}",
                                bias.is_some()
                            );
                        }
                    }
                }
            }
        }
    }

    /// Column strides other than 2, a column dilation, too many input rows per output
    /// row, too wide a kernel, output rows narrower than a vector and a 3-D window have
    /// no plan; a wide image reads all but its edge vectors in place.
    #[test]
    fn windows_it_does_not_take_have_no_plan() {
        let window = |hw, k, s, d| {
            Case {
                c: 1,
                hw,
                k,
                s,
                d,
                pads: [1; 4],
            }
            .window()
        };
        for isa in Isa::available() {
            let plan = |c, k, s, d| StemRows::plan(&window([40, 200], k, s, d), c, isa);
            assert!(plan(3, [3, 3], [2, 1], [1, 1]).is_none());
            assert!(plan(3, [3, 3], [2, 3], [1, 1]).is_none());
            assert!(plan(3, [3, 3], [2, 2], [1, 2]).is_none());
            assert!(plan(9, [3, 3], [2, 2], [1, 1]).is_none());
            assert!(plan(1, [3, 9], [2, 2], [1, 1]).is_none());
            assert!(plan(8, [3, 3], [2, 2], [1, 1]).is_some());
            let narrow = window([40, 2 * isa.lanes() - 4], [3, 3], [2, 2], [1, 1]);
            assert!(StemRows::plan(&narrow, 3, isa).is_none());
            let mut deep = window([40, 200], [3, 3], [2, 2], [1, 1]);
            (deep.input[0], deep.output[0]) = (2, 2);
            assert!(StemRows::plan(&deep, 3, isa).is_none());
            // 100 output columns: vector 0 reads column -1, the last whole ones end
            // inside the 200.
            let wide = plan(3, [3, 3], [2, 2], [1, 1]).unwrap();
            let vectors = 100usize.div_ceil(isa.lanes());
            assert_eq!(wide.lo, 1, "{isa:?}");
            assert!(wide.hi >= vectors - 2, "{isa:?}: {} of {vectors}", wide.hi);
        }
    }
}
