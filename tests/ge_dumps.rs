//! Real GE dumps and their quirks, on graphs built here in GE text form (as
//! `DUMP_GE_GRAPH` writes them, through `om::testdata_text`'s builder): descriptors of
//! optional inputs left unconnected, Consts written without their values, the
//! PlaceHolder and End boundaries of a partitioned subgraph, storage and origin formats,
//! and ops lowered as compiled kernels rt2 cannot compute. Each graph is printed as
//! text and read back through the text reader, so the tests see what a user's file gives.

use rt2::exec::{ExecuteGraph, KernelGraph};
use rt2::lower::{LowerOptions, lower};
use rt2::om::ComputeModel;
use rt2::om::file::{ReadOptions, read};
use rt2::om::testdata_text::{DumpOp, dump_model, f32_desc, formatted_desc, reserved_desc};
use rt2::om::text::print_text;
use rt2::om::verify::verify;
use rt2::proto::ge_ir::ModelDef;

/// The model a GE text dump of `md` reads as.
fn read_text(md: &ModelDef) -> ComputeModel {
    let text = print_text(md);
    read(text.as_bytes(), &ReadOptions::default())
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .models
        .remove(0)
        .model
}

fn problems(m: &ComputeModel) -> Vec<String> {
    verify(m).iter().map(|p| p.to_string()).collect()
}

/// Data -> Relu (with a second, optional input left unconnected) -> NetOutput.
fn optional_inputs(second: rt2::proto::ge_ir::TensorDescriptor) -> ModelDef {
    dump_model(
        "g",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[2])),
            DumpOp::new("relu", "Relu")
                .input("x:0")
                .in_desc(f32_desc(&[2]))
                .in_desc(second)
                .out_desc(f32_desc(&[2])),
            DumpOp::new("out", "NetOutput")
                .input("relu:0")
                .in_desc(f32_desc(&[2])),
        ],
    )
}

#[test]
fn reserved_descriptors_of_unconnected_optional_inputs_are_normal() {
    let m = read_text(&optional_inputs(reserved_desc()));
    assert_eq!(m.root.nodes[1].input_descs.len(), 2);
    assert_eq!(m.root.nodes[1].data_input_descs().len(), 1);
    assert_eq!(problems(&m), Vec::<String>::new());
    // A second descriptor that is not FORMAT_RESERVED is still a mismatch.
    let m = read_text(&optional_inputs(f32_desc(&[2])));
    assert_eq!(
        problems(&m),
        ["error: graph \"g\": node \"relu\": 1 data input(s) but 2 input descriptor(s)"]
    );
}

/// Views match a node's inputs to the descriptors of its data inputs: a descriptor of an
/// optional input left unconnected, written before a connected one, is skipped.
#[test]
fn views_skip_descriptors_of_unconnected_optional_inputs() {
    let mut y = f32_desc(&[2, 3]);
    y.name = "y".into();
    let md = dump_model(
        "g",
        vec![
            // No output descriptor: the edge shows the consumer's input descriptor.
            DumpOp::new("x", "Data").attr_i("index", 0),
            DumpOp::new("bias", "BiasAdd")
                .input("x:0")
                .in_desc(reserved_desc())
                .in_desc(f32_desc(&[2, 3]))
                .out_desc(f32_desc(&[2, 3])),
            DumpOp::new("out", "NetOutput")
                .input("bias:0")
                .in_desc(reserved_desc())
                .in_desc(y),
        ],
    );
    let m = read_text(&md);
    assert_eq!(problems(&m), Vec::<String>::new());
    let dot = rt2::om::dot::to_dot(&m);
    assert!(
        dot.contains("g0n0 -> g0n1 [label=\"0→0\\nfloat32 [2,3]\"];"),
        "{dot}"
    );
    let s = rt2::om::summary::summarize(0, &m);
    let outputs: Vec<_> = s
        .outputs
        .iter()
        .map(|o| (o.name.as_str(), o.dtype.as_str(), o.shape.clone()))
        .collect();
    assert_eq!(outputs, [("y", "float32", vec![2, 3])]);
}

