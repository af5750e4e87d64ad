//! Model files of every kind rt2 reads, recognised by content and decoded to GE IR and to
//! typed ComputeModels.
//!
//! Detection looks at bytes, never at the file name: `IMOD` at offset 0 is an OM; a ZIP
//! header is an OM2 (not supported); a JSON object is GE JSON; protobuf text (a field name
//! then `{` or `:`) is a GE text dump; binary protobuf starting with ONNX's `ir_version`
//! tag is ONNX, else it must decode as a GE `ModelDef`.

use crate::om::container::{OmFile, PartitionType};
use crate::om::graph::AttrValue;
use crate::om::onnx::ImportOptions;
use crate::om::{ComputeModel, OmError, Place, Result, compress, ir};
use crate::proto::ge_ir::ModelDef;

/// The kinds of model file rt2 reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Om,
    GeIr,
    GeText,
    GeJson,
    Onnx,
}

impl FileKind {
    /// The name used by `rt2 inspect` (`om`, `ge-ir`, `ge-text`, `ge-json`, `onnx`).
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Om => "om",
            FileKind::GeIr => "ge-ir",
            FileKind::GeText => "ge-text",
            FileKind::GeJson => "ge-json",
            FileKind::Onnx => "onnx",
        }
    }
}

/// Recognises a model file by its content.
pub fn detect(bytes: &[u8]) -> Result<FileKind> {
    if bytes.starts_with(b"IMOD") {
        return Ok(FileKind::Om);
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return Err(OmError::unsupported(
            Place::offset(0),
            "this is a ZIP archive (an OM2 model); rt2 reads OM models (magic IMOD)",
        ));
    }
    if bytes.is_empty() {
        return Err(OmError::UnknownKind {
            msg: "the file is empty".into(),
        });
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        let start = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
        if start.starts_with('{') || start.starts_with('[') {
            return Ok(FileKind::GeJson);
        }
        if looks_like_text_format(start) {
            return Ok(FileKind::GeText);
        }
    }
    // ONNX ModelProto files begin with field 1 (ir_version, varint): tag byte 0x08. A GE
    // ModelDef's field 1 is a string (tag 0x0a), and its other fields have other tags.
    if bytes[0] == 0x08 {
        return Ok(FileKind::Onnx);
    }
    if matches!(bytes[0], 0x0a | 0x10 | 0x1a | 0x3a | 0x5a | 0x62) {
        return Ok(FileKind::GeIr);
    }
    Err(OmError::UnknownKind {
        msg: format!(
            "first bytes {:02x?} match no OM, GE IR, GE text dump, GE JSON or ONNX file",
            &bytes[..bytes.len().min(8)]
        ),
    })
}

/// Protobuf text format starts with comments or an identifier followed by `{`, `<` or `:`.
fn looks_like_text_format(s: &str) -> bool {
    let mut rest = s;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('#') {
            rest = after.split_once('\n').map(|(_, r)| r).unwrap_or("");
            continue;
        }
        break;
    }
    let ident_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    if ident_len == 0 || !rest.as_bytes()[0].is_ascii_alphabetic() {
        return rest.is_empty() && !s.trim().is_empty();
    }
    let after = rest[ident_len..].trim_start();
    after.starts_with('{') || after.starts_with(':') || after.starts_with('<')
}

pub use crate::om::root_model::LoadedModel;

/// A model file, decoded.
#[derive(Debug, Clone)]
pub struct ModelFile {
    pub kind: FileKind,
    /// The container, for OM files.
    pub om: Option<OmFile>,
    /// Every model with a graph, in file order. Never empty.
    pub models: Vec<LoadedModel>,
}

impl ModelFile {
    /// The first (root) model.
    pub fn root(&self) -> &LoadedModel {
        &self.models[0]
    }
}

/// Options for [`read`]; they apply to ONNX import.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub import: ImportOptions,
}

