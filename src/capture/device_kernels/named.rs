//! A built-in kernel as scripts and saved models write it: [`DeviceKernel`], its buffers and
//! condition handle by name. The parser makes them, saved models store them, and
//! [`super::call::DeviceKernelCall::from_named`] resolves the names into a launch's arguments.
//! No device and no parsing here: the names are checked by whoever made the value.

use crate::capture::types::Scalar;

/// A built-in device kernel with its arguments. Buffers are named; scalars are fitted to
/// the dtype of the buffer they apply to; indices are in range. Saved models
/// (`.rim.json`) write kernels in this form too, tagged by `"kernel"`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kernel", rename_all = "snake_case", deny_unknown_fields)]
pub enum DeviceKernel {
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

impl DeviceKernel {
    /// The kernel's name in scripts (`"fill"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            DeviceKernel::Fill { .. } => "fill",
            DeviceKernel::Copy { .. } => "copy",
            DeviceKernel::Add { .. } => "add",
            DeviceKernel::AddScalar { .. } => "add_scalar",
            DeviceKernel::MulScalar { .. } => "mul_scalar",
            DeviceKernel::Increment { .. } => "increment",
            DeviceKernel::SetCond { .. } => "set_cond",
            DeviceKernel::SetCondLt { .. } => "set_cond_lt",
        }
    }

    /// The buffers the kernel reads or writes, destination first.
    pub fn buffers(&self) -> Vec<&str> {
        match self {
            DeviceKernel::Fill { dst, .. } | DeviceKernel::Increment { dst, .. } => vec![dst],
            DeviceKernel::Copy { dst, src }
            | DeviceKernel::AddScalar { dst, src, .. }
            | DeviceKernel::MulScalar { dst, src, .. } => vec![dst, src],
            DeviceKernel::Add { dst, a, b } => vec![dst, a, b],
            DeviceKernel::SetCond { src, .. } | DeviceKernel::SetCondLt { src, .. } => vec![src],
        }
    }
}
