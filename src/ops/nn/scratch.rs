//! Each thread's working memory for the convolution kernels (the im2col matrix, the
//! direct kernels' padded planes) and the float32 recurrent ops (the input projection
//! of every step), kept between calls and grown to the largest.

use std::cell::RefCell;

use super::scalar::Scalar;
use crate::ops::Buffer;

thread_local! {
    /// Each thread's working memory, kept between calls: the im2col matrix of a 3x3
    /// convolution over a 56x56 image with 64 channels is 7 MB, and allocating and
    /// zero-filling that much per call is avoidable work. It only grows.
    static SCRATCH: RefCell<Buffer> = RefCell::new(Buffer::default());
}

/// Runs `f` on `len` elements of this thread's scratch memory (contents unspecified:
/// `f` writes before it reads). Debug builds fill it with all-ones bytes, a NaN in every
/// float type, so a kernel that reads what it did not write shows in the tests.
pub(crate) fn with_scratch<T: Scalar, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    let bytes = len * std::mem::size_of::<T>();
    let poisoned = |b: &mut [u8]| {
        if cfg!(debug_assertions) {
            b.fill(0xFF);
        }
    };
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < bytes {
                *buf = Buffer::zeroed(bytes);
            }
            let b = &mut buf.as_bytes_mut()[..bytes];
            poisoned(b);
            f(bytemuck::cast_slice_mut(b))
        }
        // Re-entered on this thread (a nested parallel call ran another kernel here, or
        // one direction of a recurrent op ran beside the other's): that one gets its
        // own memory.
        Err(_) => {
            let mut own = Buffer::zeroed(bytes);
            poisoned(own.as_bytes_mut());
            f(bytemuck::cast_slice_mut(own.as_bytes_mut()))
        }
    })
}
