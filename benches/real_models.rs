//! The five real-model classes of `fixtures/real_models` (`tools/real_models.py`: a
//! transformer encoder, a MobileNetV3-small-style CNN, a UNet, an LSTM voice-activity
//! model, a CRNN text recognizer) run by rt2 beside ONNX Runtime in the same run, in two
//! pairings:
//!
//! - `1 thread`: rt2's device with one compute thread (`rt2 run --compute-threads 1`)
//!   against ONNX Runtime with one intra-op thread;
//! - `defaults`: rt2's default device (one compute thread per CPU) against ONNX Runtime's
//!   default session options.
//!
//! rt2 is measured as a user runs a model: read with the library, lowered with the
//! default options, one loaded `ModelV2Executor` (the default executor, topo) and
//! `execute_sync` per execution (input uploaded, Main run, output downloaded), fed the
//! fixture's input. After five warm-up executions, each row times as many runs as fit in
//! about three seconds (at least 10, at most 100); ONNX Runtime gets the same count
//! (tools/ort_run.py: five warm-up runs, default graph optimizations). The output is a
//! Markdown table (medians, bests and their ratios, rt2 over ORT) and the geometric mean
//! of the ratios per pairing.
//!
//! `cargo bench --bench real_models`; the peer needs the pinned Python environment
//! (`tools/pyenv.sh`) and its columns say `-` when it cannot be had.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::time::Instant;

#[path = "support/peer.rs"]
mod peer;
use rt2::exec::ExecuteGraph;
use rt2::exec::runtime::{ExecutorOptions, ModelV2Executor};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ReadOptions, read};
use rt2::ops::HostTensor;

/// The fixtures, in issue 26's order.
const MODELS: [&str; 5] = ["encoder", "mobilenet", "unet", "lstm_speech", "crnn"];

/// Executions before the timed ones, as tools/ort_run.py warms ORT up.
const WARMUP: usize = 5;

/// About how long each row's timed runs take, in milliseconds.
const BUDGET_MS: f64 = 3000.0;

/// One way of pairing the two runtimes' threads.
struct Pairing {
    name: &'static str,
    /// rt2's device compute threads (0: one per CPU).
    compute_threads: usize,
    /// ORT's intra-op threads (tools/ort_run.py's THREADS; 0: its default).
    ort_threads: usize,
}

const PAIRINGS: [Pairing; 2] = [
    Pairing {
        name: "1 thread",
        compute_threads: 1,
        ort_threads: 1,
    },
    Pairing {
        name: "defaults",
        compute_threads: 0,
        ort_threads: 0,
    },
];

/// The folder of one fixture.
fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/real_models")
        .join(name)
}

/// The model lowered with the default options, as `rt2 run` lowers it.
fn lowered(path: &Path) -> ExecuteGraph {
    let bytes = std::fs::read(path).expect("reading the model");
    let mut file = read(&bytes, &ReadOptions::default()).expect("imports");
    let opts = LowerOptions {
        static_memory: true,
        ..LowerOptions::default()
    };
    lower(&file.models.swap_remove(0).model, &opts).expect("lowers")
}

/// The fixture's input (`test_data_set_0/input_0.pb`).
fn input(dir: &Path) -> HostTensor {
    let path = dir.join("test_data_set_0/input_0.pb");
    let bytes = std::fs::read(&path).expect("reading the input");
    let t = rt2::om::onnx::read_tensor(&bytes, &path.display().to_string()).expect("a tensor");
    rt2::lower::attrs::tensor(&t).expect("a tensor of static shape")
}

/// rt2's times for `eg` on a device with `compute_threads`, and the run count the peer
/// gets too.
fn measure(eg: &ExecuteGraph, x: &HostTensor, compute_threads: usize) -> (peer::Times, usize) {
    let device = Device::new(DeviceConfig {
        compute_threads,
        ..DeviceConfig::default()
    });
    let mut ex = ModelV2Executor::create(eg, &device, ExecutorOptions::default()).expect("creates");
    ex.load().expect("loads");
    let mut out = Vec::new();
    let t = Instant::now();
    for _ in 0..WARMUP {
        ex.execute_sync(&[x], &mut out).expect("runs");
    }
    let each = t.elapsed().as_secs_f64() * 1e3 / WARMUP as f64;
    let runs = ((BUDGET_MS / each) as usize).clamp(10, 100);
    let times = peer::times_ms(runs, || ex.execute_sync(&[x], &mut out).expect("runs"));
    (times, runs)
}

fn main() {
    let mut ratios: Vec<(usize, f64, f64)> = Vec::new();
    let mut version = String::from("not measured");
    let mut rows = Vec::new();
    for name in MODELS {
        let dir = fixture(name);
        let path = dir.join("model.onnx");
        let eg = lowered(&path);
        let x = input(&dir);
        for (k, pairing) in PAIRINGS.iter().enumerate() {
            let (rt2, runs) = measure(&eg, &x, pairing.compute_threads);
            let ort = peer::ort_run_threads(&path, runs, pairing.ort_threads);
            let row = match ort {
                Some(ort) => {
                    let ms = |key: &str| ort["run_ms"][key].as_f64().unwrap_or(f64::NAN);
                    let (median, best) = (ms("median"), ms("min"));
                    version = ort["ort_version"].as_str().unwrap_or("?").to_string();
                    let (rm, rb) = (rt2.median / median, rt2.best / best);
                    ratios.push((k, rm, rb));
                    format!("{median:.2} | {best:.2} | {rm:.2} | {rb:.2}")
                }
                None => "- | - | - | -".to_string(),
            };
            let line = format!(
                "| {name} | {} | {:.2} | {:.2} | {row} |",
                pairing.name, rt2.median, rt2.best
            );
            eprintln!("{line} ({runs} runs)");
            rows.push(line);
        }
    }
    println!("\nrt2 beside ONNX Runtime {version}, milliseconds per execution:\n");
    println!(
        "| model | pairing | rt2 median | rt2 best | ORT median | ORT best | median ratio | best ratio |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        println!("{row}");
    }
    println!();
    for (k, pairing) in PAIRINGS.iter().enumerate() {
        let of: Vec<(f64, f64)> = ratios
            .iter()
            .filter(|r| r.0 == k)
            .map(|r| (r.1, r.2))
            .collect();
        if of.is_empty() {
            continue;
        }
        let geomean = |f: fn(&(f64, f64)) -> f64| {
            (of.iter().map(|r| f(r).ln()).sum::<f64>() / of.len() as f64).exp()
        };
        println!(
            "geometric mean, {}: median ratio {:.2}, best ratio {:.2}",
            pairing.name,
            geomean(|r| r.0),
            geomean(|r| r.1)
        );
    }
}
