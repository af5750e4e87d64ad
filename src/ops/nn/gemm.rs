//! General matrix multiplication for the op library, and the two ops that are nothing
//! else: MatMul (NumPy's batched, broadcasting matmul) and Gemm.
//!
//! Every product goes through `linalg::sgemm::sgemm` (float32: rt2's micro-kernels where
//! B and C are row-major, matrixmultiply elsewhere) or matrixmultiply's `dgemm`; both
//! take arbitrary row and column strides, so a transposed operand is read in place
//! rather than copied.
//! float16/bfloat16 operands are widened to f32 once per launch (`scalar::widened`) and
//! the result rounded once per element, as ONNX Runtime does and as Ascend's Cube unit
//! accumulates. Large products split the rows of C across rayon's
//! threads; each part is an independent `sgemm` on a row block, so no synchronization is
//! needed beyond the split.

use rayon::prelude::*;

use super::epilogue::Epilogue;
use super::scalar::{Scalar, widened};
use crate::dispatch;
use crate::ops::{Attr, DType, HostTensor, InferCtx, OpError, Prepack, TensorMut, TensorRef};

/// Multiply-adds below which a product runs on the calling thread: splitting smaller
/// work costs more in scheduling than it saves.
const PARALLEL_WORK: usize = 1 << 18;

/// A strided matrix operand: element (i, j) is `data[i * rs + j * cs]`.
#[derive(Debug, Clone, Copy)]
pub struct Mat<'a, T> {
    pub data: &'a [T],
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a, T> Mat<'a, T> {
    /// A row-major `rows` x `cols` matrix.
    pub fn row_major(data: &'a [T], rows: usize, cols: usize) -> Self {
        Mat {
            data,
            rows,
            cols,
            rs: cols,
            cs: 1,
        }
    }
    /// The same elements read as the transpose.
    pub fn t(self) -> Self {
        Mat {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
        }
    }
    /// The same matrix with its elements reinterpreted as `U` (of the same size: the
    /// caller has matched `T::DTYPE`).
    fn cast<U: bytemuck::Pod>(self) -> Mat<'a, U>
    where
        T: bytemuck::Pod,
    {
        Mat {
            data: bytemuck::cast_slice(self.data),
            rows: self.rows,
            cols: self.cols,
            rs: self.rs,
            cs: self.cs,
        }
    }
    /// Rows `r0..r1`.
    fn row_block(self, r0: usize, r1: usize) -> Self {
        Mat {
            data: if r1 > r0 {
                &self.data[r0 * self.rs..]
            } else {
                &[]
            },
            rows: r1 - r0,
            ..self
        }
    }
    /// Whether every element lies inside `data` (what makes the raw-pointer call sound).
    /// The offset of the last element is computed without wrapping: strides so large
    /// that it would wrap are out of bounds.
    fn in_bounds(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1)
                .checked_mul(self.rs)
                .zip((self.cols - 1).checked_mul(self.cs))
                .and_then(|(r, c)| r.checked_add(c))
                .is_some_and(|last| last < self.data.len())
    }
}

/// `c = alpha * a . b + beta * c` on the `a.rows` x `b.cols` block of `c` whose rows are
/// `ldc` elements apart. With `beta == 0` the old contents of `c` are ignored (NaN too).
/// Large products run in parallel over row blocks.
///
/// Panics if the operands do not fit their slices, or if C's rows overlap (`ldc < n`):
/// callers size them from validated shapes, so that is an internal error, and memory
/// safety depends on it.
pub fn gemm<T: Scalar>(alpha: f32, a: Mat<T>, b: Mat<T>, beta: f32, c: &mut [T], ldc: usize) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(a.cols == b.rows, "gemm: inner dims {k} and {}", b.rows);
    assert!(
        a.in_bounds() && b.in_bounds(),
        "gemm: operand out of bounds"
    );
    // Rows `ldc` apart must not overlap: the product wants C's elements distinct, and
    // `by_row_blocks` hands each thread `ldc`-long rows of C, which a row of n > ldc
    // elements would run past into another thread's block.
    assert!(
        m == 0 || n == 0 || ldc >= n,
        "gemm: C's rows of {n} overlap {ldc} apart"
    );
    assert!(
        m == 0
            || n == 0
            || (m - 1)
                .checked_mul(ldc)
                .and_then(|r| r.checked_add(n))
                .is_some_and(|end| end <= c.len()),
        "gemm: C too small"
    );
    if m == 0 || n == 0 {
        return;
    }
    by_row_blocks((m, k, n), c, ldc, |r0, r1, block| {
        gemm_serial(alpha, a.row_block(r0, r1), b, beta, block, ldc)
    });
}

/// Runs `f(r0, r1, block)` over the rows of an m x k x n product whose C (`ldc` apart)
/// is `c`: on the calling thread with every row when the product is small, else over
/// one block of rows per thread, in parallel (`block` starts at row `r0`). Each block
/// is an independent product, so no synchronization is needed beyond the split.
fn by_row_blocks<T: Send>(
    (m, k, n): (usize, usize, usize),
    c: &mut [T],
    ldc: usize,
    f: impl Fn(usize, usize, &mut [T]) + Sync,
) {
    let tasks = (m * n * k.max(1) / PARALLEL_WORK).clamp(1, rayon::current_num_threads().max(1));
    if tasks == 1 {
        return f(0, m, c);
    }
    let rows_per = m.div_ceil(tasks);
    c.par_chunks_mut(rows_per * ldc)
        .enumerate()
        .for_each(|(i, block)| {
            let r0 = i * rows_per;
            let r1 = (r0 + rows_per).min(m);
            if r0 < r1 {
                f(r0, r1, block);
            }
        });
}

