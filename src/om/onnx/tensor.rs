//! ONNX tensors, types and attributes turned into their GE IR counterparts: `TensorDef`
//! with raw little-endian bytes, `TensorDescriptor` with GE's always-present attrs, and
//! `AttrDef` for every ONNX attribute kind except graphs (the importer owns those).
//!
//! Pure functions on proto values: no graph knowledge and no IO. Untrusted sizes are
//! checked before any allocation they would drive.

use std::collections::BTreeMap;

use crate::om::{DataType, OmError, Place, Result};
use crate::proto::ge_ir::attr_def::list_value::ListValueType;
use crate::proto::ge_ir::attr_def::{ListValue, Value};
use crate::proto::ge_ir::{AttrDef, ShapeDef, TensorDef, TensorDescriptor};
use crate::proto::onnx::attribute_proto::AttributeType;
use crate::proto::onnx::tensor_shape_proto::dimension;
use crate::proto::onnx::{AttributeProto, TensorProto, TypeProto, type_proto};

/// The desc attr that keeps the names of unknown dims, one string per dim: the ONNX
/// `dim_param` (`"batch"`, `"unk__12"`, `"2*seq+1"`), `"?"` for an anonymous unknown dim
/// (negative `dim_value` or a dim with neither field) and `""` for a known dim. Written
/// only when at least one dim is unknown, so static tensors look exactly like GE's.
pub const SYMBOLIC_DIMS_ATTR: &str = "_symbolic_dims";

/// GE's `C_Format` number of a layout the importer writes (NCHW, ND), from the one table
/// of them (`om::inout::format_number`); ND for a name it does not know.
fn format_number(layout: &str) -> i64 {
    crate::om::inout::format_number(layout).map_or(2, i64::from)
}

/// A tensor shape as the importer knows it: `None` is unknown rank, `-1` an unknown dim.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Dims, `-1` where unknown; `None` when even the rank is unknown.
    pub dims: Option<Vec<i64>>,
    /// Per dim: the symbolic name, `"?"` for anonymous unknown, `""` for known; empty
    /// when every dim is known. Most shapes are, and a value type is a hash key per value
    /// imported (the importer's standard descriptors), which then compares no names.
    pub names: Vec<String>,
}

impl Shape {
    /// A fully known shape.
    pub fn known(dims: &[i64]) -> Self {
        Shape {
            dims: Some(dims.to_vec()),
            names: Vec::new(),
        }
    }

    /// `dims` with their `names` (one per dim), which are dropped when all are empty.
    pub fn named(dims: Vec<i64>, names: Vec<String>) -> Self {
        let names = if names.iter().all(String::is_empty) {
            Vec::new()
        } else {
            names
        };
        Shape {
            dims: Some(dims),
            names,
        }
    }
    /// Unknown rank.
    pub fn unranked() -> Self {
        Shape::default()
    }
    /// Rank, when known.
    pub fn rank(&self) -> Option<usize> {
        self.dims.as_ref().map(Vec::len)
    }
}

/// Element type and shape of a value, from ONNX `TypeProto` or a tensor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ValueType {
    /// `None` when ONNX did not say or said something GE cannot hold.
    pub dtype: Option<DataType>,
    pub shape: Shape,
}

impl ValueType {
    /// Reads a `TypeProto`; non-tensor types (sequences, maps, optionals) come out with
    /// an undefined dtype and unknown rank, since GE IR has no descriptor for them.
    pub fn from_type_proto(tp: Option<&TypeProto>) -> Self {
        let Some(type_proto::Value::TensorType(t)) = tp.and_then(|t| t.value.as_ref()) else {
            return ValueType::default();
        };
        let dtype = t
            .elem_type
            .and_then(DataType::from_onnx)
            .filter(|d| *d != DataType::Undefined);
        let Some(shape) = &t.shape else {
            return ValueType {
                dtype,
                shape: Shape::unranked(),
            };
        };
        let mut dims = Vec::with_capacity(shape.dim.len());
        let mut names = Vec::with_capacity(shape.dim.len());
        for d in &shape.dim {
            match &d.value {
                Some(dimension::Value::DimValue(v)) if *v >= 0 => {
                    dims.push(*v);
                    names.push(String::new());
                }
                Some(dimension::Value::DimParam(p)) if !p.is_empty() => {
                    dims.push(-1);
                    names.push(p.clone());
                }
                _ => {
                    dims.push(-1);
                    names.push("?".to_string());
                }
            }
        }
        ValueType {
            dtype,
            shape: Shape::named(dims, names),
        }
    }
}

