//! GE's detection ops against their frameworks' semantics worked out by hand: IoUs of
//! small boxes written out, prior boxes from their centres and sides.

use half::f16;

use crate::ops::testing::{assert_close, run, run_f32_with_shape, try_run};
use crate::ops::{Attr, Tensor};

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn scalar(v: f32) -> Tensor {
    Tensor::from_vec(&[], &[v])
}

fn count(v: i32) -> Tensor {
    Tensor::from_vec(&[], &[v])
}

fn floats(v: &[f64]) -> Attr {
    Attr::Floats(v.to_vec())
}

/// NonMaxSuppressionV3's selected indices.
fn nms(boxes: &[f32], scores: &[f32], max: i32, iou: f32, floor: f32) -> Vec<i32> {
    let n = scores.len();
    let inputs = [
        f32s(&[n, 4], boxes),
        f32s(&[n], scores),
        count(max),
        scalar(iou),
        scalar(floor),
    ];
    let out = run("NonMaxSuppressionV3", &[], &inputs, 1);
    let v = out[0].slice::<i32>().unwrap().to_vec();
    assert_eq!(out[0].shape, [v.len()]);
    v
}

/// Six unit-high boxes: 1 and 2 overlap box 0 with IoU 0.9 / 1.1 (0.818), 4 overlaps box
/// 3 likewise, 5 overlaps nothing.
const BOXES: [f32; 24] = [
    0.0, 0.0, 1.0, 1.0, //
    0.0, 0.1, 1.0, 1.1, //
    0.0, -0.1, 1.0, 0.9, //
    0.0, 10.0, 1.0, 11.0, //
    0.0, 10.1, 1.0, 11.1, //
    0.0, 100.0, 1.0, 101.0,
];
const SCORES: [f32; 6] = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3];

#[test]
fn nms_keeps_the_best_box_of_each_cluster_by_score() {
    assert_eq!(nms(&BOXES, &SCORES, 3, 0.5, f32::NEG_INFINITY), [3, 0, 5]);
    // At most two.
    assert_eq!(nms(&BOXES, &SCORES, 2, 0.5, f32::NEG_INFINITY), [3, 0]);
    // Box 5 scores 0.3: not strictly above the floor of 0.3.
    assert_eq!(nms(&BOXES, &SCORES, 10, 0.5, 0.3), [3, 0]);
    // IoU 0.818 is at most 0.9: nothing is suppressed, all in score order.
    assert_eq!(nms(&BOXES, &SCORES, 10, 0.9, 0.0), [3, 0, 1, 2, 4, 5]);
    assert_eq!(nms(&BOXES, &SCORES, 0, 0.5, 0.0), Vec::<i32>::new());
}

/// IoU exactly at the threshold keeps the box (TensorFlow suppresses above it): boxes 3
/// wide overlapping by 2 have IoU 2 / (3 + 3 - 2) = 0.5.
#[test]
fn nms_suppresses_only_above_the_threshold() {
    let boxes = [0.0, 0.0, 1.0, 3.0, 0.0, 1.0, 1.0, 4.0];
    assert_eq!(nms(&boxes, &[0.8, 0.9], 5, 0.5, 0.0), [1, 0]);
    assert_eq!(nms(&boxes, &[0.8, 0.9], 5, 0.49, 0.0), [1]);
}

/// Corners in either order give the same IoU; equal scores go to the lower index; a box
/// of no area overlaps nothing.
#[test]
fn nms_corner_order_ties_and_empty_boxes() {
    let flipped = [1.0, 3.0, 0.0, 0.0, 0.0, 1.0, 1.0, 4.0];
    assert_eq!(nms(&flipped, &[0.9, 0.8], 5, 0.49, 0.0), [0]);
    let twins = [0.0, 0.0, 1.0, 1.0, 0.0, 5.0, 1.0, 6.0];
    assert_eq!(nms(&twins, &[0.5, 0.5], 5, 0.5, 0.0), [0, 1]);
    let point = [0.0, 0.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5];
    assert_eq!(nms(&point, &[0.9, 0.8], 5, 0.0, 0.0), [0, 1]);
}

