//! GE's matrix-shaped data ops from graphengine `matrix_calculation_ops.h` (Tril, Triu,
//! Eye, DiagPart, MatrixDiag, MatrixDiagPart, MatrixSetDiag, Trace) and `pad_ops.h`
//! (Diag), with TensorFlow's or PyTorch's meaning as each prototype's documentation names
//! it. "The last two dims" are a batch of `[rows, cols]` matrices; every other dim is a
//! batch dim.
//!
//! - Tril(x; diagonal 0) / Triu(x; diagonal 0): PyTorch's tril / triu on the last two dims:
//!   `y[.., i, j] = x[.., i, j]` where `j - i <= diagonal` (Tril) or `j - i >= diagonal`
//!   (Triu), else 0. A positive diagonal is above the main one, a negative one below.
//! - Eye(; num_rows required, num_columns 0, batch_shape [], dtype 0): PyTorch's eye, a
//!   `batch_shape + [num_rows, num_columns]` tensor with 1 where the row is the column and
//!   0 elsewhere; num_columns 0 means num_rows (GE's default stands for PyTorch's None);
//!   `dtype` is a GE type number (0 float32).
//! - Diag(x): TensorFlow's diag: x of shape `s` (rank >= 1) gives `s + s`, x's element at
//!   index `i` placed at `(i, i)`, zeros elsewhere. DiagPart(x) inverts it: x of shape
//!   `s + s` gives `s`, the `(i, i)` elements.
//! - MatrixDiag(x): TensorFlow's (v1) matrix_diag: `[.., n]` gives `[.., n, n]` with x on
//!   each matrix's main diagonal. MatrixDiagPart(x): `[.., m, n]` gives `[.., min(m, n)]`,
//!   each matrix's main diagonal. MatrixSetDiag(x, diagonal): x with each matrix's main
//!   diagonal replaced by `diagonal` (`[.., min(m, n)]`).
//! - Trace(x): PyTorch's trace, the sum of a 2-D matrix's main diagonal, a scalar. Floats
//!   keep their type (the sum is taken in float64 and rounded once: rt2's choice, GE does
//!   not say how it accumulates); bool and the integers give int64, uint64 gives uint64
//!   (the prototype's output types, ops-math's Trace), both wrapping on overflow.
//!
//! Every op but Trace moves elements by their byte size, so it serves every element type.

use super::attrs::required_int;
use crate::ops::shape::args::{bytes, bytes_mut, input, moved, output};
use crate::ops::shape::movement::{View, copy_view};
use crate::ops::{
    Attr, DType, InferCtx, OpError, OpRegistry, TensorMeta, TensorMut, TensorRef, UNKNOWN, meta,
};

/// The op types this file registers.
const OPS: &super::table::Table = &[
    ("Tril", &[]),
    ("Triu", &[]),
    ("Eye", &[]),
    ("Diag", &[]),
    ("DiagPart", &[]),
    ("MatrixDiag", &[]),
    ("MatrixDiagPart", &[]),
    ("MatrixSetDiag", &[]),
    ("Trace", &[]),
];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    super::table::register(reg, OPS, |name| match name {
        "Tril" | "Triu" => (infer_triangle, triangle),
        "Eye" => (infer_eye, eye),
        "Diag" => (infer_diag, diag),
        "DiagPart" => (infer_diag_part, diag_part),
        "MatrixDiag" => (infer_matrix_diag, matrix_diag),
        "MatrixDiagPart" => (infer_matrix_diag_part, matrix_diag_part),
        "MatrixSetDiag" => (infer_matrix_set_diag, matrix_set_diag),
        _ => (infer_trace, trace),
    });
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    super::table::names(OPS)
}

/// A GE type attribute: an element type lowering already converted, or a GE type number
/// (C++ `ge::DataType`), `default` when absent.
pub(super) fn type_attr(ctx: &InferCtx, name: &str, default: DType) -> Result<DType, OpError> {
    crate::ops::elementwise::ge_type_attr(ctx, name, Some(default))
}

