//! `rt2 dump`: a view of a model's ComputeGraph as Graphviz DOT, JSON or GE text dump.

use std::path::PathBuf;

use anyhow::bail;

use crate::cmd::progress::Progress;
use crate::cmd::{Status, input, output};
use crate::om::file::ReadOptions;
use crate::om::{dot, ir, json, text};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model file of any kind (OM, GE IR binary, GE text dump, GE JSON, ONNX).
    pub file: PathBuf,
    /// Which graph to show.
    #[arg(long, value_enum, default_value_t = View::Compute)]
    pub view: View,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DumpFormat::Dot)]
    pub format: DumpFormat,
    /// Write here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Which model of a multi-model OM (0 is the root model).
    #[arg(long, default_value_t = 0)]
    pub model: usize,
    /// JSON only: leave out the fields `atc --mode=1` leaves out (weights, offsets, sizes).
    /// The default keeps everything, so the JSON converts back to the same model.
    #[arg(long)]
    pub atc: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum View {
    /// The ComputeGraph as read from the file.
    Compute,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DumpFormat {
    /// Graphviz DOT: graphs as clusters, edges labelled with dtype and shape.
    Dot,
    /// GE JSON (`atc --mode=1` layout).
    Json,
    /// GE text dump (protobuf text format of ge.proto.ModelDef), as `ge_proto_*.txt`.
    Pbtxt,
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let progress = Progress::start(args.output.is_some());
    progress.step(format!("reading {}", args.file.display()));
    let file = input::read_model(&args.file, &ReadOptions::default())?;
    let Some(m) = file.models.iter().find(|m| m.index == args.model) else {
        let have: Vec<usize> = file.models.iter().map(|m| m.index).collect();
        bail!(
            "{}: --model {}: the file has models {have:?}",
            args.file.display(),
            args.model
        );
    };
    let View::Compute = args.view;
    let def = || ir::to_model_def(&m.model);
    let bytes = match args.format {
        DumpFormat::Dot => dot::to_dot(&m.model).into_bytes(),
        DumpFormat::Json => {
            let value = json::to_json(
                &def(),
                &json::JsonOptions {
                    atc_compat: args.atc,
                },
            );
            let mut s = serde_json::to_string_pretty(&value)?;
            s.push('\n');
            s.into_bytes()
        }
        DumpFormat::Pbtxt => text::print_text(&def()).into_bytes(),
    };
    drop(progress);
    output::write_or_print(args.output.as_deref(), &bytes)?;
    input::release(file);
    Ok(Status::Success)
}
