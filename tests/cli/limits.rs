//! CLI tests: work that would run forever or exhaust memory stops with a one-line error.
//! Loops that never end meet `--max-iterations`; tensors that outgrow the device meet its
//! capacity (`--device-memory`) as device out-of-memory; inputs too large for the device
//! or the host are refused before anything is generated; models nested past the
//! decoder's limit are refused, those within it read; files without a size are read up
//! to a bound; output files that are devices, FIFOs or symbolic links are written
//! through, not replaced.

use rt2::om::onnx::builder::{
    BOOL, Dim, F32, I64, OnnxBuilder, attr_g, attr_i, tensor_bool, tensor_f32, tensor_i64,
};

use crate::util::Scratch;

fn v(d: i64) -> Dim {
    Dim::Value(d)
}

/// A Loop over a carried `[2]` float32 that adds 1 each iteration. `trip`: the trip count
/// (a constant), or none; the condition starts true and the body passes it on, so only
/// the trip count can end the loop.
fn counting_loop(trip: Option<i64>) -> Vec<u8> {
    let body = OnnxBuilder::new("body")
        .input("iter", I64, &[])
        .input("cond_in", BOOL, &[])
        .input("v_in", F32, &[v(2)])
        .initializer(tensor_f32("one", &[2], &[1.0, 1.0]))
        .node("Identity", &["cond_in"], &["cond_out"], vec![])
        .node("Add", &["v_in", "one"], &["v_out"], vec![])
        .output("cond_out", BOOL, &[])
        .output("v_out", F32, &[v(2)])
        .graph();
    let mut b = OnnxBuilder::new("forever")
        .input("x", F32, &[v(2)])
        .initializer(tensor_bool("cond", &[], &[true]));
    if let Some(t) = trip {
        b = b.initializer(tensor_i64("trip", &[], &[t]));
    }
    b.named_node(
        "spin",
        "Loop",
        &[if trip.is_some() { "trip" } else { "" }, "cond", "x"],
        &["y"],
        vec![attr_g("body", body)],
    )
    .output("y", F32, &[v(2)])
    .build()
}

/// A Loop of `trip` iterations that doubles a carried float32 tensor (Concat with
/// itself) each time.
fn doubling_loop(trip: i64) -> Vec<u8> {
    let body = OnnxBuilder::new("body")
        .input("iter", I64, &[])
        .input("cond_in", BOOL, &[])
        .input("v_in", F32, &[Dim::param("n")])
        .node("Identity", &["cond_in"], &["cond_out"], vec![])
        .node(
            "Concat",
            &["v_in", "v_in"],
            &["v_out"],
            vec![attr_i("axis", 0)],
        )
        .output("cond_out", BOOL, &[])
        .output("v_out", F32, &[Dim::param("m")])
        .graph();
    OnnxBuilder::new("doubling")
        .input("x", F32, &[v(1024)])
        .initializer(tensor_bool("cond", &[], &[true]))
        .initializer(tensor_i64("trip", &[], &[trip]))
        .named_node(
            "grow",
            "Loop",
            &["trip", "cond", "x"],
            &["y"],
            vec![attr_g("body", body)],
        )
        .output("y", F32, &[Dim::param("m")])
        .build()
}

#[test]
fn a_loop_with_a_trip_count_of_1e12_stops_at_the_iteration_limit() {
    let sc = Scratch::new();
    sc.write("loop.onnx", &counting_loop(Some(1_000_000_000_000)));
    sc.rt2(&["run", "loop.onnx", "--max-iterations", "1000"])
        .fails(1, &["loop.onnx", "spin", "the iteration limit is 1000"]);
    // Execution counts past any memory for their samples (or past u64 together): the
    // first execution fails as it should, nothing is set aside for 10^18 samples.
    sc.rt2(&[
        "run",
        "loop.onnx",
        "--max-iterations",
        "10",
        "--iterations",
        "1000000000000000000",
        "--warmup",
        "18446744073709551615",
    ])
    .fails(
        1,
        &["loop.onnx", "execution 1", "the iteration limit is 10"],
    );
    // Within the limit the loop runs to its end: 1000 trips of +1.
    sc.write("loop1000.onnx", &counting_loop(Some(1000)));
    sc.rt2(&[
        "run",
        "loop1000.onnx",
        "--max-iterations",
        "1000",
        "--output-dir",
        "out",
    ])
    .ok();
    let y = rt2::cmd::npy::read(&sc.read("out/y.npy"), None).unwrap();
    let x = rt2::cmd::random::tensor(rt2::ops::DType::F32, &[2], 0, 0).unwrap();
    let f = |b: &[u8]| -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let want: Vec<f32> = f(&x.data)
        .iter()
        .map(|&v| (0..1000).fold(v, |a, _| a + 1.0))
        .collect();
    assert_eq!(f(&y.data), want);
}

