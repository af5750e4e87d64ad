//! The MODEL_INOUT_INFO partition: a TLV list describing the model's inputs and outputs
//! (GE `inc/framework/common/ge_model_inout_types.h`, reader
//! `base/common/helper/model_parser_base.cc`, writer `ModelIntroduction`).
//!
//! Owns that byte layout and the rule that builds it from a root graph. It must not
//! change the graph it reads, and it keeps TLVs it does not model as opaque bytes.
//!
//! Layout: repeated `{type: i32, length: u32, value[length]}`. For types 0 (inputs) and 1
//! (outputs) the value is `desc_num: u32` then per desc a 32-byte
//! `ModelTensorDescBaseInfo {size: u64, format: i32, dt: i32, name_len, dims_len,
//! dimsV2_len, shape_range_len: u32}` followed by the name, dims (i64), dimsV2 (i64) and
//! shape range pairs (i64, i64). `dt` is in GE's C++ `ge::DataType` numbering.

use super::dtype::DataType;
use super::error::{OmError, Place, Result};
use crate::proto::ge_ir::attr_def::Value;
use crate::proto::ge_ir::{GraphDef, ModelDef, OpDef, TensorDescriptor};

/// `ModelDescType::MODEL_INPUT_DESC`.
pub const MODEL_INPUT_DESC: i32 = 0;
/// `ModelDescType::MODEL_OUTPUT_DESC`.
pub const MODEL_OUTPUT_DESC: i32 = 1;
const BASE_INFO_SIZE: usize = 32;

/// One input or output description.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct TensorDescInfo {
    pub name: String,
    /// Byte size; 0 when the shape is dynamic (GE writes 0 for unknown sizes).
    pub size: u64,
    /// GE C++ `Format` value (`C_Format` numbering, sub-format bits included).
    pub format: i32,
    /// GE C++ `ge::DataType` value as stored; see [`TensorDescInfo::data_type`].
    pub dtype: i32,
    pub dims: Vec<i64>,
    pub dims_v2: Vec<i64>,
    pub shape_range: Vec<(i64, i64)>,
}

impl TensorDescInfo {
    /// The element type, decoded with the C++ numbering.
    pub fn data_type(&self) -> Option<DataType> {
        DataType::from_ge(i64::from(self.dtype))
    }
}

/// The decoded MODEL_INOUT_INFO partition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InOutInfo {
    pub inputs: Vec<TensorDescInfo>,
    pub outputs: Vec<TensorDescInfo>,
    /// TLVs of other types (dynamic batch, HW, dims, output shapes, shape order), raw.
    pub other: Vec<(i32, Vec<u8>)>,
    /// TLV types in file order, so a parsed partition is rewritten byte for byte. `None`
    /// for a freshly built one, which is written as inputs, outputs, then `other`.
    order: Option<Vec<i32>>,
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let have = self.b.len() - self.pos;
        if n > have {
            return Err(OmError::Truncated {
                place: Place::new(format!("MODEL_INOUT_INFO offset {}", self.base + self.pos)),
                what: what.into(),
                need: n as u64,
                have: have as u64,
            });
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        let s = self.take(4, what)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn i64s(&mut self, len: u32, unit: usize, what: &str) -> Result<Vec<i64>> {
        let len = len as usize;
        if !len.is_multiple_of(unit) {
            return Err(OmError::container(
                Place::new(format!("MODEL_INOUT_INFO offset {}", self.base + self.pos)),
                format!("{what} length {len} is not a multiple of {unit}"),
            ));
        }
        let s = self.take(len, what)?;
        Ok(s.chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect())
    }
}

