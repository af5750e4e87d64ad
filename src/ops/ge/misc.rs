//! GE's meaning of op types that ONNX also names with another (computed by rt2's internal
//! `ge.*` ops, which GE nodes of those types are launched as: `shared.rs`), and a few
//! GE-only types: dropout's mask, AffineGrid, Dilation and MaxPoolExt2. Prototypes:
//! `prototypes/array_ops.txt` (NonZero, Where, Unique), `nn_pooling_ops.txt` (Upsample,
//! MaxPoolExt2), `nonlinear_fuc_ops.txt` (Celu), `matrix_calculation_ops.txt` (Scatter),
//! `nn_norm_ops.txt` (DropOutDoMask, DropOutDoMaskV3D), `transformation_ops.txt`
//! (AffineGrid), `nn_calculation_ops.txt` (Dilation).
//!
//! Internal ops (named `ge.<Type>`, a name no ONNX or GE op type can have):
//!
//! - `ge.NonZero(x; transpose false, dtype int64)`: PyTorch's nonzero, as GE's NonZero
//!   documents: the coordinates of x's non-zero elements in row-major order, one row of
//!   `rank` coordinates per element (`[N, rank]`), or one row per dim (`[rank, N]`, ONNX's
//!   layout) with `transpose`; int64 or int32 (`dtype`). GE's NonZero with `transpose`
//!   and int64 is ONNX's NonZero and runs as it; TensorFlow's Where(x) (int64 `[N, rank]`
//!   coordinates of the true elements) is `ge.NonZero` with the defaults.
//! - `ge.Unique(x; out_idx int32)`: TensorFlow's Unique of a 1-D x: `y` the distinct
//!   values in order of first occurrence, `idx` (of type `out_idx`) the index in `y` of
//!   each element of x. Computed by the library's Unique (unsorted, flattened).
//! - `ge.Upsample(x; scale 1, stride_h 2, stride_w 2)`: Caffe's upsample of an NCHW x, the
//!   nearest-neighbour repeat: `y[n, c, h, w] = scale * x[n, c, h / stride_h, w /
//!   stride_w]`, y of `[N, C, H stride_h, W stride_w]`.
//! - `ge.Celu(x; alpha1 1, alpha2 1, alpha3 1)`: `alpha3 max(x, 0) + alpha1 (exp(min(x,
//!   0) / alpha2) - 1)`, as GE's Celu kernel computes (its header's "alpha3 * 3" is this
//!   positive part). With `alpha1 == alpha2` and `alpha3` 1 it is ONNX's Celu and runs as
//!   it.
//! - `ge.Scatter(var, indices, updates; reduce required, axis 0)`: the KV-cache scatter
//!   GE's Scatter documents (MindSpore's): var `[B, ..., S, ...]` (S at `axis`), updates
//!   `[K, ..., U, ...]` (U at `axis`, the other dims var's); for each `i < K`, 1-D indices
//!   give batch `i` and position `indices[i]`, 2-D indices `[K, 2]` give the pair
//!   `indices[i]` (batch, position); `var[b, ..., p + j, ...] = updates[i, ..., j, ...]`
//!   for `j < U`. The rest of var is copied. rt2's choices: `reduce` "none" and "update"
//!   both write (the header names no difference); `axis` must be a dim after the batch dim
//!   (the prototype's default 0 names no position, so it is refused); a window outside var
//!   is an error.
//!
//! GE-only types:
//!
//! - DropOutDoMask(x, mask, keep_prob) and DropOutDoMaskV3D(x, mask; keep_prob required):
//!   `y = x / keep_prob` where x's element is kept, 0 where it is dropped. A uint8 mask is
//!   a bitmask (the header sizes it at one bit per element, padded to 128 elements): element
//!   `k` is kept when bit `k % 8` (least significant first) of byte `k / 8` is 1; the bit
//!   order is rt2's choice (the header does not state it). A bool mask (V3D) has one
//!   element per element of x. keep_prob (input) has one element of x's type.
//! - AffineGrid(theta, output_size; align_corners false): PyTorch's `affine_grid`. For 2-D,
//!   theta `[N, 2, 3]`, output_size `[N, C, H, W]`, y `[N, H, W, 2]` with `y[n, h, w] =
//!   theta[n] (x_w, y_h, 1)`; for 3-D theta `[N, 3, 4]`, output_size `[N, C, D, H, W]`, y
//!   `[N, D, H, W, 3]`. The base coordinates along a dim of size S are `(2 i + 1) / S - 1`,
//!   or `-1 + 2 i / (S - 1)` with `align_corners` (0 where S is 1).
//! - Dilation(x; dilations required, pads [], padding_value 0): x spread out, `y[i d] =
//!   x[i]` per dim (`d` the dim's dilation, y's dim `(n - 1) d + 1`), the gaps holding
//!   padding_value. rt2 computes it with no padding only (`pads` empty or zeros): the
//!   header does not say how a list of pads maps to dims.
//! - MaxPoolExt2(x; ksize, strides, padding required, data_format "NHWC"): TensorFlow's
//!   MaxPool (its MaxPoolV2), computed as GE's TF-born MaxPool is.
//!
//! Float types compute in float32 (float16, bfloat16) or float64, rounding once.

