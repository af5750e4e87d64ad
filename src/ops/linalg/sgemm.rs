//! The float32 matrix product every f32 kernel ends in: [`sgemm`], matrixmultiply's
//! contract (`C = alpha * A B + beta * C` on arbitrarily strided operands), with its own
//! AVX-512 and AVX2 micro-kernels for the common case of a row-major B and C.
//!
//! Why not matrixmultiply alone: it copies ("packs") every B it is given into panels
//! before multiplying, on every call. For the products a model is made of, B is a weight
//! matrix and A a few rows of activations: an encoder's projections at sequence 16 are
//! 16 x 512 times 512 x 2048. There each element of B is used only 16 times, so the pack
//! (read B, write the panel, read it again) costs more than the multiply. Here B is read
//! where it is:
//!
//! - A micro-kernel keeps an `MR` rows x `NV` vectors tile of C in registers (AVX-512:
//!   8 x 3 vectors of 16, 24 of the 32 registers). Per step of k it loads `NV`
//!   consecutive vectors of one row of B, broadcasts `MR` elements of A (any strides) and
//!   issues `MR * NV` FMAs, so it is bound by the FMA units, not by loads (11 loads per
//!   24 FMAs).
//! - Products of up to two row tiles with `alpha` 1 and `beta` 0 (MatMul's, for short
//!   activations) run k in blocks of 16 rows outermost and the column panels inside: each
//!   block reads its 16 rows of B front to back, as the hardware prefetchers expect. With
//!   the panels outermost each row of B is a separate strided visit per panel, whose
//!   misses queue on the core's few outstanding-miss slots, so B streams markedly slower
//!   than blocked. A block's partial sums wait in C.
//! - Larger products run the column panels outermost and every row tile over all of k:
//!   the first tile reads the panel in place, prefetching rows ahead, and copies it as it
//!   goes into a per-thread buffer the other tiles read densely (rows of B kilobytes
//!   apart alias in L1, so reading them in place for every tile is slow for many rows).
//! - Each element of C is the sum over k in order, one FMA per term, whichever path and
//!   tile computes it, and a block's partial sum is stored and reloaded exactly: the
//!   result does not depend on the shape of the product around an element or on the
//!   thread, so every executor gets the same bits.
//!
//! A constant B (a model's weight) can be packed once, when the model is lowered
//! ([`pack_b`]), into panels of [`PACK_WIDTH`] columns stored one after another, each its
//! k rows dense; [`sgemm_packed`] then runs every row tile over all of k reading one
//! panel front to back, which the hardware prefetchers stream at close to a plain read's
//! rate. Read in place, the same weight is one strided visit per row and panel (above),
//! which is slower.
//!
//! The last `n % LANES` columns run through the same kernels on a zero-padded copy of
//! their strip ([`tail`]); a single column (a matrix times a vector) by a kernel of its
//! own with the rows in the lanes ([`column()`]), the same bits. Whatever the kernels
//! do not cover goes to matrixmultiply: a B or C whose columns are not contiguous, more
//! than one row tile over a k whose panel copy would exceed [`MAX_PANEL_FLOATS`], and
//! machines without AVX2 and FMA.

use crate::ops::nn::epilogue::Epilogue;
use crate::ops::simd::Isa;

/// Rows of B ahead of the current one that the first row tile prefetches: an L3 fetch
/// (about 70 ns) is some 15 steps of the kernel.
const PREFETCH_ROWS: usize = 16;

/// The kernels a product runs on: the CPU's best, or in tests the one a test forces.
fn kernels() -> Option<Isa> {
    #[cfg(test)]
    if let Some(forced) = tests::FORCED.with(|f| f.get()) {
        return forced;
    }
    Isa::detect()
}

/// `C = alpha * A B + beta * C` (`beta` zero: C is only written), matrixmultiply's
/// `sgemm` contract, with the micro-kernels above where they apply.
///
/// # Safety
/// As matrixmultiply's `sgemm`: every element the dims and strides address lies inside
/// live memory, C's elements are distinct and alias neither A nor B, and C's are
/// initialized unless `beta` is zero. No reference to C's elements is live during the
/// call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    beta: f32,
    c: *mut f32,
    rsc: isize,
    csc: isize,
) {
    let p = Product {
        m,
        k,
        alpha,
        a,
        rsa,
        csa,
        b,
        rsb,
        beta,
        c,
        rsc,
        finish: Finish::NONE,
    };
    let done = match kernels() {
        Some(isa) if csb == 1 && csc == 1 && m > 0 && k > 0 => {
            // SAFETY: `isa` comes from `kernels()`, that is `Isa::detect` (or a test's pick
            // from `Isa::available`), so this CPU has it; B and C's column strides are 1
            // and m, k are non-zero (the guard); the elements `run` addresses are those of
            // the m x k, k x n and m x n blocks this function's caller vouched for.
            unsafe { run(isa, &p, n) }
        }
        _ => 0,
    };
    let done = match kernels() {
        Some(isa) if csb == 1 && csc == 1 && m > 0 && k > 0 => {
            // SAFETY: as for `run` above (the same guard); the columns `done..n` of B
            // (from B's column 0) and of C are the caller's.
            done + unsafe { tail(isa, &p, n - done, done, done) }
        }
        _ => done,
    };
    if done < n {
        // SAFETY: the columns `done..n` of B and C (`done <= n`: `run` returns whole
        // vectors of columns below n) are a sub-block of the blocks the caller vouched
        // for, with the same strides; A is the caller's A.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n - done,
                alpha,
                a,
                rsa,
                csa,
                b.offset(done as isize * csb),
                rsb,
                csb,
                beta,
                c.offset(done as isize * csc),
                rsc,
                csc,
            );
        }
    }
}

