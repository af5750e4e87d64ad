//! The ExecuteGraph: what lowering produces and the engines run.
//!
//! As in GE's RT2, an [`ExecuteGraph`] holds three graphs: **Init** (create streams,
//! events, notifies and allocators, upload constants, look up infer and tiling functions),
//! **Main** (the per-execution work) and **DeInit** (release what Init created). Each is an
//! [`KernelGraph`] of [`KernelNode`]s: a node is one kernel call, with ordered input value slots
//! (each the output of another node of the same graph), a number of outputs, control
//! predecessors, attributes, the compute node it was lowered from, a priority and a
//! [`KernelClass`]. Control-flow nodes own subgraphs.
//!
//! Values cross graph boundaries only through GE's builtin boundary kernels:
//! - Init ends in one `InnerNetOutput`; its input `i` is export `i` of Init. In Main and
//!   DeInit an `InnerData` node with attribute `index = i` reads that export.
//! - In Main, `Data` with attribute `index = i` is model input `i`; the inputs of Main's
//!   `NetOutput` are the model outputs, in order.
//! - In a subgraph owned by a node, `InnerData` with `index = i` reads the owner's input
//!   `i`, and the inputs of the subgraph's `InnerNetOutput` are the owner's outputs.
//!
//! This file holds data only: the `.exeg` codec, the loader's checks and the views live
//! beside it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::ops::DType;

/// Index of a node in its graph's `nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelNodeId(pub u32);

impl KernelNodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for KernelNodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// One output of one node of the same graph: an input value slot's source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueRef {
    pub node: KernelNodeId,
    pub output: u32,
}

/// How the multi-thread executor schedules a kernel (GE's kernel registration classes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum KernelClass {
    /// Produces results or changes memory state (`kKernelUseMemory`): the memory worker.
    Memory,
    /// Submits device work and produces no output (`kKernelLaunch`): the launch worker.
    Launch,
    /// Everything else.
    #[default]
    Normal,
}

impl KernelClass {
    pub fn name(self) -> &'static str {
        match self {
            KernelClass::Memory => "memory",
            KernelClass::Launch => "launch",
            KernelClass::Normal => "normal",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "memory" => Some(KernelClass::Memory),
            "launch" => Some(KernelClass::Launch),
            "normal" => Some(KernelClass::Normal),
            _ => None,
        }
    }
}

/// Which of the three graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GraphKind {
    Init,
    Main,
    DeInit,
}

impl GraphKind {
    pub const ALL: [GraphKind; 3] = [GraphKind::Init, GraphKind::Main, GraphKind::DeInit];

    /// GE's names (`GetExecuteGraphTypeStr`).
    pub fn name(self) -> &'static str {
        match self {
            GraphKind::Init => "Init",
            GraphKind::Main => "Main",
            GraphKind::DeInit => "DeInit",
        }
    }
}

/// Exec-node attributes are the device's attributes: the kernels hand them to the op
/// library as they are.
pub use crate::ops::attr::{Attr as KernelAttr, HostTensor as ExecTensor};

/// A node's name: up to 24 bytes held inline (lowering's names, `n23/AllocMemHbm_0`,
/// `const/287`, are nearly all that short), so a large graph is not one heap allocation
/// per name.
pub type NodeName = compact_str::CompactString;

/// A node's input value slots: most nodes have at most two, held inline.
pub type Inputs = smallvec::SmallVec<[ValueRef; 2]>;

/// A node's control predecessors: lowering gives a node at most two (a Free its launch, a
/// launch its stream's previous one), held inline.
pub type ControlInputs = smallvec::SmallVec<[KernelNodeId; 2]>;

/// The compute node an exec node was lowered from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Origin {
    /// Name of the ComputeGraph (root or subgraph) the node is in.
    pub graph: NodeName,
    pub node: NodeName,
    pub op_type: NodeName,
    /// The node's index in its ComputeGraph.
    pub index: u32,
}