use half::{bf16, f16};

use super::attrs::{required_float, required_list};
use crate::dispatch;
use crate::ops::elementwise::binary::unsupported;
use crate::ops::elementwise::ge_type_attr;
use crate::ops::elementwise::num::{Float, Real};
use crate::ops::registry::{Compute, library};
use crate::ops::shape::args::{bytes, bytes_mut, input, output};
use crate::ops::{
    Attr, Attrs, DType, InferCtx, OpError, OpRegistry, OpSpec, Tensor, TensorMeta, TensorMut,
    TensorRef, UNKNOWN, meta,
};

/// The internal op GE's NonZero and TensorFlow's Where run as.
pub const NON_ZERO: &str = "ge.NonZero";
/// The internal op GE's (TensorFlow's) Unique runs as.
pub const UNIQUE: &str = "ge.Unique";
/// The internal op GE's (Caffe's) Upsample runs as.
pub const UPSAMPLE: &str = "ge.Upsample";
/// The internal op GE's Celu runs as where ONNX's Celu does not compute it.
pub const CELU: &str = "ge.Celu";
/// The internal op GE's Scatter runs as.
pub const SCATTER: &str = "ge.Scatter";

/// The GE-only op types this file registers, with the inputs their inference reads.
const OPS: &super::table::Entries = &[
    ("DropOutDoMask", &[], infer_dropout, dropout),
    ("DropOutDoMaskV3D", &[], infer_dropout, dropout),
    ("AffineGrid", &[1], infer_affine_grid, affine_grid),
    ("Dilation", &[], infer_dilation, dilation),
    ("MaxPoolExt2", &[], infer_max_pool_ext2, max_pool_ext2),
];

/// Registers the family: the GE-only types and the internal `ge.*` ops.
pub fn register(reg: &mut OpRegistry) {
    super::table::register_entries(reg, OPS);
    reg.add(
        OpSpec::new(NON_ZERO, infer_nonzero)
            .data_dependent()
            .computes_alloc(nonzero),
    );
    reg.add(
        OpSpec::new(UNIQUE, infer_unique)
            .data_dependent()
            .computes_alloc(unique),
    );
    reg.add(OpSpec::new(UPSAMPLE, infer_upsample).computes(upsample));
    reg.add(OpSpec::new(CELU, infer_float_same).computes(celu));
    reg.add(OpSpec::new(SCATTER, infer_scatter).computes(scatter));
}

/// The GE op types this file computes with GE's contract (the internal `ge.*` ops are
/// not op types of a graph).
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::entry_names(OPS)
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::Bf16)
}

/// The values of an int32 or int64 input.
fn index_values(ctx: &InferCtx, t: &TensorRef, k: usize) -> Result<Vec<i64>, OpError> {
    match t.dtype {
        DType::I32 => Ok(t.slice::<i32>()?.iter().map(|&v| i64::from(v)).collect()),
        DType::I64 => Ok(t.slice::<i64>()?.to_vec()),
        d => Err(ctx.input_error(k, format!("is {d}, not int32 or int64"))),
    }
}

/// An index type attribute: int32 or int64.
fn index_type(ctx: &InferCtx, name: &str, default: DType) -> Result<DType, OpError> {
    match ge_type_attr(ctx, name, Some(default))? {
        d @ (DType::I32 | DType::I64) => Ok(d),
        d => Err(ctx.attr_error(name, format!("is {d}, not int32 or int64"))),
    }
}

