//! GE's reductions against their prototypes' formulas written out here in f64.

use half::f16;

use crate::ops::testing::{i64s, infer_for_test, run, run_f32_with_shape, try_run};
use crate::ops::{Attr, DType, HostTensor, Tensor, TensorMeta, UNKNOWN, assert_close};

fn t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.slice::<f32>().unwrap().to_vec()
}

fn bools(shape: &[usize], v: &[u8]) -> Tensor {
    let mut x = Tensor::from_vec(shape, v);
    x.dtype = DType::Bool;
    x
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor], outputs: usize) -> String {
    try_run(op, attrs, inputs, outputs).unwrap_err().to_string()
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

#[test]
fn reduce_std_gives_std_then_mean() {
    let x = t(&[2, 3], &[1., 2., 6., 4., 4., 4.]);
    // Default: every dim, Bessel's correction, no kept dims.
    let out = run("ReduceStd", &[], std::slice::from_ref(&x), 2);
    let v: [f64; 6] = [1., 2., 6., 4., 4., 4.];
    let m = v.iter().sum::<f64>() / 6.0;
    let ss: f64 = v.iter().map(|a| (a - m) * (a - m)).sum();
    assert!(out[0].shape.is_empty());
    assert_close(&f32s(&out[0]), &[(ss / 5.0).sqrt() as f32]);
    assert_close(&f32s(&out[1]), &[m as f32]);
    // Rows, population, kept.
    let attrs = [
        ("dim", ints(&[1])),
        ("unbiased", Attr::Bool(false)),
        ("keepdim", Attr::Bool(true)),
    ];
    let out = run("ReduceStd", &attrs, std::slice::from_ref(&x), 2);
    assert_eq!(out[0].shape, [2, 1]);
    assert_close(&f32s(&out[0]), &[(14.0f64 / 3.0).sqrt() as f32, 0.0]);
    assert_close(&f32s(&out[1]), &[3.0, 4.0]);
    // float16 rounds once.
    let xh = Tensor::from_vec(
        &[3],
        &[f16::from_f32(1.), f16::from_f32(2.), f16::from_f32(4.)],
    );
    let out = run("ReduceStd", &[], &[xh], 2);
    let m = 7.0 / 3.0;
    let sd = (((1. - m) * (1. - m) + (2. - m) * (2. - m) + (4. - m) * (4. - m)) / 2.0f64).sqrt();
    assert_eq!(out[0].slice::<f16>().unwrap(), [f16::from_f64(sd)]);
    assert!(err("ReduceStd", &[("dim", ints(&[2]))], &[x], 2).contains("dim"));
}

#[test]
fn reduce_mean_variance_keeps_dims_by_default() {
    let x = t(&[2, 2], &[1., 3., 2., 6.]);
    let out = run(
        "ReduceMeanVariance",
        &[("axes", ints(&[0]))],
        std::slice::from_ref(&x),
        2,
    );
    assert_eq!(out[0].shape, [1, 2]);
    assert_eq!(f32s(&out[0]), [1.5, 4.5]);
    assert_eq!(f32s(&out[1]), [0.25, 2.25]);
    let out = run("ReduceMeanVariance", &[], &[x], 2);
    assert_eq!(out[0].shape, [1, 1]);
    assert_eq!(f32s(&out[0]), [3.0]);
    assert_eq!(f32s(&out[1]), [3.5]);
}

#[test]
fn euclidean_norm_is_the_root_of_the_square_sum() {
    let x = t(&[2, 2], &[3., 4., 5., 12.]);
    let axes = Tensor::from_vec(&[1], &[-1i32]);
    let (shape, y) = run_f32_with_shape("EuclideanNorm", &[], &[x.clone(), axes]);
    assert_eq!((shape, y), (vec![2], vec![5.0, 13.0]));
    let (shape, y) = run_f32_with_shape(
        "EuclideanNormD",
        &[("axes", ints(&[0, 1])), ("keep_dims", Attr::Bool(true))],
        std::slice::from_ref(&x),
    );
    assert_eq!(shape, [1, 1]);
    assert_close(&y, &[(9.0f64 + 16. + 25. + 144.).sqrt() as f32]);
    // TensorFlow's empty list reduces nothing: |x|.
    let (shape, y) = run_f32_with_shape("EuclideanNormD", &[], &[t(&[2], &[-3., 4.])]);
    assert_eq!((shape, y), (vec![2], vec![3.0, 4.0]));
    // int32: the root truncated.
    let xi = Tensor::from_vec(&[2], &[2i32, 2]);
    let out = run("EuclideanNormD", &[("axes", ints(&[0]))], &[xi], 1);
    assert_eq!(out[0].slice::<i32>().unwrap(), [2]);
    let e = err("EuclideanNormD", &[("axes", ints(&[5]))], &[x], 1);
    assert!(e.contains("axes"), "{e}");
}

#[test]
fn reduce_all_and_any_on_bool() {
    let x = bools(&[2, 3], &[1, 1, 0, 1, 1, 1]);
    let all = run(
        "ReduceAllD",
        &[("axes", ints(&[1]))],
        std::slice::from_ref(&x),
        1,
    );
    assert_eq!(all[0].dtype, DType::Bool);
    assert_eq!(all[0].slice::<u8>().unwrap(), [0, 1]);
    let any = run(
        "ReduceAnyD",
        &[("axes", ints(&[0])), ("keep_dims", Attr::Bool(true))],
        std::slice::from_ref(&x),
        1,
    );
    assert_eq!(any[0].shape, [1, 3]);
    assert_eq!(any[0].slice::<u8>().unwrap(), [1, 1, 1]);
    let none = bools(&[2, 2], &[0, 0, 0, 1]);
    let axes = Tensor::from_vec(&[2], &[0i64, 1]);
    let any = run("ReduceAny", &[], &[none.clone(), axes.clone()], 1);
    assert_eq!(any[0].slice::<u8>().unwrap(), [1]);
    let all = run("ReduceAll", &[], &[none.clone(), axes], 1);
    assert_eq!(all[0].slice::<u8>().unwrap(), [0]);
    // The D forms require their axes; floats are refused.
    assert!(err("ReduceAllD", &[], std::slice::from_ref(&none), 1).contains("axes"));
    assert!(err("ReduceAnyD", &[("axes", ints(&[0]))], &[t(&[1], &[1.])], 1).contains("input 0"));
}

#[test]
fn reduction_is_caffes_tail_reduction_times_coeff() {
    let x = t(&[2, 2, 2], &[1., -2., 3., 4., -5., 6., 7., 8.]);
    let run1 = |op: i64, axis: i64, coeff: f32| {
        let attrs = [
            ("operation", Attr::Int(op)),
            ("axis", Attr::Int(axis)),
            ("coeff", Attr::Float(f64::from(coeff))),
        ];
        run_f32_with_shape("Reduction", &attrs, std::slice::from_ref(&x))
    };
    assert_eq!(run1(1, 1, 1.0), (vec![2], vec![6.0, 16.0]));
    assert_eq!(run1(2, 1, 2.0), (vec![2], vec![20.0, 52.0]));
    assert_eq!(run1(3, 2, 1.0), (vec![2, 2], vec![5.0, 25.0, 61.0, 113.0]));
    assert_eq!(run1(4, -1, 1.0), (vec![2, 2], vec![-0.5, 3.5, 0.5, 7.5]));
    // Defaults: SUM over everything from axis 0, a scalar.
    let (shape, y) = run_f32_with_shape("Reduction", &[], std::slice::from_ref(&x));
    assert_eq!((shape, y), (vec![], vec![22.0]));
    assert!(
        err(
            "Reduction",
            &[("operation", Attr::Int(5))],
            std::slice::from_ref(&x),
            1
        )
        .contains("operation")
    );
    assert!(err("Reduction", &[("axis", Attr::Int(3))], &[x], 1).contains("axis"));
}

#[test]
fn square_sums_and_l2_loss() {
    let x = t(&[2, 2], &[1., 2., 3., 4.]);
    let (shape, y) = run_f32_with_shape(
        "SquareSumV1",
        &[("axis", ints(&[1]))],
        std::slice::from_ref(&x),
    );
    assert_eq!((shape, y), (vec![2], vec![5.0, 25.0]));
    assert!(err("SquareSumV1", &[], std::slice::from_ref(&x), 1).contains("axis"));
    let (shape, y) = run_f32_with_shape("L2Loss", &[], &[x]);
    assert_eq!((shape, y), (vec![], vec![15.0]));
    let xh = Tensor::from_vec(&[2], &[f16::from_f32(0.5), f16::from_f32(3.0)]);
    let out = run("L2Loss", &[], &[xh], 1);
    assert_eq!(out[0].slice::<f16>().unwrap(), [f16::from_f64(4.625)]);
}

#[test]
fn cosine_similarity_along_dim_of_the_broadcast_shape() {
    let a = t(&[2, 2], &[1., 0., 3., 4.]);
    let b = t(&[2], &[1., 1.]);
    // Default dim 1: rows of a against b.
    let (shape, y) = run_f32_with_shape("CosineSimilarity", &[], &[a.clone(), b.clone()]);
    assert_eq!(shape, [2]);
    let r2 = 2f64.sqrt();
    assert_close(&y, &[(1.0 / r2) as f32, (7.0 / (5.0 * r2)) as f32]);
    let (shape, y) = run_f32_with_shape("CosineSimilarity", &[("dim", Attr::Int(0))], &[a, b]);
    assert_eq!(shape, [2]);
    assert_close(
        &y,
        &[
            (4.0 / (10f64.sqrt() * r2)) as f32,
            (4.0 / (4.0 * r2)) as f32,
        ],
    );
    // A zero vector: the denominator is eps.
    let z = t(&[1, 2], &[0., 0.]);
    let (_, y) = run_f32_with_shape("CosineSimilarity", &[], &[z.clone(), z.clone()]);
    assert_eq!(y, [0.0]);
    assert!(
        err(
            "CosineSimilarity",
            &[("dim", Attr::Int(2))],
            &[z.clone(), z],
            1
        )
        .contains("dim")
    );
}

#[test]
fn dot_is_the_inner_product() {
    let (shape, y) = run_f32_with_shape(
        "Dot",
        &[],
        &[t(&[3], &[1., 2., 3.]), t(&[3], &[4., -5., 6.])],
    );
    assert_eq!((shape, y), (vec![], vec![12.0]));
    let i = |v: &[i32]| Tensor::from_vec(&[v.len()], v);
    let out = run("Dot", &[], &[i(&[1, 2]), i(&[3, 4])], 1);
    assert_eq!(out[0].slice::<i32>().unwrap(), [11]);
    assert!(err("Dot", &[], &[t(&[2], &[1., 2.]), t(&[3], &[1., 2., 3.])], 1).contains("input 1"));
    assert!(err("Dot", &[], &[t(&[1, 2], &[1., 2.]), t(&[2], &[1., 2.])], 1).contains("1-D"));
}

#[test]
fn inference_with_unknown_axes_dims_and_ranks() {
    let x = TensorMeta::new(DType::Bool, &[UNKNOWN, 4]);
    let axes = TensorMeta::new(DType::I64, &[1]);
    let out = infer_for_test("ReduceAll", &[x.clone(), axes.clone()], &[], &[], 1).unwrap();
    assert_eq!(out[0], TensorMeta::unknown_rank(DType::Bool));
    let keep = [("keep_dims", Attr::Bool(true))];
    let out = infer_for_test("ReduceAny", &[x.clone(), axes.clone()], &[], &keep, 1).unwrap();
    assert_eq!(out[0].shape, Some(vec![UNKNOWN, UNKNOWN]));
    let v: HostTensor = i64s(&[1]);
    let out = infer_for_test("ReduceAll", &[x, axes], &[None, Some(&v)], &[], 1).unwrap();
    assert_eq!(out[0].shape, Some(vec![UNKNOWN]));
    let u = TensorMeta::unknown_rank(DType::F32);
    let out = infer_for_test("ReduceStd", std::slice::from_ref(&u), &[], &[], 2).unwrap();
    assert_eq!(out, vec![u.clone(), u]);
}
