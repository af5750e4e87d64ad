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
        // Only the fixtures written to fail may fail: a failed expectation, and the
        // hazards planted for the sanitizer (on in debug builds: their golden files list
        // its findings); every other one holds.
        assert_eq!(
            report.passed(),
            name != "expect-failure" && !name.starts_with("sanitize-"),
            "{name}:\n{}",
            report::to_text(&report)
        );
        let json = serde_json::to_string_pretty(&report::to_json(&report)).unwrap() + "\n";
        let golden = path.with_extension("expected.json");
        if update {
            std::fs::write(&golden, &json).unwrap();
        } else {
            let expected = std::fs::read_to_string(&golden).unwrap_or_default();
            if expected != json {
                stale.push(format!("{name}: {}", first_difference(&expected, &json)));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "reports differ from their golden files (RT2_BLESS=1 rewrites them):\n{}",
        stale.join("\n")
    );
}

/// Where a report first departs from its golden file: the line number and both lines,
/// so a failure says which field moved without a rerun.
fn first_difference(expected: &str, actual: &str) -> String {
    let (mut e, mut a) = (expected.lines(), actual.lines());
    for line in 1.. {
        match (e.next(), a.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (None, None) => break,
            (x, y) => {
                return format!(
                    "line {line}: expected {:?}, got {:?}",
                    x.unwrap_or("<end>"),
                    y.unwrap_or("<end>")
                );
            }
        }
    }
    "trailing whitespace differs".to_string()
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
            rim::load(&back, &Default::default())
                .unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), c.name));
        }
    }
    // while-counter: one execution of the saved model counts 3 bodies, as the script's did.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/capture/while-counter.toml");
    let (_, session) = run_fixture(&path);
    let replay = rim::load(&session.captured()[0].file, &Default::default()).unwrap();
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
    let e = rim::load(&bad, &Default::default()).err().unwrap();
    assert_eq!(e.place, "model.streams[1].tasks[0]");
    assert!(e.message.contains("event #99"), "{e}");
    let mut bad = good.clone();
    bad.buffers.retain(|b| b.name != "a");
    let e = rim::load(&bad, &Default::default()).err().unwrap();
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

// ---- saved models that could never finish

/// A saved model of bare streams (cascade or not, with their tasks) and `events` local
/// events: no buffers, no handles, no sub-models.
fn bare_model(events: u32, streams: Vec<(bool, Vec<rim::RimTask>)>) -> rim::RimModel {
    rim::RimModel {
        name: "m".into(),
        handles: Vec::new(),
        events,
        streams: streams
            .into_iter()
            .map(|(cascade, tasks)| rim::RimStream {
                stream: "s".into(),
                cascade,
                tasks,
            })
            .collect(),
        sub_models: Vec::new(),
    }
}

fn bare_file(model: rim::RimModel) -> rim::RimFile {
    rim::RimFile {
        format: rim::FORMAT.into(),
        version: 1,
        name: "m".into(),
        max_while_iterations: 10,
        buffers: Vec::new(),
        handles: Vec::new(),
        model,
    }
}

/// The error loading a bare model gives: its place and message.
fn refused(events: u32, streams: Vec<(bool, Vec<rim::RimTask>)>) -> (String, String) {
    let e = rim::load(&bare_file(bare_model(events, streams)), &Default::default())
        .err()
        .expect("refused");
    (e.place, e.message)
}

