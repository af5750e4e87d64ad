//! Linear algebra and the arithmetic the other new families share: the float element
//! types and the precision their kernels compute in ([`Real`], [`Acc`]), the one strided
//! matrix product every kernel calls ([`gemm`], over [`sgemm`] for f32 and
//! matrixmultiply's `dgemm` for f64), and the ops built
//! mostly of it: Einsum, MatMulInteger and ConvInteger, with the norms (LpNormalization,
//! RMSNormalization, GroupNormalization) and the index-rearranging ops (EyeLike,
//! ReverseSequence, CenterCropPad, Col2Im) in submodules.
//!
//! Nothing here loops over a matrix product by hand: a product is a [`gemm`] call on
//! strided views, so transposes and head-interleaved layouts cost no copies.

use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub};

use half::{bf16, f16};

use crate::ops::DType;
use crate::ops::tensor::{Elem, TensorRef};
use crate::ops::{InferCtx, OpError, OpRegistry, TensorMeta, UNKNOWN};

pub mod einsum;
pub mod integer;
pub mod layout;
pub mod norm;
pub mod sgemm;

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    einsum::register(reg);
    integer::register(reg);
    layout::register(reg);
    norm::register(reg);
}

/// Elements below which a kernel stays on the calling thread: splitting smaller work
/// across rayon's pool costs more than it saves.
pub const PAR_MIN_ELEMS: usize = 16 * 1024;

/// How many chunks of `per_chunk` elements of work one rayon job takes at least, so that
/// a job is never smaller than [`PAR_MIN_ELEMS`].
pub fn min_chunks(per_chunk: usize) -> usize {
    (PAR_MIN_ELEMS / per_chunk.max(1)).max(1)
}

/// The precision a float kernel computes in: f32 or f64, with the math the kernels use
/// and the matrix product of that width.
pub trait Acc:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::fmt::Debug
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + MulAssign
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    const NEG_INFINITY: Self;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn tanh(self) -> Self;
    fn abs(self) -> Self;
    fn powf(self, e: Self) -> Self;
    /// The larger; NaN propagates, as NumPy's max does.
    fn max_nan(self, other: Self) -> Self;
    /// The product of this width: [`sgemm::sgemm`] or matrixmultiply's `dgemm`.
    ///
    /// # Safety
    /// As matrixmultiply's `sgemm`/`dgemm`: every element the dims and strides address is
    /// inside live memory, C's elements are distinct and alias neither A nor B, and C's
    /// are initialized unless `beta` is zero. [`gemm`] checks the extents before calling.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        beta: Self,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );
}

macro_rules! acc {
    ($t:ty, $gemm:path) => {
        impl Acc for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            fn max_nan(self, other: Self) -> Self {
                if self.is_nan() || other.is_nan() {
                    <$t>::NAN
                } else {
                    <$t>::max(self, other)
                }
            }
            unsafe fn gemm_raw(
                m: usize,
                k: usize,
                n: usize,
                alpha: Self,
                a: *const Self,
                rsa: isize,
                csa: isize,
                b: *const Self,
                rsb: isize,
                csb: isize,
                beta: Self,
                c: *mut Self,
                rsc: isize,
                csc: isize,
            ) {
                // SAFETY: `gemm_raw`'s contract is the one `$gemm` states (matrixmultiply's,
                // which rt2's `sgemm` repeats), and this forwards every argument unchanged.
                unsafe { $gemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
            }
        }
    };
}
acc!(f32, sgemm::sgemm);
acc!(f64, matrixmultiply::dgemm);

/// A float element type and the precision its kernels compute in: float16, bfloat16 and
/// float32 in f32 (half precision is rounded once per output element, as ONNX Runtime
/// does), float64 in f64.
pub trait Real: Elem + Copy {
    type Acc: Acc;
    fn widen(self) -> Self::Acc;
    fn narrow(a: Self::Acc) -> Self;
}

impl Real for f32 {
    type Acc = f32;
    fn widen(self) -> f32 {
        self
    }
    fn narrow(a: f32) -> Self {
        a
    }
}
impl Real for f64 {
    type Acc = f64;
    fn widen(self) -> f64 {
        self
    }
    fn narrow(a: f64) -> Self {
        a
    }
}
impl Real for f16 {
    type Acc = f32;
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(a: f32) -> Self {
        f16::from_f32(a)
    }
}
impl Real for bf16 {
    type Acc = f32;
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(a: f32) -> Self {
        bf16::from_f32(a)
    }
}

