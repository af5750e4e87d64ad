//! GE's deformable convolution (`prototypes/nn_calculation_ops.txt`; graphengine
//! `nn_calculation_ops.h`, ops-nn `conv/deformable_offsets` and `conv/deformable_conv2d`):
//!
//! - DeformableOffsets(x, offsets; strides, pads, ksize required, dilations `[1,1,1,1]`,
//!   data_format "NCHW", deformable_groups 1, modulated true): the patches a deformable
//!   convolution reads, each bilinearly sampled at its kernel tap moved by a learned
//!   offset. Output position `(oh, ow)` and tap `(i, j)` sample x at
//!   `py = oh*stride_h - pad_top + i*dilation_h + dy`,
//!   `px = ow*stride_w - pad_left + j*dilation_w + dx`, and write
//!   `mask * bilinear(x, py, px)` to y's row `oh*kh + i`, column `ow*kw + j`: y is
//!   `[N, C, Ho*kh, Wo*kw]` (NHWC: `[N, Ho*kh, Wo*kw, C]`), with
//!   `Ho = (H + pad_top + pad_bottom - ((kh-1)*dilation_h + 1)) / stride_h + 1` and `Wo`
//!   alike. The bilinear sample takes the four pixels around `(py, px)` (`floor` and
//!   `floor + 1` each way) weighted by the distances, a pixel outside the image counting
//!   as 0, so a point a full pixel or more outside samples 0.
//! - DeformableConv2D(x, filter, offsets, bias?; strides, pads required, dilations
//!   `[1,1,1,1]`, groups 1, data_format "NHWC", deformable_groups 1, modulated true):
//!   DeformableOffsets with the filter's kh, kw as `ksize`, then a convolution of its
//!   output with stride (kh, kw), no padding and `groups` (GE's own fusion pass splits it
//!   so), plus the bias. The filter is NCHW `[Cout, Cin/groups, kh, kw]` for NCHW data and
//!   HWCN `[kh, kw, Cin/groups, Cout]` for NHWC, as Conv2D pairs them ([`super::conv`]).
//!
//! `strides` and `dilations` are 4 values indexed by `data_format` (N and C must be 1),
//! `pads` is [top, bottom, left, right]. The offsets are `[N, 3*G*kh*kw, Ho, Wo]` (NHWC:
//! `[N, Ho, Wo, 3*G*kh*kw]`) for G = `deformable_groups`, their channel
//! `(b*G + g)*kh*kw + i*kw + j` holding, for block b, the x offsets (b = 0), the y
//! offsets (b = 1) and the mask (b = 2) of group g's tap (i, j): the order MindSpore's
//! DeformableOffsets kernel reads (x, y, mask, each `[G, kh, kw]`), which the GE op's
//! NHWC form carries in its last dim. Input channel `c` belongs to group `c / (C/G)`.
//! Note x before y, unlike torchvision's interleaved (dy, dx) pairs.
//!
//! rt2's choices, where GE's documents leave it open: with `modulated` false (GE's kernel
//! "only support true now") the offsets hold the two offset blocks only (`2*G*kh*kw`
//! channels) and every mask is 1, deformable convolution v1. The offsets take x's
//! layout (`data_format`), as the prototype says ("has the same format as x"). The four
//! pixels are `floor` and `floor + 1` of the point, as MindSpore's kernel takes them
//! (ops-nn's formula writes `int()`, which truncates a negative coordinate). The
//! sample is computed in float32 for every type (float16 and bfloat16 rounded once);
//! DeformableConv2D keeps the sampled patches in float32 for its convolution, where GE
//! rounds them to x's type between its two ops.

use half::{bf16, f16};

use super::attrs::{data_format, given, ints_or, onnx_attrs, required_ints};
use super::layout::{HWCN_TO_NCHW, TO_NHWC, permuted};
use crate::ops::nn::scalar::{Scalar, widened};
use crate::ops::nn::{Window, agree, conv, spatial};
use crate::ops::shape::args::{input, moved, output};
use crate::ops::shape::movement::{View, copy_view};
use crate::ops::{
    Attr, DType, InferCtx, OpError, OpRegistry, Tensor, TensorMeta, TensorMut, TensorRef, UNKNOWN,
    meta,
};

