//! OM attribute compression ("enum-ized" attribute names), as GE's
//! `ModelCompressManager` (`base/common/model/model_compress_manager.cc`) and
//! `EnumAttrUtils` (`graph_metadef/graph/utils/enum_attr_utils.cc`) do it.
//!
//! Owns the key encoding and the rewrite of op and tensor-desc attributes in a `ModelDef`.
//! It must not touch anything else in the model (graph structure, weights, model attrs
//! other than the four bookkeeping ones).
//!
//! A compressed model carries model attrs `om_compress_version` = 1, `attr_name_enum`
//! (list s), `attr_value_enum` (list s) and `attrs_use_string_value` (list b, one per
//! name). Each op attr key and each input/output tensor-desc attr key is `'\0'` followed by
//! the index into `attr_name_enum` in base 127, least significant digit first, each digit
//! stored as `digit + 1`. Where `attrs_use_string_value[idx]` is true, a string value was
//! replaced by its index into `attr_value_enum` (`s` -> `i`, list s -> list i).
//!
//! In a dynamic OM whose root graph is `_dynamic_shape_partitioned`, the sub-models
//! (models 1..n-1) share the root model's dictionary and carry none of their own: GE
//! compresses the root model over its whole graph, whose subgraphs are the very graphs the
//! sub-models hold, and saves the sub-models without compressing them again; its loader
//! copies the root's tables into each sub-model before decompressing it
//! (`ModelHelper::SetModelToGeModel`). [`compress_sharing`] writes that and
//! [`decompress_in_file`] reads it; docs/OM_MODELS.md section 2 has the sources.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::error::{OmError, Place, Result};
use crate::proto::ge_ir::attr_def::list_value::ListValueType;
use crate::proto::ge_ir::attr_def::{ListValue, Value};
use crate::proto::ge_ir::{AttrDef, GraphDef, ModelDef, OpDef, TensorDescriptor};

/// Model attr holding the compression version (`ATTR_MODEL_OM_COMPRESS_VERSION`).
pub const ATTR_OM_COMPRESS_VERSION: &str = "om_compress_version";
/// Model attr listing the original attribute names.
pub const ATTR_NAME_ENUM: &str = "attr_name_enum";
/// Model attr listing the string values replaced by indices.
pub const ATTR_VALUE_ENUM: &str = "attr_value_enum";
/// Model attr saying, per name, whether its values were strings.
pub const ATTRS_USE_STRING_VALUE: &str = "attrs_use_string_value";
/// `kNeedCompressVersion`.
const NEED_COMPRESS_VERSION: i64 = 1;
/// `kNoNeedCompress` (0xFFFFFFFFFFFFFFFF as int64).
const NO_NEED_COMPRESS: i64 = -1;
/// Base of the key digits: 127 values, since a digit is stored +1 to avoid NUL.
const BASE: u64 = 127;
/// Attributes GE deletes before compressing (`kUnusedAttrNames`).
const UNUSED_ATTRS: [&str; 3] = ["_l2fusion_ToOpStruct", "_op_slice_info", "_ir_attr_names"];
/// Root graph attr (`ATTR_NAME_DYNAMIC_SHAPE_PARTITIONED`) marking a model cut into
/// partitions by the dynamic-shape partitioner; its sub-models share the root's dictionary.
pub const ATTR_DYNAMIC_SHAPE_PARTITIONED: &str = "_dynamic_shape_partitioned";

/// Whether `model` is a partitioned root: its first graph has
/// [`ATTR_DYNAMIC_SHAPE_PARTITIONED`] = true (GE's `ModelHelper::IsPartitionedGraph`).
pub fn is_partitioned_root(model: &ModelDef) -> bool {
    model.graph.first().is_some_and(|g| {
        matches!(
            g.attr
                .get(ATTR_DYNAMIC_SHAPE_PARTITIONED)
                .and_then(|a| a.value.as_ref()),
            Some(Value::B(true))
        )
    })
}

/// Encodes a name index as a compressed key.
///
/// GE computes the digit count as `floor(log(n) / log(127)) + 1`; for `n = 0` that is
/// `log(0)`, which on the x86-64 builds GE ships converts to one digit (the test OM shows
/// index 0 as `"\x00\x01"`). This counts digits exactly instead, which agrees for every
/// index except where floating-point rounding makes GE's count wrong at exact powers of 127.
pub fn encode_key(index: u64) -> String {
    let mut key = String::from('\0');
    let mut n = index;
    loop {
        // A digit is at most 126, so digit + 1 is ASCII and the key is valid UTF-8.
        key.push(char::from((n % BASE) as u8 + 1));
        n /= BASE;
        if n == 0 {
            break;
        }
    }
    key
}

