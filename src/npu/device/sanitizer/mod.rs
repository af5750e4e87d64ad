//! The device sanitizer: initcheck, memcheck and racecheck on the emulated NPU, the checks
//! CUDA's compute-sanitizer and Ascend's msSanitizer make on hardware, here on any machine.
//!
//! The device calls it at the points where work touches memory or orders other work:
//! allocations and frees, every task's accesses when the task runs, event and notify records
//! and waits, stream activations and model executions, host synchronization. It keeps, under
//! one lock (the sanitizer is a debugging mode; the device without it never takes the lock
//! or calls in: each call site tests an `Option` first):
//!
//! - a vector clock per lane (`clock`): a stream, a model's stream or a host thread. Running
//!   a task ticks its lane; an event wait joins the clock its record saw; a notify wait the
//!   clock of the record it consumes; a stream activation or a model execution starts its
//!   streams at the activating lane's clock and joins them back when the execution ends; a
//!   host synchronize joins the stream into the host thread's clock, and work the host
//!   submits afterwards starts from the host's clock, joined when the stream reaches the
//!   job (not when it is submitted: a job queued earlier is not ordered after the host's
//!   later synchronize);
//! - a shadow per allocation (`shadow`): which bytes were written since the allocation, and
//!   the recent accesses with their lane clocks.
//!
//! From these: a read of a byte never written since its allocation is an uninitialized read
//! (initcheck); two accesses of overlapping bytes, one a write, neither ordered before the
//! other, are a race (racecheck); and the device's own range checks, which refuse accesses
//! outside an allocation or to freed memory, become findings with the block's history
//! (memcheck). The device adds the one initcheck no shadow can make: it runs each launch
//! twice, its outputs filled with two different patterns first, and a launch whose outputs
//! differ between the runs depends on what its output memory held (a kernel that leaves
//! bytes unwritten, or sums into its output): the bug class a reused block exposes and a
//! fresh, zeroed one hides. Allocations under the sanitizer are filled with 0xFF (NaN in
//! every float type), fresh or reused, so nothing can rely on zeroes.
//!
//! Findings are deduplicated (the same problem at the same task counts, once listed) and
//! kept up to [`MAX_FINDINGS`].

mod clock;
mod report;
mod shadow;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::thread::ThreadId;

pub use report::{AllocEvent, Check, Finding, SanitizeChecks, SanitizerReport, TaskInfo};

use super::error::NpuError;
use super::ids::{DevicePtr, ModelId, StreamId};
use clock::{Clock, Lane};
use shadow::Block;
pub(crate) use shadow::Role;

/// Distinct findings kept; later ones are counted as dropped.
pub const MAX_FINDINGS: usize = 1000;
/// Records of one event kept (a wait waits for the latest record issued before it, which is
/// never far behind).
const EVENT_GENERATIONS: u64 = 64;
/// The byte an allocation is filled with: NaN in every float type, -1 in every signed one.
pub const POISON: u8 = 0xFF;

/// Who runs work in its own order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum LaneKey {
    /// A stream of the device.
    Stream(StreamId),
    /// Stream `index` of a loaded model (whichever worker runs its list).
    ModelStream(ModelId, u32),
    /// The host: its synchronous copies, and what it has synchronized with. One lane for
    /// every host thread: the device cannot see how host threads order each other
    /// (channels, locks, joins), and a lane per thread would take every hand-off between
    /// them for a race. What this misses is a race between host threads.
    Host,
}

/// One range a task touches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Touch {
    pub ptr: DevicePtr,
    pub len: usize,
    pub role: Role,
}

