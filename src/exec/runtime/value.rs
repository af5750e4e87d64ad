//! Values: what a kernel reads and writes, GE's `Chain` / `AsyncAnyValue`.
//!
//! Every output of every node of a prepared graph has one slot in an [`Arena`]; a kernel
//! reads its input slots and writes its output slots in place. A slot keeps its storage
//! from one execution to the next (a shape's `Vec`, a host tensor's `Arc` while nobody
//! else holds it), which is how a steady-state execution allocates nothing.
//!
//! Values are handles: cloning a [`Value::Mem`] copies the address, not the memory.
//! Ownership of device memory is the lowering's contract (docs/EXEG.md): exactly one
//! `FreeMemory` per allocation, or a hand-out through `NetOutput` or an owner's outputs.

use std::cell::UnsafeCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use foldhash::fast::FixedState;
use std::fmt;
use std::sync::Arc;
use std::sync::{Mutex, PoisonError};

use crate::npu::device::{Device, DevicePtr, EventId, NotifyId, NpuError, StreamId};
use crate::ops::OpSpec;
use crate::ops::{DType, HostTensor};

/// A device memory allocator for one stream (GE's `Allocator` by placement). The executor's
/// default is [`CachingAllocator`]; a caller may bring its own through
/// [`super::ModelExecuteArg`].
pub trait DeviceAllocator: Send + Sync + fmt::Debug {
    /// `bytes` of device memory usable by work submitted to [`DeviceAllocator::stream`].
    fn alloc(&self, bytes: usize) -> Result<DevicePtr, NpuError>;
    /// Frees `bytes` at `ptr` (as allocated), stream-ordered: reusable by work submitted
    /// after this call.
    fn free(&self, ptr: DevicePtr, bytes: usize) -> Result<(), NpuError>;
    /// The stream this allocator serves.
    fn stream(&self) -> StreamId;
}

/// A caching allocator for one stream: blocks freed by the executor go to a free list of
/// their exact size and are handed out again to later work on the same stream, which the
/// stream runs after the work that used them before (stream order makes the reuse safe).
/// A steady-state execution thus never reaches the device's allocator, and allocates
/// nothing on the host: each size's list keeps its capacity.
///
/// Each list hands out its lowest address first, not the block freed last: then what an
/// execution gets depends only on the set of blocks cached when it starts and the order of
/// its own allocations and frees, not on the order the previous execution freed them in.
/// A deterministic schedule therefore gets the same addresses every execution, which is
/// what lets the device reuse a launch's checks and resolution (`Launch` records). (Last
/// in, first out would flip between two assignments: the frees of one execution reverse
/// the order the next one pops.)
///
/// When the device runs out of memory, the cached blocks go back to it and the
/// allocation is retried once; [`CachingAllocator::release_cached`] does the same on demand
/// (GE's allocator shrink), and dropping the allocator returns everything cached.
#[derive(Debug)]
pub struct CachingAllocator {
    device: Device,
    stream: StreamId,
    /// Size in bytes to cached blocks of that size. Behind a mutex for soundness; one
    /// executor's schedule is its only user, so it is never contended.
    free: Mutex<HashMap<usize, BinaryHeap<Reverse<DevicePtr>>, FixedState>>,
}

impl CachingAllocator {
    pub fn new(device: Device, stream: StreamId) -> Self {
        CachingAllocator {
            device,
            stream,
            free: Mutex::new(HashMap::default()),
        }
    }

    /// Returns every cached block to the device.
    pub fn release_cached(&self) -> Result<(), NpuError> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let mut first = Ok(());
        for Reverse(ptr) in free.drain().flat_map(|(_, v)| v) {
            if let Err(e) = self.device.free(ptr, self.stream) {
                first = first.and(Err(e));
            }
        }
        first
    }

    /// Blocks cached now.
    pub fn cached_blocks(&self) -> usize {
        let free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        free.values().map(BinaryHeap::len).sum()
    }
}

