//! `rt2 inspect`: tell what a file is. For an OM: every header field, the partition table
//! of every model, the decoded partitions (MODEL_INOUT_INFO, kernel stores, TASK_INFO,
//! flow submodels); for every kind: each graph's inputs, outputs, node count, op-type
//! histogram, subgraphs, whether it is dynamic, and what the verifier found.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Value, json};

use crate::cmd::format::{ReportFormat, table};
use crate::cmd::input::Input;
use crate::cmd::progress::Progress;
use crate::cmd::status::Status;
use crate::cmd::{input, output};
use crate::exec::{ExecuteGraph, GraphKind, KernelGraph, ModelIo};
use crate::om::container::{OmFile, PartitionType};
use crate::om::file::{ModelFile, ReadOptions};
use crate::om::inout::InOutInfo;
use crate::om::kernel_store::{self, CUSTOM_OP_MAGIC, KERNEL_ITEM_MAGIC};
use crate::om::summary::{self, GraphSummary, TensorSummary};
use crate::om::task::TaskSummary;
use crate::om::verify;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Any file rt2 reads: OM, GE IR binary, GE text dump, GE JSON, ONNX.
    pub file: PathBuf,
    /// `table` for people, `json` for scripts.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
}

#[derive(Debug, Serialize)]
struct PartitionRow {
    model: usize,
    #[serde(rename = "type")]
    kind: String,
    /// Absolute byte offset of the partition's data in the file.
    offset: u64,
    size: u64,
    /// `mem_offset` as stored in the table.
    mem_offset: u64,
}

#[derive(Debug, Serialize)]
struct KernelRow {
    model: usize,
    partition: String,
    name: String,
    size: u64,
}

#[derive(Debug, Serialize)]
struct Report {
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    header: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partitions: Option<Vec<PartitionRow>>,
    graphs: Vec<GraphEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inout: Option<BTreeMap<usize, InOutInfoView>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    kernels: Vec<KernelRow>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    tasks: BTreeMap<usize, TaskSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    flow_submodels: Vec<Value>,
    /// Verifier findings (`error: ...` / `warning: ...`).
    problems: Vec<String>,
}

/// A model's graph summary and, in a file of several models, how it relates to the
/// others (`om::root_model`).
#[derive(Debug, Serialize)]
struct GraphEntry {
    #[serde(flatten)]
    summary: GraphSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    relation: Option<String>,
}

#[derive(Debug, Serialize)]
struct InOutInfoView {
    inputs: Vec<TensorSummary>,
    outputs: Vec<TensorSummary>,
}

fn inout_view(info: &InOutInfo) -> InOutInfoView {
    let view = |v: &[crate::om::inout::TensorDescInfo]| {
        v.iter()
            .map(|t| TensorSummary {
                name: t.name.clone(),
                dtype: t
                    .data_type()
                    .map(|d| d.name().to_string())
                    .unwrap_or_else(|| format!("ge:{}", t.dtype)),
                shape: t.dims.clone(),
            })
            .collect()
    };
    InOutInfoView {
        inputs: view(&info.inputs),
        outputs: view(&info.outputs),
    }
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let progress = Progress::start(args.format == ReportFormat::Table);
    progress.step(format!("reading {}", args.file.display()));
    let file = match input::read_input(&args.file, &ReadOptions::default())? {
        Input::Model(file) => file,
        Input::Exeg(eg) => {
            drop(progress);
            let report = exeg_report(&eg);
            let text = match args.format {
                ReportFormat::Json => serde_json::to_string_pretty(&report)? + "\n",
                ReportFormat::Table => render_exeg(&report),
            };
            output::write_or_print(None, text.as_bytes())?;
            return Ok(Status::Success);
        }
    };
    progress.step("verifying");
    let text =
        report(&file, args.format).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    drop(progress);
    output::write_or_print(None, text.as_bytes())?;
    input::release(file);
    Ok(Status::Success)
}

/// What `rt2 inspect` prints about a model file, in `format` (the fuzz targets build it
/// too, for every file that reads).
pub(crate) fn report(file: &ModelFile, format: ReportFormat) -> anyhow::Result<String> {
    let report = build(file)?;
    Ok(match format {
        ReportFormat::Json => serde_json::to_string_pretty(&report)? + "\n",
        ReportFormat::Table => render(&report),
    })
}

