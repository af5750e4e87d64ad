//! The fused patterns: found in each spelling, refused where a part of them is read
//! elsewhere or a constant is not the formula's, and computing what the unfused graph
//! computes under every executor.

use super::activations;
use crate::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use crate::lower::{LowerOptions, lower};
use crate::npu::device::{Device, DeviceConfig};
use crate::om::file::{ReadOptions, read};
use crate::om::graph::{AttrValue, ComputeModel, ListAttr};
use crate::om::onnx::builder::{F32, OnnxBuilder, tensor_f32};
use crate::ops::{DType, HostTensor};

const N: i64 = 67;

/// A model of x `[2, N]` with scalar constants `consts` and `nodes` (op, inputs, output),
/// whose output is `y`, plus any of `extra_outputs`.
fn model(consts: &[(&str, f32)], nodes: &[(&str, &[&str], &str)], extra: &[&str]) -> ComputeModel {
    model_with(consts, nodes, extra, |b| b)
}

/// [`model`] with more of the builder's (`more`: vector constants, node attributes).
fn model_with(
    consts: &[(&str, f32)],
    nodes: &[(&str, &[&str], &str)],
    extra: &[&str],
    more: impl FnOnce(OnnxBuilder) -> OnnxBuilder,
) -> ComputeModel {
    let mut b = OnnxBuilder::new("m")
        .opset("", 13)
        .input("x", F32, &[2.into(), N.into()])
        .output("y", F32, &[2.into(), N.into()]);
    for o in extra {
        b = b.output(o, F32, &[2.into(), N.into()]);
    }
    for (name, v) in consts {
        b = b.initializer(tensor_f32(name, &[], &[*v]));
    }
    for (op, ins, out) in nodes {
        let attrs = if *op == "ReduceMean" {
            vec![crate::om::onnx::builder::attr_ints("axes", &[-1])]
        } else {
            vec![]
        };
        b = b.named_node(out, op, ins, &[out], attrs);
    }
    more(b).build_model()
}

/// The op types of the model's root graph, constants and data left out.
fn ops(m: &ComputeModel) -> Vec<&str> {
    m.root
        .nodes
        .iter()
        .map(|n| n.op_type.as_str())
        .filter(|t| !matches!(*t, "Const" | "Constant" | "Data" | "NetOutput"))
        .collect()
}

const SQRT2: f32 = std::f32::consts::SQRT_2;

/// PyTorch's `nn.GELU()` at opsets 9-19, on constants r2, one and half.
const TORCH_GELU: [(&str, &[&str], &str); 5] = [
    ("Div", &["x", "r2"], "d"),
    ("Erf", &["d"], "e"),
    ("Add", &["e", "one"], "a"),
    ("Mul", &["x", "a"], "m"),
    ("Mul", &["m", "half"], "y"),
];

/// [`TORCH_GELU`] with its constants, and any of `extra` graph outputs.
fn gelu_with(r2: f32, one: f32, half: f32, extra: &[&str]) -> ComputeModel {
    model(
        &[("r2", r2), ("one", one), ("half", half)],
        &TORCH_GELU,
        extra,
    )
}

fn torch_gelu() -> ComputeModel {
    gelu_with(SQRT2, 1.0, 0.5, &[])
}

#[test]
fn gelu_as_pytorch_writes_it_becomes_one_gelu() {
    let m = torch_gelu();
    let fused = activations(&m);
    assert_eq!(ops(&fused), ["Gelu"]);
    let g = fused
        .root
        .nodes
        .iter()
        .find(|n| n.op_type == "Gelu")
        .unwrap();
    assert_eq!(g.name, "y");
    let x = m.root.nodes.iter().position(|n| n.name == "x").unwrap();
    assert_eq!(g.inputs.len(), 1);
    assert_eq!(g.inputs[0].unwrap().node.index(), x);
    assert_eq!(
        g.attr("approximate"),
        Some(&AttrValue::Str(b"none".to_vec()))
    );
    let Some(AttrValue::List(ListAttr::Str(names))) = g.attr("_datadump_original_op_names") else {
        panic!("no original names: {:?}", g.attrs);
    };
    let names: Vec<&str> = names
        .iter()
        .map(|n| std::str::from_utf8(n).unwrap())
        .collect();
    assert_eq!(names, ["m", "a", "e", "d", "y"]);
}

#[test]
fn every_spelling_of_gelu_fuses() {
    type Spelling<'a> = (
        &'a [(&'a str, f32)],
        &'a [(&'a str, &'a [&'a str], &'a str)],
    );
    let up = f32::from_bits(SQRT2.to_bits() + 1);
    let spellings: [Spelling; 2] = [
        // x * 0.5 first, constants on the left, the division as a product.
        (
            &[
                ("k", std::f32::consts::FRAC_1_SQRT_2),
                ("one", 1.0),
                ("half", 0.5),
            ],
            &[
                ("Mul", &["half", "x"], "h"),
                ("Mul", &["k", "x"], "d"),
                ("Erf", &["d"], "e"),
                ("Add", &["one", "e"], "a"),
                ("Mul", &["a", "h"], "y"),
            ],
        ),
        // (1 + erf) * x, then 0.5 on the left.
        (
            &[("r2", SQRT2), ("one", 1.0), ("half", 0.5)],
            &[
                ("Div", &["x", "r2"], "d"),
                ("Erf", &["d"], "e"),
                ("Add", &["e", "one"], "a"),
                ("Mul", &["a", "x"], "m"),
                ("Mul", &["half", "m"], "y"),
            ],
        ),
    ];
    let models = spellings
        .iter()
        .map(|(consts, nodes)| model(consts, nodes, &[]))
        // √2 one float32 step off, as a constant computed in float32 may be.
        .chain([gelu_with(up, 1.0, 0.5, &[])]);
    for (m, nodes) in models.zip(spellings.iter().map(|s| s.1).chain([&TORCH_GELU[..]])) {
        let fused = activations(&m);
        assert_eq!(
            ops(&fused).iter().filter(|t| **t == "Gelu").count(),
            1,
            "{nodes:?}"
        );
        assert!(!ops(&fused).contains(&"Erf"), "{nodes:?}");
    }
}

