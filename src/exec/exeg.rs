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

use std::fmt;
use std::sync::{Arc, Mutex};

use prost::Message;
use rayon::prelude::*;

use crate::exec::check::{Problem, check};
use crate::exec::graph::{
    ExecTensor, ExecuteGraph, GraphKind, KernelAttr, KernelClass, KernelGraph, KernelNode,
    KernelNodeId, ModelIo, Origin, Resources,
};
use crate::exec::kernel_types;
use crate::exec::wire::{self, NodeRest, Source, next_field, read_node};
use crate::ops::DType;
use crate::ops::attr::AttrKey;
use crate::proto::exeg as pb;

/// The encoder's and decoder's lookup maps: foldhash, not SipHash, one lookup or more per
/// node; randomly seeded, since the decoder's keys come from the file.
type HashMap<K, V> = foldhash::HashMap<K, V>;

/// The value of `ExecuteGraphFile.magic`.
pub const MAGIC: &str = "rt2.exeg";

/// The bytes every `.exeg` file starts with: field 1, length 8, then [`MAGIC`].
pub const MAGIC_PREFIX: &[u8] = b"\x0a\x08rt2.exeg";

/// The value of `ExecuteGraphFile.end_marker`: "exeg" as a little-endian u32.
pub const END_MARKER: u32 = u32::from_le_bytes(*b"exeg");

/// The format version [`encode`] writes. Version 2 (rt2 0.x, the first with `rt2 lower`)
/// gave `NetOutput` a (shape, memory) pair per output and added the file-level tables; a
/// version-1 file would be misread, so it is refused. Version 3 types an op kernel's
/// operand element types (`_in_dtypes`, `_out_dtypes`) as a `dtypes` attribute, which a
/// version-2 reader would not know.
pub const FORMAT_VERSION: u32 = 3;

/// The format versions [`decode`] reads. A version-2 file's operand types, written as
/// comma-separated names in a string, are read as the `dtypes` attribute they are now.
pub const SUPPORTED_VERSIONS: &[u32] = &[2, 3];

/// The attributes version 2 wrote as comma-separated dtype names.
const V2_DTYPE_LISTS: &[&str] = &["_in_dtypes", "_out_dtypes"];

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
    /// The binary file nests messages deeper than rt2 decodes (`proto::nesting`).
    #[error(transparent)]
    Nesting(crate::proto::nesting::TooDeep),
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
pub fn encode<'a>(eg: &'a ExecuteGraph) -> Vec<u8> {
    // The graphs by hand (`wire`), the rest by prost, in field-number order: exactly the
    // bytes prost writes for `to_file_as(eg, Form::Tables)` (a test checks), without a
    // protobuf struct per node.
    let mut t = Tables {
        form: Form::Tables,
        ..Default::default()
    };
    let head = pb::ExecuteGraphFile {
        magic: MAGIC.to_string(),
        format_version: FORMAT_VERSION,
        name: eg.name.clone(),
        ..Default::default()
    };
    let mut out = head.encode_to_vec();
    // Room for every graph at a generous size per node (lowering's nodes encode in some
    // 60 bytes): the file is written once, not copied as it grows. Capacity not written
    // to is never touched.
    let nodes: usize = [&eg.init, &eg.main, &eg.deinit]
        .iter()
        .map(|g| g.nodes.len())
        .sum();
    out.reserve(96 * nodes + 4096);
    for (tag, g) in (4u32..).zip([&eg.init, &eg.main, &eg.deinit]) {
        prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, &mut out);
        // Each graph is written in its place, and its length (known only after) is put
        // in front of it: moving one graph's bytes by the few bytes of a varint costs
        // less than writing every graph into a buffer of its own and copying it over.
        let start = out.len();
        wire::put_graph(&mut out, g, &mut |n: &'a KernelNode| {
            (
                t.kernel_index(&n.kernel),
                t.attrs_index(&n.attrs),
                n.origin.as_ref().map_or(0, |o| t.origin_index(o)),
            )
        });
        let mut len = Vec::with_capacity(10);
        prost::encoding::encode_varint((out.len() - start) as u64, &mut len);
        out.splice(start..start, len);
    }
    let tail = pb::ExecuteGraphFile {
        origins: t.origins,
        kernels: t.kernels,
        attr_sets: t.attr_sets,
        ..file_fields(eg)
    };
    out.reserve(tail.encoded_len());
    tail.encode(&mut out).expect("a Vec grows as needed");
    out
}

