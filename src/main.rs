//! The `rt2` binary: parse the command line, run the command, print an error exactly once
//! as `rt2: error: ...`, and map the outcome to the exit status of specs/cli.md.

use std::process::ExitCode;

use clap::Parser;

// rt2's readers build millions of small strings, maps and vectors for a large graph;
// mimalloc serves that pattern markedly faster than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = rt2::cmd::Cli::parse();
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
