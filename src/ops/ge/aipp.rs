//! Aipp, GE's AI pre-processing: the op ATC inserts after a model input (`--insert_op_conf`)
//! to turn a uint8 image into the float16 feature map the first convolution reads, as the
//! AIPP unit of the Ascend AI Core does it in hardware. Static AIPP only.
//!
//! Contract (each fact's source is in docs/GE_OPS.md, "Aipp"):
//!
//! - Prototype (ops-cv `aipp_proto.h`, graphengine `aipp.h`): `images` (uint8), optional
//!   `params` (dynamic AIPP's parameter block, refused here), output `features`
//!   (float16), attribute `aipp_config_path`, which the op does not read.
//! - The configuration is GE's `AippOpParams` (`insert_op.proto`), which GE's `AippOp`
//!   stores on the node as the NamedAttrs `aipp`: ints (`aipp_mode`, `input_format` as
//!   the proto enums' numbers, sizes, matrix, biases, `mean_chn_*`), bools (switches) and
//!   floats (`min_chn_*`, `var_reci_chn_*`, `cpadding_value`). Lowering flattens it to
//!   `aipp.<member>` attributes ([`crate::ops::Attrs`] has no nested form).
//! - `images` is what GE's Aipp InferShape leaves on it: NHWC `[N, src_h, src_w, C]`,
//!   C being 3 for RGB888_U8 and YUV420SP_U8, 4 for XRGB8888_U8 and ARGB8888_U8, 1 for
//!   YUV400_U8. A YUV420SP image is NV12/NV21, `src_h * src_w * 3 / 2` bytes an image,
//!   images packed one after the other (the TBE kernel's batch stride); the rest of the
//!   tensor GE's shape implies is not read.
//! - `features` is computed in its origin layout, NCHW `[N, C, H, W]` (lowering rewrites
//!   the NC1HWC0 descriptor GE writes to its origin): H and W are the crop's plus the
//!   padding, C the channels the format makes (3, or 1 for YUV400).
//! - A `crop_size_h` or `crop_size_w` of 0 is the model input's size: the H or W of
//!   `features`' declared shape ([`DECLARED_SHAPE_ATTR`], which lowering sets from the
//!   node's output descriptor), as the TBE kernel's `check_aipp_static_config` takes it
//!   from its output shape; with padding (or resize) enabled that is refused, as there.
//!   Where the declared shape is known, the H and W computed must be its own.
//!
//! Each output pixel goes through the AIPP unit's stages in its order: channel swap, crop,
//! colour space conversion (CSC, integer), data type conversion (DTC, computed in
//! float32 and rounded once to float16), padding. The configuration is read once a
//! launch (a few dozen lookups in a sorted list); the kernel allocates nothing beyond
//! its output and works a row at a time in fixed chunks on the stack.

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::attrs::given;
use crate::ops::{
    DECLARED_SHAPE_ATTR, DType, InferCtx, OpError, TensorMeta, TensorMut, TensorRef, meta,
};

/// The `AippOpParams.InputFormat` numbers rt2 computes (insert_op.proto).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InputFormat {
    /// 1: a Y plane then an interleaved UV plane at half resolution (NV12; NV21 with
    /// `rbuv_swap_switch`).
    Yuv420sp,
    /// 2 and 7: four bytes a pixel, the alpha/unused byte first (last with
    /// `ax_swap_switch`: RGBA to ARGB).
    Xrgb8888,
    Argb8888,
    /// 3: three bytes a pixel.
    Rgb888,
    /// 4: one byte a pixel.
    Yuv400,
}

impl InputFormat {
    fn from_number(v: i64) -> Option<Self> {
        Some(match v {
            1 => InputFormat::Yuv420sp,
            2 => InputFormat::Xrgb8888,
            3 => InputFormat::Rgb888,
            4 => InputFormat::Yuv400,
            7 => InputFormat::Argb8888,
            _ => return None,
        })
    }

    /// The C of `images` as GE's InferShape sets it (its `GetChannel`).
    fn image_channels(self) -> usize {
        match self {
            InputFormat::Xrgb8888 | InputFormat::Argb8888 => 4,
            InputFormat::Yuv400 => 1,
            InputFormat::Rgb888 | InputFormat::Yuv420sp => 3,
        }
    }

    /// The channels of `features`.
    fn output_channels(self) -> usize {
        if self == InputFormat::Yuv400 { 1 } else { 3 }
    }

    /// Whether the pixels are YUV: the CSC subtracts the input bias (YUV to RGB), else
    /// it adds the output bias (RGB to YUV).
    fn is_yuv(self) -> bool {
        matches!(self, InputFormat::Yuv420sp | InputFormat::Yuv400)
    }
}

/// CSC: `out[r] = clamp(((sum_c m[r][c] * (in[c] - in_bias[c])) >> 8) + out_bias[r], 0, 255)`,
/// with `in_bias` zero for RGB input and `out_bias` zero for YUV input.
#[derive(Debug, Clone, Copy)]
struct Csc {
    m: [[i32; 3]; 3],
    in_bias: [i32; 3],
    out_bias: [i32; 3],
}

