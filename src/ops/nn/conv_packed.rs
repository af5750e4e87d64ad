//! `ConvWinograd`: a float32 3x3 convolution of stride 1 whose weights lowering
//! transformed once into Winograd's `U` (conv_winograd.rs), in place of the Conv that
//! would transform them at every launch.
//!
//! Why: a Conv taken by the Winograd kernel spends, per call, 7.5 cycles on each (output,
//! input) channel pair turning its 3x3 weights into the 4x4 `U = G g Gᵀ` and writes the
//! 16 m c floats of `U` before its products read them (a 64 -> 64 layer: 4096 pairs,
//! 256 KB, about a fifth of the layer over a 4 x 32 map). The weights are constant for
//! the model's life, so their transform belongs with the work lowering moves out of
//! execution, as ATC stores Ascend's weights in the Cube unit's fractal formats.
//!
//! Lowering takes a Conv this way ([`winograd_prepack`], from Conv's prepack hook in nn.rs) when its window is one the kernel
//! takes (`Winograd::tile_for`: from the shapes alone, so the lowered graph is the same
//! on every machine), transforming the weights for the algorithm it chose, F(2x2, 3x3)
//! or F(4x4, 3x3); the op tells them apart by U's shape. A CPU without the vector kernels runs the same transforms in
//! portable code (`conv_winograd::portable`); the results then agree to rounding.

use super::conv::{PARALLEL_ELEMS, bias_values};
use super::conv_winograd::{Tile, Weights, Winograd, portable, transform};
use super::epilogue::Epilogue;
use super::scratch::with_scratch;
use super::window::Window;
use crate::ops::shape::movement::transpose_f32;
use crate::ops::simd::Isa;
use crate::ops::{
    Attr, DType, HostTensor, InferCtx, OpError, Prepack, TensorMeta, TensorMut, TensorRef,
};

/// The op lowering puts in place of such a Conv (rt2's own, not an ONNX or GE op): X
/// `[N, C, H, W]`, U `[16, M, C]` for F(2x2, 3x3) or `[36, M, C]` for F(4x4, 3x3)
/// (`U_ξ[o][i]` at `(ξ M + o) C + i`), optional B `[M]`,
/// the Conv's attributes (pads or auto_pad; strides and dilations 1; group 1) and its
/// fused activation -> Y `[N, M, H', W']`.
pub const CONV_WINOGRAD: &str = "ConvWinograd";

/// The op lowering puts in place of a float32 Conv by constant weights over a small
/// output (rt2's own, not an ONNX or GE op; see [`gemm_prepack`]): X `[N, C, D...]`, the
/// weights transposed to `[taps * C, M]` (row `t * C + c` is what tap `t` of input
/// channel `c` contributes to each output channel) and packed into the sgemm's column
/// panels, `[ceil(M / PACK_WIDTH), taps * C, PACK_WIDTH]`, optional B `[M]`; the Conv's
/// attributes (group 1) plus `n` (M) and `kernel_shape`, and its fused activation -> Y
/// `[N, M, D'...]`.
pub const CONV_GEMM: &str = "ConvGemm";

/// Most output positions per image [`CONV_GEMM`] takes: past them the kernels with the
/// positions or the output channels in the lanes over padded planes (conv_direct.rs,
/// conv_blocked.rs) run at the FMA units' peak, and the windows this op gathers grow
/// with the image.
const GEMM_MAX_POSITIONS: i64 = 256;
/// Fewest output channels [`CONV_GEMM`] takes: one column panel's width. The panels are
/// 48 wide, so fewer channels leave lanes empty, and a MobileNet's 112 -> 24 channel 1x1
/// over 14x14 ran 12.1 -> 15.1 us here, where the product the other way around (24 rows
/// of weights times 196 positions) fills its tiles.
const GEMM_MIN_CHANNELS: i64 = 48;
/// Fewest input channels [`CONV_GEMM`] takes: windows of fewer channels per tap gather as
/// many short scattered copies (Silero VAD's one-channel STFT: 7.1 us as a narrow
/// product, 11.3 here).
const GEMM_MIN_INPUT_CHANNELS: i64 = 16;
/// Shortest reduction (input channels times taps) [`CONV_GEMM`] takes: over fewer terms
/// the product is too short to pay for turning the image and the result around (a
/// MobileNet's 24 -> 112 channel 1x1 over 14x14: 12.9 -> 15.0 us).
const GEMM_MIN_REDUCTION: i64 = 64;
/// Fewest output positions [`CONV_GEMM`] takes: one position is one dot product per
/// channel, for which the narrow product (`gemm::narrow_f32`) streams the weights once
/// with the window in registers; the packed kernel's row tile would be one row.
const GEMM_MIN_POSITIONS: i64 = 2;

/// The [`CONV_GEMM`] prepack of a float32 Conv of group 1 by constant weights whose
/// output has [`GEMM_MIN_POSITIONS`] to [`GEMM_MAX_POSITIONS`] positions per image, at
/// least [`GEMM_MIN_CHANNELS`] output channels, [`GEMM_MIN_INPUT_CHANNELS`] input channels
/// and a reduction of [`GEMM_MIN_REDUCTION`]: a ResNet's last stages (512 channels of 3x3
/// over 7x7, 2048 -> 512 of 1x1), a speech encoder's downsampled frames.
///
/// Why: over so few positions the convolution kernels that put positions in the lanes
/// fill a fraction of them (49 positions in four vectors of 16 over 9-wide padded rows),
/// the product of the weights by the im2col matrix has too few columns for its 48-wide
/// tiles, and one dot product per position (`gemm::narrow_f32`) streams the weights
/// once per eight positions. Turned around, the convolution is `Yᵀ [positions, M] =
/// windows [positions, taps * C] · Wᵀ`: Wᵀ packed once here into the column panels the
/// sgemm streams at its peak (as `MatMulPacked`'s weight), and every row tile of eight
/// positions multiplying all M channels. A 512 -> 512 channel 3x3 over 7x7 took 2.7 ms;
/// the product alone runs at the packed kernel's 110 GFLOP/s, 2.1 ms.
pub(super) fn gemm_prepack(ctx: &InferCtx, out: &TensorMeta) -> Option<Prepack> {
    let (_, w) = float_conv_by_constant(ctx)?;
    let (ws, os) = (w.shape.as_deref()?, out.shape.as_deref()?);
    // The batch may be unknown: each image is one product of its own.
    if ws.len() < 3 || os.len() != ws.len() || ws.iter().chain(&os[1..]).any(|&d| d < 1) {
        return None;
    }
    let positions = os[2..].iter().try_fold(1i64, |p, &d| p.checked_mul(d))?;
    let reduction = ws[1..].iter().try_fold(1i64, |p, &d| p.checked_mul(d))?;
    if ws[0] < GEMM_MIN_CHANNELS
        || ws[1] < GEMM_MIN_INPUT_CHANNELS
        || reduction < GEMM_MIN_REDUCTION
        || !(GEMM_MIN_POSITIONS..=GEMM_MAX_POSITIONS).contains(&positions)
    {
        return None;
    }
    let kernel = ws[2..].to_vec();
    if ctx
        .attr_ints("kernel_shape")
        .ok()?
        .is_some_and(|k| k != kernel.as_slice())
    {
        return None;
    }
    Some(Prepack {
        op: CONV_GEMM,
        input: 1,
        attrs: vec![
            ("n", Attr::Int(ws[0])),
            ("kernel_shape", Attr::Ints(kernel)),
        ],
        pack: pack_conv_gemm,
    })
}

