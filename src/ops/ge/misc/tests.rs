//! GE's meanings of NonZero, Where, Unique, Upsample, Celu, Scatter and
//! SoftmaxCrossEntropyLoss, run as lowering runs a GE graph's node (through the type's
//! GE-contract hook), against the same types as an ONNX import runs them; and the GE-only
//! types, each against values worked out here from its documented semantics.

use half::f16;

use crate::ops::testing::{
    f16_tensor, f16_values, run, run_f32, run_f32_with_shape, test_attrs, try_run,
};
use crate::ops::{Attr, DType, InferCtx, OpRegistry, Tensor, TensorMeta, assert_close};

/// Runs a node of `op` as a GE graph's node (no `onnx_opset`): the type's GE-contract hook
/// says which op and inputs, as lowering resolves it.
fn run_ge(
    op: &'static str,
    attrs: &[(&str, Attr)],
    inputs: &[Tensor],
    outputs: usize,
) -> Result<Vec<Tensor>, String> {
    let reg = OpRegistry::new();
    let spec = *reg.get(op).expect("registered");
    let hook = spec.ge_contract.expect("a GE-contract hook");
    let attrs = test_attrs(attrs);
    let metas: Vec<TensorMeta> = inputs.iter().map(TensorMeta::of).collect();
    let values = vec![None; inputs.len()];
    let ctx = InferCtx {
        op,
        inputs: &metas,
        values: &values,
        attrs: &attrs,
        outputs,
    };
    let (target, a, range) = hook(&ctx)?.resolve(&reg, spec, inputs.len())?;
    reg.run_on_host(target.name, &a, &inputs[range], outputs)
        .map_err(|e| e.to_string())
}

/// An ONNX import's node of `op` (it carries `onnx_opset`).
fn run_onnx(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor], outputs: usize) -> Vec<Tensor> {
    let mut a = attrs.to_vec();
    a.push(("onnx_opset", Attr::Int(13)));
    run(op, &a, inputs, outputs)
}

fn f32t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> String {
    try_run(op, attrs, inputs, 1).unwrap_err().to_string()
}

#[test]
fn ge_nonzero_gives_a_row_per_element_and_onnx_a_row_per_dim() {
    // x = [[0, 1.5, 0], [-2, 0, 3]]: non-zero at (0, 1), (1, 0), (1, 2).
    let x = f32t(&[2, 3], &[0.0, 1.5, 0.0, -2.0, 0.0, 3.0]);
    let y = run_ge("NonZero", &[], std::slice::from_ref(&x), 1).unwrap();
    assert_eq!((y[0].dtype, &y[0].shape[..]), (DType::I64, &[3, 2][..]));
    assert_eq!(y[0].slice::<i64>().unwrap(), [0, 1, 1, 0, 1, 2]);
    let y = run_ge(
        "NonZero",
        &[("transpose", Attr::Bool(true))],
        std::slice::from_ref(&x),
        1,
    )
    .unwrap();
    assert_eq!(y[0].shape, [2, 3]);
    assert_eq!(y[0].slice::<i64>().unwrap(), [0, 1, 1, 1, 0, 2]);
    let y = run_ge(
        "NonZero",
        &[("dtype", Attr::DType(DType::I32))],
        std::slice::from_ref(&x),
        1,
    )
    .unwrap();
    assert_eq!(y[0].slice::<i32>().unwrap(), [0, 1, 1, 0, 1, 2]);
    // The ONNX import's NonZero is [rank, N].
    let y = run_onnx("NonZero", &[], std::slice::from_ref(&x), 1);
    assert_eq!(y[0].shape, [2, 3]);
    assert_eq!(y[0].slice::<i64>().unwrap(), [0, 1, 1, 1, 0, 2]);
    let bad = run_ge(
        "NonZero",
        &[("dtype", Attr::DType(DType::F32))],
        std::slice::from_ref(&x),
        1,
    );
    assert!(bad.unwrap_err().contains("dtype"));
}

#[test]
fn ge_where_is_tensorflows_coordinates_and_onnx_where_selects() {
    let c = Tensor::from_vec(&[2, 2], &[1u8, 0, 0, 1]);
    let c = Tensor {
        dtype: DType::Bool,
        ..c
    };
    let y = run_ge("Where", &[], std::slice::from_ref(&c), 1).unwrap();
    assert_eq!(y[0].shape, [2, 2]);
    assert_eq!(y[0].slice::<i64>().unwrap(), [0, 0, 1, 1]);
    let a = f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let b = f32t(&[2, 2], &[-1.0, -2.0, -3.0, -4.0]);
    let y = run_onnx("Where", &[], &[c.clone(), a.clone(), b.clone()], 1);
    assert_eq!(y[0].slice::<f32>().unwrap(), [1.0, -2.0, -3.0, 4.0]);
    // GE's Where takes x alone.
    assert!(run_ge("Where", &[], &[c, a, b], 1).is_err());
}

