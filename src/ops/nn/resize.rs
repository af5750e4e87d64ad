//! Resize and Upsample: nearest, (bi/tri)linear and cubic interpolation over any dims,
//! with every ONNX coordinate transformation, `nearest_mode`, `cubic_coeff_a`,
//! `exclude_outside`, `extrapolation_value`, `antialias`, `axes` and
//! `keep_aspect_ratio_policy`, from `scales` or `sizes`.
//!
//! Each of these interpolations is a tensor product of 1-D interpolations, so the
//! kernel resamples one axis at a time: for each output position along the axis it
//! computes the input taps and weights once (what the ONNX reference computes per
//! element), then forms every output row as a weighted sum of whole contiguous input
//! rows. Out-of-range positions in `tf_crop_and_resize` take the extrapolation value;
//! since every weight set sums to one, later axes carry that value through unchanged, as
//! the N-d definition requires.

use rayon::prelude::*;

use super::scalar::{Scalar, read_f64s};
use crate::dispatch;
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// Elements below which an axis pass runs on the calling thread.
const PARALLEL_ELEMS: usize = 1 << 14;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

/// The attributes that shape the 1-D interpolation.
struct Params<'a> {
    mode: Mode,
    coord: &'a str,
    nearest: &'a str,
    cubic_a: f64,
    exclude_outside: bool,
    extrapolation: f64,
    antialias: bool,
}

/// Input taps and weights for each output position along one axis; `None` is an
/// extrapolated position.
struct AxisTaps {
    spans: Vec<Option<(usize, usize)>>,
    idx: Vec<usize>,
    w: Vec<f64>,
}

/// Keys' cubic convolution kernel with coefficient `a`.
fn cubic(x: f64, a: f64) -> f64 {
    let x = x.abs();
    if x <= 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

/// The input coordinate of output position `j` (ONNX's coordinate transformations).
fn source_coord(
    p: &Params,
    j: usize,
    scale: f64,
    out_len: usize,
    in_len: usize,
    roi: (f64, f64),
) -> f64 {
    // The ONNX reference divides by the resized length as a real number, scale * input
    // length, not the rounded output size; the two differ when downsampling.
    let (x, lo, li) = (j as f64, scale * in_len as f64, in_len as f64);
    match p.coord {
        "asymmetric" => x / scale,
        "align_corners" if out_len == 1 => 0.0,
        "align_corners" => x * (li - 1.0) / (lo - 1.0),
        "pytorch_half_pixel" if out_len == 1 => 0.0,
        "tf_half_pixel_for_nn" => (x + 0.5) / scale,
        "half_pixel_symmetric" => {
            let adjustment = out_len as f64 / lo;
            let offset = li / 2.0 * (1.0 - adjustment);
            offset + (x + 0.5) / scale - 0.5
        }
        "tf_crop_and_resize" if out_len == 1 => 0.5 * (roi.0 + roi.1) * (li - 1.0),
        "tf_crop_and_resize" => roi.0 * (li - 1.0) + x * (roi.1 - roi.0) * (li - 1.0) / (lo - 1.0),
        // half_pixel and pytorch_half_pixel with more than one output.
        _ => (x + 0.5) / scale - 0.5,
    }
}

fn axis_taps(p: &Params, scale: f64, out_len: usize, in_len: usize, roi: (f64, f64)) -> AxisTaps {
    let mut t = AxisTaps {
        spans: Vec::with_capacity(out_len),
        idx: Vec::new(),
        w: Vec::new(),
    };
    let last = in_len as isize - 1;
    let mut coeffs: Vec<(isize, f64)> = Vec::new();
    for j in 0..out_len {
        let x = source_coord(p, j, scale, out_len, in_len, roi);
        if p.coord == "tf_crop_and_resize" && (x < 0.0 || x > last as f64) {
            t.spans.push(None);
            continue;
        }
        coeffs.clear();
        if p.mode == Mode::Nearest {
            let i = match p.nearest {
                "floor" => x.floor(),
                "ceil" => x.ceil(),
                "round_prefer_ceil" => (x + 0.5).floor(),
                _ => (x - 0.5).ceil(),
            };
            coeffs.push((i as isize, 1.0));
        } else {
            // As the reference does: an integral coordinate is the right end of the
            // interval below it (ratio 1), which fixes the taps exclude_outside sees.
            let mut base = x.floor();
            let mut r = x - base;
            if r == 0.0 {
                r = 1.0;
                base -= 1.0;
            }
            let base = base as isize;
            let s = if p.antialias { scale.min(1.0) } else { 1.0 };
            let reach = if p.mode == Mode::Linear { 1.0 } else { 2.0 };
            let start = (-reach / s).floor() as isize + 1;
            for i in start..(2 - start) {
                let arg = (i as f64 - r) * s;
                let w = match p.mode {
                    Mode::Linear => (1.0 - arg.abs()).max(0.0),
                    _ => cubic(arg, p.cubic_a),
                };
                coeffs.push((base + i, w));
            }
        }
        if p.exclude_outside {
            for c in coeffs.iter_mut() {
                if c.0 < 0 || c.0 > last {
                    c.1 = 0.0;
                }
            }
        }
        let sum: f64 = coeffs.iter().map(|c| c.1).sum();
        let norm = if p.mode != Mode::Nearest && sum != 0.0 {
            sum
        } else {
            1.0
        };
        let begin = t.idx.len();
        for &(i, w) in &coeffs {
            if w != 0.0 {
                t.idx.push(i.clamp(0, last.max(0)) as usize);
                t.w.push(w / norm);
            }
        }
        t.spans.push(Some((begin, t.idx.len())));
    }
    t
}

/// Resamples axis `d` of `src` (dims `shape`) to `out_len` positions.
fn resample_axis(
    src: &[f64],
    shape: &[usize],
    d: usize,
    out_len: usize,
    taps: &AxisTaps,
    fill: f64,
) -> Vec<f64> {
    let inner: usize = shape[d + 1..].iter().product();
    let in_len = shape[d];
    let outer: usize = shape[..d].iter().product();
    let mut out = vec![0.0f64; outer * out_len * inner];
    let block = |o: usize, dst_block: &mut [f64]| {
        let src_block = &src[o * in_len * inner..][..in_len * inner];
        for (j, dst) in dst_block.chunks_mut(inner).enumerate() {
            match taps.spans[j] {
                None => dst.fill(fill),
                Some((s, e)) => {
                    // Whole rows at a time: the inner loop is a contiguous axpy.
                    for t in s..e {
                        let (row, w) = (&src_block[taps.idx[t] * inner..][..inner], taps.w[t]);
                        for (o, &v) in dst.iter_mut().zip(row) {
                            *o += w * v;
                        }
                    }
                }
            }
        }
    };
    let stride = out_len * inner;
    if stride == 0 || in_len * inner == 0 {
        out.fill(fill);
        return out;
    }
    if out.len() >= PARALLEL_ELEMS {
        out.par_chunks_mut(stride)
            .enumerate()
            .for_each(|(o, b)| block(o, b));
    } else {
        for (o, b) in out.chunks_mut(stride).enumerate() {
            block(o, b);
        }
    }
    out
}

/// Resize (opset 10: X, scales; 11 on: X, roi, scales, sizes) and Upsample (X, scales).
pub fn resize(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, half::f16, half::bf16, i8, u8, i32, i64]
        => resize_typed::<T>(ctx, inputs, outputs),
        other => Err(ctx.compute_error(format!("does not compute {other}"))))
}

