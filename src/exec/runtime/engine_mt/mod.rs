//! The multi-thread engine, `topo-mt` (GE's `kTopologicalMultiThread`).
//!
//! Kernels run on a worker per kernel class: Memory-class kernels (allocation, frees,
//! copies, sizes) on the memory worker, Launch-class kernels on the launch worker, the
//! rest on the calling thread; a node made ready for a participant that is parked runs
//! instead on the participant that made it ready, which borrows the class for it (one
//! thread at a time per class either way; see [`sched`]). Dependencies are the plan's successor lists with atomic
//! in-degrees reset per execution; nodes with the same non-empty critical section never
//! run at once. The scheduler itself is [`sched`], generic over its primitives so the
//! model-checking tests (`model_check`) run it under shuttle.
//!
//! Exact Free-to-Launch relations (lowering with `multi_thread`): a
//! `FreeMemoryHoldAddr` has no edge from the launches that read its memory; its relations
//! say the block must not be freed (so not reused) before those launches were submitted.
//! rt2 honours them by gating the Free: it is queued only once its own predecessors
//! completed *and* every related launch was submitted in this execution, so the memory
//! worker never blocks on the launch worker (the liveness hole of GE's design, where the
//! memory worker waits inside the allocator, does not exist here; the proof is in
//! [`sched`]). A launch is submitted when its kernel returns: the device orders work on a
//! stream, so a reuse submitted after the Free runs after the launch.
//!
//! Execution data, built once per state ([`MtData`], kept in the state's slot of this
//! engine, which the plan knows nothing of): a meta word per
//! node (queue, gate flags, critical section), the relations reversed (launch to gated
//! Frees) as a CSR, and the gated Frees. Building validates every relation (both ends are
//! run nodes, the Free is Memory-class, the launch Launch-class) and proves the gates
//! live: the plan's edges plus one edge per relation must stay acyclic. A plan failing
//! either is refused with a load error instead of running unprotected. Per state, a pool
//! ([`sched::Pool`]) holds the counters, the queues and the two worker threads, made at the
//! state's first multi-thread run and joined when the state drops.
//!
//! Control flow: an owner kernel runs its subgraph with `engine::run`; inside a topo-mt
//! execution (on a worker, or on the calling thread while it runs one) that runs on the
//! calling thread with [`run_nested`], so nothing nests a pool. A subgraph lowered for
//! this engine has relations of its own (they never cross owner graphs), so the nested
//! run is the topological engine with the gates: Kahn's algorithm over the edges plus one
//! launch -> Free edge per relation, which the liveness check proved acyclic.

mod sched;

#[cfg(test)]
mod model_check;

#[cfg(test)]
mod tests;

use rayon::prelude::*;

use crate::exec::KernelClass;

use super::context::Env;
use super::error::{ExecError, KernelError, LoadError};
use super::plan::{ExecState, Plan, call, node_error};
pub(crate) use sched::nested;
use sched::{
    CLASS_MASK, CallerMark, FREE_REL, Failure, LAUNCH, LAUNCH_REL, MEMORY, NORMAL, SECTION_SHIFT,
    Shape, StdPrims, Work,
};

pub(crate) type MtPool = sched::Pool<StdPrims, PlanWork>;

/// Marks a memory node's run-order position in `MtData::build`'s checks. Run orders are
/// far shorter than 2^31 nodes (the node records alone would take hundreds of
/// gigabytes); `build` refuses a longer one rather than mistake a position for a mark.
const MEMORY_POS: u32 = 1 << 31;

/// The multi-thread execution data of one plan (GE's relation CSR plus the per-node words
/// the scheduler reads), built at a state's first run and kept with it ([`MtState`]).
#[derive(Debug)]
pub struct MtData {
    /// Per node: queue (class), [`FREE_REL`], [`LAUNCH_REL`], critical section.
    meta: Box<[u32]>,
    /// Relations reversed: `frees[free_off[l]..free_off[l + 1]]` are the gated Frees of
    /// launch `l`. Empty when the plan has no relation.
    free_off: Box<[u32]>,
    frees: Box<[u32]>,
    gated: Box<[u32]>,
    /// Run nodes with no successor ([`sched::Work::sinks`]).
    sinks: u32,
    shape: Shape,
}

impl MtData {
    /// Builds and validates the data for `plan` (see the module doc).
    pub fn build(plan: &Plan) -> Result<MtData, ExecError> {
        Self::build_in(plan, free_ranges(plan.rel_launch.len()))
    }

