//! Building a fresh OM from `ModelDef`s, as GE writes one: a single model as ATC writes
//! it, or a dynamic root model with its sub-models ([`build_root_om`]). Weights
//! placed into WEIGHTS_DATA, the model attrs GE records, MODEL_INOUT_INFO, optional
//! attribute compression, and a finalized header.
//!
//! Owns the choice of partitions and header values for a new file. It must not do IO and
//! must not invent runtime data it cannot know (memory plans, kernels, tasks): those are
//! written only when the caller supplies them.

use std::collections::BTreeMap;

use prost::Message;

use super::compress::{ATTR_OM_COMPRESS_VERSION, compress, compress_sharing, is_partitioned_root};
use super::container::{OM_PROTO_VERSION, OmFile, OmHeader, OmModel, Partition, PartitionType};
use super::error::{OmError, Place, Result};
use super::graph::ComputeModel;
use super::inout::{InOutInfo, graph_is_dynamic};
use super::ir;
use super::model_writer::{self, Plan};
use super::weights::place_weights;
use crate::proto::domi::ModelTaskDef;
use crate::proto::ge_ir::attr_def::list_value::ListValueType;
use crate::proto::ge_ir::attr_def::{ListValue, Value};
use crate::proto::ge_ir::{AttrDef, ModelDef, OpDef};

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
    let task = add_model_attrs(&mut model.attr, weights.len(), opts);
    if opts.compress_attrs {
        compress(&mut model);
    }
    let parts = [inout, model.encode_to_vec(), weights];
    single_model_om(&model.name, parts, task, dynamic, opts)
}

/// The model attributes [`build_om`] sets (`weight_size`, `memory_size`, `om_info_list`);
/// returns the TASK_INFO partition's bytes, if the options give one.
fn add_model_attrs(
    attrs: &mut BTreeMap<String, AttrDef>,
    weight_size: usize,
    opts: &OmBuildOptions,
) -> Option<Vec<u8>> {
    let task_bytes = opts.task_info.as_ref().map(Message::encode_to_vec);
    let task_len = task_bytes.as_ref().map_or(0, Vec::len) as i64;
    attrs.insert("weight_size".into(), int_attr(weight_size as i64));
    if let Some(m) = opts.memory_size {
        attrs.insert("memory_size".into(), int_attr(m as i64));
    }
    attrs.insert(
        "om_info_list".into(),
        AttrDef {
            value: Some(Value::List(Box::new(ListValue {
                i: vec![weight_size as i64, 0, 0, task_len, 0],
                val_type: ListValueType::VtListInt as i32,
                ..ListValue::default()
            }))),
        },
    );
    task_bytes
}

/// A single-model OM of its MODEL_INOUT_INFO, MODEL_DEF and WEIGHTS_DATA bytes, and
/// TASK_INFO when given.
fn single_model_om(
    name: &str,
    [inout, def, weights]: [Vec<u8>; 3],
    task: Option<Vec<u8>>,
    dynamic: bool,
    opts: &OmBuildOptions,
) -> Result<OmFile> {
    let mut partitions = vec![
        Partition::new(PartitionType::ModelInoutInfo, inout),
        Partition::new(PartitionType::ModelDef, def),
        Partition::new(PartitionType::WeightsData, weights),
    ];
    if let Some(t) = task {
        partitions.push(Partition::new(PartitionType::TaskInfo, t));
    }
    let mut header = OmHeader::default();
    header.set_name(name);
    header.set_platform_version(&opts.platform_version);
    header.is_unknow_model = u8::from(dynamic);
    let mut file = OmFile {
        header,
        models: vec![OmModel::new(partitions)],
    };
    file.finalize()?;
    Ok(file)
}

