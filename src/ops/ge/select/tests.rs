//! GE's selection, scatter and segment ops against their frameworks' meanings written out
//! here by hand: small literal inputs, expectations worked out element by element.

use crate::ops::testing::{
    f16_tensor, f16_values, infer_for_test, run, run_f32, run_f32_with_shape, run1, try_run,
};
use crate::ops::{Attr, DType, Tensor, TensorMeta, UNKNOWN};

fn f32t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn i32t(shape: &[usize], v: &[i32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn i64t(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_vec(shape, v)
}

fn boolt(shape: &[usize], v: &[bool]) -> Tensor {
    let mut t = Tensor::from_vec(shape, &v.iter().map(|&b| u8::from(b)).collect::<Vec<_>>());
    t.dtype = DType::Bool;
    t
}

fn i32s(t: &Tensor) -> Vec<i32> {
    t.slice::<i32>().unwrap().to_vec()
}

fn int(v: i64) -> Attr {
    Attr::Int(v)
}

fn err(op: &str, attrs: &[(&str, Attr)], inputs: &[Tensor], outputs: usize) -> String {
    try_run(op, attrs, inputs, outputs).unwrap_err().to_string()
}

// ---------------------------------------------------------------------------------------
// Ranking

/// x = [[1, -5, 3, 3], [-2, -7, -2, 0]]: row maxima 3 (first at 2) and 0 (at 3), minima
/// -5 (at 1) and -7 (at 1); column maxima 1, -5, 3, 3 all in row 0.
fn arg_x() -> Tensor {
    f32t(&[2, 4], &[1.0, -5.0, 3.0, 3.0, -2.0, -7.0, -2.0, 0.0])
}

#[test]
fn arg_max_d_and_arg_min_d_give_the_first_extreme_as_int32() {
    let y = run1("ArgMaxD", &[("dimension", int(1))], &[arg_x()]);
    assert_eq!((y.dtype, y.shape.clone()), (DType::I32, vec![2]));
    assert_eq!(i32s(&y), [2, 3]);
    let y = run1("ArgMinD", &[("dimension", int(-1))], &[arg_x()]);
    assert_eq!(i32s(&y), [1, 1]);
    // Along dim 0: row 0 wins every column but the last (3 > 0) and ties go to row 0.
    let y = run1("ArgMaxD", &[("dimension", int(0))], &[arg_x()]);
    assert_eq!(i32s(&y), [0, 0, 0, 0]);
    let y = run1("ArgMinD", &[("dimension", int(0))], &[arg_x()]);
    assert_eq!(i32s(&y), [1, 1, 1, 1]);
    let int64 = [("dimension", int(1)), ("dtype", Attr::DType(DType::I64))];
    assert_eq!(i32s(&run1("ArgMaxD", &int64, &[arg_x()])), [2, 3]);
    assert!(err("ArgMaxD", &[], &[arg_x()], 1).contains("dimension"));
    assert!(err("ArgMaxD", &[("dimension", int(2))], &[arg_x()], 1).contains("dimension"));
    let float = [("dimension", int(1)), ("dtype", Attr::DType(DType::F32))];
    assert!(err("ArgMinD", &float, &[arg_x()], 1).contains("dtype"));
}

#[test]
fn arg_with_value_gives_indices_and_extremes() {
    let out = run("ArgMaxWithValue", &[("dimension", int(1))], &[arg_x()], 2);
    assert_eq!(out[0].shape, [2]);
    assert_eq!(i32s(&out[0]), [2, 3]);
    assert_eq!(out[1].slice::<f32>().unwrap(), [3.0, 0.0]);
    let keep = [("dimension", int(0)), ("keep_dims", Attr::Bool(true))];
    let out = run("ArgMinWithValue", &keep, &[arg_x()], 2);
    assert_eq!(
        (out[0].shape.clone(), out[1].shape.clone()),
        (vec![1, 4], vec![1, 4])
    );
    assert_eq!(i32s(&out[0]), [1, 1, 1, 1]);
    assert_eq!(out[1].slice::<f32>().unwrap(), [-2.0, -7.0, -2.0, 0.0]);
    // float16: the values keep their type.
    let x = f16_tensor(&[3], &[0.5, -1.5, 0.25]);
    let out = run("ArgMinWithValue", &[("dimension", int(0))], &[x], 2);
    assert_eq!(out[0].shape, Vec::<usize>::new());
    assert_eq!((i32s(&out[0]), f16_values(&out[1])), (vec![1], vec![-1.5]));
    assert!(err("ArgMaxWithValue", &[], &[arg_x()], 2).contains("dimension"));
}

#[test]
fn hard_max_marks_the_first_maximum() {
    let y = run_f32("HardMax", &[], &[arg_x()]);
    assert_eq!(y, [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    let y = run_f32("HardMax", &[("axis", int(0))], &[arg_x()]);
    assert_eq!(y, [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    let h = run1("HardMax", &[], &[f16_tensor(&[3], &[-1.0, -0.5, -0.5])]);
    assert_eq!(f16_values(&h), [0.0, 1.0, 0.0]);
    assert!(err("HardMax", &[("axis", int(2))], &[arg_x()], 1).contains("axis"));
    assert!(err("HardMax", &[], &[i32t(&[2], &[1, 2])], 1).contains("float"));
}

#[test]
fn arg_max_with_k_is_caffes_arg_max() {
    // No axis: each of the 2 entries of dim 0 over its 4 values. Row 0 ties 3 at 2 and 3,
    // row 1 ties -2 at 0 and 2: Caffe ranks the higher index first.
    let x = f32t(&[2, 2, 2], &[1.0, -5.0, 3.0, 3.0, -2.0, -7.0, -2.0, 0.0]);
    let out = run(
        "ArgMaxWithK",
        &[("topk", int(2))],
        std::slice::from_ref(&x),
        2,
    );
    assert_eq!(out[0].shape, [2, 2]);
    assert_eq!(i32s(&out[0]), [3, 2, 3, 2]);
    assert_eq!(out[1].slice::<f32>().unwrap(), [3.0, 3.0, 0.0, -2.0]);
    // Default topk 1 along axis 1: x[n, :, w] of 2 values.
    let out = run(
        "ArgMaxWithK",
        &[("axis", int(1))],
        std::slice::from_ref(&x),
        2,
    );
    assert_eq!(out[0].shape, [2, 1, 2]);
    assert_eq!(i32s(&out[0]), [1, 1, 1, 1]);
    assert_eq!(out[1].slice::<f32>().unwrap(), [3.0, 3.0, -2.0, 0.0]);
    // With an axis and out_max_val, Caffe's one output is the values: GE's first.
    let vals = [("axis", int(-1)), ("out_max_val", Attr::Bool(true))];
    let out = run("ArgMaxWithK", &vals, std::slice::from_ref(&x), 2);
    assert_eq!(out[0].dtype, DType::F32);
    assert_eq!(out[0].slice::<f32>().unwrap(), [1.0, 3.0, -2.0, 0.0]);
    let h = run(
        "ArgMaxWithK",
        &[],
        &[f16_tensor(&[1, 3], &[0.5, 2.0, 2.0])],
        2,
    );
    assert_eq!((i32s(&h[0]), f16_values(&h[1])), (vec![2], vec![2.0]));
    assert!(
        err(
            "ArgMaxWithK",
            &[("topk", int(5))],
            std::slice::from_ref(&x),
            2
        )
        .contains("topk")
    );
    assert!(
        err(
            "ArgMaxWithK",
            &[("topk", int(0))],
            std::slice::from_ref(&x),
            2
        )
        .contains("topk")
    );
    assert!(err("ArgMaxWithK", &[("axis", int(3))], &[x], 2).contains("axis"));
}

#[test]
fn top_k_d_and_v2d_sort_descending_with_ties_to_the_lower_index() {
    let assist = f16_tensor(&[8], &[0.0; 8]);
    let out = run("TopKD", &[("k", int(2))], &[arg_x(), assist.clone()], 2);
    assert_eq!(out[0].slice::<f32>().unwrap(), [3.0, 3.0, 0.0, -2.0]);
    assert_eq!(i32s(&out[1]), [2, 3, 3, 0]);
    assert_eq!(out[1].dtype, DType::I32);
    let smallest = [("k", int(3)), ("largest", Attr::Bool(false))];
    let out = run("TopKD", &smallest, &[arg_x(), assist.clone()], 2);
    assert_eq!(
        out[0].slice::<f32>().unwrap(),
        [-5.0, 1.0, 3.0, -7.0, -2.0, -2.0]
    );
    assert_eq!(i32s(&out[1]), [1, 0, 2, 1, 0, 2]);
    let k = i32t(&[], &[1]);
    let out = run(
        "TopKV2D",
        &[("dim", int(0))],
        &[arg_x(), k.clone(), assist.clone()],
        2,
    );
    assert_eq!(out[0].shape, [1, 4]);
    assert_eq!(i32s(&out[1]), [0, 0, 0, 0]);
    let h = run(
        "TopKV2D",
        &[],
        &[f16_tensor(&[3], &[1.0, 4.0, 2.0]), k, assist.clone()],
        2,
    );
    assert_eq!(f16_values(&h[0]), [4.0]);
    assert!(err("TopKD", &[], &[arg_x(), assist.clone()], 2).contains('k'));
    // The prototype's assist input is not optional.
    assert!(try_run("TopKD", &[("k", int(1))], &[arg_x()], 2).is_err());
    assert!(err("TopKD", &[("k", int(5))], &[arg_x(), assist], 2).contains("k = 5"));
}

#[test]
fn sort_v2_sorts_values_along_an_axis() {
    let y = run_f32("SortV2", &[], &[arg_x()]);
    assert_eq!(y, [-5.0, 1.0, 3.0, 3.0, -7.0, -2.0, -2.0, 0.0]);
    let down = [("axis", int(0)), ("descending", Attr::Bool(true))];
    let y = run_f32("SortV2", &down, &[arg_x()]);
    assert_eq!(y, [1.0, -5.0, 3.0, 3.0, -2.0, -7.0, -2.0, 0.0]);
    let nan = f32t(&[3], &[2.0, f32::NAN, -1.0]);
    let y = run_f32("SortV2", &[], std::slice::from_ref(&nan));
    assert_eq!(&y[..2], [-1.0, 2.0]);
    assert!(y[2].is_nan());
    let y = run_f32("SortV2", &[("descending", Attr::Bool(true))], &[nan]);
    assert!(y[0].is_nan());
    assert_eq!(&y[1..], [2.0, -1.0]);
    let h = run1("SortV2", &[], &[f16_tensor(&[3], &[0.5, -0.25, 0.0])]);
    assert_eq!(f16_values(&h), [-0.25, 0.0, 0.5]);
    assert!(err("SortV2", &[("axis", int(-3))], &[arg_x()], 1).contains("axis"));
}

#[test]
fn nth_element_picks_an_order_statistic_of_each_row() {
    let n = |v: i32| i32t(&[], &[v]);
    let (shape, y) = run_f32_with_shape("NthElement", &[], &[arg_x(), n(1)]);
    assert_eq!((shape, y), (vec![2], vec![1.0, -2.0]));
    let y = run_f32(
        "NthElement",
        &[("reverse", Attr::Bool(true))],
        &[arg_x(), n(0)],
    );
    assert_eq!(y, [3.0, 0.0]);
    let y = run_f32("NthElement", &[], &[arg_x(), n(3)]);
    assert_eq!(y, [3.0, 0.0]);
    let ints = run1("NthElement", &[], &[i32t(&[3], &[7, -1, 4]), n(2)]);
    assert_eq!(i32s(&ints), [7]);
    assert!(err("NthElement", &[], &[arg_x(), n(4)], 1).contains("n = 4"));
    assert!(err("NthElement", &[], &[arg_x(), n(-1)], 1).contains("n = -1"));
}

#[test]
fn in_top_k_counts_strictly_greater_predictions() {
    let p = f32t(
        &[3, 3],
        &[0.1, 0.5, 0.5, 0.9, 0.2, 0.3, 0.4, f32::INFINITY, 0.1],
    );
    let flags = |targets: &[i32], k: i32| {
        let out = run1(
            "InTopK",
            &[],
            &[p.clone(), i32t(&[3], targets), i32t(&[], &[k])],
        );
        assert_eq!(out.dtype, DType::Bool);
        out.slice::<u8>().unwrap().to_vec()
    };
    // Row 0: both 0.5s are in the top 1 (none greater); 0.1 has two greater.
    assert_eq!(flags(&[1, 0, 0], 1), [1, 1, 0]);
    assert_eq!(flags(&[2, 2, 0], 1), [1, 0, 0]);
    assert_eq!(flags(&[0, 2, 0], 2), [0, 1, 0]);
    // A target out of range gives false; so does row 2's infinite prediction.
    assert_eq!(flags(&[3, -1, 1], 3), [0, 0, 0]);
    let e = err("InTopK", &[], &[p, i32t(&[2], &[0, 0]), i32t(&[], &[1])], 1);
    assert!(e.contains("input 1"), "{e}");
}

// ---------------------------------------------------------------------------------------
// Indexed

#[test]
fn scatter_nd_adds_into_zeros_of_the_shape() {
    // Rows 0, 2 and 0 again of a [3, 2] output.
    let indices = i32t(&[3, 1], &[0, 2, 0]);
    let x = f32t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 10.0, 20.0]);
    let shape = i64t(&[2], &[3, 2]);
    let want = [11.0, 22.0, 0.0, 0.0, 3.0, 4.0];
    let (s, y) = run_f32_with_shape("ScatterNd", &[], &[indices.clone(), x.clone(), shape]);
    assert_eq!((s, y), (vec![3, 2], want.to_vec()));
    let attr = [("shape", Attr::Ints(vec![3, 2]))];
    assert_eq!(run_f32("ScatterNdD", &attr, &[indices, x.clone()]), want);
    // Whole elements: indices [[1, 0], [0, 1]] into a [2, 2] output.
    let pairs = i64t(&[2, 2], &[1, 0, 0, 1]);
    let y = run_f32(
        "ScatterNdD",
        &[("shape", Attr::Ints(vec![2, 2]))],
        &[pairs, f32t(&[2], &[5.0, -6.0])],
    );
    assert_eq!(y, [0.0, -6.0, 5.0, 0.0]);
    for bad in [3, -1] {
        let e = err(
            "ScatterNdD",
            &attr,
            &[i32t(&[3, 1], &[0, bad, 0]), x.clone()],
            1,
        );
        assert!(e.contains(&format!("index {bad}")), "{e}");
    }
    let e = err("ScatterNdD", &attr, &[i32t(&[2, 1], &[0, 1]), x], 1);
    assert!(e.contains("input 1"), "{e}");
    assert!(
        err(
            "ScatterNdD",
            &[],
            &[i32t(&[1, 1], &[0]), f32t(&[1], &[1.0])],
            1
        )
        .contains("shape")
    );
}

/// var = [[1, 2], [3, 4], [5, 6]].
fn var() -> Tensor {
    f32t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
}

#[test]
fn scatters_into_var_update_or_add_rows_and_elements() {
    let rows = i32t(&[2, 1], &[2, 0]);
    let upd = f32t(&[2, 2], &[10.0, 20.0, 30.0, 40.0]);
    let y = run_f32(
        "ScatterNdUpdate",
        &[("use_locking", Attr::Bool(true))],
        &[var(), rows.clone(), upd.clone()],
    );
    assert_eq!(y, [30.0, 40.0, 3.0, 4.0, 10.0, 20.0]);
    let y = run_f32("ScatterNdAdd", &[], &[var(), rows.clone(), upd.clone()]);
    assert_eq!(y, [31.0, 42.0, 3.0, 4.0, 15.0, 26.0]);
    assert_eq!(
        run_f32("TensorScatterAdd", &[], &[var(), rows, upd.clone()]),
        y
    );
    // First-dim indices: each index a row of var; a repeat adds twice.
    let first = i64t(&[2], &[1, 1]);
    let y = run_f32("ScatterAdd", &[], &[var(), first.clone(), upd.clone()]);
    assert_eq!(y, [1.0, 2.0, 43.0, 64.0, 5.0, 6.0]);
    let y = run_f32(
        "ScatterUpdate",
        &[],
        &[var(), i64t(&[2], &[2, 0]), upd.clone()],
    );
    assert_eq!(y, [30.0, 40.0, 3.0, 4.0, 10.0, 20.0]);
    // Element tuples.
    let cells = i32t(&[2, 2], &[0, 1, 2, 0]);
    let y = run_f32(
        "ScatterNdAdd",
        &[],
        &[var(), cells, f32t(&[2], &[0.5, -5.0])],
    );
    assert_eq!(y, [1.0, 2.5, 3.0, 4.0, 0.0, 6.0]);
    let h = run1(
        "ScatterAdd",
        &[],
        &[
            f16_tensor(&[2], &[1.0, 2.0]),
            i32t(&[1], &[1]),
            f16_tensor(&[1], &[0.5]),
        ],
    );
    assert_eq!(f16_values(&h), [1.0, 2.5]);
    let e = err(
        "ScatterUpdate",
        &[],
        &[var(), i32t(&[2], &[0, 3]), upd.clone()],
        1,
    );
    assert!(e.contains("index 3"), "{e}");
    let e = err(
        "ScatterNdAdd",
        &[],
        &[var(), i32t(&[2, 1], &[-1, 0]), upd],
        1,
    );
    assert!(e.contains("index -1"), "{e}");
    let e = err(
        "ScatterAdd",
        &[],
        &[var(), first, f32t(&[2], &[1.0, 2.0])],
        1,
    );
    assert!(e.contains("input 2"), "{e}");
}

#[test]
fn index_add_is_torchs_index_add() {
    // Along axis 1 of var: columns 1, 0, 1 of updates land on var's columns.
    let upd = f32t(
        &[3, 3],
        &[1.0, 10.0, 100.0, 2.0, 20.0, 200.0, 3.0, 30.0, 300.0],
    );
    let idx = i32t(&[3], &[1, 0, 1]);
    let y = run_f32(
        "IndexAdd",
        &[("axis", int(1))],
        &[var(), idx.clone(), upd.clone()],
    );
    assert_eq!(y, [11.0, 103.0, 23.0, 206.0, 35.0, 309.0]);
    // Default axis 0: rows.
    let rows = f32t(&[1, 2], &[-1.0, -2.0]);
    let y = run_f32("IndexAdd", &[], &[var(), i32t(&[1], &[2]), rows.clone()]);
    assert_eq!(y, [1.0, 2.0, 3.0, 4.0, 4.0, 4.0]);
    let ints = run1(
        "IndexAdd",
        &[],
        &[
            i32t(&[2], &[5, 6]),
            i32t(&[2], &[1, 1]),
            i32t(&[2], &[1, 2]),
        ],
    );
    assert_eq!(i32s(&ints), [5, 9]);
    let e = err(
        "IndexAdd",
        &[],
        &[var(), i32t(&[1], &[-1]), rows.clone()],
        1,
    );
    assert!(e.contains("index -1"), "{e}");
    assert!(err("IndexAdd", &[("axis", int(2))], &[var(), idx, upd], 1).contains("axis"));
    assert!(err("IndexAdd", &[], &[var(), i32t(&[2], &[0, 1]), rows], 1).contains("input 2"));
}

#[test]
fn gather_d_is_torchs_gather_along_the_dim_input() {
    // torch.gather(x, 1, [[0, 0], [1, 0]]) of x = [[1, 2], [3, 4]] is [[1, 1], [4, 3]].
    let x = f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let index = i64t(&[2, 2], &[0, 0, 1, 0]);
    let dim = |d: i32| i32t(&[], &[d]);
    let y = run_f32("GatherD", &[], &[x.clone(), dim(1), index.clone()]);
    assert_eq!(y, [1.0, 1.0, 4.0, 3.0]);
    // The input decides, not the attribute; -1 is the last dim.
    let y = run_f32(
        "GatherD",
        &[("dim", int(0))],
        &[x.clone(), dim(-1), index.clone()],
    );
    assert_eq!(y, [1.0, 1.0, 4.0, 3.0]);
    let (shape, y) =
        run_f32_with_shape("GatherD", &[], &[x.clone(), dim(0), i64t(&[1, 2], &[1, 0])]);
    assert_eq!((shape, y), (vec![1, 2], vec![3.0, 2.0]));
    let e = err(
        "GatherD",
        &[],
        &[x.clone(), dim(0), i64t(&[1, 2], &[2, 0])],
        1,
    );
    assert!(e.contains("index 2"), "{e}");
    let e = err(
        "GatherD",
        &[],
        &[x.clone(), dim(0), i64t(&[1, 2], &[-1, 0])],
        1,
    );
    assert!(e.contains("index -1"), "{e}");
    assert!(err("GatherD", &[], &[x, dim(2), index], 1).contains("dim 2"));
}

#[test]
fn masked_fill_puts_value_where_the_mask_is_true() {
    let x = f32t(&[2, 3], &[1.0, -2.0, 3.0, 4.0, 5.0, -6.0]);
    let mask = boolt(&[3], &[true, false, true]);
    let y = run_f32(
        "MaskedFill",
        &[],
        &[x.clone(), mask.clone(), f32t(&[], &[0.5])],
    );
    assert_eq!(y, [0.5, -2.0, 0.5, 0.5, 5.0, 0.5]);
    // An int32 value converts to x's type; a [2, 1] mask broadcasts along rows.
    let rows = boolt(&[2, 1], &[false, true]);
    let y = run_f32("MaskedFill", &[], &[x.clone(), rows, i32t(&[], &[-9])]);
    assert_eq!(y, [1.0, -2.0, 3.0, -9.0, -9.0, -9.0]);
    let h = run1(
        "MaskedFill",
        &[],
        &[
            f16_tensor(&[3], &[1.0, 2.0, 3.0]),
            mask,
            f16_tensor(&[], &[-1.5]),
        ],
    );
    assert_eq!(f16_values(&h), [-1.5, 2.0, -1.5]);
    let not_bool = f32t(&[3], &[1.0, 0.0, 1.0]);
    assert!(err("MaskedFill", &[], &[x, not_bool, f32t(&[], &[0.0])], 1).contains("bool"));
}

#[test]
fn invert_permutation_and_range_d() {
    let y = run1("InvertPermutation", &[], &[i32t(&[4], &[2, 0, 3, 1])]);
    assert_eq!(i32s(&y), [1, 3, 0, 2]);
    let y = run1("InvertPermutation", &[], &[i64t(&[2], &[1, 0])]);
    assert_eq!(y.slice::<i64>().unwrap(), [1, 0]);
    assert!(err("InvertPermutation", &[], &[i32t(&[2], &[1, 1])], 1).contains("twice"));
    assert!(err("InvertPermutation", &[], &[i32t(&[2], &[0, 2])], 1).contains("index 2"));
    let attrs = [
        ("start", Attr::Float(1.0)),
        ("limit", Attr::Float(8.0)),
        ("delta", Attr::Float(2.0)),
    ];
    // MindSpore's documented example: [1, 2, 3, 2] gives [3, 5, 7, 5].
    let y = run1("RangeD", &attrs, &[i32t(&[4], &[1, 2, 3, 2])]);
    assert_eq!(i32s(&y), [3, 5, 7, 5]);
    let down = [
        ("start", Attr::Float(0.5)),
        ("limit", Attr::Float(-1.0)),
        ("delta", Attr::Float(-0.5)),
    ];
    let y = run_f32("RangeD", &down, &[f32t(&[3], &[0.0, 1.0, 2.0])]);
    assert_eq!(y, [0.5, 0.0, -0.5]);
    assert!(err("RangeD", &attrs[..2], &[i32t(&[1], &[0])], 1).contains("delta"));
}

// ---------------------------------------------------------------------------------------
// Segments

/// x = [[1, -2], [3, -4], [5, 6], [-7, 8]].
fn seg_x() -> Tensor {
    f32t(&[4, 2], &[1.0, -2.0, 3.0, -4.0, 5.0, 6.0, -7.0, 8.0])
}

#[test]
fn segment_sum_and_max_reduce_sorted_segments() {
    let ids = i32t(&[4], &[0, 0, 2, 2]);
    let (shape, y) = run_f32_with_shape("SegmentSum", &[], &[seg_x(), ids.clone()]);
    assert_eq!(shape, [3, 2]);
    assert_eq!(y, [4.0, -6.0, 0.0, 0.0, -2.0, 14.0]);
    // An empty segment is 0, a full one its maximum (even a negative one).
    let y = run_f32("SegmentMax", &[], &[seg_x(), ids]);
    assert_eq!(y, [3.0, -2.0, 0.0, 0.0, 5.0, 8.0]);
    let h = run1(
        "SegmentSum",
        &[],
        &[f16_tensor(&[3], &[0.5, 0.25, 1.0]), i64t(&[3], &[1, 1, 1])],
    );
    assert_eq!(f16_values(&h), [0.0, 1.75]);
    let e = err("SegmentSum", &[], &[seg_x(), i32t(&[4], &[0, 1, 0, 1])], 1);
    assert!(e.contains("not sorted"), "{e}");
    let e = err("SegmentMax", &[], &[seg_x(), i32t(&[4], &[-1, 0, 0, 0])], 1);
    assert!(e.contains("negative"), "{e}");
    assert!(try_run("SegmentSum", &[], &[seg_x(), i32t(&[3], &[0, 0, 0])], 1).is_err());
}

#[test]
fn unsorted_segments_start_from_the_identity_and_drop_negative_ids() {
    let ids = i32t(&[4], &[2, -1, 2, 0]);
    let three = i32t(&[], &[3]);
    let run_op = |op: &str, x: Tensor| run1(op, &[], &[x, ids.clone(), three.clone()]);
    // Segment 0: row 3; segment 1: empty; segment 2: rows 0 and 2; row 1 dropped.
    let sum = run_op("UnsortedSegmentSum", seg_x());
    assert_eq!(sum.shape, [3, 2]);
    assert_eq!(sum.slice::<f32>().unwrap(), [-7.0, 8.0, 0.0, 0.0, 6.0, 4.0]);
    let prod = run_op("UnsortedSegmentProd", seg_x());
    assert_eq!(
        prod.slice::<f32>().unwrap(),
        [-7.0, 8.0, 1.0, 1.0, 5.0, -12.0]
    );
    let max = run_op("UnsortedSegmentMax", seg_x());
    assert_eq!(
        max.slice::<f32>().unwrap(),
        [-7.0, 8.0, f32::MIN, f32::MIN, 5.0, 6.0]
    );
    let min = run_op("UnsortedSegmentMin", seg_x());
    assert_eq!(
        min.slice::<f32>().unwrap(),
        [-7.0, 8.0, f32::MAX, f32::MAX, 1.0, -2.0]
    );
    // float16's and int32's finite limits.
    let h = run_op(
        "UnsortedSegmentMax",
        f16_tensor(&[4], &[1.0, 2.0, 3.0, 4.0]),
    );
    assert_eq!(f16_values(&h), [4.0, -65504.0, 3.0]);
    let i = run_op("UnsortedSegmentMin", i32t(&[4], &[1, 2, 3, 4]));
    assert_eq!(i32s(&i), [4, i32::MAX, 1]);
    // 2-D ids of x's whole shape: each id one element.
    let x = f32t(&[2, 2], &[1.0, -2.0, 3.0, -4.0]);
    let ids2 = i64t(&[2, 2], &[1, 0, 0, 1]);
    let (shape, y) = run_f32_with_shape("UnsortedSegmentSum", &[], &[x, ids2, i64t(&[1], &[2])]);
    assert_eq!((shape, y), (vec![2], vec![1.0, -3.0]));
    let e = err(
        "UnsortedSegmentSum",
        &[],
        &[seg_x(), i32t(&[4], &[0, 3, 0, 0]), three.clone()],
        1,
    );
    assert!(e.contains("id 3"), "{e}");
    let e = err(
        "UnsortedSegmentSum",
        &[],
        &[seg_x(), i32t(&[3], &[0, 0, 0]), three],
        1,
    );
    assert!(e.contains("prefix"), "{e}");
}

#[test]
fn inference_takes_unknown_dims_and_values() {
    let f = |s: &[i64]| TensorMeta::new(DType::F32, s);
    let i = |s: &[i64]| TensorMeta::new(DType::I32, s);
    let one = |op: &str, ins: &[TensorMeta], attrs: &[(&str, Attr)], n: usize| {
        infer_for_test(op, ins, &[], attrs, n).unwrap()
    };
    let out = one(
        "ArgMaxWithValue",
        &[f(&[UNKNOWN, 4])],
        &[("dimension", int(1))],
        2,
    );
    assert_eq!(out[0].shape, Some(vec![UNKNOWN]));
    assert_eq!(out[1].dtype, DType::F32);
    let out = one(
        "ArgMaxD",
        &[TensorMeta::unknown_rank(DType::F16)],
        &[("dimension", int(0))],
        1,
    );
    assert_eq!((out[0].dtype, out[0].shape.clone()), (DType::I32, None));
    // Segment counts known only from the values.
    let out = one("SegmentSum", &[f(&[UNKNOWN, 3]), i(&[UNKNOWN])], &[], 1);
    assert_eq!(out[0].shape, Some(vec![UNKNOWN, 3]));
    let out = one("UnsortedSegmentMax", &[f(&[5, 3]), i(&[5]), i(&[])], &[], 1);
    assert_eq!(out[0].shape, Some(vec![UNKNOWN, 3]));
    let out = one("ScatterNd", &[i(&[4, 1]), f(&[4, 3]), i(&[2])], &[], 1);
    assert_eq!(out[0].shape, Some(vec![UNKNOWN, UNKNOWN]));
    let out = one(
        "TopKV2D",
        &[f(&[2, 7]), i(&[]), TensorMeta::new(DType::F16, &[14])],
        &[],
        2,
    );
    assert_eq!(out[1].shape, Some(vec![2, UNKNOWN]));
    assert_eq!(out[1].dtype, DType::I32);
    let out = one(
        "ArgMaxWithK",
        &[f(&[UNKNOWN, 3, 4])],
        &[("topk", int(2))],
        2,
    );
    assert_eq!(out[0].shape, Some(vec![UNKNOWN, 2]));
    let e = infer_for_test("IndexAdd", &[f(&[3, 2]), i(&[2]), f(&[3, 2])], &[], &[], 1);
    assert!(e.unwrap_err().to_string().contains("input 2"));
}
