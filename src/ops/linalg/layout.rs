//! Ops that place elements by index arithmetic rather than compute them: EyeLike (an
//! identity matrix), ReverseSequence, CenterCropPad, and Col2Im (the inverse of im2col,
//! which sums overlapping blocks). Shape and dtype inference and CPU compute.
//!
//! EyeLike, ReverseSequence and CenterCropPad move whole elements, so they work on bytes
//! and take every element type without dispatch; Col2Im adds, so it takes float types.

use half::{bf16, f16};

use super::operands::{index_values, not_float};
use super::real::{Acc, Real};
use crate::dispatch;
use crate::ops::Attr;
use crate::ops::DType;
use crate::ops::tensor::{TensorMut, TensorRef};
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, UNKNOWN, meta};

/// Registers the family's layout ops.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new("EyeLike", infer_eye_like).computes(compute_eye_like));
    reg.add(
        OpSpec::new("ReverseSequence", infer_reverse_sequence).computes(compute_reverse_sequence),
    );
    reg.add(
        OpSpec::new("CenterCropPad", infer_center_crop_pad)
            .reading(&[1])
            .computes(compute_center_crop_pad),
    );
    reg.add(
        OpSpec::new("Col2Im", infer_col2im)
            .reading(&[1, 2])
            .computes(compute_col2im),
    );
}

/// EyeLike's output type: the `dtype` attribute, else the input's.
fn eye_dtype(ctx: &InferCtx) -> Result<DType, OpError> {
    match ctx.attrs.get("dtype") {
        None => Ok(ctx.inputs[0].dtype),
        Some(Attr::DType(d)) => Ok(*d),
        Some(other) => Err(ctx.attr_error("dtype", format!("{other:?} is not an element type"))),
    }
}

fn infer_eye_like(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape
        && s.len() != 2
    {
        return Err(ctx.input_error(0, format!("is {s:?}; EyeLike takes 2-D input")));
    }
    Ok(meta(eye_dtype(ctx)?, x.shape.clone()))
}

/// The little-endian bytes of 1 in `dtype`.
fn one(dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => 1f32.to_le_bytes().to_vec(),
        DType::F64 => 1f64.to_le_bytes().to_vec(),
        DType::F16 => f16::ONE.to_le_bytes().to_vec(),
        DType::Bf16 => bf16::ONE.to_le_bytes().to_vec(),
        // Integers and bool: a 1 in the low byte.
        d => {
            let mut v = vec![0u8; d.size()];
            v[0] = 1;
            v
        }
    }
}

/// Ones on the diagonal `k` (above the main one for k > 0), zeros elsewhere.
fn compute_eye_like(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let [rows, cols] = *inputs[0].shape else {
        return Err(ctx.input_error(
            0,
            format!("is {:?}; EyeLike takes 2-D input", inputs[0].shape),
        ));
    };
    let k = ctx.attr_int("k", 0)?;
    let out = &mut outputs[0];
    let unit = one(out.dtype);
    let size = unit.len();
    // Zero bytes are zero in every element type; the output memory may be a reused block.
    out.data.fill(0);
    for r in 0..rows {
        let c = r as i64 + k;
        if c >= 0 && (c as usize) < cols {
            let at = (r * cols + c as usize) * size;
            out.data[at..at + size].copy_from_slice(&unit);
        }
    }
    Ok(())
}

fn infer_reverse_sequence(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let (b, t) = (
        ctx.attr_int("batch_axis", 1)?,
        ctx.attr_int("time_axis", 0)?,
    );
    if !matches!((b, t), (0, 1) | (1, 0)) {
        return Err(ctx.attr_error(
            "batch_axis/time_axis",
            format!("are {b} and {t}; expected 0 and 1"),
        ));
    }
    Ok(vec![ctx.inputs[0].clone()])
}

/// Reverses the first `sequence_lens[b]` steps along the time axis for each batch item;
/// the rest is copied. Steps are whole rows of the dims after the first two, moved as
/// bytes.
fn compute_reverse_sequence(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    if x.rank() < 2 {
        return Err(ctx.input_error(0, format!("is {:?}; needs rank 2 or more", x.shape)));
    }
    let batch_first = ctx.attr_int("batch_axis", 1)? == 0;
    let (batch, time) = if batch_first {
        (x.shape[0], x.shape[1])
    } else {
        (x.shape[1], x.shape[0])
    };
    let lens = index_values(ctx, &inputs[1], 1)?;
    if lens.len() != batch {
        return Err(ctx.input_error(1, format!("{} lengths for batch {batch}", lens.len())));
    }
    let row = x.shape[2..].iter().product::<usize>() * x.dtype.size();
    let at = |b: usize, t: usize| if batch_first { b * time + t } else { t * batch + b } * row;
    let out = &mut outputs[0];
    for (b, &len) in lens.iter().enumerate() {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= time)
            .ok_or_else(|| ctx.input_error(1, format!("length {len} is outside 0..={time}")))?;
        for t in 0..time {
            let from = if t < len { len - 1 - t } else { t };
            out.data[at(b, t)..at(b, t) + row]
                .copy_from_slice(&x.data[at(b, from)..at(b, from) + row]);
        }
    }
    Ok(())
}

