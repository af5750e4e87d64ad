//! The `rt2` binary: parse the command line, run the command, print an error exactly once
//! as `rt2: error: ...`, and map the outcome to the exit status of specs/cli.md.

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;

// rt2's readers build millions of small strings, maps and vectors for a large graph;
// mimalloc serves that pattern markedly faster than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match rt2::cmd::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match e.kind() {
            // Help and version are output, not errors: clap prints them as it does.
            ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
            _ => {
                eprintln!("rt2: error: {}", usage_error(&e));
                return ExitCode::from(2);
            }
        },
    };
    match rt2::cmd::run(cli) {
        Ok(status) => status.into(),
        Err(err) => {
            // `{:#}` prints the whole context chain on one line: "reading a.om: offset 4: ...".
            let msg = format!("{err:#}").replace('\n', " ");
            eprintln!("rt2: error: {msg}");
            rt2::cmd::exit_status_of(&err).into()
        }
    }
}

/// A usage error on one line, as every rt2 error is: clap's message and its tips, without
/// the usage block and the pointer to `--help`.
fn usage_error(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more"))
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect();
    parts.join("; ")
}
