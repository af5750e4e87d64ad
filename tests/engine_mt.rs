//! The multi-thread engine (`topo-mt`) on real models: outputs bit-identical to `seq`
//! over many executions, a kernel failure injected at every node of Main, and running out
//! of memory at every allocation; after each failure the same executor runs again and
//! gives the right outputs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use rt2::exec::ExecuteGraph;
use rt2::exec::runtime::{
    CachingAllocator, DeviceAllocator, ExecError, ExecutorOptions, ExecutorType, KernelContext,
    KernelError, KernelRegistry, KernelResult, ModelExecuteArg, ModelV2Executor,
};
use rt2::lower::{LowerOptions, lower};
use rt2::npu::device::{Device, DeviceConfig, DevicePtr, NpuError, StreamId};
use rt2::om::file::{ReadOptions, read};
use rt2::ops::HostTensor;

const MODELS: [&str; 4] = ["cnn_bn", "nested_if_weights", "loop_counter", "lstm"];

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/models")
        .join(name)
}

/// The model lowered for the multi-thread engine, and its first data set's inputs.
fn model(name: &str) -> (ExecuteGraph, Vec<HostTensor>) {
    let bytes = std::fs::read(fixture(&format!("{name}.onnx"))).unwrap();
    let f = read(&bytes, &ReadOptions::default()).unwrap();
    let eg = lower(
        &f.root().model,
        &LowerOptions {
            multi_thread: true,
            ..LowerOptions::default()
        },
    )
    .unwrap();
    let mut inputs = Vec::new();
    for i in 0.. {
        let p = fixture(name).join(format!("test_data_set_0/input_{i}.pb"));
        if !p.is_file() {
            break;
        }
        let t = rt2::om::onnx::read_tensor(&std::fs::read(&p).unwrap(), "input").unwrap();
        inputs.push(rt2::lower::attrs::tensor(&t).unwrap());
    }
    assert_eq!(inputs.len(), eg.inputs.len(), "{name}: inputs");
    (eg, inputs)
}

fn executor(eg: &ExecuteGraph, device: &Device, options: ExecutorOptions) -> ModelV2Executor {
    let mut ex = ModelV2Executor::create(eg, device, options).unwrap();
    ex.load().unwrap();
    ex
}

fn run(ex: &mut ModelV2Executor, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, ExecError> {
    let refs: Vec<&HostTensor> = inputs.iter().collect();
    let mut outs = Vec::new();
    ex.execute_sync(&refs, &mut outs)?;
    Ok(outs)
}

fn with(executor: ExecutorType) -> ExecutorOptions {
    ExecutorOptions {
        executor,
        ..ExecutorOptions::default()
    }
}

/// `seq`'s outputs for the model lowered without the multi-thread passes: the reference.
/// (The single-thread engines do not honour relations, so they run the plain lowering.)
fn reference(name: &str, inputs: &[HostTensor]) -> Vec<HostTensor> {
    let bytes = std::fs::read(fixture(&format!("{name}.onnx"))).unwrap();
    let f = read(&bytes, &ReadOptions::default()).unwrap();
    let eg = lower(&f.root().model, &LowerOptions::default()).unwrap();
    let device = Device::new(DeviceConfig::default());
    run(
        &mut executor(&eg, &device, with(ExecutorType::Sequential)),
        inputs,
    )
    .unwrap()
}

fn assert_same(name: &str, got: &[HostTensor], want: &[HostTensor]) {
    assert_eq!(got.len(), want.len(), "{name}: output count");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            (g.dtype, &g.shape),
            (w.dtype, &w.shape),
            "{name}: output {k}"
        );
        assert!(g.data == w.data, "{name}: output {k} differs from seq");
    }
}

#[test]
fn the_fixtures_have_relations() {
    // The relation path is exercised only if lowering made relations.
    let (eg, _) = model("cnn_bn");
    assert!(!eg.main.free_launch.is_empty());
    let (eg, _) = model("loop_counter");
    let mut nested = 0;
    for n in &eg.main.nodes {
        for s in &n.subgraphs {
            s.walk(&mut |g| nested += g.free_launch.len());
        }
    }
    assert!(nested > 0, "loop_counter's body has relations");
}

#[test]
fn stress_bit_identical_to_seq() {
    for name in MODELS {
        let (eg, inputs) = model(name);
        let want = reference(name, &inputs);
        let device = Device::new(DeviceConfig::default());
        // Fresh executors (pools made and joined), then one executor many times.
        for _ in 0..5 {
            let mut ex = executor(&eg, &device, with(ExecutorType::TopologicalMultiThread));
            assert_same(name, &run(&mut ex, &inputs).unwrap(), &want);
        }
        let mut ex = executor(&eg, &device, with(ExecutorType::TopologicalMultiThread));
        for _ in 0..100 {
            assert_same(name, &run(&mut ex, &inputs).unwrap(), &want);
        }
    }
}

/// Whether the `@fail` kernels fail now. Only `kernel_failure_at_every_node` arms it.
static ARMED: AtomicBool = AtomicBool::new(false);

/// Fails while armed; otherwise runs the kernel the node had before the test renamed it.
fn fail_or_forward(cx: &mut KernelContext<'_>) -> KernelResult {
    if ARMED.load(Ordering::SeqCst) {
        return Err(KernelError::new("injected failure"));
    }
    let kernel = cx.info().kernel;
    let original = kernel.strip_suffix("@fail").expect("a wrapped kernel");
    let info = KernelRegistry::builtin()
        .find(original)
        .expect("a builtin kernel");
    (info.funcs.run)(cx)
}