#[derive(Default)]
struct State {
    lanes: HashMap<LaneKey, Lane>,
    clocks: Vec<Clock>,
    names: Vec<Arc<str>>,
    /// Changes of each lane's clock (host lanes: to know when a submission carries news).
    versions: Vec<u64>,
    blocks: BTreeMap<u64, Block>,
    /// The clock each event record saw, by (event, generation).
    events: HashMap<(usize, u64), Clock>,
    /// Each notify's records not consumed yet.
    notifies: HashMap<usize, VecDeque<Clock>>,
    /// Host clocks to join into a stream when it reaches a job: (job number, clock).
    pending: HashMap<StreamId, VecDeque<(u64, Clock)>>,
    /// The host version last sent with a submission, per stream.
    sent: HashMap<StreamId, u64>,
    /// The last launch each host thread issued: context for its allocations.
    last_launch: HashMap<ThreadId, String>,
    serial: u64,
    findings: Vec<Finding>,
    seen: HashMap<String, usize>,
    dropped: u64,
    launches_checked: u64,
    accesses_checked: u64,
}

/// The sanitizer of one device.
pub(crate) struct Sanitizer {
    pub checks: SanitizeChecks,
    state: parking_lot::Mutex<State>,
}

fn thread_name() -> String {
    let t = std::thread::current();
    t.name()
        .map_or_else(|| format!("{:?}", t.id()), str::to_string)
}

impl State {
    fn lane(&mut self, key: LaneKey) -> Lane {
        if let Some(&l) = self.lanes.get(&key) {
            return l;
        }
        let l = self.clocks.len() as Lane;
        self.lanes.insert(key, l);
        self.clocks.push(Clock::default());
        self.versions.push(0);
        self.names.push(
            match key {
                LaneKey::Stream(s) => format!("stream {}", s.0),
                LaneKey::ModelStream(m, i) => format!("model {} stream {i}", m.0),
                LaneKey::Host => "the host".to_string(),
            }
            .into(),
        );
        l
    }

    fn host(&mut self) -> Lane {
        self.lane(LaneKey::Host)
    }

    /// Orders lane `to` after everything lane `from` has seen.
    fn order(&mut self, from: Lane, to: Lane) {
        if from == to {
            return;
        }
        let c = self.clocks[from as usize].clone();
        self.join_into(to, &c);
    }

    fn join_into(&mut self, lane: Lane, c: &Clock) {
        let mine = &mut self.clocks[lane as usize];
        let before = mine.clone();
        mine.join(c);
        if *mine != before {
            self.versions[lane as usize] += 1;
        }
    }

    fn tick(&mut self, lane: Lane) {
        self.clocks[lane as usize].tick(lane);
        self.versions[lane as usize] += 1;
    }

    /// The block holding `ptr`, if the sanitizer knows one.
    fn block_of(&mut self, ptr: u64) -> Option<(u64, &mut Block)> {
        self.blocks
            .range_mut(..=ptr)
            .next_back()
            .filter(|(base, b)| ptr < *base + b.size.max(1))
            .map(|(base, b)| (*base, b))
    }

    fn find(&mut self, key: String, f: impl FnOnce() -> Finding) {
        if let Some(&i) = self.seen.get(&key) {
            self.findings[i].count += 1;
            return;
        }
        if self.findings.len() >= MAX_FINDINGS {
            self.dropped += 1;
            return;
        }
        self.seen.insert(key, self.findings.len());
        self.findings.push(f());
    }

    fn event(&mut self, what: &'static str, bytes: Option<u64>, stream: StreamId) -> AllocEvent {
        self.serial += 1;
        AllocEvent {
            what,
            bytes,
            stream: stream.0,
            thread: thread_name(),
            after: self.last_launch.get(&std::thread::current().id()).cloned(),
            serial: self.serial,
        }
    }
}

impl Sanitizer {
    pub fn new(checks: SanitizeChecks) -> Sanitizer {
        Sanitizer {
            checks,
            state: parking_lot::Mutex::new(State::default()),
        }
    }

    /// What was found so far.
    pub fn report(&self) -> SanitizerReport {
        let s = self.state.lock();
        let c = self.checks;
        SanitizerReport {
            checks: [
                (c.init, Check::Init),
                (c.mem, Check::Mem),
                (c.race, Check::Race),
            ]
            .into_iter()
            .filter_map(|(on, check)| on.then_some(check))
            .collect(),
            findings: s.findings.clone(),
            dropped: s.dropped,
            launches_checked: s.launches_checked,
            accesses_checked: s.accesses_checked,
        }
    }