/// Int64 values as `dtype` (int32 or int64), an error where one does not fit.
fn index_tensor(
    ctx: &InferCtx,
    shape: &[usize],
    v: &[i64],
    dtype: DType,
) -> Result<Tensor, OpError> {
    if dtype == DType::I64 {
        return Ok(Tensor::from_vec(shape, v));
    }
    let narrow: Vec<i32> = v
        .iter()
        .map(|&i| i32::try_from(i))
        .collect::<Result<_, _>>()
        .map_err(|_| ctx.compute_error("an index does not fit int32"))?;
    Ok(Tensor::from_vec(shape, &narrow))
}

/// A float op of one input, y of x's type and shape.
fn infer_float_same(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    if !is_float(x.dtype) {
        return Err(unsupported(ctx, x.dtype));
    }
    Ok(vec![x.clone()])
}

// ---------------------------------------------------------------------------------------
// ge.NonZero, ge.Unique

fn infer_nonzero(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let dtype = index_type(ctx, "dtype", DType::I64)?;
    let transpose = ctx.attr_bool("transpose", false)?;
    let x = &ctx.inputs[0];
    if !(is_float(x.dtype) || x.dtype.is_int()) {
        return Err(unsupported(ctx, x.dtype));
    }
    let rank = x.shape.as_ref().map_or(UNKNOWN, |s| s.len() as i64);
    let shape = if transpose {
        vec![rank, UNKNOWN]
    } else {
        vec![UNKNOWN, rank]
    };
    Ok(meta(dtype, Some(shape)))
}

/// ge.NonZero: the library's NonZero (`[rank, N]` int64), laid out and typed as asked.
fn nonzero(ctx: &InferCtx, inputs: &[TensorRef]) -> Result<Vec<Tensor>, OpError> {
    let dtype = index_type(ctx, "dtype", DType::I64)?;
    let transpose = ctx.attr_bool("transpose", false)?;
    let mut found = crate::ops::slicing::compute::nonzero(ctx, inputs)?;
    let coords = found
        .pop()
        .ok_or_else(|| ctx.compute_error("NonZero gave no output"))?;
    let (rank, n) = match coords.shape[..] {
        [r, n] => (r, n),
        _ => return Err(ctx.compute_error("NonZero gave no [rank, N] coordinates")),
    };
    let v = coords.slice::<i64>()?;
    if transpose {
        return Ok(vec![index_tensor(ctx, &[rank, n], v, dtype)?]);
    }
    let mut rows = vec![0i64; v.len()];
    for (a, dim) in v.chunks_exact(n.max(1)).take(rank).enumerate() {
        for (k, &c) in dim.iter().enumerate() {
            rows[k * rank + a] = c;
        }
    }
    Ok(vec![index_tensor(ctx, &[n, rank], &rows, dtype)?])
}

fn infer_unique(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let idx = index_type(ctx, "out_idx", DType::I32)?;
    let x = &ctx.inputs[0];
    if !(is_float(x.dtype) || x.dtype.is_int()) {
        return Err(unsupported(ctx, x.dtype));
    }
    let n = match x.shape.as_deref() {
        None => UNKNOWN,
        Some([n]) => *n,
        Some(s) => return Err(ctx.input_error(0, format!("has shape {s:?}; x is 1-D"))),
    };
    Ok(vec![
        meta(x.dtype, Some(vec![UNKNOWN])).remove(0),
        meta(idx, Some(vec![n])).remove(0),
    ])
}

/// ge.Unique: the library's Unique, unsorted (first occurrence order) and flattened: its
/// values and its inverse indices.
fn unique(ctx: &InferCtx, inputs: &[TensorRef]) -> Result<Vec<Tensor>, OpError> {
    let idx = index_type(ctx, "out_idx", DType::I32)?;
    let x = input(ctx, inputs, 0)?;
    if x.rank() != 1 {
        return Err(ctx.input_error(0, format!("has shape {:?}; x is 1-D", x.shape)));
    }
    let Some(Compute::Alloc(f)) = library().get("Unique").and_then(|s| s.compute) else {
        return Err(OpError::NoCompute {
            op: "Unique".into(),
        });
    };
    let attrs: Attrs = [("sorted".to_string(), Attr::Int(0))].into_iter().collect();
    let metas = [TensorMeta::new(x.dtype, &[x.len() as i64])];
    let onnx = InferCtx {
        op: "Unique",
        inputs: &metas,
        values: &[],
        attrs: &attrs,
        outputs: 3,
    };
    let mut outs = f(&onnx, std::slice::from_ref(x))?;
    if outs.len() < 3 {
        return Err(ctx.compute_error("Unique gave too few outputs"));
    }
    let inverse = outs.swap_remove(2);
    let y = outs.swap_remove(0);
    let idx = index_tensor(ctx, &inverse.shape, inverse.slice::<i64>()?, idx)?;
    let mut res = vec![y, idx];
    res.truncate(ctx.outputs.clamp(1, 2));
    Ok(res)
}

