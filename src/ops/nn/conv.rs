//! Convolution and transposed convolution (1-D to 3-D, groups, strides, dilations,
//! padding, bias).
//!
//! float32 Conv over one or two spatial dims runs directly where the CPU has AVX-512 or
//! AVX2 and FMA (conv_direct.rs: no im2col matrix; strided windows through polyphase
//! planes); an output of at most 16 positions (other than depthwise) is instead one dot
//! product per channel and position, each position's window gathered into a row
//! (`gemm::narrow_f32`), since those kernels compute whole vectors or tiles of positions.
//! Otherwise Conv
//! lowers each (image, group) to `W_g [M/g, C/g * K] x col [C/g * K, out]`, where `col`
//! is the im2col matrix of the input patch under every kernel tap (per-thread scratch; a
//! 1x1 kernel with unit strides and no padding multiplies the input itself). ConvTranspose is the adjoint: `col = W_g^T x X_g`, then col2im adds each
//! column into the output positions its taps reach.

use rayon::prelude::*;

use super::conv_blocked::Blocked;
use super::conv_direct::{Direct, Isa};
use super::conv_dw::Depthwise;
use super::conv_dw_rows::DwRows;
use super::conv_rows::StemRows;
use super::conv_winograd::{Weights, Winograd};
use super::epilogue::Epilogue;
use super::gemm::{Mat, finished_f32, gemm, narrow_f32};
use super::scalar::{Scalar, widened};
use super::scratch::with_scratch;
use super::window::Window;
use crate::dispatch;
use crate::ops::DType;
use crate::ops::linalg::sgemv::NARROW;
use crate::ops::{HostTensor, InferCtx, OpError, Prepack, TensorMut, TensorRef};

/// Elements below which im2col/col2im run on the calling thread.
pub(super) const PARALLEL_ELEMS: usize = 1 << 14;

/// Conv: X `[N, C, D...]`, W `[M, C/group, K...]`, optional B `[M]` -> Y `[N, M, D'...]`.
pub fn conv(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    match inputs[0].dtype {
        DType::F16 => widened::<half::f16>(inputs, outputs, |i, o| conv_typed::<f32>(ctx, i, o)),
        DType::Bf16 => widened::<half::bf16>(inputs, outputs, |i, o| conv_typed::<f32>(ctx, i, o)),
        _ => dispatch!(inputs[0].dtype, T in [f32, f64]
            => conv_typed::<T>(ctx, inputs, outputs),
            other => Err(ctx.compute_error(format!("computes float types, not {other}")))),
    }
}

/// Conv's and ConvTranspose's prepack hook: a constant float16/bfloat16 weight is
/// widened to float32 once, at lowering, so a launch widens only its input (the weights
/// of a ResNet-50 are 25M values, which each execution would otherwise convert again).
pub fn prepack_half_weight(ctx: &InferCtx) -> Option<Prepack> {
    let op = match ctx.op {
        "Conv" => "Conv",
        "ConvTranspose" => "ConvTranspose",
        _ => return None,
    };
    half_weight_prepack(ctx, op)
}

/// The prepack of a product `op` whose input 1 is a constant weight of input 0's half
/// type: the weight widened to f32 once, `op` itself launched on it (its compute widens
/// only the rest, [`super::scalar::widened`]).
pub fn half_weight_prepack(ctx: &InferCtx, op: &'static str) -> Option<Prepack> {
    let [x, w, ..] = ctx.inputs else {
        return None;
    };
    ctx.values.get(1).copied().flatten()?;
    if x.dtype != w.dtype || !matches!(w.dtype, DType::F16 | DType::Bf16) {
        return None;
    }
    Some(Prepack {
        op,
        input: 1,
        attrs: Vec::new(),
        pack: |w| {
            Some(HostTensor {
                dtype: DType::F32,
                shape: w.shape.clone(),
                data: bytemuck::cast_slice(&super::gemm::widen_floats(w)?)
                    .to_vec()
                    .into(),
            })
        },
    })
}

/// Shapes common to both directions: (batch, input channels, output channels, group).
pub(super) fn channels(
    ctx: &InferCtx,
    x: &TensorRef,
    y: &[usize],
    w: &TensorRef,
) -> Result<(usize, usize, usize, usize), OpError> {
    let group = ctx.attr_int("group", 1)?;
    if group < 1 {
        return Err(ctx.attr_error("group", "must be positive"));
    }
    let group = group as usize;
    if x.rank() < 3 || w.rank() != x.rank() || y.len() != x.rank() {
        return Err(ctx.input_error(
            1,
            format!("weights {:?} do not fit input {:?}", w.shape, x.shape),
        ));
    }
    let (c, m) = (x.shape[1], y[1]);
    if c % group != 0 || m % group != 0 {
        return Err(ctx.attr_error(
            "group",
            format!("{group} does not divide {c} and {m} channels"),
        ));
    }
    Ok((x.shape[0], c, m, group))
}

/// The bias values, checked to number `m`, if there is a non-empty bias input.
pub(super) fn bias_values<'a, T: Scalar>(
    ctx: &InferCtx,
    bias: Option<&TensorRef<'a>>,
    m: usize,
) -> Result<Option<&'a [T]>, OpError> {
    let Some(b) = bias.filter(|b| !b.is_empty()) else {
        return Ok(None);
    };
    let b = b.slice::<T>()?;
    if b.len() != m {
        return Err(ctx.input_error(2, format!("bias has {} values for {m} channels", b.len())));
    }
    Ok(Some(b))
}

/// Writes each channel's bias into its output plane (planes cycle through the channels).
pub(super) fn fill_bias<T: Scalar>(b: &[T], y: &mut [T], plane: usize) {
    if plane > 0 {
        for (i, p) in y.chunks_mut(plane).enumerate() {
            p.fill(b[i % b.len()]);
        }
    }
}

/// Writes the bias (or zeros) into each output channel's plane.
pub(super) fn init_bias<T: Scalar>(
    ctx: &InferCtx,
    bias: Option<&TensorRef>,
    y: &mut [T],
    m: usize,
    plane: usize,
) -> Result<bool, OpError> {
    let b = bias_values::<T>(ctx, bias, m)?;
    match b {
        Some(b) => fill_bias(b, y, plane),
        // The transposed convolution sums into its output: a reused block's bytes must
        // not be part of the sum.
        None => y.fill(T::from_f64(0.0)),
    }
    Ok(b.is_some())
}

/// Checks the weights' two leading dims against `want` (Conv: [M, C/group];
/// ConvTranspose: [C, M/group]).
pub(super) fn check_weights(
    ctx: &InferCtx,
    w: &TensorRef,
    want: [usize; 2],
    c: usize,
    m: usize,
    group: usize,
) -> Result<(), OpError> {
    if w.shape[..2] != want {
        return Err(ctx.input_error(
            1,
            format!(
                "weights {:?} for {c} input and {m} output channels in {group} groups",
                w.shape
            ),
        ));
    }
    Ok(())
}

