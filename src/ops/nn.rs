//! Neural-network ops: MatMul, Gemm, Conv, the pools, Softmax, the normalizations,
//! Resize. Shape and dtype inference lives here, with ONNX's attribute names and
//! defaults (the importer applies the opset's defaults; missing attributes here take
//! ONNX's current ones); the CPU compute lives in the submodules, one per kind of work.

use crate::ops::DType;
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, Prepack, TensorMeta, UNKNOWN, meta};

pub(crate) mod conv;
mod conv_blocked;
mod conv_direct;
mod conv_dw;
mod conv_dw_rows;
pub(crate) mod conv_packed;
mod conv_rows;
pub(crate) mod conv_transpose;
mod conv_winograd;
mod conv_winograd_1d;
mod dropout;
pub(crate) mod epilogue;
pub(crate) mod gemm;
pub(crate) mod norm;
pub(crate) mod pool;
mod pool_f32;
mod resize;
pub(crate) mod scalar;
pub(crate) mod scratch;
pub(crate) mod softmax;
mod window;

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    reg.add(
        OpSpec::new("MatMul", infer_matmul)
            .computes(gemm::matmul)
            .prepacks(gemm::prepack_matmul),
    );
    reg.add(OpSpec::new(gemm::MATMUL_PACKED, infer_matmul_packed).computes(gemm::matmul_packed));
    reg.add(
        OpSpec::new("Gemm", infer_gemm)
            .computes(gemm::gemm_op)
            .prepacks(gemm::prepack_gemm),
    );
    reg.add(OpSpec::new(gemm::GEMM_PACKED, infer_gemm_packed).computes(gemm::gemm_packed));
    reg.add(
        OpSpec::new("Conv", infer_conv)
            .computes(conv::conv)
            .prepacks(prepack_conv),
    );
    reg.add(
        OpSpec::new(conv_packed::CONV_WINOGRAD, infer_conv_winograd)
            .computes(conv_packed::conv_winograd),
    );
    reg.add(OpSpec::new(conv_packed::CONV_GEMM, infer_conv_gemm).computes(conv_packed::conv_gemm));
    reg.add(
        OpSpec::new(conv_winograd_1d::CONV_WINOGRAD_1D, infer_conv_winograd_1d)
            .computes(conv_winograd_1d::conv_winograd_1d),
    );
    reg.add(
        OpSpec::new("ConvTranspose", infer_conv_transpose)
            .computes(conv_transpose::conv_transpose)
            .prepacks(conv::prepack_half_weight),
    );
    reg.add(
        OpSpec::new("Resize", infer_resize)
            .reading(&[1, 2, 3])
            .computes(resize::resize),
    );
    reg.add(
        OpSpec::new("Upsample", infer_resize)
            .reading(&[1])
            .computes(resize::resize),
    );
    // MaxPool is one spec for ONNX's form and GE's TF-born one (`ksize`): `ge` registers it.
    reg.add(OpSpec::new("AveragePool", infer_pool).computes(pool::average_pool));
    reg.add(OpSpec::new("LpPool", infer_pool).computes(pool::average_pool));
    reg.add(OpSpec::new("GlobalAveragePool", infer_global_pool).computes(pool::global_pool));
    reg.add(OpSpec::new("GlobalMaxPool", infer_global_pool).computes(pool::global_pool));
    reg.add(OpSpec::new("Softmax", infer_first_input).computes(softmax::softmax));
    reg.add(OpSpec::new("LogSoftmax", infer_first_input).computes(softmax::softmax));
    reg.add(OpSpec::new("LRN", infer_first_input).computes(norm::lrn));
    reg.add(OpSpec::new("InstanceNormalization", infer_first_input).computes(norm::instance_norm));
    reg.add(OpSpec::new("Dropout", infer_dropout).computes(dropout::dropout));
    reg.add(OpSpec::new("BatchNormalization", infer_batch_norm).computes(norm::batch_norm));
    reg.add(OpSpec::new("LayerNormalization", infer_layer_norm).computes(norm::layer_norm));
}

/// Outputs that have input 0's shape and dtype (Dropout's optional mask aside).
fn infer_first_input(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    if ctx.inputs.is_empty() {
        return Err(OpError::Arity {
            op: ctx.op.to_string(),
            expected: "at least 1".into(),
            got: 0,
        });
    }
    Ok(vec![ctx.inputs[0].clone()])
}

/// Two dims that must agree; an unknown one takes the other.
pub(crate) fn agree(a: i64, b: i64) -> Option<i64> {
    match (a, b) {
        (a, b) if a == b => Some(a),
        (UNKNOWN, b) => Some(b),
        (a, UNKNOWN) => Some(a),
        _ => None,
    }
}

