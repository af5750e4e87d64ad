//! What the ACL Graph API hands out and shows of a model: the handles ([`ModelRI`],
//! [`CondHandle`], [`TaskGroup`]), a model's [`ModelStatus`], the tasks a capture records
//! ([`RecTask`]) on its model streams ([`RecStream`]), and the copies reports and saving
//! take ([`ModelSnapshot`], [`HandleInfo`]). Plain values: no device and no lock here.

use crate::npu::device::{CondKind, DevicePtr, StreamId};

use crate::capture::device_kernels::DeviceKernelCall;

/// A model (`aclmdlRI`): captured, a sub-model of a conditional task, or built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelRI(pub u32);

/// A condition handle (`aclmdlRICondHandle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CondHandle(pub u32);

/// A task group handle (`aclrtTaskGrp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskGroup(pub u32);

/// A model's status (the runtime's CaptureModel status, aclgraph.md section 2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelStatus {
    /// A sub-model not captured yet, or a model being built.
    None,
    CaptureActive,
    CaptureInvalidated,
    /// Task parameters were changed or tasks disabled; `model_update` makes it READY.
    Updating,
    /// An execution faulted on the device; the model can only be destroyed.
    Fault,
    Ready,
}

impl ModelStatus {
    pub fn name(self) -> &'static str {
        match self {
            ModelStatus::None => "NONE",
            ModelStatus::CaptureActive => "CAPTURE_ACTIVE",
            ModelStatus::CaptureInvalidated => "CAPTURE_INVALIDATED",
            ModelStatus::Updating => "UPDATING",
            ModelStatus::Fault => "FAULT",
            ModelStatus::Ready => "READY",
        }
    }
    pub(super) fn capturing(self) -> bool {
        matches!(
            self,
            ModelStatus::CaptureActive | ModelStatus::CaptureInvalidated
        )
    }
}

/// A recorded task.
#[derive(Debug, Clone, PartialEq)]
pub enum RecTask {
    DeviceKernel {
        call: DeviceKernelCall<CondHandle>,
        /// `aclmdlRITaskDisable` clears it: the task is skipped, as an empty one.
        enabled: bool,
        group: Option<TaskGroup>,
    },
    /// Records model-local event `0`.
    EventRecord(u32),
    /// Waits for model-local event `0`'s record in the same execution.
    EventWait(u32),
    /// Starts model stream `0` (a cascade).
    Activate(u32),
    Cond {
        handle: CondHandle,
        kind: CondKind,
        models: Vec<ModelRI>,
    },
}

impl RecTask {
    /// The task type's name in reports.
    pub fn kind(&self) -> &'static str {
        match self {
            RecTask::DeviceKernel { .. } => "kernel",
            RecTask::EventRecord(_) => "event_record",
            RecTask::EventWait(_) => "event_wait",
            RecTask::Activate(_) => "stream_activate",
            RecTask::Cond { .. } => "cond",
        }
    }
}

/// A model stream: the tasks of one user stream, or of one cascade level of it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecStream {
    /// The user stream the tasks were issued on (`None` for a built model).
    pub user: Option<StreamId>,
    /// Started at each execution; otherwise a cascade stream started by an activate task.
    pub active_at_start: bool,
    pub tasks: Vec<RecTask>,
}

/// What a model holds, as a copy for reports and saving.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSnapshot {
    pub status: ModelStatus,
    pub parent: Option<ModelRI>,
    /// The sub-models of its conditional tasks, in creation order.
    pub subs: Vec<ModelRI>,
    pub streams: Vec<RecStream>,
    /// Model-local events.
    pub events: u32,
    /// Condition handles created on it.
    pub handles: Vec<CondHandle>,
    /// Task groups of its tasks.
    pub groups: Vec<TaskGroup>,
    /// User streams added with `stream_add_to_model`.
    pub added: Vec<StreamId>,
}

/// A condition handle's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandleInfo {
    /// The model it was created on.
    pub model: ModelRI,
    /// Its 8-byte value in device memory (`aclmdlRICondHandleGetCondPtr`).
    pub ptr: DevicePtr,
    pub default: u32,
    pub assign_default: bool,
}