/// The file fields after the graphs (7 to 10 and the end marker), tables left empty.
fn file_fields(eg: &ExecuteGraph) -> pb::ExecuteGraphFile {
    pb::ExecuteGraphFile {
        resources: Some(pb::Resources {
            streams: eg.resources.streams,
            events: eg.resources.events,
            notifies: eg.resources.notifies,
        }),
        inputs: eg.inputs.iter().map(io_to).collect(),
        outputs: eg.outputs.iter().map(io_to).collect(),
        multi_thread: eg.multi_thread,
        end_marker: END_MARKER,
        ..Default::default()
    }
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
    crate::proto::nesting::check(bytes, "rt2.exeg.ExecuteGraphFile").map_err(ExegError::Nesting)?;
    // The three graphs are decoded node by node, straight into the graph model; the rest
    // of the file (names, tables, counts) by prost as a whole. A file whose wire layout the
    // fast path does not take (a graph field given twice, which protobuf merges; anything
    // malformed) goes through prost whole, which merges or names the error.
    let (file, graphs, origins) = match split_graphs(bytes) {
        Some((rest, graphs, origins)) => {
            // Field by field: protobuf merges a message's fields in order, so this is the
            // decode of their concatenation, without copying them (the attribute sets
            // hold every constant tensor) into one buffer first.
            let mut file = pb::ExecuteGraphFile::default();
            for field in rest {
                file.merge(field)
                    .map_err(|source| ExegError::Malformed { source })?;
            }
            let origins = origins
                .par_iter()
                .map(|o| match wire::read_origin(o) {
                    Some(o) => Ok(Arc::new(o)),
                    // prost names what is wrong (or takes what the reader does not).
                    None => pb::Origin::decode(*o).map(origin_from),
                })
                .collect::<Result<_, _>>()
                .map_err(|source| ExegError::Malformed { source })?;
            (file, graphs, origins)
        }
        None => {
            let mut file = pb::ExecuteGraphFile::decode(bytes)
                .map_err(|source| ExegError::Malformed { source })?;
            let graphs = [file.init.take(), file.main.take(), file.deinit.take()]
                .map(|g| Source::Message(g.unwrap_or_default()));
            let origins = origins_of(&mut file);
            (file, graphs, origins)
        }
    };
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
    from_parts(file, graphs, origins)
}

/// The file's fields but its three graphs and its origin table (each field's key and
/// payload), the graphs' wire bytes, and the origins' (one entry per compute node:
/// decoded in parallel too).
type Split<'a> = (Vec<&'a [u8]>, [Source<'a>; 3], Vec<&'a [u8]>);

fn split_graphs(mut buf: &[u8]) -> Option<Split<'_>> {
    let mut rest = Vec::new();
    let mut graphs: [Option<&[u8]>; 3] = [None; 3];
    let mut origins = Vec::new();
    while !buf.is_empty() {
        let f = next_field(&mut buf)?;
        match f.tag {
            11 if f.wire == prost::encoding::WireType::LengthDelimited => origins.push(f.payload),
            4..=6 if f.wire == prost::encoding::WireType::LengthDelimited => {
                let slot = &mut graphs[f.tag as usize - 4];
                if slot.is_some() {
                    return None;
                }
                *slot = Some(f.payload);
            }
            _ => rest.push(f.raw),
        }
    }
    Some((
        rest,
        graphs.map(|g| Source::Wire(g.unwrap_or_default())),
        origins,
    ))
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

/// How a node's kernel type, attributes and origin are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Form {
    /// In the node: the text form, for people.
    #[default]
    Inline,
    /// As an index into a file-level table, one entry per distinct value: the binary form.
    /// A model's launches share a handful of kernel types and attribute sets, and the
    /// kernel calls of one compute node share its origin, so the tables make a large file
    /// a fraction of the size and a loaded graph keeps one copy of each.
    Tables,
}

/// The file message of `eg` in the inline form (the text form prints it).
pub(crate) fn to_file(eg: &ExecuteGraph) -> pb::ExecuteGraphFile {
    to_file_as(eg, Form::Inline)
}

fn to_file_as(eg: &ExecuteGraph, form: Form) -> pb::ExecuteGraphFile {
    let mut t = Tables {
        form,
        ..Default::default()
    };
    let init = Some(t.graph_to(&eg.init));
    let main = Some(t.graph_to(&eg.main));
    let deinit = Some(t.graph_to(&eg.deinit));
    pb::ExecuteGraphFile {
        origins: t.origins,
        kernels: t.kernels,
        attr_sets: t.attr_sets,
        magic: MAGIC.to_string(),
        format_version: FORMAT_VERSION,
        name: eg.name.clone(),
        init,
        main,
        deinit,
        ..file_fields(eg)
    }
}