/// The axes CenterCropPad's `shape` refers to.
fn crop_axes(ctx: &InferCtx, rank: usize) -> Result<Vec<usize>, OpError> {
    match ctx.attr_ints("axes")? {
        None => Ok((0..rank).collect()),
        Some(a) => a.iter().map(|&v| ctx.axis(v, rank, "axes")).collect(),
    }
}

fn infer_center_crop_pad(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(vec![x.clone()]);
    };
    let axes = crop_axes(ctx, s.len())?;
    let mut out = s.clone();
    match ctx.value_ints(1)? {
        Some(v) => {
            if v.len() != axes.len() {
                return Err(
                    ctx.input_error(1, format!("{} sizes for {} axes", v.len(), axes.len()))
                );
            }
            for (&a, &d) in axes.iter().zip(&v) {
                if d < 0 {
                    return Err(ctx.input_error(1, format!("size {d} is negative")));
                }
                out[a] = d;
            }
        }
        None => {
            for &a in &axes {
                out[a] = UNKNOWN;
            }
        }
    }
    Ok(meta(x.dtype, Some(out)))
}

/// Copies the box of `counts` elements starting at `src_start` in a tensor of `src_dims`
/// to `dst_start` in one of `dst_dims`, each row of the last dim as one byte run.
#[allow(clippy::too_many_arguments)]
fn copy_box(
    src: &[u8],
    src_dims: &[usize],
    src_start: &[usize],
    dst: &mut [u8],
    dst_dims: &[usize],
    dst_start: &[usize],
    counts: &[usize],
    size: usize,
) {
    if counts.contains(&0) {
        return;
    }
    let rank = counts.len();
    if rank == 0 {
        dst[..size].copy_from_slice(&src[..size]);
        return;
    }
    let offset = |dims: &[usize], start: &[usize], idx: &[usize]| {
        let mut o = 0;
        for d in 0..rank {
            o = o * dims[d] + start[d] + idx[d];
        }
        o * size
    };
    let run = counts[rank - 1] * size;
    let mut idx = vec![0usize; rank];
    loop {
        let (s, d) = (
            offset(src_dims, src_start, &idx),
            offset(dst_dims, dst_start, &idx),
        );
        dst[d..d + run].copy_from_slice(&src[s..s + run]);
        let mut k = rank - 1;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < counts[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// Crops each listed axis to its centered window, or pads it with zeros on both sides
/// (the odd one at the end), the crop starting rounded down.
fn compute_center_crop_pad(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let out_dims = outputs[0].shape.to_vec();
    let rank = x.rank();
    if out_dims.len() != rank {
        return Err(ctx.compute_error("output rank differs from the input's"));
    }
    let (mut src_start, mut dst_start, mut counts) = (vec![0; rank], vec![0; rank], vec![0; rank]);
    for a in 0..rank {
        let (d, t) = (x.shape[a], out_dims[a]);
        if t <= d {
            src_start[a] = (d - t) / 2;
            counts[a] = t;
        } else {
            dst_start[a] = (t - d) / 2;
            counts[a] = d;
        }
    }
    let size = x.dtype.size();
    if counts != out_dims {
        // Padded somewhere: what the copy leaves is zeros, not the reused block's bytes.
        outputs[0].data.fill(0);
    }
    copy_box(
        x.data,
        x.shape,
        &src_start,
        outputs[0].data,
        &out_dims,
        &dst_start,
        &counts,
        size,
    );
    Ok(())
}

/// Col2Im's spatial attributes for `n` dims: (strides, dilations, pads).
type Spatial = (Vec<i64>, Vec<i64>, Vec<i64>);

fn col2im_attrs(ctx: &InferCtx, n: usize) -> Result<Spatial, OpError> {
    let strides = ctx.attr_ints_or("strides", 1, n)?;
    let dilations = ctx.attr_ints_or("dilations", 1, n)?;
    let pads = ctx.attr_ints_or("pads", 0, 2 * n)?;
    if strides.len() != n || dilations.len() != n || pads.len() != 2 * n {
        return Err(ctx.attr_error(
            "strides/dilations/pads",
            format!("do not fit {n} spatial dims"),
        ));
    }
    if strides.iter().chain(&dilations).any(|&v| v < 1) || pads.iter().any(|&p| p < 0) {
        return Err(ctx.attr_error(
            "strides/dilations/pads",
            "strides and dilations are positive, pads not negative",
        ));
    }
    Ok((strides, dilations, pads))
}

/// Col2Im: [N, C * prod(block), L] -> [N, C, image...].
fn infer_col2im(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape
        && s.len() != 3
    {
        return Err(ctx.input_error(0, format!("is {s:?}; Col2Im takes [N, C * block, L]")));
    }
    let (Some(image), Some(block)) = (ctx.value_ints(1)?, ctx.value_ints(2)?) else {
        let rank = ctx.inputs[1]
            .shape
            .as_ref()
            .and_then(|s| s.first().copied());
        return Ok(meta(
            x.dtype,
            // A rank past any real image's is left unknown (see ConstantOfShape).
            rank.filter(|&r| (0..=1024).contains(&r)).map(|r| {
                let mut v = vec![x.shape.as_ref().map_or(UNKNOWN, |s| s[0]), UNKNOWN];
                v.extend(std::iter::repeat_n(UNKNOWN, r as usize));
                v
            }),
        ));
    };
    if image.len() != block.len() || block.iter().any(|&b| b < 1) {
        return Err(ctx.input_error(2, format!("block {block:?} does not fit image {image:?}")));
    }
    if let Some(d) = image.iter().find(|&&d| d < 0) {
        return Err(ctx.input_error(1, format!("image dim {d} is negative")));
    }
    col2im_attrs(ctx, image.len())?;
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let k: i64 = block
        .iter()
        .try_fold(1i64, |k, &b| k.checked_mul(b))
        .ok_or_else(|| ctx.input_error(2, format!("block {block:?} overflows")))?;
    if s[1] >= 0 && s[1] % k != 0 {
        return Err(ctx.input_error(
            0,
            format!("{} columns are not a multiple of the block's {k}", s[1]),
        ));
    }
    let mut out = vec![s[0], if s[1] < 0 { UNKNOWN } else { s[1] / k }];
    out.extend(image);
    Ok(meta(x.dtype, Some(out)))
}

fn compute_col2im(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f16, bf16, f64] => col2im::<T>(ctx, inputs, outputs),
        other => Err(not_float(ctx, 0, other)))
}

/// Adds each column of each block back at the image position it was taken from:
/// block `l` (row-major over the grid of block positions) and offset `k` (row-major over
/// the block) land at `l * stride - pad_begin + k * dilation` per spatial dim.
fn col2im<T: Real>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let image: Vec<usize> = outputs[0].shape[2..].to_vec();
    let block = index_values(ctx, &inputs[2], 2)?;
    let n = image.len();
    if x.rank() != 3 || block.len() != n {
        return Err(ctx.input_error(2, "block shape does not fit the image"));
    }
    let block: Vec<usize> = block.iter().map(|&b| b.max(1) as usize).collect();
    let (strides, dilations, pads) = col2im_attrs(ctx, n)?;
    let u = |v: &[i64]| v.iter().map(|&x| x as usize).collect::<Vec<_>>();
    let (strides, dilations, pads) = (u(&strides), u(&dilations), u(&pads));
    let grid: Vec<usize> = (0..n)
        .map(|d| {
            let span = image[d] + pads[d] + pads[d + n];
            let reach = dilations[d] * (block[d] - 1) + 1;
            if span < reach {
                0
            } else {
                (span - reach) / strides[d] + 1
            }
        })
        .collect();
    let (batch, cols, l) = (x.shape[0], x.shape[1], x.shape[2]);
    let k: usize = block.iter().product();
    let positions: usize = grid.iter().product();
    if l != positions || !cols.is_multiple_of(k) {
        return Err(ctx.input_error(
            0,
            format!(
                "{:?} does not hold {k}-element blocks at {positions} positions",
                x.shape
            ),
        ));
    }
    let channels = cols / k;
    let plane: usize = image.iter().product();
    let src = x.slice::<T>()?;
    let mut acc = vec![T::Acc::ZERO; batch * channels * plane];
    // Each (offset, position) pair's image index, or None where it falls in the padding:
    // the same for every batch item and channel, so it is computed once.
    let mut target = Vec::with_capacity(k * positions);
    let (mut ki, mut li) = (vec![0usize; n], vec![0usize; n]);
    for kk in 0..k {
        unravel(kk, &block, &mut ki);
        for ll in 0..positions {
            unravel(ll, &grid, &mut li);
            let mut at = Some(0usize);
            for d in 0..n {
                let p = (li[d] * strides[d] + ki[d] * dilations[d]).checked_sub(pads[d]);
                at = match (at, p) {
                    (Some(a), Some(p)) if p < image[d] => Some(a * image[d] + p),
                    _ => None,
                };
            }
            target.push(at);
        }
    }
    for bc in 0..batch * channels {
        let dst = &mut acc[bc * plane..(bc + 1) * plane];
        let col = &src[bc * k * positions..(bc + 1) * k * positions];
        for (&v, t) in col.iter().zip(&target) {
            if let Some(t) = *t {
                dst[t] += v.widen();
            }
        }
    }
    super::real::narrow_into::<T>(&acc, outputs[0].slice_mut::<T>()?);
    Ok(())
}

