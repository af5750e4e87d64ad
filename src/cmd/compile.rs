//! `rt2 compile`: the ATC step. Reads an ONNX model (or any GE graph file), checks the
//! resulting ComputeGraph, and writes an OM, or GE IR in the format the output name asks
//! for (`.pb`/`.ge` binary, `.json`, `.pbtxt`/`.txt` text dump).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::cmd::progress::Progress;
use crate::cmd::status::Status;
use crate::cmd::{input, output};
use crate::om::file::{FileKind, ReadOptions};
use crate::om::om_writer::{OmBuildOptions, build_om_from};
use crate::om::onnx::ImportOptions;
use crate::om::{ir, json, text, verify};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The model to compile: ONNX, or a GE IR file of any kind.
    pub model: PathBuf,
    /// Output file; its extension picks the format (.om by default).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Model name recorded in the OM header and ModelDef (default: the graph's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Fix the dims of an input: NAME:D0,D1,... (`?` or -1 keeps a dim unknown). Repeatable.
    #[arg(long = "input-shape", value_name = "NAME:D0,D1,...", value_parser = input::parse_input_shape)]
    pub input_shape: Vec<(String, Vec<i64>)>,
    /// Keep each ONNX node's op type and attributes instead of mapping it to GE's op as
    /// GE's ONNX parser plugins do (Conv -> Conv2D, MaxPool -> MaxPoolV3, ...).
    #[arg(long = "onnx-types")]
    pub onnx_types: bool,
}

/// What `-o` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutputKind {
    Om,
    GeIr(IrForm),
}

/// The forms of GE IR `-o` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IrForm {
    Binary,
    Json,
    Text,
}

fn output_kind(path: &Path) -> OutputKind {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("pb" | "ge") => OutputKind::GeIr(IrForm::Binary),
        Some("json") => OutputKind::GeIr(IrForm::Json),
        Some("pbtxt" | "txt") => OutputKind::GeIr(IrForm::Text),
        _ => OutputKind::Om,
    }
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let opts = ReadOptions {
        import: ImportOptions {
            name: args.name.clone(),
            input_shapes: args.input_shape.clone(),
            onnx_types: args.onnx_types,
        },
    };
    let progress = Progress::start(true);
    progress.step(format!("reading {}", args.model.display()));
    let mut file = input::read_model(&args.model, &opts)?;
    if file.kind != FileKind::Onnx && !args.input_shape.is_empty() {
        bail!(
            "{}: --input-shape applies to ONNX models; this is a {} file",
            args.model.display(),
            file.kind.name()
        );
    }
    let root = file.root();
    progress.step("verifying");
    let problems = verify::errors(&root.model);
    if !problems.is_empty() {
        let list: Vec<String> = problems
            .iter()
            .map(|p| format!("{}: {}", p.place, p.msg))
            .collect();
        bail!(
            "{}: the graph is not valid ({} problem(s)): {}",
            args.model.display(),
            list.len(),
            list.join("; ")
        );
    }
    // Every op's inferred output type and shape, as ATC's OMs carry them (-1 only where a
    // dim is known at run time alone). A graph lowering cannot take keeps its own.
    progress.step("inferring shapes");
    if let Err(e) = crate::lower::annotate(&mut file.models[0].model) {
        progress.note(format!(
            "{}: output shapes not inferred ({e}); the descriptors are written as read",
            args.model.display()
        ));
    }
    let mut root = file.models.swap_remove(0).model;
    input::release(file);
    if let Some(name) = &args.name {
        root.name = name.clone();
    }
    let bytes = match output_kind(&args.output) {
        OutputKind::Om => {
            // Straight from the typed graph to the OM's bytes, the ops encoded on the pool.
            progress.step(format!("writing {}", args.output.display()));
            let name = if root.name.is_empty() {
                root.root.name.clone()
            } else {
                root.name.clone()
            };
            let om = build_om_from(
                root,
                &OmBuildOptions {
                    name,
                    ..Default::default()
                },
            )
            .with_context(|| format!("{}: building the OM", args.model.display()))?;
            crate::timing::mark("encode the OM");
            om.to_bytes()
                .with_context(|| format!("{}: writing the OM", args.model.display()))?
        }
        OutputKind::GeIr(form) => {
            // The model is turned into GE IR node by node, each typed node let go as its op
            // is made, so the graph is not held twice.
            progress.step("making GE IR");
            let def = ir::into_model_def(root);
            progress.step(format!("writing {}", args.output.display()));
            match form {
                IrForm::Binary => prost::Message::encode_to_vec(&def),
                IrForm::Json => {
                    let mut s = serde_json::to_string_pretty(&json::to_json(
                        &def,
                        &json::JsonOptions::default(),
                    ))?;
                    s.push('\n');
                    s.into_bytes()
                }
                IrForm::Text => text::print_text(&def).into_bytes(),
            }
        }
    };
    crate::timing::mark("write the file");
    output::write_atomic(&args.output, &bytes)?;
    Ok(Status::Success)
}
