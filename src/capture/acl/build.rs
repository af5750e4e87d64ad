//! Building a model directly rather than capturing it (`aclmdlRIBuildBegin` ..
//! `aclmdlRIBuildEnd`), as replay of a saved model does: sub-models, condition handles,
//! streams checked task by task, and the instantiation of the tree.

use crate::capture::error::AclError;

use super::context::Acl;
use super::model::{CondHandle, ModelRI, ModelStatus, RecStream, RecTask};
use super::state::{ModelEntry, R};

impl Acl {
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
                    RecTask::DeviceKernel { call, .. } => {
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
}
