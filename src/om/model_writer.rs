//! Writing a typed ComputeModel as an OM's MODEL_DEF fast: straight from the typed graph to
//! wire bytes, op by op, with the work spread over the cores. The inverse of `om::wire`.
//!
//! The plain way, `ir::into_model_def` then `om_writer::build_om`, builds every op as a
//! GE IR `OpDef` (a B-tree per attribute map, a string per key, per port name), compresses
//! the attribute names by rebuilding each map with new keys, and has prost encode the
//! whole `ModelDef`, which sizes every nested message once per level above it: on a graph
//! of 10,000 nodes that was more than half of `rt2 compile`. Here a first pass over the
//! graph in GE's `GetAllNodes` order does what depends on order (the weights' offsets and
//! the compression dictionaries, [`Plan`]); then each graph's ops are written by hand
//! ([`crate::proto::put`]) in chunks on the pool, reading the finished plan. A descriptor's
//! attribute map is shared by many descriptors (`om::intern`), so its encoded entries are
//! kept by the map's address and copied for the next descriptor that shares it.
//!
//! The bytes are exactly those of the plain way (`om_writer::build_om_from` says so, a test
//! holds it on fixtures of every kind): fields in number order, proto3 defaults left out,
//! `repeated` scalars packed, map entries in key order (the compressed key's, when
//! compressed), and the few message types rt2 does not type (named attributes, graphs in
//! attributes, the attribute groups, the untyped fields of an op or descriptor) encoded
//! by prost in place.

use std::borrow::Cow;
use std::collections::HashMap;

use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint};
use rayon::prelude::*;

use super::compress::{self, Builder, Strings, is_list_string, needs_tidy, tidy_op_attrs};
use super::graph::{AttrMap, AttrValue, ListAttr, Tensor};
use super::ir::FlatGraph;
use super::weights::{Placer, WEIGHTS_ATTR};
use super::{ComputeGraph, ComputeNode, DataType, OutPort, Shape, TensorDesc};
use crate::proto::ge_ir::attr_def::list_value::ListValueType;
use crate::proto::ge_ir::{GraphDef, TensorDescriptor};
use crate::proto::put::{
    put_bytes, put_len_delimited, put_message, put_packed_floats, put_packed_varints, put_varint,
    put_varint_always,
};

/// Ops per piece of work on the pool: large enough that a chunk's set-up (its buffer, its
/// share of the map cache) is noise, small enough to balance two cores on small graphs.
const CHUNK: usize = 256;

/// What the ops' encoding needs from a pass over the whole model in `GetAllNodes` order.
pub(crate) struct Plan {
    /// Per graph, per op: a placed Const's `data_offset` and `weight_size`.
    weights: Vec<Vec<Option<(i64, i64)>>>,
    /// The compression dictionaries, when compressing.
    dict: Option<Keys>,
}

/// The compression dictionaries, with each name's compressed key and that key's rank
/// among all the keys (a compressed map's entries go in key order).
struct Keys {
    b: Builder,
    keys: Vec<Vec<u8>>,
    ranks: Vec<u32>,
}

