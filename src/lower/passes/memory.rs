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
}

/// One plannable tensor: its `AllocMemHbm`, its writer, its Free, the nodes that read
/// its memory, its size.
struct Tensor {
    alloc: usize,
    writer: usize,
    free: usize,
    readers: Vec<usize>,
    size: usize,
    offset: usize,
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
            writer: writers[k][0],
            free: frees[k][0],
            readers,
            size,
            offset: 0,
        })
        .collect();
    (tensors, export)
}

/// Plans Main's static tensors into one feature memory block (see the module docs);
/// Init, Main and DeInit are rewritten. Main must be in topological order; Init's new
/// nodes are appended after its exports node, so sort Init afterwards. A graph with
/// nothing to plan is left as it is.
pub fn plan(eg: &mut ExecuteGraph) -> Planned {
    let (mut tensors, export) = candidates(&eg.main);
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

    // Walk Main in order: a Free releases its offset to its size's list, an allocation
    // takes the latest one (or new space), and the writer of a reused offset is ordered
    // after everything that touched its last holder.
    let main = &mut eg.main;
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
        let writer = tensors[k].writer;
        // Everything that touched a last holder: its writer and readers (the nodes its
        // Free waited for, and any other reader of its memory). All of them come before
        // the Free, which comes before this allocation, so an edge from them to the
        // writer points forward; a place for which that fails to hold is not reused.
        let touched = |last: &Tensor| -> Option<Vec<KernelNodeId>> {
            let mut t: Vec<KernelNodeId> = main.nodes[last.free]
                .control_inputs
                .iter()
                .copied()
                .chain(last.readers.iter().map(|&r| KernelNodeId(r as u32)))
                .chain([KernelNodeId(last.writer as u32)])
                .filter(|c| c.index() != last.alloc && c.index() != writer)
                .collect();
            t.sort_unstable();
            t.dedup();
            t.iter().all(|c| c.index() < writer).then_some(t)
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
                let w = &mut main.nodes[writer];
                for c in touched {
                    if !w.control_inputs.contains(&c) {
                        w.control_inputs.push(c);
                        edges += 1;
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
    let tensors: Vec<Tensor> = tensors
        .into_iter()
        .zip(placed)
        .filter_map(|(t, p)| p.then_some(t))
        .collect();
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
    for (k, t) in tensors.iter().enumerate() {
        let name = &main.nodes[t.alloc].name;
        let mut view = exec_node(format_compact!("{name}/MemoryView"), "MemoryView");
        view.inputs = smallvec![block];
        view.outputs = 1;
        view.attrs
            .insert("offset".into(), KernelAttr::Int(t.offset as i64));
        view.attrs
            .insert("size".into(), KernelAttr::Int(t.size as i64));
        exported.push(ValueRef {
            node: eg.init.add(view),
            output: 0,
        });
        // Main: the allocation becomes a read of the view, bound once at load.
        let a = &mut main.nodes[t.alloc];
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

    // Main: the Frees go.
    let mut dead = vec![false; main.nodes.len()];
    for t in &tensors {
        dead[t.free] = true;
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

    Planned {
        tensors: tensors.len(),
        bytes: end,
        edges,
    }
}
