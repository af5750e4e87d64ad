//! Element types as arithmetic compute functions (reductions, cumulative sums, scatter reductions)
//! see them: each [`Num`] element type accumulates in an [`Acc`] type.
//!
//! Half-precision types accumulate in f32 and are rounded once per output element, as ONNX
//! Runtime does; f32 and f64 accumulate in themselves. Integers accumulate in i64 or u64
//! with wrapping arithmetic and are truncated back: arithmetic modulo 2^64 truncated to
//! the type's width is arithmetic modulo the width, so sums and products wrap exactly as
//! numpy's do in the element type.

use half::{bf16, f16};

use crate::ops::Elem;

/// What a value accumulates in: its arithmetic, with NaN propagated by `max` and `min`
/// as numpy's reductions do.
pub trait Acc: Copy + Send + Sync + PartialOrd + std::fmt::Debug + 'static {
    const ZERO: Self;
    const ONE: Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn ln(self) -> Self;
    fn exp(self) -> Self;
    /// Division by a count; an integer divided by 0 is 0 rather than a panic.
    fn div_count(self, n: usize) -> Self;
    fn is_nan(self) -> bool;
    fn maximum(self, o: Self) -> Self {
        if o > self || o.is_nan() { o } else { self }
    }
    fn minimum(self, o: Self) -> Self {
        if o < self || o.is_nan() { o } else { self }
    }
}

macro_rules! float_acc {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn add(self, o: Self) -> Self { self + o }
            fn sub(self, o: Self) -> Self { self - o }
            fn mul(self, o: Self) -> Self { self * o }
            fn abs(self) -> Self { self.abs() }
            fn sqrt(self) -> Self { self.sqrt() }
            fn ln(self) -> Self { self.ln() }
            fn exp(self) -> Self { self.exp() }
            fn div_count(self, n: usize) -> Self { self / n as $t }
            fn is_nan(self) -> bool { self.is_nan() }
        }
    )*};
}
float_acc!(f32, f64);

macro_rules! int_acc {
    ($($t:ty => $abs:expr),*) => {$(
        impl Acc for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn abs(self) -> Self { $abs(self) }
            // Transcendentals of integers go through f64 and truncate, as numpy's
            // float result cast back to the integer type does.
            fn sqrt(self) -> Self { (self as f64).sqrt() as $t }
            fn ln(self) -> Self { (self as f64).ln() as $t }
            fn exp(self) -> Self { (self as f64).exp() as $t }
            fn div_count(self, n: usize) -> Self { self.checked_div(n as $t).unwrap_or(0) }
            fn is_nan(self) -> bool { false }
        }
    )*};
}
int_acc!(i64 => i64::wrapping_abs, u64 => std::convert::identity);

/// An element type arithmetic compute functions compute on.
pub trait Num: Elem + PartialOrd {
    type Acc: Acc;
    fn to_acc(self) -> Self::Acc;
    /// Rounds (floats) or truncates (integers) an accumulator back to the element type.
    fn from_acc(a: Self::Acc) -> Self;
    /// The identity of `max`: -inf, or the type's least value.
    fn lowest() -> Self;
    /// The identity of `min`: +inf, or the type's greatest value.
    fn highest() -> Self;
}

macro_rules! num_prim {
    ($acc:ty, $lo:expr, $hi:expr; $($t:ty),*) => {$(
        impl Num for $t {
            type Acc = $acc;
            fn to_acc(self) -> $acc { self as $acc }
            fn from_acc(a: $acc) -> Self { a as $t }
            fn lowest() -> Self { $lo }
            fn highest() -> Self { $hi }
        }
    )*};
}
num_prim!(f32, f32::NEG_INFINITY, f32::INFINITY; f32);
num_prim!(f64, f64::NEG_INFINITY, f64::INFINITY; f64);
num_prim!(i64, <Self>::MIN, <Self>::MAX; i8, i16, i32, i64);
num_prim!(u64, <Self>::MIN, <Self>::MAX; u8, u16, u32, u64);

macro_rules! num_half {
    ($($t:ty),*) => {$(
        impl Num for $t {
            type Acc = f32;
            fn to_acc(self) -> f32 { self.to_f32() }
            fn from_acc(a: f32) -> Self { <$t>::from_f32(a) }
            fn lowest() -> Self { <$t>::NEG_INFINITY }
            fn highest() -> Self { <$t>::INFINITY }
        }
    )*};
}
num_half!(f16, bf16);

/// Orders values with NaN above everything (and equal to NaN): a total order for
/// sorting, where `partial_cmp` alone would leave NaN unordered.
pub fn total_cmp<T: PartialOrd>(a: &T, b: &T) -> std::cmp::Ordering {
    #[allow(clippy::eq_op)]
    let nan = |v: &T| v != v;
    a.partial_cmp(b).unwrap_or_else(|| nan(a).cmp(&nan(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_wrap_in_their_type() {
        let a = 100i8.to_acc().add(100i8.to_acc());
        assert_eq!(i8::from_acc(a), -56);
        let p = 200u8.to_acc().mul(2u8.to_acc());
        assert_eq!(u8::from_acc(p), 144);
        assert_eq!(5i64.div_count(0), 0);
        assert_eq!((-3i64).abs(), 3);
    }

    #[test]
    fn halves_round_once_and_nan_propagates() {
        // 2048 + 1 + 1 rounded per step would stay 2048 (f16 steps by 2 there).
        let s = [2048.0f32, 1.0, 1.0]
            .iter()
            .fold(0.0f32, |a, &v| a.add(f16::from_f32(v).to_acc()));
        assert_eq!(f16::from_acc(s), f16::from_f32(2050.0));
        assert!(Acc::maximum(1.0f32, f32::NAN).is_nan());
        assert!(Acc::minimum(f32::NAN, 1.0f32).is_nan());
        assert_eq!(total_cmp(&f32::NAN, &1.0), std::cmp::Ordering::Greater);
        assert_eq!(total_cmp(&-0.0f32, &0.0), std::cmp::Ordering::Equal);
    }
}
