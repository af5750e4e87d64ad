//! `rt2 lower`: ComputeGraph -> ExecuteGraph, written as an `.exeg`, with a summary of
//! the three graphs and of the ops lowered as compiled kernels rt2 cannot compute.
//! `--model all` lowers every model of the file, one `.exeg` each, and sums them up in
//! one table with each model's relation to the root model.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::cmd::format::{ReportFormat, table};
use crate::cmd::input;
use crate::cmd::output;
use crate::cmd::progress::Progress;
use crate::cmd::status::Status;
use crate::exec::runtime::ops_without_compute;
use crate::exec::{ExecuteGraph, GraphKind, exeg};
use crate::lower::LowerOptions;
use crate::om::root_model::{Relation, relations};
use crate::ops::OpRegistry;

/// Which models `--model` lowers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelChoice {
    /// The model with this file index.
    One(usize),
    /// Every model of the file.
    All,
}

fn parse_model_choice(s: &str) -> Result<ModelChoice, String> {
    if s == "all" {
        return Ok(ModelChoice::All);
    }
    s.parse()
        .map(ModelChoice::One)
        .map_err(|_| format!("{s:?} is neither a model index nor `all`"))
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model file of any kind (OM, GE IR binary, GE text dump, GE JSON, ONNX), or an
    /// `.exeg` (binary or text form), which gets the passes it lacks and is written binary.
    pub file: PathBuf,
    /// Where to write the ExecuteGraph (`.exeg`).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Apply the multi-thread passes (SplitMixedLaunchMemory, RemoveLaunchFreeEdge), for
    /// the multi-thread executor: memory and launch kernels on their own workers, with
    /// exact (Free, Launch) relations instead of Launch-to-Free edges.
    #[arg(long)]
    pub multi_thread: bool,
    /// Keep constant MatMul, Gemm and Conv weights as the model stores them. By default a
    /// float32 MatMul (Gemm) by a constant matrix becomes a `MatMulPacked` (`GemmPacked`)
    /// on the weight packed into column panels once, here, which the kernel streams at
    /// every execution; a float32 3x3 Conv of stride 1 that the Winograd kernel takes
    /// becomes a `ConvWinograd` on its weights transformed once, here; float16 Conv and
    /// ConvTranspose weights are widened once.
    #[arg(long)]
    pub keep_weight_layout: bool,
    /// Plan the device memory of Main's static tensors here (the default): Init
    /// allocates one feature memory block and Main reads each tensor's place in it,
    /// instead of an AllocMemHbm and a FreeMemory per tensor per execution. Tensors that
    /// share bytes are kept in order by control edges. A Concat whose inputs lie one
    /// after another in its output (one image's channels) gets its inputs written in
    /// its place and launches nothing.
    #[arg(long, overrides_with = "no_static_memory")]
    pub static_memory: bool,
    /// Leave every Main tensor to an AllocMemHbm and a FreeMemory per execution, as GE's
    /// lowering writes them (no feature memory block).
    #[arg(long, overrides_with = "static_memory")]
    pub no_static_memory: bool,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
    /// Which model of a multi-model OM (0 is the root model), or `all`: every model, each
    /// written to OUTPUT with its index before the extension (x.exeg: x.0.exeg,
    /// x.1.exeg, ...), all or none of them.
    #[arg(long, default_value = "0", value_parser = parse_model_choice)]
    pub model: ModelChoice,
    /// Lower for inputs of these dims: NAME:D0,D1,... (`?` or -1 keeps the model's dim).
    /// Each dim the model leaves unknown takes the given one, so that the shapes it
    /// decides are inferred and their memory planned here, not per execution; the
    /// ExecuteGraph then runs inputs of those dims only. Repeatable; for one model.
    #[arg(long = "input-shape", value_name = "NAME:D0,D1,...", value_parser = input::parse_input_shape)]
    pub input_shape: Vec<(String, Vec<i64>)>,
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let progress = Progress::start(args.format == ReportFormat::Table);
    progress.step(format!("reading {}", args.file.display()));
    let opts = LowerOptions {
        multi_thread: args.multi_thread,
        keep_weight_layout: args.keep_weight_layout,
        static_memory: !args.no_static_memory,
    };
    let model = match args.model {
        ModelChoice::One(m) => m,
        ModelChoice::All if !args.input_shape.is_empty() => anyhow::bail!(
            "{}: --input-shape names one model's inputs; --model all lowers every model",
            args.file.display()
        ),
        ModelChoice::All => return run_all(&args, &opts, progress),
    };
    // An `.exeg` gets the passes not yet applied and is written in the binary form (a
    // text-form `.exeg` becomes a binary one).
    let (eg, file) = input::execute_graph(&args.file, model, &opts, &args.input_shape, &progress)?;
    // Released before the ExecuteGraph is encoded: the weights lowering replaced are
    // let go, rather than held beside the encoded file's copy of what replaced them.
    if let Some(file) = file {
        input::release(file);
    }
    progress.step(format!("writing {}", args.output.display()));
    let out = args.output.display().to_string();
    // The summary is made on a pool thread while this one encodes and writes the file
    // (both only read the ExecuteGraph; the encoder's buffers come from this thread's
    // heap, which holds what lowering freed); it is printed once the file is in place.
    let mut summary = Ok(String::new());
    let written = rayon::in_place_scope(|scope| {
        scope.spawn(|_| {
            summary = match args.format {
                ReportFormat::Json => serde_json::to_string_pretty(&summary_json(&eg, &out))
                    .map(|s| s + "\n")
                    .map_err(anyhow::Error::from),
                ReportFormat::Table => Ok(summary_table(&eg, &out)),
            }
        });
        write_exeg(&args.output, &eg)
    });
    written?;
    crate::timing::mark("wait for the summary");
    let summary = summary?;
    drop(progress);
    print!("{summary}");
    // The process ends right after: the ExecuteGraph is left to the OS, as the model is
    // (`input::release`), rather than freed node by node (80,000 nodes for a graph of
    // 10,000 ops).
    std::mem::forget(eg);
    Ok(Status::Success)
}

