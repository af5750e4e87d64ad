//! Preparing a graph for the engines: GE's execution data.
//!
//! A [`Plan`] is immutable and shared; an [`ExecState`] is one executor's mutable side of
//! it (value slots, per-node kernel state, the topological engines' counters). Preparing
//! resolves every node's kernel in the registry (a missing one is an error naming the
//! node), numbers every output value with a slot, flattens every node's input slots into
//! one array, runs the kernels' `prepare` and `outputs_creator` hooks, and builds what
//! each engine needs: the run order (sequential), the successor lists and in-degrees
//! (topological), priorities, and the Free-to-Launch relations as a CSR (multi-thread).
//!
//! The hot record is [`NodeRec`]: a function pointer and four `u32`s, in one array in
//! node-id order, so an engine's step is an index, a call ([`call`]) and nothing else.
//!
//! The plan knows slots and function pointers, not what kernels keep: each node's kernel
//! state is an opaque [`NodeState`] the kernel's module types, and the multi-thread
//! engine's per-state data sits in an opaque slot of the [`ExecState`] it owns. An owner
//! node's subgraphs are held as `dyn Subgraph`, which the engines implement for `Plan`.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::Arc;

use crate::exec::{KernelClass, KernelGraph};
use crate::ops::OpRegistry;

use super::context::{Env, KernelContext, KernelFn, KernelResult, NodeData, NodeInfo, Subgraph};
use super::error::{ExecError, KernelError, LoadError};
use super::registry::{KernelRegistry, Role};
use super::state::NodeState;
use super::value::{Arena, Value};

/// What one node calls: the hot part.
#[derive(Clone, Copy)]
pub(crate) struct NodeRec {
    pub run: KernelFn,
    pub in_start: u32,
    pub in_len: u32,
    pub out_start: u32,
    pub out_len: u32,
}

/// A prepared graph's mutable side, one per executor (per stream).
pub struct ExecState {
    pub(crate) arena: Arena,
    pub(crate) states: Box<[UnsafeCell<NodeState>]>,
    /// The topological engines' counters, reset in place per execution.
    pub(crate) indegree: Vec<u32>,
    pub(crate) queue: VecDeque<u32>,
    /// The topological-priority engine's ready nodes: a 4-ary min-heap of the plan's
    /// packed keys (`Plan::prio_key`).
    pub(crate) heap: Vec<u64>,
    /// The multi-thread engine's data for this state (its execution data and its pool of
    /// counters, queues and worker threads), made at the state's first topo-mt run, of a
    /// type only that engine names; dropping it joins the workers.
    pub(crate) mt: NodeState,
}

// SAFETY: node states are touched only by their node's kernel while it runs, which the
// schedule serializes as it does value slots (see `value::Arena`).
unsafe impl Sync for ExecState {}

/// One prepared graph.
pub struct Plan {
    /// The graph's path for errors (`Main`, `Main/if.then`).
    pub path: String,
    pub(crate) recs: Vec<NodeRec>,
    pub(crate) slots_in: Vec<u32>,
    pub infos: Vec<NodeInfo>,
    pub(crate) slot_count: u32,
    /// Nodes the engines run, in a topological order (bound nodes left out).
    pub(crate) order: Vec<u32>,
    /// Successors of each node over data and control edges, deduplicated (CSR).
    pub(crate) succ_off: Vec<u32>,
    pub(crate) succ: Vec<u32>,
    /// Distinct run-node predecessors of each node.
    pub(crate) indegree: Vec<u32>,
    /// Run nodes with no run-node predecessor, in id order.
    pub(crate) starts: Vec<u32>,
    /// The topological-priority engine's heap key of each node: the dense rank of its
    /// priority among the graph's distinct priorities in the high 32 bits, its id in the
    /// low, so the heap orders by (priority, id) comparing one `u64`.
    pub(crate) prio_key: Vec<u64>,
    /// `(input index, node)` of each `Data` node.
    pub(crate) data: Vec<(usize, u32)>,
    /// `(index, slot)` of each `InnerData` node's output.
    pub(crate) inner_data: Vec<(usize, u32)>,
    /// Values created at load, copied into each new state.
    pub(crate) consts: Vec<(u32, Value)>,
    /// The node whose inputs are the graph's outputs.
    pub(crate) output: Option<u32>,
    /// Exact (Free, Launch) relations as a CSR over Free ids: `rel_off[f]..rel_off[f+1]`
    /// indexes `rel_launch`. Empty when the graph has none.
    pub(crate) rel_off: Vec<u32>,
    pub(crate) rel_launch: Vec<u32>,
    /// Each node's kernel class and whether it has a critical section: what the
    /// multi-thread engine's data is built from, two bytes a node (reading them out of
    /// the 200-byte `NodeInfo`s touched a cache line or two per node).
    pub(crate) classes: Vec<(KernelClass, bool)>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("path", &self.path)
            .field("nodes", &self.recs.len())
            .finish_non_exhaustive()
    }
}

