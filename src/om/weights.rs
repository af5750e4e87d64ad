//! Const weights and the WEIGHTS_DATA partition: moving a Const's `value` tensor bytes
//! between the op (inline `TensorDef.data`) and the shared weights buffer.
//!
//! Owns the placement rule of GE's `ModelBuilder` (`compiler/graph/build/model_builder.cc`:
//! `SetInputOutputDesc`, `AdjustConstWeightSize`, `ReuseWeightMem`, `MergeWeights`) and its
//! inverse. It must not touch anything but the `value` attr of Const-like ops.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use super::compress::node_order;
use super::dtype::DataType;
use super::error::{OmError, Place, Result};
use crate::proto::ge_ir::attr_def::Value;
use crate::proto::ge_ir::{AttrDef, ModelDef, OpDef, TensorDef};

/// `kWeightsStartOffset`: the first weight is placed at 512, not 0.
pub const WEIGHTS_START_OFFSET: u64 = 512;
/// `MEM_ALIGN_SIZE`: the running offset is rounded up to this after every node.
pub const MEM_ALIGN_SIZE: u64 = 512;
/// `kAlignBytes`: slack added before the final rounding of the weight size.
const ALIGN_BYTES: u64 = 32;
/// `ATTR_NAME_WEIGHTS`.
pub(crate) const WEIGHTS_ATTR: &str = "value";
/// Op types whose `value` may live in WEIGHTS_DATA when read.
const CONST_TYPES: [&str; 3] = ["Const", "Constant", "Variable"];
/// GE's writer places weights for `CONSTANT` ("Const") ops only.
const PLACED_TYPE: &str = "Const";

fn value_mut(attr: &mut BTreeMap<String, AttrDef>) -> Option<&mut TensorDef> {
    match attr.get_mut(WEIGHTS_ATTR)?.value.as_mut()? {
        Value::T(t) => Some(t),
        _ => None,
    }
}

/// Fills in the data of every Const-like op whose `value` tensor has no inline data but a
/// non-zero `data_offset`, copying from `weights` (the WEIGHTS_DATA partition).
///
/// The length is `TensorDescriptor.weight_size`, which GE's `MergeWeights` sets to the
/// data size of every Const it moves; when that is 0 the length is the shape's element
/// count times the type size. A `data_offset` of 0 means "not in the buffer": GE's writer
/// starts at 512 and skips offset 0. Errors name the graph and node.
pub fn resolve_weights(model: &mut ModelDef, weights: &Bytes) -> Result<()> {
    for g in &mut model.graph {
        for op in &mut g.op {
            resolve_op(op, &g.name, weights)?;
        }
    }
    Ok(())
}

/// [`resolve_weights`] for one op of graph `graph`: a no-op for anything but a Const whose
/// value has a `data_offset` and no inline data.
pub fn resolve_op(op: &mut OpDef, graph: &str, weights: &Bytes) -> Result<()> {
    if !CONST_TYPES.contains(&op.r#type.as_str()) {
        return Ok(());
    }
    let place = || Place::node(graph, &op.name);
    let Some(t) = value_mut(&mut op.attr) else {
        return Ok(());
    };
    if !t.data.is_empty() {
        return Ok(());
    }
    let Some(desc) = &t.desc else { return Ok(()) };
    if desc.data_offset == 0 {
        return Ok(());
    }
    let len = if desc.weight_size > 0 {
        u64::try_from(desc.weight_size).unwrap_or(0)
    } else {
        let mut count: u64 = 1;
        for &d in desc.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or(&[]) {
            let d = u64::try_from(d).map_err(|_| {
                OmError::graph(place(), format!("weight shape has unknown dim {d}"))
            })?;
            count = count
                .checked_mul(d)
                .ok_or_else(|| OmError::graph(place(), "weight element count overflows"))?;
        }
        DataType::from_proto(desc.dtype)
            .and_then(|dt| dt.byte_size(count))
            .ok_or_else(|| {
                OmError::graph(
                    place(),
                    format!("weight dtype {} has no fixed size", desc.dtype),
                )
            })?
    };
    let off = u64::try_from(desc.data_offset).map_err(|_| {
        OmError::graph(
            place(),
            format!("negative data_offset {}", desc.data_offset),
        )
    })?;
    let end = off
        .checked_add(len)
        .filter(|&e| e <= weights.len() as u64)
        .ok_or_else(|| {
            OmError::graph(
                place(),
                format!(
                    "weight at data_offset {off} of {len} bytes runs past WEIGHTS_DATA ({} bytes)",
                    weights.len()
                ),
            )
        })?;
    let (off, end) = (off as usize, end as usize);
    // By reference where the weight is aligned for any element type, as GE places
    // weights (at 512-byte offsets); a weight a foreign writer left misaligned is copied,
    // since kernels read a tensor's bytes as a slice of its elements.
    t.data = if (weights.as_ptr() as usize).wrapping_add(off) % WEIGHT_ALIGN == 0 {
        weights.slice(off..end)
    } else {
        Bytes::copy_from_slice(&weights[off..end])
    };
    Ok(())
}

