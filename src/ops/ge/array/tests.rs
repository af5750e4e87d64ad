//! GE's data movement against index arithmetic written out here (TensorFlow's meanings),
//! and the aliases that launch library ops with GE's attributes translated.

use crate::ops::testing::{i64s, run, run_f32, run_f32_with_shape, try_run};
use crate::ops::{Attr, DType, HostTensor, InferCtx, OpRegistry, Tensor, TensorMeta, assert_close};

/// `0, 1, 2, ...` in `shape`.
fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> String {
    try_run(op, attrs, inputs, 1).unwrap_err().to_string()
}

/// A 1-D int32 tensor.
fn i32t(v: &[i32]) -> Tensor {
    Tensor::from_vec(&[v.len()], v)
}

/// x[1, :, 3::-2, :] of a [2, 3, 4, 2] tensor, and the same with an ellipsis and a new
/// axis: x[..., None, 1] (TensorFlow's spelling).
#[test]
fn strided_slice_follows_tensorflows_masks() {
    let x = iota(&[2, 3, 4, 2]);
    let at = |n: usize, c: usize, h: usize, w: usize| (((n * 3 + c) * 4 + h) * 2 + w) as f32;
    let (shape, y) = run_f32_with_shape(
        "StridedSliceD",
        &[
            ("begin", ints(&[1, 0, 3])),
            ("end", ints(&[0, 0, 0])),
            ("strides", ints(&[1, 1, -2])),
            ("end_mask", Attr::Int(0b110)),
            ("shrink_axis_mask", Attr::Int(0b001)),
        ],
        std::slice::from_ref(&x),
    );
    assert_eq!(shape, [3, 2, 2]);
    let mut want = Vec::new();
    for c in 0..3 {
        for h in [3, 1] {
            for w in 0..2 {
                want.push(at(1, c, h, w));
            }
        }
    }
    assert_eq!(y, want);
    // x[..., None, 1]: the ellipsis covers three dims, a new dim of 1, then index 1 of the
    // last.
    let (shape, y) = run_f32_with_shape(
        "StridedSliceD",
        &[
            ("begin", ints(&[0, 0, 1])),
            ("end", ints(&[0, 0, 2])),
            ("strides", ints(&[1, 1, 1])),
            ("ellipsis_mask", Attr::Int(0b001)),
            ("new_axis_mask", Attr::Int(0b010)),
            ("shrink_axis_mask", Attr::Int(0b100)),
        ],
        std::slice::from_ref(&x),
    );
    assert_eq!(shape, [2, 3, 4, 1]);
    let want: Vec<f32> = (0..24).map(|i| (i * 2 + 1) as f32).collect();
    assert_eq!(y, want);
    // Negative begin, clamped end, and a step past the end: x[-1:100:5] on dim 0 is one.
    let (shape, y) = run_f32_with_shape(
        "StridedSliceD",
        &[
            ("begin", ints(&[-1, 1])),
            ("end", ints(&[100, -1])),
            ("strides", ints(&[5, 1])),
        ],
        std::slice::from_ref(&x),
    );
    assert_eq!(shape, [1, 1, 4, 2]);
    assert_eq!(y[0], at(1, 1, 0, 0));
    // The input form reads the same spec from its inputs.
    let s = |v: &[i32]| i32t(v);
    let y2 = run_f32(
        "StridedSlice",
        &[],
        &[x.clone(), s(&[-1, 1]), s(&[100, -1]), s(&[5, 1])],
    );
    assert_eq!(y2, y);
    assert!(
        err(
            "StridedSliceD",
            &[
                ("begin", ints(&[0])),
                ("end", ints(&[1])),
                ("strides", ints(&[0]))
            ],
            std::slice::from_ref(&x)
        )
        .contains("strides")
    );
    assert!(
        err(
            "StridedSliceD",
            &[
                ("begin", ints(&[5])),
                ("end", ints(&[6])),
                ("strides", ints(&[1])),
                ("shrink_axis_mask", Attr::Int(1))
            ],
            &[x]
        )
        .contains("out of range")
    );
}