fn lowered(md: &ModelDef) -> ExecuteGraph {
    lower(&read_text(md), &LowerOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Each model input's name and whether it is a weight, in input order.
fn inputs(eg: &ExecuteGraph) -> Vec<(&str, bool)> {
    eg.inputs
        .iter()
        .map(|i| (i.name.as_str(), i.weight))
        .collect()
}

/// Main's `Data` nodes: name and `index`, in node order.
fn data_nodes(g: &KernelGraph) -> Vec<(String, i64)> {
    g.nodes
        .iter()
        .filter(|n| n.kernel == "Data")
        .map(|n| (n.name.to_string(), n.attr_int("index").unwrap_or(-1)))
        .collect()
}

/// x + w, times v: `w` keeps its value's descriptor but not its bytes, `v` has no
/// `value` at all, as dumps written without weights have them.
fn weightless() -> ModelDef {
    dump_model(
        "weightless",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[2])),
            DumpOp::new("w", "Const")
                .value(f32_desc(&[2]), Vec::new())
                .out_desc(f32_desc(&[2])),
            DumpOp::new("v", "Const").out_desc(f32_desc(&[2])),
            DumpOp::new("add", "Add")
                .input("x:0")
                .input("w:0")
                .in_desc(f32_desc(&[2]))
                .in_desc(f32_desc(&[2]))
                .out_desc(f32_desc(&[2])),
            DumpOp::new("mul", "Mul")
                .input("add:0")
                .input("v:0")
                .in_desc(f32_desc(&[2]))
                .in_desc(f32_desc(&[2]))
                .out_desc(f32_desc(&[2])),
            DumpOp::new("out", "NetOutput")
                .input("mul:0")
                .in_desc(f32_desc(&[2])),
        ],
    )
}

#[test]
fn consts_without_values_lower_to_weights_after_the_inputs() {
    let m = read_text(&weightless());
    assert_eq!(problems(&m), Vec::<String>::new());
    let eg = lowered(&weightless());
    assert_eq!(inputs(&eg), [("x", false), ("w", true), ("v", true)]);
    assert_eq!(
        data_nodes(&eg.main),
        [("x".into(), 0), ("w".into(), 1), ("v".into(), 2)]
    );
    assert_eq!(eg.inputs[2].shape, [2], "from the output descriptor");
    // The flag survives the file.
    let back = rt2::exec::exeg::decode(&rt2::exec::exeg::encode(&eg)).unwrap();
    assert_eq!(back.inputs, eg.inputs);
}

/// A partitioned subgraph, its boundaries in another order than their `peerIndex`:
/// PlaceHolders b (7) and a (2) -> Add -> Relu, Ends y (9, after Relu) and x (4, after
/// Add).
fn partitioned() -> ModelDef {
    let ph = |name: &str, peer: i64, dims: &[i64]| {
        DumpOp::new(name, "PlaceHolder")
            .attr_i("peerIndex", peer)
            .attr_i("anchorIndex", 0)
            .attr_s("parentOpType", "Conv2D")
            .attr_s("_parentNodeName", "conv")
            .attr_s("parentId", "partition0:3")
            .out_desc(f32_desc(dims))
    };
    let end = |name: &str, peer: i64, src: &str| {
        DumpOp::new(name, "End")
            .attr_i("peerIndex", peer)
            .attr_s("parentOpType", "NetOutput")
            .input(src)
            .in_desc(f32_desc(&[2, 3]))
    };
    dump_model(
        "partition1",
        vec![
            ph("ph_b", 7, &[2, 3]),
            ph("ph_a", 2, &[3]),
            DumpOp::new("add", "Add")
                .input("ph_b:0")
                .input("ph_a:0")
                .in_desc(f32_desc(&[2, 3]))
                .in_desc(f32_desc(&[3]))
                .out_desc(f32_desc(&[2, 3])),
            DumpOp::new("relu", "Relu")
                .input("add:0")
                .in_desc(f32_desc(&[2, 3]))
                .out_desc(f32_desc(&[2, 3])),
            end("end_y", 9, "relu:0"),
            end("end_x", 4, "add:0"),
        ],
    )
}