/// One kernel call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KernelNode {
    /// Unique within its graph.
    pub name: NodeName,
    /// A kernel type the kernel registry knows (`AllocMemHbm`, `LaunchKernelWithHandle`, ...).
    /// Borrowed from the kernel table for every kernel type rt2 knows (no copy per node);
    /// an unknown name read from a file is owned, for the checks to report.
    pub kernel: Cow<'static, str>,
    pub class: KernelClass,
    /// Input value slots, in order.
    pub inputs: Inputs,
    /// Number of output values.
    pub outputs: u32,
    /// Nodes that must run first although no value flows from them.
    pub control_inputs: ControlInputs,
    pub attrs: crate::ops::AttrMap,
    /// Shared by the nodes of one compute node: lowering makes one per compute node.
    pub origin: Option<Arc<Origin>>,
    /// Lower runs first among ready nodes (`kTopologicalPriority`).
    pub priority: i64,
    /// Subgraphs this node owns (If: then, else; Case: branches; While: cond, body).
    pub subgraphs: Vec<KernelGraph>,
}

impl KernelNode {
    pub fn new(
        name: impl Into<NodeName>,
        kernel: impl Into<Cow<'static, str>>,
        class: KernelClass,
    ) -> Self {
        KernelNode {
            name: name.into(),
            kernel: kernel.into(),
            class,
            ..Default::default()
        }
    }
    pub fn attr_int(&self, key: &str) -> Option<i64> {
        self.attrs.get(key).and_then(KernelAttr::as_int)
    }
}

/// A graph of exec nodes: Init, Main, DeInit, or a subgraph owned by a node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KernelGraph {
    pub name: String,
    pub nodes: Vec<KernelNode>,
    /// Exact (Free, Launch) relations of this owner graph, recorded by the multi-thread
    /// passes: the Free may not reuse memory before the Launch's submitted work is done.
    /// Relations never cross owner graphs.
    pub free_launch: Vec<(KernelNodeId, KernelNodeId)>,
}

impl KernelGraph {
    pub fn new(name: impl Into<String>) -> Self {
        KernelGraph {
            name: name.into(),
            ..Default::default()
        }
    }
    pub fn node(&self, id: KernelNodeId) -> &KernelNode {
        &self.nodes[id.index()]
    }
    /// Appends a node and returns its id.
    pub fn add(&mut self, node: KernelNode) -> KernelNodeId {
        self.nodes.push(node);
        KernelNodeId(self.nodes.len() as u32 - 1)
    }
    /// Visits this graph and every subgraph below it, parents first.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a KernelGraph)) {
        f(self);
        for n in &self.nodes {
            for s in &n.subgraphs {
                s.walk(f);
            }
        }
    }
    /// Nodes in this graph and all its subgraphs.
    pub fn total_nodes(&self) -> usize {
        let mut n = 0;
        self.walk(&mut |g| n += g.nodes.len());
        n
    }
    /// The in-range predecessors of node `i` over data and control edges, self-loops left
    /// out (the loader reports those on their own).
    pub fn predecessors(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let len = self.nodes.len();
        let n = &self.nodes[i];
        n.inputs
            .iter()
            .map(|v| v.node.index())
            .chain(n.control_inputs.iter().map(|c| c.index()))
            .filter(move |&p| p < len && p != i)
    }

    /// Whether every edge (over [`KernelGraph::predecessors`]) points from a lower to a
    /// higher id: then the array order is a topological order, and the lowest-id-first
    /// order [`KernelGraph::topological_order`] would compute is the identity.
    pub fn is_sorted(&self) -> bool {
        (0..self.nodes.len()).all(|i| self.predecessors(i).all(|p| p < i))
    }

    /// A topological order of this graph's nodes (not its subgraphs') over data and control
    /// edges; among nodes ready together the lowest id goes first, so the order is
    /// deterministic and keeps the array order where edges allow. `Err` holds the nodes
    /// left over: each lies on a cycle or behind one.
    pub fn topological_order(&self) -> Result<Vec<KernelNodeId>, Vec<KernelNodeId>> {
        kahn_order(self.nodes.len(), |i| self.predecessors(i))
            .map(|o| o.into_iter().map(KernelNodeId).collect())
            .map_err(|left| left.into_iter().map(KernelNodeId).collect())
    }

    /// Kernel type -> node count over this graph and its subgraphs.
    pub fn kernel_histogram(&self) -> BTreeMap<String, usize> {
        // Counted under the nodes' own names, owned only once per kernel type at the end:
        // not a string made per node (80,000 for a graph of 10,000 ops).
        let mut h: BTreeMap<&str, usize> = BTreeMap::new();
        self.walk(&mut |g| {
            for n in &g.nodes {
                *h.entry(&n.kernel).or_insert(0) += 1;
            }
        });
        h.into_iter().map(|(k, n)| (k.to_string(), n)).collect()
    }
}