#[test]
fn nms_reads_float16() {
    let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    let inputs = [
        Tensor::from_vec(&[6, 4], &h(&BOXES)),
        Tensor::from_vec(&[6], &h(&SCORES)),
        count(3),
        Tensor::from_vec(&[], &h(&[0.5])),
        Tensor::from_vec(&[], &h(&[0.0])),
    ];
    let out = run("NonMaxSuppressionV3", &[], &inputs, 1);
    assert_eq!(out[0].slice::<i32>().unwrap(), [3, 0, 5]);
}

#[test]
fn nms_refuses_bad_inputs_and_offsets() {
    let good = || {
        vec![
            f32s(&[6, 4], &BOXES),
            f32s(&[6], &SCORES),
            count(3),
            scalar(0.5),
            scalar(0.0),
        ]
    };
    let err = |attrs: &[(&str, Attr)], inputs: &[Tensor]| {
        try_run("NonMaxSuppressionV3", attrs, inputs, 1)
            .unwrap_err()
            .to_string()
    };
    let mut bad = good();
    bad[3] = scalar(1.5);
    assert!(
        err(&[], &bad).contains("iou_threshold"),
        "{}",
        err(&[], &bad)
    );
    let mut bad = good();
    bad[2] = count(-1);
    assert!(err(&[], &bad).contains("negative"), "{}", err(&[], &bad));
    let mut bad = good();
    bad[0] = f32s(&[8, 3], &BOXES);
    assert!(err(&[], &bad).contains("num_boxes"), "{}", err(&[], &bad));
    let mut bad = good();
    bad[1] = f32s(&[5], &SCORES[..5]);
    assert!(err(&[], &bad).contains("[5, 4]"), "{}", err(&[], &bad));
    let e = err(&[("offset", Attr::Int(1))], &good());
    assert!(e.contains("offset"), "{e}");
    assert!(try_run("NonMaxSuppressionV3", &[], &good()[..4], 1).is_err());
}

// ---- PriorBox

/// One prior `[xmin, ymin, xmax, ymax]` around (cx, cy), normalized by an 8 x 4 image.
fn prior(cx: f64, cy: f64, bw: f64, bh: f64) -> [f32; 4] {
    [
        ((cx - bw / 2.0) / 8.0) as f32,
        ((cy - bh / 2.0) / 4.0) as f32,
        ((cx + bw / 2.0) / 8.0) as f32,
        ((cy + bh / 2.0) / 4.0) as f32,
    ]
}

fn prior_inputs() -> [Tensor; 2] {
    // A 1 x 2 feature map over a 4 x 8 image: steps 4 and 4.
    [
        f32s(&[1, 1, 1, 2], &[0.0; 2]),
        f32s(&[1, 3, 4, 8], &[0.0; 96]),
    ]
}

/// min 2, max 4, ratio 2 flipped: per cell the 2 x 2 square, the sqrt(8) square, a box
/// 2 sqrt(2) wide and sqrt(2) high, and its transpose; cells centred at x 2 and 6, y 2.
#[test]
fn prior_box_orders_min_max_then_ratios_per_cell() {
    let attrs = [
        ("min_size", floats(&[2.0])),
        ("max_size", floats(&[4.0])),
        ("aspect_ratio", floats(&[2.0])),
        ("variance", floats(&[0.1, 0.1, 0.2, 0.2])),
    ];
    let (shape, y) = run_f32_with_shape("PriorBox", &attrs, &prior_inputs());
    assert_eq!(shape, [1, 2, 32]);
    let (s8, r2) = (8f64.sqrt(), 2f64.sqrt());
    let mut want = Vec::new();
    for cx in [2.0, 6.0] {
        want.extend(prior(cx, 2.0, 2.0, 2.0));
        want.extend(prior(cx, 2.0, s8, s8));
        want.extend(prior(cx, 2.0, 2.0 * r2, 2.0 / r2));
        want.extend(prior(cx, 2.0, 2.0 / r2, 2.0 * r2));
    }
    assert_eq!(&want[..4], [0.125, 0.25, 0.375, 0.75]);
    for _ in 0..8 {
        want.extend([0.1f32, 0.1, 0.2, 0.2]);
    }
    assert_close(&y, &want);
}

