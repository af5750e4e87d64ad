//! The product's kernels against a float64 reference and against each other's bits.

use std::cell::Cell;

use super::*;

thread_local! {
    /// The kernels this thread's products run on, when a test says
    /// (`Some(None)`: matrixmultiply alone).
    pub(super) static FORCED: Cell<Option<Option<Isa>>> = const { Cell::new(None) };
}

/// The product in f64, for reference.
#[allow(clippy::too_many_arguments)]
fn naive(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: &[f32],
    (rsa, csa): (usize, usize),
    b: &[f32],
    (rsb, csb): (usize, usize),
    beta: f32,
    c: &[f32],
    rsc: usize,
) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k)
                .map(|p| a[i * rsa + p * csa] as f64 * b[p * rsb + j * csb] as f64)
                .sum();
            let prior = if beta == 0.0 {
                0.0
            } else {
                beta as f64 * c[i * rsc + j] as f64
            };
            out[i * n + j] = alpha as f64 * s + prior;
        }
    }
    out
}

fn values(len: usize, seed: u32) -> Vec<f32> {
    (0..len)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 16) as f32)
        .map(|v| v / 65536.0 - 0.5)
        .collect()
}

/// Every kernel this CPU has, then matrixmultiply alone.
fn isas() -> Vec<Option<Isa>> {
    let mut v: Vec<_> = Isa::available().into_iter().map(Some).collect();
    v.push(None);
    v
}

/// A product through `sgemm` on the kernels of `isa`, C starting as `c`.
#[allow(clippy::too_many_arguments)]
fn product(
    isa: Option<Isa>,
    (m, k, n): (usize, usize, usize),
    alpha: f32,
    a: &[f32],
    (rsa, csa): (usize, usize),
    b: &[f32],
    (rsb, csb): (usize, usize),
    beta: f32,
    mut c: Vec<f32>,
    rsc: usize,
) -> Vec<f32> {
    let last = |rows: usize, cols: usize, rs: usize, cs: usize| {
        (rows.max(1) - 1) * rs + (cols.max(1) - 1) * cs
    };
    assert!(last(m, k, rsa, csa) < a.len() && last(k, n, rsb, csb) < b.len());
    assert!(last(m, n, rsc, 1) < c.len());
    FORCED.with(|f| f.set(Some(isa)));
    // SAFETY: the asserts keep every addressed element inside its vector, and `c` is
    // owned here, so it aliases neither A nor B.
    unsafe {
        sgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            beta,
            c.as_mut_ptr(),
            rsc as isize,
            1,
        );
    }
    FORCED.with(|f| f.set(None));
    c
}

/// C (`m` rows `rsc` apart) against the reference `want` (m x n): every element within
/// 1e-4 relative, and the padding past column `n` still as in `before`.
fn check(c: &[f32], before: &[f32], want: &[f64], (m, n, rsc): (usize, usize, usize), what: &str) {
    for i in 0..m {
        for j in 0..rsc {
            let got = c[i * rsc + j];
            if j >= n {
                let was = before[i * rsc + j];
                assert_eq!(
                    got.to_bits(),
                    was.to_bits(),
                    "{what}: padding written at ({i}, {j})"
                );
                continue;
            }
            let w = want[i * n + j];
            assert!(
                (got as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{what}: ({i}, {j}) {got} vs {w}"
            );
        }
    }
}

/// Every row-tile remainder, every panel width and a ragged column tail, with A
/// transposed or not, B and C row-major with padding, alpha and beta, under each
/// kernel; and the same with a transposed B (matrixmultiply's side).
#[test]
fn matches_the_reference_over_tile_remainders_and_strides() {
    for &(m, k, n) in &[
        (1, 1, 16),
        (3, 7, 17),
        (8, 5, 48),
        (9, 33, 50),
        (16, 64, 97),
        (23, 19, 130),
        (2, 300, 8),
    ] {
        for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
            for (alpha, beta) in [(1.0f32, 0.0f32), (0.5, 2.0)] {
                let a = values(m * k, 1);
                let (rsa, csa) = if a_t { (1, m) } else { (k, 1) };
                let b = values((k + 2) * (n + 3), 2);
                let (rsb, csb) = if b_t { (1, k + 2) } else { (n + 3, 1) };
                let rsc = n + 5;
                // NaN in C: beta 0 must never read it.
                let init = if beta == 0.0 { f32::NAN } else { 0.25 };
                let before = vec![init; m * rsc];
                let want = naive(
                    m,
                    k,
                    n,
                    alpha,
                    &a,
                    (rsa, csa),
                    &b,
                    (rsb, csb),
                    beta,
                    &before,
                    rsc,
                );
                for isa in isas() {
                    let c = product(
                        isa,
                        (m, k, n),
                        alpha,
                        &a,
                        (rsa, csa),
                        &b,
                        (rsb, csb),
                        beta,
                        before.clone(),
                        rsc,
                    );
                    let what = format!("{isa:?} {m}x{k}x{n} a_t {a_t} b_t {b_t}");
                    check(&c, &before, &want, (m, n, rsc), &what);
                }
            }
        }
    }
}

