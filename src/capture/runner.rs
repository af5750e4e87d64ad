//! Runs a parsed capture script ([`super::script::Script`]) against a fresh [`Acl`]
//! context and reports what happened ([`Report`]).
//!
//! Each named thread of the script is a real OS thread, started for the run: a step is
//! handed to its thread and the runner waits for the result before the next step, so a
//! script is deterministic while thread identity stays real for the capture-mode and
//! same-thread checks. Streams and events are created on first mention; model, handle and
//! group names are bound by the steps that return them. A name whose binding call failed
//! is a null handle: a call given it fails with ACL_ERROR_INVALID_PARAM, as the C API
//! does for a null pointer.

use std::collections::HashMap;
use std::sync::mpsc;

use crate::npu::device::{EventId, SanitizerReport, StreamId};

use super::acl::{Acl, AclConfig, CondHandle, ModelRI, ModelSnapshot, TaskGroup};
use super::buffers::{BufferReport, read};
use super::device_kernels::{Buf, DeviceKernel, DeviceKernelCall};
use super::error::AclError;
use super::names::Names;
use super::rim::{self, RimFile};
use super::script::{Call, Script, Step};
use super::types::{self, CaptureMode, CaptureStatus, Scalar};

/// How one step came out.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// It did what the script says (succeeded, or failed with the expected error).
    Ok,
    /// It failed without `expect_error`: the script stopped here.
    Failed,
    /// It succeeded although an error was expected, failed with another error, or a
    /// value it checks (`expect_status`, `expect_previous`) differed.
    Mismatch(String),
}

/// One step's report.
#[derive(Debug, Clone, PartialEq)]
pub struct StepReport {
    pub line: usize,
    pub call: &'static str,
    pub thread: String,
    /// The call's result: `Ok` with what it returned worth telling, or the error.
    pub result: Result<String, AclError>,
    pub verdict: Verdict,
}

/// One `expect` step's report.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectReport {
    pub line: usize,
    pub buffer: String,
    pub passed: bool,
    pub expected: Vec<Scalar>,
    pub actual: Vec<Scalar>,
}

/// A top-level model the script bound a name to, as it is at the end of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReport {
    pub name: String,
    pub model: ModelRI,
    /// `None` once destroyed.
    pub snapshot: Option<ModelSnapshot>,
    /// Its sub-models, recursively: (name, snapshot, their sub-models...).
    pub subs: Vec<ModelReport>,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub name: Option<String>,
    pub steps: Vec<StepReport>,
    pub models: Vec<ModelReport>,
    pub buffers: Vec<BufferReport>,
    pub expectations: Vec<ExpectReport>,
    /// Names for ids, for views of the models.
    pub names: Names,
    /// What the device sanitizer found, when it ran (`--sanitize`; debug builds).
    pub sanitizer: Option<SanitizerReport>,
}

impl Report {
    /// Every step behaved as written and every expectation held.
    pub fn passed(&self) -> bool {
        self.steps.iter().all(|s| s.verdict == Verdict::Ok)
            && self.expectations.iter().all(|e| e.passed)
            && self
                .sanitizer
                .as_ref()
                .is_none_or(SanitizerReport::is_clean)
    }
}

/// A top-level model as its capture ended, with the buffers it uses as they were then.
#[derive(Debug, Clone)]
pub struct CapturedAt {
    pub name: String,
    pub model: ModelRI,
    pub file: RimFile,
}

/// A run's context: the API context, its buffers and the names bound so far.
pub struct Session {
    acl: Acl,
    t: Tables,
}

/// The buffers and the names a run bound, beside the context (the run's threads borrow
/// the context while the runner binds names).
struct Tables {
    buffers: Vec<(String, Buf)>,
    /// Each buffer's place in `buffers`, by name: steps name buffers, and a script may
    /// declare many.
    buffer_index: HashMap<String, usize>,
    streams: HashMap<String, StreamId>,
    events: HashMap<String, EventId>,
    models: HashMap<String, Option<ModelRI>>,
    handles: HashMap<String, Option<CondHandle>>,
    groups: HashMap<String, Option<TaskGroup>>,
    /// Top-level model names in binding order.
    top: Vec<String>,
    /// The device's WHILE watchdog, saved with models.
    max_while_iterations: u64,
    /// Buffer contents at each top-level capture end (for `--save`).
    captured: Vec<CapturedAt>,
}

