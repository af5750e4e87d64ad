//! The command layer: one file per subcommand, each an `Args` struct and a thin `run`.
//!
//! This is the only module that touches files and the terminal. Library errors come up
//! here and get the file name as context; output files are written whole or not at all
//! (see [`output`]). Exit status: 0 success, 1 a check failed (the command ran), 2 bad
//! usage or an input that cannot be read.

use clap::{CommandFactory, Parser, Subcommand};

pub mod capture;
pub mod check;
pub mod compare;
pub mod compile;
pub mod completions;
pub mod diagnostics;
pub mod dump;
pub mod feed;
pub mod format;
pub mod input;
pub mod inspect;
pub mod lower;
pub mod man;
pub mod npy;
pub mod output;
pub mod progress;
pub mod random;
pub mod replay;
pub mod run;
pub mod sanitize;
pub mod status;

pub use format::ReportFormat;
pub use status::{CheckFailure, Status, exit_status_of};

/// rt2: build, inspect and debug Ascend Graph Engine models without an NPU.
#[derive(Debug, Parser)]
#[command(name = "rt2", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// ATC step: import an ONNX model (or any GE graph file) and write an OM.
    Compile(compile::Args),
    /// Tell what a file is: OM header and partitions, graphs, inputs and outputs.
    Inspect(inspect::Args),
    /// Lower a model into an ExecuteGraph (Init, Main, DeInit) and write it as `.exeg`.
    Lower(lower::Args),
    /// Write a view of a model's ComputeGraph or ExecuteGraph as Graphviz DOT, JSON or text.
    Dump(dump::Args),
    /// Run a model on the emulated NPU: time it, write its outputs, check them.
    Run(run::Args),
    /// Run two models on the same inputs and compare every op's outputs (accuracy
    /// comparison: cosine similarity, errors, the first op that diverges).
    Compare(compare::Args),
    /// Run an ACL Graph capture script: capture, update and execute models, check buffers.
    Capture(capture::Args),
    /// Load a saved captured model (`.rim.json`) onto a fresh device and execute it.
    Replay(replay::Args),
    /// Print a shell completion script for rt2 (bash, zsh, fish, powershell, elvish).
    Completions(completions::Args),
    /// Print rt2's manual page or a subcommand's (roff), or write them all into a directory.
    Man(man::Args),
}

/// Runs one command.
pub fn run(cli: Cli) -> anyhow::Result<Status> {
    match cli.command {
        Command::Compile(args) => compile::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Lower(args) => lower::run(args),
        Command::Dump(args) => dump::run(args),
        Command::Run(args) => run::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Capture(args) => capture::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Completions(args) => {
            completions::run(args, Cli::command()).map(|()| Status::Success)
        }
        Command::Man(args) => man::run(args, Cli::command()).map(|()| Status::Success),
    }
}