/// `c = alpha * a . B + beta * c` for one row `a` (k floats `csa` apart) and a packed B
/// ([`crate::ops::linalg::sgemm::pack_b`]), over blocks of B's column panels in
/// parallel when the product is large. A classifier head ([1, 1280] times [1280, 1000])
/// has one row, which [`by_row_blocks`] cannot split: its 5 MB weight streamed on one
/// thread while the others waited. A run of whole panels is itself a packed matrix, and
/// each element is the same sum in the same order whichever block computes it, so the
/// bits do not depend on the split.
///
/// # Safety
/// `a`'s k elements are live; `bp` holds `packed_len(k, n)` floats; `c` is n floats,
/// initialized unless `beta` is 0, aliasing neither; `bias`, when given, is n floats
/// added to the row (as [`sgemm_packed`](crate::ops::linalg::sgemm::sgemm_packed) adds
/// it).
#[allow(clippy::too_many_arguments)]
unsafe fn one_row_packed(
    k: usize,
    n: usize,
    alpha: f32,
    a: *const f32,
    csa: isize,
    bp: &[f32],
    beta: f32,
    c: &mut [f32],
    bias: Option<&[f32]>,
) {
    use crate::ops::linalg::sgemm::{PACK_WIDTH, packed_len, sgemm_packed};
    debug_assert!(c.len() == n && bp.len() >= packed_len(k, n));
    let tasks = (n * k.max(1) / PARALLEL_WORK).clamp(1, rayon::current_num_threads().max(1));
    let per = n.div_ceil(tasks).next_multiple_of(PACK_WIDTH);
    // Raw pointers are not `Send`; the address is, and each task reads only its panels.
    let a = a as usize;
    let block = |i: usize, c: &mut [f32]| {
        let j0 = i * per;
        // SAFETY: the caller's A; panels from `j0 / PACK_WIDTH` on start `j0 * k`
        // floats into `bp` and hold `packed_len(k, c.len())` floats up to its end
        // (`j0 + c.len() <= n`); `c` is this block's part of the caller's C.
        unsafe {
            sgemm_packed(
                1,
                k,
                c.len(),
                alpha,
                a as *const f32,
                0,
                csa,
                bp[j0 * k..].as_ptr(),
                beta,
                c.as_mut_ptr(),
                n as isize,
                bias.map(|b| &b[j0..j0 + c.len()]),
            );
        }
    };
    if tasks == 1 {
        block(0, c);
    } else {
        c.par_chunks_mut(per)
            .enumerate()
            .for_each(|(i, c)| block(i, c));
    }
}

/// Tasks a product of `work` multiply-adds splits into: one per [`PARALLEL_WORK`],
/// rounded to the nearest (a product of 1.5 times that takes 1.5 times the time a split
/// pays for), at most one per thread, and one unless `parallel`.
pub(super) fn tasks_for(work: usize, parallel: bool) -> usize {
    let threads = if parallel {
        rayon::current_num_threads().max(1)
    } else {
        1
    };
    ((work + PARALLEL_WORK / 2) / PARALLEL_WORK).clamp(1, threads)
}

/// `out` (`[m, n]`) = `epilogue(w . x + bias)` for `w` (`[m, k]`) and `x` (`[k, n]`), all
/// row-major float32, in one pass over `out`
/// ([`sgemm_finished`](crate::ops::linalg::sgemm::sgemm_finished)); with `parallel`, split
/// across threads when the product is large. Mostly in blocks of columns, as
/// [`one_row_packed`] splits a row: a convolution's output channels are few (a
/// MobileNet's early 1x1 layers have 8 to 64) and its positions many, and a block of
/// columns reads only its part of `x`. Blocks of columns are whole panels of 48, so where
/// the positions are few they split badly (a MobileNet's last layers: 256 channels over
/// 7 x 7 positions, 48 columns to 1; 14 x 14, 144 to 52), and blocks of rows split more
/// evenly. Each element is the same sum whichever block computes it, so the split changes
/// no bits.
pub(super) fn finished_f32(
    w: &[f32],
    x: &[f32],
    (m, k, n): (usize, usize, usize),
    bias: Option<&[f32]>,
    epilogue: Option<Epilogue>,
    out: &mut [f32],
    parallel: bool,
) {
    use crate::ops::linalg::sgemm::{PACK_WIDTH, ROW_TILE, sgemm_finished};
    assert!(w.len() >= m * k && x.len() >= k * n && out.len() == m * n);
    assert!(bias.is_none_or(|b| b.len() >= m), "finished_f32: bias of m");
    if m == 0 || n == 0 {
        return;
    }
    let tasks = tasks_for(m * k.max(1) * n, parallel);
    // Raw addresses are `Send`; each task writes only its own block of `out`.
    let (xa, oa) = (x.as_ptr() as usize, out.as_mut_ptr() as usize);
    // The rows `i0..i0 + mi` and columns `j0..j0 + nj` of `out`.
    let block = |(i0, mi): (usize, usize), (j0, nj): (usize, usize)| {
        // SAFETY: `w` is m x k row-major (asserted), `x` k x n and `out` m x n (asserted),
        // read and written at rows `i0..i0 + mi <= m` and columns `j0..j0 + nj <= n`;
        // `out` is a unique borrow aliasing neither input, and the tasks' blocks are
        // disjoint; `bias` holds the m floats (asserted), of which the block's rows' are
        // passed.
        unsafe {
            sgemm_finished(
                (mi, k, nj),
                w.as_ptr().add(i0 * k),
                (k as isize, 1),
                (xa as *const f32).add(j0),
                n as isize,
                (oa as *mut f32).add(i0 * n + j0),
                n as isize,
                bias.map(|b| &b[i0..i0 + mi]),
                epilogue,
            );
        }
    };
    let span = |len: usize, per: usize, t: usize| (t * per, per.min(len - t * per));
    // Blocks of whole panels of columns, or of whole tiles of rows, each of the latter
    // more than two tiles' rows (see `ROW_TILE`), the last and smallest too. Rows where
    // the largest block is a smaller share of the rows than of the columns.
    let cols = n.div_ceil(tasks).next_multiple_of(PACK_WIDTH).min(n);
    let rows = m.div_ceil(tasks).next_multiple_of(ROW_TILE);
    let last = m - (m.div_ceil(rows) - 1) * rows;
    let by_rows = rows * n < cols * m && m > rows && last > 2 * ROW_TILE;
    if tasks == 1 {
        block((0, m), (0, n));
    } else if by_rows {
        (0..m.div_ceil(rows))
            .into_par_iter()
            .for_each(|t| block(span(m, rows, t), (0, n)));
    } else {
        (0..n.div_ceil(cols))
            .into_par_iter()
            .for_each(|t| block((0, m), span(n, cols, t)));
    }
}

/// `out` (`[m, n]`) = `epilogue(w . x^T + bias)` for `w` (`[m, k]`) and the `n <=
/// NARROW` vectors `xt` (`[n, k]`), all row-major float32: a product of few columns,
/// whose every column is a dot product with each row of `w`
/// ([`sgemm_narrow`](crate::ops::linalg::sgemv::sgemm_narrow), which reads `w` once and
/// computes no padding columns). With `parallel`, large products split `w`'s rows
/// across threads; each element is the same sum whichever block computes it.
pub(super) fn narrow_f32(
    w: &[f32],
    xt: &[f32],
    (m, k, n): (usize, usize, usize),
    bias: Option<&[f32]>,
    epilogue: Option<Epilogue>,
    out: &mut [f32],
    parallel: bool,
) {
    use crate::ops::linalg::sgemv::sgemm_narrow;
    assert!(
        w.len() >= m * k && out.len() == m * n,
        "narrow_f32: operands of m, k, n"
    );
    if m == 0 || n == 0 {
        return;
    }
    let block = |i0: usize, out: &mut [f32]| {
        let mi = out.len() / n;
        let bias = bias.map(|b| &b[i0..i0 + mi]);
        sgemm_narrow(&w[i0 * k..], (mi, k, n), xt, bias, out, n);
        // The block was just written; its activation is applied while it is in cache.
        if let Some(e) = epilogue {
            e.apply_f32(out);
        }
    };
    let tasks = tasks_for(m * k.max(1) * n, parallel);
    if tasks == 1 {
        block(0, out);
    } else {
        let rows = m.div_ceil(tasks);
        out.par_chunks_mut(rows * n)
            .enumerate()
            .for_each(|(t, out)| block(t * rows, out));
    }
}