impl Plan {
    /// Places the weights of `graphs` (into the returned [`Placer`]) and, with `compress`,
    /// builds the compression dictionaries, visiting the ops as `place_weights` and
    /// `compress` visit the GE IR ops of the same model.
    pub(crate) fn new(graphs: &[FlatGraph], compress: bool) -> (Plan, Placer) {
        let calls: Vec<(&str, Vec<&[String]>)> = graphs
            .iter()
            .map(|f| {
                let calls = f.calls.iter().map(Vec::as_slice).collect();
                (f.graph.name.as_str(), calls)
            })
            .collect();
        let mut weights: Vec<Vec<Option<(i64, i64)>>> = graphs
            .iter()
            .map(|f| vec![None; f.graph.nodes.len()])
            .collect();
        let mut placer = Placer::default();
        let mut dict = compress.then(Builder::default);
        // A descriptor map seen once has given the dictionaries all it has: seeing it again
        // finds every name and value already there.
        let mut seen_maps = std::collections::HashSet::new();
        for (g, o) in compress::all_nodes_order(&calls) {
            let n = &graphs[g].graph.nodes[o];
            if Placer::places(&n.op_type)
                && let Some(AttrValue::Tensor(t)) = n.attrs.get(WEIGHTS_ATTR)
            {
                let at = placer.place(t.data.clone());
                weights[g][o] = Some((at as i64, t.data.len() as i64));
            }
            placer.next_op();
            let Some(b) = dict.as_mut() else { continue };
            for (k, v) in op_attrs(n, true).iter() {
                b.see(k, strings(v));
            }
            for d in n.input_descs.iter().chain(&n.output_descs) {
                if d.attrs.id().is_some_and(|id| !seen_maps.insert(id)) {
                    continue;
                }
                for (k, v) in d.attrs.iter() {
                    b.see(k, strings(v));
                }
            }
        }
        let dict = dict.map(|b| {
            let keys: Vec<Vec<u8>> = (0..b.names().len())
                .map(|i| compress::encode_key(i as u64).into_bytes())
                .collect();
            let mut by_key: Vec<usize> = (0..keys.len()).collect();
            by_key.sort_unstable_by(|&x, &y| keys[x].cmp(&keys[y]));
            let mut ranks = vec![0; keys.len()];
            for (rank, i) in by_key.into_iter().enumerate() {
                ranks[i] = rank as u32;
            }
            Keys { b, keys, ranks }
        });
        (Plan { weights, dict }, placer)
    }

    /// The dictionaries, to be stored in the model's attributes.
    pub(crate) fn into_dictionary(self) -> Option<Builder> {
        self.dict.map(|k| k.b)
    }

    fn dict(&self) -> Option<Dict<'_>> {
        self.dict.as_ref()
    }
}

/// The finished dictionaries, read by the encoding threads.
type Dict<'a> = &'a Keys;

impl Keys {
    /// The index of an attribute name in the dictionary. The plan saw every name the ops
    /// hold.
    fn name(&self, name: &str) -> u32 {
        let i = self.b.name_at(name);
        debug_assert!(i.is_some(), "the plan saw attribute {name:?}");
        i.unwrap_or(0) as u32
    }

    /// The index of a string value. The plan saw every value the ops hold.
    fn value(&self, s: &[u8]) -> u64 {
        let i = self.b.value_at(s);
        debug_assert!(i.is_some(), "the plan saw a string value");
        i.unwrap_or(0) as u64
    }
}

/// An op's attributes as compression sees them: tidied as GE tidies them first.
fn op_attrs(n: &ComputeNode, compress: bool) -> Cow<'_, AttrMap> {
    if compress && needs_tidy(&n.name, n.attrs.keys().map(String::as_str)) {
        let mut attrs = n.attrs.clone();
        tidy_op_attrs(&n.name, &mut attrs);
        Cow::Owned(attrs)
    } else {
        Cow::Borrowed(&n.attrs)
    }
}

fn strings(v: &AttrValue) -> Strings<'_> {
    match v {
        AttrValue::Str(s) => Strings::One(s),
        AttrValue::List(ListAttr::Str(l)) => Strings::List(l),
        AttrValue::RawList(l) if is_list_string(l) => Strings::List(&l.s),
        _ => Strings::No,
    }
}

/// What one thread keeps between ops.
#[derive(Default)]
struct Cache {
    /// Encoded descriptor attribute maps by (map address, compressed). Only descriptors'
    /// maps are kept: they are the ones `om::intern` shares; an op's own map is rarely
    /// shared, and a tidied one is gone after its op, when its address may come back.
    maps: HashMap<(usize, bool), Vec<u8>>,
    /// A compressed map's entries as (key rank, name index, position), to be sorted.
    order: Vec<(u32, u32, u32)>,
}

