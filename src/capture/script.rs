//! Capture scripts (../shared/specs/capture-script.md): parsing and static checks.
//!
//! [`parse`] turns the TOML text of a script into a [`Script`]: device settings, buffer
//! declarations with their initial contents, and typed steps with every default filled in.
//! Everything that can be decided without running the script is checked here, and the first
//! fault found is returned with its 1-based line and column: TOML syntax, the version,
//! unknown keys at every level, missing fields and wrong types, unknown spellings of calls,
//! kernels and enums, buffers (declared, of matching dtype and length, indices in range,
//! values that fit), and names of models, condition handles and task groups, which an
//! earlier step must bind.
//!
//! Deliberately absent: anything that depends on the device's state while the script runs
//! (capture status, thread identity, the size rules of cond tasks, whether a model was
//! destroyed). Those are runtime outcomes that scripts test through `expect_error`, so
//! refusing them here would make such scripts impossible to write. No IO either: the caller
//! reads the file and adds its name to errors.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeArray, DeInteger, DeTable, DeValue};

use super::{AclError, BufDtype, CaptureMode, CaptureStatus, CondKind, Scalar};

/// A parsed and statically checked capture script.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// The optional `name`, used in reports.
    pub name: Option<String>,
    /// The `[device]` table, defaults filled in.
    pub device: DeviceSettings,
    /// The `[buffers]` table, in file order.
    pub buffers: Vec<BufferDecl>,
    /// The `[[step]]` tables, in file order.
    pub steps: Vec<Step>,
}

/// The `[device]` table of a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSettings {
    /// Task slots of one capture stream before a cascade stream is chained on (at least 2).
    pub sq_depth: usize,
    /// How often a WHILE body may run in one execution before the execution faults (at
    /// least 1).
    pub max_while_iterations: u64,
}

impl Default for DeviceSettings {
    fn default() -> Self {
        DeviceSettings {
            sq_depth: 1024,
            max_while_iterations: 1_000_000,
        }
    }
}

/// One buffer of the `[buffers]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferDecl {
    /// The buffer's name, the key in `[buffers]`.
    pub name: String,
    /// The element type.
    pub dtype: BufDtype,
    /// The initial contents: always the buffer's length in values, each already fitted to
    /// `dtype` ([`Scalar::fit`]), zeros when the script gives no `init`.
    pub init: Vec<Scalar>,
    /// The 1-based line of the buffer's key.
    pub line: usize,
}

/// One `[[step]]` of a script.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The 1-based line where the step's table starts: the `[[step]]` header, or the `{` of
    /// an inline table in `step = [...]`.
    pub line: usize,
    /// The host thread that makes the call (`"main"` by default).
    pub thread: String,
    /// The error the call must fail with, if the script expects one.
    pub expect_error: Option<AclError>,
    /// The call itself.
    pub call: Call,
}

/// A step's call, with its fields. Scalar values are already fitted to the dtype of the
/// buffer they apply to. Model, handle and group names are bound by an earlier step.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `aclmdlRICaptureBegin`.
    CaptureBegin { stream: String, mode: CaptureMode },
    /// `aclmdlRICaptureEnd`; `model` names the captured model (none for a sub-model).
    CaptureEnd {
        stream: String,
        model: Option<String>,
    },
    /// `aclmdlRICaptureGetInfo`; `expect_status` is checked, `model` binds the model being
    /// captured.
    CaptureGetInfo {
        stream: String,
        expect_status: Option<CaptureStatus>,
        model: Option<String>,
    },
    /// `aclmdlRICaptureToModelRIBegin` into an existing model.
    CaptureToModelBegin {
        stream: String,
        model: String,
        mode: CaptureMode,
    },
    /// `aclmdlRICaptureThreadExchangeMode`; `expect_previous` is checked.
    ThreadExchangeMode {
        mode: CaptureMode,
        expect_previous: Option<CaptureMode>,
    },
    /// `rtStreamAddToModel`.
    StreamAddToModel { stream: String, model: String },
    /// `aclrtLaunchKernel` of a built-in kernel.
    Launch { stream: String, kernel: Kernel },
    /// `aclrtMemcpy` between two buffers of one dtype and length.
    Memcpy { dst: String, src: String },
    /// `aclrtMemset`, element-wise.
    Memset { dst: String, value: Scalar },
    /// `aclrtSynchronizeStream`.
    Synchronize { stream: String },
    /// `aclrtRecordEvent`.
    EventRecord { event: String, stream: String },
    /// `aclrtStreamWaitEvent`.
    EventWait { event: String, stream: String },
    /// `aclmdlRICaptureTaskGrpBegin`.
    TaskGroupBegin { stream: String },
    /// `aclmdlRICaptureTaskGrpEnd`; binds `group`.
    TaskGroupEnd { stream: String, group: String },
    /// `aclmdlRICaptureTaskUpdateBegin`.
    TaskUpdateBegin { stream: String, group: String },
    /// `aclmdlRICaptureTaskUpdateEnd`.
    TaskUpdateEnd { stream: String },
    /// `aclmdlRIUpdate`.
    ModelUpdate { model: String },
    /// `aclmdlRITaskDisable` (an rt2 extension of the script format): `stream` is an index
    /// in the model's stream list, `task` the index of the task on that stream.
    TaskDisable {
        model: String,
        stream: usize,
        task: usize,
    },
    /// `aclmdlRITaskSetParams` (an rt2 extension): new kernel arguments for one task,
    /// addressed as in [`Call::TaskDisable`].
    TaskSetParams {
        model: String,
        stream: usize,
        task: usize,
        kernel: Kernel,
    },
    /// `aclmdlRICondHandleCreate` on the model being captured; binds `handle`.
    CondHandleCreate {
        model: String,
        handle: String,
        default: u32,
        assign_default: bool,
    },
    /// `aclmdlRIAddCondTask`; binds each of `models` (non-empty, distinct) to a sub-model.
    AddCondTask {
        stream: String,
        handle: String,
        kind: CondKind,
        models: Vec<String>,
    },
    /// `aclmdlRIExecuteAsync`, `times` times (at least 1).
    Execute {
        model: String,
        stream: String,
        times: u32,
    },
    /// `aclmdlRIDestroy`.
    ModelDestroy { model: String },
    /// A check of a buffer's contents: `equals` has the buffer's length.
    Expect { buffer: String, equals: Vec<Scalar> },
}

impl Call {
    /// The call's name in scripts (`"capture_begin"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Call::CaptureBegin { .. } => "capture_begin",
            Call::CaptureEnd { .. } => "capture_end",
            Call::CaptureGetInfo { .. } => "capture_get_info",
            Call::CaptureToModelBegin { .. } => "capture_to_model_begin",
            Call::ThreadExchangeMode { .. } => "thread_exchange_mode",
            Call::StreamAddToModel { .. } => "stream_add_to_model",
            Call::Launch { .. } => "launch",
            Call::Memcpy { .. } => "memcpy",
            Call::Memset { .. } => "memset",
            Call::Synchronize { .. } => "synchronize",
            Call::EventRecord { .. } => "event_record",
            Call::EventWait { .. } => "event_wait",
            Call::TaskGroupBegin { .. } => "task_group_begin",
            Call::TaskGroupEnd { .. } => "task_group_end",
            Call::TaskUpdateBegin { .. } => "task_update_begin",
            Call::TaskUpdateEnd { .. } => "task_update_end",
            Call::ModelUpdate { .. } => "model_update",
            Call::TaskDisable { .. } => "task_disable",
            Call::TaskSetParams { .. } => "task_set_params",
            Call::CondHandleCreate { .. } => "cond_handle_create",
            Call::AddCondTask { .. } => "add_cond_task",
            Call::Execute { .. } => "execute",
            Call::ModelDestroy { .. } => "model_destroy",
            Call::Expect { .. } => "expect",
        }
    }
}

/// A built-in device kernel with its arguments. Buffers are named; scalars are fitted to
/// the dtype of the buffer they apply to; indices are in range. Saved models
/// (`.rim.json`) write kernels in this form too, tagged by `"kernel"`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kernel", rename_all = "snake_case", deny_unknown_fields)]
pub enum Kernel {
    /// Every element of `dst` becomes `value`.
    Fill { dst: String, value: Scalar },
    /// `dst = src`, one dtype and length.
    Copy { dst: String, src: String },
    /// `dst = a + b` element-wise, all three of one dtype and length.
    Add { dst: String, a: String, b: String },
    /// `dst = src + value` element-wise.
    AddScalar {
        dst: String,
        src: String,
        value: Scalar,
    },
    /// `dst = src * value` element-wise.
    MulScalar {
        dst: String,
        src: String,
        value: Scalar,
    },
    /// `dst[index] += by`.
    Increment {
        dst: String,
        index: usize,
        by: Scalar,
    },
    /// The handle's condition value becomes `src[index]`, as unsigned.
    SetCond {
        handle: String,
        src: String,
        index: usize,
    },
    /// The handle's condition value becomes 1 if `src[index] < limit`, else 0.
    SetCondLt {
        handle: String,
        src: String,
        index: usize,
        limit: Scalar,
    },
}

impl Kernel {
    /// The kernel's name in scripts (`"fill"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Kernel::Fill { .. } => "fill",
            Kernel::Copy { .. } => "copy",
            Kernel::Add { .. } => "add",
            Kernel::AddScalar { .. } => "add_scalar",
            Kernel::MulScalar { .. } => "mul_scalar",
            Kernel::Increment { .. } => "increment",
            Kernel::SetCond { .. } => "set_cond",
            Kernel::SetCondLt { .. } => "set_cond_lt",
        }
    }

    /// The buffers the kernel reads or writes, destination first.
    pub fn buffers(&self) -> Vec<&str> {
        match self {
            Kernel::Fill { dst, .. } | Kernel::Increment { dst, .. } => vec![dst],
            Kernel::Copy { dst, src }
            | Kernel::AddScalar { dst, src, .. }
            | Kernel::MulScalar { dst, src, .. } => vec![dst, src],
            Kernel::Add { dst, a, b } => vec![dst, a, b],
            Kernel::SetCond { src, .. } | Kernel::SetCondLt { src, .. } => vec![src],
        }
    }
}

