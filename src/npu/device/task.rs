//! What a stream runs: [`Task`]s and kernel [`Launch`]es as the host describes them.
//!
//! A [`Task`] is plain data (cloneable, no resolved state), so the same value can be
//! submitted to a stream, recorded by the capture feature, or preloaded into a model and
//! run many times. Submission turns it into a job: it checks the task's device ranges
//! against the allocator and resolves event waits to the record they wait for, which is
//! what a task must know at the moment the host issued it. The jobs themselves, which
//! carry the device's resolved state, live in `queue`, above this file: a task knows
//! nothing of streams, models or the device.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::ops::HostTensor;
use crate::ops::{AttrMap, DType};
use crate::ops::{InferCtx, OpSpec, SpecialFn, TensorMeta};

use super::access::SpanLocks;
use super::error::NpuError;
use super::host::HostBuf;
use super::ids::{DevicePtr, EventId, ModelId, NotifyId};
use super::memory::{Memory, Span};
use super::sanitizer::{Role, Touch};

/// A tensor argument of a launch: where it is in device memory, its element type and dims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorArg {
    pub ptr: DevicePtr,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl TensorArg {
    pub fn new(ptr: DevicePtr, dtype: DType, shape: &[usize]) -> Self {
        TensorArg {
            ptr,
            dtype,
            shape: shape.to_vec(),
        }
    }
    /// Bytes the tensor occupies; `None` past `usize`.
    pub fn bytes(&self) -> Option<usize> {
        self.shape
            .iter()
            .try_fold(self.dtype.size(), |n, &d| n.checked_mul(d))
    }
    /// Its device range: address and bytes (`usize::MAX` past `usize`, which no check
    /// passes).
    pub(crate) fn range(&self) -> (DevicePtr, usize) {
        (self.ptr, self.bytes().unwrap_or(usize::MAX))
    }
    /// The type and concrete dims, as inference takes them.
    pub fn meta(&self) -> TensorMeta {
        let dims: Vec<i64> = self.shape.iter().map(|&d| d as i64).collect();
        TensorMeta::new(self.dtype, &dims)
    }
}

/// A kernel launch: an op of the device's library on tensors in device memory.
#[derive(Debug, Clone)]
pub struct Launch {
    op: Cow<'static, str>,
    attrs: AttrMap,
    inputs: Vec<TensorArg>,
    outputs: Vec<TensorArg>,
    output_count: usize,
    /// The inputs' metas, built once here rather than per run: what the op's context needs.
    metas: Vec<TensorMeta>,
    /// The outputs' metas likewise: what choosing a specialized kernel reads.
    out_metas: Vec<TensorMeta>,
    /// What the host calls this launch (the op it serves), for the task recorder.
    label: Option<Arc<str>>,
    /// What its last inline run checked and resolved (see [`Resolved`]).
    pub(crate) resolved: Resolved,
}

/// A launch record's arguments as its last inline run on a device found them: checked
/// against the allocator, the op's spec looked up, the ranges resolved to segments. An
/// engine issues the same record every execution with the same ranges (its memory comes
/// from per-size free lists), so the next run skips all three when nothing changed:
///
/// - the checks hold while the device and the ranges are the same and the device has
///   freed no block since (`frees`): a range inside an allocated block stays inside it
///   until that block is freed;
/// - the spans hold while, in addition, no segment was unmapped (`unmaps`), as for a
///   model's prepared launches.
///
/// The counters are read with plain loads, so a valid cache costs no atomic
/// read-modify-write, no lock and no tree search per run.
#[derive(Clone, Default)]
pub(crate) struct Resolved {
    /// The device's id (`Core::id`); 0: nothing checked.
    pub device: u64,
    pub frees: u64,
    /// Each argument's (address, bytes), inputs then outputs, as checked.
    pub ranges: Vec<(DevicePtr, usize)>,
    /// Whether `ranges` were compared with the arguments since they were last rebound: a
    /// record issued again unchanged then skips the comparison.
    pub current: bool,
    /// Spec and spans, when resolved at `unmaps`.
    pub spans: Option<(OpSpec, u64)>,
    /// How the spans are locked and handed out.
    pub locks: SpanLocks,
    /// The op's kernel specialized for the record's operands, once chosen (see
    /// [`Launch::special`]): `Some(None)` when there is none.
    pub special: Option<Option<SpecialFn>>,
}

