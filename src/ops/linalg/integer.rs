//! Quantized products: MatMulInteger and ConvInteger (8-bit operands minus their zero
//! points, int32 results). Shape and dtype inference and CPU compute.
//!
//! The products run through dgemm: an 8-bit operand minus its zero point is within
//! ±255, so each product is below 2^16 and f64 sums them exactly for any K below 2^37.
//! The exact sum is then wrapped to int32 as integer arithmetic would.

use super::operands::{absent, broadcast_offsets};
use super::real::{MatLayout, gemm};
use crate::ops::DType;
use crate::ops::elementwise::broadcast;
use crate::ops::tensor::{TensorMut, TensorRef};
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, UNKNOWN, meta};

/// Registers the quantized products.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new("MatMulInteger", infer_matmul_integer).computes(compute_matmul_integer));
    reg.add(OpSpec::new("ConvInteger", infer_conv_integer).computes(compute_conv_integer));
}

fn check_8bit(ctx: &InferCtx, i: usize) -> Result<(), OpError> {
    match ctx.inputs[i].dtype {
        DType::I8 | DType::U8 => Ok(()),
        d => Err(ctx.input_error(i, format!("is {d}; expected int8 or uint8"))),
    }
}

/// An 8-bit tensor's values as f64.
fn values(ctx: &InferCtx, t: &TensorRef, i: usize) -> Result<Vec<f64>, OpError> {
    match t.dtype {
        DType::I8 => Ok(t.slice::<i8>()?.iter().map(|&v| v as f64).collect()),
        DType::U8 => Ok(t.slice::<u8>()?.iter().map(|&v| v as f64).collect()),
        d => Err(ctx.input_error(i, format!("is {d}; expected int8 or uint8"))),
    }
}

/// An optional zero point: absent is 0.
fn zero_point(ctx: &InferCtx, inputs: &[TensorRef], i: usize) -> Result<Vec<f64>, OpError> {
    match inputs.get(i) {
        Some(t) if !absent(ctx.inputs.get(i)) => values(ctx, t, i),
        _ => Ok(vec![0.0]),
    }
}

/// NumPy matmul's output shape: 1-D operands promoted and the added dim dropped, batch
/// dims broadcast.
fn infer_matmul_integer(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 4)?;
    check_8bit(ctx, 0)?;
    check_8bit(ctx, 1)?;
    let (Some(a), Some(b)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(DType::I32, None));
    };
    if a.is_empty() || b.is_empty() {
        return Err(ctx.input_error(0, "operands must be at least 1-D"));
    }
    let a2 = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.clone()
    };
    let b2 = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.clone()
    };
    let (k, k2) = (a2[a2.len() - 1], b2[b2.len() - 2]);
    if k >= 0 && k2 >= 0 && k != k2 {
        return Err(ctx.input_error(1, format!("inner dims differ: {a:?} x {b:?}")));
    }
    let mut out = broadcast(&[Some(&a2[..a2.len() - 2]), Some(&b2[..b2.len() - 2])])
        .map_err(|_| ctx.input_error(1, format!("batch dims do not broadcast: {a:?} x {b:?}")))?
        .unwrap_or_default();
    if a.len() > 1 {
        out.push(a2[a2.len() - 2]);
    }
    if b.len() > 1 {
        out.push(b2[b2.len() - 1]);
    }
    Ok(meta(DType::I32, Some(out)))
}

/// Subtracts a zero point that is a scalar or one value per `per` group of `stride`
/// elements (per row of A: stride K; per column of B: the index mod N).
fn shift(v: &mut [f64], zp: &[f64], per_row: Option<usize>, per_col: Option<usize>) {
    if zp.len() == 1 {
        v.iter_mut().for_each(|x| *x -= zp[0]);
    } else if let Some(k) = per_row {
        for (r, row) in v.chunks_mut(k.max(1)).enumerate() {
            row.iter_mut().for_each(|x| *x -= zp[r % zp.len()]);
        }
    } else if let Some(n) = per_col {
        for (i, x) in v.iter_mut().enumerate() {
            *x -= zp[(i % n.max(1)) % zp.len()];
        }
    }
}

