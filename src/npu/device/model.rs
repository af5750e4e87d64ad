//! Models: a set of streams with preloaded task lists, started by one call, the way a
//! sunk static model runs on Ascend (and what a captured ACL graph becomes).
//!
//! A [`Model`] is plain data built with [`Model::builder`]: stream `i` is the `i`-th
//! `stream`/`inactive_stream` call. Loading it ([`super::Device::load_model`]) checks its
//! ids against the device, gives each model stream its own worker, and keeps the task lists
//! for every run. Executing it on a stream ([`super::Device::execute_model`]) queues one job
//! there; when the stream reaches it, the job starts the model's active streams, waits until
//! every started stream has run its list (a [`Task::StreamActivate`] starts another one and
//! counts it in), and reports the run's first fault as the executing stream's fault. So work
//! queued behind the execution on that stream sees the model's results, and a model runs
//! as often as it is executed, one run at a time.
//!
//! Events inside a model: an event the model records is recorded at most once in it (the
//! builder refuses more), and a wait on it inside the model waits for this run's record,
//! wherever the two tasks sit (the capture feature's fork/join edges). A wait on an event
//! the model does not record waits for the latest record issued before the run started.
//! Notifies are counting semaphores as everywhere.
//!
//! Kernel launches in a model must compute into given outputs: a data-dependent op has
//! nowhere to report its outputs to on a second run. A model runs other models only through
//! a [`Task::Cond`] (ACL Graph's conditional task): its sub-models are loaded first, and the
//! stream that reaches the task runs the chosen one to completion before going on.
//!
//! A loaded model's tasks can be replaced ([`super::Device::update_model`]: ACL Graph's
//! task update): an execution runs the task lists it had when it was issued, so an update
//! takes effect from the next execution issued, never in the middle of one. Values set at
//! each execution start ([`ModelBuilder::start_value`]) are written by the executing stream
//! before any model stream starts (a condition handle's ASSIGN_DEFAULT).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use crate::ops::{Compute, OpSpec, SpecialFn};

use super::access::{self, Plan, with_spans};
use super::stream::StreamState;
use super::sync::{EventState, NotifyState};
use super::task::Launch;
use super::task::{COND_VALUE_BYTES, CondKind, Job, Task};
use super::{Core, DevicePtr, EventId, ModelId, NotifyId, NpuError};

/// One stream of a model.
#[derive(Debug, Clone)]
pub struct ModelStream {
    pub tasks: Vec<Task>,
    /// Started when the model is executed; otherwise only by a [`Task::StreamActivate`].
    pub active_at_start: bool,
}

/// Streams with preloaded tasks.
#[derive(Debug, Clone, Default)]
pub struct Model {
    name: String,
    streams: Vec<ModelStream>,
    start_values: Vec<(DevicePtr, u64)>,
}

impl Model {
    pub fn builder() -> ModelBuilder {
        ModelBuilder::default()
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn streams(&self) -> &[ModelStream] {
        &self.streams
    }
    /// Values written at each execution start (8-byte little-endian, at the address).
    pub fn start_values(&self) -> &[(DevicePtr, u64)] {
        &self.start_values
    }
}

/// Builds a [`Model`]; stream indices are in call order.
#[derive(Debug, Clone, Default)]
pub struct ModelBuilder {
    model: Model,
}

impl ModelBuilder {
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.model.name = name.into();
        self
    }
    /// A stream started when the model is executed.
    pub fn stream(mut self, tasks: Vec<Task>) -> Self {
        self.model.streams.push(ModelStream {
            tasks,
            active_at_start: true,
        });
        self
    }
    /// A stream started only by a [`Task::StreamActivate`] of another.
    pub fn inactive_stream(mut self, tasks: Vec<Task>) -> Self {
        self.model.streams.push(ModelStream {
            tasks,
            active_at_start: false,
        });
        self
    }
    /// Writes `value` as 8 little-endian bytes at `ptr` at each execution start, before any
    /// of the model's streams runs.
    pub fn start_value(mut self, ptr: DevicePtr, value: u64) -> Self {
        self.model.start_values.push((ptr, value));
        self
    }
    /// Checks the model's own consistency: some stream starts, activations name streams
    /// of the model, each event is recorded at most once, conditional tasks have a model
    /// count their kind accepts.
    pub fn build(self) -> Result<Model, NpuError> {
        let m = self.model;
        let bad = |msg: String| NpuError::ModelBuild {
            model: format!("{:?}", m.name),
            msg,
        };
        if !m.streams.iter().any(|s| s.active_at_start) {
            return Err(bad("no stream is active at start".into()));
        }
        let mut recorded = Vec::new();
        for (i, s) in m.streams.iter().enumerate() {
            for t in &s.tasks {
                match t {
                    Task::StreamActivate(k) if *k as usize >= m.streams.len() => {
                        return Err(bad(format!(
                            "stream {i} activates stream {k}, the model has {}",
                            m.streams.len()
                        )));
                    }
                    Task::EventRecord(e) if recorded.contains(e) => {
                        return Err(bad(format!(
                            "event {e} is recorded twice; use one event per record"
                        )));
                    }
                    Task::EventRecord(e) => recorded.push(*e),
                    Task::Cond { kind, models, .. } if !kind.accepts_size(models.len()) => {
                        return Err(bad(format!(
                            "stream {i} has a {kind} task with {} models",
                            models.len()
                        )));
                    }
                    _ => {}
                }
            }
        }
        Ok(m)
    }
}

