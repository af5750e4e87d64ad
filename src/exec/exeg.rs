//! The `.exeg` file: rt2's own versioned protobuf of an [`ExecuteGraph`]
//! (`proto/exeg.proto`, documented in docs/EXEG.md).
//!
//! Contracts: [`encode`] is deterministic (same graph, same bytes) and always writes the
//! magic first, so every file starts with [`MAGIC_PREFIX`]. [`decode`] takes untrusted
//! bytes: it never panics, allocates nothing sized by an unchecked number from the file
//! (prost bounds every length by the bytes present), refuses format versions it does not
//! know, and runs [`check`] so that a decoded graph is one an engine may load.
//!
//! This module converts between the file's messages and the graph model; it does not run,
//! lower or print graphs.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::fmt;

use prost::Message;

use crate::exec::check::{Problem, check};
use crate::exec::graph::{
    ExecAttr, ExecGraph, ExecNode, ExecNodeId, ExecTensor, ExecuteGraph, GraphKind, KernelClass,
    ModelIo, Origin, Resources, ValueRef,
};
use crate::npu::DType;
use crate::proto::exeg as pb;

/// The value of `ExecuteGraphFile.magic`.
pub const MAGIC: &str = "rt2.exeg";

/// The bytes every `.exeg` file starts with: field 1, length 8, then [`MAGIC`].
pub const MAGIC_PREFIX: &[u8] = b"\x0a\x08rt2.exeg";

/// The value of `ExecuteGraphFile.end_marker`: "exeg" as a little-endian u32.
pub const END_MARKER: u32 = u32::from_le_bytes(*b"exeg");

/// The format version [`encode`] writes.
pub const FORMAT_VERSION: u32 = 1;

/// The format versions [`decode`] reads.
pub const SUPPORTED_VERSIONS: &[u32] = &[1];

/// Why an `.exeg` file (or its text form) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ExegError {
    /// The bytes do not start with [`MAGIC_PREFIX`], or field `magic` is not [`MAGIC`].
    #[error("not an .exeg file: at byte 0 expected {expected:?}, found {found:?}")]
    BadMagic { expected: String, found: String },
    /// The binary file does not end with the end marker: it was cut short.
    #[error(
        "truncated .exeg file: field end_marker is {found:#010x}, expected {:#010x} after {len} bytes",
        END_MARKER
    )]
    Truncated { len: usize, found: u32 },
    /// The file declares a version this reader does not know.
    #[error(
        "field format_version: version {found} is not supported, this reader supports {}",
        versions_list()
    )]
    UnsupportedVersion { found: u32 },
    /// The bytes are not a valid `ExecuteGraphFile` message.
    #[error("malformed .exeg protobuf")]
    Malformed {
        #[source]
        source: prost::DecodeError,
    },
    /// The text form does not parse as an `ExecuteGraphFile`.
    #[error("text form line {line}, column {column}: {source}")]
    Text {
        /// 1-based; 0 when the parser reported no position.
        line: usize,
        /// 1-based, in characters; 0 when the parser reported no position.
        column: usize,
        #[source]
        source: prost_reflect::text_format::ParseError,
    },
    /// The text form nests messages and lists deeper than the parser is allowed to recurse.
    #[error("text form line {line}, column {column}: nesting deeper than {limit} levels")]
    TooDeep {
        line: usize,
        column: usize,
        limit: usize,
    },
    /// The file decoded, but the graph breaks rules: every problem found, in graph order.
    #[error("invalid ExecuteGraph, {} problems:\n{}", problems.len(), ProblemList(problems))]
    Invalid { problems: Vec<Problem> },
}

fn versions_list() -> String {
    let v: Vec<String> = SUPPORTED_VERSIONS.iter().map(u32::to_string).collect();
    v.join(", ")
}

struct ProblemList<'a>(&'a [Problem]);

impl fmt::Display for ProblemList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "  {p}")?;
        }
        Ok(())
    }
}

/// Whether `bytes` start like an `.exeg` file.
pub fn is_exeg(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC_PREFIX)
}

/// Serializes `eg`; the same graph always gives the same bytes, starting with
/// [`MAGIC_PREFIX`].
pub fn encode(eg: &ExecuteGraph) -> Vec<u8> {
    to_file(eg).encode_to_vec()
}