/// NumPy matmul: 1-D operands are promoted and the added dim removed; batch dims
/// broadcast.
fn infer_matmul(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    // A bias only where lowering's fusion gave one (`gemm::FUSED_BIAS_ATTR`).
    let fused = ctx.attrs.contains_key(gemm::FUSED_BIAS_ATTR);
    ctx.arity(2, if fused { 3 } else { 2 })?;
    let dtype = ctx.inputs[0].dtype;
    if ctx.inputs[1].dtype != dtype {
        return Err(ctx.input_error(1, format!("is {}, input 0 is {dtype}", ctx.inputs[1].dtype)));
    }
    if let Some(bias) = ctx.inputs.get(2) {
        if bias.dtype != dtype {
            return Err(ctx.input_error(2, format!("is {}, input 0 is {dtype}", bias.dtype)));
        }
        // A vector B is one column.
        let n =
            (ctx.inputs[1].shape.as_ref()).map(|b| if b.len() == 1 { 1 } else { b[b.len() - 1] });
        if let (Some(s), Some(n)) = (&bias.shape, n)
            && (s.len() != 1 || agree(s[0], n).is_none())
        {
            return Err(ctx.input_error(2, format!("is {s:?}; a bias of width {n} is [{n}]")));
        }
    }
    let (Some(a), Some(b)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(dtype, None));
    };
    if a.is_empty() || b.is_empty() {
        return Err(ctx.input_error(
            if a.is_empty() { 0 } else { 1 },
            "is a scalar; MatMul needs at least 1-D",
        ));
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
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if agree(k, k2).is_none() {
        return Err(ctx.input_error(1, format!("inner dims differ: {a:?} x {b:?}")));
    }
    let batch =
        crate::ops::elementwise::broadcast(&[Some(&a2[..a2.len() - 2]), Some(&b2[..b2.len() - 2])])
            .map_err(|_| ctx.input_error(1, format!("batch dims do not broadcast: {a:?} x {b:?}")))?
            .unwrap_or_default();
    let mut out = batch;
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(meta(dtype, Some(out)))
}

/// MatMulPacked (rt2's own, made by lowering; see `gemm::MATMUL_PACKED`): A [..., K] (f32)
/// times a weight packed as [panels, K, PACK_WIDTH] whose logical width is attribute `n`,
/// plus an optional float32 bias `[n]` (a float32 A's); the output is A's shape with the
/// last dim `n`.
fn infer_matmul_packed(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    use crate::ops::linalg::sgemm::PACK_WIDTH;
    ctx.arity(2, 3)?;
    // A is float32, or float16/bfloat16 widened at launch; the packed B is float32.
    let dtype = ctx.inputs[0].dtype;
    if !matches!(dtype, DType::F32 | DType::F16 | DType::Bf16) {
        return Err(ctx.input_error(
            0,
            format!("is {dtype}; MatMulPacked takes float32, float16 or bfloat16"),
        ));
    }
    if ctx.inputs[1].dtype != DType::F32 {
        return Err(ctx.input_error(
            1,
            format!("is {}; a packed weight is float32", ctx.inputs[1].dtype),
        ));
    }
    let n = ctx.attr_int("n", -1)?;
    if n < 0 {
        return Err(ctx.compute_error("needs a non-negative attribute \"n\""));
    }
    if let Some(bias) = ctx.inputs.get(2) {
        if dtype != DType::F32 || bias.dtype != DType::F32 {
            return Err(ctx.input_error(
                2,
                format!(
                    "is a {} bias of a {dtype} A; a bias is float32's",
                    bias.dtype
                ),
            ));
        }
        if let Some(s) = &bias.shape
            && (s.len() != 1 || agree(s[0], n).is_none())
        {
            return Err(ctx.input_error(2, format!("is {s:?}; a bias of width {n} is [{n}]")));
        }
    }
    if let Some(b) = &ctx.inputs[1].shape {
        let panels = (n as usize).div_ceil(PACK_WIDTH) as i64;
        if b.len() != 3 || agree(b[0], panels).is_none() || agree(b[2], PACK_WIDTH as i64).is_none()
        {
            return Err(ctx.input_error(
                1,
                format!("is {b:?}; a packed weight of width {n} is [{panels}, K, {PACK_WIDTH}]"),
            ));
        }
    }
    let Some(a) = &ctx.inputs[0].shape else {
        return Ok(meta(dtype, None));
    };
    let Some((&k, rows)) = a.split_last() else {
        return Err(ctx.input_error(0, "is a scalar; MatMul needs at least 1-D"));
    };
    if let Some(b) = &ctx.inputs[1].shape
        && agree(k, b[1]).is_none()
    {
        return Err(ctx.input_error(1, format!("inner dims differ: {a:?} x {b:?}")));
    }
    let mut out = rows.to_vec();
    out.push(n);
    Ok(meta(dtype, Some(out)))
}

/// GemmPacked (rt2's own, made by lowering; see `gemm::GEMM_PACKED`): Gemm's A and C,
/// B' packed into `[ceil(n / PACK_WIDTH), K, PACK_WIDTH]` panels, `[M, n]` out.
fn infer_gemm_packed(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    use crate::ops::linalg::sgemm::PACK_WIDTH;
    ctx.arity(2, 3)?;
    let dtype = ctx.inputs[0].dtype;
    if !matches!(dtype, DType::F32 | DType::F16 | DType::Bf16) || ctx.inputs[1].dtype != DType::F32
    {
        return Err(ctx.input_error(
            1,
            "GemmPacked takes a float32, float16 or bfloat16 A and a float32 packed B",
        ));
    }
    let n = ctx.attr_int("n", -1)?;
    if n < 0 {
        return Err(ctx.compute_error("needs a non-negative attribute \"n\""));
    }
    let (Some(a), Some(b)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(dtype, None));
    };
    let panels = (n as usize).div_ceil(PACK_WIDTH) as i64;
    if a.len() != 2
        || b.len() != 3
        || agree(b[0], panels).is_none()
        || agree(b[2], PACK_WIDTH as i64).is_none()
    {
        return Err(ctx.input_error(
            1,
            format!("{a:?} x {b:?}: GemmPacked takes a 2-D A and [{panels}, K, {PACK_WIDTH}]"),
        ));
    }
    let (m, k) = if ctx.attr_int("transA", 0)? != 0 {
        (a[1], a[0])
    } else {
        (a[0], a[1])
    };
    if agree(k, b[1]).is_none() {
        return Err(ctx.input_error(1, format!("inner dims differ: {a:?} x {b:?}")));
    }
    Ok(meta(dtype, Some(vec![m, n])))
}

