//! What the families' unit tests share: small constructors, the one driver of an op's
//! inference and the one driver of its host compute function.

use super::{Attr, Attrs, DType, HostTensor, InferCtx, OpError, OpRegistry, Tensor, TensorMeta};

/// A float16 tensor of `v`, each value rounded once.
pub(crate) fn f16_tensor(shape: &[usize], v: &[f32]) -> Tensor {
    let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f32(x)).collect();
    Tensor::from_vec(shape, &h)
}

/// A float16 tensor's values, widened to f32.
pub(crate) fn f16_values(t: &Tensor) -> Vec<f32> {
    t.slice::<half::f16>()
        .expect("a float16 tensor")
        .iter()
        .map(|v| v.to_f32())
        .collect()
}

/// A 1-D int64 host tensor, for tests.
pub(crate) fn i64s(v: &[i64]) -> HostTensor {
    HostTensor {
        dtype: DType::I64,
        shape: vec![v.len() as i64],
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// `n` seeded values in [-1, 1), spread over 2003 levels: the kernels' test inputs and
/// weights (`seed` tells tensors apart).
pub(crate) fn seeded(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + seed * 104729) % 2003) as f32 / 1001.5 - 1.0)
        .collect()
}

/// Attributes from `(name, value)` pairs, for tests.
pub(crate) fn test_attrs(attrs: &[(&str, Attr)]) -> Attrs {
    attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// Asserts `got` is elementwise within 1e-5 of `want`, relative to `|want|` or absolute
/// below 1, for compute function tests.
pub(crate) fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

/// Asserts every element of `got` is within `bound` times `want`'s largest magnitude of
/// `want`'s: for results whose rounding scales with the terms summed, not with each
/// result (Winograd's F(4x4, 3x3), whose transforms scale by up to 8 and 1/24).
pub(crate) fn assert_close_to_scale(got: &[f32], want: &[f32], bound: f32) {
    assert_eq!(got.len(), want.len());
    let largest = want.iter().fold(0f32, |a, v| a.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= bound * largest,
            "element {i}: got {g}, want {w}: beyond {bound:e} of {largest:e}"
        );
    }
}

/// Runs `op`'s inference on `inputs` with the given known values and attributes: the one
/// driver of the families' unit tests.
pub(crate) fn infer_for_test(
    op: &str,
    inputs: &[TensorMeta],
    values: &[Option<&HostTensor>],
    attrs: &[(&str, Attr)],
    outputs: usize,
) -> Result<Vec<TensorMeta>, OpError> {
    let reg = OpRegistry::new();
    let spec = reg.get(op).unwrap_or_else(|| panic!("{op} is registered"));
    let attrs = test_attrs(attrs);
    let mut values = values.to_vec();
    values.resize(inputs.len(), None);
    spec.infer_shapes(&InferCtx {
        op,
        inputs,
        values: &values,
        attrs: &attrs,
        outputs,
    })
}

/// The first output of `op`'s inference: [`infer_for_test`] for single-output ops.
pub(crate) fn infer1(
    op: &str,
    inputs: &[TensorMeta],
    values: &[Option<&HostTensor>],
    attrs: &[(&str, Attr)],
) -> Result<TensorMeta, OpError> {
    Ok(infer_for_test(op, inputs, values, attrs, 1)?.remove(0))
}

/// Runs `op` on the host with `attrs` and `inputs`, asking for `outputs` results: the one
/// driver of the families' compute function tests.
pub(crate) fn try_run(
    op: &str,
    attrs: &[(&str, Attr)],
    inputs: &[Tensor],
    outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    OpRegistry::new().run_on_host(op, &test_attrs(attrs), inputs, outputs)
}

/// Runs a node of `op` as lowering runs a GE graph's node (one without `onnx_opset`), every
/// input a constant whose value is known: the type's GE-contract hook, where it has one,
/// says which op runs on which inputs. `Err` is the hook's refusal or the op's error.
pub(crate) fn try_run_ge(
    op: &'static str,
    attrs: &[(&str, Attr)],
    inputs: &[Tensor],
    outputs: usize,
) -> Result<Vec<Tensor>, String> {
    let reg = OpRegistry::new();
    let spec = *reg.get(op).unwrap_or_else(|| panic!("{op} is registered"));
    let attrs = test_attrs(attrs);
    let metas: Vec<TensorMeta> = inputs.iter().map(TensorMeta::of).collect();
    let hosts: Vec<HostTensor> = inputs.iter().map(Tensor::to_host).collect();
    let values: Vec<Option<&HostTensor>> = hosts.iter().map(Some).collect();
    let ctx = InferCtx {
        op,
        inputs: &metas,
        values: &values,
        attrs: &attrs,
        outputs,
    };
    let (target, attrs, range) = match spec.ge_contract {
        Some(hook) => hook(&ctx)?.resolve(&reg, spec, inputs.len())?,
        None => (spec, attrs, 0..inputs.len()),
    };
    reg.run_on_host(target.name, &attrs, &inputs[range], outputs)
        .map_err(|e| e.to_string())
}

/// [`try_run`] for a case that must succeed: panics with the op's name and the error.
pub(crate) fn run(
    op: &str,
    attrs: &[(&str, Attr)],
    inputs: &[Tensor],
    outputs: usize,
) -> Vec<Tensor> {
    try_run(op, attrs, inputs, outputs).unwrap_or_else(|e| panic!("{op}: {e}"))
}

/// The single output of a one-output `op`.
pub(crate) fn run1(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> Tensor {
    run(op, attrs, inputs, 1).remove(0)
}

/// Every output of `op` as `f32` values.
pub(crate) fn run_f32s(
    op: &str,
    attrs: &[(&str, Attr)],
    inputs: &[Tensor],
    outputs: usize,
) -> Vec<Vec<f32>> {
    run(op, attrs, inputs, outputs)
        .iter()
        .map(|t| t.slice::<f32>().unwrap().to_vec())
        .collect()
}

/// The single output of a one-output `op` as `f32` values.
pub(crate) fn run_f32(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> Vec<f32> {
    run_f32s(op, attrs, inputs, 1).remove(0)
}

/// The single output of a one-output `op`: its shape and its `f32` values.
pub(crate) fn run_f32_with_shape(
    op: &str,
    attrs: &[(&str, Attr)],
    inputs: &[Tensor],
) -> (Vec<usize>, Vec<f32>) {
    let out = run1(op, attrs, inputs);
    let values = out.slice::<f32>().unwrap().to_vec();
    (out.shape, values)
}
