//! Phase marks for whoever wants to know where a command spends its time: with
//! `RT2_TIMINGS` set in the environment, the library marks the start of each phase of
//! its long operations (decoding, importing, lowering's conversion and passes, ...) and
//! `cmd`'s progress prints every step's wall time with its phases on stderr
//! (`cmd::progress`). Without the variable a mark is one load of a flag.
//!
//! Marks are made on the command's thread only, at phase boundaries (a few dozen per
//! command), so the lock they take is never contended and costs nothing beside a phase.

use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Instant;

static ENABLED: OnceLock<bool> = OnceLock::new();
static MARKS: Mutex<Vec<(&'static str, Instant)>> = Mutex::new(Vec::new());

/// Whether `RT2_TIMINGS` asks for timings (read once).
pub fn enabled() -> bool {
    *ENABLED.get_or_init(|| std::env::var_os("RT2_TIMINGS").is_some())
}

/// Marks the start of the phase `name`; it lasts until the next mark or the end of the
/// step it is in.
pub fn mark(name: &'static str) {
    if enabled() {
        MARKS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((name, Instant::now()));
    }
}

/// The marks made since the last call, oldest first.
pub fn take() -> Vec<(&'static str, Instant)> {
    std::mem::take(&mut *MARKS.lock().unwrap_or_else(|e| e.into_inner()))
}
