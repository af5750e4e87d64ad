//! GE's depthwise, transposed and 3-D convolutions and its bias additions, from the
//! prototypes of `prototypes/nn_calculation_ops.txt` (DepthwiseConv2D,
//! Conv2DBackpropInput, Conv2DBackpropInputD, Deconvolution, Conv3D, Conv3DTranspose,
//! Conv3DTransposeD) and `prototypes/elewise_calculation_ops.txt` (BiasAdd, Bias). Every
//! convolution is the library's Conv or ConvTranspose kernel with GE's attributes
//! translated; channels-last operands are permuted to channels-first around it
//! ([`run_channels_first`]), and the filter to ONNX's layout.
//!
//! - DepthwiseConv2D(x, filter, bias?, offset_w?; strides, pads required, dilations
//!   `[1,1,1,1]`, data_format "NHWC", offset_x 0): TensorFlow's depthwise convolution.
//!   The filter is HWCN `[kh, kw, C, multiplier]` or NCHW `[multiplier, C, kh, kw]`
//!   (ops-nn's DepthwiseConv2D documentation), told apart by its origin format as
//!   lowering records it ([`super::attrs::input_format`]); without one (an ONNX import, a
//!   unit test) it follows `data_format`: NHWC x, HWCN filter; NCHW x, NCHW filter. Output
//!   channel `c * multiplier + m` is input channel `c` under multiplier `m`, as
//!   TensorFlow's. `strides`/`dilations` are indexed by `data_format` (N and C entries
//!   1), `pads` is [top, bottom, left, right].
//! - Conv2DBackpropInput(input_size, filter, out_backprop) and Conv2DBackpropInputD
//!   (filter, out_backprop; input_size): TensorFlow's conv2d_backprop_input, the
//!   transposed convolution whose output has the shape `input_size` (in `data_format`
//!   order). The filter is the forward convolution's: HWCN `[kh, kw, Cin/groups, Cout]`,
//!   NHWC `[Cout, kh, kw, Cin/groups]` or NCHW `[Cout, Cin/groups, kh, kw]` by its origin
//!   format, else HWCN for NHWC data and NCHW for NCHW data. `input_size` must be a size
//!   the forward convolution maps onto out_backprop's (TensorFlow's check); output rows
//!   no window reaches are 0. An all-zero `input_size` (what GE's ONNX plugins write)
//!   leaves the size to the attributes: `stride * (in - 1) + dilated kernel - pads`.
//! - Deconvolution(x, filter, bias?, offset_w?; strides `[1,1]`, pads `[0,0,0,0]`,
//!   dilations `[1,1,1,1]`, groups 1, data_format "NCHW", offset_x 0): Caffe's
//!   deconvolution, NCHW only, filter `[Cin, Cout/groups, kh, kw]`, output
//!   `stride * (in - 1) + dilated kernel - pads`.
//! - Conv3D(x, filter, bias?, offset_w?; strides, pads required, dilations
//!   `[1,1,1,1,1]`, groups 1, data_format "NDHWC", offset_x 0): `pads` is [front, back,
//!   top, bottom, left, right]; the filter DHWCN, NDHWC or NCDHW by its origin format,
//!   else DHWCN for NDHWC data and NCDHW for NCDHW data.
//! - Conv3DTranspose(input_size, x, filter, bias?, offset_w?) and Conv3DTransposeD(x,
//!   filter, bias?, offset_w?; input_size), strides, pads required, dilations, groups,
//!   data_format "NDHWC", output_padding `[0,0,0,0,0]`, offset_x 0: the transposed 3-D
//!   convolution to `input_size`, as Conv2DBackpropInput; the filter `[Cin of x, Cout/
//!   groups, k...]` in NCDHW, `[kd, kh, kw, Cout/groups, Cin]` in DHWCN (TensorFlow's
//!   conv3d_transpose) or NDHWC. `output_padding` only sizes the output when
//!   `input_size` is all zeros.
//! - BiasAdd(x, bias; data_format "NHWC"): TensorFlow's, the 1-D bias added along the
//!   channel dim: the last for NHWC/NDHWC, dim 1 for NCHW/NCDHW; x of any rank >= 2.
//! - Bias(x, bias; axis 1, num_axes 1, bias_from_blob true): Caffe's, the bias added
//!   along x's dims from `axis`: `num_axes` of them (-1: all to the end, 0: a one-value
//!   bias) when `bias_from_blob`, else as many as the bias has dims.
//!
//! DepthwiseConv2D and Conv3D with int8 x and filter and an optional int32 bias compute
//! an int32 y, padded with `offset_x` ([`super::int8`]); the float forms and the
//! transposed convolutions refuse a non-zero `offset_x` and a given `offset_w`.
//!
//! rt2's choices where GE does not say: a filter origin format other than the ones
//! listed follows `data_format` as when none is recorded; Bias takes any bias with as
//! many values as x's covered dims hold (a Caffe blob may carry leading or trailing
//! dims of 1), in x's dim order.

