//! Why a format cannot be read or a transfer cannot run: [`FormatError`], naming the
//! formats, the shapes and the element type at fault.

use crate::ops::DType;

/// Why a format value is not one GE defines, or why a transfer between two formats
/// cannot run on what it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error(
        "format_for_int {value:#x} is not a GE format (primary format unknown or reserved bits set)"
    )]
    BadFormatInt { value: i64 },
    #[error("{name:?} is not a GE format name")]
    BadFormatName { name: String },
    #[error("no transfer from {src} to {dst}")]
    Unsupported { src: String, dst: String },
    #[error("the transfer from {src} to {dst} does not take {dtype}")]
    DType {
        src: String,
        dst: String,
        dtype: DType,
    },
    #[error("{src} to {dst}: {msg}")]
    Shape {
        src: String,
        dst: String,
        msg: String,
    },
    #[error(
        "{src} to {dst}: the destination shape is not determined by the source shape {src_shape:?}; it must be given"
    )]
    Undetermined {
        src: String,
        dst: String,
        src_shape: Vec<usize>,
    },
}
