//! Static memory planning: the device memory of Main's static tensors, placed once at
//! lowering instead of allocated and freed at every execution.
//!
//! Lowering gives every op output an `AllocMemHbm` before its launch and a `FreeMemory`
//! after its last reader, and the allocator serves them at run time. When the size is a
//! constant, that work is the same at every execution: this pass does it once, here, as
//! GE's memory assigner does for a static graph. Each planned tensor gets an offset in
//! one *feature memory* block that Init allocates; Init makes a view of the block per
//! tensor (`MemoryView`) and exports it; Main reads the view with an `InnerData`, which
//! the loader binds once, so the tensor costs Main no kernel call at all; DeInit frees
//! the block.
//!
//! **Which tensors.** An `AllocMemHbm(allocator)` of Main (not of a subgraph) with a
//! constant `size`, whose memory is written by exactly one op launch (any of
//! `kernel_types::OP_LAUNCHES`, as an output) and freed by exactly one `FreeMemory` in Main. Memory that leaves Main (a
//! model output, memory a loop takes over) has no Free there and keeps its allocation;
//! so do dynamic sizes.
//!
//! **Reuse.** The pass walks Main in its topological order as the allocator would at
//! run time: a Free puts its tensor's offset on the free list of its size, an
//! allocation takes the latest offset of its size, else new space at the end (the same
//! per-size reuse as the runtime's caching allocator, so the block is what that allocator
//! keeps for a sequential execution: per size, the most tensors of that size alive at
//! once). A tensor B that takes tensor A's offset must not be written while A is still
//! read: B's writer gets a control edge from every node that touched A (its writer and
//! readers, which are the Free's own predecessors). Every engine honours those edges, so
//! the plan holds under any order an engine picks; the edges only point forward in the
//! order walked (a place for which one would not is left unused).
//!
//! **Concats in place.** A Concat whose inputs lie one after another in its output (the
//! dims before its axis all 1: a channel concat of one image, a UNet's skip connection)
//! costs nothing once the inputs are placed there: each input's writer then writes its
//! share of the output, and the Concat's launch, a copy of every byte, goes (GE's
//! memory assigner does the same for its "no padding continuous input" Concats). Such a
//! Concat's output and inputs are planned as one tensor, alive from the first input's
//! allocation to the last Free of any of them; the readers that waited for the Concat
//! wait for the inputs' writers instead. It applies where every one of them is a
//! plannable tensor of the Concat's element type, none of them is an input or the output
//! of another Concat in place, no input is repeated, and every writer runs on the
//! Concat's stream.

use std::collections::HashMap;

use compact_str::format_compact;
use smallvec::smallvec;

use crate::exec::kernel_types::{exec_node, is_op_launch};
use crate::exec::{ExecuteGraph, KernelAttr, KernelGraph, KernelNodeId, ValueRef};

/// Offsets in the feature memory are multiples of this: every element type is aligned,
/// and so is every vector load of a kernel.
pub const ALIGN: usize = 64;

/// What [`plan`] placed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Planned {
    /// Tensors given an offset.
    pub tensors: usize,
    /// Bytes of the feature memory block.
    pub bytes: usize,
    /// Control edges added to keep reused memory in order.
    pub edges: usize,
    /// Concats whose inputs were placed in their output, their launches removed.
    pub concats: usize,
}

/// One plannable tensor (or a Concat in place with its inputs): where the walk places
/// and releases it, its parts, the launches that write it, the nodes that read it, its
/// size and, once placed, its offset.
struct Tensor {
    /// The first of its parts' `AllocMemHbm`s in Main's order: where it is placed.
    alloc: usize,
    /// The last of its parts' Frees in Main's order: where its place is released.
    free: usize,
    parts: Vec<Part>,
    writers: Vec<usize>,
    readers: Vec<usize>,
    size: usize,
    offset: usize,
}

/// One `AllocMemHbm` of a planned tensor: its Free, and its bytes' place in the tensor
/// (all of it but for a Concat's inputs).
#[derive(Debug, Clone, Copy)]
struct Part {
    alloc: usize,
    free: usize,
    at: usize,
    size: usize,
}

