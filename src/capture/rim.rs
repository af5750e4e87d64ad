//! Saved captured models (`.rim.json`): a model tree with its streams, tasks, condition
//! handles and sub-models, and the buffers its kernels use with their contents at the
//! capture's end; and replay, which builds such a file onto a fresh device
//! (`aclmdlRIBuildBegin` .. `aclmdlRIBuildEnd`) and executes it.
//!
//! The format is JSON, with names where the device had addresses: buffers and handles by
//! their script names, sub-models by index, events by model-local number. Loading checks
//! every reference and names the place of a fault (`model.sub_models[0].streams[1]
//! .tasks[3]`); nothing in a file can make replay panic, and nothing in it can make a
//! replay run forever: before anything is built, every count is checked against what the
//! file holds (a model cannot have more events than event tasks) and every model of the
//! tree is checked to finish ([`check_tree`]: no stream activates itself, directly or
//! through others; every event wait has a record that runs before it). What is left is
//! a WHILE whose body never clears its condition, which the device's watchdog ends.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::npu::device::{CondKind, DevicePtr, SanitizeChecks, StreamId};

use super::acl::{Acl, AclConfig, CondHandle, MAX_WHILE_ITERATIONS, ModelRI, RecStream, RecTask};
use super::buffers::{BufferReport, read};
use super::device_kernels::{Buf, DeviceKernel, DeviceKernelCall};
use super::error::AclError;
use super::names::Names;
use super::types::{self, BufDtype, Scalar};

/// The `format` value of a saved model.
pub const FORMAT: &str = "rt2.rim";

