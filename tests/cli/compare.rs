//! CLI tests of `rt2 compare`: an ONNX model against the OM compiled from it (every op
//! matched, all within tolerance), a planted wrong attribute found at its op, fusion records
//! (`_datadump_original_op_names`) matching a fused op to the op whose output it stands
//! for, and a candidate whose input type differs from the reference's.

use rt2::om::testdata_text::{DumpOp, dump_model, f32_desc, tensor_desc};
use rt2::om::text::print_text;
use rt2::proto::ge_ir::ModelDef;
use serde_json::Value;

use crate::util::{Scratch, fixture};

fn dump(sc: &Scratch, name: &str, md: &ModelDef) -> String {
    sc.write(name, print_text(md).as_bytes());
    name.to_string()
}

/// x -> Neg "neg" -> LeakyRelu "lrelu" (`negative_slope`) -> Mul "sq" (lrelu * lrelu).
fn chain(slope: f32) -> ModelDef {
    let d = f32_desc(&[4, 16]);
    dump_model(
        "chain",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .in_desc(d.clone())
                .out_desc(d.clone()),
            DumpOp::new("neg", "Neg")
                .input("x:0")
                .in_desc(d.clone())
                .out_desc(d.clone()),
            DumpOp::new("lrelu", "LeakyRelu")
                .input("neg:0")
                .attr_f("negative_slope", slope)
                .in_desc(d.clone())
                .out_desc(d.clone()),
            DumpOp::new("sq", "Mul")
                .input("lrelu:0")
                .input("lrelu:0")
                .in_desc(d.clone())
                .in_desc(d.clone())
                .out_desc(d.clone()),
            DumpOp::new("out", "NetOutput").input("sq:0").in_desc(d),
        ],
    )
}

fn rows(j: &Value) -> &Vec<Value> {
    j["ops"].as_array().expect("ops")
}

fn row<'a>(j: &'a Value, op: &str) -> &'a Value {
    rows(j)
        .iter()
        .find(|r| r["candidate_op"] == op)
        .unwrap_or_else(|| panic!("no row for {op}: {j:#}"))
}

#[test]
fn an_onnx_model_against_its_compiled_om_matches_every_op() {
    let sc = Scratch::new();
    let model = fixture("models/cnn_bn.onnx");
    let model = model.to_str().unwrap();
    sc.rt2(&["compile", model, "-o", "m.om"]).ok();
    let j = sc
        .rt2(&[
            "compare",
            model,
            "m.om",
            "--shape",
            "x=2,3,8,8",
            "--format",
            "json",
        ])
        .ok()
        .json();
    assert!(j["matched"].as_u64().unwrap() >= 4, "{j:#}");
    assert_eq!(j["only_in_reference"], serde_json::json!([]), "{j:#}");
    assert_eq!(j["only_in_candidate"], serde_json::json!([]), "{j:#}");
    assert!(j["first_divergence"].is_null(), "{j:#}");
    for r in rows(&j) {
        assert_eq!(r["within"], true, "{r:#}");
        assert_eq!(r["matched_by"], "name", "{r:#}");
        // The same lowering of the same graph: the same bits.
        assert_eq!(r["max_abs_err"], 0.0, "{r:#}");
        assert!(r["cosine"].as_f64().unwrap() > 0.999_999, "{r:#}");
    }
    // The table says the same for people.
    sc.rt2(&["compare", model, "m.om", "--shape", "x=2,3,8,8"])
        .ok()
        .stdout_has(&[
            "no divergence",
            "0 only in the reference, 0 only in the candidate",
        ]);
}

