//! Building a fresh OM from `ModelDef`s, as GE writes one: a single model as ATC writes
//! it, or a dynamic root model with its sub-models ([`build_root_om`]). Weights
//! placed into WEIGHTS_DATA, the model attrs GE records, MODEL_INOUT_INFO, optional
//! attribute compression, and a finalized header.
//!
//! Owns the choice of partitions and header values for a new file. It must not do IO and
//! must not invent runtime data it cannot know (memory plans, kernels, tasks): those are
//! written only when the caller supplies them.

use prost::Message;

use super::compress::{compress, compress_sharing, is_partitioned_root};
use super::container::{OM_PROTO_VERSION, OmFile, OmHeader, OmModel, Partition, PartitionType};
use super::error::{OmError, Place, Result};
use super::inout::{InOutInfo, graph_is_dynamic};
use super::weights::place_weights;
use crate::proto::domi::ModelTaskDef;
use crate::proto::ge_ir::attr_def::list_value::ListValueType;
use crate::proto::ge_ir::attr_def::{ListValue, Value};
use crate::proto::ge_ir::{AttrDef, ModelDef};

/// How to build an OM.
#[derive(Debug, Clone)]
pub struct OmBuildOptions {
    /// Model name for the header (at most 31 bytes are kept) and `ModelDef.name`; empty
    /// keeps the model's own name.
    pub name: String,
    /// Platform version string (header, at most 19 bytes; `ModelDef.custom_version`).
    pub platform_version: String,
    /// Compress attribute names as GE does by default (`attr_compression_enabled_`).
    pub compress_attrs: bool,
    /// The `memory_size` model attr, when a memory plan is known.
    pub memory_size: Option<u64>,
    /// A TASK_INFO partition to include.
    pub task_info: Option<ModelTaskDef>,
}

impl Default for OmBuildOptions {
    fn default() -> Self {
        OmBuildOptions {
            name: String::new(),
            platform_version: String::new(),
            compress_attrs: true,
            memory_size: None,
            task_info: None,
        }
    }
}

fn int_attr(v: i64) -> AttrDef {
    AttrDef {
        value: Some(Value::I(v)),
    }
}

/// Builds a single-model OM: partitions MODEL_INOUT_INFO, MODEL_DEF, WEIGHTS_DATA and,
/// if given, TASK_INFO (the order of GE's root model file, with root extras first);
/// header version 0x20000000, `om_ir_version` 2, `modeltype` 0, `model_num` 1 and
/// `is_unknow_model` 1 when a root-graph tensor has a -1/-2 dim. Model attrs set:
/// `weight_size`, `memory_size` (if known), `om_info_list` = [weight size, TBE kernels,
/// custom AICPU kernels, task info, so store sizes].
pub fn build_om(mut model: ModelDef, opts: &OmBuildOptions) -> Result<OmFile> {
    let Some(root) = model.graph.first() else {
        return Err(OmError::graph(Place::new("model"), "model has no graph"));
    };
    let dynamic = graph_is_dynamic(root);
    if !opts.name.is_empty() {
        model.name = opts.name.clone();
    }
    model.version = OM_PROTO_VERSION;
    model.custom_version = opts.platform_version.clone();
    let inout = InOutInfo::from_model_def(&model).to_bytes()?;
    let weights = place_weights(&mut model);
    let task_bytes = opts.task_info.as_ref().map(Message::encode_to_vec);
    let task_len = task_bytes.as_ref().map_or(0, Vec::len) as i64;
    model
        .attr
        .insert("weight_size".into(), int_attr(weights.len() as i64));
    if let Some(m) = opts.memory_size {
        model.attr.insert("memory_size".into(), int_attr(m as i64));
    }
    model.attr.insert(
        "om_info_list".into(),
        AttrDef {
            value: Some(Value::List(Box::new(ListValue {
                i: vec![weights.len() as i64, 0, 0, task_len, 0],
                val_type: ListValueType::VtListInt as i32,
                ..ListValue::default()
            }))),
        },
    );
    if opts.compress_attrs {
        compress(&mut model);
    }
    let mut partitions = vec![
        Partition::new(PartitionType::ModelInoutInfo, inout),
        Partition::new(PartitionType::ModelDef, model.encode_to_vec()),
        Partition::new(PartitionType::WeightsData, weights),
    ];
    if let Some(t) = task_bytes {
        partitions.push(Partition::new(PartitionType::TaskInfo, t));
    }
    let mut header = OmHeader::default();
    header.set_name(&model.name);
    header.set_platform_version(&opts.platform_version);
    header.is_unknow_model = u8::from(dynamic);
    let mut file = OmFile {
        header,
        models: vec![OmModel::new(partitions)],
    };
    file.finalize()?;
    Ok(file)
}

