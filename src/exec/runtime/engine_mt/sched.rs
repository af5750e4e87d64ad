//! The multi-thread scheduler's core: queues per kernel class, atomic in-degrees, the
//! Free-to-Launch gates, abort, and the worker pool, generic over its synchronization
//! primitives ([`Prims`]) and over what it runs ([`Work`]), so the model-checking tests
//! instantiate the very same code with shuttle's primitives and a toy graph.
//!
//! # The schedule
//! Three participants: the memory worker (class [`MEMORY`]), the launch worker
//! ([`LAUNCH`]) and the calling thread, which runs the [`NORMAL`] nodes and coordinates.
//! Each has one queue; a ready node goes to its class's queue, whoever made it ready,
//! unless the participant that made it ready runs it next itself: a node of its own class
//! when its queue is empty, or a node of a class whose participant is parked, which it
//! then *borrows* (the owner's `sleeping` word goes from `PARKED` to `BORROWED` and back
//! when the borrower's chain of nodes ends; the owner, woken or not, waits for it before
//! it runs anything). So a class's nodes never run at once, on whichever thread, and a
//! node for a parked participant costs no unpark and no wake-up (tens of microseconds on
//! a loaded machine, on the critical path of every hand-off). A small model whose nodes
//! alternate classes thus runs on whichever thread is awake, as `topo` runs it on one;
//! the workers take their classes' work whenever they are awake for it. A node becomes
//! ready when its in-degree counter reaches zero; a *gated* Free (one with
//! exact relations, flag [`FREE_REL`]) also needs every related launch submitted: its
//! `unmet` counter starts at (related launches + 1) and is decremented once by each
//! related launch's completion and once by its own in-degree reaching zero; whoever
//! brings it to zero queues the Free. So a Free whose launches are not yet submitted is
//! not executed and blocks nobody: it is queued by the launch worker when its last
//! launch was submitted ("continue the waiting work later" instead of blocking the memory
//! worker).
//!
//! # Liveness
//! Claim: while nodes remain and nothing failed, some node is queued or running, and the
//! participant owning it is awake or will be woken. Proof sketch:
//! 1. The augmented graph (the plan's edges plus an edge Launch -> Free per relation) is
//!    acyclic: [`super::MtData::build`] refuses a plan where it is not (a relation whose
//!    launch depends on its Free could never be met).
//! 2. Take a remaining node minimal in the augmented graph (one exists by 1.). All its
//!    predecessors and, for a gated Free, all its related launches have completed; each
//!    completion decremented the node's counters, and the one that reached zero queued
//!    the node, or kept it to run next itself (a counter reaches zero exactly once). So
//!    the node is queued, about to run, or running.
//! 3. Nobody waits for anything but its own queue: a participant parks only after
//!    announcing it (`sleeping`) and re-checking its queue, and a producer that pushes to
//!    another participant's queue checks `sleeping` after the push; with both sides
//!    `SeqCst` (a store then a load on each side), one of them sees the other, so a push is
//!    never lost. A push while the class is borrowed sees `BORROWED` and leaves the
//!    owner parked: the borrower gives the class back (a `SeqCst` store of `PARKED`) and
//!    then looks at the queue's head slot (a `SeqCst` load), so again one of the two sees
//!    the other and unparks the owner.
//!    The other waits: a critical section, held by a kernel that is running and does not
//!    wait on the scheduler (nested subgraph runs use the plain topological engine on the
//!    same thread), so it is released; and an owner taking its class back from a
//!    borrower, which gives it back when its chain ends (a finite run of kernels, none of
//!    which waits for the owner: a participant waits for its class only after parking,
//!    when it holds no borrowed class and runs nothing, so no two wait for each other).
//!    A node run by a borrower was made ready by it, never queued, so each queue keeps
//!    its one consumer.
//! 4. Abort, completion and close unpark every participant unconditionally after setting
//!    their flag; a park after an unpark returns at once (the token), so nobody sleeps
//!    through them.
//!
//! # Memory ordering (the arena's contract, `value::Arena`)
//! A node's writes to its output slots happen before its counter decrements (`AcqRel`
//! read-modify-writes: each one releases the decrementer's writes and, through the
//! release sequence, the last one acquires every earlier decrementer's), the last
//! decrementer pushes with a `SeqCst` (so also releasing) store into the queue slot, and
//! the consumer loads it with `Acquire`. So a node runs after every write of every
//! producer it reads. The same chain orders a related launch's submission before its
//! Free's `free`.
//!
//! # The gate (who may touch an execution)
//! Worker threads live as long as the state; an execution's data (the [`Work`], which
//! points into the caller's plan and state) is only valid during `execute`. A worker
//! enters the gate (`busy += 1`, then checks `open`) before it touches the queues or the
//! work and leaves it (`busy -= 1`) before parking outside. `execute` closes the gate
//! (`open = 0`), wakes everyone and waits for `busy == 0` before it returns, even on a
//! failure or a panic; `SeqCst` on both sides makes a worker that saw `open` visible in
//! `busy` to the closing caller. Counters are reset only while the gate is closed.
//!
//! # Why the hot path looks like this
//! One node costs: a queue pop (one `Acquire` load, one store), the kernel call through
//! `catch_unwind` (free unless it panics), one `fetch_sub` per successor (and, for a sink,
//! one on `remaining`), and per push a `fetch_add` on the queue's tail and a `SeqCst` store; the
//! `sleeping` check is skipped for a push to the pusher's own queue. Nothing allocates:
//! each queue is an array sized to its class's node count (every node is queued at most
//! once per execution, so it never wraps or fills), and all counters are allocated when
//! the pool is made. A participant whose own queue is empty runs the successor it made
//! ready next, without the queue (what it would have popped anyway), so a chain of one
//! class pays no push or pop; and only a sink touches `remaining`, which the calling
//! thread polls. Idle participants spin briefly before they park, because a park and
//! unpark pair costs microseconds and a producer is usually about to push; briefly means
//! at most as long as that pair costs ([`SPIN_TIME`]): when the kernels' compute threads
//! take the cores, a spinner's yields slow the producer it waits for.