fn io_to(io: &ModelIo) -> pb::ModelIo {
    pb::ModelIo {
        name: io.name.clone(),
        dtype: io.dtype.map_or(String::new(), |d| d.name().to_string()),
        shape: io.shape.clone(),
        weight: io.weight,
    }
}

/// The file-level tables as they are filled (binary form): each entry once, in first-use
/// order, so encoding stays deterministic.
#[derive(Default)]
struct Tables<'a> {
    form: Form,
    origins: Vec<pb::Origin>,
    /// By shared origin: lowering makes one per compute node, and a text form read back
    /// shares equal ones again (see `Converter::inline_origins`).
    origin_at: HashMap<*const Origin, u32>,
    _graph: std::marker::PhantomData<&'a KernelGraph>,
    kernels: Vec<String>,
    kernel_at: HashMap<String, u32>,
    attr_sets: Vec<pb::AttrSet>,
    /// By shared set, then by value: sets lowering made separately but equal become one
    /// entry too. By value bit for bit ([`AttrKey`]), not by encoded bytes: a key of
    /// encoded bytes would hold a second copy of every constant tensor.
    attrs_at: HashMap<usize, u32>,
    attrs_by_value: HashMap<AttrKey, u32>,
}

fn attrs_to(a: &crate::ops::AttrMap) -> Vec<pb::Attr> {
    // Sorted by name, which keeps encoding deterministic.
    a.iter()
        .map(|(k, a)| pb::Attr {
            name: k.clone(),
            value: Some(attr_to(a)),
        })
        .collect()
}

impl<'a> Tables<'a> {
    /// 1 + the table index of `o`, 0 for none.
    fn origin_index(&mut self, o: &'a Arc<Origin>) -> u32 {
        let table = &mut self.origins;
        *self.origin_at.entry(Arc::as_ptr(o)).or_insert_with(|| {
            table.push(origin_to(o));
            table.len() as u32
        })
    }

    fn kernel_index(&mut self, k: &str) -> u32 {
        if let Some(&i) = self.kernel_at.get(k) {
            return i;
        }
        self.kernels.push(k.to_string());
        let i = self.kernels.len() as u32;
        self.kernel_at.insert(k.to_string(), i);
        i
    }

    fn attrs_index(&mut self, a: &crate::ops::AttrMap) -> u32 {
        let Some(id) = a.identity() else { return 0 };
        if let Some(&i) = self.attrs_at.get(&id) {
            return i;
        }
        let key = AttrKey(a.clone());
        let i = match self.attrs_by_value.get(&key) {
            Some(&i) => i,
            None => {
                self.attr_sets.push(pb::AttrSet { attrs: attrs_to(a) });
                let i = self.attr_sets.len() as u32;
                self.attrs_by_value.insert(key, i);
                i
            }
        };
        self.attrs_at.insert(id, i);
        i
    }