/// `C = epilogue(A B + bias)`, each element its row's bias added to the product, rounded
/// once, then the activation: [`sgemm`] with `alpha` 1 and `beta` 0 on a B (`k` x `n`,
/// rows `rsb` apart) and C (rows `rsc` apart) of contiguous columns, finished as each
/// tile of C is stored. A 1x1 convolution is this whole (weights times input, bias,
/// activation): where the bias was written into C first, read back by a product with
/// `beta` 1 and C then swept by the activation, C is written once, from registers. The
/// bits are those of the three passes.
///
/// # Safety
/// As [`sgemm`] for these operands (A's m x k elements with strides `rsa`, `csa`, B's
/// and C's rows inside live memory, C's elements distinct and aliasing neither A nor
/// B); `bias`, when given, holds at least `m` floats.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_finished(
    (m, k, n): (usize, usize, usize),
    a: *const f32,
    (rsa, csa): (isize, isize),
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    bias: Option<&[f32]>,
    epilogue: Option<Epilogue>,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        bias.is_none_or(|b| b.len() >= m),
        "sgemm_finished: bias of m"
    );
    let finish = Finish {
        bias: bias.map_or(std::ptr::null(), <[f32]>::as_ptr),
        col_bias: std::ptr::null(),
        epilogue,
    };
    let p = Product {
        m,
        k,
        alpha: 1.0,
        a,
        rsa,
        csa,
        b,
        rsb,
        beta: 0.0,
        c,
        rsc,
        finish,
    };
    let done = match kernels() {
        Some(isa) if k > 0 => {
            // SAFETY: as in `sgemm`: this CPU has `isa` (from `kernels`), B's and C's
            // columns are contiguous, m and k non-zero (the guards), every block the
            // caller's; the finish's bias holds m floats (asserted).
            let done = unsafe { run(isa, &p, n) };
            // SAFETY: as above; columns `done..n` of B and C are the caller's.
            done + unsafe { tail(isa, &p, n - done, done, done) }
        }
        _ => 0,
    };
    if done == n {
        return;
    }
    // The columns the kernels did not take (all of them on a machine without AVX2, or
    // with k 0), by matrixmultiply, then finished here.
    if k > 0 {
        // SAFETY: columns `done..n` of B and C, a sub-block of the caller's, with the
        // same strides; A is the caller's A.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n - done,
                1.0,
                a,
                rsa,
                csa,
                b.add(done),
                rsb,
                1,
                0.0,
                c.add(done),
                rsc,
                1,
            );
        }
    }
    for i in 0..m {
        // SAFETY: row i's columns `done..n` of C, the caller's, written above (or, with
        // k 0, written here before any read); no reference to them is live.
        let row = unsafe {
            std::slice::from_raw_parts_mut(c.offset(i as isize * rsc).add(done), n - done)
        };
        match bias {
            // An empty sum: the bias alone.
            _ if k == 0 => row.fill(bias.map_or(0.0, |b| b[i])),
            Some(b) => row.iter_mut().for_each(|v| *v += b[i]),
            None => {}
        }
        if let Some(e) = epilogue {
            e.apply_f32(row);
        }
    }
}

/// Columns per panel of a packed B: the AVX-512 tile's width (3 vectors of 16), a whole
/// number of vectors of every kernel.
pub const PACK_WIDTH: usize = 48;

/// Rows per tile of C in every kernel. A product of at most two tiles' rows without a
/// bias or an activation takes a k-blocked path of its own, so a caller that splits a
/// product's rows and wants the whole product's bits gives each block more rows than
/// that.
pub const ROW_TILE: usize = 8;

/// The floats of B (`k` x `n`) packed: `n.div_ceil(PACK_WIDTH)` panels of `k` x
/// [`PACK_WIDTH`].
pub fn packed_len(k: usize, n: usize) -> usize {
    n.div_ceil(PACK_WIDTH) * k * PACK_WIDTH
}

/// B (`k` x `n`, row-major) in the layout [`sgemm_packed`] reads: panel `p` holds columns
/// `p * PACK_WIDTH ..` of every row, `PACK_WIDTH` floats per row, the rows in order; the
/// last panel's columns past `n` are zeros. The layout is the same on every CPU (the
/// AVX2 kernel reads a panel as six 8-column strips), so a packed weight can be stored.
///
/// # Panics
/// If `b` holds fewer than `k * n` floats.
pub fn pack_b(b: &[f32], k: usize, n: usize) -> Vec<f32> {
    let b = &b[..k * n];
    let mut out = vec![0.0; packed_len(k, n)];
    if out.is_empty() {
        return out;
    }
    for (p, panel) in out.chunks_exact_mut(k * PACK_WIDTH).enumerate() {
        let j0 = p * PACK_WIDTH;
        let width = PACK_WIDTH.min(n - j0);
        for (dst, src) in panel.chunks_exact_mut(PACK_WIDTH).zip(b.chunks_exact(n)) {
            dst[..width].copy_from_slice(&src[j0..j0 + width]);
        }
    }
    out
}

/// `C = alpha * A B + beta * C + bias` with B packed by [`pack_b`] (`bp`,
/// [`packed_len`]`(k, n)` floats), C row-major and `bias`, when given, a row of `n`
/// floats added to every row of C. Each element is the sum over k in order, one FMA per
/// term, as in [`sgemm`]'s kernels: a product gives the same bits packed or not. The
/// bias is added to each element of the finished sum as its tile is stored, rounded
/// once: the bits of the product stored and a broadcast `Add` of the row after it (a
/// Linear layer's `MatMul` and bias `Add`, fused at lowering), without the second pass
/// over C.
///
/// # Safety
/// A's m x k elements (strides `rsa`, `csa`) and C's m x n (row stride `rsc`, columns
/// contiguous) lie in live memory, `bp` holds `packed_len(k, n)` floats, and C aliases
/// neither A nor B.
///
/// # Panics
/// If `bias` holds fewer than `n` floats.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_packed(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: *const f32,
    rsa: isize,
    csa: isize,
    bp: *const f32,
    beta: f32,
    c: *mut f32,
    rsc: isize,
    bias: Option<&[f32]>,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(bias.is_none_or(|b| b.len() >= n), "sgemm_packed: bias of n");
    let finish = Finish {
        col_bias: bias.map_or(std::ptr::null(), <[f32]>::as_ptr),
        ..Finish::NONE
    };
    let p = Product {
        m,
        k,
        alpha,
        a,
        rsa,
        csa,
        b: bp,
        rsb: PACK_WIDTH as isize,
        beta,
        c,
        rsc,
        finish,
    };
    let done = match kernels() {
        // SAFETY: `isa` comes from `Isa::detect` (or a test's pick from
        // `Isa::available`); m > 0 (returned above) and k > 0 (the guard); A, C and the
        // packed B are as this function's caller vouched for.
        Some(isa) if k > 0 => unsafe { run_packed(isa, &p, n) },
        _ => 0,
    };
    let done = match kernels() {
        Some(isa) if k > 0 && done < n => {
            let panel = done / PACK_WIDTH;
            let tail_p = Product {
                b: bp.wrapping_add(panel * k * PACK_WIDTH),
                ..p
            };
            // SAFETY: as for `run_packed` above; the columns `done..n` are the last
            // panel's (`done` is a whole number of vectors, and a panel a whole number
            // of vectors), its rows PACK_WIDTH apart from `tail_p.b`, inside the packed
            // B the caller vouched for.
            done + unsafe { tail(isa, &tail_p, n - done, done, done % PACK_WIDTH) }
        }
        _ => done,
    };
    // What is left (all of it without the kernels): matrixmultiply, panel by panel,
    // reading each in place.
    let mut j0 = done;
    while j0 < n {
        let panel = j0 / PACK_WIDTH;
        let end = ((panel + 1) * PACK_WIDTH).min(n);
        // SAFETY: columns j0..end lie in panel `panel` (end is at most the panel's last
        // column), whose k rows PACK_WIDTH apart start `panel * k * PACK_WIDTH` floats
        // into `bp`, inside the `packed_len(k, n)` floats the caller vouched for; the
        // matching columns of C, and A, are the caller's.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                end - j0,
                alpha,
                a,
                rsa,
                csa,
                bp.add(panel * k * PACK_WIDTH + j0 % PACK_WIDTH),
                PACK_WIDTH as isize,
                1,
                beta,
                c.add(j0),
                rsc,
                1,
            );
        }
        j0 = end;
    }
    if let Some(bias) = bias {
        for i in 0..m {
            // SAFETY: row i's columns `done..n` of C, the caller's, written just above
            // by matrixmultiply (k 0 included: beta times C); no reference to them is
            // live.
            let row = unsafe {
                std::slice::from_raw_parts_mut(c.offset(i as isize * rsc).add(done), n - done)
            };
            row.iter_mut()
                .zip(&bias[done..n])
                .for_each(|(v, b)| *v += b);
        }
    }
}