fn conv_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let y_shape = outputs[0].shape.to_vec();
    let (batch, c, m, group) = channels(ctx, x, &y_shape, w)?;
    let (cg, mg) = (c / group, m / group);
    check_weights(ctx, w, [m, cg], c, m, group)?;
    let win = Window::new(ctx, &x.shape[2..], &w.shape[2..], &y_shape[2..])?.lying_flat();
    let (xv, wv) = (x.slice::<T>()?, w.slice::<T>()?);
    let y = outputs[0].slice_mut::<T>()?;
    let (ilen, olen, klen) = (win.input_len(), win.output_len(), win.kernel_len());
    let bias = bias_values::<T>(ctx, inputs.get(2), m)?;
    let epilogue = Epilogue::read(ctx)?;
    if y.is_empty() {
        return Ok(());
    }
    let rows = cg * klen;
    let blocks = batch * group;
    let parallel = y.len() * rows >= PARALLEL_ELEMS;
    let direct =
        klen == 1 && win.stride == [1; 3] && win.pad_begin == [0; 3] && win.output == win.input;
    let depthwise = cg == 1 && mg == 1 && group > 1;
    // Few output positions (a downsampled 1-D signal, a pooled 1x1 image), other than
    // depthwise ones: every kernel below computes at least a vector or a 48-column tile
    // of positions, so each position is one dot product per channel instead
    // (`gemm::narrow_f32`), its window gathered into a row of its own.
    let narrow = olen <= NARROW && !depthwise;
    // float32 kernels that take a whole image at a time (see `ImageKernel`).
    if T::DTYPE == DType::F32
        && !narrow
        && let Some(kernel) =
            Isa::detect().and_then(|isa| ImageKernel::plan(&win, isa, (c, group), depthwise))
    {
        let (xv, wv, y) = (as_f32(xv), as_f32(wv), as_f32_mut(y));
        let bias = bias.map(as_f32);
        for (n, out) in y.chunks_mut(m * olen).enumerate() {
            let x = &xv[n * c * ilen..][..c * ilen];
            match &kernel {
                ImageKernel::Blocked(k) => k.conv(x, wv, bias, epilogue, out, parallel),
                ImageKernel::DepthwiseRows(k) => k.conv(x, wv, bias, epilogue, out, parallel),
                ImageKernel::Stem(k) => k.conv(x, wv, bias, epilogue, out, parallel),
            }
        }
        return Ok(());
    }
    // float32: windows convolve directly (conv_direct.rs) where the CPU has its vector
    // kernels; a 1x1 kernel that reads the input as is, and every window without the
    // kernels, is one product per block, finished with the bias and the activation as
    // it is stored (`gemm::finished_f32`).
    if T::DTYPE == DType::F32 {
        let plan = if direct || narrow {
            None
        } else {
            Isa::detect().and_then(|isa| Direct::plan(&win, cg, isa))
        };
        // 3x3 windows of stride 1 with enough channels and tiles: Winograd's F(2x2, 3x3)
        // or F(4x4, 3x3), 2.25 or 4 times fewer multiplies (conv_winograd.rs).
        let winograd = match direct || narrow {
            true => None,
            false => Isa::detect()
                .zip(Winograd::tile_for(&win, cg, mg))
                .and_then(|(isa, t)| Winograd::plan(&win, cg, mg, t, isa, parallel && blocks == 1)),
        };
        let (xv, wv, y) = (as_f32(xv), as_f32(wv), as_f32_mut(y));
        let bias = bias.map(as_f32);
        over_blocks(y, mg * olen, blocks > 1 && parallel, |i, out| {
            let (n, g) = (i / group, i % group);
            let xg = &xv[(n * c + g * cg) * ilen..][..cg * ilen];
            let wg = &wv[g * mg * rows..][..mg * rows];
            let bg = bias.map(|b| &b[g * mg..][..mg]);
            // A block split across threads splits nothing more inside.
            let inner = parallel && blocks == 1;
            if let Some(wino) = &winograd {
                return with_scratch(wino.scratch_len(true), |scratch: &mut [f32]| {
                    wino.run(xg, Weights::Raw(wg), bg, epilogue, scratch, out);
                });
            }
            match &plan {
                // Many output channels whose input outgrows L1, or a block of them split
                // across threads, run with the channels in the lanes (conv_blocked.rs);
                // the same bits either way.
                Some(plan) => match Blocked::plan(plan, mg, inner) {
                    Some(b) => with_scratch(b.scratch_len(), |scratch: &mut [f32]| {
                        b.run(xg, wg, bg, epilogue, scratch, out, inner);
                    }),
                    None => with_scratch(plan.scratch_len(), |padded: &mut [f32]| {
                        plan.conv(xg, wg, bg, epilogue, padded, out, inner);
                    }),
                },
                None if narrow => with_scratch(rows * olen, |xt: &mut [f32]| {
                    windows(xg, cg, &win, xt);
                    narrow_f32(wg, xt, (mg, rows, olen), bg, epilogue, out, inner);
                }),
                None if direct => finished_f32(wg, xg, (mg, rows, olen), bg, epilogue, out, inner),
                None => with_scratch(rows * olen, |col: &mut [f32]| {
                    im2col(xg, cg, &win, col);
                    finished_f32(wg, col, (mg, rows, olen), bg, epilogue, out, inner);
                }),
            }
        });
        return Ok(());
    }
    if let Some(b) = bias {
        fill_bias(b, y, olen);
    }
    let beta = if bias.is_some() { 1.0 } else { 0.0 };
    // One (image, group) block: its weights, its input channels, its output planes.
    over_blocks(y, mg * olen, blocks > 1 && parallel, |i, out| {
        let (n, g) = (i / group, i % group);
        let xg = &xv[(n * c + g * cg) * ilen..][..cg * ilen];
        let wg = Mat::row_major(&wv[g * mg * rows..][..mg * rows], mg, rows);
        if direct {
            gemm(1.0, wg, Mat::row_major(xg, cg, ilen), beta, out, olen);
        } else {
            with_scratch(rows * olen, |col: &mut [T]| {
                im2col(xg, cg, &win, col);
                gemm(1.0, wg, Mat::row_major(col, rows, olen), beta, out, olen);
            });
        }
        // The block's output was just written; it is applied while still in cache.
        if let Some(e) = epilogue {
            apply_epilogue(e, out);
        }
    });
    Ok(())
}

/// The float32 kernels that take one whole image (every group) per call: depthwise
/// windows over small images with the channels in the vector lanes (conv_dw.rs), over
/// wider ones of column stride 2 along output rows reading the input in place
/// (conv_dw_rows.rs), and stems of few input channels and column stride 2 the same way
/// (conv_rows.rs). Each gives the bits of conv_direct.rs, which takes the windows none
/// of them does.
// The plan lives on the stack for one call; boxing the large one (Depthwise's tables)
// would allocate per launch.
#[allow(clippy::large_enum_variant)]
enum ImageKernel {
    Blocked(Depthwise),
    DepthwiseRows(DwRows),
    Stem(StemRows),
}

impl ImageKernel {
    /// The kernel for `win` over `c` input channels in `group` groups on `isa`, if one
    /// takes it; `depthwise`: one input and one output channel per group.
    fn plan(win: &Window, isa: Isa, (c, group): (usize, usize), depthwise: bool) -> Option<Self> {
        if depthwise {
            match Depthwise::plan(win, isa).filter(Depthwise::pays) {
                Some(k) => Some(ImageKernel::Blocked(k)),
                None => DwRows::plan(win, isa).map(ImageKernel::DepthwiseRows),
            }
        } else if group == 1 {
            StemRows::plan(win, c, isa).map(ImageKernel::Stem)
        } else {
            None
        }
    }
}

