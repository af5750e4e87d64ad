//! GE's data-arranging ops that move elements without computing on them, each from its
//! prototype (`prototypes/`: graphengine `array_ops.h`, `pad_ops.h`, `selection_ops.h`,
//! `transformation_ops.h`, `nn_norm_ops.h`, `nn_pooling_ops.h`, `split_combination_ops.h`,
//! `elewise_calculation_ops.h`) with the TensorFlow, Caffe, ONNX or PyTorch meaning its
//! documentation names. Elements move by their byte size (one strided [`View`] copy, an
//! index-mapped copy or a block copy), so every element type is served. The space/batch
//! and patch ops are in [`space`] and [`patches`].
//!
//! - IdentityN(x...), Snapshot, StopGradient, TensorMove: each input copied to its output.
//!   Copy(x; N required): Caffe's Split, x copied to each of the N outputs.
//! - ShapeN(x...; dtype int32): each input's dims as a 1-D int32 (or int64) tensor.
//! - Bitcast(x; type required): TensorFlow's bitcast, the bytes reinterpreted: equal
//!   sizes keep the shape, a wider x gains a last dim of the size ratio, a narrower x
//!   loses its last dim, which must be the ratio.
//! - MirrorPad(x, paddings; mode required): TensorFlow's, `paddings` a `[before, after]`
//!   row per dim; REFLECT mirrors about the edge element (at most `dim - 1` each side),
//!   SYMMETRIC repeats it (at most `dim`). PadV2(x, paddings, constant_values): the
//!   constant. PadV3D(x; paddings required, constant_values 0, mode "constant",
//!   paddings_contiguous true): ONNX's Pad with the rows `[b0, e0], [b1, e1], ..` (or
//!   `[b0, b1, ..], [e0, e1, ..]` when not contiguous), mode constant, reflect or edge.
//! - FillV2(dims; value 0.0), FillV2D(; value 0.0, dims required): ONNX's ConstantOfShape.
//! - SliceDV2(x, offsets; size required), SliceWithAxes(x, offsets, size; axes required):
//!   TensorFlow's Slice (a size of -1 runs to the end), SliceWithAxes on the listed axes
//!   only. StridedSliceV3(x, begin, end, axes?, strides?): ONNX's Slice (the library's).
//! - Crop(x, size; axis 2, offsets required): Caffe's: dims from `axis` on take `size`'s
//!   extent from `offsets` (one offset for all of them, or one each); earlier dims whole.
//! - Roll(x; shifts required, dims []): PyTorch's roll, `y[(i + shift) mod n] = x[i]` on
//!   each listed dim (a dim listed twice shifts by the sum); no dims: x rolled flattened.
//! - Permute(x; order `[0]`): Caffe's, output dim `i` is x's dim `order[i]`; dims the order
//!   leaves out follow in increasing order (Caffe's completion, so the default is x).
//! - ConfusionTransposeD(x; perm, shape, transpose_first required): transpose by `perm`
//!   then reshape to `shape`, or (transpose_first false) reshape then transpose.
//! - TileWithAxis(x; axis 1, tiles required): Caffe's Tile, the block from `axis` on
//!   repeated `tiles` times.
//! - DataFormatVecPermute(x; src_format "NHWC", dst_format "NCHW"): TensorFlow's, a
//!   vector (or `[n, 2]` rows) of per-dim values reordered from one layout's dim order to
//!   the other's; a vector of 2 (or `[2, 2]`) holds the spatial dims only.
//! - ParallelConcat(values...; shape, N required): TensorFlow's, N tensors of `[1, ..]`
//!   stacked along dim 0 into `shape`.
//!
//! rt2's choices where GE does not say: FillV2 and FillV2D give float32 (the prototypes
//! name no output-type attribute and ONNX's ConstantOfShape defaults to float); pads are
//! non-negative (no cropping by a negative pad); PadV3D's reflect pads at most `dim - 1`
//! each side, as PyTorch's reflection padding. TransShape is not registered: its
//! documentation says only that y takes the shape `outShape` (default empty), not how
//! x's elements are laid out in it.

mod patches;
mod space;

use super::attrs::{required_int, required_list};
use crate::ops::shape::args::{bytes, bytes_mut, input, moved, output};
use crate::ops::shape::compute as shape_kernel;
use crate::ops::shape::indices::ints;
use crate::ops::shape::movement::{View, copy_mapped, copy_view};
use crate::ops::{
    Compute, DType, InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut, TensorRef,
    UNKNOWN, meta,
};

