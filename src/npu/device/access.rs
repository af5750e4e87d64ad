//! How a task touches device memory: the segments of its argument set locked together, and
//! its ranges handed out as byte slices.
//!
//! Tasks on different streams run at once and may use different blocks of one segment, so
//! each segment has a reader-writer lock: a task takes a write lock on every segment that
//! holds one of its outputs and a read lock on the others, all in ascending segment id
//! order, for its whole run. The one global order means two tasks never wait on each other
//! in a cycle; holding every lock for the whole task means a kernel sees its inputs as they
//! were when it started and no other task sees its outputs half-written. A lock per block
//! would allow more overlap but blocks split and merge as the allocator works; a segment
//! lives as long as its mapping.
//!
//! Within a write-locked segment the outputs become `&mut` slices and the inputs `&`
//! slices of the same buffer: outputs must not overlap each other (an error), and an input
//! that overlaps an output (an in-place op, or a device-to-device copy within one block) is
//! first copied to scratch memory, so the kernel reads the input as it was before it
//! writes. This is the one place in the device with `unsafe`: carving disjoint slices out of
//! one locked buffer.
//!
//! Every vector used here lives in a [`Scratch`] the stream worker keeps, so a task
//! allocates nothing once the worker has seen its largest argument set.

use std::sync::Arc;

use parking_lot::lock_api::RawRwLock as _;

use crate::ops::Buffer;

use super::error::NpuError;
use super::memory::{Segment, Span};

/// The segments a task has locked (the first `n` of a lock set's, each for writing when
/// marked), unlocked when this is dropped: when the task ends, and when it panics.
///
/// The locks are taken and released raw, with no guard per segment: guards would have to
/// live in a vector kept between tasks, and moving them in and out of it, and dropping
/// each, is a noticeable part of a small launch's instructions.
struct Locked<'p> {
    segments: &'p [(Arc<Segment>, bool)],
    n: usize,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        for (seg, write) in &self.segments[..self.n] {
            // SAFETY: `with_span_locks` locked this segment (for writing when `write`) and every
            // slice it made of the segment's bytes is gone: they do not outlive `f`'s call,
            // and this guard is dropped after it.
            unsafe {
                if *write {
                    seg.data.force_unlock_write();
                } else {
                    seg.data.force_unlock_read();
                }
            }
        }
    }
}

/// Reuses a vector's allocation for another element type of the same layout (a reference
/// with another lifetime). Always inlined: it is a few moves, called several times per
/// launch.
#[inline(always)]
pub(crate) fn reuse<T, U>(mut v: Vec<T>) -> Vec<U> {
    const {
        assert!(size_of::<T>() == size_of::<U>() && align_of::<T>() == align_of::<U>());
    }
    v.clear();
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: the vector is empty, and `T` and `U` have one size and alignment (checked
    // at compile time), so its allocation is a valid allocation of `capacity` `U`s. (The
    // safe spelling, an emptied `into_iter` collected in place, compiles to calls that
    // cost more than a small task's kernel.)
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<U>(), 0, v.capacity()) }
}

/// How one argument set's spans are locked and handed out: worked out by [`span_locks`] per
/// task, or once for a launch whose spans stay the same (`task::Resolved`,
/// `model::Prepared`), so running it does no pairwise overlap test, no sort and no
/// search.
///
/// Everything a run reads is here, in two arrays: running kept locks touches no span
/// and no side table. (Locks kept per launch record is cold by the time its launch comes
/// round again in a long model; each separate array it reads costs a cache miss.)
#[derive(Clone, Default)]
pub(crate) struct SpanLocks {
    /// The distinct segments in lock order (ascending id), each with whether it is locked
    /// for writing (it holds an output).
    segments: Vec<(Arc<Segment>, bool)>,
    /// Each argument, inputs then outputs: where its bytes are.
    args: Vec<ArgAt>,
    /// How many of `args` are inputs.
    inputs: usize,
    /// Bytes of copy space the inputs read from copies need.
    need: usize,
}

/// Where one argument's bytes are, for [`with_span_locks`].
#[derive(Clone, Copy)]
struct ArgAt {
    /// Its segment's position in [`SpanLocks::segments`]; [`ArgAt::EMPTY`] for an empty range.
    segment: usize,
    offset: usize,
    len: usize,
    /// For an input overlapping an output: its place in the copy space (it is read from a
    /// copy made before any output is written); [`ArgAt::IN_PLACE`] otherwise.
    copy: usize,
}

impl ArgAt {
    const EMPTY: usize = usize::MAX;
    const IN_PLACE: usize = usize::MAX;
}

/// Vectors and copy space kept between tasks.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The locks of a task run without one of its own, taken out while it runs (by
    /// [`with_spans`], and by a stream's launch that has no record to keep one in).
    pub locks: SpanLocks,
    /// Each segment's base pointer, by position in the locks' `segments`.
    bases: Vec<usize>,
    copies: Buffer,
    inputs: Vec<&'static [u8]>,
    outputs: Vec<&'static mut [u8]>,
}