#[test]
fn ge_unique_keeps_first_occurrence_order_with_int32_indices() {
    let x = f32t(&[5], &[3.0, -1.0, 3.0, 0.5, -1.0]);
    let y = run_ge("Unique", &[], std::slice::from_ref(&x), 2).unwrap();
    assert_eq!(y[0].slice::<f32>().unwrap(), [3.0, -1.0, 0.5]);
    assert_eq!(y[1].dtype, DType::I32);
    assert_eq!(y[1].slice::<i32>().unwrap(), [0, 1, 0, 2, 1]);
    let y = run_ge(
        "Unique",
        &[("out_idx", Attr::DType(DType::I64))],
        std::slice::from_ref(&x),
        2,
    )
    .unwrap();
    assert_eq!(y[1].slice::<i64>().unwrap(), [0, 1, 0, 2, 1]);
    let x16 = f16_tensor(&[4], &[2.0, 2.0, -0.5, 2.0]);
    let y = run_ge("Unique", &[], std::slice::from_ref(&x16), 2).unwrap();
    assert_eq!(f16_values(&y[0]), [2.0, -0.5]);
    assert_eq!(y[1].slice::<i32>().unwrap(), [0, 0, 1, 0]);
    // ONNX's Unique sorts by default.
    let y = run_onnx("Unique", &[], std::slice::from_ref(&x), 1);
    assert_eq!(y[0].slice::<f32>().unwrap(), [-1.0, 0.5, 3.0]);
    // TensorFlow's Unique is of a 1-D x.
    let m = f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    assert!(run_ge("Unique", &[], &[m], 2).unwrap_err().contains("1-D"));
}

#[test]
fn ge_upsample_repeats_by_stride_and_scales() {
    let x = f32t(&[1, 1, 2, 2], &[1.0, -2.0, 3.0, 4.0]);
    let attrs = [
        ("scale", Attr::Float(0.5)),
        ("stride_h", Attr::Int(2)),
        ("stride_w", Attr::Int(3)),
    ];
    let y = run_ge("Upsample", &attrs, std::slice::from_ref(&x), 1).unwrap();
    assert_eq!(y[0].shape, [1, 1, 4, 6]);
    let mut want = Vec::new();
    for h in 0..4 {
        for w in 0..6 {
            want.push(0.5 * [1.0, -2.0, 3.0, 4.0][(h / 2) * 2 + w / 3]);
        }
    }
    assert_eq!(y[0].slice::<f32>().unwrap(), &want[..]);
    // Defaults: stride 2 both ways, scale 1.
    let y = run_ge(
        "Upsample",
        &[],
        &[f16_tensor(&[1, 1, 1, 2], &[1.5, -3.0])],
        1,
    )
    .unwrap();
    assert_eq!(y[0].shape, [1, 1, 2, 4]);
    assert_eq!(
        f16_values(&y[0]),
        [1.5, 1.5, -3.0, -3.0, 1.5, 1.5, -3.0, -3.0]
    );
    let bad = run_ge(
        "Upsample",
        &[("stride_h", Attr::Int(0))],
        std::slice::from_ref(&x),
        1,
    );
    assert!(bad.unwrap_err().contains("stride_h"));
    assert!(run_ge("Upsample", &[], &[f32t(&[1, 2, 2], &[0.0; 4])], 1).is_err());
    // The ONNX import's Upsample takes scales.
    let scales = f32t(&[4], &[1.0, 1.0, 2.0, 1.0]);
    let y = run("Upsample", &[("onnx_opset", Attr::Int(9))], &[x, scales], 1);
    assert_eq!(y[0].shape, [1, 1, 4, 2]);
    assert_eq!(
        y[0].slice::<f32>().unwrap(),
        [1.0, -2.0, 1.0, -2.0, 3.0, 4.0, 3.0, 4.0]
    );
}