fn compute_matmul_integer(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (at, bt) = (&inputs[0], &inputs[1]);
    if at.rank() == 0 || bt.rank() == 0 {
        return Err(ctx.input_error(0, "operands must be at least 1-D"));
    }
    let a_dims: Vec<usize> = if at.rank() == 1 {
        vec![1, at.shape[0]]
    } else {
        at.shape.to_vec()
    };
    let b_dims: Vec<usize> = if bt.rank() == 1 {
        vec![bt.shape[0], 1]
    } else {
        bt.shape.to_vec()
    };
    let (m, k) = (a_dims[a_dims.len() - 2], a_dims[a_dims.len() - 1]);
    let n = b_dims[b_dims.len() - 1];
    if b_dims[b_dims.len() - 2] != k {
        return Err(ctx.input_error(
            1,
            format!("inner dims differ: {:?} x {:?}", at.shape, bt.shape),
        ));
    }
    let (za, zb) = (zero_point(ctx, inputs, 2)?, zero_point(ctx, inputs, 3)?);
    if za.len() != 1 && za.len() != m {
        return Err(ctx.input_error(2, format!("{} zero points for {m} rows", za.len())));
    }
    if zb.len() != 1 && zb.len() != n {
        return Err(ctx.input_error(3, format!("{} zero points for {n} columns", zb.len())));
    }
    let mut a = values(ctx, at, 0)?;
    let mut b = values(ctx, bt, 1)?;
    shift(&mut a, &za, Some(k), None);
    shift(&mut b, &zb, None, Some(n));
    // Batch dims broadcast: the output's batch dims, and each operand's matrix for each.
    let (ab, bb) = (&a_dims[..a_dims.len() - 2], &b_dims[..b_dims.len() - 2]);
    let rank = ab.len().max(bb.len());
    let pad = |s: &[usize]| -> Vec<usize> {
        std::iter::repeat_n(1, rank - s.len())
            .chain(s.iter().copied())
            .collect()
    };
    let (pa, pb) = (pad(ab), pad(bb));
    let batch: Vec<usize> = pa.iter().zip(&pb).map(|(&x, &y)| x.max(y)).collect();
    let bad = || {
        ctx.input_error(
            1,
            format!(
                "batch dims do not broadcast: {:?} x {:?}",
                at.shape, bt.shape
            ),
        )
    };
    let (oa, ob) = (
        broadcast_offsets(&pa, &batch).ok_or_else(bad)?,
        broadcast_offsets(&pb, &batch).ok_or_else(bad)?,
    );
    let mut c = vec![0.0f64; oa.len() * m * n];
    for (i, (&ia, &ib)) in oa.iter().zip(&ob).enumerate() {
        gemm(
            1.0,
            &a,
            MatLayout::dense(m, k, ia * m * k),
            &b,
            MatLayout::dense(k, n, ib * k * n),
            0.0,
            &mut c,
            MatLayout::dense(m, n, i * m * n),
        );
    }
    let y = outputs[0].slice_mut::<i32>()?;
    if y.len() != c.len() {
        return Err(ctx.compute_error(format!("{} results for {} outputs", c.len(), y.len())));
    }
    for (o, &v) in y.iter_mut().zip(&c) {
        *o = v as i64 as i32;
    }
    Ok(())
}

/// ConvInteger's geometry: kernel, strides, dilations and begin/end pads per spatial
/// dim, for input spatial dims `input` (unknown -1 allowed).
struct Conv {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    pads: Vec<i64>,
    out: Vec<i64>,
}

