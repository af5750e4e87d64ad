//! GE's 1-D, 3-D, adaptive, global-Lp, argmax and morphological pools, from the
//! prototypes of `prototypes/nn_pooling_ops.txt`. The windowed pools are the library's
//! MaxPool and AveragePool kernels with GE's attributes translated (channels-last data
//! permuted around them, [`super::convs::run_channels_first`]); the adaptive pools,
//! GlobalLpPool and Dilation2D, which no library kernel computes, are loops here that
//! read each element as `f64` and round once per output.
//!
//! - AvgPool1D(x; ksize, strides, pads required, ceil_mode false, count_include_pad
//!   false): PyTorch's avg_pool1d over x `[N, C, L]`, `pads` [begin, end]. In ceil mode a
//!   last window starting in the end padding is dropped; an average counts the taps
//!   inside x, or with `count_include_pad` also those in the padding (not past it).
//! - AvgPool3D(x; ksize, strides, pads required, ceil_mode false, count_include_pad
//!   true, divisor_override 0, data_format "NDHWC") and AvgPool3DD (the same, with the
//!   assist inputs `filter` and `multiplier`, which only feed the device kernel and are
//!   not read): `ksize`/`strides` of 1 (every dim), 3 (d, h, w) or 5 values (in
//!   `data_format` order, N and C entries 1), `pads` [front, back, top, bottom, left,
//!   right]. Only `divisor_override` 0 is computed.
//! - MaxPool3D(x; ksize, strides, padding required, pads `[0,0,0,0,0,0]`, dilation
//!   `[1,1,1,1,1]`, ceil_mode 0, data_format "NDHWC"): `padding` "SAME" (TensorFlow's:
//!   output `ceil(in / stride)`, the smaller half of the padding first) or "VALID" (none);
//!   "CALCULATED" takes `pads` and `ceil_mode` (1: the output size rounds up).
//! - MaxPoolV2(x, ksize, strides; padding required, data_format "NHWC"): TensorFlow's
//!   MaxPool with `ksize` and `strides` as int inputs (GE's MaxPool with those values).
//! - AdaptiveAvgPool2d(x; output_size), AdaptiveAvgPool(x, output_size) (1 to 3 values)
//!   and AdaptiveMaxPool2d(x; output_size) -> (y, argmax): PyTorch's adaptive pools over
//!   x's last `len(output_size)` dims: output `i` of a dim of `in` pools input
//!   `floor(i * in / out) .. ceil((i + 1) * in / out)`. argmax is the position of the
//!   maximum flattened within the pooled dims (PyTorch's indices), the first of equal
//!   values, a NaN taken as the maximum.
//! - GlobalLpPool(x; p 2.0): ONNX's, `(sum |x|^p)^(1/p)` over each `[N, C]` plane, y
//!   `[N, C, 1, ...]`.
//! - MaxPoolWithArgmax(x; ksize, strides, padding required, Targmax 7): TensorFlow's,
//!   NHWC. argmax is TensorFlow's flattened index `(h * W + w) * C + c`, plus
//!   `n * H * W * C` when the node carries TensorFlow's `include_batch_in_index` true
//!   (GE's prototype does not name it; absent, false as TensorFlow's default).
//! - Dilation2D(x, filter; strides, rates required, padding_mode "SAME", pads
//!   `[0,0,0,0]`, ceil_mode false, data_format "NHWC"): TensorFlow's greyscale
//!   morphological dilation, `y[n, h, w, c] = max over (i, j) of x[n, h * sh + i * rh -
//!   top, w * sw + j * rw - left, c] + filter[i, j, c]`, taps outside x skipped;
//!   `strides`/`rates` by `data_format` (N and C entries 1); "CALCULATED" takes `pads`
//!   [top, bottom, left, right] and `ceil_mode`.
//!
//! rt2's choices where GE does not say: AvgPool1D takes a 3-D x; MaxPool3D's `ceil_mode`
//! 1 rounds up as MaxPoolV3's; MaxPoolWithArgmax's `Targmax` 3 gives int32 indices and
//! 9 int64, and its default 7 (GE's uint16, which the prototype's index types do not
//! hold) int64; AdaptiveMaxPool2d's argmax is int64; a Dilation2D window with no tap
//! inside x gives -infinity (the type's minimum for integers; TensorFlow's lowest
//! value).
//!
//! Not computed: MaxPoolWithArgmaxV1 and V2, whose argmax GE documents only as a uint16
//! tensor in the device's 5-D layout, not as an index encoding.

