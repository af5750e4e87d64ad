//! The GE family against the ONNX ops that compute the same thing on the same data, small
//! hand-computed cases, float16, and attribute errors.

use crate::ops::testing::test_attrs;
use crate::ops::testing::{
    f16_tensor, f16_values, run, run_f32, run_f32_with_shape, run1, try_run,
};
use crate::ops::{
    Attr, DType, InferCtx, OpRegistry, Tensor, TensorMeta, Translation, assert_close,
};

/// `n` deterministic values in [-1, 1).
fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            ((s >> 8) % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn t(shape: &[usize], seed: u32) -> Tensor {
    Tensor::from_vec(shape, &data(shape.iter().product(), seed))
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

fn s(v: &str) -> Attr {
    Attr::Str(v.into())
}

/// `x` with its dims permuted (output dim `k` is `x`'s dim `perm[k]`).
fn permute(x: &Tensor, perm: &[i64]) -> Tensor {
    run1(
        "Transpose",
        &[("perm", ints(perm))],
        std::slice::from_ref(x),
    )
}

/// The float32 tensor `x` in float16.
fn halves(x: &Tensor) -> Tensor {
    f16_tensor(&x.shape, x.slice::<f32>().unwrap())
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> String {
    try_run(op, attrs, inputs, 1).unwrap_err().to_string()
}

#[test]
fn conv2d_nchw_matches_onnx_conv_with_reordered_pads() {
    let (x, w, b) = (t(&[2, 3, 7, 6], 1), t(&[4, 3, 3, 2], 2), t(&[4], 3));
    let ge = [
        ("strides", ints(&[1, 1, 2, 1])),
        ("pads", ints(&[1, 0, 2, 1])),
        ("dilations", ints(&[1, 1, 1, 2])),
        ("data_format", s("NCHW")),
    ];
    let onnx = [
        ("strides", ints(&[2, 1])),
        ("pads", ints(&[1, 2, 0, 1])),
        ("dilations", ints(&[1, 2])),
    ];
    let inputs = [x, w, b];
    let (shape, got) = run_f32_with_shape("Conv2D", &ge, &inputs);
    let (want_shape, want) = run_f32_with_shape("Conv", &onnx, &inputs);
    assert_eq!(shape, want_shape);
    assert_eq!(shape, [2, 4, 3, 7]);
    assert_eq!(got, want);
}

#[test]
fn conv2d_nhwc_takes_an_hwcn_filter() {
    let (x, w) = (t(&[1, 4, 5, 6], 4), t(&[6, 2, 3, 3], 5));
    let onnx = [
        ("group", Attr::Int(2)),
        ("strides", ints(&[2, 1])),
        ("pads", ints(&[0, 1, 1, 1])),
    ];
    let want = run1("Conv", &onnx, &[x.clone(), w.clone()]);
    let ge = [
        ("strides", ints(&[1, 2, 1, 1])),
        ("pads", ints(&[0, 1, 1, 1])),
        ("groups", Attr::Int(2)),
    ];
    let x_nhwc = permute(&x, &[0, 2, 3, 1]);
    let w_hwcn = permute(&w, &[2, 3, 1, 0]);
    let got = run1("Conv2D", &ge, &[x_nhwc, w_hwcn]);
    let want = permute(&want, &[0, 2, 3, 1]);
    assert_eq!(got.shape, want.shape);
    assert_close(got.slice::<f32>().unwrap(), want.slice::<f32>().unwrap());
}

#[test]
fn conv2d_float16_accumulates_in_float32() {
    let (x, w) = (t(&[1, 8, 5, 5], 6), t(&[2, 8, 3, 3], 7));
    let ge = [
        ("strides", ints(&[1, 1, 1, 1])),
        ("pads", ints(&[1, 1, 1, 1])),
        ("data_format", s("NCHW")),
    ];
    let want = run_f32(
        "Conv2D",
        &ge,
        &[halves(&x), halves(&w)].map(|h| {
            let v = f16_values(&h);
            Tensor::from_vec(&h.shape, &v)
        }),
    );
    let got = run1("Conv2D", &ge, &[halves(&x), halves(&w)]);
    assert_eq!(got.dtype, DType::F16);
    for (g, w) in f16_values(&got).iter().zip(&want) {
        assert!((g - w).abs() <= 2e-3 * w.abs().max(1.0), "{g} vs {w}");
    }
}

#[test]
fn conv2d_attribute_errors_name_the_attribute() {
    let inputs = [t(&[1, 1, 4, 4], 1), t(&[1, 1, 2, 2], 2)];
    let pads = ("pads", ints(&[0, 0, 0, 0]));
    let e = err("Conv2D", std::slice::from_ref(&pads), &inputs);
    assert!(
        e.contains("Conv2D") && e.contains("strides") && e.contains("required"),
        "{e}"
    );
    let e = err(
        "Conv2D",
        &[("strides", ints(&[1, 1, 1, 1])), ("pads", ints(&[0, 0]))],
        &inputs,
    );
    assert!(
        e.contains("pads") && e.contains("has 2 values, not 4"),
        "{e}"
    );
    let base = [
        ("strides", ints(&[1, 1, 1, 1])),
        pads.clone(),
        ("data_format", s("NCHW")),
    ];
    let mut q = base.to_vec();
    q.push(("offset_x", Attr::Int(3)));
    let e = err("Conv2D", &q, &inputs);
    assert!(e.contains("offset_x") && e.contains("quantized"), "{e}");
    let e = err(
        "Conv2D",
        &[
            ("strides", ints(&[2, 1, 1, 1])),
            pads.clone(),
            ("data_format", s("NCHW")),
        ],
        &inputs,
    );
    assert!(e.contains("strides") && e.contains("N and C"), "{e}");
    let e = err(
        "Conv2D",
        &[
            ("strides", ints(&[1, 1, 1, 1])),
            pads,
            ("data_format", s("CHWN")),
        ],
        &inputs,
    );
    assert!(e.contains("data_format"), "{e}");
}

#[test]
fn pooling_rounds_up_by_default_as_caffe_does() {
    let x = Tensor::from_vec(
        &[1, 1, 4, 4],
        &(0..16).map(|v| v as f32).collect::<Vec<_>>(),
    );
    let max = [("window", ints(&[3, 3])), ("stride", ints(&[2, 2]))];
    let (shape, y) = run_f32_with_shape("Pooling", &max, std::slice::from_ref(&x));
    assert_eq!((shape, y), (vec![1, 1, 2, 2], vec![10.0, 11.0, 14.0, 15.0]));
    let mut floor = max.to_vec();
    floor.push(("ceil_mode", Attr::Int(1)));
    assert_eq!(
        run_f32_with_shape("Pooling", &floor, &[x]),
        (vec![1, 1, 1, 1], vec![10.0])
    );
    // Average: the window clipped to the (unpadded) input end divides by what is left.
    let x = Tensor::from_vec(
        &[1, 1, 3, 3],
        &(1..10).map(|v| v as f32).collect::<Vec<_>>(),
    );
    let avg = [
        ("mode", Attr::Int(1)),
        ("window", ints(&[2, 2])),
        ("stride", ints(&[2, 2])),
    ];
    assert_eq!(run_f32("Pooling", &avg, &[x]), [3.0, 4.5, 7.5, 9.0]);
}

#[test]
fn pooling_average_counts_the_padding() {
    let x = Tensor::from_vec(&[1, 1, 2, 2], &[1.0f32, 2.0, 3.0, 4.0]);
    let avg = [
        ("mode", Attr::Int(1)),
        ("window", ints(&[2, 2])),
        ("pad", ints(&[1, 0, 1, 0])),
    ];
    assert_eq!(run_f32("Pooling", &avg, &[x]), [0.25, 0.75, 1.0, 2.5]);
}

#[test]
fn pooling_matches_onnx_pools_and_global_pooling() {
    let x = t(&[2, 3, 9, 8], 9);
    let ge = [
        ("window", ints(&[3, 2])),
        ("stride", ints(&[2, 3])),
        ("pad", ints(&[1, 0, 0, 1])),
        ("ceil_mode", Attr::Int(1)),
    ];
    let onnx = [
        ("kernel_shape", ints(&[3, 2])),
        ("strides", ints(&[2, 3])),
        ("pads", ints(&[1, 0, 0, 1])),
    ];
    let inputs = [x.clone()];
    assert_eq!(
        run_f32_with_shape("Pooling", &ge, &inputs),
        run_f32_with_shape("MaxPool", &onnx, &inputs)
    );
    let mut ge_avg = ge.to_vec();
    ge_avg.push(("mode", Attr::Int(1)));
    let mut onnx_avg = onnx.to_vec();
    onnx_avg.push(("count_include_pad", Attr::Int(1)));
    assert_eq!(
        run_f32_with_shape("Pooling", &ge_avg, &inputs),
        run_f32_with_shape("AveragePool", &onnx_avg, &inputs)
    );
    let global = [("mode", Attr::Int(1)), ("global_pooling", Attr::Bool(true))];
    assert_eq!(
        run_f32_with_shape("Pooling", &global, &inputs),
        run_f32_with_shape("GlobalAveragePool", &[], &inputs)
    );
    let e = err("Pooling", &[("mode", Attr::Int(2))], &inputs);
    assert!(e.contains("Pooling") && e.contains("mode"), "{e}");
    let e = err("Pooling", &[("window", ints(&[3]))], &inputs);
    assert!(e.contains("window") && e.contains("not 2"), "{e}");
}

#[test]
fn tf_pools_pad_same_as_tensorflow_in_nhwc() {
    let x = t(&[1, 3, 7, 5], 10);
    let x_nhwc = permute(&x, &[0, 2, 3, 1]);
    let ge = [
        ("ksize", ints(&[1, 3, 3, 1])),
        ("strides", ints(&[1, 2, 2, 1])),
        ("padding", s("SAME")),
    ];
    // SAME: out = ceil(in / 2) = [4, 3]; total pads 2 and 2, split [1, 1] and [1, 1].
    let onnx = [
        ("kernel_shape", ints(&[3, 3])),
        ("strides", ints(&[2, 2])),
        ("pads", ints(&[1, 1, 1, 1])),
    ];
    let got = run1("MaxPool", &ge, std::slice::from_ref(&x_nhwc));
    let want = permute(
        &run("MaxPool", &onnx, std::slice::from_ref(&x), 1)[0],
        &[0, 2, 3, 1],
    );
    assert_eq!(got.shape, [1, 4, 3, 3]);
    assert_eq!(got.slice::<f32>().unwrap(), want.slice::<f32>().unwrap());
    let got = run1("AvgPool", &ge, &[x_nhwc]);
    let want = permute(&run1("AveragePool", &onnx, &[x]), &[0, 2, 3, 1]);
    assert_close(got.slice::<f32>().unwrap(), want.slice::<f32>().unwrap());
    let e = err(
        "AvgPool",
        &[("ksize", ints(&[1, 3, 3, 1]))],
        &[t(&[1, 4, 4, 1], 1)],
    );
    assert!(e.contains("strides") && e.contains("required"), "{e}");
}

#[test]
fn eltwise_sums_with_coefficients_multiplies_and_maxes_any_n() {
    let (a, b, c) = (
        t(&[2, 3, 40, 70], 11),
        t(&[2, 3, 40, 70], 12),
        t(&[2, 3, 40, 70], 13),
    );
    let inputs = [a.clone(), b.clone(), c.clone()];
    let n = ("N", Attr::Int(3));
    let sum = run_f32("Eltwise", std::slice::from_ref(&n), &inputs);
    assert_close(&sum, &run_f32("Sum", &[], &inputs));
    let product = run_f32("Eltwise", &[n.clone(), ("mode", Attr::Int(0))], &inputs);
    let ab = run1("Mul", &[], &[a.clone(), b.clone()]);
    assert_close(&product, &run_f32("Mul", &[], &[ab, c.clone()]));
    let max = run_f32("Eltwise", &[n.clone(), ("mode", Attr::Int(2))], &inputs);
    assert_eq!(max, run_f32("Max", &[], &inputs));
    let coeff = ("coeff", Attr::Floats(vec![0.5, -1.0, 2.0]));
    let weighted = run_f32("Eltwise", &[n.clone(), coeff.clone()], &inputs);
    let (av, bv, cv) = (
        a.slice::<f32>().unwrap(),
        b.slice::<f32>().unwrap(),
        c.slice::<f32>().unwrap(),
    );
    let want: Vec<f32> = (0..av.len())
        .map(|i| 0.5 * av[i] - bv[i] + 2.0 * cv[i])
        .collect();
    assert_close(&weighted, &want);
    // Small and hand-computed, one input, float16.
    let x = Tensor::from_vec(&[2], &[1.5f32, -2.0]);
    assert_eq!(
        run_f32(
            "Eltwise",
            &[("N", Attr::Int(1)), ("coeff", Attr::Floats(vec![2.0]))],
            std::slice::from_ref(&x)
        ),
        [3.0, -4.0]
    );
    let h = run1("Eltwise", &[("N", Attr::Int(2))], &[halves(&x), halves(&x)]);
    assert_eq!(f16_values(&h), [3.0, -4.0]);
    let e = err("Eltwise", &[("N", Attr::Int(2))], &inputs);
    assert!(
        e.contains("Eltwise") && e.contains("N") && e.contains("3 inputs"),
        "{e}"
    );
    let e = err("Eltwise", &[], &inputs);
    assert!(e.contains("N") && e.contains("required"), "{e}");
    let e = err(
        "Eltwise",
        &[n.clone(), ("mode", Attr::Int(0)), coeff],
        &inputs,
    );
    assert!(e.contains("coeff") && e.contains("sum"), "{e}");
    let e = err("Eltwise", &[n, ("coeff", Attr::Floats(vec![1.0]))], &inputs);
    assert!(e.contains("coeff") && e.contains("1 values for 3"), "{e}");
}

#[test]
fn fully_connection_flattens_at_axis_and_reads_w_by_transpose() {
    let (x, w, b) = (t(&[3, 2, 2, 3], 14), t(&[5, 12], 15), t(&[5], 16));
    let flat = run1(
        "Reshape",
        &[],
        &[x.clone(), Tensor::from_vec(&[2], &[3i64, 12])],
    );
    let fc = [("num_output", Attr::Int(5))];
    let (shape, got) =
        run_f32_with_shape("FullyConnection", &fc, &[x.clone(), w.clone(), b.clone()]);
    let want = run_f32(
        "Gemm",
        &[("transB", Attr::Int(1))],
        &[flat.clone(), w.clone(), b.clone()],
    );
    assert_eq!(shape, [3, 5]);
    assert_close(&got, &want);
    // transpose: w is [K, num_output].
    let wt = permute(&w, &[1, 0]);
    let tr = [
        ("num_output", Attr::Int(5)),
        ("transpose", Attr::Bool(true)),
    ];
    assert_close(
        &run_f32("FullyConnection", &tr, &[x.clone(), wt, b.clone()]),
        &want,
    );
    // axis 2: [x0, x1, num_output].
    let x3 = t(&[2, 3, 4], 17);
    let w2 = t(&[5, 4], 18);
    let a2 = [("num_output", Attr::Int(5)), ("axis", Attr::Int(-1))];
    let (shape, got) = run_f32_with_shape("FullyConnection", &a2, &[x3.clone(), w2.clone()]);
    assert_eq!(shape, [2, 3, 5]);
    assert_close(&got, &run_f32("MatMul", &[], &[x3, permute(&w2, &[1, 0])]));
    // Hand-computed, batch 1: GE's shape [1, N, 1, 1].
    let x1 = Tensor::from_vec(&[1, 2], &[1.0f32, 2.0]);
    let w1 = Tensor::from_vec(&[2, 2], &[1.0f32, 1.0, 3.0, -1.0]);
    let b1 = Tensor::from_vec(&[2], &[0.5f32, 0.0]);
    let fc2 = [("num_output", Attr::Int(2))];
    assert_eq!(
        run_f32_with_shape("FullyConnection", &fc2, &[x1.clone(), w1.clone(), b1]),
        (vec![1, 2, 1, 1], vec![3.5, 1.0])
    );
    let h = run1("FullyConnection", &fc2, &[halves(&x1), halves(&w1)]);
    assert_eq!(f16_values(&h), [3.0, 1.0]);
    let e = err("FullyConnection", &[], &[x.clone(), w.clone()]);
    assert!(e.contains("num_output") && e.contains("required"), "{e}");
    let e = err(
        "FullyConnection",
        &[("num_output", Attr::Int(5)), ("axis", Attr::Int(3))],
        &[x.clone(), w.clone()],
    );
    assert!(e.contains("axis") && e.contains("1 or 2"), "{e}");
    let e = err("FullyConnection", &tr, &[x, w]);
    assert!(e.contains("has K"), "{e}");
}

#[test]
fn leaky_relu_takes_negative_slope_default_zero() {
    let x = Tensor::from_vec(&[4], &[-2.0f32, -0.5, 0.0, 3.0]);
    let ge = run_f32(
        "LeakyRelu",
        &[("negative_slope", Attr::Float(0.25))],
        std::slice::from_ref(&x),
    );
    assert_eq!(
        ge,
        run_f32(
            "LeakyRelu",
            &[("alpha", Attr::Float(0.25))],
            std::slice::from_ref(&x)
        )
    );
    assert_eq!(ge, [-0.5, -0.125, 0.0, 3.0]);
    assert_eq!(
        run_f32("LeakyRelu", &[], std::slice::from_ref(&x)),
        [0.0, 0.0, 0.0, 3.0]
    );
    let h = run1(
        "LeakyRelu",
        &[("negative_slope", Attr::Float(0.5))],
        &[halves(&x)],
    );
    assert_eq!(f16_values(&h), [-1.0, -0.25, 0.0, 3.0]);
}

#[test]
fn softmax_v2_over_one_or_adjacent_axes() {
    let x = t(&[2, 3, 4], 19);
    assert_eq!(
        run_f32("SoftmaxV2", &[], std::slice::from_ref(&x)),
        run_f32("Softmax", &[], std::slice::from_ref(&x))
    );
    let one = run_f32(
        "SoftmaxV2",
        &[("axes", ints(&[1]))],
        std::slice::from_ref(&x),
    );
    assert_eq!(
        one,
        run_f32(
            "Softmax",
            &[("axis", Attr::Int(1))],
            std::slice::from_ref(&x)
        )
    );
    // Axes 1 and 2 together: the softmax of each [12] row.
    let both = run_f32(
        "SoftmaxV2",
        &[("axes", ints(&[2, 1]))],
        std::slice::from_ref(&x),
    );
    let rows = run1(
        "Reshape",
        &[],
        &[x.clone(), Tensor::from_vec(&[2], &[2i64, 12])],
    );
    assert_eq!(both, run_f32("Softmax", &[], &[rows]));
    let h = run1("SoftmaxV2", &[], &[halves(&x)]);
    assert_eq!(h.dtype, DType::F16);
    let wide = run1(
        "SoftmaxV2",
        &[("half_to_float", Attr::Bool(true))],
        &[halves(&x)],
    );
    assert_eq!(wide.dtype, DType::F32);
    let want = run_f32(
        "Softmax",
        &[],
        &[Tensor::from_vec(&x.shape, &f16_values(&halves(&x)))],
    );
    assert_close(wide.slice::<f32>().unwrap(), &want);
    let e = err("SoftmaxV2", &[("axes", ints(&[0, 2]))], &[x]);
    assert!(
        e.contains("SoftmaxV2") && e.contains("axes") && e.contains("adjacent"),
        "{e}"
    );
}

#[test]
fn cast_reads_dst_type_in_ge_numbering() {
    let x = Tensor::from_vec(&[3], &[1.7f32, -2.5, 3.0]);
    let y = run1(
        "Cast",
        &[("dst_type", Attr::Int(3))],
        std::slice::from_ref(&x),
    );
    assert_eq!(y.slice::<i32>().unwrap(), [1, -2, 3]);
    let h = run1(
        "Cast",
        &[("dst_type", Attr::Int(1))],
        std::slice::from_ref(&x),
    );
    assert_eq!(h.dtype, DType::F16);
    let y = run1(
        "Cast",
        &[("dst_type", Attr::DType(DType::I64))],
        std::slice::from_ref(&x),
    );
    assert_eq!(y.slice::<i64>().unwrap(), [1, -2, 3]);
    let e = err(
        "Cast",
        &[("dst_type", Attr::Int(13))],
        std::slice::from_ref(&x),
    );
    assert!(e.contains("dst_type") && e.contains("13"), "{e}");
    let e = err("Cast", &[], &[x]);
    assert!(e.contains("Cast") && e.contains("is missing"), "{e}");
}

#[test]
fn bn_inference_matches_batch_normalization() {
    let x = t(&[2, 3, 4, 5], 20);
    let mean = Tensor::from_vec(&[3], &[0.1f32, -0.2, 0.3]);
    let var = Tensor::from_vec(&[3], &[0.5f32, 1.5, 2.0]);
    let (scale, offset) = (t(&[3], 21), t(&[3], 22));
    let momentum = Tensor::from_vec(&[1], &[0.9f32]);
    let eps = ("epsilon", Attr::Float(1e-3));
    let got = run_f32(
        "BNInference",
        std::slice::from_ref(&eps),
        &[
            x.clone(),
            mean.clone(),
            var.clone(),
            momentum,
            scale.clone(),
            offset.clone(),
        ],
    );
    let want = run_f32(
        "BatchNormalization",
        std::slice::from_ref(&eps),
        &[x.clone(), scale, offset, mean.clone(), var.clone()],
    );
    assert_close(&got, &want);
    // Without scale and offset, Caffe's statistics are divided by the factor.
    let got = run_f32(
        "BNInference",
        std::slice::from_ref(&eps),
        &[
            x.clone(),
            mean.clone(),
            var.clone(),
            Tensor::from_vec(&[1], &[2.0f32]),
        ],
    );
    let half = |t: &Tensor| run1("Mul", &[], &[t.clone(), Tensor::from_vec(&[1], &[0.5f32])]);
    let ones = Tensor::from_vec(&[3], &[1.0f32; 3]);
    let zeros = Tensor::from_vec(&[3], &[0.0f32; 3]);
    let want = run_f32(
        "BatchNormalization",
        &[eps],
        &[x.clone(), ones, zeros, half(&mean), half(&var)],
    );
    assert_close(&got, &want);
    let e = err(
        "BNInference",
        &[("use_global_stats", Attr::Bool(false))],
        &[x, mean.clone(), var, mean],
    );
    assert!(e.contains("use_global_stats"), "{e}");
}

#[test]
fn scale_and_power() {
    let x = t(&[2, 3, 4], 23);
    let (sc, b) = (t(&[3], 24), t(&[3], 25));
    let got = run_f32("Scale", &[], &[x.clone(), sc.clone(), b.clone()]);
    let col = |v: &Tensor| {
        run1(
            "Reshape",
            &[],
            &[v.clone(), Tensor::from_vec(&[2], &[3i64, 1])],
        )
    };
    let xs = run1("Mul", &[], &[x.clone(), col(&sc)]);
    assert_close(&got, &run_f32("Add", &[], &[xs, col(&b)]));
    let e = err("Scale", &[("axis", Attr::Int(3))], &[x.clone(), sc]);
    assert!(e.contains("axis"), "{e}");
    let x = Tensor::from_vec(&[3], &[1.0f32, 2.0, 3.0]);
    let p = [
        ("power", Attr::Float(2.0)),
        ("scale", Attr::Float(2.0)),
        ("shift", Attr::Float(-1.0)),
    ];
    assert_eq!(
        run_f32("Power", &p, std::slice::from_ref(&x)),
        [1.0, 9.0, 25.0]
    );
    assert_eq!(
        f16_values(&run1("Power", &p, &[halves(&x)])),
        [1.0, 9.0, 25.0]
    );
}

#[test]
fn matmul_v2_and_batch_matmul_transpose_and_broadcast() {
    let (a, b, bias) = (t(&[4, 3], 26), t(&[5, 4], 27), t(&[5], 28));
    let attrs = [
        ("transpose_x1", Attr::Bool(true)),
        ("transpose_x2", Attr::Bool(true)),
    ];
    let got = run_f32("MatMulV2", &attrs, &[a.clone(), b.clone(), bias.clone()]);
    let ab = run1("MatMul", &[], &[permute(&a, &[1, 0]), permute(&b, &[1, 0])]);
    assert_close(&got, &run_f32("Add", &[], &[ab, bias]));
    let (x1, x2) = (t(&[2, 1, 3, 4], 29), t(&[3, 5, 4], 30));
    let got = run1(
        "BatchMatMul",
        &[("adj_x2", Attr::Bool(true))],
        &[x1.clone(), x2.clone()],
    );
    let want = run1("MatMul", &[], &[x1, permute(&x2, &[0, 2, 1])]);
    assert_eq!(got.shape, [2, 3, 3, 5]);
    assert_close(got.slice::<f32>().unwrap(), want.slice::<f32>().unwrap());
    let e = err("MatMulV2", &[("offset_x", Attr::Int(1))], &[a, b]);
    assert!(e.contains("offset_x"), "{e}");
}

#[test]
fn star_d_ops_match_their_onnx_forms() {
    let (a, b) = (t(&[2, 3, 4], 31), t(&[2, 5, 4], 32));
    let got = run_f32_with_shape(
        "ConcatD",
        &[("concat_dim", Attr::Int(-2)), ("N", Attr::Int(2))],
        &[a.clone(), b.clone()],
    );
    assert_eq!(
        got,
        run_f32_with_shape("Concat", &[("axis", Attr::Int(1))], &[a.clone(), b.clone()])
    );
    assert_eq!(
        run_f32_with_shape(
            "ConcatV2D",
            &[("concat_dim", Attr::Int(1))],
            &[a.clone(), b.clone()]
        ),
        got
    );
    let e = err("ConcatD", &[("N", Attr::Int(2))], &[a.clone(), b]);
    assert!(e.contains("concat_dim") && e.contains("required"), "{e}");
    let parts = run(
        "SplitD",
        &[("split_dim", Attr::Int(2)), ("num_split", Attr::Int(2))],
        std::slice::from_ref(&a),
        2,
    );
    let av = a.slice::<f32>().unwrap();
    for (k, p) in parts.iter().enumerate() {
        assert_eq!(p.shape, [2, 3, 2]);
        let want: Vec<f32> = (0..6)
            .flat_map(|r| av[r * 4 + 2 * k..][..2].to_vec())
            .collect();
        assert_eq!(p.slice::<f32>().unwrap(), &want[..]);
    }
    let e = try_run(
        "SplitD",
        &[("split_dim", Attr::Int(1)), ("num_split", Attr::Int(2))],
        std::slice::from_ref(&a),
        2,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("num_split") && e.contains("divide"), "{e}");
    let perm = ("perm", ints(&[2, 0, 1]));
    assert_eq!(
        run_f32_with_shape(
            "TransposeD",
            std::slice::from_ref(&perm),
            std::slice::from_ref(&a)
        ),
        run_f32_with_shape("Transpose", &[perm], std::slice::from_ref(&a))
    );
    assert!(err("TransposeD", &[], std::slice::from_ref(&a)).contains("perm"));
    let mean = run_f32_with_shape(
        "ReduceMeanD",
        &[("axes", ints(&[0, -1]))],
        std::slice::from_ref(&a),
    );
    let want = run_f32_with_shape(
        "ReduceMean",
        &[("axes", ints(&[0, -1])), ("keepdims", Attr::Int(0))],
        std::slice::from_ref(&a),
    );
    assert_eq!(mean.0, [3]);
    assert_eq!(mean, want);
    let sum = run_f32_with_shape(
        "ReduceSumD",
        &[("axes", ints(&[1])), ("keep_dims", Attr::Bool(true))],
        std::slice::from_ref(&a),
    );
    assert_eq!(
        sum,
        run_f32_with_shape(
            "ReduceSum",
            &[("axes", ints(&[1]))],
            std::slice::from_ref(&a)
        )
    );
    assert!(err("ReduceSumD", &[], &[a]).contains("axes"));
}

/// The translation lowering makes of `op` on `inputs` (all metas known, no values).
fn translation(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> Option<Translation> {
    let reg = OpRegistry::new();
    let spec = reg.get(op).expect("registered");
    let metas: Vec<TensorMeta> = inputs.iter().map(TensorMeta::of).collect();
    let attrs = test_attrs(attrs);
    (spec.translate?)(&InferCtx {
        op,
        inputs: &metas,
        values: &vec![None; inputs.len()],
        attrs: &attrs,
        outputs: 1,
    })
}

/// Runs the translation of `op` and `op` itself: both outputs, with the translated op.
fn both(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> (Tensor, Tensor, &'static str) {
    let plan =
        translation(op, attrs, inputs).unwrap_or_else(|| panic!("{op} {attrs:?} translates"));
    let ge = run1(op, attrs, inputs);
    let translated = OpRegistry::new()
        .run_on_host(plan.op, &plan.attrs, &inputs[..plan.inputs], 1)
        .unwrap_or_else(|e| panic!("{op} as {}: {e}", plan.op))
        .remove(0);
    (ge, translated, plan.op)
}

/// A translation case: op, attributes, inputs, and the op it must be launched as.
type Case = (
    &'static str,
    Vec<(&'static str, Attr)>,
    Vec<Tensor>,
    &'static str,
);

#[test]
fn translations_compute_bit_for_bit_what_the_ops_compute() {
    let x = t(&[2, 3, 9, 8], 11);
    let cases: Vec<Case> = vec![
        (
            "Conv2D",
            vec![
                ("strides", ints(&[1, 1, 2, 1])),
                ("pads", ints(&[1, 0, 2, 1])),
                ("dilations", ints(&[1, 1, 1, 2])),
                ("groups", Attr::Int(3)),
                ("data_format", s("NCHW")),
            ],
            vec![x.clone(), t(&[6, 1, 3, 2], 12), t(&[6], 13)],
            "Conv",
        ),
        (
            "Pooling",
            vec![
                ("mode", Attr::Int(1)),
                ("window", ints(&[3, 3])),
                ("stride", ints(&[2, 2])),
                ("pad", ints(&[1, 1, 0, 1])),
            ],
            vec![x.clone()],
            "AveragePool",
        ),
        (
            "Pooling",
            vec![("mode", Attr::Int(0)), ("global_pooling", Attr::Bool(true))],
            vec![x.clone()],
            "MaxPool",
        ),
        (
            "AvgPool",
            vec![
                ("ksize", ints(&[1, 1, 3, 2])),
                ("strides", ints(&[1, 1, 2, 2])),
                ("padding", s("SAME")),
                ("data_format", s("NCHW")),
            ],
            vec![x.clone()],
            "AveragePool",
        ),
        (
            "SoftmaxV2",
            vec![("axes", ints(&[1]))],
            vec![x.clone()],
            "Softmax",
        ),
        (
            "ConcatD",
            vec![("concat_dim", Attr::Int(-1))],
            vec![x.clone(), t(&[2, 3, 9, 2], 14)],
            "Concat",
        ),
        (
            "TransposeD",
            vec![("perm", ints(&[0, 2, 3, 1]))],
            vec![x.clone()],
            "Transpose",
        ),
        (
            "ReduceMeanD",
            vec![("axes", ints(&[2, 3])), ("keep_dims", Attr::Bool(true))],
            vec![x.clone()],
            "ReduceMean",
        ),
        (
            "MatMulV2",
            vec![],
            vec![t(&[5, 7], 15), t(&[7, 4], 16)],
            "MatMul",
        ),
        (
            "MatMulV2",
            vec![("transpose_x2", Attr::Bool(true))],
            vec![t(&[5, 7], 15), t(&[4, 7], 16), t(&[4], 17)],
            "Gemm",
        ),
        (
            "FullyConnection",
            vec![("num_output", Attr::Int(4))],
            vec![t(&[5, 7], 15), t(&[4, 7], 16), t(&[4], 17)],
            "Gemm",
        ),
    ];
    for (op, attrs, inputs, want) in cases {
        let (ge, translated, got) = both(op, &attrs, &inputs);
        assert_eq!(got, want, "{op} {attrs:?}");
        assert_eq!(ge.shape, translated.shape, "{op} {attrs:?}");
        let (g, tr) = (
            ge.slice::<f32>().unwrap(),
            translated.slice::<f32>().unwrap(),
        );
        if op == "MatMulV2" || op == "FullyConnection" {
            // GE's product and ONNX's GEMM sum in their own orders.
            assert_close(g, tr);
        } else {
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(g), bits(tr), "{op} {attrs:?}");
        }
    }
}

#[test]
fn cases_the_onnx_ops_do_not_cover_are_not_translated() {
    let x = t(&[2, 3, 9, 8], 11);
    let nhwc = [
        ("strides", ints(&[1, 1, 1, 1])),
        ("pads", ints(&[0, 0, 0, 0])),
    ];
    assert!(translation("Conv2D", &nhwc, &[x.clone(), t(&[1, 1, 8, 4], 2)]).is_none());
    let two_axes = [("axes", ints(&[2, 3]))];
    assert!(translation("SoftmaxV2", &two_axes, std::slice::from_ref(&x)).is_none());
    let widened = [("half_to_float", Attr::Bool(true))];
    assert!(translation("SoftmaxV2", &widened, &[halves(&x)]).is_none());
    let tf_nhwc = [
        ("ksize", ints(&[1, 2, 2, 1])),
        ("strides", ints(&[1, 2, 2, 1])),
        ("padding", s("VALID")),
    ];
    assert!(translation("MaxPool", &tf_nhwc, std::slice::from_ref(&x)).is_none());
    // ONNX's own MaxPool is itself.
    let onnx = [("kernel_shape", ints(&[2, 2]))];
    assert!(translation("MaxPool", &onnx, std::slice::from_ref(&x)).is_none());
    // A batched product with a transpose has no 2-D Gemm.
    let batched = [("adj_x1", Attr::Bool(true))];
    assert!(
        translation(
            "BatchMatMul",
            &batched,
            &[t(&[2, 7, 5], 1), t(&[2, 7, 4], 2)]
        )
        .is_none()
    );
}

// ---- aliases (alias.rs): values computed by hand from each prototype's semantics.

fn f(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn i32s(shape: &[usize], v: &[i32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn bools(shape: &[usize], v: &[bool]) -> Tensor {
    let bytes: Vec<u8> = v.iter().map(|&b| u8::from(b)).collect();
    Tensor {
        dtype: DType::Bool,
        shape: shape.to_vec(),
        data: crate::ops::Buffer::from_bytes(&bytes),
    }
}

#[test]
fn maximum_minimum_and_addv2_broadcast_elementwise() {
    let a = f(&[2, 1], &[1.0, -3.0]);
    let b = f(&[3], &[0.0, 2.0, -4.0]);
    assert_eq!(
        run_f32_with_shape("Maximum", &[], &[a.clone(), b.clone()]),
        (vec![2, 3], vec![1.0, 2.0, 1.0, 0.0, 2.0, -3.0])
    );
    assert_eq!(
        run_f32("Minimum", &[], &[a.clone(), b.clone()]),
        [0.0, 1.0, -4.0, -3.0, -3.0, -4.0]
    );
    assert_eq!(
        run_f32("AddV2", &[], &[a, b]),
        [1.0, 3.0, -3.0, -3.0, -1.0, -7.0]
    );
}

#[test]
fn select_picks_elementwise_and_refuses_row_selection() {
    let cond = bools(&[2, 2], &[true, false, false, true]);
    let x1 = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let x2 = f(&[2, 2], &[-1.0, -2.0, -3.0, -4.0]);
    assert_eq!(
        run_f32("Select", &[], &[cond, x1.clone(), x2.clone()]),
        [1.0, -2.0, -3.0, 4.0]
    );
    // TensorFlow's Select with a 1-D condition picks rows: not NumPy's broadcast.
    let rows = bools(&[2], &[true, false]);
    assert!(err("Select", &[], &[rows, x1, x2]).contains("row-selecting"));
}

#[test]
fn expand_dims_inserts_a_one_at_the_axis_input() {
    let x = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    for (axis, shape) in [(0, vec![1, 2, 3]), (1, vec![2, 1, 3]), (-1, vec![2, 3, 1])] {
        let (s, v) = run_f32_with_shape("ExpandDims", &[], &[x.clone(), i32s(&[], &[axis])]);
        assert_eq!(s, shape, "axis {axis}");
        assert_eq!(v, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }
    assert!(err("ExpandDims", &[], &[x, i32s(&[], &[3])]).contains("axes"));
}

#[test]
fn gather_v2_and_v2d_take_the_axis_as_input_and_attribute() {
    let x = f(&[3, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let rows = i32s(&[2], &[2, 0]);
    assert_eq!(
        run_f32_with_shape("GatherV2", &[], &[x.clone(), rows.clone(), i32s(&[], &[0])]),
        (vec![2, 2], vec![4.0, 5.0, 0.0, 1.0])
    );
    let col = i32s(&[1], &[1]);
    assert_eq!(
        run_f32_with_shape("GatherV2D", &[("axis", Attr::Int(1))], &[x.clone(), col]),
        (vec![3, 1], vec![1.0, 3.0, 5.0])
    );
    let e = err(
        "GatherV2",
        &[("batch_dims", Attr::Int(1))],
        &[x.clone(), rows.clone(), i32s(&[], &[0])],
    );
    assert!(e.contains("batch_dims"), "{e}");
    assert!(err("GatherV2D", &[], &[x, rows]).contains("axis"));
}

#[test]
fn reduce_d_ops_keep_or_drop_dims_as_keep_dims_says() {
    let x = f(&[2, 3], &[1.0, 5.0, -2.0, 0.5, 4.0, 9.0]);
    let axes = [("axes", ints(&[1]))];
    assert_eq!(
        run_f32_with_shape("ReduceMaxD", &axes, std::slice::from_ref(&x)),
        (vec![2], vec![5.0, 9.0])
    );
    let keep = [("axes", ints(&[0])), ("keep_dims", Attr::Bool(true))];
    assert_eq!(
        run_f32_with_shape("ReduceMinD", &keep, std::slice::from_ref(&x)),
        (vec![1, 3], vec![0.5, 4.0, -2.0])
    );
    assert_eq!(
        run_f32("ReduceProdD", &axes, std::slice::from_ref(&x)),
        [-10.0, 18.0]
    );
    // Empty axes reduce nothing (TensorFlow's rule).
    assert_eq!(
        run_f32_with_shape(
            "ReduceMaxD",
            &[("axes", ints(&[]))],
            std::slice::from_ref(&x)
        )
        .0,
        [2, 3]
    );
    assert!(err("ReduceMaxD", &[], &[x]).contains("axes"));
}

#[test]
fn log_softmax_v2_over_one_axis() {
    let x = f(&[2, 2], &[1.0, 2.0, 3.0, 5.0]);
    let got = run_f32("LogSoftmaxV2", &[], std::slice::from_ref(&x));
    let want = |a: f32, b: f32, v: f32| v - (a.exp() + b.exp()).ln();
    let expect = [
        want(1.0, 2.0, 1.0),
        want(1.0, 2.0, 2.0),
        want(3.0, 5.0, 3.0),
        want(3.0, 5.0, 5.0),
    ];
    for (g, w) in got.iter().zip(expect) {
        assert!((g - w).abs() < 1e-6, "{got:?} vs {expect:?}");
    }
    let col = run_f32(
        "LogSoftmaxV2",
        &[("axes", ints(&[0]))],
        std::slice::from_ref(&x),
    );
    assert!((col[0] - want(1.0, 3.0, 1.0)).abs() < 1e-6, "{col:?}");
    assert!(err("LogSoftmaxV2", &[("axes", ints(&[0, 1]))], &[x]).contains("one axis"));
}

#[test]
fn clip_by_value_clamps_to_scalar_bounds() {
    let x = f(&[4], &[-2.0, 0.5, 3.0, 7.0]);
    assert_eq!(
        run_f32("ClipByValue", &[], &[x, f(&[], &[0.0]), f(&[], &[6.0])]),
        [0.0, 0.5, 3.0, 6.0]
    );
}

#[test]
fn aliases_translate_at_lowering_to_the_library_op() {
    let reg = OpRegistry::new();
    let meta = |s: &[i64]| TensorMeta::new(DType::F32, s);
    let axis = crate::ops::HostTensor {
        dtype: DType::I32,
        shape: vec![],
        data: 2i32.to_le_bytes().to_vec().into(),
    };
    let inputs = [
        meta(&[1, 2]),
        meta(&[1, 2]),
        TensorMeta::new(DType::I32, &[]),
    ];
    let values = [None, None, Some(&axis)];
    let attrs = test_attrs(&[]);
    let ctx = InferCtx {
        op: "ConcatV2",
        inputs: &inputs,
        values: &values,
        attrs: &attrs,
        outputs: 1,
    };
    let spec = reg.get("ConcatV2").unwrap();
    // Axis 2 of a rank-2 pair is out of range: the Concat's inference says so.
    assert!(spec.infer_shapes(&ctx).is_err());
    let one = crate::ops::HostTensor {
        dtype: DType::I32,
        shape: vec![],
        data: 1i32.to_le_bytes().to_vec().into(),
    };
    let values = [None, None, Some(&one)];
    let ctx = InferCtx {
        values: &values,
        ..ctx
    };
    assert_eq!(spec.infer_shapes(&ctx).unwrap(), [meta(&[1, 4])]);
    let t: Translation = (spec.translate.unwrap())(&ctx).unwrap();
    assert_eq!((t.op, t.inputs), ("Concat", 2));
    assert_eq!(t.attrs.get("axis"), Some(&Attr::Int(1)));
}

#[test]
fn top_k_v2_gives_int32_indices_along_dim() {
    let x = f(&[2, 4], &[3.0, 1.0, 4.0, 1.5, -1.0, 9.0, 2.0, 9.0]);
    let out = run("TopKV2", &[], &[x.clone(), i32s(&[1], &[2])], 2);
    assert_eq!(out[0].shape, [2, 2]);
    assert_eq!(out[0].slice::<f32>().unwrap(), [4.0, 3.0, 9.0, 9.0]);
    assert_eq!(out[1].dtype, DType::I32);
    // Ties: the lower index first.
    assert_eq!(out[1].slice::<i32>().unwrap(), [2, 0, 1, 3]);
    let smallest = [("largest", Attr::Bool(false)), ("dim", Attr::Int(0))];
    let out = run("TopKV2", &smallest, &[x, i32s(&[1], &[1])], 2);
    assert_eq!(out[0].shape, [1, 4]);
    assert_eq!(out[0].slice::<f32>().unwrap(), [-1.0, 1.0, 2.0, 1.5]);
    assert_eq!(out[1].slice::<i32>().unwrap(), [1, 0, 1, 0]);
}

// ---------------------------------------------------------------------------------------
// Op types GE's 2020 headers name as ONNX does (ArgMax, Softmax, LogSoftmax), run as a GE
// graph's node, against values worked out by hand from the prototypes' documentation.

fn ge(op: &'static str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> Result<Tensor, String> {
    crate::ops::testing::try_run_ge(op, attrs, inputs, 1).map(|mut v| v.remove(0))
}

#[test]
fn ge_arg_max_takes_the_dimension_input_and_drops_the_dim() {
    // x [2, 3] = [[1, 5, 5], [7, -2, 7]]: the first maximum along dim 1 is (1, 0), along
    // dim 0 (0 < 7, 5 > -2, 5 < 7) it is (1, 0, 1).
    let x = f(&[2, 3], &[1.0, 5.0, 5.0, 7.0, -2.0, 7.0]);
    let y = ge("ArgMax", &[], &[x.clone(), i32s(&[], &[1])]).unwrap();
    assert_eq!((y.dtype, &y.shape[..]), (DType::I64, &[2][..]));
    assert_eq!(y.slice::<i64>().unwrap(), [1, 0]);
    // A negative dimension counts from the end.
    let y = ge("ArgMax", &[], &[x.clone(), i32s(&[], &[-2])]).unwrap();
    assert_eq!(y.slice::<i64>().unwrap(), [1, 0, 1]);
    let y = ge(
        "ArgMax",
        &[("output_type", Attr::DType(DType::I64))],
        &[x.clone(), i32s(&[1], &[0])],
    )
    .unwrap();
    assert_eq!(y.slice::<i64>().unwrap(), [1, 0, 1]);
    let e = ge(
        "ArgMax",
        &[("output_type", Attr::DType(DType::I32))],
        &[x.clone(), i32s(&[], &[0])],
    )
    .unwrap_err();
    assert!(e.contains("output_type") && e.contains("int64"), "{e}");
    let e = ge("ArgMax", &[], std::slice::from_ref(&x)).unwrap_err();
    assert!(e.contains("x and dimension"), "{e}");
}

#[test]
fn ge_softmax_and_log_softmax_take_an_axis_list_default_last() {
    // x [2, 2] = [[0, ln 3], [ln 2, ln 2]]: along the last dim (1/4, 3/4) and (1/2, 1/2);
    // along dim 0 (1/3, 3/5) over (2/3, 2/5).
    let (l2, l3) = (2f32.ln(), 3f32.ln());
    let x = f(&[2, 2], &[0.0, l3, l2, l2]);
    let y = ge("Softmax", &[], std::slice::from_ref(&x)).unwrap();
    assert_close(y.slice::<f32>().unwrap(), &[0.25, 0.75, 0.5, 0.5]);
    let y = ge(
        "Softmax",
        &[("axis", ints(&[-2]))],
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert_close(y.slice::<f32>().unwrap(), &[1.0 / 3.0, 0.6, 2.0 / 3.0, 0.4]);
    // Both dims at once: one softmax over the four values (1, 3, 2, 2) / 8.
    let y = ge(
        "Softmax",
        &[("axis", ints(&[0, 1]))],
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert_close(y.slice::<f32>().unwrap(), &[0.125, 0.375, 0.25, 0.25]);
    // A scale lowering fused into it (a division by 4 before it) is applied: the bits of
    // the Softmax of x / 4 (a power of two, so the products are exact).
    let scale = [(crate::ops::SOFTMAX_SCALE_ATTR, Attr::Float(0.25))];
    let y = ge("Softmax", &scale, std::slice::from_ref(&x)).unwrap();
    let quarter = f(&[2, 2], &[0.0, l3 / 4.0, l2 / 4.0, l2 / 4.0]);
    let want = ge("Softmax", &[], &[quarter]).unwrap();
    let bits = |t: &Tensor| {
        t.slice::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&y), bits(&want));
    let y = ge("LogSoftmax", &[], std::slice::from_ref(&x)).unwrap();
    assert_close(
        y.slice::<f32>().unwrap(),
        &[0.25f32.ln(), 0.75f32.ln(), -l2, -l2],
    );
    let y = ge(
        "LogSoftmax",
        &[("axis", ints(&[0]))],
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert_close(
        y.slice::<f32>().unwrap(),
        &[
            (1.0f32 / 3.0).ln(),
            0.6f32.ln(),
            (2.0f32 / 3.0).ln(),
            0.4f32.ln(),
        ],
    );
    // An int axis is HiAI's contract (default 0), not GE's list: refused.
    for op in ["Softmax", "LogSoftmax"] {
        let e = ge(op, &[("axis", Attr::Int(1))], std::slice::from_ref(&x)).unwrap_err();
        assert!(e.contains("not a non-empty list of ints"), "{e}");
    }
    let e = ge(
        "LogSoftmax",
        &[("axis", ints(&[0, 1]))],
        std::slice::from_ref(&x),
    )
    .unwrap_err();
    assert!(e.contains("one axis is"), "{e}");
}

#[test]
fn ge_clip_and_conv_transpose_stay_refused_with_the_reason() {
    let x = f(&[1, 2], &[0.5, -0.5]);
    let bound = f(&[], &[0.0]);
    let e = ge("Clip", &[], &[x.clone(), bound.clone(), bound]).unwrap_err();
    assert!(
        e.contains("no GE op prototype") && e.contains("ClipByValue"),
        "{e}"
    );
    let w = f(&[2, 1, 1, 1], &[1.0, 1.0]);
    let e = ge("ConvTranspose", &[], &[f(&[1, 2, 1, 1], &[0.5, 0.5]), w]).unwrap_err();
    assert!(e.contains("only HiAI's IR header"), "{e}");
}
