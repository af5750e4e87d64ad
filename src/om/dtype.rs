//! Element data types and the three numberings rt2 meets: GE's protobuf `DataType` enum
//! (TensorDescriptor.dtype), GE's C++ `ge::DataType` (AttrDef.dt, MODEL_INOUT_INFO) and
//! ONNX's `TensorProto.DataType`. The numberings are kept apart by construction: each has
//! its own conversion pair and no raw integer leaves this file unlabelled.

use std::fmt;

macro_rules! data_types {
    ($( $(#[$meta:meta])* $v:ident = $name:literal, proto $p:literal, ge $g:literal, onnx $o:expr, bits $b:literal; )*) => {
        /// An element type. Names are NumPy's where NumPy has one, else GE's lowercased.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub enum DataType { $( $(#[$meta])* $v, )* }

        impl DataType {
            /// Every data type, in GE proto order.
            pub const ALL: &'static [DataType] = &[$( DataType::$v, )*];

            /// The display name (`float32`, `int64`, `bfloat16`, ...).
            pub fn name(self) -> &'static str {
                match self { $( DataType::$v => $name, )* }
            }
            /// From a display name.
            pub fn from_name(s: &str) -> Option<Self> {
                match s { $( $name => Some(DataType::$v), )* _ => None }
            }
            /// GE protobuf numbering (`ge.proto.DataType`).
            pub fn to_proto(self) -> i32 {
                match self { $( DataType::$v => $p, )* }
            }
            /// From GE protobuf numbering.
            pub fn from_proto(v: i32) -> Option<Self> {
                match v { $( $p => Some(DataType::$v), )* _ => None }
            }
            /// GE C++ numbering (`ge::DataType`), used by AttrDef.dt and MODEL_INOUT_INFO.
            pub fn to_ge(self) -> i64 {
                match self { $( DataType::$v => $g, )* }
            }
            /// From GE C++ numbering.
            pub fn from_ge(v: i64) -> Option<Self> {
                match v { $( $g => Some(DataType::$v), )* _ => None }
            }
            /// ONNX `TensorProto.DataType`, where ONNX has the type.
            pub fn to_onnx(self) -> Option<i32> {
                match self { $( DataType::$v => $o, )* }
            }
            /// From ONNX `TensorProto.DataType`.
            pub fn from_onnx(v: i32) -> Option<Self> {
                $( if $o == Some(v) { return Some(DataType::$v); } )*
                None
            }
            /// Bits per element; 0 for types without a fixed size (strings, resources).
            pub fn bits(self) -> u32 {
                match self { $( DataType::$v => $b, )* }
            }
        }
    };
}

data_types! {
    #[default]
    Undefined = "undefined", proto 0, ge 28, onnx Some(0), bits 0;
    Float32 = "float32", proto 1, ge 0, onnx Some(1), bits 32;
    Float16 = "float16", proto 2, ge 1, onnx Some(10), bits 16;
    Int8 = "int8", proto 3, ge 2, onnx Some(3), bits 8;
    Uint8 = "uint8", proto 4, ge 4, onnx Some(2), bits 8;
    Int16 = "int16", proto 5, ge 6, onnx Some(5), bits 16;
    Uint16 = "uint16", proto 6, ge 7, onnx Some(4), bits 16;
    Int32 = "int32", proto 7, ge 3, onnx Some(6), bits 32;
    Int64 = "int64", proto 8, ge 9, onnx Some(7), bits 64;
    Uint32 = "uint32", proto 9, ge 8, onnx Some(12), bits 32;
    Uint64 = "uint64", proto 10, ge 10, onnx Some(13), bits 64;
    Bool = "bool", proto 11, ge 12, onnx Some(9), bits 8;
    Float64 = "float64", proto 12, ge 11, onnx Some(11), bits 64;
    String = "string", proto 13, ge 13, onnx Some(8), bits 0;
    DualSubInt8 = "dual_sub_int8", proto 14, ge 14, onnx None, bits 8;
    DualSubUint8 = "dual_sub_uint8", proto 15, ge 15, onnx None, bits 8;
    Complex64 = "complex64", proto 16, ge 16, onnx Some(14), bits 64;
    Complex128 = "complex128", proto 17, ge 17, onnx Some(15), bits 128;
    Qint8 = "qint8", proto 18, ge 18, onnx None, bits 8;
    Qint16 = "qint16", proto 19, ge 19, onnx None, bits 16;
    Qint32 = "qint32", proto 20, ge 20, onnx None, bits 32;
    Quint8 = "quint8", proto 21, ge 21, onnx None, bits 8;
    Quint16 = "quint16", proto 22, ge 22, onnx None, bits 16;
    Resource = "resource", proto 23, ge 23, onnx None, bits 0;
    StringRef = "string_ref", proto 24, ge 24, onnx None, bits 0;
    Dual = "dual", proto 25, ge 25, onnx None, bits 0;
    Variant = "variant", proto 26, ge 26, onnx None, bits 0;
    Bfloat16 = "bfloat16", proto 27, ge 27, onnx Some(16), bits 16;
    Int4 = "int4", proto 28, ge 29, onnx Some(22), bits 4;
    Uint1 = "uint1", proto 29, ge 30, onnx None, bits 1;
    Int2 = "int2", proto 30, ge 31, onnx None, bits 2;
    Uint2 = "uint2", proto 31, ge 32, onnx None, bits 2;
    Complex32 = "complex32", proto 32, ge 33, onnx None, bits 32;
    Hifloat8 = "hifloat8", proto 33, ge 34, onnx None, bits 8;
    Float8E5m2 = "float8_e5m2", proto 34, ge 35, onnx Some(19), bits 8;
    Float8E4m3fn = "float8_e4m3fn", proto 35, ge 36, onnx Some(17), bits 8;
    Float8E8m0 = "float8_e8m0", proto 36, ge 37, onnx Some(24), bits 8;
    Float6E3m2 = "float6_e3m2", proto 37, ge 38, onnx None, bits 6;
    Float6E2m3 = "float6_e2m3", proto 38, ge 39, onnx None, bits 6;
    Float4E2m1 = "float4_e2m1", proto 39, ge 40, onnx Some(23), bits 4;
    Float4E1m2 = "float4_e1m2", proto 40, ge 41, onnx None, bits 4;
    Hifloat4 = "hifloat4", proto 41, ge 42, onnx None, bits 4;
}

impl DataType {
    /// GE's proto enum name (`DT_FLOAT`, `DT_BF16`, ...), as text dumps and JSON print it.
    pub fn proto_name(self) -> &'static str {
        crate::proto::ge_ir::DataType::try_from(self.to_proto())
            .map(|d| d.as_str_name())
            .unwrap_or("DT_UNDEFINED")
    }

    /// Bytes taken by `count` elements (sub-byte types pack, rounding up); `None` for
    /// types without a fixed size or on overflow.
    pub fn byte_size(self, count: u64) -> Option<u64> {
        let bits = self.bits() as u64;
        if bits == 0 {
            return None;
        }
        count.checked_mul(bits).map(|b| b.div_ceil(8))
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numberings_round_trip_and_differ() {
        for &d in DataType::ALL {
            assert_eq!(DataType::from_proto(d.to_proto()), Some(d));
            assert_eq!(DataType::from_ge(d.to_ge()), Some(d));
            assert_eq!(DataType::from_name(d.name()), Some(d));
            if let Some(o) = d.to_onnx() {
                assert_eq!(DataType::from_onnx(o), Some(d));
            }
        }
        // The classic trap: proto 1 is float, C++ 1 is float16.
        assert_eq!(DataType::from_proto(1), Some(DataType::Float32));
        assert_eq!(DataType::from_ge(1), Some(DataType::Float16));
        assert_eq!(DataType::from_ge(9), Some(DataType::Int64));
        assert_eq!(DataType::Bfloat16.proto_name(), "DT_BF16");
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(DataType::Float32.byte_size(3), Some(12));
        assert_eq!(DataType::Int4.byte_size(3), Some(2));
        assert_eq!(DataType::String.byte_size(3), None);
    }
}