#[test]
fn placeholders_and_ends_are_inputs_and_outputs_in_peer_index_order() {
    let m = read_text(&partitioned());
    assert_eq!(problems(&m), Vec::<String>::new());
    let names = |v: Vec<rt2::om::summary::TensorSummary>| -> Vec<String> {
        v.into_iter().map(|t| t.name).collect()
    };
    assert_eq!(
        names(rt2::om::summary::graph_inputs(&m.root)),
        ["ph_a", "ph_b"]
    );
    assert_eq!(
        names(rt2::om::summary::graph_outputs(&m.root)),
        ["end_x", "end_y"]
    );
    let eg = lowered(&partitioned());
    assert_eq!(inputs(&eg), [("ph_a", false), ("ph_b", false)]);
    assert_eq!(eg.inputs[0].shape, [3]);
    assert_eq!(
        data_nodes(&eg.main),
        [("ph_b".into(), 1), ("ph_a".into(), 0)]
    );
    let outs: Vec<&str> = eg.outputs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(outs, ["end_x", "end_y"]);
}

/// Data -> Relu -> NetOutput on a tensor GE stores as NC1HWC0 (format 3) whose origin is
/// NCHW (format 0) [1, 16, 2, 2]: memory holds [1, 1, 2, 2, 16].
fn five_d() -> ModelDef {
    let nc1hwc0 = || {
        formatted_desc(
            1,
            &[1, 1, 2, 2, 16],
            "NC1HWC0",
            3,
            ("NCHW", 0),
            &[1, 16, 2, 2],
        )
    };
    dump_model(
        "five_d",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(nc1hwc0()),
            DumpOp::new("relu", "Relu")
                .input("x:0")
                .in_desc(nc1hwc0())
                .out_desc(nc1hwc0()),
            DumpOp::new("out", "NetOutput")
                .input("relu:0")
                .in_desc(nc1hwc0()),
        ],
    )
}

#[test]
fn storage_and_origin_formats_reach_the_lowered_tensors_and_the_views() {
    use rt2::exec::KernelAttr;
    let eg = lowered(&five_d());
    let formats = |g: &KernelGraph| -> Vec<(String, i64, i64, Vec<i64>)> {
        g.nodes
            .iter()
            .filter_map(|n| {
                let f = n.attr_int("_format")?;
                let o = n.attr_int("_origin_format")?;
                let Some(KernelAttr::Ints(s)) = n.attrs.get("_origin_shape") else {
                    return None;
                };
                Some((n.kernel.to_string(), f, o, s.clone()))
            })
            .collect()
    };
    let origin = vec![1, 16, 2, 2];
    assert_eq!(
        formats(&eg.main),
        [
            ("Data".to_string(), 3, 0, origin.clone()),
            ("AllocMemHbm".to_string(), 3, 0, origin.clone())
        ]
    );
    let json = rt2::exec::view::json::to_json(&eg, rt2::exec::view::select::GraphSelect::Main);
    assert!(json.to_string().contains("\"_origin_shape\""), "{json}");
    let dot = rt2::exec::view::dot::to_dot(&eg, rt2::exec::view::select::GraphSelect::Main);
    assert!(dot.contains("format 3, origin 0 [1, 16, 2, 2]"), "{dot}");
    // Plain tensors carry nothing.
    assert_eq!(formats(&lowered(&partitioned()).main), []);
}