#[test]
fn gelu_is_left_alone_where_it_is_not_gelu() {
    let gelu = gelu_with;
    for (m, why) in [
        (gelu(1.5, 1.0, 0.5, &[]), "another divisor"),
        (gelu(SQRT2, 2.0, 0.5, &[]), "2 + erf"),
        (gelu(SQRT2, 1.0, 0.25, &[]), "a quarter"),
        (gelu(SQRT2, 1.0, 0.5, &["e"]), "the Erf is an output too"),
        (
            gelu(SQRT2, 1.0, 0.5, &["m"]),
            "x (1 + erf) is an output too",
        ),
    ] {
        let fused = activations(&m);
        assert!(matches!(fused, std::borrow::Cow::Borrowed(_)), "{why}");
        assert!(ops(&fused).contains(&"Erf"), "{why}");
    }
    // The Erf of another tensor than the one multiplied.
    let m = model(
        &[("r2", SQRT2), ("one", 1.0), ("half", 0.5)],
        &[
            ("Neg", &["x"], "z"),
            ("Div", &["z", "r2"], "d"),
            ("Erf", &["d"], "e"),
            ("Add", &["e", "one"], "a"),
            ("Mul", &["x", "a"], "m"),
            ("Mul", &["m", "half"], "y"),
        ],
        &[],
    );
    assert!(ops(&activations(&m)).contains(&"Erf"));
}

/// GELU's tanh form as JAX writes it (Magika's `ApplyActivation`): `c x` multiplied by x
/// twice, constants on the left.
const JAX_GELU_TANH: [(&str, &[&str], &str); 9] = [
    ("Mul", &["c", "x"], "m"),
    ("Mul", &["x", "m"], "m1"),
    ("Mul", &["x", "m1"], "m2"),
    ("Add", &["x", "m2"], "a"),
    ("Mul", &["k", "a"], "m3"),
    ("Tanh", &["m3"], "t"),
    ("Add", &["one", "t"], "a1"),
    ("Mul", &["half", "a1"], "m4"),
    ("Mul", &["x", "m4"], "y"),
];

/// As PyTorch's exporter writes `nn.GELU(approximate='tanh')` before opset 20: the cube
/// as `x (x x)`, the half applied last.
const TORCH_GELU_TANH: [(&str, &[&str], &str); 9] = [
    ("Mul", &["x", "x"], "sq"),
    ("Mul", &["x", "sq"], "cu"),
    ("Mul", &["c", "cu"], "kc"),
    ("Add", &["x", "kc"], "s"),
    ("Mul", &["k", "s"], "in"),
    ("Tanh", &["in"], "t"),
    ("Add", &["one", "t"], "a"),
    ("Mul", &["x", "a"], "xa"),
    ("Mul", &["half", "xa"], "y"),
];

/// Hugging Face's `gelu_new` traced: `0.5 x` first, the cube as `Pow(x, 3)`, constants
/// on the right.
const HF_GELU_TANH: [(&str, &[&str], &str); 8] = [
    ("Mul", &["half", "x"], "h"),
    ("Pow", &["x", "three"], "p"),
    ("Mul", &["c", "p"], "cp"),
    ("Add", &["x", "cp"], "s"),
    ("Mul", &["s", "k"], "in"),
    ("Tanh", &["in"], "t"),
    ("Add", &["t", "one"], "a"),
    ("Mul", &["h", "a"], "y"),
];

/// A tanh GELU of `nodes` with the constants `c`, `k` and `half`, and any of `extra` as
/// graph outputs.
fn gelu_tanh_with(
    nodes: &[(&str, &[&str], &str)],
    (c, k, half): (f32, f32, f32),
    extra: &[&str],
) -> ComputeModel {
    let consts = [
        ("c", c),
        ("k", k),
        ("one", 1.0),
        ("half", half),
        ("three", 3.0),
    ];
    model(&consts, nodes, extra)
}

/// √(2/π) as the exporters write it.
const K: f32 = 0.797_884_6;

fn gelu_tanh64(v: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * v * (1.0 + (k * (v + 0.044715 * v * v * v)).tanh())
}

#[test]
fn every_spelling_of_gelus_tanh_form_becomes_one_gelu() {
    let x: Vec<f32> = (0..2 * N).map(|i| (i as f32 - N as f32) * 0.11).collect();
    for nodes in [&JAX_GELU_TANH[..], &TORCH_GELU_TANH, &HF_GELU_TANH] {
        let m = gelu_tanh_with(nodes, (0.044_715, K, 0.5), &[]);
        let fused = activations(&m);
        assert_eq!(ops(&fused), ["Gelu"], "{nodes:?}");
        let g = &fused
            .root
            .nodes
            .iter()
            .find(|n| n.op_type == "Gelu")
            .unwrap();
        assert_eq!(g.name, "y");
        assert_eq!(
            g.attr("approximate"),
            Some(&AttrValue::Str(b"tanh".to_vec()))
        );
        let Some(AttrValue::List(ListAttr::Str(names))) = g.attr("_datadump_original_op_names")
        else {
            panic!("no original names: {:?}", g.attrs);
        };
        assert_eq!(names.len(), nodes.len(), "{nodes:?}");
        let first = run(&m, ExecutorType::Sequential, &x);
        for (&v, &y) in x.iter().zip(&first) {
            let want = gelu_tanh64(v as f64);
            assert!(
                (y as f64 - want).abs() <= 3e-5 * want.abs().max(1e-3),
                "{nodes:?} at {v}: {y} vs {want}"
            );
        }
        assert_bits(&m, &EXECUTORS[1..], &x, &[2, N], &first, "tanh GELU");
    }
}

