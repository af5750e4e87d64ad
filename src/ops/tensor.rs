//! What an op's CPU compute works on: typed views over raw tensor bytes.
//!
//! A launch gives a compute function its inputs as [`TensorRef`]s and its outputs as [`TensorMut`]s
//! over memory the runtime already allocated (the sizes came from shape inference and
//! CalcTensorSize), so a compute function writes its results in place and allocates nothing for
//! them. Bytes are little-endian elements of the tensor's [`DType`]; `bool` is one byte, 0 or 1,
//! and compute functions see it as `u8`. A view is typed with [`Elem`]: the element type must match
//! the tensor's and the bytes must be aligned for it, which every device and host buffer
//! ([`Buffer`]) is.

use half::{bf16, f16};
use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn};

use crate::ops::{DType, HostTensor};

use super::OpError;

/// A Rust element type a compute function computes with, and the device type it stands for.
pub trait Elem: bytemuck::Pod + Send + Sync + std::fmt::Debug + PartialEq + 'static {
    const DTYPE: DType;
}

macro_rules! elems {
    ($($t:ty => $d:ident),* $(,)?) => { $( impl Elem for $t { const DTYPE: DType = DType::$d; } )* };
}
elems!(f32 => F32, f16 => F16, bf16 => Bf16, f64 => F64, i8 => I8, i16 => I16, i32 => I32,
    i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64);

/// Whether tensors of `dtype` are viewed as `T` (`bool` as `u8`).
fn viewable<T: Elem>(dtype: DType) -> bool {
    T::DTYPE == dtype || (dtype == DType::Bool && T::DTYPE == DType::U8)
}

fn elements(shape: &[usize]) -> usize {
    shape.iter().product()
}

fn type_error(what: &str, dtype: DType, want: DType) -> OpError {
    OpError::Input {
        op: String::new(),
        index: 0,
        msg: format!("{what} of type {dtype} viewed as {want}"),
    }
}

/// An input: element type, dims, and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct TensorRef<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub data: &'a [u8],
}

impl<'a> TensorRef<'a> {
    pub fn new(dtype: DType, shape: &'a [usize], data: &'a [u8]) -> Self {
        TensorRef { dtype, shape, data }
    }
    pub fn len(&self) -> usize {
        elements(self.shape)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    /// The elements as `T`, in row-major order.
    pub fn slice<T: Elem>(&self) -> Result<&'a [T], OpError> {
        if !viewable::<T>(self.dtype) {
            return Err(type_error("an input", self.dtype, T::DTYPE));
        }
        let n = self.len() * std::mem::size_of::<T>();
        if n == 0 {
            // An empty tensor's bytes may sit anywhere, aligned or not: no element is read.
            return Ok(&[]);
        }
        let bytes = self.data.get(..n).ok_or_else(|| OpError::Input {
            op: String::new(),
            index: 0,
            msg: format!(
                "{} bytes hold fewer than {} elements",
                self.data.len(),
                self.len()
            ),
        })?;
        bytemuck::try_cast_slice(bytes).map_err(|e| OpError::Input {
            op: String::new(),
            index: 0,
            msg: format!("input bytes cannot be viewed as {}: {e}", T::DTYPE),
        })
    }
    /// The tensor as an n-dimensional array view.
    pub fn view<T: Elem>(&self) -> Result<ArrayViewD<'a, T>, OpError> {
        let s = self.slice::<T>()?;
        Ok(ArrayViewD::from_shape(IxDyn(self.shape), s).expect("the slice holds the shape"))
    }
}

/// An output the compute function writes: element type, dims, and its bytes.
#[derive(Debug)]
pub struct TensorMut<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub data: &'a mut [u8],
}

