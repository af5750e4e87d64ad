//! Model-file benchmarks: reading a 100,000-node binary ComputeGraph, and `rt2 compile`'s
//! work (ONNX import, verification, OM build) on a 10,000-node model, with ONNX Runtime's
//! session creation for the same model measured in the same run as the peer.
//!
//! `cargo bench --bench om`; the peer needs the pinned Python environment
//! (`tools/pyenv.sh`), and is skipped with a note when it cannot be had.

// The allocator the rt2 binary uses, so the numbers are the ones users get.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};

#[path = "support/ge_graph.rs"]
mod ge_graph;
use ge_graph::ge_graph;
use rt2::om::file::{self, ReadOptions};
use rt2::om::om_writer::{OmBuildOptions, build_om};
use rt2::om::onnx::builder::chain_model;
use rt2::om::onnx::{ImportOptions, import};
use rt2::om::{ir, verify};

/// What `rt2 compile model.onnx -o model.om` does, without the file IO.
fn compile(onnx: &[u8]) -> Vec<u8> {
    let def = import(onnx, &ImportOptions::default()).expect("the benchmark model imports");
    let model = ir::from_model_def(def).expect("the imported graph converts");
    assert!(verify::errors(&model).is_empty());
    build_om(ir::into_model_def(model), &OmBuildOptions::default())
        .expect("the OM builds")
        .to_bytes()
        .expect("the OM encodes")
}

fn bench_read(c: &mut Criterion) {
    let bytes = prost::Message::encode_to_vec(&ge_graph(100_000));
    let mut g = c.benchmark_group("read_binary_compute_graph");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    // The model is dropped outside the timing: rt2's commands hand it back to the OS at
    // exit instead of freeing it (see `cmd::input::release`).
    g.bench_function("100k_nodes", |b| {
        b.iter_with_large_drop(|| {
            let f = file::read(black_box(&bytes), &ReadOptions::default()).expect("reads");
            assert_eq!(f.root().model.root.nodes.len(), 100_002);
            f
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
