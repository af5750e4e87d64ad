//! `MtData::build`: the parallel build gives the same data as a one-range build, and the
//! data says what the relations say.

use proptest::prelude::*;

use super::*;
use crate::exec::runtime::{KernelContext, KernelInfo, KernelRegistry, KernelResult, prepare};
use crate::exec::{KernelGraph, KernelNode, KernelNodeId, ValueRef};
use crate::ops::OpRegistry;

fn noop(_: &mut KernelContext<'_>) -> KernelResult {
    Ok(())
}

fn registry() -> KernelRegistry {
    let mut r = KernelRegistry::default();
    r.register("TestMemory", KernelInfo::new(noop, KernelClass::Memory));
    r.register("TestLaunch", KernelInfo::new(noop, KernelClass::Launch));
    r
}

/// `launches` launches in a chain, then `frees` memory nodes in a chain; Free `k` is
/// related to the launches `rel[k]`.
fn plan(launches: usize, rel: &[Vec<usize>]) -> Plan {
    let mut g = KernelGraph::new("Main");
    let chain = |g: &mut KernelGraph, name: String, kernel: &'static str, class, prev: bool| {
        let mut n = KernelNode::new(name, kernel, class);
        n.outputs = 1;
        if prev {
            n.inputs.push(ValueRef {
                node: KernelNodeId(g.nodes.len() as u32 - 1),
                output: 0,
            });
        }
        g.add(n)
    };
    for i in 0..launches {
        chain(
            &mut g,
            format!("l{i}"),
            "TestLaunch",
            KernelClass::Launch,
            i > 0,
        );
    }
    for (k, ls) in rel.iter().enumerate() {
        let f = chain(
            &mut g,
            format!("f{k}"),
            "TestMemory",
            KernelClass::Memory,
            k > 0,
        );
        for &l in ls {
            g.free_launch.push((f, KernelNodeId(l as u32)));
        }
    }
    prepare(&g, "Main", &registry(), &OpRegistry::default()).unwrap()
}

/// The relations read back out of the data: (Free, launch) pairs by launch, then Free.
fn reversed(d: &MtData, n: usize) -> Vec<(u32, u32)> {
    (0..n as u32)
        .flat_map(|l| d.related_frees(l).iter().map(move |&f| (f, l)))
        .collect()
}

proptest! {
    #[test]
    fn parallel_build_equals_one_range_build(
        launches in 1usize..40,
        rel in prop::collection::vec(prop::collection::vec(0usize..40, 0..6), 1..40),
        ranges in 2usize..6,
    ) {
        let rel: Vec<Vec<usize>> = rel
            .into_iter()
            .map(|mut ls| {
                ls.iter_mut().for_each(|l| *l %= launches);
                ls.sort_unstable();
                ls.dedup();
                ls
            })
            .collect();
        let p = plan(launches, &rel);
        let one = MtData::build_in(&p, 1).unwrap();
        let many = MtData::build_in(&p, ranges).unwrap();
        prop_assert_eq!(&one.meta, &many.meta);
        prop_assert_eq!(&one.free_off, &many.free_off);
        prop_assert_eq!(&one.frees, &many.frees);
        prop_assert_eq!(&one.gated, &many.gated);
        // And both say what the relations say.
        let mut want: Vec<(u32, u32)> = rel
            .iter()
            .enumerate()
            .flat_map(|(k, ls)| ls.iter().map(move |&l| ((launches + k) as u32, l as u32)))
            .collect();
        want.sort_unstable_by_key(|&(f, l)| (l, f));
        prop_assert_eq!(reversed(&many, p.node_count()), want);
        let gated: Vec<u32> = (0..rel.len())
            .filter(|&k| !rel[k].is_empty())
            .map(|k| (launches + k) as u32)
            .collect();
        prop_assert_eq!(&many.gated[..], &gated[..]);
        for (i, &m) in many.meta.iter().enumerate() {
            let is_free = i >= launches && !rel[i - launches].is_empty();
            let is_launch = i < launches && rel.iter().any(|ls| ls.contains(&i));
            prop_assert_eq!(m & FREE_REL != 0, is_free, "node {}", i);
            prop_assert_eq!(m & LAUNCH_REL != 0, is_launch, "node {}", i);
        }
    }
}

#[test]
fn a_relation_to_a_memory_node_is_refused_naming_the_free_in_every_split() {
    // Free 0 (node 3) is related to node 4, another Free: not a launch.
    let p = plan(3, &[vec![0], vec![1]]);
    let mut bad = p.rel_launch.clone();
    bad[1] = 3;
    let p = Plan {
        rel_launch: bad,
        ..p
    };
    for ranges in 1..4 {
        let e = MtData::build_in(&p, ranges).unwrap_err().to_string();
        assert!(e.contains("f1"), "{e}");
        assert!(e.contains("is not a launch the engine runs"), "{e}");
    }
}
