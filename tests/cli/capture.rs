//! CLI tests of `rt2 capture` and `rt2 replay`: reports in each format, saved models that
//! replay to the script's buffers, and the exit statuses 0, 1 and 2.

use crate::util::{Scratch, fixture};

fn script(name: &str) -> String {
    fixture(&format!("capture/{name}.toml"))
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_passing_script_exits_0_with_a_report() {
    let s = Scratch::new();
    s.rt2(&["capture", &script("while-counter")])
        .ok()
        .stdout_has(&[
            "capture_begin",
            "model m: READY",
            "while(h) -> [body]",
            "line 23: x passed",
            "passed",
        ]);
}

#[test]
fn json_report_has_the_spec_keys() {
    let s = Scratch::new();
    let r = s
        .rt2(&["capture", &script("cascade"), "--format", "json"])
        .ok();
    let v = r.json();
    for key in ["steps", "models", "buffers", "expectations"] {
        assert!(v.get(key).is_some(), "key {key}: {v}");
    }
    let step = &v["steps"][0];
    for key in ["line", "call", "thread", "result"] {
        assert!(step.get(key).is_some(), "step key {key}: {step}");
    }
    let model = &v["models"][0];
    for key in ["name", "status", "streams", "tasks", "sub_models"] {
        assert!(model.get(key).is_some(), "model key {key}: {model}");
    }
    assert_eq!(model["name"], "chain");
    assert_eq!(model["streams"].as_array().unwrap().len(), 5);
    assert_eq!(v["buffers"]["x"], serde_json::json!([310]));
    assert_eq!(v["expectations"][0]["passed"], true);
}

#[test]
fn dot_view_is_a_digraph_of_the_models() {
    let s = Scratch::new();
    let r = s
        .rt2(&["capture", &script("nested-cond"), "--view", "dot"])
        .ok();
    let out = r.stdout();
    assert!(out.starts_with("digraph capture {"), "{out}");
    assert!(out.contains("label=\"top (READY)\""), "{out}");
    assert!(out.contains("label=\"inner (READY)\""), "{out}");
    assert!(
        out.contains("lhead="),
        "cond tasks point at their sub-models: {out}"
    );
    assert!(out.trim_end().ends_with('}'));
}

#[test]
fn a_failed_expectation_exits_1() {
    let s = Scratch::new();
    let r = s.rt2(&["capture", &script("expect-failure")]);
    assert_eq!(r.code(), 1, "{}", r.stdout());
    let out = r.stdout();
    assert!(
        out.contains("x FAILED: expected [1, 2, 4], found [1, 2, 3]"),
        "{out}"
    );
    assert!(out.contains("succeeded, the script expects ACL_ERROR_RT_STREAM_CAPTURED"));
    assert!(out.contains("ACL_ERROR_RT_STREAM_NOT_CAPTURED (107029)"));
}

#[test]
fn invalid_scripts_exit_2_naming_the_file_line_and_column() {
    let s = Scratch::new();
    let cases: [(&str, &str, &[&str]); 5] = [
        ("bad.toml", "version = 1\nstep = [\n", &["bad.toml", "line"]),
        (
            "v2.toml",
            "version = 2\n",
            &["v2.toml", "line 1", "version"],
        ),
        (
            "call.toml",
            "version = 1\n[[step]]\ncall = \"capture_start\"\nstream = \"s\"\n",
            &["call.toml", "line 3", "capture_start"],
        ),
        (
            "buf.toml",
            "version = 1\n[[step]]\ncall = \"memset\"\ndst = \"nope\"\nvalue = 1\n",
            &["buf.toml", "line 4", "nope"],
        ),
        (
            "field.toml",
            "version = 1\n[[step]]\ncall = \"synchronize\"\nstream = \"s\"\ncolour = 3\n",
            &["field.toml", "line 5", "colour"],
        ),
    ];
    for (name, text, needles) in cases {
        let path = s.write(name, text.as_bytes());
        s.rt2(&["capture", &path.to_string_lossy()])
            .fails(2, needles);
    }
    s.rt2(&["capture", &s.path("missing.toml").to_string_lossy()])
        .fails(2, &["missing.toml"]);
}

/// Runs the fixture script `name` with `--save` (and `extra`) into the scratch folder
/// `saved`, which it returns.
fn save(s: &Scratch, name: &str, extra: &[&str]) -> std::path::PathBuf {
    let dir = s.path("saved");
    let mut args = vec![
        "capture".to_string(),
        script(name),
        "--save".to_string(),
        dir.to_string_lossy().into_owned(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    s.rt2(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
    dir
}

#[test]
fn saved_models_replay_to_the_scripts_buffers() {
    let s = Scratch::new();
    let dir = save(&s, "while-counter", &["--format", "json"]);
    let saved = dir.join("m.rim.json");
    assert!(saved.exists(), "{}", saved.display());
    let v = s
        .rt2(&["replay", &saved.to_string_lossy(), "--format", "json"])
        .ok()
        .json();
    // One execution from the buffers as they were at capture end: three body runs.
    assert_eq!(v["buffers"]["x"], serde_json::json!([0, 30, 0, 0]));
    assert_eq!(v["buffers"]["n"], serde_json::json!([0]));
    // n is saved as 3: every execution starts the countdown again.
    let v = s
        .rt2(&[
            "replay",
            &saved.to_string_lossy(),
            "--times",
            "2",
            "--format",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(v["buffers"]["x"], serde_json::json!([0, 30, 0, 0]));
    s.rt2(&["replay", &saved.to_string_lossy()])
        .ok()
        .stdout_has(&["model m executed 1 times", "[0, 30, 0, 0]"]);
}

#[test]
fn replay_of_a_bad_file_exits_2_with_the_place() {
    let s = Scratch::new();
    let bad = s.write("bad.rim.json", b"{\"format\": \"rt2.rim\",");
    s.rt2(&["replay", &bad.to_string_lossy()])
        .fails(2, &["bad.rim.json", "line"]);
    let dir = save(&s, "cross-stream", &[]);
    let good = std::fs::read_to_string(dir.join("fan.rim.json")).unwrap();
    let broken = good.replacen("\"dst\": \"d\"", "\"dst\": \"zz\"", 1);
    assert_ne!(good, broken);
    let p = s.write("broken.rim.json", broken.as_bytes());
    s.rt2(&["replay", &p.to_string_lossy()]).fails(
        2,
        &[
            "broken.rim.json",
            "model.streams[1].tasks",
            "no buffer \"zz\"",
        ],
    );
    let zero = s.rt2(&["replay", &p.to_string_lossy(), "--times", "0"]);
    assert_eq!(zero.code(), 2, "--times 0 is bad usage: {}", zero.stderr());
}

#[test]
fn a_faulting_replay_exits_1() {
    let s = Scratch::new();
    let dir = save(&s, "while-watchdog", &[]);
    s.rt2(&["replay", &dir.join("spin.rim.json").to_string_lossy()])
        .fails(1, &["spin.rim.json", "ACL_ERROR_RT_MODEL_EXECUTE"]);
}

/// The cascade fixture's saved model, as JSON to edit: streams 0 -> 1 -> 2 -> 4 chained by
/// activate tasks, stream 2 forking to stream 3 through event 0 and joined back through
/// event 1.
fn saved_chain(s: &Scratch) -> serde_json::Value {
    let dir = save(s, "cascade", &[]);
    let text = std::fs::read_to_string(dir.join("chain.rim.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn replay_refuses_a_model_that_could_never_finish_naming_the_place() {
    let s = Scratch::new();
    let good = saved_chain(&s);
    let edit = |name: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        f(&mut v["model"]);
        s.write(name, v.to_string().as_bytes())
            .to_string_lossy()
            .into_owned()
    };
    // Stream 2 activates stream 1, which activates stream 2: it would spin for ever.
    let cycle = edit("cycle.rim.json", &|m| {
        m["streams"][2]["tasks"][3]["stream"] = 1.into();
    });
    s.rt2(&["replay", &cycle]).fails(
        2,
        &[
            "cycle.rim.json",
            "model.streams[2].tasks[3]",
            "activation cycle: stream 1 -> stream 2 -> stream 1",
        ],
    );
    // The join's record made a wait: event 1 is recorded nowhere.
    let unrecorded = edit("unrecorded.rim.json", &|m| {
        m["streams"][3]["tasks"][2] = serde_json::json!({"task": "event_wait", "event": 0});
    });
    s.rt2(&["replay", &unrecorded]).fails(
        2,
        &[
            "unrecorded.rim.json",
            "model.streams[2].tasks[2]",
            "waits for event #1, which no task of the model records",
        ],
    );
    // Stream 2 records the fork only after waiting for the join: a deadlock.
    let deadlock = edit("deadlock.rim.json", &|m| {
        let tasks = m["streams"][2]["tasks"].as_array_mut().unwrap();
        tasks.swap(1, 2);
    });
    s.rt2(&["replay", &deadlock]).fails(
        2,
        &[
            "deadlock.rim.json",
            "model.streams[2].tasks[1]",
            "waits for event #1, recorded by model.streams[3].tasks[2], which runs only after \
             this wait",
        ],
    );
    // A count the file cannot hold is refused before anything is allocated.
    let huge = edit("huge.rim.json", &|m| {
        m["events"] = 2_147_483_648u64.into();
    });
    s.rt2(&["replay", &huge]).fails(
        2,
        &[
            "huge.rim.json",
            "model.events",
            "is 2147483648, but the model has 4 event tasks",
        ],
    );
}

#[test]
fn max_iterations_sets_the_while_watchdog() {
    let s = Scratch::new();
    // The script's own watchdog is 50; the flag wins.
    let r = s.rt2(&[
        "capture",
        &script("while-watchdog"),
        "--max-iterations",
        "7",
    ]);
    assert_eq!(r.code(), 1, "{}", r.stdout());
    assert!(
        r.stdout().contains("runs FAILED: expected [50], found [7]"),
        "{}",
        r.stdout()
    );
    let dir = save(&s, "while-counter", &[]);
    // Three body runs an execution: a watchdog of 2 faults it, 3 lets it finish.
    let saved = dir.join("m.rim.json").to_string_lossy().into_owned();
    s.rt2(&["replay", &saved, "--max-iterations", "2"])
        .fails(1, &["m.rim.json", "ACL_ERROR_RT_MODEL_EXECUTE"]);
    s.rt2(&["replay", &saved, "--max-iterations", "3"])
        .ok()
        .stdout_has(&["[0, 30, 0, 0]"]);
    // A file claiming an endless watchdog over a loop that never ends: the flag bounds it.
    save(&s, "while-watchdog", &[]);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("spin.rim.json")).unwrap()).unwrap();
    v["max_while_iterations"] = u64::MAX.into();
    let endless = s.write("endless.rim.json", v.to_string().as_bytes());
    s.rt2(&[
        "replay",
        &endless.to_string_lossy(),
        "--max-iterations",
        "10",
    ])
    .fails(1, &["endless.rim.json", "ACL_ERROR_RT_MODEL_EXECUTE"]);
    let zero = s.rt2(&["replay", &saved, "--max-iterations", "0"]);
    assert_eq!(zero.code(), 2, "0 is bad usage: {}", zero.stderr());
}

#[test]
fn sanitize_reports_each_planted_hazard_and_exits_1() {
    let s = Scratch::new();
    // As a failed expectation does, findings exit 1 after the report (no error line).
    let race = s.rt2(&[
        "capture",
        "--sanitize",
        &script("sanitize-race"),
        "--format",
        "json",
    ]);
    assert_eq!(race.code(), 1, "{}", race.stderr());
    let findings = race.json()["sanitizer"]["findings"].clone();
    let lanes: Vec<(String, String)> = findings
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["check"], "race", "{f}");
            let lane = |t: &serde_json::Value| t["lane"].as_str().unwrap().to_string();
            // A race has no order: which of the two tasks the sanitizer saw second (the
            // finding's "task") is the streams' timing. Each pair is compared sorted.
            let (a, b) = (lane(&f["task"]), lane(&f["other"]));
            if a <= b { (a, b) } else { (b, a) }
        })
        .collect();
    assert_eq!(
        lanes,
        [
            ("stream 1".to_string(), "stream 2".to_string()),
            (
                "model 0 stream 0".to_string(),
                "model 0 stream 1".to_string()
            )
        ],
        "the two unordered fills of x and the captured model's fills of z; y's are ordered"
    );
    let uninit = s.rt2(&["capture", "--sanitize=init", &script("sanitize-uninit")]);
    assert_eq!(uninit.code(), 1, "{}", uninit.stderr());
    uninit.stdout_has(&[
        "sanitizer: 1 finding(s)",
        "initcheck: uninitialized read by copy launch on stream 1: input 0",
        "byte 0 was never written since its allocation",
    ]);
    // Checks left out find nothing: the race is racecheck's.
    s.rt2(&[
        "capture",
        "--sanitize=init",
        &script("sanitize-race"),
        "--format",
        "json",
    ])
    .ok();
}

#[test]
fn sanitize_on_a_clean_script_says_what_it_checked() {
    let s = Scratch::new();
    let r = s
        .rt2(&[
            "capture",
            "--sanitize",
            &script("cross-stream"),
            "--format",
            "json",
        ])
        .ok();
    let san = &r.json()["sanitizer"];
    assert_eq!(san["findings"], serde_json::json!([]));
    assert!(san["accesses_checked"].as_u64().unwrap() > 0, "{san}");
    assert_eq!(san["checks"], serde_json::json!(["init", "mem", "race"]));
}

#[test]
fn replay_sanitize_reports_a_saved_models_race() {
    let s = Scratch::new();
    let dir = save(&s, "sanitize-race", &["--sanitize=init"]);
    let racy = dir.join("racy.rim.json").to_string_lossy().into_owned();
    // The captured model's two streams fill z with no event between them.
    let r = s.rt2(&["replay", &racy, "--sanitize", "--format", "json"]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    let v = r.json();
    let findings = v["sanitizer"]["findings"].as_array().unwrap().clone();
    assert_eq!(findings.len(), 1, "{v}");
    assert_eq!(findings[0]["check"], "race");
    assert_eq!(findings[0]["task"]["lane"], "model 0 stream 1");
    assert_eq!(findings[0]["other"]["lane"], "model 0 stream 0");
    assert!(
        r.stderr()
            .contains("racy.rim.json: the device sanitizer found 1 problem(s)")
    );
    // The buffers are still reported, and a check left out finds nothing.
    assert!(v["buffers"]["z"].is_array(), "{v}");
    let clean = s
        .rt2(&["replay", &racy, "--sanitize=init,mem", "--format", "json"])
        .ok()
        .json();
    assert_eq!(clean["sanitizer"]["findings"], serde_json::json!([]));
    assert_eq!(
        clean["sanitizer"]["checks"],
        serde_json::json!(["init", "mem"])
    );
}
