//! The `.exeg` binary form's hot path by hand: graphs and nodes written to and read from
//! wire bytes directly, without a protobuf struct per node.
//!
//! Going through prost's generated structs costs every node its name, its input list and
//! its control list twice (once as message fields, once as the graph model) and two passes
//! to size nested messages, a large share of encoding and loading a large model. The bytes are
//! exactly what prost writes for `proto/exeg.proto` (fields in number order, defaults left out,
//! `repeated uint32` packed); a test compares them. The rest of the file (header, tables, model
//! inputs and outputs) stays with prost, and a node this reader does not take is handed to prost,
//! which takes it or names the error.

use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint};

use crate::exec::{KernelClass, KernelGraph, KernelNode, KernelNodeId, NodeName, Origin, ValueRef};
use crate::proto::exeg as pb;
use crate::proto::put::{put_len_delimited, put_varint};

/// A graph to convert: a decoded message (text form, small subgraphs), or its wire bytes.
pub(crate) enum Source<'a> {
    Message(pb::Graph),
    Wire(&'a [u8]),
}

/// What a node message holds besides the fields that go straight into its [`KernelNode`]
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
/// A kernel class's number in `proto/exeg.proto`, as both encoders write it.
pub(crate) fn class_number(c: KernelClass) -> i32 {
    let class = match c {
        KernelClass::Memory => pb::KernelClass::Memory,
        KernelClass::Launch => pb::KernelClass::Launch,
        KernelClass::Normal => pb::KernelClass::Normal,
    };
    class as i32
}

pub(crate) fn from_message(n: pb::Node) -> (KernelNode, NodeRest<'static>) {
    let node = KernelNode {
        name: n.name.into(),
        inputs: n
            .inputs
            .iter()
            .map(|v| ValueRef {
                node: KernelNodeId(v.node),
                output: v.output,
            })
            .collect(),
        outputs: n.outputs,
        control_inputs: n.control_inputs.iter().map(|&c| KernelNodeId(c)).collect(),
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

/// The next field of `buf`, `None` on anything malformed. (Called once per node by the
/// graph reader: its varints are decoded inline.)
#[inline]
pub(crate) fn next_field<'a>(buf: &mut &'a [u8]) -> Option<Field<'a>> {
    let start = *buf;
    let key = varint(buf)?;
    let tag = u32::try_from(key >> 3).ok().filter(|&t| t > 0)?;
    let wire = WireType::try_from(key & 7).ok()?;
    let take = |buf: &mut &'a [u8], n: usize| -> Option<&'a [u8]> {
        let (head, tail) = buf.split_at_checked(n)?;
        *buf = tail;
        Some(head)
    };
    let payload: &[u8] = match wire {
        WireType::Varint => {
            varint(buf)?;
            &[]
        }
        WireType::SixtyFourBit => take(buf, 8)?,
        WireType::ThirtyTwoBit => take(buf, 4)?,
        WireType::LengthDelimited => {
            let len = usize::try_from(varint(buf)?).ok()?;
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

/// A varint, decoded inline: node ids, indices and counts take one to four bytes, a
/// negative priority ten. `None` past the end or past ten bytes.
#[inline(always)]
fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, &b) in buf.iter().take(10).enumerate() {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            // The tenth byte holds bit 63 only; more would overflow (prost refuses it too).
            if i == 9 && b > 1 {
                return None;
            }
            *buf = &buf[i + 1..];
            return Some(v);
        }
    }
    None
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

/// Reads one field of a node message, its one-byte key already taken from `buf`: the
/// direct fields into `n`, the rest into `rest`. `None` for a field this reader does not
/// take (a wrong wire type, a malformed payload). Inlined with constant `tag` and `wire`
/// in the fast path below, so there the match folds away.
#[inline(always)]
fn node_field<'a>(
    tag: u8,
    wire: u8,
    buf: &mut &'a [u8],
    n: &mut KernelNode,
    rest: &mut NodeRest<'a>,
) -> Option<()> {
    match (tag, wire) {
        (1, LEN) => n.name = NodeName::from_utf8(payload(buf)?).ok()?,
        (4, LEN) => n.inputs.push(read_value_ref(payload(buf)?)?),
        (5, VARINT) => n.outputs = varint(buf)? as u32,
        (6, LEN) => {
            let mut packed = payload(buf)?;
            while !packed.is_empty() {
                n.control_inputs
                    .push(KernelNodeId(varint(&mut packed)? as u32));
            }
        }
        (6, VARINT) => n.control_inputs.push(KernelNodeId(varint(buf)? as u32)),
        (9, VARINT) => n.priority = varint(buf)? as i64,
        (3, VARINT) => rest.class = varint(buf)? as i32,
        (11, VARINT) => rest.origin_index = varint(buf)? as u32,
        (12, VARINT) => rest.kernel_index = varint(buf)? as u32,
        (13, VARINT) => rest.attrs_index = varint(buf)? as u32,
        (2, LEN) => rest.kernel = String::from_utf8(payload(buf)?.to_vec()).ok()?,
        (7, LEN) => rest.attrs.push(pb::Attr::decode(payload(buf)?).ok()?),
        (8, LEN) => rest.origin = Some(Box::new(pb::Origin::decode(payload(buf)?).ok()?)),
        (10, LEN) => rest.subgraphs.push(Source::Wire(payload(buf)?)),
        _ => return None,
    }
    Some(())
}

