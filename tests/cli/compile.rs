//! CLI tests: `rt2 compile`, the ATC step, into every output format.

use crate::util::{Scratch, fixture};

fn summary(s: &Scratch, file: &str) -> serde_json::Value {
    let j = s.rt2(&["inspect", file, "--format", "json"]).ok().json();
    let mut g = j["graphs"][0].clone();
    g.as_object_mut().unwrap().remove("model");
    g
}

#[test]
fn onnx_to_om_with_faithful_header() {
    let s = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    s.rt2(&["compile", model.to_str().unwrap(), "-o", "cnn.om"])
        .ok();
    assert_eq!(&s.read("cnn.om")[..4], b"IMOD");
    let j = s
        .rt2(&["inspect", "cnn.om", "--format", "json"])
        .ok()
        .json();
    assert_eq!(j["header"]["name"], "cnn_bn");
    assert_eq!(j["header"]["model_num"], 1);
    assert_eq!(j["header"]["is_unknow_model"], 1, "batch dim N is unknown");
    let kinds: Vec<&str> = j["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["MODEL_INOUT_INFO", "MODEL_DEF", "WEIGHTS_DATA"]);
    let inout = &j["inout"]["0"];
    assert_eq!(inout["inputs"][0]["name"], "x");
    assert_eq!(
        inout["inputs"][0]["shape"],
        serde_json::json!([-1, 3, 8, 8])
    );
    // The ONNX model and the OM describe the same graph.
    let onnx = summary(&s, model.to_str().unwrap());
    assert_eq!(summary(&s, "cnn.om"), onnx);
}

#[test]
fn every_output_format_reads_back_to_the_same_graph() {
    let s = Scratch::new();
    let model = fixture("models/nested_if_weights.onnx");
    let want = summary(&s, model.to_str().unwrap());
    for out in ["m.om", "m.pb", "m.ge", "m.json", "m.pbtxt", "m.txt"] {
        s.rt2(&["compile", model.to_str().unwrap(), "-o", out]).ok();
        assert_eq!(summary(&s, out), want, "{out}");
    }
    let kinds: Vec<String> = ["m.om", "m.pb", "m.json", "m.pbtxt"]
        .iter()
        .map(|f| {
            s.rt2(&["inspect", f, "--format", "json"]).ok().json()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds, ["om", "ge-ir", "ge-json", "ge-text"]);
}

#[test]
fn input_shape_fixes_symbolic_dims_and_name_renames() {
    let s = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    s.rt2(&[
        "compile",
        model.to_str().unwrap(),
        "-o",
        "b4.om",
        "--input-shape",
        "x:4,3,8,8",
        "--name",
        "resnet-ish",
    ])
    .ok();
    let j = s.rt2(&["inspect", "b4.om", "--format", "json"]).ok().json();
    assert_eq!(
        j["graphs"][0]["inputs"][0]["shape"],
        serde_json::json!([4, 3, 8, 8])
    );
    assert_eq!(j["header"]["name"], "resnet-ish");
}

#[test]
fn input_shape_errors_name_the_input() {
    let s = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    s.rt2(&[
        "compile",
        model.to_str().unwrap(),
        "-o",
        "x.om",
        "--input-shape",
        "nope:1,2",
    ])
    .fails(2, &["nope"]);
    s.rt2(&[
        "compile",
        model.to_str().unwrap(),
        "-o",
        "x.om",
        "--input-shape",
        "x:1,3",
    ])
    .fails(2, &["x"]);
    assert!(!s.exists("x.om"));
    // Malformed values are usage errors, reported by the argument parser (exit 2).
    let r = s.rt2(&[
        "compile",
        model.to_str().unwrap(),
        "-o",
        "x.om",
        "--input-shape",
        "x:1,a",
    ]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr().contains("\"a\" is not a dimension"),
        "{}",
        r.stderr()
    );
}

#[test]
fn real_exported_models_compile() {
    let s = Scratch::new();
    for (name, nodes) in [
        // Each ConstantOfShape is GE's Fill and a Const holding its value, and the Gemm
        // MatMulV2 and Add, as ATC makes them.
        ("light_resnet50", 926),
        ("light_squeezenet", 198),
        ("lstm", 6),
        ("loop_counter", 16),
    ] {
        let model = fixture(&format!("models/{name}.onnx"));
        let out = format!("{name}.om");
        s.rt2(&["compile", model.to_str().unwrap(), "-o", &out])
            .ok();
        let j = s.rt2(&["inspect", &out, "--format", "json"]).ok().json();
        assert_eq!(j["graphs"][0]["nodes"], nodes, "{name}");
        assert_eq!(j["problems"], serde_json::json!([]), "{name}");
    }
}

#[test]
fn ge_inputs_compile_to_om_too() {
    let s = Scratch::new();
    let model = fixture("models/loop_counter.onnx");
    s.rt2(&["compile", model.to_str().unwrap(), "-o", "l.pbtxt"])
        .ok();
    s.rt2(&["compile", "l.pbtxt", "-o", "l.om"]).ok();
    assert_eq!(summary(&s, "l.om"), summary(&s, model.to_str().unwrap()));
    s.rt2(&[
        "compile",
        "l.pbtxt",
        "-o",
        "l2.om",
        "--input-shape",
        "trip:",
    ])
    .fails(2, &["applies to ONNX"]);
}

/// Every op's descriptors in the OM as ATC writes them: typed and shaped by inference,
/// -1 only where a dim is known at run time alone (cnn_bn's batch), every dim known once
/// `--input-shape` fixes the batch.
#[test]
fn the_om_carries_every_ops_inferred_types_and_shapes() {
    use rt2::om::DataType;
    use rt2::om::graph::Shape;
    let s = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    let model = model.to_str().unwrap();
    let descs = |file: &str| {
        let bytes = s.read(file);
        let f = rt2::om::file::read(&bytes, &Default::default()).unwrap();
        let mut all = Vec::new();
        for n in &f.root().model.root.nodes {
            for (k, d) in n.output_descs.iter().chain(&n.input_descs).enumerate() {
                all.push((format!("{} desc {k}", n.name), d.dtype, d.shape.clone()));
            }
        }
        all
    };
    s.rt2(&["compile", model, "-o", "dyn.om"]).ok();
    let dynamic = descs("dyn.om");
    assert!(dynamic.len() > 20, "{dynamic:?}");
    for (at, dtype, shape) in &dynamic {
        assert_ne!(*dtype, DataType::Undefined, "{at}");
        let Shape::Dims(dims) = shape else {
            panic!("{at}: unknown rank")
        };
        // The batch is the only dim not known before run time.
        for (i, &d) in dims.iter().enumerate() {
            assert!(d >= 0 || (i == 0 && d == -1), "{at}: {dims:?}");
        }
    }
    assert!(
        dynamic
            .iter()
            .any(|(_, _, s)| matches!(s, Shape::Dims(d) if d.first() == Some(&-1))),
        "the batch stays dynamic"
    );
    s.rt2(&[
        "compile",
        model,
        "-o",
        "fixed.om",
        "--input-shape",
        "x:2,3,8,8",
    ])
    .ok();
    for (at, _, shape) in descs("fixed.om") {
        assert!(
            matches!(&shape, Shape::Dims(d) if d.iter().all(|&x| x >= 0)),
            "{at}: {shape:?}"
        );
    }
}