/// Where a launch's output pairs start: after the stream and a (shape, memory) pair per
/// present op input (`_in_dtypes`, `None` for an omitted input). `None` when the node's
/// inputs are not the pairs its dtype lists announce.
fn outputs_from(n: &crate::exec::KernelNode) -> Option<usize> {
    let count = |key: &str, present: bool| -> Option<usize> {
        let v = n.attrs.get(key)?.as_dtypes()?;
        Some(v.iter().filter(|d| !present || d.is_some()).count())
    };
    let (ins, outs) = (count("_in_dtypes", true)?, count("_out_dtypes", false)?);
    (n.inputs.len() == 1 + 2 * (ins + outs)).then_some(1 + 2 * ins)
}

/// Finds Main's plannable tensors, all from the allocator Main reads at one Init export.
fn candidates(main: &KernelGraph) -> (Vec<Tensor>, Option<u32>) {
    let n = main.nodes.len();
    // Per AllocMemHbm of one input: its node index, by position.
    let mut alloc_at = vec![u32::MAX; n];
    let mut found: Vec<(usize, usize)> = Vec::new();
    let mut export: Option<u32> = None;
    for (i, node) in main.nodes.iter().enumerate() {
        if node.kernel != "AllocMemHbm" || node.inputs.len() != 1 || node.outputs != 1 {
            continue;
        }
        let Some(size) = node
            .attr_int("size")
            .and_then(|s| usize::try_from(s).ok())
            .filter(|&s| s > 0)
        else {
            continue;
        };
        // The allocator: an InnerData of Init's exports, the same one for every tensor.
        let Some(src) = main.nodes.get(node.inputs[0].node.index()) else {
            continue;
        };
        let Some(index) = (src.kernel == "InnerData")
            .then(|| src.attr_int("index"))
            .flatten()
            .and_then(|x| u32::try_from(x).ok())
        else {
            continue;
        };
        if *export.get_or_insert(index) != index {
            continue;
        }
        alloc_at[i] = found.len() as u32;
        found.push((i, size));
    }
    // Each candidate's writers, Frees and readers.
    let mut writers: Vec<Vec<usize>> = vec![Vec::new(); found.len()];
    let mut frees: Vec<Vec<usize>> = vec![Vec::new(); found.len()];
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); found.len()];
    let mut bad = vec![false; found.len()];
    for (j, node) in main.nodes.iter().enumerate() {
        let launch = is_op_launch(&node.kernel);
        let out_from = if launch { outputs_from(node) } else { None };
        for (slot, v) in node.inputs.iter().enumerate() {
            let Some(&k) = alloc_at.get(v.node.index()).filter(|&&k| k != u32::MAX) else {
                continue;
            };
            let k = k as usize;
            match &*node.kernel {
                "FreeMemory" if node.inputs.len() == 1 => frees[k].push(j),
                _ if launch => match out_from {
                    Some(from) if slot >= from => writers[k].push(j),
                    Some(_) => readers[k].push(j),
                    None => bad[k] = true,
                },
                // Memory that leaves the graph stays allocated per execution.
                "NetOutput" | "FreeMemoryHoldAddr" => bad[k] = true,
                _ => readers[k].push(j),
            }
        }
    }
    let tensors = found
        .into_iter()
        .zip(readers)
        .enumerate()
        .filter(|&(k, _)| !bad[k] && writers[k].len() == 1 && frees[k].len() == 1)
        .map(|(k, ((alloc, size), readers))| Tensor {
            alloc,
            free: frees[k][0],
            parts: vec![Part {
                alloc,
                free: frees[k][0],
                at: 0,
                size,
            }],
            writers: writers[k].clone(),
            readers,
            size,
            offset: 0,
        })
        .collect();
    (tensors, export)
}