/// One `gemm` on the calling thread, in the element type's kernel.
fn gemm_serial<T: Scalar>(alpha: f32, a: Mat<T>, b: Mat<T>, beta: f32, c: &mut [T], ldc: usize) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if k == 0 {
        // An empty sum: only the beta term remains.
        for row in c.chunks_mut(ldc).take(m) {
            for v in &mut row[..n] {
                *v = T::from_f64(if beta == 0.0 {
                    0.0
                } else {
                    beta as f64 * v.to_f64()
                });
            }
        }
        return;
    }
    match T::DTYPE {
        DType::F32 => {
            sgemm(
                alpha,
                a.cast(),
                b.cast(),
                beta,
                bytemuck::cast_slice_mut(c),
                ldc,
            );
        }
        DType::F64 => {
            let c = bytemuck::cast_slice_mut::<T, f64>(c);
            // SAFETY: `gemm` checked that A and B lie inside their slices (A's row block
            // too: it starts `r0 * rs` into the slice that held all m rows), that C's rows
            // do not overlap (`ldc >= n`), and that C's block of m rows ldc apart, n
            // wide, lies inside `c`, which `by_row_blocks` cut at whole rows. `c` is
            // borrowed mutably, so it aliases neither A nor B.
            unsafe {
                let (a, b) = (a.cast::<f64>(), b.cast::<f64>());
                matrixmultiply::dgemm(
                    m,
                    k,
                    n,
                    alpha as f64,
                    a.data.as_ptr(),
                    a.rs as isize,
                    a.cs as isize,
                    b.data.as_ptr(),
                    b.rs as isize,
                    b.cs as isize,
                    beta as f64,
                    c.as_mut_ptr(),
                    ldc as isize,
                    1,
                );
            }
        }
        _ => {
            // Half types: widen A and B to contiguous f32 once, multiply, round once.
            let widen = |x: Mat<T>| -> Vec<f32> {
                let mut v = Vec::with_capacity(x.rows * x.cols);
                for i in 0..x.rows {
                    v.extend((0..x.cols).map(|j| x.data[i * x.rs + j * x.cs].to_f64() as f32));
                }
                v
            };
            let (wa, wb) = (widen(a), widen(b));
            let mut wc = vec![0.0f32; m * n];
            if beta != 0.0 {
                for (i, row) in wc.chunks_mut(n).enumerate() {
                    for (j, v) in row.iter_mut().enumerate() {
                        *v = c[i * ldc + j].to_f64() as f32;
                    }
                }
            }
            sgemm(
                alpha,
                Mat::row_major(&wa, m, k),
                Mat::row_major(&wb, k, n),
                beta,
                &mut wc,
                n,
            );
            for (i, row) in wc.chunks(n).enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    c[i * ldc + j] = T::from_f64(v as f64);
                }
            }
        }
    }
}

fn sgemm(alpha: f32, a: Mat<f32>, b: Mat<f32>, beta: f32, c: &mut [f32], ldc: usize) {
    // SAFETY: from the f32 arm, `gemm` checked that A and B lie inside their slices
    // and that C's block of a.rows rows, ldc >= b.cols apart and b.cols wide, lies inside
    // `c` (see the f64 arm); the half path builds contiguous operands of exactly those
    // sizes, with ldc = n. `c` is borrowed mutably, so C aliases neither A nor B, and its
    // elements are initialized, as slices' are.
    unsafe {
        crate::ops::linalg::sgemm::sgemm(
            a.rows,
            a.cols,
            b.cols,
            alpha,
            a.data.as_ptr(),
            a.rs as isize,
            a.cs as isize,
            b.data.as_ptr(),
            b.rs as isize,
            b.cs as isize,
            beta,
            c.as_mut_ptr(),
            ldc as isize,
            1,
        );
    }
}

fn unsupported(ctx: &InferCtx, d: DType) -> OpError {
    ctx.compute_error(format!(
        "computes float16, bfloat16, float32 and float64, not {d}"
    ))
}

/// MatMul: NumPy semantics. A 1-D A is a row vector and a 1-D B a column vector (the
/// added dim is not in the output); batch dims broadcast.
pub fn matmul(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    match inputs[0].dtype {
        DType::F16 => widened::<half::f16>(inputs, outputs, |i, o| matmul_typed::<f32>(ctx, i, o)),
        DType::Bf16 => {
            widened::<half::bf16>(inputs, outputs, |i, o| matmul_typed::<f32>(ctx, i, o))
        }
        _ => dispatch!(inputs[0].dtype, T in [f32, f64]
            => matmul_typed::<T>(ctx, inputs, outputs),
            other => Err(unsupported(ctx, other))),
    }
}