/// Runs `block(i, out)` over the blocks of `y`, `len` elements each (a convolution's
/// `(image, group)` blocks, a transposed one's output channels): across threads when
/// `parallel`, else in turn.
pub(super) fn over_blocks<T: Send>(
    y: &mut [T],
    len: usize,
    parallel: bool,
    block: impl Fn(usize, &mut [T]) + Sync,
) {
    if parallel {
        y.par_chunks_mut(len)
            .enumerate()
            .for_each(|(i, out)| block(i, out));
    } else {
        for (i, out) in y.chunks_mut(len).enumerate() {
            block(i, out);
        }
    }
}

/// Applies a fused activation to a block of `T` outputs: in float32 or float64 as the
/// output is (the standalone activation's arithmetic), other types through float64.
fn apply_epilogue<T: Scalar>(e: Epilogue, v: &mut [T]) {
    match T::DTYPE {
        DType::F32 => e.apply_f32(as_f32_mut(v)),
        DType::F64 => e.apply::<f64>(bytemuck::cast_slice_mut(v)),
        _ => v
            .iter_mut()
            .for_each(|x| *x = T::from_f64(e.one(x.to_f64()))),
    }
}

/// `T`'s elements as the float32 they are (the caller has matched `T::DTYPE`).
fn as_f32<T: Scalar>(v: &[T]) -> &[f32] {
    bytemuck::cast_slice(v)
}

fn as_f32_mut<T: Scalar>(v: &mut [T]) -> &mut [f32] {
    bytemuck::cast_slice_mut(v)
}

/// Fills `xt` ([output positions, channels * taps]) with each output position's window:
/// row j holds what every (channel, tap) of position j reads, 0 in the padding. The
/// transpose of [`im2col`]'s matrix, for the few positions of a narrow product
/// (`gemm::narrow_f32`). Per position and kernel row, the input row's offset is
/// computed once and the row's taps read at a constant stride (no division per tap);
/// each tap is copied over the channels.
fn windows<T: Scalar>(x: &[T], channels: usize, win: &Window, xt: &mut [T]) {
    let [kd, kh, kw] = win.kernel;
    let [_, oh, ow] = win.output;
    let [_, ih, iw] = win.input;
    let (ilen, klen) = (win.input_len(), win.kernel_len());
    let rows = channels * klen;
    let zero = T::from_f64(0.0);
    let at = |d, o, t| win.input_at(d, o, t);
    for (j, row) in xt.chunks_exact_mut(rows).take(win.output_len()).enumerate() {
        let (z, y, xx) = (j / (oh * ow), (j / ow) % oh, j % ow);
        for a in 0..kd {
            for b in 0..kh {
                let line = at(0, z, a)
                    .zip(at(1, y, b))
                    .map(|(zi, yi)| (zi * ih + yi) * iw);
                let first = (a * kh + b) * kw;
                for e in 0..kw {
                    let src = line.zip(at(2, xx, e)).map(|(l, xi)| l + xi);
                    for c in 0..channels {
                        row[c * klen + first + e] = src.map_or(zero, |i| x[c * ilen + i]);
                    }
                }
            }
        }
    }
}