fn parse_descs(value: &[u8], base: usize) -> Result<Vec<TensorDescInfo>> {
    let mut c = Cursor {
        b: value,
        pos: 0,
        base,
    };
    let num = c.u32("desc_num")?;
    let mut out = Vec::new();
    for i in 0..num {
        let what = format!("tensor desc {i}");
        let h = c.take(BASE_INFO_SIZE, &what)?;
        let u = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let size = u64::from_le_bytes(h[0..8].try_into().unwrap_or([0; 8]));
        let (format, dtype) = (u(8) as i32, u(12) as i32);
        let (name_len, dims_len, v2_len, range_len) = (u(16), u(20), u(24), u(28));
        let name_bytes = c.take(name_len as usize, &format!("{what} name"))?;
        let name = String::from_utf8(name_bytes.to_vec()).map_err(|_| {
            OmError::container(
                Place::new(format!("MODEL_INOUT_INFO offset {}", base + c.pos)),
                format!("{what} name is not UTF-8"),
            )
        })?;
        let dims = c.i64s(dims_len, 8, &format!("{what} dims"))?;
        let dims_v2 = c.i64s(v2_len, 8, &format!("{what} dimsV2"))?;
        let r = c.i64s(range_len, 16, &format!("{what} shape_range"))?;
        let shape_range = r.chunks_exact(2).map(|p| (p[0], p[1])).collect();
        out.push(TensorDescInfo {
            name,
            size,
            format,
            dtype,
            dims,
            dims_v2,
            shape_range,
        });
    }
    if c.pos != value.len() {
        return Err(OmError::container(
            Place::new(format!("MODEL_INOUT_INFO offset {}", base + c.pos)),
            format!(
                "{} bytes left over after {num} tensor descs",
                value.len() - c.pos
            ),
        ));
    }
    Ok(out)
}

fn descs_value(descs: &[TensorDescInfo]) -> Result<Vec<u8>> {
    let too_big = || OmError::container(Place::new("MODEL_INOUT_INFO"), "field too large for u32");
    let u32_of = |n: usize| u32::try_from(n).map_err(|_| too_big());
    let mut v = Vec::new();
    v.extend_from_slice(&u32_of(descs.len())?.to_le_bytes());
    for d in descs {
        v.extend_from_slice(&d.size.to_le_bytes());
        v.extend_from_slice(&d.format.to_le_bytes());
        v.extend_from_slice(&d.dtype.to_le_bytes());
        v.extend_from_slice(&u32_of(d.name.len())?.to_le_bytes());
        v.extend_from_slice(&u32_of(d.dims.len() * 8)?.to_le_bytes());
        v.extend_from_slice(&u32_of(d.dims_v2.len() * 8)?.to_le_bytes());
        v.extend_from_slice(&u32_of(d.shape_range.len() * 16)?.to_le_bytes());
        v.extend_from_slice(d.name.as_bytes());
        for x in d.dims.iter().chain(&d.dims_v2) {
            v.extend_from_slice(&x.to_le_bytes());
        }
        for (a, b) in &d.shape_range {
            v.extend_from_slice(&a.to_le_bytes());
            v.extend_from_slice(&b.to_le_bytes());
        }
    }
    Ok(v)
}

