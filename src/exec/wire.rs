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

use crate::exec::{ExecGraph, ExecNode, ExecNodeId, ValueRef};
use crate::proto::exeg as pb;

/// A graph to convert: a decoded message (text form, small subgraphs), or its wire bytes.
pub(crate) enum Source<'a> {
    Message(pb::Graph),
    Wire(&'a [u8]),
}

/// A node's fields as the file has them, before conversion to the graph model.
pub(crate) struct NodeParts<'a> {
    pub name: String,
    pub kernel: String,
    pub class: i32,
    pub inputs: Vec<ValueRef>,
    pub outputs: u32,
    pub control_inputs: Vec<ExecNodeId>,
    pub attrs: Vec<pb::Attr>,
    pub origin: Option<pb::Origin>,
    pub priority: i64,
    pub subgraphs: Vec<Source<'a>>,
    pub origin_index: u32,
    pub kernel_index: u32,
    pub attrs_index: u32,
}

impl NodeParts<'static> {
    pub fn from_message(n: pb::Node) -> Self {
        NodeParts {
            name: n.name,
            kernel: n.kernel,
            class: n.class,
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
            attrs: n.attrs,
            origin: n.origin,
            priority: n.priority,
            subgraphs: n.subgraphs.into_iter().map(Source::Message).collect(),
            origin_index: n.origin_index,
            kernel_index: n.kernel_index,
            attrs_index: n.attrs_index,
        }
    }
}

/// One field of a message: its number, its whole encoding (key included), its wire type,
/// its varint value (varint fields) and its payload (length-delimited and fixed fields).
pub(crate) struct Field<'a> {
    pub tag: u32,
    pub raw: &'a [u8],
    pub wire: WireType,
    pub varint: u64,
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
    let (varint, payload): (u64, &[u8]) = match wire {
        WireType::Varint => (decode_varint(buf).ok()?, &[]),
        WireType::SixtyFourBit => (0, take(buf, 8)?),
        WireType::ThirtyTwoBit => (0, take(buf, 4)?),
        WireType::LengthDelimited => {
            let len = usize::try_from(decode_varint(buf).ok()?).ok()?;
            (0, take(buf, len)?)
        }
        WireType::StartGroup | WireType::EndGroup => return None,
    };
    Some(Field {
        tag,
        raw: &start[..start.len() - buf.len()],
        wire,
        varint,
        payload,
    })
}

fn varint_of(f: &Field) -> Option<u64> {
    (f.wire == WireType::Varint).then_some(f.varint)
}

fn bytes_of<'a>(f: &Field<'a>) -> Option<&'a [u8]> {
    (f.wire == WireType::LengthDelimited).then_some(f.payload)
}

fn string_of(f: &Field) -> Option<String> {
    String::from_utf8(bytes_of(f)?.to_vec()).ok()
}

/// A node from its wire bytes; `None` for anything this reader does not take (the caller
/// then asks prost).
pub(crate) fn read_node(mut buf: &[u8]) -> Option<NodeParts<'_>> {
    let mut n = NodeParts {
        name: String::new(),
        kernel: String::new(),
        class: 0,
        inputs: Vec::new(),
        outputs: 0,
        control_inputs: Vec::new(),
        attrs: Vec::new(),
        origin: None,
        priority: 0,
        subgraphs: Vec::new(),
        origin_index: 0,
        kernel_index: 0,
        attrs_index: 0,
    };
    while !buf.is_empty() {
        let f = next_field(&mut buf)?;
        match f.tag {
            1 => n.name = string_of(&f)?,
            2 => n.kernel = string_of(&f)?,
            3 => n.class = varint_of(&f)? as i32,
            4 => n.inputs.push(read_value_ref(bytes_of(&f)?)?),
            5 => n.outputs = varint_of(&f)? as u32,
            6 => match f.wire {
                WireType::Varint => n.control_inputs.push(ExecNodeId(f.varint as u32)),
                WireType::LengthDelimited => {
                    let mut packed = f.payload;
                    while !packed.is_empty() {
                        let c = decode_varint(&mut packed).ok()?;
                        n.control_inputs.push(ExecNodeId(c as u32));
                    }
                }
                _ => return None,
            },
            7 => n.attrs.push(pb::Attr::decode(bytes_of(&f)?).ok()?),
            8 => n.origin = Some(pb::Origin::decode(bytes_of(&f)?).ok()?),
            9 => n.priority = varint_of(&f)? as i64,
            10 => n.subgraphs.push(Source::Wire(bytes_of(&f)?)),
            11 => n.origin_index = varint_of(&f)? as u32,
            12 => n.kernel_index = varint_of(&f)? as u32,
            13 => n.attrs_index = varint_of(&f)? as u32,
            _ => {}
        }
    }
    Some(n)
}

fn read_value_ref(mut buf: &[u8]) -> Option<ValueRef> {
    let mut v = ValueRef {
        node: ExecNodeId(0),
        output: 0,
    };
    while !buf.is_empty() {
        let f = next_field(&mut buf)?;
        match f.tag {
            1 => v.node = ExecNodeId(varint_of(&f)? as u32),
            2 => v.output = varint_of(&f)? as u32,
            _ => {}
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