/// The dims and values of a float32 Conv weight `[M, C, K...]` with every dim positive
/// and the values to match, as the packings start from.
pub(super) fn conv_weight(w: &HostTensor) -> Option<(Vec<usize>, Vec<f32>)> {
    if w.dtype != DType::F32 || w.shape.len() < 3 {
        return None;
    }
    let dims = w
        .shape
        .iter()
        .map(|&d| usize::try_from(d).ok().filter(|&d| d > 0))
        .collect::<Option<Vec<usize>>>()?;
    let count = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?;
    let floats = super::gemm::widen_floats(w)?;
    (floats.len() == count).then_some((dims, floats))
}

/// A float32 `[M, C, K...]` weight as [`CONV_GEMM`] reads it: `Wᵀ [taps * C, M]`, row
/// `t * C + c` holding `w[.., c, t]`, packed into column panels.
fn pack_conv_gemm(w: &HostTensor) -> Option<HostTensor> {
    let (dims, floats) = conv_weight(w)?;
    let (m, c) = (dims[0], dims[1]);
    let taps = dims[2..].iter().product::<usize>();
    let k = c * taps;
    let mut wt = vec![0.0f32; k * m];
    for (o, filter) in floats.chunks_exact(k).enumerate() {
        for (i, plane) in filter.chunks_exact(taps).enumerate() {
            for (t, &v) in plane.iter().enumerate() {
                wt[(t * c + i) * m + o] = v;
            }
        }
    }
    Some(super::gemm::packed(&wt, k, m))
}

/// ConvGemm's compute, per image: the image turned channels-last, each output
/// position's window gathered into a row (`taps * C`, tap-major, zeros in the padding),
/// the product with the packed `Wᵀ` (the bias added as its tiles are stored), split
/// across threads by column panels when large, and the `[positions, M]` result turned
/// back to `[M, positions]` with the activation. All of it in this thread's scratch
/// memory; nothing is allocated. Each output is the sum over (tap, channel) in order,
/// one FMA per term, whatever the split, so every executor gets the same bits.
pub fn conv_gemm(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    use crate::ops::linalg::sgemm::{PACK_WIDTH, packed_len};
    let (x, bp) = (&inputs[0], &inputs[1]);
    let (m, kernel, win) = packed_conv_window(ctx, x, outputs[0].shape)?;
    let c = x.shape[1];
    let k = c * win.kernel_len();
    let (ilen, olen) = (win.input_len(), win.output_len());
    if bp.shape != [m.div_ceil(PACK_WIDTH), k, PACK_WIDTH] || bp.len() != packed_len(k, m) {
        return Err(ctx.input_error(
            1,
            format!(
                "is {:?}; for {c} channels of a {kernel:?} kernel into {m} the packed weights \
                 are [{}, {k}, {PACK_WIDTH}]",
                bp.shape,
                m.div_ceil(PACK_WIDTH)
            ),
        ));
    }
    let (xv, bv) = (x.slice::<f32>()?, bp.slice::<f32>()?);
    let bias = bias_values::<f32>(ctx, inputs.get(2), m)?;
    let epilogue = Epilogue::read(ctx)?;
    let y = outputs[0].slice_mut::<f32>()?;
    if y.is_empty() {
        return Ok(());
    }
    let tasks = super::gemm::tasks_for(olen * k * m, y.len() * k >= PARALLEL_ELEMS);
    // A 1x1 window of stride 1 without padding reads each position's channels where they
    // are: the product takes the image itself, position j's channel c `ilen` floats on
    // from channel c - 1 (the kernel broadcasts A's elements one at a time, and a row
    // tile's eight consecutive positions share cache lines).
    let in_place = win.kernel_len() == 1
        && win.stride == [1; 3]
        && win.pad_begin == [0; 3]
        && win.pad_end == [0; 3]
        && olen == ilen;
    for (n, out) in y.chunks_exact_mut(m * olen).enumerate() {
        let xn = &xv[n * c * ilen..][..c * ilen];
        if in_place {
            with_scratch(olen * m, |yt: &mut [f32]| {
                let a = Operand::strided(xn, 1, ilen, olen, c);
                panels_product(olen, (k, 0..k), m, a, bv, bias, yt, tasks);
                transpose_f32(yt, olen, m, out);
            });
        } else {
            with_scratch(ilen * c + olen * k + olen * m, |scratch: &mut [f32]| {
                let (xt, rest) = scratch.split_at_mut(ilen * c);
                let (rows, yt) = rest.split_at_mut(olen * k);
                transpose_f32(xn, c, ilen, xt);
                gather_windows(xt, c, &win, rows);
                // Runs of positions whose windows reach the image through the same
                // kernel rows (a 1-D window: the same taps) reduce over those alone.
                let mut j0 = 0;
                while j0 < olen {
                    let ks = inside_taps(&win, c, j0);
                    let j1 = (j0 + 1..olen)
                        .find(|&j| inside_taps(&win, c, j) != ks)
                        .unwrap_or(olen);
                    let yt = &mut yt[j0 * m..j1 * m];
                    if ks.is_empty() {
                        // Every tap in the padding: the bias alone.
                        for row in yt.chunks_exact_mut(m) {
                            match bias {
                                Some(b) => row.copy_from_slice(&b[..m]),
                                None => row.fill(0.0),
                            }
                        }
                    } else {
                        let a =
                            Operand::strided(&rows[j0 * k + ks.start..], k, 1, j1 - j0, ks.len());
                        panels_product(j1 - j0, (k, ks), m, a, bv, bias, yt, tasks);
                    }
                    j0 = j1;
                }
                transpose_f32(yt, olen, m, out);
            });
        }
        if let Some(e) = epilogue {
            e.apply_f32(out);
        }
    }
    Ok(())
}

