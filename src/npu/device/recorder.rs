//! The task recorder: when switched on, every job a stream worker runs is recorded as
//! (stream, task kind, name, op, start, end, ok), for device-side profiles and traces.
//!
//! Off (the default), it costs the worker one relaxed atomic load per job and nothing
//! else: no clock read, no allocation, no lock. On, each job reads the clock twice and
//! appends one record under a mutex; a record allocates its name. The mutex is only taken
//! while recording, and one push per device task is small beside the task itself, so the
//! stream workers do not keep buffers of their own.
//!
//! It must not interpret what it records: the names are the device's (op types, the
//! labels the host gave launches, copy sizes), not graphs or nodes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use super::ids::StreamId;
use super::queue::Job;
use super::task::{Launch, Task};

/// One job a stream worker ran.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    pub stream: StreamId,
    /// What the task is ([`Task::kind`], or `model execute` / `model stream run` for
    /// device models).
    pub kind: &'static str,
    /// The op type of a kernel launch.
    pub op: Option<String>,
    /// A launch's label ([`super::Launch::labeled`]) or its op type; for other tasks, a
    /// short description (`2048 bytes`, `e3`).
    pub name: String,
    pub start: Instant,
    pub end: Instant,
    /// Whether the task succeeded (a skipped task on a faulted stream counts as success).
    pub ok: bool,
}

impl TaskRecord {
    /// Whether the task was a kernel launch.
    pub fn is_launch(&self) -> bool {
        self.op.is_some()
    }
}

/// What a worker knows of a job before it runs it, when recording.
pub(crate) struct Started {
    kind: &'static str,
    op: Option<String>,
    name: String,
    start: Instant,
}

#[derive(Default)]
pub(crate) struct TaskRecorder {
    on: AtomicBool,
    records: Mutex<Chunks<TaskRecord>>,
}

/// Records appended in chunks of [`CHUNK`]: a push never moves the records before it.
/// In one growing vector a push that doubled it copied every record so far, inside
/// whichever launch happened to push then, and the host's profile (which times the
/// launch around the device's work) charged that launch's op with the copy: a
/// GlobalAveragePool of a microsecond showed 25 us in `rt2 run --profile`. The host's
/// node recorder keeps its spans so too.
#[derive(Debug)]
pub(crate) struct Chunks<T>(Vec<Vec<T>>);

impl<T> Default for Chunks<T> {
    fn default() -> Self {
        Chunks(Vec::new())
    }
}

/// Records per chunk of [`Chunks`].
const CHUNK: usize = 1024;

impl<T> Chunks<T> {
    pub(crate) fn push(&mut self, record: T) {
        if self.0.last().is_none_or(|c| c.len() == CHUNK) {
            self.0.push(Vec::with_capacity(CHUNK));
        }
        self.0
            .last_mut()
            .expect("a chunk with room was just ensured")
            .push(record);
    }

    /// Every record, in the order pushed; the chunks start empty again.
    pub(crate) fn take(&mut self) -> Vec<T> {
        std::mem::take(&mut self.0).into_iter().flatten().collect()
    }
}

impl TaskRecorder {
    pub fn set(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    /// Before a job: `None` (after one relaxed load) when not recording.
    #[inline(always)]
    pub fn start(&self, job: &Job) -> Option<Started> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        let (kind, op, name) = describe(job)?;
        Some(Started {
            kind,
            op,
            name,
            start: Instant::now(),
        })
    }

    /// Before an inline launch: as [`TaskRecorder::start`] for the launch's task.
    #[inline(always)]
    pub fn start_launch(&self, l: &Launch) -> Option<Started> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        let (kind, op, name) = describe_launch(l);
        Some(Started {
            kind,
            op,
            name,
            start: Instant::now(),
        })
    }

    /// Before a copy of `len` bytes run without a job (a host-to-device copy made inline):
    /// as [`TaskRecorder::start`] for the task it stands for.
    pub fn start_copy(&self, kind: &'static str, len: usize) -> Option<Started> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        Some(Started {
            kind,
            op: None,
            name: bytes(len),
            start: Instant::now(),
        })
    }

    /// After the job `s` started.
    pub fn finish(&self, stream: StreamId, s: Started, ok: bool) {
        let end = Instant::now();
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(TaskRecord {
                stream,
                kind: s.kind,
                op: s.op,
                name: s.name,
                start: s.start,
                end,
                ok,
            });
    }

    pub fn take(&self) -> Vec<TaskRecord> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

