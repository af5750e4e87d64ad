//! Tests of the capture feature as a whole: every fixture script against its golden JSON
//! report (`RT2_BLESS=1` rewrites them), saved models that survive a round trip
//! through JSON and replay, and a property test that random valid scripts' models give
//! the same buffers replayed from their saved form as executed where they were captured.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::buffers::BufferReport;
use super::device_kernels::Buf;
use super::report;
use super::rim;
use super::runner::{self, Verdict};
use super::script::{self, BufferDecl, Call, DeviceKernel, DeviceSettings, Script, Step};
use super::types::{BufDtype, CaptureMode, CondKind, Scalar};

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/capture");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    v
}

fn run_fixture(path: &Path) -> (runner::Report, runner::Session) {
    let text = std::fs::read_to_string(path).unwrap();
    let script = script::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    runner::run(&script).unwrap()
}

#[test]
fn fixtures_match_their_golden_reports() {
    let paths = fixtures();
    assert!(paths.len() >= 20, "{} fixture scripts", paths.len());
    let update = std::env::var_os("RT2_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for path in &paths {
        let (report, _) = run_fixture(path);
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        // Only the fixture written to fail may fail; every other one holds.
        assert_eq!(
            report.passed(),
            name != "expect-failure",
            "{name}:\n{}",
            report::to_text(&report)
        );
        let json = serde_json::to_string_pretty(&report::to_json(&report)).unwrap() + "\n";
        let golden = path.with_extension("expected.json");
        if update {
            std::fs::write(&golden, &json).unwrap();
        } else if std::fs::read_to_string(&golden).ok().as_deref() != Some(json.as_str()) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "reports differ from their golden files (RT2_BLESS=1 rewrites them): {stale:?}"
    );
}

#[test]
fn every_error_the_fixtures_expect_is_provoked() {
    let mut seen = std::collections::BTreeSet::new();
    for path in fixtures() {
        let (report, _) = run_fixture(&path);
        for s in &report.steps {
            if let (Err(e), Verdict::Ok) = (&s.result, &s.verdict) {
                seen.insert(e.name());
            }
        }
    }
    for want in [
        "ACL_ERROR_INVALID_PARAM",
        "ACL_ERROR_RT_PARAM_INVALID",
        "ACL_ERROR_RT_CAPTURE_DEPENDENCY",
        "ACL_ERROR_RT_STREAM_UNJOINED",
        "ACL_ERROR_RT_MODEL_CAPTURED",
        "ACL_ERROR_RT_STREAM_CAPTURED",
        "ACL_ERROR_RT_STREAM_NOT_CAPTURED",
        "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT",
        "ACL_ERROR_STREAM_CAPTURE_CONFLICT",
        "ACL_ERROR_STREAM_TASK_GROUP_STATUS",
        "ACL_ERROR_STREAM_TASK_GROUP_INTR",
        "ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED",
        "ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD",
        "ACL_ERROR_RT_MODEL_UPDATE_FAILED",
        "ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING",
        "ACL_ERROR_RT_FEATURE_NOT_SUPPORT",
        "ACL_ERROR_RT_INTERNAL_ERROR",
        "ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT",
        "ACL_ERROR_RT_MODEL_EXECUTE",
        "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED",
    ] {
        assert!(seen.contains(want), "no fixture provokes {want}");
    }
}

#[test]
fn saved_models_round_trip_and_replay_like_the_script() {
    for path in fixtures() {
        let (_, session) = run_fixture(&path);
        for c in session.captured() {
            let json = serde_json::to_string(&c.file).unwrap();
            let back = rim::parse(&json).unwrap();
            assert_eq!(back, c.file, "{}: {}", path.display(), c.name);
            rim::load(&back).unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), c.name));
        }
    }
    // while-counter: one execution of the saved model counts 3 bodies, as the script's did.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/capture/while-counter.toml");
    let (_, session) = run_fixture(&path);
    let replay = rim::load(&session.captured()[0].file).unwrap();
    replay.execute(1).unwrap();
    let bufs = replay.buffers().unwrap();
    let x = bufs.iter().find(|b| b.name == "x").unwrap();
    assert_eq!(
        x.values,
        [0, 30, 0, 0].map(Scalar::Int).to_vec(),
        "replayed buffers"
    );
}

