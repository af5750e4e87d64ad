//! ONNX Runtime as the peer of rt2's benchmarks: session creation for a model
//! (tools/ort_session.py) or one-thread runs of it (tools/ort_run.py), measured in the
//! pinned Python environment (tools/pyenv.sh), in the same run as rt2's own numbers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// ORT's session-creation report for `model` (`{"ort_version", "session_ms": {"min",
/// "median", "max"}, ...}`), or `None` with the reason printed when Python cannot be had.
#[allow(dead_code)]
pub fn ort_session(model: &Path) -> Option<serde_json::Value> {
    ort_script("ort_session.py", model, 10, &[])
}

/// ORT's one-thread run report for `model` (`{"ort_version", "run_ms": {...}}`).
#[allow(dead_code)] // each bench binary includes this file and uses part of it
pub fn ort_run(model: &Path, runs: usize) -> Option<serde_json::Value> {
    ort_run_threads(model, runs, 1)
}

/// ORT's run report for `model` with `threads` intra-op threads (tools/ort_run.py's
/// THREADS: 1 is one thread, 0 is ONNX Runtime's own default), so a bench can pair rt2's
/// default device with ORT's default session as well as one thread with one thread.
#[allow(dead_code)]
pub fn ort_run_threads(model: &Path, runs: usize, threads: usize) -> Option<serde_json::Value> {
    ort_script("ort_run.py", model, runs, &[threads.to_string()])
}

/// Runs tools/`script` on `model` with `runs` and the further arguments `extra`, and
/// parses the JSON line it prints.
fn ort_script(
    script: &str,
    model: &Path,
    runs: usize,
    extra: &[String],
) -> Option<serde_json::Value> {
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
        .arg(root.join("tools").join(script))
        .arg(model)
        .arg(runs.to_string())
        .args(extra)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "peer: {script} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// Wall times of a run of calls, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct Times {
    pub best: f64,
    pub median: f64,
}

/// Best and median wall time of `runs` calls of `f` after one warm-up call, in
/// milliseconds: the way tools/ort_session.py and tools/ort_run.py measure the peer.
/// The best is what a noisy machine disturbs least; both are printed.
pub fn times_ms<T>(runs: usize, mut f: impl FnMut() -> T) -> Times {
    std::hint::black_box(f());
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    Times {
        best: times[0],
        median: times[times.len() / 2],
    }
}

/// The median of [`times_ms`].
#[allow(dead_code)]
pub fn median_ms<T>(runs: usize, f: impl FnMut() -> T) -> f64 {
    times_ms(runs, f).median
}

/// Prints the side-by-side line for `what`: rt2's runs next to ORT's `peer_runs` runs on
/// one thread, medians and bests, with the ratio of each.
#[allow(dead_code)]
pub fn report_run(what: &str, rt2: Times, model: &Path, peer_runs: usize) {
    match ort_run(model, peer_runs) {
        Some(ort) => {
            let ms = |k: &str| ort["run_ms"][k].as_f64().unwrap_or(f64::NAN);
            let (median, best) = (ms("median"), ms("min"));
            println!(
                "peer: {what}: rt2 {:.4} ms (best {:.4}), ONNX Runtime {} {median:.4} ms (best {best:.4}) on one thread (ratio {:.3}; best against best {:.3})",
                rt2.median,
                rt2.best,
                ort["ort_version"].as_str().unwrap_or("?"),
                rt2.median / median,
                rt2.best / best
            );
        }
        None => println!(
            "peer: {what}: rt2 {:.4} ms (best {:.4}); ONNX Runtime not measured",
            rt2.median, rt2.best
        ),
    }
}

/// Prints the side-by-side line for `what`: rt2's median next to ORT's session creation.
#[allow(dead_code)]
pub fn report(what: &str, rt2_ms: f64, model: &Path) {
    match ort_session(model) {
        Some(ort) => {
            let ort_ms = ort["session_ms"]["median"].as_f64().unwrap_or(f64::NAN);
            println!(
                "peer: {what}: rt2 {rt2_ms:.1} ms, ONNX Runtime {} session creation {ort_ms:.1} ms (ratio {:.3})",
                ort["ort_version"].as_str().unwrap_or("?"),
                rt2_ms / ort_ms
            );
        }
        None => println!("peer: {what}: rt2 {rt2_ms:.1} ms; ONNX Runtime not measured"),
    }
}
