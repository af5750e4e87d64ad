//! Ops that cut, repeat, pad or generate: Slice, Split, Tile, Pad, Range, NonZero, TopK,
//! DepthToSpace, SpaceToDepth, Trilu. Shape and dtype inference here, compute in
//! [`compute`].
//!
//! Most read an input's value (Slice's starts and ends, Tile's repeats, Pad's pads, TopK's
//! k, Range's bounds); without it the output's rank is still known. NonZero's output shape
//! depends on the data itself and is only known after it has run.

pub(crate) mod compute;

use crate::ops::{Attr, DType, HostTensor};
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, UNKNOWN, meta};

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    use compute as k;
    reg.add(
        OpSpec::new("Slice", infer_slice)
            .reading(&[1, 2, 3, 4])
            .computes(k::slice),
    );
    reg.add(
        OpSpec::new("Split", infer_split)
            .reading(&[1])
            .computes(k::split),
    );
    reg.add(
        OpSpec::new("Tile", infer_tile)
            .reading(&[1])
            .computes(k::tile),
    );
    reg.add(
        OpSpec::new("Pad", infer_pad)
            .reading(&[1, 3])
            .computes(k::pad),
    );
    reg.add(
        OpSpec::new("Range", infer_range)
            .reading(&[0, 1, 2])
            .computes(k::range),
    );
    reg.add(
        OpSpec::new("NonZero", infer_nonzero)
            .data_dependent()
            .computes_alloc(k::nonzero),
    );
    reg.add(
        OpSpec::new("TopK", infer_topk)
            .reading(&[1])
            .computes(k::top_k),
    );
    reg.add(OpSpec::new("DepthToSpace", infer_depth_to_space).computes(k::depth_to_space));
    reg.add(OpSpec::new("SpaceToDepth", infer_space_to_depth).computes(k::space_to_depth));
    reg.add(OpSpec::new("Trilu", infer_trilu).computes(k::trilu));
}

fn unknown_like(x: &TensorMeta) -> Option<Vec<i64>> {
    x.shape.as_ref().map(|s| vec![UNKNOWN; s.len()])
}

/// Slice (opset 10+: starts, ends, axes, steps as inputs; before: attributes).
fn infer_slice(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 5)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(vec![x.clone()]);
    };
    let from_attr = |n: &str| {
        ctx.attrs
            .get(n)
            .and_then(Attr::as_ints)
            .map(<[i64]>::to_vec)
    };
    let starts = if ctx.inputs.len() > 1 {
        ctx.value_ints(1)?
    } else {
        from_attr("starts")
    };
    let ends = if ctx.inputs.len() > 2 {
        ctx.value_ints(2)?
    } else {
        from_attr("ends")
    };
    let (Some(starts), Some(ends)) = (starts, ends) else {
        return Ok(meta(x.dtype, unknown_like(x)));
    };
    let axes = if ctx.inputs.len() > 3 {
        ctx.value_ints(3)?
    } else {
        from_attr("axes")
    }
    .unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = if ctx.inputs.len() > 4 {
        ctx.value_ints(4)?
    } else {
        None
    }
    .unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(ctx.input_error(2, "starts, ends, axes and steps differ in length"));
    }
    let mut out = s.clone();
    for k in 0..starts.len() {
        let a = ctx.axis(axes[k], s.len(), "axis")?;
        let dim = s[a];
        let step = steps[k];
        if step == 0 {
            return Err(ctx.input_error(4, "a step is 0"));
        }
        if dim <= 0 {
            out[a] = dim;
            continue;
        }
        // ONNX's clamping: negative indices count from the end; then clamp to the range
        // the step direction allows.
        let fix = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (start, end) = if step > 0 {
            (fix(starts[k]).clamp(0, dim), fix(ends[k]).clamp(0, dim))
        } else {
            (
                fix(starts[k]).clamp(0, dim - 1),
                fix(ends[k]).clamp(-1, dim - 1),
            )
        };
        // Both ends lie in [-1, dim], so the span cannot overflow; the step may be any
        // i64 (i64::MIN has no negation), so the division is on its magnitude.
        let span = if step > 0 { end - start } else { start - end };
        out[a] = if span <= 0 {
            0
        } else {
            ((span - 1) as u64 / step.unsigned_abs()) as i64 + 1
        };
    }
    Ok(meta(x.dtype, Some(out)))
}

