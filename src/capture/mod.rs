//! ACL Graph emulation: stream capture on the emulated device.

pub mod error;
pub mod script;
pub mod types;

pub use error::AclError;
pub use types::{BufDtype, CaptureMode, CaptureStatus, CondKind, Scalar};
