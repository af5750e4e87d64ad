//! `rt2 dump`: a view of a model's ComputeGraph, or of an ExecuteGraph, as Graphviz DOT,
//! JSON, or text (GE text dump / `.exeg` text form).

use std::path::PathBuf;

use anyhow::bail;

use crate::cmd::input::{self, Input};
use crate::cmd::output;
use crate::cmd::progress::Progress;
use crate::cmd::status::Status;
use crate::exec::ExecuteGraph;
use crate::exec::view::{self, GraphSelect};
use crate::om::file::ReadOptions;
use crate::om::{dot, ir, json, text};

#[derive(Debug, clap::Args)]
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

fn write_exe(args: &Args, eg: &ExecuteGraph, progress: Progress) -> anyhow::Result<Status> {
    let which = GraphSelect::from(args.graph);
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
    let def = || ir::to_model_def(&m.model);
    let bytes = match args.format {
        DumpFormat::Dot => dot::to_dot(&m.model).into_bytes(),
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