/// Why a script is invalid, and where: 1-based line and column (in characters) of the
/// offending key or value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ScriptError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Parses and statically checks a capture script (see the module doc for what is checked).
pub fn parse(text: &str) -> Result<Script, ScriptError> {
    let root = DeTable::parse(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        error_at(text, at, format!("invalid TOML: {}", e.message()))
    })?;
    Checker::new(text).script(root.get_ref())
}

/// The largest buffer a script may declare, and the most elements all its buffers may hold
/// together: a `len` is a number in a text file, and it must not make the parser (or the
/// runner after it) allocate without bound.
const MAX_BUFFER_LEN: usize = 1 << 20;
const MAX_TOTAL_LEN: usize = 1 << 22;

const TOP_KEYS: &[&str] = &["version", "name", "device", "buffers", "step"];
const DEVICE_KEYS: &[&str] = &["sq_depth", "max_while_iterations"];
const BUFFER_KEYS: &[&str] = &["dtype", "len", "init"];
const STEP_KEYS: &[&str] = &["call", "thread", "expect_error"];

/// Each call's own fields, in the order they are checked and listed in messages.
const CALLS: &[(&str, &[&str])] = &[
    ("capture_begin", &["stream", "mode"]),
    ("capture_end", &["stream", "model"]),
    ("capture_get_info", &["stream", "expect_status", "model"]),
    ("capture_to_model_begin", &["stream", "model", "mode"]),
    ("thread_exchange_mode", &["mode", "expect_previous"]),
    ("stream_add_to_model", &["stream", "model"]),
    ("launch", &["stream", "kernel"]),
    ("memcpy", &["dst", "src"]),
    ("memset", &["dst", "value"]),
    ("synchronize", &["stream"]),
    ("event_record", &["event", "stream"]),
    ("event_wait", &["event", "stream"]),
    ("task_group_begin", &["stream"]),
    ("task_group_end", &["stream", "group"]),
    ("task_update_begin", &["stream", "group"]),
    ("task_update_end", &["stream"]),
    ("model_update", &["model"]),
    ("task_disable", &["model", "stream", "task"]),
    ("task_set_params", &["model", "stream", "task", "kernel"]),
    (
        "cond_handle_create",
        &["model", "handle", "default", "assign_default"],
    ),
    ("add_cond_task", &["stream", "handle", "type", "models"]),
    ("execute", &["model", "stream", "times"]),
    ("model_destroy", &["model"]),
    ("expect", &["buffer", "equals"]),
];

/// Each kernel's arguments, which sit beside the `launch` or `task_set_params` fields.
const KERNELS: &[(&str, &[&str])] = &[
    ("fill", &["dst", "value"]),
    ("copy", &["dst", "src"]),
    ("add", &["dst", "a", "b"]),
    ("add_scalar", &["dst", "src", "value"]),
    ("mul_scalar", &["dst", "src", "value"]),
    ("increment", &["dst", "index", "by"]),
    ("set_cond", &["handle", "src", "index"]),
    ("set_cond_lt", &["handle", "src", "index", "limit"]),
];

const MODES: &[&str] = &["global", "thread_local", "relaxed"];
const STATUSES: &[&str] = &["none", "active", "invalidated"];
const COND_KINDS: &[&str] = &["if", "while", "switch"];
const DTYPES: &[&str] = &["int32", "int64", "float32"];

type Value<'i> = Spanned<DeValue<'i>>;

/// The error at byte `offset` of `text`. Offsets past the end (toml reports some errors
/// at the end of input) count as columns past the last line's end.
fn error_at(text: &str, offset: usize, message: String) -> ScriptError {
    let (line, column) = position(text, offset);
    ScriptError {
        line,
        column,
        message,
    }
}

/// 1-based line and column (in characters, as toml counts them) of a byte offset.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let mut at = offset.min(text.len());
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = text.get(..at).unwrap_or("");
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let column = before.get(line_start..).map_or(0, |s| s.chars().count())
        + offset.saturating_sub(text.len())
        + 1;
    (line, column)
}

/// "a string", "an integer", ...: how a wrong value is named in messages.
fn type_phrase(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// A TOML integer of any radix. i128 holds every u64, so `max_while_iterations` can use
/// the whole of its range; longer literals are out of range.
fn int_value(i: &DeInteger<'_>) -> Option<i128> {
    i128::from_str_radix(i.as_str(), i.radix()).ok()
}

/// A user's string as shown in a message: control characters escaped, so a message stays
/// one line.
fn shown(s: &str) -> String {
    s.escape_debug().to_string()
}

/// The entries of one TOML table being read, with what to call it in messages and where to
/// report a field it lacks.
struct Fields<'a, 'i> {
    text: &'a str,
    table: &'a DeTable<'i>,
    /// Byte offset for "missing field" errors: the table's header or key.
    at: usize,
    /// "a `launch` step", "buffer `x`", ...
    what: &'a str,
}

impl<'a, 'i> Fields<'a, 'i> {
    fn err(&self, offset: usize, message: String) -> ScriptError {
        error_at(self.text, offset, message)
    }

    /// Refuses the first key (in file order) that is not in `allowed`.
    fn check_known(&self, allowed: &[&str]) -> Result<(), ScriptError> {
        let unknown = self
            .table
            .iter()
            .filter(|(k, _)| !allowed.contains(&k.get_ref().as_ref()))
            .min_by_key(|(k, _)| k.span().start);
        match unknown {
            Some((k, _)) => Err(self.err(
                k.span().start,
                format!(
                    "unknown field `{}` in {}; expected one of: {}",
                    shown(k.get_ref()),
                    self.what,
                    allowed.join(", ")
                ),
            )),
            None => Ok(()),
        }
    }

    fn get(&self, key: &str) -> Option<&'a Value<'i>> {
        self.table.get(key)
    }

    fn missing(&self, key: &str) -> ScriptError {
        self.err(self.at, format!("missing field `{key}` in {}", self.what))
    }

    fn wrong_type(&self, label: &str, v: &Value<'_>, expected: &str) -> ScriptError {
        self.err(
            v.span().start,
            format!(
                "{label} must be {expected}, not {}",
                type_phrase(v.get_ref())
            ),
        )
    }

    fn string(&self, key: &str) -> Result<Option<(&'a str, Range<usize>)>, ScriptError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                DeValue::String(s) => Ok(Some((s.as_ref(), v.span()))),
                _ => Err(self.wrong_type(&format!("`{key}`"), v, "a string")),
            },
        }
    }

    /// A name: a non-empty string.
    fn opt_name(&self, key: &str) -> Result<Option<(String, Range<usize>)>, ScriptError> {
        match self.string(key)? {
            None => Ok(None),
            Some(("", span)) => Err(self.err(span.start, format!("`{key}` must not be empty"))),
            Some((s, span)) => Ok(Some((s.to_owned(), span))),
        }
    }

    fn name(&self, key: &str) -> Result<(String, Range<usize>), ScriptError> {
        self.opt_name(key)?.ok_or_else(|| self.missing(key))
    }

    /// An integer field of at least `min` that fits `T`.
    fn int<T: TryFrom<i128>>(
        &self,
        key: &str,
        min: i128,
    ) -> Result<Option<(T, Range<usize>)>, ScriptError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let DeValue::Integer(i) = v.get_ref() else {
            return Err(self.wrong_type(&format!("`{key}`"), v, "an integer"));
        };
        let at = v.span().start;
        let n = int_value(i).ok_or_else(|| self.err(at, format!("`{key}` is out of range")))?;
        if n < min {
            return Err(self.err(at, format!("`{key}` must be at least {min}, not {n}")));
        }
        let t = T::try_from(n).map_err(|_| self.err(at, format!("`{key}` is too large: {n}")))?;
        Ok(Some((t, v.span())))
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, ScriptError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                DeValue::Boolean(b) => Ok(Some(*b)),
                _ => Err(self.wrong_type(&format!("`{key}`"), v, "a boolean")),
            },
        }
    }

    /// A TOML integer (as [`Scalar::Int`]) or float (as [`Scalar::Float`]).
    fn scalar_of(&self, label: &str, v: &Value<'_>) -> Result<Scalar, ScriptError> {
        let at = v.span().start;
        match v.get_ref() {
            DeValue::Integer(i) => int_value(i)
                .and_then(|n| i64::try_from(n).ok())
                .map(Scalar::Int)
                .ok_or_else(|| self.err(at, format!("{label} does not fit a 64-bit integer"))),
            DeValue::Float(f) => match f.as_str().parse::<f64>() {
                // Rust parses an overflowing literal as infinity; TOML means it as an error.
                Ok(x) if x.is_finite() || f.as_str().contains("inf") || x.is_nan() => {
                    Ok(Scalar::Float(x))
                }
                _ => Err(self.err(at, format!("{label} is not a representable float"))),
            },
            _ => Err(self.wrong_type(label, v, "a number")),
        }
    }

    fn array(&self, key: &str) -> Result<Option<(&'a DeArray<'i>, Range<usize>)>, ScriptError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                DeValue::Array(a) => Ok(Some((a, v.span()))),
                _ => Err(self.wrong_type(&format!("`{key}`"), v, "an array")),
            },
        }
    }

    /// A string field spelled as one of `names`, turned into `T` by `from_name`.
    fn choice<T>(
        &self,
        key: &str,
        from_name: fn(&str) -> Option<T>,
        names: &[&str],
    ) -> Result<Option<T>, ScriptError> {
        let Some((s, span)) = self.string(key)? else {
            return Ok(None);
        };
        from_name(s).map(Some).ok_or_else(|| {
            self.err(
                span.start,
                format!(
                    "unknown `{key}` `{}`; expected one of: {}",
                    shown(s),
                    names.join(", ")
                ),
            )
        })
    }

    fn required_choice<T>(
        &self,
        key: &str,
        from_name: fn(&str) -> Option<T>,
        names: &[&str],
    ) -> Result<T, ScriptError> {
        self.choice(key, from_name, names)?
            .ok_or_else(|| self.missing(key))
    }
}

