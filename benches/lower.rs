//! Lowering benchmarks: `rt2 lower`'s work on 10,000- and 100,000-node models, loading the
//! `.exeg` it writes, and, as the peer, ONNX Runtime creating a session for the same
//! 10,000-node model, measured in the same run.
//!
//! The targets (issue 3, recorded in docs/PERFORMANCE.md): lowering plus loading a
//! 10,000-node model within a quarter of ORT's session creation; 100,000 nodes lowered in
//! under a second; loading an `.exeg` at least ten times faster than lowering its model.
//!
//! `cargo bench --bench lower`; the peer needs the pinned Python environment
//! (`tools/pyenv.sh`) and is skipped with a note when it cannot be had.

// The allocator the rt2 binary uses, so the numbers are the ones users get.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{BatchSize, Criterion};

#[path = "support/peer.rs"]
mod peer;
use rt2::exec::{ExecuteGraph, exeg};
use rt2::lower::{LowerOptions, lower};
use rt2::om::ComputeModel;
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::chain_model;

fn model_of(onnx: &[u8]) -> ComputeModel {
    let mut f = read(onnx, &ReadOptions::default()).expect("the benchmark model imports");
    f.models.swap_remove(0).model
}

/// What loading an `.exeg` costs before an engine is built: decode and every check
/// (`decode` runs the checks and refuses a graph with a problem).
fn load(bytes: &[u8]) -> ExecuteGraph {
    exeg::decode(bytes).expect("decodes and passes the checks")
}

/// Lowering a ComputeGraph and loading the result: lower, encode, decode, check (the file
/// IO left out).
fn lower_and_load(model: &ComputeModel) -> ExecuteGraph {
    let bytes = exeg::encode(&lower(model, &LowerOptions::default()).expect("lowers"));
    load(&bytes)
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let onnx_10k = chain_model(10_000);
    let model_10k = model_of(&onnx_10k);
    let onnx_100k = chain_model(100_000);
    let model_100k = model_of(&onnx_100k);
    let exeg_100k = exeg::encode(&lower(&model_100k, &LowerOptions::default()).unwrap());

    let mut g = c.benchmark_group("lower");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    // Each result is dropped outside the timing and before the next run, so a run's
    // memory is the same as a user's single run, not a growing pile of results.
    let per_run = BatchSize::PerIteration;
    g.bench_function("10k_nodes_lower_and_load", |b| {
        b.iter_batched(|| (), |_| lower_and_load(black_box(&model_10k)), per_run)
    });
    g.bench_function("100k_nodes", |b| {
        b.iter_batched(
            || (),
            |_| lower(black_box(&model_100k), &LowerOptions::default()).unwrap(),
            per_run,
        )
    });
    // What `rt2 lower` does short of writing the file: the side the load is compared with.
    g.bench_function("100k_nodes_lower_and_encode", |b| {
        b.iter_batched(
            || (),
            |_| exeg::encode(&lower(black_box(&model_100k), &LowerOptions::default()).unwrap()),
            per_run,
        )
    });
    g.bench_function("100k_nodes_multi_thread", |b| {
        b.iter_batched(
            || (),
            |_| {
                lower(
                    black_box(&model_100k),
                    &LowerOptions {
                        multi_thread: true,
                        ..LowerOptions::default()
                    },
                )
                .unwrap()
            },
            per_run,
        )
    });
    g.bench_function("100k_nodes_load_exeg", |b| {
        b.iter_batched(|| (), |_| load(black_box(&exeg_100k)), per_run)
    });
    g.finish();
    c.final_summary();

    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chain_10k.onnx");
    std::fs::write(&path, &onnx_10k).expect("writing the benchmark model");
    let rt2_ms = peer::median_ms(10, || lower_and_load(&model_10k));
    peer::report("10k-node model, lower + load", rt2_ms, &path);
    let rt2_ms = peer::median_ms(10, || lower_and_load(&model_of(&onnx_10k)));
    peer::report("10k-node model, ONNX import + lower + load", rt2_ms, &path);
}