/// The op types this file registers, with the inputs whose values their inference reads.
const OPS: &[(&str, &[usize])] = &[
    ("IdentityN", &[]),
    ("Snapshot", &[]),
    ("StopGradient", &[]),
    ("TensorMove", &[]),
    ("Copy", &[]),
    ("ShapeN", &[]),
    ("Bitcast", &[]),
    ("MirrorPad", &[1]),
    ("PadV2", &[1]),
    ("PadV3D", &[]),
    ("FillV2", &[0]),
    ("FillV2D", &[]),
    ("SliceDV2", &[1]),
    ("SliceWithAxes", &[1, 2]),
    ("StridedSliceV3", &[1, 2, 3, 4]),
    ("Crop", &[]),
    ("Roll", &[]),
    ("Permute", &[]),
    ("ConfusionTransposeD", &[]),
    ("TileWithAxis", &[]),
    ("DataFormatVecPermute", &[]),
    ("ParallelConcat", &[]),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "IdentityN" | "Snapshot" | "StopGradient" | "TensorMove" => (infer_identity, identity),
        "Copy" => (infer_copy, copy),
        "ShapeN" => (infer_shape_n, shape_n),
        "Bitcast" => (infer_bitcast, shape_kernel::copy_through),
        "MirrorPad" | "PadV2" | "PadV3D" => (infer_pad, pad),
        "FillV2" | "FillV2D" => (infer_fill, fill),
        "SliceDV2" | "SliceWithAxes" => (infer_slice, slice),
        "StridedSliceV3" => (infer_onnx_slice, onnx_slice),
        "Crop" => (infer_crop, crop),
        "Roll" => (infer_same, roll),
        "Permute" | "ConfusionTransposeD" => (infer_permute, permute),
        "TileWithAxis" => (infer_tile, tile),
        "DataFormatVecPermute" => (infer_format_permute, format_permute),
        _ => (infer_parallel_concat, parallel_concat),
    });
    space::register(reg);
    patches::register(reg);
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::names(OPS)
        .chain(space::names())
        .chain(patches::names())
}

/// `axis` in `[-rank, rank)` as an index.
fn axis(ctx: &InferCtx, name: &str, axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    if !(-r..r).contains(&axis) {
        return Err(ctx.attr_error(name, format!("{axis} is outside [-{r}, {r})")));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// Copies `src` through `view` into output 0.
fn copy_into(
    ctx: &InferCtx,
    x: &TensorRef,
    view: &View,
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, view, bytes_mut(ctx, y)?),
    )
}

/// The integer values of input `k` at compute time.
fn int_input(ctx: &InferCtx, inputs: &[TensorRef], k: usize) -> Result<Vec<i64>, OpError> {
    ints(input(ctx, inputs, k)?).ok_or_else(|| ctx.input_error(k, "is not integers"))
}

/// Input `k`'s values: from the tensors at compute time, else as inference knows them.
fn values_of(
    ctx: &InferCtx,
    inputs: Option<&[TensorRef]>,
    k: usize,
) -> Result<Option<Vec<i64>>, OpError> {
    match inputs {
        Some(ins) => int_input(ctx, ins, k).map(Some),
        None => ctx.value_ints(k),
    }
}

fn infer_same(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    Ok(vec![ctx.inputs[0].clone()])
}

// ---------------------------------------------------------------------------------------
// IdentityN, Snapshot, StopGradient, TensorMove, Copy, ShapeN, Bitcast

fn infer_identity(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    if ctx.op == "IdentityN" {
        ctx.arity(1, usize::MAX)?;
    } else {
        ctx.arity(1, 1)?;
    }
    Ok(ctx.inputs.to_vec())
}

/// Input `k` to output `k`, for every output.
fn identity(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    for (k, y) in outputs.iter_mut().enumerate() {
        let src = bytes(ctx, input(ctx, inputs, k)?, k)?;
        let dst = bytes_mut(ctx, y)?;
        if src.len() != dst.len() {
            return Err(ctx.compute_error(format!("output {k} is not input {k}'s size")));
        }
        dst.copy_from_slice(src);
    }
    Ok(())
}

fn infer_copy(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let n = required_int(ctx, "N")?;
    if n < 1 {
        return Err(ctx.attr_error("N", format!("is {n}; Copy makes one output or more")));
    }
    Ok(vec![ctx.inputs[0].clone(); n as usize])
}

/// Copy: input 0 to every output.
fn copy(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let src = bytes(ctx, input(ctx, inputs, 0)?, 0)?;
    for y in outputs.iter_mut() {
        let dst = bytes_mut(ctx, y)?;
        if src.len() != dst.len() {
            return Err(ctx.compute_error("an output is not x's size"));
        }
        dst.copy_from_slice(src);
    }
    Ok(())
}

/// ShapeN's output type: GE's `dtype`, int32 by default.
fn shape_n_type(ctx: &InferCtx) -> Result<DType, OpError> {
    match super::matrix::type_attr(ctx, "dtype", DType::I32)? {
        d @ (DType::I32 | DType::I64) => Ok(d),
        d => Err(ctx.attr_error("dtype", format!("is {d}, not int32 or int64"))),
    }
}