/// The op types this file registers (neither reads input values at inference).
const OPS: &[(&str, &[usize])] = &[("DeformableOffsets", &[]), ("DeformableConv2D", &[])];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "DeformableOffsets" => (infer_offsets, deformable_offsets),
        _ => (infer_conv, deformable_conv2d),
    });
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::names(OPS)
}

/// The attributes both ops share, checked.
struct Deform {
    nchw: bool,
    /// (h, w).
    stride: [i64; 2],
    dilation: [i64; 2],
    /// top, bottom, left, right.
    pads: [i64; 4],
    groups: i64,
    modulated: bool,
}

impl Deform {
    fn read(ctx: &InferCtx, default_format: &str) -> Result<Deform, OpError> {
        let nchw = data_format(ctx, default_format)?;
        let strides = required_ints(ctx, "strides", 4)?;
        let pads = required_ints(ctx, "pads", 4)?;
        let dilations = ints_or(ctx, "dilations", &[1, 1, 1, 1])?;
        if pads.iter().any(|&p| p < 0) {
            return Err(ctx.attr_error("pads", format!("{pads:?} has a negative value")));
        }
        let groups = ctx.attr_int("deformable_groups", 1)?;
        if groups < 1 {
            return Err(ctx.attr_error("deformable_groups", format!("{groups} is not positive")));
        }
        Ok(Deform {
            nchw,
            stride: hw(ctx, "strides", &strides, nchw)?,
            dilation: hw(ctx, "dilations", &dilations, nchw)?,
            pads: [pads[0], pads[1], pads[2], pads[3]],
            groups,
            modulated: ctx.attr_bool("modulated", true)?,
        })
    }

    /// Offset blocks per tap: x, y and (modulated) the mask.
    fn blocks(&self) -> i64 {
        if self.modulated { 3 } else { 2 }
    }

    /// (N, C, H, W) of a 4-D shape in this layout.
    fn split<T: Copy>(&self, s: &[T]) -> [T; 4] {
        if self.nchw {
            [s[0], s[1], s[2], s[3]]
        } else {
            [s[0], s[3], s[1], s[2]]
        }
    }

    /// A 4-D shape in this layout from (N, C, H, W).
    fn join<T: Copy>(&self, [n, c, h, w]: [T; 4]) -> Vec<T> {
        if self.nchw {
            vec![n, c, h, w]
        } else {
            vec![n, h, w, c]
        }
    }

    /// Element strides of (N, C, H, W) for a tensor of (N, C, H, W) sizes in this layout.
    fn strides(&self, [_, c, h, w]: [usize; 4]) -> [usize; 4] {
        if self.nchw {
            [c * h * w, h * w, w, 1]
        } else {
            [h * w * c, 1, w * c, c]
        }
    }
}

/// The (h, w) entries of a 4-value list attribute whose N and C entries are 1.
fn hw(ctx: &InferCtx, name: &str, v: &[i64], nchw: bool) -> Result<[i64; 2], OpError> {
    let [n, c, h, w] = if nchw {
        [v[0], v[1], v[2], v[3]]
    } else {
        [v[0], v[3], v[1], v[2]]
    };
    if n != 1 || c != 1 {
        return Err(ctx.attr_error(name, format!("{v:?}: the N and C entries must be 1")));
    }
    if h < 1 || w < 1 {
        return Err(ctx.attr_error(name, format!("{v:?}: the H and W entries must be positive")));
    }
    Ok([h, w])
}

/// The element type both ops take: float16, float32 or bfloat16, the same for every
/// float input.
fn float_type(ctx: &InferCtx, float_inputs: &[usize]) -> Result<DType, OpError> {
    let dtype = ctx.inputs[0].dtype;
    if !matches!(dtype, DType::F32 | DType::F16 | DType::Bf16) {
        return Err(ctx.input_error(0, format!("is {dtype}; float16, float32 or bfloat16 only")));
    }
    for &i in float_inputs {
        if given(ctx, i) && ctx.inputs[i].dtype != dtype {
            return Err(ctx.input_error(i, format!("is {}, x is {dtype}", ctx.inputs[i].dtype)));
        }
    }
    Ok(dtype)
}