    /// [`Self::build`] reading the relations in `ranges` ranges of Free ids.
    fn build_in(plan: &Plan, ranges: usize) -> Result<MtData, ExecError> {
        let n = plan.recs.len();
        let refuse = |node: u32, msg: String| ExecError::Load {
            graph: plan.path.clone(),
            node: plan.infos[node as usize].name.clone(),
            source: msg.into(),
        };
        let mut sections: Vec<&'static str> = Vec::new();
        let mut meta = Vec::with_capacity(n);
        for (i, &(class, critical)) in plan.classes.iter().enumerate() {
            let class = match class {
                KernelClass::Memory => MEMORY,
                KernelClass::Launch => LAUNCH,
                KernelClass::Normal => NORMAL,
            };
            let section = if critical {
                let key = plan.infos[i].critical_section;
                match sections.iter().position(|&s| s == key) {
                    Some(k) => k + 1,
                    None => {
                        sections.push(key);
                        sections.len()
                    }
                }
            } else {
                0
            };
            meta.push(class | ((section as u32) << SECTION_SHIFT));
        }
        // One pass over the run order: the queues' sizes, and each node's position in
        // it for the relation checks below: a launch's position as is, a memory node's
        // with the top bit set (`MEMORY_POS`), `u32::MAX` for every other node. So one
        // load per relation end says both whether it has the right class and where it
        // runs.
        if plan.order.len() >= MEMORY_POS as usize {
            return Err(ExecError::Load {
                graph: plan.path.clone(),
                node: String::new(),
                source: LoadError::Invalid(format!(
                    "{} nodes are more than the engine runs",
                    plan.order.len()
                )),
            });
        }
        let mut per_class = [0u32; 3];
        let with_relations = !plan.rel_launch.is_empty();
        let mut pos = if with_relations {
            vec![u32::MAX; n]
        } else {
            Vec::new()
        };
        for (k, &i) in plan.order.iter().enumerate() {
            let class = meta[i as usize] & CLASS_MASK;
            per_class[class as usize] += 1;
            if with_relations {
                match class {
                    LAUNCH => pos[i as usize] = k as u32,
                    MEMORY => pos[i as usize] = k as u32 | MEMORY_POS,
                    _ => {}
                }
            }
        }
        let mut data = MtData {
            meta: Box::default(),
            free_off: Box::default(),
            frees: Box::default(),
            gated: Box::default(),
            sinks: plan
                .order
                .iter()
                .filter(|&&i| plan.succ_off[i as usize] == plan.succ_off[i as usize + 1])
                .count() as u32,
            shape: Shape {
                nodes: n as u32,
                per_class,
                sections: sections.len() as u32,
            },
        };
        if !with_relations {
            data.meta = meta.into();
            return Ok(data);
        }
        // The relations are read in ranges of Free ids, one task each (a large plan has
        // a million relations and each end is a random access: on one core this was most
        // of the build). Pass 1 per range: count each launch's Frees of the range, check
        // every relation without a branch (the offending one is looked for again only when
        // a check failed), and mark the range's Frees in its own slice of `meta`.
        let mut parts: Vec<RelationPart> = split_by_relations(plan, &mut meta, ranges)
            .into_par_iter()
            .map(|(start, meta)| RelationPart::count(plan, &pos, start, meta))
            .collect();
        if let Some(f) = parts.iter().find_map(|p| p.not_memory) {
            return Err(refuse(
                f,
                "a relation's Free must be a memory kernel the engine runs".into(),
            ));
        }
        if parts.iter().any(|p| p.bad_launch) {
            for f in parts.iter().flat_map(|p| &p.gated) {
                if let Some(&l) = plan
                    .related_launches(*f)
                    .iter()
                    .find(|&&l| pos[l as usize] >= MEMORY_POS)
                {
                    return Err(refuse(
                        *f,
                        format!(
                            "related node {:?} is not a launch the engine runs",
                            plan.infos[l as usize].name
                        ),
                    ));
                }
            }
        }
        drop(pos);
        let ordered = parts.iter().all(|p| p.ordered);
        // Launch `l`'s CSR range holds range 0's Frees of it, then range 1's, ...: each
        // range's count becomes its write cursor (the sum of the counts before it), and
        // `count` the offsets; a launch with Frees is marked on the way.
        let mut count = vec![0u32; n + 1];
        let mut acc = 0u32;
        for (l, m) in meta.iter_mut().enumerate() {
            count[l] = acc;
            for p in parts.iter_mut() {
                let c = std::mem::replace(&mut p.count[l], acc);
                acc += c;
            }
            if acc > count[l] {
                *m |= LAUNCH_REL;
            }
        }
        count[n] = acc;
        // Pass 2: each range scatters its Frees at its cursors, in parallel, into the
        // uninitialized array (zeroing 4 MB first was a tenth of the build). The cursors
        // partition `0..total` (pass 1 counted each relation once, pass 2 writes each
        // once), so every slot is written exactly once, by one range, before the length
        // is set; each launch's range still lists its Frees in ascending order.
        let total = plan.rel_launch.len();
        assert_eq!(acc as usize, total, "every relation counted once");
        let mut frees: Vec<u32> = Vec::with_capacity(total);
        {
            let slots = Slots(frees.as_mut_ptr(), total);
            parts.par_iter_mut().for_each(|p| p.scatter(plan, &slots));
        }
        // SAFETY: the capacity is `total`, and all `total` slots were initialized above:
        // the ranges' cursors partition `0..total` (see the comment there) and
        // `par_iter_mut` returned only after every range's writes. `u32` needs nothing
        // else to be valid.
        unsafe { frees.set_len(total) };
        let gated: Vec<u32> = parts.iter().flat_map(|p| p.gated.iter().copied()).collect();
        data.meta = meta.into();
        data.free_off = count.into();
        data.frees = frees.into();
        data.gated = gated.into();
        if !ordered && let Some(f) = data.gate_cycle(plan) {
            return Err(refuse(
                f,
                "a related launch depends on this Free, so the Free could never run".into(),
            ));
        }
        Ok(data)
    }