fn infer_split(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 2)?;
    let x = &ctx.inputs[0];
    let n = match ctx.attrs.get("num_outputs").and_then(Attr::as_int) {
        None => ctx.outputs,
        // The count of outputs the node has, or less: never a count that would make a
        // list of a billion metas.
        Some(v) if v >= 1 && v as u64 <= ctx.outputs.max(1) as u64 => v as usize,
        Some(v) => {
            return Err(ctx.attr_error(
                "num_outputs",
                format!("{v} for a node of {} outputs", ctx.outputs),
            ));
        }
    };
    let Some(s) = &x.shape else {
        return Ok(vec![x.clone(); n]);
    };
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, s.len(), "axis")?;
    let split = match ctx.attrs.get("split").and_then(Attr::as_ints) {
        Some(v) => Some(v.to_vec()),
        None if ctx.inputs.len() > 1 => ctx.value_ints(1)?,
        None => None,
    };
    let parts: Vec<i64> = match split {
        Some(p) => {
            if let Some(v) = p.iter().find(|&&v| v < 0) {
                return Err(ctx.input_error(1, format!("split {p:?} has the negative part {v}")));
            }
            let sum = p.iter().try_fold(0i64, |a, &v| a.checked_add(v));
            if s[axis] >= 0 && sum != Some(s[axis]) {
                return Err(ctx.input_error(
                    1,
                    format!("split {p:?} does not add up to dim {axis} = {}", s[axis]),
                ));
            }
            p
        }
        None if ctx.inputs.len() > 1 && ctx.values.get(1).copied().flatten().is_none() => {
            vec![UNKNOWN; n]
        }
        None if s[axis] < 0 || n == 0 => vec![UNKNOWN; n],
        // Equal parts; the last is smaller when the dim does not divide (opset 18).
        None => {
            let dim = s[axis];
            let each = if dim == 0 {
                0
            } else {
                (dim - 1) / n as i64 + 1
            };
            (0..n as i64)
                .map(|i| (dim - i.saturating_mul(each)).clamp(0, each))
                .collect()
        }
    };
    Ok(parts
        .into_iter()
        .map(|p| {
            let mut d = s.clone();
            d[axis] = p;
            TensorMeta {
                dtype: x.dtype,
                shape: Some(d),
            }
        })
        .collect())
}

fn infer_tile(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let x = &ctx.inputs[0];
    let (Some(s), Some(r)) = (&x.shape, ctx.value_ints(1)?) else {
        return Ok(meta(x.dtype, unknown_like(x)));
    };
    if r.len() != s.len() || r.iter().any(|&v| v < 0) {
        return Err(ctx.input_error(1, format!("repeats {r:?} do not fit rank {}", s.len())));
    }
    let out = s
        .iter()
        .zip(&r)
        .map(|(&d, &k)| match d {
            d if d < 0 => Ok(UNKNOWN),
            d => d.checked_mul(k).ok_or_else(|| {
                ctx.input_error(1, format!("repeats {r:?} of shape {s:?} overflow"))
            }),
        })
        .collect::<Result<_, _>>()?;
    Ok(meta(x.dtype, Some(out)))
}