/// A 4-D shape of input `i`, `None` when its rank is unknown.
fn shape4<'a>(ctx: &'a InferCtx, i: usize, name: &str) -> Result<Option<&'a [i64]>, OpError> {
    match ctx.inputs[i].shape.as_deref() {
        None => Ok(None),
        Some(s) if s.len() == 4 => Ok(Some(s)),
        Some(s) => Err(ctx.input_error(i, format!("{name} is {s:?}, not 4-D"))),
    }
}

/// The sampling grid's (Ho, Wo) for an (h, w) input and a (kh, kw) kernel, and a check of
/// the offsets (input `i`) against it: `[N, blocks*G*kh*kw, Ho, Wo]` in the op's layout.
fn grid(
    ctx: &InferCtx,
    p: &Deform,
    [n, c, h, w]: [i64; 4],
    [kh, kw]: [i64; 2],
    i: usize,
) -> Result<[i64; 2], OpError> {
    if c >= 0 && c % p.groups != 0 {
        return Err(ctx.attr_error(
            "deformable_groups",
            format!("{} does not divide {c} channels", p.groups),
        ));
    }
    let dim = |d: usize, input: i64, kernel: i64| {
        spatial(
            ctx,
            d,
            Window {
                input,
                kernel,
                stride: p.stride[d],
                dilation: p.dilation[d],
                pad_begin: p.pads[2 * d],
                pad_end: p.pads[2 * d + 1],
                ceil: false,
            },
        )
    };
    let ho = if kh < 0 { UNKNOWN } else { dim(0, h, kh)? };
    let wo = if kw < 0 { UNKNOWN } else { dim(1, w, kw)? };
    let Some(off) = shape4(ctx, i, "offsets")? else {
        return Ok([ho, wo]);
    };
    let [on, oc, oh, ow] = p.split(off);
    let taps = if kh < 0 || kw < 0 {
        UNKNOWN
    } else {
        p.blocks() * p.groups * kh * kw
    };
    let fits = agree(on, n).is_some()
        && agree(oc, taps).is_some()
        && agree(oh, ho).is_some()
        && agree(ow, wo).is_some();
    if !fits {
        let want = p.join([n, taps, ho, wo]);
        return Err(ctx.input_error(
            i,
            format!(
                "offsets {off:?} are not {want:?} ({} blocks of {} groups x {kh}x{kw} taps \
                 over the {ho}x{wo} grid; -1 is any)",
                p.blocks(),
                p.groups
            ),
        ));
    }
    Ok([agree(oh, ho).unwrap_or(ho), agree(ow, wo).unwrap_or(wo)])
}

/// The kernel size `ksize` [kh, kw], each positive.
fn ksize(ctx: &InferCtx) -> Result<[i64; 2], OpError> {
    let k = required_ints(ctx, "ksize", 2)?;
    if k.iter().any(|&v| v < 1) {
        return Err(ctx.attr_error("ksize", format!("{k:?}: each entry must be positive")));
    }
    Ok([k[0], k[1]])
}

/// y: `[N, C, Ho*kh, Wo*kw]` in x's layout.
fn infer_offsets(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let p = Deform::read(ctx, "NCHW")?;
    let k = ksize(ctx)?;
    let dtype = float_type(ctx, &[1])?;
    let Some(x) = shape4(ctx, 0, "x")? else {
        shape4(ctx, 1, "offsets")?;
        return Ok(meta(dtype, None));
    };
    let nchw = p.split(x);
    let [ho, wo] = grid(ctx, &p, nchw, k, 1)?;
    let times = |a: i64, b: i64| if a < 0 { UNKNOWN } else { a * b };
    let [n, c, _, _] = nchw;
    Ok(meta(
        dtype,
        Some(p.join([n, c, times(ho, k[0]), times(wo, k[1])])),
    ))
}

/// The filter's (Cout, Cin/groups, kh, kw): NCHW for NCHW data, HWCN for NHWC.
fn filter_dims<T: Copy>(p: &Deform, f: &[T]) -> [T; 4] {
    if p.nchw {
        [f[0], f[1], f[2], f[3]]
    } else {
        [f[3], f[2], f[0], f[1]]
    }
}

/// The convolution's `groups`, positive.
fn conv_groups(ctx: &InferCtx) -> Result<i64, OpError> {
    let g = ctx.attr_int("groups", 1)?;
    if g < 1 {
        return Err(ctx.attr_error("groups", format!("{g} is not positive")));
    }
    Ok(g)
}