use super::attrs::{given, input_format, ints_or, no_offset_w, no_offset_x, onnx_attrs};
use super::attrs::{required_ints, required_list, with_attrs};
use super::int8;
use super::layout::permuted;
use crate::formats::Format;
use crate::ops::elementwise::binary::compute_arithmetic;
use crate::ops::nn::{Window, agree, conv, spatial};
use crate::ops::shape::args::moved;
use crate::ops::shape::movement::{View, copy_view};
use crate::ops::{
    Attr, Attrs, ComputeFn, DType, InferCtx, InferFn, OpError, OpRegistry, OpSpec, Tensor,
    TensorMeta, TensorMut, TensorRef, TranslateFn, Translation, UNKNOWN, meta,
};

/// (op type, inputs whose values inference reads, inference, compute, translation).
type Entry = (
    &'static str,
    &'static [usize],
    InferFn,
    ComputeFn,
    Option<TranslateFn>,
);

const OPS: &[Entry] = &[
    ("DepthwiseConv2D", &[], infer_forward, forward, None),
    (
        "Conv3D",
        &[],
        infer_forward,
        forward,
        Some(translate_forward),
    ),
    (
        "Conv2DBackpropInput",
        &[0],
        infer_transposed,
        transposed,
        None,
    ),
    (
        "Conv2DBackpropInputD",
        &[],
        infer_transposed,
        transposed,
        None,
    ),
    ("Conv3DTranspose", &[0], infer_transposed, transposed, None),
    ("Conv3DTransposeD", &[], infer_transposed, transposed, None),
    (
        "Deconvolution",
        &[],
        infer_transposed,
        transposed,
        Some(translate_deconvolution),
    ),
    ("BiasAdd", &[], infer_bias, bias, None),
    ("Bias", &[], infer_bias, bias, None),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    for &(name, reads, infer, compute, translate) in OPS {
        let mut spec = OpSpec::new(name, infer).computes(compute);
        if !reads.is_empty() {
            spec = spec.reading(reads);
        }
        if let Some(t) = translate {
            spec = spec.translates(t);
        }
        reg.add(spec);
    }
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    OPS.iter().map(|e| e.0)
}

// ---------------------------------------------------------------------------------------
// Layouts

/// The permutation taking a channels-last tensor of `rank` (N, spatial..., C) to
/// channels-first (N, C, spatial...).
fn to_channels_first(rank: usize) -> Vec<usize> {
    let mut p = vec![0, rank - 1];
    p.extend(1..rank - 1);
    p
}

/// The permutation taking channels-first back to channels-last.
fn to_channels_last(rank: usize) -> Vec<usize> {
    let mut p = vec![0];
    p.extend(2..rank);
    p.push(1);
    p
}

/// `d` reordered by `perm` (output dim `k` is `d[perm[k]]`).
fn reorder<T: Copy>(d: &[T], perm: &[usize]) -> Vec<T> {
    perm.iter().map(|&p| d[p]).collect()
}

