//! Shape-manipulation ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat,
//! Shape, Size, Expand, Gather, ConstantOfShape. Shape and dtype inference here, compute
//! in [`compute`]; [`movement`], [`indices`] and [`args`] are what every data-movement
//! compute function of the library shares (strided copies, index reading, checked argument access).
//!
//! Several of these read an input's *value* (Reshape's target shape, Expand's shape,
//! Squeeze's and Unsqueeze's axes from opset 13). When lowering knows that value (a
//! constant) the output shape is known; otherwise inference gives what the shapes alone
//! tell (often the rank) and the rest is found at run time.

pub(crate) mod args;
pub(crate) mod compute;
pub(crate) mod indices;
pub(crate) mod movement;

use crate::ops::elementwise::broadcast;
use crate::ops::{Attr, DType};
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, UNKNOWN, meta};

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    use compute as k;
    reg.add(
        OpSpec::new("Reshape", infer_reshape)
            .reading(&[1])
            .computes(k::copy_through),
    );
    reg.add(OpSpec::new("Flatten", infer_flatten).computes(k::copy_through));
    reg.add(
        OpSpec::new("Squeeze", infer_squeeze)
            .reading(&[1])
            .computes(k::copy_through),
    );
    reg.add(
        OpSpec::new("Unsqueeze", infer_unsqueeze)
            .reading(&[1])
            .computes(k::copy_through),
    );
    reg.add(OpSpec::new("Transpose", infer_transpose).computes(k::transpose));
    reg.add(OpSpec::new("Concat", infer_concat).computes(k::concat));
    reg.add(OpSpec::new("Shape", infer_shape_op).computes(k::shape));
    reg.add(OpSpec::new("Size", infer_size).computes(k::size));
    reg.add(OpSpec::new("Rank", infer_rank).computes(k::rank));
    reg.add(
        OpSpec::new("Expand", infer_expand)
            .reading(&[1])
            .computes(k::expand),
    );
    reg.add(OpSpec::new("Gather", infer_gather).computes(k::gather));
    reg.add(
        OpSpec::new("ConstantOfShape", infer_constant_of_shape)
            .reading(&[0])
            .computes(k::constant_of_shape),
    );
}

/// Reshape: 0 copies the input dim (unless `allowzero`), one -1 is inferred.
fn infer_reshape(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let x = &ctx.inputs[0];
    let Some(target) = ctx.value_ints(1)? else {
        // Only the rank is known: the length of the shape input.
        let rank = ctx.inputs[1]
            .shape
            .as_ref()
            .and_then(|s| s.first().copied())
            .filter(|&r| (0..=MAX_SPELLED_RANK).contains(&r));
        return Ok(meta(x.dtype, rank.map(|r| vec![UNKNOWN; r as usize])));
    };
    let allow_zero = ctx.attr_int("allowzero", 0)? != 0;
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            0 if !allow_zero => {
                let copied = x.shape.as_ref().and_then(|s| s.get(i).copied());
                match copied {
                    Some(c) => out.push(c),
                    None if x.shape.is_none() => out.push(UNKNOWN),
                    None => {
                        return Err(ctx.input_error(
                            1,
                            format!(
                                "dim {i} is 0 but the input has rank {}",
                                x.shape.as_ref().map_or(0, |s| s.len())
                            ),
                        ));
                    }
                }
            }
            -1 if infer_at.is_none() => {
                infer_at = Some(i);
                out.push(UNKNOWN);
            }
            d if d >= 0 => out.push(d),
            _ => return Err(ctx.input_error(1, format!("{target:?} is not a valid shape"))),
        }
    }
    let overflow = || ctx.input_error(1, format!("{target:?}: the element count overflows"));
    // With a static input every copied dim is known, so the -1 is the element count over
    // the product of the other dims.
    if let (Some(i), Some(total)) = (
        infer_at,
        x.shape
            .as_ref()
            .filter(|_| x.is_static())
            .and_then(|s| elements(s)),
    ) {
        let others: Vec<i64> = out
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, &d)| d)
            .collect();
        let known = elements(&others).ok_or_else(overflow)?;
        if known > 0 {
            if total % known != 0 {
                return Err(
                    ctx.input_error(1, format!("cannot reshape {total} elements to {target:?}"))
                );
            }
            out[i] = total / known;
        }
    }
    if out.iter().all(|&d| d >= 0) {
        // A wrapped count could equal the input's: [4] to [2^62 + 1, 4] is 4 elements in
        // wrapping arithmetic.
        let count = elements(&out).ok_or_else(overflow)?;
        if let Some(s) = x.shape.as_ref().filter(|_| x.is_static())
            && elements(s) != Some(count)
        {
            return Err(ctx.input_error(1, format!("cannot reshape {s:?} to {out:?}")));
        }
    }
    Ok(meta(x.dtype, Some(out)))
}

