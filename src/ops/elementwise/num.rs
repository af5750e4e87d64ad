//! Element arithmetic for the elementwise compute functions: what `+`, `/`, `%`, max and the
//! conversions mean for each device type, written once per kind of number.
//!
//! - [`Num`]: every numeric device type (bool travels as `u8`). Integers wrap as NumPy's
//!   do, and an integer division or remainder by zero gives 0 instead of trapping.
//!   float16 and bfloat16 compute through f32 and round once per result.
//! - [`Float`]: the floating-point types, each with the [`Real`] type its math runs in
//!   (f32 for float16, bfloat16 and float32; f64 for float64).
//! - [`Int`]: the integer types, for the bitwise ops.

use std::ops::{Add, Div, Mul, Neg, Sub};

use half::{bf16, f16};

use crate::ops::Elem;

/// What kind of number an element type holds; it picks the conversion rules of Cast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Float,
    Signed,
    Unsigned,
}

/// A numeric device element type.
pub trait Num: Elem + Copy + PartialOrd {
    const KIND: Kind;
    fn zero() -> Self;
    fn add(self, b: Self) -> Self;
    fn sub(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    /// Quotient; integers truncate toward zero and give 0 for a zero divisor.
    fn div(self, b: Self) -> Self;
    /// Remainder with the dividend's sign (C's fmod); 0 for a zero integer divisor.
    fn fmod(self, b: Self) -> Self;
    /// Remainder with the divisor's sign (Python's and NumPy's `%`).
    fn modulo(self, b: Self) -> Self;
    fn abs(self) -> Self;
    fn neg(self) -> Self;
    /// -1, 0 or 1 (NaN stays NaN).
    fn sign(self) -> Self;
    fn is_nan(self) -> bool;
    /// The value as f64 (exact for every float type and for integers below 2^53).
    fn to_f64(self) -> f64;
    /// The value as an integer: floats truncated toward zero (saturating, NaN 0).
    fn to_i128(self) -> i128;
    /// From a float: floats round to nearest even; integers truncate toward zero and wrap
    /// as NumPy's cast through int64 does.
    fn from_f64(v: f64) -> Self;
    /// From an integer: integers wrap; floats round to nearest even.
    fn from_i128(v: i128) -> Self;

    /// The larger, NaN if either is NaN (NumPy's `maximum`).
    #[inline]
    fn max_nan(self, b: Self) -> Self {
        if self.is_nan() || self >= b { self } else { b }
    }
    /// The smaller, NaN if either is NaN (NumPy's `minimum`).
    #[inline]
    fn min_nan(self, b: Self) -> Self {
        if self.is_nan() || self <= b { self } else { b }
    }
}

/// `v` converted from `S` to `D` as ONNX's Cast does between device types: float to float
/// rounds once to nearest even, float to integer truncates toward zero, integer to integer
/// wraps.
#[inline]
pub fn convert<S: Num, D: Num>(v: S) -> D {
    match S::KIND {
        Kind::Float => D::from_f64(v.to_f64()),
        Kind::Signed | Kind::Unsigned => D::from_i128(v.to_i128()),
    }
}

/// 2^63, where int64's range ends and only uint64 goes on.
const TWO_POW_63: f64 = (1u64 << 63) as f64;

macro_rules! int_num {
    ($kind:ident: $($t:ty),*) => {$(
        impl Num for $t {
            const KIND: Kind = Kind::$kind;
            #[inline] fn zero() -> Self { 0 }
            #[inline] fn add(self, b: Self) -> Self { self.wrapping_add(b) }
            #[inline] fn sub(self, b: Self) -> Self { self.wrapping_sub(b) }
            #[inline] fn mul(self, b: Self) -> Self { self.wrapping_mul(b) }
            #[inline] fn div(self, b: Self) -> Self {
                if b == 0 { 0 } else { self.wrapping_div(b) }
            }
            #[inline] fn fmod(self, b: Self) -> Self {
                if b == 0 { 0 } else { self.wrapping_rem(b) }
            }
            #[inline] fn modulo(self, b: Self) -> Self {
                let r = self.fmod(b);
                // `0 > x` rather than `x < 0`: the same code serves unsigned types, where
                // both are always false.
                #[allow(unused_comparisons)]
                let flip = r != 0 && ((0 > r) != (0 > b));
                if flip { r.wrapping_add(b) } else { r }
            }
            #[inline] fn abs(self) -> Self { int_num!(@abs $kind self) }
            #[inline] fn neg(self) -> Self { (0 as $t).wrapping_sub(self) }
            #[inline] fn sign(self) -> Self { int_num!(@sign $kind self) }
            #[inline] fn is_nan(self) -> bool { false }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn to_i128(self) -> i128 { self as i128 }
            #[inline] fn from_f64(v: f64) -> Self {
                // NumPy casts a float to a narrower integer through int64 and wraps;
                // uint64 above int64's range converts directly.
                if v >= TWO_POW_63 { v as u64 as $t } else { v as i64 as $t }
            }
            #[inline] fn from_i128(v: i128) -> Self { v as $t }
        }
    )*};
    (@abs Signed $x:ident) => { $x.wrapping_abs() };
    (@abs Unsigned $x:ident) => { $x };
    (@sign Signed $x:ident) => { $x.signum() };
    (@sign Unsigned $x:ident) => { ($x > 0) as Self };
}
int_num!(Signed: i8, i16, i32, i64);
int_num!(Unsigned: u8, u16, u32, u64);