/// `x` -> FakeOpNpu (an op that exists only as a compiled AI Core kernel) -> FractionalMaxPool
/// (on AI CPU, not in the op library) -> Relu (on AI CPU's TensorFlow kernels, computed
/// by rt2) -> NetOutput. Every output descriptor is static, as GE's built graphs are.
fn compiled_kernels() -> ModelDef {
    let int32 = |dims: &[i64]| rt2::om::testdata_text::tensor_desc(7, dims, "ND");
    let paddings: Vec<u8> = [0i32, 0, 1, 1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    dump_model(
        "compiled",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[2, 3])),
            DumpOp::new("fake", "FakeOpNpu")
                .attr_s("_ge_attr_op_kernel_lib_name", "AIcoreEngine")
                .attr_s("_kernelname", "te_fakeopnpu_5f3a")
                .attr_i("mode", 2)
                .input("x:0")
                .in_desc(f32_desc(&[2, 3]))
                .out_desc(f32_desc(&[2, 3])),
            DumpOp::new("paddings", "Const")
                .value(int32(&[2, 2]), paddings)
                .out_desc(int32(&[2, 2])),
            DumpOp::new("pad", "FractionalMaxPool")
                .attr_s("_ge_attr_op_kernel_lib_name", "aicpu_ascend_kernel")
                .attr_s("mode", "REFLECT")
                .input("fake:0")
                .input("paddings:0")
                .in_desc(f32_desc(&[2, 3]))
                .in_desc(int32(&[2, 2]))
                .out_desc(f32_desc(&[2, 5])),
            DumpOp::new("relu", "Relu")
                .attr_s("_ge_attr_op_kernel_lib_name", "aicpu_tf_kernel")
                .input("pad:0")
                .in_desc(f32_desc(&[2, 5]))
                .out_desc(f32_desc(&[2, 5])),
            DumpOp::new("out", "NetOutput")
                .input("relu:0")
                .in_desc(f32_desc(&[2, 5])),
        ],
    )
}

/// Main's op launches: kernel type, `_op_type`, `_kernel_name` (when a compiled kernel).
fn launches(g: &KernelGraph) -> Vec<(String, String, Option<String>)> {
    let s = |n: &rt2::exec::KernelNode, k: &str| {
        n.attrs.get(k).and_then(|a| a.as_str()).map(str::to_string)
    };
    g.nodes
        .iter()
        .filter(|n| rt2::exec::kernel_types::is_op_launch(&n.kernel))
        .map(|n| {
            (
                n.kernel.to_string(),
                s(n, "_op_type").unwrap_or_default(),
                s(n, "_kernel_name"),
            )
        })
        .collect()
}

#[test]
fn ops_rt2_cannot_compute_lower_as_compiled_kernels_on_their_engines() {
    let eg = lowered(&compiled_kernels());
    let own = |s: &str| Some(s.to_string());
    assert_eq!(
        launches(&eg.main),
        [
            (
                "LaunchKernelWithHandle".into(),
                "FakeOpNpu".into(),
                own("te_fakeopnpu_5f3a")
            ),
            (
                "AicpuLaunchCCKernel".into(),
                "FractionalMaxPool".into(),
                own("FractionalMaxPool")
            ),
            ("AicpuLaunchTfKernel".into(), "Relu".into(), None),
        ]
    );
    // The same kernel sequence as a library op: an allocation of the declared size, the
    // launch, a free after the last reader (of the input's upload and the two
    // intermediates; the output leaves the graph).
    let hist = eg.main.kernel_histogram();
    let count = |k: &str| hist.get(k).copied().unwrap_or(0);
    assert_eq!(
        [
            count("AllocMemHbm"),
            count("FreeMemory"),
            count("InferShape")
        ],
        [3, 3, 0]
    );
    let alloc_sizes: Vec<i64> = eg
        .main
        .nodes
        .iter()
        .filter(|n| n.kernel == "AllocMemHbm")
        .filter_map(|n| n.attr_int("size"))
        .collect();
    assert_eq!(alloc_sizes, [24, 40, 40]);
    // The op's own attributes are kept for its kernel; GE's bookkeeping is not.
    let fake = eg
        .main
        .nodes
        .iter()
        .find(|n| n.name == "fake/LaunchKernelWithHandle")
        .expect("the FakeOpNpu launch");
    assert_eq!(fake.attr_int("mode"), Some(2));
    assert!(!fake.attrs.contains_key("_kernelname"));
    assert_eq!(eg.outputs[0].shape, [2, 5]);

    let missing = rt2::exec::runtime::ops_without_compute(&eg, &rt2::ops::OpRegistry::new());
    let named: Vec<String> = missing.iter().map(|m| m.to_string()).collect();
    assert_eq!(
        named,
        [
            "compiled/fake (FakeOpNpu)",
            "compiled/pad (FractionalMaxPool)"
        ]
    );
    // The views name each engine's launch.
    let dot = rt2::exec::view::dot::to_dot(&eg, rt2::exec::view::GraphSelect::Main);
    assert!(
        dot.contains("AicpuLaunchCCKernel\\npad/AicpuLaunchCCKernel"),
        "{dot}"
    );
}