/// Runs `kernel`, which computes its outputs channels-first from operands whose operand
/// 0 is channels-first, for an op whose operand 0 and outputs are channels-first (`cf`)
/// or channels-last: then operand 0 is permuted in, and each output computed into a
/// channels-first scratch tensor and permuted out. Any rank from 3.
pub(super) fn run_channels_first(
    ctx: &InferCtx,
    cf: bool,
    operands: &[TensorRef],
    outputs: &mut [TensorMut],
    kernel: impl FnOnce(&[TensorRef], &mut [TensorMut]) -> Result<(), OpError>,
) -> Result<(), OpError> {
    if cf {
        return kernel(operands, outputs);
    }
    let rank = operands[0].rank();
    if rank < 3 || outputs.iter().any(|y| y.rank() != rank) {
        return Err(ctx.compute_error(format!(
            "channels-last operands of rank {rank} and outputs of another rank"
        )));
    }
    let x = permuted(ctx, &operands[0], &to_channels_first(rank))?;
    let mut scratch: Vec<Tensor> = outputs
        .iter()
        .map(|y| Tensor::zeroed(y.dtype, &reorder(y.shape, &to_channels_first(rank))))
        .collect();
    let mut ins: Vec<TensorRef> = operands.to_vec();
    ins[0] = x.as_ref();
    {
        let mut outs: Vec<TensorMut> = scratch.iter_mut().map(Tensor::as_mut).collect();
        kernel(&ins, &mut outs)?;
    }
    let back = to_channels_last(rank);
    for (s, y) in scratch.iter().zip(outputs.iter_mut()) {
        let view = View::contiguous(&s.shape).permute(&back);
        moved(
            ctx,
            copy_view(y.dtype.size(), s.data.as_bytes(), &view, y.data),
        )?;
    }
    Ok(())
}

/// Reads `data_format` for `n` spatial dims (NCHW/NHWC, NCDHW/NDHWC): whether the
/// channels come first.
pub(super) fn channels_first(ctx: &InferCtx, default: &str, n: usize) -> Result<bool, OpError> {
    let f = ctx.attr_str("data_format", default)?;
    match (n, f) {
        (2, "NCHW") | (3, "NCDHW") => Ok(true),
        (2, "NHWC") | (3, "NDHWC") => Ok(false),
        _ => Err(ctx.attr_error(
            "data_format",
            format!(
                "{f:?} is not {}",
                if n == 2 {
                    "NCHW or NHWC"
                } else {
                    "NCDHW or NDHWC"
                }
            ),
        )),
    }
}

/// The spatial entries of a list attribute of `n + 2` values in `data_format` order
/// whose N and C entries are 1 and spatial entries positive.
pub(super) fn by_format(
    ctx: &InferCtx,
    name: &str,
    v: &[i64],
    cf: bool,
    n: usize,
) -> Result<Vec<i64>, OpError> {
    if v.len() != n + 2 {
        return Err(ctx.attr_error(name, format!("{v:?} does not have {} values", n + 2)));
    }
    let (c, sp) = if cf {
        (v[1], &v[2..])
    } else {
        (v[n + 1], &v[1..=n])
    };
    if v[0] != 1 || c != 1 {
        return Err(ctx.attr_error(name, format!("{v:?}: the N and C entries must be 1")));
    }
    if sp.iter().any(|&s| s < 1) {
        return Err(ctx.attr_error(name, format!("{v:?}: the spatial entries must be positive")));
    }
    Ok(sp.to_vec())
}

/// GE's per-dim [begin, end] pads (`2 n` values, none negative) in ONNX's order: every
/// begin, then every end.
pub(super) fn onnx_pads(
    ctx: &InferCtx,
    name: &str,
    v: &[i64],
    n: usize,
) -> Result<Vec<i64>, OpError> {
    if v.len() != 2 * n || v.iter().any(|&p| p < 0) {
        return Err(ctx.attr_error(
            name,
            format!("{v:?} is not {} values >= 0 ([begin, end] per dim)", 2 * n),
        ));
    }
    Ok((0..n)
        .map(|i| v[2 * i])
        .chain((0..n).map(|i| v[2 * i + 1]))
        .collect())
}

/// The permutation taking filter input `i` of `rank` to ONNX's `[N, C, k...]` order of
/// its format (N and C as the filter's format names them), by the filter's origin format
/// when recorded, else channels-first data's NC... filter or channels-last data's ...CN.
fn filter_perm(ctx: &InferCtx, i: usize, cf: bool, rank: usize) -> Vec<usize> {
    let identity: Vec<usize> = (0..rank).collect();
    let mut spatial_cn = vec![rank - 1, rank - 2];
    spatial_cn.extend(0..rank - 2);
    match input_format(ctx, i) {
        Some(Format::Nchw | Format::Ncdhw) => identity,
        Some(Format::Nhwc | Format::Ndhwc) => to_channels_first(rank),
        Some(Format::Hwcn | Format::Dhwcn) => spatial_cn,
        _ if cf => identity,
        _ => spatial_cn,
    }
}