/// Merges each Concat that can run in place (see the module docs) with its inputs into
/// one tensor of its output's size, each input a part at its place in the output, and
/// takes the Concat's launch out of Main's order: whatever waited for it waits for what
/// it waited for and for its inputs' writers. Returns the tensors and the launches to
/// remove. `tensors` are [`candidates`], each of one part.
fn concats_in_place(main: &mut KernelGraph, tensors: Vec<Tensor>) -> (Vec<Tensor>, Vec<usize>) {
    let mut of_alloc = vec![usize::MAX; main.nodes.len()];
    for (k, t) in tensors.iter().enumerate() {
        of_alloc[t.alloc] = k;
    }
    let tensor_of = |v: &ValueRef| {
        of_alloc
            .get(v.node.index())
            .copied()
            .filter(|&k| k != usize::MAX)
    };
    let mut used = vec![false; tensors.len()];
    // Per Concat in place: its launch, its output, its inputs in order.
    let mut groups: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for (j, node) in main.nodes.iter().enumerate() {
        if !is_op_launch(&node.kernel)
            || node.outputs != 0
            || node.attrs.get("_op_type").and_then(|a| a.as_str()) != Some("Concat")
        {
            continue;
        }
        let Some(from) = outputs_from(node).filter(|&f| node.inputs.len() == f + 2) else {
            continue;
        };
        let dtypes = |key: &str| node.attrs.get(key).and_then(|a| a.as_dtypes());
        let (Some(ins), Some(&[Some(out)])) = (dtypes("_in_dtypes"), dtypes("_out_dtypes")) else {
            continue;
        };
        // The inputs lie one after another in the output when every dim before the axis
        // is 1 (the output's shape is a constant: its size is).
        let shape = main
            .nodes
            .get(node.inputs[from].node.index())
            .filter(|s| s.kernel == "Const")
            .and_then(|s| s.attrs.get("shape"))
            .and_then(|a| a.as_ints());
        let (Some(shape), Some(axis)) = (shape, node.attr_int("axis")) else {
            continue;
        };
        let rank = shape.len() as i64;
        let axis = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&axis) || shape[..axis as usize].iter().any(|&d| d != 1) {
            continue;
        }
        let Some(o) = tensor_of(&node.inputs[from + 1]).filter(|&o| !used[o]) else {
            continue;
        };
        if ins.iter().any(|&d| d != Some(out)) {
            continue;
        }
        let stream = node.inputs[0];
        let mut members = Vec::with_capacity(ins.len());
        for i in 0..ins.len() {
            let Some(k) = tensor_of(&node.inputs[2 + 2 * i]) else {
                break;
            };
            let t = &tensors[k];
            let on_stream = |w: &usize| main.nodes[*w].inputs.first() == Some(&stream);
            if used[k] || k == o || members.contains(&k) || !t.writers.iter().all(on_stream) {
                break;
            }
            members.push(k);
        }
        let size: usize = members.iter().map(|&k| tensors[k].size).sum();
        if members.len() != ins.len() || size != tensors[o].size || tensors[o].writers != [j] {
            continue;
        }
        used[o] = true;
        for &k in &members {
            used[k] = true;
        }
        groups.push((j, o, members));
    }
    if groups.is_empty() {
        return (tensors, Vec::new());
    }

    // Whatever waited for a Concat waits for its predecessors and its inputs' writers
    // (in Main's order, so a Concat among another's predecessors is replaced already).
    let mut launches = Vec::with_capacity(groups.len());
    for (j, _, members) in &groups {
        let mut before: Vec<KernelNodeId> = main.nodes[*j].control_inputs.to_vec();
        before.extend(
            members
                .iter()
                .flat_map(|&k| &tensors[k].writers)
                .map(|&w| KernelNodeId(w as u32)),
        );
        before.sort_unstable();
        before.dedup();
        let id = KernelNodeId(*j as u32);
        for n in &mut main.nodes {
            if let Some(at) = n.control_inputs.iter().position(|&c| c == id) {
                n.control_inputs.remove(at);
                for &b in &before {
                    if !n.control_inputs.contains(&b) {
                        n.control_inputs.push(b);
                    }
                }
            }
        }
        launches.push(*j);
    }

    let mut slots: Vec<Option<Tensor>> = tensors.into_iter().map(Some).collect();
    let mut merged = Vec::new();
    for (j, o, members) in groups {
        let mut t = slots[o].take().expect("a Concat's output is in one group");
        t.writers.clear();
        let mut at = 0;
        for k in members {
            let m = slots[k].take().expect("a Concat's input is in one group");
            t.alloc = t.alloc.min(m.alloc);
            t.free = t.free.max(m.free);
            t.parts.push(Part { at, ..m.parts[0] });
            at += m.size;
            t.writers.extend(m.writers);
            t.readers.extend(m.readers);
        }
        t.readers.retain(|&r| r != j);
        t.readers.sort_unstable();
        t.readers.dedup();
        t.writers.sort_unstable();
        t.writers.dedup();
        merged.push(t);
    }
    let mut tensors: Vec<Tensor> = slots.into_iter().flatten().chain(merged).collect();
    tensors.sort_by_key(|t| t.alloc);
    (tensors, launches)
}

