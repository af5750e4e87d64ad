//! Streams: a bounded queue of jobs and the worker thread that runs them in order. The
//! queue and its counters are `queue`'s ([`StreamState`]); this file starts a stream's
//! worker and runs its jobs, inline on the submitting thread when the stream is idle.
//!
//! The host submits; the worker runs each job, then counts it completed. The counters are
//! what everything else orders by: `synchronize` waits until the completed count reaches
//! the submitted count it read, the allocator settles a block freed on a stream once the
//! stream's completed count passes the free, and the out-of-memory path waits for them.
//!
//! A job that fails puts its error in the stream's fault slot (the first one only) and
//! faults the stream: until `synchronize` takes the fault, the worker skips the tasks that
//! touch memory (their inputs may be what the failed task did not write) but still runs
//! event and notify records and waits, so other streams are neither starved nor deadlocked
//! (a record on a faulted stream poisons its event). After the fault is taken the stream
//! works again.
//!
//! Hot path: a job moves through a preallocated bounded channel; the worker keeps its
//! scratch vectors across jobs (see [`super::access`]); completing a job is one atomic add,
//! and the condition variable is touched only when someone waits. So a task allocates
//! nothing beyond itself on its way through.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use crossbeam_channel::Receiver;

use crate::ops::HostTensor;
use crate::ops::{Compute, InferCtx, OpError, OpSpec, SpecialFn, Tensor, TensorMut, TensorRef};

use super::access::{Scratch, SpanLocks, reuse, span_locks, with_span_locks, with_spans};
use super::error::NpuError;
use super::ids::{DevicePtr, StreamId};
use super::memory::Span;
use super::queue::{Job, ModelRun, StreamState, warm_receiver};
use super::recorder::Started;
use super::sanitizer::{LaneKey, POISON, Role, Sanitizer, TaskInfo, Touch};
use super::state::Core;
use super::task::{Launch, NO_VALUES, Task, TensorArg};

/// Drops a stream worker's pool when the worker is done with it.
struct Release(Arc<Mutex<Option<rayon::ThreadPool>>>);

impl Drop for Release {
    fn drop(&mut self) {
        drop(self.0.lock().unwrap_or_else(PoisonError::into_inner).take());
    }
}