#[test]
fn ge_celu_has_three_alphas() {
    let x = f32t(&[3], &[-1.0, 0.0, 2.0]);
    let attrs = [
        ("alpha1", Attr::Float(2.0)),
        ("alpha2", Attr::Float(0.5)),
        ("alpha3", Attr::Float(3.0)),
    ];
    let y = run_ge("Celu", &attrs, std::slice::from_ref(&x), 1).unwrap();
    let want = [2.0 * ((-2.0f32).exp() - 1.0), 0.0, 6.0];
    assert_close(y[0].slice::<f32>().unwrap(), &want);
    // alpha1 = alpha2 and alpha3 = 1: ONNX's Celu with that alpha.
    let attrs = [("alpha1", Attr::Float(2.0)), ("alpha2", Attr::Float(2.0))];
    let y = run_ge("Celu", &attrs, std::slice::from_ref(&x), 1).unwrap();
    assert_close(
        y[0].slice::<f32>().unwrap(),
        &[2.0 * ((-0.5f32).exp() - 1.0), 0.0, 2.0],
    );
    // Defaults, float16.
    let y = run_ge("Celu", &[], &[f16_tensor(&[2], &[-1.0, 0.5])], 1).unwrap();
    let want = f16::from_f32((-1.0f32).exp() - 1.0).to_f32();
    assert_eq!(f16_values(&y[0]), [want, 0.5]);
    let y = run_ge(
        "Celu",
        &[("alpha3", Attr::Float(2.0))],
        &[f16_tensor(&[2], &[-1.0, 0.5])],
        1,
    )
    .unwrap();
    assert_eq!(f16_values(&y[0]), [want, 1.0]);
    let bad = run_ge(
        "Celu",
        &[("alpha2", Attr::Float(0.0))],
        std::slice::from_ref(&x),
        1,
    );
    assert!(bad.unwrap_err().contains("alpha2"));
    // The ONNX import's Celu has one alpha.
    let y = run_onnx("Celu", &[("alpha", Attr::Float(2.0))], &[x], 1);
    assert_close(
        y[0].slice::<f32>().unwrap(),
        &[2.0 * ((-0.5f32).exp() - 1.0), 0.0, 2.0],
    );
}

#[test]
fn ge_scatter_writes_windows_at_positions() {
    // var [2, 4, 2] (batch, sequence, feature), positions along dim 1.
    let var: Vec<f32> = (0..16).map(|v| v as f32).collect();
    let var = f32t(&[2, 4, 2], &var);
    let upd = f32t(
        &[2, 2, 2],
        &[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0],
    );
    let idx = Tensor::from_vec(&[2], &[1i32, 2]);
    let attrs = [
        ("reduce", Attr::Str("update".into())),
        ("axis", Attr::Int(1)),
    ];
    let y = run_ge("Scatter", &attrs, &[var.clone(), idx, upd.clone()], 1).unwrap();
    // Batch 0 rows 1..3, batch 1 rows 2..4.
    let want = [
        0.0, 1.0, -1.0, -2.0, -3.0, -4.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, -5.0, -6.0, -7.0, -8.0,
    ];
    assert_eq!(y[0].slice::<f32>().unwrap(), want);
    // Pairs (batch, position): one window of 1 into batch 1 at 0; axis -2 is dim 1.
    let pair = Tensor::from_vec(&[1, 2], &[1i64, 0]);
    let one = f32t(&[1, 1, 2], &[50.0, 60.0]);
    let attrs = [
        ("reduce", Attr::Str("none".into())),
        ("axis", Attr::Int(-2)),
    ];
    let y = run_ge("Scatter", &attrs, &[var.clone(), pair, one.clone()], 1).unwrap();
    let mut want: Vec<f32> = (0..16).map(|v| v as f32).collect();
    want[8] = 50.0;
    want[9] = 60.0;
    assert_eq!(y[0].slice::<f32>().unwrap(), &want[..]);
    // int32 var, the last axis.
    let v = Tensor::from_vec(&[1, 4], &[1i32, 2, 3, 4]);
    let u = Tensor::from_vec(&[1, 2], &[-9i32, -8]);
    let attrs = [
        ("reduce", Attr::Str("update".into())),
        ("axis", Attr::Int(-1)),
    ];
    let y = run_ge(
        "Scatter",
        &attrs,
        &[v, Tensor::from_vec(&[1], &[2i32]), u],
        1,
    )
    .unwrap();
    assert_eq!(y[0].slice::<i32>().unwrap(), [1, 2, -9, -8]);
    // Errors: no reduce, a window past the end, the default axis 0.
    let idx = Tensor::from_vec(&[2], &[1i32, 3]);
    let ins = [var.clone(), idx, upd.clone()];
    assert!(
        run_ge("Scatter", &[("axis", Attr::Int(1))], &ins, 1)
            .unwrap_err()
            .contains("reduce")
    );
    let attrs = [
        ("reduce", Attr::Str("update".into())),
        ("axis", Attr::Int(1)),
    ];
    assert!(
        run_ge("Scatter", &attrs, &ins, 1)
            .unwrap_err()
            .contains("outside")
    );
    let attrs = [("reduce", Attr::Str("update".into()))];
    assert!(
        run_ge("Scatter", &attrs, &ins, 1)
            .unwrap_err()
            .contains("axis")
    );
    let attrs = [("reduce", Attr::Str("add".into())), ("axis", Attr::Int(1))];
    assert!(
        run_ge("Scatter", &attrs, &ins, 1)
            .unwrap_err()
            .contains("reduce")
    );
    // The ONNX import's Scatter is ScatterElements.
    let data = f32t(&[1, 4], &[1.0, 2.0, 3.0, 4.0]);
    let ind = Tensor::from_vec(&[1, 2], &[1i64, 3]);
    let up = f32t(&[1, 2], &[10.0, 20.0]);
    let y = run_onnx("Scatter", &[("axis", Attr::Int(1))], &[data, ind, up], 1);
    assert_eq!(y[0].slice::<f32>().unwrap(), [1.0, 10.0, 3.0, 20.0]);
}

