//! The int8 convolutions and products against sums worked out by hand.

use crate::ops::testing::{infer1, run1, try_run};
use crate::ops::{Attr, DType, Tensor, TensorMeta};

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

fn s(v: &str) -> Attr {
    Attr::Str(v.to_string())
}

fn i8s(shape: &[usize], v: &[i8]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn i32s(shape: &[usize], v: &[i32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> String {
    match try_run(op, attrs, inputs, 1) {
        Ok(_) => panic!("{op} accepted what it should refuse"),
        Err(e) => e.to_string(),
    }
}

fn nchw_conv(offset_x: i64, pads: &[i64]) -> Vec<(&'static str, Attr)> {
    vec![
        ("strides", ints(&[1, 1, 1, 1])),
        ("pads", ints(pads)),
        ("data_format", s("NCHW")),
        ("offset_x", Attr::Int(offset_x)),
    ]
}

/// x `[[1,-2,3],[-4,5,-6],[7,-8,9]]` padded by 1 with offset_x 2, filter
/// `[[1,2],[3,-1]]`, bias 5: `y[i][j] = P[i][j] + 2 P[i][j+1] + 3 P[i+1][j] -
/// P[i+1][j+1] + 5` over the padded P. Corner (0, 0): 2 + 4 + 6 - 1 + 5 = 16; (1, 1):
/// 1 - 4 - 12 - 5 + 5 = -15; (3, 3): 9 + 4 + 6 - 2 + 5 = 22.
#[test]
fn conv2d_int8_pads_with_offset_x_and_adds_the_bias() {
    let x = i8s(&[1, 1, 3, 3], &[1, -2, 3, -4, 5, -6, 7, -8, 9]);
    let w = i8s(&[1, 1, 2, 2], &[1, 2, 3, -1]);
    let b = i32s(&[1], &[5]);
    let y = run1(
        "Conv2D",
        &nchw_conv(2, &[1, 1, 1, 1]),
        &[x.clone(), w.clone(), b],
    );
    assert_eq!(y.dtype, DType::I32);
    assert_eq!(y.shape, [1, 1, 4, 4]);
    assert_eq!(
        y.slice::<i32>().unwrap(),
        &[
            16, 16, 2, 18, 19, -15, 30, -8, -2, 40, -35, 28, 25, 0, 19, 22
        ]
    );
    // Default offset_x 0, no bias, no padding: the plain sums, e.g. (0, 0):
    // 1 - 4 - 12 - 5 = -20.
    let y = run1("Conv2D", &nchw_conv(0, &[0, 0, 0, 0]), &[x, w]);
    assert_eq!(y.slice::<i32>().unwrap(), &[-20, 25, 35, -40]);
}

/// NHWC x `[1, 2, 2, 2]`, HWCN 1x1 filter `[[3, -2], [1, 5]]` (cin by cout), bias
/// `[10, -10]`, offset_x -1, one row of top padding: the padded row gives
/// `-1 * (3 + 1) + 10 = 6` and `-1 * (-2 + 5) - 10 = -13`; pixel (0, 0) = `[1, -1]`
/// gives `3 - 1 + 10 = 12` and `-2 - 5 - 10 = -17`.
#[test]
fn conv2d_int8_nhwc_with_an_hwcn_filter() {
    let x = i8s(&[1, 2, 2, 2], &[1, -1, 2, 3, -3, 4, 0, -2]);
    let w = i8s(&[1, 1, 2, 2], &[3, -2, 1, 5]);
    let b = i32s(&[2], &[10, -10]);
    let attrs = [
        ("strides", ints(&[1, 1, 1, 1])),
        ("pads", ints(&[1, 0, 0, 0])),
        ("offset_x", Attr::Int(-1)),
    ];
    let y = run1("Conv2D", &attrs, &[x, w, b]);
    assert_eq!(y.shape, [1, 3, 2, 2]);
    assert_eq!(
        y.slice::<i32>().unwrap(),
        &[6, -13, 6, -13, 12, -17, 19, 1, 5, 16, 8, -20]
    );
}

/// DepthwiseConv2D NCHW, filter `[multiplier 1, C 2, 2, 2]`, offset_x 3, one row of top
/// padding, bias `[0, 100]`. Channel 0 (x `[[1,2],[3,4]]`, w `[[1,-1],[2,1]]`): top
/// window `3 - 3 + 2 + 2 = 4`, bottom `1 - 2 + 6 + 4 = 9`; channel 1 (x
/// `[[-1,-2],[5,-6]]`, w `[[2,0],[-1,3]]`): `6 + 1 - 6 + 100 = 101`,
/// `-2 - 5 - 18 + 100 = 75`.
#[test]
fn depthwise_int8_per_channel() {
    let x = i8s(&[1, 2, 2, 2], &[1, 2, 3, 4, -1, -2, 5, -6]);
    let w = i8s(&[1, 2, 2, 2], &[1, -1, 2, 1, 2, 0, -1, 3]);
    let b = i32s(&[2], &[0, 100]);
    let y = run1("DepthwiseConv2D", &nchw_conv(3, &[1, 0, 0, 0]), &[x, w, b]);
    assert_eq!(y.dtype, DType::I32);
    assert_eq!(y.shape, [1, 2, 2, 1]);
    assert_eq!(y.slice::<i32>().unwrap(), &[4, 9, 101, 75]);
}

/// Conv3D NCDHW, a 1x1x1 filter of 2 over x `[1, 1, 1, 1, 2]` = `[-3, 4]` with one
/// pad at the front of D and offset_x 5: the padded plane gives 10, then -6 and 8.
#[test]
fn conv3d_int8() {
    let x = i8s(&[1, 1, 1, 1, 2], &[-3, 4]);
    let w = i8s(&[1, 1, 1, 1, 1], &[2]);
    let attrs = [
        ("strides", ints(&[1, 1, 1, 1, 1])),
        ("pads", ints(&[1, 0, 0, 0, 0, 0])),
        ("data_format", s("NCDHW")),
        ("offset_x", Attr::Int(5)),
    ];
    let y = run1("Conv3D", &attrs, &[x, w]);
    assert_eq!(y.shape, [1, 1, 2, 1, 2]);
    assert_eq!(y.slice::<i32>().unwrap(), &[10, 10, -6, 8]);
}

/// The int8 forms infer int32 y, shapes known or not.
#[test]
fn int8_conv_and_products_infer_int32() {
    let m = |dtype, shape: Option<Vec<i64>>| TensorMeta { dtype, shape };
    let y = infer1(
        "Conv2D",
        &[m(DType::I8, None), m(DType::I8, None)],
        &[],
        &nchw_conv(0, &[0, 0, 0, 0]),
    )
    .unwrap();
    assert_eq!(y.dtype, DType::I32);
    let y = infer1(
        "MatMulV2",
        &[
            m(DType::I8, Some(vec![2, 3])),
            m(DType::I8, Some(vec![3, -1])),
        ],
        &[],
        &[],
    )
    .unwrap();
    assert_eq!((y.dtype, y.shape), (DType::I32, Some(vec![2, -1])));
}

#[test]
fn int8_conv_errors_name_the_input() {
    let x = i8s(&[1, 1, 3, 3], &[0; 9]);
    let w = i8s(&[1, 1, 2, 2], &[0; 4]);
    let fw = Tensor::from_vec(&[1, 1, 2, 2], &[0.0f32; 4]);
    let fx = Tensor::from_vec(&[1, 1, 3, 3], &[0.0f32; 9]);
    let attrs = nchw_conv(0, &[0, 0, 0, 0]);
    let e = err("Conv2D", &attrs, &[x.clone(), fw]);
    assert!(e.contains("input 1") && e.contains("int8"), "{e}");
    let e = err("Conv2D", &attrs, &[fx.clone(), w.clone()]);
    assert!(e.contains("input 1") && e.contains("int8"), "{e}");
    let fb = Tensor::from_vec(&[1], &[0.0f32]);
    let e = err("Conv2D", &attrs, &[x.clone(), w.clone(), fb]);
    assert!(e.contains("bias") && e.contains("int32"), "{e}");
    let e = err(
        "Conv2D",
        &nchw_conv(200, &[0, 0, 0, 0]),
        &[x.clone(), w.clone()],
    );
    assert!(e.contains("offset_x") && e.contains("int8"), "{e}");
    let ow = i8s(&[1], &[1]);
    let e = err("Conv2D", &attrs, &[x, w, i32s(&[1], &[0]), ow]);
    assert!(e.contains("offset_w") && e.contains("reserved"), "{e}");
    // The float form still refuses an offset.
    let fw = Tensor::from_vec(&[1, 1, 2, 2], &[0.0f32; 4]);
    let e = err("Conv2D", &nchw_conv(3, &[0, 0, 0, 0]), &[fx, fw]);
    assert!(e.contains("offset_x") && e.contains("quantized"), "{e}");
}

/// MatMulV2 with both transposes, offset_x 1, bias `[1, -1]`: x1 stored `[K 3, M 2]` is
/// A = `[[1,3,-1],[-2,0,4]]`, minus 1 `[[0,2,-2],[-3,-1,3]]`; x2 stored `[N 2, K 3]` is
/// B = `[[2,0],[-1,3],[1,-2]]`. y00 = `-2 - 2 + 1 = -3`, y01 = `6 + 4 - 1 = 9`,
/// y10 = `-6 + 1 + 3 + 1 = -1`, y11 = `-3 - 6 - 1 = -10`.
#[test]
fn matmul_v2_int8_with_transposes_and_offset() {
    let a = i8s(&[3, 2], &[1, -2, 3, 0, -1, 4]);
    let b = i8s(&[2, 3], &[2, -1, 1, 0, 3, -2]);
    let bias = i32s(&[2], &[1, -1]);
    let attrs = [
        ("transpose_x1", Attr::Int(1)),
        ("transpose_x2", Attr::Int(1)),
        ("offset_x", Attr::Int(1)),
    ];
    let y = run1("MatMulV2", &attrs, &[a, b, bias]);
    assert_eq!(y.dtype, DType::I32);
    assert_eq!(y.shape, [2, 2]);
    assert_eq!(y.slice::<i32>().unwrap(), &[-3, 9, -1, -10]);
}

/// BatchMatMulV2, x1 `[2, 1, 2]` by a shared x2 `[2, 1]`, offset_x 1: `(1-1)*4 +
/// (2-1)*-5 = -5` and `(-1-1)*4 + (3-1)*-5 = -18`.
#[test]
fn batch_matmul_v2_int8_broadcasts() {
    let a = i8s(&[2, 1, 2], &[1, 2, -1, 3]);
    let b = i8s(&[2, 1], &[4, -5]);
    let y = run1("BatchMatMulV2", &[("offset_x", Attr::Int(1))], &[a, b]);
    assert_eq!(y.shape, [2, 1, 1]);
    assert_eq!(y.slice::<i32>().unwrap(), &[-5, -18]);
}

/// FullyConnection, x `[[1,-1,2],[0,3,-4]]` minus offset_x -2 is `[[3,1,4],[2,5,-2]]`;
/// w `[[1,2,-1],[-3,0,2]]` (num_output 2), bias `[10, 20]`: y00 = `3 + 2 - 4 + 10 = 11`,
/// y01 = `-9 + 8 + 20 = 19`, y10 = `2 + 10 + 2 + 10 = 24`, y11 = `-6 - 4 + 20 = 10`.
/// With `transpose` the weights are stored `[K, num_output]`: the same y.
#[test]
fn fully_connection_int8_both_weight_layouts() {
    let x = i8s(&[2, 3], &[1, -1, 2, 0, 3, -4]);
    let b = i32s(&[2], &[10, 20]);
    let mut attrs = vec![("num_output", Attr::Int(2)), ("offset_x", Attr::Int(-2))];
    let w = i8s(&[2, 3], &[1, 2, -1, -3, 0, 2]);
    let y = run1("FullyConnection", &attrs, &[x.clone(), w, b.clone()]);
    assert_eq!((y.dtype, &y.shape[..]), (DType::I32, &[2usize, 2][..]));
    assert_eq!(y.slice::<i32>().unwrap(), &[11, 19, 24, 10]);
    attrs.push(("transpose", Attr::Int(1)));
    let wt = i8s(&[3, 2], &[1, -3, 2, 0, -1, 2]);
    let y = run1("FullyConnection", &attrs, &[x.clone(), wt, b]);
    assert_eq!(y.slice::<i32>().unwrap(), &[11, 19, 24, 10]);
    let fw = Tensor::from_vec(&[2, 3], &[0.0f32; 6]);
    let e = err("FullyConnection", &attrs, &[x, fw]);
    assert!(e.contains("int8"), "{e}");
}
