//! The ExecuteGraph under construction: Init, the stack of graph levels the converters
//! emit into (Main at the bottom, one level per subgraph being lowered), and the model-wide
//! values every level reaches through Init's exports.
//!
//! **Globals.** Streams, the allocator, infer functions and uploaded constants are created
//! once, in Init, and exported. Main reads an export with an `InnerData` node; a subgraph
//! cannot see Init, so it reads the value as an extra input of its owner node (a
//! *capture*), and the owner in turn gets it from its own level, recursively. All
//! subgraphs of one owner share one capture list, so an index means the same value in each.
//!
//! **Tensors.** A compute tensor is a [`TVal`]: its meta, and whichever of its forms the
//! level has made so far: a shape value, device memory, a host tensor, or a compile-time
//! constant. The `*_of` methods produce a missing form on demand (a `Const` shape node, an
//! upload of a constant, a `CopyH2D` of a host input, a `CopyD2H` for a value that shape
//! inference reads), so a converter asks for what its kernels take and nothing else is
//! built.
//!
//! **Ownership.** Device memory allocated in a level belongs to it and is freed there by a
//! `FreeMemory` after its last reader and after the launch that writes it, unless it leaves
//! the level (as an output, or handed to a loop that takes it over). Memory a level reads
//! from its owner or from Init is borrowed and never freed there.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use compact_str::format_compact;
use smallvec::smallvec;

use crate::exec::{KernelAttr, KernelGraph, KernelNode, KernelNodeId, ValueRef};
use crate::ops::TensorMeta;
use crate::ops::attr::AttrKey;
use crate::ops::{AttrMap, DType, HostTensor};

/// Lowering's lookup maps: foldhash, not SipHash (no untrusted keys here, and hashing is a
/// noticeable part of lowering's time); fixed seed, though no map's order reaches the output.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;

/// A value created once in Init and exported to every level that asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Global {
    Stream,
    Allocator,
    /// The model's events and notifies (`Resources`), for cross-stream ordering.
    Events,
    Notifies,
    /// `FindInferShapeFunc` of an op type.
    InferFunc(String),
    /// Device copy of constant `id` (an index into [`Builder::consts`]).
    ConstMem(u32),
}

/// A compute tensor as the current level knows it.
#[derive(Debug, Clone)]
pub struct TVal {
    pub meta: TensorMeta,
    /// The value, when known at lowering time: an index into [`Builder::consts`].
    pub konst: Option<u32>,
    pub shape: Option<ValueRef>,
    /// Device memory holding the elements.
    pub mem: Option<ValueRef>,
    /// A host tensor holding shape and elements (model inputs, downloads).
    pub host: Option<ValueRef>,
    /// The node whose device work writes the tensor: whatever launches work reading it is
    /// submitted after this node.
    pub order: Option<KernelNodeId>,
    /// The tensor's storage and origin formats, when the graph gives other than plain
    /// ones (see [`super::attrs::TensorFormat`]).
    pub format: Option<Arc<super::attrs::TensorFormat>>,
}

impl TVal {
    /// Whether `other` is a clone of the same value (every form the same).
    pub fn same_value(&self, other: &TVal) -> bool {
        self.konst == other.konst
            && self.shape == other.shape
            && self.mem == other.mem
            && self.host == other.host
    }

    pub fn new(meta: TensorMeta) -> Self {
        TVal {
            meta,
            konst: None,
            shape: None,
            mem: None,
            host: None,
            order: None,
            format: None,
        }
    }
}

/// Device memory a level allocated.
#[derive(Debug, Clone)]
struct Owned {
    mem: ValueRef,
    /// The launch that writes it, which its Free must follow.
    writer: Option<KernelNodeId>,
    /// Leaves the level (an output, or taken over by a loop): not freed here.
    kept: bool,
}

/// The captures of one owner node, shared by all its subgraphs.
#[derive(Debug, Default)]
pub struct Captures {
    /// Owner input index of the first capture.
    pub base: usize,
    pub globals: Vec<Global>,
}

/// A point in the lowering of a subgraph level ([`Builder::mark`]).
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    levels: usize,
    captures: usize,
    globals: usize,
}