#[test]
fn replay_refuses_bad_references_with_the_place() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/capture/cross-stream.toml");
    let (_, session) = run_fixture(&path);
    let good = session.captured()[0].file.clone();
    let mut bad = good.clone();
    bad.model.streams[1].tasks[0] = rim::RimTask::EventWait { event: 99 };
    let e = rim::load(&bad).err().unwrap();
    assert_eq!(e.place, "model.streams[1].tasks[0]");
    assert!(e.message.contains("event #99"), "{e}");
    let mut bad = good.clone();
    bad.buffers.retain(|b| b.name != "a");
    let e = rim::load(&bad).err().unwrap();
    assert!(e.message.contains("no buffer \"a\""), "{e}");
    let e = rim::parse("{\"format\": \"rt2.rim\", \"version\": 2}")
        .err()
        .unwrap();
    assert!(e.place.starts_with("line 1"), "{e}");
    let mut v = serde_json::to_value(&good).unwrap();
    v["version"] = serde_json::json!(7);
    let e = rim::parse(&v.to_string()).err().unwrap();
    assert_eq!(e.place, "version");
}

/// Found by the fuzz target `rim_json` (docs/FUZZING.md): a cascade stream that activated
/// itself made replay run forever.
#[test]
fn replay_refuses_stream_activations_that_could_loop() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/capture/cascade.toml");
    let (_, session) = run_fixture(&path);
    let good = session.captured()[0].file.clone();
    rim::load(&good).unwrap();
    let streams = &good.model.streams;
    let (from, k, to) = streams
        .iter()
        .enumerate()
        .find_map(|(i, s)| {
            s.tasks.iter().enumerate().find_map(|(k, t)| match t {
                rim::RimTask::StreamActivate { stream } => Some((i, k, *stream)),
                _ => None,
            })
        })
        .expect("the cascade fixture chains a stream");
    let mut looped = good.clone();
    looped.model.streams[to as usize]
        .tasks
        .push(rim::RimTask::StreamActivate { stream: to });
    let e = rim::load(&looped).err().unwrap();
    assert!(e.message.contains("another task activates"), "{e}");
    let mut first = good.clone();
    first.model.streams[from].tasks[k] = rim::RimTask::StreamActivate { stream: 0 };
    let e = rim::load(&first).err().unwrap();
    assert_eq!(e.place, format!("model.streams[{from}].tasks[{k}]"));
    assert!(e.message.contains("not a cascade stream"), "{e}");
}

// ---- the property test

/// A random valid script: buffers, one capture on `s0` of kernels, fork/join through
/// `s1`, and conditional tasks (IF, SWITCH, and WHILE over a countdown), then `times`
/// executions. Sub-models are captured on streams of their own, depth one.
#[derive(Debug, Clone)]
struct Gen {
    buffers: Vec<(BufDtype, Vec<i64>)>,
    ops: Vec<Op>,
    times: u32,
}

#[derive(Debug, Clone)]
enum Op {
    /// A kernel on buffer `a` (and `b` when it needs a second one of the same type).
    DeviceKernel {
        which: u8,
        a: usize,
        b: usize,
        v: i64,
    },
    /// Fork to s1, a kernel there, join back.
    Fork {
        which: u8,
        a: usize,
        b: usize,
        v: i64,
    },
    /// A conditional task with `bodies` sub-models of one kernel each.
    Cond {
        kind: u8,
        src: usize,
        bodies: Vec<(u8, usize, usize, i64)>,
    },
}

fn dtype_of(i: u8) -> BufDtype {
    [BufDtype::Int32, BufDtype::Int64, BufDtype::Float32][i as usize % 3]
}

fn value(d: BufDtype, v: i64) -> Scalar {
    if d.is_float() {
        Scalar::Float(v as f64 / 2.0)
    } else {
        Scalar::Int(v)
    }
}

fn buf_name(i: usize) -> String {
    format!("b{i}")
}

/// A kernel over buffers of the script; `a` and `b` are indices, fixed up to agree.
fn kernel(g: &Gen, which: u8, a: usize, b: usize, v: i64) -> DeviceKernel {
    let a = a % g.buffers.len();
    let (da, la) = (g.buffers[a].0, g.buffers[a].1.len());
    // A partner of the same type and length, or `a` itself.
    let b = (0..g.buffers.len())
        .map(|k| (b + k) % g.buffers.len())
        .find(|&k| g.buffers[k].0 == da && g.buffers[k].1.len() == la)
        .unwrap_or(a);
    let (dst, src) = (buf_name(a), buf_name(b));
    match which % 6 {
        0 => DeviceKernel::Fill {
            dst,
            value: value(da, v),
        },
        1 => DeviceKernel::Copy { dst, src },
        2 => DeviceKernel::Add {
            dst,
            a: src.clone(),
            b: src,
        },
        3 => DeviceKernel::AddScalar {
            dst,
            src,
            value: value(da, v),
        },
        4 => DeviceKernel::MulScalar {
            dst,
            src,
            value: value(da, v % 3),
        },
        _ => DeviceKernel::Increment {
            dst,
            index: (v.unsigned_abs() as usize) % la,
            by: value(da, v),
        },
    }
}