    /// [`Sanitizer::report`], forgetting the findings (the clocks and shadows stay).
    pub fn take(&self) -> SanitizerReport {
        let r = self.report();
        let mut s = self.state.lock();
        s.findings.clear();
        s.seen.clear();
        s.dropped = 0;
        r
    }

    /// A task as findings name it, on `lane`.
    pub fn task_info(
        &self,
        lane: LaneKey,
        kind: &'static str,
        op: Option<&str>,
        label: Option<&str>,
    ) -> Arc<TaskInfo> {
        let mut s = self.state.lock();
        let l = s.lane(lane);
        Arc::new(TaskInfo {
            lane: s.names[l as usize].to_string(),
            kind,
            op: op.map(str::to_string),
            label: label.map(str::to_string),
        })
    }

    /// A new allocation of `bytes` at `ptr` on `stream`: its bytes are unwritten, nobody
    /// has touched them. (The device fills them with [`POISON`].)
    pub fn alloc(&self, ptr: DevicePtr, bytes: usize, stream: StreamId) {
        let mut s = self.state.lock();
        let (lo, hi) = (ptr.0, ptr.0 + bytes.max(1) as u64);
        // Every older shadow over these bytes ends here: the memory is a new object.
        let stale: Vec<u64> = s
            .blocks
            .range(..hi)
            .rev()
            .take_while(|(base, b)| **base + b.size.max(1) > lo)
            .map(|(base, _)| *base)
            .collect();
        for base in stale {
            s.blocks.remove(&base);
        }
        let event = s.event("alloc", Some(bytes as u64), stream);
        s.blocks.insert(ptr.0, Block::new(bytes as u64, event));
    }

    /// A free of `ptr` on `stream`; `result` is the allocator's answer (an invalid or double
    /// free is a memcheck finding with the block's history).
    pub fn free(&self, ptr: DevicePtr, stream: StreamId, result: &Result<(), NpuError>) {
        let mut s = self.state.lock();
        let event = s.event("free", None, stream);
        match result {
            Ok(()) => {
                if let Some(b) = s.blocks.get_mut(&ptr.0) {
                    b.freed = true;
                    b.history.push(event);
                }
            }
            Err(e) if self.checks.mem => {
                let history = s.blocks.get(&ptr.0).map(|b| b.history.clone());
                let kind = if history.as_ref().is_some_and(|h| h.len() > 1) {
                    "double free"
                } else {
                    "invalid free"
                };
                let lane = s.host();
                let task = Arc::new(TaskInfo {
                    lane: s.names[lane as usize].to_string(),
                    kind: "free",
                    op: None,
                    label: None,
                });
                let mut history = history.unwrap_or_default();
                history.push(event);
                let key = format!("free {ptr} {kind}");
                s.find(key, || Finding {
                    check: Check::Mem,
                    kind,
                    task,
                    detail: format!("{e}"),
                    address: ptr.0,
                    bytes: 0,
                    other: None,
                    history,
                    count: 1,
                });
            }
            Err(_) => {}
        }
    }

    /// A task's range was refused by the device's checks (`error`): a memcheck finding with
    /// the history of the block the address is in, if any.
    pub fn refused(&self, task: &Arc<TaskInfo>, touch: Touch, error: &NpuError) {
        if !self.checks.mem {
            return;
        }
        let kind = match error {
            NpuError::OutOfBounds { .. } => "out of bounds",
            NpuError::UseAfterFree { .. } => "use after free",
            NpuError::InvalidAddress { .. } => "invalid address",
            _ => return,
        };
        let mut s = self.state.lock();
        let history = s
            .block_of(touch.ptr.0)
            .map(|(_, b)| b.history.clone())
            .unwrap_or_default();
        let key = format!("{kind} {task} {}", touch.role.name());
        let detail = format!(
            "{} ({} bytes at {}): {error}",
            touch.role.name(),
            touch.len,
            touch.ptr
        );
        s.find(key, || Finding {
            check: Check::Mem,
            kind,
            task: task.clone(),
            detail,
            address: touch.ptr.0,
            bytes: touch.len as u64,
            other: None,
            history,
            count: 1,
        });
    }