/// A saved model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RimFile {
    pub format: String,
    pub version: u32,
    pub name: String,
    /// The device's WHILE watchdog the model was captured under.
    pub max_while_iterations: u64,
    pub buffers: Vec<RimBuffer>,
    /// Every condition handle the tree uses, with its value at the capture's end.
    pub handles: Vec<RimHandle>,
    pub model: RimModel,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RimBuffer {
    pub name: String,
    pub dtype: BufDtype,
    pub values: Vec<Scalar>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RimHandle {
    pub name: String,
    pub value: u64,
    pub default: u32,
    pub assign_default: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RimModel {
    pub name: String,
    /// Condition handles created on this model (their defaults apply at its start).
    pub handles: Vec<String>,
    /// Model-local events.
    pub events: u32,
    pub streams: Vec<RimStream>,
    pub sub_models: Vec<RimModel>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RimStream {
    /// The user stream the tasks were captured from.
    pub stream: String,
    /// Started by a stream_activate task, not at each execution.
    pub cascade: bool,
    pub tasks: Vec<RimTask>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "snake_case", deny_unknown_fields)]
pub enum RimTask {
    DeviceKernel {
        call: DeviceKernel,
        enabled: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
    EventRecord {
        event: u32,
    },
    EventWait {
        event: u32,
    },
    StreamActivate {
        stream: u32,
    },
    Cond {
        #[serde(rename = "type")]
        kind: CondKind,
        handle: String,
        /// Indices into the model's `sub_models`.
        models: Vec<u32>,
    },
}

/// Why a saved model cannot be used, and where in it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct RimError {
    pub place: String,
    pub message: String,
}

fn rim_err(place: impl Into<String>, message: impl Into<String>) -> RimError {
    RimError {
        place: place.into(),
        message: message.into(),
    }
}

// ---- saving

/// Collects what a saved model refers to while its tree is converted.
struct Saver<'a> {
    acl: &'a Acl,
    names: &'a Names,
    buffers: Vec<Buf>,
    handles: Vec<CondHandle>,
}

impl Saver<'_> {
    fn buf(&mut self, b: Buf) -> String {
        if !self.buffers.contains(&b) {
            self.buffers.push(b);
        }
        self.names
            .buffers
            .get(&b.ptr)
            .cloned()
            .unwrap_or_else(|| format!("buffer@{}", b.ptr))
    }

    fn handle(&mut self, h: CondHandle) -> String {
        if !self.handles.contains(&h) {
            self.handles.push(h);
        }
        self.names
            .handles
            .get(&h)
            .cloned()
            .unwrap_or_else(|| format!("handle{}", h.0))
    }

    fn kernel(&mut self, call: &DeviceKernelCall<CondHandle>) -> DeviceKernel {
        match *call {
            DeviceKernelCall::Fill { dst, value } => DeviceKernel::Fill {
                dst: self.buf(dst),
                value,
            },
            DeviceKernelCall::Copy { dst, src } => DeviceKernel::Copy {
                dst: self.buf(dst),
                src: self.buf(src),
            },
            DeviceKernelCall::Add { dst, a, b } => DeviceKernel::Add {
                dst: self.buf(dst),
                a: self.buf(a),
                b: self.buf(b),
            },
            DeviceKernelCall::AddScalar { dst, src, value } => DeviceKernel::AddScalar {
                dst: self.buf(dst),
                src: self.buf(src),
                value,
            },
            DeviceKernelCall::MulScalar { dst, src, value } => DeviceKernel::MulScalar {
                dst: self.buf(dst),
                src: self.buf(src),
                value,
            },
            DeviceKernelCall::Increment { dst, index, by } => DeviceKernel::Increment {
                dst: self.buf(dst),
                index,
                by,
            },
            DeviceKernelCall::SetCond { cond, src, index } => DeviceKernel::SetCond {
                handle: self.handle(cond),
                src: self.buf(src),
                index,
            },
            DeviceKernelCall::SetCondLt {
                cond,
                src,
                index,
                limit,
            } => DeviceKernel::SetCondLt {
                handle: self.handle(cond),
                src: self.buf(src),
                index,
                limit,
            },
        }
    }

    fn model(&mut self, name: &str, m: ModelRI) -> Result<RimModel, AclError> {
        let snap = self.acl.snapshot(m).ok_or(AclError::InvalidParam)?;
        let mut sub_models = Vec::with_capacity(snap.subs.len());
        for &s in &snap.subs {
            let sub_name = self
                .names
                .models
                .get(&s)
                .cloned()
                .unwrap_or_else(|| format!("model{}", s.0));
            sub_models.push(self.model(&sub_name, s)?);
        }
        let mut streams = Vec::with_capacity(snap.streams.len());
        for x in &snap.streams {
            let mut tasks = Vec::with_capacity(x.tasks.len());
            for t in &x.tasks {
                tasks.push(match t {
                    RecTask::DeviceKernel {
                        call,
                        enabled,
                        group,
                    } => RimTask::DeviceKernel {
                        call: self.kernel(call),
                        enabled: *enabled,
                        group: group.map(|g| {
                            self.names
                                .groups
                                .get(&g)
                                .cloned()
                                .unwrap_or_else(|| format!("group{}", g.0))
                        }),
                    },
                    RecTask::EventRecord(e) => RimTask::EventRecord { event: *e },
                    RecTask::EventWait(e) => RimTask::EventWait { event: *e },
                    RecTask::Activate(s) => RimTask::StreamActivate { stream: *s },
                    RecTask::Cond {
                        handle,
                        kind,
                        models,
                    } => RimTask::Cond {
                        kind: *kind,
                        handle: self.handle(*handle),
                        models: models
                            .iter()
                            .filter_map(|x| snap.subs.iter().position(|s| s == x))
                            .map(|i| i as u32)
                            .collect(),
                    },
                });
            }
            streams.push(RimStream {
                stream: x
                    .user
                    .and_then(|u| self.names.streams.get(&u).cloned())
                    .unwrap_or_else(|| "-".into()),
                cascade: !x.active_at_start,
                tasks,
            });
        }
        let handles = snap.handles.iter().map(|&h| self.handle(h)).collect();
        Ok(RimModel {
            name: name.to_string(),
            handles,
            events: snap.events,
            streams,
            sub_models,
        })
    }
}

