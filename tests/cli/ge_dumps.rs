//! CLI tests: GE dumps as users hold them (`ge_proto_*_graph_*_<stage>.txt`), built in GE
//! text form with `om::testdata_text`'s builder: a partitioned subgraph (PlaceHolder ->
//! Relu -> End) run under every executor on each engine, a dump written without weights,
//! which `rt2 run` refuses naming each weight unless `--weights` fills them, and ops that
//! exist only as compiled kernels, which `rt2 lower` lowers and lists and `rt2 run`
//! refuses, naming each.

use rt2::cmd::npy;
use rt2::om::testdata_text::{DumpOp, dump_model, f32_desc};
use rt2::om::text::print_text;
use rt2::ops::{DType, HostTensor};
use rt2::proto::ge_ir::ModelDef;

use crate::run::f32s;
use crate::util::Scratch;

const EXECUTORS: [&str; 4] = ["seq", "topo", "topo-prio", "topo-mt"];

fn tensor(shape: &[i64], values: &[f32]) -> HostTensor {
    HostTensor {
        dtype: DType::F32,
        shape: shape.to_vec(),
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

fn output(sc: &Scratch, file: &str) -> Vec<f32> {
    f32s(&npy::read(&sc.read(file), None).unwrap())
}

/// Writes `md` as the GE text dump `name`.
fn dump(sc: &Scratch, name: &str, md: &ModelDef) -> String {
    sc.write(name, print_text(md).as_bytes());
    name.to_string()
}

/// A partitioned subgraph as GE's engine partitioner leaves it: PlaceHolder -> Relu ->
/// End, the Relu placed on `lib` (`_ge_attr_op_kernel_lib_name`).
pub fn partitioned_relu(lib: &str) -> ModelDef {
    dump_model(
        "partition0_rank1_new_sub_graph1",
        vec![
            DumpOp::new("PlaceHolder0", "PlaceHolder")
                .attr_i("peerIndex", 0)
                .attr_i("anchorIndex", 0)
                .attr_s("parentOpType", "Data")
                .out_desc(f32_desc(&[2, 3])),
            DumpOp::new("relu", "Relu")
                .attr_s("_ge_attr_op_kernel_lib_name", lib)
                .input("PlaceHolder0:0")
                .in_desc(f32_desc(&[2, 3]))
                .out_desc(f32_desc(&[2, 3])),
            DumpOp::new("End0", "End")
                .attr_i("peerIndex", 1)
                .attr_s("parentOpType", "NetOutput")
                .input("relu:0")
                .in_desc(f32_desc(&[2, 3])),
        ],
    )
}

#[test]
fn a_partitioned_subgraph_runs_under_every_executor() {
    let sc = Scratch::new();
    let x = [-1.0, 2.0, -3.0, 4.0, -0.5, 0.25];
    sc.write("x.npy", &npy::write(&tensor(&[2, 3], &x)).unwrap());
    // No engine (an AI Core launch), AI Core, and AI CPU (an `AicpuLaunchCCKernel`, run
    // as the AI Core launch is): the same outputs under every executor.
    for lib in ["", "AIcoreEngine", "aicpu_ascend_kernel"] {
        let mut md = partitioned_relu(lib);
        if lib.is_empty() {
            md.graph[0].op[1].attr.remove("_ge_attr_op_kernel_lib_name");
        }
        let file = dump(&sc, "ge_proto_00000001_graph_1_PreRunAfterBuild.txt", &md);
        let launch = if lib == "aicpu_ascend_kernel" {
            "AicpuLaunchCCKernel"
        } else {
            "LaunchKernelWithHandle"
        };
        sc.rt2(&["lower", &file, "-o", "relu.exeg"])
            .ok()
            .stdout_has(&[launch]);
        for ex in EXECUTORS {
            let dir = format!("out_{ex}");
            sc.rt2(&[
                "run",
                &file,
                "--executor",
                ex,
                "--input",
                "PlaceHolder0=x.npy",
                "--output-dir",
                &dir,
            ])
            .ok();
            let want: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
            assert_eq!(output(&sc, &format!("{dir}/End0.npy")), want, "{lib} {ex}");
        }
    }
}

fn named(
    mut d: rt2::proto::ge_ir::TensorDescriptor,
    name: &str,
) -> rt2::proto::ge_ir::TensorDescriptor {
    d.name = name.into();
    d
}

/// Two Consts written without their values, handed out as the outputs.
fn weightless() -> ModelDef {
    dump_model(
        "weightless",
        vec![
            DumpOp::new("dynamic_const_320", "Const")
                .value(f32_desc(&[4]), Vec::new())
                .out_desc(f32_desc(&[4])),
            DumpOp::new("bias", "Const").out_desc(f32_desc(&[4])),
            DumpOp::new("out", "NetOutput")
                .input("dynamic_const_320:0")
                .input("bias:0")
                .in_desc(named(f32_desc(&[4]), "w"))
                .in_desc(named(f32_desc(&[4]), "b")),
        ],
    )
}

#[test]
fn weights_missing_from_a_dump_are_named_or_filled() {
    let sc = Scratch::new();
    let file = dump(
        &sc,
        "ge_proto_00000002_graph_1_OptimizeOriginalGraph.txt",
        &weightless(),
    );
    sc.rt2(&["inspect", &file]).ok();
    sc.rt2(&["lower", &file, "-o", "w.exeg"]).ok();
    for f in [file.as_str(), "w.exeg"] {
        sc.rt2(&["run", f]).fails(
            2,
            &[
                f,
                "without the values of 2 weight(s): \"dynamic_const_320\", \"bias\"",
                "--weights zeros|random",
            ],
        );
    }
    sc.rt2(&["run", &file, "--weights", "zeros", "--output-dir", "zeros"])
        .ok()
        .stdout_has(&["zeros"]);
    assert_eq!(output(&sc, "zeros/w.npy"), [0.0; 4]);
    // Random weights: seeded, one stream per weight.
    let run = |seed: &str, dir: &str| {
        sc.rt2(&[
            "run",
            &file,
            "--weights",
            "random",
            "--seed",
            seed,
            "--output-dir",
            dir,
        ])
        .ok();
        (
            output(&sc, &format!("{dir}/w.npy")),
            output(&sc, &format!("{dir}/b.npy")),
        )
    };
    let (a, b) = run("1", "r1");
    assert_ne!(a, b, "each weight its own stream");
    assert_eq!(run("1", "r1_again"), (a.clone(), b));
    assert_ne!(run("2", "r2").0, a, "the seed matters");
    // A weight given with --input; the other filled.
    sc.write(
        "w.npy",
        &npy::write(&tensor(&[4], &[1.0, 2.0, 3.0, 4.0])).unwrap(),
    );
    sc.rt2(&[
        "run",
        &file,
        "--input",
        "bias=w.npy",
        "--weights",
        "zeros",
        "--output-dir",
        "given",
    ])
    .ok();
    assert_eq!(output(&sc, "given/b.npy"), [1.0, 2.0, 3.0, 4.0]);
}

/// `y = x + w`, `w` a Const written without its value: a weight the caller supplies.
fn add_weightless() -> ModelDef {
    dump_model(
        "add_weightless",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[4])),
            DumpOp::new("w", "Const")
                .value(f32_desc(&[4]), Vec::new())
                .out_desc(f32_desc(&[4])),
            DumpOp::new("add", "Add")
                .input("x:0")
                .input("w:0")
                .in_desc(f32_desc(&[4]))
                .in_desc(f32_desc(&[4]))
                .out_desc(f32_desc(&[4])),
            DumpOp::new("out", "NetOutput")
                .input("add:0")
                .in_desc(named(f32_desc(&[4]), "y")),
        ],
    )
}

