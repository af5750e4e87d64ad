//! The NCHW <-> NC1HWC0 slab transposes for 2- and 4-byte elements in SSE2 registers
//! (part of the x86-64 baseline, so no runtime detection).
//!
//! Why the loop is shaped this way. A slab is a `[C0, HW]` panel (C0 channel planes) that
//! becomes `[HW, C0]`. One element per iteration means one 2- or 4-byte strided access per
//! element, which at 2 bytes an element is a quarter of what memory can take. Here the
//! panel is cut into square blocks of `L` channels by `L` positions, `L` = 16 bytes / the
//! element size (8x8 for u16, 4x4 for u32): `L` 16-byte loads (one per channel plane, at
//! the same positions), a register transpose by `unpacklo/hi` (3 rounds for 8x8, 2 for
//! 4x4), `L` 16-byte stores (one per position, at the same channels). Blocks are walked
//! positions-outer, channels-inner, so the destination of a group of `L` positions
//! (`L * C0` elements, 256 bytes at C0 = 16) is written completely before the next, and each
//! source plane is read 16 bytes at a time in order: both sides stream, and the `C0` open
//! source lines (1 KiB) stay in L1 without any further tiling. Padding channels (`rows..C0`)
//! load as zero registers, so the zeros are written by the same stores. The last `HW % L`
//! positions are moved element by element. Indexing is by safe, bounds-checked slices of
//! exactly 16 bytes; the only `unsafe` is the unaligned load and store of such an array.

use core::arch::x86_64::{
    __m128i, _mm_loadu_si128, _mm_setzero_si128, _mm_storeu_si128, _mm_unpackhi_epi16,
    _mm_unpackhi_epi32, _mm_unpackhi_epi64, _mm_unpacklo_epi16, _mm_unpacklo_epi32,
    _mm_unpacklo_epi64,
};

/// Whether [`slab`] takes elements of `n` bytes with this `c0`.
pub(super) fn handles(n: usize, c0: usize) -> bool {
    (n == 2 && c0.is_multiple_of(8)) || (n == 4 && c0.is_multiple_of(4))
}

/// One (n, c1) block, as bytes of `n`-byte elements. Into NC1HWC0 (`into`): `src` holds
/// `rows` channel planes of `hw` elements, `out` is the `[hw, c0]` block, channels
/// `rows..c0` written as zeros. Back: `src` is the `[hw, c0]` block, `out` its `rows`
/// channel planes. Requires [`handles`]`(n, c0)`.
pub(super) fn slab(
    n: usize,
    into: bool,
    src: &[u8],
    (hw, rows, c0): (usize, usize, usize),
    out: &mut [u8],
) {
    // SAFETY: the only requirement of these safe functions is the `sse2` target feature,
    // which is part of the x86-64 baseline: every x86-64 CPU has it and every x86_64 rustc
    // target enables it.
    unsafe {
        match (n, into) {
            (2, true) => to_blocked_l::<8>(src, hw, rows, c0, out),
            (_, true) => to_blocked_l::<4>(src, hw, rows, c0, out),
            (2, false) => from_blocked_l::<8>(src, hw, rows, c0, out),
            (_, false) => from_blocked_l::<4>(src, hw, rows, c0, out),
        }
    }
}

/// [`slab`] into NC1HWC0 with `L` elements of `16 / L` bytes to a register.
///
/// # Safety
///
/// The CPU has SSE2, as every x86-64 CPU does.
#[target_feature(enable = "sse2")]
#[inline]
fn to_blocked_l<const L: usize>(plane: &[u8], hw: usize, rows: usize, c0: usize, out: &mut [u8]) {
    let n = 16 / L;
    let main = hw - hw % L;
    let row = hw * n;
    let position = c0 * n;
    for (p, dst) in (0..main).step_by(L).zip(out.chunks_exact_mut(L * position)) {
        for g in (0..c0).step_by(L) {
            let mut v = [_mm_setzero_si128(); L];
            for (i, v) in v.iter_mut().enumerate().take(rows.saturating_sub(g)) {
                *v = load(&plane[(g + i) * row + p * n..]);
            }
            transpose(&mut v);
            for (i, v) in v.iter().enumerate() {
                store(&mut dst[i * position + g * n..], *v);
            }
        }
    }
    for p in main..hw {
        let dst = &mut out[p * position..][..position];
        for (c, slot) in dst.chunks_exact_mut(n).enumerate() {
            if c < rows {
                slot.copy_from_slice(&plane[c * row + p * n..][..n]);
            } else {
                slot.fill(0);
            }
        }
    }
}

/// [`slab`] back from NC1HWC0 with `L` elements of `16 / L` bytes to a register.
///
/// # Safety
///
/// The CPU has SSE2, as every x86-64 CPU does.
#[target_feature(enable = "sse2")]
#[inline]
fn from_blocked_l<const L: usize>(slab: &[u8], hw: usize, rows: usize, c0: usize, out: &mut [u8]) {
    let n = 16 / L;
    let main = hw - hw % L;
    let row = hw * n;
    let position = c0 * n;
    for (p, src) in (0..main).step_by(L).zip(slab.chunks_exact(L * position)) {
        // Only the groups holding real channels: the padding is never read back.
        for g in (0..rows).step_by(L) {
            let mut v = [_mm_setzero_si128(); L];
            for (i, v) in v.iter_mut().enumerate() {
                *v = load(&src[i * position + g * n..]);
            }
            transpose(&mut v);
            for (i, v) in v.iter().enumerate().take(rows - g) {
                store(&mut out[(g + i) * row + p * n..], *v);
            }
        }
    }
    for p in main..hw {
        let src = &slab[p * position..][..position];
        for (c, v) in src.chunks_exact(n).take(rows).enumerate() {
            out[c * row + p * n..][..n].copy_from_slice(v);
        }
    }
}