/// The largest rank inference spells out as unknown dims from a shape input's length;
/// past it the rank is unknown. NumPy's limit is 64; ONNX has none.
const MAX_SPELLED_RANK: i64 = 1024;

/// The element count of known `dims`: `None` for a negative dim or past `i64`.
fn elements(dims: &[i64]) -> Option<i64> {
    dims.iter()
        .try_fold(1i64, |n, &d| if d < 0 { None } else { n.checked_mul(d) })
}

/// The element count of `dims`, [`UNKNOWN`] when a dim is; `None` past `i64`.
fn product(dims: &[i64]) -> Option<i64> {
    if dims.iter().any(|&d| d < 0) {
        Some(UNKNOWN)
    } else {
        elements(dims)
    }
}

fn infer_flatten(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, Some(vec![UNKNOWN, UNKNOWN])));
    };
    let axis = ctx.attr_int("axis", 1)?;
    let a = if axis < 0 {
        axis + s.len() as i64
    } else {
        axis
    };
    if a < 0 || a > s.len() as i64 {
        return Err(OpError::Attribute {
            op: ctx.op.into(),
            name: "axis".into(),
            msg: format!("{axis} is out of range for rank {}", s.len()),
        });
    }
    let a = a as usize;
    let (Some(outer), Some(inner)) = (product(&s[..a]), product(&s[a..])) else {
        return Err(ctx.input_error(0, format!("the element count of {s:?} overflows")));
    };
    Ok(meta(x.dtype, Some(vec![outer, inner])))
}

/// The axes of Squeeze/Unsqueeze: attribute before opset 13, input 1 from 13.
fn axes(ctx: &InferCtx) -> Result<Option<Vec<i64>>, OpError> {
    if let Some(a) = ctx.attr_ints("axes")? {
        return Ok(Some(a.to_vec()));
    }
    if ctx.inputs.len() > 1 {
        return ctx.value_ints(1);
    }
    Ok(None)
}

fn infer_squeeze(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 2)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let out = match axes(ctx)? {
        Some(axes) => {
            let mut drop = vec![false; s.len()];
            for &a in &axes {
                let a = ctx.axis(a, s.len(), "axes")?;
                if s[a] > 1 {
                    return Err(ctx.input_error(0, format!("dim {a} is {}, not 1", s[a])));
                }
                drop[a] = true;
            }
            s.iter()
                .zip(drop)
                .filter(|(_, d)| !d)
                .map(|(&v, _)| v)
                .collect()
        }
        None if ctx.inputs.len() > 1 => return Ok(meta(x.dtype, None)),
        None if s.contains(&UNKNOWN) => return Ok(meta(x.dtype, None)),
        None => s.iter().copied().filter(|&d| d != 1).collect(),
    };
    Ok(meta(x.dtype, Some(out)))
}

fn infer_unsqueeze(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 2)?;
    let x = &ctx.inputs[0];
    let (Some(s), Some(axes)) = (&x.shape, axes(ctx)?) else {
        return Ok(meta(x.dtype, None));
    };
    let rank = s.len() + axes.len();
    let mut inserted = vec![false; rank];
    for &a in &axes {
        let a = ctx.axis(a, rank, "axes")?;
        if inserted[a] {
            return Err(OpError::Attribute {
                op: ctx.op.into(),
                name: "axes".into(),
                msg: format!("axis {a} is repeated"),
            });
        }
        inserted[a] = true;
    }
    let mut dims = s.iter();
    let out = inserted
        .iter()
        .map(|&ins| {
            if ins {
                1
            } else {
                dims.next().copied().unwrap_or(UNKNOWN)
            }
        })
        .collect();
    Ok(meta(x.dtype, Some(out)))
}

