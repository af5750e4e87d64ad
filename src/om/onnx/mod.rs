//! ONNX import (the ATC step): `onnx.ModelProto` bytes in, a GE IR `ge.proto.ModelDef`
//! out, laid out by GE's own conventions (docs/ONNX_IMPORT.md has the full rules).
//!
//! - `graph[0]` is the root, then every subgraph flat; a parent op lists its subgraphs in
//!   `subgraph_name` as `<op>_<k>_<attr>` (GE's `GenUniqueSubgraphName`), and subgraph
//!   ops are named `<subgraph>/<node>`.
//! - Real graph inputs become `Data` (attr `index`), initializers and `Constant` nodes
//!   become `Const` (attr `value`), each node one op, graph outputs one `NetOutput`.
//! - Every op is read with its ONNX attributes under their ONNX names, plus the opset
//!   defaults spelled out (see `ops::apply_defaults`), `original_type`
//!   (`ai.onnx::13::Softmax`) and `onnx_opset`; then GE's ONNX plugin for its op, if
//!   one maps it, makes it the GE op ATC's graph holds ([`plugins`]: Conv -> Conv2D,
//!   MaxPool -> MaxPoolV3, ...), unless `ImportOptions::onnx_types`.
//! - Unknown dims are `-1` with their names in the desc attr [`SYMBOLIC_DIMS_ATTR`];
//!   unknown rank is `[-2]`.
//!
//! Architecture invariants: no IO and no panics on any input; the same bytes always give
//! the same `ModelDef`; unknown ops are carried through, not rejected. What is rejected
//! (dangling inputs, values defined twice, external or sparse data, domains without an
//! opset) is an error naming the graph and node.

mod import;
mod ops;
pub mod plugins;
mod tensor;

pub mod builder;

#[cfg(test)]
mod tests;

pub use import::{ImportOptions, LOOP_CARRIED, PARENT_NODE_INDEX, import, import_typed};
pub use ops::NCHW_OPS;
pub use tensor::SYMBOLIC_DIMS_ATTR;

/// An ONNX `TensorProto` from its bytes (a backend test's `input_0.pb`), as a model tensor
/// with raw little-endian data, whatever field ONNX held it in. `place` names the file in
/// errors.
pub fn read_tensor(
    bytes: &[u8],
    place: &str,
) -> crate::om::error::Result<crate::om::graph::Tensor> {
    use prost::Message;
    let place = crate::om::error::Place::new(place);
    crate::om::error::check_nesting(bytes, "onnx.TensorProto", &place)?;
    let t = crate::proto::onnx::TensorProto::decode(bytes).map_err(|e| {
        crate::om::error::OmError::graph(place.clone(), format!("not an ONNX tensor: {e}"))
    })?;
    tensor::tensor_def(&t, &|| place.clone()).map(crate::om::ir::convert_tensor)
}