/// A GE tensor descriptor with the attrs `GeTensorDescAsProto` always writes
/// (`origin_format`, `origin_format_for_int`, `format_for_int`, `origin_shape_initialized`,
/// `origin_shape`) plus [`SYMBOLIC_DIMS_ATTR`] when some dim is unknown.
pub fn descriptor(vt: &ValueType, layout: &str) -> TensorDescriptor {
    let dims = match &vt.shape.dims {
        Some(d) => d.clone(),
        None => vec![-2],
    };
    let mut attr = BTreeMap::new();
    attr.insert("origin_format".to_string(), attr_s(layout));
    attr.insert(
        "origin_format_for_int".to_string(),
        attr_i(format_number(layout)),
    );
    attr.insert("format_for_int".to_string(), attr_i(format_number(layout)));
    attr.insert(
        "origin_shape_initialized".to_string(),
        AttrDef {
            value: Some(Value::B(true)),
        },
    );
    attr.insert("origin_shape".to_string(), attr_ints(&dims));
    if vt.shape.names.iter().any(|n| !n.is_empty()) {
        attr.insert(
            SYMBOLIC_DIMS_ATTR.to_string(),
            attr_strings(&vt.shape.names),
        );
    }
    TensorDescriptor {
        dtype: vt.dtype.unwrap_or(DataType::Undefined).to_proto(),
        shape: Some(ShapeDef { dim: dims }),
        layout: layout.to_string(),
        attr,
        device_type: "NPU".to_string(),
        ..Default::default()
    }
}

/// Changes the layout of a descriptor made by [`descriptor`], keeping its format attrs true.
pub fn set_layout(desc: &mut TensorDescriptor, layout: &str) {
    desc.layout = layout.to_string();
    desc.attr
        .insert("origin_format".to_string(), attr_s(layout));
    desc.attr.insert(
        "origin_format_for_int".to_string(),
        attr_i(format_number(layout)),
    );
    desc.attr
        .insert("format_for_int".to_string(), attr_i(format_number(layout)));
}

pub fn attr_i(v: i64) -> AttrDef {
    AttrDef {
        value: Some(Value::I(v)),
    }
}
pub fn attr_f(v: f32) -> AttrDef {
    AttrDef {
        value: Some(Value::F(v)),
    }
}
pub fn attr_s(v: &str) -> AttrDef {
    AttrDef {
        value: Some(Value::S(v.as_bytes().to_vec())),
    }
}
pub fn attr_ints(v: &[i64]) -> AttrDef {
    list(ListValue {
        i: v.to_vec(),
        val_type: ListValueType::VtListInt as i32,
        ..Default::default()
    })
}
pub fn attr_floats(v: &[f32]) -> AttrDef {
    list(ListValue {
        f: v.to_vec(),
        val_type: ListValueType::VtListFloat as i32,
        ..Default::default()
    })
}
pub fn attr_strings<S: AsRef<str>>(v: &[S]) -> AttrDef {
    let s = v.iter().map(|s| s.as_ref().as_bytes().to_vec()).collect();
    list(ListValue {
        s,
        val_type: ListValueType::VtListString as i32,
        ..Default::default()
    })
}
fn list(l: ListValue) -> AttrDef {
    AttrDef {
        value: Some(Value::List(Box::new(l))),
    }
}

/// The kind of an ONNX attribute: its `type` field, or for IR versions before it existed,
/// the one value field that is set.
pub fn attribute_kind(a: &AttributeProto) -> AttributeType {
    if let Some(t) = a.r#type.and_then(|t| AttributeType::try_from(t).ok())
        && t != AttributeType::Undefined
    {
        return t;
    }
    if a.f.is_some() {
        AttributeType::Float
    } else if a.i.is_some() {
        AttributeType::Int
    } else if a.s.is_some() {
        AttributeType::String
    } else if a.t.is_some() {
        AttributeType::Tensor
    } else if a.g.is_some() {
        AttributeType::Graph
    } else if a.sparse_tensor.is_some() {
        AttributeType::SparseTensor
    } else if !a.floats.is_empty() {
        AttributeType::Floats
    } else if !a.ints.is_empty() {
        AttributeType::Ints
    } else if !a.strings.is_empty() {
        AttributeType::Strings
    } else if !a.tensors.is_empty() {
        AttributeType::Tensors
    } else if !a.graphs.is_empty() {
        AttributeType::Graphs
    } else {
        AttributeType::Undefined
    }
}

