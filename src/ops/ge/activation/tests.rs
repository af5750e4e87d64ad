//! GE's activations and TensorFlow's fake quantization against formulas written out here.

use half::f16;

use crate::ops::testing::{infer_for_test, run, run_f32, run_f32_with_shape, try_run};
use crate::ops::{Attr, DType, Tensor, TensorMeta, UNKNOWN, assert_close};

fn t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor], outputs: usize) -> String {
    try_run(op, attrs, inputs, outputs).unwrap_err().to_string()
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

#[test]
fn glu_gates_the_first_half_by_the_sigmoid_of_the_second() {
    let x = t(&[2, 4], &[1., 2., 0., -1., 3., -3., 2., 0.5]);
    let (shape, y) = run_f32_with_shape("GLU", &[], std::slice::from_ref(&x));
    assert_eq!(shape, [2, 2]);
    assert_close(
        &y,
        &[
            sigmoid(0.) as f32,
            (2. * sigmoid(-1.)) as f32,
            (3. * sigmoid(2.)) as f32,
            (-3. * sigmoid(0.5)) as f32,
        ],
    );
    let (shape, y) = run_f32_with_shape("GLU", &[("dim", Attr::Int(0))], std::slice::from_ref(&x));
    assert_eq!(shape, [1, 4]);
    assert_close(
        &y,
        &[
            (1. * sigmoid(3.)) as f32,
            (2. * sigmoid(-3.)) as f32,
            0.0,
            -sigmoid(0.5) as f32,
        ],
    );
    let xh = Tensor::from_vec(&[2], &[f16::from_f32(3.0), f16::from_f32(1.0)]);
    let out = run("GLU", &[], &[xh], 1);
    assert_eq!(
        out[0].slice::<f16>().unwrap(),
        [f16::from_f64(3.0 * sigmoid(1.0))]
    );
    assert!(err("GLU", &[], &[t(&[3], &[1., 2., 3.])], 1).contains("odd"));
    assert!(err("GLU", &[("dim", Attr::Int(2))], &[x], 1).contains("dim"));
}

#[test]
fn relu_v2_gives_y_and_a_byte_mask_where_x_is_positive() {
    let out = run("ReluV2", &[], &[t(&[4], &[-1., 0., 2., -0.5])], 2);
    assert_eq!(out[0].slice::<f32>().unwrap(), [0., 0., 2., 0.]);
    assert_eq!(out[1].dtype, DType::U8);
    assert_eq!(out[1].slice::<u8>().unwrap(), [0, 0, 1, 0]);
    let out = run("ReluV2", &[], &[Tensor::from_vec(&[3], &[-3i32, 5, 0])], 2);
    assert_eq!(out[0].slice::<i32>().unwrap(), [0, 5, 0]);
    assert_eq!(out[1].slice::<u8>().unwrap(), [0, 1, 0]);
    let h = Tensor::from_vec(&[2], &[f16::from_f32(-2.0), f16::from_f32(1.5)]);
    let out = run("ReluV2", &[], &[h], 2);
    assert_eq!(
        out[0].slice::<f16>().unwrap(),
        [f16::ZERO, f16::from_f32(1.5)]
    );
    let mut b = Tensor::from_vec(&[1], &[1u8]);
    b.dtype = DType::Bool;
    assert!(err("ReluV2", &[], &[b], 2).contains("bool"));
}

#[test]
fn threshold_v2_keeps_x_above_the_threshold_else_value() {
    let x = t(&[4], &[0.5, 1.0, 1.5, -2.0]);
    let y = run_f32(
        "ThresholdV2",
        &[],
        &[x.clone(), t(&[1], &[1.0]), t(&[1], &[9.0])],
    );
    assert_eq!(y, [9., 9., 1.5, 9.]);
    // value left out: 0.
    let y = run_f32("ThresholdV2", &[], &[x.clone(), t(&[1], &[1.0])]);
    assert_eq!(y, [0., 0., 1.5, 0.]);
    let xi = Tensor::from_vec(&[3], &[1i64, 5, 3]);
    let one = |v: i64| Tensor::from_vec(&[1], &[v]);
    let out = run("ThresholdV2", &[], &[xi, one(3), one(-1)], 1);
    assert_eq!(out[0].slice::<i64>().unwrap(), [-1, 5, -1]);
    assert!(err("ThresholdV2", &[], &[x.clone(), t(&[2], &[1., 2.])], 1).contains("one element"));
    assert!(err("ThresholdV2", &[], &[x, Tensor::from_vec(&[1], &[1i32])], 1).contains("input 1"));
}

/// TensorFlow's nudged fake quantization, written out in f64 for a range that nudges
/// exactly.
fn fq(x: f64, min: f64, max: f64, qmin: f64, qmax: f64) -> f32 {
    let scale = (max - min) / (qmax - qmin);
    let zp = (qmin - min / scale).clamp(qmin, qmax).round();
    let (lo, hi) = ((qmin - zp) * scale, (qmax - zp) * scale);
    (((x.clamp(lo, hi) - lo) / scale + 0.5).floor() * scale + lo) as f32
}

#[test]
fn fake_quant_args_nudges_the_range_and_rounds_to_its_grid() {
    // No value sits on a rounding tie, where float32 and f64 may differ.
    let xs = [-7.0f32, -5.9, -0.02, 0.0, 0.03, 1.0, 5.98, 7.0];
    let x = t(&[8], &xs);
    // Defaults: [-6, 6] on 8 bits.
    let y = run_f32("FakeQuantWithMinMaxArgs", &[], std::slice::from_ref(&x));
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| fq(f64::from(v), -6.0, 6.0, 0.0, 255.0))
        .collect();
    assert_close(&y, &want);
    // Zero stays exactly zero after nudging.
    assert_eq!(y[3], 0.0);
    // A range whose zero point nudges: [-0.1, 1.0] on 4 bits, narrow.
    let attrs = [
        ("min", Attr::Float(-0.1)),
        ("max", Attr::Float(1.0)),
        ("num_bits", Attr::Int(4)),
        ("narrow_range", Attr::Bool(true)),
    ];
    let y = run_f32("FakeQuantWithMinMaxArgs", &attrs, std::slice::from_ref(&x));
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| fq(f64::from(v), -0.1, 1.0, 1.0, 15.0))
        .collect();
    assert_close(&y, &want);
    assert!(
        err(
            "FakeQuantWithMinMaxArgs",
            &[("num_bits", Attr::Int(1))],
            std::slice::from_ref(&x),
            1
        )
        .contains("num_bits")
    );
    assert!(
        err(
            "FakeQuantWithMinMaxArgs",
            &[("min", Attr::Float(7.0))],
            &[x],
            1
        )
        .contains("min")
    );
}

