//! Passes over ExecGraphs, each followed by the verifier in tests and debug builds:
//! dead-node elimination, topological sort, priority calculation.

pub mod dce;
pub mod priority;
pub mod topo;