    /// Kahn's algorithm over the plan's edges plus launch -> Free per relation: the
    /// first gated Free left on a cycle, if any.
    fn gate_cycle(&self, plan: &Plan) -> Option<u32> {
        let mut deg = plan.indegree.clone();
        for &f in &self.gated {
            deg[f as usize] += plan.related_launches(f).len() as u32;
        }
        let mut stack: Vec<u32> = plan
            .starts
            .iter()
            .copied()
            .filter(|&s| deg[s as usize] == 0)
            .collect();
        let mut done = 0;
        while let Some(i) = stack.pop() {
            done += 1;
            let (a, b) = (plan.succ_off[i as usize], plan.succ_off[i as usize + 1]);
            let rel = self.related_frees(i);
            for &s in plan.succ[a as usize..b as usize].iter().chain(rel) {
                deg[s as usize] -= 1;
                if deg[s as usize] == 0 {
                    stack.push(s);
                }
            }
        }
        (done < plan.order.len())
            .then(|| self.gated.iter().copied().find(|&f| deg[f as usize] > 0))
            .flatten()
    }

    fn related_frees(&self, l: u32) -> &[u32] {
        if self.free_off.is_empty() {
            return &[];
        }
        let (a, b) = (self.free_off[l as usize], self.free_off[l as usize + 1]);
        &self.frees[a as usize..b as usize]
    }

    /// Heap bytes of this data (capacities of its arrays).
    pub fn heap_bytes(&self) -> usize {
        4 * (self.meta.len() + self.free_off.len() + self.frees.len() + self.gated.len())
    }

    /// Heap bytes of the counters and queues each state's pool allocates for this plan.
    pub fn state_bytes(&self) -> usize {
        self.shape.counter_bytes()
    }
}

/// How many Free-id ranges `MtData::build` reads the relations in: one per core for a
/// large plan, one for a small one (where a task costs more than it saves).
fn free_ranges(relations: usize) -> usize {
    const PARALLEL_RELATIONS: usize = 1 << 16;
    if relations < PARALLEL_RELATIONS {
        1
    } else {
        rayon::current_num_threads().clamp(1, 8)
    }
}

/// `meta` split into `ranges` consecutive ranges of node ids holding about the same
/// number of relations (the Frees of a plan are not spread evenly over the ids: lowering
/// puts them after their launches), each with its first id.
fn split_by_relations<'m>(
    plan: &Plan,
    mut meta: &'m mut [u32],
    ranges: usize,
) -> Vec<(usize, &'m mut [u32])> {
    let (off, total) = (&plan.rel_off, plan.rel_launch.len());
    let mut out = Vec::with_capacity(ranges);
    let mut start = 0;
    for r in 1..ranges.max(1) {
        // The first id whose predecessors hold `r` ranges' share of the relations
        // (`off[f]`: the relations of the Frees before `f`).
        let end = off
            .partition_point(|&o| (o as usize) < r * total / ranges)
            .clamp(start, start + meta.len());
        let (head, tail) = std::mem::take(&mut meta).split_at_mut(end - start);
        out.push((start, head));
        meta = tail;
        start = end;
    }
    out.push((start, meta));
    out
}

