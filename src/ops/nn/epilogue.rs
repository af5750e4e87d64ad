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
}
