//! The ACL Graph API on the emulated device: [`Acl`], one runtime context whose methods
//! mirror the `aclmdlRI*` and `aclrt*` calls, with their checks and error codes as the
//! CANN runtime has them (../shared/notes/acl-graph.md names each source).
//!
//! ## How a capture is kept
//! Work issued to a stream that is not capturing goes to the device at once. Work issued
//! to a capturing stream is recorded, not run, into the capture's model as a [`RecTask`]
//! on one of the model's [`RecStream`]s. Each user stream in a capture (the origin, the
//! streams that joined by waiting on a captured event, the streams added to the model)
//! owns a chain of model streams: when the current one would exceed `sq_depth` slots, a
//! cascade stream is appended and the current one ends with a [`RecTask::Activate`] of
//! it, so the chain runs in order. Captured events are model-local: each record made
//! while capturing is a new local event, and a wait refers to the record it waits for.
//!
//! A successful end turns the model tree (the model and the sub-models of its conditional
//! tasks, captured on other streams) into device models, sub-models first, and the model is
//! READY: executing it queues one device job on the execution stream, and the device's
//! stream workers run every task with no host work per task. An update (a task group's,
//! or a whole-model one) rebuilds the device task lists for the executions issued after
//! it; executions already issued run what they were issued with.
//!
//! ## Invariants
//! - One lock guards the context's state; every call takes it once. Calls are host API
//!   calls, not a hot path: a captured model's execution takes no host lock per task.
//! - A failed call changes nothing, except where the runtime documents a side effect
//!   (a failed end discards the capture; a cross-capture wait, or a failed add of a
//!   stream, invalidates it; a task refused inside a task group breaks the group).
//! - A model's status is one of [`ModelStatus`]; executing needs READY.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::thread::ThreadId;

use crate::npu::device::{
    COND_VALUE_BYTES, CondKind, Device, DeviceConfig, DevicePtr, EventId, Model, ModelId, NotifyId,
    NpuError, StreamId, Task,
};
use crate::ops::OpRegistry;

use super::error::AclError;
use super::kernels::{self, Buf, KernelCall};
use super::types::{CaptureMode, CaptureStatus, Scalar};

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
    fn capturing(self) -> bool {
        matches!(
            self,
            ModelStatus::CaptureActive | ModelStatus::CaptureInvalidated
        )
    }
}

