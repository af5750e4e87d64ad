//! Attributes of a kernel or an op, and host tensors.
//!
//! One attribute type for the op library and the ExecuteGraph alike: lowering writes an
//! op's attributes once, and at run time the kernels hand them to the op's shape inference
//! and compute as they are, with no conversion per call.

use std::sync::Arc;

use bytes::Bytes;

use crate::ops::DType;

/// A tensor in host memory: a constant, a folded shape, a Const's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostTensor {
    pub dtype: DType,
    /// Dims; empty for a scalar.
    pub shape: Vec<i64>,
    /// Little-endian element bytes, `dtype.size()` per element.
    pub data: TensorBytes,
}

/// A host tensor's bytes: a buffer of its own, which a kernel resizes and rewrites from
/// one execution to the next, or a view of an immutable buffer shared with others.
///
/// Shared is how a model's weights travel: the imported graph, the ExecuteGraph lowered
/// from it and the executor's Const values all hold the one buffer the weight was read
/// into, where copies would hold a large model's weights three times over (and fault in
/// fresh pages for each). Reads see a byte slice either way; a write to a shared buffer
/// copies it first ([`TensorBytes::to_mut`]), as `Cow` does.
#[derive(Clone)]
pub enum TensorBytes {
    Owned(Vec<u8>),
    Shared(Bytes),
}

impl TensorBytes {
    /// The bytes to write in place: an owned buffer is handed out as it is (its capacity
    /// kept for reuse), a shared one is copied into a buffer of this tensor's own first.
    pub fn to_mut(&mut self) -> &mut Vec<u8> {
        if let TensorBytes::Shared(b) = self {
            *self = TensorBytes::Owned(b.to_vec());
        }
        match self {
            TensorBytes::Owned(v) => v,
            TensorBytes::Shared(_) => unreachable!("made owned above"),
        }
    }
    /// Makes an owned buffer shared in place (without a copy), so that later clones are
    /// reference counts.
    pub fn share(&mut self) {
        if let TensorBytes::Owned(v) = self {
            *self = TensorBytes::Shared(Bytes::from(std::mem::take(v)));
        }
    }
    /// The bytes as an immutable buffer: a shared one's by reference count, an owned
    /// one's copied.
    pub fn to_bytes(&self) -> Bytes {
        match self {
            TensorBytes::Owned(v) => Bytes::copy_from_slice(v),
            TensorBytes::Shared(b) => b.clone(),
        }
    }
    /// The bytes as an immutable buffer, without a copy.
    pub fn into_bytes(self) -> Bytes {
        match self {
            TensorBytes::Owned(v) => Bytes::from(v),
            TensorBytes::Shared(b) => b,
        }
    }
}

impl Default for TensorBytes {
    fn default() -> Self {
        TensorBytes::Owned(Vec::new())
    }
}

impl std::ops::Deref for TensorBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            TensorBytes::Owned(v) => v,
            TensorBytes::Shared(b) => b,
        }
    }
}

impl PartialEq for TensorBytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for TensorBytes {}

