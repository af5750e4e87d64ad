//! The device's shared state ([`Core`]): what the handle and every stream worker hold.
//! It owns the tables of streams, events, notifies and loaded models, the memory and its
//! caching allocator with the out-of-memory recovery path (which waits on streams), the
//! op library and compute cores, the task recorder and the capture lists; and it turns
//! a task into the job a worker runs. It runs nothing itself: workers (`stream`) and model
//! executions (`execution`) sit above it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::ops::{OpRegistry, OpSpec};

use super::access::with_spans;
use super::error::NpuError;
use super::host::HostPool;
use super::ids::{DevicePtr, EventId, ModelId, NotifyId, StreamId};
use super::memory::{Memory, NoRoom};
use super::queue::{Job, ModelInner, StreamState};
use super::recorder::TaskRecorder;
use super::sanitizer::{LaneKey, POISON, Role, Sanitizer, Touch};
use super::sync::{EventState, NotifyState};
use super::task::Task;

pub(super) type Table<T> = RwLock<Vec<Option<Arc<T>>>>;

fn get<T>(table: &Table<T>, i: u32) -> Option<Arc<T>> {
    table
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(i as usize)
        .and_then(Clone::clone)
}

pub(super) fn insert<T>(table: &Table<T>, v: Arc<T>) -> u32 {
    let mut t = table.write().unwrap_or_else(PoisonError::into_inner);
    t.push(Some(v));
    (t.len() - 1) as u32
}

pub(super) fn remove<T>(table: &Table<T>, i: u32) -> Option<Arc<T>> {
    table
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .get_mut(i as usize)
        .and_then(Option::take)
}

pub(super) fn all<T>(table: &Table<T>) -> Vec<Arc<T>> {
    table
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .flatten()
        .cloned()
        .collect()
}

/// What the device's workers share with the handle.
pub(crate) struct Core {
    /// Unique among the devices of the process (a launch's cached resolution names it).
    pub id: u64,
    pub registry: Arc<OpRegistry>,
    /// The compute cores: every kernel runs in this pool, so the parallel work a kernel
    /// splits off never lands on the host's threads. Those may be blocked waiting for this
    /// device (a host thread of rayon's global pool in `synchronize`, say), and a kernel
    /// waiting on them would deadlock the device.
    pub cores: rayon::ThreadPool,
    /// Keeps `cores` polling through a burst of kernels (see `awake`).
    pub(super) awake: super::awake::Awake,
    pub check_launch_shapes: bool,
    pub max_while_iterations: u64,
    pub(super) queue_depth: usize,
    pub memory: Memory,
    pub(super) host: Arc<HostPool>,
    pub(super) streams: Table<StreamState>,
    pub(super) events: Table<EventState>,
    pub(super) notifies: Table<NotifyState>,
    pub(super) models: Table<ModelInner>,
    pub shutdown: AtomicBool,
    pub(super) next_model_stream: AtomicU32,
    pub recorder: TaskRecorder,
    /// Streams capturing: while any is, every submission goes through `record`.
    pub(super) capturing: AtomicUsize,
    /// Each capturing stream's recorded tasks.
    pub(super) captured: Mutex<Vec<(StreamId, Vec<Task>)>>,
    /// The sanitizer, when on: every call site tests this first, so a device without it
    /// pays one branch per task.
    pub sanitizer: Option<Sanitizer>,
}

impl Core {
    /// A device of one compute core computes every kernel on the thread that runs it
    /// (see `stream::Here`).
    pub fn one_core(&self) -> bool {
        self.cores.current_num_threads() == 1
    }

    pub fn is_shut_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    pub(super) fn stream(&self, id: StreamId) -> Result<Arc<StreamState>, NpuError> {
        get(&self.streams, id.0).ok_or(NpuError::InvalidStream(id))
    }

    /// The spec of op `op` from the device's library.
    pub fn op_spec(&self, op: &str) -> Result<OpSpec, NpuError> {
        self.registry
            .get(op)
            .copied()
            .ok_or_else(|| NpuError::UnknownOp { op: op.to_string() })
    }