/// A recorded task.
#[derive(Debug, Clone, PartialEq)]
pub enum RecTask {
    Kernel {
        call: KernelCall<CondHandle>,
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
            RecTask::Kernel { .. } => "kernel",
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

/// How a context is set up.
#[derive(Debug, Clone)]
pub struct AclConfig {
    /// Task slots of one capture stream; the last one of a full stream holds the activate
    /// task of its cascade stream. At least 2.
    pub sq_depth: usize,
    /// The device's WHILE watchdog: body runs allowed in one execution.
    pub max_while_iterations: u64,
    /// Device memory in bytes.
    pub memory_bytes: u64,
}

impl Default for AclConfig {
    fn default() -> Self {
        AclConfig {
            sq_depth: 1024,
            max_while_iterations: 1_000_000,
            memory_bytes: 1 << 30,
        }
    }
}

/// A task group's state on one stream.
#[derive(Debug, Clone, Default)]
enum GroupState {
    #[default]
    None,
    /// Between `task_group_begin` and `task_group_end`: the tasks recorded so far.
    Sample(Vec<(usize, usize)>),
    /// Between `task_update_begin` and `task_update_end`: the new parameters so far.
    Update {
        group: TaskGroup,
        calls: Vec<KernelCall<CondHandle>>,
    },
}

/// A user stream's capture state.
#[derive(Debug, Default)]
struct StreamCap {
    status: Option<ModelRI>,
    group: GroupState,
}

/// How a user stream is in a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    Origin,
    Event,
    Added,
}

#[derive(Debug)]
struct Member {
    stream: StreamId,
    /// Its model streams, first to last cascade level.
    chain: Vec<usize>,
    join: Join,
}

/// A capture in progress.
#[derive(Debug)]
struct Capture {
    origin: StreamId,
    thread: ThreadId,
    mode: CaptureMode,
    members: Vec<Member>,
    /// Set by a task refused inside a task group; `task_group_end` returns it.
    group_error: Option<AclError>,
}

#[derive(Debug)]
struct ModelEntry {
    status: ModelStatus,
    parent: Option<ModelRI>,
    subs: Vec<ModelRI>,
    streams: Vec<RecStream>,
    events: u32,
    handles: Vec<CondHandle>,
    groups: Vec<TaskGroup>,
    added: Vec<StreamId>,
    capture: Option<Capture>,
    /// Once instantiated: the device model and its local events' device events.
    device: Option<(ModelId, Vec<EventId>)>,
    /// Recorded after each execution on its stream, so a destroy can wait for them.
    done: Option<EventId>,
    /// Kept in step with added streams before and after each execution.
    notifies: Option<(NotifyId, NotifyId)>,
}

impl ModelEntry {
    fn new(status: ModelStatus, parent: Option<ModelRI>) -> ModelEntry {
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
struct HandleEntry {
    info: HandleInfo,
    used: bool,
}

#[derive(Debug)]
struct GroupEntry {
    model: ModelRI,
    /// (model stream, task index) of each task.
    tasks: Vec<(usize, usize)>,
    updating: Option<StreamId>,
}

/// An event's capture state: the capture and local event of its latest record, if that
/// record was captured.
#[derive(Debug, Default)]
struct EventCap {
    captured: Option<(ModelRI, u32)>,
    /// A record outside any capture was issued.
    recorded: bool,
}

#[derive(Debug, Default)]
struct State {
    streams: HashMap<StreamId, StreamCap>,
    events: HashMap<EventId, EventCap>,
    models: Vec<Option<ModelEntry>>,
    handles: Vec<Option<HandleEntry>>,
    groups: Vec<Option<GroupEntry>>,
    /// Each thread's mode from `thread_exchange_mode` (GLOBAL until exchanged).
    thread_modes: HashMap<ThreadId, CaptureMode>,
}

/// One ACL runtime context on its own emulated device.
pub struct Acl {
    device: Device,
    sq_depth: usize,
    state: Mutex<State>,
}

type R<T> = Result<T, AclError>;

fn dev(e: NpuError) -> AclError {
    AclError::of_device(&e)
}

impl Acl {
    pub fn new(config: AclConfig) -> Acl {
        // A capture device runs every op of the library and the scripts' own kernels.
        let mut ops = OpRegistry::new();
        kernels::register(&mut ops);
        let device = Device::new(DeviceConfig {
            memory_bytes: config.memory_bytes,
            ops: Some(std::sync::Arc::new(ops)),
            max_while_iterations: config.max_while_iterations,
            ..DeviceConfig::default()
        });
        Acl {
            device,
            sq_depth: config.sq_depth.max(2),
            state: Mutex::new(State::default()),
        }
    }

    /// The device under the context.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    // ---- resources

    pub fn create_stream(&self) -> StreamId {
        self.device.create_stream()
    }

    /// An event for capture (`aclrtCreateEventExWithFlag`, ACL_EVENT_SYNC).
    pub fn create_event(&self) -> EventId {
        self.device.create_event()
    }

    /// Device memory, zero-filled.
    pub fn malloc(&self, bytes: usize) -> R<DevicePtr> {
        let ptr = self
            .device
            .malloc(bytes, self.device.default_stream())
            .map_err(dev)?;
        self.device.memcpy_h2d(ptr, &vec![0; bytes]).map_err(dev)?;
        Ok(ptr)
    }

    /// Writes host bytes to device memory now (set-up, not an API call a mode governs).
    pub fn write(&self, ptr: DevicePtr, bytes: &[u8]) -> R<()> {
        self.device.memcpy_h2d(ptr, bytes).map_err(dev)
    }

    /// Reads device memory now, after every stream that is not capturing has run what was
    /// issued to it (faults stay with the streams for their next synchronize).
    pub fn read(&self, ptr: DevicePtr, bytes: &mut [u8]) -> R<()> {
        self.quiesce();
        self.device.memcpy_d2h(bytes, ptr).map_err(dev)
    }

    /// Waits for the work issued so far to every stream that is not capturing, without
    /// taking their faults.
    fn quiesce(&self) {
        let idle: Vec<StreamId> = {
            let st = self.state();
            st.streams
                .iter()
                .filter(|(_, c)| c.status.is_none())
                .map(|(s, _)| *s)
                .chain([self.device.default_stream()])
                .collect()
        };
        for s in idle {
            // A fault shows at the stream's own synchronize; here only the waiting counts.
            let e = self.device.create_event();
            if self.device.record_event(e, s).is_ok() {
                let _ = self.device.synchronize_event(e);
            }
            let _ = self.device.destroy_event(e);
        }
    }

    // ---- capture begin, info, end

    /// `aclmdlRICaptureBegin`.
    pub fn capture_begin(&self, stream: StreamId, mode: CaptureMode) -> R<()> {
        let mut st = self.state();
        if st.cap(stream).status.is_some() {
            return Err(AclError::StreamCaptured);
        }
        let m = st.new_model(ModelEntry::new(ModelStatus::CaptureActive, None));
        st.start_capture(m, stream, mode);
        Ok(())
    }

    /// `aclmdlRICaptureToModelRIBegin`: captures into a sub-model of a conditional task.
    pub fn capture_to_model_begin(
        &self,
        stream: StreamId,
        model: ModelRI,
        mode: CaptureMode,
    ) -> R<()> {
        let mut st = self.state();
        let e = st.model(model)?;
        if e.parent.is_none() {
            return Err(AclError::RtParamInvalid);
        }
        if e.status != ModelStatus::None {
            return Err(AclError::ModelCaptured);
        }
        if st.cap(stream).status.is_some() {
            return Err(AclError::StreamCaptured);
        }
        st.model_mut(model)?.status = ModelStatus::CaptureActive;
        st.start_capture(model, stream, mode);
        Ok(())
    }

    /// `aclmdlRICaptureGetInfo`: the stream's status and, unless NONE, its capture's model.
    pub fn capture_get_info(&self, stream: StreamId) -> R<(CaptureStatus, Option<ModelRI>)> {
        let mut st = self.state();
        let Some(m) = st.cap(stream).status else {
            return Ok((CaptureStatus::None, None));
        };
        let status = match st.model(m)?.status {
            ModelStatus::CaptureInvalidated => CaptureStatus::Invalidated,
            _ => CaptureStatus::Active,
        };
        Ok((status, Some(m)))
    }

    /// `aclmdlRICaptureEnd`. `want_model`: the caller passes somewhere to put the model
    /// (NULL is allowed only when ending a sub-model's capture). Any failure after the
    /// stream is found to be the capture's origin discards the capture.
    pub fn capture_end(&self, stream: StreamId, want_model: bool) -> R<Option<ModelRI>> {
        let mut st = self.state();
        let Some(m) = st.cap(stream).status else {
            return Err(AclError::StreamNotCaptured);
        };
        let entry = st.model(m)?;
        let capture = entry.capture.as_ref().ok_or(AclError::InternalError)?;
        if capture.origin != stream {
            return Err(AclError::StreamCaptureUnmatched);
        }
        if !want_model && entry.parent.is_none() {
            return Err(AclError::InvalidParam);
        }
        let checked = st.end_checks(m);
        if let Err(e) = checked {
            st.discard(&self.device, m);
            return Err(e);
        }
        st.finish_capture(m);
        if st.model(m)?.parent.is_none()
            && let Err(e) = st.instantiate_tree(&self.device, m)
        {
            st.discard(&self.device, m);
            return Err(e);
        }
        Ok(want_model.then_some(m))
    }

    /// `aclmdlRICaptureThreadExchangeMode`: sets the calling thread's mode, returns the
    /// previous one.
    pub fn thread_exchange_mode(&self, mode: CaptureMode) -> CaptureMode {
        let mut st = self.state();
        st.thread_modes
            .insert(std::thread::current().id(), mode)
            .unwrap_or(CaptureMode::Global)
    }

    /// `rtStreamAddToModel` on a model being captured: the stream joins the capture with
    /// no dependency, is joined back to the origin at the end, and is kept in step with
    /// each execution (the runtime's notify record and wait before and after it).
    pub fn stream_add_to_model(&self, stream: StreamId, model: ModelRI) -> R<()> {
        let mut st = self.state();
        let e = st.model(model)?;
        if e.parent.is_some() {
            return Err(AclError::FeatureNotSupport);
        }
        if e.status != ModelStatus::CaptureActive {
            return Err(AclError::InternalError);
        }
        if e.added.contains(&stream) {
            return Ok(());
        }
        if st.cap(stream).status.is_some() {
            st.invalidate(model);
            return Err(AclError::StreamCaptured);
        }
        let e = st.model_mut(model)?;
        e.added.push(stream);
        st.join(model, stream, Join::Added);
        Ok(())
    }

    // ---- work on streams

    /// `aclrtLaunchKernel` of a built-in kernel: run at once, recorded while capturing,
    /// or taken as a task group's new parameters while updating.
    pub fn launch_kernel(&self, stream: StreamId, call: KernelCall<CondHandle>) -> R<()> {
        call.check()?;
        let mut st = self.state();
        let resolved = call.map_cond(|h| st.handle(h).map(|i| i.ptr))?;
        if let GroupState::Update { group, calls } = &mut st.cap(stream).group {
            let (group, n) = (*group, calls.len());
            let size = st.group(group)?.tasks.len();
            if n >= size {
                // The runtime's UpdateStreamTask: past the group's count, the index stays.
                return Err(AclError::InternalError);
            }
            if let GroupState::Update { calls, .. } = &mut st.cap(stream).group {
                calls.push(call);
            }
            return Ok(());
        }
        if st.cap(stream).status.is_some() {
            return st.record(
                stream,
                RecTask::Kernel {
                    call,
                    enabled: true,
                    group: None,
                },
                self.sq_depth,
            );
        }
        drop(st);
        self.device.launch(stream, resolved.launch()).map_err(dev)
    }

    /// Checks an unsafe call (`aclrtMemcpy`, `aclrtMemset`) against the capture modes
    /// (`Context::IsCaptureModeSupport`): the thread's exchanged mode against the
    /// strictest mode of all captures and the modes of the thread's own captures.
    fn unsafe_call_allowed(st: &State) -> bool {
        let me = std::thread::current().id();
        let exchanged = st
            .thread_modes
            .get(&me)
            .copied()
            .unwrap_or(CaptureMode::Global);
        let captures = st
            .models
            .iter()
            .flatten()
            .filter_map(|m| m.capture.as_ref());
        let mut strictest = None::<CaptureMode>;
        let mut mine = Vec::new();
        for c in captures {
            strictest = Some(strictest.map_or(c.mode, |s| s.min(c.mode)));
            if c.thread == me {
                mine.push(c.mode);
            }
        }
        match exchanged {
            CaptureMode::Relaxed => true,
            CaptureMode::Global => {
                strictest != Some(CaptureMode::Global) && !mine.contains(&CaptureMode::ThreadLocal)
            }
            CaptureMode::ThreadLocal => {
                !mine.contains(&CaptureMode::Global) && !mine.contains(&CaptureMode::ThreadLocal)
            }
        }
    }

    /// Runs a synchronous copy after the work issued to every stream that is not
    /// capturing, as the legacy default stream does: it is not recorded by any capture.
    fn synchronous(&self, f: impl FnOnce(&Device) -> Result<(), NpuError>) -> R<()> {
        if !Self::unsafe_call_allowed(&self.state()) {
            return Err(AclError::CaptureModeNotSupport);
        }
        self.quiesce();
        f(&self.device).map_err(dev)
    }

    /// `aclrtMemcpy` device to device (synchronous; an unsafe call during capture).
    pub fn memcpy(&self, dst: Buf, src: Buf) -> R<()> {
        if dst.dtype != src.dtype || dst.len != src.len {
            return Err(AclError::InvalidParam);
        }
        let bytes = src.len * src.dtype.size();
        self.synchronous(|d| d.memcpy_d2d(dst.ptr, src.ptr, bytes))
    }

    /// `aclrtMemset` with an element value (synchronous; unsafe during capture).
    pub fn memset(&self, dst: Buf, value: Scalar) -> R<()> {
        let bytes = super::types::encode(dst.dtype, &vec![value; dst.len])
            .map_err(|_| AclError::InvalidParam)?;
        self.synchronous(|d| d.memcpy_h2d(dst.ptr, &bytes))
    }

    /// `aclrtSynchronizeStream`: refused on a capturing stream; the first device fault
    /// since the last synchronize is reported (a model run's fault as
    /// ACL_ERROR_RT_MODEL_EXECUTE, its model then FAULT), and the stream is usable again.
    pub fn synchronize(&self, stream: StreamId) -> R<()> {
        if self.state().cap(stream).status.is_some() {
            return Err(AclError::StreamCaptured);
        }
        match self.device.synchronize(stream) {
            Ok(()) => Ok(()),
            Err(e) => {
                let mut st = self.state();
                let mut top = &e;
                while let NpuError::Upstream { source, .. } = top {
                    top = source;
                }
                if let NpuError::ModelRun { model, .. } = top
                    && let Some(entry) = st.models.iter_mut().flatten().find(|m| {
                        m.parent.is_none() && m.device.as_ref().is_some_and(|d| d.0 == *model)
                    })
                {
                    entry.status = ModelStatus::Fault;
                }
                Err(dev(e))
            }
        }
    }

    /// `aclrtRecordEvent`: captured on a capturing stream (a new model-local event),
    /// issued at once otherwise.
    pub fn record_event(&self, event: EventId, stream: StreamId) -> R<()> {
        let mut st = self.state();
        if st.cap(stream).status.is_some() {
            if matches!(st.cap(stream).group, GroupState::Sample(_)) {
                return st.refuse_in_group(stream);
            }
            let m = st.cap(stream).status.ok_or(AclError::InternalError)?;
            let local = st.model(m)?.events;
            st.record(stream, RecTask::EventRecord(local), self.sq_depth)?;
            st.model_mut(m)?.events += 1;
            st.events.entry(event).or_default().captured = Some((m, local));
            return Ok(());
        }
        self.device.record_event(event, stream).map_err(dev)?;
        let cap = st.events.entry(event).or_default();
        cap.captured = None;
        cap.recorded = true;
        Ok(())
    }

    /// `aclrtStreamWaitEvent`. A captured event pulls the stream into its capture (a
    /// stream of another capture is a conflict that invalidates both); a capturing stream
    /// cannot wait for work outside its capture; an event never recorded is no wait.
    pub fn stream_wait_event(&self, stream: StreamId, event: EventId) -> R<()> {
        let mut st = self.state();
        let ev = st.events.get(&event).map(|e| (e.captured, e.recorded));
        let mine = st.cap(stream).status;
        match (ev, mine) {
            (Some((Some((m, local)), _)), _) if st.model(m)?.status.capturing() => {
                if let Some(other) = mine
                    && other != m
                {
                    st.invalidate(m);
                    st.invalidate(other);
                    return Err(AclError::StreamCaptureConflict);
                }
                if matches!(st.cap(stream).group, GroupState::Sample(_)) {
                    return st.refuse_in_group(stream);
                }
                if mine.is_none() {
                    st.join(m, stream, Join::Event);
                }
                st.record(stream, RecTask::EventWait(local), self.sq_depth)
            }
            (Some((_, true)), Some(_)) => Err(AclError::CaptureDependency),
            (_, Some(_)) => Ok(()),
            (Some((_, true)), None) => self.device.stream_wait_event(stream, event).map_err(dev),
            (_, None) => Ok(()),
        }
    }

    // ---- task groups

    /// `aclmdlRICaptureTaskGrpBegin`.
    pub fn task_group_begin(&self, stream: StreamId) -> R<()> {
        let mut st = self.state();
        if st.cap(stream).status.is_none() {
            return Err(AclError::StreamNotCaptured);
        }
        let cap = st.cap(stream);
        if !matches!(cap.group, GroupState::None) {
            return Err(AclError::TaskGroupStatus);
        }
        cap.group = GroupState::Sample(Vec::new());
        Ok(())
    }

    /// `aclmdlRICaptureTaskGrpEnd`: the group's handle, or the error that broke it.
    pub fn task_group_end(&self, stream: StreamId) -> R<TaskGroup> {
        let mut st = self.state();
        let Some(m) = st.cap(stream).status else {
            return Err(AclError::StreamNotCaptured);
        };
        let GroupState::Sample(tasks) = std::mem::take(&mut st.cap(stream).group) else {
            return Err(AclError::TaskGroupStatus);
        };
        let entry = st.model_mut(m)?;
        if entry.status == ModelStatus::CaptureInvalidated {
            return Err(AclError::StreamCaptureInvalidated);
        }
        if let Some(e) = entry.capture.as_mut().and_then(|c| c.group_error.take()) {
            return Err(e);
        }
        let g = TaskGroup(st.groups.len() as u32);
        for &(s, t) in &tasks {
            if let Some(RecTask::Kernel { group, .. }) =
                st.model_mut(m)?.streams[s].tasks.get_mut(t)
            {
                *group = Some(g);
            }
        }
        st.model_mut(m)?.groups.push(g);
        st.groups.push(Some(GroupEntry {
            model: m,
            tasks,
            updating: None,
        }));
        Ok(g)
    }

    /// `aclmdlRICaptureTaskUpdateBegin`: launches on `stream` until the update's end are
    /// the group's new parameters, in order.
    pub fn task_update_begin(&self, stream: StreamId, group: TaskGroup) -> R<()> {
        let mut st = self.state();
        if st.cap(stream).status.is_some() {
            return Err(AclError::StreamCaptured);
        }
        let g = st.group(group)?;
        let model = g.model;
        if g.updating.is_some() || !matches!(st.cap(stream).group, GroupState::None) {
            return Err(AclError::TaskGroupStatus);
        }
        if st.model(model)?.status.capturing() {
            return Err(AclError::ModelCaptured);
        }
        st.group_mut(group)?.updating = Some(stream);
        st.cap(stream).group = GroupState::Update {
            group,
            calls: Vec::new(),
        };
        Ok(())
    }

    /// `aclmdlRICaptureTaskUpdateEnd`: applies the new parameters from the model's next
    /// execution; fewer launches than the group has tasks is an error (the update is
    /// dropped either way).
    pub fn task_update_end(&self, stream: StreamId) -> R<()> {
        let mut st = self.state();
        let GroupState::Update { group, calls } = std::mem::take(&mut st.cap(stream).group) else {
            return Err(AclError::TaskGroupStatus);
        };
        let g = st.group_mut(group)?;
        g.updating = None;
        if calls.len() != g.tasks.len() {
            return Err(AclError::InternalError);
        }
        let (model, tasks) = (g.model, g.tasks.clone());
        let entry = st.model_mut(model)?;
        for (&(s, t), new) in tasks.iter().zip(calls) {
            if let Some(RecTask::Kernel { call, .. }) = entry.streams[s].tasks.get_mut(t) {
                *call = new;
            }
        }
        st.reinstantiate(&self.device, model)
    }

    // ---- whole-model update

    fn editable(st: &State, model: ModelRI) -> R<()> {
        let e = st.model(model)?;
        if e.parent.is_some() {
            return Err(AclError::FeatureNotSupport);
        }
        match e.status {
            ModelStatus::Ready | ModelStatus::Updating => Ok(()),
            _ => Err(AclError::ModelUpdateFailed),
        }
    }

    fn edit_task(
        &self,
        model: ModelRI,
        stream: usize,
        task: usize,
        f: impl FnOnce(&mut KernelCall<CondHandle>, &mut bool),
    ) -> R<()> {
        let mut st = self.state();
        Self::editable(&st, model)?;
        let e = st.model_mut(model)?;
        let t = e
            .streams
            .get_mut(stream)
            .and_then(|s| s.tasks.get_mut(task))
            .ok_or(AclError::InvalidParam)?;
        let RecTask::Kernel { call, enabled, .. } = t else {
            return Err(AclError::TaskTypeNotSupport);
        };
        f(call, enabled);
        e.status = ModelStatus::Updating;
        Ok(())
    }

    /// `aclmdlRITaskDisable`: the kernel task is skipped once the model is updated.
    pub fn task_disable(&self, model: ModelRI, stream: usize, task: usize) -> R<()> {
        self.edit_task(model, stream, task, |_, enabled| *enabled = false)
    }

    /// `aclmdlRITaskSetParams` for a kernel task: new arguments once the model is updated.
    pub fn task_set_params(
        &self,
        model: ModelRI,
        stream: usize,
        task: usize,
        new: KernelCall<CondHandle>,
    ) -> R<()> {
        new.check()?;
        self.state().handle_ptrs(&new)?;
        self.edit_task(model, stream, task, |call, _| *call = new)
    }

    /// `aclmdlRIUpdate`: applies disabled tasks and new parameters from the next execution.
    pub fn model_update(&self, model: ModelRI) -> R<()> {
        let mut st = self.state();
        Self::editable(&st, model)?;
        st.reinstantiate(&self.device, model)
            .map_err(|_| AclError::ModelUpdateFailed)?;
        st.model_mut(model)?.status = ModelStatus::Ready;
        Ok(())
    }

    // ---- conditionals

    /// `aclmdlRICondHandleCreate` on a model being captured: 8 bytes of device memory,
    /// zeroed; with `assign_default` the default is written at each start of the model.
    pub fn cond_handle_create(
        &self,
        model: ModelRI,
        default: u32,
        assign_default: bool,
    ) -> R<CondHandle> {
        let mut st = self.state();
        if st.model(model)?.status != ModelStatus::CaptureActive {
            return Err(AclError::InvalidParam);
        }
        self.new_handle(&mut st, model, default, assign_default)
    }

    /// A condition handle of `model`: 8 bytes of zeroed device memory.
    fn new_handle(
        &self,
        st: &mut State,
        model: ModelRI,
        default: u32,
        assign_default: bool,
    ) -> R<CondHandle> {
        let ptr = self.malloc(COND_VALUE_BYTES)?;
        let h = CondHandle(st.handles.len() as u32);
        st.handles.push(Some(HandleEntry {
            info: HandleInfo {
                model,
                ptr,
                default,
                assign_default,
            },
            used: false,
        }));
        st.model_mut(model)?.handles.push(h);
        Ok(h)
    }

    /// `aclmdlRIAddCondTask`: records the conditional task and returns its `size` empty
    /// sub-models, to be captured with `capture_to_model_begin`.
    pub fn add_cond_task(
        &self,
        stream: StreamId,
        handle: CondHandle,
        kind: CondKind,
        size: usize,
    ) -> R<Vec<ModelRI>> {
        let mut st = self.state();
        let h = slot(&st.handles, handle.0)?;
        if h.used {
            return Err(AclError::RtParamInvalid);
        }
        let owner = h.info.model;
        let Some(m) = st.cap(stream).status else {
            return Err(AclError::StreamNotCaptured);
        };
        if m != owner {
            return Err(AclError::RtParamInvalid);
        }
        if st.member_join(m, stream) == Some(Join::Added) {
            return Err(AclError::FeatureNotSupport);
        }
        if !kind.accepts_size(size) {
            return Err(AclError::RtParamInvalid);
        }
        if matches!(st.cap(stream).group, GroupState::Sample(_)) {
            return st.refuse_in_group(stream);
        }
        let subs: Vec<ModelRI> = (0..size)
            .map(|_| st.new_model(ModelEntry::new(ModelStatus::None, Some(m))))
            .collect();
        st.record(
            stream,
            RecTask::Cond {
                handle,
                kind,
                models: subs.clone(),
            },
            self.sq_depth,
        )?;
        st.model_mut(m)?.subs.extend(&subs);
        slot_mut(&mut st.handles, handle.0)?.used = true;
        Ok(subs)
    }

    // ---- execution and destruction

    /// `aclmdlRIExecuteAsync`: queues one run of the model on `stream`.
    pub fn execute_async(&self, model: ModelRI, stream: StreamId) -> R<()> {
        let mut st = self.state();
        if st.cap(stream).status.is_some() {
            return Err(AclError::StreamCaptured);
        }
        let e = st.model(model)?;
        if e.status.capturing() {
            return Err(AclError::ModelCaptured);
        }
        if e.status != ModelStatus::Ready || e.parent.is_some() {
            return Err(AclError::ModelExecute);
        }
        let (id, _) = e.device.as_ref().ok_or(AclError::ModelExecute)?;
        let id = *id;
        let added = e.added.clone();
        let notifies = match (added.is_empty(), e.notifies) {
            (true, _) => None,
            (false, Some(n)) => Some(n),
            (false, None) => {
                let n = (self.device.create_notify(), self.device.create_notify());
                st.model_mut(model)?.notifies = Some(n);
                Some(n)
            }
        };
        if let Some((before, _)) = notifies {
            for &a in &added {
                self.device.record_notify(before, a).map_err(dev)?;
                self.device.wait_notify(stream, before).map_err(dev)?;
            }
        }
        self.device.execute_model(id, stream).map_err(dev)?;
        if let Some((_, after)) = notifies {
            for &a in &added {
                self.device.record_notify(after, stream).map_err(dev)?;
                self.device.wait_notify(a, after).map_err(dev)?;
            }
        }
        let done = match st.model(model)?.done {
            Some(d) => d,
            None => {
                let d = self.device.create_event();
                st.model_mut(model)?.done = Some(d);
                d
            }
        };
        self.device.record_event(done, stream).map_err(dev)
    }

    /// `aclmdlRIDestroy`: waits for the model's executions, then frees it, its sub-models
    /// and their condition handles.
    pub fn destroy(&self, model: ModelRI) -> R<()> {
        let mut st = self.state();
        let e = st.model(model)?;
        if e.parent.is_some() {
            return Err(AclError::FeatureNotSupport);
        }
        if e.status.capturing() {
            return Err(AclError::ModelCaptured);
        }
        if let Some(done) = e.done {
            // Its fault, if any, is the executing stream's to report.
            let _ = self.device.synchronize_event(done);
        }
        st.remove_tree(&self.device, model);
        Ok(())
    }

    // ---- building a model directly (replaying a saved one)

    /// `aclmdlRIBuildBegin`: an empty model to fill with [`Acl::build_streams`].
    pub fn build_begin(&self) -> ModelRI {
        self.state()
            .new_model(ModelEntry::new(ModelStatus::None, None))
    }

    /// An empty sub-model of `parent`, for a conditional task of a model being built.
    pub fn build_sub(&self, parent: ModelRI) -> R<ModelRI> {
        let mut st = self.state();
        if st.model(parent)?.status != ModelStatus::None {
            return Err(AclError::ModelCaptured);
        }
        let m = st.new_model(ModelEntry::new(ModelStatus::None, Some(parent)));
        st.model_mut(parent)?.subs.push(m);
        Ok(m)
    }

    /// A condition handle owned by a model being built.
    pub fn build_handle(
        &self,
        model: ModelRI,
        default: u32,
        assign_default: bool,
    ) -> R<CondHandle> {
        let mut st = self.state();
        if st.model(model)?.status != ModelStatus::None {
            return Err(AclError::ModelCaptured);
        }
        self.new_handle(&mut st, model, default, assign_default)
    }

    /// Sets a model's streams and local event count (the tasks refer to sub-models made
    /// with [`Acl::build_sub`] and handles from [`Acl::build_handle`]).
    pub fn build_streams(&self, model: ModelRI, streams: Vec<RecStream>, events: u32) -> R<()> {
        let mut st = self.state();
        let e = st.model(model)?;
        if e.status != ModelStatus::None {
            return Err(AclError::ModelCaptured);
        }
        for s in &streams {
            for t in &s.tasks {
                match t {
                    RecTask::EventRecord(i) | RecTask::EventWait(i) if *i >= events => {
                        return Err(AclError::InvalidParam);
                    }
                    RecTask::Activate(i) if *i as usize >= streams.len() => {
                        return Err(AclError::InvalidParam);
                    }
                    RecTask::Cond { models, kind, .. }
                        if !kind.accepts_size(models.len())
                            || models.iter().any(|s| !e.subs.contains(s)) =>
                    {
                        return Err(AclError::InvalidParam);
                    }
                    RecTask::Kernel { call, .. } => {
                        call.check()?;
                        st.handle_ptrs(call)?;
                    }
                    _ => {}
                }
            }
        }
        let e = st.model_mut(model)?;
        e.streams = streams;
        e.events = events;
        Ok(())
    }

    /// `aclmdlRIBuildEnd`: instantiates the model tree; the model is READY.
    pub fn build_end(&self, model: ModelRI) -> R<()> {
        let mut st = self.state();
        let e = st.model(model)?;
        if e.parent.is_some() || e.status != ModelStatus::None {
            return Err(AclError::InvalidParam);
        }
        st.set_tree_status(model, ModelStatus::Ready);
        if let Err(e) = st.instantiate_tree(&self.device, model) {
            st.remove_tree(&self.device, model);
            return Err(e);
        }
        Ok(())
    }

    // ---- inspection

    /// A copy of what the model holds; `None` for a destroyed or unknown model.
    pub fn snapshot(&self, model: ModelRI) -> Option<ModelSnapshot> {
        let st = self.state();
        let e = st.model(model).ok()?;
        Some(ModelSnapshot {
            status: e.status,
            parent: e.parent,
            subs: e.subs.clone(),
            streams: e.streams.clone(),
            events: e.events,
            handles: e.handles.clone(),
            groups: e.groups.clone(),
            added: e.added.clone(),
        })
    }

    pub fn handle_info(&self, handle: CondHandle) -> Option<HandleInfo> {
        self.state().handle(handle).ok()
    }

    /// The tasks of a task group, as (model stream, task index).
    pub fn group_tasks(&self, group: TaskGroup) -> Option<Vec<(usize, usize)>> {
        self.state().group(group).ok().map(|g| g.tasks.clone())
    }
}

/// Entry `i` of a handle table; a destroyed or unknown handle is a null one.
fn slot<T>(table: &[Option<T>], i: u32) -> R<&T> {
    table
        .get(i as usize)
        .and_then(Option::as_ref)
        .ok_or(AclError::InvalidParam)
}

fn slot_mut<T>(table: &mut [Option<T>], i: u32) -> R<&mut T> {
    table
        .get_mut(i as usize)
        .and_then(Option::as_mut)
        .ok_or(AclError::InvalidParam)
}

impl State {
    fn cap(&mut self, stream: StreamId) -> &mut StreamCap {
        self.streams.entry(stream).or_default()
    }

    fn new_model(&mut self, e: ModelEntry) -> ModelRI {
        self.models.push(Some(e));
        ModelRI(self.models.len() as u32 - 1)
    }

    fn model(&self, m: ModelRI) -> R<&ModelEntry> {
        slot(&self.models, m.0)
    }

    fn model_mut(&mut self, m: ModelRI) -> R<&mut ModelEntry> {
        slot_mut(&mut self.models, m.0)
    }

    fn handle(&self, h: CondHandle) -> R<HandleInfo> {
        slot(&self.handles, h.0).map(|e| e.info)
    }

    fn handle_ptrs(&self, call: &KernelCall<CondHandle>) -> R<KernelCall<DevicePtr>> {
        call.map_cond(|h| self.handle(h).map(|i| i.ptr))
    }

    fn group(&self, g: TaskGroup) -> R<&GroupEntry> {
        slot(&self.groups, g.0)
    }

    fn group_mut(&mut self, g: TaskGroup) -> R<&mut GroupEntry> {
        slot_mut(&mut self.groups, g.0)
    }

    fn start_capture(&mut self, m: ModelRI, stream: StreamId, mode: CaptureMode) {
        if let Ok(e) = self.model_mut(m) {
            e.capture = Some(Capture {
                origin: stream,
                thread: std::thread::current().id(),
                mode,
                members: Vec::new(),
                group_error: None,
            });
        }
        self.join(m, stream, Join::Origin);
    }

    /// Puts `stream` into the capture of `m` with a model stream of its own, started at
    /// each execution.
    fn join(&mut self, m: ModelRI, stream: StreamId, join: Join) {
        let Ok(e) = self.model_mut(m) else { return };
        e.streams.push(RecStream {
            user: Some(stream),
            active_at_start: true,
            tasks: Vec::new(),
        });
        let index = e.streams.len() - 1;
        if let Some(c) = e.capture.as_mut() {
            c.members.push(Member {
                stream,
                chain: vec![index],
                join,
            });
        }
        self.cap(stream).status = Some(m);
    }

    fn member_join(&self, m: ModelRI, stream: StreamId) -> Option<Join> {
        let c = self.model(m).ok()?.capture.as_ref()?;
        c.members
            .iter()
            .find(|x| x.stream == stream)
            .map(|x| x.join)
    }

    /// A task that may not be in a task group (anything but a kernel) was issued inside
    /// one: refused, and the group is broken with the same error.
    fn refuse_in_group<T>(&mut self, stream: StreamId) -> R<T> {
        let e = AclError::TaskTypeNotSupport;
        if let Some(m) = self.cap(stream).status
            && let Ok(entry) = self.model_mut(m)
            && let Some(c) = entry.capture.as_mut()
        {
            c.group_error.get_or_insert(e);
        }
        Err(e)
    }

    /// Appends a task to the stream's current model stream, chaining a cascade stream on
    /// first when the current one has one slot left (kept for the activate task).
    fn record(&mut self, stream: StreamId, task: RecTask, sq_depth: usize) -> R<()> {
        let m = self
            .streams
            .get(&stream)
            .and_then(|c| c.status)
            .ok_or(AclError::StreamNotCaptured)?;
        let in_group = matches!(self.cap(stream).group, GroupState::Sample(_));
        let sampling = |s: &StreamId| {
            matches!(
                self.streams.get(s).map(|c| &c.group),
                Some(GroupState::Sample(_))
            )
        };
        // A task on a stream with no open group while another stream of the capture has
        // one breaks that group (the runtime's IsTaskGroupBreak).
        let breaks = !in_group
            && self.model(m)?.capture.as_ref().is_some_and(|c| {
                c.members
                    .iter()
                    .any(|x| x.stream != stream && sampling(&x.stream))
            });
        let entry = self.model_mut(m)?;
        let capture = entry.capture.as_mut().ok_or(AclError::InternalError)?;
        if breaks {
            capture.group_error.get_or_insert(AclError::TaskGroupIntr);
            return Err(AclError::TaskGroupIntr);
        }
        let member = capture
            .members
            .iter_mut()
            .find(|x| x.stream == stream)
            .ok_or(AclError::InternalError)?;
        let mut current = *member.chain.last().ok_or(AclError::InternalError)?;
        if entry.streams[current].tasks.len() + 1 >= sq_depth {
            entry.streams.push(RecStream {
                user: Some(stream),
                active_at_start: false,
                tasks: Vec::new(),
            });
            let next = entry.streams.len() - 1;
            entry.streams[current]
                .tasks
                .push(RecTask::Activate(next as u32));
            member.chain.push(next);
            current = next;
        }
        entry.streams[current].tasks.push(task);
        let at = (current, entry.streams[current].tasks.len() - 1);
        if let GroupState::Sample(tasks) = &mut self.cap(stream).group {
            tasks.push(at);
        }
        Ok(())
    }

    /// Marks a capture (and the statuses its streams report) invalidated.
    fn invalidate(&mut self, m: ModelRI) {
        if let Ok(e) = self.model_mut(m)
            && e.status == ModelStatus::CaptureActive
        {
            e.status = ModelStatus::CaptureInvalidated;
        }
    }

    /// The checks of a capture's end, in the runtime's order.
    fn end_checks(&mut self, m: ModelRI) -> R<()> {
        let e = self.model(m)?;
        if e.status == ModelStatus::CaptureInvalidated {
            return Err(AclError::StreamCaptureInvalidated);
        }
        let c = e.capture.as_ref().ok_or(AclError::InternalError)?;
        if c.mode != CaptureMode::Relaxed && c.thread != std::thread::current().id() {
            return Err(AclError::StreamCaptureWrongThread);
        }
        if self.any_sub_capturing(m) {
            return Err(AclError::SubAclgraphIsCapturing);
        }
        let members: Vec<StreamId> = c.members.iter().map(|x| x.stream).collect();
        if members.iter().any(|s| {
            !matches!(
                self.streams.get(s).map(|c| &c.group),
                Some(GroupState::None) | None
            )
        }) {
            return Err(AclError::TaskGroupStatus);
        }
        self.join_added(m)?;
        if !self.all_joined(m)? {
            return Err(AclError::StreamUnjoined);
        }
        Ok(())
    }

    fn any_sub_capturing(&self, m: ModelRI) -> bool {
        self.model(m).is_ok_and(|e| {
            e.subs.iter().any(|&s| {
                self.model(s)
                    .is_ok_and(|x| x.status.capturing() || self.any_sub_capturing(s))
            })
        })
    }

    /// Joins each added stream back to the origin: a record at its end, a wait for it at
    /// the origin's end (the runtime's AddNotifyToAddedCaptureStream).
    fn join_added(&mut self, m: ModelRI) -> R<()> {
        let e = self.model_mut(m)?;
        let c = e.capture.as_ref().ok_or(AclError::InternalError)?;
        let origin_tail = *c.members[0].chain.last().ok_or(AclError::InternalError)?;
        let tails: Vec<usize> = c
            .members
            .iter()
            .filter(|x| x.join == Join::Added)
            .filter_map(|x| x.chain.last().copied())
            .collect();
        for tail in tails {
            let local = e.events;
            e.events += 1;
            e.streams[tail].tasks.push(RecTask::EventRecord(local));
            e.streams[origin_tail].tasks.push(RecTask::EventWait(local));
        }
        Ok(())
    }

    /// Whether every stream of the capture is joined back to the origin: its last task
    /// (on its last cascade level) records an event that the origin, or a stream joined
    /// already, waits for.
    fn all_joined(&self, m: ModelRI) -> R<bool> {
        let e = self.model(m)?;
        let c = e.capture.as_ref().ok_or(AclError::InternalError)?;
        let waits = |x: &Member| -> Vec<u32> {
            x.chain
                .iter()
                .flat_map(|&s| e.streams[s].tasks.iter())
                .filter_map(|t| match t {
                    RecTask::EventWait(i) => Some(*i),
                    _ => None,
                })
                .collect()
        };
        let tail_record = |x: &Member| {
            x.chain
                .last()
                .and_then(|&s| e.streams[s].tasks.last())
                .and_then(|t| match t {
                    RecTask::EventRecord(i) => Some(*i),
                    _ => None,
                })
        };
        let mut joined: Vec<bool> = c.members.iter().map(|x| x.join == Join::Origin).collect();
        loop {
            let mut grew = false;
            for (i, x) in c.members.iter().enumerate() {
                if joined[i] {
                    continue;
                }
                let Some(r) = tail_record(x) else { continue };
                let waited = c
                    .members
                    .iter()
                    .enumerate()
                    .any(|(j, y)| joined[j] && waits(y).contains(&r));
                if waited {
                    joined[i] = true;
                    grew = true;
                }
            }
            if !grew {
                return Ok(joined.iter().all(|&j| j));
            }
        }
    }

    /// Ends a capture that passed its checks: its streams are free, its events plain.
    fn finish_capture(&mut self, m: ModelRI) {
        let Ok(e) = self.model_mut(m) else { return };
        e.status = ModelStatus::Ready;
        let members = e.capture.take().map(|c| c.members).unwrap_or_default();
        for x in members {
            self.cap(x.stream).status = None;
        }
        for ev in self.events.values_mut() {
            if ev.captured.is_some_and(|(cm, _)| cm == m) {
                ev.captured = None;
            }
        }
    }

    /// Discards a capture after a failed end: its streams (and those of sub-model
    /// captures still open) are back to NONE; a top-level model is gone, a sub-model is
    /// empty again.
    fn discard(&mut self, device: &Device, m: ModelRI) {
        let subs = self.model(m).map(|e| e.subs.clone()).unwrap_or_default();
        for s in subs {
            if self.model(s).is_ok_and(|x| x.capture.is_some()) {
                self.discard(device, s);
            }
        }
        self.finish_capture(m);
        for cap in self.streams.values_mut() {
            if cap.status == Some(m) {
                cap.status = None;
            }
        }
        let parent = self.model(m).ok().and_then(|e| e.parent);
        if parent.is_some() {
            let subs = self.model(m).map(|e| e.subs.clone()).unwrap_or_default();
            for s in subs {
                self.remove_tree(device, s);
            }
            self.free_handles(device, m);
            if let Ok(e) = self.model_mut(m) {
                *e = ModelEntry::new(ModelStatus::None, parent);
            }
        } else {
            self.remove_tree(device, m);
        }
    }

    fn free_handles(&mut self, device: &Device, m: ModelRI) {
        let handles = self.model(m).map(|e| e.handles.clone()).unwrap_or_default();
        for h in handles {
            if let Some(Some(entry)) = self.handles.get_mut(h.0 as usize).map(Option::take) {
                let _ = device.free(entry.info.ptr, device.default_stream());
            }
        }
    }

    /// Frees a model tree: device models, events, notifies, handles and groups.
    fn remove_tree(&mut self, device: &Device, m: ModelRI) {
        let subs = self.model(m).map(|e| e.subs.clone()).unwrap_or_default();
        for s in subs {
            self.remove_tree(device, s);
        }
        self.free_handles(device, m);
        for g in self.groups.iter_mut() {
            if g.as_ref().is_some_and(|g| g.model == m) {
                *g = None;
            }
        }
        for cap in self.streams.values_mut() {
            if cap.status == Some(m) {
                cap.status = None;
            }
        }
        if let Some(Some(e)) = self.models.get_mut(m.0 as usize).map(Option::take) {
            if let Some((id, events)) = e.device {
                let _ = device.unload_model(id);
                for ev in events {
                    let _ = device.destroy_event(ev);
                }
            }
            if let Some(d) = e.done {
                let _ = device.destroy_event(d);
            }
            if let Some((a, b)) = e.notifies {
                let _ = device.destroy_notify(a);
                let _ = device.destroy_notify(b);
            }
        }
    }

    fn set_tree_status(&mut self, m: ModelRI, status: ModelStatus) {
        let subs = self.model(m).map(|e| e.subs.clone()).unwrap_or_default();
        for s in subs {
            self.set_tree_status(s, status);
        }
        if let Ok(e) = self.model_mut(m) {
            e.status = status;
        }
    }

    /// The device model of `m`'s recorded streams (its sub-models already instantiated).
    fn device_model(&self, m: ModelRI, events: &[EventId]) -> R<Model> {
        let e = self.model(m)?;
        let mut b = Model::builder().name(format!("aclmdlRI {}", m.0));
        if e.streams.is_empty() {
            // A sub-model never captured runs nothing.
            b = b.stream(Vec::new());
        }
        for s in &e.streams {
            let mut tasks = Vec::with_capacity(s.tasks.len());
            for t in &s.tasks {
                tasks.push(match t {
                    RecTask::Kernel { enabled: false, .. } => continue,
                    RecTask::Kernel { call, .. } => {
                        Task::Launch(std::sync::Arc::new(self.handle_ptrs(call)?.launch()))
                    }
                    RecTask::EventRecord(i) => Task::EventRecord(events[*i as usize]),
                    RecTask::EventWait(i) => Task::EventWait(events[*i as usize]),
                    RecTask::Activate(i) => Task::StreamActivate(*i),
                    RecTask::Cond {
                        handle,
                        kind,
                        models,
                    } => Task::Cond {
                        kind: *kind,
                        value: self.handle(*handle)?.ptr,
                        models: models
                            .iter()
                            .map(|s| {
                                self.model(*s)?
                                    .device
                                    .as_ref()
                                    .map(|d| d.0)
                                    .ok_or(AclError::InternalError)
                            })
                            .collect::<R<_>>()?,
                    },
                });
            }
            b = if s.active_at_start {
                b.stream(tasks)
            } else {
                b.inactive_stream(tasks)
            };
        }
        for &h in &e.handles {
            let info = self.handle(h)?;
            if info.assign_default {
                b = b.start_value(info.ptr, u64::from(info.default));
            }
        }
        b.build().map_err(dev)
    }

    /// Loads the model tree onto the device, sub-models first.
    fn instantiate_tree(&mut self, device: &Device, m: ModelRI) -> R<()> {
        let subs = self.model(m)?.subs.clone();
        for s in subs {
            self.instantiate_tree(device, s)?;
        }
        let events: Vec<EventId> = (0..self.model(m)?.events)
            .map(|_| device.create_event())
            .collect();
        let model = self.device_model(m, &events)?;
        let id = device.load_model(&model).map_err(dev)?;
        self.model_mut(m)?.device = Some((id, events));
        Ok(())
    }

    /// Rebuilds the device task lists of an instantiated model after an update.
    fn reinstantiate(&mut self, device: &Device, m: ModelRI) -> R<()> {
        let e = self.model(m)?;
        let Some((id, events)) = e.device.as_ref() else {
            return Ok(());
        };
        let model = self.device_model(m, events)?;
        device.update_model(*id, &model).map_err(dev)
    }
}
