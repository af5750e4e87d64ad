//! The error type of every reader and writer in `om`.
//!
//! Library errors name the *place* (byte offset, model index, partition, graph, node,
//! field, text line, JSON path); the command layer prefixes the file name. Messages are
//! lowercase without a trailing period; sources are chained, not stringified.

use std::fmt;

/// Where in a file an error was found. Rendered as a short prefix such as
/// `offset 260: model 1: partition 2 (TASK_INFO)` or `graph "root": node "conv1"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place(pub String);

impl Place {
    pub fn new(s: impl Into<String>) -> Self {
        Place(s.into())
    }
    pub fn offset(offset: u64) -> Self {
        Place(format!("offset {offset}"))
    }
    pub fn node(graph: &str, node: &str) -> Self {
        Place(format!("graph {graph:?}: node {node:?}"))
    }
    pub fn graph(graph: &str) -> Self {
        Place(format!("graph {graph:?}"))
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Everything that can go wrong reading, converting or writing a model file.
#[derive(Debug, thiserror::Error)]
pub enum OmError {
    /// The bytes end before a structure that must be there.
    #[error("{place}: truncated: {what} needs {need} bytes, {have} left")]
    Truncated {
        place: Place,
        what: String,
        need: u64,
        have: u64,
    },
    /// A structural fault in a binary container (bad magic, counts, sizes).
    #[error("{place}: {msg}")]
    Container { place: Place, msg: String },
    /// A protobuf payload that does not decode.
    #[error("{place}: malformed protobuf {message}")]
    Protobuf {
        place: Place,
        message: &'static str,
        #[source]
        source: prost::DecodeError,
    },
    /// A protobuf payload nested deeper than rt2 decodes (`proto::nesting`).
    #[error("{place}: {message}")]
    Nesting {
        place: Place,
        message: &'static str,
        #[source]
        source: crate::proto::nesting::TooDeep,
    },
    /// Protobuf text format that does not parse; `line` and `column` are 1-based.
    #[error("line {line}, column {column}: {msg}")]
    Text {
        line: usize,
        column: usize,
        msg: String,
    },
    /// JSON that does not parse or does not fit the schema; `path` is a JSON path (`$.graph[0].op[2]`).
    #[error("{path}: {msg}")]
    Json { path: String, msg: String },
    /// A graph that does not hold together (dangling edge, missing subgraph, bad attribute).
    #[error("{place}: {msg}")]
    Graph { place: Place, msg: String },
    /// A valid file that uses something rt2 does not support (encryption, signatures, OM2).
    #[error("{place}: not supported: {msg}")]
    Unsupported { place: Place, msg: String },
    /// Content of no kind rt2 recognises.
    #[error("not a model file rt2 knows: {msg}")]
    UnknownKind { msg: String },
    /// An error found inside a part of a file (a model of an OM, a nested OM); the part is
    /// the place, the error itself is the source.
    #[error("{place}")]
    Within {
        place: Place,
        #[source]
        source: Box<OmError>,
    },
    /// A graph the verifier rejected; every problem is listed.
    #[error("{} problem(s): {}", .0.len(), .0.join("; "))]
    Invalid(Vec<String>),
}

impl OmError {
    pub fn container(place: Place, msg: impl Into<String>) -> Self {
        OmError::Container {
            place,
            msg: msg.into(),
        }
    }
    pub fn graph(place: Place, msg: impl Into<String>) -> Self {
        OmError::Graph {
            place,
            msg: msg.into(),
        }
    }
    /// Wraps an error found inside the part of the file named by `place`.
    pub fn within(place: Place, source: OmError) -> Self {
        OmError::Within {
            place,
            source: Box::new(source),
        }
    }
    pub fn unsupported(place: Place, msg: impl Into<String>) -> Self {
        OmError::Unsupported {
            place,
            msg: msg.into(),
        }
    }
}

/// Checks that `bytes`, read as protobuf message `message` (its full name), nest no
/// deeper than rt2 decodes, before they are decoded; `place` names them in the error.
pub(crate) fn check_nesting(bytes: &[u8], message: &'static str, place: &Place) -> Result<()> {
    crate::proto::nesting::check(bytes, message).map_err(|source| OmError::Nesting {
        place: place.clone(),
        message,
        source,
    })
}

/// The result type of `om`.
pub type Result<T, E = OmError> = std::result::Result<T, E>;