impl Plan {
    pub fn node_count(&self) -> usize {
        self.recs.len()
    }
    /// Nodes the engines run (bound and constant nodes excluded).
    pub fn run_count(&self) -> usize {
        self.order.len()
    }
    /// Input slot ids of the graph's output node.
    pub(crate) fn output_slots(&self) -> &[u32] {
        match self.output {
            Some(o) => self.inputs_of(o),
            None => &[],
        }
    }
    pub(crate) fn inputs_of(&self, id: u32) -> &[u32] {
        let r = &self.recs[id as usize];
        &self.slots_in[r.in_start as usize..(r.in_start + r.in_len) as usize]
    }
    /// The exact relations' launches of Free node `f`.
    pub fn related_launches(&self, f: u32) -> &[u32] {
        if self.rel_off.is_empty() {
            return &[];
        }
        let (a, b) = (self.rel_off[f as usize], self.rel_off[f as usize + 1]);
        &self.rel_launch[a as usize..b as usize]
    }
    /// A fresh state for this plan: constants in place, counters sized.
    pub fn new_state(&self) -> ExecState {
        let mut arena = Arena::new(self.slot_count as usize);
        for (slot, v) in &self.consts {
            *arena.slot_mut(*slot) = v.clone();
        }
        ExecState {
            arena,
            states: (0..self.recs.len())
                .map(|_| UnsafeCell::new(NodeState::default()))
                .collect(),
            indegree: self.indegree.clone(),
            queue: VecDeque::with_capacity(self.recs.len()),
            heap: Vec::with_capacity(self.recs.len()),
            mt: NodeState::default(),
        }
    }
}

/// Calls node `id`'s kernel.
///
/// # Safety
/// The schedule's rule (see `value::Arena`): every producer of `id`'s inputs has
/// completed, and no other thread runs `id` now.
#[inline(always)]
pub(crate) unsafe fn call(env: &Env, plan: &Plan, st: &ExecState, id: u32) -> KernelResult {
    let r = &plan.recs[id as usize];
    let mut cx = KernelContext {
        env,
        info: &plan.infos[id as usize],
        // SAFETY: only node `id`'s kernel touches its state, and it runs once at a time.
        state: unsafe { &mut *st.states[id as usize].get() },
        values: &st.arena,
        inputs: &plan.slots_in[r.in_start as usize..(r.in_start + r.in_len) as usize],
        out_start: r.out_start,
        out_len: r.out_len,
    };
    match &env.subscriber {
        None => (r.run)(&mut cx),
        Some(s) => {
            s.node_start(&plan.path, &cx);
            let result = (r.run)(&mut cx);
            s.node_end(&plan.path, &cx, &result);
            result
        }
    }
}

/// Node `id`'s failure, named.
pub(crate) fn node_error(plan: &Plan, id: u32, e: KernelError) -> ExecError {
    let info = &plan.infos[id as usize];
    ExecError::Kernel {
        graph: plan.path.clone(),
        node: info.name.clone(),
        kernel: info.kernel,
        source: e,
    }
}

