//! Model files: the OM container, GE IR ComputeGraphs (binary, text dump, JSON), ONNX
//! import, and the in-memory ComputeGraph they all meet in.
//!
//! Architecture invariants: `om` uses nothing else of rt2 (it sits at the start of the
//! pipeline) and does no IO: every reader takes bytes or text and every writer returns
//! them, so the command layer owns files and can refuse to leave partial output behind.
//! Parsing untrusted bytes never panics; every error names the place it was found.

pub mod compress;
pub mod container;
pub mod dot;
pub mod dtype;
pub mod error;
pub mod file;
pub mod filter;
pub mod graph;
pub mod inout;
pub mod intern;
pub mod ir;
pub mod json;
pub mod kernel_store;
pub mod model_writer;
pub mod om_writer;
pub mod onnx;
pub mod root_model;
pub mod sorted_map;
pub mod summary;
pub mod task;
pub mod testdata;
pub mod testdata_text;
pub mod text;
pub mod verify;
pub mod weights;
pub mod wire;

pub use container::{OmFile, OmHeader, OmModel, Partition, PartitionType, TableFormat};
pub use dtype::DataType;
pub use error::{OmError, Place, Result};
pub use graph::{ComputeGraph, ComputeModel, ComputeNode, NodeId, OutPort, Shape, TensorDesc};
