//! `rt2 replay`: loads a model saved by `rt2 capture --save` onto a fresh emulated device,
//! executes it and prints the buffers.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::json;

use crate::capture::{report, rim};
use crate::cmd::format::ReportFormat;
use crate::cmd::sanitize;
use crate::cmd::status::{CheckFailure, Status};

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
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let path = args.model.display().to_string();
    let text =
        std::fs::read_to_string(&args.model).with_context(|| format!("cannot read {path}"))?;
    let file = rim::parse(&text).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    let replay =
        rim::load(&file, args.max_iterations).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    let executed = replay.execute(args.times);
    // Debug builds sanitize every device: what it found in the executions is reported
    // (exit 1); the buffers' read below is the command's own.
    let sanitized = replay
        .acl
        .device()
        .take_sanitizer_report()
        .filter(|r| !r.is_clean());
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