impl Resolved {
    /// Whether the ranges checked are the launch's now, on device `device` at free count
    /// `frees`.
    pub fn checked(&self, device: u64, frees: u64, l: &Launch) -> bool {
        if self.device != device || self.frees != frees {
            return false;
        }
        self.current
            || self.ranges.len() == l.inputs.len() + l.outputs.len()
                && l.inputs
                    .iter()
                    .chain(&l.outputs)
                    .zip(&self.ranges)
                    .all(|(a, &r)| a.range() == r)
    }

    /// Forgets everything, keeping the vectors' storage.
    pub fn clear(&mut self) {
        self.device = 0;
        self.ranges.clear();
        self.current = false;
        self.spans = None;
        self.special = None;
    }
}

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolved")
            .field("device", &self.device)
            .field("frees", &self.frees)
            .field("ranges", &self.ranges)
            .field("resolved", &self.spans.map(|(_, unmaps)| unmaps))
            .finish()
    }
}

impl Launch {
    /// Resolves the launch's arguments in `memory` into `ins` and `outs` (emptied first).
    pub(crate) fn resolve(
        &self,
        memory: &Memory,
        ins: &mut Vec<Option<Span>>,
        outs: &mut Vec<Option<Span>>,
    ) -> Result<(), NpuError> {
        ins.clear();
        outs.clear();
        memory.resolve_all(self.inputs().iter().map(TensorArg::range), ins)?;
        memory.resolve_all(self.outputs().iter().map(TensorArg::range), outs)
    }