use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering::{self, AcqRel, Acquire, Relaxed, Release, SeqCst};

/// How long an idle participant spins at most before it parks: about what a park and
/// the unpark that ends it cost (futex wait and wake, two context switches), beyond
/// which spinning saves nothing.
const SPIN_TIME: std::time::Duration = std::time::Duration::from_micros(16);

/// Queue (and participant) of the memory kernels.
pub(crate) const MEMORY: u32 = 0;
/// Queue of the launch kernels.
pub(crate) const LAUNCH: u32 = 1;
/// Queue of everything else: the calling thread's.
pub(crate) const NORMAL: u32 = 2;
/// The class bits of a node's meta word.
pub(crate) const CLASS_MASK: u32 = 3;
/// A Free gated on related launches.
pub(crate) const FREE_REL: u32 = 4;
/// A launch some gated Free waits for.
pub(crate) const LAUNCH_REL: u32 = 8;
/// Meta bits above this are the node's critical section (0: none, k: section k - 1).
pub(crate) const SECTION_SHIFT: u32 = 4;

const NONE: u32 = u32::MAX;

/// `sleeping` of a participant that is awake and runs its class's nodes.
const AWAKE: u32 = 0;
/// `sleeping` of a participant that parked, or announced it is about to.
const PARKED: u32 = 1;
/// `sleeping` of a parked participant whose class another participant is running
/// ([`Exec::borrow`]); the owner runs nothing of its class until it is back to `PARKED`.
const BORROWED: u32 = 2;
/// `BORROWED`, and the owner is awake and parked again until the class comes back
/// ([`reclaim`]): the borrower unparks it when it gives the class back.
const WANTED: u32 = 3;

/// A 32-bit atomic, std's or shuttle's.
pub(crate) trait Atomic32: Send + Sync {
    fn new(v: u32) -> Self;
    fn load(&self, o: Ordering) -> u32;
    fn store(&self, v: u32, o: Ordering);
    fn fetch_add(&self, v: u32, o: Ordering) -> u32;
    fn fetch_sub(&self, v: u32, o: Ordering) -> u32;
    fn swap(&self, v: u32, o: Ordering) -> u32;
    fn compare_exchange(&self, cur: u32, new: u32, s: Ordering, f: Ordering) -> Result<u32, u32>;
}

macro_rules! atomic32 {
    ($t:ty) => {
        impl Atomic32 for $t {
            fn new(v: u32) -> Self {
                <$t>::new(v)
            }
            #[inline(always)]
            fn load(&self, o: Ordering) -> u32 {
                <$t>::load(self, o)
            }
            #[inline(always)]
            fn store(&self, v: u32, o: Ordering) {
                <$t>::store(self, v, o)
            }
            #[inline(always)]
            fn fetch_add(&self, v: u32, o: Ordering) -> u32 {
                <$t>::fetch_add(self, v, o)
            }
            #[inline(always)]
            fn fetch_sub(&self, v: u32, o: Ordering) -> u32 {
                <$t>::fetch_sub(self, v, o)
            }
            #[inline(always)]
            fn swap(&self, v: u32, o: Ordering) -> u32 {
                <$t>::swap(self, v, o)
            }
            #[inline(always)]
            fn compare_exchange(
                &self,
                cur: u32,
                new: u32,
                s: Ordering,
                f: Ordering,
            ) -> Result<u32, u32> {
                <$t>::compare_exchange(self, cur, new, s, f)
            }
        }
    };
}
atomic32!(std::sync::atomic::AtomicU32);
#[cfg(test)]
atomic32!(shuttle::sync::atomic::AtomicU32);