/// Without flip, a repeated ratio and ratio 1 add nothing; no max size; clip clamps to
/// [0, 1]; img_h / img_w, step_h / step_w and offset given as attributes.
#[test]
fn prior_box_attributes_override_the_image() {
    let attrs = [
        ("min_size", floats(&[6.0])),
        ("max_size", floats(&[])),
        ("aspect_ratio", floats(&[1.0, 4.0, 4.0])),
        ("flip", Attr::Int(0)),
        ("clip", Attr::Int(1)),
        ("img_h", Attr::Int(4)),
        ("img_w", Attr::Int(8)),
        ("step_h", Attr::Float(2.0)),
        ("step_w", Attr::Float(3.0)),
        ("offset", Attr::Float(0.0)),
    ];
    let inputs = [f32s(&[1, 1, 1, 2], &[0.0; 2]), f32s(&[1, 1, 1, 1], &[0.0])];
    let (shape, y) = run_f32_with_shape("PriorBox", &attrs, &inputs);
    assert_eq!(shape, [1, 2, 16]);
    let clamp = |b: [f32; 4]| b.map(|c| c.clamp(0.0, 1.0));
    let mut want = Vec::new();
    for cx in [0.0, 3.0] {
        want.extend(clamp(prior(cx, 0.0, 6.0, 6.0)));
        want.extend(clamp(prior(cx, 0.0, 12.0, 3.0)));
    }
    want.extend([0.1f32; 16]);
    assert_close(&y, &want);
}

#[test]
fn prior_box_float16_and_errors() {
    let attrs = [
        ("min_size", floats(&[2.0])),
        ("max_size", floats(&[4.0])),
        ("aspect_ratio", floats(&[])),
    ];
    let h = |t: &Tensor| {
        let v: Vec<f16> = t
            .slice::<f32>()
            .unwrap()
            .iter()
            .map(|&x| f16::from_f32(x))
            .collect();
        Tensor::from_vec(&t.shape, &v)
    };
    let [x, img] = prior_inputs();
    let out = run("PriorBox", &attrs, &[h(&x), h(&img)], 1);
    let got: Vec<f32> = out[0]
        .slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got[..4], [0.125, 0.25, 0.375, 0.75]);
    assert_eq!(got[16..], [f16::from_f32(0.1).to_f32(); 16]);
    let err = |attrs: &[(&str, Attr)]| {
        try_run("PriorBox", attrs, &prior_inputs(), 1)
            .unwrap_err()
            .to_string()
    };
    assert!(err(&attrs[1..]).contains("min_size"));
    assert!(err(&[attrs[0].clone(), attrs[2].clone()]).contains("max_size"));
    let mut bad = attrs.to_vec();
    bad[1].1 = floats(&[1.0]);
    assert!(err(&bad).contains("max_size"), "{}", err(&bad));
    let mut bad = attrs.to_vec();
    bad.push(("variance", floats(&[0.1, 0.2, 0.3])));
    assert!(err(&bad).contains("variance"), "{}", err(&bad));
    let mut bad = attrs.to_vec();
    bad.push(("step_w", Attr::Float(-1.0)));
    assert!(err(&bad).contains("step_w"), "{}", err(&bad));
    let mut bad = attrs.to_vec();
    bad.push(("img_w", Attr::Int(-8)));
    assert!(err(&bad).contains("img_w"), "{}", err(&bad));
}

// ---- ROIPooling