/// A loaded model's task lists with every id resolved: what one execution runs. Replaced
/// whole by an update; an execution holds the one it was issued with.
pub(crate) struct ModelPlan {
    streams: Vec<ModelStream>,
    /// Every event the model uses, and whether the model records it.
    events: Vec<(EventId, Arc<EventState>, bool)>,
    notifies: Vec<(NotifyId, Arc<NotifyState>)>,
    /// The sub-models of conditional tasks.
    subs: Vec<(ModelId, Arc<ModelInner>)>,
    /// Every distinct device range the tasks touch, checked at each execution.
    ranges: Vec<(DevicePtr, usize)>,
    start_values: Vec<(DevicePtr, u64)>,
    /// Each stream's launches resolved at load (op and argument spans), by task index;
    /// valid while the memory's unmap count is `epoch`.
    prepared: Vec<Vec<Option<Prepared>>>,
    epoch: u64,
    /// Streams started only by one activate task, the last of its list: the worker that
    /// runs that list goes on with this one.
    continues: Vec<bool>,
}

/// A model's kernel launch resolved once at load, so running it does no lookup: the op's
/// spec and its arguments' segments (what `Worker::launch` otherwise finds per run).
pub(crate) struct Prepared {
    pub spec: OpSpec,
    /// The op's kernel specialized for the launch's operands, if it has one.
    pub special: Option<SpecialFn>,
    /// The arguments' segments and places (their spans are needed only to make it).
    pub plan: Plan,
}

impl Prepared {
    fn new(core: &Core, l: &Launch) -> Option<Prepared> {
        let spec = *core.registry.get(l.op())?;
        if !matches!(spec.compute, Some(Compute::Into(_))) {
            return None;
        }
        let (mut ins, mut outs) = (Vec::new(), Vec::new());
        l.resolve(&core.memory, &mut ins, &mut outs).ok()?;
        let mut plan = Plan::default();
        access::plan(&ins, &outs, &mut plan).ok()?;
        let special = l.choose_special(&spec);
        Some(Prepared {
            spec,
            special,
            plan,
        })
    }
}

impl ModelPlan {
    /// Resolves a model's ids against the device (sub-models among the loaded ones).
    fn resolve(core: &Core, model: &Model) -> Result<ModelPlan, NpuError> {
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
        Ok(ModelPlan {
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
            sub.plan().check(core)?;
        }
        Ok(())
    }
}

/// A loaded model.
pub(crate) struct ModelInner {
    pub id: ModelId,
    plan: Mutex<Arc<ModelPlan>>,
    workers: Vec<Arc<StreamState>>,
    running: Mutex<()>,
}

impl ModelInner {
    /// Resolves a model's ids against the device and starts its stream workers.
    pub fn load(core: &Arc<Core>, id: ModelId, model: &Model) -> Result<Self, NpuError> {
        let plan = ModelPlan::resolve(core, model)?;
        let workers = (0..model.streams.len())
            .map(|_| StreamState::spawn(core, core.model_stream_id(), 0))
            .collect();
        Ok(ModelInner {
            id,
            plan: Mutex::new(Arc::new(plan)),
            workers,
            running: Mutex::new(()),
        })
    }

    /// The task lists an execution issued now runs.
    pub fn plan(&self) -> Arc<ModelPlan> {
        self.plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The task lists for an execution issued now, its launches resolved again first if a
    /// segment was unmapped since they were: an unmap (out-of-memory recovery, emptying
    /// the cache) would otherwise leave the model on the slow path for good.
    pub fn plan_for_execution(&self, core: &Core) -> Result<Arc<ModelPlan>, NpuError> {
        let mut plan = self.plan.lock().unwrap_or_else(PoisonError::into_inner);
        if plan.epoch != core.memory.unmap_epoch() {
            let model = Model {
                name: String::new(),
                streams: plan.streams.clone(),
                start_values: plan.start_values.clone(),
            };
            *plan = Arc::new(ModelPlan::resolve(core, &model)?);
        }
        Ok(plan.clone())
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
        let plan = Arc::new(ModelPlan::resolve(core, model)?);
        *self.plan.lock().unwrap_or_else(PoisonError::into_inner) = plan;
        Ok(())
    }

    /// Runs the model to completion on the calling worker (the executing stream's, or the
    /// stream of the conditional task that chose it).
    pub fn execute(self: &Arc<Self>, core: &Core, plan: Arc<ModelPlan>) -> Result<(), NpuError> {
        let _one_run = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        for &(ptr, value) in &plan.start_values {
            write_value(core, ptr, value).map_err(|e| self.failed(e))?;
        }
        let events = plan
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
            plan,
            events,
            active: Mutex::new(0),
            cv: Condvar::new(),
            fault: Mutex::new(None),
        });
        for (i, s) in run.plan.streams.iter().enumerate() {
            if s.active_at_start {
                run.activate(i)?;
            }
        }
        run.wait(&core.shutdown)?;
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

