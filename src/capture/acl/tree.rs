//! Model trees on the device: a model and the sub-models of its conditional tasks turned
//! into device models (sub-models first), rebuilt after an update, and removed with their
//! events, notifies, handles and groups.

use crate::npu::device::{Device, EventId, Model, Task};

use crate::capture::error::AclError;

use super::model::{ModelRI, ModelStatus, RecTask};
use super::state::{R, State, dev};

impl State {
    pub(super) fn free_handles(&mut self, device: &Device, m: ModelRI) {
        let handles = self.model(m).map(|e| e.handles.clone()).unwrap_or_default();
        for h in handles {
            if let Some(Some(entry)) = self.handles.get_mut(h.0 as usize).map(Option::take) {
                let _ = device.free(entry.info.ptr, device.default_stream());
            }
        }
    }

    /// Frees a model tree: device models, events, notifies, handles and groups.
    pub(super) fn remove_tree(&mut self, device: &Device, m: ModelRI) {
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

    pub(super) fn set_tree_status(&mut self, m: ModelRI, status: ModelStatus) {
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
                    RecTask::DeviceKernel { enabled: false, .. } => continue,
                    RecTask::DeviceKernel { call, .. } => {
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
    pub(super) fn instantiate_tree(&mut self, device: &Device, m: ModelRI) -> R<()> {
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
    pub(super) fn reinstantiate(&mut self, device: &Device, m: ModelRI) -> R<()> {
        let e = self.model(m)?;
        let Some((id, events)) = e.device.as_ref() else {
            return Ok(());
        };
        let model = self.device_model(m, events)?;
        device.update_model(*id, &model).map_err(dev)
    }
}