#[test]
fn gelus_tanh_form_is_left_alone_where_it_is_not_that() {
    let jax = |consts, extra| gelu_tanh_with(&JAX_GELU_TANH, consts, extra);
    for (m, why) in [
        (jax((0.04, K, 0.5), &[]), "another cube coefficient"),
        (jax((0.044_715, 0.8, 0.5), &[]), "another scale in the tanh"),
        (jax((0.044_715, K, 0.25), &[]), "a quarter"),
        (
            jax((0.044_715, K, 0.5), &["m2"]),
            "the cube is an output too",
        ),
        (
            jax((0.044_715, K, 0.5), &["t"]),
            "the tanh is an output too",
        ),
    ] {
        let fused = activations(&m);
        assert!(ops(&fused).contains(&"Tanh"), "{why}");
    }
    // x squared, not cubed; the tanh of another tensor than the one multiplied; x to the
    // power 2.
    let mut square = JAX_GELU_TANH;
    square[2] = ("Mul", &["c", "m1"], "m2");
    let mut other = TORCH_GELU_TANH;
    other[3] = ("Add", &["sq", "kc"], "s");
    let mut pow2 = HF_GELU_TANH;
    pow2[1] = ("Pow", &["x", "two"], "p");
    for (nodes, why) in [
        (&square[..], "x squared"),
        (&other[..], "the tanh of x squared"),
        (&pow2[..], "Pow(x, 2)"),
    ] {
        let m = model(
            &[
                ("c", 0.044_715),
                ("k", K),
                ("one", 1.0),
                ("half", 0.5),
                ("two", 2.0),
            ],
            nodes,
            &[],
        );
        assert!(ops(&activations(&m)).contains(&"Tanh"), "{why}");
    }
}

#[test]
fn x_times_its_sigmoid_becomes_swish() {
    let m = model(
        &[],
        &[("Sigmoid", &["x"], "s"), ("Mul", &["s", "x"], "y")],
        &[],
    );
    assert_eq!(ops(&activations(&m)), ["Swish"]);
    let other = model(
        &[],
        &[
            ("Neg", &["x"], "z"),
            ("Sigmoid", &["z"], "s"),
            ("Mul", &["s", "x"], "y"),
        ],
        &[],
    );
    assert_eq!(ops(&activations(&other)), ["Neg", "Sigmoid", "Mul"]);
}

/// `nn.LayerNorm(N)` as PyTorch writes it at opset 13 (`square` "Pow" or "Mul"), with
/// any of `extra` graph outputs.
fn torch_layer_norm(square: &str, extra: &[&str]) -> ComputeModel {
    let sq: (&str, &[&str], &str) = if square == "Pow" {
        ("Pow", &["d", "two"], "q")
    } else {
        ("Mul", &["d", "d"], "q")
    };
    model_with(
        &[("two", 2.0), ("eps", 1e-5)],
        &[
            ("ReduceMean", &["x"], "m"),
            ("Sub", &["x", "m"], "d"),
            sq,
            ("ReduceMean", &["q"], "v"),
            ("Add", &["v", "eps"], "e"),
            ("Sqrt", &["e"], "s"),
            ("Div", &["d", "s"], "r"),
            ("Mul", &["r", "gamma"], "o"),
            ("Add", &["o", "beta"], "y"),
        ],
        extra,
        |b| {
            let g: Vec<f32> = (0..N).map(|i| 1.0 + 0.01 * i as f32).collect();
            let be: Vec<f32> = (0..N).map(|i| 0.5 - 0.02 * i as f32).collect();
            b.initializer(tensor_f32("gamma", &[N], &g))
                .initializer(tensor_f32("beta", &[N], &be))
        },
    )
}

#[test]
fn layer_norm_as_pytorch_writes_it_becomes_one_layer_normalization() {
    for square in ["Pow", "Mul"] {
        let m = torch_layer_norm(square, &[]);
        let fused = activations(&m);
        assert_eq!(ops(&fused), ["LayerNormalization"], "{square}");
        let n = &fused.root.nodes.iter().find(|n| n.name == "y").unwrap();
        assert_eq!(n.inputs.len(), 3);
        assert_eq!(n.attr("epsilon"), Some(&AttrValue::Float(1e-5)));
        assert_eq!(n.attr("axis"), Some(&AttrValue::Int(-1)));
    }
}

#[test]
fn layer_norm_with_a_part_read_elsewhere_is_left_alone() {
    // The centred tensor is an output too: it must be computed.
    assert!(ops(&activations(&torch_layer_norm("Pow", &["d"]))).contains(&"Sub"));
}

fn gelu64(v: f64) -> f64 {
    0.5 * v * (1.0 + crate::ops::elementwise::num::erf(v * std::f64::consts::FRAC_1_SQRT_2))
}

fn run(m: &ComputeModel, executor: ExecutorType, x: &[f32]) -> Vec<f32> {
    run_shaped(m, executor, x, &[2, N])
}

/// `m`'s first output for the input `x` of `shape`.
fn run_shaped(m: &ComputeModel, executor: ExecutorType, x: &[f32], shape: &[i64]) -> Vec<f32> {
    run_lowered(m, LowerOptions::default(), executor, x, shape)
}

