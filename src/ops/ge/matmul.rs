//! GE's matrix products, on the library's GEMM (float32 through its micro-kernels,
//! float16 and bfloat16 accumulated in float32, float64 in float64):
//!
//! - `FullyConnection` (graphengine `matrix_calculation_ops.h`, Caffe's InnerProduct): x,
//!   w, optional b, optional offset_w; `num_output` required, `transpose` false, `axis` 1,
//!   `offset_x` 0. x is flattened at `axis` (1 or 2, negative counts from the end) into
//!   [M, K]. `transpose` false: w is [num_output, K...] and y = x · wᵀ (Caffe's default);
//!   true: w is [K..., num_output] and y = x · w. y is [x0, num_output] for axis 1, with
//!   `[1, 1]` appended when x0 is 1 (GE's FullyConnection infer function does that), and
//!   [x0, x1, num_output] for axis 2.
//! - `MatMulV2` (same file): x1, x2, optional bias, optional offset_w; `transpose_x1`,
//!   `transpose_x2` false, `offset_x` 0.
//! - `BatchMatMul` (same file): x1, x2; `adj_x1`, `adj_x2` false. Batch dims broadcast.
//!   `BatchMatMulV2` adds MatMulV2's bias, offset_w and offset_x.
//!
//! FullyConnection, MatMulV2 and BatchMatMulV2 with int8 operands and an optional int32
//! bias compute an int32 y, `offset_x` subtracted from x (x1) ([`super::int8`]); the
//! float forms take neither int8 weights nor a non-zero `offset_x` or a given `offset_w`.

use super::attrs::given;
use super::int8;
use crate::dispatch;
use crate::ops::elementwise::broadcast;
use crate::ops::nn::agree;
use crate::ops::nn::gemm::{Mat, gemm};
use crate::ops::nn::scalar::{Scalar, read_f64s, widened};
use crate::ops::registry::library;
use crate::ops::{
    Attr, Attrs, DType, FUSED_BIAS_ATTR, InferCtx, OpError, Prepack, TensorMeta, TensorMut,
    TensorRef, Translation, UNKNOWN, meta,
};
use half::{bf16, f16};

/// Product of known dims, `UNKNOWN` if any is unknown.
fn product(dims: &[i64]) -> i64 {
    if dims.contains(&UNKNOWN) {
        UNKNOWN
    } else {
        dims.iter().product()
    }
}

/// FullyConnection's axis, normalized for x's rank.
fn fc_axis(ctx: &InferCtx, rank: usize) -> Result<usize, OpError> {
    let axis = ctx.attr_int("axis", 1)?;
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if !(a == 1 || a == 2) || a as usize > rank {
        return Err(ctx.attr_error(
            "axis",
            format!("{axis} is not 1 or 2 (negative from the end) for x of rank {rank}"),
        ));
    }
    Ok(a as usize)
}

/// (K, N) of w for `transpose`.
fn fc_weight(ctx: &InferCtx, w: &[i64], transpose: bool) -> Result<(i64, i64), OpError> {
    let Some((&first, rest)) = w.split_first().filter(|_| w.len() >= 2) else {
        return Err(ctx.input_error(1, format!("is {w:?}; w needs at least 2 dims")));
    };
    Ok(if transpose {
        (product(&w[..w.len() - 1]), w[w.len() - 1])
    } else {
        (product(rest), first)
    })
}

pub fn infer_fully_connection(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 4)?;
    let num_output = match ctx.attrs.get("num_output") {
        None => return Err(ctx.attr_error("num_output", "is required and missing")),
        Some(_) => ctx.attr_int("num_output", 0)?,
    };
    let transpose = ctx.attr_bool("transpose", false)?;
    let dtype = int8::check(ctx, 0, 1, Some(2), Some(3))?;
    let (Some(x), Some(w)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(dtype, None));
    };
    let axis = fc_axis(ctx, x.len())?;
    let (k, n) = fc_weight(ctx, w, transpose)?;
    if agree(product(&x[axis..]), k).is_none() {
        return Err(ctx.input_error(
            1,
            format!(
                "w {w:?} (transpose {transpose}) has K {k}; x {x:?} from axis {axis} has {}",
                product(&x[axis..])
            ),
        ));
    }
    if agree(n, num_output).is_none() {
        return Err(ctx.attr_error(
            "num_output",
            format!("is {num_output}, but w {w:?} (transpose {transpose}) has {n} outputs"),
        ));
    }
    if given(ctx, 2)
        && let Some(b) = &ctx.inputs[2].shape
        && agree(product(b), n).is_none()
    {
        return Err(ctx.input_error(2, format!("b {b:?} for {n} outputs")));
    }
    let mut out = x[..axis].to_vec();
    out.push(n);
    if axis == 1 && x[0] == 1 {
        out.extend([1, 1]);
    }
    Ok(meta(dtype, Some(out)))
}