fn matmul_typed<T: Scalar + std::ops::Add<Output = T>>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let (a, b) = (inputs[0], inputs[1]);
    let a_shape: Vec<usize> = if a.rank() == 1 {
        vec![1, a.shape[0]]
    } else {
        a.shape.to_vec()
    };
    let b_shape: Vec<usize> = if b.rank() == 1 {
        vec![b.shape[0], 1]
    } else {
        b.shape.to_vec()
    };
    if a_shape.len() < 2 || b_shape.len() < 2 {
        return Err(ctx.input_error(0, "MatMul needs operands of rank 1 or more"));
    }
    let (m, k) = (a_shape[a_shape.len() - 2], a_shape[a_shape.len() - 1]);
    let n = b_shape[b_shape.len() - 1];
    let (ab, bb) = (&a_shape[..a_shape.len() - 2], &b_shape[..b_shape.len() - 2]);
    let rank = ab.len().max(bb.len());
    // Batch strides in matrices, 0 where a dim broadcasts.
    let strides = |dims: &[usize]| -> (Vec<usize>, Vec<usize>) {
        let mut full = vec![1usize; rank - dims.len()];
        full.extend_from_slice(dims);
        let mut st = vec![0usize; rank];
        let mut s = 1;
        for i in (0..rank).rev() {
            st[i] = if full[i] == 1 { 0 } else { s };
            s *= full[i];
        }
        (full, st)
    };
    let (af, ast) = strides(ab);
    let (bf, bst) = strides(bb);
    let batch: Vec<usize> = af.iter().zip(&bf).map(|(&x, &y)| x.max(y)).collect();
    let (av, bv) = (a.slice::<T>()?, b.slice::<T>()?);
    let out = outputs[0].slice_mut::<T>()?;
    if out.len() != batch.iter().product::<usize>() * m * n {
        return Err(ctx.compute_error("output size does not match the operands"));
    }
    if m * n == 0 {
        return Ok(());
    }
    let offsets = |mut i: usize| {
        let (mut oa, mut ob) = (0, 0);
        for d in (0..rank).rev() {
            let x = i % batch[d];
            i /= batch[d];
            oa += x * ast[d];
            ob += x * bst[d];
        }
        (oa * m * k, ob * k * n)
    };
    let one = |i: usize, c: &mut [T]| {
        let (oa, ob) = offsets(i);
        gemm(
            1.0,
            Mat::row_major(&av[oa..], m, k),
            Mat::row_major(&bv[ob..], k, n),
            0.0,
            c,
            n,
        );
    };
    // Many small products: one per task. One large product: `gemm` splits it itself.
    if out.len() / (m * n) > 1 && out.len() * k >= PARALLEL_WORK {
        out.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(i, c)| one(i, c));
    } else {
        for (i, c) in out.chunks_mut(m * n).enumerate() {
            one(i, c);
        }
    }
    // The fused bias, added to each row of the stored product: the unfused `Add`'s
    // arithmetic.
    if let Some(bias) = fused_bias::<T>(ctx, inputs, n)? {
        for row in out.chunks_exact_mut(n) {
            row.iter_mut().zip(bias).for_each(|(v, &b)| *v = *v + b);
        }
    }
    Ok(())
}

/// The attribute that marks a MatMul given a bias (input 2, `[N]`) by lowering's fusion
/// of a Linear layer's `Add(MatMul(x, W), b)` (`lower::fuse`): rt2's own, as GE's
/// fusion engine gives its MatMul the bias of a `BiasAdd` after it. Without it a MatMul
/// takes two inputs, as ONNX's does.
pub const FUSED_BIAS_ATTR: &str = "_rt2_fused_bias";

/// A fused MatMul's bias ([`FUSED_BIAS_ATTR`]), MatMul's or MatMulPacked's: input 2, `n`
/// values of the product's type; `None` for a product without one.
fn fused_bias<'a, T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef<'a>],
    n: usize,
) -> Result<Option<&'a [T]>, OpError> {
    let Some(b) = inputs.get(2) else {
        return Ok(None);
    };
    let bias = b.slice::<T>()?;
    if bias.len() != n {
        return Err(ctx.input_error(2, format!("is not a bias of the width {n}")));
    }
    Ok(Some(bias))
}

/// The op lowering puts in place of a float32 MatMul whose B is a constant matrix: the
/// same product, B packed once at lowering (`linalg::sgemm::pack_b`) so that every
/// execution streams it (see `linalg::sgemm`). Inputs: A [..., K], B packed as
/// [panels, K, PACK_WIDTH], and a fused MatMul's float32 bias `[n]` (optional, added to
/// each row as the product's tiles are stored); attribute `n`, B's width. Not an ONNX or
/// GE op.
pub const MATMUL_PACKED: &str = "MatMulPacked";

/// MatMul's prepack hook: a float32 MatMul by a constant matrix B at least one vector
/// wide runs as [`MATMUL_PACKED`] on B packed once, with its fused bias
/// ([`FUSED_BIAS_ATTR`]) if it has one. Read in place, every execution would read the
/// weight as strided rows, or copy it.
pub fn prepack_matmul(ctx: &InferCtx) -> Option<Prepack> {
    /// Narrower weights have no whole vector for the kernels to stream.
    const MIN_WIDTH: i64 = 16;
    let (a, b) = (ctx.inputs.first()?, ctx.inputs.get(1)?);
    ctx.values.get(1).copied().flatten()?;
    let &[k, n] = b.shape.as_deref()? else {
        return None;
    };
    // float16/bfloat16 products compute in f32 (`scalar::widened`): their weight is
    // widened once here, with the packing, instead of at every launch. A fused bias
    // (input 2) is float32's: the packed kernels add it in f32, which is a half
    // product's Add only after its rounding.
    let bias = ctx.inputs.len() > 2;
    if a.dtype != b.dtype || !matches!(a.dtype, DType::F32 | DType::F16 | DType::Bf16) {
        return None;
    }
    if bias && a.dtype != DType::F32 {
        return None;
    }
    if n < MIN_WIDTH || k < 1 || a.shape.as_ref().is_none_or(Vec::is_empty) {
        return None;
    }
    Some(Prepack {
        op: MATMUL_PACKED,
        input: 1,
        attrs: vec![("n", Attr::Int(n))],
        pack: pack_matmul_weight,
    })
}

/// A [K, N] float32 matrix as `MatMulPacked` reads it: [ceil(N / PACK_WIDTH), K,
/// PACK_WIDTH] column panels (`linalg::sgemm::pack_b`).
fn pack_matmul_weight(b: &HostTensor) -> Option<HostTensor> {
    let (k, n, floats) = matrix_floats(b)?;
    Some(packed(&floats, k, n))
}

/// A 2-D float host tensor's rows, columns and elements as f32; `None` for another rank
/// or type, or a size that does not match the shape.
fn matrix_floats(b: &HostTensor) -> Option<(usize, usize, Vec<f32>)> {
    let &[r, c] = b.shape.as_slice() else {
        return None;
    };
    let (r, c) = (usize::try_from(r).ok()?, usize::try_from(c).ok()?);
    let floats = widen_floats(b)?;
    (floats.len() == r.checked_mul(c)?).then_some((r, c, floats))
}

/// The row-major `k` x `n` matrix `b` packed into column panels, as a host tensor.
pub(super) fn packed(b: &[f32], k: usize, n: usize) -> HostTensor {
    use crate::ops::linalg::sgemm::{PACK_WIDTH, pack_b, packed_len};
    let data = pack_b(b, k, n);
    debug_assert_eq!(data.len(), packed_len(k, n));
    HostTensor {
        dtype: DType::F32,
        shape: vec![n.div_ceil(PACK_WIDTH) as i64, k as i64, PACK_WIDTH as i64],
        data: data
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>()
            .into(),
    }
}

/// The width `n` of a packed weight (input 1) over `k` rows: the attribute, checked
/// against the weight's shape and size.
fn packed_width(ctx: &InferCtx, bp: &TensorRef, k: usize) -> Result<usize, OpError> {
    use crate::ops::linalg::sgemm::packed_len;
    let n = usize::try_from(ctx.attr_int("n", -1)?)
        .map_err(|_| ctx.compute_error("needs a non-negative attribute \"n\""))?;
    if bp.shape.get(1) != Some(&k) || bp.len() != packed_len(k, n) {
        return Err(ctx.input_error(1, "is not A's K rows packed to the width \"n\""));
    }
    Ok(n)
}