/// The saved form of a top-level model as it is now, with the current contents of the
/// buffers and handles it uses.
pub fn save(
    acl: &Acl,
    names: &Names,
    name: &str,
    model: ModelRI,
    max_while_iterations: u64,
) -> Result<RimFile, AclError> {
    let mut saver = Saver {
        acl,
        names,
        buffers: Vec::new(),
        handles: Vec::new(),
    };
    let tree = saver.model(name, model)?;
    let mut buffers = Vec::with_capacity(saver.buffers.len());
    for b in saver.buffers.clone() {
        buffers.push(RimBuffer {
            name: saver.buf(b),
            dtype: b.dtype,
            values: read(acl, b)?,
        });
    }
    let mut handles = Vec::with_capacity(saver.handles.len());
    for &h in &saver.handles.clone() {
        let info = acl.handle_info(h).ok_or(AclError::InvalidParam)?;
        let mut bytes = [0u8; 8];
        acl.read(info.ptr, &mut bytes)?;
        handles.push(RimHandle {
            name: saver.handle(h),
            value: u64::from_le_bytes(bytes),
            default: info.default,
            assign_default: info.assign_default,
        });
    }
    Ok(RimFile {
        format: FORMAT.into(),
        version: 1,
        name: name.to_string(),
        max_while_iterations,
        buffers,
        handles,
        model: tree,
    })
}

// ---- loading and replay

/// Parses a saved model; a JSON fault names its line and column.
pub fn parse(text: &str) -> Result<RimFile, RimError> {
    let f: RimFile = serde_json::from_str(text).map_err(|e| {
        rim_err(
            format!("line {}, column {}", e.line(), e.column()),
            e.to_string(),
        )
    })?;
    if f.format != FORMAT {
        return Err(rim_err(
            "format",
            format!("is {:?}, not {FORMAT:?}", f.format),
        ));
    }
    if f.version != 1 {
        return Err(rim_err(
            "version",
            format!("{} is not supported (1 is)", f.version),
        ));
    }
    Ok(f)
}

/// A saved model on a device, ready to execute.
pub struct Replay {
    pub acl: Acl,
    pub model: ModelRI,
    /// The device's WHILE watchdog.
    pub max_while_iterations: u64,
    buffers: Vec<(String, Buf)>,
}

impl Replay {
    /// Executes the model `times` times on a fresh stream and waits.
    pub fn execute(&self, times: u32) -> Result<(), AclError> {
        let s = self.acl.create_stream()?;
        for _ in 0..times {
            self.acl.execute_async(self.model, s)?;
        }
        self.acl.synchronize(s)
    }

    /// The buffers' contents now.
    pub fn buffers(&self) -> Result<Vec<BufferReport>, AclError> {
        self.buffers
            .iter()
            .map(|(name, b)| {
                Ok(BufferReport {
                    name: name.clone(),
                    dtype: b.dtype,
                    values: read(&self.acl, *b)?,
                })
            })
            .collect()
    }
}

struct Loader<'a> {
    acl: &'a Acl,
    /// Each model's sub-models, by the model's place in the file.
    subs: HashMap<String, Vec<ModelRI>>,
    buffers: HashMap<&'a str, Buf>,
    handles: HashMap<&'a str, (&'a RimHandle, Option<CondHandle>)>,
}

impl<'a> Loader<'a> {
    fn buf(&self, place: &str, name: &str) -> Result<Buf, RimError> {
        self.buffers
            .get(name)
            .copied()
            .ok_or_else(|| rim_err(place, format!("no buffer {name:?} in the file")))
    }

    fn handle(&self, place: &str, name: &str) -> Result<CondHandle, RimError> {
        self.handles
            .get(name)
            .and_then(|(_, h)| *h)
            .ok_or_else(|| rim_err(place, format!("no condition handle {name:?} in the file")))
    }

    fn kernel(
        &self,
        place: &str,
        k: &DeviceKernel,
    ) -> Result<DeviceKernelCall<CondHandle>, RimError> {
        let call =
            DeviceKernelCall::from_named(k, |n| self.buf(place, n), |n| self.handle(place, n))?;
        call.check().map_err(|_| {
            rim_err(
                place,
                "the kernel's arguments disagree (types, lengths, an index or a value)",
            )
        })?;
        Ok(call)
    }

