//! Graph mode (`rt2 run --graph`): Main's device work captured once as a device model and
//! replayed, the way PyTorch's NPUGraph or CUDA Graphs replay a captured step.
//!
//! [`ModelV2Executor::capture_main`] runs Main once with the model's stream capturing
//! ([`Device::begin_capture`](crate::npu::Device::begin_capture)): the host kernels run as usual (shape inference,
//! allocation, launch records), every device task is recorded instead of run, and the
//! recorded list becomes a one-stream device model. A replay
//! ([`ModelV2Executor::replay_sync`]) writes the new inputs into the staging buffers the
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

use crate::npu::device::{HostBuf, Model, ModelId, StreamId, Task};
use crate::ops::HostTensor;

use super::super::engine;
use super::super::error::{ExecError, ExecutorStatus, IoError, StateError};
use super::super::plan::NodeState;
use super::{ModelExecuteArg, ModelV2Executor, OutputTensor, state_error};

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

fn not_capturable(msg: impl Into<String>) -> ExecError {
    ExecError::State(StateError::NotCapturable(msg.into()))
}

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
        let stream = self.bind_stream(&ModelExecuteArg::default())?;
        self.bind_inputs(inputs)?;
        let device = self.env.device.clone();
        // Work issued before the capture runs before it.
        device.synchronize(stream)?;
        device.begin_capture(stream)?;
        let st = self.main_state.as_mut().expect("loaded");
        let run = engine::run(&self.env, &self.main, st);
        let tasks = device.end_capture(stream);
        run.map_err(|e| ExecError::State(StateError::CaptureRun(Box::new(e))))?;
        let tasks = tasks?;

        // Each Data node's host value slot, by input index.
        let data_slots: Vec<(u32, usize)> = self
            .main
            .data
            .iter()
            .filter(|&&(_, node)| self.main.recs[node as usize].out_len > 1)
            .map(|&(index, node)| (self.main.recs[node as usize].out_start + 1, index))
            .collect();
        let mut refills = Vec::new();
        for (node, rec) in self.main.recs.iter().enumerate() {
            // `st` is borrowed mutably: the run is over and no engine holds the state.
            let state = st.states[node].get_mut();
            if let NodeState::Staging(Some(buf)) = state
                && rec.in_len > 0
                && let Some(&(_, k)) = data_slots
                    .iter()
                    .find(|(slot, _)| *slot == self.main.slots_in[rec.in_start as usize])
            {
                refills.push((k, buf.clone()));
            }
        }
        // A Data value read by anything but an upload steered the host side of the run.
        let mut pinned: Vec<(usize, Vec<u8>)> = Vec::new();
        for (node, rec) in self.main.recs.iter().enumerate() {
            let uploads = matches!(st.states[node].get_mut(), NodeState::Staging(Some(_)));
            let ins =
                &self.main.slots_in[rec.in_start as usize..(rec.in_start + rec.in_len) as usize];
            for (slot, k) in &data_slots {
                let read_as_value = ins
                    .iter()
                    .enumerate()
                    .any(|(i, s)| s == slot && !(uploads && i == 0));
                if read_as_value && !pinned.iter().any(|(p, _)| p == k) {
                    pinned.push((*k, inputs[*k].data.clone()));
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

        let mut outputs = Vec::with_capacity(self.outputs.len());
        self.output_tensors(&mut outputs)?;
        let model = Model::builder()
            .name(format!("{} Main (captured)", self.name))
            .stream(tasks)
            .build()?;
        let model = device.load_model(&model)?;
        self.graph = Some(Graph {
            model,
            stream,
            refills,
            shapes: inputs.iter().map(|t| t.shape.clone()).collect(),
            pinned,
            outputs,
        });
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
        for (i, (t, io)) in inputs.iter().zip(&self.inputs).enumerate() {
            if t.shape != g.shapes[i] {
                return Err(not_capturable(format!(
                    "input {i} {:?} is {:?}, the graph was captured with {:?}",
                    io.name, t.shape, g.shapes[i]
                )));
            }
        }
        for (k, bytes) in &g.pinned {
            if inputs[*k].data != *bytes {
                return Err(not_capturable(format!(
                    "input {k} {:?} has other values than at capture, and host work read them \
                     (capture again for these values)",
                    self.inputs[*k].name
                )));
            }
        }
        for (k, buf) in &g.refills {
            buf.write(&inputs[*k].data);
        }
        let device = &self.env.device;
        device.execute_model(g.model, g.stream)?;
        device.synchronize(g.stream)?;
        outputs.truncate(g.outputs.len());
        outputs.resize_with(g.outputs.len(), || HostTensor {
            dtype: crate::ops::DType::F32,
            shape: Vec::new(),
            data: Vec::new(),
        });
        for (out, o) in outputs.iter_mut().zip(&g.outputs) {
            out.dtype = o.dtype;
            out.shape.clear();
            out.shape.extend_from_slice(&o.shape);
            let bytes = super::super::kernels::tensor_bytes(o.dtype, &o.shape)
                .map_err(|e| ExecError::Io(IoError::Size(e)))?;
            out.data.resize(bytes, 0);
            device.memcpy_d2h(&mut out.data, o.mem.ptr)?;
        }
        self.iterations += 1;
        Ok(())
    }

    /// Drops the captured graph: its device model, and the outputs' memory.
    pub fn release_graph(&mut self) -> Result<(), ExecError> {
        let Some(g) = self.graph.take() else {
            return Ok(());
        };
        self.env.device.synchronize(g.stream)?;
        self.env.device.unload_model(g.model)?;
        for o in g.outputs {
            o.mem.allocator.free(o.mem.ptr, o.mem.bytes)?;
        }
        Ok(())
    }

    /// Whether a graph is captured.
    pub fn has_graph(&self) -> bool {
        self.graph.is_some()
    }
}
