//! Comparing a computed tensor with an expected one for `rt2 run --check`: the verdict
//! under a tolerance and the worst errors, for a person to judge how close it came.
//!
//! Floats pass where `|got - want| <= atol + rtol * |want|` for every element, with NaN
//! equal to NaN and an infinity equal only to itself (the rule of `numpy.isclose` with
//! `equal_nan`, and of the ONNX backend runner). Integers and bools must be equal.
//! The worst absolute error is over all elements; the worst relative error,
//! `|got - want| / |want|`, over those whose expected value is not zero (the absolute
//! error covers the others). A NaN where a number is expected, or the reverse, counts as
//! a mismatch with an infinite error.

use crate::ops::{DType, HostTensor};
use half::{bf16, f16};

/// Where floats must be close: `|got - want| <= atol + rtol * |want|`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

/// How a computed tensor compares with the expected one.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Every element is within tolerance (and the type and shape agree).
    pub ok: bool,
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    /// Elements beyond tolerance.
    pub mismatches: usize,
    /// The first element beyond tolerance, or the type or shape difference.
    pub detail: Option<String>,
}

/// Compares `got` with `want` under `tol`.
pub fn compare(got: &HostTensor, want: &HostTensor, tol: Tolerance) -> Comparison {
    let failed = |detail: String| Comparison {
        ok: false,
        max_abs_err: f64::INFINITY,
        max_rel_err: f64::INFINITY,
        mismatches: 0,
        detail: Some(detail),
    };
    if got.dtype != want.dtype {
        return failed(format!("{} where {} was expected", got.dtype, want.dtype));
    }
    if got.shape != want.shape {
        return failed(format!(
            "shape {:?} where {:?} was expected",
            got.shape, want.shape
        ));
    }
    if got.data.len() != want.data.len() {
        return failed(format!(
            "{} bytes where {} were expected",
            got.data.len(),
            want.data.len()
        ));
    }
    let (g, w) = (elements(got), elements(want));
    let exact = !is_float(got.dtype);
    let mut c = Comparison {
        ok: true,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        mismatches: 0,
        detail: None,
    };
    let size = got.dtype.size();
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let (abs, close) = if exact {
            // Byte equality, so u64 values past f64's integers still compare exactly.
            let same = got.data[i * size..(i + 1) * size] == want.data[i * size..(i + 1) * size];
            ((a - b).abs(), same)
        } else {
            float_error(a, b, tol)
        };
        c.max_abs_err = c.max_abs_err.max(abs);
        if b != 0.0 && !b.is_nan() {
            c.max_rel_err = c.max_rel_err.max(abs / b.abs());
        }
        if !close {
            c.ok = false;
            c.mismatches += 1;
            if c.detail.is_none() {
                c.detail = Some(format!("element {i} is {a}, expected {b}"));
            }
        }
    }
    c
}

/// How far float `got` is from `want`, and whether it is within `tol`: NaN matches only
/// NaN, an infinity only itself (both with an infinite error otherwise), any other value
/// when `|got - want| <= atol + rtol * |want|`.
pub fn float_error(got: f64, want: f64, tol: Tolerance) -> (f64, bool) {
    if got.is_nan() || want.is_nan() {
        let both = got.is_nan() && want.is_nan();
        (if both { 0.0 } else { f64::INFINITY }, both)
    } else if got == want {
        (0.0, true)
    } else if got.is_infinite() || want.is_infinite() {
        (f64::INFINITY, false)
    } else {
        let d = (got - want).abs();
        (d, d <= tol.atol + tol.rtol * want.abs())
    }
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::Bf16)
}