/// The static configuration of one Aipp node, checked against its input.
#[derive(Debug, Clone)]
struct Config {
    format: InputFormat,
    /// N, and the source image's H and W.
    n: usize,
    src: [usize; 2],
    /// The crop's start and size, (h, w).
    start: [usize; 2],
    crop: [usize; 2],
    /// top, bottom, left, right.
    pad: [usize; 4],
    pad_value: f32,
    rbuv_swap: bool,
    ax_swap: bool,
    csc: Option<Csc>,
    /// DTC per output channel: `(pixel - mean - min) * var_reci`, min and var_reci as
    /// the float16 the AIPP unit's registers hold.
    mean: [f32; 3],
    min: [f32; 3],
    var_reci: [f32; 3],
}

/// The attribute name of configuration member `key`.
fn name(key: &str) -> String {
    format!("aipp.{key}")
}

fn int(ctx: &InferCtx, key: &str, default: i64) -> Result<i64, OpError> {
    ctx.attr_int(&name(key), default)
}

fn flag(ctx: &InferCtx, key: &str) -> Result<bool, OpError> {
    ctx.attr_bool(&name(key), false)
}

fn float(ctx: &InferCtx, key: &str, default: f32) -> Result<f32, OpError> {
    ctx.attr_float(&name(key), default)
}

/// An int member within `lo..=hi` (the register field it is written to).
fn ranged(ctx: &InferCtx, key: &str, default: i64, lo: i64, hi: i64) -> Result<i64, OpError> {
    let v = int(ctx, key, default)?;
    if v < lo || v > hi {
        return Err(ctx.attr_error(&name(key), format!("{v} is outside {lo}..={hi}")));
    }
    Ok(v)
}

/// A size member: not negative.
fn size(ctx: &InferCtx, key: &str) -> Result<usize, OpError> {
    let v = int(ctx, key, 0)?;
    usize::try_from(v).map_err(|_| ctx.attr_error(&name(key), format!("{v} is negative")))
}

/// GE's default CSC matrices (`AippOp::SetCscDefaultValue`): YUV420SP to BGR (BT.601
/// narrow), else RGB to YUV.
const YUV2BGR: [[i64; 3]; 3] = [[298, 516, 0], [298, -100, -208], [298, 0, 409]];
const RGB2YUV: [[i64; 3]; 3] = [[66, 129, 25], [-38, -74, 112], [112, -94, -18]];
const DEFAULT_BIAS: [i64; 3] = [16, 128, 128];

