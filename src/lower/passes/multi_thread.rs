//! The two multi-thread passes, applied once each and in this order, only when lowering
//! for the multi-thread engine: [`split_mixed_launch_memory`] then
//! [`remove_launch_free_edge`].
//!
//! The multi-thread engine runs memory kernels on a memory worker and launch kernels on a
//! launch worker. A kernel that both changes memory state and submits device work would
//! pin the two together, so it is split; and a Free that waits on the launch that reads
//! its memory would make the memory worker wait on the launch worker for every node, so
//! that wait becomes an exact relation the allocator honours instead of an edge.
//!
//! Rules (GE's RT2 design, as rt2 implements them):
//! - **Split.** A `CopyH2D(host, stream, allocator)` (allocate device memory, copy a host
//!   tensor into it) becomes `CalcDeviceCopySizes(host) -> AllocMemHbm(allocator, size)
//!   -> ShareH2DCopyResult(memory, copy size) -> LaunchH2DCopy(host, result, copy size,
//!   stream)`. The
//!   Calc node keeps the tensor's size for the allocation and computes the real copy size;
//!   the Share node (memory worker) produces the device tensor that every former reader of
//!   the copy now reads; the Launch node has no output and only submits the copy. Every
//!   former reader of the copy is ordered after the copy launch by a control edge: a
//!   launch's device work needs the copied bytes, and so do readers of other classes (a
//!   data-dependent `LaunchKernelAllocOutputs` on the memory worker, an owner whose
//!   subgraphs launch on it); the copy's Free must not give the block back before the
//!   copy was submitted (its edge becomes an exact relation below, the Free qualifying
//!   through `ShareH2DCopyResult`).
//! - **Which Free qualifies** (each Free on its own): it is a `FreeMemory` (the device
//!   Free, which has a hold-address variant `FreeMemoryHoldAddr`), and the direct producer
//!   of the value it frees is registered Memory-class and on a device memory path
//!   (`AllocMemHbm` or `ShareH2DCopyResult`; host allocations do not qualify).
//! - **For each Launch** with control edges to qualifying Frees: first every Memory-class
//!   direct producer of the Launch's inputs is ordered before every one of those Frees
//!   (edges that exist already are not duplicated); then each exact `(Free, Launch)`
//!   relation is recorded for the owner graph, once; the Free becomes
//!   `FreeMemoryHoldAddr`; only then is the Launch-to-Free edge removed.
//! - Every other Free keeps its kernel type and all its edges. Relations never cross
//!   owner graphs: each subgraph is processed as its own owner.

use std::collections::BTreeSet;

use crate::exec::kernel_types::kernel_type;
use crate::exec::{KernelAttr, KernelClass, KernelGraph, KernelNode, KernelNodeId, ValueRef};
use compact_str::format_compact;
use smallvec::smallvec;

/// Splits every `CopyH2D` of `g` and its subgraphs; returns how many were split. The new
/// nodes are appended; run the topological sort afterwards.
pub fn split_mixed_launch_memory(g: &mut KernelGraph) -> usize {
    let mut count = 0;
    for n in &mut g.nodes {
        for s in &mut n.subgraphs {
            count += split_mixed_launch_memory(s);
        }
    }
    let copies: Vec<usize> = (0..g.nodes.len())
        .filter(|&i| g.nodes[i].kernel == "CopyH2D")
        .collect();
    for i in copies {
        split_one(g, i);
        count += 1;
    }
    count
}

fn class_of(kernel: &str) -> KernelClass {
    kernel_type(kernel).map(|k| k.class).unwrap_or_default()
}

