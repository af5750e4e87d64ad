//! CPU compute of the shape family. None of these look at element values: Reshape and
//! its kin are one byte copy, Transpose and Expand are a strided [`View`] copy, Concat
//! and Gather copy whole inner blocks, Shape and Size write the input's dims.

use rayon::prelude::*;

use crate::ops::Attr;
use crate::ops::shape::args::{bytes, bytes_mut, input, moved, output};
use crate::ops::shape::indices::{ints, resolve};
use crate::ops::shape::movement::{PAR_MIN, View, copy_view};
use crate::ops::{DType, InferCtx, OpError, TensorMut, TensorRef};

/// Reshape, Flatten, Squeeze, Unsqueeze: the same bytes under a new shape.
pub fn copy_through(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    let dst = bytes_mut(ctx, y)?;
    if src.len() != dst.len() {
        return Err(ctx.compute_error(format!(
            "{} input bytes for {} output bytes",
            src.len(),
            dst.len()
        )));
    }
    dst.copy_from_slice(src);
    Ok(())
}

/// Transpose: the input viewed with its dims permuted (reversed without `perm`).
pub fn transpose(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let rank = x.rank();
    let perm: Vec<usize> = match ctx.attr_ints("perm")? {
        Some(p) => p.iter().map(|&a| a as usize).collect(),
        None => (0..rank).rev().collect(),
    };
    let mut seen = vec![false; rank];
    for &p in &perm {
        if p >= rank || std::mem::replace(&mut seen[p], true) {
            return Err(ctx.attr_error("perm", format!("{perm:?} is not a permutation")));
        }
    }
    if perm.len() != rank {
        return Err(ctx.attr_error("perm", format!("{perm:?} does not fit rank {rank}")));
    }
    let view = View::contiguous(x.shape).permute(&perm);
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

/// Concat: each output row (everything outside `axis`) is the inputs' rows side by side.
pub fn concat(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let y = output(ctx, outputs, 0)?;
    let rank = y.rank();
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, rank, "axis")?;
    let outer: usize = y.shape[..axis].iter().product();
    let width = y.dtype.size();
    // Each input contributes a block of its dims from `axis` on to every output row.
    let mut parts = Vec::with_capacity(inputs.len());
    for (k, t) in inputs.iter().enumerate() {
        if t.rank() != rank || t.shape[..axis].iter().product::<usize>() != outer {
            return Err(ctx.input_error(k, format!("{:?} does not fit {:?}", t.shape, y.shape)));
        }
        let block = t.shape[axis..].iter().product::<usize>() * width;
        parts.push((bytes(ctx, t, k)?, block));
    }
    let row: usize = parts.iter().map(|p| p.1).sum();
    let dst = bytes_mut(ctx, y)?;
    if row * outer != dst.len() {
        return Err(ctx.compute_error("the inputs do not fill the output"));
    }
    if row == 0 {
        return Ok(());
    }
    // The output in byte ranges, each filled from wherever its bytes come from: a range
    // may start inside any row and part. Split by rows, a Concat of a batch of one (the
    // skip connections of a UNet, 12 MB) was one row and ran on one thread.
    let fill = |start: usize, dst: &mut [u8]| {
        let (mut r, mut off) = (start / row, start % row);
        // The part holding byte `off` of the row, and where it begins.
        let (mut k, mut begin) = (0, 0);
        while off >= begin + parts[k].1 {
            begin += parts[k].1;
            k += 1;
        }
        let mut at = 0;
        while at < dst.len() {
            let (src, block) = parts[k];
            let n = (begin + block - off).min(dst.len() - at);
            let from = r * block + off - begin;
            dst[at..at + n].copy_from_slice(&src[from..from + n]);
            at += n;
            off += n;
            if off == begin + block {
                begin += block;
                k += 1;
                if k == parts.len() {
                    (r, k, begin, off) = (r + 1, 0, 0, 0);
                }
            }
        }
    };
    let total = dst.len();
    let threads = rayon::current_num_threads();
    if total < 2 * PAR_MIN * width || threads < 2 {
        fill(0, dst);
    } else {
        // A few ranges per thread, whole cache lines each.
        let chunk = total
            .div_ceil(4 * threads)
            .max(PAR_MIN * width)
            .next_multiple_of(64);
        dst.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(c, range)| fill(c * chunk, range));
    }
    Ok(())
}