fn overlaps(a: &Span, b: &Span) -> bool {
    a.segment.id == b.segment.id && a.offset < b.offset + b.len && b.offset < a.offset + a.len
}

/// Works out into `locks` how `ins` and `outs` (`None`: an empty range) are locked and
/// handed out. Errors: outputs that overlap.
pub(crate) fn span_locks(
    ins: &[Option<Span>],
    outs: &[Option<Span>],
    locks: &mut SpanLocks,
) -> Result<(), NpuError> {
    for (a, sa) in outs.iter().enumerate() {
        for (b, sb) in outs.iter().enumerate().skip(a + 1) {
            if let (Some(sa), Some(sb)) = (sa, sb)
                && overlaps(sa, sb)
            {
                return Err(NpuError::OverlappingOutputs { a, b });
            }
        }
    }

    // The distinct segments, in lock order, each marked write when it holds an output.
    let segments = &mut locks.segments;
    segments.clear();
    for (i, s) in ins.iter().chain(outs).enumerate() {
        if let Some(s) = s {
            segments.push((s.segment.clone(), i >= ins.len()));
        }
    }
    segments.sort_unstable_by_key(|(s, write)| (s.id, !write));
    segments.dedup_by_key(|(s, _)| s.id);

    // Each argument's place; inputs overlapping an output are read from copies.
    locks.args.clear();
    locks.inputs = ins.len();
    let mut need = 0;
    for (i, s) in ins.iter().chain(outs).enumerate() {
        locks.args.push(match s {
            None => ArgAt {
                segment: ArgAt::EMPTY,
                offset: 0,
                len: 0,
                copy: ArgAt::IN_PLACE,
            },
            Some(s) => ArgAt {
                segment: segments
                    .binary_search_by_key(&s.segment.id, |(s, _)| s.id)
                    .expect("every span's segment is listed"),
                offset: s.offset,
                len: s.len,
                copy: if i < ins.len() && outs.iter().flatten().any(|o| overlaps(s, o)) {
                    let at = need;
                    need += s.len.next_multiple_of(64);
                    at
                } else {
                    ArgAt::IN_PLACE
                },
            },
        });
    }
    locks.need = need;
    Ok(())
}

/// Locks the segments of `ins` and `outs` (`None`: an empty range) and calls `f` with the
/// inputs' bytes and the outputs' bytes, in argument order.
pub(crate) fn with_spans<R>(
    ins: &[Option<Span>],
    outs: &[Option<Span>],
    scratch: &mut Scratch,
    f: impl FnOnce(&[&[u8]], &mut [&mut [u8]]) -> R,
) -> Result<R, NpuError> {
    let mut p = std::mem::take(&mut scratch.locks);
    let r = span_locks(ins, outs, &mut p).map(|()| with_span_locks(&p, scratch, f));
    scratch.locks = p;
    r
}