fn infer_pad(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 4)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(vec![x.clone()]);
    };
    let pads = match ctx.attrs.get("pads").and_then(Attr::as_ints) {
        Some(p) => Some(p.to_vec()),
        None => ctx.value_ints(1)?,
    };
    let Some(pads) = pads else {
        return Ok(meta(x.dtype, unknown_like(x)));
    };
    let axes: Vec<usize> = match if ctx.inputs.len() > 3 {
        ctx.value_ints(3)?
    } else {
        None
    } {
        Some(a) => a
            .iter()
            .map(|&v| ctx.axis(v, s.len(), "axis"))
            .collect::<Result<_, _>>()?,
        None => (0..s.len()).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(ctx.input_error(1, format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    let mut out = s.clone();
    for (k, &a) in axes.iter().enumerate() {
        if out[a] >= 0 {
            let (begin, end) = (pads[k], pads[k + axes.len()]);
            out[a] = out[a]
                .checked_add(begin)
                .and_then(|d| d.checked_add(end))
                .filter(|&d| d >= 0)
                .ok_or_else(|| {
                    ctx.input_error(
                        1,
                        format!("dim {a} of {s:?} padded by {begin} and {end} is not a dim"),
                    )
                })?;
        }
    }
    Ok(meta(x.dtype, Some(out)))
}

/// The first element of a numeric host tensor, as f64.
pub fn scalar_value(t: &HostTensor) -> Option<f64> {
    let numeric = matches!(
        t.dtype,
        DType::F32 | DType::F64 | DType::I64 | DType::I32 | DType::I16 | DType::F16 | DType::Bf16
    );
    numeric.then(|| t.float_at(0)).flatten()
}

fn infer_range(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    let dtype = ctx.inputs[0].dtype;
    let vals: Option<Vec<f64>> = (0..3)
        .map(|i| ctx.values.get(i).copied().flatten().and_then(scalar_value))
        .collect();
    let len = match vals.as_deref() {
        Some(&[start, limit, delta]) if delta != 0.0 => {
            let n = ((limit - start) / delta).ceil().max(0.0);
            // 2^63 is the first f64 past i64::MAX; a NaN (infinite bounds) is no count.
            if n.is_nan() || n >= 9_223_372_036_854_775_808.0 {
                return Err(ctx.input_error(
                    1,
                    format!("a range from {start} to {limit} by {delta} has no element count"),
                ));
            }
            n as i64
        }
        Some(_) => return Err(ctx.input_error(2, "delta is 0")),
        None => UNKNOWN,
    };
    Ok(meta(dtype, Some(vec![len])))
}

fn infer_nonzero(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let rank = ctx.inputs[0]
        .shape
        .as_ref()
        .map(|s| s.len() as i64)
        .unwrap_or(UNKNOWN);
    Ok(meta(DType::I64, Some(vec![rank, UNKNOWN])))
}

/// TopK's index type: int64 (ONNX's), or the `index_dtype` a translation asks for (GE's
/// TopK gives int32 indices).
fn topk_index_dtype(ctx: &InferCtx) -> Result<DType, OpError> {
    match ctx.attrs.get("index_dtype") {
        None => Ok(DType::I64),
        Some(Attr::DType(d @ (DType::I32 | DType::I64))) => Ok(*d),
        Some(other) => {
            Err(ctx.attr_error("index_dtype", format!("is {other:?}, not int32 or int64")))
        }
    }
}

fn infer_topk(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 2)?;
    let x = &ctx.inputs[0];
    let index = topk_index_dtype(ctx)?;
    let Some(s) = &x.shape else {
        return Ok(vec![x.clone(), TensorMeta::unknown_rank(index)]);
    };
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, s.len(), "axis")?;
    let k = match ctx.attrs.get("k").and_then(Attr::as_int) {
        Some(k) => Some(k),
        None => ctx.value_ints(1)?.and_then(|v| v.first().copied()),
    };
    let mut out = s.clone();
    out[axis] = match k {
        Some(k) if k < 0 || (s[axis] >= 0 && k > s[axis]) => {
            return Err(
                ctx.input_error(1, format!("k = {k} does not fit dim {axis} = {}", s[axis]))
            );
        }
        Some(k) => k,
        None => UNKNOWN,
    };
    Ok(vec![
        TensorMeta {
            dtype: x.dtype,
            shape: Some(out.clone()),
        },
        TensorMeta {
            dtype: index,
            shape: Some(out),
        },
    ])
}

fn blocks(ctx: &InferCtx, to_space: bool) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let b = ctx.attr_int("blocksize", 0)?;
    if b < 1 {
        return Err(OpError::Attribute {
            op: ctx.op.into(),
            name: "blocksize".into(),
            msg: "must be positive".into(),
        });
    }
    let Some(s) = &x.shape else {
        return Ok(vec![x.clone()]);
    };
    let &[n, c, h, w] = s.as_slice() else {
        return Err(ctx.input_error(0, format!("is {s:?}; the op takes NCHW")));
    };
    let b2 = b
        .checked_mul(b)
        .ok_or_else(|| ctx.attr_error("blocksize", format!("{b}² overflows")))?;
    let k = |d: i64, f: &dyn Fn(i64) -> Option<i64>| match d {
        d if d < 0 => Ok(UNKNOWN),
        d => f(d).ok_or_else(|| {
            ctx.input_error(0, format!("{s:?} with blocksize {b}: a dim overflows"))
        }),
    };
    let out = if to_space {
        if c >= 0 && c % b2 != 0 {
            return Err(ctx.input_error(
                0,
                format!("{c} channels are not a multiple of blocksize² = {b2}"),
            ));
        }
        vec![
            n,
            k(c, &|c| Some(c / b2))?,
            k(h, &|h| h.checked_mul(b))?,
            k(w, &|w| w.checked_mul(b))?,
        ]
    } else {
        vec![
            n,
            k(c, &|c| c.checked_mul(b2))?,
            k(h, &|h| Some(h / b))?,
            k(w, &|w| Some(w / b))?,
        ]
    };
    Ok(meta(x.dtype, Some(out)))
}