/// The body of graph `g` of `graphs` as a `GraphDef` message: what prost writes for the
/// graph `ir::into_model_def` makes of it, compressed and with its weights placed as
/// `om_writer::build_om` does when `plan` says so.
pub(crate) fn graph_body(graphs: &[FlatGraph], g: usize, plan: &Plan) -> Vec<Vec<u8>> {
    let flat = &graphs[g];
    let graph = &flat.graph;
    let port = |p: &OutPort| {
        crate::om::ir::port_name(&graph.nodes[p.node.index()].name, i64::from(p.index))
    };
    // GraphDef: name 1, input 4, output 5, op 6, attr 11, attr_groups 12.
    let head = GraphDef {
        name: graph.name.clone(),
        input: graph.inputs.iter().map(port).collect(),
        output: graph.outputs.iter().map(port).collect(),
        ..GraphDef::default()
    };
    let tail = GraphDef {
        attr: crate::om::ir::attrs_to_proto(graph.attrs.clone()),
        attr_groups: graph.attr_groups.clone(),
        ..GraphDef::default()
    };
    let dict = plan.dict();
    let weights = &plan.weights[g];
    let ops: Vec<Vec<u8>> = graph
        .nodes
        .par_chunks(CHUNK)
        .zip(flat.calls.par_chunks(CHUNK))
        .zip(weights.par_chunks(CHUNK))
        .map_init(Cache::default, |cache, ((nodes, calls), weights)| {
            let mut out = Vec::with_capacity(nodes.len() * 512);
            for ((n, calls), w) in nodes.iter().zip(calls).zip(weights) {
                let mut op = Op { graph, dict, cache };
                put_message(&mut out, 6, |out| op.put(out, n, calls, *w));
            }
            out
        })
        .collect();
    let mut pieces = Vec::with_capacity(ops.len() + 2);
    pieces.push(head.encode_to_vec());
    pieces.extend(ops);
    pieces.push(tail.encode_to_vec());
    pieces
}

/// Writes one op: its graph (for port names), the dictionaries, the thread's cache.
struct Op<'a, 'c> {
    graph: &'a ComputeGraph,
    dict: Option<Dict<'a>>,
    cache: &'c mut Cache,
}

impl Op<'_, '_> {
    /// An `OpDef` body: name 1, type 2, input 5, attr 10, attr_groups 11, has_out_attr 20,
    /// id 21, stream_id 22, input_name 23 .. is_input_const 32, input_desc 33, output_desc
    /// 34, subgraph_name 35. The fields rt2 does not type come from the node's `rest`.
    fn put(&mut self, out: &mut Vec<u8>, n: &ComputeNode, calls: &[String], w: Option<(i64, i64)>) {
        use prost::encoding::{bool as pbool, int64, message, string};
        let graph = self.graph;
        put_bytes(out, 1, n.name.as_bytes());
        put_bytes(out, 2, n.op_type.as_bytes());
        for i in &n.inputs {
            match i {
                Some(p) => put_port(out, &graph.nodes[p.node.index()].name, i64::from(p.index)),
                None => put_len_delimited(out, 5, &[]),
            }
        }
        for c in &n.control_inputs {
            put_port(out, &graph.nodes[c.index()].name, -1);
        }
        let attrs = op_attrs(n, self.dict.is_some());
        self.put_attrs(out, 10, &attrs, self.dict, w);
        let rest = n.rest.as_deref();
        if let Some(r) = rest {
            if let Some(groups) = &r.attr_groups {
                message::encode(11, groups, out);
            }
            put_varint(out, 20, u64::from(r.has_out_attr));
        }
        put_varint(out, 21, n.id as u64);
        if let Some(r) = rest {
            put_varint(out, 22, r.stream_id as u64);
            string::encode_repeated(23, &r.input_name, out);
            string::encode_repeated(24, &r.src_name, out);
            int64::encode_packed(25, &r.src_index, out);
            string::encode_repeated(26, &r.dst_name, out);
            int64::encode_packed(27, &r.dst_index, out);
            int64::encode_packed(28, &r.input_i, out);
            int64::encode_packed(29, &r.output_i, out);
            int64::encode_packed(30, &r.workspace, out);
            int64::encode_packed(31, &r.workspace_bytes, out);
            pbool::encode_packed(32, &r.is_input_const, out);
        }
        for d in &n.input_descs {
            self.put_desc(out, 33, d, self.dict, None);
        }
        for d in &n.output_descs {
            self.put_desc(out, 34, d, self.dict, None);
        }
        for c in calls {
            put_len_delimited(out, 35, c.as_bytes());
        }
    }

