//! Dynamic shapes: one loaded executor of a transformer encoder block with a symbolic
//! sequence length runs call after call at changing lengths, under every engine.
//!
//! What is checked, per call: the output against a plain reference implementation of
//! the block written here (f64 accumulation, so it is independent of the op library's
//! kernels), and the output of every engine against the sequential engine's, bit for
//! bit. Across calls: once every distinct length has run, further calls reuse the
//! cached device memory, so the device's allocated-bytes high-water mark and its
//! segment mappings stay where they are (under the single-thread engines, whose
//! schedules are fixed; see the note on topo-mt below).

use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::lower::{LowerOptions, lower, lower_specialized};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::ComputeModel;
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::{EncoderBlock, encoder_block_model, seeded_f32};
use rt2::ops::{DType, HostTensor};

#[path = "support/execute.rs"]
mod support;

/// Small enough for debug builds, the same graph as the benchmarked block.
const SIZES: EncoderBlock = EncoderBlock {
    d_model: 64,
    heads: 4,
    ffn: 256,
};

/// The call sequence: every distinct length once, then back and forth.
const FIRST_PASS: [usize; 3] = [16, 128, 64];
const LATER: [usize; 6] = [16, 128, 16, 64, 128, 16];

/// The encoder block at [`SIZES`], imported.
fn block_model() -> ComputeModel {
    let onnx = encoder_block_model(SIZES, None);
    let mut file = read(&onnx, &ReadOptions::default()).expect("imports");
    file.models.swap_remove(0).model
}

fn input(seq: usize) -> Vec<f32> {
    seeded_f32(seq * SIZES.d_model, 1000 + seq as u64, 1.0)
}

fn host(seq: usize, x: &[f32]) -> HostTensor {
    HostTensor {
        dtype: DType::F32,
        shape: vec![seq as i64, SIZES.d_model as i64],
        data: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

fn floats(t: &HostTensor) -> Vec<f32> {
    t.data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect()
}

/// `a [m, k] @ b [k, n] + bias [n]`.
fn linear(a: &[f64], m: usize, k: usize, b: &[f64], n: usize, bias: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            y[i * n + j] = s + bias[j];
        }
    }
    y
}

fn layer_norm(x: &[f64], d: usize, g: &[f64], b: &[f64]) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|row| {
            let mean = row.iter().sum::<f64>() / d as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d as f64;
            let inv = 1.0 / (var + 1e-5).sqrt();
            row.iter()
                .enumerate()
                .map(move |(j, v)| (v - mean) * inv * g[j] + b[j])
        })
        .collect()
}

/// The block, computed directly from its definition.
fn reference(x: &[f32], seq: usize) -> Vec<f64> {
    let EncoderBlock {
        d_model: d,
        heads,
        ffn,
    } = SIZES;
    let dh = d / heads;
    let w = |name: &str| -> Vec<f64> {
        let (_, shape, seed) = SIZES
            .weights()
            .into_iter()
            .find(|(n, _, _)| *n == name)
            .expect("a weight of the block");
        EncoderBlock::weight(name, &shape, seed)
            .into_iter()
            .map(f64::from)
            .collect()
    };
    let x: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let q = linear(&x, seq, d, &w("wq"), d, &w("bq"));
    let k = linear(&x, seq, d, &w("wk"), d, &w("bk"));
    let v = linear(&x, seq, d, &w("wv"), d, &w("bv"));
    let scale = f64::from(1.0 / (dh as f32).sqrt());
    let mut ctx = vec![0.0; seq * d];
    for h in 0..heads {
        for i in 0..seq {
            let scores: Vec<f64> = (0..seq)
                .map(|j| {
                    (0..dh)
                        .map(|c| q[i * d + h * dh + c] * k[j * d + h * dh + c])
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = e.iter().sum();
            for c in 0..dh {
                ctx[i * d + h * dh + c] =
                    (0..seq).map(|j| e[j] / total * v[j * d + h * dh + c]).sum();
            }
        }
    }
    let attn = linear(&ctx, seq, d, &w("wo"), d, &w("bo"));
    let res1: Vec<f64> = x.iter().zip(&attn).map(|(a, b)| a + b).collect();
    let ln1 = layer_norm(&res1, d, &w("ln1_g"), &w("ln1_b"));
    let f1: Vec<f64> = linear(&ln1, seq, d, &w("w1"), ffn, &w("b1"))
        .into_iter()
        .map(|v| v.max(0.0))
        .collect();
    let f2 = linear(&f1, seq, ffn, &w("w2"), d, &w("b2"));
    let res2: Vec<f64> = ln1.iter().zip(&f2).map(|(a, b)| a + b).collect();
    layer_norm(&res2, d, &w("ln2_g"), &w("ln2_b"))
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= 1e-4 + 1e-4 * w.abs(),
            "{what}: element {i} is {g}, the reference says {w} (error {err:e})"
        );
    }
}

