//! GE's data-movement ops that no library op computes under a translation: the TensorFlow
//! forms (StridedSlice with its five masks, Pack, Unpack, ReverseV2, Fill) and the `*D`
//! forms that take as attributes what the plain op takes as inputs (TileD,
//! BroadcastToD, ExpandD, ReverseV2D, FillD, StridedSliceD), and Caffe's FlattenV2. Each
//! is one strided [`View`] copy or a block copy on the library's movement kernels, from
//! its prototype (`prototypes/`: `selection_ops`, `split_combination_ops`, `pad_ops`,
//! `array_ops`, `transformation_ops`):
//!
//! - StridedSlice(x, begin, end, strides) and StridedSliceD(x; begin, end, strides): as
//!   TensorFlow's. Spec entry `i` slices one dim from `begin[i]` to `end[i]` by
//!   `strides[i]` (negative values count from the end, then clamp as Python's slicing);
//!   `begin_mask`/`end_mask` bit `i` takes the widest start/end, `ellipsis_mask` (its
//!   lowest bit) stands for as many whole dims as the other entries leave,
//!   `new_axis_mask` inserts a dim of 1, `shrink_axis_mask` takes the one index `begin[i]`
//!   and drops the dim. Dims after the spec are whole.
//! - Pack(x...; axis 0, N): the N equal tensors stacked on a new dim `axis` (negative
//!   counts in the output's rank). Unpack(x; num, axis 0): x cut along `axis` into `num`
//!   tensors without it.
//! - TileD(x; multiples): x repeated `multiples[i]` times along dim i.
//! - BroadcastToD(x; shape): x broadcast to `shape` (one-directional, TensorFlow's);
//!   ExpandD(x; shape): to the NumPy broadcast of x's shape and `shape` (ONNX's Expand).
//! - ReverseV2(x, axis) and ReverseV2D(x; axis): x reversed along each listed dim.
//! - Fill(dims, value) and FillD(value; dims): a tensor of shape `dims` holding value.
//! - FlattenV2(x; axis 1, end_axis -1): dims `axis..=end_axis` merged into one.
//! - CumsumD / CumprodD(x; axis required, exclusive false, reverse false): the library's
//!   CumSum / CumProd, the axis given as an attribute.
//! - OneHotD(x, on_value, off_value; depth required, axis -1): TensorFlow's one-hot, a new
//!   dim of `depth` at `axis` holding on_value where it is x's index and off_value elsewhere;
//!   an index outside `[0, depth)` (negative ones too) gives a row of off_value. GE's
//!   OneHot(x, depth, on_value, off_value) is launched as OneHotD with its constant depth
//!   (`shared.rs`), its depth input left unread: on and off are the last two inputs.

use super::attrs::{required_int, required_list, with_attrs};
use crate::ops::elementwise::broadcast as broadcast_shapes;
use crate::ops::shape::args::{bytes, bytes_mut, input, moved, output};
use crate::ops::shape::compute as shape_kernel;
use crate::ops::shape::movement::{View, copy_view};
use crate::ops::{
    DType, InferCtx, OpError, OpRegistry, TensorMeta, TensorMut, TensorRef, UNKNOWN, meta,
};

/// The op types this file registers, with the inputs whose values their inference reads.
const OPS: &[(&str, &[usize])] = &[
    ("StridedSlice", &[1, 2, 3]),
    ("StridedSliceD", &[]),
    ("Pack", &[]),
    ("Unpack", &[]),
    ("TileD", &[]),
    ("BroadcastToD", &[]),
    ("ExpandD", &[]),
    ("ReverseV2", &[1]),
    ("ReverseV2D", &[]),
    ("Fill", &[0]),
    ("FillD", &[]),
    ("FlattenV2", &[]),
    ("CumsumD", &[]),
    ("CumprodD", &[]),
    ("OneHotD", &[]),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "StridedSlice" | "StridedSliceD" => (infer_strided_slice, strided_slice),
        "Pack" => (infer_pack, pack),
        "Unpack" => (infer_unpack, unpack),
        "TileD" => (infer_tile, tile),
        "BroadcastToD" | "ExpandD" => (infer_broadcast, shape_kernel::expand),
        "ReverseV2" | "ReverseV2D" => (infer_reverse, reverse),
        "Fill" | "FillD" => (infer_fill, fill),
        "CumsumD" | "CumprodD" => (infer_cumulative, cumulative),
        "OneHotD" => (infer_one_hot, one_hot),
        _ => (infer_flatten, shape_kernel::copy_through),
    });
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::names(OPS)
}