#[test]
fn replay_refuses_task_graphs_that_cannot_finish() {
    use rim::RimTask::{EventRecord as Rec, EventWait as Wait, StreamActivate as Act};
    let rec = |event| Rec { event };
    let wait = |event| Wait { event };
    let act = |stream| Act { stream };
    // A stream that starts with the model activating itself would run for ever.
    let (place, msg) = refused(0, vec![(false, vec![act(0)])]);
    assert_eq!(place, "model.streams[0].tasks[0]");
    assert!(
        msg.contains("activation cycle: stream 0 -> stream 0"),
        "{msg}"
    );
    // Through others: 0 starts 1, 1 starts 2, 2 starts 1 again.
    let (place, msg) = refused(
        0,
        vec![
            (false, vec![act(1)]),
            (true, vec![act(2)]),
            (true, vec![act(1)]),
        ],
    );
    assert_eq!(place, "model.streams[2].tasks[0]");
    assert!(
        msg.contains("activation cycle: stream 1 -> stream 2 -> stream 1"),
        "{msg}"
    );
    // A stream that starts with the model, activated again; a stream activated twice.
    let (place, msg) = refused(0, vec![(false, vec![]), (false, vec![act(0)])]);
    assert_eq!(place, "model.streams[1].tasks[0]");
    assert!(msg.contains("starts with each execution"), "{msg}");
    let (place, msg) = refused(
        0,
        vec![(false, vec![act(2)]), (false, vec![act(2)]), (true, vec![])],
    );
    assert_eq!(place, "model.streams[1].tasks[0]");
    assert!(
        msg.contains("which model.streams[0].tasks[0] activates too"),
        "{msg}"
    );
    // A wait for an event no task records.
    let (place, msg) = refused(1, vec![(false, vec![wait(0)])]);
    assert_eq!(place, "model.streams[0].tasks[0]");
    assert!(
        msg.contains("waits for event #0, which no task of the model records"),
        "{msg}"
    );
    // Its only record in a stream nothing activates.
    let (place, msg) = refused(1, vec![(false, vec![wait(0)]), (true, vec![rec(0)])]);
    assert_eq!(place, "model.streams[0].tasks[0]");
    assert!(
        msg.contains("recorded only by model.streams[1].tasks[0], in a stream that never starts"),
        "{msg}"
    );
    // ... or in one activated only behind the wait itself.
    let (place, msg) = refused(
        1,
        vec![(false, vec![wait(0), act(1)]), (true, vec![rec(0)])],
    );
    assert_eq!(place, "model.streams[0].tasks[0]");
    assert!(msg.contains("runs only after this wait"), "{msg}");
    // Two streams waiting on each other, and a stream waiting before its own record.
    let (place, msg) = refused(
        2,
        vec![
            (false, vec![wait(0), rec(1)]),
            (false, vec![wait(1), rec(0)]),
        ],
    );
    assert_eq!(place, "model.streams[0].tasks[0]");
    assert!(
        msg.contains(
            "event #0, recorded by model.streams[1].tasks[1], which runs only after this wait"
        ),
        "{msg}"
    );
    let (place, _) = refused(1, vec![(false, vec![wait(0), rec(0)])]);
    assert_eq!(place, "model.streams[0].tasks[0]");
    // An event recorded twice.
    let (place, msg) = refused(
        1,
        vec![(false, vec![rec(0)]), (false, vec![rec(0), wait(0)])],
    );
    assert_eq!(place, "model.streams[1].tasks[0]");
    assert!(msg.contains("records event #0 again"), "{msg}");
    // Sub-models are checked as models of their own, named by their place.
    let mut top = bare_model(0, vec![(false, vec![])]);
    top.sub_models
        .push(bare_model(1, vec![(false, vec![wait(0)])]));
    let e = rim::load(&bare_file(top), &Default::default())
        .err()
        .expect("refused");
    assert_eq!(e.place, "model.sub_models[0].streams[0].tasks[0]");
    // What can finish loads: a fork and join across a cascade, the record after the
    // wait's stream started.
    let fine = bare_model(
        2,
        vec![
            (false, vec![rec(0), wait(1)]),
            (false, vec![wait(0), act(2)]),
            (true, vec![rec(1)]),
        ],
    );
    rim::load(&bare_file(fine), &Default::default()).expect("finishes");
}

#[test]
fn counts_in_a_saved_model_are_checked_before_anything_is_allocated() {
    // Two billion events for one task: refused at once, naming the count, without making
    // an event (or a device) for any of them.
    let model = bare_model(
        2_147_483_648,
        vec![(false, vec![rim::RimTask::EventRecord { event: 0 }])],
    );
    let e = rim::load(&bare_file(model), &Default::default())
        .err()
        .expect("refused");
    assert_eq!(e.place, "model.events");
    assert!(
        e.message
            .contains("is 2147483648, but the model has 1 event tasks"),
        "{e}"
    );
    let json = serde_json::to_string(&bare_file(bare_model(2_147_483_648, vec![(false, vec![])])))
        .unwrap();
    let e = rim::load(&rim::parse(&json).unwrap(), &Default::default())
        .err()
        .expect("refused");
    assert_eq!(
        e.to_string(),
        "model.events: is 2147483648, but the model has 0 event tasks to use them"
    );
}

#[test]
fn a_replays_watchdog_is_the_files_at_most_the_default_unless_asked() {
    let file = |n| {
        let mut f = bare_file(bare_model(0, vec![(false, vec![])]));
        f.max_while_iterations = n;
        f
    };
    let watchdog = |f: &rim::RimFile, asked| {
        let options = rim::LoadOptions {
            max_while_iterations: asked,
            ..Default::default()
        };
        rim::load(f, &options).unwrap().max_while_iterations
    };
    assert_eq!(watchdog(&file(50), None), 50);
    assert_eq!(watchdog(&file(u64::MAX), None), 1_000_000);
    assert_eq!(watchdog(&file(u64::MAX), Some(7)), 7);
    assert_eq!(watchdog(&file(50), Some(5_000_000)), 5_000_000);
}