/// A model input or output as the executor presents it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelIo {
    pub name: String,
    /// `None` for a type the device does not compute on.
    pub dtype: Option<DType>,
    /// `-1` for an unknown dim; `[-2]` for an unknown rank.
    pub shape: Vec<i64>,
    /// A weight the caller supplies: a Const the model was written without the value of
    /// (GE dumps leave weights out by default). It is bound like an input, after the
    /// model's own inputs, so a command can tell the user which ones it needs.
    pub weight: bool,
}

/// Counts of the runtime resources Init creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Resources {
    pub streams: u32,
    pub events: u32,
    pub notifies: u32,
}

/// A lowered model: the three graphs and what the executor needs to know about them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExecuteGraph {
    pub name: String,
    pub init: KernelGraph,
    pub main: KernelGraph,
    pub deinit: KernelGraph,
    pub resources: Resources,
    pub inputs: Vec<ModelIo>,
    pub outputs: Vec<ModelIo>,
    /// Whether the multi-thread passes were applied.
    pub multi_thread: bool,
}

impl ExecuteGraph {
    pub fn graph(&self, kind: GraphKind) -> &KernelGraph {
        match kind {
            GraphKind::Init => &self.init,
            GraphKind::Main => &self.main,
            GraphKind::DeInit => &self.deinit,
        }
    }
}

/// A topological order of `len` nodes whose predecessors (all `< len`) `preds` gives,
/// lowest index first among nodes ready together, so the order is deterministic and keeps
/// the array order where edges allow. `Err` holds the nodes left over: each lies on a
/// cycle or behind one. Shared by the KernelGraph sort and lowering's walk of a
/// ComputeGraph.
pub fn kahn_order<I: Iterator<Item = usize>>(
    len: usize,
    preds: impl Fn(usize) -> I,
) -> Result<Vec<u32>, Vec<u32>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    // Successors in one flat array (CSR): a large graph has millions of edges, and one
    // allocation for all of them beats one per node.
    let mut indegree = vec![0u32; len];
    let mut start = vec![0u32; len + 1];
    for (i, deg) in indegree.iter_mut().enumerate() {
        for p in preds(i) {
            start[p + 1] += 1;
            *deg += 1;
        }
    }
    for i in 0..len {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut succ = vec![0u32; start[len] as usize];
    for i in 0..len {
        for p in preds(i) {
            succ[fill[p] as usize] = i as u32;
            fill[p] += 1;
        }
    }
    let mut ready: BinaryHeap<Reverse<u32>> = (0..len as u32)
        .filter(|&i| indegree[i as usize] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(len);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        let i = i as usize;
        for &s in &succ[start[i] as usize..start[i + 1] as usize] {
            indegree[s as usize] -= 1;
            if indegree[s as usize] == 0 {
                ready.push(Reverse(s));
            }
        }
    }
    if order.len() == len {
        Ok(order)
    } else {
        Err((0..len as u32)
            .filter(|&i| indegree[i as usize] > 0)
            .collect())
    }
}