/// Builds a dynamic root model's OM as GE's `ModelHelper::SaveToOmRootModel` lays it out:
/// model 0 is `root` (MODEL_INOUT_INFO, MODEL_DEF, and WEIGHTS_DATA when its graphs hold
/// constants), then one model per entry of `submodels` (MODEL_DEF, WEIGHTS_DATA), whose
/// first graph's name is the subgraph instance it stands for; `model_num` is their count
/// and `is_unknow_model` 1.
///
/// With `compress_attrs`, attribute names are compressed as GE leaves them: when the root's
/// graph is `_dynamic_shape_partitioned`, with one dictionary stored on the root and none
/// on the sub-models ([`compress_sharing`]); otherwise each model with its own
/// ([`compress`]).
pub fn build_root_om(
    mut root: ModelDef,
    submodels: Vec<ModelDef>,
    opts: &OmBuildOptions,
) -> Result<OmFile> {
    if root.graph.is_empty() {
        return Err(OmError::graph(Place::new("model 0"), "model has no graph"));
    }
    if !opts.name.is_empty() {
        root.name = opts.name.clone();
    }
    let inout = InOutInfo::from_model_def(&root).to_bytes()?;
    let mut defs: Vec<ModelDef> = std::iter::once(root).chain(submodels).collect();
    let mut weights = Vec::with_capacity(defs.len());
    for m in &mut defs {
        m.version = OM_PROTO_VERSION;
        m.custom_version = opts.platform_version.clone();
        let w = place_weights(m);
        m.attr
            .insert("weight_size".into(), int_attr(w.len() as i64));
        weights.push(w);
    }
    if opts.compress_attrs {
        match defs.split_first_mut() {
            Some((root, subs)) if is_partitioned_root(root) => compress_sharing(root, subs),
            _ => defs.iter_mut().for_each(compress),
        }
    }
    let mut models = Vec::with_capacity(defs.len());
    for (i, (m, weights)) in defs.into_iter().zip(weights).enumerate() {
        let mut partitions = Vec::new();
        if i == 0 {
            partitions.push(Partition::new(PartitionType::ModelInoutInfo, inout.clone()));
        }
        partitions.push(Partition::new(PartitionType::ModelDef, m.encode_to_vec()));
        if !weights.is_empty() {
            partitions.push(Partition::new(PartitionType::WeightsData, weights));
        }
        models.push(OmModel::new(partitions));
    }
    let mut header = OmHeader {
        is_unknow_model: 1,
        ..OmHeader::default()
    };
    header.set_name(&opts.name);
    header.set_platform_version(&opts.platform_version);
    let mut file = OmFile { header, models };
    file.finalize()?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::om::inout::InOutInfo;
    use crate::om::testdata;
    use crate::om::weights::resolve_weights;

    #[test]
    fn builds_a_faithful_single_model() {
        let opts = OmBuildOptions {
            name: "net".into(),
            platform_version: "Ascend910B1".into(),
            memory_size: Some(4096),
            ..OmBuildOptions::default()
        };
        let f = build_om(testdata::model_def("m"), &opts).unwrap();
        let bytes = f.to_bytes().unwrap();
        let back = OmFile::parse(&bytes).unwrap();
        assert_eq!(back, f);
        let h = &back.header;
        assert_eq!(
            (h.version, h.om_ir_version, h.modeltype, h.model_num),
            (0x2000_0000, 2, 0, 1)
        );
        assert_eq!(h.is_unknow_model, 0);
        assert_eq!(h.name(), "net");
        assert_eq!(h.platform_version(), "Ascend910B1");
        assert_eq!(h.model_length, bytes.len() as u64 - 256);
        let m = &back.models[0];
        let kinds: Vec<_> = m.partitions.iter().map(|p| p.kind.name()).collect();
        assert_eq!(kinds, ["MODEL_INOUT_INFO", "MODEL_DEF", "WEIGHTS_DATA"]);
        let mut def = m.model_def().unwrap().unwrap();
        assert_eq!(def.name, "net");
        assert_eq!(def.version, 2);
        assert_eq!(def.attr["weight_size"].value, Some(Value::I(2048)));
        assert_eq!(def.attr["memory_size"].value, Some(Value::I(4096)));
        resolve_weights(&mut def, m.weights().unwrap()).unwrap();
        let io = InOutInfo::parse(m.partition(PartitionType::ModelInoutInfo).unwrap()).unwrap();
        assert_eq!(io.inputs.len(), 2);
        assert_eq!(io.outputs[0].dims, [2, 4]);
    }

    #[test]
    fn dynamic_shape_sets_the_flag() {
        let mut m = testdata::model_def("d");
        m.graph[0].op[0].output_desc[0].shape.as_mut().unwrap().dim[0] = -1;
        let f = build_om(m, &OmBuildOptions::default()).unwrap();
        assert_eq!(f.header.is_unknow_model, 1);
        assert!(f.header.is_dynamic());
        let b = f.to_bytes().unwrap();
        assert_eq!(OmFile::parse(&b).unwrap().models.len(), 1);
    }

    /// A partitioned root stores the one dictionary; a pipeline root (not partitioned)
    /// and its stages each store their own. Either way every model decodes to what the
    /// uncompressed file holds.
    #[test]
    fn root_oms_compress_as_ge_writes_them() {
        let opts = |compress_attrs| OmBuildOptions {
            compress_attrs,
            ..OmBuildOptions::default()
        };
        for (models, shared) in [
            (testdata::dynamic_root_models(), true),
            (testdata::pipeline_models(), false),
        ] {
            let plain = build_root_om(models.0.clone(), models.1.clone(), &opts(false)).unwrap();
            let packed = build_root_om(models.0, models.1, &opts(true)).unwrap();
            let back = OmFile::parse(&packed.to_bytes().unwrap()).unwrap();
            assert_eq!(back.models.len(), 3);
            for k in 0..3 {
                let raw = back.models[k].raw_model_def().unwrap().unwrap();
                let has_tables = raw.attr.contains_key("attr_name_enum");
                assert_eq!(has_tables, k == 0 || !shared, "model {k}");
                let def = back.model_def(k).unwrap().unwrap();
                assert_eq!(def, plain.model_def(k).unwrap().unwrap(), "model {k}");
                // A shared-dictionary sub-model read alone keeps its names compressed.
                let alone = back.models[k].model_def().unwrap().unwrap();
                assert_eq!(alone == def, k == 0 || !shared, "model {k}");
            }
        }
    }

    #[test]
    fn empty_model_is_an_error() {
        let e = build_om(ModelDef::default(), &OmBuildOptions::default()).unwrap_err();
        assert_eq!(e.to_string(), "model: model has no graph");
    }
}
