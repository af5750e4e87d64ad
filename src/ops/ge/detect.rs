//! GE's detection ops (graphengine `image_ops.h`, `nn_detect_ops.h`), each computed as the
//! framework layer its prototype says it is compatible with. float16 and float32 operands
//! are read into f32 (NonMaxSuppressionV3's IoU; the ROI poolings, as Caffe's float
//! layers) or f64 (PriorBox's geometry), and each result is rounded once to the output's
//! type.
//!
//! - NonMaxSuppressionV3(boxes `[n, 4]`, scores `[n]`, max_output_size, iou_threshold,
//!   score_threshold; offset 0), TensorFlow's op of that name: the boxes scoring strictly
//!   above `score_threshold`, visited by descending score (ties to the lower index), each
//!   kept when its IoU with every box kept before is at most `iou_threshold`, until
//!   `max_output_size` are kept; the output is their indices, int32 `[M]`, in that order.
//!   A box's corners may come in either order: each axis uses the min and max of its two
//!   coordinates, so `(y1, x1, y2, x2)` and `(x1, y1, x2, y2)` give the same IoU. IoU is
//!   `inter / (area_a + area_b - inter)`, 0 when either area is not positive. The output
//!   size depends on the data. `iou_threshold` must lie in [0, 1] (TensorFlow's check).
//!   rt2's choice: `offset`, which the prototype documents only as "an optional int", is
//!   accepted at 0 alone; a negative `max_output_size` is refused.
//! - PriorBox(x [N, C, H, W], img [N, C, IH, IW]; min_size, max_size, aspect_ratio
//!   required; img_h 0, img_w 0, step_h 0, step_w 0, flip true, clip false, offset 0.5,
//!   variance [0.1]), Caffe SSD's PriorBox layer: the aspect ratios are 1 followed by each
//!   given ratio not yet in the list (within 1e-6) and, with `flip`, its inverse. The
//!   image size is `img_h`/`img_w`, or img's H/W where 0; the step is `step_h`/`step_w`,
//!   or image size / feature size where 0. At each cell (h, w), centre
//!   `((w + offset) step_w, (h + offset) step_h)`, for each min size `m`: a square of side
//!   `m`; with max sizes, a square of side `sqrt(m M)` for the paired max size `M`; then
//!   for each ratio `r != 1` a box `m sqrt(r)` wide and `m / sqrt(r)` high. Each box is
//!   `[xmin, ymin, xmax, ymax]` divided by the image width and height, clamped to [0, 1]
//!   with `clip`. Output `[1, 2, H W P 4]` (Caffe's top shape, rt2's choice since GE's
//!   documentation gives none; `P` the priors per cell): channel 0 the boxes, channel 1
//!   the variance, one value for all four coordinates or four values. rt2's choice: an
//!   empty `max_size` means no max-size boxes (as Caffe without `max_size`); given, it
//!   pairs with `min_size` one to one and each must exceed its min size (Caffe's checks).
//! - ROIPooling(x [N, C, H, W], rois, roi_actual_num?; pooled_h, pooled_w,
//!   spatial_scale_h, spatial_scale_w required), Caffe's (Fast R-CNN) ROIPooling with a
//!   scale per axis: each ROI `[batch_id, x1, y1, x2, y2]` is rounded to cells
//!   `round(x1 sw) ..= round(x2 sw)` (half away from zero) and likewise in y, at least
//!   one cell; bin `i` of `pooled` spans `floor(i s) .. ceil((i + 1) s)` cells from the
//!   start with `s = cells / pooled`, clipped to the map; the output is each bin's max, 0
//!   for an empty bin. Computed in f32 as Caffe's float layer.
//! - PSROIPooling(x [N, output_dim group_size^2, H, W], rois; output_dim, group_size,
//!   spatial_scale required), R-FCN's position-sensitive ROI pooling: the ROI spans
//!   `round(x1) s .. (round(x2) + 1) s` (at least 0.1) in x and likewise in y, split
//!   into `group_size` bins a side with the edges floored and ceiled and clipped; output
//!   channel `k`'s bin `(i, j)` is the mean of input channel `(k g + i) g + j` over the
//!   bin (summed in f32, as R-FCN), 0 for an empty bin. `group_size` is below 128.
//!
//! Both ROI poolings take rois as GE's `[batch, 5, rois]` (field-major, the ROIs of all
//! batches in order) or Caffe's `[num_rois, 5]`; a ROI's image is its `batch_id`. Their
//! output is `[rois, C, pooled_h, pooled_w]` (Caffe's top shape; rt2's choice, GE
//! documents none). rt2's choice: ROIPooling's `roi_actual_num`, documented only as "the
//! number of ROIs per batch" in a `[batch, 8]` tensor, is refused when given.
//!
//! Not here, as GE's documentation does not pin their numerics down: SSDDetectionOutput
//! (the default `keep_top_k` -1 leaves its `[batch, keep_top_k, 8]` output unsized, and
//! neither the padding rows nor `out_boxnum`'s shape are documented), Proposal and
//! ProposalD (`cls_prob` is documented as the background probability, and the padding of
//! `rois` and the layout of `actual_rois_num` `[batch, 8]` are not given),
//! YoloV3DetectionOutput (the box decoding against `img_info` and its NMS are not
//! described) and DecodeBBox (its prototype is HiAI's, with no layout or formula).