impl PartialEq<Vec<u8>> for TensorBytes {
    fn eq(&self, other: &Vec<u8>) -> bool {
        **self == **other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for TensorBytes {
    fn eq(&self, other: &[u8; N]) -> bool {
        **self == *other
    }
}

impl PartialEq<&[u8]> for TensorBytes {
    fn eq(&self, other: &&[u8]) -> bool {
        **self == **other
    }
}

impl FromIterator<u8> for TensorBytes {
    fn from_iter<I: IntoIterator<Item = u8>>(iter: I) -> Self {
        TensorBytes::Owned(iter.into_iter().collect())
    }
}

impl std::hash::Hash for TensorBytes {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (**self).hash(h);
    }
}

impl std::fmt::Debug for TensorBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl From<Vec<u8>> for TensorBytes {
    fn from(v: Vec<u8>) -> Self {
        TensorBytes::Owned(v)
    }
}

impl From<Bytes> for TensorBytes {
    fn from(b: Bytes) -> Self {
        TensorBytes::Shared(b)
    }
}

impl HostTensor {
    /// Elements by the shape, `None` for a negative dim or on overflow.
    pub fn element_count(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |n, &d| {
            usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
        })
    }
    /// The integer values of an int64 or int32 tensor; `None` for any other type.
    pub fn int_values(&self) -> Option<Vec<i64>> {
        if !matches!(self.dtype, DType::I64 | DType::I32) {
            return None;
        }
        (0..self.data.len() / self.dtype.size())
            .map(|k| self.int_at(k))
            .collect()
    }
    /// Element `k` of an integer or bool tensor, as i64: `None` past the end, for a float
    /// type, or for a u64 above i64's range.
    pub fn int_at(&self, k: usize) -> Option<i64> {
        let s = self.dtype.size();
        let b = self.data.get(k * s..(k + 1) * s)?;
        Some(match self.dtype {
            DType::I8 => b[0] as i8 as i64,
            DType::U8 | DType::Bool => b[0] as i64,
            DType::I16 => i16::from_le_bytes(b.try_into().ok()?) as i64,
            DType::U16 => u16::from_le_bytes(b.try_into().ok()?) as i64,
            DType::I32 => i32::from_le_bytes(b.try_into().ok()?) as i64,
            DType::U32 => u32::from_le_bytes(b.try_into().ok()?) as i64,
            DType::I64 => i64::from_le_bytes(b.try_into().ok()?),
            DType::U64 => i64::try_from(u64::from_le_bytes(b.try_into().ok()?)).ok()?,
            _ => return None,
        })
    }

    /// Element `k` as f64, whatever the type: `None` past the end (or for a u64 above
    /// i64's range).
    pub fn float_at(&self, k: usize) -> Option<f64> {
        let s = self.dtype.size();
        let b = self.data.get(k * s..(k + 1) * s)?;
        Some(match self.dtype {
            DType::F32 => f32::from_le_bytes(b.try_into().ok()?) as f64,
            DType::F64 => f64::from_le_bytes(b.try_into().ok()?),
            DType::F16 => half::f16::from_le_bytes(b.try_into().ok()?).to_f64(),
            DType::Bf16 => half::bf16::from_le_bytes(b.try_into().ok()?).to_f64(),
            _ => self.int_at(k)? as f64,
        })
    }

    /// Whether the byte count is the one dtype and shape call for.
    pub fn is_consistent(&self) -> bool {
        self.dtype.tensor_bytes(&self.shape) == Some(self.data.len() as u64)
    }
}

/// A typed attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    Float(f64),
    Floats(Vec<f64>),
    Bool(bool),
    Str(String),
    Strs(Vec<String>),
    Bytes(Vec<u8>),
    DType(DType),
    /// An element type per operand, `None` where an optional operand is omitted (an op
    /// kernel's input and output types).
    DTypes(Vec<Option<DType>>),
    /// Shared: a Const's value passes from lowering into the ExecuteGraph and on to the
    /// executor's value by reference count, and a tensor does not widen every attribute.
    Tensor(Arc<HostTensor>),
}