    /// The host submits a job to `stream`, its `seq`-th: the job and everything after it
    /// on the stream are ordered after what the submitting thread has seen.
    pub fn submitted(&self, stream: StreamId, seq: u64) {
        let mut s = self.state.lock();
        let host = s.host();
        let version = s.versions[host as usize];
        if version == 0 || s.sent.get(&stream) == Some(&version) {
            return;
        }
        s.sent.insert(stream, version);
        let c = s.clocks[host as usize].clone();
        s.pending.entry(stream).or_default().push_back((seq, c));
    }

    /// Notes the launch the calling host thread issues (context for its allocations).
    pub fn issued(&self, task: &str) {
        let mut s = self.state.lock();
        s.last_launch
            .insert(std::thread::current().id(), task.to_string());
    }

    /// Stream `stream` reaches its `seq`-th job (`None`: work run with nothing queued
    /// before it, inline): the host clocks submitted with the jobs up to it join the
    /// stream's clock.
    pub fn reached(&self, stream: StreamId, seq: Option<u64>) {
        let mut s = self.state.lock();
        if !s.pending.contains_key(&stream) {
            return;
        }
        let l = s.lane(LaneKey::Stream(stream));
        let mut joined = Clock::default();
        let q = s.pending.get_mut(&stream).expect("checked above");
        while let Some((at, _)) = q.front() {
            if seq.is_some_and(|n| *at > n) {
                break;
            }
            let (_, c) = q.pop_front().expect("a front");
            joined.join(&c);
        }
        if q.is_empty() {
            s.pending.remove(&stream);
        }
        s.join_into(l, &joined);
    }

    /// A task runs on `lane`, touching `touches`: checks the reads for unwritten bytes and
    /// every range for races, then marks the writes written.
    pub fn run(&self, lane: LaneKey, task: &Arc<TaskInfo>, touches: &[Touch]) {
        let mut s = self.state.lock();
        let l = s.lane(lane);
        s.tick(l);
        let clock = s.clocks[l as usize].clone();
        for t in touches {
            if t.len == 0 {
                continue;
            }
            s.accesses_checked += 1;
            let (lo_abs, len) = (t.ptr.0, t.len as u64);
            let Some((base, block)) = s.block_of(lo_abs) else {
                continue;
            };
            let (lo, hi) = (lo_abs - base, lo_abs - base + len);
            let uninit = (self.checks.init && !t.role.writes())
                .then(|| block.first_unwritten(lo, hi))
                .flatten();
            let race = self
                .checks
                .race
                .then(|| block.access(lo, hi, l, &clock, t.role, task))
                .flatten();
            if t.role.writes() {
                block.mark_written(lo, hi);
            }
            if let Some(at) = uninit {
                let key = format!("uninit {task} {}", t.role.name());
                let detail = format!(
                    "{} ({len} bytes at {}): byte {} was never written since its allocation",
                    t.role.name(),
                    t.ptr,
                    at - lo
                );
                s.find(key, || Finding {
                    check: Check::Init,
                    kind: "uninitialized read",
                    task: task.clone(),
                    detail,
                    address: base + at,
                    bytes: hi - at,
                    other: None,
                    history: Vec::new(),
                    count: 1,
                });
            }
            if let Some(r) = race {
                let (a, b) = (lo.max(r.lo), hi.min(r.hi));
                // Two unordered accesses have no "first": which one the device saw first
                // is up to thread timing. The finding names them in one order whichever
                // way they ran (the later lane in name order is the task), so a race is
                // reported the same on every run and counted once.
                let this = (task, t.role);
                let that = (&r.task, r.role);
                let ((task, role), (other, other_role)) =
                    if (&this.0.lane, this.0.to_string()) >= (&that.0.lane, that.0.to_string()) {
                        (this, that)
                    } else {
                        (that, this)
                    };
                let verb = |role: Role, now: bool| match (role.writes(), now) {
                    (true, true) => "writes",
                    (false, true) => "reads",
                    (true, false) => "wrote",
                    (false, false) => "read",
                };
                let key = format!("race {task} {} {other} {}", role.name(), other_role.name());
                let detail = format!(
                    "{} {} bytes {}..{} of the block at {:#x} ({}), which {} {} as its {} \
                     without an event, notify or stream order between them",
                    verb(role, true),
                    role.name(),
                    a,
                    b,
                    base,
                    DevicePtr(base + a),
                    other,
                    verb(other_role, false),
                    other_role.name(),
                );
                let (task, other) = (task.clone(), other.clone());
                s.find(key, || Finding {
                    check: Check::Race,
                    kind: "race",
                    task,
                    detail,
                    address: base + a,
                    bytes: b - a,
                    other: Some(other),
                    history: Vec::new(),
                    count: 1,
                });
            }
        }
    }