/// Prepares `g` (and its subgraphs) with `reg`'s kernels and `ops`' op library.
pub fn prepare(
    g: &KernelGraph,
    path: &str,
    reg: &KernelRegistry,
    ops: &OpRegistry,
) -> Result<Plan, ExecError> {
    let n = g.nodes.len();
    let load_error = |i: usize, source: LoadError| ExecError::Load {
        graph: path.to_string(),
        node: g.nodes[i].name.to_string(),
        source,
    };
    let mut out_start = Vec::with_capacity(n + 1);
    let mut total: u64 = 0;
    for node in &g.nodes {
        out_start.push(total as u32);
        total += node.outputs as u64;
    }
    if total > u32::MAX as u64 / 2 {
        return Err(ExecError::Load {
            graph: path.to_string(),
            node: String::new(),
            source: LoadError::Invalid(format!("{total} values are more than the engines address")),
        });
    }
    let mut recs = Vec::with_capacity(n);
    let mut infos = Vec::with_capacity(n);
    let mut slots_in = Vec::with_capacity(g.nodes.iter().map(|x| x.inputs.len()).sum());
    let mut roles = Vec::with_capacity(n);
    let mut plan_data = Vec::new();
    let mut inner_data = Vec::new();
    let mut consts = Vec::new();
    let mut output = None;
    for (i, node) in g.nodes.iter().enumerate() {
        let (kernel, info) = reg
            .find_named(&node.kernel)
            .ok_or_else(|| load_error(i, LoadError::NoKernel(node.kernel.to_string())))?;
        let in_start = slots_in.len() as u32;
        for v in &node.inputs {
            let p = v.node.index();
            if p >= n || v.output >= g.nodes[p].outputs || p == i {
                return Err(load_error(
                    i,
                    format!("input {}:{} is not a value of this graph", v.node, v.output).into(),
                ));
            }
            slots_in.push(out_start[p] + v.output);
        }
        let data = match info.funcs.prepare {
            Some(f) => f(node, ops).map_err(|m| load_error(i, m))?,
            None => NodeData::None,
        };
        match info.role {
            Role::Input => {
                let index = node.attr_int("index").filter(|&x| x >= 0).ok_or_else(|| {
                    load_error(i, "attribute \"index\" is missing or negative".into())
                })? as usize;
                if &*node.kernel == "Data" {
                    plan_data.push((index, i as u32));
                } else {
                    if node.outputs != 1 {
                        return Err(load_error(i, "an InnerData has one output".into()));
                    }
                    inner_data.push((index, out_start[i]));
                }
            }
            Role::Const => {
                let mut vals = vec![Value::None; node.outputs as usize];
                if let Some(f) = info.funcs.outputs_creator {
                    f(node, &mut vals).map_err(|e| load_error(i, e))?;
                }
                consts.extend(
                    vals.into_iter()
                        .enumerate()
                        .map(|(k, v)| (out_start[i] + k as u32, v)),
                );
            }
            Role::Output => {
                if output.replace(i as u32).is_some() {
                    return Err(load_error(i, "a graph has one output node".into()));
                }
            }
            Role::Run => {}
        }
        roles.push(info.role);
        let mut subgraphs = Vec::with_capacity(node.subgraphs.len());
        for (s, sub) in node.subgraphs.iter().enumerate() {
            let sub_name = if sub.name.is_empty() {
                format!("#{s}")
            } else {
                sub.name.clone()
            };
            let sub_path = format!("{path}/{}.{sub_name}", node.name);
            // Held as the kernels see it; the engines implement `Subgraph` for `Plan`.
            let plan: Arc<dyn Subgraph> = Arc::new(prepare(sub, &sub_path, reg, ops)?);
            subgraphs.push(plan);
        }
        recs.push(NodeRec {
            run: info.funcs.run,
            in_start,
            in_len: node.inputs.len() as u32,
            out_start: out_start[i],
            out_len: node.outputs,
        });
        infos.push(NodeInfo {
            id: i as u32,
            name: node.name.to_string(),
            kernel,
            class: info.class,
            funcs: info.funcs,
            critical_section: info.critical_section,
            attrs: node.attrs.clone(),
            origin: node.origin.clone(),
            priority: node.priority,
            data,
            subgraphs,
        });
    }

    let Schedule {
        succ_off,
        succ,
        indegree,
        starts,
        order,
    } = schedule(g, &roles)
        .map_err(|stuck| load_error(stuck, "the node lies on a cycle".into()))?;
    // The output node runs last (its kernel does nothing but must follow its inputs).
    let prio_key = priority_keys(&infos);

    let (rel_off, rel_launch) = free_launch_csr(g, path)?;

    let classes = infos
        .iter()
        .map(|i| (i.class, !i.critical_section.is_empty()))
        .collect();
    Ok(Plan {
        path: path.to_string(),
        recs,
        slots_in,
        infos,
        slot_count: total as u32,
        order,
        succ_off,
        succ,
        indegree,
        starts,
        prio_key,
        data: plan_data,
        inner_data,
        consts,
        output,
        rel_off,
        rel_launch,
        classes,
    })
}