impl Attr {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Attr::Int(i) => Some(*i),
            _ => None,
        }
    }
    pub fn as_ints(&self) -> Option<&[i64]> {
        match self {
            Attr::Ints(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Attr::Float(f) => Some(*f),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Attr::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_tensor(&self) -> Option<&HostTensor> {
        match self {
            Attr::Tensor(t) => Some(t),
            _ => None,
        }
    }
    pub fn as_dtypes(&self) -> Option<&[Option<DType>]> {
        match self {
            Attr::DTypes(v) => Some(v),
            _ => None,
        }
    }
}

/// Attributes by name: a vector kept sorted by name, shared copy-on-write.
///
/// Not a B-tree map: that allocates a node of eleven slots for even one attribute, and an
/// ExecuteGraph has hundreds of thousands of nodes with one to five attributes each, so the
/// exact-size vector is a fraction of the memory (and of the page faults that dominate
/// loading a large graph). Shared: the kernel calls of one op carry the same attributes,
/// and so do the many ops of a model that are configured alike; a clone is a reference
/// count, and a loaded `.exeg` keeps one copy per distinct set. Empty maps allocate
/// nothing. Lookups are a binary search over a handful of names.
#[derive(Debug, Clone, Default)]
pub struct AttrMap(Option<Arc<Vec<(String, Attr)>>>);

impl PartialEq for AttrMap {
    fn eq(&self, other: &Self) -> bool {
        self.entries() == other.entries()
    }
}

impl AttrMap {
    pub fn new() -> Self {
        AttrMap(None)
    }
    /// From entries already sorted by name with no name twice (a decoder checked).
    pub fn from_sorted(v: Vec<(String, Attr)>) -> Self {
        debug_assert!(v.windows(2).all(|w| w[0].0 < w[1].0));
        AttrMap((!v.is_empty()).then(|| Arc::new(v)))
    }
    fn entries(&self) -> &[(String, Attr)] {
        self.0.as_deref().map(Vec::as_slice).unwrap_or(&[])
    }
    fn entries_mut(&mut self) -> &mut Vec<(String, Attr)> {
        Arc::make_mut(self.0.get_or_insert_with(Default::default))
    }
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries()
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
    }
    /// An equal set that shares nothing with this one (a fresh reference count).
    pub fn unshared(&self) -> Self {
        AttrMap(self.0.as_ref().map(|v| Arc::new(v.as_ref().clone())))
    }
    /// Whether both are the same shared set (not merely equal).
    pub fn shares(&self, other: &AttrMap) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
    /// An address identifying the shared set, `None` when empty.
    pub fn identity(&self) -> Option<usize> {
        self.0.as_ref().map(|a| Arc::as_ptr(a) as usize)
    }
    pub fn get(&self, key: &str) -> Option<&Attr> {
        self.find(key).ok().map(|i| &self.entries()[i].1)
    }
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }
    /// Sets `key`; returns the value it replaces.
    pub fn insert(&mut self, key: String, value: Attr) -> Option<Attr> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries_mut()[i].1, value)),
            Err(i) => {
                let entries = self.entries_mut();
                // One slot at a time: most maps are one to three attributes set one by
                // one, and a vector's first growth would leave room for four.
                entries.reserve_exact(1);
                entries.insert(i, (key, value));
                None
            }
        }
    }
    pub fn remove(&mut self, key: &str) -> Option<Attr> {
        let i = self.find(key).ok()?;
        Some(self.entries_mut().remove(i).1)
    }
    pub fn retain(&mut self, mut f: impl FnMut(&String, &mut Attr) -> bool) {
        if !self.is_empty() {
            self.entries_mut().retain_mut(|(k, v)| f(k, v));
        }
    }
    pub fn clear(&mut self) {
        self.0 = None;
    }
    pub fn len(&self) -> usize {
        self.entries().len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }
    /// In name order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&String, &Attr)> {
        self.entries().iter().map(|(k, v)| (k, v))
    }
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &String> {
        self.entries().iter().map(|(k, _)| k)
    }
}

/// An [`AttrMap`] as a hash key: equal when every name and value is bit for bit the same
/// (floats by their bits, so a NaN equals itself). For sharing equal sets.
#[derive(Debug, Clone)]
pub struct AttrKey(pub AttrMap);

impl PartialEq for AttrKey {
    fn eq(&self, other: &Self) -> bool {
        same_set(&self.0, &other.0)
    }
}

impl Eq for AttrKey {}

impl std::hash::Hash for AttrKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        hash_set(&self.0, h);
    }
}

/// Whether two sets hold the same names and values bit for bit ([`AttrKey`]'s equality).
pub fn same_set(a: &AttrMap, b: &AttrMap) -> bool {
    let (a, b) = (a.entries(), b.entries());
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && same_bits(va, vb))
}

