//! `rt2 dump`: a view of a model's ComputeGraph, or of an ExecuteGraph, as Graphviz DOT,
//! JSON, or text (GE text dump / `.exeg` text form).
//!
//! The filters for large graphs (`--subgraph`, `--owner`, `--around`/`--depth`,
//! `--max-nodes`) are the views' own (`om::filter`, `exec::view::filter`); this file checks
//! the flags, hands them over and writes the result.

use std::path::PathBuf;

use anyhow::{Context, bail};

use crate::cmd::input::{self, Input};
use crate::cmd::output;
use crate::cmd::progress::Progress;
use crate::cmd::status::Status;
use crate::exec::ExecuteGraph;
use crate::exec::view::{self, GraphSelect};
use crate::om::file::ReadOptions;
use crate::om::{dot, filter, ir, json, text};

/// Which view suits which size, for `rt2 dump --help`.
const SIZES: &str = "\
Sizes: Graphviz lays out a whole-graph DOT in seconds up to a few hundred nodes; the
ExecuteGraph of a model has several nodes per compute node. Beyond that, narrow the view:
  --max-nodes 200          fold runs of nodes into summary boxes (count, op/kernel types)
  --around NODE --depth 2  only the nodes within 2 edges of NODE, with cut markers
                           (a node feeding more than 8 is reached, not walked through)
  --subgraph NAME          one (sub)graph
  --owner NODE             the subgraphs of one control-flow node
The filters combine (scope, then neighbourhood, then folding) and apply to DOT and JSON
alike; JSON of any size is fine for scripts. --format pbtxt always writes the whole model.";

