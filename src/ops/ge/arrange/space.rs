//! GE's TensorFlow-born moves between space and batch or depth (graphengine
//! `transformation_ops.h`, `nn_detect_ops.h`), as TensorFlow defines them on an NHWC-born
//! tensor: the block dims are the M dims after the batch dim, any dims after them ride
//! along.
//!
//! - SpaceToBatchND(x, block_shape, paddings), SpaceToBatchNDD(x; block_shape, paddings
//!   required), SpaceToBatch(x, paddings; block_size required, a block of
//!   `[block_size, block_size]`): x zero-padded by the `[before, after]` rows of
//!   `paddings` on the block dims, each padded block dim `p_i` split into `p_i / b_i`
//!   blocks of `b_i`, and the offsets within a block moved to the batch dim:
//!   `y[(k_1 .. k_M) * n + b, .., o_i, ..] = padded[b, .., o_i * b_i + k_i, ..]`, the block
//!   offsets `k` flattened row-major before the batch index.
//! - BatchToSpaceND(x, block_shape, crops), BatchToSpaceNDD(x; block_shape, crops
//!   required), BatchToSpace(x, crops; block_size required): the inverse, then the
//!   `[start, end]` rows of `crops` cut from each block dim.
//! - PassThrough(x; stride 2, reverse false): YoloV2's reorg on an NHWC x: space to depth
//!   (`y[n, h, w, (i * s + j) * c + k] = x[n, h * s + i, w * s + j, k]`) or, reversed,
//!   depth to space (the inverse).
//!
//! rt2's choices: a 4-D x whose origin format lowering recorded as NCHW has its block dims
//! at H and W (dims 2 and 3, C riding along after the batch dim), as GE's documentation
//! lists NCHW among the formats these ops take; PassThrough orders the moved channels as
//! TensorFlow's SpaceToDepth / DepthToSpace in NHWC do (GE's documentation gives only the
//! shapes).

use super::super::attrs::{input_format, required_int, required_list};
use crate::formats::Format;
use crate::ops::shape::args::{bytes, bytes_mut, input, moved, output};
use crate::ops::shape::indices::ints;
use crate::ops::shape::movement::{View, copy_mapped, copy_view, strides};
use crate::ops::{InferCtx, OpError, OpRegistry, TensorMeta, TensorMut, TensorRef, UNKNOWN, meta};

/// The op types this file registers, with the inputs whose values their inference reads.
const OPS: &[(&str, &[usize])] = &[
    ("SpaceToBatchND", &[1, 2]),
    ("SpaceToBatchNDD", &[]),
    ("SpaceToBatch", &[1]),
    ("BatchToSpaceND", &[1, 2]),
    ("BatchToSpaceNDD", &[]),
    ("BatchToSpace", &[1]),
    ("PassThrough", &[]),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::super::table::register(reg, OPS, |name| match name {
        "PassThrough" => (infer_pass_through, pass_through),
        _ => (infer, compute),
    });
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::super::table::names(OPS)
}

/// A space/batch move: its block dims and their pads (or crops).
struct Blocks {
    to_batch: bool,
    /// The first block dim.
    first: usize,
    block: Vec<i64>,
    /// `[before, after]` pads (to batch) or `[start, end]` crops (to space).
    edges: Vec<(i64, i64)>,
}

/// The op's blocks for x of rank `rank`: from the tensors at compute time (`inputs`), else
/// from the values inference knows (`None` while unknown).
fn blocks(
    ctx: &InferCtx,
    inputs: Option<&[TensorRef]>,
    rank: usize,
) -> Result<Option<Blocks>, OpError> {
    let to_batch = ctx.op.starts_with("SpaceToBatch");
    let edge_name = if to_batch { "paddings" } else { "crops" };
    let value = |k: usize| -> Result<Option<Vec<i64>>, OpError> {
        match inputs {
            Some(ins) => ints(input(ctx, ins, k)?)
                .map(Some)
                .ok_or_else(|| ctx.input_error(k, "is not integers")),
            None => ctx.value_ints(k),
        }
    };
    let (block, edges) = match ctx.op {
        "SpaceToBatchND" | "BatchToSpaceND" => {
            ctx.arity(3, 3)?;
            (value(1)?, value(2)?)
        }
        "SpaceToBatch" | "BatchToSpace" => {
            ctx.arity(2, 2)?;
            let b = required_int(ctx, "block_size")?;
            (Some(vec![b, b]), value(1)?)
        }
        _ => {
            ctx.arity(1, 1)?;
            (
                Some(required_list(ctx, "block_shape")?),
                Some(required_list(ctx, edge_name)?),
            )
        }
    };
    let (Some(block), Some(edges)) = (block, edges) else {
        return Ok(None);
    };
    let m = block.len();
    if m == 0 || block.iter().any(|&b| b < 1) {
        return Err(ctx.attr_error("block_shape", format!("{block:?} is not a block")));
    }
    if edges.len() != 2 * m || edges.iter().any(|&e| e < 0) {
        return Err(ctx.attr_error(
            edge_name,
            format!("{edges:?} is not a non-negative pair for each of {m} block dims"),
        ));
    }
    let nchw = rank == 4 && m == 2 && input_format(ctx, 0) == Some(Format::Nchw);
    let first = if nchw { 2 } else { 1 };
    if rank < first + m {
        return Err(ctx.input_error(0, format!("has rank {rank}; {m} block dims need more")));
    }
    Ok(Some(Blocks {
        to_batch,
        first,
        edges: edges.chunks_exact(2).map(|p| (p[0], p[1])).collect(),
        block,
    }))
}

