//! Device task cost: what submitting a task and having it complete costs, per task.
//!
//! - `memset`: 10,000 small memsets on one stream, then one synchronize.
//! - `launch`: 10,000 tiny kernel launches (an add of 16 floats) on one stream, then one
//!   synchronize.
//! - `event round trip`: 1,000 ping-pongs between two streams (a records, b waits, b
//!   records, a waits), then synchronize both.
//! - `synchronized memset`: one memset and a synchronize, 1,000 times: the latency of a
//!   single task with the host waiting for it.
//!
//! `cargo bench --bench device`; besides criterion's report it prints ns per task.
//! docs/PERFORMANCE.md holds the recorded numbers.

// The allocator the rt2 binary uses, so the numbers are the ones users get.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};

use rt2::npu::{Device, DeviceConfig, DevicePtr, Launch, StreamId, TensorArg};
use rt2::ops::{AttrMap, DType};
use rt2::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut, TensorRef};

const TASKS: usize = 10_000;
const ROUND_TRIPS: usize = 1_000;

fn like_input0(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    Ok(vec![ctx.inputs[0].clone()])
}

fn add(_: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    let (a, b) = (ins[0].slice::<f32>()?, ins[1].slice::<f32>()?);
    for (o, (x, y)) in outs[0].slice_mut::<f32>()?.iter_mut().zip(a.iter().zip(b)) {
        *o = x + y;
    }
    Ok(())
}

fn device() -> Device {
    let mut ops = OpRegistry::default();
    ops.add(OpSpec::new("BenchAdd", like_input0).computes(add));
    Device::new(DeviceConfig {
        memory_bytes: 1 << 30,
        queue_depth: 1024,
        ops: Some(Arc::new(ops)),
        check_launch_shapes: false,
        compute_threads: 1,
        ..DeviceConfig::default()
    })
}

struct Setup {
    dev: Device,
    s: StreamId,
    t: StreamId,
    p: DevicePtr,
    add: Launch,
}

fn setup() -> Setup {
    let dev = device();
    let (s, t) = (dev.create_stream(), dev.create_stream());
    let p = dev.malloc(4096, s).unwrap();
    let arg = |off: u64| TensorArg::new(p.offset(off), DType::F32, &[16]);
    let add = Launch::new(
        "BenchAdd",
        AttrMap::new(),
        vec![arg(0), arg(64)],
        vec![arg(128)],
    );
    Setup { dev, s, t, p, add }
}

fn memsets(x: &Setup) {
    for _ in 0..TASKS {
        x.dev.memset_async(x.s, x.p, 1, 64).unwrap();
    }
    x.dev.synchronize(x.s).unwrap();
}

fn launches(x: &Setup) {
    for _ in 0..TASKS {
        x.dev.launch(x.s, x.add.clone()).unwrap();
    }
    x.dev.synchronize(x.s).unwrap();
}

fn round_trips(x: &Setup, e: rt2::npu::EventId, f: rt2::npu::EventId) {
    for _ in 0..ROUND_TRIPS {
        x.dev.record_event(e, x.s).unwrap();
        x.dev.stream_wait_event(x.t, e).unwrap();
        x.dev.record_event(f, x.t).unwrap();
        x.dev.stream_wait_event(x.s, f).unwrap();
    }
    x.dev.synchronize(x.s).unwrap();
    x.dev.synchronize(x.t).unwrap();
}

fn synchronized(x: &Setup) {
    for _ in 0..ROUND_TRIPS {
        x.dev.memset_async(x.s, x.p, 1, 64).unwrap();
        x.dev.synchronize(x.s).unwrap();
    }
}

/// The best of five runs, in ns per unit.
fn per_unit(units: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / units as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let x = setup();
    let (e, f) = (x.dev.create_event(), x.dev.create_event());
    // Prime the event so the first wait has a record.
    x.dev.record_event(f, x.t).unwrap();

    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("device");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Elements(TASKS as u64));
    g.bench_function("memset x10000", |b| b.iter(|| memsets(&x)));
    g.bench_function("launch x10000", |b| b.iter(|| launches(&x)));
    g.throughput(Throughput::Elements(ROUND_TRIPS as u64));
    g.bench_function("event round trip x1000", |b| {
        b.iter(|| round_trips(&x, e, f))
    });
    g.bench_function("synchronized memset x1000", |b| b.iter(|| synchronized(&x)));
    g.finish();
    c.final_summary();

    println!("per task (best of 5):");
    println!(
        "  memset, submit + complete:      {:8.0} ns",
        per_unit(TASKS, || memsets(&x))
    );
    println!(
        "  launch, submit + complete:      {:8.0} ns",
        per_unit(TASKS, || launches(&x))
    );
    println!(
        "  event round trip (4 tasks):     {:8.0} ns",
        per_unit(ROUND_TRIPS, || round_trips(&x, e, f))
    );
    println!(
        "  memset + synchronize:           {:8.0} ns",
        per_unit(ROUND_TRIPS, || synchronized(&x))
    );
}