/// [`run_shaped`] lowered with `opts` (the multi-thread passes for topo-mt).
fn run_lowered(
    m: &ComputeModel,
    opts: LowerOptions,
    executor: ExecutorType,
    x: &[f32],
    shape: &[i64],
) -> Vec<f32> {
    let eg = lower(
        m,
        &LowerOptions {
            multi_thread: executor == ExecutorType::TopologicalMultiThread,
            ..opts
        },
    )
    .expect("lowers");
    let device = Device::new(DeviceConfig::default());
    let options = ExecutorOptions {
        executor,
        ..ExecutorOptions::default()
    };
    let mut ex = ModelV2Executor::create(&eg, &device, options).expect("creates");
    ex.load().expect("loads");
    let input = HostTensor {
        dtype: DType::F32,
        shape: shape.to_vec(),
        data: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let mut out = Vec::new();
    ex.execute_sync(&[&input], &mut out).expect("runs");
    bytemuck::cast_slice(&out[0].data).to_vec()
}

/// The four executors, `seq` first.
const EXECUTORS: [ExecutorType; 4] = [
    ExecutorType::Sequential,
    ExecutorType::Topological,
    ExecutorType::TopologicalPriority,
    ExecutorType::TopologicalMultiThread,
];

/// Asserts that `m` gives the bits of `want` for the input `x` of `shape` under each of
/// `executors` (`what` names the case in a failure).
fn assert_bits(
    m: &ComputeModel,
    executors: &[ExecutorType],
    x: &[f32],
    shape: &[i64],
    want: &[f32],
    what: &str,
) {
    for &executor in executors {
        let got = run_shaped(m, executor, x, shape);
        assert_eq!(
            bytemuck::cast_slice::<f32, u32>(&got),
            bytemuck::cast_slice::<f32, u32>(want),
            "{what} under {}",
            executor.name()
        );
    }
}

/// The fused models compute GELU, x sigmoid(x) and LayerNorm (within float32's rounding
/// of the f64 formulas) under every executor, with the same bits under each.
#[test]
fn fused_models_compute_the_formulas_under_every_executor() {
    let x: Vec<f32> = (0..2 * N).map(|i| (i as f32 - N as f32) * 0.13).collect();
    let swish = model(
        &[],
        &[("Sigmoid", &["x"], "s"), ("Mul", &["x", "s"], "y")],
        &[],
    );
    let row = |r: usize| -> Vec<f64> {
        let xs: Vec<f64> = x[r * N as usize..][..N as usize]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let mean = xs.iter().sum::<f64>() / N as f64;
        let var = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / N as f64;
        (0..N as usize)
            .map(|i| {
                (xs[i] - mean) / (var + 1e-5f32 as f64).sqrt() * (1.0 + 0.01 * i as f32) as f64
                    + (0.5 - 0.02 * i as f32) as f64
            })
            .collect()
    };
    let ln: Vec<f64> = [row(0), row(1)].concat();
    type Want = Box<dyn Fn(usize, f64) -> f64>;
    let cases: [(ComputeModel, Want); 3] = [
        (torch_gelu(), Box::new(|_, v| gelu64(v))),
        (swish, Box::new(|_, v| v / (1.0 + (-v).exp()))),
        (torch_layer_norm("Pow", &[]), Box::new(move |i, _| ln[i])),
    ];
    for (m, f) in cases {
        assert_eq!(ops(&activations(&m)).len(), 1);
        let first = run(&m, ExecutorType::Sequential, &x);
        for (i, (&v, &y)) in x.iter().zip(&first).enumerate() {
            let want = f(i, v as f64);
            assert!(
                (y as f64 - want).abs() <= 1e-5 * want.abs().max(1e-3),
                "{v}: {y} vs {want}"
            );
        }
        assert_bits(&m, &EXECUTORS[1..], &x, &[2, N], &first, "");
    }
}

/// x `[1, 3, 9, 11]` -> Conv (4 output channels, 3x3, stride 2, pad 1, bias) -> `act`
/// with `attrs` and the constant scalar inputs `bounds` (Clip's), -> y; `conv_out` also
/// makes the convolution's output a graph output.
fn conv_then(
    act: &str,
    attrs: Vec<crate::proto::onnx::AttributeProto>,
    bounds: &[(&str, f32)],
    conv_out: bool,
) -> ComputeModel {
    let mut b = conv_into("c");
    if conv_out {
        b = b.output("c", F32, &[1.into(), 4.into(), 5.into(), 6.into()]);
    }
    let mut inputs = vec!["c"];
    for (name, v) in bounds {
        b = b.initializer(tensor_f32(name, &[], &[*v]));
        inputs.push(name);
    }
    b = b.named_node("act", act, &inputs, &["y"], attrs);
    b.build_model()
}

/// The activations after a convolution fuse into it: the node keeps the activation's
/// name and records both, and a fused model gives the bits of the unfused one (the same
/// model with the convolution's output read too, so that nothing fuses) under every
/// executor.
#[test]
fn activations_after_a_convolution_fuse_into_it_with_the_same_bits() {
    use crate::om::onnx::builder::{attr_f, seeded_f32};
    let x: Vec<f32> = seeded_f32(297, 3, 4.0);
    type Case = (
        &'static str,
        fn() -> Vec<crate::proto::onnx::AttributeProto>,
        &'static [(&'static str, f32)],
    );
    let cases: [Case; 5] = [
        ("Relu", Vec::new, &[]),
        ("LeakyRelu", || vec![attr_f("alpha", 0.1)], &[]),
        ("Clip", Vec::new, &[("lo", -0.5), ("hi", 0.75)]),
        (
            "HardSigmoid",
            || vec![attr_f("alpha", 0.3), attr_f("beta", 0.4)],
            &[],
        ),
        ("HardSwish", Vec::new, &[]),
    ];
    for (act, attrs, bounds) in cases {
        let fused = activations(&conv_then(act, attrs(), bounds, false)).into_owned();
        // The importer reads ONNX's Conv as GE's Conv2D (and Clip as ClipByValue).
        assert_eq!(ops(&fused), ["Conv2D"], "{act}");
        let conv = fused.root.nodes.iter().find(|n| n.op_type == "Conv2D");
        let conv = conv.expect("a Conv2D");
        assert_eq!(conv.name, "act");
        assert_eq!(
            conv.attr("_rt2_fused_activation"),
            Some(&AttrValue::Str(act.as_bytes().to_vec()))
        );
        assert_eq!(
            conv.attr("_datadump_original_op_names"),
            Some(&AttrValue::List(ListAttr::Str(vec![
                b"conv".to_vec(),
                b"act".to_vec()
            ])))
        );
        let apart = conv_then(act, attrs(), bounds, true);
        assert_eq!(ops(&activations(&apart)).len(), 2, "{act}");
        let want = run_shaped(&apart, ExecutorType::Sequential, &x, &[1, 3, 9, 11]);
        assert!(want.iter().any(|&v| v > 0.0) && want.iter().any(|&v| v <= 0.0));
        assert_bits(&fused, &EXECUTORS, &x, &[1, 3, 9, 11], &want, act);
    }
}

/// A Clip whose bound is given at run time, or a convolution read elsewhere, stays
/// apart.
#[test]
fn activations_a_convolution_cannot_apply_are_left_alone() {
    use crate::om::onnx::builder::attr_ints;
    let apart = conv_then("Relu", Vec::new(), &[], true);
    assert_eq!(ops(&activations(&apart)), ["Conv2D", "Relu"]);
    let b = OnnxBuilder::new("m")
        .opset("", 13)
        .input("x", F32, &[1.into(), 1.into(), 4.into(), 4.into()])
        .input("lo", F32, &[])
        .input("hi", F32, &[])
        .output("y", F32, &[1.into(), 1.into(), 4.into(), 4.into()])
        .initializer(tensor_f32("w", &[1, 1, 1, 1], &[2.0]))
        .named_node(
            "conv",
            "Conv",
            &["x", "w"],
            &["c"],
            vec![attr_ints("kernel_shape", &[1, 1])],
        )
        .named_node("act", "Clip", &["c", "lo", "hi"], &["y"], vec![]);
    let m = b.build_model();
    assert_eq!(ops(&activations(&m)), ["Conv2D", "ClipByValue"]);
}

