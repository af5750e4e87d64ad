//! The model executor: GE's `ModelV2Executor` and `StreamExecutor`.
//!
//! Lifecycle: [`ModelV2Executor::create`] prepares the three graphs (every kernel
//! resolved; a missing one is an error naming the node); [`ModelV2Executor::load`] runs
//! Init and binds its exports into Main and DeInit; [`ModelV2Executor::execute`] binds the
//! inputs, runs Main on the argument's stream and hands out the outputs in device memory;
//! [`ModelV2Executor::execute_sync`] does that on the model's stream, waits, downloads and
//! frees; [`ModelV2Executor::unload`] runs DeInit. Using it out of order is an error
//! naming the state, never a panic.
//!
//! Steady state: input slots, shapes, host tensors and launch records are rewritten in
//! place, so executing a static model again allocates nothing on the host (a test counts).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::exec::{ExecuteGraph, GraphKind, ModelIo};
use crate::npu::device::{Device, DevicePtr, StreamId};
use crate::ops::OpRegistry;
use crate::ops::{DType, HostTensor};

use super::context::{DEFAULT_MAX_ITERATIONS, Env, ExecutorType, Subscriber};
use super::engine;
use super::error::{ExecError, ExecutorStatus, IoError, LoadError, StateError};
use super::kernels::{host_resize, tensor_bytes};
use super::plan::{ExecState, Plan, prepare};
use super::registry::KernelRegistry;
use super::value::{CachingAllocator, DeviceAllocator, Mem, OutputTensor, Value};

mod graph_mode;

/// Where and with what an execution runs (GE's `ModelExecuteArg`).
#[derive(Debug, Clone, Default)]
pub struct ModelExecuteArg {
    /// The stream Main's work goes to; `None`: the model's own stream.
    pub stream: Option<StreamId>,
    /// An external allocator for that stream; `None`: the device's caching allocator.
    /// External allocators come all or none; the emulated device has only device memory,
    /// so this is the one there is.
    pub allocator: Option<Arc<dyn DeviceAllocator>>,
}

/// How an executor is built.
#[derive(Clone)]
pub struct ExecutorOptions {
    pub executor: ExecutorType,
    pub subscriber: Option<Arc<dyn Subscriber>>,
    /// The kernels; `None`: [`KernelRegistry::builtin`].
    pub kernels: Option<Arc<KernelRegistry>>,
    /// The most iterations a loop node runs in one execution ([`Env::max_iterations`]).
    pub max_iterations: u64,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        ExecutorOptions {
            executor: ExecutorType::default(),
            subscriber: None,
            kernels: None,
            max_iterations: DEFAULT_MAX_ITERATIONS,
        }
    }
}

pub struct ModelV2Executor {
    env: Env,
    name: String,
    inputs: Vec<ModelIo>,
    outputs: Vec<ModelIo>,
    init: Plan,
    main: Plan,
    deinit: Plan,
    main_state: Option<ExecState>,
    exports: Vec<Value>,
    status: ExecutorStatus,
    /// Main's slots holding the streams and the allocator, as Init made them.
    stream_slots: Vec<(u32, Arc<[StreamId]>)>,
    allocator_slots: Vec<(u32, Arc<dyn DeviceAllocator>)>,
    /// The stream Main is bound to now.
    bound_stream: Option<StreamId>,
    /// Caching allocators made for other streams, reused when a stream comes back.
    stream_allocators: Vec<(StreamId, Arc<dyn DeviceAllocator>)>,
    iterations: u64,
    /// Main captured for replay (graph mode).
    graph: Option<graph_mode::Graph>,
    /// Main's feature memory, when its tensors have places in one block (static memory
    /// planning, `lower::passes::memory`).
    feature: Option<Feature>,
}

/// Main's planned tensors: the block Init allocated, and each view Main reads.
///
/// One block serves the model's own stream. An execution on another stream gets a block
/// of its own from that stream's allocator (kept until unload), and one with an
/// external allocator a block from it for that execution, freed once the execution is
/// submitted (the allocator's frees are stream-ordered): so the planned tensors never
/// bypass the caller's allocator, and executions on several streams never share bytes
/// and need not wait for each other. Switching blocks rebinds the views, one slot write
/// per planned tensor, not per node.
#[derive(Debug)]
struct Feature {
    /// Init's block, on the model's stream.
    block: Mem,
    /// `(Main slot, offset in the block, bytes)` of each view Main reads.
    views: Vec<(u32, u64, usize)>,
    /// The block base the views point into now.
    bound: DevicePtr,
    /// Blocks made for other streams.
    streams: Vec<(StreamId, Mem)>,
}

