//! The one byte mover behind every transfer but the hot NC1HWC0 pair: a nest of loops,
//! each with an extent and a stride on either side, some of whose logical axes are split
//! into an outer and an inner loop (C into C1 and C0, N into N1 and N0). A split axis whose
//! length is not a multiple of its block runs as two nests, the full blocks and the tail,
//! so no loop divides or tests an index per element.
//!
//! Elements are `[u8; N]` for N in 1, 2, 4, 8: transfers move elements without reading
//! them, so one copy per element size serves every element type.

use smallvec::SmallVec;

/// One loop of a nest: its extent and its strides (in elements) on the plain side and on
/// the blocked side of a transfer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Loop {
    pub len: usize,
    pub plain: usize,
    pub blocked: usize,
}

/// A logical axis of `len` elements stored as an outer loop of blocks and an inner loop
/// within a block (the inner loop's `len` is the block size).
#[derive(Debug, Clone, Copy)]
pub(super) struct Split {
    pub outer: usize,
    pub inner: usize,
    pub len: usize,
}

/// A nest of loops with its split axes, in the order the loops run (outermost first).
#[derive(Debug, Clone, Default)]
pub(super) struct Nest {
    pub loops: SmallVec<[Loop; 8]>,
    pub splits: SmallVec<[Split; 2]>,
}

impl Nest {
    /// Adds a loop; returns its index.
    pub fn push(&mut self, len: usize, plain: usize, blocked: usize) -> usize {
        self.loops.push(Loop {
            len,
            plain,
            blocked,
        });
        self.loops.len() - 1
    }

    /// Adds a split axis of `len` elements in blocks of `block`: the outer loop (the
    /// blocks) and the inner loop (within a block) are placed later with [`Nest::push`];
    /// their indices are given here.
    pub fn split(&mut self, outer: usize, inner: usize, len: usize) {
        self.splits.push(Split { outer, inner, len });
    }
}

/// Runs `nest` from `src` into `dst`, elements of `N` bytes, starting at the element
/// offsets `base` (plain side, blocked side): from the plain side to the blocked one when
/// `to_blocked`, else back. Blocked positions no element maps to (the padding) are left as
/// they are; the caller zeroes them.
pub(super) fn run<const N: usize>(
    nest: &Nest,
    to_blocked: bool,
    base: (usize, usize),
    src: &[u8],
    dst: &mut [u8],
) {
    let (src, _) = src.as_chunks::<N>();
    let (dst, _) = dst.as_chunks_mut::<N>();
    let parts = 1usize << nest.splits.len();
    for part in 0..parts {
        let mut loops = nest.loops.clone();
        let (mut plain0, mut blocked0) = base;
        for (bit, s) in nest.splits.iter().enumerate() {
            let block = nest.loops[s.inner].len;
            let full = s.len / block;
            if part >> bit & 1 == 0 {
                loops[s.outer].len = full;
            } else {
                loops[s.outer].len = usize::from(s.len % block > 0);
                loops[s.inner].len = s.len % block;
                plain0 += full * nest.loops[s.outer].plain;
                blocked0 += full * nest.loops[s.outer].blocked;
            }
        }
        if loops.iter().any(|l| l.len == 0) {
            continue;
        }
        let (sides, base) = if to_blocked {
            (
                loops.iter().map(|l| (l.len, l.plain, l.blocked)).collect(),
                (plain0, blocked0),
            )
        } else {
            (
                loops.iter().map(|l| (l.len, l.blocked, l.plain)).collect(),
                (blocked0, plain0),
            )
        };
        copy_nest(src, dst, &sides, base);
    }
}

/// Copies along a nest of `(len, src stride, dst stride)` loops from the base offsets:
/// an odometer over the outer loops, a tight innermost loop.
fn copy_nest<const N: usize>(
    src: &[[u8; N]],
    dst: &mut [[u8; N]],
    loops: &SmallVec<[(usize, usize, usize); 8]>,
    (src0, dst0): (usize, usize),
) {
    let Some((&(len, ss, ds), outer)) = loops.split_last() else {
        return;
    };
    let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, outer.len());
    loop {
        let (mut s, mut d) = (src0, dst0);
        for (i, &(_, os, od)) in index.iter().zip(outer) {
            s += i * os;
            d += i * od;
        }
        if ss == 1 && ds == 1 {
            dst[d..d + len].copy_from_slice(&src[s..s + len]);
        } else {
            for k in 0..len {
                dst[d + k * ds] = src[s + k * ss];
            }
        }
        // The odometer: the last outer loop turns fastest.
        let mut level = outer.len();
        loop {
            if level == 0 {
                return;
            }
            level -= 1;
            index[level] += 1;
            if index[level] < outer[level].0 {
                break;
            }
            index[level] = 0;
        }
    }
}
