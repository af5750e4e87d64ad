//! A quantized GE graph as ATC writes one: AscendQuant -> Conv2D (int8 x and filter,
//! int32 bias, offset_x) -> AscendDequant, read from a GE text dump, lowered and run; it
//! approximates the float convolution of the same data within the quantization error
//! computed from the scales.

use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::seeded_f32;
use rt2::ops::{DType, HostTensor};

fn desc(dtype: &str, dims: &[i64]) -> String {
    let dims: String = dims.iter().map(|d| format!("dim: {d} ")).collect();
    format!("dtype: {dtype} shape {{ {dims}}} layout: \"NCHW\"")
}

fn attr(key: &str, value: &str) -> String {
    format!("attr {{ key: \"{key}\" value {{ {value} }} }}")
}

fn int_list(v: &[i64]) -> String {
    let items: String = v.iter().map(|i| format!("i: {i} ")).collect();
    format!("list {{ {items}val_type: VT_LIST_INT }}")
}

fn op(name: &str, ty: &str, inputs: &[&str], attrs: &[String], out: &str) -> String {
    let ins: String = inputs.iter().map(|i| format!("input: \"{i}\" ")).collect();
    format!(
        "op {{ name: \"{name}\" type: \"{ty}\" {ins}{} output_desc {{ {out} }} }}\n",
        attrs.join(" ")
    )
}

fn const_op(name: &str, dtype: &str, dims: &[i64], bytes: &[u8]) -> String {
    let data: String = bytes.iter().map(|b| format!("\\{b:03o}")).collect();
    let d = desc(dtype, dims);
    let value = format!("t {{ desc {{ {d} }} data: \"{data}\" }}");
    op(name, "Const", &[], &[attr("value", &value)], &d)
}

/// The quantization: x's scale and offset, the filter's scale (powers of two, so the
/// dequantization scale is exact in every format).
const SX: f32 = 1.0 / 32.0;
const OFFSET: i64 = 3;
const SW: f32 = 1.0 / 64.0;

#[test]
fn quantized_conv_chain_approximates_the_float_conv() {
    // x [1, 2, 4, 4] in [-3, 3], filter [3, 2, 3, 3] in [-1, 1], bias [3]; pads 1.
    let x: Vec<f32> = seeded_f32(32, 11, 3.0);
    let w: Vec<f32> = seeded_f32(54, 12, 1.0);
    let b: Vec<f32> = vec![0.25, -0.5, 1.0];
    let wq: Vec<i8> = w.iter().map(|v| (v / SW).round_ties_even() as i8).collect();
    // The int32 bias folds in what padding with offset_x adds: OFFSET * sum(w[c]).
    let bq: Vec<i32> = (0..3)
        .map(|c| {
            let sum: i32 = wq[c * 18..][..18].iter().map(|&v| i32::from(v)).sum();
            (b[c] / (SX * SW)).round() as i32 - OFFSET as i32 * sum
        })
        .collect();
    let deq = u64::from((SX * SW).to_bits());
    let mut ops = format!(
        "op {{ name: \"x\" type: \"Data\" {} input_desc {{ {d} }} output_desc {{ {d} }} }}\n",
        attr("index", "i: 0"),
        d = desc("DT_FLOAT", &[1, 2, 4, 4])
    );
    let wbytes: Vec<u8> = wq.iter().map(|&v| v as u8).collect();
    ops += &const_op("w", "DT_INT8", &[3, 2, 3, 3], &wbytes);
    let bbytes: Vec<u8> = bq.iter().flat_map(|v| v.to_le_bytes()).collect();
    ops += &const_op("b", "DT_INT32", &[3], &bbytes);
    ops += &const_op("deq", "DT_UINT64", &[1], &deq.to_le_bytes());
    ops += &op(
        "quant",
        "AscendQuant",
        &["x:0"],
        &[
            attr("scale", &format!("f: {}", 1.0 / SX)),
            attr("offset", &format!("f: {OFFSET}")),
        ],
        &desc("DT_INT8", &[1, 2, 4, 4]),
    );
    ops += &op(
        "conv",
        "Conv2D",
        &["quant:0", "w:0", "b:0"],
        &[
            attr("strides", &int_list(&[1, 1, 1, 1])),
            attr("pads", &int_list(&[1, 1, 1, 1])),
            attr("data_format", "s: \"NCHW\""),
            attr("offset_x", &format!("i: {OFFSET}")),
        ],
        &desc("DT_INT32", &[1, 3, 4, 4]),
    );
    ops += &op(
        "dequant",
        "AscendDequant",
        &["conv:0", "deq:0"],
        &[],
        &desc("DT_FLOAT", &[1, 3, 4, 4]),
    );
    ops += &format!(
        "op {{ name: \"out\" type: \"NetOutput\" input: \"dequant:0\" input_desc {{ {} }} }}\n",
        desc("DT_FLOAT", &[1, 3, 4, 4])
    );
    let text =
        format!("name: \"q\" graph {{ name: \"q\" input: \"x:0\" output: \"dequant:0\"\n{ops}}}\n");
    let file = read(text.as_bytes(), &ReadOptions::default()).expect("reads");
    let eg = lower(&file.root().model, &LowerOptions::default()).expect("lowers");
    let device = Device::new(DeviceConfig::default());
    let options = ExecutorOptions {
        executor: ExecutorType::Sequential,
        ..ExecutorOptions::default()
    };
    let mut ex = ModelV2Executor::create(&eg, &device, options).expect("creates");
    ex.load().expect("loads");
    let input = HostTensor {
        dtype: DType::F32,
        shape: vec![1, 2, 4, 4],
        data: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let mut out = Vec::new();
    ex.execute_sync(&[&input], &mut out).expect("executes");
    let got: Vec<f32> = out[0]
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(got.len(), 48);
    // The float convolution, and per output the bound of the quantization error: each
    // product x * w is off by at most |x| SW/2 + |w'| SX/2 (w' the quantized weight's
    // real value), the bias by SX SW / 2.
    for c in 0..3 {
        for i in 0..4 {
            for j in 0..4 {
                let (mut want, mut bound) = (b[c], SX * SW / 2.0 + 1e-4);
                for ci in 0..2 {
                    for ki in 0..3 {
                        for kj in 0..3 {
                            let (r, s) = (i + ki, j + kj);
                            if !(1..=4).contains(&r) || !(1..=4).contains(&s) {
                                continue;
                            }
                            let xv = x[ci * 16 + (r - 1) * 4 + (s - 1)];
                            let wi = ((c * 2 + ci) * 3 + ki) * 3 + kj;
                            want += xv * w[wi];
                            let wr = f32::from(wq[wi]) * SW;
                            bound += xv.abs() * SW / 2.0 + wr.abs() * SX / 2.0;
                        }
                    }
                }
                let g = got[c * 16 + i * 4 + j];
                assert!(
                    (g - want).abs() <= bound,
                    "y[{c}][{i}][{j}] = {g}, float {want}, bound {bound}"
                );
            }
        }
    }
}