/// A buffer named by a step, with what the checks need to know of it.
struct BufRef {
    name: String,
    dtype: BufDtype,
    len: usize,
    /// The field that named it, for messages.
    key: &'static str,
    span: Range<usize>,
}

/// The state of the checks as they walk the script in file order: the declared buffers and
/// the names bound so far.
struct Checker<'t> {
    text: &'t str,
    buffers: HashMap<String, (BufDtype, usize)>,
    models: HashSet<String>,
    handles: HashSet<String>,
    groups: HashSet<String>,
}

impl<'t> Checker<'t> {
    fn new(text: &'t str) -> Self {
        Checker {
            text,
            buffers: HashMap::new(),
            models: HashSet::new(),
            handles: HashSet::new(),
            groups: HashSet::new(),
        }
    }

    fn err(&self, offset: usize, message: String) -> ScriptError {
        error_at(self.text, offset, message)
    }

    fn script(&mut self, root: &DeTable<'_>) -> Result<Script, ScriptError> {
        let top = Fields {
            text: self.text,
            table: root,
            at: 0,
            what: "the script",
        };
        // The version comes first: a later version may have keys this reader does not know,
        // and "unsupported version" is then the message that helps.
        match top.get("version") {
            None => {
                return Err(self.err(
                    0,
                    "missing `version` (this rt2 reads capture scripts of version 1)".into(),
                ));
            }
            Some(v) => match v.get_ref() {
                DeValue::Integer(i) if int_value(i) == Some(1) => {}
                DeValue::Integer(i) => {
                    return Err(self.err(
                        v.span().start,
                        format!(
                            "unsupported `version` {}; this rt2 reads version 1",
                            shown(i.as_str())
                        ),
                    ));
                }
                _ => return Err(top.wrong_type("`version`", v, "the integer 1")),
            },
        }
        top.check_known(TOP_KEYS)?;
        let name = top.string("name")?.map(|(s, _)| s.to_owned());
        let device = match top.get("device") {
            None => DeviceSettings::default(),
            Some(v) => self.device(&top, v)?,
        };
        let buffers = match top.get("buffers") {
            None => Vec::new(),
            Some(v) => self.buffers(&top, v)?,
        };
        let mut steps = Vec::new();
        if let Some(v) = top.get("step") {
            let DeValue::Array(items) = v.get_ref() else {
                return Err(top.wrong_type("`step`", v, "an array of tables ([[step]])"));
            };
            for item in items.iter() {
                steps.push(self.step(item)?);
            }
        }
        Ok(Script {
            name,
            device,
            buffers,
            steps,
        })
    }

    fn device(&self, top: &Fields<'_, '_>, v: &Value<'_>) -> Result<DeviceSettings, ScriptError> {
        let DeValue::Table(t) = v.get_ref() else {
            return Err(top.wrong_type("`device`", v, "a table"));
        };
        let f = Fields {
            text: self.text,
            table: t,
            at: v.span().start,
            what: "[device]",
        };
        f.check_known(DEVICE_KEYS)?;
        let defaults = DeviceSettings::default();
        Ok(DeviceSettings {
            sq_depth: f.int("sq_depth", 2)?.map_or(defaults.sq_depth, |(n, _)| n),
            max_while_iterations: f
                .int("max_while_iterations", 1)?
                .map_or(defaults.max_while_iterations, |(n, _)| n),
        })
    }

    fn buffers(
        &mut self,
        top: &Fields<'_, '_>,
        v: &Value<'_>,
    ) -> Result<Vec<BufferDecl>, ScriptError> {
        let DeValue::Table(t) = v.get_ref() else {
            return Err(top.wrong_type("`buffers`", v, "a table"));
        };
        // File order, whatever order the map keeps its keys in.
        let mut entries: Vec<_> = t.iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        let mut decls = Vec::with_capacity(entries.len());
        let mut total = 0usize;
        for (key, value) in entries {
            let name: &str = key.get_ref();
            let at = key.span().start;
            if name.is_empty() {
                return Err(self.err(at, "a buffer name must not be empty".into()));
            }
            let what = format!("buffer `{}`", shown(name));
            let DeValue::Table(bt) = value.get_ref() else {
                return Err(self.err(
                    value.span().start,
                    format!(
                        "{what} must be a table such as {{ dtype = \"int32\", len = 4 }}, not {}",
                        type_phrase(value.get_ref())
                    ),
                ));
            };
            let f = Fields {
                text: self.text,
                table: bt,
                at,
                what: &what,
            };
            f.check_known(BUFFER_KEYS)?;
            let dtype = f.required_choice("dtype", BufDtype::from_name, DTYPES)?;
            let len = f.int::<usize>("len", 1)?;
            if let Some((n, span)) = &len
                && *n > MAX_BUFFER_LEN
            {
                return Err(self.err(
                    span.start,
                    format!("`len` must be at most {MAX_BUFFER_LEN}, not {n}"),
                ));
            }
            let init = match f.array("init")? {
                None => None,
                Some((items, span)) => {
                    if items.is_empty() {
                        return Err(self.err(span.start, "`init` must not be empty".into()));
                    }
                    let mut values = Vec::with_capacity(items.len());
                    for item in items.iter() {
                        values.push(fitted(&f, "an element of `init`", item, name, dtype)?);
                    }
                    Some(values)
                }
            };
            let init = match (len, init) {
                (None, None) => {
                    return Err(self.err(at, format!("{what} needs `len` or `init`")));
                }
                (Some((n, _)), None) => {
                    let zero = if dtype.is_float() {
                        Scalar::Float(0.0)
                    } else {
                        Scalar::Int(0)
                    };
                    vec![zero; n]
                }
                (Some((n, span)), Some(values)) if n != values.len() => {
                    return Err(self.err(
                        span.start,
                        format!("`len` is {n} but `init` has {} values", values.len()),
                    ));
                }
                (_, Some(values)) => values,
            };
            total = total.saturating_add(init.len());
            if total > MAX_TOTAL_LEN {
                return Err(self.err(
                    at,
                    format!("the buffers hold more than {MAX_TOTAL_LEN} elements in all"),
                ));
            }
            self.buffers.insert(name.to_owned(), (dtype, init.len()));
            decls.push(BufferDecl {
                name: name.to_owned(),
                dtype,
                init,
                line: position(self.text, at).0,
            });
        }
        Ok(decls)
    }

    fn step(&mut self, v: &Value<'_>) -> Result<Step, ScriptError> {
        let at = v.span().start;
        let DeValue::Table(t) = v.get_ref() else {
            return Err(self.err(
                at,
                format!("a step must be a table, not {}", type_phrase(v.get_ref())),
            ));
        };
        let f = Fields {
            text: self.text,
            table: t,
            at,
            what: "a step",
        };
        let (call, call_span) = f.string("call")?.ok_or_else(|| f.missing("call"))?;
        let Some((_, call_fields)) = CALLS.iter().find(|(n, _)| *n == call) else {
            return Err(self.unknown_call(call, call_span.start));
        };
        // Once the call is known, messages name it: the step's line alone may not say.
        let what = format!("a `{call}` step");
        let mut f = f;
        f.what = &what;
        let kernel = if call_fields.contains(&"kernel") {
            let (name, span) = f.string("kernel")?.ok_or_else(|| f.missing("kernel"))?;
            match KERNELS.iter().find(|(n, _)| *n == name) {
                Some(k) => Some(*k),
                None => {
                    let names: Vec<_> = KERNELS.iter().map(|(n, _)| *n).collect();
                    return Err(self.err(
                        span.start,
                        format!(
                            "unknown `kernel` `{}`; expected one of: {}",
                            shown(name),
                            names.join(", ")
                        ),
                    ));
                }
            }
        } else {
            None
        };
        let mut allowed: Vec<&str> = STEP_KEYS.to_vec();
        allowed.extend_from_slice(call_fields);
        if let Some((_, args)) = kernel {
            allowed.extend_from_slice(args);
        }
        f.check_known(&allowed)?;

        let thread = f
            .opt_name("thread")?
            .map_or_else(|| "main".to_owned(), |(n, _)| n);
        let expect_error = match f.string("expect_error")? {
            None => None,
            Some((s, span)) => Some(AclError::from_name(s).ok_or_else(|| {
                self.err(
                    span.start,
                    format!(
                        "unknown error name `{}` in `expect_error`; expected an ACL error name \
                         such as ACL_ERROR_RT_STREAM_CAPTURED",
                        shown(s)
                    ),
                )
            })?),
        };
        let call = self.call(&f, call, kernel.map(|(n, _)| n), call_span.start)?;
        Ok(Step {
            line: position(self.text, at).0,
            thread,
            expect_error,
            call,
        })
    }

    fn unknown_call(&self, call: &str, at: usize) -> ScriptError {
        let names: Vec<_> = CALLS.iter().map(|(n, _)| *n).collect();
        self.err(
            at,
            format!(
                "unknown call `{}`; expected one of: {}",
                shown(call),
                names.join(", ")
            ),
        )
    }

