//! GE's TensorFlow-born image resampling (graphengine `image_ops.h`): ResizeBilinearV2,
//! ResizeNearestNeighborV2, their `*D` forms that take `size` as an attribute, and
//! CropAndResize. Each computes as TensorFlow's kernel of the same name does.
//!
//! - ResizeBilinearV2(x, size; align_corners false, half_pixel_centers false, dtype float):
//!   x's H and W resampled to `size` = [new_h, new_w]. Per output row `o` the source
//!   coordinate is `(o + 0.5) s - 0.5` with half-pixel centers, else `o s`, where the scale
//!   `s` is `(in - 1) / (out - 1)` with align_corners (and out > 1), else `in / out`; the
//!   two neighbours are `max(floor(c), 0)` and `min(ceil(c), in - 1)` and the weight
//!   `c - floor(c)`. Rows, then columns, are interpolated. The output is float32 (`dtype`
//!   may also ask for uint8, rounded half away from zero and saturated, or float16).
//! - ResizeNearestNeighborV2(x, size; align_corners, half_pixel_centers): the source index
//!   is `min(round(o s), in - 1)` with align_corners (round half away from zero), else
//!   `min(floor(c), in - 1)` with `c = (o + 0.5) s` for half-pixel centers (no `- 0.5`:
//!   TensorFlow's nearest-neighbour scaler), else `o s`; with half-pixel centers the
//!   index is also kept at or above 0. Any element type; values are copied.
//! - ResizeBilinearV2D, ResizeNearestNeighborV2D (x; size required, align_corners,
//!   half_pixel_centers): the same with `size` an attribute.
//! - CropAndResize(x, boxes, box_index, crop_size; extrapolation_value 0, method
//!   "bilinear"): for each box `[y1, x1, y2, x2]` (normalized) of image `box_index[b]`, a
//!   `crop_h` by `crop_w` grid sampled at `y1 (H - 1) + i (y2 - y1)(H - 1)/(crop_h - 1)`
//!   (the box's centre when `crop_h` is 1), bilinearly or at the nearest pixel (rounded
//!   half away from zero); a sample outside the image is `extrapolation_value`. NHWC only,
//!   as the prototype says; output `[boxes, crop_h, crop_w, C]` float32.
//!
//! The coordinates and the interpolation are computed in f32, as TensorFlow's kernels do,
//! so the chosen neighbours and the results match them exactly.
//!
//! x's layout is the tensor's, not an attribute: the prototype says NHWC or NCHW "must be
//! set" in the tensor's format. Lowering records it ([`super::attrs::input_format`]); a
//! node without it (a unit test, a hand-built graph) is taken as NHWC, TensorFlow's layout
//! and the one the prototype's shapes are written in (rt2's choice).

use half::f16;

use super::attrs::{input_format, required_list};
use crate::formats::Format;
use crate::ops::nn::scalar::Scalar;
use crate::ops::shape::args::{bytes, bytes_mut, input, output};
use crate::ops::{
    Attr, DType, InferCtx, OpError, OpRegistry, TensorMeta, TensorMut, TensorRef, UNKNOWN, meta,
};

/// The op types this file registers, with the inputs whose values their inference reads.
const OPS: &[(&str, &[usize])] = &[
    ("ResizeBilinearV2", &[1]),
    ("ResizeNearestNeighborV2", &[1]),
    ("ResizeBilinearV2D", &[]),
    ("ResizeNearestNeighborV2D", &[]),
    ("CropAndResize", &[3]),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "CropAndResize" => (infer_crop_and_resize, crop_and_resize),
        _ => (infer_resize, resize),
    });
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::names(OPS)
}

/// Where H, W and C sit in a 4-D image.
#[derive(Debug, Clone, Copy)]
struct Layout {
    nchw: bool,
}

impl Layout {
    fn of(ctx: &InferCtx) -> Result<Layout, OpError> {
        match input_format(ctx, 0) {
            None | Some(Format::Nhwc) => Ok(Layout { nchw: false }),
            Some(Format::Nchw) => Ok(Layout { nchw: true }),
            Some(other) => Err(ctx.input_error(
                0,
                format!("is in format {}, not NHWC or NCHW", other.name()),
            )),
        }
    }

