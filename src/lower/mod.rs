//! Lowering: ComputeGraph -> ExecuteGraph, and the passes over ExecuteGraphs.
//!
//! [`lower`] runs GE's `ConvertComputeGraphToExecuteGraph` steps:
//! 1. the root graph is converted node by node ([`convert`]) into Main, with subgraphs for
//!    control flow; whatever Main needs once per model (streams, the allocator, uploaded
//!    constants, infer functions) is created in Init and exported ([`builder`]); DeInit
//!    releases it;
//! 2. every unsupported op is collected and reported at once;
//! 3. passes, each followed by the verifier in tests and debug builds: constant folding,
//!    dead-node elimination, topological sort, priorities; with `multi_thread`, then
//!    SplitMixedLaunchMemory and RemoveLaunchFreeEdge on Main, and the sort and
//!    priorities again.
//!
//! Architecture invariants: `lower` is pure and deterministic (same input, byte-identical
//! output: no hash-map iteration reaches the output); it uses `om`'s ComputeGraph,
//! `exec`'s graph types and `npu`'s op registry, and never `capture` or `cmd`.

use crate::exec::{ExecuteGraph, KernelGraph, ModelIo, Resources, check::check};
use crate::om::ComputeModel;
use crate::om::summary::graph_outputs;
use crate::ops::OpRegistry;

pub mod annotate;
pub mod attrs;
pub mod builder;
pub mod const_eval;
pub mod control;
pub mod convert;
pub mod error;
pub mod fuse;
pub mod layout;
pub mod passes;

pub use annotate::annotate;
pub use error::{LowerError, Unsupported};

use convert::{Bind, Lowering};

/// What `lower` is asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct LowerOptions {
    /// Apply the multi-thread passes (SplitMixedLaunchMemory, RemoveLaunchFreeEdge).
    pub multi_thread: bool,
    /// Keep constant MatMul, Gemm and Conv weights as the model stores them: every
    /// MatMul, Gemm and Conv stays as it is, instead of a `MatMulPacked` or `GemmPacked`
    /// on the weight packed into column panels, or a `ConvWinograd` on the weights
    /// transformed for Winograd's F(2x2, 3x3) or F(4x4, 3x3).
    pub keep_weight_layout: bool,
    /// Plan the device memory of Main's static tensors at lowering
    /// ([`passes::memory`]): one feature memory block from Init instead of an
    /// allocation and a free per tensor per execution.
    pub static_memory: bool,
}

/// Lowers `model` with the full op library.
pub fn lower(model: &ComputeModel, opts: &LowerOptions) -> Result<ExecuteGraph, LowerError> {
    lower_with(&OpRegistry::new(), model, opts)
}

/// Lowers `model` with the ops of `reg`.
pub fn lower_with(
    reg: &OpRegistry,
    model: &ComputeModel,
    opts: &LowerOptions,
) -> Result<ExecuteGraph, LowerError> {
    lower_inner(reg, model, opts, Vec::new())
}

/// Lowers `model` for inputs of the given dims, by input name: an input's unknown dims
/// (or unknown rank) become the given ones, so that every shape they decide is known at
/// lowering, as `rt2 compile --input-shape` fixes them in the model. Main then infers
/// no shape and plans their memory; the graph runs inputs of those shapes only (its
/// [`ExecuteGraph::inputs`] say so). A given -1 keeps the input's dim; a given shape
/// that contradicts the input's known dims or rank leaves the input as it is, as does a
/// name no input has.
pub fn lower_specialized(
    model: &ComputeModel,
    opts: &LowerOptions,
    inputs: &[(String, Vec<i64>)],
) -> Result<ExecuteGraph, LowerError> {
    lower_inner(&OpRegistry::new(), model, opts, inputs.to_vec())
}

fn lower_inner(
    reg: &OpRegistry,
    model: &ComputeModel,
    opts: &LowerOptions,
    fixed_inputs: Vec<(String, Vec<i64>)>,
) -> Result<ExecuteGraph, LowerError> {
    crate::timing::mark("layouts");
    // Ascend storage formats become the layouts the ops mean (layout.rs).
    let origin = layout::to_origin(model)?;
    crate::timing::mark("fusion");
    // Activations spelled as several elementwise ops become one op (fuse.rs).
    let fused = fuse::activations(origin.as_ref());
    let model = fused.as_ref();
    let root = &model.root;
    let mut lw = Lowering::new(reg);
    lw.pack_weights = !opts.keep_weight_layout;
    lw.fixed_inputs = fixed_inputs;
    // A static node lowers to about three kernel calls (allocation, launch, free).
    lw.b.reserve(3 * root.nodes.len() + 16);
    crate::timing::mark("node conversion");
    let outs = lw.graph(root, &root.name, &mut Bind::Root)?;
    if !lw.unsupported.is_empty() {
        return Err(LowerError::Unsupported(lw.unsupported));
    }
    let mut outs: Vec<_> = outs.into_iter().flatten().collect();
    let out_metas: Vec<_> = outs.iter().map(|t| t.meta.clone()).collect();
    let pairs = lw.hand_out("NetOutput", &mut outs);
    lw.output_node("NetOutput", pairs, &outs);
    crate::timing::mark("graph assembly");
    let main = lw.b.finish_main();
    let (init, deinit) = lw.b.finish_init();

    let names = graph_outputs(root);
    let io = |name: String, m: &crate::ops::TensorMeta, weight: bool| ModelIo {
        name,
        dtype: Some(m.dtype),
        shape: m.shape.clone().unwrap_or_else(|| vec![-2]),
        weight,
    };
    lw.root_inputs.sort_by_key(|i| i.index);
    let mut eg = ExecuteGraph {
        name: if model.name.is_empty() {
            root.name.clone()
        } else {
            model.name.clone()
        },
        init,
        main,
        deinit,
        resources: Resources {
            streams: 1,
            events: 0,
            notifies: 0,
        },
        inputs: lw
            .root_inputs
            .iter()
            .map(|i| io(i.name.clone(), &i.meta, i.weight))
            .collect(),
        outputs: out_metas
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let name = names
                    .get(i)
                    .map(|s| s.name.clone())
                    .unwrap_or_else(|| format!("output{i}"));
                io(name, m, false)
            })
            .collect(),
        multi_thread: false,
    };
    verify(&eg, "conversion")?;
    run_passes(&mut eg, opts)?;
    Ok(eg)
}