// ---------------------------------------------------------------------------------------
// Convolutions

/// Which convolution: what the attributes and inputs of each op type mean.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Depthwise,
    Conv3d,
    /// Conv2DBackpropInput(D), Conv3DTranspose(D): sized by `input_size`.
    Sized,
    Deconvolution,
}

/// A convolution's attributes and operands, checked.
struct Conv {
    kind: Kind,
    /// Data channels-first (NCHW, NCDHW).
    cf: bool,
    /// Spatial dims.
    n: usize,
    stride: Vec<i64>,
    dilation: Vec<i64>,
    /// ONNX order: every begin, then every end.
    pads: Vec<i64>,
    groups: i64,
    /// Inputs: the data, the filter, the bias.
    x: usize,
    w: usize,
    bias: Option<usize>,
    /// `input_size` input (`Some(0)`) or attribute (`None`) of the sized kinds.
    size_input: Option<usize>,
}

impl Conv {
    fn read(ctx: &InferCtx) -> Result<Conv, OpError> {
        let op = ctx.op;
        let (kind, n) = match op {
            "DepthwiseConv2D" => (Kind::Depthwise, 2),
            "Conv3D" => (Kind::Conv3d, 3),
            "Deconvolution" => (Kind::Deconvolution, 2),
            "Conv3DTranspose" | "Conv3DTransposeD" => (Kind::Sized, 3),
            _ => (Kind::Sized, 2),
        };
        // (x, filter, bias, offset_w, input_size input); the arity each op takes.
        let (x, w, bias, offset_w, size_input) = match op {
            "Conv2DBackpropInput" => (2, 1, None, None, Some(0)),
            "Conv2DBackpropInputD" => (1, 0, None, None, None),
            "Conv3DTranspose" => (1, 2, Some(3), Some(4), Some(0)),
            _ => (0, 1, Some(2), Some(3), None),
        };
        let required = x.max(w) + 1;
        ctx.arity(required, offset_w.map_or(required, |o| o + 1))?;
        if let Some(o) = offset_w {
            if matches!(kind, Kind::Depthwise | Kind::Conv3d) {
                int8::check(ctx, x, w, bias, Some(o))?;
            } else {
                no_offset_w(ctx, o)?;
                no_offset_x(ctx)?;
            }
        }
        let ones = vec![1; n + 2];
        let (cf, stride, dilation, pads) = if kind == Kind::Deconvolution {
            if ctx.attr_str("data_format", "NCHW")? != "NCHW" {
                return Err(ctx.attr_error("data_format", "only NCHW is computed"));
            }
            let stride = ints_or(ctx, "strides", &[1, 1])?;
            if stride.iter().any(|&s| s < 1) {
                return Err(ctx.attr_error("strides", format!("{stride:?} is not positive")));
            }
            let dilation = ints_or(ctx, "dilations", &ones)?;
            let pads = ints_or(ctx, "pads", &[0, 0, 0, 0])?;
            (
                true,
                stride,
                by_format(ctx, "dilations", &dilation, true, n)?,
                onnx_pads(ctx, "pads", &pads, n)?,
            )
        } else {
            let cf = channels_first(ctx, if n == 2 { "NHWC" } else { "NDHWC" }, n)?;
            let stride = required_ints(ctx, "strides", n + 2)?;
            let pads = required_ints(ctx, "pads", 2 * n)?;
            let dilation = ints_or(ctx, "dilations", &ones)?;
            (
                cf,
                by_format(ctx, "strides", &stride, cf, n)?,
                by_format(ctx, "dilations", &dilation, cf, n)?,
                onnx_pads(ctx, "pads", &pads, n)?,
            )
        };
        let groups = if kind == Kind::Depthwise {
            1
        } else {
            ctx.attr_int("groups", 1)?
        };
        if groups < 1 {
            return Err(ctx.attr_error("groups", format!("{groups} is not positive")));
        }
        Ok(Conv {
            kind,
            cf,
            n,
            stride,
            dilation,
            pads,
            groups,
            x,
            w,
            bias,
            size_input,
        })
    }

    fn transposed(&self) -> bool {
        matches!(self.kind, Kind::Sized | Kind::Deconvolution)
    }