/// Encodes `eg` and writes it to `path`, its pieces as the encoder made them
/// (`exeg::encode_parts`), not copied into one buffer first.
fn write_exeg(path: &Path, eg: &ExecuteGraph) -> anyhow::Result<()> {
    crate::timing::mark("encode");
    let parts = exeg::encode_parts(eg);
    crate::timing::mark("write the file");
    output::write_atomic_parts(path, &parts)
}

/// `--model all`: every model lowered before anything is written, then one file each;
/// when a write fails, the files already written are removed again.
fn run_all(args: &Args, opts: &LowerOptions, progress: Progress) -> anyhow::Result<Status> {
    let path = &args.file;
    let file = match input::read_input(path, &Default::default())? {
        input::Input::Model(f) => f,
        input::Input::Exeg(_) => {
            anyhow::bail!("{}: --model all: an .exeg holds one model", path.display())
        }
    };
    let relations = relations(&file.models);
    let mut lowered = Vec::with_capacity(file.models.len());
    for m in &file.models {
        progress.step(format!("lowering model {}", m.index));
        let eg = input::lower_model(path, &file, m.index, opts)?;
        let out = numbered_output(&args.output, m.index)?;
        lowered.push((m, eg, out));
    }
    let mut written: Vec<&Path> = Vec::new();
    for (_, eg, out) in &lowered {
        progress.step(format!("writing {}", out.display()));
        if let Err(e) = write_exeg(out, eg) {
            for done in written {
                let _ = std::fs::remove_file(done);
            }
            return Err(e);
        }
        written.push(out);
    }
    drop(progress);
    let rows: Vec<ModelRow> = lowered
        .iter()
        .zip(&relations)
        .map(|((m, eg, out), relation)| ModelRow {
            index: m.index,
            name: &m.model.name,
            graph: &m.model.root.name,
            relation,
            compute_nodes: m.model.root.total_nodes(),
            eg,
            output: out.display().to_string(),
        })
        .collect();
    match args.format {
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&models_json(&rows))?),
        ReportFormat::Table => print!("{}", models_table(&rows)),
    }
    input::release(file);
    Ok(Status::Success)
}

/// `x.exeg` -> `x.<index>.exeg`; a name without an extension gets `.<index>` appended.
/// Standard output cannot take several files.
fn numbered_output(output: &Path, index: usize) -> anyhow::Result<PathBuf> {
    if output.as_os_str() == "-" || output.starts_with("/dev") || output.starts_with("/proc") {
        anyhow::bail!(
            "{}: --model all writes one file per model; give a file name",
            output.display()
        );
    }
    let stem = output.file_stem().unwrap_or_default().to_string_lossy();
    let name = match output.extension() {
        Some(ext) => format!("{stem}.{index}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{index}"),
    };
    Ok(output.with_file_name(name))
}

/// One lowered model of `--model all`.
struct ModelRow<'a> {
    index: usize,
    name: &'a str,
    graph: &'a str,
    relation: &'a Relation,
    compute_nodes: usize,
    eg: &'a ExecuteGraph,
    output: String,
}

fn relation_json(r: &Relation) -> serde_json::Value {
    match r {
        Relation::Root => json!({"kind": "root"}),
        Relation::Uncalled => json!({"kind": "uncalled"}),
        Relation::Submodel(sites) => json!({
            "kind": "submodel",
            "called_by": sites.iter().map(|s| json!({
                "model": s.model,
                "graph": s.graph,
                "node": s.node,
                "op_type": s.op_type,
                "inline": s.inline,
            })).collect::<Vec<_>>(),
        }),
    }
}