    /// (n, c, h, w) of a 4-D shape in this layout.
    fn split<T: Copy>(self, s: &[T]) -> (T, T, T, T) {
        if self.nchw {
            (s[0], s[1], s[2], s[3])
        } else {
            (s[0], s[3], s[1], s[2])
        }
    }

    /// The 4-D shape of (n, c, h, w) in this layout.
    fn join<T: Copy>(self, n: T, c: T, h: T, w: T) -> [T; 4] {
        if self.nchw {
            [n, c, h, w]
        } else {
            [n, h, w, c]
        }
    }

    /// Element strides of (c, h, w) in an image of `c` channels, `h` by `w`.
    fn strides(self, c: usize, h: usize, w: usize) -> (usize, usize, usize) {
        if self.nchw {
            (h * w, w, 1)
        } else {
            (1, w * c, c)
        }
    }
}

fn bilinear(op: &str) -> bool {
    op.starts_with("ResizeBilinear")
}

/// The new (h, w): the `size` attribute (`*D`) or input 1's values; `None` when input
/// 1's values are not known yet.
fn new_size(ctx: &InferCtx, runtime: Option<&TensorRef>) -> Result<Option<[i64; 2]>, OpError> {
    let v = if ctx.op.ends_with('D') {
        let v = required_list(ctx, "size")?;
        if v.len() != 2 {
            return Err(ctx.attr_error("size", format!("{v:?} is not [new_height, new_width]")));
        }
        v
    } else if let Some(t) = runtime {
        size_values(ctx, t, 1)?
    } else {
        match ctx.value_ints(1)? {
            Some(v) => v,
            None => return Ok(None),
        }
    };
    if v.len() != 2 || v.iter().any(|&d| d < 1) {
        let k = if ctx.op.ends_with('D') {
            "size"
        } else {
            "input 1"
        };
        return Err(ctx.compute_error(format!(
            "{k} is {v:?}, not two positive sizes [new_height, new_width]"
        )));
    }
    Ok(Some([v[0], v[1]]))
}

/// The values of an int32 size input `k`.
fn size_values(ctx: &InferCtx, t: &TensorRef, k: usize) -> Result<Vec<i64>, OpError> {
    match t.dtype {
        DType::I32 => Ok(t.slice::<i32>()?.iter().map(|&v| i64::from(v)).collect()),
        DType::I64 => Ok(t.slice::<i64>()?.to_vec()),
        other => Err(ctx.input_error(k, format!("is {other}, not int32"))),
    }
}

/// The output element type: ResizeBilinearV2's `dtype` (float32 by default; uint8, or
/// float16 for a float16 x), the D form's float32, nearest neighbour's x's type.
fn output_type(ctx: &InferCtx, x: DType) -> Result<DType, OpError> {
    if !bilinear(ctx.op) {
        return Ok(x);
    }
    if ctx.op.ends_with('D') {
        return Ok(DType::F32);
    }
    match ctx.attrs.get("dtype") {
        None | Some(Attr::DType(DType::F32)) => Ok(DType::F32),
        Some(Attr::DType(DType::U8)) => Ok(DType::U8),
        Some(Attr::DType(DType::F16)) if x == DType::F16 => Ok(DType::F16),
        Some(other) => Err(ctx.attr_error(
            "dtype",
            format!("{other:?}: the output is float32, uint8, or float16 for a float16 x"),
        )),
    }
}

fn check_x(ctx: &InferCtx, x: &TensorMeta) -> Result<(), OpError> {
    let ok = matches!(
        x.dtype,
        DType::I8
            | DType::U8
            | DType::I16
            | DType::U16
            | DType::I32
            | DType::I64
            | DType::F16
            | DType::F32
            | DType::F64
            | DType::Bf16
    );
    if !ok || (bilinear(ctx.op) && x.dtype == DType::Bf16) {
        return Err(ctx.input_error(0, format!("{} images are not resized", x.dtype)));
    }
    if let Some(s) = &x.shape
        && s.len() != 4
    {
        return Err(ctx.input_error(0, format!("is {s:?}, not a 4-D image")));
    }
    Ok(())
}

