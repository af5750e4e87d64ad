//! How a command's report looks: `--format` (tables for people, JSON for scripts) and the
//! one table style every table uses. It uses no other file of `cmd`.

use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};

/// `--format` for commands that print a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum ReportFormat {
    /// Tables for people.
    #[default]
    Table,
    /// One JSON object for scripts.
    Json,
}

/// An empty table in rt2's style (UTF-8 borders only).
pub fn table() -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_BORDERS_ONLY);
    t
}