    /// The permutation taking the filter to ONNX's weight layout (Conv: `[Cout, Cin/g,
    /// k...]`; ConvTranspose: `[Cin, Cout/g, k...]`; depthwise: `[C, multiplier, k...]`,
    /// read as `[C * multiplier, 1, k...]`).
    fn filter_perm(&self, ctx: &InferCtx) -> Vec<usize> {
        let mut p = filter_perm(ctx, self.w, self.cf, self.n + 2);
        if self.kind == Kind::Depthwise {
            p.swap(0, 1);
        }
        p
    }

    /// The library kernel's attributes; `groups` is the depthwise channel count there.
    fn onnx(&self, groups: i64) -> Attrs {
        onnx_attrs(vec![
            ("group", Attr::Int(groups)),
            ("strides", Attr::Ints(self.stride.clone())),
            ("dilations", Attr::Ints(self.dilation.clone())),
            ("pads", Attr::Ints(self.pads.clone())),
        ])
    }

    /// The dilated kernel width along spatial dim `i`.
    fn span(&self, i: usize, k: i64) -> i64 {
        (k - 1).saturating_mul(self.dilation[i]).saturating_add(1)
    }

    /// `input_size` (y's dims in `data_format` order), `None` when not known or all
    /// zeros (the attributes then size y).
    fn size(&self, ctx: &InferCtx) -> Result<Option<Vec<i64>>, OpError> {
        let size = match (self.kind, self.size_input) {
            (Kind::Sized, Some(i)) => ctx.value_ints(i)?,
            (Kind::Sized, None) => Some(required_list(ctx, "input_size")?),
            _ => return Ok(None),
        };
        let Some(size) = size else {
            return Ok(None);
        };
        if size.len() != self.n + 2 {
            return Err(ctx.attr_error(
                "input_size",
                format!("{size:?} does not have {} dims", self.n + 2),
            ));
        }
        if size.iter().all(|&d| d == 0) {
            return Ok(None);
        }
        if size.iter().any(|&d| d < 0) {
            return Err(ctx.attr_error("input_size", format!("{size:?} has a negative dim")));
        }
        Ok(Some(size))
    }
}

/// y's channels-first dims for a forward convolution: x `[N, C, D...]`, the ONNX-ordered
/// filter `f`.
fn forward_dims(ctx: &InferCtx, p: &Conv, x: &[i64], f: &[i64]) -> Result<Vec<i64>, OpError> {
    let c = x[1];
    let cout = if p.kind == Kind::Depthwise {
        // [C, multiplier, k...]
        if agree(c, f[0]).is_none() {
            return Err(ctx.input_error(p.w, format!("{} channels in the filter, x has {c}", f[0])));
        }
        if f[0] < 0 || f[1] < 0 {
            UNKNOWN
        } else {
            f[0] * f[1]
        }
    } else {
        if c >= 0 && f[1] >= 0 && c != f[1].saturating_mul(p.groups) {
            return Err(ctx.input_error(
                p.w,
                format!(
                    "{c} input channels, the filter {f:?} expects {} x groups {}",
                    f[1], p.groups
                ),
            ));
        }
        if f[0] >= 0 && f[0] % p.groups != 0 {
            return Err(ctx.attr_error(
                "groups",
                format!("{} does not divide {} output channels", p.groups, f[0]),
            ));
        }
        f[0]
    };
    let mut out = vec![x[0], cout];
    for i in 0..p.n {
        out.push(if f[2 + i] < 0 {
            UNKNOWN
        } else {
            spatial(
                ctx,
                i,
                Window {
                    input: x[2 + i],
                    kernel: f[2 + i],
                    stride: p.stride[i],
                    dilation: p.dilation[i],
                    pad_begin: p.pads[i],
                    pad_end: p.pads[p.n + i],
                    ceil: false,
                },
            )?
        });
    }
    Ok(out)
}