    /// Calls `f` with stream `id`, under the table's read lock (no reference counted).
    pub(super) fn with_stream<R>(
        &self,
        id: StreamId,
        f: impl FnOnce(&StreamState) -> R,
    ) -> Result<R, NpuError> {
        let table = self.streams.read().unwrap_or_else(PoisonError::into_inner);
        match table.get(id.0 as usize) {
            Some(Some(s)) => Ok(f(s)),
            _ => Err(NpuError::InvalidStream(id)),
        }
    }

    pub fn event(&self, id: EventId) -> Result<Arc<EventState>, NpuError> {
        get(&self.events, id.0).ok_or(NpuError::InvalidEvent(id))
    }

    pub fn notify(&self, id: NotifyId) -> Result<Arc<NotifyState>, NpuError> {
        get(&self.notifies, id.0).ok_or(NpuError::InvalidNotify(id))
    }

    pub(crate) fn model(&self, id: ModelId) -> Result<Arc<ModelInner>, NpuError> {
        get(&self.models, id.0).ok_or(NpuError::InvalidModel(id))
    }

    /// Ids for model streams, apart from the table's (they are not submitted to).
    pub fn model_stream_id(&self) -> StreamId {
        StreamId(self.next_model_stream.fetch_add(1, Ordering::Relaxed))
    }

    /// Tasks `stream` has completed; a stream that is gone has passed everything.
    pub(super) fn completed(&self, stream: StreamId) -> u64 {
        get(&self.streams, stream.0).map_or(u64::MAX, |s| s.completed())
    }

    fn try_alloc(&self, size: usize, stream: StreamId) -> Option<DevicePtr> {
        let mut heap = self.memory.heap();
        match heap.alloc(size, stream, &|s| self.completed(s)) {
            Ok((ptr, segment)) => {
                if let Some(s) = segment {
                    self.memory.publish(s);
                }
                Some(ptr)
            }
            Err(NoRoom) => None,
        }
    }

    /// The caching allocator with its recovery path (see the module doc); `wait`: whether
    /// the caller may wait for streams.
    pub fn alloc(&self, size: usize, stream: StreamId, wait: bool) -> Result<DevicePtr, NpuError> {
        let ptr = self.alloc_block(size, stream, wait)?;
        if let Some(san) = &self.sanitizer {
            // Fresh or reused, the block holds nothing anyone may rely on: poisoned, and
            // unwritten in the shadow. (Under the sanitizer a block is reused only once
            // everything issued before its free has run, so nothing reads it any more.)
            let out = [self.memory.resolve(ptr, size)?];
            with_spans(&[], &out, &mut Default::default(), |_, o| {
                if let Some(o) = o.first_mut() {
                    o.fill(POISON)
                }
            })?;
            san.alloc(ptr, size, stream);
        }
        Ok(ptr)
    }

    fn alloc_block(
        &self,
        size: usize,
        stream: StreamId,
        wait: bool,
    ) -> Result<DevicePtr, NpuError> {
        if let Some(p) = self.try_alloc(size, stream) {
            return Ok(p);
        }
        self.memory.heap().note_recovery();
        if wait {
            let targets = self.memory.heap().pending_targets();
            for (s, seq) in targets {
                if let Some(s) = get(&self.streams, s.0) {
                    s.wait_for(seq, &self.shutdown)?;
                }
            }
            self.stream(stream)?.drain(&self.shutdown)?;
            if let Some(p) = self.try_alloc(size, stream) {
                return Ok(p);
            }
        }
        {
            let mut heap = self.memory.heap();
            heap.settle(&|s| self.completed(s));
            let unmapped = heap.recycle();
            self.memory.unpublish(&unmapped);
        }
        if let Some(p) = self.try_alloc(size, stream) {
            return Ok(p);
        }
        Err(self.memory.heap().out_of_memory(size))
    }

