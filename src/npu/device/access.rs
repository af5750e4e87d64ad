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

use std::sync::{PoisonError, RwLockReadGuard, RwLockWriteGuard};

use crate::npu::ops::Buffer;

use super::NpuError;
use super::memory::{Segment, Span};

/// A held lock: kept for its release on drop, never read.
#[expect(dead_code, reason = "a guard is held, not read")]
enum Guard<'a> {
    Read(RwLockReadGuard<'a, Buffer>),
    Write(RwLockWriteGuard<'a, Buffer>),
}

/// Reuses a vector's allocation for another element type of the same layout (a reference
/// with another lifetime).
#[inline]
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

/// How one argument set's spans are locked and handed out: worked out by [`plan`] per
/// task, or once for a launch whose spans stay the same (`task::Resolved`,
/// `model::Prepared`), so running it does no pairwise overlap test, no sort and no
/// search.
#[derive(Clone, Default)]
pub(crate) struct Plan {
    /// The distinct segments in lock order (ascending id): the index of an argument in
    /// it (inputs then outputs), and whether it is locked for writing (holds an output).
    segments: Vec<(usize, bool)>,
    /// Each argument's segment, by position in `segments`; unused for an empty range.
    segment_of: Vec<usize>,
    /// Each input's place in the copy space when it overlaps an output (read from a copy
    /// made before any output is written), `None` when read in place.
    sources: Vec<Option<usize>>,
    /// Bytes of copy space the sources need.
    need: usize,
}

/// Vectors and copy space kept between tasks.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The plan of a task run without one of its own.
    plan: Plan,
    /// The argument set's distinct segments while planning: (id, argument index, write).
    segments: Vec<(u64, usize, bool)>,
    /// Each segment's base pointer, by position in the plan's `segments`.
    bases: Vec<usize>,
    copies: Buffer,
    guards: Vec<Guard<'static>>,
    inputs: Vec<&'static [u8]>,
    outputs: Vec<&'static mut [u8]>,
}

fn overlaps(a: &Span, b: &Span) -> bool {
    a.segment.id == b.segment.id && a.offset < b.offset + b.len && b.offset < a.offset + a.len
}

fn span<'s>(spans_in: &'s [Option<Span>], spans_out: &'s [Option<Span>], i: usize) -> &'s Span {
    let n = spans_in.len();
    let s = if i < n {
        &spans_in[i]
    } else {
        &spans_out[i - n]
    };
    s.as_ref().expect("only non-empty spans are listed")
}

/// Works out into `plan` how `ins` and `outs` (`None`: an empty range) are locked and
/// handed out, with `scratch`'s working space. Errors: outputs that overlap.
pub(crate) fn plan(
    ins: &[Option<Span>],
    outs: &[Option<Span>],
    plan: &mut Plan,
    scratch: &mut Scratch,
) -> Result<(), NpuError> {
    let segments = &mut scratch.segments;
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
    segments.clear();
    for (i, s) in ins.iter().chain(outs).enumerate() {
        if let Some(s) = s {
            segments.push((s.segment.id, i, i >= ins.len()));
        }
    }
    segments.sort_unstable_by_key(|&(id, _, write)| (id, !write));
    segments.dedup_by_key(|&mut (id, _, _)| id);
    plan.segments.clear();
    plan.segments
        .extend(segments.iter().map(|&(_, i, write)| (i, write)));
    plan.segment_of.clear();
    plan.segment_of.extend(ins.iter().chain(outs).map(|s| {
        s.as_ref().map_or(usize::MAX, |s| {
            segments
                .binary_search_by_key(&s.segment.id, |&(id, _, _)| id)
                .expect("every span's segment is listed")
        })
    }));

    // Inputs overlapping an output are read from copies.
    plan.sources.clear();
    let mut need = 0;
    for s in ins {
        let copy = s
            .as_ref()
            .filter(|s| outs.iter().flatten().any(|o| overlaps(s, o)));
        plan.sources.push(copy.map(|s| {
            let at = need;
            need += s.len.next_multiple_of(64);
            at
        }));
    }
    plan.need = need;
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
    let mut p = std::mem::take(&mut scratch.plan);
    let r = plan(ins, outs, &mut p, scratch).map(|()| with_plan(ins, outs, &p, scratch, f));
    scratch.plan = p;
    r
}

