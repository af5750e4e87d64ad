//! The state of one context, under its one lock: each user stream's capture status and
//! task group, each event's capture state, the captures in progress, and the tables of
//! models, condition handles and task groups (a destroyed entry is `None`, so a handle to
//! it is a null one). The accessors here are the only way into the tables.

use std::collections::HashMap;
use std::thread::ThreadId;

use crate::npu::device::{DevicePtr, EventId, ModelId, NotifyId, NpuError, StreamId};

use crate::capture::device_kernels::DeviceKernelCall;
use crate::capture::error::AclError;
use crate::capture::types::CaptureMode;

use super::model::{CondHandle, HandleInfo, ModelRI, ModelStatus, RecStream, TaskGroup};

/// A task group's state on one stream.
#[derive(Debug, Clone, Default)]
pub(super) enum GroupState {
    #[default]
    None,
    /// Between `task_group_begin` and `task_group_end`: the tasks recorded so far.
    Sample(Vec<(usize, usize)>),
    /// Between `task_update_begin` and `task_update_end`: the new parameters so far.
    Update {
        group: TaskGroup,
        calls: Vec<DeviceKernelCall<CondHandle>>,
    },
}

/// A user stream's capture state.
#[derive(Debug, Default)]
pub(super) struct StreamCap {
    pub(super) status: Option<ModelRI>,
    pub(super) group: GroupState,
}

/// How a user stream is in a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Join {
    Origin,
    Event,
    Added,
}

#[derive(Debug)]
pub(super) struct Member {
    pub(super) stream: StreamId,
    /// Its model streams, first to last cascade level.
    pub(super) chain: Vec<usize>,
    pub(super) join: Join,
}

/// A capture in progress.
#[derive(Debug)]
pub(super) struct Capture {
    pub(super) origin: StreamId,
    pub(super) thread: ThreadId,
    pub(super) mode: CaptureMode,
    pub(super) members: Vec<Member>,
    /// Set by a task refused inside a task group; `task_group_end` returns it.
    pub(super) group_error: Option<AclError>,
}

#[derive(Debug)]
pub(super) struct ModelEntry {
    pub(super) status: ModelStatus,
    pub(super) parent: Option<ModelRI>,
    pub(super) subs: Vec<ModelRI>,
    pub(super) streams: Vec<RecStream>,
    pub(super) events: u32,
    pub(super) handles: Vec<CondHandle>,
    pub(super) groups: Vec<TaskGroup>,
    pub(super) added: Vec<StreamId>,
    pub(super) capture: Option<Capture>,
    /// Once instantiated: the device model and its local events' device events.
    pub(super) device: Option<(ModelId, Vec<EventId>)>,
    /// Recorded after each execution on its stream, so a destroy can wait for them.
    pub(super) done: Option<EventId>,
    /// Kept in step with added streams before and after each execution.
    pub(super) notifies: Option<(NotifyId, NotifyId)>,
}

impl ModelEntry {
    pub(super) fn new(status: ModelStatus, parent: Option<ModelRI>) -> ModelEntry {
        ModelEntry {
            status,
            parent,
            subs: Vec::new(),
            streams: Vec::new(),
            events: 0,
            handles: Vec::new(),
            groups: Vec::new(),
            added: Vec::new(),
            capture: None,
            device: None,
            done: None,
            notifies: None,
        }
    }
}

#[derive(Debug)]
pub(super) struct HandleEntry {
    pub(super) info: HandleInfo,
    pub(super) used: bool,
}

#[derive(Debug)]
pub(super) struct GroupEntry {
    pub(super) model: ModelRI,
    /// (model stream, task index) of each task.
    pub(super) tasks: Vec<(usize, usize)>,
    pub(super) updating: Option<StreamId>,
}

/// An event's capture state: the capture and local event of its latest record, if that
/// record was captured.
#[derive(Debug, Default)]
pub(super) struct EventCap {
    pub(super) captured: Option<(ModelRI, u32)>,
    /// A record outside any capture was issued.
    pub(super) recorded: bool,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) streams: HashMap<StreamId, StreamCap>,
    pub(super) events: HashMap<EventId, EventCap>,
    pub(super) models: Vec<Option<ModelEntry>>,
    pub(super) handles: Vec<Option<HandleEntry>>,
    pub(super) groups: Vec<Option<GroupEntry>>,
    /// Each thread's mode from `thread_exchange_mode` (GLOBAL until exchanged).
    pub(super) thread_modes: HashMap<ThreadId, CaptureMode>,
}

/// The result of an API call.
pub(super) type R<T> = Result<T, AclError>;

/// A device error as the API reports it.
pub(super) fn dev(e: NpuError) -> AclError {
    AclError::of_device(&e)
}

/// Entry `i` of a handle table; a destroyed or unknown handle is a null one.
pub(super) fn slot<T>(table: &[Option<T>], i: u32) -> R<&T> {
    table
        .get(i as usize)
        .and_then(Option::as_ref)
        .ok_or(AclError::InvalidParam)
}

pub(super) fn slot_mut<T>(table: &mut [Option<T>], i: u32) -> R<&mut T> {
    table
        .get_mut(i as usize)
        .and_then(Option::as_mut)
        .ok_or(AclError::InvalidParam)
}

impl State {
    pub(super) fn cap(&mut self, stream: StreamId) -> &mut StreamCap {
        self.streams.entry(stream).or_default()
    }

    pub(super) fn new_model(&mut self, e: ModelEntry) -> ModelRI {
        self.models.push(Some(e));
        ModelRI(self.models.len() as u32 - 1)
    }

    pub(super) fn model(&self, m: ModelRI) -> R<&ModelEntry> {
        slot(&self.models, m.0)
    }

    pub(super) fn model_mut(&mut self, m: ModelRI) -> R<&mut ModelEntry> {
        slot_mut(&mut self.models, m.0)
    }

    pub(super) fn handle(&self, h: CondHandle) -> R<HandleInfo> {
        slot(&self.handles, h.0).map(|e| e.info)
    }

    pub(super) fn handle_ptrs(
        &self,
        call: &DeviceKernelCall<CondHandle>,
    ) -> R<DeviceKernelCall<DevicePtr>> {
        call.map_cond(|h| self.handle(h).map(|i| i.ptr))
    }

    pub(super) fn group(&self, g: TaskGroup) -> R<&GroupEntry> {
        slot(&self.groups, g.0)
    }

    pub(super) fn group_mut(&mut self, g: TaskGroup) -> R<&mut GroupEntry> {
        slot_mut(&mut self.groups, g.0)
    }
}
