//! Op-library benchmarks: the kernels the device is judged on, each on one thread,
//! side by side with ONNX Runtime running the same one-op model on one thread in the same
//! run. Targets (docs/PERFORMANCE.md): each within 1.2 times ONNX Runtime.
//!
//! - Add of two [1024, 1024] float32 tensors (memory bound),
//! - MatMul 512x512x512 float32 (the GEMM), and 16x512x2048 (an encoder's feed-forward
//!   layer at sequence 16: few rows, a weight read once per call),
//! - a 3x3 Conv, pad 1, on [1, 64, 56, 56] with 64 output channels (the direct kernel).
//!
//! rt2 is measured as a launch runs an op: its compute into outputs allocated once (the
//! runtime takes them from its caching allocator, so a steady-state run allocates
//! nothing), after checking once through `OpRegistry::run_on_host` that the op infers and
//! computes.
//!
//! `cargo bench --bench ops`; the peer needs the pinned Python environment
//! (`tools/pyenv.sh`) and is skipped with a note when it cannot be had.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::time::Duration;

use criterion::Criterion;

#[path = "support/peer.rs"]
mod peer;
use rt2::om::onnx::builder::{Dim, F32, OnnxBuilder, attr_ints, tensor_f32};
use rt2::ops::{Attr, DType};
use rt2::ops::{Attrs, Compute, InferCtx, OpRegistry, Tensor, TensorMeta, TensorMut, TensorRef};

/// Seeded values in [-1, 1): the same inputs every run, no allocation in the loop.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn tensor(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_vec(shape, &values(shape.iter().product(), seed))
}

fn dims(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Value(d as i64)).collect()
}

/// One benchmarked op: its rt2 inputs and attributes, and the same op as an ONNX model
/// (weights as initializers, as an exported model has them).
struct Case {
    name: &'static str,
    op: &'static str,
    attrs: Attrs,
    inputs: Vec<Tensor>,
    onnx: Vec<u8>,
}

fn cases() -> Vec<Case> {
    let add = {
        let s = [1024, 1024];
        Case {
            name: "add_1024x1024",
            op: "Add",
            attrs: Attrs::default(),
            inputs: vec![tensor(&s, 1), tensor(&s, 2)],
            onnx: OnnxBuilder::new("add")
                .input("a", F32, &dims(&s))
                .input("b", F32, &dims(&s))
                .node("Add", &["a", "b"], &["y"], vec![])
                .output("y", F32, &dims(&s))
                .build(),
        }
    };
    let conv = {
        let x = [1, 64, 56, 56];
        let w = tensor(&[64, 64, 3, 3], 6);
        let attrs: Attrs = [
            ("kernel_shape".to_string(), Attr::Ints(vec![3, 3])),
            ("pads".to_string(), Attr::Ints(vec![1, 1, 1, 1])),
        ]
        .into_iter()
        .collect();
        Case {
            name: "conv3x3_64x56x56",
            op: "Conv",
            attrs,
            inputs: vec![tensor(&x, 5), w.clone()],
            onnx: OnnxBuilder::new("conv")
                .input("x", F32, &dims(&x))
                .initializer(tensor_f32("w", &[64, 64, 3, 3], w.slice::<f32>().unwrap()))
                .node(
                    "Conv",
                    &["x", "w"],
                    &["y"],
                    vec![
                        attr_ints("kernel_shape", &[3, 3]),
                        attr_ints("pads", &[1, 1, 1, 1]),
                    ],
                )
                .output("y", F32, &dims(&x))
                .build(),
        }
    };
    vec![
        add,
        matmul("matmul_512", [512, 512, 512]),
        matmul("matmul_16x512x2048", [16, 512, 2048]),
        conv,
    ]
}

/// MatMul of `[m, k]` activations by a constant `[k, n]` weight (an initializer for the
/// peer, which packs it at session creation), as rt2 runs the one-op model: lowering
/// makes it a `MatMulPacked` on the weight packed once, so the kernel timed is that one,
/// on the packed weight.
fn matmul(name: &'static str, [m, k, n]: [usize; 3]) -> Case {
    use rt2::ops::linalg::sgemm::{PACK_WIDTH, pack_b};
    let b = tensor(&[k, n], 4);
    let packed = pack_b(b.slice::<f32>().unwrap(), k, n);
    Case {
        name,
        op: "MatMulPacked",
        attrs: [("n".to_string(), Attr::Int(n as i64))]
            .into_iter()
            .collect(),
        inputs: vec![
            tensor(&[m, k], 3),
            Tensor::from_vec(&[n.div_ceil(PACK_WIDTH), k, PACK_WIDTH], &packed),
        ],
        onnx: OnnxBuilder::new("matmul")
            .input("a", F32, &dims(&[m, k]))
            .initializer(tensor_f32(
                "b",
                &[k as i64, n as i64],
                b.slice::<f32>().unwrap(),
            ))
            .node("MatMul", &["a", "b"], &["y"], vec![])
            .output("y", F32, &dims(&[m, n]))
            .build(),
    }
}

/// Runs `k`'s compute `runs` times into outputs allocated once; what one launch costs.
fn kernel(reg: &OpRegistry, k: &Case) -> impl FnMut() {
    let spec = *reg.get(k.op).expect("the op is registered");
    let Some(Compute::Into(f)) = spec.compute else {
        panic!("{} computes into given outputs", k.op)
    };
    let mut outs = reg
        .run_on_host(k.op, &k.attrs, &k.inputs, 1)
        .unwrap_or_else(|e| panic!("{}: {e}", k.name));
    let metas: Vec<TensorMeta> = k
        .inputs
        .iter()
        .map(|t| {
            let dims: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
            TensorMeta::new(t.dtype, &dims)
        })
        .collect();
    let values = vec![None; k.inputs.len()];
    move || {
        let ctx = InferCtx {
            op: k.op,
            inputs: &metas,
            values: &values,
            attrs: &k.attrs,
            outputs: 1,
        };
        let refs: Vec<TensorRef> = k.inputs.iter().map(Tensor::as_ref).collect();
        let mut muts: Vec<TensorMut> = outs.iter_mut().map(Tensor::as_mut).collect();
        f(&ctx, &refs, &mut muts).expect("computes");
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let reg = OpRegistry::new();
    // One thread, as the peer runs.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    let cases = cases();
    let mut g = c.benchmark_group("ops");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    for k in &cases {
        assert_eq!(
            reg.run_on_host(k.op, &k.attrs, &k.inputs, 1).unwrap()[0].dtype,
            DType::F32
        );
        let mut run = kernel(&reg, k);
        g.bench_function(k.name, |b| b.iter(|| pool.install(&mut run)));
    }
    g.finish();
    c.final_summary();

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for k in &cases {
        let path = dir.join(format!("{}.onnx", k.name));
        std::fs::write(&path, &k.onnx).expect("writing the peer model");
        let mut run = kernel(&reg, k);
        let rt2 = peer::times_ms(50, || pool.install(&mut run));
        peer::report_run(k.name, rt2, &path, 50);
    }
}