/// A finished product has the bits of the three passes it replaces (the bias in C,
/// a product with beta 1, the activation over C) on every kernel and on
/// matrixmultiply alone: few and many rows, column tails, k of 0, with and without
/// a bias and an activation; C's spare columns are left alone.
#[test]
fn a_finished_product_has_the_bits_of_bias_product_and_activation() {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let ld = 70;
    for (m, k, n) in [
        (3, 24, 49),
        (8, 16, 64),
        (29, 40, 69),
        (17, 0, 5),
        (40, 3, 1),
    ] {
        let a = values(m * k.max(1), 11);
        let b = values(k.max(1) * ld, 12);
        let bias = values(m, 13);
        for isa in isas() {
            for with_bias in [false, true] {
                for e in [None, Some(Epilogue::HardSwish)] {
                    let mut want = vec![0.25f32; m * ld];
                    for i in 0..m {
                        want[i * ld..][..n].fill(if with_bias { bias[i] } else { 0.0 });
                    }
                    let beta = if with_bias { 1.0 } else { 0.0 };
                    let mut want =
                        product(isa, (m, k, n), 1.0, &a, (k, 1), &b, (ld, 1), beta, want, ld);
                    if let Some(e) = e {
                        for i in 0..m {
                            e.apply(&mut want[i * ld..][..n]);
                        }
                    }
                    let mut got = vec![0.25f32; m * ld];
                    FORCED.with(|f| f.set(Some(isa)));
                    // SAFETY: A is m x k (k apart), B k x n and C m x n (ld apart),
                    // inside their vectors; the bias has m floats.
                    unsafe {
                        sgemm_finished(
                            (m, k, n),
                            a.as_ptr(),
                            (k as isize, 1),
                            b.as_ptr(),
                            ld as isize,
                            got.as_mut_ptr(),
                            ld as isize,
                            with_bias.then_some(&bias[..]),
                            e,
                        );
                    }
                    FORCED.with(|f| f.set(None));
                    let case = format!("{isa:?} {m}x{k}x{n} bias {with_bias} {e:?}");
                    assert_eq!(bits(&got), bits(&want), "{case}");
                }
            }
        }
    }
}

/// The last columns short of a vector get the bits the same columns get inside a
/// wider product, with a C row stride past the columns, alpha scaling and beta reading
/// C, on every kernel: a single column (the rows in the lanes, `x86::one_column`) over
/// row counts short of a vector, of several row groups and past one pass of them, and
/// k short of a vector, with a remainder and long.
#[test]
fn a_column_tail_has_the_bits_of_a_wider_product() {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (m, k) in [(3, 77), (29, 200), (100, 9), (70, 64)] {
        let wide = 64;
        let a = values(m * k, 7);
        let b = values(k * wide, 8);
        for isa in Isa::available().into_iter().map(Some) {
            for (alpha, beta) in [(1.0f32, 0.0f32), (1.0, 0.5), (0.5, 2.0)] {
                let run = |n: usize| {
                    let c = vec![0.75f32; m * wide];
                    product(
                        isa,
                        (m, k, n),
                        alpha,
                        &a,
                        (k, 1),
                        &b,
                        (wide, 1),
                        beta,
                        c,
                        wide,
                    )
                };
                let all = run(wide);
                for n in [1, 5, 17, 49] {
                    let some = run(n);
                    for i in 0..m {
                        let (got, want) = (&some[i * wide..][..wide], &all[i * wide..][..n]);
                        assert_eq!(bits(&got[..n]), bits(want), "{isa:?} {m}x{k}x{n} row {i}");
                        assert!(got[n..].iter().all(|&v| v == 0.75), "{isa:?} wrote past n");
                    }
                }
            }
        }
    }
}

