//! Conditions: condition handles (`aclmdlRICondHandleCreate`: 8 bytes of device memory,
//! with a default applied at each start when asked) and conditional tasks
//! (`aclmdlRIAddCondTask`), which create the empty sub-models a capture then fills.

use crate::npu::device::{COND_VALUE_BYTES, CondKind, StreamId};

use crate::capture::error::AclError;

use super::context::Acl;
use super::model::{CondHandle, HandleInfo, ModelRI, ModelStatus, RecTask};
use super::state::{GroupState, HandleEntry, Join, ModelEntry, R, State, slot, slot_mut};

impl Acl {
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
    pub(super) fn new_handle(
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
}
