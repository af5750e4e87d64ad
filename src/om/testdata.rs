//! Synthetic models for tests and benches: a small ModelDef and OM files of each container
//! shape rt2 reads (multi-model dynamic, flow, legacy 12-byte tables, attribute-compressed,
//! bundle),
//! all built in code so no binary fixture has to be checked in.
//!
//! Must stay deterministic: the same call returns the same bytes.

use prost::Message;

use super::container::{OmFile, OmHeader, OmModel, Partition, PartitionType, TableFormat};
use super::inout::InOutInfo;
use super::kernel_store::{self, KernelItem};
use super::om_writer::{OmBuildOptions, build_om, build_root_om};
use super::weights::place_weights;
use crate::proto::domi::{ModelTaskDef, TaskDef};
use crate::proto::flow::{FlowModelDef, SubmodelDef};
use crate::proto::ge_ir::attr_def::Value;
use crate::proto::ge_ir::{
    AttrDef, GraphDef, ModelDef, OpDef, ShapeDef, TensorDef, TensorDescriptor,
};

fn desc(dtype: i32, dims: &[i64]) -> TensorDescriptor {
    let mut td = TensorDescriptor {
        dtype,
        shape: Some(ShapeDef { dim: dims.to_vec() }),
        layout: "ND".into(),
        device_type: "NPU".into(),
        ..TensorDescriptor::default()
    };
    td.attr.insert(
        "origin_format".into(),
        AttrDef {
            value: Some(Value::S(b"ND".to_vec())),
        },
    );
    td
}

fn op(name: &str, ty: &str, inputs: &[&str]) -> OpDef {
    OpDef {
        name: name.into(),
        r#type: ty.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        ..OpDef::default()
    }
}

fn constant(name: &str, dtype: i32, dims: &[i64], data: Vec<u8>) -> OpDef {
    let mut o = op(name, "Const", &[]);
    let t = TensorDef {
        desc: Some(desc(dtype, dims)),
        data: data.into(),
    };
    o.attr.insert(
        "value".into(),
        AttrDef {
            value: Some(Value::T(Box::new(t))),
        },
    );
    o.output_desc.push(desc(dtype, dims));
    o
}

/// A small graph named `name`: Data x, Data y (float32 `[2, 4]`), three Consts (two with
/// the same 32 bytes, one int64 `[1]` = 1), Add(x, c1) and a NetOutput of the Add.
pub fn model_def(name: &str) -> ModelDef {
    const F32: i32 = 1;
    const I64: i32 = 8;
    let mut ops = Vec::new();
    for (i, n) in ["x", "y"].iter().enumerate() {
        let mut d = op(n, "Data", &[]);
        d.attr.insert(
            "index".into(),
            AttrDef {
                value: Some(Value::I(i as i64)),
            },
        );
        let mut td = desc(F32, &[2, 4]);
        td.size = 32;
        d.input_desc.push(td.clone());
        d.output_desc.push(td);
        ops.push(d);
    }
    let bytes: Vec<u8> = (0..8).flat_map(|i| (i as f32).to_le_bytes()).collect();
    ops.push(constant("c1", F32, &[2, 4], bytes.clone()));
    ops.push(constant("c2", F32, &[2, 4], bytes));
    ops.push(constant("c3", I64, &[1], 1i64.to_le_bytes().to_vec()));
    let mut add = op("add", "Add", &["x:0", "c1:0"]);
    add.input_desc = vec![desc(F32, &[2, 4]), desc(F32, &[2, 4])];
    add.output_desc = vec![desc(F32, &[2, 4])];
    ops.push(add);
    let mut out = op("Node_Output", "NetOutput", &["add:0"]);
    out.input_desc.push(desc(F32, &[2, 4]));
    ops.push(out);
    ModelDef {
        name: name.into(),
        version: 2,
        graph: vec![GraphDef {
            name: name.into(),
            input: vec!["x:0".into(), "y:0".into()],
            output: vec!["add:0".into()],
            op: ops,
            ..GraphDef::default()
        }],
        ..ModelDef::default()
    }
}

