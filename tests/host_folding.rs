//! Ops whose inputs are all constants are computed at lowering by the op library itself,
//! whatever their type: the weight plumbing exporters write (a weight sliced, transposed
//! and unsqueezed before the layer that reads it), at the top level and inside the
//! branches of an `If` that captures the weight from an enclosing graph, as PyTorch's
//! exports of LSTM cells inside a sample-rate `If` do (Silero VAD). The folded values
//! must be the ones the device would have computed.

use rt2::exec::KernelGraph;
use rt2::exec::runtime::ExecutorType;
use rt2::om::onnx::builder::{Dim, OnnxBuilder, attr_g, attr_ints, attr_t};
use rt2::om::onnx::builder::{tensor_f32, tensor_i64};

#[path = "support/branches.rs"]
mod branches;
#[path = "support/execute.rs"]
mod support;

use branches::{if_positive_sum, input, lowered, values};

const F32: i32 = 1;

/// W, `[8, 4]`: 0.5, 1.5, ...
fn weight() -> Vec<f32> {
    (0..32).map(|i| i as f32 + 0.5).collect()
}

/// `x [1, 4]` plus `Unsqueeze(Transpose(W[2..6]))` (`[1, 4, 4]`), the weight's ops named
/// `w_slice`, `w_t` and `w_unsq`, over W defined where `nested` says: at the top level,
/// or in an `If`'s branch and read by an `If` inside it, both on `ReduceSum(x) > 0`
/// (else `x` expanded).
fn model(nested: bool) -> Vec<u8> {
    let w = tensor_f32("w", &[8, 4], &weight());
    let plumbing = |b: OnnxBuilder, out: &str| {
        b.node(
            "Constant",
            &[],
            &["s0"],
            vec![attr_t("value", tensor_i64("s0", &[1], &[2]))],
        )
        .node(
            "Constant",
            &[],
            &["e0"],
            vec![attr_t("value", tensor_i64("e0", &[1], &[6]))],
        )
        .node(
            "Constant",
            &[],
            &["a0"],
            vec![attr_t("value", tensor_i64("a0", &[1], &[0]))],
        )
        .named_node(
            "w_slice",
            "Slice",
            &["wv", "s0", "e0", "a0"],
            &["ws"],
            vec![],
        )
        .named_node(
            "w_t",
            "Transpose",
            &["ws"],
            &["wt"],
            vec![attr_ints("perm", &[1, 0])],
        )
        .named_node("w_unsq", "Unsqueeze", &["wt", "a0"], &["wu"], vec![])
        .named_node("w_add", "Add", &["wu", "x"], &[out], vec![])
    };
    let out_dims = [Dim::Value(1), Dim::Value(4), Dim::Value(4)];
    let b = OnnxBuilder::new("g")
        .opset("", 17)
        .input("x", F32, &[Dim::Value(1), Dim::Value(4)])
        .output("y", F32, &out_dims);
    let w_const =
        |b: OnnxBuilder| b.node("Constant", &[], &["wv"], vec![attr_t("value", w.clone())]);
    if !nested {
        return plumbing(w_const(b), "y").build();
    }
    let expand = |name: &str, out: &str| {
        OnnxBuilder::new(name)
            .node(
                "Constant",
                &[],
                &["sh"],
                vec![attr_t("value", tensor_i64("sh", &[3], &[1, 4, 4]))],
            )
            .named_node(
                &format!("{name}_expand"),
                "Expand",
                &["x", "sh"],
                &[out],
                vec![],
            )
            .output(out, F32, &out_dims)
            .graph()
    };
    let inner_then = plumbing(OnnxBuilder::new("inner_then"), "y1")
        .output("y1", F32, &out_dims)
        .graph();
    let outer_then = w_const(OnnxBuilder::new("outer_then"))
        .named_node(
            "inner_if",
            "If",
            &["cond"],
            &["yi"],
            vec![
                attr_g("then_branch", inner_then),
                attr_g("else_branch", expand("inner_else", "y2")),
            ],
        )
        .output("yi", F32, &out_dims)
        .graph();
    if_positive_sum(b, "outer_if", "y", outer_then, expand("outer_else", "yo")).build()
}

/// The origins of every launch in `g` and its subgraphs.
fn launched(g: &KernelGraph, out: &mut Vec<String>) {
    for n in &g.nodes {
        if n.kernel.starts_with("Launch")
            && let Some(o) = &n.origin
        {
            out.push(o.node.to_string());
        }
        for sub in &n.subgraphs {
            launched(sub, out);
        }
    }
}

/// `y[0][i][j] = W[2 + j][i] + x[j]`.
fn want(x: [f32; 4]) -> Vec<f32> {
    let w = weight();
    (0..4)
        .flat_map(|i| (0..4).map(move |j| (i, j)))
        .map(|(i, j)| w[(2 + j) * 4 + i] + x[j])
        .collect()
}

#[test]
fn weight_plumbing_folds_at_the_top_level_and_in_nested_branches() {
    for nested in [false, true] {
        for executor in ExecutorType::ALL {
            let eg = lowered(&model(nested), executor);
            let what = format!("nested {nested}, {}", executor.name());
            let mut names = Vec::new();
            for g in [&eg.init, &eg.main, &eg.deinit] {
                launched(g, &mut names);
            }
            for op in ["w_slice", "w_t", "w_unsq"] {
                assert!(
                    !names.iter().any(|n| n.ends_with(op)),
                    "{what}: {op} is launched: {names:?}"
                );
            }
            assert!(
                names.iter().any(|n| n.ends_with("w_add")),
                "{what}: {names:?}"
            );
            let x = [1.0, -2.0, 3.0, 4.0];
            let out = support::execute(&eg, executor, &input(x));
            assert_eq!(values(&out[0]), want(x), "{what}");
            if nested {
                // The else branches: x, expanded.
                let x = [-1.0, -2.0, 0.5, 0.25];
                let out = support::execute(&eg, executor, &input(x));
                let expanded: Vec<f32> = (0..4).flat_map(|_| x).collect();
                assert_eq!(values(&out[0]), expanded, "{what}");
            }
        }
    }
}
