//! Memory kernels: sizes, allocation and free, and the copies between host and device.
//!
//! Host-to-device copies go through a staging buffer the node keeps across executions
//! (the device holds its handle until the copy ran, as asynchronous copies must); it is
//! rewritten in place when the device is done with it, so a steady-state upload allocates
//! nothing.

use std::sync::Arc;

use crate::exec::{KernelClass, KernelNode};
use crate::npu::device::{HostBuf, Task};
use crate::ops::ShapeValues;
use crate::ops::{DType, HostTensor, OpRegistry};

use super::super::context::{KernelContext, KernelResult, NodeData};
use super::super::error::{KernelError, LoadError};
use super::super::registry::{KernelInfo, KernelRegistry};
use super::super::value::{Mem, Value};
use super::tensor::{host_resize, tensor_bytes};

/// An uploading node's state: the staging buffer of its host-to-device copies, reused
/// while the device is done with it, and how many uploads the node has made. Graph mode
/// reads it to find the buffers a captured upload reads.
#[derive(Default)]
pub(crate) struct Staging(pub(crate) Option<HostBuf>, pub(crate) u32);

fn calc_tensor_size_from_shape(cx: &mut KernelContext<'_>) -> KernelResult {
    let dtype = cx.attr_dtype("dtype")?;
    let bytes = tensor_bytes(dtype, cx.input_shape(0)?)?;
    *cx.output(0)? = Value::Int(bytes as i64);
    Ok(())
}

/// A size known at lowering (`AllocMemHbm(allocator)` with attribute `size`) is read once,
/// here: looking the attribute up by name at every execution cost more than the
/// allocation itself.
fn prepare_alloc(node: &KernelNode, _: &OpRegistry) -> Result<NodeData, LoadError> {
    if node.inputs.len() > 1 {
        return Ok(NodeData::None);
    }
    let size = node
        .attr_int("size")
        .ok_or("attribute \"size\" (an integer) is missing")?;
    usize::try_from(size)
        .map(NodeData::Bytes)
        .map_err(|_| format!("size {size} is negative").into())
}

/// `AllocMemHbm(allocator[, size])`: device memory of the size, from the allocator.
fn alloc_mem_hbm(cx: &mut KernelContext<'_>) -> KernelResult {
    let allocator = cx.input_allocator(0)?;
    let bytes = match cx.info().data {
        NodeData::Bytes(b) => b,
        _ => {
            let b = cx.input_int(1)?;
            usize::try_from(b).map_err(|_| KernelError::new(format!("size {b} is negative")))?
        }
    };
    let ptr = allocator.alloc(bytes)?;
    let out = cx.output(0)?;
    match out {
        // The slot still holds the last execution's memory from this allocator: rewritten
        // in place, with no reference counted up for the new value and down for the old.
        Value::Mem(m) if Arc::ptr_eq(&m.allocator, allocator) => {
            m.ptr = ptr;
            m.bytes = bytes;
        }
        _ => {
            *out = Value::Mem(Mem {
                ptr,
                bytes,
                allocator: allocator.clone(),
            })
        }
    }
    Ok(())
}

/// `MemoryView(memory)` (`offset`, `size`): the `size` bytes at `offset` of the block, as
/// memory of their own (a planned tensor's place in the feature memory; see
/// `lower::passes::memory`). Never freed itself: the block is.
fn memory_view(cx: &mut KernelContext<'_>) -> KernelResult {
    let m = cx.input_mem(0)?;
    let (offset, size) = (cx.attr_int("offset")?, cx.attr_int("size")?);
    let (Ok(offset), Ok(size)) = (usize::try_from(offset), usize::try_from(size)) else {
        return Err(KernelError::new(format!(
            "offset {offset} and size {size} must not be negative"
        )));
    };
    if offset.checked_add(size).is_none_or(|e| e > m.bytes) {
        return Err(KernelError::new(format!(
            "{size} bytes at offset {offset} do not fit the block's {} bytes",
            m.bytes
        )));
    }
    let view = Mem {
        ptr: crate::npu::device::DevicePtr(m.ptr.0 + offset as u64),
        bytes: size,
        allocator: m.allocator.clone(),
    };
    *cx.output(0)? = Value::Mem(view);
    Ok(())
}

fn free_memory(cx: &mut KernelContext<'_>) -> KernelResult {
    let m = cx.input_mem(0)?;
    m.allocator.free(m.ptr, m.bytes)?;
    Ok(())
}

