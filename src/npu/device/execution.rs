//! Loading and executing models against the device: a [`Model`]'s ids resolved into a
//! [`ResolvedModel`] (its launches prepared once: op spec, specialized kernel, argument
//! segments), the checks an execution makes when it is issued, an execution run to
//! completion on the calling worker, and conditional tasks reading their value and
//! running the chosen sub-model. The state these act on is `queue`'s; the stream workers
//! that call in here are above (`stream`), and a model's workers are spawned by the
//! device and handed to [`ModelInner::load`].

use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::ops::Compute;

use super::access::{self, SpanLocks, with_spans};
use super::error::NpuError;
use super::ids::{DevicePtr, EventId, ModelId, NotifyId, StreamId};
use super::model::Model;
use super::queue::{ModelInner, ModelRun, Prepared, ResolvedModel, StreamState};
use super::sanitizer::{LaneKey, Role, Touch};
use super::state::Core;
use super::sync::{EventState, NotifyState};
use super::task::{COND_VALUE_BYTES, CondKind, Launch, Task};

impl Prepared {
    fn new(core: &Core, l: &Launch) -> Option<Prepared> {
        let spec = *core.registry.get(l.op())?;
        if !matches!(spec.compute, Some(Compute::Into(_))) {
            return None;
        }
        let (mut ins, mut outs) = (Vec::new(), Vec::new());
        l.resolve(&core.memory, &mut ins, &mut outs).ok()?;
        let mut locks = SpanLocks::default();
        access::span_locks(&ins, &outs, &mut locks).ok()?;
        let special = l.choose_special(&spec);
        Some(Prepared {
            spec,
            special,
            locks,
        })
    }
}