/// The verifier after a pass, in tests and debug builds.
fn verify(eg: &ExecuteGraph, pass: &'static str) -> Result<(), LowerError> {
    if cfg!(debug_assertions) {
        let problems = check(eg);
        if !problems.is_empty() {
            return Err(LowerError::Internal { pass, problems });
        }
    }
    Ok(())
}

/// Runs the pass `f` on Init, Main and DeInit, at once on two threads: a pass reads and
/// changes only the graph it is given, and a large model's graphs take milliseconds
/// each. Main stays on this thread, whose allocator heap holds what lowering freed (on a
/// pool thread its temporaries would take fresh pages). The first error in that order
/// is the one returned, as one after the other.
fn each_graph(
    eg: &mut ExecuteGraph,
    f: impl Fn(&mut KernelGraph) -> Result<(), LowerError> + Sync,
) -> Result<(), LowerError> {
    let ExecuteGraph {
        init, main, deinit, ..
    } = eg;
    let mut rest = (Ok(()), Ok(()));
    let main = rayon::in_place_scope(|scope| {
        scope.spawn(|_| rest = (f(init), f(deinit)));
        f(main)
    });
    rest.0.and(main).and(rest.1)
}

fn sort(g: &mut KernelGraph) -> Result<(), LowerError> {
    passes::topo::sort(g).map_err(|e| LowerError::Graph {
        graph: e.graph.clone(),
        message: e.to_string(),
    })
}

/// The offline passes in GE's order.
fn run_passes(eg: &mut ExecuteGraph, opts: &LowerOptions) -> Result<(), LowerError> {
    crate::timing::mark("constant folding");
    each_graph(eg, |g| {
        passes::const_fold::fold_constants(g);
        Ok(())
    })?;
    verify(eg, "constant folding")?;
    crate::timing::mark("dead-node elimination");
    each_graph(eg, |g| {
        passes::dce::eliminate(g);
        Ok(())
    })?;
    verify(eg, "dead-node elimination")?;
    crate::timing::mark("topological sort");
    each_graph(eg, sort)?;
    verify(eg, "topological sort")?;
    crate::timing::mark("priorities");
    each_graph(eg, |g| {
        passes::priority::assign(g);
        Ok(())
    })?;
    verify(eg, "priority")?;
    if opts.static_memory {
        static_memory_pass(eg)?;
    }
    if opts.multi_thread {
        multi_thread_passes(eg)?;
    }
    Ok(())
}

/// Static memory planning ([`passes::memory`]), then the sort of the three graphs, the
/// priorities and the verifier. Planning a graph planned already finds nothing more to
/// plan. Public so an `.exeg` lowered without it can get it later
/// (`rt2 lower x.exeg --static-memory`).
pub fn static_memory_pass(eg: &mut ExecuteGraph) -> Result<passes::memory::Planned, LowerError> {
    crate::timing::mark("static memory planning");
    let planned = passes::memory::plan(eg);
    if planned.tensors > 0 {
        crate::timing::mark("sort and priorities after planning");
        each_graph(eg, sort)?;
        each_graph(eg, |g| {
            passes::priority::assign(g);
            Ok(())
        })?;
        verify(eg, "static memory planning")?;
    }
    Ok(planned)
}

/// The two multi-thread passes on Main, once: SplitMixedLaunchMemory, then
/// RemoveLaunchFreeEdge, each followed by the sort, the priorities and the verifier. A
/// graph that had them already is left as it is. Public so an `.exeg` lowered without
/// them can get them later (`rt2 lower x.exeg --multi-thread`).
pub fn multi_thread_passes(eg: &mut ExecuteGraph) -> Result<(), LowerError> {
    if eg.multi_thread {
        return Ok(());
    }
    crate::timing::mark("multi-thread passes");
    passes::multi_thread::split_mixed_launch_memory(&mut eg.main);
    sort(&mut eg.main)?;
    verify(eg, "SplitMixedLaunchMemory")?;
    passes::multi_thread::remove_launch_free_edge(&mut eg.main);
    sort(&mut eg.main)?;
    passes::priority::assign(&mut eg.main);
    eg.multi_thread = true;
    verify(eg, "RemoveLaunchFreeEdge")
}
