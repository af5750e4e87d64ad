//! The instruction sets rt2's hand-written float32 micro-kernels (the direct convolution,
//! the GEMM) run on, found at run time ([`Isa`]), and on x86-64 the few vector operations
//! they use, once per set. A kernel is written once, generic over `Simd`, and
//! instantiated inside a function compiled for the set (`#[target_feature]`), where the
//! `#[inline(always)]` methods and their intrinsics inline into straight vector code.

/// An instruction set the micro-kernels have a version for.
///
/// The kernels' `unsafe` entry points take an `Isa` as the evidence that this CPU has the
/// set: every value they are given comes from [`Isa::detect`] or [`Isa::available`],
/// which test for it at run time.
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

    /// Floats per vector of the set.
    pub(crate) fn lanes(self) -> usize {
        match self {
            Isa::Avx512 => 16,
            Isa::Avx2 => 8,
        }
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

/// `fn $name<G, ...>(args) -> R where [bounds] => $f` defines `$name`, which calls `$f`
/// compiled for the best instruction set found (generics, return type and bounds
/// optional). `$f` must be an `#[inline(always)]` function whose body is safe code; the
/// wrappers only widen the vectors the compiler may use (the loop vectorizer's plain
/// loops: reductions over fixed running lanes, maps, which the baseline x86-64 target
/// keeps to SSE2). Each version, the baseline's too, is a call of its own, never
/// inlined, so its slice parameters are `noalias` there: a store through a `&mut` slice
/// cannot change what a closure argument captured, which keeps the captures in
/// registers and lets maps and reductions over closures vectorize.
macro_rules! per_isa {
    ($(#[$doc:meta])* $vis:vis fn $name:ident $(<$($g:ident),*>)? ($($a:ident: $t:ty),* $(,)?)
        $(-> $ret:ty)? $(where [$($w:tt)*])? => $f:ident) => {
        $(#[$doc])*
        $vis fn $name $(<$($g),*>)? ($($a: $t),*) $(-> $ret)? $(where $($w)*)? {
            /// `$f` compiled for AVX-512F.
            ///
            /// # Safety
            /// This CPU has AVX-512F.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f")]
            unsafe fn wide $(<$($g),*>)? ($($a: $t),*) $(-> $ret)? $(where $($w)*)? {
                $f($($a),*)
            }
            /// `$f` compiled for AVX2.
            ///
            /// # Safety
            /// This CPU has AVX2.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            unsafe fn avx2 $(<$($g),*>)? ($($a: $t),*) $(-> $ret)? $(where $($w)*)? {
                $f($($a),*)
            }
            /// `$f` on the baseline target, a call of its own as the others are.
            #[inline(never)]
            fn plain $(<$($g),*>)? ($($a: $t),*) $(-> $ret)? $(where $($w)*)? {
                $f($($a),*)
            }
            #[cfg(target_arch = "x86_64")]
            match $crate::ops::simd::Isa::detect() {
                // SAFETY: `Isa::detect` found AVX-512F on this CPU, all `wide` needs.
                Some($crate::ops::simd::Isa::Avx512) => return unsafe { wide($($a),*) },
                // SAFETY: `Isa::detect` found AVX2 on this CPU, all `avx2` needs.
                Some($crate::ops::simd::Isa::Avx2) => return unsafe { avx2($($a),*) },
                None => {}
            }
            plain($($a),*)
        }
    };
}

pub(crate) use per_isa;

/// Running accumulators of [`lane_fold`].
pub(crate) const FOLD_LANES: usize = 16;

/// `x` folded with `f` from `id`, `f`'s identity, in [`FOLD_LANES`] running accumulators
/// (the `k`-th taking every element at `k` modulo the lanes), the tail in one more, then
/// the lanes joined into that one in order, `join(joined, lane)`. The lanes are
/// independent chains the vectorizer spreads over a vector of any width, where a plain
/// fold is one chain of dependent operations, a latency per element; their order is
/// fixed, so the bits do not depend on the CPU. The loop of a reduction or a norm's
/// moments, inside a [`per_isa!`] function.
#[inline(always)]
pub(crate) fn lane_fold<T: Copy, A: Copy>(
    x: &[T],
    id: A,
    f: impl Fn(A, T) -> A,
    join: impl Fn(A, A) -> A,
) -> A {
    let (body, tail) = x.split_at(x.len() - x.len() % FOLD_LANES);
    let mut lanes = [id; FOLD_LANES];
    for c in body.chunks_exact(FOLD_LANES) {
        for (a, &v) in lanes.iter_mut().zip(c) {
            *a = f(*a, v);
        }
    }
    let rest = tail.iter().fold(id, |a, &v| f(a, v));
    lanes.into_iter().fold(rest, join)
}

/// `pub(super) unsafe fn $name($args)`: `$body::<$set>($args)` (or `$body::<$set,
/// $generics...>`) compiled for `$set` (`Avx512` or `Avx2`), the entry point of a kernel
/// written once, generic over [`Simd`]:
/// its `#[inline(always)]` methods and their intrinsics inline only into a function
/// built with the set's target feature. The wrapper's contract is `$body`'s, on a CPU
/// with the set.
#[cfg(target_arch = "x86_64")]
macro_rules! compiled_for {
    ($name:ident = $body:ident::<Avx512 $(, $g:tt)*>($($a:ident: $t:ty),*)) => {
        $crate::ops::simd::compiled_for!(@wrap "avx512f", "AVX-512F", $name, $body, [Avx512 $(, $g)*], $($a: $t),*);
    };
    ($name:ident = $body:ident::<Avx2 $(, $g:tt)*>($($a:ident: $t:ty),*)) => {
        $crate::ops::simd::compiled_for!(@wrap "avx2,fma", "AVX2 and FMA", $name, $body, [Avx2 $(, $g)*], $($a: $t),*);
    };
    (@wrap $feature:literal, $set_name:literal, $name:ident, $body:ident, [$($g:tt)*], $($a:ident: $t:ty),*) => {
        #[doc = concat!("[`", stringify!($body), "`] compiled for ", $set_name, ".")]
        ///
        /// # Safety
        #[doc = concat!("As [`", stringify!($body), "`]'s, on a CPU with ", $set_name, ".")]
        #[target_feature(enable = $feature)]
        #[allow(clippy::too_many_arguments)] // the kernel's own arguments, forwarded
        pub(super) unsafe fn $name($($a: $t),*) {
            // SAFETY: the caller's terms, the set included.
            unsafe { $body::<$($g)*>($($a),*) }
        }
    };
}
#[cfg(target_arch = "x86_64")]
pub(crate) use compiled_for;

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2, Avx512, Simd, store_rows, transpose};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// float32 vectors of one instruction set.
    ///
    /// # Safety
    /// An implementation promises that `V` holds exactly `LANES` floats, that `load`
    /// reads and `store` writes exactly the `LANES` floats from `p` on (`store_first`
    /// the first `n`) and no other memory, with no alignment required, and that its methods use no instruction
    /// outside the set its type names (`Avx512`: AVX-512F; `Avx2`: AVX2 and FMA). The
    /// kernels size their bounds from `LANES` and rely on this.
    ///
    /// Every method is `unsafe` to call: the caller ensures that this CPU has the set,
    /// holding an [`Isa`](super::Isa) for it from `Isa::detect` or `Isa::available`.
    /// For vector code the methods should be called from a function compiled with that
    /// set's `#[target_feature]`, where their `#[inline(always)]` bodies inline; that is
    /// for speed, not soundness.
    pub(crate) unsafe trait Simd {
        /// Floats per vector.
        const LANES: usize;
        type V: Copy;
        /// All lanes zero.
        ///
        /// # Safety
        /// This CPU has the set (see the trait).
        unsafe fn zero() -> Self::V;
        /// An unaligned load of `LANES` floats.
        ///
        /// # Safety
        /// This CPU has the set, and `p .. p + LANES` is valid for reads (any alignment).
        unsafe fn load(p: *const f32) -> Self::V;
        /// Every lane `v`.
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn splat(v: f32) -> Self::V;
        /// `a * b + c`, rounded once.
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
        /// `a * b`, lane by lane.
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
        /// `a + b`, lane by lane.
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
        /// `a - b`, lane by lane.
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
        /// The lanes of `a` and `b` alternating, `a0 b0 a1 b1 ...`, as two vectors: the
        /// first `LANES` of that sequence, then the rest.
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn interleave(a: Self::V, b: Self::V) -> (Self::V, Self::V);
        /// `a > b ? a : b`, lane by lane (x86's `max`: `b` when either is NaN, and
        /// of two zeros).
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
        /// `a < b ? a : b`, lane by lane (x86's `min`: `b` when either is NaN, and
        /// of two zeros).
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn min(a: Self::V, b: Self::V) -> Self::V;
        /// `a < b ? t : f`, lane by lane (an ordered compare: false with a NaN).
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn select_lt(a: Self::V, b: Self::V, t: Self::V, f: Self::V) -> Self::V;
        /// An unaligned store of `LANES` floats.
        ///
        /// # Safety
        /// This CPU has the set, and `p .. p + LANES` is valid for writes (any alignment)
        /// with no live reference to those floats.
        unsafe fn store(p: *mut f32, v: Self::V);
        /// Stores the first `n` lanes of `v` at `p` and touches no memory past them.
        ///
        /// # Safety
        /// This CPU has the set, `n <= LANES`, and `p .. p + n` is valid for writes (any
        /// alignment) with no live reference to those floats.
        unsafe fn store_first(p: *mut f32, v: Self::V, n: usize);
        /// The first `n` floats from `p` in the low lanes, the other lanes zero; reads
        /// (and faults on) no memory past them.
        ///
        /// # Safety
        /// This CPU has the set, `n <= LANES`, and `p .. p + n` is valid for reads (any
        /// alignment).
        unsafe fn load_first(p: *const f32, n: usize) -> Self::V;
        /// The `2 * LANES` floats from `p` split by parity: (those at even offsets, those
        /// at odd ones), each in order: the taps of a stride-2 window.
        ///
        /// # Safety
        /// This CPU has the set, and `p .. p + 2 * LANES` is valid for reads (any
        /// alignment).
        unsafe fn load_even_odd(p: *const f32) -> (Self::V, Self::V);
        /// [`Simd::load_even_odd`] of the `2 * LANES` floats from `p` of which only
        /// those `mask` sets (bit j for float j) are read, the others taken as zero.
        ///
        /// # Safety
        /// This CPU has the set, `mask < 1 << (2 * LANES)`, and for each bit j set `p +
        /// j` is valid for reads (any alignment).
        unsafe fn load_even_odd_mask(p: *const f32, mask: u64) -> (Self::V, Self::V);
        /// The `2 * LANES` lanes of `a` then `b` split by parity, as
        /// [`Simd::load_even_odd`] splits floats in memory: twice over, the lanes of a
        /// stride-4 window's taps.
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn even_odd(a: Self::V, b: Self::V) -> (Self::V, Self::V);
        /// Lanes 1 .. `LANES` of `a`, then the float at `p`: `a` moved down a lane, the
        /// next float shifted in.
        ///
        /// # Safety
        /// This CPU has the set, and `p` is valid for reads.
        unsafe fn shift_in(a: Self::V, p: *const f32) -> Self::V;
        /// The sum of the lanes, folded by halves: `lane[i] += lane[i + n]` for `n` =
        /// `LANES / 2`, `LANES / 4`, ..., 1, then lane 0. One order on every set, so 16
        /// lanes give the same bits as AVX2's two vectors added and then folded.
        ///
        /// # Safety
        /// This CPU has the set.
        unsafe fn hsum(v: Self::V) -> f32;
        /// Transposes the `LANES` x `LANES` block whose row i is `r[i]`, in registers:
        /// lane j of `r[i]` becomes lane i of `r[j]`.
        ///
        /// # Safety
        /// This CPU has the set, and `r` holds `LANES` vectors (panics otherwise).
        unsafe fn transpose(r: &mut [Self::V]);
    }

    /// Stores `R` rows of `V` vectors, row `i` at `out + i * stride`: of each row its
    /// first `n` floats, a vector wholly below `n` in one store, the vector across `n`
    /// through a mask, any past it not at all. The end of every row tile of the kernels
    /// that keep rows of sums in registers.
    ///
    /// # Safety
    /// This CPU has `S`'s set, and for each row `i` the first `min(n, V * LANES)` floats
    /// from `out + i * stride` are writable and alias no live reference.
    #[inline(always)]
    pub(crate) unsafe fn store_rows<S: Simd, const R: usize, const V: usize>(
        rows: &[[S::V; V]; R],
        out: *mut f32,
        stride: usize,
        n: usize,
    ) {
        // SAFETY: the set is this CPU's; each store writes floats `at ..` of row i below
        // `n` and `V * LANES`, the memory the contract names.
        unsafe {
            for (i, row) in rows.iter().enumerate() {
                let p = out.add(i * stride);
                for (v, &x) in row.iter().enumerate() {
                    let at = v * S::LANES;
                    if at + S::LANES <= n {
                        S::store(p.add(at), x);
                    } else if at < n {
                        S::store_first(p.add(at), x, n - at);
                    }
                }
            }
        }
    }

    /// Transposes up to `LANES` rows of up to `LANES` floats: row `r < rows` is the
    /// `cols` floats at `src + r * ss`; column `j < cols` (its lane r row r's element j,
    /// zero for `r >= rows`) is stored at `dst(j)`, its first `keep` lanes.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `1 <= rows, cols, keep <= LANES`; the reads and writes
    /// named are inside live memory, and the writes alias no read and no reference.
    #[inline(always)]
    pub(crate) unsafe fn transpose<S: Simd>(
        src: *const f32,
        ss: usize,
        (rows, cols): (usize, usize),
        dst: impl Fn(usize) -> *mut f32,
        keep: usize,
    ) {
        // SAFETY: the set is this CPU's (the contract); each load reads row r's `cols`
        // floats (a masked load when fewer than LANES) and each store writes column j's
        // `keep` (masked when fewer), the memory the contract names.
        // The loops run to the constant LANES (a branch per row or column), so they
        // unroll and the block stays in registers; bounded by `rows` and `cols` they
        // went through the stack.
        unsafe {
            let mut r = [S::zero(); 16];
            for (i, v) in r[..S::LANES].iter_mut().enumerate() {
                if i < rows {
                    let p = src.add(i * ss);
                    *v = if cols == S::LANES {
                        S::load(p)
                    } else {
                        S::load_first(p, cols)
                    };
                }
            }
            S::transpose(&mut r[..S::LANES]);
            for (j, v) in r[..S::LANES].iter().enumerate() {
                if j < cols {
                    let p = dst(j);
                    if keep == S::LANES {
                        S::store(p, *v);
                    } else {
                        S::store_first(p, *v, keep);
                    }
                }
            }
        }
    }

    /// AVX-512F: 16 floats, 32 registers.
    pub(crate) struct Avx512;

    /// The 32 floats of `a` then `b` split by parity (even offsets, odd ones).
    ///
    /// # Safety
    /// This CPU has AVX-512F.
    #[inline(always)]
    unsafe fn even_odd_512(a: __m512, b: __m512) -> (__m512, __m512) {
        // SAFETY: the caller ensures AVX-512F, all these intrinsics need.
        unsafe {
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
            (
                _mm512_permutex2var_ps(a, even, b),
                _mm512_permutex2var_ps(a, odd, b),
            )
        }
    }

    /// The 16 floats of `a` then `b` split by parity (even offsets, odd ones): each
    /// shuffle picks one parity from both halves ([a0 a2 b0 b2 | a4 a6 b4 b6]); the
    /// 64-bit permute puts the pairs in order.
    ///
    /// # Safety
    /// This CPU has AVX2.
    #[inline(always)]
    unsafe fn even_odd_256(a: __m256, b: __m256) -> (__m256, __m256) {
        // SAFETY: the caller ensures AVX2, all these intrinsics need.
        unsafe {
            let order = |v: __m256| {
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(v)))
            };
            (
                order(_mm256_shuffle_ps::<0b10_00_10_00>(a, b)),
                order(_mm256_shuffle_ps::<0b11_01_11_01>(a, b)),
            )
        }
    }

    /// `maskload`'s mask of the low 8 bits of `mask`: lane i all ones where bit i is set.
    ///
    /// # Safety
    /// This CPU has AVX2.
    #[inline(always)]
    unsafe fn lane_mask_256(mask: u64) -> __m256i {
        // SAFETY: the caller ensures AVX2, all these intrinsics need.
        unsafe {
            let bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
            let m = _mm256_and_si256(_mm256_set1_epi32(mask as i32 & 0xFF), bits);
            _mm256_cmpeq_epi32(m, bits)
        }
    }

    // SAFETY: `__m512` is 16 floats and `LANES` is 16; the `_mm512_loadu_ps` and
    // `_mm512_storeu_ps` below touch exactly those 16 floats at any alignment, the masked
    // loads and store only the lanes their masks set, and every intrinsic used is
    // AVX-512F.
    unsafe impl Simd for Avx512 {
        const LANES: usize = 16;
        type V = __m512;
        #[inline(always)]
        unsafe fn zero() -> __m512 {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            unsafe { _mm512_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> __m512 {
            // SAFETY: the caller ensures AVX-512F and that the 16 floats from `p` are
            // readable; `loadu` needs no alignment.
            unsafe { _mm512_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> __m512 {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            unsafe { _mm512_set1_ps(v) }
        }
        #[inline(always)]
        unsafe fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            unsafe { _mm512_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        unsafe fn mul(a: __m512, b: __m512) -> __m512 {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            unsafe { _mm512_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: __m512) {
            // SAFETY: the caller ensures AVX-512F and that the 16 floats from `p` are
            // writable and unaliased; `storeu` needs no alignment.
            unsafe { _mm512_storeu_ps(p, v) }
        }
        #[inline(always)]
        unsafe fn store_first(p: *mut f32, v: __m512, n: usize) {
            // SAFETY: the caller ensures AVX-512F, `n <= 16` and that the `n` floats from
            // `p` are writable and unaliased; a masked store writes (and faults on) only
            // the lanes its mask sets, the low `n`.
            unsafe { _mm512_mask_storeu_ps(p, ((1u32 << n) - 1) as u16, v) }
        }
        #[inline(always)]
        unsafe fn load_first(p: *const f32, n: usize) -> __m512 {
            // SAFETY: the caller ensures AVX-512F, `n <= 16` and that the `n` floats from
            // `p` are readable; a zero-masked load reads (and faults on) only the lanes
            // its mask sets, the low `n`.
            unsafe { _mm512_maskz_loadu_ps(((1u32 << n) - 1) as u16, p) }
        }
        #[inline(always)]
        unsafe fn add(a: __m512, b: __m512) -> __m512 {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            unsafe { _mm512_add_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn sub(a: __m512, b: __m512) -> __m512 {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            unsafe { _mm512_sub_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn interleave(a: __m512, b: __m512) -> (__m512, __m512) {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            // Index i < 16 picks lane i of `a`, 16 + i lane i of `b`.
            unsafe {
                let lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
                let hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
                (
                    _mm512_permutex2var_ps(a, lo, b),
                    _mm512_permutex2var_ps(a, hi, b),
                )
            }
        }
        #[inline(always)]
        unsafe fn max(a: __m512, b: __m512) -> __m512 {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            unsafe { _mm512_max_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn min(a: __m512, b: __m512) -> __m512 {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            unsafe { _mm512_min_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn select_lt(a: __m512, b: __m512, t: __m512, f: __m512) -> __m512 {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            unsafe { _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b), f, t) }
        }
        #[inline(always)]
        unsafe fn load_even_odd(p: *const f32) -> (__m512, __m512) {
            // SAFETY: the caller ensures AVX-512F and that the 32 floats from `p` are
            // readable: the two loads read exactly those.
            unsafe { even_odd_512(_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16))) }
        }
        #[inline(always)]
        unsafe fn even_odd(a: __m512, b: __m512) -> (__m512, __m512) {
            // SAFETY: the caller ensures this CPU has AVX-512F (the trait's contract).
            unsafe { even_odd_512(a, b) }
        }
        #[inline(always)]
        unsafe fn shift_in(a: __m512, p: *const f32) -> __m512 {
            // SAFETY: the caller ensures AVX-512F and that the float at `p` is readable:
            // the broadcast reads exactly it. `alignr` by one lane takes lanes 1 .. 16 of
            // `a`, then lane 0 of the broadcast.
            unsafe {
                let next = _mm512_castps_si512(_mm512_set1_ps(*p));
                _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(next, _mm512_castps_si512(a)))
            }
        }
        #[inline(always)]
        unsafe fn load_even_odd_mask(p: *const f32, mask: u64) -> (__m512, __m512) {
            // SAFETY: the caller ensures AVX-512F, a mask of 32 bits and that the floats
            // it sets are readable; each zero-masked load reads (and faults on) only the
            // floats of its 16 bits of the mask. `p + 16` is formed wrapping, as `p` may
            // point outside memory where no bit is set.
            unsafe {
                let a = _mm512_maskz_loadu_ps(mask as u16, p);
                let b = _mm512_maskz_loadu_ps((mask >> 16) as u16, p.wrapping_add(16));
                even_odd_512(a, b)
            }
        }
        #[inline(always)]
        unsafe fn hsum(v: __m512) -> f32 {
            // SAFETY: the caller ensures AVX-512F, which implies the AVX2 of the fold of
            // 8 lanes; the casts and the 256-bit extract are AVX-512F.
            unsafe {
                let lo = _mm512_castps512_ps256(v);
                let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
                Avx2::hsum(_mm256_add_ps(lo, hi))
            }
        }
        #[inline(always)]
        unsafe fn transpose(r: &mut [__m512]) {
            let r: &mut [__m512; 16] = r.try_into().expect("16 rows");
            // SAFETY: the caller ensures AVX-512F, which every shuffle here is.
            unsafe {
                // Within each 128-bit lane k: pairs of rows interleaved, then 4x4 blocks
                // transposed, so r[4i + j]'s lane k holds column 4k + j of rows 4i..4i+4.
                let mut t = [_mm512_setzero_ps(); 16];
                for i in 0..8 {
                    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
                }
                for i in 0..4 {
                    r[4 * i] = _mm512_shuffle_ps::<0x44>(t[4 * i], t[4 * i + 2]);
                    r[4 * i + 1] = _mm512_shuffle_ps::<0xEE>(t[4 * i], t[4 * i + 2]);
                    r[4 * i + 2] = _mm512_shuffle_ps::<0x44>(t[4 * i + 1], t[4 * i + 3]);
                    r[4 * i + 3] = _mm512_shuffle_ps::<0xEE>(t[4 * i + 1], t[4 * i + 3]);
                }
                // Then the 128-bit lanes: column 4k + j is lane k of r[j], r[4 + j],
                // r[8 + j] and r[12 + j], gathered in two rounds of lane shuffles.
                let u = *r;
                for j in 0..4 {
                    let even_ab = _mm512_shuffle_f32x4::<0x88>(u[j], u[4 + j]);
                    let odd_ab = _mm512_shuffle_f32x4::<0xDD>(u[j], u[4 + j]);
                    let even_cd = _mm512_shuffle_f32x4::<0x88>(u[8 + j], u[12 + j]);
                    let odd_cd = _mm512_shuffle_f32x4::<0xDD>(u[8 + j], u[12 + j]);
                    r[j] = _mm512_shuffle_f32x4::<0x88>(even_ab, even_cd);
                    r[4 + j] = _mm512_shuffle_f32x4::<0x88>(odd_ab, odd_cd);
                    r[8 + j] = _mm512_shuffle_f32x4::<0xDD>(even_ab, even_cd);
                    r[12 + j] = _mm512_shuffle_f32x4::<0xDD>(odd_ab, odd_cd);
                }
            }
        }
    }

    /// AVX2 with FMA: 8 floats, 16 registers.
    pub(crate) struct Avx2;

    // SAFETY: `__m256` is 8 floats and `LANES` is 8; the `_mm256_loadu_ps` and
    // `_mm256_storeu_ps` below touch exactly those 8 floats at any alignment, the masked
    // loads and store only the lanes their masks set, and every intrinsic used is AVX (loads, stores, set,
    // mul, shuffles), AVX2 (the integer compare) or FMA (`_mm256_fmadd_ps`).
    unsafe impl Simd for Avx2 {
        const LANES: usize = 8;
        type V = __m256;
        #[inline(always)]
        unsafe fn zero() -> __m256 {
            // SAFETY: the caller ensures this CPU has AVX2 and FMA (the trait's contract),
            // which include the AVX this intrinsic needs.
            unsafe { _mm256_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> __m256 {
            // SAFETY: the caller ensures AVX2 (so AVX) and that the 8 floats from `p` are
            // readable; `loadu` needs no alignment.
            unsafe { _mm256_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> __m256 {
            // SAFETY: the caller ensures this CPU has AVX2 and FMA (the trait's contract),
            // which include the AVX this intrinsic needs.
            unsafe { _mm256_set1_ps(v) }
        }
        #[inline(always)]
        unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
            // SAFETY: the caller ensures this CPU has FMA (with AVX2: the trait's contract).
            unsafe { _mm256_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        unsafe fn mul(a: __m256, b: __m256) -> __m256 {
            // SAFETY: the caller ensures this CPU has AVX2 and FMA (the trait's contract),
            // which include the AVX this intrinsic needs.
            unsafe { _mm256_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: __m256) {
            // SAFETY: the caller ensures AVX2 (so AVX) and that the 8 floats from `p` are
            // writable and unaliased; `storeu` needs no alignment.
            unsafe { _mm256_storeu_ps(p, v) }
        }
        #[inline(always)]
        unsafe fn store_first(p: *mut f32, v: __m256, n: usize) {
            // SAFETY: the caller ensures AVX2, `n <= 8` and that the `n` floats from `p`
            // are writable and unaliased; `maskstore` writes (and faults on) only the
            // lanes whose mask sign bit is set: lane i where `n > i`, the low `n`.
            unsafe {
                let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), lanes);
                _mm256_maskstore_ps(p, mask, v)
            }
        }
        #[inline(always)]
        unsafe fn load_first(p: *const f32, n: usize) -> __m256 {
            // SAFETY: the caller ensures AVX2, `n <= 8` and that the `n` floats from `p`
            // are readable; `maskload` reads (and faults on) only the lanes whose mask
            // sign bit is set, the low `n`, and zeroes the others.
            unsafe {
                let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), lanes);
                _mm256_maskload_ps(p, mask)
            }
        }
        #[inline(always)]
        unsafe fn add(a: __m256, b: __m256) -> __m256 {
            // SAFETY: the caller ensures this CPU has AVX2 (so AVX).
            unsafe { _mm256_add_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn sub(a: __m256, b: __m256) -> __m256 {
            // SAFETY: the caller ensures this CPU has AVX2 (so AVX).
            unsafe { _mm256_sub_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn interleave(a: __m256, b: __m256) -> (__m256, __m256) {
            // SAFETY: the caller ensures this CPU has AVX2 (so AVX). The unpacks pair
            // lanes within each 128-bit half ([a0 b0 a1 b1 | a4 b4 a5 b5] and
            // [a2 b2 a3 b3 | a6 b6 a7 b7]); the half permutes put them in order.
            unsafe {
                let (l, h) = (_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
                (
                    _mm256_permute2f128_ps(l, h, 0x20),
                    _mm256_permute2f128_ps(l, h, 0x31),
                )
            }
        }
        #[inline(always)]
        unsafe fn max(a: __m256, b: __m256) -> __m256 {
            // SAFETY: the caller ensures this CPU has AVX2 (so AVX).
            unsafe { _mm256_max_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn min(a: __m256, b: __m256) -> __m256 {
            // SAFETY: the caller ensures this CPU has AVX2 (so AVX).
            unsafe { _mm256_min_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn select_lt(a: __m256, b: __m256, t: __m256, f: __m256) -> __m256 {
            // SAFETY: the caller ensures this CPU has AVX2 (so AVX).
            unsafe { _mm256_blendv_ps(f, t, _mm256_cmp_ps::<_CMP_LT_OQ>(a, b)) }
        }
        #[inline(always)]
        unsafe fn load_even_odd(p: *const f32) -> (__m256, __m256) {
            // SAFETY: the caller ensures AVX2 and that the 16 floats from `p` are
            // readable: the two loads read exactly those.
            unsafe { even_odd_256(_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))) }
        }
        #[inline(always)]
        unsafe fn even_odd(a: __m256, b: __m256) -> (__m256, __m256) {
            // SAFETY: the caller ensures this CPU has AVX2 (the trait's contract).
            unsafe { even_odd_256(a, b) }
        }
        #[inline(always)]
        unsafe fn shift_in(a: __m256, p: *const f32) -> __m256 {
            // SAFETY: the caller ensures AVX2 and that the float at `p` is readable: the
            // broadcast reads exactly it. The permute moves lane i + 1 of `a` to lane i
            // (and lane 0 to lane 7), the blend takes lane 7 from the broadcast.
            unsafe {
                let down = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0);
                _mm256_blend_ps::<0x80>(_mm256_permutevar8x32_ps(a, down), _mm256_broadcast_ss(&*p))
            }
        }
        #[inline(always)]
        unsafe fn load_even_odd_mask(p: *const f32, mask: u64) -> (__m256, __m256) {
            // SAFETY: the caller ensures AVX2, a mask of 16 bits and that the floats it
            // sets are readable; each `maskload` reads (and faults on) only the lanes
            // whose mask sign bit is set, its 8 bits of the mask (`lane_mask_256`), and
            // zeroes the others. `p + 8` is formed wrapping, as `p` may point outside
            // memory where no bit is set.
            unsafe {
                let a = _mm256_maskload_ps(p, lane_mask_256(mask));
                let b = _mm256_maskload_ps(p.wrapping_add(8), lane_mask_256(mask >> 8));
                even_odd_256(a, b)
            }
        }
        #[inline(always)]
        unsafe fn hsum(v: __m256) -> f32 {
            // SAFETY: the caller ensures this CPU has AVX2 (so AVX and SSE3).
            unsafe {
                let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
                let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
                _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
            }
        }
        #[inline(always)]
        unsafe fn transpose(r: &mut [__m256]) {
            let r: &mut [__m256; 8] = r.try_into().expect("8 rows");
            // SAFETY: the caller ensures AVX2 (so AVX), which every shuffle here is.
            unsafe {
                // Within each 128-bit half: pairs of rows interleaved, then 4x4 blocks
                // transposed, so s[4i + j]'s half k holds column 4k + j of rows 4i..4i+4.
                let mut t = [_mm256_setzero_ps(); 8];
                for i in 0..4 {
                    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
                }
                let mut s = [_mm256_setzero_ps(); 8];
                for i in 0..2 {
                    s[4 * i] = _mm256_shuffle_ps::<0x44>(t[4 * i], t[4 * i + 2]);
                    s[4 * i + 1] = _mm256_shuffle_ps::<0xEE>(t[4 * i], t[4 * i + 2]);
                    s[4 * i + 2] = _mm256_shuffle_ps::<0x44>(t[4 * i + 1], t[4 * i + 3]);
                    s[4 * i + 3] = _mm256_shuffle_ps::<0xEE>(t[4 * i + 1], t[4 * i + 3]);
                }
                for j in 0..4 {
                    r[j] = _mm256_permute2f128_ps::<0x20>(s[j], s[4 + j]);
                    r[4 + j] = _mm256_permute2f128_ps::<0x31>(s[j], s[4 + j]);
                }
            }
        }
    }
}
