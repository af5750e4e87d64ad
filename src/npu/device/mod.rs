//! The emulated Ascend device: memory with real addresses, asynchronous streams, events,
//! notifies, tasks and models, computing real results on the CPU with the op library.
//!
//! # Bird's-eye view
//! A [`Device`] is a value (a cheap-to-clone handle); nothing is global, so any number of
//! devices live side by side and tests run in parallel. It owns:
//! - device memory ([`memory`]): segments of 64-byte-aligned host memory mapped at device
//!   addresses ([`DevicePtr`]), up to a configured capacity, with a caching allocator on top
//!   (best fit, split and merge, stream-ordered reuse, an out-of-memory recovery path);
//! - host staging memory ([`HostBuf`]) from a pool, for asynchronous copies;
//! - streams ([`stream`]): each a bounded queue and a worker thread that runs its tasks in
//!   order; a full queue blocks the submitter ([`Device::submit`]) or refuses the task
//!   ([`Device::try_submit`]);
//! - events and notifies ([`sync`]) ordering work across streams;
//! - models ([`model`]): streams with preloaded task lists started by one call;
//! - stream capture ([`Device::begin_capture`]): the tasks submitted to a capturing
//!   stream are recorded, not run, and become a model's task list (graph mode);
//! - the op library ([`OpRegistry`]), built once per device, which kernel launches run.
//!
//! # Entry points
//! [`Device::new`] with a [`DeviceConfig`]; [`Device::malloc`]/[`Device::free`];
//! [`Device::submit`] with a [`Task`] (and one convenience method per task kind);
//! [`Device::synchronize`]; [`Device::load_model`]/[`Device::execute_model`].
//!
//! # Architecture invariants
//! - Misuse is an error value ([`NpuError`]), never undefined behaviour or a panic: every
//!   device range of a task is checked against the allocator when the task is issued (so a
//!   use after free, or an access past an allocation, is refused at the call), and every
//!   access at run time is resolved and bounds-checked against its mapped segment. Kernel
//!   panics are caught and become faults.
//! - A task that fails faults its stream; the fault surfaces at the stream's next
//!   `synchronize`, which clears it. Until then the stream skips tasks that touch memory but
//!   keeps running event and notify tasks (records it runs poison their events, so a
//!   waiting stream faults too).
//! - Reads and writes of device memory are never a data race: a task locks the segments of
//!   its arguments (see [`access`]).
//! - Submission and the worker loop allocate nothing per task beyond the task itself.
//! - Synchronous copies and memsets (`memcpy_h2d`, `memset`, ...) run on the calling thread
//!   and do not wait for streams: like `aclrtMemcpy` after the caller synchronized.
//! - Deliberately absent: graphs, shapes of whole models, anything of rt2 outside `npu`.
//!
//! # Allocation and streams
//! [`Device::malloc`] takes the stream the memory will be used on first; [`Device::free`]
//! takes the stream whose work last uses it: the block is reused at once by that stream,
//! and by others only once that stream has passed the free. When nothing cached fits and
//! the capacity is reached, the allocation waits for the streams whose pending frees it
//! could use, synchronizes its own stream, retries, then unmaps every wholly free segment
//! and retries once more before failing with [`NpuError::OutOfMemory`]. (A worker that
//! allocates, for a data-dependent launch, skips the waits: it must not wait on streams that
//! may be waiting on it.)

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::ops::OpRegistry;

pub mod access;
mod awake;
pub mod error;
pub mod execution;
pub mod host;
pub mod ids;
pub mod memory;
pub mod model;
pub mod queue;
pub mod recorder;
pub mod sanitizer;
pub mod state;
pub mod stream;
pub mod sync;
pub mod task;

pub use error::{NpuError, code};
pub use host::HostBuf;
pub use ids::{DevicePtr, EventId, ModelId, NotifyId, StreamId};
pub use memory::MemoryStats;
pub use model::{Model, ModelBuilder, ModelStream};
pub(crate) use recorder::Chunks;
pub use recorder::TaskRecord;
pub use sanitizer::{
    AllocEvent, Check, Finding, SanitizeChecks, SanitizerReport, TaskInfo as SanitizedTask,
};
pub use sync::EventStatus;
pub use task::{
    AllocOutputs, COND_VALUE_BYTES, Callback, CondKind, Launch, LaunchOutputs, Task, TensorArg,
};