/// The row-major multi-index of `flat` in `dims`.
fn unravel(mut flat: usize, dims: &[usize], out: &mut [usize]) {
    for d in (0..dims.len()).rev() {
        out[d] = flat % dims[d];
        flat /= dims[d];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Tensor;
    use crate::ops::testing::run1;
    use crate::ops::testing::try_run;

    #[test]
    fn eye_like_with_offset_and_type() {
        let x = Tensor::from_vec(&[2, 3], &[7i32; 6]);
        let y = run1(
            "EyeLike",
            &[("k", Attr::Int(1)), ("dtype", Attr::DType(DType::F32))],
            std::slice::from_ref(&x),
        );
        assert_eq!(y.slice::<f32>().unwrap(), &[0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        let y = run1("EyeLike", &[("k", Attr::Int(-1))], &[x]);
        assert_eq!(y.slice::<i32>().unwrap(), &[0, 0, 0, 1, 0, 0]);
    }

    #[test]
    fn reverse_sequence_reverses_prefixes() {
        // time-major [3 steps, 2 batch]: batch 0 reverses 3 steps, batch 1 reverses 2.
        let x = Tensor::from_vec(&[3, 2], &[1i64, 4, 2, 5, 3, 6]);
        let lens = Tensor::from_vec(&[2], &[3i64, 2]);
        let y = run1(
            "ReverseSequence",
            &[("batch_axis", Attr::Int(1)), ("time_axis", Attr::Int(0))],
            &[x.clone(), lens],
        );
        assert_eq!(y.slice::<i64>().unwrap(), &[3, 5, 2, 4, 1, 6]);
        let bad = Tensor::from_vec(&[2], &[4i64, 0]);
        assert!(try_run("ReverseSequence", &[], &[x, bad], 1).is_err());
    }

    #[test]
    fn center_crop_pad_crops_and_pads_centered() {
        // [5] cropped to 2 starts at 1 (rounded down); [2] padded to 5 puts the odd pad
        // at the end.
        let x = Tensor::from_vec(&[5], &[1.0f32, 2.0, 3.0, 4.0, 5.0]);
        let y = run1("CenterCropPad", &[], &[x, Tensor::from_vec(&[1], &[2i64])]);
        assert_eq!(y.slice::<f32>().unwrap(), &[2.0, 3.0]);
        let x = Tensor::from_vec(&[2, 1], &[1.0f32, 2.0]);
        let y = run1(
            "CenterCropPad",
            &[("axes", Attr::Ints(vec![0]))],
            &[x, Tensor::from_vec(&[1], &[5i64])],
        );
        assert_eq!(y.shape, [5, 1]);
        assert_eq!(y.slice::<f32>().unwrap(), &[0.0, 1.0, 2.0, 0.0, 0.0]);
    }

    #[test]
    fn col2im_sums_overlapping_blocks() {
        // 1-D-like image [1, 3] from blocks [1, 2] at 2 positions: columns
        // [[a0, a1], [b0, b1]] (offset-major) land at 0,1 and 1,2.
        let x = Tensor::from_vec(&[1, 2, 2], &[1.0f32, 10.0, 2.0, 20.0]);
        let image = Tensor::from_vec(&[2], &[1i64, 3]);
        let block = Tensor::from_vec(&[2], &[1i64, 2]);
        let y = run1("Col2Im", &[], &[x, image, block]);
        assert_eq!(y.shape, [1, 1, 1, 3]);
        assert_eq!(y.slice::<f32>().unwrap(), &[1.0, 12.0, 20.0]);
    }
}
