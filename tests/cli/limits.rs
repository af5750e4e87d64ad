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
        data: vec![1],
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