impl DeviceAllocator for CachingAllocator {
    fn alloc(&self, bytes: usize) -> Result<DevicePtr, NpuError> {
        let cached = {
            let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
            free.get_mut(&bytes).and_then(BinaryHeap::pop)
        };
        if let Some(Reverse(p)) = cached {
            return Ok(p);
        }
        match self.device.malloc(bytes, self.stream) {
            Err(NpuError::OutOfMemory { .. }) if self.cached_blocks() > 0 => {
                self.release_cached()?;
                self.device.malloc(bytes, self.stream)
            }
            r => r,
        }
    }
    fn free(&self, ptr: DevicePtr, bytes: usize) -> Result<(), NpuError> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let list = free.entry(bytes).or_default();
        // A double free would hand one block out twice; the device catches it for blocks
        // it holds, this for cached ones, in every build: a graph read from a file can
        // free a value twice (an `.exeg` whose DeInit reads one Init export twice). The
        // scan is over the cached blocks of this one size, which a steady-state execution
        // keeps to a few (each free meets an allocation of its size), in one array.
        if list.iter().any(|b| b.0 == ptr) {
            return Err(NpuError::InvalidFree { ptr });
        }
        list.push(Reverse(ptr));
        Ok(())
    }
    fn stream(&self) -> StreamId {
        self.stream
    }
}

impl Drop for CachingAllocator {
    fn drop(&mut self) {
        // The device may already be gone; what it no longer has needs no return.
        let _ = self.release_cached();
    }
}

/// Device memory: where, how many bytes, and the allocator it goes back to.
#[derive(Debug, Clone)]
pub struct Mem {
    pub ptr: DevicePtr,
    pub bytes: usize,
    pub allocator: Arc<dyn DeviceAllocator>,
}

/// A model output in device memory; the caller owns the memory and frees it through
/// `mem.allocator` once done (after synchronizing the stream it was computed on).
#[derive(Debug, Clone)]
pub struct OutputTensor {
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub mem: Mem,
}

/// One value slot.
#[derive(Debug, Clone, Default)]
pub enum Value {
    /// Not written yet (or a kernel output nobody reads).
    #[default]
    None,
    /// A byte size, a branch index, a loop condition.
    Int(i64),
    /// A tensor's dims.
    Shape(Vec<i64>),
    Mem(Mem),
    /// A host tensor: a model input, a constant, a download.
    Host(Arc<HostTensor>),
    Streams(Arc<[StreamId]>),
    Allocator(Arc<dyn DeviceAllocator>),
    Events(Arc<[EventId]>),
    Notifies(Arc<[NotifyId]>),
    /// An op's shape inference (`FindInferShapeFunc`).
    Infer(OpSpec),
}

impl Value {
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "nothing",
            Value::Int(_) => "an integer",
            Value::Shape(_) => "a shape",
            Value::Mem(_) => "device memory",
            Value::Host(_) => "a host tensor",
            Value::Streams(_) => "streams",
            Value::Allocator(_) => "an allocator",
            Value::Events(_) => "events",
            Value::Notifies(_) => "notifies",
            Value::Infer(_) => "an infer function",
        }
    }

    /// Makes this slot a shape equal to `dims`, keeping the slot's storage.
    pub fn set_shape(&mut self, dims: impl IntoIterator<Item = i64>) {
        if let Value::Shape(v) = self {
            v.clear();
            v.extend(dims);
        } else {
            *self = Value::Shape(dims.into_iter().collect());
        }
    }

    /// Makes this slot a host tensor and hands out its storage to fill: the slot's own
    /// tensor when nobody else holds it (no allocation), a fresh one otherwise.
    pub fn host_mut(&mut self, dtype: DType) -> &mut HostTensor {
        let reusable =
            matches!(self, Value::Host(h) if Arc::strong_count(h) == 1 && Arc::weak_count(h) == 0);
        if !reusable {
            *self = Value::Host(Arc::new(HostTensor {
                dtype,
                shape: Vec::new(),
                data: Default::default(),
            }));
        }
        let Value::Host(h) = self else { unreachable!() };
        let h = Arc::get_mut(h).expect("checked unique above");
        h.dtype = dtype;
        h
    }
}