/// The synchronization primitives the scheduler is built from.
pub(crate) trait Prims: Sized + 'static {
    type U32: Atomic32;
    type Thread: Clone + Send + Sync + 'static;
    type Join: Send + 'static;
    /// Busy-wait steps before an idle participant parks.
    const SPINS: u32;
    /// A point in time, to bound how long an idle participant spins.
    type Clock: Copy;
    fn clock() -> Self::Clock;
    /// Whether a participant that began to wait at `since` has spun as long as a park
    /// and an unpark would have cost it ([`SPIN_TIME`]): it parks then, whatever steps
    /// remain.
    fn spun_out(since: Self::Clock) -> bool;
    fn current() -> Self::Thread;
    fn park();
    fn unpark(t: &Self::Thread);
    /// One busy-wait step.
    fn spin();
    /// Gives the processor away (waiting for a critical section).
    fn relax();
    fn spawn(name: &'static str, f: impl FnOnce() + Send + 'static) -> (Self::Thread, Self::Join);
    fn join(j: Self::Join);
}

/// The std primitives the engine runs with.
pub(crate) struct StdPrims;

impl Prims for StdPrims {
    type U32 = std::sync::atomic::AtomicU32;
    type Thread = std::thread::Thread;
    type Join = std::thread::JoinHandle<()>;
    const SPINS: u32 = 1 << 12;
    type Clock = std::time::Instant;
    fn clock() -> Self::Clock {
        std::time::Instant::now()
    }
    fn spun_out(since: Self::Clock) -> bool {
        since.elapsed() >= SPIN_TIME
    }
    fn current() -> Self::Thread {
        std::thread::current()
    }
    fn park() {
        std::thread::park()
    }
    fn unpark(t: &Self::Thread) {
        t.unpark()
    }
    #[inline(always)]
    fn spin() {
        std::hint::spin_loop()
    }
    fn relax() {
        std::thread::yield_now()
    }
    fn spawn(name: &'static str, f: impl FnOnce() + Send + 'static) -> (Self::Thread, Self::Join) {
        let j = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                mark_worker();
                f()
            })
            .expect("spawning a topo-mt worker thread");
        (j.thread().clone(), j)
    }
    fn join(j: Self::Join) {
        // A worker catches kernel panics, so a join error is a scheduler bug already
        // reported by the panic hook; dropping the state must not panic again.
        let _ = j.join();
    }
}

thread_local! {
    /// Whether this thread is inside a topo-mt execution (a worker, or a caller running
    /// one): a subgraph run from here uses the plain topological engine.
    static IN_MT: Cell<bool> = const { Cell::new(false) };
}

/// Whether a run starting on this thread is nested in a topo-mt execution.
pub(crate) fn nested() -> bool {
    IN_MT.with(Cell::get)
}

/// Marks a worker thread for its whole life.
fn mark_worker() {
    IN_MT.with(|c| c.set(true));
}

/// Marks the calling thread while it runs an execution.
pub(crate) struct CallerMark(bool);

impl CallerMark {
    pub(crate) fn enter() -> Self {
        CallerMark(IN_MT.with(|c| c.replace(true)))
    }
}

impl Drop for CallerMark {
    fn drop(&mut self) {
        IN_MT.with(|c| c.set(self.0));
    }
}

/// What one execution runs: the graph's shape and the node runner.
pub(crate) trait Work: Sync + 'static {
    type Error: Send + 'static;
    /// Successors of `id` (the plan's CSR).
    fn succ(&self, id: u32) -> &[u32];
    /// Gated Frees waiting for launch `id` (the reverse relation CSR).
    fn related_frees(&self, id: u32) -> &[u32];
    /// Launches gated Free `id` waits for.
    fn related_launches(&self, id: u32) -> &[u32];
    /// Class, flags and critical section of `id`.
    fn meta(&self, id: u32) -> u32;
    /// Initial in-degrees, indexed by node id.
    fn indegree(&self) -> &[u32];
    /// Nodes with no predecessor.
    fn starts(&self) -> &[u32];
    /// Every gated Free.
    fn gated(&self) -> &[u32];
    /// How many of the nodes the execution runs have no successor (its sinks). The
    /// execution is over when they all completed: a node runs only after its predecessors
    /// completed, and every node is a predecessor, at some remove, of a sink.
    fn sinks(&self) -> u32;
    /// Runs node `id`.
    ///
    /// # Safety
    /// Every predecessor of `id` completed (and its writes are visible), and nobody else
    /// runs `id` now.
    unsafe fn run(&self, id: u32) -> Result<(), Self::Error>;
}

/// How an execution failed: the first failing node's error, or a kernel's panic.
pub(crate) enum Failure<E> {
    Error(u32, E),
    Panic(Box<dyn Any + Send>),
}

/// How many nodes of each class, and how many critical sections, a pool serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub nodes: u32,
    pub per_class: [u32; 3],
    pub sections: u32,
}

impl Shape {
    /// Heap bytes of a pool's counters and queues (four counters per node, a queue slot
    /// per run node, a word per critical section).
    pub fn counter_bytes(&self) -> usize {
        let queued: u32 = self.per_class.iter().sum();
        4 * (4 * self.nodes as usize + queued as usize + self.sections as usize)
    }
}