/// What a step's call returns to the runner, to bind or check.
enum Out {
    Done,
    Model(Option<ModelRI>),
    Info(CaptureStatus, Option<ModelRI>),
    Mode(CaptureMode),
    Group(TaskGroup),
    Handle(CondHandle),
    Subs(Vec<ModelRI>),
    Values(Vec<Scalar>),
}

type Job<'a> = Box<dyn FnOnce() -> Result<Out, AclError> + Send + 'a>;

impl Session {
    /// A fresh device with the script's buffers allocated and initialized.
    pub fn new(script: &Script) -> Result<Session, AclError> {
        let acl = Acl::try_new(AclConfig {
            sq_depth: script.device.sq_depth,
            max_while_iterations: script.device.max_while_iterations,
            sanitize: script.device.sanitize,
            ..AclConfig::default()
        })?;
        let mut buffers = Vec::with_capacity(script.buffers.len());
        for b in &script.buffers {
            let bytes = types::encode(b.dtype, &b.init).map_err(|_| AclError::InvalidParam)?;
            let ptr = acl.malloc_uninit(bytes.len())?;
            if !b.uninit {
                acl.write(ptr, &bytes)?;
            }
            buffers.push((
                b.name.clone(),
                Buf {
                    ptr,
                    dtype: b.dtype,
                    len: b.init.len(),
                },
            ));
        }
        let buffer_index = buffers
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), i))
            .collect();
        let t = Tables {
            buffers,
            buffer_index,
            streams: HashMap::new(),
            events: HashMap::new(),
            models: HashMap::new(),
            handles: HashMap::new(),
            groups: HashMap::new(),
            top: Vec::new(),
            max_while_iterations: script.device.max_while_iterations,
            captured: Vec::new(),
        };
        Ok(Session { acl, t })
    }

    pub fn acl(&self) -> &Acl {
        &self.acl
    }

    /// Model contents at each top-level capture end, in end order.
    pub fn captured(&self) -> &[CapturedAt] {
        &self.t.captured
    }

    /// The script's names of the ids it created.
    pub fn names(&self) -> Names {
        self.t.names()
    }
}

impl Tables {
    fn buf(&self, name: &str) -> Result<Buf, AclError> {
        self.buffer_index
            .get(name)
            .map(|&i| self.buffers[i].1)
            .ok_or(AclError::InvalidParam)
    }

    fn stream(&mut self, acl: &Acl, name: &str) -> Result<StreamId, AclError> {
        if let Some(s) = self.streams.get(name) {
            return Ok(*s);
        }
        let s = acl.create_stream()?;
        self.streams.insert(name.to_string(), s);
        Ok(s)
    }

    fn event(&mut self, acl: &Acl, name: &str) -> EventId {
        if let Some(e) = self.events.get(name) {
            return *e;
        }
        let e = acl.create_event();
        self.events.insert(name.to_string(), e);
        e
    }

    fn model(&self, name: &str) -> Result<ModelRI, AclError> {
        self.models
            .get(name)
            .copied()
            .flatten()
            .ok_or(AclError::InvalidParam)
    }

    fn handle(&self, name: &str) -> Result<CondHandle, AclError> {
        self.handles
            .get(name)
            .copied()
            .flatten()
            .ok_or(AclError::InvalidParam)
    }

    fn kernel(&self, k: &DeviceKernel) -> Result<DeviceKernelCall<CondHandle>, AclError> {
        DeviceKernelCall::from_named(k, |n| self.buf(n), |n| self.handle(n))
    }

    fn all_buffers(&self, acl: &Acl) -> Vec<BufferReport> {
        self.buffers
            .iter()
            .map(|(name, b)| BufferReport {
                name: name.clone(),
                dtype: b.dtype,
                values: read(acl, *b).unwrap_or_default(),
            })
            .collect()
    }

