//! Engine cost: what the engines add per node, and what preparing the multi-thread
//! execution data costs.
//!
//! - `prepare mt data`: [`MtData::build`] for a synthetic Main of 100,000 nodes (50,000
//!   launches and 50,000 Frees, each half a chain of edges) with 1,000,000 exact (Free,
//!   Launch) relations, each Free related to 20 launches. `ordered`: every launch precedes
//!   its Free in the run order, so liveness is proven without a graph walk; `unordered`:
//!   the Frees come first, which takes the exact check (Kahn's algorithm over edges plus
//!   relations). Bytes are counted by a counting global
//!   allocator around mimalloc: bytes the built data keeps, and the peak above the
//!   starting point while building (temporaries included); the per-state counters a pool
//!   adds are reported beside them (capacities: `MtData::state_bytes`).
//! - `engine overhead`: 100,000 no-op kernels (one output each, reading their
//!   predecessors' outputs) run through `engine::run` on one state, per engine: a `chain`
//!   of Normal-class nodes, a `mixed chain` whose classes cycle memory, launch, normal (so
//!   every topo-mt step hands over to another thread: the worst case), and a `wide` random
//!   DAG (each node reads two random nodes among the 64 before it) with random classes.
//!
//! `cargo bench --bench engines`; besides criterion's report it prints ns per node and
//! the bytes.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::Criterion;

use rt2::exec::runtime::{
    Env, ExecutorType, KernelContext, KernelInfo, KernelRegistry, KernelResult, MtData, Plan,
    engine, prepare,
};
use rt2::exec::{KernelClass, KernelGraph, KernelNode, KernelNodeId, ValueRef};
use rt2::npu::device::{Device, DeviceConfig};
use rt2::ops::OpRegistry;

/// Counts live and peak heap bytes around the allocator the rt2 binary uses.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static INNER: mimalloc::MiMalloc = mimalloc::MiMalloc;