    /// `op` on `inputs`, writing `outputs` (already allocated, shaped as inference says).
    pub fn new(
        op: impl Into<Cow<'static, str>>,
        attrs: AttrMap,
        inputs: Vec<TensorArg>,
        outputs: Vec<TensorArg>,
    ) -> Self {
        let metas = inputs.iter().map(TensorArg::meta).collect();
        let out_metas = outputs.iter().map(TensorArg::meta).collect();
        Launch {
            op: op.into(),
            attrs,
            output_count: outputs.len(),
            inputs,
            outputs,
            metas,
            out_metas,
            label: None,
            resolved: Resolved::default(),
        }
    }
    /// The launch named `label` in task records (shared: a clone costs no allocation).
    pub fn labeled(mut self, label: Arc<str>) -> Self {
        self.label = Some(label);
        self
    }
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }
    /// A data-dependent op (NonZero, Unique) with `count` outputs the launch allocates:
    /// submit it with [`super::Device::launch_alloc_outputs`].
    pub fn allocating(
        op: impl Into<Cow<'static, str>>,
        attrs: AttrMap,
        inputs: Vec<TensorArg>,
        count: usize,
    ) -> Self {
        let mut l = Launch::new(op, attrs, inputs, Vec::new());
        l.output_count = count;
        l
    }
    pub fn op(&self) -> &str {
        &self.op
    }
    pub fn attrs(&self) -> &AttrMap {
        &self.attrs
    }
    pub fn inputs(&self) -> &[TensorArg] {
        &self.inputs
    }
    pub fn outputs(&self) -> &[TensorArg] {
        &self.outputs
    }
    /// How many outputs the op produces.
    pub fn output_count(&self) -> usize {
        self.output_count
    }
    /// Bytes of all its tensors (saturating).
    pub(crate) fn bytes_touched(&self) -> usize {
        self.inputs
            .iter()
            .chain(&self.outputs)
            .map(|a| a.range().1)
            .fold(0usize, usize::saturating_add)
    }
    /// Calls `f` with each argument's device range, inputs then outputs.
    pub(crate) fn each_range(
        &self,
        mut f: impl FnMut(DevicePtr, usize) -> Result<(), NpuError>,
    ) -> Result<(), NpuError> {
        for a in self.inputs.iter().chain(&self.outputs) {
            let len = a.bytes().ok_or_else(|| NpuError::BadLaunch {
                op: self.op.to_string(),
                msg: format!("a tensor of {:?} {} overflows", a.shape, a.dtype),
            })?;
            f(a.ptr, len)?;
        }
        Ok(())
    }
    /// Its arguments' ranges as the sanitizer sees them: inputs read, outputs written.
    pub(crate) fn touches(&self) -> Vec<Touch> {
        let arg = |a: &TensorArg, role| Touch {
            ptr: a.ptr,
            len: a.bytes().unwrap_or(usize::MAX),
            role,
        };
        let ins = self
            .inputs
            .iter()
            .enumerate()
            .map(|(i, a)| arg(a, Role::Input(i)));
        let outs = self
            .outputs
            .iter()
            .enumerate()
            .map(|(i, a)| arg(a, Role::Output(i)));
        ins.chain(outs).collect()
    }
    /// Notes that the arguments' ranges were checked on `device` at free count `frees`;
    /// anything resolved before is forgotten.
    pub(crate) fn note_checked(&mut self, device: u64, frees: u64) {
        let r = &mut self.resolved;
        r.clear();
        r.ranges.extend(
            self.inputs
                .iter()
                .chain(&self.outputs)
                .map(TensorArg::range),
        );
        r.device = device;
        r.frees = frees;
        r.current = true;
    }
    pub(crate) fn metas(&self) -> &[TensorMeta] {
        &self.metas
    }
    /// Rebinds the launch's tensors in place: `f` edits the input and output arguments
    /// (their number, pointers, types and dims), then the metas are rebuilt reusing their
    /// storage, and the specialized kernel is chosen again when next asked for. An engine
    /// keeps one launch per node and rebinds it when its tensors change, so a steady-state
    /// launch allocates nothing.
    pub fn rebind(&mut self, f: impl FnOnce(&mut Vec<TensorArg>, &mut Vec<TensorArg>)) {
        f(&mut self.inputs, &mut self.outputs);
        self.resolved.current = false;
        self.resolved.special = None;
        self.output_count = self.outputs.len();
        refill_metas(&mut self.metas, &self.inputs);
        refill_metas(&mut self.out_metas, &self.outputs);
    }

    /// The kernel `spec` specializes for this launch's operands (see
    /// [`crate::ops::SpecialFn`]), chosen the first time it is asked for after a
    /// rebind and kept in the record. `spec` must be this launch's op's.
    pub(crate) fn special(&mut self, spec: &OpSpec) -> Option<SpecialFn> {
        if let Some(chosen) = self.resolved.special {
            return chosen;
        }
        let chosen = self.choose_special(spec);
        self.resolved.special = Some(chosen);
        chosen
    }

    /// [`Launch::special`] without keeping the choice: for a record shared with a queue,
    /// and for a model's launches, chosen once at load.
    pub(crate) fn choose_special(&self, spec: &OpSpec) -> Option<SpecialFn> {
        // A launch that allocates its outputs has none to specialize for; no specializer
        // reads input values, so none are given (and an op that reads them has none).
        if spec.specialize.is_none()
            || !spec.value_inputs.is_empty()
            || self.out_metas.len() != self.output_count
            || self.metas.len() > NO_VALUES.len()
        {
            return None;
        }
        spec.special(
            &self.context(&NO_VALUES[..self.metas.len()]),
            &self.out_metas,
        )
    }

    /// The op's context for this launch: its name, attributes and inputs' metas, with
    /// `values` the inputs' values inference reads (one per input).
    pub(crate) fn context<'a>(&'a self, values: &'a [Option<&'a HostTensor>]) -> InferCtx<'a> {
        InferCtx {
            op: &self.op,
            inputs: &self.metas,
            values,
            attrs: &self.attrs,
            outputs: self.output_count,
        }
    }
}

/// The value of every input as an op context gives it when no input value is known: a
/// launch's inputs are device tensors (an op that reads values copies them to the host).
pub(crate) static NO_VALUES: [Option<&HostTensor>; 16] = [None; 16];

/// Rewrites `metas` to describe `args`, reusing the storage of their dims.
fn refill_metas(metas: &mut Vec<TensorMeta>, args: &[TensorArg]) {
    metas.truncate(args.len());
    for (i, a) in args.iter().enumerate() {
        if i == metas.len() {
            metas.push(TensorMeta::new(a.dtype, &[]));
        }
        let m = &mut metas[i];
        m.dtype = a.dtype;
        let dims = m.shape.get_or_insert_with(Vec::new);
        dims.clear();
        dims.extend(a.shape.iter().map(|&d| d as i64));
    }
}

/// Bytes of a condition value in device memory.
pub const COND_VALUE_BYTES: usize = 8;