/// A multi-producer single-consumer queue used once per execution: every node enters it
/// at most once, so it is an array written front to back and never wraps. A slot holds
/// `id + 1`; zero is empty (or claimed but not yet written, which the consumer treats as
/// empty: the producer wakes it after writing).
struct Queue<P: Prims> {
    slots: Box<[P::U32]>,
    /// The consumer's position; only the consumer touches it, inside the gate.
    head: UnsafeCell<u32>,
    tail: P::U32,
}

impl<P: Prims> Queue<P> {
    fn new(cap: u32) -> Self {
        Queue {
            slots: (0..cap).map(|_| P::U32::new(0)).collect(),
            head: UnsafeCell::new(0),
            tail: P::U32::new(0),
        }
    }
    #[inline(always)]
    fn push(&self, id: u32) {
        let t = self.tail.fetch_add(1, Relaxed);
        // SeqCst: the push is also the store half of the sleeping handshake.
        self.slots[t as usize].store(id + 1, SeqCst);
    }
    /// # Safety
    /// Called by the queue's consumer only.
    #[inline(always)]
    unsafe fn pop(&self) -> Option<u32> {
        // SAFETY: the caller is the only consumer, so the only one touching `head`.
        let head = unsafe { &mut *self.head.get() };
        let s = self.slots.get(*head as usize)?;
        let v = s.load(Acquire);
        if v == 0 {
            return None;
        }
        s.store(0, Relaxed);
        *head += 1;
        Some(v - 1)
    }
    /// # Safety
    /// Called by the queue's consumer only.
    #[inline(always)]
    unsafe fn has_work(&self) -> bool {
        // SAFETY: the caller is the only consumer (the contract), so nobody writes `head`
        // while it is read.
        let head = unsafe { *self.head.get() };
        self.slots
            .get(head as usize)
            .is_some_and(|s| s.load(SeqCst) != 0)
    }
    /// # Safety
    /// The gate is closed and empty: nobody else touches the queue.
    unsafe fn reset(&self) {
        let tail = (self.tail.load(Relaxed) as usize).min(self.slots.len());
        // SAFETY: the gate is closed and empty (the contract), so nobody else touches
        // `head`.
        let head = unsafe { &mut *self.head.get() };
        for s in &self.slots[(*head as usize).min(tail)..tail] {
            s.store(0, Relaxed);
        }
        *head = 0;
        self.tail.store(0, Relaxed);
    }
}

/// The per-state side of the scheduler, shared with the worker threads.
struct Core<P: Prims, W: Work> {
    indeg: Box<[P::U32]>,
    /// Per gated Free: related launches not yet submitted, plus one until the Free's own
    /// predecessors completed.
    unmet: Box<[P::U32]>,
    /// The epoch in which each launch was last submitted successfully
    /// (`launch_submitted_gen`); only relation launches store it.
    launch_gen: Box<[P::U32]>,
    /// The epoch in which each gated Free last executed (`free_executed_gen`).
    free_gen: Box<[P::U32]>,
    queues: [Queue<P>; 3],
    /// Sinks not yet completed ([`Work::sinks`]).
    remaining: P::U32,
    abort: P::U32,
    /// The first failing node (or `NONE`); its winner writes `failure`.
    failed: P::U32,
    failure: UnsafeCell<Option<Failure<W::Error>>>,
    open: P::U32,
    busy: P::U32,
    shutdown: P::U32,
    sleeping: [P::U32; 3],
    /// The participants' threads: the workers' set once before the first open, the
    /// caller's before each open.
    threads: [UnsafeCell<Option<P::Thread>>; 3],
    epoch: UnsafeCell<u32>,
    job: UnsafeCell<*const W>,
    sections: Box<[P::U32]>,
}

// SAFETY: the `UnsafeCell`s are written by the caller only while the gate is closed and
// empty (`execute`), and read by workers only inside the gate; a queue's `head` is
// touched only by that queue's one consumer, or by `reset` while the gate is closed and
// empty (`Queue::pop`'s and `reset`'s contracts); `failure` is written once per execution
// by the winner of the `failed` CAS and read by the caller after the gate closed. The
// job pointer is dereferenced only inside the gate, while `execute` keeps the work alive,
// and only as `&W`, which `W: Sync` lets any thread hold. Everything else is atomics
// (`Atomic32: Send + Sync`) and `P::Thread` (`Send + Sync`).
unsafe impl<P: Prims, W: Work> Sync for Core<P, W> {}
// SAFETY: the workers own the core through `Arc`s and the last one drops it on any
// thread. What it owns may move threads: `P::Thread` and the atomics are `Send`, and a
// `Failure` holds a `W::Error` (`Send` by `Work`'s bound) or a `Send` panic payload. The
// one field that is not `Send`, the job pointer, is only a borrow of the work (see the
// `Sync` impl), never owned or dropped through.
unsafe impl<P: Prims, W: Work> Send for Core<P, W> {}

/// One participant's view of the running execution.
struct Exec<'a, P: Prims, W: Work> {
    core: &'a Core<P, W>,
    work: &'a W,
    epoch: u32,
    caller: P::Thread,
    me: u32,
    /// The classes besides its own this participant holds ([`Exec::borrow`]), a bit each.
    held: Cell<u32>,
    /// Nodes of held classes made ready while a continuation was already chosen, run
    /// after it ([`Exec::run_chain`]): the rest of a fan-out stays on this thread, as the
    /// next continuation would, instead of waking the parked owner.
    deferred: [Cell<u32>; DEFERRED],
    deferred_len: Cell<usize>,
}