#[test]
fn pack_stacks_on_a_new_dim_and_unpack_cuts_it_away() {
    let (a, b) = (
        iota(&[2, 3]),
        Tensor::from_vec(&[2, 3], &[10.0f32, 11., 12., 13., 14., 15.]),
    );
    let (shape, y) = run_f32_with_shape(
        "Pack",
        &[("axis", Attr::Int(1)), ("N", Attr::Int(2))],
        &[a.clone(), b.clone()],
    );
    assert_eq!(shape, [2, 2, 3]);
    assert_eq!(y, [0., 1., 2., 10., 11., 12., 3., 4., 5., 13., 14., 15.]);
    let (shape, y) =
        run_f32_with_shape("Pack", &[("axis", Attr::Int(-1))], &[a.clone(), b.clone()]);
    assert_eq!(shape, [2, 3, 2]);
    assert_eq!(y[..4], [0., 10., 1., 11.]);
    let packed = Tensor::from_vec(
        &[2, 2, 3],
        &[0.0f32, 1., 2., 10., 11., 12., 3., 4., 5., 13., 14., 15.],
    );
    let parts = run(
        "Unpack",
        &[("num", Attr::Int(2)), ("axis", Attr::Int(1))],
        &[packed],
        2,
    );
    assert_eq!(parts[0].shape, [2, 3]);
    assert_eq!(parts[0].slice::<f32>().unwrap(), a.slice::<f32>().unwrap());
    assert_eq!(parts[1].slice::<f32>().unwrap(), b.slice::<f32>().unwrap());
    assert!(err("Pack", &[("N", Attr::Int(3))], &[a.clone(), b]).contains("N"));
    assert!(err("Unpack", &[("num", Attr::Int(3))], &[a]).contains("num"));
}

#[test]
fn tile_broadcast_reverse_fill_and_flatten() {
    let x = iota(&[2, 2]);
    let (shape, y) = run_f32_with_shape(
        "TileD",
        &[("multiples", ints(&[2, 1]))],
        std::slice::from_ref(&x),
    );
    assert_eq!(
        (shape, y),
        (vec![4, 2], vec![0., 1., 2., 3., 0., 1., 2., 3.])
    );
    let row = iota(&[1, 3]);
    let (shape, y) = run_f32_with_shape(
        "BroadcastToD",
        &[("shape", ints(&[2, 3]))],
        std::slice::from_ref(&row),
    );
    assert_eq!((shape, y), (vec![2, 3], vec![0., 1., 2., 0., 1., 2.]));
    // TensorFlow's BroadcastTo goes one way; ONNX's Expand (ExpandD) both.
    assert!(
        err(
            "BroadcastToD",
            &[("shape", ints(&[2, 1]))],
            std::slice::from_ref(&row)
        )
        .contains("shape")
    );
    let (shape, _) = run_f32_with_shape("ExpandD", &[("shape", ints(&[2, 1]))], &[row]);
    assert_eq!(shape, [2, 3]);
    let x = iota(&[2, 3]);
    assert_eq!(
        run_f32(
            "ReverseV2D",
            &[("axis", ints(&[1]))],
            std::slice::from_ref(&x)
        ),
        [2., 1., 0., 5., 4., 3.]
    );
    assert_eq!(
        run_f32("ReverseV2", &[], &[x.clone(), i32t(&[0, -1])]),
        [5., 4., 3., 2., 1., 0.]
    );
    assert!(
        err(
            "ReverseV2D",
            &[("axis", ints(&[1, -1]))],
            std::slice::from_ref(&x)
        )
        .contains("twice")
    );
    let (shape, y) = run_f32_with_shape(
        "FillD",
        &[("dims", ints(&[2, 2]))],
        &[Tensor::from_vec(&[], &[2.5f32])],
    );
    assert_eq!((shape, y), (vec![2, 2], vec![2.5; 4]));
    let filled = run(
        "Fill",
        &[],
        &[
            Tensor::from_vec(&[2], &[3i64, 1]),
            Tensor::from_vec(&[], &[7i32]),
        ],
        1,
    );
    assert_eq!(
        (
            filled[0].shape.clone(),
            filled[0].slice::<i32>().unwrap().to_vec()
        ),
        (vec![3, 1], vec![7; 3])
    );
    let (shape, _) = run_f32_with_shape(
        "FlattenV2",
        &[("axis", Attr::Int(1)), ("end_axis", Attr::Int(2))],
        &[iota(&[2, 3, 4, 5])],
    );
    assert_eq!(shape, [2, 12, 5]);
    let (shape, _) = run_f32_with_shape("FlattenV2", &[], &[iota(&[2, 3, 4])]);
    assert_eq!(shape, [2, 12]);
}