    /// A `TensorDescriptor` field: name 1, dtype 2, shape 3, layout 4, attr 5,
    /// attr_groups 6, has_out_attr 9, size 10, weight_size 11, reuse_input 12,
    /// output_tensor 13, device_type 14, input_tensor 15, real_dim_cnt 16,
    /// reuse_input_index 17, data_offset 18, cmps_size 19, cmps_tab 20, cmps_tab_offset 21.
    /// `weight` is a placed Const's (`data_offset`, `weight_size`), which replace the
    /// descriptor's own.
    fn put_desc(
        &mut self,
        out: &mut Vec<u8>,
        tag: u32,
        d: &TensorDesc,
        dict: Option<Dict<'_>>,
        weight: Option<(i64, i64)>,
    ) {
        put_message(out, tag, |out| {
            let rest = d.rest.as_deref();
            let blank = TensorDescriptor::default();
            let r = rest.unwrap_or(&blank);
            put_bytes(out, 1, d.name.as_bytes());
            let dtype = if d.dtype == DataType::Undefined {
                r.dtype
            } else {
                d.dtype.to_proto()
            };
            put_varint(out, 2, dtype as u64);
            match &d.shape {
                Shape::Dims(dims) if dims.is_empty() && !d.has_shape => {}
                shape => put_message(out, 3, |out| match shape {
                    Shape::Dims(dims) => put_packed_varints(out, 1, dims.iter().map(|&x| x as u64)),
                    Shape::UnknownRank => put_packed_varints(
                        out,
                        1,
                        std::iter::once(crate::om::graph::UNKNOWN_RANK as u64),
                    ),
                }),
            }
            put_bytes(out, 4, d.layout.as_bytes());
            self.put_attrs(out, 5, &d.attrs, dict, None);
            if let Some(groups) = &r.attr_groups {
                prost::encoding::message::encode(6, groups, out);
            }
            let (data_offset, weight_size) = weight.unwrap_or((r.data_offset, r.weight_size));
            put_varint(out, 9, u64::from(r.has_out_attr));
            put_varint(out, 10, r.size as u64);
            put_varint(out, 11, weight_size as u64);
            put_varint(out, 12, u64::from(r.reuse_input));
            put_varint(out, 13, u64::from(r.output_tensor));
            put_bytes(out, 14, d.device_type.as_bytes());
            put_varint(out, 15, u64::from(r.input_tensor));
            put_varint(out, 16, r.real_dim_cnt as u64);
            put_varint(out, 17, r.reuse_input_index as u64);
            put_varint(out, 18, data_offset as u64);
            put_varint(out, 19, r.cmps_size as u64);
            put_bytes(out, 20, r.cmps_tab.as_bytes());
            put_varint(out, 21, r.cmps_tab_offset as u64);
        });
    }

