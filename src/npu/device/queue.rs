//! A stream's queue and what travels through it: [`StreamState`] (the bounded queue, the
//! submitted and completed counters, the fault slot, the worker's handle), the [`Job`]s a
//! worker receives, the loaded-model state those jobs carry ([`ModelInner`],
//! [`ResolvedModel`], [`ModelRun`]) and the device's list workers that run model streams
//! ([`ListWorkers`]): a model's streams run as jobs on stream workers, and their jobs are
//! model runs, so these types are one knot and live together, below everything that acts
//! on them.
//!
//! Model streams own no threads. A loaded model is data; when it runs, the worker that
//! executes it runs its first stream itself, and each other stream it starts goes to a
//! worker leased from the device's [`ListWorkers`] for that one list, returned when the
//! list is done. So threads follow how many lists run at once, not how many models are
//! loaded (a script may capture and keep thousands of models; a thread each would soon be
//! refused by the system), and a model of one stream, a WHILE body say, runs with no
//! thread hand-off at all.
//!
//! What is here needs no device: queueing, counting, waiting, faults, and a model run's
//! bookkeeping (activating its streams, counting finished lists). Running a job is the
//! worker's (`stream`); resolving and executing a model against the device is
//! `execution`'s.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::ops::{OpSpec, SpecialFn};

use super::access::SpanLocks;
use super::error::NpuError;
use super::ids::{DevicePtr, EventId, ModelId, NotifyId, StreamId};
use super::model::ModelStream;
use super::sync::{EventState, NotifyState};
use super::task::{AllocOutputs, Launch, Task};

const SHUTDOWN_POLL: Duration = Duration::from_millis(50);
/// Scheduler turns a waiter yields before it sleeps.
const SPIN_YIELDS: usize = 32;

/// Makes the lazy state of a blocking receive now: the calling thread's channel context
/// and the receiver's waiter list (which keeps its capacity). Without this, the first
/// time a worker finds its queue empty (which under load can be many executions in) it
/// allocates, and a steady-state execution would not be allocation-free. On an empty
/// channel a non-blocking select registers the receive and withdraws it at once.
pub(super) fn warm_receiver<T>(rx: &Receiver<T>) {
    let mut sel = crossbeam_channel::Select::new();
    sel.recv(rx);
    if let Ok(op) = sel.try_select() {
        // Not empty after all: complete the selected receive; the message is dropped,
        // which only happens on the private channel (the stream's queue is empty here).
        let _ = op.recv(rx);
    }
}

/// A stream's queue and counters, shared by the submitters and its worker.
pub(crate) struct StreamState {
    pub id: StreamId,
    tx: Sender<Job>,
    /// 0: unbounded (a model's streams, fed by the device itself).
    pub(super) depth: usize,
    /// Jobs sent. Locked across the send so the count is the job's place in the queue.
    pub(super) submitted: Mutex<u64>,
    pub(super) completed: AtomicU64,
    waiters: AtomicUsize,
    idle: Mutex<()>,
    cv: Condvar,
    pub(super) faulted: AtomicBool,
    fault: Mutex<Option<NpuError>>,
    pub handle: Mutex<Option<JoinHandle<()>>>,
    /// Destroyed: nothing runs inline on it any more (set under `submitted`).
    pub(super) retired: AtomicBool,
}

