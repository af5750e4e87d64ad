//! Conversion of ComputeGraph attributes and types into the device's: what lowering writes
//! onto exec nodes and hands to the op library.
//!
//! A type attribute (Cast's `to`, Shape's `dtype`) is a number in its file's numbering:
//! ONNX's on the nodes the ONNX importer made, GE's on GE's own; lowering turns it into a
//! device element type here, so the op library never sees a file format's numbering.

use crate::om::graph::{AttrMap, AttrValue, ListAttr, Tensor};
use crate::om::{DataType, Shape};
use crate::ops::{Attr, Attrs, DType, HostTensor};

/// The kernel attributes that carry a tensor's formats onto the exec node that makes the
/// tensor (`AllocMemHbm`, a model input's `Data`), where views and kernels read them:
/// storage format, origin format (both `C_Format` numbers, with GE's sub-format and C0
/// bits) and origin shape.
pub const FORMAT_ATTR: &str = "_format";
pub const ORIGIN_FORMAT_ATTR: &str = "_origin_format";
pub const ORIGIN_SHAPE_ATTR: &str = "_origin_shape";

/// A tensor's formats as its GE descriptor records them: the storage format (`layout`,
/// made exact by the `format_for_int` attribute), in which the descriptor's shape is what
/// memory holds, and the origin format and shape (`origin_format`, `origin_shape`), what
/// the op means. GE serializes all of them on every descriptor (metadef
/// `GeTensorDescAsProto`). Plain numbers here; the format names live in `om::inout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorFormat {
    /// `C_Format` number (`format_for_int`, else the layout's number; ND when neither).
    pub format: i64,
    /// `C_Format` number (`origin_format_for_int`, else `origin_format`'s; else `format`).
    pub origin_format: i64,
    /// `origin_shape`, when the descriptor has one.
    pub origin_shape: Option<Vec<i64>>,
}

/// `C_Format` numbers of the two plain formats.
const NCHW: i64 = 0;
const ND: i64 = 2;

impl TensorFormat {
    /// The formats of `d`.
    pub fn of(d: &crate::om::TensorDesc) -> TensorFormat {
        let format = Self::format_of(d);
        let origin_format = Self::named_origin_format(d).unwrap_or(format);
        let initialized = !matches!(
            d.attrs.get("origin_shape_initialized"),
            Some(AttrValue::Bool(false))
        );
        let origin_shape = d
            .attrs
            .get("origin_shape")
            .and_then(AttrValue::as_ints)
            .filter(|_| initialized)
            .map(<[i64]>::to_vec);
        TensorFormat {
            format,
            origin_format,
            origin_shape,
        }
    }

    /// The storage format of `d` (GE's number).
    pub(super) fn format_of(d: &crate::om::TensorDesc) -> i64 {
        d.attrs
            .get("format_for_int")
            .and_then(AttrValue::as_int)
            .or_else(|| crate::om::inout::format_number(&d.layout).map(i64::from))
            .unwrap_or(ND)
    }

    /// The origin format `d` names, if it names one (else it is the storage format).
    pub(super) fn named_origin_format(d: &crate::om::TensorDesc) -> Option<i64> {
        d.attrs
            .get("origin_format_for_int")
            .and_then(AttrValue::as_int)
            .or_else(|| {
                d.attrs
                    .get("origin_format")
                    .and_then(AttrValue::as_str)
                    .and_then(|s| crate::om::inout::format_number(s).map(i64::from))
            })
    }

    /// Whether memory holds the tensor as the op means it: ND or NCHW storage, the same
    /// origin format, and an origin shape that is the storage shape (or none). Only the
    /// formats of other tensors are carried onto the ExecuteGraph.
    pub fn is_plain(&self, shape: &Shape) -> bool {
        matches!(self.format, ND | NCHW)
            && self.origin_format == self.format
            && self
                .origin_shape
                .as_ref()
                .is_none_or(|o| *o == shape.to_dims())
    }

    /// Adds [`FORMAT_ATTR`], [`ORIGIN_FORMAT_ATTR`] and [`ORIGIN_SHAPE_ATTR`] to `attrs`.
    pub fn add_to(&self, attrs: &mut crate::ops::AttrMap) {
        attrs.insert(FORMAT_ATTR.into(), Attr::Int(self.format));
        attrs.insert(ORIGIN_FORMAT_ATTR.into(), Attr::Int(self.origin_format));
        if let Some(s) = &self.origin_shape {
            attrs.insert(ORIGIN_SHAPE_ATTR.into(), Attr::Ints(s.clone()));
        }
    }
}