use host::HostPool;
use memory::Memory;
use queue::{Job, ListWorkers, ModelInner, StreamState};
use recorder::TaskRecorder;
use sanitizer::{LaneKey, Role, Sanitizer, Touch};
use state::{Core, all, insert, remove};

/// How a device is set up.
#[derive(Debug, Clone)]
pub struct DeviceConfig {
    /// Device memory capacity in bytes (mapped lazily, segment by segment).
    pub memory_bytes: u64,
    /// Tasks a stream's queue holds before a submitter blocks.
    pub queue_depth: usize,
    /// The op library launches run; `None`: the full library ([`OpRegistry::new`]).
    pub ops: Option<Arc<OpRegistry>>,
    /// Before each launch, run the op's inference and check the launch's output types and
    /// shapes against it (a fault when they differ). On in debug builds.
    pub check_launch_shapes: bool,
    /// Threads of the device's compute cores, which kernels split large work over; 0: one
    /// per available CPU. With 1, every kernel computes on the thread that issues or runs
    /// it, in order (a thread outside every rayon pool that issues work joins a one-thread
    /// pool of its own for that; see `stream::Here`): no thread hand-off per kernel.
    pub compute_threads: usize,
    /// Body runs one WHILE task may make in one execution before the execution faults
    /// (a watchdog: a body that never clears its condition would hang the stream).
    pub max_while_iterations: u64,
    /// The sanitizer's checks (`sanitizer`): initcheck, memcheck, racecheck. `None`: off,
    /// and nothing of it runs. On in debug builds (the test suite runs every device under
    /// it); `rt2 run --sanitize` and `rt2 capture --sanitize` switch it on in release.
    pub sanitize: Option<SanitizeChecks>,
}

/// The capacity a device gets when it is not told one ([`DeviceConfig::default`]): half of
/// the host's physical memory ([`host_memory_bytes`]), or 8 GiB where that is unknown.
///
/// The emulated device's memory is host memory. A segment is mapped as zero pages the OS
/// fills in only when they are touched, so a capacity above what the host has would let
/// a model map more than exists, and the kernel's OOM killer, not an
/// `NpuError::OutOfMemory`, would end the process once the pages are used. Half leaves
/// the other half for what the host side holds beside the device (the inputs, the
/// outputs downloaded, the model itself). The fallback is what a developer machine of
/// 16 GiB gives under the same rule.
pub fn default_memory_bytes() -> u64 {
    const FALLBACK: u64 = 8 << 30;
    host_memory_bytes().map_or(FALLBACK, |total| total / 2)
}

/// The host's physical memory: `MemTotal` of `/proc/meminfo` (given in kB, meaning KiB);
/// `None` where that cannot be read.
pub fn host_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => kib.checked_mul(1024).filter(|&b| b > 0),
        _ => None,
    }
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            memory_bytes: default_memory_bytes(),
            queue_depth: 1024,
            ops: None,
            check_launch_shapes: cfg!(debug_assertions),
            compute_threads: 0,
            max_while_iterations: 1_000_000,
            sanitize: cfg!(debug_assertions).then_some(SanitizeChecks::ALL),
        }
    }
}

/// What a synchronous copy on the calling thread reuses (see `Device::now`).
#[derive(Default)]
struct NowScratch {
    ins: Vec<Option<memory::Span>>,
    outs: Vec<Option<memory::Span>>,
    scratch: access::Scratch,
}

/// An emulated NPU. Clones are handles to the same device; the device shuts down (its
/// workers stop and are joined) when the last handle is dropped.
#[derive(Clone)]
pub struct Device {
    inner: Arc<DeviceInner>,
}

/// A stream of one device, held by a caller that launches on it often (an engine's launch
/// kernel), so that each launch skips the stream table. It keeps the stream's state alive,
/// not the stream: once the stream is destroyed, launches through it run nothing.
#[derive(Clone)]
pub struct StreamRef {
    device: u64,
    state: Arc<StreamState>,
}

impl StreamRef {
    pub fn id(&self) -> StreamId {
        self.state.id
    }
}

impl std::fmt::Debug for StreamRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StreamRef({})", self.state.id)
    }
}

