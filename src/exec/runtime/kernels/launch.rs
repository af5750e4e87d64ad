//! Op kernels: `InferShape`, the op launches (`LaunchKernelWithHandle` and the AI CPU and
//! host CPU launches, one implementation under each engine's name), and
//! `LaunchKernelAllocOutputs`; and which launches name an op rt2 cannot compute
//! ([`ops_without_compute`]), which the executor refuses at load.
//!
//! Each resolves its op at load (`_op_type`, and the element types `_in_dtypes` and
//! `_out_dtypes`, dtype lists where `None` is an omitted optional input with no slots). A launch
//! keeps its launch record across executions and rebinds it in place once the device has
//! dropped it (`Launch::rebind`), so a steady-state launch allocates nothing; an omitted
//! input is passed as an empty 1-D tensor of the first input's type, as the op library
//! takes it.

use std::sync::Arc;

use crate::exec::kernel_types::{OP_LAUNCHES, is_op_launch};
use crate::exec::{ExecuteGraph, GraphKind, KernelClass, KernelNode};
use crate::npu::device::{DevicePtr, Launch, StreamRef, Task, TensorArg};
use crate::ops::DType;
use crate::ops::{InferCtx, OpRegistry, TensorMeta};

use super::super::context::{KernelContext, KernelResult, NodeData, OpData, ProfilingInfo};
use super::super::error::{KernelError, LoadError, NoCompute};
use super::super::registry::{KernelInfo, KernelRegistry};
use super::super::value::{Mem, Value};
use super::tensor::{dims_of, op_spec, tensor_bytes};

/// Where a launch kernel keeps its launch record between executions.
#[derive(Default)]
enum LaunchSlot {
    #[default]
    Empty,
    /// Every launch so far ran on the issuing thread, so the record is this node's alone.
    Here(Box<Launch>),
    /// Handed to a stream's worker at least once: rebound in place when the device has
    /// dropped its reference, copied when it still holds one.
    Shared(Arc<Launch>),
}

/// A launch node's state: its launch record, rebound each execution (`Launch::rebind`),
/// and the stream it was last launched on, kept so a launch needs no look-up in the
/// device's stream table.
#[derive(Default)]
struct LaunchState {
    slot: LaunchSlot,
    stream: Option<StreamRef>,
}

/// Shape inference's state: its scratch of input metas.
#[derive(Default)]
struct InferState {
    metas: Vec<TensorMeta>,
}

/// The operand element types of attribute `key` (`None` for an omitted optional input),
/// as lowering typed them.
fn dtypes<'n>(node: &'n KernelNode, key: &str) -> Result<&'n [Option<DType>], LoadError> {
    node.attrs
        .get(key)
        .and_then(|a| a.as_dtypes())
        .ok_or_else(|| format!("attribute {key:?} (a dtype list) is missing").into())
}

fn prepare_op(node: &KernelNode, ops: &OpRegistry) -> Result<NodeData, LoadError> {
    let spec = op_spec(node, ops, "_op_type")?;
    let inputs = dtypes(node, "_in_dtypes")?.to_vec();
    let outputs = dtypes(node, "_out_dtypes")?
        .iter()
        .map(|d| d.ok_or("an output has no dtype"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NodeData::Op(Box::new(OpData {
        spec,
        inputs,
        outputs,
    })))
}

fn op_of<'a>(cx: &KernelContext<'a>) -> Result<&'a OpData, KernelError> {
    cx.info()
        .data
        .op()
        .ok_or_else(|| KernelError::new("the node's op was not prepared"))
}

fn fill_dtype(op: &OpData) -> DType {
    op.inputs
        .iter()
        .flatten()
        .next()
        .copied()
        .unwrap_or(DType::F32)
}

/// Sets `arg` to a tensor at `ptr`, reusing its dims' storage.
fn set_arg(arg: &mut TensorArg, ptr: DevicePtr, dtype: DType, dims: impl Iterator<Item = usize>) {
    arg.ptr = ptr;
    arg.dtype = dtype;
    arg.shape.clear();
    arg.shape.extend(dims);
}

