//! What the sanitizer found: [`Finding`]s with the tasks and allocations involved, as plain
//! data a command prints as a table or writes as JSON.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

/// The sanitizer's checks, each switched on by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct SanitizeChecks {
    /// initcheck: reads of bytes nothing wrote since their allocation, and launches whose
    /// outputs depend on what the output memory held before (a kernel that leaves bytes
    /// unwritten or sums into its output).
    pub init: bool,
    /// memcheck: accesses outside an allocation, use after free, invalid and double frees,
    /// reported with the allocation's history.
    pub mem: bool,
    /// racecheck: two tasks on different lanes touching overlapping bytes, one writing,
    /// with no event, notify, stream order or host synchronization between them.
    pub race: bool,
}

impl SanitizeChecks {
    /// Every check.
    pub const ALL: SanitizeChecks = SanitizeChecks {
        init: true,
        mem: true,
        race: true,
    };

    /// Parses a comma-separated list of `init`, `mem`, `race` (or `all`).
    pub fn parse(s: &str) -> Result<SanitizeChecks, String> {
        let mut c = SanitizeChecks {
            init: false,
            mem: false,
            race: false,
        };
        for word in s.split(',').map(str::trim) {
            match word {
                "all" => c = SanitizeChecks::ALL,
                "init" | "initcheck" => c.init = true,
                "mem" | "memcheck" => c.mem = true,
                "race" | "racecheck" => c.race = true,
                _ => {
                    return Err(format!(
                        "unknown check {word:?} (expected init, mem, race or all)"
                    ));
                }
            }
        }
        Ok(c)
    }
}

/// Which check a finding comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Check {
    Init,
    Mem,
    Race,
}

impl Check {
    pub fn name(self) -> &'static str {
        match self {
            Check::Init => "initcheck",
            Check::Mem => "memcheck",
            Check::Race => "racecheck",
        }
    }
}

/// A task as a finding names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct TaskInfo {
    /// Where it ran: `stream 0`, `model stream 2`, `the host`.
    pub lane: String,
    /// The task's kind (`kernel launch`, `device-to-host copy`, ...).
    pub kind: &'static str,
    /// A launch's op.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// What the host calls the launch (the node it serves), when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl fmt::Display for TaskInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.op {
            Some(op) => write!(f, "{op} launch")?,
            None => f.write_str(self.kind)?,
        }
        if let Some(l) = &self.label {
            write!(f, " {l:?}")?;
        }
        write!(f, " on {}", self.lane)
    }
}

/// One allocation or free of a block, in the order the device saw them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllocEvent {
    /// `alloc` or `free`.
    pub what: &'static str,
    /// Bytes asked for (an allocation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The stream it was ordered on.
    pub stream: u32,
    /// The host thread that asked.
    pub thread: String,
    /// The last launch the host thread issued before it, if any: what it was working on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Its place among the device's allocations and frees (from 1).
    pub serial: u64,
}

impl fmt::Display for AllocEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {}", self.serial, self.what)?;
        if let Some(b) = self.bytes {
            write!(f, " {b} bytes")?;
        }
        write!(f, " on stream {} by thread {}", self.stream, self.thread)?;
        if let Some(a) = &self.after {
            write!(f, " after {a}")?;
        }
        Ok(())
    }
}

/// One problem the sanitizer saw; repeats of the same problem at the same task are counted,
/// not listed again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub check: Check,
    /// What went wrong, in a few words (`uninitialized read`, `use after free`, `race`).
    pub kind: &'static str,
    /// The task that did it (for a race, the one on the later lane in name order: two
    /// unordered accesses have no first).
    pub task: Arc<TaskInfo>,
    /// The rest, in a sentence: which argument, which bytes, what the allocation was.
    pub detail: String,
    /// The device address of the first byte concerned.
    pub address: u64,
    /// Bytes concerned from `address`.
    pub bytes: u64,
    /// For a race, the other task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other: Option<Arc<TaskInfo>>,
    /// For a memcheck finding, the block's allocations and frees (oldest first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<AllocEvent>,
    /// How many times it happened.
    pub count: u64,
}

impl Finding {
    /// The finding on one line.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{}: {} by {}: {}",
            self.check.name(),
            self.kind,
            self.task,
            self.detail
        );
        if let Some(o) = &self.other {
            s.push_str(&format!("; the other access: {o}"));
        }
        for h in &self.history {
            s.push_str(&format!("; {h}"));
        }
        if self.count > 1 {
            s.push_str(&format!(" ({} times)", self.count));
        }
        s
    }
}

/// Everything the sanitizer found on one device, in the order first seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SanitizerReport {
    /// The checks that ran.
    pub checks: Vec<Check>,
    pub findings: Vec<Finding>,
    /// Distinct findings dropped once the list was full.
    pub dropped: u64,
    /// Launches whose outputs were checked by running them twice.
    pub launches_checked: u64,
    /// Accesses to device memory checked.
    pub accesses_checked: u64,
}

impl SanitizerReport {
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty() && self.dropped == 0
    }
}