#[test]
fn running_refuses_every_op_it_cannot_compute_at_load() {
    let eg = lowered(&compiled_kernels());
    let device = rt2::npu::device::Device::try_new(Default::default()).unwrap();
    let err = rt2::exec::runtime::ModelV2Executor::create(&eg, &device, Default::default())
        .expect_err("refused");
    assert!(matches!(&err, rt2::exec::runtime::ExecError::NoCompute(ops) if ops.len() == 2));
    assert_eq!(
        err.to_string(),
        "2 op(s) rt2 cannot compute (compiled kernels only): compiled/fake (FakeOpNpu), \
         compiled/pad (FractionalMaxPool)"
    );
}

/// An op the library does not know and whose output shape is not declared stays
/// unsupported.
#[test]
fn an_unknown_op_without_static_output_descriptors_is_unsupported() {
    let mut md = compiled_kernels();
    md.graph[0].op[1].output_desc[0].shape.as_mut().unwrap().dim = vec![-1, 3];
    let err = lower(&read_text(&md), &LowerOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "1 unsupported op(s): compiled/fake (FakeOpNpu)"
    );
}

/// Rank, Shape and Size of an input whose dims are known only at run time, as a GE graph
/// places them: on the host, each a `BuildShapeTensorData` reading the input's shape,
/// never its memory, and no launch; their values are what the input's shape says.
#[test]
fn shape_ops_of_dynamic_inputs_run_on_the_host() {
    // GE IR's proto numbers: DT_INT32 7, DT_INT64 8.
    let int64 = |dims: &[i64]| rt2::om::testdata_text::tensor_desc(8, dims, "ND");
    let int32 = |dims: &[i64]| rt2::om::testdata_text::tensor_desc(7, dims, "ND");
    let md = dump_model(
        "shapes",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[-1, 4])),
            DumpOp::new("rank", "Rank")
                .input("x:0")
                .in_desc(f32_desc(&[-1, 4]))
                .out_desc(int32(&[])),
            DumpOp::new("shape", "Shape")
                .input("x:0")
                .attr_i("dtype", 3)
                .in_desc(f32_desc(&[-1, 4]))
                .out_desc(int32(&[2])),
            // GE's Size defaults to int32; this one asks for int64 (C++ DT_INT64, 9).
            DumpOp::new("size", "Size")
                .input("x:0")
                .attr_i("dtype", 9)
                .in_desc(f32_desc(&[-1, 4]))
                .out_desc(int64(&[])),
            DumpOp::new("out", "NetOutput")
                .input("rank:0")
                .input("shape:0")
                .input("size:0")
                .in_desc(int32(&[]))
                .in_desc(int32(&[2]))
                .in_desc(int64(&[])),
        ],
    );
    let eg = lowered(&md);
    let kernels: Vec<&str> = eg.main.nodes.iter().map(|n| &*n.kernel).collect();
    assert_eq!(
        kernels
            .iter()
            .filter(|&&k| k == "BuildShapeTensorData")
            .count(),
        3,
        "{kernels:?}"
    );
    assert!(
        !kernels
            .iter()
            .any(|&k| rt2::exec::kernel_types::is_op_launch(k))
    );
    assert!(!kernels.contains(&"CopyD2H"), "{kernels:?}");
    let device = rt2::npu::device::Device::try_new(Default::default()).unwrap();
    let mut ex = rt2::exec::runtime::ModelV2Executor::create(&eg, &device, Default::default())
        .expect("creates");
    ex.load().expect("loads");
    let x = rt2::ops::HostTensor {
        dtype: rt2::ops::DType::F32,
        shape: vec![3, 4],
        data: vec![0; 48].into(),
    };
    let mut out = Vec::new();
    ex.execute_sync(&[&x], &mut out).expect("runs");
    let ints = |t: &rt2::ops::HostTensor| -> Vec<i64> {
        match t.dtype {
            rt2::ops::DType::I32 => t
                .data
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64)
                .collect(),
            _ => t
                .data
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
        }
    };
    assert_eq!(
        out.iter().map(|t| (t.dtype, ints(t))).collect::<Vec<_>>(),
        [
            (rt2::ops::DType::I32, vec![2]),
            (rt2::ops::DType::I32, vec![3, 4]),
            (rt2::ops::DType::I64, vec![12]),
        ]
    );
}

