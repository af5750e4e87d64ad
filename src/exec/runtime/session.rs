//! A measuring session: one ExecuteGraph served on a device by one executor per stream,
//! warmup executions, then timed ones, with the outputs of the last and each timed one's
//! wall-clock time; optionally the node spans and device tasks of the timed executions,
//! and a separate execution that copies every launch's outputs back.
//!
//! This is what a benchmark or a server built on rt2 runs: [`Session::measure`] loads an
//! executor per stream (`N` streams from `N` threads, through [`StreamExecutor`]), times
//! every execution (the call that runs Main, waits for the stream and downloads the
//! outputs), and checks that every stream's outputs equal the first's bit for bit.
//! [`Latency`] summarizes the samples (min, median, max, mean).
//!
//! It uses `npu`, `ops` and the rest of `exec`; nothing here does IO or knows the command
//! line: errors are values ([`SessionError`]) and the caller words them.

use std::sync::{Arc, Barrier, PoisonError};
use std::time::Instant;

use crate::exec::ExecuteGraph;
use crate::exec::runtime::ExecError;
use crate::exec::runtime::context::Subscriber;
use crate::exec::runtime::context::{DEFAULT_MAX_ITERATIONS, ExecutorType};
use crate::exec::runtime::executor::{
    ExecutorOptions, ModelExecuteArg, ModelV2Executor, StreamExecutor,
};
use crate::exec::runtime::subscribers::{DumpedTensor, NodeRecorder, Recording, TensorDumper};
use crate::npu::device::{Device, StreamId, TaskRecord};
use crate::ops::HostTensor;

/// The most latency samples set aside before the first execution (see `repeat`).
const MAX_UPFRONT_SAMPLES: u64 = 1 << 24;

/// What a session records over its timed executions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Record {
    /// Nothing: the engines run without a subscriber.
    #[default]
    Nothing,
    /// A span per node call and the device's task records (for a profile).
    Spans,
    /// Spans with each kernel's trace lines too (for a trace).
    SpansAndTraceLines,
}

/// How a session runs.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    pub executor: ExecutorType,
    /// Concurrent streams, each served from a thread of its own by its own executor; 1 or
    /// more.
    pub streams: u32,
    /// Untimed executions per stream before the timed ones.
    pub warmup: u64,
    /// Timed executions per stream.
    pub iterations: u64,
    /// Graph mode: capture the first execution's device work and replay it for every
    /// later one. One stream only.
    pub graph: bool,
    pub record: Record,
    /// The most iterations a loop node runs in one execution
    /// ([`ExecutorOptions::max_iterations`]).
    pub max_iterations: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            executor: ExecutorType::default(),
            streams: 1,
            warmup: 0,
            iterations: 1,
            graph: false,
            record: Record::Nothing,
            max_iterations: DEFAULT_MAX_ITERATIONS,
        }
    }
}

/// A step of a session, as errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Loading,
    /// Execution `n`, counted from 1 over warmup and timed executions.
    Execution(u64),
    /// The execution of [`Session::dump_tensors`].
    DumpExecution,
    Unloading,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Loading => f.write_str("loading"),
            Step::Execution(n) => write!(f, "execution {n}"),
            Step::DumpExecution => f.write_str("the dump execution"),
            Step::Unloading => f.write_str("unloading"),
        }
    }
}

/// Why a session failed. The executor's errors are boxed: they are large, and a
/// session's results should stay small on the success path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionError {
    /// The graph cannot be prepared for the executor at all.
    #[error(transparent)]
    Prepare(Box<ExecError>),
    /// A step ran and failed.
    #[error("{step} (executor {executor}): {source}")]
    Failed {
        step: Step,
        executor: &'static str,
        source: Box<ExecError>,
    },
    /// Main could not be captured (graph mode).
    #[error("capturing main: {0}")]
    Capture(#[source] Box<ExecError>),
    /// The dumper's copies could not be read back.
    #[error("dumping tensors: {0}")]
    Dump(String),
    /// Two streams computed different outputs from the same inputs.
    #[error("stream {stream}'s output {output} differs from stream 0's")]
    StreamsDiffer { stream: usize, output: usize },
    /// A stream's thread panicked.
    #[error("a stream's thread panicked")]
    Panicked,
}

