//! `ConvWinograd1D`: a float32 one-dimensional convolution of stride 1 with a 3- or
//! 5-tap kernel by Winograd's minimal filtering along its one axis, F(4, 3) and F(2, 5)
//! on the six points 0, ±1, ±2 and ∞ (Lavin and Gray's; conv_winograd.rs has the 2-D
//! F(4x4, 3x3) on the same points).
//!
//! Why: a 1-D convolution with many channels (Magika's 256 -> 512 channel, 5-tap layer
//! over 508 positions: 80% of the model; a speech model's Conv1d front end) is a product
//! of `r` taps times C channels per output and channel, and the direct and GEMM kernels
//! run those at the FMA units' peak (ConvGemm and the blocked kernel: 107-110 GFLOP/s
//! on this machine's Zen 4 core, whose peak is 117). Past the peak only fewer multiplies
//! help. F(m, r) computes m outputs of an `r`-tap filter from a window of `a = m + r - 1`
//! inputs with `a` products instead of `m r`: F(2, 5) 6 instead of 10, F(4, 3) 6 instead
//! of 12.
//!
//! - Lowering transforms each (output channel, input channel) filter `g` into `u = G g`
//!   (`a` values, in float64, rounded once) and packs, for each point ξ, `U_ξᵀ [C, M]`
//!   into the sgemm's column panels ([`pack`]), so the product below streams its weights
//!   as a packed `MatMul` does.
//! - Per image, the input is turned channels-last and zero-padded (`[L_p, C]`), so a tile
//!   of `a` positions is `a` rows of C contiguous floats; its transform `V = Bᵀ d` is six
//!   sums of those rows, vectorized over the channels (`conv_winograd::bt4`).
//! - For each ξ, `M_ξ [tiles, M] = V_ξ [tiles, C] · U_ξᵀ`, rt2's packed sgemm.
//! - Each tile's `m` outputs are `Aᵀ M` plus the bias, channels-last; the result is
//!   turned back to `[M, L']` and the fused activation applied.
//!
//! The tiles are taken in blocks whose transformed inputs and products fit in L2
//! ([`BLOCK_BYTES`]); with several threads, tasks claim whole blocks from a counter
//! ([`run`] says why). Each output is a fixed sequence of operations whatever the block
//! or thread split, so every executor gets the same bits; they are not the direct
//! kernels' bits. The transforms scale by up to 5 (Bᵀ), 8 (F(4, 3)'s Aᵀ) and 1/24 (G) and
//! lose bits: against the float64 definition the error is a few 1e-6 of the output's
//! largest magnitude (the tests bound it), about that of the 2-D F(4x4, 3x3), which
//! transforms along two axes.

use super::conv::{PARALLEL_ELEMS, bias_values};
use super::conv_direct::SharedOut;
use super::conv_packed::{Operand, panels_product};
use super::conv_winograd::{at4, bt4};
use super::epilogue::Epilogue;
use super::scratch::with_scratch;
use super::window::Window;
use crate::ops::TensorRef;
use crate::ops::linalg::sgemm::{PACK_WIDTH, pack_b, packed_len};
use crate::ops::shape::movement::transpose_f32;
use crate::ops::{Attr, DType, HostTensor, InferCtx, OpError, Prepack, TensorMeta, TensorMut};

/// The op lowering puts in place of such a Conv (rt2's own, not an ONNX or GE op): X
/// `[N, C, D...]` whose spatial dims are 1 but the convolved one, the packed `U`
/// `[6, ceil(M / PACK_WIDTH), C, PACK_WIDTH]` (for each point, `U_ξᵀ [C, M]` in column
/// panels), optional B `[M]`; the Conv's attributes (stride and dilation 1, group 1)
/// plus `n` (M) and `kernel_shape`, and its fused activation -> Y `[N, M, D'...]`.
pub const CONV_WINOGRAD_1D: &str = "ConvWinograd1D";

/// The window's positions, `a`: the points 0, 1, -1, 2, -2 and ∞.
pub(super) const POINTS: usize = 6;

/// The finite points, in the order of `Bᵀ`'s rows ([`bt4`]) and `Aᵀ`'s columns.
const FINITE: [f64; POINTS - 1] = [0.0, 1.0, -1.0, 2.0, -2.0];

