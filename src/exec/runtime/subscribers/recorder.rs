//! [`NodeRecorder`]: a subscriber that records one [`NodeSpan`] per node call while it is
//! switched on; the profiler and the tracer both read its [`Recording`].
//!
//! Engines call `node_start` and `node_end` on the thread that runs the node, and an
//! owner kernel (If, While, ...) runs its subgraph's nodes inside its own call, so on one
//! thread the calls nest. A thread-local stack of open calls gives each span its start and
//! its self time (the time not spent in nested calls), without any shared state.
//!
//! Finished spans go to [`Chunks`] behind a `Mutex`. topo-mt calls the recorder from three
//! threads at once, but only while recording (off, `node_start`/`node_end` are one relaxed
//! load each and take no lock), and one push per kernel call is short beside the call
//! itself, so the lock is rarely contended; per-thread buffers would have to be found and
//! merged again at the end for no measurable gain. The chunks keep a push from moving
//! the spans before it: in one growing vector the push that doubled it copied every span
//! so far into fresh pages, a stall of 6 ms at 50 executions of a MobileNet and 23 ms at
//! 600, inside a timed execution (`rt2 run --profile` reported it as that execution's
//! latency, and charged it to whichever op's call it delayed).
//!
//! Switch it on and off only between executions (each `node_start` must meet its
//! `node_end` in the same state).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::super::context::{KernelContext, KernelResult, Subscriber};
use crate::npu::device::Chunks;

/// One node call.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpan {
    /// The recorder's number for the thread that ran it (see [`Recording::threads`]).
    pub thread: u32,
    /// The graph's path (`Main`, `Main/if.then`).
    pub graph: String,
    pub node: String,
    pub kernel: &'static str,
    /// The op it serves: (op type, op name), from the kernel's profiling filler, else the
    /// compute node the node was lowered from.
    pub op: Option<(String, String)>,
    /// The kernel's trace printer lines (when the recorder keeps them).
    pub trace: Vec<String>,
    pub start: Instant,
    pub end: Instant,
    /// `end - start` less the nested calls' time (an owner kernel's subgraph).
    pub self_time: Duration,
    pub ok: bool,
}

/// What a recorder recorded.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    pub spans: Vec<NodeSpan>,
    /// Thread number to the thread's name (`main`, `rt2-mt-launch`, ...).
    pub threads: BTreeMap<u32, String>,
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct NodeRecorder {
    on: AtomicBool,
    trace: bool,
    recording: Mutex<Chunked>,
}

/// What [`NodeRecorder`] holds until it is taken: [`Recording`] with its spans in
/// [`Chunks`] (see the module doc).
#[derive(Debug, Default)]
struct Chunked {
    spans: Chunks<NodeSpan>,
    threads: BTreeMap<u32, String>,
}

/// An open call on this thread: its start and its nested calls' time so far.
struct Open {
    start: Instant,
    nested: Duration,
}

thread_local! {
    static OPEN: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
    static THREAD: Cell<u32> = const { Cell::new(0) };
}

/// This thread's number, the first time it asks.
fn thread_number() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    THREAD.with(|t| {
        if t.get() == 0 {
            t.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

impl NodeRecorder {
    /// A recorder, off; `trace`: keep each call's trace printer lines too.
    pub fn new(trace: bool) -> Self {
        NodeRecorder {
            on: AtomicBool::new(false),
            trace,
            recording: Mutex::default(),
        }
    }

    /// Switches recording on or off (between executions only).
    pub fn set(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    /// What was recorded so far; the recorder starts empty again.
    pub fn take(&self) -> Recording {
        let mut c = self
            .recording
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Recording {
            spans: c.spans.take(),
            threads: std::mem::take(&mut c.threads),
        }
    }
}

/// The op a node serves: its kernel's profiling filler, else its origin.
pub(crate) fn served_op(cx: &KernelContext<'_>) -> Option<(String, String)> {
    let info = cx.info();
    if let Some(p) = info.funcs.profiling_filler.and_then(|f| f(cx)) {
        return Some((p.op_type.to_string(), p.op_name.to_string()));
    }
    info.origin
        .as_deref()
        .map(|o| (o.op_type.to_string(), o.node.to_string()))
}

impl Subscriber for NodeRecorder {
    fn node_start(&self, _graph: &str, _cx: &KernelContext<'_>) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        OPEN.with(|o| {
            o.borrow_mut().push(Open {
                start: Instant::now(),
                nested: Duration::ZERO,
            })
        });
    }

    fn node_end(&self, graph: &str, cx: &KernelContext<'_>, result: &KernelResult) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        let end = Instant::now();
        let Some(open) = OPEN.with(|o| {
            let mut o = o.borrow_mut();
            let open = o.pop()?;
            if let Some(parent) = o.last_mut() {
                parent.nested += end - open.start;
            }
            Some(open)
        }) else {
            debug_assert!(false, "node_end without node_start");
            return;
        };
        let info = cx.info();
        let span = NodeSpan {
            thread: thread_number(),
            graph: graph.to_string(),
            node: info.name.clone(),
            kernel: info.kernel,
            op: served_op(cx),
            trace: match info.funcs.trace_printer {
                Some(f) if self.trace => f(cx),
                _ => Vec::new(),
            },
            start: open.start,
            end,
            self_time: (end - open.start).saturating_sub(open.nested),
            ok: result.is_ok(),
        };
        let mut r = self
            .recording
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        r.threads.entry(span.thread).or_insert_with(|| {
            std::thread::current()
                .name()
                .map_or_else(|| format!("thread {}", span.thread), str::to_string)
        });
        r.spans.push(span);
    }
}
