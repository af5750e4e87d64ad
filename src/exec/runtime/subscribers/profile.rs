//! [`Profile`]: host time per kernel type and per op from a [`Recording`], and device time
//! per op from the device's task records.
//!
//! Host time is each call's self time (an owner kernel's subgraph is counted in the
//! subgraph's nodes, not twice), so the shares of a table add up to 100%. A row's count is
//! the number of calls (kernel table) or of kernel calls serving the op (op table); the
//! device table counts the op's launches and their time on the stream. Rows are sorted by
//! total time, longest first, then by name.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::npu::device::TaskRecord;

use super::recorder::Recording;

/// One row of a profile table.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRow {
    /// The kernel type, or the op's name.
    pub name: String,
    /// The op's type (op rows only).
    pub op_type: Option<String>,
    pub count: u64,
    pub total: Duration,
}

impl ProfileRow {
    pub fn mean(&self) -> Duration {
        match self.count {
            0 => Duration::ZERO,
            n => self.total / n as u32,
        }
    }
    /// This row's part of `all`, 0 to 1.
    pub fn share(&self, all: Duration) -> f64 {
        if all.is_zero() {
            0.0
        } else {
            self.total.as_secs_f64() / all.as_secs_f64()
        }
    }
}

/// See the module doc.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    pub kernels: Vec<ProfileRow>,
    pub ops: Vec<ProfileRow>,
    pub device_ops: Vec<ProfileRow>,
    /// Host time of every call (the sum of the kernel rows).
    pub host_total: Duration,
    /// Device time of every launch (the sum of the device rows).
    pub device_total: Duration,
}

type Key = (String, Option<String>);

fn add(rows: &mut BTreeMap<Key, (u64, Duration)>, key: Key, t: Duration) {
    let e = rows.entry(key).or_default();
    e.0 += 1;
    e.1 += t;
}

fn sorted(rows: BTreeMap<Key, (u64, Duration)>) -> (Vec<ProfileRow>, Duration) {
    let mut v: Vec<ProfileRow> = rows
        .into_iter()
        .map(|((name, op_type), (count, total))| ProfileRow {
            name,
            op_type,
            count,
            total,
        })
        .collect();
    // Stable: equal totals keep the map's name order.
    v.sort_by_key(|r| std::cmp::Reverse(r.total));
    let total = v.iter().map(|r| r.total).sum();
    (v, total)
}

impl Profile {
    pub fn new(host: &Recording, device: &[TaskRecord]) -> Profile {
        let mut kernels = BTreeMap::new();
        let mut ops = BTreeMap::new();
        for s in &host.spans {
            add(&mut kernels, (s.kernel.to_string(), None), s.self_time);
            if let Some((op_type, name)) = &s.op {
                add(&mut ops, (name.clone(), Some(op_type.clone())), s.self_time);
            }
        }
        let mut device_ops = BTreeMap::new();
        for t in device.iter().filter(|t| t.is_launch()) {
            add(
                &mut device_ops,
                (t.name.clone(), t.op.clone()),
                t.end.saturating_duration_since(t.start),
            );
        }
        let (kernels, host_total) = sorted(kernels);
        let (ops, _) = sorted(ops);
        let (device_ops, device_total) = sorted(device_ops);
        Profile {
            kernels,
            ops,
            device_ops,
            host_total,
            device_total,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::recorder::NodeSpan;
    use super::*;
    use crate::npu::device::StreamId;

    fn span(kernel: &'static str, op: Option<(&str, &str)>, us: u64) -> NodeSpan {
        let start = Instant::now();
        NodeSpan {
            thread: 1,
            graph: "Main".into(),
            node: format!("{kernel}_node"),
            kernel,
            op: op.map(|(t, n)| (t.to_string(), n.to_string())),
            trace: Vec::new(),
            start,
            end: start + Duration::from_micros(us),
            self_time: Duration::from_micros(us),
            ok: true,
        }
    }

    fn launch(op: &str, name: &str, us: u64) -> TaskRecord {
        let start = Instant::now();
        TaskRecord {
            stream: StreamId(0),
            kind: "kernel launch",
            op: Some(op.into()),
            name: name.into(),
            start,
            end: start + Duration::from_micros(us),
            ok: true,
        }
    }

    #[test]
    fn rows_add_up_per_kernel_and_per_op_longest_first() {
        let host = Recording {
            spans: vec![
                span("AllocMemHbm", Some(("Add", "add0")), 1),
                span("LaunchKernelWithHandle", Some(("Add", "add0")), 4),
                span("LaunchKernelWithHandle", Some(("Relu", "relu1")), 2),
                span("FreeMemory", None, 3),
            ],
            ..Recording::default()
        };
        let mut memset = launch("", "", 50);
        memset.op = None;
        memset.kind = "memset";
        let device = [
            launch("Add", "add0", 10),
            launch("Relu", "relu1", 30),
            launch("Add", "add0", 10),
            memset,
        ];
        let p = Profile::new(&host, &device);
        let k: Vec<_> = p
            .kernels
            .iter()
            .map(|r| (r.name.as_str(), r.count, r.total.as_micros()))
            .collect();
        assert_eq!(
            k,
            [
                ("LaunchKernelWithHandle", 2, 6),
                ("FreeMemory", 1, 3),
                ("AllocMemHbm", 1, 1)
            ]
        );
        assert_eq!(p.host_total, Duration::from_micros(10));
        assert_eq!(p.kernels[0].share(p.host_total), 0.6);
        assert_eq!(p.kernels[0].mean(), Duration::from_micros(3));
        let o: Vec<_> = p
            .ops
            .iter()
            .map(|r| (r.name.as_str(), r.op_type.as_deref(), r.count))
            .collect();
        assert_eq!(o, [("add0", Some("Add"), 2), ("relu1", Some("Relu"), 1)]);
        let d: Vec<_> = p
            .device_ops
            .iter()
            .map(|r| (r.name.as_str(), r.count, r.total.as_micros()))
            .collect();
        assert_eq!(d, [("relu1", 1, 30), ("add0", 2, 20)]);
        assert_eq!(p.device_total, Duration::from_micros(50));
    }
}
