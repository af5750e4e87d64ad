//! `rt2 capture`: runs an ACL Graph capture script (../shared/specs/capture-script.md) on
//! a fresh emulated device and reports every step, the captured models, the buffers and
//! the expectations.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::capture::{report, runner, script};
use crate::cmd::format::ReportFormat;
use crate::cmd::output;
use crate::cmd::sanitize;
use crate::cmd::status::Status;
use crate::npu::device::SanitizeChecks;

/// How `rt2 capture` shows the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum View {
    /// The captured models as one Graphviz digraph, instead of the report.
    Dot,
}

// The field docs are `--help` text, where `DIR/<name>` is a placeholder, not HTML.
#[allow(rustdoc::invalid_html_tags)]
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The capture script (TOML, version 1).
    pub script: PathBuf,
    /// Report format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
    /// Print the captured models as Graphviz DOT instead of the report.
    #[arg(long, value_enum)]
    pub view: Option<View>,
    /// Write each captured top-level model, as its capture ended, to DIR/<model>.rim.json
    /// (for `rt2 replay`).
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,
    /// The WHILE watchdog: body runs one WHILE task may make in one execution before the
    /// execution faults [default: the script's `[device]` max_while_iterations, else
    /// 1000000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_iterations: Option<u64>,
    /// Run under the emulated device's sanitizer (see `rt2 run --sanitize`): reads of
    /// buffer bytes nothing wrote (a buffer declared `uninit = true`), kernels whose
    /// outputs depend on their output memory, accesses outside a buffer or after its
    /// free, and two streams (or a captured model's streams) touching the same bytes, one
    /// writing, with no event between them. Findings are listed after the report (the
    /// JSON "sanitizer" key) and exit 1. Debug builds always sanitize.
    #[arg(long, value_name = "CHECKS", num_args = 0..=1, require_equals = true,
          default_missing_value = "all", value_parser = sanitize::parse_checks)]
    pub sanitize: Option<SanitizeChecks>,
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let path = args.script.display().to_string();
    let text =
        std::fs::read_to_string(&args.script).with_context(|| format!("cannot read {path}"))?;
    let mut script = script::parse(&text).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    if let Some(n) = args.max_iterations {
        script.device.max_while_iterations = n;
    }
    if args.sanitize.is_some() {
        script.device.sanitize = args.sanitize;
    }
    let (report, session) = runner::run(&script).map_err(|e| {
        anyhow::anyhow!("{path}: the device cannot be set up with the buffers: {e}")
    })?;
    if let Some(dir) = &args.save {
        save(dir, session.captured())?;
    }
    match (args.view, args.format) {
        (Some(View::Dot), _) => print!("{}", report::to_dot(&report)),
        (None, ReportFormat::Json) => {
            let mut j = report::to_json(&report);
            // Asked for, the report says what the sanitizer checked even when it is clean.
            if let (Some(r), Some(_)) = (&report.sanitizer, args.sanitize) {
                j["sanitizer"] = sanitize::to_json(r);
            }
            println!("{}", serde_json::to_string_pretty(&j)?)
        }
        (None, ReportFormat::Table) => print!("{}", report::to_text(&report)),
    }
    Ok(if report.passed() {
        Status::Success
    } else {
        Status::CheckFailed
    })
}

/// A model name as a file name: characters other than letters, digits, `.`, `_` and `-`
/// become `_`.
fn file_name(model: &str) -> String {
    let safe: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.rim.json")
}

fn save(dir: &Path, captured: &[runner::CapturedAt]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for c in captured {
        let json = serde_json::to_string_pretty(&c.file)?;
        output::write_atomic(
            &dir.join(file_name(&c.name)),
            format!("{json}\n").as_bytes(),
        )?;
    }
    Ok(())
}