impl<'a> TensorMut<'a> {
    pub fn new(dtype: DType, shape: &'a [usize], data: &'a mut [u8]) -> Self {
        TensorMut { dtype, shape, data }
    }
    pub fn len(&self) -> usize {
        elements(self.shape)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    /// The elements as `T`, in row-major order.
    pub fn slice_mut<T: Elem>(&mut self) -> Result<&mut [T], OpError> {
        if !viewable::<T>(self.dtype) {
            return Err(type_error("an output", self.dtype, T::DTYPE));
        }
        let n = self.len() * std::mem::size_of::<T>();
        if n == 0 {
            return Ok(&mut []);
        }
        let have = self.data.len();
        let bytes = self.data.get_mut(..n).ok_or_else(|| OpError::Input {
            op: String::new(),
            index: 0,
            msg: format!("output of {have} bytes holds fewer than the elements its shape needs"),
        })?;
        bytemuck::try_cast_slice_mut(bytes).map_err(|e| OpError::Input {
            op: String::new(),
            index: 0,
            msg: format!("output bytes cannot be viewed as {}: {e}", T::DTYPE),
        })
    }
    /// The tensor as a mutable n-dimensional array view.
    pub fn view_mut<T: Elem>(&mut self) -> Result<ArrayViewMutD<'_, T>, OpError> {
        let shape = self.shape;
        let s = self.slice_mut::<T>()?;
        Ok(ArrayViewMutD::from_shape(IxDyn(shape), s).expect("the slice holds the shape"))
    }
    /// A read-only view of the same tensor.
    pub fn as_ref(&self) -> TensorRef<'_> {
        TensorRef::new(self.dtype, self.shape, self.data)
    }
}

/// Host bytes aligned for every element type (64 bytes, a cache line), growable only by
/// replacement: what holds a tensor outside device memory, and backs device memory.
#[derive(Clone, Default)]
pub struct Buffer {
    words: Vec<Line>,
    len: usize,
}

#[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C, align(64))]
struct Line([u8; 64]);

impl Buffer {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        Buffer {
            words: vec![Line([0; 64]); len.div_ceil(64)],
            len,
        }
    }
    /// `len` zero bytes, or `None` when the host cannot give them: the allocation is
    /// asked of the allocator and a refusal is returned, where [`Buffer::zeroed`] aborts
    /// the process. Zeroed memory comes from `alloc_zeroed`, as `vec!` gets it, so a large
    /// buffer costs no writes until it is used (the OS hands out zero pages lazily).
    pub fn try_zeroed(len: usize) -> Option<Self> {
        let lines = len.div_ceil(64);
        if lines == 0 {
            return Some(Buffer::default());
        }
        let layout = std::alloc::Layout::array::<Line>(lines).ok()?;
        // SAFETY: `layout` has a non-zero size (`lines >= 1` lines of 64 bytes).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Line>();
        if ptr.is_null() {
            return None;
        }
        // SAFETY: `ptr` was allocated by the global allocator with the layout of `lines`
        // `Line`s (size and alignment as `Vec<Line>` computes them), and all its bytes
        // are zero, which is a valid `Line` (`Line` is `Zeroable`): so it is a vector of
        // length and capacity `lines`, which the `Vec` now owns and frees.
        let words = unsafe { Vec::from_raw_parts(ptr, lines, lines) };
        Some(Buffer { words, len })
    }
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut b = Buffer::zeroed(bytes.len());
        b.as_bytes_mut().copy_from_slice(bytes);
        b
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({} bytes)", self.len)
    }
}

/// A tensor in aligned host memory: what the host-side driver ([`super::OpRegistry::run_on_host`])
/// takes and gives.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Buffer,
}