/// One graph being emitted.
struct Level {
    graph: KernelGraph,
    globals: HashMap<Global, ValueRef>,
    owned: Vec<Owned>,
    /// Position in `owned` by memory value: lookups are per launch, so no scan.
    owned_at: HashMap<ValueRef, usize>,
    /// Node ids by the hash of their names, for unique node names without keeping a copy
    /// of every name (see [`Builder::add_at`]).
    names: HashMap<u64, u32>,
    /// Const nodes of this level by constant id (host form) and by shape.
    const_hosts: HashMap<u32, ValueRef>,
    const_shapes: HashMap<Vec<i64>, ValueRef>,
}

impl Level {
    /// Whether a node of this level is named `name`. The map holds one node per name
    /// hash; a hash shared by two names (rare) falls back to a scan.
    fn name_taken(&self, name: &str) -> bool {
        match self.names.get(&self.names.hasher().hash_one(name)) {
            None => false,
            Some(&id) => {
                self.graph.nodes[id as usize].name == name
                    || self.graph.nodes.iter().any(|n| n.name == name)
            }
        }
    }

    fn new(name: &str) -> Self {
        Level {
            graph: KernelGraph::new(name),
            globals: HashMap::default(),
            owned: Vec::new(),
            owned_at: HashMap::default(),
            names: HashMap::default(),
            const_hosts: HashMap::default(),
            const_shapes: HashMap::default(),
        }
    }
}

/// The state of one lowering.
pub struct Builder {
    pub init: KernelGraph,
    exports: Vec<ValueRef>,
    export_of: BTreeMap<Global, u32>,
    init_stream: ValueRef,
    init_allocator: ValueRef,
    init_events: ValueRef,
    init_notifies: ValueRef,
    /// Every constant value lowering knows, by id.
    pub consts: Vec<Arc<HostTensor>>,
    levels: Vec<Level>,
    /// One entry per level above Main: that level's owner's captures.
    captures: Vec<Captures>,
    /// A trial lowering of a loop body to learn its output metas: nothing reaches Init,
    /// and the levels it opens are thrown away.
    pub dry: bool,
    /// Every distinct attribute set so far: nodes configured alike share one, which the
    /// `.exeg` then stores once.
    attr_sets: HashMap<AttrKey, ()>,
}

fn vr(node: KernelNodeId, output: u32) -> ValueRef {
    ValueRef { node, output }
}