/// How many nodes a participant keeps for classes it holds ([`Exec::deferred`]); more are
/// queued for their owners.
const DEFERRED: usize = 16;

impl<'a, P: Prims, W: Work> Exec<'a, P, W> {
    fn new(core: &'a Core<P, W>, work: &'a W, epoch: u32, caller: P::Thread, me: u32) -> Self {
        Exec {
            core,
            work,
            epoch,
            caller,
            me,
            held: Cell::new(0),
            deferred: std::array::from_fn(|_| Cell::new(0)),
            deferred_len: Cell::new(0),
        }
    }

    /// Keeps `s`, of a class this participant holds, to run after its chain; `false`
    /// when the list is full.
    fn defer(&self, s: u32) -> bool {
        let n = self.deferred_len.get();
        if n == DEFERRED {
            return false;
        }
        self.deferred[n].set(s);
        self.deferred_len.set(n + 1);
        true
    }

    /// Whether this participant may run a node of class `c` now: its own class, one it
    /// holds, or one it can borrow because its owner is parked.
    #[inline(always)]
    fn may_run(&self, c: u32) -> bool {
        c == self.me || self.held.get() & (1 << c) != 0 || self.borrow(c)
    }

    /// Takes class `c` from its parked owner: the owner's `sleeping` goes from `PARKED`
    /// to `BORROWED`, and until [`Exec::release`] puts it back the owner, woken or not,
    /// runs nothing (it waits in [`reclaim`]). So a class's nodes still never run at once,
    /// and a node made ready for a parked participant runs here without the unpark and
    /// wake-up its hand-off would cost. `AcqRel`: the owner's last kernel happens before
    /// the borrower's first.
    #[inline(always)]
    fn borrow(&self, c: u32) -> bool {
        let taken = self.core.sleeping[c as usize]
            .compare_exchange(PARKED, BORROWED, AcqRel, Relaxed)
            .is_ok();
        if taken {
            self.held.set(self.held.get() | 1 << c);
        }
        taken
    }

    /// Gives back every class borrowed, waking its owner if its queue has work. A push
    /// made while the class was held saw `BORROWED` and left the owner parked; the
    /// store of `PARKED` here and the queue's load after it are the other half of the
    /// sleeping handshake (`SeqCst` both, as a pusher's store of the slot and load of
    /// `sleeping`): the pusher sees `PARKED` and unparks, or this sees the slot filled.
    /// `SeqCst` is also `Release`: the borrower's last kernel happens before the owner's
    /// next.
    fn release(&self) {
        let mut held = self.held.replace(0);
        while held != 0 {
            let c = held.trailing_zeros();
            held &= held - 1;
            let q = &self.core.queues[c as usize];
            // SAFETY: the class is held, so its owner is parked or waiting to take it
            // back and does not move its queue's head (only `pop` writes it, and only
            // an awake owner pops); its last pop happened before the `PARKED` store this
            // participant's borrow acquired.
            let head = unsafe { *q.head.get() };
            let was = self.core.sleeping[c as usize].swap(PARKED, SeqCst);
            if was == WANTED
                || q.slots
                    .get(head as usize)
                    .is_some_and(|s| s.load(SeqCst) != 0)
            {
                P::unpark(self.thread(c));
            }
        }
    }

    /// Runs `id` and the continuations it leads to, and the nodes it deferred, then gives
    /// back what it borrowed.
    fn run_chain(&self, id: u32) {
        let mut next = Some(id);
        loop {
            // A continuation (or a deferred node) is as good as queued: it runs unless
            // the execution ends (an abort), as queued work would not.
            while let Some(id) = next.filter(|_| !self.stop()) {
                next = self.execute(id);
            }
            let n = self.deferred_len.get();
            if n == 0 || self.stop() {
                self.deferred_len.set(0);
                break;
            }
            self.deferred_len.set(n - 1);
            next = Some(self.deferred[n - 1].get());
        }
        self.release();
    }

    /// A start node (in-degree zero): run here when it is of a parked participant's class,
    /// else queued.
    fn start(&self, id: u32) {
        if !self.runnable(id) {
            return;
        }
        let c = self.work.meta(id) & CLASS_MASK;
        if c != self.me && self.borrow(c) {
            self.run_chain(id);
        } else {
            self.push(id);
        }
    }
    fn thread(&self, c: u32) -> &P::Thread {
        if c == NORMAL {
            &self.caller
        } else {
            // SAFETY: the workers' threads are set before the first open and never again.
            unsafe { (*self.core.threads[c as usize].get()).as_ref() }.expect("spawned")
        }
    }