impl StreamState {
    /// A stream and its worker; [`NpuError::ThreadStart`] when the system refuses the
    /// thread.
    pub fn spawn(
        core: &Arc<Core>,
        id: StreamId,
        depth: usize,
    ) -> Result<Arc<StreamState>, NpuError> {
        let (stream, rx) = StreamState::new(id, depth);
        let (core, mine) = (core.clone(), stream.clone());
        // Spawning returns once the worker has started and set itself up: a thread's
        // start-up allocates, and a worker that had no job yet (launches on an idle stream
        // run on the submitting thread) could otherwise first run on a loaded machine in
        // the middle of a steady-state execution, allocating there.
        let (ready, started) = crossbeam_channel::bounded::<()>(1);
        // The worker is built on its thread: its scratch holds lock guards' vectors, which
        // must not cross threads.
        let body = move || {
            // This thread's blocking context, made now rather than at its first wait.
            // (The sender is kept: a disconnected channel is ready and registers nothing.)
            let (_keep, private) = crossbeam_channel::bounded::<()>(1);
            warm_receiver(&private);
            let worker = Worker {
                core,
                stream: mine,
                lane: Lane::default(),
            };
            let _ = ready.send(());
            worker.run(rx);
        };
        // The worker thread is the only thread of a pool of its own: a small kernel then
        // runs right here, with no hand-off to the compute cores (a hand-off costs
        // microseconds and a heap allocation now and then), and any parallel split inside
        // it stays on this thread instead of reaching for a pool whose threads may be
        // blocked on this device. The worker runs as that pool's one job, on a thread
        // spawned here: a pool that adopts its current thread (`use_current_thread`)
        // leaks the thread's rayon state for good, some 7 KB a stream, which a process
        // making devices one after another (a server, a fuzzer) piles up.
        let mut handle = None;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            // The worker's own panics are caught; one escaping must end the thread, as
            // before, not abort the process (rayon's default for a panicking job).
            .panic_handler(|_| {})
            .spawn_handler(|t| {
                let h = std::thread::Builder::new()
                    .name(format!("npu-{id}"))
                    .spawn(move || t.run())?;
                handle = Some(h);
                Ok(())
            })
            .build();
        let handle = match (pool, handle) {
            (Ok(pool), Some(handle)) => {
                // The pool is dropped when the worker is done (by a panic too), which
                // lets its thread end; it is in the slot before the job can finish.
                let slot = Arc::new(Mutex::new(None::<rayon::ThreadPool>));
                let release = Release(slot.clone());
                let mut held = slot.lock().unwrap_or_else(PoisonError::into_inner);
                held.insert(pool).spawn(move || {
                    let _release = release;
                    body();
                });
                drop(held);
                handle
            }
            // Without its own pool every kernel goes to the compute cores.
            _ => std::thread::Builder::new()
                .name(format!("npu-{id}"))
                .spawn(body)
                .map_err(|e| NpuError::ThreadStart {
                    what: "stream worker",
                    msg: e.to_string(),
                })?,
        };
        // An error means the worker died during its set-up; its handle reports that.
        let _ = started.recv();
        *stream.handle.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle);
        Ok(stream)
    }

    /// Issues a job: [`StreamState::send`], except that a kernel launch (see
    /// [`Here::for_launch`]) or a copy reaching an idle stream runs now, on the calling
    /// thread (see [`StreamState::with_idle`]).
    ///
    /// A copy of any size runs here: the worker would make the same single-threaded
    /// copy, after a hand-off that costs more than copying a few hundred kilobytes, and
    /// a model's input upload that runs here leaves the stream idle for the launches
    /// after it, which then run here too. (Queuing it made every execution of a small
    /// model with a 128 KiB input hand its whole Main to the worker and wait for it:
    /// two thread wake-ups, most of the execution's time.)
    pub fn submit(&self, core: &Core, job: Job, block: bool) -> Result<(), NpuError> {
        let here = match &job {
            Job::Task(Task::Launch(l)) => Here::for_launch(core, l),
            Job::Task(
                Task::MemcpyH2D { .. }
                | Task::MemcpyD2H { .. }
                | Task::MemcpyD2D { .. }
                | Task::Memset { .. },
            ) => Here::Small,
            _ => Here::Nothing,
        };
        let mut job = Some(job);
        if here != Here::Nothing
            && let Some(()) = self.with_idle(core, here, |exec, n| {
                *n += 1;
                exec.run_job(job.take().expect("taken once"));
            })
        {
            return Ok(());
        }
        self.send(job.take().expect("not taken"), block)
    }

    /// Runs a launch record now when the stream is idle: its checks, and its resolution
    /// when the record's cache (`Launch::resolved`) no longer holds, then the kernel.
    /// `None`: the stream is busy, queue the launch. `Some(Err)`: the launch is refused as
    /// a submission refuses it (nothing was counted).
    ///
    /// Where a large kernel runs is [`Here::for_launch`]'s choice: on a device of one
    /// compute core, right here; else on the compute cores, entered from here (one thread
    /// hand-off, caller to cores, instead of two: caller to the stream's worker, worker
    /// to cores).
    pub fn run_inline(&self, core: &Core, l: &mut Launch) -> Option<Result<(), NpuError>> {
        let here = Here::for_launch(core, l);
        if here == Here::Nothing {
            return None;
        }
        // Not counted as submitted and completed: it is both before this returns, and
        // the counts only order what waits on the stream, which was idle and is again.
        // (Counting cost an atomic read-modify-write per launch.)
        self.with_idle(core, here, |exec, _| {
            // A launch run here is a synchronous call: after what the host did before it,
            // and before what the host does after it returns.
            if let Some(san) = &core.sanitizer {
                san.reached(exec.stream.id, None);
                san.order(LaneKey::Host, LaneKey::Stream(exec.stream.id));
            }
            exec.check(l)?;
            let started = exec.core.recorder.start_launch(l);
            let r = exec.cached_launch(l);
            exec.finished(started, r);
            if let Some(san) = &core.sanitizer {
                san.order(LaneKey::Stream(exec.stream.id), LaneKey::Host);
            }
            Ok(())
        })
    }

    /// Copies the host bytes `src` to `dst` now, on this thread, if the stream is idle: the
    /// copy a [`Task::MemcpyH2D`] makes, without first copying `src` into the task's
    /// staging buffer (for a model input of a few hundred KB, that copy was as long as the
    /// upload itself). Checked, sanitized and recorded as the task is, and ordered as
    /// [`StreamState::run_inline`] orders a launch: after what the host did before, before
    /// what it does after. `None`: the stream is busy; stage the bytes and submit.
    pub fn copy_in_inline(
        &self,
        core: &Core,
        dst: DevicePtr,
        src: &[u8],
    ) -> Option<Result<(), NpuError>> {
        self.with_idle(core, Here::Small, |exec, _| {
            let lane = LaneKey::Stream(exec.stream.id);
            if let Some(san) = &core.sanitizer {
                san.reached(exec.stream.id, None);
                san.order(LaneKey::Host, lane);
            }
            core.check_copy_in(dst, src.len(), lane)?;
            // A faulted stream skips the tasks that touch memory (see the module doc).
            if !exec.stream.faulted.load(Ordering::Acquire) {
                exec.copy_in(dst, src);
            }
            if let Some(san) = &core.sanitizer {
                san.order(lane, LaneKey::Host);
            }
            Ok(())
        })
    }

    /// Calls `f` with this thread's lane and the submitted count, holding the submission
    /// lock, if the stream is idle; `f` counts what it runs. `None`: the stream is busy.
    ///
    /// Why run anything here: a launch of a few hundred bytes computes in tens of
    /// nanoseconds, but handing it to the worker moves the job, the queue's slots and the
    /// counters between two cores and often wakes a sleeping thread: several times the
    /// kernel's own cost, per launch. Running it here keeps the stream's order: the stream
    /// is idle (every job sent has completed) and nothing can be sent while the lock is
    /// held, so the work runs after everything before it and before everything after it,
    /// as the worker would run it. `here` says which kernels `f` computes on this thread;
    /// the others run on the compute cores.
    fn with_idle<R>(
        &self,
        core: &Core,
        here: Here,
        f: impl FnOnce(&mut Exec<'_>, &mut u64) -> R,
    ) -> Option<R> {
        if self.depth == 0 {
            return None;
        }
        let mut n = self
            .submitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.completed.load(Ordering::SeqCst) != *n
            || core.is_shut_down()
            || self.retired.load(Ordering::Relaxed)
        {
            return None;
        }
        Some(INLINE_LANE.with(|cell| {
            let run = |lane: &mut Lane| {
                let mut exec = Exec {
                    core,
                    stream: self,
                    lane,
                    here,
                    clock: LaneKey::Stream(self.id),
                };
                f(&mut exec, &mut n)
            };
            match cell.try_borrow_mut() {
                Ok(mut lane) => run(&mut lane),
                // Never re-entered (a launch issues no work), but not worth a panic.
                Err(_) => run(&mut Lane::default()),
            }
        }))
    }
}

