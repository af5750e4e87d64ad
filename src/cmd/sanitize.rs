//! `--sanitize` of `rt2 run` and `rt2 capture`: the flag's checks, and the device
//! sanitizer's report as a table for people and JSON for scripts. Any finding makes the
//! command exit 1 ([`verdict`]).

use serde_json::{Value, json};

use crate::npu::device::{SanitizeChecks, SanitizerReport};

use super::format::table;
use super::status::CheckFailure;

/// Parses `--sanitize`'s value: `all` or a comma-separated list of `init`, `mem`, `race`.
pub fn parse_checks(s: &str) -> Result<SanitizeChecks, String> {
    SanitizeChecks::parse(s)
}

/// The report as a table: one row per finding, with the allocation history under a
/// memcheck finding and the other task of a race.
pub fn to_text(r: &SanitizerReport) -> String {
    let checks: Vec<&str> = r.checks.iter().map(|c| c.name()).collect();
    let mut out = format!(
        "sanitizer ({}): {} finding(s); {} accesses checked, {} launches run twice\n",
        checks.join(", "),
        r.findings.len(),
        r.accesses_checked,
        r.launches_checked
    );
    if r.findings.is_empty() {
        return out;
    }
    let mut t = table();
    t.set_header(["check", "problem", "task", "where", "times"]);
    for f in &r.findings {
        let mut detail = f.detail.clone();
        if let Some(o) = &f.other {
            detail.push_str(&format!("\nother task: {o}"));
        }
        for h in &f.history {
            detail.push_str(&format!("\n{h}"));
        }
        t.add_row([
            f.check.name().to_string(),
            f.kind.to_string(),
            f.task.to_string(),
            detail,
            f.count.to_string(),
        ]);
    }
    out.push_str(&format!("{t}\n"));
    if r.dropped > 0 {
        out.push_str(&format!(
            "({} more distinct finding(s) not listed)\n",
            r.dropped
        ));
    }
    out
}

/// The report as JSON (the `sanitizer` key of a command's JSON report).
pub fn to_json(r: &SanitizerReport) -> Value {
    serde_json::to_value(r).unwrap_or_else(|e| json!({ "error": e.to_string() }))
}

/// Exit 1 when the sanitizer found anything: the error names the first finding.
pub fn verdict(at: &str, r: &SanitizerReport) -> Result<(), CheckFailure> {
    match r.findings.first() {
        None if r.dropped == 0 => Ok(()),
        first => Err(CheckFailure(format!(
            "{at}: the device sanitizer found {} problem(s){}",
            r.findings.len() as u64 + r.dropped,
            first.map_or(String::new(), |f| format!(", first: {}", f.line()))
        ))),
    }
}