fn infer_transpose(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let perm: Vec<i64> = match ctx.attr_ints("perm")? {
        Some(p) => p.to_vec(),
        None => (0..s.len() as i64).rev().collect(),
    };
    let mut seen = vec![false; s.len()];
    let mut out = Vec::with_capacity(s.len());
    for &p in &perm {
        let ok = p >= 0 && (p as usize) < s.len() && !seen[p as usize];
        if !ok || perm.len() != s.len() {
            return Err(OpError::Attribute {
                op: ctx.op.into(),
                name: "perm".into(),
                msg: format!("{perm:?} is not a permutation of rank {}", s.len()),
            });
        }
        seen[p as usize] = true;
        out.push(s[p as usize]);
    }
    Ok(meta(x.dtype, Some(out)))
}

fn infer_concat(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, usize::MAX)?;
    let dtype = ctx.inputs[0].dtype;
    let Some(rank) = ctx
        .inputs
        .iter()
        .find_map(|t| t.shape.as_ref().map(Vec::len))
    else {
        return Ok(meta(dtype, None));
    };
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, rank, "axis")?;
    let mut out = vec![UNKNOWN; rank];
    let mut total = 0i64;
    for (i, t) in ctx.inputs.iter().enumerate() {
        if t.dtype != dtype {
            return Err(ctx.input_error(i, format!("is {}, input 0 is {dtype}", t.dtype)));
        }
        let Some(s) = &t.shape else {
            total = UNKNOWN;
            continue;
        };
        if s.len() != rank {
            return Err(ctx.input_error(i, format!("has rank {}, others {rank}", s.len())));
        }
        for (d, (&v, o)) in s.iter().zip(out.iter_mut()).enumerate() {
            if d == axis {
                continue;
            }
            *o = match (*o, v) {
                (UNKNOWN, v) => v,
                (o, UNKNOWN) => o,
                (o, v) if o == v => o,
                (o, v) => return Err(ctx.input_error(i, format!("dim {d} is {v}, others {o}"))),
            };
        }
        total = if total < 0 || s[axis] < 0 {
            UNKNOWN
        } else {
            total.checked_add(s[axis]).ok_or_else(|| {
                ctx.input_error(i, format!("dim {axis} of the concatenation overflows"))
            })?
        };
    }
    out[axis] = total;
    Ok(meta(dtype, Some(out)))
}

fn infer_shape_op(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let rank = ctx.inputs[0]
        .shape
        .as_ref()
        .map(|s| s.len() as i64)
        .unwrap_or(UNKNOWN);
    let start = ctx.attr_int("start", 0)?;
    let len = if rank < 0 {
        UNKNOWN
    } else {
        let end = ctx.attrs.get("end").and_then(Attr::as_int).unwrap_or(rank);
        let clamp = |v: i64| {
            if v < 0 {
                (v + rank).max(0)
            } else {
                v.min(rank)
            }
        };
        (clamp(end) - clamp(start)).max(0)
    };
    Ok(meta(shape_dtype(ctx)?, Some(vec![len])))
}

/// The element type of Shape's and Size's output: GE's `dtype` attribute (int32 or
/// int64), else int64 as ONNX says. A GE graph's node without it gets GE's default,
/// int32, written out by lowering (`ops::ge_node_attrs`).
pub(crate) fn shape_dtype(ctx: &InferCtx) -> Result<DType, OpError> {
    match ctx.attrs.get("dtype") {
        None => Ok(DType::I64),
        Some(Attr::DType(d @ (DType::I32 | DType::I64))) => Ok(*d),
        Some(other) => Err(ctx.attr_error("dtype", format!("is {other:?}, not int32 or int64"))),
    }
}

fn infer_size(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    Ok(meta(shape_dtype(ctx)?, Some(vec![])))
}

/// GE's Rank: the input's rank as an int32 scalar.
fn infer_rank(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    Ok(meta(DType::I32, Some(vec![])))
}

