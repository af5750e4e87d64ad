//! Execution and destruction: `aclmdlRIExecuteAsync` (one device job per execution, kept
//! in step with the model's added streams) and `aclmdlRIDestroy` (after the model's
//! executions, with its sub-models and condition handles).

use crate::npu::device::StreamId;

use crate::capture::error::AclError;

use super::context::Acl;
use super::model::{ModelRI, ModelStatus};
use super::state::{R, dev};

impl Acl {
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
}