    /// Turns a step into the call its thread makes, resolving names first (streams and
    /// events are created here, on the runner's thread). The job owns copies of the ids.
    fn job<'s>(&mut self, acl: &'s Acl, call: &Call) -> Job<'s> {
        let fail = |e: AclError| -> Job<'s> { Box::new(move || Err(e)) };
        // A stream that cannot be created (its worker thread refused) fails the step.
        macro_rules! or_fail {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(e) => return fail(e),
                }
            };
        }
        match call {
            Call::CaptureBegin { stream, mode } => {
                let (s, mode) = (or_fail!(self.stream(acl, stream)), *mode);
                Box::new(move || acl.capture_begin(s, mode).map(|()| Out::Done))
            }
            Call::CaptureEnd { stream, model } => {
                let (s, want) = (or_fail!(self.stream(acl, stream)), model.is_some());
                Box::new(move || acl.capture_end(s, want).map(Out::Model))
            }
            Call::CaptureGetInfo { stream, .. } => {
                let s = or_fail!(self.stream(acl, stream));
                Box::new(move || acl.capture_get_info(s).map(|(st, m)| Out::Info(st, m)))
            }
            Call::CaptureToModelBegin {
                stream,
                model,
                mode,
            } => {
                let s = or_fail!(self.stream(acl, stream));
                let (m, mode) = match self.model(model) {
                    Ok(m) => (m, *mode),
                    Err(e) => return fail(e),
                };
                Box::new(move || acl.capture_to_model_begin(s, m, mode).map(|()| Out::Done))
            }
            Call::ThreadExchangeMode { mode, .. } => {
                let mode = *mode;
                Box::new(move || Ok(Out::Mode(acl.thread_exchange_mode(mode))))
            }
            Call::StreamAddToModel { stream, model } => {
                let s = or_fail!(self.stream(acl, stream));
                let m = match self.model(model) {
                    Ok(m) => m,
                    Err(e) => return fail(e),
                };
                Box::new(move || acl.stream_add_to_model(s, m).map(|()| Out::Done))
            }
            Call::Launch { stream, kernel } => {
                let s = or_fail!(self.stream(acl, stream));
                let k = match self.kernel(kernel) {
                    Ok(k) => k,
                    Err(e) => return fail(e),
                };
                Box::new(move || acl.launch_kernel(s, k).map(|()| Out::Done))
            }
            Call::Memcpy { dst, src } => match (self.buf(dst), self.buf(src)) {
                (Ok(d), Ok(s)) => Box::new(move || acl.memcpy(d, s).map(|()| Out::Done)),
                _ => fail(AclError::InvalidParam),
            },
            Call::Memset { dst, value } => match self.buf(dst) {
                Ok(d) => {
                    let v = *value;
                    Box::new(move || acl.memset(d, v).map(|()| Out::Done))
                }
                Err(e) => fail(e),
            },
            Call::Synchronize { stream } => {
                let s = or_fail!(self.stream(acl, stream));
                Box::new(move || acl.synchronize(s).map(|()| Out::Done))
            }
            Call::EventRecord { event, stream } => {
                let (e, s) = (self.event(acl, event), or_fail!(self.stream(acl, stream)));
                Box::new(move || acl.record_event(e, s).map(|()| Out::Done))
            }
            Call::EventWait { event, stream } => {
                let (e, s) = (self.event(acl, event), or_fail!(self.stream(acl, stream)));
                Box::new(move || acl.stream_wait_event(s, e).map(|()| Out::Done))
            }
            Call::TaskGroupBegin { stream } => {
                let s = or_fail!(self.stream(acl, stream));
                Box::new(move || acl.task_group_begin(s).map(|()| Out::Done))
            }
            Call::TaskGroupEnd { stream, .. } => {
                let s = or_fail!(self.stream(acl, stream));
                Box::new(move || acl.task_group_end(s).map(Out::Group))
            }
            Call::TaskUpdateBegin { stream, group } => {
                let s = or_fail!(self.stream(acl, stream));
                let Some(Some(g)) = self.groups.get(group).copied() else {
                    return fail(AclError::InvalidParam);
                };
                Box::new(move || acl.task_update_begin(s, g).map(|()| Out::Done))
            }
            Call::TaskUpdateEnd { stream } => {
                let s = or_fail!(self.stream(acl, stream));
                Box::new(move || acl.task_update_end(s).map(|()| Out::Done))
            }
            Call::ModelUpdate { model } => match self.model(model) {
                Ok(m) => Box::new(move || acl.model_update(m).map(|()| Out::Done)),
                Err(e) => fail(e),
            },
            Call::TaskDisable {
                model,
                stream,
                task,
            } => match self.model(model) {
                Ok(m) => {
                    let (s, t) = (*stream, *task);
                    Box::new(move || acl.task_disable(m, s, t).map(|()| Out::Done))
                }
                Err(e) => fail(e),
            },
            Call::TaskSetParams {
                model,
                stream,
                task,
                kernel,
            } => match (self.model(model), self.kernel(kernel)) {
                (Ok(m), Ok(k)) => {
                    let (s, t) = (*stream, *task);
                    Box::new(move || acl.task_set_params(m, s, t, k).map(|()| Out::Done))
                }
                (Err(e), _) | (_, Err(e)) => fail(e),
            },
            Call::CondHandleCreate {
                model,
                default,
                assign_default,
                ..
            } => match self.model(model) {
                Ok(m) => {
                    let (d, a) = (*default, *assign_default);
                    Box::new(move || acl.cond_handle_create(m, d, a).map(Out::Handle))
                }
                Err(e) => fail(e),
            },
            Call::AddCondTask {
                stream,
                handle,
                kind,
                models,
            } => {
                let s = or_fail!(self.stream(acl, stream));
                let h = match self.handle(handle) {
                    Ok(h) => h,
                    Err(e) => return fail(e),
                };
                let (kind, n) = (*kind, models.len());
                Box::new(move || acl.add_cond_task(s, h, kind, n).map(Out::Subs))
            }
            Call::Execute {
                model,
                stream,
                times,
            } => {
                let s = or_fail!(self.stream(acl, stream));
                match self.model(model) {
                    Ok(m) => {
                        let times = *times;
                        Box::new(move || {
                            for _ in 0..times {
                                acl.execute_async(m, s)?;
                            }
                            Ok(Out::Done)
                        })
                    }
                    Err(e) => fail(e),
                }
            }
            Call::ModelDestroy { model } => match self.model(model) {
                Ok(m) => Box::new(move || acl.destroy(m).map(|()| Out::Done)),
                Err(e) => fail(e),
            },
            Call::Expect { buffer, .. } => match self.buf(buffer) {
                Ok(b) => Box::new(move || read(acl, b).map(Out::Values)),
                Err(e) => fail(e),
            },
        }
    }

    /// Binds the names a successful call returned, and checks what the step checks.
    fn bind(&mut self, acl: &Acl, step: &Step, out: &Out) -> Option<String> {
        match (&step.call, out) {
            (
                Call::CaptureEnd {
                    model: Some(name), ..
                },
                Out::Model(m),
            ) => {
                self.bind_model(name, *m, true);
                let saved = m.map(|m| {
                    let names = self.names();
                    (
                        m,
                        rim::save(acl, &names, name, m, self.max_while_iterations),
                    )
                });
                match saved {
                    Some((m, Ok(file))) => {
                        self.captured.retain(|c| c.name != *name);
                        self.captured.push(CapturedAt {
                            name: name.clone(),
                            model: m,
                            file,
                        });
                        None
                    }
                    Some((_, Err(e))) => Some(format!("the model cannot be saved: {e}")),
                    None => None,
                }
            }
            (
                Call::CaptureGetInfo {
                    expect_status,
                    model,
                    ..
                },
                Out::Info(status, m),
            ) => {
                if let Some(name) = model {
                    let top =
                        m.is_some_and(|m| acl.snapshot(m).is_some_and(|s| s.parent.is_none()));
                    self.bind_model(name, *m, top);
                }
                match expect_status {
                    Some(want) if want != status => {
                        Some(format!("status is {status}, the script expects {want}"))
                    }
                    _ => None,
                }
            }
            (
                Call::ThreadExchangeMode {
                    expect_previous: Some(want),
                    ..
                },
                Out::Mode(prev),
            ) if want != prev => Some(format!(
                "the previous mode is {prev}, the script expects {want}"
            )),
            (Call::TaskGroupEnd { group, .. }, Out::Group(g)) => {
                self.groups.insert(group.clone(), Some(*g));
                None
            }
            (Call::CondHandleCreate { handle, .. }, Out::Handle(h)) => {
                self.handles.insert(handle.clone(), Some(*h));
                None
            }
            (Call::AddCondTask { models, .. }, Out::Subs(subs)) => {
                for (name, m) in models.iter().zip(subs) {
                    self.bind_model(name, Some(*m), false);
                }
                None
            }
            _ => None,
        }
    }

    fn bind_model(&mut self, name: &str, m: Option<ModelRI>, top: bool) {
        self.models.insert(name.to_string(), m);
        if top && m.is_some() && !self.top.iter().any(|n| n == name) {
            self.top.push(name.to_string());
        }
    }

    /// A failed binding call leaves its names null.
    fn unbind(&mut self, call: &Call) {
        match call {
            Call::CaptureEnd {
                model: Some(name), ..
            }
            | Call::CaptureGetInfo {
                model: Some(name), ..
            } => {
                self.models.insert(name.clone(), None);
            }
            Call::TaskGroupEnd { group, .. } => {
                self.groups.insert(group.clone(), None);
            }
            Call::CondHandleCreate { handle, .. } => {
                self.handles.insert(handle.clone(), None);
            }
            Call::AddCondTask { models, .. } => {
                for n in models {
                    self.models.insert(n.clone(), None);
                }
            }
            _ => {}
        }
    }

    fn model_report(&self, acl: &Acl, name: &str, m: ModelRI) -> ModelReport {
        let snapshot = acl.snapshot(m);
        let subs = snapshot
            .as_ref()
            .map(|s| {
                s.subs
                    .iter()
                    .map(|&sub| {
                        let n = self
                            .models
                            .iter()
                            .find(|(_, v)| **v == Some(sub))
                            .map_or_else(|| format!("model{}", sub.0), |(k, _)| k.clone());
                        self.model_report(acl, &n, sub)
                    })
                    .collect()
            })
            .unwrap_or_default();
        ModelReport {
            name: name.to_string(),
            model: m,
            snapshot,
            subs,
        }
    }

    fn names(&self) -> Names {
        let mut n = Names::default();
        for (k, v) in &self.streams {
            n.streams.insert(*v, k.clone());
        }
        for (k, v) in &self.events {
            n.events.insert(*v, k.clone());
        }
        for (k, v) in &self.models {
            if let Some(m) = v {
                n.models.insert(*m, k.clone());
            }
        }
        for (k, v) in &self.handles {
            if let Some(h) = v {
                n.handles.insert(*h, k.clone());
            }
        }
        for (k, v) in &self.groups {
            if let Some(g) = v {
                n.groups.insert(*g, k.clone());
            }
        }
        for (k, b) in &self.buffers {
            n.buffers.insert(b.ptr, k.clone());
        }
        n
    }
}

