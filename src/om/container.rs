//! The OM offline-model container: the 256-byte `ModelFileHeader`, the per-model partition
//! tables and the partition bytes, read and written byte for byte.
//!
//! Owns the binary layout only (GE `inc/framework/common/framework_types_internal.h`,
//! `base/common/helper/om_file_helper.cc`, `model_parser_base.cc`). It must not interpret
//! graphs beyond decoding a partition's protobuf on request, and it does no IO: `parse`
//! takes bytes and `to_bytes` returns them. Parsing never panics and never allocates more
//! than the input holds: every size read from the file is checked against the bytes left
//! before it is used.

use prost::Message;

use super::error::{OmError, Place, Result, check_nesting};
use crate::proto::domi::ModelTaskDef;
use crate::proto::flow::{FlowModelDef, SubmodelDef};
use crate::proto::ge_ir::ModelDef;

/// `MODEL_FILE_MAGIC_NUM`: the bytes "IMOD" read as a little-endian u32.
pub const MODEL_FILE_MAGIC_NUM: u32 = 0x444F_4D49;
/// `MODEL_FILE_HEAD_LEN`, also `sizeof(ModelFileHeader)`.
pub const MODEL_FILE_HEAD_LEN: usize = 256;
/// `MODEL_VERSION` ("model version 2.0"); dynamic multi-model files need at least this.
pub const MODEL_VERSION: u32 = 0x2000_0000;
/// `OM_PROTO_VERSION`, the `om_ir_version` GE writes.
pub const OM_PROTO_VERSION: u32 = 2;
/// Most partitions a flow model table may list (`CheckPartitionTableNum`).
pub const MAX_FLOW_PARTITIONS: u32 = 4096;
/// Size of a `ModelPartitionMemInfo` entry (u32 type, 4 pad, u64 offset, u64 size).
const STANDARD_ENTRY: u64 = 24;
/// Size of a legacy `TinyModelPartitionMemInfo` entry (u32 type, offset, size).
const LEGACY_ENTRY: u64 = 12;

/// `ModelHeaderType`, the header's `modeltype` byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelType {
    IrModel,
    StandardModel,
    OmTinyModel,
    FlowModel,
    LiteModel,
    BundleModel,
    Reserved,
    Unknown(u8),
}

impl ModelType {
    /// From the header byte.
    pub fn from_u8(v: u8) -> Self {
        match v {
            0 => ModelType::IrModel,
            1 => ModelType::StandardModel,
            2 => ModelType::OmTinyModel,
            3 => ModelType::FlowModel,
            4 => ModelType::LiteModel,
            5 => ModelType::BundleModel,
            6 => ModelType::Reserved,
            n => ModelType::Unknown(n),
        }
    }
    /// The header byte.
    pub fn to_u8(self) -> u8 {
        match self {
            ModelType::IrModel => 0,
            ModelType::StandardModel => 1,
            ModelType::OmTinyModel => 2,
            ModelType::FlowModel => 3,
            ModelType::LiteModel => 4,
            ModelType::BundleModel => 5,
            ModelType::Reserved => 6,
            ModelType::Unknown(n) => n,
        }
    }
    /// GE's enumerator name (`MODEL_TYPE_FLOW_MODEL`), or `MODEL_TYPE_<n>` when unknown.
    pub fn name(self) -> String {
        match self {
            ModelType::IrModel => "MODEL_TYPE_IR_MODEL".into(),
            ModelType::StandardModel => "MODEL_TYPE_STANDARD_MODEL".into(),
            ModelType::OmTinyModel => "MODEL_TYPE_OM_TINY_MODEL".into(),
            ModelType::FlowModel => "MODEL_TYPE_FLOW_MODEL".into(),
            ModelType::LiteModel => "MODEL_TYPE_LITE_MODEL".into(),
            ModelType::BundleModel => "MODEL_TYPE_BUNDLE_MODEL".into(),
            ModelType::Reserved => "MODEL_TYPE_RESERVED".into(),
            ModelType::Unknown(n) => format!("MODEL_TYPE_{n}"),
        }
    }
}

macro_rules! partition_types {
    ($( $v:ident = $n:literal, $name:literal; )*) => {
        /// `ModelPartitionType`: what a partition holds. Unknown values are carried through.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum PartitionType { $( $v, )* Unknown(u32) }

        impl PartitionType {
            /// From the stored u32.
            pub fn from_u32(v: u32) -> Self {
                match v { $( $n => PartitionType::$v, )* n => PartitionType::Unknown(n) }
            }
            /// The stored u32.
            pub fn to_u32(self) -> u32 {
                match self { $( PartitionType::$v => $n, )* PartitionType::Unknown(n) => n }
            }
            /// GE's enumerator name (`MODEL_DEF`), or `UNKNOWN_<n>`.
            pub fn name(self) -> String {
                match self { $( PartitionType::$v => $name.to_string(), )* PartitionType::Unknown(n) => format!("UNKNOWN_{n}") }
            }
        }
    };
}

