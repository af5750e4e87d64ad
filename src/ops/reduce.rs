//! Reductions (ReduceSum, ReduceMean, ... ), ArgMax/ArgMin, CumSum and CumProd. Shape
//! and dtype inference here, compute in [`compute`], the element arithmetic they share
//! (also with the scatter reductions) in [`accumulate`].
//!
//! Reduction axes come from the `axes` attribute, or from input 1 in later opsets
//! (ReduceSum from 13, the others from 18). No axes reduce every axis, unless
//! `noop_with_empty_axes` is set. `keepdims` (default 1) keeps reduced axes as 1.

pub(crate) mod accumulate;
pub(crate) mod compute;

use crate::ops::DType;
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, UNKNOWN, meta};

const REDUCTIONS: &[&str] = &[
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    for &name in REDUCTIONS {
        reg.add(
            OpSpec::new(name, infer_reduce)
                .reading(&[1])
                .computes(compute::reduce),
        );
    }
    for name in ["ArgMax", "ArgMin"] {
        reg.add(OpSpec::new(name, infer_arg).computes(compute::arg_extreme));
    }
    for name in ["CumSum", "CumProd"] {
        reg.add(OpSpec::new(name, infer_cumsum).computes(compute::cumulative));
    }
}

/// Normalized, checked axes for `rank`.
fn normalize(ctx: &InferCtx, axes: &[i64], rank: usize) -> Result<Vec<bool>, OpError> {
    let mut mark = vec![false; rank];
    for &a in axes {
        mark[ctx.axis(a, rank, "axes")?] = true;
    }
    Ok(mark)
}

pub(crate) fn infer_reduce(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 2)?;
    let x = &ctx.inputs[0];
    let keep = ctx.attr_int("keepdims", 1)? != 0;
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let axes: Option<Vec<i64>> = match ctx.attrs.get("axes") {
        Some(a) => Some(
            a.as_ints()
                .map(<[i64]>::to_vec)
                .ok_or_else(|| OpError::Attribute {
                    op: ctx.op.into(),
                    name: "axes".into(),
                    msg: format!("is {a:?}, not a list of ints"),
                })?,
        ),
        None if ctx.inputs.len() > 1 => match ctx.values.get(1).copied().flatten() {
            Some(t) => Some(
                t.int_values()
                    .ok_or_else(|| ctx.input_error(1, format!("is {}, axes are int64", t.dtype)))?,
            ),
            // Axes known only at run time: with keepdims the rank is known.
            None => {
                let shape = keep.then(|| vec![UNKNOWN; s.len()]);
                return Ok(meta(x.dtype, shape));
            }
        },
        None => None,
    };
    let mark = match axes {
        Some(a) if !a.is_empty() => normalize(ctx, &a, s.len())?,
        _ if ctx.attr_int("noop_with_empty_axes", 0)? != 0 => vec![false; s.len()],
        _ => vec![true; s.len()],
    };
    let out = s
        .iter()
        .zip(&mark)
        .filter_map(|(&d, &m)| match (m, keep) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    Ok(meta(x.dtype, Some(out)))
}

fn infer_arg(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let Some(s) = &ctx.inputs[0].shape else {
        return Ok(meta(DType::I64, None));
    };
    let mark = normalize(ctx, &[ctx.attr_int("axis", 0)?], s.len())?;
    let keep = ctx.attr_int("keepdims", 1)? != 0;
    let out = s
        .iter()
        .zip(&mark)
        .filter_map(|(&d, &m)| if m { keep.then_some(1) } else { Some(d) })
        .collect();
    Ok(meta(DType::I64, Some(out)))
}

fn infer_cumsum(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    Ok(vec![ctx.inputs[0].clone()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::infer1;
    use crate::ops::{Attr, HostTensor};

    fn f32(shape: &[i64]) -> TensorMeta {
        TensorMeta::new(DType::F32, shape)
    }

    #[test]
    fn reductions() {
        let x = f32(&[2, 3, 4]);
        assert_eq!(
            infer1(
                "ReduceMean",
                std::slice::from_ref(&x),
                &[],
                &[("axes", Attr::Ints(vec![-1]))]
            )
            .unwrap(),
            f32(&[2, 3, 1])
        );
        let drop = [("axes", Attr::Ints(vec![0, 2])), ("keepdims", Attr::Int(0))];
        assert_eq!(
            infer1("ReduceMax", std::slice::from_ref(&x), &[], &drop).unwrap(),
            f32(&[3])
        );
        assert_eq!(
            infer1(
                "ReduceSum",
                std::slice::from_ref(&x),
                &[],
                &[("keepdims", Attr::Int(0))]
            )
            .unwrap(),
            f32(&[])
        );
        let axes = HostTensor {
            dtype: DType::I64,
            shape: vec![1],
            data: 1i64.to_le_bytes().to_vec().into(),
        };
        let i = TensorMeta::new(DType::I64, &[1]);
        assert_eq!(
            infer1(
                "ReduceSum",
                &[x.clone(), i.clone()],
                &[None, Some(&axes)],
                &[]
            )
            .unwrap(),
            f32(&[2, 1, 4])
        );
        assert_eq!(
            infer1("ReduceSum", &[x.clone(), i], &[], &[]).unwrap(),
            f32(&[-1, -1, -1])
        );
        assert!(
            infer1(
                "ReduceL2",
                std::slice::from_ref(&x),
                &[],
                &[("axes", Attr::Ints(vec![3]))]
            )
            .is_err()
        );
        let noop = [("noop_with_empty_axes", Attr::Int(1))];
        assert_eq!(
            infer1("ReduceSum", std::slice::from_ref(&x), &[], &noop).unwrap(),
            x
        );
    }

    #[test]
    fn arg_and_cumsum() {
        let x = f32(&[2, 3]);
        assert_eq!(
            infer1(
                "ArgMax",
                std::slice::from_ref(&x),
                &[],
                &[("axis", Attr::Int(1))]
            )
            .unwrap(),
            TensorMeta::new(DType::I64, &[2, 1])
        );
        let drop = [("axis", Attr::Int(0)), ("keepdims", Attr::Int(0))];
        assert_eq!(
            infer1("ArgMin", std::slice::from_ref(&x), &[], &drop).unwrap(),
            TensorMeta::new(DType::I64, &[3])
        );
        assert_eq!(
            infer1(
                "CumSum",
                &[x.clone(), TensorMeta::new(DType::I64, &[])],
                &[],
                &[]
            )
            .unwrap(),
            x
        );
    }
}