/// The alignment a weight's bytes need to be shared with WEIGHTS_DATA: that of the
/// widest element (a complex128's halves, an f64).
const WEIGHT_ALIGN: usize = 16;

fn align(v: u64, to: u64) -> u64 {
    v.div_ceil(to).saturating_mul(to)
}

/// Moves Const weights into a fresh WEIGHTS_DATA buffer the way GE's model builder does,
/// and returns the buffer (its length is the model's `weight_size`).
///
/// Ops are visited in `GetAllNodes` order. The running offset starts at 512; each `Const`
/// with a `value` tensor gets `data_offset` = the offset (or the offset of an earlier
/// byte-identical weight of the same size, which is then shared) and the offset advances
/// by the data size; after every op the offset is rounded up to 512. At the end the size is
/// `(offset + 32)` rounded up to 512, so even a model without weights has a 1024-byte
/// buffer. Each placed tensor gets `weight_size` = its data size and loses its inline data.
pub fn place_weights(model: &mut ModelDef) -> Vec<u8> {
    let mut placer = Placer::default();
    for (g, o) in node_order(model) {
        let op = &mut model.graph[g].op[o];
        if Placer::places(&op.r#type)
            && let Some(t) = value_mut(&mut op.attr)
        {
            let data = std::mem::take(&mut t.data);
            let size = data.len();
            let at = placer.place(data);
            let desc = t.desc.get_or_insert_with(Default::default);
            desc.data_offset = at as i64;
            desc.weight_size = size as i64;
        }
        placer.next_op();
    }
    placer.finish()
}

/// The placement rule of [`place_weights`], op by op: [`Placer::place`] for each placed
/// Const's bytes, [`Placer::next_op`] after every op (placed or not), in `GetAllNodes`
/// order.
pub(crate) struct Placer {
    offset: u64,
    /// Placed weights, and GE's reuse_weight_map_: data size -> indices into `placed`.
    placed: Vec<(u64, Bytes)>,
    by_size: HashMap<usize, Vec<usize>>,
}

impl Default for Placer {
    fn default() -> Self {
        Placer {
            offset: WEIGHTS_START_OFFSET,
            placed: Vec::new(),
            by_size: HashMap::new(),
        }
    }
}

impl Placer {
    /// Whether an op of type `op_type` has its `value` placed.
    pub(crate) fn places(op_type: &str) -> bool {
        op_type == PLACED_TYPE
    }

    /// Places one weight and returns its `data_offset`.
    pub(crate) fn place(&mut self, data: Bytes) -> u64 {
        let same = self.by_size.entry(data.len()).or_default();
        match same.iter().find(|&&i| self.placed[i].1 == data) {
            // A byte-identical earlier weight is shared, and the offset does not move.
            Some(&i) => self.placed[i].0,
            None => {
                let at = self.offset;
                same.push(self.placed.len());
                self.offset = self.offset.saturating_add(data.len() as u64);
                self.placed.push((at, data));
                at
            }
        }
    }

    /// Ends an op: the running offset is rounded up to [`MEM_ALIGN_SIZE`].
    pub(crate) fn next_op(&mut self) {
        self.offset = align(self.offset, MEM_ALIGN_SIZE);
    }

    /// The WEIGHTS_DATA buffer.
    pub(crate) fn finish(self) -> Vec<u8> {
        let total = align(self.offset.saturating_add(ALIGN_BYTES), MEM_ALIGN_SIZE);
        let mut buf = vec![0u8; total as usize];
        for (at, data) in self.placed {
            buf[at as usize..at as usize + data.len()].copy_from_slice(&data);
        }
        buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::testdata;

    fn consts(m: &ModelDef) -> Vec<(String, i64, i64, usize)> {
        m.graph[0]
            .op
            .iter()
            .filter(|o| o.r#type == "Const")
            .map(|o| match &o.attr["value"].value {
                Some(Value::T(t)) => {
                    let d = t.desc.clone().unwrap_or_default();
                    (o.name.clone(), d.data_offset, d.weight_size, t.data.len())
                }
                _ => unreachable!("fixture consts hold tensors"),
            })
            .collect()
    }

    #[test]
    fn placement_follows_ge() {
        let orig = testdata::model_def("m");
        let mut m = orig.clone();
        let buf = place_weights(&mut m);
        // c1: 32 bytes at 512; c2 (same bytes) shares 512; c3: 8 bytes at 1024.
        let c = consts(&m);
        assert_eq!(c[0], ("c1".to_string(), 512, 32, 0));
        assert_eq!(c[1], ("c2".to_string(), 512, 32, 0));
        assert_eq!(c[2], ("c3".to_string(), 1024, 8, 0));
        // The offset is 1536 after aligning past c3; (1536 + 32) rounds up to 2048.
        assert_eq!(buf.len(), 2048);
        assert_eq!(&buf[1024..1032], &1i64.to_le_bytes());
        resolve_weights(&mut m, &Bytes::from(buf)).unwrap();
        assert_eq!(
            consts(&m).iter().map(|c| c.3).collect::<Vec<_>>(),
            [32, 32, 8]
        );
        let mut empty = ModelDef::default();
        assert_eq!(place_weights(&mut empty).len(), 1024);
    }

    #[test]
    fn out_of_bounds_names_the_node() {
        let mut m = testdata::model_def("m");
        let buf = place_weights(&mut m);
        let e = resolve_weights(&mut m, &Bytes::copy_from_slice(&buf[..600]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "graph \"m\": node \"c3\": weight at data_offset 1024 of 8 bytes runs past WEIGHTS_DATA (600 bytes)"
        );
    }

    /// Weights GE placed (at 512-byte offsets) are the Const tensors' bytes by
    /// reference; the same weights misaligned in memory are copied, with the same bytes.
    #[test]
    fn aligned_weights_are_shared_and_misaligned_ones_copied() {
        let data = |m: &ModelDef| -> Vec<(usize, Vec<u8>)> {
            m.graph
                .iter()
                .flat_map(|g| &g.op)
                .filter_map(
                    |op| match op.attr.get("value").and_then(|a| a.value.as_ref()) {
                        Some(Value::T(t)) => Some((t.data.as_ptr() as usize, t.data.to_vec())),
                        _ => None,
                    },
                )
                .collect()
        };
        let orig = testdata::model_def("m");
        let mut placed = orig.clone();
        let buf = Bytes::from(place_weights(&mut placed));
        assert_eq!(
            buf.as_ptr() as usize % WEIGHT_ALIGN,
            0,
            "a buffer of its own"
        );
        let mut shared = placed.clone();
        resolve_weights(&mut shared, &buf).unwrap();
        let base = buf.as_ptr() as usize;
        let got = data(&shared);
        assert_eq!(
            got.iter().map(|(p, _)| p - base).collect::<Vec<_>>(),
            [512, 512, 1024],
            "slices of WEIGHTS_DATA"
        );
        // The same bytes one past an aligned address.
        let mut padded = vec![0u8];
        padded.extend_from_slice(&buf);
        let padded = Bytes::from(padded);
        let misaligned = padded.slice(1..);
        let mut copied = placed.clone();
        resolve_weights(&mut copied, &misaligned).unwrap();
        let got_copied = data(&copied);
        let (lo, hi) = (
            padded.as_ptr() as usize,
            padded.as_ptr() as usize + padded.len(),
        );
        assert!(
            got_copied.iter().all(|(p, _)| !(lo..hi).contains(p)),
            "copied out of a misaligned WEIGHTS_DATA"
        );
        assert_eq!(
            got.iter().map(|(_, d)| d).collect::<Vec<_>>(),
            got_copied.iter().map(|(_, d)| d).collect::<Vec<_>>(),
            "the same bytes either way"
        );
        assert_eq!(got[2].1, 1i64.to_le_bytes());
    }
}
