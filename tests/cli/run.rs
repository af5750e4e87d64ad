//! CLI tests: `rt2 run`: the bundled models checked against ONNX Runtime's outputs under
//! every executor, a wrong expectation (exit 1), outputs written as `.npy` and read back,
//! the JSON summary, seeded random inputs, bad inputs (exit 2, the file named),
//! concurrent streams, and the subscribers: `--profile` (calls counted per kernel type and
//! op under every executor), `--trace` (a Chrome trace parsed and checked track by track)
//! and `--dump-tensors` (each op's outputs against hand-computed values).

use std::path::{Path, PathBuf};

use prost::Message;
use rt2::cmd::npy;
use rt2::ops::{DType, HostTensor};
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

pub(crate) fn f32s(t: &HostTensor) -> Vec<f32> {
    assert_eq!(t.dtype, DType::F32);
    t.data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The output files of lstm.onnx.
const LSTM_OUTPUTS: [&str; 3] = ["y.npy", "y_h.npy", "y_c.npy"];

/// `rt2 run` of bundled model `name` with `extra` arguments, checked against its data set
/// (exit 0 expected); the JSON summary.
fn checked(sc: &Scratch, name: &str, extra: &[&str]) -> serde_json::Value {
    let (file, check) = (model(name), data_set(name));
    let mut a = vec!["run", &file, "--check", s(&check), "--format", "json"];
    a.extend_from_slice(extra);
    sc.rt2(&a).ok().json()
}

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
            let j = checked(&sc, name, &["--executor", exec]);
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
fn static_memory_passes_the_checks_under_every_executor() {
    let sc = Scratch::new();
    for name in CHECKED {
        for exec in ["seq", "topo-mt"] {
            let j = checked(&sc, name, &["--static-memory", "--executor", exec]);
            assert_eq!(j["check"]["ok"], true, "{name} {exec}: {j:#}");
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
            let mut bytes = raw.to_vec();
            let v = f32::from_le_bytes(bytes[..4].try_into().unwrap()) + delta;
            bytes[..4].copy_from_slice(&v.to_le_bytes());
            *raw = bytes.into();
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
        data: vec![0; n].into(),
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
    // A thread count the operating system could not start is refused before any runs.
    run(
        &[&shape[..], &["--compute-threads", "100000"]].concat(),
        &["--compute-threads", "100000", "0..=1024"],
    );
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

/// The kernel histogram of cnn_bn's Main graph as `rt2 lower` reports it (with the
/// multi-thread passes for topo-mt), without the kernels the engines never run.
fn main_kernels(sc: &Scratch, exec: &str) -> serde_json::Map<String, serde_json::Value> {
    main_kernels_for(sc, exec, &["--input-shape", "x:2,3,8,8"])
}

/// [`main_kernels`] of cnn_bn lowered with `extra`.
fn main_kernels_for(
    sc: &Scratch,
    exec: &str,
    extra: &[&str],
) -> serde_json::Map<String, serde_json::Value> {
    let out = sc.path(&format!("cnn_bn_{exec}.exeg"));
    let m = model("cnn_bn");
    let mut a = vec!["lower", &m, "-o", s(&out), "--format", "json"];
    if exec == "topo-mt" {
        a.push("--multi-thread");
    }
    a.extend_from_slice(extra);
    let mut hist = sc.rt2(&a).ok().json()["graphs"]["main"]["kernels"]
        .as_object()
        .unwrap()
        .clone();
    // Bound before the run (inputs, Init's exports) or made at load (constants).
    for bound in ["Data", "InnerData", "Const"] {
        hist.remove(bound);
    }
    hist
}

/// The calls per kernel type of a `--profile --format json` report.
fn kernel_calls(j: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    j["profile"]["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["kernel"].as_str().unwrap().to_string(),
                r["count"].clone(),
            )
        })
        .collect()
}

/// cnn_bn leaves its batch unknown: `rt2 run` lowers it for the batch of its input (2)
/// and calls the kernels of `rt2 lower --input-shape x:2,3,8,8`, none inferring a shape;
/// with `--keep-dynamic-shapes` it calls those of `rt2 lower`, an InferShape per op. The
/// outputs have the same bits.
#[test]
fn unknown_input_dims_are_fixed_to_the_inputs_unless_kept_dynamic() {
    let sc = Scratch::new();
    let mut outputs = Vec::new();
    for (flags, lower) in [
        (&[][..], &["--input-shape", "x:2,3,8,8"][..]),
        (&["--keep-dynamic-shapes"][..], &[][..]),
    ] {
        let dir = sc.path(&format!("out{}", flags.len()));
        let mut a = vec!["--profile", "--output-dir", s(&dir)];
        a.extend_from_slice(flags);
        let got = kernel_calls(&run_cnn(&sc, "topo", &a));
        assert_eq!(got, main_kernels_for(&sc, "topo", lower), "{flags:?}");
        let infers = got.get("InferShape").and_then(|n| n.as_u64()).unwrap_or(0);
        assert_eq!(
            infers > 0,
            !flags.is_empty(),
            "{flags:?}: {infers} InferShape"
        );
        outputs.push(std::fs::read(dir.join("probs.npy")).unwrap());
    }
    assert!(outputs[0] == outputs[1], "the outputs' bits differ");
}

/// `rt2 run cnn_bn` with a batch of 2 and `extra`.
fn rt2_cnn(sc: &Scratch, extra: &[&str]) -> crate::util::Run {
    let m = model("cnn_bn");
    let mut a = vec!["run", &m, "--shape", "x=2,3,8,8"];
    a.extend_from_slice(extra);
    sc.rt2(&a)
}

/// `rt2 run cnn_bn` under `exec` with `extra`; the JSON summary.
fn run_cnn(sc: &Scratch, exec: &str, extra: &[&str]) -> serde_json::Value {
    let mut a = vec!["--executor", exec, "--format", "json"];
    a.extend_from_slice(extra);
    rt2_cnn(sc, &a).ok().json()
}

/// The ops of cnn_bn (compute node name, op type), as lowering names them.
const CNN_OPS: [(&str, &str); 5] = [
    // conv1, bn1 and relu1: the normalization folds into the convolution and the Relu
    // fuses into it (lower/fuse.rs), launched under the Relu's name.
    ("relu1", "Conv"),
    ("pool1", "MaxPool"),
    ("flatten", "Reshape"),
    // GE's Gemm plugin makes MatMulV2 and the bias Add; the bias fuses into the product
    // (lower/fuse.rs), launched as the library's Gemm under the node's name.
    ("fc", "Gemm"),
    ("softmax", "Softmax"),
];

#[test]
fn the_profile_counts_every_timed_node_call_under_every_executor() {
    let sc = Scratch::new();
    for exec in ["seq", "topo", "topo-prio", "topo-mt"] {
        // topo-mt's calls (from three threads) are more than the recorder's chunk of
        // 1024 spans, so the spans are counted across chunks too.
        let iterations: u64 = if exec == "topo-mt" { 48 } else { 3 };
        let want = main_kernels(&sc, exec);
        // The warmup is not counted.
        let j = run_cnn(
            &sc,
            exec,
            &[
                "--profile",
                "--iterations",
                &iterations.to_string(),
                "--warmup",
                "2",
            ],
        );
        let p = &j["profile"];
        assert_eq!(p["executions"], iterations);
        let got = kernel_calls(&j);
        let want: serde_json::Map<String, serde_json::Value> = want
            .iter()
            .map(|(k, n)| (k.clone(), (n.as_u64().unwrap() * iterations).into()))
            .collect();
        assert_eq!(got, want, "{exec}: kernel calls");
        let mut share = 0.0;
        for r in p["kernels"].as_array().unwrap() {
            assert!(r["total_us"].as_f64().unwrap() >= 0.0);
            share += r["share"].as_f64().unwrap();
        }
        assert!(
            (share - 1.0).abs() < 1e-2,
            "{exec}: shares add up to {share}"
        );
        // Each op is launched once per execution, and its launch ran on the device.
        let device: Vec<(String, String, u64)> = p["device_ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["op"].as_str().unwrap().to_string(),
                    r["op_type"].as_str().unwrap().to_string(),
                    r["count"].as_u64().unwrap(),
                )
            })
            .collect();
        for (op, op_type) in CNN_OPS {
            assert!(
                device.contains(&(op.into(), op_type.into(), iterations)),
                "{exec}: {op} in {device:?}"
            );
            let host = p["ops"].as_array().unwrap();
            let row = host.iter().find(|r| r["op"] == op).unwrap();
            assert_eq!(row["op_type"], op_type);
            assert_eq!(row["count"].as_u64().unwrap() % iterations, 0, "{row}");
        }
        assert_eq!(device.len(), CNN_OPS.len(), "{exec}: {device:?}");
    }
    // Concurrent streams: every stream's timed executions, none of their warmups.
    let want = main_kernels(&sc, "topo");
    let j = run_cnn(
        &sc,
        "topo",
        &["--profile", "--streams", "2", "--warmup", "1"],
    );
    for r in j["profile"]["kernels"].as_array().unwrap() {
        let n = want[r["kernel"].as_str().unwrap()].as_u64().unwrap();
        assert_eq!(r["count"].as_u64().unwrap(), 2 * n, "{r}");
    }
}

