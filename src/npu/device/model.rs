//! Models: a set of streams with preloaded task lists, started by one call, the way a
//! sunk static model runs on Ascend (and what a captured ACL graph becomes).
//!
//! A [`Model`] is plain data built with [`Model::builder`]: stream `i` is the `i`-th
//! `stream`/`inactive_stream` call. Loading it ([`super::Device::load_model`]) checks its
//! ids against the device and keeps the task lists for every run; it starts no thread.
//! Executing it on a stream ([`super::Device::execute_model`]) queues one job there; when
//! the stream reaches it, the job starts the model's active streams (the first on the
//! stream's own worker, the others on the device's list workers), waits until every
//! started stream has run its list (a [`Task::StreamActivate`] starts another one and
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
//!
//! This file holds the model as plain data. A loaded model's state (its `ResolvedModel`,
//! a run in progress) is in `queue`, with the jobs that carry it;
//! loading and executing it against the device is `execution`.

use super::error::NpuError;
use super::ids::DevicePtr;
use super::task::Task;

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
    pub(super) name: String,
    pub(super) streams: Vec<ModelStream>,
    pub(super) start_values: Vec<(DevicePtr, u64)>,
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
    /// of the model that are not active at start, each at most once (a stream's list runs
    /// once per execution: a stream activating itself would run for ever, and executions
    /// run a list on whichever worker is free, so a list must not run twice at once), each
    /// event is recorded at most once, conditional tasks have a model count their kind
    /// accepts.
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
        let mut activated = vec![false; m.streams.len()];
        for (i, s) in m.streams.iter().enumerate() {
            for t in &s.tasks {
                match t {
                    Task::StreamActivate(k) if *k as usize >= m.streams.len() => {
                        return Err(bad(format!(
                            "stream {i} activates stream {k}, the model has {}",
                            m.streams.len()
                        )));
                    }
                    Task::StreamActivate(k) if m.streams[*k as usize].active_at_start => {
                        return Err(bad(format!(
                            "stream {i} activates stream {k}, which is active at start"
                        )));
                    }
                    Task::StreamActivate(k) if activated[*k as usize] => {
                        return Err(bad(format!("stream {k} is activated twice")));
                    }
                    Task::StreamActivate(k) => activated[*k as usize] = true,
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
