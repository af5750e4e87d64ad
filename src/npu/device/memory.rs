//! Device memory: the emulated address space (segments of host memory mapped at device
//! addresses) and the caching allocator on top of it.
//!
//! # Address space
//! A segment is one 64-byte-aligned [`Buffer`] mapped at a device address range. Mapping is
//! the device's only OS allocation; it fails once the mapped bytes would pass the configured
//! capacity. Segment addresses come from a bump pointer that never goes back, with an
//! unmapped gap of [`SEGMENT_ALIGN`] after every segment: an access running off the end of a
//! segment, or into a segment that was unmapped, lands on no segment and is an
//! [`NpuError::InvalidAddress`], never someone else's bytes.
//!
//! # Caching allocator
//! Blocks tile each segment. A request is rounded up to [`MIN_BLOCK`]; the best fit (the
//! smallest block that is large enough, lowest address on ties) among the reusable free
//! blocks is split when the remainder is at least [`MIN_BLOCK`]; a block freed and settled
//! is merged with free neighbours of the same segment. Requests up to 1 MiB come from
//! 2 MiB segments; larger ones from segments rounded up to 2 MiB. In steady state (the same
//! sizes allocated and freed again) every request is served from cached blocks: no mapping.
//!
//! Reuse is stream-ordered. Freeing on stream S at the moment S has had `n` tasks submitted
//! makes the block *pending* on S at `n`: allocations on S may take it at once (S's own order
//! puts every earlier use before any later one), other streams only once S has completed
//! `n` tasks ("S has passed the free"), when it is *settled* into the shared free set.
//! Pending blocks are not merged until settled.
//!
//! # Validity
//! [`Heap::check`] answers in host program order: a range is valid when it lies inside the
//! requested bytes of a block that is allocated now. The device checks every task's ranges
//! when the task is submitted (and a model's when it is executed), which is exact: the host
//! knows what it has freed. A worker running the task later only resolves the address to
//! its segment ([`Memory::resolve`]), which cannot be fooled into touching memory outside
//! the segment even when the program races a free against a use on another stream.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::ops::Buffer;

use super::error::NpuError;
use super::ids::{DevicePtr, StreamId};

/// The smallest block, and the granule requests are rounded to.
pub const MIN_BLOCK: usize = 512;
/// Requests up to this size share [`SMALL_SEGMENT`]-byte segments.
const SMALL_REQUEST: usize = 1 << 20;
const SMALL_SEGMENT: usize = 2 << 20;
/// Segment addresses are aligned to this, and this much unmapped space follows each.
pub const SEGMENT_ALIGN: u64 = 2 << 20;
/// The first segment's address: any non-zero value; this one reads as a device address.
pub const BASE_ADDRESS: u64 = 0x1000_0000_0000;

/// Mapped device memory.
pub(crate) struct Segment {
    /// Ids grow with mapping order: the global order in which a task locks segments.
    pub id: u64,
    pub base: u64,
    pub len: usize,
    /// Its bytes. A `parking_lot` lock: a task locks and unlocks it raw, in lock order, with
    /// no guard objects and no poisoning (see `access`).
    pub data: parking_lot::RwLock<Buffer>,
}

/// A range resolved to its segment.
#[derive(Clone)]
pub(crate) struct Span {
    pub segment: Arc<Segment>,
    pub offset: usize,
    pub len: usize,
}

/// What the device's memory holds, for the runtime to print.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// The configured capacity.
    pub capacity: u64,
    /// Bytes in mapped segments.
    pub reserved: u64,
    /// Bytes of allocated blocks (rounded sizes).
    pub allocated: u64,
    /// Reserved but not allocated: free and pending blocks kept for reuse.
    pub cached: u64,
    /// The most `allocated` has been.
    pub peak_allocated: u64,
    /// Segments mapped now.
    pub segments: u64,
    /// Segments ever mapped: the OS allocations (flat in steady state).
    pub segment_maps: u64,
    /// Segments ever unmapped (by recycling).
    pub segment_unmaps: u64,
    /// Allocations served.
    pub allocs: u64,
    /// Times an allocation went through the out-of-memory recovery path.
    pub oom_recoveries: u64,
    /// Allocations that failed with out of memory.
    pub ooms: u64,
    /// Host staging memory: bytes handed out now.
    pub host_in_use: u64,
    /// Host staging memory: bytes cached for reuse.
    pub host_cached: u64,
}