/// `axis` in `[-rank, rank)` as an index.
fn axis(ctx: &InferCtx, name: &str, axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    if !(-r..r).contains(&axis) {
        return Err(ctx.attr_error(name, format!("{axis} is outside [-{r}, {r})")));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

// ---------------------------------------------------------------------------------------
// StridedSlice

/// One output dim of a strided slice, or a dim it takes one index of.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cut {
    /// Input dim `dim` from `start` by `step`, `count` elements (`UNKNOWN` when the dim
    /// is).
    Range {
        dim: usize,
        start: i64,
        step: i64,
        count: i64,
    },
    /// A new dim of 1.
    NewAxis,
    /// Input dim `dim` at index `at`, dropped from the output.
    Shrink { dim: usize, at: i64 },
}

/// begin, end and strides: the attributes (StridedSliceD) or the values of inputs 1-3.
fn slice_spec(ctx: &InferCtx) -> Result<Option<[Vec<i64>; 3]>, OpError> {
    if ctx.op == "StridedSliceD" {
        return Ok(Some([
            required_list(ctx, "begin")?,
            required_list(ctx, "end")?,
            required_list(ctx, "strides")?,
        ]));
    }
    ctx.arity(4, 4)?;
    let (Some(b), Some(e), Some(s)) = (ctx.value_ints(1)?, ctx.value_ints(2)?, ctx.value_ints(3)?)
    else {
        return Ok(None);
    };
    Ok(Some([b, e, s]))
}

/// The cuts the spec makes of a tensor of `shape` (dims may be `UNKNOWN`).
fn cuts(
    ctx: &InferCtx,
    [begin, end, strides]: &[Vec<i64>; 3],
    shape: &[i64],
) -> Result<Vec<Cut>, OpError> {
    let n = begin.len();
    if end.len() != n || strides.len() != n {
        return Err(ctx.attr_error(
            "strides",
            format!(
                "begin, end and strides have {n}, {} and {} entries",
                end.len(),
                strides.len()
            ),
        ));
    }
    if n > 63 {
        return Err(ctx.attr_error("begin", format!("{n} entries; the masks hold 63")));
    }
    let mask = |name: &str| -> Result<i64, OpError> { ctx.attr_int(name, 0) };
    let (bm, em, el, na, sh) = (
        mask("begin_mask")?,
        mask("end_mask")?,
        mask("ellipsis_mask")?,
        mask("new_axis_mask")?,
        mask("shrink_axis_mask")?,
    );
    let bit = |m: i64, i: usize| m >> i & 1 == 1;
    let ellipsis = (0..n).find(|&i| bit(el, i));
    let rank = shape.len();
    let consuming = (0..n)
        .filter(|&i| Some(i) != ellipsis && !bit(na, i))
        .count();
    if consuming > rank {
        return Err(ctx.input_error(
            0,
            format!("has rank {rank}; the slice indexes {consuming} dims"),
        ));
    }
    let mut out = Vec::with_capacity(rank + n);
    let whole = |d: usize| Cut::Range {
        dim: d,
        start: 0,
        step: 1,
        count: shape[d],
    };
    let mut d = 0;
    for i in 0..n {
        if Some(i) == ellipsis {
            for _ in 0..rank - consuming {
                out.push(whole(d));
                d += 1;
            }
            continue;
        }
        if bit(na, i) {
            out.push(Cut::NewAxis);
            continue;
        }
        let dim = shape[d];
        if bit(sh, i) {
            let at = if begin[i] < 0 && dim != UNKNOWN {
                begin[i] + dim
            } else {
                begin[i]
            };
            if at < 0 || (dim != UNKNOWN && at >= dim) {
                return Err(ctx.attr_error(
                    "begin",
                    format!("index {} of dim {d} (of {dim}) is out of range", begin[i]),
                ));
            }
            out.push(Cut::Shrink { dim: d, at });
            d += 1;
            continue;
        }
        let step = strides[i];
        if step == 0 {
            return Err(ctx.attr_error("strides", format!("entry {i} is 0")));
        }
        if dim == UNKNOWN {
            out.push(Cut::Range {
                dim: d,
                start: 0,
                step,
                count: UNKNOWN,
            });
            d += 1;
            continue;
        }
        let wrap = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (start, stop) = if step > 0 {
            (
                if bit(bm, i) {
                    0
                } else {
                    wrap(begin[i]).clamp(0, dim)
                },
                if bit(em, i) {
                    dim
                } else {
                    wrap(end[i]).clamp(0, dim)
                },
            )
        } else {
            (
                if bit(bm, i) {
                    dim - 1
                } else {
                    wrap(begin[i]).clamp(-1, dim - 1)
                },
                if bit(em, i) {
                    -1
                } else {
                    wrap(end[i]).clamp(-1, dim - 1)
                },
            )
        };
        let span = if step > 0 { stop - start } else { start - stop };
        let count = if span <= 0 {
            0
        } else {
            (span + step.abs() - 1) / step.abs()
        };
        out.push(Cut::Range {
            dim: d,
            start,
            step,
            count,
        });
        d += 1;
    }
    while d < rank {
        out.push(whole(d));
        d += 1;
    }
    Ok(out)
}

fn infer_strided_slice(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    if ctx.op == "StridedSliceD" {
        ctx.arity(1, 1)?;
    }
    let x = &ctx.inputs[0];
    let (Some(spec), Some(shape)) = (slice_spec(ctx)?, &x.shape) else {
        return Ok(meta(x.dtype, None));
    };
    let dims = cuts(ctx, &spec, shape)?
        .iter()
        .filter_map(|c| match *c {
            Cut::Range { count, .. } => Some(count),
            Cut::NewAxis => Some(1),
            Cut::Shrink { .. } => None,
        })
        .collect();
    Ok(meta(x.dtype, Some(dims)))
}

fn strided_slice(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let spec = match ctx.op {
        "StridedSliceD" => slice_spec(ctx)?,
        _ => {
            let ints = |k: usize| {
                crate::ops::shape::indices::ints(input(ctx, inputs, k)?)
                    .ok_or_else(|| ctx.input_error(k, "is not integers"))
            };
            Some([ints(1)?, ints(2)?, ints(3)?])
        }
    }
    .ok_or_else(|| ctx.compute_error("the slice spec is not known"))?;
    let shape: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
    let base = View::contiguous(x.shape);
    let mut view = View {
        shape: Vec::new(),
        strides: Vec::new(),
        offset: 0,
    };
    for c in cuts(ctx, &spec, &shape)? {
        match c {
            Cut::Range {
                dim,
                start,
                step,
                count,
            } => {
                view.offset += start as isize * base.strides[dim];
                view.shape.push(count as usize);
                view.strides.push(base.strides[dim] * step as isize);
            }
            Cut::NewAxis => {
                view.shape.push(1);
                view.strides.push(0);
            }
            Cut::Shrink { dim, at } => view.offset += at as isize * base.strides[dim],
        }
    }
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

// ---------------------------------------------------------------------------------------
// Pack, Unpack

/// Pack's output dim for its `axis` (in the output's rank `rank + 1`).
fn pack_axis(ctx: &InferCtx, rank: usize) -> Result<usize, OpError> {
    axis(ctx, "axis", ctx.attr_int("axis", 0)?, rank + 1)
}

fn infer_pack(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, usize::MAX)?;
    let n = ctx.inputs.len();
    if ctx.attrs.get("N").is_some() && required_int(ctx, "N")? != n as i64 {
        return Err(ctx.attr_error(
            "N",
            format!(
                "is {}, but the node has {n} tensors",
                required_int(ctx, "N")?
            ),
        ));
    }
    let x = &ctx.inputs[0];
    for (i, t) in ctx.inputs.iter().enumerate().skip(1) {
        if t.dtype != x.dtype {
            return Err(ctx.input_error(i, format!("is {}, input 0 is {}", t.dtype, x.dtype)));
        }
        if let (Some(a), Some(b)) = (&x.shape, &t.shape)
            && (a.len() != b.len()
                || a.iter()
                    .zip(b)
                    .any(|(&p, &q)| p != q && p != UNKNOWN && q != UNKNOWN))
        {
            return Err(ctx.input_error(i, format!("is {b:?}, input 0 is {a:?}")));
        }
    }
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let a = pack_axis(ctx, s.len())?;
    let mut out = s.clone();
    out.insert(a, n as i64);
    Ok(meta(x.dtype, Some(out)))
}

/// Pack: for every outer index, each input's inner block in turn.
fn pack(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let a = pack_axis(ctx, x.rank())?;
    let inner = x.shape[a..].iter().product::<usize>() * x.dtype.size();
    let y = output(ctx, outputs, 0)?;
    let dst = bytes_mut(ctx, y)?;
    let row = inner * inputs.len();
    if inner == 0 {
        return Ok(());
    }
    for (k, t) in inputs.iter().enumerate() {
        let src = bytes(ctx, t, k)?;
        if src.len() * inputs.len() != dst.len() {
            return Err(ctx.input_error(k, "does not have input 0's shape"));
        }
        for (o, block) in src.chunks_exact(inner).enumerate() {
            dst[o * row + k * inner..][..inner].copy_from_slice(block);
        }
    }
    Ok(())
}

fn infer_unpack(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let num = required_int(ctx, "num")?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(vec![TensorMeta::unknown_rank(x.dtype); num.max(0) as usize]);
    };
    let a = axis(ctx, "axis", ctx.attr_int("axis", 0)?, s.len())?;
    if s[a] != UNKNOWN && s[a] != num {
        return Err(ctx.attr_error("num", format!("is {num}, but dim {a} of x is {}", s[a])));
    }
    let mut out = s.clone();
    out.remove(a);
    Ok(vec![TensorMeta::new(x.dtype, &out); num.max(0) as usize])
}

