//! The `rt2` binary: parse the command line, run the command, print an error exactly once
//! as `rt2: error: ...`, and map the outcome to the exit status of specs/cli.md.

use std::process::ExitCode;
use std::sync::{Mutex, PoisonError};

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
    match run_on_a_large_stack(cli) {
        Ok(status) => status.into(),
        Err(err) => {
            // `{:#}` prints the whole context chain on one line: "reading a.om: offset 4: ...".
            let msg = format!("{err:#}").replace('\n', " ");
            eprintln!("rt2: error: {msg}");
            rt2::cmd::exit_status_of(&err).into()
        }
    }
}

/// The stack of the thread a command runs on, and of rayon's workers: 256 MiB and 64 MiB
/// of address space, of which a thread only uses (and the OS only backs) what it touches.
///
/// Models nest (an `If` in a `Loop` in an `If`), and reading, lowering and running a
/// subgraph recurses once per level: the protobuf decoder, the importer, lowering, the
/// plans and the owner kernels. `proto::nesting` caps nesting at 1,000 message levels
/// (330-odd subgraph levels); these stacks hold that many with room to spare, where the
/// 8 MiB of a main thread and the 2 MiB of a spawned one would overflow first, which
/// aborts the process instead of reporting an error.
const COMMAND_STACK: usize = 256 << 20;
const WORKER_STACK: usize = 64 << 20;

/// Runs the command on a thread with [`COMMAND_STACK`] bytes of stack (and rayon's pool
/// with [`WORKER_STACK`]); on the calling thread when no such thread can be started.
fn run_on_a_large_stack(cli: rt2::cmd::Cli) -> anyhow::Result<rt2::cmd::Status> {
    // Building the global pool fails only when it exists already; then it is kept.
    let _ = rayon::ThreadPoolBuilder::new()
        .stack_size(WORKER_STACK)
        .build_global();
    let slot = Mutex::new(Some(cli));
    let take = || slot.lock().unwrap_or_else(PoisonError::into_inner).take();
    let ran = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("rt2".into())
            .stack_size(COMMAND_STACK)
            .spawn_scoped(scope, || take().map(rt2::cmd::run))
            .map(|thread| thread.join())
    });
    match ran {
        Ok(Ok(Some(outcome))) => outcome,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        // No thread could be started: the command runs here, on the stack there is.
        Ok(Ok(None)) | Err(_) => match take() {
            Some(cli) => rt2::cmd::run(cli),
            None => Err(anyhow::anyhow!(
                "the command's thread ended without running it"
            )),
        },
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