/// The known rank of input `i` must be at least `min`.
fn rank_at_least(ctx: &InferCtx, i: usize, min: usize) -> Result<(), OpError> {
    match &ctx.inputs[i].shape {
        Some(s) if s.len() < min => Err(ctx.input_error(
            i,
            format!("has rank {}; the op needs rank {min} or more", s.len()),
        )),
        _ => Ok(()),
    }
}

/// Copies `k` elements of `width` bytes per matrix of `batch`: element `i` of matrix `b`
/// from `src[b * src_b + i * src_i]` to `dst[b * dst_b + i * dst_i]` (indices in elements).
#[allow(clippy::too_many_arguments)]
fn copy_diagonal(
    width: usize,
    src: &[u8],
    (src_b, src_i): (usize, usize),
    dst: &mut [u8],
    (dst_b, dst_i): (usize, usize),
    batch: usize,
    k: usize,
) -> Result<(), String> {
    for b in 0..batch {
        for i in 0..k {
            let (s, d) = (
                (b * src_b + i * src_i) * width,
                (b * dst_b + i * dst_i) * width,
            );
            let (Some(from), Some(to)) = (src.get(s..s + width), dst.get_mut(d..d + width)) else {
                return Err(format!(
                    "diagonal element {i} of matrix {b} is out of bounds"
                ));
            };
            to.copy_from_slice(from);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Tril, Triu

fn infer_triangle(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    rank_at_least(ctx, 0, 2)?;
    ctx.attr_int("diagonal", 0)?;
    Ok(vec![ctx.inputs[0].clone()])
}

/// The library's Trilu (the same kept triangle) with `upper` set and k as its input 1.
fn triangle(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    if x.rank() < 2 {
        return Err(ctx.input_error(0, "has rank below 2; the op needs a matrix"));
    }
    let k = ctx.attr_int("diagonal", 0)?.to_le_bytes();
    let attrs = super::attrs::onnx_attrs(vec![("upper", Attr::Int(i64::from(ctx.op == "Triu")))]);
    let library = InferCtx {
        op: "Trilu",
        ..super::attrs::with_attrs(ctx, &attrs)
    };
    let operands = [*x, TensorRef::new(DType::I64, &[], &k)];
    crate::ops::slicing::compute::trilu(&library, &operands, outputs)
}

// ---------------------------------------------------------------------------------------
// Eye

/// Eye's `(batch_shape, rows, cols, dtype)`, checked.
fn eye_spec(ctx: &InferCtx) -> Result<(Vec<i64>, i64, i64, DType), OpError> {
    let rows = required_int(ctx, "num_rows")?;
    let cols = match ctx.attr_int("num_columns", 0)? {
        0 => rows,
        c => c,
    };
    if rows < 0 || cols < 0 {
        return Err(ctx.attr_error(
            "num_rows",
            format!("{rows} rows and {cols} columns: a count is negative"),
        ));
    }
    let batch = ctx.attr_ints("batch_shape")?.unwrap_or(&[]).to_vec();
    if batch.iter().any(|&d| d < 0) {
        return Err(ctx.attr_error("batch_shape", format!("{batch:?} has a negative dim")));
    }
    Ok((batch, rows, cols, type_attr(ctx, "dtype", DType::F32)?))
}

fn infer_eye(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(0, 0)?;
    let (mut shape, rows, cols, dtype) = eye_spec(ctx)?;
    shape.extend([rows, cols]);
    Ok(meta(dtype, Some(shape)))
}

fn eye(ctx: &InferCtx, _inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let (_, rows, cols, dtype) = eye_spec(ctx)?;
    let (rows, cols) = (rows as usize, cols as usize);
    let one = crate::ops::slicing::compute::element_bytes(dtype, 1.0);
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    dst.fill(0);
    let width = dtype.size();
    let matrix = rows * cols;
    if matrix == 0 {
        return Ok(());
    }
    for m in dst.chunks_exact_mut(matrix * width) {
        for i in 0..rows.min(cols) {
            m[(i * cols + i) * width..][..width].copy_from_slice(&one);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Diag, DiagPart

fn infer_diag(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    rank_at_least(ctx, 0, 1)?;
    let x = &ctx.inputs[0];
    Ok(meta(x.dtype, x.shape.as_ref().map(|s| s.repeat(2))))
}

/// Diag: y is x's element count squared, as an `[n, n]` matrix with x on its diagonal.
fn diag(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let n = x.len();
    let src = bytes(ctx, x, 0)?;
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    dst.fill(0);
    copy_diagonal(x.dtype.size(), src, (0, 1), dst, (0, n + 1), 1, n)
        .map_err(|e| ctx.compute_error(e))
}

fn infer_diag_part(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let Some(s) = &x.shape else {
        return Ok(meta(x.dtype, None));
    };
    let k = s.len() / 2;
    if s.is_empty() || s.len() % 2 != 0 {
        return Err(ctx.input_error(
            0,
            format!("is {s:?}; DiagPart takes an even rank, 2 or more"),
        ));
    }
    let mut out = Vec::with_capacity(k);
    for i in 0..k {
        let (a, b) = (s[i], s[i + k]);
        if a != b && a != UNKNOWN && b != UNKNOWN {
            return Err(ctx.input_error(0, format!("is {s:?}: dims {i} and {} differ", i + k)));
        }
        out.push(if a == UNKNOWN { b } else { a });
    }
    Ok(meta(x.dtype, Some(out)))
}

/// DiagPart: x as an `[n, n]` matrix, its diagonal.
fn diag_part(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let k = x.rank() / 2;
    if x.rank() % 2 != 0 || x.shape[..k] != x.shape[k..] {
        return Err(ctx.input_error(0, format!("is {:?}, not a shape twice", x.shape)));
    }
    let n: usize = x.shape[..k].iter().product();
    let view = View {
        shape: vec![n],
        strides: vec![n as isize + 1],
        offset: 0,
    };
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

// ---------------------------------------------------------------------------------------
// MatrixDiag, MatrixDiagPart, MatrixSetDiag

fn infer_matrix_diag(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    rank_at_least(ctx, 0, 1)?;
    let x = &ctx.inputs[0];
    let shape = x.shape.as_ref().map(|s| {
        let mut out = s.clone();
        out.push(s[s.len() - 1]);
        out
    });
    Ok(meta(x.dtype, shape))
}

/// MatrixDiag: each `[n]` row of x on the diagonal of a zeroed `[n, n]` matrix.
fn matrix_diag(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let Some(&n) = x.shape.last() else {
        return Err(ctx.input_error(0, "is a scalar; MatrixDiag needs rank 1 or more"));
    };
    let batch = x.len().checked_div(n).unwrap_or(0);
    let src = bytes(ctx, x, 0)?;
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    dst.fill(0);
    copy_diagonal(x.dtype.size(), src, (n, 1), dst, (n * n, n + 1), batch, n)
        .map_err(|e| ctx.compute_error(e))
}

/// The `[.., m, n]` matrices' dims when known: `(batch dims, m, n)`.
fn matrices(ctx: &InferCtx, i: usize) -> Result<Option<(Vec<i64>, i64, i64)>, OpError> {
    rank_at_least(ctx, i, 2)?;
    Ok(ctx.inputs[i].shape.as_ref().map(|s| {
        let r = s.len();
        (s[..r - 2].to_vec(), s[r - 2], s[r - 1])
    }))
}

/// `min(m, n)`, unknown unless both are known (or one is 0).
fn diagonal_len(m: i64, n: i64) -> i64 {
    match (m, n) {
        (0, _) | (_, 0) => 0,
        (UNKNOWN, _) | (_, UNKNOWN) => UNKNOWN,
        _ => m.min(n),
    }
}

fn infer_matrix_diag_part(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    let shape = matrices(ctx, 0)?.map(|(mut batch, m, n)| {
        batch.push(diagonal_len(m, n));
        batch
    });
    Ok(meta(x.dtype, shape))
}

/// `(batch, m, n)` of a tensor of matrices.
fn matrix_dims(ctx: &InferCtx, t: &TensorRef, i: usize) -> Result<(usize, usize, usize), OpError> {
    let r = t.rank();
    if r < 2 {
        return Err(ctx.input_error(i, format!("has rank {r}; the op needs rank 2 or more")));
    }
    let (m, n) = (t.shape[r - 2], t.shape[r - 1]);
    Ok((t.shape[..r - 2].iter().product(), m, n))
}

/// MatrixDiagPart: each matrix viewed along its main diagonal.
fn matrix_diag_part(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let (batch, m, n) = matrix_dims(ctx, x, 0)?;
    let view = View {
        shape: vec![batch, m.min(n)],
        strides: vec![(m * n) as isize, n as isize + 1],
        offset: 0,
    };
    let src = bytes(ctx, x, 0)?;
    let y = output(ctx, outputs, 0)?;
    moved(
        ctx,
        copy_view(x.dtype.size(), src, &view, bytes_mut(ctx, y)?),
    )
}

fn infer_matrix_set_diag(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    let (x, d) = (&ctx.inputs[0], &ctx.inputs[1]);
    if d.dtype != x.dtype {
        return Err(ctx.input_error(1, format!("is {}, x is {}", d.dtype, x.dtype)));
    }
    if let (Some((batch, m, n)), Some(ds)) = (matrices(ctx, 0)?, &d.shape) {
        let mut want = batch;
        want.push(diagonal_len(m, n));
        let fits = ds.len() == want.len()
            && ds
                .iter()
                .zip(&want)
                .all(|(&a, &b)| a == b || a == UNKNOWN || b == UNKNOWN);
        if !fits {
            return Err(ctx.input_error(1, format!("is {ds:?}; x's diagonals are {want:?}")));
        }
    }
    Ok(vec![x.clone()])
}

/// MatrixSetDiag: x copied, then each matrix's diagonal written from `diagonal`.
fn matrix_set_diag(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let d = input(ctx, inputs, 1)?;
    let (batch, m, n) = matrix_dims(ctx, x, 0)?;
    let k = m.min(n);
    if d.len() != batch * k || d.dtype != x.dtype {
        return Err(ctx.input_error(1, format!("is {:?}, not x's diagonals", d.shape)));
    }
    let (src, diagonal) = (bytes(ctx, x, 0)?, bytes(ctx, d, 1)?);
    let dst = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    if dst.len() != src.len() {
        return Err(ctx.compute_error("the output is not x's size"));
    }
    dst.copy_from_slice(src);
    copy_diagonal(
        x.dtype.size(),
        diagonal,
        (k, 1),
        dst,
        (m * n, n + 1),
        batch,
        k,
    )
    .map_err(|e| ctx.compute_error(e))
}

// ---------------------------------------------------------------------------------------
// Trace

/// Trace's output type for input type `x`.
fn trace_type(x: DType) -> DType {
    match x {
        DType::F32 | DType::F16 | DType::Bf16 | DType::F64 => x,
        DType::U64 => DType::U64,
        DType::Bool
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32 => DType::I64,
    }
}

fn infer_trace(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape
        && s.len() != 2
    {
        return Err(ctx.input_error(0, format!("is {s:?}; Trace takes a 2-D matrix")));
    }
    Ok(meta(trace_type(x.dtype), Some(vec![])))
}

fn trace(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let x = input(ctx, inputs, 0)?;
    let &[m, n] = x.shape else {
        return Err(ctx.input_error(0, format!("is {:?}; Trace takes a 2-D matrix", x.shape)));
    };
    let to = trace_type(x.dtype);
    let step = n + 1;
    let count = m.min(n);
    let y = bytes_mut(ctx, output(ctx, outputs, 0)?)?;
    let value = if !to.is_int() {
        let v = crate::ops::shape::indices::floats(x)
            .ok_or_else(|| ctx.input_error(0, "is not floating-point"))?;
        let sum: f64 = (0..count).map(|i| v[i * step]).sum();
        crate::ops::slicing::compute::element_bytes(to, sum)
    } else {
        let v = crate::ops::shape::indices::ints(x)
            .ok_or_else(|| ctx.input_error(0, "is not integers"))?;
        let sum = (0..count).fold(0i64, |s, i| s.wrapping_add(v[i * step]));
        sum.to_le_bytes().to_vec()
    };
    if y.len() != value.len() {
        return Err(ctx.compute_error("the output is not one element"));
    }
    y.copy_from_slice(&value);
    Ok(())
}

#[cfg(test)]
mod tests;