#[test]
fn one_executor_runs_changing_sequence_lengths_and_reuses_device_memory() {
    let model = block_model();
    let eg = lower(&model, &LowerOptions::default()).expect("lowers");
    assert_eq!(eg.inputs[0].shape, vec![-1, SIZES.d_model as i64]);

    let mut lengths: Vec<usize> = FIRST_PASS.to_vec();
    lengths.sort_unstable();
    let inputs: Vec<(usize, Vec<f32>, Vec<f64>)> = lengths
        .iter()
        .map(|&s| {
            let x = input(s);
            let want = reference(&x, s);
            (s, x, want)
        })
        .collect();
    let case = |seq: usize| {
        inputs
            .iter()
            .find(|(s, _, _)| *s == seq)
            .expect("a length of the first pass")
    };

    // Per length, the sequential engine's output: every other engine must match it.
    let mut first: Vec<(usize, Vec<u8>)> = Vec::new();
    for executor in ExecutorType::ALL {
        // A device per engine, so its memory counters are this executor's alone.
        let device = Device::new(DeviceConfig {
            check_launch_shapes: true,
            ..DeviceConfig::default()
        });
        let mut ex = ModelV2Executor::create(
            &eg,
            &device,
            ExecutorOptions {
                executor,
                ..ExecutorOptions::default()
            },
        )
        .expect("creates");
        ex.load().expect("loads");
        let mut out = Vec::new();
        let mut run = |seq: usize, out: &mut Vec<HostTensor>| {
            let (_, x, want) = case(seq);
            ex.execute_sync(&[&host(seq, x)], out)
                .unwrap_or_else(|e| panic!("{} at sequence {seq}: {e}", executor.name()));
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].shape, vec![seq as i64, SIZES.d_model as i64]);
            let what = format!("{} at sequence {seq}", executor.name());
            assert_close(&floats(&out[0]), want, &what);
            match first.iter().find(|(s, _)| *s == seq) {
                None => first.push((seq, out[0].data.to_vec())),
                Some((_, bytes)) => assert!(out[0].data == *bytes, "{what}: differs bit-wise"),
            }
        };
        for &seq in &FIRST_PASS {
            run(seq, &mut out);
        }
        let after_first = device.memory_stats();
        for &seq in &LATER {
            run(seq, &mut out);
        }
        let after = device.memory_stats();
        let name = executor.name();
        // topo-mt's memory worker runs allocations and frees in the order their nodes
        // become ready, which varies from run to run: a later run can allocate a block
        // of some size before the free that an earlier run did first, and the caching
        // allocator then keeps one more block of that size (seen: 64 KB once). So its
        // high-water mark is not fixed after one pass; its outputs are still checked.
        if executor == ExecutorType::TopologicalMultiThread {
            ex.unload().expect("unloads");
            continue;
        }
        assert_eq!(
            after.peak_allocated, after_first.peak_allocated,
            "{name}: the high-water mark grew after every length had run once"
        );
        assert_eq!(
            after.segment_maps, after_first.segment_maps,
            "{name}: new device memory was mapped after every length had run once"
        );
        assert_eq!(ex.iteration_num(), (FIRST_PASS.len() + LATER.len()) as u64);
        ex.unload().expect("unloads");
    }
}

