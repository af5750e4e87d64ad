//! The emulated device through its public API: stream order, events and notifies across
//! streams, full queues, faults and recovery, out of memory and its recovery path,
//! stream-ordered reuse, misuse as error values, asynchronous copies, launches on device
//! memory and models run more than once.
//!
//! No test asserts on timing. Where a test needs a stream to be busy, it submits a gate: a
//! host callback that signals it started and then blocks until the test opens it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, bounded};

use rt2::npu::device::{CondKind, EventStatus, HostBuf, code};
use rt2::npu::{
    Device, DeviceConfig, DevicePtr, Launch, Model, ModelId, NpuError, StreamId, Task, TensorArg,
};
use rt2::ops::{
    AttrMap, DType, InferCtx, OpError, OpRegistry, OpSpec, Tensor, TensorMeta, TensorMut, TensorRef,
};

// ---- a small op library of the test's own

fn like_input0(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 2)?;
    Ok(vec![ctx.inputs[0].clone()])
}

fn add(_: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    let (a, b) = (ins[0].slice::<f32>()?, ins[1].slice::<f32>()?);
    for (o, (x, y)) in outs[0].slice_mut::<f32>()?.iter_mut().zip(a.iter().zip(b)) {
        *o = x + y;
    }
    Ok(())
}

fn matmul_infer(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let (a, b) = (ctx.inputs[0].shape.clone(), ctx.inputs[1].shape.clone());
    match (a.as_deref(), b.as_deref()) {
        (Some(&[m, k]), Some(&[k2, n])) if k == k2 => {
            Ok(vec![TensorMeta::new(DType::F32, &[m, n])])
        }
        _ => Err(ctx.input_error(1, "does not multiply")),
    }
}

fn matmul(_: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    let (a, b) = (ins[0].view::<f32>()?, ins[1].view::<f32>()?);
    let (m, k, n) = (ins[0].shape[0], ins[0].shape[1], ins[1].shape[1]);
    let mut o = outs[0].view_mut::<f32>()?;
    for i in 0..m {
        for j in 0..n {
            o[[i, j]] = (0..k).map(|p| a[[i, p]] * b[[p, j]]).sum();
        }
    }
    Ok(())
}

fn fail(ctx: &InferCtx, _: &[TensorRef], _: &mut [TensorMut]) -> Result<(), OpError> {
    Err(ctx.compute_error("asked to fail"))
}

fn panics(_: &InferCtx, _: &[TensorRef], _: &mut [TensorMut]) -> Result<(), OpError> {
    panic!("a kernel bug")
}

fn nonzero(_: &InferCtx, ins: &[TensorRef]) -> Result<Vec<Tensor>, OpError> {
    let idx: Vec<i64> = (ins[0].slice::<f32>()?.iter().enumerate())
        .filter(|(_, v)| **v != 0.0)
        .map(|(i, _)| i as i64)
        .collect();
    Ok(vec![Tensor::from_vec(&[idx.len()], &idx)])
}

/// Where `TestWhere` kernels ran: the thread, and the size of the rayon pool it was in
/// (its parallel loops' reach).
static WHERE: Mutex<Vec<(std::thread::ThreadId, usize)>> = Mutex::new(Vec::new());

/// A copy that notes where it ran.
fn where_am_i(_: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    WHERE
        .lock()
        .unwrap()
        .push((std::thread::current().id(), rayon::current_num_threads()));
    outs[0]
        .slice_mut::<f32>()?
        .copy_from_slice(ins[0].slice::<f32>()?);
    Ok(())
}

fn ops() -> Arc<OpRegistry> {
    let mut reg = OpRegistry::default();
    reg.add(OpSpec::new("TestWhere", like_input0).computes(where_am_i));
    reg.add(OpSpec::new("TestAdd", like_input0).computes(add));
    reg.add(OpSpec::new("TestMatMul", matmul_infer).computes(matmul));
    reg.add(OpSpec::new("TestFail", like_input0).computes(fail));
    reg.add(OpSpec::new("TestPanic", like_input0).computes(panics));
    reg.add(
        OpSpec::new("TestNonZero", like_input0)
            .computes_alloc(nonzero)
            .data_dependent(),
    );
    Arc::new(reg)
}

/// A device without the sanitizer: these tests pin the device's own mechanics, which the
/// sanitizer changes on purpose (it withholds a stream's immediate reuse of what it freed,
/// fills allocations with 0xFF, runs each launch twice), and some misuse memory on
/// purpose. tests/sanitizer.rs runs the same kinds of work under it.
fn device_with(memory_bytes: u64, queue_depth: usize) -> Device {
    Device::new(DeviceConfig {
        memory_bytes,
        queue_depth,
        ops: Some(ops()),
        check_launch_shapes: true,
        sanitize: None,
        ..DeviceConfig::default()
    })
}

fn device() -> Device {
    device_with(1 << 30, 64)
}

// ---- helpers

fn put(dev: &Device, v: &[f32]) -> DevicePtr {
    let s = dev.default_stream();
    let p = dev.malloc(v.len() * 4, s).unwrap();
    dev.memcpy_h2d(p, bytemuck::cast_slice(v)).unwrap();
    p
}

fn get(dev: &Device, p: DevicePtr, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    dev.memcpy_d2h(bytemuck::cast_slice_mut(&mut out), p)
        .unwrap();
    out
}

fn f32s(p: DevicePtr, shape: &[usize]) -> TensorArg {
    TensorArg::new(p, DType::F32, shape)
}

fn launch(op: &'static str, ins: Vec<TensorArg>, outs: Vec<TensorArg>) -> Launch {
    Launch::new(op, AttrMap::new(), ins, outs)
}

/// A host callback holding its stream until opened (or dropped).
struct Gate {
    started: Receiver<()>,
    open: Sender<()>,
}

impl Gate {
    fn on(dev: &Device, stream: StreamId) -> Gate {
        let (started_tx, started) = bounded(1);
        let (open, open_rx) = bounded::<()>(1);
        let task = Task::Callback(Arc::new(move || {
            let _ = started_tx.try_send(());
            open_rx.recv().map_err(|e| e.to_string())
        }));
        dev.submit(stream, task).unwrap();
        Gate { started, open }
    }
    /// Returns once the stream is inside the gate.
    fn wait_started(&self) {
        self.started.recv().unwrap();
    }
    fn open(self) {
        self.open.send(()).unwrap();
    }
}

/// A callback appending `i` to `log`.
fn note(log: &Arc<Mutex<Vec<usize>>>, i: usize) -> Task {
    let log = log.clone();
    Task::Callback(Arc::new(move || {
        log.lock().unwrap().push(i);
        Ok(())
    }))
}

// ---- streams