/// y's channels-first dims for a transposed convolution: x `[N, Cin, D...]`, the
/// ONNX-ordered filter `f` `[Cin, Cout/g, k...]`.
fn transposed_dims(ctx: &InferCtx, p: &Conv, x: &[i64], f: &[i64]) -> Result<Vec<i64>, OpError> {
    if agree(x[1], f[0]).is_none() {
        return Err(ctx.input_error(
            p.w,
            format!(
                "the filter {f:?} is for {} input channels, x has {}",
                f[0], x[1]
            ),
        ));
    }
    let cout = if f[1] < 0 {
        UNKNOWN
    } else {
        f[1].saturating_mul(p.groups)
    };
    if x[1] >= 0 && x[1] % p.groups != 0 {
        return Err(ctx.attr_error(
            "groups",
            format!("{} does not divide {} input channels", p.groups, x[1]),
        ));
    }
    let padding = |i: usize| p.pads[i] + p.pads[p.n + i];
    if let Some(size) = p.size(ctx)? {
        let size = if p.cf {
            size
        } else {
            reorder(&size, &to_channels_first(p.n + 2))
        };
        let mismatch = |what: &str| {
            ctx.attr_error(
                "input_size",
                format!("{size:?} (channels first) does not fit {what}"),
            )
        };
        if agree(size[0], x[0]).is_none() {
            return Err(mismatch("x's batch"));
        }
        if agree(size[1], cout).is_none() {
            return Err(mismatch("the filter's output channels"));
        }
        for i in 0..p.n {
            let (y, xi, k) = (size[2 + i], x[2 + i], f[2 + i]);
            if xi >= 0 && k >= 0 {
                let span = y + padding(i) - p.span(i, k);
                if span < 0 || span / p.stride[i] + 1 != xi {
                    return Err(mismatch(&format!(
                        "x's spatial dim {i} of {xi} under the forward convolution"
                    )));
                }
            }
        }
        return Ok(size);
    }
    if p.kind == Kind::Sized && p.size_input.is_some() && ctx.value_ints(0)?.is_none() {
        let mut out = vec![x[0], cout];
        out.extend(std::iter::repeat_n(UNKNOWN, p.n));
        return Ok(out);
    }
    let out_pad = if p.kind == Kind::Sized && p.n == 3 {
        by_output_padding(ctx, p)?
    } else {
        vec![0; p.n]
    };
    let mut out = vec![x[0], cout];
    for i in 0..p.n {
        let (xi, k) = (x[2 + i], f[2 + i]);
        if xi < 0 || k < 0 {
            out.push(UNKNOWN);
            continue;
        }
        let d = p.stride[i]
            .saturating_mul(xi - 1)
            .saturating_add(p.span(i, k))
            .saturating_add(out_pad[i])
            - padding(i);
        if d < 0 {
            return Err(ctx.attr_error(
                "pads",
                format!("spatial dim {i}: the output would have {d} elements"),
            ));
        }
        out.push(d);
    }
    Ok(out)
}

/// Conv3DTranspose's `output_padding` (5 values in `data_format` order), spatial entries.
fn by_output_padding(ctx: &InferCtx, p: &Conv) -> Result<Vec<i64>, OpError> {
    let v = ints_or(ctx, "output_padding", &[0; 5])?;
    let sp = if p.cf { &v[2..] } else { &v[1..4] };
    if sp.iter().any(|&d| d < 0) {
        return Err(ctx.attr_error("output_padding", format!("{v:?} has a negative value")));
    }
    Ok(sp.to_vec())
}

/// The metas of x and the filter, channels-first and ONNX-ordered, when both are known
/// and of rank `n + 2`.
fn operand_dims(ctx: &InferCtx, p: &Conv) -> Result<Option<[Vec<i64>; 2]>, OpError> {
    let (Some(x), Some(f)) = (&ctx.inputs[p.x].shape, &ctx.inputs[p.w].shape) else {
        return Ok(None);
    };
    let rank = p.n + 2;
    if x.len() != rank {
        return Err(ctx.input_error(p.x, format!("is {x:?}; {} takes rank {rank}", ctx.op)));
    }
    if f.len() != rank {
        return Err(ctx.input_error(p.w, format!("is {f:?}; the filter has rank {rank}")));
    }
    let x = if p.cf {
        x.clone()
    } else {
        reorder(x, &to_channels_first(rank))
    };
    Ok(Some([x, reorder(f, &p.filter_perm(ctx))]))
}

/// The bias, if given, must be 1-D with one value per output channel.
fn check_bias(ctx: &InferCtx, p: &Conv, cout: i64) -> Result<(), OpError> {
    let Some(b) = p.bias.filter(|&b| given(ctx, b)) else {
        return Ok(());
    };
    if let Some(s) = &ctx.inputs[b].shape
        && (s.len() != 1 || agree(s[0], cout).is_none())
    {
        return Err(ctx.input_error(b, format!("bias {s:?} for {cout} output channels")));
    }
    Ok(())
}

