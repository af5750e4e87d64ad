//! Ascend tensor formats and GE's TransData: the formats GE names ([`Format`]), a whole
//! format value as GE stores it ([`StorageFormat`]: primary format, sub-format, C0 code),
//! C0 as GE chooses it ([`c0_for`]), and the byte-exact transfers between formats
//! ([`Transfer`]) that GE's `base/formats/format_transfers/` implements.
//!
//! Layers, bottom up: [`error`]; [`mod@format`] (names, numbers, `format_for_int`; uses nothing
//! of rt2, so model readers may name formats); `strided` and `nc1hwc0`, the byte movers;
//! [`mod@transfer`], which knows every layout and uses the op library's element types.
//! The module does no IO and never panics on a shape or a buffer it is given.

pub mod error;
pub mod format;
mod nc1hwc0;
mod strided;
#[cfg(test)]
mod tests;
pub mod transfer;

pub use error::FormatError;
pub use format::{Format, StorageFormat};
pub use transfer::{NI, Transfer, c0_for, storage_shape, transfer};
