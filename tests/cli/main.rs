//! CLI tests against the real `rt2` binary: help, one happy path per subcommand, and each
//! documented error with its exit status.
//!
//! Every test goes through [`Run`], which prints the command, status, stdout and stderr
//! when an expectation fails, so a red test explains itself.

mod capture;
mod compare;
mod compile;
mod completions;
mod dump;
mod errors;
mod exeg;
mod ge_dumps;
mod inspect;
mod limits;
mod lower;
mod run;
mod util;