/// A 4 x 4 map per channel: `100 ch + 4 row + col`.
fn ramp(channels: usize) -> Tensor {
    let v: Vec<f32> = (0..channels * 16)
        .map(|i| (100 * (i / 16) + i % 16) as f32)
        .collect();
    f32s(&[1, channels, 4, 4], &v)
}

fn roi_attrs(scale_h: f32, scale_w: f32) -> Vec<(&'static str, Attr)> {
    vec![
        ("pooled_h", Attr::Int(2)),
        ("pooled_w", Attr::Int(2)),
        ("spatial_scale_h", Attr::Float(f64::from(scale_h))),
        ("spatial_scale_w", Attr::Float(f64::from(scale_w))),
    ]
}

/// At scale_w 1 and scale_h 0.5: ROI x 0..3, y 0..6 is cells 0..=3 both ways, bins of
/// 2: each quadrant's max. ROI x 1..3, y 2..6 is cells 1..=3 both ways, bins of 1.5:
/// rows and columns [1, 3) and [2, 4).
#[test]
fn roi_pooling_takes_each_bins_max() {
    let rois = f32s(&[2, 5], &[0.0, 0.0, 0.0, 3.0, 6.0, 0.0, 1.0, 2.0, 3.0, 6.0]);
    let (shape, y) = run_f32_with_shape("ROIPooling", &roi_attrs(0.5, 1.0), &[ramp(2), rois]);
    assert_eq!(shape, [2, 2, 2, 2]);
    let want = [
        5.0, 7.0, 13.0, 15.0, 105.0, 107.0, 113.0, 115.0, // roi 0
        10.0, 11.0, 14.0, 15.0, 110.0, 111.0, 114.0, 115.0, // roi 1
    ];
    assert_eq!(y, want);
}

/// GE's `[batch, 5, rois]` layout holds the same ROIs field-major; a ROI past the map
/// has only empty bins, which are 0.
#[test]
fn roi_pooling_reads_ges_layout_and_zeroes_empty_bins() {
    // Two ROIs: (0, 0)-(3, 3) and (10, 10)-(12, 12), as [1, 5, 2].
    let rois = f32s(
        &[1, 5, 2],
        &[0.0, 0.0, 0.0, 10.0, 0.0, 10.0, 3.0, 12.0, 3.0, 12.0],
    );
    let (shape, y) = run_f32_with_shape("ROIPooling", &roi_attrs(1.0, 1.0), &[ramp(1), rois]);
    assert_eq!(shape, [2, 1, 2, 2]);
    assert_eq!(y, [5.0, 7.0, 13.0, 15.0, 0.0, 0.0, 0.0, 0.0]);
}

#[test]
fn roi_pooling_refuses_bad_attributes_and_rois() {
    let rois = || f32s(&[1, 5], &[0.0, 0.0, 0.0, 3.0, 3.0]);
    let err = |attrs: &[(&str, Attr)], inputs: &[Tensor]| {
        try_run("ROIPooling", attrs, inputs, 1)
            .unwrap_err()
            .to_string()
    };
    let attrs = roi_attrs(1.0, 1.0);
    for k in 0..4 {
        let mut missing = attrs.clone();
        let (name, _) = missing.remove(k);
        assert!(err(&missing, &[ramp(1), rois()]).contains(name), "{name}");
    }
    let mut bad = attrs.clone();
    bad[0].1 = Attr::Int(0);
    assert!(err(&bad, &[ramp(1), rois()]).contains("pooled_h"));
    let far = f32s(&[1, 5], &[1.0, 0.0, 0.0, 3.0, 3.0]);
    assert!(err(&attrs, &[ramp(1), far]).contains("batch_id"));
    let counts = Tensor::from_vec(&[1, 8], &[1i32; 8]);
    assert!(err(&attrs, &[ramp(1), rois(), counts]).contains("roi_actual_num"));
    let odd = f32s(&[1, 4], &[0.0; 4]);
    assert!(err(&attrs, &[ramp(1), odd]).contains("num_rois"));
}

// ---- PSROIPooling