/// y: `[N, Cout, Ho, Wo]` in x's layout.
fn infer_conv(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 4)?;
    let p = Deform::read(ctx, "NHWC")?;
    let groups = conv_groups(ctx)?;
    let dtype = float_type(ctx, &[1, 2, 3])?;
    let x = shape4(ctx, 0, "x")?;
    let f = shape4(ctx, 1, "filter")?;
    let (Some(x), Some(f)) = (x, f) else {
        shape4(ctx, 2, "offsets")?;
        return Ok(meta(dtype, None));
    };
    let [n, c, h, w] = p.split(x);
    let [cout, cg, kh, kw] = filter_dims(&p, f);
    if kh == 0 || kw == 0 {
        return Err(ctx.input_error(1, format!("filter {f:?} has an empty kernel")));
    }
    if c >= 0 && cg >= 0 && c != cg.saturating_mul(groups) {
        return Err(ctx.input_error(
            1,
            format!("{c} input channels, the filter {f:?} expects {cg} x groups {groups}"),
        ));
    }
    if cout >= 0 && cout % groups != 0 {
        return Err(ctx.attr_error(
            "groups",
            format!("{groups} does not divide {cout} output channels"),
        ));
    }
    let [ho, wo] = grid(ctx, &p, [n, c, h, w], [kh, kw], 2)?;
    if given(ctx, 3)
        && let Some(b) = ctx.inputs[3].shape.as_deref()
        && (b.len() != 1 || agree(b[0], cout).is_none())
    {
        return Err(ctx.input_error(3, format!("bias {b:?} for {cout} output channels")));
    }
    Ok(meta(dtype, Some(p.join([n, cout, ho, wo]))))
}

/// One launch's sizes and strides: x `[N, C, H, W]` sampled on an `[Ho, Wo]` grid of
/// `[kh, kw]` taps into y `[N, C, Ho*kh, Wo*kw]`, each in its own layout.
struct Plan {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    grid: [usize; 2],
    k: [usize; 2],
    groups: usize,
    modulated: bool,
    stride: [i64; 2],
    dilation: [i64; 2],
    /// top, left.
    pad: [i64; 2],
    /// Element strides of (N, C, H, W) in x, (N, channel, Ho, Wo) in the offsets and
    /// (N, C, row, column) in y.
    x_at: [usize; 4],
    off_at: [usize; 4],
    y_at: [usize; 4],
}

impl Plan {
    /// The plan of a launch on x of `shape` (in `p`'s layout) with a `k` kernel, y
    /// written in `p`'s layout (or NCHW with `y_nchw`).
    fn new(
        ctx: &InferCtx,
        p: &Deform,
        shape: &[usize],
        k: [usize; 2],
        y_nchw: bool,
    ) -> Result<Plan, OpError> {
        let [n, c, h, w] = p.split(shape);
        if c % p.groups as usize != 0 {
            return Err(ctx.attr_error(
                "deformable_groups",
                format!("{} does not divide {c} channels", p.groups),
            ));
        }
        let dims = |d: usize, input: usize| -> Result<usize, OpError> {
            let o = spatial(
                ctx,
                d,
                Window {
                    input: input as i64,
                    kernel: k[d] as i64,
                    stride: p.stride[d],
                    dilation: p.dilation[d],
                    pad_begin: p.pads[2 * d],
                    pad_end: p.pads[2 * d + 1],
                    ceil: false,
                },
            )?;
            Ok(o.max(0) as usize)
        };
        let grid = [dims(0, h)?, dims(1, w)?];
        let taps = p.blocks() as usize * p.groups as usize * k[0] * k[1];
        let y_dims = [n, c, grid[0] * k[0], grid[1] * k[1]];
        let y_at = if y_nchw {
            let [_, c, h, w] = y_dims;
            [c * h * w, h * w, w, 1]
        } else {
            p.strides(y_dims)
        };
        Ok(Plan {
            n,
            c,
            h,
            w,
            grid,
            k,
            groups: p.groups as usize,
            modulated: p.modulated,
            stride: p.stride,
            dilation: p.dilation,
            pad: [p.pads[0], p.pads[2]],
            x_at: p.strides([n, c, h, w]),
            off_at: p.strides([n, taps, grid[0], grid[1]]),
            y_at,
        })
    }

