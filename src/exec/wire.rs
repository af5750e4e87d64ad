//! The `.exeg` binary form's hot path by hand: graphs and nodes written to and read from
//! wire bytes directly, without a protobuf struct per node.
//!
//! Going through prost's generated structs cost every node its name, its input list and
//! its control list twice (once as message fields, once as the graph model) and two passes
//! to size nested messages; on a 100,000-node model that was most of encoding and a third
//! of loading. The bytes are exactly what prost writes for `proto/exeg.proto` (fields in
//! number order, defaults left out, `repeated uint32` packed); a test compares them. The
//! rest of the file (header, tables, model inputs and outputs) stays with prost, and a
//! node this reader does not take is handed to prost, which takes it or names the error.

use prost::Message;
use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};

use crate::exec::{ExecGraph, ExecNode, ExecNodeId, NodeName, ValueRef};
use crate::proto::exeg as pb;

/// A graph to convert: a decoded message (text form, small subgraphs), or its wire bytes.
pub(crate) enum Source<'a> {
    Message(pb::Graph),
    Wire(&'a [u8]),
}

/// What a node message holds besides the fields that go straight into its [`ExecNode`]
/// (name, inputs, outputs, control inputs, priority): the fields the converter resolves
/// against the file's tables or checks. The inline ones (kernel, attributes, origin) are
/// empty in the binary form, so this stays cheap to build and move per node.
#[derive(Default)]
pub(crate) struct NodeRest<'a> {
    pub kernel: String,
    pub class: i32,
    pub attrs: Vec<pb::Attr>,
    pub origin: Option<Box<pb::Origin>>,
    pub subgraphs: Vec<Source<'a>>,
    pub origin_index: u32,
    pub kernel_index: u32,
    pub attrs_index: u32,
}

/// A decoded node message as a node (its direct fields set) and the rest.
pub(crate) fn from_message(n: pb::Node) -> (ExecNode, NodeRest<'static>) {
    let node = ExecNode {
        name: n.name.into(),
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
        priority: n.priority,
        ..Default::default()
    };
    let rest = NodeRest {
        kernel: n.kernel,
        class: n.class,
        attrs: n.attrs,
        origin: n.origin.map(Box::new),
        subgraphs: n.subgraphs.into_iter().map(Source::Message).collect(),
        origin_index: n.origin_index,
        kernel_index: n.kernel_index,
        attrs_index: n.attrs_index,
    };
    (node, rest)
}

/// One field of a message: its number, its whole encoding (key included), its wire type
/// and its payload (length-delimited and fixed fields; empty for varints).
pub(crate) struct Field<'a> {
    pub tag: u32,
    pub raw: &'a [u8],
    pub wire: WireType,
    pub payload: &'a [u8],
}

/// The next field of `buf`, `None` on anything malformed.
pub(crate) fn next_field<'a>(buf: &mut &'a [u8]) -> Option<Field<'a>> {
    let start = *buf;
    let (tag, wire) = decode_key(buf).ok()?;
    let take = |buf: &mut &'a [u8], n: usize| -> Option<&'a [u8]> {
        let (head, tail) = buf.split_at_checked(n)?;
        *buf = tail;
        Some(head)
    };
    let payload: &[u8] = match wire {
        WireType::Varint => {
            decode_varint(buf).ok()?;
            &[]
        }
        WireType::SixtyFourBit => take(buf, 8)?,
        WireType::ThirtyTwoBit => take(buf, 4)?,
        WireType::LengthDelimited => {
            let len = usize::try_from(decode_varint(buf).ok()?).ok()?;
            take(buf, len)?
        }
        WireType::StartGroup | WireType::EndGroup => return None,
    };
    Some(Field {
        tag,
        raw: &start[..start.len() - buf.len()],
        wire,
        payload,
    })
}

/// A varint; one byte inline, longer ones by prost.
#[inline(always)]
fn varint(buf: &mut &[u8]) -> Option<u64> {
    match buf.first() {
        Some(&b) if b < 0x80 => {
            *buf = &buf[1..];
            Some(u64::from(b))
        }
        _ => decode_varint(buf).ok(),
    }
}

/// A length-delimited payload.
#[inline(always)]
fn payload<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(varint(buf)?).ok()?;
    let (head, tail) = buf.split_at_checked(len)?;
    *buf = tail;
    Some(head)
}

const VARINT: u8 = WireType::Varint as u8;
const LEN: u8 = WireType::LengthDelimited as u8;