/// What a Conv whose weights lowering packed (ConvGemm, ConvWinograd1D) reads from its
/// attributes, checked against X `[N, C, D...]` and the output `y_shape` `[N, n, D'...]`:
/// `n` (M), `kernel_shape`, and the window they make with the Conv's pads, strides and
/// dilations; group 1.
pub(super) fn packed_conv_window(
    ctx: &InferCtx,
    x: &TensorRef,
    y_shape: &[usize],
) -> Result<(usize, Vec<usize>, Window), OpError> {
    let m = usize::try_from(ctx.attr_int("n", -1)?)
        .map_err(|_| ctx.compute_error("needs a non-negative attribute \"n\""))?;
    let kernel = super::window::positive(ctx, "kernel_shape", x.rank().saturating_sub(2))?;
    if ctx.attr_int("group", 1)? != 1 {
        return Err(ctx.attr_error("group", format!("{} computes group 1", ctx.op)));
    }
    if x.rank() < 3 || y_shape.len() != x.rank() || y_shape[..2] != [x.shape[0], m] {
        return Err(ctx.compute_error(format!(
            "computes [N, C, D...] into [N, {m}, D'...], not {:?} into {y_shape:?}",
            x.shape
        )));
    }
    let win = Window::new(ctx, &x.shape[2..], &kernel, &y_shape[2..])?;
    Ok((m, kernel, win))
}

/// The columns of a gathered window row (`taps * C`, tap-major) that can hold input for
/// output position `j`: of a 2-D window (or 3-D of depth 1), the taps of the kernel rows
/// that land inside the image; of a 1-D one, the taps that do; of any other, all. The
/// rest are the padding's zeros, whose products add nothing: a 3x3 window over an image
/// two rows high with a row of padding each side reads a third of zeros at every
/// position (a CRNN's last layers).
fn inside_taps(win: &Window, c: usize, j: usize) -> std::ops::Range<usize> {
    let [kd, kh, kw] = win.kernel;
    let [_, oh, ow] = win.output;
    let inside = |d: usize, o: usize, n: usize| {
        let first = (0..n).find(|&t| win.input_at(d, o, t).is_some());
        let last = (0..n).rev().find(|&t| win.input_at(d, o, t).is_some());
        first.zip(last).map_or(0..0, |(a, b)| a..b + 1)
    };
    match (kd, kh) {
        (1, 1) => {
            let e = inside(2, j % ow, kw);
            e.start * c..e.end * c
        }
        (1, _) => {
            let b = inside(1, (j / ow) % oh, kh);
            b.start * kw * c..b.end * kw * c
        }
        _ => 0..c * win.kernel_len(),
    }
}

/// Fills `rows` (`[positions, taps * C]`) with each output position's window of the
/// channels-last image `xt` (`[input positions, C]`): tap `t`'s C inputs at `t * C`, a
/// copy of one contiguous run, or zeros where the tap falls in the padding.
fn gather_windows(xt: &[f32], c: usize, win: &Window, rows: &mut [f32]) {
    let [kd, kh, kw] = win.kernel;
    let [_, oh, ow] = win.output;
    let [_, ih, iw] = win.input;
    let k = c * win.kernel_len();
    let at = |d, o, t| win.input_at(d, o, t);
    for (j, row) in rows.chunks_exact_mut(k).enumerate() {
        let (z, y, x) = (j / (oh * ow), (j / ow) % oh, j % ow);
        let mut taps = row.chunks_exact_mut(c);
        for a in 0..kd {
            for b in 0..kh {
                let line = at(0, z, a)
                    .zip(at(1, y, b))
                    .map(|(zi, yi)| (zi * ih + yi) * iw);
                for e in 0..kw {
                    let Some(dst) = taps.next() else { return };
                    match line.zip(at(2, x, e)) {
                        Some((l, xi)) => dst.copy_from_slice(&xt[(l + xi) * c..][..c]),
                        None => dst.fill(0.0),
                    }
                }
            }
        }
    }
}

/// The left operand of [`panels_product`]: `rows x cols` floats of `data`, element
/// `(i, j)` at `i * row_stride + j * col_stride`.
pub(super) struct Operand<'a> {
    data: &'a [f32],
    row_stride: usize,
    col_stride: usize,
}

impl<'a> Operand<'a> {
    /// `data` read as `rows x cols` with the given strides.
    ///
    /// # Panics
    /// If `data` does not hold the last element (an internal error: the caller sizes
    /// both from the same shapes).
    pub(super) fn strided(
        data: &'a [f32],
        row_stride: usize,
        col_stride: usize,
        rows: usize,
        cols: usize,
    ) -> Self {
        if rows > 0 && cols > 0 {
            assert!((rows - 1) * row_stride + (cols - 1) * col_stride < data.len());
        }
        Operand {
            data,
            row_stride,
            col_stride,
        }
    }
}

