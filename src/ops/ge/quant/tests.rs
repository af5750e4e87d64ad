//! GE's quantization ops against their formulas worked out by hand.

use half::f16;

use crate::ops::testing::{run1, try_run};
use crate::ops::{Attr, DType, Tensor};

fn quant_attrs(scale: f64, offset: f64) -> Vec<(&'static str, Attr)> {
    vec![
        ("scale", Attr::Float(scale)),
        ("offset", Attr::Float(offset)),
    ]
}

fn quant(attrs: &[(&str, Attr)], x: &[f32]) -> Vec<i8> {
    let t = run1("AscendQuant", attrs, &[Tensor::from_vec(&[x.len()], x)]);
    assert_eq!(t.dtype, DType::I8);
    t.slice::<i8>().unwrap().to_vec()
}

/// scale 0.5, offset 0: 1 -> 0.5 -> 0 and 3 -> 1.5 -> 2 and 5 -> 2.5 -> 2 (ties to even);
/// -3 -> -1.5 -> -2; saturation at 127 and -128.
#[test]
fn quant_rounds_ties_to_even_and_saturates() {
    let y = quant(
        &quant_attrs(0.5, 0.0),
        &[1.0, 3.0, 5.0, -3.0, 1000.0, -1000.0, 255.0],
    );
    assert_eq!(y, [0, 2, 2, -2, 127, -128, 127]);
}

/// The offset is added after scaling: 10 * 0.1 - 3.25 = -2.25 -> -2; 4 * 0.1 - 3.25 =
/// -2.85 -> -3.
#[test]
fn quant_adds_a_negative_offset_after_scaling() {
    let y = quant(&quant_attrs(0.1, -3.25), &[10.0, 4.0, 0.0]);
    assert_eq!(y, [-2, -3, -3]);
}

/// sqrt_mode scales twice: 3 * 2 * 2 + 1 = 13.
#[test]
fn quant_sqrt_mode_scales_twice() {
    let mut a = quant_attrs(2.0, 1.0);
    a.push(("sqrt_mode", Attr::Int(1)));
    assert_eq!(quant(&a, &[3.0, -0.5]), [13, -1]);
}

/// 1.5, -1.5, 2.7, -2.7 under each rounding mode.
#[test]
fn quant_round_modes() {
    let x = [1.5, -1.5, 2.7, -2.7];
    for (mode, want) in [
        ("Round", [2, -2, 3, -3]),
        ("Floor", [1, -2, 2, -3]),
        ("Ceil", [2, -1, 3, -2]),
        ("Trunc", [1, -1, 2, -2]),
    ] {
        let mut a = quant_attrs(1.0, 0.0);
        a.push(("round_mode", Attr::Str(mode.into())));
        assert_eq!(quant(&a, &x), want, "{mode}");
    }
}

/// A float16 x is scaled in f32.
#[test]
fn quant_takes_float16() {
    let x: Vec<f16> = [2.5f32, -7.0].iter().map(|&v| f16::from_f32(v)).collect();
    let t = run1(
        "AscendQuant",
        &quant_attrs(3.0, 0.5),
        &[Tensor::from_vec(&[2], &x)],
    );
    assert_eq!(t.slice::<i8>().unwrap(), [8, -20]);
}

#[test]
fn quant_refuses_bad_attributes() {
    let x = Tensor::from_vec(&[1], &[1.0f32]);
    let err = |attrs: &[(&str, Attr)]| {
        try_run("AscendQuant", attrs, std::slice::from_ref(&x), 1)
            .unwrap_err()
            .to_string()
    };
    assert!(err(&[("scale", Attr::Float(1.0))]).contains("offset"));
    assert!(err(&[("offset", Attr::Float(1.0))]).contains("scale"));
    let mut a = quant_attrs(1.0, 0.0);
    a.push(("round_mode", Attr::Str("Nearest".into())));
    assert!(err(&a).contains("round_mode"));
    let mut a = quant_attrs(1.0, 0.0);
    a.push(("dst_type", Attr::Int(29)));
    assert!(err(&a).contains("int4"));
    let i = Tensor::from_vec(&[1], &[1i32]);
    let e = try_run("AscendQuant", &quant_attrs(1.0, 0.0), &[i], 1).unwrap_err();
    assert!(e.to_string().contains("float16 or float32"), "{e}");
}

/// (x + offset) * scale: (-128 + 3) * 0.5 = -62.5, (127 + 3) * 0.5 = 65, (0 + 3) * 0.5.
#[test]
fn anti_quant_adds_the_offset_then_scales() {
    let x = Tensor::from_vec(&[3], &[-128i8, 127, 0]);
    let t = run1(
        "AscendAntiQuant",
        &quant_attrs(0.5, 3.0),
        std::slice::from_ref(&x),
    );
    assert_eq!(t.dtype, DType::F32);
    assert_eq!(t.slice::<f32>().unwrap(), [-62.5, 65.0, 1.5]);
    let mut a = quant_attrs(0.5, -1.0);
    a.push(("sqrt_mode", Attr::Int(1)));
    a.push(("dtype", Attr::Int(1)));
    let t = run1("AscendAntiQuant", &a, &[x]);
    assert_eq!(t.dtype, DType::F16);
    let got: Vec<f32> = t
        .slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [-32.25, 31.5, -0.25]);
}