/// Copies `bytes` to `dst` on `stream`: now, from the caller's bytes, when the stream is
/// idle (as it is when an execution begins); else through the node's staging buffer,
/// submitted behind the stream's work. Staging every upload copied each input twice.
fn upload(
    cx: &mut KernelContext<'_>,
    stream: crate::npu::device::StreamId,
    dst: crate::npu::device::DevicePtr,
    bytes: &[u8],
) -> KernelResult {
    if bytes.is_empty() {
        return Ok(());
    }
    let device = cx.device().clone();
    // A node that uploads again (Main's inputs, at every execution) has its staging
    // buffer from its second upload on, even when the copy needs none: a stream is not
    // always idle when an execution begins (tests/zero_alloc.rs found the staged path
    // taken in 2 of 10 steady states), and a steady-state execution allocates nothing, so
    // the buffer must exist before the first time it is needed. A node's first upload
    // (the only one of Init's constants) makes none unless its copy must wait: a buffer
    // kept for an upload that never comes would be a second copy of every weight.
    let Staging(slot, uploads) = cx.state::<Staging>();
    *uploads = uploads.saturating_add(1);
    let ready = |slot: &mut Option<HostBuf>| {
        if !slot
            .as_ref()
            .is_some_and(|b| b.is_unique() && b.len() >= bytes.len())
        {
            *slot = Some(device.malloc_host(bytes.len()));
        }
    };
    if *uploads > 1 {
        ready(slot);
    }
    if let Some(r) = device.memcpy_h2d_if_idle(stream, dst, bytes) {
        return Ok(r?);
    }
    ready(slot);
    let buf: &HostBuf = slot.as_ref().expect("set above");
    buf.write(bytes);
    device.submit(
        stream,
        Task::MemcpyH2D {
            dst,
            src: buf.clone(),
            offset: 0,
            len: bytes.len(),
        },
    )?;
    Ok(())
}

/// `CopyH2D(host, stream, allocator)`: new device memory holding the host tensor.
fn copy_h2d(cx: &mut KernelContext<'_>) -> KernelResult {
    let host = cx.input_host(0)?;
    let stream = cx.input_stream(1)?;
    let allocator = cx.input_allocator(2)?;
    let bytes = host.data.len();
    let ptr = allocator.alloc(bytes)?;
    upload(cx, stream, ptr, &host.data)?;
    *cx.output(0)? = Value::Mem(Mem {
        ptr,
        bytes,
        allocator: allocator.clone(),
    });
    Ok(())
}

/// `CopyD2H(stream, shape, memory)` (`dtype`): the tensor downloaded, once the stream ran
/// what writes it.
fn copy_d2h(cx: &mut KernelContext<'_>) -> KernelResult {
    let dtype = cx.attr_dtype("dtype")?;
    let stream = cx.input_stream(0)?;
    let shape = cx.input_shape(1)?;
    let mem = cx.input_mem(2)?;
    let bytes = tensor_bytes(dtype, shape)?;
    if bytes > mem.bytes {
        return Err(KernelError::new(format!(
            "a {dtype} tensor of {shape:?} is {bytes} bytes, its memory {}",
            mem.bytes
        )));
    }
    let device = cx.device().clone();
    device.synchronize(stream)?;
    let ptr = mem.ptr;
    let out = cx.output(0)?.host_mut(dtype);
    out.shape.clear();
    out.shape.extend_from_slice(shape);
    let data = out.data.to_mut();
    host_resize(data, bytes)?;
    device.memcpy_d2h(data, ptr)?;
    Ok(())
}

/// `BuildShapeTensorData(shape)`: the value of a shape op (attribute `op`: `Shape`,
/// `Size` or `Rank`, with Shape's `start` and `end`) as a host tensor of integer type
/// `dtype`, from the input's shape alone: GE's RT2 places Shape on the host and never
/// reads the input's memory (hicann/ge `LoweringShapeNode`), so nothing waits for the
/// tensor's producer and nothing is copied back from the device. The output buffer is
/// reused from the last execution.
fn build_shape_tensor_data(cx: &mut KernelContext<'_>) -> KernelResult {
    let dtype = cx.attr_dtype("dtype")?;
    let dims = cx.input_shape(0)?;
    let attrs = &cx.info().attrs;
    let op = attrs.get("op").and_then(|a| a.as_str()).unwrap_or("");
    let values = crate::ops::shape_values(op, attrs, dims).ok_or_else(|| {
        KernelError::new(format!(
            "{op:?} of {dims:?} has no value (Shape, Size or Rank)"
        ))
    })?;
    let out = cx.output(0)?.host_mut(dtype);
    match values {
        ShapeValues::Dims(v) => write_ints(out, dtype, &[v.len() as i64], v),
        ShapeValues::One(v) => write_ints(out, dtype, &[], &[v]),
    }
}