    /// First pass: the model's handles and sub-models, depth first (every handle must
    /// exist before any kernel refers to it, wherever in the tree).
    fn create(&mut self, m: ModelRI, rim: &'a RimModel, place: &str) -> Result<(), RimError> {
        let dev = |e: AclError| rim_err(place, e.to_string());
        for h in &rim.handles {
            let entry = self
                .handles
                .get_mut(h.as_str())
                .ok_or_else(|| rim_err(format!("{place}.handles"), format!("no handle {h:?}")))?;
            if entry.1.is_some() {
                return Err(rim_err(
                    format!("{place}.handles"),
                    format!("handle {h:?} belongs to two models"),
                ));
            }
            entry.1 = Some(
                self.acl
                    .build_handle(m, entry.0.default, entry.0.assign_default)
                    .map_err(dev)?,
            );
        }
        let mut subs = Vec::with_capacity(rim.sub_models.len());
        for _ in &rim.sub_models {
            subs.push(self.acl.build_sub(m).map_err(dev)?);
        }
        for (i, (sub, sr)) in subs.iter().zip(&rim.sub_models).enumerate() {
            self.create(*sub, sr, &format!("{place}.sub_models[{i}]"))?;
        }
        self.subs.insert(place.to_string(), subs);
        Ok(())
    }

    /// Handles no model of the file owns (a kernel wrote another model's handle): the root
    /// gets them, with no default to apply.
    fn adopt_orphans(&mut self, root: ModelRI) -> Result<(), RimError> {
        let orphans: Vec<&str> = self
            .handles
            .iter()
            .filter(|(_, (_, h))| h.is_none())
            .map(|(n, _)| *n)
            .collect();
        for n in orphans {
            let h = self
                .acl
                .build_handle(root, 0, false)
                .map_err(|e| rim_err("handles", e.to_string()))?;
            if let Some(e) = self.handles.get_mut(n) {
                e.1 = Some(h);
            }
        }
        Ok(())
    }

    /// Second pass: the streams of the model and of its sub-models.
    fn streams(&mut self, m: ModelRI, rim: &'a RimModel, place: &str) -> Result<(), RimError> {
        let dev = |e: AclError| rim_err(place, e.to_string());
        let subs = self.subs.get(place).cloned().unwrap_or_default();
        for (i, (sub, sr)) in subs.iter().zip(&rim.sub_models).enumerate() {
            self.streams(*sub, sr, &format!("{place}.sub_models[{i}]"))?;
        }
        let mut streams = Vec::with_capacity(rim.streams.len());
        let mut used = HashSet::new();
        for (si, s) in rim.streams.iter().enumerate() {
            let mut tasks = Vec::with_capacity(s.tasks.len());
            for (ti, t) in s.tasks.iter().enumerate() {
                let at = format!("{place}.streams[{si}].tasks[{ti}]");
                tasks.push(match t {
                    RimTask::DeviceKernel { call, enabled, .. } => RecTask::DeviceKernel {
                        call: self.kernel(&at, call)?,
                        enabled: *enabled,
                        group: None,
                    },
                    // Their numbers were checked with the tree (`check_tree`).
                    RimTask::EventRecord { event } => RecTask::EventRecord(*event),
                    RimTask::EventWait { event } => RecTask::EventWait(*event),
                    RimTask::StreamActivate { stream } => RecTask::Activate(*stream),
                    RimTask::Cond {
                        kind,
                        handle,
                        models,
                    } => {
                        if !kind.accepts_size(models.len()) {
                            return Err(rim_err(
                                at,
                                format!("a {kind} task cannot have {} models", models.len()),
                            ));
                        }
                        let mut ms = Vec::with_capacity(models.len());
                        for &i in models {
                            let sub = subs.get(i as usize).copied().ok_or_else(|| {
                                rim_err(&at, format!("sub-model {i}, the model has {}", subs.len()))
                            })?;
                            if !used.insert(i) {
                                return Err(rim_err(&at, format!("sub-model {i} is used twice")));
                            }
                            ms.push(sub);
                        }
                        RecTask::Cond {
                            handle: self.handle(&at, handle)?,
                            kind: *kind,
                            models: ms,
                        }
                    }
                });
            }
            streams.push(RecStream {
                user: None::<StreamId>,
                active_at_start: !s.cascade,
                tasks,
            });
        }
        if !streams.is_empty() && streams.iter().all(|s| !s.active_at_start) {
            return Err(rim_err(
                format!("{place}.streams"),
                "no stream starts the model",
            ));
        }
        self.acl.build_streams(m, streams, rim.events).map_err(dev)
    }
}