partition_types! {
    ModelDef = 0, "MODEL_DEF";
    WeightsData = 1, "WEIGHTS_DATA";
    TaskInfo = 2, "TASK_INFO";
    TbeKernels = 3, "TBE_KERNELS";
    CustAicpuKernels = 4, "CUST_AICPU_KERNELS";
    SoBins = 5, "SO_BINS";
    FlowModel = 6, "FLOW_MODEL";
    FlowSubmodel = 7, "FLOW_SUBMODEL";
    ModelInoutInfo = 8, "MODEL_INOUT_INFO";
    StaticTaskDesc = 9, "STATIC_TASK_DESC";
    DynamicTaskDesc = 10, "DYNAMIC_TASK_DESC";
    TaskParam = 11, "TASK_PARAM";
    TilingData = 12, "TILING_DATA";
    PreModelDesc = 20, "PRE_MODEL_DESC";
    PreModelSqe = 21, "PRE_MODEL_SQE";
    PreKernelArgs = 22, "PRE_KERNEL_ARGS";
    PreModelDescExtend = 23, "PRE_MODEL_DESC_EXTEND";
    BundleModelInfo = 24, "BUNDLE_MODEL_INFO";
    BundleModelVarInfo = 25, "BUNDLE_MODEL_VAR_INFO";
    CustomOps = 26, "CUSTOM_OPS";
}

/// Every field of GE's 256-byte `ModelFileHeader` (current server layout), as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OmHeader {
    pub magic: u32,
    pub headsize: u32,
    pub version: u32,
    /// Signature bytes; all zero in an unsigned model.
    pub checksum: [u8; 64],
    /// Legacy length of everything after the header (u32); used when `model_length` is 0.
    pub length: u32,
    pub is_encrypt: u8,
    /// `ModelCheckType`: 0 = CHECK, 1 = UNCHECK.
    pub is_checksum: u8,
    /// `ModelHeaderType`; see [`OmHeader::model_type`].
    pub modeltype: u8,
    /// 0 offline, 1 online.
    pub genmode: u8,
    pub name: [u8; 32],
    pub ops: u32,
    pub userdefineinfo: [u8; 32],
    pub om_ir_version: u32,
    pub model_num: u32,
    pub platform_version: [u8; 20],
    pub platform_type: u8,
    pub padd: [u8; 3],
    /// Length of everything after the header (0 in old files, see `length`).
    pub model_length: u64,
    pub need_check_os_cpu_info: u8,
    /// 1 for a dynamic (unknown-shape, runtime 2) model.
    pub is_unknow_model: u8,
    pub reserved: [u8; 62],
}

impl Default for OmHeader {
    /// The header GE writes for a fresh single static model, before sizes are known.
    fn default() -> Self {
        OmHeader {
            magic: MODEL_FILE_MAGIC_NUM,
            headsize: MODEL_FILE_HEAD_LEN as u32,
            version: MODEL_VERSION,
            checksum: [0; 64],
            length: 0,
            is_encrypt: 0,
            is_checksum: 0,
            modeltype: 0,
            genmode: 0,
            name: [0; 32],
            ops: 0,
            userdefineinfo: [0; 32],
            om_ir_version: OM_PROTO_VERSION,
            model_num: 1,
            platform_version: [0; 20],
            platform_type: 0,
            padd: [0; 3],
            model_length: 0,
            need_check_os_cpu_info: 0,
            is_unknow_model: 0,
            reserved: [0; 62],
        }
    }
}