/// The `k`th (shape, memory) pair starting at input slot `base`, as a launch argument,
/// checked against the memory's size.
fn pair<'a>(
    cx: &KernelContext<'a>,
    base: usize,
    k: usize,
    dtype: DType,
) -> Result<(&'a [i64], &'a Mem), KernelError> {
    let shape = cx.input_shape(base + 2 * k)?;
    let mem = cx.input_mem(base + 2 * k + 1)?;
    let bytes = tensor_bytes(dtype, shape)?;
    if bytes > mem.bytes {
        return Err(KernelError::new(format!(
            "a {dtype} tensor of {shape:?} ({bytes} bytes) does not fit its {} bytes of memory",
            mem.bytes
        )));
    }
    Ok((shape, mem))
}

fn fill_args(
    cx: &KernelContext<'_>,
    op: &OpData,
    base: usize,
    args: &mut Vec<TensorArg>,
) -> Result<(), KernelError> {
    let fill = fill_dtype(op);
    args.truncate(op.inputs.len());
    let mut k = 0;
    for (i, d) in op.inputs.iter().enumerate() {
        if i == args.len() {
            args.push(TensorArg::new(DevicePtr(0), fill, &[]));
        }
        match d {
            Some(d) => {
                let (shape, mem) = pair(cx, base, k, *d)?;
                set_arg(&mut args[i], mem.ptr, *d, dims_of(shape)?);
                k += 1;
            }
            None => set_arg(&mut args[i], DevicePtr(0), fill, std::iter::once(0)),
        }
    }
    Ok(())
}

/// `LaunchKernelWithHandle(stream, [shape, memory]* inputs, [shape, memory]* outputs)`.
fn launch_kernel_with_handle(cx: &mut KernelContext<'_>) -> KernelResult {
    let op = op_of(cx)?;
    let present = op.inputs.iter().flatten().count();
    let expected = 1 + 2 * (present + op.outputs.len());
    if cx.input_count() != expected {
        return Err(KernelError::new(format!(
            "{} inputs, the op's {present} inputs and {} outputs need {expected}",
            cx.input_count(),
            op.outputs.len()
        )));
    }
    let stream = cx.input_stream(0)?;
    // The state is taken out for the call and put back after it (two moves of two words
    // and one type check each way; see `NodeState`), so the closures below can borrow
    // the context while the record is rebound.
    let LaunchState { slot, stream: kept } = std::mem::take(cx.state::<LaunchState>());
    // The stream's handle, looked up once per node (and again if the stream changes).
    let kept = match kept {
        Some(s) if s.id() == stream => Some(s),
        _ => cx.device().stream_ref(stream).ok(),
    };
    let launch_here = |l: &mut Launch| {
        kept.as_ref()
            .and_then(|s| cx.device().launch_on(s, l))
            .map(|r| r.map_err(KernelError::from))
    };
    // Busy, capturing, or not a stream (then submitting names the error).
    let submit = |l: &Arc<Launch>| {
        cx.device()
            .submit(stream, Task::Launch(l.clone()))
            .map_err(KernelError::from)
    };
    let (slot, r) = match slot {
        LaunchSlot::Shared(mut l) => {
            // Still queued from an earlier execution: a new record for this one. (Two
            // loads; `Arc::get_mut` would be a compare-exchange more.)
            if Arc::strong_count(&l) != 1 || Arc::weak_count(&l) != 0 {
                l = Arc::new((*l).clone());
            }
            let unique = Arc::get_mut(&mut l).expect("unique");
            let r = match bind_launch(cx, op, present, unique) {
                Err(e) => Err(e),
                Ok(()) => match launch_here(unique) {
                    Some(r) => r,
                    None => submit(&l),
                },
            };
            (LaunchSlot::Shared(l), r)
        }
        // The record never left this node: no reference count to ask (asking is an atomic
        // read-modify-write, a tenth of a small launch run here).
        own => {
            let mut l = match own {
                LaunchSlot::Here(l) => l,
                // Labeled with the op it serves, for the device's task records (once per
                // node).
                _ => Box::new(
                    Launch::new(
                        op.spec.name,
                        cx.info().attrs.clone(),
                        Vec::new(),
                        Vec::new(),
                    )
                    .labeled(op_label(cx)),
                ),
            };
            match bind_launch(cx, op, present, &mut l).map(|()| launch_here(&mut l)) {
                Err(e) => (LaunchSlot::Here(l), Err(e)),
                Ok(Some(r)) => (LaunchSlot::Here(l), r),
                // Shared from now on (one allocation, the first time the stream is busy).
                Ok(None) => {
                    let l = Arc::new(*l);
                    let r = submit(&l);
                    (LaunchSlot::Shared(l), r)
                }
            }
        }
    };
    *cx.state::<LaunchState>() = LaunchState { slot, stream: kept };
    r
}

