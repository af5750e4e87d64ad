//! Indexing ops: GatherElements, GatherND, ScatterElements, ScatterND (and GE's
//! TensorScatterUpdate), OneHot, Compress and Unique. Shape and dtype inference here,
//! compute in [`compute`].

mod compute;

use crate::ops::DType;
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, UNKNOWN, meta};

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    use compute as k;
    reg.add(OpSpec::new("GatherElements", infer_gather_elements).computes(k::gather_elements));
    reg.add(OpSpec::new("GatherND", infer_gather_nd).computes(k::gather_nd));
    for name in ["ScatterElements", "Scatter"] {
        reg.add(OpSpec::new(name, infer_scatter).computes(k::scatter_elements));
    }
    // GE's TensorScatterUpdate is TensorFlow's: ScatterND without a reduction.
    for name in ["ScatterND", "TensorScatterUpdate"] {
        reg.add(OpSpec::new(name, infer_scatter).computes(k::scatter_nd));
    }
    reg.add(
        OpSpec::new("OneHot", infer_one_hot)
            .reading(&[1])
            .computes(k::one_hot),
    );
    reg.add(
        OpSpec::new("Compress", infer_compress)
            .data_dependent()
            .computes_alloc(k::compress),
    );
    reg.add(
        OpSpec::new("Unique", infer_unique)
            .data_dependent()
            .computes_alloc(k::unique),
    );
}

fn require_indices(ctx: &InferCtx, i: usize) -> Result<(), OpError> {
    match ctx.inputs[i].dtype {
        DType::I64 | DType::I32 => Ok(()),
        d => Err(ctx.input_error(i, format!("is {d}, indices are int32 or int64"))),
    }
}

/// The output has the indices' shape and the data's dtype.
fn infer_gather_elements(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    require_indices(ctx, 1)?;
    Ok(meta(ctx.inputs[0].dtype, ctx.inputs[1].shape.clone()))
}

/// GatherND: indices [..., k] pick k-deep slices of data after `batch_dims` batch dims.
fn infer_gather_nd(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    require_indices(ctx, 1)?;
    let dtype = ctx.inputs[0].dtype;
    let (Some(d), Some(i)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(vec![TensorMeta::unknown_rank(dtype)]);
    };
    let b = ctx
        .attrs
        .get("batch_dims")
        .and_then(|a| a.as_int())
        .unwrap_or(0)
        .max(0) as usize;
    let Some(&k) = i.last() else {
        return Err(ctx.input_error(1, "indices are a scalar"));
    };
    if k < 0 {
        return Ok(vec![TensorMeta::unknown_rank(dtype)]);
    }
    let k = k as usize;
    if b + k > d.len() || b >= i.len() && b > 0 {
        return Err(ctx.input_error(
            1,
            format!("{i:?} with batch_dims {b} does not index data {d:?}"),
        ));
    }
    let out = i[..i.len() - 1]
        .iter()
        .chain(&d[b + k..])
        .copied()
        .collect();
    Ok(meta(dtype, Some(out)))
}

/// Scatters write into a copy of the data: the output is the data.
fn infer_scatter(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    require_indices(ctx, 1)?;
    if ctx.inputs[2].dtype != ctx.inputs[0].dtype {
        return Err(ctx.input_error(
            2,
            format!(
                "is {}, data is {}",
                ctx.inputs[2].dtype, ctx.inputs[0].dtype
            ),
        ));
    }
    Ok(vec![ctx.inputs[0].clone()])
}

/// OneHot(indices, depth, values): a new axis of size `depth` at `axis`; values' dtype.
fn infer_one_hot(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    let dtype = ctx.inputs[2].dtype;
    let Some(s) = &ctx.inputs[0].shape else {
        return Ok(vec![TensorMeta::unknown_rank(dtype)]);
    };
    let depth = match ctx.values.get(1).copied().flatten() {
        Some(t) => match t.int_values() {
            Some(v) => v.first().copied().unwrap_or(UNKNOWN),
            None => crate::ops::slicing::scalar_value(t)
                .map(|f| f as i64)
                .unwrap_or(UNKNOWN),
        },
        None => UNKNOWN,
    };
    if depth < 0 && ctx.values.get(1).copied().flatten().is_some() {
        return Err(ctx.input_error(1, format!("depth {depth} is negative")));
    }
    let rank = s.len() + 1;
    let a = ctx.axis(ctx.attr_int("axis", -1)?, rank, "axis")?;
    let mut out = s.clone();
    out.insert(a, depth);
    Ok(meta(dtype, Some(out)))
}

/// Compress keeps the slices its condition selects: the count is known only after it ran.
fn infer_compress(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let x = &ctx.inputs[0];
    let shape = match (ctx.attrs.get("axis").and_then(|a| a.as_int()), &x.shape) {
        (None, _) => Some(vec![UNKNOWN]),
        (Some(axis), Some(s)) => {
            let a = ctx.axis(axis, s.len(), "axis")?;
            let mut d = s.clone();
            d[a] = UNKNOWN;
            Some(d)
        }
        (Some(_), None) => None,
    };
    Ok(meta(x.dtype, shape))
}

/// Unique: values, first indices, inverse indices, counts; sizes known only after it ran.
fn infer_unique(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let y = match (ctx.attrs.get("axis").and_then(|a| a.as_int()), &x.shape) {
        (None, _) => Some(vec![UNKNOWN]),
        (Some(axis), Some(s)) => {
            let a = if axis < 0 {
                axis + s.len() as i64
            } else {
                axis
            };
            let mut d = s.clone();
            if let Some(v) = d.get_mut(a.max(0) as usize) {
                *v = UNKNOWN;
            }
            Some(d)
        }
        (Some(_), None) => None,
    };
    let idx = TensorMeta {
        dtype: DType::I64,
        shape: Some(vec![UNKNOWN]),
    };
    Ok(vec![
        TensorMeta {
            dtype: x.dtype,
            shape: y,
        },
        idx.clone(),
        idx.clone(),
        idx,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_nd_and_one_hot() {
        let reg = OpRegistry::new();
        let run = |op: &str, inputs: &[TensorMeta]| {
            crate::ops::infer_for_test(op, inputs, &[], &[], 1)
                .unwrap()
                .remove(0)
                .shape
        };
        let f = |s: &[i64]| TensorMeta::new(DType::F32, s);
        let i = |s: &[i64]| TensorMeta::new(DType::I64, s);
        assert_eq!(
            run("GatherND", &[f(&[2, 3, 4]), i(&[5, 2])]),
            Some(vec![5, 4])
        );
        assert_eq!(
            run("GatherElements", &[f(&[3, 3]), i(&[2, 3])]),
            Some(vec![2, 3])
        );
        assert_eq!(
            run("OneHot", &[i(&[4]), i(&[]), f(&[2])]),
            Some(vec![4, -1])
        );
        assert!(reg.get("Unique").is_some_and(|s| s.data_dependent));
    }
}
