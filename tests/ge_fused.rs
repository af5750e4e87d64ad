//! A small CNN as GE writes it after fusion: float16 tensors, feature maps in NC1HWC0
//! with TransData at the edges, a Cast in, Conv2D filters stored as FRACTAL_Z, Pooling,
//! Eltwise, LeakyRelu, FullyConnection and SoftmaxV2, one output left in NC1HWC0. Read
//! from GE's text form, lowered (storage formats to their origins, `lower::layout`) and
//! run under all four executors with bit-identical outputs, it agrees with the same
//! network written in NCHW float32, and its NC1HWC0 output holds exactly the bytes of
//! that tensor converted by GE's transfer.

use half::f16;
use rt2::exec::ExecuteGraph;
use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::formats::Format;
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::seeded_f32;
use rt2::om::testdata_text::{DumpOp, dump_model, tensor_desc};
use rt2::om::text::print_text;
use rt2::ops::{DType, HostTensor};

#[path = "../benches/support/fused_cnn.rs"]
mod fused_cnn;
use fused_cnn::{Cnn, bytes, halfway, map, nchw, stored};

/// GE IR's proto dtype number of float16.
const DT_FLOAT16: i32 = 2;

/// The network's shapes: input [1, 3, 8, 8]; a stem conv 3 -> 4 channels, LeakyRelu,
/// 2x2 max pooling to [1, 4, 4, 4]; one residual block; FullyConnection to 10; SoftmaxV2.
const CNN: Cnn = Cnn {
    input: [1, 3, 8, 8],
    width: 4,
    blocks: 1,
    classes: 10,
};

