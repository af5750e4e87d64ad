//! GE's image resampling against TensorFlow's coordinate rules written out by hand.

use crate::ops::testing::{run, run_f32, run_f32_with_shape, try_run};
use crate::ops::{Attr, DType, INPUT_FORMATS_ATTR, Tensor};

fn size(h: i32, w: i32) -> Tensor {
    Tensor::from_vec(&[2], &[h, w])
}

fn flag(name: &str) -> (&str, Attr) {
    (name, Attr::Int(1))
}

fn nhwc(h: usize, w: usize, v: &[f32]) -> Tensor {
    Tensor::from_vec(&[1, h, w, 1], v)
}

fn assert_near(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-5, "{got:?} vs {want:?}");
    }
}

/// 2x2 to 3x3 with the legacy scaler: scale 2/3, source rows 0, 2/3 and 4/3 (clamped to
/// the last row, so row 2 is x's row 1).
#[test]
fn bilinear_legacy_scaler_clamps_at_the_edge() {
    let x = nhwc(2, 2, &[1.0, 2.0, 3.0, 4.0]);
    let (shape, y) = run_f32_with_shape("ResizeBilinearV2", &[], &[x, size(3, 3)]);
    assert_eq!(shape, [1, 3, 3, 1]);
    let t = 2.0f32 / 3.0;
    let top = [1.0, 1.0 + t, 2.0];
    let bottom = [3.0, 3.0 + t, 4.0];
    let mut want = top.to_vec();
    want.extend(top.iter().zip(&bottom).map(|(a, b)| a + (b - a) * t));
    want.extend(bottom);
    assert_near(&y, &want);
}

/// Half-pixel centers: W 2 -> 4 samples at -0.25, 0.25, 0.75, 1.25 (PyTorch's
/// align_corners=False values); align corners: W 2 -> 3 at 0, 0.5, 1.
#[test]
fn bilinear_half_pixel_and_align_corners() {
    let x = nhwc(1, 2, &[10.0, 20.0]);
    let half = [flag("half_pixel_centers")];
    let y = run_f32("ResizeBilinearV2", &half, &[x.clone(), size(1, 4)]);
    assert_near(&y, &[10.0, 12.5, 17.5, 20.0]);
    let y = run_f32(
        "ResizeBilinearV2",
        &[flag("align_corners")],
        &[x, size(1, 3)],
    );
    assert_near(&y, &[10.0, 15.0, 20.0]);
}

/// An NCHW image (as lowering records the tensor's format): each channel resized on its
/// own H and W, C kept in place.
#[test]
fn bilinear_reads_the_layout_lowering_records() {
    let x = Tensor::from_vec(&[1, 2, 1, 2], &[10.0f32, 20.0, -1.0, 1.0]);
    let attrs = [
        flag("half_pixel_centers"),
        (INPUT_FORMATS_ATTR, Attr::Ints(vec![0, 2])),
    ];
    let (shape, y) = run_f32_with_shape("ResizeBilinearV2", &attrs, &[x.clone(), size(1, 4)]);
    assert_eq!(shape, [1, 2, 1, 4]);
    assert_near(&y, &[10.0, 12.5, 17.5, 20.0, -1.0, -0.5, 0.5, 1.0]);
    // Without the recorded format the same tensor is NHWC: H 2, W 1, C 2, so W 1 -> 4
    // repeats each pixel's two channels.
    let (shape, y) = run_f32_with_shape("ResizeBilinearV2", &attrs[..1], &[x, size(2, 4)]);
    assert_eq!(shape, [1, 2, 4, 2]);
    assert_near(&y[..8], &[10.0, 20.0, 10.0, 20.0, 10.0, 20.0, 10.0, 20.0]);
    let bad = [(INPUT_FORMATS_ATTR, Attr::Ints(vec![3, 2]))];
    let x = nhwc(1, 2, &[1.0, 2.0]);
    let err = try_run("ResizeBilinearV2", &bad, &[x, size(1, 4)], 1).unwrap_err();
    assert!(err.to_string().contains("NC1HWC0"), "{err}");
}