/// FullyConnection. float16 and bfloat16 compute as the library's products do
/// ([`widened`]: operands widened to f32, f32 accumulation, one rounding), which also
/// takes a weight the prepack hook ([`prepack_half_weight`]) widened once at lowering.
pub fn fully_connection(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    match inputs[0].dtype {
        DType::F16 => return widened::<f16>(inputs, outputs, |i, o| fully_connection(ctx, i, o)),
        DType::Bf16 => {
            return widened::<bf16>(inputs, outputs, |i, o| fully_connection(ctx, i, o));
        }
        _ => {}
    }
    let (x, w) = (&inputs[0], &inputs[1]);
    let transpose = ctx.attr_bool("transpose", false)?;
    let axis = fc_axis(ctx, x.rank())?;
    let m: usize = x.shape[..axis].iter().product();
    let k: usize = x.shape[axis..].iter().product();
    let n = if transpose {
        w.shape.last().copied().unwrap_or(0)
    } else {
        w.shape.first().copied().unwrap_or(0)
    };
    if w.len() != k * n || outputs[0].len() != m * n {
        return Err(ctx.input_error(1, format!("w {:?} does not fit x {:?}", w.shape, x.shape)));
    }
    if x.dtype == DType::I8 {
        let bias = int8::bias(ctx, inputs, 2, n)?;
        let offset = int8::offset_x(ctx)?;
        let y = outputs[0].slice_mut::<i32>()?;
        let (xs, ws) = (x.slice::<i8>()?, w.slice::<i8>()?);
        int8::product(xs, ws, (m, k, n), (false, !transpose), offset, bias, y);
        return Ok(());
    }
    let bias = bias_values(ctx, inputs, 2, n)?;
    product_into(
        ctx,
        x,
        w,
        (m, k, n),
        (false, !transpose),
        bias.as_deref(),
        outputs,
    )
}

/// Optional input `i`'s `n` values (a bias of any float type), if given.
fn bias_values(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    i: usize,
    n: usize,
) -> Result<Option<Vec<f64>>, OpError> {
    let Some(b) = inputs.get(i).filter(|b| !b.is_empty()) else {
        return Ok(None);
    };
    let v = read_f64s(b)
        .map_err(|_| ctx.input_error(i, format!("is {}, expected a float type", b.dtype)))?;
    if v.len() != n {
        return Err(ctx.input_error(i, format!("has {} values for {n} columns", v.len())));
    }
    Ok(Some(v))
}

/// Output 0 `[m, n]` = a `[m, k]` (stored transposed if `ta`) times b `[k, n]` (stored
/// transposed if `tb`), plus `bias` per column.
fn product_into(
    ctx: &InferCtx,
    a: &TensorRef,
    b: &TensorRef,
    (m, k, n): (usize, usize, usize),
    (ta, tb): (bool, bool),
    bias: Option<&[f64]>,
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(a.dtype, T in [f32, f64, half::f16, half::bf16] => {
        let y = outputs[0].slice_mut::<T>()?;
        mat_product(a.slice::<T>()?, b.slice::<T>()?, (m, k, n), (ta, tb), bias, y);
        Ok(())
    }, other => Err(ctx.compute_error(format!("computes float types, not {other}"))))
}