#[test]
fn anti_quant_refuses_float_x_and_missing_scale() {
    let f = Tensor::from_vec(&[1], &[1.0f32]);
    let e = try_run("AscendAntiQuant", &quant_attrs(1.0, 0.0), &[f], 1).unwrap_err();
    assert!(e.to_string().contains("int8"), "{e}");
    let x = Tensor::from_vec(&[1], &[1i8]);
    let e = try_run("AscendAntiQuant", &[("offset", Attr::Float(0.0))], &[x], 1).unwrap_err();
    assert!(e.to_string().contains("scale"), "{e}");
}

/// Per channel on dimension 1 of a [1, 2, 1, 2] x: channel 0 by 0.5, channel 1 by -0.25;
/// relu then clears the negatives.
#[test]
fn dequant_scales_per_channel_and_relus() {
    let x = Tensor::from_vec(&[1, 2, 1, 2], &[3i32, -4, 8, -12]);
    let s: Vec<f16> = [0.5f32, -0.25].iter().map(|&v| f16::from_f32(v)).collect();
    let s = Tensor::from_vec(&[2], &s);
    let t = run1("AscendDequant", &[], &[x.clone(), s.clone()]);
    assert_eq!(t.dtype, DType::F32);
    assert_eq!(t.slice::<f32>().unwrap(), [1.5, -2.0, -2.0, 3.0]);
    let relu = [("relu_flag", Attr::Int(1))];
    let t = run1("AscendDequant", &relu, &[x, s]);
    assert_eq!(t.slice::<f32>().unwrap(), [1.5, 0.0, 0.0, 3.0]);
}

/// A uint64 deq_scale: 0.25's float32 bits with bit 46 set; sqrt_mode scales twice;
/// dtype 1 gives float16.
#[test]
fn dequant_reads_the_uint64_scale_bits() {
    let x = Tensor::from_vec(&[2, 1], &[100i32, -7]);
    let s = Tensor::from_vec(&[1], &[u64::from(0.25f32.to_bits()) | (1 << 46)]);
    let t = run1("AscendDequant", &[], &[x.clone(), s.clone()]);
    assert_eq!(t.slice::<f32>().unwrap(), [25.0, -1.75]);
    let a = [("sqrt_mode", Attr::Int(1)), ("dtype", Attr::Int(1))];
    let t = run1("AscendDequant", &a, &[x, s]);
    assert_eq!(t.dtype, DType::F16);
    let got: Vec<f32> = t
        .slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [6.25, -0.4375]);
}

#[test]
fn dequant_refuses_an_offset_and_a_bad_scale_count() {
    let x = Tensor::from_vec(&[1, 2], &[1i32, 2]);
    let s = Tensor::from_vec(&[1], &[u64::from(1.0f32.to_bits()) | (3 << 37)]);
    let e = try_run("AscendDequant", &[], &[x.clone(), s], 1).unwrap_err();
    assert!(e.to_string().contains("offset"), "{e}");
    let s = Tensor::from_vec(&[3], &[f16::ONE; 3]);
    let e = try_run("AscendDequant", &[], &[x.clone(), s], 1).unwrap_err();
    assert!(e.to_string().contains("one per channel"), "{e}");
    let f = Tensor::from_vec(&[1], &[1.0f32]);
    let e = try_run("AscendDequant", &[], &[x, f], 1).unwrap_err();
    assert!(e.to_string().contains("float16 or uint64"), "{e}");
}

fn req(scales: &[f32]) -> Vec<u64> {
    scales
        .iter()
        .map(|v| u64::from(v.to_bits()) | (1 << 46))
        .collect()
}

/// One scale, 0.5: 5 -> 2.5 -> 2 and 7 -> 3.5 -> 4 (ties to even), -3 -> -1.5 -> -2,
/// 1000 -> 127, -1000 -> -128; relu clears the negatives.
#[test]
fn requant_rounds_ties_to_even_and_saturates() {
    let x = Tensor::from_vec(&[5], &[5i32, 7, -3, 1000, -1000]);
    let s = Tensor::from_vec(&[1], &req(&[0.5]));
    let t = run1("AscendRequant", &[], &[x.clone(), s.clone()]);
    assert_eq!(t.dtype, DType::I8);
    assert_eq!(t.slice::<i8>().unwrap(), [2, 4, -2, 127, -128]);
    let t = run1("AscendRequant", &[("relu_flag", Attr::Int(1))], &[x, s]);
    assert_eq!(t.slice::<i8>().unwrap(), [2, 4, 0, 127, 0]);
}

/// req_scale [1, 2, 1] broadcasts along dimension 1 of a [2, 2, 2] x.
#[test]
fn requant_broadcasts_req_scale() {
    let x = Tensor::from_vec(&[2, 2, 2], &[10i32, 20, 10, 20, -10, 30, -10, 30]);
    let s = Tensor::from_vec(&[1, 2, 1], &req(&[0.1, 2.0]));
    let t = run1("AscendRequant", &[], &[x, s]);
    assert_eq!(t.slice::<i8>().unwrap(), [1, 2, 20, 40, -1, 3, -20, 60]);
    let x = Tensor::from_vec(&[2, 3], &[1i32; 6]);
    let s = Tensor::from_vec(&[2], &req(&[1.0, 1.0]));
    let e = try_run("AscendRequant", &[], &[x, s], 1).unwrap_err();
    assert!(e.to_string().contains("broadcast"), "{e}");
}
