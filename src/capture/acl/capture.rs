//! Capture calls: `aclmdlRICaptureBegin`, `aclmdlRICaptureToModelRIBegin`,
//! `aclmdlRICaptureGetInfo`, `aclmdlRICaptureEnd`, `aclmdlRICaptureThreadExchangeMode` and
//! `rtStreamAddToModel`.

use crate::npu::device::StreamId;

use crate::capture::error::AclError;
use crate::capture::types::{CaptureMode, CaptureStatus};

use super::context::Acl;
use super::model::{ModelRI, ModelStatus};
use super::state::{Join, ModelEntry, R};

impl Acl {
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
}