/// Shape: the input's dims from `start` to `end` (each clamped, negative from the end).
pub fn shape(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let dims = input(ctx, inputs, 0)?.shape;
    let rank = dims.len() as i64;
    let clamp = |v: i64| {
        (if v < 0 {
            (v + rank).max(0)
        } else {
            v.min(rank)
        }) as usize
    };
    let start = clamp(ctx.attr_int("start", 0)?);
    let end = clamp(ctx.attrs.get("end").and_then(Attr::as_int).unwrap_or(rank));
    let picked = dims.get(start..end.max(start)).unwrap_or(&[]);
    write_ints(
        ctx,
        output(ctx, outputs, 0)?,
        picked.iter().map(|&d| d as i64),
    )
}

/// Writes `values` into an int64 or int32 output (Shape's and Size's `dtype`), which must
/// hold exactly that many.
fn write_ints(
    ctx: &InferCtx,
    out: &mut TensorMut,
    values: impl ExactSizeIterator<Item = i64>,
) -> Result<(), OpError> {
    if out.len() != values.len() {
        return Err(ctx.compute_error("the output does not hold the values"));
    }
    match out.dtype {
        DType::I32 => {
            for (o, v) in out.slice_mut::<i32>()?.iter_mut().zip(values) {
                *o = i32::try_from(v)
                    .map_err(|_| ctx.compute_error(format!("{v} does not fit in int32")))?;
            }
        }
        _ => {
            for (o, v) in out.slice_mut::<i64>()?.iter_mut().zip(values) {
                *o = v;
            }
        }
    }
    Ok(())
}

/// Size: the input's element count.
pub fn size(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let n = input(ctx, inputs, 0)?.len() as i64;
    write_ints(ctx, output(ctx, outputs, 0)?, std::iter::once(n))
}

/// GE's Rank: the input's rank.
pub fn rank(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let r = input(ctx, inputs, 0)?.rank() as i64;
    write_ints(ctx, output(ctx, outputs, 0)?, std::iter::once(r))
}

/// The view that broadcasts a contiguous tensor of `from` to `to` (dims aligned at the
/// right; a dim of 1 repeats with stride 0). `None` when the shapes do not broadcast.
pub fn broadcast_view(from: &[usize], to: &[usize]) -> Option<View> {
    let extra = to.len().checked_sub(from.len())?;
    let src = View::contiguous(from);
    let mut strides = vec![0isize; to.len()];
    for (k, (&d, &s)) in from.iter().zip(&src.strides).enumerate() {
        let t = to[extra + k];
        strides[extra + k] = match (d, t) {
            _ if d == t => s,
            (1, _) => 0,
            _ => return None,
        };
    }
    Some(View {
        shape: to.to_vec(),
        strides,
        offset: 0,
    })
}

/// Expand: the input broadcast to the output's shape.
pub fn expand(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    let view = broadcast_view(x.shape, y.shape).ok_or_else(|| {
        ctx.input_error(
            0,
            format!("{:?} does not broadcast to {:?}", x.shape, y.shape),
        )
    })?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

/// Gather: for every outer index and every index, the inner block at that index of
/// `axis`.
pub fn gather(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let idx = input(ctx, inputs, 1)?;
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, x.rank(), "axis")?;
    let dim = x.shape[axis];
    let picks: Vec<usize> = ints(idx)
        .ok_or_else(|| ctx.input_error(1, format!("is {}, not integers", idx.dtype)))?
        .into_iter()
        .map(|i| {
            resolve(i, dim)
                .ok_or_else(|| ctx.input_error(1, format!("index {i} is out of range for {dim}")))
        })
        .collect::<Result<_, _>>()?;
    let block = x.shape[axis + 1..].iter().product::<usize>() * x.dtype.size();
    let src = bytes(ctx, x, 0)?;
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    let outer: usize = x.shape[..axis].iter().product();
    if dst.len() != outer * picks.len() * block {
        return Err(ctx.compute_error("the output does not hold the gathered blocks"));
    }
    if block == 0 {
        return Ok(());
    }
    // Output block b is outer index b / picks, index b % picks.
    let copy_blocks = |first: usize, out: &mut [u8]| {
        for (k, o) in out.chunks_exact_mut(block).enumerate() {
            let b = first + k;
            let from = ((b / picks.len()) * dim + picks[b % picks.len()]) * block;
            o.copy_from_slice(&src[from..from + block]);
        }
    };
    let per_chunk = (PAR_MIN * x.dtype.size()).div_ceil(block);
    if dst.len() <= per_chunk * block {
        copy_blocks(0, dst);
    } else {
        dst.par_chunks_mut(per_chunk * block)
            .enumerate()
            .for_each(|(c, chunk)| copy_blocks(c * per_chunk, chunk));
    }
    Ok(())
}

