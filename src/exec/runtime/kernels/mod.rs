//! What each kernel type does, on the emulated device, and the builtin registry of them.
//! One file per family, each with a `register` that adds its kernels to the registry (as
//! tract registers op families) and each owning the state types its kernels keep in their
//! nodes' [`NodeState`](super::state::NodeState)s; this file only assembles them.
//!
//! Every kernel type of `crate::exec::kernel_types` that lowering emits has an implementation
//! here; `Tiling`, `FindTilingFunc`, `TilingParse` and `AllocMemHost` have none yet (no op
//! of the library needs tiling or host outputs), and a graph naming them fails to load,
//! naming the node.

mod boundary;
mod control;
mod launch;
mod memory;
mod resource;
mod tensor;

use std::sync::OnceLock;

use super::registry::KernelRegistry;

pub use launch::ops_without_compute;
pub(crate) use memory::Staging;
pub(crate) use tensor::{host_resize, tensor_bytes};

/// Adds every kernel rt2 implements to `r`.
pub(crate) fn register_all(r: &mut KernelRegistry) {
    boundary::register(r);
    resource::register(r);
    memory::register(r);
    launch::register(r);
    control::register(r);
}

impl KernelRegistry {
    /// Every kernel rt2 implements. Assembled here, above both the registry and the
    /// kernel families, so neither imports the other.
    pub fn builtin() -> &'static KernelRegistry {
        static REG: OnceLock<KernelRegistry> = OnceLock::new();
        REG.get_or_init(|| {
            let mut r = KernelRegistry::default();
            register_all(&mut r);
            r
        })
    }
}