/// Runs `eg` once on `inputs` under the sequential executor.
fn run_once(eg: &ExecuteGraph, inputs: &[&rt2::ops::HostTensor]) -> Vec<rt2::ops::HostTensor> {
    let device = rt2::npu::device::Device::try_new(Default::default()).unwrap();
    let mut ex = rt2::exec::runtime::ModelV2Executor::create(eg, &device, Default::default())
        .expect("creates");
    ex.load().expect("loads");
    let mut out = Vec::new();
    ex.execute_sync(inputs, &mut out).expect("runs");
    out
}

fn f32_values(t: &rt2::ops::HostTensor) -> Vec<f32> {
    t.data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Op types GE and ONNX both name, in a GE graph (no `onnx_opset`): GE's contract, not
/// ONNX's. A ReduceSum without `keep_dims` drops the axis (GE's default, not ONNX's
/// keepdims 1) and an empty axes list reduces nothing; a HardSigmoid without `alpha` uses
/// GE's 1/6, not ONNX's 0.2; GE's Split (split_dim first) splits as SplitD; an Exp with a
/// `base` is not computed with ONNX's meaning: it lowers as a compiled kernel and running
/// refuses it by name.
#[test]
fn shared_op_types_in_a_ge_graph_follow_ges_contract() {
    let int32 = |dims: &[i64]| rt2::om::testdata_text::tensor_desc(7, dims, "ND");
    let axes = |name: &str, v: &[i32]| {
        DumpOp::new(name, "Const").value(
            int32(&[v.len() as i64]),
            v.iter().flat_map(|a| a.to_le_bytes()).collect(),
        )
    };
    let md = dump_model(
        "shared",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[2, 3])),
            axes("ax1", &[1]),
            axes("none", &[]),
            DumpOp::new("sum", "ReduceSum")
                .input("x:0")
                .input("ax1:0")
                .in_desc(f32_desc(&[2, 3]))
                .in_desc(int32(&[1]))
                .out_desc(f32_desc(&[2])),
            DumpOp::new("same", "ReduceSum")
                .input("x:0")
                .input("none:0")
                .in_desc(f32_desc(&[2, 3]))
                .in_desc(int32(&[0]))
                .out_desc(f32_desc(&[2, 3])),
            DumpOp::new("hs", "HardSigmoid")
                .input("x:0")
                .in_desc(f32_desc(&[2, 3]))
                .out_desc(f32_desc(&[2, 3])),
            DumpOp::new("out", "NetOutput")
                .input("sum:0")
                .input("same:0")
                .input("hs:0")
                .in_desc(f32_desc(&[2]))
                .in_desc(f32_desc(&[2, 3]))
                .in_desc(f32_desc(&[2, 3])),
        ],
    );
    let eg = lowered(&md);
    let xs = [1.0f32, -2.0, 3.0, 0.5, 4.0, -6.0];
    let x = rt2::ops::HostTensor {
        dtype: rt2::ops::DType::F32,
        shape: vec![2, 3],
        data: xs.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let out = run_once(&eg, &[&x]);
    assert_eq!(out[0].shape, [2]);
    assert_eq!(f32_values(&out[0]), [2.0, -1.5]);
    assert_eq!(out[1].shape, [2, 3]);
    assert_eq!(f32_values(&out[1]), xs);
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| (v * 0.166_666_66 + 0.5).clamp(0.0, 1.0))
        .collect();
    for (g, w) in f32_values(&out[2]).iter().zip(&want) {
        assert!((g - w).abs() < 1e-6, "{g} vs {w}");
    }

    // GE's Split (split_dim first, a Const) computes as SplitD; an Exp of base 2 does not
    // compute as ONNX's Exp: it is a compiled kernel, refused at load by name.
    let split_graph = |with_exp: bool| {
        let mut ops = vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[2, 4])),
            axes("dim", &[1]),
            DumpOp::new("split", "Split")
                .input("dim:0")
                .input("x:0")
                .attr_i("num_split", 2)
                .in_desc(int32(&[1]))
                .in_desc(f32_desc(&[2, 4]))
                .out_desc(f32_desc(&[2, 2]))
                .out_desc(f32_desc(&[2, 2])),
        ];
        let first = if with_exp {
            ops.push(
                DumpOp::new("exp2", "Exp")
                    .input("split:0")
                    .attr_f("base", 2.0)
                    .in_desc(f32_desc(&[2, 2]))
                    .out_desc(f32_desc(&[2, 2])),
            );
            "exp2:0"
        } else {
            "split:0"
        };
        ops.push(
            DumpOp::new("out", "NetOutput")
                .input(first)
                .input("split:1")
                .in_desc(f32_desc(&[2, 2]))
                .in_desc(f32_desc(&[2, 2])),
        );
        dump_model("refused", ops)
    };
    let eg = lowered(&split_graph(false));
    let x = rt2::ops::HostTensor {
        dtype: rt2::ops::DType::F32,
        shape: vec![2, 4],
        data: (0..8).flat_map(|v| (v as f32).to_le_bytes()).collect(),
    };
    let out = run_once(&eg, &[&x]);
    assert_eq!(f32_values(&out[0]), [0.0, 1.0, 4.0, 5.0]);
    assert_eq!(f32_values(&out[1]), [2.0, 3.0, 6.0, 7.0]);
    let md = split_graph(true);
    let eg = lowered(&md);
    let device = rt2::npu::device::Device::try_new(Default::default()).unwrap();
    let err = rt2::exec::runtime::ModelV2Executor::create(&eg, &device, Default::default())
        .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "1 op(s) rt2 cannot compute (compiled kernels only): refused/exp2 (Exp)"
    );
    // Without static descriptors, the reason is the unsupported op's.
    let mut md = md;
    md.graph[0].op[3].output_desc[0].shape.as_mut().unwrap().dim = vec![-1, 2];
    let err = lower(&read_text(&md), &LowerOptions::default()).unwrap_err();
    let err = err.to_string();
    assert!(
        err.starts_with("1 unsupported op(s): refused/exp2 (Exp): GE's Exp with base"),
        "{err}"
    );
}