/// A NUL-terminated string in a fixed field, lossily decoded.
fn c_string(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// Copies `s` into a fixed field, keeping at least one NUL at the end as GE does
/// (`model_helper.cc` copies at most `MODEL_NAME_LENGTH - 1` bytes).
fn set_c_string(field: &mut [u8], s: &str) {
    field.fill(0);
    let n = s.len().min(field.len().saturating_sub(1));
    field[..n].copy_from_slice(&s.as_bytes()[..n]);
}

impl OmHeader {
    /// The model name (up to the first NUL).
    pub fn name(&self) -> String {
        c_string(&self.name)
    }
    /// Sets the name, truncated to 31 bytes.
    pub fn set_name(&mut self, name: &str) {
        set_c_string(&mut self.name, name);
    }
    /// The platform version string (up to the first NUL).
    pub fn platform_version(&self) -> String {
        c_string(&self.platform_version)
    }
    /// Sets the platform version, truncated to 19 bytes.
    pub fn set_platform_version(&mut self, v: &str) {
        set_c_string(&mut self.platform_version, v);
    }
    /// The `modeltype` byte as an enum.
    pub fn model_type(&self) -> ModelType {
        ModelType::from_u8(self.modeltype)
    }
    /// GE's `ModelParserBase::IsDynamicModel`: a version-2 file with several models or the
    /// unknown-shape flag. Only such files have more than one table-and-partitions group.
    pub fn is_dynamic(&self) -> bool {
        self.version >= MODEL_VERSION && (self.model_num > 1 || self.is_unknow_model == 1)
    }
    /// The length the reader checks against the file: `model_length`, or `length` when
    /// `model_length` is 0 (old files).
    pub fn model_len(&self) -> u64 {
        if self.model_length == 0 {
            u64::from(self.length)
        } else {
            self.model_length
        }
    }
    /// How many models follow the header (`model_manager.cc`: `is_dynamic ? model_num : 1`).
    pub fn models_to_read(&self) -> u32 {
        if self.is_dynamic() { self.model_num } else { 1 }
    }
    /// The table format a reader uses for this header (`OmFileLoadHelper`): the 24-byte
    /// entries for flow models or when `model_length` is set, else the legacy 12-byte ones.
    pub fn table_format(&self) -> TableFormat {
        if self.model_type() == ModelType::FlowModel || self.model_length != 0 {
            TableFormat::Standard
        } else {
            TableFormat::Legacy
        }
    }

    /// Parses the first 256 bytes. Checks nothing but the length; see [`OmFile::parse`].
    pub fn parse(bytes: &[u8]) -> Result<OmHeader> {
        let h = bytes
            .get(..MODEL_FILE_HEAD_LEN)
            .ok_or_else(|| OmError::Truncated {
                place: Place::offset(0),
                what: "the model file header".into(),
                need: MODEL_FILE_HEAD_LEN as u64,
                have: bytes.len() as u64,
            })?;
        let mut r = Reader::new(h);
        // The reads below cannot fail: the slice is exactly 256 bytes.
        let mut hdr = OmHeader {
            magic: r.u32("magic")?,
            headsize: r.u32("headsize")?,
            version: r.u32("version")?,
            checksum: r.array("checksum")?,
            length: r.u32("length")?,
            is_encrypt: r.u8("is_encrypt")?,
            is_checksum: r.u8("is_checksum")?,
            modeltype: r.u8("modeltype")?,
            genmode: r.u8("genmode")?,
            name: r.array("name")?,
            ..OmHeader::default()
        };
        hdr.ops = r.u32("ops")?;
        hdr.userdefineinfo = r.array("userdefineinfo")?;
        hdr.om_ir_version = r.u32("om_ir_version")?;
        hdr.model_num = r.u32("model_num")?;
        hdr.platform_version = r.array("platform_version")?;
        hdr.platform_type = r.u8("platform_type")?;
        hdr.padd = r.array("padd")?;
        hdr.model_length = r.u64("model_length")?;
        hdr.need_check_os_cpu_info = r.u8("need_check_os_cpu_info")?;
        hdr.is_unknow_model = r.u8("is_unknow_model")?;
        hdr.reserved = r.array("reserved")?;
        debug_assert_eq!(r.pos, MODEL_FILE_HEAD_LEN);
        Ok(hdr)
    }

    /// The 256 header bytes.
    pub fn to_bytes(&self) -> [u8; MODEL_FILE_HEAD_LEN] {
        let mut out = Vec::with_capacity(MODEL_FILE_HEAD_LEN);
        out.extend_from_slice(&self.magic.to_le_bytes());
        out.extend_from_slice(&self.headsize.to_le_bytes());
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.checksum);
        out.extend_from_slice(&self.length.to_le_bytes());
        out.extend_from_slice(&[
            self.is_encrypt,
            self.is_checksum,
            self.modeltype,
            self.genmode,
        ]);
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&self.ops.to_le_bytes());
        out.extend_from_slice(&self.userdefineinfo);
        out.extend_from_slice(&self.om_ir_version.to_le_bytes());
        out.extend_from_slice(&self.model_num.to_le_bytes());
        out.extend_from_slice(&self.platform_version);
        out.push(self.platform_type);
        out.extend_from_slice(&self.padd);
        out.extend_from_slice(&self.model_length.to_le_bytes());
        out.push(self.need_check_os_cpu_info);
        out.push(self.is_unknow_model);
        out.extend_from_slice(&self.reserved);
        let mut arr = [0u8; MODEL_FILE_HEAD_LEN];
        arr.copy_from_slice(&out);
        arr
    }
}

/// The layout of a partition table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// `ModelPartitionTable`: u32 num, 4 pad, num x 24-byte entries with u64 offset/size.
    Standard,
    /// `TinyModelPartitionTable` of old files: u32 num, num x 12-byte entries (u32 fields).
    Legacy,
}

impl TableFormat {
    fn header_size(self) -> u64 {
        match self {
            TableFormat::Standard => 8,
            TableFormat::Legacy => 4,
        }
    }
    fn entry_size(self) -> u64 {
        match self {
            TableFormat::Standard => STANDARD_ENTRY,
            TableFormat::Legacy => LEGACY_ENTRY,
        }
    }
    /// Bytes taken by a table of `num` entries.
    pub fn table_size(self, num: u64) -> Option<u64> {
        num.checked_mul(self.entry_size())?
            .checked_add(self.header_size())
    }
}

/// One partition: its type, the `mem_offset` as stored (readers ignore it) and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub kind: PartitionType,
    pub mem_offset: u64,
    /// In a buffer of the partition's own: a read file's partitions are copied out of it
    /// once, so that WEIGHTS_DATA's weights, aligned within it as GE places them, are
    /// the Const tensors' bytes by reference rather than copied again ([`crate::om::weights`]).
    pub data: bytes::Bytes,
    /// The 4 padding bytes after `type` in a standard entry, as stored (GE writes zeros);
    /// kept so that an unchanged file is rewritten byte for byte. Always 0 for legacy tables.
    pub pad: u32,
}

impl Partition {
    /// A partition for a fresh file; `mem_offset` is set by [`OmFile::finalize`].
    pub fn new(kind: PartitionType, data: impl Into<bytes::Bytes>) -> Self {
        Partition {
            kind,
            mem_offset: 0,
            data: data.into(),
            pad: 0,
        }
    }
}

/// One table-and-partitions group (model index 0 is the root model).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OmModel {
    pub table_format: TableFormat,
    pub partitions: Vec<Partition>,
    /// The 4 padding bytes after `num` in a standard table, as stored (GE writes zeros).
    pub table_pad: u32,
}

/// A whole OM file: the header and the models after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OmFile {
    pub header: OmHeader,
    pub models: Vec<OmModel>,
}

/// A bounds-checked little-endian cursor over untrusted bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }
    fn left(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let have = self.left();
        if n > have {
            return Err(OmError::Truncated {
                place: Place::offset(self.pos as u64),
                what: what.into(),
                need: n,
                have,
            });
        }
        // n <= have <= usize::MAX, so the cast is lossless.
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
}