/// A TASK_INFO with `n` kernel tasks but the last, which is an EVENT_RECORD.
pub fn task_def(n: usize) -> ModelTaskDef {
    ModelTaskDef {
        task: (0..n)
            .map(|i| TaskDef {
                id: i as u32,
                r#type: u32::from(i + 1 == n),
                ..TaskDef::default()
            })
            .collect(),
        stream_num: 1,
        event_num: 1,
        memory_size: 1024,
        weight_size: 2048,
        ..ModelTaskDef::default()
    }
}

/// A dynamic root model as `SaveToOmRootModel` writes it: `model_num` 3,
/// `is_unknow_model` 1; model 0 holds MODEL_INOUT_INFO and the root MODEL_DEF, models 1 and
/// 2 (`sub_1`, `sub_2`) hold MODEL_DEF, WEIGHTS_DATA, TBE_KERNELS and TASK_INFO.
pub fn multi_model_dynamic() -> OmFile {
    let root = model_def("dyn");
    let inout = InOutInfo::from_model_def(&root)
        .to_bytes()
        .unwrap_or_default();
    let mut models = vec![OmModel::new(vec![
        Partition::new(PartitionType::ModelInoutInfo, inout),
        Partition::new(PartitionType::ModelDef, root.encode_to_vec()),
    ])];
    for i in 1..=2 {
        let mut sub = model_def(&format!("sub_{i}"));
        let weights = place_weights(&mut sub);
        let kernels = kernel_store::write(
            &[KernelItem::new(format!("te_add_{i}"), vec![0xAB; 16])],
            kernel_store::KERNEL_ITEM_MAGIC,
        )
        .unwrap_or_default();
        models.push(OmModel::new(vec![
            Partition::new(PartitionType::ModelDef, sub.encode_to_vec()),
            Partition::new(PartitionType::WeightsData, weights),
            Partition::new(PartitionType::TbeKernels, kernels),
            Partition::new(PartitionType::TaskInfo, task_def(3).encode_to_vec()),
        ]));
    }
    let mut header = OmHeader {
        is_unknow_model: 1,
        ..OmHeader::default()
    };
    header.set_name("dyn");
    header.set_platform_version("Ascend910B1");
    finalized(OmFile { header, models })
}

fn finalized(mut f: OmFile) -> OmFile {
    // finalize fails only on sizes beyond 4 GiB / 2^64, which these fixtures never reach.
    let _ = f.finalize();
    f
}

