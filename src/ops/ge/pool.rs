//! The pools in GE's vocabulary, computed by the library's MaxPool and AveragePool kernels.
//!
//! - `Pooling` (Caffe-born; graphengine `nn_pooling_ops.h`): x; `mode` 0 max / 1 avg,
//!   `global_pooling` false, `window` `[1,1]`, `stride` `[1,1]`, `pad` `[0,0,0,0]` (top, bottom,
//!   left, right), `dilation` `[1,1,1,1]`, `ceil_mode` 0, `data_format` "NCHW". `ceil_mode`
//!   0 rounds the output size *up* (Caffe's default; 1 rounds down), and in ceil mode a
//!   last window that would start in the end padding is dropped, as Caffe does. An average
//!   divides by the window clipped to the padded input (Caffe's `pool_size`): padding taps
//!   count, taps past the padding do not. Only dilation 1 is supported.
//! - `MaxPool` / `AvgPool` (TF-born; ops-nn pooling protos, graphengine
//!   `nn_pooling_ops.h`): x; `ksize`, `strides` (4 values by `data_format`, N and C
//!   entries 1) and `padding` ("SAME" or "VALID") required, `data_format` "NHWC". SAME
//!   pads as TensorFlow: output `ceil(in / stride)`, the smaller half of the padding
//!   first; an average counts only the taps inside the input.
//!
//! - `MaxPoolV3` / `AvgPoolV2` (ops-nn pooling protos, graphengine `nn_pooling_ops.h`;
//!   what GE's ONNX MaxPool and AveragePool plugins make): x; `ksize`, `strides` required
//!   (4 values by `data_format`, N and C entries 1), `padding_mode` "CALCULATED" (`pads`
//!   [top, bottom, left, right] apply), "SAME" (TensorFlow's) or "VALID", `pads`
//!   `[0,0,0,0]`, `data_format` "NCHW", `global_pooling` false, `ceil_mode` false (true
//!   sizes the output as ONNX's ceil mode does); AvgPoolV2 also `exclusive` true (an
//!   average counts only the taps inside the input; false counts padding taps too) and
//!   `divisor_override` 0 (only 0 is supported).
//!
//! `MaxPool` is also ONNX's op type: one spec serves both, GE's form when `ksize` is
//! present, else ONNX's.

use super::attrs::{data_format, ints_or, onnx_attrs, required_ints, with_attrs};
use super::layout::run_nchw;
use crate::ops::nn::{Window, infer_pool, pool, spatial};
use crate::ops::{
    Attr, Attrs, InferCtx, OpError, TensorMeta, TensorMut, TensorRef, Translation, UNKNOWN, meta,
};

/// A 2-D pool's geometry, checked, over the (h, w) dims.
struct Pool2d {
    nchw: bool,
    max: bool,
    kernel: [i64; 2],
    stride: [i64; 2],
    /// top, bottom, left, right; `None`: TensorFlow's SAME, sized from the input.
    pads: Option<[i64; 4]>,
    ceil: bool,
    /// Averages count padding taps.
    include_pad: bool,
}

/// The (H, W) entries of a required 4-value `ksize` or `strides` in `nchw` or NHWC order,
/// whose N and C entries are 1.
fn hw_entries(ctx: &InferCtx, name: &str, nchw: bool) -> Result<[i64; 2], OpError> {
    let v = required_ints(ctx, name, 4)?;
    let [n, c, h, w] = nchw_dims(&v, nchw);
    if n != 1 || c != 1 {
        return Err(ctx.attr_error(name, format!("{v:?}: the N and C entries must be 1")));
    }
    if h < 1 || w < 1 {
        return Err(ctx.attr_error(name, format!("{v:?} is not positive")));
    }
    Ok([h, w])
}

/// (N, C, H, W) of a 4-D x in `nchw` or NHWC.
fn nchw_dims(x: &[i64], nchw: bool) -> [i64; 4] {
    if nchw {
        [x[0], x[1], x[2], x[3]]
    } else {
        [x[0], x[3], x[1], x[2]]
    }
}