impl Tensor {
    pub fn zeroed(dtype: DType, shape: &[usize]) -> Self {
        Tensor {
            dtype,
            shape: shape.to_vec(),
            data: Buffer::zeroed(elements(shape) * dtype.size()),
        }
    }
    /// A tensor of `T` elements.
    pub fn from_vec<T: Elem>(shape: &[usize], v: &[T]) -> Self {
        assert_eq!(elements(shape), v.len(), "the elements fill the shape");
        Tensor {
            dtype: T::DTYPE,
            shape: shape.to_vec(),
            data: Buffer::from_bytes(bytemuck::cast_slice(v)),
        }
    }
    /// From a host tensor; `None` for a negative dim or too few bytes.
    pub fn from_host(t: &HostTensor) -> Option<Self> {
        let shape: Vec<usize> = t
            .shape
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<_>>()?;
        let n = elements(&shape).checked_mul(t.dtype.size())?;
        Some(Tensor {
            dtype: t.dtype,
            shape,
            data: Buffer::from_bytes(t.data.get(..n)?),
        })
    }
    pub fn to_host(&self) -> HostTensor {
        HostTensor {
            dtype: self.dtype,
            shape: self.shape.iter().map(|&d| d as i64).collect(),
            data: self.data.as_bytes().to_vec().into(),
        }
    }
    pub fn as_ref(&self) -> TensorRef<'_> {
        TensorRef::new(self.dtype, &self.shape, self.data.as_bytes())
    }
    pub fn as_mut(&mut self) -> TensorMut<'_> {
        TensorMut::new(self.dtype, &self.shape, self.data.as_bytes_mut())
    }
    /// The elements as `T`.
    pub fn slice<T: Elem>(&self) -> Result<&[T], OpError> {
        self.as_ref().slice()
    }
}

/// Runs `$body` with `$T` bound to the Rust type of `$dtype`, among the listed types;
/// `$else` for any other. Compute functions use it to turn a runtime dtype into a monomorphized
/// loop.
///
/// ```ignore
/// dispatch!(t.dtype, T in [f32, f64, f16, bf16] => sum::<T>(t), other => Err(...))
/// ```
#[macro_export]
macro_rules! dispatch {
    ($dtype:expr, $T:ident in [$($t:ty),* $(,)?] => $body:expr, $other:ident => $else:expr) => {{
        let d = $dtype;
        $( if d == <$t as $crate::ops::tensor::Elem>::DTYPE { type $T = $t; $body } else )*
        { let $other = d; $else }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_check_type_and_length() {
        let t = Tensor::from_vec(&[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let v = t.as_ref().view::<f32>().unwrap();
        assert_eq!(v[[1, 2]], 6.0);
        assert!(t.as_ref().slice::<i32>().is_err(), "wrong type");
        let short = TensorRef::new(DType::F32, &[4, 4], t.data.as_bytes());
        assert!(short.slice::<f32>().is_err(), "too few bytes");
    }

    #[test]
    fn buffers_are_aligned_for_every_type() {
        for len in [0, 1, 7, 64, 65, 1000] {
            let b = Buffer::zeroed(len);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_bytes().as_ptr() as usize % 64, 0);
        }
    }

    #[test]
    fn fallible_buffers_are_zeroed_and_aligned_or_refused() {
        for len in [0, 1, 64, 65, 100_000] {
            let b = Buffer::try_zeroed(len).expect("a small buffer");
            assert_eq!(b.len(), len);
            assert!(b.as_bytes().iter().all(|&x| x == 0));
            assert_eq!(b.as_bytes().as_ptr() as usize % 64, 0);
        }
        // More than the address space holds: refused, not an abort.
        assert!(Buffer::try_zeroed(usize::MAX).is_none());
        assert!(Buffer::try_zeroed(isize::MAX as usize - 63).is_none());
    }

    #[test]
    fn bool_is_viewed_as_bytes() {
        let mut t = Tensor::zeroed(DType::Bool, &[3]);
        t.as_mut().slice_mut::<u8>().unwrap()[1] = 1;
        assert_eq!(t.slice::<u8>().unwrap(), &[0, 1, 0]);
    }

    #[test]
    fn dispatch_picks_the_type() {
        fn size_of(d: DType) -> usize {
            dispatch!(d, T in [f32, f64, i8] => std::mem::size_of::<T>(), _d => 0)
        }
        assert_eq!(size_of(DType::F64), 8);
        assert_eq!(size_of(DType::I8), 1);
        assert_eq!(size_of(DType::U64), 0);
    }
}