    /// Elements of x, of the offsets and of y.
    fn lens(&self) -> [usize; 3] {
        let taps = if self.modulated { 3 } else { 2 } * self.groups * self.k[0] * self.k[1];
        [
            self.n * self.c * self.h * self.w,
            self.n * taps * self.grid[0] * self.grid[1],
            self.n * self.c * self.grid[0] * self.k[0] * self.grid[1] * self.k[1],
        ]
    }
}

/// One bilinear sample's four pixels: the element offsets of (top, left), (top, right),
/// (bottom, left), (bottom, right) within a channel, each with its weight (0 and
/// offset 0 for a pixel outside the image).
fn corners(p: &Plan, py: f32, px: f32) -> [(usize, f32); 4] {
    let (y0, x0) = (py.floor(), px.floor());
    let (ty, tx) = (py - y0, px - x0);
    let (y0, x0) = (y0 as i64, x0 as i64);
    let row = |y: i64| (0..p.h as i64).contains(&y).then(|| y as usize * p.x_at[2]);
    let col = |x: i64| (0..p.w as i64).contains(&x).then(|| x as usize * p.x_at[3]);
    let at = |r: Option<usize>, c: Option<usize>, weight: f32| match (r, c) {
        (Some(r), Some(c)) => (r + c, weight),
        _ => (0, 0.0),
    };
    let (top, bottom) = (row(y0), row(y0.saturating_add(1)));
    let (left, right) = (col(x0), col(x0.saturating_add(1)));
    [
        at(top, left, (1.0 - ty) * (1.0 - tx)),
        at(top, right, (1.0 - ty) * tx),
        at(bottom, left, ty * (1.0 - tx)),
        at(bottom, right, ty * tx),
    ]
}

/// Samples every tap of every grid point into y (see the module doc), in f32.
fn sample<T: Scalar, D: Scalar>(p: &Plan, x: &[T], off: &[T], y: &mut [D]) {
    let [kh, kw] = p.k;
    let taps = p.groups * kh * kw;
    let per_group = p.c / p.groups.max(1);
    let get = |i: usize| x[i].to_f64() as f32;
    for b in 0..p.n {
        for oh in 0..p.grid[0] {
            for ow in 0..p.grid[1] {
                let o_base = b * p.off_at[0] + oh * p.off_at[2] + ow * p.off_at[3];
                let offset = |ch: usize| off[o_base + ch * p.off_at[1]].to_f64() as f32;
                for t in 0..taps {
                    let (g, i, j) = (t / (kh * kw), t / kw % kh, t % kw);
                    let base_y = oh as i64 * p.stride[0] - p.pad[0] + i as i64 * p.dilation[0];
                    let base_x = ow as i64 * p.stride[1] - p.pad[1] + j as i64 * p.dilation[1];
                    let px = base_x as f32 + offset(t);
                    let py = base_y as f32 + offset(taps + t);
                    let mask = if p.modulated {
                        offset(2 * taps + t)
                    } else {
                        1.0
                    };
                    let four = corners(p, py, px);
                    let y_base =
                        b * p.y_at[0] + (oh * kh + i) * p.y_at[2] + (ow * kw + j) * p.y_at[3];
                    for ch in g * per_group..(g + 1) * per_group {
                        let x_base = b * p.x_at[0] + ch * p.x_at[1];
                        let v: f32 = four.iter().map(|&(at, wt)| wt * get(x_base + at)).sum();
                        y[y_base + ch * p.y_at[1]] = D::from_f64(f64::from(mask * v));
                    }
                }
            }
        }
    }
}

/// Checks the operand lengths against the plan (a launch's tensors are as inference said,
/// but a wrong one must be an error, not an index out of range).
fn check_lens(ctx: &InferCtx, p: &Plan, x: usize, off: usize, y: usize) -> Result<(), OpError> {
    let [lx, loff, ly] = p.lens();
    if x != lx || off != loff || y != ly {
        return Err(ctx.compute_error(format!(
            "x, offsets and y hold {x}, {off} and {y} values; the geometry needs {lx}, {loff} \
             and {ly}"
        )));
    }
    Ok(())
}

