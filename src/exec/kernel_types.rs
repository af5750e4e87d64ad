//! The kernel types an ExecuteGraph may name, with the class each is scheduled by.
//!
//! This table is the authority a loaded `.exeg` is checked against (an unknown kernel type
//! is a load error naming the node), and the names are GE's where GE has the kernel
//! (`REGISTER_KERNEL` names in runtime/v2). Kernels rt2 adds are marked so in their
//! description. The run functions join these entries in the kernel registry.

use std::collections::HashMap;
use std::sync::OnceLock;

use foldhash::fast::FixedState;

use crate::exec::graph::KernelClass;

/// One kernel type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelType {
    pub name: &'static str,
    pub class: KernelClass,
    /// The kernel only computes its outputs from its inputs and attributes: no memory,
    /// device or resource state changes. A pure node whose outputs nobody reads can go.
    pub pure: bool,
    /// What the kernel does, one line.
    pub doc: &'static str,
}

const fn k(name: &'static str, class: KernelClass, doc: &'static str) -> KernelType {
    KernelType {
        name,
        class,
        pure: false,
        doc,
    }
}

const fn pure(name: &'static str, class: KernelClass, doc: &'static str) -> KernelType {
    KernelType {
        name,
        class,
        pure: true,
        doc,
    }
}

use KernelClass::{Launch, Memory, Normal};

/// Every kernel type, in groups: graph boundaries, resources, per-op, copies, control flow.
pub const KERNEL_TYPES: &[KernelType] = &[
    // Graph boundaries (GE builtin node types).
    k("Data", Normal, "model input `index` (Main)"),
    pure(
        "InnerData",
        Normal,
        "Init export `index` (Main, DeInit) or owner input `index` (subgraph)",
    ),
    pure("Const", Normal, "a host constant held in attribute `value`"),
    k("NetOutput", Normal, "binds model outputs (Main)"),
    k(
        "InnerNetOutput",
        Normal,
        "exports of Init, or outputs of a subgraph to its owner",
    ),
    // Resources (Init creates, DeInit releases).
    k(
        "SplitRtStreams",
        Memory,
        "the streams of the model, `count` of them",
    ),
    k(
        "CreateEvents",
        Memory,
        "rt2: the events of the model, `count` of them",
    ),
    k(
        "CreateNotifies",
        Memory,
        "rt2: the notifies of the model, `count` of them",
    ),
    k(
        "CreateAllocator",
        Memory,
        "rt2: a caching allocator for `placement`",
    ),
    k("DestroyStreams", Memory, "rt2: releases the streams"),
    k("DestroyEvents", Memory, "rt2: releases the events"),
    k("DestroyNotifies", Memory, "rt2: releases the notifies"),
    k(
        "DestroyAllocator",
        Memory,
        "rt2: releases an allocator and its cached blocks",
    ),
    pure(
        "FindInferShapeFunc",
        Normal,
        "looks up the shape inference of `op_type`",
    ),
    pure(
        "FindTilingFunc",
        Normal,
        "looks up the tiling function of `op_type`",
    ),
    pure(
        "TilingParse",
        Normal,
        "parses an op's compile info for tiling",
    ),
    // Per compute node.
    pure(
        "InferShape",
        Memory,
        "output shapes of a node from its input shapes (and values, where data-dependent)",
    ),
    pure(
        "CalcTensorSizeFromShape",
        Memory,
        "output byte sizes from shapes and dtypes",
    ),
    k("AllocMemHbm", Memory, "device memory for outputs"),
    pure(
        "MemoryView",
        Memory,
        "rt2: a range of a memory block (a tensor's place in the feature memory)",
    ),
    k("AllocMemHost", Memory, "host memory for outputs"),
    pure(
        "BuildShapeTensorData",
        Memory,
        "a shape op's value (`op`: Shape, Size, Rank) as a host tensor, from the input's shape alone",
    ),
    pure("Tiling", Memory, "tiling data and workspace for a launch"),
    k(
        "LaunchKernelWithHandle",
        Launch,
        "submits the op's device task",
    ),
    k(
        "AicpuLaunchCCKernel",
        Launch,
        "submits an AI CPU op's task (`aicpu_ascend_kernel`); inputs as LaunchKernelWithHandle's",
    ),
    k(
        "AicpuLaunchTfKernel",
        Launch,
        "submits an AI CPU op's TensorFlow kernel task (`aicpu_tf_kernel`); inputs as LaunchKernelWithHandle's",
    ),
    k(
        "AicpuHostCompute",
        Launch,
        "runs a host CPU op (`DNN_VM_HOST_CPU_OP_STORE`); inputs as LaunchKernelWithHandle's",
    ),
    k(
        "LaunchKernelAllocOutputs",
        Memory,
        "rt2: runs a data-dependent op and allocates each output once its shape is known",
    ),
    k(
        "FreeMemory",
        Memory,
        "frees a value's memory after its last consumer",
    ),
    k(
        "FreeMemoryHoldAddr",
        Memory,
        "rt2: FreeMemory that holds the address until the related launches completed",
    ),
    // Copies.
    k(
        "CopyH2D",
        Memory,
        "uploads a host tensor to new device memory (Init constants)",
    ),
    k(
        "CopyD2H",
        Memory,
        "downloads a device tensor to host memory",
    ),
    pure(
        "CalcDeviceCopySizes",
        Memory,
        "allocation size and copy size of a host-to-device copy",
    ),
    k(
        "ShareH2DCopyResult",
        Memory,
        "the device tensor a host-to-device copy fills",
    ),
    k(
        "LaunchH2DCopy",
        Launch,
        "submits the asynchronous host-to-device copy",
    ),
    k("SyncStream", Memory, "waits for the stream"),
    // Control flow.
    pure(
        "GenIndexForIf",
        Memory,
        "branch index of an If from its condition tensor",
    ),
    pure(
        "GenIndexForCase",
        Memory,
        "branch index of a Case, clamped as GE does",
    ),
    pure(
        "GenCondForWhile",
        Memory,
        "loop condition of a While from its cond subgraph's output",
    ),
    k("If", Normal, "runs subgraph 0 or 1 by the branch index"),
    k("Case", Normal, "runs subgraph `index`"),
    k(
        "While",
        Normal,
        "runs cond (subgraph 0) and body (subgraph 1) while the condition holds",
    ),
    k(
        "Loop",
        Normal,
        "rt2: ONNX Loop: runs the body (subgraph 0) while under the trip count and the condition holds",
    ),
    k("BranchPivot", Normal, "entry of a branch"),
    k("BranchDone", Normal, "exit of a branch"),
];

