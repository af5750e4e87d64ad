//! Accuracy of the vector math against f64 references, in ulps of the float32 result, over
//! a sweep of float32 bit patterns of both signs (every 997th, from the smallest subnormal
//! to the largest finite value: about 4.3 million inputs), on every instruction set this
//! CPU has and on the baseline formulas without FMA.

use super::{Fun, map, map_with};
use crate::ops::elementwise::num::erf as erf64;

/// Every 997th float32 bit pattern below infinity, positive and negative, then the
/// special values.
fn sweep() -> Vec<f32> {
    let mut v: Vec<f32> = (0..0x7f80_0000u32)
        .step_by(997)
        .map(f32::from_bits)
        .flat_map(|x| [x, -x])
        .collect();
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1.0,
        -1.0,
    ]);
    v
}

/// |y - r| in units of the last place of r rounded to float32 (2^-149 in the subnormal
/// range), 0 when both are the same NaN or infinity, infinite when only one is.
fn ulps(y: f32, r: f64) -> f64 {
    if r.is_nan() || y.is_nan() {
        return if r.is_nan() && y.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let rf = r as f32;
    if rf.is_infinite() || y.is_infinite() {
        return if rf == y { 0.0 } else { f64::INFINITY };
    }
    let e = if r == 0.0 {
        -126
    } else {
        (r.abs().log2().floor() as i32).max(-126)
    };
    (y as f64 - r).abs() / 2f64.powi(e - 23)
}

/// The largest error of `fun` over the sweep on each path, with the input where it was
/// worst, checked against `bound` (one ulp more for the baseline formulas without FMA); `skip` leaves inputs out (each test says why).
fn check(fun: Fun, reference: impl Fn(f64) -> f64, bound: f64, skip: impl Fn(f32) -> bool) {
    let x: Vec<f32> = sweep().into_iter().filter(|&v| !skip(v)).collect();
    let r: Vec<f64> = x.iter().map(|&v| reference(v as f64)).collect();
    let mut out = vec![f32::from_bits(0x7fc0_dead); x.len()];
    type Path = fn(Fun, &[f32], &mut [f32]);
    let paths: [(&str, Path, f64); 2] = [
        ("detected", map, 0.0),
        (
            "baseline without FMA",
            |f, x, o| map_with::<false>(f, x, o),
            1.0,
        ),
    ];
    for (name, path, slack) in paths {
        let bound = bound + slack;
        path(fun, &x, &mut out);
        let (worst, at) = out
            .iter()
            .zip(&r)
            .zip(&x)
            .map(|((&y, &r), &x)| (ulps(y, r), x))
            .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
        assert!(
            worst <= bound,
            "{fun:?} ({name}): {worst} ulp at x = {at:e} (bits {:#x}): got {:e}, want {:e}",
            at.to_bits(),
            out[x.iter().position(|v| v.to_bits() == at.to_bits()).unwrap()],
            reference(at as f64)
        );
    }
}

/// `|fun(x) - reference(x)| <= tol` for the inputs of the sweep `keep` keeps: the ranges
/// where a bound in ulps means nothing (results rounded below the subnormals).
fn check_abs(fun: Fun, reference: impl Fn(f64) -> f64, keep: impl Fn(f32) -> bool, tol: f64) {
    let x: Vec<f32> = sweep().into_iter().filter(|&v| keep(v)).collect();
    let mut out = vec![f32::NAN; x.len()];
    map(fun, &x, &mut out);
    for (&x, &y) in x.iter().zip(&out) {
        let want = reference(x as f64);
        let ok = (y as f64 - want).abs() <= tol || (y.is_nan() && want.is_nan());
        assert!(ok, "{fun:?}({x:e}) = {y:e}, want {want:e}");
    }
}

/// `|fun(x) / reference(x) - 1| <= tol` for the inputs of the sweep `keep` keeps
/// (subnormal results within 2e-43).
fn check_rel(fun: Fun, reference: impl Fn(f64) -> f64, keep: impl Fn(f32) -> bool, tol: f64) {
    let x: Vec<f32> = sweep().into_iter().filter(|&v| keep(v)).collect();
    let mut out = vec![f32::NAN; x.len()];
    map(fun, &x, &mut out);
    for (&x, &y) in x.iter().zip(&out) {
        let want = reference(x as f64);
        // Subnormal results have fewer digits than any relative bound: 2e-43 absolute.
        let err = (y as f64 - want).abs();
        let ok = err <= tol * want.abs()
            || (want.abs() < 1.2e-38 && err <= 2e-43)
            || (y.is_nan() && want.is_nan());
        assert!(ok, "{fun:?}({x:e}) = {y:e}, want {want:e}");
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

#[test]
fn exp_within_1_ulp() {
    check(Fun::Exp, f64::exp, 1.0, |_| false);
}

#[test]
fn log_within_1_ulp() {
    check(Fun::Log, f64::ln, 1.0, |_| false);
}

#[test]
fn erf_within_3_ulp() {
    check(Fun::Erf, erf64, 3.0, |_| false);
}

#[test]
fn tanh_within_2_ulp() {
    check(Fun::Tanh, f64::tanh, 2.0, |_| false);
}

#[test]
fn sigmoid_within_2_5_ulp() {
    check(Fun::Sigmoid, sigmoid, 2.5, |_| false);
}

#[test]
fn softplus_swish_mish_within_3_5_ulp() {
    check(Fun::Softplus, softplus, 3.5, |_| false);
    // Where e^x is subnormal (x < -87.3), x e^x is not, but is computed from the
    // subnormal: within 2e-43 absolute (|x| times the subnormal's ulp).
    let subnormal = |x: f32| x < -87.3;
    let swish = |x: f64| x * sigmoid(x);
    check(Fun::Swish(1.0), swish, 3.5, subnormal);
    check_abs(Fun::Swish(1.0), swish, subnormal, 2e-43);
    // beta x is a float32 product, as in the graph the op replaces.
    let swish = |x: f64| x * sigmoid((1.702f32 * x as f32) as f64);
    check(Fun::Swish(1.702), swish, 3.5, |x| x < -87.3 / 1.702);
    let mish = |x: f64| x * softplus(x).tanh();
    check(Fun::Mish, mish, 3.5, subnormal);
    check_abs(Fun::Mish, mish, subnormal, 2e-43);
}

#[test]
fn gelu_within_6_ulp() {
    let gelu = |x: f64| 0.5 * x * (1.0 + erf64(x * std::f64::consts::FRAC_1_SQRT_2));
    // Below x = -2 the result is x/2 erfc(-x/√2), whose exponent (x²/2 plus the fit)
    // is rounded to float32: a relative error of up to x²/2 * 2^-24, checked as such.
    // From x/√2 = -4 down, 1 + erf(x/√2) is under 1.6e-8 and rt2 rounds the tail:
    // checked in absolute terms.
    let tail = |x: f32| x * std::f32::consts::FRAC_1_SQRT_2 <= -4.0;
    check(Fun::Gelu, gelu, 6.0, |x| x < -2.0);
    check_rel(Fun::Gelu, gelu, |x| x < -2.0 && !tail(x), 3e-6);
    check_abs(Fun::Gelu, gelu, tail, 5e-8);
    let tanh_form = |x: f64| {
        let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
        // 1 + tanh(u) as 2 sigmoid(2u), which does not cancel in f64 either.
        x * sigmoid(2.0 * u)
    };
    // Below x = -1 the result is about x e^(2u), u a float32 of magnitude up to 2|x|³/50:
    // its rounding, not the formula, sets the error there.
    check(Fun::GeluTanh, tanh_form, 3.5, |x| x < -1.0);
    check_rel(Fun::GeluTanh, tanh_form, |x| x < -1.0, 2e-5);
}

/// Every lane of a vector and the scalar tail: lengths around the vector widths, outputs
/// poisoned first and compared with one-element calls.
#[test]
fn every_length_writes_every_element() {
    let x: Vec<f32> = (0..67).map(|i| (i as f32 - 33.0) * 0.37).collect();
    for n in 0..x.len() {
        let mut out = vec![f32::NAN; n];
        map(Fun::Erf, &x, &mut out);
        for (i, &y) in out.iter().enumerate() {
            let mut one = [f32::NAN];
            map(Fun::Erf, &x[i..], &mut one);
            assert_eq!(y.to_bits(), one[0].to_bits(), "n = {n}, i = {i}");
        }
    }
}

#[test]
fn values_at_known_points() {
    let x = [0.0f32, 1.0, -1.0, 0.5, 2.0];
    let mut y = [0.0f32; 5];
    map(Fun::Erf, &x, &mut y);
    assert_eq!(
        y,
        [0.0, 0.842_700_8, -0.842_700_8, 0.520_499_9, 0.995_322_3]
    );
    map(Fun::Exp, &x, &mut y);
    assert_eq!(
        y,
        [
            1.0,
            std::f32::consts::E,
            0.367_879_45,
            1.648_721_2,
            7.389_056
        ]
    );
    map(Fun::Log, &[1.0, 2.0, 0.0, -1.0, f32::INFINITY], &mut y);
    assert_eq!(&y[..2], &[0.0, std::f32::consts::LN_2]);
    assert_eq!(y[2], f32::NEG_INFINITY);
    assert!(y[3].is_nan());
    assert_eq!(y[4], f32::INFINITY);
}

/// Gate values for the recurrent-cell tests: spread over [-10, 10), with NaN, the
/// infinities, both zeros and ±100 mixed in; `seed` picks the sequence.
fn gate_value(i: usize, seed: u32) -> f32 {
    let special = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        100.0,
        -100.0,
    ];
    let bits = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed);
    if bits.is_multiple_of(53) {
        special[(bits as usize / 53) % special.len()]
    } else {
        (bits % 20_000) as f32 / 1000.0 - 10.0
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The fused LSTM step gives the bits of its passes taken apart (the gates added and
/// clipped, sigmoid and tanh mapped, the state updated), clipped or not, for widths that
/// fill whole vectors and leave tails, with NaN and infinite gates among them; a cell
/// state that is not zero to begin with is carried.
#[test]
fn the_fused_lstm_cell_is_its_passes_taken_apart() {
    for n in [1usize, 7, 16, 33, 128] {
        for clip in [f32::INFINITY, 3.0] {
            let rec: Vec<f32> = (0..4 * n).map(|i| gate_value(i, 1)).collect();
            let pre: Vec<f32> = (0..4 * n).map(|i| gate_value(i, 7)).collect();
            let c0: Vec<f32> = (0..n).map(|i| gate_value(i, 13) / 4.0).collect();
            let (mut c, mut h) = (c0.clone(), vec![f32::from_bits(0x7fc0_dead); n]);
            super::lstm_cell(&rec, &pre, clip, &mut c, &mut h);

            let gates: Vec<f32> = rec
                .iter()
                .zip(&pre)
                .map(|(r, p)| (r + p).clamp(-clip, clip))
                .collect();
            let mut act = vec![0.0f32; 4 * n];
            map(Fun::Sigmoid, &gates[..3 * n], &mut act[..3 * n]);
            map(Fun::Tanh, &gates[3 * n..], &mut act[3 * n..]);
            let want_c: Vec<f32> = (0..n)
                .map(|j| act[2 * n + j] * c0[j] + act[j] * act[3 * n + j])
                .collect();
            let mut want_h = vec![0.0f32; n];
            map(Fun::Tanh, &want_c, &mut want_h);
            for (v, o) in want_h.iter_mut().zip(&act[n..2 * n]) {
                *v *= o;
            }
            assert_eq!(bits(&c), bits(&want_c), "c, n {n} clip {clip}");
            assert_eq!(bits(&h), bits(&want_h), "h, n {n} clip {clip}");
        }
    }
}

/// The GRU step's fused passes give the bits of the passes taken apart (as the step took
/// them before): the gates added, clipped and mapped; the candidate with and without
/// linear_before_reset and a recurrent bias, clipped or not, then the state.
#[test]
fn the_fused_gru_passes_are_their_passes_taken_apart() {
    for n in [1usize, 7, 16, 33, 128] {
        for clip in [f32::INFINITY, 3.0] {
            let rec: Vec<f32> = (0..3 * n).map(|i| gate_value(i, 3)).collect();
            let pre: Vec<f32> = (0..3 * n).map(|i| gate_value(i, 5)).collect();
            let rb: Vec<f32> = (0..n).map(|i| gate_value(i, 11)).collect();
            let h0: Vec<f32> = (0..n).map(|i| gate_value(i, 17) / 8.0).collect();
            let mut zr = vec![f32::NAN; 2 * n];
            super::sigmoid_gates(&rec, &pre, clip, &mut zr);
            let sums: Vec<f32> = rec[..2 * n]
                .iter()
                .zip(&pre)
                .map(|(r, p)| (r + p).clamp(-clip, clip))
                .collect();
            let mut want_zr = vec![0.0f32; 2 * n];
            map(Fun::Sigmoid, &sums, &mut want_zr);
            assert_eq!(bits(&zr), bits(&want_zr), "gates, n {n} clip {clip}");
            let (z, r) = zr.split_at(n);
            for linear in [true, false] {
                for bias in [Some(&rb[..]), None] {
                    let mut h = h0.clone();
                    super::gru_state(
                        &pre[2 * n..],
                        &rec[2 * n..],
                        &zr,
                        bias,
                        linear,
                        clip,
                        &mut h,
                    );
                    let b = |j: usize| bias.map_or(0.0, |b| b[j]);
                    let (x, g) = (&pre[2 * n..], &rec[2 * n..]);
                    let args: Vec<f32> = (0..n)
                        .map(|j| match linear {
                            true => (x[j] + r[j] * (g[j] + b(j))).clamp(-clip, clip),
                            false => (x[j] + g[j] + b(j)).clamp(-clip, clip),
                        })
                        .collect();
                    let mut cand = vec![0.0f32; n];
                    map(Fun::Tanh, &args, &mut cand);
                    let want: Vec<f32> = (0..n)
                        .map(|j| (1.0 - z[j]) * cand[j] + z[j] * h0[j])
                        .collect();
                    let case = format!("n {n} clip {clip} linear {linear} bias {}", bias.is_some());
                    assert_eq!(bits(&h), bits(&want), "{case}");
                }
            }
        }
    }
}
