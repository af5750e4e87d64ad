//! Control flow: the branch selectors and the owner kernels that run subgraphs.
//!
//! An owner kernel (`If`, `Case`, `While`, `Loop`) runs a subgraph with the executor's
//! own engine, through the [`Subgraph`](super::super::context::Subgraph) trait: it binds the subgraph's `InnerData` from its own inputs (index
//! `i` reads owner input `i`), runs it, and takes the subgraph's `InnerNetOutput` inputs as
//! its outputs. Each subgraph's state is made on first use and kept, so later executions
//! reuse its slots. Values are handles; who frees what is the lowering's contract.

use std::sync::Arc;

use crate::exec::KernelClass;
use crate::ops::{DType, HostTensor};

use super::super::context::{KernelContext, KernelResult};
use super::super::error::KernelError;
use super::super::registry::{KernelInfo, KernelRegistry};
use super::super::state::NodeState;
use super::super::value::{Mem, Value};

/// An owner node's state: one execution state per subgraph, each made on first use and
/// kept, so later executions reuse its slots.
#[derive(Default)]
struct Subgraphs(Vec<NodeState>);

/// Whether a one-element host tensor is true (any nonzero number).
fn truthy(t: &HostTensor) -> Result<bool, KernelError> {
    if t.element_count() != Some(1) {
        return Err(KernelError::new(format!(
            "a condition must have one element, this one has shape {:?}",
            t.shape
        )));
    }
    let v = if t.dtype.is_int() || t.dtype == DType::Bool {
        t.int_at(0).map(|v| v != 0)
    } else {
        t.float_at(0).map(|v| v != 0.0)
    };
    v.ok_or_else(|| KernelError::new("the condition's data is short"))
}

fn condition(v: &Value) -> Result<bool, KernelError> {
    match v {
        Value::Int(i) => Ok(*i != 0),
        Value::Host(h) => truthy(h),
        v => Err(KernelError::new(format!(
            "a condition is an integer or a host tensor, not {}",
            v.kind()
        ))),
    }
}

fn gen_index_for_if(cx: &mut KernelContext<'_>) -> KernelResult {
    let c = truthy(cx.input_host(0)?)?;
    *cx.output(0)? = Value::Int(if c { 0 } else { 1 });
    Ok(())
}

fn gen_index_for_case(cx: &mut KernelContext<'_>) -> KernelResult {
    let branches = cx.attr_int("branches")?;
    let t = cx.input_host(0)?;
    if t.element_count() != Some(1) {
        return Err(KernelError::new(format!(
            "a branch index has one element, this one has shape {:?}",
            t.shape
        )));
    }
    let v = t
        .int_at(0)
        .ok_or_else(|| KernelError::new("a branch index is an integer"))?;
    // GE clamps: an index out of range takes the last branch.
    let i = if v < 0 || v >= branches {
        branches - 1
    } else {
        v
    };
    *cx.output(0)? = Value::Int(i);
    Ok(())
}

fn gen_cond_for_while(cx: &mut KernelContext<'_>) -> KernelResult {
    let c = truthy(cx.input_host(0)?)?;
    *cx.output(0)? = Value::Int(c as i64);
    Ok(())
}

/// Runs subgraph `k` of the node with `bind` as its owner inputs and returns its outputs.
fn run_sub(
    cx: &mut KernelContext<'_>,
    k: usize,
    bind: &[Value],
) -> Result<Vec<Value>, KernelError> {
    let info = cx.info();
    let sub = info
        .subgraphs
        .get(k)
        .ok_or_else(|| KernelError::new(format!("the node has no subgraph {k}")))?;
    let env = cx.env();
    let Subgraphs(states) = cx.state::<Subgraphs>();
    if states.len() != info.subgraphs.len() {
        states.resize_with(info.subgraphs.len(), NodeState::default);
    }
    sub.run(env, &mut states[k], bind)
}

fn inputs(cx: &KernelContext<'_>) -> Result<Vec<Value>, KernelError> {
    (0..cx.input_count())
        .map(|i| cx.input(i).cloned())
        .collect()
}

fn set_outputs(cx: &mut KernelContext<'_>, outs: Vec<Value>, what: &str) -> KernelResult {
    if outs.len() != cx.output_count() {
        return Err(KernelError::new(format!(
            "{what} gives {} outputs, the node has {}",
            outs.len(),
            cx.output_count()
        )));
    }
    for (o, v) in outs.into_iter().enumerate() {
        *cx.output(o)? = v;
    }
    Ok(())
}

/// `If(branch index, data..., captures...)` and `Case`: runs subgraph `index`.
fn branch(cx: &mut KernelContext<'_>) -> KernelResult {
    let i = cx.input_int(0)?;
    let n = cx.info().subgraphs.len() as i64;
    if i < 0 || i >= n {
        return Err(KernelError::new(format!(
            "branch index {i} is outside the {n} branches"
        )));
    }
    let bind = inputs(cx)?;
    let outs = run_sub(cx, i as usize, &bind)?;
    set_outputs(cx, outs, "the branch")
}

/// `While(loop variables..., captures...)`: cond (subgraph 0) then body (subgraph 1) while
/// the condition holds; the body yields the next loop variables.
fn while_loop(cx: &mut KernelContext<'_>) -> KernelResult {
    let mut cur = inputs(cx)?;
    let n = cx.output_count();
    let limit = cx.env().max_iterations;
    let mut runs = 0u64;
    loop {
        let c = run_sub(cx, 0, &cur)?;
        let c = c
            .first()
            .ok_or_else(|| KernelError::new("the cond subgraph yields no condition"))?;
        if !condition(c)? {
            break;
        }
        if runs == limit {
            return Err(KernelError::IterationLimit { limit });
        }
        runs += 1;
        let next = run_sub(cx, 1, &cur)?;
        if next.len() != n {
            return Err(KernelError::new(format!(
                "the body gives {} values, the While has {n}",
                next.len()
            )));
        }
        cur[..n].clone_from_slice(&next);
    }
    cur.truncate(n);
    set_outputs(cx, cur, "the While")
}