/// The formats of `d` when they are not plain ([`TensorFormat::is_plain`]).
pub fn special_format(d: &crate::om::TensorDesc) -> Option<TensorFormat> {
    let f = TensorFormat::of(d);
    (!f.is_plain(&d.shape)).then_some(f)
}

/// Attributes that name an element type by number: ONNX's numbering on a node the ONNX
/// importer made (it marks each with [`ONNX_OPSET_ATTR`]), GE's C++ numbering
/// (`ge::DataType`) on GE's own nodes (Shape's and Size's `dtype`).
pub const TYPE_ATTRS: &[&str] = &["to", "dtype", "output_dtype"];

/// The attribute the ONNX importer puts on every node it makes: the opset of its domain.
pub const ONNX_OPSET_ATTR: &str = "onnx_opset";

/// The element type type-attribute value `v` of a node names, in the node's numbering
/// (see [`TYPE_ATTRS`]); `None` for a number that numbering does not have.
pub fn type_number(map: &AttrMap, v: i64) -> Option<DataType> {
    if map.contains_key(ONNX_OPSET_ATTR) {
        i32::try_from(v).ok().and_then(DataType::from_onnx)
    } else {
        DataType::from_ge(v)
    }
}

/// How [`type_number`] names `v` in an error.
pub fn type_number_name(map: &AttrMap, v: i64) -> String {
    match type_number(map, v) {
        Some(d) => d.name().to_string(),
        None if map.contains_key(ONNX_OPSET_ATTR) => format!("ONNX type {v}"),
        None => format!("GE type {v}"),
    }
}

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

/// The model type of a device type: [`dtype`]'s inverse.
pub fn model_dtype(d: DType) -> Option<DataType> {
    [
        DataType::Float32,
        DataType::Float16,
        DataType::Bfloat16,
        DataType::Float64,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::Uint8,
        DataType::Uint16,
        DataType::Uint32,
        DataType::Uint64,
        DataType::Bool,
    ]
    .into_iter()
    .find(|&m| dtype(m) == Some(d))
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
        data: t.data.clone().into(),
    };
    ht.is_consistent().then_some(ht)
}

/// The device's view of a node's attributes. Values the device has no form for (graphs,
/// tensor descriptors) are left out: no kernel reads them. A named attribute (GE's
/// `NamedAttrs`, such as Aipp's `aipp` configuration) is flattened into one entry per
/// member, `<name>.<member>`, so a kernel reads its members as plain attributes.
pub fn attrs(map: &AttrMap) -> Attrs {
    convert(map, |_| true)
}

/// The attributes an op's kernels read: [`attrs`] without the bookkeeping GE and rt2 keep
/// on a node (names starting with `_`, and `original_type`), but with rt2's own private
/// attributes for the op (`_rt2_*`: a declared output shape, a fused activation).
pub fn op_attrs(map: &AttrMap) -> Attrs {
    convert(map, |k| {
        (!k.starts_with('_') || k.starts_with("_rt2_")) && k != "original_type"
    })
}

/// Records on a GE node's attributes the origin format of each of its inputs
/// ([`crate::ops::INPUT_FORMATS_ATTR`]), for the ops whose meaning depends on a layout
/// their prototype takes from the tensor, not from an attribute. Left off where every
/// input is ND or undescribed (nothing to tell) and on the ONNX importer's nodes, whose
/// layouts are ONNX's.
pub fn add_input_formats(n: &crate::om::ComputeNode, attrs: &mut Attrs) {
    if n.attrs.contains_key(ONNX_OPSET_ATTR) {
        return;
    }
    let formats: Vec<i64> = n
        .input_descs
        .iter()
        // [`TensorFormat::of`]'s origin format alone, read for every input of every op:
        // the storage format only where no origin format is named.
        .map(|d| TensorFormat::named_origin_format(d).unwrap_or_else(|| TensorFormat::format_of(d)))
        .collect();
    if formats.iter().any(|&f| f != ND) {
        attrs.insert(crate::ops::INPUT_FORMATS_ATTR.into(), Attr::Ints(formats));
    }
}

