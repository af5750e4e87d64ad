//! A small NCHW float32 CNN written in GE's own op types (Conv2D, BNInference, LeakyRelu,
//! Pooling, Eltwise with a skip, FullyConnection, SoftmaxV2) as a GE text dump: it reads,
//! lowers and runs under all four executors with bit-identical outputs, and agrees within
//! 1e-5 with the same network built from ONNX ops and run by rt2.

use rt2::exec::ExecuteGraph;
use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::{OnnxBuilder, attr_f, attr_i, attr_ints, seeded_f32, tensor_f32};
use rt2::ops::{DType, HostTensor};

/// A float32 tensor descriptor of `dims`, in GE's text form.
fn desc(dims: &[i64], layout: &str) -> String {
    let dims: String = dims.iter().map(|d| format!("dim: {d} ")).collect();
    format!("dtype: DT_FLOAT shape {{ {dims}}} layout: \"{layout}\"")
}

/// An attribute in GE's text form.
fn attr(key: &str, value: &str) -> String {
    format!("attr {{ key: \"{key}\" value {{ {value} }} }}")
}

fn int_list(v: &[i64]) -> String {
    let items: String = v.iter().map(|i| format!("i: {i} ")).collect();
    format!("list {{ {items}val_type: VT_LIST_INT }}")
}

