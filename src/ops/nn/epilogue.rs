//! The activation a producing op applies to its own output: what lowering's fusion
//! (`crate::lower::fuse`) leaves of a `Conv -> Relu` pair.
//!
//! A CNN follows nearly every convolution with a piecewise-linear activation. Run as its
//! own op, that activation is a second pass over the convolution's whole output (read,
//! compare, write: as long as the output's memory traffic, a third of SqueezeNet's
//! non-conv time) and a second tensor of memory. Applied by the convolution as it stores
//! each tile, it is a few compares on data in registers or L1.
//!
//! The fused node carries the activation in two attributes, which GE's and ONNX's op
//! definitions leave free (GE prefixes its private attributes with `_`, rt2 its own with
//! `_rt2_`, which lowering hands to the op):
//!
//! | `_rt2_fused_activation` | `_rt2_fused_activation_params` | y = |
//! |---|---|---|
//! | `Relu` | | `x < 0 ? 0 : x` |
//! | `LeakyRelu` | `[alpha]` | `x < 0 ? alpha x : x` |
//! | `Clip` | `[min, max]` | `x < min ? min : x`, then `> max ? max : that` |
//! | `HardSigmoid` | `[alpha, beta]` | `alpha x + beta` clamped to `[0, 1]` |
//! | `HardSwish` | | `x HardSigmoid(x; 1/6, 1/2)` |
//!
//! Each formula is the standalone op's (`elementwise::unary`, `binary::compute_clip`),
//! operation for operation, in float32: a fused float32 node gives the bits the two
//! nodes gave (NaN passes through every comparison as it does there). Lowering fuses
//! float32 outputs only. On a node of another type (a graph written by hand), float64
//! computes the formula in float64 with the parameters widened, and float16 and bfloat16
//! in float32 on the product, before it is rounded once.

use crate::ops::{Attr, InferCtx, OpError};

/// The activation attribute's name.
pub const ACTIVATION_ATTR: &str = "_rt2_fused_activation";
/// Its parameters' attribute name.
pub const PARAMS_ATTR: &str = "_rt2_fused_activation_params";

/// A fused activation ([the module](self)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Epilogue {
    /// `x < lo ? lo : x`, then `x > hi ? hi : x` (Relu: lo 0, hi +inf; an absent bound
    /// is infinite, which no comparison passes).
    Clip {
        lo: f32,
        hi: f32,
    },
    LeakyRelu {
        alpha: f32,
    },
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    HardSwish,
}

impl Epilogue {
    /// The node's fused activation, `None` when it has none.
    pub fn read(ctx: &InferCtx) -> Result<Option<Epilogue>, OpError> {
        let name = ctx.attr_str(ACTIVATION_ATTR, "")?;
        if name.is_empty() {
            return Ok(None);
        }
        // Read in place, not through `attr_floats`, which copies the list: this runs on
        // every launch of a fused node.
        let mut buf = [0f32; 2];
        let params: &[f32] = match ctx.attrs.get(PARAMS_ATTR) {
            None => &[],
            Some(Attr::Floats(v)) if v.len() <= 2 => {
                for (b, v) in buf.iter_mut().zip(v) {
                    *b = *v as f32;
                }
                &buf[..v.len()]
            }
            Some(other) => {
                return Err(ctx.attr_error(PARAMS_ATTR, format!("{other:?} is not 0 to 2 floats")));
            }
        };
        let want = match name {
            "Relu" | "HardSwish" => 0,
            "LeakyRelu" => 1,
            _ => 2,
        };
        let e = match (name, params) {
            ("Relu", []) => Epilogue::Clip {
                lo: 0.0,
                hi: f32::INFINITY,
            },
            ("LeakyRelu", &[alpha]) => Epilogue::LeakyRelu { alpha },
            ("Clip", &[lo, hi]) => Epilogue::Clip { lo, hi },
            ("HardSigmoid", &[alpha, beta]) => Epilogue::HardSigmoid { alpha, beta },
            ("HardSwish", []) => Epilogue::HardSwish,
            ("Relu" | "LeakyRelu" | "Clip" | "HardSigmoid" | "HardSwish", p) => {
                return Err(ctx.attr_error(
                    PARAMS_ATTR,
                    format!("{name} takes {want} parameters, not {}", p.len()),
                ));
            }
            _ => {
                return Err(ctx.attr_error(
                    ACTIVATION_ATTR,
                    format!("{name:?} is not Relu, LeakyRelu, Clip, HardSigmoid or HardSwish"),
                ));
            }
        };
        Ok(Some(e))
    }