/// Each element is summed over k in order, so a row's result does not depend on
/// which tile (or remainder tile) it fell in, nor on whether k ran in blocks: the
/// same row computed alone (k-blocked), and within a larger product (a panel copy,
/// k whole), has the same bits, under each kernel.
#[test]
fn a_row_has_the_same_bits_in_any_tile() {
    let (m, k, n) = (21, 129, 64);
    let a = values(m * k, 3);
    let b = values(k * n, 4);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for isa in Isa::available().into_iter().map(Some) {
        let dense = |rows: usize, a: &[f32]| {
            let c = vec![0.0f32; rows * n];
            product(isa, (rows, k, n), 1.0, a, (k, 1), &b, (n, 1), 0.0, c, n)
        };
        let all = dense(m, &a);
        for i in 0..m {
            let one = dense(1, &a[i * k..][..k]);
            assert_eq!(bits(&one), bits(&all[i * n..][..n]), "{isa:?} row {i}");
        }
    }
}

/// A product through `sgemm_packed` on the kernels of `isa`, C starting as `c`.
#[allow(clippy::too_many_arguments)]
fn packed_product(
    isa: Option<Isa>,
    mkn: (usize, usize, usize),
    alpha: f32,
    a: &[f32],
    a_strides: (usize, usize),
    bp: &[f32],
    beta: f32,
    c: Vec<f32>,
    rsc: usize,
) -> Vec<f32> {
    let operands = (a, a_strides, bp);
    packed_biased(isa, mkn, alpha, operands, beta, c, rsc, None)
}

/// [`packed_product`] plus a row of `bias`, when given.
#[allow(clippy::too_many_arguments)]
fn packed_biased(
    isa: Option<Isa>,
    (m, k, n): (usize, usize, usize),
    alpha: f32,
    (a, (rsa, csa), bp): (&[f32], (usize, usize), &[f32]),
    beta: f32,
    mut c: Vec<f32>,
    rsc: usize,
    bias: Option<&[f32]>,
) -> Vec<f32> {
    assert!(m == 0 || k == 0 || (m - 1) * rsa + (k - 1) * csa < a.len());
    assert_eq!(bp.len(), packed_len(k, n));
    assert!(m == 0 || n == 0 || (m - 1) * rsc + n <= c.len());
    FORCED.with(|f| f.set(Some(isa)));
    // SAFETY: the asserts keep every addressed element inside its vector; `c` is
    // owned here.
    unsafe {
        sgemm_packed(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            bp.as_ptr(),
            beta,
            c.as_mut_ptr(),
            rsc as isize,
            bias,
        );
    }
    FORCED.with(|f| f.set(None));
    c
}

#[test]
fn packing_lays_panels_out_and_pads_the_last() {
    let (k, n) = (3, 50);
    let b: Vec<f32> = (0..k * n).map(|i| i as f32 + 1.0).collect();
    let bp = pack_b(&b, k, n);
    assert_eq!(bp.len(), 2 * k * PACK_WIDTH);
    for r in 0..k {
        for j in 0..n {
            let (p, col) = (j / PACK_WIDTH, j % PACK_WIDTH);
            assert_eq!(bp[p * k * PACK_WIDTH + r * PACK_WIDTH + col], b[r * n + j]);
        }
        // The last panel's columns past n are zeros.
        let tail = &bp[k * PACK_WIDTH + r * PACK_WIDTH..][..PACK_WIDTH];
        assert!(tail[n - PACK_WIDTH..].iter().all(|&v| v == 0.0));
    }
    assert!(pack_b(&[], 0, 7).is_empty());
    assert!(pack_b(&[], 4, 0).is_empty());
}