thread_local! {
    /// The lane of the launches this thread runs inline (see [`StreamState::submit`]).
    static INLINE_LANE: std::cell::RefCell<Lane> = std::cell::RefCell::default();
}

/// Launches touching at least this many bytes may split their work over threads: the op
/// library splits nothing below 16K elements (`ops::linalg::PAR_MIN_ELEMS`), 64 KB of
/// `f32`. Below it a kernel may run on any thread, and wakes no helper.
const PARALLEL_BYTES: usize = 64 * 1024;

/// What running tasks needs besides the tasks: vectors and copy space kept between tasks
/// for their capacity. A stream worker keeps one; so does each thread that runs launches
/// inline (see [`StreamState::with_idle`]).
#[derive(Default)]
pub(crate) struct Lane {
    scratch: Scratch,
    spans_in: Vec<Option<Span>>,
    spans_out: Vec<Option<Span>>,
    /// Kernel views of the arguments, kept for their allocation only (empty between tasks).
    refs: Vec<TensorRef<'static>>,
    muts: Vec<TensorMut<'static>>,
}

pub(crate) struct Worker {
    core: Arc<Core>,
    stream: Arc<StreamState>,
    lane: Lane,
}

/// One task's run: the device, the stream it runs for and the running thread's lane.
struct Exec<'a> {
    core: &'a Core,
    stream: &'a StreamState,
    lane: &'a mut Lane,
    /// Which kernels run on this thread rather than on the compute cores.
    here: Here,
    /// The sanitizer's lane for the work: the stream's own, or the model stream whose
    /// list runs (a worker may go on with another list; see `run_one_list`).
    clock: LaneKey,
}

/// Which kernels a thread computes itself; the others it hands to the device's compute
/// cores (`Core::cores`), whose pool any parallel work they split off then stays in.
///
/// A kernel running on a thread must not split work into a pool other threads use: those
/// may be blocked waiting for this device, and the kernel would wait on them. So a thread
/// runs a kernel itself only where that cannot happen:
/// - a kernel below [`PARALLEL_BYTES`] splits nothing, so it may run on any thread;
/// - a thread that issues launches from outside every rayon pool computes them all in a
///   pool of its own ([`own_pool`]), of as many threads as the device has compute cores:
///   itself and helpers that run nothing but the halves its kernels split off.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Here {
    /// No kernel: a stream worker outside any pool enters the compute cores for each;
    /// a launch issued from a thread of a shared pool is queued for the stream's worker.
    Nothing,
    /// Kernels below [`PARALLEL_BYTES`].
    Small,
    /// Every kernel: on the issuing thread in its own pool ([`own_pool`]), or on a stream
    /// worker of a device of one compute core.
    All,
}

impl Here {
    /// Where a launch issued on this thread may run, if the stream is idle.
    fn for_launch(core: &Core, l: &Launch) -> Here {
        if own_pool(core) {
            Here::All
        } else if l.bytes_touched() < PARALLEL_BYTES {
            Here::Small
        } else if rayon::current_thread_index().is_some() && rayon::current_num_threads() > 1 {
            // A thread of a shared pool entering the compute cores keeps running its own
            // pool's jobs while it waits, and those may be anything: queue instead.
            Here::Nothing
        } else {
            // Outside every pool, or the only thread of one (whose jobs are all its own):
            // the compute cores are entered from here.
            Here::Small
        }
    }

    /// Whether a kernel touching `bytes` runs on this thread.
    fn runs(self, bytes: impl FnOnce() -> usize) -> bool {
        match self {
            Here::All => true,
            Here::Small => bytes() < PARALLEL_BYTES,
            Here::Nothing => false,
        }
    }
}

/// The rayon pool a thread that issues launches computes them in (see [`own_pool`]).
struct OwnPool {
    pool: rayon::ThreadPool,
    /// Keeps the helpers polling through a burst of kernels.
    awake: super::awake::Awake,
}

thread_local! {
    /// The calling thread's own pool, made at its first launch; `None` when the thread
    /// was in another pool by then (or its helpers could not be started). Kept for the
    /// thread's life: rayon cannot take a thread back out of a pool it joined, and
    /// dropping it with the thread ends the helpers.
    static OWN_POOL: std::cell::OnceCell<Option<OwnPool>> = const { std::cell::OnceCell::new() };
}