    /// The activation of one value, in float32 (`R` = f32, the standalone ops' bits) or
    /// float64 (the parameters widened).
    #[inline(always)]
    pub fn one<R: Real>(self, v: R) -> R {
        let (zero, one) = (R::from(0.0), R::from(1.0));
        let hard_sigmoid = |x: R, alpha: f32, beta: f32| {
            let y = R::from(alpha) * x + R::from(beta);
            if y < zero {
                zero
            } else if y > one {
                one
            } else {
                y
            }
        };
        match self {
            Epilogue::Clip { lo, hi } => {
                let v = if v < R::from(lo) { R::from(lo) } else { v };
                if v > R::from(hi) { R::from(hi) } else { v }
            }
            Epilogue::LeakyRelu { alpha } => {
                if v < zero {
                    R::from(alpha) * v
                } else {
                    v
                }
            }
            Epilogue::HardSigmoid { alpha, beta } => hard_sigmoid(v, alpha, beta),
            Epilogue::HardSwish => v * hard_sigmoid(v, (1.0f64 / 6.0) as f32, 0.5),
        }
    }

    /// [`Epilogue::apply`] on float32, in the widest vectors this CPU has (the crate is
    /// built for baseline x86-64, where `apply`'s loop is SSE2), with the same bits.
    pub fn apply_f32(self, v: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(isa) = crate::ops::simd::Isa::detect() {
            // SAFETY: `Isa::detect` found `isa` on this CPU.
            return unsafe { x86::apply(isa, self, v) };
        }
        self.apply(v)
    }