impl std::fmt::Debug for ModelV2Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelV2Executor")
            .field("name", &self.name)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

fn state_error(action: &'static str, status: ExecutorStatus) -> ExecError {
    ExecError::State(StateError::Status { action, status })
}

impl ModelV2Executor {
    /// Prepares `eg` to run on `device`.
    pub fn create(
        eg: &ExecuteGraph,
        device: &Device,
        options: ExecutorOptions,
    ) -> Result<Self, ExecError> {
        let builtin;
        let kernels: &KernelRegistry = match &options.kernels {
            Some(k) => k,
            None => {
                builtin = KernelRegistry::builtin();
                builtin
            }
        };
        let ops: Arc<OpRegistry> = Arc::new(OpRegistry::new());
        let plan = |k: GraphKind| prepare(eg.graph(k), k.name(), kernels, &ops);
        for (i, io) in eg.inputs.iter().enumerate() {
            if io.dtype.is_none() {
                return Err(ExecError::Load {
                    graph: "model".into(),
                    node: io.name.clone(),
                    source: LoadError::Invalid(format!(
                        "input {i} has a type the emulated device does not compute on"
                    )),
                });
            }
        }
        // A compiled kernel rt2 has no compute for is refused here, all of them at once,
        // rather than when its launch runs.
        let missing = super::kernels::ops_without_compute(eg, &ops);
        if !missing.is_empty() {
            return Err(ExecError::NoCompute(missing));
        }
        Ok(ModelV2Executor {
            init: plan(GraphKind::Init)?,
            main: plan(GraphKind::Main)?,
            deinit: plan(GraphKind::DeInit)?,
            env: Env {
                device: device.clone(),
                ops,
                executor: options.executor,
                subscriber: options.subscriber,
                max_iterations: options.max_iterations,
            },
            name: eg.name.clone(),
            inputs: eg.inputs.clone(),
            outputs: eg.outputs.clone(),
            main_state: None,
            exports: Vec::new(),
            status: ExecutorStatus::Created,
            stream_slots: Vec::new(),
            allocator_slots: Vec::new(),
            bound_stream: None,
            stream_allocators: Vec::new(),
            iterations: 0,
            graph: None,
            feature: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn executor_type(&self) -> ExecutorType {
        self.env.executor
    }
    pub fn inputs(&self) -> &[ModelIo] {
        &self.inputs
    }
    pub fn outputs(&self) -> &[ModelIo] {
        &self.outputs
    }
    /// Completed executions since load (GE's `GetIterationNum`).
    pub fn iteration_num(&self) -> u64 {
        self.iterations
    }
    /// The prepared graph of `kind`.
    pub fn plan(&self, kind: GraphKind) -> &Plan {
        match kind {
            GraphKind::Init => &self.init,
            GraphKind::Main => &self.main,
            GraphKind::DeInit => &self.deinit,
        }
    }
    pub fn device(&self) -> &Device {
        &self.env.device
    }

    /// Runs Init, then binds its exports into Main and DeInit.
    pub fn load(&mut self) -> Result<(), ExecError> {
        if self.status != ExecutorStatus::Created {
            return Err(state_error("load", self.status));
        }
        let mut st = self.init.new_state();
        engine::run(&self.env, &self.init, &mut st)?;
        self.exports = self
            .init
            .output_slots()
            .iter()
            .map(|&s| st.arena.slot(s).clone())
            .collect();
        // Init's uploads complete before Main reads them from any stream.
        for v in &self.exports {
            if let Value::Streams(s) = v {
                for &id in s.iter() {
                    self.env.device.synchronize(id)?;
                }
            }
        }
        let mut main = self.main.new_state();
        bind_exports(&self.main, &mut main, &self.exports)?;
        self.feature = feature(&self.init, &mut st, &self.main, &self.exports)?;
        for &(index, slot) in &self.main.inner_data {
            match &self.exports[index] {
                Value::Streams(s) => self.stream_slots.push((slot, s.clone())),
                Value::Allocator(a) => self.allocator_slots.push((slot, a.clone())),
                _ => {}
            }
        }
        self.bound_stream = self.stream_slots.first().map(|(_, s)| s[0]);
        self.main_state = Some(main);
        self.status = ExecutorStatus::Loaded;
        Ok(())
    }

    /// The model's own stream (Init's first), once loaded.
    pub fn model_stream(&self) -> Option<StreamId> {
        self.stream_slots.first().map(|(_, s)| s[0])
    }

    /// Points Main's stream and allocator values at `arg`'s.
    fn bind_stream(&mut self, arg: &ModelExecuteArg) -> Result<StreamId, ExecError> {
        let own = self
            .model_stream()
            .ok_or(ExecError::State(StateError::NoStream))?;
        let stream = arg.stream.unwrap_or(own);
        if let Some(a) = &arg.allocator
            && a.stream() != stream
        {
            return Err(ExecError::State(StateError::AllocatorStream {
                allocator: a.stream().0,
                stream: stream.0,
            }));
        }
        if self.bound_stream == Some(stream) && arg.allocator.is_none() {
            return Ok(stream);
        }
        let st = self.main_state.as_mut().expect("loaded");
        for (slot, streams) in &self.stream_slots {
            let mut s: Vec<StreamId> = streams.to_vec();
            s[0] = stream;
            *st.arena.slot_mut(*slot) = Value::Streams(s.into());
        }
        let allocator: Arc<dyn DeviceAllocator> = match &arg.allocator {
            Some(a) => a.clone(),
            None if stream == own => match self.allocator_slots.first() {
                Some((_, a)) => a.clone(),
                None => Arc::new(CachingAllocator::new(self.env.device.clone(), stream)),
            },
            None => match self.stream_allocators.iter().find(|(s, _)| *s == stream) {
                Some((_, a)) => a.clone(),
                None => {
                    let a: Arc<dyn DeviceAllocator> =
                        Arc::new(CachingAllocator::new(self.env.device.clone(), stream));
                    self.stream_allocators.push((stream, a.clone()));
                    a
                }
            },
        };
        for (slot, _) in &self.allocator_slots {
            *st.arena.slot_mut(*slot) = Value::Allocator(allocator.clone());
        }
        // An external allocator is bound for this execution only.
        self.bound_stream = if arg.allocator.is_some() {
            None
        } else {
            Some(stream)
        };
        Ok(stream)
    }

    /// Points Main's planned tensors at the feature memory for an execution of `arg` on
    /// `stream` (see [`Feature`]): Init's block, the stream's own, or one from `arg`'s
    /// external allocator, which is returned (as lent) for [`return_lent`] once the
    /// execution is submitted.
    fn bind_feature(
        &mut self,
        arg: &ModelExecuteArg,
        stream: StreamId,
    ) -> Result<Option<Mem>, ExecError> {
        let own = self.model_stream();
        let Some(f) = self.feature.as_mut() else {
            return Ok(None);
        };
        let bytes = f.block.bytes;
        let (base, lent) = if let Some(a) = &arg.allocator {
            let ptr = a.alloc(bytes)?;
            let mem = Mem {
                ptr,
                bytes,
                allocator: a.clone(),
            };
            (ptr, Some(mem))
        } else if Some(stream) == own {
            (f.block.ptr, None)
        } else if let Some((_, m)) = f.streams.iter().find(|(s, _)| *s == stream) {
            (m.ptr, None)
        } else {
            // `bind_stream` made (or found) this stream's caching allocator.
            let allocator = self
                .stream_allocators
                .iter()
                .find(|(s, _)| *s == stream)
                .map(|(_, a)| a.clone())
                .ok_or(ExecError::State(StateError::NoStream))?;
            let ptr = allocator.alloc(bytes)?;
            f.streams.push((
                stream,
                Mem {
                    ptr,
                    bytes,
                    allocator,
                },
            ));
            (ptr, None)
        };
        if base != f.bound {
            let st = self.main_state.as_mut().expect("loaded");
            for &(slot, offset, size) in &f.views {
                *st.arena.slot_mut(slot) = Value::Mem(Mem {
                    ptr: DevicePtr(base.0 + offset),
                    bytes: size,
                    allocator: f.block.allocator.clone(),
                });
            }
            f.bound = base;
        }
        Ok(lent)
    }

    /// Checks the inputs' count, types and shapes against the model's.
    fn check_inputs<I: ModelInput>(&self, inputs: &[I]) -> Result<(), ExecError> {
        if inputs.len() != self.inputs.len() {
            return Err(ExecError::Io(IoError::InputCount {
                expected: self.inputs.len(),
                given: inputs.len(),
            }));
        }
        for (i, (t, io)) in inputs.iter().zip(&self.inputs).enumerate() {
            check_input(i, t.tensor(), io)?;
        }
        Ok(())
    }

    /// Checks the inputs against the model's and binds them to Main's `Data` slots: a
    /// shared input as it is, a borrowed one copied (see [`ModelInput`]).
    fn bind_inputs<I: ModelInput>(&mut self, inputs: &[I]) -> Result<(), ExecError> {
        self.check_inputs(inputs)?;
        let st = self.main_state.as_mut().expect("loaded");
        for &(index, node) in &self.main.data {
            let input = inputs.get(index).ok_or(ExecError::Io(IoError::DataIndex {
                index,
                inputs: inputs.len(),
            }))?;
            let t = input.tensor();
            let first = self.main.recs[node as usize].out_start;
            st.arena.slot_mut(first).set_shape(t.shape.iter().copied());
            if self.main.recs[node as usize].out_len > 1 {
                let slot = st.arena.slot_mut(first + 1);
                match input.shared() {
                    // The slot's last value (this same tensor, in a loop) is released
                    // as this one is bound: a reference count down and up, no copy.
                    Some(shared) => *slot = Value::Host(shared.clone()),
                    None => {
                        let h = slot.host_mut(t.dtype);
                        h.shape.clear();
                        h.shape.extend_from_slice(&t.shape);
                        let data = h.data.to_mut();
                        data.clear();
                        data.extend_from_slice(&t.data);
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs Main on `arg`'s stream with `inputs`; `outputs` receives the model outputs in
    /// device memory (the caller's to free). Returns once the work is submitted.
    pub fn execute<I: ModelInput>(
        &mut self,
        arg: &ModelExecuteArg,
        inputs: &[I],
        outputs: &mut Vec<OutputTensor>,
    ) -> Result<StreamId, ExecError> {
        if self.status != ExecutorStatus::Loaded {
            return Err(state_error("execute", self.status));
        }
        if self.graph.is_some() {
            return Err(ExecError::State(StateError::GraphCaptured));
        }
        let stream = self.bind_stream(arg)?;
        let lent = self.bind_feature(arg, stream)?;
        self.bind_inputs(inputs)?;
        let st = self.main_state.as_mut().expect("loaded");
        let run = engine::run(&self.env, &self.main, st);
        return_lent(lent)?;
        run?;
        self.output_tensors(outputs)?;
        self.iterations += 1;
        Ok(stream)
    }

    /// The model outputs Main's run left in device memory, into `outputs`.
    fn output_tensors(&mut self, outputs: &mut Vec<OutputTensor>) -> Result<(), ExecError> {
        let st = self.main_state.as_mut().expect("loaded");
        let slots = self.main.output_slots();
        if slots.len() != 2 * self.outputs.len() {
            return Err(ExecError::Io(IoError::OutputCount {
                values: slots.len(),
                outputs: self.outputs.len(),
            }));
        }
        outputs.clear();
        for (k, io) in self.outputs.iter().enumerate() {
            let (shape, mem) = output_pair(st, slots, k, io)?;
            outputs.push(OutputTensor {
                dtype: io.dtype.expect("checked by output_pair"),
                shape: shape.to_vec(),
                mem: mem.clone(),
            });
        }
        Ok(())
    }

    /// Runs Main on the model's stream, waits, and downloads the outputs into `outputs`
    /// (resized to the model's output count; each tensor's storage is reused), freeing
    /// their device memory.
    pub fn execute_sync<I: ModelInput>(
        &mut self,
        inputs: &[I],
        outputs: &mut Vec<HostTensor>,
    ) -> Result<(), ExecError> {
        self.execute_sync_with(&ModelExecuteArg::default(), inputs, outputs)
    }

    /// [`Self::execute_sync`] on `arg`'s stream and allocator.
    pub fn execute_sync_with<I: ModelInput>(
        &mut self,
        arg: &ModelExecuteArg,
        inputs: &[I],
        outputs: &mut Vec<HostTensor>,
    ) -> Result<(), ExecError> {
        if self.status != ExecutorStatus::Loaded {
            return Err(state_error("execute", self.status));
        }
        if self.graph.is_some() {
            return Err(ExecError::State(StateError::GraphCaptured));
        }
        let stream = self.bind_stream(arg)?;
        let lent = self.bind_feature(arg, stream)?;
        self.bind_inputs(inputs)?;
        let st = self.main_state.as_mut().expect("loaded");
        let run = engine::run(&self.env, &self.main, st);
        let returned = return_lent(lent);
        let synced = self.env.device.synchronize(stream);
        run?;
        returned?;
        synced?;
        let slots = self.main.output_slots();
        outputs.truncate(self.outputs.len());
        while outputs.len() < self.outputs.len() {
            outputs.push(HostTensor {
                dtype: DType::F32,
                shape: Vec::new(),
                data: Default::default(),
            });
        }
        let mut first_error = None;
        for (k, io) in self.outputs.iter().enumerate() {
            let (shape, mem) = output_pair(st, slots, k, io)?;
            let dtype = io.dtype.expect("checked by output_pair");
            let out = &mut outputs[k];
            out.dtype = dtype;
            out.shape.clear();
            out.shape.extend_from_slice(shape);
            let bytes = tensor_bytes(dtype, shape)
                .map_err(|source| ExecError::Io(IoError::OutputSize { index: k, source }))?;
            let data = out.data.to_mut();
            host_resize(data, bytes)
                .map_err(|source| ExecError::Io(IoError::OutputSize { index: k, source }))?;
            let r = self
                .env
                .device
                .memcpy_d2h(data, mem.ptr)
                .and_then(|()| mem.allocator.free(mem.ptr, mem.bytes));
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        }
        if let Some(e) = first_error {
            return Err(e.into());
        }
        self.iterations += 1;
        Ok(())
    }

    /// Runs DeInit: everything Init made is released.
    pub fn unload(&mut self) -> Result<(), ExecError> {
        if self.status != ExecutorStatus::Loaded {
            return Err(state_error("unload", self.status));
        }
        self.release_graph()?;
        self.status = ExecutorStatus::Unloaded;
        if let Some(s) = self.model_stream() {
            self.env.device.synchronize(s)?;
        }
        self.main_state = None;
        // The other streams' blocks, after their work (DeInit frees Init's).
        if let Some(f) = self.feature.take() {
            for (stream, block) in f.streams {
                self.env.device.synchronize(stream)?;
                block.allocator.free(block.ptr, block.bytes)?;
            }
        }
        let mut st = self.deinit.new_state();
        bind_exports(&self.deinit, &mut st, &self.exports)?;
        engine::run(&self.env, &self.deinit, &mut st)?;
        self.exports.clear();
        self.stream_slots.clear();
        self.allocator_slots.clear();
        self.stream_allocators.clear();
        Ok(())
    }
}

/// Graph mode (`graph.rs` has the mechanics).
impl ModelV2Executor {
    /// Captures one execution of Main with `inputs` (nothing runs); later executions are
    /// [`Self::replay_sync`]s until [`Self::release_graph`].
    pub fn capture_main(&mut self, inputs: &[&HostTensor]) -> Result<(), ExecError> {
        if self.status != ExecutorStatus::Loaded {
            return Err(state_error("capture", self.status));
        }
        if self.graph.is_some() {
            return Err(ExecError::State(StateError::GraphExists));
        }
        let default = ModelExecuteArg::default();
        let stream = self.bind_stream(&default)?;
        self.bind_feature(&default, stream)?;
        self.bind_inputs(inputs)?;
        let st = self.main_state.as_mut().expect("loaded");
        let captured = graph_mode::capture(&self.env, &self.main, st, stream, inputs)?;
        let mut outputs = Vec::with_capacity(self.outputs.len());
        self.output_tensors(&mut outputs)?;
        let g = captured.load(&self.env.device, &self.name, stream, inputs, outputs)?;
        self.graph = Some(g);
        Ok(())
    }

    /// One execution of the captured Main with `inputs` (of the captured types and
    /// shapes), waited for, its outputs downloaded into `outputs`.
    pub fn replay_sync(
        &mut self,
        inputs: &[&HostTensor],
        outputs: &mut Vec<HostTensor>,
    ) -> Result<(), ExecError> {
        let g = self
            .graph
            .as_ref()
            .ok_or(ExecError::State(StateError::NoGraph))?;
        self.check_inputs(inputs)?;
        g.replay(&self.env.device, &self.inputs, inputs, outputs)?;
        self.iterations += 1;
        Ok(())
    }

    /// Drops the captured graph: its device model, and the outputs' memory.
    pub fn release_graph(&mut self) -> Result<(), ExecError> {
        match self.graph.take() {
            Some(g) => g.release(&self.env.device),
            None => Ok(()),
        }
    }

    /// Whether a graph is captured.
    pub fn has_graph(&self) -> bool {
        self.graph.is_some()
    }
}

impl Drop for ModelV2Executor {
    fn drop(&mut self) {
        if self.status == ExecutorStatus::Loaded {
            // Nothing to report to: the resources go back as far as they can.
            let _ = self.unload();
        }
    }
}

/// Frees a feature block lent by an external allocator for one execution, once the
/// execution is submitted (stream-ordered, as every free).
fn return_lent(lent: Option<Mem>) -> Result<(), ExecError> {
    match lent {
        Some(m) => Ok(m.allocator.free(m.ptr, m.bytes)?),
        None => Ok(()),
    }
}

/// Main's feature memory after Init ran into `init_state` (`None` without static memory
/// planning): the block the `MemoryView`s cut, and the Main slots that read a view.
fn feature(
    init: &Plan,
    init_state: &mut ExecState,
    main: &Plan,
    exports: &[Value],
) -> Result<Option<Feature>, ExecError> {
    let invalid = |msg: String| ExecError::Load {
        graph: init.path.clone(),
        node: String::new(),
        source: LoadError::Invalid(msg),
    };
    let mut block: Option<Mem> = None;
    let mut view_slots = std::collections::HashSet::new();
    for (n, info) in init.infos.iter().enumerate() {
        if info.kernel != "MemoryView" {
            continue;
        }
        let Value::Mem(b) = init_state.arena.slot(init.inputs_of(n as u32)[0]) else {
            return Err(invalid(format!("MemoryView {} reads no memory", info.name)));
        };
        match &block {
            Some(k) if k.ptr != b.ptr => {
                return Err(invalid(format!(
                    "MemoryView {} cuts another block than the first view's",
                    info.name
                )));
            }
            Some(_) => {}
            None => block = Some(b.clone()),
        }
        view_slots.insert(init.recs[n].out_start);
    }
    let Some(block) = block else {
        return Ok(None);
    };
    let outputs = init.output_slots();
    let mut views = Vec::new();
    for &(index, slot) in &main.inner_data {
        if !outputs.get(index).is_some_and(|o| view_slots.contains(o)) {
            continue;
        }
        if let Some(Value::Mem(v)) = exports.get(index) {
            let offset = v.ptr.0.checked_sub(block.ptr.0).ok_or_else(|| {
                invalid(format!("Init's export {index} is a view before its block"))
            })?;
            views.push((slot, offset, v.bytes));
        }
    }
    Ok(Some(Feature {
        bound: block.ptr,
        block,
        views,
        streams: Vec::new(),
    }))
}

fn bind_exports(plan: &Plan, st: &mut ExecState, exports: &[Value]) -> Result<(), ExecError> {
    for &(index, slot) in &plan.inner_data {
        let v = exports.get(index).ok_or_else(|| ExecError::Load {
            graph: plan.path.clone(),
            node: String::new(),
            source: LoadError::Invalid(format!(
                "InnerData index {index} is beyond Init's {} exports",
                exports.len()
            )),
        })?;
        *st.arena.slot_mut(slot) = v.clone();
    }
    Ok(())
}

/// A model input as an execution takes it: the tensor, and whether it is shared.
///
/// A borrowed tensor (`&HostTensor`) is copied into the graph's input slot, since the
/// execution may outlive the borrow's use; a shared one (`Arc<HostTensor>`) is bound as
/// it is. Why both: `rt2 run` feeds the same inputs to every execution, and copying a
/// 600 KB image into the slot was 5% of a MobileNet's time, before its upload copies it
/// again.
pub trait ModelInput {
    /// The tensor.
    fn tensor(&self) -> &HostTensor;
    /// The tensor as shared, when it is: bound without a copy.
    fn shared(&self) -> Option<&Arc<HostTensor>>;
}

impl ModelInput for &HostTensor {
    fn tensor(&self) -> &HostTensor {
        self
    }
    fn shared(&self) -> Option<&Arc<HostTensor>> {
        None
    }
}

impl ModelInput for Arc<HostTensor> {
    fn tensor(&self) -> &HostTensor {
        self
    }
    fn shared(&self) -> Option<&Arc<HostTensor>> {
        Some(self)
    }
}

fn check_input(i: usize, t: &HostTensor, io: &ModelIo) -> Result<(), ExecError> {
    let bad = |msg: String| {
        ExecError::Io(IoError::Input {
            index: i,
            name: io.name.clone(),
            msg,
        })
    };
    if Some(t.dtype) != io.dtype {
        return Err(bad(format!(
            "dtype {} differs from the model's {}",
            t.dtype,
            io.dtype.map_or("(none)", |d| d.name())
        )));
    }
    let rank_known = io.shape.as_slice() != [-2];
    if rank_known
        && (io.shape.len() != t.shape.len()
            || io
                .shape
                .iter()
                .zip(&t.shape)
                .any(|(&m, &d)| m >= 0 && m != d))
    {
        return Err(bad(format!(
            "shape {:?} does not fit the model's {:?}",
            t.shape, io.shape
        )));
    }
    if t.shape.iter().any(|&d| d < 0) {
        return Err(bad(format!("shape {:?} has a negative dim", t.shape)));
    }
    let bytes = tensor_bytes(t.dtype, &t.shape).map_err(|source| {
        ExecError::Io(IoError::InputSize {
            index: i,
            name: io.name.clone(),
            source,
        })
    })?;
    if t.data.len() != bytes {
        return Err(bad(format!(
            "{} bytes of data, its shape needs {bytes}",
            t.data.len()
        )));
    }
    Ok(())
}

fn output_pair<'s>(
    st: &'s mut ExecState,
    slots: &[u32],
    k: usize,
    io: &ModelIo,
) -> Result<(&'s [i64], &'s Mem), ExecError> {
    let bad = |msg: String| {
        ExecError::Io(IoError::Output {
            index: k,
            name: io.name.clone(),
            msg,
        })
    };
    if io.dtype.is_none() {
        return Err(bad("a type the emulated device does not compute on".into()));
    }
    // SAFETY: `st` is borrowed mutably for `'s`, so no engine runs on this state and
    // nothing can write its arena while the two shared references live; the indices are
    // bounds-checked by `get`.
    let (shape, mem) = unsafe { (st.arena.get(slots[2 * k]), st.arena.get(slots[2 * k + 1])) };
    match (shape, mem) {
        (Value::Shape(s), Value::Mem(m)) => Ok((s, m)),
        (s, m) => Err(bad(format!(
            "got {} and {}, not a shape and memory",
            s.kind(),
            m.kind()
        ))),
    }
}

/// One executor per stream (GE's `StreamExecutor`): concurrent requests on different
/// streams never share execution state. Thread-safe; an executor is created and loaded on
/// its stream's first use.
pub struct StreamExecutor {
    graph: Arc<ExecuteGraph>,
    device: Device,
    options: ExecutorOptions,
    executors: Mutex<HashMap<StreamId, Arc<Mutex<ModelV2Executor>>>>,
}

impl StreamExecutor {
    pub fn new(graph: Arc<ExecuteGraph>, device: &Device, options: ExecutorOptions) -> Self {
        StreamExecutor {
            graph,
            device: device.clone(),
            options,
            executors: Mutex::new(HashMap::new()),
        }
    }

    /// The loaded executor for `stream`, created on first use.
    pub fn get_or_create_loaded(
        &self,
        stream: StreamId,
    ) -> Result<Arc<Mutex<ModelV2Executor>>, ExecError> {
        if let Some(e) = self
            .executors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&stream)
        {
            return Ok(e.clone());
        }
        // Built outside the map's lock: loading runs Init, which can take a while.
        let mut e = ModelV2Executor::create(&self.graph, &self.device, self.options.clone())?;
        e.load()?;
        let e = Arc::new(Mutex::new(e));
        let mut map = self
            .executors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(map.entry(stream).or_insert(e).clone())
    }

    /// Drops `stream`'s executor (its DeInit runs when the last handle goes).
    pub fn erase(&self, stream: StreamId) -> bool {
        self.executors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&stream)
            .is_some()
    }
}
