//! The int8 forms of GE's convolutions and matrix products, what an AMCT/ATC-quantized
//! model computes between its AscendQuant and AscendDequant: int8 x, int8 filter or
//! weights, an optional int32 bias, an int32 y. The float ops' files ([`super::conv`],
//! [`super::convs`], [`super::matmul`]) read their attributes and layouts as for float
//! data and hand the int8 arithmetic to this file.
//!
//! - Convolutions (Conv2D, DepthwiseConv2D, Conv3D):
//!   `y[c] = bias[c] + sum(x̃ * w[c])` over each window, where x̃ is x padded with
//!   `offset_x`. ops-nn's `conv2d_proto.h` says of `offset_x`: "offset in quantization
//!   algorithm and is used for filling in pad values", range `[-128, 127]`; the int8
//!   formula of ops-nn's Conv3DV2 README (`out = bias + scale * sum(filter ⋆ x)`)
//!   subtracts no offset from x. Padding with the data's quantization offset pads with
//!   the real value 0; the constant `offset_x * sum(w[c])` every window then carries is
//!   for the quantizer to fold into the int32 bias. rt2 computes it as the library's
//!   ConvInteger with `x_zero_point = offset_x` (which pads with the zero point and
//!   subtracts it) plus `offset_x * sum(w[c])` and the bias.
//! - Products (FullyConnection, MatMulV2, BatchMatMulV2):
//!   `y[i, j] = bias[j] + sum_k (x1[i, k] - offset_x) * x2[k, j]`; graphengine's
//!   `matrix_calculation_ops.h` calls `offset_x` "the negative offset added to the input
//!   x1 for int8 type" (FullyConnection: "to the input image"), range `[-128, 127]`.
//!   MatMul and BatchMatMul list no int8 type and stay float.
//!
//! `offset_w` is "Reserved" in the headers: a given one is refused. Sums wrap to int32
//! as the device's int32 accumulator does.

use super::attrs::{given, no_offset_w, no_offset_x};
use crate::ops::registry::library;
use crate::ops::{Compute, DType, InferCtx, OpError, Tensor, TensorMeta, TensorMut, TensorRef};

/// Whether input `x` is int8: the op's quantized form.
pub fn quantized(ctx: &InferCtx, x: usize) -> bool {
    ctx.inputs.get(x).is_some_and(|m| m.dtype == DType::I8)
}

/// `offset_x`, which must be within int8's range.
pub fn offset_x(ctx: &InferCtx) -> Result<i8, OpError> {
    let v = ctx.attr_int("offset_x", 0)?;
    i8::try_from(v)
        .map_err(|_| ctx.attr_error("offset_x", format!("is {v}, outside int8's [-128, 127]")))
}

/// Checks the operands of an op with input `x`, filter or weights `w`, optional `bias`
/// and `offset_w`: the int8 form (int8 `w`, int32 bias, offset_x in range, no offset_w)
/// when x is int8, else the float form (no int8 `w`, neutral offsets). Returns y's type:
/// int32 for the int8 form, x's for the float one.
pub fn check(
    ctx: &InferCtx,
    x: usize,
    w: usize,
    bias: Option<usize>,
    offset_w: Option<usize>,
) -> Result<DType, OpError> {
    let xt = ctx.inputs[x].dtype;
    let wt = ctx.inputs[w].dtype;
    if xt != DType::I8 {
        if wt == DType::I8 {
            return Err(ctx.input_error(
                w,
                format!("is int8 but x is {xt}: the int8 form takes int8 x and int8 weights"),
            ));
        }
        no_offset_x(ctx)?;
        if let Some(o) = offset_w {
            no_offset_w(ctx, o)?;
        }
        return Ok(xt);
    }
    if wt != DType::I8 {
        return Err(ctx.input_error(
            w,
            format!("is {wt} but x is int8: the int8 form takes int8 weights"),
        ));
    }
    if let Some(b) = bias.filter(|&b| given(ctx, b))
        && ctx.inputs[b].dtype != DType::I32
    {
        return Err(ctx.input_error(
            b,
            format!(
                "is {}; the int8 form takes an int32 bias",
                ctx.inputs[b].dtype
            ),
        ));
    }
    if let Some(o) = offset_w.filter(|&o| given(ctx, o)) {
        return Err(ctx.input_error(
            o,
            "offset_w is reserved in GE's header; rt2 refuses a given one",
        ));
    }
    offset_x(ctx)?;
    Ok(DType::I32)
}