impl std::fmt::Display for MemoryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MIB: f64 = (1 << 20) as f64;
        let mib = |b: u64| b as f64 / MIB;
        write!(
            f,
            "device memory: {:.1} MiB allocated (peak {:.1}), {:.1} MiB cached, {:.1} of {:.1} MiB \
             reserved in {} segments ({} mapped, {} unmapped); {} allocations, {} out-of-memory \
             recoveries, {} failures; host staging {:.1} MiB in use, {:.1} MiB cached",
            mib(self.allocated),
            mib(self.peak_allocated),
            mib(self.cached),
            mib(self.reserved),
            mib(self.capacity),
            self.segments,
            self.segment_maps,
            self.segment_unmaps,
            self.allocs,
            self.oom_recoveries,
            self.ooms,
            mib(self.host_in_use),
            mib(self.host_cached),
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Allocated,
    /// Freed on `stream` when it had `seq` tasks submitted.
    Pending {
        stream: StreamId,
        seq: u64,
    },
    Free,
}

#[derive(Debug)]
struct Block {
    /// Base of the segment the block is in.
    segment: u64,
    size: usize,
    /// What the allocation asked for: the bound checks use it.
    requested: usize,
    state: State,
}

/// Blocks freed on one stream that it has not passed yet.
#[derive(Default)]
struct Pending {
    by_size: BTreeSet<(usize, u64)>,
    by_seq: BTreeSet<(u64, u64)>,
}

/// Why [`Heap::alloc`] gave up: nothing cached fits and mapping would pass the capacity.
#[derive(Debug)]
pub(crate) struct NoRoom;

/// The allocator's state; one lock guards it.
pub(crate) struct Heap {
    capacity: u64,
    next_address: u64,
    next_segment: u64,
    segments: BTreeMap<u64, Arc<Segment>>,
    blocks: BTreeMap<u64, Block>,
    /// Settled free blocks, any stream may take them.
    free: BTreeSet<(usize, u64)>,
    pending: BTreeMap<StreamId, Pending>,
    /// Whether a stream may take back at once what it freed (see the module doc). Off
    /// under the sanitizer, which poisons a block when it is allocated: with work that
    /// used the block still queued on the stream, that would overwrite what the work
    /// reads.
    reuse_pending: bool,
    stats: MemoryStats,
}

fn round(size: usize) -> usize {
    size.max(1).div_ceil(MIN_BLOCK) * MIN_BLOCK
}

impl Heap {
    fn new(capacity: u64) -> Self {
        Heap {
            reuse_pending: true,
            capacity,
            next_address: BASE_ADDRESS,
            next_segment: 0,
            segments: BTreeMap::new(),
            blocks: BTreeMap::new(),
            free: BTreeSet::new(),
            pending: BTreeMap::new(),
            stats: MemoryStats {
                capacity,
                ..MemoryStats::default()
            },
        }
    }

    pub fn stats(&self) -> MemoryStats {
        let mut s = self.stats;
        s.cached = s.reserved - s.allocated;
        s
    }

    /// Allocates `size` bytes for use on `stream`. `completed` tells how many tasks a
    /// stream has completed. Returns the new segment when one was mapped (the caller
    /// publishes it to the resolver).
    pub fn alloc(
        &mut self,
        size: usize,
        stream: StreamId,
        completed: &dyn Fn(StreamId) -> u64,
    ) -> Result<(DevicePtr, Option<Arc<Segment>>), NoRoom> {
        self.settle(completed);
        let rounded = round(size);
        if let Some(addr) = self.best_fit(rounded, stream) {
            self.take(addr, rounded, size);
            return Ok((DevicePtr(addr), None));
        }
        let segment = self.map(rounded).ok_or(NoRoom)?;
        self.take(segment.base, rounded, size);
        Ok((DevicePtr(segment.base), Some(segment)))
    }