/// The op types of the launches in Main, one per launch.
fn launched_ops(eg: &rt2::exec::ExecuteGraph) -> Vec<String> {
    eg.main
        .nodes
        .iter()
        .filter(|n| n.kernel == "LaunchKernelWithHandle")
        .filter_map(|n| match n.attrs.get("_op_type") {
            Some(rt2::exec::KernelAttr::Str(op)) => Some(op.to_string()),
            _ => None,
        })
        .collect()
}

/// Lowering packs the block's six constant weights (MatMul becomes MatMulPacked) unless
/// told to keep their layout, and the packed model computes the same bits as the one
/// reading its weights in place, at every length.
#[test]
fn packed_weights_give_the_bits_of_weights_read_in_place() {
    let model = block_model();
    let packed = lower(&model, &LowerOptions::default()).expect("lowers");
    let plain = lower(
        &model,
        &LowerOptions {
            keep_weight_layout: true,
            ..LowerOptions::default()
        },
    )
    .expect("lowers");
    let count = |eg: &rt2::exec::ExecuteGraph, op: &str| {
        launched_ops(eg).iter().filter(|o| o.as_str() == op).count()
    };
    assert_eq!(
        (
            count(&packed, "MatMulPacked"),
            count(&plain, "MatMulPacked")
        ),
        (6, 0)
    );
    assert_eq!(count(&packed, "MatMul") + 6, count(&plain, "MatMul"));

    let device = Device::new(DeviceConfig {
        check_launch_shapes: true,
        ..DeviceConfig::default()
    });
    let mut outputs = Vec::new();
    for eg in [&packed, &plain] {
        let mut ex =
            ModelV2Executor::create(eg, &device, ExecutorOptions::default()).expect("creates");
        ex.load().expect("loads");
        let mut runs = Vec::new();
        for seq in FIRST_PASS {
            let x = input(seq);
            let mut out = Vec::new();
            ex.execute_sync(&[&host(seq, &x)], &mut out)
                .expect("executes");
            assert_close(&floats(&out[0]), &reference(&x, seq), "packed");
            runs.push(out.swap_remove(0).data);
        }
        ex.unload().expect("unloads");
        outputs.push(runs);
    }
    assert!(
        outputs[0] == outputs[1],
        "packed and in-place weights differ bit-wise"
    );
}

/// Graph mode on the same block: captured at one length under each engine, replays give
/// the plain execution's bytes for new values of that length, other lengths are refused,
/// plain executions wait until the graph is released.
#[test]
fn graph_mode_replays_a_captured_length_bit_for_bit() {
    let model = block_model();
    let eg = lower(&model, &LowerOptions::default()).expect("lowers");
    let (a, b) = (
        host(16, &input(16)),
        host(16, &seeded_f32(16 * SIZES.d_model, 7, 1.0)),
    );
    for executor in ExecutorType::ALL {
        let device = Device::new(DeviceConfig::default());
        let options = ExecutorOptions {
            executor,
            ..ExecutorOptions::default()
        };
        let mut plain = ModelV2Executor::create(&eg, &device, options.clone()).expect("creates");
        plain.load().expect("loads");
        let (mut pa, mut pb) = (Vec::new(), Vec::new());
        plain.execute_sync(&[&a], &mut pa).expect("runs");
        plain.execute_sync(&[&b], &mut pb).expect("runs");
        plain.unload().expect("unloads");

        let mut ex = ModelV2Executor::create(&eg, &device, options).expect("creates");
        ex.load().expect("loads");
        ex.capture_main(&[&a])
            .unwrap_or_else(|e| panic!("{}: {e}", executor.name()));
        let mut out = Vec::new();
        for (x, want) in [(&a, &pa), (&b, &pb), (&a, &pa)] {
            ex.replay_sync(&[x], &mut out).expect("replays");
            assert_eq!(out[0].shape, want[0].shape);
            assert!(
                out[0].data == want[0].data,
                "{}: a replay differs from the plain run",
                executor.name()
            );
        }
        let other = host(64, &input(64));
        let e = ex.replay_sync(&[&other], &mut out).unwrap_err();
        assert!(e.to_string().contains("captured with"), "{e}");
        let e = ex.execute_sync(&[&a], &mut out).unwrap_err();
        assert!(e.to_string().contains("a graph is captured"), "{e}");
        ex.release_graph().expect("releases");
        ex.execute_sync(&[&b], &mut out).expect("runs again");
        assert!(out[0].data == pb[0].data);
        ex.unload().expect("unloads");
    }
}

