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
use rt2::proto::ge_ir::attr_def::Value as V;

#[path = "../benches/support/fused_cnn.rs"]
mod fused_cnn;
use fused_cnn::{Cnn, bytes, desc, halfway, konst, map, nchw, stored};

/// GE IR's proto dtype number of float16.
const DT_FLOAT16: i32 = 2;
const DT_UINT8: i32 = 4;

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
    assert_nc1hwc0(&seq[1], &f32s(&twin[1]), &CNN.pooled());
}

/// `got`, an NC1HWC0 float16 output, holds NCHW `want` (of `dims`) rounded to float16
/// and converted as GE does, within float16's accumulated rounding, its padded channels
/// zero.
fn assert_nc1hwc0(got: &HostTensor, want: &[f32], dims: &[i64]) {
    let (_, want) = stored(&bytes(want, true), dims, Format::Nc1hwc0, DType::F16);
    let want: Vec<f32> = want
        .chunks_exact(2)
        .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect();
    let got = f16s(got);
    assert_eq!(got.len(), want.len());
    for (i, (g, t)) in got.iter().zip(&want).enumerate() {
        let c = i % 16;
        if c as i64 >= dims[1] {
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

/// The front of a model ATC built with `--insert_op_conf`: a uint8 NHWC image, Aipp
/// (static, RGB888 with a crop, BGR swap and per-channel mean and scale) making the
/// float16 NC1HWC0 map the first Conv2D (FRACTAL_Z filter) reads, as GE dumps it: the
/// configuration in the node's NamedAttrs `aipp`. Every executor gives the same bytes,
/// and they are the convolution of the pre-processed image computed here.
#[test]
fn an_aipp_front_end_feeds_a_fused_convolution() {
    let (h, w, src_w) = (4i64, 4i64, 5i64);
    let image: Vec<u8> = (0..h * src_w * 3).map(|i| (i * 37 % 251) as u8).collect();
    let mean = [104i64, 117, 123];
    let var = [0.017f32, 0.0175, 0.0171];
    let map_dims = [1, 3, h, w];
    let y_dims = [1, 4, h, w];
    let wts = halfway(seeded_f32(108, 11, 0.3));
    let config = vec![
        ("aipp_mode", V::I(1)),
        ("related_input_rank", V::I(0)),
        ("input_format", V::I(3)),
        ("csc_switch", V::B(false)),
        ("rbuv_swap_switch", V::B(true)),
        ("ax_swap_switch", V::B(false)),
        ("src_image_size_w", V::I(src_w)),
        ("src_image_size_h", V::I(h)),
        ("crop", V::B(true)),
        ("load_start_pos_w", V::I(1)),
        ("load_start_pos_h", V::I(0)),
        ("crop_size_w", V::I(w)),
        ("crop_size_h", V::I(h)),
        ("resize", V::B(false)),
        ("padding", V::B(false)),
        ("mean_chn_0", V::I(mean[0])),
        ("mean_chn_1", V::I(mean[1])),
        ("mean_chn_2", V::I(mean[2])),
        ("min_chn_0", V::F(0.0)),
        ("var_reci_chn_0", V::F(var[0])),
        ("var_reci_chn_1", V::F(var[1])),
        ("var_reci_chn_2", V::F(var[2])),
    ];
    let fz = Format::FractalZ;
    let nhwc = tensor_desc(DT_UINT8, &[1, h, src_w, 3], "NHWC");
    let text = print_text(&dump_model(
        "aipp",
        vec![
            DumpOp::new("data", "Data")
                .attr_i("index", 0)
                .out_desc(nhwc.clone()),
            DumpOp::new("data_0_huawei_aipp", "Aipp")
                .input("data:0")
                .attr_named("aipp", config)
                .attr_s("aipp_config_path", "./aipp.cfg")
                .attr_i("current_aipp_index", 0)
                .in_desc(nhwc.clone())
                .out_desc(map(&map_dims, true)),
            konst("w", &wts, &[4, 3, 3, 3], true, fz),
            DumpOp::new("conv", "Conv2D")
                .input("data_0_huawei_aipp:0")
                .input("w:0")
                .attr_ints("strides", &[1, 1, 1, 1])
                .attr_ints("pads", &[1, 1, 1, 1])
                .attr_ints("dilations", &[1, 1, 1, 1])
                .attr_s("data_format", "NCHW")
                .in_desc(map(&map_dims, true))
                .in_desc(desc(&[4, 3, 3, 3], true, fz))
                .out_desc(map(&y_dims, true)),
            DumpOp::new("out", "NetOutput")
                .input("conv:0")
                .in_desc(map(&y_dims, true)),
        ],
    ));
    let (plain, mt) = (lowered(&text, false), lowered(&text, true));
    assert_eq!(launches(&plain, "Aipp"), 1);
    let input = HostTensor {
        dtype: DType::U8,
        shape: vec![1, h, src_w, 3],
        data: image.clone(),
    };
    let seq = execute(&plain, ExecutorType::Sequential, &input);
    assert_eq!(seq[0].shape, [1, 1, h, w, 16]);
    for (eg, executor) in [
        (&plain, ExecutorType::Topological),
        (&plain, ExecutorType::TopologicalPriority),
        (&mt, ExecutorType::TopologicalMultiThread),
    ] {
        let got = execute(eg, executor, &input);
        assert_eq!(
            got[0].data,
            seq[0].data,
            "{} differs from seq",
            executor.name()
        );
    }
    // The pre-processed map: BGR from the crop at column 1, `(p - mean) * var_reci` with
    // var_reci as the float16 the AIPP unit holds, rounded to float16.
    let (hu, wu, swu) = (h as usize, w as usize, src_w as usize);
    let mut x = vec![0f64; 3 * hu * wu];
    for c in 0..3 {
        for yy in 0..hu {
            for xx in 0..wu {
                let p = f32::from(image[(yy * swu + 1 + xx) * 3 + 2 - c]);
                let v = (p - mean[c] as f32) * f16::from_f32(var[c]).to_f32();
                x[(c * hu + yy) * wu + xx] = f64::from(f16::from_f32(v).to_f32());
            }
        }
    }
    // The 3x3 convolution with padding 1, in float64.
    let mut y = vec![0f32; 4 * hu * wu];
    for o in 0..4 {
        for yy in 0..hu as i64 {
            for xx in 0..wu as i64 {
                let mut acc = 0f64;
                for c in 0..3 {
                    for ky in 0..3i64 {
                        for kx in 0..3i64 {
                            let (sy, sx) = (yy + ky - 1, xx + kx - 1);
                            if sy < 0 || sx < 0 || sy >= h || sx >= w {
                                continue;
                            }
                            let xv = x[(c * hu + sy as usize) * wu + sx as usize];
                            let wv = wts[((o * 3 + c) * 3 + ky as usize) * 3 + kx as usize];
                            acc += xv * f64::from(wv);
                        }
                    }
                }
                y[(o * hu + yy as usize) * wu + xx as usize] = acc as f32;
            }
        }
    }
    assert_nc1hwc0(&seq[0], &y, &y_dims);
}