    /// A map field of attributes: one entry message (key 1, value 2) per attribute, in key
    /// order; with `dict`, keys and string values compressed. `weight` places the `value`
    /// tensor of a Const. A descriptor's map (`tag` 5) is encoded once per thread and
    /// copied for the next descriptor that shares it.
    fn put_attrs(
        &mut self,
        out: &mut Vec<u8>,
        tag: u32,
        map: &AttrMap,
        dict: Option<Dict<'_>>,
        weight: Option<(i64, i64)>,
    ) {
        let Some(id) = map.id() else { return };
        let cache_key = (id, dict.is_some());
        let keep = tag == 5 && weight.is_none();
        if keep && let Some(bytes) = self.cache.maps.get(&cache_key) {
            out.extend_from_slice(bytes);
            return;
        }
        let start = out.len();
        match dict {
            None => {
                for (k, v) in map.iter() {
                    let w = weight.filter(|_| k == WEIGHTS_ATTR);
                    self.put_entry(out, tag, k.as_bytes(), v, None, w);
                }
            }
            Some(dict) => {
                // Taken out while the entries are written: a tensor among them writes its
                // descriptor's map, which finds an empty list and sorts in that one.
                let mut order = std::mem::take(&mut self.cache.order);
                order.clear();
                order.extend(map.keys().enumerate().map(|(pos, k)| {
                    let i = dict.name(k);
                    (dict.ranks[i as usize], i, pos as u32)
                }));
                order.sort_unstable();
                for &(_, i, pos) in &order {
                    let Some((name, v)) = map.get_index(pos as usize) else {
                        continue;
                    };
                    let w = weight.filter(|_| name == WEIGHTS_ATTR);
                    self.put_entry(out, tag, &dict.keys[i as usize], v, Some(dict), w);
                }
                self.cache.order = order;
            }
        }
        if keep {
            self.cache.maps.insert(cache_key, out[start..].to_vec());
        }
    }

    /// One map entry; an empty key and an unset value are left out, as prost leaves out
    /// a default key or value.
    fn put_entry(
        &mut self,
        out: &mut Vec<u8>,
        tag: u32,
        key: &[u8],
        v: &AttrValue,
        dict: Option<Dict<'_>>,
        weight: Option<(i64, i64)>,
    ) {
        put_message(out, tag, |out| {
            put_bytes(out, 1, key);
            if !matches!(v, AttrValue::Empty) {
                put_message(out, 2, |out| self.put_value(out, v, dict, weight));
            }
        });
    }

    /// An `AttrDef` body: its one `oneof` member. With `dict`, a string becomes its index
    /// (`i`) and a list of strings a list of indices, as compression rewrites them.
    fn put_value(
        &mut self,
        out: &mut Vec<u8>,
        v: &AttrValue,
        dict: Option<Dict<'_>>,
        weight: Option<(i64, i64)>,
    ) {
        use prost::encoding::message;
        match v {
            AttrValue::Str(s) => match dict {
                Some(d) => put_varint_always(out, 3, d.value(s)),
                None => put_len_delimited(out, 2, s),
            },
            AttrValue::Int(i) => put_varint_always(out, 3, *i as u64),
            AttrValue::Float(f) => {
                encode_key(4, WireType::ThirtyTwoBit, out);
                out.extend_from_slice(&f.to_le_bytes());
            }
            AttrValue::Bool(b) => put_varint_always(out, 5, u64::from(*b)),
            AttrValue::Bytes(b) => put_len_delimited(out, 7, b),
            AttrValue::List(l) => put_message(out, 1, |out| self.put_list(out, l, dict)),
            AttrValue::RawList(l) => match dict {
                Some(d) if is_list_string(l) => {
                    put_message(out, 1, |out| put_string_indices(out, &l.s, d));
                }
                _ => message::encode(1, &**l, out),
            },
            AttrValue::Func(f) => message::encode(10, &**f, out),
            AttrValue::TensorDesc(td) => self.put_desc(out, 11, td, None, None),
            AttrValue::Tensor(t) => self.put_tensor(out, 12, t, weight),
            AttrValue::Graph(g) => message::encode(13, &**g, out),
            AttrValue::ListListInt(l) => put_message(out, 14, |out| {
                for x in l {
                    put_message(out, 1, |out| {
                        put_packed_varints(out, 1, x.iter().map(|&i| i as u64))
                    });
                }
            }),
            AttrValue::DataType(d) => put_varint_always(out, 15, d.to_ge() as u64),
            AttrValue::RawDataType(d) => put_varint_always(out, 15, *d as u64),
            AttrValue::ListListFloat(l) => put_message(out, 16, |out| {
                for x in l {
                    put_message(out, 1, |out| put_packed_floats(out, 1, x));
                }
            }),
            AttrValue::Expression(e) => put_len_delimited(out, 17, e),
            AttrValue::Empty => {}
        }
    }

