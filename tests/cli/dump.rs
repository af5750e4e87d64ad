//! CLI tests: `rt2 dump --view compute` as DOT, JSON and GE text dump.

use std::process::Command;

use rt2::om::testdata;

use crate::util::{Scratch, fixture};

#[test]
fn dot_renders_with_graphviz() {
    let s = Scratch::new();
    let model = fixture("models/nested_if_weights.onnx");
    s.rt2(&[
        "dump",
        model.to_str().unwrap(),
        "--format",
        "dot",
        "-o",
        "m.dot",
    ])
    .ok();
    let dot = String::from_utf8(s.read("m.dot")).unwrap();
    assert!(dot.starts_with("digraph \"nested_if_weights\" {"));
    assert_eq!(
        dot.matches("subgraph cluster_").count(),
        5,
        "root and four branches"
    );
    assert!(
        dot.contains("float32 [-1,4]"),
        "edges carry dtype and shape"
    );
    match Command::new("dot")
        .arg("-Tsvg")
        .arg(s.path("m.dot"))
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "dot failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(String::from_utf8_lossy(&out.stdout).contains("<svg"));
        }
        Err(_) => assert!(
            std::env::var_os("RT2_REQUIRE_DOT").is_none(),
            "graphviz `dot` is required here"
        ),
    }
}

#[test]
fn control_edges_are_dashed() {
    let s = Scratch::new();
    let text = "graph {\n  name: \"g\"\n  op {\n    name: \"a\"\n    type: \"Data\"\n    attr {\n      key: \"index\"\n      value {\n        i: 0\n      }\n    }\n  }\n  op {\n    name: \"b\"\n    type: \"NoOp\"\n    input: \"a:-1\"\n  }\n}\n";
    let p = s.write("ge_proto_00000001_graph_1_x.txt", text.as_bytes());
    let r = s.rt2(&["dump", p.to_str().unwrap()]).ok();
    assert!(
        r.stdout().contains("g0n0 -> g0n1 [style=dashed"),
        "{}",
        r.stdout()
    );
}

#[test]
fn text_dump_reads_back_to_the_same_graph() {
    let s = Scratch::new();
    let om = s.write("c.om", &testdata::compressed_om().to_bytes().unwrap());
    s.rt2(&[
        "dump",
        om.to_str().unwrap(),
        "--format",
        "pbtxt",
        "-o",
        "a.pbtxt",
    ])
    .ok();
    s.rt2(&["dump", "a.pbtxt", "--format", "pbtxt", "-o", "b.pbtxt"])
        .ok();
    assert_eq!(s.read("a.pbtxt"), s.read("b.pbtxt"));
    // Compression is undone on read: no key in the dump starts with a NUL escape.
    let text = String::from_utf8(s.read("a.pbtxt")).unwrap();
    assert!(
        !text.contains("key: \"\\000"),
        "attribute names are decompressed"
    );
    assert!(text.contains("key: \"index\""));
}

#[test]
fn om_to_json_to_om_keeps_the_graph_and_weights() {
    let s = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    s.rt2(&["compile", model.to_str().unwrap(), "-o", "a.om"])
        .ok();
    s.rt2(&["dump", "a.om", "--format", "json", "-o", "a.json"])
        .ok();
    s.rt2(&["compile", "a.json", "-o", "b.om"]).ok();
    s.rt2(&["dump", "a.om", "--format", "pbtxt", "-o", "a.pbtxt"])
        .ok();
    s.rt2(&["dump", "b.om", "--format", "pbtxt", "-o", "b.pbtxt"])
        .ok();
    assert_eq!(s.read("a.pbtxt"), s.read("b.pbtxt"));
}

#[test]
fn atc_json_leaves_out_what_atc_leaves_out() {
    let s = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    let full = s
        .rt2(&["dump", model.to_str().unwrap(), "--format", "json"])
        .ok()
        .stdout();
    let atc = s
        .rt2(&["dump", model.to_str().unwrap(), "--format", "json", "--atc"])
        .ok()
        .stdout();
    assert!(full.contains("\"data\""));
    assert!(!atc.contains("\"data\""));
    let j: serde_json::Value = serde_json::from_str(&atc).unwrap();
    assert_eq!(j["graph"][0]["name"], "cnn_bn");
}

#[test]
fn model_selects_a_model_of_a_multi_model_om() {
    let s = Scratch::new();
    let om = s.write("d.om", &testdata::multi_model_dynamic().to_bytes().unwrap());
    let r0 = s
        .rt2(&["dump", om.to_str().unwrap(), "--format", "pbtxt"])
        .ok()
        .stdout();
    let r2 = s
        .rt2(&[
            "dump",
            om.to_str().unwrap(),
            "--format",
            "pbtxt",
            "--model",
            "2",
        ])
        .ok()
        .stdout();
    assert_ne!(r0, r2);
    assert!(r2.contains("sub_2"), "{r2}");
    s.rt2(&["dump", om.to_str().unwrap(), "--model", "7"])
        .fails(2, &["--model 7", "[0, 1, 2]"]);
}