/// Whether `l` is bound to the node's current tensors already: the same addresses and
/// dims, each still fitting its memory.
///
/// In steady state a static model's allocator hands every node the same blocks at every
/// execution, so this is the common case, and comparing costs a fraction of rebinding
/// (rewriting every argument's dims and rebuilding the inputs' metas).
fn bound(cx: &KernelContext<'_>, op: &OpData, present: usize, l: &Launch) -> bool {
    // Whether `arg` is the (shape, memory) pair at input slots `at`, `at + 1`. Inlined,
    // and reading the slots without building errors: this runs for every argument of
    // every launch.
    #[inline(always)]
    fn same(cx: &KernelContext<'_>, arg: &TensorArg, at: usize) -> bool {
        let (Some(Value::Shape(shape)), Some(Value::Mem(mem))) =
            (cx.try_input(at), cx.try_input(at + 1))
        else {
            return false;
        };
        if arg.ptr != mem.ptr || arg.shape.len() != shape.len() {
            return false;
        }
        // The dims compared and the bytes counted in one pass.
        let mut bytes = Some(arg.dtype.size());
        for (&d, &e) in arg.shape.iter().zip(shape) {
            if d as i64 != e {
                return false;
            }
            bytes = bytes.and_then(|b| b.checked_mul(d));
        }
        bytes.is_some_and(|b| b <= mem.bytes)
    }
    let (ins, outs) = (l.inputs(), l.outputs());
    if ins.len() != op.inputs.len() || outs.len() != op.outputs.len() {
        return false;
    }
    let mut at = 1;
    for (arg, d) in ins.iter().zip(&op.inputs) {
        let ok = match d {
            Some(_) => {
                at += 2;
                same(cx, arg, at - 2)
            }
            // As `fill_args` binds an omitted input.
            None => arg.ptr == DevicePtr(0) && arg.shape == [0],
        };
        if !ok {
            return false;
        }
    }
    let outs_at = 1 + 2 * present;
    outs.iter()
        .enumerate()
        .all(|(o, arg)| same(cx, arg, outs_at + 2 * o))
}

/// Rebinds `l` to the node's current input and output tensors.
fn bind_launch(
    cx: &KernelContext<'_>,
    op: &OpData,
    present: usize,
    l: &mut Launch,
) -> KernelResult {
    if bound(cx, op, present, l) {
        return Ok(());
    }
    let out_base = 1 + 2 * present;
    let mut result = Ok(());
    l.rebind(|ins, outs| {
        result = fill_args(cx, op, 1, ins).and_then(|()| {
            outs.truncate(op.outputs.len());
            for (o, &d) in op.outputs.iter().enumerate() {
                if o == outs.len() {
                    outs.push(TensorArg::new(DevicePtr(0), d, &[]));
                }
                let (shape, mem) = pair(cx, out_base, o, d)?;
                set_arg(&mut outs[o], mem.ptr, d, dims_of(shape)?);
            }
            Ok(())
        });
    });
    result
}