    /// Queues `id` for its class's participant and unparks it if it is parked. A class
    /// some participant holds is left to it: [`Exec::release`] looks at the queue after
    /// giving the class back.
    #[inline(always)]
    fn push(&self, id: u32) {
        let c = self.work.meta(id) & CLASS_MASK;
        self.core.queues[c as usize].push(id);
        if c != self.me && self.core.sleeping[c as usize].load(SeqCst) == PARKED {
            P::unpark(self.thread(c));
        }
    }

    /// `id`'s in-degree reached zero: whether it may run now, which it may unless it is a
    /// Free still waiting for a related launch.
    #[inline(always)]
    fn runnable(&self, id: u32) -> bool {
        self.work.meta(id) & FREE_REL == 0 || self.core.unmet[id as usize].fetch_sub(1, AcqRel) == 1
    }

    fn wake_all(&self) {
        for c in [MEMORY, LAUNCH, NORMAL] {
            P::unpark(self.thread(c));
        }
    }

    fn fail(&self, f: Failure<W::Error>, id: u32) {
        let core = self.core;
        if core
            .failed
            .compare_exchange(NONE, id, AcqRel, Acquire)
            .is_ok()
        {
            // SAFETY: only the CAS winner writes, once per execution; the caller reads it
            // after the gate closed.
            unsafe { *core.failure.get() = Some(f) };
        }
        core.abort.store(1, SeqCst);
        self.wake_all();
    }

    /// `s` may run: it becomes `next`, the node this participant runs next, if there is
    /// none yet and it is of this participant's class with its queue empty (what it would
    /// have popped anyway) or of a class it holds or can borrow from a parked owner (what
    /// that owner would have been woken for); else it is kept to run after the chain if
    /// its class is held, or queued.
    #[inline(always)]
    fn made_ready(&self, s: u32, next: &mut Option<u32>) {
        let c = self.work.meta(s) & CLASS_MASK;
        let here = next.is_none()
            && if c == self.me {
                // SAFETY: this participant is its own queue's only consumer.
                !unsafe { self.core.queues[self.me as usize].has_work() }
            } else {
                self.may_run(c)
            };
        if here {
            *next = Some(s);
        } else if c == self.me || !(self.may_run(c) && self.defer(s)) {
            self.push(s);
        }
    }

    /// Runs `id` and publishes its completion. Returns the node this participant runs
    /// next without queueing it ([`Exec::made_ready`]): the first node made runnable (a
    /// successor, or a gated Free this launch released) that is its own and would have
    /// been the next it popped (its queue was empty), or of a class it holds or borrows.
    /// A chain then costs no queue traffic (a `fetch_add` and a `SeqCst` store to push,
    /// a load and a store to pop, per node) and no wake-up.
    #[inline(always)]
    fn execute(&self, id: u32) -> Option<u32> {
        let core = self.core;
        let work = self.work;
        let m = work.meta(id);
        if m & FREE_REL != 0 {
            debug_assert!(
                work.related_launches(id)
                    .iter()
                    .all(|&l| core.launch_gen[l as usize].load(Acquire) == self.epoch),
                "a gated Free runs before its related launches were submitted"
            );
        }
        let section = m >> SECTION_SHIFT;
        if section != 0 {
            let s = &core.sections[section as usize - 1];
            while s.compare_exchange(0, 1, Acquire, Relaxed).is_err() {
                P::relax();
            }
        }
        // SAFETY: `id` was queued once, by whoever brought its last counter to zero,
        // after every predecessor (and related launch) completed; see the module doc for
        // the ordering.
        let r = catch_unwind(AssertUnwindSafe(|| unsafe { work.run(id) }));
        if section != 0 {
            core.sections[section as usize - 1].store(0, Release);
        }
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.fail(Failure::Error(id, e), id);
                return None;
            }
            Err(p) => {
                self.fail(Failure::Panic(p), id);
                return None;
            }
        }
        if m & FREE_REL != 0 {
            core.free_gen[id as usize].store(self.epoch, Release);
        }
        let mut next = None;
        if m & LAUNCH_REL != 0 {
            core.launch_gen[id as usize].store(self.epoch, Release);
            for &f in work.related_frees(id) {
                if core.unmet[f as usize].fetch_sub(1, AcqRel) == 1 {
                    // The decrement that reached zero acquired the Free's predecessors'
                    // and its other launches' writes, as a successor's does.
                    self.made_ready(f, &mut next);
                }
            }
        }
        let succ = work.succ(id);
        for &s in succ {
            if core.indeg[s as usize].fetch_sub(1, AcqRel) == 1 && self.runnable(s) {
                // The decrement that reached zero acquired every predecessor's writes, so
                // `s` may run on this thread as it would after a pop.
                self.made_ready(s, &mut next);
            }
        }
        // Only a sink counts down `remaining`: the calling thread polls it while it
        // waits, and a count written by every node moved its cache line between the
        // cores once per node (a fifth of a chain's time on two cores).
        if succ.is_empty() && core.remaining.fetch_sub(1, AcqRel) == 1 && self.me != NORMAL {
            P::unpark(&self.caller);
        }
        next
    }

    /// Whether the participant should stop serving.
    #[inline(always)]
    fn stop(&self) -> bool {
        let core = self.core;
        core.abort.load(Acquire) != 0
            || if self.me == NORMAL {
                core.remaining.load(Acquire) == 0
            } else {
                core.open.load(Acquire) == 0
            }
    }

    /// Runs the participant's queue until the execution is over for it.
    fn serve(&self) {
        let q = &self.core.queues[self.me as usize];
        let sleeping = &self.core.sleeping[self.me as usize];
        loop {
            if self.stop() {
                return;
            }
            // SAFETY: this participant is `q`'s only consumer.
            if let Some(id) = unsafe { q.pop() } {
                self.run_chain(id);
                continue;
            }
            let mut spins = P::SPINS;
            let since = P::clock();
            // SAFETY: this participant is `q`'s only consumer.
            while spins > 0 && !unsafe { q.has_work() } && !self.stop() {
                // Every 64th step gives the processor away: with more runnable threads
                // than cores, the producer this participant waits for may need it. The
                // wait is bounded in time as well as in steps: when the cores are taken
                // (a kernel's compute threads beside the participants), each yield is a
                // context switch, and 4,096 steps were hundreds of microseconds of
                // switching that slowed the very producer being waited for.
                if spins % 64 == 0 {
                    if P::spun_out(since) {
                        spins = 0;
                        break;
                    }
                    P::relax();
                } else {
                    P::spin();
                }
                spins -= 1;
            }
            if spins > 0 {
                continue;
            }
            sleeping.store(PARKED, SeqCst);
            // SAFETY: this participant is `q`'s only consumer.
            if !(unsafe { q.has_work() } || self.stop()) {
                P::park();
            }
            reclaim::<P>(sleeping);
        }
    }
}

