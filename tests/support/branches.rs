//! What the tests of models with `If` branches share: the branch selector `ReduceSum(x)
//! > 0` over an input `x [1, 4]`, lowering for an executor, and that input.

use rt2::exec::ExecuteGraph;
use rt2::exec::runtime::ExecutorType;
use rt2::lower::{LowerOptions, lower};
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::{OnnxBuilder, attr_g, attr_i, attr_t, tensor_f32};
use rt2::ops::{DType, HostTensor};
use rt2::proto::onnx::GraphProto;

/// `b` plus the node `name`: `out = ReduceSum(x) > 0 ? then : otherwise`.
pub fn if_positive_sum(
    b: OnnxBuilder,
    name: &str,
    out: &str,
    then: GraphProto,
    otherwise: GraphProto,
) -> OnnxBuilder {
    b.node(
        "Constant",
        &[],
        &["zero"],
        vec![attr_t("value", tensor_f32("zero", &[], &[0.0]))],
    )
    .named_node(
        "sum",
        "ReduceSum",
        &["x"],
        &["s"],
        vec![attr_i("keepdims", 0)],
    )
    .named_node("gt", "Greater", &["s", "zero"], &["cond"], vec![])
    .named_node(
        name,
        "If",
        &["cond"],
        &[out],
        vec![
            attr_g("then_branch", then),
            attr_g("else_branch", otherwise),
        ],
    )
}

/// `bytes` lowered for `executor` (topo-mt's graphs carry its passes).
pub fn lowered(bytes: &[u8], executor: ExecutorType) -> ExecuteGraph {
    let mut file = read(bytes, &ReadOptions::default()).expect("imports");
    let cg = file.models.swap_remove(0).model;
    let options = LowerOptions {
        multi_thread: executor == ExecutorType::TopologicalMultiThread,
        ..LowerOptions::default()
    };
    lower(&cg, &options).expect("lowers")
}

/// `x` as a float32 `[1, 4]` input.
pub fn input(x: [f32; 4]) -> HostTensor {
    HostTensor {
        dtype: DType::F32,
        shape: vec![1, 4],
        data: x
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>()
            .into(),
    }
}

/// A float32 tensor's values.
pub fn values(t: &HostTensor) -> Vec<f32> {
    t.data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("four bytes")))
        .collect()
}