/// A host function run in stream order (`aclrtLaunchCallback`); an `Err` faults the stream.
pub type Callback = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// One unit of work on a stream.
#[derive(Clone)]
pub enum Task {
    /// Shared, so an engine can keep its launch record and rebind it in place between
    /// executions once the device has dropped its reference (no allocation per launch).
    Launch(Arc<Launch>),
    /// Copies `len` bytes at `offset` of `src` to `dst`. The task holds `src`: the host may
    /// drop its handle right after submitting.
    MemcpyH2D {
        dst: DevicePtr,
        src: HostBuf,
        offset: usize,
        len: usize,
    },
    /// Copies `len` bytes at `src` into `dst` at `offset`.
    MemcpyD2H {
        dst: HostBuf,
        offset: usize,
        src: DevicePtr,
        len: usize,
    },
    /// Copies `len` bytes; the ranges may overlap (it moves, as `memmove` does).
    MemcpyD2D {
        dst: DevicePtr,
        src: DevicePtr,
        len: usize,
    },
    Memset {
        dst: DevicePtr,
        value: u8,
        len: usize,
    },
    EventRecord(EventId),
    /// Waits for the event's latest record issued before this task (inside a model: this
    /// run's record of it, or the latest one issued before the run when the model does not
    /// record it).
    EventWait(EventId),
    /// Releases one wait on the notify.
    NotifyRecord(NotifyId),
    /// Waits for a record of the notify and consumes it.
    NotifyWait(NotifyId),
    /// Starts stream `index` of the model this task is part of (models only).
    StreamActivate(u32),
    Callback(Callback),
    /// Runs loaded sub-models by a condition value in device memory, on this stream, to
    /// completion (models only): the conditional task of ACL Graph. See [`CondKind`].
    Cond {
        kind: CondKind,
        /// 8 bytes of device memory holding the value, a little-endian `u64`.
        value: DevicePtr,
        /// The sub-models, loaded before the model that holds the task.
        models: Vec<ModelId>,
    },
}

/// How a [`Task::Cond`] picks what to run (`aclmdlRICondTaskType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CondKind {
    /// Runs model 0 once when the value is non-zero, model 1 (if any) once when it is zero.
    If = 0,
    /// Runs model 0 while the value is non-zero, reading it before each run; more runs in
    /// one execution than the device's watchdog allows fault the execution.
    While = 1,
    /// Runs model `value` once when it is below the model count, nothing otherwise.
    Switch = 2,
}

impl CondKind {
    /// The lowercase name: `if`, `while`, `switch`.
    pub fn name(self) -> &'static str {
        match self {
            CondKind::If => "if",
            CondKind::While => "while",
            CondKind::Switch => "switch",
        }
    }
    pub fn from_name(s: &str) -> Option<CondKind> {
        [CondKind::If, CondKind::While, CondKind::Switch]
            .into_iter()
            .find(|m| m.name() == s)
    }
    /// Whether a task of this kind may have `n` sub-models (`aclmdlRICondTaskParams::size`:
    /// 1 or 2 for IF, 1 for WHILE, any positive count for SWITCH).
    pub fn accepts_size(self, n: usize) -> bool {
        match self {
            CondKind::If => n == 1 || n == 2,
            CondKind::While => n == 1,
            CondKind::Switch => n > 0,
        }
    }
}

impl fmt::Display for CondKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Task {
    /// [`Task::kind`] of a host-to-device copy (also the kind of the copy without a
    /// staging buffer that `StreamState::copy_in_inline` makes).
    pub const HOST_TO_DEVICE: &'static str = "host-to-device copy";