thread_local! {
    /// The calling thread's copies of a tail's columns of B and C (see [`tail`]).
    static TAIL: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Computes C's last `r` columns (from `j0`), fewer than a vector, with the kernels: the
/// matching columns of B (from `b0` in `p.b`'s rows: `j0` in a plain B, the offset in
/// its panel in a packed one) are copied into a zero-padded vector-wide strip, C's likewise when it is read (`beta` non-zero), the
/// kernel runs on the strips and the `r` columns are copied back. Returns `r`, or 0
/// where the kernel does not take the strip (matrixmultiply computes it then).
///
/// Before, matrixmultiply computed these columns, and it packs all of A for them on
/// every call: a 1x1 convolution over a 7x7 map (n 49) with 2048 input channels spent
/// more time packing its weights for the last column than multiplying the 48 others.
/// The strip costs a vector's work for `r` columns instead, and each element stays the
/// sum over k in order, one FMA per term, as in every other column: the same bits as
/// the product of any width around it.
///
/// # Safety
/// As [`sgemm`], with `isa` available on this CPU, `p.m` and `p.k` non-zero, B's and C's
/// column strides 1, and the columns addressed as above inside the caller's blocks.
unsafe fn tail(isa: Isa, p: &Product, r: usize, j0: usize, b0: usize) -> usize {
    let lanes = isa.lanes();
    if r == 0 || r >= lanes {
        return 0;
    }
    if r == 1 && p.csa == 1 {
        // SAFETY: `isa` is this CPU's, m and k non-zero, A's rows contiguous (the
        // guard), C's column `j0` and B's column `b0` the caller's (this function's
        // contract): `column`'s contract.
        return unsafe { column(isa, p, j0, b0) };
    }
    let (m, k) = (p.m, p.k);
    TAIL.with(|cell| {
        let mut buf = cell.take();
        // B's strip, C's, and the column bias's.
        let need = (k + m + 1) * lanes;
        if buf.len() < need {
            buf = vec![0.0; need];
        }
        let (bt, rest) = buf.split_at_mut(k * lanes);
        let (ct, biast) = rest.split_at_mut(m * lanes);
        let biast = &mut biast[..lanes];
        let mut finish = p.finish;
        if !finish.col_bias.is_null() {
            // SAFETY: columns j0..j0 + r of the column bias, which covers C's columns.
            let src = unsafe { std::slice::from_raw_parts(finish.col_bias.add(j0), r) };
            biast[..r].copy_from_slice(src);
            biast[r..].fill(0.0);
            finish.col_bias = biast.as_ptr();
        }
        for (i, row) in bt.chunks_exact_mut(lanes).enumerate() {
            // SAFETY: row i's columns b0..b0 + r of B, inside the caller's block.
            let src =
                unsafe { std::slice::from_raw_parts(p.b.offset(i as isize * p.rsb).add(b0), r) };
            row[..r].copy_from_slice(src);
            row[r..].fill(0.0);
        }
        if p.beta != 0.0 {
            for (i, row) in ct.chunks_exact_mut(lanes).enumerate() {
                // SAFETY: row i's columns j0..j0 + r of C, initialized (beta non-zero).
                let src = unsafe {
                    std::slice::from_raw_parts(p.c.offset(i as isize * p.rsc).add(j0), r)
                };
                row[..r].copy_from_slice(src);
                row[r..].fill(0.0);
            }
        }
        let strip = Product {
            b: bt.as_ptr(),
            rsb: lanes as isize,
            c: ct.as_mut_ptr(),
            rsc: lanes as isize,
            finish,
            ..*p
        };
        // SAFETY: `isa` is this CPU's; the strip's B is k x lanes, its C m x lanes and
        // its column bias lanes floats, all this thread's buffer (taken out of the cell:
        // nothing else refers to it), aliasing neither A nor each other; A is the
        // caller's; a row bias is the caller's m floats.
        let done = unsafe { run(isa, &strip, lanes) };
        if done == lanes {
            for (i, row) in ct.chunks_exact(lanes).enumerate() {
                // SAFETY: row i's columns j0..j0 + r of C, the caller's, distinct from
                // the buffer.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(p.c.offset(i as isize * p.rsc).add(j0), r)
                };
                dst.copy_from_slice(&row[..r]);
            }
        }
        cell.set(buf);
        if done == lanes { r } else { 0 }
    })
}

/// The packed product's leading columns that whole vectors cover; returns how many.
///
/// # Safety
/// As [`sgemm_packed`], with `m` and `k` non-zero and `isa` available on this CPU.
unsafe fn run_packed(isa: Isa, p: &Product, n: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: this function's contract is `x86::run_packed`'s.
        unsafe { x86::run_packed(isa, p, n) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, p, n);
        unreachable!("Isa::available finds no kernel on this architecture")
    }
}