/// Reads an `.exeg` file and checks the graph ([`check`]); every problem is listed in
/// [`ExegError::Invalid`].
pub fn decode(bytes: &[u8]) -> Result<ExecuteGraph, ExegError> {
    if !is_exeg(bytes) {
        let head = &bytes[..bytes.len().min(MAGIC_PREFIX.len())];
        return Err(ExegError::BadMagic {
            expected: String::from_utf8_lossy(MAGIC_PREFIX).into_owned(),
            found: String::from_utf8_lossy(head).into_owned(),
        });
    }
    let file =
        pb::ExecuteGraphFile::decode(bytes).map_err(|source| ExegError::Malformed { source })?;
    // The version decides the layout, so it is judged before the end marker.
    if file.magic == MAGIC
        && SUPPORTED_VERSIONS.contains(&file.format_version)
        && file.end_marker != END_MARKER
    {
        return Err(ExegError::Truncated {
            len: bytes.len(),
            found: file.end_marker,
        });
    }
    from_file(file)
}

/// `Ok` when [`check`] finds nothing, else every problem.
pub fn check_or_err(eg: &ExecuteGraph) -> Result<(), ExegError> {
    let problems = check(eg);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ExegError::Invalid { problems })
    }
}

/// The file message of `eg` (the text form prints it).
pub(crate) fn to_file(eg: &ExecuteGraph) -> pb::ExecuteGraphFile {
    pb::ExecuteGraphFile {
        magic: MAGIC.to_string(),
        format_version: FORMAT_VERSION,
        name: eg.name.clone(),
        init: Some(graph_to(&eg.init)),
        main: Some(graph_to(&eg.main)),
        deinit: Some(graph_to(&eg.deinit)),
        resources: Some(pb::Resources {
            streams: eg.resources.streams,
            events: eg.resources.events,
            notifies: eg.resources.notifies,
        }),
        inputs: eg.inputs.iter().map(io_to).collect(),
        outputs: eg.outputs.iter().map(io_to).collect(),
        multi_thread: eg.multi_thread,
        end_marker: END_MARKER,
    }
}

fn io_to(io: &ModelIo) -> pb::ModelIo {
    pb::ModelIo {
        name: io.name.clone(),
        dtype: io.dtype.map_or(String::new(), |d| d.name().to_string()),
        shape: io.shape.clone(),
    }
}

fn graph_to(g: &ExecGraph) -> pb::Graph {
    pb::Graph {
        name: g.name.clone(),
        nodes: g.nodes.iter().map(node_to).collect(),
        free_launch: g
            .free_launch
            .iter()
            .map(|(f, l)| pb::FreeLaunch {
                free: f.0,
                launch: l.0,
            })
            .collect(),
    }
}

fn class_to(c: KernelClass) -> pb::KernelClass {
    match c {
        KernelClass::Memory => pb::KernelClass::Memory,
        KernelClass::Launch => pb::KernelClass::Launch,
        KernelClass::Normal => pb::KernelClass::Normal,
    }
}

fn node_to(n: &ExecNode) -> pb::Node {
    pb::Node {
        name: n.name.clone(),
        kernel: n.kernel.clone(),
        class: class_to(n.class) as i32,
        inputs: n
            .inputs
            .iter()
            .map(|v| pb::ValueRef {
                node: v.node.0,
                output: v.output,
            })
            .collect(),
        outputs: n.outputs,
        control_inputs: n.control_inputs.iter().map(|c| c.0).collect(),
        // BTreeMap iteration: sorted by name, which keeps encoding deterministic.
        attrs: n
            .attrs
            .iter()
            .map(|(k, a)| pb::Attr {
                name: k.clone(),
                value: Some(attr_to(a)),
            })
            .collect(),
        origin: n.origin.as_ref().map(|o| pb::Origin {
            graph: o.graph.clone(),
            node: o.node.clone(),
            op_type: o.op_type.clone(),
            index: o.index,
        }),
        priority: n.priority,
        subgraphs: n.subgraphs.iter().map(graph_to).collect(),
    }
}