fn infer_expand(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let x = &ctx.inputs[0];
    let Some(target) = ctx.value_ints(1)? else {
        return Ok(meta(x.dtype, None));
    };
    let shape = broadcast(&[x.shape.as_deref(), Some(&target)]).map_err(|_| {
        ctx.input_error(
            1,
            format!("{target:?} does not broadcast with {:?}", x.shape),
        )
    })?;
    Ok(meta(x.dtype, shape))
}

fn infer_gather(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let (x, idx) = (&ctx.inputs[0], &ctx.inputs[1]);
    if !matches!(idx.dtype, DType::I64 | DType::I32) {
        return Err(ctx.input_error(1, format!("is {}, indices are int32 or int64", idx.dtype)));
    }
    let (Some(s), Some(i)) = (&x.shape, &idx.shape) else {
        return Ok(meta(x.dtype, None));
    };
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, s.len(), "axis")?;
    let out = s[..axis]
        .iter()
        .chain(i.iter())
        .chain(&s[axis + 1..])
        .copied()
        .collect();
    Ok(meta(x.dtype, Some(out)))
}

fn infer_constant_of_shape(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let dtype = match ctx.attrs.get("value") {
        Some(Attr::Tensor(t)) => t.dtype,
        _ => DType::F32,
    };
    Ok(meta(dtype, dims_input(ctx, 0)?))
}