/// The packed product against the f64 reference over row-tile remainders, strips of
/// one to three vectors, panels short of a vector, padded and transposed A, alpha and
/// beta, under each kernel; and with the same bits as the unpacked product wherever
/// the kernels compute both (all but the last `n % 8` columns).
#[test]
fn packed_products_match_the_reference_and_the_unpacked_bits() {
    for &(m, k, n) in &[
        (1, 1, 1),
        (1, 5, 16),
        (3, 7, 17),
        (8, 5, 48),
        (9, 33, 50),
        (16, 64, 97),
        (17, 19, 144),
        (23, 129, 200),
        (2, 300, 8),
        (0, 4, 9),
        (4, 0, 9),
    ] {
        for a_t in [false, true] {
            for (alpha, beta) in [(1.0f32, 0.0f32), (0.5, 2.0)] {
                let a = values(m * k, 5);
                let (rsa, csa) = if a_t { (1, m) } else { (k, 1) };
                let b = values(k * n, 6);
                let bp = pack_b(&b, k, n);
                let rsc = n + 3;
                let init = if beta == 0.0 { f32::NAN } else { 0.25 };
                let before = vec![init; m * rsc];
                let want = naive(
                    m,
                    k,
                    n,
                    alpha,
                    &a,
                    (rsa, csa),
                    &b,
                    (n, 1),
                    beta,
                    &before,
                    rsc,
                );
                for isa in isas() {
                    let c = packed_product(
                        isa,
                        (m, k, n),
                        alpha,
                        &a,
                        (rsa, csa),
                        &bp,
                        beta,
                        before.clone(),
                        rsc,
                    );
                    let plain = if m * n * k == 0 {
                        before.clone()
                    } else {
                        product(
                            isa,
                            (m, k, n),
                            alpha,
                            &a,
                            (rsa, csa),
                            &b,
                            (n, 1),
                            beta,
                            before.clone(),
                            rsc,
                        )
                    };
                    // The kernels compute every column, the last ones short of a
                    // vector through their strip: the same bits as in place.
                    let kernel_cols = if isa.is_some() && k > 0 { n } else { 0 };
                    let what = format!("{isa:?} {m}x{k}x{n} a_t {a_t} packed");
                    check(&c, &before, &want, (m, n, rsc), &what);
                    for i in 0..m {
                        for j in 0..kernel_cols {
                            assert_eq!(
                                c[i * rsc + j].to_bits(),
                                plain[i * rsc + j].to_bits(),
                                "{what}: ({i}, {j}) packed vs in place"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// A packed product's bias row has the bits of the product stored and the row added
/// after it (the unfused `MatMul` and `Add`), under each kernel and matrixmultiply: one
/// row (the GEMV split), short row tiles, many tiles, columns short of a vector (the tail
/// strip) and past a panel, alpha and beta, k 0 (the bias alone). C starts as NaN where
/// beta is 0, so a column the bias misses, or a sum that reads C, shows.
#[test]
fn a_packed_products_bias_has_the_bits_of_an_add_after_it() {
    for &(m, k, n) in &[
        (1, 37, 16),
        (1, 300, 61),
        (5, 19, 53),
        (8, 64, 48),
        (19, 40, 97),
        (128, 128, 128),
        (3, 0, 21),
    ] {
        let a = values(m * k, 11);
        let bp = pack_b(&values(k * n, 12), k, n);
        let bias: Vec<f32> = values(n, 13).iter().map(|v| v * 64.0).collect();
        let rsc = n + 5;
        for (alpha, beta) in [(1.0f32, 0.0f32), (0.5, 2.0)] {
            let init = if beta == 0.0 { f32::NAN } else { 0.25 };
            let before = vec![init; m * rsc];
            for isa in isas() {
                let run = |bias| {
                    let operands = (&a[..], (k, 1), &bp[..]);
                    packed_biased(
                        isa,
                        (m, k, n),
                        alpha,
                        operands,
                        beta,
                        before.clone(),
                        rsc,
                        bias,
                    )
                };
                let mut want = run(None);
                for row in want.chunks_mut(rsc) {
                    row[..n].iter_mut().zip(&bias).for_each(|(v, b)| *v += b);
                }
                let got = run(Some(&bias));
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        g.to_bits(),
                        w.to_bits(),
                        "{isa:?} {m}x{k}x{n} alpha {alpha} beta {beta}: element {i}: {g} vs {w}"
                    );
                }
            }
        }
    }
}