/// Whether the calling thread computes `core`'s kernels itself, in its own pool.
///
/// A thread that issues a launch from outside every rayon pool joins a pool of its own
/// (`use_current_thread`, as index 0) of as many threads as the device has compute
/// cores: itself and `n - 1` helpers. Every kernel it launches then runs right here, and
/// the kernel's parallel loops split over the helpers, which run nothing else. This is
/// how ONNX Runtime's caller thread works with its intra-op pool, and it is what the
/// cores of a two-core machine are best used for: two busy threads on two CPUs. Handing
/// each kernel to the device's compute cores instead, the caller slept while they ran
/// it, was woken at its end (tens of microseconds each on a virtual machine, a sizeable
/// part of a small model's kernels), and made a third runnable thread on two CPUs; that
/// was faster only for kernels of 256 KiB and more, so everything smaller ran on one
/// thread. With the caller computing, a kernel pays no hand-off at all: a split half a
/// helper has not taken (it may still be waking) the caller takes back and runs itself.
///
/// The pool is the thread's for life and sized for the first device it launches to; a
/// device of another core count finds this `false` and is served as from a shared pool.
/// A device of one compute core makes the thread a pool of one: its kernels' parallel
/// loops then run in order, right there.
fn own_pool(core: &Core) -> bool {
    let cores = core.cores.current_num_threads();
    OWN_POOL.with(|own| {
        own.get_or_init(|| {
            if rayon::current_thread_index().is_some() {
                return None;
            }
            rayon::ThreadPoolBuilder::new()
                .num_threads(cores)
                .use_current_thread()
                .thread_name(|i| format!("rt2-helper{i}"))
                .build()
                .ok()
                .map(|pool| OwnPool {
                    pool,
                    awake: super::awake::Awake::new(),
                })
        })
        .as_ref()
        .is_some_and(|own| own.pool.current_num_threads() == cores)
    })
}

/// Sets the helpers of the calling thread's own pool polling (see `awake`), ahead of a
/// kernel it runs that may split its work. Nothing on a thread without one.
fn wake_own_helpers() {
    OWN_POOL.with(|own| {
        if let Some(Some(own)) = own.get() {
            own.awake.touch(&own.pool);
        }
    });
}

/// A host-to-device copy's write: `bytes` into the resolved range `out` (`None`: empty),
/// staged ([`Task::MemcpyH2D`]) or not ([`StreamState::copy_in_inline`]).
fn write_span(out: Option<Span>, bytes: &[u8], scratch: &mut Scratch) -> Result<(), NpuError> {
    with_spans(&[], &[out], scratch, |_, o| {
        if let Some(o) = o.first_mut() {
            o.copy_from_slice(bytes)
        }
    })
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string())
}

impl Worker {
    fn run(mut self, rx: Receiver<Job>) {
        // In its own one-thread pool (see `StreamState::spawn`), a worker runs small
        // kernels itself, and every kernel on a device of one compute core.
        let here = match rayon::current_thread_index() {
            None => Here::Nothing,
            Some(_) if self.core.one_core() => Here::All,
            Some(_) => Here::Small,
        };
        for job in rx.iter() {
            if self.core.is_shut_down() || matches!(job, Job::Shutdown) {
                break;
            }
            let mut exec = Exec {
                core: &self.core,
                stream: &self.stream,
                lane: &mut self.lane,
                here,
                clock: LaneKey::Stream(self.stream.id),
            };
            exec.run_job(job);
        }
        // Queued jobs may hold a model run, which holds senders to model streams: drop them
        // here so nothing keeps a channel alive after its worker is gone.
        while rx.try_recv().is_ok() {}
    }
}