fn step(call: Call) -> Step {
    Step {
        line: 0,
        thread: "main".into(),
        expect_error: None,
        call,
    }
}

fn launch(stream: &str, kernel: DeviceKernel) -> Step {
    step(Call::Launch {
        stream: stream.into(),
        kernel,
    })
}

fn script_of(g: &Gen) -> Script {
    let mut steps = vec![
        step(Call::CaptureBegin {
            stream: "s0".into(),
            mode: CaptureMode::Global,
        }),
        step(Call::CaptureGetInfo {
            stream: "s0".into(),
            expect_status: None,
            model: Some("m".into()),
        }),
    ];
    let mut events = 0;
    let mut subs = 0;
    let mut deferred = Vec::new();
    for (i, op) in g.ops.iter().enumerate() {
        match op {
            Op::DeviceKernel { which, a, b, v } => {
                steps.push(launch("s0", kernel(g, *which, *a, *b, *v)))
            }
            Op::Fork { which, a, b, v } => {
                let (f, j) = (format!("f{events}"), format!("j{events}"));
                events += 1;
                steps.push(step(Call::EventRecord {
                    event: f.clone(),
                    stream: "s0".into(),
                }));
                steps.push(step(Call::EventWait {
                    event: f,
                    stream: "s1".into(),
                }));
                steps.push(launch("s1", kernel(g, *which, *a, *b, *v)));
                steps.push(step(Call::EventRecord {
                    event: j.clone(),
                    stream: "s1".into(),
                }));
                steps.push(step(Call::EventWait {
                    event: j,
                    stream: "s0".into(),
                }));
            }
            Op::Cond { kind, src, bodies } => {
                let h = format!("h{i}");
                steps.push(step(Call::CondHandleCreate {
                    model: "m".into(),
                    handle: h.clone(),
                    default: 0,
                    assign_default: false,
                }));
                let src = src % g.buffers.len();
                // WHILE counts a private counter down from |v| % 4, so it ends.
                let kind = [CondKind::If, CondKind::Switch, CondKind::While][*kind as usize % 3];
                let bodies: Vec<_> = match kind {
                    CondKind::If => bodies.iter().take(2).cloned().collect(),
                    CondKind::While => bodies.iter().take(1).cloned().collect(),
                    CondKind::Switch => bodies.clone(),
                };
                let names: Vec<String> = (0..bodies.len())
                    .map(|k| format!("sub{}", subs + k))
                    .collect();
                subs += bodies.len();
                if kind == CondKind::While {
                    let n = bodies[0].3.unsigned_abs() % 4;
                    steps.push(launch(
                        "s0",
                        DeviceKernel::Fill {
                            dst: "counter".into(),
                            value: Scalar::Int(n as i64),
                        },
                    ));
                    steps.push(launch(
                        "s0",
                        DeviceKernel::SetCond {
                            handle: h.clone(),
                            src: "counter".into(),
                            index: 0,
                        },
                    ));
                } else {
                    steps.push(launch(
                        "s0",
                        DeviceKernel::SetCond {
                            handle: h.clone(),
                            src: buf_name(src),
                            index: 0,
                        },
                    ));
                }
                steps.push(step(Call::AddCondTask {
                    stream: "s0".into(),
                    handle: h.clone(),
                    kind,
                    models: names.clone(),
                }));
                for (name, (which, a, b, v)) in names.iter().zip(&bodies) {
                    let mut body = vec![
                        step(Call::CaptureToModelBegin {
                            stream: "sub".into(),
                            model: name.clone(),
                            mode: CaptureMode::Global,
                        }),
                        launch("sub", kernel(g, *which, *a, *b, *v)),
                    ];
                    if kind == CondKind::While {
                        body.push(launch(
                            "sub",
                            DeviceKernel::AddScalar {
                                dst: "counter".into(),
                                src: "counter".into(),
                                value: Scalar::Int(-1),
                            },
                        ));
                        body.push(launch(
                            "sub",
                            DeviceKernel::SetCond {
                                handle: h.clone(),
                                src: "counter".into(),
                                index: 0,
                            },
                        ));
                    }
                    body.push(step(Call::CaptureEnd {
                        stream: "sub".into(),
                        model: None,
                    }));
                    deferred.extend(body);
                }
            }
        }
        // Sub-models are captured right after the task that made them.
        steps.append(&mut deferred);
    }
    steps.push(step(Call::CaptureEnd {
        stream: "s0".into(),
        model: Some("m".into()),
    }));
    steps.push(step(Call::Execute {
        model: "m".into(),
        stream: "run".into(),
        times: g.times,
    }));
    steps.push(step(Call::Synchronize {
        stream: "run".into(),
    }));
    let mut buffers: Vec<BufferDecl> = g
        .buffers
        .iter()
        .enumerate()
        .map(|(i, (d, init))| BufferDecl {
            name: buf_name(i),
            dtype: *d,
            init: init.iter().map(|&v| value(*d, v)).collect(),
            line: 0,
        })
        .collect();
    buffers.push(BufferDecl {
        name: "counter".into(),
        dtype: BufDtype::Int64,
        init: vec![Scalar::Int(0)],
        line: 0,
    });
    Script {
        name: None,
        device: DeviceSettings {
            sq_depth: 5,
            ..DeviceSettings::default()
        },
        buffers,
        steps,
    }
}