/// The output dims for x of `shape`.
fn out_dims(ctx: &InferCtx, b: &Blocks, shape: &[i64]) -> Result<Vec<i64>, OpError> {
    let mut out = shape.to_vec();
    let product: i64 = b.block.iter().product();
    if out[0] != UNKNOWN {
        if b.to_batch {
            out[0] *= product;
        } else if out[0] % product != 0 {
            return Err(ctx.input_error(
                0,
                format!("batch {} is not a multiple of {product}", out[0]),
            ));
        } else {
            out[0] /= product;
        }
    }
    for (i, (&k, &(lo, hi))) in b.block.iter().zip(&b.edges).enumerate() {
        let d = &mut out[b.first + i];
        if *d == UNKNOWN {
            continue;
        }
        if b.to_batch {
            if (*d + lo + hi) % k != 0 {
                return Err(ctx.attr_error(
                    "paddings",
                    format!(
                        "dim {} of {d} padded by ({lo}, {hi}) is not a multiple of {k}",
                        b.first + i
                    ),
                ));
            }
            *d = (*d + lo + hi) / k;
        } else {
            if lo + hi > *d * k {
                return Err(ctx.attr_error(
                    "crops",
                    format!(
                        "({lo}, {hi}) crop more than dim {} of {}",
                        b.first + i,
                        *d * k
                    ),
                ));
            }
            *d = *d * k - lo - hi;
        }
    }
    Ok(out)
}

fn infer(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let x = ctx
        .inputs
        .first()
        .ok_or_else(|| ctx.input_error(0, "x is missing"))?;
    let Some(s) = &x.shape else {
        // Any rank holds the blocks while it is unknown.
        blocks(ctx, None, usize::MAX)?;
        return Ok(meta(x.dtype, None));
    };
    let dims = match blocks(ctx, None, s.len())? {
        Some(b) => out_dims(ctx, &b, s)?,
        None => vec![UNKNOWN; s.len()],
    };
    Ok(meta(x.dtype, Some(dims)))
}

