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
    // models build their weights with ConstantOfShape (GE's Fill, as the import maps it),
    // which lowering folds, that each Relu after a convolution is fused into it (26
    // of SqueezeNet's: lower/fuse.rs), and that the static memory plan places each Fire
    // module's two expand convolutions side by side in their Concat's output, whose
    // launch then goes (8: lower/passes/memory.rs).
    let inspect = s
        .rt2(&["inspect", model.to_str().unwrap(), "--format", "json"])
        .ok()
        .json();
    let ops: u64 = inspect["graphs"][0]["op_types"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| {
            !["Data", "Const", "NetOutput", "ConstantOfShape", "Fill"].contains(&k.as_str())
        })
        .map(|(_, v)| v.as_u64().unwrap())
        .sum();
    let launches = j["graphs"]["main"]["kernels"]["LaunchKernelWithHandle"]
        .as_u64()
        .unwrap();
    let relus = inspect["graphs"][0]["op_types"]["Relu"].as_u64().unwrap();
    let concats = inspect["graphs"][0]["op_types"]["ConcatD"]
        .as_u64()
        .unwrap();
    assert_eq!((relus, concats), (26, 8));
    assert_eq!(launches, ops - relus - concats);
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

/// `--input-shape` fixes the dims a model of any kind leaves unknown (here a GE dump's
/// -1): the ExecuteGraph's inputs and outputs have the given dims and Main infers no
/// shape, and `?` keeps a dim as the model has it. A name no input has, a dim or rank the
/// input cannot have, an `.exeg` and `--model all` exit 2 and write nothing.
#[test]
fn input_shape_fixes_unknown_dims() {
    let s = Scratch::new();
    s.write(
        "add.ge.txt",
        br#"graph {
  name: "g"
  op { name: "x" type: "Data" attr { key: "index" value { i: 0 } }
       output_desc { dtype: DT_FLOAT shape { dim: -1 dim: 3 } } }
  op { name: "add" type: "Add" input: "x:0" input: "x:0"
       output_desc { dtype: DT_FLOAT shape { dim: -1 dim: 3 } } }
  op { name: "out" type: "NetOutput" input: "add:0" }
}
"#,
    );
    let infers = |eg: &rt2::exec::ExecuteGraph| {
        eg.main
            .nodes
            .iter()
            .filter(|n| n.kernel == "InferShape")
            .count()
    };
    for (given, want, infer) in [
        ("x:4,3", vec![4, 3], 0),
        ("x:?,3", vec![-1, 3], 1),
        ("x:-1,-1", vec![-1, 3], 1),
    ] {
        s.rt2(&[
            "lower",
            "add.ge.txt",
            "-o",
            "a.exeg",
            "--input-shape",
            given,
        ])
        .ok();
        let eg = exeg::decode(&s.read("a.exeg")).expect("a valid .exeg");
        assert_eq!(eg.inputs[0].shape, want, "{given}");
        assert_eq!(eg.outputs[0].shape, want, "{given}");
        assert_eq!(infers(&eg), infer, "{given}");
    }
    let bad: [(&[&str], &[&str]); 5] = [
        (
            &["--input-shape", "y:4,3"],
            &["add.ge.txt", "--input-shape y:4,3", "no input \"y\""],
        ),
        (
            &["--input-shape", "x:4,2"],
            &["add.ge.txt", "x:4,2", "[-1, 3]"],
        ),
        (&["--input-shape", "x:4"], &["add.ge.txt", "x:4", "[-1, 3]"]),
        (
            &["--input-shape", "x:4,3", "--model", "all"],
            &["add.ge.txt", "--model all"],
        ),
        (&["--input-shape", "x:4,,3"], &["not a dimension"]),
    ];
    for (args, needles) in bad {
        let mut a = vec!["lower", "add.ge.txt", "-o", "b.exeg"];
        a.extend_from_slice(args);
        s.rt2(&a).fails(2, needles);
        assert!(!s.exists("b.exeg"), "{args:?}");
    }
    s.rt2(&["lower", "a.exeg", "-o", "b.exeg", "--input-shape", "x:4,3"])
        .fails(2, &["a.exeg", "lowered already"]);
    assert!(!s.exists("b.exeg"));
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
        .rt2(&[
            "lower",
            model,
            "-o",
            "p.exeg",
            "--no-static-memory",
            "--format",
            "json",
        ])
        .ok()
        .json();
    // The plan is the default.
    let planned = s
        .rt2(&["lower", model, "-o", "s.exeg", "--format", "json"])
        .ok()
        .json();
    let k = |j: &serde_json::Value, g: &str, kernel: &str| {
        j["graphs"][g]["kernels"][kernel].as_u64().unwrap_or(0)
    };
    // Every intermediate tensor of this all-static model is planned: Main keeps the
    // output's allocation and the input's copy, and each planned tensor is a view in Init.
    let views = k(&planned, "init", "MemoryView");
    assert!(views >= 38, "{views} views");
    assert_eq!(
        k(&plain, "main", "AllocMemHbm") - k(&planned, "main", "AllocMemHbm"),
        views
    );
    assert_eq!(
        k(&plain, "main", "FreeMemory") - k(&planned, "main", "FreeMemory"),
        views
    );
    // The Fire modules' 8 Concats run in place: their launches go.
    assert_eq!(
        k(&plain, "main", "LaunchKernelWithHandle") - k(&planned, "main", "LaunchKernelWithHandle"),
        8
    );
    // An .exeg lowered without the plan gets it from `rt2 lower` (`--static-memory`
    // says the default), the same bytes as planning while lowering; a planned one is
    // left as it is, and `--no-static-memory` passes an unplanned one through.
    s.rt2(&["lower", "p.exeg", "-o", "later.exeg", "--static-memory"])
        .ok();
    assert!(s.read("later.exeg") == s.read("s.exeg"));
    s.rt2(&["lower", "s.exeg", "-o", "again.exeg"]).ok();
    assert!(s.read("again.exeg") == s.read("s.exeg"));
    s.rt2(&["lower", "p.exeg", "-o", "still.exeg", "--no-static-memory"])
        .ok();
    assert!(s.read("still.exeg") == s.read("p.exeg"));
}

