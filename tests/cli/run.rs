//! CLI tests: `rt2 run`: the bundled models checked against ONNX Runtime's outputs under
//! every executor, a wrong expectation (exit 1), outputs written as `.npy` and read back,
//! the JSON summary, seeded random inputs, bad inputs (exit 2, the file named), and
//! concurrent streams.

use std::path::{Path, PathBuf};

use prost::Message;
use rt2::cmd::npy;
use rt2::npu::{DType, HostTensor};
use rt2::proto::onnx::TensorProto;

use crate::util::{Scratch, fixture};

/// The bundled models with an ONNX backend-test data set.
const CHECKED: [&str; 3] = ["cnn_bn", "loop_counter", "lstm"];

fn model(name: &str) -> String {
    fixture(&format!("models/{name}.onnx"))
        .to_string_lossy()
        .into_owned()
}

fn data_set(name: &str) -> PathBuf {
    fixture(&format!("models/{name}/test_data_set_0"))
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// Reads an ONNX TensorProto file as rt2 does.
fn read_pb(path: &Path) -> HostTensor {
    let bytes = std::fs::read(path).unwrap();
    let t = rt2::om::onnx::read_tensor(&bytes, "pb").unwrap();
    rt2::lower::attrs::tensor(&t).unwrap()
}

fn read_npy(path: &Path) -> HostTensor {
    npy::read(&std::fs::read(path).unwrap(), None).unwrap()
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    assert_eq!(t.dtype, DType::F32);
    t.data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The output files of lstm.onnx.
const LSTM_OUTPUTS: [&str; 3] = ["y.npy", "y_h.npy", "y_c.npy"];

/// Runs `file` (the lstm model in some form) on lstm's data set with `extra` arguments,
/// writing the outputs to `dir`; the JSON summary.
fn run_lstm(sc: &Scratch, file: &str, dir: &str, extra: &[&str]) -> serde_json::Value {
    let check = data_set("lstm");
    let mut a = vec!["run", file, "--check", s(&check), "--output-dir", dir];
    a.extend_from_slice(&["--format", "json"]);
    a.extend_from_slice(extra);
    sc.rt2(&a).ok().json()
}

/// Asserts that the lstm outputs in directories `a` and `b` are the same bytes.
#[track_caller]
fn same_outputs(sc: &Scratch, a: &str, b: &str) {
    for f in LSTM_OUTPUTS {
        assert!(
            sc.read(&format!("{a}/{f}")) == sc.read(&format!("{b}/{f}")),
            "{f}: {a} and {b} differ"
        );
    }
}

#[test]
fn every_fixture_passes_its_check_under_every_executor() {
    let sc = Scratch::new();
    for name in CHECKED {
        for exec in ["seq", "topo", "topo-prio"] {
            let r = sc
                .rt2(&[
                    "run",
                    &model(name),
                    "--executor",
                    exec,
                    "--check",
                    s(&data_set(name)),
                    "--format",
                    "json",
                ])
                .ok();
            let j = r.json();
            assert_eq!(j["executor"], exec);
            assert_eq!(j["check"]["ok"], true, "{name} {exec}: {j:#}");
            for o in j["check"]["outputs"].as_array().unwrap() {
                let abs = o["max_abs_err"].as_f64().unwrap();
                assert!(abs < 1e-4, "{name} {exec}: {o}");
                assert_eq!(o["mismatches"], 0);
            }
        }
    }
}

#[test]
fn the_table_shows_each_outputs_worst_error() {
    let sc = Scratch::new();
    sc.rt2(&["run", &model("lstm"), "--check", s(&data_set("lstm"))])
        .ok()
        .stdout_has(&[
            "executor topo",
            "max abs err",
            "max rel err",
            "every output within tolerance",
            "latency (us, 1 execution(s))",
            "nodes: Init",
            "input_0.pb",
        ]);
}

/// Copies `name`'s data set into `dir` with output 0's first element moved by `delta`.
fn tampered(sc: &Scratch, name: &str, delta: f32) -> PathBuf {
    let dir = sc.path("tampered");
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(data_set(name)).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    let out = dir.join("output_0.pb");
    let mut t = TensorProto::decode(&*std::fs::read(&out).unwrap()).unwrap();
    match t.raw_data.as_mut().filter(|r| !r.is_empty()) {
        Some(raw) => {
            let v = f32::from_le_bytes(raw[..4].try_into().unwrap()) + delta;
            raw[..4].copy_from_slice(&v.to_le_bytes());
        }
        None => t.float_data[0] += delta,
    }
    std::fs::write(&out, t.encode_to_vec()).unwrap();
    dir
}

#[test]
fn a_wrong_expected_output_exits_1_and_names_it() {
    let sc = Scratch::new();
    let dir = tampered(&sc, "cnn_bn", 0.5);
    let r = sc
        .rt2(&["run", &model("cnn_bn"), "--check", s(&dir)])
        .fails(
            1,
            &[
                "cnn_bn.onnx",
                "--check",
                "output 0",
                "element 0",
                "1 element(s)",
            ],
        );
    let out = r.stdout();
    assert!(out.contains("FAIL (1 element(s))"), "{out}");
    assert!(
        out.contains("5.000e-1"),
        "the worst error is the change: {out}"
    );
    // A change inside the tolerance passes: 1e-5 is below atol.
    let sc = Scratch::new();
    let dir = tampered(&sc, "cnn_bn", 1e-5);
    sc.rt2(&["run", &model("cnn_bn"), "--check", s(&dir)]).ok();
    // ... and fails once the tolerances are tightened to nothing.
    sc.rt2(&[
        "run",
        &model("cnn_bn"),
        "--check",
        s(&dir),
        "--rtol",
        "0",
        "--atol",
        "0",
    ])
    .fails(1, &["output 0"]);
}

#[test]
fn outputs_are_written_as_npy_and_inputs_read_from_npy_and_pb() {
    let sc = Scratch::new();
    let j = run_lstm(&sc, &model("lstm"), "out", &[]);
    let outs = j["outputs"].as_array().unwrap();
    assert_eq!(outs.len(), 3);
    for (k, o) in outs.iter().enumerate() {
        let path = sc.path(o["path"].as_str().unwrap());
        assert!(path.starts_with(sc.path("out")), "{path:?}");
        let got = read_npy(&path);
        let want = read_pb(&data_set("lstm").join(format!("output_{k}.pb")));
        assert_eq!(got.shape, want.shape);
        assert_eq!(o["shape"], serde_json::json!(got.shape));
        assert_eq!(o["dtype"], "float32");
        for (a, b) in f32s(&got).iter().zip(f32s(&want)) {
            assert!((a - b).abs() <= 1e-4 + 1e-3 * b.abs(), "{a} vs {b}");
        }
    }
    // The same input given as .npy, and as the .pb itself, gives the same bytes.
    let input = read_pb(&data_set("lstm").join("input_0.pb"));
    sc.write("x.npy", &npy::write(&input).unwrap());
    let name = j["inputs"][0]["name"].as_str().unwrap().to_string();
    let pb = data_set("lstm").join("input_0.pb");
    for (spec, dir) in [
        (format!("{name}=x.npy"), "out_npy"),
        (format!("{name}={}", s(&pb)), "out_pb"),
    ] {
        sc.rt2(&["run", &model("lstm"), "--input", &spec, "--output-dir", dir])
            .ok();
        same_outputs(&sc, "out", dir);
    }
}

#[test]
fn json_summary_has_the_contract_keys() {
    let sc = Scratch::new();
    let j = sc
        .rt2(&[
            "run",
            &model("cnn_bn"),
            "--shape",
            "x=2,3,8,8",
            "--iterations",
            "3",
            "--warmup",
            "1",
            "--executor",
            "seq",
            "--format",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(j["executor"], "seq");
    assert_eq!(j["iterations"], 3);
    let lat = &j["latency_us"];
    let (min, median, max) = (
        lat["min"].as_f64().unwrap(),
        lat["median"].as_f64().unwrap(),
        lat["max"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= median && median <= max, "{lat}");
    assert_eq!(lat["samples"], 3);
    for g in ["init", "main", "deinit"] {
        assert!(j["nodes"][g].as_u64().unwrap() > 0, "{g}");
    }
    let o = &j["outputs"][0];
    assert!(o["name"].is_string());
    assert_eq!(o["dtype"], "float32");
    assert_eq!(o["shape"][0], 2, "the batch given with --shape");
    assert!(o["path"].is_null(), "no --output-dir");
    assert_eq!(j["inputs"][0]["source"], "random");
    assert_eq!(j["inputs"][0]["shape"], serde_json::json!([2, 3, 8, 8]));
    assert!(j.get("check").is_none());
}

#[test]
fn random_inputs_are_deterministic_for_a_seed() {
    let sc = Scratch::new();
    let run = |seed: &str, dir: &str| {
        sc.rt2(&[
            "run",
            &model("nested_if_weights"),
            "--shape",
            "x=2,4",
            "--seed",
            seed,
            "--output-dir",
            dir,
            "--format",
            "json",
        ])
        .ok()
        .json()
    };
    let j = run("42", "a");
    run("42", "b");
    run("43", "c");
    let mut differs = false;
    for o in j["outputs"].as_array().unwrap() {
        let file = Path::new(o["path"].as_str().unwrap()).file_name().unwrap();
        let f = file.to_str().unwrap();
        assert!(
            sc.read(&format!("a/{f}")) == sc.read(&format!("b/{f}")),
            "{f}: same seed, other bytes"
        );
        differs |= sc.read(&format!("a/{f}")) != sc.read(&format!("c/{f}"));
    }
    assert!(differs, "another seed gives other outputs");
}

/// Writes a `.npy` of zeros.
fn write_zeros(sc: &Scratch, name: &str, dtype: DType, shape: &[i64]) {
    let n = dtype.tensor_bytes(shape).unwrap() as usize;
    let t = HostTensor {
        dtype,
        shape: shape.to_vec(),
        data: vec![0; n],
    };
    sc.write(name, &npy::write(&t).unwrap());
}

#[test]
fn bad_inputs_exit_2_naming_the_file() {
    let sc = Scratch::new();
    let cnn = model("cnn_bn");
    let shape = ["--shape", "x=1,3,8,8"];
    let run = |extra: &[&str], needles: &[&str]| {
        let mut a = vec!["run", cnn.as_str(), "--output-dir", "out"];
        a.extend_from_slice(extra);
        sc.rt2(&a).fails(2, needles);
        assert!(!sc.exists("out"), "nothing written: {extra:?}");
    };
    run(
        &["--input", "x=missing.npy"],
        &["missing.npy", "cannot read"],
    );
    write_zeros(&sc, "i64.npy", DType::I64, &[1, 3, 8, 8]);
    run(
        &["--input", "x=i64.npy"],
        &["i64.npy", "\"x\"", "int64", "float32"],
    );
    write_zeros(&sc, "shape.npy", DType::F32, &[1, 3, 8, 9]);
    run(
        &["--input", "x=shape.npy"],
        &["shape.npy", "\"x\"", "dim 3 is 9"],
    );
    sc.write("junk.npy", b"\x93NUMPY\x01\x00\x05\x00{'de");
    run(&["--input", "x=junk.npy"], &["junk.npy"]);
    run(
        &["--input", "nope=x.npy"],
        &["cnn_bn.onnx", "no input \"nope\"", "its inputs: \"x\""],
    );
    run(
        &[&shape[..], &["--shape", "nope=1"]].concat(),
        &["no input \"nope\"", "\"x\""],
    );
    run(
        &[],
        &[
            "cnn_bn.onnx",
            "input \"x\"",
            "dim 0 is unknown",
            "--shape x=",
        ],
    );
    run(&["--shape", "x=1,3,8"], &["cnn_bn.onnx", "rank 3"]);
    run(
        &["--check", "no_such_dir"],
        &["no_such_dir", "not a directory"],
    );
    sc.rt2(&["run", "missing.onnx"]).fails(2, &["missing.onnx"]);
    sc.write("bad.onnx", b"\x08\x07garbage that is not protobuf\xff\xff");
    sc.rt2(&["run", "bad.onnx"]).fails(2, &["bad.onnx"]);
    // A data set whose input does not fit the model.
    std::fs::create_dir_all(sc.path("ds")).unwrap();
    std::fs::copy(
        data_set("lstm").join("input_0.pb"),
        sc.path("ds/input_0.pb"),
    )
    .unwrap();
    run(&["--check", "ds"], &["input_0.pb", "\"x\""]);
}

#[test]
fn streams_run_concurrently_to_the_same_outputs() {
    let sc = Scratch::new();
    let j = run_lstm(
        &sc,
        &model("lstm"),
        "many",
        &["--streams", "3", "--iterations", "2"],
    );
    assert_eq!(j["streams"], 3);
    assert_eq!(j["latency_us"]["samples"], 6);
    assert_eq!(j["check"]["ok"], true);
    run_lstm(&sc, &model("lstm"), "one", &[]);
    same_outputs(&sc, "many", "one");
}

#[test]
fn an_om_and_an_exeg_run_to_the_same_outputs_as_the_onnx_model() {
    let sc = Scratch::new();
    sc.rt2(&["compile", &model("lstm"), "-o", "lstm.om"]).ok();
    sc.rt2(&["lower", "lstm.om", "-o", "lstm.exeg"]).ok();
    run_lstm(&sc, &model("lstm"), "onnx", &[]);
    run_lstm(&sc, "lstm.om", "om", &[]);
    run_lstm(&sc, "lstm.exeg", "exeg", &[]);
    same_outputs(&sc, "onnx", "om");
    same_outputs(&sc, "onnx", "exeg");
    sc.rt2(&["run", "lstm.exeg", "--model", "1"])
        .fails(2, &["lstm.exeg", "one model"]);
}

/// Adds two float vectors of unknown length.
const DYNAMIC_ADD: &str = r#"graph {
  name: "g"
  op { name: "x" type: "Data" attr { key: "index" value { i: 0 } }
       output_desc { dtype: DT_FLOAT shape { dim: -1 } } }
  op { name: "y" type: "Data" attr { key: "index" value { i: 1 } }
       output_desc { dtype: DT_FLOAT shape { dim: -1 } } }
  op { name: "add" type: "Add" input: "x:0" input: "y:0"
       output_desc { dtype: DT_FLOAT shape { dim: -1 } } }
  op { name: "out" type: "NetOutput" input: "add:0" }
}
"#;

#[test]
fn a_kernel_failure_exits_1_naming_the_node_and_writes_nothing() {
    let sc = Scratch::new();
    sc.write("add.ge.txt", DYNAMIC_ADD.as_bytes());
    for streams in ["1", "2"] {
        sc.rt2(&[
            "run",
            "add.ge.txt",
            "--shape",
            "x=2",
            "--shape",
            "y=3",
            "--streams",
            streams,
            "--output-dir",
            "out",
        ])
        .fails(
            1,
            &[
                "add.ge.txt",
                "execution 1",
                "\"add/InferShape\"",
                "broadcast",
            ],
        );
        assert!(!sc.exists("out"));
    }
    // Shapes that fit: the output "add:0" is written as add_0.npy, x + y.
    sc.rt2(&[
        "run",
        "add.ge.txt",
        "--shape",
        "x=3",
        "--shape",
        "y=3",
        "--output-dir",
        "out",
    ])
    .ok()
    .stdout_has(&["out/add_0.npy"]);
    let (x, y) = (
        rt2::cmd::random::tensor(DType::F32, &[3], 0, 0).unwrap(),
        rt2::cmd::random::tensor(DType::F32, &[3], 0, 1).unwrap(),
    );
    let sum: Vec<f32> = f32s(&x).iter().zip(f32s(&y)).map(|(a, b)| a + b).collect();
    assert_eq!(f32s(&read_npy(&sc.path("out/add_0.npy"))), sum);
}