#[test]
fn a_loop_whose_condition_stays_true_stops_at_the_iteration_limit_under_every_executor() {
    let sc = Scratch::new();
    sc.write("loop.onnx", &counting_loop(None));
    for exec in ["seq", "topo", "topo-prio", "topo-mt"] {
        sc.rt2(&[
            "run",
            "loop.onnx",
            "--executor",
            exec,
            "--max-iterations",
            "500",
        ])
        .fails(1, &["spin", "ran its body 500 times", "--max-iterations"]);
    }
}

#[test]
fn a_loop_that_doubles_a_tensor_runs_out_of_device_memory_naming_the_op() {
    let sc = Scratch::new();
    sc.write("grow.onnx", &doubling_loop(100));
    sc.rt2(&["run", "grow.onnx", "--device-memory", "64M"])
        .fails(1, &["grow.onnx", "out of device memory", "of 67108864"]);
}

#[test]
fn an_input_larger_than_the_device_or_the_host_is_refused_before_it_is_made() {
    let sc = Scratch::new();
    let model = OnnxBuilder::new("relu")
        .input("x", F32, &[Dim::param("n"), v(4)])
        .node("Relu", &["x"], &["y"], vec![])
        .output("y", F32, &[Dim::param("n"), v(4)])
        .build();
    sc.write("relu.onnx", &model);
    // 2^40 x 4 float32s: 16 TiB, past the device's memory.
    sc.rt2(&["run", "relu.onnx", "--shape", "x=1099511627776,4"])
        .fails(
            2,
            &[
                "relu.onnx",
                "input \"x\"",
                "17592186044416 bytes",
                "device's memory",
            ],
        );
    // A capacity past the host's memory: refused, as the device's memory is the host's
    // (pages it does not have would bring the OOM killer, not an error).
    sc.rt2(&["run", "relu.onnx", "--device-memory", "1000000T"])
        .fails(2, &["--device-memory 1099511627776000000", "host's memory"]);
    // A byte count past 64 bits.
    sc.rt2(&["run", "relu.onnx", "--shape", "x=4611686018427387904,4"])
        .fails(2, &["relu.onnx", "input \"x\"", "overflows"]);
    sc.rt2(&["run", "relu.onnx", "--device-memory", "0"])
        .fails(2, &["--device-memory", "needs some memory"]);
    sc.rt2(&["run", "relu.onnx", "--device-memory", "12Q"])
        .fails(2, &["--device-memory", "K, M, G or T"]);
    sc.rt2(&["run", "relu.onnx", "--max-iterations", "0"])
        .fails(2, &["--max-iterations"]);
    // What fits runs.
    sc.rt2(&[
        "run",
        "relu.onnx",
        "--shape",
        "x=3,4",
        "--device-memory",
        "64M",
    ])
    .ok();
}

/// A model whose graph nests `depth` `If`s, each in the `then_branch` of the one above;
/// the innermost runs `Relu`, every `else_branch` `Neg`.
fn if_nest(depth: usize) -> Vec<u8> {
    let branch = |name: &str, op: &str| {
        OnnxBuilder::new(name)
            .node(op, &["x"], &["y"], vec![])
            .output("y", F32, &[v(2)])
            .graph()
    };
    let mut g = branch("leaf", "Relu");
    for k in 0..depth {
        g = OnnxBuilder::new(&format!("then{k}"))
            .node(
                "If",
                &["c"],
                &["y"],
                vec![
                    attr_g("then_branch", g),
                    attr_g("else_branch", branch(&format!("else{k}"), "Neg")),
                ],
            )
            .output("y", F32, &[v(2)])
            .graph();
    }
    OnnxBuilder::new("nest")
        .input("x", F32, &[v(2)])
        .input("c", BOOL, &[])
        .node(
            "If",
            &["c"],
            &["y"],
            vec![
                attr_g("then_branch", g),
                attr_g("else_branch", branch("else", "Neg")),
            ],
        )
        .output("y", F32, &[v(2)])
        .build()
}