/// How [`load`] sets up the device a saved model runs on.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    /// The device's WHILE watchdog; `None`, the file's, but at most
    /// [`MAX_WHILE_ITERATIONS`]: the file's value is only a number in a file, and
    /// `u64::MAX` would let a WHILE that never clears its condition spin for ever.
    pub max_while_iterations: Option<u64>,
    /// The device sanitizer's checks; the default is the device's (on in debug builds).
    pub sanitize: Option<SanitizeChecks>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_while_iterations: None,
            sanitize: AclConfig::default().sanitize,
        }
    }
}

/// Builds a saved model onto a fresh device with its buffers and handle values, once
/// the model tree is checked to finish ([`check_tree`]).
pub fn load(f: &RimFile, options: &LoadOptions) -> Result<Replay, RimError> {
    // Before any device or memory exists: a count in the file allocates nothing unchecked.
    check_tree(&f.model, "model")?;
    let watchdog = options
        .max_while_iterations
        .unwrap_or(f.max_while_iterations.min(MAX_WHILE_ITERATIONS));
    let acl = Acl::try_new(AclConfig {
        max_while_iterations: watchdog.max(1),
        sanitize: options.sanitize,
        ..AclConfig::default()
    })
    .map_err(|e| rim_err("model", format!("the device cannot start: {e}")))?;
    let mut buffers = Vec::with_capacity(f.buffers.len());
    for (i, b) in f.buffers.iter().enumerate() {
        let place = format!("buffers[{i}]");
        if buffers.iter().any(|(n, _): &(String, Buf)| *n == b.name) {
            return Err(rim_err(place, format!("buffer {:?} appears twice", b.name)));
        }
        if b.values.is_empty() {
            return Err(rim_err(place, "a buffer needs at least one value"));
        }
        let bytes = types::encode(b.dtype, &b.values).map_err(|m| rim_err(&place, m))?;
        let ptr = acl
            .malloc(bytes.len())
            .map_err(|e| rim_err(&place, e.to_string()))?;
        acl.write(ptr, &bytes)
            .map_err(|e| rim_err(&place, e.to_string()))?;
        buffers.push((
            b.name.clone(),
            Buf {
                ptr,
                dtype: b.dtype,
                len: b.values.len(),
            },
        ));
    }
    let mut handles = HashMap::new();
    for (i, h) in f.handles.iter().enumerate() {
        if handles.insert(h.name.as_str(), (h, None)).is_some() {
            return Err(rim_err(
                format!("handles[{i}]"),
                format!("handle {:?} appears twice", h.name),
            ));
        }
    }
    let root = acl.build_begin();
    let mut loader = Loader {
        acl: &acl,
        subs: HashMap::new(),
        buffers: buffers.iter().map(|(n, b)| (n.as_str(), *b)).collect(),
        handles,
    };
    loader.create(root, &f.model, "model")?;
    loader.adopt_orphans(root)?;
    loader.streams(root, &f.model, "model")?;
    let values: Vec<(DevicePtr, u64)> = f
        .handles
        .iter()
        .filter_map(|h| {
            let ch = loader.handles.get(h.name.as_str())?.1?;
            Some((acl.handle_info(ch)?.ptr, h.value))
        })
        .collect();
    for (ptr, v) in values {
        acl.write(ptr, &v.to_le_bytes())
            .map_err(|e| rim_err("handles", e.to_string()))?;
    }
    acl.build_end(root)
        .map_err(|e| rim_err("model", e.to_string()))?;
    Ok(Replay {
        acl,
        model: root,
        max_while_iterations: watchdog.max(1),
        buffers,
    })
}

// ---- checks: every execution of the tree can finish

