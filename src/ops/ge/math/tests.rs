//! GE's elementwise math against values computed by hand or with Python's `math` (the
//! prototypes' formulas), float16, integers, broadcasting, and the required attributes.

use half::f16;

use crate::ops::testing::{run, run_f32, try_run};
use crate::ops::{Attr, Tensor, assert_close};

fn f(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn v(x: &[f32]) -> Tensor {
    f(&[x.len()], x)
}

fn one(op: &str, attrs: &[(&str, Attr)], x: &[f32]) -> Vec<f32> {
    run_f32(op, attrs, &[v(x)])
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> String {
    try_run(op, attrs, inputs, 1).unwrap_err().to_string()
}

#[test]
fn unary_functions_follow_their_formulas() {
    let x = [-3.0f32, -0.5, 0.0, 0.25, 2.0, 7.0];
    let each =
        |g: fn(f64) -> f64| -> Vec<f32> { x.iter().map(|&v| g(f64::from(v)) as f32).collect() };
    assert_close(&one("Rsqrt", &[], &[0.25, 4.0, 100.0]), &[2.0, 0.5, 0.1]);
    assert_close(&one("Square", &[], &x), &each(|v| v * v));
    assert_close(&one("Inv", &[], &[0.5, -4.0]), &[2.0, -0.25]);
    assert_close(
        &one("Log1p", &[], &[1e-7, 1.0]),
        &[9.999_999_5e-8, std::f32::consts::LN_2],
    );
    assert_close(&one("Expm1", &[], &[1e-7, 1.0]), &[1e-7, 1.718_281_8]);
    assert_eq!(
        one("Rint", &[], &[0.5, 1.5, 2.5, -0.5, -1.7]),
        [0.0, 2.0, 2.0, -0.0, -2.0]
    );
    let softplus = |v: f64| (1.0 + v.exp()).ln();
    assert_close(&one("BNLL", &[], &x), &each(softplus));
    assert_close(
        &one("LogSigmoid", &[], &x),
        &each(|v| -(1.0 + (-v).exp()).ln()),
    );
    assert_close(
        &one("FastGelu", &[], &x),
        &each(|v| v / (1.0 + (-1.702 * v.abs()).exp()) * (0.851 * (v - v.abs())).exp()),
    );
    assert_eq!(
        one("Relu6", &[], &[-1.0, 3.0, 6.5, f32::INFINITY])[..],
        [0.0, 3.0, 6.0, 6.0]
    );
    assert!(one("Relu6", &[], &[f32::NAN])[0].is_nan());
    assert_eq!(
        one("Relu6D", &[("scale", Attr::Float(0.5))], &[-1.0, 2.0, 4.0])[..],
        [0.0, 2.0, 3.0]
    );
    // FastGeluV2 is GELU within its polynomial's error (GELU from Python's math.erf).
    let gelu = |v: f64| 0.5 * v * (1.0 + libm_erf(v / std::f64::consts::SQRT_2));
    for (g, w) in one("FastGeluV2", &[], &x).iter().zip(each(gelu)) {
        assert!((g - w).abs() < 0.02, "{g} vs {w}");
    }
    assert_close(
        &one("FastGeluV2", &[], &[1.0]),
        &[
            (1.0 * (1.0 * (-0.1444 * (std::f64::consts::FRAC_1_SQRT_2 - 1.769).powi(2) + 0.5)
                + 0.5)) as f32,
        ],
    );
    // SoftplusV2: beta scales x, above the threshold x passes.
    let sp = one(
        "SoftplusV2",
        &[("beta", Attr::Float(2.0)), ("threshold", Attr::Float(5.0))],
        &[-1.0, 0.5, 2.4, 3.0],
    );
    assert_close(
        &sp,
        &[
            ((1.0 + (-2.0f64).exp()).ln() / 2.0) as f32,
            ((1.0 + 1f64.exp()).ln() / 2.0) as f32,
            ((1.0 + 4.8f64.exp()).ln() / 2.0) as f32,
            3.0,
        ],
    );
    assert_close(
        &one("CeluV2", &[("alpha", Attr::Float(2.0))], &[-1.0, 1.0]),
        &[(2.0 * ((-0.5f64).exp() - 1.0)) as f32, 1.0],
    );
    assert_eq!(
        one("HardShrink", &[], &[-0.6, -0.5, 0.2, 0.7])[..],
        [-0.6, 0.0, 0.0, 0.7]
    );
    assert_close(
        &one(
            "SoftShrink",
            &[("lambd", Attr::Float(1.0))],
            &[-3.0, 0.5, 2.5],
        ),
        &[-2.0, 0.0, 1.5],
    );
    let th = [
        ("threshold", Attr::Float(1.0)),
        ("value", Attr::Float(-9.0)),
    ];
    assert_eq!(
        one("ThresholdV2D", &th, &[0.5, 1.0, 1.5])[..],
        [-9.0, -9.0, 1.5]
    );
    assert_eq!(
        one("Threshold", &[], &[-1.0, 0.0, 0.1])[..],
        [0.0, 0.0, 1.0]
    );
    let n2n = [
        ("nan", Attr::Float(0.5)),
        ("posinf", Attr::Float(9.0)),
        ("neginf", Attr::Float(-9.0)),
    ];
    assert_eq!(
        one(
            "NanToNum",
            &n2n,
            &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3.0]
        )[..],
        [0.5, 9.0, -9.0, 3.0]
    );
    assert_eq!(
        one("Muls", &[("value", Attr::Float(-2.0))], &[1.5, 3.0])[..],
        [-3.0, -6.0]
    );
    assert_eq!(
        one("Adds", &[("value", Attr::Float(0.5))], &[1.5, 3.0])[..],
        [2.0, 3.5]
    );
}

fn libm_erf(x: f64) -> f64 {
    crate::ops::elementwise::num::erf(x)
}

#[test]
fn erfinv_inverts_erf() {
    // Python: scipy.special.erfinv.
    let got = one(
        "Erfinv",
        &[],
        &[0.0, 0.5, -0.9, 0.99, 0.999_999, 1.0, -1.0, 1.5],
    );
    assert_close(
        &got[..5],
        &[0.0, 0.476_936_28, -1.163_087_2, 1.821_386_4, 3.457_074_7],
    );
    assert_eq!(got[5], f32::INFINITY);
    assert_eq!(got[6], f32::NEG_INFINITY);
    assert!(got[7].is_nan());
    // In f64, against a bisection of Python's math.erf.
    for (y, want) in [
        (-0.999f64, -2.326_753_765_513_535_7),
        (-0.3, -0.272_462_714_726_754_4),
        (1e-6, 8.862_269_254_529_899e-7),
        (0.42, 0.391_302_087_802_832_04),
        (0.9999, 2.751_063_905_711_984_3),
    ] {
        let x = crate::ops::elementwise::num::erfinv(y);
        assert!((x - want).abs() <= 1e-12 * want.abs(), "{y}: {x}");
    }
}

#[test]
fn float16_computes_in_float32_and_rounds_once() {
    let x: Vec<f16> = [0.1f32, 0.7, 3.0]
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    let out = run("Rsqrt", &[], &[Tensor::from_vec(&[3], &x)], 1);
    let got = out[0].slice::<f16>().unwrap().to_vec();
    let want: Vec<f16> = x
        .iter()
        .map(|v| f16::from_f32(1.0 / v.to_f32().sqrt()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn integers_square_clamp_and_take_the_value_in_their_type() {
    let x = Tensor::from_vec(&[4], &[-3i32, 2, 7, 100_000]);
    let sq = run("Square", &[], std::slice::from_ref(&x), 1);
    assert_eq!(
        sq[0].slice::<i32>().unwrap(),
        [9, 4, 49, 100_000i32.wrapping_mul(100_000)]
    );
    let r6 = run("Relu6", &[], std::slice::from_ref(&x), 1);
    assert_eq!(r6[0].slice::<i32>().unwrap(), [0, 2, 6, 6]);
    let inv = run(
        "Inv",
        &[],
        &[Tensor::from_vec(&[5], &[1i32, -1, 2, -3, 0])],
        1,
    );
    assert_eq!(inv[0].slice::<i32>().unwrap(), [1, -1, 0, 0, 0]);
    let m = run(
        "Muls",
        &[("value", Attr::Float(2.7))],
        std::slice::from_ref(&x),
        1,
    );
    assert_eq!(m[0].slice::<i32>().unwrap(), [-6, 4, 14, 200_000]);
    assert!(err("Rsqrt", &[], &[x]).contains("int32"));
}

#[test]
fn fills_keep_the_shape_and_type() {
    let x = Tensor::from_vec(&[2, 2], &[1.5f32, f32::NAN, 3.0, 4.0]);
    assert_eq!(
        run_f32(
            "Fills",
            &[("value", Attr::Float(2.5))],
            std::slice::from_ref(&x)
        ),
        [2.5; 4]
    );
    assert_eq!(run_f32("OnesLike", &[], std::slice::from_ref(&x)), [1.0; 4]);
    assert_eq!(
        run_f32("ZerosLike", &[], std::slice::from_ref(&x)),
        [0.0; 4]
    );
    let mut b = Tensor::from_vec(&[3], &[0u8, 1, 0]);
    b.dtype = crate::ops::DType::Bool;
    let ones = run("OnesLike", &[], &[b], 1);
    assert_eq!(ones[0].dtype, crate::ops::DType::Bool);
    assert_eq!(ones[0].slice::<u8>().unwrap(), [1, 1, 1]);
    let i = Tensor::from_vec(&[2], &[5i64, 6]);
    let z = run("ZerosLike", &[], &[i], 1);
    assert_eq!(z[0].slice::<i64>().unwrap(), [0, 0]);
}

#[test]
fn binary_ops_broadcast_and_follow_tensorflow() {
    let a = f(&[2, 3], &[-7.0, 7.0, -7.5, 0.0, 5.0, 3.0]);
    let b = f(&[3], &[2.0, -2.0, 0.0]);
    let ab = [a.clone(), b.clone()];
    assert_eq!(
        run_f32("SquaredDifference", &[], &ab),
        [81.0, 81.0, 56.25, 4.0, 49.0, 9.0]
    );
    let fd = run_f32("FloorDiv", &[], &ab);
    assert_eq!(fd[..2], [-4.0, -4.0]);
    assert_eq!(fd[2], f32::NEG_INFINITY);
    let fm = run_f32("FloorMod", &[], &ab);
    assert_eq!(fm[..2], [1.0, -1.0]);
    assert!(fm[2].is_nan());
    assert_eq!(run_f32("TruncateDiv", &[], &ab)[..2], [-3.0, -3.0]);
    assert_eq!(run_f32("TruncateMod", &[], &ab)[..2], [-1.0, 1.0]);
    let dnn = run_f32("DivNoNan", &[], &ab);
    assert_eq!(dnn, [-3.5, -3.5, 0.0, 0.0, -2.5, 0.0]);
    let inf = [f(&[2], &[f32::INFINITY, f32::NAN]), f(&[2], &[0.0, 0.0])];
    assert_eq!(run_f32("MulNoNan", &[], &inf), [0.0, 0.0]);
    assert_close(
        &run_f32("Atan2", &[], &[v(&[1.0, -1.0]), v(&[-1.0, -1.0])]),
        &[
            (3.0 * std::f32::consts::FRAC_PI_4),
            -3.0 * std::f32::consts::FRAC_PI_4,
        ],
    );
    let xlogy = run_f32(
        "Xlogy",
        &[],
        &[v(&[0.0, 2.0, 0.0]), v(&[0.0, 3.0, f32::NAN])],
    );
    assert_close(&xlogy[..2], &[0.0, 2.0 * 3f32.ln()]);
    assert!(
        xlogy[2].is_nan(),
        "ops-math: a NaN x2 is NaN even where x1 is 0"
    );
    assert_eq!(
        run_f32(
            "Axpy",
            &[("alpha", Attr::Float(0.5))],
            &[v(&[1.0, 2.0]), v(&[4.0, -4.0])]
        ),
        [3.0, 0.0]
    );
    assert!(err("Axpy", &[], &[v(&[1.0]), v(&[1.0])]).contains("alpha"));
    assert!(
        err(
            "SquaredDifference",
            &[],
            &[f(&[2], &[1.0, 2.0]), f(&[3], &[1.0; 3])]
        )
        .contains("broadcast")
    );
}

#[test]
fn integer_division_floors_or_truncates() {
    let a = Tensor::from_vec(&[4], &[-7i32, 7, -7, 5]);
    let b = Tensor::from_vec(&[4], &[2i32, -2, -2, 0]);
    let go = |op: &str| {
        run(op, &[], &[a.clone(), b.clone()], 1)[0]
            .slice::<i32>()
            .unwrap()
            .to_vec()
    };
    assert_eq!(go("FloorDiv"), [-4, -4, 3, 0]);
    assert_eq!(go("FloorMod"), [1, -1, -1, 0]);
    assert_eq!(go("TruncateDiv"), [-3, -3, 3, 0]);
    assert_eq!(go("TruncateMod"), [-1, 1, -1, 0]);
    assert_eq!(go("DivNoNan"), [-3, -3, 3, 0]);
    assert_eq!(go("SquaredDifference"), [81, 81, 25, 25]);
}

#[test]
fn comparisons_and_lerp() {
    let ne = run(
        "NotEqual",
        &[],
        &[v(&[1.0, f32::NAN, 3.0]), v(&[1.0, f32::NAN, 2.0])],
        1,
    );
    assert_eq!(ne[0].slice::<u8>().unwrap(), [0, 1, 1]);
    let a = v(&[1.0, 1.0, f32::NAN, f32::INFINITY, 100.0]);
    let b = v(&[1.000_001, 1.1, f32::NAN, f32::INFINITY, 100.001]);
    let close = run("IsClose", &[], &[a.clone(), b.clone()], 1);
    assert_eq!(close[0].slice::<u8>().unwrap(), [1, 0, 0, 1, 1]);
    let nan_eq = run("IsClose", &[("equal_nan", Attr::Bool(true))], &[a, b], 1);
    assert_eq!(nan_eq[0].slice::<u8>().unwrap()[2], 1);
    let l = run_f32(
        "Lerp",
        &[],
        &[v(&[0.0, 10.0]), v(&[10.0, 20.0]), f(&[1], &[0.25])],
    );
    assert_eq!(l, [2.5, 12.5]);
}

#[test]
fn variadic_and_renamed_forms() {
    let (a, b, c) = (v(&[1.0, -2.0]), v(&[3.0, 4.0]), v(&[0.5, 9.0]));
    let abc = [a, b, c];
    assert_eq!(run_f32("AddN", &[("N", Attr::Int(3))], &abc), [4.5, 11.0]);
    assert_eq!(run_f32("MaxN", &[], &abc), [3.0, 9.0]);
    assert!(err("AddN", &[("N", Attr::Int(2))], &abc).contains("N"));
    let clip = run_f32(
        "ClipByValueV2",
        &[],
        &[v(&[-5.0, 0.5, 5.0]), v(&[-1.0]), v(&[1.0])],
    );
    assert_eq!(clip, [-1.0, 0.5, 1.0]);
}
