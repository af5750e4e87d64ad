//! A small ExecuteGraph that uses every field of the model, for tests and benchmarks:
//! attributes of every kind, origins, priorities, an If with two subgraphs, Free-Launch
//! relations, resources and model inputs and outputs. It is valid: `check` finds nothing.

use crate::exec::{
    ExecTensor, ExecuteGraph, KernelAttr, KernelClass, KernelGraph, KernelNode, KernelNodeId,
    ModelIo, Origin, Resources, ValueRef,
};
use crate::ops::DType;
use smallvec::smallvec;
use std::sync::Arc;

fn node(name: &str, kernel: &str, class: KernelClass) -> KernelNode {
    let mut n = crate::exec::kernel_types::exec_node(name, kernel);
    n.class = class;
    n
}

fn vr(node: u32, output: u32) -> ValueRef {
    ValueRef {
        node: KernelNodeId(node),
        output,
    }
}

fn with_index(mut n: KernelNode, index: i64) -> KernelNode {
    n.attrs.insert("index".into(), KernelAttr::Int(index));
    n
}

/// A small valid ExecuteGraph using every field of the model: attributes of every
/// kind, origins, priorities, an If with two subgraphs, free/launch relations,
/// resources and model IO.
pub fn sample() -> ExecuteGraph {
    use KernelClass::{Launch, Memory, Normal};
    let mut init = KernelGraph::new("init");
    let mut streams = node("streams", "SplitRtStreams", Memory);
    streams.outputs = 1;
    streams.attrs.insert("count".into(), KernelAttr::Int(1));
    init.add(streams);
    let mut c = node("w", "Const", Normal);
    c.outputs = 1;
    c.attrs.insert(
        "value".into(),
        KernelAttr::Tensor(Arc::new(ExecTensor {
            dtype: DType::F32,
            shape: vec![2],
            data: vec![0, 0, 128, 63, 0, 0, 0, 64].into(),
        })),
    );
    init.add(c);
    let mut up = node("w_dev", "CopyH2D", Memory);
    up.inputs = smallvec![vr(1, 0)];
    up.outputs = 1;
    up.control_inputs = vec![KernelNodeId(0)].into();
    init.add(up);
    let mut out = node("exports", "InnerNetOutput", Normal);
    out.inputs = smallvec![vr(0, 0), vr(2, 0)];
    init.add(out);

    let mut main = KernelGraph::new("main");
    let mut x = with_index(node("x", "Data", Normal), 0);
    x.outputs = 1;
    main.add(x);
    let mut w = with_index(node("w_dev", "InnerData", Normal), 1);
    w.outputs = 1;
    main.add(w);
    let mut alloc = node("conv1_out", "AllocMemHbm", Memory);
    alloc.outputs = 1;
    alloc.priority = -3;
    alloc.origin = Some(Arc::new(Origin {
        graph: "g".into(),
        node: "conv1".into(),
        op_type: "Conv".into(),
        index: 4,
    }));
    main.add(alloc);
    let mut launch = node("conv1_launch", "LaunchKernelWithHandle", Launch);
    launch.inputs = smallvec![vr(0, 0), vr(1, 0), vr(2, 0), vr(4, 0)];
    launch.priority = 7;
    launch.origin = Some(Arc::new(Origin::default()));
    let attrs = [
        ("a_int", KernelAttr::Int(-5)),
        ("b_ints", KernelAttr::Ints(vec![1, -2, i64::MAX])),
        ("c_float", KernelAttr::Float(0.25)),
        ("d_floats", KernelAttr::Floats(vec![1.5, -0.0, 1e300])),
        ("e_bool", KernelAttr::Bool(true)),
        ("f_str", KernelAttr::Str("quo\"te\\ new\nline é".into())),
        ("g_strs", KernelAttr::Strs(vec!["a".into(), String::new()])),
        ("h_bytes", KernelAttr::Bytes(vec![0, 255, b'"'])),
        ("i_dtype", KernelAttr::DType(DType::Bf16)),
        (
            "j_tensor",
            KernelAttr::Tensor(Arc::new(ExecTensor {
                dtype: DType::I64,
                shape: vec![1, 1],
                data: 9i64.to_le_bytes().to_vec().into(),
            })),
        ),
        ("k_zero", KernelAttr::Int(0)),
        (
            "l_dtypes",
            KernelAttr::DTypes(vec![Some(DType::F32), None, Some(DType::I64)]),
        ),
    ];
    for (k, v) in attrs {
        launch.attrs.insert(k.into(), v);
    }
    main.add(launch);
    let mut ws = node("ws", "AllocMemHbm", Memory);
    ws.outputs = 1;
    main.add(ws);
    let mut free = node("ws_free", "FreeMemoryHoldAddr", Memory);
    free.inputs = smallvec![vr(4, 0)];
    free.control_inputs = vec![KernelNodeId(3)].into();
    main.add(free);
    let mut iff = node("if", "If", Normal);
    iff.inputs = smallvec![vr(0, 0), vr(2, 0)];
    iff.outputs = 2;
    iff.control_inputs = vec![KernelNodeId(3)].into();
    for (name, index) in [("then", 1), ("else", 0)] {
        let mut g = KernelGraph::new(name);
        let mut d = with_index(node("in", "InnerData", Normal), index);
        d.outputs = 1;
        g.add(d);
        let mut o = node("out", "InnerNetOutput", Normal);
        o.inputs = smallvec![vr(0, 0), vr(0, 0)];
        g.add(o);
        iff.subgraphs.push(g);
    }
    main.add(iff);
    let mut net = node("out", "NetOutput", Normal);
    net.inputs = smallvec![vr(6, 0), vr(6, 1)];
    main.add(net);
    main.free_launch = vec![(KernelNodeId(5), KernelNodeId(3))];

    let mut deinit = KernelGraph::new("deinit");
    let mut s = with_index(node("streams", "InnerData", Normal), 0);
    s.outputs = 1;
    deinit.add(s);
    let mut d = node("destroy", "DestroyStreams", Memory);
    d.inputs = smallvec![vr(0, 0)];
    deinit.add(d);

    ExecuteGraph {
        name: "sample".into(),
        init,
        main,
        deinit,
        resources: Resources {
            streams: 1,
            events: 2,
            notifies: 3,
        },
        inputs: vec![ModelIo {
            name: "x".into(),
            dtype: Some(DType::F32),
            shape: vec![1, -1],
            weight: false,
        }],
        outputs: vec![ModelIo {
            name: "y".into(),
            dtype: None,
            shape: vec![-2],
            weight: false,
        }],
        multi_thread: true,
    }
}