/// Converts one non-graph attribute. `Ok(None)` for graph kinds (the importer turns them
/// into subgraphs) and for attributes with no value at all.
pub fn convert_attribute(a: &AttributeProto, place: &dyn Fn() -> Place) -> Result<Option<AttrDef>> {
    let name = a.name.as_deref().unwrap_or("");
    let bad = |msg: &str| OmError::graph(place(), format!("attribute {name:?}: {msg}"));
    Ok(Some(match attribute_kind(a) {
        AttributeType::Float => attr_f(a.f.unwrap_or_default()),
        AttributeType::Int => attr_i(a.i.unwrap_or_default()),
        AttributeType::String => AttrDef {
            value: Some(Value::S(a.s.clone().unwrap_or_default())),
        },
        AttributeType::Tensor => {
            let t =
                a.t.as_ref()
                    .ok_or_else(|| bad("tensor attribute without a tensor"))?;
            AttrDef {
                value: Some(Value::T(Box::new(tensor_def(t, place)?))),
            }
        }
        AttributeType::Floats => attr_floats(&a.floats),
        AttributeType::Ints => attr_ints(&a.ints),
        AttributeType::Strings => list(ListValue {
            s: a.strings.clone(),
            val_type: ListValueType::VtListString as i32,
            ..Default::default()
        }),
        AttributeType::Tensors => {
            let t = a
                .tensors
                .iter()
                .map(|t| tensor_def(t, place))
                .collect::<Result<Vec<_>>>()?;
            list(ListValue {
                t,
                val_type: ListValueType::VtListTensor as i32,
                ..Default::default()
            })
        }
        AttributeType::SparseTensor | AttributeType::SparseTensors => {
            return Err(OmError::unsupported(
                place(),
                format!("sparse tensor attribute {name:?}"),
            ));
        }
        AttributeType::TypeProto | AttributeType::TypeProtos => {
            // GE IR has no type value; keep the encoded TypeProto(s) as bytes.
            use prost::Message;
            let mut bt: Vec<Vec<u8>> = a.tp.iter().map(|t| t.encode_to_vec()).collect();
            bt.extend(a.type_protos.iter().map(|t| t.encode_to_vec()));
            list(ListValue {
                bt,
                val_type: ListValueType::VtListBytes as i32,
                ..Default::default()
            })
        }
        AttributeType::Graph | AttributeType::Graphs | AttributeType::Undefined => return Ok(None),
    }))
}

/// Converts an ONNX tensor into a GE `TensorDef` whose data is raw little-endian bytes,
/// whatever field ONNX held it in. Strings use GE's `StringHead` layout: one
/// `{int64 offset, int64 len}` pair per element, then the bytes, each NUL-terminated.
pub fn tensor_def(t: &TensorProto, place: &dyn Fn() -> Place) -> Result<TensorDef> {
    let (vt, data) = tensor_value(t, place)?;
    Ok(TensorDef {
        desc: Some(descriptor(&vt, "ND")),
        data,
    })
}