struct DeviceInner {
    core: Arc<Core>,
    /// The workers model streams run on (see `queue::ListWorkers`).
    lists: Arc<ListWorkers>,
}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        let core = &self.core;
        // In debug builds (the test suite) findings nobody took fail loudly: every test
        // that runs a device is a sanitizer test. A command takes the report and says
        // what it found; a release build never panics here.
        if cfg!(debug_assertions)
            && !std::thread::panicking()
            && let Some(report) = core.sanitizer.as_ref().map(|s| s.take())
            && !report.is_clean()
        {
            let lines: Vec<String> = report.findings.iter().map(Finding::line).collect();
            panic!(
                "the device sanitizer found {} problem(s) nobody took (Device::take_sanitizer_report):\n{}",
                report.findings.len(),
                lines.join("\n")
            );
        }
        core.shutdown.store(true, Ordering::Release);
        let streams = all(&core.streams);
        let models = all(&core.models);
        for s in &streams {
            s.nudge();
            s.wake();
        }
        self.lists.wake();
        for e in all(&core.events) {
            e.wake();
        }
        for n in all(&core.notifies) {
            n.wake();
        }
        for s in &streams {
            s.join();
        }
        for m in &models {
            m.stop();
        }
        self.lists.stop();
        core.streams
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        core.models
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("memory", &self.memory_stats())
            .finish()
    }
}

