//! What the families' unit tests share: small constructors and the one driver of an op's
//! inference.

use super::{Attr, Attrs, DType, HostTensor, InferCtx, OpError, OpRegistry, TensorMeta};

/// A 1-D int64 host tensor, for tests.
pub(crate) fn i64s(v: &[i64]) -> HostTensor {
    HostTensor {
        dtype: DType::I64,
        shape: vec![v.len() as i64],
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// Attributes from `(name, value)` pairs, for tests.
pub(crate) fn test_attrs(attrs: &[(&str, Attr)]) -> Attrs {
    attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// Asserts `got` is elementwise within 1e-5 of `want`, relative to `|want|` or absolute
/// below 1, for kernel tests.
pub(crate) fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
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
    (spec.infer)(&InferCtx {
        op,
        inputs,
        values: &values,
        attrs: &attrs,
        outputs,
    })
}