/// Checks a model and its sub-models, depth first, before anything is built from them:
/// [`check_model`] for each. (The depth is bounded by the JSON reader's nesting limit.)
pub fn check_tree(m: &RimModel, place: &str) -> Result<(), RimError> {
    check_model(m, place)?;
    for (i, sub) in m.sub_models.iter().enumerate() {
        check_tree(sub, &format!("{place}.sub_models[{i}]"))?;
    }
    Ok(())
}

/// A task's place in a model: (stream, task index).
type At = (usize, usize);

/// Checks that one execution of the model can finish: its event count is one the file can
/// hold (no more events than event tasks), every event and stream number is in range,
/// each event is recorded once, no stream activates itself (directly or through others),
/// each activated stream is a cascade stream activated once, and, run as the device runs
/// it, no stream is left waiting for an event: for a record no task makes, one in a
/// stream that never starts, or one behind the wait itself (streams waiting on each
/// other). Conditional tasks run their sub-models, which are checked on their own. Linear
/// in the model's tasks.
pub fn check_model(m: &RimModel, place: &str) -> Result<(), RimError> {
    let at = |(s, t): At| format!("{place}.streams[{s}].tasks[{t}]");
    let event_tasks = m
        .streams
        .iter()
        .flat_map(|s| &s.tasks)
        .filter(|t| matches!(t, RimTask::EventRecord { .. } | RimTask::EventWait { .. }))
        .count();
    // Each event is made for a record task, so this bounds what loading allocates.
    if m.events as usize > event_tasks {
        return Err(rim_err(
            format!("{place}.events"),
            format!(
                "is {}, but the model has {event_tasks} event tasks to use them",
                m.events
            ),
        ));
    }
    let n = m.streams.len();
    let mut recorded_at: Vec<Option<At>> = vec![None; m.events as usize];
    // Each stream's activate tasks: (task index, stream activated).
    let mut activates: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (si, s) in m.streams.iter().enumerate() {
        for (ti, t) in s.tasks.iter().enumerate() {
            match *t {
                RimTask::EventRecord { event } | RimTask::EventWait { event }
                    if event >= m.events =>
                {
                    return Err(rim_err(
                        at((si, ti)),
                        format!("event #{event}, the model has {}", m.events),
                    ));
                }
                RimTask::EventRecord { event } => {
                    if let Some(first) = recorded_at[event as usize] {
                        return Err(rim_err(
                            at((si, ti)),
                            format!(
                                "records event #{event} again ({} records it): an event is \
                                 recorded once per execution",
                                at(first)
                            ),
                        ));
                    }
                    recorded_at[event as usize] = Some((si, ti));
                }
                RimTask::StreamActivate { stream } if stream as usize >= n => {
                    return Err(rim_err(
                        at((si, ti)),
                        format!("activates stream {stream}, the model has {n}"),
                    ));
                }
                RimTask::StreamActivate { stream } => activates[si].push((ti, stream as usize)),
                _ => {}
            }
        }
    }
    activation_cycle(&activates).map_or(Ok(()), |(closing, cycle)| {
        let path: Vec<String> = cycle.iter().map(|s| format!("stream {s}")).collect();
        Err(rim_err(
            at(closing),
            format!(
                "an activation cycle: {} -> stream {}; a stream may not activate itself, \
                 directly or through others (it would run for ever)",
                path.join(" -> "),
                cycle[0]
            ),
        ))
    })?;
    let mut activated_by: Vec<Option<At>> = vec![None; n];
    for (si, list) in activates.iter().enumerate() {
        for &(ti, t) in list {
            if !m.streams[t].cascade {
                return Err(rim_err(
                    at((si, ti)),
                    format!(
                        "activates stream {t}, which starts with each execution: a stream \
                         runs once per execution"
                    ),
                ));
            }
            if let Some(other) = activated_by[t] {
                return Err(rim_err(
                    at((si, ti)),
                    format!(
                        "activates stream {t}, which {} activates too: a stream runs once \
                         per execution",
                        at(other)
                    ),
                ));
            }
            activated_by[t] = Some((si, ti));
        }
    }
    match run_to_the_end(m) {
        None => Ok(()),
        Some((waiting, event)) => {
            let why = match recorded_at[event as usize] {
                None => "which no task of the model records".to_string(),
                Some(r) if !started(m, &activated_by, r.0) => format!(
                    "recorded only by {}, in a stream that never starts (no running task \
                     activates it)",
                    at(r)
                ),
                Some(r) => format!(
                    "recorded by {}, which runs only after this wait: the streams wait on \
                     each other",
                    at(r)
                ),
            };
            Err(rim_err(
                at(waiting),
                format!("waits for event #{event}, {why}; the execution would never end"),
            ))
        }
    }
}