/// What one range of Free ids contributes to the CSR (see `MtData::build`).
#[derive(Default)]
struct RelationPart {
    /// Per launch, this range's Frees of it; then this range's write cursor.
    count: Vec<u32>,
    /// This range's Frees with relations, ascending.
    gated: Vec<u32>,
    /// Every launch precedes its Free in the run order.
    ordered: bool,
    /// Some related node is not a launch the engine runs.
    bad_launch: bool,
    /// The first Free (by id) that is not a memory kernel the engine runs.
    not_memory: Option<u32>,
}

impl RelationPart {
    /// Counts and checks the relations of the Frees `start..start + meta.len()`, marking
    /// them in `meta` (their slice).
    fn count(plan: &Plan, pos: &[u32], start: usize, meta: &mut [u32]) -> Self {
        let mut p = RelationPart {
            count: vec![0; plan.recs.len()],
            ordered: true,
            ..Default::default()
        };
        for (j, m) in meta.iter_mut().enumerate() {
            let f = (start + j) as u32;
            let launches = plan.related_launches(f);
            if launches.is_empty() {
                continue;
            }
            let fp = pos[f as usize];
            if fp == u32::MAX || fp & MEMORY_POS == 0 {
                p.not_memory = Some(f);
                return p;
            }
            *m |= FREE_REL;
            p.gated.push(f);
            let fp = fp & !MEMORY_POS;
            for &l in launches {
                // Not a run launch: a memory node's position or MAX, both >= MEMORY_POS.
                let lp = pos[l as usize];
                p.bad_launch |= lp >= MEMORY_POS;
                p.ordered &= lp < fp;
                p.count[l as usize] += 1;
            }
        }
        p
    }

    /// Writes this range's Frees into `frees` at its cursors.
    fn scatter(&mut self, plan: &Plan, frees: &Slots) {
        for &f in &self.gated {
            for &l in plan.related_launches(f) {
                let c = &mut self.count[l as usize];
                frees.write(*c as usize, f);
                *c += 1;
            }
        }
    }
}

/// The CSR's Free array while the ranges fill it: its start and capacity.
struct Slots(*mut u32, usize);

// SAFETY: a shared `Slots` only allows `write`, and the ranges that share it write
// disjoint slots (their cursors partition the array, each slot written once); nothing
// reads the array until `par_iter_mut` has joined every range.
unsafe impl Sync for Slots {}

impl Slots {
    fn write(&self, i: usize, v: u32) {
        assert!(i < self.1, "a cursor past the relations");
        // SAFETY: `i` is below the capacity `self.1` (the assert) of the live vector
        // `self.0` points into, and no other range writes slot `i`, so this plain write
        // races with nothing.
        unsafe { self.0.add(i).write(v) }
    }
}

/// What this engine keeps in an [`ExecState`] (its opaque `mt` slot): the plan's data,
/// built at the state's first run, and the pool, made then too. Both are taken out for an
/// execution and put back after it (moves, no allocation), so the running work can point
/// at the data while it borrows the rest of the state.
#[derive(Default)]
struct MtState {
    data: Option<MtData>,
    pool: Option<MtPool>,
}

/// The state's data, built on first use, taken out of it.
fn take_data(plan: &Plan, st: &mut ExecState) -> Result<MtData, ExecError> {
    match st.mt.get_or_insert_with(MtState::default).data.take() {
        Some(d) => Ok(d),
        None => MtData::build(plan),
    }
}

/// One execution of a plan, as the scheduler sees it. Raw pointers because the worker
/// threads outlive any one execution: the scheduler's gate guarantees they are
/// dereferenced only while `run` holds the borrows they came from.
pub(crate) struct PlanWork {
    env: *const Env,
    plan: *const Plan,
    st: *const ExecState,
    data: *const MtData,
}

// SAFETY: sharing a `PlanWork` shares `&Env`, `&Plan`, `&ExecState` and `&MtData`
// across the participants, and all four are `Sync` (`ExecState` under the arena's
// contract, which the scheduler keeps). The pointees outlive every use: the scheduler
// dereferences them only inside the gate, while `run` holds the borrows they came from
// (see the type's doc). (It is not `Send`, and need not be: the scheduler keeps only a
// pointer to it.)
unsafe impl Sync for PlanWork {}

