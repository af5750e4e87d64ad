//! Views of a script run's [`Report`]: the text tables people read, the JSON object
//! scripts read (keys as capture-script.md fixes them), and Graphviz DOT of the captured
//! models. Pure functions from a report to a string or a JSON value; the command layer
//! prints them.

use std::fmt::Write as _;

use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use serde_json::{Value, json};

use super::acl::{CondHandle, ModelRI, ModelSnapshot, RecStream, RecTask};
use super::buffers::BufferReport;
use super::device_kernels::{Buf, DeviceKernelCall};
use super::error::AclError;
use super::names::Names;
use super::runner::{ModelReport, Report, Verdict};
use super::types::Scalar;

fn scalar_json(v: &Scalar) -> Value {
    match v {
        Scalar::Int(i) => json!(i),
        Scalar::Float(f) => json!(f),
    }
}

fn values_text(v: &[Scalar]) -> String {
    let parts: Vec<String> = v.iter().map(Scalar::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn buf_name(names: &Names, b: &Buf) -> String {
    names
        .buffers
        .get(&b.ptr)
        .cloned()
        .unwrap_or_else(|| format!("{}", b.ptr))
}

/// A kernel call in words, e.g. `add_scalar(dst=x, src=x, value=1)`.
pub fn kernel_text(names: &Names, call: &DeviceKernelCall<CondHandle>) -> String {
    let b = |x: &Buf| buf_name(names, x);
    let h = |h: &CondHandle| {
        names
            .handles
            .get(h)
            .cloned()
            .unwrap_or_else(|| format!("handle{}", h.0))
    };
    let args = match call {
        DeviceKernelCall::Fill { dst, value } => format!("dst={}, value={value}", b(dst)),
        DeviceKernelCall::Copy { dst, src } => format!("dst={}, src={}", b(dst), b(src)),
        DeviceKernelCall::Add { dst, a, b: bb } => {
            format!("dst={}, a={}, b={}", b(dst), b(a), b(bb))
        }
        DeviceKernelCall::AddScalar { dst, src, value }
        | DeviceKernelCall::MulScalar { dst, src, value } => {
            format!("dst={}, src={}, value={value}", b(dst), b(src))
        }
        DeviceKernelCall::Increment { dst, index, by } => {
            format!("dst={}, index={index}, by={by}", b(dst))
        }
        DeviceKernelCall::SetCond { cond, src, index } => {
            format!("handle={}, src={}, index={index}", h(cond), b(src))
        }
        DeviceKernelCall::SetCondLt {
            cond,
            src,
            index,
            limit,
        } => format!(
            "handle={}, src={}, index={index}, limit={limit}",
            h(cond),
            b(src)
        ),
    };
    format!("{}({args})", call.name())
}

fn model_name(names: &Names, m: &ModelRI) -> String {
    names
        .models
        .get(m)
        .cloned()
        .unwrap_or_else(|| format!("model{}", m.0))
}

/// A recorded task in words.
pub fn task_text(names: &Names, t: &RecTask) -> String {
    match t {
        RecTask::DeviceKernel {
            call,
            enabled,
            group,
        } => {
            let mut s = kernel_text(names, call);
            if let Some(g) = group {
                let g = names
                    .groups
                    .get(g)
                    .cloned()
                    .unwrap_or_else(|| format!("group{}", g.0));
                let _ = write!(s, " [group {g}]");
            }
            if !enabled {
                s.push_str(" [disabled]");
            }
            s
        }
        RecTask::EventRecord(i) => format!("event_record(#{i})"),
        RecTask::EventWait(i) => format!("event_wait(#{i})"),
        RecTask::Activate(i) => format!("stream_activate(stream {i})"),
        RecTask::Cond {
            handle,
            kind,
            models,
        } => {
            let h = names
                .handles
                .get(handle)
                .cloned()
                .unwrap_or_else(|| format!("handle{}", handle.0));
            let ms: Vec<String> = models.iter().map(|m| model_name(names, m)).collect();
            format!("{kind}({h}) -> [{}]", ms.join(", "))
        }
    }
}

fn stream_name(names: &Names, s: &RecStream) -> String {
    s.user
        .and_then(|u| names.streams.get(&u).cloned())
        .unwrap_or_else(|| "-".into())
}

fn count_tasks(s: &ModelSnapshot) -> usize {
    s.streams.iter().map(|x| x.tasks.len()).sum()
}

/// The JSON object of one model (recursively with its sub-models).
pub fn model_json(names: &Names, m: &ModelReport) -> Value {
    let Some(s) = &m.snapshot else {
        return json!({
            "name": m.name, "status": "DESTROYED", "streams": [], "tasks": 0,
            "task_groups": [], "cond_tasks": [], "sub_models": [],
        });
    };
    let streams: Vec<Value> = s
        .streams
        .iter()
        .enumerate()
        .map(|(i, x)| {
            json!({
                "index": i,
                "stream": stream_name(names, x),
                "cascade": !x.active_at_start,
                "tasks": x.tasks.iter().map(|t| task_text(names, t)).collect::<Vec<_>>(),
            })
        })
        .collect();
    let groups: Vec<Value> = s
        .groups
        .iter()
        .map(|g| {
            let tasks: Vec<Value> = s
                .streams
                .iter()
                .enumerate()
                .flat_map(|(si, x)| {
                    x.tasks
                        .iter()
                        .enumerate()
                        .filter_map(move |(ti, t)| match t {
                            RecTask::DeviceKernel {
                                group: Some(tg), ..
                            } if tg == g => Some(json!([si, ti])),
                            _ => None,
                        })
                })
                .collect();
            json!({
                "name": names.groups.get(g).cloned().unwrap_or_else(|| format!("group{}", g.0)),
                "tasks": tasks,
            })
        })
        .collect();
    let conds: Vec<Value> =
        s.streams
            .iter()
            .enumerate()
            .flat_map(|(si, x)| {
                x.tasks.iter().enumerate().filter_map(move |(ti, t)| match t {
                RecTask::Cond {
                    handle,
                    kind,
                    models,
                } => Some(json!({
                    "stream": si,
                    "task": ti,
                    "type": kind.name(),
                    "handle": names.handles.get(handle).cloned().unwrap_or_default(),
                    "models": models.iter().map(|m| model_name(names, m)).collect::<Vec<_>>(),
                })),
                _ => None,
            })
            })
            .collect();
    json!({
        "name": m.name,
        "status": s.status.name(),
        "streams": streams,
        "tasks": count_tasks(s),
        "task_groups": groups,
        "cond_tasks": conds,
        "sub_models": m.subs.iter().map(|x| model_json(names, x)).collect::<Vec<_>>(),
    })
}

fn buffers_json(buffers: &[BufferReport]) -> Value {
    let mut map = serde_json::Map::new();
    for b in buffers {
        map.insert(
            b.name.clone(),
            Value::Array(b.values.iter().map(scalar_json).collect()),
        );
    }
    Value::Object(map)
}

fn result_text(r: &Result<String, AclError>) -> String {
    match r {
        Ok(d) if d.is_empty() => "ok".into(),
        Ok(d) => format!("ok: {d}"),
        Err(e) => e.to_string(),
    }
}

/// The run as one JSON object: `steps`, `models`, `buffers`, `expectations` (and `name`,
/// `passed`).
pub fn to_json(r: &Report) -> Value {
    let steps: Vec<Value> = r
        .steps
        .iter()
        .map(|s| {
            let mut o = json!({
                "line": s.line,
                "call": s.call,
                "thread": s.thread,
                "result": match &s.result {
                    Ok(_) => "ok".to_string(),
                    Err(e) => e.name().to_string(),
                },
            });
            if let Err(e) = &s.result {
                o["code"] = json!(e.code());
            }
            match &s.verdict {
                Verdict::Ok => {}
                Verdict::Failed => o["failed"] = json!("the call failed unexpectedly"),
                Verdict::Mismatch(m) => o["failed"] = json!(m),
            }
            o
        })
        .collect();
    let mut j = json!({
        "name": r.name,
        "passed": r.passed(),
        "steps": steps,
        "models": r.models.iter().map(|m| model_json(&r.names, m)).collect::<Vec<_>>(),
        "buffers": buffers_json(&r.buffers),
        "expectations": r.expectations.iter().map(|e| json!({
            "line": e.line,
            "buffer": e.buffer,
            "passed": e.passed,
        })).collect::<Vec<_>>(),
    });
    // The sanitizer's report when it found something (a clean one is not news).
    if let Some(s) = r.sanitizer.as_ref().filter(|s| !s.is_clean()) {
        j["sanitizer"] = serde_json::to_value(s).unwrap_or(Value::Null);
    }
    j
}

/// Buffers alone as JSON (`rt2 replay --format json`).
pub fn buffers_to_json(buffers: &[BufferReport]) -> Value {
    json!({ "buffers": buffers_json(buffers) })
}

fn model_text(out: &mut String, names: &Names, m: &ModelReport, depth: usize) {
    let pad = "  ".repeat(depth);
    let Some(s) = &m.snapshot else {
        let _ = writeln!(out, "{pad}model {}: DESTROYED", m.name);
        return;
    };
    let cascades = s.streams.iter().filter(|x| !x.active_at_start).count();
    let conds = s
        .streams
        .iter()
        .flat_map(|x| &x.tasks)
        .filter(|t| matches!(t, RecTask::Cond { .. }))
        .count();
    let _ = writeln!(
        out,
        "{pad}model {}: {}, {} streams ({cascades} cascade), {} tasks, {} task groups, {conds} cond tasks",
        m.name,
        s.status.name(),
        s.streams.len(),
        count_tasks(s),
        s.groups.len(),
    );
    for (i, x) in s.streams.iter().enumerate() {
        let kind = if x.active_at_start { "" } else { ", cascade" };
        let _ = writeln!(out, "{pad}  stream {i} ({}{kind}):", stream_name(names, x));
        for (j, t) in x.tasks.iter().enumerate() {
            let _ = writeln!(out, "{pad}    {j}: {}", task_text(names, t));
        }
    }
    for sub in &m.subs {
        model_text(out, names, sub, depth + 1);
    }
}

/// The run as text: steps, models, buffers, expectations.
pub fn to_text(r: &Report) -> String {
    let mut out = String::new();
    if let Some(n) = &r.name {
        let _ = writeln!(out, "script {n}");
    }
    let mut steps = Table::new();
    steps
        .load_style(UTF8_BORDERS_ONLY)
        .set_header(["line", "call", "thread", "result", "verdict"]);
    for s in &r.steps {
        let verdict = match &s.verdict {
            Verdict::Ok => "ok".to_string(),
            Verdict::Failed => "FAILED: the call failed unexpectedly".to_string(),
            Verdict::Mismatch(m) => format!("FAILED: {m}"),
        };
        steps.add_row([
            s.line.to_string(),
            s.call.to_string(),
            s.thread.clone(),
            result_text(&s.result),
            verdict,
        ]);
    }
    let _ = writeln!(out, "{steps}");
    if !r.models.is_empty() {
        let _ = writeln!(out, "\nmodels");
        for m in &r.models {
            model_text(&mut out, &r.names, m, 1);
        }
    }
    out.push_str(&buffers_to_text(&r.buffers));
    if !r.expectations.is_empty() {
        let _ = writeln!(out, "\nexpectations");
        for e in &r.expectations {
            if e.passed {
                let _ = writeln!(out, "  line {}: {} passed", e.line, e.buffer);
            } else {
                let _ = writeln!(
                    out,
                    "  line {}: {} FAILED: expected {}, found {}",
                    e.line,
                    e.buffer,
                    values_text(&e.expected),
                    values_text(&e.actual)
                );
            }
        }
    }
    let _ = writeln!(out, "\n{}", if r.passed() { "passed" } else { "FAILED" });
    if let Some(san) = r.sanitizer.as_ref().filter(|s| !s.is_clean()) {
        let _ = writeln!(
            out,
            "sanitizer: {} finding(s)",
            san.findings.len() as u64 + san.dropped
        );
        for f in &san.findings {
            let _ = writeln!(out, "  {}", f.line());
        }
    }
    out
}

/// Buffers as a text table.
pub fn buffers_to_text(buffers: &[BufferReport]) -> String {
    if buffers.is_empty() {
        return String::new();
    }
    let mut t = Table::new();
    t.load_style(UTF8_BORDERS_ONLY)
        .set_header(["buffer", "dtype", "values"]);
    for b in buffers {
        t.add_row([b.name.clone(), b.dtype.to_string(), values_text(&b.values)]);
    }
    format!("\nbuffers\n{t}\n")
}

fn dot_id(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn model_dot(out: &mut String, names: &Names, m: &ModelReport, path: &str) {
    let Some(s) = &m.snapshot else { return };
    let _ = writeln!(out, "  subgraph {} {{", dot_id(&format!("cluster_{path}")));
    let _ = writeln!(
        out,
        "    label={};",
        dot_id(&format!("{} ({})", m.name, s.status.name()))
    );
    let node = |si: usize, ti: usize| dot_id(&format!("{path}/s{si}/t{ti}"));
    let mut records = Vec::new();
    let mut waits = Vec::new();
    for (si, x) in s.streams.iter().enumerate() {
        let _ = writeln!(
            out,
            "    subgraph {} {{",
            dot_id(&format!("cluster_{path}/s{si}"))
        );
        let _ = writeln!(
            out,
            "      label={};",
            dot_id(&format!("stream {si} ({})", stream_name(names, x)))
        );
        if x.tasks.is_empty() {
            let _ = writeln!(
                out,
                "      {} [label=\"(empty)\", shape=plaintext];",
                node(si, 0)
            );
        }
        for (ti, t) in x.tasks.iter().enumerate() {
            let shape = match t {
                RecTask::DeviceKernel { .. } => "box",
                RecTask::Cond { .. } => "diamond",
                _ => "ellipse",
            };
            let _ = writeln!(
                out,
                "      {} [label={}, shape={shape}];",
                node(si, ti),
                dot_id(&task_text(names, t))
            );
            if ti > 0 {
                let _ = writeln!(out, "      {} -> {};", node(si, ti - 1), node(si, ti));
            }
            match t {
                RecTask::EventRecord(e) => records.push((*e, node(si, ti))),
                RecTask::EventWait(e) => waits.push((*e, node(si, ti))),
                _ => {}
            }
        }
        let _ = writeln!(out, "    }}");
    }
    for (e, from) in &records {
        for (w, to) in &waits {
            if w == e {
                let _ = writeln!(out, "    {from} -> {to} [style=dashed, label=\"#{e}\"];");
            }
        }
    }
    for (si, x) in s.streams.iter().enumerate() {
        for (ti, t) in x.tasks.iter().enumerate() {
            if let RecTask::Activate(k) = t {
                let _ = writeln!(
                    out,
                    "    {} -> {} [style=bold];",
                    node(si, ti),
                    node(*k as usize, 0)
                );
            }
        }
    }
    let _ = writeln!(out, "  }}");
    for (k, sub) in m.subs.iter().enumerate() {
        let sub_path = format!("{path}/{k}");
        model_dot(out, names, sub, &sub_path);
        let Some(ss) = &sub.snapshot else { continue };
        // The conditional task that runs this sub-model, to its first task.
        for (si, x) in s.streams.iter().enumerate() {
            for (ti, t) in x.tasks.iter().enumerate() {
                if let RecTask::Cond { models, .. } = t
                    && models.contains(&sub.model)
                    && !ss.streams.is_empty()
                {
                    let _ = writeln!(
                        out,
                        "  {} -> {} [style=dotted, lhead={}];",
                        node(si, ti),
                        dot_id(&format!("{sub_path}/s0/t0")),
                        dot_id(&format!("cluster_{sub_path}"))
                    );
                }
            }
        }
    }
}

/// The captured models as one Graphviz digraph: a cluster per model and per model
/// stream, task order as solid edges, event record to wait as dashed ones, cascade
/// activations bold, conditional tasks dotted to their sub-models.
pub fn to_dot(r: &Report) -> String {
    let mut out = String::from("digraph capture {\n  compound=true;\n  node [fontsize=10];\n");
    for (i, m) in r.models.iter().enumerate() {
        model_dot(&mut out, &r.names, m, &format!("m{i}"));
    }
    out.push_str("}\n");
    out
}
