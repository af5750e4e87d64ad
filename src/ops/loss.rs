//! Losses: SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss. Shape and dtype
//! inference and CPU compute.
//!
//! Both take scores `[N, C, d1, ...]` and integer labels `[N, d1, ...]`, an optional
//! per-class weight `[C]` and an optional `ignore_index`. One element's loss is
//! `-weight[label] * input[n, label, d...]` (on the log-softmax of the scores for the
//! cross entropy), 0 where the label is ignored; `reduction` keeps them (`none`), adds
//! them (`sum`), or divides the sum by the sum of the weights that applied (`mean`).
//! Float types compute in f32 (f64 for float64) and round once per output element.

use crate::dispatch;
use crate::ops::linalg::{Acc, Real, absent, index_values, not_float, widen_all};
use crate::ops::tensor::{TensorMut, TensorRef};
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta};
use half::{bf16, f16};

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new("SoftmaxCrossEntropyLoss", infer_loss).computes(compute_loss));
    reg.add(OpSpec::new("NegativeLogLikelihoodLoss", infer_loss).computes(compute_loss));
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reduction {
    None,
    Sum,
    Mean,
}

fn reduction(ctx: &InferCtx) -> Result<Reduction, OpError> {
    match ctx.attr_str("reduction", "mean")? {
        "none" => Ok(Reduction::None),
        "sum" => Ok(Reduction::Sum),
        "mean" => Ok(Reduction::Mean),
        other => Err(ctx.attr_error("reduction", format!("{other:?} is not none, sum or mean"))),
    }
}

/// The loss (the labels' shape with `none`, else a scalar), then for the cross entropy
/// the optional log-probabilities, shaped as the scores.
fn infer_loss(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    let (x, labels) = (&ctx.inputs[0], &ctx.inputs[1]);
    if !labels.dtype.is_int() {
        return Err(ctx.input_error(
            1,
            format!("labels are {}, expected int32 or int64", labels.dtype),
        ));
    }
    if let (Some(xs), Some(ls)) = (&x.shape, &labels.shape) {
        let fits =
            xs.len() >= 2 && ls.len() == xs.len() - 1 && ls[0] == xs[0] && ls[1..] == xs[2..];
        if !fits {
            return Err(ctx.input_error(1, format!("labels {ls:?} do not fit scores {xs:?}")));
        }
    }
    let loss = match reduction(ctx)? {
        Reduction::None => TensorMeta {
            dtype: x.dtype,
            shape: labels.shape.clone(),
        },
        _ => TensorMeta::new(x.dtype, &[]),
    };
    if ctx.op == "SoftmaxCrossEntropyLoss" && ctx.outputs > 1 {
        return Ok(vec![loss, x.clone()]);
    }
    Ok(vec![loss])
}

fn compute_loss(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f16, bf16, f64] => loss::<T>(ctx, inputs, outputs),
        other => Err(not_float(ctx, 0, other)))
}

fn loss<T: Real>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let xs = &inputs[0];
    if xs.rank() < 2 {
        return Err(ctx.input_error(0, format!("scores {:?} need a class dim", xs.shape)));
    }
    let (n, c) = (xs.shape[0], xs.shape[1]);
    let inner: usize = xs.shape[2..].iter().product();
    let mut x = widen_all(xs.slice::<T>()?);
    let labels = index_values(ctx, &inputs[1], 1)?;
    if labels.len() != n * inner {
        return Err(ctx.input_error(
            1,
            format!(
                "labels {:?} do not fit scores {:?}",
                inputs[1].shape, xs.shape
            ),
        ));
    }
    let weights = match inputs.get(2) {
        Some(w) if !absent(Some(&ctx.inputs[2])) => {
            if w.dtype != T::DTYPE || w.shape != [c] {
                return Err(ctx.input_error(
                    2,
                    format!(
                        "weights are {} {:?}, expected {} [{c}]",
                        w.dtype,
                        w.shape,
                        T::DTYPE
                    ),
                ));
            }
            Some(widen_all(w.slice::<T>()?))
        }
        _ => None,
    };
    let ignore = ctx
        .attrs
        .get("ignore_index")
        .map(|_| ctx.attr_int("ignore_index", 0))
        .transpose()?;
    if ctx.op == "SoftmaxCrossEntropyLoss" {
        log_softmax(&mut x, n, c, inner);
        if let Some(out) = outputs.get_mut(1) {
            crate::ops::linalg::narrow_into::<T>(&x, out.slice_mut::<T>()?);
        }
    }
    // Each element's weighted loss, and the weight that applied to it (for `mean`).
    let mut losses = vec![T::Acc::ZERO; n * inner];
    // The reductions add up to N * d1 * ... terms: they accumulate in f64, so a long
    // sum in f32 does not drift from the reference's pairwise one.
    let mut weight_sum = 0.0f64;
    for b in 0..n {
        for d in 0..inner {
            let at = b * inner + d;
            let label = labels[at];
            if Some(label) == ignore {
                continue;
            }
            let class = usize::try_from(label)
                .ok()
                .filter(|&l| l < c)
                .ok_or_else(|| ctx.input_error(1, format!("label {label} is outside 0..{c}")))?;
            let w = weights.as_ref().map_or(T::Acc::ONE, |w| w[class]);
            losses[at] = -(x[(b * c + class) * inner + d]) * w;
            weight_sum += w.to_f64();
        }
    }
    let out = outputs[0].slice_mut::<T>()?;
    match reduction(ctx)? {
        Reduction::None => crate::ops::linalg::narrow_into::<T>(&losses, out),
        r => {
            let sum: f64 = losses.iter().map(|l| l.to_f64()).sum();
            // All ignored: 0/0, NaN, as the reference gives.
            let v = if r == Reduction::Mean {
                sum / weight_sum
            } else {
                sum
            };
            if let Some(o) = out.first_mut() {
                *o = T::narrow(T::Acc::from_f64(v));
            }
        }
    }
    Ok(())
}