/// GE's own nodes (not made by the ONNX importer) checked against their op type's
/// prototype from a `REG_OP` header ([`crate::ops::ge::prototype`]): a required attribute
/// missing, or a data input count the prototype does not take. Warnings: GE's prototypes
/// change between CANN releases, and a graph may come from another.
fn prototype_problems(g: &crate::om::graph::ComputeGraph) -> Vec<String> {
    use crate::ops::ge::prototype::prototype;
    let mut out = Vec::new();
    for n in &g.nodes {
        for sub in &n.subgraphs {
            out.extend(prototype_problems(sub));
        }
        // The ONNX importer's nodes are ONNX's; a graph's inputs (whose `x` nothing
        // feeds) and outputs are structure.
        let structure = crate::om::graph::is_data_type(&n.op_type)
            || matches!(
                n.op_type.as_str(),
                "Variable" | "NetOutput" | "PlaceHolder" | "End"
            );
        if structure || n.attrs.contains_key(crate::lower::attrs::ONNX_OPSET_ATTR) {
            continue;
        }
        let Some(p) = prototype(&n.op_type).filter(|p| p.from_header()) else {
            continue;
        };
        let place = format!(
            "warning: graph {:?} node {:?} ({})",
            g.name, n.name, n.op_type
        );
        let source = format!("GE's prototype, {}", p.file);
        for a in p.attrs.iter().filter(|a| a.required) {
            if !n.attrs.contains_key(a.name) {
                out.push(format!(
                    "{place}: required attribute {} ({}) is missing ({source})",
                    a.name, a.ty
                ));
            }
        }
        let given = n.inputs.iter().flatten().count();
        let (min, max) = p.input_range();
        if given < min || max.is_some_and(|max| given > max) {
            let takes = match max {
                Some(max) if max == min => format!("{min}"),
                Some(max) => format!("{min} to {max}"),
                None => format!("{min} or more"),
            };
            out.push(format!(
                "{place}: {given} data input(s), the prototype takes {takes} ({source})"
            ));
        }
    }
    out
}

fn build(file: &ModelFile) -> crate::om::Result<Report> {
    let mut problems = Vec::new();
    let relations = crate::om::root_model::relations(&file.models);
    let several = file.models.len() > 1;
    let graphs = file
        .models
        .iter()
        .zip(&relations)
        .map(|(m, relation)| {
            let mut found: Vec<String> = verify::verify(&m.model)
                .iter()
                .map(|p| p.to_string())
                .collect();
            found.extend(prototype_problems(&m.model.root));
            for p in found {
                problems.push(if file.models.len() > 1 {
                    format!("model {}: {p}", m.index)
                } else {
                    p
                });
            }
            GraphEntry {
                summary: summary::summarize(m.index, &m.model),
                relation: several.then(|| relation.describe()),
            }
        })
        .collect();
    let mut report = Report {
        kind: file.kind.name(),
        header: None,
        partitions: None,
        graphs,
        inout: None,
        kernels: Vec::new(),
        tasks: BTreeMap::new(),
        flow_submodels: Vec::new(),
        problems,
    };
    if let Some(om) = &file.om {
        om_details(om, &mut report)?;
    }
    Ok(report)
}

