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

/// `aclmdlRICondTaskType`: the device's conditional task kinds.
pub use crate::npu::device::CondKind;

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
            // `1.0`, not `1`: a float buffer's values read as floats.
            Scalar::Float(v) => write!(f, "{v:?}"),
        }
    }
}

/// The little-endian bytes of `values` as `dtype` elements; an error names the first value
/// that does not fit.
pub fn encode(dtype: BufDtype, values: &[Scalar]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(values.len() * dtype.size());
    for v in values {
        match (v.fit(dtype)?, dtype) {
            (Scalar::Int(i), BufDtype::Int32) => out.extend((i as i32).to_le_bytes()),
            (Scalar::Int(i), BufDtype::Int64) => out.extend(i.to_le_bytes()),
            (Scalar::Float(f), BufDtype::Float32) => out.extend((f as f32).to_le_bytes()),
            (v, d) => return Err(format!("{v} is not a {d} value")),
        }
    }
    Ok(out)
}

/// The values of little-endian `dtype` elements (a trailing partial element is ignored).
pub fn decode(dtype: BufDtype, bytes: &[u8]) -> Vec<Scalar> {
    match dtype {
        BufDtype::Int32 => bytes
            .chunks_exact(4)
            .map(|c| Scalar::Int(i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))))
            .collect(),
        BufDtype::Int64 => bytes
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                Scalar::Int(i64::from_le_bytes(b))
            })
            .collect(),
        BufDtype::Float32 => bytes
            .chunks_exact(4)
            .map(|c| Scalar::Float(f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))))
            .collect(),
    }
}