fn split_one(g: &mut KernelGraph, i: usize) {
    let copy = g.nodes[i].clone();
    // CopyH2D reads (host tensor, stream, allocator).
    let host = copy.inputs.first().copied();
    let stream = copy.inputs.get(1).copied();
    let allocator = copy.inputs.get(2).copied();
    let base = copy.name.clone();
    // The Calc node takes the CopyH2D's place (same id), so nothing that ordered itself
    // after the copy through a control edge loses that order; it is re-targeted below.
    let mut calc = KernelNode::new(
        format_compact!("{base}/CalcDeviceCopySizes"),
        "CalcDeviceCopySizes",
        class_of("CalcDeviceCopySizes"),
    );
    calc.inputs = host.into_iter().collect();
    calc.outputs = 2; // allocation size, copy size
    calc.control_inputs = copy.control_inputs.clone();
    calc.attrs = copy.attrs.clone();
    calc.origin = copy.origin.clone();
    g.nodes[i] = calc;
    let calc_id = KernelNodeId(i as u32);

    let mut alloc = KernelNode::new(
        format_compact!("{base}/AllocMemHbm"),
        "AllocMemHbm",
        class_of("AllocMemHbm"),
    );
    alloc.inputs = allocator
        .into_iter()
        .chain([ValueRef {
            node: calc_id,
            output: 0,
        }])
        .collect();
    alloc.outputs = 1;
    alloc.origin = copy.origin.clone();
    let alloc_id = g.add(alloc);

    let mut share = KernelNode::new(
        format_compact!("{base}/ShareH2DCopyResult"),
        "ShareH2DCopyResult",
        class_of("ShareH2DCopyResult"),
    );
    share.inputs = smallvec![
        ValueRef {
            node: alloc_id,
            output: 0,
        },
        ValueRef {
            node: calc_id,
            output: 1,
        },
    ];
    share.outputs = 1;
    share.origin = copy.origin.clone();
    let share_id = g.add(share);

    let mut launch = KernelNode::new(
        format_compact!("{base}/LaunchH2DCopy"),
        "LaunchH2DCopy",
        class_of("LaunchH2DCopy"),
    );
    launch.inputs = host
        .into_iter()
        .chain([
            ValueRef {
                node: share_id,
                output: 0,
            },
            ValueRef {
                node: calc_id,
                output: 1,
            },
        ])
        .chain(stream)
        .collect();
    launch.outputs = 0;
    launch
        .attrs
        .insert("split_from".into(), KernelAttr::Str(base.into()));
    launch.origin = copy.origin;
    let launch_id = g.add(launch);

    // Former readers of the copy read the shared result and wait for the copy's
    // submission (see the module doc: every reader needs it, not only launches).
    let own = [calc_id, alloc_id, share_id, launch_id];
    for (j, n) in g.nodes.iter_mut().enumerate() {
        if own.contains(&KernelNodeId(j as u32)) {
            continue;
        }
        let mut reads = false;
        for v in &mut n.inputs {
            if v.node == calc_id {
                *v = ValueRef {
                    node: share_id,
                    output: v.output,
                };
                reads = true;
            }
        }
        for c in &mut n.control_inputs {
            if *c == calc_id {
                *c = launch_id;
            }
        }
        if reads && !n.control_inputs.contains(&launch_id) {
            n.control_inputs.push(launch_id);
        }
    }
}

/// Whether the Free at `f` qualifies (see the module doc).
pub fn free_qualifies(g: &KernelGraph, f: KernelNodeId) -> bool {
    let free = g.node(f);
    if free.kernel != "FreeMemory" {
        return false;
    }
    let Some(v) = free.inputs.first() else {
        return false;
    };
    let Some(producer) = g.nodes.get(v.node.index()) else {
        return false;
    };
    producer.class == KernelClass::Memory
        && matches!(
            producer.kernel.as_ref(),
            "AllocMemHbm" | "ShareH2DCopyResult"
        )
}