/// The int8 convolution on channels-first operands (x `[N, C, D...]`, filter
/// `[Cout, C/groups, k...]`, optional int32 bias `[Cout]`) into a channels-first int32
/// y, with `onnx` carrying the library Conv's attributes (group, strides, dilations,
/// pads or auto_pad).
pub fn conv(
    onnx: &InferCtx,
    offset: i8,
    ins: &[TensorRef],
    outs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, w) = (ins[0], ins[1]);
    let zero = Tensor::from_vec(&[], &[offset]);
    let meta_of = |t: &TensorRef| TensorMeta {
        dtype: t.dtype,
        shape: Some(t.shape.iter().map(|&d| d as i64).collect()),
    };
    let metas = [meta_of(&x), meta_of(&w), meta_of(&zero.as_ref())];
    let conv_integer = InferCtx {
        op: "ConvInteger",
        inputs: &metas,
        values: &[],
        attrs: onnx.attrs,
        outputs: 1,
    };
    let spec = library()
        .get("ConvInteger")
        .ok_or_else(|| OpError::NoCompute {
            op: "ConvInteger".to_string(),
        })?;
    let Some(Compute::Into(f)) = spec.compute else {
        return Err(OpError::NoCompute {
            op: "ConvInteger".to_string(),
        });
    };
    f(&conv_integer, &[x, w, zero.as_ref()], &mut outs[..1])?;
    let cout = w.shape.first().copied().unwrap_or(0);
    let taps: usize = w.shape[1..].iter().product();
    let weights = w.slice::<i8>()?;
    let bias = match ins.get(2).filter(|b| !b.is_empty()) {
        Some(b) => Some(b.slice::<i32>()?),
        None => None,
    };
    if bias.is_some_and(|b| b.len() != cout) {
        return Err(onnx.input_error(2, format!("bias for {cout} output channels")));
    }
    // What each output channel adds: the pad offset over every tap, and the bias.
    let add: Vec<i32> = (0..cout)
        .map(|c| {
            let sum: i64 = weights[c * taps..][..taps]
                .iter()
                .map(|&v| i64::from(v))
                .sum();
            let b = bias.map_or(0, |b| i64::from(b[c]));
            (b + i64::from(offset) * sum) as i32
        })
        .collect();
    let y = outs[0].slice_mut::<i32>()?;
    let plane = y.len() / (x.shape[0] * cout).max(1);
    for (i, v) in y.iter_mut().enumerate() {
        *v = v.wrapping_add(add[(i / plane.max(1)) % cout.max(1)]);
    }
    Ok(())
}

/// One int8 product into `y` (`[m, n]`, every element written): a `[m, k]` (stored `[k,
/// m]` if `ta`) minus `offset`, times b `[k, n]` (stored `[n, k]` if `tb`), plus the
/// bias per column.
pub fn product(
    a: &[i8],
    b: &[i8],
    (m, k, n): (usize, usize, usize),
    (ta, tb): (bool, bool),
    offset: i8,
    bias: Option<&[i32]>,
    y: &mut [i32],
) {
    let at = |i: usize, p: usize| if ta { a[p * m + i] } else { a[i * k + p] };
    let bt = |p: usize, j: usize| if tb { b[j * k + p] } else { b[p * n + j] };
    let off = i32::from(offset);
    for i in 0..m {
        for j in 0..n {
            let mut acc = bias.map_or(0i64, |b| i64::from(b[j]));
            for p in 0..k {
                acc += i64::from((i32::from(at(i, p)) - off) * i32::from(bt(p, j)));
            }
            y[i * n + j] = acc as i32;
        }
    }
}

/// Optional int32 bias input `i` of `n` values, if given.
pub fn bias<'a>(
    ctx: &InferCtx,
    inputs: &'a [TensorRef],
    i: usize,
    n: usize,
) -> Result<Option<&'a [i32]>, OpError> {
    let Some(b) = inputs.get(i).filter(|b| !b.is_empty()) else {
        return Ok(None);
    };
    let v = b
        .slice::<i32>()
        .map_err(|_| ctx.input_error(i, format!("is {}, not int32", b.dtype)))?;
    if v.len() != n {
        return Err(ctx.input_error(i, format!("has {} values for {n} columns", v.len())));
    }
    Ok(Some(v))
}

#[cfg(test)]
mod tests;