/// The output shape inference gives an op on `inputs` with constant `values`.
fn inferred(
    op: &str,
    inputs: &[TensorMeta],
    values: &[Option<&HostTensor>],
    attrs: &[(&str, Attr)],
) -> Vec<TensorMeta> {
    let reg = OpRegistry::new();
    let attrs = crate::ops::testing::test_attrs(attrs);
    let mut values = values.to_vec();
    values.resize(inputs.len(), None);
    reg.get(op)
        .unwrap()
        .infer_shapes(&InferCtx {
            op,
            inputs,
            values: &values,
            attrs: &attrs,
            outputs: 1,
        })
        .unwrap()
}

#[test]
fn pads_slices_and_splits_take_tensorflows_layouts() {
    let x = iota(&[2, 3]);
    // PadD's rows [before, after] per dim.
    let (shape, y) = run_f32_with_shape(
        "PadD",
        &[("paddings", ints(&[1, 0, 0, 2]))],
        std::slice::from_ref(&x),
    );
    assert_eq!(shape, [3, 5]);
    assert_eq!(
        y,
        [0., 0., 0., 0., 0., 0., 1., 2., 0., 0., 3., 4., 5., 0., 0.]
    );
    let paddings = Tensor::from_vec(&[4], &[1i32, 0, 0, 2]);
    let value = Tensor::from_vec(&[], &[9.0f32]);
    let v3 = run_f32("PadV3", &[], &[x.clone(), paddings.clone(), value.clone()]);
    assert_eq!(v3[..5], [9.; 5]);
    assert_eq!(v3[5..10], [0., 1., 2., 9., 9.]);
    // ONNX's layout: begins, then ends.
    let (shape, v3) = run_f32_with_shape(
        "PadV3",
        &[("paddings_contiguous", Attr::Bool(false))],
        &[x.clone(), Tensor::from_vec(&[4], &[1i32, 0, 0, 2])],
    );
    assert_eq!(shape, [3, 5]);
    assert_eq!(v3[5..10], [0., 1., 2., 0., 0.]);
    let v2 = run_f32(
        "PadV2D",
        &[("paddings", ints(&[0, 0, 1, 1]))],
        &[x.clone(), value],
    );
    assert_eq!(v2, [9., 0., 1., 2., 9., 9., 3., 4., 5., 9.]);
    let (shape, y) = run_f32_with_shape(
        "SliceD",
        &[("offsets", ints(&[1, 1])), ("size", ints(&[1, -1]))],
        std::slice::from_ref(&x),
    );
    assert_eq!((shape, y), (vec![1, 2], vec![4., 5.]));
    assert!(
        err(
            "SliceD",
            &[("offsets", ints(&[1])), ("size", ints(&[1]))],
            std::slice::from_ref(&x)
        )
        .contains("size")
    );
    let x = iota(&[2, 6]);
    let parts = run(
        "SplitVD",
        &[
            ("size_splits", ints(&[1, -1, 2])),
            ("split_dim", Attr::Int(-1)),
            ("num_split", Attr::Int(3)),
        ],
        std::slice::from_ref(&x),
        3,
    );
    let shapes: Vec<_> = parts.iter().map(|p| p.shape.clone()).collect();
    assert_eq!(shapes, [vec![2, 1], vec![2, 3], vec![2, 2]]);
    assert_eq!(parts[1].slice::<f32>().unwrap(), [1., 2., 3., 7., 8., 9.]);
    // SplitV reads its sizes and dim from inputs 1 and 2.
    let sizes = HostTensor {
        dtype: DType::I32,
        shape: vec![2],
        data: [2i32, 4].iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let dim = i64s(&[1]);
    let metas = [
        TensorMeta::new(DType::F32, &[2, 6]),
        TensorMeta::new(DType::I32, &[2]),
        TensorMeta::new(DType::I64, &[1]),
    ];
    let outs = inferred(
        "SplitV",
        &metas,
        &[None, Some(&sizes), Some(&dim)],
        &[("num_split", Attr::Int(2))],
    );
    assert_eq!(outs[0].shape, Some(vec![2, 2]));
    let (shape, _) = run_f32_with_shape("SqueezeV2", &[("axis", ints(&[]))], &[iota(&[1, 3, 1])]);
    assert_eq!(shape, [3]);
    let (shape, _) =
        run_f32_with_shape("UnsqueezeV2", &[("axis", ints(&[0, 3]))], &[iota(&[2, 3])]);
    assert_eq!(shape, [1, 2, 3, 1]);
}

#[test]
fn arg_max_v2_and_the_variadic_forms() {
    let x = Tensor::from_vec(&[2, 3], &[1.0f32, 5.0, 5.0, -1.0, -3.0, -0.5]);
    let y = run(
        "ArgMaxV2",
        &[],
        &[x.clone(), Tensor::from_vec(&[], &[1i32])],
        1,
    );
    assert_eq!(y[0].dtype, DType::I64);
    assert_eq!(
        y[0].slice::<i64>().unwrap(),
        [1, 2],
        "the first index on ties"
    );
    assert!(
        err(
            "ArgMaxV2",
            &[("dtype", Attr::DType(DType::I32))],
            &[x, Tensor::from_vec(&[], &[1i32])]
        )
        .contains("int64")
    );
}

/// Conv2DTranspose is ONNX's ConvTranspose on (x, filter, bias), input_size left out; a
/// non-zero input_size larger than the attributes' output adds rows and columns at the
/// end (TensorFlow's conv2d_transpose), as ONNX's output_padding does.
#[test]
fn conv2d_transpose_is_onnx_conv_transpose_with_input_size() {
    let x = iota(&[1, 2, 3, 3]);
    let w = Tensor::from_vec(
        &[2, 1, 2, 2],
        &[0.5f32, -1.0, 2.0, 0.25, 1.0, 1.5, -0.5, 0.75],
    );
    let b = Tensor::from_vec(&[1], &[0.125f32]);
    let ge = [
        ("strides", ints(&[1, 1, 2, 2])),
        ("pads", ints(&[1, 0, 0, 0])),
        ("data_format", Attr::Str("NCHW".into())),
    ];
    let onnx = [("strides", ints(&[2, 2])), ("pads", ints(&[1, 0, 0, 0]))];
    let want = run(
        "ConvTranspose",
        &onnx,
        &[x.clone(), w.clone(), b.clone()],
        1,
    );
    let zeros = Tensor::from_vec(&[4], &[0i64; 4]);
    let got = run(
        "Conv2DTranspose",
        &ge,
        &[zeros, x.clone(), w.clone(), b.clone()],
        1,
    );
    assert_eq!(got[0].shape, [1, 1, 5, 6]);
    assert_eq!(
        got[0].slice::<f32>().unwrap(),
        want[0].slice::<f32>().unwrap()
    );
    // input_size one row and column past: output_padding [1, 1].
    let padded = run(
        "ConvTranspose",
        &[
            ("strides", ints(&[2, 2])),
            ("pads", ints(&[1, 0, 0, 0])),
            ("output_padding", ints(&[1, 1])),
        ],
        &[x.clone(), w.clone(), b.clone()],
        1,
    );
    let size = Tensor::from_vec(&[4], &[1i32, 1, 6, 7]);
    let got = run(
        "Conv2DTranspose",
        &ge,
        &[size, x.clone(), w.clone(), b.clone()],
        1,
    );
    assert_eq!(got[0].shape, [1, 1, 6, 7]);
    assert_eq!(
        got[0].slice::<f32>().unwrap(),
        padded[0].slice::<f32>().unwrap()
    );
    let mut d = ge.to_vec();
    d.push(("input_size", ints(&[1, 1, 6, 7])));
    let got = run("Conv2DTransposeD", &d, &[x.clone(), w.clone(), b], 1);
    assert_eq!(
        got[0].slice::<f32>().unwrap(),
        padded[0].slice::<f32>().unwrap()
    );
    // GE's default layout is NHWC, not computed.
    let nhwc = [
        ("strides", ints(&[1, 1, 2, 2])),
        ("pads", ints(&[0, 0, 0, 0])),
    ];
    assert!(
        err(
            "Conv2DTransposeD",
            &[
                nhwc[0].clone(),
                nhwc[1].clone(),
                ("input_size", ints(&[0, 0, 0, 0]))
            ],
            &[x, w]
        )
        .contains("NCHW")
    );
}

#[test]
fn cumulative_sums_and_gather_nd() {
    let x = Tensor::from_vec(&[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let axis = Tensor::from_vec(&[], &[1i32]);
    assert_eq!(
        run_f32("Cumsum", &[], &[x.clone(), axis.clone()]),
        [1., 3., 6., 4., 9., 15.]
    );
    let flags = [
        ("exclusive", Attr::Bool(true)),
        ("reverse", Attr::Bool(true)),
    ];
    assert_eq!(
        run_f32("Cumsum", &flags, &[x.clone(), axis]),
        [5., 3., 0., 11., 6., 0.]
    );
    let d = [("axis", Attr::Int(0)), ("exclusive", Attr::Bool(true))];
    assert_eq!(
        run_f32("CumsumD", &d, std::slice::from_ref(&x)),
        [0., 0., 0., 1., 2., 3.]
    );
    assert_eq!(
        run_f32(
            "CumprodD",
            &[("axis", Attr::Int(-1))],
            std::slice::from_ref(&x)
        ),
        [1., 2., 6., 4., 20., 120.]
    );
    assert!(err("CumsumD", &[], std::slice::from_ref(&x)).contains("axis"));
    let idx = Tensor::from_vec(&[2, 2], &[1i32, 0, 0, 2]);
    assert_eq!(run_f32("GatherNd", &[], &[x, idx]), [4., 3.]);
}

#[test]
fn one_hot_gives_off_rows_for_indices_out_of_range() {
    let x = Tensor::from_vec(&[2, 2], &[0i32, 2, -1, 3]);
    let (on, off) = (
        Tensor::from_vec(&[], &[5.0f32]),
        Tensor::from_vec(&[], &[-1.0f32]),
    );
    let (shape, y) = run_f32_with_shape(
        "OneHotD",
        &[("depth", Attr::Int(3))],
        &[x.clone(), on.clone(), off.clone()],
    );
    assert_eq!(shape, [2, 2, 3]);
    assert_eq!(
        y,
        [5., -1., -1., -1., -1., 5., -1., -1., -1., -1., -1., -1.]
    );
    // The new dim first; a relaunched GE OneHot keeps its depth input, unread.
    let depth = Tensor::from_vec(&[], &[3i32]);
    let (shape, y) = run_f32_with_shape(
        "OneHotD",
        &[("depth", Attr::Int(3)), ("axis", Attr::Int(0))],
        &[x, depth, on, off],
    );
    assert_eq!(shape, [3, 2, 2]);
    assert_eq!(y[..4], [5., -1., -1., -1.]);
    assert_eq!(y[4..8], [-1., -1., -1., -1.]);
    assert_eq!(y[8..], [-1., 5., -1., -1.]);
}

/// GEMM: `alpha op(a) op(b) + beta c` with alpha and beta from their constant inputs,
/// against the product written out; an integer GEMM (a quantized kernel) is refused.
#[test]
fn gemm_scales_by_its_constant_inputs() {
    // a [3, 2] transposed is [2, 3]; b [3, 2]; c [2, 2].
    let a = Tensor::from_vec(&[3, 2], &[1.0f32, -2.0, 0.5, 3.0, 2.0, 1.0]);
    let b = Tensor::from_vec(&[3, 2], &[1.0f32, 0.0, -1.0, 2.0, 0.5, -0.5]);
    let c = Tensor::from_vec(&[2, 2], &[1.0f32, 2.0, 3.0, 4.0]);
    let scalar = |v: f32| Tensor::from_vec(&[1], &[v]);
    let y = run_f32(
        "GEMM",
        &[("transpose_a", Attr::Int(1))],
        &[a.clone(), b.clone(), c.clone(), scalar(0.5), scalar(-2.0)],
    );
    let (av, bv, cv) = (
        a.slice::<f32>().unwrap(),
        b.slice::<f32>().unwrap(),
        c.slice::<f32>().unwrap(),
    );
    let mut want = Vec::new();
    for i in 0..2 {
        for j in 0..2 {
            let dot: f32 = (0..3).map(|k| av[k * 2 + i] * bv[k * 2 + j]).sum();
            want.push(0.5 * dot - 2.0 * cv[i * 2 + j]);
        }
    }
    assert_close(&y, &want);
    let ints = Tensor::from_vec(&[3, 2], &[1i32; 6]);
    let e = err(
        "GEMM",
        &[],
        &[ints.clone(), ints.clone(), ints, scalar(1.0), scalar(1.0)],
    );
    assert!(e.contains("float"), "{e}");
}