#[test]
fn model_all_lowers_every_model_of_a_dynamic_om_with_its_relation_to_the_root() {
    let s = Scratch::new();
    let om = s.write(
        "dyn.om",
        &rt2::om::testdata::dynamic_root_om().to_bytes().unwrap(),
    );
    let om = om.to_str().unwrap();
    let j = s
        .rt2(&[
            "lower", om, "--model", "all", "-o", "dyn.exeg", "--format", "json",
        ])
        .ok()
        .json();
    let models = j["models"].as_array().unwrap();
    assert_eq!(models.len(), 3);
    let graphs: Vec<&str> = models
        .iter()
        .map(|m| m["graph"].as_str().unwrap())
        .collect();
    assert_eq!(
        graphs,
        ["dyn_root", "dyn_root_sub_1_know", "dyn_root_sub_2_unknow"]
    );
    assert_eq!(models[0]["relation"]["kind"], "root");
    for (i, call) in [(1, "call_1"), (2, "call_2")] {
        let m = &models[i];
        assert_eq!(m["index"], i);
        assert_eq!(m["relation"]["kind"], "submodel");
        let by = &m["relation"]["called_by"][0];
        assert_eq!(
            (
                by["model"].as_u64(),
                by["graph"].as_str(),
                by["node"].as_str()
            ),
            (Some(0), Some("dyn_root"), Some(call))
        );
        assert_eq!(by["op_type"], "PartitionedCall");
        assert_eq!(by["inline"], true);
    }
    let counts: Vec<u64> = models
        .iter()
        .map(|m| m["compute_nodes"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [11, 3, 4]);
    for (i, m) in models.iter().enumerate() {
        let name = format!("dyn.{i}.exeg");
        assert_eq!(m["output"], name.as_str());
        assert!(m["no_compute"].as_object().unwrap().is_empty());
        let eg = exeg::decode(&s.read(&name)).expect("a valid .exeg");
        assert_eq!(m["graphs"]["main"]["nodes"], eg.main.total_nodes());
    }
    assert!(!s.exists("dyn.exeg"));
    // The table says the same.
    s.rt2(&["lower", om, "--model", "all", "-o", "t.exeg"])
        .ok()
        .stdout_has(&[
            "3 model(s) lowered",
            "called by model 0: dyn_root/call_1 (PartitionedCall, holds a copy)",
            "t.2.exeg",
        ]);
    // So does inspect.
    s.rt2(&["inspect", om])
        .ok()
        .stdout_has(&["relation: called by model 0: dyn_root/call_2"]);
    let j = s.rt2(&["inspect", om, "--format", "json"]).ok().json();
    assert_eq!(j["graphs"][0]["relation"], "root");
}

/// The sub-models of a partitioned OM carry no dictionary of their own (GE stores it on
/// the root); every view shows their real attribute names.
#[test]
fn a_compressed_dynamic_om_shows_and_lowers_every_model_with_real_attribute_names() {
    let s = Scratch::new();
    let om = s.write(
        "packed.om",
        &rt2::om::testdata::compressed_dynamic_root_om()
            .to_bytes()
            .unwrap(),
    );
    let om = om.to_str().unwrap();
    let plain = s.write(
        "plain.om",
        &rt2::om::testdata::dynamic_root_om().to_bytes().unwrap(),
    );
    // The verifier finds in the compressed file what it finds in the plain one.
    let problems =
        |f: &str| s.rt2(&["inspect", f, "--format", "json"]).ok().json()["problems"].clone();
    assert_eq!(problems(om), problems(plain.to_str().unwrap()));
    let j = s
        .rt2(&[
            "lower", om, "--model", "all", "-o", "p.exeg", "--format", "json",
        ])
        .ok()
        .json();
    let models = j["models"].as_array().unwrap();
    assert_eq!(models.len(), 3);
    for m in models {
        assert!(m["no_compute"].as_object().unwrap().is_empty());
    }
    // Model 1's LeakyRelu keeps its slope, model 2's Const its value.
    for (model, own) in [("1", "negative_slope"), ("2", "value")] {
        let text = s
            .rt2(&["dump", om, "--model", model, "--format", "pbtxt"])
            .ok()
            .stdout();
        for key in ["index", "_parent_node_index", "origin_format", own] {
            assert!(text.contains(&format!("key: \"{key}\"")), "{model}: {key}");
        }
        assert!(
            !text.contains("key: \"\\000"),
            "{model}: a compressed key is left"
        );
    }
}

#[test]
fn a_pipeline_om_lowers_whole_and_each_stage_runs_alone() {
    let s = Scratch::new();
    let om = s.write(
        "llm.om",
        &rt2::om::testdata::pipeline_om().to_bytes().unwrap(),
    );
    let om = om.to_str().unwrap();
    let j = s
        .rt2(&["lower", om, "-o", "llm.exeg", "--format", "json"])
        .ok()
        .json();
    assert!(j["no_compute"].as_object().unwrap().is_empty());
    for model in ["0", "1", "2"] {
        let j = s
            .rt2(&["run", om, "--model", model, "--format", "json"])
            .ok()
            .json();
        assert_eq!(
            j["outputs"][0]["shape"],
            serde_json::json!([2, 4]),
            "{model}"
        );
    }
}

#[test]
fn a_subgraph_no_model_answers_exits_2_and_model_all_writes_nothing() {
    let s = Scratch::new();
    let (mut root, subs) = rt2::om::testdata::pipeline_models();
    root.graph[0].op[1].subgraph_name = vec!["nowhere".into()];
    let om = s.write(
        "bad.om",
        &rt2::om::testdata::root_om("llm", root, subs)
            .to_bytes()
            .unwrap(),
    );
    let before = s.files();
    s.rt2(&[
        "lower",
        om.to_str().unwrap(),
        "--model",
        "all",
        "-o",
        "b.exeg",
    ])
    .fails(
        2,
        &[
            "bad.om",
            "model 0: graph \"llm\": node \"PartitionedCall_0\"",
            "subgraph \"nowhere\"",
        ],
    );
    assert_eq!(s.files(), before);
    s.rt2(&[
        "lower",
        om.to_str().unwrap(),
        "--model",
        "some",
        "-o",
        "b.exeg",
    ])
    .fails(2, &["some"]);
}
