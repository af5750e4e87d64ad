//! A small CNN as GE writes it after fusion: float16 tensors, feature maps in NC1HWC0
//! with TransData at the edges, a Cast in, Conv2D filters stored as FRACTAL_Z, Pooling,
//! Eltwise, LeakyRelu, FullyConnection and SoftmaxV2, one output left in NC1HWC0. Read
//! from GE's text form, lowered (storage formats to their origins, `lower::layout`) and
//! run under all four executors with bit-identical outputs, it agrees with the same
//! network written in NCHW float32, and its NC1HWC0 output holds exactly the bytes of
//! that tensor converted by GE's transfer.
//!
//! The same network in ONNX is checked against ONNX Runtime's outputs, kept in
//! `fixtures/fused_cnn` in the ONNX backend-test layout (`model.onnx`,
//! `test_data_set_0/input_0.pb`, `output_0.pb`, `output_1.pb`): the ONNX form under rt2
//! within float32 rounding, the fused float16 GE form within float16's. The model and
//! input are what this file builds (a test fails when they differ);
//! `RT2_BLESS=1 cargo test --test ge_fused` rewrites them and runs
//! `tools/ort_golden.py` (the Python of `tools/pyenv.sh`) for the outputs. Nothing else
//! here needs Python.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use half::f16;
use prost::Message;
use rt2::conform::{self, Case, Outcome, Runner, Tolerance};
use rt2::exec::ExecuteGraph;
use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::formats::{Format, StorageFormat, transfer};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::DataType;
use rt2::om::file::{ReadOptions, read};
use rt2::om::graph::Shape;
use rt2::om::onnx::builder::{F32, OnnxBuilder, attr_f, attr_i, attr_ints, seeded_f32, tensor_f32};
use rt2::om::testdata_text::{DumpOp, dump_model, tensor_desc};
use rt2::om::text::print_text;
use rt2::ops::{DType, HostTensor, OpRegistry};
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

/// `text` lowered (for topo-mt with the multi-thread passes) and run on `input` under all
/// four executors, which must give the same bytes: the graph lowered for the others, and
/// the outputs.
fn run_everywhere(text: &str, input: &HostTensor) -> (ExecuteGraph, Vec<HostTensor>) {
    let (plain, mt) = (lowered(text, false), lowered(text, true));
    let seq = execute(&plain, ExecutorType::Sequential, input);
    for (eg, executor) in [
        (&plain, ExecutorType::Topological),
        (&plain, ExecutorType::TopologicalPriority),
        (&mt, ExecutorType::TopologicalMultiThread),
    ] {
        let got = execute(eg, executor, input);
        assert_eq!(got.len(), seq.len());
        for (g, s) in got.iter().zip(&seq) {
            assert_eq!(g.data, s.data, "{} differs from seq", executor.name());
        }
    }
    (plain, seq)
}

/// The network's input image: seeded values exact in float16, so the fused form's Cast
/// loses nothing.
fn image() -> HostTensor {
    HostTensor {
        dtype: DType::F32,
        shape: CNN.input.to_vec(),
        data: bytes(&halfway(seeded_f32(192, 9, 1.0)), false).into(),
    }
}