fn host_scalar<T: crate::ops::Elem>(dtype: DType, v: T) -> Value {
    Value::Host(Arc::new(HostTensor {
        dtype,
        shape: Vec::new(),
        data: bytemuck::bytes_of(&v).to_vec().into(),
    }))
}

/// ONNX `Loop(stream, allocator, trip count, condition, carried..., captured..., captures)`
/// (`carried` pairs of loop-carried values). The body's inputs are the owner's with the
/// iteration number at 0, the condition at 1 and the current carried values; it yields
/// the next condition, the next carried values, and its scan outputs, which are stacked
/// along a new first axis into memory from the owner's allocator.
fn onnx_loop(cx: &mut KernelContext<'_>) -> KernelResult {
    let carried = usize::try_from(cx.attr_int("carried")?)
        .map_err(|_| KernelError::new("attribute \"carried\" is negative"))?;
    let stream = cx.input_stream(0)?;
    let allocator = cx.input_allocator(1)?.clone();
    let trips = {
        let t = cx.input_host(2)?;
        t.int_at(0)
            .filter(|_| t.element_count() == Some(1))
            .ok_or_else(|| KernelError::new("the trip count is one integer"))?
    };
    let mut cond = truthy(cx.input_host(3)?)?;
    let scans = (cx.output_count() / 2)
        .checked_sub(carried)
        .ok_or_else(|| KernelError::new("fewer outputs than loop-carried values"))?;
    let mut bind = inputs(cx)?;
    if bind.len() < 4 + 2 * carried {
        return Err(KernelError::new("fewer inputs than loop-carried values"));
    }
    let mut stacked: Vec<Vec<(Vec<i64>, Mem)>> = vec![Vec::new(); scans];
    let limit = cx.env().max_iterations;
    let mut i: i64 = 0;
    while i < trips && cond {
        // Checked before the body runs, so a trip count of 1e12 stops after `limit` cheap
        // iterations instead of looping for days; a loop of exactly `limit` trips runs.
        if u64::try_from(i).is_ok_and(|i| i >= limit) {
            return Err(KernelError::IterationLimit { limit });
        }
        bind[0] = host_scalar(DType::I64, i);
        bind[1] = host_scalar(DType::Bool, cond as u8);
        let out = run_sub(cx, 0, &bind)?;
        if out.len() != 1 + 2 * (carried + scans) {
            return Err(KernelError::new(format!(
                "the body gives {} values, the Loop needs {}",
                out.len(),
                1 + 2 * (carried + scans)
            )));
        }
        cond = condition(&out[0])?;
        bind[4..4 + 2 * carried].clone_from_slice(&out[1..1 + 2 * carried]);
        for (k, s) in stacked.iter_mut().enumerate() {
            let (Value::Shape(shape), Value::Mem(m)) =
                (&out[1 + 2 * (carried + k)], &out[2 + 2 * (carried + k)])
            else {
                return Err(KernelError::new(format!("scan output {k} is not a tensor")));
            };
            s.push((shape.clone(), m.clone()));
        }
        i += 1;
    }
    for o in 0..2 * carried {
        *cx.output(o)? = bind[4 + o].clone();
    }
    let device = cx.device().clone();
    for (k, parts) in stacked.into_iter().enumerate() {
        let first = parts.first().map(|(s, _)| s.clone()).unwrap_or_default();
        if let Some((s, _)) = parts.iter().find(|(s, _)| *s != first) {
            return Err(KernelError::new(format!(
                "scan output {k} changes shape across iterations: {first:?}, then {s:?}"
            )));
        }
        let total: usize = parts.iter().map(|(_, m)| m.bytes).sum();
        let ptr = allocator.alloc(total)?;
        let mut off = 0u64;
        for (_, m) in &parts {
            if m.bytes > 0 {
                device.memcpy_d2d_async(stream, ptr.offset(off), m.ptr, m.bytes)?;
            }
            off += m.bytes as u64;
            m.allocator.free(m.ptr, m.bytes)?;
        }
        let shape: Vec<i64> = std::iter::once(parts.len() as i64)
            .chain(first.iter().copied())
            .collect();
        *cx.output(2 * (carried + k))? = Value::Shape(shape);
        *cx.output(2 * (carried + k) + 1)? = Value::Mem(Mem {
            ptr,
            bytes: total,
            allocator: allocator.clone(),
        });
    }
    Ok(())
}

pub(super) fn register(r: &mut KernelRegistry) {
    use KernelClass::Normal;
    r.register("GenIndexForIf", KernelInfo::new(gen_index_for_if, Normal));
    r.register(
        "GenIndexForCase",
        KernelInfo::new(gen_index_for_case, Normal),
    );
    r.register(
        "GenCondForWhile",
        KernelInfo::new(gen_cond_for_while, Normal),
    );
    r.register("If", KernelInfo::new(branch, Normal));
    r.register("Case", KernelInfo::new(branch, Normal));
    r.register("While", KernelInfo::new(while_loop, Normal));
    r.register("Loop", KernelInfo::new(onnx_loop, Normal));
}