#[derive(Debug, clap::Args)]
#[command(after_help = SIZES)]
pub struct Args {
    /// Model file of any kind (OM, GE IR binary, GE text dump, GE JSON, ONNX) or `.exeg`.
    pub file: PathBuf,
    /// Which graph to show: the ComputeGraph (default for model files) or the
    /// ExecuteGraph (lowering a model file first; the only view of `.exeg` files).
    #[arg(long, value_enum)]
    pub view: Option<View>,
    /// With `--view exe`: which of the three graphs.
    #[arg(long, value_enum, default_value_t = Graph::All)]
    pub graph: Graph,
    /// Output format. `pbtxt` is GE's text dump for the ComputeGraph and the `.exeg` text
    /// form (the whole ExecuteGraph, which reads back) for the ExecuteGraph.
    #[arg(long, value_enum, default_value_t = DumpFormat::Dot)]
    pub format: DumpFormat,
    /// Write here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Which model of a multi-model OM (0 is the root model).
    #[arg(long, default_value_t = 0)]
    pub model: usize,
    /// Show one graph: the (sub)graph named NAME with the subgraphs below it, under the
    /// nodes that own it. With --owner: that node's subgraph named NAME.
    #[arg(long, value_name = "NAME")]
    pub subgraph: Option<String>,
    /// Show the subgraphs that node NODE (a control-flow node: If, Case, While, ...) owns,
    /// under NODE.
    #[arg(long, value_name = "NODE")]
    pub owner: Option<String>,
    /// Show only the nodes within --depth edges of NODE (inputs and outputs alike); a
    /// marker `… N more` shows where the graph goes on.
    #[arg(long, value_name = "NODE")]
    pub around: Option<String>,
    /// With --around: how many edges away from NODE [default: 2].
    #[arg(long, value_name = "K")]
    pub depth: Option<usize>,
    /// Fold runs of consecutive nodes into summary nodes (labelled with how many nodes and
    /// which op or kernel types they stand for) until at most N nodes are left.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_nodes: Option<u64>,
    /// GE JSON only: leave out the fields `atc --mode=1` leaves out (weights, offsets,
    /// sizes). The default keeps everything, so the JSON converts back to the same model.
    #[arg(long)]
    pub atc: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum View {
    /// The ComputeGraph as read from the file.
    Compute,
    /// The ExecuteGraph: Init, Main and DeInit.
    Exe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Graph {
    Init,
    Main,
    Deinit,
    All,
}

impl From<Graph> for GraphSelect {
    fn from(g: Graph) -> GraphSelect {
        match g {
            Graph::Init => GraphSelect::Init,
            Graph::Main => GraphSelect::Main,
            Graph::Deinit => GraphSelect::DeInit,
            Graph::All => GraphSelect::All,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DumpFormat {
    /// Graphviz DOT.
    Dot,
    /// JSON: GE JSON (`atc --mode=1` layout) for the ComputeGraph.
    Json,
    /// Text: GE text dump (`ge_proto_*.txt`) or the `.exeg` text form.
    Pbtxt,
}

fn json_bytes(value: &serde_json::Value) -> anyhow::Result<Vec<u8>> {
    let mut s = serde_json::to_string_pretty(value)?;
    s.push('\n');
    Ok(s.into_bytes())
}

/// The filter flags given, for messages.
fn filter_flags(args: &Args) -> Vec<&'static str> {
    let given = [
        (args.subgraph.is_some(), "--subgraph"),
        (args.owner.is_some(), "--owner"),
        (args.around.is_some(), "--around"),
        (args.depth.is_some(), "--depth"),
        (args.max_nodes.is_some(), "--max-nodes"),
    ];
    given.iter().filter(|g| g.0).map(|g| g.1).collect()
}

/// Refuses flag combinations that mean nothing, before any file is read.
fn check_flags(args: &Args) -> anyhow::Result<()> {
    let flags = filter_flags(args);
    if args.format == DumpFormat::Pbtxt && !flags.is_empty() {
        bail!(
            "{}: {} filter a view (--format dot or json); --format pbtxt writes the whole model",
            args.file.display(),
            flags.join(", ")
        );
    }
    if args.depth.is_some() && args.around.is_none() {
        bail!("--depth counts edges from a node: give the node with --around NODE");
    }
    Ok(())
}

const DEFAULT_DEPTH: usize = 2;

fn compute_filter(args: &Args) -> filter::ViewFilter {
    filter::ViewFilter {
        subgraph: args.subgraph.clone(),
        owner: args.owner.clone(),
        around: args.around.clone(),
        depth: args.depth.unwrap_or(DEFAULT_DEPTH),
        max_nodes: args
            .max_nodes
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    }
}

fn exe_filter(args: &Args) -> view::filter::ViewFilter {
    let f = compute_filter(args);
    view::filter::ViewFilter {
        subgraph: f.subgraph,
        owner: f.owner,
        around: f.around,
        depth: f.depth,
        max_nodes: f.max_nodes,
    }
}

fn write_exe(args: &Args, eg: &ExecuteGraph, progress: Progress) -> anyhow::Result<Status> {
    let which = GraphSelect::from(args.graph);
    let f = exe_filter(args);
    let filtered;
    let (eg, which) = if f.is_empty() {
        (eg, which)
    } else {
        progress.step("filtering");
        let (g, w) =
            view::filter::filter(eg, which, &f).with_context(|| args.file.display().to_string())?;
        filtered = g;
        (&filtered, w)
    };
    let bytes = match args.format {
        DumpFormat::Dot => view::to_dot(eg, which).into_bytes(),
        DumpFormat::Json => json_bytes(&view::to_json(eg, which))?,
        DumpFormat::Pbtxt => view::to_text(eg).into_bytes(),
    };
    drop(progress);
    output::write_or_print(args.output.as_deref(), &bytes)?;
    Ok(Status::Success)
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    check_flags(&args)?;
    let progress = Progress::start(args.output.is_some());
    progress.step(format!("reading {}", args.file.display()));
    let input = input::read_input(&args.file, &ReadOptions::default())?;
    let file = match input {
        Input::Exeg(_) if args.view == Some(View::Compute) => bail!(
            "{}: an .exeg holds an ExecuteGraph; it has no ComputeGraph view",
            args.file.display()
        ),
        Input::Model(file) if args.view == Some(View::Exe) => {
            progress.step("lowering");
            let eg = input::lower_model(
                &args.file,
                &file,
                args.model,
                &crate::lower::LowerOptions::default(),
            )?;
            input::release(file);
            return write_exe(&args, &eg, progress);
        }
        Input::Exeg(eg) => return write_exe(&args, &eg, progress),
        Input::Model(file) => file,
    };
    let Some(m) = file.models.iter().find(|m| m.index == args.model) else {
        let have: Vec<usize> = file.models.iter().map(|m| m.index).collect();
        bail!(
            "{}: --model {}: the file has models {have:?}",
            args.file.display(),
            args.model
        );
    };
    let f = compute_filter(&args);
    let filtered;
    let model = if f.is_empty() {
        &m.model
    } else {
        progress.step("filtering");
        filtered = filter::filter(&m.model, &f).with_context(|| args.file.display().to_string())?;
        &filtered
    };
    let def = || ir::to_model_def(model);
    let bytes = match args.format {
        DumpFormat::Dot => dot::to_dot(model).into_bytes(),
        DumpFormat::Json => json_bytes(&json::to_json(
            &def(),
            &json::JsonOptions {
                atc_compat: args.atc,
            },
        ))?,
        DumpFormat::Pbtxt => text::print_text(&def()).into_bytes(),
    };
    drop(progress);
    output::write_or_print(args.output.as_deref(), &bytes)?;
    input::release(file);
    Ok(Status::Success)
}