#[test]
fn a_fused_float16_nc1hwc0_cnn_runs_as_its_nchw_float32_twin() {
    let input = image();
    let (plain, seq) = run_everywhere(&CNN.text(true), &input);
    // The TransData at the edges of the fused region convert nothing once the maps are
    // computed in their origin layout; the one left makes the NC1HWC0 output.
    assert_eq!(launches(&plain, "TransData"), 1, "{:#?}", plain.main.nodes);
    // The FullyConnection (a 4-D x, so launched as itself) reads its constant float16
    // weight widened to float32 once, at lowering.
    let fc = plain
        .main
        .nodes
        .iter()
        .find(|n| rt2::exec::kernel_types::is_op_launch(&n.kernel) && n.name.starts_with("fc/"))
        .expect("the fc launch");
    assert_eq!(
        fc.attrs.get("_in_dtypes"),
        Some(&rt2::ops::Attr::DTypes(vec![
            Some(DType::F16),
            Some(DType::F32),
            Some(DType::F16)
        ]))
    );
    assert_eq!(seq.len(), 2);
    assert_eq!(seq[1].shape, [1, 1, 4, 4, 16]);
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
        data: stored_bytes.into(),
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
/// and they are the convolution of the pre-processed image computed here. The crop is
/// written out, then given as size 0 (as ATC's RGB888 example configures it): the model
/// input's size, the Aipp output descriptor's H and W, for the same bytes.
#[test]
fn an_aipp_front_end_feeds_a_fused_convolution() {
    for crop_size in [4, 0] {
        aipp_front_end(crop_size);
    }
}

fn aipp_front_end(crop_size: i64) {
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
        ("crop_size_w", V::I(crop_size)),
        ("crop_size_h", V::I(crop_size)),
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
    let input = HostTensor {
        dtype: DType::U8,
        shape: vec![1, h, src_w, 3],
        data: image.clone().into(),
    };
    let (plain, seq) = run_everywhere(&text, &input);
    assert_eq!(launches(&plain, "Aipp"), 1);
    assert_eq!(seq[0].shape, [1, 1, h, w, 16]);
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

/// The network's ONNX form: its NCHW float32 twin as ONNX ops (Conv, LeakyRelu, MaxPool,
/// Add, Flatten, Gemm, Softmax) on the same weights ([`Cnn::weights`]). Outputs `prob`
/// `[N, classes]` (FullyConnection's `[1, classes, 1, 1]` for one image holds the same
/// values) and `map`, the last block's map, NCHW.
fn onnx_form(cnn: &Cnn) -> Vec<u8> {
    let dims = |d: &[i64]| d.iter().map(|&v| v.into()).collect::<Vec<_>>();
    let mut b = OnnxBuilder::new("fused_cnn")
        .opset("", 17)
        .input("x", F32, &dims(&cnn.input))
        .output("prob", F32, &dims(&[cnn.input[0], cnn.classes]))
        .output("map", F32, &dims(&cnn.pooled()));
    for w in cnn.weights() {
        b = b.initializer(tensor_f32(&w.name, &w.dims, &w.values));
    }
    let conv = || vec![attr_ints("pads", &[1, 1, 1, 1])];
    let lrelu = || vec![attr_f("alpha", 0.1)];
    b = b
        .node("Conv", &["x", "w0", "b0"], &["conv0"], conv())
        .node("LeakyRelu", &["conv0"], &["lrelu0"], lrelu())
        .node(
            "MaxPool",
            &["lrelu0"],
            &["pool"],
            vec![
                attr_ints("kernel_shape", &[2, 2]),
                attr_ints("strides", &[2, 2]),
            ],
        );
    let mut at = "pool".to_string();
    for k in 1..=cnn.blocks {
        let sum = if k == cnn.blocks {
            "map".to_string()
        } else {
            format!("sum{k}")
        };
        let (ca, la, cb) = (
            format!("conv{k}a"),
            format!("lrelu{k}"),
            format!("conv{k}b"),
        );
        b = b
            .node("Conv", &[&at, &format!("w{k}a")], &[&ca], conv())
            .node("LeakyRelu", &[&ca], &[&la], lrelu())
            .node("Conv", &[&la, &format!("w{k}b")], &[&cb], conv())
            .node("Add", &[&at, &cb], &[&sum], vec![]);
        at = sum;
    }
    b.node("Flatten", &[&at], &["flat"], vec![])
        .node(
            "Gemm",
            &["flat", "wfc", "bfc"],
            &["fc"],
            vec![attr_i("transB", 1)],
        )
        .node("Softmax", &["fc"], &["prob"], vec![attr_i("axis", 1)])
        .build()
}

/// The golden folder: `fixtures/fused_cnn`, ONNX Runtime's outputs for [`onnx_form`] on
/// [`image`]. With `RT2_BLESS=1`, the model and input are written first and
/// `tools/ort_golden.py` makes the outputs (once per test run).
fn golden() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = root.join("fixtures/fused_cnn");
        if std::env::var_os("RT2_BLESS").is_some_and(|v| v == "1") {
            bless(root, &dir);
        }
        dir
    })
}

