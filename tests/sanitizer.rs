//! The device sanitizer through the device's public API: each check catches the bug planted
//! for it, names the task, the argument and the bytes, and a correct program of the same
//! shape reports nothing.
//!
//! The planted bugs are kernels of the test's own op library (one that sums into its
//! output, as ConvTranspose without a bias once did; one that writes half its output) and
//! misuse of memory and streams.

use std::sync::Arc;

use rt2::npu::device::{Check, SanitizeChecks, SanitizerReport};
use rt2::npu::{Device, DeviceConfig, DevicePtr, Launch, Model, NpuError, Task, TensorArg};
use rt2::ops::TensorRef;
use rt2::ops::{AttrMap, DType, InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut};

fn like_input0(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 2)?;
    Ok(vec![ctx.inputs[0].clone()])
}

/// out = x (+ y): correct.
fn add(_: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = ins[0].slice::<f32>()?;
    let y = ins.get(1).map(|t| t.slice::<f32>()).transpose()?;
    for (i, o) in outs[0].slice_mut::<f32>()?.iter_mut().enumerate() {
        *o = x[i] + y.map_or(0.0, |y| y[i]);
    }
    Ok(())
}

/// out += x: the bug class of issue 23's detector (a sum into memory it never cleared).
fn accumulate(_: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = ins[0].slice::<f32>()?;
    for (o, v) in outs[0].slice_mut::<f32>()?.iter_mut().zip(x) {
        *o += v;
    }
    Ok(())
}

/// Writes the first half of its output only.
fn half(_: &InferCtx, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = ins[0].slice::<f32>()?;
    let o = outs[0].slice_mut::<f32>()?;
    let n = o.len() / 2;
    o[..n].copy_from_slice(&x[..n]);
    Ok(())
}

fn ops() -> Arc<OpRegistry> {
    let mut reg = OpRegistry::default();
    reg.add(OpSpec::new("TestAdd", like_input0).computes(add));
    reg.add(OpSpec::new("TestAccumulate", like_input0).computes(accumulate));
    reg.add(OpSpec::new("TestHalf", like_input0).computes(half));
    Arc::new(reg)
}

fn device_with(sanitize: Option<SanitizeChecks>) -> Device {
    Device::new(DeviceConfig {
        memory_bytes: 1 << 28,
        ops: Some(ops()),
        sanitize,
        ..DeviceConfig::default()
    })
}

fn device() -> Device {
    device_with(Some(SanitizeChecks::ALL))
}

fn f32s(p: DevicePtr, n: usize) -> TensorArg {
    TensorArg::new(p, DType::F32, &[n])
}

fn put(dev: &Device, v: &[f32]) -> DevicePtr {
    let p = dev.malloc(v.len() * 4, dev.default_stream()).unwrap();
    dev.memcpy_h2d(p, bytemuck::cast_slice(v)).unwrap();
    p
}

fn launch(op: &str, ins: &[TensorArg], out: TensorArg) -> Launch {
    Launch::new(op.to_string(), AttrMap::new(), ins.to_vec(), vec![out])
}

fn report(dev: &Device) -> SanitizerReport {
    dev.synchronize_device().ok();
    dev.take_sanitizer_report().expect("the sanitizer is on")
}

/// The findings as (check, kind, op) for compact assertions.
fn kinds(r: &SanitizerReport) -> Vec<(Check, &'static str, Option<String>)> {
    r.findings
        .iter()
        .map(|f| (f.check, f.kind, f.task.op.clone()))
        .collect()
}

const N: usize = 64;

#[test]
fn a_clean_pipeline_on_two_streams_reports_nothing() {
    let dev = device();
    let (s0, s1) = (dev.default_stream(), dev.create_stream());
    let x = put(&dev, &[1.0; N]);
    let (y, z) = (
        dev.malloc(N * 4, s0).unwrap(),
        dev.malloc(N * 4, s1).unwrap(),
    );
    dev.launch(s0, launch("TestAdd", &[f32s(x, N), f32s(x, N)], f32s(y, N)))
        .unwrap();
    let e = dev.create_event();
    dev.record_event(e, s0).unwrap();
    dev.stream_wait_event(s1, e).unwrap();
    dev.launch(s1, launch("TestAdd", &[f32s(y, N)], f32s(z, N)))
        .unwrap();
    dev.synchronize(s1).unwrap();
    let mut out = vec![0f32; N];
    dev.memcpy_d2h(bytemuck::cast_slice_mut(&mut out), z)
        .unwrap();
    assert_eq!(out, vec![2.0; N]);
    let r = report(&dev);
    assert!(r.is_clean(), "{:?}", r.findings);
    assert_eq!(r.launches_checked, 2, "each launch ran twice");
    assert!(r.accesses_checked >= 5);
}