/// L2 bytes a block's transformed inputs and products may take (this machine's L2 is
/// 1 MB per core).
const BLOCK_BYTES: usize = 1 << 20;

/// Fewest input channels lowering hands the kernel: fewer leave the products too short
/// for the transforms to pay for.
const MIN_INPUT_CHANNELS: i64 = 16;
/// Fewest output channels: one column panel of the packed product.
const MIN_CHANNELS: i64 = 48;
/// Fewest tiles per image: each of the six products then has at least this many rows.
const MIN_TILES: i64 = 16;

/// Outputs per tile for an `r`-tap kernel: F(4, 3) and F(2, 5), both on six points.
fn outputs_per_tile(r: usize) -> Option<usize> {
    match r {
        3 => Some(4),
        5 => Some(2),
        _ => None,
    }
}

/// The convolved axis of a window over spatial `dims` (right-aligned in three slots, as
/// [`Window`] holds them) with `kernel`: the one slot whose kernel is longer than 1, every
/// other slot's input, output and kernel 1.
fn axis(input: &[usize; 3], output: &[usize; 3], kernel: &[usize; 3]) -> Option<usize> {
    let d = (0..3).find(|&d| kernel[d] > 1)?;
    (0..3)
        .filter(|&e| e != d)
        .all(|e| input[e] == 1 && output[e] == 1 && kernel[e] == 1)
        .then_some(d)
}

/// `G`'s row for point `j` of an `r`-tap kernel: `p_j^k / Π_{l ≠ j} (p_j - p_l)` over the
/// finite points, and for ∞ the last tap alone.
fn g_row(j: usize, r: usize) -> Vec<f64> {
    if j == POINTS - 1 {
        return (0..r).map(|k| if k == r - 1 { 1.0 } else { 0.0 }).collect();
    }
    let p = FINITE[j];
    let norm: f64 = (0..FINITE.len())
        .filter(|&l| l != j)
        .map(|l| p - FINITE[l])
        .product();
    (0..r).map(|k| p.powi(k as i32) / norm).collect()
}

/// Conv's prepack hook for this kernel: a float32 Conv of group 1 by constant weights
/// whose window is 1-D (one spatial dim, or all but one of size 1), of 3 or 5 taps,
/// stride and dilation 1, with at least [`MIN_INPUT_CHANNELS`] input and
/// [`MIN_CHANNELS`] output channels and [`MIN_TILES`] tiles per image. The batch may be
/// unknown.
pub(super) fn prepack(ctx: &InferCtx, out: &TensorMeta) -> Option<Prepack> {
    let (x, w) = super::conv_packed::float_conv_by_constant(ctx)?;
    let (xs, ws, os) = (
        x.shape.as_deref()?,
        w.shape.as_deref()?,
        out.shape.as_deref()?,
    );
    if !(3..=5).contains(&xs.len()) || ws.len() != xs.len() || os.len() != xs.len() {
        return None;
    }
    let dims = |v: &[i64]| {
        v.iter()
            .map(|&d| usize::try_from(d).ok().filter(|&d| d > 0))
            .collect::<Option<Vec<_>>>()
    };
    let (input, kernel, output) = (dims(&xs[2..])?, dims(&ws[2..])?, dims(&os[2..])?);
    if ws[1] != xs[1] || ws[1] < MIN_INPUT_CHANNELS || ws[0] < MIN_CHANNELS {
        return None;
    }
    if ctx
        .attr_ints("kernel_shape")
        .ok()?
        .is_some_and(|k| k != &ws[2..])
    {
        return None;
    }
    let win = Window::new(ctx, &input, &kernel, &output).ok()?;
    let line = Line::of(&win, ws[1] as usize, ws[0] as usize)?;
    (line.tiles() as i64 >= MIN_TILES).then(|| Prepack {
        op: CONV_WINOGRAD_1D,
        input: 1,
        attrs: vec![
            ("n", Attr::Int(ws[0])),
            ("kernel_shape", Attr::Ints(ws[2..].to_vec())),
        ],
        pack,
    })
}