#[test]
fn the_profile_table_has_a_row_per_kernel_type_and_op() {
    let sc = Scratch::new();
    let r = rt2_cnn(&sc, &["--iterations", "2", "--profile"])
        .ok()
        .stdout_has(&[
            "profile over 2 timed execution(s)",
            "host time per kernel type",
            "host time per op",
            "device time per op",
            "share",
        ]);
    let out = r.stdout();
    let hist = main_kernels(&sc, "topo");
    for (kernel, n) in &hist {
        let count = (n.as_u64().unwrap() * 2).to_string();
        assert!(
            out.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.get(1) == Some(&kernel.as_str()) && w.get(2) == Some(&count.as_str())
            }),
            "no row `{kernel} {count}` in\n{out}"
        );
    }
    for (op, op_type) in CNN_OPS {
        assert!(
            out.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.get(1) == Some(&op) && w.get(2) == Some(&op_type) && w.get(3) == Some(&"2")
            }),
            "no device row `{op} {op_type} 2` in\n{out}"
        );
    }
}

/// Microseconds of a trace event field as whole nanoseconds.
fn ns(v: &serde_json::Value) -> i64 {
    (v.as_f64().unwrap() * 1000.0).round() as i64
}

#[test]
fn the_trace_is_a_chrome_trace_with_host_threads_and_device_streams() {
    let sc = Scratch::new();
    for exec in ["topo", "topo-mt"] {
        let file = format!("{exec}.json");
        let j = run_cnn(
            &sc,
            exec,
            &["--trace", &file, "--iterations", "2", "--warmup", "1"],
        );
        assert!(j.get("profile").is_none());
        let doc: serde_json::Value = serde_json::from_slice(&sc.read(&file)).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        // Every event has the fields a viewer needs.
        for e in events {
            for k in ["ph", "name", "pid", "tid"] {
                assert!(e.get(k).is_some(), "{k} missing in {e}");
            }
            match e["ph"].as_str().unwrap() {
                "X" => assert!(e["ts"].is_number() && e["dur"].as_f64().unwrap() >= 0.0),
                "M" => assert!(e["args"]["name"].is_string()),
                ph => panic!("unexpected phase {ph}"),
            }
        }
        let names = |pid: u64| -> Vec<(u64, String)> {
            events
                .iter()
                .filter(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid)
                .map(|e| {
                    (
                        e["tid"].as_u64().unwrap(),
                        e["args"]["name"].as_str().unwrap().into(),
                    )
                })
                .collect()
        };
        let (host, device) = (names(1), names(2));
        assert_eq!(device.len(), 1, "{exec}: one stream: {device:?}");
        assert!(device[0].1.starts_with("stream s"));
        if exec == "topo-mt" {
            // The calling thread and the workers: a node for a parked worker runs on the
            // participant that made it ready, so which workers show depends on timing.
            for (_, n) in &host {
                assert!(
                    ["rt2", "rt2-mt-memory", "rt2-mt-launch"].contains(&n.as_str()),
                    "{exec}: {host:?}"
                );
            }
            assert!(host.iter().any(|(_, n)| n == "rt2"), "{exec}: {host:?}");
        } else {
            assert_eq!(host.len(), 1, "{exec}: {host:?}");
        }
        // Each track's spans follow one another (or nest), in time order.
        let mut tracks: std::collections::BTreeMap<(u64, u64), Vec<(i64, i64)>> =
            Default::default();
        for e in events.iter().filter(|e| e["ph"] == "X") {
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            let named = match key.0 {
                1 => &host,
                _ => &device,
            };
            assert!(
                named.iter().any(|(t, _)| *t == key.1),
                "unnamed track {key:?}"
            );
            let start = ns(&e["ts"]);
            tracks
                .entry(key)
                .or_default()
                .push((start, start + ns(&e["dur"])));
        }
        for (key, spans) in &tracks {
            let mut open: Vec<i64> = Vec::new();
            for w in spans.windows(2) {
                assert!(w[0].0 <= w[1].0, "{exec} {key:?}: not in time order");
            }
            for &(a, b) in spans {
                while open.last().is_some_and(|&end| end <= a) {
                    open.pop();
                }
                if let Some(&end) = open.last() {
                    assert!(
                        b <= end,
                        "{exec} {key:?}: [{a}, {b}] overlaps a span ending at {end}"
                    );
                }
                open.push(b);
            }
        }
        // Host: every launch node with its op; device: two launches of every op.
        let x: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        for (op, op_type) in CNN_OPS {
            let host_launches: Vec<_> = x
                .iter()
                .filter(|e| {
                    e["pid"] == 1 && e["cat"] == "LaunchKernelWithHandle" && e["args"]["op"] == op
                })
                .collect();
            assert_eq!(host_launches.len(), 2, "{exec}: {op}");
            assert_eq!(host_launches[0]["args"]["op_type"], op_type);
            assert!(
                host_launches[0]["args"]["trace"][0]
                    .as_str()
                    .unwrap()
                    .starts_with("inputs: [2, "),
                "{}",
                host_launches[0]
            );
            let device_launches = x
                .iter()
                .filter(|e| e["pid"] == 2 && e["name"] == format!("launch {op}").as_str())
                .count();
            assert_eq!(device_launches, 2, "{exec}: {op}");
        }
        // The input's upload, once per execution.
        let copies = x
            .iter()
            .filter(|e| e["pid"] == 2 && e["cat"] == "host-to-device copy")
            .count();
        assert_eq!(copies, 2, "{exec}");
    }
}