/// `yt` (`[positions, m]`) = `a · Wᵀ[ks] + bias` for `a` `[positions, ks.len()]` and
/// `Wᵀ` (`[k, m]`, packed in `bp`) cut to its rows `ks`; in `tasks` blocks of whole
/// column panels, in parallel when more than one. A run of whole panels is itself a
/// packed matrix, and each element is the same sum whichever block computes it; a cut
/// `Wᵀ` is not (its panels lie `k` rows apart), so it runs panel by panel.
#[allow(clippy::too_many_arguments)]
pub(super) fn panels_product(
    positions: usize,
    (k, ks): (usize, std::ops::Range<usize>),
    m: usize,
    a: Operand,
    bp: &[f32],
    bias: Option<&[f32]>,
    yt: &mut [f32],
    tasks: usize,
) {
    use crate::ops::linalg::sgemm::{PACK_WIDTH, sgemm_packed};
    use rayon::prelude::*;
    assert!(yt.len() >= positions * m);
    let per = m.div_ceil(tasks.max(1)).next_multiple_of(PACK_WIDTH);
    let (rsa, csa) = (a.row_stride as isize, a.col_stride as isize);
    // Raw pointers are not `Send`; the addresses are, and each block writes only its
    // own columns of `yt`.
    let (a, c) = (a.data.as_ptr() as usize, yt.as_mut_ptr() as usize);
    let block = |i: usize| {
        let j0 = i * per;
        if j0 >= m {
            return;
        }
        let width = per.min(m - j0);
        // Whole panels at once where the rows are all of them; one panel at a time where
        // they are cut.
        let step = if ks.len() == k { width } else { PACK_WIDTH };
        for p in (j0..j0 + width).step_by(step) {
            let w = step.min(j0 + width - p);
            // SAFETY: `a` holds positions x ks.len() elements at its strides
            // (`Operand::strided`) and `yt` positions x m floats (asserted); this writes
            // columns p..p + w of `yt`, which no other block does, and reads panels from
            // `p / PACK_WIDTH` on, which start `p * k` floats into `bp` (checked by the
            // caller against `packed_len(k, m)`), from their row `ks.start` on: whole
            // panels (`ks` all of `k`), or `ks.len()` rows of one (`w <= PACK_WIDTH`).
            unsafe {
                sgemm_packed(
                    positions,
                    ks.len(),
                    w,
                    1.0,
                    a as *const f32,
                    rsa,
                    csa,
                    bp[p * k + ks.start * PACK_WIDTH..].as_ptr(),
                    0.0,
                    (c as *mut f32).add(p),
                    m as isize,
                    bias.map(|b| &b[p..p + w]),
                );
            }
        }
    };
    if tasks <= 1 {
        block(0);
    } else {
        (0..tasks).into_par_iter().for_each(block);
    }
}

/// The input and weight metas of a float32 Conv of group 1 whose weights are a known
/// constant: what both prepacks start from.
pub(super) fn float_conv_by_constant<'a>(
    ctx: &InferCtx<'a>,
) -> Option<(&'a TensorMeta, &'a TensorMeta)> {
    if ctx.op != "Conv" {
        return None;
    }
    let [x, w, ..] = ctx.inputs else {
        return None;
    };
    ctx.values.get(1).copied().flatten()?;
    let float = x.dtype == DType::F32 && w.dtype == DType::F32;
    (float && ctx.attr_int("group", 1).ok()? == 1).then_some((x, w))
}

/// The [`CONV_WINOGRAD`] prepack of a Conv, if its window, channels and shapes are ones
/// the Winograd kernel takes.
pub(super) fn winograd_prepack(ctx: &InferCtx, out: &TensorMeta) -> Option<Prepack> {
    let (x, w) = float_conv_by_constant(ctx)?;
    let (xs, ws) = (x.shape.as_deref()?, w.shape.as_deref()?);
    let &[_, c, h, wd] = xs else {
        return None;
    };
    let &[m, wc, 3, 3] = ws else {
        return None;
    };
    if wc != c || xs.iter().any(|&d| d < 1) || m < 1 {
        return None;
    }
    if ctx
        .attr_ints("kernel_shape")
        .ok()?
        .is_some_and(|k| k != [3, 3])
    {
        return None;
    }
    let &[_, _, oh, ow] = out.shape.as_deref()? else {
        return None;
    };
    let dims = |v: &[i64]| {
        v.iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<Vec<_>>>()
    };
    let win = Window::new(ctx, &dims(&[h, wd])?, &[3, 3], &dims(&[oh, ow])?)
        .ok()?
        .lying_flat();
    let tile = Winograd::tile_for(&win, c as usize, m as usize)?;
    Some(Prepack {
        op: CONV_WINOGRAD,
        input: 1,
        attrs: Vec::new(),
        pack: match tile {
            Tile::F2 => |w| pack_winograd(w, Tile::F2),
            Tile::F4 => |w| pack_winograd(w, Tile::F4),
        },
    })
}

/// `U` (`[ξs, m, c]`, ξs the tile's positions) of a float32 `[m, c, 3, 3]` weight.
fn pack_winograd(w: &HostTensor, tile: Tile) -> Option<HostTensor> {
    let &[m, c, 3, 3] = w.shape.as_slice() else {
        return None;
    };
    let (mu, cu) = (usize::try_from(m).ok()?, usize::try_from(c).ok()?);
    if w.dtype != DType::F32 {
        return None;
    }
    let floats = super::gemm::widen_floats(w)?;
    if floats.len() != mu.checked_mul(cu)?.checked_mul(9)? {
        return None;
    }
    let u = transform(&floats, mu, cu, tile);
    Some(HostTensor {
        dtype: DType::F32,
        shape: vec![tile.positions() as i64, m, c],
        data: bytemuck::cast_slice(&u).to_vec().into(),
    })
}