/// `dtype` uint8: rounded half away from zero, from an integer image; float16 kept for a
/// float16 image.
#[test]
fn bilinear_output_types() {
    let x = Tensor::from_vec(&[1, 1, 3, 1], &[0u8, 255, 100]);
    let out = run(
        "ResizeBilinearV2",
        &[("dtype", Attr::DType(DType::U8))],
        &[x.clone(), size(1, 5)],
        1,
    );
    // scale 3/5: samples at 0, 0.6, 1.2, 1.8, 2.4.
    let want = [0.0, 153.0, 255.0 - 155.0 * 0.2, 255.0 - 155.0 * 0.8, 100.0];
    let got = out[0].slice::<u8>().unwrap().to_vec();
    let want: Vec<u8> = want.iter().map(|v: &f32| v.round() as u8).collect();
    assert_eq!(got, want);
    let y = run_f32("ResizeBilinearV2", &[], &[x, size(1, 5)]);
    assert_near(&y, &[0.0, 153.0, 224.0, 131.0, 100.0]);
    let h = Tensor::from_vec(
        &[1, 1, 2, 1],
        &[half::f16::from_f32(1.0), half::f16::from_f32(2.0)],
    );
    let out = run(
        "ResizeBilinearV2",
        &[("dtype", Attr::DType(DType::F16))],
        &[h, size(1, 4)],
        1,
    );
    assert_eq!(out[0].dtype, DType::F16);
    let got: Vec<f32> = out[0]
        .slice::<half::f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [1.0, 1.5, 2.0, 2.0]);
}

/// Nearest neighbour: W 3 -> 5 with scale 0.6. Legacy: floor(0, 0.6, 1.2, 1.8, 2.4);
/// half-pixel: floor(0.3, 0.9, 1.5, 2.1, 2.7); align corners (scale 0.5): round(0, 0.5,
/// 1, 1.5, 2), half away from zero. Integers are copied as they are.
#[test]
fn nearest_neighbor_follows_tensorflows_three_scalers() {
    let x = Tensor::from_vec(&[1, 1, 3, 1], &[7i32, -8, 9]);
    let pick = |attrs: &[(&str, Attr)]| {
        let out = run(
            "ResizeNearestNeighborV2",
            attrs,
            &[x.clone(), size(1, 5)],
            1,
        );
        out[0].slice::<i32>().unwrap().to_vec()
    };
    assert_eq!(pick(&[]), [7, 7, -8, -8, 9]);
    assert_eq!(pick(&[flag("half_pixel_centers")]), [7, 7, -8, 9, 9]);
    assert_eq!(pick(&[flag("align_corners")]), [7, -8, -8, 9, 9]);
}

/// The D forms take `size` as a required attribute.
#[test]
fn d_forms_take_size_as_an_attribute() {
    let x = nhwc(1, 2, &[10.0, 20.0]);
    let attrs = [("size", Attr::Ints(vec![2, 3])), flag("align_corners")];
    let (shape, y) = run_f32_with_shape("ResizeBilinearV2D", &attrs, std::slice::from_ref(&x));
    assert_eq!(shape, [1, 2, 3, 1]);
    assert_near(&y, &[10.0, 15.0, 20.0, 10.0, 15.0, 20.0]);
    let y = run_f32("ResizeNearestNeighborV2D", &attrs, std::slice::from_ref(&x));
    assert_near(&y, &[10.0, 20.0, 20.0, 10.0, 20.0, 20.0]);
    let err = try_run("ResizeNearestNeighborV2D", &[], std::slice::from_ref(&x), 1).unwrap_err();
    assert!(err.to_string().contains("size"), "{err}");
    let both = [flag("align_corners"), flag("half_pixel_centers")];
    let err = try_run("ResizeBilinearV2", &both, &[x.clone(), size(2, 2)], 1).unwrap_err();
    assert!(err.to_string().contains("half_pixel_centers"), "{err}");
    let flat = Tensor::from_vec(&[2, 1], &[1.0f32, 2.0]);
    assert!(try_run("ResizeBilinearV2", &[], &[flat, size(2, 2)], 1).is_err());
    assert!(try_run("ResizeBilinearV2", &[], &[x, size(0, 2)], 1).is_err());
}