impl Pool2d {
    /// Pooling's attributes; `hw` is x's (H, W) when known (for `global_pooling`).
    fn pooling(ctx: &InferCtx, hw: Option<[i64; 2]>) -> Result<Pool2d, OpError> {
        let nchw = data_format(ctx, "NCHW")?;
        let max = match ctx.attr_int("mode", 0)? {
            0 => true,
            1 => false,
            other => {
                return Err(
                    ctx.attr_error("mode", format!("{other} is not 0 (max) or 1 (average)"))
                );
            }
        };
        let window = ints_or(ctx, "window", &[1, 1])?;
        let stride = ints_or(ctx, "stride", &[1, 1])?;
        let pad = ints_or(ctx, "pad", &[0, 0, 0, 0])?;
        let dilation = ints_or(ctx, "dilation", &[1, 1, 1, 1])?;
        if dilation.iter().any(|&d| d != 1) {
            return Err(ctx.attr_error("dilation", format!("{dilation:?}: only 1 is supported")));
        }
        let ceil = match ctx.attr_int("ceil_mode", 0)? {
            0 => true,
            1 => false,
            other => {
                return Err(
                    ctx.attr_error("ceil_mode", format!("{other} is not 0 (ceil) or 1 (floor)"))
                );
            }
        };
        for (name, v) in [("window", &window), ("stride", &stride)] {
            if v.iter().any(|&k| k < 1) {
                return Err(ctx.attr_error(name, format!("{v:?} is not positive")));
            }
        }
        if pad.iter().any(|&p| p < 0) {
            return Err(ctx.attr_error("pad", format!("{pad:?} has a negative value")));
        }
        if ctx.attr_bool("global_pooling", false)? {
            let kernel = hw.unwrap_or([UNKNOWN; 2]);
            return Ok(Pool2d {
                nchw,
                max,
                kernel,
                stride: [1, 1],
                pads: Some([0; 4]),
                ceil: false,
                include_pad: true,
            });
        }
        Ok(Pool2d {
            nchw,
            max,
            kernel: [window[0], window[1]],
            stride: [stride[0], stride[1]],
            pads: Some([pad[0], pad[1], pad[2], pad[3]]),
            ceil,
            include_pad: true,
        })
    }

    /// TF-born MaxPool's and AvgPool's attributes.
    fn tf(ctx: &InferCtx, max: bool) -> Result<Pool2d, OpError> {
        let nchw = data_format(ctx, "NHWC")?;
        let pick = |name: &str| hw_entries(ctx, name, nchw);
        let (kernel, stride) = (pick("ksize")?, pick("strides")?);
        let pads = match ctx.attr_str("padding", "")? {
            "VALID" => Some([0; 4]),
            "SAME" => None,
            "" => return Err(ctx.attr_error("padding", "is required and missing")),
            other => {
                return Err(ctx.attr_error("padding", format!("{other:?} is not SAME or VALID")));
            }
        };
        Ok(Pool2d {
            nchw,
            max,
            kernel,
            stride,
            pads,
            ceil: false,
            include_pad: false,
        })
    }

    /// MaxPoolV3's and AvgPoolV2's attributes; `hw` is x's (H, W) when known (for
    /// `global_pooling`).
    fn v2(ctx: &InferCtx, max: bool, hw: Option<[i64; 2]>) -> Result<Pool2d, OpError> {
        let nchw = data_format(ctx, "NCHW")?;
        let pick = |name: &str| hw_entries(ctx, name, nchw);
        let (kernel, stride) = (pick("ksize")?, pick("strides")?);
        let include_pad = if max {
            false
        } else {
            if ctx.attr_int("divisor_override", 0)? != 0 {
                return Err(ctx.attr_error("divisor_override", "only 0 is supported"));
            }
            !ctx.attr_bool("exclusive", true)?
        };
        if ctx.attr_bool("global_pooling", false)? {
            return Ok(Pool2d {
                nchw,
                max,
                kernel: hw.unwrap_or([UNKNOWN; 2]),
                stride: [1, 1],
                pads: Some([0; 4]),
                ceil: false,
                include_pad,
            });
        }
        let pads = ints_or(ctx, "pads", &[0, 0, 0, 0])?;
        if pads.iter().any(|&p| p < 0) {
            return Err(ctx.attr_error("pads", format!("{pads:?} has a negative value")));
        }
        let (pads, ceil) = match ctx.attr_str("padding_mode", "CALCULATED")? {
            "CALCULATED" => (
                Some([pads[0], pads[1], pads[2], pads[3]]),
                ctx.attr_bool("ceil_mode", false)?,
            ),
            "SAME" => (None, false),
            "VALID" => (Some([0; 4]), false),
            other => {
                return Err(ctx.attr_error(
                    "padding_mode",
                    format!("{other:?} is not CALCULATED, SAME or VALID"),
                ));
            }
        };
        Ok(Pool2d {
            nchw,
            max,
            kernel,
            stride,
            pads,
            ceil,
            include_pad,
        })
    }