fn attr_to(a: &ExecAttr) -> pb::attr::Value {
    use pb::attr::Value as V;
    match a {
        ExecAttr::Int(i) => V::Int(*i),
        ExecAttr::Ints(v) => V::Ints(pb::IntList { values: v.clone() }),
        ExecAttr::Float(f) => V::Float(*f),
        ExecAttr::Floats(v) => V::Floats(pb::FloatList { values: v.clone() }),
        ExecAttr::Bool(b) => V::Bool(*b),
        ExecAttr::Str(s) => V::Str(s.clone()),
        ExecAttr::Strs(v) => V::Strs(pb::StringList { values: v.clone() }),
        ExecAttr::Bytes(b) => V::Bytes(b.clone()),
        ExecAttr::DType(d) => V::Dtype(d.name().to_string()),
        ExecAttr::Tensor(t) => V::Tensor(pb::Tensor {
            dtype: t.dtype.name().to_string(),
            shape: t.shape.clone(),
            data: t.data.clone(),
        }),
    }
}

/// Converts a file message to the graph model, then runs [`check`]: problems of both
/// steps are reported together.
pub(crate) fn from_file(file: pb::ExecuteGraphFile) -> Result<ExecuteGraph, ExegError> {
    if file.magic != MAGIC {
        return Err(ExegError::BadMagic {
            expected: MAGIC.to_string(),
            found: file.magic,
        });
    }
    if !SUPPORTED_VERSIONS.contains(&file.format_version) {
        return Err(ExegError::UnsupportedVersion {
            found: file.format_version,
        });
    }
    let mut cv = Converter::default();
    let resources = file.resources.unwrap_or_default();
    let eg = ExecuteGraph {
        name: file.name,
        init: cv.graph(file.init.unwrap_or_default(), GraphKind::Init.name()),
        main: cv.graph(file.main.unwrap_or_default(), GraphKind::Main.name()),
        deinit: cv.graph(file.deinit.unwrap_or_default(), GraphKind::DeInit.name()),
        resources: Resources {
            streams: resources.streams,
            events: resources.events,
            notifies: resources.notifies,
        },
        inputs: cv.ios(file.inputs, "inputs"),
        outputs: cv.ios(file.outputs, "outputs"),
        multi_thread: file.multi_thread,
    };
    let mut problems = cv.problems;
    problems.extend(check(&eg));
    if problems.is_empty() {
        Ok(eg)
    } else {
        Err(ExegError::Invalid { problems })
    }
}

/// File messages to model values, noting what does not convert instead of stopping.
#[derive(Default)]
struct Converter {
    problems: Vec<Problem>,
}

impl Converter {
    fn problem(&mut self, graph: &str, node: Option<(u32, &str)>, message: String) {
        self.problems.push(Problem {
            graph: graph.to_string(),
            node: node.map(|(i, n)| (i, n.to_string())),
            message,
        });
    }

    fn ios(&mut self, ios: Vec<pb::ModelIo>, field: &str) -> Vec<ModelIo> {
        let mut out = Vec::with_capacity(ios.len());
        for (i, io) in ios.into_iter().enumerate() {
            let dtype = if io.dtype.is_empty() {
                None
            } else {
                let d = DType::from_name(&io.dtype);
                if d.is_none() {
                    self.problem(
                        "model",
                        None,
                        format!(
                            "{field}[{i}] {:?} has unknown dtype {:?}",
                            io.name, io.dtype
                        ),
                    );
                }
                d
            };
            out.push(ModelIo {
                name: io.name,
                dtype,
                shape: io.shape,
            });
        }
        out
    }

    fn graph(&mut self, g: pb::Graph, path: &str) -> ExecGraph {
        let mut nodes = Vec::with_capacity(g.nodes.len());
        for (i, n) in g.nodes.into_iter().enumerate() {
            nodes.push(self.node(n, path, i as u32));
        }
        ExecGraph {
            name: g.name,
            nodes,
            free_launch: g
                .free_launch
                .iter()
                .map(|r| (ExecNodeId(r.free), ExecNodeId(r.launch)))
                .collect(),
        }
    }