impl Config {
    fn read(ctx: &InferCtx) -> Result<Config, OpError> {
        ctx.arity(1, 2)?;
        if ctx.attrs.get(&name("aipp_mode")).is_none() {
            return Err(ctx.attr_error(
                "aipp",
                "is required and missing (GE's AippOpParams as a NamedAttrs, with aipp_mode)",
            ));
        }
        let mode = int(ctx, "aipp_mode", 0)?;
        match mode {
            1 => {}
            2 => {
                return Err(ctx.attr_error(
                    &name("aipp_mode"),
                    "is 2 (dynamic); only static AIPP (1) is supported",
                ));
            }
            m => {
                return Err(ctx.attr_error(
                    &name("aipp_mode"),
                    format!("{m} is not static (1) or dynamic (2)"),
                ));
            }
        }
        if given(ctx, 1) {
            return Err(ctx.input_error(
                1,
                "params is dynamic AIPP's parameter block; only static AIPP is supported",
            ));
        }
        let fmt = match ctx.attrs.get(&name("input_format")) {
            None => return Err(ctx.attr_error(&name("input_format"), "is required and missing")),
            Some(_) => int(ctx, "input_format", 0)?,
        };
        let format = InputFormat::from_number(fmt).ok_or_else(|| {
            ctx.attr_error(
                &name("input_format"),
                format!(
                    "{fmt} is not one rt2 computes: YUV420SP_U8 (1), XRGB8888_U8 (2), \
                     RGB888_U8 (3), YUV400_U8 (4), ARGB8888_U8 (7)"
                ),
            )
        })?;
        for key in ["resize", "single_line_mode"] {
            if flag(ctx, key)? {
                return Err(ctx.attr_error(
                    &name(key),
                    "is true; rt2 does not compute it (no public source states its algorithm)",
                ));
            }
        }

        let x = &ctx.inputs[0];
        if x.dtype != DType::U8 {
            return Err(ctx.input_error(0, format!("is {}; Aipp's images are uint8", x.dtype)));
        }
        let c_in = format.image_channels();
        let dims = match x.shape.as_deref() {
            Some(&[n, h, w, c]) if n >= 0 && h >= 0 && w >= 0 && c as usize == c_in => {
                [n as usize, h as usize, w as usize]
            }
            s => {
                return Err(ctx.input_error(
                    0,
                    format!("is {s:?}; the input format takes NHWC [N, H, W, {c_in}] images"),
                ));
            }
        };
        let [n, h, w] = dims;
        let mut src = [h, w];
        for (i, key) in ["src_image_size_h", "src_image_size_w"]
            .into_iter()
            .enumerate()
        {
            let v = size(ctx, key)?;
            if v != 0 && v != src[i] {
                return Err(ctx.attr_error(
                    &name(key),
                    format!("is {v}; the images are {:?}", &[n, h, w, c_in]),
                ));
            }
            src[i] = src[i].max(v);
        }
        if format == InputFormat::Yuv420sp && (src[0] % 2 != 0 || src[1] % 2 != 0) {
            return Err(ctx.input_error(
                0,
                format!("is {h}x{w}; a YUV420SP image has an even height and width"),
            ));
        }

        let (start, crop, pad) = geometry(ctx, src)?;

        let csc = if flag(ctx, "csc_switch")? {
            if format == InputFormat::Yuv400 {
                return Err(ctx.attr_error(
                    &name("csc_switch"),
                    "is true for YUV400_U8, which has one channel to convert",
                ));
            }
            let defaults = if format == InputFormat::Yuv420sp {
                YUV2BGR
            } else {
                RGB2YUV
            };
            let mut m = [[0i32; 3]; 3];
            for (r, row) in m.iter_mut().enumerate() {
                for (c, v) in row.iter_mut().enumerate() {
                    let key = format!("matrix_r{r}c{c}");
                    *v = ranged(ctx, &key, defaults[r][c], -32768, 32767)? as i32;
                }
            }
            let mut in_bias = [0i32; 3];
            let mut out_bias = [0i32; 3];
            for i in 0..3 {
                let ib = ranged(ctx, &format!("input_bias_{i}"), DEFAULT_BIAS[i], 0, 255)?;
                let ob = ranged(ctx, &format!("output_bias_{i}"), DEFAULT_BIAS[i], 0, 255)?;
                if format.is_yuv() {
                    in_bias[i] = ib as i32;
                } else {
                    out_bias[i] = ob as i32;
                }
            }
            Some(Csc {
                m,
                in_bias,
                out_bias,
            })
        } else {
            None
        };

        let mut mean = [0f32; 3];
        let mut min = [0f32; 3];
        let mut var_reci = [1f32; 3];
        for i in 0..3 {
            mean[i] = ranged(ctx, &format!("mean_chn_{i}"), 0, -32768, 32767)? as f32;
            min[i] = f16::from_f32(float(ctx, &format!("min_chn_{i}"), 0.0)?).to_f32();
            var_reci[i] = f16::from_f32(float(ctx, &format!("var_reci_chn_{i}"), 1.0)?).to_f32();
        }
        Ok(Config {
            format,
            n,
            src,
            start,
            crop,
            pad,
            pad_value: float(ctx, "cpadding_value", 0.0)?,
            rbuv_swap: flag(ctx, "rbuv_swap_switch")?,
            ax_swap: flag(ctx, "ax_swap_switch")?,
            csc,
            mean,
            min,
            var_reci,
        })
    }

    /// `features`' NCHW dims.
    fn output(&self) -> [usize; 4] {
        let [t, b, l, r] = self.pad;
        [
            self.n,
            self.format.output_channels(),
            self.crop[0] + t + b,
            self.crop[1] + l + r,
        ]
    }

    /// Bytes of one source image.
    fn image_bytes(&self) -> usize {
        let px = self.src[0] * self.src[1];
        match self.format {
            InputFormat::Yuv420sp => px * 3 / 2,
            f => px * f.image_channels(),
        }
    }
}

/// The crop's start and size, (h, w), and the padding (top, bottom, left, right).
type Geometry = ([usize; 2], [usize; 2], [usize; 4]);