fn infer_shape_n(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, usize::MAX)?;
    let dtype = shape_n_type(ctx)?;
    Ok(ctx
        .inputs
        .iter()
        .map(|x| {
            let len = x.shape.as_ref().map_or(UNKNOWN, |s| s.len() as i64);
            TensorMeta::new(dtype, &[len])
        })
        .collect())
}

fn shape_n(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let wide = shape_n_type(ctx)? == DType::I64;
    for (k, y) in outputs.iter_mut().enumerate() {
        let x = input(ctx, inputs, k)?;
        let dst = bytes_mut(ctx, y)?;
        let width = if wide { 8 } else { 4 };
        if dst.len() != x.rank() * width {
            return Err(ctx.compute_error(format!("output {k} does not hold input {k}'s rank")));
        }
        for (chunk, &d) in dst.chunks_exact_mut(width).zip(x.shape) {
            if wide {
                chunk.copy_from_slice(&(d as i64).to_le_bytes());
            } else {
                let d = i32::try_from(d)
                    .map_err(|_| ctx.input_error(k, format!("dim {d} does not fit int32")))?;
                chunk.copy_from_slice(&d.to_le_bytes());
            }
        }
    }
    Ok(())
}

fn infer_bitcast(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    if ctx.attrs.get("type").is_none() {
        return Err(ctx.attr_error("type", "is required and missing"));
    }
    let to = super::matrix::type_attr(ctx, "type", DType::F32)?;
    let x = &ctx.inputs[0];
    let (from, width) = (x.dtype.size() as i64, to.size() as i64);
    let Some(s) = &x.shape else {
        return Ok(meta(to, None));
    };
    let mut out = s.clone();
    if from > width {
        out.push(from / width);
    } else if from < width {
        match out.pop() {
            Some(last) if last == width / from || last == UNKNOWN => {}
            last => {
                return Err(ctx.input_error(
                    0,
                    format!(
                        "is {s:?}; to {to} its last dim must be {} (found {last:?})",
                        width / from
                    ),
                ));
            }
        }
    }
    Ok(meta(to, Some(out)))
}

// ---------------------------------------------------------------------------------------
// MirrorPad, PadV2, PadV3D

/// Where a padded output index reads from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum PadMode {
    Constant,
    /// Mirrored about the edge element, which is not repeated.
    Reflect,
    /// Mirrored including the edge element.
    Symmetric,
    Edge,
}

impl PadMode {
    /// The input index output index `o` reads on a dim of `dim` padded by `before`.
    fn source(self, o: i64, before: i64, dim: i64) -> Option<usize> {
        let i = o - before;
        let j = match self {
            _ if (0..dim).contains(&i) => i,
            PadMode::Constant => return None,
            PadMode::Edge => i.clamp(0, dim - 1),
            PadMode::Reflect if i < 0 => -i,
            PadMode::Reflect => 2 * (dim - 1) - i,
            PadMode::Symmetric if i < 0 => -i - 1,
            PadMode::Symmetric => 2 * dim - 1 - i,
        };
        usize::try_from(j).ok()
    }

    /// The widest pad each side of a dim of `dim` this mode reads within it.
    fn limit(self, dim: i64) -> i64 {
        match self {
            PadMode::Constant | PadMode::Edge => i64::MAX,
            PadMode::Reflect => dim - 1,
            PadMode::Symmetric => dim,
        }
    }
}

/// A pad op's mode and its `[before, after]` pair per dim (`None` while unknown).
type PadSpec = (PadMode, Option<Vec<(i64, i64)>>);