#[test]
fn tasks_on_a_stream_run_in_submission_order() {
    let dev = device();
    let s = dev.create_stream();
    let log = Arc::new(Mutex::new(Vec::new()));
    let p = put(&dev, &[0.0; 4]);
    let q = put(&dev, &[0.0; 4]);
    for i in 0..200 {
        dev.submit(s, note(&log, i)).unwrap();
    }
    // memset, add into q, then overwrite p: q must see the first value of p
    dev.memcpy_h2d_async(
        s,
        p,
        &HostBuf::from_bytes(bytemuck::cast_slice(&[1.5f32; 4])),
    )
    .unwrap();
    let sum = launch(
        "TestAdd",
        vec![f32s(p, &[4]), f32s(p, &[4])],
        vec![f32s(q, &[4])],
    );
    dev.launch(s, sum).unwrap();
    dev.memset_async(s, p, 0, 16).unwrap();
    dev.synchronize(s).unwrap();
    assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
    assert_eq!(get(&dev, q, 4), vec![3.0; 4]);
    assert_eq!(get(&dev, p, 4), vec![0.0; 4]);
    assert!(dev.stream_done(s).unwrap());
}

#[test]
fn an_event_orders_work_across_streams() {
    let dev = device();
    let (a, b) = (dev.create_stream(), dev.create_stream());
    let p = put(&dev, &[0.0; 8]);
    let q = put(&dev, &[0.0; 8]);
    let e = dev.create_event();
    assert_eq!(dev.query_event(e), Ok(EventStatus::NotRecorded));
    let gate = Gate::on(&dev, a);
    dev.memset_async(a, p, 7, 32).unwrap();
    dev.record_event(e, a).unwrap();
    dev.stream_wait_event(b, e).unwrap();
    dev.memcpy_d2d_async(b, q, p, 32).unwrap();
    gate.wait_started();
    assert_eq!(
        dev.query_event(e),
        Ok(EventStatus::Pending),
        "a is held at the gate"
    );
    gate.open();
    dev.synchronize(b).unwrap();
    let mut bytes = [0u8; 32];
    dev.memcpy_d2h(&mut bytes, q).unwrap();
    assert_eq!(bytes, [7; 32], "b copied after a wrote");
    dev.synchronize_event(e).unwrap();
    assert_eq!(dev.query_event(e), Ok(EventStatus::Complete));
}

#[test]
fn a_notify_orders_work_across_streams() {
    let dev = device();
    let (a, b) = (dev.create_stream(), dev.create_stream());
    let p = put(&dev, &[0.0; 2]);
    let q = put(&dev, &[0.0; 2]);
    let n = dev.create_notify();
    // the wait is issued before the record: a notify waits for whatever record comes
    dev.wait_notify(b, n).unwrap();
    dev.memcpy_d2d_async(b, q, p, 8).unwrap();
    dev.memset_async(a, p, 1, 8).unwrap();
    dev.record_notify(n, a).unwrap();
    dev.synchronize(b).unwrap();
    let mut bytes = [0u8; 8];
    dev.memcpy_d2h(&mut bytes, q).unwrap();
    assert_eq!(bytes, [1; 8]);
}

#[test]
fn a_full_queue_blocks_the_submitter() {
    let dev = device_with(1 << 20, 4);
    let s = dev.create_stream();
    let log = Arc::new(Mutex::new(Vec::new()));
    let gate = Gate::on(&dev, s);
    gate.wait_started(); // the gate left the queue: four places are free
    for i in 0..4 {
        dev.try_submit(s, note(&log, i)).unwrap();
    }
    let full = dev.try_submit(s, note(&log, 99)).unwrap_err();
    assert_eq!(
        full,
        NpuError::QueueFull {
            stream: s,
            depth: 4
        }
    );
    assert_eq!(full.code(), code::STREAM_TASK_FULL);
    let submitter = {
        let (dev, log) = (dev.clone(), log.clone());
        std::thread::spawn(move || dev.submit(s, note(&log, 4)))
    };
    gate.open();
    submitter.join().unwrap().unwrap();
    dev.synchronize(s).unwrap();
    assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3, 4]);
}

// ---- faults

#[test]
fn a_fault_surfaces_at_synchronize_and_the_stream_then_works_again() {
    let dev = device();
    let s = dev.create_stream();
    let p = put(&dev, &[1.0; 4]);
    dev.launch(
        s,
        launch("TestFail", vec![f32s(p, &[4])], vec![f32s(p, &[4])]),
    )
    .unwrap();
    dev.memset_async(s, p, 0, 16).unwrap(); // skipped: the stream has faulted
    let err = dev.synchronize(s).unwrap_err();
    assert!(
        matches!(&err, NpuError::Kernel { op, .. } if op == "TestFail"),
        "{err}"
    );
    assert_eq!(err.code(), code::AICORE_EXCEPTION);
    assert_eq!(
        get(&dev, p, 4),
        vec![1.0; 4],
        "the memset after the fault was skipped"
    );
    dev.synchronize(s).unwrap();
    dev.memset_async(s, p, 0, 16).unwrap();
    dev.synchronize(s).unwrap();
    assert_eq!(get(&dev, p, 4), vec![0.0; 4], "the stream works again");
}

#[test]
fn a_kernel_panic_and_an_unknown_op_are_faults() {
    let dev = device();
    let s = dev.default_stream();
    let p = put(&dev, &[1.0; 4]);
    dev.launch(
        s,
        launch("TestPanic", vec![f32s(p, &[4])], vec![f32s(p, &[4])]),
    )
    .unwrap();
    let err = dev.synchronize(s).unwrap_err();
    assert!(
        matches!(&err, NpuError::KernelPanic { msg, .. } if msg == "a kernel bug"),
        "{err}"
    );
    dev.launch(s, launch("Nope", vec![], vec![])).unwrap();
    let err = dev.synchronize(s).unwrap_err();
    assert_eq!(err, NpuError::UnknownOp { op: "Nope".into() });
    assert_eq!(err.code(), code::KERNEL_LOOKUP);
}

#[test]
fn a_fault_reaches_the_stream_waiting_on_its_event() {
    let dev = device();
    let (a, b) = (dev.create_stream(), dev.create_stream());
    let p = put(&dev, &[1.0; 4]);
    let e = dev.create_event();
    dev.launch(
        a,
        launch("TestFail", vec![f32s(p, &[4])], vec![f32s(p, &[4])]),
    )
    .unwrap();
    dev.record_event(e, a).unwrap();
    dev.stream_wait_event(b, e).unwrap();
    let err = dev.synchronize(b).unwrap_err();
    assert!(
        matches!(&err, NpuError::Upstream { event, source } if *event == e && matches!(**source, NpuError::Kernel { .. })),
        "{err}"
    );
    assert!(matches!(dev.synchronize(a), Err(NpuError::Kernel { .. })));
    dev.synchronize_device().unwrap();
}

