//! Resources Init creates and DeInit releases: streams, events, notifies, allocators, and
//! the op library's infer functions.

use std::sync::Arc;

use crate::exec::{KernelClass, KernelNode};
use crate::ops::OpRegistry;

use super::super::context::{KernelContext, KernelResult, NodeData, OpData};
use super::super::error::{KernelError, LoadError};
use super::super::registry::{KernelInfo, KernelRegistry};
use super::super::value::{CachingAllocator, Value};
use super::tensor::op_spec;

fn count(cx: &KernelContext<'_>) -> Result<usize, KernelError> {
    let n = cx.attr_int("count")?;
    usize::try_from(n).map_err(|_| KernelError::new(format!("count {n} is negative")))
}

/// `count` streams; at least one, the model's stream.
fn split_rt_streams(cx: &mut KernelContext<'_>) -> KernelResult {
    let n = count(cx)?.max(1);
    let device = cx.device();
    let streams: Arc<[_]> = (0..n).map(|_| device.create_stream()).collect();
    *cx.output(0)? = Value::Streams(streams);
    Ok(())
}

fn create_allocator(cx: &mut KernelContext<'_>) -> KernelResult {
    let placement = cx
        .info()
        .attrs
        .get("placement")
        .and_then(|a| a.as_str())
        .unwrap_or("hbm");
    if placement != "hbm" {
        return Err(KernelError::new(format!(
            "placement {placement:?}: the emulated device has device memory (\"hbm\") only"
        )));
    }
    let stream = cx.input_stream(0)?;
    let a = CachingAllocator::new(cx.device().clone(), stream);
    *cx.output(0)? = Value::Allocator(Arc::new(a));
    Ok(())
}

fn create_events(cx: &mut KernelContext<'_>) -> KernelResult {
    let n = count(cx)?;
    let device = cx.device();
    *cx.output(0)? = Value::Events((0..n).map(|_| device.create_event()).collect());
    Ok(())
}

fn create_notifies(cx: &mut KernelContext<'_>) -> KernelResult {
    let n = count(cx)?;
    let device = cx.device();
    *cx.output(0)? = Value::Notifies((0..n).map(|_| device.create_notify()).collect());
    Ok(())
}

fn destroy_streams(cx: &mut KernelContext<'_>) -> KernelResult {
    let Value::Streams(s) = cx.input(0)? else {
        return Err(KernelError::new("input 0 is not streams"));
    };
    for &id in s.iter() {
        cx.device().synchronize(id)?;
        cx.device().destroy_stream(id)?;
    }
    Ok(())
}

fn destroy_events(cx: &mut KernelContext<'_>) -> KernelResult {
    let Value::Events(e) = cx.input(0)? else {
        return Err(KernelError::new("input 0 is not events"));
    };
    for &id in e.iter() {
        cx.device().destroy_event(id)?;
    }
    Ok(())
}

fn destroy_notifies(cx: &mut KernelContext<'_>) -> KernelResult {
    let Value::Notifies(n) = cx.input(0)? else {
        return Err(KernelError::new("input 0 is not notifies"));
    };
    for &id in n.iter() {
        cx.device().destroy_notify(id)?;
    }
    Ok(())
}

/// The caching allocator's unused segments go back (the device's cache is shared, so
/// blocks still in use elsewhere stay).
fn destroy_allocator(cx: &mut KernelContext<'_>) -> KernelResult {
    cx.input_allocator(0)?;
    cx.device().empty_cache();
    Ok(())
}

fn prepare_infer(node: &KernelNode, ops: &OpRegistry) -> Result<NodeData, LoadError> {
    let spec = op_spec(node, ops, "op_type")?;
    Ok(NodeData::Op(Box::new(OpData {
        spec,
        inputs: Vec::new(),
        outputs: Vec::new(),
    })))
}

fn find_infer_shape_func(cx: &mut KernelContext<'_>) -> KernelResult {
    let spec = cx
        .info()
        .data
        .op()
        .ok_or_else(|| KernelError::new("not prepared"))?
        .spec;
    *cx.output(0)? = Value::Infer(spec);
    Ok(())
}

pub(super) fn register(r: &mut KernelRegistry) {
    let memory = KernelClass::Memory;
    r.register("SplitRtStreams", KernelInfo::new(split_rt_streams, memory));
    r.register("CreateAllocator", KernelInfo::new(create_allocator, memory));
    r.register("CreateEvents", KernelInfo::new(create_events, memory));
    r.register("CreateNotifies", KernelInfo::new(create_notifies, memory));
    r.register("DestroyStreams", KernelInfo::new(destroy_streams, memory));
    r.register("DestroyEvents", KernelInfo::new(destroy_events, memory));
    r.register("DestroyNotifies", KernelInfo::new(destroy_notifies, memory));
    r.register(
        "DestroyAllocator",
        KernelInfo::new(destroy_allocator, memory),
    );
    r.register(
        "FindInferShapeFunc",
        KernelInfo::new(find_infer_shape_func, KernelClass::Normal).prepare(prepare_infer),
    );
}