/// The elements of a float32, float16 or bfloat16 host tensor as f32 (exactly), read
/// from its little-endian bytes (which need not be aligned); `None` for another type.
pub(super) fn widen_floats(t: &HostTensor) -> Option<Vec<f32>> {
    let two = |b: &[u8]| u16::from_le_bytes([b[0], b[1]]);
    Some(match t.dtype {
        DType::F32 => t
            .data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        DType::F16 => t
            .data
            .chunks_exact(2)
            .map(|b| half::f16::from_bits(two(b)).to_f32())
            .collect(),
        DType::Bf16 => t
            .data
            .chunks_exact(2)
            .map(|b| half::bf16::from_bits(two(b)).to_f32())
            .collect(),
        _ => return None,
    })
}

/// MatMulPacked: every row of A (all dims but the last are rows, B having no batch dims)
/// times the packed B; a float16/bfloat16 A is widened and the output rounded once.
pub fn matmul_packed(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    match inputs[0].dtype {
        DType::F16 => widened::<half::f16>(inputs, outputs, |i, o| matmul_packed_f32(ctx, i, o)),
        DType::Bf16 => widened::<half::bf16>(inputs, outputs, |i, o| matmul_packed_f32(ctx, i, o)),
        _ => matmul_packed_f32(ctx, inputs, outputs),
    }
}

fn matmul_packed_f32(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    use crate::ops::linalg::sgemm::sgemm_packed;
    let (a, bp) = (inputs[0].slice::<f32>()?, inputs[1].slice::<f32>()?);
    let (&k, _) = inputs[0]
        .shape
        .split_last()
        .ok_or_else(|| ctx.input_error(0, "is a scalar; MatMul needs at least 1-D"))?;
    let n = packed_width(ctx, &inputs[1], k)?;
    let rows = a
        .len()
        .checked_div(k)
        .unwrap_or_else(|| inputs[0].shape[..inputs[0].rank() - 1].iter().product());
    let bias = fused_bias::<f32>(ctx, inputs, n)?;
    let out = outputs[0].slice_mut::<f32>()?;
    if out.len() != rows * n || a.len() != rows * k {
        return Err(ctx.compute_error("output size does not match the operands"));
    }
    if rows * n == 0 {
        return Ok(());
    }
    if rows == 1 {
        // SAFETY: A's one row is `k` contiguous floats of `a` (`a.len() == k`, checked);
        // `out` is its n floats, `bp` its `packed_len(k, n)` (checked); `out` is a
        // mutable borrow of the output, so it aliases neither input.
        unsafe { one_row_packed(k, n, 1.0, a.as_ptr(), 1, bp, 0.0, out, bias) };
        return Ok(());
    }
    // Row blocks across the threads for large products, as `gemm` splits them.
    by_row_blocks((rows, k, n), out, n, |r0, r1, c| {
        // SAFETY: rows r0..r1 of A (k floats each, contiguous) lie inside `a`, which
        // holds `rows * k` floats (checked above); `c` is the (r1 - r0) x n block of
        // `out` (`rows * n` floats, checked) that `by_row_blocks` cut at whole rows;
        // `bp` holds `packed_len(k, n)` floats (checked). `c` is a mutable borrow of
        // the output, so it aliases neither input.
        unsafe {
            sgemm_packed(
                r1 - r0,
                k,
                n,
                1.0,
                a.as_ptr().add(r0 * k),
                k as isize,
                1,
                bp.as_ptr(),
                0.0,
                c.as_mut_ptr(),
                n as isize,
                bias,
            );
        }
    });
    Ok(())
}

/// Gemm: `alpha * A' . B' + beta * C`, where A' and B' are A and B transposed when
/// `transA`/`transB` say so and C broadcasts to [M, N].
pub fn gemm_op(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    match inputs[0].dtype {
        DType::F16 => widened::<half::f16>(inputs, outputs, |i, o| gemm_typed::<f32>(ctx, i, o)),
        DType::Bf16 => widened::<half::bf16>(inputs, outputs, |i, o| gemm_typed::<f32>(ctx, i, o)),
        _ => dispatch!(inputs[0].dtype, T in [f32, f64]
            => gemm_typed::<T>(ctx, inputs, outputs),
            other => Err(unsupported(ctx, other))),
    }
}

fn gemm_typed<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    let beta = ctx.attr_float("beta", 1.0)?;
    let (a, b) = (inputs[0], inputs[1]);
    if a.rank() != 2 || b.rank() != 2 {
        return Err(ctx.input_error(0, "Gemm takes 2-D operands"));
    }
    let mut am = Mat::row_major(a.slice::<T>()?, a.shape[0], a.shape[1]);
    let mut bm = Mat::row_major(b.slice::<T>()?, b.shape[0], b.shape[1]);
    if ctx.attr_int("transA", 0)? != 0 {
        am = am.t();
    }
    if ctx.attr_int("transB", 0)? != 0 {
        bm = bm.t();
    }
    if am.cols != bm.rows {
        return Err(ctx.input_error(1, "inner dims differ"));
    }
    let (m, n) = (am.rows, bm.cols);
    let out = outputs[0].slice_mut::<T>()?;
    let beta = broadcast_c(ctx, inputs, beta, out, (m, n))?;
    gemm(alpha, am, bm, beta, out, n);
    Ok(())
}

/// Gemm's C term: broadcasts C (input 2, when given and `beta` is not zero) into `out`
/// (`[m, n]`) and returns the beta the product then accumulates with (0 without C).
fn broadcast_c<T: Scalar>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    beta: f32,
    out: &mut [T],
    (m, n): (usize, usize),
) -> Result<f32, OpError> {
    let c = inputs.get(2).filter(|c| !c.is_empty());
    let Some(c) = c.filter(|_| beta != 0.0) else {
        return Ok(0.0);
    };
    let cv = c.slice::<T>()?;
    let (cr, cc) = match c.shape {
        [] => (1, 1),
        [x] => (1, *x),
        [r, x] => (*r, *x),
        _ => return Err(ctx.input_error(2, "C has rank at most 2")),
    };
    if !(cr == 1 || cr == m) || !(cc == 1 || cc == n) {
        return Err(ctx.input_error(2, format!("{:?} does not broadcast to [{m}, {n}]", c.shape)));
    }
    for (i, row) in out.chunks_mut(n.max(1)).enumerate().take(m) {
        let src = &cv[(if cr == 1 { 0 } else { i }) * cc..][..cc];
        if cc == n {
            row.copy_from_slice(src);
        } else {
            row.fill(src[0]);
        }
    }
    Ok(beta)
}