fn deformable_offsets(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let p = Deform::read(ctx, "NCHW")?;
    let k = ksize(ctx)?;
    let (x, off) = (input(ctx, inputs, 0)?, input(ctx, inputs, 1)?);
    if x.rank() != 4 || off.rank() != 4 || x.dtype != off.dtype {
        return Err(ctx.input_error(1, "x and offsets must be 4-D tensors of one type"));
    }
    let plan = Plan::new(ctx, &p, x.shape, [k[0] as usize, k[1] as usize], false)?;
    let y = output(ctx, outputs, 0)?;
    check_lens(ctx, &plan, x.len(), off.len(), y.len())?;
    crate::dispatch!(x.dtype, T in [f32, f16, bf16] => {
        sample(&plan, x.slice::<T>()?, off.slice::<T>()?, y.slice_mut::<T>()?);
        Ok(())
    }, other => Err(ctx.input_error(0, format!("is {other}; float16, float32 or bfloat16 only"))))
}

fn deformable_conv2d(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    if inputs.len() < 3 {
        return Err(ctx.compute_error("DeformableConv2D takes x, filter and offsets"));
    }
    let operands = &inputs[..if given_ref(inputs, 3) { 4 } else { 3 }];
    match input(ctx, inputs, 0)?.dtype {
        DType::F16 => widened::<f16>(operands, outputs, |i, o| conv_f32(ctx, i, o)),
        DType::Bf16 => widened::<bf16>(operands, outputs, |i, o| conv_f32(ctx, i, o)),
        _ => conv_f32(ctx, operands, outputs),
    }
}

/// Whether launch input `i` is present and not the empty "left out" tensor.
fn given_ref(inputs: &[TensorRef], i: usize) -> bool {
    inputs.get(i).is_some_and(|t| t.shape != [0])
}

/// DeformableConv2D on float32 operands: the patches sampled into an NCHW scratch, then
/// the library's Conv with stride (kh, kw) and the NCHW filter.
fn conv_f32(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let p = Deform::read(ctx, "NHWC")?;
    let groups = conv_groups(ctx)?;
    let (x, f, off) = (inputs[0], inputs[1], inputs[2]);
    if x.rank() != 4 || f.rank() != 4 || off.rank() != 4 {
        return Err(ctx.input_error(0, "x, filter and offsets must be 4-D"));
    }
    let filter = if p.nchw {
        None
    } else {
        Some(permuted(ctx, &f, &HWCN_TO_NCHW)?)
    };
    let f = filter.as_ref().map_or(f, Tensor::as_ref);
    let k = [f.shape[2], f.shape[3]];
    let plan = Plan::new(ctx, &p, x.shape, k, true)?;
    let mut patches = Tensor::zeroed(
        DType::F32,
        &[plan.n, plan.c, plan.grid[0] * k[0], plan.grid[1] * k[1]],
    );
    check_lens(ctx, &plan, x.len(), off.len(), patches.as_ref().len())?;
    sample(
        &plan,
        x.slice::<f32>()?,
        off.slice::<f32>()?,
        patches.as_mut().slice_mut::<f32>()?,
    );
    let attrs = onnx_attrs(vec![
        ("group", Attr::Int(groups)),
        ("strides", Attr::Ints(vec![k[0] as i64, k[1] as i64])),
        ("kernel_shape", Attr::Ints(vec![k[0] as i64, k[1] as i64])),
    ]);
    let onnx = super::attrs::with_attrs(ctx, &attrs);
    let mut operands = vec![patches.as_ref(), f];
    operands.extend(inputs.get(3).copied());
    let y = output(ctx, outputs, 0)?;
    if p.nchw {
        return conv::conv(&onnx, &operands, std::slice::from_mut(y));
    }
    // NHWC: the convolution's NCHW result permuted into y.
    let &[n, ho, wo, cout] = y.shape else {
        return Err(ctx.compute_error(format!("output {:?} is not 4-D", y.shape)));
    };
    let mut scratch = Tensor::zeroed(DType::F32, &[n, cout, ho, wo]);
    conv::conv(&onnx, &operands, &mut [scratch.as_mut()])?;
    let view = View::contiguous(&scratch.shape).permute(&TO_NHWC);
    moved(ctx, copy_view(4, scratch.data.as_bytes(), &view, y.data))
}

#[cfg(test)]
mod tests;