    fn failed(&self, e: NpuError) -> NpuError {
        NpuError::ModelRun {
            model: self.id,
            source: Box::new(e),
        }
    }

    /// Stops the model's stream workers (no run is going: the caller holds `running`).
    pub fn stop(&self) {
        let _idle = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        for w in &self.workers {
            let _ = w.send(Job::Shutdown, true);
            let handle = w
                .handle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(h) = handle
                && h.thread().id() != std::thread::current().id()
            {
                let _ = h.join();
            }
        }
    }

    pub fn wake(&self) {
        for w in &self.workers {
            w.nudge();
            w.wake();
        }
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

/// One execution of a model.
pub(crate) struct ModelRun {
    model: Arc<ModelInner>,
    plan: Arc<ModelPlan>,
    /// Each event's generation for this run.
    events: Vec<(EventId, Arc<EventState>, u64)>,
    /// Started lists not finished yet.
    active: Mutex<usize>,
    cv: Condvar,
    fault: Mutex<Option<NpuError>>,
}

impl ModelRun {
    pub fn tasks(&self, index: usize) -> &[Task] {
        &self.plan.streams[index].tasks
    }

    /// Stream `index`'s prepared launches, by task index; `None` when an unmap since the
    /// model was resolved may have made them stale (then every launch resolves as it runs).
    pub fn prepared(&self, core: &Core, index: usize) -> Option<&[Option<Prepared>]> {
        (core.memory.unmap_epoch() == self.plan.epoch).then(|| &self.plan.prepared[index][..])
    }

    pub fn event(&self, id: EventId) -> (&Arc<EventState>, u64) {
        let (_, e, g) = self
            .events
            .iter()
            .find(|(e, _, _)| *e == id)
            .expect("loading listed every event of the model");
        (e, *g)
    }

    pub fn notify(&self, id: NotifyId) -> &Arc<NotifyState> {
        &self
            .plan
            .notifies
            .iter()
            .find(|(n, _)| *n == id)
            .expect("loading listed every notify of the model")
            .1
    }

    /// Runs a conditional task of this run on the calling worker: reads the value, runs the
    /// chosen sub-model to completion; a WHILE reads the value again after each run.
    pub fn cond(
        &self,
        core: &Core,
        kind: CondKind,
        value: DevicePtr,
        models: &[ModelId],
    ) -> Result<(), NpuError> {
        let run_sub = |id: ModelId| -> Result<(), NpuError> {
            let (_, sub) = self
                .plan
                .subs
                .iter()
                .find(|(m, _)| *m == id)
                .expect("loading resolved every sub-model of the model");
            sub.execute(core, sub.plan())
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
                    v = read_value(core, value)?;
                }
                Ok(())
            }
        }
    }

    /// Whether stream `index` goes on on the worker whose list's last task activates it.
    pub fn continues(&self, index: usize) -> bool {
        self.plan.continues[index]
    }

    /// Counts a list this worker takes over (see [`ModelRun::continues`]).
    pub fn adopt(&self) {
        *self.active.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    /// Starts model stream `index` for this run.
    pub fn activate(self: &Arc<Self>, index: usize) -> Result<(), NpuError> {
        *self.active.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        let job = Job::RunList {
            run: self.clone(),
            index,
        };
        if let Err(e) = self.model.workers[index].send(job, true) {
            self.finish(None);
            return Err(e);
        }
        Ok(())
    }

    /// A started list finished, with its first fault.
    pub fn finish(&self, fault: Option<NpuError>) {
        if let Some(e) = fault {
            self.fault
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert(e);
        }
        let mut active = self.active.lock().unwrap_or_else(PoisonError::into_inner);
        *active -= 1;
        if *active == 0 {
            self.cv.notify_all();
        }
    }

    fn wait(&self, shutdown: &AtomicBool) -> Result<(), NpuError> {
        let mut active = self.active.lock().unwrap_or_else(PoisonError::into_inner);
        while *active > 0 {
            if shutdown.load(Ordering::Acquire) {
                return Err(NpuError::DeviceLost);
            }
            active = self
                .cv
                .wait_timeout(active, Duration::from_millis(50))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        Ok(())
    }
}