// ---------------------------------------------------------------------------------------
// ge.Upsample, ge.Celu

/// Upsample's strides, each at least 1.
fn strides(ctx: &InferCtx) -> Result<(i64, i64), OpError> {
    let get = |name: &str| -> Result<i64, OpError> {
        match ctx.attr_int(name, 2)? {
            s if (1..=1 << 16).contains(&s) => Ok(s),
            s => Err(ctx.attr_error(name, format!("is {s}; a stride is at least 1"))),
        }
    };
    Ok((get("stride_h")?, get("stride_w")?))
}

fn infer_upsample(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let x = infer_float_same(ctx)?.remove(0);
    let (sh, sw) = strides(ctx)?;
    ctx.attr_float("scale", 1.0)?;
    if let Some(f) = super::attrs::input_format(ctx, 0)
        && f == crate::formats::Format::Nhwc
    {
        return Err(ctx.input_error(0, "is NHWC; Caffe's Upsample takes NCHW"));
    }
    let shape = match x.shape.as_deref() {
        None => None,
        Some(&[n, c, h, w]) => {
            let up = |d: i64, s: i64| if d < 0 { UNKNOWN } else { d * s };
            Some(vec![n, c, up(h, sh), up(w, sw)])
        }
        Some(s) => return Err(ctx.input_error(0, format!("has shape {s:?}; x is NCHW"))),
    };
    Ok(meta(x.dtype, shape))
}

fn upsample(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    fn go<T: Float>(
        ctx: &InferCtx,
        x: &TensorRef,
        out: &mut TensorMut,
        (sh, sw): (usize, usize),
    ) -> Result<(), OpError> {
        let w = match x.shape[..] {
            [_, _, _, w] => w,
            _ => return Err(ctx.input_error(0, "is not NCHW")),
        };
        let scale = <T::R as Real>::c(f64::from(ctx.attr_float("scale", 1.0)?));
        let src = x.slice::<T>()?;
        let dst = out.slice_mut::<T>()?;
        let row = w * sw;
        if dst.len() != src.len() * sh * sw {
            return Err(ctx.compute_error("y does not hold x upsampled"));
        }
        for (k, line) in src
            .chunks_exact(w.max(1))
            .enumerate()
            .take(src.len() / w.max(1))
        {
            // Input row k (plane k / h, row k % h) fills output rows k sh .. k sh + sh.
            let first = k * sh * row;
            for (j, &v) in line.iter().enumerate() {
                let y = T::from_r(scale * v.to_r());
                dst[first + j * sw..first + (j + 1) * sw].fill(y);
            }
            for r in 1..sh {
                dst.copy_within(first..first + row, first + r * row);
            }
        }
        Ok(())
    }
    let (sh, sw) = strides(ctx)?;
    let x = input(ctx, inputs, 0)?;
    let out = output(ctx, outputs, 0)?;
    let s = (sh as usize, sw as usize);
    dispatch!(x.dtype, T in [f32, f64, f16, bf16] => go::<T>(ctx, x, out, s),
        other => Err(unsupported(ctx, other)))
}

/// ge.Celu: `alpha3 max(x, 0) + alpha1 (exp(min(x, 0) / alpha2) - 1)`.
fn celu(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    fn go<T: Float>(ctx: &InferCtx, x: &TensorRef, out: &mut TensorMut) -> Result<(), OpError> {
        let a = |name| -> Result<T::R, OpError> {
            Ok(<T::R as Real>::c(f64::from(ctx.attr_float(name, 1.0)?)))
        };
        let (a1, a2, a3) = (a("alpha1")?, a("alpha2")?, a("alpha3")?);
        let zero = <T::R as Real>::c(0.0);
        if a2 == zero {
            return Err(ctx.attr_error("alpha2", "is 0; x is divided by it"));
        }
        let one = <T::R as Real>::c(1.0);
        crate::ops::elementwise::broadcast::par_map(
            x.slice::<T>()?,
            out.slice_mut::<T>()?,
            move |v| {
                let v = v.to_r();
                let (pos, neg) = if v > zero { (v, zero) } else { (zero, v) };
                T::from_r(a3 * pos + a1 * ((neg / a2).exp() - one))
            },
        );
        Ok(())
    }
    let x = input(ctx, inputs, 0)?;
    let out = output(ctx, outputs, 0)?;
    dispatch!(x.dtype, T in [f32, f64, f16, bf16] => go::<T>(ctx, x, out),
        other => Err(unsupported(ctx, other)))
}