/// Transposes the `L` x `L` block in `r` (8 u16 or 4 u32 to a register).
///
/// # Safety
///
/// The CPU has SSE2, as every x86-64 CPU does.
#[target_feature(enable = "sse2")]
#[inline]
fn transpose<const L: usize>(r: &mut [__m128i; L]) {
    match r.as_mut_slice() {
        r8 @ [_, _, _, _, _, _, _, _] => transpose_8x8_u16(r8.try_into().expect("8 rows")),
        r4 => transpose_4x4_u32(r4.try_into().expect("4 rows")),
    }
}

/// The first 16 bytes of `at` (panics when shorter).
///
/// # Safety
///
/// The CPU has SSE2, as every x86-64 CPU does.
#[target_feature(enable = "sse2")]
#[inline]
fn load(at: &[u8]) -> __m128i {
    let bytes: &[u8; 16] = at[..16].try_into().expect("16 bytes");
    // SAFETY: `bytes` is a reference to exactly 16 readable bytes, and `_mm_loadu_si128`
    // reads 16 bytes with no alignment requirement; SSE2 is in the x86-64 baseline.
    unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
}

/// `v` into the first 16 bytes of `at` (panics when shorter).
///
/// # Safety
///
/// The CPU has SSE2, as every x86-64 CPU does.
#[target_feature(enable = "sse2")]
#[inline]
fn store(at: &mut [u8], v: __m128i) {
    let bytes: &mut [u8; 16] = (&mut at[..16]).try_into().expect("16 bytes");
    // SAFETY: `bytes` is an exclusive reference to exactly 16 writable bytes, and
    // `_mm_storeu_si128` writes 16 bytes with no alignment requirement; SSE2 is in the
    // x86-64 baseline.
    unsafe { _mm_storeu_si128(bytes.as_mut_ptr().cast(), v) }
}

/// Transposes 8 rows of 8 u16 in place: interleave 16-bit, then 32-bit, then 64-bit halves.
///
/// # Safety
///
/// The CPU has SSE2, as every x86-64 CPU does.
#[target_feature(enable = "sse2")]
#[inline]
fn transpose_8x8_u16(r: &mut [__m128i; 8]) {
    let a = [
        _mm_unpacklo_epi16(r[0], r[1]),
        _mm_unpackhi_epi16(r[0], r[1]),
        _mm_unpacklo_epi16(r[2], r[3]),
        _mm_unpackhi_epi16(r[2], r[3]),
        _mm_unpacklo_epi16(r[4], r[5]),
        _mm_unpackhi_epi16(r[4], r[5]),
        _mm_unpacklo_epi16(r[6], r[7]),
        _mm_unpackhi_epi16(r[6], r[7]),
    ];
    // b[0]: columns 0-1 of rows 0-3, b[1]: columns 2-3, b[2]: 4-5, b[3]: 6-7; b[4..]: rows 4-7.
    let b = [
        _mm_unpacklo_epi32(a[0], a[2]),
        _mm_unpackhi_epi32(a[0], a[2]),
        _mm_unpacklo_epi32(a[1], a[3]),
        _mm_unpackhi_epi32(a[1], a[3]),
        _mm_unpacklo_epi32(a[4], a[6]),
        _mm_unpackhi_epi32(a[4], a[6]),
        _mm_unpacklo_epi32(a[5], a[7]),
        _mm_unpackhi_epi32(a[5], a[7]),
    ];
    for k in 0..4 {
        r[2 * k] = _mm_unpacklo_epi64(b[k], b[k + 4]);
        r[2 * k + 1] = _mm_unpackhi_epi64(b[k], b[k + 4]);
    }
}

/// Transposes 4 rows of 4 u32 in place: interleave 32-bit, then 64-bit halves.
///
/// # Safety
///
/// The CPU has SSE2, as every x86-64 CPU does.
#[target_feature(enable = "sse2")]
#[inline]
fn transpose_4x4_u32(r: &mut [__m128i; 4]) {
    // a[0]: columns 0-1 of rows 0-1, a[1]: columns 2-3 of rows 0-1; a[2], a[3]: rows 2-3.
    let a = [
        _mm_unpacklo_epi32(r[0], r[1]),
        _mm_unpackhi_epi32(r[0], r[1]),
        _mm_unpacklo_epi32(r[2], r[3]),
        _mm_unpackhi_epi32(r[2], r[3]),
    ];
    r[0] = _mm_unpacklo_epi64(a[0], a[2]);
    r[1] = _mm_unpackhi_epi64(a[0], a[2]);
    r[2] = _mm_unpacklo_epi64(a[1], a[3]);
    r[3] = _mm_unpackhi_epi64(a[1], a[3]);
}
