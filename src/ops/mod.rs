//! The op library: every op rt2 computes, registered one family at a time in a plain
//! table (as tract does), with shape and dtype inference, CPU compute and the hooks that
//! lowering and the device ask for. It uses nothing else of rt2: an op knows its inputs,
//! attributes and outputs, never a device, a graph or a file.
//!
//! Layers, bottom up: element types ([`dtype`]), attributes and host tensors ([`attr`]),
//! errors ([`error`]), typed views over bytes ([`tensor`]), the registry's types
//! ([`registry`]), the families, and [`library`], which registers every family.

pub mod attention;
pub mod attr;
pub mod dtype;
pub mod elementwise;
pub mod error;
pub mod format;
pub mod gather;
pub mod ge;
mod library;
pub mod linalg;
pub mod loss;
pub mod nn;
pub mod reduce;
pub mod registry;
pub mod rnn;
pub mod shape;
pub(crate) mod simd;
pub mod slicing;
pub mod tensor;
#[cfg(test)]
pub(crate) mod testing;

pub use attr::{Attr, AttrMap, HostTensor, TensorBytes};
pub use dtype::DType;
pub use error::OpError;
pub use nn::epilogue::{
    ACTIVATION_ATTR as FUSED_ACTIVATION_ATTR, PARAMS_ATTR as FUSED_ACTIVATION_PARAMS_ATTR,
};
pub use nn::gemm::FUSED_BIAS_ATTR;
pub use nn::softmax::SCALE_ATTR as SOFTMAX_SCALE_ATTR;
pub use registry::{
    Attrs, Compute, ComputeAllocFn, ComputeFn, DECLARED_SHAPE_ATTR, DECLARED_SHAPE_OPS,
    GeContractFn, GeUse, INPUT_FORMATS_ATTR, InferCtx, InferFn, OpRegistry, OpSpec, Prepack,
    PrepackFn, ShapeValues, SpecialFn, SpecializeFn, TensorMeta, TranslateFn, Translation, UNKNOWN,
    meta, shape_values,
};
pub use tensor::{Buffer, Elem, Tensor, TensorMut, TensorRef};
#[cfg(test)]
pub(crate) use testing::{assert_close, i64s, infer_for_test, test_attrs};
