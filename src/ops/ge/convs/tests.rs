//! GE's depthwise, transposed and 3-D convolutions and bias additions against direct
//! loops written here over NCDHW data (2-D cases are depth 1), the layouts GE names
//! converted by index arithmetic.

use crate::ops::testing::{run_f32_with_shape, try_run};
use crate::ops::{Attr, Tensor};

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

/// Deterministic values without ties, some negative.
fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7 + seed * 13) % 29) as f32 - 14.0) / 8.0)
        .collect()
}

/// `v` of dims `shape` with its dims permuted (output dim `k` is input dim `perm[k]`).
fn permute(v: &[f32], shape: &[usize], perm: &[usize]) -> (Vec<f32>, Vec<usize>) {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len() - 1).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        out.push(
            v[idx
                .iter()
                .zip(perm)
                .map(|(&i, &p)| i * strides[p])
                .sum::<usize>()],
        );
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < out_shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    (out, out_shape)
}

/// A window's geometry over (d, h, w).
struct Geo {
    stride: [usize; 3],
    dilation: [usize; 3],
    pad: [usize; 3],
    groups: usize,
}

fn geo2(stride: [usize; 2], dilation: [usize; 2], pad: [usize; 2], groups: usize) -> Geo {
    Geo {
        stride: [1, stride[0], stride[1]],
        dilation: [1, dilation[0], dilation[1]],
        pad: [0, pad[0], pad[1]],
        groups,
    }
}

/// Cross-correlation: x `[N, C, D, H, W]`, w `[M, C/g, kd, kh, kw]`, bias `[M]`, output
/// spatial dims `out`; taps outside x read 0.
fn naive_conv(
    x: &[f32],
    xs: [usize; 5],
    w: &[f32],
    ws: [usize; 5],
    bias: Option<&[f32]>,
    g: &Geo,
    out: [usize; 3],
) -> Vec<f32> {
    let [n, c, d, h, wd] = xs;
    let [m, cg, kd, kh, kw] = ws;
    let mg = m / g.groups;
    let mut y = Vec::new();
    for b in 0..n {
        for o in 0..m {
            let grp = o / mg;
            for z in 0..out[0] {
                for yy in 0..out[1] {
                    for xx in 0..out[2] {
                        let mut s = bias.map_or(0.0, |b| b[o]);
                        for ci in 0..cg {
                            let ch = grp * cg + ci;
                            for a in 0..kd {
                                for i in 0..kh {
                                    for j in 0..kw {
                                        let p = [
                                            (z * g.stride[0] + a * g.dilation[0]) as isize
                                                - g.pad[0] as isize,
                                            (yy * g.stride[1] + i * g.dilation[1]) as isize
                                                - g.pad[1] as isize,
                                            (xx * g.stride[2] + j * g.dilation[2]) as isize
                                                - g.pad[2] as isize,
                                        ];
                                        if p[0] < 0
                                            || p[1] < 0
                                            || p[2] < 0
                                            || p[0] as usize >= d
                                            || p[1] as usize >= h
                                            || p[2] as usize >= wd
                                        {
                                            continue;
                                        }
                                        let (pz, py, px) =
                                            (p[0] as usize, p[1] as usize, p[2] as usize);
                                        let xv = x[(((b * c + ch) * d + pz) * h + py) * wd + px];
                                        let wv = w[(((o * cg + ci) * kd + a) * kh + i) * kw + j];
                                        s += xv * wv;
                                    }
                                }
                            }
                        }
                        y.push(s);
                    }
                }
            }
        }
    }
    y
}

