//! GE's LayerNorm and LayerNormV3 (graphengine `nn_norm_ops.h`, ops-nn
//! `norm/layer_norm_v3`): x normalized over its dims from `begin_norm_axis` on, then
//! scaled by gamma and shifted by beta, which cover x's dims from `begin_params_axis` on.
//!
//! - LayerNorm(x, gamma, beta; begin_norm_axis 0, begin_params_axis 0, epsilon 1e-7):
//!   y, mean and variance (the population variance, not ONNX's InvStdDev).
//! - LayerNormV3 (the same, epsilon 1e-5): y, mean and rstd `1/sqrt(variance + eps)`.
//!
//! mean and the third output keep x's leading dims and a 1 for each normalized one, in
//! gamma's type. Both defaults normalize over *every* dim (GE's `begin_norm_axis` 0, where
//! ONNX's LayerNormalization takes the last): a graph states the axis it means. The
//! statistics and the rescale are the library's LayerNormalization kernel's (two passes in
//! f64 per row); gamma and beta must broadcast to the normalized dims (`begin_params_axis`
//! at or after `begin_norm_axis`), else the node is refused.

use super::attrs::{onnx_attrs, with_attrs};
use crate::ops::nn::norm::layer_norm;
use crate::ops::{
    Attr, DType, InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut, TensorRef, UNKNOWN,
};

/// Registers LayerNorm and LayerNormV3.
pub fn register(reg: &mut OpRegistry) {
    for name in names() {
        reg.add(OpSpec::new(name, infer).computes(compute));
    }
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    ["LayerNorm", "LayerNormV3"].into_iter()
}

/// `begin_norm_axis` and epsilon, checked for rank `rank`.
fn norm_axis(ctx: &InferCtx, rank: usize) -> Result<(usize, f64), OpError> {
    let r = rank as i64;
    let axis = |name: &str| -> Result<usize, OpError> {
        let a = ctx.attr_int(name, 0)?;
        if !(-r..r.max(1)).contains(&a) {
            return Err(ctx.attr_error(name, format!("{a} is outside [-{r}, {r})")));
        }
        Ok(if a < 0 { a + r } else { a } as usize)
    };
    let (norm, params) = (axis("begin_norm_axis")?, axis("begin_params_axis")?);
    if params < norm {
        return Err(ctx.attr_error(
            "begin_params_axis",
            format!(
                "{params} is before begin_norm_axis {norm}: gamma and beta over dims that are \
                 not normalized are not computed"
            ),
        ));
    }
    let default = if ctx.op == "LayerNorm" { 1e-7 } else { 1e-5 };
    Ok((norm, f64::from(ctx.attr_float("epsilon", default)?)))
}

fn infer(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    let x = &ctx.inputs[0];
    if !matches!(x.dtype, DType::F32 | DType::F64 | DType::F16 | DType::Bf16) {
        return Err(ctx.input_error(0, format!("{} is not a float type", x.dtype)));
    }
    let stats_type = ctx.inputs[1].dtype;
    let Some(s) = &x.shape else {
        let unknown = TensorMeta::unknown_rank(stats_type);
        return Ok(vec![x.clone(), unknown.clone(), unknown]);
    };
    let (axis, _) = norm_axis(ctx, s.len())?;
    let norm_dims = &s[axis..];
    for i in [1, 2] {
        if let Some(p) = &ctx.inputs[i].shape
            && (p.len() > norm_dims.len()
                || p.iter()
                    .rev()
                    .zip(norm_dims.iter().rev())
                    .any(|(&a, &b)| a != b && a != 1 && a != UNKNOWN && b != UNKNOWN))
        {
            return Err(ctx.input_error(
                i,
                format!("{p:?} does not broadcast to the normalized dims {norm_dims:?}"),
            ));
        }
    }
    let mut stats = s[..axis].to_vec();
    stats.resize(s.len(), 1);
    let stats = TensorMeta::new(stats_type, &stats);
    Ok(vec![x.clone(), stats.clone(), stats])
}

/// The library's LayerNormalization on GE's axis and epsilon; the op's name tells the
/// kernel which third output to write (LayerNorm's variance, V3's rstd).
fn compute(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let (axis, eps) = norm_axis(ctx, inputs[0].rank())?;
    let attrs = onnx_attrs(vec![
        ("axis", Attr::Int(axis as i64)),
        ("epsilon", Attr::Float(eps)),
    ]);
    layer_norm(&with_attrs(ctx, &attrs), inputs, outputs)
}

#[cfg(test)]
mod tests {
    use crate::ops::testing::run;
    use crate::ops::{Attr, Tensor, assert_close};

    #[test]
    fn layer_norm_gives_mean_and_variance_and_v3_rstd() {
        let x = Tensor::from_vec(&[2, 3], &[1.0f32, 2.0, 6.0, -1.0, -1.0, 2.0]);
        let gamma = Tensor::from_vec(&[3], &[1.0f32, 2.0, 0.5]);
        let beta = Tensor::from_vec(&[3], &[0.0f32, 1.0, -1.0]);
        let last = [
            ("begin_norm_axis", Attr::Int(-1)),
            ("begin_params_axis", Attr::Int(-1)),
            ("epsilon", Attr::Float(1e-5)),
        ];
        let ins = [x.clone(), gamma.clone(), beta.clone()];
        let out = run("LayerNorm", &last, &ins, 3);
        // Row 0: mean 3, variance 14/3; row 1: mean 0, variance 2.
        let (m0, v0, m1, v1) = (3.0f64, 14.0 / 3.0, 0.0f64, 2.0);
        let y = |v: f64, m: f64, var: f64, g: f64, b: f64| {
            ((v - m) / (var + 1e-5).sqrt() * g + b) as f32
        };
        assert_close(
            out[0].slice::<f32>().unwrap(),
            &[
                y(1.0, m0, v0, 1.0, 0.0),
                y(2.0, m0, v0, 2.0, 1.0),
                y(6.0, m0, v0, 0.5, -1.0),
                y(-1.0, m1, v1, 1.0, 0.0),
                y(-1.0, m1, v1, 2.0, 1.0),
                y(2.0, m1, v1, 0.5, -1.0),
            ],
        );
        assert_eq!(out[1].shape, [2, 1]);
        assert_close(out[1].slice::<f32>().unwrap(), &[3.0, 0.0]);
        assert_close(out[2].slice::<f32>().unwrap(), &[v0 as f32, v1 as f32]);
        let v3 = run("LayerNormV3", &last, &ins, 3);
        assert_eq!(
            v3[0].slice::<f32>().unwrap(),
            out[0].slice::<f32>().unwrap()
        );
        assert_close(
            v3[2].slice::<f32>().unwrap(),
            &[
                (1.0 / (v0 + 1e-5).sqrt()) as f32,
                (1.0 / (v1 + 1e-5).sqrt()) as f32,
            ],
        );
        // GE's default axis 0 normalizes over everything: one mean.
        let all = run(
            "LayerNorm",
            &[],
            &[
                x,
                Tensor::from_vec(&[2, 3], &[1.0f32; 6]),
                Tensor::from_vec(&[1], &[0.0f32]),
            ],
            3,
        );
        assert_eq!(all[1].shape, [1, 1]);
        assert_close(all[1].slice::<f32>().unwrap(), &[1.5]);
        let err = crate::ops::testing::try_run(
            "LayerNorm",
            &[
                ("begin_norm_axis", Attr::Int(1)),
                ("begin_params_axis", Attr::Int(0)),
            ],
            &[Tensor::from_vec(&[2, 3], &[0.0f32; 6]), gamma, beta],
            3,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("begin_params_axis"), "{err}");
    }
}
