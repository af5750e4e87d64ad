//! Progress for long work: a spinner on stderr when it is a terminal, nothing otherwise
//! (pipes, CI logs, `--format json`). With `RT2_TIMINGS` set in the environment, each
//! step's wall time, and that of the phases the library marked in it ([`crate::timing`]),
//! is printed on stderr when the step ends.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner that names the current step. Hidden unless stderr is a terminal and the
/// command's output is for people.
pub struct Progress {
    bar: ProgressBar,
    /// With `RT2_TIMINGS`: the step under way and when it started. Steps are phases of a
    /// millisecond or more, so a lock per step costs nothing.
    timing: Option<Mutex<(String, Instant)>>,
}

impl Progress {
    /// Starts a spinner; `for_people` is false for machine-readable output.
    pub fn start(for_people: bool) -> Self {
        let timing = crate::timing::enabled().then(|| {
            crate::timing::take();
            Mutex::new(("starting".to_string(), Instant::now()))
        });
        if !for_people || !std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
            return Progress { bar, timing };
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress { bar, timing }
    }

    /// Names the step now under way.
    pub fn step(&self, msg: impl Into<String>) {
        let msg = msg.into();
        self.lap(Some(&msg));
        self.bar.set_message(msg);
    }

    /// With `RT2_TIMINGS`: prints the time of the step that ends now, and of the phases
    /// marked in it, and starts timing `next`, if any.
    fn lap(&self, next: Option<&str>) {
        let Some(timing) = &self.timing else { return };
        let now = Instant::now();
        let mut step = timing.lock().unwrap_or_else(|e| e.into_inner());
        let ms = |from: Instant, to: Instant| (to - from).as_secs_f64() * 1e3;
        let mut lines = vec![format!(
            "rt2: timing: {:9.3} ms  {}",
            ms(step.1, now),
            step.0
        )];
        let marks = crate::timing::take();
        let ends = marks.iter().skip(1).map(|m| m.1).chain([now]);
        for ((name, start), end) in marks.iter().zip(ends) {
            lines.push(format!("rt2: timing: {:9.3} ms    {name}", ms(*start, end)));
        }
        self.bar.suspend(|| {
            for line in &lines {
                eprintln!("{line}");
            }
        });
        if let Some(next) = next {
            *step = (next.to_string(), now);
        }
    }

    /// Prints a note for people on stderr (above the spinner, if one is shown): something
    /// the command did differently from what was asked, that is not an error.
    pub fn note(&self, msg: impl Into<String>) {
        self.bar.suspend(|| eprintln!("rt2: note: {}", msg.into()));
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.lap(None);
        self.bar.finish_and_clear();
    }
}
