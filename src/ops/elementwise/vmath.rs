//! Vectorized float32 math: the transcendental functions of the elementwise ops (Exp, Log,
//! Erf, Tanh, Sigmoid) and the activations built on them (GELU in both forms, Swish/SiLU,
//! Softplus, Mish), over whole slices.
//!
//! Each function is written once, as a branch-free scalar formula on `f32`: range
//! reduction by bit manipulation, a polynomial, selects where a branch would be. A loop
//! of such a formula over two slices is what LLVM's loop vectorizer turns into straight
//! vector code, so [`map`] instantiates the loop inside functions compiled for AVX-512 and
//! for AVX2 + FMA, chosen at run time from [`Isa::detect`], and once more for the
//! baseline instruction set. Without FMA the formulas use a separate multiply and add
//! (`FMA = false`), since `f32::mul_add` would then be a library call per element.
//!
//! Accuracy, as the tests measure it against f64 references (`f64::exp`, `ln`, `tanh`,
//! and rt2's f64 [`erf`](super::num::erf)) over a dense sweep of float32 inputs, in
//! units in the last place of the float32 result:
//!
//! Those are the bounds with FMA (every x86-64 CPU with AVX2, and AArch64); the baseline
//! formulas without it stay within one ulp more.
//!
//! | function | max error | note |
//! |---|---|---|
//! | exp | 1 ulp | subnormal results rounded twice (at most 1 ulp of the smallest subnormal) |
//! | log | 1 ulp | |
//! | erf | 3 ulp | |
//! | tanh | 2 ulp | |
//! | sigmoid | 2.5 ulp | |
//! | gelu (tanh form) | 3.5 ulp for x >= -1 | below, 2e-5 relative (the rounding of its float32 argument, about x e^(2u) with \|u\| up to 2\|x\|³/50) |
//! | softplus, swish, mish | 3.5 ulp | swish and mish within 2e-43 absolute where e^x is subnormal (x < -87.3) |
//! | gelu (erf form) | 6 ulp for x >= -2 | below, 3e-6 relative (the exponent of erfc's tail is a float32); from x = -4√2 down (where 1 + erf(x/√2) < 1.6e-8) within 5e-8 absolute |
//!
//! Every function returns NaN for NaN and takes infinities to their limits.

#[cfg(target_arch = "x86_64")]
use crate::ops::simd::Isa;

/// A float32 function [`map`] computes over a slice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fun {
    Exp,
    Log,
    Erf,
    Tanh,
    Sigmoid,
    /// `ln(1 + e^x)`.
    Softplus,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// `x * sigmoid(beta * x)` (SiLU for beta 1).
    Swish(f32),
    /// `x/2 * (1 + erf(x / √2))`.
    Gelu,
    /// `x/2 * (1 + tanh(√(2/π) * (x + 0.044715 x³)))`.
    GeluTanh,
}

/// `out[i] = fun(x[i])` for `i < out.len()` (`x` at least as long), in the widest vectors
/// this CPU has.
pub fn map(fun: Fun, x: &[f32], out: &mut [f32]) {
    let x = &x[..out.len()];
    #[cfg(target_arch = "x86_64")]
    match Isa::detect() {
        // SAFETY: `Isa::detect` found the instruction set each function is compiled for.
        Some(Isa::Avx512) => return unsafe { map_avx512(fun, x, out) },
        // SAFETY: as above.
        Some(Isa::Avx2) => return unsafe { map_avx2(fun, x, out) },
        None => {}
    }
    map_with::<{ cfg!(target_arch = "aarch64") }>(fun, x, out);
}

/// [`map`] for AVX-512F CPUs.
///
/// # Safety
/// The CPU has AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn map_avx512(fun: Fun, x: &[f32], out: &mut [f32]) {
    map_with::<true>(fun, x, out);
}