fn write_tlv(out: &mut Vec<u8>, ty: i32, value: &[u8]) -> Result<()> {
    let len = u32::try_from(value.len())
        .map_err(|_| OmError::container(Place::new("MODEL_INOUT_INFO"), "TLV value too large"))?;
    out.extend_from_slice(&ty.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(value);
    Ok(())
}

impl InOutInfo {
    /// A fresh description (written in GE's order: inputs, outputs, then `other`).
    pub fn new(inputs: Vec<TensorDescInfo>, outputs: Vec<TensorDescInfo>) -> Self {
        InOutInfo {
            inputs,
            outputs,
            other: Vec::new(),
            order: None,
        }
    }

    /// Parses the partition bytes. Errors name the byte offset inside the partition.
    pub fn parse(bytes: &[u8]) -> Result<InOutInfo> {
        let mut c = Cursor {
            b: bytes,
            pos: 0,
            base: 0,
        };
        let mut info = InOutInfo::default();
        let mut order = Vec::new();
        while c.pos < bytes.len() {
            let at = c.pos;
            let ty = c.u32("TLV type")? as i32;
            let len = c.u32("TLV length")?;
            let value_at = c.pos;
            let value = c.take(len as usize, &format!("TLV type {ty} value"))?;
            let dup = || {
                OmError::container(
                    Place::new(format!("MODEL_INOUT_INFO offset {at}")),
                    format!("a second TLV of type {ty}"),
                )
            };
            match ty {
                MODEL_INPUT_DESC => {
                    if order.contains(&ty) {
                        return Err(dup());
                    }
                    info.inputs = parse_descs(value, value_at)?;
                }
                MODEL_OUTPUT_DESC => {
                    if order.contains(&ty) {
                        return Err(dup());
                    }
                    info.outputs = parse_descs(value, value_at)?;
                }
                _ => info.other.push((ty, value.to_vec())),
            }
            order.push(ty);
        }
        info.order = Some(order);
        Ok(info)
    }

    /// The partition bytes: byte for byte what `parse` read, for an unchanged value.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut other = self.other.iter();
        let (mut wrote_in, mut wrote_out) = (false, false);
        let fresh = self.order.is_none();
        for &ty in self.order.iter().flatten() {
            match ty {
                MODEL_INPUT_DESC => {
                    write_descs_tlv(&mut out, MODEL_INPUT_DESC, &self.inputs)?;
                    wrote_in = true;
                }
                MODEL_OUTPUT_DESC => {
                    write_descs_tlv(&mut out, MODEL_OUTPUT_DESC, &self.outputs)?;
                    wrote_out = true;
                }
                _ => {
                    if let Some((t, v)) = other.next() {
                        write_tlv(&mut out, *t, v)?;
                    }
                }
            }
        }
        if !wrote_in && (fresh || !self.inputs.is_empty()) {
            write_descs_tlv(&mut out, MODEL_INPUT_DESC, &self.inputs)?;
        }
        if !wrote_out && (fresh || !self.outputs.is_empty()) {
            write_descs_tlv(&mut out, MODEL_OUTPUT_DESC, &self.outputs)?;
        }
        for (t, v) in other {
            write_tlv(&mut out, *t, v)?;
        }
        Ok(out)
    }

    /// Builds the description GE's `ModelIntroduction` writes for a root graph: one input
    /// per `Data`-like op ordered by its `index` attr, described by its input desc 0 (name =
    /// op name; size = the desc's `size`, or for a dynamic shape the element count times
    /// the type size with unknown counted as 0); one output per input of each `NetOutput`,
    /// named `output_<i>_<src>_<srcidx>` (GE's naming when no out-node names are recorded),
    /// size = shape x type, 0 when unknown, and `dimsV2 = dims`. Shape ranges come from the
    /// desc attr `shape_range` (list list int, pairs).
    pub fn from_model_def(model: &ModelDef) -> InOutInfo {
        let Some(root) = model.graph.first() else {
            return InOutInfo::default();
        };
        InOutInfo::from_root_ops(root.op.iter().enumerate(), graph_is_dynamic(root))
    }

    /// [`InOutInfo::from_model_def`] from the root graph's ops that matter, each with its
    /// position in the graph: the [data ops](InOutInfo::is_inout_op) (any others are
    /// passed over); `dynamic` is [`graph_is_dynamic`] of the whole graph.
    pub fn from_root_ops<'a>(
        ops: impl Iterator<Item = (usize, &'a OpDef)> + Clone,
        dynamic: bool,
    ) -> InOutInfo {
        let mut data: Vec<(i64, usize, &OpDef)> = ops
            .clone()
            .filter(|(_, op)| DATA_TYPES.contains(&op.r#type.as_str()))
            .map(|(i, op)| (attr_int(op, "index").unwrap_or(i as i64), i, op))
            .collect();
        data.sort_by_key(|&(idx, pos, _)| (idx, pos));
        let inputs = data
            .into_iter()
            .map(|(_, _, op)| {
                let td = op.input_desc.first().or(op.output_desc.first());
                let mut d = desc_info(op.name.clone(), td);
                d.size = match td {
                    Some(td) if !dynamic => u64::try_from(td.size).unwrap_or(0),
                    _ => tensor_bytes(td),
                };
                d
            })
            .collect();
        let mut outputs = Vec::new();
        for (_, op) in ops.filter(|(_, op)| op.r#type == OUTPUT_TYPE) {
            let sources: Vec<&str> = op
                .input
                .iter()
                .filter(|s| !s.ends_with(":-1"))
                .map(|s| s.as_str())
                .collect();
            for (i, td) in op.input_desc.iter().enumerate() {
                let (src, idx) = match (op.src_name.get(i), op.src_index.get(i)) {
                    (Some(n), Some(x)) => (n.clone(), *x),
                    _ => match sources.get(i).and_then(|s| s.rsplit_once(':')) {
                        Some((n, x)) => (n.to_string(), x.parse().unwrap_or(0)),
                        None => (String::new(), 0),
                    },
                };
                let mut d = desc_info(format!("output_{i}_{src}_{idx}"), Some(td));
                d.size = tensor_bytes(Some(td));
                outputs.push(d);
            }
        }
        InOutInfo::new(inputs, outputs)
    }

    /// Whether an op of type `op_type` is one [`InOutInfo::from_root_ops`] reads.
    pub fn is_inout_op(op_type: &str) -> bool {
        DATA_TYPES.contains(&op_type) || op_type == OUTPUT_TYPE
    }
}

/// The root graph's ops whose descriptors give MODEL_INOUT_INFO its inputs.
const DATA_TYPES: [&str; 3] = ["Data", "RefData", "AippData"];
/// The op whose inputs give it its outputs.
const OUTPUT_TYPE: &str = "NetOutput";

fn write_descs_tlv(out: &mut Vec<u8>, ty: i32, descs: &[TensorDescInfo]) -> Result<()> {
    write_tlv(out, ty, &descs_value(descs)?)
}

/// True when a root-graph tensor has an unknown dim (-1) or unknown rank (-2).
pub fn graph_is_dynamic(g: &GraphDef) -> bool {
    g.op.iter()
        .flat_map(|op| op.input_desc.iter().chain(&op.output_desc))
        .any(|td| {
            td.shape
                .as_ref()
                .is_some_and(|s| s.dim.iter().any(|&d| d < 0))
        })
}

fn attr_int(op: &OpDef, key: &str) -> Option<i64> {
    match op.attr.get(key)?.value.as_ref()? {
        Value::I(i) => Some(*i),
        _ => None,
    }
}

/// GE's C++ data type of a tensor desc (the desc stores the proto numbering).
fn ge_dtype(td: &TensorDescriptor) -> i32 {
    DataType::from_proto(td.dtype).map_or(28, |d| d.to_ge() as i32)
}

/// GE's C++ format number of a desc: `format_for_int` when present, else the layout name.
fn ge_format(td: &TensorDescriptor) -> i32 {
    if let Some(Value::I(f)) = td.attr.get("format_for_int").and_then(|a| a.value.as_ref()) {
        return *f as i32;
    }
    format_number(&td.layout).unwrap_or(2)
}

/// `C_Format` numbers of the common primary formats (metadef `c_types.h`).
pub fn format_number(name: &str) -> Option<i32> {
    const NAMES: &[(&str, i32)] = &[
        ("NCHW", 0),
        ("NHWC", 1),
        ("ND", 2),
        ("NC1HWC0", 3),
        ("FRACTAL_Z", 4),
        ("NC1C0HWPAD", 5),
        ("NHWC1C0", 6),
        ("FSR_NCHW", 7),
        ("FRACTAL_DECONV", 8),
        ("C1HWNC0", 9),
        ("NC1HWC0_C04", 12),
        ("FRACTAL_Z_C04", 13),
        ("CHWN", 14),
        ("HWCN", 16),
        ("NC1KHKWHWC0", 17),
        ("BN_WEIGHT", 18),
        ("FILTER_HWCK", 19),
        ("C1HWNCoC0", 25),
        ("MD", 26),
        ("NDHWC", 27),
        ("FRACTAL_ZZ", 28),
        ("FRACTAL_NZ", 29),
        ("NCDHW", 30),
        ("DHWCN", 31),
        ("NDC1HWC0", 32),
        ("FRACTAL_Z_3D", 33),
        ("CN", 34),
        ("NC", 35),
        ("DHWNC", 36),
        ("FRACTAL_Z_3D_TRANSPOSE", 37),
        ("FRACTAL_ZN_LSTM", 38),
        ("FRACTAL_Z_G", 39),
        ("RESERVED", 40),
        ("ALL", 41),
        ("NULL", 42),
        ("ND_RNN_BIAS", 43),
        ("FRACTAL_ZN_RNN", 44),
        ("NYUV", 45),
        ("NYUV_A", 46),
        ("NCL", 47),
    ];
    NAMES.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
}

fn desc_info(name: String, td: Option<&TensorDescriptor>) -> TensorDescInfo {
    let Some(td) = td else {
        return TensorDescInfo {
            name,
            dtype: 28,
            format: 2,
            ..TensorDescInfo::default()
        };
    };
    let dims = td.shape.as_ref().map(|s| s.dim.clone()).unwrap_or_default();
    let shape_range = match td.attr.get("shape_range").and_then(|a| a.value.as_ref()) {
        Some(Value::ListListInt(l)) => l
            .list_list_i
            .iter()
            .filter(|p| p.list_i.len() == 2)
            .map(|p| (p.list_i[0], p.list_i[1]))
            .collect(),
        _ => Vec::new(),
    };
    TensorDescInfo {
        name,
        size: 0,
        format: ge_format(td),
        dtype: ge_dtype(td),
        dims_v2: dims.clone(),
        dims,
        shape_range,
    }
}

/// Element count x type size; unknown dims or sizes give 0, as GE writes for them.
fn tensor_bytes(td: Option<&TensorDescriptor>) -> u64 {
    let Some(td) = td else { return 0 };
    let dims = td.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or(&[]);
    let mut count: u64 = 1;
    for &d in dims {
        let Ok(d) = u64::try_from(d) else { return 0 };
        let Some(c) = count.checked_mul(d) else {
            return 0;
        };
        count = c;
    }
    DataType::from_proto(td.dtype)
        .and_then(|dt| dt.byte_size(count))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::testdata;
    use proptest::prelude::*;

    #[test]
    fn built_from_the_fixture_model() {
        let info = InOutInfo::from_model_def(&testdata::model_def("m"));
        assert_eq!(info.inputs.len(), 2);
        assert_eq!(info.inputs[0].name, "x");
        assert_eq!(info.inputs[1].name, "y");
        assert_eq!(info.inputs[0].dims, [2, 4]);
        assert_eq!(info.inputs[0].dims_v2, [2, 4]);
        assert_eq!(info.inputs[0].size, 32);
        assert_eq!(info.inputs[0].data_type(), Some(DataType::Float32));
        assert_eq!(info.inputs[0].dtype, 0);
        assert_eq!(info.inputs[0].format, 2);
        assert_eq!(info.outputs.len(), 1);
        assert_eq!(info.outputs[0].name, "output_0_add_0");
        assert_eq!(info.outputs[0].size, 32);
    }

    #[test]
    fn round_trips_byte_exact() {
        let mut info = InOutInfo::from_model_def(&testdata::model_def("m"));
        info.inputs[0].shape_range = vec![(1, 4), (4, 4)];
        info.other
            .push((2, vec![1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0]));
        let b = info.to_bytes().unwrap();
        let back = InOutInfo::parse(&b).unwrap();
        assert_eq!(back.inputs, info.inputs);
        assert_eq!(back.outputs, info.outputs);
        assert_eq!(back.other, info.other);
        assert_eq!(back.to_bytes().unwrap(), b);
        // First TLV: type 0, then desc_num 2.
        assert_eq!(&b[0..4], &0i32.to_le_bytes());
        assert_eq!(&b[8..12], &2u32.to_le_bytes());
        // A file with outputs first is rewritten in its own order.
        let tlvs_in = &b[..8 + u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize];
        let rest = &b[tlvs_in.len()..];
        let swapped = [rest, tlvs_in].concat();
        let p = InOutInfo::parse(&swapped).unwrap();
        assert_eq!(p.to_bytes().unwrap(), swapped);
    }

    #[test]
    fn empty_partition_stays_empty() {
        let info = InOutInfo::parse(&[]).unwrap();
        assert!(info.inputs.is_empty() && info.other.is_empty());
        assert_eq!(info.to_bytes().unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn errors_name_the_offset() {
        let b = InOutInfo::from_model_def(&testdata::model_def("m"))
            .to_bytes()
            .unwrap();
        let e = InOutInfo::parse(&b[..20]).unwrap_err().to_string();
        assert!(e.starts_with("MODEL_INOUT_INFO offset 8: truncated"), "{e}");
        // Cutting at the TLV boundary leaves a valid partition with inputs only.
        let boundary = 8 + u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
        for cut in (1..b.len()).filter(|&c| c != boundary) {
            assert!(InOutInfo::parse(&b[..cut]).is_err(), "cut {cut}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(i) = InOutInfo::parse(&bytes) {
                prop_assert_eq!(i.to_bytes().unwrap(), bytes);
            }
        }
    }
}
