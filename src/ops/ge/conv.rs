//! Conv2D (ops-nn `conv/conv2d/op_graph/conv2d_proto.h`): x, filter, optional bias,
//! optional offset_w; `strides` and `pads` required, `dilations` `[1,1,1,1]`, `groups` 1,
//! `data_format` "NHWC", `offset_x` 0.
//!
//! `strides` and `dilations` are indexed by `data_format` (their N and C entries must be
//! 1); `pads` is [top, bottom, left, right] whatever the format. The filter's layout
//! follows `data_format` as GE's table of supported formats pairs them: NCHW input with an
//! NCHW filter `[Cout, Cin/groups, kh, kw]`, NHWC input with an HWCN filter
//! `[kh, kw, Cin/groups, Cout]` (TensorFlow's). GE also accepts NCHW input with an HWCN
//! filter, told apart by the filter's tensor format, which an op does not see: rt2 takes
//! an NCHW input's filter as NCHW.
//!
//! int8 x with an int8 filter and an optional int32 bias computes an int32 y, padded with
//! `offset_x` ([`super::int8`]); a float x takes neither an int8 filter nor a non-zero
//! `offset_x` or a given `offset_w`.

use super::attrs::{data_format, given, ints_or, onnx_attrs, required_ints, with_attrs};
use super::int8;
use super::layout::{HWCN_TO_NCHW, permuted, run_nchw};
use crate::ops::nn::{Window, agree, conv, epilogue, spatial};
use crate::ops::{
    Attr, DType, InferCtx, OpError, TensorMeta, TensorMut, TensorRef, Translation, UNKNOWN, meta,
};

/// Conv2D's attributes, checked.
struct Conv2d {
    nchw: bool,
    /// (h, w).
    stride: [i64; 2],
    dilation: [i64; 2],
    /// top, bottom, left, right.
    pads: [i64; 4],
    groups: i64,
    /// ONNX's `auto_pad`, which the Conv plugin keeps: "NOTSET", "SAME_UPPER",
    /// "SAME_LOWER" or "VALID".
    auto_pad: &'static str,
}

/// The (h, w) entries of a 4-value NCHW/NHWC list attribute whose N and C entries are 1.
fn hw(ctx: &InferCtx, name: &str, v: &[i64], nchw: bool) -> Result<[i64; 2], OpError> {
    let (n, c, h, w) = if nchw {
        (v[0], v[1], v[2], v[3])
    } else {
        (v[0], v[3], v[1], v[2])
    };
    if n != 1 || c != 1 {
        return Err(ctx.attr_error(name, format!("{v:?}: the N and C entries must be 1")));
    }
    if h < 1 || w < 1 {
        return Err(ctx.attr_error(name, format!("{v:?}: the H and W entries must be positive")));
    }
    Ok([h, w])
}

impl Conv2d {
    fn read(ctx: &InferCtx) -> Result<Conv2d, OpError> {
        let nchw = data_format(ctx, "NHWC")?;
        let strides = required_ints(ctx, "strides", 4)?;
        let pads = required_ints(ctx, "pads", 4)?;
        let dilations = ints_or(ctx, "dilations", &[1, 1, 1, 1])?;
        if pads.iter().any(|&p| p < 0) {
            return Err(ctx.attr_error("pads", format!("{pads:?} has a negative value")));
        }
        let groups = ctx.attr_int("groups", 1)?;
        if groups < 1 {
            return Err(ctx.attr_error("groups", format!("{groups} is not positive")));
        }
        let auto_pad = match ctx.attr_str("auto_pad", "NOTSET")? {
            "NOTSET" | "" => "NOTSET",
            "SAME_UPPER" => "SAME_UPPER",
            "SAME_LOWER" => "SAME_LOWER",
            "VALID" => "VALID",
            other => {
                return Err(ctx.attr_error(
                    "auto_pad",
                    format!("{other:?} is not NOTSET, SAME_UPPER, SAME_LOWER or VALID"),
                ));
            }
        };
        Ok(Conv2d {
            auto_pad,
            nchw,
            stride: hw(ctx, "strides", &strides, nchw)?,
            dilation: hw(ctx, "dilations", &dilations, nchw)?,
            pads: [pads[0], pads[1], pads[2], pads[3]],
            groups,
        })
    }

    /// The ONNX Conv attributes of the same convolution (pads as [top, left, bottom, right]).
    fn onnx(&self) -> crate::ops::Attrs {
        let [t, b, l, r] = self.pads;
        let mut attrs = vec![
            ("group", Attr::Int(self.groups)),
            ("strides", Attr::Ints(self.stride.to_vec())),
            ("dilations", Attr::Ints(self.dilation.to_vec())),
        ];
        attrs.push(match self.auto_pad {
            "NOTSET" => ("pads", Attr::Ints(vec![t, l, b, r])),
            mode => ("auto_pad", Attr::Str(mode.to_string())),
        });
        onnx_attrs(attrs)
    }
}

