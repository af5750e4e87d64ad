//! The float element types of the linear-algebra family and the precision their kernels
//! compute in ([`Real`], [`Acc`]), the one strided matrix product every kernel calls
//! ([`gemm`], over [`super::sgemm`] for f32 and matrixmultiply's `dgemm` for f64), and
//! when a kernel splits its work across threads. It knows no op.

use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub};

use half::{bf16, f16};

use super::sgemm;
use crate::ops::tensor::Elem;

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
