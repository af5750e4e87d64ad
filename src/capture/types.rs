//! The small value types of the ACL Graph API (enums of `acl_base_rt.h`) and of capture
//! scripts' buffers, shared by the API emulation, the script runner and saved models.

use std::fmt;

use serde::{Deserialize, Serialize};

/// `aclmdlRICaptureMode`. Ordered by strictness: `Global` < `ThreadLocal` < `Relaxed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureMode {
    Global = 0,
    ThreadLocal = 1,
    Relaxed = 2,
}

impl CaptureMode {
    /// The script spelling: `global`, `thread_local`, `relaxed`.
    pub fn name(self) -> &'static str {
        match self {
            CaptureMode::Global => "global",
            CaptureMode::ThreadLocal => "thread_local",
            CaptureMode::Relaxed => "relaxed",
        }
    }
    pub fn from_name(s: &str) -> Option<CaptureMode> {
        [
            CaptureMode::Global,
            CaptureMode::ThreadLocal,
            CaptureMode::Relaxed,
        ]
        .into_iter()
        .find(|m| m.name() == s)
    }
}

impl fmt::Display for CaptureMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `aclmdlRICaptureStatus` of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureStatus {
    None = 0,
    Active = 1,
    Invalidated = 2,
}

impl CaptureStatus {
    /// The script spelling: `none`, `active`, `invalidated`.
    pub fn name(self) -> &'static str {
        match self {
            CaptureStatus::None => "none",
            CaptureStatus::Active => "active",
            CaptureStatus::Invalidated => "invalidated",
        }
    }
    pub fn from_name(s: &str) -> Option<CaptureStatus> {
        [
            CaptureStatus::None,
            CaptureStatus::Active,
            CaptureStatus::Invalidated,
        ]
        .into_iter()
        .find(|m| m.name() == s)
    }
}

impl fmt::Display for CaptureStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `aclmdlRICondTaskType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CondKind {
    /// Runs model 0 when the value is non-zero, model 1 (if there is one) when it is zero.
    If = 0,
    /// Runs model 0 while the value is non-zero, checking it before each run.
    While = 1,
    /// Runs model `value` when it is in range, nothing otherwise.
    Switch = 2,
}

impl CondKind {
    /// The script spelling: `if`, `while`, `switch`.
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
    /// Whether a task of this kind may have `n` sub-models (`aclmdlRICondTaskParams::size`).
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

/// The element type of a script buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BufDtype {
    Int32,
    Int64,
    Float32,
}

impl BufDtype {
    /// The script spelling: `int32`, `int64`, `float32`.
    pub fn name(self) -> &'static str {
        match self {
            BufDtype::Int32 => "int32",
            BufDtype::Int64 => "int64",
            BufDtype::Float32 => "float32",
        }
    }
    pub fn from_name(s: &str) -> Option<BufDtype> {
        [BufDtype::Int32, BufDtype::Int64, BufDtype::Float32]
            .into_iter()
            .find(|m| m.name() == s)
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            BufDtype::Int32 | BufDtype::Float32 => 4,
            BufDtype::Int64 => 8,
        }
    }
    pub fn is_float(self) -> bool {
        self == BufDtype::Float32
    }
}

impl fmt::Display for BufDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One element value as a script writes it: an integer for integer buffers, a number for
/// float buffers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    Int(i64),
    Float(f64),
}

impl Scalar {
    /// The value as a `dtype` element, or why it is not one: a float (TOML `1.0`) for an
    /// integer buffer is refused, and an integer must fit the type.
    pub fn fit(self, dtype: BufDtype) -> Result<Scalar, String> {
        match (self, dtype) {
            (Scalar::Int(v), BufDtype::Float32) => Ok(Scalar::Float(v as f64)),
            (Scalar::Float(v), BufDtype::Float32) => Ok(Scalar::Float(v)),
            (Scalar::Int(v), BufDtype::Int32) if i32::try_from(v).is_err() => {
                Err(format!("{v} does not fit int32"))
            }
            (Scalar::Int(v), _) => Ok(Scalar::Int(v)),
            (Scalar::Float(v), _) => Err(format!(
                "{v} is not an integer, and the buffer is {}",
                dtype.name()
            )),
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::Float(v) => write!(f, "{v}"),
        }
    }
}
