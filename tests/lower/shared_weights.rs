//! A model's weights are held once: the imported graph, the ExecuteGraph lowered from it
//! and the executor's Const values share one buffer per weight (or per packed weight),
//! and loading uploads each constant to the device without keeping a host staging copy.

use rt2::exec::runtime::{ExecutorOptions, ModelV2Executor};
use rt2::exec::{ExecuteGraph, KernelGraph};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ReadOptions, read};
use rt2::om::graph::AttrValue;
use rt2::om::onnx::builder::{Dim, F32, OnnxBuilder, seeded_f32, tensor_f32};
use rt2::ops::{Attr, DType, HostTensor, TensorBytes};

const K: usize = 64;
const N: usize = 48;

/// `y = x @ w + b` for x `[2, K]`, w `[K, N]`, b `[N]`.
fn model() -> Vec<u8> {
    OnnxBuilder::new("weights")
        .input("x", F32, &[Dim::Value(2), Dim::Value(K as i64)])
        .initializer(tensor_f32(
            "w",
            &[K as i64, N as i64],
            &seeded_f32(K * N, 3, 1.0),
        ))
        .initializer(tensor_f32("b", &[N as i64], &seeded_f32(N, 4, 1.0)))
        .node("MatMul", &["x", "w"], &["xw"], vec![])
        .node("Add", &["xw", "b"], &["y"], vec![])
        .output("y", F32, &[Dim::Value(2), Dim::Value(N as i64)])
        .build()
}

/// The bytes of Init's constant of `len` bytes.
fn init_const(init: &KernelGraph, len: usize) -> &TensorBytes {
    init.nodes
        .iter()
        .filter(|n| n.kernel == "Const")
        .find_map(|n| match n.attrs.get("value") {
            Some(Attr::Tensor(t)) if t.data.len() == len => Some(&t.data),
            _ => None,
        })
        .unwrap_or_else(|| panic!("Init has no constant of {len} bytes"))
}

fn lowered(keep_weight_layout: bool) -> (ExecuteGraph, *const u8) {
    let file = read(&model(), &ReadOptions::default()).expect("imports");
    let model = &file.models[0].model;
    let weight = model
        .root
        .nodes
        .iter()
        .find_map(|n| match n.attr("value") {
            Some(AttrValue::Tensor(t)) if t.data.len() == K * N * 4 => Some(t.data.as_ptr()),
            _ => None,
        })
        .expect("the imported graph holds the weight");
    let opts = LowerOptions {
        keep_weight_layout,
        ..LowerOptions::default()
    };
    (lower(model, &opts).expect("lowers"), weight)
}

#[test]
fn lowering_shares_a_weight_with_the_imported_graph() {
    let (eg, weight) = lowered(true);
    let data = init_const(&eg.init, K * N * 4);
    assert!(
        matches!(data, TensorBytes::Shared(_)),
        "the ExecuteGraph's weight is shared"
    );
    assert_eq!(
        data.as_ptr(),
        weight,
        "the ExecuteGraph's weight is the imported graph's buffer, not a copy"
    );
}

#[test]
fn a_packed_weight_is_shared_from_lowering_on() {
    let (eg, weight) = lowered(false);
    let packed = eg
        .init
        .nodes
        .iter()
        .filter(|n| n.kernel == "Const")
        .filter_map(|n| match n.attrs.get("value") {
            Some(Attr::Tensor(t)) if t.data.len() >= K * N * 4 => Some(&t.data),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(packed.len(), 1, "one packed weight");
    assert_ne!(packed[0].as_ptr(), weight, "packing made new bytes");
    assert!(
        matches!(packed[0], TensorBytes::Shared(_)),
        "so that the executor's Const value shares them"
    );
}

#[test]
fn loading_keeps_no_staging_copy_of_the_constants() {
    for keep_weight_layout in [true, false] {
        let (eg, _) = lowered(keep_weight_layout);
        let device = Device::new(DeviceConfig::default());
        let mut ex =
            ModelV2Executor::create(&eg, &device, ExecutorOptions::default()).expect("creates");
        ex.load().expect("loads");
        let stats = device.memory_stats();
        assert_eq!(
            (stats.host_in_use, stats.host_cached),
            (0, 0),
            "Init's uploads made no host staging memory, in use or cached by the pool \
             (keep_weight_layout {keep_weight_layout})"
        );
        let x = HostTensor {
            dtype: DType::F32,
            shape: vec![2, K as i64],
            data: seeded_f32(2 * K, 5, 1.0)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        };
        let mut out = Vec::new();
        let mut results = Vec::new();
        for _ in 0..3 {
            ex.execute_sync(&[&x], &mut out).expect("executes");
            results.push(out[0].data.to_vec());
        }
        assert!(
            results.windows(2).all(|w| w[0] == w[1]),
            "every execution gives the same bits"
        );
        let (xs, w, b) = (
            seeded_f32(2 * K, 5, 1.0),
            seeded_f32(K * N, 3, 1.0),
            seeded_f32(N, 4, 1.0),
        );
        let got: Vec<f32> = results[0]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got.len(), 2 * N);
        for r in 0..2 {
            for c in 0..N {
                let want: f64 = b[c] as f64
                    + (0..K)
                        .map(|k| xs[r * K + k] as f64 * w[k * N + c] as f64)
                        .sum::<f64>();
                let g = got[r * N + c] as f64;
                assert!(
                    (g - want).abs() <= 1e-4 * (1.0 + want.abs()),
                    "y[{r}, {c}] = {g}, want {want}"
                );
            }
        }
        let stats = device.memory_stats();
        let staged = stats.host_in_use + stats.host_cached;
        assert!(
            staged < (K * N * 4) as u64,
            "only the input's upload keeps a staging buffer ({staged} bytes)"
        );
        ex.unload().expect("unloads");
    }
}
