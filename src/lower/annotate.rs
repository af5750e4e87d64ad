//! Every op's output descriptor as inference says it, as ATC's OMs carry it: lowering
//! infers each node's output dtype and shape (a dim unknown until run time stays -1), and
//! [`annotate`] writes them into the descriptors a model left untyped or unshaped, so an
//! OM `rt2 compile` writes reads in Netron with every edge typed, as ATC's do.
//!
//! Only what a descriptor does not say is filled: an undefined dtype, an unknown rank, a
//! -1 dim inference knows. A descriptor in a storage format (NC1HWC0, ...) is left alone:
//! lowering infers in the origin layout.

use std::collections::HashMap;

use crate::om::graph::{AttrMap, AttrValue, ComputeGraph, ListAttr, Shape, TensorDesc};
use crate::om::onnx::SYMBOLIC_DIMS_ATTR;
use crate::om::{ComputeModel, DataType};
use crate::ops::{OpRegistry, TensorMeta};

use super::attrs::{TensorFormat, model_dtype};
use super::convert::{Bind, GraphMetas, Lowering};
use super::error::LowerError;
use super::layout;

/// Per graph name, per node index: the node's output metas, from the last time lowering
/// lowered the graph. Layouts only append nodes to a graph, so a node of the model has
/// its index in the graph lowering saw.
type Metas<'a> = HashMap<&'a str, Vec<Option<&'a [Option<TensorMeta>]>>>;

/// Fills every output descriptor of `model`, and every input descriptor from its
/// producer's, from inference where it said less; how many descriptors changed. Ops
/// lowering cannot handle keep their descriptors.
pub fn annotate(model: &mut ComputeModel) -> Result<usize, LowerError> {
    let metas: Vec<GraphMetas> = {
        let reg = OpRegistry::new();
        let origin = layout::to_origin(model)?;
        let root = &origin.as_ref().root;
        let mut lw = Lowering::new(&reg);
        // Shapes alone are wanted: no weight is packed or transformed for its kernel,
        // which would copy every weight of the model for nothing.
        lw.pack_weights = false;
        lw.metas = Some(Vec::new());
        lw.graph(root, &root.name, &mut Bind::Root)?;
        let metas = lw.metas.take().unwrap_or_default();
        // The kernel graph made on the way is not wanted: it is freed on the pool while
        // this thread goes on (it is as large as a lowered model).
        let kernels = std::mem::take(&mut lw.b);
        rayon::spawn(move || drop(kernels));
        metas
    };
    let mut by_graph: Metas<'_> = HashMap::new();
    for (name, nodes) in &metas {
        let table = by_graph.entry(name.as_str()).or_default();
        if table.len() < nodes.len() {
            table.resize(nodes.len(), None);
        }
        for (slot, m) in table.iter_mut().zip(nodes) {
            if let Some(m) = m {
                *slot = Some(m.as_slice());
            }
        }
    }
    let mut filler = Filler::default();
    filler.graph(&mut model.root, &by_graph);
    Ok(filler.changed)
}

/// Fills descriptors; what it made of one shared attribute map for one shape serves
/// every descriptor sharing both (an imported graph shares one map among most of its
/// descriptors, and a change to a shared map copies it).
#[derive(Default)]
struct Filler {
    changed: usize,
    /// Attribute map -> (the map, the shape written -> the map with that shape written
    /// into it). A map is known by its address; each entry holds the map it was made of,
    /// so no other map can take that address while the entry stands. Keyed in two levels
    /// so that a lookup borrows the shape instead of building a key.
    maps: Memo<Vec<i64>, AttrMap>,
    /// Attribute map -> (the map, layout -> whether the formats say memory holds what
    /// inference describes), as above.
    plain: Memo<String, bool>,
}

/// Answers per attribute map (by address, holding the map) and key ([`memo`]).
type Memo<K, V> = foldhash::HashMap<usize, (AttrMap, foldhash::HashMap<K, V>)>;

