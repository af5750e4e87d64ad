//! Tests of ONNX import, on models built in Rust with [`super::builder`]. Each test
//! asserts on values in the produced `ModelDef`, not just on success.

use proptest::prelude::*;
use prost::Message;

use super::builder::*;
use super::{ImportOptions, PARENT_NODE_INDEX, SYMBOLIC_DIMS_ATTR, import, import_typed};
use crate::om::OmError;
use crate::proto::ge_ir::attr_def::Value;
use crate::proto::ge_ir::{GraphDef, ModelDef, OpDef, TensorDescriptor};
use crate::proto::onnx::{NodeProto, TensorProto};

fn imp(bytes: &[u8]) -> ModelDef {
    import(bytes, &ImportOptions::default()).unwrap_or_else(|e| panic!("import failed: {e}"))
}

fn err(bytes: &[u8]) -> String {
    match import(bytes, &ImportOptions::default()) {
        Ok(_) => panic!("import should have failed"),
        Err(e) => e.to_string(),
    }
}

fn op<'a>(g: &'a GraphDef, name: &str) -> &'a OpDef {
    g.op.iter().find(|o| o.name == name).unwrap_or_else(|| {
        panic!(
            "no op {name:?} in {:?}",
            g.op.iter().map(|o| &o.name).collect::<Vec<_>>()
        )
    })
}

fn graph<'a>(m: &'a ModelDef, name: &str) -> &'a GraphDef {
    m.graph
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no graph {name:?}"))
}

fn value<'a>(
    attrs: &'a std::collections::BTreeMap<String, crate::proto::ge_ir::AttrDef>,
    k: &str,
) -> &'a Value {
    attrs
        .get(k)
        .and_then(|a| a.value.as_ref())
        .unwrap_or_else(|| panic!("no attr {k:?}"))
}
fn ai(o: &OpDef, k: &str) -> i64 {
    match value(&o.attr, k) {
        Value::I(v) => *v,
        v => panic!("{k}: {v:?}"),
    }
}
fn af(o: &OpDef, k: &str) -> f32 {
    match value(&o.attr, k) {
        Value::F(v) => *v,
        v => panic!("{k}: {v:?}"),
    }
}
fn as_(o: &OpDef, k: &str) -> String {
    match value(&o.attr, k) {
        Value::S(v) => String::from_utf8_lossy(v).into_owned(),
        v => panic!("{k}: {v:?}"),
    }
}
fn aints(o: &OpDef, k: &str) -> Vec<i64> {
    match value(&o.attr, k) {
        Value::List(l) => {
            assert_eq!(l.val_type, 2, "{k} val_type");
            l.i.clone()
        }
        v => panic!("{k}: {v:?}"),
    }
}
fn dims(d: &TensorDescriptor) -> Vec<i64> {
    d.shape.as_ref().map(|s| s.dim.clone()).unwrap_or_default()
}
fn sym(d: &TensorDescriptor) -> Option<Vec<String>> {
    match d.attr.get(SYMBOLIC_DIMS_ATTR)?.value.as_ref()? {
        Value::List(l) => Some(
            l.s.iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect(),
        ),
        _ => None,
    }
}
fn desc_i(d: &TensorDescriptor, k: &str) -> Option<i64> {
    match d.attr.get(k)?.value.as_ref()? {
        Value::I(v) => Some(*v),
        _ => None,
    }
}
fn const_f32(o: &OpDef) -> (Vec<i64>, Vec<f32>) {
    match value(&o.attr, "value") {
        Value::T(t) => (
            dims(t.desc.as_ref().unwrap()),
            t.data
                .chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        v => panic!("value: {v:?}"),
    }
}
fn p(s: &str) -> Dim {
    Dim::param(s)
}
fn v(n: i64) -> Dim {
    Dim::Value(n)
}

fn cnn() -> Vec<u8> {
    let w: Vec<f32> = (0..4 * 3 * 3 * 3).map(|i| i as f32 * 0.01).collect();
    OnnxBuilder::new("cnn")
        .producer("pytorch", "2.1")
        .input("x", F32, &[p("batch"), v(3), v(8), v(8)])
        .initializer(tensor_f32("w", &[4, 3, 3, 3], &w))
        .initializer(tensor_f32("b", &[4], &[0.1, 0.2, 0.3, 0.4]))
        .initializer(tensor_f32("bn_s", &[4], &[1.0; 4]))
        .initializer(tensor_f32("bn_b", &[4], &[0.0; 4]))
        .initializer(tensor_f32("bn_m", &[4], &[0.0; 4]))
        .initializer(tensor_f32("bn_v", &[4], &[1.0; 4]))
        .initializer(tensor_f32("fc_w", &[10, 64], &[0.5; 640]))
        .initializer(tensor_f32("fc_b", &[10], &[0.0; 10]))
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            vec![
                attr_ints("kernel_shape", &[3, 3]),
                attr_ints("pads", &[1, 1, 1, 1]),
            ],
        )
        .node(
            "BatchNormalization",
            &["c", "bn_s", "bn_b", "bn_m", "bn_v"],
            &["n"],
            vec![],
        )
        .node("Relu", &["n"], &["r"], vec![])
        .node(
            "MaxPool",
            &["r"],
            &["mp"],
            vec![
                attr_ints("kernel_shape", &[2, 2]),
                attr_ints("strides", &[2, 2]),
            ],
        )
        .node("Flatten", &["mp"], &["f"], vec![])
        .node(
            "Gemm",
            &["f", "fc_w", "fc_b"],
            &["y"],
            vec![attr_i("transB", 1)],
        )
        .value_info(value_info("c", F32, Some(&[p("batch"), v(4), v(8), v(8)])))
        .output("y", F32, &[p("batch"), v(10)])
        .build()
}