/// Reads a node message from its wire bytes into `n` (which starts as the default node):
/// name, inputs, outputs, control inputs and priority go straight in, the rest is
/// returned. `None` for anything this reader does not take (the caller then asks prost).
///
/// Two passes over the same field handler: first the fields in the order the encoder
/// writes them (each key one compare that is nearly always predicted), then,
/// for whatever is left (another writer's order, unknown fields), any order, dispatching
/// on the key byte (keys of fields below 16 are one byte). Both read fields in file order,
/// so a repeated scalar's last value wins, as protobuf says.
pub(crate) fn read_node<'a>(mut buf: &'a [u8], n: &mut KernelNode) -> Option<NodeRest<'a>> {
    let mut rest = NodeRest::default();
    // The fields in the order the encoder writes them, unrolled so that each
    // `node_field` call has constant arguments and its match folds away (a loop over a
    // key table compiles to a slower jump-table dispatch per field).
    macro_rules! in_order {
        ($(($tag:literal, $wire:ident, $repeated:literal)),*) => {$(
            while buf.first() == Some(&(($tag << 3) | $wire)) {
                buf = &buf[1..];
                node_field($tag, $wire, &mut buf, n, &mut rest)?;
                if !$repeated {
                    break;
                }
            }
        )*};
    }
    in_order!(
        (1, LEN, false),
        (3, VARINT, false),
        (4, LEN, true),
        (5, VARINT, false),
        (6, LEN, false),
        (9, VARINT, false),
        (10, LEN, true),
        (11, VARINT, false),
        (12, VARINT, false),
        (13, VARINT, false)
    );
    while let Some(&key) = buf.first() {
        let (tag, wire) = (key >> 3, key & 7);
        if key >= 0x80 || !(1..=13).contains(&tag) {
            // Not one of Node's fields: skipped whole.
            next_field(&mut buf)?;
            continue;
        }
        buf = &buf[1..];
        node_field(tag, wire, &mut buf, n, &mut rest)?;
    }
    Some(rest)
}

/// An `Origin` message, its names straight into inline strings (compute-node names and
/// op types are nearly all short): no heap string per field, as prost's decode would
/// make. `None` for anything this reader does not take.
pub(crate) fn read_origin(mut buf: &[u8]) -> Option<Origin> {
    let mut o = Origin::default();
    let name = |buf: &mut &[u8]| NodeName::from_utf8(payload(buf)?).ok();
    while let Some(&key) = buf.first() {
        buf = &buf[1..];
        match (key >> 3, key & 7) {
            (1, LEN) => o.graph = name(&mut buf)?,
            (2, LEN) => o.node = name(&mut buf)?,
            (3, LEN) => o.op_type = name(&mut buf)?,
            (4, VARINT) => o.index = varint(&mut buf)? as u32,
            _ => return None,
        }
    }
    Some(o)
}