/// The mode and the `[before, after]` pairs (`None` while the paddings input's value is
/// unknown) of a pad op on x of rank `rank`.
fn pad_spec(ctx: &InferCtx, inputs: Option<&[TensorRef]>, rank: usize) -> Result<PadSpec, OpError> {
    let (mode, flat, interleaved) = match ctx.op {
        "MirrorPad" => {
            let mode = match ctx.attrs.get("mode") {
                None => return Err(ctx.attr_error("mode", "is required and missing")),
                Some(_) => match ctx.attr_str("mode", "")? {
                    "REFLECT" => PadMode::Reflect,
                    "SYMMETRIC" => PadMode::Symmetric,
                    m => {
                        return Err(
                            ctx.attr_error("mode", format!("{m:?} is not REFLECT or SYMMETRIC"))
                        );
                    }
                },
            };
            (mode, values_of(ctx, inputs, 1)?, true)
        }
        "PadV2" => (PadMode::Constant, values_of(ctx, inputs, 1)?, true),
        _ => {
            let mode = match ctx.attr_str("mode", "constant")? {
                "constant" => PadMode::Constant,
                "reflect" => PadMode::Reflect,
                "edge" => PadMode::Edge,
                m => {
                    return Err(
                        ctx.attr_error("mode", format!("{m:?} is not constant, reflect or edge"))
                    );
                }
            };
            let contiguous = ctx.attr_bool("paddings_contiguous", true)?;
            (mode, Some(required_list(ctx, "paddings")?), contiguous)
        }
    };
    let Some(flat) = flat else {
        return Ok((mode, None));
    };
    if flat.len() != 2 * rank {
        return Err(ctx.attr_error(
            "paddings",
            format!(
                "has {} values; x of rank {rank} needs {}",
                flat.len(),
                2 * rank
            ),
        ));
    }
    let pairs: Vec<(i64, i64)> = (0..rank)
        .map(|d| {
            if interleaved {
                (flat[2 * d], flat[2 * d + 1])
            } else {
                (flat[d], flat[rank + d])
            }
        })
        .collect();
    if pairs.iter().any(|&(b, a)| b < 0 || a < 0) {
        return Err(ctx.attr_error("paddings", format!("{flat:?} has a negative pad")));
    }
    Ok((mode, Some(pairs)))
}

/// The padded dims, each pad checked against the mode's limit where the dim is known.
fn padded(
    ctx: &InferCtx,
    mode: PadMode,
    shape: &[i64],
    pairs: &[(i64, i64)],
) -> Result<Vec<i64>, OpError> {
    shape
        .iter()
        .zip(pairs)
        .enumerate()
        .map(|(d, (&dim, &(b, a)))| {
            if dim == UNKNOWN {
                return Ok(UNKNOWN);
            }
            if b.max(a) > mode.limit(dim) || (mode == PadMode::Edge && dim == 0 && b + a > 0) {
                return Err(ctx.attr_error(
                    "paddings",
                    format!("pads ({b}, {a}) of dim {d} (of {dim}) reach past it in {mode:?} mode"),
                ));
            }
            Ok(dim + b + a)
        })
        .collect()
}

fn infer_pad(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    match ctx.op {
        "MirrorPad" => ctx.arity(2, 2)?,
        "PadV2" => ctx.arity(3, 3)?,
        _ => ctx.arity(1, 1)?,
    }
    let x = &ctx.inputs[0];
    if ctx.op == "PadV2" {
        let v = &ctx.inputs[2];
        if v.dtype != x.dtype
            || v.shape
                .as_ref()
                .is_some_and(|s| s.iter().product::<i64>() != 1)
        {
            return Err(ctx.input_error(2, format!("is {v}; it must be one {} value", x.dtype)));
        }
    }
    let Some(s) = &x.shape else {
        // Unknown rank still needs the required attributes.
        match ctx.op {
            "MirrorPad" if ctx.attrs.get("mode").is_none() => {
                return Err(ctx.attr_error("mode", "is required and missing"));
            }
            "PadV3D" => {
                required_list(ctx, "paddings")?;
            }
            _ => {}
        }
        return Ok(meta(x.dtype, None));
    };
    let (mode, pairs) = pad_spec(ctx, None, s.len())?;
    let dims = match pairs {
        Some(p) => padded(ctx, mode, s, &p)?,
        None => vec![UNKNOWN; s.len()],
    };
    Ok(meta(x.dtype, Some(dims)))
}

/// The pads: each output dim maps to an input index or to the constant.
fn pad(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let (mode, pairs) = pad_spec(ctx, Some(inputs), x.rank())?;
    let pairs = pairs.ok_or_else(|| ctx.input_error(1, "paddings are unknown"))?;
    let shape: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
    let out = padded(ctx, mode, &shape, &pairs)?;
    let fill = match ctx.op {
        "PadV2" => bytes(ctx, input(ctx, inputs, 2)?, 2)?.to_vec(),
        "PadV3D" => crate::ops::slicing::compute::element_bytes(
            x.dtype,
            ctx.attr_int("constant_values", 0)? as f64,
        ),
        _ => Vec::new(),
    };
    let maps: Vec<Vec<Option<usize>>> = out
        .iter()
        .zip(&pairs)
        .zip(&shape)
        .map(|((&o, &(b, _)), &dim)| (0..o).map(|i| mode.source(i, b, dim)).collect())
        .collect();
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_mapped(
            x.dtype.size(),
            src,
            x.shape,
            &maps,
            &fill,
            bytes_mut(ctx, y)?,
        ),
    )
}

// ---------------------------------------------------------------------------------------
// FillV2, FillV2D