impl Device {
    /// A device with its default stream.
    ///
    /// # Panics
    /// When the compute threads cannot be started; [`Device::try_new`] says so instead.
    pub fn new(config: DeviceConfig) -> Device {
        Self::try_new(config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A device with its default stream; [`NpuError::ThreadStart`] when the operating
    /// system refuses the compute threads (as many as `compute_threads` asks for).
    pub fn try_new(config: DeviceConfig) -> Result<Device, NpuError> {
        let cores = rayon::ThreadPoolBuilder::new()
            .num_threads(config.compute_threads)
            .thread_name(|i| format!("npu-core{i}"))
            .build()
            .map_err(|e| NpuError::ThreadStart {
                what: "compute",
                msg: e.to_string(),
            })?;
        // Wait until every compute thread has started: a thread's start-up allocates, and
        // on a loaded machine a thread may otherwise first run many executions later.
        // The wait is a plain condition variable, not `ThreadPool::broadcast`: called from
        // a thread of another rayon pool, that waits by running the other pool's queued
        // jobs on this stack (a test creating devices from a parallel iterator nested
        // case inside case until the stack overflowed).
        let started = Arc::new((std::sync::Mutex::new(0usize), std::sync::Condvar::new()));
        let signal = started.clone();
        cores.spawn_broadcast(move |_| {
            let (count, cv) = &*signal;
            *count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
            cv.notify_all();
        });
        let (count, cv) = &*started;
        let mut n = count.lock().unwrap_or_else(PoisonError::into_inner);
        while *n < cores.current_num_threads() {
            n = cv.wait(n).unwrap_or_else(PoisonError::into_inner);
        }
        drop(n);
        static DEVICES: AtomicU64 = AtomicU64::new(1);
        let core = Arc::new(Core {
            id: DEVICES.fetch_add(1, Ordering::Relaxed),
            cores,
            awake: awake::Awake::new(),
            registry: config.ops.unwrap_or_else(|| Arc::new(OpRegistry::new())),
            check_launch_shapes: config.check_launch_shapes,
            max_while_iterations: config.max_while_iterations.max(1),
            queue_depth: config.queue_depth.max(1),
            memory: Memory::new(config.memory_bytes, config.sanitize.is_none()),
            sanitizer: config.sanitize.map(Sanitizer::new),
            host: Arc::new(HostPool::default()),
            streams: RwLock::new(Vec::new()),
            events: RwLock::new(Vec::new()),
            notifies: RwLock::new(Vec::new()),
            models: RwLock::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            next_model_stream: AtomicU32::new(1 << 31),
            recorder: TaskRecorder::default(),
            capturing: AtomicUsize::new(0),
            captured: Mutex::new(Vec::new()),
        });
        // The list workers' start-up holds the device weakly: the device's last handle,
        // not a worker, ends it.
        let weak = Arc::downgrade(&core);
        let lists = Arc::new(ListWorkers::new(Box::new(move || {
            let core = weak.upgrade().ok_or(NpuError::DeviceLost)?;
            StreamState::spawn(&core, core.model_stream_id(), 0)
        })));
        let device = Device {
            inner: Arc::new(DeviceInner { core, lists }),
        };
        device.try_create_stream()?;
        Ok(device)
    }

    fn core(&self) -> &Arc<Core> {
        &self.inner.core
    }

    /// The op library launches run.
    pub fn ops(&self) -> &OpRegistry {
        &self.core().registry
    }

    /// Starts or stops recording every task the stream workers run ([`TaskRecord`]). Off
    /// by default; off, it costs a worker one relaxed load per task.
    pub fn record_tasks(&self, on: bool) {
        self.core().recorder.set(on);
    }

    /// The tasks recorded so far, in the order they finished; the recorder starts empty
    /// again.
    pub fn take_task_records(&self) -> Vec<TaskRecord> {
        self.core().recorder.take()
    }

    // ---- streams

    /// The stream every device starts with (ACL's default stream).
    pub fn default_stream(&self) -> StreamId {
        StreamId(0)
    }

    /// A new stream with its worker thread.
    ///
    /// # Panics
    /// When the system refuses the thread; [`Device::try_create_stream`] says so instead.
    pub fn create_stream(&self) -> StreamId {
        self.try_create_stream().unwrap_or_else(|e| panic!("{e}"))
    }

    /// A new stream with its worker thread; [`NpuError::ThreadStart`] when the system
    /// refuses the thread.
    pub fn try_create_stream(&self) -> Result<StreamId, NpuError> {
        let core = self.core();
        let mut table = core.streams.write().unwrap_or_else(PoisonError::into_inner);
        let id = StreamId(table.len() as u32);
        table.push(Some(StreamState::spawn(core, id, core.queue_depth)?));
        Ok(id)
    }

    /// Threads started to run model streams so far: the most lists that ran at once
    /// beside the executing streams' own (models themselves hold no threads).
    pub fn list_workers(&self) -> usize {
        self.inner.lists.started()
    }

    /// Waits for the stream's work, stops its worker and forgets it; returns its pending
    /// fault, if any. The default stream stays.
    pub fn destroy_stream(&self, stream: StreamId) -> Result<(), NpuError> {
        let core = self.core();
        if stream == self.default_stream() {
            return Err(NpuError::InvalidStream(stream));
        }
        let s = core.stream(stream)?;
        s.drain(&core.shutdown)?;
        // Kept handles (`StreamRef`) run nothing on it from here on.
        s.retire();
        let fault = s.take_fault();
        remove(&core.streams, stream.0);
        let _ = s.send(Job::Shutdown, true);
        s.join();
        fault.map_or(Ok(()), Err)
    }

    /// Queues `task` on `stream`, waiting while the queue is full. Errors: the task's
    /// misuse as seen when it is issued (an address, range or id), or a device shut down.
    pub fn submit(&self, stream: StreamId, task: Task) -> Result<(), NpuError> {
        // One load while nothing captures; the submission path is otherwise unchanged.
        if self.core().capturing.load(Ordering::Acquire) != 0 {
            return self.core().record(stream, task);
        }
        let core = self.core();
        let s = core.stream(stream)?;
        let job = core.job(task, stream)?;
        self.sanitize_submit(&s, &job);
        s.submit(core, job, true)
    }

    /// [`Device::submit`] that fails with [`NpuError::QueueFull`] instead of waiting.
    pub fn try_submit(&self, stream: StreamId, task: Task) -> Result<(), NpuError> {
        if self.core().capturing.load(Ordering::Acquire) != 0 {
            return self.core().record(stream, task);
        }
        let core = self.core();
        let s = core.stream(stream)?;
        let job = core.job(task, stream)?;
        self.sanitize_submit(&s, &job);
        s.submit(core, job, false)
    }

    /// Tells the sanitizer, if on, of a job about to be submitted to `s`: it and what
    /// follows it on the stream are ordered after what this host thread has seen.
    fn sanitize_submit(&self, s: &StreamState, job: &Job) {
        if let Some(san) = &self.core().sanitizer {
            if let Job::Task(Task::Launch(l)) | Job::LaunchAlloc { launch: l, .. } = job {
                san.issued(&launch_name(l));
            }
            san.submitted(s.id, s.submitted() + 1);
        }
    }

    /// Waits for everything submitted to `stream` so far; returns the first fault since the
    /// last synchronize, and clears it.
    pub fn synchronize(&self, stream: StreamId) -> Result<(), NpuError> {
        if self.core().is_capturing(stream) {
            return Err(NpuError::Capture {
                stream,
                msg: "a capturing stream cannot be synchronized: its work has not run",
            });
        }
        let s = self.core().stream(stream)?;
        s.drain(&self.core().shutdown)?;
        if let Some(san) = &self.core().sanitizer {
            san.host_synchronized(stream);
        }
        s.take_fault().map_or(Ok(()), Err)
    }

    /// Synchronizes every stream; returns the first fault found (all are cleared).
    pub fn synchronize_device(&self) -> Result<(), NpuError> {
        let mut first = Ok(());
        for s in all(&self.core().streams) {
            let r = self.synchronize(s.id);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Whether everything submitted to `stream` has run.
    pub fn stream_done(&self, stream: StreamId) -> Result<bool, NpuError> {
        let s = self.core().stream(stream)?;
        Ok(s.completed() >= s.submitted())
    }

    // ---- tasks

    pub fn launch(&self, stream: StreamId, launch: Launch) -> Result<(), NpuError> {
        self.submit(stream, Task::Launch(Arc::new(launch)))
    }

    /// Launches a launch record an engine keeps and rebinds per execution. The stream
    /// drops its reference once the kernel has run (before the stream counts the task
    /// complete), so after a synchronize the caller's `Arc` is unique again and can be
    /// rebound with [`Launch::rebind`].
    ///
    /// A launch reaching an idle stream while the caller's `Arc` is unique runs now, from
    /// the calling thread, through the record's cache of its checks and resolution (see
    /// `StreamState::run_inline`, which says which launches qualify): the hot path of an
    /// engine issuing many small kernels, where a hand-off to the stream's worker per
    /// launch would cost several times the kernel.
    pub fn launch_shared(
        &self,
        stream: StreamId,
        launch: &mut Arc<Launch>,
    ) -> Result<(), NpuError> {
        if let Some(l) = Arc::get_mut(launch)
            && let Some(r) = self.launch_here(stream, l)
        {
            return r;
        }
        self.submit(stream, Task::Launch(launch.clone()))
    }

    /// The inline half of [`Device::launch_shared`], for a caller that holds its record
    /// uniquely already (an engine that has just rebound it: asking `Arc::get_mut` twice
    /// costs a second atomic compare-exchange per launch). `None`: the launch did not run
    /// (the stream is busy or capturing, or the kernel is not one to run here); submit
    /// the shared record instead.
    pub fn launch_here(
        &self,
        stream: StreamId,
        launch: &mut Launch,
    ) -> Option<Result<(), NpuError>> {
        let core = self.core();
        if core.capturing.load(Ordering::Acquire) != 0 {
            return None;
        }
        if let Some(san) = &core.sanitizer {
            san.issued(&launch_name(launch));
        }
        match core.with_stream(stream, |s| s.run_inline(core, launch)) {
            Ok(ran) => ran,
            Err(e) => Some(Err(e)),
        }
    }

    /// A handle on `stream` its user keeps between launches (see [`Device::launch_on`]).
    pub fn stream_ref(&self, stream: StreamId) -> Result<StreamRef, NpuError> {
        Ok(StreamRef {
            device: self.core().id,
            state: self.core().stream(stream)?,
        })
    }

    /// [`Device::launch_here`] through a kept handle: no look-up in the stream table,
    /// whose read lock (two atomic read-modify-writes) is a noticeable part of a small
    /// launch's cost. A handle of another device, or of a stream destroyed since, runs nothing
    /// (`None`); submitting by id then reports what is wrong.
    pub fn launch_on(
        &self,
        stream: &StreamRef,
        launch: &mut Launch,
    ) -> Option<Result<(), NpuError>> {
        let core = self.core();
        if stream.device != core.id || core.capturing.load(Ordering::Acquire) != 0 {
            return None;
        }
        if let Some(san) = &core.sanitizer {
            san.issued(&launch_name(launch));
        }
        stream.state.run_inline(core, launch)
    }

    /// Launches a data-dependent op ([`Launch::allocating`]): the device allocates its
    /// outputs on `stream` and reports them through the returned handle.
    pub fn launch_alloc_outputs(
        &self,
        stream: StreamId,
        launch: Launch,
    ) -> Result<LaunchOutputs, NpuError> {
        let core = self.core();
        let s = core.stream(stream)?;
        if core.capturing.load(Ordering::Acquire) != 0 {
            return Err(NpuError::Capture {
                stream,
                msg: "a data-dependent launch cannot be captured: its outputs are only known when it runs",
            });
        }
        let task = Task::Launch(Arc::new(launch));
        core.job(task.clone(), stream)?;
        let Task::Launch(launch) = task else {
            unreachable!()
        };
        let (done, rx) = crossbeam_channel::bounded(1);
        let job = Job::LaunchAlloc { launch, done };
        self.sanitize_submit(&s, &job);
        s.send(job, true)?;
        Ok(LaunchOutputs { rx })
    }

    /// Copies all of `src` to `dst` when the stream gets there; the task keeps `src`.
    pub fn memcpy_h2d_async(
        &self,
        stream: StreamId,
        dst: DevicePtr,
        src: &HostBuf,
    ) -> Result<(), NpuError> {
        let task = Task::MemcpyH2D {
            dst,
            src: src.clone(),
            offset: 0,
            len: src.len(),
        };
        self.submit(stream, task)
    }

    /// Copies `src` to `dst` now if `stream` is idle (and nothing captures): what
    /// [`Device::memcpy_h2d_async`] of a buffer holding `src` would do, without the
    /// buffer. `None`: the stream has work queued; stage the bytes and submit. A copy
    /// that fails once started faults the stream, as the task would.
    pub fn memcpy_h2d_if_idle(
        &self,
        stream: StreamId,
        dst: DevicePtr,
        src: &[u8],
    ) -> Option<Result<(), NpuError>> {
        let core = self.core();
        if core.capturing.load(Ordering::Acquire) != 0 {
            return None;
        }
        match core.stream(stream) {
            Ok(s) => s.copy_in_inline(core, dst, src),
            Err(e) => Some(Err(e)),
        }
    }

    /// Fills all of `dst` from `src` when the stream gets there.
    pub fn memcpy_d2h_async(
        &self,
        stream: StreamId,
        dst: &HostBuf,
        src: DevicePtr,
    ) -> Result<(), NpuError> {
        let task = Task::MemcpyD2H {
            dst: dst.clone(),
            offset: 0,
            src,
            len: dst.len(),
        };
        self.submit(stream, task)
    }

    pub fn memcpy_d2d_async(
        &self,
        stream: StreamId,
        dst: DevicePtr,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), NpuError> {
        self.submit(stream, Task::MemcpyD2D { dst, src, len })
    }

    pub fn memset_async(
        &self,
        stream: StreamId,
        dst: DevicePtr,
        value: u8,
        len: usize,
    ) -> Result<(), NpuError> {
        self.submit(stream, Task::Memset { dst, value, len })
    }

    /// Runs a memory task on the calling thread.
    fn now(
        &self,
        ins: &[(DevicePtr, usize)],
        outs: &[(DevicePtr, usize)],
        f: impl FnOnce(&[&[u8]], &mut [&mut [u8]]),
    ) -> Result<(), NpuError> {
        let memory = &self.core().memory;
        {
            let heap = memory.heap();
            for &(p, n) in ins.iter().chain(outs) {
                heap.check(p, n)?;
            }
        }
        if let Some(san) = &self.core().sanitizer {
            // The calling thread's own access: ordered after what it has synchronized
            // with, and racing what it has not.
            let touches: Vec<Touch> = ins
                .iter()
                .map(|&(ptr, len)| Touch {
                    ptr,
                    len,
                    role: Role::Read,
                })
                .chain(outs.iter().map(|&(ptr, len)| Touch {
                    ptr,
                    len,
                    role: Role::Write,
                }))
                .collect();
            let lane = LaneKey::Host;
            let kind = if outs.is_empty() {
                "synchronous copy to the host"
            } else {
                "synchronous write"
            };
            let info = san.task_info(lane, kind, None, None);
            san.run(lane, &info, &touches);
        }
        // The calling thread's own span lists and scratch, kept between calls: a
        // synchronous copy in an executor's steady state then allocates nothing.
        thread_local! {
            static NOW: std::cell::RefCell<NowScratch> = std::cell::RefCell::default();
        }
        NOW.with(|cell| {
            let mut guard = cell.try_borrow_mut();
            let mut fresh = NowScratch::default();
            let s: &mut NowScratch = match &mut guard {
                Ok(g) => g,
                // Re-entered from inside `f`: a scratch of its own.
                Err(_) => &mut fresh,
            };
            s.ins.clear();
            s.outs.clear();
            let r = memory
                .resolve_all(ins.iter().copied(), &mut s.ins)
                .and_then(|()| memory.resolve_all(outs.iter().copied(), &mut s.outs))
                .and_then(|()| access::with_spans(&s.ins, &s.outs, &mut s.scratch, f));
            // Segment references are not kept past the call.
            s.ins.clear();
            s.outs.clear();
            r
        })
    }

    /// Copies `src` to device memory at `dst`, now.
    pub fn memcpy_h2d(&self, dst: DevicePtr, src: &[u8]) -> Result<(), NpuError> {
        self.now(&[], &[(dst, src.len())], |_, o| {
            if let Some(o) = o.first_mut() {
                o.copy_from_slice(src)
            }
        })
    }

    /// Copies device memory at `src` to `dst`, now.
    pub fn memcpy_d2h(&self, dst: &mut [u8], src: DevicePtr) -> Result<(), NpuError> {
        self.now(&[(src, dst.len())], &[], |i, _| {
            if let Some(i) = i.first() {
                dst.copy_from_slice(i)
            }
        })
    }

    pub fn memcpy_d2d(&self, dst: DevicePtr, src: DevicePtr, len: usize) -> Result<(), NpuError> {
        self.now(&[(src, len)], &[(dst, len)], |i, o| {
            o[0].copy_from_slice(i[0])
        })
    }

    pub fn memset(&self, dst: DevicePtr, value: u8, len: usize) -> Result<(), NpuError> {
        self.now(&[], &[(dst, len)], |_, o| o[0].fill(value))
    }

    // ---- memory

    /// Allocates `size` bytes of device memory for use on `stream` (see the module doc).
    pub fn malloc(&self, size: usize, stream: StreamId) -> Result<DevicePtr, NpuError> {
        self.core().stream(stream)?;
        self.core().alloc(size, stream, true)
    }

    /// Frees an allocation, ordered on `stream`: reusable at once by `stream`, by other
    /// streams once `stream` has run what was submitted to it before this call.
    pub fn free(&self, ptr: DevicePtr, stream: StreamId) -> Result<(), NpuError> {
        self.core().free(ptr, stream)
    }

    /// Unmaps every cached segment no block of which is in use or pending, and drops the
    /// cached host staging buffers.
    pub fn empty_cache(&self) {
        let core = self.core();
        let mut heap = core.memory.heap();
        heap.settle(&|s| core.completed(s));
        let unmapped = heap.recycle();
        core.memory.unpublish(&unmapped);
        core.host.trim();
    }

    /// What the sanitizer has found so far; `None` when it is off.
    pub fn sanitizer_report(&self) -> Option<SanitizerReport> {
        self.core().sanitizer.as_ref().map(Sanitizer::report)
    }

    /// What the sanitizer has found so far, which it then forgets (a debug build's device
    /// dropped with findings nobody took panics with them); `None` when it is off.
    pub fn take_sanitizer_report(&self) -> Option<SanitizerReport> {
        self.core().sanitizer.as_ref().map(Sanitizer::take)
    }

    /// The sanitizer's checks, when it is on.
    pub fn sanitize_checks(&self) -> Option<SanitizeChecks> {
        self.core().sanitizer.as_ref().map(|s| s.checks)
    }

    pub fn memory_stats(&self) -> MemoryStats {
        let mut s = self.core().memory.heap().stats();
        (s.host_in_use, s.host_cached) = self.core().host.usage();
        s
    }

    /// Host staging memory of `len` zero bytes, from the pool.
    pub fn malloc_host(&self, len: usize) -> HostBuf {
        self.core().host.alloc(len)
    }

    // ---- events and notifies

    pub fn create_event(&self) -> EventId {
        EventId(insert(&self.core().events, Arc::default()))
    }

    /// Forgets the event; tasks already issued on it still run.
    pub fn destroy_event(&self, event: EventId) -> Result<(), NpuError> {
        remove(&self.core().events, event.0)
            .map(drop)
            .ok_or(NpuError::InvalidEvent(event))
    }

    pub fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), NpuError> {
        self.submit(stream, Task::EventRecord(event))
    }

    /// Makes `stream` wait for the event's latest record issued so far; an error when none
    /// was.
    pub fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), NpuError> {
        self.submit(stream, Task::EventWait(event))
    }

    pub fn query_event(&self, event: EventId) -> Result<EventStatus, NpuError> {
        Ok(self.core().event(event)?.status())
    }

    /// Waits on the host for the event's latest record issued so far; an error when none
    /// was, or when the stream that ran it had faulted.
    pub fn synchronize_event(&self, event: EventId) -> Result<(), NpuError> {
        let e = self.core().event(event)?;
        let generation = e.latest();
        if generation == 0 {
            return Err(NpuError::EventNotRecorded { event });
        }
        e.wait(event, generation, &self.core().shutdown)?;
        if let Some(san) = &self.core().sanitizer {
            san.host_waited_event(Arc::as_ptr(&e) as usize, generation);
        }
        Ok(())
    }

    pub fn create_notify(&self) -> NotifyId {
        NotifyId(insert(&self.core().notifies, Arc::default()))
    }

    pub fn destroy_notify(&self, notify: NotifyId) -> Result<(), NpuError> {
        remove(&self.core().notifies, notify.0)
            .map(drop)
            .ok_or(NpuError::InvalidNotify(notify))
    }

    pub fn record_notify(&self, notify: NotifyId, stream: StreamId) -> Result<(), NpuError> {
        self.submit(stream, Task::NotifyRecord(notify))
    }

    pub fn wait_notify(&self, stream: StreamId, notify: NotifyId) -> Result<(), NpuError> {
        self.submit(stream, Task::NotifyWait(notify))
    }

    // ---- capture

    /// Starts recording `stream`: the tasks submitted to it from now on are kept, in
    /// order, for [`Device::end_capture`], and do not run. While any stream captures, work
    /// for another stream, a synchronize of the capturing one and data-dependent launches
    /// are errors.
    pub fn begin_capture(&self, stream: StreamId) -> Result<(), NpuError> {
        let core = self.core();
        core.stream(stream)?;
        let mut captured = core.captured.lock().unwrap_or_else(PoisonError::into_inner);
        if captured.iter().any(|(s, _)| *s == stream) {
            return Err(NpuError::Capture {
                stream,
                msg: "the stream is capturing already",
            });
        }
        captured.push((stream, Vec::new()));
        core.capturing.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Stops recording `stream` and returns its tasks (a [`Model`] stream's list).
    pub fn end_capture(&self, stream: StreamId) -> Result<Vec<Task>, NpuError> {
        let core = self.core();
        let mut captured = core.captured.lock().unwrap_or_else(PoisonError::into_inner);
        let i = captured
            .iter()
            .position(|(s, _)| *s == stream)
            .ok_or(NpuError::Capture {
                stream,
                msg: "the stream is not capturing",
            })?;
        let (_, tasks) = captured.swap_remove(i);
        core.capturing.fetch_sub(1, Ordering::AcqRel);
        Ok(tasks)
    }

    // ---- models

    /// Loads a model: checks its ids and ops against the device (no thread is started:
    /// its streams run on the executing stream's worker and the device's list workers).
    pub fn load_model(&self, model: &Model) -> Result<ModelId, NpuError> {
        let core = self.core();
        // Resolved before the table is locked for the push: conditional tasks look their
        // sub-models up in it.
        let mut inner = ModelInner::load(core, ModelId(u32::MAX), model, self.inner.lists.clone())?;
        let mut table = core.models.write().unwrap_or_else(PoisonError::into_inner);
        let id = ModelId(table.len() as u32);
        inner.id = id;
        table.push(Some(Arc::new(inner)));
        Ok(id)
    }

    /// Replaces a loaded model's tasks (same stream count) for the executions issued from
    /// now on; executions already issued run the tasks they were issued with.
    pub fn update_model(&self, id: ModelId, model: &Model) -> Result<(), NpuError> {
        let core = self.core();
        core.model(id)?.update(core, model)
    }

    /// Queues a run of the model on `stream`: work queued after it on `stream` sees its
    /// results; its fault is the stream's. Errors: the model's memory is not allocated, or
    /// it waits on an event that was never recorded.
    pub fn execute_model(&self, model: ModelId, stream: StreamId) -> Result<(), NpuError> {
        let core = self.core();
        let s = core.stream(stream)?;
        let m = core.model(model)?;
        let resolved = m.resolved_for_execution(core)?;
        resolved.check(core)?;
        let job = Job::Execute(m, resolved);
        self.sanitize_submit(&s, &job);
        s.send(job, true)
    }

    /// Unloads a model after any run of it finished; executions of it still queued run
    /// nothing and fault their streams.
    pub fn unload_model(&self, model: ModelId) -> Result<(), NpuError> {
        let m = remove(&self.core().models, model.0).ok_or(NpuError::InvalidModel(model))?;
        m.stop();
        Ok(())
    }
}

/// A launch as the sanitizer's allocation history names the work around an allocation.
fn launch_name(l: &Launch) -> String {
    match l.label() {
        Some(label) => format!("{} {label:?}", l.op()),
        None => l.op().to_string(),
    }
}
