//! Shape inference against ground truth: each ONNX backend node test model declares its
//! output types and shapes, so the op registry, run on the model's input shapes (and the
//! values of its constant inputs), must give them.
//!
//! The data comes with the onnx 1.22.0 wheel (`tools/pyenv.sh` installs it); set
//! `RT2_ONNX_NODE_DATA` to its `onnx/backend/test/data/node` folder. Without it the test
//! says so and checks nothing.

use std::collections::BTreeMap;
use std::path::Path;

use rt2::lower::attrs;
use rt2::om::file::{self, ReadOptions};
use rt2::om::graph::{ComputeGraph, is_const_type, is_data_type};
use rt2::om::{Shape, TensorDesc};
use rt2::ops::{DType, HostTensor};
use rt2::ops::{InferCtx, OpRegistry, TensorMeta};

fn meta(d: &TensorDesc) -> Option<TensorMeta> {
    let dtype = attrs::dtype(d.dtype)?;
    Some(match &d.shape {
        Shape::Dims(s) => TensorMeta::new(dtype, s),
        Shape::UnknownRank => TensorMeta::unknown_rank(dtype),
    })
}

/// A numeric input of the test's data set, as the model would get it: values the
/// op's inference reads (Reshape's shape, the axes of a reduction) are graph inputs in
/// these tests, which lowering would see as constants of a specialized model.
fn data_set_value(case: &Path, input: i64) -> Option<HostTensor> {
    use prost::Message;
    let bytes = std::fs::read(
        case.join("test_data_set_0")
            .join(format!("input_{input}.pb")),
    )
    .ok()?;
    let t = rt2::proto::onnx::TensorProto::decode(bytes.as_slice()).ok()?;
    let shape = t.dims.clone();
    let raw = |typed: Vec<u8>| {
        t.raw_data
            .as_ref()
            .map(|r| r.to_vec())
            .filter(|r| !r.is_empty())
            .unwrap_or(typed)
    };
    let (dtype, data) = match t.data_type? {
        7 => (
            DType::I64,
            raw(t.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ),
        6 => (
            DType::I32,
            raw(t.int32_data.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ),
        1 => (
            DType::F32,
            raw(t.float_data.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ),
        11 => (
            DType::F64,
            raw(t.double_data.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ),
        // float16 and bfloat16 keep their bits in the low half of int32_data.
        10 => (
            DType::F16,
            raw(t
                .int32_data
                .iter()
                .flat_map(|v| (*v as u16).to_le_bytes())
                .collect()),
        ),
        16 => (
            DType::Bf16,
            raw(t
                .int32_data
                .iter()
                .flat_map(|v| (*v as u16).to_le_bytes())
                .collect()),
        ),
        _ => return None,
    };
    Some(HostTensor {
        dtype,
        shape,
        data: data.into(),
    })
}

/// Checks one single-op model; `None` when the op is not in the registry (or the model is
/// not a single op on known types), else the mismatches found.
fn check(case: &Path, g: &ComputeGraph, reg: &OpRegistry) -> Option<Vec<String>> {
    let ops: Vec<_> = g
        .nodes
        .iter()
        .filter(|n| {
            !is_data_type(&n.op_type) && !is_const_type(&n.op_type) && n.op_type != "NetOutput"
        })
        .collect();
    let [node] = ops[..] else { return None };
    let spec = reg.get(&node.op_type)?;
    let mut inputs = Vec::new();
    let mut values: Vec<Option<HostTensor>> = Vec::new();
    for (i, p) in node.inputs.iter().enumerate() {
        let p = p.as_ref()?; // optional inputs left out: skip the case
        let producer = g.node(p.node);
        inputs.push(meta(producer.output_descs.get(p.index as usize)?)?);
        let constant = producer
            .attr("value")
            .and_then(|v| v.as_tensor())
            .and_then(attrs::tensor);
        let fed = if spec.value_inputs.contains(&i) && is_data_type(&producer.op_type) {
            producer
                .attr_int("index")
                .and_then(|k| data_set_value(case, k))
        } else {
            None
        };
        values.push(constant.or(fed));
    }
    let value_refs: Vec<Option<&HostTensor>> = values.iter().map(Option::as_ref).collect();
    let node_attrs = attrs::attrs(&node.attrs);
    let ctx = InferCtx {
        op: &node.op_type,
        inputs: &inputs,
        values: &value_refs,
        attrs: &node_attrs,
        outputs: node.output_descs.len(),
    };
    let out = g.node(g.net_output()?);
    // Each graph output names the op output it is (exporters leave optional outputs out,
    // so the k-th graph output need not be the op's k-th).
    let expected: Vec<(usize, TensorMeta)> = out
        .inputs
        .iter()
        .zip(&out.input_descs)
        .map(|(p, d)| Some((p.as_ref()?.index as usize, meta(d)?)))
        .collect::<Option<_>>()?;
    let got = match (spec.infer)(&ctx) {
        Ok(got) => got,
        Err(e) => return Some(vec![format!("inference failed: {e}")]),
    };
    let mut problems = Vec::new();
    for (i, want) in &expected {
        let i = *i;
        let Some(have) = got.get(i) else {
            problems.push(format!("output {i}: not produced"));
            continue;
        };
        // A declared unknown dim accepts anything; a known one must match exactly, except
        // that an op whose output shape depends on the data may leave it unknown.
        let unknown_ok = spec.data_dependent;
        let shapes_agree = match (&want.shape, &have.shape) {
            (None, _) => true,
            (Some(w), Some(h)) => {
                w.len() == h.len()
                    && w.iter()
                        .zip(h)
                        .all(|(&w, &h)| w < 0 || w == h || (unknown_ok && h < 0))
            }
            (Some(_), None) => false,
        };
        if want.dtype != have.dtype || !shapes_agree {
            problems.push(format!("output {i}: expected {want}, inferred {have}"));
        }
    }
    Some(problems)
}

#[test]
fn shape_inference_matches_the_onnx_node_tests() {
    let Some(dir) = std::env::var_os("RT2_ONNX_NODE_DATA") else {
        eprintln!("RT2_ONNX_NODE_DATA is not set: the ONNX node tests were not checked");
        return;
    };
    let reg = OpRegistry::new();
    let (mut checked, mut failures) = (0, BTreeMap::new());
    let mut dirs: Vec<_> = std::fs::read_dir(&dir)
        .expect("the node test folder")
        .map(|e| e.expect("an entry").path())
        .collect();
    dirs.sort();
    for case in dirs {
        let Ok(bytes) = std::fs::read(case.join("model.onnx")) else {
            continue;
        };
        // The ONNX ops' inference is what this checks: import without GE's plugins (the
        // GE ops they make are run against the same cases by tests/conformance.rs).
        let onnx = ReadOptions {
            import: rt2::om::onnx::ImportOptions {
                onnx_types: true,
                ..Default::default()
            },
        };
        let Ok(f) = file::read(&bytes, &onnx) else {
            continue;
        };
        if let Some(problems) = check(&case, &f.root().model.root, &reg) {
            checked += 1;
            if !problems.is_empty() {
                failures.insert(
                    case.file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned(),
                    problems,
                );
            }
        }
    }
    eprintln!("checked {checked} single-op node tests against the registry");
    assert!(checked > 300, "only {checked} cases were checked");
    assert!(
        failures.is_empty(),
        "{} case(s) disagree: {failures:#?}",
        failures.len()
    );
}