/// GE's aliases of library ops in a GE graph: ConcatV2 (axis last, a Const), ExpandDims
/// and Maximum are launched as Concat, Unsqueeze and Max, translated once at lowering,
/// with GE's values.
#[test]
fn ge_aliases_launch_the_library_ops_they_are() {
    let int32 = |dims: &[i64]| rt2::om::testdata_text::tensor_desc(7, dims, "ND");
    let zeros: Vec<u8> = [0.0f32; 4].iter().flat_map(|v| v.to_le_bytes()).collect();
    let md = dump_model(
        "aliases",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[2, 2])),
            DumpOp::new("axis", "Const").value(int32(&[]), 1i32.to_le_bytes().to_vec()),
            DumpOp::new("zero", "Const").value(f32_desc(&[4]), zeros),
            DumpOp::new("cat", "ConcatV2")
                .input("x:0")
                .input("x:0")
                .input("axis:0")
                .attr_i("N", 2)
                .in_desc(f32_desc(&[2, 2]))
                .in_desc(f32_desc(&[2, 2]))
                .in_desc(int32(&[]))
                .out_desc(f32_desc(&[2, 4])),
            DumpOp::new("ex", "ExpandDims")
                .input("cat:0")
                .input("axis:0")
                .in_desc(f32_desc(&[2, 4]))
                .in_desc(int32(&[]))
                .out_desc(f32_desc(&[2, 1, 4])),
            DumpOp::new("max", "Maximum")
                .input("ex:0")
                .input("zero:0")
                .in_desc(f32_desc(&[2, 1, 4]))
                .in_desc(f32_desc(&[4]))
                .out_desc(f32_desc(&[2, 1, 4])),
            DumpOp::new("out", "NetOutput")
                .input("max:0")
                .in_desc(f32_desc(&[2, 1, 4])),
        ],
    );
    let eg = lowered(&md);
    let launched: Vec<&str> = eg
        .main
        .nodes
        .iter()
        .filter(|n| rt2::exec::kernel_types::is_op_launch(&n.kernel))
        .filter_map(|n| n.attrs.get("_op_type").and_then(|a| a.as_str()))
        .collect();
    assert_eq!(launched, ["Concat", "Unsqueeze", "Max"]);
    let x = rt2::ops::HostTensor {
        dtype: rt2::ops::DType::F32,
        shape: vec![2, 2],
        data: [1.0f32, -2.0, 3.0, 0.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    };
    let out = run_once(&eg, &[&x]);
    assert_eq!(out[0].shape, [2, 1, 4]);
    assert_eq!(
        f32_values(&out[0]),
        [1.0, 0.0, 1.0, 0.0, 3.0, 0.5, 3.0, 0.5]
    );
}

