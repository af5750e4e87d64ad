//! The four engines (GE's executor types) over a prepared [`Plan`].
//!
//! Each is a loop over node records; what differs is how the next node is found:
//! - `seq` (`kSequentialPriority`): the plan's run order, nothing else in the loop.
//! - `topo` (`kTopological`): in-degree counters and a FIFO ready queue, both reset in
//!   place per execution.
//! - `topo-prio` (`kTopologicalPriority`): the ready nodes in a heap by (priority, id).
//! - `topo-mt` (`kTopologicalMultiThread`): workers per kernel class ([`super::engine_mt`]).
//!
//! Control flow (If, Case, While, Loop) is run by the owner node's kernel, which executes
//! its subgraph's plan with the same engine type (inside a topo-mt execution, on the
//! calling thread: pools never nest); the engines themselves need no branch logic,
//! so all four take every model.
//!
//! Control flow reaches the engines through [`Subgraph`], implemented here for [`Plan`]:
//! the kernels below know the trait, not the plan or the engines.
//!
//! The loops allocate nothing: the queue and heap are sized at prepare and kept in the
//! state; a step is a bounds-checked index, one indirect call and a few counter updates.
//! A subscriber costs the plain path one predictable branch per node (`call` tests
//! `Env.subscriber`); with one, the node's call is wrapped in its start and end events.

use std::collections::VecDeque;

use super::context::{Env, ExecutorType, Subgraph};
use super::engine_mt;
use super::error::{ExecError, KernelError};
use super::plan::{ExecState, Plan, call, node_error};
use super::state::NodeState;
use super::value::Value;

/// Runs `plan` once with `env`'s engine; the first failing node ends the run.
pub fn run(env: &Env, plan: &Plan, st: &mut ExecState) -> Result<(), ExecError> {
    if let Some(s) = &env.subscriber {
        s.model_start(&plan.path);
    }
    let r = match env.executor {
        ExecutorType::Sequential => sequential(env, plan, st),
        ExecutorType::Topological => topological(env, plan, st),
        ExecutorType::TopologicalPriority => priority(env, plan, st),
        // A subgraph run from inside a topo-mt execution (an owner kernel) stays on the
        // calling thread: one pool per top-level execution, never nested.
        ExecutorType::TopologicalMultiThread if engine_mt::nested() => {
            engine_mt::run_nested(env, plan, st)
        }
        ExecutorType::TopologicalMultiThread => engine_mt::run(env, plan, st),
    };
    if let Some(s) = &env.subscriber {
        s.model_end(&plan.path, r.is_ok());
    }
    r
}

fn sequential(env: &Env, plan: &Plan, st: &mut ExecState) -> Result<(), ExecError> {
    for &id in &plan.order {
        // SAFETY: the run order is topological, so every producer of `id` ran before it, on
        // this thread; `st` is borrowed mutably, so nobody else runs a node of it.
        unsafe { call(env, plan, st, id) }.map_err(|e| node_error(plan, id, e))?;
    }
    Ok(())
}

/// An owner kernel's subgraph: bound, run with the executor's engine, read.
impl Subgraph for Plan {
    fn path(&self) -> &str {
        &self.path
    }

    fn run(
        &self,
        env: &Env,
        state: &mut NodeState,
        bind: &[Value],
    ) -> Result<Vec<Value>, KernelError> {
        let st = state.get_or_insert_with(|| self.new_state());
        for &(index, slot) in &self.inner_data {
            let v = bind.get(index).ok_or_else(|| {
                KernelError::new(format!(
                    "{}: InnerData index {index} is beyond the {} owner inputs",
                    self.path,
                    bind.len()
                ))
            })?;
            *st.arena.slot_mut(slot) = v.clone();
        }
        run(env, self, st).map_err(|e| KernelError::Subgraph(Box::new(e)))?;
        Ok(self
            .output_slots()
            .iter()
            .map(|&s| st.arena.slot(s).clone())
            .collect())
    }
}

/// The ready nodes of a topological engine.
trait Ready {
    fn reset(&mut self);
    fn push(&mut self, plan: &Plan, id: u32);
    fn pop(&mut self) -> Option<u32>;
}

/// FIFO (`kTopological`).
impl Ready for VecDeque<u32> {
    fn reset(&mut self) {
        self.clear();
    }
    #[inline(always)]
    fn push(&mut self, _: &Plan, id: u32) {
        self.push_back(id);
    }
    #[inline(always)]
    fn pop(&mut self) -> Option<u32> {
        self.pop_front()
    }
}

