//! The emulated Ascend device: what the runtime talks to.
//!
//! Architecture invariant: `npu` uses nothing else of rt2. A device knows element types,
//! memory, streams and kernels; it knows nothing of graphs.

pub mod attr;
pub mod device;
pub mod dtype;
pub mod ops;

pub use attr::{Attr, AttrMap, HostTensor};
pub use device::{
    Device, DeviceConfig, DevicePtr, EventId, HostBuf, Launch, MemoryStats, Model, ModelId,
    NotifyId, NpuError, StreamId, StreamRef, Task, TensorArg,
};
pub use dtype::DType;
