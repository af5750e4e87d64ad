//! Lowering: ComputeGraph -> ExecuteGraph, and the passes over ExecuteGraphs.
//!
//! Architecture invariants: `lower` is pure and deterministic (same input, byte-identical
//! output); it uses `om`'s ComputeGraph, `exec`'s graph types and `npu`'s op registry, and
//! never `capture` or `cmd`.

pub mod attrs;
pub mod passes;