/// Whether stream `s` starts in an execution: it starts with it, or a stream that starts
/// activates it. (Activations form no cycle and each stream has one activator at most, so
/// the walk up ends.)
fn started(m: &RimModel, activated_by: &[Option<At>], s: usize) -> bool {
    let mut s = s;
    loop {
        if !m.streams[s].cascade {
            return true;
        }
        match activated_by[s] {
            Some((by, _)) => s = by,
            None => return false,
        }
    }
}

/// A cycle of stream activations, if there is one: the activate task that closes it and
/// the streams around it, in order. An iterative depth-first search (a file may have many
/// streams).
fn activation_cycle(activates: &[Vec<(usize, usize)>]) -> Option<(At, Vec<usize>)> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; activates.len()];
    // The path from the root: (stream, how many of its activations were followed).
    let mut path: Vec<(usize, usize)> = Vec::new();
    for root in 0..activates.len() {
        if mark[root] != Mark::New {
            continue;
        }
        mark[root] = Mark::OnPath;
        path.push((root, 0));
        while let Some(&mut (s, ref mut next)) = path.last_mut() {
            let Some(&(ti, t)) = activates[s].get(*next) else {
                mark[s] = Mark::Done;
                path.pop();
                continue;
            };
            *next += 1;
            match mark[t] {
                Mark::New => {
                    mark[t] = Mark::OnPath;
                    path.push((t, 0));
                }
                Mark::OnPath => {
                    let from = path.iter().position(|&(p, _)| p == t).unwrap_or(0);
                    let cycle = path[from..].iter().map(|&(p, _)| p).collect();
                    return Some(((s, ti), cycle));
                }
                Mark::Done => {}
            }
        }
    }
    None
}

/// Runs the model's task graph as the device would, tasks as steps: streams that start
/// with the execution go first, an activate task starts its stream, an event wait goes on
/// once the event's record has run. Returns the first stream left waiting (its waiting
/// task and the event), if any. Each stream is looked at when it starts and once per
/// record it waited for, so this is linear in the tasks.
fn run_to_the_end(m: &RimModel) -> Option<(At, u32)> {
    let n = m.streams.len();
    let mut next = vec![0usize; n];
    let mut started = vec![false; n];
    let mut recorded = vec![false; m.events as usize];
    let mut waiting: Vec<Vec<usize>> = vec![Vec::new(); m.events as usize];
    let mut ready: Vec<usize> = (0..n).filter(|&s| !m.streams[s].cascade).collect();
    for &s in &ready {
        started[s] = true;
    }
    while let Some(s) = ready.pop() {
        let tasks = &m.streams[s].tasks;
        while let Some(t) = tasks.get(next[s]) {
            match *t {
                RimTask::EventRecord { event } => {
                    recorded[event as usize] = true;
                    ready.append(&mut waiting[event as usize]);
                }
                RimTask::EventWait { event } if !recorded[event as usize] => {
                    waiting[event as usize].push(s);
                    break;
                }
                RimTask::StreamActivate { stream } if !started[stream as usize] => {
                    started[stream as usize] = true;
                    ready.push(stream as usize);
                }
                _ => {}
            }
            next[s] += 1;
        }
    }
    (0..n)
        .filter(|&s| started[s])
        .find_map(|s| match m.streams[s].tasks.get(next[s]) {
            Some(RimTask::EventWait { event }) => Some(((s, next[s]), *event)),
            _ => None,
        })
}