fn infer_depth_to_space(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    blocks(ctx, true)
}

fn infer_space_to_depth(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    blocks(ctx, false)
}

fn infer_trilu(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 2)?;
    Ok(vec![ctx.inputs[0].clone()])
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ops::{i64s, infer_for_test as run};

    fn f32(shape: &[i64]) -> TensorMeta {
        TensorMeta::new(DType::F32, shape)
    }

    fn idx(n: i64) -> TensorMeta {
        TensorMeta::new(DType::I64, &[n])
    }

    fn shapes(r: Vec<TensorMeta>) -> Vec<Vec<i64>> {
        r.into_iter().map(|t| t.shape.unwrap_or_default()).collect()
    }

    #[test]
    fn slice_split_tile_pad() {
        let (st, en, ax, sp) = (
            i64s(&[1, -1]),
            i64s(&[-1, -100]),
            i64s(&[0, 1]),
            i64s(&[1, -2]),
        );
        let r = run(
            "Slice",
            &[f32(&[5, 6]), idx(2), idx(2), idx(2), idx(2)],
            &[None, Some(&st), Some(&en), Some(&ax), Some(&sp)],
            &[],
            1,
        )
        .unwrap();
        assert_eq!(shapes(r), [vec![3, 3]]);
        let r = run(
            "Split",
            &[f32(&[6, 4])],
            &[],
            &[("split", Attr::Ints(vec![2, 4]))],
            2,
        )
        .unwrap();
        assert_eq!(shapes(r), [vec![2, 4], vec![4, 4]]);
        let r = run("Split", &[f32(&[7, 4])], &[], &[], 3).unwrap();
        assert_eq!(shapes(r), [vec![3, 4], vec![3, 4], vec![1, 4]]);
        let reps = i64s(&[2, 3]);
        assert_eq!(
            shapes(
                run(
                    "Tile",
                    &[f32(&[2, -1]), idx(2)],
                    &[None, Some(&reps)],
                    &[],
                    1
                )
                .unwrap()
            ),
            [vec![4, -1]]
        );
        let pads = i64s(&[1, 0, 2, 3]);
        assert_eq!(
            shapes(run("Pad", &[f32(&[2, 2]), idx(4)], &[None, Some(&pads)], &[], 1).unwrap()),
            [vec![5, 5]]
        );
    }

    #[test]
    fn range_nonzero_topk_blocks() {
        let s = |v: i64| HostTensor {
            dtype: DType::I64,
            shape: vec![],
            data: v.to_le_bytes().to_vec().into(),
        };
        let (a, b, c) = (s(10), s(4), s(-3));
        let one = TensorMeta::new(DType::I64, &[]);
        let r = run(
            "Range",
            &[one.clone(), one.clone(), one],
            &[Some(&a), Some(&b), Some(&c)],
            &[],
            1,
        )
        .unwrap();
        assert_eq!(shapes(r), [vec![2]]);
        assert_eq!(
            shapes(run("NonZero", &[f32(&[3, 4])], &[], &[], 1).unwrap()),
            [vec![2, -1]]
        );
        assert!(
            OpRegistry::new()
                .get("NonZero")
                .is_some_and(|s| s.data_dependent)
        );
        let k = i64s(&[2]);
        let r = run("TopK", &[f32(&[3, 5]), idx(1)], &[None, Some(&k)], &[], 2).unwrap();
        assert_eq!(r[1].dtype, DType::I64);
        assert_eq!(shapes(r), [vec![3, 2], vec![3, 2]]);
        let bs = [("blocksize", Attr::Int(2))];
        assert_eq!(
            shapes(run("DepthToSpace", &[f32(&[1, 8, 2, 3])], &[], &bs, 1).unwrap()),
            [vec![1, 2, 4, 6]]
        );
        assert_eq!(
            shapes(run("SpaceToDepth", &[f32(&[1, 2, 4, 6])], &[], &bs, 1).unwrap()),
            [vec![1, 8, 2, 3]]
        );
    }
}