/// The bytes of an ONNX model whose graph nests `depth` `If` nodes, written level by
/// level without building the nested messages (encoding or dropping 100,000 levels of
/// them would itself recurse that deep). Each level's nested field comes last in its
/// message, so the file is every level's fields in order, then the innermost graph.
fn if_nest_bytes(depth: usize) -> Vec<u8> {
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    // AttributeProto: name "then_branch" (1), type GRAPH (20), g (6, last);
    // NodeProto: input "c" (1), output "y" (2), op_type "If" (4), attribute (5, last);
    // GraphProto: node (1).
    let attr_head = |out: &mut Vec<u8>, g: u64| {
        out.extend_from_slice(b"\x0a\x0bthen_branch\xa0\x01\x05\x32");
        varint(g, out);
    };
    let node_head = |out: &mut Vec<u8>, attr: u64| {
        out.extend_from_slice(b"\x0a\x01c\x12\x01y\x22\x02If\x2a");
        varint(attr, out);
    };
    let graph_head = |out: &mut Vec<u8>, node: u64| {
        out.push(0x0a);
        varint(node, out);
    };
    let len = |f: &dyn Fn(&mut Vec<u8>, u64), inner: u64| {
        let mut b = Vec::new();
        f(&mut b, inner);
        b.len() as u64 + inner
    };
    // Lengths from the innermost graph (empty) out: per level, the attribute's and the
    // node's.
    let mut graph_len = 0u64;
    let mut sizes = Vec::with_capacity(depth);
    for _ in 0..depth {
        let attr = len(&attr_head, graph_len);
        let node = len(&node_head, attr);
        sizes.push((graph_len, attr, node));
        graph_len = len(&graph_head, node);
    }
    let mut out = b"\x08\x08\x42\x02\x10\x11\x3a".to_vec(); // ir_version 8, opset 17, graph
    varint(graph_len, &mut out);
    for &(g, attr, node) in sizes.iter().rev() {
        graph_head(&mut out, node);
        node_head(&mut out, attr);
        attr_head(&mut out, g);
    }
    out
}

#[test]
fn a_50_deep_if_nest_lowers_and_runs_and_a_100000_deep_one_is_refused() {
    let sc = Scratch::new();
    sc.write("nest.onnx", &if_nest(50));
    sc.rt2(&["lower", "nest.onnx", "-o", "nest.exeg"]).ok();
    let truth = rt2::ops::HostTensor {
        dtype: rt2::ops::DType::Bool,
        shape: vec![],
        data: vec![1].into(),
    };
    sc.write("c.npy", &rt2::cmd::npy::write(&truth).unwrap());
    let x = rt2::ops::HostTensor {
        dtype: rt2::ops::DType::F32,
        shape: vec![2],
        data: [-1.5f32, 2.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    };
    sc.write("x.npy", &rt2::cmd::npy::write(&x).unwrap());
    for exec in ["seq", "topo-mt"] {
        let out = format!("out_{exec}");
        sc.rt2(&[
            "run",
            "nest.onnx",
            "--executor",
            exec,
            "--input",
            "x=x.npy",
            "--input",
            "c=c.npy",
            "--output-dir",
            &out,
        ])
        .ok();
        let y = rt2::cmd::npy::read(&sc.read(&format!("{out}/y.npy")), None).unwrap();
        // Every branch taken is a then_branch, down to the Relu.
        assert_eq!(
            y.data,
            [0.0f32, 2.5]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>()
        );
    }
    sc.write("deep.onnx", &if_nest_bytes(100_000));
    for cmd in [
        &["lower", "deep.onnx", "-o", "deep.exeg"][..],
        &["inspect", "deep.onnx"],
        &["run", "deep.onnx"],
    ] {
        sc.rt2(cmd)
            .fails(2, &["deep.onnx", "nesting deeper than 1000 levels"]);
    }
    assert!(!sc.exists("deep.exeg"));
    // Within the limit, the same bytes decode (and fail for what they lack: the input).
    sc.write("shallow.onnx", &if_nest_bytes(5));
    sc.rt2(&["inspect", "shallow.onnx"]).fails(
        2,
        &["node \"If_0\": input \"c\" names a value that does not exist"],
    );
}

// ---- output files

/// A small model for the output-file tests.
fn relu_model(sc: &Scratch) {
    let model = OnnxBuilder::new("relu")
        .input("x", F32, &[v(2), v(4)])
        .node("Relu", &["x"], &["y"], vec![])
        .output("y", F32, &[v(2), v(4)])
        .build();
    sc.write("relu.onnx", &model);
}

/// Names in the scratch directory that are temporary files rt2 left behind.
fn leftovers(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".rt2-"))
        .collect()
}

