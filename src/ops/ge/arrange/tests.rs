//! GE's data-arranging ops against index arithmetic written out here (TensorFlow's, Caffe's,
//! PyTorch's or ONNX's meanings), with small literal expectations.

use crate::ops::INPUT_FORMATS_ATTR;
use crate::ops::testing::{infer1, run, run_f32, run_f32_with_shape, try_run};
use crate::ops::{Attr, DType, HostTensor, Tensor, TensorMeta, UNKNOWN};

/// `0, 1, 2, ...` in `shape`, as float32.
fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
}

/// `0, 1, 2, ...` in `shape`, as int16 (a movement op moves any type by its bytes).
fn iota_i16(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(shape, &(0..n as i16).collect::<Vec<_>>())
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

/// A 1-D int32 tensor.
fn i32t(v: &[i32]) -> Tensor {
    Tensor::from_vec(&[v.len()], v)
}

/// An int32 tensor of `shape`.
fn i32m(shape: &[usize], v: &[i32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> String {
    try_run(op, attrs, inputs, 1).unwrap_err().to_string()
}

fn i16s(t: &Tensor) -> Vec<i16> {
    t.slice::<i16>().unwrap().to_vec()
}

#[test]
fn identities_copy_and_shape_n() {
    let (a, b) = (iota(&[2, 3]), iota_i16(&[4]));
    let out = run("IdentityN", &[], &[a.clone(), b.clone()], 2);
    assert_eq!(out[0].slice::<f32>().unwrap(), a.slice::<f32>().unwrap());
    assert_eq!(i16s(&out[1]), [0, 1, 2, 3]);
    for op in ["Snapshot", "StopGradient", "TensorMove"] {
        assert_eq!(
            i16s(&run(op, &[], std::slice::from_ref(&b), 1)[0]),
            [0, 1, 2, 3]
        );
    }
    let out = run("Copy", &[("N", Attr::Int(3))], std::slice::from_ref(&b), 3);
    assert!(out.iter().all(|t| i16s(t) == [0, 1, 2, 3]));
    assert!(err("Copy", &[], std::slice::from_ref(&b)).contains("N"));
    // ShapeN: int32 by default, int64 when asked (GE type 9).
    let out = run("ShapeN", &[], &[a.clone(), b.clone()], 2);
    assert_eq!(out[0].dtype, DType::I32);
    assert_eq!(out[0].slice::<i32>().unwrap(), [2, 3]);
    assert_eq!(out[1].slice::<i32>().unwrap(), [4]);
    let out = run("ShapeN", &[("dtype", Attr::Int(9))], &[a], 1);
    assert_eq!(out[0].slice::<i64>().unwrap(), [2, 3]);
}

#[test]
fn bitcast_follows_tensorflows_shape_rule() {
    // int32 0x00020001 viewed as two int16 (little-endian): [1, 2]; a new last dim of 2.
    let x = i32m(&[2], &[0x0002_0001, 0x0004_0003]);
    let y = run("Bitcast", &[("type", Attr::Int(6))], &[x], 1).remove(0);
    assert_eq!((y.dtype, y.shape.clone()), (DType::I16, vec![2, 2]));
    assert_eq!(i16s(&y), [1, 2, 3, 4]);
    // Back: the last dim of 2 goes.
    let y = run("Bitcast", &[("type", Attr::DType(DType::I32))], &[y], 1).remove(0);
    assert_eq!(y.shape, [2]);
    assert_eq!(y.slice::<i32>().unwrap(), [0x0002_0001, 0x0004_0003]);
    let y = run(
        "Bitcast",
        &[("type", Attr::Int(0))],
        &[i32m(&[1], &[0x3f80_0000])],
        1,
    );
    assert_eq!(y[0].slice::<f32>().unwrap(), [1.0]);
    assert!(err("Bitcast", &[("type", Attr::Int(3))], &[iota_i16(&[3])]).contains("last dim"));
    assert!(err("Bitcast", &[], &[iota_i16(&[2])]).contains("type"));
}

#[test]
fn mirror_pad_reflects_and_mirrors_as_tensorflow() {
    // [1, 2, 3] padded (2, 2): REFLECT 3 2 1 2 3 2 1; SYMMETRIC 2 1 1 2 3 3 2.
    let x = Tensor::from_vec(&[3], &[1.0f32, 2., 3.]);
    let pads = i32t(&[2, 2]);
    let mode = |m: &str| [("mode", Attr::Str(m.into()))];
    assert_eq!(
        run_f32("MirrorPad", &mode("REFLECT"), &[x.clone(), pads.clone()]),
        [3., 2., 1., 2., 3., 2., 1.]
    );
    assert_eq!(
        run_f32("MirrorPad", &mode("SYMMETRIC"), &[x.clone(), pads.clone()]),
        [2., 1., 1., 2., 3., 3., 2.]
    );
    // 2-D int16: rows (1, 0), columns (0, 1) in SYMMETRIC.
    let m = iota_i16(&[2, 2]);
    let y = run(
        "MirrorPad",
        &mode("SYMMETRIC"),
        &[m, i32t(&[1, 0, 0, 1])],
        1,
    )
    .remove(0);
    assert_eq!(y.shape, [3, 3]);
    assert_eq!(i16s(&y), [0, 1, 1, 0, 1, 1, 2, 3, 3]);
    assert!(err("MirrorPad", &mode("REFLECT"), &[x.clone(), i32t(&[3, 0])]).contains("paddings"));
    assert!(err("MirrorPad", &mode("WRAP"), &[x.clone(), pads.clone()]).contains("mode"));
    assert!(err("MirrorPad", &[], &[x, pads]).contains("mode"));
}

#[test]
fn pad_v2_and_pad_v3d_pad_with_constants_and_modes() {
    let x = iota(&[2, 2]);
    let y = run_f32_with_shape(
        "PadV2",
        &[],
        &[
            x.clone(),
            i32t(&[0, 1, 1, 0]),
            Tensor::from_vec(&[], &[9.0f32]),
        ],
    );
    assert_eq!(y, (vec![3, 3], vec![9., 0., 1., 9., 2., 3., 9., 9., 9.]));
    // PadV3D: default constant 0; constant_values 7; not contiguous ([b0, b1], [e0, e1]).
    let (s, y) = run_f32_with_shape(
        "PadV3D",
        &[("paddings", ints(&[1, 0, 0, 0]))],
        std::slice::from_ref(&x),
    );
    assert_eq!((s, y), (vec![3, 2], vec![0., 0., 0., 1., 2., 3.]));
    let y = run_f32(
        "PadV3D",
        &[
            ("paddings", ints(&[0, 1, 0, 0])),
            ("paddings_contiguous", Attr::Bool(false)),
            ("constant_values", Attr::Int(7)),
        ],
        std::slice::from_ref(&x),
    );
    assert_eq!(y, [7., 0., 1., 7., 2., 3.]);
    let row = Tensor::from_vec(&[1, 3], &[1.0f32, 2., 3.]);
    let mode = |m: &str| ("mode", Attr::Str(m.into()));
    assert_eq!(
        run_f32(
            "PadV3D",
            &[("paddings", ints(&[0, 0, 2, 1])), mode("edge")],
            std::slice::from_ref(&row)
        ),
        [1., 1., 1., 2., 3., 3.]
    );
    assert_eq!(
        run_f32(
            "PadV3D",
            &[("paddings", ints(&[0, 0, 2, 1])), mode("reflect")],
            &[row]
        ),
        [3., 2., 1., 2., 3., 2.]
    );
    assert!(err("PadV3D", &[], std::slice::from_ref(&x)).contains("paddings"));
    assert!(err("PadV3D", &[("paddings", ints(&[0, 0]))], &[x]).contains("paddings"));
}

#[test]
fn fill_v2_gives_float32_of_the_shape() {
    let (s, y) = run_f32_with_shape("FillV2", &[("value", Attr::Float(2.5))], &[i32t(&[2, 1])]);
    assert_eq!((s, y), (vec![2, 1], vec![2.5, 2.5]));
    let (s, y) = run_f32_with_shape("FillV2D", &[("dims", ints(&[3]))], &[]);
    assert_eq!((s, y), (vec![3], vec![0., 0., 0.]));
    assert!(err("FillV2D", &[], &[]).contains("dims"));
}

#[test]
fn slices_as_tensorflow_and_onnx() {
    let x = iota_i16(&[3, 4]);
    let y = run(
        "SliceDV2",
        &[("size", ints(&[2, -1]))],
        &[x.clone(), i32t(&[1, 1])],
        1,
    )
    .remove(0);
    assert_eq!(y.shape, [2, 3]);
    assert_eq!(i16s(&y), [5, 6, 7, 9, 10, 11]);
    let y = run(
        "SliceWithAxes",
        &[("axes", ints(&[-1]))],
        &[x.clone(), i32t(&[2]), i32t(&[2])],
        1,
    )
    .remove(0);
    assert_eq!(y.shape, [3, 2]);
    assert_eq!(i16s(&y), [2, 3, 6, 7, 10, 11]);
    assert!(
        err(
            "SliceDV2",
            &[("size", ints(&[3, 1]))],
            &[x.clone(), i32t(&[1, 0])]
        )
        .contains("size")
    );
    assert!(err("SliceWithAxes", &[], &[x.clone(), i32t(&[0]), i32t(&[1])]).contains("axes"));
    assert!(
        err(
            "SliceWithAxes",
            &[("axes", ints(&[2]))],
            &[x.clone(), i32t(&[0]), i32t(&[1])]
        )
        .contains("axes")
    );
    // StridedSliceV3 (x, begin, end, axes, strides): ONNX's Slice. Columns 3, 1 backwards.
    let y = run(
        "StridedSliceV3",
        &[],
        &[x.clone(), i32t(&[3]), i32t(&[0]), i32t(&[1]), i32t(&[-2])],
        1,
    )
    .remove(0);
    assert_eq!(y.shape, [3, 2]);
    assert_eq!(i16s(&y), [3, 1, 7, 5, 11, 9]);
    // Without axes and strides: the leading dims, step 1.
    let y = run("StridedSliceV3", &[], &[x, i32t(&[1]), i32t(&[-1])], 1).remove(0);
    assert_eq!((y.shape.clone(), i16s(&y)), (vec![1, 4], vec![4, 5, 6, 7]));
}

#[test]
fn crop_takes_the_reference_extent_from_the_offsets() {
    // x [1, 2, 4, 4], size [1, 2, 2, 3], default axis 2, offsets (1, 0) then one offset 1.
    let x = iota(&[1, 2, 4, 4]);
    let size = Tensor::zeroed(DType::F32, &[1, 2, 2, 3]);
    let (s, y) = run_f32_with_shape(
        "Crop",
        &[("offsets", ints(&[1, 0]))],
        &[x.clone(), size.clone()],
    );
    assert_eq!(s, [1, 2, 2, 3]);
    let at = |c: usize, h: usize, w: usize| ((c * 4 + h) * 4 + w) as f32;
    let want: Vec<f32> = (0..2)
        .flat_map(|c| (1..3).flat_map(move |h| (0..3).map(move |w| at(c, h, w))))
        .collect();
    assert_eq!(y, want);
    let y = run_f32(
        "Crop",
        &[("offsets", ints(&[1]))],
        &[x.clone(), size.clone()],
    );
    assert_eq!(y[0], at(0, 1, 1));
    // axis 1 with one offset crops channels too.
    let small = Tensor::zeroed(DType::F32, &[1, 1, 2, 2]);
    let y = run_f32(
        "Crop",
        &[("axis", Attr::Int(1)), ("offsets", ints(&[1]))],
        &[x.clone(), small],
    );
    assert_eq!(y, [at(1, 1, 1), at(1, 1, 2), at(1, 2, 1), at(1, 2, 2)]);
    assert!(
        err(
            "Crop",
            &[("offsets", ints(&[3, 0]))],
            &[x.clone(), size.clone()]
        )
        .contains("offsets")
    );
    assert!(err("Crop", &[], &[x, size]).contains("offsets"));
}

#[test]
fn roll_permute_and_tile() {
    let x = iota_i16(&[2, 3]);
    // Flattened roll by 1: the last element first.
    let y = run(
        "Roll",
        &[("shifts", ints(&[1]))],
        std::slice::from_ref(&x),
        1,
    );
    assert_eq!(i16s(&y[0]), [5, 0, 1, 2, 3, 4]);
    // Dim 1 by -1, dim 0 by 1.
    let y = run(
        "Roll",
        &[("shifts", ints(&[-1, 1])), ("dims", ints(&[1, 0]))],
        std::slice::from_ref(&x),
        1,
    );
    assert_eq!(i16s(&y[0]), [4, 5, 3, 1, 2, 0]);
    assert!(
        err(
            "Roll",
            &[("shifts", ints(&[1, 1]))],
            std::slice::from_ref(&x)
        )
        .contains("shifts")
    );
    assert!(err("Roll", &[], std::slice::from_ref(&x)).contains("shifts"));
    // Permute: the default order keeps x; order (1) completes to (1, 0).
    assert_eq!(
        i16s(&run("Permute", &[], std::slice::from_ref(&x), 1)[0]),
        i16s(&x)
    );
    let y = run(
        "Permute",
        &[("order", ints(&[1]))],
        std::slice::from_ref(&x),
        1,
    )
    .remove(0);
    assert_eq!(
        (y.shape.clone(), i16s(&y)),
        (vec![3, 2], vec![0, 3, 1, 4, 2, 5])
    );
    assert!(
        err(
            "Permute",
            &[("order", ints(&[0, 0]))],
            std::slice::from_ref(&x)
        )
        .contains("twice")
    );
    // TileWithAxis (the prototype's example): (2, 3, 2) tiled twice on axis 1.
    let t = iota_i16(&[2, 3, 2]);
    let y = run("TileWithAxis", &[("tiles", Attr::Int(2))], &[t], 1).remove(0);
    assert_eq!(y.shape, [2, 6, 2]);
    assert_eq!(
        i16s(&y),
        [
            0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 6, 7, 8, 9, 10, 11
        ]
    );
    assert!(err("TileWithAxis", &[], &[x]).contains("tiles"));
}

#[test]
fn confusion_transpose_orders_reshape_and_transpose() {
    let x = iota_i16(&[2, 3]);
    // Transpose first: x^T = [[0,3],[1,4],[2,5]], read as [6] then [2, 3].
    let y = run(
        "ConfusionTransposeD",
        &[
            ("perm", ints(&[1, 0])),
            ("shape", ints(&[2, 3])),
            ("transpose_first", Attr::Bool(true)),
        ],
        std::slice::from_ref(&x),
        1,
    )
    .remove(0);
    assert_eq!(
        (y.shape.clone(), i16s(&y)),
        (vec![2, 3], vec![0, 3, 1, 4, 2, 5])
    );
    // Reshape first to [3, 2] = [[0,1],[2,3],[4,5]], then transpose: [[0,2,4],[1,3,5]].
    let y = run(
        "ConfusionTransposeD",
        &[
            ("perm", ints(&[1, 0])),
            ("shape", ints(&[3, -1])),
            ("transpose_first", Attr::Bool(false)),
        ],
        std::slice::from_ref(&x),
        1,
    )
    .remove(0);
    assert_eq!(
        (y.shape.clone(), i16s(&y)),
        (vec![2, 3], vec![0, 2, 4, 1, 3, 5])
    );
    let partial = [("perm", ints(&[1, 0])), ("shape", ints(&[3, 2]))];
    assert!(
        err("ConfusionTransposeD", &partial, std::slice::from_ref(&x)).contains("transpose_first")
    );
    assert!(
        err(
            "ConfusionTransposeD",
            &[
                ("perm", ints(&[1, 0])),
                ("shape", ints(&[4, 2])),
                ("transpose_first", Attr::Bool(true))
            ],
            &[x]
        )
        .contains("shape")
    );
}

#[test]
fn data_format_vec_permute_and_parallel_concat() {
    // NHWC (n, h, w, c) values to NCHW order: (n, c, h, w).
    let y = run("DataFormatVecPermute", &[], &[i32t(&[1, 2, 3, 4])], 1);
    assert_eq!(y[0].slice::<i32>().unwrap(), [1, 4, 2, 3]);
    let back = [
        ("src_format", Attr::Str("NCHW".into())),
        ("dst_format", Attr::Str("NHWC".into())),
    ];
    let y = run(
        "DataFormatVecPermute",
        &back,
        &[i32m(&[4, 2], &[0, 1, 2, 3, 4, 5, 6, 7])],
        1,
    );
    assert_eq!(y[0].slice::<i32>().unwrap(), [0, 1, 4, 5, 6, 7, 2, 3]);
    // Two entries are the spatial dims: HW in both layouts.
    let y = run("DataFormatVecPermute", &[], &[i32t(&[5, 6])], 1);
    assert_eq!(y[0].slice::<i32>().unwrap(), [5, 6]);
    assert!(err("DataFormatVecPermute", &[], &[i32t(&[1, 2, 3])]).contains("input 0"));
    assert!(err("DataFormatVecPermute", &[], &[iota(&[4])]).contains("int32"));
    let (a, b) = (iota_i16(&[1, 2]), Tensor::from_vec(&[1, 2], &[7i16, 8]));
    let attrs = [("shape", ints(&[2, 2])), ("N", Attr::Int(2))];
    let y = run("ParallelConcat", &attrs, &[a.clone(), b.clone()], 1).remove(0);
    assert_eq!((y.shape.clone(), i16s(&y)), (vec![2, 2], vec![0, 1, 7, 8]));
    assert!(
        err(
            "ParallelConcat",
            &[("shape", ints(&[3, 2])), ("N", Attr::Int(2))],
            &[a, b]
        )
        .contains("N")
    );
}

/// TensorFlow's space_to_batch_nd example: x [1, 4, 4, 1] with block (2, 2), no padding,
/// gives [4, 2, 2, 1], batch `k1 * 2 + k2` taking `x[0, 2 * i + k1, 2 * j + k2, 0]`.
#[test]
fn space_to_batch_and_back_as_tensorflow() {
    let x = iota_i16(&[1, 4, 4, 1]);
    let y = run(
        "SpaceToBatchND",
        &[],
        &[x.clone(), i32t(&[2, 2]), i32m(&[2, 2], &[0, 0, 0, 0])],
        1,
    )
    .remove(0);
    assert_eq!(y.shape, [4, 2, 2, 1]);
    let mut want = Vec::new();
    for k1 in 0..2 {
        for k2 in 0..2 {
            for i in 0..2 {
                for j in 0..2 {
                    want.push(((2 * i + k1) * 4 + 2 * j + k2) as i16);
                }
            }
        }
    }
    assert_eq!(i16s(&y), want);
    let back = run(
        "BatchToSpaceND",
        &[],
        &[y.clone(), i32t(&[2, 2]), i32m(&[2, 2], &[0, 0, 0, 0])],
        1,
    )
    .remove(0);
    assert_eq!(
        (back.shape.clone(), i16s(&back)),
        (vec![1, 4, 4, 1], i16s(&x))
    );
    // The D and block_size forms agree.
    let attrs = [
        ("block_shape", ints(&[2, 2])),
        ("paddings", ints(&[0, 0, 0, 0])),
    ];
    assert_eq!(
        i16s(&run("SpaceToBatchNDD", &attrs, std::slice::from_ref(&x), 1)[0]),
        want
    );
    let y2 = run(
        "SpaceToBatch",
        &[("block_size", Attr::Int(2))],
        &[x.clone(), i32m(&[2, 2], &[0; 4])],
        1,
    );
    assert_eq!(i16s(&y2[0]), want);
    let crops = [
        ("block_shape", ints(&[2, 2])),
        ("crops", ints(&[0, 0, 0, 0])),
    ];
    assert_eq!(i16s(&run("BatchToSpaceNDD", &crops, &[y], 1)[0]), i16s(&x));
    // One block dim with padding: x [2, 3] (batch 2, one spatial dim of 3), block 2,
    // paddings (1, 0): padded rows [0, a0, a1, a2]; batch k*2 + b takes padded[b, 2o + k].
    let x = Tensor::from_vec(&[2, 3], &[1.0f32, 2., 3., 4., 5., 6.]);
    let (s, y) = run_f32_with_shape(
        "SpaceToBatchND",
        &[],
        &[x.clone(), i32t(&[2]), i32m(&[1, 2], &[1, 0])],
    );
    assert_eq!(
        (s, y.clone()),
        (vec![4, 2], vec![0., 2., 0., 5., 1., 3., 4., 6.])
    );
    // Back, cropping the pad again.
    let (s, back) = run_f32_with_shape(
        "BatchToSpaceND",
        &[],
        &[
            Tensor::from_vec(&[4, 2], &y),
            i32t(&[2]),
            i32m(&[1, 2], &[1, 0]),
        ],
    );
    assert_eq!((s, back), (vec![2, 3], vec![1., 2., 3., 4., 5., 6.]));
    assert!(
        err(
            "SpaceToBatchND",
            &[],
            &[x.clone(), i32t(&[2]), i32m(&[1, 2], &[0, 0])]
        )
        .contains("paddings")
    );
    assert!(
        err(
            "BatchToSpaceND",
            &[],
            &[x, i32t(&[4]), i32m(&[1, 2], &[0, 0])]
        )
        .contains("batch")
    );
    assert!(
        err(
            "SpaceToBatchNDD",
            &[("paddings", ints(&[0, 0]))],
            &[iota(&[1, 2])]
        )
        .contains("block_shape")
    );
}

/// A recorded NCHW origin format puts the blocks on dims 2 and 3.
#[test]
fn space_to_batch_of_an_nchw_tensor_blocks_h_and_w() {
    let x = iota_i16(&[1, 2, 2, 2]);
    let attrs = [
        ("block_shape", ints(&[2, 2])),
        ("paddings", ints(&[0, 0, 0, 0])),
        (INPUT_FORMATS_ATTR, ints(&[0])),
    ];
    let y = run("SpaceToBatchNDD", &attrs, &[x], 1).remove(0);
    assert_eq!(y.shape, [4, 2, 1, 1]);
    // Batch k1 * 2 + k2 holds (c0, c1) at pixel (k1, k2): c * 4 + k1 * 2 + k2.
    assert_eq!(i16s(&y), [0, 4, 1, 5, 2, 6, 3, 7]);
}

#[test]
fn pass_through_moves_space_to_depth_in_nhwc() {
    // x [1, 2, 2, 1]: one 2x2 block becomes 4 channels (i * 2 + j).
    let x = iota_i16(&[1, 2, 2, 2]);
    let y = run("PassThrough", &[], std::slice::from_ref(&x), 1).remove(0);
    assert_eq!(y.shape, [1, 1, 1, 8]);
    // Channel (i * 2 + j) * 2 + k holds x[0, i, j, k] = (i * 2 + j) * 2 + k.
    assert_eq!(i16s(&y), [0, 1, 2, 3, 4, 5, 6, 7]);
    let x = iota_i16(&[1, 2, 4, 1]);
    let y = run("PassThrough", &[], std::slice::from_ref(&x), 1).remove(0);
    assert_eq!(y.shape, [1, 1, 2, 4]);
    assert_eq!(i16s(&y), [0, 1, 4, 5, 2, 3, 6, 7]);
    let back = run("PassThrough", &[("reverse", Attr::Bool(true))], &[y], 1).remove(0);
    assert_eq!(
        (back.shape.clone(), i16s(&back)),
        (vec![1, 2, 4, 1], i16s(&x))
    );
    assert!(err("PassThrough", &[("stride", Attr::Int(3))], &[x]).contains("multiple"));
}

#[test]
fn extract_image_patches_as_tensorflow() {
    // x [1, 3, 3, 1] = 0..9, 2x2 windows, stride 1, VALID: 4 patches of 4.
    let x = iota(&[1, 3, 3, 1]);
    let attrs = |pad: &str| {
        vec![
            ("ksizes", ints(&[1, 2, 2, 1])),
            ("strides", ints(&[1, 1, 1, 1])),
            ("rates", ints(&[1, 1, 1, 1])),
            ("padding", Attr::Str(pad.into())),
        ]
    };
    let (s, y) = run_f32_with_shape(
        "ExtractImagePatches",
        &attrs("VALID"),
        std::slice::from_ref(&x),
    );
    assert_eq!(s, [1, 2, 2, 4]);
    assert_eq!(
        y,
        [
            0., 1., 3., 4., 1., 2., 4., 5., 3., 4., 6., 7., 4., 5., 7., 8.
        ]
    );
    // SAME: 3x3 windows, pad total 1, none before, one after.
    let (s, y) = run_f32_with_shape(
        "ExtractImagePatches",
        &attrs("SAME"),
        std::slice::from_ref(&x),
    );
    assert_eq!(s, [1, 3, 3, 4]);
    assert_eq!(y[32..], [8., 0., 0., 0.]);
    // rates 2 on a 4x4 image: a 2x2 window spans 3x3, taking x[r, c], x[r, c + 2],
    // x[r + 2, c], x[r + 2, c + 2]; VALID leaves 2x2 windows.
    let mut dilated = attrs("VALID");
    dilated[2] = ("rates", ints(&[1, 2, 2, 1]));
    let (s, y) = run_f32_with_shape("ExtractImagePatches", &dilated, &[iota(&[1, 4, 4, 1])]);
    assert_eq!(s, [1, 2, 2, 4]);
    let mut want = Vec::new();
    for r in 0..2 {
        for c in 0..2 {
            for (dr, dc) in [(0, 0), (0, 2), (2, 0), (2, 2)] {
                want.push(((r + dr) * 4 + c + dc) as f32);
            }
        }
    }
    assert_eq!(y, want);
    assert!(
        err(
            "ExtractImagePatches",
            &attrs("FULL"),
            std::slice::from_ref(&x)
        )
        .contains("padding")
    );
    assert!(err("ExtractImagePatches", &attrs("VALID")[1..], &[x]).contains("ksizes"));
}

#[test]
fn im2col_unfolds_as_pytorch_and_col2im_folds_back() {
    // NCHW x [1, 1, 3, 3], 2x2 kernel: y[0, i * 2 + j, oh, ow] = x[oh + i, ow + j].
    let x = iota(&[1, 1, 3, 3]);
    let (s, y) = run_f32_with_shape(
        "Im2col",
        &[("ksizes", ints(&[2, 2]))],
        std::slice::from_ref(&x),
    );
    assert_eq!(s, [1, 4, 2, 2]);
    assert_eq!(
        y,
        [
            0., 1., 3., 4., 1., 2., 4., 5., 3., 4., 6., 7., 4., 5., 7., 8.
        ]
    );
    // pads 1 each side, stride 2: 2x2 windows over the 5x5 padded image.
    let (s, y) = run_f32_with_shape(
        "Im2col",
        &[
            ("ksizes", ints(&[2])),
            ("strides", ints(&[2])),
            ("pads", ints(&[1])),
        ],
        std::slice::from_ref(&x),
    );
    assert_eq!(s, [1, 4, 2, 2]);
    // Kernel element (0, 0) reads padded (2*oh, 2*ow) = x(2*oh - 1, 2*ow - 1).
    assert_eq!(y[..4], [0., 0., 0., 4.]);
    // NHWC (origin format 1): TensorFlow's layout.
    let xn = iota(&[1, 3, 3, 1]);
    let (s, y) = run_f32_with_shape(
        "Im2col",
        &[("ksizes", ints(&[2, 2])), (INPUT_FORMATS_ATTR, ints(&[1]))],
        &[xn],
    );
    assert_eq!(s, [1, 2, 2, 4]);
    assert_eq!(y[..4], [0., 1., 3., 4.]);
    assert!(err("Im2col", &[], std::slice::from_ref(&x)).contains("ksizes"));
    // Col2im of ones: each pixel counts the windows that cover it.
    let cols = Tensor::from_vec(&[1, 1, 4, 4], &[1.0f32; 16]);
    let attrs = [
        ("kernel_size", ints(&[2, 2])),
        ("dilation", ints(&[1, 1])),
        ("padding", ints(&[0, 0])),
        ("stride", ints(&[1, 1])),
    ];
    let (s, y) = run_f32_with_shape("Col2im", &attrs, &[cols, i32t(&[3, 3])]);
    assert_eq!(
        (s, y),
        (vec![1, 1, 3, 3], vec![1., 2., 1., 2., 4., 2., 1., 2., 1.])
    );
    let bad = Tensor::from_vec(&[1, 1, 4, 3], &[1.0f32; 12]);
    assert!(err("Col2im", &attrs, &[bad, i32t(&[3, 3])]).contains("input 0"));
    assert!(
        err("Col2im", &attrs[1..], &[iota(&[1, 1, 4, 4]), i32t(&[3, 3])]).contains("kernel_size")
    );
}

#[test]
fn inference_keeps_unknown_dims_and_ranks() {
    let f = |s: &[i64]| TensorMeta::new(DType::F32, s);
    let m = infer1(
        "Permute",
        &[f(&[UNKNOWN, 3, 4])],
        &[],
        &[("order", ints(&[0, 2, 1]))],
    )
    .unwrap();
    assert_eq!(m.shape, Some(vec![UNKNOWN, 4, 3]));
    let m = infer1(
        "MirrorPad",
        &[f(&[UNKNOWN, 3]), TensorMeta::new(DType::I32, &[2, 2])],
        &[],
        &[("mode", Attr::Str("REFLECT".into()))],
    )
    .unwrap();
    assert_eq!(m.shape, Some(vec![UNKNOWN, UNKNOWN]));
    let pads = HostTensor {
        dtype: DType::I64,
        shape: vec![4],
        data: [0i64, 0, 1, 1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    };
    let m = infer1(
        "PadV2",
        &[f(&[UNKNOWN, 3]), TensorMeta::new(DType::I64, &[4]), f(&[])],
        &[None, Some(&pads)],
        &[],
    )
    .unwrap();
    assert_eq!(m.shape, Some(vec![UNKNOWN, 5]));
    let m = infer1(
        "SpaceToBatchNDD",
        &[TensorMeta::unknown_rank(DType::F32)],
        &[],
        &[("block_shape", ints(&[2])), ("paddings", ints(&[0, 0]))],
    )
    .unwrap();
    assert_eq!(m.shape, None);
    let unknown = [TensorMeta::unknown_rank(DType::F32)];
    assert!(infer1("PadV3D", &unknown, &[], &[]).is_err());
    assert!(
        infer1(
            "ConfusionTransposeD",
            &unknown,
            &[],
            &[("perm", ints(&[0]))]
        )
        .is_err()
    );
    let m = infer1(
        "TileWithAxis",
        &[f(&[2, UNKNOWN])],
        &[],
        &[("tiles", Attr::Int(3))],
    )
    .unwrap();
    assert_eq!(m.shape, Some(vec![2, UNKNOWN]));
}