/// A kernel whose outputs depend on what its output memory held, found on a fresh block
/// (zeroed on most allocators, where the sum comes out right: exactly how the detector's
/// ConvTranspose passed every test) at the first byte that differs between the sanitizer's
/// two runs: the first output byte for a sum into the output, the first unwritten byte for
/// a kernel that writes half.
#[test]
fn a_kernel_depending_on_its_output_memory_is_found_at_the_first_byte_that_differs() {
    for (op, first) in [("TestAccumulate", 0), ("TestHalf", N / 2 * 4)] {
        let dev = device();
        let s = dev.default_stream();
        let x = put(&dev, &[3.0; N]);
        let y = dev.malloc(N * 4, s).unwrap();
        dev.launch(s, launch(op, &[f32s(x, N)], f32s(y, N)))
            .unwrap();
        let r = report(&dev);
        let want = (
            Check::Init,
            "output depends on prior memory",
            Some(op.into()),
        );
        assert_eq!(kinds(&r), [want]);
        let f = &r.findings[0];
        assert_eq!(f.address, y.0 + first as u64, "{op}");
        assert!(f.detail.contains("output 0"), "{}", f.detail);
    }
}

#[test]
fn reading_bytes_nothing_wrote_names_the_input_and_the_offset() {
    let dev = device();
    let s = dev.default_stream();
    let x = put(&dev, &[1.0; N]);
    // Half of `w` is written; its second half holds the allocation's poison.
    let w = dev.malloc(N * 4, s).unwrap();
    dev.memcpy_h2d(w, bytemuck::cast_slice(&[1.0f32; N / 2]))
        .unwrap();
    let y = dev.malloc(N * 4, s).unwrap();
    dev.launch(s, launch("TestAdd", &[f32s(x, N), f32s(w, N)], f32s(y, N)))
        .unwrap();
    let r = report(&dev);
    assert_eq!(
        kinds(&r),
        [(Check::Init, "uninitialized read", Some("TestAdd".into()))]
    );
    let f = &r.findings[0];
    assert!(f.detail.contains("input 1"), "{}", f.detail);
    assert!(
        f.detail.contains(&format!("byte {}", N / 2 * 4)),
        "{}",
        f.detail
    );
    assert_eq!(f.address, w.0 + (N / 2 * 4) as u64);
}

#[test]
fn a_reused_block_is_poisoned_and_unwritten_again() {
    let dev = device();
    let s = dev.default_stream();
    let a = put(&dev, &[7.0; N]);
    dev.free(a, s).unwrap();
    dev.synchronize(s).unwrap();
    let b = dev.malloc(N * 4, s).unwrap();
    assert_eq!(a, b, "the cached block comes back");
    let mut bytes = vec![0u8; N * 4];
    dev.memcpy_d2h(&mut bytes, b).unwrap();
    assert!(bytes.iter().all(|&v| v == 0xFF), "poisoned, not 7.0s");
    let r = report(&dev);
    assert_eq!(kinds(&r), [(Check::Init, "uninitialized read", None)]);
}

#[test]
fn use_after_free_is_refused_and_reported_with_the_block_history() {
    let dev = device();
    let s = dev.default_stream();
    let x = put(&dev, &[1.0; N]);
    let y = dev.malloc(N * 4, s).unwrap();
    dev.free(x, s).unwrap();
    let e = dev
        .launch(s, launch("TestAdd", &[f32s(x, N)], f32s(y, N)))
        .unwrap_err();
    assert!(matches!(e, NpuError::UseAfterFree { .. }), "{e}");
    let r = report(&dev);
    assert_eq!(
        kinds(&r),
        [(Check::Mem, "use after free", Some("TestAdd".into()))]
    );
    let h: Vec<&str> = r.findings[0].history.iter().map(|h| h.what).collect();
    assert_eq!(h, ["alloc", "free"], "who allocated it, and who freed it");
    assert_eq!(r.findings[0].history[0].bytes, Some((N * 4) as u64));
}