/// Gemm: A `[M, K]` (or transposed), B `[K, N]` (or transposed), optional C broadcast to
/// `[M, N]`.
fn infer_gemm(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    let dtype = ctx.inputs[0].dtype;
    let (Some(a), Some(b)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(dtype, None));
    };
    for (i, s) in [(0, a), (1, b)] {
        if s.len() != 2 {
            return Err(ctx.input_error(i, format!("is {s:?}; Gemm takes 2-D operands")));
        }
    }
    let (m, k) = if ctx.attr_int("transA", 0)? != 0 {
        (a[1], a[0])
    } else {
        (a[0], a[1])
    };
    let (k2, n) = if ctx.attr_int("transB", 0)? != 0 {
        (b[1], b[0])
    } else {
        (b[0], b[1])
    };
    if agree(k, k2).is_none() {
        return Err(ctx.input_error(
            1,
            format!("inner dims differ: {a:?} x {b:?} (transA/transB applied)"),
        ));
    }
    if let Some(c) = ctx.inputs.get(2).and_then(|c| c.shape.as_deref()) {
        // C broadcasts to [M, N] (unidirectionally: it must not widen the result).
        let fits = match crate::ops::elementwise::broadcast(&[Some(c), Some(&[m, n])]) {
            Ok(Some(s)) => s == [m, n] || m < 0 || n < 0,
            Ok(None) => true,
            Err(_) => false,
        };
        if !fits {
            return Err(ctx.input_error(2, format!("{c:?} does not broadcast to [{m}, {n}]")));
        }
    }
    Ok(meta(dtype, Some(vec![m, n])))
}

/// One spatial dim of a window op (a convolution or a pool), for [`spatial`].
pub(crate) struct Window {
    pub input: i64,
    pub kernel: i64,
    pub stride: i64,
    pub dilation: i64,
    pub pad_begin: i64,
    pub pad_end: i64,
    pub ceil: bool,
}

/// Output size of spatial dim `i` of a convolution or pool, in checked arithmetic: a
/// window wider than 64 bits count, or wider than the padded input it slides over
/// (which ONNX leaves undefined; rt2 used to give 0 and compute an empty output), is an
/// error naming the dim. An empty input dim gives an empty output dim.
pub(crate) fn spatial(ctx: &InferCtx, i: usize, w: Window) -> Result<i64, OpError> {
    let Window {
        input,
        kernel,
        stride,
        dilation,
        pad_begin,
        pad_end,
        ceil,
    } = w;
    if input < 0 {
        return Ok(UNKNOWN);
    }
    if kernel < 1 {
        return Err(ctx.attr_error(
            "kernel_shape",
            format!("spatial dim {i}: kernel {kernel} is not positive"),
        ));
    }
    let effective = (kernel - 1)
        .checked_mul(dilation)
        .and_then(|e| e.checked_add(1))
        .ok_or_else(|| {
            ctx.attr_error(
                "dilations",
                format!(
                    "spatial dim {i}: a window of kernel {kernel} and dilation {dilation} overflows"
                ),
            )
        })?;
    let padded = input
        .checked_add(pad_begin)
        .and_then(|p| p.checked_add(pad_end))
        .ok_or_else(|| {
            ctx.attr_error(
                "pads",
                format!("spatial dim {i}: {input} padded by {pad_begin} and {pad_end} overflows"),
            )
        })?;
    if input == 0 && padded <= 0 {
        return Ok(0);
    }
    let span = padded.checked_sub(effective).unwrap_or(-1);
    if span < 0 {
        return Err(ctx.attr_error(
            "kernel_shape/dilations",
            format!(
                "spatial dim {i}: the window (kernel {kernel}, dilation {dilation}: {effective} \
                 wide) is wider than the padded input ({padded})"
            ),
        ));
    }
    // `span >= 0` and `stride >= 1`, so only the rounding up can overflow.
    let steps = if ceil {
        span.checked_add(stride - 1)
            .ok_or_else(|| ctx.attr_error("strides", format!("spatial dim {i}: overflows")))?
            / stride
    } else {
        span / stride
    };
    let mut out = steps + 1;
    // In ceil mode a last window that would start inside the end padding is dropped.
    if ceil
        && (out - 1)
            .checked_mul(stride)
            .is_none_or(|start| start >= input.saturating_add(pad_begin))
    {
        out -= 1;
    }
    Ok(out)
}

