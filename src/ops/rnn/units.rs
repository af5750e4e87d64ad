//! A one-direction float32 LSTM's steps at batch 1 with the hidden units in two shares,
//! computed at once by two threads ([`Units`]).

use crate::ops::linalg::sgemv::sgemv;

/// Hidden units from which a one-direction float32 LSTM at batch 1 splits each step's
/// units between two threads ([`Units`]).
pub(super) const SPLIT_HIDDEN: usize = 64;

/// Spins a thread of [`Units::run`] waits for the other's share before it yields.
const SPINS: u32 = 1 << 12;

/// One direction of a float32 LSTM at batch 1 whose hidden units are cut in two shares,
/// computed at once by two threads: per step, each share's rows of `R h` (four
/// [`sgemv`]s, one per gate) and its units' cells, both reading the whole state of the
/// step before.
///
/// Why: at batch 1 a step is a matrix-vector product on R (256 KB for 128 units), read
/// from L2 at every step, and the LSTM is bound by that one core's L2 bandwidth (a
/// speech model's two 128-unit layers were 93% of its time); the directions of a
/// bidirectional one run one per thread already, but a one-direction layer left the
/// second core idle. Two shares read half of R each, from their own cores' L2.
///
/// The threads take shares in order from one counter (share `2 step + k`) and a share
/// waits only for the step before's shares to be done (a second counter), so whichever
/// threads take part, every share taken is computed: one thread alone takes them all in
/// turn. A unit's gates and cell are the same operations whatever its share (a row's
/// `sgemv` bits do not depend on the rows around it, the cell's on its position), so
/// the bits are those of the steps on one thread (`Recurrence::steps_f32` (recurrence.rs)).
pub(super) struct Units<'a> {
    /// R, `[4 h, h]`, gates i, o, f, c.
    pub(super) r: &'a [f32],
    /// The input projection of every step with the biases, `[seq, 4 h]`.
    pub(super) xw: &'a [f32],
    pub(super) clip: f32,
    pub(super) reverse: bool,
    pub(super) seq: usize,
    pub(super) h: usize,
}

/// The memory the shares of [`Units::run`] write, through its pointers.
#[derive(Clone, Copy)]
struct UnitsMemory {
    /// Two states of `h` floats: step `s` reads state `s % 2` and writes `(s + 1) % 2`.
    states: *mut f32,
    /// Per share, its gates' recurrent products and input projections (`8 n` floats).
    bufs: *mut f32,
    /// The cell state, `h` floats.
    c: *mut f32,
    /// Y, every step's output at `y_at(t)`.
    y: *mut f32,
}
// SAFETY: the shares of one step write disjoint floats (their units of the next state,
// of c and of the step's output, and their own buffers), and read the state no share
// writes meanwhile; a step's shares start after every share of the step before is done
// (`Units::run`).
unsafe impl Send for UnitsMemory {}
// SAFETY: as for Send.
unsafe impl Sync for UnitsMemory {}

