//! `rt2 lower`: ComputeGraph -> ExecuteGraph, written as an `.exeg`, with a summary of
//! the three graphs and of the ops lowered as compiled kernels rt2 cannot compute.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;

use crate::cmd::format::{ReportFormat, table};
use crate::cmd::input;
use crate::cmd::output;
use crate::cmd::progress::Progress;
use crate::cmd::status::Status;
use crate::exec::runtime::ops_without_compute;
use crate::exec::{ExecuteGraph, GraphKind, exeg};
use crate::lower::LowerOptions;
use crate::ops::OpRegistry;

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
    /// Keep constant MatMul weights as the model stores them. By default a float32
    /// MatMul by a constant matrix becomes a `MatMulPacked` on the weight packed into
    /// column panels once, here, which the kernel streams at every execution.
    #[arg(long)]
    pub keep_weight_layout: bool,
    /// Plan the device memory of Main's static tensors here: Init allocates one feature
    /// memory block and Main reads each tensor's place in it, instead of an AllocMemHbm
    /// and a FreeMemory per tensor per execution. Tensors that share bytes are kept in
    /// order by control edges.
    #[arg(long)]
    pub static_memory: bool,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
    /// Which model of a multi-model OM (0 is the root model).
    #[arg(long, default_value_t = 0)]
    pub model: usize,
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let progress = Progress::start(args.format == ReportFormat::Table);
    progress.step(format!("reading {}", args.file.display()));
    let opts = LowerOptions {
        multi_thread: args.multi_thread,
        keep_weight_layout: args.keep_weight_layout,
        static_memory: args.static_memory,
    };
    // An `.exeg` gets the passes not yet applied and is written in the binary form (a
    // text-form `.exeg` becomes a binary one).
    let (eg, file) = input::execute_graph(&args.file, args.model, &opts, &progress)?;
    progress.step(format!("writing {}", args.output.display()));
    output::write_atomic(&args.output, &exeg::encode(&eg))?;
    drop(progress);
    let out = args.output.display().to_string();
    match args.format {
        ReportFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&summary_json(&eg, &out))?
        ),
        ReportFormat::Table => print!("{}", summary_table(&eg, &out)),
    }
    if let Some(file) = file {
        input::release(file);
    }
    Ok(Status::Success)
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
