//! ACL Graph execution cost: a captured model of 10,000 small kernel tasks executed on
//! the emulated device, against issuing the same 10,000 launches from the host one by one
//! (`aclrtLaunchKernel` on a stream that is not capturing), both waited for with one
//! synchronize. Target (docs/PERFORMANCE.md): the captured model costs at most a fifth,
//! per task, of the host launches.
//!
//! The kernel is `add_scalar` on a 16-element float32 buffer, in place; the capture uses
//! the default `sq_depth` (1024), so the model is a chain of ten cascade streams.
//!
//! `cargo bench --bench capture`; besides criterion's report it prints ns per task.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};

use rt2::capture::acl::{Acl, AclConfig, CondHandle, ModelRI};
use rt2::capture::device_kernels::{Buf, DeviceKernelCall};
use rt2::capture::{BufDtype, CaptureMode, Scalar};
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
    let mut g = c.benchmark_group("capture");
    g.throughput(Throughput::Elements(TASKS as u64));
    g.bench_function("10k host launches", |b| b.iter(|| host_launches(&st)));
    g.bench_function("10k-task captured model", |b| b.iter(|| captured(&st)));
    g.finish();
    c.final_summary();
}
