//! The standalone loop the chain's speed work is profiled and timed with: the 10,000-Add
//! chain of `benches/models.rs` (`[1, 16]` float32), lowered with `--static-memory` (or
//! without, `--dynamic`), loaded once on a one-compute-thread device, and executed in a
//! tight loop with nothing else in the process.
//!
//! ```text
//! cargo run --release --example chain_loop -- [ENGINE] [ITERS] [--dynamic] [--nodes=N]
//! perf record -F 4000 -g target/release/examples/chain_loop seq 3000
//! ```
//!
//! `--nodes=N` times a chain of N Adds instead of 10,000 (a short chain's records stay in
//! the core's caches). Prints the best and the median execution over ITERS (default 300) after five warm-ups,
//! in milliseconds and nanoseconds per node; the peer's matching loop is
//! `tools/ort_run.py target/tmp/add_chain_10000.onnx N` (the bench writes that model).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Instant;

use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::{add_chain_model, seeded_f32};
use rt2::ops::{DType, HostTensor};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dynamic = args.iter().any(|a| a == "--dynamic");
    let nodes: usize = args
        .iter()
        .find_map(|a| a.strip_prefix("--nodes="))
        .map_or(10_000, |n| n.parse().expect("--nodes=N takes a count"));
    let mut positional = args.iter().filter(|a| !a.starts_with("--"));
    let engine = positional.next().map_or("seq", String::as_str);
    let kind = ExecutorType::from_name(engine).unwrap_or_else(|| {
        eprintln!("chain_loop: unknown engine {engine:?} (seq, topo, topo-prio, topo-mt)");
        std::process::exit(2)
    });
    let iters: usize = positional
        .next()
        .map(|n| n.parse().expect("ITERS is a count"))
        .unwrap_or(300)
        .max(1);

    let mut file = read(&add_chain_model(nodes, 16), &ReadOptions::default()).expect("imports");
    let model = file.models.swap_remove(0).model;
    let opts = LowerOptions {
        static_memory: !dynamic,
        ..LowerOptions::default()
    };
    let eg = lower(&model, &opts).expect("lowers");
    let device = Device::new(DeviceConfig {
        check_launch_shapes: false,
        compute_threads: 1,
        ..DeviceConfig::default()
    });
    let mut ex = ModelV2Executor::create(
        &eg,
        &device,
        ExecutorOptions {
            executor: kind,
            ..ExecutorOptions::default()
        },
    )
    .expect("creates");
    ex.load().expect("loads");

    let x = HostTensor {
        dtype: DType::F32,
        shape: vec![1, 16],
        data: seeded_f32(16, 1, 1.0)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    };
    let mut out = Vec::new();
    for _ in 0..5 {
        ex.execute_sync(&[&x], &mut out).expect("runs");
    }
    let mut times: Vec<f64> = (0..iters)
        .map(|_| {
            let t = Instant::now();
            ex.execute_sync(&[&x], &mut out).expect("runs");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let (best, median) = (times[0], times[times.len() / 2]);
    println!(
        "chain of {nodes} {engine}{}: best {best:.3} ms ({:.1} ns per node), median {median:.3} ms ({:.1} ns per node), {iters} executions",
        if dynamic { "" } else { " --static-memory" },
        best * 1e6 / nodes as f64,
        median * 1e6 / nodes as f64,
    );
}