/// GE's TopK in a GE graph (no `onnx_opset`): `dim`, int32 indices, as GE's prototype
/// says, computed by the library's TopK.
#[test]
fn ge_top_k_gives_int32_indices() {
    let int32 = |dims: &[i64]| rt2::om::testdata_text::tensor_desc(7, dims, "ND");
    let md = dump_model(
        "topk",
        vec![
            DumpOp::new("x", "Data")
                .attr_i("index", 0)
                .out_desc(f32_desc(&[3, 2])),
            DumpOp::new("k", "Const").value(int32(&[1]), 2i32.to_le_bytes().to_vec()),
            DumpOp::new("top", "TopK")
                .input("x:0")
                .input("k:0")
                .attr_i("dim", 0)
                .in_desc(f32_desc(&[3, 2]))
                .in_desc(int32(&[1]))
                .out_desc(f32_desc(&[2, 2]))
                .out_desc(int32(&[2, 2])),
            DumpOp::new("out", "NetOutput")
                .input("top:0")
                .input("top:1")
                .in_desc(f32_desc(&[2, 2]))
                .in_desc(int32(&[2, 2])),
        ],
    );
    let eg = lowered(&md);
    let x = rt2::ops::HostTensor {
        dtype: rt2::ops::DType::F32,
        shape: vec![3, 2],
        data: [1.0f32, 6.0, 5.0, 2.0, 3.0, 4.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    };
    let out = run_once(&eg, &[&x]);
    assert_eq!(f32_values(&out[0]), [5.0, 6.0, 3.0, 4.0]);
    assert_eq!(out[1].dtype, rt2::ops::DType::I32);
    let idx: Vec<i32> = out[1]
        .data
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(idx, [1, 0, 2, 2]);
}