fn gen_strategy() -> impl Strategy<Value = Gen> {
    let buffers = prop::collection::vec(
        (0u8..3, prop::collection::vec(-5i64..6, 1..4)).prop_map(|(d, v)| (dtype_of(d), v)),
        1..4,
    );
    let body = (any::<u8>(), any::<usize>(), any::<usize>(), -5i64..6);
    let op = prop_oneof![
        4 => (any::<u8>(), any::<usize>(), any::<usize>(), -5i64..6)
            .prop_map(|(which, a, b, v)| Op::DeviceKernel { which, a, b, v }),
        1 => (any::<u8>(), any::<usize>(), any::<usize>(), -5i64..6)
            .prop_map(|(which, a, b, v)| Op::Fork { which, a, b, v }),
        1 => (any::<u8>(), any::<usize>(), prop::collection::vec(body, 1..4))
            .prop_map(|(kind, src, bodies)| Op::Cond { kind, src, bodies }),
    ];
    (buffers, prop::collection::vec(op, 1..12), 1u32..4).prop_map(|(buffers, ops, times)| Gen {
        buffers,
        ops,
        times,
    })
}

fn values_by_name(bufs: &[BufferReport]) -> Vec<(String, Vec<Scalar>)> {
    bufs.iter()
        .map(|b| (b.name.clone(), b.values.clone()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn replaying_a_saved_model_gives_the_buffers_of_running_it(g in gen_strategy()) {
        let script = script_of(&g);
        let (report, session) = runner::run(&script).unwrap();
        prop_assert!(report.passed(), "{}", report::to_text(&report));
        let saved = &session.captured()[0].file;
        let json = serde_json::to_string(saved).unwrap();
        let replay = rim::load(&rim::parse(&json).unwrap()).unwrap();
        replay.execute(g.times).unwrap();
        let replayed = values_by_name(&replay.buffers().unwrap());
        let direct = values_by_name(&report.buffers);
        for (name, values) in &replayed {
            let d = direct.iter().find(|(n, _)| n == name).map(|(_, v)| v);
            prop_assert_eq!(Some(values), d, "buffer {}", name);
        }
    }
}

#[test]
fn kernel_checks_refuse_disagreeing_arguments() {
    let b = |dtype, len| Buf {
        ptr: crate::npu::device::DevicePtr(0x1000),
        dtype,
        len,
    };
    type K = super::device_kernels::DeviceKernelCall<super::acl::CondHandle>;
    let ok: K = K::Add {
        dst: b(BufDtype::Int32, 3),
        a: b(BufDtype::Int32, 3),
        b: b(BufDtype::Int32, 3),
    };
    assert!(ok.check().is_ok());
    let bad: K = K::Add {
        dst: b(BufDtype::Int32, 3),
        a: b(BufDtype::Int64, 3),
        b: b(BufDtype::Int32, 3),
    };
    assert_eq!(bad.check(), Err(super::AclError::InvalidParam));
    let bad: K = K::Increment {
        dst: b(BufDtype::Int32, 3),
        index: 3,
        by: Scalar::Int(1),
    };
    assert_eq!(bad.check(), Err(super::AclError::InvalidParam));
    let bad: K = K::Fill {
        dst: b(BufDtype::Int64, 1),
        value: Scalar::Float(0.5),
    };
    assert_eq!(bad.check(), Err(super::AclError::InvalidParam));
}