#[test]
fn a_launch_checks_output_shapes_against_inference() {
    let dev = device();
    let s = dev.default_stream();
    let p = put(&dev, &[1.0; 4]);
    dev.launch(
        s,
        launch(
            "TestAdd",
            vec![f32s(p, &[4]), f32s(p, &[4])],
            vec![f32s(p, &[2, 2])],
        ),
    )
    .unwrap();
    assert!(matches!(
        dev.synchronize(s),
        Err(NpuError::BadLaunch { .. })
    ));
}

// ---- misuse

#[test]
fn misuse_of_memory_is_an_error_value() {
    let dev = device();
    let s = dev.default_stream();
    let p = dev.malloc(100, s).unwrap();
    // pointer arithmetic inside the allocation is fine
    dev.memset(p.offset(50), 1, 50).unwrap();
    dev.memset_async(s, p.offset(96), 1, 4).unwrap();
    let oob = dev.memset_async(s, p.offset(96), 1, 5).unwrap_err();
    assert_eq!(
        oob,
        NpuError::OutOfBounds {
            ptr: p.offset(96),
            len: 5,
            base: p,
            size: 100
        }
    );
    assert_eq!(oob.code(), code::PARAM_INVALID);
    let launch_oob = launch(
        "TestAdd",
        vec![f32s(p, &[30]), f32s(p, &[30])],
        vec![f32s(p, &[30])],
    );
    assert!(matches!(
        dev.launch(s, launch_oob),
        Err(NpuError::OutOfBounds { .. })
    ));
    assert_eq!(
        dev.memset(DevicePtr(0), 0, 1),
        Err(NpuError::InvalidAddress { ptr: DevicePtr(0) })
    );
    dev.synchronize(s).unwrap();
    dev.free(p, s).unwrap();
    assert_eq!(
        dev.memset_async(s, p, 0, 1),
        Err(NpuError::UseAfterFree { ptr: p, base: p })
    );
    let mut byte = [0u8];
    assert!(matches!(
        dev.memcpy_d2h(&mut byte, p.offset(10)),
        Err(NpuError::UseAfterFree { .. })
    ));
    let double = dev.free(p, s).unwrap_err();
    assert_eq!(double, NpuError::InvalidFree { ptr: p });
    assert_eq!(double.code(), code::MEMORY_FREE);
    dev.synchronize(s).unwrap();
}

#[test]
fn misuse_of_ids_and_events_is_an_error_value() {
    let dev = device();
    let s = dev.default_stream();
    let e = dev.create_event();
    let err = dev.stream_wait_event(s, e).unwrap_err();
    assert_eq!(err, NpuError::EventNotRecorded { event: e });
    assert_eq!(err.code(), code::PARAM_INVALID);
    assert_eq!(
        dev.synchronize_event(e),
        Err(NpuError::EventNotRecorded { event: e })
    );
    let ghost = StreamId(77);
    let err = dev.synchronize(ghost).unwrap_err();
    assert_eq!(err, NpuError::InvalidStream(ghost));
    assert_eq!(err.code(), code::INVALID_HANDLE);
    dev.destroy_event(e).unwrap();
    assert_eq!(dev.record_event(e, s), Err(NpuError::InvalidEvent(e)));
    assert!(matches!(
        dev.submit(s, Task::StreamActivate(0)),
        Err(NpuError::TaskNotSupported { .. })
    ));
    let t = dev.create_stream();
    dev.memset_async(t, put(&dev, &[0.0]), 0, 4).unwrap();
    dev.destroy_stream(t).unwrap();
    assert_eq!(dev.synchronize(t), Err(NpuError::InvalidStream(t)));
    let host = dev.malloc_host(8);
    let bad = Task::MemcpyH2D {
        dst: put(&dev, &[0.0; 4]),
        src: host,
        offset: 4,
        len: 8,
    };
    assert!(matches!(
        dev.submit(s, bad),
        Err(NpuError::HostRange { .. })
    ));
}

// ---- memory

#[test]
fn out_of_memory_is_an_error_and_the_cache_is_recycled_to_recover() {
    let dev = device_with(4 << 20, 16);
    let s = dev.default_stream();
    let p = dev.malloc(4 << 20, s).unwrap();
    let err = dev.malloc(1, s).unwrap_err();
    assert!(
        matches!(err, NpuError::OutOfMemory { requested: 1, capacity, .. } if capacity == 4 << 20)
    );
    assert_eq!(err.code(), code::MEMORY_ALLOCATION);
    assert_eq!(dev.memory_stats().ooms, 1);
    dev.free(p, s).unwrap();

    // a small block leaves a cached 4 MiB segment split; a 3 MiB request cannot use it
    // until the allocator unmaps the segment and maps a new one
    let small = dev.malloc(1000, s).unwrap();
    dev.free(small, s).unwrap();
    dev.synchronize(s).unwrap();
    let before = dev.memory_stats();
    let big = dev.malloc(3 << 20, s).unwrap();
    let after = dev.memory_stats();
    assert_eq!(
        big, p,
        "the merged free block is reused, no unmapping needed"
    );
    assert_eq!(after.segment_maps, before.segment_maps);
    dev.free(big, s).unwrap();
    dev.synchronize(s).unwrap();
    dev.empty_cache();
    assert_eq!(dev.memory_stats().reserved, 0);

    let a = dev.malloc(1000, s).unwrap(); // maps a 2 MiB segment
    dev.free(a, s).unwrap();
    let b = dev.malloc(3 << 20, s).unwrap(); // 2 MiB left: recycle, then map 4 MiB
    let stats = dev.memory_stats();
    assert_eq!(stats.segment_unmaps, 2, "the empty_cache and the recovery");
    assert_eq!(stats.reserved, 4 << 20);
    assert!(stats.oom_recoveries >= 2);
    dev.free(b, s).unwrap();
}

#[test]
fn a_host_allocation_the_host_cannot_give_is_out_of_memory_not_an_abort() {
    // A capacity far past the host's: the segment's host memory is refused, and the
    // allocation fails as device out-of-memory; the device goes on serving.
    let dev = device_with(u64::MAX, 16);
    let s = dev.default_stream();
    let err = dev.malloc(1 << 62, s).unwrap_err();
    assert!(
        matches!(err, NpuError::OutOfMemory { requested, .. } if requested == 1 << 62),
        "{err}"
    );
    assert_eq!(err.code(), code::MEMORY_ALLOCATION);
    let stats = dev.memory_stats();
    assert_eq!((stats.reserved, stats.segments), (0, 0), "nothing mapped");
    let p = put(&dev, &[1.0, 2.0]);
    assert_eq!(get(&dev, p, 2), [1.0, 2.0]);
}