/// One product into `y` ([m, n], fully written).
fn mat_product<T: Scalar>(
    a: &[T],
    b: &[T],
    (m, k, n): (usize, usize, usize),
    (ta, tb): (bool, bool),
    bias: Option<&[f64]>,
    y: &mut [T],
) {
    let am = if ta {
        Mat::row_major(a, k, m).t()
    } else {
        Mat::row_major(a, m, k)
    };
    let bm = if tb {
        Mat::row_major(b, n, k).t()
    } else {
        Mat::row_major(b, k, n)
    };
    let beta = match bias {
        Some(bias) if n > 0 => {
            for row in y.chunks_mut(n) {
                for (d, &v) in row.iter_mut().zip(bias) {
                    *d = T::from_f64(v);
                }
            }
            1.0
        }
        _ => 0.0,
    };
    gemm(1.0, am, bm, beta, y, n);
}

/// MatMulV2's or BatchMatMul's transpose flags.
fn flags(ctx: &InferCtx) -> Result<(bool, bool), OpError> {
    if ctx.op.starts_with("BatchMatMul") {
        Ok((
            ctx.attr_bool("adj_x1", false)?,
            ctx.attr_bool("adj_x2", false)?,
        ))
    } else {
        Ok((
            ctx.attr_bool("transpose_x1", false)?,
            ctx.attr_bool("transpose_x2", false)?,
        ))
    }
}

/// FullyConnection's, MatMulV2's and BatchMatMul's prepack hook where they run as
/// themselves: a constant float16/bfloat16 weight (input 1) widened to f32 once, at
/// lowering, as Conv's is ([`crate::ops::nn::conv::prepack_half_weight`]).
pub fn prepack_half_weight(ctx: &InferCtx) -> Option<Prepack> {
    let op = match ctx.op {
        "FullyConnection" => "FullyConnection",
        "MatMulV2" => "MatMulV2",
        "BatchMatMul" => "BatchMatMul",
        "BatchMatMulV2" => "BatchMatMulV2",
        _ => return None,
    };
    crate::ops::nn::conv::half_weight_prepack(ctx, op)
}

/// MatMulV2 and BatchMatMul as MatMul (no transposes; a float32 bias `[N]` over a
/// matrix x2 as MatMul's fused bias) or Gemm (2-D operands), so that a constant float32
/// right operand is packed once at lowering ([`crate::ops::Prepack`]); other cases run
/// as themselves.
pub fn translate_matmul(ctx: &InferCtx) -> Option<Translation> {
    let (ta, tb) = flags(ctx).ok()?;
    let bias = given(ctx, 2);
    if given(ctx, 3) || ctx.attr_int("offset_x", 0).ok()? != 0 || int8::quantized(ctx, 0) {
        return None;
    }
    if !ta && !tb && !bias {
        return Some(Translation {
            first: 0,
            op: "MatMul",
            attrs: Attrs::default(),
            inputs: 2,
        });
    }
    let rank = |i: usize| ctx.inputs[i].shape.as_ref().map(Vec::len);
    if !ta && !tb && row_bias(ctx) {
        let (attrs, inputs) = library_form(ctx);
        return Some(Translation {
            first: 0,
            op: "MatMul",
            attrs,
            inputs,
        });
    }
    (rank(0)? == 2 && rank(1)? == 2).then(|| gemm_translation(ta, tb, ctx.inputs.len()))
}

/// Whether the node's bias is one MatMul's fused bias takes: float32 `[N]` over a
/// float32 product by a matrix x2 `[K, N]` (a Linear layer's, as lowering's fusion
/// gives it, `lower::fuse`).
fn row_bias(ctx: &InferCtx) -> bool {
    let (Some(b), Some(bias)) = (&ctx.inputs[1].shape, ctx.inputs.get(2)) else {
        return false;
    };
    let f32s = ctx.inputs[..3].iter().all(|t| t.dtype == DType::F32);
    f32s && b.len() == 2 && bias.shape.as_deref() == Some(&[b[1]][..])
}

/// The library MatMul's attributes and input count for this node's product: with its
/// bias as the fused bias ([`crate::ops::FUSED_BIAS_ATTR`]) when the node gives one.
fn library_form(ctx: &InferCtx) -> (Attrs, usize) {
    if given(ctx, 2) {
        let attrs = [(FUSED_BIAS_ATTR.to_string(), Attr::Int(1))];
        (attrs.into_iter().collect(), 3)
    } else {
        (Attrs::new(), 2)
    }
}