/// An exec node of `kernel`, with the class the kernel table gives it.
pub use crate::exec::kernel_types::exec_node as node;

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// A builder whose Init creates the stream and the device allocator, and whose Main
    /// level is open.
    pub fn new() -> Self {
        let mut init = KernelGraph::new("Init");
        let mut streams = node("SplitRtStreams", "SplitRtStreams");
        streams.outputs = 1;
        streams.attrs.insert("count".into(), KernelAttr::Int(1));
        let s = init.add(streams);
        let mut alloc = node("CreateAllocator", "CreateAllocator");
        alloc.inputs = smallvec![vr(s, 0)];
        alloc.outputs = 1;
        alloc
            .attrs
            .insert("placement".into(), KernelAttr::Str("hbm".into()));
        let a = init.add(alloc);
        // The lowering is single-stream, so it needs no events or notifies; Init still
        // creates the (empty) sets, so every model has the same lifecycle and an engine
        // never special-cases their absence.
        let mut events = node("CreateEvents", "CreateEvents");
        events.outputs = 1;
        events.attrs.insert("count".into(), KernelAttr::Int(0));
        let e = init.add(events);
        let mut notifies = node("CreateNotifies", "CreateNotifies");
        notifies.outputs = 1;
        notifies.attrs.insert("count".into(), KernelAttr::Int(0));
        let nt = init.add(notifies);
        Builder {
            init,
            exports: Vec::new(),
            export_of: BTreeMap::new(),
            init_stream: vr(s, 0),
            init_allocator: vr(a, 0),
            init_events: vr(e, 0),
            init_notifies: vr(nt, 0),
            consts: Vec::new(),
            levels: vec![Level::new("Main")],
            captures: Vec::new(),
            dry: false,
            attr_sets: HashMap::default(),
        }
    }

    /// Registers a constant value; returns its id. Its bytes become shared here (no copy),
    /// so the Const kernels made of it, and the executor's values made of those, hold
    /// the one buffer.
    pub fn add_const(&mut self, mut t: HostTensor) -> u32 {
        t.data.share();
        self.consts.push(Arc::new(t));
        self.consts.len() as u32 - 1
    }

    /// `a`, or an equal set made before, shared.
    pub fn share(&mut self, a: AttrMap) -> AttrMap {
        if a.is_empty() {
            return a;
        }
        let key = AttrKey(a);
        if let Some((k, _)) = self.attr_sets.get_key_value(&key) {
            return k.0.clone();
        }
        let shared = key.0.clone();
        self.attr_sets.insert(key, ());
        shared
    }

    /// Room for `nodes` nodes in the current level and in Init (which gets at most a
    /// few per constant and per value Main reads from it), so a large graph is not
    /// copied as its node arrays grow: each copy leaves the old array's memory behind.
    /// Room never written to is never touched.
    pub fn reserve(&mut self, nodes: usize) {
        self.top().graph.nodes.reserve(nodes);
        self.init.nodes.reserve(nodes);
    }

    pub fn depth(&self) -> usize {
        self.levels.len() - 1
    }

    fn top(&mut self) -> &mut Level {
        self.levels.last_mut().expect("Main is always open")
    }

    /// The graph being emitted.
    pub fn graph(&self) -> &KernelGraph {
        &self.levels.last().expect("Main is always open").graph
    }

    /// Adds a node to the current level under a name unique in it; returns its id.
    pub fn add(&mut self, n: KernelNode) -> KernelNodeId {
        let depth = self.depth();
        self.add_at(depth, n)
    }

    fn add_at(&mut self, depth: usize, mut n: KernelNode) -> KernelNodeId {
        let level = &mut self.levels[depth];
        if level.name_taken(&n.name) {
            let base = std::mem::take(&mut n.name);
            let mut k = 1;
            loop {
                n.name = format_compact!("{base}#{k}");
                if !level.name_taken(&n.name) {
                    break;
                }
                k += 1;
            }
        }
        let id = level.graph.add(n);
        let h = level
            .names
            .hasher()
            .hash_one(&level.graph.nodes[id.index()].name);
        level.names.insert(h, id.0);
        id
    }

    /// Adds `f`'s attributes to node `id` of the current level (the node making a tensor).
    pub fn annotate_format(&mut self, id: KernelNodeId, f: &super::attrs::TensorFormat) {
        let mut attrs = self.node_mut(id).attrs.clone();
        f.add_to(&mut attrs);
        let attrs = self.share(attrs);
        self.node_mut(id).attrs = attrs;
    }

    /// A node of the current level.
    pub fn node_mut(&mut self, id: KernelNodeId) -> &mut KernelNode {
        &mut self.top().graph.nodes[id.index()]
    }

    /// Orders node `id` of the current level after `before` (no duplicates, no self edge).
    pub fn add_control(
        &mut self,
        id: KernelNodeId,
        before: &std::collections::BTreeSet<KernelNodeId>,
    ) {
        let n = self.node_mut(id);
        for &b in before {
            if b != id && !n.control_inputs.contains(&b) {
                n.control_inputs.push(b);
            }
        }
    }

    /// Opens a subgraph level owned by a node whose captures start at input `base`; the
    /// owner's other subgraphs are opened with [`Builder::push_sibling`].
    pub fn push_owner(&mut self, name: &str, base: usize) {
        self.captures.push(Captures {
            base,
            globals: Vec::new(),
        });
        self.levels.push(Level::new(name));
    }

    /// Opens the next subgraph of the owner whose previous subgraph was just popped with
    /// [`Builder::pop_level`].
    pub fn push_sibling(&mut self, name: &str) {
        self.levels.push(Level::new(name));
    }

    /// Where the lowering of the subgraph level just opened starts, for
    /// [`Builder::rewind`].
    pub fn mark(&self) -> Mark {
        Mark {
            levels: self.levels.len(),
            captures: self.captures.len(),
            globals: self.captures.last().map_or(0, |c| c.globals.len()),
        }
    }

    /// Throws away what was emitted since `mark` into the level open then and below it
    /// (levels a failed lowering left open included), and the captures it added: the
    /// level is as it was opened. What reached Init stays, unused.
    pub fn rewind(&mut self, mark: Mark) {
        self.levels.truncate(mark.levels);
        let name = self.top().graph.name.clone();
        *self.top() = Level::new(&name);
        self.captures.truncate(mark.captures);
        if let Some(c) = self.captures.last_mut() {
            c.globals.truncate(mark.globals);
        }
    }

    /// Closes the current subgraph level (the owner's captures stay open for siblings):
    /// frees what it owns and returns the graph.
    pub fn pop_level(&mut self) -> KernelGraph {
        self.emit_frees();
        let level = self.levels.pop().expect("a subgraph level is open");
        level.graph
    }

    /// Closes the owner's capture list; returns the globals the owner must pass, in owner
    /// input order after `base`.
    pub fn pop_owner(&mut self) -> Vec<Global> {
        self.captures.pop().map(|c| c.globals).unwrap_or_default()
    }

    /// Closes Main: frees what it owns and returns it.
    pub fn finish_main(&mut self) -> KernelGraph {
        self.emit_frees();
        std::mem::replace(&mut self.top().graph, KernelGraph::new("Main"))
    }

    /// A global as a value of the current level.
    pub fn global(&mut self, g: Global) -> ValueRef {
        let depth = self.depth();
        self.global_at(depth, g)
    }

    fn global_at(&mut self, depth: usize, g: Global) -> ValueRef {
        if let Some(v) = self.levels[depth].globals.get(&g) {
            return *v;
        }
        let index = if depth == 0 {
            self.export(&g) as i64
        } else {
            let caps = &mut self.captures[depth - 1];
            let pos = match caps.globals.iter().position(|x| *x == g) {
                Some(p) => p,
                None => {
                    caps.globals.push(g.clone());
                    caps.globals.len() - 1
                }
            };
            (caps.base + pos) as i64
        };
        let name = match &g {
            Global::Stream => "stream".to_string(),
            Global::Allocator => "allocator".to_string(),
            Global::Events => "events".to_string(),
            Global::Notifies => "notifies".to_string(),
            Global::InferFunc(op) => format!("infer_func/{op}"),
            Global::ConstMem(id) => format!("const/{id}"),
        };
        let mut n = node(name, "InnerData");
        n.outputs = 1;
        n.attrs.insert("index".into(), KernelAttr::Int(index));
        let v = vr(self.add_at(depth, n), 0);
        self.levels[depth].globals.insert(g, v);
        v
    }

    /// The captures of the owner whose subgraphs are being lowered at `depth`, evaluated
    /// one level down: the owner node's extra inputs.
    pub fn capture_inputs(&mut self, globals: &[Global]) -> Vec<ValueRef> {
        globals.iter().map(|g| self.global(g.clone())).collect()
    }

    /// Init's export index of a global, creating it on first use.
    fn export(&mut self, g: &Global) -> u32 {
        if let Some(&i) = self.export_of.get(g) {
            return i;
        }
        if self.dry {
            return 0;
        }
        let v = match g {
            Global::Stream => self.init_stream,
            Global::Allocator => self.init_allocator,
            Global::Events => self.init_events,
            Global::Notifies => self.init_notifies,
            Global::InferFunc(op) => {
                let mut n = node(
                    format_compact!("FindInferShapeFunc/{op}"),
                    "FindInferShapeFunc",
                );
                n.outputs = 1;
                n.attrs
                    .insert("op_type".into(), KernelAttr::Str(op.clone()));
                vr(self.init.add(n), 0)
            }
            Global::ConstMem(id) => {
                let t = self.consts[*id as usize].clone();
                let mut c = node(format_compact!("const/{id}"), "Const");
                c.outputs = 1;
                c.attrs.insert("value".into(), KernelAttr::Tensor(t));
                let c = self.init.add(c);
                let mut up = node(format_compact!("const/{id}/CopyH2D"), "CopyH2D");
                up.inputs = smallvec![vr(c, 0), self.init_stream, self.init_allocator];
                up.outputs = 1;
                vr(self.init.add(up), 0)
            }
        };
        self.exports.push(v);
        let i = self.exports.len() as u32 - 1;
        self.export_of.insert(g.clone(), i);
        i
    }

    /// A `Const` node of the current level holding a shape.
    pub fn const_shape(&mut self, dims: &[i64]) -> ValueRef {
        if let Some(v) = self.top().const_shapes.get(dims) {
            return *v;
        }
        let mut n = node(format_compact!("shape{dims:?}"), "Const");
        n.outputs = 1;
        n.attrs
            .insert("shape".into(), KernelAttr::Ints(dims.to_vec()));
        let v = vr(self.add(n), 0);
        self.top().const_shapes.insert(dims.to_vec(), v);
        v
    }

    /// The shape value of `t`; its meta must be static when it has none yet.
    pub fn shape_of(&mut self, t: &mut TVal) -> Option<ValueRef> {
        if let Some(s) = t.shape {
            return Some(s);
        }
        let dims = t.meta.shape.clone().filter(|_| t.meta.is_static())?;
        let v = self.const_shape(&dims);
        t.shape = Some(v);
        Some(v)
    }

    /// Device memory of `t`: the upload of a constant, or a `CopyH2D` of a host tensor.
    pub fn mem_of(&mut self, t: &mut TVal, name: &str) -> Option<ValueRef> {
        if let Some(m) = t.mem {
            return Some(m);
        }
        let v = if let Some(id) = t.konst {
            self.global(Global::ConstMem(id))
        } else {
            let host = t.host?;
            let stream = self.global(Global::Stream);
            let alloc = self.global(Global::Allocator);
            let mut n = node(format_compact!("{name}/CopyH2D"), "CopyH2D");
            n.inputs = smallvec![host, stream, alloc];
            n.outputs = 1;
            let id = self.add(n);
            let v = vr(id, 0);
            self.own(v, None);
            v
        };
        t.mem = Some(v);
        Some(v)
    }

    /// A host tensor of `t`: a `Const` of its known value, its host form, or a download.
    pub fn host_of(&mut self, t: &mut TVal, name: &str) -> Option<ValueRef> {
        if let Some(h) = t.host {
            return Some(h);
        }
        let v = if let Some(id) = t.konst {
            if let Some(v) = self.top().const_hosts.get(&id) {
                *v
            } else {
                let mut n = node(format_compact!("const/{id}"), "Const");
                n.outputs = 1;
                n.attrs.insert(
                    "value".into(),
                    KernelAttr::Tensor(self.consts[id as usize].clone()),
                );
                let v = vr(self.add(n), 0);
                self.top().const_hosts.insert(id, v);
                v
            }
        } else {
            let shape = self.shape_of(t)?;
            let mem = t.mem?;
            let stream = self.global(Global::Stream);
            let mut n = node(format_compact!("{name}/CopyD2H"), "CopyD2H");
            n.inputs = smallvec![stream, shape, mem];
            n.outputs = 1;
            n.attrs
                .insert("dtype".into(), KernelAttr::Str(t.meta.dtype.name().into()));
            n.control_inputs.extend(t.order);
            vr(self.add(n), 0)
        };
        t.host = Some(v);
        Some(v)
    }

    /// Records `mem` as allocated by the current level, written by `writer`.
    pub fn own(&mut self, mem: ValueRef, writer: Option<KernelNodeId>) {
        let level = self.top();
        if level.owned_at.contains_key(&mem) {
            return;
        }
        level.owned_at.insert(mem, level.owned.len());
        level.owned.push(Owned {
            mem,
            writer,
            kept: false,
        });
    }

    fn owned_mut(&mut self, mem: ValueRef) -> Option<&mut Owned> {
        let level = self.top();
        let i = *level.owned_at.get(&mem)?;
        level.owned.get_mut(i)
    }

    /// Whether `mem` is memory the current level allocated and still holds.
    pub fn holds(&mut self, mem: ValueRef) -> bool {
        self.owned_mut(mem).is_some_and(|o| !o.kept)
    }

    /// `mem` leaves the current level: it is not freed here.
    pub fn keep(&mut self, mem: ValueRef) {
        if let Some(o) = self.owned_mut(mem) {
            o.kept = true;
        }
    }

    /// Sets the launch that writes owned `mem`.
    pub fn set_writer(&mut self, mem: ValueRef, writer: KernelNodeId) {
        if let Some(o) = self.owned_mut(mem) {
            o.writer = Some(writer);
        }
    }

    /// A `FreeMemory` for each owned, not kept memory of the current level, ordered after
    /// every node that reads it and after the launch that writes it.
    fn emit_frees(&mut self) {
        let level = self.top();
        level.owned_at.clear();
        let owned: Vec<Owned> = level.owned.drain(..).filter(|o| !o.kept).collect();
        if owned.is_empty() {
            return;
        }
        let index: HashMap<ValueRef, usize> =
            owned.iter().enumerate().map(|(i, o)| (o.mem, i)).collect();
        let mut readers: Vec<Vec<KernelNodeId>> = vec![Vec::new(); owned.len()];
        for (j, n) in level.graph.nodes.iter().enumerate() {
            for v in &n.inputs {
                if let Some(&i) = index.get(v) {
                    let r = &mut readers[i];
                    if r.last() != Some(&KernelNodeId(j as u32)) {
                        r.push(KernelNodeId(j as u32));
                    }
                }
            }
        }
        for (o, mut after) in owned.into_iter().zip(readers) {
            if let Some(w) = o.writer
                && !after.contains(&w)
            {
                after.insert(0, w);
            }
            let producer = self.graph().node(o.mem.node).name.clone();
            let mut f = node(format_compact!("{producer}/FreeMemory"), "FreeMemory");
            f.inputs = smallvec![o.mem];
            // The producer itself is a data input, not an order.
            after.retain(|&r| r != o.mem.node);
            f.control_inputs = after.into();
            self.add(f);
        }
    }

    /// Closes Init (one `InnerNetOutput` of the exports) and builds DeInit, which frees
    /// the uploaded constants, destroys the events, notifies and allocator, then the
    /// streams.
    pub fn finish_init(&mut self) -> (KernelGraph, KernelGraph) {
        // The resources are always exported: DeInit releases them.
        for g in [
            Global::Stream,
            Global::Allocator,
            Global::Events,
            Global::Notifies,
        ] {
            self.export(&g);
        }
        let mut init = std::mem::take(&mut self.init);
        let mut out = node("exports", "InnerNetOutput");
        out.inputs = self.exports.as_slice().into();
        init.add(out);

        let mut de = KernelGraph::new("DeInit");
        // Two nodes per constant (read it, free it) and eight for the resources.
        de.nodes.reserve_exact(2 * self.export_of.len() + 8);
        let read = |de: &mut KernelGraph, name: String, index: u32| {
            let mut n = node(name, "InnerData");
            n.outputs = 1;
            n.attrs
                .insert("index".into(), KernelAttr::Int(index as i64));
            vr(de.add(n), 0)
        };
        let mut frees = Vec::new();
        for (g, &i) in &self.export_of {
            if let Global::ConstMem(id) = g {
                let v = read(&mut de, format!("const/{id}"), i);
                let mut f = node(format_compact!("const/{id}/FreeMemory"), "FreeMemory");
                f.inputs = smallvec![v];
                frees.push(de.add(f));
            }
        }
        let mut before_streams = Vec::new();
        for (g, name, kernel) in [
            (Global::Events, "events", "DestroyEvents"),
            (Global::Notifies, "notifies", "DestroyNotifies"),
        ] {
            let v = read(&mut de, name.into(), self.export_of[&g]);
            let mut d = node(kernel, kernel);
            d.inputs = smallvec![v];
            before_streams.push(de.add(d));
        }
        let a = read(
            &mut de,
            "allocator".into(),
            self.export_of[&Global::Allocator],
        );
        let mut da = node("DestroyAllocator", "DestroyAllocator");
        da.inputs = smallvec![a];
        da.control_inputs = frees.into();
        before_streams.push(de.add(da));
        let s = read(&mut de, "stream".into(), self.export_of[&Global::Stream]);
        let mut ds = node("DestroyStreams", "DestroyStreams");
        ds.inputs = smallvec![s];
        ds.control_inputs = before_streams.into();
        de.add(ds);
        (init, de)
    }
}

/// A dtype list attribute value: an element type per operand, `None` for an omitted
/// input. Typed, so the runtime reads it as it is and parses nothing at load.
pub fn dtype_list(metas: impl IntoIterator<Item = Option<DType>>) -> KernelAttr {
    KernelAttr::DTypes(metas.into_iter().collect())
}