/// Decodes a model file of any kind. OM attribute compression is undone and Const
/// weights are resolved from WEIGHTS_DATA, so every `ModelDef` returned is self-contained.
pub fn read(bytes: &[u8], opts: &ReadOptions) -> Result<ModelFile> {
    let kind = detect(bytes)?;
    let mut om = None;
    let mut models = Vec::new();
    let from_def = |mut def: ModelDef| -> Result<Vec<LoadedModel>> {
        compress::decompress(&mut def)?;
        Ok(vec![LoadedModel {
            index: 0,
            model: ir::from_model_def(def)?,
        }])
    };
    match kind {
        FileKind::Om => {
            let file = OmFile::parse(bytes)?;
            om_models(&file, &mut models, 0)?;
            // A model names a subgraph it does not hold only when another model of the
            // file is that graph (GE's loader finds it there by name).
            crate::om::root_model::check(&models)?;
            om = Some(file);
        }
        FileKind::GeIr => {
            let model = crate::om::wire::read_model(bytes, None, &Place::offset(0))?;
            models.push(LoadedModel { index: 0, model });
        }
        FileKind::GeText => {
            let text = std::str::from_utf8(bytes).map_err(|e| {
                OmError::container(
                    Place::offset(e.valid_up_to() as u64),
                    "text dump is not valid UTF-8",
                )
            })?;
            models = from_def(crate::om::text::parse_text(text)?)?;
        }
        FileKind::GeJson => {
            let text = std::str::from_utf8(bytes).map_err(|e| OmError::Json {
                path: "$".into(),
                msg: format!("not valid UTF-8 at byte {}", e.valid_up_to()),
            })?;
            models = from_def(crate::om::json::from_json(text)?)?;
        }
        FileKind::Onnx => {
            let model = crate::om::onnx::import_typed(bytes, &opts.import)?;
            models.push(LoadedModel { index: 0, model });
        }
    }
    if models.is_empty() {
        return Err(OmError::container(
            Place::offset(0),
            "the file holds no model graph (no MODEL_DEF partition)",
        ));
    }
    Ok(ModelFile { kind, om, models })
}

/// Collects the model graphs of an OM: each model's MODEL_DEF (compression undone, weights
/// resolved), and for a bundle the models of every nested OM. As GE's loader
/// (`ModelHelper::GenerateGeRootModel`), when model 0's root graph is
/// `_dynamic_shape_partitioned` the models after it are decompressed with model 0's
/// dictionary, which GE stores on the root only (`om::compress`).
fn om_models(file: &OmFile, models: &mut Vec<LoadedModel>, depth: usize) -> Result<()> {
    let mut root_dictionary = None;
    for (i, m) in file.models.iter().enumerate() {
        // Top-level models keep their OM model index (what `--model` names); the models of
        // a bundle's nested OMs are numbered on from the last model found.
        let index = if depth == 0 {
            i
        } else {
            models.iter().map(|m| m.index + 1).max().unwrap_or(0)
        };
        if let Some((k, p)) = m.find(PartitionType::ModelDef) {
            let place = Place::new(format!("partition {k} (MODEL_DEF)"));
            let shared = if i == 0 {
                None
            } else {
                root_dictionary.as_ref()
            };
            let (model, own) =
                crate::om::wire::read_model_in_file(&p.data, m.weights(), &place, shared)
                    .map_err(|e| OmError::within(Place::new(format!("model {i}")), e))?;
            if i == 0 && is_partitioned(&model) {
                root_dictionary = own;
            }
            models.push(LoadedModel { index, model });
        }
        for (k, p) in m.partitions.iter().enumerate() {
            if p.kind != PartitionType::BundleModelInfo {
                continue;
            }
            // A bundle nests complete OMs; they do not nest further in GE's writer, and a
            // depth bound keeps a hostile file from recursing without end.
            if depth > 0 {
                return Err(OmError::container(
                    Place::new(format!("model {i}: partition {k}")),
                    "bundles nest inside a bundle",
                ));
            }
            let nested = OmFile::parse(&p.data).map_err(|e| {
                OmError::within(
                    Place::new(format!("model {i}: partition {k} (BUNDLE_MODEL_INFO)")),
                    e,
                )
            })?;
            om_models(&nested, models, depth + 1)?;
        }
    }
    Ok(())
}

/// Whether a model's root graph is `_dynamic_shape_partitioned` (GE's
/// `ModelHelper::IsPartitionedGraph`).
fn is_partitioned(model: &ComputeModel) -> bool {
    matches!(
        model
            .root
            .attrs
            .get(compress::ATTR_DYNAMIC_SHAPE_PARTITIONED),
        Some(AttrValue::Bool(true))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_by_content() {
        assert_eq!(detect(b"IMOD\0\0").unwrap(), FileKind::Om);
        assert_eq!(detect(b"  {\"graph\": []}").unwrap(), FileKind::GeJson);
        assert_eq!(
            detect(b"graph {\n  name: \"g\"\n}").unwrap(),
            FileKind::GeText
        );
        assert_eq!(detect(b"# dump\nname: \"m\"\n").unwrap(), FileKind::GeText);
        assert_eq!(detect(&[0x08, 0x07, 0x12]).unwrap(), FileKind::Onnx);
        assert_eq!(detect(&[0x0a, 0x01, b'm']).unwrap(), FileKind::GeIr);
        assert!(
            detect(b"PK\x03\x04zip")
                .unwrap_err()
                .to_string()
                .contains("OM2")
        );
        assert!(detect(b"").unwrap_err().to_string().contains("empty"));
        assert!(
            detect(&[0xff, 0x00])
                .unwrap_err()
                .to_string()
                .contains("ff")
        );
    }
}