/// y in `data_format` order.
fn infer_conv(ctx: &InferCtx, p: &Conv) -> Result<Vec<TensorMeta>, OpError> {
    let dtype = if p.transposed() {
        ctx.inputs[p.x].dtype
    } else {
        int8::check(ctx, p.x, p.w, p.bias, None)?
    };
    let Some([x, f]) = operand_dims(ctx, p)? else {
        if p.transposed()
            && let Some(size) = p.size(ctx)?
        {
            return Ok(meta(dtype, Some(size)));
        }
        return Ok(meta(dtype, None));
    };
    let y = if p.transposed() {
        transposed_dims(ctx, p, &x, &f)?
    } else {
        forward_dims(ctx, p, &x, &f)?
    };
    check_bias(ctx, p, y[1])?;
    let y = if p.cf {
        y
    } else {
        reorder(&y, &to_channels_last(p.n + 2))
    };
    Ok(meta(dtype, Some(y)))
}

fn infer_forward(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    infer_conv(ctx, &Conv::read(ctx)?)
}

fn infer_transposed(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    infer_conv(ctx, &Conv::read(ctx)?)
}

/// The library's Conv or ConvTranspose on x, the filter in ONNX's layout and the bias,
/// channels-last data permuted around it.
fn compute_conv(
    ctx: &InferCtx,
    p: &Conv,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, w) = (inputs[p.x], inputs[p.w]);
    let rank = p.n + 2;
    if x.rank() != rank || w.rank() != rank {
        return Err(ctx.input_error(
            p.x,
            format!(
                "x {:?} and filter {:?} are not of rank {rank}",
                x.shape, w.shape
            ),
        ));
    }
    let perm = p.filter_perm(ctx);
    let owned;
    let w = if perm.iter().enumerate().all(|(k, &q)| k == q) {
        w
    } else {
        owned = permuted(ctx, &w, &perm)?;
        owned.as_ref()
    };
    let mut groups = p.groups;
    let depthwise_shape: Vec<usize>;
    let w = if p.kind == Kind::Depthwise {
        // [C, multiplier, k...] read as [C * multiplier, 1, k...]: output channel
        // c * multiplier + m.
        let c = w.shape[0];
        groups = c as i64;
        depthwise_shape = [c * w.shape[1], 1]
            .into_iter()
            .chain(w.shape[2..].iter().copied())
            .collect();
        TensorRef::new(w.dtype, &depthwise_shape, w.data)
    } else {
        w
    };
    let mut operands = vec![x, w];
    if let Some(b) = p
        .bias
        .filter(|&b| b < inputs.len() && !inputs[b].is_empty())
    {
        operands.push(inputs[b]);
    }
    let attrs = p.onnx(groups);
    let onnx = with_attrs(ctx, &attrs);
    let transposed = p.transposed();
    if !transposed && x.dtype == DType::I8 {
        let offset = int8::offset_x(ctx)?;
        return run_channels_first(ctx, p.cf, &operands, outputs, |ins, outs| {
            int8::conv(&onnx, offset, ins, outs)
        });
    }
    run_channels_first(ctx, p.cf, &operands, outputs, |ins, outs| {
        if transposed {
            crate::ops::nn::conv_transpose::conv_transpose(&onnx, ins, outs)
        } else {
            conv::conv(&onnx, ins, outs)
        }
    })
}

fn forward(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    compute_conv(ctx, &Conv::read(ctx)?, inputs, outputs)
}

fn transposed(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    compute_conv(ctx, &Conv::read(ctx)?, inputs, outputs)
}

/// Conv3D with NCDHW data and an NCDHW filter as the library's Conv.
fn translate_forward(ctx: &InferCtx) -> Option<Translation> {
    let p = Conv::read(ctx).ok()?;
    let identity = p.filter_perm(ctx).iter().enumerate().all(|(k, &q)| k == q);
    let float = !int8::quantized(ctx, p.x);
    (p.kind == Kind::Conv3d && p.cf && identity && float).then(|| Translation {
        first: 0,
        op: "Conv",
        attrs: p.onnx(p.groups),
        inputs: ctx.inputs.len().min(3),
    })
}