/// The floating-point math a [`Float`] computes in: f32 or f64.
pub trait Real:
    Copy
    + PartialOrd
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// A constant (attribute values, coefficients), rounded to this type.
    fn c(v: f64) -> Self;
    /// The value as f64 (exact).
    fn to_f64(self) -> f64;
    fn exp(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn tanh(self) -> Self;
    fn asinh(self) -> Self;
    fn acosh(self) -> Self;
    fn atanh(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    /// Round half to even, as ONNX's Round and QuantizeLinear do.
    fn round_even(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn erf(self) -> Self;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
    fn is_sign_negative(self) -> bool;
}

macro_rules! real {
    ($($t:ty),*) => {$(
        impl Real for $t {
            #[inline] fn c(v: f64) -> Self { v as $t }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn exp(self) -> Self { <$t>::exp(self) }
            #[inline] fn exp_m1(self) -> Self { <$t>::exp_m1(self) }
            #[inline] fn ln(self) -> Self { <$t>::ln(self) }
            #[inline] fn ln_1p(self) -> Self { <$t>::ln_1p(self) }
            #[inline] fn sqrt(self) -> Self { <$t>::sqrt(self) }
            #[inline] fn abs(self) -> Self { <$t>::abs(self) }
            #[inline] fn sin(self) -> Self { <$t>::sin(self) }
            #[inline] fn cos(self) -> Self { <$t>::cos(self) }
            #[inline] fn tan(self) -> Self { <$t>::tan(self) }
            #[inline] fn asin(self) -> Self { <$t>::asin(self) }
            #[inline] fn acos(self) -> Self { <$t>::acos(self) }
            #[inline] fn atan(self) -> Self { <$t>::atan(self) }
            #[inline] fn sinh(self) -> Self { <$t>::sinh(self) }
            #[inline] fn cosh(self) -> Self { <$t>::cosh(self) }
            #[inline] fn tanh(self) -> Self { <$t>::tanh(self) }
            #[inline] fn asinh(self) -> Self { <$t>::asinh(self) }
            #[inline] fn acosh(self) -> Self { <$t>::acosh(self) }
            #[inline] fn atanh(self) -> Self { <$t>::atanh(self) }
            #[inline] fn floor(self) -> Self { <$t>::floor(self) }
            #[inline] fn ceil(self) -> Self { <$t>::ceil(self) }
            #[inline] fn round_even(self) -> Self { <$t>::round_ties_even(self) }
            #[inline] fn powf(self, e: Self) -> Self { <$t>::powf(self, e) }
            #[inline] fn erf(self) -> Self { erf(self as f64) as $t }
            #[inline] fn is_nan(self) -> bool { <$t>::is_nan(self) }
            #[inline] fn is_infinite(self) -> bool { <$t>::is_infinite(self) }
            #[inline] fn is_sign_negative(self) -> bool { <$t>::is_sign_negative(self) }
        }
    )*};
}
real!(f32, f64);

/// A floating-point device type and the [`Real`] it computes in.
pub trait Float: Num {
    type R: Real;
    fn to_r(self) -> Self::R;
    fn from_r(r: Self::R) -> Self;
    /// `out[i] = from_r(f(to_r(x[i])))`, in parallel chunks when large: a 16-bit type
    /// converts whole blocks ([`super::broadcast::par_map_half`]), the same bits as
    /// element by element.
    fn map_r<F: Fn(Self::R) -> Self::R + Sync>(x: &[Self], out: &mut [Self], f: F);
    /// `out[i] = fun(x[i])` with the vector math of [`super::vmath`], in the chunks
    /// [`Float::map_r`] takes; `false` (nothing written) for a type it does not compute
    /// (float64, which keeps the scalar formulas).
    fn map_fun(fun: super::vmath::Fun, x: &[Self], out: &mut [Self]) -> bool;
}

macro_rules! float_num {
    ($($t:ty => $r:ty, $to:expr, $from:expr, $from_f64:expr, $map:path, $fun:expr);* $(;)?) => {$(
        impl Float for $t {
            type R = $r;
            #[inline] fn to_r(self) -> $r { ($to)(self) }
            #[inline] fn from_r(r: $r) -> Self { ($from)(r) }
            #[inline]
            fn map_r<F: Fn($r) -> $r + Sync>(x: &[Self], out: &mut [Self], f: F) {
                $map(x, out, f)
            }
            #[inline]
            fn map_fun(fun: super::vmath::Fun, x: &[Self], out: &mut [Self]) -> bool {
                ($fun)(fun, x, out)
            }
        }
        impl Num for $t {
            const KIND: Kind = Kind::Float;
            #[inline] fn zero() -> Self { Self::from_r(0.0) }
            #[inline] fn add(self, b: Self) -> Self { Self::from_r(self.to_r() + b.to_r()) }
            #[inline] fn sub(self, b: Self) -> Self { Self::from_r(self.to_r() - b.to_r()) }
            #[inline] fn mul(self, b: Self) -> Self { Self::from_r(self.to_r() * b.to_r()) }
            #[inline] fn div(self, b: Self) -> Self { Self::from_r(self.to_r() / b.to_r()) }
            #[inline] fn fmod(self, b: Self) -> Self { Self::from_r(self.to_r() % b.to_r()) }
            #[inline] fn modulo(self, b: Self) -> Self {
                let (a, b) = (self.to_r(), b.to_r());
                let r = a % b;
                let flip = r != 0.0 && (r < 0.0) != (b < 0.0);
                Self::from_r(if flip { r + b } else { r })
            }
            #[inline] fn abs(self) -> Self { Self::from_r(self.to_r().abs()) }
            #[inline] fn neg(self) -> Self { Self::from_r(-self.to_r()) }
            #[inline] fn sign(self) -> Self {
                let x = self.to_r();
                Self::from_r(if x > 0.0 { 1.0 } else if x < 0.0 { -1.0 } else { x })
            }
            #[inline] fn is_nan(self) -> bool { self.to_r().is_nan() }
            #[inline] fn to_f64(self) -> f64 { Real::to_f64(self.to_r()) }
            #[inline] fn to_i128(self) -> i128 { self.to_r() as i128 }
            #[inline] fn from_f64(v: f64) -> Self { ($from_f64)(v) }
            #[inline] fn from_i128(v: i128) -> Self { Self::from_f64(v as f64) }
        }
    )*};
}
float_num! {
    f32 => f32, |x| x, |r| r, |v| v as f32, super::broadcast::par_map,
        super::broadcast::par_map_fun;
    f64 => f64, |x| x, |r| r, |v| v, super::broadcast::par_map, |_, _, _| false;
    f16 => f32, f16::to_f32, f16::from_f32, f16::from_f64, super::broadcast::par_map_half,
        super::broadcast::par_map_half_fun;
    bf16 => f32, bf16::to_f32, bf16::from_f32, bf16::from_f64, super::broadcast::par_map_half,
        super::broadcast::par_map_half_fun;
}

