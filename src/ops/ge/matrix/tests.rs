//! GE's matrix ops against the index arithmetic of their TensorFlow / PyTorch meanings,
//! written out here with small literal expectations.

use crate::ops::testing::{infer1, run, run_f32, run_f32_with_shape, try_run};
use crate::ops::{Attr, DType, Tensor, TensorMeta, UNKNOWN};

/// `0, 1, 2, ...` in `shape`, as float32.
fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
}

/// `1, 2, 3, ...` in `shape`, as int32.
fn iota_i32(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(shape, &(1..=n as i32).collect::<Vec<_>>())
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor]) -> String {
    try_run(op, attrs, inputs, 1).unwrap_err().to_string()
}

fn i32s(t: &Tensor) -> Vec<i32> {
    t.slice::<i32>().unwrap().to_vec()
}

/// A batch of two 3x4 matrices: Tril keeps `j - i <= d`, Triu `j - i >= d`.
#[test]
fn tril_and_triu_keep_a_triangle_from_the_diagonal() {
    let x = iota(&[2, 3, 4]);
    let (rows, cols) = (3, 4);
    let want = |keep: &dyn Fn(i64, i64) -> bool| -> Vec<f32> {
        (0..24)
            .map(|e| {
                let (i, j) = ((e / cols) % rows, e % cols);
                if keep(i as i64, j as i64) {
                    e as f32
                } else {
                    0.0
                }
            })
            .collect()
    };
    // Default diagonal 0.
    assert_eq!(
        run_f32("Tril", &[], std::slice::from_ref(&x)),
        want(&|i, j| j <= i)
    );
    assert_eq!(
        run_f32("Triu", &[], std::slice::from_ref(&x)),
        want(&|i, j| j >= i)
    );
    for d in [-1i64, 2] {
        assert_eq!(
            run_f32(
                "Tril",
                &[("diagonal", Attr::Int(d))],
                std::slice::from_ref(&x)
            ),
            want(&|i, j| j - i <= d)
        );
        assert_eq!(
            run_f32(
                "Triu",
                &[("diagonal", Attr::Int(d))],
                std::slice::from_ref(&x)
            ),
            want(&|i, j| j - i >= d)
        );
    }
    // Literal: Triu of a 3x3 int32 matrix below the diagonal by one.
    let y = run(
        "Triu",
        &[("diagonal", Attr::Int(-1))],
        &[iota_i32(&[3, 3])],
        1,
    );
    assert_eq!(i32s(&y[0]), [1, 2, 3, 4, 5, 6, 0, 8, 9]);
    assert!(err("Tril", &[], &[iota(&[4])]).contains("rank"));
}

#[test]
fn eye_puts_ones_on_the_diagonal_of_each_batch_matrix() {
    let (shape, y) = run_f32_with_shape("Eye", &[("num_rows", Attr::Int(2))], &[]);
    assert_eq!((shape, y), (vec![2, 2], vec![1., 0., 0., 1.]));
    let (shape, y) = run_f32_with_shape(
        "Eye",
        &[
            ("num_rows", Attr::Int(2)),
            ("num_columns", Attr::Int(3)),
            ("batch_shape", Attr::Ints(vec![2])),
        ],
        &[],
    );
    assert_eq!(shape, [2, 2, 3]);
    assert_eq!(y, [1., 0., 0., 0., 1., 0., 1., 0., 0., 0., 1., 0.]);
    // dtype 3 is GE's int32.
    let y = run(
        "Eye",
        &[("num_rows", Attr::Int(3)), ("dtype", Attr::Int(3))],
        &[],
        1,
    );
    assert_eq!(y[0].dtype, DType::I32);
    assert_eq!(i32s(&y[0]), [1, 0, 0, 0, 1, 0, 0, 0, 1]);
    let y = run(
        "Eye",
        &[("num_rows", Attr::Int(2)), ("dtype", Attr::Int(1))],
        &[],
        1,
    );
    let halves: Vec<f32> = y[0]
        .slice::<half::f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(halves, [1., 0., 0., 1.]);
    assert!(err("Eye", &[], &[]).contains("num_rows"));
    assert!(
        err(
            "Eye",
            &[("num_rows", Attr::Int(2)), ("dtype", Attr::Int(99))],
            &[]
        )
        .contains("dtype")
    );
}