#[test]
fn double_free_and_out_of_bounds_are_memcheck_findings() {
    let dev = device();
    let s = dev.default_stream();
    let x = put(&dev, &[1.0; N]);
    let y = dev.malloc(N * 4, s).unwrap();
    // One element past the allocation.
    let e = dev
        .launch(s, launch("TestAdd", &[f32s(x, N + 1)], f32s(y, N + 1)))
        .unwrap_err();
    assert!(matches!(e, NpuError::OutOfBounds { .. }), "{e}");
    dev.free(y, s).unwrap();
    assert!(dev.free(y, s).is_err());
    let r = report(&dev);
    assert_eq!(
        kinds(&r),
        [
            (Check::Mem, "out of bounds", Some("TestAdd".into())),
            (Check::Mem, "double free", None)
        ]
    );
    let h: Vec<&str> = r.findings[1].history.iter().map(|h| h.what).collect();
    assert_eq!(h, ["alloc", "free", "free"]);
}

#[test]
fn two_streams_writing_one_buffer_without_an_event_race() {
    let dev = device();
    let (s0, s1) = (dev.default_stream(), dev.create_stream());
    let x = put(&dev, &[1.0; N]);
    let y = dev.malloc(N * 4, s0).unwrap();
    dev.launch(s0, launch("TestAdd", &[f32s(x, N)], f32s(y, N)))
        .unwrap();
    dev.launch(s1, launch("TestAdd", &[f32s(x, N), f32s(x, N)], f32s(y, N)))
        .unwrap();
    let r = report(&dev);
    assert_eq!(kinds(&r), [(Check::Race, "race", Some("TestAdd".into()))]);
    let f = &r.findings[0];
    assert_eq!((f.address, f.bytes), (y.0, (N * 4) as u64));
    let lanes = [
        f.task.lane.as_str(),
        f.other.as_ref().unwrap().lane.as_str(),
    ];
    assert!(
        lanes.contains(&"stream 0") && lanes.contains(&"stream 1"),
        "{lanes:?}"
    );
}

#[test]
fn a_copy_made_at_once_is_checked_as_the_staged_copy_is() {
    let dev = device();
    let (s0, s1) = (dev.default_stream(), dev.create_stream());
    // Written by the copy: a launch reading it after is clean, on any stream, since the
    // host saw the copy finish before it issued the launch.
    let x = dev.malloc(N * 4, s0).unwrap();
    let y = dev.malloc(N * 4, s1).unwrap();
    let ones = [1.0f32; N];
    assert!(matches!(
        dev.memcpy_h2d_if_idle(s0, x, bytemuck::cast_slice(&ones)),
        Some(Ok(()))
    ));
    dev.launch(s1, launch("TestAdd", &[f32s(x, N)], f32s(y, N)))
        .unwrap();
    assert_eq!(kinds(&report(&dev)), []);
    // A launch queued on another stream (behind a callback) writes what the copy writes,
    // with nothing between them: a race, found when the launch runs.
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    let gate = Task::Callback(Arc::new(move || rx.recv().map_err(|e| e.to_string())));
    dev.submit(s1, gate).unwrap();
    dev.launch(s1, launch("TestAdd", &[f32s(y, N)], f32s(x, N)))
        .unwrap();
    assert!(matches!(
        dev.memcpy_h2d_if_idle(s0, x, bytemuck::cast_slice(&ones)),
        Some(Ok(()))
    ));
    tx.send(()).unwrap();
    let r = report(&dev);
    assert_eq!(kinds(&r), [(Check::Race, "race", Some("TestAdd".into()))]);
    let other = r.findings[0].other.as_ref().expect("two sides");
    let sides = [r.findings[0].task.kind, other.kind];
    assert!(sides.contains(&"host-to-device copy"), "{sides:?}");
    // Past the allocation: a memcheck finding, as for the task.
    assert!(matches!(
        dev.memcpy_h2d_if_idle(s0, x, &[0; N * 4 + 4]),
        Some(Err(NpuError::OutOfBounds { .. }))
    ));
    assert_eq!(kinds(&report(&dev)), [(Check::Mem, "out of bounds", None)]);
}