/// The spatial output dims for `auto_pad`, `pads`, `strides`, `dilations` (ONNX rules).
fn spatial_dims(
    ctx: &InferCtx,
    x: &[i64],
    kernel: &[i64],
    ceil: bool,
) -> Result<Vec<i64>, OpError> {
    let n = kernel.len();
    let strides = ctx.attr_ints_or("strides", 1, n)?;
    let dilations = ctx.attr_ints_or("dilations", 1, n)?;
    let pads = ctx.attr_ints_or("pads", 0, 2 * n)?;
    if strides.len() != n || dilations.len() != n || pads.len() != 2 * n {
        return Err(ctx.attr_error(
            "strides/dilations/pads",
            format!("do not fit {n} spatial dims"),
        ));
    }
    if strides.iter().chain(&dilations).any(|&v| v < 1) {
        return Err(ctx.attr_error("strides/dilations", "must be positive"));
    }
    if x.len() != n + 2 {
        return Err(ctx.input_error(0, format!("is {x:?}; {n} spatial dims need rank {}", n + 2)));
    }
    let auto_pad = ctx
        .attrs
        .get("auto_pad")
        .and_then(|a| a.as_str())
        .unwrap_or("NOTSET");
    let input = &x[2..];
    (0..n)
        .map(|i| {
            let (begin, end) = match auto_pad {
                "SAME_UPPER" | "SAME_LOWER" if input[i] >= 0 => {
                    // ceil(input / stride), which ONNX's SAME padding gives.
                    return Ok(input[i].div_euclid(strides[i])
                        + i64::from(input[i].rem_euclid(strides[i]) != 0));
                }
                "SAME_UPPER" | "SAME_LOWER" => return Ok(UNKNOWN),
                "VALID" => (0, 0),
                _ => (pads[i], pads[i + n]),
            };
            spatial(
                ctx,
                i,
                Window {
                    input: input[i],
                    kernel: kernel[i],
                    stride: strides[i],
                    dilation: dilations[i],
                    pad_begin: begin,
                    pad_end: end,
                    ceil,
                },
            )
        })
        .collect()
}

/// Conv: X [N, C, D...], W [M, C/group, K...] -> [N, M, D'...].
fn infer_conv(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    let dtype = ctx.inputs[0].dtype;
    let (Some(x), Some(w)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(dtype, None));
    };
    if x.len() < 3 || w.len() != x.len() {
        return Err(ctx.input_error(1, format!("weights {w:?} do not fit input {x:?}")));
    }
    let group = ctx.attr_int("group", 1)?;
    if group < 1 {
        return Err(ctx.attr_error("group", "must be positive"));
    }
    if x[1] >= 0 && w[1] >= 0 && x[1] != w[1] * group {
        return Err(ctx.input_error(
            1,
            format!(
                "{} input channels, weights expect {} x group {group}",
                x[1], w[1]
            ),
        ));
    }
    let kernel = ctx
        .attr_ints("kernel_shape")?
        .map(<[i64]>::to_vec)
        .unwrap_or_else(|| w[2..].to_vec());
    let mut out = vec![x[0], w[0]];
    out.extend(spatial_dims(ctx, x, &kernel, false)?);
    Ok(meta(dtype, Some(out)))
}

/// ConvWinograd (rt2's own, made by lowering; see `conv_packed::CONV_WINOGRAD`): Conv's
/// output from X `[N, C, H, W]` and the transformed weights U, `[16, M, C]` for F(2x2,
/// 3x3) or `[36, M, C]` for F(4x4, 3x3).
fn infer_conv_winograd(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    for i in 0..2 {
        if ctx.inputs[i].dtype != DType::F32 {
            return Err(ctx.input_error(
                i,
                format!("is {}; ConvWinograd takes float32", ctx.inputs[i].dtype),
            ));
        }
    }
    let (Some(x), Some(u)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(DType::F32, None));
    };
    let positions = |p: i64| agree(u[0], p).is_some();
    if x.len() != 4
        || u.len() != 3
        || !(positions(16) || positions(36))
        || agree(u[2], x[1]).is_none()
    {
        let c = x.get(1).copied().unwrap_or(-1);
        return Err(ctx.input_error(
            1,
            format!(
                "is {u:?}; for an input {x:?} the transformed weights are [16, M, {c}] or \
                 [36, M, {c}]"
            ),
        ));
    }
    let mut out = vec![x[0], u[1]];
    out.extend(spatial_dims(ctx, x, &[3, 3], false)?);
    Ok(meta(DType::F32, Some(out)))
}

/// ConvGemm (rt2's own, made by lowering; see `conv_packed::CONV_GEMM`): Conv's output
/// `[N, n, D'...]` from X `[N, C, D...]`, the weights packed as `[ceil(n / PACK_WIDTH),
/// C * taps, PACK_WIDTH]`, attributes `n` and `kernel_shape`.
fn infer_conv_gemm(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    use crate::ops::linalg::sgemm::PACK_WIDTH;
    infer_packed_conv(ctx, |c, kernel, panels| {
        let rows = c.and_then(|c| kernel.iter().try_fold(c, |r, &k| r.checked_mul(k)));
        vec![Some(panels), rows, Some(PACK_WIDTH as i64)]
    })
}