fn convert(map: &AttrMap, keep: impl Fn(&str) -> bool) -> Attrs {
    // The source map iterates in name order with unique names, so without named
    // attributes the result is built sorted, in one allocation. A flattened member's
    // name need not sort right after its parent's (`a.b` comes after `a-c`): members are
    // merged in afterwards and the whole sorted once; a node's own attribute of the
    // same name wins over a member.
    let mut out = Vec::with_capacity(map.len());
    let mut members = Vec::new();
    for (k, v) in map.iter().filter(|(k, _)| keep(k)) {
        if let AttrValue::Func(named) = v {
            for (member, def) in &named.attr {
                let value = crate::om::ir::convert_attr(def.clone());
                if let Some(a) = value_of(map, member, &value) {
                    members.push((format!("{k}.{member}"), a));
                }
            }
        } else if let Some(a) = value_of(map, k, v) {
            out.push((k.clone(), a));
        }
    }
    if !members.is_empty() {
        members.retain(|(k, _)| out.binary_search_by(|(o, _)| o.cmp(k)).is_err());
        out.append(&mut members);
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    }
    Attrs::from_sorted(out)
}

/// The device's form of attribute `k`'s value `v` (of a node whose attributes are
/// `node`), when it has one.
fn value_of(node: &AttrMap, k: &str, v: &AttrValue) -> Option<Attr> {
    match v {
        AttrValue::Int(i) if TYPE_ATTRS.contains(&k) => type_number(node, *i)
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
        AttrValue::Tensor(t) => tensor(t).map(|t| Attr::Tensor(std::sync::Arc::new(t))),
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
        // A list of int lists (PadD's `paddings`, a [before, after] row per dim) reads
        // flattened, row by row.
        AttrValue::ListListInt(rows) => Some(Attr::Ints(rows.concat())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::TensorDesc;

    #[test]
    fn converts_values_and_onnx_type_numbers() {
        let mut m = AttrMap::new();
        m.insert(ONNX_OPSET_ATTR.into(), AttrValue::Int(17));
        m.insert("to".into(), AttrValue::Int(7)); // ONNX INT64
        m.insert("axis".into(), AttrValue::Int(-1));
        m.insert("alpha".into(), AttrValue::Float(0.5));
        m.insert("pads".into(), AttrValue::List(ListAttr::Int(vec![1, 1])));
        m.insert("mode".into(), AttrValue::str("constant"));
        m.insert(
            "value".into(),
            AttrValue::Tensor(Box::new(Tensor {
                desc: TensorDesc::new(DataType::Float32, Shape::Dims(vec![2])),
                data: vec![0; 8].into(),
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
        // GE's own nodes number types as ge::DataType: 3 is int32 there (int8 in ONNX).
        m.remove(ONNX_OPSET_ATTR);
        m.insert("dtype".into(), AttrValue::Int(3));
        assert_eq!(attrs(&m)["dtype"], Attr::DType(DType::I32));
    }

    #[test]
    fn flattens_named_attributes_into_sorted_members() {
        use crate::proto::ge_ir::{AttrDef, NamedAttrs, attr_def::Value as V};
        let def = |v| AttrDef { value: Some(v) };
        let named = NamedAttrs {
            name: String::new(),
            attr: [
                ("input_format".to_owned(), def(V::I(3))),
                ("csc_switch".to_owned(), def(V::B(true))),
                ("min_chn_0".to_owned(), def(V::F(0.5))),
                ("body".to_owned(), def(V::G(Box::default()))),
            ]
            .into(),
        };
        let mut m = AttrMap::new();
        m.insert("aipp".into(), AttrValue::Func(Box::new(named)));
        // `aipp-x` sorts between `aipp` and its members; the node's own
        // `aipp.input_format` is kept over the member of that name.
        m.insert("aipp-x".into(), AttrValue::Int(1));
        m.insert("aipp.input_format".into(), AttrValue::Int(1));
        m.insert("aipp_config_path".into(), AttrValue::str("./aipp.cfg"));
        let a = op_attrs(&m);
        let names: Vec<&str> = a.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "aipp-x",
                "aipp.csc_switch",
                "aipp.input_format",
                "aipp.min_chn_0",
                "aipp_config_path"
            ]
        );
        assert_eq!(a["aipp.input_format"], Attr::Int(1));
        assert_eq!(a["aipp.csc_switch"], Attr::Bool(true));
        assert_eq!(a["aipp.min_chn_0"], Attr::Float(0.5));
    }
}