/// The builtin kernels plus `<name>@fail` for each: the same kernel (class, hooks) whose
/// run fails while [`ARMED`].
fn failing_registry() -> Arc<KernelRegistry> {
    let mut reg = KernelRegistry::builtin().clone();
    for name in KernelRegistry::builtin().names() {
        let mut info = *KernelRegistry::builtin().find(name).unwrap();
        info.funcs.run = fail_or_forward;
        reg.register(Box::leak(format!("{name}@fail").into_boxed_str()), info);
    }
    Arc::new(reg)
}

#[test]
fn kernel_failure_at_every_node() {
    let reg = failing_registry();
    for name in ["cnn_bn", "loop_counter"] {
        let (eg, inputs) = model(name);
        let want = reference(name, &inputs);
        let device = Device::new(DeviceConfig::default());
        let options = ExecutorOptions {
            executor: ExecutorType::TopologicalMultiThread,
            kernels: Some(reg.clone()),
            ..ExecutorOptions::default()
        };
        let probe = executor(&eg, &device, options.clone());
        let plan = probe.plan(rt2::exec::GraphKind::Main);
        let run_nodes: Vec<usize> = (0..eg.main.nodes.len())
            .filter(|&k| {
                !matches!(
                    plan.infos[k].kernel,
                    "Data" | "InnerData" | "Const" | "ConstData"
                )
            })
            .collect();
        drop(probe);
        for k in run_nodes {
            let mut g = eg.clone();
            let node = &mut g.main.nodes[k];
            node.kernel = format!("{}@fail", node.kernel).into();
            let failing = node.name.clone();
            let mut ex = executor(&g, &device, options.clone());
            ARMED.store(true, Ordering::SeqCst);
            let r = run(&mut ex, &inputs);
            ARMED.store(false, Ordering::SeqCst);
            match r {
                Err(ExecError::Kernel { node, source, .. }) => {
                    assert_eq!(node, failing, "{name}: the first error names the node");
                    assert_eq!(source, KernelError::new("injected failure"));
                }
                r => panic!("{name}: node {failing}: expected its failure, got {r:?}"),
            }
            assert_same(name, &run(&mut ex, &inputs).unwrap(), &want);
        }
    }
}

/// The device's caching allocator, refusing every allocation after the first `left`.
#[derive(Debug)]
struct Limited {
    inner: CachingAllocator,
    left: AtomicI64,
    made: AtomicI64,
}

impl DeviceAllocator for Limited {
    fn alloc(&self, bytes: usize) -> Result<DevicePtr, NpuError> {
        if self.left.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(NpuError::OutOfMemory {
                requested: bytes as u64,
                capacity: 0,
                allocated: 0,
                cached: 0,
            });
        }
        self.made.fetch_add(1, Ordering::SeqCst);
        self.inner.alloc(bytes)
    }
    fn free(&self, ptr: DevicePtr, bytes: usize) -> Result<(), NpuError> {
        self.inner.free(ptr, bytes)
    }
    fn stream(&self) -> StreamId {
        self.inner.stream()
    }
}

#[test]
fn out_of_memory_at_every_allocation() {
    for name in ["cnn_bn", "loop_counter"] {
        let (eg, inputs) = model(name);
        let want = reference(name, &inputs);
        let device = Device::new(DeviceConfig::default());
        let mut ex = executor(&eg, &device, with(ExecutorType::TopologicalMultiThread));
        let stream = ex.model_stream().unwrap();
        let limited = |left| {
            Arc::new(Limited {
                inner: CachingAllocator::new(device.clone(), stream),
                left: AtomicI64::new(left),
                made: AtomicI64::new(0),
            })
        };
        let refs: Vec<&HostTensor> = inputs.iter().collect();
        let mut outs = Vec::new();
        // How many allocations a clean execution makes.
        let counter = limited(i64::MAX);
        let arg = ModelExecuteArg {
            stream: None,
            allocator: Some(counter.clone()),
        };
        ex.execute(&arg, &refs, &mut outs).unwrap();
        device.synchronize(stream).unwrap();
        for o in &outs {
            o.mem.allocator.free(o.mem.ptr, o.mem.bytes).unwrap();
        }
        let total = counter.made.load(Ordering::SeqCst);
        assert!(total > 0, "{name}: Main allocates");
        for k in 0..total {
            let arg = ModelExecuteArg {
                stream: None,
                allocator: Some(limited(k)),
            };
            match ex.execute(&arg, &refs, &mut outs) {
                // Out of memory, in this graph or in a subgraph its owner kernels ran.
                Err(ExecError::Kernel { source, .. })
                    if matches!(source.npu_error(), Some(NpuError::OutOfMemory { .. })) => {}
                r => panic!("{name}: allocation {k} refused, got {r:?}"),
            }
            // What the aborted execution submitted runs to its end.
            device.synchronize(stream).unwrap();
            assert_same(name, &run(&mut ex, &inputs).unwrap(), &want);
        }
    }
}

#[test]
fn nested_subgraphs_honour_their_relations() {
    // loop_counter's Loop and nested_if_weights' Ifs run subgraphs from inside topo-mt;
    // the Loop body has relations of its own.
    for name in ["loop_counter", "nested_if_weights"] {
        let (eg, inputs) = model(name);
        let want = reference(name, &inputs);
        let device = Device::new(DeviceConfig::default());
        let mut ex = executor(&eg, &device, with(ExecutorType::TopologicalMultiThread));
        for _ in 0..3 {
            assert_same(name, &run(&mut ex, &inputs).unwrap(), &want);
        }
    }
}