/// [`map`] for AVX2 CPUs.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn map_avx2(fun: Fun, x: &[f32], out: &mut [f32]) {
    map_with::<true>(fun, x, out);
}

/// Defines `pub fn $name` over slices as `$with::<FMA>` compiled for AVX-512 and for
/// AVX2 with FMA (chosen at run time from [`Isa::detect`]) and once more for the baseline
/// set, as [`map`] is: the loop inside `$with` is written for the vectorizer.
macro_rules! vectorized {
    ($(#[$doc:meta])* pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) = $with:ident;) => {
        $(#[$doc])*
        pub fn $name($($arg: $ty),*) {
            /// # Safety
            /// The CPU has AVX-512F, AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx2,fma")]
            unsafe fn avx512($($arg: $ty),*) {
                $with::<true>($($arg),*)
            }
            /// # Safety
            /// The CPU has AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2($($arg: $ty),*) {
                $with::<true>($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            match Isa::detect() {
                // SAFETY: `Isa::detect` found the set each instance is compiled for.
                Some(Isa::Avx512) => return unsafe { avx512($($arg),*) },
                // SAFETY: as above.
                Some(Isa::Avx2) => return unsafe { avx2($($arg),*) },
                None => {}
            }
            $with::<{ cfg!(target_arch = "aarch64") }>($($arg),*)
        }
    };
}

vectorized! {
    /// One float32 LSTM step of one batch entry, in one pass over its `n = c.len()`
    /// units: each gate (`i, o, f, c~` in ONNX's order, `n` apart in `rec` and `pre`) is
    /// the recurrent product `rec` plus the input projection `pre`, clipped to `±clip`
    /// (infinite: not clipped); then `c = f c + i tanh(c~)` and `h = o tanh(c)`, with `i,
    /// o, f` the sigmoid of theirs. Sigmoid and tanh are [`map`]'s formulas in [`map`]'s
    /// vectors, so the bits are those of the gates added, clipped and mapped in separate
    /// passes.
    ///
    /// Why one pass: per step the gates are a few hundred floats, and separate passes (an
    /// add, three calls to [`map`], the state updates in loops the baseline build leaves
    /// scalar) took a fifth of a 128-unit LSTM's time beside its matrix-vector product.
    ///
    /// # Panics
    /// If `rec` or `pre` holds fewer than `4 n` floats or `h` fewer than `n`.
    pub fn lstm_cell(
        rec: &[f32],
        pre: &[f32],
        clip: f32,
        c: &mut [f32],
        h: &mut [f32],
    ) = lstm_cell_with;
}

vectorized! {
    /// A float32 GRU step's update and reset gates, `out[j] = sigmoid(clip(rec[j] +
    /// pre[j]))` for `j < out.len()` (the recurrent product plus the input projection,
    /// clipped to `±clip`), in one pass; the bits of the add, the clip and [`map`]'s
    /// sigmoid taken in turn.
    ///
    /// # Panics
    /// If `rec` or `pre` is shorter than `out`.
    pub fn sigmoid_gates(rec: &[f32], pre: &[f32], clip: f32, out: &mut [f32]) = sigmoid_gates_with;
}

vectorized! {
    /// A float32 GRU step's new state over its `n = h.len()` units, from the update and
    /// reset gates `zr` (`z` then `r`, [`sigmoid_gates`]), the candidate's input
    /// projection `x`, its recurrent product `rec` and recurrent bias `rb` (none: 0): the
    /// candidate `tanh(clip(x + r (rec + rb)))` with `linear_before_reset` (`rec` is `h
    /// Rhᵀ`), else `tanh(clip(x + rec + rb))` (`rec` is `(r h) Rhᵀ`), then `h = (1 - z)
    /// cand + z h`. One pass; the bits of the separate ones.
    ///
    /// # Panics
    /// If `x`, `rec` or `rb` holds fewer than `n` floats or `zr` fewer than `2 n`.
    pub fn gru_state(
        x: &[f32],
        rec: &[f32],
        zr: &[f32],
        rb: Option<&[f32]>,
        linear_before_reset: bool,
        clip: f32,
        h: &mut [f32],
    ) = gru_state_with;
}

/// `f32::clamp(v, -clip, clip)`'s result (NaN stays NaN), without its check that the
/// bounds are ordered, which has no place in a vectorized loop.
#[inline(always)]
fn clipped(v: f32, clip: f32) -> f32 {
    if v < -clip {
        -clip
    } else if v > clip {
        clip
    } else {
        v
    }
}

/// [`sigmoid_gates`]'s loop.
#[inline(always)]
fn sigmoid_gates_with<const FMA: bool>(rec: &[f32], pre: &[f32], clip: f32, out: &mut [f32]) {
    let n = out.len();
    for ((o, &r), &p) in out.iter_mut().zip(&rec[..n]).zip(&pre[..n]) {
        *o = sigmoid::<FMA>(clipped(r + p, clip));
    }
}

/// [`gru_state`]'s loop, one instance per (linear_before_reset, bias) pair so that
/// neither is tested per unit.
#[inline(always)]
fn gru_state_with<const FMA: bool>(
    x: &[f32],
    rec: &[f32],
    zr: &[f32],
    rb: Option<&[f32]>,
    linear_before_reset: bool,
    clip: f32,
    h: &mut [f32],
) {
    let n = h.len();
    let (x, rec, z, r) = (&x[..n], &rec[..n], &zr[..n], &zr[n..2 * n]);
    /// The state from the candidate's argument `pre(j)`: a generic, so each instance
    /// inlines its own and vectorizes.
    #[inline(always)]
    fn each<const FMA: bool>(clip: f32, z: &[f32], h: &mut [f32], pre: impl Fn(usize) -> f32) {
        for (j, (hj, &zj)) in h.iter_mut().zip(z).enumerate() {
            let cand = tanh::<FMA>(clipped(pre(j), clip));
            *hj = (1.0 - zj) * cand + zj * *hj;
        }
    }
    // Without a bias the candidate still adds 0.0, as the separate passes did (it turns
    // a -0.0 product into +0.0).
    match (linear_before_reset, rb.map(|b| &b[..n])) {
        (true, Some(b)) => each::<FMA>(clip, z, h, |j| x[j] + r[j] * (rec[j] + b[j])),
        (true, None) => each::<FMA>(clip, z, h, |j| x[j] + r[j] * (rec[j] + 0.0)),
        (false, Some(b)) => each::<FMA>(clip, z, h, |j| x[j] + rec[j] + b[j]),
        (false, None) => each::<FMA>(clip, z, h, |j| x[j] + rec[j] + 0.0),
    }
}

/// [`lstm_cell`]'s loop: the slices cut to `n` first, so the body indexes without
/// checks and vectorizes as [`map_with`]'s loops do.
#[inline(always)]
fn lstm_cell_with<const FMA: bool>(
    rec: &[f32],
    pre: &[f32],
    clip: f32,
    c: &mut [f32],
    h: &mut [f32],
) {
    let n = c.len();
    let h = &mut h[..n];
    let (ri, ro, rf, rc) = (
        &rec[..n],
        &rec[n..2 * n],
        &rec[2 * n..3 * n],
        &rec[3 * n..4 * n],
    );
    let (pi, po, pf, pc) = (
        &pre[..n],
        &pre[n..2 * n],
        &pre[2 * n..3 * n],
        &pre[3 * n..4 * n],
    );
    let gate = |r: f32, p: f32| clipped(r + p, clip);
    for j in 0..n {
        let i = sigmoid::<FMA>(gate(ri[j], pi[j]));
        let o = sigmoid::<FMA>(gate(ro[j], po[j]));
        let f = sigmoid::<FMA>(gate(rf[j], pf[j]));
        let cand = tanh::<FMA>(gate(rc[j], pc[j]));
        let cj = f * c[j] + i * cand;
        c[j] = cj;
        h[j] = tanh::<FMA>(cj) * o;
    }
}

/// The loops: one per function, the match outside them, so each is a plain zip of two
/// slices around an inlined formula, which is what the vectorizer needs.
#[inline(always)]
fn map_with<const FMA: bool>(fun: Fun, x: &[f32], out: &mut [f32]) {
    macro_rules! each {
        (|$v:ident| $e:expr) => {
            for (o, &$v) in out.iter_mut().zip(x) {
                *o = $e;
            }
        };
    }
    match fun {
        Fun::Exp => each!(|v| exp::<FMA>(v)),
        Fun::Log => each!(|v| log::<FMA>(v)),
        Fun::Erf => each!(|v| erf::<FMA>(v)),
        Fun::Tanh => each!(|v| tanh::<FMA>(v)),
        Fun::Sigmoid => each!(|v| sigmoid::<FMA>(v)),
        Fun::Softplus => each!(|v| softplus::<FMA>(v)),
        Fun::Mish => each!(|v| v * tanh::<FMA>(softplus::<FMA>(v))),
        Fun::Swish(beta) => each!(|v| v * sigmoid::<FMA>(beta * v)),
        Fun::Gelu => each!(|v| gelu::<FMA>(v)),
        Fun::GeluTanh => each!(|v| gelu_tanh::<FMA>(v)),
    }
}

/// `a * b + c`, fused where the instruction is there.
#[inline(always)]
fn fma<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// `c[0] + t * (c[1] + t * (...))`.
#[inline(always)]
fn poly<const FMA: bool, const N: usize>(t: f32, c: &[f32; N]) -> f32 {
    let mut r = c[N - 1];
    for &k in c[..N - 1].iter().rev() {
        r = fma::<FMA>(r, t, k);
    }
    r
}

/// Adding this to a float32 below 2^22 in magnitude rounds it to an integer (to nearest,
/// ties to even), which then sits in the low bits of the sum's mantissa.
const ROUNDER: f32 = 12_582_912.0; // 1.5 * 2^23

/// ln 2 split so that `n * LN2_HI` is exact for the |n| <= 150 the reductions produce.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

/// e^x: x = n ln2 + r with |r| <= ln2/2, e^r by its Taylor polynomial to r^7 (truncation
/// error below 6e-9 relative), 2^n built in the exponent field. The scale is applied as
/// two powers of two, so that n from -150 (results that round to zero) to 128 (to
/// infinity) needs no special case.
#[inline(always)]
pub(crate) fn exp<const FMA: bool>(x: f32) -> f32 {
    const TAYLOR: [f32; 8] = [
        1.0,
        1.0,
        0.5,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
    ];
    // NaN passes the clamp and every step after it.
    let x = x.clamp(-104.0, 89.0);
    let t = fma::<FMA>(x, std::f32::consts::LOG2_E, ROUNDER);
    let n = t - ROUNDER;
    let r = fma::<FMA>(n, -LN2_LO, fma::<FMA>(n, -LN2_HI, x));
    let p = poly::<FMA, 8>(r, &TAYLOR);
    let k = (t.to_bits() as i32).wrapping_sub(ROUNDER.to_bits() as i32);
    let k1 = k >> 1;
    let pow2 = |k: i32| f32::from_bits((k.wrapping_add(127) as u32) << 23);
    p * pow2(k1) * pow2(k.wrapping_sub(k1))
}

/// ln x: x = 2^e m with m in [√2/2, √2), ln m = ln(1 + f) through s = f / (2 + f) and
/// the series of 2 atanh(s) (|s| < 0.172, truncation error below 1e-9), arranged as
/// `f - (f²/2 - s (f²/2 + R))` so that the rounding of s barely reaches the result.
#[inline(always)]
pub(crate) fn log<const FMA: bool>(x: f32) -> f32 {
    const ATANH: [f32; 4] = [2.0 / 3.0, 2.0 / 5.0, 2.0 / 7.0, 2.0 / 9.0];
    let subnormal = x < f32::MIN_POSITIVE;
    let xs = if subnormal { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits() as i32;
    let e = ((bits >> 23) & 0xff) - if subnormal { 150 } else { 127 };
    let m = f32::from_bits(((bits & 0x007f_ffff) | 0x3f80_0000) as u32);
    let big = m > std::f32::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    let e = (e + big as i32) as f32;
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let r = z * poly::<FMA, 4>(z, &ATANH);
    let hfsq = 0.5 * f * f;
    let lg = fma::<FMA>(e, LN2_HI, f - (hfsq - fma::<FMA>(s, hfsq + r, e * LN2_LO)));
    let lg = if x == 0.0 { f32::NEG_INFINITY } else { lg };
    let lg = if x < 0.0 || x.is_nan() { f32::NAN } else { lg };
    if x == f32::INFINITY { x } else { lg }
}

/// Below this |x|, erf(x) = x P(x²); from it on, 1 - erfc(x) with erfc from
/// [`ERFC_G`].
const ERF_SPLIT: f32 = 0.9;
/// erf(x) / x as a polynomial in x² on [0, 0.9] (a minimax fit of relative error 3e-10).
const ERF_SMALL: [f32; 7] = [
    std::f32::consts::FRAC_2_SQRT_PI,
    -0.376_126_35,
    0.112_837_15,
    -0.026_860_51,
    0.005_203_863,
    -8.175_676e-4,
    8.513_242e-5,
];
/// ln(erfc(x)) + x² as a polynomial in x - 2.3 on [0.6, 4] (a fit of absolute error
/// 5e-8). From x = 4 on, erfc(x) < 1.6e-8 and erf(x) rounds to 1.
const ERFC_G: [f32; 10] = [
    -1.483_944_4,
    -0.376_498_9,
    0.063_177_14,
    -0.012_772_722,
    0.002_634_515_3,
    -5.235_467e-4,
    9.869_184e-5,
    -1.671_331_3e-5,
    1.413_737e-6,
    1.656_786_1e-7,
];
const ERFC_MID: f32 = 2.3;
/// GELU takes `1 + erf(z)` for z below minus this as erfc(-z): above, the sum of 1 and
/// a negative erf keeps enough digits (it is at least 0.4).
const GELU_TAIL: f32 = 0.6;
const ERF_MAX: f32 = 4.0;

/// erf split in its two regions, for x whose square is `a2_hi + a2_lo`: (the
/// small-region value x P(x²), erfc(|x|) from the tail fit, its polynomial part held at
/// x = 4 beyond, where only e^-x² still matters), for [`erf`] and
/// [`gelu`], which combine them differently. The square comes in two parts because
/// erfc's tail is steep: a relative error ε in x² is 2x²ε in erfc (16 ulp at x = 4), so
/// the caller passes the rounding error of x² where it can find it.
#[inline(always)]
fn erf_parts<const FMA: bool>(x: f32, a2_hi: f32, a2_lo: f32) -> (f32, f32) {
    let a = x.abs().min(ERF_MAX);
    let small = x * poly::<FMA, 7>(a * a, &ERF_SMALL);
    let g = poly::<FMA, 10>(a - ERFC_MID, &ERFC_G);
    (small, exp::<FMA>((g - a2_hi) - a2_lo))
}

/// `(hi, lo)` with `hi + lo = x * x` exactly, where FMA finds `lo`; `lo` is 0 without it.
#[inline(always)]
fn square<const FMA: bool>(x: f32) -> (f32, f32) {
    let hi = x * x;
    (hi, if FMA { x.mul_add(x, -hi) } else { 0.0 })
}

#[inline(always)]
pub(crate) fn erf<const FMA: bool>(x: f32) -> f32 {
    // Past 16, e^-x² is 0 in float32; the cap keeps x² and its rounding error finite.
    let (hi, lo) = square::<FMA>(x.abs().min(16.0));
    let (small, erfc) = erf_parts::<FMA>(x, hi, lo);
    let r = if x.abs() < ERF_SPLIT {
        small
    } else {
        (1.0 - erfc).copysign(x)
    };
    if x.is_nan() { x } else { r }
}

/// GELU with erf: `x/2 * (1 + erf(x/√2))`, where `1 + erf(z)` for z < -0.6 is erfc(-z)
/// itself rather than a difference of two numbers near 1 (which loses most digits for
/// z below -2). z² is taken as x²/2, exactly, not from the rounded z.
#[inline(always)]
fn gelu<const FMA: bool>(x: f32) -> f32 {
    let z = x * std::f32::consts::FRAC_1_SQRT_2;
    let (hi, lo) = square::<FMA>(x.abs().min(24.0));
    let (small, erfc) = erf_parts::<FMA>(z, 0.5 * hi, 0.5 * lo);
    let one_plus = if z < -GELU_TAIL {
        erfc
    } else if z < ERF_SPLIT {
        1.0 + small
    } else {
        2.0 - erfc
    };
    let r = 0.5 * x * one_plus;
    if x.is_nan() { x } else { r }
}

/// tanh(x)/x - 1 over x², a polynomial in x² on [0, 0.625] (relative error below 1 ulp).
const TANH_SMALL: [f32; 5] = [
    -0.333_332_84,
    0.133_314_91,
    -0.053_743_497,
    0.020_650_586,
    -0.005_717_043,
];
const TANH_SPLIT: f32 = 0.625;

/// tanh: `x + x³ P(x²)` near 0, where `1 - 2 / (e^2|x| + 1)` would cancel, and that
/// formula beyond. |x| is capped at 10, past which tanh rounds to ±1.
#[inline(always)]
pub(crate) fn tanh<const FMA: bool>(x: f32) -> f32 {
    let a = x.abs();
    let t = x * x;
    let small = fma::<FMA>(x, t * poly::<FMA, 5>(t, &TANH_SMALL), x);
    let e = exp::<FMA>(2.0 * a.min(10.0));
    let big = (1.0 - 2.0 / (e + 1.0)).copysign(x);
    let r = if a < TANH_SPLIT { small } else { big };
    if x.is_nan() { x } else { r }
}

/// `1 / (1 + e^-x)` for x >= 0 and `e^x / (1 + e^x)` below, so that e^-|x| never
/// overflows: for x < -88.7, e^-x would be infinite where the result is still a
/// subnormal.
#[inline(always)]
pub(crate) fn sigmoid<const FMA: bool>(x: f32) -> f32 {
    let e = exp::<FMA>(-x.abs());
    let num = if x < 0.0 { e } else { 1.0 };
    num / (1.0 + e)
}

/// `max(x, 0) + ln(1 + e^-|x|)`, the log of a sum near 1 taken as ln(u) corrected by
/// the rounding of u = 1 + y, so that large |x| keeps its e^-|x| tail.
#[inline(always)]
pub(crate) fn softplus<const FMA: bool>(x: f32) -> f32 {
    let y = exp::<FMA>(-x.abs());
    let u = 1.0 + y;
    let log1p = log::<FMA>(u) - ((u - 1.0) - y) / u;
    let r = x.max(0.0) + log1p;
    if x.is_nan() { x } else { r }
}

/// GELU's tanh form: `1 + tanh(u)` is `2 sigmoid(2u)`, which does not cancel for
/// negative x.
#[inline(always)]
fn gelu_tanh<const FMA: bool>(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // √(2/π)
    let u = K * fma::<FMA>(0.044_715 * x, x * x, x);
    x * sigmoid::<FMA>(2.0 * u)
}

#[cfg(test)]
mod tests;
