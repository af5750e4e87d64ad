//! The built-in device kernels of capture scripts: the named form scripts and saved
//! models write ([`named`]), one launch with resolved arguments ([`call`]), and the ops
//! that compute them on the device ([`ops`]), in that order of layers.

pub mod call;
pub mod named;
pub mod ops;

pub use call::{Buf, DeviceKernelCall};
pub use named::DeviceKernel;
pub use ops::register;
