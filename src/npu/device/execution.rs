//! Loading and executing models against the device: a [`Model`]'s ids resolved into a
//! [`ResolvedModel`] (its launches prepared once: op spec, specialized kernel, argument
//! segments), the checks an execution makes when it is issued, an execution run to
//! completion on the calling worker, and conditional tasks reading their value and
//! running the chosen sub-model. The state these act on is `queue`'s; the stream workers
//! that call in here are above (`stream`), and hand in how to run a list on the calling
//! worker (a [`RunHere`]).
//!
//! Hot path: a WHILE runs its body's model once per iteration, so a model run costs no
//! thread hand-off when the model has one stream (the calling worker runs it), and no
//! allocation once warm (the run is reused, see `ModelInner::spare`). A hand-off to
//! another worker and back is two wake-ups of a sleeping thread, several microseconds,
//! many times what a one-launch body costs (docs/PERFORMANCE.md has the numbers).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::ops::Compute;

use super::access::{self, SpanLocks, with_spans};
use super::error::NpuError;
use super::ids::{DevicePtr, EventId, ModelId, NotifyId};
use super::model::Model;
use super::queue::{ListWorkers, ModelInner, ModelRun, Prepared, ResolvedModel};
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

/// Runs list `index` of a run on the calling worker, to its end (and the cascade lists a
/// final activate hands over): the stream worker's own loop, handed down from `stream`.
pub(crate) type RunHere<'a> = &'a mut dyn FnMut(&Arc<ModelRun>, usize);

/// Sub-model nesting up to which a run's first stream runs on the calling worker's stack;
/// deeper, every stream goes to a list worker (fresh stacks), so a deep tree of
/// conditional tasks cannot overflow one worker's stack.
const INLINE_DEPTH: u32 = 16;

/// Top-level executions, numbered: what the WHILE watchdog counts body runs in.
static EXECUTIONS: AtomicU64 = AtomicU64::new(1);