/// The kernel types that launch one op into outputs allocated before it, one per GE
/// engine: AI Core (`LaunchKernelWithHandle`), AI CPU (`AicpuLaunchCCKernel`,
/// `AicpuLaunchTfKernel`) and host CPU (`AicpuHostCompute`). All take the same inputs
/// (the stream, then a [shape, memory] pair per present input and per output), and the
/// runtime runs them alike: the emulated device computes every engine's op on the host.
/// They differ in name only, so a view tells the engines apart.
pub const OP_LAUNCHES: &[&str] = &[
    "LaunchKernelWithHandle",
    "AicpuLaunchCCKernel",
    "AicpuLaunchTfKernel",
    "AicpuHostCompute",
];

/// The kernel attribute that marks a launch of a compiled kernel rt2 cannot compute (an
/// op the library does not know, knows without compute, or knows under another contract
/// than the graph's): the kernel's name. Lowering sets it; loading refuses such launches.
pub const KERNEL_NAME_ATTR: &str = "_kernel_name";

/// Whether `kernel` is one of the [`OP_LAUNCHES`].
pub fn is_op_launch(kernel: &str) -> bool {
    OP_LAUNCHES.contains(&kernel)
}

/// A node calling `kernel`, with the class the table gives it (Normal for a kernel type
/// rt2 does not know, which the checks then report).
pub fn exec_node(name: impl Into<crate::exec::NodeName>, kernel: &str) -> crate::exec::KernelNode {
    match kernel_type(kernel) {
        Some(k) => crate::exec::KernelNode::new(name, k.name, k.class),
        None => crate::exec::KernelNode::new(name, kernel.to_string(), KernelClass::Normal),
    }
}

/// `name` as the kernel table's own string when rt2 knows the kernel type, so a loaded
/// graph holds no copy of it per node; an unknown name stays as it is, for the checks to
/// report.
pub fn intern(name: String) -> std::borrow::Cow<'static, str> {
    match kernel_type(&name) {
        Some(k) => std::borrow::Cow::Borrowed(k.name),
        None => std::borrow::Cow::Owned(name),
    }
}

/// The kernel type named `name`. A hash lookup, not a scan of the table: the loader asks
/// once per node, and a large model has hundreds of thousands.
///
/// A name interned by [`intern`] (every node the loader or lowering made) is the table's
/// own string, found first by its address and length: two words hashed instead of its
/// bytes (the checks and the plan ask once per node each).
pub fn kernel_type(name: &str) -> Option<&'static KernelType> {
    static BY_ADDR: OnceLock<HashMap<(usize, usize), &'static KernelType, FixedState>> =
        OnceLock::new();
    let by_addr = BY_ADDR.get_or_init(|| {
        KERNEL_TYPES
            .iter()
            .map(|k| ((k.name.as_ptr() as usize, k.name.len()), k))
            .collect()
    });
    if let Some(k) = by_addr.get(&(name.as_ptr() as usize, name.len())) {
        return Some(k);
    }
    static BY_NAME: OnceLock<HashMap<&'static str, &'static KernelType, FixedState>> =
        OnceLock::new();
    BY_NAME
        .get_or_init(|| KERNEL_TYPES.iter().map(|k| (k.name, k)).collect())
        .get(name)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        let mut names: Vec<&str> = KERNEL_TYPES.iter().map(|k| k.name).collect();
        names.sort_unstable();
        let len = names.len();
        names.dedup();
        assert_eq!(names.len(), len, "duplicate kernel type names");
        assert_eq!(
            kernel_type("LaunchKernelWithHandle").map(|k| k.class),
            Some(KernelClass::Launch)
        );
        assert_eq!(
            kernel_type("AllocMemHbm").map(|k| k.class),
            Some(KernelClass::Memory)
        );
        assert!(kernel_type("Nope").is_none());
        for k in OP_LAUNCHES {
            assert_eq!(
                kernel_type(k).map(|k| k.class),
                Some(KernelClass::Launch),
                "{k}"
            );
        }
        assert!(is_op_launch("AicpuLaunchCCKernel") && !is_op_launch("LaunchKernelAllocOutputs"));
        assert!(kernel_type("InferShape").is_some_and(|k| k.pure));
        assert!(kernel_type("LaunchKernelWithHandle").is_some_and(|k| !k.pure));
        assert!(
            kernel_type("Data").is_some_and(|k| !k.pure),
            "model inputs stay bound"
        );
    }
}