/// An integer device type, for the bitwise ops.
pub trait Int: Num {
    fn and(self, b: Self) -> Self;
    fn or(self, b: Self) -> Self;
    fn xor(self, b: Self) -> Self;
    fn not(self) -> Self;
    /// Shifts by `b` bits; shifting out every bit (or by a negative amount) gives 0.
    fn shl(self, b: Self) -> Self;
    fn shr(self, b: Self) -> Self;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            #[inline] fn and(self, b: Self) -> Self { self & b }
            #[inline] fn or(self, b: Self) -> Self { self | b }
            #[inline] fn xor(self, b: Self) -> Self { self ^ b }
            #[inline] fn not(self) -> Self { !self }
            #[inline] fn shl(self, b: Self) -> Self {
                u32::try_from(b).ok().and_then(|b| self.checked_shl(b)).unwrap_or(0)
            }
            #[inline] fn shr(self, b: Self) -> Self {
                u32::try_from(b).ok().and_then(|b| self.checked_shr(b)).unwrap_or(0)
            }
        }
    )*};
}
int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// The error function in f64.
///
/// Below |x| = 2.5 it sums the Maclaurin series `2/sqrt(pi) * sum (-1)^n x^(2n+1) /
/// (n! (2n+1))`, which there needs at most ~40 terms and loses under two digits to
/// cancellation; above, it takes `1 - erfc(x)` with erfc from its continued fraction
/// `exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))`, evaluated backwards
/// from a fixed depth that converges to f64 precision for x >= 2.5. From |x| = 6 on,
/// erf is 1 to f64 precision. Both are far inside the 1e-6 relative error an f32 result
/// needs.
pub fn erf(x: f64) -> f64 {
    const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a >= 6.0 {
        return 1f64.copysign(x);
    }
    if a < 2.5 {
        let x2 = x * x;
        let mut term = x; // (-1)^n x^(2n+1) / n!
        let mut sum = x;
        for n in 1..80 {
            term *= -x2 / n as f64;
            let t = term / (2 * n + 1) as f64;
            sum += t;
            if t.abs() <= 1e-17 * sum.abs() {
                break;
            }
        }
        return TWO_OVER_SQRT_PI * sum;
    }
    let mut f = a;
    for k in (1..=60).rev() {
        f = a + (k as f64 * 0.5) / f;
    }
    let erfc = (-a * a).exp() / (f * std::f64::consts::PI.sqrt());
    (1.0 - erfc).copysign(x)
}

