//! Linear algebra and the arithmetic the other new families share: the float element
//! types and the precision their kernels compute in ([`Real`], [`Acc`]), the one strided
//! matrix product every kernel calls ([`gemm`], over [`sgemm`] for f32 and
//! matrixmultiply's `dgemm` for f64), and the ops built
//! mostly of it: Einsum, MatMulInteger and ConvInteger, with the norms (LpNormalization,
//! RMSNormalization, GroupNormalization) and the index-rearranging ops (EyeLike,
//! ReverseSequence, CenterCropPad, Col2Im) in submodules.
//!
//! Nothing here loops over a matrix product by hand: a product is a [`gemm`] call on
//! strided views, so transposes and head-interleaved layouts cost no copies.
//!
//! Layers: the shared arithmetic sits in `real` (element types, precision, [`gemm`]) and
//! `operands` (argument reading), below the op files, which take it from there; this file
//! only registers the family and re-exports the shared items for the other families.

pub mod einsum;
pub mod integer;
pub mod layout;
pub mod norm;
mod operands;
mod real;
pub mod sgemm;
pub mod sgemv;

pub use operands::{
    absent, broadcast_offsets, check_float_type, dim_add, dim_div, dim_mul, index_values, not_float,
};
pub use real::{Acc, MatLayout, PAR_MIN_ELEMS, Real, gemm, min_chunks, narrow_into, widen_all};

use crate::ops::OpRegistry;

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    einsum::register(reg);
    integer::register(reg);
    layout::register(reg);
    norm::register(reg);
}