/// A shape of unknown length (Shape of a tensor of unknown rank, here a ConstantOfShape
/// whose dims input has no declared shape) feeding an op beside a folded constant: the
/// Shape is launched with its shape inferred at run time, not read on the host, so the
/// Sub's launch is given both operands' shapes. Under every engine.
#[test]
fn a_shape_of_unknown_length_feeds_later_ops() {
    use rt2::om::onnx::builder::{OnnxBuilder, attr_t, tensor_f32, value_info};
    let model = OnnxBuilder::new("unknown_rank")
        .opset("", 13)
        .input_info(value_info("dims", 7, None))
        .input("x", 1, &[2.into(), 3.into()])
        .output_info(value_info("y", 7, None))
        .node(
            "ConstantOfShape",
            &["dims"],
            &["c"],
            vec![attr_t("value", tensor_f32("v", &[1], &[1.0]))],
        )
        .node("Shape", &["c"], &["s"], vec![])
        .node("Shape", &["x"], &["sx"], vec![])
        .node("Sub", &["s", "sx"], &["y"], vec![])
        .build();
    let file = read(&model, &ReadOptions::default()).expect("reads");
    let dims = HostTensor {
        dtype: DType::I64,
        shape: vec![2],
        data: [4i64, 5].iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let x = HostTensor {
        dtype: DType::F32,
        shape: vec![2, 3],
        data: vec![0; 24].into(),
    };
    for executor in ExecutorType::ALL {
        let multi_thread = executor == ExecutorType::TopologicalMultiThread;
        let eg = lower(
            &file.root().model,
            &LowerOptions {
                multi_thread,
                ..LowerOptions::default()
            },
        )
        .expect("lowers");
        let device = Device::new(DeviceConfig::default());
        let options = ExecutorOptions {
            executor,
            ..ExecutorOptions::default()
        };
        let mut ex = ModelV2Executor::create(&eg, &device, options).expect("creates");
        ex.load().expect("loads");
        let mut out = Vec::new();
        ex.execute_sync(&[&dims, &x], &mut out)
            .unwrap_or_else(|e| panic!("{}: {e}", executor.name()));
        let y: Vec<i64> = out[0]
            .data
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(y, [2, 2], "{}", executor.name());
    }
}

/// Shared inputs (`Arc<HostTensor>`, bound without a copy) and borrowed ones (copied into
/// the input slot) interleave at changing lengths: every call's output is the reference
/// block's, a borrowed call after a shared one leaves the shared tensor's bytes as they
/// were (the slot holds the caller's tensor, which must then be replaced, not written),
/// and the executor holds a shared input only until the next call binds another.
#[test]
fn shared_and_borrowed_inputs_interleave() {
    use std::sync::Arc;
    let model = block_model();
    let eg = lower(&model, &LowerOptions::default()).expect("lowers");
    let device = Device::new(DeviceConfig::default());
    let mut ex =
        ModelV2Executor::create(&eg, &device, ExecutorOptions::default()).expect("creates");
    ex.load().expect("loads");
    let (short, long) = (input(16), input(64));
    let shared = Arc::new(host(16, &short));
    let before = shared.data.clone();
    let mut out = Vec::new();
    for step in 0..4 {
        let (seq, want) = if step % 2 == 0 {
            ex.execute_sync(std::slice::from_ref(&shared), &mut out)
                .expect("runs shared");
            assert_eq!(Arc::strong_count(&shared), 2, "bound as it is, not copied");
            (16, reference(&short, 16))
        } else {
            ex.execute_sync(&[&host(64, &long)], &mut out)
                .expect("runs borrowed");
            assert_eq!(
                Arc::strong_count(&shared),
                1,
                "released by the next binding"
            );
            (64, reference(&long, 64))
        };
        assert_eq!(out[0].shape, vec![seq as i64, SIZES.d_model as i64]);
        assert_close(&floats(&out[0]), &want, &format!("step {step}"));
        assert_eq!(
            shared.data, before,
            "step {step}: the shared input is unchanged"
        );
    }
    ex.unload().expect("unloads");
}

/// The kernels of `g` of type `kernel`.
fn count(g: &rt2::exec::KernelGraph, kernel: &str) -> usize {
    g.nodes.iter().filter(|n| n.kernel == kernel).count()
}

/// Lowered for the shape of the input it will run (as `rt2 run` lowers by default), the
/// block infers no shape and allocates only its output per execution, and computes the
/// bits the dynamic graph computes at that length, under every executor, as `rt2 run`
/// lowers for each.
#[test]
fn a_graph_lowered_for_its_input_shape_infers_nothing_and_computes_the_same_bits() {
    let model = block_model();
    let seq = 64;
    let x = input(seq);
    let want = reference(&x, seq);
    let x = host(seq, &x);
    let d = SIZES.d_model as i64;
    let mut first: Option<Vec<u8>> = None;
    for executor in ExecutorType::ALL {
        let opts = LowerOptions {
            multi_thread: executor == ExecutorType::TopologicalMultiThread,
            static_memory: true,
            ..LowerOptions::default()
        };
        let dynamic = lower(&model, &opts).expect("lowers");
        let name = dynamic.inputs[0].name.clone();
        let fixed = lower_specialized(&model, &opts, &[(name, vec![seq as i64, d])])
            .expect("lowers for the length");
        assert_eq!(fixed.inputs[0].shape, vec![seq as i64, d]);
        assert_eq!(fixed.outputs[0].shape, vec![seq as i64, d]);
        let what = executor.name();
        assert!(count(&dynamic.main, "InferShape") > 0, "{what}: dynamic");
        assert_eq!(count(&fixed.main, "InferShape"), 0, "{what}: fixed");
        // Planned memory: the output, which the caller takes, is still allocated per
        // execution, not the tensors of the block's twenty-odd ops.
        let (d, f) = (
            count(&dynamic.main, "AllocMemHbm"),
            count(&fixed.main, "AllocMemHbm"),
        );
        assert!(
            d >= 10 && f <= 2,
            "{what}: {d} allocations dynamic, {f} fixed"
        );
        let a = support::execute(&dynamic, executor, &x).swap_remove(0);
        let b = support::execute(&fixed, executor, &x).swap_remove(0);
        assert_close(&floats(&b), &want, what);
        assert!(a.data == b.data, "{what}: the fixed graph's bits differ");
        match &first {
            None => first = Some(b.data.to_vec()),
            Some(bytes) => assert!(b.data == *bytes, "{what}: differs from seq bit-wise"),
        }
    }
}

/// A shape that contradicts what the model knows of an input (its width, its rank), or
/// names no input, leaves the input as the model has it.
#[test]
fn a_shape_the_input_cannot_have_leaves_it_unknown() {
    let model = block_model();
    let opts = LowerOptions::default();
    let name = lower(&model, &opts).expect("lowers").inputs[0].name.clone();
    let d = SIZES.d_model as i64;
    for dims in [vec![16, d + 1], vec![16], vec![1, 16, d]] {
        let eg = lower_specialized(&model, &opts, &[(name.clone(), dims.clone())])
            .expect("lowers as it is");
        assert_eq!(eg.inputs[0].shape, vec![-1, d], "{dims:?}");
    }
    let eg = lower_specialized(&model, &opts, &[("other".into(), vec![16, d])]).expect("lowers");
    assert_eq!(eg.inputs[0].shape, vec![-1, d]);
}