/// ConstantOfShape: every element is the `value` attribute's one element (0.0f32 when
/// absent). Every output byte is written: the output memory may hold anything.
pub fn constant_of_shape(
    ctx: &InferCtx,
    _inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let y = output(ctx, outputs, 0)?;
    let Some(Attr::Tensor(v)) = ctx.attrs.get("value") else {
        bytes_mut(ctx, y)?.fill(0);
        return Ok(());
    };
    let width = y.dtype.size();
    let one = v
        .data
        .get(..width)
        .filter(|_| v.dtype == y.dtype)
        .ok_or_else(|| ctx.attr_error("value", "holds no element of the output type"))?;
    for o in bytes_mut(ctx, y)?.chunks_exact_mut(width) {
        o.copy_from_slice(one);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::Tensor;
    use crate::ops::testing::{run1, try_run};
    use crate::ops::{Attr, DType};

    fn iota(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_vec(shape, &(0..n as i32).collect::<Vec<_>>())
    }

    #[test]
    fn reshape_and_kin_keep_the_bytes() {
        let shape = Tensor::from_vec(&[2], &[3i64, -1]);
        let y = run1("Reshape", &[], &[iota(&[2, 3]), shape]);
        assert_eq!(y.shape, [3, 2]);
        assert_eq!(y.slice::<i32>().unwrap(), [0, 1, 2, 3, 4, 5]);
        let y = run1("Flatten", &[("axis", Attr::Int(2))], &[iota(&[2, 3, 2])]);
        assert_eq!(y.shape, [6, 2]);
    }

    #[test]
    fn transposes_permute_elements() {
        let perm = [("perm", Attr::Ints(vec![2, 0, 1]))];
        let y = run1("Transpose", &perm, &[iota(&[2, 2, 3])]);
        assert_eq!(y.shape, [3, 2, 2]);
        assert_eq!(
            y.slice::<i32>().unwrap(),
            [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]
        );
        let y = run1("Transpose", &[], &[iota(&[2, 3])]);
        assert_eq!(y.slice::<i32>().unwrap(), [0, 3, 1, 4, 2, 5]);
    }

    /// Outputs large enough to be filled in parallel byte ranges, which start inside
    /// rows and inside parts: a batch of one along channels (one row), with an empty
    /// part, and many short rows along the last axis; each against a naive
    /// concatenation.
    #[test]
    fn concat_splits_the_output_anywhere() {
        let cases: [(&[&[usize]], i64); 2] = [
            (&[&[1, 3, 10007], &[1, 0, 10007], &[1, 5, 10007]], 1),
            (&[&[3, 2, 7001], &[3, 2, 13], &[3, 2, 1]], 2),
        ];
        for (shapes, axis) in cases {
            let mut seed = 0i32;
            let inputs: Vec<Tensor> = shapes
                .iter()
                .map(|shape| {
                    let n: usize = shape.iter().product();
                    let v: Vec<i32> = (0..n as i32).map(|i| i * 7 + seed).collect();
                    seed += 1_000_000;
                    Tensor::from_vec(shape, &v)
                })
                .collect();
            let y = run1("Concat", &[("axis", Attr::Int(axis))], &inputs);
            let a = axis as usize;
            let outer: usize = shapes[0][..a].iter().product();
            let mut want = Vec::new();
            for r in 0..outer {
                for t in &inputs {
                    let block: usize = t.shape[a..].iter().product();
                    want.extend_from_slice(&t.slice::<i32>().unwrap()[r * block..][..block]);
                }
            }
            assert_eq!(y.slice::<i32>().unwrap(), want, "axis {axis}");
        }
    }

    #[test]
    fn concat_interleaves_rows() {
        let a = iota(&[2, 2]);
        let b = Tensor::from_vec(&[2, 1], &[9i32, 8]);
        let y = run1("Concat", &[("axis", Attr::Int(-1))], &[a, b]);
        assert_eq!(y.shape, [2, 3]);
        assert_eq!(y.slice::<i32>().unwrap(), [0, 1, 9, 2, 3, 8]);
    }

    /// GE's shape ops: Rank is an int32 scalar; Shape and Size write int32 when GE's
    /// `dtype` says so, and refuse another type.
    #[test]
    fn ge_rank_and_the_dtype_of_shape_and_size() {
        let x = iota(&[2, 3, 4]);
        let y = run1("Rank", &[], std::slice::from_ref(&x));
        assert_eq!((y.dtype, y.shape.len()), (DType::I32, 0));
        assert_eq!(y.slice::<i32>().unwrap(), [3]);
        let int32 = [("dtype", Attr::DType(DType::I32))];
        let y = run1("Shape", &int32, std::slice::from_ref(&x));
        assert_eq!(y.slice::<i32>().unwrap(), [2, 3, 4]);
        let y = run1("Size", &int32, std::slice::from_ref(&x));
        assert_eq!(y.slice::<i32>().unwrap(), [24]);
        let e = try_run("Shape", &[("dtype", Attr::DType(DType::F32))], &[x], 1).unwrap_err();
        assert!(e.to_string().contains("not int32 or int64"), "{e}");
    }

    #[test]
    fn shape_size_expand() {
        let x = iota(&[2, 3, 4]);
        let y = run1(
            "Shape",
            &[("start", Attr::Int(-2))],
            std::slice::from_ref(&x),
        );
        assert_eq!(y.slice::<i64>().unwrap(), [3, 4]);
        let y = run1("Size", &[], &[x]);
        assert_eq!(y.slice::<i64>().unwrap(), [24]);
        let to = Tensor::from_vec(&[3], &[2i64, 1, 3]);
        let y = run1(
            "Expand",
            &[],
            &[Tensor::from_vec(&[3, 1], &[1i32, 2, 3]), to],
        );
        assert_eq!(y.shape, [2, 3, 3]);
        assert_eq!(&y.slice::<i32>().unwrap()[..9], [1, 1, 1, 2, 2, 2, 3, 3, 3]);
    }

    #[test]
    fn gather_resolves_negative_indices_and_rejects_bad_ones() {
        let idx = Tensor::from_vec(&[2], &[-1i64, 0]);
        let y = run1("Gather", &[("axis", Attr::Int(1))], &[iota(&[2, 3]), idx]);
        assert_eq!(y.slice::<i32>().unwrap(), [2, 0, 5, 3]);
        let bad = Tensor::from_vec(&[1], &[3i32]);
        let e = try_run(
            "Gather",
            &[("axis", Attr::Int(1))],
            &[iota(&[3, 2]), bad.clone()],
            1,
        );
        assert!(e.unwrap_err().to_string().contains("out of range"));
    }

    #[test]
    fn large_gathers_and_concats_match_the_definition() {
        // Big enough for the parallel block chunks.
        let x = iota(&[400, 100]);
        let idx: Vec<i64> = (0..400).rev().collect();
        let y = run1("Gather", &[], &[x.clone(), Tensor::from_vec(&[400], &idx)]);
        let got = y.slice::<i32>().unwrap();
        assert_eq!(&got[..2], [39900, 39901]);
        assert_eq!(got[39999], 99);
        let y = run1("Concat", &[("axis", Attr::Int(1))], &[x.clone(), x]);
        let got = y.slice::<i32>().unwrap();
        assert_eq!(y.shape, [400, 200]);
        assert_eq!((got[100], got[200], got[79999]), (0, 100, 39999));
    }

    #[test]
    fn constant_of_shape_fills_the_value() {
        let value = crate::ops::HostTensor {
            dtype: DType::I32,
            shape: vec![1],
            data: 7i32.to_le_bytes().to_vec().into(),
        };
        let dims = Tensor::from_vec(&[2], &[2i64, 2]);
        let y = run1(
            "ConstantOfShape",
            &[("value", Attr::Tensor(std::sync::Arc::new(value)))],
            &[dims],
        );
        assert_eq!(y.slice::<i32>().unwrap(), [7; 4]);
    }

    #[test]
    fn constant_of_shape_without_a_value_is_float_zeros_on_any_memory() {
        // The driver hands the kernel an output full of 0xFF, as a reused block would be:
        // the default value is written, not assumed.
        let dims = Tensor::from_vec(&[2], &[3i64, 2]);
        let y = run1("ConstantOfShape", &[], &[dims]);
        assert_eq!(y.slice::<f32>().unwrap(), [0.0; 6]);
    }
}