    /// A `TensorDef` field (desc 1, data 2); a placed weight's data is in WEIGHTS_DATA.
    fn put_tensor(&mut self, out: &mut Vec<u8>, tag: u32, t: &Tensor, weight: Option<(i64, i64)>) {
        put_message(out, tag, |out| {
            self.put_desc(out, 1, &t.desc, None, weight);
            if weight.is_none() {
                put_bytes(out, 2, &t.data);
            }
        });
    }

    /// A `ListValue` body: the one field of its type, then `val_type` 20.
    fn put_list(&mut self, out: &mut Vec<u8>, l: &ListAttr, dict: Option<Dict<'_>>) {
        use prost::encoding::message;
        let vt = match l {
            ListAttr::None => ListValueType::VtListNone,
            ListAttr::Str(v) => match dict {
                Some(d) => return put_string_indices(out, v, d),
                None => {
                    for s in v {
                        put_len_delimited(out, 2, s);
                    }
                    ListValueType::VtListString
                }
            },
            ListAttr::Int(v) => {
                put_packed_varints(out, 3, v.iter().map(|&i| i as u64));
                ListValueType::VtListInt
            }
            ListAttr::Float(v) => {
                put_packed_floats(out, 4, v);
                ListValueType::VtListFloat
            }
            ListAttr::Bool(v) => {
                put_packed_varints(out, 5, v.iter().map(|&b| u64::from(b)));
                ListValueType::VtListBool
            }
            ListAttr::Bytes(v) => {
                for b in v {
                    put_len_delimited(out, 7, b);
                }
                ListValueType::VtListBytes
            }
            ListAttr::TensorDesc(v) => {
                for d in v {
                    self.put_desc(out, 8, d, None, None);
                }
                ListValueType::VtListTensorDesc
            }
            ListAttr::Tensor(v) => {
                for t in v {
                    self.put_tensor(out, 9, t, None);
                }
                ListValueType::VtListTensor
            }
            ListAttr::Graph(v) => {
                for g in v {
                    message::encode(10, g, out);
                }
                ListValueType::VtListGraph
            }
            ListAttr::NamedAttrs(v) => {
                for na in v {
                    message::encode(11, na, out);
                }
                ListValueType::VtListNamedAttrs
            }
            ListAttr::DataType(v) => {
                put_packed_varints(out, 12, v.iter().map(|&d| d as u64));
                ListValueType::VtListDataType
            }
        };
        put_varint(out, 20, vt as i32 as u64);
    }
}

/// A compressed list of strings: the values' indices (`i` 3) and `VT_LIST_INT`.
fn put_string_indices(out: &mut Vec<u8>, strings: &[Vec<u8>], d: Dict<'_>) {
    put_packed_varints(out, 3, strings.iter().map(|s| d.value(s)));
    put_varint(out, 20, ListValueType::VtListInt as i32 as u64);
}

/// An op input (`input` 5): `<node>:<index>`, written without formatting machinery.
fn put_port(out: &mut Vec<u8>, node: &str, index: i64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut v = index.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if index < 0 {
        at -= 1;
        digits[at] = b'-';
    }
    let number = &digits[at..];
    encode_key(5, WireType::LengthDelimited, out);
    encode_varint((node.len() + 1 + number.len()) as u64, out);
    out.extend_from_slice(node.as_bytes());
    out.push(b':');
    out.extend_from_slice(number);
}