use half::f16;

use super::attrs::{given, required_float, required_int};
use crate::ops::shape::args::{input, output};
use crate::ops::{
    DType, InferCtx, OpError, OpRegistry, OpSpec, Tensor, TensorMeta, TensorMut, TensorRef,
    UNKNOWN, meta,
};

/// The op types this file registers.
const OPS: &[&str] = &[
    "NonMaxSuppressionV3",
    "PriorBox",
    "ROIPooling",
    "PSROIPooling",
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    reg.add(
        OpSpec::new("NonMaxSuppressionV3", infer_nms_v3)
            .data_dependent()
            .computes_alloc(nms_v3),
    );
    reg.add(OpSpec::new("PriorBox", infer_prior_box).computes(prior_box));
    reg.add(OpSpec::new("ROIPooling", infer_roi_pooling).computes(roi_pooling));
    reg.add(OpSpec::new("PSROIPooling", infer_psroi_pooling).computes(psroi_pooling));
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    OPS.iter().copied()
}

/// Checks input `k` is float16 or float32.
fn check_float(ctx: &InferCtx, k: usize) -> Result<DType, OpError> {
    match ctx.inputs[k].dtype {
        d @ (DType::F16 | DType::F32) => Ok(d),
        other => Err(ctx.input_error(k, format!("is {other}, not float16 or float32"))),
    }
}

/// Input `k`'s values as f32 (float16 or float32).
fn floats(ctx: &InferCtx, t: &TensorRef, k: usize) -> Result<Vec<f32>, OpError> {
    match t.dtype {
        DType::F32 => Ok(t.slice::<f32>()?.to_vec()),
        DType::F16 => Ok(t.slice::<f16>()?.iter().map(|v| v.to_f32()).collect()),
        other => Err(ctx.input_error(k, format!("is {other}, not float16 or float32"))),
    }
}

/// The one value of a scalar (or one-element) input `k`.
fn scalar_f32(ctx: &InferCtx, t: &TensorRef, k: usize) -> Result<f32, OpError> {
    match floats(ctx, t, k)?.as_slice() {
        [v] => Ok(*v),
        v => Err(ctx.input_error(k, format!("has {} values, not one", v.len()))),
    }
}

/// Whether `v` is above 0 (NaN is not).
fn positive(v: f64) -> bool {
    v > 0.0
}