    /// The call's fields, checked in the order of [`CALLS`]; names it binds are bound
    /// after its own uses are checked.
    fn call(
        &mut self,
        f: &Fields<'_, '_>,
        call: &str,
        kernel: Option<&str>,
        call_at: usize,
    ) -> Result<Call, ScriptError> {
        let stream = |f: &Fields<'_, '_>| f.name("stream").map(|(n, _)| n);
        let mode =
            |f: &Fields<'_, '_>, key: &str| f.required_choice(key, CaptureMode::from_name, MODES);
        Ok(match call {
            "capture_begin" => Call::CaptureBegin {
                stream: stream(f)?,
                mode: mode(f, "mode")?,
            },
            "capture_end" => {
                let stream = stream(f)?;
                let model = f.opt_name("model")?.map(|(n, _)| n);
                if let Some(m) = &model {
                    self.models.insert(m.clone());
                }
                Call::CaptureEnd { stream, model }
            }
            "capture_get_info" => {
                let stream = stream(f)?;
                let expect_status =
                    f.choice("expect_status", CaptureStatus::from_name, STATUSES)?;
                let model = f.opt_name("model")?.map(|(n, _)| n);
                if let Some(m) = &model {
                    self.models.insert(m.clone());
                }
                Call::CaptureGetInfo {
                    stream,
                    expect_status,
                    model,
                }
            }
            "capture_to_model_begin" => Call::CaptureToModelBegin {
                stream: stream(f)?,
                model: self.bound_model(f)?,
                mode: mode(f, "mode")?,
            },
            "thread_exchange_mode" => Call::ThreadExchangeMode {
                mode: mode(f, "mode")?,
                expect_previous: f.choice("expect_previous", CaptureMode::from_name, MODES)?,
            },
            "stream_add_to_model" => Call::StreamAddToModel {
                stream: stream(f)?,
                model: self.bound_model(f)?,
            },
            "launch" => Call::Launch {
                stream: stream(f)?,
                kernel: self.kernel(f, kernel, call_at)?,
            },
            "memcpy" => {
                let dst = self.buffer(f, "dst")?;
                let src = self.buffer(f, "src")?;
                self.same_shape("memcpy", &dst, &src)?;
                Call::Memcpy {
                    dst: dst.name,
                    src: src.name,
                }
            }
            "memset" => {
                let dst = self.buffer(f, "dst")?;
                let value = self.scalar_for(f, "value", &dst, None)?;
                Call::Memset {
                    dst: dst.name,
                    value,
                }
            }
            "synchronize" => Call::Synchronize { stream: stream(f)? },
            "event_record" => Call::EventRecord {
                event: f.name("event")?.0,
                stream: stream(f)?,
            },
            "event_wait" => Call::EventWait {
                event: f.name("event")?.0,
                stream: stream(f)?,
            },
            "task_group_begin" => Call::TaskGroupBegin { stream: stream(f)? },
            "task_group_end" => {
                let stream = stream(f)?;
                let (group, _) = f.name("group")?;
                self.groups.insert(group.clone());
                Call::TaskGroupEnd { stream, group }
            }
            "task_update_begin" => {
                let stream = stream(f)?;
                let (group, span) = f.name("group")?;
                if !self.groups.contains(&group) {
                    return Err(self.err(
                        span.start,
                        format!(
                            "unknown task group `{}`: no earlier task_group_end binds it",
                            shown(&group)
                        ),
                    ));
                }
                Call::TaskUpdateBegin { stream, group }
            }
            "task_update_end" => Call::TaskUpdateEnd { stream: stream(f)? },
            "model_update" => Call::ModelUpdate {
                model: self.bound_model(f)?,
            },
            "task_disable" => Call::TaskDisable {
                model: self.bound_model(f)?,
                stream: f.int("stream", 0)?.map_or(0, |(n, _)| n),
                task: f.int("task", 0)?.ok_or_else(|| f.missing("task"))?.0,
            },
            "task_set_params" => Call::TaskSetParams {
                model: self.bound_model(f)?,
                stream: f.int("stream", 0)?.map_or(0, |(n, _)| n),
                task: f.int("task", 0)?.ok_or_else(|| f.missing("task"))?.0,
                kernel: self.kernel(f, kernel, call_at)?,
            },
            "cond_handle_create" => {
                let model = self.bound_model(f)?;
                let (handle, _) = f.name("handle")?;
                let default = f.int("default", 0)?.map_or(0, |(n, _)| n);
                let assign_default = f.bool("assign_default")?.unwrap_or(false);
                self.handles.insert(handle.clone());
                Call::CondHandleCreate {
                    model,
                    handle,
                    default,
                    assign_default,
                }
            }
            "add_cond_task" => {
                let stream = stream(f)?;
                let handle = self.bound_handle(f)?;
                let kind = f.required_choice("type", CondKind::from_name, COND_KINDS)?;
                let (items, span) = f.array("models")?.ok_or_else(|| f.missing("models"))?;
                if items.is_empty() {
                    return Err(self.err(span.start, "`models` must not be empty".into()));
                }
                let mut models: Vec<String> = Vec::with_capacity(items.len());
                for item in items.iter() {
                    let at = item.span().start;
                    let name = match item.get_ref() {
                        DeValue::String(s) if s.is_empty() => {
                            return Err(self.err(at, "a name in `models` must not be empty".into()));
                        }
                        DeValue::String(s) => s.to_string(),
                        _ => return Err(f.wrong_type("an element of `models`", item, "a string")),
                    };
                    if models.contains(&name) {
                        return Err(
                            self.err(at, format!("`models` names `{}` twice", shown(&name)))
                        );
                    }
                    models.push(name);
                }
                self.models.extend(models.iter().cloned());
                Call::AddCondTask {
                    stream,
                    handle,
                    kind,
                    models,
                }
            }
            "execute" => Call::Execute {
                model: self.bound_model(f)?,
                stream: stream(f)?,
                times: f.int("times", 1)?.map_or(1, |(n, _)| n),
            },
            "model_destroy" => Call::ModelDestroy {
                model: self.bound_model(f)?,
            },
            "expect" => {
                let buffer = self.buffer(f, "buffer")?;
                let (items, span) = f.array("equals")?.ok_or_else(|| f.missing("equals"))?;
                if items.len() != buffer.len {
                    return Err(self.err(
                        span.start,
                        format!(
                            "`equals` has {} values but buffer `{}` has length {}",
                            items.len(),
                            shown(&buffer.name),
                            buffer.len
                        ),
                    ));
                }
                let mut equals = Vec::with_capacity(items.len());
                for item in items.iter() {
                    equals.push(fitted(
                        f,
                        "an element of `equals`",
                        item,
                        &buffer.name,
                        buffer.dtype,
                    )?);
                }
                Call::Expect {
                    buffer: buffer.name,
                    equals,
                }
            }
            // CALLS and this match list the same names; a name in one only is a bug here,
            // reported as the script's fault rather than a panic.
            _ => return Err(self.unknown_call(call, call_at)),
        })
    }

    fn kernel(
        &self,
        f: &Fields<'_, '_>,
        kernel: Option<&str>,
        call_at: usize,
    ) -> Result<Kernel, ScriptError> {
        let index = |f: &Fields<'_, '_>, buf: &BufRef| self.index(f, buf);
        Ok(match kernel.unwrap_or_default() {
            "fill" => {
                let dst = self.buffer(f, "dst")?;
                let value = self.scalar_for(f, "value", &dst, None)?;
                Kernel::Fill {
                    dst: dst.name,
                    value,
                }
            }
            "copy" => {
                let dst = self.buffer(f, "dst")?;
                let src = self.buffer(f, "src")?;
                self.same_shape("copy", &dst, &src)?;
                Kernel::Copy {
                    dst: dst.name,
                    src: src.name,
                }
            }
            "add" => {
                let dst = self.buffer(f, "dst")?;
                let a = self.buffer(f, "a")?;
                let b = self.buffer(f, "b")?;
                self.same_shape("add", &dst, &a)?;
                self.same_shape("add", &dst, &b)?;
                Kernel::Add {
                    dst: dst.name,
                    a: a.name,
                    b: b.name,
                }
            }
            "add_scalar" => {
                let dst = self.buffer(f, "dst")?;
                let src = self.buffer(f, "src")?;
                self.same_shape("add_scalar", &dst, &src)?;
                let value = self.scalar_for(f, "value", &dst, None)?;
                Kernel::AddScalar {
                    dst: dst.name,
                    src: src.name,
                    value,
                }
            }
            "mul_scalar" => {
                let dst = self.buffer(f, "dst")?;
                let src = self.buffer(f, "src")?;
                self.same_shape("mul_scalar", &dst, &src)?;
                let value = self.scalar_for(f, "value", &dst, None)?;
                Kernel::MulScalar {
                    dst: dst.name,
                    src: src.name,
                    value,
                }
            }
            "increment" => {
                let dst = self.buffer(f, "dst")?;
                let index = index(f, &dst)?;
                let by = self.scalar_for(f, "by", &dst, Some(Scalar::Int(1)))?;
                Kernel::Increment {
                    dst: dst.name,
                    index,
                    by,
                }
            }
            "set_cond" => {
                let handle = self.bound_handle(f)?;
                let src = self.buffer(f, "src")?;
                let index = index(f, &src)?;
                Kernel::SetCond {
                    handle,
                    src: src.name,
                    index,
                }
            }
            "set_cond_lt" => {
                let handle = self.bound_handle(f)?;
                let src = self.buffer(f, "src")?;
                let index = index(f, &src)?;
                let limit = self.scalar_for(f, "limit", &src, None)?;
                Kernel::SetCondLt {
                    handle,
                    src: src.name,
                    index,
                    limit,
                }
            }
            // As for calls: step() only passes names from KERNELS.
            other => {
                return Err(self.err(call_at, format!("unknown kernel `{}`", shown(other))));
            }
        })
    }