/// A `ValueRef` message: `08 node 10 output` as written, anything else field by field.
#[inline(always)]
fn read_value_ref(mut buf: &[u8]) -> Option<ValueRef> {
    let mut v = ValueRef {
        node: KernelNodeId(0),
        output: 0,
    };
    while let Some(&key) = buf.first() {
        match key {
            0x08 => {
                buf = &buf[1..];
                v.node = KernelNodeId(varint(&mut buf)? as u32);
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
pub(crate) type Indices<'a, 'g> = dyn FnMut(&'g KernelNode) -> (u32, u32, u32) + 'a;

/// Appends the body of a `Graph` message for `g`, nodes by table index.
pub(crate) fn put_graph<'g>(out: &mut Vec<u8>, g: &'g KernelGraph, indices: &mut Indices<'_, 'g>) {
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

fn put_node<'g>(out: &mut Vec<u8>, n: &'g KernelNode, indices: &mut Indices<'_, 'g>) {
    let (kernel, attrs, origin) = indices(n);
    if !n.name.is_empty() {
        put_len_delimited(out, 1, n.name.as_bytes());
    }
    put_varint(out, 3, class_number(n.class) as u64);
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The fields of an encoded message, each whole (key included).
    fn fields(mut buf: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while !buf.is_empty() {
            out.push(next_field(&mut buf).expect("well-formed").raw.to_vec());
        }
        out
    }

    /// `bytes`' fields reordered by `order` (indices taken modulo the field count; a field
    /// may come twice, which protobuf merges: scalars last-wins, repeated appended).
    fn reordered(bytes: &[u8], order: &[usize]) -> Vec<u8> {
        let f = fields(bytes);
        let mut out = Vec::new();
        if f.is_empty() {
            return out;
        }
        for &k in order {
            out.extend_from_slice(&f[k % f.len()]);
        }
        out
    }

    fn node_message() -> impl Strategy<Value = pb::Node> {
        (
            "[a-z0-9/_]{0,40}",
            0i32..4,
            prop::collection::vec((any::<u32>(), 0u32..300), 0..6),
            any::<u32>(),
            prop::collection::vec(any::<u32>(), 0..4),
            any::<i64>(),
            (any::<u32>(), any::<u32>(), any::<u32>()),
        )
            .prop_map(
                |(name, class, inputs, outputs, control, priority, idx)| pb::Node {
                    name,
                    class,
                    inputs: inputs
                        .into_iter()
                        .map(|(node, output)| pb::ValueRef { node, output })
                        .collect(),
                    outputs,
                    control_inputs: control,
                    priority,
                    origin_index: idx.0,
                    kernel_index: idx.1,
                    attrs_index: idx.2,
                    ..Default::default()
                },
            )
    }

    proptest! {
        #[test]
        fn varint_agrees_with_prost(bytes in prop::collection::vec(any::<u8>(), 0..12)) {
            let (mut a, mut b) = (&bytes[..], &bytes[..]);
            let ours = varint(&mut a);
            let theirs = prost::encoding::decode_varint(&mut b).ok();
            prop_assert_eq!(ours, theirs);
            if ours.is_some() {
                prop_assert_eq!(a.len(), b.len());
            }
        }

        #[test]
        fn node_reader_agrees_with_prost_in_any_field_order(
            m in node_message(),
            order in prop::collection::vec(0usize..64, 0..16),
            in_order in any::<bool>(),
        ) {
            let written = m.encode_to_vec();
            let bytes = if in_order { written } else { reordered(&written, &order) };
            let mut node = KernelNode::default();
            let rest = read_node(&bytes, &mut node).expect("the reader takes every field");
            let (want, want_rest) = from_message(pb::Node::decode(&bytes[..]).unwrap());
            prop_assert_eq!(node, want);
            prop_assert_eq!(
                (rest.class, rest.origin_index, rest.kernel_index, rest.attrs_index),
                (want_rest.class, want_rest.origin_index, want_rest.kernel_index, want_rest.attrs_index)
            );
        }

        #[test]
        fn origin_reader_agrees_with_prost_in_any_field_order(
            graph in "[a-z]{0,30}",
            node in "[a-z0-9/_]{0,40}",
            op_type in "[A-Za-z]{0,12}",
            index in any::<u32>(),
            order in prop::collection::vec(0usize..64, 0..8),
        ) {
            let m = pb::Origin { graph, node, op_type, index };
            let bytes = reordered(&m.encode_to_vec(), &order);
            let theirs = pb::Origin::decode(&bytes[..]).unwrap();
            let ours = read_origin(&bytes).expect("the reader takes every field");
            prop_assert_eq!(
                (ours.graph.as_str(), ours.node.as_str(), ours.op_type.as_str(), ours.index),
                (theirs.graph.as_str(), theirs.node.as_str(), theirs.op_type.as_str(), theirs.index)
            );
        }
    }
}
