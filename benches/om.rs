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
use std::time::Duration;

use criterion::{Criterion, Throughput};

#[path = "support/ge_graph.rs"]
mod ge_graph;
#[path = "support/peer.rs"]
mod peer;
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
    let rt2_ms = peer::median_ms(10, || compile(&onnx));
    peer::report("10k-node ONNX model, compile", rt2_ms, &path);
}
