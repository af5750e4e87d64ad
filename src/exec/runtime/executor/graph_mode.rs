//! Graph mode (`rt2 run --graph`): Main's device work captured once as a device model and
//! replayed, the way PyTorch's NPUGraph or CUDA Graphs replay a captured step.
//!
//! `ModelV2Executor::capture_main` runs Main once with the model's stream capturing
//! ([`Device::begin_capture`](crate::npu::Device::begin_capture)): the host kernels run as usual
//! (shape inference, allocation, launch records), every device task is recorded instead of run, and
//! the recorded list becomes a one-stream device model. A replay
//! (`ModelV2Executor::replay_sync`) writes the new inputs into the staging buffers the
//! captured uploads read, executes the model, and downloads the outputs from the memory
//! the capture allocated for them: no engine, no kernel function, no allocation on the
//! host per node.
//!
//! What makes a Main capturable, checked at capture: its shapes are static for the inputs
//! (a replay must get inputs of the captured types and shapes, and the captured values of
//! any input a host kernel reads, such as a loop's trip count); nothing in it reads device
//! memory on the host (a synchronize of the capturing stream is an error); no
//! data-dependent launch; and every host-to-device copy it makes uploads a model input (a
//! host value computed in Main could not be refilled). While a graph exists the executor
//! refuses plain executions: the memory the captured model uses is the executor's
//! caching allocator's, and a plain run could hand it out again.
//!
//! This file holds the mechanics (the capture run and its checks, the replay, the
//! release); the executor, above it, holds the graph and the lifecycle around it.

use crate::exec::ModelIo;
use crate::npu::device::{Device, HostBuf, Model, ModelId, StreamId, Task};
use crate::ops::HostTensor;

use super::super::context::Env;
use super::super::engine;
use super::super::error::{ExecError, IoError, StateError};
use super::super::kernels::{Staging, host_resize, tensor_bytes};
use super::super::plan::{ExecState, Plan};
use super::super::value::OutputTensor;

/// A captured Main.
pub(super) struct Graph {
    model: ModelId,
    stream: StreamId,
    /// The staging buffer each captured upload of a model input reads: (input, buffer).
    refills: Vec<(usize, HostBuf)>,
    /// The inputs' shapes at capture.
    shapes: Vec<Vec<i64>>,
    /// Inputs whose values host kernels read (a loop's trip count, a shape): the capture
    /// followed those values, so a replay needs the same bytes.
    pinned: Vec<(usize, Vec<u8>)>,
    /// The outputs, in the memory the capture allocated (the graph's until released).
    outputs: Vec<OutputTensor>,
}

/// Main's device work recorded by [`capture`], not yet a device model.
pub(super) struct Captured {
    tasks: Vec<Task>,
    refills: Vec<(usize, HostBuf)>,
    pinned: Vec<(usize, Vec<u8>)>,
}

fn not_capturable(msg: impl Into<String>) -> ExecError {
    ExecError::State(StateError::NotCapturable(msg.into()))
}

/// Runs Main (`main`, in state `st`, its inputs bound to `inputs`) once on `stream` with
/// the stream capturing, and checks that what it recorded can be replayed.
pub(super) fn capture(
    env: &Env,
    main: &Plan,
    st: &mut ExecState,
    stream: StreamId,
    inputs: &[&HostTensor],
) -> Result<Captured, ExecError> {
    let device = &env.device;
    // Work issued before the capture runs before it.
    device.synchronize(stream)?;
    device.begin_capture(stream)?;
    let run = engine::run(env, main, st);
    let tasks = device.end_capture(stream);
    run.map_err(|e| ExecError::State(StateError::CaptureRun(Box::new(e))))?;
    let tasks = tasks?;

    // Each Data node's host value slot, by input index.
    let data_slots: Vec<(u32, usize)> = main
        .data
        .iter()
        .filter(|&&(_, node)| main.recs[node as usize].out_len > 1)
        .map(|&(index, node)| (main.recs[node as usize].out_start + 1, index))
        .collect();
    // The run is over and `st` is borrowed mutably, so the node states are read safely.
    let staging: Vec<Option<&Staging>> = st
        .states
        .iter_mut()
        .map(|state| state.get_mut().get::<Staging>())
        .collect();
    let staged = |node: usize| staging[node];
    let mut refills = Vec::new();
    for (node, rec) in main.recs.iter().enumerate() {
        if let Some(Staging(Some(buf), _)) = staged(node)
            && rec.in_len > 0
            && let Some(&(_, k)) = data_slots
                .iter()
                .find(|(slot, _)| *slot == main.slots_in[rec.in_start as usize])
        {
            refills.push((k, buf.clone()));
        }
    }
    // A Data value read by anything but an upload steered the host side of the run.
    let mut pinned: Vec<(usize, Vec<u8>)> = Vec::new();
    for (node, rec) in main.recs.iter().enumerate() {
        let uploads = matches!(staged(node), Some(Staging(Some(_), _)));
        let ins = &main.slots_in[rec.in_start as usize..(rec.in_start + rec.in_len) as usize];
        for (slot, k) in &data_slots {
            let read_as_value = ins
                .iter()
                .enumerate()
                .any(|(i, s)| s == slot && !(uploads && i == 0));
            if read_as_value && !pinned.iter().any(|(p, _)| p == k) {
                pinned.push((*k, inputs[*k].data.to_vec()));
            }
        }
    }
    for t in &tasks {
        if let Task::MemcpyH2D { src, .. } = t
            && !refills.iter().any(|(_, b)| b.same(src))
        {
            return Err(not_capturable(
                "Main uploads a host value it computes (not a model input), which a \
                 replay could not refill",
            ));
        }
    }
    Ok(Captured {
        tasks,
        refills,
        pinned,
    })
}