/// Places `tensors` in the feature memory, walking Main in order: a Free releases its
/// tensor's offset to its size's list, an allocation takes the latest one (or new
/// space), and the writers of a reused offset are ordered after everything that touched
/// its last holder. Returns the tensors placed with their offsets, the block's size and
/// the control edges added.
fn place(main: &mut KernelGraph, mut tensors: Vec<Tensor>) -> (Vec<Tensor>, usize, usize) {
    // Per Main node, the tensor it allocates or frees.
    let mut by_alloc: Vec<Option<usize>> = vec![None; main.nodes.len()];
    let mut by_free: Vec<Option<usize>> = vec![None; main.nodes.len()];
    for (k, t) in tensors.iter().enumerate() {
        by_alloc[t.alloc] = Some(k);
        by_free[t.free] = Some(k);
    }
    let mut free_lists: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
    let mut placed = vec![false; tensors.len()];
    let mut end = 0usize;
    let mut edges = 0;
    for i in 0..main.nodes.len() {
        if let Some(k) = by_free[i]
            && placed[k]
        {
            let t = &tensors[k];
            free_lists
                .entry(t.size.next_multiple_of(ALIGN))
                .or_default()
                .push((t.offset, k));
        }
        let Some(k) = by_alloc[i] else {
            continue;
        };
        let rounded = tensors[k].size.next_multiple_of(ALIGN);
        let writers = &tensors[k].writers;
        // Everything that touched a last holder: its writers and readers (the nodes its
        // Free waited for, and any other reader of its memory). All of them come before
        // the Free, which comes before this allocation, so an edge from them to the
        // (first) writer points forward; a place for which that fails to hold is not
        // reused.
        let touched = |last: &Tensor| -> Option<Vec<KernelNodeId>> {
            let mut t: Vec<KernelNodeId> = main.nodes[last.free]
                .control_inputs
                .iter()
                .copied()
                .chain(last.readers.iter().map(|&r| KernelNodeId(r as u32)))
                .chain(last.writers.iter().map(|&w| KernelNodeId(w as u32)))
                .filter(|c| {
                    !last.parts.iter().any(|p| p.alloc == c.index())
                        && !writers.contains(&c.index())
                })
                .collect();
            t.sort_unstable();
            t.dedup();
            t.iter().all(|c| c.index() < writers[0]).then_some(t)
        };
        let reuse = free_lists.get_mut(&rounded).and_then(|list| {
            let &(offset, last) = list.last()?;
            let t = touched(&tensors[last])?;
            list.pop();
            Some((offset, t))
        });
        match reuse {
            Some((offset, touched)) => {
                tensors[k].offset = offset;
                for &w in &tensors[k].writers {
                    let w = &mut main.nodes[w];
                    for &c in &touched {
                        if !w.control_inputs.contains(&c) {
                            w.control_inputs.push(c);
                            edges += 1;
                        }
                    }
                }
            }
            // A block past the address space is not planned: the tensor keeps its
            // allocation.
            None => match end.checked_add(rounded) {
                Some(e) if e <= i64::MAX as usize => {
                    tensors[k].offset = end;
                    end = e;
                }
                _ => continue,
            },
        }
        placed[k] = true;
    }
    let tensors = tensors
        .into_iter()
        .zip(placed)
        .filter_map(|(t, p)| p.then_some(t))
        .collect();
    (tensors, end, edges)
}