fn infer_fill(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let dims = if ctx.op == "FillV2D" {
        ctx.arity(0, 0)?;
        let d = required_list(ctx, "dims")?;
        if d.iter().any(|&v| v < 0) {
            return Err(ctx.attr_error("dims", format!("{d:?} has a negative dim")));
        }
        Some(d)
    } else {
        ctx.arity(1, 1)?;
        crate::ops::shape::dims_input(ctx, 0)?
    };
    ctx.attr_float("value", 0.0)?;
    Ok(meta(DType::F32, dims))
}

fn fill(ctx: &InferCtx, _inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let y = output(ctx, outputs, 0)?;
    let value = crate::ops::slicing::compute::element_bytes(
        y.dtype,
        f64::from(ctx.attr_float("value", 0.0)?),
    );
    for chunk in bytes_mut(ctx, y)?.chunks_exact_mut(value.len().max(1)) {
        chunk.copy_from_slice(&value);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// SliceDV2, SliceWithAxes, StridedSliceV3, Crop

/// `(axes, offsets, sizes)` of a TensorFlow slice; offsets and sizes `None` while unknown.
type SliceSpec = (Vec<usize>, Option<Vec<i64>>, Option<Vec<i64>>);

fn slice_spec(
    ctx: &InferCtx,
    inputs: Option<&[TensorRef]>,
    rank: usize,
) -> Result<SliceSpec, OpError> {
    let offsets = values_of(ctx, inputs, 1)?;
    let (axes, sizes) = if ctx.op == "SliceDV2" {
        ((0..rank).collect(), Some(required_list(ctx, "size")?))
    } else {
        let axes = required_list(ctx, "axes")?
            .iter()
            .map(|&a| axis(ctx, "axes", a, rank))
            .collect::<Result<Vec<_>, _>>()?;
        (axes, values_of(ctx, inputs, 2)?)
    };
    for (name, v) in [("offsets", &offsets), ("size", &sizes)] {
        if let Some(v) = v
            && v.len() != axes.len()
        {
            return Err(ctx.attr_error(
                name,
                format!("has {} values for {} dims", v.len(), axes.len()),
            ));
        }
    }
    Ok((axes, offsets, sizes))
}

/// The sliced dims of `shape`: `(start, count)` per dim (start 0 while unknown).
fn slice_dims(ctx: &InferCtx, shape: &[i64], spec: &SliceSpec) -> Result<Vec<(i64, i64)>, OpError> {
    let (axes, offsets, sizes) = spec;
    let mut out: Vec<(i64, i64)> = shape.iter().map(|&d| (0, d)).collect();
    for (k, &a) in axes.iter().enumerate() {
        let dim = shape[a];
        let off = offsets.as_ref().map(|o| o[k]);
        let size = sizes.as_ref().map(|s| s[k]);
        if off.is_some_and(|o| o < 0) || size.is_some_and(|s| s < -1) {
            return Err(
                ctx.attr_error("offsets", format!("dim {a}: offset {off:?}, size {size:?}"))
            );
        }
        let count = match (off, size) {
            (Some(o), Some(-1)) if dim != UNKNOWN => dim - o,
            (_, Some(-1)) | (_, None) => UNKNOWN,
            (_, Some(s)) => s,
        };
        if let (Some(o), true) = (off, dim != UNKNOWN && count != UNKNOWN)
            && (count < 0 || o + count > dim)
        {
            return Err(ctx.attr_error(
                "size",
                format!("dim {a} of {dim}: offset {o} and size {count} reach past it"),
            ));
        }
        out[a] = (off.unwrap_or(0), count);
    }
    Ok(out)
}

fn infer_slice(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(
        if ctx.op == "SliceDV2" { 2 } else { 3 },
        if ctx.op == "SliceDV2" { 2 } else { 3 },
    )?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        required_list(ctx, if ctx.op == "SliceDV2" { "size" } else { "axes" })?;
        return Ok(meta(x.dtype, None));
    };
    let spec = slice_spec(ctx, None, s.len())?;
    let dims = slice_dims(ctx, s, &spec)?.iter().map(|&(_, c)| c).collect();
    Ok(meta(x.dtype, Some(dims)))
}

/// A view of x from `start` with `count` elements per dim.
fn window(shape: &[usize], cuts: &[(i64, i64)]) -> View {
    let base = View::contiguous(shape);
    View {
        shape: cuts.iter().map(|&(_, c)| c.max(0) as usize).collect(),
        offset: cuts
            .iter()
            .zip(&base.strides)
            .map(|(&(o, _), &s)| o as isize * s)
            .sum(),
        strides: base.strides,
    }
}

fn slice(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let shape: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
    let spec = slice_spec(ctx, Some(inputs), x.rank())?;
    let cuts = slice_dims(ctx, &shape, &spec)?;
    copy_into(ctx, x, &window(x.shape, &cuts), outputs)
}

/// StridedSliceV3 as the library's Slice: the same inputs in the same order.
fn as_onnx_slice<'a>(ctx: &InferCtx<'a>) -> Result<(&'static OpSpec, InferCtx<'a>), OpError> {
    ctx.arity(3, 5)?;
    let spec = crate::ops::registry::library()
        .get("Slice")
        .ok_or_else(|| OpError::NoCompute { op: "Slice".into() })?;
    Ok((
        spec,
        InferCtx {
            op: "Slice",
            inputs: ctx.inputs,
            values: ctx.values,
            attrs: ctx.attrs,
            outputs: ctx.outputs,
        },
    ))
}