    /// A declared buffer named by field `key`.
    fn buffer(&self, f: &Fields<'_, '_>, key: &'static str) -> Result<BufRef, ScriptError> {
        let (name, span) = f.name(key)?;
        let Some(&(dtype, len)) = self.buffers.get(&name) else {
            return Err(self.err(
                span.start,
                format!(
                    "unknown buffer `{}` in `{key}`: it is not declared in [buffers]",
                    shown(&name)
                ),
            ));
        };
        Ok(BufRef {
            name,
            dtype,
            len,
            key,
            span,
        })
    }

    /// Refuses `b` unless it has `a`'s dtype and length.
    fn same_shape(&self, what: &str, a: &BufRef, b: &BufRef) -> Result<(), ScriptError> {
        if a.dtype == b.dtype && a.len == b.len {
            return Ok(());
        }
        Err(self.err(
            b.span.start,
            format!(
                "`{what}` needs buffers of one dtype and length: `{}` is `{}` ({}, {}), `{}` is \
                 `{}` ({}, {})",
                b.key,
                shown(&b.name),
                b.dtype,
                b.len,
                a.key,
                shown(&a.name),
                a.dtype,
                a.len
            ),
        ))
    }

    /// The `index` field (default 0), in range for `buf`.
    fn index(&self, f: &Fields<'_, '_>, buf: &BufRef) -> Result<usize, ScriptError> {
        match f.int::<usize>("index", 0)? {
            None => Ok(0),
            Some((i, _)) if i < buf.len => Ok(i),
            Some((i, span)) => Err(self.err(
                span.start,
                format!(
                    "`index` {i} is out of range for buffer `{}` of length {}",
                    shown(&buf.name),
                    buf.len
                ),
            )),
        }
    }

    /// A scalar field fitted to `buf`'s dtype; required unless it has a default.
    fn scalar_for(
        &self,
        f: &Fields<'_, '_>,
        key: &str,
        buf: &BufRef,
        default: Option<Scalar>,
    ) -> Result<Scalar, ScriptError> {
        match (f.get(key), default) {
            (Some(v), _) => fitted(f, &format!("`{key}`"), v, &buf.name, buf.dtype),
            (None, Some(d)) => d
                .fit(buf.dtype)
                .map_err(|m| self.err(f.at, format!("default `{key}`: {m}"))),
            (None, None) => Err(f.missing(key)),
        }
    }

    /// The `model` field, which an earlier step must have bound.
    fn bound_model(&self, f: &Fields<'_, '_>) -> Result<String, ScriptError> {
        let (model, span) = f.name("model")?;
        if self.models.contains(&model) {
            return Ok(model);
        }
        Err(self.err(
            span.start,
            format!(
                "unknown model `{}`: no earlier step binds it (`model` of capture_end or \
                 capture_get_info, `models` of add_cond_task)",
                shown(&model)
            ),
        ))
    }

    /// The `handle` field, which an earlier cond_handle_create must have bound.
    fn bound_handle(&self, f: &Fields<'_, '_>) -> Result<String, ScriptError> {
        let (handle, span) = f.name("handle")?;
        if self.handles.contains(&handle) {
            return Ok(handle);
        }
        Err(self.err(
            span.start,
            format!(
                "unknown condition handle `{}`: no earlier cond_handle_create binds it",
                shown(&handle)
            ),
        ))
    }
}

