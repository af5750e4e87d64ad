//! ACL Graph emulation: stream capture on the emulated device.

pub mod acl;
pub mod buffers;
pub mod device_kernels;
pub mod error;
pub mod names;
pub mod report;
pub mod rim;
pub mod runner;
pub mod script;
pub mod types;

pub use error::AclError;
pub use types::{BufDtype, CaptureMode, CaptureStatus, CondKind, Scalar};

#[cfg(test)]
mod tests;
