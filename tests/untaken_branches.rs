//! A model with static input shapes whose `If` has a branch those shapes cannot run (as
//! Silero VAD's 8 kHz branch cannot take 16 kHz frames) lowers: the branch that fails
//! shape inference at lowering is lowered again with its inputs' dims left to run time,
//! where it fails only if it is taken; the other branch stays static.

use rt2::exec::runtime::ExecutorType;
use rt2::exec::{ExecuteGraph, KernelGraph};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::onnx::builder::{Dim, OnnxBuilder, attr_t, tensor_f32};

#[path = "support/branches.rs"]
mod branches;
#[path = "support/execute.rs"]
mod support;

use branches::{if_positive_sum, input, lowered, values};

const F32: i32 = 1;

/// `x [1, 4]`; `y = ReduceSum(x) > 0 ? Relu(x) : MatMul(x, W)` with W `[3, 2]`, which no
/// `[1, 4]` can multiply.
fn model() -> Vec<u8> {
    let then = OnnxBuilder::new("then")
        .named_node("relu", "Relu", &["x"], &["y1"], vec![])
        .output("y1", F32, &[Dim::Value(1), Dim::Value(4)])
        .graph();
    let w = tensor_f32("w", &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let otherwise = OnnxBuilder::new("else")
        .node("Constant", &[], &["w"], vec![attr_t("value", w)])
        .named_node("matmul", "MatMul", &["x", "w"], &["y2"], vec![])
        .output("y2", F32, &[Dim::Param("r".into()), Dim::Param("c".into())])
        .graph();
    let b = OnnxBuilder::new("g")
        .opset("", 17)
        .input("x", F32, &[Dim::Value(1), Dim::Value(4)])
        .output("y", F32, &[Dim::Param("r".into()), Dim::Param("c".into())]);
    if_positive_sum(b, "if", "y", then, otherwise).build()
}

/// The kernel types of `g` and its subgraphs.
fn kernels(g: &KernelGraph, out: &mut Vec<String>) {
    for n in &g.nodes {
        out.push(n.kernel.to_string());
        for sub in &n.subgraphs {
            kernels(sub, out);
        }
    }
}

/// The `If` owner's two branches.
fn branch_graphs(eg: &ExecuteGraph) -> [&KernelGraph; 2] {
    let owner = eg
        .main
        .nodes
        .iter()
        .find(|n| n.kernel == "If")
        .expect("an If owner in Main");
    [&owner.subgraphs[0], &owner.subgraphs[1]]
}

#[test]
fn the_branch_shapes_cannot_run_is_left_to_run_time() {
    for executor in ExecutorType::ALL {
        let what = executor.name();
        let eg = lowered(&model(), executor);
        let [then, otherwise] = branch_graphs(&eg);
        let (mut t, mut e) = (Vec::new(), Vec::new());
        kernels(then, &mut t);
        kernels(otherwise, &mut e);
        assert!(
            !t.iter().any(|k| k == "InferShape"),
            "{what}: the taken branch is static: {t:?}"
        );
        assert!(
            e.iter().any(|k| k == "InferShape"),
            "{what}: the other infers at run time: {e:?}"
        );
        let out = support::execute(&eg, executor, &input([1.0, -2.0, 3.0, 4.0]));
        assert_eq!(out[0].shape, vec![1, 4], "{what}");
        assert_eq!(values(&out[0]), [1.0, 0.0, 3.0, 4.0], "{what}");

        // Taken, the branch fails as its MatMul's inference says.
        let device = Device::new(DeviceConfig::default());
        let mut ex = support::loaded(&eg, &device, executor);
        let mut out = Vec::new();
        let x = input([-1.0, -2.0, 3.0, -4.0]);
        let err = ex
            .execute_sync(&[&x], &mut out)
            .expect_err("the else branch cannot run")
            .to_string();
        assert!(err.contains("matmul"), "{what}: {err}");
    }
}