/// C's column `j0` of `p`, from B's column `b0` (`x86::column`); returns 1.
///
/// # Safety
/// As [`tail`] for one column, with A's rows contiguous (`p.csa` 1).
unsafe fn column(isa: Isa, p: &Product, j0: usize, b0: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: this function's contract is `x86::column`'s.
        unsafe { x86::column(isa, p, j0, b0) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, p, j0, b0);
        unreachable!("Isa::available finds no kernel on this architecture")
    }
}

/// The largest panel copy a product may use (2 MiB: k up to 10,922 on AVX-512); a
/// product of more than one row tile over a longer k goes to matrixmultiply.
const MAX_PANEL_FLOATS: usize = 1 << 19;

thread_local! {
    /// The calling thread's panel copy (see `x86::panel`).
    static PANEL: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// One product with unit column strides in B and C: the arguments every tile shares.
struct Product {
    m: usize,
    k: usize,
    alpha: f32,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    beta: f32,
    c: *mut f32,
    rsc: isize,
    /// What a tile does to its sums as it stores them (see [`sgemm_finished`]).
    finish: Finish,
}

/// A product's finish, applied to each element after `alpha` and `beta`: plus its row's
/// `bias` (`m` floats, none where null), plus its column's `col_bias` (`n` floats from
/// C's first column, none where null), then `epilogue`.
#[derive(Clone, Copy)]
struct Finish {
    bias: *const f32,
    col_bias: *const f32,
    epilogue: Option<Epilogue>,
}

impl Finish {
    const NONE: Finish = Finish {
        bias: std::ptr::null(),
        col_bias: std::ptr::null(),
        epilogue: None,
    };

    fn is_none(&self) -> bool {
        self.bias.is_null() && self.col_bias.is_null() && self.epilogue.is_none()
    }
}

/// Computes the leading columns of `p` that whole vectors cover; returns how many.
///
/// # Safety
/// As [`sgemm`], with B and C's column strides 1, `m` and `k` non-zero, and `isa`
/// available on this CPU.
unsafe fn run(isa: Isa, p: &Product, n: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if p.m <= 2 * x86::MR && p.alpha == 1.0 && p.beta == 0.0 && p.finish.is_none() {
            // A plain product of few rows (activations times weights): k-blocked, so
            // that B streams (see `x86::blocked`).
            // SAFETY: `isa` and `p` as this function's contract says, which is
            // `run_blocked`'s; the guard gives the at most two row tiles, alpha 1 and beta
            // 0 its result needs.
            return unsafe { x86::run_blocked(isa, p, n) };
        }
        let floats = x86::panel_floats(p.k);
        if p.m <= x86::MR {
            // One row tile: nothing reads a panel twice, so nothing is copied.
            // SAFETY: `isa` and `p` as this function's contract says; with at most MR
            // rows `x86::panel` never copies, so the null buffer is never touched.
            return unsafe { x86::run(isa, p, n, std::ptr::null_mut()) };
        }
        if floats > MAX_PANEL_FLOATS {
            return 0;
        }
        PANEL.with(|cell| {
            // Taken out of the cell for the call (nothing here re-enters), kept after:
            // a thread allocates its panel once, at the largest k it meets.
            let mut buf = cell.take();
            if buf.len() < floats {
                buf = vec![0.0; floats];
            }
            // SAFETY: `isa` and `p` as this function's contract says; `buf` holds at
            // least `panel_floats(k)` floats (grown just above), is this thread's own
            // (taken out of the thread-local cell) and aliases none of A, B or C.
            let done = unsafe { x86::run(isa, p, n, buf.as_mut_ptr()) };
            cell.set(buf);
            done
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, p, n);
        unreachable!("Isa::available finds no kernel on this architecture")
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Isa, PREFETCH_ROWS, Product};
    use crate::ops::simd::{Avx2, Avx512, Simd};

    /// Rows per tile in both kernels.
    pub(super) const MR: usize = super::ROW_TILE;

    /// Floats of panel copy a product needs (a panel of the widest kernel over k).
    pub(super) fn panel_floats(k: usize) -> usize {
        k * 3 * 16
    }

    /// An entry point of a kernel family: `$name(isa, args)` runs `$generic::<S>(args)`
    /// for `isa`'s vector set, compiled with that set's features enabled (one copy per
    /// set), and returns the columns done.
    macro_rules! entry {
        ($(#[$doc:meta])* $name:ident => $generic:ident($($arg:ident: $ty:ty),*)) => {
            $(#[$doc])*
            pub(super) unsafe fn $name(isa: Isa, $($arg: $ty),*) -> usize {
                /// # Safety
                /// This CPU has AVX-512F, and the operands are as `$name` requires.
                #[target_feature(enable = "avx512f")]
                unsafe fn avx512($($arg: $ty),*) -> usize {
                    // SAFETY: this CPU has AVX-512F (this function's contract), which
                    // `Avx512`'s methods need; the operands are as `$generic` requires
                    // (`$name`'s contract is `$generic`'s).
                    unsafe { $generic::<Avx512>($($arg),*) }
                }
                /// # Safety
                /// This CPU has AVX2 and FMA, and the operands are as `$name` requires.
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) -> usize {
                    // SAFETY: this CPU has AVX2 and FMA (this function's contract), which
                    // `Avx2`'s methods need; the operands are as `$generic` requires.
                    unsafe { $generic::<Avx2>($($arg),*) }
                }
                // SAFETY: the caller promises that this CPU has `isa` (it came from
                // `Isa::detect` or `Isa::available`), so each arm calls the version whose
                // features are present; the operands are forwarded under the same contract.
                unsafe {
                    match isa {
                        Isa::Avx512 => avx512($($arg),*),
                        Isa::Avx2 => avx2($($arg),*),
                    }
                }
            }
        };
    }

    entry!(
        /// # Safety
        /// This CPU has `isa`; `p` is as `super::run` requires (B and C's columns
        /// contiguous, m and k non-zero, every element of the m x k, k x n and m x n
        /// blocks inside live memory, C aliasing neither A nor B); when `p.m > MR`,
        /// `buf` is valid for reads and writes of [`panel_floats`]`(p.k)` floats and
        /// aliases none of A, B or C.
        run => columns(p: &Product, n: usize, buf: *mut f32)
    );

    entry!(
        /// # Safety
        /// As [`run`], without the buffer. (A correct result also needs `alpha` 1 and
        /// `beta` 0; `p.m` of at most two row tiles is what the blocking is for.)
        run_blocked => blocked(p: &Product, n: usize)
    );

    entry!(
        /// # Safety
        /// As `super::run_packed`: this CPU has `isa`, m and k are non-zero, A and C as
        /// in [`run`], and `p.b` holds B packed by `pack_b`, `packed_len(k, n)` floats
        /// (`p.rsb` is `PACK_WIDTH`).
        run_packed => packed(p: &Product, n: usize)
    );

    entry!(
        /// # Safety
        /// As `super::column`: this CPU has `isa`; `p.m` and `p.k` are non-zero, A's
        /// rows are contiguous (`p.csa` 1), and C's column `j0`, B's column `b0` (in
        /// `p.b`'s rows, `p.rsb` apart) and the finish's operands are inside live memory
        /// with C aliasing neither A nor B.
        column => one_column(p: &Product, j0: usize, b0: usize)
    );

    /// Row groups of one vector each a column's kernel sums at once: four independent
    /// FMA chains, so the chain of one group waits on the FMA's latency while the
    /// others' transposes run.
    const GROUPS: usize = 4;

    /// C's column `j0` alone (a matrix times a vector: a 1x1 convolution over a 1x1
    /// map, the fully connected layers of a squeeze-and-excitation block), the rows in
    /// the lanes: for each block of `LANES` k, the group's rows of A (contiguous) are
    /// loaded and transposed in registers into columns of A, each multiplied by its
    /// element of B broadcast. Each row's sum is still the sum over k in order, one FMA
    /// per term from zero, finished as a tile finishes it: the bits of the column in any
    /// product around it.
    ///
    /// Why: through the tile kernels, which put columns in the lanes, one column filled
    /// one lane of every FMA (a 256 -> 64 layer: 16k FMAs and a k x 16 strip of B
    /// copied), three times what the transposes cost here.
    ///
    /// # Safety
    /// As [`column()`], on `S`'s set.
    #[inline(always)]
    unsafe fn one_column<S: Simd>(p: &Product, j0: usize, b0: usize) -> usize {
        let l = S::LANES;
        let (m, k) = (p.m, p.k);
        // SAFETY: the set is this CPU's. A is read at rows `i0 + g l + r < m` (loads of
        // rows past m are skipped), columns `k0..k0 + kn <= k`, contiguous (`csa` 1);
        // B at rows `k0 + t < k` of column `b0`; C at rows below m of column `j0`; the
        // bias at rows below m, the column bias at `j0`: all the caller's (the
        // contract).
        unsafe {
            let mut i0 = 0;
            while i0 < m {
                let groups = (m - i0).div_ceil(l).min(GROUPS);
                let mut acc = [S::zero(); GROUPS];
                let mut k0 = 0;
                while k0 < k {
                    let kn = (k - k0).min(l);
                    let mut bs = [0.0f32; 16];
                    for (t, b) in bs[..kn].iter_mut().enumerate() {
                        *b = *p.b.offset((k0 + t) as isize * p.rsb).add(b0);
                    }
                    for (g, acc) in acc[..groups].iter_mut().enumerate() {
                        let g0 = i0 + g * l;
                        let rows = (m - g0).min(l);
                        let mut cols = [S::zero(); 16];
                        // To the constant LANES with a test per row, so that the loop
                        // unrolls and the block stays in registers.
                        for (r, v) in cols[..l].iter_mut().enumerate() {
                            if r < rows {
                                let src = p.a.offset((g0 + r) as isize * p.rsa).add(k0);
                                *v = if kn == l {
                                    S::load(src)
                                } else {
                                    S::load_first(src, kn)
                                };
                            }
                        }
                        S::transpose(&mut cols[..l]);
                        for (t, col) in cols[..l].iter().enumerate() {
                            if t < kn {
                                *acc = S::fma(*col, S::splat(bs[t]), *acc);
                            }
                        }
                    }
                    k0 += kn;
                }
                for (g, &sum) in acc[..groups].iter().enumerate() {
                    let g0 = i0 + g * l;
                    let rows = (m - g0).min(l);
                    let mut tile = [[sum]];
                    let s = &mut tile[0][0];
                    // The tile's finish, step by step (see `tile`).
                    if p.alpha != 1.0 {
                        *s = S::mul(S::splat(p.alpha), *s);
                    }
                    let mut lanes = [0.0f32; 16];
                    if p.beta != 0.0 {
                        for (r, v) in lanes[..rows].iter_mut().enumerate() {
                            *v = *p.c.offset((g0 + r) as isize * p.rsc).add(j0);
                        }
                        *s = S::fma(S::splat(p.beta), S::load(lanes.as_ptr()), *s);
                    }
                    let bias = p.finish.bias;
                    if !bias.is_null() {
                        *s = S::add(*s, S::load_first(bias.add(g0), rows));
                    }
                    let col_bias = p.finish.col_bias;
                    if !col_bias.is_null() {
                        *s = S::add(*s, S::splat(*col_bias.add(j0)));
                    }
                    if let Some(e) = p.finish.epilogue {
                        e.tile::<S, 1, 1>(&mut tile);
                    }
                    S::store(lanes.as_mut_ptr(), tile[0][0]);
                    for (r, &v) in lanes[..rows].iter().enumerate() {
                        *p.c.offset((g0 + r) as isize * p.rsc).add(j0) = v;
                    }
                }
                i0 += groups * l;
            }
        }
        1
    }

    /// A vector set's tile width: vectors per row of the widest tile.
    trait Panel: Simd {
        const NV: usize;
    }

    /// 24 sums in 32 registers: 8 rows x 3 vectors.
    impl Panel for Avx512 {
        const NV: usize = 3;
    }

    /// 16 registers: 8 rows by 1 vector, the same rows as AVX-512's tile so the two
    /// share all the tiling code. Per step: 1 load of B and 8 broadcasts for 8 FMAs, so
    /// this kernel is bound by loads rather than FMAs; it is not tuned (no machine
    /// without AVX-512 to measure on), only tested.
    impl Panel for Avx2 {
        const NV: usize = 1;
    }

    /// Where a tile reads its panel of B: row `p` of the panel is at `src + p * stride`;
    /// a tile that copies writes each row, dense, at `copy + p * V * LANES`.
    #[derive(Clone, Copy)]
    struct Source {
        src: *const f32,
        stride: isize,
        copy: *mut f32,
    }

    /// One `R` x `V`-vector tile: rows `i0..i0 + R`, columns `j0..j0 + V * LANES`, over
    /// k in `k0..k0 + kn`, the panel of B (from row k0) read from `b`. `FETCH` prefetches
    /// B's rows ahead, `COPY` writes the panel to `b.copy`, `LOAD` starts from the partial
    /// sums in C (an earlier block of k) instead of zero. They are constants so that each
    /// variant's loop is straight-line: with a runtime flag the compiler kept the sums on
    /// the stack. Row `i` of A is one pointer plus a loop-invariant offset.
    ///
    /// # Safety
    /// This CPU has `S`'s set. Rows `i0..i0 + R` of A and C exist (`i0 + R <= p.m`), C's
    /// columns `j0..j0 + V * S::LANES` exist, and `k0 + kn <= p.k`; every element of A,
    /// B and C addressed so is inside live memory and C aliases neither A nor B. For
    /// each step `t < kn`, the `V * S::LANES` floats at `b.src + t * b.stride` are
    /// readable (row `k0 + t` of the panel). With `COPY`, `b.copy` is valid for writes of
    /// `kn * V * S::LANES` floats that alias nothing else read here. With `LOAD`, or
    /// with `p.beta` non-zero, C's tile is initialized. A non-null `p.finish.bias` holds
    /// `p.m` floats, a non-null `p.finish.col_bias` C's columns from 0 to at least
    /// `j0 + V * S::LANES`.
    #[inline(always)]
    unsafe fn tile<
        S: Panel,
        const R: usize,
        const V: usize,
        const FETCH: bool,
        const COPY: bool,
        const LOAD: bool,
    >(
        p: &Product,
        i0: usize,
        j0: usize,
        (k0, kn): (usize, usize),
        b: Source,
    ) {
        // SAFETY: the set is this CPU's (the contract), which every `S::` method needs.
        // C is read (`LOAD`, `beta`) and written at rows `i0 + i`, `i < R`, columns
        // `j0 + v * LANES ..` for `v < V`: inside C's block by the contract. A is read at
        // (i0 + i, k0 + t) for `t < kn`: inside A's m x k block. B is read at `brow`,
        // which is the contract's row `k0 + t` of the panel at step t, and the copy
        // written at `copy`, `V * LANES` floats per step, inside the `kn * V * LANES`
        // floats the contract gives. The bias is read at rows `i0 + i < p.m`, inside
        // its `p.m` floats, the column bias at the tile's columns, inside its floats.
        // `a` and `brow` step past their last element after the last step, and the
        // prefetches run ahead of B's end, so those use wrapping arithmetic: no pointer
        // outside the allocations is made with `offset`/`add`.
        unsafe {
            let mut acc = [[S::zero(); V]; R];
            if LOAD {
                for (i, row) in acc.iter_mut().enumerate() {
                    let crow = p.c.offset((i0 + i) as isize * p.rsc).add(j0);
                    for (v, s) in row.iter_mut().enumerate() {
                        *s = S::load(crow.add(v * S::LANES));
                    }
                }
            }
            let mut offs = [0isize; R];
            for (i, o) in offs.iter_mut().enumerate() {
                *o = i as isize * p.rsa;
            }
            let mut a = p.a.offset(i0 as isize * p.rsa + k0 as isize * p.csa);
            let (mut brow, mut copy) = (b.src, b.copy);
            for _ in 0..kn {
                if FETCH {
                    // A prefetch never faults, so its address may run past B's end; it
                    // is computed with wrapping arithmetic for the same reason.
                    let ahead = brow.wrapping_offset(PREFETCH_ROWS as isize * b.stride);
                    for v in 0..V {
                        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(v * S::LANES).cast());
                    }
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(V * S::LANES - 1).cast());
                }
                let mut bv = [S::zero(); V];
                for (v, x) in bv.iter_mut().enumerate() {
                    *x = S::load(brow.add(v * S::LANES));
                }
                if COPY {
                    for (v, x) in bv.iter().enumerate() {
                        S::store(copy.add(v * S::LANES), *x);
                    }
                    copy = copy.add(V * S::LANES);
                }
                for (row, &o) in acc.iter_mut().zip(&offs) {
                    let av = S::splat(*a.offset(o));
                    for (s, x) in row.iter_mut().zip(&bv) {
                        *s = S::fma(av, *x, *s);
                    }
                }
                a = a.wrapping_offset(p.csa);
                brow = brow.wrapping_offset(b.stride);
            }
            let alpha = S::splat(p.alpha);
            let beta = S::splat(p.beta);
            // Each step its own branch-free loop over the tile, so that the compiler
            // unrolls them all and the sums stay in registers (a branch per vector left
            // them on the stack, a store after every FMA).
            if p.alpha != 1.0 {
                for row in acc.iter_mut() {
                    row.iter_mut().for_each(|s| *s = S::mul(alpha, *s));
                }
            }
            // beta 0 must not read C: it may hold NaN or uninitialized values.
            if p.beta != 0.0 {
                for (i, row) in acc.iter_mut().enumerate() {
                    let crow = p.c.offset((i0 + i) as isize * p.rsc).add(j0);
                    for (v, s) in row.iter_mut().enumerate() {
                        *s = S::fma(beta, S::load(crow.add(v * S::LANES)), *s);
                    }
                }
            }
            // The sum plus the bias, rounded once: the bits of the bias stored in C
            // first and added with beta 1.
            let bias = p.finish.bias;
            if !bias.is_null() {
                for (i, row) in acc.iter_mut().enumerate() {
                    let b = S::splat(*bias.add(i0 + i));
                    row.iter_mut().for_each(|s| *s = S::add(*s, b));
                }
            }
            // A row of bias, one vector per column vector of the tile: the same rounding
            // as the product stored and the row added after it.
            let col_bias = p.finish.col_bias;
            if !col_bias.is_null() {
                for v in 0..V {
                    let b = S::load(col_bias.add(j0 + v * S::LANES));
                    acc.iter_mut().for_each(|row| row[v] = S::add(row[v], b));
                }
            }
            // The activation's kind is matched outside the tile's loops (see
            // `Epilogue::tile`): a branch per vector would leave the sums on the stack.
            if let Some(e) = p.finish.epilogue {
                e.tile::<S, R, V>(&mut acc);
            }
            for (i, row) in acc.iter().enumerate() {
                let crow = p.c.offset((i0 + i) as isize * p.rsc).add(j0);
                for (v, s) in row.iter().enumerate() {
                    S::store(crow.add(v * S::LANES), *s);
                }
            }
        }
    }

    /// Runs the tile at `i0` for the runtime number of rows left, fewer than [`MR`].
    ///
    /// # Safety
    /// As [`tile`] with `R = p.m - i0` rows, without a copy. (A count of rows outside
    /// `1..MR` panics.)
    #[inline(always)]
    unsafe fn short_tile<S: Panel, const V: usize, const FETCH: bool, const LOAD: bool>(
        p: &Product,
        i0: usize,
        j0: usize,
        ks: (usize, usize),
        b: Source,
    ) {
        // SAFETY: each arm runs `tile` with R equal to `p.m - i0`, the rows this
        // function's contract covers, and COPY false; the other operands are forwarded.
        unsafe {
            match p.m - i0 {
                1 => tile::<S, 1, V, FETCH, false, LOAD>(p, i0, j0, ks, b),
                2 => tile::<S, 2, V, FETCH, false, LOAD>(p, i0, j0, ks, b),
                3 => tile::<S, 3, V, FETCH, false, LOAD>(p, i0, j0, ks, b),
                4 => tile::<S, 4, V, FETCH, false, LOAD>(p, i0, j0, ks, b),
                5 => tile::<S, 5, V, FETCH, false, LOAD>(p, i0, j0, ks, b),
                6 => tile::<S, 6, V, FETCH, false, LOAD>(p, i0, j0, ks, b),
                7 => tile::<S, 7, V, FETCH, false, LOAD>(p, i0, j0, ks, b),
                _ => unreachable!("a short tile has fewer than MR rows"),
            }
        }
    }

    /// Runs the `V`-vector panel at `j0` over every row tile and all of k. The first
    /// tile reads B in place, prefetching, and (when other tiles follow) copies the
    /// panel into `buf` as it goes; the others read that dense copy, which the hardware
    /// prefetchers follow and which does not alias in L1 the way rows kilobytes apart do.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `p` is as `run` requires and columns
    /// `j0..j0 + V * S::LANES` are inside its n; when `p.m > MR`, `buf` is valid for
    /// reads and writes of `p.k * V * S::LANES` floats and aliases none of A, B or C.
    #[inline(always)]
    unsafe fn panel<S: Panel, const V: usize>(p: &Product, j0: usize, buf: *mut f32) {
        let ks = (0, p.k);
        // SAFETY: `p.b + j0` is B's element (0, j0), inside B; from it, row t of the
        // panel is `rsb * t` further, B's row t, columns j0.. inside B for every t < k.
        // Up to MR rows the tiles do not copy, so `buf` is untouched; beyond, the first
        // tile copies the panel into `buf` (k rows of `V * LANES` floats, what the
        // contract gives) and the other row tiles read that copy densely after it is
        // written. Every tile's rows are below `p.m`.
        unsafe {
            let first = Source {
                src: p.b.add(j0),
                stride: p.rsb,
                copy: buf,
            };
            if p.m < MR {
                return short_tile::<S, V, true, false>(p, 0, j0, ks, first);
            }
            if p.m == MR {
                return tile::<S, MR, V, true, false, false>(p, 0, j0, ks, first);
            }
            tile::<S, MR, V, true, true, false>(p, 0, j0, ks, first);
            let copied = Source {
                src: buf,
                stride: (V * S::LANES) as isize,
                copy: std::ptr::null_mut(),
            };
            tiles_from::<S, V, false>(p, MR, j0, ks, copied);
        }
    }

    /// The row tiles from `i0` on (whole ones, then the short rest) of the `V`-vector
    /// strip at `j0`, reading `b` with neither prefetch nor copy.
    ///
    /// # Safety
    /// As [`tile`] for every row from `i0` to `p.m`, without a copy.
    #[inline(always)]
    unsafe fn tiles_from<S: Panel, const V: usize, const LOAD: bool>(
        p: &Product,
        mut i0: usize,
        j0: usize,
        ks: (usize, usize),
        b: Source,
    ) {
        // SAFETY: the whole tiles cover rows `i0..i0 + MR` with `i0 + MR <= p.m`, the
        // short one the rest (`i0 < p.m`); the contract covers every row from the first
        // `i0` to `p.m`.
        unsafe {
            while i0 + MR <= p.m {
                tile::<S, MR, V, false, false, LOAD>(p, i0, j0, ks, b);
                i0 += MR;
            }
            if i0 < p.m {
                short_tile::<S, V, false, LOAD>(p, i0, j0, ks, b);
            }
        }
    }

    /// The `V`-vector panel at `j0` over k in `ks`, for a product of at most two row
    /// tiles (see [`blocked`]): every tile reads B in place, the second from cache.
    ///
    /// # Safety
    /// This CPU has `S`'s set; `p` is as `run` requires, columns `j0..j0 + V * S::LANES`
    /// are inside its n and `ks.0 + ks.1 <= p.k`. With `LOAD`, C's columns of this panel
    /// hold the sums of an earlier block (so are initialized).
    #[inline(always)]
    unsafe fn block_panel<S: Panel, const V: usize, const LOAD: bool>(
        p: &Product,
        j0: usize,
        ks: (usize, usize),
    ) {
        // SAFETY: `p.b + ks.0 * rsb + j0` is B's element (ks.0, j0) with `ks.0 < k`,
        // inside B, and each of the `ks.1` rows from it (rsb apart) is a row of B below
        // k; the tiles cover rows 0..m, as `tiles_from` requires.
        unsafe {
            let b = Source {
                src: p.b.offset(ks.0 as isize * p.rsb).add(j0),
                stride: p.rsb,
                copy: std::ptr::null_mut(),
            };
            tiles_from::<S, V, LOAD>(p, 0, j0, ks, b);
        }
    }

    /// Rows of B one block of [`blocked`] spans: the rows a panel step touches are this
    /// many sequential streams, which the L2 streamer follows (it tracks 32).
    const BLOCK_ROWS: usize = 16;

    /// A product of few rows (see `run`): k runs in blocks of [`BLOCK_ROWS`] rows
    /// outermost and the column panels inside them, so each block reads its rows of B
    /// front to back, a few lines per row per panel, as the hardware prefetchers expect;
    /// with the panels outermost every row of B is a separate strided visit per panel,
    /// and those fetches run into the core's few outstanding-miss slots. The sums of an
    /// earlier block are kept in C and reloaded, which gives the same bits as keeping
    /// them in registers. Returns the columns done.
    ///
    /// # Safety
    /// As `run_blocked`: this CPU has `S`'s set, and `p` with `n` columns is as `run`
    /// requires.
    #[inline(always)]
    unsafe fn blocked<S: Panel>(p: &Product, n: usize) -> usize {
        let width = S::NV * S::LANES;
        let full = n / width * width;
        let rest = (n - full) / S::LANES;
        let mut k0 = 0;
        while k0 < p.k {
            let ks = (k0, BLOCK_ROWS.min(p.k - k0));
            let mut j0 = 0;
            // SAFETY: the panels cover columns `j0..j0 + width` with `j0 + width <= full
            // <= n`, then `rest` vectors from `full`, below n; `ks` is a block of k inside
            // it (`ks.1 <= p.k - k0`). The first block (`k0 == 0`) starts from zero; the
            // later ones load the sums the earlier blocks stored into the same columns.
            unsafe {
                while j0 < full {
                    match (S::NV, k0 == 0) {
                        (3, true) => block_panel::<S, 3, false>(p, j0, ks),
                        (3, false) => block_panel::<S, 3, true>(p, j0, ks),
                        (1, true) => block_panel::<S, 1, false>(p, j0, ks),
                        (1, false) => block_panel::<S, 1, true>(p, j0, ks),
                        _ => unreachable!("kernels are 1 or 3 vectors wide"),
                    }
                    j0 += width;
                }
                match (rest, k0 == 0) {
                    (0, _) => {}
                    (1, true) => block_panel::<S, 1, false>(p, j0, ks),
                    (1, false) => block_panel::<S, 1, true>(p, j0, ks),
                    (2, true) => block_panel::<S, 2, false>(p, j0, ks),
                    (2, false) => block_panel::<S, 2, true>(p, j0, ks),
                    _ => unreachable!("fewer than NV vectors remain"),
                }
            }
            k0 += ks.1;
        }
        full + rest * S::LANES
    }

    /// Every whole vector of columns: panels of `S::NV` vectors, then one narrower panel
    /// for what is left of them. Returns the columns done.
    ///
    /// # Safety
    /// As `run`: this CPU has `S`'s set, `p` with `n` columns is as `super::run`
    /// requires, and when `p.m > MR`, `buf` holds [`panel_floats`]`(p.k)` floats that
    /// alias none of A, B or C.
    #[inline(always)]
    unsafe fn columns<S: Panel>(p: &Product, n: usize, buf: *mut f32) -> usize {
        let width = S::NV * S::LANES;
        let mut j0 = 0;
        // SAFETY: each panel covers columns `j0..j0 + V * LANES` below n (whole panels
        // while `j0 + width <= n`, then `rest < NV` vectors of what is left); a panel
        // copies at most `k * NV * LANES <= k * 48 = panel_floats(k)` floats into `buf`
        // (NV * LANES is 48 for AVX-512 and 8 for AVX2).
        unsafe {
            while j0 + width <= n {
                match S::NV {
                    3 => panel::<S, 3>(p, j0, buf),
                    1 => panel::<S, 1>(p, j0, buf),
                    _ => unreachable!("kernels are 1 or 3 vectors wide"),
                }
                j0 += width;
            }
            let rest = (n - j0) / S::LANES;
            match rest {
                0 => {}
                1 => panel::<S, 1>(p, j0, buf),
                2 => panel::<S, 2>(p, j0, buf),
                _ => unreachable!("fewer than NV vectors remain"),
            }
            j0 + rest * S::LANES
        }
    }

    /// The `V`-vector strip at column `j0` of a packed product, its rows read at `src`
    /// ([`super::PACK_WIDTH`] floats apart): every row tile over all of k. The first
    /// tile prefetches the strip ahead of itself; the others find it in L2.
    ///
    /// # Safety
    /// This CPU has `S`'s set; A and C are as `run` requires, C's columns
    /// `j0..j0 + V * S::LANES` inside its n; for each of the `p.k` rows `t`, the
    /// `V * S::LANES` floats at `src + t * PACK_WIDTH` are readable (`p.rsb` is
    /// `PACK_WIDTH`).
    #[inline(always)]
    unsafe fn packed_strip<S: Panel, const V: usize>(p: &Product, j0: usize, src: *const f32) {
        let ks = (0, p.k);
        let b = Source {
            src,
            stride: p.rsb,
            copy: std::ptr::null_mut(),
        };
        // SAFETY: the source's k rows are the strip this function's contract makes
        // readable; the tiles cover rows 0..m of C's columns j0.., without a copy (so the
        // null copy pointer is never used).
        unsafe {
            if p.m < MR {
                return short_tile::<S, V, true, false>(p, 0, j0, ks, b);
            }
            tile::<S, MR, V, true, false, false>(p, 0, j0, ks, b);
            tiles_from::<S, V, false>(p, MR, j0, ks, b);
        }
    }

    /// Every whole vector of columns of a packed product, panel by panel, each in strips
    /// of up to `S::NV` vectors. Returns the columns done.
    ///
    /// # Safety
    /// As `run_packed`: this CPU has `S`'s set; m and k are non-zero; A and C (`n`
    /// columns) are as `run` requires, and `p.b` holds `packed_len(p.k, n)` floats.
    #[inline(always)]
    unsafe fn packed<S: Panel>(p: &Product, n: usize) -> usize {
        let width = super::PACK_WIDTH;
        let mut j0 = 0;
        while j0 < n {
            let vectors = (n - j0).min(width) / S::LANES;
            // SAFETY: `j0 < n` is a multiple of PACK_WIDTH, so panel `j0 / PACK_WIDTH` is
            // one of the `n.div_ceil(PACK_WIDTH)` panels and starts
            // `(j0 / PACK_WIDTH) * k * PACK_WIDTH = j0 * k` floats into `p.b`.
            let panel = unsafe { p.b.add(j0 * p.k) };
            let mut v = 0;
            while v < vectors {
                // SAFETY: `v * LANES < vectors * LANES <= PACK_WIDTH`: a column of the
                // panel's first row (k > 0), inside the panel.
                let src = unsafe { panel.add(v * S::LANES) };
                let jv = j0 + v * S::LANES;
                let step = (vectors - v).min(S::NV);
                // SAFETY: the strip is columns `jv..jv + step * LANES`, at most
                // `j0 + vectors * LANES <= n`, and inside the panel's PACK_WIDTH
                // columns; its k rows are PACK_WIDTH apart from `src`, inside the panel.
                // A and C are as this function's contract says.
                unsafe {
                    match step {
                        3 => packed_strip::<S, 3>(p, jv, src),
                        2 => packed_strip::<S, 2>(p, jv, src),
                        1 => packed_strip::<S, 1>(p, jv, src),
                        _ => unreachable!("kernels are 1 to 3 vectors wide"),
                    }
                }
                v += step;
            }
            if vectors * S::LANES < width {
                // The last panel, short of a vector: the rest is the caller's.
                return j0 + vectors * S::LANES;
            }
            j0 += width;
        }
        n
    }
}

#[cfg(test)]
mod tests;