/// `rt2 run --check`: the data set's `input_K.pb` are the model's inputs only; the
/// weights are filled as `--weights` says, reported apart, never counted as inputs.
#[test]
fn check_feeds_the_data_set_to_the_inputs_and_fills_the_weights() {
    let sc = Scratch::new();
    let file = dump(
        &sc,
        "ge_proto_00000003_graph_1_Build.txt",
        &add_weightless(),
    );
    let x = [1.0, -2.0, 0.5, 4.0];
    // Files named as the ONNX data sets name them; rt2 recognises .npy by content.
    let t = npy::write(&tensor(&[4], &x)).unwrap();
    std::fs::create_dir(sc.path("ds")).unwrap();
    sc.write("ds/input_0.pb", &t);
    sc.write("ds/output_0.pb", &t);
    sc.rt2(&["run", &file, "--check", "ds"]).fails(
        2,
        &[
            "without the values of 1 weight(s): \"w\"",
            "--weights zeros|random",
        ],
    );
    let j = sc
        .rt2(&[
            "run",
            &file,
            "--check",
            "ds",
            "--weights",
            "zeros",
            "--format",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(j["check"]["ok"], true, "{j}");
    let fed = |key: &str| -> Vec<(&str, &str)> {
        j[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i["name"].as_str().unwrap(), i["source"].as_str().unwrap()))
            .collect()
    };
    assert_eq!(fed("inputs"), [("x", "ds/input_0.pb")]);
    assert_eq!(fed("weights"), [("w", "zeros")]);
    sc.rt2(&["run", &file, "--check", "ds", "--weights", "zeros"])
        .ok()
        .stdout_has(&["weight", "zeros", "ok"]);
    // Random weights change the sum: the check finds it (exit 1).
    sc.rt2(&["run", &file, "--check", "ds", "--weights", "random"])
        .fails(1, &["--check"]);
    // A data set with a file per input and weight has one file too many.
    sc.write("ds/input_1.pb", &t);
    sc.rt2(&["run", &file, "--check", "ds", "--weights", "zeros"])
        .fails(
            2,
            &["2 input_K.pb file(s), the model has 1 input(s): \"x\""],
        );
}

/// `x` -> two FakeOpNpu (an op that exists only as a compiled kernel, output shapes
/// declared as GE's built graphs do) and a FractionalMaxPool on AI CPU -> NetOutput.
fn fake_ops() -> ModelDef {
    let fake = |name: &str, src: &str| {
        DumpOp::new(name, "FakeOpNpu")
            .attr_s("_ge_attr_op_kernel_lib_name", "AIcoreEngine")
            .input(src)
            .in_desc(f32_desc(&[4]))
            .out_desc(f32_desc(&[4]))
    };
    dump_model(
        "fake",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[4])),
            fake("fake1", "x:0"),
            fake("fake2", "fake1:0"),
            DumpOp::new("pad", "FractionalMaxPool")
                .attr_s("_ge_attr_op_kernel_lib_name", "aicpu_ascend_kernel")
                .input("fake2:0")
                .in_desc(f32_desc(&[4]))
                .out_desc(f32_desc(&[6])),
            DumpOp::new("out", "NetOutput")
                .input("pad:0")
                .in_desc(f32_desc(&[6])),
        ],
    )
}