/// Min, median, max and mean of a session's latency samples, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Latency {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// The summary of `samples`; all zero when there are none.
    pub fn of(samples: &[f64]) -> Latency {
        if samples.is_empty() {
            return Latency::default();
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Latency {
            min: s[0],
            median,
            max: s[n - 1],
            mean: s.iter().sum::<f64>() / n as f64,
        }
    }
}

/// What [`Session::measure`] measured and produced.
#[derive(Debug)]
pub struct Measurement {
    /// Outputs of the last execution of the first stream.
    pub outputs: Vec<HostTensor>,
    /// Microseconds per timed execution, every stream's (stream 0's first).
    pub latencies_us: Vec<f64>,
    /// The node spans and the device's task records of the timed executions, when the
    /// config asked for them.
    pub recorded: Option<(Recording, Vec<TaskRecord>)>,
}

impl Measurement {
    pub fn latency(&self) -> Latency {
        Latency::of(&self.latencies_us)
    }
}

/// One stream's outputs of its last execution and its timed executions' microseconds.
type StreamRun = (Vec<HostTensor>, Vec<f64>);

/// One ExecuteGraph on one device under one [`SessionConfig`].
pub struct Session<'a> {
    graph: &'a Arc<ExecuteGraph>,
    device: &'a Device,
    config: &'a SessionConfig,
}

impl<'a> Session<'a> {
    pub fn new(
        graph: &'a Arc<ExecuteGraph>,
        device: &'a Device,
        config: &'a SessionConfig,
    ) -> Self {
        debug_assert!(config.streams >= 1, "a session serves at least one stream");
        Session {
            graph,
            device,
            config,
        }
    }

    fn failed(&self, step: Step) -> impl FnOnce(ExecError) -> SessionError + use<> {
        let executor = self.config.executor.name();
        move |source| SessionError::Failed {
            step,
            executor,
            source: Box::new(source),
        }
    }

    /// One execution on an executor of its own with a [`TensorDumper`]: every launch's
    /// outputs, copied back once the execution's streams are synchronized.
    pub fn dump_tensors(&self, inputs: &[&HostTensor]) -> Result<Vec<DumpedTensor>, SessionError> {
        let dumper = Arc::new(TensorDumper::new());
        let options = ExecutorOptions {
            executor: self.config.executor,
            subscriber: Some(dumper.clone()),
            max_iterations: self.config.max_iterations,
            ..ExecutorOptions::default()
        };
        let mut ex = ModelV2Executor::create(self.graph, self.device, options)
            .map_err(|e| SessionError::Prepare(Box::new(e)))?;
        ex.load().map_err(self.failed(Step::Loading))?;
        let mut outputs = Vec::new();
        ex.execute_sync(inputs, &mut outputs)
            .map_err(self.failed(Step::DumpExecution))?;
        // The copies were queued on the streams the launches ran on.
        self.device
            .synchronize_device()
            .map_err(|e| self.failed(Step::DumpExecution)(e.into()))?;
        ex.unload().map_err(self.failed(Step::Unloading))?;
        dumper.take().map_err(SessionError::Dump)
    }