/// The inverse error function in f64: Giles' single-precision approximation ("Approximating
/// the erfinv function", GPU Computing Gems, 2011) as the start, then two Newton steps on
/// `erf(x) - y` with the library's f64 [`erf`], which take it to f64 accuracy well inside
/// the open interval (the inputs are float32 at most). ±1 give ±infinity, outside NaN.
pub fn erfinv(y: f64) -> f64 {
    if y.is_nan() || !(-1.0..=1.0).contains(&y) {
        return f64::NAN;
    }
    if y.abs() == 1.0 {
        return f64::INFINITY.copysign(y);
    }
    let w = -((1.0 - y) * (1.0 + y)).ln();
    let p = if w < 5.0 {
        let w = w - 2.5;
        [
            3.432_739_39e-7,
            -3.523_387_7e-6,
            -4.391_506_54e-6,
            2.185_808_7e-4,
            -1.253_725_03e-3,
            -4.177_681_64e-3,
            2.466_407_27e-1,
            1.501_409_41,
        ]
        .iter()
        .fold(2.810_226_36e-8, |p, &k| k + p * w)
    } else {
        let w = w.sqrt() - 3.0;
        [
            1.009_505_58e-4,
            1.349_343_22e-3,
            -3.673_428_44e-3,
            5.739_507_73e-3,
            -7.622_461_3e-3,
            9.438_870_47e-3,
            1.001_674_06,
            2.832_976_82,
        ]
        .iter()
        .fold(-2.002_142_57e-4, |p, &k| k + p * w)
    };
    let mut x = p * y;
    for _ in 0..2 {
        let step = (erf(x) - y) / (std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp());
        if step.is_finite() {
            x -= step;
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_and_remainders() {
        assert_eq!(Num::div(7i32, -2), -3, "truncates toward zero");
        assert_eq!(Num::div(7i32, 0), 0, "no trap on zero");
        assert_eq!(Num::div(i8::MIN, -1), i8::MIN, "wraps");
        assert_eq!((-7i32).fmod(3), -1);
        assert_eq!((-7i32).modulo(3), 2);
        assert_eq!(7i32.modulo(-3), -2);
        assert_eq!(7u8.modulo(3), 1);
        assert_eq!(5i64.modulo(0), 0);
        assert_eq!((-4.5f32).modulo(2.0), 1.5);
        assert_eq!((-4.5f32).fmod(2.0), -0.5);
        assert_eq!(Num::add(200u8, 100), 44, "wraps");
    }

    #[test]
    fn nan_propagates_through_max_and_min() {
        assert!(f32::NAN.max_nan(1.0).is_nan());
        assert!(1.0f32.max_nan(f32::NAN).is_nan());
        assert!(1.0f32.min_nan(f32::NAN).is_nan());
        assert_eq!(3i16.max_nan(-2), 3);
    }

    #[test]
    fn conversions_follow_numpy() {
        assert_eq!(convert::<f32, i32>(-2.7), -2);
        assert_eq!(convert::<f32, i8>(300.0), 44, "through int64, wrapped");
        assert_eq!(convert::<i32, u8>(-1), 255);
        assert_eq!(convert::<f64, u64>(1.5e19), 15_000_000_000_000_000_000);
        assert_eq!(convert::<f64, f16>(1.0 / 3.0), f16::from_f64(1.0 / 3.0));
        assert_eq!(convert::<i64, f32>(16_777_217), 16_777_216.0);
        assert_eq!(convert::<f32, i32>(f32::NAN), 0);
        assert_eq!(f16::from_f32(-0.0).sign().to_f32(), 0.0);
        assert_eq!((-5i8).sign(), -1);
    }

    #[test]
    fn shifts_past_the_width_are_zero() {
        assert_eq!(1u8.shl(7), 128);
        assert_eq!(1u8.shl(8), 0);
        assert_eq!(128u8.shr(9), 0);
    }

    #[test]
    fn erf_matches_reference_values() {
        // From Python's math.erf.
        for (x, want) in [
            (0.0, 0.0),
            (1e-8, 1.1283791670955126e-08),
            (0.5, 0.5204998778130465),
            (-1.0, -0.8427007929497149),
            (2.0, 0.9953222650189527),
            (2.5, 0.999593047982555),
            (3.0, 0.9999779095030014),
            (4.5, 0.9999999998033839),
        ] {
            let got = erf(x);
            assert!(
                (got - want).abs() <= 1e-15 + 1e-13 * want.abs(),
                "erf({x}) = {got}"
            );
        }
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert!(erf(f64::NAN).is_nan());
    }
}
