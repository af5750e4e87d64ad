//! GE's sliding-window rearrangements (graphengine `transformation_ops.h`): image patches
//! laid out as channels, and their sum back into an image.
//!
//! - ExtractImagePatches(x; ksizes, strides, rates, padding required): TensorFlow's, on an
//!   NHWC x with `[1, kh, kw, 1]`-style lists: `y[n, oh, ow, (i * kw + j) * c + k] =
//!   x[n, oh * sh + i * rh - top, ow * sw + j * rw - left, k]`, 0 outside x; padding SAME
//!   (`ceil(in / s)` windows, the padding split with the smaller half first) or VALID.
//! - Im2col(x; ksizes required, strides `[1]`, dilations `[1]`, padding_mode "CALCULATED",
//!   pads `[0]`): the same windows; an NCHW x gives PyTorch's unfold kept 4-D,
//!   `y[n, (k * kh + i) * kw + j, oh, ow]`, an NHWC x (as lowering recorded its origin
//!   format) TensorFlow's layout above. Lists hold 1 value (both dims), 2 (h, w) or 4 (in
//!   x's layout); `pads` 1, 2 (`[h, w]`, both sides) or 4 (`[top, bottom, left, right]`),
//!   read in CALCULATED mode; SAME and VALID as above.
//! - Col2im(x, output_size; kernel_size, dilation, padding, stride required): PyTorch's
//!   fold: x `[n, c, kh * kw, ho * wo]` summed into `y[n, c, output_size]`, each column
//!   element added at `(oh * sh - ph + i * dh, ow * sw - pw + j * dw)` where inside y.
//!   float32, float16 and bfloat16, summed in float64 and rounded once (rt2's choice).
//!
//! rt2's choice: Im2col of an x whose origin format is not recorded is NCHW (PyTorch's,
//! which the prototype names as its counterpart).

use super::super::attrs::{input_format, required_list};
use crate::formats::Format;
use crate::ops::shape::args::{bytes, bytes_mut, input, output};
use crate::ops::{
    DType, InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut, TensorRef, UNKNOWN, meta,
};

/// The op types this file registers.
const OPS: &[&str] = &["ExtractImagePatches", "Im2col", "Col2im"];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new("ExtractImagePatches", infer_patches).computes(patches));
    reg.add(OpSpec::new("Im2col", infer_patches).computes(patches));
    reg.add(
        OpSpec::new("Col2im", infer_col2im)
            .computes(col2im)
            .reading(&[1]),
    );
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    OPS.iter().copied()
}

/// One window geometry over (h, w): kernel, stride, dilation, leading pad, output size.
#[derive(Debug, Clone, Copy)]
struct Window {
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    lo: [usize; 2],
    out: [usize; 2],
}

/// `(h, w)` of a window attribute: 1 value for both, 2, or 4 laid out as x (`at` are the
/// h and w places in that layout).
fn pair(ctx: &InferCtx, name: &str, v: &[i64], at: [usize; 2]) -> Result<[i64; 2], OpError> {
    let p = match v.len() {
        1 => [v[0], v[0]],
        2 => [v[0], v[1]],
        4 => [v[at[0]], v[at[1]]],
        n => return Err(ctx.attr_error(name, format!("has {n} values, not 1, 2 or 4"))),
    };
    if p.iter().any(|&e| e < 1) {
        return Err(ctx.attr_error(name, format!("{v:?} is not positive")));
    }
    Ok(p)
}

/// Whether x is NHWC: ExtractImagePatches always, Im2col when its origin format says so.
fn nhwc(ctx: &InferCtx) -> bool {
    ctx.op == "ExtractImagePatches" || input_format(ctx, 0) == Some(Format::Nhwc)
}