fn compute(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let b = blocks(ctx, Some(inputs), x.rank())?
        .ok_or_else(|| ctx.input_error(1, "the blocks are unknown"))?;
    let shape: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
    let out: Vec<usize> = out_dims(ctx, &b, &shape)?
        .iter()
        .map(|&d| d as usize)
        .collect();
    let width = x.dtype.size();
    let src = bytes(ctx, x, 0)?;
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    let (m, first) = (b.block.len(), b.first);
    let block: Vec<usize> = b.block.iter().map(|&k| k as usize).collect();
    if b.to_batch {
        // Pad, then read the padded tensor with the block offsets as the outermost dims.
        let mut padded_shape = x.shape.to_vec();
        let maps: Vec<Vec<Option<usize>>> = (0..x.rank())
            .map(|d| {
                let (lo, hi) = match d.checked_sub(first) {
                    Some(i) if i < m => b.edges[i],
                    _ => (0, 0),
                };
                padded_shape[d] = x.shape[d] + (lo + hi) as usize;
                (0..padded_shape[d] as i64)
                    .map(|o| usize::try_from(o - lo).ok().filter(|&i| i < x.shape[d]))
                    .collect()
            })
            .collect();
        let mut padded = vec![0u8; padded_shape.iter().product::<usize>() * width];
        moved(
            ctx,
            copy_mapped(width, src, x.shape, &maps, &[], &mut padded),
        )?;
        let ps: Vec<isize> = strides(&padded_shape).iter().map(|&s| s as isize).collect();
        let mut view = View {
            shape: block.clone(),
            strides: (0..m).map(|i| ps[first + i]).collect(),
            offset: 0,
        };
        for d in 0..x.rank() {
            // Dim 0 is x's batch here: the block offsets above make up the rest of y's.
            view.shape.push(if d == 0 { x.shape[0] } else { out[d] });
            let spatial = d.checked_sub(first).filter(|&i| i < m);
            view.strides
                .push(spatial.map_or(ps[d], |i| ps[d] * block[i] as isize));
        }
        return moved(ctx, copy_view(width, &padded, &view, dst));
    }
    // Batch to space: interleave the block offsets back into the block dims, then crop.
    let n = out[0];
    let xs: Vec<isize> = strides(x.shape).iter().map(|&s| s as isize).collect();
    let mut full_shape = Vec::with_capacity(x.rank());
    let mut view = View {
        shape: Vec::new(),
        strides: Vec::new(),
        offset: 0,
    };
    for d in 0..x.rank() {
        match d.checked_sub(first).filter(|&i| i < m) {
            Some(i) => {
                let inner: usize = block[i + 1..].iter().product();
                view.shape.extend([x.shape[d], block[i]]);
                view.strides.extend([xs[d], xs[0] * (n * inner) as isize]);
                full_shape.push(x.shape[d] * block[i]);
            }
            None => {
                let size = if d == 0 { n } else { x.shape[d] };
                view.shape.push(size);
                view.strides.push(xs[d]);
                full_shape.push(size);
            }
        }
    }
    let mut full = vec![0u8; full_shape.iter().product::<usize>() * width];
    moved(ctx, copy_view(width, src, &view, &mut full))?;
    let fs: Vec<isize> = strides(&full_shape).iter().map(|&s| s as isize).collect();
    let crop = View {
        shape: out,
        offset: (0..m).map(|i| b.edges[i].0 as isize * fs[first + i]).sum(),
        strides: fs,
    };
    moved(ctx, copy_view(width, &full, &crop, dst))
}

// ---------------------------------------------------------------------------------------
// PassThrough

/// PassThrough's stride and direction.
fn pass_spec(ctx: &InferCtx) -> Result<(i64, bool), OpError> {
    let s = ctx.attr_int("stride", 2)?;
    if s < 1 {
        return Err(ctx.attr_error("stride", format!("{s} is not a positive block")));
    }
    Ok((s, ctx.attr_bool("reverse", false)?))
}

fn infer_pass_through(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let (s, reverse) = pass_spec(ctx)?;
    let x = &ctx.inputs[0];
    let Some(shape) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let &[n, h, w, c] = shape.as_slice() else {
        return Err(ctx.input_error(0, format!("is {shape:?}, not NHWC")));
    };
    let scale = |d: i64, up: bool| -> Result<i64, OpError> {
        match (d, up) {
            (UNKNOWN, _) => Ok(UNKNOWN),
            (d, true) => Ok(d * s),
            (d, false) if d % s == 0 => Ok(d / s),
            (d, false) => Err(ctx.input_error(0, format!("dim {d} is not a multiple of {s}"))),
        }
    };
    let dims = if reverse {
        let c = if c == UNKNOWN {
            c
        } else {
            scale(c, false).and_then(|c| scale(c, false))?
        };
        vec![n, scale(h, true)?, scale(w, true)?, c]
    } else {
        let c = if c == UNKNOWN { c } else { c * s * s };
        vec![n, scale(h, false)?, scale(w, false)?, c]
    };
    Ok(meta(x.dtype, Some(dims)))
}

fn pass_through(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let (s, reverse) = pass_spec(ctx)?;
    let &[n, h, w, c] = x.shape else {
        return Err(ctx.input_error(0, format!("is {:?}, not NHWC", x.shape)));
    };
    let s = s as usize;
    let (h_, w_, c_) = (h as isize, w as isize, c as isize);
    let si = s as isize;
    let view = if reverse {
        // y[n, h*s + i, w*s + j, k] = x[n, h, w, (i*s + j)*c' + k]
        let co = c / (s * s);
        let co_ = co as isize;
        View {
            shape: vec![n, h, s, w, s, co],
            strides: vec![h_ * w_ * c_, w_ * c_, si * co_, c_, co_, 1],
            offset: 0,
        }
    } else {
        View {
            shape: vec![n, h / s, w / s, s, s, c],
            strides: vec![h_ * w_ * c_, si * w_ * c_, si * c_, w_ * c_, c_, 1],
            offset: 0,
        }
    };
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}