    /// Loads the executor(s), then runs the warmup and the timed executions on every
    /// stream; `on_execution` is called after each execution of any stream (a progress
    /// counter, from the streams' threads).
    pub fn measure(
        &self,
        inputs: &[Arc<HostTensor>],
        on_execution: &(dyn Fn() + Sync),
    ) -> Result<Measurement, SessionError> {
        let c = self.config;
        let recorder = match c.record {
            Record::Nothing => None,
            Record::Spans => Some(Arc::new(NodeRecorder::new(false))),
            Record::SpansAndTraceLines => Some(Arc::new(NodeRecorder::new(true))),
        };
        let options = ExecutorOptions {
            executor: c.executor,
            subscriber: recorder.clone().map(|r| r as Arc<dyn Subscriber>),
            max_iterations: c.max_iterations,
            ..ExecutorOptions::default()
        };
        let window = Window {
            recorder: recorder.as_deref(),
            device: self.device,
            barrier: (c.streams > 1).then(|| Barrier::new(c.streams as usize)),
        };
        let (outputs, latencies_us) = if c.streams == 1 {
            self.measure_one(options, inputs, &window, on_execution)?
        } else {
            self.measure_streams(options, inputs, &window, on_execution)?
        };
        let recorded = recorder.map(|r| (r.take(), self.device.take_task_records()));
        Ok(Measurement {
            outputs,
            latencies_us,
            recorded,
        })
    }

    /// One executor on the model's own stream.
    fn measure_one(
        &self,
        options: ExecutorOptions,
        inputs: &[Arc<HostTensor>],
        window: &Window<'_>,
        on_execution: &(dyn Fn() + Sync),
    ) -> Result<StreamRun, SessionError> {
        let mut ex = ModelV2Executor::create(self.graph, self.device, options)
            .map_err(|e| SessionError::Prepare(Box::new(e)))?;
        ex.load().map_err(self.failed(Step::Loading))?;
        let mut timing = Timing::new(window);
        let r = self.repeat(&mut ex, None, inputs, on_execution, &mut timing);
        timing.close();
        let r = r?;
        ex.unload().map_err(self.failed(Step::Unloading))?;
        Ok(r)
    }

    /// A thread per stream, each with its executor from a [`StreamExecutor`]; every
    /// stream's outputs must equal stream 0's.
    fn measure_streams(
        &self,
        options: ExecutorOptions,
        inputs: &[Arc<HostTensor>],
        window: &Window<'_>,
        on_execution: &(dyn Fn() + Sync),
    ) -> Result<StreamRun, SessionError> {
        // Fail early, as a preparation error, if the graph cannot be prepared at all.
        ModelV2Executor::create(self.graph, self.device, options.clone())
            .map_err(|e| SessionError::Prepare(Box::new(e)))?;
        let streams = StreamExecutor::new(self.graph.clone(), self.device, options);
        let results: Vec<Result<StreamRun, SessionError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..self.config.streams)
                .map(|_| {
                    let streams = &streams;
                    scope.spawn(move || {
                        let mut timing = Timing::new(window);
                        let stream = self.device.create_stream();
                        let ex = streams
                            .get_or_create_loaded(stream)
                            .map_err(self.failed(Step::Loading))?;
                        let mut ex = ex.lock().unwrap_or_else(PoisonError::into_inner);
                        let r =
                            self.repeat(&mut ex, Some(stream), inputs, on_execution, &mut timing);
                        // Recording stops before any stream unloads.
                        timing.close();
                        drop(ex);
                        streams.erase(stream);
                        r
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(SessionError::Panicked)))
                .collect()
        });
        let mut first: Option<Vec<HostTensor>> = None;
        let mut latencies_us = Vec::new();
        for (k, r) in results.into_iter().enumerate() {
            let (outs, lat) = r?;
            latencies_us.extend(lat);
            match &first {
                None => first = Some(outs),
                Some(f) => {
                    if let Some(o) = (0..f.len()).find(|&o| f[o] != outs[o]) {
                        return Err(SessionError::StreamsDiffer {
                            stream: k,
                            output: o,
                        });
                    }
                }
            }
        }
        Ok((first.unwrap_or_default(), latencies_us))
    }

    /// Warmup, then timed executions on `stream` (`None`: the model's own); the outputs
    /// of the last one and each timed one's microseconds. `timing` switches the recorders
    /// on for the timed ones (see [`Window`]).
    fn repeat(
        &self,
        ex: &mut ModelV2Executor,
        stream: Option<StreamId>,
        inputs: &[Arc<HostTensor>],
        on_execution: &(dyn Fn() + Sync),
        timing: &mut Timing<'_>,
    ) -> Result<StreamRun, SessionError> {
        let c = self.config;
        // The loop below allocates nothing per execution, so the allocator's work never
        // shows in the samples: the sample vector is sized up front, the output tensors'
        // storage is reused by the executor, the execute argument is built once, and
        // errors (which do allocate) end the loop. Up front means up to 16M samples
        // (128 MiB): a count of 10^18 would ask for more than any host has, so past that
        // the vector grows as it fills, between executions, outside any sample.
        let mut outputs = Vec::new();
        let upfront = c.iterations.min(MAX_UPFRONT_SAMPLES) as usize;
        let mut latencies = Vec::with_capacity(upfront);
        let arg = ModelExecuteArg {
            stream,
            allocator: None,
        };
        // Executions bind the shared inputs as they are; a graph's capture and replay
        // take them borrowed.
        let borrowed: Vec<&HostTensor> = inputs.iter().map(|t| &**t).collect();
        for i in 0..c.warmup.saturating_add(c.iterations) {
            if i == c.warmup {
                timing.open();
            }
            let start = Instant::now();
            let r = if c.graph {
                // The first execution is captured, then every one replays the graph.
                let captured = if ex.has_graph() {
                    Ok(())
                } else {
                    ex.capture_main(&borrowed)
                        .map_err(|e| SessionError::Capture(Box::new(e)))
                };
                captured.and_then(|()| {
                    ex.replay_sync(&borrowed, &mut outputs)
                        .map_err(self.failed(Step::Execution(i + 1)))
                })
            } else {
                ex.execute_sync_with(&arg, inputs, &mut outputs)
                    .map_err(self.failed(Step::Execution(i + 1)))
            };
            let elapsed = start.elapsed();
            r?;
            if i >= c.warmup {
                latencies.push(elapsed.as_secs_f64() * 1e6);
            }
            on_execution();
        }
        Ok((outputs, latencies))
    }
}

