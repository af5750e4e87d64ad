//! rt2: a toolchain for Ascend Graph Engine models and runtime 2, without an NPU.
//!
//! Data flows one way: bytes -> [`om`] (ComputeGraph) -> lower (ExecuteGraph) -> [`exec`]
//! -> [`npu`] -> [`ops`]. [`cmd`] is the only module that touches files and the terminal.
//!
//! The documentation is written for the people who work on rt2, internals included: build
//! it with `cargo doc --document-private-items`, where links to private items resolve.
#![allow(rustdoc::private_intra_doc_links)]

pub mod capture;
pub mod cmd;
pub mod conform;
pub mod exec;
pub mod formats;
pub mod fuzz;
pub mod graphview;
pub mod lower;
pub mod npu;
pub mod om;
pub mod ops;
pub mod proto;
pub mod timing;
