//! The end of a capture: the runtime's checks in its order (invalidation, thread, open
//! sub-model captures, open task groups, streams joined back), the joins of added
//! streams, and then finishing the capture or discarding it.

use crate::npu::device::{Device, StreamId};

use crate::capture::error::AclError;
use crate::capture::types::CaptureMode;

use super::model::{ModelRI, ModelStatus, RecTask};
use super::state::{GroupState, Join, Member, ModelEntry, R, State};

impl State {
    /// The checks of a capture's end, in the runtime's order.
    pub(super) fn end_checks(&mut self, m: ModelRI) -> R<()> {
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
    pub(super) fn finish_capture(&mut self, m: ModelRI) {
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
    pub(super) fn discard(&mut self, device: &Device, m: ModelRI) {
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
}