/// y: NCHW `[N, Cout, Ho, Wo]` or NHWC `[N, Ho, Wo, Cout]`.
pub fn infer_conv2d(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 4)?;
    let p = Conv2d::read(ctx)?;
    let dtype = int8::check(ctx, 0, 1, Some(2), Some(3))?;
    let (Some(x), Some(f)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape) else {
        return Ok(meta(dtype, None));
    };
    if x.len() != 4 {
        return Err(ctx.input_error(0, format!("is {x:?}; Conv2D takes a 4-D x")));
    }
    if f.len() != 4 {
        return Err(ctx.input_error(1, format!("is {f:?}; Conv2D takes a 4-D filter")));
    }
    // (N, C, H, W) of x; (Cout, Cin/groups, kh, kw) of the filter.
    let (n, c, h, w) = if p.nchw {
        (x[0], x[1], x[2], x[3])
    } else {
        (x[0], x[3], x[1], x[2])
    };
    let (cout, cg, kh, kw) = if p.nchw {
        (f[0], f[1], f[2], f[3])
    } else {
        (f[3], f[2], f[0], f[1])
    };
    if c >= 0 && cg >= 0 && c != cg.saturating_mul(p.groups) {
        let layout = if p.nchw { "NCHW" } else { "HWCN" };
        return Err(ctx.input_error(
            1,
            format!(
                "{c} input channels, the {layout} filter {f:?} expects {cg} x groups {}",
                p.groups
            ),
        ));
    }
    if cout >= 0 && cout % p.groups != 0 {
        return Err(ctx.attr_error(
            "groups",
            format!("{} does not divide {cout} output channels", p.groups),
        ));
    }
    let dim = |i: usize, input: i64, kernel: i64| -> Result<i64, OpError> {
        if kernel < 0 {
            return Ok(UNKNOWN);
        }
        let span = (kernel - 1).saturating_mul(p.dilation[i]).saturating_add(1);
        match p.auto_pad {
            _ if input < 0 => return Ok(UNKNOWN),
            "SAME_UPPER" | "SAME_LOWER" => return Ok((input + p.stride[i] - 1) / p.stride[i]),
            "VALID" if input < span => {
                return Err(ctx.input_error(
                    0,
                    format!("spatial dim {i} is {input}, smaller than the dilated kernel {span}"),
                ));
            }
            "VALID" => return Ok((input - span) / p.stride[i] + 1),
            _ => {}
        }
        spatial(
            ctx,
            i,
            Window {
                input,
                kernel,
                stride: p.stride[i],
                dilation: p.dilation[i],
                pad_begin: p.pads[2 * i],
                pad_end: p.pads[2 * i + 1],
                ceil: false,
            },
        )
    };
    let (ho, wo) = (dim(0, h, kh)?, dim(1, w, kw)?);
    let out = if p.nchw {
        vec![n, cout, ho, wo]
    } else {
        vec![n, ho, wo, cout]
    };
    if let Some(b) = ctx.inputs.get(2).and_then(|b| b.shape.as_deref())
        && b != [0]
        && (b.len() != 1 || agree(b[0], cout).is_none())
    {
        return Err(ctx.input_error(2, format!("bias {b:?} for {cout} output channels")));
    }
    Ok(meta(dtype, Some(out)))
}

/// Conv2D with NCHW data as the library's Conv (see [`Translation`]); an NHWC Conv2D
/// permutes its operands at each launch ([`conv2d`]).
pub fn translate_conv2d(ctx: &InferCtx) -> Option<Translation> {
    let p = Conv2d::read(ctx).ok()?;
    (p.nchw && !given(ctx, 3) && !int8::quantized(ctx, 0)).then(|| Translation {
        first: 0,
        op: "Conv",
        attrs: with_epilogue(ctx, p.onnx()),
        inputs: ctx.inputs.len().min(3),
    })
}

/// `attrs` with the activation lowering fused into this node (`ops::nn::epilogue`),
/// which the library's Conv applies.
fn with_epilogue(ctx: &InferCtx, mut attrs: crate::ops::Attrs) -> crate::ops::Attrs {
    for k in [epilogue::ACTIVATION_ATTR, epilogue::PARAMS_ATTR] {
        if let Some(v) = ctx.attrs.get(k) {
            attrs.insert(k.to_string(), v.clone());
        }
    }
    attrs
}

/// Conv2D through the library's Conv: the filter permuted to NCHW for NHWC, then the
/// NCHW convolution around which [`run_nchw`] permutes an NHWC x and y.
pub fn conv2d(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let p = Conv2d::read(ctx)?;
    let attrs = with_epilogue(ctx, p.onnx());
    let onnx = with_attrs(ctx, &attrs);
    let filter = if p.nchw {
        None
    } else {
        Some(permuted(ctx, &inputs[1], &HWCN_TO_NCHW)?)
    };
    let mut operands: Vec<TensorRef> = inputs[..inputs.len().min(3)].to_vec();
    if let Some(f) = &filter {
        operands[1] = f.as_ref();
    }
    if inputs[0].dtype == DType::I8 {
        let offset = int8::offset_x(ctx)?;
        return run_nchw(ctx, p.nchw, &operands, outputs, |ins, outs| {
            int8::conv(&onnx, offset, ins, outs)
        });
    }
    run_nchw(ctx, p.nchw, &operands, outputs, |ins, outs| {
        conv::conv(&onnx, ins, outs)
    })
}
