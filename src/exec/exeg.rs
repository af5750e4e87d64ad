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
use crate::ops::AttrMap;
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
pub fn encode(eg: &ExecuteGraph) -> Vec<u8> {
    encode_parts(eg).concat()
}

/// [`encode`]'s bytes in pieces, in order: the graphs are written on several threads
/// into buffers of their own, and a writer takes the pieces one after the other
/// (`cmd::output::write_atomic_parts`) rather than a copy of all of them in one.
pub fn encode_parts(eg: &ExecuteGraph) -> Vec<Vec<u8>> {
    // The graphs by hand (`wire`), the rest by prost, in field-number order: exactly the
    // bytes prost writes for `to_file_as(eg, Form::Tables)` (a test checks), without a
    // protobuf struct per node.
    //
    // Most of the work is finding each node's table entries (a hash of its attribute set
    // by value, of its kernel type, of its origin) and writing the entries, so both are
    // done for the three graphs at once: each graph's entries are found in tables of its
    // own ([`GraphTables`]); merging those in file order gives the file's tables in
    // first-use order, as one pass over the graphs would; then each graph is written, and
    // the entries it brought to the file's tables, into buffers of its own.
    let graphs = [&eg.init, &eg.main, &eg.deinit];
    let state = foldhash::fast::RandomState::default();
    let [init, main, deinit] = on_each(graphs, |g| GraphTables::of(g, &state));
    let locals = [init, main, deinit];
    let merged = Merged::of(&locals);
    let jobs: [(&KernelGraph, &GraphTables, &Remap); 3] =
        std::array::from_fn(|k| (graphs[k], &locals[k], &merged.remaps[k]));
    let parts = on_each(jobs, |(g, local, remap)| {
        // Room at a generous size per node (lowering's nodes encode in some 60 bytes):
        // the buffer is written once, not copied as it grows.
        let mut body = Vec::with_capacity(96 * local.nodes.len() + 64);
        let mut next = local.nodes.iter();
        wire::put_graph(&mut body, g, &mut |_| {
            // `put_graph` visits the nodes in the order `GraphTables::of` did.
            let [k, a, o] = next.next().copied().unwrap_or_default();
            (
                remap.kernels[k as usize],
                remap.attrs[a as usize],
                remap.origins[o as usize],
            )
        });
        let mut origins = Vec::new();
        for &i in &remap.new_origins {
            prost::encoding::message::encode(11, &origin_to(local.origins[i]), &mut origins);
        }
        let mut sets = Vec::new();
        for &i in &remap.new_sets {
            let set = pb::AttrSet {
                attrs: attrs_to(local.sets[i].set),
            };
            prost::encoding::message::encode(13, &set, &mut sets);
        }
        [body, origins, sets]
    });
    let head = pb::ExecuteGraphFile {
        magic: MAGIC.to_string(),
        format_version: FORMAT_VERSION,
        name: eg.name.clone(),
        ..Default::default()
    };
    // Fields 7 to 10, then the origins (11), the kernels (12), the attribute sets (13)
    // and the end marker (15), as prost would order them.
    let fields = pb::ExecuteGraphFile {
        end_marker: 0,
        ..file_fields(eg)
    };
    let kernels = pb::ExecuteGraphFile {
        kernels: merged.kernels,
        ..Default::default()
    };
    let mut out = Vec::with_capacity(16);
    let mut lead = head.encode_to_vec();
    let [
        [init, init_origins, init_sets],
        [main, main_origins, main_sets],
        [deinit, deinit_origins, deinit_sets],
    ] = parts;
    for (tag, body) in (4u32..).zip([init, main, deinit]) {
        prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, &mut lead);
        prost::encoding::encode_varint(body.len() as u64, &mut lead);
        out.push(std::mem::take(&mut lead));
        out.push(body);
    }
    out.push(fields.encode_to_vec());
    out.extend([init_origins, main_origins, deinit_origins]);
    out.push(kernels.encode_to_vec());
    out.extend([init_sets, main_sets, deinit_sets]);
    let mut end = Vec::with_capacity(5);
    prost::encoding::fixed32::encode(15, &END_MARKER, &mut end);
    out.push(end);
    out
}

/// `f` on each of three items at once: the first and last on rayon's pool, the middle
/// one (Main, the largest graph) on this thread, whose heap holds what lowering freed.
fn on_each<T: Send, R: Send>(items: [T; 3], f: impl Fn(T) -> R + Sync) -> [R; 3] {
    let [a, b, c] = items;
    let (mut ra, mut rc) = (None, None);
    let rb = rayon::in_place_scope(|scope| {
        scope.spawn(|_| ra = Some(f(a)));
        scope.spawn(|_| rc = Some(f(c)));
        f(b)
    });
    match (ra, rc) {
        (Some(ra), Some(rc)) => [ra, rb, rc],
        // A scope returns only once its spawned jobs are done, or resumes their panic.
        _ => unreachable!("rayon's scope ran every job"),
    }
}

/// A hasher that passes on the one `u64` it is given: for keys that carry their own hash.
#[derive(Default)]
struct PassHash(u64);

impl std::hash::Hasher for PassHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else is folded in rather than lost.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type PassMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<PassHash>>;

/// An attribute set as a key by value, with its hash computed once
/// ([`crate::ops::attr::hash_set`] in the encoder's hash state), so merging the graphs'
/// tables does not hash it again.
#[derive(Clone, Copy)]
struct SetKey<'a> {
    hash: u64,
    set: &'a AttrMap,
}

impl PartialEq for SetKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && crate::ops::attr::same_set(self.set, other.set)
    }
}

impl Eq for SetKey<'_> {}

impl std::hash::Hash for SetKey<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