/// `U` packed, from a float32 `[M, C, K...]` weight whose one kernel dim longer than 1
/// has 3 or 5 taps: for each point ξ, `U_ξᵀ [C, M]` (`u[ξ][c][o] = Σ_k G[ξ][k] w[o][c][k]`,
/// in float64, rounded once) packed into column panels, the six one after another.
pub(super) fn pack(w: &HostTensor) -> Option<HostTensor> {
    let (dims, floats) = super::conv_packed::conv_weight(w)?;
    let (m, c) = (dims[0], dims[1]);
    let r = dims[2..].iter().product::<usize>();
    if dims[2..].iter().filter(|&&k| k > 1).count() != 1 {
        return None;
    }
    outputs_per_tile(r)?;
    let mut data = Vec::with_capacity(POINTS * packed_len(c, m));
    let mut ut = vec![0.0f32; c * m];
    for xi in 0..POINTS {
        let g = g_row(xi, r);
        for (o, filter) in floats.chunks_exact(c * r).enumerate() {
            for (i, taps) in filter.chunks_exact(r).enumerate() {
                let u: f64 = taps.iter().zip(&g).map(|(&v, &g)| f64::from(v) * g).sum();
                ut[i * m + o] = u as f32;
            }
        }
        data.extend(pack_b(&ut, c, m));
    }
    Some(HostTensor {
        dtype: DType::F32,
        shape: vec![
            POINTS as i64,
            m.div_ceil(PACK_WIDTH) as i64,
            c as i64,
            PACK_WIDTH as i64,
        ],
        data: bytemuck::cast_slice(&data).to_vec().into(),
    })
}

/// The shape of one image's convolution ([`Line::of`]).
struct Line {
    /// Input channels, output channels.
    c: usize,
    m: usize,
    /// Input length, zeros before it, output length.
    len: usize,
    pad: usize,
    out: usize,
    /// Taps, outputs per tile.
    r: usize,
    per_tile: usize,
}

impl Line {
    /// The line of a window the kernel computes (`c` channels into `m`): 3 or 5 taps
    /// along one axis, every other axis 1 ([`axis`]), stride and dilation 1, padding
    /// that is not negative and makes the output `r - 1` shorter than the padded input.
    /// Lowering's choice and the op's check both ask this.
    fn of(win: &Window, c: usize, m: usize) -> Option<Line> {
        let d = axis(&win.input, &win.output, &win.kernel)?;
        let r = win.kernel[d];
        let (pb, pe) = (win.pad_begin[d], win.pad_end[d]);
        let fits = win.stride == [1; 3]
            && win.dilation == [1; 3]
            && pb >= 0
            && pe >= 0
            && win.input[d] as isize + pb + pe == (win.output[d] + r - 1) as isize;
        fits.then_some(())?;
        Some(Line {
            c,
            m,
            len: win.input[d],
            pad: pb as usize,
            out: win.output[d],
            r,
            per_tile: outputs_per_tile(r)?,
        })
    }

    fn tiles(&self) -> usize {
        self.out.div_ceil(self.per_tile)
    }

    /// Rows of the padded channels-last input the tiles read: the last tile's window
    /// ends `r - 1` past its last output.
    fn padded(&self) -> usize {
        self.tiles() * self.per_tile + self.r - 1
    }

    /// Tiles per block: as many as keep the block's transformed inputs and products
    /// (`6 (C + M)` floats a tile) within [`BLOCK_BYTES`], a multiple of the product's
    /// row tile of 8, at least 8.
    fn block(&self) -> usize {
        let per = POINTS * (self.c + self.m) * 4;
        (BLOCK_BYTES / per / 8 * 8).clamp(8, self.tiles().next_multiple_of(8))
    }

    /// Floats of scratch one image takes with blocks of `tb` tiles and `tasks` tasks.
    fn scratch_len(&self, tb: usize, tasks: usize) -> usize {
        self.padded() * self.c + tasks * POINTS * tb * (self.c + self.m) + self.out * self.m
    }
}

