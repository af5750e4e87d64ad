//! What a kernel sees when it runs: GE's `KernelContext`.
//!
//! A [`KernelContext`] is built on the engine's stack for each node call from the node's
//! record (its input slot ids and first output slot) and handed to the kernel's run
//! function. Inputs are shared views of their slots, outputs mutable views of this node's
//! own slots; the accessors check kinds and name what was wrong, so a kernel can use `?`
//! throughout and the engine adds the node's name.

use std::sync::Arc;

use crate::npu::device::{Device, StreamId};
use crate::ops::{DType, HostTensor};

use super::Env;
use super::error::KernelError;
use super::plan::{NodeInfo, NodeState};
use super::value::{Arena, DeviceAllocator, Mem, Value};

pub type KernelResult = Result<(), KernelError>;

/// One kernel call's view of the execution.
pub struct KernelContext<'a> {
    pub(crate) env: &'a Env,
    pub(crate) info: &'a NodeInfo,
    pub(crate) state: &'a mut NodeState,
    pub(crate) values: &'a Arena,
    pub(crate) inputs: &'a [u32],
    pub(crate) out_start: u32,
    pub(crate) out_len: u32,
}

impl<'a> KernelContext<'a> {
    pub fn device(&self) -> &'a Device {
        &self.env.device
    }
    pub fn info(&self) -> &'a NodeInfo {
        self.info
    }
    pub fn input_count(&self) -> usize {
        self.inputs.len()
    }
    pub fn output_count(&self) -> usize {
        self.out_len as usize
    }

    // The accessors below are inlined into every kernel and their errors kept out of line:
    // a launch reads six inputs, and calling out for each (with its error formatting in
    // the same body) was a tenth of a small launch's instructions.

    /// Input `i`.
    #[inline]
    pub fn input(&self, i: usize) -> Result<&'a Value, KernelError> {
        let Some(&slot) = self.inputs.get(i) else {
            return Err(self.missing(i));
        };
        // SAFETY: the slot is an input of the running node (`get` checks the index): its
        // producer completed, its writes visible, before this node was scheduled (`call`'s
        // contract), and only that producer writes it, in the next execution at the
        // earliest, after this node's run.
        Ok(unsafe { self.values.get(slot) })
    }

    /// Input `i`, or `None` when the node has no such input: for a kernel's checks that
    /// need no error (a launch comparing its record with its inputs, per execution).
    #[inline]
    pub fn try_input(&self, i: usize) -> Option<&'a Value> {
        let &slot = self.inputs.get(i)?;
        // SAFETY: the slot is an input of the running node, as in `input`.
        Some(unsafe { self.values.get(slot) })
    }

    /// Output `i`, to write.
    pub fn output(&mut self, i: usize) -> Result<&mut Value, KernelError> {
        if i >= self.out_len as usize {
            return Err(KernelError::new(format!(
                "output {i} is missing: the node has {}",
                self.out_len
            )));
        }
        // SAFETY: the slot is this node's own output (`i < out_len`), which no other node
        // writes (`prepare` gives each node its own range of slots) and no node reads
        // until this one completed; this node never holds it as an input (`prepare`
        // refuses an input from the node itself), and `&mut self` keeps this the only
        // view of it handed out.
        Ok(unsafe { self.values.get_mut(self.out_start + i as u32) })
    }

    /// The kernel's per-execution state.
    pub fn state(&mut self) -> &mut NodeState {
        self.state
    }

    #[cold]
    #[inline(never)]
    fn missing(&self, i: usize) -> KernelError {
        KernelError::new(format!(
            "input {i} is missing: the node has {}",
            self.inputs.len()
        ))
    }

    #[cold]
    #[inline(never)]
    fn wrong(&self, i: usize, want: &str, got: &Value) -> KernelError {
        KernelError::new(format!("input {i} is {}, expected {want}", got.kind()))
    }

    #[inline]
    pub fn input_int(&self, i: usize) -> Result<i64, KernelError> {
        match self.input(i)? {
            Value::Int(v) => Ok(*v),
            v => Err(self.wrong(i, "an integer", v)),
        }
    }
    #[inline]
    pub fn input_shape(&self, i: usize) -> Result<&'a [i64], KernelError> {
        match self.input(i)? {
            Value::Shape(s) => Ok(s),
            v => Err(self.wrong(i, "a shape", v)),
        }
    }
    #[inline]
    pub fn input_mem(&self, i: usize) -> Result<&'a Mem, KernelError> {
        match self.input(i)? {
            Value::Mem(m) => Ok(m),
            v => Err(self.wrong(i, "device memory", v)),
        }
    }
    #[inline]
    pub fn input_host(&self, i: usize) -> Result<&'a Arc<HostTensor>, KernelError> {
        match self.input(i)? {
            Value::Host(h) => Ok(h),
            v => Err(self.wrong(i, "a host tensor", v)),
        }
    }
    /// The model's first stream (the one an execution is bound to).
    #[inline]
    pub fn input_stream(&self, i: usize) -> Result<StreamId, KernelError> {
        match self.input(i)? {
            Value::Streams(s) if !s.is_empty() => Ok(s[0]),
            v => Err(self.wrong(i, "streams", v)),
        }
    }
    #[inline]
    pub fn input_allocator(&self, i: usize) -> Result<&'a Arc<dyn DeviceAllocator>, KernelError> {
        match self.input(i)? {
            Value::Allocator(a) => Ok(a),
            v => Err(self.wrong(i, "an allocator", v)),
        }
    }

    pub fn attr_int(&self, key: &str) -> Result<i64, KernelError> {
        self.info
            .attrs
            .get(key)
            .and_then(|a| a.as_int())
            .ok_or_else(|| KernelError::new(format!("attribute {key:?} (an integer) is missing")))
    }
    pub fn attr_dtype(&self, key: &str) -> Result<DType, KernelError> {
        match self.info.attrs.get(key) {
            Some(crate::ops::Attr::DType(d)) => Ok(*d),
            Some(crate::ops::Attr::Str(s)) => DType::from_name(s)
                .ok_or_else(|| KernelError::new(format!("attribute {key:?}: unknown dtype {s:?}"))),
            _ => Err(KernelError::new(format!(
                "attribute {key:?} (a dtype) is missing"
            ))),
        }
    }
}