/// Lowest (priority, id) first (`kTopologicalPriority`): a 4-ary min-heap of the plan's
/// packed keys (`Plan::prio_key`, the priority's rank above the id). One `u64` compare
/// per step instead of a two-field tuple's, and the node id comes back out of the key's
/// low half, so the heap is half the size of one holding (priority, id) pairs. Four
/// children per node, not two: a pop (one per node run) walks half the levels, and the
/// four children it compares share a cache line (a wide graph keeps thousands ready).
struct KeyHeap(Vec<u64>);

/// Children per heap node.
const ARITY: usize = 4;

impl Ready for KeyHeap {
    fn reset(&mut self) {
        self.0.clear();
    }
    #[inline(always)]
    fn push(&mut self, plan: &Plan, id: u32) {
        self.push_key(plan.prio_key[id as usize]);
    }
    #[inline(always)]
    fn pop(&mut self) -> Option<u32> {
        self.pop_key().map(|k| k as u32)
    }
}

impl KeyHeap {
    #[inline(always)]
    fn push_key(&mut self, key: u64) {
        let h = &mut self.0;
        let mut i = h.len();
        h.push(key);
        // Sift up: move parents down into the hole until the key's place is found.
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if h[parent] <= key {
                break;
            }
            h[i] = h[parent];
            i = parent;
        }
        h[i] = key;
    }
    /// The smallest key.
    #[inline(always)]
    fn pop_key(&mut self) -> Option<u64> {
        let h = &mut self.0;
        let last = h.pop()?;
        let Some(&top) = h.first() else {
            return Some(last);
        };
        // Sift the last key down from the root through the smallest children.
        let n = h.len();
        let mut i = 0;
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let kids = &h[first..n.min(first + ARITY)];
            let (mut c, mut min) = (0, kids[0]);
            for (j, &k) in kids.iter().enumerate().skip(1) {
                if k < min {
                    (c, min) = (j, k);
                }
            }
            if min >= last {
                break;
            }
            h[i] = min;
            i = first + c;
        }
        h[i] = last;
        Some(top)
    }
}

fn topological(env: &Env, plan: &Plan, st: &mut ExecState) -> Result<(), ExecError> {
    let mut queue = std::mem::take(&mut st.queue);
    let r = with_ready(env, plan, st, &mut queue);
    st.queue = queue;
    r
}

fn priority(env: &Env, plan: &Plan, st: &mut ExecState) -> Result<(), ExecError> {
    let mut heap = KeyHeap(std::mem::take(&mut st.heap));
    let r = with_ready(env, plan, st, &mut heap);
    st.heap = heap.0;
    r
}

/// Kahn's algorithm over the plan's successor lists: a node is ready once its in-degree
/// counter reaches zero. The counters are reset from the plan's copy in place.
fn with_ready<R: Ready>(
    env: &Env,
    plan: &Plan,
    st: &mut ExecState,
    ready: &mut R,
) -> Result<(), ExecError> {
    st.indegree.copy_from_slice(&plan.indegree);
    ready.reset();
    for &s in &plan.starts {
        ready.push(plan, s);
    }
    while let Some(id) = ready.pop() {
        // SAFETY: a node is ready once its last predecessor completed, on this thread, and
        // is popped once; `st` is borrowed mutably, so nobody else runs a node of it.
        unsafe { call(env, plan, st, id) }.map_err(|e| node_error(plan, id, e))?;
        let (a, b) = (plan.succ_off[id as usize], plan.succ_off[id as usize + 1]);
        for &s in &plan.succ[a as usize..b as usize] {
            let d = &mut st.indegree[s as usize];
            *d -= 1;
            if *d == 0 {
                ready.push(plan, s);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    use proptest::prelude::*;

    use super::KeyHeap;

    proptest! {
        /// Any interleaving of pushes and pops gives the keys a sorted queue gives.
        #[test]
        fn key_heap_pops_the_smallest_key(ops in prop::collection::vec(prop::option::of(0u64..64), 0..400)) {
            let (mut heap, mut want) = (KeyHeap(Vec::new()), BinaryHeap::new());
            for op in ops {
                match op {
                    Some(k) => {
                        heap.push_key(k);
                        want.push(Reverse(k));
                    }
                    None => prop_assert_eq!(heap.pop_key(), want.pop().map(|r| r.0)),
                }
            }
            while let Some(Reverse(k)) = want.pop() {
                prop_assert_eq!(heap.pop_key(), Some(k));
            }
            prop_assert_eq!(heap.pop_key(), None);
        }
    }
}