/// ConvWinograd1D's compute, per image ([the module](self)): nothing is allocated; the
/// image's working memory is this thread's scratch.
pub fn conv_winograd_1d(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (x, u) = (&inputs[0], &inputs[1]);
    let y_shape = outputs[0].shape;
    let (m, kernel, win) = super::conv_packed::packed_conv_window(ctx, x, y_shape)?;
    let c = x.shape[1];
    let Some(line) = Line::of(&win, c, m) else {
        return Err(ctx.compute_error(format!(
            "computes a 3- or 5-tap window of stride and dilation 1 along one axis, the \
             others 1; not input {:?} to output {y_shape:?} with kernel {kernel:?}",
            x.shape
        )));
    };
    let panels = m.div_ceil(PACK_WIDTH);
    if u.shape != [POINTS, panels, c, PACK_WIDTH] || u.len() != POINTS * packed_len(c, m) {
        return Err(ctx.input_error(
            1,
            format!(
                "is {:?}; for {c} channels into {m} the packed weights are \
                 [{POINTS}, {panels}, {c}, {PACK_WIDTH}]",
                u.shape
            ),
        ));
    }
    let (xv, uv) = (x.slice::<f32>()?, u.slice::<f32>()?);
    let bias = bias_values::<f32>(ctx, inputs.get(2), m)?;
    let epilogue = Epilogue::read(ctx)?;
    let y = outputs[0].slice_mut::<f32>()?;
    if y.is_empty() {
        return Ok(());
    }
    let parallel = y.len() * c * line.r >= PARALLEL_ELEMS;
    let tasks = super::gemm::tasks_for(line.tiles() * POINTS * c * m, parallel);
    // With several tasks, blocks small enough that there are four per task to claim.
    let tb = match tasks {
        1 => line.block(),
        _ => line
            .block()
            .min(line.tiles().div_ceil(4 * tasks).next_multiple_of(8)),
    };
    for (n, out) in y.chunks_exact_mut(m * line.out).enumerate() {
        let xn = &xv[n * c * line.len..][..c * line.len];
        with_scratch(line.scratch_len(tb, tasks), |scratch: &mut [f32]| {
            run(&line, xn, uv, bias, (tb, tasks), scratch, out);
        });
        if let Some(e) = epilogue {
            e.apply_f32(out);
        }
    }
    Ok(())
}

/// One image: `out` (`[M, L']`) from `xn` (`[C, L]`) and the packed `U`, in blocks of
/// `tb` tiles, by `tasks` tasks, in `scratch` ([`Line::scratch_len`]).
///
/// Why the tasks claim blocks from a counter rather than taking fixed shares: a block is
/// the whole of its tiles' work (transforms and six products), so the threads meet once
/// per image; and on a machine whose second core is at times much slower (a virtual CPU
/// the host shares), fixed halves made the image wait for the slow half (Magika with two
/// threads barely faster than with one), where claimed blocks go to whichever thread is
/// free. Each task has its own block buffers; every output is the same operations
/// whichever task computes it.
fn run(
    line: &Line,
    xn: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    (tb, tasks): (usize, usize),
    scratch: &mut [f32],
    out: &mut [f32],
) {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let Line { c, m, len, pad, .. } = *line;
    let tiles = line.tiles();
    let (xt, rest) = scratch.split_at_mut(line.padded() * c);
    let per_task = POINTS * tb * (c + m);
    let (bufs, rest) = rest.split_at_mut(tasks * per_task);
    let yt = &mut rest[..line.out * m];
    // The zeros of the padding and of the last tile's rounding, then the image.
    xt[..pad * c].fill(0.0);
    xt[(pad + len) * c..].fill(0.0);
    transpose_f32(xn, c, len, &mut xt[pad * c..][..len * c]);
    let xt = &*xt;
    let blocks = tiles.div_ceil(tb);
    let next = AtomicUsize::new(0);
    let (yt_at, bufs_at) = (SharedOut(yt.as_mut_ptr()), SharedOut(bufs.as_mut_ptr()));
    // The pointers go to the tasks inside their `Sync` wrappers, not as the raw fields
    // a closure would otherwise capture.
    let at = |p: &SharedOut, offset: usize| p.0.wrapping_add(offset);
    let task = |t: usize| {
        // SAFETY: task t alone uses buffer set t (`tasks` sets of `per_task` floats in
        // `bufs`).
        let buf = unsafe { std::slice::from_raw_parts_mut(at(&bufs_at, t * per_task), per_task) };
        let (v, mm) = buf.split_at_mut(POINTS * tb * c);
        loop {
            let b = next.fetch_add(1, Relaxed);
            if b >= blocks {
                return;
            }
            let (t0, nt) = (b * tb, tb.min(tiles - b * tb));
            let first = t0 * line.per_tile;
            let end = ((t0 + nt) * line.per_tile).min(line.out);
            // SAFETY: each block is claimed once and its tiles' rows of `yt`, `first..end`
            // (inside `line.out` rows of `m`), are no other block's.
            let rows =
                unsafe { std::slice::from_raw_parts_mut(at(&yt_at, first * m), (end - first) * m) };
            block(line, xt, (t0, nt, tb), (v, mm), u, bias, rows);
        }
    };
    if tasks > 1 {
        use rayon::prelude::*;
        (0..tasks).into_par_iter().for_each(task);
    } else {
        task(0);
    }
    transpose_f32(yt, line.out, m, out);
}

