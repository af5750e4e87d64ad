//! How a capture records: a capture's start, streams joining it (each with a model
//! stream of its own), the task-group rules a recorded task meets, and the slot rule that
//! chains a cascade stream on when a model stream is full.

use crate::npu::device::StreamId;

use crate::capture::error::AclError;
use crate::capture::types::CaptureMode;

use super::model::{ModelRI, ModelStatus, RecStream, RecTask};
use super::state::{Capture, GroupState, Join, Member, R, State};

impl State {
    pub(super) fn start_capture(&mut self, m: ModelRI, stream: StreamId, mode: CaptureMode) {
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
    pub(super) fn join(&mut self, m: ModelRI, stream: StreamId, join: Join) {
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

    pub(super) fn member_join(&self, m: ModelRI, stream: StreamId) -> Option<Join> {
        let c = self.model(m).ok()?.capture.as_ref()?;
        c.members
            .iter()
            .find(|x| x.stream == stream)
            .map(|x| x.join)
    }

    /// A task that may not be in a task group (anything but a kernel) was issued inside
    /// one: refused, and the group is broken with the same error.
    pub(super) fn refuse_in_group<T>(&mut self, stream: StreamId) -> R<T> {
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
    pub(super) fn record(&mut self, stream: StreamId, task: RecTask, sq_depth: usize) -> R<()> {
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
    pub(super) fn invalidate(&mut self, m: ModelRI) {
        if let Ok(e) = self.model_mut(m)
            && e.status == ModelStatus::CaptureActive
        {
            e.status = ModelStatus::CaptureInvalidated;
        }
    }
}