/// [`with_spans`] by a plan made for these spans (by [`plan`], with nothing remapped
/// since).
pub(crate) fn with_plan<R>(
    ins: &[Option<Span>],
    outs: &[Option<Span>],
    plan: &Plan,
    scratch: &mut Scratch,
    f: impl FnOnce(&[&[u8]], &mut [&mut [u8]]) -> R,
) -> R {
    if scratch.copies.len() < plan.need {
        scratch.copies = Buffer::zeroed(plan.need.next_power_of_two());
    }

    let mut guards: Vec<Guard<'_>> = reuse(std::mem::take(&mut scratch.guards));
    let bases = &mut scratch.bases;
    bases.clear();
    for &(i, write) in &plan.segments {
        let seg: &Segment = &span(ins, outs, i).segment;
        let guard = if write {
            let mut g = seg.data.write().unwrap_or_else(PoisonError::into_inner);
            bases.push(g.as_bytes_mut().as_mut_ptr() as usize);
            Guard::Write(g)
        } else {
            let g = seg.data.read().unwrap_or_else(PoisonError::into_inner);
            bases.push(g.as_bytes().as_ptr() as usize);
            Guard::Read(g)
        };
        guards.push(guard);
    }
    let base_of = |arg: usize| bases[plan.segment_of[arg]] as *mut u8;

    let copies = scratch.copies.as_bytes_mut();
    for (k, (s, at)) in ins.iter().zip(&plan.sources).enumerate() {
        if let (Some(s), Some(at)) = (s, at) {
            // SAFETY: the segment is locked (for writing, as it holds an output) and
            // `offset + len <= segment.len` was checked when the span was resolved; the
            // bytes are read before any output slice exists.
            let src = unsafe { std::slice::from_raw_parts(base_of(k).add(s.offset), s.len) };
            copies[*at..*at + s.len].copy_from_slice(src);
        }
    }
    let copies: &[u8] = copies;

    let mut inputs: Vec<&[u8]> = reuse(std::mem::take(&mut scratch.inputs));
    for (k, (s, at)) in ins.iter().zip(&plan.sources).enumerate() {
        inputs.push(match (s, at) {
            (None, _) => &[],
            (Some(s), Some(at)) => &copies[*at..*at + s.len],
            // SAFETY: the segment is locked and the range is inside it (checked at
            // resolution). No `&mut` slice overlaps this range: the input overlaps no
            // output (it would have been copied), and only outputs are made `&mut`. The
            // slice is dropped below, before the guards.
            (Some(s), None) => unsafe {
                std::slice::from_raw_parts(base_of(k).add(s.offset), s.len)
            },
        });
    }
    let n = ins.len();
    let mut outputs: Vec<&mut [u8]> = reuse(std::mem::take(&mut scratch.outputs));
    for (k, s) in outs.iter().enumerate() {
        outputs.push(match s {
            None => &mut [],
            // SAFETY: the segment is write-locked by this task and the range is inside it.
            // Outputs were checked pairwise disjoint by the plan, and every input slice of
            // this segment overlapping an output reads from `copies` instead, so this is
            // the only reference to these bytes. The slice is dropped below, before the
            // guards.
            Some(s) => unsafe {
                std::slice::from_raw_parts_mut(base_of(n + k).add(s.offset), s.len)
            },
        });
    }

    let r = f(&inputs, &mut outputs);

    scratch.inputs = reuse(inputs);
    scratch.outputs = reuse(outputs);
    scratch.guards = reuse(guards);
    r
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, RwLock};

    use super::*;

    fn segment(id: u64, bytes: &[u8]) -> Arc<Segment> {
        Arc::new(Segment {
            id,
            base: 0,
            len: bytes.len(),
            data: RwLock::new(Buffer::from_bytes(bytes)),
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
        assert_eq!(s.data.read().unwrap().as_bytes(), &[1, 1, 2, 3, 4, 5, 6, 8]);
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
        assert_eq!(a.data.read().unwrap().as_bytes(), &[1, 2, 11, 22]);
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