/// Log-softmax over the class dim of [n, c, inner] in place: `x - max - ln(sum(exp(x -
/// max)))`, one (n, inner) column at a time, with the class stride `inner`.
fn log_softmax<A: Acc>(x: &mut [A], n: usize, c: usize, inner: usize) {
    for b in 0..n {
        let block = &mut x[b * c * inner..(b + 1) * c * inner];
        for d in 0..inner {
            let max = (0..c).fold(A::NEG_INFINITY, |m, k| m.max_nan(block[k * inner + d]));
            let sum = (0..c).fold(A::ZERO, |s, k| s + (block[k * inner + d] - max).exp());
            let shift = max + sum.ln();
            for k in 0..c {
                block[k * inner + d] = block[k * inner + d] - shift;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run;
    use crate::ops::testing::try_run;

    use crate::ops::assert_close as close;

    fn red(r: &str) -> (&'static str, Attr) {
        ("reduction", Attr::Str(r.into()))
    }

    #[test]
    fn nll_picks_weights_and_ignores() {
        // input [2, 3], labels [2, 0]: losses -x[0,2] = 3 and -x[1,0] = 4.
        let x = Tensor::from_vec(&[2, 3], &[-1.0f32, -2.0, -3.0, -4.0, -5.0, -6.0]);
        let y = Tensor::from_vec(&[2], &[2i64, 0]);
        let out = run(
            "NegativeLogLikelihoodLoss",
            &[red("none")],
            &[x.clone(), y.clone()],
            1,
        );
        close(out[0].slice::<f32>().unwrap(), &[3.0, 4.0]);
        let w = Tensor::from_vec(&[3], &[1.0f32, 0.0, 3.0]);
        // mean with weights: (3*3 + 4*1) / (3 + 1).
        let out = run(
            "NegativeLogLikelihoodLoss",
            &[],
            &[x.clone(), y.clone(), w],
            1,
        );
        close(out[0].slice::<f32>().unwrap(), &[13.0 / 4.0]);
        let out = run(
            "NegativeLogLikelihoodLoss",
            &[red("sum"), ("ignore_index", Attr::Int(0))],
            &[x, y],
            1,
        );
        assert!(out[0].shape.is_empty());
        close(out[0].slice::<f32>().unwrap(), &[3.0]);
    }

    #[test]
    fn cross_entropy_and_log_prob() {
        // Scores [1, 2, 2] (two positions): equal scores give log(1/2) everywhere.
        let x = Tensor::from_vec(&[1, 2, 2], &[0.0f32, 5.0, 0.0, 5.0]);
        let y = Tensor::from_vec(&[1, 2], &[1i32, 0]);
        let out = run("SoftmaxCrossEntropyLoss", &[], &[x, y], 2);
        let l2 = 2f32.ln();
        close(out[0].slice::<f32>().unwrap(), &[l2]);
        close(out[1].slice::<f32>().unwrap(), &[-l2, -l2, -l2, -l2]);
        let bad = Tensor::from_vec(&[1, 1], &[5i64]);
        let x = Tensor::from_vec(&[1, 2, 1], &[0.0f32, 0.0]);
        let e = try_run("SoftmaxCrossEntropyLoss", &[], &[x, bad], 1).unwrap_err();
        assert!(e.to_string().contains("label 5 is outside 0..2"), "{e}");
    }
}