/// The op lowering launches for a Gemm by a constant B: B' (B, or B transposed under
/// `transB`) packed once into column panels ([`prepack_gemm`]).
pub const GEMM_PACKED: &str = "GemmPacked";

/// Gemm's prepack hook: a float32 (or float16/bfloat16, widened once) Gemm whose B is a
/// constant at least one vector wide after `transB` runs as [`GEMM_PACKED`] on B' packed
/// once. This is every exported classifier head and linear layer (PyTorch writes
/// `nn.Linear` as Gemm with `transB` 1, and GE's MatMulV2 and FullyConnection translate
/// to Gemm): read in place, a transposed B has no contiguous rows for the kernels, and
/// matrixmultiply packed all of it on every launch (a 2048 x 1000 head: 2.4 ms a call).
pub fn prepack_gemm(ctx: &InferCtx) -> Option<Prepack> {
    const MIN_WIDTH: i64 = 16;
    let (a, b) = (ctx.inputs.first()?, ctx.inputs.get(1)?);
    ctx.values.get(1).copied().flatten()?;
    let &[r, c] = b.shape.as_deref()? else {
        return None;
    };
    if a.dtype != b.dtype || !matches!(a.dtype, DType::F32 | DType::F16 | DType::Bf16) {
        return None;
    }
    let trans_b = ctx.attr_int("transB", 0).ok()? != 0;
    let (k, n) = if trans_b { (c, r) } else { (r, c) };
    if n < MIN_WIDTH || k < 1 || a.shape.as_ref().is_none_or(|s| s.len() != 2) {
        return None;
    }
    Some(Prepack {
        op: GEMM_PACKED,
        input: 1,
        attrs: vec![("n", Attr::Int(n))],
        pack: if trans_b {
            pack_transposed_weight
        } else {
            pack_matmul_weight
        },
    })
}

/// An [N, K] matrix as the [K, N] matrix it is transposed, packed as
/// [`pack_matmul_weight`] packs.
fn pack_transposed_weight(b: &HostTensor) -> Option<HostTensor> {
    let (n, k, floats) = matrix_floats(b)?;
    let mut t = vec![0.0f32; floats.len()];
    for (j, row) in floats.chunks_exact(k.max(1)).enumerate() {
        for (i, &v) in row.iter().enumerate() {
            t[i * n + j] = v;
        }
    }
    Some(packed(&t, k, n))
}

/// GemmPacked (rt2's own, made by lowering): Gemm with B' packed ([`prepack_gemm`]):
/// A (`transA` as Gemm's), the packed B', optional C; `alpha`, `beta`, `n` (B''s width).
pub fn gemm_packed(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    match inputs[0].dtype {
        DType::F16 => widened::<half::f16>(inputs, outputs, |i, o| gemm_packed_f32(ctx, i, o)),
        DType::Bf16 => widened::<half::bf16>(inputs, outputs, |i, o| gemm_packed_f32(ctx, i, o)),
        _ => gemm_packed_f32(ctx, inputs, outputs),
    }
}

