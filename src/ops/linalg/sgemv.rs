//! Matrix times a few vectors in float32, `y = A x` for a row-major A: each element of y
//! is one row's dot product with one vector.
//!
//! The first use is a recurrent layer's step at batch 1: the recurrent weight R [gates *
//! hidden, hidden] times the last hidden state. [`super::sgemm`] would take it as one row
//! of A (the state) times R^T as B, which needs R transposed first (a strided copy of the
//! whole weight on every call, slower than the steps it serves) and then reads B as k
//! strided rows. Here A is read as it is stored, front to back: one contiguous stream the
//! hardware prefetchers follow. Eight rows run at once, so eight independent FMA chains
//! are in flight and each vector of x is loaded once for the eight; each row's lanes are
//! added once at the end.
//!
//! The second is a convolution with few output positions (a speech model's encoder
//! downsampled to 1-4 frames, a squeeze-and-excitation block's 1x1 on a pooled 1x1
//! image): `[M, K]` weights times `n <= NARROW` windows of K inputs each. A GEMM's tile
//! spans 48 positions and a direct convolution's puts positions in the vector lanes, so
//! either computes 12 to 48 times the products asked for; the weights, which are the
//! whole cost (K x M floats read once, against n x K of input), stream through here
//! once, each vector of them multiplied into every window while it is in a register.
//!
//! An element's sum is the same sequence of operations whatever rows and vectors run
//! beside it, so its bits depend only on its row, its vector and the instruction set.

use crate::ops::simd::Isa;

/// Most vectors [`sgemm_narrow`] takes in one call.
pub const NARROW: usize = 16;
/// Most vectors one pass over A takes.
const PASS: usize = 8;

/// `y[i] = sum_j a[i * k + j] * x[j]` for every row `i < y.len()`.
///
/// Panics if `a` holds fewer than `y.len() * k` floats or `x` fewer than `k`: callers
/// size them from validated shapes, so that is an internal error.
pub fn sgemv(a: &[f32], k: usize, x: &[f32], y: &mut [f32]) {
    let rows = y.len();
    sgemm_narrow(a, (rows, k, 1), x, None, y, 1);
}