/// What the golden folder's model and input must be: (file, bytes).
fn golden_sources() -> [(&'static str, Vec<u8>); 2] {
    let x = image();
    let values: Vec<f32> = x
        .data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    [
        ("model.onnx", onnx_form(&CNN)),
        (
            "test_data_set_0/input_0.pb",
            tensor_f32("x", &CNN.input, &values).encode_to_vec(),
        ),
    ]
}

fn bless(root: &Path, dir: &Path) {
    std::fs::create_dir_all(dir.join("test_data_set_0")).expect("creating the golden folder");
    for (file, bytes) in golden_sources() {
        std::fs::write(dir.join(file), bytes).unwrap_or_else(|e| panic!("writing {file}: {e}"));
    }
    let run = |cmd: &mut std::process::Command| {
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{cmd:?} failed:\n{stderr}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let python = run(std::process::Command::new("bash").arg(root.join("tools/pyenv.sh")));
    let said = run(std::process::Command::new(python)
        .arg(root.join("tools/ort_golden.py"))
        .arg(dir));
    eprintln!("{said}");
}

/// Golden output `k` (a float32 tensor): its shape and values.
fn golden_output(k: usize) -> (Vec<i64>, Vec<f32>) {
    let path = golden().join(format!("test_data_set_0/output_{k}.pb"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let t = rt2::om::onnx::read_tensor(&bytes, &path.display().to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.desc.dtype, DataType::Float32, "{}", path.display());
    let Shape::Dims(dims) = t.desc.shape else {
        panic!("{}: no shape", path.display());
    };
    let values = t
        .data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    (dims, values)
}

/// The golden model and input are the ones this file builds: a change to the network
/// (its weights, ops or sizes) or to the input shows as a stale golden, to be blessed.
#[test]
fn the_onnx_runtime_golden_is_of_this_network() {
    for (file, want) in golden_sources() {
        let path = golden().join(file);
        let got = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            got == want,
            "{} is stale: the network or its input changed; regenerate the golden with \
             RT2_BLESS=1 cargo test --test ge_fused (needs tools/pyenv.sh's Python)",
            path.display()
        );
    }
}

/// The ONNX form under rt2, every executor, matches ONNX Runtime within float32 rounding:
/// `conform`'s `tight` tolerance, `|got - want| <= 1e-6 + 1e-5 * |want|`. The two sum
/// each convolution and the Gemm in different orders; a float32 sum of the 36 or 64
/// products here differs between orders by a few units in the last place of its larger
/// terms (about 1e-7 relative), well inside it.
#[test]
fn the_onnx_form_matches_onnx_runtime_in_float32() {
    let case = Case {
        name: "fused_cnn".into(),
        dir: golden().to_path_buf(),
    };
    let ops = Arc::new(OpRegistry::new());
    for executor in [
        ExecutorType::Sequential,
        ExecutorType::Topological,
        ExecutorType::TopologicalPriority,
        ExecutorType::TopologicalMultiThread,
    ] {
        match conform::run_case_with(&case, &ops, Runner::Engine(executor)) {
            Outcome::Pass(t) if t <= Tolerance::Tight => {}
            o => panic!("{}: {o}", executor.name()),
        }
    }
}

/// The fused float16 GE form (all four executors bit-identical) matches ONNX Runtime's
/// float32 outputs within float16 rounding.
///
/// The fused graph stores every tensor as float16 and accumulates each convolution, the
/// FullyConnection and the softmax in float32 or wider, rounding each op's output once;
/// the input and weights are exact in float16, so those roundings are the whole
/// difference. Each errs by at most u = 2^-11 of the value rounded. An error carried
/// through a weighted sum grows by the sum's rms gain, `sqrt(sum w^2)` (rounding errors
/// are independent), which is about 1 or less for every layer here (0.4 to 1.0, checked
/// below to stay under 1.1), so the errors on a path add up about once per rounding:
///
/// - the last map: six roundings (conv0, lrelu0, conv1a, lrelu1, conv1b, the sum;
///   pooling selects), each at most u times the magnitude rounded, which is about the
///   map's largest, M; an element is held to that, not to its own value, since a sum of
///   terms of size M can cancel to zero: tolerance `e_map = 8 u M`, a third to spare
///   for intermediate maps larger than the last;
/// - the logits: the map's error through the FullyConnection (times its gain g) plus
///   their own rounding, `e_z = g e_map + u Z`, Z bounding the logits (`S M + max |bias|`, S the largest sum
///   of a row's weight magnitudes);
/// - a probability p moves by at most `2 p max |dz|` (softmax's derivative) and is
///   rounded once: tolerance `(2 e_z + u) p`, plus half float16's smallest subnormal.
#[test]
fn the_fused_float16_form_matches_onnx_runtime_within_float16_rounding() {
    let u = 2f32.powi(-11);
    let weights = CNN.weights();
    let weight = |name: &str| {
        weights
            .iter()
            .find(|w| w.name == name)
            .expect("a weight of the network")
    };
    // Each layer's largest rms gain (over its outputs), and the FullyConnection's
    // largest row sum of magnitudes.
    let rows = |name: &str| -> Vec<Vec<f32>> {
        let w = weight(name);
        w.values
            .chunks(w.values.len() / w.dims[0] as usize)
            .map(<[f32]>::to_vec)
            .collect()
    };
    let gain = |name: &str| {
        rows(name)
            .iter()
            .map(|r| r.iter().map(|w| w * w).sum::<f32>().sqrt())
            .fold(0f32, f32::max)
    };
    for name in ["w0", "w1a", "w1b", "wfc"] {
        let g = gain(name);
        assert!(
            g < 1.1,
            "{name}'s rms gain {g}: the tolerance assumes about 1"
        );
    }
    let s = rows("wfc")
        .iter()
        .map(|r| r.iter().map(|w| w.abs()).sum::<f32>())
        .fold(0f32, f32::max);
    let bias = weight("bfc")
        .values
        .iter()
        .fold(0f32, |a, b| a.max(b.abs()));

    let (_, seq) = run_everywhere(&CNN.text(true), &image());
    let (shape, map) = golden_output(1);
    assert_eq!(shape, CNN.pooled());
    let m = map.iter().fold(0f32, |a, v| a.max(v.abs()));
    let e_map = 8.0 * u * m;
    let got = nchw_of(&seq[1], &CNN.pooled());
    assert_eq!(got.len(), map.len());
    for (i, (g, t)) in got.iter().zip(&map).enumerate() {
        assert!(
            (g - t).abs() <= e_map,
            "map element {i}: {g} vs ONNX Runtime's {t} (tolerance {e_map})"
        );
    }
    let e_z = gain("wfc") * e_map + u * (s * m + bias);
    let (shape, probs) = golden_output(0);
    assert_eq!(shape, [1, CNN.classes]);
    let got = f16s(&seq[0]);
    assert_eq!(got.len(), probs.len());
    for (i, (g, p)) in got.iter().zip(&probs).enumerate() {
        let tol = (2.0 * e_z + u) * p + 2f32.powi(-25);
        assert!(
            (g - p).abs() <= tol,
            "probability {i}: {g} vs ONNX Runtime's {p} (tolerance {tol})\n{got:?}\n{probs:?}"
        );
    }
}

/// An NC1HWC0 float16 output of NCHW `dims`, as NCHW float32 values: GE's transfer back.
fn nchw_of(t: &HostTensor, dims: &[i64]) -> Vec<f32> {
    let usizes = |d: &[i64]| -> Vec<usize> { d.iter().map(|&v| v as usize).collect() };
    let plain = usizes(dims);
    let mut out = vec![0u8; plain.iter().product::<usize>() * 2];
    transfer(
        (
            StorageFormat::plain(Format::Nc1hwc0),
            &usizes(&t.shape),
            &t.data,
        ),
        (StorageFormat::plain(Format::Nchw), &plain, &mut out),
        DType::F16,
    )
    .expect("NC1HWC0 to NCHW");
    out.chunks_exact(2)
        .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect()
}

/// `rt2 compare` of the NCHW float32 twin (reference) against the fused float16 graph:
/// every op of the twin is matched by name, each within float16's default tolerance and
/// pointing the same way (cosine), and the fused graph's own edge ops (the input's Cast
/// and TransData, the NC1HWC0 output's conversion) are the only ops without a twin. A
/// wrong LeakyRelu slope planted in the fused graph is found at that op.
#[test]
fn rt2_compare_matches_the_fused_float16_cnn_to_its_float32_twin_op_by_op() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let twin = write("twin.txt", &CNN.text(false));
    let fused_text = CNN.text(true);
    let fused = write("fused.txt", &fused_text);
    let compare = |a: &str, b: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rt2"))
            .args(["compare", a, b, "--format", "json"])
            .output()
            .unwrap()
    };
    let out = compare(&twin, &fused);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["only_in_reference"], serde_json::json!([]), "{j:#}");
    let ops: Vec<&str> = j["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["within"], true, "{r:#}");
            assert_eq!(r["candidate"]["dtype"], "float16", "{r:#}");
            assert!(r["cosine"].as_f64().unwrap() > 0.9999, "{r:#}");
            r["candidate_op"].as_str().unwrap()
        })
        .collect();
    // The float32 twin's conv0 and conv1a apply the LeakyRelu after them (lowering fuses
    // an activation into a float32 convolution), so their own outputs exist only in the
    // float16 graph, which keeps them apart.
    for op in [
        "lrelu0", "pool", "lrelu1", "conv1b", "sum1", "fc", "softmax",
    ] {
        assert!(ops.contains(&op), "{op} not compared: {ops:?}");
    }
    for op in j["only_in_candidate"].as_array().unwrap() {
        let op = op.as_str().unwrap();
        assert!(
            ["cast", "td_in", "td_out", "out", "conv0", "conv1a"]
                .iter()
                .any(|e| op.starts_with(e)),
            "{op} has no twin: {j:#}"
        );
    }

    // The slope GE reads on LeakyRelu, changed on the fused graph's block.
    let planted = fused_text.replacen("negative_slope", "negative_slope_unused", 1);
    assert_ne!(planted, fused_text);
    let planted = write("planted.txt", &planted);
    let out = compare(&twin, &planted);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = j["first_divergence"]["candidate_op"].as_str().unwrap();
    assert!(first.starts_with("lrelu"), "{j:#}");
}
