//! Matrix times vector in float32, `y = A x` for a row-major A: each element of y is
//! one row's dot product with x.
//!
//! This is a recurrent layer's step at batch 1: the recurrent weight R [gates * hidden,
//! hidden] times the last hidden state. [`super::sgemm`] would take it as one row of A
//! (the state) times R^T as B, which needs R transposed first (a strided copy of the
//! whole weight on every call, slower than the steps it serves) and then reads B as
//! k strided rows. Here A is read as it is stored, front to back: one contiguous stream
//! the hardware prefetchers follow. Eight rows run at once, so eight independent FMA
//! chains are in flight and each vector of x is loaded once for the eight; each row's
//! lanes are added once at the end.
//!
//! A row's sum is the same sequence of operations whether it runs in a group of eight
//! or alone, so its bits depend only on the row, x and the instruction set.

use crate::ops::simd::Isa;

/// `y[i] = sum_j a[i * k + j] * x[j]` for every row `i < y.len()`.
///
/// Panics if `a` holds fewer than `y.len() * k` floats or `x` fewer than `k`: callers
/// size them from validated shapes, so that is an internal error.
pub fn sgemv(a: &[f32], k: usize, x: &[f32], y: &mut [f32]) {
    let rows = y.len();
    assert!(
        rows.checked_mul(k).is_some_and(|n| n <= a.len()) && x.len() >= k,
        "sgemv: operands out of bounds"
    );
    #[cfg(target_arch = "x86_64")]
    match Isa::detect() {
        // SAFETY: `Isa::detect` found AVX-512F; `a` holds `rows * k` floats, `x` k and
        // `y` rows (asserted above).
        Some(Isa::Avx512) => return unsafe { x86::avx512(a.as_ptr(), k, x.as_ptr(), y) },
        // SAFETY: as above, for AVX2 and FMA.
        Some(Isa::Avx2) => return unsafe { x86::avx2(a.as_ptr(), k, x.as_ptr(), y) },
        None => {}
    }
    for (i, out) in y.iter_mut().enumerate() {
        *out = a[i * k..][..k]
            .iter()
            .zip(&x[..k])
            .map(|(a, b)| a * b)
            .sum();
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::ops::simd::{Avx2, Avx512, Simd};

    /// Rows computed together: eight FMA chains cover the FMA latency on both sets,
    /// and eight accumulators plus x and the loads fit AVX2's 16 registers.
    const GROUP: usize = 8;

    /// `R` rows from `a` (k floats apart) dotted with x, into `y[0..R]`.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `a .. a + R * k` and `x .. x + k` are readable and
    /// `y .. y + R` writable.
    #[inline(always)]
    unsafe fn rows<S: Simd, const R: usize>(a: *const f32, k: usize, x: *const f32, y: *mut f32) {
        let full = k - k % S::LANES;
        // SAFETY: the caller's ranges and set; every load below reads inside row r's k
        // floats (`c + LANES <= full <= k`, the tail only its `k - full`) or x's k.
        unsafe {
            let mut acc = [S::zero(); R];
            let mut c = 0;
            while c < full {
                let xv = S::load(x.add(c));
                for (r, acc) in acc.iter_mut().enumerate() {
                    *acc = S::fma(S::load(a.add(r * k + c)), xv, *acc);
                }
                c += S::LANES;
            }
            if full < k {
                let xv = S::load_first(x.add(full), k - full);
                for (r, acc) in acc.iter_mut().enumerate() {
                    *acc = S::fma(S::load_first(a.add(r * k + full), k - full), xv, *acc);
                }
            }
            for (r, acc) in acc.into_iter().enumerate() {
                *y.add(r) = S::hsum(acc);
            }
        }
    }

    /// # Safety
    /// This CPU has `S`'s set; `a` holds `y.len() * k` floats and `x` k.
    #[inline(always)]
    unsafe fn gemv<S: Simd>(a: *const f32, k: usize, x: *const f32, y: &mut [f32]) {
        let n = y.len();
        let y = y.as_mut_ptr();
        let mut i = 0;
        // SAFETY: rows `i .. i + GROUP` (or `i`) are inside A's `n` rows and y's `n`
        // floats.
        unsafe {
            while i + GROUP <= n {
                rows::<S, GROUP>(a.add(i * k), k, x, y.add(i));
                i += GROUP;
            }
            while i < n {
                rows::<S, 1>(a.add(i * k), k, x, y.add(i));
                i += 1;
            }
        }
    }

    /// # Safety
    /// This CPU has AVX-512F; `a` holds `y.len() * k` floats and `x` k.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512(a: *const f32, k: usize, x: *const f32, y: &mut [f32]) {
        // SAFETY: the caller's.
        unsafe { gemv::<Avx512>(a, k, x, y) }
    }

    /// # Safety
    /// This CPU has AVX2 and FMA; `a` holds `y.len() * k` floats and `x` k.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2(a: *const f32, k: usize, x: *const f32, y: &mut [f32]) {
        // SAFETY: the caller's.
        unsafe { gemv::<Avx2>(a, k, x, y) }
    }
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
}