/// `y[i * ldy + j] = bias[i] + sum_c a[i * k + c] * x[j * k + c]` for rows `i < m` and
/// vectors `j < n`: A `[m, k]` and the `n` vectors `[n, k]` row-major, `n <= NARROW`.
/// Without `bias` the sums start from zero.
///
/// Panics if an operand is shorter than those shapes say, `n > NARROW` or `ldy < n`:
/// callers size them from validated shapes, so that is an internal error.
pub fn sgemm_narrow(
    a: &[f32],
    (m, k, n): (usize, usize, usize),
    x: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    ldy: usize,
) {
    assert!(
        n <= NARROW
            && ldy >= n
            && m.checked_mul(k).is_some_and(|len| len <= a.len())
            && x.len() >= n * k
            && (m == 0 || n == 0 || y.len() >= (m - 1) * ldy + n)
            && bias.is_none_or(|b| b.len() >= m),
        "sgemm_narrow: operands out of bounds"
    );
    if m == 0 || n == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = Isa::detect() {
        // Passes of at most `PASS` vectors, each streaming A again: the sums of more
        // than eight would not stay in registers. An element's bits are the same in
        // any pass.
        for j in (0..n).step_by(PASS) {
            let nj = (n - j).min(PASS);
            let (x, y) = (x[j * k..].as_ptr(), &mut y[j..]);
            // SAFETY: `Isa::detect` found `isa`; the operands hold what their shapes
            // say (asserted above), vectors `j .. j + nj` of x and columns `j .. j +
            // nj` of y inside them.
            unsafe {
                match isa {
                    Isa::Avx512 => {
                        x86::avx512(a.as_ptr(), (m, k, nj), x, bias, y.as_mut_ptr(), ldy)
                    }
                    Isa::Avx2 => x86::avx2(a.as_ptr(), (m, k, nj), x, bias, y.as_mut_ptr(), ldy),
                }
            }
        }
        return;
    }
    for i in 0..m {
        let row = &a[i * k..][..k];
        for j in 0..n {
            let dot: f32 = row.iter().zip(&x[j * k..][..k]).map(|(a, b)| a * b).sum();
            y[i * ldy + j] = bias.map_or(dot, |b| b[i] + dot);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::ops::simd::{Avx2, Avx512, Simd};

    /// `R` rows from `a` (`lda` floats apart) dotted with each of `N` vectors from `x`
    /// (`ldx` floats apart) over their first `len` floats, into `y[r * ldy + j]`: the
    /// row's bias plus the sum, or with `add` the sum added to what `y` holds.
    ///
    /// Why this shape: A streams once, and each vector of it is loaded once and
    /// multiplied into all `N` windows in registers (`R * N` independent FMA chains
    /// covering the FMA latency); the windows' `len` floats stay in L1 (see
    /// [`block_len`]), so reloading them per row group costs loads, not memory traffic.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `a + r * lda .. + len` and `x + j * ldx .. + len` are
    /// readable and `y + r * ldy + j` writable for `r < R`, `j < N`; `bias` (if any)
    /// holds `R`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn rows<S: Simd, const R: usize, const N: usize>(
        (a, lda): (*const f32, usize),
        (x, ldx): (*const f32, usize),
        len: usize,
        bias: Option<&[f32]>,
        add: bool,
        y: *mut f32,
        ldy: usize,
    ) {
        let full = len - len % S::LANES;
        // SAFETY: the caller's ranges and set; every load below reads inside row r's
        // `len` floats or vector j's (`c + LANES <= full <= len`, the tail only its
        // `len - full`).
        unsafe {
            let mut acc = [[S::zero(); N]; R];
            let mut c = 0;
            while c < full {
                let mut xv = [S::zero(); N];
                for (j, v) in xv.iter_mut().enumerate() {
                    *v = S::load(x.add(j * ldx + c));
                }
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = S::load(a.add(r * lda + c));
                    for (acc, &xv) in acc.iter_mut().zip(&xv) {
                        *acc = S::fma(av, xv, *acc);
                    }
                }
                c += S::LANES;
            }
            if full < len {
                let mut xv = [S::zero(); N];
                for (j, v) in xv.iter_mut().enumerate() {
                    *v = S::load_first(x.add(j * ldx + full), len - full);
                }
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = S::load_first(a.add(r * lda + full), len - full);
                    for (acc, &xv) in acc.iter_mut().zip(&xv) {
                        *acc = S::fma(av, xv, *acc);
                    }
                }
            }
            for (r, acc) in acc.into_iter().enumerate() {
                for (j, acc) in acc.into_iter().enumerate() {
                    let sum = S::hsum(acc);
                    let y = y.add(r * ldy + j);
                    *y = match (add, bias) {
                        (true, _) => *y + sum,
                        (false, Some(b)) => b[r] + sum,
                        (false, None) => sum,
                    };
                }
            }
        }
    }

    /// Floats of each row and vector one pass of [`narrow`] takes: as many as keep the
    /// `n` vectors' parts within 16 KB, half of L1, beside the streaming rows; a whole
    /// multiple of the vector width, so only the last pass has a tail.
    fn block_len<S: Simd>(n: usize) -> usize {
        ((4096 / n) / S::LANES * S::LANES).max(S::LANES)
    }

    /// Every row of A against `N` vectors, in passes over [`block_len`] floats of them
    /// (the first starts from the bias, each later one adds to what the one before
    /// stored): in each, `R` rows at a time, then one.
    ///
    /// # Safety
    /// As [`rows`], for all `m` rows and all `k` floats.
    #[inline(always)]
    unsafe fn narrow<S: Simd, const R: usize, const N: usize>(
        a: *const f32,
        (m, k): (usize, usize),
        x: *const f32,
        bias: Option<&[f32]>,
        y: *mut f32,
        ldy: usize,
    ) {
        let step = block_len::<S>(N);
        let mut c = 0;
        // SAFETY: rows `i .. i + R` (or `i`) are inside A's and y's `m` rows, floats
        // `c .. c + len` inside each row's and vector's `k`, and the bias slices inside
        // its `m`.
        unsafe {
            loop {
                let len = step.min(k - c);
                let (a, x, add) = (a.add(c), x.add(c), c > 0);
                let mut i = 0;
                while i + R <= m {
                    let b = bias.map(|b| &b[i..i + R]);
                    rows::<S, R, N>((a.add(i * k), k), (x, k), len, b, add, y.add(i * ldy), ldy);
                    i += R;
                }
                while i < m {
                    let b = bias.map(|b| &b[i..i + 1]);
                    rows::<S, 1, N>((a.add(i * k), k), (x, k), len, b, add, y.add(i * ldy), ldy);
                    i += 1;
                }
                c += len;
                if c >= k {
                    break;
                }
            }
        }
    }

    /// The kernel for `n` vectors: `R` rows per group, as many as keep `R * N` sums
    /// within 16 registers (eight for a single vector, the recurrent step's case).
    ///
    /// # Safety
    /// This CPU has `S`'s set; `1 <= n <= PASS`; the operands as [`rows`] says, for
    /// `m` rows.
    #[inline(always)]
    unsafe fn dispatch<S: Simd>(
        a: *const f32,
        (m, k, n): (usize, usize, usize),
        x: *const f32,
        bias: Option<&[f32]>,
        y: *mut f32,
        ldy: usize,
    ) {
        let mk = (m, k);
        // SAFETY: the caller's.
        unsafe {
            match n {
                1 => narrow::<S, 8, 1>(a, mk, x, bias, y, ldy),
                2 => narrow::<S, 8, 2>(a, mk, x, bias, y, ldy),
                3 => narrow::<S, 5, 3>(a, mk, x, bias, y, ldy),
                4 => narrow::<S, 4, 4>(a, mk, x, bias, y, ldy),
                5 => narrow::<S, 3, 5>(a, mk, x, bias, y, ldy),
                6 => narrow::<S, 2, 6>(a, mk, x, bias, y, ldy),
                7 => narrow::<S, 2, 7>(a, mk, x, bias, y, ldy),
                _ => narrow::<S, 2, 8>(a, mk, x, bias, y, ldy),
            }
        }
    }

    crate::ops::simd::compiled_for!(avx512 = dispatch::<Avx512>(a: *const f32, mkn: (usize, usize, usize), x: *const f32, bias: Option<&[f32]>, y: *mut f32, ldy: usize));
    crate::ops::simd::compiled_for!(avx2 = dispatch::<Avx2>(a: *const f32, mkn: (usize, usize, usize), x: *const f32, bias: Option<&[f32]>, y: *mut f32, ldy: usize));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// Every row against a float64 dot product, over row counts around the group of
    /// eight and k around the vector widths (remainders of every size).
    #[test]
    fn rows_match_a_float64_dot_product() {
        for rows in [1, 7, 8, 9, 17, 33] {
            for k in [1, 3, 8, 15, 16, 17, 31, 64, 100, 128, 130] {
                let a = values(rows * k, 3);
                let x = values(k, 5);
                // Poisoned: every element must be written.
                let mut y = vec![f32::NAN; rows];
                sgemv(&a, k, &x, &mut y);
                for (i, &got) in y.iter().enumerate() {
                    let want: f64 = a[i * k..][..k]
                        .iter()
                        .zip(&x)
                        .map(|(&a, &b)| f64::from(a) * f64::from(b))
                        .sum();
                    let bound = 1e-6 * (k as f64) * 2.0;
                    assert!(
                        (f64::from(got) - want).abs() <= bound,
                        "rows {rows} k {k} row {i}: {got} vs {want}"
                    );
                }
            }
        }
    }

    /// A row's bits do not depend on the rows around it (grouped or alone).
    #[test]
    fn a_row_has_the_same_bits_in_a_group_or_alone() {
        let (rows, k) = (19, 77);
        let a = values(rows * k, 7);
        let x = values(k, 9);
        let mut all = vec![0.0; rows];
        sgemv(&a, k, &x, &mut all);
        for i in 0..rows {
            let mut one = [0.0];
            sgemv(&a[i * k..][..k], k, &x, &mut one);
            assert_eq!(one[0].to_bits(), all[i].to_bits(), "row {i}");
        }
    }

    /// Every element of every vector count against a float64 dot product plus the
    /// bias, over row counts around each kernel's group and k around the vector widths;
    /// the output's stride leaves gaps that must stay as they were.
    #[test]
    fn narrow_products_match_a_float64_reference() {
        for n in 1..=NARROW {
            for rows in [1, 2, 3, 5, 8, 9, 17] {
                for k in [1, 7, 16, 17, 33, 129] {
                    let a = values(rows * k, 11);
                    let x = values(n * k, 13);
                    let bias = values(rows, 17);
                    let ldy = n + 2;
                    // Poisoned: every element must be written, and no gap.
                    let mut y = vec![f32::NAN; rows * ldy];
                    sgemm_narrow(&a, (rows, k, n), &x, Some(&bias), &mut y, ldy);
                    for i in 0..rows {
                        for j in 0..ldy {
                            let got = y[i * ldy + j];
                            if j >= n {
                                assert!(got.is_nan(), "n {n} rows {rows} k {k}: gap written");
                                continue;
                            }
                            let dot: f64 = a[i * k..][..k]
                                .iter()
                                .zip(&x[j * k..][..k])
                                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                                .sum();
                            let want = dot + f64::from(bias[i]);
                            assert!(
                                (f64::from(got) - want).abs() <= 2e-6 * (k as f64 + 1.0),
                                "n {n} rows {rows} k {k} ({i}, {j}): {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// An element's bits do not depend on the rows or vectors computed beside it, so
    /// a product split across threads by rows, or into calls of fewer vectors, has the
    /// whole one's bits; one vector without bias is `sgemv`'s.
    #[test]
    fn a_narrow_element_has_the_same_bits_in_any_company() {
        let (rows, k, n) = (13, 70, 7);
        let a = values(rows * k, 19);
        let x = values(n * k, 23);
        let bias = values(rows, 29);
        let mut all = vec![0.0; rows * n];
        sgemm_narrow(&a, (rows, k, n), &x, Some(&bias), &mut all, n);
        for i in 0..rows {
            for j in 0..n {
                let mut one = [0.0];
                let (a, x) = (&a[i * k..][..k], &x[j * k..][..k]);
                sgemm_narrow(a, (1, k, 1), x, Some(&bias[i..]), &mut one, 1);
                assert_eq!(one[0].to_bits(), all[i * n + j].to_bits(), "({i}, {j})");
            }
        }
        let mut plain = vec![0.0; rows * n];
        sgemm_narrow(&a, (rows, k, n), &x, None, &mut plain, n);
        let mut gemv = vec![0.0; rows];
        sgemv(&a, k, &x[2 * k..], &mut gemv);
        for i in 0..rows {
            assert_eq!(gemv[i].to_bits(), plain[i * n + 2].to_bits(), "row {i}");
        }
    }
}