fn infer_resize(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let inputs = if ctx.op.ends_with('D') { 1 } else { 2 };
    ctx.arity(inputs, inputs)?;
    let x = &ctx.inputs[0];
    check_x(ctx, x)?;
    let layout = Layout::of(ctx)?;
    let dtype = output_type(ctx, x.dtype)?;
    let size = new_size(ctx, None)?;
    let Some(s) = &x.shape else {
        return Ok(meta(dtype, Some(vec![UNKNOWN; 4])));
    };
    let (n, c, _, _) = layout.split(s);
    let [h, w] = size.unwrap_or([UNKNOWN, UNKNOWN]);
    Ok(meta(dtype, Some(layout.join(n, c, h, w).to_vec())))
}

/// TensorFlow's `CalculateResizeScale`.
fn scale(input: usize, output: usize, align_corners: bool) -> f32 {
    if align_corners && output > 1 {
        (input as f32 - 1.0) / (output as f32 - 1.0)
    } else {
        input as f32 / output as f32
    }
}

/// One output coordinate's two source neighbours and the weight of the upper one.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Lerp {
    lo: usize,
    hi: usize,
    t: f32,
}

/// The bilinear neighbours of every output coordinate along one axis.
fn lerps(input: usize, output: usize, align_corners: bool, half_pixel: bool) -> Vec<Lerp> {
    let s = scale(input, output, align_corners);
    let last = input as i64 - 1;
    (0..output)
        .map(|o| {
            let c = if half_pixel {
                (o as f32 + 0.5) * s - 0.5
            } else {
                o as f32 * s
            };
            let f = c.floor();
            Lerp {
                lo: (f as i64).max(0) as usize,
                hi: (c.ceil() as i64).min(last) as usize,
                t: c - f,
            }
        })
        .collect()
}

/// The nearest source index of every output coordinate along one axis.
fn nearest(input: usize, output: usize, align_corners: bool, half_pixel: bool) -> Vec<usize> {
    let s = scale(input, output, align_corners);
    let last = input as i64 - 1;
    (0..output)
        .map(|o| {
            let c = if half_pixel {
                (o as f32 + 0.5) * s
            } else {
                o as f32 * s
            };
            // Half-pixel centers are never below 0 here, nor are TensorFlow's others:
            // the clamp only keeps a float's rounding from reaching past the edge.
            let i = if align_corners { c.round() } else { c.floor() } as i64;
            i.clamp(0, last) as usize
        })
        .collect()
}

fn resize(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    if x.rank() != 4 {
        return Err(ctx.input_error(0, format!("is {:?}, not a 4-D image", x.shape)));
    }
    let layout = Layout::of(ctx)?;
    let size = new_size(ctx, inputs.get(1))?;
    let [oh, ow] = size.map(|s| s.map(|d| d as usize)).unwrap_or([0, 0]);
    let (n, c, h, w) = layout.split(x.shape);
    let align = ctx.attr_bool("align_corners", false)?;
    let half = ctx.attr_bool("half_pixel_centers", false)?;
    if align && half {
        return Err(ctx.attr_error(
            "half_pixel_centers",
            "is true with align_corners: TensorFlow takes one or the other",
        ));
    }
    let y = output(ctx, outputs, 0)?;
    if y.shape != layout.join(n, c, oh, ow) {
        return Err(ctx.compute_error(format!(
            "output {:?} is not the resized {:?}",
            y.shape,
            layout.join(n, c, oh, ow)
        )));
    }
    if h == 0 || w == 0 {
        if y.is_empty() {
            return Ok(());
        }
        return Err(ctx.input_error(0, "has no pixels to resize"));
    }
    let geometry = Geometry {
        layout,
        n,
        c,
        h,
        w,
        oh,
        ow,
    };
    if bilinear(ctx.op) {
        let (rows, cols) = (lerps(h, oh, align, half), lerps(w, ow, align, half));
        crate::dispatch!(x.dtype, T in [f32, f16, f64, i8, u8, i16, u16, i32, i64] => {
            let src = x.slice::<T>()?;
            match y.dtype {
                DType::F32 => resize_bilinear(&geometry, src, &rows, &cols, y.slice_mut::<f32>()?),
                DType::U8 => resize_bilinear(&geometry, src, &rows, &cols, y.slice_mut::<u8>()?),
                DType::F16 => resize_bilinear(&geometry, src, &rows, &cols, y.slice_mut::<f16>()?),
                other => return Err(ctx.compute_error(format!("{other} output"))),
            }
            Ok(())
        }, other => Err(ctx.input_error(0, format!("{other} images are not resized"))))
    } else {
        let (rows, cols) = (nearest(h, oh, align, half), nearest(w, ow, align, half));
        let width = x.dtype.size();
        let src = bytes(ctx, x, 0)?;
        let dst = bytes_mut(ctx, y)?;
        let (cs, hs, ws) = layout.strides(c, h, w);
        let (ocs, ohs, ows) = layout.strides(c, oh, ow);
        for b in 0..n {
            let (ib, ob) = (b * c * h * w, b * c * oh * ow);
            for ch in 0..c {
                for (oy, &iy) in rows.iter().enumerate() {
                    for (ox, &ix) in cols.iter().enumerate() {
                        let from = (ib + ch * cs + iy * hs + ix * ws) * width;
                        let to = (ob + ch * ocs + oy * ohs + ox * ows) * width;
                        dst[to..to + width].copy_from_slice(&src[from..from + width]);
                    }
                }
            }
        }
        Ok(())
    }
}