/// The value slots of one prepared graph for one executor.
///
/// Slots are `UnsafeCell`s because the engines hand a kernel shared views of its inputs
/// and a mutable view of its outputs without a lock per slot (that would cost more than
/// most kernels). Soundness rests on the schedule, which every engine keeps: each slot is
/// written by one node only (its producer, or the binder before the run starts), a node
/// runs only after all its producers completed, and a completed node's outputs are not
/// written again until the next execution, which starts after this one ended. The
/// multi-thread engine publishes a node's completion with release/acquire ordering.
pub(crate) struct Arena {
    slots: Box<[UnsafeCell<Value>]>,
}

// SAFETY: sharing an `Arena` lets threads reach its `Value`s through `get` and `get_mut`,
// whose contracts (the schedule of the type's doc) order every write to a slot before
// and after every other access to it, with happens-before across threads. `Value` is
// `Send + Sync`, so handing one thread's value to another by reference is sound.
unsafe impl Sync for Arena {}

impl Arena {
    pub fn new(len: usize) -> Self {
        Arena {
            slots: (0..len).map(|_| UnsafeCell::new(Value::None)).collect(),
        }
    }
    /// Slot `i` to read. Panics if there is no such slot.
    ///
    /// # Safety
    /// No one writes slot `i` while the reference lives, and its last write happened
    /// before this call (the schedule's rule, see the type's doc).
    pub unsafe fn get(&self, i: u32) -> &Value {
        // SAFETY: the index is bounds-checked; the caller guarantees that no `&mut` to
        // this slot exists or is made while the shared reference lives.
        unsafe { &*self.slots[i as usize].get() }
    }
    /// Slot `i` to write. Panics if there is no such slot.
    ///
    /// # Safety
    /// The caller is slot `i`'s producer, running now, or the binder before the run, and
    /// holds no other reference to the slot: no one else reads or writes it while the
    /// reference lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_mut(&self, i: u32) -> &mut Value {
        // SAFETY: the index is bounds-checked; the caller guarantees that this is the
        // only reference to the slot while it lives.
        unsafe { &mut *self.slots[i as usize].get() }
    }
    /// Exclusive access, no schedule needed.
    pub fn slot_mut(&mut self, i: u32) -> &mut Value {
        self.slots[i as usize].get_mut()
    }
    pub fn slot(&mut self, i: u32) -> &Value {
        self.slots[i as usize].get_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::npu::device::{Device, DeviceConfig};

    #[test]
    fn the_cache_hands_out_the_lowest_address_whatever_the_free_order() {
        let device = Device::new(DeviceConfig::default());
        let a = CachingAllocator::new(device.clone(), device.default_stream());
        let blocks: Vec<DevicePtr> = (0..4).map(|_| a.alloc(64).unwrap()).collect();
        let mut sorted = blocks.clone();
        sorted.sort();
        // Freed in two different orders, the blocks come back in the same order.
        for order in [[2, 0, 3, 1], [1, 3, 0, 2]] {
            for &i in &order {
                a.free(blocks[i], 64).unwrap();
            }
            let again: Vec<DevicePtr> = (0..4).map(|_| a.alloc(64).unwrap()).collect();
            assert_eq!(again, sorted);
        }
        assert_eq!(a.cached_blocks(), 0);
    }

    /// Found by the fuzz target `lower_run` (docs/FUZZING.md): an `.exeg` whose DeInit
    /// freed one Init export twice hit a debug assertion here, and in release builds
    /// would have had the block handed out twice.
    #[test]
    fn a_cached_block_freed_again_is_an_error_in_every_build() {
        let device = Device::new(DeviceConfig::default());
        let a = CachingAllocator::new(device.clone(), device.default_stream());
        let p = a.alloc(64).unwrap();
        a.free(p, 64).unwrap();
        assert_eq!(a.free(p, 64), Err(NpuError::InvalidFree { ptr: p }));
        assert_eq!(a.cached_blocks(), 1);
        assert_eq!(a.alloc(64).unwrap(), p);
        assert_ne!(a.alloc(64).unwrap(), p, "the block is handed out once");
    }
}