/// The transposed convolution: x `[N, C, D, H, W]`, w `[C, M/g, kd, kh, kw]`; each x
/// element adds `x * w` at `o * stride + k * dilation - pad` where that is inside `out`.
fn naive_conv_t(
    x: &[f32],
    xs: [usize; 5],
    w: &[f32],
    ws: [usize; 5],
    bias: Option<&[f32]>,
    g: &Geo,
    out: [usize; 3],
) -> Vec<f32> {
    let [n, c, d, h, wd] = xs;
    let [_, mg, kd, kh, kw] = ws;
    let m = mg * g.groups;
    let cg = c / g.groups;
    let olen = out[0] * out[1] * out[2];
    let mut y = vec![0.0f32; n * m * olen];
    for b in 0..n {
        for o in 0..m {
            let v = bias.map_or(0.0, |b| b[o]);
            y[(b * m + o) * olen..][..olen].fill(v);
        }
        for ch in 0..c {
            let grp = ch / cg;
            for z in 0..d {
                for yy in 0..h {
                    for xx in 0..wd {
                        let xv = x[(((b * c + ch) * d + z) * h + yy) * wd + xx];
                        for mo in 0..mg {
                            let o = grp * mg + mo;
                            for a in 0..kd {
                                for i in 0..kh {
                                    for j in 0..kw {
                                        let p = [
                                            (z * g.stride[0] + a * g.dilation[0]) as isize
                                                - g.pad[0] as isize,
                                            (yy * g.stride[1] + i * g.dilation[1]) as isize
                                                - g.pad[1] as isize,
                                            (xx * g.stride[2] + j * g.dilation[2]) as isize
                                                - g.pad[2] as isize,
                                        ];
                                        if p.iter().zip(out).any(|(&q, o)| q < 0 || q as usize >= o)
                                        {
                                            continue;
                                        }
                                        let at = ((p[0] as usize * out[1]) + p[1] as usize)
                                            * out[2]
                                            + p[2] as usize;
                                        let wv = w[(((ch * mg + mo) * kd + a) * kh + i) * kw + j];
                                        y[(b * m + o) * olen + at] += xv * wv;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    y
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
            "at {i}: {g} vs {w}"
        );
    }
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> String {
    try_run(op, attrs, inputs, 1).unwrap_err().to_string()
}

const NHWC_TO_NCHW: [usize; 4] = [0, 3, 1, 2];
const NCHW_TO_NHWC: [usize; 4] = [0, 2, 3, 1];

/// NHWC x [1, 6, 7, 2], HWCN filter [3, 2, 2, 3] (multiplier 3), strides (2, 1),
/// dilations (1, 2), pads [1, 0, 1, 2], a bias: output channel c * 3 + m.
#[test]
fn depthwise_conv2d_nhwc_with_an_hwcn_filter() {
    let (c, mult) = (2, 3);
    let x = data(6 * 7 * c, 1);
    let f = data(3 * 2 * c * mult, 2);
    let bias = data(c * mult, 3);
    let attrs = [
        ("strides", ints(&[1, 2, 1, 1])),
        ("dilations", ints(&[1, 1, 2, 1])),
        ("pads", ints(&[1, 0, 1, 2])),
    ];
    let (shape, y) = run_f32_with_shape(
        "DepthwiseConv2D",
        &attrs,
        &[
            Tensor::from_vec(&[1, 6, 7, c], &x),
            Tensor::from_vec(&[3, 2, c, mult], &f),
            Tensor::from_vec(&[c * mult], &bias),
        ],
    );
    // (6 + 1 - 3) / 2 + 1 = 3, (7 + 3 - 3) / 1 + 1 = 8.
    assert_eq!(shape, [1, 3, 8, c * mult]);
    // The same as a grouped convolution: weight [c * mult, 1, kh, kw] from f[kh, kw, c, m].
    let (xn, _) = permute(&x, &[1, 6, 7, c], &NHWC_TO_NCHW);
    let (w, _) = permute(&f, &[3, 2, c * mult, 1], &[2, 3, 0, 1]);
    let want = naive_conv(
        &xn,
        [1, c, 1, 6, 7],
        &w,
        [c * mult, 1, 1, 3, 2],
        Some(&bias),
        &geo2([2, 1], [1, 2], [1, 1], c),
        [1, 3, 8],
    );
    let (want, _) = permute(&want, &[1, c * mult, 3, 8], &NCHW_TO_NHWC);
    close(&y, &want);
    // The same filter recorded as NCHW [mult, c, kh, kw] by lowering's origin formats.
    let (fn_, fshape) = permute(&f, &[3, 2, c, mult], &[3, 2, 0, 1]);
    let mut with_format = attrs.to_vec();
    with_format.push((crate::ops::INPUT_FORMATS_ATTR, ints(&[1, 0])));
    let (_, y2) = run_f32_with_shape(
        "DepthwiseConv2D",
        &with_format,
        &[
            Tensor::from_vec(&[1, 6, 7, c], &x),
            Tensor::from_vec(&fshape, &fn_),
            Tensor::from_vec(&[c * mult], &bias),
        ],
    );
    close(&y2, &want);
}

/// NCHW x with the NCHW filter [multiplier, C, kh, kw]; default dilations.
#[test]
fn depthwise_conv2d_nchw_with_an_nchw_filter() {
    let (c, mult) = (3, 2);
    let x = data(2 * c * 5 * 5, 4);
    let f = data(mult * c * 2 * 3, 5);
    let (shape, y) = run_f32_with_shape(
        "DepthwiseConv2D",
        &[
            ("strides", ints(&[1, 1, 1, 2])),
            ("pads", ints(&[0, 1, 1, 1])),
            ("data_format", Attr::Str("NCHW".into())),
        ],
        &[
            Tensor::from_vec(&[2, c, 5, 5], &x),
            Tensor::from_vec(&[mult, c, 2, 3], &f),
        ],
    );
    // (5 + 1 - 2) + 1 = 5, (5 + 2 - 3) / 2 + 1 = 3.
    assert_eq!(shape, [2, c * mult, 5, 3]);
    let (w, _) = permute(&f, &[mult, c, 2, 3], &[1, 0, 2, 3]);
    let want = naive_conv(
        &x,
        [2, c, 1, 5, 5],
        &w,
        [c * mult, 1, 1, 2, 3],
        None,
        &geo2([1, 2], [1, 1], [0, 1], c),
        [1, 5, 3],
    );
    close(&y, &want);
}

#[test]
fn depthwise_conv2d_refuses_bad_attributes() {
    let x = Tensor::from_vec(&[1, 4, 4, 2], &data(32, 0));
    let f = Tensor::from_vec(&[2, 2, 2, 1], &data(8, 1));
    let pads = ("pads", ints(&[0, 0, 0, 0]));
    let e = err(
        "DepthwiseConv2D",
        std::slice::from_ref(&pads),
        &[x.clone(), f.clone()],
    );
    assert!(e.contains("strides") && e.contains("required"), "{e}");
    let e = err(
        "DepthwiseConv2D",
        &[("strides", ints(&[2, 1, 1, 1])), pads.clone()],
        &[x.clone(), f.clone()],
    );
    assert!(e.contains("strides") && e.contains("N and C"), "{e}");
    let e = err(
        "DepthwiseConv2D",
        &[("strides", ints(&[1, 0, 1, 1])), pads.clone()],
        &[x.clone(), f.clone()],
    );
    assert!(e.contains("strides"), "{e}");
    let e = err(
        "DepthwiseConv2D",
        &[
            ("strides", ints(&[1, 1, 1, 1])),
            pads.clone(),
            ("offset_x", Attr::Int(3)),
        ],
        &[x.clone(), f.clone()],
    );
    assert!(e.contains("offset_x"), "{e}");
    let f3 = Tensor::from_vec(&[2, 2, 3, 1], &data(12, 1));
    let e = err(
        "DepthwiseConv2D",
        &[("strides", ints(&[1, 1, 1, 1])), pads],
        &[x, f3],
    );
    assert!(e.contains("channels"), "{e}");
}

/// TensorFlow's conv2d_backprop_input, NHWC with an HWCN filter [kh, kw, Cin, Cout]:
/// the transposed convolution, to an input_size the forward convolution maps onto
/// out_backprop (5 and 6 both give 3 under stride 2), the input and attribute forms.
#[test]
fn conv2d_backprop_input_is_the_transposed_convolution() {
    let (cin, cout) = (3, 2);
    let dy = data(3 * 3 * cout, 6);
    let f = data(3 * 3 * cin * cout, 7);
    let attrs = [
        ("strides", ints(&[1, 2, 2, 1])),
        ("pads", ints(&[1, 1, 1, 1])),
    ];
    let (dyn_, _) = permute(&dy, &[1, 3, 3, cout], &NHWC_TO_NCHW);
    // ONNX's W [Cout (dy's channels), Cin, kh, kw].
    let (w, _) = permute(&f, &[3, 3, cin, cout], &[3, 2, 0, 1]);
    for side in [5usize, 6] {
        let size = [1, side as i32, side as i32, cin as i32];
        let (shape, y) = run_f32_with_shape(
            "Conv2DBackpropInput",
            &attrs,
            &[
                Tensor::from_vec(&[4], &size),
                Tensor::from_vec(&[3, 3, cin, cout], &f),
                Tensor::from_vec(&[1, 3, 3, cout], &dy),
            ],
        );
        assert_eq!(shape, [1, side, side, cin]);
        let want = naive_conv_t(
            &dyn_,
            [1, cout, 1, 3, 3],
            &w,
            [cout, cin, 1, 3, 3],
            None,
            &geo2([2, 2], [1, 1], [1, 1], 1),
            [1, side, side],
        );
        let (want, _) = permute(&want, &[1, cin, side, side], &NCHW_TO_NHWC);
        close(&y, &want);
        let mut d_attrs = attrs.to_vec();
        d_attrs.push(("input_size", ints(&size.map(i64::from))));
        let (_, yd) = run_f32_with_shape(
            "Conv2DBackpropInputD",
            &d_attrs,
            &[
                Tensor::from_vec(&[3, 3, cin, cout], &f),
                Tensor::from_vec(&[1, 3, 3, cout], &dy),
            ],
        );
        close(&yd, &want);
    }
}

/// NCHW with an NCHW filter [Cout, Cin/groups, kh, kw], groups 2, dilation 2.
#[test]
fn conv2d_backprop_input_d_nchw_grouped_and_dilated() {
    let (cin, cout, groups) = (4, 2, 2);
    let dy = data(cout * 2 * 3, 8);
    let f = data(cout * (cin / groups) * 2 * 2, 9);
    // The forward convolution maps 5 x 5 onto 2 x 3: (5 + 1 - 3) / 2 + 1 and
    // (5 - 3) / 1 + 1, the dilated kernel 3 wide.
    let (shape, y) = run_f32_with_shape(
        "Conv2DBackpropInputD",
        &[
            ("input_size", ints(&[1, cin as i64, 5, 5])),
            ("strides", ints(&[1, 1, 2, 1])),
            ("pads", ints(&[1, 0, 0, 0])),
            ("dilations", ints(&[1, 1, 2, 2])),
            ("groups", Attr::Int(groups as i64)),
            ("data_format", Attr::Str("NCHW".into())),
        ],
        &[
            Tensor::from_vec(&[cout, cin / groups, 2, 2], &f),
            Tensor::from_vec(&[1, cout, 2, 3], &dy),
        ],
    );
    assert_eq!(shape, [1, cin, 5, 5]);
    let want = naive_conv_t(
        &dy,
        [1, cout, 1, 2, 3],
        &f,
        [cout, cin / groups, 1, 2, 2],
        None,
        &geo2([2, 1], [2, 2], [1, 0], groups),
        [1, 5, 5],
    );
    close(&y, &want);
}

#[test]
fn conv2d_backprop_input_refuses_a_size_the_output_does_not_fit() {
    let f = Tensor::from_vec(&[3, 3, 1, 1], &data(9, 1));
    let dy = Tensor::from_vec(&[1, 3, 3, 1], &data(9, 2));
    let base = [
        ("strides", ints(&[1, 2, 2, 1])),
        ("pads", ints(&[1, 1, 1, 1])),
    ];
    let mut attrs = base.to_vec();
    attrs.push(("input_size", ints(&[1, 9, 9, 1])));
    let e = err("Conv2DBackpropInputD", &attrs, &[f.clone(), dy.clone()]);
    assert!(e.contains("input_size"), "{e}");
    let e = err("Conv2DBackpropInputD", &base, &[f.clone(), dy.clone()]);
    assert!(e.contains("input_size") && e.contains("required"), "{e}");
    let mut attrs = vec![("pads", ints(&[1, 1, 1, 1]))];
    attrs.push(("input_size", ints(&[1, 5, 5, 1])));
    let e = err("Conv2DBackpropInputD", &attrs, &[f, dy]);
    assert!(e.contains("strides"), "{e}");
}

/// Caffe's deconvolution: [Cin, Cout/groups, kh, kw] filter, stride 2, uneven pads, a
/// bias; and the default attributes (stride 1, no padding).
#[test]
fn deconvolution_is_caffes() {
    let x = data(2 * 3 * 3, 10);
    let f = data(2 * 3 * 2 * 2, 11);
    let bias = data(3, 12);
    let (shape, y) = run_f32_with_shape(
        "Deconvolution",
        &[("strides", ints(&[2, 2])), ("pads", ints(&[1, 0, 0, 1]))],
        &[
            Tensor::from_vec(&[1, 2, 3, 3], &x),
            Tensor::from_vec(&[2, 3, 2, 2], &f),
            Tensor::from_vec(&[3], &bias),
        ],
    );
    // 2 * (3 - 1) + 2 - 1 = 5 both ways.
    assert_eq!(shape, [1, 3, 5, 5]);
    let want = naive_conv_t(
        &x,
        [1, 2, 1, 3, 3],
        &f,
        [2, 3, 1, 2, 2],
        Some(&bias),
        &geo2([2, 2], [1, 1], [1, 0], 1),
        [1, 5, 5],
    );
    close(&y, &want);
    let (shape, y) = run_f32_with_shape(
        "Deconvolution",
        &[],
        &[
            Tensor::from_vec(&[1, 2, 3, 3], &x),
            Tensor::from_vec(&[2, 3, 2, 2], &f),
        ],
    );
    assert_eq!(shape, [1, 3, 4, 4]);
    let want = naive_conv_t(
        &x,
        [1, 2, 1, 3, 3],
        &f,
        [2, 3, 1, 2, 2],
        None,
        &geo2([1, 1], [1, 1], [0, 0], 1),
        [1, 4, 4],
    );
    close(&y, &want);
    let e = err(
        "Deconvolution",
        &[("data_format", Attr::Str("NHWC".into()))],
        &[
            Tensor::from_vec(&[1, 2, 3, 3], &x),
            Tensor::from_vec(&[2, 3, 2, 2], &f),
        ],
    );
    assert!(e.contains("data_format"), "{e}");
}

/// NDHWC x with a DHWCN filter (TensorFlow's conv3d), strides, dilation and pads
/// [front, back, top, bottom, left, right]; NCDHW with an NCDHW filter and groups 2.
#[test]
fn conv3d_in_both_layouts() {
    let (c, m) = (2, 4);
    let x = data(4 * 5 * 5 * c, 13);
    let f = data(2 * 3 * 2 * c * m, 14);
    let (shape, y) = run_f32_with_shape(
        "Conv3D",
        &[
            ("strides", ints(&[1, 1, 2, 1, 1])),
            ("pads", ints(&[0, 1, 1, 1, 0, 2])),
            ("dilations", ints(&[1, 2, 1, 1, 1])),
        ],
        &[
            Tensor::from_vec(&[1, 4, 5, 5, c], &x),
            Tensor::from_vec(&[2, 3, 2, c, m], &f),
        ],
    );
    // d: (4 + 1 - 3) + 1 = 3; h: (5 + 2 - 3) / 2 + 1 = 3; w: (5 + 2 - 2) + 1 = 6.
    assert_eq!(shape, [1, 3, 3, 6, m]);
    let (xn, _) = permute(&x, &[1, 4, 5, 5, c], &[0, 4, 1, 2, 3]);
    let (w, _) = permute(&f, &[2, 3, 2, c, m], &[4, 3, 0, 1, 2]);
    let g = Geo {
        stride: [1, 2, 1],
        dilation: [2, 1, 1],
        pad: [0, 1, 0],
        groups: 1,
    };
    let want = naive_conv(
        &xn,
        [1, c, 4, 5, 5],
        &w,
        [m, c, 2, 3, 2],
        None,
        &g,
        [3, 3, 6],
    );
    let (want, _) = permute(&want, &[1, m, 3, 3, 6], &[0, 2, 3, 4, 1]);
    close(&y, &want);

    let x = data(2 * 4 * 3 * 3 * 3, 15);
    let f = data(4 * 2 * 2 * 2 * 2, 16);
    let bias = data(4, 17);
    let (shape, y) = run_f32_with_shape(
        "Conv3D",
        &[
            ("strides", ints(&[1, 1, 1, 2, 1])),
            ("pads", ints(&[1, 0, 0, 0, 1, 1])),
            ("groups", Attr::Int(2)),
            ("data_format", Attr::Str("NCDHW".into())),
        ],
        &[
            Tensor::from_vec(&[2, 4, 3, 3, 3], &x),
            Tensor::from_vec(&[4, 2, 2, 2, 2], &f),
            Tensor::from_vec(&[4], &bias),
        ],
    );
    assert_eq!(shape, [2, 4, 3, 1, 4]);
    let g = Geo {
        stride: [1, 2, 1],
        dilation: [1, 1, 1],
        pad: [1, 0, 1],
        groups: 2,
    };
    let want = naive_conv(
        &x,
        [2, 4, 3, 3, 3],
        &f,
        [4, 2, 2, 2, 2],
        Some(&bias),
        &g,
        [3, 1, 4],
    );
    close(&y, &want);
    let e = err(
        "Conv3D",
        &[("strides", ints(&[1, 1, 1, 1])), ("pads", ints(&[0; 6]))],
        &[
            Tensor::from_vec(&[2, 4, 3, 3, 3], &x),
            Tensor::from_vec(&[4, 4, 2, 2, 2], &data(128, 0)),
        ],
    );
    assert!(e.contains("strides"), "{e}");
}

/// Conv3DTranspose NCDHW to an input_size past the attributes' output, and
/// Conv3DTransposeD NDHWC with a DHWCN filter [kd, kh, kw, Cout, Cin] and an all-zero
/// input_size, sized by output_padding.
#[test]
fn conv3d_transpose_in_both_forms() {
    let x = data(2 * 2 * 3 * 3, 18);
    let f = data(2 * 3 * 2 * 2 * 2, 19);
    let attrs = [
        ("strides", ints(&[1, 1, 1, 2, 2])),
        ("pads", ints(&[0, 0, 1, 1, 0, 0])),
        ("data_format", Attr::Str("NCDHW".into())),
    ];
    let (shape, y) = run_f32_with_shape(
        "Conv3DTranspose",
        &attrs,
        &[
            Tensor::from_vec(&[5], &[1i32, 3, 3, 5, 7]),
            Tensor::from_vec(&[1, 2, 2, 3, 3], &x),
            Tensor::from_vec(&[2, 3, 2, 2, 2], &f),
        ],
    );
    assert_eq!(shape, [1, 3, 3, 5, 7]);
    let g = Geo {
        stride: [1, 2, 2],
        dilation: [1, 1, 1],
        pad: [0, 1, 0],
        groups: 1,
    };
    let want = naive_conv_t(
        &x,
        [1, 2, 2, 3, 3],
        &f,
        [2, 3, 2, 2, 2],
        None,
        &g,
        [3, 5, 7],
    );
    close(&y, &want);

    // NDHWC: x [1, 2, 3, 3, 2]; filter DHWCN [2, 2, 2, 3 (Cout), 2 (Cin)].
    let (xl, xls) = permute(&x, &[1, 2, 2, 3, 3], &[0, 2, 3, 4, 1]);
    let (fl, fls) = permute(&f, &[2, 3, 2, 2, 2], &[2, 3, 4, 1, 0]);
    let bias = data(3, 20);
    let (shape, y) = run_f32_with_shape(
        "Conv3DTransposeD",
        &[
            ("input_size", ints(&[0; 5])),
            ("strides", ints(&[1, 1, 2, 2, 1])),
            ("pads", ints(&[0, 0, 1, 1, 0, 0])),
            ("output_padding", ints(&[0, 1, 1, 0, 0])),
        ],
        &[
            Tensor::from_vec(&xls, &xl),
            Tensor::from_vec(&fls, &fl),
            Tensor::from_vec(&[3], &bias),
        ],
    );
    // d: 1 * 1 + 2 + 1 = 4; h: 2 * 2 + 2 - 2 + 1 = 5; w: 2 * 2 + 2 = 6.
    assert_eq!(shape, [1, 4, 5, 6, 3]);
    let want = naive_conv_t(
        &x,
        [1, 2, 2, 3, 3],
        &f,
        [2, 3, 2, 2, 2],
        Some(&bias),
        &g,
        [4, 5, 6],
    );
    let (want, _) = permute(&want, &[1, 3, 4, 5, 6], &[0, 2, 3, 4, 1]);
    close(&y, &want);
}

/// TensorFlow's BiasAdd: the channel dim is the last (NHWC, the default) or dim 1.
#[test]
fn bias_add_on_the_channel_dim() {
    let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let (_, y) = run_f32_with_shape(
        "BiasAdd",
        &[],
        &[
            Tensor::from_vec(&[2, 2, 3], &x),
            Tensor::from_vec(&[3], &[100.0f32, 200.0, 300.0]),
        ],
    );
    let want: Vec<f32> = (0..12)
        .map(|v| v as f32 + 100.0 * (v % 3 + 1) as f32)
        .collect();
    assert_eq!(y, want);
    let (_, y) = run_f32_with_shape(
        "BiasAdd",
        &[("data_format", Attr::Str("NCHW".into()))],
        &[
            Tensor::from_vec(&[1, 3, 2, 2], &x),
            Tensor::from_vec(&[3], &[100.0f32, 200.0, 300.0]),
        ],
    );
    let want: Vec<f32> = (0..12)
        .map(|v| v as f32 + 100.0 * (v / 4 + 1) as f32)
        .collect();
    assert_eq!(y, want);
    let e = err(
        "BiasAdd",
        &[],
        &[
            Tensor::from_vec(&[2, 2, 3], &x),
            Tensor::from_vec(&[2], &[1.0f32, 2.0]),
        ],
    );
    assert!(e.contains("channels"), "{e}");
    let e = err(
        "BiasAdd",
        &[("data_format", Attr::Str("HWC".into()))],
        &[
            Tensor::from_vec(&[2, 2, 3], &x),
            Tensor::from_vec(&[3], &[1.0f32, 2.0, 3.0]),
        ],
    );
    assert!(e.contains("data_format"), "{e}");
}

/// Caffe's Bias over x [2, 3, 4]: one axis from 1 (the default), every axis from 1
/// (num_axes -1), a one-value bias (num_axes 0), and the bias's own rank from axis -2
/// (bias_from_blob false).
#[test]
fn caffe_bias_over_the_covered_dims() {
    let x: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let xt = Tensor::from_vec(&[2, 3, 4], &x);
    let b3 = Tensor::from_vec(&[3], &[10.0f32, 20.0, 30.0]);
    let (_, y) = run_f32_with_shape("Bias", &[], &[xt.clone(), b3.clone()]);
    let want: Vec<f32> = (0..24)
        .map(|v| v as f32 + 10.0 * ((v / 4) % 3 + 1) as f32)
        .collect();
    assert_eq!(y, want);
    let b12: Vec<f32> = (0..12).map(|v| 1000.0 * v as f32).collect();
    let b12t = Tensor::from_vec(&[3, 4], &b12);
    let (_, y) = run_f32_with_shape(
        "Bias",
        &[("num_axes", Attr::Int(-1))],
        &[xt.clone(), b12t.clone()],
    );
    let want: Vec<f32> = (0..24)
        .map(|v| v as f32 + 1000.0 * (v % 12) as f32)
        .collect();
    assert_eq!(y, want);
    let (_, y) = run_f32_with_shape(
        "Bias",
        &[("num_axes", Attr::Int(0))],
        &[xt.clone(), Tensor::from_vec(&[1], &[0.5f32])],
    );
    let want: Vec<f32> = (0..24).map(|v| v as f32 + 0.5).collect();
    assert_eq!(y, want);
    let (_, y) = run_f32_with_shape(
        "Bias",
        &[
            ("axis", Attr::Int(-2)),
            ("bias_from_blob", Attr::Bool(false)),
        ],
        &[xt.clone(), b12t],
    );
    let want: Vec<f32> = (0..24)
        .map(|v| v as f32 + 1000.0 * (v % 12) as f32)
        .collect();
    assert_eq!(y, want);
    let e = err("Bias", &[("axis", Attr::Int(2))], &[xt.clone(), b3.clone()]);
    assert!(
        e.contains("input 1") || e.contains("bias") || e.contains("[3]"),
        "{e}"
    );
    let e = err("Bias", &[("axis", Attr::Int(3))], &[xt, b3]);
    assert!(e.contains("axis"), "{e}");
}