/// The [`Geometry`] of an image of `src` (h, w): a crop size of 0 is features' declared one ([the module](self)),
/// and the declared H and W, where known, must be the crop's (or the image's) plus the
/// padding.
fn geometry(ctx: &InferCtx, src: [usize; 2]) -> Result<Geometry, OpError> {
    let pad = if flag(ctx, "padding")? {
        [
            size(ctx, "top_padding_size")?,
            size(ctx, "bottom_padding_size")?,
            size(ctx, "left_padding_size")?,
            size(ctx, "right_padding_size")?,
        ]
    } else {
        [0; 4]
    };
    // features' declared H and W, where lowering gave them (unknown dims are not).
    let declared = match ctx.attr_ints(DECLARED_SHAPE_ATTR)? {
        None => None,
        Some(&[_, _, h, w]) => usize::try_from(h).ok().zip(usize::try_from(w).ok()),
        Some(other) => {
            return Err(ctx.attr_error(
                DECLARED_SHAPE_ATTR,
                format!("is {other:?}; features is NCHW [N, C, H, W]"),
            ));
        }
    };

    let (start, crop) = if flag(ctx, "crop")? {
        let start = [
            size(ctx, "load_start_pos_h")?,
            size(ctx, "load_start_pos_w")?,
        ];
        let mut crop = [size(ctx, "crop_size_h")?, size(ctx, "crop_size_w")?];
        for (i, key) in ["crop_size_h", "crop_size_w"].into_iter().enumerate() {
            if crop[i] == 0 {
                // The model input's size: features' H or W (the TBE kernel's rule,
                // which refuses padding then).
                if pad != [0; 4] {
                    return Err(ctx.attr_error(
                        &name(key),
                        "is 0 (the model input's size) with padding enabled; GE's \
                         kernel refuses the two together",
                    ));
                }
                let Some((h, w)) = declared else {
                    return Err(ctx.attr_error(
                        &name(key),
                        format!(
                            "is 0: the crop is then the model input's size, features' \
                             declared H and W, which the node does not carry \
                             ({DECLARED_SHAPE_ATTR}, set by lowering from its output \
                             descriptor)"
                        ),
                    ));
                };
                crop[i] = [h, w][i];
            }
            if start[i] + crop[i] > src[i] {
                return Err(ctx.attr_error(
                    &name(key),
                    format!(
                        "crop {:?} from {:?} is outside the {}x{} image",
                        crop, start, src[0], src[1]
                    ),
                ));
            }
        }
        (start, crop)
    } else {
        ([0, 0], src)
    };
    let out = [crop[0] + pad[0] + pad[1], crop[1] + pad[2] + pad[3]];
    if let Some((h, w)) = declared
        && out != [h, w]
    {
        return Err(ctx.attr_error(
            DECLARED_SHAPE_ATTR,
            format!(
                "declares features {h}x{w}; the configuration makes {}x{} (crop or \
                 image, plus padding)",
                out[0], out[1]
            ),
        ));
    }
    Ok((start, crop, pad))
}

/// features: float16 NCHW `[N, C, H, W]` ([the module](self)).
pub fn infer_aipp(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let cfg = Config::read(ctx)?;
    let dims = cfg.output().iter().map(|&d| d as i64).collect();
    Ok(meta(DType::F16, Some(dims)))
}

/// Pixels a chunk of a row holds: three channels of 256 on the stack.
const CHUNK: usize = 256;

pub fn aipp(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let cfg = Config::read(ctx)?;
    let [n, c, ho, wo] = cfg.output();
    let out = outputs[0].slice_mut::<f16>()?;
    if out.len() != n * c * ho * wo {
        return Err(ctx.compute_error(format!(
            "the output holds {} values, not {n}x{c}x{ho}x{wo}",
            out.len()
        )));
    }
    let x = inputs[0].data;
    let image = cfg.image_bytes();
    if x.len() < n * image {
        return Err(ctx.input_error(0, format!("holds {} bytes, not {}", x.len(), n * image)));
    }
    let [top, _, left, _] = cfg.pad;
    let pad = f16::from_f32(cfg.pad_value);
    let plane = ho * wo;
    let (mut px, mut f) = ([[0i32; CHUNK]; 3], [0f32; CHUNK]);
    for b in 0..n {
        let img = &x[b * image..(b + 1) * image];
        let planes = &mut out[b * c * plane..(b + 1) * c * plane];
        for oy in 0..ho {
            let inside = oy >= top && oy < top + cfg.crop[0];
            for ch in 0..c {
                let row = &mut planes[ch * plane + oy * wo..ch * plane + (oy + 1) * wo];
                if inside {
                    row[..left].fill(pad);
                    row[left + cfg.crop[1]..].fill(pad);
                } else {
                    row.fill(pad);
                }
            }
            if !inside {
                continue;
            }
            let sy = cfg.start[0] + oy - top;
            let mut x0 = 0;
            while x0 < cfg.crop[1] {
                let len = CHUNK.min(cfg.crop[1] - x0);
                load(&cfg, img, sy, cfg.start[1] + x0, len, &mut px);
                if let Some(csc) = &cfg.csc {
                    convert(csc, len, &mut px);
                }
                for (ch, p) in px.iter().enumerate().take(c) {
                    let (mean, min, var) = (cfg.mean[ch], cfg.min[ch], cfg.var_reci[ch]);
                    f[..len]
                        .iter_mut()
                        .zip(&p[..len])
                        .for_each(|(o, &v)| *o = (v as f32 - mean - min) * var);
                    let at = ch * plane + oy * wo + left + x0;
                    planes[at..at + len].convert_from_f32_slice(&f[..len]);
                }
                x0 += len;
            }
        }
    }
    Ok(())
}