    fn best_fit(&self, rounded: usize, stream: StreamId) -> Option<u64> {
        let shared = self.free.range((rounded, 0)..).next().copied();
        let own = self
            .pending
            .get(&stream)
            .filter(|_| self.reuse_pending)
            .and_then(|p| p.by_size.range((rounded, 0)..).next().copied());
        match (shared, own) {
            (Some(a), Some(b)) => Some(if b < a { b.1 } else { a.1 }),
            (a, b) => a.or(b).map(|(_, addr)| addr),
        }
    }

    /// Marks the free or pending block at `addr` allocated for `requested` bytes, splitting
    /// off what is past `rounded` when that is a block's worth.
    fn take(&mut self, addr: u64, rounded: usize, requested: usize) {
        let block = self.blocks.get_mut(&addr).expect("a listed block exists");
        let (size, state, segment) = (block.size, block.state, block.segment);
        block.state = State::Allocated;
        block.requested = requested;
        match state {
            State::Free => {
                self.free.remove(&(size, addr));
            }
            State::Pending { stream, seq } => {
                let p = self.pending.get_mut(&stream).expect("a pending list");
                p.by_size.remove(&(size, addr));
                p.by_seq.remove(&(seq, addr));
            }
            State::Allocated => unreachable!("only free blocks are listed"),
        }
        if size - rounded >= MIN_BLOCK {
            self.blocks.get_mut(&addr).expect("just taken").size = rounded;
            let rest = addr + rounded as u64;
            let rest_size = size - rounded;
            self.blocks.insert(
                rest,
                Block {
                    segment,
                    size: rest_size,
                    requested: 0,
                    state,
                },
            );
            match state {
                State::Free => {
                    self.free.insert((rest_size, rest));
                }
                State::Pending { stream, seq } => {
                    let p = self.pending.get_mut(&stream).expect("a pending list");
                    p.by_size.insert((rest_size, rest));
                    p.by_seq.insert((seq, rest));
                }
                State::Allocated => unreachable!(),
            }
        }
        let taken = self.blocks[&addr].size as u64;
        self.stats.allocated += taken;
        self.stats.peak_allocated = self.stats.peak_allocated.max(self.stats.allocated);
        self.stats.allocs += 1;
    }

    /// Maps a segment for a request of `rounded` bytes: the policy size when it fits the
    /// capacity, else exactly the request, else nothing.
    fn map(&mut self, rounded: usize) -> Option<Arc<Segment>> {
        let policy = if rounded <= SMALL_REQUEST {
            SMALL_SEGMENT
        } else {
            rounded.div_ceil(SMALL_SEGMENT) * SMALL_SEGMENT
        };
        let room = self.capacity.saturating_sub(self.stats.reserved);
        let len = if policy as u64 <= room {
            policy
        } else if rounded as u64 <= room {
            rounded
        } else {
            return None;
        };
        let base = self.next_address;
        let end = base.checked_add(len as u64)?.checked_add(SEGMENT_ALIGN)?;
        let next_address = end.checked_next_multiple_of(SEGMENT_ALIGN)?;
        // The host allocation may fail even within the capacity (the host has less free
        // memory than the device was given): that is out of memory too, never an abort.
        // Asked before anything changes, so a refusal leaves the heap as it was.
        let data = Buffer::try_zeroed(len)?;
        self.next_address = next_address;
        let segment = Arc::new(Segment {
            id: self.next_segment,
            base,
            len,
            data: parking_lot::RwLock::new(data),
        });
        self.next_segment += 1;
        self.segments.insert(base, segment.clone());
        self.blocks.insert(
            base,
            Block {
                segment: base,
                size: len,
                requested: 0,
                state: State::Free,
            },
        );
        self.free.insert((len, base));
        self.stats.reserved += len as u64;
        self.stats.segments += 1;
        self.stats.segment_maps += 1;
        Some(segment)
    }