use super::attrs::{ints_or, onnx_attrs, required_int, required_list, with_attrs};
use super::convs::{by_format, channels_first, onnx_pads, run_channels_first};
use super::layout::permuted;
use crate::dispatch;
use crate::ops::nn::pool;
use crate::ops::nn::scalar::Scalar;
use crate::ops::nn::{Window, spatial};
use crate::ops::shape::args::moved;
use crate::ops::shape::movement::{View, copy_view};
use crate::ops::{
    Attr, Attrs, DType, InferCtx, OpError, OpRegistry, Tensor, TensorMeta, TensorMut, TensorRef,
    UNKNOWN, meta,
};

/// (op type, inputs whose values inference reads, inference, compute).
const OPS: &super::table::Entries = &[
    ("AvgPool1D", &[], infer_window, window_pool),
    ("AvgPool3D", &[], infer_window, window_pool),
    ("AvgPool3DD", &[], infer_window, window_pool),
    ("MaxPool3D", &[], infer_window, window_pool),
    ("MaxPoolV2", &[1, 2], infer_max_pool_v2, max_pool_v2),
    ("AdaptiveAvgPool2d", &[], infer_adaptive, adaptive),
    ("AdaptiveAvgPool", &[1], infer_adaptive, adaptive),
    ("AdaptiveMaxPool2d", &[], infer_adaptive, adaptive),
    ("GlobalLpPool", &[], infer_global_lp, global_lp),
    ("MaxPoolWithArgmax", &[], infer_argmax_pool, argmax_pool),
    ("Dilation2D", &[], infer_dilation, dilation),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register_entries(reg, OPS);
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::entry_names(OPS)
}

/// `d` reordered by `perm`.
fn reorder(d: &[i64], perm: &[usize]) -> Vec<i64> {
    perm.iter().map(|&p| d[p]).collect()
}

/// Channels-last (N, spatial..., C) to channels-first dims of `rank`, and back.
fn cf_perm(rank: usize) -> Vec<usize> {
    let mut p = vec![0, rank - 1];
    p.extend(1..rank - 1);
    p
}
fn cl_perm(rank: usize) -> Vec<usize> {
    let mut p = vec![0];
    p.extend(2..rank);
    p.push(1);
    p
}

/// TensorFlow's SAME padding of one dim: (begin, end) for an output of `ceil(in /
/// stride)`.
fn same_pads(input: i64, kernel: i64, stride: i64, dilation: i64) -> (i64, i64) {
    let out = (input + stride - 1) / stride;
    let span = (kernel - 1) * dilation + 1;
    let total = ((out - 1) * stride + span - input).max(0);
    (total / 2, total - total / 2)
}

// ---------------------------------------------------------------------------------------
// AvgPool1D, AvgPool3D(D), MaxPool3D

/// A windowed pool's attributes, checked.
struct WindowPool {
    max: bool,
    cf: bool,
    kernel: Vec<i64>,
    stride: Vec<i64>,
    dilation: Vec<i64>,
    /// ONNX order (every begin, then every end); `None`: TensorFlow's SAME.
    pads: Option<Vec<i64>>,
    ceil: bool,
    include_pad: bool,
}

/// A 3-D pool's `ksize` or `strides`: 1, 3 or 5 (by `data_format`) values.
fn dims3(ctx: &InferCtx, name: &str, cf: bool) -> Result<Vec<i64>, OpError> {
    let v = required_list(ctx, name)?;
    let out = match v.len() {
        1 => vec![v[0]; 3],
        3 => v.clone(),
        5 => by_format(ctx, name, &v, cf, 3)?,
        _ => return Err(ctx.attr_error(name, format!("{v:?} is not 1, 3 or 5 values"))),
    };
    if out.iter().any(|&k| k < 1) {
        return Err(ctx.attr_error(name, format!("{v:?} is not positive")));
    }
    Ok(out)
}