/// A named host thread of the run.
struct HostThread<'a> {
    tx: mpsc::Sender<(Job<'a>, mpsc::Sender<Result<Out, AclError>>)>,
}

/// Runs the script. `Err` only when the device cannot be set up with the buffers.
pub fn run(script: &Script) -> Result<(Report, Session), AclError> {
    let session = Session::new(script)?;
    let Session { acl, mut t } = session;
    let mut steps = Vec::with_capacity(script.steps.len());
    let mut expectations = Vec::new();
    std::thread::scope(|scope| {
        let mut threads: HashMap<String, HostThread> = HashMap::new();
        for step in &script.steps {
            if !threads.contains_key(&step.thread) {
                let (tx, rx) = mpsc::channel::<(Job, mpsc::Sender<Result<Out, AclError>>)>();
                let started = std::thread::Builder::new()
                    .name(format!("script-{}", step.thread))
                    .spawn_scoped(scope, move || {
                        for (job, reply) in rx {
                            let _ = reply.send(job());
                        }
                    });
                // A thread the system refuses fails the step (and the script), as a
                // call failing with ACL_ERROR_RT_INTERNAL_ERROR would.
                if started.is_ok() {
                    threads.insert(step.thread.clone(), HostThread { tx });
                }
            }
            let job = t.job(&acl, &step.call);
            let (reply_tx, reply_rx) = mpsc::channel();
            let result = match threads
                .get(&step.thread)
                .map(|h| h.tx.send((job, reply_tx)))
            {
                Some(Ok(())) => reply_rx.recv().unwrap_or(Err(AclError::InternalError)),
                Some(Err(_)) | None => Err(AclError::InternalError),
            };
            let (report, stop) = judge(&acl, &mut t, step, result, &mut expectations);
            steps.push(report);
            if stop {
                break;
            }
        }
        // Dropping the senders ends the threads; the scope joins them.
        threads.clear();
    });
    let models = t
        .top
        .iter()
        .filter_map(|name| {
            t.models
                .get(name)
                .copied()
                .flatten()
                .map(|m| t.model_report(&acl, name, m))
        })
        .collect();
    // The script's findings: its last step has run (its work was waited for by an
    // `expect` or by the buffers' read below, which the sanitizer sees as the host's).
    acl.device().synchronize_device().ok();
    let sanitizer = acl.device().take_sanitizer_report();
    let report = Report {
        name: script.name.clone(),
        steps,
        models,
        buffers: t.all_buffers(&acl),
        expectations,
        names: t.names(),
        sanitizer,
    };
    // What the report's own read of the buffers found (an `uninit` buffer nothing wrote)
    // is the runner's doing, not the script's.
    let _ = acl.device().take_sanitizer_report();
    Ok((report, Session { acl, t }))
}