    fn graph_to(&mut self, g: &'a KernelGraph) -> pb::Graph {
        pb::Graph {
            name: g.name.clone(),
            nodes: g.nodes.iter().map(|n| self.node_to(n)).collect(),
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

    fn node_to(&mut self, n: &'a KernelNode) -> pb::Node {
        let mut node = pb::Node {
            name: n.name.to_string(),
            class: wire::class_number(n.class),
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
            priority: n.priority,
            subgraphs: n.subgraphs.iter().map(|g| self.graph_to(g)).collect(),
            ..Default::default()
        };
        match self.form {
            Form::Inline => {
                node.kernel = n.kernel.to_string();
                node.attrs = attrs_to(&n.attrs);
                node.origin = n.origin.as_deref().map(origin_to);
            }
            Form::Tables => {
                node.kernel_index = self.kernel_index(&n.kernel);
                node.attrs_index = self.attrs_index(&n.attrs);
                node.origin_index = n.origin.as_ref().map_or(0, |o| self.origin_index(o));
            }
        }
        node
    }
}

fn origin_to(o: &Origin) -> pb::Origin {
    pb::Origin {
        graph: o.graph.to_string(),
        node: o.node.to_string(),
        op_type: o.op_type.to_string(),
        index: o.index,
    }
}

fn attr_to(a: &KernelAttr) -> pb::attr::Value {
    use pb::attr::Value as V;
    match a {
        KernelAttr::Int(i) => V::Int(*i),
        KernelAttr::Ints(v) => V::Ints(pb::IntList { values: v.clone() }),
        KernelAttr::Float(f) => V::Float(*f),
        KernelAttr::Floats(v) => V::Floats(pb::FloatList { values: v.clone() }),
        KernelAttr::Bool(b) => V::Bool(*b),
        KernelAttr::Str(s) => V::Str(s.clone()),
        KernelAttr::Strs(v) => V::Strs(pb::StringList { values: v.clone() }),
        KernelAttr::Bytes(b) => V::Bytes(b.clone()),
        KernelAttr::DType(d) => V::Dtype(d.name().to_string()),
        KernelAttr::DTypes(v) => V::Dtypes(pb::DTypeList {
            values: v
                .iter()
                .map(|d| d.map_or_else(String::new, |d| d.name().to_string()))
                .collect(),
        }),
        KernelAttr::Tensor(t) => V::Tensor(pb::Tensor {
            dtype: t.dtype.name().to_string(),
            shape: t.shape.clone(),
            data: t.data.to_bytes(),
        }),
    }
}

/// Converts a file message to the graph model, then runs [`check`]: problems of both
/// steps are reported together.
pub(crate) fn from_file(mut file: pb::ExecuteGraphFile) -> Result<ExecuteGraph, ExegError> {
    let graphs = [file.init.take(), file.main.take(), file.deinit.take()]
        .map(|g| Source::Message(g.unwrap_or_default()));
    let origins = origins_of(&mut file);
    from_parts(file, graphs, origins)
}

fn origin_of(o: pb::Origin) -> Origin {
    Origin {
        graph: o.graph.into(),
        node: o.node.into(),
        op_type: o.op_type.into(),
        index: o.index,
    }
}

fn origin_from(o: pb::Origin) -> Arc<Origin> {
    Arc::new(origin_of(o))
}

/// The file's origin table, taken out of `file` and converted (one entry per compute node:
/// in parallel).
fn origins_of(file: &mut pb::ExecuteGraphFile) -> Vec<Arc<Origin>> {
    std::mem::take(&mut file.origins)
        .into_par_iter()
        .map(origin_from)
        .collect()
}

/// The file's graphs and converted origin table (the file's own `origins` is not read).
fn from_parts(
    file: pb::ExecuteGraphFile,
    graphs: [Source; 3],
    origins: Vec<Arc<Origin>>,
) -> Result<ExecuteGraph, ExegError> {
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
    let mut tables = FileTables {
        origins,
        kernels: file.kernels.into_iter().map(kernel_types::intern).collect(),
        attr_sets: Vec::new(),
    };
    let empty = FileTables::default();
    let v2 = file.format_version == 2;
    let mut cv = Converter {
        t: &empty,
        problems: Vec::new(),
        inline_origins: HashMap::default(),
        local_attrs: HashMap::default(),
        v2,
    };
    for (k, set) in file.attr_sets.into_iter().enumerate() {
        let a = cv.attr_set(set.attrs, &format!("attr_sets[{k}]"), None);
        tables.attr_sets.push(a);
    }
    let mut cv = Converter {
        t: &tables,
        problems: cv.problems,
        inline_origins: HashMap::default(),
        local_attrs: HashMap::default(),
        v2,
    };
    let resources = file.resources.unwrap_or_default();
    let [init, main, deinit] = graphs;
    let init = cv.source(init, GraphKind::Init.name())?;
    let main = cv.source(main, GraphKind::Main.name())?;
    let deinit = cv.source(deinit, GraphKind::DeInit.name())?;
    let eg = ExecuteGraph {
        name: file.name,
        init,
        main,
        deinit,
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

/// The file's tables, converted once and shared by the nodes that refer to them.
#[derive(Default)]
struct FileTables {
    origins: Vec<Arc<Origin>>,
    kernels: Vec<std::borrow::Cow<'static, str>>,
    attr_sets: Vec<crate::ops::AttrMap>,
}

/// File messages to model values, noting what does not convert instead of stopping.
struct Converter<'t> {
    t: &'t FileTables,
    problems: Vec<Problem>,
    /// Origins written inline (the text form), shared again by value: the kernel calls
    /// of one compute node share one, as lowering made them.
    inline_origins: HashMap<Origin, Arc<Origin>>,
    /// This converter's copies of the attribute sets its nodes use, by table index.
    local_attrs: HashMap<u32, crate::ops::AttrMap>,
    /// Whether the file is of version 2, whose dtype lists are strings.
    v2: bool,
}

/// Nodes per task when a large graph's nodes are converted in parallel.
const PARALLEL_CHUNK: usize = 4096;

impl Converter<'_> {
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
                weight: io.weight,
            });
        }
        out
    }

    fn source(&mut self, g: Source, path: &str) -> Result<KernelGraph, ExegError> {
        match g {
            Source::Message(g) => Ok(self.graph(g, path)),
            Source::Wire(bytes) => self.graph_wire(bytes, path),
        }
    }

    /// A graph from its wire bytes, one node message at a time: no vector of decoded node
    /// messages is built and then moved, which would dominate loading a large file.
    fn graph_wire(&mut self, mut buf: &[u8], path: &str) -> Result<KernelGraph, ExegError> {
        let whole = buf;
        let mut name = String::new();
        let mut nodes_wire = Vec::new();
        let mut free_launch = Vec::new();
        while !buf.is_empty() {
            let Some(f) = next_field(&mut buf) else {
                // prost names what is wrong (or takes what the fast path does not).
                return pb::Graph::decode(whole)
                    .map(|g| self.graph(g, path))
                    .map_err(|source| ExegError::Malformed { source });
            };
            match f.tag {
                2 if f.wire == prost::encoding::WireType::LengthDelimited => {
                    nodes_wire.push(f.payload)
                }
                // Name and relations are small: prost decodes (and merges) them.
                _ => {
                    let part = pb::Graph::decode(f.raw)
                        .map_err(|source| ExegError::Malformed { source })?;
                    if !part.name.is_empty() {
                        name = part.name;
                    }
                    free_launch.extend(
                        part.free_launch
                            .iter()
                            .map(|r| (KernelNodeId(r.free), KernelNodeId(r.launch))),
                    );
                }
            }
        }
        // Nodes convert independently, so a large graph is spread over the cores, each
        // node written straight into its place in the graph's array (no per-chunk arrays
        // copied together afterwards: at this size, fresh pages cost as much as the work).
        // Problems and decode errors are rare; they go through a lock, tagged with the
        // node, and are put back in node order.
        let (t, v2) = (self.t, self.v2);
        let problems: Mutex<Vec<(u32, Vec<Problem>)>> = Mutex::new(Vec::new());
        let failed: Mutex<Option<(u32, prost::DecodeError)>> = Mutex::new(None);
        let mut nodes = Vec::with_capacity(nodes_wire.len());
        nodes_wire
            .par_iter()
            .with_min_len(PARALLEL_CHUNK)
            .enumerate()
            .map_init(
                || Converter {
                    t,
                    problems: Vec::new(),
                    inline_origins: HashMap::default(),
                    local_attrs: HashMap::default(),
                    v2,
                },
                |cv, (i, w)| {
                    let i = i as u32;
                    let mut node = KernelNode::default();
                    let rest = match read_node(w, &mut node) {
                        Some(r) => Ok(r),
                        // prost names what is wrong (or takes what this reader does not).
                        None => pb::Node::decode(*w).map(|m| {
                            let (n, r) = wire::from_message(m);
                            node = n;
                            r
                        }),
                    };
                    match rest.map(|r| cv.node(&mut node, r, path, i)) {
                        Ok(Ok(())) => {}
                        Ok(Err(ExegError::Malformed { source })) | Err(source) => {
                            let mut f = failed.lock().unwrap_or_else(|e| e.into_inner());
                            if f.as_ref().is_none_or(|(at, _)| i < *at) {
                                *f = Some((i, source));
                            }
                        }
                        Ok(Err(_)) => unreachable!("node conversion fails only on malformed bytes"),
                    }
                    if !cv.problems.is_empty() {
                        problems
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((i, std::mem::take(&mut cv.problems)));
                    }
                    node
                },
            )
            .collect_into_vec(&mut nodes);
        if let Some((_, source)) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(ExegError::Malformed { source });
        }
        let mut problems = problems.into_inner().unwrap_or_else(|e| e.into_inner());
        problems.sort_by_key(|(i, _)| *i);
        self.problems
            .extend(problems.into_iter().flat_map(|(_, p)| p));
        Ok(KernelGraph {
            name,
            nodes,
            free_launch,
        })
    }

    fn graph(&mut self, g: pb::Graph, path: &str) -> KernelGraph {
        let mut nodes = Vec::with_capacity(g.nodes.len());
        for (i, n) in g.nodes.into_iter().enumerate() {
            // A message node has no wire bytes left to be malformed.
            let (mut node, rest) = wire::from_message(n);
            if self.node(&mut node, rest, path, i as u32).is_ok() {
                nodes.push(node);
            }
        }
        KernelGraph {
            name: g.name,
            nodes,
            free_launch: g
                .free_launch
                .iter()
                .map(|r| (KernelNodeId(r.free), KernelNodeId(r.launch)))
                .collect(),
        }
    }

    /// Completes node `i` of `path`, its direct fields already read: kernel type, class,
    /// attributes and origin from the file's tables (or inline), and its subgraphs.
    fn node(
        &mut self,
        n: &mut KernelNode,
        r: NodeRest,
        path: &str,
        i: u32,
    ) -> Result<(), ExegError> {
        n.class = match pb::KernelClass::try_from(r.class) {
            Ok(pb::KernelClass::Memory) => KernelClass::Memory,
            Ok(pb::KernelClass::Launch) => KernelClass::Launch,
            Ok(pb::KernelClass::Normal) => KernelClass::Normal,
            Ok(pb::KernelClass::Unspecified) | Err(_) => {
                self.problem(
                    path,
                    Some((i, &n.name)),
                    format!("field class: {} is not a kernel class", r.class),
                );
                KernelClass::Normal
            }
        };
        let at = Some((i, n.name.as_str()));
        n.attrs = match r.attrs_index {
            0 => self.attr_set(r.attrs, path, at),
            // Each converter (one per task when loading in parallel) shares its own copy
            // of a set among its nodes: a set shared by every task would have its
            // reference count bounced between cores on each node.
            k => match self.local_attrs.get(&k) {
                Some(a) => a.clone(),
                None => {
                    let a = self
                        .entry(|c| &c.attr_sets, k, "attr_sets", path, at)
                        .unshared();
                    self.local_attrs.insert(k, a.clone());
                    a
                }
            },
        };
        n.kernel = match r.kernel_index {
            0 => kernel_types::intern(r.kernel),
            k => self.entry(|c| &c.kernels, k, "kernels", path, at),
        };
        n.origin = match (r.origin_index, r.origin) {
            (0, None) => None,
            (0, Some(o)) => {
                let o = origin_of(*o);
                Some(match self.inline_origins.get(&o) {
                    Some(shared) => shared.clone(),
                    None => {
                        let shared = Arc::new(o.clone());
                        self.inline_origins.insert(o, shared.clone());
                        shared
                    }
                })
            }
            (k, _) => Some(self.entry(|c| &c.origins, k, "origins", path, at)),
        };
        if r.subgraphs.is_empty() {
            return Ok(());
        }
        let mut subgraphs = Vec::with_capacity(r.subgraphs.len());
        for (s, g) in r.subgraphs.into_iter().enumerate() {
            let g = match g {
                Source::Message(g) => g,
                Source::Wire(bytes) => {
                    pb::Graph::decode(bytes).map_err(|source| ExegError::Malformed { source })?
                }
            };
            let sub_path = if g.name.is_empty() {
                format!("{path}/{}.#{s}", n.name)
            } else {
                format!("{path}/{}.{}", n.name, g.name)
            };
            subgraphs.push(self.graph(g, &sub_path));
        }
        n.subgraphs = subgraphs;
        Ok(())
    }

    /// Entry `k - 1` of a file table (`k`: a node's 1-based index), or a problem and a
    /// default value.
    fn entry<T: Clone + Default>(
        &mut self,
        table: fn(&FileTables) -> &[T],
        k: u32,
        name: &str,
        path: &str,
        node: Option<(u32, &str)>,
    ) -> T {
        let t = table(self.t);
        if let Some(v) = t.get(k as usize - 1) {
            return v.clone();
        }
        let len = t.len();
        self.problem(
            path,
            node,
            format!("{name} index {k} is out of range 1..={len} of the file's {name}"),
        );
        T::default()
    }

    /// An attribute set from its messages: names sorted, a repeated name and a missing
    /// value reported.
    fn attr_set(
        &mut self,
        attrs: Vec<pb::Attr>,
        path: &str,
        node: Option<(u32, &str)>,
    ) -> crate::ops::AttrMap {
        let mut v = Vec::with_capacity(attrs.len());
        for a in attrs {
            match a.value {
                Some(value) => {
                    if let Some(value) = self.attr(value, path, node, &a.name) {
                        v.push((a.name, value));
                    }
                }
                None => self.problem(path, node, format!("attribute {:?} has no value", a.name)),
            }
        }
        v.sort_by(|a: &(String, KernelAttr), b| a.0.cmp(&b.0));
        for w in v.windows(2) {
            if w[0].0 == w[1].0 {
                self.problem(path, node, format!("attribute {:?} appears twice", w[0].0));
            }
        }
        v.dedup_by(|a, b| a.0 == b.0);
        crate::ops::AttrMap::from_sorted(v)
    }

    fn attr(
        &mut self,
        v: pb::attr::Value,
        path: &str,
        node: Option<(u32, &str)>,
        key: &str,
    ) -> Option<KernelAttr> {
        use pb::attr::Value as V;
        let v2 = self.v2;
        let mut dtype = |name: &str| {
            let d = DType::from_name(name);
            if d.is_none() {
                self.problem(
                    path,
                    node,
                    format!("attribute {key:?} has unknown dtype {name:?}"),
                );
            }
            d
        };
        Some(match v {
            V::Int(i) => KernelAttr::Int(i),
            V::Ints(l) => KernelAttr::Ints(l.values),
            V::Float(f) => KernelAttr::Float(f),
            V::Floats(l) => KernelAttr::Floats(l.values),
            V::Bool(b) => KernelAttr::Bool(b),
            V::Str(s) if v2 && V2_DTYPE_LISTS.contains(&key) => {
                let names: Vec<&str> = if s.is_empty() {
                    Vec::new()
                } else {
                    s.split(',').collect()
                };
                KernelAttr::DTypes(dtype_list(&names, &mut dtype)?)
            }
            V::Str(s) => KernelAttr::Str(s),
            V::Strs(l) => KernelAttr::Strs(l.values),
            V::Bytes(b) => KernelAttr::Bytes(b),
            V::Dtype(d) => KernelAttr::DType(dtype(&d)?),
            V::Dtypes(l) => {
                let names: Vec<&str> = l.values.iter().map(String::as_str).collect();
                KernelAttr::DTypes(dtype_list(&names, &mut dtype)?)
            }
            V::Tensor(t) => KernelAttr::Tensor(Arc::new(ExecTensor {
                dtype: dtype(&t.dtype)?,
                shape: t.shape,
                data: t.data.into(),
            })),
        })
    }
}