/// The elements in the compute precision.
pub fn widen_all<T: Real>(s: &[T]) -> Vec<T::Acc> {
    s.iter().map(|&x| x.widen()).collect()
}

/// Writes `src` rounded to the element type into `dst` (the shorter length of the two).
pub fn narrow_into<T: Real>(src: &[T::Acc], dst: &mut [T]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = T::narrow(s);
    }
}

/// Where a matrix's elements sit in a buffer: element (r, c) is at
/// `offset + r * row_stride + c * col_stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatLayout {
    pub rows: usize,
    pub cols: usize,
    pub offset: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl MatLayout {
    /// A dense row-major matrix at `offset`.
    pub fn dense(rows: usize, cols: usize, offset: usize) -> Self {
        MatLayout {
            rows,
            cols,
            offset,
            row_stride: cols,
            col_stride: 1,
        }
    }
    /// Rows `row_stride` apart, elements contiguous within a row.
    pub fn rows(rows: usize, cols: usize, offset: usize, row_stride: usize) -> Self {
        MatLayout {
            rows,
            cols,
            offset,
            row_stride,
            col_stride: 1,
        }
    }
    /// The same elements read as the transposed matrix.
    pub fn t(self) -> Self {
        MatLayout {
            rows: self.cols,
            cols: self.rows,
            offset: self.offset,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }
    /// Whether every element is inside a buffer of `len` elements.
    fn fits(&self, len: usize) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .zip((self.cols - 1).checked_mul(self.col_stride))
            .and_then(|(r, c)| r.checked_add(c))
            .and_then(|rc| rc.checked_add(self.offset));
        last.is_some_and(|l| l < len)
            && isize::try_from(self.row_stride.max(self.col_stride)).is_ok()
    }
}