fn lowered(text: &str, multi_thread: bool) -> ExecuteGraph {
    let file = read(text.as_bytes(), &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let opts = LowerOptions {
        multi_thread,
        ..LowerOptions::default()
    };
    lower(&file.root().model, &opts).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The outputs' bytes of one execution.
fn execute(eg: &ExecuteGraph, executor: ExecutorType, input: &HostTensor) -> Vec<HostTensor> {
    let device = Device::new(DeviceConfig::default());
    let options = ExecutorOptions {
        executor,
        ..ExecutorOptions::default()
    };
    let name = executor.name();
    let mut ex = ModelV2Executor::create(eg, &device, options)
        .unwrap_or_else(|e| panic!("{name}: create: {e}"));
    ex.load().unwrap_or_else(|e| panic!("{name}: load: {e}"));
    let mut out = Vec::new();
    ex.execute_sync(&[input], &mut out)
        .unwrap_or_else(|e| panic!("{name}: execute: {e}"));
    out
}

fn f16s(t: &HostTensor) -> Vec<f32> {
    assert_eq!(t.dtype, DType::F16);
    t.data
        .chunks_exact(2)
        .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect()
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    assert_eq!(t.dtype, DType::F32);
    t.data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// How many launches of op `op` the graph's Main has.
fn launches(eg: &ExecuteGraph, op: &str) -> usize {
    eg.main
        .nodes
        .iter()
        .filter(|n| n.kernel.starts_with("Launch"))
        .filter(|n| n.origin.as_ref().is_some_and(|o| o.op_type == op))
        .count()
}

#[test]
fn a_fused_float16_nc1hwc0_cnn_runs_as_its_nchw_float32_twin() {
    let input = HostTensor {
        dtype: DType::F32,
        shape: CNN.input.to_vec(),
        data: bytes(&halfway(seeded_f32(192, 9, 1.0)), false),
    };
    let text = CNN.text(true);
    let (plain, mt) = (lowered(&text, false), lowered(&text, true));
    // The TransData at the edges of the fused region convert nothing once the maps are
    // computed in their origin layout; the one left makes the NC1HWC0 output.
    assert_eq!(launches(&plain, "TransData"), 1, "{:#?}", plain.main.nodes);
    let seq = execute(&plain, ExecutorType::Sequential, &input);
    assert_eq!(seq.len(), 2);
    assert_eq!(seq[1].shape, [1, 1, 4, 4, 16]);
    for (eg, executor) in [
        (&plain, ExecutorType::Topological),
        (&plain, ExecutorType::TopologicalPriority),
        (&mt, ExecutorType::TopologicalMultiThread),
    ] {
        let got = execute(eg, executor, &input);
        for (g, s) in got.iter().zip(&seq) {
            assert_eq!(g.data, s.data, "{} differs from seq", executor.name());
        }
    }
    // The same network in NCHW float32.
    let twin = execute(
        &lowered(&CNN.text(false), false),
        ExecutorType::Sequential,
        &input,
    );
    let (probs, want) = (f16s(&seq[0]), f32s(&twin[0]));
    assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-2, "{probs:?}");
    for (g, t) in probs.iter().zip(&want) {
        assert!((g - t).abs() <= 2e-3, "fused {probs:?}\nNCHW {want:?}");
    }
    // The NC1HWC0 output: the twin's map rounded to float16 and converted as GE does,
    // its padded channels zero, within float16's accumulated rounding.
    let map16: Vec<u8> = bytes(&f32s(&twin[1]), true);
    let (_, want) = stored(&map16, &CNN.pooled(), Format::Nc1hwc0, DType::F16);
    let want: Vec<f32> = want
        .chunks_exact(2)
        .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect();
    let got = f16s(&seq[1]);
    assert_eq!(got.len(), want.len());
    for (i, (g, t)) in got.iter().zip(&want).enumerate() {
        let c = i % 16;
        if c >= 4 {
            assert_eq!(g.to_bits(), 0, "padded channel {c} at {i}");
        } else {
            assert!(
                (g - t).abs() <= 1e-2 * t.abs().max(1.0),
                "at {i}: {g} vs {t}"
            );
        }
    }
}

/// A graph input the caller hands in NC1HWC0 is converted to its origin after it (the
/// padded channels are never read as data), and a TransData between two plain layouts
/// still converts.
#[test]
fn a_storage_format_input_is_converted_once_and_plain_transposes_stay() {
    let (n, c, h, w) = (2i64, 3i64, 2i64, 3i64);
    let nchw_dims = [n, c, h, w];
    let nhwc_dims = [n, h, w, c];
    let values: Vec<f32> = (0..36).map(|i| i as f32 - 17.5).collect();
    let (stored_dims, stored_bytes) = stored(
        &bytes(&values, true),
        &nchw_dims,
        Format::Nc1hwc0,
        DType::F16,
    );
    let text = print_text(&dump_model(
        "edges",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(map(&nchw_dims, true)),
            DumpOp::new("relu", "Relu")
                .input("x:0")
                .in_desc(map(&nchw_dims, true))
                .out_desc(map(&nchw_dims, true)),
            DumpOp::new("to_nchw", "TransData")
                .input("relu:0")
                .attr_s("src_format", "NC1HWC0")
                .attr_s("dst_format", "NCHW")
                .in_desc(map(&nchw_dims, true))
                .out_desc(nchw(&nchw_dims, true)),
            DumpOp::new("to_nhwc", "TransData")
                .input("to_nchw:0")
                .attr_s("src_format", "NCHW")
                .attr_s("dst_format", "NHWC")
                .in_desc(nchw(&nchw_dims, true))
                .out_desc(tensor_desc(DT_FLOAT16, &nhwc_dims, "NHWC")),
            DumpOp::new("out", "NetOutput")
                .input("to_nhwc:0")
                .in_desc(tensor_desc(DT_FLOAT16, &nhwc_dims, "NHWC")),
        ],
    ));
    let eg = lowered(&text, false);
    assert_eq!(eg.inputs[0].shape, stored_dims);
    // x's conversion to NCHW and the transpose; the TransData back to NCHW is gone.
    assert_eq!(launches(&eg, "TransData"), 2);
    let input = HostTensor {
        dtype: DType::F16,
        shape: stored_dims,
        data: stored_bytes,
    };
    let got = f16s(&execute(&eg, ExecutorType::Sequential, &input)[0]);
    let mut want = Vec::new();
    for ni in 0..n {
        for hi in 0..h {
            for wi in 0..w {
                for ci in 0..c {
                    let v = values[(((ni * c + ci) * h + hi) * w + wi) as usize];
                    want.push(v.max(0.0));
                }
            }
        }
    }
    assert_eq!(got, want);
}