/// The output shape a 1-D dims input `i` gives (ConstantOfShape's, GE's Fill's): its
/// values when known, else as many unknown dims as it has elements.
pub(crate) fn dims_input(ctx: &InferCtx, i: usize) -> Result<Option<Vec<i64>>, OpError> {
    match ctx.value_ints(i)? {
        Some(dims) if dims.iter().all(|&d| d >= 0) => Ok(Some(dims)),
        Some(dims) => Err(ctx.input_error(i, format!("{dims:?} has a negative dim"))),
        None => {
            // A rank past any real tensor's is left unknown rather than spelled out as
            // that many unknown dims (a declared shape input of [2^40] would ask for 8 TiB).
            let rank = ctx.inputs[i]
                .shape
                .as_ref()
                .and_then(|s| s.first().copied())
                .filter(|&r| (0..=MAX_SPELLED_RANK).contains(&r));
            Ok(rank.map(|r| vec![UNKNOWN; r as usize]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::infer1;

    use crate::ops::i64s;

    fn f32(shape: &[i64]) -> TensorMeta {
        TensorMeta::new(DType::F32, shape)
    }

    fn idx(n: i64) -> TensorMeta {
        TensorMeta::new(DType::I64, &[n])
    }

    #[test]
    fn reshape_counts_elements_without_wrapping() {
        // 2^62 + 1 times 4 wraps to 4 in 64-bit arithmetic: the input's count.
        let huge = i64s(&[(1 << 62) + 1, 4]);
        let err = infer1("Reshape", &[f32(&[4]), idx(2)], &[None, Some(&huge)], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("overflows"), "{err}");
        // So does an unknown input's target, and an inferred dim over a huge rest.
        assert!(infer1("Reshape", &[f32(&[-1]), idx(2)], &[None, Some(&huge)], &[]).is_err());
        let rest = i64s(&[-1, 1 << 40, 1 << 40]);
        assert!(infer1("Reshape", &[f32(&[4]), idx(3)], &[None, Some(&rest)], &[]).is_err());
        // A count that fits is unchanged.
        let fine = i64s(&[2, 2]);
        assert_eq!(
            infer1("Reshape", &[f32(&[4]), idx(2)], &[None, Some(&fine)], &[])
                .unwrap()
                .shape,
            Some(vec![2, 2])
        );
    }

    #[test]
    fn reshape() {
        let t = i64s(&[0, -1]);
        assert_eq!(
            infer1(
                "Reshape",
                &[f32(&[2, 3, 4]), idx(2)],
                &[None, Some(&t)],
                &[]
            )
            .map(|m| m.shape)
            .unwrap(),
            Some(vec![2, 12])
        );
        let t = i64s(&[-1, 8]);
        assert_eq!(
            infer1(
                "Reshape",
                &[f32(&[-1, 4, 2]), idx(2)],
                &[None, Some(&t)],
                &[]
            )
            .map(|m| m.shape)
            .unwrap(),
            Some(vec![-1, 8])
        );
        assert_eq!(
            infer1("Reshape", &[f32(&[2, 3]), idx(3)], &[], &[])
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![-1, -1, -1])
        );
        let t = i64s(&[5, -1]);
        assert!(
            infer1("Reshape", &[f32(&[2, 3]), idx(2)], &[None, Some(&t)], &[])
                .map(|m| m.shape)
                .unwrap_err()
                .to_string()
                .contains("cannot reshape 6")
        );
    }

    #[test]
    fn squeeze_unsqueeze_flatten_transpose() {
        assert_eq!(
            infer1("Squeeze", &[f32(&[1, 3, 1, 2])], &[], &[])
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![3, 2])
        );
        assert_eq!(
            infer1(
                "Squeeze",
                &[f32(&[1, 3, 1])],
                &[],
                &[("axes", Attr::Ints(vec![-1]))]
            )
            .map(|m| m.shape)
            .unwrap(),
            Some(vec![1, 3])
        );
        let axes = i64s(&[0, 3]);
        assert_eq!(
            infer1(
                "Unsqueeze",
                &[f32(&[3, 4]), idx(2)],
                &[None, Some(&axes)],
                &[]
            )
            .map(|m| m.shape)
            .unwrap(),
            Some(vec![1, 3, 4, 1])
        );
        assert_eq!(
            infer1("Unsqueeze", &[f32(&[3, 4]), idx(2)], &[], &[])
                .map(|m| m.shape)
                .unwrap(),
            None
        );
        assert!(
            infer1(
                "Squeeze",
                &[f32(&[2, 3])],
                &[],
                &[("axes", Attr::Ints(vec![0]))]
            )
            .map(|m| m.shape)
            .is_err()
        );
        assert_eq!(
            infer1("Flatten", &[f32(&[2, 3, 4])], &[], &[])
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![2, 12])
        );
        assert_eq!(
            infer1(
                "Flatten",
                &[f32(&[-1, 3, 4])],
                &[],
                &[("axis", Attr::Int(2))]
            )
            .map(|m| m.shape)
            .unwrap(),
            Some(vec![-1, 4])
        );
        assert_eq!(
            infer1(
                "Transpose",
                &[f32(&[2, 3, 4])],
                &[],
                &[("perm", Attr::Ints(vec![1, 2, 0]))]
            )
            .map(|m| m.shape)
            .unwrap(),
            Some(vec![3, 4, 2])
        );
        assert_eq!(
            infer1("Transpose", &[f32(&[2, 3])], &[], &[])
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![3, 2])
        );
        assert!(
            infer1(
                "Transpose",
                &[f32(&[2, 3])],
                &[],
                &[("perm", Attr::Ints(vec![0, 0]))]
            )
            .map(|m| m.shape)
            .is_err()
        );
    }

    #[test]
    fn concat_shape_gather_expand() {
        let axis = [("axis", Attr::Int(1))];
        assert_eq!(
            infer1("Concat", &[f32(&[2, 3]), f32(&[2, 5])], &[], &axis)
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![2, 8])
        );
        assert_eq!(
            infer1("Concat", &[f32(&[-1, 3]), f32(&[4, -1])], &[], &axis)
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![4, -1])
        );
        assert!(
            infer1("Concat", &[f32(&[2, 3]), f32(&[3, 3])], &[], &axis)
                .map(|m| m.shape)
                .is_err()
        );
        assert_eq!(
            infer1("Shape", &[f32(&[2, 3, 4])], &[], &[("start", Attr::Int(1))])
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![2])
        );
        assert_eq!(
            infer1("Size", &[f32(&[2, 3])], &[], &[])
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![])
        );
        assert_eq!(
            infer1("Gather", &[f32(&[5, 6, 7]), idx(3)], &[], &axis)
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![5, 3, 7])
        );
        let s = i64s(&[3, 1, 4]);
        assert_eq!(
            infer1("Expand", &[f32(&[2, 1]), idx(3)], &[None, Some(&s)], &[])
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![3, 2, 4])
        );
        let s = i64s(&[2, 3]);
        assert_eq!(
            infer1("ConstantOfShape", &[idx(2)], &[Some(&s)], &[])
                .map(|m| m.shape)
                .unwrap(),
            Some(vec![2, 3])
        );
    }
}