impl PlanWork {
    #[inline(always)]
    fn plan(&self) -> &Plan {
        // SAFETY: `plan` came from `run`'s `&Plan`, which outlives every use of this
        // `PlanWork` (the scheduler's gate, see the type's doc); nothing mutates a plan
        // while it runs.
        unsafe { &*self.plan }
    }
    #[inline(always)]
    fn data(&self) -> &MtData {
        // SAFETY: `data` came from `run`'s `&MtData`, borrowed from the plan, which
        // outlives every use of this `PlanWork` (see `plan`).
        unsafe { &*self.data }
    }
}

impl Work for PlanWork {
    type Error = KernelError;
    #[inline(always)]
    fn succ(&self, id: u32) -> &[u32] {
        let p = self.plan();
        let (a, b) = (p.succ_off[id as usize], p.succ_off[id as usize + 1]);
        &p.succ[a as usize..b as usize]
    }
    #[inline(always)]
    fn related_frees(&self, id: u32) -> &[u32] {
        self.data().related_frees(id)
    }
    fn related_launches(&self, id: u32) -> &[u32] {
        self.plan().related_launches(id)
    }
    #[inline(always)]
    fn meta(&self, id: u32) -> u32 {
        self.data().meta[id as usize]
    }
    fn indegree(&self) -> &[u32] {
        &self.plan().indegree
    }
    fn starts(&self) -> &[u32] {
        &self.plan().starts
    }
    fn gated(&self) -> &[u32] {
        &self.data().gated
    }
    fn sinks(&self) -> u32 {
        self.data().sinks
    }
    #[inline(always)]
    unsafe fn run(&self, id: u32) -> Result<(), KernelError> {
        // SAFETY: this function's contract (every predecessor completed and is visible,
        // and nobody else runs `id`) is `call`'s; the four pointers are live while the
        // scheduler runs work (the type's doc), and `st` is only shared, as `call` takes it.
        unsafe { call(&*self.env, &*self.plan, &*self.st, id) }
    }
}

/// Runs `plan` once on the calling thread, a gated Free after its related launches: the
/// topological engine over the plan's edges plus the relations (see the module doc).
pub(crate) fn run_nested(env: &Env, plan: &Plan, st: &mut ExecState) -> Result<(), ExecError> {
    let data = take_data(plan, st)?;
    let r = nested_with(env, plan, st, &data);
    st.mt.get_or_insert_with(MtState::default).data = Some(data);
    r
}

fn nested_with(env: &Env, plan: &Plan, st: &mut ExecState, data: &MtData) -> Result<(), ExecError> {
    st.indegree.copy_from_slice(&plan.indegree);
    for &f in &data.gated {
        st.indegree[f as usize] += plan.related_launches(f).len() as u32;
    }
    st.queue.clear();
    st.queue.extend(
        plan.starts
            .iter()
            .filter(|&&s| st.indegree[s as usize] == 0),
    );
    while let Some(id) = st.queue.pop_front() {
        // SAFETY: `id` was queued once, when its last predecessor (and related launch)
        // completed; every run is on this thread, so those writes are visible and
        // nothing else runs `id`.
        unsafe { call(env, plan, st, id) }.map_err(|e| node_error(plan, id, e))?;
        let (a, b) = (plan.succ_off[id as usize], plan.succ_off[id as usize + 1]);
        for &s in plan.succ[a as usize..b as usize]
            .iter()
            .chain(data.related_frees(id))
        {
            let d = &mut st.indegree[s as usize];
            *d -= 1;
            if *d == 0 {
                st.queue.push_back(s);
            }
        }
    }
    Ok(())
}

/// Runs `plan` once on the state's pool; the first failing node's error is returned.
pub(crate) fn run(env: &Env, plan: &Plan, st: &mut ExecState) -> Result<(), ExecError> {
    if plan.order.is_empty() {
        return Ok(());
    }
    let data = take_data(plan, st)?;
    let mut pool = match st.mt.get_or_insert_with(MtState::default).pool.take() {
        Some(p) if p.shape() == data.shape => p,
        _ => MtPool::new(data.shape),
    };
    let work = PlanWork {
        env,
        plan,
        st: &*st,
        data: &data,
    };
    let mark = CallerMark::enter();
    let r = pool.execute(&work);
    drop(mark);
    let mt = st.mt.get_or_insert_with(MtState::default);
    mt.data = Some(data);
    mt.pool = Some(pool);
    r.map_err(|f| match f {
        Failure::Error(id, e) => node_error(plan, id, e),
        Failure::Panic(p) => std::panic::resume_unwind(p),
    })
}
