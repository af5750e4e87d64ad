//! Views of an ExecuteGraph: Graphviz DOT, a readable JSON, and a text form that reads
//! back exactly (the protobuf text format of the `.exeg` file message); and the filters
//! that make views of large graphs (one subgraph, a node's neighbourhood, folding into
//! summary nodes).
//!
//! Every view is deterministic: ids are positional (graph path and node index), attributes
//! come in name order, and nothing depends on addresses or hash order. The views only
//! format; they touch no files and the terminal (that is `cmd`'s job).

pub mod dot;
pub mod filter;
pub mod json;
pub mod select;
pub mod text;

pub use dot::to_dot;
pub use json::to_json;
pub use select::GraphSelect;
pub use text::{from_text, to_text};
