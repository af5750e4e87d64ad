//! CLI tests: `rt2 inspect` on every kind of file, as a table and as JSON.

use rt2::om::testdata;

use crate::util::{Scratch, fixture};

#[test]
fn om_header_partitions_and_graphs_as_json() {
    let s = Scratch::new();
    let om = s.write(
        "dyn.om",
        &testdata::multi_model_dynamic().to_bytes().unwrap(),
    );
    let r = s
        .rt2(&["inspect", om.to_str().unwrap(), "--format", "json"])
        .ok();
    let j = r.json();
    assert_eq!(j["kind"], "om");
    let h = &j["header"];
    assert_eq!(h["magic"], "IMOD");
    assert_eq!(h["version"], "0x20000000");
    assert_eq!(h["model_num"], 3);
    assert_eq!(h["is_dynamic"], true);
    assert_eq!(h["is_unknow_model"], 1);
    for key in ["model_type", "name", "platform_version"] {
        assert!(h.get(key).is_some(), "header lacks {key}");
    }
    let parts = j["partitions"].as_array().unwrap();
    let models: Vec<u64> = parts.iter().map(|p| p["model"].as_u64().unwrap()).collect();
    assert_eq!(models.iter().max(), Some(&2));
    for p in parts {
        for key in ["type", "offset", "size"] {
            assert!(p.get(key).is_some(), "partition lacks {key}");
        }
    }
    // The first partition's data starts after the header and model 0's table.
    let first = &parts[0];
    let model0 = parts.iter().filter(|p| p["model"] == 0).count() as u64;
    assert_eq!(first["offset"].as_u64().unwrap(), 256 + 8 + 24 * model0);
    let graphs = j["graphs"].as_array().unwrap();
    assert_eq!(graphs.len(), 3, "a graph per model with a MODEL_DEF");
    assert!(j["tasks"].as_object().is_some_and(|t| !t.is_empty()));
    assert!(j["kernels"].as_array().is_some_and(|k| !k.is_empty()));
}

#[test]
fn onnx_graph_summary_has_the_contract_keys() {
    let s = Scratch::new();
    let r = s
        .rt2(&[
            "inspect",
            fixture("models/cnn_bn.onnx").to_str().unwrap(),
            "--format",
            "json",
        ])
        .ok();
    let j = r.json();
    assert_eq!(j["kind"], "onnx");
    assert!(j.get("header").is_none() && j.get("partitions").is_none());
    let g = &j["graphs"][0];
    assert_eq!(g["name"], "cnn_bn");
    // The Gemm is GE's MatMulV2 and Add.
    assert_eq!(g["nodes"], 19);
    assert_eq!(
        g["inputs"],
        serde_json::json!([{"name": "x", "dtype": "float32", "shape": [-1, 3, 8, 8]}])
    );
    assert_eq!(
        g["outputs"],
        serde_json::json!([{"name": "probs", "dtype": "float32", "shape": [-1, 10]}])
    );
    assert_eq!(g["op_types"]["Const"], 9);
    assert_eq!(g["op_types"]["Conv2D"], 1);
    assert_eq!(g["subgraphs"], serde_json::json!([]));
    assert_eq!(j["problems"], serde_json::json!([]));
}

#[test]
fn subgraphs_are_listed_depth_first() {
    let s = Scratch::new();
    let r = s
        .rt2(&[
            "inspect",
            fixture("models/nested_if_weights.onnx").to_str().unwrap(),
            "--format",
            "json",
        ])
        .ok();
    let subs = r.json()["graphs"][0]["subgraphs"].clone();
    assert_eq!(
        subs,
        serde_json::json!([
            "outer_if_0_then_branch",
            "outer_if_0_then_branch/inner_if_0_then_branch",
            "outer_if_0_then_branch/inner_if_1_else_branch",
            "outer_if_1_else_branch"
        ])
    );
}

#[test]
fn table_for_people() {
    let s = Scratch::new();
    let om = s.write("c.om", &testdata::compressed_om().to_bytes().unwrap());
    s.rt2(&["inspect", om.to_str().unwrap()]).ok().stdout_has(&[
        "kind: om",
        "OM header",
        "Partitions",
        "MODEL_DEF",
        "WEIGHTS_DATA",
        "op type",
        "verifier:",
    ]);
}

#[test]
fn every_om_fixture_inspects() {
    let s = Scratch::new();
    for (name, om) in testdata::all() {
        let path = s.write(&format!("{name}.om"), &om.to_bytes().unwrap());
        let j = s
            .rt2(&["inspect", path.to_str().unwrap(), "--format", "json"])
            .ok()
            .json();
        assert_eq!(j["kind"], "om", "{name}");
        assert!(
            !j["graphs"].as_array().unwrap().is_empty(),
            "{name} has graphs"
        );
    }
}

#[test]
fn flow_models_list_their_submodels() {
    let s = Scratch::new();
    let om = s.write("flow.om", &testdata::flow_om().to_bytes().unwrap());
    let j = s
        .rt2(&["inspect", om.to_str().unwrap(), "--format", "json"])
        .ok()
        .json();
    assert_eq!(j["header"]["model_type"], "MODEL_TYPE_FLOW_MODEL");
    let subs = j["flow_submodels"].as_array().unwrap();
    assert_eq!(subs.len(), 2);
    let kinds: Vec<&str> = j["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"FLOW_MODEL") && kinds.contains(&"FLOW_SUBMODEL"),
        "{kinds:?}"
    );
}

/// GE's own nodes are checked against their prototypes: a Conv2D without its required
/// `strides` and `pads`, an Add given three inputs; ONNX-imported nodes and graph inputs
/// are not (a Data's `x` is never fed).
#[test]
fn ge_nodes_are_checked_against_their_prototypes() {
    use rt2::om::testdata_text::{DumpOp, dump_model, f32_desc};
    let s = Scratch::new();
    let d = f32_desc(&[1, 3, 4, 4]);
    let md = dump_model(
        "protos",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .in_desc(d.clone())
                .out_desc(d.clone()),
            DumpOp::new("w", "Data")
                .attr_i("index", 1)
                .in_desc(f32_desc(&[3, 3, 1, 1]))
                .out_desc(f32_desc(&[3, 3, 1, 1])),
            DumpOp::new("conv", "Conv2D")
                .input("x:0")
                .input("w:0")
                .in_desc(d.clone())
                .in_desc(f32_desc(&[3, 3, 1, 1]))
                .out_desc(d.clone()),
            DumpOp::new("add3", "Add")
                .input("conv:0")
                .input("x:0")
                .input("x:0")
                .in_desc(d.clone())
                .in_desc(d.clone())
                .in_desc(d.clone())
                .out_desc(d.clone()),
            DumpOp::new("out", "NetOutput").input("add3:0").in_desc(d),
        ],
    );
    s.write("protos.txt", rt2::om::text::print_text(&md).as_bytes());
    let j = s
        .rt2(&["inspect", "protos.txt", "--format", "json"])
        .ok()
        .json();
    let problems: Vec<&str> = j["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let proto: Vec<&&str> = problems
        .iter()
        .filter(|p| p.contains("prototype"))
        .collect();
    assert_eq!(proto.len(), 3, "{problems:#?}");
    assert!(proto.iter().any(|p| p.contains(
        "graph \"protos\" node \"conv\" (Conv2D): required attribute strides (ListInt) is missing"
    )));
    assert!(proto.iter().any(|p| p.contains("required attribute pads")));
    assert!(
        proto
            .iter()
            .any(|p| p.contains("node \"add3\" (Add): 3 data input(s), the prototype takes 2"))
    );
}