/// `LaunchKernelAllocOutputs(stream, allocator, [shape, memory]* inputs)`: a data-dependent
/// op; its outputs are allocated once their shapes are known and handed out as
/// [shape, memory]* pairs. Waits for the launch (its output shapes are what follows).
fn launch_kernel_alloc_outputs(cx: &mut KernelContext<'_>) -> KernelResult {
    let op = op_of(cx)?;
    let stream = cx.input_stream(0)?;
    let allocator = cx.input_allocator(1)?.clone();
    let mut ins = Vec::with_capacity(op.inputs.len());
    fill_args(cx, op, 2, &mut ins)?;
    let launch = Launch::allocating(op.spec.name, cx.info().attrs.clone(), ins, op.outputs.len())
        .labeled(op_label(cx));
    let outs = cx.device().launch_alloc_outputs(stream, launch)?.wait()?;
    if outs.len() != op.outputs.len() {
        return Err(KernelError::new(format!(
            "the op gave {} outputs, the node has {}",
            outs.len(),
            op.outputs.len()
        )));
    }
    for (k, a) in outs.into_iter().enumerate() {
        let bytes = a.bytes().unwrap_or(usize::MAX);
        cx.output(2 * k)?
            .set_shape(a.shape.iter().map(|&d| d as i64));
        *cx.output(2 * k + 1)? = Value::Mem(Mem {
            ptr: a.ptr,
            bytes,
            allocator: allocator.clone(),
        });
    }
    Ok(())
}

/// `InferShape(infer function, per present input its shape or its host tensor)`.
fn infer_shape(cx: &mut KernelContext<'_>) -> KernelResult {
    let op = op_of(cx)?;
    let Value::Infer(spec) = cx.input(0)? else {
        return Err(KernelError::new("input 0 is not an infer function"));
    };
    let fill = fill_dtype(op);
    let present = op.inputs.iter().flatten().count();
    if cx.input_count() != 1 + present {
        return Err(KernelError::new(format!(
            "{} inputs, the op's {present} inputs need {}",
            cx.input_count(),
            1 + present
        )));
    }
    let empty = crate::ops::HostTensor {
        dtype: fill,
        shape: vec![0],
        data: Default::default(),
    };
    let mut metas = std::mem::take(&mut cx.state::<InferState>().metas);
    metas.clear();
    let mut values = Vec::with_capacity(op.inputs.len());
    let mut k = 1;
    for (i, d) in op.inputs.iter().enumerate() {
        match d {
            None => {
                metas.push(TensorMeta::new(fill, &[0]));
                values.push(Some(&empty));
            }
            Some(d) => {
                match cx.input(k)? {
                    Value::Shape(s) => {
                        metas.push(TensorMeta::new(*d, s));
                        values.push(None);
                    }
                    Value::Host(h) => {
                        metas.push(TensorMeta::new(h.dtype, &h.shape));
                        values.push(Some(&**h));
                    }
                    v => {
                        return Err(KernelError::new(format!(
                            "input {k} (op input {i}) is {}, expected a shape or a host tensor",
                            v.kind()
                        )));
                    }
                }
                k += 1;
            }
        }
    }
    let ctx = InferCtx {
        op: spec.name,
        inputs: &metas,
        values: &values,
        attrs: &cx.info().attrs,
        outputs: op.outputs.len(),
    };
    let outs = spec.infer_shapes(&ctx)?;
    drop(values);
    if outs.len() != cx.output_count() {
        return Err(KernelError::new(format!(
            "inference gives {} outputs, the node has {}",
            outs.len(),
            cx.output_count()
        )));
    }
    for (o, m) in outs.iter().enumerate() {
        let dims = m
            .shape
            .as_ref()
            .filter(|s| s.iter().all(|&d| d >= 0))
            .ok_or_else(|| KernelError::new(format!("output {o} is not concrete: {m}")))?;
        cx.output(o)?.set_shape(dims.iter().copied());
    }
    cx.state::<InferState>().metas = metas;
    Ok(())
}