/// Reads a node message from its wire bytes into `n` (which starts as the default node):
/// name, inputs, outputs, control inputs and priority go straight in, the rest is
/// returned. `None` for anything this reader does not take (the caller then asks prost).
///
/// Field keys below 16 are one byte, so the reader dispatches on that byte; a field of
/// the wrong wire type is left to prost, which names the error.
pub(crate) fn read_node<'a>(mut buf: &'a [u8], n: &mut ExecNode) -> Option<NodeRest<'a>> {
    let mut rest = NodeRest::default();
    while let Some(&key) = buf.first() {
        let (tag, wire) = (key >> 3, key & 7);
        if key >= 0x80 || !(1..=13).contains(&tag) {
            // Not one of Node's fields: skipped whole.
            next_field(&mut buf)?;
            continue;
        }
        buf = &buf[1..];
        match (tag, wire) {
            (1, LEN) => n.name = NodeName::from_utf8(payload(&mut buf)?).ok()?,
            (4, LEN) => n.inputs.push(read_value_ref(payload(&mut buf)?)?),
            (5, VARINT) => n.outputs = varint(&mut buf)? as u32,
            (6, LEN) => {
                let mut packed = payload(&mut buf)?;
                while !packed.is_empty() {
                    n.control_inputs
                        .push(ExecNodeId(varint(&mut packed)? as u32));
                }
            }
            (6, VARINT) => n.control_inputs.push(ExecNodeId(varint(&mut buf)? as u32)),
            (9, VARINT) => n.priority = varint(&mut buf)? as i64,
            (3, VARINT) => rest.class = varint(&mut buf)? as i32,
            (11, VARINT) => rest.origin_index = varint(&mut buf)? as u32,
            (12, VARINT) => rest.kernel_index = varint(&mut buf)? as u32,
            (13, VARINT) => rest.attrs_index = varint(&mut buf)? as u32,
            (2, LEN) => rest.kernel = String::from_utf8(payload(&mut buf)?.to_vec()).ok()?,
            (7, LEN) => rest.attrs.push(pb::Attr::decode(payload(&mut buf)?).ok()?),
            (8, LEN) => rest.origin = Some(Box::new(pb::Origin::decode(payload(&mut buf)?).ok()?)),
            (10, LEN) => rest.subgraphs.push(Source::Wire(payload(&mut buf)?)),
            _ => return None,
        }
    }
    Some(rest)
}

/// A `ValueRef` message: `08 node 10 output` as written, anything else field by field.
#[inline(always)]
fn read_value_ref(mut buf: &[u8]) -> Option<ValueRef> {
    let mut v = ValueRef {
        node: ExecNodeId(0),
        output: 0,
    };
    while let Some(&key) = buf.first() {
        match key {
            0x08 => {
                buf = &buf[1..];
                v.node = ExecNodeId(varint(&mut buf)? as u32);
            }
            0x10 => {
                buf = &buf[1..];
                v.output = varint(&mut buf)? as u32;
            }
            _ => {
                let f = next_field(&mut buf)?;
                if matches!(f.tag, 1 | 2) {
                    return None;
                }
            }
        }
    }
    Some(v)
}

/// The table indices a node is written with: kernel, attribute set, origin (1-based, 0
/// for none).
pub(crate) type Indices<'a, 'g> = dyn FnMut(&'g ExecNode) -> (u32, u32, u32) + 'a;

fn put_len_delimited(out: &mut Vec<u8>, tag: u32, body: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

fn put_varint(out: &mut Vec<u8>, tag: u32, v: u64) {
    if v != 0 {
        encode_key(tag, WireType::Varint, out);
        encode_varint(v, out);
    }
}

/// Appends the body of a `Graph` message for `g`, nodes by table index.
pub(crate) fn put_graph<'g>(out: &mut Vec<u8>, g: &'g ExecGraph, indices: &mut Indices<'_, 'g>) {
    if !g.name.is_empty() {
        put_len_delimited(out, 1, g.name.as_bytes());
    }
    let mut node = Vec::with_capacity(128);
    for n in &g.nodes {
        node.clear();
        put_node(&mut node, n, indices);
        put_len_delimited(out, 2, &node);
    }
    let mut rel = Vec::with_capacity(16);
    for (f, l) in &g.free_launch {
        rel.clear();
        put_varint(&mut rel, 1, f.0 as u64);
        put_varint(&mut rel, 2, l.0 as u64);
        put_len_delimited(out, 3, &rel);
    }
}

fn put_node<'g>(out: &mut Vec<u8>, n: &'g ExecNode, indices: &mut Indices<'_, 'g>) {
    let (kernel, attrs, origin) = indices(n);
    if !n.name.is_empty() {
        put_len_delimited(out, 1, n.name.as_bytes());
    }
    put_varint(out, 3, super::exeg::class_number(n.class) as u64);
    let mut v = [0u8; 20];
    for i in &n.inputs {
        let mut body: &mut [u8] = &mut v;
        let free = body.len();
        if i.node.0 != 0 {
            encode_key(1, WireType::Varint, &mut body);
            encode_varint(i.node.0 as u64, &mut body);
        }
        if i.output != 0 {
            encode_key(2, WireType::Varint, &mut body);
            encode_varint(i.output as u64, &mut body);
        }
        let used = free - body.len();
        put_len_delimited(out, 4, &v[..used]);
    }
    put_varint(out, 5, n.outputs as u64);
    if !n.control_inputs.is_empty() {
        let mut packed = Vec::with_capacity(5 * n.control_inputs.len());
        for c in &n.control_inputs {
            encode_varint(c.0 as u64, &mut packed);
        }
        put_len_delimited(out, 6, &packed);
    }
    // int64: a negative priority is its two's complement, ten bytes, as prost writes it.
    put_varint(out, 9, n.priority as u64);
    for s in &n.subgraphs {
        let mut body = Vec::new();
        put_graph(&mut body, s, indices);
        put_len_delimited(out, 10, &body);
    }
    put_varint(out, 11, origin as u64);
    put_varint(out, 12, kernel as u64);
    put_varint(out, 13, attrs as u64);
}