fn infer_onnx_slice(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let (spec, library) = as_onnx_slice(ctx)?;
    spec.infer_shapes(&library)
}

fn onnx_slice(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (spec, library) = as_onnx_slice(ctx)?;
    match spec.compute {
        Some(Compute::Into(f)) => f(&library, inputs, outputs),
        _ => Err(OpError::NoCompute { op: "Slice".into() }),
    }
}

/// Crop's `(start, count)` per dim of x (`shape`), given the reference `size` shape.
fn crop_dims(ctx: &InferCtx, x: &[i64], size: &[i64]) -> Result<Vec<(i64, i64)>, OpError> {
    let rank = x.len();
    if size.len() != rank {
        return Err(ctx.input_error(1, format!("has rank {}, x has {rank}", size.len())));
    }
    let first = axis(ctx, "axis", ctx.attr_int("axis", 2)?, rank)?;
    let offsets = required_list(ctx, "offsets")?;
    if offsets.len() != 1 && offsets.len() != rank - first {
        return Err(ctx.attr_error(
            "offsets",
            format!(
                "has {} values; dims {first}.. need 1 or {}",
                offsets.len(),
                rank - first
            ),
        ));
    }
    let mut out: Vec<(i64, i64)> = x.iter().map(|&d| (0, d)).collect();
    for d in first..rank {
        let o = offsets[if offsets.len() == 1 { 0 } else { d - first }];
        let (n, dim) = (size[d], x[d]);
        if o < 0 || (n != UNKNOWN && dim != UNKNOWN && o + n > dim) {
            return Err(ctx.attr_error(
                "offsets",
                format!("offset {o} and size {n} reach past dim {d} of {dim}"),
            ));
        }
        out[d] = (o, n);
    }
    Ok(out)
}

fn infer_crop(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let x = &ctx.inputs[0];
    let (Some(s), Some(r)) = (&x.shape, &ctx.inputs[1].shape) else {
        required_list(ctx, "offsets")?;
        return Ok(meta(x.dtype, None));
    };
    let dims = crop_dims(ctx, s, r)?.iter().map(|&(_, c)| c).collect();
    Ok(meta(x.dtype, Some(dims)))
}

fn crop(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let r = input(ctx, inputs, 1)?;
    let dims = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let cuts = crop_dims(ctx, &dims(x.shape), &dims(r.shape))?;
    copy_into(ctx, x, &window(x.shape, &cuts), outputs)
}

// ---------------------------------------------------------------------------------------
// Roll, Permute, ConfusionTransposeD, TileWithAxis

/// Roll: per rolled dim, output `i` reads `(i - shift) mod n`.
fn roll(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let shifts = required_list(ctx, "shifts")?;
    let dims = ctx.attr_ints("dims")?.unwrap_or(&[]).to_vec();
    let flat = [x.len()];
    let shape: &[usize] = if dims.is_empty() { &flat } else { x.shape };
    let mut total = vec![0i64; shape.len()];
    if dims.is_empty() {
        if shifts.len() != 1 {
            return Err(ctx.attr_error("shifts", format!("{shifts:?}: without dims, one shift")));
        }
        total[0] = shifts[0];
    } else {
        if dims.len() != shifts.len() {
            return Err(ctx.attr_error(
                "shifts",
                format!("{shifts:?} does not pair with dims {dims:?}"),
            ));
        }
        for (&d, &s) in dims.iter().zip(&shifts) {
            let a = axis(ctx, "dims", d, x.rank())?;
            total[a] = total[a].wrapping_add(s);
        }
    }
    let maps: Vec<Vec<Option<usize>>> = shape
        .iter()
        .zip(&total)
        .map(|(&n, &s)| {
            let n = n as i64;
            (0..n)
                .map(|i| Some((i - s).rem_euclid(n.max(1)) as usize))
                .collect()
        })
        .collect();
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_mapped(x.dtype.size(), src, shape, &maps, &[], bytes_mut(ctx, y)?),
    )
}

