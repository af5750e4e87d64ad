//! ACL Graph execution cost: a captured model of 10,000 small kernel tasks executed on
//! the emulated device, against issuing the same 10,000 launches from the host one by one
//! (`aclrtLaunchKernel` on a stream that is not capturing), both waited for with one
//! synchronize. Target (docs/PERFORMANCE.md): the captured model costs at most a fifth,
//! per task, of the host launches.
//!
//! The kernel is `add_scalar` on a 16-element float32 buffer, in place; the capture uses
//! the default `sq_depth` (1024), so the model is a chain of ten cascade streams.
//!
//! Two more costs, each printed once: parsing and checking a capture script of 100,000
//! steps (target: well under a second; the parser is linear in the script), and one
//! WHILE iteration whose body is one tiny launch, a WHILE whose condition never clears run
//! to a watchdog of 200,000 (target: a few microseconds an iteration).
//!
//! `cargo bench --bench capture`; besides criterion's report it prints ns per task.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};

use rt2::capture::acl::{Acl, AclConfig, CondHandle, ModelRI};
use rt2::capture::device_kernels::{Buf, DeviceKernelCall};
use rt2::capture::{AclError, BufDtype, CaptureMode, CondKind, Scalar, script};
use rt2::npu::device::StreamId;

const TASKS: usize = 10_000;

struct Setup {
    acl: Acl,
    s: StreamId,
    call: DeviceKernelCall<CondHandle>,
    model: ModelRI,
}

fn setup() -> Setup {
    let acl = Acl::new(AclConfig::default());
    let s = acl.create_stream().expect("a stream");
    let ptr = acl.malloc(16 * 4).expect("memory");
    let x = Buf {
        ptr,
        dtype: BufDtype::Float32,
        len: 16,
    };
    let call = DeviceKernelCall::AddScalar {
        dst: x,
        src: x,
        value: Scalar::Float(1.0),
    };
    let c = acl.create_stream().expect("a stream");
    acl.capture_begin(c, CaptureMode::Global).expect("begins");
    for _ in 0..TASKS {
        acl.launch_kernel(c, call).expect("captured");
    }
    let model = acl.capture_end(c, true).expect("ends").expect("a model");
    Setup {
        acl,
        s,
        call,
        model,
    }
}

fn host_launches(st: &Setup) {
    for _ in 0..TASKS {
        st.acl.launch_kernel(st.s, st.call).expect("launches");
    }
    st.acl.synchronize(st.s).expect("runs");
}

fn captured(st: &Setup) {
    st.acl.execute_async(st.model, st.s).expect("executes");
    st.acl.synchronize(st.s).expect("runs");
}

/// Median ns per task over `runs` timed runs after two warm-ups.
fn per_task(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e9 / TASKS as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// A script of `n` launch steps.
fn long_script(n: usize) -> String {
    let mut text = String::from("version = 1\n\n[buffers]\nx = { dtype = \"int32\", len = 4 }\n");
    for _ in 0..n {
        text.push_str(
            "\n[[step]]\ncall = \"launch\"\nstream = \"s0\"\nkernel = \"increment\"\ndst = \"x\"\n",
        );
    }
    text
}

/// Median seconds of `runs` calls of `f` after one warm-up.
fn median_secs(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

const WATCHDOG: u64 = 200_000;

/// A captured model of one WHILE whose condition is set to 1 and never cleared, its body
/// one `increment` of a 1-element buffer, on a device whose watchdog is [`WATCHDOG`].
fn spinning_while() -> (Acl, ModelRI) {
    let acl = Acl::new(AclConfig {
        max_while_iterations: WATCHDOG,
        ..AclConfig::default()
    });
    let buf = |dtype| Buf {
        ptr: acl.malloc(8).expect("memory"),
        dtype,
        len: 1,
    };
    let (one, runs) = (buf(BufDtype::Int32), buf(BufDtype::Int64));
    acl.write(one.ptr, &1i32.to_le_bytes()).expect("written");
    let (s0, s1) = (
        acl.create_stream().expect("a stream"),
        acl.create_stream().expect("a stream"),
    );
    acl.capture_begin(s0, CaptureMode::Global).expect("begins");
    let top = acl.capture_get_info(s0).expect("info").1.expect("a model");
    let h = acl.cond_handle_create(top, 0, false).expect("a handle");
    let set = DeviceKernelCall::SetCond {
        cond: h,
        src: one,
        index: 0,
    };
    acl.launch_kernel(s0, set).expect("captured");
    let body = acl
        .add_cond_task(s0, h, CondKind::While, 1)
        .expect("a WHILE")[0];
    acl.capture_to_model_begin(s1, body, CaptureMode::Global)
        .expect("begins");
    let inc = DeviceKernelCall::Increment {
        dst: runs,
        index: 0,
        by: Scalar::Int(1),
    };
    acl.launch_kernel(s1, inc).expect("captured");
    acl.capture_end(s1, false).expect("ends");
    let m = acl.capture_end(s0, true).expect("ends").expect("a model");
    (acl, m)
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let st = setup();
    let host = per_task(31, || host_launches(&st));
    let graph = per_task(31, || captured(&st));
    println!(
        "capture: 10,000 host launches {host:.1} ns per task; the captured model {graph:.1} ns per task; ratio {:.3} (target <= 0.2)",
        graph / host
    );
    let text = long_script(100_000);
    let parse = median_secs(5, || {
        let script = script::parse(&text).expect("parses");
        assert_eq!(script.steps.len(), 100_000);
    });
    println!(
        "capture: a script of 100,000 steps ({} bytes) parsed and checked in {:.1} ms",
        text.len(),
        parse * 1e3
    );
    // A faulted model cannot execute again: a fresh one for each timed run.
    let mut t: Vec<f64> = (0..3)
        .map(|_| {
            let (acl, spin) = spinning_while();
            let run = acl.create_stream().expect("a stream");
            let start = Instant::now();
            acl.execute_async(spin, run).expect("executes");
            // The watchdog ends it: the execution faults, as it must.
            assert_eq!(acl.synchronize(run), Err(AclError::ModelExecute));
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    let while_run = t[1];
    println!(
        "capture: a WHILE of one-launch bodies to a watchdog of {WATCHDOG}: {:.1} ms, {:.0} ns per iteration",
        while_run * 1e3,
        while_run * 1e9 / WATCHDOG as f64
    );
    let mut g = c.benchmark_group("capture");
    g.throughput(Throughput::Elements(TASKS as u64));
    g.bench_function("10k host launches", |b| b.iter(|| host_launches(&st)));
    g.bench_function("10k-task captured model", |b| b.iter(|| captured(&st)));
    g.finish();
    c.final_summary();
}