/// A worker thread: serves its class's queue whenever the gate is open, until shutdown.
///
/// Outside the gate it touches nothing of an execution: whether to park is decided from
/// `open`, which holds the open execution's epoch (0 while closed). A worker that served
/// epoch `e` (and left it through an abort) parks while `open` still says `e`; a new epoch
/// or a push (which sees `sleeping` set: the handshake of the module doc) wakes it.
fn worker<P: Prims, W: Work>(core: Arc<Core<P, W>>, me: u32) {
    let mut seen = 0;
    loop {
        if core.shutdown.load(SeqCst) != 0 {
            return;
        }
        core.busy.fetch_add(1, SeqCst);
        let open = core.open.load(SeqCst);
        if open != 0 {
            seen = open;
            // SAFETY: inside the open gate, the caller set these before opening and keeps
            // the work alive until the gate is empty.
            let x = unsafe {
                Exec::new(
                    &core,
                    &**core.job.get(),
                    *core.epoch.get(),
                    (*core.threads[NORMAL as usize].get())
                        .clone()
                        .expect("set before open"),
                    me,
                )
            };
            x.serve();
        }
        core.busy.fetch_sub(1, SeqCst);
        let sleeping = &core.sleeping[me as usize];
        sleeping.store(PARKED, SeqCst);
        let open = core.open.load(SeqCst);
        if core.shutdown.load(SeqCst) == 0 && (open == 0 || open == seen) {
            P::park();
        }
        reclaim::<P>(sleeping);
    }
}

/// A participant done parking takes its class back: `PARKED` to `AWAKE`. While a
/// borrower holds the class it says so (`WANTED`) and parks until the borrower gives the
/// class back and unparks it: a borrow may last a whole model's launches, through which
/// a spinning owner would take a core from the kernels' compute threads. A borrower runs
/// the chain it began and waits for nothing of this participant's, so the class comes
/// back. `Acquire`: the borrower's kernels happen before this participant's next.
fn reclaim<P: Prims>(sleeping: &P::U32) {
    loop {
        match sleeping.compare_exchange(PARKED, AWAKE, Acquire, Relaxed) {
            Ok(_) => return,
            Err(BORROWED) => {
                if sleeping
                    .compare_exchange(BORROWED, WANTED, Relaxed, Relaxed)
                    .is_ok()
                {
                    P::park();
                }
            }
            Err(WANTED) => P::park(),
            Err(v) => {
                debug_assert!(false, "only its owner wakes a participant ({v})");
                return;
            }
        }
    }
}

/// The worker pool and counters of one state.
pub(crate) struct Pool<P: Prims, W: Work> {
    core: Arc<Core<P, W>>,
    joins: Vec<P::Join>,
    shape: Shape,
}