fn gemm_packed_f32(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    use crate::ops::linalg::sgemm::sgemm_packed;
    let alpha = ctx.attr_float("alpha", 1.0)?;
    let beta = ctx.attr_float("beta", 1.0)?;
    let (a, bp) = (inputs[0].slice::<f32>()?, inputs[1].slice::<f32>()?);
    let &[r, c] = inputs[0].shape else {
        return Err(ctx.input_error(0, "Gemm takes a 2-D A"));
    };
    // A' is [m, k]: A itself, or A transposed (read in place).
    let (m, k, rsa, csa) = if ctx.attr_int("transA", 0)? != 0 {
        (c, r, 1, c)
    } else {
        (r, c, c, 1)
    };
    let n = packed_width(ctx, &inputs[1], k)?;
    let out = outputs[0].slice_mut::<f32>()?;
    if out.len() != m * n {
        return Err(ctx.compute_error("output size does not match the operands"));
    }
    if m * n == 0 {
        return Ok(());
    }
    let beta = broadcast_c(ctx, inputs, beta, out, (m, n))?;
    if m == 1 {
        // SAFETY: A's one row is k floats `csa` apart from `a`'s start (inside `a`,
        // whose length the shape gives); `out` is its n floats, initialized (C broadcast
        // into it, or written only under beta 0), `bp` its `packed_len(k, n)` (checked);
        // `out` is a mutable borrow of the output, so it aliases neither input.
        unsafe { one_row_packed(k, n, alpha, a.as_ptr(), csa as isize, bp, beta, out, None) };
        return Ok(());
    }
    by_row_blocks((m, k, n), out, n, |r0, r1, c| {
        // SAFETY: rows r0..r1 of A' (element (i, p) at `i * rsa + p * csa`, below
        // `m * k`, the length of `a` as the shape says) lie inside `a`; `c` is the
        // (r1 - r0) x n block of `out` (`m * n` floats, checked) that `by_row_blocks`
        // cut at whole rows, initialized (C broadcast into it, or written only under
        // beta 0); `bp` holds `packed_len(k, n)` floats (checked). `c` is a mutable
        // borrow of the output, so it aliases neither input.
        unsafe {
            sgemm_packed(
                r1 - r0,
                k,
                n,
                alpha,
                a.as_ptr().add(r0 * rsa),
                rsa as isize,
                csa as isize,
                bp.as_ptr(),
                beta,
                c.as_mut_ptr(),
                n as isize,
                None,
            );
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run;
    use crate::ops::testing::run_f32;

    #[test]
    fn matmul_broadcasts_and_promotes_vectors() {
        let a = Tensor::from_vec(&[2, 1, 2], &[1.0f32, 2.0, 3.0, 4.0]);
        let b = Tensor::from_vec(&[2, 1], &[10.0f32, 100.0]);
        // [1,2].[10,100] = 210, [3,4].[10,100] = 430
        assert_eq!(run_f32("MatMul", &[], &[a, b]), [210.0, 430.0]);
        let v = Tensor::from_vec(&[2], &[1.0f32, -1.0]);
        let m = Tensor::from_vec(&[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(run_f32("MatMul", &[], &[v.clone(), m]), [-3.0, -3.0, -3.0]);
        assert_eq!(run_f32("MatMul", &[], &[v.clone(), v]), [2.0]);
    }

    #[test]
    fn matmul_in_half_precision_rounds_once() {
        use half::f16;
        let a = Tensor::from_vec(&[1, 2], &[f16::from_f32(0.5), f16::from_f32(2.0)]);
        let b = Tensor::from_vec(&[2, 1], &[f16::from_f32(3.0), f16::from_f32(0.25)]);
        let out = run("MatMul", &[], &[a, b], 1);
        assert_eq!(out[0].slice::<f16>().unwrap(), [f16::from_f32(2.0)]);
    }

    #[test]
    fn gemm_transposes_scales_and_broadcasts_c() {
        // A' = [[1,2],[3,4]] given transposed; B' = I given as is; C = [10, 20] per row.
        let a = Tensor::from_vec(&[2, 2], &[1.0f32, 3.0, 2.0, 4.0]);
        let b = Tensor::from_vec(&[2, 2], &[1.0f32, 0.0, 0.0, 1.0]);
        let c = Tensor::from_vec(&[2], &[10.0f32, 20.0]);
        let attrs = [
            ("transA", Attr::Int(1)),
            ("alpha", Attr::Float(2.0)),
            ("beta", Attr::Float(0.5)),
        ];
        assert_eq!(run_f32("Gemm", &attrs, &[a, b, c]), [7.0, 14.0, 11.0, 18.0]);
    }

    /// A Gemm by a constant B runs packed: the hook asks for it (B as it is, or
    /// transposed under transB) and GemmPacked on the packed weight computes what Gemm
    /// computes, over transA, alpha, beta, every form of C and a width with a tail.
    #[test]
    fn packed_gemm_computes_gemm() {
        use crate::ops::{Attrs, InferCtx, TensorMeta};
        let seeded = |len: usize, seed: u64| crate::om::onnx::builder::seeded_f32(len, seed, 1.0);
        let (m, k, n) = (5usize, 37usize, 50usize);
        for trans_a in [0, 1] {
            for trans_b in [0, 1] {
                let a_shape = if trans_a == 1 { [k, m] } else { [m, k] };
                let b_shape = if trans_b == 1 { [n, k] } else { [k, n] };
                let a = Tensor::from_vec(&a_shape, &seeded(m * k, 1));
                let b_vals = seeded(k * n, 2);
                let b = Tensor::from_vec(&b_shape, &b_vals);
                let b_host = b.to_host();
                let metas = [
                    TensorMeta::new(DType::F32, &a_shape.map(|d| d as i64)),
                    TensorMeta::new(DType::F32, &b_shape.map(|d| d as i64)),
                ];
                let mut attrs = Attrs::new();
                attrs.insert("transB".into(), Attr::Int(trans_b));
                let plan = prepack_gemm(&InferCtx {
                    op: "Gemm",
                    inputs: &metas,
                    values: &[None, Some(&b_host)],
                    attrs: &attrs,
                    outputs: 1,
                })
                .expect("packs a constant B");
                assert_eq!((plan.op, plan.input), (GEMM_PACKED, 1));
                let packed = Tensor::from_host(&(plan.pack)(&b_host).unwrap()).unwrap();
                let cs: [Option<Tensor>; 4] = [
                    None,
                    Some(Tensor::from_vec(&[1], &[0.5f32])),
                    Some(Tensor::from_vec(&[n], &seeded(n, 3))),
                    Some(Tensor::from_vec(&[m, n], &seeded(m * n, 4))),
                ];
                for c in cs {
                    let attrs = [
                        ("transA", Attr::Int(trans_a)),
                        ("transB", Attr::Int(trans_b)),
                        ("alpha", Attr::Float(0.75)),
                        ("beta", Attr::Float(-1.5)),
                    ];
                    let mut ins = vec![a.clone(), b.clone()];
                    let mut packed_ins = vec![a.clone(), packed.clone()];
                    if let Some(c) = &c {
                        ins.push(c.clone());
                        packed_ins.push(c.clone());
                    }
                    let want = run_f32("Gemm", &attrs, &ins);
                    let mut packed_attrs = attrs.to_vec();
                    packed_attrs.push(("n", Attr::Int(n as i64)));
                    let got = run_f32(GEMM_PACKED, &packed_attrs, &packed_ins);
                    assert_eq!(got.len(), m * n);
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                            "transA {trans_a} transB {trans_b} C {:?}: {i}: {g} vs {w}",
                            c.as_ref().map(|c| c.shape.clone())
                        );
                    }
                }
            }
        }
        // A B known only at run time, or too narrow for a vector, stays as it is.
        let metas = [
            TensorMeta::new(DType::F32, &[2, 3]),
            TensorMeta::new(DType::F32, &[3, 8]),
        ];
        let narrow = Tensor::from_vec(&[3, 8], &[1.0f32; 24]).to_host();
        let attrs = Attrs::new();
        for values in [[None, None], [None, Some(&narrow)]] {
            let ctx = InferCtx {
                op: "Gemm",
                inputs: &metas,
                values: &values,
                attrs: &attrs,
                outputs: 1,
            };
            assert!(prepack_gemm(&ctx).is_none());
        }
    }

    /// A one-row product on a packed B large enough to split its column panels over
    /// threads (a classifier head) gives the bits of the same product on one thread, in
    /// MatMulPacked and GemmPacked (transposed A, a broadcast C), into poisoned outputs.
    #[test]
    fn one_row_packed_products_split_columns_with_the_same_bits() {
        use crate::ops::linalg::sgemm::{pack_b, packed_len};
        let seeded = |len: usize, seed: u64| crate::om::onnx::builder::seeded_f32(len, seed, 1.0);
        // 1.3M multiply-adds: five times PARALLEL_WORK, split over every thread there is.
        let (k, n) = (1283, 1001);
        let (a, b) = (seeded(k, 1), seeded(k * n, 2));
        let packed = pack_b(&b, k, n);
        assert_eq!(packed.len(), packed_len(k, n));
        let mut serial = vec![f32::NAN; n];
        // SAFETY: `a` holds k floats, `packed` packed_len(k, n), `serial` n; distinct.
        unsafe {
            crate::ops::linalg::sgemm::sgemm_packed(
                1,
                k,
                n,
                1.0,
                a.as_ptr(),
                k as isize,
                1,
                packed.as_ptr(),
                0.0,
                serial.as_mut_ptr(),
                n as isize,
                None,
            );
        }
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let packed_t = Tensor::from_vec(&[n.div_ceil(48), k, 48], &packed);
        let n_attr = ("n", Attr::Int(n as i64));
        let got = run_f32(
            MATMUL_PACKED,
            std::slice::from_ref(&n_attr),
            &[Tensor::from_vec(&[1, k], &a), packed_t.clone()],
        );
        assert_eq!(bits(&got), bits(&serial), "MatMulPacked");
        // Gemm: A' = A^T of a [k, 1] A, C a scalar: alpha * A'B + beta * C.
        let c = 0.25f32;
        let got = run_f32(
            GEMM_PACKED,
            &[("transA", Attr::Int(1)), ("beta", Attr::Float(2.0)), n_attr],
            &[
                Tensor::from_vec(&[k, 1], &a),
                packed_t,
                Tensor::from_vec(&[1], &[c]),
            ],
        );
        let want: Vec<f32> = serial.iter().map(|&v| 2.0f32.mul_add(c, v)).collect();
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "GemmPacked {j}: {g} vs {w}"
            );
        }
    }

    /// C rows closer together than n would overlap: refused, since a block of rows given
    /// to one thread would run into the next block.
    #[test]
    #[should_panic(expected = "overlap")]
    fn c_rows_that_overlap_are_refused() {
        let (a, b) = ([1.0f32; 2], [1.0f32; 4]);
        let mut c = [0.0f32; 6];
        gemm(
            1.0,
            Mat::row_major(&a, 2, 1),
            Mat::row_major(&b, 1, 4),
            0.0,
            &mut c,
            2,
        );
    }

    /// Extents whose last offset would wrap around `usize` are out of bounds, not a small
    /// offset that passes the check.
    #[test]
    fn extents_that_would_wrap_are_out_of_bounds() {
        let data = [0.0f32; 4];
        let huge = Mat {
            data: &data,
            rows: 3,
            cols: 1,
            rs: 1 << (usize::BITS - 1),
            cs: 1,
        };
        assert!(!huge.in_bounds());
        assert!(Mat::row_major(&data, 2, 2).in_bounds());
        let r = std::panic::catch_unwind(|| {
            let mut c = [0.0f32; 4];
            gemm(
                1.0,
                Mat::row_major(&data, 3, 1),
                Mat::row_major(&data, 1, 1),
                0.0,
                &mut c,
                1 << (usize::BITS - 1),
            );
        });
        let msg = r.expect_err("an ldc that wraps is refused");
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"gemm: C too small"));
    }

    #[test]
    fn large_products_split_rows_and_agree() {
        let (m, k, n) = (70, 65, 90);
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect();
        let mut c = vec![0.0f32; m * n];
        gemm(
            1.0,
            Mat::row_major(&a, m, k),
            Mat::row_major(&b, k, n),
            0.0,
            &mut c,
            n,
        );
        for (i, j) in [(0, 0), (37, 11), (69, 89)] {
            let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            assert_eq!(c[i * n + j], want);
        }
    }

    /// A fused bias (`FUSED_BIAS_ATTR`) gives the bits of the product and an Add of the
    /// row after it: MatMul in place, MatMulPacked over many rows and over one (its
    /// column split), widths short of a vector and past a panel. Without the attribute a
    /// third input is refused, as is a bias of another width.
    #[test]
    fn a_fused_bias_has_the_bits_of_an_add_after_the_product() {
        use crate::ops::TensorMeta;
        use crate::ops::linalg::sgemm::pack_b;
        use crate::ops::testing::{infer1, seeded};
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let fused = [(FUSED_BIAS_ATTR, Attr::Int(1))];
        for (rows, k, n) in [(6, 40, 37), (1, 300, 53), (128, 64, 96), (3, 17, 16)] {
            let a = Tensor::from_vec(&[1, rows, k], &seeded(rows * k, 1));
            let b = seeded(k * n, 2);
            let bias: Vec<f32> = seeded(n, 3).iter().map(|v| v * 8.0).collect();
            let (bt, biast) = (Tensor::from_vec(&[k, n], &b), Tensor::from_vec(&[n], &bias));
            let mut want = run_f32("MatMul", &[], &[a.clone(), bt.clone()]);
            for row in want.chunks_mut(n) {
                row.iter_mut().zip(&bias).for_each(|(v, b)| *v += b);
            }
            let got = run_f32("MatMul", &fused, &[a.clone(), bt.clone(), biast.clone()]);
            assert_eq!(bits(&got), bits(&want), "MatMul {rows}x{k}x{n}");
            let packed = Tensor::from_vec(&[n.div_ceil(48), k, 48], &pack_b(&b, k, n));
            let n_attr = [("n", Attr::Int(n as i64))];
            let got = run_f32(MATMUL_PACKED, &n_attr, &[a.clone(), packed, biast.clone()]);
            assert_eq!(bits(&got), bits(&want), "MatMulPacked {rows}x{k}x{n}");
            let metas = [
                TensorMeta::of(&a),
                TensorMeta::of(&bt),
                TensorMeta::of(&biast),
            ];
            let e = infer1("MatMul", &metas, &[], &[]).expect_err("three inputs");
            assert!(e.to_string().contains("input"), "{e}");
            let narrow = TensorMeta::new(DType::F32, &[n as i64 - 1]);
            let metas = [metas[0].clone(), metas[1].clone(), narrow];
            let e = infer1("MatMul", &metas, &[], &fused).expect_err("a narrow bias");
            assert!(e.to_string().contains("a bias of width"), "{e}");
        }
    }

    /// A 1x1 convolution's product gives the same bits on one thread and split, by
    /// columns (many positions) or by rows (few positions, many channels: a MobileNet's
    /// last layers), with and without a bias and an activation; the output starts as NaN
    /// so that an element no block writes shows.
    #[test]
    fn finished_products_split_with_the_serial_bits() {
        use crate::ops::testing::seeded;
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let relu = Epilogue::Clip {
            lo: 0.0,
            hi: f32::INFINITY,
        };
        // (m, k, n): rows split (256 x 49, 96 x 196), columns split (40 x 49, whose last
        // row block would be short; 40 x 784), too few rows for two blocks (16 x 49), one
        // task (8 x 8).
        let shapes = [
            (256, 40, 49),
            (96, 64, 196),
            (40, 256, 49),
            (40, 16, 784),
            (16, 2048, 49),
            (8, 8, 8),
        ];
        for (m, k, n) in shapes {
            let (w, x) = (seeded(m * k, 1), seeded(k * n, 2));
            let bias = seeded(m, 3);
            for (bias, epilogue) in [(None, None), (Some(&bias[..]), Some(relu))] {
                let run = |parallel| {
                    let mut out = vec![f32::NAN; m * n];
                    finished_f32(&w, &x, (m, k, n), bias, epilogue, &mut out, parallel);
                    out
                };
                let serial = run(false);
                assert!(serial.iter().all(|v| v.is_finite()), "{m}x{k}x{n}");
                assert_eq!(bits(&run(true)), bits(&serial), "{m}x{k}x{n}");
                // The first element against its sum.
                let mut want = (0..k).map(|j| w[j] * x[j * n]).sum::<f32>();
                if let Some(b) = bias {
                    want = (want + b[0]).max(0.0);
                }
                assert!(
                    (serial[0] - want).abs() <= 1e-4 * (1.0 + want.abs()),
                    "{m}x{k}x{n}"
                );
            }
        }
    }
}
