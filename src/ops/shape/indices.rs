//! Integer inputs as compute functions read them: index tensors (Gather's indices, Slice's starts,
//! Pad's pads, an axes input) widened to i64 whatever their integer type, and ONNX's
//! negative indices resolved against a dim.
//!
//! Reading widens once per op into one `Vec`, never per element; resolving is checked,
//! so an index out of range is `None` for the compute function to turn into an error.

use half::{bf16, f16};

use crate::ops::DType;
use crate::ops::TensorRef;

/// The elements of an integer (or bool) tensor as i64; `None` for a float type. A u64
/// above i64's range wraps, as numpy's cast does.
#[allow(clippy::unnecessary_cast)] // one body for every type, i64 included
pub fn ints(t: &TensorRef) -> Option<Vec<i64>> {
    if t.dtype == DType::Bool {
        return Some(t.slice::<u8>().ok()?.iter().map(|&v| v as i64).collect());
    }
    crate::dispatch!(t.dtype, T in [i64, i32, i16, i8, u64, u32, u16, u8] =>
        Some(t.slice::<T>().ok()?.iter().map(|&v| v as i64).collect()),
        _other => None)
}

/// The elements of any numeric tensor as f64 (OneHot takes float indices and depth).
pub fn floats(t: &TensorRef) -> Option<Vec<f64>> {
    match t.dtype {
        DType::F32 => Some(t.slice::<f32>().ok()?.iter().map(|&v| v as f64).collect()),
        DType::F64 => Some(t.slice::<f64>().ok()?.to_vec()),
        DType::F16 => Some(t.slice::<f16>().ok()?.iter().map(|v| v.to_f64()).collect()),
        DType::Bf16 => Some(t.slice::<bf16>().ok()?.iter().map(|v| v.to_f64()).collect()),
        _ => Some(ints(t)?.into_iter().map(|v| v as f64).collect()),
    }
}

/// Index `i` into a dim of `dim`, counting from the end when negative; `None` out of
/// range.
pub fn resolve(i: i64, dim: usize) -> Option<usize> {
    let d = dim as i64;
    let j = if i < 0 { i + d } else { i };
    (0..d).contains(&j).then_some(j as usize)
}

/// The integer values of an optional input: `None` when it is absent (past the inputs,
/// or left out as an empty 1-D tensor).
pub fn optional_ints(inputs: &[TensorRef], k: usize) -> Option<Vec<i64>> {
    inputs
        .get(k)
        .filter(|t| !(t.rank() == 1 && t.is_empty()))
        .and_then(ints)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Tensor;

    #[test]
    fn widens_and_resolves() {
        let t = Tensor::from_vec(&[3], &[-1i32, 0, 7]);
        assert_eq!(ints(&t.as_ref()), Some(vec![-1, 0, 7]));
        let f = Tensor::from_vec(&[1], &[f16::from_f32(2.5)]);
        assert_eq!(ints(&f.as_ref()), None);
        assert_eq!(floats(&f.as_ref()), Some(vec![2.5]));
        assert_eq!(resolve(-1, 4), Some(3));
        assert_eq!(resolve(4, 4), None);
        assert_eq!(resolve(-5, 4), None);
        let empty = Tensor::zeroed(DType::I64, &[0]);
        assert_eq!(optional_ints(&[t.as_ref(), empty.as_ref()], 1), None);
        assert_eq!(optional_ints(&[t.as_ref()], 0), Some(vec![-1, 0, 7]));
    }
}