/// One graph's table entries ([`encode`]): the distinct kernel types, attribute sets (by
/// value) and origins its nodes use, each list in first-use order in the order
/// `wire::put_graph` visits nodes (a node, then its subgraphs), and each node's indices
/// into them: the kernel's from 0; the set's and origin's from 1, 0 for none.
#[derive(Default)]
struct GraphTables<'a> {
    kernels: Vec<&'a str>,
    kernel_at: HashMap<&'a str, u32>,
    sets: Vec<SetKey<'a>>,
    /// By shared set first: lowering shares equal sets, so most nodes are found here.
    set_at: HashMap<usize, u32>,
    set_by_value: PassMap<SetKey<'a>, u32>,
    origins: Vec<&'a Origin>,
    /// By address: lowering makes one origin per compute node, shared by its kernels.
    origin_at: HashMap<usize, u32>,
    nodes: Vec<[u32; 3]>,
}

impl<'a> GraphTables<'a> {
    fn of(g: &'a KernelGraph, state: &foldhash::fast::RandomState) -> Self {
        let mut t = GraphTables {
            nodes: Vec::with_capacity(g.nodes.len()),
            ..Default::default()
        };
        t.graph(g, state);
        t
    }

    fn graph(&mut self, g: &'a KernelGraph, state: &foldhash::fast::RandomState) {
        for n in &g.nodes {
            let k = self.kernel(&n.kernel);
            let a = self.set(&n.attrs, state);
            let o = n.origin.as_ref().map_or(0, |o| self.origin(o));
            self.nodes.push([k, a, o]);
            for s in &n.subgraphs {
                self.graph(s, state);
            }
        }
    }

    fn kernel(&mut self, k: &'a str) -> u32 {
        let table = &mut self.kernels;
        *self.kernel_at.entry(k).or_insert_with(|| {
            table.push(k);
            table.len() as u32 - 1
        })
    }

    fn set(&mut self, a: &'a AttrMap, state: &foldhash::fast::RandomState) -> u32 {
        let Some(id) = a.identity() else { return 0 };
        if let Some(&i) = self.set_at.get(&id) {
            return i;
        }
        let hash = {
            use std::hash::BuildHasher;
            let mut h = state.build_hasher();
            crate::ops::attr::hash_set(a, &mut h);
            std::hash::Hasher::finish(&h)
        };
        let table = &mut self.sets;
        let key = SetKey { hash, set: a };
        let i = *self.set_by_value.entry(key).or_insert_with(|| {
            table.push(key);
            table.len() as u32
        });
        self.set_at.insert(id, i);
        i
    }

    fn origin(&mut self, o: &'a Arc<Origin>) -> u32 {
        let table = &mut self.origins;
        *self
            .origin_at
            .entry(Arc::as_ptr(o) as usize)
            .or_insert_with(|| {
                table.push(o);
                table.len() as u32
            })
    }
}

/// A graph's local table indices ([`GraphTables`]) to the file's (from 1; 0 stays 0),
/// and the entries it is the first to use, which it writes (local indices, in order).
#[derive(Default)]
struct Remap {
    kernels: Vec<u32>,
    attrs: Vec<u32>,
    origins: Vec<u32>,
    new_sets: Vec<usize>,
    new_origins: Vec<usize>,
}

/// The file's kernel table, and each graph's [`Remap`]: the three graphs' tables merged
/// in file order.
struct Merged {
    kernels: Vec<String>,
    remaps: [Remap; 3],
}

impl Merged {
    fn of(locals: &[GraphTables<'_>; 3]) -> Self {
        let mut kernels = Vec::new();
        let mut remaps: [Remap; 3] = Default::default();
        let mut kernel_at: HashMap<&str, u32> = HashMap::default();
        let mut set_at: PassMap<SetKey<'_>, u32> = PassMap::default();
        let mut origin_at: HashMap<usize, u32> = HashMap::default();
        for (local, remap) in locals.iter().zip(&mut remaps) {
            for &k in &local.kernels {
                let i = *kernel_at.entry(k).or_insert_with(|| {
                    kernels.push(k.to_string());
                    kernels.len() as u32
                });
                remap.kernels.push(i);
            }
            remap.attrs.push(0);
            for (li, &key) in local.sets.iter().enumerate() {
                let next = set_at.len() as u32 + 1;
                let i = *set_at.entry(key).or_insert(next);
                if i == next {
                    remap.new_sets.push(li);
                }
                remap.attrs.push(i);
            }
            remap.origins.push(0);
            for (li, &o) in local.origins.iter().enumerate() {
                let next = origin_at.len() as u32 + 1;
                let i = *origin_at.entry(o as *const Origin as usize).or_insert(next);
                if i == next {
                    remap.new_origins.push(li);
                }
                remap.origins.push(i);
            }
        }
        Merged { kernels, remaps }
    }
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
    /// a fraction of the size and a loaded graph keeps one copy of each. [`encode`] writes
    /// it by hand; built through prost, it is what the tests hold [`encode`] to.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the reference encode is tested on")
    )]
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
        // One hash of the set's values, found or new (most of a lowered graph's sets are
        // one node's own: a tensor's memory index, a constant).
        let sets = &mut self.attr_sets;
        let i = *self
            .attrs_by_value
            .entry(AttrKey(a.clone()))
            .or_insert_with(|| {
                sets.push(pb::AttrSet { attrs: attrs_to(a) });
                sets.len() as u32
            });
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
            ..Default::default()
        };
        // The node's table entries before its subgraphs', in the order `wire::put_graph`
        // writes nodes.
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
        node.subgraphs = n.subgraphs.iter().map(|g| self.graph_to(g)).collect();
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
pub(crate) mod tests;