/// `{"models": [{"index", "name", "graph", "relation": {"kind": "root"|"submodel"|
/// "uncalled", "called_by": [{"model", "graph", "node", "op_type", "inline"}]},
/// "compute_nodes", "graphs", "no_compute", "output"}]}`, `graphs` and `no_compute` as
/// for one model.
fn models_json(rows: &[ModelRow]) -> serde_json::Value {
    let models: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let mut v = summary_json(r.eg, &r.output);
            if let Some(o) = v.as_object_mut() {
                o.insert("index".into(), json!(r.index));
                o.insert("name".into(), json!(r.name));
                o.insert("graph".into(), json!(r.graph));
                o.insert("relation".into(), relation_json(r.relation));
                o.insert("compute_nodes".into(), json!(r.compute_nodes));
            }
            v
        })
        .collect();
    json!({ "models": models })
}

/// One row per model: its graph, relation, node counts and the ops it cannot compute.
fn models_table(rows: &[ModelRow]) -> String {
    let mut t = table();
    t.set_header([
        "model",
        "graph",
        "relation",
        "compute nodes",
        "Init",
        "Main",
        "DeInit",
        "no compute",
        "output",
    ]);
    for r in rows {
        let missing: Vec<String> = without_compute(r.eg)
            .into_iter()
            .map(|(op, nodes)| format!("{op} x{}", nodes.len()))
            .collect();
        let mut row = vec![
            r.index.to_string(),
            r.graph.to_string(),
            r.relation.describe(),
            r.compute_nodes.to_string(),
        ];
        row.extend(
            GraphKind::ALL
                .iter()
                .map(|&k| r.eg.graph(k).total_nodes().to_string()),
        );
        row.push(missing.join(", "));
        row.push(r.output.clone());
        t.add_row(row);
    }
    format!("{} model(s) lowered\n{t}\n", rows.len())
}

fn graph_key(k: GraphKind) -> &'static str {
    match k {
        GraphKind::Init => "init",
        GraphKind::Main => "main",
        GraphKind::DeInit => "deinit",
    }
}

/// The ops lowered as compiled kernels rt2 cannot compute, by op type: their node names
/// in graph order.
fn without_compute(eg: &ExecuteGraph) -> BTreeMap<String, Vec<String>> {
    let mut by_type: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for op in ops_without_compute(eg, &OpRegistry::new()) {
        by_type.entry(op.op_type).or_default().push(op.node);
    }
    by_type
}

/// `{"graphs": {"init": {"nodes": N, "kernels": {TYPE: COUNT}}, ...}, "no_compute":
/// {OP_TYPE: [NODE, ...]}, "output": PATH}`; node counts include subgraphs; `no_compute`
/// holds the ops lowered as compiled kernels rt2 cannot compute (which `rt2 run` refuses).
pub fn summary_json(eg: &ExecuteGraph, output: &str) -> serde_json::Value {
    let mut graphs = serde_json::Map::new();
    for k in GraphKind::ALL {
        let g = eg.graph(k);
        graphs.insert(
            graph_key(k).into(),
            json!({"nodes": g.total_nodes(), "kernels": g.kernel_histogram()}),
        );
    }
    json!({"graphs": graphs, "no_compute": without_compute(eg), "output": output})
}

/// One row per kernel type, one count column per graph.
pub fn summary_table(eg: &ExecuteGraph, output: &str) -> String {
    let hist: Vec<BTreeMap<String, usize>> = GraphKind::ALL
        .iter()
        .map(|&k| eg.graph(k).kernel_histogram())
        .collect();
    let mut kernels: Vec<&String> = hist.iter().flat_map(|h| h.keys()).collect();
    kernels.sort_unstable();
    kernels.dedup();
    let mut t = table();
    t.set_header(["kernel", "Init", "Main", "DeInit"]);
    for k in kernels {
        let mut row = vec![k.clone()];
        row.extend(
            hist.iter()
                .map(|h| h.get(k).map(|c| c.to_string()).unwrap_or_default()),
        );
        t.add_row(row);
    }
    let mut total = vec!["nodes".to_string()];
    total.extend(
        GraphKind::ALL
            .iter()
            .map(|&k| eg.graph(k).total_nodes().to_string()),
    );
    t.add_row(total);
    let mut text = format!(
        "{}: Init, Main and DeInit{}\n{t}\n",
        output,
        if eg.multi_thread {
            " (multi-thread)"
        } else {
            ""
        }
    );
    let missing = without_compute(eg);
    if !missing.is_empty() {
        let count: usize = missing.values().map(Vec::len).sum();
        text.push_str(&format!(
            "{count} op(s) lowered as compiled kernels rt2 cannot compute (rt2 run refuses \
             them):\n"
        ));
        for (op_type, nodes) in &missing {
            text.push_str(&format!(
                "  {op_type} ({}): {}\n",
                nodes.len(),
                nodes.join(", ")
            ));
        }
    }
    text
}
