//! What `rt2 run --profile`, `--trace` and `--dump-tensors` print and write: the profile
//! as tables or JSON, the trace file, and the dumped tensors with their index. The
//! recordings themselves come from `exec::runtime::subscribers`; every file is written
//! atomically ([`output::write_atomic`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::cmd::format::table;
use crate::cmd::{npy, output};
use crate::exec::runtime::subscribers::{
    DumpedTensor, Profile, ProfileRow, Recording, chrome_trace,
};
use crate::npu::device::TaskRecord;
use crate::ops::HostTensor;

fn us(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

fn rows_json(rows: &[ProfileRow], all: Duration) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            let mut j = json!({"count": r.count, "total_us": us(r.total), "mean_us": us(r.mean()),
                               "share": (r.share(all) * 1e4).round() / 1e4});
            match &r.op_type {
                Some(t) => {
                    j["op"] = json!(r.name);
                    j["op_type"] = json!(t);
                }
                None => j["kernel"] = json!(r.name),
            }
            j
        })
        .collect()
}

/// The `"profile"` key of `rt2 run --format json`.
pub fn profile_json(p: &Profile, iterations: usize) -> Value {
    json!({
        "executions": iterations,
        "host_total_us": us(p.host_total),
        "device_total_us": us(p.device_total),
        "kernels": rows_json(&p.kernels, p.host_total),
        "ops": rows_json(&p.ops, p.host_total),
        "device_ops": rows_json(&p.device_ops, p.device_total),
    })
}

fn rows_table(title: &str, first: &[&str], rows: &[ProfileRow], all: Duration) -> String {
    let mut t = table();
    let mut header = first.to_vec();
    header.extend(["count", "total (us)", "mean (us)", "share"]);
    t.set_header(header);
    for r in rows {
        let mut row = vec![r.name.clone()];
        if first.len() > 1 {
            row.push(r.op_type.clone().unwrap_or_default());
        }
        row.extend([
            r.count.to_string(),
            format!("{:.1}", us(r.total)),
            format!("{:.1}", us(r.mean())),
            format!("{:.1}%", 100.0 * r.share(all)),
        ]);
        t.add_row(row);
    }
    format!("{title}\n{t}\n")
}

/// The tables `rt2 run --profile` prints.
pub fn profile_table(p: &Profile, iterations: usize) -> String {
    let mut out = format!(
        "profile over {iterations} timed execution(s): host {:.1} us in kernels, device {:.1} us \
         in launches\n",
        us(p.host_total),
        us(p.device_total)
    );
    out += &rows_table(
        "host time per kernel type",
        &["kernel"],
        &p.kernels,
        p.host_total,
    );
    out += &rows_table(
        "host time per op (every kernel serving it)",
        &["op", "op type"],
        &p.ops,
        p.host_total,
    );
    out += &rows_table(
        "device time per op (launches on their stream)",
        &["op", "op type"],
        &p.device_ops,
        p.device_total,
    );
    out
}

/// Writes the Chrome trace of `host` and `device` to `path`.
pub fn write_trace(path: &Path, host: &Recording, device: &[TaskRecord]) -> anyhow::Result<()> {
    let doc = chrome_trace(host, device);
    let bytes = serde_json::to_vec(&doc).context("encoding the trace")?;
    output::write_atomic(path, &bytes).with_context(|| format!("--trace {}", path.display()))
}

/// Writes the last dump of each (op, output) to `dir/<op>.<output>.npy` and the list to
/// `dir/index.json`.
pub fn write_dumps(dir: &Path, dumps: &[DumpedTensor]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--dump-tensors {}: cannot create it", dir.display()))?;
    // Last dump per (op, output), ops in the order they first ran.
    let mut ops: Vec<&str> = Vec::new();
    let mut last: BTreeMap<(&str, usize), (&DumpedTensor, usize)> = BTreeMap::new();
    for d in dumps {
        if !ops.contains(&d.op.as_str()) {
            ops.push(&d.op);
        }
        let e = last.entry((&d.op, d.output)).or_insert((d, 0));
        *e = (d, e.1 + 1);
    }
    let files = output::safe_file_names(ops.iter().copied(), "op");
    let mut index = Vec::new();
    for (op, file) in ops.iter().zip(&files) {
        for (&(_, o), &(d, calls)) in last.range((*op, 0)..=(*op, usize::MAX)) {
            let name = format!("{file}.{o}.npy");
            let path = dir.join(&name);
            let t = HostTensor {
                dtype: d.dtype,
                shape: d.shape.clone(),
                data: d.data.to_vec().into(),
            };
            let bytes = npy::write(&t).with_context(|| format!("writing {}", path.display()))?;
            output::write_atomic(&path, &bytes)?;
            index.push(
                json!({"op": d.op, "op_type": d.op_type, "graph": d.graph, "output": o,
                              "dtype": d.dtype.name(), "shape": d.shape, "file": name,
                              "calls": calls}),
            );
        }
    }
    let bytes = serde_json::to_vec_pretty(&json!({ "tensors": index }))?;
    output::write_atomic(&dir.join("index.json"), &bytes)
}
