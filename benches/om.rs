//! Model-file benchmarks: reading a 100,000-node binary ComputeGraph, and `rt2 compile`'s
//! work (ONNX import, verification, OM build) on a 10,000-node model, with ONNX Runtime's
//! session creation for the same model measured in the same run as the peer.
//!
//! `cargo bench --bench om`; the peer needs the pinned Python environment
//! (`tools/pyenv.sh`), and is skipped with a note when it cannot be had.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use rt2::om::file::{self, ReadOptions};
use rt2::om::om_writer::{OmBuildOptions, build_om};
use rt2::om::onnx::builder::chain_model;
use rt2::om::onnx::{ImportOptions, import};
use rt2::om::{DataType, ir, verify};
use rt2::proto::ge_ir::{
    AttrDef, GraphDef, ModelDef, OpDef, ShapeDef, TensorDescriptor, attr_def::ListValue,
    attr_def::Value,
};

fn attr_s(s: &str) -> AttrDef {
    AttrDef {
        value: Some(Value::S(s.as_bytes().to_vec())),
    }
}
fn attr_i(i: i64) -> AttrDef {
    AttrDef {
        value: Some(Value::I(i)),
    }
}
fn attr_ints(v: &[i64]) -> AttrDef {
    AttrDef {
        value: Some(Value::List(ListValue {
            i: v.to_vec(),
            val_type: 2,
            ..Default::default()
        })),
    }
}

/// A tensor descriptor as GE serializes one (`GeTensorDescAsProto`): dtype, shape, layout
/// and the always-present format/origin attributes.
fn desc(dims: &[i64]) -> TensorDescriptor {
    let mut attr = BTreeMap::new();
    attr.insert("origin_format".to_string(), attr_s("NCHW"));
    attr.insert("origin_format_for_int".to_string(), attr_i(0));
    attr.insert("format_for_int".to_string(), attr_i(0));
    attr.insert(
        "origin_shape_initialized".to_string(),
        AttrDef {
            value: Some(Value::B(true)),
        },
    );
    attr.insert("origin_shape".to_string(), attr_ints(dims));
    TensorDescriptor {
        dtype: DataType::Float32.to_proto(),
        shape: Some(ShapeDef { dim: dims.to_vec() }),
        layout: "NCHW".into(),
        attr,
        device_type: "NPU".into(),
        size: dims.iter().product::<i64>() * 4,
        real_dim_cnt: dims.len() as i64,
        ..Default::default()
    }
}