// ---------------------------------------------------------------------------------------
// ge.Scatter

/// Scatter's `axis`, a dim after the batch dim of a var of `rank`.
fn scatter_axis(ctx: &InferCtx, rank: usize) -> Result<usize, OpError> {
    let axis = ctx.attr_int("axis", 0)?;
    let a = ctx.axis(axis, rank, "axis")?;
    if a == 0 {
        return Err(ctx.attr_error(
            "axis",
            "is the batch dim; rt2 computes Scatter along a later dim (the position's)",
        ));
    }
    Ok(a)
}

fn scatter_reduce(ctx: &InferCtx) -> Result<(), OpError> {
    match ctx.attrs.get("reduce") {
        None => Err(ctx.attr_error("reduce", "is required and missing")),
        Some(_) => match ctx.attr_str("reduce", "")? {
            "none" | "update" => Ok(()),
            other => Err(ctx.attr_error("reduce", format!("{other:?} is not none or update"))),
        },
    }
}

/// Checks Scatter's shapes, as far as they are known: var `[B, ..., S, ...]`, indices
/// `[K]` or `[K, 2]`, updates `[K, ..., U, ...]`.
fn check_scatter(
    ctx: &InferCtx,
    var: &[i64],
    idx: &[i64],
    upd: &[i64],
    axis: usize,
) -> Result<(), OpError> {
    if !(idx.len() == 1 || (idx.len() == 2 && matches!(idx[1], 2 | UNKNOWN))) {
        return Err(ctx.input_error(1, format!("has shape {idx:?}; indices are [K] or [K, 2]")));
    }
    if upd.len() != var.len() {
        return Err(ctx.input_error(2, format!("has rank {}; var has {}", upd.len(), var.len())));
    }
    let known = |a: i64, b: i64| a < 0 || b < 0 || a == b;
    if !known(upd[0], idx[0]) {
        return Err(ctx.input_error(2, format!("dim 0 is {}; indices have {}", upd[0], idx[0])));
    }
    for d in 1..var.len() {
        let fits = if d == axis {
            upd[d] < 0 || var[d] < 0 || upd[d] <= var[d]
        } else {
            known(upd[d], var[d])
        };
        if !fits {
            return Err(ctx.input_error(
                2,
                format!("has shape {upd:?}, which does not fit var {var:?}"),
            ));
        }
    }
    Ok(())
}

fn infer_scatter(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    scatter_reduce(ctx)?;
    let (var, idx, upd) = (&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2]);
    if !matches!(idx.dtype, DType::I32 | DType::I64) {
        return Err(ctx.input_error(1, format!("is {}, not int32 or int64", idx.dtype)));
    }
    if upd.dtype != var.dtype {
        return Err(ctx.input_error(2, format!("is {}, var is {}", upd.dtype, var.dtype)));
    }
    if let Some(v) = &var.shape {
        if v.len() < 2 {
            return Err(ctx.input_error(0, format!("has shape {v:?}; var has 2 dims or more")));
        }
        let axis = scatter_axis(ctx, v.len())?;
        if let (Some(i), Some(u)) = (&idx.shape, &upd.shape) {
            check_scatter(ctx, v, i, u, axis)?;
        }
    }
    Ok(vec![var.clone()])
}