    pub fn free(&self, ptr: DevicePtr, stream: StreamId) -> Result<(), NpuError> {
        let seq = self.stream(stream)?.submitted();
        let r = self.memory.free(ptr, stream, seq);
        if let Some(san) = &self.sanitizer {
            san.free(ptr, stream, &r);
        }
        r
    }

    /// Checks a task's device ranges against the allocator as it is issued on `lane`;
    /// under the sanitizer a refused range is a memcheck finding too.
    pub(super) fn check_ranges(&self, task: &Task, lane: LaneKey) -> Result<(), NpuError> {
        let r = {
            let heap = self.memory.heap();
            task.each_range(|ptr, len| heap.check(ptr, len))
        };
        if let (Err(e), Some(san)) = (&r, &self.sanitizer) {
            let heap = self.memory.heap();
            if let Some(t) = task
                .touches()
                .into_iter()
                .find(|t| heap.check(t.ptr, t.len).is_err())
            {
                drop(heap);
                let (op, label) = match task {
                    Task::Launch(l) => (Some(l.op()), l.label()),
                    _ => (None, None),
                };
                let info = san.task_info(lane, task.kind(), op, label);
                san.refused(&info, t, e);
            }
        }
        r
    }

    /// [`Core::check_ranges`] for a host-to-device copy of `len` bytes to `dst` made
    /// without a task (`StreamState::copy_in_inline`).
    pub(super) fn check_copy_in(
        &self,
        dst: DevicePtr,
        len: usize,
        lane: LaneKey,
    ) -> Result<(), NpuError> {
        let r = self.memory.heap().check(dst, len);
        if let (Err(e), Some(san)) = (&r, &self.sanitizer) {
            let info = san.task_info(lane, Task::HOST_TO_DEVICE, None, None);
            let touch = Touch {
                ptr: dst,
                len,
                role: Role::Write,
            };
            san.refused(&info, touch, e);
        }
        r
    }

    /// Records a task submitted while some stream captures: onto the capture of `stream`
    /// after the checks a submission makes; work for any other stream is refused, since a
    /// replay could not keep its order with the captured work.
    pub(super) fn record(&self, stream: StreamId, task: Task) -> Result<(), NpuError> {
        self.stream(stream)?;
        let mut captured = self.captured.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((_, tasks)) = captured.iter_mut().find(|(s, _)| *s == stream) else {
            return Err(NpuError::Capture {
                stream,
                msg: "work on another stream while a stream captures",
            });
        };
        task.check_host_range()?;
        self.check_ranges(&task, LaneKey::Stream(stream))?;
        if matches!(task, Task::StreamActivate(_) | Task::Cond { .. }) {
            return Err(NpuError::TaskNotSupported {
                task: task.kind(),
                context: "outside a model",
            });
        }
        tasks.push(task);
        Ok(())
    }

    pub(super) fn is_capturing(&self, stream: StreamId) -> bool {
        self.capturing.load(Ordering::Acquire) != 0
            && self
                .captured
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .any(|(s, _)| *s == stream)
    }

    /// Checks a task as it is issued and turns it into the job a worker runs.
    pub(super) fn job(&self, task: Task, stream: StreamId) -> Result<Job, NpuError> {
        task.check_host_range()?;
        self.check_ranges(&task, LaneKey::Stream(stream))?;
        Ok(match task {
            Task::EventRecord(id) => Job::EventRecord {
                event: self.event(id)?,
                generation: 0,
            },
            Task::EventWait(id) => {
                let event = self.event(id)?;
                let generation = event.latest();
                if generation == 0 {
                    return Err(NpuError::EventNotRecorded { event: id });
                }
                Job::EventWait {
                    id,
                    event,
                    generation,
                }
            }
            Task::NotifyRecord(id) => Job::NotifyRecord(self.notify(id)?),
            Task::NotifyWait(id) => Job::NotifyWait(self.notify(id)?),
            Task::StreamActivate(_) | Task::Cond { .. } => {
                return Err(NpuError::TaskNotSupported {
                    task: task.kind(),
                    context: "outside a model",
                });
            }
            t => Job::Task(t),
        })
    }
}
