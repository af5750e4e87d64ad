//! DeformableOffsets and DeformableConv2D against bilinear samples worked out by hand and
//! a direct convolution written out here.

use crate::ops::testing::{f16_tensor, f16_values, infer1, run_f32, run_f32_with_shape, try_run};
use crate::ops::{Attr, DType, Tensor, TensorMeta, UNKNOWN, assert_close};

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

fn t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

/// Unit strides, no padding, a 1x1 kernel, NCHW.
fn one_tap() -> Vec<(&'static str, Attr)> {
    vec![
        ("strides", ints(&[1, 1, 1, 1])),
        ("pads", ints(&[0, 0, 0, 0])),
        ("ksize", ints(&[1, 1])),
    ]
}

/// x[h][w] = 3h + w + 1 on a 3x3 image, and offsets [1, 3, 3, 3] (dx, dy, mask planes):
/// (0,0) moved by (dy .25, dx .5); (0,1) by dx -1.5, half outside on the left; (1,1)
/// masked by 2; (2,0) by dy .5, half below the image; (2,2) by dx 1, wholly outside.
fn one_tap_case() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let mut off = vec![0.0f32; 27];
    let (dx, dy, mask) = (0, 9, 18);
    off[mask..].fill(1.0);
    off[dx] = 0.5;
    off[dy] = 0.25;
    off[dx + 1] = -1.5;
    off[mask + 4] = 2.0;
    off[dy + 6] = 0.5;
    off[dx + 8] = 1.0;
    // (0,0): v is linear, 3*.25 + .5 + 1; (0,1): .5 * x[0][0]; (2,0): .5 * x[2][0].
    let want = vec![2.25, 0.5, 3.0, 4.0, 10.0, 6.0, 3.5, 8.0, 0.0];
    (x, off, want)
}

#[test]
fn offsets_sample_bilinearly_with_zeros_outside_and_the_mask() {
    let (x, off, want) = one_tap_case();
    let (shape, y) = run_f32_with_shape(
        "DeformableOffsets",
        &one_tap(),
        &[t(&[1, 1, 3, 3], &x), t(&[1, 3, 3, 3], &off)],
    );
    assert_eq!(shape, [1, 1, 3, 3]);
    assert_close(&y, &want);
}

#[test]
fn offsets_compute_float16_and_bfloat16_through_f32() {
    let (x, off, want) = one_tap_case();
    let y = crate::ops::testing::run1(
        "DeformableOffsets",
        &one_tap(),
        &[
            f16_tensor(&[1, 1, 3, 3], &x),
            f16_tensor(&[1, 3, 3, 3], &off),
        ],
    );
    assert_eq!(y.dtype, DType::F16);
    assert_eq!(f16_values(&y), want);
    let bf =
        |v: &[f32]| -> Vec<half::bf16> { v.iter().map(|&a| half::bf16::from_f32(a)).collect() };
    let y = crate::ops::testing::run1(
        "DeformableOffsets",
        &one_tap(),
        &[
            Tensor::from_vec(&[1, 1, 3, 3], &bf(&x)),
            Tensor::from_vec(&[1, 3, 3, 3], &bf(&off)),
        ],
    );
    let got: Vec<f32> = y
        .slice::<half::bf16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, want);
}

/// A 2x2 kernel with pads [1, 0, 1, 0] and zero offsets: y's row `2*oh + i`, column
/// `2*ow + j` is x at (oh - 1 + i, ow - 1 + j), 0 in the padding.
#[test]
fn offsets_lay_the_taps_out_as_kh_by_kw_blocks() {
    let x: Vec<f32> = (0..9).map(|v| v as f32 - 4.0).collect();
    let mut off = vec![0.0f32; 12 * 9];
    off[8 * 9..].fill(1.0);
    let (shape, y) = run_f32_with_shape(
        "DeformableOffsets",
        &[
            ("strides", ints(&[1, 1, 1, 1])),
            ("pads", ints(&[1, 0, 1, 0])),
            ("ksize", ints(&[2, 2])),
        ],
        &[t(&[1, 1, 3, 3], &x), t(&[1, 12, 3, 3], &off)],
    );
    assert_eq!(shape, [1, 1, 6, 6]);
    for r in 0..6 {
        for c in 0..6 {
            let (h, w) = ((r / 2 + r % 2) as i64 - 1, (c / 2 + c % 2) as i64 - 1);
            let want = if h < 0 || w < 0 {
                0.0
            } else {
                (h * 3 + w) as f32 - 4.0
            };
            assert_eq!(y[r * 6 + c], want, "row {r} column {c}");
        }
    }
}