/// How a [`conv_bn`] model differs from the plain one.
#[derive(Clone, Copy, Default)]
struct BnCase {
    /// The convolution has no bias input.
    no_bias: bool,
    /// The convolution's output is a graph output too.
    conv_out: bool,
    /// The normalization's `training_mode` attribute.
    training: bool,
    /// The mean is a graph input, not a constant.
    mean_input: bool,
}

/// x `[1, 3, 9, 11]` -> Conv (4 output channels, 3x3, stride 2, pad 1) ->
/// BatchNormalization (epsilon 1e-3) -> Relu -> y.
fn conv_bn(case: BnCase) -> ComputeModel {
    use crate::om::onnx::builder::{attr_f, attr_i, attr_ints, seeded_f32};
    let shape = [1.into(), 4.into(), 5.into(), 6.into()];
    let mut b = OnnxBuilder::new("m")
        .opset("", 13)
        .input("x", F32, &[1.into(), 3.into(), 9.into(), 11.into()])
        .output("y", F32, &shape)
        .initializer(tensor_f32("w", &[4, 3, 3, 3], &seeded_f32(108, 7, 0.5)))
        .initializer(tensor_f32("scale", &[4], &[1.5, 0.5, -2.0, 1.0]))
        .initializer(tensor_f32("offset", &[4], &[0.1, -0.2, 0.3, 0.0]))
        .initializer(tensor_f32("var", &[4], &[0.8, 2.5, 0.04, 1.0]));
    b = if case.mean_input {
        b.input("mean", F32, &[4.into()])
    } else {
        b.initializer(tensor_f32("mean", &[4], &[0.2, -0.3, 0.05, 0.0]))
    };
    if case.conv_out {
        b = b.output("c", F32, &shape);
    }
    let conv_inputs: &[&str] = if case.no_bias {
        &["x", "w"]
    } else {
        b = b.initializer(tensor_f32("b", &[4], &[0.25, -0.5, 0.0, 1.0]));
        &["x", "w", "b"]
    };
    let mut bn_attrs = vec![attr_f("epsilon", 1e-3)];
    if case.training {
        bn_attrs.push(attr_i("training_mode", 1));
    }
    b.named_node(
        "conv",
        "Conv",
        conv_inputs,
        &["c"],
        vec![
            attr_ints("kernel_shape", &[3, 3]),
            attr_ints("strides", &[2, 2]),
            attr_ints("pads", &[1, 1, 1, 1]),
        ],
    )
    .named_node(
        "bn",
        "BatchNormalization",
        &["c", "scale", "offset", "mean", "var"],
        &["n"],
        bn_attrs,
    )
    .named_node("relu", "Relu", &["n"], &["y"], vec![])
    .build_model()
}

trait BuildModel {
    fn build_model(self) -> ComputeModel;
}

impl BuildModel for OnnxBuilder {
    fn build_model(self) -> ComputeModel {
        read(&self.build(), &ReadOptions::default())
            .expect("reads")
            .root()
            .model
            .clone()
    }
}

/// A normalization after a convolution folds into its filter and bias (with or without
/// a bias of its own), the Relu after it then fuses too, the old constants go, and the
/// result is the unfused model's within float32 rounding, with the same bits under every
/// executor.
#[test]
fn batch_normalization_after_a_convolution_folds_into_it() {
    use crate::om::onnx::builder::seeded_f32;
    let x: Vec<f32> = seeded_f32(297, 3, 4.0);
    let shape = [1, 3, 9, 11];
    for no_bias in [false, true] {
        let case = BnCase {
            no_bias,
            ..BnCase::default()
        };
        let m = conv_bn(case);
        let fused = activations(&m).into_owned();
        assert_eq!(ops(&fused), ["Conv2D"], "no_bias {no_bias}");
        let conv = &fused.root.nodes.iter().find(|n| n.op_type == "Conv2D");
        let conv = conv.expect("a Conv2D");
        assert_eq!(conv.name, "relu");
        assert_eq!(
            conv.attr("_rt2_fused_activation"),
            Some(&AttrValue::Str(b"Relu".to_vec()))
        );
        let consts = fused.root.nodes.iter().filter(|n| n.op_type == "Const");
        let mut consts: Vec<&str> = consts.map(|n| n.name.as_str()).collect();
        consts.sort_unstable();
        assert_eq!(consts, ["bn/folded_bias", "bn/folded_filter"]);

        let apart = conv_bn(BnCase {
            conv_out: true,
            ..case
        });
        assert!(ops(&activations(&apart)).contains(&"BatchNorm"));
        let want = run_shaped(&apart, ExecutorType::Sequential, &x, &shape);
        assert!(want.iter().filter(|&&v| v > 0.0).count() > 20);
        assert!(want.iter().filter(|&&v| v == 0.0).count() > 20);
        let first = run_shaped(&m, ExecutorType::Sequential, &x, &shape);
        for (i, (&g, &w)) in first.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "no_bias {no_bias}, element {i}: {g} vs {w}"
            );
        }
        assert_bits(&m, &EXECUTORS[1..], &x, &shape, &first, "");
    }
}

/// A normalization in training mode, one whose statistics are not constants, or one
/// after a convolution read elsewhere, stays.
#[test]
fn batch_normalizations_that_cannot_fold_stay() {
    for case in [
        BnCase {
            training: true,
            ..BnCase::default()
        },
        BnCase {
            mean_input: true,
            ..BnCase::default()
        },
        BnCase {
            conv_out: true,
            ..BnCase::default()
        },
    ] {
        let m = conv_bn(case);
        let fused = activations(&m);
        let kept = ops(&fused);
        assert!(
            kept.contains(&"Conv2D") && kept.len() == 3,
            "training {}, mean input {}, conv read {}: {kept:?}",
            case.training,
            case.mean_input,
            case.conv_out
        );
    }
}

