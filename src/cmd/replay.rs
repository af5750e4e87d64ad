//! `rt2 replay`: loads a model saved by `rt2 capture --save` onto a fresh emulated device,
//! executes it and prints the buffers.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::json;

use crate::capture::{report, rim};
use crate::cmd::format::ReportFormat;
use crate::cmd::sanitize;
use crate::cmd::status::{CheckFailure, Status};
use crate::npu::device::SanitizeChecks;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A saved model (`.rim.json`).
    pub model: PathBuf,
    /// Executions, in order on one stream.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub times: u32,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
    /// The WHILE watchdog: body runs one WHILE task may make in one execution before the
    /// execution faults [default: the file's max_while_iterations, at most 1000000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_iterations: Option<u64>,
    /// Run under the emulated device's sanitizer (see `rt2 run --sanitize`): reads of
    /// buffer bytes nothing wrote, kernels whose outputs depend on their output memory,
    /// accesses outside a buffer or after its free, and the model's streams touching the
    /// same bytes, one writing, with no event between them. Findings are listed after the
    /// buffers (the JSON "sanitizer" key, present even when clean) and exit 1. Debug
    /// builds always sanitize.
    #[arg(long, value_name = "CHECKS", num_args = 0..=1, require_equals = true,
          default_missing_value = "all", value_parser = sanitize::parse_checks)]
    pub sanitize: Option<SanitizeChecks>,
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let path = args.model.display().to_string();
    let text =
        std::fs::read_to_string(&args.model).with_context(|| format!("cannot read {path}"))?;
    let file = rim::parse(&text).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    let mut options = rim::LoadOptions {
        max_while_iterations: args.max_iterations,
        ..Default::default()
    };
    if args.sanitize.is_some() {
        options.sanitize = args.sanitize;
    }
    let replay = rim::load(&file, &options).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    let executed = replay.execute(args.times);
    // What the sanitizer found in the executions is reported when asked for (clean or
    // not) or when a debug build's own sanitizer found something (exit 1); the buffers'
    // read below is the command's own.
    let sanitized = replay
        .acl
        .device()
        .take_sanitizer_report()
        .filter(|r| args.sanitize.is_some() || !r.is_clean());
    executed.map_err(|e| {
        let found = sanitized.as_ref().map_or(String::new(), |r| {
            format!(" ({} sanitizer finding(s))", r.findings.len())
        });
        CheckFailure(format!(
            "{path}: model {:?} failed on the device: {e}{found}",
            file.name
        ))
    })?;
    let buffers = replay
        .buffers()
        .map_err(|e| anyhow::anyhow!("{path}: cannot read the buffers: {e}"))?;
    let _ = replay.acl.device().take_sanitizer_report();
    match args.format {
        ReportFormat::Json => {
            let mut v = report::buffers_to_json(&buffers);
            v["model"] = json!(file.name);
            v["times"] = json!(args.times);
            if let Some(r) = &sanitized {
                v["sanitizer"] = sanitize::to_json(r);
            }
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        ReportFormat::Table => {
            println!("model {} executed {} times", file.name, args.times);
            print!("{}", report::buffers_to_text(&buffers));
        }
    }
    if let Some(r) = sanitized {
        if args.format == ReportFormat::Table {
            print!("{}", sanitize::to_text(&r));
        }
        sanitize::verdict(&path, &r)?;
    }
    Ok(Status::Success)
}