    /// The kind of task, for messages and reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Task::Launch(_) => "kernel launch",
            Task::MemcpyH2D { .. } => Task::HOST_TO_DEVICE,
            Task::MemcpyD2H { .. } => "device-to-host copy",
            Task::MemcpyD2D { .. } => "device-to-device copy",
            Task::Memset { .. } => "memset",
            Task::EventRecord(_) => "event record",
            Task::EventWait(_) => "event wait",
            Task::NotifyRecord(_) => "notify record",
            Task::NotifyWait(_) => "notify wait",
            Task::StreamActivate(_) => "stream activation",
            Task::Callback(_) => "host callback",
            Task::Cond { .. } => "conditional",
        }
    }

    /// Whether the task touches memory (the kind a faulted stream skips).
    pub(crate) fn is_data(&self) -> bool {
        matches!(
            self,
            Task::Launch(_)
                | Task::MemcpyH2D { .. }
                | Task::MemcpyD2H { .. }
                | Task::MemcpyD2D { .. }
                | Task::Memset { .. }
                | Task::Callback(_)
                | Task::Cond { .. }
        )
    }

    /// Calls `f` with each device range the task touches (to check it when the task is
    /// issued); stops at the first error.
    pub(crate) fn each_range(
        &self,
        mut f: impl FnMut(DevicePtr, usize) -> Result<(), NpuError>,
    ) -> Result<(), NpuError> {
        match self {
            Task::Launch(l) => l.each_range(f),
            Task::MemcpyH2D { dst, len, .. } => f(*dst, *len),
            Task::MemcpyD2H { src, len, .. } => f(*src, *len),
            Task::MemcpyD2D { dst, src, len } => f(*src, *len).and_then(|()| f(*dst, *len)),
            Task::Memset { dst, len, .. } => f(*dst, *len),
            Task::Cond { value, .. } => f(*value, COND_VALUE_BYTES),
            _ => Ok(()),
        }
    }

    /// The device ranges the task touches, each with what it does to them (for the
    /// sanitizer).
    pub(crate) fn touches(&self) -> Vec<Touch> {
        let t = |ptr, len, role| Touch { ptr, len, role };
        match self {
            Task::Launch(l) => l.touches(),
            Task::MemcpyH2D { dst, len, .. } | Task::Memset { dst, len, .. } => {
                vec![t(*dst, *len, Role::Write)]
            }
            Task::MemcpyD2H { src, len, .. } => vec![t(*src, *len, Role::Read)],
            Task::MemcpyD2D { dst, src, len } => {
                vec![t(*src, *len, Role::Read), t(*dst, *len, Role::Write)]
            }
            Task::Cond { value, .. } => vec![t(*value, COND_VALUE_BYTES, Role::Read)],
            _ => Vec::new(),
        }
    }

    /// Checks a host buffer range of a copy.
    pub(crate) fn check_host_range(&self) -> Result<(), NpuError> {
        let (buf, offset, len) = match self {
            Task::MemcpyH2D {
                src, offset, len, ..
            } => (src, *offset, *len),
            Task::MemcpyD2H {
                dst, offset, len, ..
            } => (dst, *offset, *len),
            _ => return Ok(()),
        };
        if offset.checked_add(len).is_none_or(|e| e > buf.len()) {
            return Err(NpuError::HostRange {
                buffer: buf.len(),
                offset,
                len,
            });
        }
        Ok(())
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Task::Launch(l) => f.debug_tuple("Launch").field(l).finish(),
            Task::MemcpyH2D {
                dst,
                src,
                offset,
                len,
            } => write!(f, "MemcpyH2D({dst} <- {src:?}[{offset}..+{len}])"),
            Task::MemcpyD2H {
                dst,
                offset,
                src,
                len,
            } => write!(f, "MemcpyD2H({dst:?}[{offset}..] <- {src}, {len})"),
            Task::MemcpyD2D { dst, src, len } => write!(f, "MemcpyD2D({dst} <- {src}, {len})"),
            Task::Memset { dst, value, len } => write!(f, "Memset({dst}, {value}, {len})"),
            Task::EventRecord(e) => write!(f, "EventRecord({e})"),
            Task::EventWait(e) => write!(f, "EventWait({e})"),
            Task::NotifyRecord(n) => write!(f, "NotifyRecord({n})"),
            Task::NotifyWait(n) => write!(f, "NotifyWait({n})"),
            Task::StreamActivate(i) => write!(f, "StreamActivate({i})"),
            Task::Callback(_) => f.write_str("Callback"),
            Task::Cond {
                kind,
                value,
                models,
            } => write!(f, "Cond({kind} at {value}: {models:?})"),
        }
    }
}

/// The outputs of a data-dependent launch: their addresses, types and dims.
pub type AllocOutputs = Result<Vec<TensorArg>, NpuError>;

/// The host's end of a data-dependent launch: wait for the outputs the device allocated.
/// The caller owns them and frees them like any allocation (on the launch's stream).
pub struct LaunchOutputs {
    pub(crate) rx: Receiver<AllocOutputs>,
}

impl LaunchOutputs {
    /// Blocks until the launch ran. Its fault, if it had one (or the stream's earlier
    /// fault, which made it skip), is the error; the stream's synchronize reports it too.
    pub fn wait(self) -> AllocOutputs {
        self.rx.recv().unwrap_or(Err(NpuError::DeviceLost))
    }
}