#[test]
fn a_planted_wrong_attribute_is_found_at_its_op() {
    let sc = Scratch::new();
    let good = dump(&sc, "good.txt", &chain(0.1));
    let bad = dump(&sc, "bad.txt", &chain(0.3));
    let run = sc.rt2(&["compare", &good, &bad, "--format", "json"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let err = run.stderr();
    assert!(
        err.contains("bad.txt: diverges from good.txt at op \"lrelu\" (LeakyRelu), output 0"),
        "{err}"
    );
    let j = run.json();
    assert_eq!(row(&j, "neg")["within"], true, "{j:#}");
    assert_eq!(row(&j, "neg")["max_abs_err"], 0.0);
    let lrelu = row(&j, "lrelu");
    assert_eq!(lrelu["within"], false);
    // Inputs uniform in [-1, 1): about half the elements are negative after the Neg
    // (each off by 0.2 * |v|), the others equal.
    let bad_elems = lrelu["mismatches"].as_u64().unwrap();
    assert!((10..=54).contains(&bad_elems), "{lrelu:#}");
    assert!(
        lrelu["max_abs_err"].as_f64().unwrap() <= 0.2 + 1e-6,
        "{lrelu:#}"
    );
    assert!(lrelu["max_abs_err"].as_f64().unwrap() > 0.05, "{lrelu:#}");
    assert_eq!(row(&j, "sq")["within"], false);
    assert_eq!(j["first_divergence"]["candidate_op"], "lrelu");
    // The same against itself: exit 0.
    sc.rt2(&["compare", &good, &good]).ok();
    // Looser than the planted error: within.
    sc.rt2(&["compare", &good, &bad, "--atol", "0.25"]).ok();
}

#[test]
fn a_fused_op_matches_the_op_whose_output_it_stands_for() {
    let sc = Scratch::new();
    let d = f32_desc(&[3, 5]);
    let data = || {
        DumpOp::new("x", "Data")
            .attr_i("index", 0)
            .in_desc(d.clone())
            .out_desc(d.clone())
    };
    let unary = |name: &str, ty: &str, src: &str| {
        DumpOp::new(name, ty)
            .input(src)
            .in_desc(d.clone())
            .out_desc(d.clone())
    };
    let out = |src: &str| {
        DumpOp::new("out", "NetOutput")
            .input(src)
            .in_desc(d.clone())
    };
    // Neg, Neg, Relu before fusion; one Relu after it, recording the three.
    let before = dump_model(
        "before",
        vec![
            data(),
            unary("n1", "Neg", "x:0"),
            unary("n2", "Neg", "n1:0"),
            unary("r", "Relu", "n2:0"),
            out("r:0"),
        ],
    );
    let after = dump_model(
        "after",
        vec![
            data(),
            unary("fused", "Relu", "x:0")
                .attr_strs("_datadump_original_op_names", &["n1", "n2", "r"]),
            out("fused:0"),
        ],
    );
    let before = dump(&sc, "before.txt", &before);
    let after = dump(&sc, "after.txt", &after);
    let j = sc
        .rt2(&["compare", &before, &after, "--format", "json"])
        .ok()
        .json();
    assert_eq!(j["matched"], 1, "{j:#}");
    let fused = row(&j, "fused");
    assert_eq!(fused["reference_op"], "r");
    assert_eq!(fused["matched_by"], "candidate's original_op_names");
    assert_eq!(fused["max_abs_err"], 0.0);
    assert_eq!(j["fused_in_reference"], serde_json::json!(["n1", "n2"]));
    assert_eq!(j["only_in_reference"], serde_json::json!([]));
    // The other way round: the reference's record names the candidate's ops.
    let j = sc
        .rt2(&["compare", &after, &before, "--format", "json"])
        .ok()
        .json();
    assert_eq!(row(&j, "r")["reference_op"], "fused", "{j:#}");
    assert_eq!(row(&j, "r")["matched_by"], "reference's original_op_names");
    assert_eq!(j["fused_in_candidate"], serde_json::json!(["n1", "n2"]));
}

#[test]
fn a_float16_candidate_is_fed_the_references_values_and_held_to_float16s_tolerance() {
    let sc = Scratch::new();
    let model = |dtype: i32| {
        let d = tensor_desc(dtype, &[2, 8], "ND");
        dump_model(
            "m",
            vec![
                DumpOp::new("x", "Data")
                    .attr_i("index", 0)
                    .in_desc(d.clone())
                    .out_desc(d.clone()),
                DumpOp::new("t", "Tanh")
                    .input("x:0")
                    .in_desc(d.clone())
                    .out_desc(d.clone()),
                DumpOp::new("out", "NetOutput").input("t:0").in_desc(d),
            ],
        )
    };
    // GE's proto numbers: DT_FLOAT 1, DT_FLOAT16 2.
    let f32_model = dump(&sc, "f32.txt", &model(1));
    let f16_model = dump(&sc, "f16.txt", &model(2));
    let j = sc
        .rt2(&["compare", &f32_model, &f16_model, "--format", "json"])
        .ok()
        .json();
    let t = row(&j, "t");
    assert_eq!(t["candidate"]["dtype"], "float16", "{t:#}");
    assert_eq!(t["rtol"], 1e-2);
    // Two roundings to float16 (the input, the output): nonzero, well inside 1e-2.
    let err = t["max_abs_err"].as_f64().unwrap();
    assert!(err > 0.0 && err < 2e-3, "{t:#}");
    // Held to float32's tolerance, it diverges.
    sc.rt2(&[
        "compare", &f32_model, &f16_model, "--rtol", "1e-6", "--atol", "0",
    ])
    .fails(1, &["at op \"t\" (Tanh)"]);
}

#[test]
fn bad_tolerances_and_files_are_one_line_errors() {
    let sc = Scratch::new();
    let good = dump(&sc, "good.txt", &chain(0.1));
    sc.rt2(&["compare", &good, &good, "--rtol=-1"])
        .fails(2, &["--rtol -1: a tolerance is a finite number"]);
    sc.write("junk.bin", b"\x00\x01not a model");
    sc.rt2(&["compare", &good, "junk.bin"])
        .fails(2, &["junk.bin"]);
    sc.rt2(&["compare", &good, "missing.txt"])
        .fails(2, &["missing.txt"]);
}