fn bytes(len: usize) -> String {
    format!("{len} bytes")
}

fn describe_launch(l: &Launch) -> (&'static str, Option<String>, String) {
    let name = l.label().unwrap_or(l.op()).to_string();
    ("kernel launch", Some(l.op().to_string()), name)
}

/// Kind, op type and name of a job; `None` for the shutdown wake-up.
fn describe(job: &Job) -> Option<(&'static str, Option<String>, String)> {
    Some(match job {
        Job::Task(t) => {
            let kind = t.kind();
            match t {
                Task::Launch(l) => describe_launch(l),
                Task::MemcpyH2D { len, .. }
                | Task::MemcpyD2H { len, .. }
                | Task::MemcpyD2D { len, .. }
                | Task::Memset { len, .. } => (kind, None, bytes(*len)),
                Task::EventRecord(e) | Task::EventWait(e) => (kind, None, e.to_string()),
                Task::NotifyRecord(n) | Task::NotifyWait(n) => (kind, None, n.to_string()),
                _ => (kind, None, kind.to_string()),
            }
        }
        Job::EventRecord { .. } => ("event record", None, "event record".into()),
        Job::EventWait { id, .. } => ("event wait", None, id.to_string()),
        Job::NotifyRecord(_) => ("notify record", None, "notify record".into()),
        Job::NotifyWait(_) => ("notify wait", None, "notify wait".into()),
        Job::LaunchAlloc { launch, .. } => (
            "kernel launch",
            Some(launch.op().to_string()),
            launch.label().unwrap_or(launch.op()).to_string(),
        ),
        Job::Execute(..) => ("model execute", None, "model execute".into()),
        Job::RunList { index, .. } => ("model stream run", None, format!("model stream {index}")),
        Job::Shutdown => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{Device, DeviceConfig, Launch, TensorArg};
    use crate::ops::DType;

    #[test]
    fn records_each_task_only_while_on() {
        let d = Device::new(DeviceConfig::default());
        let s = d.create_stream();
        let p = d.malloc(16, s).unwrap();
        d.memset_async(s, p, 1, 16).unwrap();
        d.synchronize(s).unwrap();
        assert!(d.take_task_records().is_empty(), "off by default");

        d.record_tasks(true);
        d.memset_async(s, p, 0, 16).unwrap();
        let x = TensorArg::new(p, DType::F32, &[4]);
        let relu = Launch::new("Relu", Default::default(), vec![x.clone()], vec![x]);
        d.launch(s, relu.labeled(Arc::from("relu1"))).unwrap();
        let host = d.malloc_host(16);
        d.memcpy_d2h_async(s, &host, p).unwrap();
        d.synchronize(s).unwrap();
        d.record_tasks(false);
        d.memset_async(s, p, 0, 16).unwrap();
        d.synchronize(s).unwrap();

        let r = d.take_task_records();
        let got: Vec<_> = r
            .iter()
            .map(|t| (t.stream, t.kind, t.op.as_deref(), t.name.as_str(), t.ok))
            .collect();
        assert_eq!(
            got,
            [
                (s, "memset", None, "16 bytes", true),
                (s, "kernel launch", Some("Relu"), "relu1", true),
                (s, "device-to-host copy", None, "16 bytes", true),
            ]
        );
        for w in r.windows(2) {
            assert!(
                w[0].start <= w[0].end && w[0].end <= w[1].start,
                "one after another"
            );
        }
        assert!(d.take_task_records().is_empty(), "taken");
    }

    /// Records past a chunk's end come back in order, every one, and a take empties the
    /// recorder.
    #[test]
    fn records_span_chunks_in_order() {
        let r = super::TaskRecorder::default();
        let s = Device::new(DeviceConfig::default()).create_stream();
        let n = 2 * super::CHUNK + 5;
        for i in 0..n {
            let started = super::Started {
                kind: "memset",
                op: None,
                name: i.to_string(),
                start: std::time::Instant::now(),
            };
            r.finish(s, started, true);
        }
        let names: Vec<String> = r.take().into_iter().map(|t| t.name).collect();
        assert_eq!(names, (0..n).map(|i| i.to_string()).collect::<Vec<_>>());
        assert!(r.take().is_empty());
    }
}