/// Hashes a set's names and values ([`AttrKey`]'s hash, consistent with [`same_set`]).
pub fn hash_set<H: std::hash::Hasher>(set: &AttrMap, h: &mut H) {
    use std::hash::Hash;
    for (k, v) in set.iter() {
        k.hash(h);
        std::mem::discriminant(v).hash(h);
        match v {
            Attr::Int(i) => i.hash(h),
            Attr::Ints(v) => v.hash(h),
            Attr::Float(f) => f.to_bits().hash(h),
            Attr::Floats(v) => v.iter().for_each(|f| f.to_bits().hash(h)),
            Attr::Bool(b) => b.hash(h),
            Attr::Str(s) => s.hash(h),
            Attr::Strs(v) => v.hash(h),
            Attr::Bytes(b) => b.hash(h),
            Attr::DType(d) => d.hash(h),
            Attr::DTypes(v) => v.hash(h),
            Attr::Tensor(t) => {
                t.dtype.hash(h);
                t.shape.hash(h);
                t.data.hash(h);
            }
        }
    }
}

fn same_bits(a: &Attr, b: &Attr) -> bool {
    match (a, b) {
        (Attr::Float(x), Attr::Float(y)) => x.to_bits() == y.to_bits(),
        (Attr::Floats(x), Attr::Floats(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        _ => a == b,
    }
}

impl std::ops::Index<&str> for AttrMap {
    type Output = Attr;
    /// Panics when `key` is absent, as a map's index does.
    fn index(&self, key: &str) -> &Attr {
        self.get(key)
            .unwrap_or_else(|| panic!("no attribute {key:?}"))
    }
}

impl FromIterator<(String, Attr)> for AttrMap {
    /// A later value of a repeated name replaces the earlier, as a map's would.
    fn from_iter<I: IntoIterator<Item = (String, Attr)>>(iter: I) -> Self {
        let mut v: Vec<(String, Attr)> = iter.into_iter().collect();
        // Stable: among equal names the last stays after dedup below keeps the first, so
        // reverse first to keep the last.
        v.reverse();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        AttrMap((!v.is_empty()).then(|| Arc::new(v)))
    }
}

impl<'a> IntoIterator for &'a AttrMap {
    type Item = (&'a String, &'a Attr);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Attr)>,
        fn(&'a (String, Attr)) -> (&'a String, &'a Attr),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries().iter().map(|(k, v)| (k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_sizes() {
        let t = HostTensor {
            dtype: DType::F32,
            shape: vec![2, 3],
            data: vec![0; 24].into(),
        };
        assert_eq!(t.element_count(), Some(6));
        assert!(t.is_consistent());
        let bad = HostTensor {
            dtype: DType::I64,
            shape: vec![-1],
            data: vec![].into(),
        };
        assert_eq!(bad.element_count(), None);
        assert!(!bad.is_consistent());
        assert_eq!(Attr::Ints(vec![1, 2]).as_ints(), Some(&[1i64, 2][..]));
        assert_eq!(Attr::Int(3).as_str(), None);
    }

    #[test]
    fn attr_map_keeps_names_sorted_and_unique() {
        let mut m = AttrMap::new();
        assert_eq!(m.insert("b".into(), Attr::Int(1)), None);
        m.insert("a".into(), Attr::Int(2));
        assert_eq!(m.insert("b".into(), Attr::Int(3)), Some(Attr::Int(1)));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b"]);
        // Inserted one by one, a map is still exactly its entries.
        assert_eq!(m.0.as_ref().map(|v| v.capacity()), Some(2));
        assert_eq!(m.get("b"), Some(&Attr::Int(3)));
        assert!(m.get("c").is_none());
        let c: AttrMap = [("z", 1), ("y", 2), ("z", 3)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Attr::Int(v)))
            .collect();
        assert_eq!(c.len(), 2);
        assert_eq!(
            c.get("z"),
            Some(&Attr::Int(3)),
            "the last value of a name wins"
        );
        let shared = m.clone();
        assert!(shared.shares(&m));
        let copy = m.unshared();
        assert!(
            !copy.shares(&m) && copy == m,
            "an equal set with its own count"
        );
        m.retain(|k, _| k == "a");
        assert!(!shared.shares(&m), "copy on write");
        assert_eq!(shared.len(), 2);
        assert_eq!(m.len(), 1);
        assert_eq!(m.remove("a"), Some(Attr::Int(2)));
        assert!(m.is_empty());
    }
}