/// Deconvolution as the library's ConvTranspose (its own layout).
fn translate_deconvolution(ctx: &InferCtx) -> Option<Translation> {
    let p = Conv::read(ctx).ok()?;
    Some(Translation {
        first: 0,
        op: "ConvTranspose",
        attrs: p.onnx(p.groups),
        inputs: ctx.inputs.len().min(3),
    })
}

// ---------------------------------------------------------------------------------------
// BiasAdd and Bias

/// Where the bias goes: x's dims `at..at + len` hold the bias's values.
struct BiasPlace {
    at: usize,
    len: usize,
}

/// BiasAdd's channel dim, or Bias's covered dims, for x of `rank` and a bias of
/// `bias_rank`.
fn bias_place(ctx: &InferCtx, rank: usize, bias_rank: usize) -> Result<BiasPlace, OpError> {
    if ctx.op == "BiasAdd" {
        if rank < 2 {
            return Err(ctx.input_error(0, format!("has rank {rank}; BiasAdd takes rank >= 2")));
        }
        let at = match ctx.attr_str("data_format", "NHWC")? {
            "NHWC" | "NDHWC" => rank - 1,
            "NCHW" | "NCDHW" => 1,
            other => {
                return Err(ctx.attr_error(
                    "data_format",
                    format!("{other:?} is not NHWC, NDHWC, NCHW or NCDHW"),
                ));
            }
        };
        return Ok(BiasPlace { at, len: 1 });
    }
    let axis = ctx.attr_int("axis", 1)?;
    let at = ctx.axis(axis, rank, "axis")?;
    let len = if ctx.attr_bool("bias_from_blob", true)? {
        match ctx.attr_int("num_axes", 1)? {
            -1 => rank - at,
            k if k >= 0 => k as usize,
            k => return Err(ctx.attr_error("num_axes", format!("{k} is below -1"))),
        }
    } else {
        bias_rank
    };
    if at + len > rank {
        return Err(ctx.attr_error(
            "num_axes",
            format!("{len} dims from axis {at} pass x's rank {rank}"),
        ));
    }
    Ok(BiasPlace { at, len })
}

fn infer_bias(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let (x, b) = (&ctx.inputs[0], &ctx.inputs[1]);
    if b.dtype != x.dtype {
        return Err(ctx.input_error(1, format!("is {}, x is {}", b.dtype, x.dtype)));
    }
    let (Some(xs), Some(bs)) = (&x.shape, &b.shape) else {
        return Ok(vec![x.clone()]);
    };
    let place = bias_place(ctx, xs.len(), bs.len())?;
    if ctx.op == "BiasAdd" && (bs.len() != 1 || agree(bs[0], xs[place.at]).is_none()) {
        return Err(ctx.input_error(
            1,
            format!("is {bs:?}; x {xs:?} has {} channels", xs[place.at]),
        ));
    }
    let covered = &xs[place.at..place.at + place.len];
    if covered.iter().chain(bs).all(|&d| d >= 0)
        && covered.iter().product::<i64>() != bs.iter().product::<i64>()
    {
        return Err(ctx.input_error(
            1,
            format!("is {bs:?}; x {xs:?} has {covered:?} from axis {}", place.at),
        ));
    }
    Ok(vec![x.clone()])
}

/// x plus the bias, reshaped to broadcast over x's covered dims, by the library's Add.
fn bias(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let (x, b) = (inputs[0], inputs[1]);
    let place = bias_place(ctx, x.rank(), b.rank())?;
    let covered = &x.shape[place.at..place.at + place.len];
    if covered.iter().product::<usize>() != b.len() {
        return Err(ctx.input_error(
            1,
            format!("is {:?}; x {:?} has {covered:?}", b.shape, x.shape),
        ));
    }
    let shape: Vec<usize> = covered
        .iter()
        .copied()
        .chain(std::iter::repeat_n(1, x.rank() - place.at - place.len))
        .collect();
    let add = InferCtx {
        op: "Add",
        inputs: ctx.inputs,
        values: ctx.values,
        attrs: ctx.attrs,
        outputs: ctx.outputs,
    };
    let b = TensorRef::new(b.dtype, &shape, b.data);
    compute_arithmetic(&add, &[x, b], outputs)
}

#[cfg(test)]
mod tests;