/// Judges one step's result against the script; returns its report and whether the
/// script stops.
fn judge(
    acl: &Acl,
    t: &mut Tables,
    step: &Step,
    result: Result<Out, AclError>,
    expectations: &mut Vec<ExpectReport>,
) -> (StepReport, bool) {
    let call = step.call.name();
    let mut stop = false;
    let (result, verdict) = match (result, step.expect_error) {
        (Ok(out), None) => {
            let verdict = match t.bind(acl, step, &out) {
                Some(msg) => Verdict::Mismatch(msg),
                None => Verdict::Ok,
            };
            let detail = describe(t, &out);
            if let (Call::Expect { buffer, equals }, Out::Values(actual)) = (&step.call, &out) {
                expectations.push(ExpectReport {
                    line: step.line,
                    buffer: buffer.clone(),
                    passed: actual == equals,
                    expected: equals.clone(),
                    actual: actual.clone(),
                });
            }
            (Ok(detail), verdict)
        }
        (Ok(out), Some(want)) => {
            t.bind(acl, step, &out);
            let detail = describe(t, &out);
            (
                Ok(detail),
                Verdict::Mismatch(format!("succeeded, the script expects {want}")),
            )
        }
        (Err(e), Some(want)) => {
            t.unbind(&step.call);
            let verdict = if e == want {
                Verdict::Ok
            } else {
                Verdict::Mismatch(format!("the script expects {want}"))
            };
            (Err(e), verdict)
        }
        (Err(e), None) => {
            t.unbind(&step.call);
            stop = true;
            (Err(e), Verdict::Failed)
        }
    };
    (
        StepReport {
            line: step.line,
            call,
            thread: step.thread.clone(),
            result,
            verdict,
        },
        stop,
    )
}

/// What a successful call returned, in words for the report.
fn describe(t: &Tables, out: &Out) -> String {
    // One model's name, looked up alone: every step is described, and building every
    // name's map for each (`Tables::names`) would make a run quadratic in the names bound.
    let model = |m: &ModelRI| {
        t.models
            .iter()
            .filter(|(_, v)| **v == Some(*m))
            .map(|(k, _)| k)
            .min()
            .cloned()
            .unwrap_or_else(|| format!("model{}", m.0))
    };
    match out {
        Out::Done | Out::Group(_) | Out::Handle(_) | Out::Subs(_) => String::new(),
        Out::Model(m) => m.as_ref().map(model).unwrap_or_default(),
        Out::Info(status, m) => match m {
            Some(m) => format!("{status}, {}", model(m)),
            None => status.to_string(),
        },
        Out::Mode(prev) => format!("previous {prev}"),
        Out::Values(v) => format!(
            "[{}]",
            v.iter()
                .map(Scalar::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