impl<P: Prims, W: Work> Pool<P, W> {
    /// Counters and queues for `shape`, and the two worker threads.
    pub fn new(shape: Shape) -> Self {
        let n = shape.nodes as usize;
        let atomics = |len: usize| (0..len).map(|_| P::U32::new(0)).collect::<Box<[_]>>();
        let core = Arc::new(Core {
            indeg: atomics(n),
            unmet: atomics(n),
            launch_gen: atomics(n),
            free_gen: atomics(n),
            queues: shape.per_class.map(Queue::new),
            remaining: P::U32::new(0),
            abort: P::U32::new(0),
            failed: P::U32::new(NONE),
            failure: UnsafeCell::new(None),
            open: P::U32::new(0),
            busy: P::U32::new(0),
            shutdown: P::U32::new(0),
            sleeping: [P::U32::new(AWAKE), P::U32::new(AWAKE), P::U32::new(AWAKE)],
            threads: [
                UnsafeCell::new(None),
                UnsafeCell::new(None),
                UnsafeCell::new(None),
            ],
            epoch: UnsafeCell::new(0),
            job: UnsafeCell::new(std::ptr::null()),
            sections: atomics(shape.sections as usize),
        });
        let mut joins = Vec::with_capacity(2);
        for (me, name) in [(MEMORY, "rt2-mt-memory"), (LAUNCH, "rt2-mt-launch")] {
            let c = core.clone();
            let (t, j) = P::spawn(name, move || worker(c, me));
            // SAFETY: the gate has never been open, so no worker reads `threads` yet.
            unsafe { *core.threads[me as usize].get() = Some(t) };
            joins.push(j);
        }
        Pool { core, joins, shape }
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The epoch of the last execution and whether Free `f` executed in it.
    #[cfg(test)]
    pub fn free_executed(&self, f: u32) -> bool {
        // SAFETY: only `execute` writes `epoch`, and it takes `&mut self`, so it cannot
        // run while this `&self` lives; workers only read it.
        let epoch = unsafe { *self.core.epoch.get() };
        self.core.free_gen[f as usize].load(Acquire) == epoch
    }

    /// Runs one execution of `work` to its end; the first failure is returned. Returns
    /// only once no worker touches `work` any more.
    pub fn execute(&mut self, work: &W) -> Result<(), Failure<W::Error>> {
        let core = &*self.core;
        debug_assert_eq!(work.indegree().len(), self.shape.nodes as usize);
        // Reset in place. The gate is closed and empty since the last `execute` returned
        // (or since the pool was made): a worker that raced into `busy` sees `open == 0`
        // and touches nothing, so this thread is the only one touching the cells below.
        for (d, &v) in core.indeg.iter().zip(work.indegree()) {
            d.store(v, Relaxed);
        }
        for &f in work.gated() {
            core.unmet[f as usize].store(work.related_launches(f).len() as u32 + 1, Relaxed);
        }
        for q in &core.queues {
            // SAFETY: the gate is closed and empty (see above), as `reset` requires.
            unsafe { q.reset() };
        }
        core.remaining.store(work.sinks(), Relaxed);
        core.abort.store(0, Relaxed);
        core.failed.store(NONE, Relaxed);
        let epoch;
        // SAFETY: the gate is closed and empty (see above), so no worker reads `failure`,
        // `epoch`, `job` or `threads` until the `open` store below publishes these writes.
        unsafe {
            *core.failure.get() = None;
            let e = &mut *core.epoch.get();
            *e = e.wrapping_add(1).max(1);
            epoch = *e;
            *core.job.get() = work as *const W;
            *core.threads[NORMAL as usize].get() = Some(P::current());
        }
        let x = Exec::new(core, work, epoch, P::current(), NORMAL);
        // Opening publishes everything above (SeqCst store, so also Release).
        core.open.store(epoch, SeqCst);
        let served = catch_unwind(AssertUnwindSafe(|| {
            for &s in work.starts() {
                x.start(s);
            }
            x.serve();
        }));
        // Close, wake, and wait until no worker is inside. Only a worker inside can be
        // parked in `serve`: when none is (`busy` is 0 after the close; a worker counts
        // itself in before it reads `open`, both `SeqCst`, so one that is about to enter
        // sees the gate closed), the workers, parked outside, are left alone: waking
        // them for nothing put a wake-up beside every execution's end. The wait yields
        // rather than parks: a worker may be inside only for a moment (it raced into
        // `busy` and saw the gate closed) and then has nobody to tell; a long wait
        // happens only after an abort, while a worker finishes its running kernel.
        core.open.store(0, SeqCst);
        if core.busy.load(SeqCst) != 0 {
            for c in [MEMORY, LAUNCH] {
                P::unpark(x.thread(c));
            }
        }
        while core.busy.load(SeqCst) != 0 {
            P::relax();
        }
        if let Err(p) = served {
            std::panic::resume_unwind(p);
        }
        // SAFETY: the gate is closed and empty: the failure's writer is done (its write
        // happens before its `busy` decrement, which the load above observed).
        match unsafe { (*core.failure.get()).take() } {
            Some(f) => Err(f),
            None => {
                debug_assert_eq!(core.remaining.load(Acquire), 0);
                Ok(())
            }
        }
    }
}

impl<P: Prims, W: Work> Drop for Pool<P, W> {
    fn drop(&mut self) {
        self.core.shutdown.store(1, SeqCst);
        for c in [MEMORY, LAUNCH] {
            // SAFETY: set at spawn, never changed.
            if let Some(t) = unsafe { &*self.core.threads[c as usize].get() } {
                P::unpark(t);
            }
        }
        for j in self.joins.drain(..) {
            P::join(j);
        }
    }
}