    /// Applies the activation to `v` in place. One loop per kind, each a branch-free
    /// select the compiler vectorizes.
    #[inline]
    pub fn apply<R: Real>(self, v: &mut [R]) {
        match self {
            Epilogue::Clip { .. } => v.iter_mut().for_each(|x| *x = self.one(*x)),
            Epilogue::LeakyRelu { .. } => v.iter_mut().for_each(|x| *x = self.one(*x)),
            Epilogue::HardSigmoid { .. } => v.iter_mut().for_each(|x| *x = self.one(*x)),
            Epilogue::HardSwish => v.iter_mut().for_each(|x| *x = self.one(*x)),
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Epilogue {
    /// [`Epilogue::one`] on each lane of `v`, with the same bits: the same operations in
    /// the same order (a product and a sum where `one` has them, never fused into an
    /// FMA), each comparison-and-pick one `max`, `min` or blend whose rule for NaN and
    /// for equal operands is the comparison's.
    ///
    /// # Safety
    /// This CPU has `S`'s set.
    #[inline(always)]
    pub(crate) unsafe fn vector<S: crate::ops::simd::Simd>(self, v: S::V) -> S::V {
        // SAFETY: the caller ensures `S`'s set, all these methods need.
        unsafe {
            // `y < lo ? lo : y` is `max(lo, y)` (lo when lo > y, else y, NaN included),
            // and `y > hi ? hi : y` is `min(hi, y)`.
            let clamp = |y: S::V, lo: f32, hi: f32| S::min(S::splat(hi), S::max(S::splat(lo), y));
            let hard_sigmoid = |x: S::V, alpha: f32, beta: f32| {
                clamp(S::add(S::mul(S::splat(alpha), x), S::splat(beta)), 0.0, 1.0)
            };
            match self {
                Epilogue::Clip { lo, hi } => clamp(v, lo, hi),
                Epilogue::LeakyRelu { alpha } => {
                    S::select_lt(v, S::zero(), S::mul(S::splat(alpha), v), v)
                }
                Epilogue::HardSigmoid { alpha, beta } => hard_sigmoid(v, alpha, beta),
                Epilogue::HardSwish => S::mul(v, hard_sigmoid(v, (1.0f64 / 6.0) as f32, 0.5)),
            }
        }
    }

    /// [`Epilogue::vector`] on every vector of a kernel's `R` x `V` tile of sums, with
    /// the kind matched once, outside the loops: a match per vector (a branch in the
    /// unrolled loop) left a tile kernel's sums on the stack, a store after every FMA.
    ///
    /// # Safety
    /// This CPU has `S`'s set.
    #[inline(always)]
    pub(crate) unsafe fn tile<S: crate::ops::simd::Simd, const R: usize, const V: usize>(
        self,
        acc: &mut [[S::V; V]; R],
    ) {
        /// `k` on every vector; `k`'s kind is a constant where this inlines.
        ///
        /// # Safety
        /// This CPU has `S`'s set.
        #[inline(always)]
        unsafe fn each<S: crate::ops::simd::Simd, const R: usize, const V: usize>(
            acc: &mut [[S::V; V]; R],
            k: Epilogue,
        ) {
            for row in acc.iter_mut() {
                for a in row.iter_mut() {
                    // SAFETY: the set is this CPU's (the contract).
                    *a = unsafe { k.vector::<S>(*a) };
                }
            }
        }
        // SAFETY: the set is this CPU's (the contract).
        unsafe {
            match self {
                Epilogue::Clip { .. } => each::<S, R, V>(acc, self),
                Epilogue::LeakyRelu { .. } => each::<S, R, V>(acc, self),
                Epilogue::HardSigmoid { .. } => each::<S, R, V>(acc, self),
                Epilogue::HardSwish => each::<S, R, V>(acc, self),
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Epilogue;
    use crate::ops::simd::{Avx2, Avx512, Isa, Simd};

    /// # Safety
    /// This CPU has `isa`.
    pub(super) unsafe fn apply(isa: Isa, e: Epilogue, v: &mut [f32]) {
        // SAFETY: the caller's `isa` is this CPU's.
        unsafe {
            match isa {
                Isa::Avx512 => avx512(e, v),
                Isa::Avx2 => avx2(e, v),
            }
        }
    }

    /// # Safety
    /// This CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512(e: Epilogue, v: &mut [f32]) {
        // SAFETY: AVX-512F (the contract), all `Avx512` needs.
        unsafe { kinds::<Avx512>(e, v) }
    }

    /// # Safety
    /// This CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2(e: Epilogue, v: &mut [f32]) {
        // SAFETY: AVX2 and FMA (the contract), all `Avx2` needs.
        unsafe { kinds::<Avx2>(e, v) }
    }

    /// One loop per kind, so that none matches the kind per vector.
    ///
    /// # Safety
    /// This CPU has `S`'s set.
    #[inline(always)]
    unsafe fn kinds<S: Simd>(e: Epilogue, v: &mut [f32]) {
        // SAFETY: `S`'s set is this CPU's (the contract).
        unsafe {
            match e {
                Epilogue::Clip { .. } => each::<S>(e, v),
                Epilogue::LeakyRelu { .. } => each::<S>(e, v),
                Epilogue::HardSigmoid { .. } => each::<S>(e, v),
                Epilogue::HardSwish => each::<S>(e, v),
            }
        }
    }

    /// # Safety
    /// This CPU has `S`'s set.
    #[inline(always)]
    unsafe fn each<S: Simd>(e: Epilogue, v: &mut [f32]) {
        let mut chunks = v.chunks_exact_mut(S::LANES);
        // SAFETY: every load and store is of one chunk's LANES floats, or of the
        // remainder's `n < LANES` (masked); `S`'s set is this CPU's (the contract).
        unsafe {
            for c in &mut chunks {
                S::store(c.as_mut_ptr(), e.vector::<S>(S::load(c.as_ptr())));
            }
            let rest = chunks.into_remainder();
            let n = rest.len();
            if n > 0 {
                let x = S::load_first(rest.as_ptr(), n);
                S::store_first(rest.as_mut_ptr(), e.vector::<S>(x), n);
            }
        }
    }
}

/// The float types an epilogue computes in.
pub trait Real:
    Copy + PartialOrd + From<f32> + std::ops::Mul<Output = Self> + std::ops::Add<Output = Self>
{
}
impl Real for f32 {}
impl Real for f64 {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind computes its formula, NaN passing through and the bounds inclusive.
    #[test]
    fn each_activation_computes_its_formula() {
        let relu = Epilogue::Clip {
            lo: 0.0,
            hi: f32::INFINITY,
        };
        let mut v = [-2.0f32, -0.0, 0.5, 7.0, f32::NAN];
        relu.apply(&mut v);
        assert_eq!(v[..4], [0.0, -0.0, 0.5, 7.0]);
        assert!(v[4].is_nan());
        let mut v = [-2.0f32, 3.0, 6.5, f32::NAN];
        Epilogue::Clip { lo: 0.0, hi: 6.0 }.apply(&mut v);
        assert_eq!(v[..3], [0.0, 3.0, 6.0]);
        assert!(v[3].is_nan());
        let mut v = [-2.0f32, 3.0];
        Epilogue::LeakyRelu { alpha: 0.1 }.apply(&mut v);
        assert_eq!(v, [-0.2, 3.0]);
        let mut v = [-10.0f32, 0.0, 1.0, 10.0];
        Epilogue::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        }
        .apply(&mut v);
        assert_eq!(v, [0.0, 0.5, 0.2f32 * 1.0 + 0.5, 1.0]);
        let mut v = [-4.0f32, 1.0, 4.0];
        Epilogue::HardSwish.apply(&mut v);
        assert_eq!(v, [-0.0, 1.0 * ((1.0f64 / 6.0) as f32 + 0.5), 4.0]);
    }

    /// The vector activations give `one`'s bits on every instruction set this CPU has,
    /// for every kind, over zeros of both signs, NaN, infinities, subnormals and values
    /// around each kink.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_activations_give_the_scalar_bits() {
        use crate::ops::simd::Isa;

        let mut x = vec![
            0.0,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-42,
            -1e-42,
            f32::MAX,
            f32::MIN,
        ];
        for k in -40..=40 {
            x.push(k as f32 * 0.25);
            x.push(k as f32 * 0.25 + 1e-6);
        }
        x.resize(x.len().next_multiple_of(16), 3.0);
        let kinds = [
            Epilogue::Clip {
                lo: 0.0,
                hi: f32::INFINITY,
            },
            Epilogue::Clip { lo: -1.0, hi: 6.0 },
            Epilogue::Clip { lo: -0.0, hi: 0.0 },
            Epilogue::LeakyRelu { alpha: 0.01 },
            Epilogue::HardSigmoid {
                alpha: 0.2,
                beta: 0.5,
            },
            Epilogue::HardSwish,
        ];
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for e in kinds {
            let want: Vec<f32> = x.iter().map(|&v| e.one(v)).collect();
            for isa in Isa::available() {
                let mut got = x.clone();
                // SAFETY: `Isa::available` lists only sets this CPU has.
                unsafe { x86::apply(isa, e, &mut got) };
                assert_eq!(bits(&got), bits(&want), "{e:?} on {isa:?}");
            }
            // The slice form, with a remainder past the last whole vector.
            for n in [0, 1, 15, 17, x.len()] {
                let mut got = x[..n].to_vec();
                e.apply_f32(&mut got);
                assert_eq!(bits(&got), bits(&want[..n]), "{e:?}, {n} floats");
            }
        }
    }
}
