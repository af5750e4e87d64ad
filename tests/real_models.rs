//! The five real-model classes of `fixtures/real_models` (a transformer encoder, a
//! MobileNetV3-small-style CNN, a UNet, an LSTM voice-activity model and a CRNN text
//! recognizer, written by `tools/real_models.py` the way PyTorch's exporter writes them)
//! through the whole pipeline: read with the library, lowered with the default options
//! (and with the multi-thread passes for topo-mt), loaded and executed under every
//! engine. The four engines must agree bit for bit, and the output must match ONNX
//! Runtime's (`test_data_set_0/output_0.pb`, one thread, graph optimizations off) within
//! each model's stated tolerance. Needs no Python: the fixtures are checked in.

use std::path::{Path, PathBuf};

use rt2::cmd::check::{Tolerance, compare};
use rt2::exec::KernelAttr;
use rt2::exec::runtime::ExecutorType;
use rt2::lower::{LowerOptions, lower};
use rt2::om::file::{ReadOptions, read};
use rt2::ops::HostTensor;

#[path = "support/execute.rs"]
mod execute;
use execute::execute;

/// The folder of one fixture: `model.onnx` and `test_data_set_0/`.
fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/real_models")
        .join(name)
}

/// A tensor of the ONNX backend-test layout (a serialized `TensorProto`).
fn read_pb(path: &Path) -> HostTensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let t = rt2::om::onnx::read_tensor(&bytes, &path.display().to_string())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    rt2::lower::attrs::tensor(&t)
        .unwrap_or_else(|| panic!("{}: not a tensor of static shape", path.display()))
}

/// Runs fixture `name` under the four engines: bit-identical outputs, each within `tol`
/// of ONNX Runtime's.
fn check(name: &str, tol: Tolerance) {
    let dir = fixture(name);
    let path = dir.join("model.onnx");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut file =
        read(&bytes, &ReadOptions::default()).unwrap_or_else(|e| panic!("{name}: imports: {e}"));
    let cg = file.models.swap_remove(0).model;
    let plain =
        lower(&cg, &LowerOptions::default()).unwrap_or_else(|e| panic!("{name}: lowers: {e}"));
    let mt = lower(
        &cg,
        &LowerOptions {
            multi_thread: true,
            ..LowerOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{name}: lowers for topo-mt: {e}"));
    // Lowering stores every constant recurrent W transposed for the input projection
    // (the prepack the kernel is told of by `_rt2_w_transposed`).
    let recurrent: Vec<_> = plain
        .main
        .nodes
        .iter()
        .filter(|n| {
            matches!(n.attrs.get("_op_type"),
                Some(KernelAttr::Str(op)) if ["LSTM", "GRU", "RNN"].contains(&op.as_ref()))
        })
        .collect();
    assert!(
        recurrent
            .iter()
            .all(|n| n.attrs.contains_key("_rt2_w_transposed")),
        "{name}: a recurrent op reads W as stored"
    );
    let lstm_models = ["lstm_speech", "crnn"];
    assert_eq!(
        !recurrent.is_empty(),
        lstm_models.contains(&name),
        "{name}: LSTM launches"
    );
    let input = read_pb(&dir.join("test_data_set_0/input_0.pb"));
    let want = read_pb(&dir.join("test_data_set_0/output_0.pb"));

    let mut first: Option<HostTensor> = None;
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
        let mut got = execute(eg, executor, &input);
        assert_eq!(got.len(), 1, "{name}: one output");
        let got = got.swap_remove(0);
        let c = compare(&got, &want, tol);
        assert!(
            c.ok,
            "{name} under {}: {} elements beyond rtol {}, atol {} (worst abs {:e}, rel {:e}): {}",
            executor.name(),
            c.mismatches,
            tol.rtol,
            tol.atol,
            c.max_abs_err,
            c.max_rel_err,
            c.detail.unwrap_or_default()
        );
        match &first {
            None => first = Some(got),
            Some(f) => assert!(
                f.data == got.data,
                "{name}: {} differs from seq bit for bit",
                executor.name()
            ),
        }
    }
}

/// The tolerance every model starts from: float32 arithmetic in another order than ONNX
/// Runtime's, with nothing that amplifies the difference.
const TIGHT: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-5,
};

#[test]
fn encoder() {
    check("encoder", TIGHT);
}

#[test]
fn mobilenet() {
    check("mobilenet", TIGHT);
}

#[test]
fn unet() {
    check("unet", TIGHT);
}

#[test]
fn lstm_speech() {
    check("lstm_speech", TIGHT);
}

#[test]
fn crnn() {
    check("crnn", TIGHT);
}