#[test]
fn the_default_capacity_is_half_the_hosts_memory() {
    let total_kib: Option<u64> = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    });
    let want = total_kib.map_or(8 << 30, |k| k * 1024 / 2);
    assert_eq!(DeviceConfig::default().memory_bytes, want);
    assert_eq!(rt2::npu::device::default_memory_bytes(), want);
}

#[test]
fn out_of_memory_waits_for_the_stream_that_freed_the_memory() {
    let dev = device_with(1 << 20, 16);
    let (a, b) = (dev.create_stream(), dev.create_stream());
    let p = dev.malloc(1 << 20, a).unwrap();
    let gate = Gate::on(&dev, a);
    dev.memset_async(a, p, 1, 1 << 20).unwrap();
    dev.free(p, a).unwrap(); // pending on a, which is held at the gate
    let opener = {
        let dev = dev.clone();
        std::thread::spawn(move || {
            // opens the gate once the allocation below is in its recovery path
            while dev.memory_stats().oom_recoveries == 0 {
                std::thread::yield_now();
            }
            gate.open();
        })
    };
    let q = dev.malloc(1 << 20, b).unwrap();
    assert_eq!(q, p, "reused once a passed the free");
    opener.join().unwrap();
    assert_eq!(dev.memory_stats().oom_recoveries, 1);
    assert_eq!(dev.memory_stats().segment_maps, 1);
    dev.synchronize_device().unwrap();
}

#[test]
fn a_block_freed_on_a_stream_goes_to_another_only_after_that_stream_passed_the_free() {
    let dev = device();
    let (a, b) = (dev.create_stream(), dev.create_stream());
    let gate = Gate::on(&dev, a);
    let p = dev.malloc(512, a).unwrap();
    dev.memset_async(a, p, 1, 512).unwrap();
    dev.free(p, a).unwrap();
    let q = dev.malloc(512, b).unwrap();
    assert_ne!(q, p, "a has not passed the free");
    let r = dev.malloc(512, a).unwrap();
    assert_eq!(r, p, "a's own later work is ordered after its earlier work");
    dev.free(r, a).unwrap();
    gate.open();
    dev.synchronize(a).unwrap();
    let s = dev.malloc(512, b).unwrap();
    assert_eq!(s, p, "a passed the free");
    assert_eq!(dev.memory_stats().segment_maps, 1);
}

#[test]
fn steady_state_allocation_maps_nothing() {
    let dev = device();
    let s = dev.default_stream();
    let x = put(&dev, &[1.0; 256]);
    let warm = dev.memory_stats().segment_maps;
    for _ in 0..100 {
        let t = dev.malloc(1024, s).unwrap();
        let u = dev.malloc(4096, s).unwrap();
        dev.launch(
            s,
            launch(
                "TestAdd",
                vec![f32s(x, &[256]), f32s(x, &[256])],
                vec![f32s(t, &[256])],
            ),
        )
        .unwrap();
        dev.memcpy_d2d_async(s, u, t, 1024).unwrap();
        dev.free(t, s).unwrap();
        dev.free(u, s).unwrap();
    }
    dev.synchronize(s).unwrap();
    let stats = dev.memory_stats();
    assert_eq!(stats.segment_maps, warm);
    assert_eq!(stats.allocated, 1024, "only x");
    assert!(stats.peak_allocated <= 1024 * 6);
    assert!(
        stats
            .to_string()
            .starts_with("device memory: 0.0 MiB allocated"),
        "{stats}"
    );
}

#[test]
fn an_async_copy_keeps_the_host_memory_it_reads() {
    let dev = device();
    let s = dev.create_stream();
    let p = dev.malloc(64, s).unwrap();
    let gate = Gate::on(&dev, s);
    let src = dev.malloc_host(64);
    src.write(&[9; 64]);
    dev.memcpy_h2d_async(s, p, &src).unwrap();
    drop(src); // released by the host before the copy ran
    assert_eq!(
        dev.memory_stats().host_in_use,
        64,
        "the task still holds it"
    );
    let dst = dev.malloc_host(64);
    dev.memcpy_d2h_async(s, &dst, p).unwrap();
    gate.open();
    dev.synchronize(s).unwrap();
    assert_eq!(dst.to_vec(), vec![9; 64]);
    assert_eq!(dev.memory_stats().host_in_use, 64, "only dst now");
}

#[test]
fn an_idle_stream_takes_host_bytes_at_once_and_a_busy_or_capturing_one_declines() {
    let dev = device();
    let s = dev.create_stream();
    let p = dev.malloc(16, s).unwrap();
    let bytes: Vec<u8> = (0..16).collect();
    assert!(matches!(dev.memcpy_h2d_if_idle(s, p, &bytes), Some(Ok(()))));
    let mut back = [0u8; 16];
    dev.memcpy_d2h(&mut back, p).unwrap();
    assert_eq!(
        back.as_slice(),
        bytes.as_slice(),
        "copied before it returned"
    );
    // Work queued ahead: the caller stages and submits instead, keeping the order.
    let gate = Gate::on(&dev, s);
    gate.wait_started();
    assert!(dev.memcpy_h2d_if_idle(s, p, &[7; 16]).is_none());
    gate.open();
    dev.synchronize(s).unwrap();
    dev.begin_capture(s).unwrap();
    assert!(dev.memcpy_h2d_if_idle(s, p, &[7; 16]).is_none(), "captured");
    dev.end_capture(s).unwrap();
    // Past the allocation: refused, as the task's submission is, and nothing written.
    assert!(matches!(
        dev.memcpy_h2d_if_idle(s, p, &[7; 32]),
        Some(Err(NpuError::OutOfBounds { .. }))
    ));
    dev.synchronize(s).unwrap();
    dev.memcpy_d2h(&mut back, p).unwrap();
    assert_eq!(back.as_slice(), bytes.as_slice());
}

#[test]
fn devices_are_independent_values() {
    let (d1, d2) = (device(), device());
    let p1 = put(&d1, &[1.0]);
    let p2 = put(&d2, &[2.0]);
    assert_eq!(p1, p2, "the same address space layout");
    assert_eq!(get(&d1, p1, 1), vec![1.0]);
    assert_eq!(get(&d2, p2, 1), vec![2.0]);
}

// ---- launches