impl Units<'_> {
    /// Runs every step on up to two threads: `scratch` is `10 h` floats, `hs` and `cs`
    /// the initial state (the final one on return), `y` the output, step `t`'s `h`
    /// floats at `y_at(t)`.
    pub(super) fn run(
        &self,
        scratch: &mut [f32],
        hs: &mut [f32],
        cs: &mut [f32],
        y: &mut [f32],
        y_at: impl Fn(usize) -> usize + Sync,
    ) {
        use std::sync::atomic::AtomicUsize;
        let h = self.h;
        assert!(
            scratch.len() >= 10 * h
                && hs.len() >= h
                && cs.len() >= h
                && self.r.len() >= 4 * h * h
                && self.xw.len() >= self.seq * 4 * h
                && (0..self.seq).all(|t| y_at(t).checked_add(h).is_some_and(|e| e <= y.len())),
            "Units: operands out of bounds"
        );
        // Share 0 is a whole number of AVX-512 vectors, share 1 the rest.
        let cut = (h / 2).next_multiple_of(16).min(h);
        let (states, bufs) = scratch.split_at_mut(2 * h);
        states[..h].copy_from_slice(&hs[..h]);
        let mem = UnitsMemory {
            states: states.as_mut_ptr(),
            bufs: bufs.as_mut_ptr(),
            c: cs.as_mut_ptr(),
            y: y.as_mut_ptr(),
        };
        let sync = UnitsSync {
            joined: AtomicUsize::new(0),
            next: [AtomicUsize::new(0), AtomicUsize::new(0)],
            done: AtomicUsize::new(0),
        };
        let take = || self.take(mem, &sync, cut, &y_at);
        rayon::join(take, take);
        hs[..h].copy_from_slice(&states[self.seq % 2 * h..][..h]);
    }

    /// One thread's part of [`Units::run`]: the first to come owns share 0, the second
    /// share 1. Each computes its own share of every step, in order, so each core keeps
    /// reading the same half of R from its own L2; and each, its own share of a step
    /// done, takes the other share of that step if nobody has started it. So the first
    /// never waits for a thread that may never come (rayon runs the second closure of a
    /// `join` on the same thread after the first when no other thread takes it), and a
    /// thread that falls behind (its core taken by another process, or a virtual CPU
    /// the host has descheduled) hands its shares to the other instead of holding every
    /// step back: with a fixed split, the two-thread LSTM ran slower than one thread
    /// whenever this machine's second core was slow (1,620-1,820 against 1,520 us).
    fn take(
        &self,
        mem: UnitsMemory,
        sync: &UnitsSync,
        cut: usize,
        y_at: &(impl Fn(usize) -> usize + Sync),
    ) {
        use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
        let own = sync.joined.fetch_add(1, AcqRel);
        if own > 1 {
            return;
        }
        // Claims step `s` of share `k`, unless some thread did.
        let claim = |k: usize, s: usize| {
            sync.next[k]
                .compare_exchange(s, s + 1, AcqRel, Relaxed)
                .is_ok()
        };
        if own == 1 {
            // The second: every step of share 1 the first has not taken, and after each
            // the step's share 0 if the first has not started it.
            loop {
                let s = sync.next[1].load(Acquire);
                if s >= self.seq {
                    return;
                }
                if claim(1, s) {
                    self.share(mem, sync, (s, 1), cut, y_at);
                    if claim(0, s) {
                        self.share(mem, sync, (s, 0), cut, y_at);
                    }
                }
            }
        }
        for s in 0..self.seq {
            if claim(0, s) {
                self.share(mem, sync, (s, 0), cut, y_at);
            }
            if claim(1, s) {
                self.share(mem, sync, (s, 1), cut, y_at);
            }
        }
    }

    /// Share `k` of step `step`, after both shares of the step before are done.
    fn share(
        &self,
        mem: UnitsMemory,
        sync: &UnitsSync,
        (step, k): (usize, usize),
        cut: usize,
        y_at: &(impl Fn(usize) -> usize + Sync),
    ) {
        use std::sync::atomic::Ordering::{Acquire, Release};
        // The step before's shares were claimed before this one, by threads now
        // computing them (or done): the wait ends.
        let mut spins = 0;
        while sync.done.load(Acquire) < 2 * step {
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let h = self.h;
        let (lo, n) = if k == 0 { (0, cut) } else { (cut, h - cut) };
        let t = if self.reverse {
            self.seq - 1 - step
        } else {
            step
        };
        // SAFETY: `run` checked every range these slices take: the states (2 h), this
        // share's buffers (8 n floats from 8 lo, inside 8 h), its units of c and of step
        // t's output. This share alone writes them while it runs (its units of the next
        // state, c and y, its buffers), and the state it reads, `step % 2`, is written by
        // the shares of the steps before and after, which are done (the wait above, with
        // its Acquire of their Release) or wait for this one.
        unsafe {
            let prev = std::slice::from_raw_parts(mem.states.add(step % 2 * h), h);
            let next_h = std::slice::from_raw_parts_mut(mem.states.add((step + 1) % 2 * h + lo), n);
            let buf = std::slice::from_raw_parts_mut(mem.bufs.add(8 * lo), 8 * n);
            let c = std::slice::from_raw_parts_mut(mem.c.add(lo), n);
            let out = std::slice::from_raw_parts_mut(mem.y.add(y_at(t) + lo), n);
            let (gates, pre) = buf.split_at_mut(4 * n);
            let row = &self.xw[t * 4 * h..][..4 * h];
            for q in 0..4 {
                sgemv(
                    &self.r[(q * h + lo) * h..][..n * h],
                    h,
                    prev,
                    &mut gates[q * n..][..n],
                );
                pre[q * n..][..n].copy_from_slice(&row[q * h + lo..][..n]);
            }
            crate::ops::elementwise::vmath::lstm_cell(gates, pre, self.clip, c, next_h);
            out.copy_from_slice(next_h);
        }
        sync.done.fetch_add(1, Release);
    }
}

/// The counters the threads of [`Units::run`] share: how many have come, the next
/// step of each share to claim, and how many shares are done.
struct UnitsSync {
    joined: std::sync::atomic::AtomicUsize,
    next: [std::sync::atomic::AtomicUsize; 2],
    done: std::sync::atomic::AtomicUsize,
}