    /// Frees the block at `ptr` on `stream`, which has had `seq` tasks submitted.
    pub fn free(&mut self, ptr: DevicePtr, stream: StreamId, seq: u64) -> Result<(), NpuError> {
        let block = match self.blocks.get_mut(&ptr.0) {
            Some(b) if b.state == State::Allocated => b,
            _ => return Err(NpuError::InvalidFree { ptr }),
        };
        block.state = State::Pending { stream, seq };
        let size = block.size;
        self.stats.allocated -= size as u64;
        let p = self.pending.entry(stream).or_default();
        p.by_size.insert((size, ptr.0));
        p.by_seq.insert((seq, ptr.0));
        Ok(())
    }

    /// Moves every pending block whose stream has passed its free to the shared free set.
    pub fn settle(&mut self, completed: &dyn Fn(StreamId) -> u64) {
        let mut ready = Vec::new();
        for (&stream, p) in &mut self.pending {
            let done = completed(stream);
            while let Some(&(seq, addr)) = p.by_seq.first() {
                if seq > done {
                    break;
                }
                p.by_seq.pop_first();
                let size = self.blocks[&addr].size;
                p.by_size.remove(&(size, addr));
                ready.push(addr);
            }
        }
        self.pending.retain(|_, p| !p.by_seq.is_empty());
        for addr in ready {
            self.release(addr);
        }
    }

    /// Marks a block free and merges it with free neighbours in its segment.
    fn release(&mut self, addr: u64) {
        let (segment, mut size) = {
            let b = self.blocks.get_mut(&addr).expect("a block");
            b.state = State::Free;
            b.requested = 0;
            (b.segment, b.size)
        };
        let mut start = addr;
        let prev = self
            .blocks
            .range(..addr)
            .next_back()
            .filter(|&(&p, b)| {
                b.segment == segment && b.state == State::Free && p + b.size as u64 == addr
            })
            .map(|(&p, b)| (p, b.size));
        if let Some((prev, prev_size)) = prev {
            self.free.remove(&(prev_size, prev));
            self.blocks.remove(&addr);
            size += prev_size;
            start = prev;
        }
        let next = start + size as u64;
        let next_size = self
            .blocks
            .get(&next)
            .filter(|b| b.segment == segment && b.state == State::Free)
            .map(|b| b.size);
        if let Some(next_size) = next_size {
            self.free.remove(&(next_size, next));
            self.blocks.remove(&next);
            size += next_size;
        }
        self.blocks.get_mut(&start).expect("the merged block").size = size;
        self.free.insert((size, start));
    }

    /// Unmaps every segment that is one settled free block; returns them.
    pub fn recycle(&mut self) -> Vec<Arc<Segment>> {
        let idle: Vec<u64> = self
            .segments
            .values()
            .filter(|s| {
                self.blocks
                    .get(&s.base)
                    .is_some_and(|b| b.state == State::Free && b.size == s.len)
            })
            .map(|s| s.base)
            .collect();
        let mut out = Vec::with_capacity(idle.len());
        for base in idle {
            let s = self.segments.remove(&base).expect("listed");
            self.blocks.remove(&base);
            self.free.remove(&(s.len, base));
            self.stats.reserved -= s.len as u64;
            self.stats.segments -= 1;
            self.stats.segment_unmaps += 1;
            out.push(s);
        }
        out
    }

    /// For each stream with pending frees, the task count it must reach to pass them all.
    pub fn pending_targets(&self) -> Vec<(StreamId, u64)> {
        self.pending
            .iter()
            .filter_map(|(&s, p)| p.by_seq.last().map(|&(seq, _)| (s, seq)))
            .collect()
    }

    pub fn out_of_memory(&mut self, requested: usize) -> NpuError {
        self.stats.ooms += 1;
        let s = self.stats();
        NpuError::OutOfMemory {
            requested: requested as u64,
            capacity: s.capacity,
            allocated: s.allocated,
            cached: s.cached,
        }
    }

    pub fn note_recovery(&mut self) {
        self.stats.oom_recoveries += 1;
    }