/// Decodes a compressed key; `None` for a plain key, `Some(Err)` for a key whose digits are
/// out of range or whose value overflows.
pub fn decode_key(key: &str) -> Option<std::result::Result<u64, String>> {
    let rest = key.strip_prefix('\0')?;
    let mut value: u64 = 0;
    let mut scale: u64 = 1;
    for (i, b) in rest.bytes().enumerate() {
        if b == 0 || u64::from(b) > BASE {
            return Some(Err(format!(
                "compressed attr key {key:?} has a bad digit {b} at {}",
                i + 1
            )));
        }
        let term = (u64::from(b) - 1).checked_mul(scale);
        match term.and_then(|t| value.checked_add(t)) {
            Some(v) => value = v,
            None => return Some(Err(format!("compressed attr key {key:?} overflows"))),
        }
        // The scale may overflow only after the last digit that can matter.
        scale = scale.saturating_mul(BASE);
    }
    Some(Ok(value))
}

struct Tables {
    names: Vec<String>,
    values: Vec<String>,
    use_string: Vec<bool>,
}

fn list_strings(model: &ModelDef, key: &str) -> Result<Vec<String>> {
    match model.attr.get(key).and_then(|a| a.value.as_ref()) {
        Some(Value::List(l)) => Ok(l
            .s
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()),
        None => Ok(Vec::new()),
        Some(_) => Err(OmError::graph(
            Place::new("model attrs"),
            format!("attr {key:?} is not a list"),
        )),
    }
}

/// Undoes attribute compression in place. Returns `false` (and changes nothing) when the
/// model is not compressed. Keys are restored in every graph's ops and their input/output
/// tensor descs, and, should a compressed key appear there, inside nested attribute values
/// (NamedAttrs, tensor descs, tensors, graphs in attrs). Removes the four bookkeeping model
/// attrs.
pub fn decompress(model: &mut ModelDef) -> Result<bool> {
    Ok(decompress_in_file(model, None)?.is_some())
}

/// Undoes compression in one model of an OM as GE's loader does
/// (`ModelHelper::SetModelToGeModel`): a sub-model of a partitioned root model is given
/// the root's tables as `root`, which replace whatever tables of its own it carries
/// (`ModelCompressManager::CpyModelAttrs2Dst`; those are dropped unread, as
/// `DeleteModelAttrs` does after decompressing); any other model (`root` = `None`) is
/// decompressed with its own tables. Removes the bookkeeping model attrs either way.
/// Returns the model's own tables (`None` when it has none or `root` was given): a root
/// model's are what its sub-models need.
pub fn decompress_in_file(
    model: &mut ModelDef,
    root: Option<&Decompressor>,
) -> Result<Option<Decompressor>> {
    let own = Decompressor::for_model(model, root)?;
    if let Some(d) = root.or(own.as_ref()) {
        for g in &mut model.graph {
            d.graph(g)?;
        }
    }
    Ok(own)
}

/// The tables of a compressed model, taken from its model attributes, to undo compression
/// one graph or one op at a time (a reader that converts ops as it decodes them needs
/// that).
pub struct Decompressor(Tables);

impl Decompressor {
    /// Reads the tables from the model attributes and removes the bookkeeping attributes.
    /// `None` when the model is not compressed.
    pub fn take_from(model: &mut ModelDef) -> Result<Option<Decompressor>> {
        let version = match model
            .attr
            .get(ATTR_OM_COMPRESS_VERSION)
            .and_then(|a| a.value.as_ref())
        {
            None => return Ok(None),
            Some(Value::I(v)) => *v,
            Some(_) => {
                return Err(OmError::graph(
                    Place::new("model attrs"),
                    format!("attr {ATTR_OM_COMPRESS_VERSION:?} is not an int"),
                ));
            }
        };
        if version == NO_NEED_COMPRESS {
            remove_bookkeeping(model);
            return Ok(None);
        }
        let names = list_strings(model, ATTR_NAME_ENUM)?;
        let values = list_strings(model, ATTR_VALUE_ENUM)?;
        let use_string = match model
            .attr
            .get(ATTRS_USE_STRING_VALUE)
            .and_then(|a| a.value.as_ref())
        {
            Some(Value::List(l)) => l.b.clone(),
            None => Vec::new(),
            Some(_) => {
                return Err(OmError::graph(
                    Place::new("model attrs"),
                    format!("attr {ATTRS_USE_STRING_VALUE:?} is not a list"),
                ));
            }
        };
        // GetEnumAttrsFromModel requires one flag per name.
        if names.len() != use_string.len() {
            return Err(OmError::graph(
                Place::new("model attrs"),
                format!(
                    "{} attr names but {} string-value flags",
                    names.len(),
                    use_string.len()
                ),
            ));
        }
        remove_bookkeeping(model);
        Ok(Some(Decompressor(Tables {
            names,
            values,
            use_string,
        })))
    }

    /// [`Decompressor::take_from`] for a model of an OM: with `root` (a partitioned root
    /// model's tables, which a sub-model is decompressed with) the model's own
    /// bookkeeping attributes are removed unread and `None` is returned; see
    /// [`decompress_in_file`].
    pub fn for_model(
        model: &mut ModelDef,
        root: Option<&Decompressor>,
    ) -> Result<Option<Decompressor>> {
        if root.is_some() {
            remove_bookkeeping(model);
            return Ok(None);
        }
        Decompressor::take_from(model)
    }