/// NHWC with two deformable groups of one channel each: group 0 unmoved, group 1 moved
/// by dx .5 and masked by .5. x(h, w, c) = 10c + 2h + w on a 2x2 image, a 2x2 kernel.
#[test]
fn offsets_nhwc_with_two_deformable_groups() {
    let mut x = vec![0.0f32; 8];
    for h in 0..2 {
        for w in 0..2 {
            for c in 0..2 {
                x[(h * 2 + w) * 2 + c] = (10 * c + 2 * h + w) as f32;
            }
        }
    }
    // channel (block*2 + group)*4 + tap
    let mut off = vec![0.0f32; 24];
    off[4..8].fill(0.5);
    off[16..20].fill(1.0);
    off[20..24].fill(0.5);
    let (shape, y) = run_f32_with_shape(
        "DeformableOffsets",
        &[
            ("strides", ints(&[1, 1, 1, 1])),
            ("pads", ints(&[0, 0, 0, 0])),
            ("ksize", ints(&[2, 2])),
            ("data_format", Attr::Str("NHWC".into())),
            ("deformable_groups", Attr::Int(2)),
        ],
        &[t(&[1, 2, 2, 2], &x), t(&[1, 1, 1, 24], &off)],
    );
    assert_eq!(shape, [1, 2, 2, 2]);
    // tap (i, j=0): .5 * (10 + 2i + .5); tap (i, j=1): .5 * .5 * (10 + 2i + 1).
    assert_close(&y, &[0.0, 5.25, 1.0, 2.75, 2.0, 6.25, 3.0, 3.25]);
}

/// `modulated` false: two offset blocks, every mask 1; strides 2 and dilation 2.
#[test]
fn offsets_unmodulated_with_stride_and_dilation() {
    let x: Vec<f32> = (1..=25).map(|v| v as f32).collect();
    // A 1x2 kernel dilated by 2 along w, stride 2: grid 3x2, taps at w and w + 2.
    let mut off = vec![0.0f32; 4 * 6];
    off[0] = -0.25; // dx of tap 0 at grid (0, 0)
    off[2 * 6 + 5] = 1.0; // dy of tap 0 at grid (2, 1): row 5, outside
    let (shape, y) = run_f32_with_shape(
        "DeformableOffsets",
        &[
            ("strides", ints(&[1, 1, 2, 2])),
            ("pads", ints(&[0, 0, 0, 0])),
            ("ksize", ints(&[1, 2])),
            ("dilations", ints(&[1, 1, 1, 2])),
            ("modulated", Attr::Bool(false)),
        ],
        &[t(&[1, 1, 5, 5], &x), t(&[1, 4, 3, 2], &off)],
    );
    assert_eq!(shape, [1, 1, 3, 4]);
    let at = |h: usize, w: usize| (h * 5 + w + 1) as f32;
    let want = [
        0.75 * at(0, 0), // x(0, -0.25): .75 of x(0,0), the rest outside
        at(0, 2),
        at(0, 2),
        at(0, 4),
        at(2, 0),
        at(2, 2),
        at(2, 2),
        at(2, 4),
        at(4, 0),
        at(4, 2),
        0.0,
        at(4, 4),
    ];
    assert_close(&y, &want);
}

#[test]
fn offsets_refuse_bad_attributes_and_shapes() {
    let x = t(&[1, 2, 3, 3], &[0.0; 18]);
    let off = t(&[1, 3, 3, 3], &[0.0; 27]);
    let err = |attrs: &[(&str, Attr)], off: &Tensor| {
        try_run("DeformableOffsets", attrs, &[x.clone(), off.clone()], 1)
            .unwrap_err()
            .to_string()
    };
    let mut a = one_tap();
    a.remove(2);
    assert!(err(&a, &off).contains("ksize"), "{}", err(&a, &off));
    let mut a = one_tap();
    a.remove(0);
    assert!(err(&a, &off).contains("strides"));
    let mut a = one_tap();
    a[0].1 = ints(&[2, 1, 1, 1]);
    assert!(err(&a, &off).contains("N and C"));
    let mut a = one_tap();
    a.push(("deformable_groups", Attr::Int(3)));
    assert!(err(&a, &off).contains("deformable_groups"));
    let mut a = one_tap();
    a.push(("data_format", Attr::Str("NCDHW".into())));
    assert!(err(&a, &off).contains("data_format"));
    let short = t(&[1, 2, 3, 3], &[0.0; 18]);
    assert!(err(&one_tap(), &short).contains("offsets"));
    let flat = t(&[2, 9], &[0.0; 18]);
    let e = try_run("DeformableOffsets", &one_tap(), &[flat, off], 1).unwrap_err();
    assert!(e.to_string().contains("4-D"), "{e}");
}