/// Checks a known shape has `rank` dims.
fn check_rank(ctx: &InferCtx, k: usize, rank: usize, what: &str) -> Result<(), OpError> {
    if let Some(s) = &ctx.inputs[k].shape
        && s.len() != rank
    {
        return Err(ctx.input_error(k, format!("is {s:?}, not {what}")));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// NonMaxSuppressionV3

/// `offset` must be 0 (see the module doc).
fn nms_offset(ctx: &InferCtx) -> Result<(), OpError> {
    match ctx.attr_int("offset", 0)? {
        0 => Ok(()),
        v => Err(ctx.attr_error(
            "offset",
            format!("is {v}; only 0 is supported (GE documents no other value's meaning)"),
        )),
    }
}

fn infer_nms_v3(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(5, 5)?;
    nms_offset(ctx)?;
    for k in [0, 1, 3, 4] {
        check_float(ctx, k)?;
    }
    if ctx.inputs[2].dtype != DType::I32 {
        return Err(ctx.input_error(2, format!("is {}, not int32", ctx.inputs[2].dtype)));
    }
    if let Some(s) = &ctx.inputs[0].shape
        && (s.len() != 2 || (s[1] != 4 && s[1] != UNKNOWN))
    {
        return Err(ctx.input_error(0, format!("is {s:?}, not [num_boxes, 4]")));
    }
    check_rank(ctx, 1, 1, "[num_boxes]")?;
    Ok(meta(DType::I32, Some(vec![UNKNOWN])))
}

/// TensorFlow's IoU of boxes `a` and `b` (four coordinates each, corners in any order).
fn iou(a: &[f32], b: &[f32]) -> f32 {
    let span = |p: f32, q: f32| (p.min(q), p.max(q));
    let (ay0, ay1) = span(a[0], a[2]);
    let (ax0, ax1) = span(a[1], a[3]);
    let (by0, by1) = span(b[0], b[2]);
    let (bx0, bx1) = span(b[1], b[3]);
    let area_a = (ay1 - ay0) * (ax1 - ax0);
    let area_b = (by1 - by0) * (bx1 - bx0);
    if area_a <= 0.0 || area_b <= 0.0 {
        return 0.0;
    }
    let ih = (ay1.min(by1) - ay0.max(by0)).max(0.0);
    let iw = (ax1.min(bx1) - ax0.max(bx0)).max(0.0);
    let inter = ih * iw;
    inter / (area_a + area_b - inter)
}

fn nms_v3(ctx: &InferCtx, inputs: &[TensorRef]) -> Result<Vec<Tensor>, OpError> {
    infer_nms_v3(ctx)?;
    let boxes = input(ctx, inputs, 0)?;
    let scores = input(ctx, inputs, 1)?;
    let n = scores.len();
    if boxes.shape != [n, 4] {
        return Err(ctx.input_error(
            0,
            format!("is {:?}, not [{n}, 4] for {n} scores", boxes.shape),
        ));
    }
    let limit = match input(ctx, inputs, 2)?.slice::<i32>()? {
        [v] if *v >= 0 => *v as usize,
        [v] => return Err(ctx.input_error(2, format!("max_output_size is {v}, negative"))),
        v => return Err(ctx.input_error(2, format!("has {} values, not one", v.len()))),
    };
    let threshold = scalar_f32(ctx, input(ctx, inputs, 3)?, 3)?;
    if !(0.0..=1.0).contains(&threshold) {
        return Err(ctx.input_error(3, format!("iou_threshold {threshold} is not in [0, 1]")));
    }
    let floor = scalar_f32(ctx, input(ctx, inputs, 4)?, 4)?;
    let b = floats(ctx, boxes, 0)?;
    let s = floats(ctx, scores, 1)?;
    let mut order: Vec<usize> = (0..n).filter(|&i| s[i] > floor).collect();
    order.sort_by(|&i, &j| s[j].total_cmp(&s[i]).then(i.cmp(&j)));
    let mut kept: Vec<usize> = Vec::new();
    for i in order {
        if kept.len() >= limit {
            break;
        }
        let bi = &b[i * 4..i * 4 + 4];
        if kept
            .iter()
            .all(|&j| iou(bi, &b[j * 4..j * 4 + 4]) <= threshold)
        {
            kept.push(i);
        }
    }
    let out: Vec<i32> = kept.iter().map(|&i| i as i32).collect();
    Ok(vec![Tensor::from_vec(&[out.len()], &out)])
}

// ---------------------------------------------------------------------------------------
// PriorBox

/// PriorBox's attributes, checked.
struct Priors {
    min: Vec<f64>,
    max: Vec<f64>,
    /// 1, then the given ratios and their inverses (with `flip`), without repeats.
    ratios: Vec<f64>,
    img: [i64; 2],
    step: [f64; 2],
    clip: bool,
    offset: f64,
    variance: Vec<f64>,
}

impl Priors {
    fn read(ctx: &InferCtx) -> Result<Priors, OpError> {
        let list = |name: &str| {
            ctx.attr_floats(name)?
                .ok_or_else(|| ctx.attr_error(name, "is required and missing"))
        };
        let min = list("min_size")?;
        let max = list("max_size")?;
        let given = list("aspect_ratio")?;
        if min.is_empty() || min.iter().any(|&m| !positive(m)) {
            return Err(ctx.attr_error("min_size", format!("{min:?}: each must be positive")));
        }
        if !max.is_empty() && max.len() != min.len() {
            return Err(ctx.attr_error(
                "max_size",
                format!("has {} values for {} min sizes", max.len(), min.len()),
            ));
        }
        if let Some((m, x)) = min.iter().zip(&max).find(|(m, x)| !positive(*x - *m)) {
            return Err(ctx.attr_error("max_size", format!("{x} is not above min size {m}")));
        }
        let flip = ctx.attr_bool("flip", true)?;
        let mut ratios = vec![1.0f64];
        for &r in &given {
            if !positive(r) {
                return Err(ctx.attr_error("aspect_ratio", format!("{r} is not positive")));
            }
            if ratios.iter().any(|&q| (q - r).abs() < 1e-6) {
                continue;
            }
            ratios.push(r);
            if flip {
                ratios.push(1.0 / r);
            }
        }
        let variance = ctx.attr_floats("variance")?.unwrap_or_else(|| vec![0.1]);
        if !matches!(variance.len(), 1 | 4) || variance.iter().any(|&v| !positive(v)) {
            return Err(ctx.attr_error(
                "variance",
                format!("{variance:?} is not one or four positive values"),
            ));
        }
        let mut img = [0i64; 2];
        let mut step = [0f64; 2];
        for (k, axis) in ["h", "w"].into_iter().enumerate() {
            let (size, stride) = (format!("img_{axis}"), format!("step_{axis}"));
            img[k] = ctx.attr_int(&size, 0)?;
            step[k] = f64::from(ctx.attr_float(&stride, 0.0)?);
            if img[k] < 0 {
                return Err(ctx.attr_error(&size, format!("is {}, negative", img[k])));
            }
            if step[k] < 0.0 || step[k].is_nan() {
                return Err(ctx.attr_error(&stride, format!("is {}, not a step", step[k])));
            }
        }
        Ok(Priors {
            min,
            max,
            ratios,
            img,
            step,
            clip: ctx.attr_bool("clip", false)?,
            offset: f64::from(ctx.attr_float("offset", 0.5)?),
            variance,
        })
    }

    /// Priors per feature-map cell.
    fn per_cell(&self) -> usize {
        self.min.len() * self.ratios.len() + self.max.len()
    }
}

fn infer_prior_box(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let dtype = check_float(ctx, 0)?;
    check_float(ctx, 1)?;
    check_rank(ctx, 0, 4, "an NCHW feature map")?;
    check_rank(ctx, 1, 4, "an NCHW image")?;
    let p = Priors::read(ctx)?;
    let len = match &ctx.inputs[0].shape {
        Some(s) if s[2] != UNKNOWN && s[3] != UNKNOWN => s[2]
            .checked_mul(s[3])
            .and_then(|c| c.checked_mul(p.per_cell() as i64 * 4))
            .ok_or_else(|| ctx.input_error(0, format!("{s:?} has too many priors")))?,
        _ => UNKNOWN,
    };
    Ok(meta(dtype, Some(vec![1, 2, len])))
}

fn prior_box(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let p = Priors::read(ctx)?;
    let x = input(ctx, inputs, 0)?;
    let img = input(ctx, inputs, 1)?;
    if x.rank() != 4 || img.rank() != 4 {
        return Err(ctx.input_error(0, "x and img must be 4-D NCHW"));
    }
    let (fh, fw) = (x.shape[2], x.shape[3]);
    let pick = |attr: i64, dim: usize| if attr > 0 { attr as f64 } else { dim as f64 };
    let (ih, iw) = (pick(p.img[0], img.shape[2]), pick(p.img[1], img.shape[3]));
    if ih <= 0.0 || iw <= 0.0 {
        return Err(ctx.input_error(1, "has no height or width to normalize by"));
    }
    let step_h = if p.step[0] > 0.0 {
        p.step[0]
    } else {
        ih / fh as f64
    };
    let step_w = if p.step[1] > 0.0 {
        p.step[1]
    } else {
        iw / fw as f64
    };
    let len = fh * fw * p.per_cell() * 4;
    let mut v = Vec::with_capacity(len * 2);
    for h in 0..fh {
        let cy = (h as f64 + p.offset) * step_h;
        for w in 0..fw {
            let cx = (w as f64 + p.offset) * step_w;
            let mut push = |bw: f64, bh: f64| {
                v.push((cx - bw / 2.0) / iw);
                v.push((cy - bh / 2.0) / ih);
                v.push((cx + bw / 2.0) / iw);
                v.push((cy + bh / 2.0) / ih);
            };
            for (s, &m) in p.min.iter().enumerate() {
                push(m, m);
                if let Some(&big) = p.max.get(s) {
                    let side = (m * big).sqrt();
                    push(side, side);
                }
                for &r in p.ratios.iter().filter(|&&r| (r - 1.0).abs() >= 1e-6) {
                    push(m * r.sqrt(), m / r.sqrt());
                }
            }
        }
    }
    if p.clip {
        v.iter_mut().for_each(|c| *c = c.clamp(0.0, 1.0));
    }
    v.extend((0..len).map(|i| p.variance[i % p.variance.len()]));
    let y = output(ctx, outputs, 0)?;
    if y.len() != v.len() {
        return Err(ctx.compute_error(format!("output {:?} is not [1, 2, {len}]", y.shape)));
    }
    store(ctx, y, &v)
}

/// Writes `v` into `y` (float32 or float16), each value rounded once.
fn store(ctx: &InferCtx, y: &mut TensorMut, v: &[f64]) -> Result<(), OpError> {
    match y.dtype {
        DType::F32 => y
            .slice_mut::<f32>()?
            .iter_mut()
            .zip(v)
            .for_each(|(o, &c)| *o = c as f32),
        DType::F16 => y
            .slice_mut::<f16>()?
            .iter_mut()
            .zip(v)
            .for_each(|(o, &c)| *o = f16::from_f64(c)),
        other => return Err(ctx.compute_error(format!("{other} output"))),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// ROIPooling, PSROIPooling

/// The ROI count of a rois shape: `[num_rois, 5]` (Caffe's) or `[batch, 5, rois]` (GE's);
/// `None` for any other shape.
fn roi_count(s: &[i64]) -> Option<i64> {
    let known = |d: i64, v: i64| d == v || d == UNKNOWN;
    match s {
        [n, f] if known(*f, 5) => Some(*n),
        [b, f, r] if known(*f, 5) => Some(if *b == UNKNOWN || *r == UNKNOWN {
            UNKNOWN
        } else {
            b * r
        }),
        _ => None,
    }
}

/// Shared inference: x `[N, C, H, W]`, rois; output `[rois, channels, ph, pw]` of x's type.
fn infer_roi(
    ctx: &InferCtx,
    channels: Option<i64>,
    pooled: [i64; 2],
) -> Result<Vec<TensorMeta>, OpError> {
    let dtype = check_float(ctx, 0)?;
    check_float(ctx, 1)?;
    check_rank(ctx, 0, 4, "an NCHW feature map")?;
    let count = match &ctx.inputs[1].shape {
        None => UNKNOWN,
        Some(s) => roi_count(s).ok_or_else(|| {
            ctx.input_error(
                1,
                format!("is {s:?}, not [num_rois, 5] or [batch, 5, rois]"),
            )
        })?,
    };
    let c = match channels {
        Some(c) => c,
        None => ctx.inputs[0].shape.as_ref().map_or(UNKNOWN, |s| s[1]),
    };
    Ok(meta(dtype, Some(vec![count, c, pooled[0], pooled[1]])))
}

/// The ROIs `[batch_id, x1, y1, x2, y2]` of input `k`, from either layout.
fn read_rois(ctx: &InferCtx, t: &TensorRef, k: usize) -> Result<Vec<[f32; 5]>, OpError> {
    let v = floats(ctx, t, k)?;
    match *t.shape {
        [n, 5] => Ok((0..n)
            .map(|i| std::array::from_fn(|f| v[i * 5 + f]))
            .collect()),
        [b, 5, r] => Ok((0..b * r)
            .map(|i| std::array::from_fn(|f| v[((i / r) * 5 + f) * r + i % r]))
            .collect()),
        _ => Err(ctx.input_error(
            k,
            format!("is {:?}, not [num_rois, 5] or [batch, 5, rois]", t.shape),
        )),
    }
}

/// A ROI's image index, checked against the batch of `n`.
fn roi_batch(ctx: &InferCtx, roi: &[f32; 5], n: usize) -> Result<usize, OpError> {
    let b = roi[0] as i64;
    if b < 0 || b as usize >= n || roi[0].is_nan() {
        return Err(ctx.input_error(
            1,
            format!("batch_id {} is outside the batch of {n}", roi[0]),
        ));
    }
    Ok(b as usize)
}

/// Input 0, checked to be a 4-D feature map.
fn feature_map<'t, 'a>(
    ctx: &InferCtx,
    inputs: &'t [TensorRef<'a>],
) -> Result<&'t TensorRef<'a>, OpError> {
    let x = input(ctx, inputs, 0)?;
    if x.rank() != 4 {
        return Err(ctx.input_error(0, format!("is {:?}, not an NCHW feature map", x.shape)));
    }
    Ok(x)
}

/// A positive int attribute, required.
fn positive_int(ctx: &InferCtx, name: &str) -> Result<i64, OpError> {
    let v = required_int(ctx, name)?;
    if v < 1 {
        return Err(ctx.attr_error(name, format!("is {v}, not positive")));
    }
    Ok(v)
}

fn infer_roi_pooling(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    if given(ctx, 2) {
        return Err(ctx.input_error(
            2,
            "roi_actual_num is not supported: GE documents its [batch, 8] layout only as \
             the number of ROIs per batch",
        ));
    }
    let pooled = [
        positive_int(ctx, "pooled_h")?,
        positive_int(ctx, "pooled_w")?,
    ];
    required_float(ctx, "spatial_scale_h")?;
    required_float(ctx, "spatial_scale_w")?;
    infer_roi(ctx, None, pooled)
}

fn roi_pooling(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    infer_roi_pooling(ctx)?;
    let (ph, pw) = (
        required_int(ctx, "pooled_h")? as usize,
        required_int(ctx, "pooled_w")? as usize,
    );
    let (scale_h, scale_w) = (
        required_float(ctx, "spatial_scale_h")?,
        required_float(ctx, "spatial_scale_w")?,
    );
    let x = feature_map(ctx, inputs)?;
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let rois = read_rois(ctx, input(ctx, inputs, 1)?, 1)?;
    let data = floats(ctx, x, 0)?;
    let mut v = vec![0f64; rois.len() * c * ph * pw];
    for (r, roi) in rois.iter().enumerate() {
        let b = roi_batch(ctx, roi, n)?;
        // Caffe's ROIPooling: corners rounded to feature cells, both ends included.
        let (x1, y1) = ((roi[1] * scale_w).round(), (roi[2] * scale_h).round());
        let (x2, y2) = ((roi[3] * scale_w).round(), (roi[4] * scale_h).round());
        let roi_h = (y2 - y1 + 1.0).max(1.0);
        let roi_w = (x2 - x1 + 1.0).max(1.0);
        let (bin_h, bin_w) = (roi_h / ph as f32, roi_w / pw as f32);
        let span = |i: usize, bin: f32, start: f32, size: usize| {
            let clamp = |e: f32| (e + start).clamp(0.0, size as f32) as usize;
            (
                clamp((i as f32 * bin).floor()),
                clamp(((i + 1) as f32 * bin).ceil()),
            )
        };
        for ch in 0..c {
            let plane = &data[(b * c + ch) * h * w..][..h * w];
            for i in 0..ph {
                let (h0, h1) = span(i, bin_h, y1, h);
                for j in 0..pw {
                    let (w0, w1) = span(j, bin_w, x1, w);
                    let mut m = 0f32;
                    if h1 > h0 && w1 > w0 {
                        m = f32::MIN;
                        for row in plane[h0 * w..h1 * w].chunks_exact(w) {
                            for &e in &row[w0..w1] {
                                if e > m {
                                    m = e;
                                }
                            }
                        }
                    }
                    v[((r * c + ch) * ph + i) * pw + j] = f64::from(m);
                }
            }
        }
    }
    store(ctx, output(ctx, outputs, 0)?, &v)
}

fn infer_psroi_pooling(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let dim = positive_int(ctx, "output_dim")?;
    let group = positive_int(ctx, "group_size")?;
    if group >= 128 {
        return Err(ctx.attr_error("group_size", format!("is {group}, not below 128")));
    }
    required_float(ctx, "spatial_scale")?;
    if let Some(s) = &ctx.inputs[0].shape
        && s.len() == 4
        && s[1] != UNKNOWN
        && s[1] != dim * group * group
    {
        return Err(ctx.input_error(
            0,
            format!(
                "has {} channels, not output_dim x group_size^2 = {}",
                s[1],
                dim * group * group
            ),
        ));
    }
    infer_roi(ctx, Some(dim), [group, group])
}

fn psroi_pooling(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    infer_psroi_pooling(ctx)?;
    let dim = required_int(ctx, "output_dim")? as usize;
    let g = required_int(ctx, "group_size")? as usize;
    let scale = required_float(ctx, "spatial_scale")?;
    let x = feature_map(ctx, inputs)?;
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    if c != dim * g * g {
        return Err(ctx.input_error(0, format!("has {c} channels, not {}", dim * g * g)));
    }
    let rois = read_rois(ctx, input(ctx, inputs, 1)?, 1)?;
    let data = floats(ctx, x, 0)?;
    let mut v = vec![0f64; rois.len() * dim * g * g];
    for (r, roi) in rois.iter().enumerate() {
        let b = roi_batch(ctx, roi, n)?;
        // R-FCN's PSROIPooling: corners rounded, the far edge one cell past the corner.
        let x1 = roi[1].round() * scale;
        let y1 = roi[2].round() * scale;
        let x2 = (roi[3].round() + 1.0) * scale;
        let y2 = (roi[4].round() + 1.0) * scale;
        let (bin_h, bin_w) = ((y2 - y1).max(0.1) / g as f32, (x2 - x1).max(0.1) / g as f32);
        let span = |i: usize, bin: f32, start: f32, size: usize| {
            let clamp = |e: f32| e.clamp(0.0, size as f32) as usize;
            (
                clamp((i as f32 * bin + start).floor()),
                clamp(((i + 1) as f32 * bin + start).ceil()),
            )
        };
        for ct in 0..dim {
            for i in 0..g {
                let (h0, h1) = span(i, bin_h, y1, h);
                for j in 0..g {
                    let (w0, w1) = span(j, bin_w, x1, w);
                    let ch = (ct * g + i) * g + j;
                    let plane = &data[(b * c + ch) * h * w..][..h * w];
                    let mut mean = 0f32;
                    if h1 > h0 && w1 > w0 {
                        let mut sum = 0f32;
                        for row in plane[h0 * w..h1 * w].chunks_exact(w) {
                            for &e in &row[w0..w1] {
                                sum += e;
                            }
                        }
                        mean = sum / ((h1 - h0) * (w1 - w0)) as f32;
                    }
                    v[((r * dim + ct) * g + i) * g + j] = f64::from(mean);
                }
            }
        }
    }
    store(ctx, output(ctx, outputs, 0)?, &v)
}

#[cfg(test)]
mod tests;
