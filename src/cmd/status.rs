//! How a command came out: [`Status`] for a command that ran to the end, [`CheckFailure`]
//! for an error that means "it ran, and what it checked failed", and the exit status of
//! specs/cli.md for either. Every subcommand uses this file; it uses no other file of
//! `cmd`.

use std::process::ExitCode;

/// How a command that ran to the end came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Exit 0.
    Success,
    /// Exit 1: the command ran but a check failed.
    CheckFailed,
}

impl From<Status> for ExitCode {
    fn from(s: Status) -> ExitCode {
        match s {
            Status::Success => ExitCode::SUCCESS,
            Status::CheckFailed => ExitCode::from(1),
        }
    }
}

/// An error that means "the command ran, and what it checked failed" (exit 1) rather than
/// "the input could not be used" (exit 2, every other error).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CheckFailure(pub String);

/// The exit status for an error that reached `main`.
pub fn exit_status_of(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<CheckFailure>()) {
        1
    } else {
        2
    }
}