impl StreamState {
    /// Waits for the worker thread to end, once it was told to (a worker that ends itself,
    /// its own handle, is not joined).
    pub fn join(&self) {
        let handle = self
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

    /// A stream's queue (bounded by `depth`; 0: unbounded) and counters, with the
    /// receiving end its worker takes.
    pub fn new(id: StreamId, depth: usize) -> (Arc<StreamState>, Receiver<Job>) {
        let (tx, rx) = if depth == 0 {
            crossbeam_channel::unbounded()
        } else {
            crossbeam_channel::bounded(depth)
        };
        let stream = Arc::new(StreamState {
            id,
            tx,
            depth,
            submitted: Mutex::new(0),
            completed: AtomicU64::new(0),
            waiters: AtomicUsize::new(0),
            idle: Mutex::new(()),
            cv: Condvar::new(),
            faulted: AtomicBool::new(false),
            fault: Mutex::new(None),
            handle: Mutex::new(None),
            retired: AtomicBool::new(false),
        });
        // Nobody else holds the sender yet, so the queue is empty and this registers.
        warm_receiver(&rx);
        (stream, rx)
    }

    /// Queues a job; `block`: wait while the queue is full, else fail with `QueueFull`.
    /// An event record gets its generation here, once the job is sure to be queued.
    pub fn send(&self, mut job: Job, block: bool) -> Result<(), NpuError> {
        let mut n = self
            .submitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Only this lock's holder adds to the queue, so room seen here stays.
        if !block && self.depth > 0 && self.tx.len() >= self.depth {
            return Err(NpuError::QueueFull {
                stream: self.id,
                depth: self.depth,
            });
        }
        if let Job::EventRecord {
            event, generation, ..
        } = &mut job
        {
            *generation = event.issue_record();
        }
        self.tx.send(job).map_err(|_| NpuError::DeviceLost)?;
        *n += 1;
        Ok(())
    }

    /// Marks the stream destroyed, waiting for an inline run in progress to end.
    pub fn retire(&self) {
        let _n = self
            .submitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.retired.store(true, Ordering::Relaxed);
    }

    /// Queues a job when there is room, without counting it (the shutdown wake-up).
    pub fn nudge(&self) {
        let _ = self.tx.try_send(Job::Shutdown);
    }

    pub fn submitted(&self) -> u64 {
        *self
            .submitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::SeqCst)
    }

