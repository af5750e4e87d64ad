//! The Netron-named GE ops against their frameworks' meanings written out here: Caffe's
//! ShuffleChannel, TensorFlow's SparseToDense and FusedBatchNormV2, ONNX's
//! NonMaxSuppression, each with index arithmetic or hand-computed values.

use crate::ops::testing::{
    f16_tensor, f16_values, infer_for_test, infer1, run, run_f32, run_f32_with_shape, try_run,
};
use crate::ops::{Attr, DType, HostTensor, Tensor, TensorMeta, UNKNOWN, assert_close};

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor], outputs: usize) -> String {
    try_run(op, attrs, inputs, outputs).unwrap_err().to_string()
}

fn f32t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn i32t(shape: &[usize], v: &[i32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn i64t(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_vec(shape, v)
}

// ---------------------------------------------------------------------------------------
// ShuffleChannel

/// 6 channels in 2 groups of 3: output channel `i * 2 + g` is input channel `g * 3 + i`,
/// so the channels come out in the order 0, 3, 1, 4, 2, 5.
#[test]
fn shuffle_channel_transposes_the_group_grid() {
    // x[0, c, 0, w] = 10 c - w - 20: negative values too.
    let v: Vec<f32> = (0..6)
        .flat_map(|c| (0..2).map(move |w| (10 * c - w - 20) as f32))
        .collect();
    let x = f32t(&[1, 6, 1, 2], &v);
    let (shape, y) = run_f32_with_shape("ShuffleChannel", &[("group", Attr::Int(2))], &[x]);
    assert_eq!(shape, [1, 6, 1, 2]);
    assert_eq!(
        y,
        [
            -20.0, -21.0, 10.0, 9.0, -10.0, -11.0, 20.0, 19.0, 0.0, -1.0, 30.0, 29.0
        ]
    );
    // Three groups of two, two images, int32: order 0, 2, 4, 1, 3, 5 per image.
    let x = i32t(&[2, 6], &[0, 1, 2, 3, 4, 5, 60, 61, 62, 63, 64, 65]);
    let y = run("ShuffleChannel", &[("group", Attr::Int(3))], &[x], 1);
    assert_eq!(
        y[0].slice::<i32>().unwrap(),
        [0, 2, 4, 1, 3, 5, 60, 62, 64, 61, 63, 65]
    );
}

#[test]
fn shuffle_channel_defaults_to_one_group_and_moves_float16() {
    let x = f32t(&[1, 3, 2], &[1.0, -2.0, 3.0, 4.0, -5.0, 6.0]);
    assert_eq!(
        run_f32("ShuffleChannel", &[], &[x]),
        [1.0, -2.0, 3.0, 4.0, -5.0, 6.0]
    );
    let x = f16_tensor(&[1, 4, 1], &[0.5, -1.5, 2.5, -3.5]);
    let y = run("ShuffleChannel", &[("group", Attr::Int(2))], &[x], 1);
    assert_eq!(y[0].dtype, DType::F16);
    assert_eq!(f16_values(&y[0]), [0.5, 2.5, -1.5, -3.5]);
}

#[test]
fn shuffle_channel_refuses_bad_groups() {
    let x = f32t(&[1, 6, 1, 1], &[0.0; 6]);
    let e = err(
        "ShuffleChannel",
        &[("group", Attr::Int(0))],
        std::slice::from_ref(&x),
        1,
    );
    assert!(e.contains("group") && e.contains("positive"), "{e}");
    let e = err("ShuffleChannel", &[("group", Attr::Int(4))], &[x], 1);
    assert!(e.contains("does not divide"), "{e}");
    let e = err("ShuffleChannel", &[], &[f32t(&[3], &[0.0; 3])], 1);
    assert!(e.contains("channel"), "{e}");
    // Inference with an unknown channel count or rank passes x through.
    let m = infer1(
        "ShuffleChannel",
        &[TensorMeta::new(DType::F32, &[UNKNOWN, UNKNOWN, 4])],
        &[],
        &[("group", Attr::Int(5))],
    )
    .unwrap();
    assert_eq!(m.shape, Some(vec![UNKNOWN, UNKNOWN, 4]));
    let m = infer1(
        "ShuffleChannel",
        &[TensorMeta::unknown_rank(DType::I8)],
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(m, TensorMeta::unknown_rank(DType::I8));
}

// ---------------------------------------------------------------------------------------
// SparseToDense

/// indices [[0, 1], [2, 0]] into a [3, 2] of 0.5: y[0][1] = 5, y[2][0] = -7.
#[test]
fn sparse_to_dense_places_values_on_the_default() {
    let (shape, y) = run_f32_with_shape(
        "SparseToDense",
        &[],
        &[
            i32t(&[2, 2], &[0, 1, 2, 0]),
            i32t(&[2], &[3, 2]),
            f32t(&[2], &[5.0, -7.0]),
            f32t(&[], &[0.5]),
        ],
    );
    assert_eq!(shape, [3, 2]);
    assert_eq!(y, [0.5, 5.0, 0.5, 0.5, -7.0, 0.5]);
    // 1-D indices into a 1-D output, one scalar value for all of them (int64 indices).
    let (shape, y) = run_f32_with_shape(
        "SparseToDense",
        &[],
        &[
            i64t(&[2], &[1, 3]),
            i64t(&[1], &[5]),
            f32t(&[], &[9.0]),
            f32t(&[1], &[-1.0]),
        ],
    );
    assert_eq!(shape, [5]);
    assert_eq!(y, [-1.0, 9.0, -1.0, 9.0, -1.0]);
    // A 0-D index.
    let y = run_f32(
        "SparseToDense",
        &[],
        &[
            i32t(&[], &[2]),
            i32t(&[1], &[4]),
            f32t(&[1], &[3.0]),
            f32t(&[], &[0.0]),
        ],
    );
    assert_eq!(y, [0.0, 0.0, 3.0, 0.0]);
}

#[test]
fn sparse_to_dense_moves_int_float16_and_bool() {
    let y = run(
        "SparseToDense",
        &[],
        &[
            i32t(&[2, 1], &[0, 2]),
            i32t(&[1], &[3]),
            Tensor::from_vec(&[2], &[-3i8, 7]),
            Tensor::from_vec(&[], &[1i8]),
        ],
        1,
    );
    assert_eq!(y[0].slice::<i8>().unwrap(), [-3, 1, 7]);
    let y = run(
        "SparseToDense",
        &[],
        &[
            i32t(&[1, 2], &[1, 0]),
            i32t(&[2], &[2, 2]),
            f16_tensor(&[1], &[-2.5]),
            f16_tensor(&[], &[0.25]),
        ],
        1,
    );
    assert_eq!(f16_values(&y[0]), [0.25, 0.25, -2.5, 0.25]);
    let mut values = Tensor::from_vec(&[1], &[1u8]);
    values.dtype = DType::Bool;
    let mut fill = Tensor::from_vec(&[], &[0u8]);
    fill.dtype = DType::Bool;
    let y = run(
        "SparseToDense",
        &[],
        &[i32t(&[1], &[1]), i32t(&[1], &[2]), values, fill],
        1,
    );
    assert_eq!(
        (y[0].dtype, y[0].slice::<u8>().unwrap()),
        (DType::Bool, &[0u8, 1][..])
    );
}

/// validate_indices (default true) refuses indices out of row-major order or repeated;
/// false writes them in order, the last winning. Out-of-range indices are refused either
/// way.
#[test]
fn sparse_to_dense_validates_indices() {
    let case = |idx: &[i32], validate: Option<bool>| {
        let attrs: Vec<(&str, Attr)> = validate
            .map(|v| vec![("validate_indices", Attr::Bool(v))])
            .unwrap_or_default();
        try_run(
            "SparseToDense",
            &attrs,
            &[
                i32t(&[2, 2], idx),
                i32t(&[2], &[3, 2]),
                f32t(&[2], &[1.0, 2.0]),
                f32t(&[], &[0.0]),
            ],
            1,
        )
    };
    let e = case(&[2, 0, 0, 1], None).unwrap_err().to_string();
    assert!(e.contains("out of order"), "{e}");
    let e = case(&[1, 1, 1, 1], Some(true)).unwrap_err().to_string();
    assert!(e.contains("repeated"), "{e}");
    let y = case(&[2, 0, 0, 1], Some(false)).unwrap();
    assert_eq!(y[0].slice::<f32>().unwrap(), [0.0, 2.0, 0.0, 0.0, 1.0, 0.0]);
    let y = case(&[1, 1, 1, 1], Some(false)).unwrap();
    assert_eq!(y[0].slice::<f32>().unwrap(), [0.0, 0.0, 0.0, 2.0, 0.0, 0.0]);
    for bad in [[0, 0, 3, 0], [0, 0, 1, -1]] {
        let e = case(&bad, Some(false)).unwrap_err().to_string();
        assert!(e.contains("outside"), "{e}");
    }
}

#[test]
fn sparse_to_dense_infers_and_refuses_mismatches() {
    let metas = |shape: &[i64]| {
        [
            TensorMeta::new(DType::I64, &[UNKNOWN, 2]),
            TensorMeta::new(DType::I64, shape),
            TensorMeta::new(DType::F16, &[UNKNOWN]),
            TensorMeta::new(DType::F16, &[]),
        ]
    };
    let m = infer1("SparseToDense", &metas(&[2]), &[], &[]).unwrap();
    assert_eq!(m, TensorMeta::new(DType::F16, &[UNKNOWN, UNKNOWN]));
    let dims = crate::ops::testing::i64s(&[4, 0]);
    let m = infer1("SparseToDense", &metas(&[2]), &[None, Some(&dims)], &[]).unwrap();
    assert_eq!(m, TensorMeta::new(DType::F16, &[4, 0]));
    let m = infer1("SparseToDense", &metas(&[UNKNOWN]), &[], &[]).unwrap();
    assert_eq!(m, TensorMeta::unknown_rank(DType::F16));
    let neg: HostTensor = crate::ops::testing::i64s(&[4, -1]);
    let e = infer1("SparseToDense", &metas(&[2]), &[None, Some(&neg)], &[]).unwrap_err();
    assert!(e.to_string().contains("negative"), "{e}");
    let mut bad = metas(&[2]);
    bad[3] = TensorMeta::new(DType::F32, &[]);
    let e = infer_for_test("SparseToDense", &bad, &[], &[], 1).unwrap_err();
    assert!(e.to_string().contains("values' type"), "{e}");
    // Indices of 2 dims into a 1-D output_shape.
    let e = err(
        "SparseToDense",
        &[],
        &[
            i32t(&[1, 2], &[0, 0]),
            i32t(&[1], &[3]),
            f32t(&[1], &[1.0]),
            f32t(&[], &[0.0]),
        ],
        1,
    );
    assert!(e.contains("indexes 2 dims"), "{e}");
    // Three values for two indices.
    let e = err(
        "SparseToDense",
        &[],
        &[
            i32t(&[2], &[0, 1]),
            i32t(&[1], &[3]),
            f32t(&[3], &[1.0; 3]),
            f32t(&[], &[0.0]),
        ],
        1,
    );
    assert!(e.contains("3 values for 2 indices"), "{e}");
}

// ---------------------------------------------------------------------------------------
// NonMaxSuppressionV6

/// Six boxes of one class, `[y1, x1, y2, x2]`: 0, 1 and 2 overlap with IoU 0.9 / 1.1,
/// as do 3 and 4; 5 stands alone.
const BOXES: [f32; 24] = [
    0.0, 0.0, 1.0, 1.0, //
    0.0, 0.1, 1.0, 1.1, //
    0.0, -0.1, 1.0, 0.9, //
    0.0, 10.0, 1.0, 11.0, //
    0.0, 10.1, 1.0, 11.1, //
    0.0, 100.0, 1.0, 101.0,
];
const SCORES: [f32; 6] = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3];

fn nms(attrs: &[(&str, Attr)], inputs: &[Tensor]) -> (Vec<usize>, Vec<i32>) {
    let y = run("NonMaxSuppressionV6", attrs, inputs, 1).remove(0);
    (y.shape.clone(), y.slice::<i32>().unwrap().to_vec())
}

/// By score: 3 (0.95) kept, 0 (0.9) kept (no overlap with 3), 1 and 2 suppressed by 0
/// (IoU 0.818 > 0.5), 4 by 3, 5 kept: three boxes, the limit.
#[test]
fn nms_v6_keeps_boxes_by_score_and_iou() {
    let inputs = [
        f32t(&[1, 6, 4], &BOXES),
        f32t(&[1, 1, 6], &SCORES),
        i32t(&[1], &[3]),
        f32t(&[], &[0.5]),
        f32t(&[], &[0.0]),
    ];
    let (shape, y) = nms(&[], &inputs);
    assert_eq!(shape, [3, 3]);
    assert_eq!(y, [0, 0, 3, 0, 0, 0, 0, 0, 5]);
    // A limit of 2 stops after box 0; an IoU threshold of 0.9 keeps 1 and 2 too.
    let mut two = inputs.clone();
    two[2] = i32t(&[1], &[2]);
    assert_eq!(nms(&[], &two).1, [0, 0, 3, 0, 0, 0]);
    let mut loose = inputs.clone();
    loose[2] = i32t(&[1], &[10]);
    loose[3] = f32t(&[], &[0.9]);
    assert_eq!(
        nms(&[], &loose).1,
        [0, 0, 3, 0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 4, 0, 0, 5]
    );
    // A score threshold of 0.6 drops 2 (not strictly above), 4 and 5.
    let mut floor = loose;
    floor[4] = f32t(&[], &[0.6]);
    assert_eq!(nms(&[], &floor).1, [0, 0, 3, 0, 0, 0, 0, 0, 1]);
    // The same boxes as centre and size (center_point_box 1).
    let centred: Vec<f32> = BOXES
        .chunks(4)
        .flat_map(|b| {
            [
                (b[1] + b[3]) / 2.0,
                (b[0] + b[2]) / 2.0,
                b[3] - b[1],
                b[2] - b[0],
            ]
        })
        .collect();
    let mut c = inputs.clone();
    c[0] = f32t(&[1, 6, 4], &centred);
    let (_, y) = nms(&[("center_point_box", Attr::Int(1))], &c);
    assert_eq!(y, [0, 0, 3, 0, 0, 0, 0, 0, 5]);
}

/// Two batches, two classes, two far-apart boxes per batch (corners given max-first in
/// batch 1): rows batch-major, then class, then by score; equal scores go to the lower
/// index. Left-out thresholds: IoU 0, no score floor.
#[test]
fn nms_v6_walks_batches_and_classes() {
    let boxes = f32t(
        &[2, 2, 4],
        &[
            0.0, 0.0, 1.0, 1.0, 5.0, 5.0, 6.0, 6.0, //
            1.0, 1.0, 0.0, 0.0, 6.0, 6.0, 5.0, 5.0,
        ],
    );
    let scores = f32t(
        &[2, 2, 2],
        &[
            0.1, 0.2, -0.5, 0.3, //
            0.7, 0.7, 0.4, -0.9,
        ],
    );
    let (shape, y) = nms(&[], &[boxes.clone(), scores.clone(), i32t(&[], &[5])]);
    assert_eq!(shape, [8, 3]);
    assert_eq!(
        y,
        [
            0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 1, 0, //
            1, 0, 0, 1, 0, 1, 1, 1, 0, 1, 1, 1
        ]
    );
    // No max_output_size: nothing is selected; a negative one selects nothing either.
    assert_eq!(nms(&[], &[boxes.clone(), scores.clone()]).0, [0, 3]);
    assert_eq!(nms(&[], &[boxes, scores, i32t(&[], &[-4])]).0, [0, 3]);
}

#[test]
fn nms_v6_takes_float16() {
    let b16 = f16_tensor(&[1, 6, 4], &BOXES);
    let s16 = f16_tensor(&[1, 1, 6], &SCORES);
    let (_, y) = nms(
        &[],
        &[
            b16,
            s16,
            i32t(&[1], &[3]),
            f32t(&[], &[0.5]),
            f32t(&[], &[0.0]),
        ],
    );
    assert_eq!(y, [0, 0, 3, 0, 0, 0, 0, 0, 5]);
}

#[test]
fn nms_v6_refuses_bad_inputs() {
    let boxes = f32t(&[1, 6, 4], &BOXES);
    let scores = f32t(&[1, 1, 6], &SCORES);
    let with = |iou: f32| {
        [
            boxes.clone(),
            scores.clone(),
            i32t(&[1], &[3]),
            f32t(&[], &[iou]),
        ]
    };
    let e = err("NonMaxSuppressionV6", &[], &with(1.5), 1);
    assert!(e.contains("iou_threshold"), "{e}");
    let e = err(
        "NonMaxSuppressionV6",
        &[("max_boxes_size", Attr::Int(8))],
        &with(0.5),
        1,
    );
    assert!(e.contains("max_boxes_size"), "{e}");
    let e = err(
        "NonMaxSuppressionV6",
        &[("center_point_box", Attr::Int(2))],
        &with(0.5),
        1,
    );
    assert!(e.contains("center_point_box"), "{e}");
    let e = err(
        "NonMaxSuppressionV6",
        &[],
        &[boxes.clone(), f32t(&[1, 1, 5], &SCORES[..5])],
        1,
    );
    assert!(e.contains("need [1, classes, 6]"), "{e}");
    let e = err(
        "NonMaxSuppressionV6",
        &[],
        &[f32t(&[6, 4], &BOXES), scores.clone()],
        1,
    );
    assert!(e.contains("not [batches, boxes, 4]"), "{e}");
    let e = err(
        "NonMaxSuppressionV6",
        &[],
        &[i32t(&[1, 1, 4], &[0; 4]), scores],
        1,
    );
    assert!(e.contains("float16 or float32"), "{e}");
    let m = infer1(
        "NonMaxSuppressionV6",
        &[
            TensorMeta::new(DType::F32, &[UNKNOWN, UNKNOWN, 4]),
            TensorMeta::unknown_rank(DType::F32),
        ],
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(m, TensorMeta::new(DType::I32, &[UNKNOWN, 3]));
}

// ---------------------------------------------------------------------------------------
// BatchNormExt2

/// NHWC x [1, 2, 1, 2]: channel 0 holds 1 and 3 (mean 2, population variance 1), channel
/// 1 holds -2 and 4 (mean 1, variance 9). With epsilon 0, scale [2, 1], offset
/// [0.5, -1]: y = (x - mean) / std * scale + offset. output_variance is Bessel-corrected
/// (m = 2: 2 and 18); reserve_space_2 is the population variance.
#[test]
fn batch_norm_ext2_trains_on_the_batch() {
    let x = f32t(&[1, 2, 1, 2], &[1.0, -2.0, 3.0, 4.0]);
    let inputs = [x, f32t(&[2], &[2.0, 1.0]), f32t(&[2], &[0.5, -1.0])];
    let out = run(
        "BatchNormExt2",
        &[("epsilon", Attr::Float(0.0))],
        &inputs,
        5,
    );
    let v = |k: usize| out[k].slice::<f32>().unwrap().to_vec();
    assert_close(&v(0), &[-1.5, -2.0, 2.5, 0.0]);
    assert_eq!(v(1), [2.0, 1.0]);
    assert_eq!(v(2), [2.0, 18.0]);
    assert_eq!(v(3), [2.0, 1.0]);
    assert_eq!(v(4), [1.0, 9.0]);
    // The default epsilon, 1e-4, under the square root.
    let y = run("BatchNormExt2", &[], &inputs, 5).remove(0);
    let s0 = 1.0f64 / (1.0f64 + 1e-4).sqrt();
    let s1 = 1.0f64 / (9.0f64 + 1e-4).sqrt();
    let want = [
        (-s0 * 2.0 + 0.5) as f32,
        (-3.0 * s1 - 1.0) as f32,
        (1.0 * s0 * 2.0 + 0.5) as f32,
        (3.0 * s1 - 1.0) as f32,
    ];
    assert_close(y.slice::<f32>().unwrap(), &want);
}

/// NCHW inference: channel 0 is [3, -1] with mean 1, variance 4; channel 1 is [0, -2]
/// with mean -1, variance 0.25, scale 2, offset 1. The given statistics come back out.
#[test]
fn batch_norm_ext2_infers_with_given_statistics() {
    let inputs = [
        f32t(&[1, 2, 1, 2], &[3.0, -1.0, 0.0, -2.0]),
        f32t(&[2], &[1.0, 2.0]),
        f32t(&[2], &[0.0, 1.0]),
        f32t(&[2], &[1.0, -1.0]),
        f32t(&[2], &[4.0, 0.25]),
    ];
    let attrs = [
        ("epsilon", Attr::Float(0.0)),
        ("data_format", Attr::Str("NCHW".into())),
        ("is_training", Attr::Bool(false)),
    ];
    let out = run("BatchNormExt2", &attrs, &inputs, 5);
    let v = |k: usize| out[k].slice::<f32>().unwrap().to_vec();
    assert_close(&v(0), &[1.0, -1.0, 5.0, -3.0]);
    assert_eq!((v(1), v(2)), (vec![1.0, -1.0], vec![4.0, 0.25]));
    assert_eq!((v(3), v(4)), (vec![1.0, -1.0], vec![4.0, 0.25]));
    // float16 x: y rounds once to float16, the statistics stay float32.
    let mut h = inputs.clone();
    h[0] = f16_tensor(&[1, 2, 1, 2], &[3.0, -1.0, 0.0, -2.0]);
    let out = run("BatchNormExt2", &attrs, &h, 5);
    assert_eq!(out[0].dtype, DType::F16);
    assert_eq!(f16_values(&out[0]), [1.0, -1.0, 5.0, -3.0]);
    assert_eq!(out[1].dtype, DType::F32);
}

#[test]
fn batch_norm_ext2_refuses_bad_inputs() {
    let x = f32t(&[1, 2, 1, 2], &[0.0; 4]);
    let c = f32t(&[2], &[1.0, 1.0]);
    let e = err(
        "BatchNormExt2",
        &[("is_training", Attr::Bool(false))],
        &[x.clone(), c.clone(), c.clone()],
        5,
    );
    assert!(e.contains("input_mean is required"), "{e}");
    let e = err(
        "BatchNormExt2",
        &[("data_format", Attr::Str("NCDHW".into()))],
        &[x.clone(), c.clone(), c.clone()],
        5,
    );
    assert!(e.contains("data_format"), "{e}");
    let e = err(
        "BatchNormExt2",
        &[],
        &[f32t(&[2, 2], &[0.0; 4]), c.clone(), c.clone()],
        5,
    );
    assert!(e.contains("not 4-D"), "{e}");
    // NHWC has C = 2 (the last dim); a scale of 3 does not fit.
    let e = err("BatchNormExt2", &[], &[x, f32t(&[3], &[1.0; 3]), c], 5);
    assert!(e.contains("x's channels"), "{e}");
    let out = infer_for_test(
        "BatchNormExt2",
        &[
            TensorMeta::unknown_rank(DType::F16),
            TensorMeta::new(DType::F32, &[UNKNOWN]),
            TensorMeta::new(DType::F32, &[UNKNOWN]),
        ],
        &[],
        &[],
        5,
    )
    .unwrap();
    assert_eq!(out[0], TensorMeta::unknown_rank(DType::F16));
    assert_eq!(out[4], TensorMeta::new(DType::F32, &[UNKNOWN]));
}
