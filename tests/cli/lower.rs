//! CLI tests: `rt2 lower`: the summary in both formats, the `.exeg` it writes, the
//! multi-thread passes, and unsupported ops (exit 1, every one listed).

use rt2::exec::exeg;

use crate::util::{Scratch, fixture};

fn case(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/lower")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn writes_the_exeg_and_a_json_summary_of_what_it_holds() {
    let s = Scratch::new();
    let model = fixture("models/light_squeezenet.onnx");
    let j = s
        .rt2(&[
            "lower",
            model.to_str().unwrap(),
            "-o",
            "sq.exeg",
            "--format",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(j["output"], "sq.exeg");
    let eg = exeg::decode(&s.read("sq.exeg")).expect("a valid .exeg");
    for (key, g) in [
        ("init", &eg.init),
        ("main", &eg.main),
        ("deinit", &eg.deinit),
    ] {
        assert_eq!(j["graphs"][key]["nodes"], g.total_nodes(), "{key}");
        let kernels = j["graphs"][key]["kernels"].as_object().unwrap();
        let sum: u64 = kernels.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(sum as usize, g.total_nodes(), "{key}: histogram adds up");
    }
    // Every compute node but the graph boundaries is one launch, except that the light
    // models build their weights with ConstantOfShape, which lowering folds.
    let inspect = s
        .rt2(&["inspect", model.to_str().unwrap(), "--format", "json"])
        .ok()
        .json();
    let ops: u64 = inspect["graphs"][0]["op_types"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !["Data", "Const", "NetOutput", "ConstantOfShape"].contains(&k.as_str()))
        .map(|(_, v)| v.as_u64().unwrap())
        .sum();
    let launches = j["graphs"]["main"]["kernels"]["LaunchKernelWithHandle"]
        .as_u64()
        .unwrap();
    assert_eq!(launches, ops);
    assert_eq!(j["graphs"]["init"]["kernels"]["SplitRtStreams"], 1);
    assert_eq!(j["graphs"]["deinit"]["kernels"]["DestroyStreams"], 1);
    assert!(!eg.multi_thread);
}

#[test]
fn table_summary_and_multi_thread() {
    let s = Scratch::new();
    let src = case("dynamic_batch.ge.txt");
    s.rt2(&["lower", &src, "-o", "d.exeg", "--multi-thread"])
        .ok()
        .stdout_has(&[
            "d.exeg",
            "(multi-thread)",
            "LaunchKernelWithHandle",
            "InferShape",
            "FreeMemoryHoldAddr",
        ]);
    let eg = exeg::decode(&s.read("d.exeg")).unwrap();
    assert!(eg.multi_thread);
    assert!(!eg.main.free_launch.is_empty());
}

#[test]
fn unsupported_ops_exit_1_and_are_all_listed() {
    let s = Scratch::new();
    let src = case("unsupported.ge.txt");
    // Wibble declares its output shape, so it would lower as its compiled kernel; it
    // reads Frobnicate's output, and Frobnicate declares none.
    let run = s.rt2(&["lower", &src, "-o", "u.exeg"]).fails(
        1,
        &[
            "unsupported.ge.txt",
            "1 unsupported op(s)",
            "frob (Frobnicate)",
        ],
    );
    assert!(!run.stderr().contains("Wibble"), "{}", run.stderr());
    assert!(!s.exists("u.exeg"), "no output file on failure");
    assert_eq!(s.files(), Vec::<String>::new(), "nothing left behind");
}

#[test]
fn bad_inputs_exit_2() {
    let s = Scratch::new();
    s.write("bad.onnx", b"\x08\x07garbage that is not protobuf\xff\xff");
    s.rt2(&["lower", "bad.onnx", "-o", "x.exeg"])
        .fails(2, &["bad.onnx"]);
    assert!(!s.exists("x.exeg"));
    // An .exeg holds one model.
    s.rt2(&["lower", &case("add_one.ge.txt"), "-o", "a.exeg"])
        .ok();
    s.rt2(&["lower", "a.exeg", "-o", "b.exeg", "--model", "1"])
        .fails(2, &["a.exeg", "one model"]);
    // A node whose shapes do not fit the op.
    s.write(
        "badshape.ge.txt",
        br#"graph {
  name: "g"
  op { name: "x" type: "Data" attr { key: "index" value { i: 0 } }
       output_desc { dtype: DT_FLOAT shape { dim: 2 dim: 3 } } }
  op { name: "y" type: "Data" attr { key: "index" value { i: 1 } }
       output_desc { dtype: DT_FLOAT shape { dim: 4 } } }
  op { name: "add" type: "Add" input: "x:0" input: "y:0"
       output_desc { dtype: DT_FLOAT shape { dim: 2 dim: 3 } } }
  op { name: "out" type: "NetOutput" input: "add:0" }
}
"#,
    );
    s.rt2(&["lower", "badshape.ge.txt", "-o", "c.exeg"])
        .fails(2, &["badshape.ge.txt", "\"add\"", "broadcast"]);
    assert!(!s.exists("c.exeg"));
}

#[test]
fn an_exeg_gets_the_passes_it_lacks_and_is_written_binary() {
    let s = Scratch::new();
    s.rt2(&["lower", &case("dynamic_batch.ge.txt"), "-o", "d.exeg"])
        .ok();
    s.rt2(&["dump", "d.exeg", "--format", "pbtxt", "-o", "d.exeg.txt"])
        .ok();
    // The text form in, the binary form out, with the multi-thread passes added: the same
    // graph as lowering the model with them in the first place.
    s.rt2(&["lower", "d.exeg.txt", "-o", "mt.exeg", "--multi-thread"])
        .ok()
        .stdout_has(&["(multi-thread)"]);
    s.rt2(&[
        "lower",
        &case("dynamic_batch.ge.txt"),
        "-o",
        "direct.exeg",
        "--multi-thread",
    ])
    .ok();
    assert!(
        s.read("mt.exeg") == s.read("direct.exeg"),
        "the text form, lowered again with the passes, differs from lowering with them"
    );
    // Applying them twice changes nothing.
    s.rt2(&["lower", "mt.exeg", "-o", "again.exeg", "--multi-thread"])
        .ok();
    assert!(
        s.read("again.exeg") == s.read("direct.exeg"),
        "the passes applied twice changed the file"
    );
}

#[test]
fn static_memory_plans_squeezenet_and_an_exeg_gets_the_plan_later() {
    let s = Scratch::new();
    let model = fixture("models/light_squeezenet.onnx");
    let model = model.to_str().unwrap();
    let plain = s
        .rt2(&["lower", model, "-o", "p.exeg", "--format", "json"])
        .ok()
        .json();
    let planned = s
        .rt2(&[
            "lower",
            model,
            "-o",
            "s.exeg",
            "--static-memory",
            "--format",
            "json",
        ])
        .ok()
        .json();
    let k = |j: &serde_json::Value, g: &str, kernel: &str| {
        j["graphs"][g]["kernels"][kernel].as_u64().unwrap_or(0)
    };
    // Every intermediate tensor of this all-static model is planned: Main keeps the
    // output's allocation and the input's copy, and each planned tensor is a view in Init.
    let views = k(&planned, "init", "MemoryView");
    assert!(views >= 50, "{views} views");
    assert_eq!(
        k(&plain, "main", "AllocMemHbm") - k(&planned, "main", "AllocMemHbm"),
        views
    );
    assert_eq!(
        k(&plain, "main", "FreeMemory") - k(&planned, "main", "FreeMemory"),
        views
    );
    assert_eq!(
        k(&plain, "main", "LaunchKernelWithHandle"),
        k(&planned, "main", "LaunchKernelWithHandle")
    );
    // An .exeg lowered without the plan gets it from `rt2 lower --static-memory`, the
    // same bytes as planning while lowering.
    s.rt2(&["lower", "p.exeg", "-o", "later.exeg", "--static-memory"])
        .ok();
    assert!(s.read("later.exeg") == s.read("s.exeg"));
}
