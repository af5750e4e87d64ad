//! The models of one OM together: a dynamic root model whose root holds copies of its
//! subgraphs, an LLM pipeline whose root names stages compiled as models of their own, a
//! subgraph called from two nodes, and references no model answers. Each model reads,
//! lowers with its sub-models linked in, and runs to the values a direct computation
//! gives.

use rt2::exec::ExecuteGraph;
use rt2::exec::runtime::{ExecutorOptions, ModelV2Executor, ops_without_compute};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ModelFile, ReadOptions, read};
use rt2::om::root_model::{Relation, link, relations};
use rt2::om::testdata;
use rt2::ops::{DType, HostTensor, OpRegistry};

fn read_om(om: &rt2::om::container::OmFile) -> ModelFile {
    read(&om.to_bytes().unwrap(), &ReadOptions::default()).unwrap()
}

fn lowered(file: &ModelFile, index: usize) -> ExecuteGraph {
    let m = link(&file.models, index).unwrap_or_else(|e| panic!("model {index}: {e}"));
    lower(&m, &LowerOptions::default()).unwrap_or_else(|e| panic!("model {index}: {e}"))
}

/// The one output of running `eg` on `x` (float32 `[2, 4]`).
fn run(eg: &ExecuteGraph, x: &[f32]) -> Vec<f32> {
    let device = Device::new(DeviceConfig::default());
    let mut ex = ModelV2Executor::create(eg, &device, ExecutorOptions::default()).unwrap();
    ex.load().unwrap();
    let input = HostTensor {
        dtype: DType::F32,
        shape: vec![2, 4],
        data: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let mut out = Vec::new();
    ex.execute_sync(&[&input], &mut out).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].dtype, DType::F32);
    assert_eq!(out[0].shape, [2, 4]);
    out[0]
        .data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn x() -> Vec<f32> {
    vec![-2.0, -0.5, 0.0, 0.5, 1.0, 1.5, -3.0, 4.0]
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "[{i}]: {g} vs {w}"
        );
    }
}

fn sites(r: &Relation) -> Vec<(usize, String, bool)> {
    match r {
        Relation::Submodel(s) => s
            .iter()
            .map(|s| (s.model, format!("{}/{}", s.graph, s.node), s.inline))
            .collect(),
        other => panic!("not a sub-model: {other:?}"),
    }
}

#[test]
fn every_model_of_a_dynamic_root_om_lowers_with_its_relation_to_the_root() {
    let file = read_om(&testdata::dynamic_root_om());
    let om = file.om.as_ref().unwrap();
    assert_eq!((om.header.model_num, om.header.is_unknow_model), (3, 1));
    let names: Vec<&str> = file
        .models
        .iter()
        .map(|m| m.model.root.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["dyn_root", "dyn_root_sub_1_know", "dyn_root_sub_2_unknow"]
    );
    let rel = relations(&file.models);
    assert_eq!(rel[0], Relation::Root);
    assert_eq!(sites(&rel[1]), [(0, "dyn_root/call_1".to_string(), true)]);
    assert_eq!(sites(&rel[2]), [(0, "dyn_root/call_2".to_string(), true)]);
    let counts: Vec<usize> = file
        .models
        .iter()
        .map(|m| m.model.root.total_nodes())
        .collect();
    assert_eq!(counts, [11, 3, 4]);

    let c: Vec<f32> = (0..8).map(|i| i as f32 + 0.5).collect();
    let relu: Vec<f32> = x().iter().map(|v| v.max(0.0)).collect();
    let want = [
        relu.iter().zip(&c).map(|(r, c)| r + c).collect::<Vec<_>>(),
        relu.clone(),
        x().iter().zip(&c).map(|(v, c)| v + c).collect(),
    ];
    for (i, want) in want.iter().enumerate() {
        let eg = lowered(&file, i);
        assert!(ops_without_compute(&eg, &OpRegistry::new()).is_empty());
        close(&run(&eg, &x()), want);
    }
}

/// GE compresses a partitioned model's sub-models with the root model's dictionary and
/// stores it on the root only; each sub-model reads with its real attribute names.
#[test]
fn a_compressed_dynamic_root_om_reads_every_model_with_its_real_attribute_names() {
    let om = testdata::compressed_dynamic_root_om();
    let raw = om.models[1].raw_model_def().unwrap().unwrap();
    assert!(!raw.attr.contains_key("attr_name_enum"));
    assert!(raw.graph[0].op[0].attr.keys().all(|k| k.starts_with('\0')));
    let file = read_om(&om);
    for (i, graph) in [(0, "dyn_root_sub_1_know"), (1, "dyn_root_sub_1_know")] {
        let m = &file.models[i].model;
        let mut g = None;
        m.root.walk(&mut |sub| {
            if sub.name == graph {
                g = Some(sub.clone());
            }
        });
        let g = g.unwrap_or_else(|| panic!("model {i} has no {graph}"));
        let x = &g.nodes[g.find("x").unwrap().index()];
        let keys: Vec<&str> = x.attrs.keys().map(String::as_str).collect();
        assert_eq!(keys, ["_parent_node_index", "index"], "model {i}");
        let leaky = &g.nodes[g.find("relu").unwrap().index()];
        assert_eq!(
            leaky.attr("negative_slope"),
            Some(&rt2::om::graph::AttrValue::Float(testdata::LEAKY_SLOPE))
        );
        assert_eq!(
            leaky.input_descs[0].attrs.keys().collect::<Vec<_>>(),
            ["origin_format"]
        );
    }
    let c: Vec<f32> = (0..8).map(|i| i as f32 + 0.5).collect();
    let leaky: Vec<f32> = x()
        .iter()
        .map(|&v| {
            if v < 0.0 {
                v * testdata::LEAKY_SLOPE
            } else {
                v
            }
        })
        .collect();
    let want = [
        leaky.iter().zip(&c).map(|(r, c)| r + c).collect::<Vec<_>>(),
        leaky.clone(),
        x().iter().zip(&c).map(|(v, c)| v + c).collect(),
    ];
    for (i, want) in want.iter().enumerate() {
        close(&run(&lowered(&file, i), &x()), want);
    }
}

