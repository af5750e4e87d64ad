//! GE's selection, scatter and segment ops, each from its prototype (`prototypes/`:
//! `selection_ops`, `elewise_calculation_ops`, `matrix_calculation_ops`, `array_ops`,
//! `nn_pooling_ops`), with TensorFlow's meaning for the TensorFlow-born ones, PyTorch's for
//! GatherD, IndexAdd and MaskedFill, Caffe's for ArgMaxWithK. Indices are checked as those
//! frameworks check them: one outside `[0, dim)` (a negative one too) is an error, never
//! counted from the end.
//!
//! Ranking ([`order`]; ties to the lower index, NaN above every number):
//! - ArgMaxD / ArgMinD (x; `dimension` required, `dtype` int64): the first extreme's index
//!   along dimension, int32 (the prototype's one output type; rt2's choice: `dtype` int32
//!   or int64 is accepted and does not change it). ArgMaxWithValue / ArgMinWithValue (x; `dimension`
//!   required, `keep_dims` false): int32 indices (rt2's choice of the two types the
//!   prototype allows) and the extremes.
//! - HardMax (x; `axis` -1): 1 at the first maximum along axis, 0 elsewhere.
//! - ArgMaxWithK (x; `axis` 10000, `out_max_val` false, `topk` 1): Caffe's ArgMax layer.
//!   Without an axis (10000) each of dim 0's entries over the rest of x flattened, outputs
//!   `[N, topk]`; with one, x's shape with that dim `topk`. indices (int32) and values
//!   (descending; equal values rank the higher index first, Caffe's order); with an axis
//!   and out_max_val the first output holds the values, in x's type, as GE's kernel writes
//!   Caffe's single output. rt2's choices where GE documents neither: the `[N, topk]`
//!   shape without an axis (GE's kernel test, not Caffe's `[N, 1 or 2, topk]`), and both
//!   outputs always written.
//! - TopKD (x, assist_seq; `k` required) and TopKV2D (x, k, assist_seq), both `sorted`
//!   true, `dim` -1, `largest` true: the library's TopK, int32 indices; assist_seq (the
//!   device kernel's float16 index helper) is not read. rt2's choice: `sorted` false still
//!   sorts, and `dim` (documented as reserved) is honoured.
//! - SortV2 (x; `axis` -1, `descending` false): values sorted along axis (NaN last
//!   ascending, first descending, as PyTorch's sort).
//! - NthElement (x, n; `reverse` false): each row's n-th smallest along the last dim
//!   (reverse: n-th largest), the last dim dropped; n outside `[0, dim)` is an error.
//! - InTopK (x1 `[batch, classes]`, x2 targets, k): TensorFlow's; true where fewer than k
//!   predictions of the row exceed the target's, false for a target outside `[0,
//!   classes)` or a row with a non-finite prediction (TensorFlow defines both).
//!
//! Indexed ([`indexed`]):
//! - ScatterNd (indices, x, shape) and ScatterNdD (indices, x; `shape` required): zeros of
//!   shape with x added at each index tuple (`indices[..., K]` into the first K dims;
//!   duplicates add).
//! - ScatterNdUpdate / ScatterNdAdd (var, indices, updates; `use_locking` false) and
//!   TensorScatterAdd (x, indices, updates): var with the updates written / added at the
//!   index tuples. ScatterUpdate / ScatterAdd: the same with each index naming a row of
//!   var's dim 0. Functional: the output is var updated; use_locking is not read. A
//!   repeated index of an update keeps the last write (rt2's choice; TensorFlow leaves
//!   the order open), and a scalar `updates` (TensorFlow's broadcast form) is refused.
//! - IndexAdd (var, indices, updates; `axis` 0): PyTorch's index_add with alpha 1 (the
//!   prototype has no alpha).
//! - GatherD (x, dim, index; `dim` 0): PyTorch's gather along the dim *input*'s value
//!   (rt2's choice: what MindSpore's adapter feeds; the attribute is not read, GE's graphs
//!   carry it at its default beside the input).
//! - MaskedFill (x, mask, value): value, converted to x's type, where mask is true; the
//!   three broadcast (ops-nn's constraint).
//! - InvertPermutation (x): `y[x[i]] = i`; x must be a permutation of `0..n`.
//! - RangeD (x; `start`, `limit`, `delta` required): `start + delta x` per element of the
//!   assist sequence x (MindSpore's Range documents it so: x of `0..n`), x's shape, in
//!   f64 rounded once (rt2's choice; limit is required and not read).
//!
//! Segments ([`segment`]): SegmentSum, SegmentMax, UnsortedSegmentSum, UnsortedSegmentMax,
//! UnsortedSegmentMin, UnsortedSegmentProd, as TensorFlow's.
//!
//! Float16 and bfloat16 sums compute in float32 (segments round once per output, the
//! scatters and IndexAdd once per added update, as the library's scatter does).

