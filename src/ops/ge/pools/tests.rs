//! GE's 1-D, 3-D, adaptive, Lp, argmax and morphological pools against small literal
//! expectations and direct loops written here (PyTorch's, ONNX's and TensorFlow's
//! meanings).

use crate::ops::testing::{run, run_f32_with_shape, try_run};
use crate::ops::{Attr, Tensor};

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> String {
    try_run(op, attrs, inputs, 1).unwrap_err().to_string()
}

/// x = 1..=5: pads [1, 1], window 2, stride 2 averages {1}, {2, 3}, {4, 5}; counting the
/// padding gives 0.5 first; ceil mode keeps a last short window.
#[test]
fn avg_pool1d_is_pytorchs() {
    let x = Tensor::from_vec(&[1, 1, 5], &[1.0f32, 2.0, 3.0, 4.0, 5.0]);
    let base = [
        ("ksize", Attr::Int(2)),
        ("strides", Attr::Int(2)),
        ("pads", ints(&[1, 1])),
    ];
    let (shape, y) = run_f32_with_shape("AvgPool1D", &base, std::slice::from_ref(&x));
    assert_eq!(shape, [1, 1, 3]);
    assert_eq!(y, [1.0, 2.5, 4.5]);
    let mut with_pad = base.to_vec();
    with_pad.push(("count_include_pad", Attr::Bool(true)));
    let (_, y) = run_f32_with_shape("AvgPool1D", &with_pad, std::slice::from_ref(&x));
    assert_eq!(y, [0.5, 2.5, 4.5]);
    let ceil = [
        ("ksize", Attr::Int(2)),
        ("strides", Attr::Int(2)),
        ("pads", ints(&[0, 0])),
        ("ceil_mode", Attr::Bool(true)),
    ];
    let (_, y) = run_f32_with_shape("AvgPool1D", &ceil, std::slice::from_ref(&x));
    assert_eq!(y, [1.5, 3.5, 5.0]);
    let e = err("AvgPool1D", &base[1..], &[x]);
    assert!(e.contains("ksize") && e.contains("required"), "{e}");
}

/// The mean of each window of an NDHWC x (a direct loop), the padding counted (the
/// default); AvgPool3DD ignores its assist inputs.
#[test]
fn avg_pool3d_ndhwc() {
    let (d, h, w, c) = (2, 3, 3, 2);
    let x: Vec<f32> = (0..d * h * w * c).map(|v| ((v * 5) % 11) as f32).collect();
    let attrs = [
        ("ksize", ints(&[2])),
        ("strides", ints(&[1, 1, 2, 2, 1])),
        ("pads", ints(&[0, 0, 1, 1, 0, 1])),
    ];
    let xt = Tensor::from_vec(&[1, d, h, w, c], &x);
    let (shape, y) = run_f32_with_shape("AvgPool3D", &attrs, std::slice::from_ref(&xt));
    assert_eq!(shape, [1, 1, 2, 2, c]);
    let mut want = Vec::new();
    for oh in 0..2usize {
        for ow in 0..2usize {
            for ch in 0..c {
                let mut s = 0.0;
                for a in 0..2usize {
                    for i in 0..2usize {
                        for j in 0..2usize {
                            let (hh, ww) = ((oh * 2 + i) as isize - 1, (ow * 2 + j) as isize);
                            if hh >= 0 && (hh as usize) < h && (ww as usize) < w {
                                s += x[((a * h + hh as usize) * w + ww as usize) * c + ch];
                            }
                        }
                    }
                }
                want.push(s / 8.0);
            }
        }
    }
    assert_eq!(y, want);
    let assist = Tensor::from_vec(&[1], &[7.0f32]);
    let (_, yd) = run_f32_with_shape("AvgPool3DD", &attrs, &[xt.clone(), assist.clone(), assist]);
    assert_eq!(yd, want);
    let mut over = attrs.to_vec();
    over.push(("divisor_override", Attr::Int(3)));
    let e = err("AvgPool3D", &over, &[xt]);
    assert!(e.contains("divisor_override"), "{e}");
}