fn om_details(om: &OmFile, report: &mut Report) -> crate::om::Result<()> {
    let h = &om.header;
    report.header = Some(json!({
        "magic": String::from_utf8_lossy(&h.magic.to_le_bytes()),
        "headsize": h.headsize,
        "version": format!("{:#010x}", h.version),
        "checksum_set": h.checksum.iter().any(|&b| b != 0),
        "length": h.length,
        "is_encrypt": h.is_encrypt,
        "is_checksum": h.is_checksum,
        "model_type": h.model_type().name(),
        "genmode": h.genmode,
        "name": h.name(),
        "ops": h.ops,
        "userdefineinfo": String::from_utf8_lossy(&h.userdefineinfo).trim_end_matches('\0'),
        "om_ir_version": h.om_ir_version,
        "model_num": h.model_num,
        "platform_version": h.platform_version(),
        "platform_type": h.platform_type,
        "model_length": h.model_length,
        "need_check_os_cpu_info": h.need_check_os_cpu_info,
        "is_unknow_model": h.is_unknow_model,
        "is_dynamic": h.is_dynamic(),
        "table_format": format!("{:?}", h.table_format()).to_lowercase(),
    }));
    let mut rows = Vec::new();
    let mut offset = 256u64;
    let mut inout = BTreeMap::new();
    for (m, model) in om.models.iter().enumerate() {
        offset += model
            .table_format
            .table_size(model.partitions.len() as u64)
            .unwrap_or(0);
        for p in &model.partitions {
            rows.push(PartitionRow {
                model: m,
                kind: p.kind.name(),
                offset,
                size: p.data.len() as u64,
                mem_offset: p.mem_offset,
            });
            offset += p.data.len() as u64;
            let store = match p.kind {
                PartitionType::TbeKernels
                | PartitionType::CustAicpuKernels
                | PartitionType::SoBins => Some(KERNEL_ITEM_MAGIC),
                PartitionType::CustomOps => Some(CUSTOM_OP_MAGIC),
                _ => None,
            };
            if let Some(magic) = store {
                for item in kernel_store::parse(&p.data, magic, &p.kind.name())? {
                    report.kernels.push(KernelRow {
                        model: m,
                        partition: p.kind.name(),
                        size: item.bin_size(),
                        name: item.name,
                    });
                }
            }
            if p.kind == PartitionType::ModelInoutInfo {
                inout.insert(m, inout_view(&InOutInfo::parse(&p.data)?));
            }
        }
        if let Some(tasks) = model.task_info()? {
            report.tasks.insert(m, TaskSummary::of(&tasks));
        }
        for sub in model.flow_submodels()? {
            report.flow_submodels.push(json!({
                "model": m,
                "name": sub.model_name,
                "model_type": sub.model_type,
                "om_data_size": sub.om_data.len(),
                "graph": sub.graph.as_ref().map(|g| g.name.clone()),
                "graph_nodes": sub.graph.as_ref().map(|g| g.op.len()),
            }));
        }
    }
    report.partitions = Some(rows);
    if !inout.is_empty() {
        report.inout = Some(inout);
    }
    Ok(())
}

