//! Why a model does not lower: [`LowerError`], and [`Unsupported`], one op rt2 cannot
//! lower, of which lowering reports every one at once.

use std::fmt;

use crate::exec::check::Problem;

/// The reason an op is unsupported when nothing at all can convert it.
pub const NO_CONVERTER: &str = "no converter or op library entry";

/// An op rt2 cannot lower.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// Path of the compute graph: the root's name, then `/<node>.<subgraph>` per level.
    pub graph: String,
    pub node: String,
    pub op_type: String,
    pub reason: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} ({})", self.graph, self.node, self.op_type)?;
        if self.reason != NO_CONVERTER {
            write!(f, ": {}", self.reason)?;
        }
        Ok(())
    }
}

/// Why a model does not lower.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LowerError {
    /// Ops rt2 has no converter for: every one of them, in graph order.
    #[error("{} unsupported op(s): {}", .0.len(), list(.0))]
    Unsupported(Vec<Unsupported>),
    /// A node the converters cannot make sense of (bad shapes, bad attributes).
    #[error("{graph}: node {node:?} ({op_type}): {message}")]
    Node {
        graph: String,
        node: String,
        op_type: String,
        message: String,
    },
    /// A graph-level problem (a cycle, a dangling edge).
    #[error("{graph}: {message}")]
    Graph { graph: String, message: String },
    /// The verifier rejected what a pass produced: a bug in rt2, not in the model.
    #[error("internal error after {pass}: {}", problem_list(.problems))]
    Internal {
        pass: &'static str,
        problems: Vec<Problem>,
    },
}

fn list(u: &[Unsupported]) -> String {
    u.iter()
        .map(|u| u.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn problem_list(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}
