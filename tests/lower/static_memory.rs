//! Static memory planning (`LowerOptions::static_memory`, `lower::passes::memory`): what
//! the pass makes of a graph, and that planned models compute the very bits of the
//! unplanned ones under every engine, with and without the multi-thread passes, on models
//! whose tensors share memory across parallel branches (attention), batch norm, control
//! flow and an LSTM.

use rt2::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use rt2::exec::{ExecuteGraph, KernelGraph};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::om::file::{ReadOptions, read};
use rt2::om::onnx::builder::{EncoderBlock, add_chain_model, encoder_block_model, seeded_f32};
use rt2::ops::{DType, HostTensor};

fn lowered(onnx: &[u8], opts: LowerOptions) -> ExecuteGraph {
    let mut file = read(onnx, &ReadOptions::default()).expect("imports");
    let model = file.models.swap_remove(0).model;
    lower(&model, &opts).expect("lowers")
}

fn count(g: &KernelGraph, kernel: &str) -> usize {
    g.nodes.iter().filter(|n| n.kernel == kernel).count()
}

fn index_of(g: &KernelGraph, name: &str) -> usize {
    g.nodes
        .iter()
        .position(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

fn f32_tensor(shape: &[i64], seed: u64) -> HostTensor {
    let n = shape.iter().product::<i64>() as usize;
    HostTensor {
        dtype: DType::F32,
        shape: shape.to_vec(),
        data: seeded_f32(n, seed, 1.0)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    }
}

/// Two executions (the second reuses every planned byte the first wrote), then unload.
fn run_twice(eg: &ExecuteGraph, executor: ExecutorType, inputs: &[HostTensor]) -> Vec<Vec<u8>> {
    let device = Device::new(DeviceConfig::default());
    let mut ex = ModelV2Executor::create(
        eg,
        &device,
        ExecutorOptions {
            executor,
            ..ExecutorOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: create: {e}", executor.name()));
    ex.load()
        .unwrap_or_else(|e| panic!("{}: load: {e}", executor.name()));
    let refs: Vec<&HostTensor> = inputs.iter().collect();
    let mut out = Vec::new();
    let mut all = Vec::new();
    for _ in 0..2 {
        ex.execute_sync(&refs, &mut out)
            .unwrap_or_else(|e| panic!("{}: execute: {e}", executor.name()));
        all.extend(out.iter().map(|t| t.data.to_vec()));
    }
    ex.unload()
        .unwrap_or_else(|e| panic!("{}: unload: {e}", executor.name()));
    all
}

/// Every engine on the planned model (with the multi-thread passes for topo-mt) gives
/// the unplanned model's bytes under seq; returns how many tensors were planned.
fn same_bits_planned(what: &str, onnx: &[u8], inputs: &[HostTensor]) -> usize {
    let plain = lowered(onnx, LowerOptions::default());
    let want = run_twice(&plain, ExecutorType::Sequential, inputs);
    let planned = lowered(
        onnx,
        LowerOptions {
            static_memory: true,
            ..LowerOptions::default()
        },
    );
    let planned_mt = lowered(
        onnx,
        LowerOptions {
            static_memory: true,
            multi_thread: true,
            ..LowerOptions::default()
        },
    );
    for executor in ExecutorType::ALL {
        let eg = match executor {
            ExecutorType::TopologicalMultiThread => &planned_mt,
            _ => &planned,
        };
        let got = run_twice(eg, executor, inputs);
        assert!(
            got == want,
            "{what}: {} on the planned model differs from the unplanned one",
            executor.name()
        );
    }
    count(&planned.init, "MemoryView")
}

#[test]
fn a_chain_reuses_two_places_and_orders_each_reuse() {
    // 6 Adds: v0..v4 are planned; v5, the model output, keeps its allocation.
    let onnx = add_chain_model(6, 16);
    let plain = lowered(&onnx, LowerOptions::default());
    let eg = lowered(
        &onnx,
        LowerOptions {
            static_memory: true,
            ..LowerOptions::default()
        },
    );
    assert_eq!(count(&eg.init, "MemoryView"), 5);
    assert_eq!(
        count(&plain.main, "AllocMemHbm") - count(&eg.main, "AllocMemHbm"),
        5
    );
    assert_eq!(
        count(&plain.main, "FreeMemory") - count(&eg.main, "FreeMemory"),
        5
    );
    // Two tensors of 64 bytes live at a time: v0 and v1, then v2 takes v0's place...
    let block = &eg.init.nodes[index_of(&eg.init, "feature_memory")];
    assert_eq!(block.attr_int("size"), Some(128));
    let offsets: Vec<i64> = (0..5)
        .map(|k| {
            let view =
                &eg.init.nodes[index_of(&eg.init, &format!("add{k}/AllocMemHbm_0/MemoryView"))];
            view.attr_int("offset").unwrap()
        })
        .collect();
    assert_eq!(offsets, [0, 64, 0, 64, 0]);
    // ...so the launch writing v2 waits for add0's launch, which wrote v0 (add1's, which
    // read it, it waits for already).
    for k in 2..5 {
        let w = index_of(&eg.main, &format!("add{k}/LaunchKernelWithHandle"));
        let before = index_of(&eg.main, &format!("add{}/LaunchKernelWithHandle", k - 2));
        assert!(
            eg.main.nodes[w]
                .control_inputs
                .iter()
                .any(|c| c.index() == before),
            "add{k} is not ordered after add{}",
            k - 2
        );
    }
    // DeInit gives the block back before the allocator goes.
    let free = index_of(&eg.deinit, "feature_memory/FreeMemory");
    let destroy = index_of(&eg.deinit, "DestroyAllocator");
    assert!(
        eg.deinit.nodes[destroy]
            .control_inputs
            .iter()
            .any(|c| c.index() == free)
    );
    // Planning again finds nothing left to plan.
    let mut again = eg.clone();
    let planned = rt2::lower::static_memory_pass(&mut again).unwrap();
    assert_eq!(planned.tensors, 0);
    assert_eq!(again, eg);

    let x = f32_tensor(&[1, 16], 3);
    let n = same_bits_planned("chain", &onnx, std::slice::from_ref(&x));
    assert_eq!(n, 5);
    // And the values are the sums: x + 6 * 0.25.
    let out = run_twice(&eg, ExecutorType::Sequential, std::slice::from_ref(&x));
    let xs: Vec<f32> = x
        .data
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let got: Vec<f32> = out[0]
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| (0..6).fold(v, |a, _| a + 0.25))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn an_encoder_block_at_a_fixed_length_computes_the_same_bits_planned() {
    // Attention's three projections and the heads run in parallel under topo-mt, over
    // memory that the plan shares between tensors of different branches.
    let sizes = EncoderBlock {
        d_model: 64,
        heads: 4,
        ffn: 128,
    };
    let onnx = encoder_block_model(sizes, Some(8));
    let x = f32_tensor(&[8, 64], 5);
    let n = same_bits_planned("encoder", &onnx, &[x]);
    assert!(n >= 20, "only {n} tensors planned");
}

/// The bundled models with the inputs of their data set (`input_N.pb`); SqueezeNet, whose
/// shapes are all static, with the runner's `arange(n) / n`.
#[test]
fn bundled_models_compute_the_same_bits_planned() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models");
    for name in ["cnn_bn", "nested_if_weights", "loop_counter", "lstm"] {
        let path = dir.join(format!("{name}.onnx"));
        let onnx = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let set = dir.join(name).join("test_data_set_0");
        let mut inputs = Vec::new();
        for k in 0.. {
            let p = set.join(format!("input_{k}.pb"));
            let Ok(bytes) = std::fs::read(&p) else { break };
            let t = rt2::om::onnx::read_tensor(&bytes, &p.display().to_string())
                .ok()
                .and_then(|t| rt2::lower::attrs::tensor(&t))
                .unwrap_or_else(|| panic!("{}: a tensor", p.display()));
            inputs.push(t);
        }
        assert!(!inputs.is_empty(), "{name}: no inputs");
        same_bits_planned(name, &onnx, &inputs);
    }

    let onnx = std::fs::read(dir.join("light_squeezenet.onnx")).expect("squeezenet");
    let n = 3 * 224 * 224;
    let x = HostTensor {
        dtype: DType::F32,
        shape: vec![1, 3, 224, 224],
        data: (0..n)
            .flat_map(|i| (i as f32 / n as f32).to_le_bytes())
            .collect(),
    };
    let planned = same_bits_planned("squeezenet", &onnx, &[x]);
    // 40 since its 26 conv Relus fuse into the convolutions (lower/fuse.rs).
    assert!(planned >= 38, "only {planned} tensors planned");
}

/// Executions of one planned model on two streams, issued without waiting in between:
/// each must see its own inputs through the whole chain although both use the same
/// feature memory (the executor orders a stream switch after the last stream's work).
#[test]
fn executions_switching_streams_keep_their_own_values() {
    use rt2::exec::runtime::ModelExecuteArg;
    let onnx = add_chain_model(200, 256);
    let eg = lowered(
        &onnx,
        LowerOptions {
            static_memory: true,
            ..LowerOptions::default()
        },
    );
    let plain = lowered(&onnx, LowerOptions::default());
    let device = Device::new(DeviceConfig::default());
    let mut ex = ModelV2Executor::create(&eg, &device, ExecutorOptions::default()).unwrap();
    ex.load().unwrap();
    let streams = [device.create_stream(), device.create_stream()];
    let inputs: Vec<HostTensor> = (0..6).map(|k| f32_tensor(&[1, 256], 20 + k)).collect();
    // Both streams held up by a host callback, so that both executions queue and then
    // run at once on the two stream workers.
    for &s in &streams {
        let hold: rt2::npu::device::Callback = std::sync::Arc::new(|| {
            std::thread::sleep(std::time::Duration::from_millis(30));
            Ok(())
        });
        device
            .submit(s, rt2::npu::device::Task::Callback(hold))
            .unwrap();
    }
    let mut pending = Vec::new();
    for (k, x) in inputs.iter().enumerate() {
        let arg = ModelExecuteArg {
            stream: Some(streams[k % 2]),
            allocator: None,
        };
        let mut outs = Vec::new();
        let s = ex.execute(&arg, &[x], &mut outs).unwrap();
        pending.push((s, outs));
    }
    for ((s, outs), x) in pending.into_iter().zip(&inputs) {
        device.synchronize(s).unwrap();
        let mut got = vec![0u8; outs[0].mem.bytes];
        device.memcpy_d2h(&mut got, outs[0].mem.ptr).unwrap();
        outs[0]
            .mem
            .allocator
            .free(outs[0].mem.ptr, outs[0].mem.bytes)
            .unwrap();
        let want = run_twice(&plain, ExecutorType::Sequential, std::slice::from_ref(x));
        assert!(got == want[0], "an execution saw another one's values");
    }
    ex.unload().unwrap();
}

/// The device's caching allocator, recording what it was asked for.
#[derive(Debug)]
struct Recording {
    inner: rt2::exec::runtime::CachingAllocator,
    allocs: std::sync::Mutex<Vec<usize>>,
    frees: std::sync::atomic::AtomicUsize,
}

impl rt2::exec::runtime::DeviceAllocator for Recording {
    fn alloc(&self, bytes: usize) -> Result<rt2::npu::DevicePtr, rt2::npu::NpuError> {
        self.allocs.lock().unwrap().push(bytes);
        self.inner.alloc(bytes)
    }
    fn free(&self, ptr: rt2::npu::DevicePtr, bytes: usize) -> Result<(), rt2::npu::NpuError> {
        self.frees.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.free(ptr, bytes)
    }
    fn stream(&self) -> rt2::npu::StreamId {
        self.inner.stream()
    }
}

/// An execution with an external allocator takes the planned tensors' memory from it
/// (one block for the execution, given back once submitted), not from the block Init
/// allocated; executions before and after on the model's own allocator, and on another
/// stream, still compute their own values.
#[test]
fn an_external_allocator_serves_the_planned_tensors() {
    use rt2::exec::runtime::ModelExecuteArg;
    let onnx = add_chain_model(50, 64);
    let mut eg = lowered(&onnx, LowerOptions::default());
    let planned = rt2::lower::static_memory_pass(&mut eg).unwrap();
    assert!(planned.tensors > 0 && planned.bytes > 0);
    let plain = lowered(&onnx, LowerOptions::default());
    let device = Device::new(DeviceConfig::default());
    let mut ex = ModelV2Executor::create(&eg, &device, ExecutorOptions::default()).unwrap();
    ex.load().unwrap();
    let own = ex.model_stream().unwrap();
    let other = device.create_stream();
    for (k, stream) in [None, Some(own), None, Some(other), None]
        .into_iter()
        .enumerate()
    {
        let x = f32_tensor(&[1, 64], 40 + k as u64);
        let want = run_twice(&plain, ExecutorType::Sequential, std::slice::from_ref(&x));
        let rec = std::sync::Arc::new(Recording {
            inner: rt2::exec::runtime::CachingAllocator::new(device.clone(), stream.unwrap_or(own)),
            allocs: Default::default(),
            frees: Default::default(),
        });
        let arg = ModelExecuteArg {
            stream,
            allocator: stream.map(|_| rec.clone() as _),
        };
        let mut outs = Vec::new();
        ex.execute_sync_with(&arg, &[&x], &mut outs).unwrap();
        assert!(
            outs[0].data == want[0],
            "execution {k} computed other values"
        );
        if stream.is_some() {
            let allocs = rec.allocs.lock().unwrap().clone();
            assert!(
                allocs.contains(&planned.bytes),
                "execution {k}: the external allocator was not asked for the {} byte block: {allocs:?}",
                planned.bytes
            );
            assert_eq!(
                rec.frees.load(std::sync::atomic::Ordering::SeqCst),
                allocs.len(),
                "execution {k}: what the execution allocated was not all given back"
            );
        }
    }
    ex.unload().unwrap();
}

/// A UNet's decoder step and a DenseNet's concatenation in one model: a Concat of one
/// image along its channels whose inputs are an upsampled map, the skip connection (read
/// again after the Concat's readers are done) and a map computed from the skip (its
/// writer reads another input of the same Concat). Its inputs are placed side by side in
/// its output and its launch goes; the Concats that cannot run in place keep theirs: one
/// reading that Concat's output, one with an input repeated, one along an axis with a
/// dim before it larger than 1, one of the model's input.
#[test]
fn a_concat_of_one_image_runs_in_place_in_its_inputs_places() {
    use rt2::om::onnx::builder::{Dim, OnnxBuilder, attr_i, attr_ints, attr_s, tensor_f32};
    const F32: i32 = 1;
    let d = |v: &[i64]| v.iter().map(|&x| Dim::Value(x)).collect::<Vec<_>>();
    let onnx = OnnxBuilder::new("decoder")
        .input("x", F32, &d(&[1, 4, 8, 8]))
        .initializer(tensor_f32("scales", &[4], &[1.0, 1.0, 2.0, 2.0]))
        .initializer(tensor_f32("w", &[3, 24, 1, 1], &seeded_f32(72, 9, 0.5)))
        .named_node("skip", "Sigmoid", &["x"], &["s"], vec![])
        .named_node(
            "pool",
            "MaxPool",
            &["s"],
            &["p"],
            vec![
                attr_ints("kernel_shape", &[2, 2]),
                attr_ints("strides", &[2, 2]),
            ],
        )
        .named_node(
            "up",
            "Resize",
            &["p", "", "scales"],
            &["u"],
            vec![attr_s("mode", "nearest")],
        )
        .named_node("dense", "Tanh", &["s"], &["t"], vec![])
        .named_node(
            "cat",
            "Concat",
            &["u", "s", "t"],
            &["c"],
            vec![attr_i("axis", 1)],
        )
        .named_node("act", "Relu", &["c"], &["r"], vec![])
        .named_node(
            "cat_of_cat",
            "Concat",
            &["c", "r"],
            &["c2"],
            vec![attr_i("axis", -3)],
        )
        .named_node("head", "Conv", &["c2", "w"], &["y"], vec![])
        .named_node("neg", "Neg", &["x"], &["n"], vec![])
        .named_node(
            "twice",
            "Concat",
            &["n", "n"],
            &["w2"],
            vec![attr_i("axis", 1)],
        )
        .named_node("exp", "Exp", &["x"], &["e"], vec![])
        .named_node(
            "rows",
            "Concat",
            &["e", "t"],
            &["k"],
            vec![attr_i("axis", 2)],
        )
        .named_node(
            "input",
            "Concat",
            &["x", "e"],
            &["xi"],
            vec![attr_i("axis", 1)],
        )
        .named_node("late", "Abs", &["s"], &["z"], vec![])
        .output("y", F32, &d(&[1, 3, 8, 8]))
        .output("w2", F32, &d(&[1, 8, 8, 8]))
        .output("k", F32, &d(&[1, 4, 16, 8]))
        .output("xi", F32, &d(&[1, 8, 8, 8]))
        .output("z", F32, &d(&[1, 4, 8, 8]))
        .build();
    let concats = |g: &KernelGraph| {
        g.nodes
            .iter()
            .filter(|n| n.attrs.get("_op_type").and_then(|a| a.as_str()) == Some("Concat"))
            .count()
    };
    let mut eg = lowered(&onnx, LowerOptions::default());
    assert_eq!(concats(&eg.main), 5);
    let planned = rt2::lower::static_memory_pass(&mut eg).unwrap();
    assert_eq!(planned.concats, 1);
    assert_eq!(concats(&eg.main), 4);
    assert!(
        !eg.main
            .nodes
            .iter()
            .any(|n| n.name.starts_with("cat/Launch")),
        "the Concat in place still launches"
    );
    // Its inputs' places are its output's, one after another (1 KiB each).
    let offset = |name: &str| {
        let view = &eg.init.nodes[index_of(&eg.init, &format!("{name}/AllocMemHbm_0/MemoryView"))];
        (
            view.attr_int("offset").unwrap(),
            view.attr_int("size").unwrap(),
        )
    };
    let (at, size) = offset("cat");
    assert_eq!(size, 3 * 1024);
    assert_eq!(offset("up"), (at, 1024));
    assert_eq!(offset("skip"), (at + 1024, 1024));
    assert_eq!(offset("dense"), (at + 2048, 1024));
    // What read the Concat's output now waits for the writers of its inputs.
    let act = &eg.main.nodes[index_of(&eg.main, "act/LaunchKernelWithHandle")];
    for writer in ["up", "skip", "dense"] {
        let w = index_of(&eg.main, &format!("{writer}/LaunchKernelWithHandle"));
        assert!(
            act.control_inputs.iter().any(|c| c.index() == w),
            "act does not wait for {writer}"
        );
    }
    // Planning again finds nothing more.
    let mut again = eg.clone();
    assert_eq!(
        rt2::lower::static_memory_pass(&mut again).unwrap(),
        Default::default()
    );

    // The values are the copying Concat's, under every engine, executions reusing the
    // bytes the one before wrote.
    let x = f32_tensor(&[1, 4, 8, 8], 21);
    same_bits_planned("decoder", &onnx, &[x]);
}
