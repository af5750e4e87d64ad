//! [`TensorDumper`]: a subscriber that, after each kernel launch is submitted, queues a
//! device-to-host copy of every output of the launch on the launch's stream (GE's data
//! dumper).
//!
//! Stream order is what makes the copy right: it runs after the launch wrote the memory
//! and before anything submitted later (a reuse of that memory after its Free, say) can
//! change it. The copies are complete once the execution's stream is synchronized; only
//! then may [`TensorDumper::take`] be read.
//!
//! It allocates a host buffer per output per launch, so it is for one diagnostic
//! execution, not for timed ones.

use std::sync::{Mutex, PoisonError};

use crate::npu::device::{HostBuf, StreamId};
use crate::ops::DType;

use super::super::context::{KernelContext, KernelResult, Subscriber};
use super::super::error::KernelError;
use super::super::value::Value;
use super::recorder::served_op;

/// One output of one launch, copied to host memory.
#[derive(Debug, Clone)]
pub struct DumpedTensor {
    /// The op the launch serves (the compute node's name) and its type.
    pub op: String,
    pub op_type: String,
    /// The graph the launch ran in (`Main`, `Main/loop.body`).
    pub graph: String,
    /// The op's output index.
    pub output: usize,
    pub dtype: DType,
    pub shape: Vec<i64>,
    /// The bytes, complete once the stream is synchronized.
    pub data: HostBuf,
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct TensorDumper {
    dumps: Mutex<Vec<DumpedTensor>>,
    /// The first failure to queue a copy.
    error: Mutex<Option<String>>,
}

impl TensorDumper {
    pub fn new() -> Self {
        TensorDumper::default()
    }

    /// Every output copied so far, in launch order (a launch in a loop body once per
    /// iteration), or the first failure to queue a copy.
    pub fn take(&self) -> Result<Vec<DumpedTensor>, String> {
        if let Some(e) = self
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            return Err(e);
        }
        Ok(std::mem::take(
            &mut *self.dumps.lock().unwrap_or_else(PoisonError::into_inner),
        ))
    }

    fn dump(&self, graph: &str, cx: &KernelContext<'_>) -> Result<(), KernelError> {
        let info = cx.info();
        let Some(op) = info.data.op() else {
            return Ok(());
        };
        // Where the outputs' (shape, memory) pairs are: a launch into given outputs reads
        // them as inputs after its stream and its inputs' pairs; a launch that allocates
        // its outputs writes them as its own outputs.
        let present = op.inputs.iter().flatten().count();
        let outputs: Vec<(&Value, &Value)> = match info.kernel {
            k if crate::exec::kernel_types::is_op_launch(k) => (0..op.outputs.len())
                .map(|o| {
                    let base = 1 + 2 * present + 2 * o;
                    Ok((cx.input(base)?, cx.input(base + 1)?))
                })
                .collect::<Result<_, KernelError>>()?,
            "LaunchKernelAllocOutputs" => {
                // The pairs are read from the node's own output slots, so there must be
                // as many as the op has outputs: a kernel registered under this name
                // need not have refused a node with fewer.
                if 2 * op.outputs.len() > cx.out_len as usize {
                    return Err(KernelError::new(format!(
                        "the node has {} outputs, not a [shape, memory] pair for each of \
                         the op's {}",
                        cx.out_len,
                        op.outputs.len()
                    )));
                }
                (0..op.outputs.len() as u32)
                    .map(|o| {
                        // SAFETY: `2 * o + 1 < out_len` (checked above), so these are
                        // this node's own output slots, which no other node writes;
                        // `node_end` runs after the node's kernel returned, and nothing
                        // else writes them before its next run. `get` checks the index.
                        unsafe {
                            (
                                cx.values.get(cx.out_start + 2 * o),
                                cx.values.get(cx.out_start + 2 * o + 1),
                            )
                        }
                    })
                    .collect()
            }
            _ => return Ok(()),
        };
        let stream: StreamId = cx.input_stream(0)?;
        let (op_type, op_name) =
            served_op(cx).unwrap_or_else(|| (op.spec.name.to_string(), info.name.clone()));
        let device = cx.device();
        for (o, ((shape, mem), &dtype)) in outputs.into_iter().zip(&op.outputs).enumerate() {
            let (Value::Shape(shape), Value::Mem(mem)) = (shape, mem) else {
                return Err(KernelError::new(format!(
                    "output {o}: expected a shape and device memory"
                )));
            };
            let bytes = dtype
                .tensor_bytes(shape)
                .and_then(|b| usize::try_from(b).ok())
                .filter(|&b| b <= mem.bytes)
                .ok_or_else(|| {
                    KernelError::new(format!(
                        "output {o}: a {dtype} tensor of {shape:?} does not fit its {} bytes",
                        mem.bytes
                    ))
                })?;
            let data = device.malloc_host(bytes);
            if bytes > 0 {
                device.memcpy_d2h_async(stream, &data, mem.ptr)?;
            }
            self.dumps
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(DumpedTensor {
                    op: op_name.clone(),
                    op_type: op_type.clone(),
                    graph: graph.to_string(),
                    output: o,
                    dtype,
                    shape: shape.to_vec(),
                    data,
                });
        }
        Ok(())
    }
}

