//! Whole models end to end, side by side with ONNX Runtime in the same run.
//!
//! - `add chain`: 10,000 Adds on `[1, 16]` float32 (`add_chain_model`), each adding a
//!   constant to the previous value: what an execution costs per node when the kernels
//!   are trivial. Target (docs/PERFORMANCE.md): at most 140 ns per node.
//! - `add chain --static-memory`: the same chain lowered with static memory planning,
//!   under every engine; seq is paired with ONNX Runtime measured right after it.
//! - `add chain --graph`: the same chain in graph mode (`capture_main` once, then
//!   `replay_sync` per execution), beside the plain run of the same engine. Target: at
//!   least twice as fast per execution as the plain run.
//! - `encoder block`: a transformer encoder block (d_model 512, 8 heads, FFN 2048,
//!   `encoder_block_model`) at sequence lengths 16 and 128, on one thread (the device's
//!   compute cores: one thread; ONNX Runtime: one intra-op thread). Target: at most 1.2
//!   times ONNX Runtime.
//!
//! rt2 is measured as a user runs a model: one loaded `ModelV2Executor` and
//! `execute_sync` per execution (inputs uploaded, Main run, outputs downloaded), the
//! median and the best of the timed runs after warm-up (a chain row: 200 executions, and
//! as many runs of the peer beside it). The rt2 model has a symbolic sequence length;
//! the peer runs the same block declared at the fixed length (tools/ort_run.py feeds the
//! declared shape).
//!
//! - `fused f16 cnn`: GE's fused float16 CNN (NC1HWC0 maps, FRACTAL_Z filters, Cast and
//!   TransData at the edges; `support/fused_cnn.rs`) beside the same network in NCHW
//!   float32, both read from GE's text form, sequential, one compute thread. Target: the
//!   float16 network within 1.5 times the float32 one.
//!
//! `cargo bench --bench models`; the peer needs the pinned Python environment
//! (`tools/pyenv.sh`) and is skipped with a note when it cannot be had.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::time::Duration;

use criterion::Criterion;

#[path = "support/fused_cnn.rs"]
mod fused_cnn;
#[path = "support/peer.rs"]
mod peer;
use fused_cnn::Cnn;
use rt2::exec::ExecuteGraph;
use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::{EncoderBlock, add_chain_model, encoder_block_model, seeded_f32};
use rt2::ops::{DType, HostTensor};

const CHAIN: usize = 10_000;

fn lowered(onnx: &[u8]) -> ExecuteGraph {
    lowered_with(onnx, LowerOptions::default())
}

fn lowered_with(onnx: &[u8], opts: LowerOptions) -> ExecuteGraph {
    let mut file = read(onnx, &ReadOptions::default()).expect("imports");
    let model = file.models.swap_remove(0).model;
    lower(&model, &opts).expect("lowers")
}

fn f32_input(shape: &[usize], seed: u64) -> HostTensor {
    let n = shape.iter().product();
    HostTensor {
        dtype: DType::F32,
        shape: shape.iter().map(|&d| d as i64).collect(),
        data: seeded_f32(n, seed, 1.0)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    }
}

/// A loaded executor on a one-compute-thread device.
fn executor(eg: &ExecuteGraph, executor: ExecutorType) -> ModelV2Executor {
    let device = Device::new(DeviceConfig {
        check_launch_shapes: false,
        compute_threads: 1,
        ..DeviceConfig::default()
    });
    let mut ex = ModelV2Executor::create(
        eg,
        &device,
        ExecutorOptions {
            executor,
            ..ExecutorOptions::default()
        },
    )
    .expect("creates");
    ex.load().expect("loads");
    ex
}

/// Executions timed per chain row, and runs of the peer beside them: enough that the
/// best of them is a steady number on a machine whose median moves 2x from minute to
/// minute.
const CHAIN_RUNS: usize = 200;

