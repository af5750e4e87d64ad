//! The device's one error type, [`NpuError`], and its ACL-style numeric codes.
//!
//! Every misuse the device can see (an address outside device memory, a range past the end
//! of its allocation, a block used after it was freed, waiting on an event never recorded,
//! a full queue asked not to block) is a variant here, naming the id or address at fault;
//! none is undefined behaviour or a panic. Errors are `Clone` because one fault is reported
//! in more than one place (the stream that failed, and every stream that waited on an
//! event it recorded afterwards).

use crate::ops::OpError;

use super::ids::{DevicePtr, EventId, ModelId, NotifyId, StreamId};

/// Codes of `rt_error_codes.h` (hicann/runtime `include/external/acl/error_codes/`), the
/// values `aclError` carries. Only the ones the device reports.
pub mod code {
    /// `ACL_ERROR_RT_PARAM_INVALID`: a bad address, range, shape or model.
    pub const PARAM_INVALID: i32 = 107000;
    /// `ACL_ERROR_RT_INVALID_HANDLE`: an unknown stream, event, notify or model id.
    pub const INVALID_HANDLE: i32 = 107017;
    /// `ACL_ERROR_RT_MEMORY_ALLOCATION`: out of device memory.
    pub const MEMORY_ALLOCATION: i32 = 207001;
    /// `ACL_ERROR_RT_MEMORY_FREE`: freeing what is not an allocated block.
    pub const MEMORY_FREE: i32 = 207002;
    /// `ACL_ERROR_RT_INTERNAL_ERROR`: the device shut down, or a host callback failed.
    pub const INTERNAL_ERROR: i32 = 507000;
    /// `ACL_ERROR_RT_STREAM_CAPTURED`: misuse of a capturing stream.
    pub const STREAM_CAPTURED: i32 = 107027;
    /// `ACL_ERROR_RT_STREAM_TASK_FULL`: the stream's queue is full.
    pub const STREAM_TASK_FULL: i32 = 507002;
    /// `ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT`: a task where it cannot run.
    pub const TASK_TYPE_NOT_SUPPORT: i32 = 507009;
    /// `ACL_ERROR_RT_MODEL_EXECUTE`: a model run failed.
    pub const MODEL_EXECUTE: i32 = 507011;
    /// `ACL_ERROR_RT_AICORE_EXCEPTION`: a kernel failed while computing.
    pub const AICORE_EXCEPTION: i32 = 507015;
    /// `ACL_ERROR_RT_KERNEL_LOOKUP`: the op is not in the device's library.
    pub const KERNEL_LOOKUP: i32 = 507027;
}

/// What went wrong on the device.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NpuError {
    #[error(
        "out of device memory: {requested} bytes requested, {allocated} allocated and {cached} cached of {capacity}"
    )]
    OutOfMemory {
        requested: u64,
        capacity: u64,
        allocated: u64,
        cached: u64,
    },
    #[error("address {ptr} is not in device memory")]
    InvalidAddress { ptr: DevicePtr },
    #[error("{len} bytes at {ptr} run past the end of the allocation at {base} of {size} bytes")]
    OutOfBounds {
        ptr: DevicePtr,
        len: u64,
        base: DevicePtr,
        size: u64,
    },
    #[error("address {ptr} is used after the block at {base} was freed")]
    UseAfterFree { ptr: DevicePtr, base: DevicePtr },
    #[error("{ptr} is not the start of an allocated block")]
    InvalidFree { ptr: DevicePtr },
    #[error("no stream {0}")]
    InvalidStream(StreamId),
    #[error("no event {0}")]
    InvalidEvent(EventId),
    #[error("no notify {0}")]
    InvalidNotify(NotifyId),
    #[error("no model {0}")]
    InvalidModel(ModelId),
    #[error("stream {stream}: the queue of {depth} tasks is full")]
    QueueFull { stream: StreamId, depth: usize },
    #[error("event {event} is waited on but was never recorded")]
    EventNotRecorded { event: EventId },
    #[error("op {op:?} is not in the device's op library")]
    UnknownOp { op: String },
    #[error("launch of {op}: {source}")]
    Kernel {
        op: String,
        #[source]
        source: OpError,
    },
    #[error("launch of {op}: the kernel panicked: {msg}")]
    KernelPanic { op: String, msg: String },
    #[error("launch of {op}: {msg}")]
    BadLaunch { op: String, msg: String },
    #[error("outputs {a} and {b} of a task overlap in device memory")]
    OverlappingOutputs { a: usize, b: usize },
    #[error("host buffer of {buffer} bytes has no range of {len} bytes at {offset}")]
    HostRange {
        buffer: usize,
        offset: usize,
        len: usize,
    },
    #[error("{task} tasks cannot run {context}")]
    TaskNotSupported {
        task: &'static str,
        context: &'static str,
    },
    #[error("host callback failed: {msg}")]
    Callback { msg: String },
    #[error("event {event} was recorded by a stream that had faulted: {source}")]
    Upstream {
        event: EventId,
        #[source]
        source: Box<NpuError>,
    },
    #[error("model {model}: {msg}")]
    ModelBuild { model: String, msg: String },
    #[error("model {model} failed: {source}")]
    ModelRun {
        model: ModelId,
        #[source]
        source: Box<NpuError>,
    },
    #[error(
        "a WHILE task ran its body {limit} times in one execution and its condition is still set (the watchdog)"
    )]
    WhileWatchdog { limit: u64 },
    #[error("stream {stream}: {msg}")]
    Capture { stream: StreamId, msg: &'static str },
    #[error("the device shut down")]
    DeviceLost,
    #[error("the device's {what} threads cannot be started: {msg}")]
    ThreadStart { what: &'static str, msg: String },
}

impl NpuError {
    /// The `aclError` value an ACL call would return for this error ([`code`]).
    pub fn code(&self) -> i32 {
        use NpuError::*;
        match self {
            OutOfMemory { .. } => code::MEMORY_ALLOCATION,
            InvalidAddress { .. }
            | OutOfBounds { .. }
            | UseAfterFree { .. }
            | BadLaunch { .. }
            | OverlappingOutputs { .. }
            | HostRange { .. }
            | EventNotRecorded { .. }
            | ModelBuild { .. } => code::PARAM_INVALID,
            InvalidFree { .. } => code::MEMORY_FREE,
            InvalidStream(_) | InvalidEvent(_) | InvalidNotify(_) | InvalidModel(_) => {
                code::INVALID_HANDLE
            }
            QueueFull { .. } => code::STREAM_TASK_FULL,
            UnknownOp { .. } => code::KERNEL_LOOKUP,
            Kernel { .. } | KernelPanic { .. } => code::AICORE_EXCEPTION,
            TaskNotSupported { .. } => code::TASK_TYPE_NOT_SUPPORT,
            Callback { .. } | DeviceLost | ThreadStart { .. } => code::INTERNAL_ERROR,
            Capture { .. } => code::STREAM_CAPTURED,
            Upstream { source, .. } => source.code(),
            ModelRun { .. } | WhileWatchdog { .. } => code::MODEL_EXECUTE,
        }
    }
}
