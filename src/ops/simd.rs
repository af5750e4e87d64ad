//! The instruction sets rt2's hand-written float32 micro-kernels (the direct convolution,
//! the GEMM) run on, found at run time ([`Isa`]), and on x86-64 the few vector operations
//! they use, once per set. A kernel is written once, generic over `Simd`, and
//! instantiated inside a function compiled for the set (`#[target_feature]`), where the
//! `#[inline(always)]` methods and their intrinsics inline into straight vector code.

/// An instruction set the micro-kernels have a version for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512F.
    Avx512,
    /// AVX2 with FMA.
    Avx2,
}

impl Isa {
    /// The best set this CPU has, found once; `None` on other CPUs and architectures.
    pub(crate) fn detect() -> Option<Isa> {
        static BEST: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| Isa::available().first().copied())
    }

    /// Every set this CPU has, best first (tests run each).
    pub(crate) fn available() -> Vec<Isa> {
        let mut v = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                v.push(Isa::Avx512);
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                v.push(Isa::Avx2);
            }
        }
        v
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2, Avx512, Simd};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// float32 vectors of one instruction set.
    pub(crate) trait Simd {
        /// Floats per vector.
        const LANES: usize;
        type V: Copy;
        unsafe fn zero() -> Self::V;
        /// An unaligned load of `LANES` floats.
        unsafe fn load(p: *const f32) -> Self::V;
        unsafe fn splat(v: f32) -> Self::V;
        /// `a * b + c`, rounded once.
        unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
        unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
        /// An unaligned store of `LANES` floats.
        unsafe fn store(p: *mut f32, v: Self::V);
    }

    /// AVX-512F: 16 floats, 32 registers.
    pub(crate) struct Avx512;

    impl Simd for Avx512 {
        const LANES: usize = 16;
        type V = __m512;
        #[inline(always)]
        unsafe fn zero() -> __m512 {
            unsafe { _mm512_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> __m512 {
            unsafe { _mm512_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> __m512 {
            unsafe { _mm512_set1_ps(v) }
        }
        #[inline(always)]
        unsafe fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
            unsafe { _mm512_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        unsafe fn mul(a: __m512, b: __m512) -> __m512 {
            unsafe { _mm512_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: __m512) {
            unsafe { _mm512_storeu_ps(p, v) }
        }
    }

    /// AVX2 with FMA: 8 floats, 16 registers.
    pub(crate) struct Avx2;

    impl Simd for Avx2 {
        const LANES: usize = 8;
        type V = __m256;
        #[inline(always)]
        unsafe fn zero() -> __m256 {
            unsafe { _mm256_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> __m256 {
            unsafe { _mm256_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> __m256 {
            unsafe { _mm256_set1_ps(v) }
        }
        #[inline(always)]
        unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
            unsafe { _mm256_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        unsafe fn mul(a: __m256, b: __m256) -> __m256 {
            unsafe { _mm256_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: __m256) {
            unsafe { _mm256_storeu_ps(p, v) }
        }
    }
}