    /// Whether `len` bytes at `ptr` lie in the requested bytes of a block allocated now. An
    /// empty range is valid at any address (an empty tensor's address is never read).
    pub fn check(&self, ptr: DevicePtr, len: usize) -> Result<(), NpuError> {
        if len == 0 {
            return Ok(());
        }
        let (&base, block) = self
            .blocks
            .range(..=ptr.0)
            .next_back()
            .filter(|(a, b)| ptr.0 < *a + b.size as u64)
            .ok_or(NpuError::InvalidAddress { ptr })?;
        if block.state != State::Allocated {
            return Err(NpuError::UseAfterFree {
                ptr,
                base: DevicePtr(base),
            });
        }
        let end = (ptr.0 - base).checked_add(len as u64);
        if end.is_none_or(|e| e > block.requested as u64) {
            return Err(NpuError::OutOfBounds {
                ptr,
                len: len as u64,
                base: DevicePtr(base),
                size: block.requested as u64,
            });
        }
        Ok(())
    }
}

/// Device memory: the allocator's state behind one lock, and the segment map the workers
/// resolve addresses with behind another, so running tasks never wait for the allocator.
pub(crate) struct Memory {
    pub heap: Mutex<Heap>,
    segments: RwLock<BTreeMap<u64, Arc<Segment>>>,
    /// Counts unmaps: a span resolved while it is unchanged still names the segment now
    /// mapped at its address (what a model's prepared launches rely on).
    unmaps: std::sync::atomic::AtomicU64,
    /// Counts frees, each added with the heap locked: a range found in an allocated block
    /// while it is unchanged still is in one (what a launch's cached checks rely on).
    frees: std::sync::atomic::AtomicU64,
}