    /// Explicit pads for an input of spatial dims `hw` (SAME's from the output size).
    fn pads_for(&self, hw: [i64; 2]) -> [i64; 4] {
        self.pads.unwrap_or_else(|| {
            let mut p = [0; 4];
            for i in 0..2 {
                let out = (hw[i] + self.stride[i] - 1) / self.stride[i];
                let total = ((out - 1) * self.stride[i] + self.kernel[i] - hw[i]).max(0);
                p[2 * i] = total / 2;
                p[2 * i + 1] = total - total / 2;
            }
            p
        })
    }

    /// y's shape for x's.
    fn infer(&self, ctx: &InferCtx, x: &[i64]) -> Result<Vec<i64>, OpError> {
        let [n, c, h, w] = nchw_dims(x, self.nchw);
        let mut out = [0i64; 2];
        for (i, input) in [h, w].into_iter().enumerate() {
            out[i] = match self.pads {
                _ if input < 0 || self.kernel[i] < 0 => UNKNOWN,
                None => (input + self.stride[i] - 1) / self.stride[i],
                Some(p) => spatial(
                    ctx,
                    i,
                    Window {
                        input,
                        kernel: self.kernel[i],
                        stride: self.stride[i],
                        dilation: 1,
                        pad_begin: p[2 * i],
                        pad_end: p[2 * i + 1],
                        ceil: self.ceil,
                    },
                )?,
            };
        }
        Ok(if self.nchw {
            vec![n, c, out[0], out[1]]
        } else {
            vec![n, out[0], out[1], c]
        })
    }

    /// The ONNX pool's attributes for an input of (H, W) `hw` (pads as [top, left,
    /// bottom, right]).
    fn onnx(&self, [h, w]: [i64; 2]) -> Attrs {
        let kernel = if self.kernel[0] < 0 {
            [h, w]
        } else {
            self.kernel
        };
        let [t, b, l, r] = self.pads_for([h, w]);
        onnx_attrs(vec![
            ("kernel_shape", Attr::Ints(kernel.to_vec())),
            ("strides", Attr::Ints(self.stride.to_vec())),
            ("pads", Attr::Ints(vec![t, l, b, r])),
            ("count_include_pad", Attr::Int(i64::from(self.include_pad))),
            ("ceil_mode", Attr::Int(i64::from(self.ceil))),
        ])
    }

    /// The ONNX pool this is, for an NCHW x of known (H, W) (see [`Translation`]).
    fn translation(&self, hw: Option<[i64; 2]>) -> Option<Translation> {
        let hw = hw.filter(|hw| self.nchw && hw.iter().all(|&d| d >= 0))?;
        Some(Translation {
            first: 0,
            op: if self.max { "MaxPool" } else { "AveragePool" },
            attrs: self.onnx(hw),
            inputs: 1,
        })
    }

    /// Runs the pool through the library's kernel.
    fn compute(
        &self,
        ctx: &InferCtx,
        inputs: &[TensorRef],
        outputs: &mut [TensorMut],
    ) -> Result<(), OpError> {
        let x = &inputs[0];
        if x.rank() != 4 {
            return Err(ctx.input_error(0, format!("is {:?}; the pool takes a 4-D x", x.shape)));
        }
        let dims: Vec<i64> = x.shape.iter().map(|&d| d as i64).collect();
        let [_, _, h, w] = nchw_dims(&dims, self.nchw);
        let attrs = self.onnx([h, w]);
        let onnx = with_attrs(ctx, &attrs);
        let max = self.max;
        run_nchw(ctx, self.nchw, &inputs[..1], outputs, |ins, outs| {
            if max {
                pool::max_pool(&onnx, ins, outs)
            } else {
                pool::average_pool(&onnx, ins, outs)
            }
        })
    }
}