#[test]
fn offsets_infer_with_unknown_dims_and_rank() {
    let x = TensorMeta::new(DType::F32, &[UNKNOWN, 4, UNKNOWN, 5]);
    let off = TensorMeta::unknown_rank(DType::F32);
    let mut a = one_tap();
    a[2].1 = ints(&[2, 3]);
    let y = infer1("DeformableOffsets", &[x, off.clone()], &[], &a).unwrap();
    assert_eq!(y.shape.as_deref(), Some(&[UNKNOWN, 4, UNKNOWN, 9][..]));
    let y = infer1("DeformableOffsets", &[off.clone(), off], &[], &a).unwrap();
    assert_eq!(y.shape, None);
}

// ---------------------------------------------------------------------------------------
// DeformableConv2D

/// A direct NCHW convolution: pads [top, bottom, left, right], strides and dilations
/// (h, w), one group.
#[allow(clippy::too_many_arguments)]
fn direct_conv(
    x: &[f32],
    [c, h, w]: [usize; 3],
    f: &[f32],
    [m, kh, kw]: [usize; 3],
    bias: &[f32],
    pads: [usize; 4],
    stride: [usize; 2],
    dil: [usize; 2],
) -> (Vec<usize>, Vec<f32>) {
    let ho = (h + pads[0] + pads[1] - (kh - 1) * dil[0] - 1) / stride[0] + 1;
    let wo = (w + pads[2] + pads[3] - (kw - 1) * dil[1] - 1) / stride[1] + 1;
    let mut y = vec![0.0; m * ho * wo];
    for o in 0..m {
        for oy in 0..ho {
            for ox in 0..wo {
                let mut s = bias[o];
                for ci in 0..c {
                    for i in 0..kh {
                        for j in 0..kw {
                            let iy = (oy * stride[0] + i * dil[0]) as i64 - pads[0] as i64;
                            let ix = (ox * stride[1] + j * dil[1]) as i64 - pads[2] as i64;
                            if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                                continue;
                            }
                            let xv = x[(ci * h + iy as usize) * w + ix as usize];
                            s += f[((o * c + ci) * kh + i) * kw + j] * xv;
                        }
                    }
                }
                y[(o * ho + oy) * wo + ox] = s;
            }
        }
    }
    (vec![1, m, ho, wo], y)
}

/// NCHW dims [1, c, h, w] of `v` to NHWC, or an NCHW filter [m, c, kh, kw] to HWCN.
fn to_last(v: &[f32], [a, b, h, w]: [usize; 4], filter: bool) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for i in 0..a {
        for j in 0..b {
            for y in 0..h {
                for x in 0..w {
                    let from = ((i * b + j) * h + y) * w + x;
                    let to = if filter {
                        ((y * w + x) * b + j) * a + i
                    } else {
                        ((i * h + y) * w + x) * b + j
                    };
                    out[to] = v[from];
                }
            }
        }
    }
    out
}

/// Zero offsets and unit masks: a plain convolution, NCHW and (permuted) NHWC.
#[test]
fn conv_with_zero_offsets_is_a_convolution() {
    let (c, h, w, m, kh, kw) = (2, 4, 5, 3, 3, 2);
    let x: Vec<f32> = (0..c * h * w)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 4.0)
        .collect();
    let f: Vec<f32> = (0..m * c * kh * kw)
        .map(|i| ((i * 5 % 7) as f32 - 3.0) / 2.0)
        .collect();
    let bias = [0.5, -1.0, 2.0];
    let (pads, stride, dil) = ([1, 0, 1, 1], [2, 1], [1, 2]);
    let (shape, want) = direct_conv(&x, [c, h, w], &f, [m, kh, kw], &bias, pads, stride, dil);
    let [ho, wo] = [shape[2], shape[3]];
    let taps = kh * kw;
    let mut off = vec![0.0f32; 3 * taps * ho * wo];
    off[2 * taps * ho * wo..].fill(1.0);
    let attrs = |nchw: bool| {
        let (s, d, fmt) = if nchw {
            ([1, 1, 2, 1], [1, 1, 1, 2], "NCHW")
        } else {
            ([1, 2, 1, 1], [1, 1, 2, 1], "NHWC")
        };
        vec![
            ("strides", ints(&s)),
            ("pads", ints(&[1, 0, 1, 1])),
            ("dilations", ints(&d)),
            ("data_format", Attr::Str(fmt.into())),
        ]
    };
    let (got_shape, got) = run_f32_with_shape(
        "DeformableConv2D",
        &attrs(true),
        &[
            t(&[1, c, h, w], &x),
            t(&[m, c, kh, kw], &f),
            t(&[1, 3 * taps, ho, wo], &off),
            t(&[m], &bias),
        ],
    );
    assert_eq!(got_shape, shape);
    assert_close(&got, &want);
    let (got_shape, got) = run_f32_with_shape(
        "DeformableConv2D",
        &attrs(false),
        &[
            t(&[1, h, w, c], &to_last(&x, [1, c, h, w], false)),
            t(&[kh, kw, c, m], &to_last(&f, [m, c, kh, kw], true)),
            t(
                &[1, ho, wo, 3 * taps],
                &to_last(&off, [1, 3 * taps, ho, wo], false),
            ),
            t(&[m], &bias),
        ],
    );
    assert_eq!(got_shape, [1, ho, wo, m]);
    assert_close(&got, &to_last(&want, [1, m, ho, wo], false));
}