fn place_model(offset: usize, model: u32) -> Place {
    Place::new(format!("offset {offset}: model {model}"))
}

fn place_partition(offset: usize, model: u32, index: usize, kind: PartitionType) -> Place {
    Place::new(format!(
        "offset {offset}: model {model}: partition {index} ({})",
        kind.name()
    ))
}

impl OmFile {
    /// Parses an OM file the way GE's loader does (`ModelParserBase::ParseModelContent`,
    /// `OmFileLoadHelper`): the header, then `models_to_read()` groups of table and
    /// partitions walked one after another by `mem_size` (stored `mem_offset`s are kept but
    /// not trusted), then the length check `model_len == file_size - 256` and a check that
    /// nothing follows the last partition.
    ///
    /// Refuses encrypted and signed models and OM2 archives with [`OmError::Unsupported`].
    pub fn parse(bytes: &[u8]) -> Result<OmFile> {
        if bytes.starts_with(b"PK\x03\x04") {
            return Err(OmError::unsupported(
                Place::offset(0),
                "this is an OM2 model (a ZIP archive), not an OM container",
            ));
        }
        let header = OmHeader::parse(bytes)?;
        if header.magic != MODEL_FILE_MAGIC_NUM {
            let b = header.magic.to_le_bytes();
            return Err(OmError::container(
                Place::offset(0),
                format!(
                    "bad magic 0x{:08X} (bytes {:02x} {:02x} {:02x} {:02x}), expected 0x{MODEL_FILE_MAGIC_NUM:08X} (\"IMOD\")",
                    header.magic, b[0], b[1], b[2], b[3]
                ),
            ));
        }
        if header.headsize != MODEL_FILE_HEAD_LEN as u32 {
            return Err(OmError::container(
                Place::offset(4),
                format!(
                    "header size {} is not {MODEL_FILE_HEAD_LEN}",
                    header.headsize
                ),
            ));
        }
        if header.is_encrypt != 0 {
            return Err(OmError::unsupported(
                Place::offset(80),
                format!("encrypted model (is_encrypt = {})", header.is_encrypt),
            ));
        }
        // GE's header documents `checksum` as the signature and leaves it zeroed in every
        // model it writes unsigned (`ModelFileHeader` in framework_types_internal.h). The
        // `is_checksum` byte cannot mark signing: its default CHECK (0) is what unsigned
        // files carry too. So a model is "signed" when the checksum field is not all zero.
        if header.checksum.iter().any(|&b| b != 0) {
            return Err(OmError::unsupported(
                Place::offset(12),
                "signed model (the 64-byte checksum/signature field is not zero)",
            ));
        }

        let format = header.table_format();
        let is_bundle = header.model_type() == ModelType::BundleModel;
        let mut r = Reader::new(bytes);
        r.pos = MODEL_FILE_HEAD_LEN;
        let mut models = Vec::new();
        for m in 0..header.models_to_read() {
            if r.left() == 0 {
                return Err(OmError::Truncated {
                    place: place_model(r.pos, m),
                    what: format!(
                        "model {m} of {} (header model_num)",
                        header.models_to_read()
                    ),
                    need: format.header_size(),
                    have: 0,
                });
            }
            models.push(Self::parse_model(&mut r, &header, m, format)?);
        }

        let file_size = bytes.len() as u64;
        // Bundle models count the header in `model_length` (`SaveBundleModelBufferToMem`).
        let expected = if is_bundle {
            file_size
        } else {
            file_size - MODEL_FILE_HEAD_LEN as u64
        };
        if header.model_len() != expected {
            let field = if header.model_length == 0 {
                "length"
            } else {
                "model_length"
            };
            return Err(OmError::container(
                Place::offset(if header.model_length == 0 { 76 } else { 184 }),
                format!(
                    "length mismatch: header {field} = {} but the file holds {expected} bytes {}",
                    header.model_len(),
                    if is_bundle {
                        "in all"
                    } else {
                        "after the header"
                    }
                ),
            ));
        }
        if r.left() != 0 {
            return Err(OmError::container(
                Place::offset(r.pos as u64),
                format!("{} trailing bytes after the last partition", r.left()),
            ));
        }
        Ok(OmFile { header, models })
    }