fn scatter(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    scatter_reduce(ctx)?;
    let (var, ind, upd) = (
        input(ctx, inputs, 0)?,
        input(ctx, inputs, 1)?,
        input(ctx, inputs, 2)?,
    );
    if var.rank() < 2 {
        return Err(ctx.input_error(0, "has fewer than 2 dims"));
    }
    let axis = scatter_axis(ctx, var.rank())?;
    let dims = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
    check_scatter(
        ctx,
        &dims(var.shape),
        &dims(ind.shape),
        &dims(upd.shape),
        axis,
    )?;
    let idx = index_values(ctx, ind, 1)?;
    let width = var.dtype.size();
    let (src, updates) = (bytes(ctx, var, 0)?, bytes(ctx, upd, 2)?);
    let out = output(ctx, outputs, 0)?;
    let dst = bytes_mut(ctx, out)?;
    if dst.len() != src.len() {
        return Err(ctx.compute_error("the output is not var's size"));
    }
    dst.copy_from_slice(src);
    let (b_count, s, u) = (var.shape[0], var.shape[axis], upd.shape[axis]);
    let planes: usize = var.shape[1..axis].iter().product();
    let inner = var.shape[axis + 1..].iter().product::<usize>() * width;
    let k = upd.shape[0];
    let pairs = ind.rank() == 2;
    for i in 0..k {
        let (b, p) = if pairs {
            (idx[2 * i], idx[2 * i + 1])
        } else {
            (i as i64, idx[i])
        };
        if !(0..b_count as i64).contains(&b) || p < 0 || p as usize + u > s {
            return Err(ctx.input_error(
                1,
                format!(
                    "entry {i} writes batch {b} at {p}..{}, outside var",
                    p + u as i64
                ),
            ));
        }
        let (b, p) = (b as usize, p as usize);
        for q in 0..planes {
            let from = (i * planes + q) * u * inner;
            let to = ((b * planes + q) * s + p) * inner;
            dst[to..to + u * inner].copy_from_slice(&updates[from..from + u * inner]);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// DropOutDoMask, DropOutDoMaskV3D

fn infer_dropout(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let v3 = ctx.op == "DropOutDoMaskV3D";
    if v3 {
        ctx.arity(2, 2)?;
        required_float(ctx, "keep_prob")?;
    } else {
        ctx.arity(3, 3)?;
    }
    let (x, mask) = (&ctx.inputs[0], &ctx.inputs[1]);
    if !is_float(x.dtype) {
        return Err(unsupported(ctx, x.dtype));
    }
    match mask.dtype {
        DType::U8 => {}
        DType::Bool if v3 => {}
        d => {
            return Err(ctx.input_error(
                1,
                format!(
                    "is {d}; the mask is uint8 bits{}",
                    if v3 { " or bool" } else { "" }
                ),
            ));
        }
    }
    if !v3 {
        let kp = &ctx.inputs[2];
        if kp.dtype != x.dtype {
            return Err(ctx.input_error(2, format!("is {}, x is {}", kp.dtype, x.dtype)));
        }
        if let Some(s) = &kp.shape
            && s.iter().any(|&d| d != 1 && d != UNKNOWN)
        {
            return Err(ctx.input_error(2, format!("has shape {s:?}; keep_prob is one value")));
        }
    }
    Ok(vec![x.clone()])
}

fn dropout(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    fn go<T: Float>(
        ctx: &InferCtx,
        inputs: &[TensorRef],
        out: &mut TensorMut,
    ) -> Result<(), OpError> {
        let x = input(ctx, inputs, 0)?.slice::<T>()?;
        let keep = if ctx.op == "DropOutDoMaskV3D" {
            <T::R as Real>::c(f64::from(required_float(ctx, "keep_prob")?))
        } else {
            match input(ctx, inputs, 2)?.slice::<T>()? {
                [k] => k.to_r(),
                _ => return Err(ctx.input_error(2, "is not one value")),
            }
        };
        let scale = <T::R as Real>::c(1.0) / keep;
        let mask = input(ctx, inputs, 1)?;
        let bits = mask.dtype != DType::Bool;
        let m = bytes(ctx, mask, 1)?;
        let need = if bits { x.len().div_ceil(8) } else { x.len() };
        if m.len() < need {
            return Err(ctx.input_error(
                1,
                format!(
                    "has {} bytes; x's {} elements need {need}",
                    m.len(),
                    x.len()
                ),
            ));
        }
        let y = out.slice_mut::<T>()?;
        for (k, (o, &v)) in y.iter_mut().zip(x).enumerate() {
            let kept = if bits {
                (m[k / 8] >> (k % 8)) & 1 == 1
            } else {
                m[k] != 0
            };
            *o = if kept {
                T::from_r(v.to_r() * scale)
            } else {
                T::zero()
            };
        }
        Ok(())
    }
    let out = output(ctx, outputs, 0)?;
    dispatch!(out.dtype, T in [f32, f64, f16, bf16] => go::<T>(ctx, inputs, out),
        other => Err(unsupported(ctx, other)))
}

// ---------------------------------------------------------------------------------------
// AffineGrid

/// y's shape from theta's and output_size's values: `[N, H, W, 2]` or `[N, D, H, W, 3]`.
fn grid_shape(ctx: &InferCtx, theta: Option<&[i64]>, size: &[i64]) -> Result<Vec<i64>, OpError> {
    let (spatial, rows) = match size.len() {
        4 => (&size[2..], 2),
        5 => (&size[2..], 3),
        n => {
            return Err(ctx.input_error(
                1,
                format!("has {n} values; output_size is [N, C, H, W] or [N, C, D, H, W]"),
            ));
        }
    };
    if size.iter().any(|&d| d < 0) {
        return Err(ctx.input_error(1, format!("{size:?} has a negative size")));
    }
    if let Some(t) = theta {
        let want = [size[0], rows, rows + 1];
        if t.len() != 3 || t.iter().zip(&want).any(|(&a, &b)| a >= 0 && a != b) {
            return Err(ctx.input_error(
                0,
                format!("has shape {t:?}; output_size {size:?} needs {want:?}"),
            ));
        }
    }
    let mut shape = vec![size[0]];
    shape.extend_from_slice(spatial);
    shape.push(rows);
    Ok(shape)
}

fn infer_affine_grid(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    ctx.attr_bool("align_corners", false)?;
    let (theta, size) = (&ctx.inputs[0], &ctx.inputs[1]);
    if !is_float(theta.dtype) {
        return Err(unsupported(ctx, theta.dtype));
    }
    if !matches!(size.dtype, DType::I32 | DType::I64) {
        return Err(ctx.input_error(1, format!("is {}, not int32", size.dtype)));
    }
    if let Some(v) = ctx.value_ints(1)? {
        return Ok(meta(
            theta.dtype,
            Some(grid_shape(ctx, theta.shape.as_deref(), &v)?),
        ));
    }
    let shape = match theta.shape.as_deref() {
        Some(&[n, 2, 3]) => Some(vec![n, UNKNOWN, UNKNOWN, 2]),
        Some(&[n, 3, 4]) => Some(vec![n, UNKNOWN, UNKNOWN, UNKNOWN, 3]),
        Some(s) if s.len() != 3 || s[1..].iter().all(|&d| d >= 0) => {
            return Err(ctx.input_error(
                0,
                format!("has shape {s:?}; theta is [N, 2, 3] or [N, 3, 4]"),
            ));
        }
        _ => None,
    };
    Ok(meta(theta.dtype, shape))
}

/// The base coordinate `i` of `n` along one dim.
fn base<R: Real>(i: usize, n: usize, align_corners: bool) -> R {
    let (i, n) = (i as f64, n as f64);
    R::c(if align_corners {
        if n <= 1.0 {
            0.0
        } else {
            -1.0 + 2.0 * i / (n - 1.0)
        }
    } else {
        (2.0 * i + 1.0) / n - 1.0
    })
}

fn affine_grid(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    fn go<T: Float>(
        ctx: &InferCtx,
        inputs: &[TensorRef],
        out: &mut TensorMut,
        size: &[i64],
    ) -> Result<(), OpError> {
        let align = ctx.attr_bool("align_corners", false)?;
        let theta = input(ctx, inputs, 0)?.slice::<T>()?;
        // Spatial sizes outermost first: (D,) H, W; the grid's point is (x_w, y_h, (z_d,) 1).
        let sp: Vec<usize> = size[2..].iter().map(|&d| d as usize).collect();
        let rows = sp.len();
        let cols = rows + 1;
        let points: usize = sp.iter().product();
        let y = out.slice_mut::<T>()?;
        let one = <T::R as Real>::c(1.0);
        let mut p = [one; 4];
        for (n, th) in theta.chunks_exact(rows * cols).enumerate() {
            for at in 0..points {
                let mut rest = at;
                for (d, &s) in sp.iter().enumerate().rev() {
                    // Dim d (0 outermost) is coordinate rows - 1 - d: W is x, H is y.
                    p[rows - 1 - d] = base(rest % s, s, align);
                    rest /= s;
                }
                let o = (n * points + at) * rows;
                for r in 0..rows {
                    let mut acc = <T::R as Real>::c(0.0);
                    for c in 0..cols {
                        acc = acc + th[r * cols + c].to_r() * p[c];
                    }
                    y[o + r] = T::from_r(acc);
                }
            }
        }
        Ok(())
    }
    let size = index_values(ctx, input(ctx, inputs, 1)?, 1)?;
    let theta = input(ctx, inputs, 0)?;
    let dims: Vec<i64> = theta.shape.iter().map(|&d| d as i64).collect();
    let shape = grid_shape(ctx, Some(&dims), &size)?;
    let out = output(ctx, outputs, 0)?;
    if out
        .shape
        .iter()
        .map(|&d| d as i64)
        .ne(shape.iter().copied())
    {
        return Err(ctx.compute_error(format!("y is {:?}; output_size gives {shape:?}", out.shape)));
    }
    dispatch!(theta.dtype, T in [f32, f64, f16, bf16] => go::<T>(ctx, inputs, out, &size),
        other => Err(unsupported(ctx, other)))
}

// ---------------------------------------------------------------------------------------
// Dilation

/// Dilation's dilations (one per dim of a `rank` x, each at least 1), its pads checked
/// to be none.
fn dilations(ctx: &InferCtx, rank: usize) -> Result<Vec<usize>, OpError> {
    let d = required_list(ctx, "dilations")?;
    if d.len() != rank || d.iter().any(|&v| !(1..=1 << 20).contains(&v)) {
        return Err(ctx.attr_error(
            "dilations",
            format!("is {d:?}; one dilation of at least 1 per dim of x ({rank})"),
        ));
    }
    if ctx
        .attr_ints("pads")?
        .is_some_and(|p| p.iter().any(|&v| v != 0))
    {
        return Err(ctx.attr_error("pads", "rt2 computes Dilation without padding only"));
    }
    ctx.attr_float("padding_value", 0.0)?;
    Ok(d.iter().map(|&v| v as usize).collect())
}

fn infer_dilation(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    if !(matches!(x.dtype, DType::I8) || is_float(x.dtype)) {
        return Err(unsupported(ctx, x.dtype));
    }
    let Some(s) = &x.shape else {
        required_list(ctx, "dilations")?;
        return Ok(vec![x.clone()]);
    };
    let d = dilations(ctx, s.len())?;
    let shape = s
        .iter()
        .zip(&d)
        .map(|(&n, &k)| if n <= 0 { n } else { (n - 1) * k as i64 + 1 })
        .collect();
    Ok(meta(x.dtype, Some(shape)))
}

fn dilation(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let d = dilations(ctx, x.rank())?;
    let value = f64::from(ctx.attr_float("padding_value", 0.0)?);
    let out = output(ctx, outputs, 0)?;
    dispatch!(out.dtype, T in [f32, f64, f16, bf16, i8] =>
        out.slice_mut::<T>()?.fill(<T as crate::ops::elementwise::num::Num>::from_f64(value)),
        other => return Err(unsupported(ctx, other)));
    let width = x.dtype.size();
    let src = bytes(ctx, x, 0)?;
    let shape = out.shape.to_vec();
    let dst = bytes_mut(ctx, out)?;
    // Output element strides of a step of one input index per dim.
    let mut step = vec![0usize; d.len()];
    let mut s = 1;
    for a in (0..d.len()).rev() {
        step[a] = s * d[a];
        s *= shape[a];
    }
    let mut at = vec![0usize; d.len()];
    let mut o = 0usize;
    for v in src.chunks_exact(width) {
        dst[o * width..(o + 1) * width].copy_from_slice(v);
        // The next input index, odometer-wise, and its output offset.
        for a in (0..at.len()).rev() {
            at[a] += 1;
            o += step[a];
            if at[a] < x.shape[a] {
                break;
            }
            o -= step[a] * at[a];
            at[a] = 0;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// MaxPoolExt2

/// `ctx` as GE's TF-born MaxPool: MaxPoolExt2 is that op.
fn as_max_pool<'a>(ctx: &InferCtx<'a>) -> Result<InferCtx<'a>, OpError> {
    required_list(ctx, "ksize")?;
    required_list(ctx, "strides")?;
    if !ctx.attrs.contains_key("padding") {
        return Err(ctx.attr_error("padding", "is required and missing"));
    }
    Ok(InferCtx {
        op: "MaxPool",
        inputs: ctx.inputs,
        values: ctx.values,
        attrs: ctx.attrs,
        outputs: ctx.outputs,
    })
}

fn infer_max_pool_ext2(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    super::pool::infer_max_pool(&as_max_pool(ctx)?)
}

fn max_pool_ext2(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    super::pool::max_pool(&as_max_pool(ctx)?, inputs, outputs)
}

#[cfg(test)]
mod tests;