impl Subscriber for TensorDumper {
    fn node_end(&self, graph: &str, cx: &KernelContext<'_>, result: &KernelResult) {
        if result.is_err() {
            return;
        }
        if let Err(e) = self.dump(graph, cx) {
            self.error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(|| format!("{graph}: node {:?}: dumping: {e}", cx.info().name));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::exec::runtime::{Env, ExecutorType, KernelRegistry, engine, prepare};
    use crate::exec::{KernelAttr, KernelClass, KernelGraph, KernelNode};
    use crate::npu::device::{Device, DeviceConfig};
    use crate::ops::{DType, OpRegistry};

    /// A kernel registered as `LaunchKernelAllocOutputs` that succeeds without writing
    /// anything, on a node with no output slots for the op's one output: the dumper
    /// reports it instead of reading slots past the node's own (here, past the arena).
    #[test]
    fn an_alloc_launch_without_its_output_slots_is_reported() {
        fn writes_nothing(_: &mut KernelContext<'_>) -> KernelResult {
            Ok(())
        }
        let mut reg = KernelRegistry::builtin().clone();
        let mut info = *reg
            .find("LaunchKernelAllocOutputs")
            .expect("a builtin kernel");
        info.funcs.run = writes_nothing;
        reg.register("LaunchKernelAllocOutputs", info);
        let mut node = KernelNode::new("relu", "LaunchKernelAllocOutputs", KernelClass::Launch);
        node.attrs
            .insert("_op_type".into(), KernelAttr::Str("Relu".into()));
        for key in ["_in_dtypes", "_out_dtypes"] {
            node.attrs
                .insert(key.into(), KernelAttr::DTypes(vec![Some(DType::F32)]));
        }
        let mut graph = KernelGraph::new("Main");
        graph.add(node);
        let ops = Arc::new(OpRegistry::new());
        let plan = prepare(&graph, "Main", &reg, &ops).expect("prepared");
        let dumper = Arc::new(TensorDumper::new());
        let env = Env {
            device: Device::new(DeviceConfig::default()),
            ops,
            executor: ExecutorType::Sequential,
            subscriber: Some(dumper.clone()),
            max_iterations: crate::exec::runtime::context::DEFAULT_MAX_ITERATIONS,
        };
        let mut st = plan.new_state();
        engine::run(&env, &plan, &mut st).expect("the kernel succeeds");
        let err = dumper.take().expect_err("the dump is refused");
        assert!(err.contains("not a [shape, memory] pair"), "{err}");
    }
}