fn int(v: i64) -> AttrDef {
    AttrDef {
        value: Some(Value::I(v)),
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A subgraph as GE's partitioners build one: Data `x` (float32 `dims`, `index` 0,
/// `_parent_node_index` 0), the `body` ops fed by `x:0` through `last` (the name of the
/// body's last op), and a NetOutput whose input descriptor carries `_parent_node_index` 0.
fn partition_graph(name: &str, dims: &[i64], body: Vec<OpDef>, last: &str) -> GraphDef {
    const F32: i32 = 1;
    let mut x = op("x", "Data", &[]);
    x.attr.insert("index".into(), int(0));
    x.attr.insert("_parent_node_index".into(), int(0));
    x.input_desc.push(desc(F32, dims));
    x.output_desc.push(desc(F32, dims));
    let mut out = op("out", "NetOutput", &[&format!("{last}:0")]);
    let mut od = desc(F32, dims);
    od.attr.insert("_parent_node_index".into(), int(0));
    out.input_desc.push(od);
    let mut ops = vec![x];
    ops.extend(body);
    ops.push(out);
    GraphDef {
        name: name.into(),
        input: vec!["x:0".into()],
        output: vec![format!("{last}:0")],
        op: ops,
        ..GraphDef::default()
    }
}

/// A unary float32 op `name` of type `ty` on `input`, shaped `dims`.
fn unary(name: &str, ty: &str, input: &str, dims: &[i64]) -> OpDef {
    let mut o = op(name, ty, &[input]);
    o.input_desc.push(desc(1, dims));
    o.output_desc.push(desc(1, dims));
    o
}

/// A binary float32 op: inputs shaped `a` and `b`, output `out`.
fn binary(name: &str, ty: &str, inputs: [&str; 2], dims: [&[i64]; 3]) -> OpDef {
    let mut o = op(name, ty, &inputs);
    o.input_desc = vec![desc(1, dims[0]), desc(1, dims[1])];
    o.output_desc.push(desc(1, dims[2]));
    o
}

/// A root graph as a partitioner leaves it: Data `x` (float32 `dims`, `index` 0), one
/// `PartitionedCall` per entry of `calls` (node name, subgraph instance name), chained,
/// and a NetOutput of the last; graph attribute `flag` set to true.
fn root_graph(name: &str, dims: &[i64], calls: &[(&str, &str)], flag: &str) -> GraphDef {
    let mut x = op("x", "Data", &[]);
    x.attr.insert("index".into(), int(0));
    x.input_desc.push(desc(1, dims));
    x.output_desc.push(desc(1, dims));
    let mut ops = vec![x];
    let mut prev = "x".to_string();
    for (node, sub) in calls {
        let mut c = unary(node, "PartitionedCall", &format!("{prev}:0"), dims);
        c.subgraph_name.push((*sub).into());
        ops.push(c);
        prev = (*node).to_string();
    }
    let mut out = op("Node_Output", "NetOutput", &[&format!("{prev}:0")]);
    out.input_desc.push(desc(1, dims));
    ops.push(out);
    let mut g = GraphDef {
        name: name.into(),
        input: vec!["x:0".into()],
        output: vec![format!("{prev}:0")],
        op: ops,
        ..GraphDef::default()
    };
    g.attr.insert(
        flag.into(),
        AttrDef {
            value: Some(Value::B(true)),
        },
    );
    g
}

/// The graphs of a dynamic-shape partitioned model as GE's `DynamicShapePartitioner`
/// names them: root `dyn_root` (`_dynamic_shape_partitioned`) with Data `x` (float32
/// `[2, 4]`) -> `call_1` -> `call_2` -> NetOutput; `call_1` calls `dyn_root_sub_1_know`
/// (Relu), `call_2` calls `dyn_root_sub_2_unknow` (Add of a Const `c` = 0.5, 1.5, ...).
/// The root `ModelDef` holds its copies of both subgraphs (GE serializes a root with its
/// subgraphs); the two sub-models hold one each, in `std::map` order of their names.
pub fn dynamic_root_models() -> (ModelDef, Vec<ModelDef>) {
    let dims: &[i64] = &[2, 4];
    let c: Vec<f32> = (0..8).map(|i| i as f32 + 0.5).collect();
    let subs = vec![
        partition_graph(
            "dyn_root_sub_1_know",
            dims,
            vec![unary("relu", "Relu", "x:0", dims)],
            "relu",
        ),
        partition_graph(
            "dyn_root_sub_2_unknow",
            dims,
            vec![
                constant("c", 1, dims, f32_bytes(&c)),
                binary("add", "Add", ["x:0", "c:0"], [dims, dims, dims]),
            ],
            "add",
        ),
    ];
    let root = root_graph(
        "dyn_root",
        dims,
        &[
            ("call_1", "dyn_root_sub_1_know"),
            ("call_2", "dyn_root_sub_2_unknow"),
        ],
        "_dynamic_shape_partitioned",
    );
    let model = |name: &str, graph: Vec<GraphDef>| ModelDef {
        name: name.into(),
        version: 2,
        graph,
        ..ModelDef::default()
    };
    let mut root_graphs = vec![root];
    root_graphs.extend(subs.iter().cloned());
    let submodels = subs
        .into_iter()
        .map(|g| model(&g.name.clone(), vec![g]))
        .collect();
    (model("dyn_root", root_graphs), submodels)
}

/// [`dynamic_root_models`] as an OM: `model_num` 3, `is_unknow_model` 1.
pub fn dynamic_root_om() -> OmFile {
    let (root, subs) = dynamic_root_models();
    root_om("dyn_root", root, subs)
}

/// The weights of [`pipeline_om`]'s two stages: `w_0` `[4, 4]`, `b_0` `[4]`, `w_1`
/// `[4, 4]`, `b_1` `[4]`, row-major.
pub fn pipeline_weights() -> [Vec<f32>; 4] {
    let w = |k: f32| (0..16).map(|i| ((i % 5) as f32 - 2.0) * 0.25 + k).collect();
    [
        w(0.0),
        vec![0.5, -1.0, 0.25, 0.0],
        w(0.125),
        vec![-0.5, 1.0, 0.0, 2.0],
    ]
}

/// An LLM pipeline split as GE's `PipelinePartitioner` leaves it, compiled as one
/// model per stage: the root `llm` (`_pipeline_partitioned`) is Data `x` (float32
/// `[2, 4]`) -> `PartitionedCall_0` (`llm_sub_0`) -> `PartitionedCall_1` (`llm_sub_1`) ->
/// NetOutput, and its `ModelDef` holds the root graph only: the stages are models 1 and 2,
/// found by their graph names. Stage k is `Relu?(MatMulV2(x, w_k) + b_k)` (Relu on stage
/// 0 only), its Consts named `<const>_<stage>` as the partitioner names the copies it
/// makes of a Const several stages read.
pub fn pipeline_om() -> OmFile {
    let (root, subs) = pipeline_models();
    root_om("llm", root, subs)
}

/// The negative slope of [`compressed_dynamic_root_om`]'s LeakyRelu.
pub const LEAKY_SLOPE: f32 = 0.25;

/// [`dynamic_root_models`] with the Relu of `dyn_root_sub_1_know` (the root's copy and
/// the sub-model's) made a LeakyRelu of `negative_slope` [`LEAKY_SLOPE`], written with
/// attribute names compressed as GE writes a partitioned model: one dictionary, on the
/// root model; the sub-models' names compressed with it and no dictionary of their own.
pub fn compressed_dynamic_root_om() -> OmFile {
    let (mut root, mut subs) = dynamic_root_models();
    for g in root
        .graph
        .iter_mut()
        .chain(subs.iter_mut().flat_map(|m| &mut m.graph))
    {
        for o in g.op.iter_mut().filter(|o| o.r#type == "Relu") {
            o.r#type = "LeakyRelu".into();
            o.attr.insert(
                "negative_slope".into(),
                AttrDef {
                    value: Some(Value::F(LEAKY_SLOPE)),
                },
            );
        }
    }
    root_om_with("dyn_root", root, subs, true)
}

/// A dynamic root OM of `root` and `subs` named `name`, attribute names uncompressed;
/// empty (no models) if the writer refuses the models.
pub fn root_om(name: &str, root: ModelDef, subs: Vec<ModelDef>) -> OmFile {
    root_om_with(name, root, subs, false)
}

fn root_om_with(name: &str, root: ModelDef, subs: Vec<ModelDef>, compress: bool) -> OmFile {
    let opts = OmBuildOptions {
        name: name.into(),
        platform_version: "Ascend910B1".into(),
        compress_attrs: compress,
        ..OmBuildOptions::default()
    };
    build_root_om(root, subs, &opts).unwrap_or_else(|_| OmFile {
        header: OmHeader::default(),
        models: Vec::new(),
    })
}

/// The models of [`pipeline_om`]: the root, then the two stages.
pub fn pipeline_models() -> (ModelDef, Vec<ModelDef>) {
    let dims: &[i64] = &[2, 4];
    let [w0, b0, w1, b1] = pipeline_weights();
    let stage = |k: usize, w: &[f32], b: &[f32], relu: bool| {
        let wn = format!("w_{k}");
        let bn = format!("b_{k}");
        let mut body = vec![
            constant(&wn, 1, &[4, 4], f32_bytes(w)),
            constant(&bn, 1, &[4], f32_bytes(b)),
            binary(
                "mm",
                "MatMulV2",
                ["x:0", &format!("{wn}:0")],
                [dims, &[4, 4], dims],
            ),
            binary(
                "bias",
                "Add",
                ["mm:0", &format!("{bn}:0")],
                [dims, &[4], dims],
            ),
        ];
        if relu {
            body.push(unary("act", "Relu", "bias:0", dims));
        }
        let last = if relu { "act" } else { "bias" };
        let g = partition_graph(&format!("llm_sub_{k}"), dims, body, last);
        ModelDef {
            name: g.name.clone(),
            version: 2,
            graph: vec![g],
            ..ModelDef::default()
        }
    };
    let root = ModelDef {
        name: "llm".into(),
        version: 2,
        graph: vec![root_graph(
            "llm",
            dims,
            &[
                ("PartitionedCall_0", "llm_sub_0"),
                ("PartitionedCall_1", "llm_sub_1"),
            ],
            "_pipeline_partitioned",
        )],
        ..ModelDef::default()
    };
    (
        root,
        vec![stage(0, &w0, &b0, true), stage(1, &w1, &b1, false)],
    )
}

/// A flow model (`modeltype` 3): MODEL_DEF, FLOW_MODEL naming two submodels, and one
/// FLOW_SUBMODEL each holding a complete nested OM.
pub fn flow_om() -> OmFile {
    let names = ["sub_a", "sub_b"];
    let flow = FlowModelDef {
        model_name: "flow".into(),
        submodel_name: names.iter().map(|s| s.to_string()).collect(),
        ..FlowModelDef::default()
    };
    let mut partitions = vec![
        Partition::new(PartitionType::ModelDef, model_def("flow").encode_to_vec()),
        Partition::new(PartitionType::FlowModel, flow.encode_to_vec()),
    ];
    for n in names {
        let opts = OmBuildOptions {
            name: n.into(),
            compress_attrs: false,
            ..OmBuildOptions::default()
        };
        let om_data = build_om(model_def(n), &opts)
            .and_then(|f| f.to_bytes())
            .unwrap_or_default();
        let sub = SubmodelDef {
            model_name: n.into(),
            model_type: "npu".into(),
            om_data,
            ..SubmodelDef::default()
        };
        partitions.push(Partition::new(
            PartitionType::FlowSubmodel,
            sub.encode_to_vec(),
        ));
    }
    let mut header = OmHeader {
        modeltype: 3,
        ..OmHeader::default()
    };
    header.set_name("flow");
    finalized(OmFile {
        header,
        models: vec![OmModel::new(partitions)],
    })
}

/// An old-style OM: `model_length` 0, so readers use 12-byte legacy tables; MODEL_DEF,
/// WEIGHTS_DATA and TASK_INFO.
pub fn legacy_om() -> OmFile {
    let mut m = model_def("legacy");
    let weights = place_weights(&mut m);
    let model = OmModel {
        table_format: TableFormat::Legacy,
        partitions: vec![
            Partition::new(PartitionType::ModelDef, m.encode_to_vec()),
            Partition::new(PartitionType::WeightsData, weights),
            Partition::new(PartitionType::TaskInfo, task_def(2).encode_to_vec()),
        ],
        table_pad: 0,
    };
    let mut header = OmHeader {
        om_ir_version: 0,
        ..OmHeader::default()
    };
    header.set_name("legacy");
    finalized(OmFile {
        header,
        models: vec![model],
    })
}

/// A single-model OM from [`build_om`] with attribute compression on.
pub fn compressed_om() -> OmFile {
    let opts = OmBuildOptions {
        name: "comp".into(),
        ..OmBuildOptions::default()
    };
    build_om(model_def("comp"), &opts).unwrap_or_else(|_| legacy_om())
}

/// A bundle (`modeltype` 5) as `SaveBundleModelBufferToMem` writes it: one table with a
/// BUNDLE_MODEL_VAR_INFO (u64 var size 4096) and one BUNDLE_MODEL_INFO per nested OM.
pub fn bundle_om() -> OmFile {
    let mut partitions = vec![Partition::new(
        PartitionType::BundleModelVarInfo,
        4096u64.to_le_bytes().to_vec(),
    )];
    for n in ["b1", "b2"] {
        let opts = OmBuildOptions {
            name: n.into(),
            ..OmBuildOptions::default()
        };
        let bytes = build_om(model_def(n), &opts)
            .and_then(|f| f.to_bytes())
            .unwrap_or_default();
        partitions.push(Partition::new(PartitionType::BundleModelInfo, bytes));
    }
    let mut header = OmHeader {
        modeltype: 5,
        ..OmHeader::default()
    };
    header.set_name("bundle");
    finalized(OmFile {
        header,
        models: vec![OmModel::new(partitions)],
    })
}

/// Every OM fixture with its name.
pub fn all() -> Vec<(&'static str, OmFile)> {
    vec![
        ("multi_model_dynamic", multi_model_dynamic()),
        ("flow", flow_om()),
        ("legacy", legacy_om()),
        ("compressed", compressed_om()),
        ("bundle", bundle_om()),
    ]
}
