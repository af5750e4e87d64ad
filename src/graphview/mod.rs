//! Views of large graphs, whatever the graph: the scope of a view (one graph, the
//! subgraphs of one node), a node's neighbourhood, and folding runs of nodes into summary
//! nodes under a node budget, all on a [`fold::Flat`] graph of numbered nodes and edges.
//!
//! A leaf like `ops`: it uses nothing of rt2, so that `om` (ComputeGraphs) and `exec`
//! (ExecuteGraphs), which must not use each other, share one algorithm. Each flattens its
//! own graph, asks [`focus::plan`] what to show, and builds the smaller graph itself.

pub mod focus;
pub mod fold;