/// Unpack: output `k` takes index `k` of `axis`, for every outer index.
fn unpack(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let a = axis(ctx, "axis", ctx.attr_int("axis", 0)?, x.rank())?;
    let num = x.shape[a];
    if outputs.len() != num {
        return Err(ctx.compute_error(format!("{} outputs for dim {a} of {num}", outputs.len())));
    }
    let inner = x.shape[a + 1..].iter().product::<usize>() * x.dtype.size();
    let src = bytes(ctx, x, 0)?;
    if inner == 0 {
        return Ok(());
    }
    let row = inner * num;
    for (k, y) in outputs.iter_mut().enumerate() {
        let dst = bytes_mut(ctx, y)?;
        for (o, block) in dst.chunks_exact_mut(inner).enumerate() {
            block.copy_from_slice(&src[o * row + k * inner..][..inner]);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// TileD, BroadcastToD, ExpandD

fn infer_tile(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let reps = required_list(ctx, "multiples")?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    if reps.len() != s.len() || reps.iter().any(|&r| r < 0) {
        return Err(ctx.attr_error(
            "multiples",
            format!("{reps:?} does not fit rank {}", s.len()),
        ));
    }
    let dims = s
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| if d == UNKNOWN { UNKNOWN } else { d * r })
        .collect();
    Ok(meta(x.dtype, Some(dims)))
}

/// TileD: the library's tile view of x.
fn tile(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let reps = required_list(ctx, "multiples")?;
    if reps.len() != x.rank() || reps.iter().any(|&r| r < 0) {
        return Err(ctx.attr_error(
            "multiples",
            format!("{reps:?} does not fit rank {}", x.rank()),
        ));
    }
    let view = crate::ops::slicing::compute::tile_view(x.shape, &reps);
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

fn infer_broadcast(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let target = required_list(ctx, "shape")?;
    let x = &ctx.inputs[0];
    let out = broadcast_shapes(&[x.shape.as_deref(), Some(&target)]).map_err(|_| {
        ctx.attr_error(
            "shape",
            format!("{target:?} does not broadcast with {:?}", x.shape),
        )
    })?;
    // TensorFlow's BroadcastTo goes one way: the result is `shape` itself.
    if ctx.op == "BroadcastToD"
        && let Some(o) = &out
        && *o != target
    {
        return Err(ctx.attr_error(
            "shape",
            format!("{target:?}: x {:?} does not broadcast to it", x.shape),
        ));
    }
    Ok(meta(x.dtype, out))
}

// ---------------------------------------------------------------------------------------
// ReverseV2, ReverseV2D

/// The dims to reverse, as indices (a repeat is an error, as TensorFlow's).
fn reverse_axes(
    ctx: &InferCtx,
    inputs: Option<&[TensorRef]>,
    rank: usize,
) -> Result<Option<Vec<usize>>, OpError> {
    let list = match (ctx.op, inputs) {
        ("ReverseV2D", _) => required_list(ctx, "axis")?,
        (_, Some(ins)) => crate::ops::shape::indices::ints(input(ctx, ins, 1)?)
            .ok_or_else(|| ctx.input_error(1, "is not integers"))?,
        (_, None) => match ctx.value_ints(1)? {
            Some(v) => v,
            None => return Ok(None),
        },
    };
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(list.len());
    for &a in &list {
        let a = axis(ctx, "axis", a, rank)?;
        if std::mem::replace(&mut seen[a], true) {
            return Err(ctx.attr_error("axis", format!("{list:?} names dim {a} twice")));
        }
        out.push(a);
    }
    Ok(Some(out))
}

fn infer_reverse(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    if ctx.op == "ReverseV2D" {
        ctx.arity(1, 1)?;
    } else {
        ctx.arity(2, 2)?;
    }
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape {
        reverse_axes(ctx, None, s.len())?;
    }
    Ok(vec![x.clone()])
}

/// ReverseV2: x viewed with each reversed dim's stride negated, from its last index.
fn reverse(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let axes = reverse_axes(ctx, Some(inputs), x.rank())?.unwrap_or_default();
    let mut view = View::contiguous(x.shape);
    for a in axes {
        if x.shape[a] > 0 {
            view.offset += (x.shape[a] as isize - 1) * view.strides[a];
            view.strides[a] = -view.strides[a];
        }
    }
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

// ---------------------------------------------------------------------------------------
// Fill, FillD, FlattenV2

/// Fill's value input and its dims (FillD: the attribute).
fn infer_fill(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let (value, dims) = if ctx.op == "FillD" {
        ctx.arity(1, 1)?;
        (&ctx.inputs[0], Some(required_list(ctx, "dims")?))
    } else {
        ctx.arity(2, 2)?;
        (&ctx.inputs[1], crate::ops::shape::dims_input(ctx, 0)?)
    };
    if let Some(s) = &value.shape
        && s.iter().product::<i64>() != 1
    {
        let k = if ctx.op == "FillD" { 0 } else { 1 };
        return Err(ctx.input_error(k, format!("is {s:?}, not one value")));
    }
    // FillD's attribute; Fill's known values were checked by `dims_input` (an unknown
    // dim there is -1).
    if ctx.op == "FillD"
        && let Some(d) = &dims
        && d.iter().any(|&v| v < 0)
    {
        return Err(ctx.attr_error("dims", format!("{d:?} has a negative dim")));
    }
    Ok(meta(value.dtype, dims))
}

/// Fill: the value's bytes repeated over the output.
fn fill(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let k = if ctx.op == "FillD" { 0 } else { 1 };
    let v = input(ctx, inputs, k)?;
    let width = v.dtype.size();
    let value = bytes(ctx, v, k)?;
    if value.len() != width {
        return Err(ctx.input_error(k, "is not one value"));
    }
    let y = output(ctx, outputs, 0)?;
    for chunk in bytes_mut(ctx, y)?.chunks_exact_mut(width) {
        chunk.copy_from_slice(value);
    }
    Ok(())
}

fn infer_flatten(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let rank = s.len().max(1);
    let first = axis(ctx, "axis", ctx.attr_int("axis", 1)?, rank)?;
    let last = axis(ctx, "end_axis", ctx.attr_int("end_axis", -1)?, rank)?;
    if last < first {
        return Err(ctx.attr_error("end_axis", format!("dim {last} comes before axis {first}")));
    }
    if s.is_empty() {
        return Ok(meta(x.dtype, Some(vec![1])));
    }
    let merged = s[first..=last]
        .iter()
        .try_fold(1i64, |n, &d| (d != UNKNOWN).then_some(n * d))
        .unwrap_or(UNKNOWN);
    let mut out = s[..first].to_vec();
    out.push(merged);
    out.extend_from_slice(&s[last + 1..]);
    Ok(meta(x.dtype, Some(out)))
}

// ---------------------------------------------------------------------------------------
// CumsumD, CumprodD

fn infer_cumulative(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape {
        axis(ctx, "axis", required_int(ctx, "axis")?, s.len().max(1))?;
    }
    Ok(vec![x.clone()])
}

/// The library's CumSum / CumProd with the axis as its input 1, a scalar on the stack.
fn cumulative(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let a = required_int(ctx, "axis")?.to_le_bytes();
    let attrs = super::alias::cumulative_flags(ctx)?;
    let op = if ctx.op == "CumsumD" {
        "CumSum"
    } else {
        "CumProd"
    };
    let library = InferCtx {
        op,
        ..with_attrs(ctx, &attrs)
    };
    let operands = [*x, TensorRef::new(DType::I64, &[], &a)];
    crate::ops::reduce::compute::cumulative(&library, &operands, outputs)
}

// ---------------------------------------------------------------------------------------
// OneHotD

/// (depth, the new dim's place in y) for x of rank `rank`.
fn one_hot_axis(ctx: &InferCtx, rank: usize) -> Result<(i64, usize), OpError> {
    let depth = required_int(ctx, "depth")?;
    if depth < 0 {
        return Err(ctx.attr_error("depth", format!("{depth} is negative")));
    }
    Ok((
        depth,
        axis(ctx, "axis", ctx.attr_int("axis", -1)?, rank + 1)?,
    ))
}

fn infer_one_hot(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 4)?;
    let n = ctx.inputs.len();
    let (on, off) = (&ctx.inputs[n - 2], &ctx.inputs[n - 1]);
    if on.dtype != off.dtype {
        return Err(ctx.input_error(n - 1, format!("is {}, on_value is {}", off.dtype, on.dtype)));
    }
    let x = &ctx.inputs[0];
    if !matches!(x.dtype, DType::U8 | DType::I32 | DType::I64) {
        return Err(ctx.input_error(
            0,
            format!("is {}, indices are uint8, int32 or int64", x.dtype),
        ));
    }
    let Some(s) = &x.shape else {
        return Ok(meta(on.dtype, None));
    };
    let (depth, a) = one_hot_axis(ctx, s.len())?;
    let mut out = s.clone();
    out.insert(a, depth);
    Ok(meta(on.dtype, Some(out)))
}

/// OneHotD: y viewed as `[outer, depth, inner]` around the new dim; every element
/// off_value, then on_value at each in-range index.
fn one_hot(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let n = inputs.len();
    let x = input(ctx, inputs, 0)?;
    let (depth, a) = one_hot_axis(ctx, x.rank())?;
    let indices =
        crate::ops::shape::indices::ints(x).ok_or_else(|| ctx.input_error(0, "is not integers"))?;
    let on = bytes(ctx, &inputs[n - 2], n - 2)?;
    let off = bytes(ctx, &inputs[n - 1], n - 1)?;
    let width = inputs[n - 2].dtype.size();
    if on.len() != width || off.len() != width {
        return Err(ctx.input_error(n - 2, "on_value and off_value are one value each"));
    }
    let inner: usize = x.shape[a..].iter().product();
    let depth = depth as usize;
    let y = output(ctx, outputs, 0)?;
    let dst = bytes_mut(ctx, y)?;
    for chunk in dst.chunks_exact_mut(width) {
        chunk.copy_from_slice(off);
    }
    for (k, &i) in indices.iter().enumerate() {
        let Some(i) = usize::try_from(i).ok().filter(|&i| i < depth) else {
            continue;
        };
        let (o, r) = (k / inner.max(1), k % inner.max(1));
        let at = ((o * depth + i) * inner + r) * width;
        dst[at..at + width].copy_from_slice(on);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