/// Plans Main's static tensors into one feature memory block (see the module docs);
/// Init, Main and DeInit are rewritten. The three graphs must be in topological order,
/// and they stay in it: Init's exports node and DeInit's `DestroyAllocator`, which read
/// the nodes appended for them, are moved after those ([`super::topo::defer`]), as the
/// sort would move them. A graph with nothing to plan is left as it is.
pub fn plan(eg: &mut ExecuteGraph) -> Planned {
    let (tensors, export) = candidates(&eg.main);
    let Some(alloc_export) = export else {
        return Planned::default();
    };
    let Some(exports_node) = eg
        .init
        .nodes
        .iter()
        .position(|n| n.kernel == "InnerNetOutput")
    else {
        return Planned::default();
    };
    let Some(&init_allocator) = eg.init.nodes[exports_node]
        .inputs
        .get(alloc_export as usize)
    else {
        return Planned::default();
    };
    let Some(destroy) = eg
        .deinit
        .nodes
        .iter()
        .position(|n| n.kernel == "DestroyAllocator")
    else {
        return Planned::default();
    };
    if tensors.is_empty() {
        return Planned::default();
    }
    // Concats in place, where no placement can then pass the address space (the block
    // is at most every tensor's rounded size; a place past it would leave a Concat's
    // inputs unplanned with its launch gone).
    let total = tensors.iter().try_fold(0usize, |sum, t| {
        sum.checked_add(t.size.checked_next_multiple_of(ALIGN)?)
    });
    let (tensors, concats) = match total {
        Some(total) if total <= i64::MAX as usize => concats_in_place(&mut eg.main, tensors),
        _ => (tensors, Vec::new()),
    };

    let main = &mut eg.main;
    let (tensors, end, edges) = place(main, tensors);
    if tensors.is_empty() {
        return Planned::default();
    }

    // Init: the block and a view of it per tensor, all exported.
    let mut export_base = eg.init.nodes[exports_node].inputs.len() as u32;
    let mut block = exec_node("feature_memory", "AllocMemHbm");
    block.inputs = smallvec![init_allocator];
    block.outputs = 1;
    block
        .attrs
        .insert("size".into(), KernelAttr::Int(end as i64));
    let block = ValueRef {
        node: eg.init.add(block),
        output: 0,
    };
    let mut exported = vec![block];
    let block_export = export_base;
    export_base += 1;
    let parts = tensors
        .iter()
        .flat_map(|t| t.parts.iter().map(|p| (t.offset + p.at, p)));
    for (k, (offset, part)) in parts.enumerate() {
        let name = &main.nodes[part.alloc].name;
        let mut view = exec_node(format_compact!("{name}/MemoryView"), "MemoryView");
        view.inputs = smallvec![block];
        view.outputs = 1;
        view.attrs
            .insert("offset".into(), KernelAttr::Int(offset as i64));
        view.attrs
            .insert("size".into(), KernelAttr::Int(part.size as i64));
        exported.push(ValueRef {
            node: eg.init.add(view),
            output: 0,
        });
        // Main: the allocation becomes a read of the view, bound once at load.
        let a = &mut main.nodes[part.alloc];
        let mut read = exec_node(a.name.clone(), "InnerData");
        read.outputs = 1;
        read.origin = a.origin.take();
        read.attrs.insert(
            "index".into(),
            KernelAttr::Int((export_base + k as u32) as i64),
        );
        *a = read;
    }
    eg.init.nodes[exports_node].inputs.extend(exported);
    super::topo::defer(&mut eg.init, exports_node);

    // Main: the Frees and the Concats in place go.
    let mut dead = vec![false; main.nodes.len()];
    for p in tensors.iter().flat_map(|t| &t.parts) {
        dead[p.free] = true;
    }
    for &j in &concats {
        dead[j] = true;
    }
    super::remove_nodes(main, &dead);

    // DeInit: the block is freed before the allocator is destroyed.
    let mut read = exec_node("feature_memory", "InnerData");
    read.outputs = 1;
    read.attrs
        .insert("index".into(), KernelAttr::Int(block_export as i64));
    let read = eg.deinit.add(read);
    let mut free = exec_node("feature_memory/FreeMemory", "FreeMemory");
    free.inputs = smallvec![ValueRef {
        node: read,
        output: 0
    }];
    let free = eg.deinit.add(free);
    eg.deinit.nodes[destroy].control_inputs.push(free);
    super::topo::defer(&mut eg.deinit, destroy);

    Planned {
        tensors: tensors.iter().map(|t| t.parts.len()).sum(),
        bytes: end,
        edges,
        concats: concats.len(),
    }
}