/// Block `(t0, nt)` of tiles (buffers sized for `tb`): its six transformed rows per tile
/// into `v` (`V_ξ [nt, C]`), the six products into `mm` (`M_ξ [nt, M]`), and its tiles'
/// outputs, channels-last with the bias, into `rows` (from tile `t0`'s first output).
fn block(
    line: &Line,
    xt: &[f32],
    (t0, nt, tb): (usize, usize, usize),
    (v, mm): (&mut [f32], &mut [f32]),
    u: &[f32],
    bias: Option<&[f32]>,
    rows: &mut [f32],
) {
    let (c, m, per_tile) = (line.c, line.m, line.per_tile);
    // V_ξ [nt, C]: each tile's six rows of channels, transformed lane by lane.
    for t in 0..nt {
        let d: [&[f32]; POINTS] =
            std::array::from_fn(|j| &xt[((t0 + t) * per_tile + j) * c..][..c]);
        for i in 0..c {
            let vi = bt4(std::array::from_fn(|j| d[j][i]));
            for (xi, &value) in vi.iter().enumerate() {
                v[(xi * tb + t) * c + i] = value;
            }
        }
    }
    let u_len = packed_len(c, m);
    for xi in 0..POINTS {
        let a = Operand::strided(&v[xi * tb * c..], c, 1, nt, c);
        let mxi = &mut mm[xi * tb * m..][..nt * m];
        panels_product(nt, (c, 0..c), m, a, &u[xi * u_len..][..u_len], None, mxi, 1);
    }
    // Each tile's outputs, the bias added once at the end.
    for t in 0..nt {
        let first = t * per_tile;
        let count = per_tile.min(rows.len() / m - first);
        let prods: [&[f32]; POINTS] = std::array::from_fn(|xi| &mm[(xi * tb + t) * m..][..m]);
        let out = &mut rows[first * m..][..count * m];
        for o in 0..m {
            let p: [f32; POINTS] = std::array::from_fn(|xi| prods[xi][o]);
            let b = bias.map_or(0.0, |b| b[o]);
            let ys: [f32; 4] = if per_tile == 4 {
                at4(p)
            } else {
                let [y0, y1] = at2_5(p);
                [y0, y1, 0.0, 0.0]
            };
            for (i, &y) in ys[..count].iter().enumerate() {
                out[i * m + o] = y + b;
            }
        }
    }
}

/// F(2, 5)'s `Aᵀ m` on the points 0, ±1, ±2 and ∞: `Aᵀ = [[1, 1, 1, 1, 1, 0],
/// [0, 1, -1, 2, -2, 1]]`.
fn at2_5([m0, m1, m2, m3, m4, m5]: [f32; 6]) -> [f32; 2] {
    [m0 + (m1 + m2) + (m3 + m4), (m1 - m2) + 2.0 * (m3 - m4) + m5]
}

#[cfg(test)]
mod tests {
    use super::super::conv_packed::tests::GemmCase;
    use super::{CONV_WINOGRAD_1D, Line, POINTS, g_row, pack, run};
    use crate::ops::testing::seeded as values;
    use crate::ops::{Attr, DType, HostTensor, Tensor};