    /// Undoes compression in one op of graph `graph`: its attributes and its input and
    /// output descriptors' attributes.
    pub fn op(&self, op: &mut OpDef, graph: &str) -> Result<()> {
        decompress_op(op, graph, &self.0)
    }

    /// Undoes compression in a graph's own attributes (not its ops).
    pub fn graph_attrs(&self, g: &mut GraphDef) -> Result<()> {
        decompress_map(&mut g.attr, &self.0, &Place::graph(&g.name))
    }

    /// Undoes compression in a whole graph.
    pub fn graph(&self, g: &mut GraphDef) -> Result<()> {
        decompress_graph(g, &self.0)
    }
}

fn decompress_op(op: &mut OpDef, graph: &str, t: &Tables) -> Result<()> {
    let place = Place::node(graph, &op.name);
    decompress_map(&mut op.attr, t, &place)?;
    for td in op.input_desc.iter_mut().chain(op.output_desc.iter_mut()) {
        decompress_td(td, t, &place)?;
    }
    Ok(())
}

fn decompress_graph(g: &mut GraphDef, t: &Tables) -> Result<()> {
    for op in &mut g.op {
        decompress_op(op, &g.name, t)?;
    }
    decompress_map(&mut g.attr, t, &Place::graph(&g.name))
}

fn remove_bookkeeping(model: &mut ModelDef) {
    for k in [
        ATTR_OM_COMPRESS_VERSION,
        ATTR_NAME_ENUM,
        ATTR_VALUE_ENUM,
        ATTRS_USE_STRING_VALUE,
    ] {
        model.attr.remove(k);
    }
}

fn decompress_td(td: &mut TensorDescriptor, t: &Tables, place: &Place) -> Result<()> {
    decompress_map(&mut td.attr, t, place)
}

fn decompress_map(map: &mut BTreeMap<String, AttrDef>, t: &Tables, place: &Place) -> Result<()> {
    if map.keys().any(|k| k.starts_with('\0')) {
        let old = std::mem::take(map);
        for (key, mut value) in old {
            let name = match decode_key(&key) {
                None => {
                    map.insert(key, value);
                    continue;
                }
                Some(Err(msg)) => return Err(OmError::graph(place.clone(), msg)),
                Some(Ok(idx)) => idx,
            };
            let idx = usize::try_from(name)
                .ok()
                .filter(|&i| i < t.names.len())
                .ok_or_else(|| {
                    OmError::graph(
                        place.clone(),
                        format!(
                            "compressed attr key index {name} out of range ({} names)",
                            t.names.len()
                        ),
                    )
                })?;
            let real = t.names[idx].clone();
            if t.use_string[idx] {
                value = restore_string(value, t, place, &real)?;
            }
            map.insert(real, value);
        }
    }
    for v in map.values_mut() {
        decompress_value(v, t, place)?;
    }
    Ok(())
}

fn value_string(t: &Tables, i: i64, place: &Place, name: &str) -> Result<Vec<u8>> {
    usize::try_from(i)
        .ok()
        .and_then(|i| t.values.get(i))
        .map(|s| s.as_bytes().to_vec())
        .ok_or_else(|| {
            OmError::graph(
                place.clone(),
                format!(
                    "attr {name:?}: value index {i} out of range ({} values)",
                    t.values.len()
                ),
            )
        })
}

fn restore_string(value: AttrDef, t: &Tables, place: &Place, name: &str) -> Result<AttrDef> {
    match value.value {
        Some(Value::I(i)) => Ok(AttrDef {
            value: Some(Value::S(value_string(t, i, place, name)?)),
        }),
        Some(Value::List(l)) if l.s.is_empty() => {
            let s =
                l.i.iter()
                    .map(|&i| value_string(t, i, place, name))
                    .collect::<Result<Vec<_>>>()?;
            Ok(AttrDef {
                value: Some(Value::List(Box::new(ListValue {
                    s,
                    val_type: ListValueType::VtListString as i32,
                    ..ListValue::default()
                }))),
            })
        }
        // DenumAttrs fails on any other value type for a string-valued name.
        _ => Err(OmError::graph(
            place.clone(),
            format!("attr {name:?} should hold a string index but holds another type"),
        )),
    }
}