/// A UNet decoder stage, ConvTranspose -> Concat -> Conv -> BatchNormalization -> Relu,
/// folds and fuses to one convolution: the element type is followed through GE's
/// Conv2DTranspose (whose x is its input 1) and the Concat.
#[test]
fn a_decoder_stage_after_a_transposed_convolution_folds() {
    use crate::om::onnx::builder::{attr_i, attr_ints, seeded_f32};
    let m = OnnxBuilder::new("m")
        .opset("", 13)
        .input("x", F32, &[1.into(), 4.into(), 5.into(), 5.into()])
        .input("skip", F32, &[1.into(), 2.into(), 10.into(), 10.into()])
        .output("y", F32, &[1.into(), 3.into(), 10.into(), 10.into()])
        .initializer(tensor_f32("wt", &[4, 2, 2, 2], &seeded_f32(32, 1, 0.5)))
        .initializer(tensor_f32("w", &[3, 4, 3, 3], &seeded_f32(108, 2, 0.5)))
        .initializer(tensor_f32("scale", &[3], &[1.0, 2.0, 0.5]))
        .initializer(tensor_f32("offset", &[3], &[0.0, 0.1, -0.1]))
        .initializer(tensor_f32("mean", &[3], &[0.0, 0.2, -0.2]))
        .initializer(tensor_f32("var", &[3], &[1.0, 0.5, 2.0]))
        .named_node(
            "up",
            "ConvTranspose",
            &["x", "wt"],
            &["u"],
            vec![
                attr_ints("kernel_shape", &[2, 2]),
                attr_ints("strides", &[2, 2]),
            ],
        )
        .named_node(
            "cat",
            "Concat",
            &["u", "skip"],
            &["c"],
            vec![attr_i("axis", 1)],
        )
        .named_node(
            "conv",
            "Conv",
            &["c", "w"],
            &["v"],
            vec![
                attr_ints("kernel_shape", &[3, 3]),
                attr_ints("pads", &[1, 1, 1, 1]),
            ],
        )
        .named_node(
            "bn",
            "BatchNormalization",
            &["v", "scale", "offset", "mean", "var"],
            &["n"],
            vec![],
        )
        .named_node("relu", "Relu", &["n"], &["y"], vec![])
        .build_model();
    let fused = activations(&m);
    let kept = ops(&fused);
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert_eq!(kept[2], "Conv2D", "{kept:?}");
}

/// Two Linear layers as PyTorch exports them, x `[shape..., 24]` -> MatMul by `w1`
/// `[24, 40]` -> Add `b1` -> MatMul by `w2` `[40, 19]` -> Add (`b2` first) -> y; with
/// `apart`, both products are graph outputs too, so that nothing fuses.
fn linear_layers(shape: &[i64], apart: bool) -> ComputeModel {
    use crate::om::onnx::builder::seeded_f32;
    let dims = |last: i64| -> Vec<crate::om::onnx::builder::Dim> {
        shape.iter().chain([&last]).map(|&d| d.into()).collect()
    };
    let mut b = OnnxBuilder::new("m")
        .opset("", 13)
        .input("x", F32, &dims(24))
        .output("y", F32, &dims(19))
        .initializer(tensor_f32("w1", &[24, 40], &seeded_f32(960, 1, 0.5)))
        .initializer(tensor_f32("b1", &[40], &seeded_f32(40, 2, 4.0)))
        .initializer(tensor_f32("w2", &[40, 19], &seeded_f32(760, 3, 0.5)))
        .initializer(tensor_f32("b2", &[19], &seeded_f32(19, 4, 4.0)));
    if apart {
        b = b.output("p1", F32, &dims(40)).output("p2", F32, &dims(19));
    }
    b = b
        .named_node("mm1", "MatMul", &["x", "w1"], &["p1"], vec![])
        .named_node("add1", "Add", &["p1", "b1"], &["h"], vec![])
        .named_node("mm2", "MatMul", &["h", "w2"], &["p2"], vec![])
        .named_node("add2", "Add", &["b2", "p2"], &["y"], vec![]);
    b.build_model()
}

/// A Linear layer's bias Add fuses into its product (the importer's BatchMatMulV2, which
/// takes a bias), whichever operand of the Add it is, under the Add's name; the fused
/// model gives the bits of the unfused one under every executor, with the weights packed
/// (MatMulPacked adding the bias as it stores) and kept (the product, then the bias),
/// over many rows, one row, and a vector x (ONNX's vector product).
#[test]
fn a_linear_layers_bias_fuses_into_its_product_with_the_same_bits() {
    use crate::om::onnx::builder::seeded_f32;
    let fused = activations(&linear_layers(&[2, 9], false)).into_owned();
    assert_eq!(ops(&fused), ["BatchMatMulV2", "BatchMatMulV2"]);
    let second = fused.root.nodes.iter().find(|n| n.name == "add2");
    let second = second.expect("the second layer under its Add's name");
    assert_eq!(second.inputs.len(), 3);
    assert_eq!(
        second.attr("_datadump_original_op_names"),
        Some(&AttrValue::List(ListAttr::Str(vec![
            b"mm2".to_vec(),
            b"add2".to_vec()
        ])))
    );
    assert_eq!(ops(&activations(&linear_layers(&[2, 9], true))).len(), 4);
    let keep = LowerOptions {
        keep_weight_layout: true,
        ..LowerOptions::default()
    };
    for shape in [&[2, 9][..], &[1, 1], &[]] {
        let n = shape.iter().product::<i64>() as usize * 24;
        let x = seeded_f32(n, 5, 2.0);
        let x_shape: Vec<i64> = shape.iter().copied().chain([24]).collect();
        let (m, apart) = (linear_layers(shape, false), linear_layers(shape, true));
        for opts in [LowerOptions::default(), keep] {
            let want = run_lowered(&apart, opts, ExecutorType::Sequential, &x, &x_shape);
            assert_eq!(want.len(), n / 24 * 19);
            for executor in EXECUTORS {
                let got = run_lowered(&m, opts, executor, &x, &x_shape);
                assert_eq!(
                    bytemuck::cast_slice::<f32, u32>(&got),
                    bytemuck::cast_slice::<f32, u32>(&want),
                    "{shape:?} keep {} under {}",
                    opts.keep_weight_layout,
                    executor.name()
                );
            }
        }
    }
}