/// A GE ComputeGraph of `n` nodes shaped like a real one: a Data node, then a long run of
/// ops each reading the previous two outputs, with GE-style descriptors and op attributes.
fn ge_graph(n: usize) -> ModelDef {
    let dims = [1, 64, 56, 56];
    let mut ops = Vec::with_capacity(n + 2);
    let mut data = OpDef {
        name: "input".into(),
        r#type: "Data".into(),
        input: vec![String::new()],
        ..Default::default()
    };
    data.attr.insert("index".into(), attr_i(0));
    data.input_desc.push(desc(&dims));
    data.output_desc.push(desc(&dims));
    ops.push(data);
    for i in 0..n {
        let prev = ops
            .last()
            .map(|o: &OpDef| o.name.clone())
            .unwrap_or_default();
        let prev2 = if i >= 2 {
            format!("op_{}", i - 2)
        } else {
            "input".to_string()
        };
        let ty = ["Add", "Relu", "Mul", "Conv2D"][i % 4];
        let mut op = OpDef {
            name: format!("op_{i}"),
            r#type: ty.into(),
            input: vec![format!("{prev}:0"), format!("{prev2}:0")],
            id: i as i64 + 1,
            stream_id: 0,
            input_desc: vec![desc(&dims), desc(&dims)],
            output_desc: vec![desc(&dims)],
            input_name: vec!["x1".into(), "x2".into()],
            ..Default::default()
        };
        op.attr.insert("_input_name_key".into(), attr_ints(&[0, 1]));
        op.attr.insert(
            "_kernelname".into(),
            attr_s(&format!("te_{}_{i:08x}", ty.to_lowercase())),
        );
        op.attr.insert("imply_type".into(), attr_i(1));
        ops.push(op);
    }
    let last = ops.last().map(|o| o.name.clone()).unwrap_or_default();
    ops.push(OpDef {
        name: "out".into(),
        r#type: "NetOutput".into(),
        input: vec![format!("{last}:0")],
        input_desc: vec![desc(&dims)],
        ..Default::default()
    });
    ModelDef {
        name: "bench".into(),
        version: 2,
        graph: vec![GraphDef {
            name: "bench".into(),
            input: vec!["input:0".into()],
            output: vec![format!("{last}:0")],
            op: ops,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// What `rt2 compile model.onnx -o model.om` does, without the file IO.
fn compile(onnx: &[u8]) -> Vec<u8> {
    let def = import(onnx, &ImportOptions::default()).expect("the benchmark model imports");
    let model = ir::from_model_def(&def).expect("the imported graph converts");
    assert!(verify::errors(&model).is_empty());
    build_om(def, &OmBuildOptions::default())
        .expect("the OM builds")
        .to_bytes()
        .expect("the OM encodes")
}

fn bench_read(c: &mut Criterion) {
    let bytes = prost::Message::encode_to_vec(&ge_graph(100_000));
    let mut g = c.benchmark_group("read_binary_compute_graph");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("100k_nodes", |b| {
        b.iter(|| {
            let f = file::read(black_box(&bytes), &ReadOptions::default()).expect("reads");
            assert_eq!(f.root().model.root.nodes.len(), 100_002);
        })
    });
    g.finish();
}

fn bench_compile(c: &mut Criterion, onnx: &[u8]) {
    let mut g = c.benchmark_group("compile_onnx");
    g.sample_size(20).measurement_time(Duration::from_secs(10));
    g.bench_function("10k_nodes", |b| b.iter(|| compile(black_box(onnx))));
    g.finish();
}

/// ONNX Runtime's session creation for the same model, through tools/ort_session.py in
/// the pinned environment. `None` (with the reason printed) when Python cannot be had.
fn ort_session_ms(model: &PathBuf) -> Option<serde_json::Value> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let py = Command::new("bash")
        .arg(root.join("tools/pyenv.sh"))
        .output()
        .ok()?;
    if !py.status.success() {
        eprintln!(
            "peer: tools/pyenv.sh failed: {}",
            String::from_utf8_lossy(&py.stderr)
        );
        return None;
    }
    let python = String::from_utf8_lossy(&py.stdout).trim().to_string();
    let out = Command::new(python)
        .arg(root.join("tools/ort_session.py"))
        .arg(model)
        .arg("10")
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "peer: ort_session.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_read(&mut c);
    let onnx = chain_model(10_000);
    bench_compile(&mut c, &onnx);
    c.final_summary();

    // The peer, in the same run: ONNX Runtime creating a session for the same model, next
    // to rt2's median compile time measured here the same way (10 runs after a warm-up).
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join("chain_10k.onnx");
    std::fs::write(&path, &onnx).expect("writing the benchmark model");
    compile(&onnx);
    let mut times: Vec<f64> = (0..10)
        .map(|_| {
            let t = Instant::now();
            black_box(compile(&onnx));
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let rt2_ms = times[times.len() / 2];
    match ort_session_ms(&path) {
        Some(ort) => {
            let ort_ms = ort["session_ms"]["median"].as_f64().unwrap_or(f64::NAN);
            println!(
                "peer: 10k-node ONNX model: rt2 compile {rt2_ms:.1} ms, ONNX Runtime {} session creation {ort_ms:.1} ms (ratio {:.2})",
                ort["ort_version"].as_str().unwrap_or("?"),
                rt2_ms / ort_ms
            );
        }
        None => println!(
            "peer: 10k-node ONNX model: rt2 compile {rt2_ms:.1} ms; ONNX Runtime not measured"
        ),
    }
}