mod indexed;
mod kernel;
mod order;
mod segment;

use crate::ops::OpRegistry;

/// (op type, inputs whose values inference reads, inference, compute).
const OPS: &super::table::Entries = &[
    ("ArgMaxD", &[], order::infer_arg, order::arg),
    ("ArgMinD", &[], order::infer_arg, order::arg),
    ("ArgMaxWithValue", &[], order::infer_arg, order::arg),
    ("ArgMinWithValue", &[], order::infer_arg, order::arg),
    ("HardMax", &[], order::infer_hard_max, order::hard_max),
    (
        "ArgMaxWithK",
        &[],
        order::infer_arg_max_with_k,
        order::arg_max_with_k,
    ),
    ("TopKD", &[], order::infer_top_k, order::top_k),
    ("TopKV2D", &[1], order::infer_top_k, order::top_k),
    ("SortV2", &[], order::infer_sort, order::sort),
    (
        "NthElement",
        &[],
        order::infer_nth_element,
        order::nth_element,
    ),
    ("InTopK", &[], order::infer_in_top_k, order::in_top_k),
    (
        "ScatterNd",
        &[2],
        indexed::infer_scatter_nd,
        indexed::scatter_nd,
    ),
    (
        "ScatterNdD",
        &[],
        indexed::infer_scatter_nd,
        indexed::scatter_nd,
    ),
    (
        "ScatterNdAdd",
        &[],
        indexed::infer_scatter,
        indexed::scatter,
    ),
    (
        "ScatterNdUpdate",
        &[],
        indexed::infer_scatter,
        indexed::scatter,
    ),
    (
        "ScatterUpdate",
        &[],
        indexed::infer_scatter,
        indexed::scatter,
    ),
    ("ScatterAdd", &[], indexed::infer_scatter, indexed::scatter),
    (
        "TensorScatterAdd",
        &[],
        indexed::infer_scatter,
        indexed::scatter,
    ),
    (
        "IndexAdd",
        &[],
        indexed::infer_index_add,
        indexed::index_add,
    ),
    ("GatherD", &[], indexed::infer_gather_d, indexed::gather_d),
    (
        "MaskedFill",
        &[],
        indexed::infer_masked_fill,
        indexed::masked_fill,
    ),
    (
        "InvertPermutation",
        &[],
        indexed::infer_invert_permutation,
        indexed::invert_permutation,
    ),
    ("RangeD", &[], indexed::infer_range_d, indexed::range_d),
    ("SegmentSum", &[1], segment::infer_segment, segment::segment),
    ("SegmentMax", &[1], segment::infer_segment, segment::segment),
    (
        "UnsortedSegmentSum",
        &[2],
        segment::infer_unsorted,
        segment::unsorted,
    ),
    (
        "UnsortedSegmentMax",
        &[2],
        segment::infer_unsorted,
        segment::unsorted,
    ),
    (
        "UnsortedSegmentMin",
        &[2],
        segment::infer_unsorted,
        segment::unsorted,
    ),
    (
        "UnsortedSegmentProd",
        &[2],
        segment::infer_unsorted,
        segment::unsorted,
    ),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register_entries(reg, OPS);
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::entry_names(OPS)
}

#[cfg(test)]
mod tests;