fn conv_geometry(ctx: &InferCtx, input: &[i64], kernel: &[i64]) -> Result<Conv, OpError> {
    let n = kernel.len();
    let strides = ctx.attr_ints_or("strides", 1, n)?;
    let dilations = ctx.attr_ints_or("dilations", 1, n)?;
    let mut pads = ctx.attr_ints_or("pads", 0, 2 * n)?;
    if strides.len() != n || dilations.len() != n || pads.len() != 2 * n || input.len() != n {
        return Err(ctx.attr_error(
            "strides/dilations/pads",
            format!("do not fit {n} spatial dims"),
        ));
    }
    if strides.iter().chain(&dilations).any(|&v| v < 1) || pads.iter().any(|&p| p < 0) {
        return Err(ctx.attr_error(
            "strides/dilations/pads",
            "strides and dilations are positive, pads not negative",
        ));
    }
    let auto_pad = ctx.attr_str("auto_pad", "NOTSET")?;
    let mut out = Vec::with_capacity(n);
    let overflow = |d: usize| {
        ctx.attr_error(
            "kernel_shape/strides/dilations/pads",
            format!("spatial dim {d}: the window's geometry overflows"),
        )
    };
    for d in 0..n {
        if kernel[d] < 1 {
            return Err(ctx.attr_error(
                "kernel_shape",
                format!("spatial dim {d}: kernel {} is not positive", kernel[d]),
            ));
        }
        let reach = (kernel[d] - 1)
            .checked_mul(dilations[d])
            .and_then(|r| r.checked_add(1))
            .ok_or_else(|| overflow(d))?;
        if input[d] < 0 {
            out.push(UNKNOWN);
            continue;
        }
        match auto_pad {
            "SAME_UPPER" | "SAME_LOWER" => {
                // ceil(input / stride), then the padding that makes the windows fit.
                let o = input[d].div_euclid(strides[d])
                    + i64::from(input[d].rem_euclid(strides[d]) != 0);
                let total = (o - 1)
                    .checked_mul(strides[d])
                    .and_then(|t| t.checked_add(reach))
                    .ok_or_else(|| overflow(d))?
                    .saturating_sub(input[d])
                    .max(0);
                let small = total / 2;
                let (begin, end) = if auto_pad == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                pads[d] = begin;
                pads[d + n] = end;
                out.push(o);
            }
            "VALID" | "NOTSET" => {
                if auto_pad == "VALID" {
                    pads[d] = 0;
                    pads[d + n] = 0;
                }
                let padded = input[d]
                    .checked_add(pads[d])
                    .and_then(|p| p.checked_add(pads[d + n]))
                    .ok_or_else(|| overflow(d))?;
                let span = padded - reach;
                if span < 0 && input[d] > 0 {
                    return Err(ctx.attr_error(
                        "kernel_shape/dilations",
                        format!(
                            "spatial dim {d}: the window ({reach} wide) is wider than the \
                             padded input ({padded})"
                        ),
                    ));
                }
                out.push(if span < 0 { 0 } else { span / strides[d] + 1 });
            }
            other => {
                return Err(ctx.attr_error("auto_pad", format!("{other:?} is not a padding mode")));
            }
        }
    }
    Ok(Conv {
        kernel: kernel.to_vec(),
        strides,
        dilations,
        pads,
        out,
    })
}

/// ConvInteger: X [N, C, D...], W [M, C/group, K...] -> int32 [N, M, D'...].
fn infer_conv_integer(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 4)?;
    check_8bit(ctx, 0)?;
    check_8bit(ctx, 1)?;
    let (Some(x), Some(w)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(DType::I32, None));
    };
    if x.len() < 3 || w.len() != x.len() {
        return Err(ctx.input_error(1, format!("weights {w:?} do not fit input {x:?}")));
    }
    let kernel = ctx
        .attr_ints("kernel_shape")?
        .map_or_else(|| w[2..].to_vec(), <[i64]>::to_vec);
    let g = conv_geometry(ctx, &x[2..], &kernel)?;
    let mut out = vec![x[0], w[0]];
    out.extend(g.out);
    Ok(meta(DType::I32, Some(out)))
}