/// [`tensor_def`]'s value type and bytes, without the descriptor: the standard one of the
/// type ([`descriptor`], layout ND), which the importer holds made already.
pub fn tensor_value(
    t: &TensorProto,
    place: &dyn Fn() -> Place,
) -> Result<(ValueType, prost::bytes::Bytes)> {
    let tname = t.name.as_deref().unwrap_or("");
    let bad = |msg: String| OmError::graph(place(), format!("tensor {tname:?}: {msg}"));
    if t.data_location == Some(1) || !t.external_data.is_empty() {
        return Err(OmError::unsupported(
            place(),
            format!(
                "tensor {tname:?} keeps its data in an external file; import takes one self-contained model"
            ),
        ));
    }
    if t.segment.is_some() {
        return Err(OmError::unsupported(
            place(),
            format!("tensor {tname:?} is a segment"),
        ));
    }
    let onnx_type = t.data_type.unwrap_or(0);
    let dtype = DataType::from_onnx(onnx_type)
        .filter(|d| *d != DataType::Undefined)
        .ok_or_else(|| bad(format!("data_type {onnx_type} has no GE equivalent")))?;
    let mut count: u64 = 1;
    for &d in &t.dims {
        let d = u64::try_from(d).map_err(|_| bad(format!("negative dim {d} in dims")))?;
        count = count
            .checked_mul(d)
            .ok_or_else(|| bad("element count overflows".into()))?;
    }
    let data = if dtype == DataType::String {
        if t.string_data.len() as u64 != count {
            return Err(bad(format!(
                "string_data has {} elements, dims say {count}",
                t.string_data.len()
            )));
        }
        string_bytes(&t.string_data).into()
    } else {
        let size = dtype
            .byte_size(count)
            .ok_or_else(|| bad(format!("{dtype} has no fixed element size")))?;
        let data = match &t.raw_data {
            Some(raw) => raw.clone(),
            None => typed_bytes(t, dtype, count, &bad)?.into(),
        };
        if data.len() as u64 != size {
            return Err(bad(format!(
                "holds {} bytes, {count} x {dtype} needs {size}",
                data.len()
            )));
        }
        data
    };
    let vt = ValueType {
        dtype: Some(dtype),
        shape: Shape::known(&t.dims),
    };
    Ok((vt, data))
}

/// Bytes from ONNX's typed repeated fields, with the field chosen by ONNX's rules.
fn typed_bytes(
    t: &TensorProto,
    dtype: DataType,
    count: u64,
    bad: &dyn Fn(String) -> OmError,
) -> Result<Vec<u8>> {
    // Elements per repeated-field entry: 2 floats per complex value, half an entry per
    // 4-bit element (two share one int32).
    let n = |len: usize, want: u64, field: &str| -> Result<()> {
        if len as u64 != want {
            return Err(bad(format!("{field} has {len} values, dims need {want}")));
        }
        Ok(())
    };
    Ok(match dtype {
        DataType::Float32 | DataType::Complex64 => {
            let per = if dtype == DataType::Complex64 { 2 } else { 1 };
            n(t.float_data.len(), count.saturating_mul(per), "float_data")?;
            t.float_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        DataType::Float64 | DataType::Complex128 => {
            let per = if dtype == DataType::Complex128 { 2 } else { 1 };
            n(
                t.double_data.len(),
                count.saturating_mul(per),
                "double_data",
            )?;
            t.double_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        DataType::Int64 => {
            n(t.int64_data.len(), count, "int64_data")?;
            t.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        DataType::Uint64 => {
            n(t.uint64_data.len(), count, "uint64_data")?;
            t.uint64_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        DataType::Uint32 => {
            n(t.uint64_data.len(), count, "uint64_data")?;
            t.uint64_data
                .iter()
                .flat_map(|v| (*v as u32).to_le_bytes())
                .collect()
        }
        DataType::Int32 => {
            n(t.int32_data.len(), count, "int32_data")?;
            t.int32_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        DataType::Float16 | DataType::Bfloat16 | DataType::Int16 | DataType::Uint16 => {
            n(t.int32_data.len(), count, "int32_data")?;
            t.int32_data
                .iter()
                .flat_map(|v| (*v as u16).to_le_bytes())
                .collect()
        }
        DataType::Int8
        | DataType::Uint8
        | DataType::Bool
        | DataType::Float8E5m2
        | DataType::Float8E4m3fn
        | DataType::Float8E8m0 => {
            n(t.int32_data.len(), count, "int32_data")?;
            t.int32_data.iter().map(|v| *v as u8).collect()
        }
        DataType::Int4 | DataType::Float4E2m1 => {
            // Two 4-bit elements per int32_data entry, already packed low nibble first.
            n(t.int32_data.len(), count.div_ceil(2), "int32_data")?;
            t.int32_data.iter().map(|v| *v as u8).collect()
        }
        other => return Err(bad(format!("{other} has no ONNX typed-data field"))),
    })
}

fn string_bytes(items: &[Vec<u8>]) -> Vec<u8> {
    let head = items.len() * 16;
    let mut heads = Vec::with_capacity(head);
    let mut body = Vec::new();
    for s in items {
        heads.extend_from_slice(&((head + body.len()) as i64).to_le_bytes());
        heads.extend_from_slice(&(s.len() as i64).to_le_bytes());
        body.extend_from_slice(s);
        body.push(0);
    }
    heads.extend_from_slice(&body);
    heads
}