    /// A launch's outputs differed between its two runs (see the module doc): output
    /// `output`, first at byte `at` of `len`.
    pub fn unwritten_output(
        &self,
        task: &Arc<TaskInfo>,
        output: usize,
        ptr: DevicePtr,
        len: usize,
        at: usize,
    ) {
        let mut s = self.state.lock();
        let key = format!("output {task} {output}");
        s.find(key, || Finding {
            check: Check::Init,
            kind: "output depends on prior memory",
            task: task.clone(),
            detail: format!(
                "output {output} ({len} bytes at {ptr}) differs at byte {at} between two runs \
                 whose output memory held different bytes: the kernel leaves bytes unwritten \
                 or reads its output before writing it"
            ),
            address: ptr.0 + at as u64,
            bytes: (len - at) as u64,
            other: None,
            history: Vec::new(),
            count: 1,
        });
    }

    /// Counts a launch checked by running it twice.
    pub fn launch_checked(&self) {
        self.state.lock().launches_checked += 1;
    }

    /// An event record (its `generation`) on `lane`.
    pub fn event_record(&self, event: usize, generation: u64, lane: LaneKey) {
        let mut s = self.state.lock();
        let l = s.lane(lane);
        let c = s.clocks[l as usize].clone();
        s.events.insert((event, generation), c);
        if generation > EVENT_GENERATIONS {
            s.events.remove(&(event, generation - EVENT_GENERATIONS));
        }
    }

    /// `lane` waited for the event's record `generation`.
    pub fn event_wait(&self, event: usize, generation: u64, lane: LaneKey) {
        let mut s = self.state.lock();
        let l = s.lane(lane);
        if let Some(c) = s.events.get(&(event, generation)).cloned() {
            s.join_into(l, &c);
        }
    }

    /// A notify record on `lane`.
    pub fn notify_record(&self, notify: usize, lane: LaneKey) {
        let mut s = self.state.lock();
        let l = s.lane(lane);
        let c = s.clocks[l as usize].clone();
        s.notifies.entry(notify).or_default().push_back(c);
    }

    /// `lane` consumed a notify record.
    pub fn notify_wait(&self, notify: usize, lane: LaneKey) {
        let mut s = self.state.lock();
        let l = s.lane(lane);
        if let Some(c) = s.notifies.get_mut(&notify).and_then(VecDeque::pop_front) {
            s.join_into(l, &c);
        }
    }

    /// Orders `to` after everything `from` has seen: a stream activation, a model stream
    /// started by an execution, or an execution's end joined back into its caller.
    pub fn order(&self, from: LaneKey, to: LaneKey) {
        let mut s = self.state.lock();
        let (f, t) = (s.lane(from), s.lane(to));
        s.order(f, t);
    }

    /// The calling host thread waited for `stream`'s work.
    pub fn host_synchronized(&self, stream: StreamId) {
        let mut s = self.state.lock();
        let l = s.lane(LaneKey::Stream(stream));
        let host = s.host();
        s.order(l, host);
    }

    /// The calling host thread waited for an event's record `generation`.
    pub fn host_waited_event(&self, event: usize, generation: u64) {
        let mut s = self.state.lock();
        let host = s.host();
        if let Some(c) = s.events.get(&(event, generation)).cloned() {
            s.join_into(host, &c);
        }
    }
}