impl WindowPool {
    fn read(ctx: &InferCtx) -> Result<WindowPool, OpError> {
        if ctx.op == "AvgPool1D" {
            ctx.arity(1, 1)?;
            let k = required_int(ctx, "ksize")?;
            let s = required_int(ctx, "strides")?;
            if k < 1 || s < 1 {
                return Err(ctx.attr_error("ksize/strides", format!("{k}, {s} not positive")));
            }
            let pads = onnx_pads(ctx, "pads", &required_list(ctx, "pads")?, 1)?;
            return Ok(WindowPool {
                max: false,
                cf: true,
                kernel: vec![k],
                stride: vec![s],
                dilation: vec![1],
                pads: Some(pads),
                ceil: ctx.attr_bool("ceil_mode", false)?,
                include_pad: ctx.attr_bool("count_include_pad", false)?,
            });
        }
        let max = ctx.op == "MaxPool3D";
        ctx.arity(1, if ctx.op == "AvgPool3DD" { 3 } else { 1 })?;
        let cf = channels_first(ctx, "NDHWC", 3)?;
        let (kernel, stride) = (dims3(ctx, "ksize", cf)?, dims3(ctx, "strides", cf)?);
        if !max {
            if ctx.attr_int("divisor_override", 0)? != 0 {
                return Err(ctx.attr_error("divisor_override", "only 0 is computed"));
            }
            return Ok(WindowPool {
                max,
                cf,
                kernel,
                stride,
                dilation: vec![1; 3],
                pads: Some(onnx_pads(ctx, "pads", &required_list(ctx, "pads")?, 3)?),
                ceil: ctx.attr_bool("ceil_mode", false)?,
                include_pad: ctx.attr_bool("count_include_pad", true)?,
            });
        }
        let dilation = by_format(ctx, "dilation", &ints_or(ctx, "dilation", &[1; 5])?, cf, 3)?;
        let (pads, ceil) = match ctx.attr_str("padding", "")? {
            "SAME" => (None, false),
            "VALID" => (Some(vec![0; 6]), false),
            "CALCULATED" => {
                let pads = onnx_pads(ctx, "pads", &ints_or(ctx, "pads", &[0; 6])?, 3)?;
                let ceil = match ctx.attr_int("ceil_mode", 0)? {
                    0 => false,
                    1 => true,
                    v => return Err(ctx.attr_error("ceil_mode", format!("{v} is not 0 or 1"))),
                };
                (Some(pads), ceil)
            }
            "" => return Err(ctx.attr_error("padding", "is required and missing")),
            other => {
                return Err(ctx.attr_error(
                    "padding",
                    format!("{other:?} is not SAME, VALID or CALCULATED"),
                ));
            }
        };
        Ok(WindowPool {
            max,
            cf,
            kernel,
            stride,
            dilation,
            pads,
            ceil,
            include_pad: false,
        })
    }

    /// Explicit ONNX pads for channels-first spatial dims `sp`.
    fn pads_for(&self, sp: &[i64]) -> Vec<i64> {
        self.pads.clone().unwrap_or_else(|| {
            let (b, e): (Vec<i64>, Vec<i64>) = (0..sp.len())
                .map(|i| same_pads(sp[i], self.kernel[i], self.stride[i], self.dilation[i]))
                .unzip();
            b.into_iter().chain(e).collect()
        })
    }

    /// y's channels-first dims for x's.
    fn infer(&self, ctx: &InferCtx, x: &[i64]) -> Result<Vec<i64>, OpError> {
        let n = self.kernel.len();
        let mut out = x[..2].to_vec();
        for i in 0..n {
            let input = x[2 + i];
            out.push(match &self.pads {
                _ if input < 0 => UNKNOWN,
                None => (input + self.stride[i] - 1) / self.stride[i],
                Some(p) => spatial(
                    ctx,
                    i,
                    Window {
                        input,
                        kernel: self.kernel[i],
                        stride: self.stride[i],
                        dilation: self.dilation[i],
                        pad_begin: p[i],
                        pad_end: p[n + i],
                        ceil: self.ceil,
                    },
                )?,
            });
        }
        Ok(out)
    }
}

fn infer_window(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let p = WindowPool::read(ctx)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let rank = p.kernel.len() + 2;
    if s.len() != rank {
        return Err(ctx.input_error(0, format!("is {s:?}; {} takes rank {rank}", ctx.op)));
    }
    let s = if p.cf {
        s.clone()
    } else {
        reorder(s, &cf_perm(rank))
    };
    let y = p.infer(ctx, &s)?;
    let y = if p.cf { y } else { reorder(&y, &cl_perm(rank)) };
    Ok(meta(x.dtype, Some(y)))
}

fn window_pool(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let p = WindowPool::read(ctx)?;
    let x = inputs[0];
    let rank = p.kernel.len() + 2;
    if x.rank() != rank {
        return Err(ctx.input_error(0, format!("is {:?}; takes rank {rank}", x.shape)));
    }
    let dims: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
    let dims = if p.cf {
        dims
    } else {
        reorder(&dims, &cf_perm(rank))
    };
    let attrs = onnx_attrs(vec![
        ("kernel_shape", Attr::Ints(p.kernel.clone())),
        ("strides", Attr::Ints(p.stride.clone())),
        ("dilations", Attr::Ints(p.dilation.clone())),
        ("pads", Attr::Ints(p.pads_for(&dims[2..]))),
        ("ceil_mode", Attr::Int(i64::from(p.ceil))),
        ("count_include_pad", Attr::Int(i64::from(p.include_pad))),
    ]);
    let onnx = with_attrs(ctx, &attrs);
    run_channels_first(ctx, p.cf, &inputs[..1], outputs, |ins, outs| {
        if p.max {
            pool::max_pool(&onnx, ins, outs)
        } else {
            pool::average_pool(&onnx, ins, outs)
        }
    })
}

// ---------------------------------------------------------------------------------------
// MaxPoolV2

