//! The map under a ComputeGraph's attribute maps ([`AttrMap`](crate::om::graph::AttrMap)):
//! string keys, entries sorted by key in one vector of exactly their number.
//!
//! Why not a `BTreeMap`: a graph holds one map per node and per tensor descriptor, and
//! nearly every one is small (GE writes five attributes on every descriptor). A B-tree's
//! smallest node has room for eleven entries, some 700 bytes for `(String, V)`, so
//! on a graph of 10,000 nodes (some 50,000 descriptors) the maps alone were 45 MB, most of
//! it empty slots, and a large share of reading and lowering the graph was the kernel
//! zeroing those pages. Sorted in a vector, a map of five costs its five entries. Lookups
//! are binary searches (as fast as the tree's at these sizes); an insert into the middle
//! moves the entries after it, which for maps of tens of entries is a few words.
//!
//! Iteration is in key order and an insert replaces an existing key's value, as with the
//! `BTreeMap` this replaces, so every map built, compared or written is the same.
//!
//! The vector is shared, copy-on-write: a clone is a reference count, and a change to a
//! shared map copies its entries first. That lets a reader keep one copy of the many
//! equal descriptor maps of a graph (`om::intern`).

use std::fmt;
use std::sync::Arc;

/// Name to value, in name order. See the module docs.
///
/// The entries are shared: cloning a map is a reference count, and a mutation copies the
/// entries only when another map still shares them (`Arc::make_mut`). Most of a large
/// graph's descriptors carry the same five format attributes, and a reader that interns
/// them keeps one copy for all of them. An empty map allocates nothing.
#[derive(Clone)]
pub struct SortedMap<V> {
    entries: Option<Arc<Vec<Entry<V>>>>,
}

type Entry<V> = (String, V);

impl<V> Default for SortedMap<V> {
    fn default() -> Self {
        SortedMap { entries: None }
    }
}

impl<V: PartialEq> PartialEq for SortedMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.same(other) || self.entries() == other.entries()
    }
}

impl<V> SortedMap<V> {
    pub fn new() -> Self {
        SortedMap::default()
    }

    fn entries(&self) -> &[Entry<V>] {
        self.entries.as_deref().map_or(&[], Vec::as_slice)
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries()
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// Whether both maps are one shared set of entries (or both empty): then they are
    /// equal without a look at the entries.
    pub fn same(&self, other: &Self) -> bool {
        match (&self.entries, &other.entries) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    /// The address of the shared entries, `None` for an empty map: equal for two maps
    /// exactly when [`SortedMap::same`] holds and they are not empty, and stable while
    /// some map holds the entries, so a writer can keep what it made of a map by it.
    pub fn id(&self) -> Option<usize> {
        self.entries.as_ref().map(|a| Arc::as_ptr(a) as usize)
    }

    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        self.find(key).ok().map(|i| &self.entries()[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// The entries in key order.
    pub fn iter(&self) -> Iter<'_, V> {
        self.entries().iter().map(|(k, v)| (k, v))
    }

    /// The `i`-th entry in key order.
    pub fn get_index(&self, i: usize) -> Option<(&String, &V)> {
        self.entries().get(i).map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries().iter().map(|(k, _)| k)
    }

    fn from_sorted(entries: Vec<Entry<V>>) -> Self {
        SortedMap {
            entries: (!entries.is_empty()).then(|| Arc::new(entries)),
        }
    }
}

impl<V: Clone> SortedMap<V> {
    /// The entries to change: copied first if another map shares them.
    fn entries_mut(&mut self) -> &mut Vec<Entry<V>> {
        Arc::make_mut(self.entries.get_or_insert_with(Default::default))
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let i = self.find(key).ok()?;
        Some(&mut self.entries_mut()[i].1)
    }

    /// Sets `key` to `value`; the value it had, if any.
    pub fn insert(&mut self, key: String, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries_mut()[i].1, value)),
            Err(i) => {
                let entries = self.entries_mut();
                // Maps are small and mostly built whole; one more slot at a time keeps
                // an inserted-into map at its exact size too.
                entries.reserve_exact(1);
                entries.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        let i = self.find(key).ok()?;
        let v = self.entries_mut().remove(i).1;
        if self.is_empty() {
            self.entries = None;
        }
        Some(v)
    }

    pub fn clear(&mut self) {
        self.entries = None;
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        let entries: &mut [Entry<V>] = match self.entries {
            Some(_) => self.entries_mut(),
            None => &mut [],
        };
        entries.iter_mut().map(|(_, v)| v)
    }
}

/// [`SortedMap::iter`].
pub type Iter<'a, V> =
    std::iter::Map<std::slice::Iter<'a, Entry<V>>, fn(&'a Entry<V>) -> (&'a String, &'a V)>;

/// `map["key"]`: the value, or a panic when the key is absent (as `BTreeMap`'s).
impl<V> std::ops::Index<&str> for SortedMap<V> {
    type Output = V;
    fn index(&self, key: &str) -> &V {
        self.get(key).expect("no entry of that name")
    }
}

impl<V: fmt::Debug> fmt::Debug for SortedMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Entries in any order; of equal keys the last wins, as inserting them one by one would
/// leave it. Entries already in order (a GE map being typed) are taken as they come, in a
/// vector of their exact number.
impl<V> FromIterator<(String, V)> for SortedMap<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(iter: I) -> Self {
        let mut entries: Vec<Entry<V>> = iter.into_iter().collect();
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            // Stable, so equal keys keep their order; then the last of each run stays.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out: Vec<Entry<V>> = Vec::with_capacity(entries.len());
            for e in entries {
                match out.last_mut() {
                    Some(last) if last.0 == e.0 => *last = e,
                    _ => out.push(e),
                }
            }
            entries = out;
        }
        SortedMap::from_sorted(entries)
    }
}