/// im2col per batch item and group, then one dgemm of the weights by the columns.
fn compute_conv_integer(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (xt, wt) = (&inputs[0], &inputs[1]);
    if xt.rank() < 3 || wt.rank() != xt.rank() {
        return Err(ctx.input_error(
            1,
            format!("weights {:?} do not fit input {:?}", wt.shape, xt.shape),
        ));
    }
    let i64s = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let kernel = ctx
        .attr_ints("kernel_shape")?
        .map_or_else(|| i64s(&wt.shape[2..]), <[i64]>::to_vec);
    let g = conv_geometry(ctx, &i64s(&xt.shape[2..]), &kernel)?;
    let group = usize::try_from(ctx.attr_int("group", 1)?).unwrap_or(0);
    let (batch, channels, m) = (xt.shape[0], xt.shape[1], wt.shape[0]);
    let per_group = wt.shape[1];
    if group == 0
        || channels != per_group * group
        || !m.is_multiple_of(group)
        || kernel != i64s(&wt.shape[2..])
    {
        return Err(ctx.input_error(
            1,
            format!(
                "weights {:?} do not fit input {:?} in {group} groups",
                wt.shape, xt.shape
            ),
        ));
    }
    let (zx, zw) = (zero_point(ctx, inputs, 2)?, zero_point(ctx, inputs, 3)?);
    if zx.len() != 1 || (zw.len() != 1 && zw.len() != m) {
        return Err(ctx.input_error(
            3,
            "zero points are a scalar for X and a scalar or one per output channel for W",
        ));
    }
    let mut x = values(ctx, xt, 0)?;
    x.iter_mut().for_each(|v| *v -= zx[0]);
    let mut w = values(ctx, wt, 1)?;
    let taps: usize = wt.shape[2..].iter().product();
    let rows = per_group * taps;
    shift(&mut w, &zw, Some(rows), None);
    let n = g.kernel.len();
    let u = |v: &[i64]| v.iter().map(|&x| x as usize).collect::<Vec<_>>();
    let (kernel, strides, dilations, out_sp) =
        (u(&g.kernel), u(&g.strides), u(&g.dilations), u(&g.out));
    let pads = u(&g.pads);
    let in_sp = &xt.shape[2..];
    let (plane_in, plane_out): (usize, usize) = (in_sp.iter().product(), out_sp.iter().product());
    // The column matrix [C/group * taps, output positions]; padding contributes 0 (the
    // zero point, already subtracted).
    let mut cols = vec![0.0f64; rows * plane_out];
    let mut y = vec![0.0f64; batch * m * plane_out];
    let (mut ki, mut oi) = (vec![0usize; n], vec![0usize; n]);
    let mg = m / group;
    for b in 0..batch {
        for gi in 0..group {
            for c in 0..per_group {
                let src = &x[(b * channels + gi * per_group + c) * plane_in..][..plane_in];
                for t in 0..taps {
                    unravel(t, &kernel, &mut ki);
                    let row = &mut cols[(c * taps + t) * plane_out..][..plane_out];
                    for (o, slot) in row.iter_mut().enumerate() {
                        unravel(o, &out_sp, &mut oi);
                        let mut at = Some(0usize);
                        for d in 0..n {
                            let p =
                                (oi[d] * strides[d] + ki[d] * dilations[d]).checked_sub(pads[d]);
                            at = match (at, p) {
                                (Some(a), Some(p)) if p < in_sp[d] => Some(a * in_sp[d] + p),
                                _ => None,
                            };
                        }
                        *slot = at.map_or(0.0, |a| src[a]);
                    }
                }
            }
            gemm(
                1.0,
                &w,
                MatLayout::dense(mg, rows, gi * mg * rows),
                &cols,
                MatLayout::dense(rows, plane_out, 0),
                0.0,
                &mut y,
                MatLayout::dense(mg, plane_out, (b * m + gi * mg) * plane_out),
            );
        }
    }
    let out = outputs[0].slice_mut::<i32>()?;
    if out.len() != y.len() {
        return Err(ctx.compute_error(format!("{} results for {} outputs", y.len(), out.len())));
    }
    for (o, &v) in out.iter_mut().zip(&y) {
        *o = v as i64 as i32;
    }
    Ok(())
}

/// The row-major multi-index of `flat` in `dims`.
fn unravel(mut flat: usize, dims: &[usize], out: &mut [usize]) {
    for d in (0..dims.len()).rev() {
        out[d] = flat % dims[d].max(1);
        flat /= dims[d].max(1);
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run1;

    #[test]
    fn matmul_integer_subtracts_zero_points() {
        // (A - 1) x (B - [0, 2]) with A = [[2, 3]], B = [[1, 4], [2, 5]] (uint8):
        // [1, 2] x [[1, 2], [2, 3]] = [5, 8].
        let a = Tensor::from_vec(&[1, 2], &[2u8, 3]);
        let b = Tensor::from_vec(&[2, 2], &[1u8, 4, 2, 5]);
        let za = Tensor::from_vec(&[], &[1u8]);
        let zb = Tensor::from_vec(&[2], &[0u8, 2]);
        let y = run1("MatMulInteger", &[], &[a.clone(), b.clone(), za, zb]);
        assert_eq!(y.shape, [1, 2]);
        assert_eq!(y.slice::<i32>().unwrap(), &[5, 8]);
        // int8, no zero points, 1-D A.
        let a = Tensor::from_vec(&[2], &[-128i8, 127]);
        let b = Tensor::from_vec(&[2, 1], &[-128i8, -128]);
        let y = run1("MatMulInteger", &[], &[a, b]);
        assert_eq!(y.slice::<i32>().unwrap(), &[128]);
    }

    #[test]
    fn conv_integer_pads_with_the_zero_point() {
        // 2x2 input of 3s with zero point 1 (values 2), 1x1 padding, a 2x2 kernel of 1s:
        // a corner window sees one value, an edge window two, the centre four.
        let x = Tensor::from_vec(&[1, 1, 2, 2], &[3u8; 4]);
        let w = Tensor::from_vec(&[1, 1, 2, 2], &[1u8; 4]);
        let zx = Tensor::from_vec(&[], &[1u8]);
        let y = run1(
            "ConvInteger",
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
            &[x, w, zx],
        );
        assert_eq!(y.shape, [1, 1, 3, 3]);
        assert_eq!(y.slice::<i32>().unwrap(), &[2, 4, 2, 4, 8, 4, 2, 4, 2]);
    }
}
