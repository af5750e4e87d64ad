//! The built-in kernels as scripts name them, one entry each in [`DEVICE_KERNELS`]: the kernel's
//! name, its arguments (which sit beside the `launch` or `task_set_params` fields), and
//! the function that reads them into a [`DeviceKernel`]. As with the calls, the table is the one
//! definition: the parser finds a kernel's arguments and its reader here.

use crate::capture::device_kernels::DeviceKernel;
use crate::capture::types::Scalar;

use super::args::Checker;
use super::error::ScriptError;
use super::fields::Fields;

/// Reads a step's kernel arguments.
pub(super) type ReadKernel = fn(&Checker<'_>, &Fields<'_, '_>) -> Result<DeviceKernel, ScriptError>;

/// One built-in kernel as scripts name it.
pub(super) struct DeviceKernelSpec {
    /// The kernel's name in scripts (`"fill"`, ...).
    pub(super) name: &'static str,
    /// Its arguments, in the order they are checked.
    pub(super) args: &'static [&'static str],
    pub(super) read: ReadKernel,
}

const fn kernel(
    name: &'static str,
    args: &'static [&'static str],
    read: ReadKernel,
) -> DeviceKernelSpec {
    DeviceKernelSpec { name, args, read }
}

/// Every kernel, in the order messages list them.
pub(super) const DEVICE_KERNELS: &[DeviceKernelSpec] = &[
    kernel("fill", &["dst", "value"], fill),
    kernel("copy", &["dst", "src"], copy),
    kernel("add", &["dst", "a", "b"], add),
    kernel("add_scalar", &["dst", "src", "value"], add_scalar),
    kernel("mul_scalar", &["dst", "src", "value"], mul_scalar),
    kernel("increment", &["dst", "index", "by"], increment),
    kernel("set_cond", &["handle", "src", "index"], set_cond),
    kernel(
        "set_cond_lt",
        &["handle", "src", "index", "limit"],
        set_cond_lt,
    ),
];

fn fill(c: &Checker<'_>, f: &Fields<'_, '_>) -> Result<DeviceKernel, ScriptError> {
    let dst = c.buffer(f, "dst")?;
    let value = c.scalar_for(f, "value", &dst, None)?;
    Ok(DeviceKernel::Fill {
        dst: dst.name,
        value,
    })
}

fn copy(c: &Checker<'_>, f: &Fields<'_, '_>) -> Result<DeviceKernel, ScriptError> {
    let dst = c.buffer(f, "dst")?;
    let src = c.buffer(f, "src")?;
    c.same_shape("copy", &dst, &src)?;
    Ok(DeviceKernel::Copy {
        dst: dst.name,
        src: src.name,
    })
}

fn add(c: &Checker<'_>, f: &Fields<'_, '_>) -> Result<DeviceKernel, ScriptError> {
    let dst = c.buffer(f, "dst")?;
    let a = c.buffer(f, "a")?;
    let b = c.buffer(f, "b")?;
    c.same_shape("add", &dst, &a)?;
    c.same_shape("add", &dst, &b)?;
    Ok(DeviceKernel::Add {
        dst: dst.name,
        a: a.name,
        b: b.name,
    })
}

fn add_scalar(c: &Checker<'_>, f: &Fields<'_, '_>) -> Result<DeviceKernel, ScriptError> {
    let dst = c.buffer(f, "dst")?;
    let src = c.buffer(f, "src")?;
    c.same_shape("add_scalar", &dst, &src)?;
    let value = c.scalar_for(f, "value", &dst, None)?;
    Ok(DeviceKernel::AddScalar {
        dst: dst.name,
        src: src.name,
        value,
    })
}

fn mul_scalar(c: &Checker<'_>, f: &Fields<'_, '_>) -> Result<DeviceKernel, ScriptError> {
    let dst = c.buffer(f, "dst")?;
    let src = c.buffer(f, "src")?;
    c.same_shape("mul_scalar", &dst, &src)?;
    let value = c.scalar_for(f, "value", &dst, None)?;
    Ok(DeviceKernel::MulScalar {
        dst: dst.name,
        src: src.name,
        value,
    })
}

fn increment(c: &Checker<'_>, f: &Fields<'_, '_>) -> Result<DeviceKernel, ScriptError> {
    let dst = c.buffer(f, "dst")?;
    let index = c.index(f, &dst)?;
    let by = c.scalar_for(f, "by", &dst, Some(Scalar::Int(1)))?;
    Ok(DeviceKernel::Increment {
        dst: dst.name,
        index,
        by,
    })
}

fn set_cond(c: &Checker<'_>, f: &Fields<'_, '_>) -> Result<DeviceKernel, ScriptError> {
    let handle = c.bound_handle(f)?;
    let src = c.buffer(f, "src")?;
    let index = c.index(f, &src)?;
    Ok(DeviceKernel::SetCond {
        handle,
        src: src.name,
        index,
    })
}

fn set_cond_lt(c: &Checker<'_>, f: &Fields<'_, '_>) -> Result<DeviceKernel, ScriptError> {
    let handle = c.bound_handle(f)?;
    let src = c.buffer(f, "src")?;
    let index = c.index(f, &src)?;
    let limit = c.scalar_for(f, "limit", &src, None)?;
    Ok(DeviceKernel::SetCondLt {
        handle,
        src: src.name,
        index,
        limit,
    })
}