fn shape(s: &[i64]) -> String {
    format!(
        "[{}]",
        s.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// Inputs and outputs as one table: side, name, dtype, shape.
fn io_table(inputs: &[TensorSummary], outputs: &[TensorSummary]) -> String {
    let mut t = table();
    t.set_header(["", "name", "dtype", "shape"]);
    for (side, list) in [("input", inputs), ("output", outputs)] {
        for x in list {
            t.add_row([
                side.to_string(),
                x.name.clone(),
                x.dtype.clone(),
                shape(&x.shape),
            ]);
        }
    }
    format!("{t}\n")
}

fn render(r: &Report) -> String {
    let mut out = format!("kind: {}\n", r.kind);
    if let Some(Value::Object(h)) = &r.header {
        out.push_str("\nOM header\n");
        let mut t = table();
        t.set_header(["field", "value"]);
        for (k, v) in h {
            t.add_row([
                k.clone(),
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string()),
            ]);
        }
        out.push_str(&format!("{t}\n"));
    }
    if let Some(parts) = &r.partitions {
        out.push_str("\nPartitions\n");
        let mut t = table();
        t.set_header(["model", "type", "offset", "size"]);
        for p in parts {
            t.add_row([
                p.model.to_string(),
                p.kind.clone(),
                p.offset.to_string(),
                p.size.to_string(),
            ]);
        }
        out.push_str(&format!("{t}\n"));
    }
    for entry in &r.graphs {
        let g = &entry.summary;
        out.push_str(&format!(
            "\nGraph {:?} (model {}): {} nodes, {}\n",
            g.name,
            g.model,
            g.nodes,
            if g.dynamic { "dynamic" } else { "static" }
        ));
        if let Some(rel) = &entry.relation {
            out.push_str(&format!("relation: {rel}\n"));
        }
        out.push_str(&io_table(&g.inputs, &g.outputs));
        let mut t = table();
        t.set_header(["op type", "count"]);
        let mut ops: Vec<_> = g.op_types.iter().collect();
        ops.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (op, n) in ops {
            t.add_row([op.clone(), n.to_string()]);
        }
        out.push_str(&format!("{t}\n"));
        if !g.subgraphs.is_empty() {
            out.push_str(&format!("subgraphs: {}\n", g.subgraphs.join(", ")));
        }
    }
    if !r.kernels.is_empty() {
        out.push_str("\nKernel stores\n");
        let mut t = table();
        t.set_header(["model", "partition", "name", "size"]);
        for k in &r.kernels {
            t.add_row([
                k.model.to_string(),
                k.partition.clone(),
                k.name.clone(),
                k.size.to_string(),
            ]);
        }
        out.push_str(&format!("{t}\n"));
    }
    for (m, tasks) in &r.tasks {
        out.push_str(&format!(
            "\nTasks (model {m}): {} tasks, {} streams, {} events\n",
            tasks.task_count, tasks.stream_num, tasks.event_num
        ));
        let mut t = table();
        t.set_header(["task type", "count"]);
        for (k, n) in &tasks.by_type {
            t.add_row([k.clone(), n.to_string()]);
        }
        out.push_str(&format!("{t}\n"));
    }
    for s in &r.flow_submodels {
        out.push_str(&format!("flow submodel: {s}\n"));
    }
    if r.problems.is_empty() {
        out.push_str("\nverifier: no problems\n");
    } else {
        out.push_str(&format!("\nverifier: {} problem(s)\n", r.problems.len()));
        for p in &r.problems {
            out.push_str(&format!("  {p}\n"));
        }
    }
    out
}

#[derive(Debug, Serialize)]
struct ExegGraphReport {
    name: &'static str,
    /// Nodes in the graph and its subgraphs.
    nodes: usize,
    inputs: Vec<TensorSummary>,
    outputs: Vec<TensorSummary>,
    /// Kernel type -> count (the `op_types` of a ComputeGraph summary).
    op_types: BTreeMap<String, usize>,
    subgraphs: Vec<String>,
}

#[derive(Debug, Serialize)]
struct ExegReport {
    kind: &'static str,
    name: String,
    multi_thread: bool,
    resources: Value,
    graphs: Vec<ExegGraphReport>,
    problems: Vec<String>,
}

fn io_summary(io: &[ModelIo]) -> Vec<TensorSummary> {
    io.iter()
        .map(|t| TensorSummary {
            name: t.name.clone(),
            dtype: t
                .dtype
                .map(|d| d.name().to_string())
                .unwrap_or_else(|| "undefined".into()),
            shape: t.shape.clone(),
        })
        .collect()
}

fn subgraph_names(g: &KernelGraph) -> Vec<String> {
    let mut names = Vec::new();
    g.walk(&mut |s| {
        if !std::ptr::eq(s, g) {
            names.push(s.name.clone());
        }
    });
    names
}

fn exeg_report(eg: &ExecuteGraph) -> ExegReport {
    let graphs = GraphKind::ALL
        .iter()
        .map(|&kind| {
            let g = eg.graph(kind);
            let main = kind == GraphKind::Main;
            ExegGraphReport {
                name: kind.name(),
                nodes: g.total_nodes(),
                inputs: if main {
                    io_summary(&eg.inputs)
                } else {
                    Vec::new()
                },
                outputs: if main {
                    io_summary(&eg.outputs)
                } else {
                    Vec::new()
                },
                op_types: g.kernel_histogram(),
                subgraphs: subgraph_names(g),
            }
        })
        .collect();
    ExegReport {
        kind: "exeg",
        name: eg.name.clone(),
        multi_thread: eg.multi_thread,
        resources: json!({
            "streams": eg.resources.streams,
            "events": eg.resources.events,
            "notifies": eg.resources.notifies,
        }),
        graphs,
        // Reading an `.exeg` (either form) runs every check and refuses a graph with a
        // problem, so there is nothing left to find here; the key stays for scripts.
        problems: Vec::new(),
    }
}

fn render_exeg(r: &ExegReport) -> String {
    let mut out = format!(
        "kind: exeg\nmodel: {}\nmulti-thread: {}\nresources: {}\n",
        r.name,
        if r.multi_thread { "yes" } else { "no" },
        r.resources
    );
    for g in &r.graphs {
        out.push_str(&format!("\n{} graph: {} nodes\n", g.name, g.nodes));
        if !g.inputs.is_empty() || !g.outputs.is_empty() {
            out.push_str(&io_table(&g.inputs, &g.outputs));
        }
        let mut t = table();
        t.set_header(["kernel type", "count"]);
        for (k, n) in &g.op_types {
            t.add_row([k.clone(), n.to_string()]);
        }
        out.push_str(&format!("{t}\n"));
    }
    // A graph with a problem is refused when the file is read; one that got here has none.
    out.push_str("\nchecks: no problems\n");
    out
}