/// The int values of input `i`: known to inference, or read from the tensor.
fn int_input(ctx: &InferCtx, i: usize, t: Option<&TensorRef>) -> Result<Option<Vec<i64>>, OpError> {
    if let Some(v) = ctx.value_ints(i)? {
        return Ok(Some(v));
    }
    let Some(t) = t else {
        return Ok(None);
    };
    match t.dtype {
        DType::I32 => Ok(Some(
            t.slice::<i32>()?.iter().map(|&v| i64::from(v)).collect(),
        )),
        DType::I64 => Ok(Some(t.slice::<i64>()?.to_vec())),
        other => Err(ctx.input_error(i, format!("is {other}, not int32 or int64"))),
    }
}

/// MaxPoolV2 as GE's TF-born MaxPool: its attributes with `ksize` and `strides` from
/// inputs 1 and 2; `None` while those are not known.
fn max_pool_attrs(ctx: &InferCtx, t: Option<&[TensorRef]>) -> Result<Option<Attrs>, OpError> {
    ctx.arity(3, 3)?;
    let ksize = int_input(ctx, 1, t.map(|t| &t[1]))?;
    let strides = int_input(ctx, 2, t.map(|t| &t[2]))?;
    let (Some(ksize), Some(strides)) = (ksize, strides) else {
        return Ok(None);
    };
    let mut attrs = ctx.attrs.clone();
    attrs.insert("ksize".into(), Attr::Ints(ksize));
    attrs.insert("strides".into(), Attr::Ints(strides));
    Ok(Some(attrs))
}

/// The context of GE's MaxPool on x alone with `attrs`.
fn as_max_pool<'a>(ctx: &InferCtx<'a>, attrs: &'a Attrs) -> InferCtx<'a> {
    InferCtx {
        op: "MaxPool",
        inputs: &ctx.inputs[..1],
        values: ctx.values.get(..1).unwrap_or_default(),
        attrs,
        outputs: ctx.outputs,
    }
}

fn infer_max_pool_v2(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let Some(attrs) = max_pool_attrs(ctx, None)? else {
        // The window is not known yet: N and C are, the spatial dims are not.
        let x = &ctx.inputs[0];
        let nchw = super::attrs::data_format(ctx, "NHWC")?;
        let shape = x.shape.as_ref().filter(|s| s.len() == 4).map(|s| {
            if nchw {
                vec![s[0], s[1], UNKNOWN, UNKNOWN]
            } else {
                vec![s[0], UNKNOWN, UNKNOWN, s[3]]
            }
        });
        return Ok(meta(x.dtype, shape));
    };
    super::pool::infer_tf_pool(&as_max_pool(ctx, &attrs))
}

fn max_pool_v2(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let attrs = max_pool_attrs(ctx, Some(inputs))?
        .ok_or_else(|| ctx.input_error(1, "ksize and strides are not known"))?;
    super::pool::max_pool(&as_max_pool(ctx, &attrs), &inputs[..1], outputs)
}

// ---------------------------------------------------------------------------------------
// Adaptive pools

/// The output size: the attribute, or input 1's values (`None` while unknown).
fn output_size(ctx: &InferCtx, t: Option<&[TensorRef]>) -> Result<Option<Vec<i64>>, OpError> {
    let v = if ctx.op == "AdaptiveAvgPool" {
        ctx.arity(2, 2)?;
        match int_input(ctx, 1, t.map(|t| &t[1]))? {
            Some(v) => v,
            None => return Ok(None),
        }
    } else {
        ctx.arity(1, 1)?;
        let v = required_list(ctx, "output_size")?;
        if v.len() != 2 {
            return Err(ctx.attr_error("output_size", format!("{v:?} is not (H, W)")));
        }
        v
    };
    if v.is_empty() || v.len() > 3 || v.iter().any(|&d| d < 1) {
        return Err(ctx.attr_error("output_size", format!("{v:?} is not 1 to 3 positive sizes")));
    }
    Ok(Some(v))
}

fn infer_adaptive(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let size = output_size(ctx, None)?;
    let x = &ctx.inputs[0];
    let shape = match (&x.shape, &size) {
        (Some(s), Some(size)) => {
            if s.len() <= size.len() {
                return Err(ctx.input_error(
                    0,
                    format!("is {s:?}; pooling {} dims needs a leading dim", size.len()),
                ));
            }
            let mut y = s[..s.len() - size.len()].to_vec();
            y.extend(size);
            Some(y)
        }
        _ => None,
    };
    let y = TensorMeta {
        dtype: x.dtype,
        shape: shape.clone(),
    };
    if ctx.op == "AdaptiveMaxPool2d" {
        return Ok(vec![
            y,
            TensorMeta {
                dtype: DType::I64,
                shape,
            },
        ]);
    }
    Ok(vec![y])
}