fn ps_attrs(dim: i64, group: i64) -> Vec<(&'static str, Attr)> {
    vec![
        ("output_dim", Attr::Int(dim)),
        ("group_size", Attr::Int(group)),
        ("spatial_scale", Attr::Float(1.0)),
    ]
}

/// Group 2: bin (i, j) reads channel `2 i + j` only. ROI (0, 0)-(1, 1) spans cells 0..2
/// (the far edge one past the corner), bins of one cell each; ROI (0, 0)-(0, 0) is one
/// cell, bins of half a cell that all cover cell (0, 0).
#[test]
fn psroi_pooling_reads_each_bins_own_channel() {
    // x[ch, r, c] = 10 ch + 2 r + c on a 2 x 2 map.
    let v: Vec<f32> = (0..16).map(|i| (10 * (i / 4) + i % 4) as f32).collect();
    let x = f32s(&[1, 4, 2, 2], &v);
    let rois = f32s(
        &[1, 5, 2],
        &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0],
    );
    let (shape, y) = run_f32_with_shape("PSROIPooling", &ps_attrs(1, 2), &[x, rois]);
    assert_eq!(shape, [2, 1, 2, 2]);
    assert_eq!(y, [0.0, 11.0, 22.0, 33.0, 0.0, 10.0, 20.0, 30.0]);
}

/// Group 1, two output channels: each the mean of its channel over the ROI's cells.
#[test]
fn psroi_pooling_averages_the_bin() {
    let x = f32s(&[1, 2, 2, 2], &[1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0]);
    let rois = f32s(&[1, 5], &[0.0, 0.0, 0.0, 1.0, 1.0]);
    let (shape, y) = run_f32_with_shape("PSROIPooling", &ps_attrs(2, 1), &[x, rois]);
    assert_eq!(shape, [1, 2, 1, 1]);
    assert_eq!(y, [2.5, 25.0]);
}

#[test]
fn psroi_pooling_refuses_bad_attributes() {
    let x = f32s(&[1, 3, 2, 2], &[0.0; 12]);
    let rois = f32s(&[1, 5], &[0.0; 5]);
    let err = |attrs: &[(&str, Attr)], x: Tensor| {
        try_run("PSROIPooling", attrs, &[x, rois.clone()], 1)
            .unwrap_err()
            .to_string()
    };
    assert!(err(&ps_attrs(1, 2), x.clone()).contains("channels"));
    assert!(err(&ps_attrs(3, 128), x.clone()).contains("group_size"));
    assert!(err(&ps_attrs(3, 1)[..2], x).contains("spatial_scale"));
}

/// float16 in, float16 out: the same maxes and means, rounded once.
#[test]
fn roi_poolings_keep_float16() {
    let h = |t: &Tensor| {
        let v: Vec<f16> = t
            .slice::<f32>()
            .unwrap()
            .iter()
            .map(|&x| f16::from_f32(x))
            .collect();
        Tensor::from_vec(&t.shape, &v)
    };
    let rois = f32s(&[1, 5], &[0.0, 0.0, 0.0, 3.0, 3.0]);
    let out = run(
        "ROIPooling",
        &roi_attrs(1.0, 1.0),
        &[h(&ramp(1)), h(&rois)],
        1,
    );
    let got: Vec<f32> = out[0]
        .slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [5.0, 7.0, 13.0, 15.0]);
    // Mean of 1, 2, 3, 4 and 2, 2, 2, 3 (2.25) in group 1.
    let x = f32s(&[1, 2, 2, 2], &[1.0, 2.0, 3.0, 4.0, 2.0, 2.0, 2.0, 3.0]);
    let rois = f32s(&[1, 5], &[0.0, 0.0, 0.0, 1.0, 1.0]);
    let out = run("PSROIPooling", &ps_attrs(2, 1), &[h(&x), h(&rois)], 1);
    let got: Vec<f32> = out[0]
        .slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [2.5, 2.25]);
}
