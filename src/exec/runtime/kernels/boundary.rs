//! Graph boundaries: `Data`, `InnerData`, `Const`, `NetOutput`, `InnerNetOutput`.
//!
//! None of them does work at run time: the binder writes `Data` and `InnerData` outputs
//! before a run and reads the output node's inputs after it; a `Const`'s value is created
//! at load. Their run functions exist for the registry's sake and do nothing.

use std::sync::Arc;

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
        (Some(Attr::Tensor(t)), _) => Value::Host(Arc::new(t.clone())),
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