    /// Waits until `target` jobs have completed.
    pub fn wait_for(&self, target: u64, shutdown: &AtomicBool) -> Result<(), NpuError> {
        // A short task is done within a few scheduler turns: yielding that long first
        // spares the worker a wake-up call and the waiter a sleep (about half the latency
        // of a synchronize on a short task), and costs little when the wait is long.
        for _ in 0..SPIN_YIELDS {
            if self.completed() >= target {
                return Ok(());
            }
            std::thread::yield_now();
        }
        let mut g = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        // Registered before the check: the worker's add is either seen by the check or
        // followed by its look at `waiters`, which then wakes us (both are SeqCst).
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut result = Ok(());
        while self.completed() < target {
            if shutdown.load(Ordering::Acquire) {
                result = Err(NpuError::DeviceLost);
                break;
            }
            g = self
                .cv
                .wait_timeout(g, SHUTDOWN_POLL)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Waits for everything submitted so far; does not touch the fault.
    pub fn drain(&self, shutdown: &AtomicBool) -> Result<(), NpuError> {
        self.wait_for(self.submitted(), shutdown)
    }

    pub(super) fn complete_one(&self) {
        self.completed.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            self.cv.notify_all();
        }
    }

    pub fn wake(&self) {
        let _g = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        self.cv.notify_all();
    }

    pub(super) fn set_fault(&self, e: NpuError) {
        let mut f = self.fault.lock().unwrap_or_else(PoisonError::into_inner);
        if f.is_none() {
            *f = Some(e);
        }
        self.faulted.store(true, Ordering::Release);
    }

    pub(super) fn current_fault(&self) -> Option<NpuError> {
        if !self.faulted.load(Ordering::Acquire) {
            return None;
        }
        self.fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Takes the first fault since the last take; the stream works normally again.
    pub fn take_fault(&self) -> Option<NpuError> {
        let mut f = self.fault.lock().unwrap_or_else(PoisonError::into_inner);
        self.faulted.store(false, Ordering::Release);
        f.take()
    }
}

/// What a stream worker receives.
pub(crate) enum Job {
    /// A checked task.
    Task(Task),
    EventRecord {
        event: Arc<EventState>,
        generation: u64,
    },
    EventWait {
        id: EventId,
        event: Arc<EventState>,
        generation: u64,
    },
    NotifyRecord(Arc<NotifyState>),
    NotifyWait(Arc<NotifyState>),
    LaunchAlloc {
        launch: Arc<Launch>,
        done: Sender<AllocOutputs>,
    },
    /// Runs a model and waits for it, on the stream that executes it, with the task lists
    /// it had when the execution was issued.
    Execute(Arc<ModelInner>, Arc<ResolvedModel>),
    /// Runs one stream's preloaded tasks of a model run, on a list worker leased for it.
    RunList {
        run: Arc<ModelRun>,
        index: usize,
    },
    /// Wakes the worker to see the device shut down.
    Shutdown,
}

/// A loaded model's task lists with every id resolved: what one execution runs. Replaced
/// whole by an update; an execution holds the one it was issued with.
pub(crate) struct ResolvedModel {
    pub(super) streams: Vec<ModelStream>,
    /// Every event the model uses, and whether the model records it.
    pub(super) events: Vec<(EventId, Arc<EventState>, bool)>,
    pub(super) notifies: Vec<(NotifyId, Arc<NotifyState>)>,
    /// The sub-models of conditional tasks.
    pub(super) subs: Vec<(ModelId, Arc<ModelInner>)>,
    /// Every distinct device range the tasks touch, checked at each execution.
    pub(super) ranges: Vec<(DevicePtr, usize)>,
    pub(super) start_values: Vec<(DevicePtr, u64)>,
    /// Each stream's launches resolved at load (op and argument spans), by task index;
    /// valid while the memory's unmap count is `epoch`.
    pub(super) prepared: Vec<Vec<Option<Prepared>>>,
    pub(super) epoch: u64,
    /// Streams started only by one activate task, the last of its list: the worker that
    /// runs that list goes on with this one.
    pub(super) continues: Vec<bool>,
}

/// A model's kernel launch resolved once at load, so running it does no lookup: the op's
/// spec and its arguments' segments (what `Worker::launch` otherwise finds per run).
pub(crate) struct Prepared {
    pub spec: OpSpec,
    /// The op's kernel specialized for the launch's operands, if it has one.
    pub special: Option<SpecialFn>,
    /// The arguments' segments and places (their spans are needed only to make it).
    pub locks: SpanLocks,
}

/// Starts a list worker (the device's: workers are started above this file).
pub(crate) type SpawnWorker = Box<dyn Fn() -> Result<Arc<StreamState>, NpuError> + Send + Sync>;

/// The device's list workers: stream workers (unbounded queues) that run the task lists of
/// model streams, whichever model they belong to. A list is sent to a worker leased for
/// it alone, idle or started then, so a list never waits behind another (lists wait on
/// each other's events, and queued behind one it waits for, a list would deadlock); the
/// worker is idle again once its list has run. The pool grows to the most lists that ever
/// ran at once and keeps its workers until the device shuts down: a leased worker costs a
/// pop and a push, no thread start, in a steady state.
pub(crate) struct ListWorkers {
    idle: Mutex<Vec<Arc<StreamState>>>,
    /// Every worker started, for the shutdown.
    all: Mutex<Vec<Arc<StreamState>>>,
    spawn: SpawnWorker,
}

impl ListWorkers {
    pub fn new(spawn: SpawnWorker) -> ListWorkers {
        ListWorkers {
            idle: Mutex::new(Vec::new()),
            all: Mutex::new(Vec::new()),
            spawn,
        }
    }

    /// A worker for one list: an idle one, or a new one ([`NpuError::ThreadStart`] when
    /// the system refuses the thread).
    fn lease(self: &Arc<Self>) -> Result<Lease, NpuError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let worker = match idle {
            Some(w) => w,
            None => {
                let w = (self.spawn)()?;
                self.all
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(w.clone());
                w
            }
        };
        Ok(Lease {
            workers: self.clone(),
            worker,
        })
    }

    /// Threads started so far.
    pub fn started(&self) -> usize {
        self.all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Wakes every worker to see the device shut down.
    pub fn wake(&self) {
        for w in self
            .all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            w.nudge();
            w.wake();
        }
    }

    /// Stops and joins every worker (the device is shutting down).
    pub fn stop(&self) {
        let all = std::mem::take(&mut *self.all.lock().unwrap_or_else(PoisonError::into_inner));
        for w in &all {
            let _ = w.send(Job::Shutdown, true);
            w.join();
        }
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// A list worker leased for one list of a run; dropping it makes the worker idle again.
/// The run keeps its leases until every list it started has finished, and its execution
/// then drops them: a worker is idle again before the execution returns, so the next one
/// finds it (returned by the worker itself, as its job ended, a worker could be late for
/// the next execution, which would start another).
pub(crate) struct Lease {
    workers: Arc<ListWorkers>,
    worker: Arc<StreamState>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Its list has finished (what is left of the job runs no task and waits for
        // nothing) or was never sent.
        self.workers
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.worker.clone());
    }
}

/// A loaded model.
pub(crate) struct ModelInner {
    pub id: ModelId,
    pub(super) resolved: Mutex<Arc<ResolvedModel>>,
    /// Its stream count, which an update keeps.
    pub(super) streams: usize,
    /// Where the streams an execution starts run, besides the first.
    pub(super) lists: Arc<ListWorkers>,
    pub(super) running: Mutex<()>,
    /// Unloaded: an execution queued before runs nothing.
    pub(super) retired: AtomicBool,
    /// The last finished run, reused by the next when nothing holds it any more: a WHILE
    /// runs its body's model once per iteration, and a run allocated per iteration
    /// would make a steady-state loop allocate.
    pub(super) spare: Mutex<Option<Arc<ModelRun>>>,
    /// As a WHILE task's body: (the top-level execution, body runs in it so far), for
    /// the watchdog.
    pub(super) body_runs: Mutex<(u64, u64)>,
}

impl ModelInner {
    /// The task lists an execution issued now runs.
    pub fn resolved(&self) -> Arc<ResolvedModel> {
        self.resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn failed(&self, e: NpuError) -> NpuError {
        NpuError::ModelRun {
            model: self.id,
            source: Box::new(e),
        }
    }

    /// Waits for a run in progress and retires the model: executions queued before run
    /// nothing.
    pub fn stop(&self) {
        let _idle = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        self.retired.store(true, Ordering::Release);
    }

    /// Counts one more run as the body of a WHILE in top-level execution `execution`;
    /// [`NpuError::WhileWatchdog`] when it would be run `limit` + 1 times in it.
    pub(super) fn count_body_run(&self, execution: u64, limit: u64) -> Result<(), NpuError> {
        let mut runs = self
            .body_runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if runs.0 != execution {
            *runs = (execution, 0);
        }
        if runs.1 >= limit {
            return Err(NpuError::WhileWatchdog { limit });
        }
        runs.1 += 1;
        Ok(())
    }
}

/// One execution of a model.
pub(crate) struct ModelRun {
    /// The model run (its streams are the sanitizer's lanes `(model, index)`).
    pub(super) model: ModelId,
    /// Where the lists it starts run.
    pub(super) lists: Arc<ListWorkers>,
    pub(super) resolved: Arc<ResolvedModel>,
    /// Each event's generation for this run.
    pub(super) events: Vec<(EventId, Arc<EventState>, u64)>,
    /// Started lists not finished yet.
    pub(super) active: Mutex<usize>,
    pub(super) cv: Condvar,
    pub(super) fault: Mutex<Option<NpuError>>,
    /// The top-level execution this run is part of (a sub-model's run shares its
    /// parent's): what the WHILE watchdog counts in.
    pub(super) execution: u64,
    /// Sub-model nesting: 0 for a top-level execution.
    pub(super) depth: u32,
    /// The list workers leased for its lists (see [`Lease`]).
    pub(super) leases: Mutex<Vec<Lease>>,
}

impl ModelRun {
    pub fn tasks(&self, index: usize) -> &[Task] {
        &self.resolved.streams[index].tasks
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
            .resolved
            .notifies
            .iter()
            .find(|(n, _)| *n == id)
            .expect("loading listed every notify of the model")
            .1
    }

    /// Whether stream `index` goes on on the worker whose list's last task activates it.
    pub fn continues(&self, index: usize) -> bool {
        self.resolved.continues[index]
    }

    /// Counts a list this worker takes over (see [`ModelRun::continues`]).
    pub fn adopt(&self) {
        *self.active.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    /// Starts model stream `index` for this run, on a list worker leased for it.
    pub fn activate(self: &Arc<Self>, index: usize) -> Result<(), NpuError> {
        let lease = self.lists.lease()?;
        let worker = lease.worker.clone();
        self.leases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(lease);
        *self.active.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        let job = Job::RunList {
            run: self.clone(),
            index,
        };
        if let Err(e) = worker.send(job, true) {
            self.finish(None);
            return Err(e);
        }
        Ok(())
    }

    /// Makes the workers leased for its lists idle again (every list has finished).
    pub(super) fn release(&self) {
        self.leases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Records a fault no list had (a list that could not be started).
    pub fn fail(&self, e: NpuError) {
        self.fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(e);
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

    pub(super) fn wait(&self, shutdown: &AtomicBool) -> Result<(), NpuError> {
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
