//! Work on streams: kernel launches (run at once, recorded while capturing, or taken as
//! a task group's new parameters while updating), the synchronous copies the capture
//! modes govern (`aclrtMemcpy`, `aclrtMemset`), `aclrtSynchronizeStream`, and event
//! records and waits, which pull streams into captures.

use crate::npu::device::{Device, EventId, NpuError, StreamId};

use crate::capture::device_kernels::{Buf, DeviceKernelCall};
use crate::capture::error::AclError;
use crate::capture::types::{CaptureMode, Scalar};

use super::context::Acl;
use super::model::{CondHandle, ModelStatus, RecTask};
use super::state::{GroupState, Join, R, State, dev};

impl Acl {
    /// `aclrtLaunchKernel` of a built-in kernel: run at once, recorded while capturing,
    /// or taken as a task group's new parameters while updating.
    pub fn launch_kernel(&self, stream: StreamId, call: DeviceKernelCall<CondHandle>) -> R<()> {
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
                RecTask::DeviceKernel {
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
        let bytes = crate::capture::types::encode(dst.dtype, &vec![value; dst.len])
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
}