    fn parse_model(
        r: &mut Reader<'_>,
        header: &OmHeader,
        m: u32,
        format: TableFormat,
    ) -> Result<OmModel> {
        let table_at = r.pos;
        let num = r
            .u32("partition table count")
            .map_err(|e| with_model(e, m))?;
        let is_flow = header.model_type() == ModelType::FlowModel;
        let is_bundle = header.model_type() == ModelType::BundleModel;
        // CheckPartitionTableNum: {5,4,3,1} + k for k in 0..=3, i.e. 1..=8, for normal
        // models; at most 4096 for flow models. Bundle tables hold one entry per nested
        // model, so they get the flow bound (not checked against a real file).
        let ok = if is_flow || is_bundle {
            num <= MAX_FLOW_PARTITIONS
        } else {
            [5u32, 4, 3, 1]
                .iter()
                .any(|&base| (base..=base + 3).contains(&num))
        };
        if !ok {
            return Err(OmError::container(
                place_model(table_at, m),
                format!(
                    "partition count {num} out of range ({})",
                    if is_flow || is_bundle {
                        "at most 4096"
                    } else {
                        "1 to 8"
                    }
                ),
            ));
        }
        let table_pad = match format {
            TableFormat::Standard => r
                .u32("partition table padding")
                .map_err(|e| with_model(e, m))?,
            TableFormat::Legacy => 0,
        };
        // `num` is bounded above, so this reserve is small whatever the file says.
        let mut entries = Vec::with_capacity(num as usize);
        for i in 0..num as usize {
            let what = format!("partition table entry {i}");
            let mut read = || -> Result<(u32, u32, u64, u64)> {
                Ok(match format {
                    TableFormat::Standard => {
                        (r.u32(&what)?, r.u32(&what)?, r.u64(&what)?, r.u64(&what)?)
                    }
                    TableFormat::Legacy => (
                        r.u32(&what)?,
                        0,
                        u64::from(r.u32(&what)?),
                        u64::from(r.u32(&what)?),
                    ),
                })
            };
            let (kind, pad, off, size) = read().map_err(|e| with_model(e, m))?;
            entries.push((PartitionType::from_u32(kind), pad, off, size));
        }
        let mut partitions = Vec::with_capacity(entries.len());
        for (i, (kind, pad, mem_offset, size)) in entries.into_iter().enumerate() {
            let at = r.pos;
            let have = r.left();
            if size > have {
                return Err(OmError::container(
                    place_partition(at, m, i, kind),
                    format!(
                        "partition of {size} bytes runs past the end of the file ({have} bytes left)"
                    ),
                ));
            }
            let data = bytes::Bytes::copy_from_slice(r.take(size, "partition")?);
            partitions.push(Partition {
                kind,
                mem_offset,
                data,
                pad,
            });
        }
        Ok(OmModel {
            table_format: format,
            partitions,
            table_pad,
        })
    }

    /// The file bytes. An unchanged parsed file comes back byte for byte: stored
    /// `mem_offset`s, padding and header lengths are written as they are, not re-derived
    /// (call [`OmFile::finalize`] after changing partitions).
    ///
    /// Fails only when a value does not fit its field (a legacy table's u32 offset or size).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = self.header.to_bytes().to_vec();
        for (m, model) in self.models.iter().enumerate() {
            let num = u32::try_from(model.partitions.len()).map_err(|_| {
                OmError::container(
                    Place::new(format!("model {m}")),
                    "too many partitions for a table",
                )
            })?;
            out.extend_from_slice(&num.to_le_bytes());
            if model.table_format == TableFormat::Standard {
                out.extend_from_slice(&model.table_pad.to_le_bytes());
            }
            for (i, p) in model.partitions.iter().enumerate() {
                out.extend_from_slice(&p.kind.to_u32().to_le_bytes());
                match model.table_format {
                    TableFormat::Standard => {
                        out.extend_from_slice(&p.pad.to_le_bytes());
                        out.extend_from_slice(&p.mem_offset.to_le_bytes());
                        out.extend_from_slice(&(p.data.len() as u64).to_le_bytes());
                    }
                    TableFormat::Legacy => {
                        let too_big = || {
                            OmError::container(
                                Place::new(format!("model {m}: partition {i} ({})", p.kind.name())),
                                "offset or size does not fit a legacy 32-bit table entry",
                            )
                        };
                        let off = u32::try_from(p.mem_offset).map_err(|_| too_big())?;
                        let size = u32::try_from(p.data.len()).map_err(|_| too_big())?;
                        out.extend_from_slice(&off.to_le_bytes());
                        out.extend_from_slice(&size.to_le_bytes());
                    }
                }
            }
            for p in &model.partitions {
                out.extend_from_slice(&p.data);
            }
        }
        Ok(out)
    }

    /// Recomputes what GE's writer derives (`om_file_helper.cc`): each `mem_offset` relative
    /// to the end of its model's table with no alignment (relative to the table start for a
    /// bundle), `model_num`, `model_length` (the bytes after the header; the whole file for a
    /// bundle) and `length`. A legacy-table file keeps `model_length` 0, since that is what
    /// tells a reader to use legacy tables, and carries the size in `length` alone.
    pub fn finalize(&mut self) -> Result<()> {
        let is_bundle = self.header.model_type() == ModelType::BundleModel;
        let overflow =
            || OmError::container(Place::new("finalize"), "model size overflows 64 bits");
        let mut total: u64 = 0;
        for model in &mut self.models {
            let table = model
                .table_format
                .table_size(model.partitions.len() as u64)
                .ok_or_else(overflow)?;
            let mut off: u64 = if is_bundle { table } else { 0 };
            for p in &mut model.partitions {
                p.mem_offset = off;
                off = off.checked_add(p.data.len() as u64).ok_or_else(overflow)?;
            }
            let body = if is_bundle {
                off
            } else {
                off.checked_add(table).ok_or_else(overflow)?
            };
            total = total.checked_add(body).ok_or_else(overflow)?;
        }
        self.header.model_num = u32::try_from(self.models.len()).map_err(|_| overflow())?;
        let legacy = self
            .models
            .iter()
            .any(|m| m.table_format == TableFormat::Legacy);
        if is_bundle {
            total = total
                .checked_add(MODEL_FILE_HEAD_LEN as u64)
                .ok_or_else(overflow)?;
        }
        if legacy {
            self.header.model_length = 0;
            self.header.length = u32::try_from(total).map_err(|_| {
                OmError::container(Place::new("finalize"), "legacy OM larger than 4 GiB")
            })?;
        } else {
            self.header.model_length = total;
            // Readers use model_length when it is set; `length` keeps the low 32 bits.
            self.header.length = total as u32;
        }
        Ok(())
    }

    /// The root model (index 0), if any.
    pub fn root(&self) -> Option<&OmModel> {
        self.models.first()
    }

    /// The MODEL_DEF of model `index` decoded, with attribute compression undone as GE's
    /// loader does it: a sub-model of a `_dynamic_shape_partitioned` root with the root's
    /// dictionary ([`super::compress::decompress_in_file`]), any other model with its
    /// own. `None` when there is no such model or it has no MODEL_DEF.
    pub fn model_def(&self, index: usize) -> Result<Option<ModelDef>> {
        let Some(Some(mut def)) = self
            .models
            .get(index)
            .map(OmModel::raw_model_def)
            .transpose()?
        else {
            return Ok(None);
        };
        let mut root_tables = None;
        if index > 0
            && let Some(Some(mut root)) = self.root().map(OmModel::raw_model_def).transpose()?
            && super::compress::is_partitioned_root(&root)
        {
            root_tables = super::compress::Decompressor::take_from(&mut root)?;
        }
        super::compress::decompress_in_file(&mut def, root_tables.as_ref())
            .map_err(|e| OmError::within(Place::new(format!("model {index}")), e))?;
        Ok(Some(def))
    }
}