/// Turns qualifying Launch-to-Free edges of `g` and its subgraphs into exact relations;
/// returns how many relations were recorded.
pub fn remove_launch_free_edge(g: &mut KernelGraph) -> usize {
    let mut count = 0;
    for n in &mut g.nodes {
        for s in &mut n.subgraphs {
            count += remove_launch_free_edge(s);
        }
    }
    let len = g.nodes.len();
    // Launch -> the qualifying Frees it has an edge to, decided before anything changes so
    // that each Free is judged on the graph as lowering made it.
    let mut frees_of: Vec<Vec<KernelNodeId>> = vec![Vec::new(); len];
    for f in 0..len {
        let fid = KernelNodeId(f as u32);
        if !free_qualifies(g, fid) {
            continue;
        }
        for &l in &g.nodes[f].control_inputs {
            if g.nodes
                .get(l.index())
                .is_some_and(|n| n.class == KernelClass::Launch)
            {
                frees_of[l.index()].push(fid);
            }
        }
    }
    let mut relations: BTreeSet<(KernelNodeId, KernelNodeId)> =
        g.free_launch.iter().copied().collect();
    for (l, frees) in frees_of.into_iter().enumerate() {
        if frees.is_empty() {
            continue;
        }
        let lid = KernelNodeId(l as u32);
        let producers: BTreeSet<KernelNodeId> = g.nodes[l]
            .inputs
            .iter()
            .map(|v| v.node)
            .filter(|p| {
                g.nodes
                    .get(p.index())
                    .is_some_and(|n| n.class == KernelClass::Memory)
            })
            .collect();
        for &f in &frees {
            for &p in &producers {
                if p == f {
                    continue;
                }
                let free = &mut g.nodes[f.index()];
                let ordered =
                    free.control_inputs.contains(&p) || free.inputs.iter().any(|v| v.node == p);
                if !ordered {
                    free.control_inputs.push(p);
                }
            }
        }
        for &f in &frees {
            relations.insert((f, lid));
            let free = &mut g.nodes[f.index()];
            free.kernel = "FreeMemoryHoldAddr".into();
            free.class = class_of("FreeMemoryHoldAddr");
            free.control_inputs.retain(|c| *c != lid);
            count += 1;
        }
    }
    g.free_launch = relations.into_iter().collect();
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::passes::test_node as node;

    /// One lowered compute node: shape, size, alloc, launch reading `x` and the alloc, and
    /// the Free of the alloc ordered after the launch.
    fn lowered() -> KernelGraph {
        let mut g = KernelGraph::new("Main");
        g.add(node("x", "Data", &[], &[])); // 0
        g.add(node("size", "CalcTensorSizeFromShape", &[0], &[])); // 1
        g.add(node("alloc", "AllocMemHbm", &[1], &[])); // 2
        let mut launch = node("launch", "LaunchKernelWithHandle", &[0, 2], &[]);
        launch.outputs = 0;
        g.add(launch); // 3
        g.add(node("free", "FreeMemory", &[2], &[3])); // 4
        g
    }

    #[test]
    fn a_qualifying_free_becomes_a_relation() {
        let mut g = lowered();
        assert_eq!(remove_launch_free_edge(&mut g), 1);
        let free = &g.nodes[4];
        assert_eq!(free.kernel, "FreeMemoryHoldAddr");
        assert_eq!(free.class, KernelClass::Memory);
        // The Launch's memory-class producer is `alloc`, already an input of the Free: no
        // duplicate edge; the Launch edge is gone.
        assert!(free.control_inputs.is_empty(), "{:?}", free.control_inputs);
        assert_eq!(g.free_launch, vec![(KernelNodeId(4), KernelNodeId(3))]);
        assert_eq!(
            remove_launch_free_edge(&mut g),
            0,
            "applied once, nothing more qualifies"
        );
        assert_eq!(g.free_launch.len(), 1, "relations are not duplicated");
    }

    #[test]
    fn producers_are_ordered_before_the_free() {
        let mut g = lowered();
        // A second memory-class producer the launch reads (a workspace).
        g.add(node("ws", "AllocMemHbm", &[1], &[])); // 5
        g.nodes[3].inputs.push(ValueRef {
            node: KernelNodeId(5),
            output: 0,
        });
        remove_launch_free_edge(&mut g);
        assert_eq!(g.nodes[4].control_inputs[..], [KernelNodeId(5)]);
    }

    #[test]
    fn frees_that_do_not_qualify_keep_everything() {
        // A host allocation.
        let mut g = lowered();
        g.nodes[2].kernel = "AllocMemHost".into();
        assert_eq!(remove_launch_free_edge(&mut g), 0);
        assert_eq!(g.nodes[4].kernel, "FreeMemory");
        assert_eq!(g.nodes[4].control_inputs[..], [KernelNodeId(3)]);
        // A producer that is not memory-class.
        let mut g = lowered();
        g.nodes[2].class = KernelClass::Normal;
        assert_eq!(remove_launch_free_edge(&mut g), 0);
        // A Free that is not a device FreeMemory.
        let mut g = lowered();
        g.nodes[4].kernel = "FreeMemoryHoldAddr".into();
        assert_eq!(remove_launch_free_edge(&mut g), 0);
        assert_eq!(g.nodes[4].control_inputs[..], [KernelNodeId(3)]);
        // A control edge from something that does not launch stays.
        let mut g = lowered();
        g.nodes[4].control_inputs = vec![KernelNodeId(1)].into();
        assert_eq!(remove_launch_free_edge(&mut g), 0);
        assert_eq!(g.nodes[4].control_inputs[..], [KernelNodeId(1)]);
    }

    #[test]
    fn relations_stay_in_their_owner_graph() {
        let mut g = KernelGraph::new("Main");
        g.add(node("cond", "Data", &[], &[]));
        let mut iff = node("if", "If", &[0], &[]);
        iff.subgraphs = vec![lowered(), KernelGraph::new("else")];
        g.add(iff);
        assert_eq!(remove_launch_free_edge(&mut g), 1);
        assert!(g.free_launch.is_empty());
        assert_eq!(
            g.nodes[1].subgraphs[0].free_launch,
            vec![(KernelNodeId(4), KernelNodeId(3))]
        );
    }

    #[test]
    fn copy_h2d_is_split_and_readers_follow_the_launch() {
        let mut g = KernelGraph::new("Init");
        g.add(node("w", "Const", &[], &[])); // 0
        g.add(node("upload", "CopyH2D", &[0], &[])); // 1
        let mut launch = node("conv", "LaunchKernelWithHandle", &[1], &[]);
        launch.outputs = 0;
        g.add(launch); // 2
        g.add(node("later", "InferShape", &[], &[1])); // 3: ordered after the copy
        assert_eq!(split_mixed_launch_memory(&mut g), 1);
        let kernels: Vec<&str> = g.nodes.iter().map(|n| n.kernel.as_ref()).collect();
        assert_eq!(
            kernels,
            [
                "Const",
                "CalcDeviceCopySizes",
                "LaunchKernelWithHandle",
                "InferShape",
                "AllocMemHbm",
                "ShareH2DCopyResult",
                "LaunchH2DCopy"
            ]
        );
        // The launch reads the shared result and waits for the copy's submission.
        assert_eq!(
            g.nodes[2].inputs.as_slice(),
            [ValueRef {
                node: KernelNodeId(5),
                output: 0
            }]
        );
        assert_eq!(g.nodes[2].control_inputs[..], [KernelNodeId(6)]);
        // A control edge to the copy now points at its launch.
        assert_eq!(g.nodes[3].control_inputs[..], [KernelNodeId(6)]);
        assert_eq!(g.nodes[6].outputs, 0);
        assert_eq!(g.nodes[6].class, KernelClass::Launch);
        crate::lower::passes::topo::sort(&mut g).unwrap();
        // And a Free of the shared result qualifies afterwards.
        let share = g
            .nodes
            .iter()
            .position(|n| n.kernel == "ShareH2DCopyResult")
            .unwrap() as u32;
        let conv = g.nodes.iter().position(|n| n.name == "conv").unwrap() as u32;
        let f = g.add(node("free", "FreeMemory", &[share], &[conv]));
        assert!(free_qualifies(&g, f));
    }

    #[test]
    fn every_reader_of_a_copy_follows_its_launch() {
        let mut g = KernelGraph::new("Main");
        g.add(node("x", "Data", &[], &[])); // 0
        g.add(node("upload", "CopyH2D", &[0], &[])); // 1
        // A data-dependent op: a memory kernel that reads the copied bytes.
        g.add(node("nonzero", "LaunchKernelAllocOutputs", &[1], &[])); // 2
        g.add(node("free", "FreeMemory", &[1], &[2])); // 3
        split_mixed_launch_memory(&mut g);
        let launch = KernelNodeId(
            g.nodes
                .iter()
                .position(|n| n.kernel == "LaunchH2DCopy")
                .unwrap() as u32,
        );
        for k in [2, 3] {
            assert!(g.nodes[k].control_inputs.contains(&launch), "{k}");
        }
        // The Free's wait for the copy becomes an exact relation.
        assert_eq!(remove_launch_free_edge(&mut g), 1);
        assert_eq!(g.free_launch, vec![(KernelNodeId(3), launch)]);
        assert_eq!(g.nodes[3].kernel, "FreeMemoryHoldAddr");
    }
}