/// The window over `hw` (UNKNOWN dims give an UNKNOWN output size, reported as 0 there).
fn window(ctx: &InferCtx, hw: [i64; 2]) -> Result<(Window, [i64; 2]), OpError> {
    let at = if nhwc(ctx) { [1, 2] } else { [2, 3] };
    let list = |name: &str| -> Result<[i64; 2], OpError> {
        if ctx.op == "Im2col" && name != "ksizes" {
            pair(ctx, name, ctx.attr_ints(name)?.unwrap_or(&[1]), at)
        } else {
            pair(ctx, name, &required_list(ctx, name)?, at)
        }
    };
    let (k, s) = (list("ksizes")?, list("strides")?);
    let d = list(if ctx.op == "Im2col" {
        "dilations"
    } else {
        "rates"
    })?;
    let mode = if ctx.op == "Im2col" {
        ctx.attr_str("padding_mode", "CALCULATED")?
    } else if ctx.attrs.get("padding").is_none() {
        return Err(ctx.attr_error("padding", "is required and missing"));
    } else {
        ctx.attr_str("padding", "")?
    };
    let mode_name = if ctx.op == "Im2col" {
        "padding_mode"
    } else {
        "padding"
    };
    let pads = match mode {
        "CALCULATED" if ctx.op == "Im2col" => {
            let p = ctx.attr_ints("pads")?.unwrap_or(&[0]);
            let four = match p.len() {
                1 => [p[0]; 4],
                2 => [p[0], p[0], p[1], p[1]],
                4 => [p[0], p[1], p[2], p[3]],
                n => return Err(ctx.attr_error("pads", format!("has {n} values, not 1, 2 or 4"))),
            };
            if four.iter().any(|&v| v < 0) {
                return Err(ctx.attr_error("pads", format!("{p:?} has a negative pad")));
            }
            Some(four)
        }
        "SAME" | "VALID" => None,
        m => return Err(ctx.attr_error(mode_name, format!("{m:?} is not a padding mode"))),
    };
    let mut win = Window {
        k: k.map(|v| v as usize),
        s: s.map(|v| v as usize),
        d: d.map(|v| v as usize),
        lo: [0; 2],
        out: [0; 2],
    };
    let mut out = [UNKNOWN; 2];
    for a in 0..2 {
        let eff = (k[a] - 1) * d[a] + 1;
        let size = hw[a];
        if size == UNKNOWN {
            continue;
        }
        let (o, lo) = match (mode, pads) {
            ("SAME", _) => {
                let o = (size + s[a] - 1) / s[a];
                ((o), ((o - 1) * s[a] + eff - size).max(0) / 2)
            }
            ("VALID", _) => (
                if size >= eff {
                    (size - eff) / s[a] + 1
                } else {
                    0
                },
                0,
            ),
            (_, Some(p)) => {
                let total = size + p[2 * a] + p[2 * a + 1];
                if total < eff {
                    return Err(ctx.input_error(
                        0,
                        format!("dim of {size} padded to {total} is smaller than the window {eff}"),
                    ));
                }
                ((total - eff) / s[a] + 1, p[2 * a])
            }
            _ => (0, 0),
        };
        out[a] = o;
        win.out[a] = o as usize;
        win.lo[a] = lo as usize;
    }
    Ok((win, out))
}

fn infer_patches(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        window(ctx, [UNKNOWN; 2])?;
        return Ok(meta(x.dtype, None));
    };
    let &[n, a, b, c] = s.as_slice() else {
        return Err(ctx.input_error(0, format!("is {s:?}, not 4-D")));
    };
    let times = |p: i64, q: i64| {
        if p == UNKNOWN || q == UNKNOWN {
            UNKNOWN
        } else {
            p * q
        }
    };
    if nhwc(ctx) {
        let (win, [oh, ow]) = window(ctx, [a, b])?;
        let depth = times(c, (win.k[0] * win.k[1]) as i64);
        Ok(meta(x.dtype, Some(vec![n, oh, ow, depth])))
    } else {
        let (win, [oh, ow]) = window(ctx, [b, c])?;
        let depth = times(a, (win.k[0] * win.k[1]) as i64);
        Ok(meta(x.dtype, Some(vec![n, depth, oh, ow])))
    }
}