/// ConvWinograd1D (rt2's own, made by lowering; see `conv_winograd_1d`): Conv's output
/// `[N, n, D'...]` from X `[N, C, D...]` and `U` packed per Winograd point, `[6,
/// ceil(n / PACK_WIDTH), C, PACK_WIDTH]`, attributes `n` and `kernel_shape`.
fn infer_conv_winograd_1d(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    use crate::ops::linalg::sgemm::PACK_WIDTH;
    infer_packed_conv(ctx, |c, _, panels| {
        let points = conv_winograd_1d::POINTS as i64;
        vec![Some(points), Some(panels), c, Some(PACK_WIDTH as i64)]
    })
}

/// The output of a Conv whose weights lowering packed (ConvGemm, ConvWinograd1D): Conv's,
/// `[N, n, D'...]` from X `[N, C, D...]`, attributes `n` and `kernel_shape`; the packed
/// weights' shape must be `packed(C, kernel_shape, panels)` (a dim `None` is not checked:
/// C unknown, or a product past i64), with `panels` the column panels of `n` channels.
fn infer_packed_conv(
    ctx: &InferCtx,
    packed: impl Fn(Option<i64>, &[i64], i64) -> Vec<Option<i64>>,
) -> Result<Vec<TensorMeta>, OpError> {
    use crate::ops::linalg::sgemm::PACK_WIDTH;
    ctx.arity(2, 3)?;
    for i in 0..2 {
        if ctx.inputs[i].dtype != DType::F32 {
            return Err(ctx.input_error(
                i,
                format!("is {}; {} takes float32", ctx.inputs[i].dtype, ctx.op),
            ));
        }
    }
    let n = ctx.attr_int("n", -1)?;
    if n < 1 {
        return Err(ctx.attr_error("n", "needs a positive channel count"));
    }
    let Some(kernel) = ctx.attr_ints("kernel_shape")?.map(<[i64]>::to_vec) else {
        return Err(ctx.attr_error("kernel_shape", format!("{} needs it", ctx.op)));
    };
    let (Some(x), Some(p)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(DType::F32, None));
    };
    let panels = (n as usize).div_ceil(PACK_WIDTH) as i64;
    let c = x.get(1).copied().filter(|&c| c >= 0);
    let want = packed(c, &kernel, panels);
    let fits = x.len() == kernel.len() + 2
        && p.len() == want.len()
        && p.iter()
            .zip(&want)
            .all(|(&d, w)| w.is_none_or(|w| agree(d, w).is_some()));
    if !fits {
        let want: Vec<String> = want
            .iter()
            .map(|w| w.map_or("?".to_string(), |w| w.to_string()))
            .collect();
        return Err(ctx.input_error(
            1,
            format!(
                "is {p:?}; for an input {x:?} and a {kernel:?} kernel into {n} channels the \
                 packed weights are [{}]",
                want.join(", ")
            ),
        ));
    }
    let mut out = vec![x[0], n];
    out.extend(spatial_dims(ctx, x, &kernel, false)?);
    Ok(meta(DType::F32, Some(out)))
}

/// Conv's prepack hook, given the output its inference gives: a float32 Conv by constant
/// weights that the Winograd kernel takes runs as `ConvWinograd` on `U`
/// (`conv_packed::winograd_prepack`), a 1-D one of 3 or 5 taps as `ConvWinograd1D`
/// (`conv_winograd_1d::prepack`), one over a small output as `ConvGemm` on its weights
/// packed (`conv_packed::gemm_prepack`); a float16/bfloat16 one has its weights widened
/// once (`conv::prepack_half_weight`).
fn prepack_conv(ctx: &InferCtx) -> Option<Prepack> {
    let out = infer_conv(ctx).ok()?.pop()?;
    conv_packed::winograd_prepack(ctx, &out)
        .or_else(|| conv_winograd_1d::prepack(ctx, &out))
        .or_else(|| conv_packed::gemm_prepack(ctx, &out))
        .or_else(|| conv::prepack_half_weight(ctx))
}

