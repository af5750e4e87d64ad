//! Conversion of ComputeGraph attributes and types into the device's: what lowering writes
//! onto exec nodes and hands to the op library.
//!
//! ONNX stores Cast's `to` (and the like) as an ONNX type number; lowering turns it into
//! a device element type here, so the op library never sees a file format's numbering.

use crate::om::graph::{AttrMap, AttrValue, ListAttr, Tensor};
use crate::om::{DataType, Shape};
use crate::ops::{Attr, Attrs, DType, HostTensor};

/// Attributes that name an element type by ONNX number.
pub const ONNX_TYPE_ATTRS: &[&str] = &["to", "dtype", "output_dtype"];

/// The device type of a model type, where the device computes on it.
pub fn dtype(d: DataType) -> Option<DType> {
    Some(match d {
        DataType::Float32 => DType::F32,
        DataType::Float16 => DType::F16,
        DataType::Bfloat16 => DType::Bf16,
        DataType::Float64 => DType::F64,
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::Uint8 => DType::U8,
        DataType::Uint16 => DType::U16,
        DataType::Uint32 => DType::U32,
        DataType::Uint64 => DType::U64,
        DataType::Bool => DType::Bool,
        _ => return None,
    })
}

/// A host tensor of a constant, when the device has its type and the shape is static.
pub fn tensor(t: &Tensor) -> Option<HostTensor> {
    let dims = match &t.desc.shape {
        Shape::Dims(d) if d.iter().all(|&x| x >= 0) => d.clone(),
        _ => return None,
    };
    let ht = HostTensor {
        dtype: dtype(t.desc.dtype)?,
        shape: dims,
        data: t.data.clone(),
    };
    ht.is_consistent().then_some(ht)
}

/// The device's view of a node's attributes. Values the device has no form for (graphs,
/// named attributes, tensor descriptors) are left out: no kernel reads them.
pub fn attrs(map: &AttrMap) -> Attrs {
    convert(map, |_| true)
}

/// The attributes an op's kernels read: [`attrs`] without the bookkeeping GE and rt2 keep
/// on a node (names starting with `_`, and `original_type`).
pub fn op_attrs(map: &AttrMap) -> Attrs {
    convert(map, |k| !k.starts_with('_') && k != "original_type")
}

fn convert(map: &AttrMap, keep: impl Fn(&str) -> bool) -> Attrs {
    // The source map iterates in name order with unique names: the result is built
    // sorted, in one allocation.
    let mut out = Vec::with_capacity(map.len());
    for (k, v) in map.iter().filter(|(k, _)| keep(k)) {
        let converted = match v {
            AttrValue::Int(i) if ONNX_TYPE_ATTRS.contains(&k.as_str()) => i32::try_from(*i)
                .ok()
                .and_then(DataType::from_onnx)
                .and_then(dtype)
                .map(Attr::DType)
                .or(Some(Attr::Int(*i))),
            AttrValue::Int(i) => Some(Attr::Int(*i)),
            AttrValue::Float(f) => Some(Attr::Float(*f as f64)),
            AttrValue::Bool(b) => Some(Attr::Bool(*b)),
            AttrValue::Str(s) => Some(match String::from_utf8(s.clone()) {
                Ok(s) => Attr::Str(s),
                Err(e) => Attr::Bytes(e.into_bytes()),
            }),
            AttrValue::Bytes(b) => Some(Attr::Bytes(b.clone())),
            AttrValue::DataType(d) => dtype(*d).map(Attr::DType),
            AttrValue::Tensor(t) => tensor(t).map(Attr::Tensor),
            AttrValue::List(ListAttr::Int(v)) => Some(Attr::Ints(v.clone())),
            AttrValue::List(ListAttr::Float(v)) => {
                Some(Attr::Floats(v.iter().map(|&f| f as f64).collect()))
            }
            AttrValue::List(ListAttr::Str(v)) => Some(Attr::Strs(
                v.iter()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect(),
            )),
            AttrValue::List(ListAttr::None) => Some(Attr::Ints(Vec::new())),
            _ => None,
        };
        if let Some(a) = converted {
            out.push((k.clone(), a));
        }
    }
    Attrs::from_sorted(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::TensorDesc;

    #[test]
    fn converts_values_and_onnx_type_numbers() {
        let mut m = AttrMap::new();
        m.insert("to".into(), AttrValue::Int(7)); // ONNX INT64
        m.insert("axis".into(), AttrValue::Int(-1));
        m.insert("alpha".into(), AttrValue::Float(0.5));
        m.insert("pads".into(), AttrValue::List(ListAttr::Int(vec![1, 1])));
        m.insert("mode".into(), AttrValue::str("constant"));
        m.insert(
            "value".into(),
            AttrValue::Tensor(Box::new(Tensor {
                desc: TensorDesc::new(DataType::Float32, Shape::Dims(vec![2])),
                data: vec![0; 8],
            })),
        );
        m.insert("body".into(), AttrValue::Graph(Box::default()));
        let a = attrs(&m);
        assert_eq!(a["to"], Attr::DType(DType::I64));
        assert_eq!(a["axis"], Attr::Int(-1));
        assert_eq!(a["alpha"], Attr::Float(0.5));
        assert_eq!(a["pads"], Attr::Ints(vec![1, 1]));
        assert_eq!(a["mode"], Attr::Str("constant".into()));
        assert_eq!(
            a["value"].as_tensor().map(|t| t.shape.clone()),
            Some(vec![2])
        );
        assert!(!a.contains_key("body"));
        assert_eq!(dtype(DataType::String), None);
    }
}