/// A 3x3 image 0..9 (NHWC, one channel) cropped by normalized boxes.
#[test]
fn crop_and_resize_samples_boxes() {
    let img = Tensor::from_vec(&[1, 3, 3, 1], &(0..9).map(|v| v as f32).collect::<Vec<_>>());
    let crop = |boxes: &[f32], h: i32, w: i32, attrs: &[(&str, Attr)]| {
        let n = boxes.len() / 4;
        let inputs = [
            img.clone(),
            Tensor::from_vec(&[n, 4], boxes),
            Tensor::from_vec(&[n], &vec![0i32; n]),
            size(h, w),
        ];
        run_f32_with_shape("CropAndResize", attrs, &inputs)
    };
    // The whole image at its own size is the image.
    let (shape, y) = crop(&[0.0, 0.0, 1.0, 1.0], 3, 3, &[]);
    assert_eq!(shape, [1, 3, 3, 1]);
    assert_near(&y, &(0..9).map(|v| v as f32).collect::<Vec<_>>());
    // Rows and columns 1..=2 of the lower right; a 1x1 crop is the box's centre.
    assert_near(
        &crop(&[0.5, 0.5, 1.0, 1.0], 2, 2, &[]).1,
        &[4.0, 5.0, 7.0, 8.0],
    );
    assert_near(&crop(&[0.0, 0.0, 1.0, 1.0], 1, 1, &[]).1, &[4.0]);
    // Samples at (0 or 0.5, 0 or 0.5): bilinear, then nearest (0.5 rounds up).
    let quarter = [0.0, 0.0, 0.25, 0.25];
    assert_near(&crop(&quarter, 2, 2, &[]).1, &[0.0, 0.5, 1.5, 2.0]);
    let nearest = [("method", Attr::Str("nearest".into()))];
    assert_near(&crop(&quarter, 2, 2, &nearest).1, &[0.0, 1.0, 3.0, 4.0]);
    // A box reaching above the image: its first row is extrapolated.
    let ext = [("extrapolation_value", Attr::Float(-1.0))];
    assert_near(
        &crop(&[-1.0, 0.0, 0.0, 1.0], 2, 2, &ext).1,
        &[-1.0, -1.0, 0.0, 2.0],
    );
}

#[test]
fn crop_and_resize_refuses_bad_boxes() {
    let img = Tensor::from_vec(&[1, 2, 2, 1], &[0.0f32; 4]);
    let boxes = Tensor::from_vec(&[1, 4], &[0.0f32, 0.0, 1.0, 1.0]);
    let inputs = |index: i32| {
        [
            img.clone(),
            boxes.clone(),
            Tensor::from_vec(&[1], &[index]),
            size(2, 2),
        ]
    };
    let err = try_run("CropAndResize", &[], &inputs(1), 1).unwrap_err();
    assert!(err.to_string().contains("outside the batch"), "{err}");
    let bad = [("method", Attr::Str("area".into()))];
    let err = try_run("CropAndResize", &bad, &inputs(0), 1).unwrap_err();
    assert!(err.to_string().contains("method"), "{err}");
}

/// GE's ResizeNearestNeighborV2 without align_corners or half_pixel_centers (TensorFlow's
/// `floor(o in / out)`, clamped) gives ONNX's Resize `nearest` with
/// `coordinate_transformation_mode` asymmetric and `nearest_mode` floor, given `sizes`,
/// bit for bit, up- and downsampling: the case an ONNX Resize could be mapped onto it.
#[test]
fn nearest_neighbor_is_onnx_nearest_asymmetric_floor() {
    for ih in 1..=9usize {
        for oh in 1..=20usize {
            let (iw, ow) = (ih % 4 + 2, (oh * 3) % 11 + 1);
            let v: Vec<f32> = (0..ih * iw)
                .map(|k| (k * 37 % 101) as f32 * 0.37 - 11.0)
                .collect();
            let ge = run_f32(
                "ResizeNearestNeighborV2",
                &[],
                &[nhwc(ih, iw, &v), size(oh as i32, ow as i32)],
            );
            let x = Tensor::from_vec(&[1, 1, ih, iw], &v);
            let sizes = Tensor::from_vec(&[4], &[1i64, 1, oh as i64, ow as i64]);
            let empty = Tensor::from_vec(&[0], &[] as &[f32]);
            let onnx = run_f32(
                "Resize",
                &[
                    ("mode", Attr::Str("nearest".into())),
                    (
                        "coordinate_transformation_mode",
                        Attr::Str("asymmetric".into()),
                    ),
                    ("nearest_mode", Attr::Str("floor".into())),
                    ("onnx_opset", Attr::Int(13)),
                ],
                &[x, empty.clone(), empty, sizes],
            );
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&ge), bits(&onnx), "{ih}x{iw} -> {oh}x{ow}");
        }
    }
}