/// NCDHW MaxPool3D: TensorFlow's SAME (one row of padding after d), and VALID.
#[test]
fn max_pool3d_same_and_valid() {
    let x: Vec<f32> = (0..48).map(|v| ((v * 7) % 17) as f32).collect();
    let xt = Tensor::from_vec(&[1, 1, 3, 4, 4], &x);
    let attrs = |padding: &str| {
        vec![
            ("ksize", ints(&[1, 1, 2, 2, 2])),
            ("strides", ints(&[1, 1, 1, 2, 2])),
            ("padding", Attr::Str(padding.into())),
            ("data_format", Attr::Str("NCDHW".into())),
        ]
    };
    let at = |z: usize, yy: usize, xx: usize| x[(z * 4 + yy) * 4 + xx];
    let want = |dz: usize| -> Vec<f32> {
        let mut v = Vec::new();
        for z in 0..dz {
            for oh in 0..2 {
                for ow in 0..2 {
                    let mut m = f32::NEG_INFINITY;
                    for a in z..(z + 2).min(3) {
                        for i in 0..2 {
                            for j in 0..2 {
                                m = m.max(at(a, oh * 2 + i, ow * 2 + j));
                            }
                        }
                    }
                    v.push(m);
                }
            }
        }
        v
    };
    let (shape, y) = run_f32_with_shape("MaxPool3D", &attrs("SAME"), std::slice::from_ref(&xt));
    assert_eq!(shape, [1, 1, 3, 2, 2]);
    assert_eq!(y, want(3));
    let (shape, y) = run_f32_with_shape("MaxPool3D", &attrs("VALID"), std::slice::from_ref(&xt));
    assert_eq!(shape, [1, 1, 2, 2, 2]);
    assert_eq!(y, want(2));
    let no_padding: Vec<_> = attrs("")
        .into_iter()
        .filter(|(k, _)| *k != "padding")
        .collect();
    let e = err("MaxPool3D", &no_padding, std::slice::from_ref(&xt));
    assert!(e.contains("padding"), "{e}");
    let e = err("MaxPool3D", &attrs("SAME")[1..], &[xt]);
    assert!(e.contains("ksize"), "{e}");
}

#[test]
fn max_pool_v2_takes_its_window_as_inputs() {
    let (shape, y) = run_f32_with_shape(
        "MaxPoolV2",
        &[("padding", Attr::Str("VALID".into()))],
        &[
            iota(&[1, 4, 4, 1]),
            Tensor::from_vec(&[4], &[1i32, 2, 2, 1]),
            Tensor::from_vec(&[4], &[1i32, 2, 2, 1]),
        ],
    );
    assert_eq!(shape, [1, 2, 2, 1]);
    assert_eq!(y, [5.0, 7.0, 13.0, 15.0]);
}

/// x[r][c] = 5 r + c, 3 x 5, pooled to 2 x 3: rows {0, 1}, {1, 2}; columns {0, 1},
/// {1, 2, 3}, {3, 4}.
#[test]
fn adaptive_pools_are_pytorchs() {
    let x = iota(&[1, 1, 3, 5]);
    let size = [("output_size", ints(&[2, 3]))];
    let (shape, y) = run_f32_with_shape("AdaptiveAvgPool2d", &size, std::slice::from_ref(&x));
    assert_eq!(shape, [1, 1, 2, 3]);
    assert_eq!(y, [3.0, 4.5, 6.0, 8.0, 9.5, 11.0]);
    let out = run("AdaptiveMaxPool2d", &size, std::slice::from_ref(&x), 2);
    assert_eq!(
        out[0].slice::<f32>().unwrap(),
        [6.0, 8.0, 9.0, 11.0, 13.0, 14.0]
    );
    assert_eq!(out[1].slice::<i64>().unwrap(), [6, 8, 9, 11, 13, 14]);
    // One pooled dim from the output_size input: each row of [1, 3, 5] to 3 values.
    let (shape, y) = run_f32_with_shape(
        "AdaptiveAvgPool",
        &[],
        &[iota(&[1, 3, 5]), Tensor::from_vec(&[1], &[3i64])],
    );
    assert_eq!(shape, [1, 3, 3]);
    let want: Vec<f32> = (0..3)
        .flat_map(|r| [0.5, 2.0, 3.5].map(|v| v + 5.0 * r as f32))
        .collect();
    assert_eq!(y, want);
    let e = err("AdaptiveAvgPool2d", &[], std::slice::from_ref(&x));
    assert!(e.contains("output_size") && e.contains("required"), "{e}");
    let e = err("AdaptiveAvgPool2d", &[("output_size", ints(&[0, 2]))], &[x]);
    assert!(e.contains("output_size"), "{e}");
}

#[test]
fn global_lp_pool_is_the_p_norm_of_each_plane() {
    let x = Tensor::from_vec(&[1, 2, 2], &[3.0f32, -4.0, 1.0, 1.0]);
    let (shape, y) = run_f32_with_shape("GlobalLpPool", &[], std::slice::from_ref(&x));
    assert_eq!(shape, [1, 2, 1]);
    assert!(
        (y[0] - 5.0).abs() < 1e-6 && (y[1] - 2f32.sqrt()).abs() < 1e-6,
        "{y:?}"
    );
    let (_, y) = run_f32_with_shape(
        "GlobalLpPool",
        &[("p", Attr::Float(1.0))],
        std::slice::from_ref(&x),
    );
    assert_eq!(y, [7.0, 2.0]);
    let e = err("GlobalLpPool", &[("p", Attr::Float(0.0))], &[x]);
    assert!(e.contains("p"), "{e}");
}