/// A permutation of `rank` dims from `order`: Caffe's Permute completes it with the dims
/// it leaves out, in increasing order; ConfusionTransposeD's perm must be whole.
fn permutation(
    ctx: &InferCtx,
    name: &str,
    order: &[i64],
    rank: usize,
) -> Result<Vec<usize>, OpError> {
    let mut seen = vec![false; rank];
    let mut perm = Vec::with_capacity(rank);
    for &o in order {
        let a = axis(ctx, name, o, rank)?;
        if std::mem::replace(&mut seen[a], true) {
            return Err(ctx.attr_error(name, format!("{order:?} names dim {a} twice")));
        }
        perm.push(a);
    }
    if ctx.op == "ConfusionTransposeD" && perm.len() != rank {
        return Err(ctx.attr_error(
            name,
            format!("{order:?} is not a permutation of {rank} dims"),
        ));
    }
    perm.extend((0..rank).filter(|&a| !seen[a]));
    Ok(perm)
}

/// ConfusionTransposeD's `shape` for `count` elements: one -1 takes the rest.
fn reshaped(ctx: &InferCtx, count: Option<i64>) -> Result<Vec<i64>, OpError> {
    let mut shape = required_list(ctx, "shape")?;
    let known: i64 = shape.iter().filter(|&&d| d != -1).product();
    let holes = shape.iter().filter(|&&d| d == -1).count();
    if holes > 1 || shape.iter().any(|&d| d < -1) {
        return Err(ctx.attr_error("shape", format!("{shape:?} is not a shape")));
    }
    match count {
        Some(n) if holes == 1 && known > 0 && n % known == 0 => {
            shape
                .iter_mut()
                .filter(|d| **d == -1)
                .for_each(|d| *d = n / known);
        }
        Some(n) if holes == 0 && n == known => {}
        Some(n) => {
            return Err(ctx.attr_error("shape", format!("{shape:?} does not hold {n} elements")));
        }
        None => {}
    }
    Ok(shape)
}

/// Permute's, or ConfusionTransposeD's `(view over x, output shape)`.
fn permute_view(ctx: &InferCtx, shape: &[i64]) -> Result<(Option<View>, Vec<i64>), OpError> {
    let count = shape
        .iter()
        .try_fold(1i64, |n, &d| (d != UNKNOWN).then_some(n * d));
    let to_view = |s: &[i64]| -> Option<View> {
        let dims: Option<Vec<usize>> = s.iter().map(|&d| usize::try_from(d).ok()).collect();
        dims.map(|d| View::contiguous(&d))
    };
    if ctx.op == "Permute" {
        let order = ctx.attr_ints("order")?.unwrap_or(&[0]).to_vec();
        let perm = permutation(ctx, "order", &order, shape.len())?;
        let out = perm.iter().map(|&p| shape[p]).collect();
        return Ok((to_view(shape).map(|v| v.permute(&perm)), out));
    }
    let perm_list = required_list(ctx, "perm")?;
    let first = match ctx.attrs.get("transpose_first") {
        None => return Err(ctx.attr_error("transpose_first", "is required and missing")),
        Some(_) => ctx.attr_bool("transpose_first", false)?,
    };
    let target = reshaped(ctx, count)?;
    if first {
        let perm = permutation(ctx, "perm", &perm_list, shape.len())?;
        return Ok((to_view(shape).map(|v| v.permute(&perm)), target));
    }
    let perm = permutation(ctx, "perm", &perm_list, target.len())?;
    let out = perm.iter().map(|&p| target[p]).collect();
    Ok((to_view(&target).map(|v| v.permute(&perm)), out))
}

fn infer_permute(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        if ctx.op == "ConfusionTransposeD" {
            // Unknown rank still needs the required attributes.
            for name in ["perm", "shape", "transpose_first"] {
                if ctx.attrs.get(name).is_none() {
                    return Err(ctx.attr_error(name, "is required and missing"));
                }
            }
        }
        return Ok(meta(x.dtype, None));
    };
    Ok(meta(x.dtype, Some(permute_view(ctx, s)?.1)))
}

fn permute(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let shape: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
    let (view, _) = permute_view(ctx, &shape)?;
    let view = view.ok_or_else(|| ctx.compute_error("the shape is not concrete"))?;
    copy_into(ctx, x, &view, outputs)
}

/// TileWithAxis's axis and tiles for x of rank `rank`.
fn tile_spec(ctx: &InferCtx, rank: usize) -> Result<(usize, i64), OpError> {
    let tiles = required_int(ctx, "tiles")?;
    if tiles < 0 {
        return Err(ctx.attr_error("tiles", format!("{tiles} is negative")));
    }
    Ok((axis(ctx, "axis", ctx.attr_int("axis", 1)?, rank)?, tiles))
}

fn infer_tile(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        required_int(ctx, "tiles")?;
        return Ok(meta(x.dtype, None));
    };
    let (a, tiles) = tile_spec(ctx, s.len())?;
    let mut out = s.clone();
    if out[a] != UNKNOWN {
        out[a] *= tiles;
    }
    Ok(meta(x.dtype, Some(out)))
}