/// A scalar value as an element of buffer `buffer` of type `dtype`.
fn fitted(
    f: &Fields<'_, '_>,
    label: &str,
    v: &Value<'_>,
    buffer: &str,
    dtype: BufDtype,
) -> Result<Scalar, ScriptError> {
    f.scalar_of(label, v)?.fit(dtype).map_err(|m| {
        f.err(
            v.span().start,
            format!("{label} for buffer `{}`: {m}", shown(buffer)),
        )
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Every call and kernel, with defaults left out where the format has them.
    const FULL: &str = r#"version = 1
name = "every-call"

[device]
sq_depth = 4
max_while_iterations = 100

[buffers]
x = { dtype = "int64", len = 4 }
y = { dtype = "int64", init = [1, 2, 3, 4] }
f = { dtype = "float32", len = 2, init = [1, 2.5] }
[buffers.c]
dtype = "int32"
init = [0]

[[step]]
call = "capture_begin"
stream = "s0"
mode = "global"

[[step]]
call = "launch"
stream = "s0"
kernel = "fill"
dst = "x"
value = 7

[[step]]
call = "launch"
stream = "s0"
kernel = "copy"
dst = "x"
src = "y"

[[step]]
call = "launch"
stream = "s0"
kernel = "add"
dst = "x"
a = "x"
b = "y"

[[step]]
call = "launch"
stream = "s0"
kernel = "add_scalar"
dst = "f"
src = "f"
value = 1

[[step]]
call = "launch"
stream = "s0"
kernel = "mul_scalar"
dst = "f"
src = "f"
value = 0.5

[[step]]
call = "launch"
stream = "s0"
kernel = "increment"
dst = "x"

[[step]]
call = "launch"
stream = "s0"
kernel = "increment"
dst = "f"
index = 1
by = -2

[[step]]
call = "event_record"
event = "e0"
stream = "s0"

[[step]]
call = "event_wait"
thread = "t1"
event = "e0"
stream = "s1"

[[step]]
call = "task_group_begin"
stream = "s0"

[[step]]
call = "task_group_end"
stream = "s0"
group = "g"

[[step]]
call = "capture_get_info"
stream = "s0"
expect_status = "active"
model = "m0"

[[step]]
call = "cond_handle_create"
model = "m0"
handle = "h"
default = 1
assign_default = true

[[step]]
call = "launch"
stream = "s0"
kernel = "set_cond"
handle = "h"
src = "c"

[[step]]
call = "launch"
stream = "s0"
kernel = "set_cond_lt"
handle = "h"
src = "x"
index = 3
limit = 10

[[step]]
call = "add_cond_task"
stream = "s0"
handle = "h"
type = "while"
models = ["body"]

[[step]]
call = "capture_to_model_begin"
stream = "s2"
model = "body"
mode = "relaxed"

[[step]]
call = "capture_end"
stream = "s2"

[[step]]
call = "capture_end"
stream = "s0"
model = "m0"

[[step]]
call = "thread_exchange_mode"
mode = "thread_local"
expect_previous = "global"

[[step]]
call = "stream_add_to_model"
stream = "s3"
model = "m0"
expect_error = "ACL_ERROR_RT_PARAM_INVALID"

[[step]]
call = "memcpy"
dst = "x"
src = "y"

[[step]]
call = "memset"
dst = "f"
value = 3

[[step]]
call = "synchronize"
stream = "s0"

[[step]]
call = "task_update_begin"
stream = "s0"
group = "g"

[[step]]
call = "task_update_end"
stream = "s0"

[[step]]
call = "model_update"
model = "m0"

[[step]]
call = "task_disable"
model = "m0"
task = 2

[[step]]
call = "task_set_params"
model = "m0"
stream = 1
task = 0
kernel = "increment"
dst = "x"
by = 5

[[step]]
call = "execute"
model = "m0"
stream = "s1"
times = 3

[[step]]
call = "execute"
model = "body"
stream = "s1"

[[step]]
call = "expect"
buffer = "f"
equals = [1, 2.5]

[[step]]
call = "model_destroy"
model = "m0"
"#;

    /// The 1-based lines of the `[[step]]` headers of a text, found independently of the
    /// parser.
    fn step_lines(text: &str) -> Vec<usize> {
        text.lines()
            .enumerate()
            .filter(|(_, l)| l.trim() == "[[step]]")
            .map(|(i, _)| i + 1)
            .collect()
    }

    fn s(v: &str) -> String {
        v.to_owned()
    }

    #[test]
    fn full_script_parses_into_every_call_and_kernel() {
        let script = parse(FULL).unwrap();
        let calls = vec![
            Call::CaptureBegin {
                stream: s("s0"),
                mode: CaptureMode::Global,
            },
            Call::Launch {
                stream: s("s0"),
                kernel: Kernel::Fill {
                    dst: s("x"),
                    value: Scalar::Int(7),
                },
            },
            Call::Launch {
                stream: s("s0"),
                kernel: Kernel::Copy {
                    dst: s("x"),
                    src: s("y"),
                },
            },
            Call::Launch {
                stream: s("s0"),
                kernel: Kernel::Add {
                    dst: s("x"),
                    a: s("x"),
                    b: s("y"),
                },
            },
            Call::Launch {
                stream: s("s0"),
                kernel: Kernel::AddScalar {
                    dst: s("f"),
                    src: s("f"),
                    value: Scalar::Float(1.0),
                },
            },
            Call::Launch {
                stream: s("s0"),
                kernel: Kernel::MulScalar {
                    dst: s("f"),
                    src: s("f"),
                    value: Scalar::Float(0.5),
                },
            },
            Call::Launch {
                stream: s("s0"),
                kernel: Kernel::Increment {
                    dst: s("x"),
                    index: 0,
                    by: Scalar::Int(1),
                },
            },
            Call::Launch {
                stream: s("s0"),
                kernel: Kernel::Increment {
                    dst: s("f"),
                    index: 1,
                    by: Scalar::Float(-2.0),
                },
            },
            Call::EventRecord {
                event: s("e0"),
                stream: s("s0"),
            },
            Call::EventWait {
                event: s("e0"),
                stream: s("s1"),
            },
            Call::TaskGroupBegin { stream: s("s0") },
            Call::TaskGroupEnd {
                stream: s("s0"),
                group: s("g"),
            },
            Call::CaptureGetInfo {
                stream: s("s0"),
                expect_status: Some(CaptureStatus::Active),
                model: Some(s("m0")),
            },
            Call::CondHandleCreate {
                model: s("m0"),
                handle: s("h"),
                default: 1,
                assign_default: true,
            },
            Call::Launch {
                stream: s("s0"),
                kernel: Kernel::SetCond {
                    handle: s("h"),
                    src: s("c"),
                    index: 0,
                },
            },
            Call::Launch {
                stream: s("s0"),
                kernel: Kernel::SetCondLt {
                    handle: s("h"),
                    src: s("x"),
                    index: 3,
                    limit: Scalar::Int(10),
                },
            },
            Call::AddCondTask {
                stream: s("s0"),
                handle: s("h"),
                kind: CondKind::While,
                models: vec![s("body")],
            },
            Call::CaptureToModelBegin {
                stream: s("s2"),
                model: s("body"),
                mode: CaptureMode::Relaxed,
            },
            Call::CaptureEnd {
                stream: s("s2"),
                model: None,
            },
            Call::CaptureEnd {
                stream: s("s0"),
                model: Some(s("m0")),
            },
            Call::ThreadExchangeMode {
                mode: CaptureMode::ThreadLocal,
                expect_previous: Some(CaptureMode::Global),
            },
            Call::StreamAddToModel {
                stream: s("s3"),
                model: s("m0"),
            },
            Call::Memcpy {
                dst: s("x"),
                src: s("y"),
            },
            Call::Memset {
                dst: s("f"),
                value: Scalar::Float(3.0),
            },
            Call::Synchronize { stream: s("s0") },
            Call::TaskUpdateBegin {
                stream: s("s0"),
                group: s("g"),
            },
            Call::TaskUpdateEnd { stream: s("s0") },
            Call::ModelUpdate { model: s("m0") },
            Call::TaskDisable {
                model: s("m0"),
                stream: 0,
                task: 2,
            },
            Call::TaskSetParams {
                model: s("m0"),
                stream: 1,
                task: 0,
                kernel: Kernel::Increment {
                    dst: s("x"),
                    index: 0,
                    by: Scalar::Int(5),
                },
            },
            Call::Execute {
                model: s("m0"),
                stream: s("s1"),
                times: 3,
            },
            Call::Execute {
                model: s("body"),
                stream: s("s1"),
                times: 1,
            },
            Call::Expect {
                buffer: s("f"),
                equals: vec![Scalar::Float(1.0), Scalar::Float(2.5)],
            },
            Call::ModelDestroy { model: s("m0") },
        ];
        let lines = step_lines(FULL);
        assert_eq!(lines.len(), calls.len());
        let steps: Vec<Step> = calls
            .into_iter()
            .zip(lines)
            .enumerate()
            .map(|(i, (call, line))| Step {
                line,
                thread: s(if i == 9 { "t1" } else { "main" }),
                expect_error: (i == 21).then_some(AclError::RtParamInvalid),
                call,
            })
            .collect();
        let expected = Script {
            name: Some(s("every-call")),
            device: DeviceSettings {
                sq_depth: 4,
                max_while_iterations: 100,
            },
            buffers: vec![
                BufferDecl {
                    name: s("x"),
                    dtype: BufDtype::Int64,
                    init: vec![Scalar::Int(0); 4],
                    line: 9,
                },
                BufferDecl {
                    name: s("y"),
                    dtype: BufDtype::Int64,
                    init: [1, 2, 3, 4].map(Scalar::Int).to_vec(),
                    line: 10,
                },
                BufferDecl {
                    name: s("f"),
                    dtype: BufDtype::Float32,
                    init: vec![Scalar::Float(1.0), Scalar::Float(2.5)],
                    line: 11,
                },
                BufferDecl {
                    name: s("c"),
                    dtype: BufDtype::Int32,
                    init: vec![Scalar::Int(0)],
                    line: 12,
                },
            ],
            steps,
        };
        assert_eq!(script, expected);
    }

    #[test]
    fn names_match_the_script_spelling() {
        let script = parse(FULL).unwrap();
        let text_calls: Vec<&str> = FULL
            .lines()
            .filter_map(|l| l.strip_prefix("call = \""))
            .map(|l| l.trim_end_matches('"'))
            .collect();
        let names: Vec<&str> = script.steps.iter().map(|s| s.call.name()).collect();
        assert_eq!(names, text_calls);
        // Every call of the format appears in FULL, so name() covers CALLS.
        for (call, _) in CALLS {
            assert!(names.contains(call), "{call} missing from FULL");
        }
        let kernels: Vec<&str> = script
            .steps
            .iter()
            .filter_map(|s| match &s.call {
                Call::Launch { kernel, .. } | Call::TaskSetParams { kernel, .. } => {
                    Some(kernel.name())
                }
                _ => None,
            })
            .collect();
        for (kernel, _) in KERNELS {
            assert!(kernels.contains(kernel), "{kernel} missing from FULL");
        }
    }

    #[test]
    fn kernel_buffers() {
        let add = Kernel::Add {
            dst: s("d"),
            a: s("a"),
            b: s("b"),
        };
        assert_eq!(add.buffers(), ["d", "a", "b"]);
        let lt = Kernel::SetCondLt {
            handle: s("h"),
            src: s("x"),
            index: 0,
            limit: Scalar::Int(1),
        };
        assert_eq!(lt.buffers(), ["x"]);
    }

    #[test]
    fn defaults() {
        let script = parse(
            "version = 1\n[buffers]\nx = { dtype = \"float32\", len = 2 }\n\
             [[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"increment\"\ndst = \"x\"\n",
        )
        .unwrap();
        assert_eq!(script.name, None);
        assert_eq!(
            script.device,
            DeviceSettings {
                sq_depth: 1024,
                max_while_iterations: 1_000_000
            }
        );
        assert_eq!(script.buffers[0].init, vec![Scalar::Float(0.0); 2]);
        let step = &script.steps[0];
        assert_eq!(step.thread, "main");
        assert_eq!(step.expect_error, None);
        assert_eq!(
            step.call,
            Call::Launch {
                stream: s("s"),
                kernel: Kernel::Increment {
                    dst: s("x"),
                    index: 0,
                    by: Scalar::Float(1.0)
                }
            }
        );
    }

    #[test]
    fn defaults_of_calls() {
        let script = parse(
            "version = 1\n\
             [[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n\
             [[step]]\ncall = \"execute\"\nmodel = \"m\"\nstream = \"s\"\n\
             [[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"h\"\n\
             [[step]]\ncall = \"task_disable\"\nmodel = \"m\"\ntask = 0\n",
        )
        .unwrap();
        let calls: Vec<Call> = script.steps.into_iter().map(|s| s.call).collect();
        assert_eq!(
            calls[1],
            Call::Execute {
                model: s("m"),
                stream: s("s"),
                times: 1
            }
        );
        assert_eq!(
            calls[2],
            Call::CondHandleCreate {
                model: s("m"),
                handle: s("h"),
                default: 0,
                assign_default: false
            }
        );
        assert_eq!(
            calls[3],
            Call::TaskDisable {
                model: s("m"),
                stream: 0,
                task: 0
            }
        );
    }

    #[test]
    fn no_steps_and_inline_steps() {
        let script = parse("version = 1\n").unwrap();
        assert_eq!(script.steps, vec![]);
        assert_eq!(script.buffers, vec![]);
        let script = parse(
            "version = 1\nstep = [\n  { call = \"synchronize\", stream = \"s\" },\n  \
             { call = \"synchronize\", stream = \"t\", thread = \"t1\" },\n]\n",
        )
        .unwrap();
        assert_eq!(script.steps.len(), 2);
        assert_eq!(script.steps[1].line, 4);
        assert_eq!(script.steps[1].thread, "t1");
    }

    #[test]
    fn positions_count_characters() {
        let text = "é = 1\nab = ü\n";
        assert_eq!(position(text, 0), (1, 1));
        // "é" is two bytes, one column.
        assert_eq!(position(text, 2), (1, 2));
        // Inside a character: the character's own column.
        assert_eq!(position(text, 1), (1, 1));
        assert_eq!(position(text, 7), (2, 1));
        assert_eq!(position(text, 12), (2, 6));
        // Past the end: columns go on past the last line.
        assert_eq!(position(text, text.len() + 2), (3, 3));
        check(&[(
            "version = 1\nname = \"é\"\nnmae = 1\n",
            3,
            1,
            "unknown field `nmae`",
        )]);
        check(&[("version = 1\n\"é\" = 1\n", 2, 1, "unknown field `é`")]);
    }

    #[test]
    fn special_floats_are_values() {
        let script = parse(&format!(
            "{HEAD}[[step]]\ncall = \"memset\"\ndst = \"f\"\nvalue = -inf\n\
             [[step]]\ncall = \"memset\"\ndst = \"f\"\nvalue = 1_000\n"
        ))
        .unwrap();
        let values: Vec<Scalar> = script
            .steps
            .iter()
            .filter_map(|s| match s.call {
                Call::Memset { value, .. } => Some(value),
                _ => None,
            })
            .collect();
        assert_eq!(
            values,
            [Scalar::Float(f64::NEG_INFINITY), Scalar::Float(1000.0)]
        );
    }

    #[test]
    fn error_display() {
        let e = parse("version = 2").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 11: unsupported `version` 2; this rt2 reads version 1"
        );
    }

    /// The first error of a script: line, column and message.
    fn err(text: &str) -> (usize, usize, String) {
        match parse(text) {
            Ok(script) => panic!("expected an error, parsed {script:?}"),
            Err(e) => (e.line, e.column, e.message),
        }
    }

    /// Five lines of head, so a case's own text starts on line 6.
    const HEAD: &str = "version = 1\n\
                        [buffers]\n\
                        x = { dtype = \"int64\", len = 4 }\n\
                        y = { dtype = \"int32\", len = 4 }\n\
                        f = { dtype = \"float32\", len = 2 }\n";

    /// Each case: the script text, the line and column of the error, a phrase of its message.
    fn check(cases: &[(&str, usize, usize, &str)]) {
        for (text, line, column, phrase) in cases {
            let (l, c, m) = err(text);
            assert!(
                (l, c) == (*line, *column) && m.contains(phrase),
                "for\n{text}\nexpected {line}:{column} `{phrase}`, got {l}:{c} `{m}`"
            );
        }
    }

    /// Like [`check`], with [`HEAD`] before each text.
    fn check_steps(cases: &[(&str, usize, usize, &str)]) {
        for (text, line, column, phrase) in cases {
            let full = format!("{HEAD}{text}");
            check(&[(&full, *line, *column, phrase)]);
        }
    }

    #[test]
    fn bad_toml() {
        check(&[
            ("version = 1\nx = = 2\n", 2, 5, "invalid TOML"),
            ("version = 1\nversion = 1\n", 2, 1, "duplicate key"),
            (
                "version = 1\n[[step]]\ncall = \"a\n",
                3,
                10,
                "invalid basic string",
            ),
        ]);
    }

    #[test]
    fn version() {
        check(&[
            ("", 1, 1, "missing `version`"),
            ("name = \"a\"\n", 1, 1, "missing `version`"),
            ("version = 2\n", 1, 11, "unsupported `version` 2"),
            (
                "version = \"1\"\n",
                1,
                11,
                "must be the integer 1, not a string",
            ),
            (
                "version = 1.0\n",
                1,
                11,
                "must be the integer 1, not a float",
            ),
        ]);
    }

    #[test]
    fn unknown_keys() {
        check(&[
            (
                "version = 1\nnmae = \"a\"\n",
                2,
                1,
                "unknown field `nmae` in the script",
            ),
            (
                "version = 1\n[device]\nsq_depth = 4\nsq = 2\n",
                4,
                1,
                "unknown field `sq` in [device]",
            ),
            (
                "version = 1\n[buffers]\nx = { dtype = \"int32\", len = 1, size = 4 }\n",
                3,
                33,
                "unknown field `size` in buffer `x`",
            ),
        ]);
        check_steps(&[
            (
                "[[step]]\ncall = \"capture_begin\"\nstream = \"s\"\nmode = \"global\"\nmodel = \"m\"\n",
                10,
                1,
                "unknown field `model` in a `capture_begin` step",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"fill\"\ndst = \"x\"\nvalue = 1\nsrc = \"x\"\n",
                12,
                1,
                "expected one of: call, thread, expect_error, stream, kernel, dst, value",
            ),
            (
                "[[step]]\ncall = \"synchronize\"\nstream = \"s\"\n[step.extra]\n",
                9,
                7,
                "unknown field `extra`",
            ),
        ]);
    }

    #[test]
    fn missing_fields() {
        check(&[(
            "version = 1\n[buffers]\nx = { len = 4 }\n",
            3,
            1,
            "missing field `dtype` in buffer `x`",
        )]);
        check_steps(&[
            (
                "[[step]]\nstream = \"s\"\n",
                6,
                1,
                "missing field `call` in a step",
            ),
            (
                "[[step]]\ncall = \"capture_begin\"\nstream = \"s\"\n",
                6,
                1,
                "missing field `mode` in a `capture_begin` step",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\n",
                6,
                1,
                "missing field `kernel`",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"fill\"\ndst = \"x\"\n",
                6,
                1,
                "missing field `value`",
            ),
            (
                "[[step]]\ncall = \"expect\"\nbuffer = \"x\"\n",
                6,
                1,
                "missing field `equals`",
            ),
        ]);
    }

    #[test]
    fn wrong_types() {
        check(&[
            (
                "version = 1\nname = 3\n",
                2,
                8,
                "`name` must be a string, not an integer",
            ),
            (
                "version = 1\ndevice = 3\n",
                2,
                10,
                "`device` must be a table",
            ),
            (
                "version = 1\n[device]\nsq_depth = \"big\"\n",
                3,
                12,
                "`sq_depth` must be an integer, not a string",
            ),
            (
                "version = 1\nbuffers = []\n",
                2,
                11,
                "`buffers` must be a table",
            ),
            (
                "version = 1\n[buffers]\nx = 4\n",
                3,
                5,
                "must be a table such as",
            ),
            (
                "version = 1\n[buffers]\nx = { dtype = \"int32\", init = 1 }\n",
                3,
                31,
                "`init` must be an array, not an integer",
            ),
            (
                "version = 1\n[buffers]\nx = { dtype = \"int32\", init = [\"a\"] }\n",
                3,
                32,
                "an element of `init` must be a number, not a string",
            ),
        ]);
        check_steps(&[
            ("[[step]]\ncall = 1\n", 7, 8, "`call` must be a string"),
            (
                "[[step]]\ncall = \"synchronize\"\nstream = 0\n",
                8,
                10,
                "`stream` must be a string, not an integer",
            ),
            (
                "[[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n\
                 [[step]]\ncall = \"task_disable\"\nmodel = \"m\"\nstream = \"s\"\ntask = 0\n",
                13,
                10,
                "`stream` must be an integer, not a string",
            ),
            (
                "[[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n\
                 [[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"h\"\n\
                 assign_default = 1\n",
                14,
                18,
                "`assign_default` must be a boolean",
            ),
            (
                "[[step]]\ncall = \"memset\"\ndst = \"x\"\nvalue = \"1\"\n",
                9,
                9,
                "`value` must be a number, not a string",
            ),
            (
                "[[step]]\ncall = \"synchronize\"\nstream = \"s\"\nthread = 1\n",
                9,
                10,
                "`thread` must be a string",
            ),
            (
                "[[step]]\ncall = \"expect\"\nbuffer = \"f\"\nequals = [1, true]\n",
                9,
                14,
                "an element of `equals` must be a number, not a boolean",
            ),
        ]);
    }

    #[test]
    fn unknown_spellings() {
        check(&[(
            "version = 1\n[buffers]\nx = { dtype = \"int8\", len = 1 }\n",
            3,
            15,
            "unknown `dtype` `int8`; expected one of: int32, int64, float32",
        )]);
        check_steps(&[
            (
                "[[step]]\ncall = \"capture\"\n",
                7,
                8,
                "unknown call `capture`",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"sub\"\n",
                9,
                10,
                "unknown `kernel` `sub`",
            ),
            (
                "[[step]]\ncall = \"capture_begin\"\nstream = \"s\"\nmode = \"local\"\n",
                9,
                8,
                "unknown `mode` `local`",
            ),
            (
                "[[step]]\ncall = \"capture_get_info\"\nstream = \"s\"\nexpect_status = \"on\"\n",
                9,
                17,
                "unknown `expect_status` `on`",
            ),
            (
                "[[step]]\ncall = \"thread_exchange_mode\"\nmode = \"relaxed\"\nexpect_previous = \"x\"\n",
                9,
                19,
                "unknown `expect_previous` `x`",
            ),
            (
                "[[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n\
                 [[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"h\"\n\
                 [[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
                 type = \"for\"\nmodels = [\"b\"]\n",
                18,
                8,
                "unknown `type` `for`",
            ),
            (
                "[[step]]\ncall = \"synchronize\"\nstream = \"s\"\nexpect_error = \"ACL_ERROR_NOPE\"\n",
                9,
                16,
                "unknown error name `ACL_ERROR_NOPE`",
            ),
        ]);
    }

    #[test]
    fn buffer_declarations() {
        check(&[
            (
                "version = 1\n[buffers]\nx = { dtype = \"int32\" }\n",
                3,
                1,
                "buffer `x` needs `len` or `init`",
            ),
            (
                "version = 1\n[buffers]\nx = { dtype = \"int32\", len = 0 }\n",
                3,
                30,
                "`len` must be at least 1, not 0",
            ),
            (
                "version = 1\n[buffers]\nx = { dtype = \"int32\", init = [] }\n",
                3,
                31,
                "`init` must not be empty",
            ),
            (
                "version = 1\n[buffers]\nx = { dtype = \"int32\", len = 3, init = [1, 2] }\n",
                3,
                30,
                "`len` is 3 but `init` has 2 values",
            ),
            (
                "version = 1\n[buffers]\nx = { dtype = \"int32\", init = [1, 2147483648] }\n",
                3,
                35,
                "2147483648 does not fit int32",
            ),
            (
                "version = 1\n[buffers]\nx = { dtype = \"int64\", init = [1.5] }\n",
                3,
                32,
                "1.5 is not an integer",
            ),
            (
                "version = 1\n[buffers]\nx = { dtype = \"int64\", len = 2000000 }\n",
                3,
                30,
                "`len` must be at most",
            ),
            (
                "version = 1\n[buffers]\n\"\" = { dtype = \"int64\", len = 1 }\n",
                3,
                1,
                "a buffer name must not be empty",
            ),
            (
                "version = 1\n[buffers]\nx = { dtype = \"float32\", init = [1e400] }\n",
                3,
                34,
                "an element of `init` is not a representable float",
            ),
            (
                "version = 1\n[device]\nsq_depth = 1\n",
                3,
                12,
                "`sq_depth` must be at least 2, not 1",
            ),
            (
                "version = 1\n[device]\nmax_while_iterations = 0\n",
                3,
                24,
                "`max_while_iterations` must be at least 1, not 0",
            ),
        ]);
    }

    #[test]
    fn buffer_uses() {
        check_steps(&[
            (
                "[[step]]\ncall = \"memset\"\ndst = \"z\"\nvalue = 1\n",
                8,
                7,
                "unknown buffer `z` in `dst`",
            ),
            (
                "[[step]]\ncall = \"memcpy\"\ndst = \"x\"\nsrc = \"y\"\n",
                9,
                7,
                "`memcpy` needs buffers of one dtype and length",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"copy\"\ndst = \"x\"\nsrc = \"f\"\n",
                11,
                7,
                "`copy` needs buffers of one dtype and length: `src` is `f` (float32, 2)",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"add\"\ndst = \"x\"\na = \"x\"\nb = \"y\"\n",
                12,
                5,
                "`add` needs buffers of one dtype and length",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"increment\"\ndst = \"x\"\nindex = 4\n",
                11,
                9,
                "`index` 4 is out of range for buffer `x` of length 4",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"increment\"\ndst = \"x\"\nindex = -1\n",
                11,
                9,
                "`index` must be at least 0",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"fill\"\ndst = \"y\"\nvalue = 1.5\n",
                11,
                9,
                "`value` for buffer `y`: 1.5 is not an integer",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"increment\"\ndst = \"y\"\nby = 4294967296\n",
                11,
                6,
                "`by` for buffer `y`: 4294967296 does not fit int32",
            ),
            (
                "[[step]]\ncall = \"memset\"\ndst = \"y\"\nvalue = -3000000000\n",
                9,
                9,
                "does not fit int32",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"mul_scalar\"\ndst = \"x\"\nsrc = \"x\"\nvalue = 0.5\n",
                12,
                9,
                "is not an integer",
            ),
            (
                "[[step]]\ncall = \"expect\"\nbuffer = \"x\"\nequals = [1, 2, 3]\n",
                9,
                10,
                "`equals` has 3 values but buffer `x` has length 4",
            ),
            (
                "[[step]]\ncall = \"expect\"\nbuffer = \"y\"\nequals = [1, 2, 3, 1e3]\n",
                9,
                20,
                "an element of `equals` for buffer `y`",
            ),
            (
                "[[step]]\ncall = \"memset\"\ndst = \"x\"\nvalue = 9223372036854775808\n",
                9,
                9,
                "`value` does not fit a 64-bit integer",
            ),
            (
                "[[step]]\ncall = \"memset\"\ndst = \"\"\nvalue = 1\n",
                8,
                7,
                "`dst` must not be empty",
            ),
        ]);
    }

    /// Steps that bind `m` (a model) and `h` (a handle in it), for binding cases.
    const BIND: &str = "[[step]]\ncall = \"capture_get_info\"\nstream = \"s\"\nmodel = \"m\"\n\
                        [[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"h\"\n";

    #[test]
    fn set_cond_lt_limit_fits_src() {
        let text = format!(
            "{HEAD}{BIND}[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"set_cond_lt\"\n\
             handle = \"h\"\nsrc = \"y\"\nlimit = 2.5\n"
        );
        check(&[(
            &text,
            20,
            9,
            "`limit` for buffer `y`: 2.5 is not an integer",
        )]);
        let text = format!(
            "{HEAD}{BIND}[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"set_cond\"\n\
             handle = \"h\"\nsrc = \"f\"\nindex = 2\n"
        );
        check(&[(
            &text,
            20,
            9,
            "`index` 2 is out of range for buffer `f` of length 2",
        )]);
    }

    #[test]
    fn name_binding() {
        check_steps(&[
            (
                "[[step]]\ncall = \"execute\"\nmodel = \"m\"\nstream = \"s\"\n",
                8,
                9,
                "unknown model `m`: no earlier step binds it",
            ),
            (
                // Binding is in file order: a later capture_end does not count.
                "[[step]]\ncall = \"model_destroy\"\nmodel = \"m\"\n\
                 [[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n",
                8,
                9,
                "unknown model `m`",
            ),
            (
                "[[step]]\ncall = \"capture_to_model_begin\"\nstream = \"s\"\nmodel = \"b\"\nmode = \"global\"\n",
                9,
                9,
                "unknown model `b`",
            ),
            (
                "[[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"h\"\n",
                8,
                9,
                "unknown model `m`",
            ),
            (
                "[[step]]\ncall = \"task_update_begin\"\nstream = \"s\"\ngroup = \"g\"\n",
                9,
                9,
                "unknown task group `g`: no earlier task_group_end binds it",
            ),
            (
                "[[step]]\ncall = \"launch\"\nstream = \"s\"\nkernel = \"set_cond\"\nhandle = \"h\"\nsrc = \"x\"\n",
                10,
                10,
                "unknown condition handle `h`",
            ),
            (
                "[[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"m\"\n\
                 [[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
                 type = \"if\"\nmodels = [\"a\"]\n",
                13,
                10,
                "unknown condition handle `h`",
            ),
            (
                "[[step]]\ncall = \"synchronize\"\nstream = \"\"\n",
                8,
                10,
                "`stream` must not be empty",
            ),
            (
                "[[step]]\ncall = \"capture_end\"\nstream = \"s\"\nmodel = \"\"\n",
                9,
                9,
                "`model` must not be empty",
            ),
        ]);
        // Sub-models bound by add_cond_task are usable afterwards, and so is a group.
        let text = format!(
            "{HEAD}{BIND}[[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
             type = \"switch\"\nmodels = [\"b0\", \"b1\"]\n\
             [[step]]\ncall = \"capture_to_model_begin\"\nstream = \"t\"\nmodel = \"b1\"\n\
             mode = \"global\"\n\
             [[step]]\ncall = \"task_group_end\"\nstream = \"s\"\ngroup = \"g\"\n\
             [[step]]\ncall = \"task_update_begin\"\nstream = \"s\"\ngroup = \"g\"\n"
        );
        assert_eq!(parse(&text).unwrap().steps.len(), 6);
    }

    #[test]
    fn cond_task_models() {
        check_steps(&[
            (
                &format!(
                    "{BIND}[[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
                     type = \"if\"\nmodels = []\n"
                ),
                19,
                10,
                "`models` must not be empty",
            ),
            (
                &format!(
                    "{BIND}[[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
                     type = \"switch\"\nmodels = [\"a\", \"b\", \"a\"]\n"
                ),
                19,
                21,
                "`models` names `a` twice",
            ),
            (
                &format!(
                    "{BIND}[[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
                     type = \"switch\"\nmodels = [\"a\", 2]\n"
                ),
                19,
                16,
                "an element of `models` must be a string",
            ),
        ]);
        // Sizes are the runtime's to refuse: a WHILE with two bodies parses.
        let text = format!(
            "{HEAD}{BIND}[[step]]\ncall = \"add_cond_task\"\nstream = \"s\"\nhandle = \"h\"\n\
             type = \"while\"\nmodels = [\"a\", \"b\"]\nexpect_error = \"ACL_ERROR_INVALID_PARAM\"\n"
        );
        let script = parse(&text).unwrap();
        assert_eq!(script.steps[2].expect_error, Some(AclError::InvalidParam));
    }

    #[test]
    fn integer_ranges() {
        check_steps(&[
            (
                &format!(
                    "{BIND}[[step]]\ncall = \"execute\"\nmodel = \"m\"\nstream = \"s\"\ntimes = 0\n"
                ),
                18,
                9,
                "`times` must be at least 1, not 0",
            ),
            (
                &format!(
                    "{BIND}[[step]]\ncall = \"execute\"\nmodel = \"m\"\nstream = \"s\"\ntimes = 4294967296\n"
                ),
                18,
                9,
                "`times` is too large",
            ),
            (
                &format!(
                    "{BIND}[[step]]\ncall = \"cond_handle_create\"\nmodel = \"m\"\nhandle = \"k\"\ndefault = -1\n"
                ),
                18,
                11,
                "`default` must be at least 0",
            ),
            (
                &format!("{BIND}[[step]]\ncall = \"task_disable\"\nmodel = \"m\"\n"),
                14,
                1,
                "missing field `task`",
            ),
        ]);
    }

    #[test]
    fn step_shapes() {
        check(&[
            (
                "version = 1\n[step]\ncall = \"synchronize\"\n",
                2,
                1,
                "`step` must be an array of tables ([[step]]), not a table",
            ),
            (
                "version = 1\nstep = 3\n",
                2,
                8,
                "`step` must be an array of tables",
            ),
            (
                "version = 1\nstep = [1]\n",
                2,
                9,
                "a step must be a table, not an integer",
            ),
        ]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn never_panics_on_any_text(text in "\\PC{0,300}") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_toml_like_text(
            text in "(version = 1\n)?([a-z_]{1,8} = (\"[a-z0-9]{0,4}\"|-?[0-9]{1,11}|[0-9]\\.5|\\[[0-9, ]{0,6}\\]|true)\n|\\[\\[step\\]\\]\n|\\[buffers\\]\n|\\[device\\]\n){0,20}"
        ) {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_byte_mutations(
            edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..8)
        ) {
            let mut bytes = FULL.as_bytes().to_vec();
            for (at, op, b) in edits {
                let i = at.index(bytes.len() + 1);
                match op {
                    0 if i < bytes.len() => bytes[i] = b,
                    1 => bytes.insert(i, b),
                    _ if i < bytes.len() => {
                        bytes.remove(i);
                    }
                    _ => {}
                }
            }
            let _ = parse(&String::from_utf8_lossy(&bytes));
        }

        #[test]
        fn never_panics_on_line_mutations(
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), 0u8..3), 1..6)
        ) {
            let mut lines: Vec<&str> = FULL.lines().collect();
            for (a, b, op) in edits {
                if lines.is_empty() {
                    break;
                }
                let (i, j) = (a.index(lines.len()), b.index(lines.len()));
                match op {
                    0 => {
                        lines.remove(i);
                    }
                    1 => lines.swap(i, j),
                    _ => lines.insert(i, lines[j]),
                }
            }
            let _ = parse(&lines.join("\n"));
        }
    }
}