/// NHWC x [n, 3, 3, 2]: channel 0 holds h * 3 + w, channel 1 its negation. 2 x 2 VALID
/// windows: channel 0's maximum is each window's last tap, channel 1's its first;
/// TensorFlow's index (h * 3 + w) * 2 + c, plus n * 18 with include_batch_in_index.
#[test]
fn max_pool_with_argmax_is_tensorflows() {
    let mut v = Vec::new();
    for b in 0..2 {
        for p in 0..9 {
            let s = (p + 100 * b) as f32;
            v.extend([s, -s]);
        }
    }
    let x = Tensor::from_vec(&[2, 3, 3, 2], &v);
    let attrs = [
        ("ksize", ints(&[1, 2, 2, 1])),
        ("strides", ints(&[1, 1, 1, 1])),
        ("padding", Attr::Str("VALID".into())),
    ];
    let out = run("MaxPoolWithArgmax", &attrs, std::slice::from_ref(&x), 2);
    assert_eq!(out[0].shape, [2, 2, 2, 2]);
    let y = out[0].slice::<f32>().unwrap();
    assert_eq!(y[..8], [4.0, 0.0, 5.0, -1.0, 7.0, -3.0, 8.0, -4.0]);
    let first = [8i64, 1, 10, 3, 14, 7, 16, 9];
    let idx = out[1].slice::<i64>().unwrap();
    assert_eq!(idx[..8], first);
    assert_eq!(idx[8..], first);
    let mut batch = attrs.to_vec();
    batch.push(("include_batch_in_index", Attr::Bool(true)));
    batch.push(("Targmax", Attr::Int(3)));
    let out = run("MaxPoolWithArgmax", &batch, std::slice::from_ref(&x), 2);
    let idx = out[1].slice::<i32>().unwrap();
    let want: Vec<i32> = first
        .iter()
        .map(|&i| i as i32)
        .chain(first.iter().map(|&i| i as i32 + 18))
        .collect();
    assert_eq!(idx, want);
    let e = try_run("MaxPoolWithArgmax", &attrs[..2], &[x], 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("padding"), "{e}");
}

/// x[h][w] = 3 h + w, filter [[0, 1], [10, 0]]: SAME (padding after), and VALID with
/// rates 2 (the corners).
#[test]
fn dilation2d_is_tensorflows() {
    let x = iota(&[1, 3, 3, 1]);
    let f = Tensor::from_vec(&[2, 2, 1], &[0.0f32, 1.0, 10.0, 0.0]);
    let fv = [[0.0f32, 1.0], [10.0, 0.0]];
    let (shape, y) = run_f32_with_shape(
        "Dilation2D",
        &[
            ("strides", ints(&[1, 1, 1, 1])),
            ("rates", ints(&[1, 1, 1, 1])),
        ],
        &[x.clone(), f.clone()],
    );
    assert_eq!(shape, [1, 3, 3, 1]);
    let mut want = Vec::new();
    for h in 0..3 {
        for w in 0..3 {
            let mut m = f32::NEG_INFINITY;
            for (i, row) in fv.iter().enumerate() {
                for (j, &fij) in row.iter().enumerate() {
                    if h + i < 3 && w + j < 3 {
                        m = m.max(((h + i) * 3 + w + j) as f32 + fij);
                    }
                }
            }
            want.push(m);
        }
    }
    assert_eq!(y, want);
    let (shape, y) = run_f32_with_shape(
        "Dilation2D",
        &[
            ("strides", ints(&[1, 1, 1, 1])),
            ("rates", ints(&[1, 2, 2, 1])),
            ("padding_mode", Attr::Str("VALID".into())),
        ],
        &[x.clone(), f.clone()],
    );
    assert_eq!(shape, [1, 1, 1, 1]);
    assert_eq!(y, [16.0]);
    let e = err(
        "Dilation2D",
        &[("rates", ints(&[1, 1, 1, 1]))],
        &[x.clone(), f.clone()],
    );
    assert!(e.contains("strides") && e.contains("required"), "{e}");
    let e = err(
        "Dilation2D",
        &[
            ("strides", ints(&[1, 0, 1, 1])),
            ("rates", ints(&[1, 1, 1, 1])),
        ],
        &[x, f],
    );
    assert!(e.contains("strides"), "{e}");
}