/// ConvTranspose: X [N, C, D...], W [C, M/group, K...] -> [N, M, D'...], where
/// D' = stride * (D - 1) + output_padding + ((K - 1) * dilation + 1) - pads, or
/// `output_shape` when given.
fn infer_conv_transpose(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    let dtype = ctx.inputs[0].dtype;
    let (Some(x), Some(w)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(dtype, None));
    };
    if x.len() < 3 || w.len() != x.len() {
        return Err(ctx.input_error(1, format!("weights {w:?} do not fit input {x:?}")));
    }
    let group = ctx.attr_int("group", 1)?;
    let n = x.len() - 2;
    let kernel = ctx
        .attr_ints("kernel_shape")?
        .map(<[i64]>::to_vec)
        .unwrap_or_else(|| w[2..].to_vec());
    let strides = ctx.attr_ints_or("strides", 1, n)?;
    let dilations = ctx.attr_ints_or("dilations", 1, n)?;
    let out_pad = ctx.attr_ints_or("output_padding", 0, n)?;
    let pads = ctx.attr_ints_or("pads", 0, 2 * n)?;
    if [kernel.len(), strides.len(), dilations.len(), out_pad.len()]
        .iter()
        .any(|&l| l != n)
        || pads.len() != 2 * n
    {
        return Err(ctx.attr_error(
            "kernel_shape/strides/dilations/output_padding/pads",
            format!("do not fit {n} spatial dims"),
        ));
    }
    if group < 1 {
        return Err(ctx.attr_error("group", "must be positive"));
    }
    if strides.iter().chain(&dilations).any(|&v| v < 1) {
        return Err(ctx.attr_error("strides/dilations", "must be positive"));
    }
    if kernel.iter().any(|&k| k < 1) {
        return Err(ctx.attr_error("kernel_shape", format!("{kernel:?} is not positive")));
    }
    let channels = if w[1] < 0 {
        UNKNOWN
    } else {
        w[1].checked_mul(group)
            .ok_or_else(|| ctx.attr_error("group", format!("{} x group {group} overflows", w[1])))?
    };
    let mut out = vec![x[0], channels];
    if let Some(shape) = ctx.attr_ints("output_shape")? {
        if let Some(d) = shape.iter().find(|&&d| d < 0) {
            return Err(ctx.attr_error("output_shape", format!("dim {d} is negative")));
        }
        out.extend(shape.iter().rev().take(n).rev());
    } else {
        let auto_pad = ctx
            .attrs
            .get("auto_pad")
            .and_then(|a| a.as_str())
            .unwrap_or("NOTSET");
        for i in 0..n {
            let d = x[2 + i];
            // stride * (d - 1) + output_padding + (kernel - 1) * dilation + 1 - pads, in
            // checked arithmetic: huge attributes are an error, not a wrapped dim.
            if d < 0 {
                out.push(UNKNOWN);
                continue;
            }
            let dim = match auto_pad {
                "SAME_UPPER" | "SAME_LOWER" => d.checked_mul(strides[i]),
                _ => (d - 1)
                    .checked_mul(strides[i])
                    .and_then(|v| v.checked_add(out_pad[i]))
                    .and_then(|v| v.checked_add((kernel[i] - 1).checked_mul(dilations[i])?))
                    .and_then(|v| v.checked_add(1))
                    .and_then(|v| v.checked_sub(pads[i]))
                    .and_then(|v| v.checked_sub(pads[i + n])),
            };
            match dim {
                Some(v) if v >= 0 => out.push(v),
                Some(v) => {
                    return Err(ctx.attr_error(
                        "pads",
                        format!("spatial dim {i}: the output would have {v} elements"),
                    ));
                }
                None => {
                    return Err(ctx.attr_error(
                        "strides/dilations/output_padding/pads",
                        format!("spatial dim {i}: the output size overflows"),
                    ));
                }
            }
        }
    }
    Ok(meta(dtype, Some(out)))
}

/// Resize (X, roi, scales, sizes; opset 10 and Upsample: X, scales): `sizes` when given,
/// else each dim times its scale, rounded down; `axes` limits both to some dims.
fn infer_resize(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 4)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(vec![x.clone()]);
    };
    let value = |i: usize| {
        ctx.values
            .get(i)
            .copied()
            .flatten()
            .filter(|t| t.element_count().is_some_and(|n| n > 0))
    };
    let (scales_at, sizes_at) = if ctx.inputs.len() <= 2 {
        (1, usize::MAX)
    } else {
        (2, 3)
    };
    let axes: Vec<usize> = match ctx.attr_ints("axes")? {
        Some(a) => a
            .iter()
            .map(|&v| if v < 0 { v + s.len() as i64 } else { v } as usize)
            .collect(),
        None => (0..s.len()).collect(),
    };
    if axes.iter().any(|&a| a >= s.len()) {
        return Err(ctx.attr_error("axes", format!("do not fit rank {}", s.len())));
    }
    let mut out = s.clone();
    if let Some(t) = value(sizes_at) {
        let sizes = t
            .int_values()
            .ok_or_else(|| ctx.input_error(sizes_at, "sizes are int64"))?;
        if sizes.len() != axes.len() {
            return Err(ctx.input_error(
                sizes_at,
                format!("{} sizes for {} axes", sizes.len(), axes.len()),
            ));
        }
        let policy = ctx
            .attrs
            .get("keep_aspect_ratio_policy")
            .and_then(|a| a.as_str())
            .unwrap_or("stretch");
        if let Some(v) = sizes.iter().find(|&&v| v < 0) {
            return Err(ctx.input_error(sizes_at, format!("size {v} is negative")));
        }
        if policy == "stretch" {
            for (&a, &v) in axes.iter().zip(&sizes) {
                out[a] = v;
            }
        } else {
            // One scale for all axes: the smallest (not_larger) or largest (not_smaller).
            let ratios = axes
                .iter()
                .zip(&sizes)
                .map(|(&a, &v)| v as f64 / s[a] as f64);
            let scale = if policy == "not_larger" {
                ratios.fold(f64::INFINITY, f64::min)
            } else {
                ratios.fold(0.0, f64::max)
            };
            for &a in &axes {
                out[a] = if s[a] < 0 {
                    UNKNOWN
                } else {
                    scaled_dim(ctx, sizes_at, s[a] as f64 * scale, f64::round)?
                };
            }
        }
    } else if let Some(t) = value(scales_at) {
        let scales: Vec<f64> = t
            .data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect();
        if t.dtype != crate::ops::DType::F32 || scales.len() != axes.len() {
            return Err(
                ctx.input_error(scales_at, format!("expected {} float32 scales", axes.len()))
            );
        }
        for (&a, &f) in axes.iter().zip(&scales) {
            out[a] = if s[a] < 0 {
                UNKNOWN
            } else {
                scaled_dim(ctx, scales_at, s[a] as f64 * f, f64::floor)?
            };
        }
    } else {
        for &a in &axes {
            out[a] = UNKNOWN;
        }
    }
    Ok(meta(x.dtype, Some(out)))
}