#[test]
fn fake_quant_vars_read_min_and_max_from_inputs() {
    let xs = [-1.0f32, 0.1, 0.26, 2.5];
    let x = t(&[4], &xs);
    let y = run_f32(
        "FakeQuantWithMinMaxVars",
        &[],
        &[x.clone(), t(&[1], &[-0.5]), t(&[1], &[2.0])],
    );
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| fq(f64::from(v), -0.5, 2.0, 0.0, 255.0))
        .collect();
    assert_close(&y, &want);
    // Per channel: the last dim's two channels have their own ranges.
    let x2 = t(&[2, 2], &[0.3, 0.3, -1.0, 5.0]);
    let y = run_f32(
        "FakeQuantWithMinMaxVarsPerChannel",
        &[("num_bits", Attr::Int(2))],
        &[x2, t(&[2], &[0.0, -1.0]), t(&[2], &[1.0, 2.0])],
    );
    let want = [
        fq(0.3, 0.0, 1.0, 0.0, 3.0),
        fq(0.3, -1.0, 2.0, 0.0, 3.0),
        fq(-1.0, 0.0, 1.0, 0.0, 3.0),
        fq(5.0, -1.0, 2.0, 0.0, 3.0),
    ];
    assert_close(&y, &want);
    let e = err(
        "FakeQuantWithMinMaxVarsPerChannel",
        &[],
        &[x.clone(), t(&[3], &[0.; 3]), t(&[3], &[1.; 3])],
        1,
    );
    assert!(e.contains("last dim"), "{e}");
    let e = err(
        "FakeQuantWithMinMaxVars",
        &[],
        &[x, t(&[2], &[0.; 2]), t(&[1], &[1.])],
        1,
    );
    assert!(e.contains("one element"), "{e}");
}

#[test]
fn inference_keeps_unknown_dims() {
    let x = TensorMeta::new(DType::F32, &[UNKNOWN, 6]);
    let out = infer_for_test("GLU", std::slice::from_ref(&x), &[], &[], 1).unwrap();
    assert_eq!(out[0].shape, Some(vec![UNKNOWN, 3]));
    let out = infer_for_test(
        "GLU",
        std::slice::from_ref(&x),
        &[],
        &[("dim", Attr::Int(0))],
        1,
    )
    .unwrap();
    assert_eq!(out[0].shape, Some(vec![UNKNOWN, 6]));
    let u = TensorMeta::unknown_rank(DType::F16);
    let out = infer_for_test("ReluV2", std::slice::from_ref(&u), &[], &[], 2).unwrap();
    assert_eq!(out[1], TensorMeta::unknown_rank(DType::U8));
}