fn with_model(e: OmError, m: u32) -> OmError {
    match e {
        OmError::Truncated {
            place,
            what,
            need,
            have,
        } => OmError::Truncated {
            place: Place::new(format!("{place}: model {m}")),
            what,
            need,
            have,
        },
        other => other,
    }
}

impl OmModel {
    /// A model with standard tables and the given partitions.
    pub fn new(partitions: Vec<Partition>) -> Self {
        OmModel {
            table_format: TableFormat::Standard,
            partitions,
            table_pad: 0,
        }
    }

    /// The first partition of a kind, with its index.
    pub fn find(&self, kind: PartitionType) -> Option<(usize, &Partition)> {
        self.partitions
            .iter()
            .enumerate()
            .find(|(_, p)| p.kind == kind)
    }

    /// The bytes of the first partition of a kind.
    pub fn partition(&self, kind: PartitionType) -> Option<&[u8]> {
        self.find(kind).map(|(_, p)| &p.data[..])
    }

    fn decode<M: Message + Default>(
        &self,
        kind: PartitionType,
        message: &'static str,
    ) -> Result<Option<M>> {
        let Some((i, p)) = self.find(kind) else {
            return Ok(None);
        };
        let place = || Place::new(format!("partition {i} ({})", kind.name()));
        check_nesting(&p.data, message, &place())?;
        M::decode(&p.data[..])
            .map(Some)
            .map_err(|source| OmError::Protobuf {
                place: place(),
                message,
                source,
            })
    }

    /// The MODEL_DEF partition decoded, with attribute compression undone by the model's
    /// own tables ([`super::compress::decompress`]); `None` when the model has no
    /// MODEL_DEF. A sub-model of a partitioned root has none of its own and keeps its
    /// names compressed here: [`OmFile::model_def`] gives it the root's.
    pub fn model_def(&self) -> Result<Option<ModelDef>> {
        let Some(mut def) = self.raw_model_def()? else {
            return Ok(None);
        };
        super::compress::decompress(&mut def)?;
        Ok(Some(def))
    }

    /// The MODEL_DEF partition decoded as stored (attribute names possibly compressed).
    pub fn raw_model_def(&self) -> Result<Option<ModelDef>> {
        let Some((i, p)) = self.find(PartitionType::ModelDef) else {
            return Ok(None);
        };
        check_nesting(
            &p.data,
            "ge.proto.ModelDef",
            &Place::new(format!("partition {i} (MODEL_DEF)")),
        )?;
        super::wire::decode_model_def(&p.data)
            .map(Some)
            .map_err(|source| OmError::Protobuf {
                place: Place::new(format!("partition {i} (MODEL_DEF)")),
                message: "ge.proto.ModelDef",
                source,
            })
    }

    /// The WEIGHTS_DATA bytes.
    pub fn weights(&self) -> Option<&bytes::Bytes> {
        self.find(PartitionType::WeightsData).map(|(_, p)| &p.data)
    }

    /// The TASK_INFO partition decoded.
    pub fn task_info(&self) -> Result<Option<ModelTaskDef>> {
        self.decode(PartitionType::TaskInfo, "domi.ModelTaskDef")
    }

    /// The FLOW_MODEL partition decoded.
    pub fn flow_model(&self) -> Result<Option<FlowModelDef>> {
        self.decode(PartitionType::FlowModel, "ge.flow_model.proto.FlowModelDef")
    }

