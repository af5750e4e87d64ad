//! Attributes of a kernel or an op, and host tensors.
//!
//! One attribute type for the op library and the ExecuteGraph alike: lowering writes an
//! op's attributes once, and at run time the kernels hand them to the op's shape inference
//! and compute as they are, with no conversion per call.

use crate::npu::DType;

/// A tensor in host memory: a constant, a folded shape, a Const's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostTensor {
    pub dtype: DType,
    /// Dims; empty for a scalar.
    pub shape: Vec<i64>,
    /// Little-endian element bytes, `dtype.size()` per element.
    pub data: Vec<u8>,
}

impl HostTensor {
    /// Elements by the shape, `None` for a negative dim or on overflow.
    pub fn element_count(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |n, &d| {
            usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
        })
    }
    /// Whether the byte count is the one dtype and shape call for.
    pub fn is_consistent(&self) -> bool {
        self.element_count()
            .and_then(|n| n.checked_mul(self.dtype.size()))
            == Some(self.data.len())
    }
}

/// A typed attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    Float(f64),
    Floats(Vec<f64>),
    Bool(bool),
    Str(String),
    Strs(Vec<String>),
    Bytes(Vec<u8>),
    DType(DType),
    Tensor(HostTensor),
}

impl Attr {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Attr::Int(i) => Some(*i),
            _ => None,
        }
    }
    pub fn as_ints(&self) -> Option<&[i64]> {
        match self {
            Attr::Ints(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Attr::Float(f) => Some(*f),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Attr::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_tensor(&self) -> Option<&HostTensor> {
        match self {
            Attr::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_sizes() {
        let t = HostTensor {
            dtype: DType::F32,
            shape: vec![2, 3],
            data: vec![0; 24],
        };
        assert_eq!(t.element_count(), Some(6));
        assert!(t.is_consistent());
        let bad = HostTensor {
            dtype: DType::I64,
            shape: vec![-1],
            data: vec![],
        };
        assert_eq!(bad.element_count(), None);
        assert!(!bad.is_consistent());
        assert_eq!(Attr::Ints(vec![1, 2]).as_ints(), Some(&[1i64, 2][..]));
        assert_eq!(Attr::Int(3).as_str(), None);
    }
}