/// [`with_spans`] by a lock set made by [`span_locks`] (with nothing remapped since).
///
/// This runs once per kernel launch, so it is one pass over each of the locks' two arrays
/// and the scratch vectors, with no search and no allocation once the vectors have grown.
pub(crate) fn with_span_locks<R>(
    locks: &SpanLocks,
    scratch: &mut Scratch,
    f: impl FnOnce(&[&[u8]], &mut [&mut [u8]]) -> R,
) -> R {
    if scratch.copies.len() < locks.need {
        scratch.copies = Buffer::zeroed(locks.need.next_power_of_two());
    }

    let bases = &mut scratch.bases;
    bases.clear();
    let mut locked = Locked {
        segments: &locks.segments,
        n: 0,
    };
    for (seg, write) in &locks.segments {
        // SAFETY: `raw` is unsafe because a raw unlock could pull the lock from under a
        // guard; no guard of this lock exists here, and the only unlock is `locked`'s
        // drop, which releases it as it is taken below (shared or exclusive), after
        // every slice made from the buffer is gone.
        let raw = unsafe { seg.data.raw() };
        let data = seg.data.data_ptr();
        let base = if *write {
            raw.lock_exclusive();
            locked.n += 1;
            // SAFETY: write-locked just above, so no other reference to the buffer exists;
            // the `&mut` lives only for this expression, and the pointer taken from it is
            // what the slices below are carved from.
            unsafe { (*data).as_bytes_mut().as_mut_ptr() }
        } else {
            raw.lock_shared();
            locked.n += 1;
            // SAFETY: read-locked just above, so nobody writes the buffer while the lock is
            // held; the pointer taken from this shared reference is only read through.
            unsafe { (*data).as_bytes().as_ptr().cast_mut() }
        };
        bases.push(base as usize);
    }
    let bases: &[usize] = bases;
    let (ins, outs) = locks.args.split_at(locks.inputs);

    let copies = scratch.copies.as_bytes_mut();
    if locks.need > 0 {
        for a in ins.iter().filter(|a| a.copy != ArgAt::IN_PLACE) {
            // SAFETY: the segment is locked (for writing, as it holds an output) and
            // `offset + len <= segment.len` was checked when the span was resolved
            // (`memory::resolve_in`), the buffer being `segment.len` bytes since it was
            // mapped; the bytes are read before any output slice exists.
            let src = unsafe {
                std::slice::from_raw_parts((bases[a.segment] as *const u8).add(a.offset), a.len)
            };
            copies[a.copy..a.copy + a.len].copy_from_slice(src);
        }
    }
    let copies: &[u8] = copies;

    // Plain loops, not `extend`: its fold is not inlined, and a call per vector shows in
    // a small launch's cost.
    let mut inputs: Vec<&[u8]> = reuse(std::mem::take(&mut scratch.inputs));
    for a in ins {
        inputs.push(if a.segment == ArgAt::EMPTY {
            &[][..]
        } else if a.copy != ArgAt::IN_PLACE {
            &copies[a.copy..a.copy + a.len]
        } else {
            // SAFETY: the segment is locked and the range is inside it (checked at
            // resolution). No `&mut` slice overlaps this range: the input overlaps no
            // output (it would have been copied), and only outputs are made `&mut`. The
            // slice is dropped below, before the segments are unlocked.
            unsafe {
                std::slice::from_raw_parts((bases[a.segment] as *const u8).add(a.offset), a.len)
            }
        });
    }
    let mut outputs: Vec<&mut [u8]> = reuse(std::mem::take(&mut scratch.outputs));
    for a in outs {
        outputs.push(if a.segment == ArgAt::EMPTY {
            &mut [][..]
        } else {
            // SAFETY: the segment is write-locked by this task and the range is inside it.
            // Outputs were checked pairwise disjoint when the locks were made, and every input
            // slice of this segment overlapping an output reads from `copies` instead, so this is
            // the only reference to these bytes. The slice is dropped below, before the
            // segments are unlocked.
            unsafe {
                std::slice::from_raw_parts_mut((bases[a.segment] as *mut u8).add(a.offset), a.len)
            }
        });
    }

    let r = f(&inputs, &mut outputs);

    scratch.inputs = reuse(inputs);
    scratch.outputs = reuse(outputs);
    drop(locked);
    r
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn segment(id: u64, bytes: &[u8]) -> Arc<Segment> {
        Arc::new(Segment {
            id,
            base: 0,
            len: bytes.len(),
            data: parking_lot::RwLock::new(Buffer::from_bytes(bytes)),
        })
    }

    fn span(s: &Arc<Segment>, offset: usize, len: usize) -> Option<Span> {
        Some(Span {
            segment: s.clone(),
            offset,
            len,
        })
    }

    #[test]
    fn an_overlapping_input_is_read_as_it_was() {
        let s = segment(0, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut scratch = Scratch::default();
        // a memmove of 6 bytes one to the right, within one segment
        with_spans(
            &[span(&s, 0, 6)],
            &[span(&s, 1, 6)],
            &mut scratch,
            |i, o| o[0].copy_from_slice(i[0]),
        )
        .unwrap();
        assert_eq!(s.data.read().as_bytes(), &[1, 1, 2, 3, 4, 5, 6, 8]);
    }

    #[test]
    fn disjoint_ranges_of_one_segment_and_two_segments() {
        let a = segment(3, &[1, 2, 3, 4]);
        let b = segment(1, &[10, 20]);
        let mut scratch = Scratch::default();
        let ins = [span(&a, 0, 2), span(&b, 0, 2), None];
        let outs = [span(&a, 2, 2)];
        with_spans(&ins, &outs, &mut scratch, |i, o| {
            assert!(i[2].is_empty());
            for k in 0..2 {
                o[0][k] = i[0][k] + i[1][k];
            }
        })
        .unwrap();
        assert_eq!(a.data.read().as_bytes(), &[1, 2, 11, 22]);
    }

    #[test]
    fn a_panicking_task_leaves_its_segments_unlocked() {
        let a = segment(0, &[1, 2, 3, 4]);
        let b = segment(1, &[5, 6]);
        let mut scratch = Scratch::default();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_spans(
                &[span(&b, 0, 2)],
                &[span(&a, 0, 2)],
                &mut scratch,
                |_, _| -> () { panic!("a kernel fails") },
            )
        }));
        assert!(r.is_err());
        // Both locks were released: each can be taken for writing again.
        for s in [&a, &b] {
            assert!(s.data.try_write().is_some());
        }
        // And the scratch space is still usable.
        with_spans(
            &[span(&b, 0, 2)],
            &[span(&a, 2, 2)],
            &mut scratch,
            |i, o| o[0].copy_from_slice(i[0]),
        )
        .unwrap();
        assert_eq!(a.data.read().as_bytes(), &[1, 2, 5, 6]);
    }

    #[test]
    fn overlapping_outputs_are_refused() {
        let s = segment(0, &[0; 8]);
        let mut scratch = Scratch::default();
        let r = with_spans(
            &[],
            &[span(&s, 0, 4), span(&s, 3, 4)],
            &mut scratch,
            |_, _| (),
        );
        assert_eq!(r, Err(NpuError::OverlappingOutputs { a: 0, b: 1 }));
    }
}