#[test]
fn ge_softmax_cross_entropy_ignores_class_0_by_default() {
    let scores = f32t(&[2, 2], &[0.0, 0.0, 1.0, 0.0]);
    let labels = Tensor::from_vec(&[2], &[0i64, 1]);
    let none = [("reduction", Attr::Str("none".into()))];
    let ins = [scores, labels];
    let ge = run_ge("SoftmaxCrossEntropyLoss", &none, &ins, 1).unwrap();
    let ln1e = (1.0f32 + 1.0f32.exp()).ln();
    assert_close(ge[0].slice::<f32>().unwrap(), &[0.0, ln1e]);
    let with = [
        ("reduction", Attr::Str("none".into())),
        ("ignore_index", Attr::Int(5)),
    ];
    let ge = run_ge("SoftmaxCrossEntropyLoss", &with, &ins, 1).unwrap();
    assert_close(ge[0].slice::<f32>().unwrap(), &[2.0f32.ln(), ln1e]);
    // The ONNX import ignores no class unless told.
    let onnx = run_onnx("SoftmaxCrossEntropyLoss", &none, &ins, 1);
    assert_close(onnx[0].slice::<f32>().unwrap(), &[2.0f32.ln(), ln1e]);
}

#[test]
fn dropout_do_mask_keeps_the_set_bits_scaled() {
    let x: Vec<f32> = (0..10).map(|v| v as f32 - 4.5).collect();
    // Bits 0, 2, 5, 7 of byte 0 and bit 0 of byte 1: elements 0, 2, 5, 7, 8.
    let mask = Tensor::from_vec(
        &[16],
        &[0b1010_0101u8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    let kp = f32t(&[1], &[0.5]);
    let y = run_f32("DropOutDoMask", &[], &[f32t(&[2, 5], &x), mask.clone(), kp]);
    let kept = [0, 2, 5, 7, 8];
    let want: Vec<f32> = (0..10)
        .map(|k| if kept.contains(&k) { x[k] * 2.0 } else { 0.0 })
        .collect();
    assert_eq!(y, want);
    let y = run(
        "DropOutDoMask",
        &[],
        &[
            f16_tensor(&[10], &x),
            mask.clone(),
            f16_tensor(&[1], &[0.5]),
        ],
        1,
    );
    assert_eq!(f16_values(&y[0]), want);
    let y = run_f32(
        "DropOutDoMaskV3D",
        &[("keep_prob", Attr::Float(0.25))],
        &[f32t(&[10], &x), mask.clone()],
    );
    let want4: Vec<f32> = want.iter().map(|v| v * 2.0).collect();
    assert_eq!(y, want4);
    // A bool mask has one element per element.
    let bools = Tensor {
        dtype: DType::Bool,
        ..Tensor::from_vec(&[3], &[1u8, 0, 1])
    };
    let y = run_f32(
        "DropOutDoMaskV3D",
        &[("keep_prob", Attr::Float(0.5))],
        &[f32t(&[3], &[1.0, 2.0, -3.0]), bools.clone()],
    );
    assert_eq!(y, [2.0, 0.0, -6.0]);
    // Errors: a short mask, keep_prob missing, a bool mask for DropOutDoMask.
    let short = Tensor::from_vec(&[1], &[0xffu8]);
    let e = err(
        "DropOutDoMask",
        &[],
        &[f32t(&[10], &x), short, f32t(&[1], &[0.5])],
    );
    assert!(e.contains("bytes"), "{e}");
    let e = err("DropOutDoMaskV3D", &[], &[f32t(&[10], &x), mask]);
    assert!(e.contains("keep_prob"), "{e}");
    let e = err(
        "DropOutDoMask",
        &[],
        &[f32t(&[3], &[0.0; 3]), bools, f32t(&[1], &[0.5])],
    );
    assert!(e.contains("mask"), "{e}");
}

#[test]
fn affine_grid_maps_the_base_grid_through_theta() {
    let theta = f32t(&[1, 2, 3], &[2.0, 0.5, 0.1, -1.0, 0.0, 0.3]);
    let size = Tensor::from_vec(&[4], &[1i32, 1, 2, 3]);
    let (shape, y) = run_f32_with_shape("AffineGrid", &[], &[theta.clone(), size.clone()]);
    assert_eq!(shape, [1, 2, 3, 2]);
    let xs = [-2.0f32 / 3.0, 0.0, 2.0 / 3.0];
    let ys = [-0.5f32, 0.5];
    let mut want = Vec::new();
    for yv in ys {
        for xv in xs {
            want.push(2.0 * xv + 0.5 * yv + 0.1);
            want.push(-xv + 0.3);
        }
    }
    assert_close(&y, &want);
    let y = run_f32(
        "AffineGrid",
        &[("align_corners", Attr::Bool(true))],
        &[theta, size.clone()],
    );
    let mut want = Vec::new();
    for yv in [-1.0f32, 1.0] {
        for xv in [-1.0f32, 0.0, 1.0] {
            want.push(2.0 * xv + 0.5 * yv + 0.1);
            want.push(-xv + 0.3);
        }
    }
    assert_close(&y, &want);
    // 3-D: D 1, H 1, W 2; theta picks (z + 1, x, y).
    let theta3 = f32t(
        &[1, 3, 4],
        &[0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
    );
    let size3 = Tensor::from_vec(&[5], &[1i32, 1, 1, 1, 2]);
    let (shape, y) = run_f32_with_shape("AffineGrid", &[], &[theta3, size3]);
    assert_eq!(shape, [1, 1, 1, 2, 3]);
    assert_close(&y, &[1.0, -0.5, 0.0, 1.0, 0.5, 0.0]);
    let y = run(
        "AffineGrid",
        &[],
        &[
            f16_tensor(&[1, 2, 3], &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]),
            size.clone(),
        ],
        1,
    );
    assert_eq!(
        f16_values(&y[0]),
        [
            -2.0 / 3.0,
            -0.5,
            0.0,
            -0.5,
            2.0 / 3.0,
            -0.5,
            -2.0 / 3.0,
            0.5,
            0.0,
            0.5,
            2.0 / 3.0,
            0.5
        ]
        .map(|v: f32| f16::from_f32(v).to_f32())
    );
    let bad = Tensor::from_vec(&[3], &[1i32, 2, 3]);
    let e = err("AffineGrid", &[], &[f32t(&[1, 2, 3], &[0.0; 6]), bad]);
    assert!(e.contains("output_size"), "{e}");
    let e = err("AffineGrid", &[], &[f32t(&[2, 2, 3], &[0.0; 12]), size]);
    assert!(e.contains("theta") || e.contains("input 0"), "{e}");
}

#[test]
fn dilation_spreads_x_with_padding_value_between() {
    let x = f32t(&[1, 1, 2, 3], &[1.0, -2.0, 3.0, 4.0, 5.0, -6.0]);
    let attrs = [
        ("dilations", Attr::Ints(vec![1, 1, 2, 3])),
        ("padding_value", Attr::Float(-1.0)),
    ];
    let (shape, y) = run_f32_with_shape("Dilation", &attrs, std::slice::from_ref(&x));
    assert_eq!(shape, [1, 1, 3, 7]);
    let mut want = vec![-1.0f32; 21];
    for h in 0..2 {
        for w in 0..3 {
            want[h * 2 * 7 + w * 3] = [1.0, -2.0, 3.0, 4.0, 5.0, -6.0][h * 3 + w];
        }
    }
    assert_eq!(y, want);
    // Default padding_value 0; int8 and float16.
    let d = [("dilations", Attr::Ints(vec![2]))];
    let y = run("Dilation", &d, &[Tensor::from_vec(&[3], &[1i8, -2, 3])], 1);
    assert_eq!(y[0].slice::<i8>().unwrap(), [1, 0, -2, 0, 3]);
    let y = run("Dilation", &d, &[f16_tensor(&[2], &[0.5, -1.5])], 1);
    assert_eq!(f16_values(&y[0]), [0.5, 0.0, -1.5]);
    assert!(err("Dilation", &[], std::slice::from_ref(&x)).contains("dilations"));
    let e = err(
        "Dilation",
        &[("dilations", Attr::Ints(vec![1, 2]))],
        std::slice::from_ref(&x),
    );
    assert!(e.contains("dilations"), "{e}");
    let p = [
        ("dilations", Attr::Ints(vec![1, 1, 2, 2])),
        ("pads", Attr::Ints(vec![1, 0, 0, 0])),
    ];
    assert!(err("Dilation", &p, &[x]).contains("pads"));
}

#[test]
fn max_pool_ext2_is_tensorflows_max_pool() {
    // NHWC [1, 2, 3, 1].
    let x = f32t(&[1, 2, 3, 1], &[1.0, -5.0, 3.0, 2.0, 0.5, -1.0]);
    let attrs = |padding: &str| {
        vec![
            ("ksize", Attr::Ints(vec![1, 2, 2, 1])),
            ("strides", Attr::Ints(vec![1, 1, 1, 1])),
            ("padding", Attr::Str(padding.into())),
        ]
    };
    let (shape, y) = run_f32_with_shape("MaxPoolExt2", &attrs("VALID"), std::slice::from_ref(&x));
    assert_eq!(shape, [1, 1, 2, 1]);
    assert_eq!(y, [2.0, 3.0]);
    // SAME pads after: the last row and column see fewer elements.
    let (shape, y) = run_f32_with_shape("MaxPoolExt2", &attrs("SAME"), std::slice::from_ref(&x));
    assert_eq!(shape, [1, 2, 3, 1]);
    assert_eq!(y, [2.0, 3.0, 3.0, 2.0, 0.5, -1.0]);
    let y = run(
        "MaxPoolExt2",
        &attrs("VALID"),
        &[f16_tensor(&[1, 2, 3, 1], &[1.0, -5.0, 3.0, 2.0, 0.5, -1.0])],
        1,
    );
    assert_eq!(f16_values(&y[0]), [2.0, 3.0]);
    let mut no_padding = attrs("VALID");
    no_padding.pop();
    assert!(err("MaxPoolExt2", &no_padding, std::slice::from_ref(&x)).contains("padding"));
    assert!(err("MaxPoolExt2", &attrs("VALID")[1..], &[x]).contains("ksize"));
}

#[test]
fn internal_ops_infer_with_unknown_dims() {
    use crate::ops::UNKNOWN;
    use crate::ops::testing::infer_for_test;
    let x = TensorMeta::new(DType::F32, &[UNKNOWN, 3]);
    let y = infer_for_test(super::NON_ZERO, std::slice::from_ref(&x), &[], &[], 1).unwrap();
    assert_eq!(y[0].shape, Some(vec![UNKNOWN, 2]));
    let y = infer_for_test(
        super::UPSAMPLE,
        &[TensorMeta::new(DType::F32, &[1, 2, UNKNOWN, 3])],
        &[],
        &[],
        1,
    )
    .unwrap();
    assert_eq!(y[0].shape, Some(vec![1, 2, UNKNOWN, 6]));
    let u = TensorMeta::unknown_rank(DType::F32);
    let y = infer_for_test(super::UNIQUE, std::slice::from_ref(&u), &[], &[], 2).unwrap();
    assert_eq!(y[1].dtype, DType::I32);
    let y = infer_for_test(
        "Dilation",
        &[u],
        &[],
        &[("dilations", Attr::Ints(vec![2]))],
        1,
    )
    .unwrap();
    assert_eq!(y[0].shape, None);
    let theta = TensorMeta::new(DType::F32, &[4, 2, 3]);
    let size = TensorMeta::new(DType::I32, &[4]);
    let y = infer_for_test("AffineGrid", &[theta, size], &[], &[], 1).unwrap();
    assert_eq!(y[0].shape, Some(vec![4, UNKNOWN, UNKNOWN, 2]));
}