/// Output `i`'s window over a dim of `input` split into `out`: PyTorch's.
fn adaptive_range(i: usize, input: usize, out: usize) -> std::ops::Range<usize> {
    (i * input / out)..((i + 1) * input).div_ceil(out)
}

fn adaptive(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let size = output_size(ctx, Some(inputs))?
        .ok_or_else(|| ctx.input_error(1, "output_size is not known"))?;
    let x = inputs[0];
    let k = size.len();
    if x.rank() <= k {
        return Err(ctx.input_error(0, format!("is {:?}; pools its last {k} dims", x.shape)));
    }
    // The pooled dims promoted to three.
    let mut input = [1usize; 3];
    let mut out = [1usize; 3];
    input[3 - k..].copy_from_slice(&x.shape[x.rank() - k..]);
    for (o, &s) in out[3 - k..].iter_mut().zip(&size) {
        *o = s as usize;
    }
    let (y, rest) = outputs
        .split_first_mut()
        .ok_or_else(|| ctx.compute_error("no output"))?;
    let argmax = match rest.first_mut() {
        Some(a) => Some(a.slice_mut::<i64>()?),
        None => None,
    };
    let max = ctx.op == "AdaptiveMaxPool2d";
    dispatch!(x.dtype, T in [f32, f64, half::f16, half::bf16]
        => adaptive_typed::<T>(x.slice::<T>()?, y.slice_mut::<T>()?, argmax, input, out, max),
        other => return Err(ctx.input_error(0, format!("is {other}; float types are computed"))));
    Ok(())
}

