//! Changing a captured model: task groups (`aclmdlRICaptureTaskGrpBegin`/`End`, and
//! `aclmdlRICaptureTaskUpdateBegin`/`End`, whose launches replace the group's parameters)
//! and whole-model edits (`aclmdlRITaskDisable`, `aclmdlRITaskSetParams`, applied by
//! `aclmdlRIUpdate`). Either takes effect from the model's next execution.

use crate::npu::device::StreamId;

use crate::capture::device_kernels::DeviceKernelCall;
use crate::capture::error::AclError;

use super::context::Acl;
use super::model::{CondHandle, ModelRI, ModelStatus, RecTask, TaskGroup};
use super::state::{GroupEntry, GroupState, R, State};

impl Acl {
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
            if let Some(RecTask::DeviceKernel { group, .. }) =
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
            if let Some(RecTask::DeviceKernel { call, .. }) = entry.streams[s].tasks.get_mut(t) {
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
        f: impl FnOnce(&mut DeviceKernelCall<CondHandle>, &mut bool),
    ) -> R<()> {
        let mut st = self.state();
        Self::editable(&st, model)?;
        let e = st.model_mut(model)?;
        let t = e
            .streams
            .get_mut(stream)
            .and_then(|s| s.tasks.get_mut(task))
            .ok_or(AclError::InvalidParam)?;
        let RecTask::DeviceKernel { call, enabled, .. } = t else {
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
        new: DeviceKernelCall<CondHandle>,
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
}