impl Exec<'_> {
    /// Runs one job of the stream and counts it completed; a failure faults the stream.
    fn run_job(&mut self, job: Job) {
        if let Some(san) = &self.core.sanitizer {
            san.reached(self.stream.id, Some(self.stream.completed() + 1));
        }
        // One relaxed load when the recorder is off (see `recorder`).
        let started = self.core.recorder.start(&job);
        let r = self.job(job);
        self.counted(started, r);
    }

    /// Ends a job `started` with `r`: recorded, counted completed; a failure faults the
    /// stream.
    fn counted(&mut self, started: Option<Started>, r: Result<(), NpuError>) {
        self.finished(started, r);
        self.stream.complete_one();
    }

    /// [`Exec::counted`] without the count, for work run inline (`run_inline`).
    #[inline]
    fn finished(&mut self, started: Option<Started>, r: Result<(), NpuError>) {
        if let Some(s) = started {
            self.core.recorder.finish(self.stream.id, s, r.is_ok());
        }
        if let Err(e) = r {
            self.stream.set_fault(e);
        }
    }

    /// A launch record's submission checks, unless its cache says they hold.
    fn check(&mut self, l: &mut Launch) -> Result<(), NpuError> {
        let memory = &self.core.memory;
        if l.resolved.checked(self.core.id, memory.free_epoch(), l) {
            l.resolved.current = true;
            return Ok(());
        }
        let frees = {
            let heap = memory.heap();
            if let Err(e) = l.each_range(|ptr, len| heap.check(ptr, len)) {
                drop(heap);
                if self.core.sanitizer.is_some() {
                    // Checked again, to report the refusal as a memcheck finding.
                    let _ = self
                        .core
                        .check_ranges(&Task::Launch(Arc::new(l.clone())), self.clock);
                }
                return Err(e);
            }
            // Read with the heap locked: frees are counted under the lock.
            memory.free_epoch()
        };
        l.note_checked(self.core.id, frees);
        Ok(())
    }

    /// Runs a checked launch record through its cached spec and spans, resolving them
    /// first when they are missing or an unmap made them stale.
    fn cached_launch(&mut self, l: &mut Launch) -> Result<(), NpuError> {
        // A faulted stream skips data tasks (see `job`).
        if self.stream.faulted.load(Ordering::Acquire) {
            return Ok(());
        }
        let memory = &self.core.memory;
        let unmaps = memory.unmap_epoch();
        if l.resolved.spans.is_none_or(|(_, at)| at != unmaps) {
            let spec = self.core.op_spec(l.op())?;
            // The spans are only needed to make the span locks, which keep what a run reads.
            let (mut ins, mut outs) = self.take_spans();
            let r = l.resolve(memory, &mut ins, &mut outs);
            let r = r.and_then(|()| span_locks(&ins, &outs, &mut l.resolved.locks));
            self.keep_spans(ins, outs);
            r?;
            l.resolved.spans = Some((spec, unmaps));
        }
        let (spec, _) = l.resolved.spans.expect("resolved above");
        let special = l.special(&spec);
        let l = &*l;
        self.run_launch(l, &spec, special, false, &l.resolved.locks)
            .map(drop)
    }

    fn job(&mut self, job: Job) -> Result<(), NpuError> {
        let faulted = self.stream.faulted.load(Ordering::Acquire);
        let shutdown = &self.core.shutdown;
        match job {
            Job::Task(t) if faulted && t.is_data() => Ok(()),
            Job::Task(t) => self.task(&t),
            Job::EventRecord { event, generation } => {
                if let Some(san) = &self.core.sanitizer {
                    san.event_record(key(&event), generation, self.clock);
                }
                event.complete(generation, self.stream.current_fault());
                Ok(())
            }
            Job::EventWait {
                id,
                event,
                generation,
            } => {
                event.wait(id, generation, shutdown)?;
                if let Some(san) = &self.core.sanitizer {
                    san.event_wait(key(&event), generation, self.clock);
                }
                Ok(())
            }
            Job::NotifyRecord(n) => {
                if let Some(san) = &self.core.sanitizer {
                    san.notify_record(key(&n), self.clock);
                }
                n.record();
                Ok(())
            }
            Job::NotifyWait(n) => {
                n.wait(shutdown)?;
                if let Some(san) = &self.core.sanitizer {
                    san.notify_wait(key(&n), self.clock);
                }
                Ok(())
            }
            Job::LaunchAlloc { launch, done } => {
                let r = match self.stream.current_fault() {
                    Some(e) => Err(e),
                    None => self.launch(&launch, true),
                };
                let _ = done.send(r.clone());
                // A skipped launch reports the earlier fault to its waiter only.
                if faulted { Ok(()) } else { r.map(drop) }
            }
            Job::Execute(..) if faulted => Ok(()),
            Job::Execute(model, resolved) => {
                let (core, caller) = (self.core, self.clock);
                let here = &mut |run: &Arc<ModelRun>, i| self.run_list(run, i);
                model.execute(core, resolved, None, here, caller)
            }
            Job::RunList { run, index } => {
                self.run_list(&run, index);
                Ok(())
            }
            Job::Shutdown => Ok(()),
        }
    }

    /// Runs one model stream's preloaded tasks for `run`.
    fn run_list(&mut self, run: &Arc<ModelRun>, first: usize) {
        let core = self.core;
        let mut index = first;
        loop {
            match self.run_one_list(core, run, index) {
                Some(next) => index = next,
                None => return,
            }
        }
    }

    /// Runs one list; returns the stream a final activate task hands over to this worker
    /// (a cascade stream that only that task starts: running it here saves a thread
    /// hand-off per cascade level and keeps the chain's order).
    fn run_one_list(&mut self, core: &Core, run: &Arc<ModelRun>, index: usize) -> Option<usize> {
        let shutdown = &core.shutdown;
        let mut fault: Option<NpuError> = None;
        let mut next = None;
        // Checked once per list: the model's launches were resolved at load.
        let prepared = run.prepared(core, index);
        let tasks = run.tasks(index);
        let san = core.sanitizer.as_ref();
        let lane = LaneKey::ModelStream(run.model, index as u32);
        let outer = std::mem::replace(&mut self.clock, lane);
        for (i, task) in tasks.iter().enumerate() {
            if self.core.is_shut_down() {
                fault.get_or_insert(NpuError::DeviceLost);
                break;
            }
            let r = match task {
                Task::EventRecord(id) => {
                    let (event, generation) = run.event(*id);
                    if let Some(san) = san {
                        san.event_record(key(event), generation, lane);
                    }
                    event.complete(generation, fault.clone());
                    Ok(())
                }
                Task::EventWait(id) => {
                    let (event, generation) = run.event(*id);
                    let r = event.wait(*id, generation, shutdown);
                    if let (Some(san), Ok(())) = (san, &r) {
                        san.event_wait(key(event), generation, lane);
                    }
                    r
                }
                Task::NotifyRecord(id) => {
                    if let Some(san) = san {
                        san.notify_record(key(run.notify(*id)), lane);
                    }
                    run.notify(*id).record();
                    Ok(())
                }
                Task::NotifyWait(id) => {
                    let r = run.notify(*id).wait(shutdown);
                    if let (Some(san), Ok(())) = (san, &r) {
                        san.notify_wait(key(run.notify(*id)), lane);
                    }
                    r
                }
                Task::StreamActivate(j) => {
                    if let Some(san) = san {
                        san.order(lane, LaneKey::ModelStream(run.model, *j));
                    }
                    if i + 1 == tasks.len() && run.continues(*j as usize) {
                        run.adopt();
                        next = Some(*j as usize);
                        Ok(())
                    } else {
                        run.activate(*j as usize)
                    }
                }
                _ if fault.is_some() => Ok(()),
                Task::Launch(l) => match prepared.and_then(|p| p[i].as_ref()) {
                    Some(p) => self
                        .run_launch(l, &p.spec, p.special, false, &p.locks)
                        .map(drop),
                    None => self.launch(l, false).map(drop),
                },
                Task::Cond {
                    kind,
                    value,
                    models,
                } => {
                    self.sanitize(task);
                    let here = &mut |r: &Arc<ModelRun>, j| self.run_list(r, j);
                    run.cond(core, *kind, *value, models, here, lane)
                }
                t => self.task(t),
            };
            if let Err(e) = r {
                fault.get_or_insert(e);
            }
        }
        self.clock = outer;
        run.finish(fault);
        next
    }

    /// Tells the sanitizer, if on, of a task about to touch memory (a launch says more:
    /// see `run_launch`).
    fn sanitize(&self, task: &Task) {
        if self.core.sanitizer.is_some() {
            self.sanitize_as(task.kind(), &task.touches());
        }
    }

    /// Tells the sanitizer, if on, of work of `kind` touching `touches` on this lane.
    fn sanitize_as(&self, kind: &'static str, touches: &[Touch]) {
        if let Some(san) = &self.core.sanitizer {
            let info = san.task_info(self.clock, kind, None, None);
            san.run(self.clock, &info, touches);
        }
    }

    /// [`StreamState::copy_in_inline`]'s copy, as [`Exec::task`] runs a
    /// [`Task::MemcpyH2D`]: sanitized, recorded, and a failure faulting the stream.
    fn copy_in(&mut self, dst: DevicePtr, src: &[u8]) {
        let len = src.len();
        let touch = Touch {
            ptr: dst,
            len,
            role: Role::Write,
        };
        self.sanitize_as(Task::HOST_TO_DEVICE, &[touch]);
        let started = self.core.recorder.start_copy(Task::HOST_TO_DEVICE, len);
        let scratch = &mut self.lane.scratch;
        let r = self.core.memory.resolve(dst, len);
        let r = r.and_then(|out| write_span(out, src, scratch));
        self.finished(started, r);
    }

    /// Runs a task that touches memory (or a callback).
    fn task(&mut self, task: &Task) -> Result<(), NpuError> {
        if !matches!(task, Task::Launch(_)) {
            self.sanitize(task);
        }
        let memory = &self.core.memory;
        let scratch = &mut self.lane.scratch;
        match task {
            Task::Launch(l) => self.launch(l, false).map(drop),
            Task::MemcpyH2D {
                dst,
                src,
                offset,
                len,
            } => {
                let out = memory.resolve(*dst, *len)?;
                src.with(|host| {
                    let bytes = host.get(*offset..offset + len).ok_or(NpuError::HostRange {
                        buffer: host.len(),
                        offset: *offset,
                        len: *len,
                    })?;
                    write_span(out, bytes, scratch)
                })
            }
            Task::MemcpyD2H {
                dst,
                offset,
                src,
                len,
            } => {
                let input = [memory.resolve(*src, *len)?];
                dst.with_mut(|host| {
                    let buffer = host.len();
                    let bytes = host
                        .get_mut(*offset..offset + len)
                        .ok_or(NpuError::HostRange {
                            buffer,
                            offset: *offset,
                            len: *len,
                        })?;
                    with_spans(&input, &[], scratch, |i, _| {
                        if *len > 0 {
                            bytes.copy_from_slice(i[0])
                        }
                    })
                })
            }
            Task::MemcpyD2D { dst, src, len } => {
                let input = [memory.resolve(*src, *len)?];
                let out = [memory.resolve(*dst, *len)?];
                with_spans(&input, &out, scratch, |i, o| o[0].copy_from_slice(i[0]))
            }
            Task::Memset { dst, value, len } => {
                let out = [memory.resolve(*dst, *len)?];
                with_spans(&[], &out, scratch, |_, o| o[0].fill(*value))
            }
            Task::Callback(f) => match std::panic::catch_unwind(AssertUnwindSafe(|| f())) {
                Ok(r) => r.map_err(|msg| NpuError::Callback { msg }),
                Err(p) => Err(NpuError::Callback {
                    msg: panic_message(p),
                }),
            },
            Task::EventRecord(_)
            | Task::EventWait(_)
            | Task::NotifyRecord(_)
            | Task::NotifyWait(_)
            | Task::StreamActivate(_)
            | Task::Cond { .. } => Err(NpuError::TaskNotSupported {
                task: task.kind(),
                context: "outside the stream protocol",
            }),
        }
    }

    /// Runs a kernel launch on device memory. `allocating`: a data-dependent op whose
    /// outputs the launch allocates and returns.
    fn launch(&mut self, l: &Launch, allocating: bool) -> Result<Vec<TensorArg>, NpuError> {
        let spec = self.core.op_spec(l.op())?;
        let (mut ins, mut outs) = self.take_spans();
        let mut p = std::mem::take(&mut self.lane.scratch.locks);
        let r = l
            .resolve(&self.core.memory, &mut ins, &mut outs)
            .and_then(|()| span_locks(&ins, &outs, &mut p));
        self.keep_spans(ins, outs);
        // A shared record (queued) keeps no choice: choosing costs a few comparisons, a
        // fraction of what the specialized kernel saves.
        let special = l.choose_special(&spec);
        let r = r.and_then(|()| self.run_launch(l, &spec, special, allocating, &p));
        self.lane.scratch.locks = p;
        r
    }

    /// The lane's span lists, kept for their capacity, to resolve a launch into.
    fn take_spans(&mut self) -> (Vec<Option<Span>>, Vec<Option<Span>>) {
        (
            std::mem::take(&mut self.lane.spans_in),
            std::mem::take(&mut self.lane.spans_out),
        )
    }

    /// Gives the span lists back, emptied (their segments are not kept alive).
    fn keep_spans(&mut self, mut ins: Vec<Option<Span>>, mut outs: Vec<Option<Span>>) {
        ins.clear();
        outs.clear();
        self.lane.spans_in = ins;
        self.lane.spans_out = outs;
    }

    /// Runs a launch whose op and argument spans are resolved: by [`Exec::launch`], or
    /// once at load for a model's launch (`model::Prepared`), which a model's run then
    /// uses directly: no registry lookup, no segment-map lookup, no reference counting of
    /// segments per task.
    pub(crate) fn run_launch(
        &mut self,
        l: &Launch,
        spec: &OpSpec,
        special: Option<SpecialFn>,
        allocating: bool,
        locks: &SpanLocks,
    ) -> Result<Vec<TensorArg>, NpuError> {
        let core = self.core;
        let here = self.here;
        let op = l.op();
        let spec = *spec;
        let kernel_error = |source: OpError| NpuError::Kernel {
            op: op.to_string(),
            source,
        };
        let kernel_panic = |p| NpuError::KernelPanic {
            op: op.to_string(),
            msg: panic_message(p),
        };
        let compute = spec
            .compute
            .ok_or_else(|| kernel_error(OpError::NoCompute { op: op.to_string() }))?;
        match (compute, allocating) {
            (Compute::Alloc(_), false) => {
                return Err(NpuError::TaskNotSupported {
                    task: "data-dependent kernel launch",
                    context: "without allocating its outputs (launch_alloc_outputs)",
                });
            }
            (Compute::Into(_), true) => {
                return Err(NpuError::BadLaunch {
                    op: op.to_string(),
                    msg: "the op computes into given outputs; launch it with them".into(),
                });
            }
            _ => {}
        }

        // Under the sanitizer: the launch's accesses are checked, and the kernel runs twice
        // on differently filled outputs (`twice`).
        let san = core.sanitizer.as_ref().map(|san| {
            let lane = self.clock;
            let info = san.task_info(lane, "kernel launch", Some(op), l.label());
            san.run(lane, &info, &l.touches());
            (san, info)
        });
        let check_shapes = core.check_launch_shapes;
        // A kernel specialized for these operands (chosen at load, or when the record was
        // last rebound) runs on their bytes alone: no views, no op context, no dispatch.
        // It runs on this thread whatever `here` says, as it is chosen only for outputs
        // too small to split. It declines (nothing written) when the bytes are not what
        // it was chosen for, and the general compute below runs instead.
        if let Some(f) = special {
            if check_shapes {
                // (Chosen only for ops that read no input values.)
                let ctx = l.context(&NO_VALUES[..l.metas().len()]);
                check_output_shapes(&ctx, (spec.infer)(&ctx), l)?;
            }
            let special = |ins: &[&[u8]], outs: &mut [&mut [u8]]| {
                std::panic::catch_unwind(AssertUnwindSafe(|| f(ins, outs)))
            };
            let run = with_span_locks(locks, &mut self.lane.scratch, |ins, outs| match &san {
                Some((san, info)) if san.checks.init => {
                    twice(san, info, l, ins, outs, special, |r| matches!(r, Ok(true)))
                }
                _ => special(ins, outs),
            });
            match run {
                Ok(true) => return Ok(Vec::new()),
                Ok(false) => {}
                Err(p) => return Err(kernel_panic(p)),
            }
        }
        let (refs_kept, muts_kept) = (&mut self.lane.refs, &mut self.lane.muts);
        let mut body =
            |ins: &[&[u8]], outs: &mut [&mut [u8]]| -> Result<Option<Vec<Tensor>>, NpuError> {
                let mut refs: Vec<TensorRef> = reuse(std::mem::take(refs_kept));
                refs.extend(
                    l.inputs()
                        .iter()
                        .zip(ins)
                        .map(|(a, b)| TensorRef::new(a.dtype, &a.shape, b)),
                );
                let hosts: Vec<Option<HostTensor>>;
                let owned: Vec<Option<&HostTensor>>;
                let values: &[Option<&HostTensor>] =
                    if spec.value_inputs.is_empty() && refs.len() <= NO_VALUES.len() {
                        &NO_VALUES[..refs.len()]
                    } else {
                        hosts = refs
                            .iter()
                            .enumerate()
                            .map(|(i, r)| {
                                spec.value_inputs.contains(&i).then(|| HostTensor {
                                    dtype: r.dtype,
                                    shape: r.shape.iter().map(|&d| d as i64).collect(),
                                    data: r.data.to_vec().into(),
                                })
                            })
                            .collect();
                        owned = hosts.iter().map(Option::as_ref).collect();
                        &owned
                    };
                let ctx = l.context(values);
                if check_shapes && let Compute::Into(_) = compute {
                    check_output_shapes(&ctx, (spec.infer)(&ctx), l)?;
                }
                let mut muts: Vec<TensorMut> = reuse(std::mem::take(muts_kept));
                muts.extend(
                    l.outputs()
                        .iter()
                        .zip(outs.iter_mut())
                        .map(|(a, b)| TensorMut::new(a.dtype, &a.shape, std::mem::take(b))),
                );
                // On the device's compute cores (see `Core::cores`): the kernel's own
                // parallel work then stays on them.
                let mut work = || {
                    std::panic::catch_unwind(AssertUnwindSafe(|| match compute {
                        Compute::Into(f) => f(&ctx, &refs, &mut muts).map(|()| None),
                        Compute::Alloc(f) => f(&ctx, &refs).map(Some),
                    }))
                };
                // On this thread if it may compute this kernel (see `Here`), else on the
                // compute cores.
                let run = if here.runs(|| l.bytes_touched()) {
                    if here == Here::All && l.bytes_touched() >= PARALLEL_BYTES {
                        wake_own_helpers();
                    }
                    work()
                } else {
                    core.awake.touch(&core.cores);
                    core.cores.install(work)
                };
                *refs_kept = reuse(refs);
                *muts_kept = reuse(muts);
                match run {
                    Ok(r) => r.map_err(kernel_error),
                    Err(p) => Err(kernel_panic(p)),
                }
            };
        let computed = with_span_locks(locks, &mut self.lane.scratch, |ins, outs| match &san {
            Some((san, info)) if san.checks.init => {
                twice(san, info, l, ins, outs, &mut body, |r| {
                    matches!(r, Ok(None))
                })
            }
            _ => body(ins, outs),
        })?;
        let Some(tensors) = computed else {
            return Ok(Vec::new());
        };
        let placed = self.place_outputs(tensors)?;
        if let Some((san, info)) = &san {
            let touches: Vec<Touch> = placed
                .iter()
                .enumerate()
                .map(|(i, a)| Touch {
                    ptr: a.ptr,
                    len: a.bytes().unwrap_or(0),
                    role: Role::Output(i),
                })
                .collect();
            san.run(self.clock, info, &touches);
        }
        Ok(placed)
    }

    /// Allocates device memory for a data-dependent launch's outputs and copies them in.
    fn place_outputs(&mut self, tensors: Vec<Tensor>) -> Result<Vec<TensorArg>, NpuError> {
        let mut args = Vec::with_capacity(tensors.len());
        for t in &tensors {
            let placed = self
                .core
                .alloc(t.data.len(), self.stream.id, false)
                .and_then(|ptr| {
                    let out = [self.core.memory.resolve(ptr, t.data.len())?];
                    with_spans(&[], &out, &mut self.lane.scratch, |_, o| {
                        if let Some(o) = o.first_mut() {
                            o.copy_from_slice(t.data.as_bytes())
                        }
                    })?;
                    Ok(ptr)
                });
            match placed {
                Ok(ptr) => args.push(TensorArg::new(ptr, t.dtype, &t.shape)),
                Err(e) => {
                    for a in &args {
                        let _ = self.core.free(a.ptr, self.stream.id);
                    }
                    return Err(e);
                }
            }
        }
        Ok(args)
    }
}