/// An image batch's sizes, before and after.
struct Geometry {
    layout: Layout,
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
}

/// Bilinear resampling of every image and channel, in f32 as TensorFlow's kernel: the two
/// rows' values interpolated along x, then between the rows.
fn resize_bilinear<S: Scalar, D: Scalar>(
    g: &Geometry,
    src: &[S],
    rows: &[Lerp],
    cols: &[Lerp],
    dst: &mut [D],
) {
    let (cs, hs, ws) = g.layout.strides(g.c, g.h, g.w);
    let (ocs, ohs, ows) = g.layout.strides(g.c, g.oh, g.ow);
    let at = |i: usize| src[i].to_f64() as f32;
    for b in 0..g.n {
        let (ib, ob) = (b * g.c * g.h * g.w, b * g.c * g.oh * g.ow);
        for ch in 0..g.c {
            let base = ib + ch * cs;
            for (oy, r) in rows.iter().enumerate() {
                let (top, bottom) = (base + r.lo * hs, base + r.hi * hs);
                for (ox, q) in cols.iter().enumerate() {
                    let (l, rt) = (q.lo * ws, q.hi * ws);
                    let t = at(top + l) + (at(top + rt) - at(top + l)) * q.t;
                    let u = at(bottom + l) + (at(bottom + rt) - at(bottom + l)) * q.t;
                    let v = t + (u - t) * r.t;
                    dst[ob + ch * ocs + oy * ohs + ox * ows] = D::from_f64(f64::from(v));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// CropAndResize

fn infer_crop_and_resize(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(4, 4)?;
    let x = &ctx.inputs[0];
    check_x(ctx, x)?;
    if x.dtype == DType::Bf16 {
        return Err(ctx.input_error(0, "bfloat16 images are not cropped"));
    }
    if Layout::of(ctx)?.nchw {
        return Err(ctx.input_error(0, "is NCHW: CropAndResize takes NHWC images"));
    }
    method(ctx)?;
    let boxes = &ctx.inputs[1];
    if boxes.dtype != DType::F32 {
        return Err(ctx.input_error(1, format!("is {}, not float32", boxes.dtype)));
    }
    if let Some(s) = &boxes.shape
        && (s.len() != 2 || (s[1] != 4 && s[1] != UNKNOWN))
    {
        return Err(ctx.input_error(1, format!("is {s:?}, not [boxes, 4]")));
    }
    let count = boxes.shape.as_ref().map_or(UNKNOWN, |s| s[0]);
    let crop = match ctx.value_ints(3)? {
        Some(v) if v.len() == 2 && v.iter().all(|&d| d > 0) => [v[0], v[1]],
        Some(v) => {
            return Err(ctx.input_error(3, format!("is {v:?}, not two positive sizes")));
        }
        None => [UNKNOWN, UNKNOWN],
    };
    let depth = x.shape.as_ref().map_or(UNKNOWN, |s| s[3]);
    Ok(meta(DType::F32, Some(vec![count, crop[0], crop[1], depth])))
}

/// Whether `method` asks for bilinear sampling (else nearest).
fn method(ctx: &InferCtx) -> Result<bool, OpError> {
    match ctx.attr_str("method", "bilinear")? {
        "bilinear" => Ok(true),
        "nearest" => Ok(false),
        other => Err(ctx.attr_error("method", format!("{other:?} is not bilinear or nearest"))),
    }
}

/// The source coordinate of crop sample `i` of `crop` along an axis of `size` pixels,
/// for a box edge pair `(a, b)`: TensorFlow's `CropAndResize` mapping.
fn crop_coord(a: f32, b: f32, i: usize, crop: usize, size: usize) -> f32 {
    let span = size as f32 - 1.0;
    if crop > 1 {
        a * span + i as f32 * ((b - a) * span / (crop as f32 - 1.0))
    } else {
        0.5 * (a + b) * span
    }
}

fn crop_and_resize(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let boxes = input(ctx, inputs, 1)?.slice::<f32>()?;
    let index = size_values(ctx, input(ctx, inputs, 2)?, 2)?;
    let crop = size_values(ctx, input(ctx, inputs, 3)?, 3)?;
    if crop.len() != 2 || crop.iter().any(|&d| d < 1) {
        return Err(ctx.input_error(3, format!("is {crop:?}, not two positive sizes")));
    }
    let (ch, cw) = (crop[0] as usize, crop[1] as usize);
    if x.rank() != 4 {
        return Err(ctx.input_error(0, format!("is {:?}, not a 4-D image", x.shape)));
    }
    let (n, h, w, c) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    if boxes.len() != index.len() * 4 {
        return Err(ctx.input_error(
            2,
            format!("has {} indices for {} boxes", index.len(), boxes.len() / 4),
        ));
    }
    if let Some(bad) = index.iter().find(|&&b| b < 0 || b as usize >= n) {
        return Err(ctx.input_error(2, format!("holds {bad}, outside the batch of {n}")));
    }
    let bilinear = method(ctx)?;
    let extrapolate = ctx.attr_float("extrapolation_value", 0.0)?;
    let y = output(ctx, outputs, 0)?;
    if y.shape != [index.len(), ch, cw, c] {
        return Err(ctx.compute_error(format!("output {:?} is not the crops'", y.shape)));
    }
    let dst = y.slice_mut::<f32>()?;
    crate::dispatch!(x.dtype, T in [f32, f16, f64, i8, u8, i16, u16, i32, i64] => {
        let src = x.slice::<T>()?;
        let at = |b: usize, yy: usize, xx: usize, k: usize| {
            src[((b * h + yy) * w + xx) * c + k].to_f64() as f32
        };
        for (bi, (&img, bx)) in index.iter().zip(boxes.chunks_exact(4)).enumerate() {
            let img = img as usize;
            for i in 0..ch {
                let cy = crop_coord(bx[0], bx[2], i, ch, h);
                for j in 0..cw {
                    let cx = crop_coord(bx[1], bx[3], j, cw, w);
                    let out = &mut dst[((bi * ch + i) * cw + j) * c..][..c];
                    let outside = |v: f32, size: usize| v < 0.0 || v > size as f32 - 1.0;
                    if outside(cy, h) || outside(cx, w) {
                        out.fill(extrapolate);
                        continue;
                    }
                    if !bilinear {
                        let (yy, xx) = (cy.round() as usize, cx.round() as usize);
                        for (k, o) in out.iter_mut().enumerate() {
                            *o = at(img, yy, xx, k);
                        }
                        continue;
                    }
                    let (t, b) = (cy.floor() as usize, cy.ceil() as usize);
                    let (l, r) = (cx.floor() as usize, cx.ceil() as usize);
                    let (ty, tx) = (cy - cy.floor(), cx - cx.floor());
                    for (k, o) in out.iter_mut().enumerate() {
                        let top = at(img, t, l, k) + (at(img, t, r, k) - at(img, t, l, k)) * tx;
                        let bot = at(img, b, l, k) + (at(img, b, r, k) - at(img, b, l, k)) * tx;
                        *o = top + (bot - top) * ty;
                    }
                }
            }
        }
        Ok(())
    }, other => Err(ctx.input_error(0, format!("{other} images are not cropped"))))
}

#[cfg(test)]
mod tests;