#[test]
fn a_read_on_another_stream_is_ordered_by_an_event_or_a_host_synchronize() {
    for order in ["event", "synchronize", "none"] {
        let dev = device();
        let (s0, s1) = (dev.default_stream(), dev.create_stream());
        let x = put(&dev, &[1.0; N]);
        let y = dev.malloc(N * 4, s0).unwrap();
        let z = dev.malloc(N * 4, s1).unwrap();
        dev.launch(s0, launch("TestAdd", &[f32s(x, N)], f32s(y, N)))
            .unwrap();
        match order {
            "event" => {
                let e = dev.create_event();
                dev.record_event(e, s0).unwrap();
                dev.stream_wait_event(s1, e).unwrap();
            }
            "synchronize" => dev.synchronize(s0).unwrap(),
            _ => {}
        }
        dev.launch(s1, launch("TestAdd", &[f32s(y, N)], f32s(z, N)))
            .unwrap();
        let r = report(&dev);
        let want: Vec<_> = if order == "none" {
            vec![(Check::Race, "race", Some("TestAdd".to_string()))]
        } else {
            Vec::new()
        };
        assert_eq!(kinds(&r), want, "ordered by {order}");
    }
}

#[test]
fn a_model_stream_activated_by_another_is_ordered_after_it() {
    // Stream 0 writes y, then activates stream 1, which reads it: ordered. Stream 2,
    // active at the start too, writes y with nothing ordering it: a race.
    let dev = device();
    let s = dev.default_stream();
    let x = put(&dev, &[1.0; N]);
    let y = dev.malloc(N * 4, s).unwrap();
    let z = dev.malloc(N * 4, s).unwrap();
    let add = |ins: &[TensorArg], out| Task::Launch(Arc::new(launch("TestAdd", ins, out)));
    let clean = Model::builder()
        .stream(vec![
            add(&[f32s(x, N)], f32s(y, N)),
            Task::StreamActivate(1),
        ])
        .inactive_stream(vec![add(&[f32s(y, N)], f32s(z, N))])
        .build()
        .unwrap();
    let clean = dev.load_model(&clean).unwrap();
    dev.execute_model(clean, s).unwrap();
    assert!(report(&dev).is_clean());
    let racy = Model::builder()
        .stream(vec![
            add(&[f32s(x, N)], f32s(y, N)),
            Task::StreamActivate(1),
        ])
        .inactive_stream(vec![add(&[f32s(y, N)], f32s(z, N))])
        .stream(vec![add(&[f32s(x, N), f32s(x, N)], f32s(y, N))])
        .build()
        .unwrap();
    let racy = dev.load_model(&racy).unwrap();
    dev.execute_model(racy, s).unwrap();
    let r = report(&dev);
    assert!(!r.findings.is_empty());
    for f in &r.findings {
        assert_eq!((f.check, f.address), (Check::Race, y.0), "{}", f.line());
    }
}

#[test]
fn off_means_no_report_and_the_old_behaviour() {
    let dev = device_with(None);
    let s = dev.default_stream();
    let x = put(&dev, &[3.0; N]);
    let y = dev.malloc(N * 4, s).unwrap();
    dev.memset(y, 0, N * 4).unwrap();
    dev.launch(s, launch("TestAccumulate", &[f32s(x, N)], f32s(y, N)))
        .unwrap();
    dev.synchronize(s).unwrap();
    assert!(dev.sanitizer_report().is_none());
    let mut out = vec![0f32; N];
    dev.memcpy_d2h(bytemuck::cast_slice_mut(&mut out), y)
        .unwrap();
    assert_eq!(
        out,
        vec![3.0; N],
        "one run, onto the zeroes the memset wrote"
    );
}

#[test]
fn checks_can_be_chosen_one_by_one() {
    assert_eq!(SanitizeChecks::parse("all"), Ok(SanitizeChecks::ALL));
    let race = SanitizeChecks::parse("race").unwrap();
    assert_eq!((race.init, race.mem, race.race), (false, false, true));
    assert!(SanitizeChecks::parse("init,bogus").is_err());
    // initcheck alone sees the accumulating kernel and not the race.
    let dev = device_with(Some(SanitizeChecks::parse("init").unwrap()));
    let (s0, s1) = (dev.default_stream(), dev.create_stream());
    let x = put(&dev, &[1.0; N]);
    let y = dev.malloc(N * 4, s0).unwrap();
    dev.launch(s0, launch("TestAdd", &[f32s(x, N)], f32s(y, N)))
        .unwrap();
    dev.launch(s1, launch("TestAdd", &[f32s(x, N)], f32s(y, N)))
        .unwrap();
    assert!(report(&dev).is_clean());
}