/// Switches the recorders on for the timed executions and off after them. With several
/// streams every thread first finishes its warmup (or its timed executions): each thread's
/// [`Timing`] meets the others at a barrier, one switches the recorders, and all go on
/// only after that, so no stream's warmup, loading or unloading is recorded. A thread that
/// fails (or panics) still arrives, from its guard's drop, so no other thread waits
/// forever.
struct Window<'a> {
    recorder: Option<&'a NodeRecorder>,
    device: &'a Device,
    barrier: Option<Barrier>,
}

impl Window<'_> {
    fn switch(&self, on: bool) {
        if let Some(r) = self.recorder {
            r.set(on);
            self.device.record_tasks(on);
        }
    }

    /// Every stream arrives, then the recorders are `on`.
    fn arrive(&self, on: bool) {
        match &self.barrier {
            None => self.switch(on),
            Some(b) => {
                if b.wait().is_leader() {
                    self.switch(on);
                }
                b.wait();
            }
        }
    }
}

/// One stream's passage through a [`Window`]: opened once, then closed once, when asked
/// or when dropped before that.
struct Timing<'a> {
    window: &'a Window<'a>,
    opened: bool,
    closed: bool,
}

impl<'a> Timing<'a> {
    fn new(window: &'a Window<'a>) -> Self {
        Timing {
            window,
            opened: false,
            closed: false,
        }
    }
    fn open(&mut self) {
        if !self.opened {
            self.opened = true;
            self.window.arrive(true);
        }
    }
    fn close(&mut self) {
        self.open();
        if !self.closed {
            self.closed = true;
            self.window.arrive(false);
        }
    }
}

impl Drop for Timing<'_> {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_of_samples() {
        let l = Latency::of(&[3.0, 1.0, 2.0]);
        assert_eq!((l.min, l.median, l.max, l.mean), (1.0, 2.0, 3.0, 2.0));
        let l = Latency::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!((l.min, l.median, l.max, l.mean), (1.0, 2.5, 4.0, 2.5));
        assert_eq!(Latency::of(&[]), Latency::default());
    }
}
