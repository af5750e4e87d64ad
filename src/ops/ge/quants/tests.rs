//! QuantBatchMatmulV3, AscendQuantV2 and AscendAntiQuantV2 against their formulas
//! worked out by hand.

use half::f16;

use crate::ops::testing::{run1, try_run};
use crate::ops::{Attr, DType, Tensor};

/// x1 `[[1, -2], [3, 4]]` @ x2 `[[2, 0], [-1, 5]]` = `[[4, -10], [2, 20]]`; bias
/// `[1, -2]` gives `[[5, -12], [3, 18]]`; scale `[0.5, 0.25]` (float32) gives
/// `[[2.5, -3], [1.5, 4.5]]`.
#[test]
fn qbmm_float16_out_with_per_column_scale_and_bias() {
    let a = Tensor::from_vec(&[2, 2], &[1i8, -2, 3, 4]);
    let b = Tensor::from_vec(&[2, 2], &[2i8, 0, -1, 5]);
    let scale = Tensor::from_vec(&[2], &[0.5f32, 0.25]);
    let empty = Tensor::from_vec(&[0], &[0.0f32; 0]);
    let bias = Tensor::from_vec(&[2], &[1i32, -2]);
    let y = run1("QuantBatchMatmulV3", &[], &[a, b, scale, empty, bias]);
    assert_eq!(y.dtype, DType::F16);
    let got: Vec<f32> = y
        .slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [2.5, -3.0, 1.5, 4.5]);
}

/// int8 y with an offset and a uint64 scale of 0.5 (its float32 bits in the low 32):
/// x1 stored transposed `[K 2, M 1]` = `[[3], [-1]]`, x2 `[[2, -4], [1, 6]]`:
/// `3*2 - 1 = 5`, `-12 - 6 = -18`; times 0.5 plus offset -0.5: 2.0 and -9.5 -> -10
/// (ties to even); a large product saturates at 127.
#[test]
fn qbmm_int8_out_rounds_ties_to_even_and_saturates() {
    let a = Tensor::from_vec(&[2, 1], &[3i8, -1]);
    let b = Tensor::from_vec(&[2, 2], &[2i8, -4, 1, 6]);
    let scale = Tensor::from_vec(&[1], &[u64::from(0.5f32.to_bits())]);
    let offset = Tensor::from_vec(&[1], &[-0.5f32]);
    let y = run1(
        "QuantBatchMatmulV3",
        &[("transpose_x1", Attr::Int(1))],
        &[a, b, scale.clone(), offset.clone()],
    );
    assert_eq!(y.dtype, DType::I8);
    assert_eq!(y.slice::<i8>().unwrap(), &[2, -10]);
    let a = Tensor::from_vec(&[1, 2], &[127i8, 127]);
    let b = Tensor::from_vec(&[2, 1], &[127i8, 127]);
    let y = run1("QuantBatchMatmulV3", &[], &[a, b, scale, offset]);
    assert_eq!(y.slice::<i8>().unwrap(), &[127]);
}

#[test]
fn qbmm_refuses_float_operands_and_a_scale_with_an_offset() {
    let a = Tensor::from_vec(&[1, 1], &[1.0f32]);
    let b = Tensor::from_vec(&[1, 1], &[1i8]);
    let scale = Tensor::from_vec(&[1], &[1.0f32]);
    let e = try_run("QuantBatchMatmulV3", &[], &[a, b.clone(), scale], 1).unwrap_err();
    assert!(e.to_string().contains("int8"), "{e}");
    let a = Tensor::from_vec(&[1, 1], &[1i8]);
    let bad = Tensor::from_vec(&[1], &[(1u64 << 37) | u64::from(1.0f32.to_bits())]);
    let e = try_run("QuantBatchMatmulV3", &[], &[a, b, bad], 1).unwrap_err();
    assert!(e.to_string().contains("offset"), "{e}");
}

/// Per-column scale `[1, 10]` and offset `[0, -3]` along the default last axis: x
/// `[[0.5, 0.25], [-2.5, 1.3]]` -> `[[0.5, -0.5], [-2.5, 10]]` -> `[[0, -0], [-2, 10]]`
/// (ties to even); 100 * 10 - 3 saturates at 127.
#[test]
fn quant_v2_per_channel_along_the_last_axis() {
    let x = Tensor::from_vec(&[3, 2], &[0.5f32, 0.25, -2.5, 1.3, 0.0, 100.0]);
    let scale = Tensor::from_vec(&[2], &[1.0f32, 10.0]);
    let offset = Tensor::from_vec(&[2], &[0.0f32, -3.0]);
    let y = run1(
        "AscendQuantV2",
        &[],
        &[x.clone(), scale.clone(), offset.clone()],
    );
    assert_eq!(y.dtype, DType::I8);
    assert_eq!(y.slice::<i8>().unwrap(), &[0, 0, -2, 10, 0, 127]);
    // axis 0 with one value per row and floor: rows scaled by 2, 1, 0.5.
    let s0 = Tensor::from_vec(&[3], &[2.0f32, 1.0, 0.5]);
    let attrs = [
        ("axis", Attr::Int(0)),
        ("round_mode", Attr::Str("floor".into())),
    ];
    let y = run1("AscendQuantV2", &attrs, &[x.clone(), s0]);
    assert_eq!(y.slice::<i8>().unwrap(), &[1, 0, -3, 1, 0, 50]);
    // float16 x, sqrt_mode: 3 * 2 * 2 = 12.
    let xh = Tensor::from_vec(&[1], &[f16::from_f32(3.0)]);
    let s = Tensor::from_vec(&[1], &[f16::from_f32(2.0)]);
    let y = run1("AscendQuantV2", &[("sqrt_mode", Attr::Int(1))], &[xh, s]);
    assert_eq!(y.slice::<i8>().unwrap(), &[12]);
    let e = try_run("AscendQuantV2", &[("axis", Attr::Int(2))], &[x, scale], 1).unwrap_err();
    assert!(e.to_string().contains("axis"), "{e}");
}

/// `(x + offset) * scale` per last-axis index: x `[[-3, 4]]`, offset `[1, -2]`, scale
/// `[0.5, -2]`: `-1`, `-4`; bfloat16 on request.
#[test]
fn anti_quant_v2_per_channel() {
    let x = Tensor::from_vec(&[1, 2], &[-3i8, 4]);
    let scale = Tensor::from_vec(&[2], &[0.5f32, -2.0]);
    let offset = Tensor::from_vec(&[2], &[1.0f32, -2.0]);
    let y = run1(
        "AscendAntiQuantV2",
        &[],
        &[x.clone(), scale.clone(), offset.clone()],
    );
    assert_eq!(y.dtype, DType::F16);
    let got: Vec<f32> = y
        .slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [-1.0, -4.0]);
    let y = run1(
        "AscendAntiQuantV2",
        &[("dst_type", Attr::Int(27)), ("sqrt_mode", Attr::Int(1))],
        &[x.clone(), scale.clone(), offset],
    );
    assert_eq!(y.dtype, DType::Bf16);
    let got: Vec<f32> = y
        .slice::<half::bf16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [-0.5, 8.0]);
    let e = try_run(
        "AscendAntiQuantV2",
        &[("dst_type", Attr::Int(0))],
        &[x, scale],
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("dst_type"), "{e}");
}
