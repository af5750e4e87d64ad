//! A Chrome trace-event document (the JSON object form, `{"traceEvents": [...]}`, which
//! Perfetto and `chrome://tracing` open) of a [`Recording`] and the device's task records.
//!
//! Process 1 is the host: one thread track per executor thread, one complete (`"X"`)
//! event per node call, named after the node, with the kernel type as its category and
//! the op it serves and the kernel's trace lines as args. Process 2 is the device: one
//! thread track per stream (tid = the stream's number), one event per task (`launch
//! <op>`, copies, memsets, event records and waits). Metadata (`"M"`) events name the
//! processes and the threads. Times are microseconds from the earliest recorded start,
//! with nanosecond digits; on each track spans follow one another or nest (an owner
//! kernel around its subgraph's nodes), never partly overlap, because a track is one
//! thread (or one stream worker) and it records a call when the call ends.

use serde_json::{Value, json};

use crate::npu::device::TaskRecord;

use super::recorder::Recording;

pub const HOST_PID: u32 = 1;
pub const DEVICE_PID: u32 = 2;

fn us(ns: u128) -> f64 {
    ns as f64 / 1000.0
}

/// See the module doc.
pub fn chrome_trace(host: &Recording, device: &[TaskRecord]) -> Value {
    let epoch = host
        .spans
        .iter()
        .map(|s| s.start)
        .chain(device.iter().map(|t| t.start))
        .min();
    let mut events = vec![
        json!({"ph": "M", "name": "process_name", "pid": HOST_PID, "tid": 0,
               "args": {"name": "rt2 host (executor threads)"}}),
        json!({"ph": "M", "name": "process_name", "pid": DEVICE_PID, "tid": 0,
               "args": {"name": "npu device (streams)"}}),
    ];
    for (tid, name) in &host.threads {
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": tid,
                           "args": {"name": name}}),
        );
    }
    let mut streams: Vec<u32> = device.iter().map(|t| t.stream.0).collect();
    streams.sort_unstable();
    streams.dedup();
    for s in streams {
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": DEVICE_PID, "tid": s,
                           "args": {"name": format!("stream s{s}")}}),
        );
    }
    let Some(epoch) = epoch else {
        return json!({"traceEvents": events, "displayTimeUnit": "ns"});
    };
    let mut timed: Vec<(u128, Value)> = Vec::with_capacity(host.spans.len() + device.len());
    for s in &host.spans {
        let start = (s.start - epoch).as_nanos();
        let mut args = json!({"kernel": s.kernel, "graph": s.graph, "ok": s.ok});
        if let Some((op_type, op)) = &s.op {
            args["op"] = json!(op);
            args["op_type"] = json!(op_type);
        }
        if !s.trace.is_empty() {
            args["trace"] = json!(s.trace);
        }
        timed.push((
            start,
            json!({"ph": "X", "name": s.node, "cat": s.kernel, "pid": HOST_PID,
                   "tid": s.thread, "ts": us(start), "dur": us((s.end - s.start).as_nanos()),
                   "args": args}),
        ));
    }
    for t in device {
        let start = t.start.saturating_duration_since(epoch).as_nanos();
        let name = match &t.op {
            Some(_) => format!("launch {}", t.name),
            None => format!("{} {}", t.kind, t.name),
        };
        let mut args = json!({"kind": t.kind, "ok": t.ok});
        if let Some(op) = &t.op {
            args["op_type"] = json!(op);
            args["op"] = json!(t.name);
        }
        timed.push((
            start,
            json!({"ph": "X", "name": name, "cat": t.kind, "pid": DEVICE_PID,
                   "tid": t.stream.0, "ts": us(start),
                   "dur": us(t.end.saturating_duration_since(t.start).as_nanos()),
                   "args": args}),
        ));
    }
    // By start, and a span enclosing another that starts at the same time first.
    timed.sort_by_key(|(start, e)| {
        (
            *start,
            std::cmp::Reverse(e["dur"].as_f64().map(|d| (d * 1000.0) as u64)),
        )
    });
    events.extend(timed.into_iter().map(|(_, e)| e));
    json!({"traceEvents": events, "displayTimeUnit": "ns"})
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::recorder::NodeSpan;
    use super::*;
    use crate::npu::device::StreamId;

    #[test]
    fn events_name_tracks_and_count_from_the_earliest_start() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let span = |node: &str, thread, a, b| NodeSpan {
            thread,
            graph: "Main".into(),
            node: node.into(),
            kernel: "LaunchKernelWithHandle",
            op: Some(("Add".into(), "add0".into())),
            trace: vec!["inputs: [2]".into()],
            start: at(a),
            end: at(b),
            self_time: Duration::from_micros(b - a),
            ok: true,
        };
        let host = Recording {
            spans: vec![span("n1", 1, 5, 7), span("n0", 2, 2, 4)],
            threads: [(1, "main".to_string()), (2, "rt2-mt-launch".to_string())].into(),
        };
        let device = [TaskRecord {
            stream: StreamId(3),
            kind: "kernel launch",
            op: Some("Add".into()),
            name: "add0".into(),
            start: at(6),
            end: at(9),
            ok: true,
        }];
        let doc = chrome_trace(&host, &device);
        let ev = doc["traceEvents"].as_array().unwrap();
        let meta: Vec<_> = ev
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .map(|e| {
                (
                    e["pid"].as_u64().unwrap(),
                    e["tid"].as_u64().unwrap(),
                    e["args"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            meta,
            [(1, 1, "main"), (1, 2, "rt2-mt-launch"), (2, 3, "stream s3")]
        );
        let x: Vec<_> = ev
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                (
                    e["name"].as_str().unwrap(),
                    e["tid"].as_u64().unwrap(),
                    e["ts"].as_f64().unwrap(),
                    e["dur"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            x,
            [
                ("n0", 2, 0.0, 2.0),
                ("n1", 1, 3.0, 2.0),
                ("launch add0", 3, 4.0, 3.0)
            ]
        );
        let n1 = ev.iter().find(|e| e["name"] == "n1").unwrap();
        assert_eq!(n1["args"]["op"], "add0");
        assert_eq!(n1["args"]["op_type"], "Add");
        assert_eq!(n1["args"]["trace"][0], "inputs: [2]");
        assert_eq!(n1["cat"], "LaunchKernelWithHandle");
    }

    #[test]
    fn an_empty_recording_is_still_a_trace() {
        let doc = chrome_trace(&Recording::default(), &[]);
        assert_eq!(doc["traceEvents"].as_array().unwrap().len(), 2);
    }
}
