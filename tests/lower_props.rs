//! Lowering random graphs: whatever the graph, lowering returns an ExecuteGraph that the
//! loader's checks accept (and that survives the `.exeg` round trip) or an error about the
//! model; never a panic and never an internal error (the verifier finding a broken graph
//! after a pass).
//!
//! Graphs are random programs over a float input of static or symbolic batch: elementwise
//! ops, shape arithmetic feeding Reshape, concatenation, data-dependent NonZero, If with
//! captured values, and now and then an op rt2 does not know or a shape that cannot work.

use proptest::prelude::*;
use rt2::exec::{check::check, exeg};
use rt2::lower::{LowerError, LowerOptions, lower};
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::{Dim, OnnxBuilder, attr_g, attr_i, attr_ints, tensor_f32};

const F32: i32 = 1;
const I64: i32 = 7;
const BOOL: i32 = 9;

#[derive(Debug, Clone)]
enum Step {
    Unary(u8, usize),
    Binary(u8, usize, usize),
    ReshapeViaShape(usize),
    Concat(usize, usize),
    NonZero(usize),
    If(usize, usize),
    Transpose(usize),
    Unknown(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let i = 0usize..64;
    prop_oneof![
        10 => (0u8..4, i.clone()).prop_map(|(k, a)| Step::Unary(k, a)),
        10 => (0u8..3, i.clone(), i.clone()).prop_map(|(k, a, b)| Step::Binary(k, a, b)),
        2 => i.clone().prop_map(Step::ReshapeViaShape),
        1 => (i.clone(), i.clone()).prop_map(|(a, b)| Step::Concat(a, b)),
        1 => i.clone().prop_map(Step::NonZero),
        2 => (i.clone(), i.clone()).prop_map(|(a, b)| Step::If(a, b)),
        1 => i.clone().prop_map(Step::Transpose),
        1 => i.prop_map(Step::Unknown),
    ]
}

/// Builds the ONNX model of a program; every float value has shape [B, 3] unless a
/// Concat or Transpose changed it, which later ops may then reject.
fn build(symbolic: bool, steps: &[Step], outputs: &[usize]) -> (Vec<u8>, bool) {
    let batch = if symbolic {
        Dim::param("N")
    } else {
        Dim::Value(2)
    };
    let mut b = OnnxBuilder::new("random")
        .opset("", 17)
        .opset("example.com", 1)
        .input("x", F32, &[batch.clone(), Dim::Value(3)])
        .initializer(tensor_f32("c", &[3], &[0.5, -1.0, 2.0]));
    let mut vals = vec!["x".to_string()];
    let mut unknown = false;
    let pick = |vals: &[String], i: usize| vals[i % vals.len()].clone();
    for (k, s) in steps.iter().enumerate() {
        let out = format!("v{k}");
        let name = format!("n{k}");
        b = match s {
            Step::Unary(op, a) => {
                let op = ["Relu", "Neg", "Sigmoid", "Identity"][*op as usize];
                b.named_node(&name, op, &[&pick(&vals, *a)], &[&out], vec![])
            }
            Step::Binary(op, a, c) => {
                let op = ["Add", "Mul", "Sub"][*op as usize];
                let rhs = if c % 3 == 0 {
                    "c".to_string()
                } else {
                    pick(&vals, *c)
                };
                b.named_node(&name, op, &[&pick(&vals, *a), &rhs], &[&out], vec![])
            }
            Step::ReshapeViaShape(a) => {
                let v = pick(&vals, *a);
                let s = format!("{out}_shape");
                b.named_node(&format!("{name}_shape"), "Shape", &[&v], &[&s], vec![])
                    .named_node(&name, "Reshape", &[&v, &s], &[&out], vec![])
            }
            Step::Concat(a, c) => b.named_node(
                &name,
                "Concat",
                &[&pick(&vals, *a), &pick(&vals, *c)],
                &[&out],
                vec![attr_i("axis", 0)],
            ),
            Step::NonZero(a) => {
                // Its int64 output only leaves as a model output.
                let idx = format!("{out}_idx");
                b = b.named_node(&name, "NonZero", &[&pick(&vals, *a)], &[&idx], vec![]);
                b = b.output(&idx, I64, &[Dim::Value(2), Dim::param("K")]);
                continue;
            }
            Step::If(a, c) => {
                let (v, w) = (pick(&vals, *a), pick(&vals, *c));
                let sum = format!("{out}_sum");
                let cond = format!("{out}_cond");
                let then_g = OnnxBuilder::new("then")
                    .named_node(&format!("{name}_t"), "Relu", &[&v], &["t_out"], vec![])
                    .output("t_out", F32, &[Dim::param("B"), Dim::Value(3)])
                    .graph();
                let else_g = OnnxBuilder::new("else")
                    .named_node(&format!("{name}_e"), "Neg", &[&w], &["e_out"], vec![])
                    .output("e_out", F32, &[Dim::param("B"), Dim::Value(3)])
                    .graph();
                b.named_node(
                    &format!("{name}_sum"),
                    "ReduceSum",
                    &[&v],
                    &[&sum],
                    vec![attr_i("keepdims", 0)],
                )
                .named_node(
                    &format!("{name}_gt"),
                    "Greater",
                    &[&sum, &sum],
                    &[&cond],
                    vec![],
                )
                .named_node(
                    &name,
                    "If",
                    &[&cond],
                    &[&out],
                    vec![attr_g("then_branch", then_g), attr_g("else_branch", else_g)],
                )
            }
            Step::Transpose(a) => b.named_node(
                &name,
                "Transpose",
                &[&pick(&vals, *a)],
                &[&out],
                vec![attr_ints("perm", &[1, 0])],
            ),
            Step::Unknown(a) => {
                unknown = true;
                b.raw_node(rt2::proto::onnx::NodeProto {
                    name: Some(name.clone()),
                    op_type: Some("Frobnicate".into()),
                    domain: Some("example.com".into()),
                    input: vec![pick(&vals, *a)],
                    output: vec![out.clone()],
                    ..Default::default()
                })
            }
        };
        vals.push(out);
    }
    for &o in outputs {
        let v = pick(&vals, o);
        b = b.output(&v, F32, &[Dim::param("B"), Dim::param("C")]);
    }
    let _ = BOOL;
    (b.build(), unknown)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn lowering_random_graphs_never_panics_and_passes_the_checks(
        symbolic in any::<bool>(),
        steps in prop::collection::vec(step(), 1..24),
        outputs in prop::collection::vec(0usize..64, 1..4),
    ) {
        let (bytes, unknown) = build(symbolic, &steps, &outputs);
        // Duplicate output names and the like are the importer's to refuse.
        let Ok(file) = read(&bytes, &ReadOptions::default()) else { return Ok(()) };
        let model = &file.models[0].model;
        for multi_thread in [false, true] {
            match lower(model, &LowerOptions { multi_thread, ..LowerOptions::default() }) {
                Ok(eg) => {
                    prop_assert!(!unknown, "an unknown op lowered");
                    let problems = check(&eg);
                    prop_assert!(problems.is_empty(), "{problems:?}");
                    prop_assert_eq!(exeg::decode(&exeg::encode(&eg)).unwrap(), eg);
                }
                Err(LowerError::Internal { pass, problems }) => {
                    prop_assert!(false, "internal error after {pass}: {problems:?}");
                }
                Err(LowerError::Unsupported(u)) => {
                    prop_assert!(unknown, "unsupported without an unknown op: {u:?}");
                    prop_assert!(u.iter().all(|u| u.op_type == "Frobnicate"));
                }
                Err(_) => {}
            }
        }
    }
}

/// Every bundled real model (ONNX exporters' output) and every model of every OM the
/// test data builds lowers in both modes, and the result loads without a problem.
#[test]
fn bundled_models_lower_and_load() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "fixtures/models has the real models");
    for (name, om) in rt2::om::testdata::all() {
        files.push((name.to_string(), om.to_bytes().unwrap()));
    }
    let mut lowered = 0;
    for (name, bytes) in &files {
        let file = read(bytes, &ReadOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        for m in &file.models {
            for multi_thread in [false, true] {
                match lower(
                    &m.model,
                    &LowerOptions {
                        multi_thread,
                        ..LowerOptions::default()
                    },
                ) {
                    Ok(eg) => {
                        assert!(check(&eg).is_empty(), "{name} model {}", m.index);
                        let back = exeg::decode(&exeg::encode(&eg))
                            .unwrap_or_else(|e| panic!("{name}: {e}"));
                        assert_eq!(back, eg, "{name} model {}", m.index);
                        lowered += 1;
                    }
                    // The OM test data is built from GE op types rt2 has no kernels for;
                    // those must be reported, never an internal error.
                    Err(LowerError::Unsupported(_)) if !name.ends_with(".onnx") => {}
                    Err(e) => panic!("{name} model {}: {e}", m.index),
                }
            }
        }
    }
    assert!(lowered >= 12, "every real model lowers in both modes");
}