/// Source row `sy`, pixels `sx..sx + len`, as channels after the swaps.
fn load(cfg: &Config, img: &[u8], sy: usize, sx: usize, len: usize, px: &mut [[i32; CHUNK]; 3]) {
    let w = cfg.src[1];
    let [p0, p1, p2] = px;
    let (p0, p1, p2) = (&mut p0[..len], &mut p1[..len], &mut p2[..len]);
    // The byte offsets of the three colour channels within a pixel, R/B (U/V) swapped
    // by `rbuv_swap_switch`.
    let order = |o: [usize; 3]| if cfg.rbuv_swap { [o[2], o[1], o[0]] } else { o };
    match cfg.format {
        InputFormat::Rgb888 | InputFormat::Xrgb8888 | InputFormat::Argb8888 => {
            let bpp = cfg.format.image_channels();
            let colours = if bpp == 3 || cfg.ax_swap {
                [0, 1, 2]
            } else {
                [1, 2, 3]
            };
            let [a, b, c] = order(colours);
            let row = &img[(sy * w + sx) * bpp..(sy * w + sx + len) * bpp];
            for (i, pixel) in row.chunks_exact(bpp).enumerate() {
                p0[i] = i32::from(pixel[a]);
                p1[i] = i32::from(pixel[b]);
                p2[i] = i32::from(pixel[c]);
            }
        }
        InputFormat::Yuv400 => {
            let row = &img[sy * w + sx..sy * w + sx + len];
            p0.iter_mut().zip(row).for_each(|(p, &v)| *p = i32::from(v));
        }
        InputFormat::Yuv420sp => {
            let h = cfg.src[0];
            let row = &img[sy * w + sx..sy * w + sx + len];
            p0.iter_mut().zip(row).for_each(|(p, &v)| *p = i32::from(v));
            // The UV plane: one (U, V) pair for each 2x2 block, V first with the swap.
            let uv = &img[h * w + (sy / 2) * w..h * w + (sy / 2 + 1) * w];
            let (u_at, v_at) = if cfg.rbuv_swap { (1, 0) } else { (0, 1) };
            for i in 0..len {
                let pair = (sx + i) / 2 * 2;
                p1[i] = i32::from(uv[pair + u_at]);
                p2[i] = i32::from(uv[pair + v_at]);
            }
        }
    }
}

/// The CSC on `len` pixels, in place.
fn convert(csc: &Csc, len: usize, px: &mut [[i32; CHUNK]; 3]) {
    let [p0, p1, p2] = px;
    for i in 0..len {
        let v = [
            p0[i] - csc.in_bias[0],
            p1[i] - csc.in_bias[1],
            p2[i] - csc.in_bias[2],
        ];
        let out = |r: usize| {
            let m = csc.m[r];
            (((m[0] * v[0] + m[1] * v[1] + m[2] * v[2]) >> 8) + csc.out_bias[r]).clamp(0, 255)
        };
        let (a, b, c) = (out(0), out(1), out(2));
        p0[i] = a;
        p1[i] = b;
        p2[i] = c;
    }
}

#[cfg(test)]
mod tests {
    //! Each input format, crop, CSC, swaps, DTC and padding against formulas written out
    //! here, and the configurations that are refused. Outputs start poisoned
    //! (`run_on_host`), so comparing every value also checks every one is written.

    use half::f16;

    use crate::ops::testing::{run1, try_run};
    use crate::ops::{Attr, DECLARED_SHAPE_ATTR, Tensor};

    /// GE's input_format numbers (insert_op.proto).
    const YUV420SP: i64 = 1;
    const XRGB8888: i64 = 2;
    const RGB888: i64 = 3;
    const YUV400: i64 = 4;
    const ARGB8888: i64 = 7;