impl<V: Clone> Extend<(String, V)> for SortedMap<V> {
    fn extend<I: IntoIterator<Item = (String, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

/// The entries by value: moved out when this map is their only holder, copied otherwise.
impl<V: Clone> IntoIterator for SortedMap<V> {
    type Item = (String, V);
    type IntoIter = std::vec::IntoIter<(String, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries
            .map(Arc::unwrap_or_clone)
            .unwrap_or_default()
            .into_iter()
    }
}

impl<'a, V> IntoIterator for &'a SortedMap<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = Iter<'a, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type AttrMap = SortedMap<i64>;

    fn int(v: i64) -> i64 {
        v
    }

    /// The map behaves as the `BTreeMap` it replaces: key order whatever the insertion
    /// order, an insert replacing a key's value, the last of equal keys collected.
    #[test]
    fn behaves_as_an_ordered_map() {
        let mut m = AttrMap::new();
        assert_eq!(m.insert("b".into(), int(2)), None);
        assert_eq!(m.insert("a".into(), int(1)), None);
        assert_eq!(m.insert("c".into(), int(3)), None);
        assert_eq!(m.insert("b".into(), int(20)), Some(int(2)));
        let keys: Vec<&str> = m.keys().map(String::as_str).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        assert_eq!(m.get("b"), Some(&int(20)));
        assert_eq!(m.get("d"), None);
        assert!(m.contains_key("c"));
        assert_eq!(m.remove("a"), Some(int(1)));
        assert_eq!(m.remove("a"), None);
        assert_eq!(m.len(), 2);

        let collected: AttrMap = [("z", 1), ("x", 2), ("z", 3), ("y", 4), ("x", 5)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), int(v)))
            .collect();
        let entries: Vec<(&str, &i64)> = collected.iter().map(|(k, v)| (k.as_str(), v)).collect();
        assert_eq!(entries, [("x", &int(5)), ("y", &int(4)), ("z", &int(3))]);

        let mut inserted = AttrMap::new();
        for (k, v) in [("z", 1), ("x", 2), ("z", 3), ("y", 4), ("x", 5)] {
            inserted.insert(k.to_string(), int(v));
        }
        assert_eq!(inserted, collected);
    }

    /// A map typed from GE's (already in key order) is one vector of its exact size.
    #[test]
    fn sorted_entries_are_taken_as_they_come() {
        let m: AttrMap = (0..5).map(|i| (format!("k{i}"), int(i))).collect();
        assert_eq!(m.entries.as_ref().unwrap().capacity(), 5);
        assert_eq!(m.get("k3"), Some(&int(3)));
    }
}