fn pipeline_reference(x: &[f32]) -> Vec<f32> {
    let [w0, b0, w1, b1] = testdata::pipeline_weights();
    let layer = |x: &[f32], w: &[f32], b: &[f32], relu: bool| -> Vec<f32> {
        let mut y = vec![0f32; 8];
        for r in 0..2 {
            for c in 0..4 {
                let mut acc = b[c];
                for k in 0..4 {
                    acc += x[r * 4 + k] * w[k * 4 + c];
                }
                y[r * 4 + c] = if relu { acc.max(0.0) } else { acc };
            }
        }
        y
    };
    layer(&layer(x, &w0, &b0, true), &w1, &b1, false)
}

#[test]
fn a_pipeline_om_whose_root_names_its_stage_models_reads_lowers_and_runs() {
    let file = read_om(&testdata::pipeline_om());
    assert_eq!(file.models.len(), 3);
    let root = &file.models[0].model.root;
    assert!(
        root.nodes[1].subgraphs[0].external,
        "the root names the stages only"
    );
    let rel = relations(&file.models);
    assert_eq!(
        sites(&rel[1]),
        [(0, "llm/PartitionedCall_0".to_string(), false)]
    );
    assert_eq!(
        sites(&rel[2]),
        [(0, "llm/PartitionedCall_1".to_string(), false)]
    );

    let eg = lowered(&file, 0);
    assert!(ops_without_compute(&eg, &OpRegistry::new()).is_empty());
    close(&run(&eg, &x()), &pipeline_reference(&x()));
    // A stage alone is a model of its own.
    let [w0, b0, ..] = testdata::pipeline_weights();
    let eg0 = lowered(&file, 1);
    let got = run(&eg0, &x());
    let mut want = vec![0f32; 8];
    for r in 0..2 {
        for c in 0..4 {
            let acc: f32 = b0[c] + (0..4).map(|k| x()[r * 4 + k] * w0[k * 4 + c]).sum::<f32>();
            want[r * 4 + c] = acc.max(0.0);
        }
    }
    close(&got, &want);
}

#[test]
fn a_subgraph_two_calls_name_is_inlined_at_each() {
    let (mut root, subs) = testdata::dynamic_root_models();
    // call_2 calls the Relu subgraph as call_1 does; the Add subgraph is left detached.
    root.graph[0].op[2].subgraph_name = vec!["dyn_root_sub_1_know".into()];
    let file = read_om(&testdata::root_om("twice", root, subs));
    let rel = relations(&file.models);
    assert_eq!(
        sites(&rel[1]),
        [
            (0, "dyn_root/call_1".to_string(), true),
            (0, "dyn_root/call_2".to_string(), true)
        ]
    );
    let relu: Vec<f32> = x().iter().map(|v| v.max(0.0)).collect();
    close(&run(&lowered(&file, 0), &x()), &relu);
}

#[test]
fn a_name_no_model_answers_is_a_read_error_naming_model_graph_and_node() {
    let (mut root, subs) = testdata::pipeline_models();
    root.graph[0].op[2].subgraph_name = vec!["llm_sub_9".into()];
    let bytes = testdata::root_om("llm", root, subs).to_bytes().unwrap();
    let e = read(&bytes, &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "model 0: graph \"llm\": node \"PartitionedCall_1\": subgraph \"llm_sub_9\" is \
         neither in the model nor a model of the file"
    );
}

#[test]
fn a_lone_graph_naming_a_model_it_lacks_lowers_the_call_as_a_launch_of_that_model() {
    let (root, _) = testdata::pipeline_models();
    let m = rt2::om::ir::from_model_def(root).unwrap();
    let eg = lower(&m, &LowerOptions::default()).unwrap();
    let missing: Vec<(String, String)> = ops_without_compute(&eg, &OpRegistry::new())
        .into_iter()
        .map(|o| (o.node, o.op_type))
        .collect();
    assert_eq!(
        missing,
        [
            (
                "PartitionedCall_0".to_string(),
                "PartitionedCall".to_string()
            ),
            (
                "PartitionedCall_1".to_string(),
                "PartitionedCall".to_string()
            )
        ]
    );
}
