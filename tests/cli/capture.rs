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

#[test]
fn saved_models_replay_to_the_scripts_buffers() {
    let s = Scratch::new();
    let dir = s.path("saved");
    s.rt2(&[
        "capture",
        &script("while-counter"),
        "--save",
        &dir.to_string_lossy(),
        "--format",
        "json",
    ])
    .ok();
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
    let dir = s.path("saved");
    s.rt2(&[
        "capture",
        &script("cross-stream"),
        "--save",
        &dir.to_string_lossy(),
    ])
    .ok();
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
    let dir = s.path("saved");
    s.rt2(&[
        "capture",
        &script("while-watchdog"),
        "--save",
        &dir.to_string_lossy(),
    ])
    .ok();
    s.rt2(&["replay", &dir.join("spin.rim.json").to_string_lossy()])
        .fails(1, &["spin.rim.json", "ACL_ERROR_RT_MODEL_EXECUTE"]);
}