/// FullyConnection of a 2-D x as Gemm.
pub fn translate_fully_connection(ctx: &InferCtx) -> Option<Translation> {
    let transpose = ctx.attr_bool("transpose", false).ok()?;
    let x = ctx.inputs[0].shape.as_ref()?;
    let w = ctx.inputs[1].shape.as_ref()?;
    let plain = x.len() == 2 && w.len() == 2 && fc_axis(ctx, 2).ok()? == 1;
    let float = !int8::quantized(ctx, 0);
    (plain && float && !given(ctx, 3) && ctx.attr_int("offset_x", 0).ok()? == 0)
        .then(|| gemm_translation(false, !transpose, ctx.inputs.len()))
}

/// Gemm of a (transposed if `ta`) by b (transposed if `tb`), plus a bias among the first
/// `inputs` inputs.
fn gemm_translation(ta: bool, tb: bool, inputs: usize) -> Translation {
    Translation {
        first: 0,
        op: "Gemm",
        attrs: [
            ("transA".to_string(), Attr::Int(i64::from(ta))),
            ("transB".to_string(), Attr::Int(i64::from(tb))),
        ]
        .into_iter()
        .collect(),
        inputs: inputs.min(3),
    }
}

/// (batch, rows, cols) of a matrix operand of at least 2 dims, transposed if `t`.
fn split_matrix(s: &[i64], t: bool) -> (&[i64], i64, i64) {
    let (batch, mat) = s.split_at(s.len() - 2);
    if t {
        (batch, mat[1], mat[0])
    } else {
        (batch, mat[0], mat[1])
    }
}

/// Whether a node is BatchMatMulV2 of a 1-D operand (`vector`) without transposes or
/// offset_w: what GE's ONNX MatMul plugin makes of ONNX's vector products, which are
/// ONNX's MatMul (the vector promoted to a matrix, its dim dropped from y), with the
/// bias of a Linear layer lowering's fusion gave it (MatMul's fused bias).
fn vector_product(ctx: &InferCtx, ta: bool, tb: bool, vector: bool) -> bool {
    ctx.op == "BatchMatMulV2" && vector && !ta && !tb && !given(ctx, 3) && !int8::quantized(ctx, 0)
}

/// The library's MatMul, which computes [`vector_product`]s.
fn library_matmul() -> Result<&'static crate::ops::OpSpec, OpError> {
    library().get("MatMul").ok_or_else(|| OpError::NoCompute {
        op: "MatMul".to_string(),
    })
}

/// MatMulV2 and BatchMatMul: batch dims broadcast, then [M, N].
pub fn infer_matmul(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let y_type = if ctx.op == "BatchMatMul" {
        ctx.arity(2, 2)?;
        ctx.inputs[0].dtype
    } else {
        ctx.arity(2, 4)?;
        int8::check(ctx, 0, 1, Some(2), Some(3))?
    };
    let (ta, tb) = flags(ctx)?;
    let vector = |i: usize| ctx.inputs[i].shape.as_ref().is_some_and(|s| s.len() == 1);
    if vector_product(ctx, ta, tb, vector(0) || vector(1)) {
        let (attrs, count) = library_form(ctx);
        return library_matmul()?.infer_shapes(&InferCtx {
            op: "MatMul",
            inputs: &ctx.inputs[..count],
            values: &ctx.values[..count.min(ctx.values.len())],
            attrs: &attrs,
            outputs: ctx.outputs,
        });
    }
    let dtype = ctx.inputs[0].dtype;
    if ctx.inputs[1].dtype != dtype {
        return Err(ctx.input_error(1, format!("is {}, x1 is {dtype}", ctx.inputs[1].dtype)));
    }
    let (Some(a), Some(b)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(y_type, None));
    };
    for (i, s) in [(0, a), (1, b)] {
        if s.len() < 2 {
            return Err(ctx.input_error(i, format!("is {s:?}; a matrix operand is at least 2-D")));
        }
    }
    let (ab, m, k) = split_matrix(a, ta);
    let (bb, k2, n) = split_matrix(b, tb);
    if agree(k, k2).is_none() {
        return Err(ctx.input_error(
            1,
            format!("inner dims differ: {a:?} x {b:?} (transposes {ta}, {tb})"),
        ));
    }
    let mut out = broadcast(&[Some(ab), Some(bb)])
        .map_err(|_| ctx.input_error(1, format!("batch dims do not broadcast: {a:?} x {b:?}")))?
        .unwrap_or_default();
    out.extend([m, n]);
    if given(ctx, 2)
        && let Some(bias) = &ctx.inputs[2].shape
        && agree(product(bias), n).is_none()
    {
        return Err(ctx.input_error(2, format!("bias {bias:?} for {n} columns")));
    }
    Ok(meta(y_type, Some(out)))
}

