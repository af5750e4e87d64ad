//! Element types the device computes on, with NumPy's names.
//!
//! The device's own enum, apart from the model-file `DataType` of `om`: the device does
//! not depend on file formats, and lowering converts between the two.

use std::fmt;

macro_rules! dtypes {
    ($( $v:ident = $name:literal, $bytes:literal; )*) => {
        /// An element type the device stores and computes on.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum DType { $( $v, )* }

        impl DType {
            /// Every element type.
            pub const ALL: &'static [DType] = &[$( DType::$v, )*];

            /// NumPy's name (`float32`, `int64`, `bfloat16`, ...).
            pub fn name(self) -> &'static str {
                match self { $( DType::$v => $name, )* }
            }

            /// From NumPy's name.
            pub fn from_name(s: &str) -> Option<DType> {
                match s { $( $name => Some(DType::$v), )* _ => None }
            }

            /// Bytes per element.
            pub fn size(self) -> usize {
                match self { $( DType::$v => $bytes, )* }
            }
        }
    };
}

dtypes! {
    F32 = "float32", 4;
    F16 = "float16", 2;
    Bf16 = "bfloat16", 2;
    F64 = "float64", 8;
    I8 = "int8", 1;
    I16 = "int16", 2;
    I32 = "int32", 4;
    I64 = "int64", 8;
    U8 = "uint8", 1;
    U16 = "uint16", 2;
    U32 = "uint32", 4;
    U64 = "uint64", 8;
    Bool = "bool", 1;
}

impl DType {
    /// An integer type, or bool (stored as one byte, 0 or 1).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I8
                | DType::I16
                | DType::I32
                | DType::I64
                | DType::U8
                | DType::U16
                | DType::U32
                | DType::U64
                | DType::Bool
        )
    }

    /// A floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::Bf16 | DType::F32 | DType::F64)
    }

    /// Bytes of a tensor of this type with `dims`: the element count first, then the
    /// element size. `None` for a negative dim or past `u64`.
    pub fn tensor_bytes(self, dims: &[i64]) -> Option<u64> {
        dims.iter()
            .try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?))?
            .checked_mul(self.size() as u64)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tensor_bytes_counts_elements_then_size() {
        assert_eq!(DType::F32.tensor_bytes(&[2, 3]), Some(24));
        assert_eq!(DType::Bool.tensor_bytes(&[]), Some(1), "a scalar");
        assert_eq!(DType::I64.tensor_bytes(&[-1, 3]), None);
        assert_eq!(DType::F64.tensor_bytes(&[i64::MAX, 4]), None);
        assert_eq!(
            DType::F32.tensor_bytes(&[1 << 62, 0]),
            Some(0),
            "empty, however wide"
        );
    }

    use super::*;

    #[test]
    fn names_round_trip() {
        for &d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::Bf16.size(), 2);
        assert_eq!(DType::from_name("float8"), None);
    }
}