#[test]
fn compiled_kernels_lower_and_are_listed_but_do_not_run() {
    let sc = Scratch::new();
    let file = dump(
        &sc,
        "ge_proto_00000003_graph_1_PreRunAfterBuild.txt",
        &fake_ops(),
    );
    let lowered = sc.rt2(&["lower", &file, "-o", "fake.exeg"]).ok();
    assert!(
        lowered.stdout().ends_with(
            "3 op(s) lowered as compiled kernels rt2 cannot compute (rt2 run refuses them):\n  \
             FakeOpNpu (2): fake1, fake2\n  FractionalMaxPool (1): pad\n"
        ),
        "{}",
        lowered.stdout()
    );
    lowered.stdout_has(&["AicpuLaunchCCKernel", "LaunchKernelWithHandle"]);
    let j = sc
        .rt2(&["lower", &file, "-o", "fake.exeg", "--format", "json"])
        .ok()
        .json();
    assert_eq!(
        j["no_compute"],
        serde_json::json!({"FakeOpNpu": ["fake1", "fake2"], "FractionalMaxPool": ["pad"]})
    );
    let refusal = "3 op(s) rt2 cannot compute (compiled kernels only): fake/fake1 (FakeOpNpu), \
                   fake/fake2 (FakeOpNpu), fake/pad (FractionalMaxPool)";
    for f in [file.as_str(), "fake.exeg"] {
        let run = sc.rt2(&["run", f]).fails(1, &[f, refusal]);
        assert_eq!(run.stderr().lines().count(), 1, "{}", run.stderr());
    }
}