impl Captured {
    /// Loads the recorded work as a one-stream device model of the executor's model
    /// `name`, replaying into `outputs` (the capture's).
    pub(super) fn load(
        self,
        device: &Device,
        name: &str,
        stream: StreamId,
        inputs: &[&HostTensor],
        outputs: Vec<OutputTensor>,
    ) -> Result<Graph, ExecError> {
        let model = Model::builder()
            .name(format!("{name} Main (captured)"))
            .stream(self.tasks)
            .build()?;
        let model = device.load_model(&model)?;
        Ok(Graph {
            model,
            stream,
            refills: self.refills,
            shapes: inputs.iter().map(|t| t.shape.clone()).collect(),
            pinned: self.pinned,
            outputs,
        })
    }
}

impl Graph {
    /// One execution with `inputs` (checked against the model's `ios` already), waited
    /// for, its outputs downloaded into `outputs`.
    pub(super) fn replay(
        &self,
        device: &Device,
        ios: &[ModelIo],
        inputs: &[&HostTensor],
        outputs: &mut Vec<HostTensor>,
    ) -> Result<(), ExecError> {
        for (i, (t, io)) in inputs.iter().zip(ios).enumerate() {
            if t.shape != self.shapes[i] {
                return Err(not_capturable(format!(
                    "input {i} {:?} is {:?}, the graph was captured with {:?}",
                    io.name, t.shape, self.shapes[i]
                )));
            }
        }
        for (k, bytes) in &self.pinned {
            if inputs[*k].data != *bytes {
                return Err(not_capturable(format!(
                    "input {k} {:?} has other values than at capture, and host work read them \
                     (capture again for these values)",
                    ios[*k].name
                )));
            }
        }
        for (k, buf) in &self.refills {
            buf.write(&inputs[*k].data);
        }
        device.execute_model(self.model, self.stream)?;
        device.synchronize(self.stream)?;
        outputs.truncate(self.outputs.len());
        outputs.resize_with(self.outputs.len(), || HostTensor {
            dtype: crate::ops::DType::F32,
            shape: Vec::new(),
            data: Default::default(),
        });
        for (out, o) in outputs.iter_mut().zip(&self.outputs) {
            out.dtype = o.dtype;
            out.shape.clear();
            out.shape.extend_from_slice(&o.shape);
            let bytes =
                tensor_bytes(o.dtype, &o.shape).map_err(|e| ExecError::Io(IoError::Size(e)))?;
            let data = out.data.to_mut();
            host_resize(data, bytes).map_err(|e| ExecError::Io(IoError::Size(e)))?;
            device.memcpy_d2h(data, o.mem.ptr)?;
        }
        Ok(())
    }

    /// Drops the graph: its device model, and the outputs' memory.
    pub(super) fn release(self, device: &Device) -> Result<(), ExecError> {
        device.synchronize(self.stream)?;
        device.unload_model(self.model)?;
        for o in self.outputs {
            o.mem.allocator.free(o.mem.ptr, o.mem.bytes)?;
        }
        Ok(())
    }
}