/// Runs a kernel `f` twice under the sanitizer: first on outputs filled with [`POISON`],
/// then on outputs filled with zeroes. A kernel computes its outputs from its inputs alone,
/// so both runs must write the same bytes; a byte that differs is one the kernel left
/// unwritten or computed from what the output memory held (summing into it, say): the
/// first such byte of each output is a finding. `ok` says whether a run computed (a
/// failed or declined first run is returned as it is). The second run's result stands.
fn twice<R>(
    san: &Sanitizer,
    task: &Arc<TaskInfo>,
    l: &Launch,
    ins: &[&[u8]],
    outs: &mut [&mut [u8]],
    mut f: impl FnMut(&[&[u8]], &mut [&mut [u8]]) -> R,
    ok: impl Fn(&R) -> bool,
) -> R {
    if outs.iter().all(|o| o.is_empty()) {
        return f(ins, outs);
    }
    // Each run gets its own list of the output slices: a kernel may take them out of it.
    let mut run = |outs: &mut [&mut [u8]], fill: u8| {
        for o in outs.iter_mut() {
            o.fill(fill);
        }
        let mut mine: Vec<&mut [u8]> = outs.iter_mut().map(|o| &mut **o).collect();
        f(ins, &mut mine)
    };
    let first = run(outs, POISON);
    if !ok(&first) {
        return first;
    }
    let kept: Vec<Vec<u8>> = outs.iter().map(|o| o.to_vec()).collect();
    let second = run(outs, 0);
    if ok(&second) {
        san.launch_checked();
        for (i, (a, b)) in kept.iter().zip(outs.iter()).enumerate() {
            if let Some(at) = a.iter().zip(b.iter()).position(|(x, y)| x != y) {
                let ptr = l
                    .outputs()
                    .get(i)
                    .map_or(super::ids::DevicePtr(0), |o| o.ptr);
                san.unwritten_output(task, i, ptr, a.len(), at);
            }
        }
    }
    second
}