fn adaptive_typed<T: Scalar>(
    x: &[T],
    y: &mut [T],
    mut argmax: Option<&mut [i64]>,
    input: [usize; 3],
    out: [usize; 3],
    max: bool,
) {
    let (ilen, olen) = (
        input.iter().product::<usize>(),
        out.iter().product::<usize>(),
    );
    if ilen == 0 || olen == 0 {
        return;
    }
    for (p, (xs, ys)) in x.chunks(ilen).zip(y.chunks_mut(olen)).enumerate() {
        let mut o = 0;
        for od in 0..out[0] {
            let rd = adaptive_range(od, input[0], out[0]);
            for oh in 0..out[1] {
                let rh = adaptive_range(oh, input[1], out[1]);
                for ow in 0..out[2] {
                    let rw = adaptive_range(ow, input[2], out[2]);
                    let (mut sum, mut best, mut at) = (0.0f64, f64::NEG_INFINITY, -1i64);
                    for d in rd.clone() {
                        for h in rh.clone() {
                            let row = (d * input[1] + h) * input[2];
                            for w in rw.clone() {
                                let v = xs[row + w].to_f64();
                                sum += v;
                                if at < 0 || v > best || v.is_nan() {
                                    best = v;
                                    at = (row + w) as i64;
                                }
                            }
                        }
                    }
                    let count = rd.len() * rh.len() * rw.len();
                    ys[o] = T::from_f64(if max { best } else { sum / count as f64 });
                    if let Some(a) = argmax.as_deref_mut() {
                        a[p * olen + o] = at;
                    }
                    o += 1;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// GlobalLpPool

fn infer_global_lp(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let p = ctx.attr_float("p", 2.0)?;
    if p.is_nan() || p <= 0.0 {
        return Err(ctx.attr_error("p", format!("{p} is not positive")));
    }
    let x = &ctx.inputs[0];
    let shape = match &x.shape {
        Some(s) if s.len() < 2 => {
            return Err(ctx.input_error(0, format!("is {s:?}; GlobalLpPool takes [N, C, ...]")));
        }
        Some(s) => Some(
            s.iter()
                .enumerate()
                .map(|(i, &d)| if i < 2 { d } else { 1 })
                .collect(),
        ),
        None => None,
    };
    Ok(meta(x.dtype, shape))
}

fn global_lp(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let p = f64::from(ctx.attr_float("p", 2.0)?);
    let x = inputs[0];
    if x.rank() < 2 {
        return Err(ctx.input_error(0, "takes [N, C, ...]"));
    }
    let plane: usize = x.shape[2..].iter().product();
    let y = &mut outputs[0];
    dispatch!(x.dtype, T in [f32, f64, half::f16, half::bf16] => {
        let ys = y.slice_mut::<T>()?;
        if plane == 0 {
            ys.fill(T::from_f64(0.0));
        } else {
            for (xs, out) in x.slice::<T>()?.chunks(plane).zip(ys.iter_mut()) {
                let s: f64 = xs.iter().map(|v| v.to_f64().abs().powf(p)).sum();
                *out = T::from_f64(s.powf(1.0 / p));
            }
        }
    }, other => return Err(ctx.input_error(0, format!("is {other}; float types are computed"))));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// MaxPoolWithArgmax

/// MaxPoolWithArgmax's attributes: the (h, w) window and stride, SAME or VALID, and the
/// index type.
struct ArgmaxPool {
    kernel: [i64; 2],
    stride: [i64; 2],
    same: bool,
    index: DType,
}

impl ArgmaxPool {
    fn read(ctx: &InferCtx) -> Result<ArgmaxPool, OpError> {
        ctx.arity(1, 1)?;
        let pick = |name: &str| -> Result<[i64; 2], OpError> {
            let v = by_format(
                ctx,
                name,
                &super::attrs::required_ints(ctx, name, 4)?,
                false,
                2,
            )?;
            Ok([v[0], v[1]])
        };
        let same = match ctx.attr_str("padding", "")? {
            "SAME" => true,
            "VALID" => false,
            "" => return Err(ctx.attr_error("padding", "is required and missing")),
            other => {
                return Err(ctx.attr_error("padding", format!("{other:?} is not SAME or VALID")));
            }
        };
        let index = match ctx.attrs.get("Targmax") {
            None => DType::I64,
            Some(Attr::DType(d @ (DType::I32 | DType::I64))) => *d,
            Some(Attr::Int(3)) => DType::I32,
            Some(Attr::Int(7 | 9)) => DType::I64,
            Some(other) => {
                return Err(ctx.attr_error("Targmax", format!("{other:?} is not int32 or int64")));
            }
        };
        Ok(ArgmaxPool {
            kernel: pick("ksize")?,
            stride: pick("strides")?,
            same,
            index,
        })
    }

    /// (Ho, Wo) and the ONNX pads [top, left, bottom, right] for x's (H, W).
    fn geometry(&self, ctx: &InferCtx, hw: [i64; 2]) -> Result<([i64; 2], [i64; 4]), OpError> {
        let mut out = [0; 2];
        let mut pads = [0; 4];
        for i in 0..2 {
            if hw[i] < 0 {
                out[i] = UNKNOWN;
            } else if self.same {
                out[i] = (hw[i] + self.stride[i] - 1) / self.stride[i];
                (pads[i], pads[2 + i]) = same_pads(hw[i], self.kernel[i], self.stride[i], 1);
            } else {
                if hw[i] < self.kernel[i] {
                    return Err(ctx.input_error(
                        0,
                        format!(
                            "spatial dim {i} of {} is below ksize {}",
                            hw[i], self.kernel[i]
                        ),
                    ));
                }
                out[i] = (hw[i] - self.kernel[i]) / self.stride[i] + 1;
            }
        }
        Ok((out, pads))
    }
}

fn infer_argmax_pool(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let p = ArgmaxPool::read(ctx)?;
    let x = &ctx.inputs[0];
    let shape = match &x.shape {
        Some(s) if s.len() != 4 => {
            return Err(ctx.input_error(0, format!("is {s:?}; takes NHWC [N, H, W, C]")));
        }
        Some(s) => {
            let ([ho, wo], _) = p.geometry(ctx, [s[1], s[2]])?;
            Some(vec![s[0], ho, wo, s[3]])
        }
        None => None,
    };
    Ok(vec![
        TensorMeta {
            dtype: x.dtype,
            shape: shape.clone(),
        },
        TensorMeta {
            dtype: p.index,
            shape,
        },
    ])
}

/// The library's MaxPool with indices on x permuted to NCHW; the values permuted back,
/// the indices (flat NCHW positions) rewritten as TensorFlow's NHWC ones.
fn argmax_pool(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let p = ArgmaxPool::read(ctx)?;
    let x = inputs[0];
    if x.rank() != 4 || outputs.len() != 2 {
        return Err(ctx.input_error(0, format!("is {:?}; takes NHWC with 2 outputs", x.shape)));
    }
    let [n, h, w, c] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let (_, pads) = p.geometry(ctx, [h as i64, w as i64])?;
    let [ho, wo] = [outputs[0].shape[1], outputs[0].shape[2]];
    let attrs = onnx_attrs(vec![
        ("kernel_shape", Attr::Ints(p.kernel.to_vec())),
        ("strides", Attr::Ints(p.stride.to_vec())),
        ("pads", Attr::Ints(pads.to_vec())),
    ]);
    let xt = permuted(ctx, &x, &[0, 3, 1, 2])?;
    let mut y = Tensor::zeroed(x.dtype, &[n, c, ho, wo]);
    let mut idx = Tensor::zeroed(DType::I64, &[n, c, ho, wo]);
    pool::max_pool(
        &with_attrs(ctx, &attrs),
        &[xt.as_ref()],
        &mut [y.as_mut(), idx.as_mut()],
    )?;
    let view = View::contiguous(&y.shape).permute(&[0, 2, 3, 1]);
    let out = &mut outputs[0];
    moved(
        ctx,
        copy_view(out.dtype.size(), y.data.as_bytes(), &view, out.data),
    )?;
    let batch = ctx.attr_bool("include_batch_in_index", false)?;
    let found = idx.slice::<i64>()?;
    let plane = h * w;
    // Output (b, oh, ow, ch), NHWC, reads the NCHW index at ((b * C + ch) * Ho + oh) * Wo
    // + ow, a flat position (b * C + ch) * H * W + hh * W + ww.
    let tf = |at: usize, b: usize, ch: usize| -> i64 {
        let v = found[at];
        if v < 0 {
            return -1;
        }
        let local = v as usize % plane.max(1);
        let base = if batch { b * plane * c } else { 0 };
        (base + local * c + ch) as i64
    };
    let index_of = |o: usize| {
        let (ch, rest) = (o % c, o / c);
        let (ow, rest) = (rest % wo, rest / wo);
        let (oh, b) = (rest % ho, rest / ho);
        tf(((b * c + ch) * ho + oh) * wo + ow, b, ch)
    };
    let argmax = &mut outputs[1];
    match argmax.dtype {
        DType::I64 => {
            for (o, d) in argmax.slice_mut::<i64>()?.iter_mut().enumerate() {
                *d = index_of(o);
            }
        }
        DType::I32 => {
            for (o, d) in argmax.slice_mut::<i32>()?.iter_mut().enumerate() {
                *d = i32::try_from(index_of(o))
                    .map_err(|_| ctx.compute_error("an index does not fit int32"))?;
            }
        }
        other => return Err(ctx.compute_error(format!("argmax of {other} is not computed"))),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Dilation2D

/// Dilation2D's attributes, checked.
struct Dilation {
    nchw: bool,
    stride: [i64; 2],
    rate: [i64; 2],
    mode: DilationPad,
}

enum DilationPad {
    Same,
    Valid,
    /// [top, bottom, left, right] and ceil mode.
    Calculated([i64; 4], bool),
}

impl Dilation {
    fn read(ctx: &InferCtx) -> Result<Dilation, OpError> {
        ctx.arity(2, 2)?;
        let nchw = super::attrs::data_format(ctx, "NHWC")?;
        let pick = |name: &str| -> Result<[i64; 2], OpError> {
            let v = by_format(
                ctx,
                name,
                &super::attrs::required_ints(ctx, name, 4)?,
                nchw,
                2,
            )?;
            Ok([v[0], v[1]])
        };
        let mode = match ctx.attr_str("padding_mode", "SAME")? {
            "SAME" => DilationPad::Same,
            "VALID" => DilationPad::Valid,
            "CALCULATED" => {
                let p = ints_or(ctx, "pads", &[0; 4])?;
                if p.iter().any(|&v| v < 0) {
                    return Err(ctx.attr_error("pads", format!("{p:?} has a negative value")));
                }
                DilationPad::Calculated(
                    [p[0], p[1], p[2], p[3]],
                    ctx.attr_bool("ceil_mode", false)?,
                )
            }
            other => {
                return Err(ctx.attr_error(
                    "padding_mode",
                    format!("{other:?} is not SAME, VALID or CALCULATED"),
                ));
            }
        };
        Ok(Dilation {
            nchw,
            stride: pick("strides")?,
            rate: pick("rates")?,
            mode,
        })
    }

    /// Output size and padding before, of spatial dim `i` of `input` under a filter of
    /// `k`.
    fn dim(&self, ctx: &InferCtx, i: usize, input: i64, k: i64) -> Result<(i64, i64), OpError> {
        if input < 0 || k < 0 {
            return Ok((UNKNOWN, 0));
        }
        let (s, r) = (self.stride[i], self.rate[i]);
        let span = (k - 1).saturating_mul(r).saturating_add(1);
        match self.mode {
            DilationPad::Same => Ok(((input + s - 1) / s, same_pads(input, k, s, r).0)),
            DilationPad::Valid if input < span => Err(ctx.input_error(
                0,
                format!("spatial dim {i} of {input} is below the dilated filter {span}"),
            )),
            DilationPad::Valid => Ok(((input - span) / s + 1, 0)),
            DilationPad::Calculated(p, ceil) => {
                let out = spatial(
                    ctx,
                    i,
                    Window {
                        input,
                        kernel: k,
                        stride: s,
                        dilation: r,
                        pad_begin: p[2 * i],
                        pad_end: p[2 * i + 1],
                        ceil,
                    },
                )?;
                Ok((out, p[2 * i]))
            }
        }
    }

    /// x's (N, C, H, W).
    fn nchw_dims<T: Copy>(&self, x: &[T]) -> [T; 4] {
        if self.nchw {
            [x[0], x[1], x[2], x[3]]
        } else {
            [x[0], x[3], x[1], x[2]]
        }
    }
}

fn infer_dilation(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let p = Dilation::read(ctx)?;
    let (x, f) = (&ctx.inputs[0], &ctx.inputs[1]);
    if f.dtype != x.dtype {
        return Err(ctx.input_error(1, format!("is {}, x is {}", f.dtype, x.dtype)));
    }
    let (Some(xs), Some(fs)) = (&x.shape, &f.shape) else {
        return Ok(meta(x.dtype, None));
    };
    if xs.len() != 4 || fs.len() != 3 {
        return Err(ctx.input_error(
            1,
            format!("x {xs:?} and filter {fs:?} are not 4-D and [kh, kw, C]"),
        ));
    }
    let [n, c, h, w] = p.nchw_dims(xs);
    if crate::ops::nn::agree(c, fs[2]).is_none() {
        return Err(ctx.input_error(1, format!("is {fs:?}; x has {c} channels")));
    }
    let (ho, _) = p.dim(ctx, 0, h, fs[0])?;
    let (wo, _) = p.dim(ctx, 1, w, fs[1])?;
    let y = if p.nchw {
        vec![n, c, ho, wo]
    } else {
        vec![n, ho, wo, c]
    };
    Ok(meta(x.dtype, Some(y)))
}

/// Strides (n, c, h, w) of a 4-D tensor of (N, C, H, W) `d` in NCHW or NHWC.
fn strides(d: [usize; 4], nchw: bool) -> [usize; 4] {
    let [_, c, h, w] = d;
    if nchw {
        [c * h * w, h * w, w, 1]
    } else {
        [h * w * c, 1, w * c, c]
    }
}

fn dilation(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let p = Dilation::read(ctx)?;
    let (x, f) = (inputs[0], inputs[1]);
    if x.rank() != 4 || f.rank() != 3 || outputs[0].rank() != 4 {
        return Err(ctx.input_error(1, "x is 4-D and the filter [kh, kw, C]"));
    }
    let xd = p.nchw_dims(x.shape);
    let yd = p.nchw_dims(outputs[0].shape);
    let (kh, kw) = (f.shape[0], f.shape[1]);
    let (_, top) = p.dim(ctx, 0, xd[2] as i64, kh as i64)?;
    let (_, left) = p.dim(ctx, 1, xd[3] as i64, kw as i64)?;
    let g = DilationGeometry {
        x: xd,
        y: yd,
        xs: strides(xd, p.nchw),
        ys: strides(yd, p.nchw),
        k: [kh, kw],
        stride: [p.stride[0] as usize, p.stride[1] as usize],
        rate: [p.rate[0] as usize, p.rate[1] as usize],
        begin: [top as isize, left as isize],
    };
    let y = &mut outputs[0];
    dispatch!(x.dtype, T in [f32, f64, half::f16, half::bf16, i32, i64, u8, i16, i8, u16]
        => dilate::<T>(&g, x.slice::<T>()?, f.slice::<T>()?, y.slice_mut::<T>()?),
        other => return Err(ctx.input_error(0, format!("{other} is not computed"))));
    Ok(())
}

/// Dilation2D's loop geometry: (N, C, H, W) dims and element strides of x and y.
struct DilationGeometry {
    x: [usize; 4],
    y: [usize; 4],
    xs: [usize; 4],
    ys: [usize; 4],
    k: [usize; 2],
    stride: [usize; 2],
    rate: [usize; 2],
    begin: [isize; 2],
}

fn dilate<T: Scalar>(g: &DilationGeometry, x: &[T], f: &[T], y: &mut [T]) {
    let [n, c, ho, wo] = g.y;
    let (h, w) = (g.x[2] as isize, g.x[3] as isize);
    for b in 0..n {
        for ch in 0..c {
            for oh in 0..ho {
                for ow in 0..wo {
                    let mut best = f64::NEG_INFINITY;
                    for i in 0..g.k[0] {
                        let hh = (oh * g.stride[0] + i * g.rate[0]) as isize - g.begin[0];
                        if hh < 0 || hh >= h {
                            continue;
                        }
                        for j in 0..g.k[1] {
                            let ww = (ow * g.stride[1] + j * g.rate[1]) as isize - g.begin[1];
                            if ww < 0 || ww >= w {
                                continue;
                            }
                            let at = b * g.xs[0]
                                + ch * g.xs[1]
                                + hh as usize * g.xs[2]
                                + ww as usize * g.xs[3];
                            let v = x[at].to_f64() + f[(i * g.k[1] + j) * c + ch].to_f64();
                            if v > best {
                                best = v;
                            }
                        }
                    }
                    let at = b * g.ys[0] + ch * g.ys[1] + oh * g.ys[2] + ow * g.ys[3];
                    y[at] = T::from_f64(best);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