impl ModelInner {
    /// Resolves a model's ids against the device. Its streams run on the calling worker
    /// and on `lists`, the device's list workers; loading starts no thread.
    pub fn load(
        core: &Core,
        id: ModelId,
        model: &Model,
        lists: Arc<ListWorkers>,
    ) -> Result<Self, NpuError> {
        let resolved = ResolvedModel::resolve(core, model)?;
        Ok(ModelInner {
            id,
            resolved: Mutex::new(Arc::new(resolved)),
            streams: model.streams.len(),
            lists,
            running: Mutex::new(()),
            retired: AtomicBool::new(false),
            spare: Mutex::new(None),
            body_runs: Mutex::new((0, 0)),
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
        if model.streams.len() != self.streams {
            return Err(NpuError::ModelBuild {
                model: format!("{:?}", model.name),
                msg: format!(
                    "an update has {} streams, the loaded model {}",
                    model.streams.len(),
                    self.streams
                ),
            });
        }
        let resolved = Arc::new(ResolvedModel::resolve(core, model)?);
        *self.resolved.lock().unwrap_or_else(PoisonError::into_inner) = resolved;
        Ok(())
    }

    /// Runs the model to completion on the calling worker (the executing stream's, or the
    /// stream of the conditional task that chose it): the first stream that starts with
    /// the model runs right here (`here`), the others on list workers, and the call
    /// returns when every started list has finished. `parent`: the run of the conditional
    /// task that runs this model, `None` for a top-level execution.
    pub fn execute(
        self: &Arc<Self>,
        core: &Core,
        resolved: Arc<ResolvedModel>,
        parent: Option<&ModelRun>,
        here: RunHere<'_>,
        caller: LaneKey,
    ) -> Result<(), NpuError> {
        let _one_run = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if self.retired.load(Ordering::Acquire) {
            return Err(NpuError::InvalidModel(self.id));
        }
        for &(ptr, value) in &resolved.start_values {
            sanitize_value(core, caller, "model start value", ptr, Role::Write);
            write_value(core, ptr, value).map_err(|e| self.failed(e))?;
        }
        // The model's streams start where the caller is, and the caller goes on after all
        // of them (the sanitizer's order; the run itself waits below).
        if let Some(san) = &core.sanitizer {
            for (i, s) in resolved.streams.iter().enumerate() {
                if s.active_at_start {
                    san.order(caller, LaneKey::ModelStream(self.id, i as u32));
                }
            }
        }
        let (execution, depth) = match parent {
            Some(p) => (p.execution, p.depth + 1),
            None => (EXECUTIONS.fetch_add(1, Ordering::Relaxed), 0),
        };
        let run = self.new_run(resolved, execution, depth);
        let mut first = (depth < INLINE_DEPTH)
            .then(|| run.resolved.streams.iter().position(|s| s.active_at_start));
        for (i, s) in run.resolved.streams.iter().enumerate() {
            if s.active_at_start
                && first != Some(Some(i))
                && let Err(e) = run.activate(i)
            {
                // Those started run to their end; the one here does not start.
                run.fail(e);
                first = None;
                break;
            }
        }
        if let Some(Some(i)) = first {
            run.adopt();
            here(&run, i);
        }
        let waited = run.wait(&core.shutdown);
        if waited.is_ok() {
            run.release();
        }
        if let Some(san) = &core.sanitizer {
            for i in 0..run.resolved.streams.len() {
                san.order(LaneKey::ModelStream(self.id, i as u32), caller);
            }
        }
        let fault = run
            .fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        *self.spare.lock().unwrap_or_else(PoisonError::into_inner) = Some(run);
        waited?;
        match fault {
            Some(e) => Err(self.failed(e)),
            None => Ok(()),
        }
    }

    /// A run of `resolved`: the last one again when nothing else holds it (list workers
    /// drop theirs as their jobs end), else a new one.
    fn new_run(&self, resolved: Arc<ResolvedModel>, execution: u64, depth: u32) -> Arc<ModelRun> {
        let generations = |events: &mut Vec<(EventId, Arc<EventState>, u64)>| {
            events.clear();
            events.extend(resolved.events.iter().map(|(id, e, recorded_here)| {
                let generation = if *recorded_here {
                    e.issue_record()
                } else {
                    e.latest()
                };
                (*id, e.clone(), generation)
            }));
        };
        let spare = self
            .spare
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut run) = spare
            && let Some(r) = Arc::get_mut(&mut run)
        {
            generations(&mut r.events);
            *r.active.get_mut().unwrap_or_else(PoisonError::into_inner) = 0;
            *r.fault.get_mut().unwrap_or_else(PoisonError::into_inner) = None;
            r.execution = execution;
            r.depth = depth;
            r.model = self.id;
            r.resolved = resolved;
            r.leases
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
            return run;
        }
        let mut events = Vec::with_capacity(resolved.events.len());
        generations(&mut events);
        Arc::new(ModelRun {
            model: self.id,
            lists: self.lists.clone(),
            resolved,
            events,
            active: Mutex::new(0),
            cv: Condvar::new(),
            fault: Mutex::new(None),
            execution,
            depth,
            leases: Mutex::new(Vec::new()),
        })
    }
}

/// Tells the sanitizer, if on, of a condition value read or written on `lane`.
fn sanitize_value(core: &Core, lane: LaneKey, kind: &'static str, ptr: DevicePtr, role: Role) {
    if let Some(san) = &core.sanitizer {
        let info = san.task_info(lane, kind, None, None);
        let touch = Touch {
            ptr,
            len: COND_VALUE_BYTES,
            role,
        };
        san.run(lane, &info, &[touch]);
    }
}

/// Writes a condition value.
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
    /// chosen sub-model to completion (its first stream through `here`, on this worker); a
    /// WHILE reads the value again after each run. The watchdog bounds the body runs of
    /// each WHILE in one top-level execution, nested ones included: a WHILE inside a
    /// WHILE's body cannot multiply the limit.
    pub fn cond(
        &self,
        core: &Core,
        kind: CondKind,
        value: DevicePtr,
        models: &[ModelId],
        here: RunHere<'_>,
        lane: LaneKey,
    ) -> Result<(), NpuError> {
        let sub = |id: ModelId| -> &Arc<ModelInner> {
            &self
                .resolved
                .subs
                .iter()
                .find(|(m, _)| *m == id)
                .expect("loading resolved every sub-model of the model")
                .1
        };
        let v = read_value(core, value)?;
        let chosen = match kind {
            CondKind::If if v != 0 => Some(models[0]),
            CondKind::If => models.get(1).copied(),
            CondKind::Switch => usize::try_from(v).ok().and_then(|i| models.get(i)).copied(),
            CondKind::While => {
                let body = sub(models[0]);
                let mut v = v;
                while v != 0 {
                    body.count_body_run(self.execution, core.max_while_iterations)?;
                    body.execute(core, body.resolved(), Some(self), &mut *here, lane)?;
                    sanitize_value(core, lane, "conditional", value, Role::Read);
                    v = read_value(core, value)?;
                }
                None
            }
        };
        match chosen {
            Some(id) => {
                let m = sub(id);
                m.execute(core, m.resolved(), Some(self), here, lane)
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::{
        COND_VALUE_BYTES, CondKind, Device, DeviceConfig, Model, ModelId, NpuError, Task,
    };

    fn counting(n: &Arc<AtomicUsize>) -> Task {
        let n = n.clone();
        Task::Callback(Arc::new(move || {
            n.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }))
    }

    /// Loads a model of one stream whose one task counts its runs in `runs`.
    fn load_counting(d: &Device, runs: &Arc<AtomicUsize>) -> ModelId {
        d.load_model(
            &Model::builder()
                .stream(vec![counting(runs)])
                .build()
                .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn loaded_models_hold_no_threads_and_share_the_list_workers() {
        let d = Device::new(DeviceConfig::default());
        let s = d.create_stream();
        let runs = Arc::new(AtomicUsize::new(0));
        let one = Model::builder()
            .stream(vec![counting(&runs)])
            .build()
            .unwrap();
        let ones: Vec<ModelId> = (0..50).map(|_| d.load_model(&one).unwrap()).collect();
        for &m in &ones {
            d.execute_model(m, s).unwrap();
        }
        d.synchronize(s).unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 50);
        assert_eq!(
            d.list_workers(),
            0,
            "a model of one stream runs on the executing stream's worker"
        );
        // Two streams joined by an event; the second's list goes to a list worker.
        let e = d.create_event();
        let two = Model::builder()
            .stream(vec![counting(&runs), Task::EventRecord(e)])
            .stream(vec![Task::EventWait(e), counting(&runs)])
            .build()
            .unwrap();
        let twos: Vec<ModelId> = (0..50).map(|_| d.load_model(&two).unwrap()).collect();
        for _ in 0..3 {
            for &m in &twos {
                d.execute_model(m, s).unwrap();
            }
        }
        d.synchronize(s).unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 50 + 3 * 50 * 2);
        assert_eq!(
            d.list_workers(),
            1,
            "executions one after another: one list beside the executing stream's at a time"
        );
    }

    #[test]
    fn an_execution_queued_before_an_unload_runs_nothing() {
        let d = Device::new(DeviceConfig::default());
        let s = d.create_stream();
        let runs = Arc::new(AtomicUsize::new(0));
        let m = load_counting(&d, &runs);
        // Hold the stream so the execution is still queued when the model goes.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Mutex::new(rx);
        d.submit(
            s,
            Task::Callback(Arc::new(move || {
                rx.lock().unwrap().recv().map_err(|e| e.to_string())
            })),
        )
        .unwrap();
        d.execute_model(m, s).unwrap();
        d.unload_model(m).unwrap();
        tx.send(()).unwrap();
        assert_eq!(d.synchronize(s), Err(NpuError::InvalidModel(m)));
        assert_eq!(runs.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_streams_list_runs_once_per_execution() {
        let again = Model::builder()
            .stream(vec![Task::StreamActivate(0)])
            .build();
        assert!(
            matches!(again, Err(NpuError::ModelBuild { .. })),
            "{again:?}"
        );
        let twice = Model::builder()
            .stream(vec![Task::StreamActivate(2)])
            .stream(vec![Task::StreamActivate(2)])
            .inactive_stream(vec![])
            .build();
        assert!(
            matches!(twice, Err(NpuError::ModelBuild { .. })),
            "{twice:?}"
        );
    }

    /// A WHILE whose body's model has one stream: each iteration runs the body on the
    /// worker that runs the WHILE (no list worker is started), and the watchdog ends a
    /// loop whose condition never clears after exactly the limit.
    #[test]
    fn a_while_runs_its_body_here_up_to_the_watchdog() {
        let d = Device::new(DeviceConfig {
            max_while_iterations: 1000,
            ..DeviceConfig::default()
        });
        let s = d.create_stream();
        let cond = d.malloc(COND_VALUE_BYTES, s).unwrap();
        d.memset(cond, 1, COND_VALUE_BYTES).unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let body = load_counting(&d, &runs);
        let top = d
            .load_model(
                &Model::builder()
                    .stream(vec![Task::Cond {
                        kind: CondKind::While,
                        value: cond,
                        models: vec![body],
                    }])
                    .build()
                    .unwrap(),
            )
            .unwrap();
        for round in 1..=2 {
            d.execute_model(top, s).unwrap();
            let e = d.synchronize(s).unwrap_err();
            assert!(
                matches!(&e, NpuError::ModelRun { source, .. }
                    if matches!(**source, NpuError::WhileWatchdog { limit: 1000 })),
                "{e}"
            );
            // Each execution counts afresh.
            assert_eq!(runs.load(Ordering::SeqCst), 1000 * round);
        }
        assert_eq!(d.list_workers(), 0);
    }
}