/// The engines' view of a graph's dependencies: successors over data and control edges
/// between run nodes (and into the output node), deduplicated, as a CSR; in-degrees; the
/// nodes ready at the start; and the run order.
struct Schedule {
    succ_off: Vec<u32>,
    succ: Vec<u32>,
    indegree: Vec<u32>,
    starts: Vec<u32>,
    order: Vec<u32>,
}

/// Works out `g`'s [`Schedule`] from its nodes' `roles`; a node on a cycle is the error.
fn schedule(g: &KernelGraph, roles: &[Role]) -> Result<Schedule, usize> {
    let n = g.nodes.len();
    // Edges between run nodes (and into the output node), deduplicated per node.
    let runs = |i: usize| matches!(roles[i], Role::Run | Role::Output);
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    for i in (0..n).filter(|&i| runs(i)) {
        let mut p: Vec<u32> = g
            .predecessors(i)
            .filter(|&p| runs(p))
            .map(|p| p as u32)
            .collect();
        p.sort_unstable();
        p.dedup();
        preds[i] = p;
    }
    let mut indegree = vec![0u32; n];
    let mut succ_count = vec![0u32; n + 1];
    for (i, p) in preds.iter().enumerate() {
        indegree[i] = p.len() as u32;
        for &q in p {
            succ_count[q as usize] += 1;
        }
    }
    let mut succ_off = Vec::with_capacity(n + 1);
    let mut acc = 0u32;
    for c in &succ_count[..n] {
        succ_off.push(acc);
        acc += c;
    }
    succ_off.push(acc);
    let mut succ = vec![0u32; acc as usize];
    let mut fill = succ_off.clone();
    for (i, p) in preds.iter().enumerate() {
        for &q in p {
            succ[fill[q as usize] as usize] = i as u32;
            fill[q as usize] += 1;
        }
    }
    let starts: Vec<u32> = (0..n)
        .filter(|&i| runs(i) && indegree[i] == 0)
        .map(|i| i as u32)
        .collect();
    // The run order: Kahn's algorithm, lowest id first among the ready, so an already
    // sorted graph keeps its array order.
    let mut order = Vec::with_capacity(n);
    let mut deg = indegree.clone();
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<u32>> =
        starts.iter().map(|&s| std::cmp::Reverse(s)).collect();
    while let Some(std::cmp::Reverse(i)) = ready.pop() {
        order.push(i);
        for &s in &succ[succ_off[i as usize] as usize..succ_off[i as usize + 1] as usize] {
            deg[s as usize] -= 1;
            if deg[s as usize] == 0 {
                ready.push(std::cmp::Reverse(s));
            }
        }
    }
    let run_total = (0..n).filter(|&i| runs(i)).count();
    if order.len() != run_total {
        return Err((0..n).find(|&i| runs(i) && deg[i] > 0).unwrap_or(0));
    }
    Ok(Schedule {
        succ_off,
        succ,
        indegree,
        starts,
        order,
    })
}

/// The Free-to-Launch relations of `g` as a CSR over Free ids (empty without relations).
fn free_launch_csr(g: &KernelGraph, path: &str) -> Result<(Vec<u32>, Vec<u32>), ExecError> {
    if g.free_launch.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let n = g.nodes.len();
    let mut rel: Vec<(u32, u32)> = g.free_launch.iter().map(|(f, l)| (f.0, l.0)).collect();
    rel.sort_unstable();
    rel.dedup();
    let mut off = vec![0u32; n + 1];
    for &(f, l) in &rel {
        if f as usize >= n || l as usize >= n {
            return Err(ExecError::Load {
                graph: path.to_string(),
                node: String::new(),
                source: LoadError::Invalid(format!(
                    "relation (e{f}, e{l}) names a node out of range"
                )),
            });
        }
        off[f as usize + 1] += 1;
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    Ok((off, rel.iter().map(|&(_, l)| l).collect()))
}

/// Each node's heap key for the topological-priority engine: the dense rank of its
/// priority (a graph has at most as many distinct priorities as nodes, so a rank fits in
/// 32 bits whatever the priorities' range) above its id.
fn priority_keys(infos: &[NodeInfo]) -> Vec<u64> {
    let mut distinct: Vec<i64> = infos.iter().map(|i| i.priority).collect();
    distinct.sort_unstable();
    distinct.dedup();
    infos
        .iter()
        .map(|i| {
            let rank = distinct.partition_point(|&p| p < i.priority) as u64;
            (rank << 32) | u64::from(i.id)
        })
        .collect()
}