/// x's (H, W) when x is a known 4-D shape.
fn known_hw(ctx: &InferCtx) -> Result<Option<[i64; 2]>, OpError> {
    let nchw = data_format(ctx, "NCHW")?;
    Ok(ctx.inputs[0]
        .shape
        .as_deref()
        .filter(|s| s.len() == 4)
        .map(|s| {
            let [_, _, h, w] = nchw_dims(s, nchw);
            [h, w]
        }))
}

fn infer_with(ctx: &InferCtx, p: &Pool2d) -> Result<Vec<TensorMeta>, OpError> {
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    if s.len() != 4 {
        return Err(ctx.input_error(0, format!("is {s:?}; the pool takes a 4-D x")));
    }
    Ok(meta(x.dtype, Some(p.infer(ctx, s)?)))
}

pub fn infer_pooling(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let p = Pool2d::pooling(ctx, known_hw(ctx)?)?;
    infer_with(ctx, &p)
}

pub fn pooling(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    Pool2d::pooling(ctx, None)?.compute(ctx, inputs, outputs)
}

/// Pooling as the ONNX pool, for an NCHW x of known (H, W).
pub fn translate_pooling(ctx: &InferCtx) -> Option<Translation> {
    let hw = known_hw(ctx).ok()?;
    Pool2d::pooling(ctx, hw).ok()?.translation(hw)
}

/// TF-born MaxPool and AvgPool as the ONNX pool, for an NCHW x of known (H, W); ONNX's
/// MaxPool is itself.
pub fn translate_tf_pool(ctx: &InferCtx) -> Option<Translation> {
    if ctx.op == "MaxPool" && !is_tf(ctx) {
        return None;
    }
    let hw = known_hw(ctx).ok()?;
    Pool2d::tf(ctx, ctx.op == "MaxPool").ok()?.translation(hw)
}

/// GE's TF-born form of MaxPool: `ksize` given.
fn is_tf(ctx: &InferCtx) -> bool {
    ctx.attrs.get("ksize").is_some()
}

/// MaxPool: GE's TF-born form (`ksize`), else ONNX's.
pub fn infer_max_pool(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    if !is_tf(ctx) {
        return infer_pool(ctx);
    }
    infer_tf_pool(ctx)
}

/// TF-born MaxPool and AvgPool.
pub fn infer_tf_pool(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let p = Pool2d::tf(ctx, ctx.op == "MaxPool")?;
    infer_with(ctx, &p)
}

pub fn max_pool(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    if !is_tf(ctx) {
        return pool::max_pool(ctx, inputs, outputs);
    }
    Pool2d::tf(ctx, true)?.compute(ctx, inputs, outputs)
}

pub fn avg_pool(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    Pool2d::tf(ctx, false)?.compute(ctx, inputs, outputs)
}

/// MaxPoolV3 and AvgPoolV2.
pub fn infer_pool_v2(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let p = Pool2d::v2(ctx, ctx.op == "MaxPoolV3", known_hw(ctx)?)?;
    infer_with(ctx, &p)
}

/// MaxPoolV3 and AvgPoolV2 as the ONNX pool, for an NCHW x of known (H, W).
pub fn translate_pool_v2(ctx: &InferCtx) -> Option<Translation> {
    let hw = known_hw(ctx).ok()?;
    Pool2d::v2(ctx, ctx.op == "MaxPoolV3", hw)
        .ok()?
        .translation(hw)
}

pub fn pool_v2(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    // The (H, W) of the tensor computed on (global pooling's window), whatever the
    // launch's metas knew.
    let dims: Vec<i64> = inputs[0].shape.iter().map(|&d| d as i64).collect();
    let nchw = data_format(ctx, "NCHW")?;
    let hw = (dims.len() == 4).then(|| {
        let [_, _, h, w] = nchw_dims(&dims, nchw);
        [h, w]
    });
    Pool2d::v2(ctx, ctx.op == "MaxPoolV3", hw)?.compute(ctx, inputs, outputs)
}