#[test]
fn diag_and_diag_part_are_tensorflows() {
    // [2] -> [2, 2]; [2, 2] -> [2, 2, 2, 2] with x[i, j] at (i, j, i, j).
    let (shape, y) = run_f32_with_shape("Diag", &[], &[iota(&[2])]);
    assert_eq!((shape, y), (vec![2, 2], vec![0., 0., 0., 1.]));
    let y = run("Diag", &[], &[iota_i32(&[2, 2])], 1).remove(0);
    assert_eq!(y.shape, [2, 2, 2, 2]);
    let v = i32s(&y);
    for (k, &e) in v.iter().enumerate() {
        let (i, j, p, q) = (k / 8, k / 4 % 2, k / 2 % 2, k % 2);
        let want = if (i, j) == (p, q) {
            (i * 2 + j + 1) as i32
        } else {
            0
        };
        assert_eq!(e, want, "at {k}");
    }
    let back = run("DiagPart", &[], &[y], 1).remove(0);
    assert_eq!(back.shape, [2, 2]);
    assert_eq!(i32s(&back), [1, 2, 3, 4]);
    assert!(err("DiagPart", &[], &[iota(&[2, 3])]).contains("input 0"));
    assert!(err("Diag", &[], &[Tensor::from_vec(&[], &[1.0f32])]).contains("rank"));
}

#[test]
fn matrix_diag_part_and_set_diag_work_per_batch_matrix() {
    // Two rows [1, 2], [3, 4] -> two diagonal matrices.
    let y = run("MatrixDiag", &[], &[iota_i32(&[2, 2])], 1).remove(0);
    assert_eq!(y.shape, [2, 2, 2]);
    assert_eq!(i32s(&y), [1, 0, 0, 2, 3, 0, 0, 4]);
    // A batch of two 2x3 matrices: diagonals (0, 4) and (6, 10).
    let x = iota(&[2, 2, 3]);
    let (shape, d) = run_f32_with_shape("MatrixDiagPart", &[], std::slice::from_ref(&x));
    assert_eq!((shape, d), (vec![2, 2], vec![0., 4., 6., 10.]));
    // A 3x2 matrix: diagonal (0, 3).
    assert_eq!(run_f32("MatrixDiagPart", &[], &[iota(&[3, 2])]), [0., 3.]);
    let diagonal = Tensor::from_vec(&[2, 2], &[-1.0f32, -2., -3., -4.]);
    let y = run_f32("MatrixSetDiag", &[], &[x.clone(), diagonal]);
    assert_eq!(y, [-1., 1., 2., 3., -2., 5., -3., 7., 8., 9., -4., 11.]);
    let short = Tensor::from_vec(&[2, 3], &[0.0f32; 6]);
    assert!(err("MatrixSetDiag", &[], &[x, short]).contains("input 1"));
    assert!(err("MatrixDiagPart", &[], &[iota(&[3])]).contains("rank"));
    // Inference keeps unknown dims unknown.
    let m = infer1(
        "MatrixDiagPart",
        &[TensorMeta::new(DType::F32, &[UNKNOWN, 3, UNKNOWN])],
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(m.shape, Some(vec![UNKNOWN, UNKNOWN]));
    let m = infer1(
        "MatrixDiag",
        &[TensorMeta::unknown_rank(DType::F32)],
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(m.shape, None);
}

#[test]
fn trace_sums_the_diagonal_into_int64_for_integers() {
    // 2x3: 0 + 4.
    let (shape, y) = run_f32_with_shape("Trace", &[], &[iota(&[2, 3])]);
    assert_eq!((shape, y), (vec![], vec![4.0]));
    let y = run("Trace", &[], &[iota_i32(&[3, 3])], 1).remove(0);
    assert_eq!(y.dtype, DType::I64);
    assert_eq!(y.slice::<i64>().unwrap(), [1 + 5 + 9]);
    let b = Tensor::from_vec(&[2, 2], &[1u8, 1, 0, 1]);
    let b = Tensor {
        dtype: DType::Bool,
        ..b
    };
    assert_eq!(run("Trace", &[], &[b], 1)[0].slice::<i64>().unwrap(), [2]);
    assert!(err("Trace", &[], &[iota(&[2, 2, 2])]).contains("2-D"));
}