#[test]
fn an_output_through_a_symbolic_link_replaces_the_target_and_keeps_the_link() {
    let sc = Scratch::new();
    relu_model(&sc);
    sc.rt2(&["dump", "relu.onnx", "--format", "json", "-o", "want.json"])
        .ok();
    let want = sc.read("want.json");
    std::fs::create_dir(sc.path("sub")).unwrap();
    sc.write("sub/real.json", b"old contents");
    std::os::unix::fs::symlink("sub/real.json", sc.path("link.json")).unwrap();
    // A link to a link, and a link to a file that does not exist yet.
    std::os::unix::fs::symlink("link.json", sc.path("link2.json")).unwrap();
    std::os::unix::fs::symlink("sub/new.json", sc.path("dangling.json")).unwrap();
    for link in ["link2.json", "dangling.json"] {
        sc.rt2(&["dump", "relu.onnx", "--format", "json", "-o", link])
            .ok();
        let meta = std::fs::symlink_metadata(sc.path(link)).unwrap();
        assert!(meta.file_type().is_symlink(), "{link} is still a link");
    }
    assert_eq!(sc.read("sub/real.json"), want);
    assert_eq!(sc.read("sub/new.json"), want);
    assert!(
        std::fs::symlink_metadata(sc.path("link.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(leftovers(sc.dir.path()), Vec::<String>::new());
    assert_eq!(leftovers(&sc.path("sub")), Vec::<String>::new());
    // A failure leaves the target as it was.
    sc.rt2(&[
        "dump",
        "nothere.onnx",
        "--format",
        "json",
        "-o",
        "link.json",
    ])
    .fails(2, &["nothere.onnx"]);
    assert_eq!(sc.read("sub/real.json"), want);
}

#[test]
fn an_output_to_a_fifo_is_written_into_it_not_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let sc = Scratch::new();
    relu_model(&sc);
    sc.rt2(&["dump", "relu.onnx", "--format", "json", "-o", "want.json"])
        .ok();
    let want = sc.read("want.json");
    let fifo = sc.path("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).expect("reading the FIFO"))
    };
    sc.rt2(&["dump", "relu.onnx", "--format", "json", "-o", "pipe"])
        .ok();
    assert_eq!(reader.join().unwrap(), want);
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo(),
        "the FIFO is still a FIFO"
    );
    assert_eq!(leftovers(sc.dir.path()), Vec::<String>::new());
}

/// Whether this process may open `path` for writing (device files need it).
fn writable(path: &str) -> bool {
    std::fs::OpenOptions::new().write(true).open(path).is_ok()
}

#[test]
fn outputs_to_devices_are_written_in_place_and_dev_full_is_an_error() {
    use std::os::unix::fs::FileTypeExt;
    let sc = Scratch::new();
    relu_model(&sc);
    let is_char_device = |p: &str| {
        std::fs::symlink_metadata(p)
            .unwrap()
            .file_type()
            .is_char_device()
    };
    if writable("/dev/null") {
        sc.rt2(&["compile", "relu.onnx", "-o", "/dev/null"]).ok();
        sc.rt2(&["run", "relu.onnx", "--trace", "/dev/null"]).ok();
        assert!(is_char_device("/dev/null"), "/dev/null is still a device");
    }
    if writable("/dev/full") {
        sc.rt2(&["compile", "relu.onnx", "-o", "/dev/full"])
            .fails(2, &["/dev/full", "No space left on device"]);
        assert!(is_char_device("/dev/full"), "/dev/full is still a device");
    }
    // Standard output by its device name: the bytes reach this process's pipe.
    let out = sc
        .rt2(&["dump", "relu.onnx", "--format", "json", "-o", "/dev/stdout"])
        .ok();
    sc.rt2(&["dump", "relu.onnx", "--format", "json", "-o", "want.json"])
        .ok();
    assert_eq!(out.out.stdout, sc.read("want.json"));
}

// ---- input files

#[test]
fn a_file_without_a_size_is_read_up_to_a_bound() {
    let sc = Scratch::new();
    // /dev/zero never ends: refused once past the bound, not read until memory runs out.
    sc.rt2(&["inspect", "/dev/zero"])
        .fails(2, &["/dev/zero", "cannot read: more than 67108864 bytes"]);
    sc.rt2(&["inspect", "/dev/null"])
        .fails(2, &["/dev/null", "empty"]);
}

#[test]
fn npy_inputs_that_are_empty_or_not_numpy_are_one_line_errors() {
    let sc = Scratch::new();
    relu_model(&sc);
    sc.write("empty.npy", b"");
    sc.rt2(&["run", "relu.onnx", "--input", "x=empty.npy"])
        .fails(2, &["empty.npy", "empty", "not a .npy file"]);
    let mut h = b"\x93NUMPY\x01\x00\x36\x00".to_vec();
    h.extend_from_slice(format!("{:<53}\n", "{'descr': <f4, 'shape': (2, 4)}").as_bytes());
    h.extend_from_slice(&[0; 32]);
    sc.write("bad.npy", &h);
    sc.rt2(&["run", "relu.onnx", "--input", "x=bad.npy"])
        .fails(2, &["bad.npy", "is not a NumPy header", "at column 11"]);
}

#[test]
fn lowering_refuses_shapes_whose_sizes_overflow() {
    use rt2::om::onnx::builder::attr_ints;
    let sc = Scratch::new();
    let conv = OnnxBuilder::new("conv")
        .input("x", F32, &[v(1), v(1), v(8), v(8)])
        .initializer(tensor_f32("w", &[1, 1, 3, 3], &[0.5; 9]))
        .named_node(
            "dilated",
            "Conv",
            &["x", "w"],
            &["y"],
            vec![attr_ints("dilations", &[1 << 40, 1 << 40])],
        )
        .output("y", F32, &[Dim::param("h"), Dim::param("w")])
        .build();
    sc.write("conv.onnx", &conv);
    sc.rt2(&["lower", "conv.onnx", "-o", "conv.exeg"])
        .fails(2, &["conv.onnx", "dilated", "wider than the padded input"]);
    let huge = OnnxBuilder::new("huge")
        .input("x", F32, &[v(1 << 40), v(1 << 40)])
        .named_node("relu", "Relu", &["x"], &["y"], vec![])
        .output("y", F32, &[v(1 << 40), v(1 << 40)])
        .build();
    sc.write("huge.onnx", &huge);
    sc.rt2(&["lower", "huge.onnx", "-o", "huge.exeg"])
        .fails(2, &["huge.onnx", "relu", "more bytes than 64 bits count"]);
    assert!(!sc.exists("conv.exeg") && !sc.exists("huge.exeg"));
}

#[test]
fn a_ge_while_is_bounded_too_and_a_loop_of_exactly_the_limit_runs() {
    let sc = Scratch::new();
    // tests/lower/while.ge.txt counts to 3.
    let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lower/while.ge.txt");
    let model = model.to_str().unwrap();
    sc.rt2(&["run", model, "--max-iterations", "2"]).fails(
        1,
        &[
            "node \"loop\" (While)",
            "ran its body 2 times",
            "--max-iterations",
        ],
    );
    sc.rt2(&["run", model, "--max-iterations", "3"]).ok();
}