#[test]
fn launches_compute_on_device_memory() {
    let dev = device();
    let s = dev.default_stream();
    let a = put(&dev, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = put(&dev, &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let c = put(&dev, &[0.0; 4]);
    let mm = launch(
        "TestMatMul",
        vec![f32s(a, &[2, 3]), f32s(b, &[3, 2])],
        vec![f32s(c, &[2, 2])],
    );
    dev.launch(s, mm).unwrap();
    // in place: c = c + c, the output is one of the inputs
    dev.launch(
        s,
        launch(
            "TestAdd",
            vec![f32s(c, &[4]), f32s(c, &[4])],
            vec![f32s(c, &[4])],
        ),
    )
    .unwrap();
    // sub-ranges: the second half of a plus the first half
    let half = a.offset(12);
    dev.launch(
        s,
        launch(
            "TestAdd",
            vec![f32s(a, &[3]), f32s(half, &[3])],
            vec![f32s(half, &[3])],
        ),
    )
    .unwrap();
    dev.synchronize(s).unwrap();
    assert_eq!(get(&dev, c, 4), vec![8.0, 10.0, 20.0, 22.0]);
    assert_eq!(get(&dev, a, 6), vec![1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
}

#[test]
fn a_data_dependent_launch_allocates_its_outputs() {
    let dev = device();
    let s = dev.default_stream();
    let x = put(&dev, &[0.0, 3.0, 0.0, 1.0, 2.0]);
    let outs = dev
        .launch_alloc_outputs(
            s,
            Launch::allocating("TestNonZero", AttrMap::new(), vec![f32s(x, &[5])], 1),
        )
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(outs.len(), 1);
    assert_eq!(
        (outs[0].dtype, outs[0].shape.clone()),
        (DType::I64, vec![3])
    );
    let mut idx = [0i64; 3];
    dev.memcpy_d2h(bytemuck::cast_slice_mut(&mut idx), outs[0].ptr)
        .unwrap();
    assert_eq!(idx, [1, 3, 4]);
    dev.free(outs[0].ptr, s).unwrap();
    // launched plainly, a data-dependent op is a fault
    dev.launch(
        s,
        Launch::allocating("TestNonZero", AttrMap::new(), vec![f32s(x, &[5])], 1),
    )
    .unwrap();
    assert!(matches!(
        dev.synchronize(s),
        Err(NpuError::TaskNotSupported { .. })
    ));
}

// ---- models

/// y = (x + x) @ w on two model streams joined by an event, the second activating a third
/// that counts runs; x comes from a host buffer and y goes to one.
fn two_stream_model(dev: &Device, x: &HostBuf, y: &HostBuf, runs: &Arc<AtomicUsize>) -> Model {
    let s = dev.default_stream();
    let xd = dev.malloc(16, s).unwrap();
    let x2 = dev.malloc(16, s).unwrap();
    let w = put(dev, &[1.0, 2.0, 3.0, 4.0]);
    let yd = dev.malloc(16, s).unwrap();
    let e = dev.create_event();
    let count = runs.clone();
    Model::builder()
        .name("two streams")
        .stream(vec![
            Task::MemcpyH2D {
                dst: xd,
                src: x.clone(),
                offset: 0,
                len: 16,
            },
            Task::Launch(Arc::new(launch(
                "TestAdd",
                vec![f32s(xd, &[4]), f32s(xd, &[4])],
                vec![f32s(x2, &[4])],
            ))),
            Task::EventRecord(e),
        ])
        .stream(vec![
            Task::Memset {
                dst: yd,
                value: 0xff,
                len: 16,
            },
            Task::EventWait(e),
            Task::Launch(Arc::new(launch(
                "TestMatMul",
                vec![f32s(x2, &[2, 2]), f32s(w, &[2, 2])],
                vec![f32s(yd, &[2, 2])],
            ))),
            Task::MemcpyD2H {
                dst: y.clone(),
                offset: 0,
                src: yd,
                len: 16,
            },
            Task::StreamActivate(2),
        ])
        .inactive_stream(vec![Task::Callback(Arc::new(move || {
            count.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }))])
        .build()
        .unwrap()
}

#[test]
fn a_model_runs_twice_to_the_same_result() {
    let dev = device();
    let s = dev.create_stream();
    let x = HostBuf::from_bytes(bytemuck::cast_slice(&[1.0f32, 2.0, 3.0, 4.0]));
    let y = dev.malloc_host(16);
    let runs = Arc::new(AtomicUsize::new(0));
    let model = two_stream_model(&dev, &x, &y, &runs);
    let m = dev.load_model(&model).unwrap();
    dev.execute_model(m, s).unwrap();
    dev.synchronize(s).unwrap();
    let first = y.to_vec();
    y.write(&[0; 16]);
    dev.execute_model(m, s).unwrap();
    dev.synchronize(s).unwrap();
    let second = y.to_vec();
    assert_eq!(first, second);
    let v: &[f32] = bytemuck::cast_slice(&first);
    // x + x = [2, 4, 6, 8]; [[2, 4], [6, 8]] @ [[1, 2], [3, 4]]
    assert_eq!(v, &[14.0, 20.0, 30.0, 44.0]);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the activated stream ran once a run"
    );
    dev.unload_model(m).unwrap();
    assert_eq!(dev.execute_model(m, s), Err(NpuError::InvalidModel(m)));
}

#[test]
fn a_model_fault_is_the_executing_streams_fault() {
    let dev = device();
    let s = dev.default_stream();
    let p = put(&dev, &[1.0; 4]);
    let model = Model::builder()
        .stream(vec![Task::Launch(Arc::new(launch(
            "TestFail",
            vec![f32s(p, &[4])],
            vec![f32s(p, &[4])],
        )))])
        .build()
        .unwrap();
    let m = dev.load_model(&model).unwrap();
    dev.execute_model(m, s).unwrap();
    let err = dev.synchronize(s).unwrap_err();
    assert!(
        matches!(&err, NpuError::ModelRun { model, .. } if *model == m),
        "{err}"
    );
    assert_eq!(err.code(), code::MODEL_EXECUTE);
    dev.memset_async(s, p, 0, 16).unwrap();
    dev.synchronize(s).unwrap();
    // a model whose memory was freed is refused when executed
    dev.free(p, s).unwrap();
    assert!(matches!(
        dev.execute_model(m, s),
        Err(NpuError::UseAfterFree { .. })
    ));
}

#[test]
fn models_are_checked_when_built_and_loaded() {
    let dev = device();
    let e = dev.create_event();
    let twice = Model::builder()
        .stream(vec![Task::EventRecord(e), Task::EventRecord(e)])
        .build();
    assert!(matches!(twice, Err(NpuError::ModelBuild { .. })));
    let nowhere = Model::builder()
        .stream(vec![Task::StreamActivate(3)])
        .build();
    assert!(matches!(nowhere, Err(NpuError::ModelBuild { .. })));
    let idle = Model::builder().inactive_stream(vec![]).build();
    assert!(matches!(idle, Err(NpuError::ModelBuild { .. })));
    let p = put(&dev, &[0.0; 4]);
    let alloc = Model::builder()
        .stream(vec![Task::Launch(Arc::new(Launch::allocating(
            "TestNonZero",
            AttrMap::new(),
            vec![f32s(p, &[4])],
            1,
        )))])
        .build()
        .unwrap();
    assert!(matches!(
        dev.load_model(&alloc),
        Err(NpuError::TaskNotSupported { .. })
    ));
    // waiting on an event the model does not record, never recorded outside either
    let waits = Model::builder()
        .stream(vec![Task::EventWait(e)])
        .build()
        .unwrap();
    let m = dev.load_model(&waits).unwrap();
    let s = dev.default_stream();
    assert_eq!(
        dev.execute_model(m, s),
        Err(NpuError::EventNotRecorded { event: e })
    );
    dev.record_event(e, s).unwrap();
    dev.execute_model(m, s).unwrap();
    dev.synchronize(s).unwrap();
}

/// A model whose one stream runs a callback that appends `tag` to `log`.
fn logging_model(log: &Arc<std::sync::Mutex<Vec<u32>>>, tag: u32) -> Model {
    let log = log.clone();
    Model::builder()
        .stream(vec![Task::Callback(Arc::new(move || {
            log.lock().unwrap().push(tag);
            Ok(())
        }))])
        .build()
        .unwrap()
}

#[test]
fn an_update_applies_from_the_next_issued_execution() {
    let dev = device();
    let s = dev.create_stream();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let m = dev.load_model(&logging_model(&log, 1)).unwrap();
    // Hold the stream so both executions are queued before the update.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = std::sync::Mutex::new(rx);
    dev.submit(
        s,
        Task::Callback(Arc::new(move || {
            rx.lock().unwrap().recv().map_err(|e| e.to_string())
        })),
    )
    .unwrap();
    dev.execute_model(m, s).unwrap();
    dev.update_model(m, &logging_model(&log, 2)).unwrap();
    dev.execute_model(m, s).unwrap();
    tx.send(()).unwrap();
    dev.synchronize(s).unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        vec![1, 2],
        "issued before the update: old tasks"
    );
    // An update keeps the stream count.
    let two = Model::builder()
        .stream(vec![])
        .stream(vec![])
        .build()
        .unwrap();
    assert!(matches!(
        dev.update_model(m, &two),
        Err(NpuError::ModelBuild { .. })
    ));
}

#[test]
fn cond_tasks_pick_sub_models_by_the_value_in_device_memory() {
    let dev = Device::new(DeviceConfig {
        ops: Some(ops()),
        max_while_iterations: 5,
        ..DeviceConfig::default()
    });
    let s = dev.create_stream();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let subs: Vec<ModelId> = (0..3)
        .map(|i| dev.load_model(&logging_model(&log, i)).unwrap())
        .collect();
    let value = dev.malloc(8, s).unwrap();
    let run = |kind: CondKind, models: &[ModelId], v: u64| {
        let parent = Model::builder()
            .stream(vec![Task::Cond {
                kind,
                value,
                models: models.to_vec(),
            }])
            .build()
            .unwrap();
        dev.memcpy_h2d(value, &v.to_le_bytes()).unwrap();
        log.lock().unwrap().clear();
        let p = dev.load_model(&parent).unwrap();
        dev.execute_model(p, s).unwrap();
        let r = dev.synchronize(s);
        (r, log.lock().unwrap().clone())
    };
    assert_eq!(run(CondKind::If, &subs[..2], 7), (Ok(()), vec![0]));
    assert_eq!(run(CondKind::If, &subs[..2], 0), (Ok(()), vec![1]));
    assert_eq!(run(CondKind::If, &subs[..1], 0), (Ok(()), vec![]));
    assert_eq!(run(CondKind::Switch, &subs, 2), (Ok(()), vec![2]));
    assert_eq!(run(CondKind::Switch, &subs, 3), (Ok(()), vec![]));
    // A WHILE whose body never clears the value: five runs, then the watchdog.
    let (r, ran) = run(CondKind::While, &subs[..1], 1);
    assert_eq!(ran, vec![0; 5]);
    let err = r.unwrap_err();
    assert!(
        err.to_string().contains("WHILE task ran its body 5 times"),
        "{err}"
    );
    // Sizes a kind does not take, and a cond task outside a model, are refused.
    assert!(matches!(
        Model::builder()
            .stream(vec![Task::Cond {
                kind: CondKind::While,
                value,
                models: subs.clone(),
            }])
            .build(),
        Err(NpuError::ModelBuild { .. })
    ));
    assert!(matches!(
        dev.submit(
            s,
            Task::Cond {
                kind: CondKind::If,
                value,
                models: subs[..1].to_vec(),
            }
        ),
        Err(NpuError::TaskNotSupported { .. })
    ));
}

#[test]
fn a_capturing_stream_records_its_tasks_instead_of_running_them() {
    let dev = device();
    let (s, t) = (dev.create_stream(), dev.create_stream());
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let push = |tag: u32| {
        let log = log.clone();
        Task::Callback(Arc::new(move || {
            log.lock().unwrap().push(tag);
            Ok(())
        }))
    };
    dev.begin_capture(s).unwrap();
    assert!(matches!(
        dev.begin_capture(s),
        Err(NpuError::Capture { .. })
    ));
    dev.submit(s, push(1)).unwrap();
    dev.submit(s, push(2)).unwrap();
    // Nothing ran; other streams and a synchronize of the capturing one are refused.
    assert!(matches!(
        dev.submit(t, push(9)),
        Err(NpuError::Capture { .. })
    ));
    assert!(matches!(dev.synchronize(s), Err(NpuError::Capture { .. })));
    let tasks = dev.end_capture(s).unwrap();
    assert_eq!(tasks.len(), 2);
    assert!(log.lock().unwrap().is_empty());
    assert!(matches!(dev.end_capture(s), Err(NpuError::Capture { .. })));
    let m = dev
        .load_model(&Model::builder().stream(tasks).build().unwrap())
        .unwrap();
    dev.execute_model(m, t).unwrap();
    dev.execute_model(m, t).unwrap();
    dev.synchronize(t).unwrap();
    assert_eq!(*log.lock().unwrap(), vec![1, 2, 1, 2]);
    // Submissions run at once again.
    dev.submit(s, push(3)).unwrap();
    dev.synchronize(s).unwrap();
    assert_eq!(log.lock().unwrap().last(), Some(&3));
}

#[test]
fn a_model_runs_right_after_segments_are_unmapped_and_remapped() {
    let dev = device();
    let s = dev.create_stream();
    let x = put(&dev, &[1.0, 2.0, 3.0, 4.0]);
    let y = put(&dev, &[0.0; 4]);
    let m = dev
        .load_model(
            &Model::builder()
                .stream(vec![Task::Launch(Arc::new(launch(
                    "TestAdd",
                    vec![f32s(x, &[4]), f32s(y, &[4])],
                    vec![f32s(y, &[4])],
                )))])
                .build()
                .unwrap(),
        )
        .unwrap();
    dev.execute_model(m, s).unwrap();
    dev.synchronize(s).unwrap();
    // A large block maps a segment of its own; freed and emptied, it is unmapped, which
    // makes the model's launches resolve again.
    let big = dev.malloc(64 << 20, s).unwrap();
    dev.free(big, s).unwrap();
    dev.synchronize(s).unwrap();
    let before = dev.memory_stats();
    dev.empty_cache();
    assert!(
        dev.memory_stats().segments < before.segments,
        "a segment was unmapped"
    );
    dev.execute_model(m, s).unwrap();
    dev.execute_model(m, s).unwrap();
    dev.synchronize(s).unwrap();
    assert_eq!(get(&dev, y, 4), vec![3.0, 6.0, 9.0, 12.0]);
}

// ---- launch records: run at once on an idle stream, through their cached resolution

#[test]
fn a_launch_record_reuses_its_resolution_only_while_memory_is_unchanged() {
    let dev = device();
    let s = dev.create_stream();
    let (x, y, z) = (
        put(&dev, &[1.0; 4]),
        put(&dev, &[2.0; 4]),
        put(&dev, &[0.0; 4]),
    );
    let mut record = Arc::new(launch(
        "TestAdd",
        vec![f32s(x, &[4]), f32s(y, &[4])],
        vec![f32s(z, &[4])],
    ));
    for _ in 0..3 {
        dev.launch_shared(s, &mut record).unwrap();
    }
    dev.synchronize(s).unwrap();
    assert_eq!(get(&dev, z, 4), vec![3.0; 4]);

    // Rebound to other memory: the launch reads and writes the new ranges.
    let w = put(&dev, &[5.0; 4]);
    Arc::get_mut(&mut record)
        .unwrap()
        .rebind(|ins, _| ins[1] = f32s(w, &[4]));
    dev.launch_shared(s, &mut record).unwrap();
    dev.synchronize(s).unwrap();
    assert_eq!(get(&dev, z, 4), vec![6.0; 4]);

    // A segment unmapped since: resolved again, still right.
    let big = dev.malloc(64 << 20, s).unwrap();
    dev.free(big, s).unwrap();
    dev.synchronize(s).unwrap();
    dev.empty_cache();
    dev.memcpy_h2d(x, bytemuck::cast_slice(&[10f32; 4]))
        .unwrap();
    dev.launch_shared(s, &mut record).unwrap();
    dev.synchronize(s).unwrap();
    assert_eq!(get(&dev, z, 4), vec![15.0; 4]);

    // An input freed since: the launch is refused when issued, as any launch is.
    dev.free(w, s).unwrap();
    let err = dev.launch_shared(s, &mut record).unwrap_err();
    assert!(matches!(err, NpuError::UseAfterFree { .. }), "{err}");
    dev.synchronize(s).unwrap();
    assert_eq!(get(&dev, z, 4), vec![15.0; 4], "nothing ran");
}

#[test]
fn a_launch_record_specialized_for_its_operands_follows_their_rebinding() {
    // The op library's Mul has kernels specialized for its operands' dtype and shapes,
    // chosen when a record is first run and kept until it is rebound. Each rebinding here
    // keeps the byte ranges of the one before where it can, so a kept choice would run.
    for check_launch_shapes in [false, true] {
        let dev = Device::new(DeviceConfig {
            check_launch_shapes,
            ..DeviceConfig::default()
        });
        let s = dev.create_stream();
        let (x, y, z) = (
            put(&dev, &[1.0, 2.0, 3.0, 4.0]),
            put(&dev, &[10.0, 20.0, 30.0, 40.0]),
            put(&dev, &[0.0; 4]),
        );
        let mut record = Arc::new(Launch::new(
            "Mul",
            AttrMap::new(),
            vec![f32s(x, &[4]), f32s(y, &[4])],
            vec![f32s(z, &[4])],
        ));
        for _ in 0..2 {
            dev.launch_shared(s, &mut record).unwrap();
        }
        dev.synchronize(s).unwrap();
        assert_eq!(get(&dev, z, 4), [10.0, 40.0, 90.0, 160.0]);

        let i32s = |p: DevicePtr, shape: &[usize]| TensorArg::new(p, DType::I32, shape);
        let get_i32 = |p: DevicePtr, n: usize| -> Vec<i32> {
            bytemuck::cast_slice(&get(&dev, p, n)).to_vec()
        };
        let put_i32 = |p: DevicePtr, v: &[i32]| dev.memcpy_h2d(p, bytemuck::cast_slice(v)).unwrap();
        let mut rebind = |ins: Vec<TensorArg>, out: TensorArg| {
            Arc::get_mut(&mut record).unwrap().rebind(|i, o| {
                *i = ins;
                *o = vec![out];
            });
            dev.launch_shared(s, &mut record).unwrap();
            dev.synchronize(s).unwrap();
        };

        // The same ranges as int32 (a float kernel would multiply denormals to zero).
        put_i32(x, &[1, 2, 3, -4]);
        put_i32(y, &[10, 20, 30, 40]);
        rebind(vec![i32s(x, &[4]), i32s(y, &[4])], i32s(z, &[4]));
        assert_eq!(get_i32(z, 4), [10, 40, 90, -160]);

        // One element broadcast (a kernel for two whole operands would read past it).
        put_i32(y, &[-5]);
        rebind(vec![i32s(x, &[4]), i32s(y, &[1])], i32s(z, &[4]));
        assert_eq!(get_i32(z, 4), [-5, -10, -15, 20]);

        // A broadcast no specialized kernel takes: [2, 1] by [1, 2].
        put_i32(y, &[10, 100]);
        rebind(vec![i32s(x, &[2, 1]), i32s(y, &[1, 2])], i32s(z, &[2, 2]));
        assert_eq!(get_i32(z, 4), [10, 100, 20, 200]);
    }
}

#[test]
fn a_launch_on_a_busy_stream_runs_in_stream_order() {
    let dev = device();
    let s = dev.create_stream();
    let (x, z) = (put(&dev, &[1.0; 4]), put(&dev, &[0.0; 4]));
    let mut record = Arc::new(launch(
        "TestAdd",
        vec![f32s(x, &[4]), f32s(x, &[4])],
        vec![f32s(z, &[4])],
    ));
    // Idle: the launch has run when the call returns.
    dev.launch_shared(s, &mut record).unwrap();
    assert!(dev.stream_done(s).unwrap());
    assert_eq!(get(&dev, z, 4), vec![2.0; 4]);

    // Busy: the copy and the launch wait behind the gate, in order.
    let gate = Gate::on(&dev, s);
    gate.wait_started();
    let staged = dev.malloc_host(16);
    staged.write(bytemuck::cast_slice(&[4f32; 4]));
    dev.memcpy_h2d_async(s, x, &staged).unwrap();
    dev.launch_shared(s, &mut record).unwrap();
    assert!(!dev.stream_done(s).unwrap());
    assert_eq!(get(&dev, z, 4), vec![2.0; 4], "not run yet");
    gate.open();
    dev.synchronize(s).unwrap();
    assert_eq!(get(&dev, z, 4), vec![8.0; 4], "after the copy");
}

#[test]
fn a_fault_taken_inline_surfaces_at_synchronize() {
    let dev = device();
    let s = dev.create_stream();
    let p = put(&dev, &[1.0; 4]);
    let q = put(&dev, &[0.0; 4]);
    let mut failing = Arc::new(launch("TestFail", vec![f32s(p, &[4])], vec![f32s(p, &[4])]));
    dev.launch_shared(s, &mut failing).unwrap();
    // The stream is faulted: a later data task is skipped until the fault is taken.
    let mut add = Arc::new(launch(
        "TestAdd",
        vec![f32s(p, &[4]), f32s(p, &[4])],
        vec![f32s(q, &[4])],
    ));
    dev.launch_shared(s, &mut add).unwrap();
    assert!(dev.synchronize(s).is_err());
    assert_eq!(get(&dev, q, 4), vec![0.0; 4], "skipped while faulted");
    dev.launch_shared(s, &mut add).unwrap();
    dev.synchronize(s).unwrap();
    assert_eq!(get(&dev, q, 4), vec![2.0; 4]);
}

/// A launch issued to an idle stream from a thread in no rayon pool computes on that
/// thread whatever its size, in a pool of the thread's own as large as the device has
/// compute cores (its parallel loops split over that many threads). The pool is the
/// thread's for life: after a device of one core, a device of two gets small kernels
/// computed there alone and large ones (64 KiB or more) on its compute cores; after a
/// device of two, a device of one gets its large kernels run by its stream's worker, in
/// a one-thread pool. Either way the result is the copy.
#[test]
fn the_issuing_thread_computes_its_kernels_in_a_pool_of_its_own() {
    // (cores of a device the thread launched to first, cores, floats each way,
    // computed on the issuing thread, threads of the pool it computed in)
    for (first, threads, n, here, pool) in [
        (None, 1, 1 << 20, true, 1),
        (None, 2, 1 << 12, true, 2),
        (None, 2, 1 << 20, true, 2),
        (Some(1), 2, 1 << 12, true, 1),
        (Some(1), 2, 1 << 20, false, 2),
        (Some(2), 1, 1 << 20, false, 1),
    ] {
        let case = format!("first {first:?}, {threads} threads, {n}");
        let make = |threads| {
            Device::new(DeviceConfig {
                ops: Some(ops()),
                compute_threads: threads,
                // Where a kernel runs, counted: the sanitizer would run it twice.
                sanitize: None,
                ..DeviceConfig::default()
            })
        };
        let copy = |dev: &Device, n: usize| {
            let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let (x, s) = (put(dev, &v), dev.default_stream());
            let y = dev.malloc(n * 4, s).unwrap();
            let mut l = Arc::new(launch(
                "TestWhere",
                vec![f32s(x, &[n])],
                vec![f32s(y, &[n])],
            ));
            dev.launch_shared(s, &mut l).unwrap();
            dev.synchronize(s).unwrap();
            assert_eq!(get(dev, y, n), v);
        };
        let (before, dev) = (first.map(make), make(threads));
        // A fresh thread, in no rayon pool until its first launch makes it join one.
        let (issued, ran) = std::thread::spawn(move || {
            if let Some(before) = &before {
                copy(before, 16);
                WHERE.lock().unwrap().clear();
            }
            copy(&dev, n);
            let ran: Vec<_> = WHERE.lock().unwrap().drain(..).collect();
            (std::thread::current().id(), ran)
        })
        .join()
        .unwrap();
        assert_eq!(ran.len(), 1, "{case}");
        assert_eq!(ran[0].0 == issued, here, "{case}: ran on the issuer");
        assert_eq!(ran[0].1, pool, "{case}: the kernel's pool");
    }
}

#[test]
fn a_kept_stream_handle_runs_launches_only_on_its_live_stream_of_its_device() {
    let dev = device();
    let s = dev.create_stream();
    let kept = dev.stream_ref(s).unwrap();
    assert_eq!(kept.id(), s);
    let (x, z) = (put(&dev, &[1.0; 4]), put(&dev, &[0.0; 4]));
    let mut record = launch(
        "TestAdd",
        vec![f32s(x, &[4]), f32s(x, &[4])],
        vec![f32s(z, &[4])],
    );
    // Idle: runs here, now.
    dev.launch_on(&kept, &mut record).unwrap().unwrap();
    assert_eq!(get(&dev, z, 4), vec![2.0; 4]);

    // Busy: not run here; the caller submits it instead, and it runs in stream order.
    let gate = Gate::on(&dev, s);
    gate.wait_started();
    dev.memcpy_h2d(x, bytemuck::cast_slice(&[3f32; 4])).unwrap();
    assert!(dev.launch_on(&kept, &mut record).is_none());
    gate.open();
    dev.synchronize(s).unwrap();
    assert_eq!(
        get(&dev, z, 4),
        vec![2.0; 4],
        "nothing ran through the handle"
    );

    // A handle of another device runs nothing on this one.
    let other = device();
    let theirs = other.stream_ref(other.default_stream()).unwrap();
    assert!(dev.launch_on(&theirs, &mut record).is_none());

    // Destroyed: the handle runs nothing, and submitting by id names the stream.
    dev.destroy_stream(s).unwrap();
    assert!(dev.launch_on(&kept, &mut record).is_none());
    assert_eq!(get(&dev, z, 4), vec![2.0; 4]);
    let err = dev.submit(s, Task::Launch(Arc::new(record))).unwrap_err();
    assert!(
        matches!(err, NpuError::InvalidStream(id) if id == s),
        "{err}"
    );
    assert!(matches!(
        dev.stream_ref(s).unwrap_err(),
        NpuError::InvalidStream(_)
    ));
}