/// The elements as f64 (u64 past 2^53 rounded: used for the size of an error only).
pub fn elements(t: &HostTensor) -> Vec<f64> {
    let chunks = t.data.chunks_exact(t.dtype.size());
    let two = |c: &[u8]| u16::from_le_bytes([c[0], c[1]]);
    match t.dtype {
        DType::F32 => chunks
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")) as f64)
            .collect(),
        DType::F64 => chunks
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect(),
        DType::F16 => chunks.map(|c| f16::from_bits(two(c)).to_f64()).collect(),
        DType::Bf16 => chunks.map(|c| bf16::from_bits(two(c)).to_f64()).collect(),
        DType::U64 => chunks
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as f64)
            .collect(),
        _ => (0..t.data.len() / t.dtype.size())
            .map(|k| t.int_at(k).unwrap_or(0) as f64)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> HostTensor {
        HostTensor {
            dtype: DType::F32,
            shape: vec![v.len() as i64],
            data: bytemuck::cast_slice(v).to_vec().into(),
        }
    }

    const TOL: Tolerance = Tolerance {
        rtol: 1e-3,
        atol: 1e-4,
    };

    #[track_caller]
    fn check(got: &HostTensor, want: &HostTensor, ok: bool, abs: f64, rel: f64, bad: usize) {
        let c = compare(got, want, TOL);
        assert_eq!(c.ok, ok, "{c:?}");
        assert!((c.max_abs_err - abs).abs() <= 1e-9 * abs.max(1.0), "{c:?}");
        assert!((c.max_rel_err - rel).abs() <= 1e-9 * rel.max(1.0), "{c:?}");
        assert_eq!(c.mismatches, bad, "{c:?}");
    }

    #[test]
    fn floats_within_atol_plus_rtol() {
        let want = f32s(&[1.0, -2.0, 0.0, f32::NAN, f32::INFINITY]);
        check(&want, &want, true, 0.0, 0.0, 0);
        // 1.0 + 5e-4 is within 1e-4 + 1e-3 * 1; 0 + 5e-5 within atol.
        let near = f32s(&[1.0005, -2.0, 5e-5, f32::NAN, f32::INFINITY]);
        let c = compare(&near, &want, TOL);
        assert!(c.ok, "{c:?}");
        assert!((c.max_abs_err - 5e-4).abs() < 1e-7, "{c:?}");
        assert!((c.max_rel_err - 5e-4).abs() < 1e-7, "{c:?}");
        let far = f32s(&[1.01, -2.0, 1e-3, 0.0, f32::INFINITY]);
        let c = compare(&far, &want, TOL);
        assert!(!c.ok);
        assert_eq!(c.mismatches, 3, "{c:?}");
        assert_eq!(
            c.max_abs_err,
            f64::INFINITY,
            "a number where NaN was expected"
        );
        assert_eq!(
            c.detail.as_deref(),
            Some("element 0 is 1.0099999904632568, expected 1")
        );
        let neg_inf = f32s(&[1.0, -2.0, 0.0, f32::NAN, f32::NEG_INFINITY]);
        assert!(!compare(&neg_inf, &want, TOL).ok);
    }

    #[test]
    fn ints_and_bools_exact() {
        let i = |v: &[i64]| HostTensor {
            dtype: DType::I64,
            shape: vec![v.len() as i64],
            data: bytemuck::cast_slice(v).to_vec().into(),
        };
        check(&i(&[1, 2, 3]), &i(&[1, 2, 3]), true, 0.0, 0.0, 0);
        check(&i(&[1, 2, 7]), &i(&[1, 2, 3]), false, 4.0, 4.0 / 3.0, 1);
        let u = |v: &[u64]| HostTensor {
            dtype: DType::U64,
            shape: vec![v.len() as i64],
            data: bytemuck::cast_slice(v).to_vec().into(),
        };
        // Equal as f64, different as integers.
        assert!(!compare(&u(&[u64::MAX]), &u(&[u64::MAX - 1]), TOL).ok);
        let b = |v: &[u8]| HostTensor {
            dtype: DType::Bool,
            shape: vec![v.len() as i64],
            data: v.to_vec().into(),
        };
        check(&b(&[1, 0]), &b(&[1, 1]), false, 1.0, 1.0, 1);
    }

    #[test]
    fn half_types() {
        let h = |d: DType, v: &[f32]| HostTensor {
            dtype: d,
            shape: vec![v.len() as i64],
            data: v
                .iter()
                .flat_map(|&x| match d {
                    DType::F16 => f16::from_f32(x).to_le_bytes(),
                    _ => bf16::from_f32(x).to_le_bytes(),
                })
                .collect(),
        };
        for d in [DType::F16, DType::Bf16] {
            check(&h(d, &[1.0, 2.0]), &h(d, &[1.0, 2.0]), true, 0.0, 0.0, 0);
            check(&h(d, &[1.5, 2.0]), &h(d, &[1.0, 2.0]), false, 0.5, 0.5, 1);
        }
    }

    #[test]
    fn type_and_shape_must_agree() {
        let a = f32s(&[1.0, 2.0]);
        let mut b = a.clone();
        b.shape = vec![1, 2];
        let c = compare(&b, &a, TOL);
        assert!(!c.ok && c.detail.unwrap().contains("shape [1, 2]"));
        let mut d = a.clone();
        d.dtype = DType::I32;
        d.data.to_mut().truncate(8);
        let c = compare(&d, &a, TOL);
        assert!(!c.ok && c.detail.unwrap().contains("int32 where float32"));
    }
}