/// Element offset of output batch `index` (row-major over `out`) into an operand whose
/// batch dims `dims` broadcast to `out`.
pub(super) fn batch_offset(mut index: usize, out: &[usize], dims: &[usize]) -> usize {
    let lead = out.len() - dims.len();
    let (mut offset, mut stride) = (0, 1);
    for d in (0..out.len()).rev() {
        let i = index % out[d];
        index /= out[d];
        if d >= lead {
            let size = dims[d - lead];
            if size != 1 {
                offset += i * stride;
            }
            stride *= size;
        }
    }
    offset
}

/// MatMulV2 and BatchMatMul where lowering did not launch them as MatMul or Gemm; half
/// types as [`fully_connection`]'s.
pub fn matmul(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    match inputs[0].dtype {
        DType::F16 => return widened::<f16>(inputs, outputs, |i, o| matmul(ctx, i, o)),
        DType::Bf16 => return widened::<bf16>(inputs, outputs, |i, o| matmul(ctx, i, o)),
        _ => {}
    }
    let (ta, tb) = flags(ctx)?;
    let (a, b) = (&inputs[0], &inputs[1]);
    if vector_product(ctx, ta, tb, a.rank() == 1 || b.rank() == 1) {
        let (attrs, count) = library_form(ctx);
        let onnx = super::attrs::with_attrs(ctx, &attrs);
        return match library_matmul()?.compute {
            Some(crate::ops::Compute::Into(f)) => f(&onnx, &inputs[..count], outputs),
            _ => Err(OpError::NoCompute {
                op: "MatMul".to_string(),
            }),
        };
    }
    if a.rank() < 2 || b.rank() < 2 || outputs[0].rank() < 2 {
        return Err(ctx.input_error(0, "matrix operands are at least 2-D"));
    }
    let y_shape = outputs[0].shape.to_vec();
    let (ob, mn) = y_shape.split_at(y_shape.len() - 2);
    let (m, n) = (mn[0], mn[1]);
    let k = if ta {
        a.shape[a.rank() - 2]
    } else {
        a.shape[a.rank() - 1]
    };
    let (abatch, bbatch) = (&a.shape[..a.rank() - 2], &b.shape[..b.rank() - 2]);
    let batches: usize = ob.iter().product();
    if a.dtype == DType::I8 {
        let bias = int8::bias(ctx, inputs, 2, n)?;
        let offset = int8::offset_x(ctx)?;
        let (av, bv) = (a.slice::<i8>()?, b.slice::<i8>()?);
        let y = outputs[0].slice_mut::<i32>()?;
        for (i, yb) in y.chunks_mut((m * n).max(1)).enumerate().take(batches) {
            let ao = batch_offset(i, ob, abatch) * m * k;
            let bo = batch_offset(i, ob, bbatch) * k * n;
            let (ab, bb) = (&av[ao..ao + m * k], &bv[bo..bo + k * n]);
            int8::product(ab, bb, (m, k, n), (ta, tb), offset, bias, yb);
        }
        return Ok(());
    }
    let bias = bias_values(ctx, inputs, 2, n)?;
    dispatch!(a.dtype, T in [f32, f64, half::f16, half::bf16] => {
        let (av, bv) = (a.slice::<T>()?, b.slice::<T>()?);
        let y = outputs[0].slice_mut::<T>()?;
        for (i, yb) in y.chunks_mut((m * n).max(1)).enumerate().take(batches) {
            let ao = batch_offset(i, ob, abatch) * m * k;
            let bo = batch_offset(i, ob, bbatch) * k * n;
            mat_product(&av[ao..ao + m * k], &bv[bo..bo + k * n], (m, k, n), (ta, tb),
                bias.as_deref(), yb);
        }
        Ok(())
    }, other => Err(ctx.compute_error(format!("computes float types, not {other}"))))
}