/// Operand element types by name, an empty name for an omitted operand.
fn dtype_list(
    names: &[&str],
    dtype: &mut impl FnMut(&str) -> Option<DType>,
) -> Option<Vec<Option<DType>>> {
    names
        .iter()
        .map(|n| {
            if n.is_empty() {
                Some(None)
            } else {
                dtype(n).map(Some)
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::exec::ValueRef;
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
    fn hand_written_encoder_writes_exactly_what_prost_writes() {
        let mut eg = sample();
        // A second graph's worth of edge cases: index and output 0 (default, left out),
        // large ids, negative priorities, control lists, a node with no name.
        let mut n = KernelNode::new("", "Const", KernelClass::Normal);
        n.priority = i64::MIN / 2;
        n.control_inputs = vec![KernelNodeId(0), KernelNodeId(300), KernelNodeId(u32::MAX)].into();
        n.inputs = smallvec::smallvec![
            ValueRef {
                node: KernelNodeId(0),
                output: 0,
            },
            ValueRef {
                node: KernelNodeId(70_000),
                output: 3,
            },
        ];
        eg.deinit.nodes.push(n);
        let want = to_file_as(&eg, Form::Tables).encode_to_vec();
        assert_eq!(encode(&eg), want);
        // And the reader takes back what either wrote (the checks aside).
        let file = pb::ExecuteGraphFile::decode(&want[..]).unwrap();
        let (rest, graphs, origins) = split_graphs(&want).unwrap();
        assert_eq!(origins.len(), 2, "the sample's two origins");
        assert!(
            pb::ExecuteGraphFile::decode(&rest.concat()[..])
                .unwrap()
                .init
                .is_none()
        );
        assert!(matches!(graphs[2], Source::Wire(_)));
        for (w, m) in [(&graphs[0], &file.init), (&graphs[1], &file.main)] {
            let (Source::Wire(bytes), Some(m)) = (w, m) else {
                panic!("wire bytes and a message")
            };
            let mut buf = *bytes;
            let mut k = 0;
            while !buf.is_empty() {
                let f = next_field(&mut buf).unwrap();
                if f.tag == 2 {
                    let mut node = KernelNode::default();
                    let parts = read_node(f.payload, &mut node).unwrap();
                    let (msg_node, msg) = wire::from_message(m.nodes[k].clone());
                    assert_eq!(node, msg_node);
                    assert_eq!(parts.class, msg.class);
                    assert_eq!(
                        (parts.kernel_index, parts.attrs_index, parts.origin_index),
                        (msg.kernel_index, msg.attrs_index, msg.origin_index)
                    );
                    assert_eq!(parts.subgraphs.len(), msg.subgraphs.len());
                    k += 1;
                }
            }
            assert_eq!(k, m.nodes.len());
        }
    }

    #[test]
    fn binary_form_shares_table_entries_and_checks_their_indices() {
        let eg = sample();
        let bytes = encode(&eg);
        let mut file = pb::ExecuteGraphFile::decode(&bytes[..]).unwrap();
        // Each kernel type and origin once; nodes refer to them.
        let mut kernels = file.kernels.clone();
        kernels.sort();
        kernels.dedup();
        assert_eq!(kernels.len(), file.kernels.len());
        let main = file.main.as_ref().unwrap();
        assert!(
            main.nodes
                .iter()
                .all(|n| n.kernel.is_empty() && n.kernel_index > 0)
        );
        assert_eq!(decode(&bytes).unwrap(), eg);
        // Out-of-range indices are problems, named by node.
        let main = file.main.as_mut().unwrap();
        main.nodes[0].kernel_index = 99;
        main.nodes[1].attrs_index = 77;
        let err = decode(&file.encode_to_vec()).unwrap_err().to_string();
        assert!(
            err.contains("Main: node 0 \"x\": kernels index 99 is out of range"),
            "{err}"
        );
        assert!(err.contains("attr_sets index 77 is out of range"), "{err}");
    }

    /// Version 2 wrote an op kernel's operand types as comma-separated names; they are
    /// read as the dtype lists version 3 writes.
    #[test]
    fn version_2_dtype_lists_are_read_as_dtype_lists() {
        use pb::attr::Value as V;
        let mut eg = sample();
        let lists = [
            ("_in_dtypes", vec![Some(DType::F32), None, Some(DType::I64)]),
            ("_out_dtypes", vec![Some(DType::Bool)]),
        ];
        for (k, v) in &lists {
            eg.main.nodes[0]
                .attrs
                .insert((*k).into(), KernelAttr::DTypes(v.clone()));
        }
        // Both forms: attributes inline on the nodes, and in the file's table.
        let as_v2 = |form: Form| {
            let mut file = to_file_as(&eg, form);
            let main = file.main.as_mut().expect("main");
            let inline = main.nodes.iter_mut().flat_map(|n| &mut n.attrs);
            let tables = file.attr_sets.iter_mut().flat_map(|s| &mut s.attrs);
            let mut rewritten = 0;
            for a in inline.chain(tables) {
                if let Some(V::Dtypes(l)) = &a.value
                    && a.name.starts_with('_')
                {
                    a.value = Some(V::Str(l.values.join(",")));
                    rewritten += 1;
                }
            }
            assert_eq!(rewritten, 2);
            file.format_version = 2;
            file
        };
        assert_eq!(decode(&as_v2(Form::Tables).encode_to_vec()).unwrap(), eg);
        let mut file = as_v2(Form::Inline);
        assert_eq!(decode(&file.encode_to_vec()).unwrap(), eg);
        // In version 3 a string is a string.
        file.format_version = 3;
        let back = decode(&file.encode_to_vec()).unwrap();
        assert_eq!(
            back.main.nodes[0].attrs.get("_in_dtypes"),
            Some(&KernelAttr::Str("float32,,int64".into()))
        );
    }

    #[test]
    fn newer_format_version_is_refused_naming_supported_ones() {
        let mut file = to_file(&sample());
        file.format_version = 4;
        let err = decode(&file.encode_to_vec()).unwrap_err();
        assert!(matches!(err, ExegError::UnsupportedVersion { found: 4 }));
        assert_eq!(
            err.to_string(),
            "field format_version: version 4 is not supported, this reader supports 2, 3"
        );
        file.format_version = 1;
        let err = decode(&file.encode_to_vec()).unwrap_err();
        assert!(matches!(err, ExegError::UnsupportedVersion { found: 1 }));
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