fn decompress_value(v: &mut AttrDef, t: &Tables, place: &Place) -> Result<()> {
    match &mut v.value {
        Some(Value::Func(na)) => decompress_map(&mut na.attr, t, place),
        Some(Value::Td(td)) => decompress_td(td, t, place),
        Some(Value::T(tensor)) => match &mut tensor.desc {
            Some(td) => decompress_td(td, t, place),
            None => Ok(()),
        },
        Some(Value::G(g)) => decompress_graph(g, t),
        Some(Value::List(l)) => {
            for na in &mut l.na {
                decompress_map(&mut na.attr, t, place)?;
            }
            for td in &mut l.td {
                decompress_td(td, t, place)?;
            }
            for tensor in &mut l.t {
                if let Some(td) = &mut tensor.desc {
                    decompress_td(td, t, place)?;
                }
            }
            for g in &mut l.g {
                decompress_graph(g, t)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The dictionaries of a compression as it goes: attribute names and string values in
/// first-use order, and each name's string flag. [`compress`] feeds it op by op and
/// rewrites as it goes; `om::model_writer` feeds it a whole typed graph first
/// ([`Builder::see`]), then encodes the ops on several threads with the finished
/// dictionaries ([`Builder::name_at`], [`Builder::value_at`]).
#[derive(Default)]
pub(crate) struct Builder {
    names: Vec<String>,
    name_index: HashMap<String, usize>,
    values: Vec<String>,
    value_index: HashMap<String, i64>,
    use_string: Vec<bool>,
}

/// What an attribute value gives the value dictionary: its strings, when it is a string
/// (`s`) or a list of strings.
pub(crate) enum Strings<'a> {
    No,
    One(&'a [u8]),
    List(&'a [Vec<u8>]),
}

impl Strings<'_> {
    fn of(value: &AttrDef) -> Strings<'_> {
        match &value.value {
            Some(Value::S(s)) => Strings::One(s),
            Some(Value::List(l)) if is_list_string(l) => Strings::List(&l.s),
            _ => Strings::No,
        }
    }
}

impl Builder {
    fn value(&mut self, s: &[u8]) -> i64 {
        let s = String::from_utf8_lossy(s).into_owned();
        if let Some(&i) = self.value_index.get(&s) {
            return i;
        }
        let i = self.values.len() as i64;
        self.values.push(s.clone());
        self.value_index.insert(s, i);
        i
    }

    /// `EnumAttrs`'s bookkeeping for one attribute: its name's index, the name added when
    /// new (and its string flag decided by this first occurrence, as `UpdateStatus`
    /// does), and its string values added when new. Returns the name's index.
    pub(crate) fn see(&mut self, name: &str, strings: Strings<'_>) -> usize {
        let (idx, is_new) = match self.name_index.get(name) {
            Some(&i) => (i, false),
            None => {
                let i = self.names.len();
                self.names.push(name.to_owned());
                self.name_index.insert(name.to_owned(), i);
                (i, true)
            }
        };
        let is_string = match strings {
            Strings::No => false,
            Strings::One(s) => {
                self.value(s);
                true
            }
            Strings::List(list) => {
                for s in list {
                    self.value(s);
                }
                true
            }
        };
        if is_new {
            self.use_string.push(is_string);
        }
        idx
    }

    /// The index of a name [`Builder::see`] was given.
    pub(crate) fn name_at(&self, name: &str) -> Option<usize> {
        self.name_index.get(name).copied()
    }

    /// The index of a string value [`Builder::see`] was given.
    pub(crate) fn value_at(&self, s: &[u8]) -> Option<i64> {
        self.value_index
            .get(String::from_utf8_lossy(s).as_ref())
            .copied()
    }

    /// The names seen so far, in index order.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// `EnumAttrs`: the compressed key and value for one attribute.
    fn enum_attr(&mut self, name: String, value: AttrDef) -> (String, AttrDef) {
        let idx = self.see(&name, Strings::of(&value));
        let value = match value.value {
            Some(Value::S(s)) => AttrDef {
                value: Some(Value::I(self.value(&s))),
            },
            Some(Value::List(l)) if is_list_string(&l) => {
                let i = l.s.iter().map(|s| self.value(s)).collect();
                AttrDef {
                    value: Some(Value::List(Box::new(ListValue {
                        i,
                        val_type: ListValueType::VtListInt as i32,
                        ..ListValue::default()
                    }))),
                }
            }
            other => AttrDef { value: other },
        };
        (encode_key(idx as u64), value)
    }

    fn map(&mut self, map: &mut BTreeMap<String, AttrDef>) {
        // GetAllAttrs is a std::map, so attributes are visited in key order, as here.
        let old = std::mem::take(map);
        for (k, v) in old {
            let (k, v) = self.enum_attr(k, v);
            map.insert(k, v);
        }
    }
}

pub(crate) fn is_list_string(l: &ListValue) -> bool {
    l.val_type == ListValueType::VtListString as i32
        || (l.val_type == 0
            && !l.s.is_empty()
            && l.i.is_empty()
            && l.f.is_empty()
            && l.b.is_empty()
            && l.bt.is_empty()
            && l.td.is_empty()
            && l.t.is_empty()
            && l.g.is_empty()
            && l.na.is_empty()
            && l.dt.is_empty())
}

/// The kernel-name attributes [`tidy_op_attrs`] renames, by suffix.
const KERNEL_NAME_SUFFIXES: [&str; 2] = ["_kernelname", "_atomic_kernelname"];

/// An op's attribute map as [`tidy_op_attrs`] sees it: GE IR's, or the typed graph's.
pub(crate) trait AttrTable {
    type Value;
    /// Whether `key` holds a string (`s`).
    fn is_str(&self, key: &str) -> bool;
    fn take(&mut self, key: &str) -> Option<Self::Value>;
    fn put(&mut self, key: String, value: Self::Value);
}

impl AttrTable for BTreeMap<String, AttrDef> {
    type Value = AttrDef;
    fn is_str(&self, key: &str) -> bool {
        matches!(
            self.get(key).and_then(|a| a.value.as_ref()),
            Some(Value::S(_))
        )
    }
    fn take(&mut self, key: &str) -> Option<AttrDef> {
        self.remove(key)
    }
    fn put(&mut self, key: String, value: AttrDef) {
        self.insert(key, value);
    }
}

impl AttrTable for crate::om::graph::AttrMap {
    type Value = crate::om::graph::AttrValue;
    fn is_str(&self, key: &str) -> bool {
        matches!(self.get(key), Some(crate::om::graph::AttrValue::Str(_)))
    }
    fn take(&mut self, key: &str) -> Option<Self::Value> {
        self.remove(key)
    }
    fn put(&mut self, key: String, value: Self::Value) {
        self.insert(key, value);
    }
}

/// What GE does to an op's attributes before compressing them (`ModelCompressManager::
/// ProcessAttrsForOp`): `ProcessKernelName` / `ProcessAtomicKernelName`, by which
/// `<opname>_kernelname` becomes `_kernelname` (and the same for `_atomic_kernelname`)
/// unless the short name exists, in which case the prefixed copy is dropped; then the
/// unused attributes are deleted. GE also drops `ATTR_NAME_TBE_KERNEL_NAME_FOR_LOAD` here;
/// its string is not in the notes, so that attribute is left alone.
pub(crate) fn tidy_op_attrs<T: AttrTable>(op_name: &str, attrs: &mut T) {
    for suffix in KERNEL_NAME_SUFFIXES {
        let prefixed = format!("{op_name}{suffix}");
        if attrs.is_str(suffix) {
            attrs.take(&prefixed);
        } else if attrs.is_str(&prefixed)
            && let Some(v) = attrs.take(&prefixed)
        {
            attrs.put(suffix.to_string(), v);
        }
    }
    for name in UNUSED_ATTRS {
        attrs.take(name);
    }
}

/// Whether [`tidy_op_attrs`] would change an op named `op_name` whose attributes are
/// `keys`: only a key it deletes or a prefixed kernel name does.
pub(crate) fn needs_tidy<'a>(op_name: &str, mut keys: impl Iterator<Item = &'a str>) -> bool {
    keys.any(|k| {
        UNUSED_ATTRS.contains(&k)
            || KERNEL_NAME_SUFFIXES
                .iter()
                .any(|suffix| k.strip_prefix(op_name) == Some(suffix))
    })
}

/// The ops of a model in GE's `ComputeGraph::GetAllNodes` order (`ComputeGraphImpl::
/// AllGraphNodes` in graph_metadef `compute_graph.cc`): each op, then at once the direct
/// nodes of its subgraphs in `subgraph_name` order (GE pushes them to the front of its
/// work deque, names in reverse), recursively. Graphs no op refers to, which GE would not
/// visit, follow at the end so that every graph is covered once.
pub(crate) fn node_order(model: &ModelDef) -> Vec<(usize, usize)> {
    let graphs: Vec<(&str, Vec<&[String]>)> = model
        .graph
        .iter()
        .map(|g| {
            let calls = g.op.iter().map(|op| op.subgraph_name.as_slice()).collect();
            (g.name.as_str(), calls)
        })
        .collect();
    all_nodes_order(&graphs)
}

/// [`node_order`] of graphs given as their names and, per op, the names of the subgraphs
/// it calls.
pub(crate) fn all_nodes_order(graphs: &[(&str, Vec<&[String]>)]) -> Vec<(usize, usize)> {
    let by_name: HashMap<&str, usize> = graphs.iter().enumerate().map(|(i, g)| (g.0, i)).collect();
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(graphs.iter().map(|g| g.1.len()).sum());
    fn walk(
        graphs: &[(&str, Vec<&[String]>)],
        g: usize,
        by_name: &HashMap<&str, usize>,
        seen: &mut HashSet<usize>,
        out: &mut Vec<(usize, usize)>,
    ) {
        if !seen.insert(g) {
            return;
        }
        for (o, calls) in graphs[g].1.iter().enumerate() {
            out.push((g, o));
            for sub in *calls {
                if let Some(&s) = by_name.get(sub.as_str()) {
                    walk(graphs, s, by_name, seen, out);
                }
            }
        }
    }
    for g in 0..graphs.len() {
        walk(graphs, g, &by_name, &mut seen, &mut out);
    }
    out
}

/// Compresses attributes as GE's `ModelCompressManager::Compress` does: a model that
/// already has `om_compress_version` is left alone; ops are visited in `GetAllNodes` order;
/// per op, kernel-name attrs are normalised, the three unused attrs are deleted, op attrs
/// then input and then output tensor-desc attrs are enum-ized in key order. The bookkeeping
/// model attrs are added only if some attribute was compressed.
///
/// Lossy exactly where GE is: the deleted attrs, the kernel-name renames, and a name whose
/// first occurrence was not a string while a later one is.
pub fn compress(model: &mut ModelDef) {
    compress_sharing(model, &mut []);
}

/// Compresses a partitioned root model and its sub-models as GE's
/// `ModelHelper::SaveToOmRootModel` leaves them: one dictionary, built over the root's
/// ops (in `GetAllNodes` order, as [`compress`]) and then, going on with the same
/// dictionary, over each sub-model's ops, and stored on the root only. In GE the
/// sub-models' graphs are the root's subgraphs themselves, so compressing the root has
/// already rewritten them and they are saved without being compressed again; here they are
/// copies, so the same names get the same keys. A root that already has
/// `om_compress_version` is left alone, with its sub-models.
pub fn compress_sharing(root: &mut ModelDef, submodels: &mut [ModelDef]) {
    if root.attr.contains_key(ATTR_OM_COMPRESS_VERSION) {
        return;
    }
    let mut b = Builder::default();
    for model in std::iter::once(&mut *root).chain(submodels.iter_mut()) {
        b.model_ops(model);
    }
    b.store(&mut root.attr);
}

impl Builder {
    /// Enum-izes the attributes of every op of `model`, in `GetAllNodes` order.
    fn model_ops(&mut self, model: &mut ModelDef) {
        for (g, o) in node_order(model) {
            let op = &mut model.graph[g].op[o];
            tidy_op_attrs(&op.name, &mut op.attr);
            self.map(&mut op.attr);
            for td in op.input_desc.iter_mut().chain(op.output_desc.iter_mut()) {
                self.map(&mut td.attr);
            }
        }
    }

    /// `AddEnumAttrsToModel`: the bookkeeping model attrs, only if some attribute was
    /// compressed.
    pub(crate) fn store(self, model_attrs: &mut BTreeMap<String, AttrDef>) {
        if self.names.is_empty() {
            return;
        }
        let list_s = |v: Vec<String>| AttrDef {
            value: Some(Value::List(Box::new(ListValue {
                s: v.into_iter().map(String::into_bytes).collect(),
                val_type: ListValueType::VtListString as i32,
                ..ListValue::default()
            }))),
        };
        model_attrs.insert(
            ATTR_OM_COMPRESS_VERSION.into(),
            AttrDef {
                value: Some(Value::I(NEED_COMPRESS_VERSION)),
            },
        );
        model_attrs.insert(ATTR_NAME_ENUM.into(), list_s(self.names));
        model_attrs.insert(ATTR_VALUE_ENUM.into(), list_s(self.values));
        model_attrs.insert(
            ATTRS_USE_STRING_VALUE.into(),
            AttrDef {
                value: Some(Value::List(Box::new(ListValue {
                    b: self.use_string,
                    val_type: ListValueType::VtListBool as i32,
                    ..ListValue::default()
                }))),
            },
        );
    }
}

/// Whether [`compress`] then [`decompress`] gives `model` back. Not where GE's scheme loses
/// something: an attribute it deletes (`UNUSED_ATTRS`) or renames (`*_kernelname`), a name
/// whose values are strings in one place and not in another (the first occurrence decides
/// for all), a string list that holds other values too, a string value that is not UTF-8
/// (the value table holds text), bookkeeping attributes already there, or a graph
/// attribute whose key looks compressed.
pub fn round_trips(model: &ModelDef) -> bool {
    if [
        ATTR_OM_COMPRESS_VERSION,
        ATTR_NAME_ENUM,
        ATTR_VALUE_ENUM,
        ATTRS_USE_STRING_VALUE,
    ]
    .iter()
    .any(|k| model.attr.contains_key(*k))
    {
        return false;
    }
    let mut is_string: HashMap<&str, bool> = HashMap::new();
    for g in &model.graph {
        if g.attr.keys().any(|k| k.starts_with('\0')) {
            return false;
        }
        for op in &g.op {
            let maps = std::iter::once(&op.attr).chain(
                op.input_desc
                    .iter()
                    .chain(&op.output_desc)
                    .map(|td| &td.attr),
            );
            for (k, v) in maps.flat_map(|m| m.iter()) {
                if UNUSED_ATTRS.contains(&k.as_str()) || k.ends_with("_kernelname") {
                    return false;
                }
                let string = match &v.value {
                    Some(Value::S(s)) if std::str::from_utf8(s).is_err() => return false,
                    Some(Value::S(_)) => true,
                    Some(Value::List(l)) if is_list_string(l) => {
                        let only_s = ListValue {
                            s: l.s.clone(),
                            val_type: l.val_type,
                            ..ListValue::default()
                        };
                        if **l != only_s || l.s.iter().any(|s| std::str::from_utf8(s).is_err()) {
                            return false;
                        }
                        true
                    }
                    _ => false,
                };
                if *is_string.entry(k.as_str()).or_insert(string) != string {
                    return false;
                }
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::testdata;
    use proptest::prelude::*;

    #[test]
    fn key_encoding_matches_ge() {
        assert_eq!(encode_key(0), "\u{0}\u{1}");
        assert_eq!(encode_key(1), "\u{0}\u{2}");
        assert_eq!(encode_key(126), "\u{0}\u{7f}");
        assert_eq!(encode_key(127), "\u{0}\u{1}\u{2}");
        assert_eq!(encode_key(127 * 127), "\u{0}\u{1}\u{1}\u{2}");
        for i in [0u64, 1, 126, 127, 128, 16128, 16129, 1 << 40] {
            assert_eq!(decode_key(&encode_key(i)), Some(Ok(i)));
        }
        assert_eq!(decode_key("plain"), None);
        assert!(matches!(decode_key("\u{0}\u{0}"), Some(Err(_))));
        // Twenty digits of 126 overflow u64.
        let huge = format!("\u{0}{}", "\u{7f}".repeat(20));
        assert!(matches!(decode_key(&huge), Some(Err(_))));
    }

    #[test]
    fn compress_then_decompress_restores_the_fixture_model() {
        let orig = testdata::model_def("m");
        let mut m = orig.clone();
        compress(&mut m);
        assert_ne!(m, orig);
        let names = list_strings(&m, ATTR_NAME_ENUM).unwrap();
        assert!(names.contains(&"index".to_string()));
        let data = m.graph[0].op.iter().find(|o| o.r#type == "Data").unwrap();
        assert!(data.attr.keys().all(|k| k.starts_with('\0')));
        assert!(decompress(&mut m).unwrap());
        assert_eq!(m, orig);
        assert!(!decompress(&mut m).unwrap());
    }

    #[test]
    fn string_values_become_indices() {
        let mut m = testdata::model_def("m");
        let op = &mut m.graph[0].op[0];
        op.attr.insert(
            "mode".into(),
            AttrDef {
                value: Some(Value::S(b"fast".to_vec())),
            },
        );
        let orig = m.clone();
        compress(&mut m);
        let values = list_strings(&m, ATTR_VALUE_ENUM).unwrap();
        let fast = values.iter().position(|v| v == "fast").unwrap() as i64;
        assert!(
            m.graph[0].op[0]
                .attr
                .values()
                .any(|v| v.value == Some(Value::I(fast)))
        );
        decompress(&mut m).unwrap();
        assert_eq!(m, orig);
    }

    /// Found by the fuzz target `onnx` (docs/FUZZING.md): `axis` an integer on one op and
    /// a string on another came back an integer. GE does the same; `round_trips` says so.
    #[test]
    fn round_trips_tells_where_the_scheme_loses() {
        let orig = testdata::model_def("m");
        assert!(round_trips(&orig));
        let mut m = orig.clone();
        compress(&mut m);
        decompress(&mut m).unwrap();
        assert_eq!(m, orig);
        let s = |v: &[u8]| AttrDef {
            value: Some(Value::S(v.to_vec())),
        };
        let i = AttrDef {
            value: Some(Value::I(3)),
        };
        let mut mixed = orig.clone();
        mixed.graph[0].op[0].attr.insert("axis".into(), i);
        mixed.graph[0].op[1].attr.insert("axis".into(), s(b""));
        assert!(!round_trips(&mixed));
        let mut m = mixed.clone();
        compress(&mut m);
        decompress(&mut m).unwrap();
        assert_ne!(m, mixed, "the scheme loses the string, as GE's does");
        let mut not_utf8 = orig.clone();
        not_utf8.graph[0].op[0]
            .attr
            .insert("mode".into(), s(b"\xff"));
        assert!(!round_trips(&not_utf8));
        let mut deleted = orig;
        deleted.graph[0].op[0]
            .attr
            .insert("_op_slice_info".into(), s(b"x"));
        assert!(!round_trips(&deleted));
    }

    fn all_keys(m: &ModelDef) -> Vec<&str> {
        let mut keys = Vec::new();
        for op in m.graph.iter().flat_map(|g| &g.op) {
            keys.extend(op.attr.keys().map(String::as_str));
            for td in op.input_desc.iter().chain(&op.output_desc) {
                keys.extend(td.attr.keys().map(String::as_str));
            }
        }
        keys
    }

    /// GE's `SaveToOmRootModel` and `SetModelToGeModel`: a partitioned root's sub-models
    /// are compressed with the root's dictionary, carry none, and read back only with it.
    #[test]
    fn sub_models_of_a_partitioned_root_share_its_dictionary() {
        let (orig_root, orig_subs) = testdata::dynamic_root_models();
        assert!(is_partitioned_root(&orig_root));
        let (mut root, mut subs) = (orig_root.clone(), orig_subs.clone());
        compress_sharing(&mut root, &mut subs);
        let names = list_strings(&root, ATTR_NAME_ENUM).unwrap();
        assert!(names.contains(&"_parent_node_index".to_string()));
        for sub in &subs {
            assert!(!sub.attr.contains_key(ATTR_OM_COMPRESS_VERSION));
            assert!(!sub.attr.contains_key(ATTR_NAME_ENUM));
            let keys = all_keys(sub);
            assert!(!keys.is_empty() && keys.iter().all(|k| k.starts_with('\0')));
            // The root's copy of the sub-model's graph has the same keys.
            let copy = root
                .graph
                .iter()
                .find(|g| g.name == sub.graph[0].name)
                .unwrap();
            assert_eq!(copy, &sub.graph[0]);
            // Its own (missing) tables leave the names compressed, as rt2 read it before.
            let mut alone = sub.clone();
            assert!(decompress_in_file(&mut alone, None).unwrap().is_none());
            assert_eq!(&alone, sub);
        }
        let mut r = root.clone();
        let tables = decompress_in_file(&mut r, None).unwrap().unwrap();
        assert_eq!(r, orig_root);
        for (sub, orig) in subs.iter().zip(&orig_subs) {
            let mut s = sub.clone();
            // Tables a sub-model carries are replaced by the root's (CpyModelAttrs2Dst).
            s.attr.insert(
                ATTR_OM_COMPRESS_VERSION.into(),
                AttrDef {
                    value: Some(Value::I(1)),
                },
            );
            s.attr.insert(
                ATTR_NAME_ENUM.into(),
                AttrDef {
                    value: Some(Value::I(0)),
                },
            );
            assert!(decompress_in_file(&mut s, Some(&tables)).unwrap().is_none());
            assert_eq!(&s, orig);
        }
        // The sub-models add no names to the dictionary: the root holds their graphs.
        let mut plain = orig_root.clone();
        plain.graph[0].attr.remove(ATTR_DYNAMIC_SHAPE_PARTITIONED);
        assert!(!is_partitioned_root(&plain));
        let mut one = plain.clone();
        compress(&mut one);
        assert_eq!(list_strings(&one, ATTR_NAME_ENUM).unwrap(), names);
    }

    #[test]
    fn bad_index_is_an_error_naming_the_node() {
        let mut m = testdata::model_def("m");
        compress(&mut m);
        m.graph[0].op[0].attr.insert(
            encode_key(999),
            AttrDef {
                value: Some(Value::I(1)),
            },
        );
        let e = decompress(&mut m).unwrap_err().to_string();
        assert!(
            e.contains("node") && e.contains("index 999 out of range"),
            "{e}"
        );
    }

    fn arb_value() -> impl Strategy<Value = AttrDef> {
        prop_oneof![
            "[a-z]{0,6}".prop_map(|s| AttrDef {
                value: Some(Value::S(s.into_bytes()))
            }),
            any::<i64>().prop_map(|i| AttrDef {
                value: Some(Value::I(i))
            }),
            any::<bool>().prop_map(|b| AttrDef {
                value: Some(Value::B(b))
            }),
            proptest::collection::vec("[a-z]{0,4}", 0..3).prop_map(|v| AttrDef {
                value: Some(Value::List(Box::new(ListValue {
                    s: v.into_iter().map(String::into_bytes).collect(),
                    val_type: ListValueType::VtListString as i32,
                    ..ListValue::default()
                })))
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn round_trip_is_identity(
            attrs in proptest::collection::vec(
                proptest::collection::btree_map("[a-z_]{1,8}", arb_value(), 0..5), 1..5),
        ) {
            let mut m = testdata::model_def("p");
            // Keep each name's kind the same everywhere (GE flags a name by its first use)
            // and avoid the names GE deletes or renames.
            let mut kinds: HashMap<String, bool> = HashMap::new();
            for (i, map) in attrs.into_iter().enumerate() {
                let n_ops = m.graph[0].op.len();
                let op = &mut m.graph[0].op[i % n_ops];
                for (k, v) in map {
                    if UNUSED_ATTRS.contains(&k.as_str()) || k.ends_with("_kernelname") { continue; }
                    let is_s = matches!(&v.value, Some(Value::S(_)))
                        || matches!(&v.value, Some(Value::List(l)) if is_list_string(l));
                    let key = format!("{k}_{}", if is_s { "s" } else { "o" });
                    if *kinds.entry(key.clone()).or_insert(is_s) == is_s {
                        op.attr.insert(key, v);
                    }
                }
            }
            let orig = m.clone();
            compress(&mut m);
            prop_assert!(decompress(&mut m).unwrap());
            prop_assert_eq!(m, orig);
        }
    }
}
