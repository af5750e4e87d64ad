//! The nine `light` CNN models of the ONNX backend tests (AlexNet, DenseNet-121,
//! Inception v1 and v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512) through the
//! whole pipeline (import, lower, load, execute) under every engine, against the expected
//! outputs the onnx wheel ships beside them.
//!
//! The data sit in the wheel's `onnx/backend/test/data/light` folder, the sibling of the
//! node cases: the tests find it from `RT2_ONNX_NODE_DATA` (`.ci/run` sets it) or from
//! `RT2_ONNX_LIGHT_DATA`. The input is what the ONNX backend runner feeds these models:
//! `arange(n) / n` in the input's shape. Tolerances are the runner's (`rtol` 1e-3, 2e-3 for
//! DenseNet; `atol` 1e-7). The four engines must agree bit for bit.

use std::path::PathBuf;

use rt2::cmd::check::{Tolerance, compare};
use rt2::exec::runtime::ExecutorType;
use rt2::lower::{LowerOptions, lower};
use rt2::om::file::{ReadOptions, read};
use rt2::ops::{DType, HostTensor};

#[path = "support/execute.rs"]
mod execute;
use execute::execute;

fn data_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("RT2_ONNX_LIGHT_DATA") {
        return Some(PathBuf::from(d));
    }
    let node = PathBuf::from(std::env::var_os("RT2_ONNX_NODE_DATA")?);
    Some(node.parent()?.join("light"))
}

/// `arange(n) / n` in float32, as the ONNX backend runner makes it.
fn runner_input(shape: &[i64]) -> HostTensor {
    let n: i64 = shape.iter().product();
    HostTensor {
        dtype: DType::F32,
        shape: shape.to_vec(),
        data: (0..n)
            .flat_map(|i| (i as f32 / n as f32).to_le_bytes())
            .collect(),
    }
}

fn check(model: &str, rtol: f64) {
    let Some(dir) = data_dir() else {
        eprintln!("RT2_ONNX_NODE_DATA is not set: the light model {model} was not run");
        return;
    };
    let path = dir.join(format!("light_{model}.onnx"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut file = read(&bytes, &ReadOptions::default()).expect("imports");
    let cg = file.models.swap_remove(0).model;
    let plain = lower(&cg, &LowerOptions::default()).expect("lowers");
    let mt = lower(
        &cg,
        &LowerOptions {
            multi_thread: true,
            ..LowerOptions::default()
        },
    )
    .expect("lowers for topo-mt");

    let io = &plain.inputs;
    assert_eq!(io.len(), 1, "{model}: one input");
    let shape: Vec<i64> = io[0].shape.iter().map(|&d| d.max(1)).collect();
    let input = runner_input(&shape);

    let want_path = dir.join(format!("light_{model}_output_0.pb"));
    let want_bytes = std::fs::read(&want_path).expect("expected output");
    let want = rt2::om::onnx::read_tensor(&want_bytes, &want_path.display().to_string())
        .ok()
        .and_then(|t| rt2::lower::attrs::tensor(&t))
        .expect("a float tensor");

    let tol = Tolerance { rtol, atol: 1e-7 };
    let mut first: Option<Vec<HostTensor>> = None;
    for executor in [
        ExecutorType::Sequential,
        ExecutorType::Topological,
        ExecutorType::TopologicalPriority,
        ExecutorType::TopologicalMultiThread,
    ] {
        let eg = match executor {
            ExecutorType::TopologicalMultiThread => &mt,
            _ => &plain,
        };
        let got = execute(eg, executor, &input);
        assert_eq!(got.len(), 1, "{model}: one output");
        let c = compare(&got[0], &want, tol);
        assert!(
            c.ok,
            "{model} under {}: {} elements beyond rtol {rtol}, atol 1e-7 (worst abs {:e}, rel {:e}): {}",
            executor.name(),
            c.mismatches,
            c.max_abs_err,
            c.max_rel_err,
            c.detail.unwrap_or_default()
        );
        match &first {
            None => first = Some(got),
            Some(f) => assert!(
                f[0].data == got[0].data,
                "{model}: {} differs from seq bit for bit",
                executor.name()
            ),
        }
    }
}

macro_rules! light {
    ($($test:ident: $model:literal, $rtol:literal;)*) => {
        $(
            #[test]
            fn $test() {
                check($model, $rtol);
            }
        )*
    };
}

light! {
    bvlc_alexnet: "bvlc_alexnet", 1e-3;
    densenet121: "densenet121", 2e-3;
    inception_v1: "inception_v1", 1e-3;
    inception_v2: "inception_v2", 1e-3;
    resnet50: "resnet50", 1e-3;
    shufflenet: "shufflenet", 1e-3;
    squeezenet: "squeezenet", 1e-3;
    vgg19: "vgg19", 1e-3;
    zfnet512: "zfnet512", 1e-3;
}
