//! Progress for long work: a spinner on stderr when it is a terminal, nothing otherwise
//! (pipes, CI logs, `--format json`).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner that names the current step. Hidden unless stderr is a terminal and the
/// command's output is for people.
pub struct Progress(ProgressBar);

impl Progress {
    /// Starts a spinner; `for_people` is false for machine-readable output.
    pub fn start(for_people: bool) -> Self {
        if !for_people || !std::io::stderr().is_terminal() {
            return Progress(ProgressBar::with_draw_target(
                None,
                ProgressDrawTarget::hidden(),
            ));
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress(bar)
    }

    /// Names the step now under way.
    pub fn step(&self, msg: impl Into<String>) {
        self.0.set_message(msg.into());
    }

    /// Prints a note for people on stderr (above the spinner, if one is shown): something
    /// the command did differently from what was asked, that is not an error.
    pub fn note(&self, msg: impl Into<String>) {
        self.0.suspend(|| eprintln!("rt2: note: {}", msg.into()));
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}