    /// The algorithms themselves, in float64: `Aᵀ [(G g) ⊙ (Bᵀ d)]` is the correlation of
    /// every window `d` with every filter `g` (F(4, 3) and F(2, 5)).
    #[test]
    fn the_transforms_compute_the_correlation() {
        let bt: [[f64; 6]; 6] = [
            [4.0, 0.0, -5.0, 0.0, 1.0, 0.0],
            [0.0, -4.0, -4.0, 1.0, 1.0, 0.0],
            [0.0, 4.0, -4.0, -1.0, 1.0, 0.0],
            [0.0, -2.0, -1.0, 2.0, 1.0, 0.0],
            [0.0, 2.0, -1.0, -2.0, 1.0, 0.0],
            [0.0, 4.0, 0.0, -5.0, 0.0, 1.0],
        ];
        // Aᵀ's row i: the finite points to the power i, and ∞ in the last row.
        let at = |i: usize, m: usize| -> [f64; 6] {
            std::array::from_fn(|j| match j {
                5 => f64::from(u8::from(i == m - 1)),
                _ => super::FINITE[j].powi(i as i32),
            })
        };
        for (r, m) in [(3, 4), (5, 2)] {
            let g: Vec<f64> = (0..r).map(|k| 0.3 * k as f64 - 0.7).collect();
            let d: Vec<f64> = (0..6).map(|j| (j * j) as f64 * 0.1 - 0.5).collect();
            let u: Vec<f64> = (0..POINTS)
                .map(|j| g_row(j, r).iter().zip(&g).map(|(a, b)| a * b).sum())
                .collect();
            let v: Vec<f64> = (0..6)
                .map(|j| (0..6).map(|k| bt[j][k] * d[k]).sum())
                .collect();
            for i in 0..m {
                let row = at(i, m);
                let got: f64 = (0..6).map(|j| row[j] * u[j] * v[j]).sum();
                let want: f64 = (0..r).map(|k| g[k] * d[i + k]).sum();
                assert!((got - want).abs() < 1e-12, "F({m}, {r}) output {i}");
            }
        }
    }

    /// The 1-D windows the kernel is made for and the edges it must compute right: Magika's
    /// 5-tap layer as `[N, C, H, 1]` with a `[5, 1]` kernel (smaller), a 3-tap Conv1d under
    /// asymmetric pads with a batch of two, a length whose last tile is part rounding,
    /// no bias, a fused Relu, and 50 output channels (a panel cut short).
    fn cases() -> Vec<GemmCase> {
        let mut v = Vec::new();
        let mut c = GemmCase::new(&[1, 24, 70, 1], 50, &[5, 1]);
        c.relu = true;
        v.push(c);
        let mut c = GemmCase::new(&[2, 16, 45], 48, &[3]);
        c.pads = vec![2, 1];
        c.bias = false;
        v.push(c);
        let mut c = GemmCase::new(&[1, 32, 1, 61], 64, &[1, 5]);
        c.pads = vec![0, 2, 0, 2];
        v.push(c);
        let mut c = GemmCase::new(&[1, 20, 37], 96, &[5]);
        c.pads = vec![0, 3];
        v.push(c);
        v
    }

    /// ConvWinograd1D on the weights as lowering packs them computes the definition; its
    /// output starts poisoned, so every element must be written.
    #[test]
    fn winograd_1d_matches_a_float64_reference() {
        for case in cases() {
            // The transforms' rounding: a few 1e-6 of the largest output. A wrong tap,
            // channel, tile or point is off by whole terms.
            case.check_packed(CONV_WINOGRAD_1D, pack, 1e-5);
        }
    }