fn tile(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let (a, tiles) = tile_spec(ctx, x.rank())?;
    let mut reps = vec![1i64; x.rank()];
    reps[a] = tiles;
    let view = crate::ops::slicing::compute::tile_view(x.shape, &reps);
    copy_into(ctx, x, &view, outputs)
}

// ---------------------------------------------------------------------------------------
// DataFormatVecPermute, ParallelConcat

/// For a vector of `len` entries: the source entry of each output entry.
fn format_order(ctx: &InferCtx, len: i64) -> Result<Vec<usize>, OpError> {
    let src = ctx.attr_str("src_format", "NHWC")?;
    let dst = ctx.attr_str("dst_format", "NCHW")?;
    let mut sorted = (src.as_bytes().to_vec(), dst.as_bytes().to_vec());
    sorted.0.sort_unstable();
    sorted.1.sort_unstable();
    if sorted.0 != sorted.1 || sorted.0.windows(2).any(|w| w[0] == w[1]) {
        return Err(ctx.attr_error(
            "dst_format",
            format!("{dst:?} is not a reordering of src_format {src:?}"),
        ));
    }
    // A vector of the spatial dims only leaves out N and C.
    let (src, dst): (Vec<u8>, Vec<u8>) = if len as usize == src.len() {
        (src.bytes().collect(), dst.bytes().collect())
    } else if len as usize + 2 == src.len() {
        let spatial = |f: &str| f.bytes().filter(|&c| c != b'N' && c != b'C').collect();
        (spatial(src), spatial(dst))
    } else {
        return Err(ctx.input_error(
            0,
            format!(
                "has {len} entries; {src:?} takes {} or {}",
                src.len(),
                src.len() - 2
            ),
        ));
    };
    Ok(dst
        .iter()
        .map(|c| src.iter().position(|s| s == c).unwrap_or(0))
        .collect())
}

fn infer_format_permute(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    if !matches!(x.dtype, DType::I32 | DType::I64) {
        return Err(ctx.input_error(0, format!("is {}, not int32 or int64", x.dtype)));
    }
    match x.shape.as_deref() {
        Some([n]) | Some([n, 2]) if *n != UNKNOWN => {
            format_order(ctx, *n)?;
        }
        Some([_]) | Some([_, 2]) | None => {}
        Some(s) => return Err(ctx.input_error(0, format!("is {s:?}, not [n] or [n, 2]"))),
    }
    Ok(vec![x.clone()])
}

/// DataFormatVecPermute: rows (one element, or a pair) reordered.
fn format_permute(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let Some(&n) = x.shape.first() else {
        return Err(ctx.input_error(0, "is a scalar, not [n] or [n, 2]"));
    };
    let order = format_order(ctx, n as i64)?;
    let row = x.shape[1..].iter().product::<usize>() * x.dtype.size();
    let src = bytes(ctx, x, 0)?;
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    for (i, chunk) in dst.chunks_exact_mut(row.max(1)).enumerate() {
        let from = order.get(i).copied().unwrap_or(i) * row;
        chunk.copy_from_slice(&src[from..from + row]);
    }
    Ok(())
}

fn infer_parallel_concat(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, usize::MAX)?;
    let shape = required_list(ctx, "shape")?;
    let n = required_int(ctx, "N")?;
    let x = &ctx.inputs[0];
    if n != ctx.inputs.len() as i64 || shape.first() != Some(&n) {
        return Err(ctx.attr_error(
            "N",
            format!(
                "N {n} and shape {shape:?} do not fit {} values",
                ctx.inputs.len()
            ),
        ));
    }
    for (i, t) in ctx.inputs.iter().enumerate() {
        let fits = t.shape.as_ref().is_none_or(|s| {
            s.len() == shape.len()
                && s.iter()
                    .zip(std::iter::once(&1).chain(&shape[1..]))
                    .all(|(&a, &b)| a == b || a == UNKNOWN)
        });
        if t.dtype != x.dtype || !fits {
            return Err(ctx.input_error(i, format!("is {t}; each value is one row of {shape:?}")));
        }
    }
    Ok(meta(x.dtype, Some(shape)))
}

/// ParallelConcat: each value's bytes in turn.
fn parallel_concat(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    let row = dst.len() / inputs.len().max(1);
    for (k, (t, chunk)) in inputs
        .iter()
        .zip(dst.chunks_exact_mut(row.max(1)))
        .enumerate()
    {
        let src = bytes(ctx, t, k)?;
        if src.len() != chunk.len() {
            return Err(ctx.input_error(k, "is not one row of the output"));
        }
        chunk.copy_from_slice(src);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
