//! Graph boundaries: `Data`, `InnerData`, `Const`, `NetOutput`, `InnerNetOutput`.
//!
//! None of them does work at run time: the binder writes `Data` and `InnerData` outputs
//! before a run and reads the output node's inputs after it; a `Const`'s value is created
//! at load. Their run functions exist for the registry's sake and do nothing.

use crate::exec::{KernelClass, KernelNode};
use crate::ops::Attr;

use super::super::context::{KernelContext, KernelResult};
use super::super::error::LoadError;
use super::super::registry::{KernelInfo, KernelRegistry, Role};
use super::super::value::Value;

fn nothing(_: &mut KernelContext<'_>) -> KernelResult {
    Ok(())
}

/// A `Const` holds a host tensor (`value`) or a shape (`shape`).
fn const_outputs(node: &KernelNode, out: &mut [Value]) -> Result<(), LoadError> {
    let [slot] = out else {
        return Err(format!("a Const has one output, this one {}", out.len()).into());
    };
    *slot = match (node.attrs.get("value"), node.attrs.get("shape")) {
        (Some(Attr::Tensor(t)), _) => Value::Host(t.clone()),
        (_, Some(Attr::Ints(dims))) => Value::Shape(dims.clone()),
        _ => return Err("a Const needs a tensor \"value\" or an ints \"shape\"".into()),
    };
    Ok(())
}

pub(super) fn register(r: &mut KernelRegistry) {
    let normal = KernelClass::Normal;
    r.register("Data", KernelInfo::new(nothing, normal).role(Role::Input));
    r.register(
        "InnerData",
        KernelInfo::new(nothing, normal).role(Role::Input),
    );
    r.register(
        "Const",
        KernelInfo::new(nothing, normal)
            .role(Role::Const)
            .outputs_creator(const_outputs),
    );
    r.register(
        "NetOutput",
        KernelInfo::new(nothing, normal).role(Role::Output),
    );
    r.register(
        "InnerNetOutput",
        KernelInfo::new(nothing, normal).role(Role::Output),
    );
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ops::{DType, HostTensor};

    /// A Const's value at load is the graph's own bytes, not a copy of them: a model's
    /// weights are held once by the ExecuteGraph and its executors together.
    #[test]
    fn a_const_value_shares_the_graphs_bytes() {
        let bytes = bytes::Bytes::from((0u8..16).collect::<Vec<u8>>());
        let mut node = KernelNode {
            kernel: "Const".into(),
            outputs: 1,
            ..Default::default()
        };
        node.attrs.insert(
            "value".into(),
            Attr::Tensor(Arc::new(HostTensor {
                dtype: DType::F32,
                shape: vec![4],
                data: bytes.clone().into(),
            })),
        );
        let mut out = [Value::None];
        const_outputs(&node, &mut out).expect("a tensor value");
        let Value::Host(t) = &out[0] else {
            panic!("a host value, got {:?}", out[0])
        };
        assert_eq!(t.data.as_ptr(), bytes.as_ptr(), "shared, not copied");
        assert_eq!(t.data, (0u8..16).collect::<Vec<u8>>());
        assert_eq!(t.shape, vec![4]);
    }
}