/// A 1x1 filter of 2 over a 1x2 NHWC image [1, 3] (the default format), bias 1: pixel 0
/// sampled half way to pixel 1 (2), pixel 1 masked by .5 (1.5).
#[test]
fn conv_samples_moved_and_masked_pixels() {
    let attrs = [
        ("strides", ints(&[1, 1, 1, 1])),
        ("pads", ints(&[0, 0, 0, 0])),
    ];
    let inputs = |x: Tensor, f: Tensor, off: Tensor, b: Tensor| vec![x, f, off, b];
    let y = run_f32(
        "DeformableConv2D",
        &attrs,
        &inputs(
            t(&[1, 1, 2, 1], &[1.0, 3.0]),
            t(&[1, 1, 1, 1], &[2.0]),
            t(&[1, 1, 2, 3], &[0.5, 0.0, 1.0, 0.0, 0.0, 0.5]),
            t(&[1], &[1.0]),
        ),
    );
    assert_close(&y, &[5.0, 4.0]);
    let y = crate::ops::testing::run1(
        "DeformableConv2D",
        &attrs,
        &inputs(
            f16_tensor(&[1, 1, 2, 1], &[1.0, 3.0]),
            f16_tensor(&[1, 1, 1, 1], &[2.0]),
            f16_tensor(&[1, 1, 2, 3], &[0.5, 0.0, 1.0, 0.0, 0.0, 0.5]),
            f16_tensor(&[1], &[1.0]),
        ),
    );
    assert_eq!(f16_values(&y), [5.0, 4.0]);
    // Without the bias.
    let y = run_f32(
        "DeformableConv2D",
        &attrs,
        &[
            t(&[1, 1, 2, 1], &[1.0, 3.0]),
            t(&[1, 1, 1, 1], &[2.0]),
            t(&[1, 1, 2, 3], &[0.5, 0.0, 1.0, 0.0, 0.0, 0.5]),
        ],
    );
    assert_close(&y, &[4.0, 3.0]);
}

#[test]
fn conv_refuses_bad_attributes_and_shapes() {
    let x = t(&[1, 2, 2, 2], &[0.0; 8]);
    let f = t(&[1, 1, 2, 3], &[0.0; 6]);
    let off = t(&[1, 2, 2, 3], &[0.0; 12]);
    let err = |attrs: &[(&str, Attr)], f: &Tensor| {
        try_run(
            "DeformableConv2D",
            attrs,
            &[x.clone(), f.clone(), off.clone()],
            1,
        )
        .unwrap_err()
        .to_string()
    };
    let good = [
        ("strides", ints(&[1, 1, 1, 1])),
        ("pads", ints(&[0, 0, 0, 0])),
    ];
    assert!(err(&good[1..], &f).contains("strides"));
    assert!(err(&good[..1], &f).contains("pads"));
    let mut a = good.to_vec();
    a.push(("groups", Attr::Int(2)));
    assert!(err(&a, &f).contains("filter"), "{}", err(&a, &f));
    let mut a = good.to_vec();
    a.push(("deformable_groups", Attr::Int(0)));
    assert!(err(&a, &f).contains("deformable_groups"));
    let mut a = good.to_vec();
    a[1].1 = ints(&[-1, 0, 0, 0]);
    assert!(err(&a, &f).contains("pads"));
    let i32x = Tensor::from_vec(&[1, 2, 2, 2], &[0i32; 8]);
    let e = try_run(
        "DeformableConv2D",
        &good,
        &[i32x, f.clone(), off.clone()],
        1,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("float16, float32 or bfloat16"),
        "{e}"
    );
}
