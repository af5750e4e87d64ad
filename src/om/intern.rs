//! One shared copy of each distinct tensor-descriptor attribute map of a graph.
//!
//! GE writes the same format attributes on every descriptor (`origin_format`,
//! `origin_format_for_int`, `format_for_int`, `origin_shape_initialized`,
//! `origin_shape`), and a model's descriptors repeat a few layouts and shapes: on a graph
//! of 10,000 nodes some 50,000 descriptors carry a few hundred distinct maps. Typed one by
//! one, each map is its own entries, keys and values, most of the memory the ComputeGraph
//! takes. A reader hands each descriptor's map to an [`AttrInterner`], which returns the
//! copy it already holds of an equal map (a reference count, see
//! [`SortedMap`](crate::om::sorted_map::SortedMap)); the typed graph is the same value.
//!
//! Only maps whose values compare exactly are shared: strings, integers, booleans,
//! bytes, data types and lists of those. A float's `==` takes `0.0` for `-0.0` and no
//! NaN for itself, and sharing on it would change the bits written back; a map holding a
//! float, a tensor or a graph stays its own.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};

use smallvec::SmallVec;

use crate::om::graph::{AttrMap, AttrValue, ListAttr};

/// Equal attribute maps, one shared copy each. See the module docs.
#[derive(Default)]
pub struct AttrInterner {
    /// Maps by the hash of their entries; a bucket holds the (rare) maps whose hashes
    /// collide.
    table: HashMap<u64, SmallVec<[AttrMap; 1]>, foldhash::fast::FixedState>,
    /// The copy returned last: a map that is it (not just equal) is held already, and
    /// descriptors come in runs of one map (a reader that shares them itself, as the ONNX
    /// importer does, hands over the held copy again and again), which then cost a
    /// pointer comparison instead of a hash of every entry.
    last: AttrMap,
}

impl AttrInterner {
    pub fn new() -> Self {
        AttrInterner::default()
    }

    /// `map`, or the shared copy of an equal map this interner met before.
    pub fn intern(&mut self, map: AttrMap) -> AttrMap {
        if map.is_empty() || map.same(&self.last) {
            return map;
        }
        let Some(key) = exact_hash(&map) else {
            return map;
        };
        let bucket = self.table.entry(key).or_default();
        let held = match bucket.iter().find(|m| **m == map) {
            Some(same) => same.clone(),
            None => {
                bucket.push(map.clone());
                map
            }
        };
        self.last = held.clone();
        held
    }

    /// How many distinct maps are held.
    pub fn len(&self) -> usize {
        self.table.values().map(SmallVec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// A hash of the map's entries, or `None` when some value does not compare exactly.
fn exact_hash(map: &AttrMap) -> Option<u64> {
    let mut h = foldhash::fast::FixedState::default().build_hasher();
    for (k, v) in map {
        k.hash(&mut h);
        hash_value(v, &mut h)?;
    }
    Some(h.finish())
}

fn hash_value(v: &AttrValue, h: &mut impl Hasher) -> Option<()> {
    std::mem::discriminant(v).hash(h);
    match v {
        AttrValue::Str(b) | AttrValue::Bytes(b) | AttrValue::Expression(b) => b.hash(h),
        AttrValue::Int(i) | AttrValue::RawDataType(i) => i.hash(h),
        AttrValue::Bool(b) => b.hash(h),
        AttrValue::DataType(d) => d.hash(h),
        AttrValue::Empty => {}
        AttrValue::List(l) => {
            std::mem::discriminant(l).hash(h);
            match l {
                ListAttr::None => {}
                ListAttr::Str(v) | ListAttr::Bytes(v) => v.hash(h),
                ListAttr::Int(v) | ListAttr::DataType(v) => v.hash(h),
                ListAttr::Bool(v) => v.hash(h),
                _ => return None,
            }
        }
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format_attrs(layout: &str, dims: &[i64]) -> AttrMap {
        [
            ("origin_format", AttrValue::str(layout)),
            ("format_for_int", AttrValue::Int(2)),
            ("origin_shape_initialized", AttrValue::Bool(true)),
            (
                "origin_shape",
                AttrValue::List(ListAttr::Int(dims.to_vec())),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    #[test]
    fn equal_maps_share_one_copy_and_others_stay_their_own() {
        let mut interner = AttrInterner::new();
        let a = interner.intern(format_attrs("ND", &[1, 16]));
        let b = interner.intern(format_attrs("ND", &[1, 16]));
        let c = interner.intern(format_attrs("ND", &[1, 17]));
        let d = interner.intern(format_attrs("NCHW", &[1, 16]));
        assert!(a.same(&b));
        assert_eq!(a, b);
        assert!(!a.same(&c) && !a.same(&d) && !c.same(&d));
        assert_eq!(c.get("origin_shape").unwrap().as_ints(), Some(&[1, 17][..]));
        assert_eq!(interner.len(), 3);

        // Changing a shared map changes only the descriptor that holds it.
        let mut e = b.clone();
        e.insert("origin_format".into(), AttrValue::str("NHWC"));
        assert_eq!(a.get("origin_format").unwrap().as_str(), Some("ND"));
        assert_eq!(e.get("origin_format").unwrap().as_str(), Some("NHWC"));
        assert!(!e.same(&a));
    }

    /// `0.0 == -0.0`: a map holding a float is never shared, so its bits survive.
    #[test]
    fn maps_with_floats_are_not_shared() {
        let mut interner = AttrInterner::new();
        let float = |f: f32| -> AttrMap {
            [("f".to_string(), AttrValue::Float(f))]
                .into_iter()
                .collect()
        };
        let zero = interner.intern(float(0.0));
        let negative = interner.intern(float(-0.0));
        assert!(!zero.same(&negative));
        match negative.get("f") {
            Some(AttrValue::Float(f)) => assert!(f.is_sign_negative()),
            other => panic!("{other:?}"),
        }
        assert!(interner.is_empty());
    }
}