impl Memory {
    /// Device memory of `capacity` bytes; `reuse_pending`: whether a stream may take back
    /// at once what it freed (see [`Heap`]).
    pub fn new(capacity: u64, reuse_pending: bool) -> Self {
        Memory {
            heap: Mutex::new(Heap {
                reuse_pending,
                ..Heap::new(capacity)
            }),
            segments: RwLock::new(BTreeMap::new()),
            unmaps: std::sync::atomic::AtomicU64::new(0),
            frees: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The free count now (see `frees`).
    pub fn free_epoch(&self) -> u64 {
        self.frees.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Frees a block (see [`Heap::free`]), counting it while the heap is locked.
    pub fn free(&self, ptr: DevicePtr, stream: StreamId, seq: u64) -> Result<(), NpuError> {
        let mut heap = self.heap();
        heap.free(ptr, stream, seq)?;
        self.frees
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// The unmap count now (see `unmaps`).
    pub fn unmap_epoch(&self) -> u64 {
        self.unmaps.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn heap(&self) -> std::sync::MutexGuard<'_, Heap> {
        self.heap.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes a newly mapped segment resolvable. Called with the heap locked, so a pointer
    /// is never handed out before its segment resolves.
    pub fn publish(&self, segment: Arc<Segment>) {
        self.segments
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(segment.base, segment);
    }

    /// Removes unmapped segments from the resolver (their bytes live on while a running task
    /// still holds them).
    pub fn unpublish(&self, segments: &[Arc<Segment>]) {
        let mut map = self
            .segments
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for s in segments {
            map.remove(&s.base);
        }
        if !segments.is_empty() {
            self.unmaps
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }

    /// Resolves `len` bytes at `ptr` to their segment; `None` for an empty range.
    pub fn resolve(&self, ptr: DevicePtr, len: usize) -> Result<Option<Span>, NpuError> {
        if len == 0 {
            return Ok(None);
        }
        let map = self.segments.read().unwrap_or_else(PoisonError::into_inner);
        resolve_in(&map, ptr, len).map(Some)
    }

    /// Resolves several ranges under one lock of the segment map.
    pub fn resolve_all(
        &self,
        ranges: impl Iterator<Item = (DevicePtr, usize)>,
        out: &mut Vec<Option<Span>>,
    ) -> Result<(), NpuError> {
        let map = self.segments.read().unwrap_or_else(PoisonError::into_inner);
        for (ptr, len) in ranges {
            out.push(if len == 0 {
                None
            } else {
                Some(resolve_in(&map, ptr, len)?)
            });
        }
        Ok(())
    }
}

fn resolve_in(
    map: &BTreeMap<u64, Arc<Segment>>,
    ptr: DevicePtr,
    len: usize,
) -> Result<Span, NpuError> {
    let segment = map
        .range(..=ptr.0)
        .next_back()
        .map(|(_, s)| s)
        .filter(|s| ptr.0 < s.base + s.len as u64)
        .ok_or(NpuError::InvalidAddress { ptr })?;
    let offset = (ptr.0 - segment.base) as usize;
    if offset.checked_add(len).is_none_or(|e| e > segment.len) {
        return Err(NpuError::OutOfBounds {
            ptr,
            len: len as u64,
            base: DevicePtr(segment.base),
            size: segment.len as u64,
        });
    }
    Ok(Span {
        segment: segment.clone(),
        offset,
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S0: StreamId = StreamId(0);
    const S1: StreamId = StreamId(1);

    fn heap(capacity: u64) -> Heap {
        Heap::new(capacity)
    }

    fn alloc(h: &mut Heap, size: usize, s: StreamId, done: u64) -> Option<DevicePtr> {
        h.alloc(size, s, &|_| done).ok().map(|(p, _)| p)
    }

    #[test]
    fn blocks_split_and_merge_back() {
        let mut h = heap(1 << 30);
        let a = alloc(&mut h, 100, S0, 0).unwrap();
        let b = alloc(&mut h, 1000, S0, 0).unwrap();
        assert_eq!(a.0, BASE_ADDRESS);
        assert_eq!(b.0, BASE_ADDRESS + 512, "split from the same segment");
        assert_eq!(h.stats().segment_maps, 1);
        assert_eq!(h.stats().allocated, 512 + 1024);
        h.free(a, S0, 0).unwrap();
        h.free(b, S0, 0).unwrap();
        h.settle(&|_| 0);
        assert_eq!(h.blocks.len(), 1, "merged into one block");
        assert_eq!(h.recycle().len(), 1);
        assert_eq!(h.stats().reserved, 0);
    }

    #[test]
    fn reuse_is_stream_ordered() {
        let mut h = heap(4096);
        let a = alloc(&mut h, 4096, S0, 0).unwrap();
        h.free(a, S0, 5).unwrap();
        assert!(alloc(&mut h, 4096, S1, 0).is_none(), "S0 has not passed");
        assert_eq!(alloc(&mut h, 4096, S0, 0), Some(a), "S0 reuses at once");
        h.free(a, S0, 5).unwrap();
        assert_eq!(
            h.alloc(4096, S1, &|s| if s == S0 { 5 } else { 0 })
                .ok()
                .map(|r| r.0),
            Some(a),
            "S0 has passed the free"
        );
    }

    #[test]
    fn checks_name_the_fault() {
        let mut h = heap(1 << 30);
        let a = alloc(&mut h, 100, S0, 0).unwrap();
        assert_eq!(h.check(a, 100), Ok(()));
        assert_eq!(h.check(DevicePtr(a.0 + 50), 50), Ok(()));
        assert!(matches!(
            h.check(DevicePtr(a.0 + 50), 51),
            Err(NpuError::OutOfBounds { size: 100, .. })
        ));
        assert_eq!(
            h.check(DevicePtr(8), 1),
            Err(NpuError::InvalidAddress { ptr: DevicePtr(8) })
        );
        h.free(a, S0, 0).unwrap();
        assert_eq!(
            h.check(a, 1),
            Err(NpuError::UseAfterFree { ptr: a, base: a })
        );
        assert_eq!(h.free(a, S0, 0), Err(NpuError::InvalidFree { ptr: a }));
    }

    #[test]
    fn a_small_capacity_maps_exactly_the_request() {
        let mut h = heap(3000);
        let a = alloc(&mut h, 2000, S0, 0).unwrap();
        assert_eq!(h.stats().reserved, 2048);
        assert!(alloc(&mut h, 1000, S0, 0).is_none());
        h.free(a, S0, 0).unwrap();
        assert!(
            alloc(&mut h, 1000, S0, 0).is_some(),
            "split of the cached block"
        );
    }
}