/// The lowered fused layer launches MatMulPacked on its bias, and no Add; a bias of
/// another width, a product read elsewhere, or a weight computed at run time stays an
/// Add.
#[test]
fn a_fused_bias_launches_no_add_and_others_stay() {
    let eg = lower(&linear_layers(&[4, 3], false), &LowerOptions::default()).expect("lowers");
    let launched: Vec<&str> = eg
        .main
        .nodes
        .iter()
        .filter(|n| n.kernel == "LaunchKernelWithHandle")
        .filter_map(|n| match n.attrs.get("_op_type") {
            Some(crate::exec::KernelAttr::Str(op)) => Some(op.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(launched, ["MatMulPacked", "MatMulPacked"]);
    // x [3, 8] by a weight that is the graph's second input: no constant to fuse with.
    use crate::om::onnx::builder::seeded_f32;
    let runtime_weight = OnnxBuilder::new("m")
        .opset("", 13)
        .input("x", F32, &[3.into(), 8.into()])
        .input("w", F32, &[8.into(), 16.into()])
        .output("y", F32, &[3.into(), 16.into()])
        .initializer(tensor_f32("b", &[16], &seeded_f32(16, 2, 1.0)))
        .named_node("mm", "MatMul", &["x", "w"], &["p"], vec![])
        .named_node("add", "Add", &["p", "b"], &["y"], vec![]);
    let m = runtime_weight.build_model();
    assert_eq!(ops(&activations(&m)), ["BatchMatMulV2", "Add"]);
    // A bias of one element (a broadcast scalar) is not a row of the width.
    let scalar_bias = OnnxBuilder::new("m")
        .opset("", 13)
        .input("x", F32, &[3.into(), 8.into()])
        .output("y", F32, &[3.into(), 16.into()])
        .initializer(tensor_f32("w", &[8, 16], &seeded_f32(128, 1, 1.0)))
        .initializer(tensor_f32("b", &[1], &[0.5]))
        .named_node("mm", "MatMul", &["x", "w"], &["p"], vec![])
        .named_node("add", "Add", &["p", "b"], &["y"], vec![]);
    let m = scalar_bias.build_model();
    assert_eq!(ops(&activations(&m)), ["BatchMatMulV2", "Add"]);
    // The product's type follows x through ops that keep it (here the importer's
    // UnsqueezeV3 and SqueezeV3, with no descriptors between), so the bias still fuses.
    let through = OnnxBuilder::new("m")
        .opset("", 13)
        .input("x", F32, &[3.into(), 8.into()])
        .output("y", F32, &[3.into(), 16.into()])
        .initializer(tensor_f32("w", &[8, 16], &seeded_f32(128, 1, 1.0)))
        .initializer(tensor_f32("b", &[16], &seeded_f32(16, 2, 1.0)))
        .initializer(crate::om::onnx::builder::tensor_i64("axes", &[1], &[0]))
        .named_node("u", "Unsqueeze", &["x", "axes"], &["xu"], vec![])
        .named_node("s", "Squeeze", &["xu", "axes"], &["xs"], vec![])
        .named_node("mm", "MatMul", &["xs", "w"], &["p"], vec![])
        .named_node("add", "Add", &["p", "b"], &["y"], vec![]);
    let m = through.build_model();
    let fused = ops(&activations(&m)).join(" ");
    assert_eq!(fused, "UnsqueezeV3 SqueezeV3 BatchMatMulV2");
}

/// Softmax over the last axis of `[2, N]`, in f64.
fn softmax64(x: &[f64]) -> Vec<f64> {
    x.chunks(N as usize)
        .flat_map(|row| {
            let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
            row.iter().map(move |v| (v - max).exp() / sum)
        })
        .collect()
}

/// Attention's `Softmax(scores / √d)` becomes one Softmax scaling its input (by 1/c for
/// a division, c for a product in either order), under the Softmax's name with both
/// names recorded, computing the formula under every executor with the same bits under
/// each; a negative or zero factor, a divisor that is the tensor, and a quotient read
/// elsewhere stay apart.
#[test]
fn scaled_scores_fuse_into_their_softmax() {
    let softmax = |op: &'static str, ins: &'static [&'static str], c: f32, extra: &[&str]| {
        model_with(
            &[("c", c)],
            &[(op, ins, "s"), ("Softmax", &["s"], "y")],
            extra,
            |b| b,
        )
    };
    let x: Vec<f32> = (0..2 * N)
        .map(|i| ((i * 37) % 23) as f32 * 0.9 - 9.0)
        .collect();
    let c = 32f32.sqrt();
    for (op, ins, factor) in [
        ("Div", &["x", "c"][..], 1.0 / c as f64),
        ("Mul", &["x", "c"], c as f64),
        ("Mul", &["c", "x"], c as f64),
    ] {
        let m = softmax(op, ins, c, &[]);
        // The importer's Softmax (SoftmaxV2 at opset 13), alone.
        let fused = activations(&m).into_owned();
        assert_eq!(ops(&fused), ops(&m)[1..], "{op} {ins:?}");
        let y = fused.root.nodes.iter().find(|n| n.name == "y").expect("y");
        let scale = factor as f32;
        assert_eq!(
            y.attr(crate::ops::SOFTMAX_SCALE_ATTR),
            Some(&AttrValue::Float(scale))
        );
        assert_eq!(
            y.attr("_datadump_original_op_names"),
            Some(&AttrValue::List(ListAttr::Str(vec![
                b"s".to_vec(),
                b"y".to_vec()
            ])))
        );
        let scaled: Vec<f64> = x.iter().map(|&v| v as f64 * factor).collect();
        let want = softmax64(&scaled);
        let first = run(&m, ExecutorType::Sequential, &x);
        for (i, (&g, &w)) in first.iter().zip(&want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 2e-6 * w.max(1e-3),
                "{op} [{i}]: {g} vs {w}"
            );
        }
        assert_bits(&m, &EXECUTORS[1..], &x, &[2, N], &first, op);
    }
    for (op, ins, c, extra) in [
        ("Mul", &["x", "c"][..], -2.0, &[][..]),
        ("Div", &["x", "c"], 0.0, &[]),
        ("Div", &["c", "x"], 2.0, &[]),
        ("Div", &["x", "c"], 2.0, &["s"]),
    ] {
        let m = softmax(op, ins, c, extra);
        assert_eq!(ops(&m).len(), 2);
        assert_eq!(ops(&activations(&m)), ops(&m), "{op} {ins:?} by {c}");
    }
}

/// Paddle2ONNX's hard_swish, `x * Clip(x + 3, 0, 6) / 6`, with the Mul `mul` (its
/// operands as given) and the last step `last` (`Div` by `six`, or `Mul` by it).
fn paddle_hard_swish(three: f32, six: f32, mul: [&str; 2], last: &str) -> ComputeModel {
    model(
        &[("three", three), ("zero", 0.0), ("six", six)],
        &[
            ("Add", &["x", "three"], "a"),
            ("Clip", &["a", "zero", "six"], "c"),
            ("Mul", &mul, "m"),
            (last, &["m", "six"], "y"),
        ],
        &[],
    )
}

/// The four ops of a written-out HardSwish become one, in each spelling, computing the
/// formula under every executor; with another constant than the formula's they stay.
#[test]
fn hard_swish_written_out_becomes_hard_swish() {
    let x: Vec<f32> = (0..2 * N).map(|i| (i as f32 - N as f32) * 0.11).collect();
    let cases = [
        paddle_hard_swish(3.0, 6.0, ["x", "c"], "Div"),
        paddle_hard_swish(3.0, 6.0, ["c", "x"], "Div"),
    ];
    for m in cases {
        assert_eq!(ops(&activations(&m)), ["HardSwish"]);
        let got = run(&m, ExecutorType::Sequential, &x);
        for (&v, &y) in x.iter().zip(&got) {
            let want = v as f64 * (v as f64 + 3.0).clamp(0.0, 6.0) / 6.0;
            assert!(
                (y as f64 - want).abs() <= 1e-6 * want.abs().max(1.0),
                "{v}: {y} vs {want}"
            );
        }
        assert_bits(&m, &EXECUTORS[1..], &x, &[2, N], &got, "");
    }
    // The last step as a multiplication by 1/6 (its constant named `six` still).
    let by_sixth = paddle_hard_swish(3.0, 1.0 / 6.0, ["x", "c"], "Mul");
    // Its Clip's upper bound is then 1/6, not 6: not the formula.
    assert_eq!(ops(&activations(&by_sixth)).len(), 4);
    let by_sixth = model(
        &[
            ("three", 3.0),
            ("zero", 0.0),
            ("six", 6.0),
            ("sixth", 1.0 / 6.0),
        ],
        &[
            ("Add", &["x", "three"], "a"),
            ("Clip", &["a", "zero", "six"], "c"),
            ("Mul", &["x", "c"], "m"),
            ("Mul", &["sixth", "m"], "y"),
        ],
        &[],
    );
    assert_eq!(ops(&activations(&by_sixth)), ["HardSwish"]);
    for m in [
        paddle_hard_swish(2.0, 6.0, ["x", "c"], "Div"),
        paddle_hard_swish(3.0, 5.0, ["x", "c"], "Div"),
    ] {
        assert_eq!(ops(&activations(&m)).len(), 4);
    }
}

/// x `[1, 3, 9, 11]` -> Conv (4 output channels, 3x3, stride 2, pad 1, bias) -> `out`,
/// the model's output y `[1, 4, 5, 6]` declared, for the caller to finish.
fn conv_into(out: &str) -> OnnxBuilder {
    use crate::om::onnx::builder::{attr_ints, seeded_f32};
    OnnxBuilder::new("m")
        .opset("", 13)
        .input("x", F32, &[1.into(), 3.into(), 9.into(), 11.into()])
        .output("y", F32, &[1.into(), 4.into(), 5.into(), 6.into()])
        .initializer(tensor_f32("w", &[4, 3, 3, 3], &seeded_f32(108, 7, 0.5)))
        .initializer(tensor_f32("b", &[4], &[0.25, -0.5, 0.0, 1.0]))
        .named_node(
            "conv",
            "Conv",
            &["x", "w", "b"],
            &[out],
            vec![
                attr_ints("kernel_shape", &[3, 3]),
                attr_ints("strides", &[2, 2]),
                attr_ints("pads", &[1, 1, 1, 1]),
            ],
        )
}

/// The model of [`hard_swish_written_out_after_a_convolution_fuses_into_it`]: a Conv,
/// then (with `swish`) Paddle's written-out HardSwish of its output.
fn conv_then_hard_swish(swish: bool) -> ComputeModel {
    let mut b = conv_into(if swish { "c" } else { "y" })
        .initializer(tensor_f32("three", &[], &[3.0]))
        .initializer(tensor_f32("zero", &[], &[0.0]))
        .initializer(tensor_f32("six", &[], &[6.0]));
    if swish {
        b = b
            .named_node("add", "Add", &["c", "three"], &["a"], vec![])
            .named_node("clip", "Clip", &["a", "zero", "six"], &["r"], vec![])
            .named_node("mul", "Mul", &["c", "r"], &["m"], vec![])
            .named_node("div", "Div", &["m", "six"], &["y"], vec![]);
    }
    b.build_model()
}

/// A written-out HardSwish after a convolution ends as the convolution applying it, and
/// computes the formula on the convolution's output.
#[test]
fn hard_swish_written_out_after_a_convolution_fuses_into_it() {
    let m = conv_then_hard_swish(true);
    let fused = activations(&m);
    assert_eq!(ops(&fused), ["Conv2D"]);
    let conv = fused.root.nodes.iter().find(|n| n.op_type == "Conv2D");
    assert_eq!(
        conv.expect("a Conv2D").attr("_rt2_fused_activation"),
        Some(&AttrValue::Str(b"HardSwish".to_vec()))
    );
    let x = crate::om::onnx::builder::seeded_f32(297, 3, 4.0);
    let shape = [1, 3, 9, 11];
    let got = run_shaped(&m, ExecutorType::Sequential, &x, &shape);
    let conv = run_shaped(
        &conv_then_hard_swish(false),
        ExecutorType::Sequential,
        &x,
        &shape,
    );
    assert!(conv.iter().any(|&v| v > 3.0) && conv.iter().any(|&v| v < -3.0));
    for (&g, &c) in got.iter().zip(&conv) {
        let want = c as f64 * (c as f64 + 3.0).clamp(0.0, 6.0) / 6.0;
        assert!(
            (g as f64 - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{c}: {g} vs {want}"
        );
    }
    assert_bits(&m, &EXECUTORS[1..], &x, &shape, &got, "");
}