#[test]
fn a_trace_that_cannot_be_written_is_an_error_and_leaves_nothing() {
    let sc = Scratch::new();
    sc.rt2(&[
        "run",
        &model("cnn_bn"),
        "--shape",
        "x=1,3,8,8",
        "--trace",
        "no/such/dir/t.json",
    ])
    .fails(2, &["no/such/dir/t.json"]);
    assert!(!sc.exists("no"));
}

#[test]
fn dumped_tensors_are_each_ops_outputs() {
    use rt2::om::onnx::builder::{Dim, F32, OnnxBuilder, tensor_f32};
    let sc = Scratch::new();
    let bias = [0.5f32, -1.0, 2.0, 0.0];
    let onnx = OnnxBuilder::new("small")
        .input("x", F32, &[Dim::Value(1), Dim::Value(4)])
        .initializer(tensor_f32("bias", &[4], &bias))
        .initializer(tensor_f32("scale", &[4], &[2.0; 4]))
        .named_node("add/0", "Add", &["x", "bias"], &["a"], vec![])
        .named_node("scale", "Mul", &["a", "scale"], &["m"], vec![])
        .named_node("relu", "Relu", &["m"], &["y"], vec![])
        .output("y", F32, &[Dim::Value(1), Dim::Value(4)])
        .build();
    sc.write("small.onnx", &onnx);
    let x = [1.0f32, 2.0, -3.0, 4.0];
    let input = HostTensor {
        dtype: DType::F32,
        shape: vec![1, 4],
        data: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    sc.write("x.npy", &npy::write(&input).unwrap());
    for exec in ["seq", "topo-mt"] {
        let (dump, out) = (format!("dump_{exec}"), format!("out_{exec}"));
        sc.rt2(&[
            "run",
            "small.onnx",
            "--input",
            "x=x.npy",
            "--executor",
            exec,
            "--dump-tensors",
            &dump,
            "--output-dir",
            &out,
            "--iterations",
            "2",
        ])
        .ok();
        let index: serde_json::Value =
            serde_json::from_slice(&sc.read(&format!("{dump}/index.json"))).unwrap();
        let listed: Vec<(&str, &str, u64, &str)> = index["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert_eq!(t["dtype"], "float32");
                assert_eq!(t["shape"], serde_json::json!([1, 4]));
                (
                    t["op"].as_str().unwrap(),
                    t["op_type"].as_str().unwrap(),
                    t["output"].as_u64().unwrap(),
                    t["file"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("add/0", "Add", 0, "add_0.0.npy"),
                ("scale", "Mul", 0, "scale.0.npy"),
                ("relu", "Relu", 0, "relu.0.npy")
            ],
            "{exec}"
        );
        let dumped = |f: &str| f32s(&read_npy(&sc.path(&format!("{dump}/{f}"))));
        let added: Vec<f32> = x.iter().zip(bias).map(|(a, b)| a + b).collect();
        assert_eq!(dumped("add_0.0.npy"), added, "{exec}");
        let scaled: Vec<f32> = added.iter().map(|a| a * 2.0).collect();
        assert_eq!(dumped("scale.0.npy"), scaled, "{exec}");
        assert_eq!(dumped("relu.0.npy"), [3.0, 2.0, 0.0, 8.0], "{exec}");
        // The last op's dump is the model's output.
        assert_eq!(
            dumped("relu.0.npy"),
            f32s(&read_npy(&sc.path(&format!("{out}/y.npy")))),
            "{exec}"
        );
    }
}

#[test]
fn graph_mode_replays_to_the_plain_runs_outputs_under_every_executor() {
    let sc = Scratch::new();
    run_lstm(&sc, &model("lstm"), "plain", &[]);
    for exec in ["seq", "topo", "topo-prio", "topo-mt"] {
        let dir = format!("graph-{exec}");
        let j = run_lstm(
            &sc,
            &model("lstm"),
            &dir,
            &[
                "--graph",
                "--executor",
                exec,
                "--iterations",
                "3",
                "--warmup",
                "1",
            ],
        );
        assert_eq!(j["check"]["ok"], true, "{exec}: {j:#}");
        same_outputs(&sc, "plain", &dir);
    }
    // The other checked fixtures pass their checks in graph mode.
    for name in ["cnn_bn", "lstm"] {
        let j = checked(&sc, name, &["--graph", "--iterations", "2"]);
        assert_eq!(j["check"]["ok"], true, "{name}: {j:#}");
    }
    // A loop whose condition the host reads from device memory cannot be captured.
    sc.rt2(&[
        "run",
        &model("loop_counter"),
        "--graph",
        "--check",
        s(&data_set("loop_counter")),
    ])
    .fails(2, &["--graph", "CopyD2H", "capturing stream"]);
    sc.rt2(&["run", &model("lstm"), "--graph", "--streams", "2"])
        .fails(2, &["--graph", "--streams"]);
}

#[test]
fn sanitize_checks_a_bundled_model_and_finds_nothing() {
    let sc = Scratch::new();
    for executor in ["seq", "topo-mt"] {
        let j = checked(&sc, "cnn_bn", &["--sanitize", "--executor", executor]);
        let san = &j["sanitizer"];
        assert_eq!(san["findings"], serde_json::json!([]), "{executor}: {san}");
        // Every launch of the one execution: one per op.
        assert_eq!(
            san["launches_checked"].as_u64().unwrap(),
            CNN_OPS.len() as u64,
            "{executor}: {san}"
        );
        assert!(
            san["accesses_checked"].as_u64().unwrap() > 10,
            "{executor}: {san}"
        );
    }
    // Asked for one check, it runs that one.
    let j = checked(&sc, "lstm", &["--sanitize=race"]);
    assert_eq!(j["sanitizer"]["checks"], serde_json::json!(["race"]));
    assert_eq!(
        j["sanitizer"]["launches_checked"], 0,
        "only initcheck runs launches twice"
    );
    sc.rt2(&["run", &model("lstm"), "--sanitize=bogus"])
        .fails(2, &["unknown check \"bogus\""]);
}
