//! GE's normalizations against their prototypes' formulas written out here in f64.

use half::f16;

use crate::ops::testing::{run, run_f32, try_run};
use crate::ops::{Attr, DType, Tensor, TensorMeta, UNKNOWN, assert_close};

fn t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.slice::<f32>().unwrap().to_vec()
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor], outputs: usize) -> String {
    try_run(op, attrs, inputs, outputs).unwrap_err().to_string()
}

/// Mean and population variance of `v`.
fn mv(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
}

fn to32(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

#[test]
fn instance_norm_normalizes_each_image_channel_over_space() {
    // NCHW [1, 2, 1, 3]: channel 0 is [1, 2, 6], channel 1 is [0, 0, 3].
    let x = t(&[1, 2, 1, 3], &[1., 2., 6., 0., 0., 3.]);
    let (gamma, beta) = (t(&[2], &[2.0, 0.5]), t(&[2], &[1.0, -1.0]));
    let eps = 1e-3;
    let attrs = [
        ("data_format", Attr::Str("NCHW".into())),
        ("epsilon", Attr::Float(eps)),
    ];
    let out = run("InstanceNorm", &attrs, &[x, gamma.clone(), beta.clone()], 3);
    let (m0, v0) = mv(&[1., 2., 6.]);
    let (m1, v1) = mv(&[0., 0., 3.]);
    let f = |x: f64, m: f64, v: f64, g: f64, b: f64| (x - m) / (v + eps).sqrt() * g + b;
    let want: Vec<f64> = [1., 2., 6.]
        .iter()
        .map(|&x| f(x, m0, v0, 2.0, 1.0))
        .chain([0., 0., 3.].iter().map(|&x| f(x, m1, v1, 0.5, -1.0)))
        .collect();
    assert_close(&f32s(&out[0]), &to32(&want));
    assert_eq!(out[1].shape, [1, 2, 1, 1]);
    assert_close(&f32s(&out[1]), &[m0 as f32, m1 as f32]);
    assert_close(&f32s(&out[2]), &[v0 as f32, v1 as f32]);
    // The default NDHWC: channels last on 5-D x, epsilon 1e-6.
    let x = t(&[1, 1, 1, 2, 2], &[1., 10., 3., 20.]);
    let out = run("InstanceNorm", &[], &[x, gamma, beta], 3);
    assert_eq!(out[1].shape, [1, 1, 1, 1, 2]);
    assert_close(&f32s(&out[1]), &[2.0, 15.0]);
    assert_close(&f32s(&out[2]), &[1.0, 25.0]);
    let g = |x: f64, m: f64, v: f64, g: f64, b: f64| ((x - m) / (v + 1e-6).sqrt() * g + b) as f32;
    assert_close(
        &f32s(&out[0]),
        &[
            g(1., 2., 1., 2., 1.),
            g(10., 15., 25., 0.5, -1.),
            g(3., 2., 1., 2., 1.),
            g(20., 15., 25., 0.5, -1.),
        ],
    );
}

#[test]
fn instance_norm_in_float16_and_its_errors() {
    let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    let x = Tensor::from_vec(&[1, 1, 1, 4], &h(&[1., 2., 3., 4.]));
    let p = |v: f32| Tensor::from_vec(&[1], &h(&[v]));
    let attrs = [("data_format", Attr::Str("NCHW".into()))];
    let out = run("InstanceNorm", &attrs, &[x.clone(), p(1.0), p(0.0)], 3);
    assert_eq!(out[0].dtype, DType::F16);
    let y: Vec<f32> = out[0]
        .slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    let s = (1.25f64 + 1e-6).sqrt();
    let want: Vec<f32> = [1., 2., 3., 4.]
        .iter()
        .map(|&v: &f64| f16::from_f64((v - 2.5) / s).to_f32())
        .collect();
    assert_eq!(y, want);
    assert_eq!(out[1].slice::<f16>().unwrap()[0].to_f32(), 2.5);
    // NCHW takes 4-D x; an unknown format is refused by name.
    let e = err(
        "InstanceNorm",
        &attrs,
        &[t(&[2, 3], &[0.; 6]), t(&[3], &[1.; 3]), t(&[3], &[0.; 3])],
        3,
    );
    assert!(e.contains("rank 2"), "{e}");
    let bad = [("data_format", Attr::Str("NC1HWC0".into()))];
    assert!(err("InstanceNorm", &bad, &[x, p(1.), p(0.)], 3).contains("data_format"));
}

#[test]
fn rms_norm_scales_by_the_root_mean_square_over_gammas_dims() {
    let x = t(&[2, 3], &[1., 2., 3., -4., 0., 4.]);
    let gamma = t(&[3], &[1.0, 0.5, 2.0]);
    let out = run("RmsNorm", &[], &[x, gamma.clone()], 2);
    let r0 = 1.0 / ((1. + 4. + 9.) / 3.0f64 + 1e-6).sqrt();
    let r1 = 1.0 / ((16. + 0. + 16.) / 3.0f64 + 1e-6).sqrt();
    assert_close(
        &f32s(&out[0]),
        &to32(&[r0, 2. * r0 * 0.5, 3. * r0 * 2., -4. * r1, 0., 4. * r1 * 2.]),
    );
    assert_eq!(out[1].shape, [2, 1]);
    assert_eq!(out[1].dtype, DType::F32);
    assert_close(&f32s(&out[1]), &[r0 as f32, r1 as f32]);
    // float16 x and gamma: y rounds once, rstd stays float32.
    let xh = Tensor::from_vec(&[1, 2], &[f16::from_f32(3.0), f16::from_f32(4.0)]);
    let gh = Tensor::from_vec(&[2], &[f16::ONE, f16::ONE]);
    let out = run("RmsNorm", &[("epsilon", Attr::Float(0.0))], &[xh, gh], 2);
    let r = 1.0 / 12.5f64.sqrt();
    let y: Vec<f16> = out[0].slice::<f16>().unwrap().to_vec();
    assert_eq!(y, [f16::from_f64(3.0 * r), f16::from_f64(4.0 * r)]);
    assert_close(&f32s(&out[1]), &[r as f32]);
    let e = err(
        "RmsNorm",
        &[],
        &[t(&[2, 3], &[0.; 6]), t(&[4], &[1.; 4])],
        2,
    );
    assert!(e.contains("input 1"), "{e}");
}

#[test]
fn add_layer_norm_normalizes_the_sum_and_returns_it() {
    let x1 = t(&[2, 2], &[1., 2., 3., 4.]);
    let x2 = t(&[2, 2], &[1., 0., -1., 2.]);
    let (gamma, beta, bias) = (
        t(&[2], &[2., 1.]),
        t(&[2], &[0., 1.]),
        t(&[2], &[0.5, -0.5]),
    );
    let out = run(
        "AddLayerNorm",
        &[],
        &[x1.clone(), x2.clone(), gamma.clone(), beta.clone(), bias],
        4,
    );
    // Sums with bias: [2.5, 1.5] and [2.5, 5.5].
    let rows = [[2.5f64, 1.5], [2.5, 5.5]];
    let mut y = Vec::new();
    let (mut means, mut rstds) = (Vec::new(), Vec::new());
    for r in rows {
        let (m, v) = mv(&r);
        let rs = 1.0 / (v + 1e-5).sqrt();
        y.extend([(r[0] - m) * rs * 2.0, (r[1] - m) * rs + 1.0]);
        means.push(m);
        rstds.push(rs);
    }
    assert_close(&f32s(&out[0]), &to32(&y));
    assert_eq!(out[1].shape, [2, 1]);
    assert_close(&f32s(&out[1]), &to32(&means));
    assert_close(&f32s(&out[2]), &to32(&rstds));
    assert_eq!(f32s(&out[3]), [2.5, 1.5, 2.5, 5.5]);
    // Without bias the sum is x1 + x2.
    let out = run(
        "AddLayerNorm",
        &[("additional_output", Attr::Bool(true))],
        &[x1, x2, gamma, beta],
        4,
    );
    assert_eq!(f32s(&out[3]), [2., 2., 2., 6.]);
    assert_close(&f32s(&out[1]), &[2.0, 4.0]);
}

#[test]
fn deep_norm_normalizes_alpha_x_plus_gx() {
    let x = t(&[1, 3], &[10., 20., 30.]);
    let gx = t(&[1, 3], &[1., 0., -1.]);
    let (beta, gamma) = (t(&[3], &[0., 1., 2.]), t(&[3], &[1., 1., 0.5]));
    // Outputs mean, rstd, y; alpha defaults to 0.3.
    let out = run("DeepNorm", &[], &[x, gx, beta, gamma], 3);
    let r = [4.0f64, 6.0, 8.0];
    let (m, v) = mv(&r);
    let rs = 1.0 / (v + 1e-6).sqrt();
    assert_close(&f32s(&out[0]), &[m as f32]);
    assert_close(&f32s(&out[1]), &[rs as f32]);
    assert_close(
        &f32s(&out[2]),
        &to32(&[(4. - m) * rs, (6. - m) * rs + 1., (8. - m) * rs * 0.5 + 2.]),
    );
}

#[test]
fn layer_norm_v4_normalizes_the_trailing_dims_normalized_shape_names() {
    let x = t(&[2, 2], &[1., 3., 0., 4.]);
    let ns = Tensor::from_vec(&[1], &[2i32]);
    let out = run(
        "LayerNormV4",
        &[("epsilon", Attr::Float(0.0))],
        &[x.clone(), ns.clone()],
        3,
    );
    assert_eq!(f32s(&out[0]), [-1., 1., -1., 1.]);
    assert_eq!(f32s(&out[1]), [2., 2.]);
    assert_eq!(f32s(&out[2]), [1., 0.5]);
    let out = run(
        "LayerNormV4",
        &[("epsilon", Attr::Float(0.0))],
        &[x.clone(), ns, t(&[2], &[2., 3.]), t(&[2], &[1., 0.])],
        3,
    );
    assert_eq!(f32s(&out[0]), [-1., 3., -1., 3.]);
    // Two normalized dims: one mean over everything.
    let ns2 = Tensor::from_vec(&[2], &[2i32, 2]);
    let out = run("LayerNormV4", &[], &[x, ns2], 3);
    assert_eq!(out[1].shape, [1, 1]);
    assert_close(&f32s(&out[1]), &[2.0]);
}

#[test]
fn mvn_is_caffes_mean_variance_normalization() {
    // [1, 2, 1, 2]: channel 0 [1, 3], channel 1 [2, 6].
    let x = t(&[1, 2, 1, 2], &[1., 3., 2., 6.]);
    let y = run_f32("MVN", &[], std::slice::from_ref(&x));
    let e = 1e-9f64;
    assert_close(
        &y,
        &to32(&[-1. / (1. + e), 1. / (1. + e), -2. / (2. + e), 2. / (2. + e)]),
    );
    let y = run_f32(
        "MVN",
        &[("normalize_variance", Attr::Bool(false))],
        std::slice::from_ref(&x),
    );
    assert_eq!(y, [-1., 1., -2., 2.]);
    // Across channels: one mean 3 and variance 3.5 per image.
    let y = run_f32(
        "MVN",
        &[("across_channels", Attr::Bool(true))],
        std::slice::from_ref(&x),
    );
    let s = 3.5f64.sqrt() + e;
    assert_close(&y, &to32(&[-2. / s, 0., -1. / s, 3. / s]));
    let e = err("MVN", &[], &[t(&[2, 2, 2], &[0.; 8])], 1);
    assert!(e.contains("rank 3"), "{e}");
}

#[test]
fn mvn_v2_reduces_its_axes() {
    // Default axes [0, 2, 3]: per channel over the batch and space.
    let x = t(&[2, 1, 1, 2], &[1., 2., 3., 6.]);
    let y = run_f32("MVNV2", &[], std::slice::from_ref(&x));
    let (m, v) = mv(&[1., 2., 3., 6.]);
    let d = v.sqrt() + 1e-9;
    assert_close(
        &y,
        &to32(&[(1. - m) / d, (2. - m) / d, (3. - m) / d, (6. - m) / d]),
    );
    let y = run_f32(
        "MVNV2",
        &[("axes", Attr::Ints(vec![3])), ("eps", Attr::Float(1.0))],
        std::slice::from_ref(&x),
    );
    assert_close(&y, &to32(&[-0.5 / 1.5, 0.5 / 1.5, -1.5 / 2.5, 1.5 / 2.5]));
    let e = err("MVNV2", &[("axes", Attr::Ints(vec![4]))], &[x], 1);
    assert!(e.contains("axes"), "{e}");
}

#[test]
fn normalize_is_ssds_l2_normalization_with_scale() {
    let x = t(&[1, 2, 1, 2], &[3., 1., 4., 2.]);
    let y = run_f32("Normalize", &[], &[x.clone(), t(&[1], &[2.0])]);
    let n = (9. + 1. + 16. + 4. + 1e-10f64).sqrt();
    assert_close(&y, &to32(&[6. / n, 2. / n, 8. / n, 4. / n]));
    let attrs = [
        ("across_spatial", Attr::Bool(false)),
        ("channel_shared", Attr::Bool(false)),
        ("eps", Attr::Float(0.0)),
    ];
    let y = run_f32("Normalize", &attrs, &[x.clone(), t(&[2], &[1.0, 10.0])]);
    let (a, b) = (5.0f64, 5f64.sqrt());
    assert_close(&y, &to32(&[3. / a, 1. / b, 40. / a, 20. / b]));
    let e = err("Normalize", &attrs, &[x, t(&[1], &[1.0])], 1);
    assert!(e.contains("input 1"), "{e}");
}

#[test]
fn l2_normalize_divides_by_the_clamped_norm() {
    let x = t(&[2, 2], &[3., 4., 0.001, 0.]);
    let y = run_f32(
        "L2Normalize",
        &[("axis", Attr::Ints(vec![1]))],
        std::slice::from_ref(&x),
    );
    // Row 1's square sum 1e-6 is below eps 1e-4.
    assert_close(&y, &[0.6, 0.8, (0.001 / 1e-4f64.sqrt()) as f32, 0.]);
    // The default empty list: every dim.
    let y = run_f32("L2Normalize", &[], std::slice::from_ref(&x));
    let n = (25.000001f64).sqrt();
    assert_close(&y, &to32(&[3. / n, 4. / n, 0.001 / n, 0.]));
    let yh = run(
        "L2Normalize",
        &[],
        &[Tensor::from_vec(
            &[2],
            &[f16::from_f32(3.), f16::from_f32(4.)],
        )],
        1,
    );
    assert_eq!(
        yh[0].slice::<f16>().unwrap(),
        [f16::from_f64(0.6), f16::from_f64(0.8)]
    );
    assert!(err("L2Normalize", &[("axis", Attr::Ints(vec![2]))], &[x], 1).contains("axis"));
}

#[test]
fn renorm_caps_each_slices_p_norm() {
    let x = t(&[2, 2], &[3., 4., 0.3, 0.4]);
    let attrs = [
        ("p", Attr::Float(2.0)),
        ("dim", Attr::Int(0)),
        ("maxnorm", Attr::Float(1.0)),
    ];
    let y = run_f32("Renorm", &attrs, std::slice::from_ref(&x));
    let k = 1.0 / (5.0 + 1e-7f64);
    assert_close(&y, &to32(&[3. * k, 4. * k, 0.3, 0.4]));
    // p 1 along dim 1: columns [3, 0.3] (norm 3.3) and [4, 0.4] (4.4), maxnorm 4.
    let attrs = [
        ("p", Attr::Float(1.0)),
        ("dim", Attr::Int(-1)),
        ("maxnorm", Attr::Float(4.0)),
    ];
    let y = run_f32("Renorm", &attrs, std::slice::from_ref(&x));
    let k = 4.0 / (4.4 + 1e-7f64);
    assert_close(&y, &to32(&[3., 4. * k, 0.3, 0.4 * k]));
    let e = err(
        "Renorm",
        &[("p", Attr::Float(2.0)), ("dim", Attr::Int(0))],
        &[x],
        1,
    );
    assert!(e.contains("maxnorm") && e.contains("required"), "{e}");
}

#[test]
fn bn_infer_normalizes_per_channel_with_the_given_statistics() {
    let x = t(&[1, 2, 2], &[1., 3., 10., 20.]);
    let c = |a: f32, b: f32| t(&[2], &[a, b]);
    let ins = [x, c(2., 1.), c(1., 0.), c(2., 10.), c(4., 25.)];
    let y = run_f32("BNInfer", &[("epsilon", Attr::Float(1e-4))], &ins);
    let s0 = (4.0 + 1e-4f64).sqrt();
    let s1 = (25.0 + 1e-4f64).sqrt();
    assert_close(
        &y,
        &to32(&[-1. / s0 * 2. + 1., 1. / s0 * 2. + 1., 0., 10. / s1]),
    );
    let e = err("BNInfer", &[], &ins, 1);
    assert!(e.contains("epsilon") && e.contains("required"), "{e}");
}

#[test]
fn group_norm_relu_normalizes_channel_groups_then_clamps() {
    // C = 4 in 2 groups; each channel one value.
    let x = t(&[1, 4, 1], &[1., 3., 5., 9.]);
    let (gamma, beta) = (t(&[4], &[1., 1., 2., 1.]), t(&[4], &[0., 0., 0., 1.]));
    let y = run_f32(
        "GroupNormRelu",
        &[("num_groups", Attr::Int(2))],
        &[x.clone(), gamma.clone(), beta.clone()],
    );
    let s0 = (1.0 + 1e-5f64).sqrt();
    let s1 = (4.0 + 1e-5f64).sqrt();
    assert_close(&y, &to32(&[0., 1. / s0, 0., (2. / s1 + 1.)]));
    assert!(
        err(
            "GroupNormRelu",
            &[],
            &[x.clone(), gamma.clone(), beta.clone()],
            1
        )
        .contains("num_groups")
    );
    assert!(
        err(
            "GroupNormRelu",
            &[("num_groups", Attr::Int(3))],
            &[x, gamma, beta],
            1
        )
        .contains("divide")
    );
}

#[test]
fn inference_keeps_unknown_dims_and_ranks() {
    let infer = crate::ops::testing::infer_for_test;
    let x = TensorMeta::new(DType::F32, &[UNKNOWN, 8, UNKNOWN]);
    let g = TensorMeta::new(DType::F32, &[UNKNOWN]);
    let out = infer("RmsNorm", &[x.clone(), g], &[], &[], 2).unwrap();
    assert_eq!(out[1].shape, Some(vec![UNKNOWN, 8, 1]));
    let u = TensorMeta::unknown_rank(DType::F16);
    let out = infer(
        "AddLayerNorm",
        &[u.clone(), u.clone(), u.clone(), u.clone()],
        &[],
        &[],
        4,
    )
    .unwrap();
    assert_eq!(out[1], TensorMeta::unknown_rank(DType::F32));
    let out = infer("L2Normalize", std::slice::from_ref(&u), &[], &[], 1).unwrap();
    assert_eq!(out[0], u);
    let attrs = [("data_format", Attr::Str("ND".into()))];
    let c = TensorMeta::new(DType::F32, &[8]);
    let out = infer("InstanceNorm", &[x, c.clone(), c], &[], &attrs, 3).unwrap();
    assert_eq!(out[1].shape, Some(vec![UNKNOWN, 8, 1]));
}