    fn node(&mut self, n: pb::Node, path: &str, i: u32) -> ExecNode {
        let class = match pb::KernelClass::try_from(n.class) {
            Ok(pb::KernelClass::Memory) => KernelClass::Memory,
            Ok(pb::KernelClass::Launch) => KernelClass::Launch,
            Ok(pb::KernelClass::Normal) => KernelClass::Normal,
            Ok(pb::KernelClass::Unspecified) | Err(_) => {
                self.problem(
                    path,
                    Some((i, &n.name)),
                    format!("field class: {} is not a kernel class", n.class),
                );
                KernelClass::Normal
            }
        };
        let mut attrs = BTreeMap::new();
        for a in n.attrs {
            let value = match a.value {
                Some(v) => self.attr(v, path, (i, &n.name), &a.name),
                None => {
                    self.problem(
                        path,
                        Some((i, &n.name)),
                        format!("attribute {:?} has no value", a.name),
                    );
                    None
                }
            };
            match attrs.entry(a.name) {
                Entry::Occupied(e) => self.problem(
                    path,
                    Some((i, &n.name)),
                    format!("attribute {:?} appears twice", e.key()),
                ),
                Entry::Vacant(e) => {
                    if let Some(v) = value {
                        e.insert(v);
                    }
                }
            }
        }
        let sub_prefix = format!("{path}/{}", n.name);
        let mut subgraphs = Vec::with_capacity(n.subgraphs.len());
        for (s, g) in n.subgraphs.into_iter().enumerate() {
            let sub_path = if g.name.is_empty() {
                format!("{sub_prefix}.#{s}")
            } else {
                format!("{sub_prefix}.{}", g.name)
            };
            subgraphs.push(self.graph(g, &sub_path));
        }
        ExecNode {
            name: n.name,
            kernel: n.kernel,
            class,
            inputs: n
                .inputs
                .iter()
                .map(|v| ValueRef {
                    node: ExecNodeId(v.node),
                    output: v.output,
                })
                .collect(),
            outputs: n.outputs,
            control_inputs: n.control_inputs.iter().map(|&c| ExecNodeId(c)).collect(),
            attrs,
            origin: n.origin.map(|o| Origin {
                graph: o.graph,
                node: o.node,
                op_type: o.op_type,
                index: o.index,
            }),
            priority: n.priority,
            subgraphs,
        }
    }

