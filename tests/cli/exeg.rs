//! CLI tests: `.exeg` files (binary and text form) through `inspect` and `dump --view exe`.

use rt2::exec::{exeg, testdata, view};

use crate::util::{Scratch, fixture};

fn write_sample(s: &Scratch) -> std::path::PathBuf {
    s.write("m.exeg", &exeg::encode(&testdata::sample()))
}

#[test]
fn inspect_reports_the_three_graphs() {
    let s = Scratch::new();
    let p = write_sample(&s);
    let j = s
        .rt2(&["inspect", p.to_str().unwrap(), "--format", "json"])
        .ok()
        .json();
    assert_eq!(j["kind"], "exeg");
    let names: Vec<&str> = j["graphs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Init", "Main", "DeInit"]);
    let eg = testdata::sample();
    assert_eq!(j["graphs"][1]["nodes"], eg.main.total_nodes());
    assert_eq!(j["graphs"][1]["inputs"][0]["name"], "x");
    assert_eq!(
        j["graphs"][1]["inputs"][0]["shape"],
        serde_json::json!([1, -1])
    );
    assert_eq!(j["resources"]["events"], 2);
    assert_eq!(j["multi_thread"], true);
    s.rt2(&["inspect", p.to_str().unwrap()]).ok().stdout_has(&[
        "kind: exeg",
        "Main graph",
        "kernel type",
        "checks: no problems",
    ]);
}

#[test]
fn dump_views_and_the_text_form_reads_back() {
    let s = Scratch::new();
    let p = write_sample(&s);
    let dot = s
        .rt2(&["dump", p.to_str().unwrap(), "--graph", "main"])
        .ok()
        .stdout();
    assert!(dot.starts_with("digraph"), "{dot}");
    assert!(dot.contains("cluster"), "{dot}");
    let all = s
        .rt2(&[
            "dump",
            p.to_str().unwrap(),
            "--view",
            "exe",
            "--format",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(
        all,
        view::to_json(&testdata::sample(), view::GraphSelect::All)
    );
    s.rt2(&[
        "dump",
        p.to_str().unwrap(),
        "--format",
        "pbtxt",
        "-o",
        "m.exeg.txt",
    ])
    .ok();
    // The text form is itself an input rt2 takes.
    let back = s
        .rt2(&["dump", "m.exeg.txt", "--format", "pbtxt"])
        .ok()
        .stdout();
    assert_eq!(back.as_bytes(), s.read("m.exeg.txt"));
    assert_eq!(view::from_text(&back).unwrap(), testdata::sample());
}

#[test]
fn bad_exeg_files_are_errors_naming_the_file() {
    let s = Scratch::new();
    let bytes = exeg::encode(&testdata::sample());
    s.write("t.exeg", &bytes[..bytes.len() / 2]);
    s.rt2(&["inspect", "t.exeg"]).fails(2, &["t.exeg"]);
    s.write("v.exeg.txt", b"magic: \"rt2.exeg\"\nformat_version: 99\n");
    s.rt2(&["inspect", "v.exeg.txt"])
        .fails(2, &["v.exeg.txt", "99"]);
    let p = write_sample(&s);
    s.rt2(&["dump", p.to_str().unwrap(), "--view", "compute"])
        .fails(2, &["no ComputeGraph view"]);
}

#[test]
fn exe_view_of_a_model_file_lowers_it_first() {
    let s = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    let m = model.to_str().unwrap();
    let j = s
        .rt2(&[
            "dump", m, "--view", "exe", "--format", "json", "--graph", "main",
        ])
        .ok()
        .json();
    let kernels: Vec<&str> = j["graphs"]["Main"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kernel"].as_str().unwrap())
        .collect();
    assert!(kernels.contains(&"LaunchKernelWithHandle"), "{kernels:?}");
    assert!(kernels.contains(&"NetOutput"), "{kernels:?}");
    // The same graph as lowering to a file and dumping that.
    s.rt2(&["lower", m, "-o", "m.exeg"]).ok();
    let from_file = s
        .rt2(&["dump", "m.exeg", "--format", "json", "--graph", "main"])
        .ok()
        .json();
    assert_eq!(j, from_file);
    let dot = s.rt2(&["dump", m, "--view", "exe"]).ok().stdout();
    assert!(
        dot.contains("cluster_Init") || dot.contains("cluster"),
        "{dot}"
    );
}