/// Sets `out` to the int32 or int64 tensor of `shape` holding `values`.
fn write_ints(out: &mut HostTensor, dtype: DType, shape: &[i64], values: &[i64]) -> KernelResult {
    out.shape.clear();
    out.shape.extend_from_slice(shape);
    let data = out.data.to_mut();
    host_resize(data, values.len() * dtype.size())?;
    for (chunk, &v) in data.chunks_exact_mut(dtype.size()).zip(values) {
        match dtype {
            DType::I64 => chunk.copy_from_slice(&v.to_le_bytes()),
            DType::I32 => chunk.copy_from_slice(
                &i32::try_from(v)
                    .map_err(|_| KernelError::new(format!("{v} does not fit int32")))?
                    .to_le_bytes(),
            ),
            other => {
                return Err(KernelError::new(format!(
                    "a shape value is int32 or int64, not {other}"
                )));
            }
        }
    }
    Ok(())
}

/// `CalcDeviceCopySizes(host)`: the allocation size and the copy size (equal for every
/// tensor the device has; 0 and 0 for an empty one).
fn calc_device_copy_sizes(cx: &mut KernelContext<'_>) -> KernelResult {
    let n = cx.input_host(0)?.data.len() as i64;
    *cx.output(0)? = Value::Int(n);
    *cx.output(1)? = Value::Int(n);
    Ok(())
}

/// `ShareH2DCopyResult(memory, copy size)`: the device tensor the copy fills, for every
/// reader and the Free.
fn share_h2d_copy_result(cx: &mut KernelContext<'_>) -> KernelResult {
    let m = cx.input_mem(0)?.clone();
    let n = cx.input_int(1)?;
    if n < 0 || n as usize > m.bytes {
        return Err(KernelError::new(format!(
            "copy size {n} does not fit the {} bytes allocated",
            m.bytes
        )));
    }
    *cx.output(0)? = Value::Mem(m);
    Ok(())
}

/// `LaunchH2DCopy(host, result, copy size, stream)`: submits the copy.
fn launch_h2d_copy(cx: &mut KernelContext<'_>) -> KernelResult {
    let host = cx.input_host(0)?;
    let dst = cx.input_mem(1)?.ptr;
    let n = cx.input_int(2)?;
    let stream = cx.input_stream(3)?;
    let bytes = host
        .data
        .get(..usize::try_from(n).unwrap_or(usize::MAX))
        .ok_or_else(|| KernelError::new(format!("copy size {n} exceeds the host tensor")))?;
    upload(cx, stream, dst, bytes)
}

fn sync_stream(cx: &mut KernelContext<'_>) -> KernelResult {
    let s = cx.input_stream(0)?;
    cx.device().synchronize(s)?;
    Ok(())
}

pub(super) fn register(r: &mut KernelRegistry) {
    use KernelClass::{Launch, Memory};
    r.register(
        "CalcTensorSizeFromShape",
        KernelInfo::new(calc_tensor_size_from_shape, Memory),
    );
    r.register(
        "AllocMemHbm",
        KernelInfo::new(alloc_mem_hbm, Memory).prepare(prepare_alloc),
    );
    r.register("MemoryView", KernelInfo::new(memory_view, Memory));
    r.register("FreeMemory", KernelInfo::new(free_memory, Memory));
    r.register("FreeMemoryHoldAddr", KernelInfo::new(free_memory, Memory));
    r.register("CopyH2D", KernelInfo::new(copy_h2d, Memory));
    r.register("CopyD2H", KernelInfo::new(copy_d2h, Memory));
    r.register(
        "BuildShapeTensorData",
        KernelInfo::new(build_shape_tensor_data, Memory),
    );
    r.register(
        "CalcDeviceCopySizes",
        KernelInfo::new(calc_device_copy_sizes, Memory),
    );
    r.register(
        "ShareH2DCopyResult",
        KernelInfo::new(share_h2d_copy_result, Memory),
    );
    r.register("LaunchH2DCopy", KernelInfo::new(launch_h2d_copy, Launch));
    r.register("SyncStream", KernelInfo::new(sync_stream, Memory));
}