impl ResolvedModel {
    /// Resolves a model's ids against the device (sub-models among the loaded ones).
    fn resolve(core: &Core, model: &Model) -> Result<ResolvedModel, NpuError> {
        // Read before any span is resolved: an unmap meanwhile makes the spans stale.
        let epoch = core.memory.unmap_epoch();
        let mut events: Vec<(EventId, Arc<EventState>, bool)> = Vec::new();
        let mut notifies: Vec<(NotifyId, Arc<NotifyState>)> = Vec::new();
        let mut subs: Vec<(ModelId, Arc<ModelInner>)> = Vec::new();
        let mut ranges = Vec::new();
        for s in &model.streams {
            for t in &s.tasks {
                t.each_range(|p, n| {
                    ranges.push((p, n));
                    Ok(())
                })?;
                t.check_host_range()?;
                match t {
                    Task::EventRecord(e) | Task::EventWait(e) => {
                        let records = matches!(t, Task::EventRecord(_));
                        match events.iter_mut().find(|(id, _, _)| id == e) {
                            Some(entry) => entry.2 |= records,
                            None => events.push((*e, core.event(*e)?, records)),
                        }
                    }
                    Task::NotifyRecord(n) | Task::NotifyWait(n)
                        if !notifies.iter().any(|(id, _)| id == n) =>
                    {
                        notifies.push((*n, core.notify(*n)?));
                    }
                    Task::Launch(l) => {
                        let spec = core.op_spec(l.op())?;
                        if matches!(spec.compute, Some(Compute::Alloc(_))) {
                            return Err(NpuError::TaskNotSupported {
                                task: "data-dependent kernel launch",
                                context: "in a model",
                            });
                        }
                    }
                    Task::Cond { models, .. } => {
                        for m in models {
                            if !subs.iter().any(|(id, _)| id == m) {
                                subs.push((*m, core.model(*m)?));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        for &(ptr, _) in &model.start_values {
            ranges.push((ptr, COND_VALUE_BYTES));
        }
        // Models touch few buffers many times: each execution checks each range once.
        ranges.sort_unstable();
        ranges.dedup();
        let prepared = model
            .streams
            .iter()
            .map(|s| {
                s.tasks
                    .iter()
                    .map(|t| match t {
                        Task::Launch(l) => Prepared::new(core, l),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        let mut activations = vec![0usize; model.streams.len()];
        let mut last = vec![false; model.streams.len()];
        for s in &model.streams {
            for (i, t) in s.tasks.iter().enumerate() {
                if let Task::StreamActivate(j) = t {
                    activations[*j as usize] += 1;
                    last[*j as usize] |= i + 1 == s.tasks.len();
                }
            }
        }
        let continues = (0..model.streams.len())
            .map(|j| !model.streams[j].active_at_start && activations[j] == 1 && last[j])
            .collect();
        Ok(ResolvedModel {
            prepared,
            epoch,
            continues,
            streams: model.streams.clone(),
            events,
            notifies,
            subs,
            ranges,
            start_values: model.start_values.clone(),
        })
    }

    /// What an execution checks when it is issued: the memory is allocated and every
    /// event waited on from outside the model has a record.
    pub fn check(&self, core: &Core) -> Result<(), NpuError> {
        {
            let heap = core.memory.heap();
            for &(ptr, len) in &self.ranges {
                heap.check(ptr, len)?;
            }
        }
        for (id, e, recorded_here) in &self.events {
            if !recorded_here && e.latest() == 0 {
                return Err(NpuError::EventNotRecorded { event: *id });
            }
        }
        for (_, sub) in &self.subs {
            sub.resolved().check(core)?;
        }
        Ok(())
    }
}

impl ModelInner {
    /// Resolves a model's ids against the device and starts its stream workers.
    /// `spawn` starts one stream worker (the device's: workers sit above this file).
    pub fn load(
        core: &Core,
        id: ModelId,
        model: &Model,
        spawn: impl FnMut() -> Arc<StreamState>,
    ) -> Result<Self, NpuError> {
        let resolved = ResolvedModel::resolve(core, model)?;
        let mut spawn = spawn;
        let workers = (0..model.streams.len()).map(|_| spawn()).collect();
        Ok(ModelInner {
            id,
            resolved: Mutex::new(Arc::new(resolved)),
            workers,
            running: Mutex::new(()),
        })
    }

    /// The task lists for an execution issued now, its launches resolved again first if a
    /// segment was unmapped since they were: an unmap (out-of-memory recovery, emptying
    /// the cache) would otherwise leave the model on the slow path for good.
    pub fn resolved_for_execution(&self, core: &Core) -> Result<Arc<ResolvedModel>, NpuError> {
        let mut resolved = self.resolved.lock().unwrap_or_else(PoisonError::into_inner);
        if resolved.epoch != core.memory.unmap_epoch() {
            let model = Model {
                name: String::new(),
                streams: resolved.streams.clone(),
                start_values: resolved.start_values.clone(),
            };
            *resolved = Arc::new(ResolvedModel::resolve(core, &model)?);
        }
        Ok(resolved.clone())
    }

    /// Replaces the task lists for executions issued from now on. The model keeps its
    /// streams: the new one must have as many.
    pub fn update(&self, core: &Core, model: &Model) -> Result<(), NpuError> {
        if model.streams.len() != self.workers.len() {
            return Err(NpuError::ModelBuild {
                model: format!("{:?}", model.name),
                msg: format!(
                    "an update has {} streams, the loaded model {}",
                    model.streams.len(),
                    self.workers.len()
                ),
            });
        }
        let resolved = Arc::new(ResolvedModel::resolve(core, model)?);
        *self.resolved.lock().unwrap_or_else(PoisonError::into_inner) = resolved;
        Ok(())
    }

    /// Runs the model to completion on the calling worker (the executing stream's, or the
    /// stream of the conditional task that chose it).
    pub fn execute(
        self: &Arc<Self>,
        core: &Core,
        resolved: Arc<ResolvedModel>,
        caller: StreamId,
    ) -> Result<(), NpuError> {
        let _one_run = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        for &(ptr, value) in &resolved.start_values {
            sanitize_value(core, caller, "model start value", ptr, Role::Write);
            write_value(core, ptr, value).map_err(|e| self.failed(e))?;
        }
        // The model's streams start where the caller is, and the caller goes on after all
        // of them (the sanitizer's order; the run itself waits below).
        if let Some(san) = &core.sanitizer {
            for (w, s) in self.workers.iter().zip(&resolved.streams) {
                if s.active_at_start {
                    san.order(LaneKey::Stream(caller), LaneKey::Stream(w.id));
                }
            }
        }
        let events = resolved
            .events
            .iter()
            .map(|(id, e, recorded_here)| {
                let generation = if *recorded_here {
                    e.issue_record()
                } else {
                    e.latest()
                };
                (*id, e.clone(), generation)
            })
            .collect();
        let run = Arc::new(ModelRun {
            model: self.clone(),
            resolved,
            events,
            active: Mutex::new(0),
            cv: Condvar::new(),
            fault: Mutex::new(None),
        });
        for (i, s) in run.resolved.streams.iter().enumerate() {
            if s.active_at_start {
                run.activate(i)?;
            }
        }
        run.wait(&core.shutdown)?;
        if let Some(san) = &core.sanitizer {
            for w in &self.workers {
                san.order(LaneKey::Stream(w.id), LaneKey::Stream(caller));
            }
        }
        let fault = run
            .fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match fault {
            Some(e) => Err(self.failed(e)),
            None => Ok(()),
        }
    }
}

/// Writes a condition value.
/// Tells the sanitizer, if on, of a condition value read or written on `lane`.
fn sanitize_value(core: &Core, lane: StreamId, kind: &'static str, ptr: DevicePtr, role: Role) {
    if let Some(san) = &core.sanitizer {
        let lane = LaneKey::Stream(lane);
        let info = san.task_info(lane, kind, None, None);
        let touch = Touch {
            ptr,
            len: COND_VALUE_BYTES,
            role,
        };
        san.run(lane, &info, &[touch]);
    }
}

fn write_value(core: &Core, ptr: DevicePtr, value: u64) -> Result<(), NpuError> {
    let out = [core.memory.resolve(ptr, COND_VALUE_BYTES)?];
    let mut scratch = Default::default();
    with_spans(&[], &out, &mut scratch, |_, o| {
        o[0].copy_from_slice(&value.to_le_bytes())
    })
}

/// Reads a condition value.
fn read_value(core: &Core, ptr: DevicePtr) -> Result<u64, NpuError> {
    let input = [core.memory.resolve(ptr, COND_VALUE_BYTES)?];
    let mut scratch = Default::default();
    with_spans(&input, &[], &mut scratch, |i, _| {
        let mut b = [0u8; COND_VALUE_BYTES];
        b.copy_from_slice(i[0]);
        u64::from_le_bytes(b)
    })
}

impl ModelRun {
    /// Stream `index`'s prepared launches, by task index; `None` when an unmap since the
    /// model was resolved may have made them stale (then every launch resolves as it runs).
    pub fn prepared(&self, core: &Core, index: usize) -> Option<&[Option<Prepared>]> {
        (core.memory.unmap_epoch() == self.resolved.epoch)
            .then(|| &self.resolved.prepared[index][..])
    }

    /// Runs a conditional task of this run on the calling worker: reads the value, runs the
    /// chosen sub-model to completion; a WHILE reads the value again after each run.
    pub fn cond(
        &self,
        core: &Core,
        kind: CondKind,
        value: DevicePtr,
        models: &[ModelId],
        lane: StreamId,
    ) -> Result<(), NpuError> {
        let run_sub = |id: ModelId| -> Result<(), NpuError> {
            let (_, sub) = self
                .resolved
                .subs
                .iter()
                .find(|(m, _)| *m == id)
                .expect("loading resolved every sub-model of the model");
            sub.execute(core, sub.resolved(), lane)
        };
        let v = read_value(core, value)?;
        match kind {
            CondKind::If if v != 0 => run_sub(models[0]),
            CondKind::If => models.get(1).map_or(Ok(()), |&m| run_sub(m)),
            CondKind::Switch => match usize::try_from(v).ok().and_then(|i| models.get(i)) {
                Some(&m) => run_sub(m),
                None => Ok(()),
            },
            CondKind::While => {
                let mut v = v;
                let mut runs = 0u64;
                while v != 0 {
                    if runs == core.max_while_iterations {
                        return Err(NpuError::WhileWatchdog {
                            limit: core.max_while_iterations,
                        });
                    }
                    runs += 1;
                    run_sub(models[0])?;
                    sanitize_value(core, lane, "conditional", value, Role::Read);
                    v = read_value(core, value)?;
                }
                Ok(())
            }
        }
    }
}