/// Fills `col` ([channels * taps, output positions]) with the input value each tap of
/// each output position reads, 0 in the padding. Each row is one (channel, tap): its
/// output rows are contiguous runs of the input row shifted by the tap, so the inner loop
/// is a copy (unit stride) or a strided gather, with the padded ends zero-filled outside
/// the loop.
fn im2col<T: Scalar>(x: &[T], channels: usize, win: &Window, col: &mut [T]) {
    let [_, kh, kw] = win.kernel;
    let [_, ih, iw] = win.input;
    let [od, oh, ow] = win.output;
    let olen = od * oh * ow;
    let klen = win.kernel_len();
    let zero = T::from_f64(0.0);
    let fill_row = |r: usize, row: &mut [T]| {
        let (ch, tap) = (r / klen, r % klen);
        let (a, b, e) = (tap / (kh * kw), (tap / kw) % kh, tap % kw);
        let plane = &x[ch * win.input_len()..][..win.input_len()];
        let (d_lo, d_hi, d_off) = win.valid_range(0, a);
        let (h_lo, h_hi, h_off) = win.valid_range(1, b);
        let (w_lo, w_hi, w_off) = win.valid_range(2, e);
        let (sd, sh, sw) = (win.stride[0], win.stride[1], win.stride[2]);
        for z in 0..od {
            let zrow = &mut row[z * oh * ow..][..oh * ow];
            if z < d_lo || z >= d_hi {
                zrow.fill(zero);
                continue;
            }
            let zi = (z * sd) as isize + d_off;
            for yy in 0..oh {
                let dst = &mut zrow[yy * ow..][..ow];
                if yy < h_lo || yy >= h_hi {
                    dst.fill(zero);
                    continue;
                }
                let yi = (yy * sh) as isize + h_off;
                let src = &plane[(zi as usize * ih + yi as usize) * iw..][..iw];
                dst[..w_lo].fill(zero);
                dst[w_hi..].fill(zero);
                let start = (w_lo * sw) as isize + w_off;
                if w_hi > w_lo {
                    let start = start as usize;
                    if sw == 1 {
                        dst[w_lo..w_hi].copy_from_slice(&src[start..start + (w_hi - w_lo)]);
                    } else {
                        for (j, v) in dst[w_lo..w_hi].iter_mut().enumerate() {
                            *v = src[start + j * sw];
                        }
                    }
                }
            }
        }
    };
    let col = &mut col[..channels * klen * olen];
    if col.len() >= PARALLEL_ELEMS && olen > 0 {
        col.par_chunks_mut(olen)
            .enumerate()
            .for_each(|(r, row)| fill_row(r, row));
    } else if olen > 0 {
        for (r, row) in col.chunks_mut(olen).enumerate() {
            fill_row(r, row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::epilogue::ACTIVATION_ATTR;
    use super::super::scalar::Half;
    use super::NARROW;
    use crate::ops::Attr;
    use crate::ops::testing::run_f32_with_shape;
    use crate::ops::{Elem, Tensor};

    #[test]
    fn conv_pads_strides_and_bias() {
        // 1x1x3x3 input 1..9, 2x2 kernel of ones, pad 1, stride 2: corner sums.
        let x = Tensor::from_vec(
            &[1, 1, 3, 3],
            &(1..=9).map(|v| v as f32).collect::<Vec<_>>(),
        );
        let w = Tensor::from_vec(&[1, 1, 2, 2], &[1.0f32; 4]);
        let b = Tensor::from_vec(&[1], &[0.5f32]);
        let attrs = [
            ("pads", Attr::Ints(vec![1, 1, 1, 1])),
            ("strides", Attr::Ints(vec![2, 2])),
        ];
        let (shape, y) = run_f32_with_shape("Conv", &attrs, &[x, w, b]);
        assert_eq!(shape, [1, 1, 2, 2]);
        // Windows: {1}, {2,3}, {4,7}, {5,6,8,9}.
        assert_eq!(y, [1.5, 5.5, 11.5, 28.5]);
    }

    #[test]
    fn grouped_1d_conv_with_dilation() {
        // Two channels, two groups; kernel [1, -1] dilated by 2: x[i] - x[i+2].
        let x = Tensor::from_vec(&[1, 2, 4], &[1.0f32, 2.0, 4.0, 8.0, 0.0, 1.0, 0.0, 3.0]);
        let w = Tensor::from_vec(&[2, 1, 2], &[1.0f32, -1.0, 2.0, 0.0]);
        let attrs = [("group", Attr::Int(2)), ("dilations", Attr::Ints(vec![2]))];
        let (shape, y) = run_f32_with_shape("Conv", &attrs, &[x, w]);
        assert_eq!(shape, [1, 2, 2]);
        assert_eq!(y, [-3.0, -6.0, 0.0, 2.0]);
    }

    /// A convolution's parameters for the reference below (2-D; 1-D is height 1).
    #[derive(Debug)]
    struct Case {
        x: [usize; 4],
        m: usize,
        k: [usize; 2],
        stride: [usize; 2],
        dil: [usize; 2],
        /// top, left, bottom, right
        pads: [usize; 4],
        group: usize,
        bias: bool,
        /// A fused Relu (`_rt2_fused_activation`).
        relu: bool,
    }

    impl Case {
        fn new(x: [usize; 4], m: usize, k: [usize; 2]) -> Case {
            Case {
                x,
                m,
                k,
                stride: [1, 1],
                dil: [1, 1],
                pads: [0; 4],
                group: 1,
                bias: false,
                relu: false,
            }
        }
        /// The 2-D window of the case, as the direct kernels take it.
        fn window(&self) -> super::super::window::Window {
            let [_, _, h, wd] = self.x;
            let [oh, ow] = self.out();
            super::super::window::Window {
                input: [1, h, wd],
                output: [1, oh, ow],
                kernel: [1, self.k[0], self.k[1]],
                stride: [1, self.stride[0], self.stride[1]],
                dilation: [1, self.dil[0], self.dil[1]],
                pad_begin: [0, self.pads[0] as isize, self.pads[1] as isize],
                pad_end: [0, self.pads[2] as isize, self.pads[3] as isize],
            }
        }
        fn out(&self) -> [usize; 2] {
            let o = |d: usize| {
                let span = (self.k[d] - 1) * self.dil[d] + 1;
                (self.x[2 + d] + self.pads[d] + self.pads[d + 2] - span) / self.stride[d] + 1
            };
            [o(0), o(1)]
        }
        /// Seeded inputs, weights and bias in [-1, 1).
        fn tensors(&self) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
            let vals = crate::ops::testing::seeded;
            let cg = self.x[1] / self.group;
            (
                vals(self.x.iter().product(), 1),
                vals(self.m * cg * self.k[0] * self.k[1], 2),
                vals(self.m, 3),
            )
        }
        /// The convolution by its definition, summed in f64.
        fn reference(&self, x: &[f32], w: &[f32], b: &[f32]) -> Vec<f32> {
            let [n, c, h, wd] = self.x;
            let [oh, ow] = self.out();
            let (cg, mg) = (c / self.group, self.m / self.group);
            let mut y = vec![0.0f32; n * self.m * oh * ow];
            for (idx, v) in y.iter_mut().enumerate() {
                let (ox, oy) = (idx % ow, (idx / ow) % oh);
                let (mo, img) = ((idx / (ow * oh)) % self.m, idx / (ow * oh * self.m));
                let g = mo / mg;
                let mut sum = if self.bias { b[mo] as f64 } else { 0.0 };
                for ci in 0..cg {
                    for a in 0..self.k[0] {
                        for e in 0..self.k[1] {
                            let iy = (oy * self.stride[0] + a * self.dil[0]) as isize
                                - self.pads[0] as isize;
                            let ix = (ox * self.stride[1] + e * self.dil[1]) as isize
                                - self.pads[1] as isize;
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                continue;
                            }
                            let xi = ((img * c + g * cg + ci) * h + iy as usize) * wd + ix as usize;
                            let wi = ((mo * cg + ci) * self.k[0] + a) * self.k[1] + e;
                            sum += x[xi] as f64 * w[wi] as f64;
                        }
                    }
                }
                *v = if self.relu { sum.max(0.0) } else { sum } as f32;
            }
            y
        }
        /// Runs Conv through the op registry (a 1-D case when the height is 1 and the
        /// kernel's too) and checks it against the reference.
        fn check(&self) {
            let (x, w, b) = self.tensors();
            let one_d = self.x[2] == 1 && self.k[0] == 1 && self.pads[0] == 0 && self.pads[2] == 0;
            let [n, c, h, wd] = self.x;
            let cg = c / self.group;
            let (xs, ws, attrs) = if one_d {
                (
                    vec![n, c, wd],
                    vec![self.m, cg, self.k[1]],
                    vec![
                        ("strides", Attr::Ints(vec![self.stride[1] as i64])),
                        ("dilations", Attr::Ints(vec![self.dil[1] as i64])),
                        (
                            "pads",
                            Attr::Ints(vec![self.pads[1] as i64, self.pads[3] as i64]),
                        ),
                        ("group", Attr::Int(self.group as i64)),
                    ],
                )
            } else {
                let ints = |v: &[usize]| Attr::Ints(v.iter().map(|&x| x as i64).collect());
                (
                    vec![n, c, h, wd],
                    vec![self.m, cg, self.k[0], self.k[1]],
                    vec![
                        ("strides", ints(&self.stride)),
                        ("dilations", ints(&self.dil)),
                        ("pads", ints(&self.pads)),
                        ("group", Attr::Int(self.group as i64)),
                    ],
                )
            };
            let mut attrs = attrs;
            if self.relu {
                attrs.push((ACTIVATION_ATTR, Attr::Str("Relu".into())));
            }
            let mut inputs = vec![Tensor::from_vec(&xs, &x), Tensor::from_vec(&ws, &w)];
            if self.bias {
                inputs.push(Tensor::from_vec(&[self.m], &b));
            }
            let (_, got) = run_f32_with_shape("Conv", &attrs, &inputs);
            let want = self.reference(&x, &w, &b);
            let mg = self.m / self.group;
            match super::super::conv_winograd::Winograd::tile_for(&self.window(), cg, mg) {
                Some(super::super::conv_winograd::Tile::F4) => {
                    crate::ops::testing::assert_close_to_scale(&got, &want, F4_BOUND)
                }
                _ => assert_close(&got, &want),
            }
            // float64 takes im2col + GEMM, the path of every window on a CPU without the
            // direct kernels.
            let wide = |t: &Tensor| {
                let v: Vec<f64> = t
                    .slice::<f32>()
                    .unwrap()
                    .iter()
                    .map(|&v| v as f64)
                    .collect();
                Tensor::from_vec(&t.shape, &v)
            };
            let inputs: Vec<Tensor> = inputs.iter().map(wide).collect();
            let got = crate::ops::testing::run1("Conv", &attrs, &inputs);
            let got: Vec<f32> = got
                .slice::<f64>()
                .unwrap()
                .iter()
                .map(|&v| v as f32)
                .collect();
            assert_close(&got, &want);
        }
    }

    /// How far from the definition F(4x4, 3x3)'s results may be, as a share of the
    /// output's largest magnitude: measured, some 4e-6 at 16 to 96 input channels (and
    /// about a tenth of that for F(2x2, 3x3)).
    const F4_BOUND: f32 = 2e-5;

    fn assert_close(got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "element {i}: got {g}, want {w}"
            );
        }
    }

    #[test]
    fn conv_matches_the_reference_over_window_shapes() {
        let mut cases = vec![];
        // The benchmark's shape, small: 3x3, pad 1, bias; 6 output channels (a partial tile).
        cases.push(Case {
            pads: [1; 4],
            bias: true,
            ..Case::new([1, 5, 9, 11], 6, [3, 3])
        });
        // Asymmetric pads, non-square kernel, batch 2.
        cases.push(Case {
            pads: [0, 2, 1, 0],
            ..Case::new([2, 3, 7, 13], 5, [2, 5])
        });
        // Dilations with padding.
        cases.push(Case {
            dil: [2, 3],
            pads: [2, 3, 1, 0],
            bias: true,
            ..Case::new([1, 4, 10, 12], 9, [3, 2])
        });
        // Strides beside unit strides.
        cases.push(Case {
            stride: [2, 3],
            pads: [1, 1, 1, 1],
            ..Case::new([2, 3, 9, 10], 4, [3, 3])
        });
        // A column stride past the image and a left pad wider than the plane: some
        // polyphase planes read no input column at all (conv_direct.rs's padded copy
        // sliced past the input row there, a panic, until it skipped such rows).
        cases.push(Case {
            stride: [1, 10],
            pads: [1, 4, 1, 0],
            bias: true,
            ..Case::new([1, 2, 20, 1], 3, [3, 3])
        });
        cases.push(Case {
            group: 2,
            stride: [1, 10],
            pads: [1, 4, 1, 0],
            ..Case::new([1, 2, 20, 1], 2, [3, 3])
        });
        // Groups, batch 3, and depthwise.
        cases.push(Case {
            group: 2,
            pads: [1; 4],
            bias: true,
            ..Case::new([3, 4, 6, 5], 6, [3, 3])
        });
        cases.push(Case {
            group: 8,
            pads: [1; 4],
            ..Case::new([1, 8, 17, 3], 8, [3, 3])
        });
        // Depthwise with a channel multiplier of 2, strided, batch 2; and one large
        // enough that its channels run in parallel.
        cases.push(Case {
            group: 4,
            stride: [2, 2],
            pads: [1; 4],
            bias: true,
            ..Case::new([2, 4, 11, 20], 8, [3, 3])
        });
        cases.push(Case {
            group: 32,
            pads: [2; 4],
            bias: true,
            ..Case::new([1, 32, 40, 40], 32, [5, 5])
        });
        // Depthwise over small images, channels in the vector lanes (conv_dw.rs):
        // batch 2, strided, a partial block of channels.
        cases.push(Case {
            group: 24,
            stride: [2, 2],
            pads: [2, 1, 2, 2],
            bias: true,
            ..Case::new([2, 24, 9, 7], 24, [5, 5])
        });
        // 1-D, with pads and dilation; a 1x1 kernel as a GEMM and padded.
        cases.push(Case {
            pads: [0, 2, 0, 1],
            dil: [1, 2],
            ..Case::new([2, 3, 1, 40], 7, [1, 3])
        });
        cases.push(Case::new([1, 6, 5, 7], 3, [1, 1]));
        cases.push(Case {
            pads: [1, 0, 0, 1],
            ..Case::new([1, 6, 5, 7], 3, [1, 1])
        });
        // A kernel as large as the padded input (one output), and odd sizes.
        cases.push(Case {
            pads: [1, 1, 0, 0],
            ..Case::new([1, 2, 4, 5], 3, [5, 6])
        });
        cases.push(Case {
            pads: [3, 0, 2, 4],
            bias: true,
            ..Case::new([1, 3, 1, 1], 2, [3, 3])
        });
        // Large enough to run in parallel: output channels across tasks, then batch
        // blocks.
        cases.push(Case {
            pads: [1; 4],
            bias: true,
            ..Case::new([1, 16, 30, 30], 32, [3, 3])
        });
        cases.push(Case {
            pads: [1; 4],
            ..Case::new([2, 16, 20, 20], 12, [3, 3])
        });
        for case in &cases {
            case.check();
        }
    }

    /// Outputs of at most `NARROW` positions take one dot product per (channel,
    /// position) (`gemm::narrow_f32`): a strided 1-D window as a speech front end's
    /// STFT has, padded 1-D encoders down to one position, 3x3 windows over 2x2 and 4x4
    /// images (one and two passes over the weights), a 1x1 on a pooled image, groups,
    /// batch 2, dilation, a fused Relu, and a product large enough to split its rows
    /// across threads; and 17 positions, just past them.
    #[test]
    fn narrow_outputs_match_the_reference() {
        let one_d = |c, w, m, k, stride, pad| Case {
            stride: [1, stride],
            pads: [0, pad, 0, pad],
            bias: true,
            ..Case::new([1, c, 1, w], m, [1, k])
        };
        let mut cases = vec![
            one_d(1, 96, 20, 32, 16, 0),
            one_d(33, 4, 30, 3, 1, 1),
            one_d(30, 4, 17, 3, 2, 1),
            one_d(17, 1, 40, 3, 1, 1),
            one_d(256, 4, 256, 3, 1, 1),
            Case {
                pads: [1; 4],
                relu: true,
                ..Case::new([1, 20, 2, 2], 21, [3, 3])
            },
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([2, 19, 4, 4], 10, [3, 3])
            },
            Case {
                pads: [0, 1, 0, 1],
                ..Case::new([1, 9, 2, 17], 10, [2, 3])
            },
            Case {
                bias: true,
                relu: true,
                ..Case::new([1, 70, 1, 1], 13, [1, 1])
            },
            Case {
                group: 3,
                stride: [2, 2],
                pads: [1; 4],
                ..Case::new([1, 12, 5, 5], 9, [3, 3])
            },
            Case {
                dil: [2, 2],
                pads: [2; 4],
                bias: true,
                ..Case::new([1, 8, 3, 3], 11, [3, 3])
            },
        ];
        cases[4].relu = true;
        for case in &cases {
            let [oh, ow] = case.out();
            assert!(oh * ow <= NARROW + 1, "{:?}: {oh} x {ow}", case.x);
            case.check();
        }
    }

    #[test]
    fn direct_kernels_match_the_reference_on_every_isa() {
        use super::super::conv_direct::{Direct, Isa};
        use super::super::epilogue::Epilogue;
        // A MobileNet stem, 3 -> 8 channels of stride 2, `w` columns: threads split its
        // positions (the input outweighs the weights), along rows at 224 and along the
        // planes at 40 (20 output columns).
        let stem = |w| Case {
            stride: [2, 2],
            pads: [1; 4],
            bias: true,
            ..Case::new([1, 3, 90, w], 8, [3, 3])
        };
        // 128 channels x 64 outputs x 9 taps of weights: more than one channel chunk,
        // so later chunks add onto the output (and only the last applies the epilogue).
        let cases = [
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 128, 7, 9], 64, [3, 3])
            },
            // The same along output rows (30 columns: a full and a masked vector per
            // row, tiles of three rows): later chunks start from what the chunk before
            // stored.
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 128, 6, 30], 64, [3, 3])
            },
            // A one-row image under pads taller than the kernel: output rows that read
            // one kernel row, and rows that read none (the bias alone).
            Case {
                pads: [3, 1, 3, 1],
                bias: true,
                ..Case::new([1, 4, 1, 48], 6, [3, 3])
            },
            // Rows of seven vectors (100 columns), tiles across rows' ends and evened
            // out at the end; five output channels (a tile of one after four).
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 8, 5, 100], 5, [3, 3])
            },
            Case {
                pads: [0, 1, 2, 0],
                dil: [2, 1],
                ..Case::new([1, 3, 11, 35], 7, [2, 4])
            },
            // Strided windows, through polyphase planes: a ResNet stem (7x7, stride 2,
            // pad 3), a downsampling 3x3, a 1x1 projection of stride 2 (one plane read),
            // and uneven strides with a dilation and asymmetric pads.
            Case {
                stride: [2, 2],
                pads: [3; 4],
                bias: true,
                ..Case::new([1, 3, 23, 20], 5, [7, 7])
            },
            Case {
                stride: [2, 2],
                pads: [1; 4],
                ..Case::new([1, 130, 13, 15], 9, [3, 3])
            },
            stem(224),
            stem(40),
            Case {
                stride: [2, 2],
                ..Case::new([1, 16, 9, 9], 8, [1, 1])
            },
            Case {
                stride: [3, 2],
                dil: [2, 1],
                pads: [2, 0, 1, 3],
                bias: true,
                ..Case::new([1, 4, 17, 19], 6, [3, 4])
            },
            Case {
                stride: [1, 4],
                pads: [0, 2, 0, 1],
                ..Case::new([1, 5, 1, 61], 3, [1, 9])
            },
            // One input channel to fewer than four outputs (a depthwise convolution's
            // group): its own kernel; more take the tile kernel (`one_channel_cases`,
            // chained below). MobileNet's 5x5 over 14x14 (one masked vector per row, rows
            // in tiles of 8, 4 and 2); 57 columns (a masked fourth vector, two rows a
            // tile) with three output channels from the one; a stride of 2; rows wider
            // than a tile (298 columns, chunks of 128); uneven strides, a dilation and
            // asymmetric pads.
            Case {
                pads: [2; 4],
                bias: true,
                ..Case::new([1, 1, 14, 14], 1, [5, 5])
            },
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 1, 56, 57], 3, [3, 3])
            },
            Case {
                stride: [2, 2],
                pads: [1; 4],
                ..Case::new([1, 1, 29, 113], 2, [3, 3])
            },
            Case::new([1, 1, 3, 300], 1, [1, 3]),
            Case {
                stride: [3, 2],
                dil: [2, 1],
                pads: [2, 0, 1, 3],
                bias: true,
                ..Case::new([1, 1, 17, 19], 2, [3, 4])
            },
        ];
        let epilogues = [
            None,
            Some(Epilogue::Clip {
                lo: 0.0,
                hi: f32::INFINITY,
            }),
            Some(Epilogue::HardSwish),
        ];
        for isa in Isa::available() {
            for case in cases.iter().chain(&one_channel_cases()) {
                let (x, w, b) = case.tensors();
                let [_, c, _, _] = case.x;
                let [oh, ow] = case.out();
                let plan = Direct::plan(&case.window(), c, isa).unwrap();
                // Scratch poisoned: every element the kernels read must be written first.
                let mut padded = vec![f32::NAN; plan.scratch_len()];
                let mut alone = Vec::new();
                for parallel in [false, true] {
                    for (i, e) in epilogues.into_iter().enumerate() {
                        let mut y = vec![f32::NAN; case.m * oh * ow];
                        let bias = case.bias.then_some(&b[..]);
                        plan.conv(&x, &w, bias, e, &mut padded, &mut y, parallel);
                        let mut want = case.reference(&x, &w, &b);
                        if let Some(e) = e {
                            e.apply(&mut want);
                        }
                        assert_close(&y, &want);
                        // Split across threads (by channels or by positions), each
                        // output is the same sequence of operations.
                        let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                        match parallel {
                            false => alone.push(bits),
                            true => assert_eq!(bits, alone[i], "{case:?} {isa:?} {e:?}"),
                        }
                    }
                }
            }
        }
    }

    /// Convolutions over one input channel to several outputs: a grayscale image's first
    /// layer (16 channels), 5 (four in a tile, one left over) by 5 x 5, and 3 of stride 2.
    fn one_channel_cases() -> [Case; 3] {
        [
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 1, 32, 128], 16, [3, 3])
            },
            Case {
                pads: [2; 4],
                ..Case::new([1, 1, 28, 28], 5, [5, 5])
            },
            Case {
                stride: [2, 2],
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 1, 29, 113], 3, [3, 3])
            },
        ]
    }

    /// Over one input channel the depthwise kernel and the tile kernel give the same
    /// bits (each sums the bias, then the taps in turn), so which one a layer takes
    /// (`Direct::conv`: the tile kernel from `MR` output channels) changes no result;
    /// on every ISA, with and without an activation.
    #[test]
    fn one_channel_kernels_give_the_same_bits() {
        use super::super::conv_direct::{Direct, Isa};
        use super::super::epilogue::Epilogue;
        let cases = one_channel_cases();
        for isa in Isa::available() {
            for case in &cases {
                let (x, w, b) = case.tensors();
                let [oh, ow] = case.out();
                let plan = Direct::plan(&case.window(), 1, isa).unwrap();
                let mut padded = vec![f32::NAN; plan.scratch_len()];
                plan.pad(&x, &mut padded, false);
                let bias = case.bias.then_some(&b[..]);
                for e in [None, Some(Epilogue::HardSwish)] {
                    let mut tiles = vec![f32::NAN; case.m * oh * ow];
                    let mut dw = tiles.clone();
                    plan.tiles(&padded, &w, bias, e, &mut tiles, false);
                    plan.depthwise(&padded, &w, bias, e, &mut dw, false);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&tiles), bits(&dw), "{isa:?} m {} {e:?}", case.m);
                }
            }
        }
    }

    /// The blocked kernel (output channels in the lanes, conv_blocked.rs) gives the tile
    /// kernel's bits, and the reference's values to rounding, on every ISA: whole groups
    /// and a group of fewer blocks, a block partly past the channels, rows narrower than
    /// a vector (stored through the spill array), strided and dilated windows, a 1-D
    /// window, fewer positions than a strip (the last tile shifted back over the one
    /// before), a reduction in two chunks; each with and without threads, with and
    /// without an activation.
    #[test]
    fn blocked_kernel_gives_the_tile_kernels_bits() {
        use super::super::conv_blocked::Blocked;
        use super::super::conv_direct::{Direct, Isa};
        use super::super::epilogue::Epilogue;
        let cases = [
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 24, 19, 21], 80, [3, 3])
            },
            Case {
                pads: [1; 4],
                ..Case::new([1, 9, 12, 40], 40, [3, 3])
            },
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 5, 7, 6], 20, [3, 3])
            },
            Case {
                stride: [2, 2],
                dil: [1, 2],
                pads: [1, 2, 0, 1],
                ..Case::new([1, 7, 23, 31], 33, [3, 3])
            },
            Case {
                pads: [0, 2, 0, 2],
                bias: true,
                ..Case::new([1, 6, 1, 301], 48, [1, 5])
            },
            Case {
                pads: [1; 4],
                ..Case::new([1, 3, 5, 5], 64, [3, 3])
            },
            // 240 channels of a full group's 3x3 weights: two chunks of the reduction,
            // the second starting from the sums in the buffer (the tail tile's too).
            // Rows wide enough that the tile kernel runs along them, where its chunks
            // also sum in sequence.
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 240, 3, 40], 64, [3, 3])
            },
        ];
        let epilogues = [None, Some(Epilogue::HardSwish)];
        for isa in Isa::available() {
            for (n, case) in cases.iter().enumerate() {
                let (x, w, b) = case.tensors();
                let [oh, ow] = case.out();
                let plan = Direct::plan(&case.window(), case.x[1], isa).unwrap();
                let blocked = Blocked::forced(&plan, case.m).unwrap();
                // Poisoned: every element the kernels read must be written first.
                let mut padded = vec![f32::NAN; plan.scratch_len()];
                plan.pad(&x, &mut padded, false);
                let mut packed = vec![f32::NAN; blocked.packed_len()];
                let bias = case.bias.then_some(&b[..]);
                for parallel in [false, true] {
                    for e in epilogues {
                        let mut want = vec![f32::NAN; case.m * oh * ow];
                        plan.tiles(&padded, &w, bias, e, &mut want, parallel);
                        let mut got = vec![f32::NAN; case.m * oh * ow];
                        blocked.conv(&padded, &w, bias, e, &mut packed, &mut got, parallel);
                        for (i, (g, t)) in got.iter().zip(&want).enumerate() {
                            assert_eq!(
                                g.to_bits(),
                                t.to_bits(),
                                "{isa:?} case {n} element {i}: {g} against the tiles' {t}"
                            );
                        }
                    }
                }
                let mut got = vec![f32::NAN; case.m * oh * ow];
                blocked.conv(&padded, &w, bias, None, &mut packed, &mut got, false);
                assert_close(&got, &case.reference(&x, &w, &b));
            }
        }
    }

    /// Winograd's F(2x2, 3x3) and F(4x4, 3x3) against the definition on every ISA this
    /// CPU has: whole and partial groups of tiles (the rounding's tiles not stored), odd
    /// output rows, asymmetric padding and none, blocks of tiles across threads and not,
    /// blocks that threads share, channel counts no vector divides, with and without
    /// bias and an activation. Scratch and output start poisoned. The op itself takes
    /// the kernel for these windows.
    ///
    /// F(4x4, 3x3)'s transforms scale by up to 8 and by 1/24, which costs it bits:
    /// measured here, its worst error is 3e-6 to 7e-6 of the output's largest magnitude
    /// against 2e-7 to 7e-7 for F(2x2, 3x3); the bounds asserted are [`F4_BOUND`] and
    /// 2e-6 (F(2x2)'s results are held elementwise too).
    #[test]
    fn winograd_matches_the_reference_on_every_isa() {
        use super::super::conv_direct::Isa;
        use super::super::conv_winograd::{Tile, Weights, Winograd, transform};
        use super::super::epilogue::Epilogue;
        let cases = [
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 16, 32, 64], 16, [3, 3])
            },
            Case {
                pads: [1; 4],
                ..Case::new([1, 24, 35, 61], 20, [3, 3])
            },
            Case {
                bias: true,
                ..Case::new([1, 16, 34, 66], 32, [3, 3])
            },
            Case {
                pads: [2, 0, 1, 2],
                bias: true,
                ..Case::new([1, 17, 35, 60], 16, [3, 3])
            },
            // A tall image of few channels: blocks of 512 tiles, each starting inside a
            // tile row and padding its own window of rows, the last one the bottom's.
            Case {
                pads: [1, 1, 2, 1],
                bias: true,
                ..Case::new([1, 16, 130, 94], 16, [3, 3])
            },
            // Enough tiles for several blocks of 96 channels each way.
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 96, 40, 64], 96, [3, 3])
            },
            // Small images, whose blocks threads share (a share of the channels each):
            // one block, with channel counts no vector divides and a partial output
            // row; and two blocks of 96 channels.
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 33, 10, 31], 18, [3, 3])
            },
            Case {
                pads: [1; 4],
                ..Case::new([1, 32, 8, 32], 48, [3, 3])
            },
            Case {
                pads: [1; 4],
                bias: true,
                ..Case::new([1, 96, 16, 32], 96, [3, 3])
            },
        ];
        let relu = Epilogue::Clip {
            lo: 0.0,
            hi: f32::INFINITY,
        };
        let mut shared = [false; 2];
        for (n, case) in cases.iter().enumerate() {
            let (x, w, b) = case.tensors();
            let [oh, ow] = case.out();
            let want = case.reference(&x, &w, &b);
            let bias = case.bias.then_some(&b[..]);
            let largest = want.iter().fold(0f32, |a, v| a.max(v.abs()));
            assert!(
                Winograd::tile_for(&case.window(), case.x[1], case.m).is_some(),
                "case {n} takes the kernel"
            );
            for (tile, bound) in [(Tile::F2, 2e-6), (Tile::F4, F4_BOUND)] {
                let u = transform(&w, case.m, case.x[1], tile);
                for isa in Isa::available() {
                    // Each epilogue's bits on one thread, which every split must give.
                    let mut serial: [Vec<u32>; 2] = Default::default();
                    for parallel in [false, true] {
                        let plan =
                            Winograd::plan(&case.window(), case.x[1], case.m, tile, isa, parallel)
                                .unwrap_or_else(|| panic!("case {n} has a plan"));
                        let threads = rayon::current_num_threads() > 1;
                        if tile == Tile::F2 {
                            assert_eq!(plan.shares_blocks(), parallel && threads && n >= 6);
                        }
                        shared[plan.shares_blocks() as usize] |= tile == Tile::F4;
                        for e in [None, Some(relu)] {
                            let mut scratch = vec![f32::NAN; plan.scratch_len(true)];
                            let mut got = vec![f32::NAN; case.m * oh * ow];
                            plan.run(&x, Weights::Raw(&w), bias, e, &mut scratch, &mut got);
                            let want: Vec<f32> = match e {
                                Some(_) => want.iter().map(|&v| v.max(0.0)).collect(),
                                None => want.clone(),
                            };
                            if tile == Tile::F2 {
                                assert_close(&got, &want);
                            }
                            let worst = got
                                .iter()
                                .zip(&want)
                                .fold(0f32, |a, (g, w)| a.max((g - w).abs()));
                            assert!(
                                worst <= bound * largest,
                                "case {n}, {tile:?}: error {worst:e} of {largest:e}"
                            );
                            // U made once (lowering's ConvWinograd): the same bits, in a
                            // scratch without room for U.
                            let mut scratch = vec![f32::NAN; plan.scratch_len(false)];
                            let mut again = vec![f32::NAN; case.m * oh * ow];
                            plan.run(
                                &x,
                                Weights::Transformed(&u),
                                bias,
                                e,
                                &mut scratch,
                                &mut again,
                            );
                            let bits =
                                |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                            assert_eq!(bits(&again), bits(&got), "case {n}, {tile:?}");
                            let first = &mut serial[e.is_some() as usize];
                            if parallel {
                                assert_eq!(&bits(&got), first, "case {n}, {tile:?}: threads");
                            } else {
                                *first = bits(&got);
                            }
                        }
                    }
                }
            }
            case.check();
        }
        // F(4x4, 3x3) ran with every thread taking every block too (with threads to take them).
        assert!(shared[1] || rayon::current_num_threads() == 1);
    }

    #[test]
    fn conv_transpose_scatters_with_stride() {
        // 1-D: x = [1, 2], kernel [1, 1, 1], stride 2 -> [1, 1, 3, 2, 2].
        let x = Tensor::from_vec(&[1, 1, 2], &[1.0f32, 2.0]);
        let w = Tensor::from_vec(&[1, 1, 3], &[1.0f32; 3]);
        let (shape, y) = run_f32_with_shape(
            "ConvTranspose",
            &[("strides", Attr::Ints(vec![2]))],
            &[x.clone(), w.clone()],
        );
        assert_eq!(shape, [1, 1, 5]);
        assert_eq!(y, [1.0, 1.0, 3.0, 2.0, 2.0]);
        // pads [1, 1] crop one element each side.
        let attrs = [
            ("strides", Attr::Ints(vec![2])),
            ("pads", Attr::Ints(vec![1, 1])),
        ];
        assert_eq!(
            run_f32_with_shape("ConvTranspose", &attrs, &[x, w]).1,
            [1.0, 3.0, 2.0]
        );
    }

    /// float16 and bfloat16 products compute as Ascend's Cube unit does: operands
    /// widened to f32, products summed in f32, each output rounded once. So each half
    /// output is exactly the f32 product of the same (widened) values, rounded.
    #[test]
    fn half_products_accumulate_in_f32_and_round_once() {
        use crate::ops::testing::run1;
        use half::{bf16, f16};
        // Values exact in both half types: multiples of 1/8 in [-4, 4).
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) % 64) as f32 / 8.0 - 4.0
        };
        let mut values = |n: usize| (0..n).map(|_| next()).collect::<Vec<f32>>();
        let (x, w, b) = (values(2 * 4 * 7 * 6), values(6 * 24), values(6));
        let conv_attrs = [
            ("pads", Attr::Ints(vec![1, 0, 2, 1])),
            ("strides", Attr::Ints(vec![2, 1])),
            ("group", Attr::Int(2)),
        ];
        /// (op, attributes, shapes of its three inputs).
        type Case<'a> = (&'a str, &'a [(&'a str, Attr)], [Vec<usize>; 3]);
        let cases: [Case; 3] = [
            (
                "Conv",
                &conv_attrs,
                [vec![2, 4, 7, 6], vec![6, 2, 3, 3], vec![6]],
            ),
            (
                "ConvTranspose",
                &[("strides", Attr::Ints(vec![2, 2]))],
                [vec![2, 4, 7, 6], vec![4, 3, 3, 3], vec![3]],
            ),
            (
                "Gemm",
                &[("transB", Attr::Int(1)), ("beta", Attr::Float(0.5))],
                [vec![3, 24], vec![6, 24], vec![6]],
            ),
        ];
        fn check<T: Half + Elem>(op: &str, attrs: &[(&str, Attr)], f32s: &[Tensor]) {
            let halves: Vec<Tensor> = f32s
                .iter()
                .map(|t| {
                    let v: Vec<T> = t
                        .slice::<f32>()
                        .unwrap()
                        .iter()
                        .map(|&v| T::from_f64(v as f64))
                        .collect();
                    Tensor::from_vec(&t.shape, &v)
                })
                .collect();
            let want = run1(op, attrs, f32s);
            let got = run1(op, attrs, &halves);
            assert_eq!(got.shape, want.shape, "{op}");
            let want: Vec<T> = want
                .slice::<f32>()
                .unwrap()
                .iter()
                .map(|&v| T::from_f64(v as f64))
                .collect();
            let got = got.slice::<T>().unwrap();
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_f64().to_bits() == w.to_f64().to_bits()),
                "{op} {}: {got:?} vs {want:?}",
                T::DTYPE
            );
        }
        for (op, attrs, [xs, ws, bs]) in cases {
            let n = |s: &[usize]| s.iter().product::<usize>();
            let f32s = [
                Tensor::from_vec(&xs, &x[..n(&xs)]),
                Tensor::from_vec(&ws, &w[..n(&ws)]),
                Tensor::from_vec(&bs, &b[..n(&bs)]),
            ];
            check::<f16>(op, attrs, &f32s);
            check::<bf16>(op, attrs, &f32s);
        }
        // A sum float16 cannot hold on its way: 4096 ones reach 4096 in f32, where an
        // f16 accumulator stops at 2048 (2048 + 1 rounds back to 2048).
        let ones = Tensor::from_vec(&[1, 4096], &[f16::ONE; 4096]);
        let col = Tensor::from_vec(&[4096, 1], &[f16::ONE; 4096]);
        let y = run1("MatMul", &[], &[ones, col]);
        assert_eq!(y.slice::<f16>().unwrap(), [f16::from_f32(4096.0)]);
    }

    /// A constant float16 weight is widened once at lowering: the hook asks for it on
    /// Conv and ConvTranspose with half inputs, and only there.
    #[test]
    fn constant_half_weights_are_widened_once() {
        use crate::ops::{Attrs, DType, HostTensor, InferCtx, TensorMeta};
        use half::f16;
        let values: Vec<f16> = [0.5f32, -2.0, 65504.0, 1e-7].map(f16::from_f32).to_vec();
        let w = HostTensor {
            dtype: DType::F16,
            shape: vec![1, 1, 2, 2],
            data: bytemuck::cast_slice(&values).to_vec().into(),
        };
        let metas = [
            TensorMeta::new(DType::F16, &[1, 1, 3, 3]),
            TensorMeta::new(DType::F16, &[1, 1, 2, 2]),
        ];
        let attrs = Attrs::new();
        let ctx = |op, values| InferCtx {
            op,
            inputs: &metas,
            values,
            attrs: &attrs,
            outputs: 1,
        };
        let known = [None, Some(&w)];
        let plan = super::prepack_half_weight(&ctx("Conv", &known)).expect("widened");
        assert_eq!((plan.op, plan.input), ("Conv", 1));
        let wide = (plan.pack)(&w).unwrap();
        assert_eq!((wide.dtype, &wide.shape), (DType::F32, &w.shape));
        let want: Vec<f32> = values.iter().map(|v| v.to_f32()).collect();
        assert_eq!(wide.data, bytemuck::cast_slice::<f32, u8>(&want));
        assert!(super::prepack_half_weight(&ctx("ConvTranspose", &known)).is_some());
        // A weight only known at run time stays as it is.
        assert!(super::prepack_half_weight(&ctx("Conv", &[None, None])).is_none());
    }
}
