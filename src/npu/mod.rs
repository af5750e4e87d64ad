//! The emulated Ascend device: what the runtime talks to.
//!
//! Architecture invariant: `npu` uses the op library ([`crate::ops`]) and nothing else of
//! rt2. A device knows memory, streams, events, tasks and models, and runs ops through the
//! registry; it knows nothing of graphs.

pub mod device;

pub use device::{
    Device, DeviceConfig, DevicePtr, EventId, HostBuf, Launch, MemoryStats, Model, ModelId,
    NotifyId, NpuError, StreamId, StreamRef, Task, TensorArg,
};