/// ConvWinograd's compute: each image by the Winograd kernel from `U`, or, on a CPU
/// without its vector kernels, by the same transforms in portable code.
pub fn conv_winograd(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, u) = (&inputs[0], &inputs[1]);
    let y_shape = outputs[0].shape;
    if x.rank() != 4 || u.rank() != 3 || y_shape.len() != 4 {
        return Err(ctx.input_error(
            1,
            format!("weights {:?} do not fit input {:?}", u.shape, x.shape),
        ));
    }
    let (c, m) = (x.shape[1], y_shape[1]);
    let tile = Tile::of_positions(u.shape[0]).filter(|_| u.shape[1..] == [m, c]);
    let Some(tile) = tile else {
        return Err(ctx.input_error(
            1,
            format!("is {:?}; want [16, {m}, {c}] or [36, {m}, {c}]", u.shape),
        ));
    };
    let win = Window::new(ctx, &x.shape[2..], &[3, 3], &y_shape[2..])?.lying_flat();
    // What lowering made is such a window; a graph written otherwise is refused here, not
    // computed as one (the kernels size their planes from these).
    let fits = (1..3).all(|d| {
        let padded = win.input[d] as isize + win.pad_begin[d] + win.pad_end[d];
        win.pad_begin[d] >= 0 && win.pad_end[d] >= 0 && padded == win.output[d] as isize + 2
    });
    if win.kernel != [1, 3, 3] || win.stride != [1; 3] || win.dilation != [1; 3] || !fits {
        return Err(ctx.compute_error(format!(
            "computes 3x3 windows of stride and dilation 1 over 2-D maps, each output the \
             padded input less 2; not input {:?}, output {y_shape:?}, strides {:?}, \
             dilations {:?}",
            x.shape, win.stride, win.dilation
        )));
    }
    let (xv, uv) = (x.slice::<f32>()?, u.slice::<f32>()?);
    let bias = bias_values::<f32>(ctx, inputs.get(2), m)?;
    let epilogue = Epilogue::read(ctx)?;
    let y = outputs[0].slice_mut::<f32>()?;
    let (ilen, olen) = (win.input_len(), win.output_len());
    if y.is_empty() {
        return Ok(());
    }
    let parallel = y.len() * c * 9 >= PARALLEL_ELEMS;
    let plan = Isa::detect().and_then(|isa| Winograd::plan(&win, c, m, tile, isa, parallel));
    for (n, out) in y.chunks_mut(m * olen).enumerate() {
        let xn = &xv[n * c * ilen..][..c * ilen];
        match &plan {
            Some(p) => with_scratch(p.scratch_len(false), |scratch: &mut [f32]| {
                p.run(xn, Weights::Transformed(uv), bias, epilogue, scratch, out);
            }),
            None => portable(&win, c, m, tile, xn, uv, bias, epilogue, out),
        }
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::conv_winograd::{Tile, Winograd, portable, transform};
    use super::super::epilogue::{ACTIVATION_ATTR, Epilogue};
    use super::super::window::Window;
    use super::{CONV_GEMM, CONV_WINOGRAD};
    use crate::ops::simd::Isa;
    use crate::ops::testing::{
        assert_close, assert_close_to_scale, run_f32_with_shape, seeded as values, test_attrs,
    };
    use crate::ops::{Attr, DType, HostTensor, InferCtx, OpRegistry, Tensor, TensorMeta};

    /// Windows the kernel takes: the CRNN's 64 -> 64 over 4 x 32 with a Relu, an odd map
    /// under asymmetric pads (tiles and columns of the rounding), a batch of two, a
    /// `valid` window, and a map the Conv takes F(4x4, 3x3) for.
    fn cases() -> Vec<([usize; 4], usize, [i64; 4], bool)> {
        vec![
            ([1, 64, 4, 32], 64, [1, 1, 1, 1], true),
            ([1, 24, 15, 61], 16, [1, 1, 1, 2], true),
            ([1, 16, 13, 29], 24, [2, 0, 1, 2], false),
            ([2, 20, 9, 30], 16, [1, 1, 1, 1], true),
            ([1, 16, 18, 34], 17, [0, 0, 0, 0], false),
        ]
    }

    /// Runs `check` on each case with its weights and the Conv's output.
    fn with_conv(check: impl Fn(([usize; 4], usize, [i64; 4], bool), &[f32], &[f32])) {
        for case @ (x, m, pads, relu) in cases() {
            let w = values(m * x[1] * 9, 2);
            let conv = run(
                "Conv",
                x,
                m,
                pads,
                relu,
                Tensor::from_vec(&[m, x[1], 3, 3], &w),
            );
            check(case, &w, &conv);
        }
    }

    /// Runs `op` with the case's input, `w` and a bias; its output.
    fn run(op: &str, x: [usize; 4], m: usize, pads: [i64; 4], relu: bool, w: Tensor) -> Vec<f32> {
        let mut attrs = vec![("pads", Attr::Ints(pads.to_vec()))];
        if relu {
            attrs.push((ACTIVATION_ATTR, Attr::Str("Relu".into())));
        }
        let xs = Tensor::from_vec(&x, &values(x.iter().product(), 1));
        let b = Tensor::from_vec(&[m], &values(m, 3));
        run_f32_with_shape(op, &attrs, &[xs, w, b]).1
    }

    /// The weights transformed at lowering give the bits of the Conv that transforms
    /// them at its launch: the same operations in the same order, then the same kernel.
    /// Transformed for the other algorithm, they give its results (the op tells the two
    /// apart by U's shape), to F(4x4, 3x3)'s rounding.
    #[test]
    fn transformed_weights_give_the_convs_bits() {
        with_conv(|(x, m, pads, relu), w, conv| {
            let c = x[1];
            for tile in [Tile::F2, Tile::F4] {
                let u = Tensor::from_vec(&[tile.positions(), m, c], &transform(w, m, c, tile));
                let packed = run(CONV_WINOGRAD, x, m, pads, relu, u);
                match Isa::detect() {
                    Some(_) if Some(tile) == chosen(x, m, pads) => {
                        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&packed), bits(conv), "{x:?} -> {m}");
                    }
                    _ => assert_close_to_scale(&packed, conv, 2e-5),
                }
            }
        });
    }

    /// The algorithm the Conv of a case runs.
    fn chosen(x: [usize; 4], m: usize, pads: [i64; 4]) -> Option<Tile> {
        Winograd::tile_for(&window(x, pads), x[1], m)
    }

    /// A case's window.
    fn window([_, _, h, wd]: [usize; 4], pads: [i64; 4]) -> Window {
        let (oh, ow) = (
            h + (pads[0] + pads[2]) as usize - 2,
            wd + (pads[1] + pads[3]) as usize - 2,
        );
        let attrs = test_attrs(&[("pads", Attr::Ints(pads.to_vec()))]);
        let metas = [TensorMeta::new(DType::F32, &[1])];
        let ctx = InferCtx {
            op: "Conv",
            inputs: &metas,
            values: &[],
            attrs: &attrs,
            outputs: 1,
        };
        Window::new(&ctx, &[h, wd], &[3, 3], &[oh, ow])
            .unwrap()
            .lying_flat()
    }

    /// The portable path, which a CPU without the vector kernels runs, agrees with them
    /// (and so with the definition, which the Conv's tests hold them to) to rounding:
    /// elementwise for F(2x2, 3x3), within 2e-5 of the largest magnitude where F(4x4,
    /// 3x3) is either side. Its output starts poisoned: every element must be written.
    #[test]
    fn portable_winograd_agrees_with_the_kernels() {
        with_conv(|(x, m, pads, relu), w, want| {
            let [n, c, h, wd] = x;
            let win = window(x, pads);
            let [_, oh, ow] = win.output;
            assert!(chosen(x, m, pads).is_some(), "{x:?} -> {m}");
            let (xv, b) = (values(x.iter().product(), 1), values(m, 3));
            let e = relu.then_some(Epilogue::Clip {
                lo: 0.0,
                hi: f32::INFINITY,
            });
            for tile in [Tile::F2, Tile::F4] {
                let u = transform(w, m, c, tile);
                let mut got = vec![f32::NAN; n * m * oh * ow];
                for (i, out) in got.chunks_mut(m * oh * ow).enumerate() {
                    let xi = &xv[i * c * h * wd..][..c * h * wd];
                    portable(&win, c, m, tile, xi, &u, Some(&b), e, out);
                }
                match (tile, chosen(x, m, pads)) {
                    (Tile::F2, Some(Tile::F2)) => assert_close(&got, want),
                    _ => assert_close_to_scale(&got, want, 2e-5),
                }
            }
        });
    }

    /// A ConvWinograd written with a window lowering never makes (a stride, an output
    /// that is not the padded input less 2), or with a U of neither algorithm's shape, is
    /// an error, not a result.
    #[test]
    fn other_windows_are_refused() {
        use crate::ops::testing::try_run;
        let (x, m) = ([1, 16, 8, 32], 16);
        let xs = Tensor::from_vec(&x, &values(16 * 8 * 32, 1));
        let u = Tensor::from_vec(&[16, m, 16], &values(16 * m * 16, 2));
        let pads = [("pads", Attr::Ints(vec![1; 4]))];
        let ok = try_run(CONV_WINOGRAD, &pads, &[xs.clone(), u.clone()], 1);
        assert_eq!(ok.map(|y| y[0].shape.clone()).unwrap(), [1, 16, 8, 32]);
        let strided = [pads[0].clone(), ("strides", Attr::Ints(vec![2, 2]))];
        let err = try_run(CONV_WINOGRAD, &strided, &[xs.clone(), u], 1).unwrap_err();
        assert!(err.to_string().contains("stride and dilation 1"), "{err}");
        // U of 36 positions is F(4x4, 3x3)'s; of 25, no algorithm's.
        let u = Tensor::from_vec(&[36, m, 16], &values(36 * m * 16, 2));
        let ok = try_run(CONV_WINOGRAD, &pads, &[xs.clone(), u], 1);
        assert_eq!(ok.map(|y| y[0].shape.clone()).unwrap(), [1, 16, 8, 32]);
        let u = Tensor::from_vec(&[25, m, 16], &values(25 * m * 16, 2));
        let err = try_run(CONV_WINOGRAD, &pads, &[xs, u], 1).unwrap_err();
        assert!(err.to_string().contains("[36, M, 16]"), "{err}");
    }

    /// A ConvWinograd on a map and channel counts lowering never hands the kernel (one
    /// channel each way, a 3 x 5 map: one group of tiles, mostly the rounding's) still
    /// computes the Conv, by either algorithm.
    #[test]
    fn small_maps_and_single_channels_compute() {
        let pads = [("pads", Attr::Ints(vec![1; 4]))];
        let w = values(9, 2);
        let x = Tensor::from_vec(&[1, 1, 3, 5], &values(15, 1));
        let conv = Tensor::from_vec(&[1, 1, 3, 3], &w);
        let want = run_f32_with_shape("Conv", &pads, &[x.clone(), conv]).1;
        for tile in [Tile::F2, Tile::F4] {
            let u = Tensor::from_vec(&[tile.positions(), 1, 1], &transform(&w, 1, 1, tile));
            let got = run_f32_with_shape(CONV_WINOGRAD, &pads, &[x.clone(), u]).1;
            assert_close_to_scale(&got, &want, 2e-5);
        }
    }

    /// What Conv's prepack hook (as registered) makes of a Conv of input `x` by the weight
    /// `w` (a known constant or not) with `attrs`: the op it launches and the prepared
    /// weight's shape.
    pub(crate) fn conv_prepack(
        x: &[i64],
        w: &HostTensor,
        attrs: &[(&str, Attr)],
        known: bool,
    ) -> Option<(&'static str, Option<Vec<i64>>)> {
        let metas = [
            TensorMeta::new(w.dtype, x),
            TensorMeta::new(w.dtype, &w.shape),
        ];
        let attrs = test_attrs(attrs);
        let values = [None, known.then_some(w)];
        let ctx = InferCtx {
            op: "Conv",
            inputs: &metas,
            values: &values,
            attrs: &attrs,
            outputs: 1,
        };
        let hook = OpRegistry::new()
            .get("Conv")
            .and_then(|s| s.prepack)
            .unwrap();
        hook(&ctx).map(|p| (p.op, (p.pack)(w).map(|u| u.shape)))
    }

    /// Lowering's hook (Conv's, as registered): ConvWinograd for a float32 3x3 Conv of stride 1 by constant
    /// weights over a map the kernel takes, decided from the shapes alone (U for
    /// F(4x4, 3x3) where its products are fewer enough); a strided, a
    /// grouped, a too small or a weight known only at run time keeps the Conv; float16
    /// keeps its widening.
    #[test]
    fn conv_prepacks_where_the_kernel_takes_it() {
        let weight = |dtype, m: usize, c: usize| HostTensor {
            dtype,
            shape: vec![m as i64, c as i64, 3, 3],
            data: vec![0; m * c * 9 * dtype.size()].into(),
        };
        let plan = |dtype, x: &[i64], m, attrs: &[(&str, Attr)], known: bool| {
            conv_prepack(x, &weight(dtype, m, x[1] as usize), attrs, known)
        };
        let pads = [("pads", Attr::Ints(vec![1; 4]))];
        let f32 = DType::F32;
        let packed = Some((CONV_WINOGRAD, Some(vec![16, 64, 48])));
        assert_eq!(plan(f32, &[1, 48, 4, 32], 64, &pads, true), packed);
        // 16 x 64 outputs: 64 tiles of 4x4 on 36 positions against 256 of 2x2 on 16.
        let packed = Some((CONV_WINOGRAD, Some(vec![36, 64, 48])));
        assert_eq!(plan(f32, &[1, 48, 16, 64], 64, &pads, true), packed);
        // 8 x 32: 32 tiles of 4x4 (half of them the rounding's) against 64 of 2x2.
        let packed = Some((CONV_WINOGRAD, Some(vec![16, 64, 48])));
        assert_eq!(plan(f32, &[1, 48, 8, 32], 64, &pads, true), packed);
        // Strided, or over 2 x 32 outputs (16 tiles, fewer than the Winograd kernel
        // takes): at most 256 positions, ConvGemm on Wᵀ [taps * C, M] in panels of 48.
        let strided = [pads[0].clone(), ("strides", Attr::Ints(vec![2, 2]))];
        let gemm = |k: i64| Some((CONV_GEMM, Some(vec![2, k, 48])));
        assert_eq!(plan(f32, &[1, 48, 8, 64], 64, &strided, true), gemm(432));
        assert_eq!(plan(f32, &[1, 64, 2, 32], 64, &pads, true), gemm(576));
        // 4 x 128 = 512 positions: the direct kernels'.
        assert_eq!(plan(f32, &[1, 48, 8, 256], 64, &strided, true), None);
        // One position: the narrow product's.
        assert_eq!(plan(f32, &[1, 48, 1, 1], 64, &pads, true), None);
        // An unknown batch: each image is a product of its own.
        assert_eq!(plan(f32, &[-1, 64, 2, 32], 64, &pads, true), gemm(576));
        // Fewer than 16 channels in, 48 out.
        assert_eq!(plan(f32, &[1, 8, 2, 32], 64, &pads, true), None);
        assert_eq!(plan(f32, &[1, 64, 2, 32], 40, &pads, true), None);
        let grouped = [pads[0].clone(), ("group", Attr::Int(2))];
        assert_eq!(plan(f32, &[1, 48, 4, 32], 64, &grouped, true), None);
        assert_eq!(plan(f32, &[1, 48, 4, 32], 64, &pads, false), None);
        assert_eq!(plan(f32, &[1, 64, 2, 32], 64, &pads, false), None);
        let half = plan(DType::F16, &[1, 48, 4, 32], 64, &pads, true);
        assert_eq!(half, Some(("Conv", Some(vec![64, 48, 3, 3]))));
    }

    /// A ConvGemm case: input dims, output channels, kernel, strides, dilations, pads
    /// (begins then ends), whether it has a bias and a fused Relu.
    pub(crate) struct GemmCase {
        pub(crate) x: Vec<usize>,
        pub(crate) m: usize,
        pub(crate) kernel: Vec<usize>,
        pub(crate) strides: Vec<usize>,
        pub(crate) dilations: Vec<usize>,
        pub(crate) pads: Vec<usize>,
        pub(crate) bias: bool,
        pub(crate) relu: bool,
    }

    impl GemmCase {
        pub(crate) fn new(x: &[usize], m: usize, kernel: &[usize]) -> Self {
            let d = kernel.len();
            GemmCase {
                x: x.to_vec(),
                m,
                kernel: kernel.to_vec(),
                strides: vec![1; d],
                dilations: vec![1; d],
                pads: vec![0; 2 * d],
                bias: true,
                relu: false,
            }
        }

        pub(crate) fn out_dims(&self) -> Vec<usize> {
            let d = self.kernel.len();
            let mut out = vec![self.x[0], self.m];
            for i in 0..d {
                let span = (self.kernel[i] - 1) * self.dilations[i] + 1;
                out.push(
                    (self.x[2 + i] + self.pads[i] + self.pads[d + i] - span) / self.strides[i] + 1,
                );
            }
            out
        }

        pub(crate) fn attrs(&self) -> Vec<(&'static str, Attr)> {
            let ints = |v: &[usize]| Attr::Ints(v.iter().map(|&x| x as i64).collect());
            let mut a = vec![
                ("strides", ints(&self.strides)),
                ("dilations", ints(&self.dilations)),
                ("pads", ints(&self.pads)),
                ("kernel_shape", ints(&self.kernel)),
                ("n", Attr::Int(self.m as i64)),
            ];
            if self.relu {
                a.push((ACTIVATION_ATTR, Attr::Str("Relu".into())));
            }
            a
        }

        /// The float32 weight `[M, C, K...]` of values `w`.
        pub(crate) fn weight(&self, w: &[f32]) -> HostTensor {
            let mut dims = vec![self.m as i64, self.x[1] as i64];
            dims.extend(self.kernel.iter().map(|&k| k as i64));
            HostTensor {
                dtype: DType::F32,
                shape: dims,
                data: bytemuck::cast_slice(w).to_vec().into(),
            }
        }

        /// Runs `op` on seeded inputs with the weights as `pack` (lowering's) packs them,
        /// and checks the output's shape and its values against [`GemmCase::reference`]
        /// within `tolerance` of the largest output. The output starts poisoned, so every
        /// element must be written.
        pub(crate) fn check_packed(
            &self,
            op: &str,
            pack: fn(&HostTensor) -> Option<HostTensor>,
            tolerance: f32,
        ) {
            let (c, m) = (self.x[1], self.m);
            let taps: usize = self.kernel.iter().product();
            let x = values(self.x.iter().product(), 1);
            let w = values(m * c * taps, 2);
            let b = values(m, 3);
            let packed = pack(&self.weight(&w)).expect("packs");
            let mut inputs = vec![
                Tensor::from_vec(&self.x, &x),
                Tensor::from_vec(
                    &packed.shape.iter().map(|&d| d as usize).collect::<Vec<_>>(),
                    bytemuck::cast_slice::<u8, f32>(&packed.data),
                ),
            ];
            if self.bias {
                inputs.push(Tensor::from_vec(&[m], &b));
            }
            let (shape, got) = run_f32_with_shape(op, &self.attrs(), &inputs);
            assert_eq!(shape, self.out_dims(), "{op}: {:?} -> {m}", self.x);
            assert_close_to_scale(&got, &self.reference(&x, &w, &b), tolerance);
        }

        /// The definition in float64: every output the sum over channels and taps of the
        /// input inside the padded image times the weight, plus the bias, then the Relu.
        pub(crate) fn reference(&self, x: &[f32], w: &[f32], b: &[f32]) -> Vec<f32> {
            let d = self.kernel.len();
            let (c, m) = (self.x[1], self.m);
            let out = self.out_dims();
            let (ispat, ospat) = (&self.x[2..], &out[2..]);
            let (ilen, olen) = (
                ispat.iter().product::<usize>(),
                ospat.iter().product::<usize>(),
            );
            let taps = self.kernel.iter().product::<usize>();
            let unflatten = |mut i: usize, dims: &[usize]| {
                let mut v = vec![0; dims.len()];
                for k in (0..dims.len()).rev() {
                    v[k] = i % dims[k];
                    i /= dims[k];
                }
                v
            };
            let mut y = vec![0f32; out.iter().product()];
            for n in 0..self.x[0] {
                for o in 0..m {
                    for p in 0..olen {
                        let op = unflatten(p, ospat);
                        let mut sum = if self.bias { f64::from(b[o]) } else { 0.0 };
                        for t in 0..taps {
                            let tp = unflatten(t, &self.kernel);
                            let mut at = 0usize;
                            let mut inside = true;
                            for k in 0..d {
                                let i = (op[k] * self.strides[k] + tp[k] * self.dilations[k])
                                    as isize
                                    - self.pads[k] as isize;
                                inside &= (0..ispat[k] as isize).contains(&i);
                                at = at * ispat[k] + i.max(0) as usize;
                            }
                            if !inside {
                                continue;
                            }
                            for i in 0..c {
                                sum += f64::from(x[(n * c + i) * ilen + at])
                                    * f64::from(w[(o * c + i) * taps + t]);
                            }
                        }
                        if self.relu {
                            sum = sum.max(0.0);
                        }
                        y[(n * m + o) * olen + p] = sum as f32;
                    }
                }
            }
            y
        }
    }

    /// The windows ConvGemm is made for and the ones it must still compute right: 49
    /// positions of a 3x3 into 50 channels (a row tile and a panel cut short), stride 2
    /// under asymmetric pads with a batch of two, dilation 2, a 1x1 read in place and a
    /// strided one that is not, a 1-D and a 3-D window, no bias, a fused Relu, a
    /// product large enough to split across threads, and windows partly or wholly in
    /// the padding (the reduction cut to the kernel rows inside the image).
    fn gemm_cases() -> Vec<GemmCase> {
        let mut v = Vec::new();
        let mut c = GemmCase::new(&[1, 32, 7, 7], 50, &[3, 3]);
        c.pads = vec![1; 4];
        c.relu = true;
        v.push(c);
        let mut c = GemmCase::new(&[2, 16, 9, 8], 16, &[3, 3]);
        c.strides = vec![2, 2];
        c.pads = vec![1, 0, 0, 1];
        c.bias = false;
        v.push(c);
        let mut c = GemmCase::new(&[1, 24, 9, 9], 32, &[3, 3]);
        c.dilations = vec![2, 2];
        c.pads = vec![2; 4];
        v.push(c);
        v.push(GemmCase::new(&[1, 64, 7, 7], 96, &[1, 1]));
        let mut c = GemmCase::new(&[2, 64, 7, 7], 96, &[1, 1]);
        c.strides = vec![2, 2];
        v.push(c);
        let mut c = GemmCase::new(&[1, 40, 20], 48, &[5]);
        c.pads = vec![2, 2];
        v.push(c);
        let mut c = GemmCase::new(&[1, 16, 3, 4, 4], 16, &[3, 3, 3]);
        c.pads = vec![1; 6];
        v.push(c);
        let mut c = GemmCase::new(&[1, 128, 8, 8], 256, &[3, 3]);
        c.pads = vec![1; 4];
        c.relu = true;
        v.push(c);
        // Two rows with a row of padding each side (every window a third zeros: the
        // kernel rows reduced over are cut), and rows wholly in the padding (the bias
        // alone), with a batch of two.
        let mut c = GemmCase::new(&[1, 64, 2, 32], 64, &[3, 3]);
        c.pads = vec![1; 4];
        v.push(c);
        let mut c = GemmCase::new(&[2, 16, 2, 6], 48, &[3, 3]);
        c.pads = vec![3, 1, 3, 1];
        v.push(c);
        v
    }

    /// ConvGemm on the weights as lowering packs them computes the definition; its output
    /// starts poisoned, so every element must be written.
    #[test]
    fn packed_convolutions_match_a_float64_reference() {
        for case in gemm_cases() {
            // A float32 sum of 1,152 terms in order: its rounding, some 1e-6 of the
            // largest output; a wrong tap, channel or position is off by whole terms.
            case.check_packed(CONV_GEMM, super::pack_conv_gemm, 4e-6);
        }
    }

    /// An element's sum does not depend on how the column panels are split across tasks:
    /// one, two and three blocks give the same bits.
    #[test]
    fn a_panel_split_changes_no_bits() {
        use crate::ops::linalg::sgemm::pack_b;
        let (rows, k, m) = (13, 70, 150);
        let a = values(rows * k, 1);
        let w = values(k * m, 2);
        let bias = values(m, 3);
        let bp = pack_b(&w, k, m);
        let run = |tasks| {
            let mut yt = vec![f32::NAN; rows * m];
            let a = super::Operand::strided(&a, k, 1, rows, k);
            super::panels_product(rows, (k, 0..k), m, a, &bp, Some(&bias), &mut yt, tasks);
            yt.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let one = run(1);
        assert!(one.iter().all(|&b| !f32::from_bits(b).is_nan()));
        assert_eq!(run(2), one);
        assert_eq!(run(3), one);
    }

    /// A ConvGemm whose packed weights do not fit its input, kernel and `n`, or of a
    /// group other than 1, is an error naming what it wants.
    #[test]
    fn misfit_packed_weights_are_refused() {
        use crate::ops::testing::try_run;
        let x = Tensor::from_vec(&[1, 16, 4, 4], &values(256, 1));
        let attrs = |n: i64| {
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("n", Attr::Int(n)),
                ("pads", Attr::Ints(vec![1; 4])),
            ]
        };
        let packed = |k: usize| Tensor::from_vec(&[1, k, 48], &values(k * 48, 2));
        let ok = try_run(CONV_GEMM, &attrs(20), &[x.clone(), packed(144)], 1);
        assert_eq!(ok.map(|y| y[0].shape.clone()).unwrap(), [1, 20, 4, 4]);
        let err = try_run(CONV_GEMM, &attrs(20), &[x.clone(), packed(140)], 1).unwrap_err();
        assert!(err.to_string().contains("[1, 144, 48]"), "{err}");
        let err = try_run(CONV_GEMM, &attrs(60), &[x.clone(), packed(144)], 1).unwrap_err();
        assert!(err.to_string().contains("[2, 144, 48]"), "{err}");
        let mut grouped = attrs(20);
        grouped.push(("group", Attr::Int(2)));
        let err = try_run(CONV_GEMM, &grouped, &[x, packed(144)], 1).unwrap_err();
        assert!(err.to_string().contains("group"), "{err}");
    }
}