fn resize_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = &inputs[0];
    let rank = x.rank();
    let out_shape = outputs[0].shape.to_vec();
    if out_shape.len() != rank {
        return Err(ctx.compute_error("output rank differs from the input's"));
    }
    // Before opset 11 (and in Upsample) coordinates are asymmetric and nearest floors.
    let legacy = ctx.op == "Upsample" || ctx.attr_int("onnx_opset", 11)? < 11;
    let mode = match ctx.attr_str("mode", "nearest")? {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" | "trilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        other => return Err(ctx.attr_error("mode", format!("{other:?} is not a mode"))),
    };
    let p = Params {
        mode,
        coord: if legacy {
            "asymmetric"
        } else {
            ctx.attr_str("coordinate_transformation_mode", "half_pixel")?
        },
        nearest: if legacy {
            "floor"
        } else {
            ctx.attr_str("nearest_mode", "round_prefer_floor")?
        },
        cubic_a: ctx.attr_float("cubic_coeff_a", -0.75)? as f64,
        exclude_outside: ctx.attr_int("exclude_outside", 0)? != 0,
        extrapolation: ctx.attr_float("extrapolation_value", 0.0)? as f64,
        antialias: ctx.attr_int("antialias", 0)? != 0,
    };
    let axes: Vec<usize> = match ctx.attr_ints("axes")? {
        Some(a) => a
            .iter()
            .map(|&v| ctx.axis(v, rank, "axes"))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    let present = |i: usize| inputs.get(i).filter(|t| !t.is_empty());
    let (roi_at, scales_at, sizes_at) = if inputs.len() <= 2 {
        (None, 1, None)
    } else {
        (Some(1), 2, Some(3))
    };
    let mut scale = vec![1.0f64; rank];
    let mut roi = vec![(0.0f64, 1.0f64); rank];
    if let Some(t) = roi_at.and_then(present) {
        let v = read_f64s(t).map_err(|_| ctx.input_error(1, "roi is a float tensor"))?;
        let k = axes.len();
        if v.len() != 2 * k {
            return Err(ctx.input_error(1, format!("roi has {} values for {k} axes", v.len())));
        }
        for (i, &a) in axes.iter().enumerate() {
            roi[a] = (v[i], v[i + k]);
        }
    }
    if sizes_at.and_then(present).is_some() {
        let policy = ctx.attr_str("keep_aspect_ratio_policy", "stretch")?;
        let ratios = axes
            .iter()
            .map(|&a| out_shape[a] as f64 / x.shape[a] as f64);
        if policy == "stretch" {
            for (&a, r) in axes.iter().zip(ratios) {
                scale[a] = r;
            }
        } else {
            // One scale for every axis: recompute it as inference did, from the sizes.
            let sizes = inputs[3]
                .slice::<i64>()
                .map_err(|_| ctx.input_error(3, "sizes are int64"))?;
            let r = axes
                .iter()
                .zip(sizes.iter())
                .map(|(&a, &s)| s as f64 / x.shape[a] as f64);
            let s = if policy == "not_larger" {
                r.fold(f64::INFINITY, f64::min)
            } else {
                r.fold(0.0, f64::max)
            };
            for &a in &axes {
                scale[a] = s;
            }
        }
    } else if let Some(t) = present(scales_at) {
        let v = read_f64s(t).map_err(|_| ctx.input_error(scales_at, "scales are float"))?;
        let k = if ctx.op == "Upsample" {
            rank
        } else {
            axes.len()
        };
        if v.len() != k {
            return Err(ctx.input_error(scales_at, format!("{} scales for {k} axes", v.len())));
        }
        for (i, &a) in axes.iter().enumerate().take(k) {
            scale[a] = v[i];
        }
    } else if let Some(v) = ctx.attrs.get("scales").and_then(|a| match a {
        crate::ops::Attr::Floats(f) => Some(f.clone()),
        _ => None,
    }) {
        for (a, s) in v.into_iter().enumerate().take(rank) {
            scale[a] = s;
        }
    } else {
        for a in 0..rank {
            scale[a] = out_shape[a] as f64 / x.shape[a].max(1) as f64;
        }
    }
    let mut shape = x.shape.to_vec();
    let mut cur: Vec<f64> = x.slice::<T>()?.iter().map(|v| v.to_f64()).collect();
    for d in 0..rank {
        let crops = p.coord == "tf_crop_and_resize" && axes.contains(&d);
        if out_shape[d] == shape[d] && scale[d] == 1.0 && !crops {
            continue;
        }
        if scale[d] <= 0.0 || !scale[d].is_finite() {
            return Err(ctx.input_error(
                scales_at,
                format!("scale {} for axis {d} is not positive", scale[d]),
            ));
        }
        let taps = axis_taps(&p, scale[d], out_shape[d], shape[d], roi[d]);
        cur = resample_axis(&cur, &shape, d, out_shape[d], &taps, p.extrapolation);
        shape[d] = out_shape[d];
    }
    for (o, &v) in outputs[0].slice_mut::<T>()?.iter_mut().zip(&cur) {
        *o = T::from_f64(v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run_f32;

    /// Resize of `x` by `scales`, with an empty roi.
    fn resize(attrs: &[(&str, Attr)], x: Tensor, scales: &[f32]) -> Vec<f32> {
        let roi = Tensor::zeroed(crate::ops::DType::F32, &[0]);
        let s = Tensor::from_vec(&[scales.len()], scales);
        run_f32("Resize", attrs, &[x, roi, s])
    }

    #[test]
    fn nearest_and_linear_upsampling() {
        let x = Tensor::from_vec(&[1, 2], &[1.0f32, 3.0]);
        let nearest = [("mode", Attr::Str("nearest".into()))];
        assert_eq!(
            resize(&nearest, x.clone(), &[1.0, 2.0]),
            [1.0, 1.0, 3.0, 3.0]
        );
        // half_pixel linear: sources -0.25, 0.25, 0.75, 1.25 -> clamped edges.
        let linear = [("mode", Attr::Str("linear".into()))];
        assert_eq!(
            resize(&linear, x.clone(), &[1.0, 2.0]),
            [1.0, 1.5, 2.5, 3.0]
        );
        let corners = [
            ("mode", Attr::Str("linear".into())),
            (
                "coordinate_transformation_mode",
                Attr::Str("align_corners".into()),
            ),
        ];
        // Scale 1.5 gives 3 outputs; align_corners maps the ends onto the ends.
        assert_eq!(resize(&corners, x, &[1.0, 1.5]), [1.0, 2.0, 3.0]);
    }

    #[test]
    fn cubic_weights_sum_to_one_and_reproduce_lines() {
        let x = Tensor::from_vec(&[1, 4], &[0.0f32, 1.0, 2.0, 3.0]);
        let cubic = [
            ("mode", Attr::Str("cubic".into())),
            (
                "coordinate_transformation_mode",
                Attr::Str("asymmetric".into()),
            ),
        ];
        // Keys' kernel reproduces a linear ramp away from the edges.
        let y = resize(&cubic, x, &[1.0, 2.0]);
        assert!(
            (y[3] - 1.5).abs() < 1e-6 && (y[2] - 1.0).abs() < 1e-6,
            "{y:?}"
        );
    }
}