/// [`build_om`] of `ir::into_model_def(model)`, byte for byte, written straight from the
/// typed model ([`model_writer`]): the ops are encoded on the pool
/// with no GE IR op built, which on a large graph is several times faster and holds the
/// graph once.
pub fn build_om_from(model: ComputeModel, opts: &OmBuildOptions) -> Result<OmFile> {
    let graphs = ir::flatten(model.root, model.detached);
    let root = &graphs[0];
    // What `inout::graph_is_dynamic` reads of the root's GE IR ops.
    let dynamic = root.graph.has_dynamic_desc();
    let name = if opts.name.is_empty() {
        model.name
    } else {
        opts.name.clone()
    };
    // MODEL_INOUT_INFO reads the root's data and output ops, made as GE IR ops here.
    let nodes = &root.graph.nodes;
    let name_of = |i: usize| nodes[i].name.as_str();
    let inout_ops: Vec<(usize, OpDef)> = nodes
        .iter()
        .zip(&root.calls)
        .enumerate()
        .filter(|(_, (n, _))| InOutInfo::is_inout_op(&n.op_type))
        .map(|(i, (n, calls))| (i, ir::node_to_op(n.clone(), calls.clone(), &name_of)))
        .collect();
    let inout =
        InOutInfo::from_root_ops(inout_ops.iter().map(|(i, op)| (*i, op)), dynamic).to_bytes()?;
    let mut attrs = ir::attrs_to_proto(model.attrs);
    let compress = opts.compress_attrs && !attrs.contains_key(ATTR_OM_COMPRESS_VERSION);
    let (plan, placer) = Plan::new(&graphs, compress);
    let bodies: Vec<Vec<Vec<u8>>> = (0..graphs.len())
        .map(|g| model_writer::graph_body(&graphs, g, &plan))
        .collect();
    // The typed graphs are not wanted any more: they are freed on the pool while this
    // thread assembles the file (as much memory as the model).
    rayon::spawn(move || drop(graphs));
    let weights = placer.finish();
    let task = add_model_attrs(&mut attrs, weights.len(), opts);
    if let Some(dict) = plan.into_dictionary() {
        dict.store(&mut attrs);
    }
    // ModelDef: name 1, version 2, custom_version 3, graph 7, attr 11, attr_groups 12.
    let head = ModelDef {
        name: name.clone(),
        version: OM_PROTO_VERSION,
        custom_version: opts.platform_version.clone(),
        ..ModelDef::default()
    };
    let tail = ModelDef {
        attr: attrs,
        attr_groups: model.attr_groups,
        ..ModelDef::default()
    };
    let mut def = head.encode_to_vec();
    let body_len = |b: &Vec<Vec<u8>>| b.iter().map(Vec::len).sum::<usize>();
    def.reserve(bodies.iter().map(|b| 11 + body_len(b)).sum::<usize>() + tail.encoded_len());
    for body in &bodies {
        prost::encoding::encode_key(7, prost::encoding::WireType::LengthDelimited, &mut def);
        prost::encoding::encode_varint(body_len(body) as u64, &mut def);
        for piece in body {
            def.extend_from_slice(piece);
        }
    }
    drop(bodies);
    tail.encode(&mut def)
        .map_err(|e| OmError::graph(Place::new("model"), format!("encoding the ModelDef: {e}")))?;
    single_model_om(&name, [inout, def, weights], task, dynamic, opts)
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
    use crate::proto::ge_ir::attr_def;
    use crate::proto::ge_ir::{
        AttrGroups, GraphDef, NamedAttrs, ShapeDef, TensorDef, TensorDescriptor,
    };
    use proptest::prelude::*;

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

    /// [`build_om_from`] of a typed model against [`build_om`] of its GE IR, under every
    /// option that changes the bytes.
    fn assert_same_om(model: &ComputeModel, what: &str) {
        for compress_attrs in [true, false] {
            for extras in [false, true] {
                let opts = OmBuildOptions {
                    name: if extras {
                        "renamed".into()
                    } else {
                        String::new()
                    },
                    platform_version: if extras {
                        "Ascend310P3".into()
                    } else {
                        String::new()
                    },
                    compress_attrs,
                    memory_size: extras.then_some(1 << 20),
                    task_info: extras.then(|| testdata::task_def(3)),
                };
                let want = build_om(ir::to_model_def(model), &opts).unwrap();
                let got = build_om_from(model.clone(), &opts).unwrap();
                assert!(
                    got.to_bytes().unwrap() == want.to_bytes().unwrap(),
                    "{what}: compress {compress_attrs}, extras {extras}"
                );
            }
        }
    }

    /// Every model of the synthetic OMs and every ONNX fixture: weights shared and not,
    /// subgraphs, compressed and partitioned files, dynamic shapes, real models.
    #[test]
    fn the_typed_writer_writes_what_the_ge_ir_writer_writes() {
        let mut seen = 0;
        for (name, om) in testdata::all() {
            let file = crate::om::file::read(&om.to_bytes().unwrap(), &Default::default());
            for m in file.map(|f| f.models).unwrap_or_default() {
                assert_same_om(&m.model, &format!("{name}, model {}", m.index));
                seen += 1;
            }
        }
        let root = env!("CARGO_MANIFEST_DIR");
        let mut paths: Vec<String> = ["cnn_bn", "lstm", "loop_counter", "nested_if_weights"]
            .iter()
            .map(|m| format!("{root}/fixtures/models/{m}.onnx"))
            .collect();
        for m in ["crnn", "encoder", "lstm_speech", "mobilenet", "unet"] {
            paths.push(format!("{root}/fixtures/real_models/{m}/model.onnx"));
        }
        paths.push(format!("{root}/fixtures/fused_cnn/model.onnx"));
        for path in paths {
            let file =
                crate::om::file::read(&std::fs::read(&path).unwrap(), &Default::default()).unwrap();
            assert_same_om(&file.models[0].model, &path);
            seen += 1;
        }
        assert!(seen > 15, "{seen} models");
    }

    fn arb_bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            "[a-z_]{0,5}".prop_map(String::into_bytes),
            // Not UTF-8: the value dictionary holds text, so such strings share an entry.
            prop::collection::vec(any::<u8>(), 0..4),
        ]
    }

    fn arb_desc() -> impl Strategy<Value = TensorDescriptor> {
        (
            0..45i32,
            prop::option::of(prop::collection::vec(-2..40i64, 0..4)),
            prop::collection::btree_map("[a-c]{1,2}", any::<i64>().prop_map(int_attr), 0..3),
            any::<i64>(),
            any::<bool>(),
            "[A-Z]{0,3}",
        )
            .prop_map(|(dtype, dims, attr, n, b, s)| TensorDescriptor {
                name: s.clone(),
                dtype,
                shape: dims.map(|dim| ShapeDef { dim }),
                layout: s.clone(),
                attr,
                size: n,
                data_offset: n / 3,
                reuse_input: b,
                cmps_tab: s,
                device_type: if b { "NPU".into() } else { String::new() },
                ..TensorDescriptor::default()
            })
    }

    /// An attribute value of every kind GE IR has, typed or kept raw by the reader.
    fn arb_attr() -> impl Strategy<Value = AttrDef> {
        let v = |value| AttrDef { value: Some(value) };
        let list = |l: ListValue| AttrDef {
            value: Some(Value::List(Box::new(l))),
        };
        let typed = |vt: ListValueType| ListValue {
            val_type: vt as i32,
            ..ListValue::default()
        };
        prop_oneof![
            Just(AttrDef { value: None }),
            arb_bytes().prop_map(move |s| v(Value::S(s))),
            any::<i64>().prop_map(move |i| v(Value::I(i))),
            any::<f32>().prop_map(move |f| v(Value::F(f))),
            any::<bool>().prop_map(move |b| v(Value::B(b))),
            arb_bytes().prop_map(move |b| v(Value::Bt(b))),
            arb_bytes().prop_map(move |b| v(Value::Expression(b))),
            prop_oneof![Just(1i64), Just(9), Just(12345)].prop_map(move |d| v(Value::Dt(d))),
            prop::collection::vec(arb_bytes(), 0..3).prop_map(move |s| list(ListValue {
                s,
                ..typed(ListValueType::VtListString)
            })),
            prop::collection::vec(any::<i64>(), 0..3).prop_map(move |i| list(ListValue {
                i,
                ..typed(ListValueType::VtListInt)
            })),
            prop::collection::vec(any::<f32>(), 0..3).prop_map(move |f| list(ListValue {
                f,
                ..typed(ListValueType::VtListFloat)
            })),
            prop::collection::vec(any::<bool>(), 0..3).prop_map(move |b| list(ListValue {
                b,
                ..typed(ListValueType::VtListBool)
            })),
            prop::collection::vec(arb_bytes(), 0..3).prop_map(move |bt| list(ListValue {
                bt,
                ..typed(ListValueType::VtListBytes)
            })),
            prop::collection::vec(0..40i64, 0..3).prop_map(move |dt| list(ListValue {
                dt,
                ..typed(ListValueType::VtListDataType)
            })),
            prop::collection::vec(arb_desc(), 0..2).prop_map(move |td| list(ListValue {
                td,
                ..typed(ListValueType::VtListTensorDesc)
            })),
            (arb_desc(), arb_bytes()).prop_map(move |(d, data)| list(ListValue {
                t: vec![TensorDef {
                    desc: Some(d),
                    data: data.into()
                }],
                ..typed(ListValueType::VtListTensor)
            })),
            Just(list(ListValue {
                g: vec![GraphDef {
                    name: "inner".into(),
                    ..GraphDef::default()
                }],
                ..typed(ListValueType::VtListGraph)
            })),
            Just(list(ListValue {
                na: vec![NamedAttrs {
                    name: "na".into(),
                    attr: [("k".to_string(), int_attr(3))].into(),
                }],
                ..typed(ListValueType::VtListNamedAttrs)
            })),
            Just(list(typed(ListValueType::VtListNone))),
            // Raw lists: strings without a type, and two fields at once.
            prop::collection::vec(arb_bytes(), 1..3).prop_map(move |s| list(ListValue {
                s,
                ..ListValue::default()
            })),
            Just(list(ListValue {
                s: vec![b"a".to_vec()],
                i: vec![1],
                val_type: ListValueType::VtListString as i32,
                ..ListValue::default()
            })),
            arb_desc().prop_map(move |d| v(Value::Td(Box::new(d)))),
            (arb_desc(), arb_bytes()).prop_map(move |(d, data)| v(Value::T(Box::new(TensorDef {
                desc: Some(d),
                data: data.into()
            })))),
            Just(v(Value::Func(Box::new(NamedAttrs {
                name: "f".into(),
                attr: [("s".to_string(), v(Value::S(b"x".to_vec())))].into(),
            })))),
            Just(v(Value::G(Box::new(GraphDef {
                name: "g".into(),
                ..GraphDef::default()
            })))),
            prop::collection::vec(prop::collection::vec(any::<i64>(), 0..3), 0..3).prop_map(
                move |l| v(Value::ListListInt(Box::new(attr_def::ListListInt {
                    list_list_i: l
                        .into_iter()
                        .map(|list_i| attr_def::list_list_int::ListInt { list_i })
                        .collect()
                })))
            ),
            prop::collection::vec(prop::collection::vec(any::<f32>(), 0..3), 0..3).prop_map(
                move |l| v(Value::ListListFloat(Box::new(attr_def::ListListFloat {
                    list_list_f: l
                        .into_iter()
                        .map(|list_f| attr_def::list_list_float::ListFloat { list_f })
                        .collect()
                })))
            ),
        ]
    }

    /// Keys that meet GE's special cases: names it deletes or renames, an empty key.
    fn arb_key() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-d]{1,2}",
            1 => Just(String::new()),
            1 => Just("_op_slice_info".to_string()),
            1 => Just("_kernelname".to_string()),
            1 => Just("call_1_kernelname".to_string()),
            1 => Just("add_atomic_kernelname".to_string()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        /// Attributes of every kind on ops and descriptors, the untyped fields of both,
        /// on a model with subgraphs, a detached graph and shared weights.
        #[test]
        fn the_typed_writer_agrees_on_any_attributes(
            attrs in prop::collection::vec(
                prop::collection::btree_map(arb_key(), arb_attr(), 0..4), 1..12),
            rest in prop::collection::vec((any::<i64>(), "[a-z]{0,3}", any::<bool>()), 1..4),
            shared_desc_attrs in any::<bool>(),
        ) {
            let (mut def, subs) = testdata::dynamic_root_models();
            let mut detached = testdata::model_def("detached").graph.remove(0);
            // An unconnected input and a control edge.
            let add = detached.op.iter_mut().find(|op| op.name == "add").unwrap();
            add.input = vec!["x:0".into(), "c1:0".into(), String::new(), "y:-1".into()];
            def.graph.push(detached);
            let mut slots = Vec::new();
            for (g, graph) in def.graph.iter().enumerate() {
                for (o, op) in graph.op.iter().enumerate() {
                    slots.push((g, o, None));
                    for d in 0..op.input_desc.len() + op.output_desc.len() {
                        slots.push((g, o, Some(d)));
                    }
                }
            }
            for (i, map) in attrs.into_iter().enumerate() {
                let (g, o, d) = slots[(i * 7) % slots.len()];
                let op = &mut def.graph[g].op[o];
                let target = match d {
                    None => &mut op.attr,
                    Some(d) if d < op.input_desc.len() => &mut op.input_desc[d].attr,
                    Some(d) => &mut op.output_desc[d - op.input_desc.len()].attr,
                };
                target.extend(map);
            }
            if shared_desc_attrs {
                // The same attributes on every descriptor, as an imported model has them.
                let common = def.graph[0].op[0].output_desc[0].attr.clone();
                for g in &mut def.graph {
                    for op in &mut g.op {
                        for d in op.input_desc.iter_mut().chain(op.output_desc.iter_mut()) {
                            d.attr = common.clone();
                        }
                    }
                }
            }
            for (i, (n, s, b)) in rest.into_iter().enumerate() {
                let g = i % def.graph.len();
                let op = &mut def.graph[g].op[i % 2];
                op.stream_id = n;
                op.has_out_attr = b;
                op.src_name = vec![s.clone()];
                op.src_index = vec![n, -1];
                op.workspace_bytes = vec![n];
                op.is_input_const = vec![b, !b];
                op.attr_groups = Some(AttrGroups::default());
                if let Some(d) = op.output_desc.first_mut() {
                    d.real_dim_cnt = n;
                    d.cmps_tab = s;
                    d.dtype = 99;
                    d.has_out_attr = b;
                }
            }
            drop(subs);
            let model = ir::from_model_def(def).unwrap();
            assert_same_om(&model, "generated");
        }
    }

    #[test]
    fn empty_model_is_an_error() {
        let e = build_om(ModelDef::default(), &OmBuildOptions::default()).unwrap_err();
        assert_eq!(e.to_string(), "model: model has no graph");
    }
}
