//! Capture scripts (../shared/specs/capture-script.md): what a parsed script is
//! ([`ast`]), and [`parse()`], which reads and statically checks one. The layers, from the
//! bottom: [`error`] (messages and positions), [`fields`] (reading a TOML table),
//! [`args`] (the checks' state and argument readers), [`device_kernels`] and [`calls`] (the
//! tables of device kernels and calls, each entry with its reader), [`mod@parse`] (the walk
//! of the script).

pub mod args;
pub mod ast;
pub mod calls;
pub mod device_kernels;
pub mod error;
pub mod fields;
pub mod parse;

pub use crate::capture::device_kernels::DeviceKernel;
pub use ast::{BufferDecl, Call, DeviceSettings, Script, Step};
pub use error::ScriptError;
pub use parse::parse;

#[cfg(test)]
mod tests;