#[test]
fn cnn_with_initializers() {
    let m = imp(&cnn());
    assert_eq!(m.name, "cnn");
    assert_eq!(m.graph.len(), 1);
    let g = &m.graph[0];
    let names: Vec<&str> = g.op.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "x",
            "b_Initializer_0",
            "bn_b_Initializer_1",
            "bn_m_Initializer_2",
            "bn_s_Initializer_3",
            "bn_v_Initializer_4",
            "fc_b_Initializer_5",
            "fc_w_Initializer_6",
            "w_Initializer_7",
            "Conv_0",
            "BatchNormalization_1",
            "Relu_2",
            "MaxPool_3",
            "Flatten_4",
            "Gemm_5_MatMulV2",
            "Gemm_5",
            "Node_Output",
        ]
    );
    assert_eq!(g.input, ["x:0"]);
    assert_eq!(g.output, ["Gemm_5:0"]);
    assert!(g.op.iter().enumerate().all(|(i, o)| o.id == i as i64));

    let x = op(g, "x");
    assert_eq!((x.r#type.as_str(), ai(x, "index")), ("Data", 0));
    assert_eq!(dims(&x.output_desc[0]), [-1, 3, 8, 8]);
    assert_eq!(sym(&x.output_desc[0]).unwrap(), ["batch", "", "", ""]);
    assert_eq!(x.output_desc[0].dtype, 1);
    let layouts = (
        x.input_desc[0].layout.as_str(),
        x.output_desc[0].layout.as_str(),
    );
    assert_eq!(layouts, ("NCHW", "NCHW"));
    assert_eq!(op(g, "Gemm_5").input_desc[0].layout, "ND");

    let w = op(g, "w_Initializer_7");
    assert_eq!(w.r#type, "Const");
    let (wd, wv) = const_f32(w);
    assert_eq!(wd, [4, 3, 3, 3]);
    assert_eq!(wv.len(), 108);
    assert_eq!(wv[5], 5.0 * 0.01);
    assert_eq!(dims(&w.output_desc[0]), [4, 3, 3, 3]);

    let conv = op(g, "Conv_0");
    // GE's Conv plugin: Conv2D with GE's 4-element lists.
    assert_eq!(conv.r#type, "Conv2D");
    assert_eq!(
        conv.input,
        ["x:0", "w_Initializer_7:0", "b_Initializer_0:0"]
    );
    assert_eq!(as_(conv, "original_type"), "ai.onnx::17::Conv");
    assert!(!conv.attr.contains_key("onnx_opset"));
    assert_eq!(aints(conv, "pads"), [1, 1, 1, 1]);
    assert_eq!(aints(conv, "strides"), [1, 1, 1, 1]);
    assert_eq!(aints(conv, "dilations"), [1, 1, 1, 1]);
    assert_eq!(ai(conv, "groups"), 1);
    assert_eq!(as_(conv, "auto_pad"), "NOTSET");
    assert_eq!(as_(conv, "data_format"), "NCHW");
    assert_eq!(conv.input_desc[0].layout, "NCHW");
    assert_eq!(desc_i(&conv.input_desc[0], "format_for_int"), Some(0));
    assert_eq!(conv.input_desc[1].layout, "ND");
    assert_eq!(conv.output_desc[0].layout, "NCHW");
    assert_eq!(dims(&conv.output_desc[0]), [-1, 4, 8, 8]);

    let bn = op(g, "BatchNormalization_1");
    assert_eq!(bn.r#type, "BatchNorm");
    assert_eq!(bn.input[0], "Conv_0:0");
    assert_eq!(af(bn, "epsilon"), 1e-5);
    assert_eq!(as_(bn, "data_format"), "NCHW");
    assert!(!bn.attr.contains_key("momentum"));
    let mp = op(g, "MaxPool_3");
    assert_eq!(mp.r#type, "MaxPoolV3");
    assert_eq!(aints(mp, "ksize"), [1, 1, 2, 2]);
    assert_eq!(aints(mp, "strides"), [1, 1, 2, 2]);
    assert_eq!(aints(mp, "pads"), [0, 0, 0, 0]);
    assert_eq!(as_(mp, "padding_mode"), "CALCULATED");
    assert!(matches!(value(&mp.attr, "ceil_mode"), Value::B(false)));
    assert_eq!(ai(op(g, "Flatten_4"), "axis"), 1);
    // Gemm with alpha and beta 1: MatMulV2 with the transposes, then the bias Add, which
    // keeps the node's name.
    let mm = op(g, "Gemm_5_MatMulV2");
    assert_eq!(mm.r#type, "MatMulV2");
    assert_eq!(mm.input, ["Flatten_4:0", "fc_w_Initializer_6:0"]);
    assert!(matches!(value(&mm.attr, "transpose_x2"), Value::B(true)));
    assert_eq!(as_(mm, "original_type"), "ai.onnx::17::Gemm");
    let add = op(g, "Gemm_5");
    assert_eq!(add.r#type, "Add");
    assert_eq!(add.input, ["Gemm_5_MatMulV2:0", "fc_b_Initializer_5:0"]);
    // An output whose type ONNX did not record: undefined dtype, unknown rank.
    assert_eq!(op(g, "Relu_2").output_desc[0].dtype, 0);
    assert_eq!(dims(&op(g, "Relu_2").output_desc[0]), [-2]);

    let net = op(g, "Node_Output");
    assert_eq!(net.r#type, "NetOutput");
    assert_eq!(net.input, ["Gemm_5:0"]);
    assert_eq!(dims(&net.input_desc[0]), [-1, 10]);
    assert!(!net.input_desc[0].attr.contains_key(PARENT_NODE_INDEX));

    match value(&m.attr, "onnx_producer_name") {
        Value::S(s) => assert_eq!(s, b"pytorch"),
        v => panic!("{v:?}"),
    }
    match value(&m.attr, "onnx_opset_versions") {
        Value::List(l) => assert_eq!(l.i, [17]),
        v => panic!("{v:?}"),
    }
}

#[test]
fn symbolic_dims_in_every_spelling() {
    let bytes = OnnxBuilder::new("g")
        .input(
            "a",
            F32,
            &[
                v(-1),
                p("?"),
                p("unk__12"),
                p("batch*2+1"),
                Dim::Missing,
                v(5),
            ],
        )
        .input_info(value_info("u", F32, None))
        .node("Add", &["a", "u"], &["y"], vec![])
        .output_info(value_info("y", F32, None))
        .build();
    let m = imp(&bytes);
    let a = op(&m.graph[0], "a");
    assert_eq!(dims(&a.output_desc[0]), [-1, -1, -1, -1, -1, 5]);
    assert_eq!(
        sym(&a.output_desc[0]).unwrap(),
        ["?", "?", "unk__12", "batch*2+1", "?", ""]
    );
    let u = op(&m.graph[0], "u");
    assert_eq!(dims(&u.output_desc[0]), [-2]);
    assert_eq!(ai(u, "index"), 1);
    let add = op(&m.graph[0], "Add_0");
    assert_eq!(dims(&add.input_desc[0]), [-1, -1, -1, -1, -1, 5]);
    assert_eq!(dims(&add.output_desc[0]), [-2]);
    // Static descs carry no symbolic-dims attr, like GE's.
    let s = imp(&cnn());
    assert!(sym(&op(&s.graph[0], "w_Initializer_7").output_desc[0]).is_none());
}

#[test]
fn input_shapes_fix_dims() {
    let opts = ImportOptions {
        name: Some("fixed".into()),
        input_shapes: vec![("x".into(), vec![2, 3, 8, 8])],
        ..Default::default()
    };
    let m = import(&cnn(), &opts).unwrap();
    assert_eq!(m.name, "fixed");
    let g = &m.graph[0];
    assert_eq!(dims(&op(g, "x").output_desc[0]), [2, 3, 8, 8]);
    assert!(sym(&op(g, "x").output_desc[0]).is_none());
    assert_eq!(dims(&op(g, "Conv_0").input_desc[0]), [2, 3, 8, 8]);

    let keep = ImportOptions {
        name: None,
        input_shapes: vec![("x".into(), vec![-1, 3, 8, 8])],
        ..Default::default()
    };
    let m = import(&cnn(), &keep).unwrap();
    assert_eq!(
        sym(&op(&m.graph[0], "x").output_desc[0]).unwrap(),
        ["batch", "", "", ""]
    );

    let rank = ImportOptions {
        name: None,
        input_shapes: vec![("x".into(), vec![2, 3])],
        ..Default::default()
    };
    let e = import(&cnn(), &rank).unwrap_err().to_string();
    assert!(e.contains("\"x\"") && e.contains("rank 2"), "{e}");
    let missing = ImportOptions {
        name: None,
        input_shapes: vec![("w".into(), vec![4, 3, 3, 3])],
        ..Default::default()
    };
    let e = import(&cnn(), &missing).unwrap_err().to_string();
    assert!(e.contains("\"w\"") && e.contains("not an input"), "{e}");
}

/// Two levels of If: the inner then-branch reads `x` from the root and `w1` from the
/// outer then-branch; weights live in Constant nodes and initializers inside branches.
fn nested_if() -> Vec<u8> {
    let inner_then = OnnxBuilder::new("inner_then")
        .node(
            "Constant",
            &[],
            &["c2"],
            vec![attr_t("value", tensor_f32("", &[2], &[10.0, 20.0]))],
        )
        .node("Add", &["x", "c2"], &["t1"], vec![])
        .node("Mul", &["t1", "w1"], &["inner_then_out"], vec![])
        .output("inner_then_out", F32, &[v(2)])
        .graph();
    let inner_else = OnnxBuilder::new("inner_else")
        .node("Identity", &["x"], &["inner_else_out"], vec![])
        .output("inner_else_out", F32, &[v(2)])
        .graph();
    let outer_then = OnnxBuilder::new("outer_then")
        .node(
            "Constant",
            &[],
            &["w1"],
            vec![attr_floats("value_floats", &[1.0, 2.0])],
        )
        .node(
            "If",
            &["cond"],
            &["outer_then_out"],
            vec![
                attr_g("then_branch", inner_then),
                attr_g("else_branch", inner_else),
            ],
        )
        .output("outer_then_out", F32, &[v(2)])
        .graph();
    let outer_else = OnnxBuilder::new("outer_else")
        .initializer(tensor_f32("k", &[2], &[3.0, 4.0]))
        .node("Neg", &["x"], &["n"], vec![])
        .node("Mul", &["n", "k"], &["outer_else_out"], vec![])
        .output("outer_else_out", F32, &[v(2)])
        .graph();
    OnnxBuilder::new("nested")
        .input("cond", BOOL, &[])
        .input("x", F32, &[v(2)])
        .named_node(
            "top",
            "If",
            &["cond"],
            &["y"],
            vec![
                attr_g("then_branch", outer_then),
                attr_g("else_branch", outer_else),
            ],
        )
        .output("y", F32, &[v(2)])
        .build()
}

/// Reading a model types each op as the importer finishes it, never holding the GE IR of
/// the whole model: the typed model is the one typing the imported GE IR gives, subgraphs
/// (nested, reading outer values) and plugin-made ops included.
#[test]
fn ops_typed_as_they_are_made_give_the_typed_ge_ir() {
    for bytes in [cnn(), nested_if(), chain_model(50)] {
        let typed = import_typed(&bytes, &ImportOptions::default()).unwrap();
        let via_ir = crate::om::ir::from_model_def(imp(&bytes)).unwrap();
        assert!(typed.root.nodes.len() >= 4);
        assert_eq!(typed, via_ir);
    }
}

/// Equal descriptor attribute maps are one shared map: a chain's 140 descriptors hold as
/// many maps as there are distinct ones, and equal maps are the same map.
#[test]
fn equal_descriptor_maps_are_shared() {
    let typed = import_typed(&chain_model(50), &ImportOptions::default()).unwrap();
    let mut held: Vec<&crate::om::graph::AttrMap> = Vec::new();
    let mut descs = 0;
    for n in &typed.root.nodes {
        for d in n.input_descs.iter().chain(&n.output_descs) {
            descs += 1;
            assert!(d.attrs.contains_key("origin_format"), "{}", n.name);
            match held.iter().find(|m| ***m == d.attrs) {
                Some(m) => assert!(m.same(&d.attrs), "{}: an equal map not shared", n.name),
                None => held.push(&d.attrs),
            }
        }
    }
    assert!(descs >= 130, "{descs}");
    assert!(held.len() <= 4, "{} distinct maps", held.len());
    // The GE IR reader shares them alike, and the graph is the same value.
    let via_ir = crate::om::ir::from_model_def(imp(&chain_model(50))).unwrap();
    assert_eq!(typed, via_ir);
    let (a, b) = (&via_ir.root.nodes[3], &via_ir.root.nodes[7]);
    assert!(a.output_descs[0].attrs.same(&b.output_descs[0].attrs));
}

#[test]
fn nested_if_with_outer_scope_values() {
    let m = imp(&nested_if());
    let order: Vec<&str> = m.graph.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(
        order,
        [
            "nested",
            "top_0_then_branch",
            "top_1_else_branch",
            "top_0_then_branch/If_1_0_then_branch",
            "top_0_then_branch/If_1_1_else_branch",
        ]
    );
    let top = op(&m.graph[0], "top");
    assert_eq!(top.r#type, "If");
    assert_eq!(
        top.subgraph_name,
        ["top_0_then_branch", "top_1_else_branch"]
    );
    // cond stays input 0; captures follow sorted by name (cond again, as GE does, then x).
    assert_eq!(top.input, ["cond:0", "cond:0", "x:0"]);
    assert_eq!(top.input_desc.len(), 3);
    assert_eq!(as_(top, "original_type"), "ai.onnx::17::If");

    let ot = graph(&m, "top_0_then_branch");
    let d_cond = op(ot, "top_0_then_branch/cond");
    assert_eq!(
        (
            d_cond.r#type.as_str(),
            ai(d_cond, "index"),
            ai(d_cond, PARENT_NODE_INDEX)
        ),
        ("Data", 0, 1)
    );
    let d_x = op(ot, "top_0_then_branch/x");
    assert_eq!((ai(d_x, "index"), ai(d_x, PARENT_NODE_INDEX)), (1, 2));
    assert_eq!(dims(&d_x.output_desc[0]), [2]);
    assert_eq!(d_x.output_desc[0].layout, "ND");
    assert_eq!(op(&m.graph[0], "x").output_desc[0].layout, "NCHW");
    assert_eq!(
        ot.input,
        ["top_0_then_branch/cond:0", "top_0_then_branch/x:0"]
    );
    let w1 = op(ot, "top_0_then_branch/Constant_0");
    assert_eq!(w1.r#type, "Const");
    assert_eq!(const_f32(w1), (vec![2], vec![1.0, 2.0]));
    let inner = op(ot, "top_0_then_branch/If_1");
    assert_eq!(
        inner.input,
        [
            "top_0_then_branch/cond:0",
            "top_0_then_branch/Constant_0:0",
            "top_0_then_branch/x:0"
        ]
    );
    assert_eq!(
        inner.subgraph_name,
        [
            "top_0_then_branch/If_1_0_then_branch",
            "top_0_then_branch/If_1_1_else_branch"
        ]
    );
    let net = op(ot, "top_0_then_branch/Node_Output");
    assert_eq!(net.input, ["top_0_then_branch/If_1:0"]);
    assert_eq!(desc_i(&net.input_desc[0], PARENT_NODE_INDEX), Some(0));

    // Two levels down: x arrives through the outer branch's Data op.
    let it = graph(&m, "top_0_then_branch/If_1_0_then_branch");
    let pre = "top_0_then_branch/If_1_0_then_branch/";
    let dw = op(it, &format!("{pre}w1"));
    assert_eq!((ai(dw, "index"), ai(dw, PARENT_NODE_INDEX)), (0, 1));
    let dx = op(it, &format!("{pre}x"));
    assert_eq!((ai(dx, "index"), ai(dx, PARENT_NODE_INDEX)), (1, 2));
    let c2 = op(it, &format!("{pre}Constant_4"));
    assert_eq!(const_f32(c2), (vec![2], vec![10.0, 20.0]));
    let add = op(it, &format!("{pre}Add_5"));
    assert_eq!(
        add.input,
        [format!("{pre}x:0"), format!("{pre}Constant_4:0")]
    );
    let mul = op(it, &format!("{pre}Mul_6"));
    assert_eq!(mul.input, [format!("{pre}Add_5:0"), format!("{pre}w1:0")]);
    // Both branches of an If get the same captured inputs.
    let ie = graph(&m, "top_0_then_branch/If_1_1_else_branch");
    assert_eq!(ie.op.iter().filter(|o| o.r#type == "Data").count(), 2);

    let oe = graph(&m, "top_1_else_branch");
    let k = op(oe, "top_1_else_branch/k_Initializer_0");
    assert_eq!(const_f32(k), (vec![2], vec![3.0, 4.0]));
    assert_eq!(op(oe, "top_1_else_branch/Mul_3").r#type, "Mul");
}

#[test]
fn loop_and_scan_keep_onnx_types_with_explicit_captures() {
    let body = OnnxBuilder::new("body")
        .input("iter", I64, &[])
        .input("cond_in", BOOL, &[])
        .input("v_in", F32, &[v(2)])
        .node("Add", &["v_in", "s"], &["v_out"], vec![])
        .node("Identity", &["cond_in"], &["cond_out"], vec![])
        .output("cond_out", BOOL, &[])
        .output("v_out", F32, &[v(2)])
        .graph();
    let scan_body = OnnxBuilder::new("scan_body")
        .input("st", F32, &[v(2)])
        .input("xe", F32, &[v(2)])
        .node("Add", &["st", "xe"], &["st2"], vec![])
        .node("Identity", &["st2"], &["ye"], vec![])
        .output("st2", F32, &[v(2)])
        .output("ye", F32, &[v(2)])
        .graph();
    let bytes = OnnxBuilder::new("loops")
        .input("M", I64, &[])
        .input("cond0", BOOL, &[])
        .input("v0", F32, &[v(2)])
        .input("s", F32, &[v(2)])
        .input("xs", F32, &[v(3), v(2)])
        .named_node(
            "loop",
            "Loop",
            &["M", "cond0", "v0"],
            &["v_final"],
            vec![attr_g("body", body)],
        )
        .named_node(
            "scan",
            "Scan",
            &["v_final", "xs"],
            &["final", "ys"],
            vec![attr_g("body", scan_body), attr_i("num_scan_inputs", 1)],
        )
        .output("final", F32, &[v(2)])
        .output("ys", F32, &[v(3), v(2)])
        .build();
    let m = imp(&bytes);
    let lp = op(&m.graph[0], "loop");
    assert_eq!(lp.r#type, "Loop");
    assert_eq!(lp.subgraph_name, ["loop_0_body"]);
    assert_eq!(lp.input, ["M:0", "cond0:0", "v0:0", "s:0"]);
    assert_eq!(
        ai(lp, crate::om::onnx::LOOP_CARRIED),
        1,
        "one loop-carried value (v0); s is captured"
    );
    let body = graph(&m, "loop_0_body");
    let parents: Vec<(String, i64)> = body
        .op
        .iter()
        .filter(|o| o.r#type == "Data")
        .map(|o| (o.name.clone(), ai(o, PARENT_NODE_INDEX)))
        .collect();
    assert_eq!(
        parents,
        [
            ("loop_0_body/iter".to_string(), 0),
            ("loop_0_body/cond_in".to_string(), 1),
            ("loop_0_body/v_in".to_string(), 2),
            ("loop_0_body/s".to_string(), 3),
        ]
    );
    let net = op(body, "loop_0_body/Node_Output");
    assert_eq!(
        desc_i(&net.input_desc[0], PARENT_NODE_INDEX),
        None,
        "the condition has no Loop output"
    );
    assert_eq!(desc_i(&net.input_desc[1], PARENT_NODE_INDEX), Some(0));

    let sc = op(&m.graph[0], "scan");
    assert_eq!((sc.r#type.as_str(), ai(sc, "num_scan_inputs")), ("Scan", 1));
    assert_eq!(sc.input, ["loop:0", "xs:0"]);
    let sb = graph(&m, "scan_0_body");
    assert_eq!(ai(op(sb, "scan_0_body/xe"), PARENT_NODE_INDEX), 1);
    let net = op(sb, "scan_0_body/Node_Output");
    assert_eq!(desc_i(&net.input_desc[1], PARENT_NODE_INDEX), Some(1));
    assert_eq!(m.graph[0].output, ["scan:0", "scan:1"]);
}

fn single(
    op_type: &str,
    opset: i64,
    inputs: &[&str],
    attrs: Vec<crate::proto::onnx::AttributeProto>,
) -> OpDef {
    single_with(op_type, opset, inputs, attrs, true)
}

/// [`single`], with GE's plugins applied unless `onnx_types`.
fn single_with(
    op_type: &str,
    opset: i64,
    inputs: &[&str],
    attrs: Vec<crate::proto::onnx::AttributeProto>,
    onnx_types: bool,
) -> OpDef {
    let mut b = OnnxBuilder::new("g")
        .opset("", opset)
        .input("x", F32, &[v(2), v(3)]);
    if inputs.contains(&"axes") {
        b = b.initializer(tensor_i64("axes", &[1], &[0]));
    }
    // The opset defaults on the ONNX form: GE's plugins would convert many of these ops.
    let onnx = ImportOptions {
        onnx_types,
        ..Default::default()
    };
    let bytes = b
        .named_node("n", op_type, inputs, &["y"], attrs)
        .output("y", F32, &[])
        .build();
    let m = import(&bytes, &onnx).unwrap_or_else(|e| panic!("import failed: {e}"));
    op(&m.graph[0], "n").clone()
}

#[test]
fn opset_defaults() {
    let s11 = single("Softmax", 11, &["x"], vec![]);
    assert_eq!((ai(&s11, "axis"), ai(&s11, "onnx_opset")), (1, 11));
    assert_eq!(as_(&s11, "original_type"), "ai.onnx::11::Softmax");
    let s13 = single("Softmax", 13, &["x"], vec![]);
    assert_eq!((ai(&s13, "axis"), ai(&s13, "onnx_opset")), (-1, 13));
    assert_eq!(
        ai(
            &single("LogSoftmax", 13, &["x"], vec![attr_i("axis", 0)]),
            "axis"
        ),
        0
    );

    let q11 = single("Squeeze", 11, &["x"], vec![attr_ints("axes", &[0])]);
    assert_eq!((q11.input.len(), aints(&q11, "axes")), (1, vec![0]));
    let q13 = single("Squeeze", 13, &["x", "axes"], vec![]);
    assert_eq!(q13.input, ["x:0", "axes_Initializer_0:0"]);
    assert!(!q13.attr.contains_key("axes"));

    let c6 = single("Clip", 6, &["x"], vec![]);
    assert_eq!((af(&c6, "min"), af(&c6, "max")), (f32::MIN, f32::MAX));
    assert!(!single("Clip", 13, &["x"], vec![]).attr.contains_key("min"));
    let r = single("ReduceSum", 13, &["x"], vec![]);
    assert_eq!((ai(&r, "keepdims"), ai(&r, "noop_with_empty_axes")), (1, 0));
    let r11 = single("ReduceMean", 11, &["x"], vec![attr_ints("axes", &[1])]);
    assert_eq!(aints(&r11, "axes"), [1]);
    assert!(!r11.attr.contains_key("noop_with_empty_axes"));
    assert_eq!(af(&single("LeakyRelu", 13, &["x"], vec![]), "alpha"), 0.01);
    let am = single("ArgMax", 13, &["x"], vec![]);
    assert_eq!(
        (
            ai(&am, "axis"),
            ai(&am, "keepdims"),
            ai(&am, "select_last_index")
        ),
        (0, 1, 0)
    );
    let lstm = single(
        "LSTM",
        14,
        &["x"],
        vec![attr_s("direction", "bidirectional")],
    );
    match value(&lstm.attr, "activations") {
        Value::List(l) => assert_eq!(l.s.len(), 6),
        v => panic!("{v:?}"),
    }
    // GE's plugins: renames keep ONNX's meaning (and onnx_opset), conversions do not.
    let ge = |op: &str, inputs: &[&str], attrs| single_with(op, 13, inputs, attrs, false);
    let wh = ge("Where", &["x", "x", "x"], vec![]);
    assert_eq!(
        (wh.r#type.as_str(), ai(&wh, "onnx_opset")),
        ("SelectV2", 13)
    );
    assert_eq!(ge("Div", &["x", "x"], vec![]).r#type, "RealDiv");
    let mm = ge("MatMul", &["x", "x"], vec![]);
    assert_eq!(mm.r#type, "BatchMatMulV2");
    assert!(!mm.attr.contains_key("onnx_opset"));
    assert_eq!(as_(&mm, "original_type"), "ai.onnx::13::MatMul");
    // The x input is 2-D: a Conv of it has no 2-D kernel, ONNX's Conv stays.
    assert_eq!(ge("Conv", &["x", "x"], vec![]).r#type, "Conv");
    let snd = single_with(
        "ScatterND",
        16,
        &["x", "x", "x"],
        vec![attr_s("reduction", "add")],
        false,
    );
    assert_eq!(snd.r#type, "ScatterND");
}

#[test]
fn constant_forms_and_typed_fields() {
    let f16 = TensorProto {
        dims: vec![2],
        data_type: Some(F16),
        int32_data: vec![0x3c00, 0xc000],
        ..Default::default()
    };
    let bytes = OnnxBuilder::new("g")
        .input("x", F32, &[])
        .initializer(tensor_bool("flags", &[3], &[true, false, true]))
        .named_node(
            "cf",
            "Constant",
            &[],
            &["a"],
            vec![attr_f("value_float", 2.5)],
        )
        .named_node(
            "ci",
            "Constant",
            &[],
            &["b"],
            vec![attr_ints("value_ints", &[7, -1])],
        )
        .named_node(
            "cs",
            "Constant",
            &[],
            &["c"],
            vec![attr_s("value_string", "hi")],
        )
        .named_node("ch", "Constant", &[], &["d"], vec![attr_t("value", f16)])
        .named_node("id", "Identity", &["x"], &["y"], vec![])
        .output("y", F32, &[])
        .build();
    let m = imp(&bytes);
    let g = &m.graph[0];
    let t = |name: &str| match value(&op(g, name).attr, "value") {
        Value::T(t) => (
            t.desc.as_ref().unwrap().dtype,
            dims(t.desc.as_ref().unwrap()),
            t.data.to_vec(),
        ),
        v => panic!("{v:?}"),
    };
    assert_eq!(t("cf"), (1, vec![], 2.5f32.to_le_bytes().to_vec()));
    let ints: Vec<u8> = [7i64, -1].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(t("ci"), (8, vec![2], ints));
    let (dt, d, data) = t("cs");
    assert_eq!((dt, d), (13, vec![]));
    assert_eq!(&data[..8], &16i64.to_le_bytes());
    assert_eq!(&data[8..16], &2i64.to_le_bytes());
    assert_eq!(&data[16..], b"hi\0");
    assert_eq!(t("ch"), (2, vec![2], vec![0x00, 0x3c, 0x00, 0xc0]));
    assert_eq!(t("flags_Initializer_0"), (11, vec![3], vec![1, 0, 1]));
    assert_eq!(op(g, "cf").r#type, "Const");
    assert_eq!(op(g, "cf").output_desc[0].dtype, 1);
}

#[test]
fn bad_inputs_are_errors_naming_the_place() {
    let good = cnn();
    match import(&good[..good.len() / 2], &ImportOptions::default()) {
        Err(OmError::Protobuf { message, .. }) => assert_eq!(message, "onnx.ModelProto"),
        other => panic!("{other:?}"),
    }
    let dangling = OnnxBuilder::new("g")
        .input("x", F32, &[])
        .named_node("bad", "Relu", &["nope"], &["y"], vec![])
        .output("y", F32, &[])
        .build();
    let e = err(&dangling);
    assert!(e.contains("\"bad\"") && e.contains("\"nope\""), "{e}");

    let inner = OnnxBuilder::new("b")
        .named_node("deep", "Neg", &["ghost"], &["o"], vec![])
        .output("o", F32, &[])
        .graph();
    let sub = OnnxBuilder::new("g")
        .input("c", BOOL, &[])
        .named_node(
            "iff",
            "If",
            &["c"],
            &["y"],
            vec![
                attr_g("then_branch", inner.clone()),
                attr_g("else_branch", inner),
            ],
        )
        .output("y", F32, &[])
        .build();
    let e = err(&sub);
    assert!(
        e.contains("\"deep\"") && e.contains("\"ghost\"") && e.contains("\"iff\""),
        "{e}"
    );

    let dup = OnnxBuilder::new("g")
        .input("x", F32, &[])
        .named_node("one", "Relu", &["x"], &["y"], vec![])
        .named_node("two", "Relu", &["x"], &["y"], vec![])
        .output("y", F32, &[])
        .build();
    let e = err(&dup);
    assert!(e.contains("\"two\"") && e.contains("defined twice"), "{e}");

    let mut ext = tensor_f32("w", &[1], &[]);
    ext.data_location = Some(1);
    let external = OnnxBuilder::new("g")
        .input("x", F32, &[])
        .initializer(ext)
        .node("Add", &["x", "w"], &["y"], vec![])
        .output("y", F32, &[])
        .build();
    assert!(matches!(
        import(&external, &ImportOptions::default()),
        Err(OmError::Unsupported { .. })
    ));

    let short = OnnxBuilder::new("g")
        .input("x", F32, &[])
        .initializer(tensor_f32("w", &[4], &[1.0]))
        .node("Add", &["x", "w"], &["y"], vec![])
        .output("y", F32, &[])
        .build();
    let e = err(&short);
    assert!(e.contains("\"w\"") && e.contains("float_data"), "{e}");

    let sparse = OnnxBuilder::new("g")
        .named_node(
            "k",
            "Constant",
            &[],
            &["y"],
            vec![crate::proto::onnx::AttributeProto {
                name: Some("sparse_value".into()),
                ..Default::default()
            }],
        )
        .output("y", F32, &[])
        .build();
    assert!(err(&sparse).contains("sparse"));
}

#[test]
fn other_domains_are_kept_and_need_an_opset() {
    let node = NodeProto {
        name: Some("custom".into()),
        op_type: Some("FooBar".into()),
        domain: Some("com.example".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        ..Default::default()
    };
    let b = OnnxBuilder::new("g")
        .input("x", F32, &[])
        .raw_node(node)
        .output("y", F32, &[]);
    let e = err(&b.clone().build());
    assert!(e.contains("com.example") && e.contains("\"custom\""), "{e}");
    let m = imp(&b.opset("", 13).opset("com.example", 2).build());
    let o = op(&m.graph[0], "custom");
    assert_eq!(
        (o.r#type.as_str(), as_(o, "original_type")),
        ("FooBar", "com.example::2::FooBar".to_string())
    );
}

#[test]
fn output_is_deterministic_and_names_unique() {
    let a = imp(&nested_if()).encode_to_vec();
    let b = imp(&nested_if()).encode_to_vec();
    assert_eq!(a, b);
    // A node named like a graph input gets a suffix instead of a clash.
    let m = imp(&OnnxBuilder::new("g")
        .input("x", F32, &[])
        .named_node("x", "Relu", &["x"], &["y"], vec![])
        .output("y", F32, &[])
        .build());
    assert_eq!(m.graph[0].op[1].name, "x_1");
    assert_eq!(m.graph[0].op[1].input, ["x:0"]);
    let mut b = OnnxBuilder::new("g").input("x", F32, &[]);
    let outs: Vec<String> = (0..4).map(|i| format!("o{i}")).collect();
    for o in &outs {
        b = b.named_node("a", "Relu", &["x"], &[o], vec![]);
    }
    let b = b.named_node("a_1", "Relu", &["x"], &["o_last"], vec![]);
    let m = imp(&b.output("o_last", F32, &[]).build());
    let names: Vec<&str> = m.graph[0].op.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        ["x", "a", "a_1", "a_2", "a_3", "a_1_1", "Node_Output"]
    );
}

#[test]
fn chain_model_imports() {
    let m = imp(&chain_model(10_000));
    let g = &m.graph[0];
    assert_eq!(g.op.len(), 1 + 2 + 10_000 + 1);
    assert_eq!(op(g, "relu1").input, ["add0:0"]);
    assert_eq!(g.output, ["add9999:0"]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = import(&bytes, &ImportOptions::default());
    }

    #[test]
    fn mutated_models_never_panic(cut in 0usize..4096, flip in 0usize..4096, bit in 0u8..8) {
        let mut bytes = nested_if();
        let n = bytes.len();
        bytes[flip % n] ^= 1 << bit;
        bytes.truncate(cut % (n + 1));
        let _ = import(&bytes, &ImportOptions::default());
    }
}

#[test]
fn scan8_body_inputs_skip_sequence_lens() {
    let body = OnnxBuilder::new("b")
        .input("st", F32, &[v(2)])
        .input("xe", F32, &[v(2)])
        .node("Add", &["st", "xe"], &["st2"], vec![])
        .output("st2", F32, &[v(2)])
        .graph();
    let bytes = OnnxBuilder::new("g")
        .opset("", 8)
        .input("init", F32, &[v(1), v(2)])
        .input("xs", F32, &[v(1), v(3), v(2)])
        .named_node(
            "scan",
            "Scan",
            &["", "init", "xs"],
            &["fin"],
            vec![attr_g("body", body), attr_i("num_scan_inputs", 1)],
        )
        .output("fin", F32, &[v(1), v(2)])
        .build();
    let m = imp(&bytes);
    assert_eq!(op(&m.graph[0], "scan").input, ["", "init:0", "xs:0"]);
    let b = graph(&m, "scan_0_body");
    assert_eq!(ai(op(b, "scan_0_body/st"), PARENT_NODE_INDEX), 1);
    assert_eq!(ai(op(b, "scan_0_body/xe"), PARENT_NODE_INDEX), 2);
}

/// A plugin that builds a subgraph (Gemm with alpha and beta) leaves GE's ops wired as
/// GE inlines them: the MatMulV2 renamed `<node>_MatMulV2`, the scaled product and bias
/// added by the op that keeps the node's name, so the graph's consumers are unchanged.
/// A Cast before (Clip at opset 9) feeds the mapped op in place of the node's input.
#[test]
fn subgraph_plugins_wire_their_ops() {
    let bytes = OnnxBuilder::new("g")
        .opset("", 13)
        .input("a", F32, &[v(2), v(3)])
        .input("b", F32, &[v(3), v(4)])
        .input("c", F32, &[v(4)])
        .named_node(
            "gemm",
            "Gemm",
            &["a", "b", "c"],
            &["y"],
            vec![attr_f("alpha", 0.5), attr_f("beta", 2.0)],
        )
        .named_node("relu", "Relu", &["y"], &["z"], vec![])
        .output("z", F32, &[])
        .build();
    let m = imp(&bytes);
    let g = &m.graph[0];
    let mm = op(g, "gemm_MatMulV2");
    assert_eq!(mm.r#type, "MatMulV2");
    assert_eq!(mm.input, ["a:0", "b:0"]);
    let muls = op(g, "gemm_Muls");
    assert_eq!(
        (muls.r#type.as_str(), &muls.input[..]),
        ("Muls", &["gemm_MatMulV2:0".to_string()][..])
    );
    assert_eq!(af(muls, "value"), 0.5);
    assert_eq!(op(g, "gemm_Muls_C").input, ["c:0"]);
    let add = op(g, "gemm");
    assert_eq!(add.r#type, "Add");
    assert_eq!(add.input, ["gemm_Muls:0", "gemm_Muls_C:0"]);
    assert_eq!(op(g, "relu").input, ["gemm:0"]);
    // Every op comes after the ops it reads.
    let at = |n: &str| g.op.iter().position(|o| o.name == n).unwrap();
    assert!(at("gemm_MatMulV2") < at("gemm_Muls") && at("gemm_Muls_C") < at("gemm"));
    assert!(at("gemm") < at("relu"));

    let bytes = OnnxBuilder::new("g")
        .opset("", 9)
        .input("x", F32, &[v(4)])
        .named_node("clip", "Clip", &["x"], &["y"], vec![attr_f("max", 1.0)])
        .output("y", F32, &[])
        .build();
    let m = imp(&bytes);
    let g = &m.graph[0];
    let cast = op(g, "clip_Cast");
    assert_eq!(
        (cast.r#type.as_str(), &cast.input[..]),
        ("Cast", &["x:0".to_string()][..])
    );
    let clip = op(g, "clip");
    assert_eq!(clip.r#type, "ClipByValue");
    assert_eq!(clip.input, ["clip_Cast:0", "clip_min:0", "clip_max:0"]);
    assert_eq!(const_f32(op(g, "clip_max")).1, [1.0]);
}

/// A plugin whose node outputs come from several ops (LayerNormalization with Mean and
/// InvStdDev read): LayerNorm keeps the node's name and gives Y; Mean and InvStdDev are
/// the Casts after it, which their readers and the graph's outputs now name.
#[test]
fn routed_plugin_outputs_rewire_their_readers() {
    let bytes = OnnxBuilder::new("g")
        .opset("", 17)
        .input("x", F32, &[v(2), v(3)])
        .input("s", F32, &[v(3)])
        .named_node(
            "ln",
            "LayerNormalization",
            &["x", "s"],
            &["y", "mean", "inv"],
            vec![attr_f("epsilon", 0.25)],
        )
        .named_node("relu", "Relu", &["inv"], &["z"], vec![])
        .output("y", F32, &[])
        .output("mean", F32, &[])
        .output("z", F32, &[])
        .build();
    let m = imp(&bytes);
    let g = &m.graph[0];
    let ln = op(g, "ln");
    assert_eq!(ln.r#type, "LayerNorm");
    assert_eq!(ln.output_desc.len(), 3);
    let adds = op(g, "ln_Adds");
    assert_eq!(
        (adds.r#type.as_str(), &adds.input[..]),
        ("Adds", &["ln:2".to_string()][..])
    );
    assert_eq!(af(adds, "value"), 0.25);
    assert_eq!(op(g, "ln_Rsqrt").input, ["ln_Adds:0"]);
    assert_eq!(op(g, "ln_cast1").input, ["ln_Rsqrt:0"]);
    assert_eq!(op(g, "ln_cast2").input, ["ln:1"]);
    assert_eq!(op(g, "relu").input, ["ln_cast1:0"]);
    let at = |n: &str| g.op.iter().position(|o| o.name == n).unwrap();
    assert!(at("ln") < at("ln_Adds") && at("ln_cast1") < at("relu"));
    assert_eq!(g.output, ["ln:0", "ln_cast2:0", "relu:0"]);
}

/// An initializer's raw bytes pass into the GE graph's tensor by reference, not copied:
/// the decoded model and the graph made of it hold a weight once between them.
#[test]
fn raw_data_passes_into_the_tensor_without_a_copy() {
    let raw = bytes::Bytes::from(1.5f32.to_le_bytes().repeat(3));
    let t = TensorProto {
        name: Some("w".into()),
        dims: vec![3],
        data_type: Some(F32),
        raw_data: Some(raw.clone()),
        ..Default::default()
    };
    let def = super::tensor::tensor_def(&t, &|| crate::om::Place::new("w")).expect("converts");
    assert_eq!(def.data.as_ptr(), raw.as_ptr(), "shared, not copied");
    assert_eq!(def.data, raw);
    assert_eq!(
        def.desc.expect("a descriptor").shape.expect("a shape").dim,
        vec![3]
    );
}