/// A shared object's identity, as the sanitizer keys events and notifies.
fn key<T>(a: &Arc<T>) -> usize {
    Arc::as_ptr(a) as usize
}

fn check_output_shapes(
    ctx: &InferCtx,
    inferred: Result<Vec<crate::ops::TensorMeta>, OpError>,
    l: &Launch,
) -> Result<(), NpuError> {
    let bad = |msg: String| NpuError::BadLaunch {
        op: ctx.op.to_string(),
        msg,
    };
    let inferred = inferred.map_err(|e| NpuError::Kernel {
        op: ctx.op.to_string(),
        source: e,
    })?;
    if inferred.len() != l.outputs().len() {
        return Err(bad(format!(
            "inference gives {} outputs, the launch has {}",
            inferred.len(),
            l.outputs().len()
        )));
    }
    for (i, (m, a)) in inferred.iter().zip(l.outputs()).enumerate() {
        let same = m.dtype == a.dtype
            && m.shape.as_ref().is_some_and(|s| {
                s.len() == a.shape.len() && s.iter().zip(&a.shape).all(|(&d, &e)| d == e as i64)
            });
        if !same {
            return Err(bad(format!(
                "output {i} is {} {:?}, inference says {m}",
                a.dtype, a.shape
            )));
        }
    }
    Ok(())
}