    fn cfg(format: i64, more: &[(&'static str, Attr)]) -> Vec<(&'static str, Attr)> {
        let mut v = vec![
            ("aipp.aipp_mode", Attr::Int(1)),
            ("aipp.input_format", Attr::Int(format)),
            ("aipp_config_path", Attr::Str("./aipp.cfg".into())),
        ];
        v.extend_from_slice(more);
        v
    }

    /// `n` deterministic bytes.
    fn bytes(n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed.wrapping_mul(2_654_435_761) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s >> 3) as u8
            })
            .collect()
    }

    fn image(dims: [usize; 4], data: &[u8]) -> Tensor {
        Tensor::from_vec(&dims, data)
    }

    /// The output's shape and values.
    fn aipp(attrs: &[(&str, Attr)], x: Tensor) -> (Vec<usize>, Vec<f32>) {
        let y = run1("Aipp", attrs, &[x]);
        let v = y
            .slice::<f16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f32())
            .collect();
        (y.shape, v)
    }

    fn err(attrs: &[(&str, Attr)], x: Tensor) -> String {
        try_run("Aipp", attrs, &[x], 1).unwrap_err().to_string()
    }

    fn h(v: f32) -> f32 {
        f16::from_f32(v).to_f32()
    }

    #[test]
    fn rgb888_crops_swaps_and_normalizes() {
        let (n, hh, ww) = (2, 4, 5);
        let data = bytes(n * hh * ww * 3, 1);
        let attrs = cfg(
            RGB888,
            &[
                ("aipp.crop", Attr::Bool(true)),
                ("aipp.load_start_pos_h", Attr::Int(1)),
                ("aipp.load_start_pos_w", Attr::Int(2)),
                ("aipp.crop_size_h", Attr::Int(2)),
                ("aipp.crop_size_w", Attr::Int(3)),
                ("aipp.rbuv_swap_switch", Attr::Bool(true)),
                ("aipp.mean_chn_0", Attr::Int(104)),
                ("aipp.mean_chn_1", Attr::Int(117)),
                ("aipp.mean_chn_2", Attr::Int(123)),
                ("aipp.min_chn_1", Attr::Float(0.3)),
                ("aipp.var_reci_chn_0", Attr::Float(0.017)),
                ("aipp.var_reci_chn_2", Attr::Float(0.0039216)),
            ],
        );
        let (shape, got) = aipp(&attrs, image([n, hh, ww, 3], &data));
        assert_eq!(shape, [2, 3, 2, 3]);
        let mean = [104.0, 117.0, 123.0];
        // The registers hold min and var_reci as float16.
        let min = [0.0, h(0.3), 0.0];
        let var = [h(0.017), 1.0, h(0.0039216)];
        let mut want = Vec::new();
        for b in 0..n {
            for c in 0..3 {
                for y in 0..2 {
                    for x in 0..3 {
                        // BGR: output channel c is the source's channel 2 - c.
                        let at = ((b * hh + 1 + y) * ww + 2 + x) * 3 + (2 - c);
                        let v = (f32::from(data[at]) - mean[c] - min[c]) * var[c];
                        want.push(h(v));
                    }
                }
            }
        }
        assert_eq!(got, want);
    }

    /// A crop size of 0 is features' declared H or W (ATC's RGB888 example configures
    /// its crop so): the same values as the crop written out, from the same start.
    #[test]
    fn a_crop_size_of_0_is_the_declared_output_size() {
        let (hh, ww) = (4, 6);
        let data = bytes(hh * ww * 3, 7);
        let crop = |h: i64, w: i64, declared: Option<[i64; 4]>| {
            let mut v = cfg(
                RGB888,
                &[
                    ("aipp.crop", Attr::Bool(true)),
                    ("aipp.load_start_pos_h", Attr::Int(1)),
                    ("aipp.load_start_pos_w", Attr::Int(2)),
                    ("aipp.crop_size_h", Attr::Int(h)),
                    ("aipp.crop_size_w", Attr::Int(w)),
                    ("aipp.mean_chn_1", Attr::Int(20)),
                ],
            );
            if let Some(d) = declared {
                v.push((DECLARED_SHAPE_ATTR, Attr::Ints(d.to_vec())));
            }
            v
        };
        let x = || image([1, hh, ww, 3], &data);
        let (shape, want) = aipp(&crop(3, 4, None), x());
        assert_eq!(shape, [1, 3, 3, 4]);
        // Both sizes, or one, from the declared [1, 3, 3, 4].
        let declared = Some([1, 3, 3, 4]);
        assert_eq!(
            aipp(&crop(0, 0, declared), x()),
            (shape.clone(), want.clone())
        );
        assert_eq!(
            aipp(&crop(3, 0, declared), x()),
            (shape.clone(), want.clone())
        );
        // The values: rows 1..4, columns 2..6 of the image.
        for c in 0..3 {
            for y in 0..3 {
                for xx in 0..4 {
                    let p = f32::from(data[((1 + y) * ww + 2 + xx) * 3 + c]);
                    let mean = if c == 1 { 20.0 } else { 0.0 };
                    assert_eq!(want[(c * 3 + y) * 4 + xx], h(p - mean));
                }
            }
        }
        // Without the declared shape, or with padding, a size of 0 is refused; a
        // declared shape the configuration does not make is an error.
        let e = err(&crop(0, 4, None), x());
        assert!(
            e.contains("aipp.crop_size_h") && e.contains(DECLARED_SHAPE_ATTR),
            "{e}"
        );
        let mut padded = crop(0, 0, declared);
        padded.push(("aipp.padding", Attr::Bool(true)));
        padded.push(("aipp.top_padding_size", Attr::Int(1)));
        let e = err(&padded, x());
        assert!(
            e.contains("aipp.crop_size_h") && e.contains("padding"),
            "{e}"
        );
        let e = err(&crop(3, 4, Some([1, 3, 3, 5])), x());
        assert!(e.contains(DECLARED_SHAPE_ATTR) && e.contains("3x4"), "{e}");
        // A declared size past the image's edge from the start is outside it.
        let e = err(&crop(0, 0, Some([1, 3, 4, 4])), x());
        assert!(
            e.contains("aipp.crop_size_h") && e.contains("outside"),
            "{e}"
        );
    }

    /// The YUV420SP image of `y` (h x w) and `u`, `v` (h/2 x w/2): NV12, or NV21.
    fn nv(y: &[u8], u: &[u8], v: &[u8], nv21: bool) -> Vec<u8> {
        let mut out = y.to_vec();
        for (&a, &b) in u.iter().zip(v) {
            out.extend(if nv21 { [b, a] } else { [a, b] });
        }
        out
    }

    #[test]
    fn yuv420sp_converts_with_a_bt601_matrix_and_nv21_swaps() {
        let (hh, ww) = (4, 6);
        let y = bytes(hh * ww, 2);
        let u = bytes(hh * ww / 4, 3);
        let v = bytes(hh * ww / 4, 4);
        // BT.601 narrow range to RGB, as the ATC guide's CSC table writes it.
        let matrix = [
            ("aipp.csc_switch", Attr::Bool(true)),
            ("aipp.matrix_r0c0", Attr::Int(298)),
            ("aipp.matrix_r0c1", Attr::Int(0)),
            ("aipp.matrix_r0c2", Attr::Int(409)),
            ("aipp.matrix_r1c0", Attr::Int(298)),
            ("aipp.matrix_r1c1", Attr::Int(-100)),
            ("aipp.matrix_r1c2", Attr::Int(-208)),
            ("aipp.matrix_r2c0", Attr::Int(298)),
            ("aipp.matrix_r2c1", Attr::Int(516)),
            ("aipp.matrix_r2c2", Attr::Int(0)),
            ("aipp.input_bias_0", Attr::Int(16)),
            ("aipp.input_bias_1", Attr::Int(128)),
            ("aipp.input_bias_2", Attr::Int(128)),
            // GE's defaults; a YUV input takes no output bias.
            ("aipp.output_bias_0", Attr::Int(16)),
        ];
        let attrs = cfg(YUV420SP, &matrix);
        // GE's images shape for YUV420SP: [N, H, W, 3], of which 1.5 H W bytes are read.
        let mut data = nv(&y, &u, &v, false);
        data.resize(hh * ww * 3, 0xee);
        let (shape, got) = aipp(&attrs, image([1, hh, ww, 3], &data));
        assert_eq!(shape, [1, 3, hh, ww]);
        for yy in 0..hh {
            for xx in 0..ww {
                let luma = f64::from(y[yy * ww + xx]) - 16.0;
                let k = (yy / 2) * (ww / 2) + xx / 2;
                let (cb, cr) = (f64::from(u[k]) - 128.0, f64::from(v[k]) - 128.0);
                // BT.601 in 8-bit fixed point, floored, clamped to a byte.
                let px = |x: f64| (x / 256.0).floor().clamp(0.0, 255.0) as f32;
                let rgb = [
                    px(298.0 * luma + 409.0 * cr),
                    px(298.0 * luma - 100.0 * cb - 208.0 * cr),
                    px(298.0 * luma + 516.0 * cb),
                ];
                // ...which is BT.601's real-valued conversion to within the fixed point.
                let exact = [
                    1.164 * luma + 1.596 * cr,
                    1.164 * luma - 0.392 * cb - 0.813 * cr,
                    1.164 * luma + 2.017 * cb,
                ];
                for c in 0..3 {
                    let g = got[(c * hh + yy) * ww + xx];
                    assert_eq!(g, rgb[c], "channel {c} at ({yy}, {xx})");
                    let e = exact[c].clamp(0.0, 255.0);
                    assert!((f64::from(g) - e).abs() <= 2.0, "{g} vs BT.601 {e}");
                }
            }
        }
        // The same image as NV21 with rbuv_swap_switch.
        let mut swapped = cfg(YUV420SP, &matrix);
        swapped.push(("aipp.rbuv_swap_switch", Attr::Bool(true)));
        let mut data = nv(&y, &u, &v, true);
        data.resize(hh * ww * 3, 0);
        assert_eq!(aipp(&swapped, image([1, hh, ww, 3], &data)).1, got);
    }

    #[test]
    fn yuv420sp_batches_are_packed_and_default_matrix_is_bgr() {
        let (n, hh, ww) = (2, 2, 2);
        // Image 0: Y 16, U V 128 (black); image 1: Y 235, U V 128 (white).
        let mut data = vec![16, 16, 16, 16, 128, 128, 235, 235, 235, 235, 128, 128];
        data.resize(n * hh * ww * 3, 0x11);
        let attrs = cfg(YUV420SP, &[("aipp.csc_switch", Attr::Bool(true))]);
        let (_, got) = aipp(&attrs, image([n, hh, ww, 3], &data));
        // (298 * 219) >> 8 = 254.
        let want: Vec<f32> = [0.0; 12].into_iter().chain([254.0; 12]).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn four_byte_formats_drop_alpha_and_ax_swap_reads_rgba() {
        let (hh, ww) = (2, 3);
        let rgb = bytes(hh * ww * 3, 5);
        let alpha = bytes(hh * ww, 6);
        let (mut xrgb, mut rgba) = (Vec::new(), Vec::new());
        for (p, &a) in rgb.chunks_exact(3).zip(&alpha) {
            xrgb.extend([a, p[0], p[1], p[2]]);
            rgba.extend([p[0], p[1], p[2], a]);
        }
        let norm = [("aipp.mean_chn_1", Attr::Int(10))];
        let want = aipp(&cfg(RGB888, &norm), image([1, hh, ww, 3], &rgb));
        assert_eq!(
            aipp(&cfg(XRGB8888, &norm), image([1, hh, ww, 4], &xrgb)),
            want
        );
        let mut swapped = cfg(ARGB8888, &norm);
        swapped.push(("aipp.ax_swap_switch", Attr::Bool(true)));
        assert_eq!(aipp(&swapped, image([1, hh, ww, 4], &rgba)), want);
        assert_eq!(want.1[ww + 1], f32::from(rgb[(ww + 1) * 3]));
    }

    #[test]
    fn rgb_to_yuv_adds_the_output_bias() {
        let data = [255u8, 0, 0, 10, 200, 30];
        let attrs = cfg(RGB888, &[("aipp.csc_switch", Attr::Bool(true))]);
        let (_, got) = aipp(&attrs, image([1, 1, 2, 3], &data));
        // GE's default RGB to YUV matrix and output bias 16, 128, 128.
        let m = [[66, 129, 25], [-38, -74, 112], [112, -94, -18]];
        let bias = [16, 128, 128];
        for c in 0..3 {
            for x in 0..2 {
                let p = &data[x * 3..x * 3 + 3];
                let s: i32 = (0..3).map(|k| m[c][k] * i32::from(p[k])).sum();
                let want = (s.div_euclid(256) + bias[c]).clamp(0, 255) as f32;
                assert_eq!(got[c * 2 + x], want, "channel {c} pixel {x}");
            }
        }
    }

    #[test]
    fn yuv400_pads_with_the_padding_value() {
        let data = [0u8, 50, 100, 150, 200, 250];
        let attrs = cfg(
            YUV400,
            &[
                ("aipp.padding", Attr::Bool(true)),
                ("aipp.top_padding_size", Attr::Int(1)),
                ("aipp.left_padding_size", Attr::Int(2)),
                ("aipp.right_padding_size", Attr::Int(1)),
                ("aipp.cpadding_value", Attr::Float(-1.5)),
                ("aipp.var_reci_chn_0", Attr::Float(0.5)),
            ],
        );
        let (shape, got) = aipp(&attrs, image([1, 2, 3, 1], &data));
        assert_eq!(shape, [1, 1, 3, 6]);
        let p = -1.5;
        #[rustfmt::skip]
        let want = [
            p, p, p, p, p, p,
            p, p, 0.0, 25.0, 50.0, p,
            p, p, 75.0, 100.0, 125.0, p,
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn bad_configurations_are_errors_naming_the_attribute() {
        let x = || image([1, 2, 2, 3], &[0; 12]);
        let crop = |w: i64| {
            cfg(
                RGB888,
                &[
                    ("aipp.crop", Attr::Bool(true)),
                    ("aipp.load_start_pos_w", Attr::Int(1)),
                    ("aipp.crop_size_h", Attr::Int(1)),
                    ("aipp.crop_size_w", Attr::Int(w)),
                ],
            )
        };
        let e = err(&crop(2), x());
        assert!(
            e.contains("aipp.crop_size_w") && e.contains("outside"),
            "{e}"
        );
        assert!(err(&crop(0), x()).contains("aipp.crop_size_w"));
        let e = err(&cfg(11, &[]), x());
        assert!(e.contains("aipp.input_format") && e.contains("11"), "{e}");
        let e = err(&[("aipp.aipp_mode", Attr::Int(1))], x());
        assert!(
            e.contains("aipp.input_format") && e.contains("missing"),
            "{e}"
        );
        let e = err(&[("aipp_config_path", Attr::Str("a".into()))], x());
        assert!(e.contains("\"aipp\"") || e.contains("aipp"), "{e}");
        assert!(e.contains("missing"), "{e}");
        let e = err(&[("aipp.aipp_mode", Attr::Int(2))], x());
        assert!(e.contains("dynamic"), "{e}");
        let e = err(&cfg(RGB888, &[("aipp.resize", Attr::Bool(true))]), x());
        assert!(e.contains("aipp.resize"), "{e}");
        let e = err(&cfg(XRGB8888, &[]), x());
        assert!(e.contains("[N, H, W, 4]"), "{e}");
        let e = err(
            &cfg(RGB888, &[("aipp.src_image_size_w", Attr::Int(3))]),
            x(),
        );
        assert!(e.contains("aipp.src_image_size_w"), "{e}");
        let e = err(&cfg(RGB888, &[("aipp.mean_chn_0", Attr::Int(40000))]), x());
        assert!(e.contains("aipp.mean_chn_0"), "{e}");
        let e = err(
            &cfg(YUV400, &[("aipp.csc_switch", Attr::Bool(true))]),
            image([1, 2, 2, 1], &[0; 4]),
        );
        assert!(e.contains("aipp.csc_switch"), "{e}");
        let e = err(&cfg(YUV420SP, &[]), image([1, 3, 2, 3], &[0; 18]));
        assert!(e.contains("even"), "{e}");
    }
}