/// A dim scaled by Resize, rounded by `round`: a NaN, a negative value or one past
/// `i64` (a scale of 1e30) is an error naming the input it came from, where a cast
/// would have made it 0 or `i64::MAX`.
fn scaled_dim(ctx: &InferCtx, input: usize, v: f64, round: fn(f64) -> f64) -> Result<i64, OpError> {
    let r = round(v);
    // 2^63 is the first f64 past i64::MAX; a NaN is in no range.
    if !(0.0..9_223_372_036_854_775_808.0).contains(&r) {
        return Err(ctx.input_error(input, format!("a scaled dim of {v} is not a dim")));
    }
    Ok(r as i64)
}

/// Pools: X [N, C, D...] -> [N, C, D'...]; MaxPool's optional second output (indices) is
/// int64 of the same shape, inferred unless the node has one output.
pub(crate) fn infer_pool(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let dtype = ctx.inputs[0].dtype;
    let Some(x) = &ctx.inputs[0].shape else {
        return Ok(meta(dtype, None));
    };
    let kernel = ctx
        .attr_ints("kernel_shape")?
        .ok_or_else(|| ctx.attr_error("kernel_shape", "is missing"))?;
    if x.len() != kernel.len() + 2 {
        return Err(ctx.input_error(
            0,
            format!(
                "is {x:?}; kernel_shape {kernel:?} needs rank {}",
                kernel.len() + 2
            ),
        ));
    }
    let ceil = ctx.attr_int("ceil_mode", 0)? != 0;
    let mut out = vec![x[0], x[1]];
    out.extend(spatial_dims(ctx, x, kernel, ceil)?);
    let y = TensorMeta {
        dtype,
        shape: Some(out.clone()),
    };
    // MaxPool's indices only where the node asks for them (`outputs` 0: not said).
    if ctx.op == "MaxPool" && ctx.outputs != 1 {
        return Ok(vec![
            y,
            TensorMeta {
                dtype: crate::ops::DType::I64,
                shape: Some(out),
            },
        ]);
    }
    Ok(vec![y])
}

fn infer_global_pool(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let t = &ctx.inputs[0];
    let shape = t.shape.as_ref().map(|x| {
        x.iter()
            .enumerate()
            .map(|(i, &d)| if i < 2 { d } else { 1 })
            .collect()
    });
    Ok(meta(t.dtype, shape))
}

/// BatchNormalization in inference form: Y has X's shape; scale, bias, mean and var are
/// `[C]`.
fn infer_batch_norm(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(5, 5)?;
    let x = &ctx.inputs[0];
    let channels = x.shape.as_ref().and_then(|s| s.get(1).copied());
    for (i, t) in ctx.inputs.iter().enumerate().skip(1) {
        if let (Some(s), Some(c)) = (&t.shape, channels)
            && (s.len() != 1 || agree(s[0], c).is_none())
        {
            return Err(ctx.input_error(i, format!("is {s:?}; expected [{c}]")));
        }
    }
    if ctx.attr_int("training_mode", 0)? != 0 {
        // Training form: the updated running mean and variance follow Y.
        let stats = TensorMeta {
            dtype: ctx.inputs[3].dtype,
            shape: channels.map(|c| vec![c]),
        };
        return Ok(vec![x.clone(), stats.clone(), stats]);
    }
    Ok(vec![x.clone()])
}

/// Dropout: the output, and the optional bool mask of the same shape.
fn infer_dropout(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 3)?;
    let x = &ctx.inputs[0];
    Ok(vec![
        x.clone(),
        TensorMeta {
            dtype: crate::ops::DType::Bool,
            shape: x.shape.clone(),
        },
    ])
}