impl Filler {
    fn graph(&mut self, g: &mut ComputeGraph, metas: &Metas<'_>) {
        let table = metas.get(g.name.as_str()).map_or(&[][..], Vec::as_slice);
        let meta = |node: usize, output: usize| {
            table
                .get(node)
                .copied()
                .flatten()
                .and_then(|ms| ms.get(output))
                .and_then(Option::as_ref)
        };
        for i in 0..g.nodes.len() {
            let n = &mut g.nodes[i];
            for (k, d) in n.output_descs.iter_mut().enumerate() {
                if let Some(m) = meta(i, k)
                    && self.fill(d, m)
                {
                    self.changed += 1;
                }
            }
            // An input's descriptor is its producer's output's, as GE keeps them;
            // descriptors one per input (not a GE graph's extra ones of unconnected
            // inputs).
            if n.input_descs.len() == n.inputs.len() {
                for (d, p) in n.input_descs.iter_mut().zip(&n.inputs) {
                    let Some(p) = p else { continue };
                    if let Some(m) = meta(p.node.index(), p.index as usize)
                        && self.fill(d, m)
                    {
                        self.changed += 1;
                    }
                }
            }
            for sub in &mut n.subgraphs {
                self.graph(sub, metas);
            }
        }
    }

    /// Whether `d`'s storage format is its origin format and one inference describes
    /// (NCHW, NHWC or ND).
    fn is_plain(&mut self, d: &TensorDesc) -> bool {
        let read = || {
            let format = TensorFormat::format_of(d);
            let origin = TensorFormat::named_origin_format(d).unwrap_or(format);
            format == origin && matches!(format, 0..=2)
        };
        match d.attrs.id() {
            Some(id) => memo(&mut self.plain, id, &d.attrs, d.layout.as_str(), read),
            None => read(),
        }
    }

    /// Fills what `d` leaves unsaid from `m`; whether anything changed.
    fn fill(&mut self, d: &mut TensorDesc, m: &TensorMeta) -> bool {
        // NCHW, NHWC or ND, the same as its origin: memory holds what inference describes.
        if !self.is_plain(d) {
            return false;
        }
        let mut changed = false;
        if d.dtype == DataType::Undefined
            && let Some(t) = model_dtype(m.dtype)
        {
            d.dtype = t;
            changed = true;
        }
        let Some(inferred) = &m.shape else {
            return changed;
        };
        let dims: Vec<i64> = match &d.shape {
            Shape::UnknownRank => inferred.to_vec(),
            Shape::Dims(have) if have.len() == inferred.len() => have
                .iter()
                .zip(inferred)
                .map(|(&h, &i)| if h < 0 && i >= 0 { i } else { h })
                .collect(),
            Shape::Dims(_) => return changed,
        };
        if matches!(&d.shape, Shape::Dims(have) if *have == dims) {
            return changed;
        }
        d.attrs = match d.attrs.id() {
            Some(id) => memo(&mut self.maps, id, &d.attrs, dims.as_slice(), || {
                with_shape(d.attrs.clone(), &dims)
            }),
            None => with_shape(AttrMap::new(), &dims),
        };
        d.shape = Shape::Dims(dims);
        true
    }
}

/// A [`Filler`] memo's answer for map `attrs` (whose address is `id`) and `key`: the one
/// made before, or `make`'s, kept. The lookup borrows `key`; only a miss copies it.
fn memo<K, Q, V>(
    table: &mut Memo<K, V>,
    id: usize,
    attrs: &AttrMap,
    key: &Q,
    make: impl FnOnce() -> V,
) -> V
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: ToOwned<Owned = K> + std::hash::Hash + Eq + ?Sized,
    V: Clone,
{
    let (_, answers) = table
        .entry(id)
        .or_insert_with(|| (attrs.clone(), Default::default()));
    if let Some(v) = answers.get(key) {
        return v.clone();
    }
    let v = make();
    answers.insert(key.to_owned(), v.clone());
    v
}

/// `attrs` with a descriptor's new shape `dims` written where it appears: the importer's
/// symbolic dim names (a dim now known has none) and GE's origin shape.
fn with_shape(mut attrs: AttrMap, dims: &[i64]) -> AttrMap {
    let names = match attrs.get(SYMBOLIC_DIMS_ATTR) {
        Some(AttrValue::List(ListAttr::Str(v))) if v.len() == dims.len() => Some(
            v.iter()
                .zip(dims)
                .map(|(name, &x)| if x >= 0 { Vec::new() } else { name.clone() })
                .collect::<Vec<_>>(),
        ),
        _ => None,
    };
    match names {
        Some(v) if v.iter().any(|s| !s.is_empty()) => {
            attrs.insert(SYMBOLIC_DIMS_ATTR.into(), AttrValue::List(ListAttr::Str(v)));
        }
        _ => {
            attrs.remove(SYMBOLIC_DIMS_ATTR);
        }
    }
    if attrs.contains_key("origin_shape") {
        attrs.insert(
            "origin_shape".into(),
            AttrValue::List(ListAttr::Int(dims.to_vec())),
        );
    }
    attrs
}