/// The GE network's weights, by name, with their shapes and values.
struct Weights(Vec<(&'static str, Vec<i64>, Vec<f32>)>);

impl Weights {
    fn new() -> Self {
        let shapes: [(&str, &[i64], f32); 10] = [
            ("w1", &[4, 3, 3, 3], 0.3),
            ("b1", &[4], 0.1),
            ("mean", &[4], 0.1),
            ("var", &[4], 0.0),
            ("gamma", &[4], 0.5),
            ("beta", &[4], 0.2),
            ("w2", &[4, 4, 3, 3], 0.2),
            ("wfc", &[10, 64], 0.2),
            ("bfc", &[10], 0.1),
            ("momentum", &[1], 0.0),
        ];
        Weights(
            shapes
                .iter()
                .enumerate()
                .map(|(k, &(name, dims, scale))| {
                    let n = dims.iter().product::<i64>() as usize;
                    let mut v = seeded_f32(n, 100 + k as u64, scale);
                    if name == "var" {
                        v = (0..n).map(|i| 0.5 + 0.25 * i as f32).collect();
                    }
                    if name == "momentum" {
                        v = vec![1.0];
                    }
                    (name, dims.to_vec(), v)
                })
                .collect(),
        )
    }
}

/// One op of the GE text dump.
fn op(name: &str, ty: &str, inputs: &[&str], attrs: &[String], out: &[i64]) -> String {
    let ins: String = inputs.iter().map(|i| format!("input: \"{i}\" ")).collect();
    format!(
        "op {{ name: \"{name}\" type: \"{ty}\" {ins}{} output_desc {{ {} }} }}\n",
        attrs.join(" "),
        desc(out, "NCHW")
    )
}

fn const_op(name: &str, dims: &[i64], values: &[f32]) -> String {
    let bytes: String = values
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .map(|b| format!("\\{b:03o}"))
        .collect();
    let value = format!("t {{ desc {{ {} }} data: \"{bytes}\" }}", desc(dims, "ND"));
    op(name, "Const", &[], &[attr("value", &value)], dims)
}

/// The CNN in GE's op types, as a GE text dump.
fn ge_text(w: &Weights) -> String {
    let mut ops = String::new();
    ops += &format!(
        "op {{ name: \"x\" type: \"Data\" {} input_desc {{ {d} }} output_desc {{ {d} }} }}\n",
        attr("index", "i: 0"),
        d = desc(&[1, 3, 8, 8], "NCHW")
    );
    for (name, dims, v) in &w.0 {
        ops += &const_op(name, dims, v);
    }
    let nchw = attr("data_format", "s: \"NCHW\"");
    let ones = attr("strides", &int_list(&[1, 1, 1, 1]));
    let pads = attr("pads", &int_list(&[1, 1, 1, 1]));
    ops += &op(
        "conv1",
        "Conv2D",
        &["x:0", "w1:0", "b1:0"],
        &[ones.clone(), pads.clone(), nchw.clone()],
        &[1, 4, 8, 8],
    );
    ops += &op(
        "bn",
        "BNInference",
        &[
            "conv1:0",
            "mean:0",
            "var:0",
            "momentum:0",
            "gamma:0",
            "beta:0",
        ],
        &[attr("epsilon", "f: 0.001")],
        &[1, 4, 8, 8],
    );
    ops += &op(
        "act",
        "LeakyRelu",
        &["bn:0"],
        &[attr("negative_slope", "f: 0.1")],
        &[1, 4, 8, 8],
    );
    ops += &op(
        "pool",
        "Pooling",
        &["act:0"],
        &[
            attr("mode", "i: 0"),
            attr("window", &int_list(&[2, 2])),
            attr("stride", &int_list(&[2, 2])),
        ],
        &[1, 4, 4, 4],
    );
    ops += &op(
        "conv2",
        "Conv2D",
        &["pool:0", "w2:0"],
        &[ones, pads, nchw],
        &[1, 4, 4, 4],
    );
    ops += &op(
        "skip",
        "Eltwise",
        &["pool:0", "conv2:0"],
        &[attr("N", "i: 2"), attr("mode", "i: 1")],
        &[1, 4, 4, 4],
    );
    ops += &op(
        "fc",
        "FullyConnection",
        &["skip:0", "wfc:0", "bfc:0"],
        &[attr("num_output", "i: 10")],
        &[1, 10, 1, 1],
    );
    ops += &op(
        "prob",
        "SoftmaxV2",
        &["fc:0"],
        &[attr("axes", &int_list(&[1]))],
        &[1, 10, 1, 1],
    );
    ops += &format!(
        "op {{ name: \"out\" type: \"NetOutput\" input: \"prob:0\" input_desc {{ {} }} }}\n",
        desc(&[1, 10, 1, 1], "NCHW")
    );
    format!(
        "name: \"ge_cnn\" graph {{ name: \"ge_cnn\" input: \"x:0\" output: \"prob:0\"\n{ops}}}\n"
    )
}

/// The same network in ONNX ops.
fn onnx_model(w: &Weights) -> Vec<u8> {
    let mut b = OnnxBuilder::new("onnx_cnn")
        .opset("", 17)
        .input("x", 1, &[1.into(), 3.into(), 8.into(), 8.into()])
        .output("prob", 1, &[1.into(), 10.into()]);
    for (name, dims, v) in &w.0 {
        b = b.initializer(tensor_f32(name, dims, v));
    }
    let pads = || attr_ints("pads", &[1, 1, 1, 1]);
    b.node("Conv", &["x", "w1", "b1"], &["conv1"], vec![pads()])
        .node(
            "BatchNormalization",
            &["conv1", "gamma", "beta", "mean", "var"],
            &["bn"],
            vec![attr_f("epsilon", 0.001)],
        )
        .node("LeakyRelu", &["bn"], &["act"], vec![attr_f("alpha", 0.1)])
        .node(
            "MaxPool",
            &["act"],
            &["pool"],
            vec![
                attr_ints("kernel_shape", &[2, 2]),
                attr_ints("strides", &[2, 2]),
            ],
        )
        .node("Conv", &["pool", "w2"], &["conv2"], vec![pads()])
        .node("Add", &["pool", "conv2"], &["skip"], vec![])
        .node("Flatten", &["skip"], &["flat"], vec![])
        .node(
            "Gemm",
            &["flat", "wfc", "bfc"],
            &["fc"],
            vec![attr_i("transB", 1)],
        )
        .node("Softmax", &["fc"], &["prob"], vec![attr_i("axis", -1)])
        .build()
}

fn lowered(bytes: &[u8], multi_thread: bool) -> ExecuteGraph {
    let file = read(bytes, &ReadOptions::default()).expect("reads");
    lower(
        &file.root().model,
        &LowerOptions {
            multi_thread,
            ..LowerOptions::default()
        },
    )
    .expect("lowers")
}

fn execute(eg: &ExecuteGraph, executor: ExecutorType, input: &HostTensor) -> Vec<f32> {
    let device = Device::new(DeviceConfig::default());
    let options = ExecutorOptions {
        executor,
        ..ExecutorOptions::default()
    };
    let mut ex = ModelV2Executor::create(eg, &device, options)
        .unwrap_or_else(|e| panic!("{}: create: {e}", executor.name()));
    ex.load()
        .unwrap_or_else(|e| panic!("{}: load: {e}", executor.name()));
    let mut out = Vec::new();
    ex.execute_sync(&[input], &mut out)
        .unwrap_or_else(|e| panic!("{}: execute: {e}", executor.name()));
    assert_eq!(out.len(), 1);
    out[0]
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn ge_cnn_runs_under_every_executor_and_matches_onnx() {
    let w = Weights::new();
    let input = HostTensor {
        dtype: DType::F32,
        shape: vec![1, 3, 8, 8],
        data: seeded_f32(192, 7, 1.0)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    };
    let text = ge_text(&w);
    let plain = lowered(text.as_bytes(), false);
    let mt = lowered(text.as_bytes(), true);
    // Lowering launches GE's NCHW ops as the library's ONNX ops they are; the 4-D
    // FullyConnection, which Gemm does not take, runs as itself.
    let launched: Vec<&str> = plain
        .main
        .nodes
        .iter()
        .filter(|n| rt2::exec::kernel_types::is_op_launch(&n.kernel))
        .filter_map(|n| n.attrs.get("_op_type")?.as_str())
        .collect();
    assert_eq!(
        launched,
        [
            "Conv",
            "BNInference",
            "LeakyRelu",
            "MaxPool",
            "Conv",
            "Eltwise",
            "FullyConnection",
            "Softmax"
        ]
    );
    let seq = execute(&plain, ExecutorType::Sequential, &input);
    assert_eq!(seq.len(), 10);
    for (eg, executor) in [
        (&plain, ExecutorType::Topological),
        (&plain, ExecutorType::TopologicalPriority),
        (&mt, ExecutorType::TopologicalMultiThread),
    ] {
        let got = execute(eg, executor, &input);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&got),
            bits(&seq),
            "{} differs from seq",
            executor.name()
        );
    }
    let onnx = execute(
        &lowered(&onnx_model(&w), false),
        ExecutorType::Sequential,
        &input,
    );
    assert!((seq.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{seq:?}");
    for (g, o) in seq.iter().zip(&onnx) {
        assert!((g - o).abs() <= 1e-5, "GE {seq:?}\nONNX {onnx:?}");
    }
}

/// docs/GE_OP_COVERAGE.md is what the registry and GE's prototypes say now;
/// `RT2_BLESS=1` rewrites it.
#[test]
fn the_ge_op_coverage_page_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/GE_OP_COVERAGE.md");
    let want = rt2::ops::ge::coverage::markdown(&rt2::ops::OpRegistry::new());
    if std::env::var_os("RT2_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: regenerate it with RT2_BLESS=1 cargo test --test ge_ops",
        path.display()
    );
}

/// Every op the GE family registers has a prototype from a `REG_OP` header, and every op
/// the coverage page says computes with GE's contract is in the library.
#[test]
fn the_ge_contract_ops_have_prototypes_and_compute() {
    use rt2::ops::ge::coverage::ge_contract_ops;
    use rt2::ops::ge::prototype::prototype;
    let reg = rt2::ops::OpRegistry::new();
    for op in ge_contract_ops() {
        let spec = reg
            .get(op)
            .unwrap_or_else(|| panic!("{op} is not registered"));
        assert!(spec.compute.is_some(), "{op} does not compute");
        if op != "Aipp" && op != "TransData" {
            let p = prototype(op).unwrap_or_else(|| panic!("{op} has no prototype"));
            assert!(p.from_header(), "{op}'s prototype is Netron's names only");
        }
    }
}

/// Every GE op type the library also has under ONNX's name, with attributes in GE's
/// prototype, is either adapted to GE's contract or refused for GE graphs: none is
/// computed with ONNX's meaning unchecked.
#[test]
fn the_shared_ops_are_all_ruled() {
    use rt2::ops::ge::coverage::{Support, is_ge_contract, support};
    use rt2::ops::ge::prototype::prototypes;
    use rt2::ops::ge::shared::adapts;
    let reg = rt2::ops::OpRegistry::new();
    let unruled: Vec<&str> = prototypes()
        .values()
        .filter(|p| {
            reg.get(p.name).is_some_and(|s| s.compute.is_some())
                && !is_ge_contract(p.name)
                && support(p, &reg) != Support::Structure
                && !(p.from_header() && p.attrs.is_empty())
                && adapts(p.name).is_none()
        })
        .map(|p| p.name)
        .collect();
    assert!(
        unruled.is_empty(),
        "shared with ONNX, not ruled: {unruled:?}"
    );
}

/// An ONNX model whose nodes GE's plugins turn into several ops (a 1-D Conv and
/// AveragePool lifted to 2-D between Unsqueeze and Squeeze, Gemm with alpha and beta as
/// MatMulV2, Muls and Add, Clip at opset 10 as Cast and ClipByValue; x is clipped) computes through
/// those GE ops what it computes with its ONNX ops, under every executor.
#[test]
fn subgraph_plugins_compute_as_the_onnx_ops() {
    let w = seeded_f32(3 * 2 * 3, 7, 0.4);
    let wfc = seeded_f32(4 * 15, 11, 0.3);
    let bytes = OnnxBuilder::new("subgraphs")
        .opset("", 10)
        .input("x", 1, &[1.into(), 2.into(), 9.into()])
        .output("y", 1, &[1.into(), 4.into()])
        .initializer(tensor_f32("w", &[3, 2, 3], &w))
        .initializer(tensor_f32("b", &[3], &[0.1, -0.2, 0.3]))
        .initializer(tensor_f32("wfc", &[4, 15], &wfc))
        .initializer(tensor_f32("bfc", &[4], &[0.5, -0.5, 0.25, 0.0]))
        .node(
            "Clip",
            &["x"],
            &["xc"],
            vec![attr_f("min", -0.4), attr_f("max", 0.6)],
        )
        .node(
            "Conv",
            &["xc", "w", "b"],
            &["c"],
            vec![attr_ints("pads", &[2, 1]), attr_ints("strides", &[2])],
        )
        .node(
            "AveragePool",
            &["c"],
            &["p"],
            vec![attr_ints("kernel_shape", &[2]), attr_ints("pads", &[0, 1])],
        )
        .node("Flatten", &["p"], &["f"], vec![])
        .node(
            "Gemm",
            &["f", "wfc", "bfc"],
            &["g"],
            vec![
                attr_i("transB", 1),
                attr_f("alpha", 0.5),
                attr_f("beta", 2.0),
            ],
        )
        .node(
            "Clip",
            &["g"],
            &["y"],
            vec![attr_f("min", -0.4), attr_f("max", 0.6)],
        )
        .build();
    let x: Vec<f32> = (0..18).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.3).collect();
    let types = [
        "Unsqueeze",
        "Conv2D",
        "AvgPoolV2",
        "Squeeze",
        "MatMulV2",
        "Muls",
        "Cast",
        "ClipByValue",
    ];
    assert_same_through_ge(&bytes, &[1, 2, 9], &x, &types);
}

/// LayerNormalization (opset 17) is GE's LayerNorm, with and without B, on the last
/// axis and on a middle one.
#[test]
fn layer_normalization_computes_as_ge_layer_norm() {
    let bytes = OnnxBuilder::new("ln")
        .opset("", 17)
        .input("x", 1, &[2.into(), 3.into(), 4.into()])
        .output("y", 1, &[2.into(), 3.into(), 4.into()])
        .initializer(tensor_f32("s", &[4], &[1.0, 0.5, -2.0, 1.5]))
        .initializer(tensor_f32("b", &[4], &[0.0, 0.25, 1.0, -1.0]))
        .initializer(tensor_f32("s2", &[3, 4], &seeded_f32(12, 5, 1.0)))
        .node(
            "LayerNormalization",
            &["x", "s", "b"],
            &["l"],
            vec![attr_f("epsilon", 1e-3)],
        )
        .node(
            "LayerNormalization",
            &["l", "s2"],
            &["y"],
            vec![attr_i("axis", 1)],
        )
        .build();
    let x: Vec<f32> = (0..24).map(|i| ((i * 5 % 13) as f32 - 6.0) * 0.7).collect();
    assert_same_through_ge(&bytes, &[2, 3, 4], &x, &["LayerNorm"]);
}

/// Runs the ONNX model `bytes` on float32 `x` of `shape` through GE's ops (GE's plugins
/// applied; the graph must hold every type of `ge_types`) under every executor, and checks
/// each result against the same model run with its ONNX ops.
fn assert_same_through_ge(bytes: &[u8], shape: &[i64], x: &[f32], ge_types: &[&str]) {
    let ge = read(bytes, &ReadOptions::default()).expect("reads");
    let types: Vec<&str> = ge
        .root()
        .model
        .root
        .nodes
        .iter()
        .map(|n| n.op_type.as_str())
        .collect();
    for t in ge_types {
        assert!(types.contains(t), "{t} is not in {types:?}");
    }
    let onnx = ReadOptions {
        import: rt2::om::onnx::ImportOptions {
            onnx_types: true,
            ..Default::default()
        },
    };
    let lower_with = |opts: &ReadOptions, multi_thread| {
        let file = read(bytes, opts).expect("reads");
        let options = LowerOptions {
            multi_thread,
            ..LowerOptions::default()
        };
        lower(&file.root().model, &options).expect("lowers")
    };
    let input = HostTensor {
        dtype: DType::F32,
        shape: shape.to_vec(),
        data: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let want = execute(&lower_with(&onnx, false), ExecutorType::Sequential, &input);
    assert!(want.iter().any(|&v| v != 0.0));
    for (multi_thread, executor) in [
        (false, ExecutorType::Sequential),
        (false, ExecutorType::Topological),
        (false, ExecutorType::TopologicalPriority),
        (true, ExecutorType::TopologicalMultiThread),
    ] {
        let got = execute(
            &lower_with(&ReadOptions::default(), multi_thread),
            executor,
            &input,
        );
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                "{}: {got:?} vs {want:?}",
                executor.name()
            );
        }
    }
}