/// LayerNormalization: Y like X, then the optional Mean and InvStdDev, whose dims from
/// `axis` on are 1, in the `stash_type` precision (float32 by default).
fn infer_layer_norm(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    let x = &ctx.inputs[0];
    let stash = match ctx.attr_int("stash_type", 1)? {
        1 => crate::ops::DType::F32,
        10 => crate::ops::DType::F16,
        16 => crate::ops::DType::Bf16,
        11 => crate::ops::DType::F64,
        other => {
            return Err(ctx.attr_error(
                "stash_type",
                format!("{other} is not a floating-point ONNX type"),
            ));
        }
    };
    let stats_shape = match &x.shape {
        None => None,
        Some(s) => {
            let a = ctx.axis(ctx.attr_int("axis", -1)?, s.len(), "axis")?;
            Some(
                s.iter()
                    .enumerate()
                    .map(|(i, &d)| if i < a { d } else { 1 })
                    .collect(),
            )
        }
    };
    let stats = TensorMeta {
        dtype: stash,
        shape: stats_shape,
    };
    Ok(vec![x.clone(), stats.clone(), stats])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Attr, DType};

    fn infer(
        op: &str,
        inputs: &[TensorMeta],
        attrs: &[(&str, Attr)],
    ) -> Result<Vec<TensorMeta>, OpError> {
        crate::ops::infer_for_test(op, inputs, &[], attrs, 1)
    }

    fn f32(shape: &[i64]) -> TensorMeta {
        TensorMeta::new(DType::F32, shape)
    }

    fn shape(r: Result<Vec<TensorMeta>, OpError>) -> Vec<i64> {
        r.unwrap()[0].shape.clone().unwrap()
    }

    #[test]
    fn matmul_and_gemm() {
        assert_eq!(
            shape(infer("MatMul", &[f32(&[2, 3, 4]), f32(&[4, 5])], &[])),
            [2, 3, 5]
        );
        assert_eq!(shape(infer("MatMul", &[f32(&[4]), f32(&[4, 5])], &[])), [5]);
        assert_eq!(shape(infer("MatMul", &[f32(&[3, 4]), f32(&[4])], &[])), [3]);
        assert_eq!(
            shape(infer(
                "MatMul",
                &[f32(&[-1, 1, 3, 4]), f32(&[7, 4, 2])],
                &[]
            )),
            [-1, 7, 3, 2]
        );
        assert!(
            infer("MatMul", &[f32(&[3, 4]), f32(&[5, 2])], &[])
                .unwrap_err()
                .to_string()
                .contains("inner dims")
        );
        let t = [("transB", Attr::Int(1))];
        assert_eq!(
            shape(infer(
                "Gemm",
                &[f32(&[-1, 128]), f32(&[10, 128]), f32(&[10])],
                &t
            )),
            [-1, 10]
        );
        assert!(infer("Gemm", &[f32(&[2, 3]), f32(&[3, 4]), f32(&[5])], &[]).is_err());
    }

    #[test]
    fn conv_and_pools() {
        let pads = ("pads", Attr::Ints(vec![1, 1, 1, 1]));
        assert_eq!(
            shape(infer(
                "Conv",
                &[f32(&[1, 3, 8, 8]), f32(&[8, 3, 3, 3])],
                &[pads]
            )),
            [1, 8, 8, 8]
        );
        let s2 = [
            ("strides", Attr::Ints(vec![2, 2])),
            ("dilations", Attr::Ints(vec![2, 2])),
        ];
        assert_eq!(
            shape(infer(
                "Conv",
                &[f32(&[-1, 4, 9, 9]), f32(&[6, 2, 3, 3])],
                &[s2[0].clone(), s2[1].clone(), ("group", Attr::Int(2))]
            )),
            [-1, 6, 3, 3]
        );
        let e = infer("Conv", &[f32(&[1, 3, 8, 8]), f32(&[8, 2, 3, 3])], &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("3 input channels, weights expect 2 x group 1"),
            "{e}"
        );
        let same = [
            ("auto_pad", Attr::Str("SAME_UPPER".into())),
            ("strides", Attr::Ints(vec![2])),
        ];
        assert_eq!(
            shape(infer("Conv", &[f32(&[1, 1, 7]), f32(&[1, 1, 3])], &same)),
            [1, 1, 4]
        );
        let k = ("kernel_shape", Attr::Ints(vec![2, 2]));
        let st = ("strides", Attr::Ints(vec![2, 2]));
        let ks = [k.clone(), st.clone()];
        let pooled = crate::ops::infer_for_test("MaxPool", &[f32(&[1, 8, 7, 7])], &[], &ks, 2);
        let pooled = pooled.unwrap();
        assert_eq!(pooled[0].shape.as_deref(), Some(&[1, 8, 3, 3][..]));
        assert_eq!(pooled[1].dtype, DType::I64);
        // One output asked for: no indices.
        assert_eq!(
            infer("MaxPool", &[f32(&[1, 8, 7, 7])], &ks).unwrap().len(),
            1
        );
        assert_eq!(
            shape(infer(
                "AveragePool",
                &[f32(&[1, 8, 7, 7])],
                &[k, st, ("ceil_mode", Attr::Int(1))]
            )),
            [1, 8, 4, 4]
        );
        assert_eq!(
            shape(infer("GlobalAveragePool", &[f32(&[2, 5, 7, 9])], &[])),
            [2, 5, 1, 1]
        );
        assert!(
            infer("MaxPool", &[f32(&[1, 8, 7, 7])], &[])
                .unwrap_err()
                .to_string()
                .contains("kernel_shape")
        );
    }

    #[test]
    fn normalizations() {
        let c = f32(&[8]);
        let x = f32(&[2, 8, 4, 4]);
        assert_eq!(
            shape(infer(
                "BatchNormalization",
                &[x.clone(), c.clone(), c.clone(), c.clone(), c.clone()],
                &[]
            )),
            [2, 8, 4, 4]
        );
        assert!(
            infer(
                "BatchNormalization",
                &[x.clone(), f32(&[7]), c.clone(), c.clone(), c],
                &[]
            )
            .is_err()
        );
        assert_eq!(shape(infer("Softmax", &[f32(&[2, 10])], &[])), [2, 10]);
    }
}