/// Prints a chain row: the median and best execution, per node and whole.
fn print_chain(what: &str, t: peer::Times) {
    let per_node = |ms: f64| ms * 1e6 / CHAIN as f64;
    println!(
        "add chain {what}: {:.1} ns per node ({:.3} ms per execution), best {:.1} ns per node",
        per_node(t.median),
        t.median,
        per_node(t.best)
    );
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));

    // The Add chain, under every engine.
    let chain = add_chain_model(CHAIN, 16);
    let chain_path = dir.join("add_chain_10000.onnx");
    std::fs::write(&chain_path, &chain).expect("writing the peer model");
    let eg = lowered(&chain);
    let planned = lowered_with(
        &chain,
        LowerOptions {
            static_memory: true,
            ..LowerOptions::default()
        },
    );
    let x = f32_input(&[1, 16], 1);
    let mut out = Vec::new();
    for kind in ExecutorType::ALL {
        // With static memory planning (`--static-memory`): a node is its launch alone.
        let mut ex = executor(&planned, kind);
        let t = peer::times_ms(CHAIN_RUNS, || {
            ex.execute_sync(&[&x], &mut out).expect("runs")
        });
        print_chain(&format!("{} --static-memory", kind.name()), t);
        if kind == ExecutorType::Sequential {
            peer::report_run(
                "add_chain_10000 seq --static-memory (per execution)",
                t,
                &chain_path,
                CHAIN_RUNS,
            );
        }
        drop(ex);
        let mut ex = executor(&eg, kind);
        let t = peer::times_ms(CHAIN_RUNS, || {
            ex.execute_sync(&[&x], &mut out).expect("runs")
        });
        print_chain(kind.name(), t);
        let ms = t.median;
        if kind == ExecutorType::Topological {
            c.bench_function("models add chain 10000 topo", |b| {
                b.iter(|| ex.execute_sync(&[&x], &mut out).expect("runs"))
            });
            peer::report_run(
                "add_chain_10000 (per execution)",
                t,
                &chain_path,
                CHAIN_RUNS,
            );
        }
        // Graph mode on a fresh executor of the same engine: captured once, replayed.
        let mut g = executor(&eg, kind);
        g.capture_main(&[&x]).expect("captures");
        let gms = peer::times_ms(CHAIN_RUNS, || {
            g.replay_sync(&[&x], &mut out).expect("replays")
        })
        .median;
        println!(
            "add chain {} --graph: {:.1} ns per node ({gms:.3} ms per execution), {:.2}x the plain run's speed",
            kind.name(),
            gms * 1e6 / CHAIN as f64,
            ms / gms
        );
        if kind == ExecutorType::Topological {
            c.bench_function("models add chain 10000 topo graph", |b| {
                b.iter(|| g.replay_sync(&[&x], &mut out).expect("replays"))
            });
        }
    }

    // The encoder block at two lengths, one executor for both (the shapes are dynamic).
    let block = encoder_block_model(EncoderBlock::BASE, None);
    let eg = lowered(&block);
    for kind in [ExecutorType::Sequential, ExecutorType::Topological] {
        let mut ex = executor(&eg, kind);
        for seq in [16usize, 128] {
            let x = f32_input(&[seq, EncoderBlock::BASE.d_model], 2);
            let t = peer::times_ms(30, || ex.execute_sync(&[&x], &mut out).expect("runs"));
            let what = format!("encoder_block_seq{seq} {}", kind.name());
            if kind == ExecutorType::Topological {
                c.bench_function(&format!("models encoder block seq {seq} topo"), |b| {
                    b.iter(|| ex.execute_sync(&[&x], &mut out).expect("runs"))
                });
            }
            let path = dir.join(format!("encoder_block_seq{seq}.onnx"));
            let fixed = encoder_block_model(EncoderBlock::BASE, Some(seq as i64));
            std::fs::write(&path, &fixed).expect("writing the peer model");
            peer::report_run(&what, t, &path, 50);
        }
    }

    // GE's fused float16 CNN beside its NCHW float32 twin, both read from GE's text form.
    let fused = lowered(FUSED_CNN.text(true).as_bytes());
    let twin = lowered(FUSED_CNN.text(false).as_bytes());
    let shape: Vec<usize> = FUSED_CNN.input.iter().map(|&d| d as usize).collect();
    let x = f32_input(&shape, 3);
    let mut ex16 = executor(&fused, ExecutorType::Sequential);
    let mut ex32 = executor(&twin, ExecutorType::Sequential);
    let t16 = peer::times_ms(20, || ex16.execute_sync(&[&x], &mut out).expect("runs"));
    let t32 = peer::times_ms(20, || ex32.execute_sync(&[&x], &mut out).expect("runs"));
    println!(
        "fused float16 NC1HWC0 CNN seq: {:.2} ms (best {:.2}); NCHW float32 twin: {:.2} ms (best {:.2}); {:.2}x",
        t16.median,
        t16.best,
        t32.median,
        t32.best,
        t16.median / t32.median
    );
    c.bench_function("models fused f16 cnn seq", |b| {
        b.iter(|| ex16.execute_sync(&[&x], &mut out).expect("runs"))
    });
    c.bench_function("models fused f16 cnn twin f32 seq", |b| {
        b.iter(|| ex32.execute_sync(&[&x], &mut out).expect("runs"))
    });
    c.final_summary();
}

/// The fused CNN's size: a 112x112 image, a 64-channel stem pooled to 56x56 and three
/// residual blocks there (six 3x3 convolutions of 64 channels: ResNet's first stage).
const FUSED_CNN: Cnn = Cnn {
    input: [1, 3, 112, 112],
    width: 64,
    blocks: 3,
    classes: 10,
};