    /// Blocks of any size, claimed by one task or several, give the same bits: each output
    /// is the same sequence of operations.
    #[test]
    fn blocks_and_splits_change_no_bits() {
        let line = Line {
            c: 20,
            m: 100,
            len: 83,
            pad: 2,
            out: 83,
            r: 5,
            per_tile: 2,
        };
        let x = values(line.c * line.len, 1);
        let mut w = GemmCase::new(&[1, line.c, line.len], line.m, &[5]);
        w.pads = vec![2, 2];
        let u = pack(&w.weight(&values(line.m * line.c * 5, 2))).unwrap();
        let u: &[f32] = bytemuck::cast_slice(&u.data);
        let bias = values(line.m, 3);
        let go = |tb: usize, tasks: usize| {
            let mut scratch = vec![f32::NAN; line.scratch_len(tb, tasks)];
            let mut out = vec![f32::NAN; line.m * line.out];
            run(
                &line,
                &x,
                u,
                Some(&bias),
                (tb, tasks),
                &mut scratch,
                &mut out,
            );
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let whole = go(line.tiles().next_multiple_of(8), 1);
        assert!(whole.iter().all(|&b| !f32::from_bits(b).is_nan()));
        assert_eq!(go(8, 1), whole);
        assert_eq!(go(16, 2), whole);
        assert_eq!(go(3, 3), whole);
    }

    /// Lowering's hook (Conv's, as registered) takes this kernel for float32 1-D windows of
    /// 3 and 5 taps, stride and dilation 1, by constant weights, with enough channels and
    /// tiles, decided from the shapes alone (an unknown batch included); other windows
    /// keep what they had.
    #[test]
    fn conv_prepacks_one_dimensional_windows() {
        use super::super::conv_packed::{CONV_GEMM, tests::conv_prepack};
        let plan = |x: &[i64], m: i64, kernel: &[i64], attrs: &[(&str, Attr)]| {
            let mut ws = vec![m, x[1]];
            ws.extend(kernel);
            let count = ws.iter().product::<i64>() as usize;
            let w = HostTensor {
                dtype: DType::F32,
                shape: ws,
                data: vec![0; count * 4].into(),
            };
            conv_prepack(x, &w, attrs, true)
        };
        let u = |m: i64, c: i64| Some((CONV_WINOGRAD_1D, Some(vec![6, (m + 47) / 48, c, 48])));
        let pads = |p: i64| ("pads", Attr::Ints(vec![p, p]));
        // Magika's layer, as [N, C, H, 1] by a [5, 1] kernel; a Conv1d of 3 taps.
        assert_eq!(plan(&[1, 256, 512, 1], 512, &[5, 1], &[]), u(512, 256));
        assert_eq!(plan(&[-1, 64, 200], 64, &[3], &[pads(1)]), u(64, 64));
        // Strided or dilated; 7 taps; a 2-D window; too few channels or tiles.
        let op = |x: &[i64], m, k: &[i64], a: &[(&str, Attr)]| plan(x, m, k, a).map(|p| p.0);
        let strided = [("strides", Attr::Ints(vec![2]))];
        let dilated = [("dilations", Attr::Ints(vec![2]))];
        for (x, m, k, a) in [
            (&[1, 64, 200][..], 64, &[3][..], &strided[..]),
            (&[1, 64, 200], 64, &[3], &dilated),
            (&[1, 64, 200], 64, &[7], &[]),
            (&[1, 64, 200, 2], 64, &[5, 1], &[]),
            (&[1, 8, 200], 64, &[5], &[]),
            (&[1, 64, 200], 32, &[5], &[]),
        ] {
            assert_ne!(op(x, m, k, a), Some(CONV_WINOGRAD_1D), "{x:?} {m} {k:?}");
        }
        // 30 outputs: 15 tiles of two, fewer than 16; ConvGemm's.
        assert_eq!(
            plan(&[1, 64, 34], 64, &[5], &[]).map(|p| p.0),
            Some(CONV_GEMM)
        );
    }

    /// A ConvWinograd1D whose packed weights or window do not fit is an error naming what
    /// it wants.
    #[test]
    fn misfit_weights_and_windows_are_refused() {
        use crate::ops::testing::try_run;
        let x = Tensor::from_vec(&[1, 16, 40], &values(640, 1));
        let attrs = |k: i64, stride: i64| {
            vec![
                ("kernel_shape", Attr::Ints(vec![k])),
                ("n", Attr::Int(48)),
                ("strides", Attr::Ints(vec![stride])),
            ]
        };
        let packed = |c: usize| Tensor::from_vec(&[6, 1, c, 48], &values(6 * c * 48, 2));
        let ok = try_run(CONV_WINOGRAD_1D, &attrs(5, 1), &[x.clone(), packed(16)], 1);
        assert_eq!(ok.map(|y| y[0].shape.clone()).unwrap(), [1, 48, 36]);
        let err = try_run(CONV_WINOGRAD_1D, &attrs(5, 1), &[x.clone(), packed(12)], 1);
        assert!(err.unwrap_err().to_string().contains("[6, 1, 16, 48]"));
        for (k, stride) in [(5, 2), (7, 1)] {
            let err = try_run(
                CONV_WINOGRAD_1D,
                &attrs(k, stride),
                &[x.clone(), packed(16)],
                1,
            );
            let err = err.unwrap_err().to_string();
            assert!(err.contains("3- or 5-tap"), "{err}");
        }
    }
}