// SAFETY: every method forwards to mimalloc with the caller's arguments unchanged, so
// mimalloc's guarantees are this allocator's; the counters are plain atomics and never
// allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: `alloc`'s contract (a non-zero-sized layout) is the caller's.
        unsafe { INNER.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: the caller's `p` came from this allocator, that is from mimalloc, with
        // layout `l`.
        unsafe { INNER.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() {
            let live = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        } else {
            LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
        }
        // SAFETY: the caller's `p` came from mimalloc (through this allocator) with
        // layout `l`, and `new` meets `realloc`'s contract, as the caller ensures.
        unsafe { INNER.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const NODES: usize = 100_000;
const PER_FREE: usize = 20;

fn noop(_: &mut KernelContext<'_>) -> KernelResult {
    Ok(())
}

fn registry() -> KernelRegistry {
    let mut r = KernelRegistry::default();
    r.register("BenchMemory", KernelInfo::new(noop, KernelClass::Memory));
    r.register("BenchLaunch", KernelInfo::new(noop, KernelClass::Launch));
    r.register("BenchNormal", KernelInfo::new(noop, KernelClass::Normal));
    r
}

fn kernel(c: KernelClass) -> &'static str {
    match c {
        KernelClass::Memory => "BenchMemory",
        KernelClass::Launch => "BenchLaunch",
        KernelClass::Normal => "BenchNormal",
    }
}

/// A graph of `NODES` no-op nodes; node `i` has class `class(i)` and reads output 0 of
/// each of `preds(i)`.
fn graph(class: impl Fn(usize) -> KernelClass, preds: impl Fn(usize) -> Vec<usize>) -> KernelGraph {
    let mut g = KernelGraph::new("Main");
    for i in 0..NODES {
        let c = class(i);
        let mut n = KernelNode::new(format!("n{i}"), kernel(c), c);
        n.outputs = 1;
        n.inputs = preds(i)
            .into_iter()
            .map(|p| ValueRef {
                node: KernelNodeId(p as u32),
                output: 0,
            })
            .collect();
        g.add(n);
    }
    g
}

/// 50,000 launches and 50,000 Frees, each half a chain of edges (no edge between the
/// halves); Free `k` is related to launches `k .. k + 20` (modulo 50,000). `ordered`: the
/// launches come first in the run order; otherwise the Frees do (still live: no launch
/// depends on a Free, but proving it takes the graph walk).
fn relation_graph(ordered: bool) -> KernelGraph {
    let half = NODES / 2;
    let (launch0, free0) = if ordered { (0, half) } else { (half, 0) };
    let mut g = graph(
        |i| {
            // The launches are the first half when ordered, the second otherwise.
            if (i < half) == ordered {
                KernelClass::Launch
            } else {
                KernelClass::Memory
            }
        },
        |i| if i % half == 0 { vec![] } else { vec![i - 1] },
    );
    for k in 0..half {
        for j in 0..PER_FREE {
            let l = launch0 + (k + j) % half;
            g.free_launch
                .push((KernelNodeId((free0 + k) as u32), KernelNodeId(l as u32)));
        }
    }
    g
}

fn plan_of(g: &KernelGraph) -> Plan {
    prepare(g, "Main", &registry(), &OpRegistry::default()).unwrap()
}

fn bench_prepare(c: &mut Criterion) {
    for ordered in [true, false] {
        let plan = plan_of(&relation_graph(ordered));
        let label = if ordered { "ordered" } else { "unordered" };
        let before = LIVE.load(Ordering::SeqCst);
        PEAK.store(before, Ordering::SeqCst);
        let t = Instant::now();
        let data = MtData::build(&plan).unwrap();
        let first = t.elapsed();
        let kept = LIVE.load(Ordering::SeqCst) - before;
        let peak = PEAK.load(Ordering::SeqCst) - before;
        println!(
            "prepare mt data ({label}): {} nodes, {} relations: first build {:.3} ms; \
             keeps {kept} bytes (capacities {}), peak {peak} bytes while building; \
             a state's counters and queues add {} bytes",
            plan.node_count(),
            plan_relations(&plan),
            first.as_secs_f64() * 1e3,
            data.heap_bytes(),
            data.state_bytes(),
        );
        drop(data);
        c.bench_function(&format!("prepare mt data {label}"), |b| {
            b.iter(|| MtData::build(&plan).unwrap())
        });
    }
}

fn plan_relations(plan: &Plan) -> usize {
    (0..plan.node_count() as u32)
        .map(|f| plan.related_launches(f).len())
        .sum()
}

/// A small deterministic generator (xorshift), so every run measures the same graph.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn bench_engines(c: &mut Criterion) {
    use KernelClass::{Launch, Memory, Normal};
    let cycle = [Memory, Launch, Normal];
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let classes: Vec<KernelClass> = (0..NODES)
        .map(|_| cycle[(xorshift(&mut seed) % 3) as usize])
        .collect();
    let wide_preds: Vec<Vec<usize>> = (0..NODES)
        .map(|i| {
            if i == 0 {
                return vec![];
            }
            let mut p: Vec<usize> = (0..2)
                .map(|_| i - 1 - (xorshift(&mut seed) as usize % i.min(64)))
                .collect();
            p.dedup();
            p
        })
        .collect();
    let chain = |i: usize| if i == 0 { vec![] } else { vec![i - 1] };
    let graphs = [
        ("chain", graph(|_| Normal, chain)),
        ("mixed chain", graph(|i| cycle[i % 3], chain)),
        ("wide", graph(|i| classes[i], |i| wide_preds[i].clone())),
    ];
    let device = Device::new(DeviceConfig::default());
    let ops = Arc::new(OpRegistry::default());
    for (name, g) in &graphs {
        let plan = plan_of(g);
        for executor in ExecutorType::ALL {
            let env = Env {
                device: device.clone(),
                ops: ops.clone(),
                executor,
                subscriber: None,
                max_iterations: rt2::exec::runtime::context::DEFAULT_MAX_ITERATIONS,
            };
            let mut st = plan.new_state();
            engine::run(&env, &plan, &mut st).unwrap();
            // Best of a few runs for the printed number; criterion's own report beside.
            let best = (0..10)
                .map(|_| {
                    let t = Instant::now();
                    engine::run(&env, &plan, &mut st).unwrap();
                    t.elapsed()
                })
                .min()
                .unwrap_or(Duration::ZERO);
            println!(
                "engine overhead {name} {}: {:.1} ns per node",
                executor.name(),
                best.as_secs_f64() * 1e9 / NODES as f64
            );
            c.bench_function(&format!("engine {name} {}", executor.name()), |b| {
                b.iter(|| engine::run(&env, &plan, &mut st).unwrap())
            });
        }
    }
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench_prepare(&mut c);
    bench_engines(&mut c);
    c.final_summary();
}