/// `C = alpha * A B + beta * C` on strided matrices (`beta` zero: C is only written).
///
/// The shapes and extents are the caller's own arithmetic, not user data: a mismatch is a
/// bug in the kernel, and this panics rather than let matrixmultiply touch memory outside
/// the buffers.
#[allow(clippy::too_many_arguments)]
pub fn gemm<A: Acc>(
    alpha: A,
    a: &[A],
    la: MatLayout,
    b: &[A],
    lb: MatLayout,
    beta: A,
    c: &mut [A],
    lc: MatLayout,
) {
    assert!(
        la.cols == lb.rows && lc.rows == la.rows && lc.cols == lb.cols,
        "gemm shapes: {la:?} x {lb:?} -> {lc:?}"
    );
    assert!(
        la.fits(a.len()) && lb.fits(b.len()) && lc.fits(c.len()),
        "gemm extents: {la:?} {lb:?} {lc:?} in {} {} {}",
        a.len(),
        b.len(),
        c.len()
    );
    let (m, k, n) = (la.rows, la.cols, lb.cols);
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: the asserts above keep every addressed element inside its slice (`fits`,
    // which also keeps the strides within `isize`), and `c` is borrowed mutably, so it
    // aliases neither `a` nor `b`; its elements are initialized, as a slice's are. With
    // m and n non-zero, `lc.offset` is inside `c`; A's and B's offsets are clamped to
    // their slices, since with k zero no element of A or B is read. That `lc` addresses
    // distinct elements is the callers' layouts' (`dense`, or `rows` at least `cols`
    // apart), not checked here: an overlap would give wrong sums, not an unsound access,
    // since neither product splits C across threads or makes references into it.
    unsafe {
        A::gemm_raw(
            m,
            k,
            n,
            alpha,
            a.as_ptr().add(la.offset.min(a.len())),
            la.row_stride as isize,
            la.col_stride as isize,
            b.as_ptr().add(lb.offset.min(b.len())),
            lb.row_stride as isize,
            lb.col_stride as isize,
            beta,
            c.as_mut_ptr().add(lc.offset),
            lc.row_stride as isize,
            lc.col_stride as isize,
        );
    }
}

/// The offsets into a tensor of `shape` (right-aligned, broadcast along dims of 1) of the
/// elements of `dims`, in row-major order; `None` when it does not broadcast.
pub fn broadcast_offsets(shape: &[usize], dims: &[usize]) -> Option<Vec<usize>> {
    if shape.len() > dims.len() {
        // Extra leading dims must be 1.
        let extra = shape.len() - dims.len();
        if shape[..extra].iter().any(|&d| d != 1) {
            return None;
        }
        return broadcast_offsets(&shape[extra..], dims);
    }
    let lead = dims.len() - shape.len();
    let mut strides = vec![0usize; dims.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        let (s, d) = (shape[i], dims[lead + i]);
        if s != d && s != 1 {
            return None;
        }
        strides[lead + i] = if s == 1 { 0 } else { acc };
        acc *= s;
    }
    let mut out = vec![0usize];
    for (&d, &st) in dims.iter().zip(&strides) {
        out = out
            .iter()
            .flat_map(|&o| (0..d).map(move |k| o + k * st))
            .collect();
    }
    Some(out)
}

/// The values of an int32 or int64 input (labels, positions, lengths), as i64.
pub fn index_values(ctx: &InferCtx, t: &TensorRef, index: usize) -> Result<Vec<i64>, OpError> {
    let typed = |e: OpError| match e {
        OpError::Input { msg, .. } => ctx.input_error(index, msg),
        e => e,
    };
    match t.dtype {
        DType::I64 => Ok(t.slice::<i64>().map_err(typed)?.to_vec()),
        DType::I32 => Ok(t
            .slice::<i32>()
            .map_err(typed)?
            .iter()
            .map(|&v| v as i64)
            .collect()),
        other => Err(ctx.input_error(index, format!("is {other}, expected int32 or int64"))),
    }
}

/// An optional input that was left out: absent from the list, or ONNX's empty 1-D
/// placeholder.
pub fn absent(meta: Option<&TensorMeta>) -> bool {
    meta.is_none_or(|m| m.shape.as_deref() == Some(&[0]))
}

/// A dim product that stays unknown when a factor is.
pub fn dim_mul(a: i64, b: i64) -> i64 {
    if a < 0 || b < 0 { UNKNOWN } else { a * b }
}

/// A dim quotient that stays unknown when either side is (or the divisor is 0).
pub fn dim_div(a: i64, b: i64) -> i64 {
    if a < 0 || b <= 0 { UNKNOWN } else { a / b }
}

/// A dim sum that stays unknown when a term is.
pub fn dim_add(a: i64, b: i64) -> i64 {
    if a < 0 || b < 0 { UNKNOWN } else { a + b }
}

/// A float stash type attribute (`stash_type`, `softmax_precision`) names one of ONNX's
/// float types; the kernels compute in at least f32 whatever it says.
pub fn check_float_type(ctx: &InferCtx, name: &str, default: i64) -> Result<(), OpError> {
    match ctx.attr_int(name, default)? {
        1 | 10 | 11 | 16 => Ok(()),
        other => Err(ctx.attr_error(name, format!("{other} is not a floating-point ONNX type"))),
    }
}

/// The error for an element type a float kernel does not take.
pub fn not_float(ctx: &InferCtx, index: usize, dtype: DType) -> OpError {
    ctx.input_error(index, format!("is {dtype}; the op computes on float types"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_reads_strided_and_transposed_operands() {
        // A = [[1, 2], [3, 4]] stored column-major; B = [[1, 0, 2], [0, 1, 3]] row-major.
        let a = [1.0f32, 3.0, 2.0, 4.0];
        let b = [1.0f32, 0.0, 2.0, 0.0, 1.0, 3.0];
        let mut c = [9.0f32; 6];
        let la = MatLayout::dense(2, 2, 0).t();
        gemm(
            1.0,
            &a,
            la,
            &b,
            MatLayout::dense(2, 3, 0),
            0.0,
            &mut c,
            MatLayout::dense(2, 3, 0),
        );
        assert_eq!(c, [1.0, 2.0, 8.0, 3.0, 4.0, 18.0]);
        // alpha and beta, in f64.
        let mut d = [1.0f64; 1];
        gemm(
            2.0,
            &[1.0, 2.0],
            MatLayout::dense(1, 2, 0),
            &[3.0, 4.0],
            MatLayout::dense(2, 1, 0),
            1.0,
            &mut d,
            MatLayout::dense(1, 1, 0),
        );
        assert_eq!(d, [23.0]);
    }

    #[test]
    fn half_precision_rounds_once() {
        let x = [f16::from_f32(1.5), f16::from_f32(-2.0)];
        let w = widen_all(&x);
        assert_eq!(w, [1.5f32, -2.0]);
        let mut out = [f16::ZERO; 2];
        narrow_into::<f16>(&[0.1f32, 65504.0], &mut out);
        assert_eq!(out, [f16::from_f32(0.1), f16::MAX]);
    }
}