/// Both patch ops: each output element a window element of x, or 0 in the padding.
fn patches(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let &[n, a, b, c] = x.shape else {
        return Err(ctx.input_error(0, format!("is {:?}, not 4-D", x.shape)));
    };
    let channels_last = nhwc(ctx);
    let (ch, h, w) = if channels_last { (c, a, b) } else { (a, b, c) };
    let (win, _) = window(ctx, [h as i64, w as i64])?;
    let [kh, kw] = win.k;
    let [oh_n, ow_n] = win.out;
    let width = x.dtype.size();
    let src = bytes(ctx, x, 0)?;
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    if dst.len() != n * ch * kh * kw * oh_n * ow_n * width {
        return Err(ctx.compute_error("the output is not the patches' size"));
    }
    let at = |o: usize, k: usize, a: usize, size: usize| -> Option<usize> {
        (o * win.s[a] + k * win.d[a])
            .checked_sub(win.lo[a])
            .filter(|&v| v < size)
    };
    for bn in 0..n {
        for k in 0..ch {
            for i in 0..kh {
                for j in 0..kw {
                    for oh in 0..oh_n {
                        for ow in 0..ow_n {
                            let from = match (at(oh, i, 0, h), at(ow, j, 1, w)) {
                                (Some(y), Some(x)) if channels_last => {
                                    Some(((bn * h + y) * w + x) * ch + k)
                                }
                                (Some(y), Some(x)) => Some(((bn * ch + k) * h + y) * w + x),
                                _ => None,
                            };
                            let to = if channels_last {
                                ((bn * oh_n + oh) * ow_n + ow) * (kh * kw * ch)
                                    + (i * kw + j) * ch
                                    + k
                            } else {
                                ((bn * ch * kh * kw + (k * kh + i) * kw + j) * oh_n + oh) * ow_n
                                    + ow
                            };
                            let out = &mut dst[to * width..][..width];
                            match from {
                                Some(f) => out.copy_from_slice(&src[f * width..][..width]),
                                None => out.fill(0),
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Col2im

/// Col2im's `(kernel, dilation, padding, stride)` as `(h, w)` pairs.
fn fold_spec(ctx: &InferCtx) -> Result<[[usize; 2]; 4], OpError> {
    let mut out = [[0usize; 2]; 4];
    for (slot, name) in out
        .iter_mut()
        .zip(["kernel_size", "dilation", "padding", "stride"])
    {
        let v = required_list(ctx, name)?;
        let p = match v.as_slice() {
            [a] => [*a, *a],
            [a, b] => [*a, *b],
            _ => return Err(ctx.attr_error(name, format!("{v:?} is not 1 or 2 values"))),
        };
        let least = if name == "padding" { 0 } else { 1 };
        if p.iter().any(|&e| e < least) {
            return Err(ctx.attr_error(name, format!("{v:?} is below {least}")));
        }
        *slot = p.map(|e| e as usize);
    }
    Ok(out)
}

/// The column grid `(ho, wo)` folding into an image of `size`.
fn blocks(spec: &[[usize; 2]; 4], size: [i64; 2]) -> Option<[usize; 2]> {
    let [k, d, p, s] = *spec;
    let mut out = [0; 2];
    for a in 0..2 {
        let span = size[a] + 2 * p[a] as i64 - (d[a] * (k[a] - 1)) as i64 - 1;
        out[a] = usize::try_from(span.div_euclid(s[a] as i64) + 1).ok()?;
    }
    Some(out)
}

fn infer_col2im(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let x = &ctx.inputs[0];
    if !matches!(x.dtype, DType::F32 | DType::F16 | DType::Bf16) {
        return Err(ctx.input_error(
            0,
            format!("is {}, not float32, float16 or bfloat16", x.dtype),
        ));
    }
    let spec = fold_spec(ctx)?;
    let size = match ctx.value_ints(1)? {
        Some(v) if v.len() == 2 && v.iter().all(|&d| d >= 0) => Some([v[0], v[1]]),
        Some(v) => return Err(ctx.input_error(1, format!("is {v:?}, not (h, w)"))),
        None => None,
    };
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let &[n, c, kk, l] = s.as_slice() else {
        return Err(ctx.input_error(0, format!("is {s:?}, not [n, c, kh * kw, ho * wo]")));
    };
    let [kh, kw] = spec[0];
    if kk != UNKNOWN && kk != (kh * kw) as i64 {
        return Err(ctx.input_error(0, format!("dim 2 is {kk}, the kernel has {}", kh * kw)));
    }
    let Some(size) = size else {
        return Ok(meta(x.dtype, Some(vec![n, c, UNKNOWN, UNKNOWN])));
    };
    let grid = blocks(&spec, size).ok_or_else(|| ctx.input_error(1, "no window fits the image"))?;
    if l != UNKNOWN && l != (grid[0] * grid[1]) as i64 {
        return Err(ctx.input_error(0, format!("dim 3 is {l}, the image folds {grid:?} blocks")));
    }
    Ok(meta(x.dtype, Some(vec![n, c, size[0], size[1]])))
}

fn col2im(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let [[kh, kw], [dh, dw], [ph, pw], [sh, sw]] = fold_spec(ctx)?;
    let y = output(ctx, outputs, 0)?;
    let &[n, c, h, w] = y.shape else {
        return Err(ctx.compute_error("the output is not 4-D"));
    };
    let [ho, wo] = blocks(&fold_spec(ctx)?, [h as i64, w as i64])
        .ok_or_else(|| ctx.input_error(1, "no window fits the image"))?;
    let v = crate::ops::shape::indices::floats(x)
        .ok_or_else(|| ctx.input_error(0, "is not floating-point"))?;
    if v.len() != n * c * kh * kw * ho * wo {
        return Err(ctx.input_error(0, "is not the columns of the image"));
    }
    let mut sum = vec![0f64; n * c * h * w];
    for (plane, cols) in sum
        .chunks_exact_mut((h * w).max(1))
        .zip(v.chunks_exact((kh * kw * ho * wo).max(1)))
    {
        for i in 0..kh {
            for j in 0..kw {
                for oh in 0..ho {
                    let Some(yh) = (oh * sh + i * dh).checked_sub(ph).filter(|&r| r < h) else {
                        continue;
                    };
                    for ow in 0..wo {
                        let Some(yw) = (ow * sw + j * dw).checked_sub(pw).filter(|&r| r < w) else {
                            continue;
                        };
                        plane[yh * w + yw] += cols[((i * kw + j) * ho + oh) * wo + ow];
                    }
                }
            }
        }
    }
    let dst = bytes_mut(ctx, y)?;
    match x.dtype {
        DType::F32 => store(dst, &sum, |v| (v as f32).to_le_bytes()),
        DType::F16 => store(dst, &sum, |v| half::f16::from_f64(v).to_le_bytes()),
        DType::Bf16 => store(dst, &sum, |v| half::bf16::from_f64(v).to_le_bytes()),
        d => return Err(ctx.input_error(0, format!("is {d}, not a float type Col2im takes"))),
    }
    Ok(())
}

/// Writes each value of `v` as the `N` bytes `f` gives.
fn store<const N: usize>(dst: &mut [u8], v: &[f64], f: impl Fn(f64) -> [u8; N]) {
    for (chunk, &e) in dst.chunks_exact_mut(N).zip(v) {
        chunk.copy_from_slice(&f(e));
    }
}
