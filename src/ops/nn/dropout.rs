//! Dropout as inference runs it: the identity, with a mask that keeps everything.
//!
//! Training-mode dropout with a positive ratio draws random numbers; no deterministic
//! compute function can reproduce another runtime's draw, so that combination is an error rather
//! than a silently different result.

use super::scalar::read_f64s;
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// Dropout: Y = X; the optional mask (output 1) is all true.
pub fn dropout(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let training = match inputs.get(2).filter(|t| !t.is_empty()) {
        Some(t) => t.data.first().is_some_and(|&b| b != 0),
        None => false,
    };
    if training {
        let ratio = match inputs.get(1).filter(|t| !t.is_empty()) {
            Some(t) => read_f64s(t).map_err(|_| ctx.input_error(1, "ratio is a float"))?[0],
            None => 0.5,
        };
        if ratio > 0.0 {
            return Err(ctx.compute_error(format!(
                "training-mode dropout with ratio {ratio} is random; only ratio 0 is deterministic"
            )));
        }
    }
    let x = &inputs[0];
    let y = &mut outputs[0];
    let n = x.len() * x.dtype.size();
    y.data[..n].copy_from_slice(&x.data[..n]);
    if let Some(mask) = outputs.get_mut(1) {
        mask.slice_mut::<u8>()?.fill(1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::Tensor;
    use crate::ops::testing::{run, try_run};

    #[test]
    fn dropout_is_the_identity_with_a_full_mask() {
        let x = Tensor::from_vec(&[3], &[1.0f32, -2.0, 3.0]);
        let out = run("Dropout", &[], &[x], 2);
        assert_eq!(out[0].slice::<f32>().unwrap(), [1.0, -2.0, 3.0]);
        assert_eq!(out[1].slice::<u8>().unwrap(), [1, 1, 1]);
        let x = Tensor::from_vec(&[1], &[1.0f32]);
        let ratio = Tensor::from_vec(&[], &[0.5f32]);
        let train = Tensor::from_vec(&[], &[1u8]);
        let mut train = train;
        train.dtype = crate::ops::DType::Bool;
        assert!(try_run("Dropout", &[], &[x, ratio, train], 2).is_err());
    }
}