    /// Every FLOW_SUBMODEL partition decoded, in table order.
    pub fn flow_submodels(&self) -> Result<Vec<SubmodelDef>> {
        let mut out = Vec::new();
        for (i, p) in self.partitions.iter().enumerate() {
            if p.kind == PartitionType::FlowSubmodel {
                check_nesting(
                    &p.data,
                    "ge.flow_model.proto.SubmodelDef",
                    &Place::new(format!("partition {i} (FLOW_SUBMODEL)")),
                )?;
                let sub = SubmodelDef::decode(&p.data[..]).map_err(|source| OmError::Protobuf {
                    place: Place::new(format!("partition {i} (FLOW_SUBMODEL)")),
                    message: "ge.flow_model.proto.SubmodelDef",
                    source,
                })?;
                out.push(sub);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::testdata;
    use proptest::prelude::*;

    fn all_fixtures() -> Vec<(&'static str, Vec<u8>)> {
        testdata::all()
            .into_iter()
            .map(|(n, f)| (n, f.to_bytes().expect("fixture encodes")))
            .collect()
    }

    #[test]
    fn header_is_256_bytes_and_round_trips() {
        let mut h = OmHeader::default();
        h.set_name("a_name_longer_than_thirty_one_bytes_total");
        h.set_platform_version("Ascend910B1");
        h.model_length = 0x0102_0304_0506_0708;
        h.is_unknow_model = 1;
        let b = h.to_bytes();
        assert_eq!(&b[0..4], b"IMOD");
        assert_eq!(
            u64::from_le_bytes(b[184..192].try_into().unwrap()),
            0x0102_0304_0506_0708
        );
        assert_eq!(b[193], 1);
        assert_eq!(&b[160..171], b"Ascend910B1");
        let back = OmHeader::parse(&b).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.name().len(), 31);
        assert_eq!(back.platform_version(), "Ascend910B1");
        assert!(back.is_dynamic());
    }

    #[test]
    fn fixtures_round_trip_both_ways() {
        for (name, bytes) in all_fixtures() {
            let f = OmFile::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(f.to_bytes().unwrap(), bytes, "{name}");
            let again = OmFile::parse(&f.to_bytes().unwrap()).unwrap();
            assert_eq!(again, f, "{name}");
        }
    }

    #[test]
    fn multi_model_dynamic_values() {
        let bytes = testdata::multi_model_dynamic().to_bytes().unwrap();
        let f = OmFile::parse(&bytes).unwrap();
        assert_eq!(f.header.model_num, 3);
        assert_eq!(f.header.is_unknow_model, 1);
        assert!(f.header.is_dynamic());
        assert_eq!(f.header.model_length, bytes.len() as u64 - 256);
        assert_eq!(f.models.len(), 3);
        let kinds: Vec<_> = f.models[0]
            .partitions
            .iter()
            .map(|p| p.kind.name())
            .collect();
        assert_eq!(kinds, ["MODEL_INOUT_INFO", "MODEL_DEF"]);
        let kinds: Vec<_> = f.models[1].partitions.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [
                PartitionType::ModelDef,
                PartitionType::WeightsData,
                PartitionType::TbeKernels,
                PartitionType::TaskInfo
            ]
        );
        // mem_offset is relative to the end of the table: 0, then running sizes.
        let p = &f.models[1].partitions;
        assert_eq!(p[0].mem_offset, 0);
        assert_eq!(p[1].mem_offset, p[0].data.len() as u64);
        let def = f.models[1].model_def().unwrap().unwrap();
        assert_eq!(def.name, "sub_1");
        let tasks = f.models[1].task_info().unwrap().unwrap();
        assert_eq!(tasks.task.len(), 3);
        assert_eq!(f.models[2].model_def().unwrap().unwrap().name, "sub_2");
    }

    #[test]
    fn flow_values() {
        let bytes = testdata::flow_om().to_bytes().unwrap();
        let f = OmFile::parse(&bytes).unwrap();
        assert_eq!(f.header.model_type(), ModelType::FlowModel);
        assert_eq!(f.header.model_type().name(), "MODEL_TYPE_FLOW_MODEL");
        let m = &f.models[0];
        assert_eq!(m.partitions.len(), 4);
        let flow = m.flow_model().unwrap().unwrap();
        assert_eq!(flow.model_name, "flow");
        assert_eq!(flow.submodel_name, ["sub_a", "sub_b"]);
        let subs = m.flow_submodels().unwrap();
        assert_eq!(subs.len(), 2);
        assert_eq!(subs[1].model_name, "sub_b");
        assert!(!subs[0].om_data.is_empty());
        // The nested OM is itself a valid OM.
        let nested = OmFile::parse(&subs[0].om_data).unwrap();
        assert_eq!(nested.header.name(), "sub_a");
    }

    #[test]
    fn legacy_values() {
        let bytes = testdata::legacy_om().to_bytes().unwrap();
        let f = OmFile::parse(&bytes).unwrap();
        assert_eq!(f.header.model_length, 0);
        assert_eq!(u64::from(f.header.length), bytes.len() as u64 - 256);
        assert_eq!(f.models[0].table_format, TableFormat::Legacy);
        assert_eq!(f.models[0].partitions.len(), 3);
        // 4-byte count + 3 x 12-byte entries.
        let first = 256 + 4 + 36;
        assert_eq!(
            &bytes[first..first + 1],
            &f.models[0].partitions[0].data[..1]
        );
        assert_eq!(f.models[0].model_def().unwrap().unwrap().name, "legacy");
    }

    #[test]
    fn compressed_fixture_decompresses() {
        let bytes = testdata::compressed_om().to_bytes().unwrap();
        let f = OmFile::parse(&bytes).unwrap();
        let raw = f.models[0].raw_model_def().unwrap().unwrap();
        assert!(raw.attr.contains_key("om_compress_version"));
        assert!(
            raw.graph[0]
                .op
                .iter()
                .all(|op| op.attr.keys().all(|k| k.starts_with('\0')))
        );
        let def = f.models[0].model_def().unwrap().unwrap();
        assert!(!def.attr.contains_key("om_compress_version"));
        let data = def.graph[0].op.iter().find(|o| o.r#type == "Data").unwrap();
        assert!(data.attr.contains_key("index"));
    }

    #[test]
    fn bundle_values() {
        let bytes = testdata::bundle_om().to_bytes().unwrap();
        let f = OmFile::parse(&bytes).unwrap();
        assert_eq!(f.header.model_type(), ModelType::BundleModel);
        // A bundle counts the header in model_length and offsets from the table start.
        assert_eq!(f.header.model_length, bytes.len() as u64);
        let p = &f.models[0].partitions;
        assert_eq!(p[0].kind, PartitionType::BundleModelVarInfo);
        assert_eq!(p[0].mem_offset, 8 + 3 * 24);
        assert_eq!(p[0].data[..], 4096u64.to_le_bytes());
        assert_eq!(p[1].mem_offset, 8 + 3 * 24 + 8);
        let nested = OmFile::parse(&p[2].data).unwrap();
        assert_eq!(nested.header.name(), "b2");
    }

    #[test]
    fn truncation_at_every_offset_is_an_error() {
        for (name, bytes) in all_fixtures() {
            for cut in 0..bytes.len() {
                assert!(OmFile::parse(&bytes[..cut]).is_err(), "{name} cut at {cut}");
            }
        }
    }

    fn err(bytes: &[u8]) -> String {
        match OmFile::parse(bytes) {
            Ok(_) => panic!("parsed without error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn error_messages_name_the_place() {
        let good = testdata::multi_model_dynamic().to_bytes().unwrap();
        assert_eq!(
            err(&good[..100]),
            "offset 0: truncated: the model file header needs 256 bytes, 100 left"
        );
        let mut b = good.clone();
        b[0..4].copy_from_slice(b"ABCD");
        assert!(
            err(&b).contains("bad magic 0x44434241 (bytes 41 42 43 44)"),
            "{}",
            err(&b)
        );
        let mut b = good.clone();
        b[4] = 1;
        assert_eq!(err(&b), "offset 4: header size 257 is not 256");
        let mut b = good.clone();
        b[80] = 1;
        assert_eq!(
            err(&b),
            "offset 80: not supported: encrypted model (is_encrypt = 1)"
        );
        let mut b = good.clone();
        b[20] = 7;
        assert!(err(&b).contains("not supported: signed model"));
        assert!(err(b"PK\x03\x04rest").contains("OM2"));
        // Partition count out of range in model 0.
        let mut b = good.clone();
        b[256..260].copy_from_slice(&9u32.to_le_bytes());
        assert_eq!(
            err(&b),
            "offset 256: model 0: partition count 9 out of range (1 to 8)"
        );
        // A partition running past the end: grow model 0's last partition size.
        let mut b = good.clone();
        let entry1_size = 256 + 8 + 24 + 16;
        b[entry1_size..entry1_size + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = err(&b);
        assert!(
            e.contains("model 0: partition 1 (MODEL_DEF)") && e.contains("runs past the end"),
            "{e}"
        );
        // Trailing bytes.
        let mut b = good.clone();
        b.extend_from_slice(&[0, 0]);
        let len = (b.len() - 256) as u64;
        b[184..192].copy_from_slice(&len.to_le_bytes());
        assert_eq!(
            err(&b),
            format!(
                "offset {}: 2 trailing bytes after the last partition",
                good.len()
            )
        );
        // Length mismatch.
        let mut b = good.clone();
        b[184..192].copy_from_slice(&1u64.to_le_bytes());
        assert!(err(&b).starts_with("offset 184: length mismatch: header model_length = 1"));
        // Truncated inside the second model's table.
        let f = OmFile::parse(&good).unwrap();
        let m0 = 8
            + 48
            + f.models[0]
                .partitions
                .iter()
                .map(|p| p.data.len())
                .sum::<usize>();
        let cut = 256 + m0 + 6;
        let e = err(&good[..cut]);
        assert!(e.contains("model 1") && e.contains("truncated"), "{e}");
    }

    #[test]
    fn hostile_model_num_does_not_allocate() {
        let mut f = testdata::multi_model_dynamic();
        f.header.model_num = u32::MAX;
        let b = f.to_bytes().unwrap();
        let e = err(&b);
        assert!(e.contains("model 3") && e.contains("truncated"), "{e}");
    }

    #[test]
    fn finalize_recomputes_offsets_and_lengths() {
        let mut f = testdata::multi_model_dynamic();
        let mut grown = f.models[1].partitions[0].data.to_vec();
        grown.extend_from_slice(&[0; 10]);
        f.models[1].partitions[0].data = grown.into();
        f.finalize().unwrap();
        let b = f.to_bytes().unwrap();
        assert_eq!(f.header.model_length, b.len() as u64 - 256);
        assert_eq!(
            f.models[1].partitions[1].mem_offset,
            f.models[1].partitions[0].data.len() as u64
        );
        // The MODEL_DEF no longer decodes, but the container still does.
        assert!(OmFile::parse(&b).is_ok());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = OmFile::parse(&bytes);
        }

        #[test]
        fn mutations_never_panic_and_round_trip(
            which in 0usize..5,
            muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        ) {
            let (_, fixture) = testdata::all().swap_remove(which);
            let mut bytes = fixture.to_bytes().unwrap();
            for (i, v) in muts {
                let at = i.index(bytes.len());
                bytes[at] = v;
            }
            if let Ok(f) = OmFile::parse(&bytes) {
                prop_assert_eq!(f.to_bytes().unwrap(), bytes);
                for m in &f.models {
                    let _ = m.model_def();
                    let _ = m.task_info();
                    let _ = m.flow_model();
                    let _ = m.flow_submodels();
                }
            }
        }
    }
}
