//! NHWC operands around the NCHW kernels: an op whose `data_format` is NHWC permutes its
//! data input to NCHW, runs the shared kernel into an NCHW scratch output and permutes that
//! back into its NHWC output. Two extra passes over the activations, each one strided copy
//! ([`copy_view`]); next to a convolution's or pool's arithmetic they are small.

use crate::ops::shape::args::moved;
use crate::ops::shape::movement::{View, copy_view};
use crate::ops::{InferCtx, OpError, Tensor, TensorMut, TensorRef};

/// NHWC dims to NCHW: output dim `k` is input dim `TO_NCHW[k]`.
pub const TO_NCHW: [usize; 4] = [0, 3, 1, 2];
/// NCHW dims to NHWC.
pub const TO_NHWC: [usize; 4] = [0, 2, 3, 1];
/// A TF-born filter, HWCN `[kh, kw, Cin/g, Cout]`, to NCHW `[Cout, Cin/g, kh, kw]`.
pub const HWCN_TO_NCHW: [usize; 4] = [3, 2, 0, 1];

/// `t` with its dims permuted (output dim `k` is `t`'s dim `perm[k]`), in new memory.
pub fn permuted(ctx: &InferCtx, t: &TensorRef, perm: &[usize]) -> Result<Tensor, OpError> {
    let shape: Vec<usize> = perm.iter().map(|&p| t.shape[p]).collect();
    let mut out = Tensor::zeroed(t.dtype, &shape);
    let view = View::contiguous(t.shape).permute(perm);
    moved(
        ctx,
        copy_view(t.dtype.size(), t.data, &view, out.data.as_bytes_mut()),
    )?;
    Ok(out)
}

/// Runs `kernel`, which computes output 0 in NCHW from inputs whose input 0 is NCHW, for
/// an op whose input 0 and output 0 are NCHW (`nchw`) or NHWC.
pub fn run_nchw(
    ctx: &InferCtx,
    nchw: bool,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
    kernel: impl FnOnce(&[TensorRef], &mut [TensorMut]) -> Result<(), OpError>,
) -> Result<(), OpError> {
    if nchw {
        return kernel(inputs, &mut outputs[..1]);
    }
    let x = permuted(ctx, &inputs[0], &TO_NCHW)?;
    let y = &mut outputs[0];
    if y.rank() != 4 {
        return Err(ctx.compute_error(format!("output {:?} is not 4-D", y.shape)));
    }
    let shape: Vec<usize> = TO_NCHW.iter().map(|&p| y.shape[p]).collect();
    let mut scratch = Tensor::zeroed(y.dtype, &shape);
    let mut operands: Vec<TensorRef> = inputs.to_vec();
    operands[0] = x.as_ref();
    kernel(&operands, &mut [scratch.as_mut()])?;
    let view = View::contiguous(&scratch.shape).permute(&TO_NHWC);
    moved(
        ctx,
        copy_view(y.dtype.size(), scratch.data.as_bytes(), &view, y.data),
    )
}