// ---- threads

/// Threads of this process now.
fn live_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// 1,500 captures on two host threads, each a fork and join across two streams, each
/// model executed and never destroyed: loaded models hold no threads, so the run ends with
/// the threads it started with, its streams' workers and a list worker or two, however
/// many models it loaded. (A worker per model stream would make this 1,500 threads or
/// more.)
#[test]
fn many_captures_leave_a_bounded_thread_count() {
    const PAIRS: usize = 1500;
    let mut text =
        String::from("version = 1\nbuffers.x = { dtype = \"int64\", len = 1 }\nstep = [\n");
    for k in 0..PAIRS {
        let (t, s, side) = (
            format!("t{}", k % 2),
            format!("s{}", k % 2),
            format!("side{}", k % 2),
        );
        for step in [
            format!("call = \"capture_begin\", stream = \"{s}\", mode = \"global\""),
            format!("call = \"launch\", stream = \"{s}\", kernel = \"increment\", dst = \"x\""),
            format!("call = \"event_record\", event = \"fork\", stream = \"{s}\""),
            format!("call = \"event_wait\", event = \"fork\", stream = \"{side}\""),
            format!("call = \"launch\", stream = \"{side}\", kernel = \"increment\", dst = \"x\""),
            format!("call = \"event_record\", event = \"join\", stream = \"{side}\""),
            format!("call = \"event_wait\", event = \"join\", stream = \"{s}\""),
            format!("call = \"capture_end\", stream = \"{s}\", model = \"m\""),
            "call = \"execute\", model = \"m\", stream = \"run\"".to_string(),
        ] {
            text.push_str(&format!("  {{ {step}, thread = \"{t}\" }},\n"));
        }
    }
    text.push_str("  { call = \"synchronize\", stream = \"run\" },\n");
    text.push_str(&format!(
        "  {{ call = \"expect\", buffer = \"x\", equals = [{}] }},\n]\n",
        2 * PAIRS
    ));
    let script = script::parse(&text).unwrap();
    let before = live_threads();
    let (report, session) = runner::run(&script).unwrap();
    assert!(report.passed(), "{}", report::to_text(&report));
    assert_eq!(report.steps.len(), 9 * PAIRS + 2);
    // Each execution started one list beside the executing stream's own, one at a time.
    let lists = session.acl().device().list_workers();
    assert_eq!(lists, 1, "list workers");
    // The whole process, other tests' threads included: far below a thread a model.
    let after = live_threads();
    assert!(
        after < before + 200,
        "{before} threads before the run, {after} after"
    );
}

/// Found by the fuzz target `rim_json`: a cascade stream that waited for an event it
/// recorded itself, after the wait, made replay wait forever.
#[test]
fn replay_refuses_a_wait_nothing_can_satisfy() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/capture/cross-stream.toml");
    let (_, session) = run_fixture(&path);
    let good = session.captured()[0].file.clone();
    rim::load(&good, &Default::default()).unwrap();
    // A new event, waited for and recorded on stream 0.
    let event = good.model.events;
    let with = |first: rim::RimTask, last: rim::RimTask| {
        let mut f = good.clone();
        f.model.events += 1;
        f.model.streams[0].tasks.insert(0, first);
        f.model.streams[0].tasks.push(last);
        f
    };
    let stuck = with(
        rim::RimTask::EventWait { event },
        rim::RimTask::EventRecord { event },
    );
    let e = rim::load(&stuck, &Default::default()).err().unwrap();
    assert_eq!(e.place, "model.streams[0].tasks[0]");
    assert!(e.message.contains("never end"), "{e}");
    // Recorded first, the same wait is fine.
    let fine = with(
        rim::RimTask::EventRecord { event },
        rim::RimTask::EventWait { event },
    );
    rim::load(&fine, &Default::default())
        .unwrap()
        .execute(1)
        .unwrap();
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
            uninit: false,
            line: 0,
        })
        .collect();
    buffers.push(BufferDecl {
        name: "counter".into(),
        dtype: BufDtype::Int64,
        init: vec![Scalar::Int(0)],
        uninit: false,
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
        let replay = rim::load(&rim::parse(&json).unwrap(), &Default::default()).unwrap();
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