    fn attr(
        &mut self,
        v: pb::attr::Value,
        path: &str,
        node: (u32, &str),
        key: &str,
    ) -> Option<ExecAttr> {
        use pb::attr::Value as V;
        let mut dtype = |name: &str| {
            let d = DType::from_name(name);
            if d.is_none() {
                self.problem(
                    path,
                    Some(node),
                    format!("attribute {key:?} has unknown dtype {name:?}"),
                );
            }
            d
        };
        Some(match v {
            V::Int(i) => ExecAttr::Int(i),
            V::Ints(l) => ExecAttr::Ints(l.values),
            V::Float(f) => ExecAttr::Float(f),
            V::Floats(l) => ExecAttr::Floats(l.values),
            V::Bool(b) => ExecAttr::Bool(b),
            V::Str(s) => ExecAttr::Str(s),
            V::Strs(l) => ExecAttr::Strs(l.values),
            V::Bytes(b) => ExecAttr::Bytes(b),
            V::Dtype(d) => ExecAttr::DType(dtype(&d)?),
            V::Tensor(t) => ExecAttr::Tensor(ExecTensor {
                dtype: dtype(&t.dtype)?,
                shape: t.shape,
                data: t.data,
            }),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::exec::testdata::sample;

    #[test]
    fn sample_is_valid() {
        let problems: Vec<String> = check(&sample()).iter().map(|p| p.to_string()).collect();
        assert_eq!(problems, Vec::<String>::new());
        assert!(check_or_err(&sample()).is_ok());
    }

    #[test]
    fn round_trip_is_equal_and_deterministic() {
        let eg = sample();
        let bytes = encode(&eg);
        assert!(bytes.starts_with(b"\x0a\x08rt2.exeg"));
        assert!(is_exeg(&bytes));
        assert_eq!(decode(&bytes).unwrap(), eg);
        assert_eq!(encode(&eg), bytes);
        assert_eq!(encode(&eg.clone()), bytes);
        // Re-encoding what was decoded gives the same bytes again.
        assert_eq!(encode(&decode(&bytes).unwrap()), bytes);
    }

    #[test]
    fn empty_graph_round_trips_and_starts_with_magic() {
        let eg = ExecuteGraph::default();
        let bytes = encode(&eg);
        assert!(is_exeg(&bytes));
        assert_eq!(decode(&bytes).unwrap(), eg);
    }

    #[test]
    fn bad_magic_is_refused() {
        let err = decode(b"\x0a\x08onnx.xyzmore").unwrap_err();
        assert!(matches!(&err, ExegError::BadMagic { found, .. } if found == "\n\x08onnx.xyz"));
        assert!(err.to_string().starts_with("not an .exeg file: at byte 0"));
        assert!(matches!(decode(b""), Err(ExegError::BadMagic { .. })));
        assert!(!is_exeg(b"\x0a\x08rt2.exe"));
        // A later field 1 overrides the first one in protobuf: the decoded magic is checked.
        let mut bytes = encode(&ExecuteGraph::default());
        bytes.extend_from_slice(b"\x0a\x03abc");
        match decode(&bytes) {
            Err(ExegError::BadMagic { found, expected }) => {
                assert_eq!((found.as_str(), expected.as_str()), ("abc", "rt2.exeg"))
            }
            other => panic!("expected BadMagic, got {other:?}"),
        }
    }

    #[test]
    fn newer_format_version_is_refused_naming_supported_ones() {
        let mut file = to_file(&sample());
        file.format_version = 2;
        let err = decode(&file.encode_to_vec()).unwrap_err();
        assert!(matches!(err, ExegError::UnsupportedVersion { found: 2 }));
        assert_eq!(
            err.to_string(),
            "field format_version: version 2 is not supported, this reader supports 1"
        );
    }

    #[test]
    fn malformed_protobuf_chains_prost_error() {
        let mut bytes = MAGIC_PREFIX.to_vec();
        bytes.extend_from_slice(&[0x22, 0xff, 0xff, 0xff, 0x0f]); // init, length 2^32-1
        let err = decode(&bytes).unwrap_err();
        assert!(matches!(err, ExegError::Malformed { .. }));
        assert!(std::error::Error::source(&err).is_some());
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encode(&sample());
        assert!(bytes.ends_with(b"\x7dexeg"));
        for len in 0..bytes.len() {
            let err = decode(&bytes[..len]).expect_err("a prefix decoded");
            if len >= MAGIC_PREFIX.len() + 2 {
                // Past magic and version every prefix is either cut mid-field or lacks the
                // end marker.
                assert!(
                    matches!(
                        err,
                        ExegError::Truncated { .. } | ExegError::Malformed { .. }
                    ),
                    "prefix of {len} bytes: {err}"
                );
            }
        }
        // The one prefix that ends on a field boundary right before the marker.
        let err = decode(&bytes[..bytes.len() - 5]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "truncated .exeg file: field end_marker is 0x00000000, expected 0x67657865 after {} bytes",
                bytes.len() - 5
            )
        );
    }

    #[test]
    fn unconvertible_fields_are_problems() {
        let mut file = to_file(&sample());
        let main = file.main.as_mut().unwrap();
        main.nodes[0].class = 0;
        main.nodes[1].class = 9;
        main.nodes[3].attrs[8].value = Some(pb::attr::Value::Dtype("float8".into()));
        main.nodes[3].attrs[0].value = None;
        let dup = main.nodes[3].attrs[1].clone();
        main.nodes[3].attrs.push(dup);
        file.inputs[0].dtype = "complex".into();
        let Err(ExegError::Invalid { problems }) = decode(&file.encode_to_vec()) else {
            panic!("expected Invalid");
        };
        let got: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            got,
            [
                "Main: node 0 \"x\": field class: 0 is not a kernel class",
                "Main: node 1 \"w_dev\": field class: 9 is not a kernel class",
                "Main: node 3 \"conv1_launch\": attribute \"a_int\" has no value",
                "Main: node 3 \"conv1_launch\": attribute \"i_dtype\" has unknown dtype \"float8\"",
                "Main: node 3 \"conv1_launch\": attribute \"b_ints\" appears twice",
                "model: inputs[0] \"x\" has unknown dtype \"complex\"",
            ]
        );
    }

    #[test]
    fn invalid_graph_lists_every_problem_in_the_error() {
        let mut eg = sample();
        eg.main.nodes[2].kernel = "Bogus".into();
        eg.deinit.nodes[1].kernel = "Nope".into();
        let err = decode(&encode(&eg)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid ExecuteGraph, 2 problems:\n  \
             Main: node 2 \"conv1_out\": unknown kernel type \"Bogus\"\n  \
             DeInit: node 1 \"destroy\": unknown kernel type \"Nope\""
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
            let mut framed = MAGIC_PREFIX.to_vec();
            framed.extend_from_slice(&bytes);
            let _ = decode(&framed);
        }

        #[test]
        fn random_mutations_of_a_file_never_panic(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)
        ) {
            let mut bytes = encode(&sample());
            for (at, b) in edits {
                let i = at.index(bytes.len());
                bytes[i] = b;
            }
            let _ = decode(&bytes);
        }
    }
}