/// The op (its type, and the compute node the kernel was lowered from, else the node's
/// own name) a launch or shape inference serves.
fn profiling_info<'a>(cx: &KernelContext<'a>) -> Option<ProfilingInfo<'a>> {
    let info = cx.info();
    let op = info.data.op()?;
    Some(ProfilingInfo {
        op_type: op.spec.name,
        op_name: info.origin.as_deref().map_or(&info.name, |o| &o.node),
    })
}

/// The name the device's task records give a launch of this node: its op's.
fn op_label(cx: &KernelContext<'_>) -> Arc<str> {
    profiling_info(cx).map_or_else(
        || Arc::from(cx.info().name.as_str()),
        |p| Arc::from(p.op_name),
    )
}

/// The launch's input and output shapes (`inputs: [1, 3] [3]`, `outputs: [1, 3]`).
fn trace_launch(cx: &KernelContext<'_>) -> Vec<String> {
    let Some(op) = cx.info().data.op() else {
        return Vec::new();
    };
    let present = op.inputs.iter().flatten().count();
    let shapes = |from: usize, n: usize| -> String {
        (0..n)
            .map(|k| match cx.input_shape(from + 2 * k) {
                Ok(s) => format!("{s:?}"),
                Err(_) => "?".into(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    vec![
        format!("inputs: {}", shapes(1, present)),
        format!("outputs: {}", shapes(1 + 2 * present, op.outputs.len())),
    ]
}

/// Every op launch in `eg` (its three graphs and their subgraphs) whose op the op
/// library does not know or cannot compute: the compiled kernels lowering kept for ops
/// rt2 has no compute for, each named by the compute node it was lowered from (else by
/// its own graph and name), in graph order.
pub fn ops_without_compute(eg: &ExecuteGraph, ops: &OpRegistry) -> Vec<NoCompute> {
    let mut found = Vec::new();
    for kind in GraphKind::ALL {
        eg.graph(kind).walk(&mut |g| {
            for n in &g.nodes {
                if !(is_op_launch(&n.kernel) || n.kernel == "LaunchKernelAllocOutputs") {
                    continue;
                }
                // A launch without an op type fails to load on its own, naming the node.
                let Some(op_type) = n.attrs.get("_op_type").and_then(|a| a.as_str()) else {
                    continue;
                };
                // Marked by lowering as a compiled kernel, the op is not computed even
                // where the library has an op of its type (under another contract).
                let compiled = n
                    .attrs
                    .contains_key(crate::exec::kernel_types::KERNEL_NAME_ATTR);
                if !compiled && ops.get(op_type).is_some_and(|s| s.compute.is_some()) {
                    continue;
                }
                let (graph, node) = match &n.origin {
                    Some(o) => (o.graph.to_string(), o.node.to_string()),
                    None => (g.name.clone(), n.name.to_string()),
                };
                found.push(NoCompute {
                    graph,
                    node,
                    op_type: op_type.to_string(),
                });
            }
        });
    }
    found
}

pub(super) fn register(r: &mut KernelRegistry) {
    // One implementation under each engine's name: the emulated device computes an AI
    // CPU or host CPU op as it does an AI Core one.
    for &name in OP_LAUNCHES {
        r.register(
            name,
            KernelInfo::new(launch_kernel_with_handle, KernelClass::Launch)
                .prepare(prepare_op)
                .trace(trace_launch)
                .profiling(profiling_info),
        );
    }
    r.register(
        "LaunchKernelAllocOutputs",
        KernelInfo::new(launch_kernel_alloc_outputs, KernelClass::Memory)
            .prepare(prepare_op)
            .profiling(profiling_info),
    );
    r.register(
        "InferShape",
        KernelInfo::new(infer_shape, KernelClass::Memory)
            .prepare(prepare_op)
            .profiling(profiling_info),
    );
}
