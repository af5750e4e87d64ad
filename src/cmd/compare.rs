//! `rt2 compare REFERENCE CANDIDATE`: accuracy comparison op by op, as CANN's accuracy
//! comparison tool does it on two dumps from the NPU, here without one.
//!
//! Both models run once on the same inputs under the tensor dumper (the `--dump-tensors`
//! machinery: every launch's outputs copied back in stream order). Ops are matched by
//! name, and where GE's fusion merged ops, by the `_datadump_original_op_names` the fused
//! op records: a fused op stands for the last of its original ops that the other model ran
//! (the pattern's output), and the others it absorbed are counted as fused, not missing.
//! Each matched output is compared in its origin layout (a tensor a model holds in a
//! storage format, NC1HWC0 say, is converted back by its descriptor's origin format and
//! shape first) and in float64: cosine similarity, the largest absolute and relative
//! errors, and how many elements lie beyond `|c - r| <= atol + rtol * |r|` (r the
//! reference's value, c the candidate's). The first op, in the candidate's execution
//! order, with an element beyond the tolerance (or a shape that differs) is the
//! divergence; finding one exits 1.
//!
//! The default tolerance follows the coarser element type of the pair, since a float16
//! model cannot be held to float32's: see [`default_tolerance`].

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};

use crate::cmd::check::{self, Tolerance, float_error};
use crate::cmd::feed::{self, shape_text};
use crate::cmd::format::{ReportFormat, table};
use crate::cmd::input::{self, Input};
use crate::cmd::progress::Progress;
use crate::cmd::run::{computable, executor_parser};
use crate::cmd::status::{CheckFailure, Status};
use crate::exec::runtime::ExecutorType;
use crate::exec::runtime::session::{Session, SessionConfig};
use crate::exec::runtime::subscribers::DumpedTensor;
use crate::exec::{ExecuteGraph, ModelIo};
use crate::formats::{StorageFormat, transfer};
use crate::lower::LowerOptions;
use crate::lower::attrs::TensorFormat;
use crate::npu::device::{Device, DeviceConfig, default_memory_bytes};
use crate::om::graph::{AttrValue, ComputeGraph, ListAttr};
use crate::ops::{DType, HostTensor};

/// The attribute GE's fusion passes write on a fused op: the names of the ops it replaced.
pub const ORIGINAL_OP_NAMES: &str = "_datadump_original_op_names";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The reference model: any file `rt2 run` takes (ONNX, OM, GE IR binary, GE text
    /// dump, GE JSON, `.exeg`). Its inputs decide the feed (--input, --shape, --seed,
    /// --weights, as for `rt2 run`); the candidate gets the same values, matched by input
    /// name, else by position, converted to its float type where the two differ.
    pub reference: PathBuf,
    /// The model compared with it: the OM compiled from the reference, a later stage's GE
    /// dump of the same network, a float16 form of it.
    pub candidate: PathBuf,
    #[command(flatten)]
    pub feed: feed::FeedArgs,
    /// The executor both models run under (every executor gives the same bits; the order
    /// of ops, and so which divergence is first, is the executor's).
    #[arg(long, default_value = "seq", value_parser = executor_parser())]
    pub executor: ExecutorType,
    /// Relative tolerance: |candidate - reference| <= atol + rtol * |reference|. Default:
    /// 1e-3 when both are float32 or float64, 1e-2 with a float16, 4e-2 with a bfloat16.
    #[arg(long)]
    pub rtol: Option<f64>,
    /// Absolute tolerance. Default: 1e-4 when both are float32 or float64, 1e-2 with a
    /// float16 or bfloat16.
    #[arg(long)]
    pub atol: Option<f64>,
    /// Report format: a table per matched op and a summary, or JSON.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
}

/// The default tolerance for a pair of element types: that of the coarser float type.
/// float16 has 11 significant bits (a rounding error up to 2^-11 per operation, and a
/// network compounds a few of them), bfloat16 8; integers and bools must be equal
/// whatever the tolerance.
pub fn default_tolerance(a: DType, b: DType) -> Tolerance {
    let rank = |d: DType| match d {
        DType::Bf16 => 2,
        DType::F16 => 1,
        _ => 0,
    };
    match rank(a).max(rank(b)) {
        2 => Tolerance {
            rtol: 4e-2,
            atol: 1e-2,
        },
        1 => Tolerance {
            rtol: 1e-2,
            atol: 1e-2,
        },
        _ => Tolerance {
            rtol: 1e-3,
            atol: 1e-4,
        },
    }
}

/// What one model's ops are, from its ComputeGraph: the fusion record and each output's
/// formats. Empty for an `.exeg`, which keeps no ComputeGraph.
#[derive(Debug, Default)]
struct NodeFacts {
    originals: Vec<String>,
    outputs: Vec<TensorFormat>,
}

/// One model, lowered, with its ops' facts.
struct Side {
    path: PathBuf,
    eg: Arc<ExecuteGraph>,
    facts: HashMap<String, NodeFacts>,
}

impl Side {
    fn load(path: &Path, progress: &Progress) -> anyhow::Result<Side> {
        progress.step(format!("reading {}", path.display()));
        let (eg, facts) = match input::read_input(path, &Default::default())? {
            Input::Exeg(eg) => (eg, HashMap::new()),
            Input::Model(file) => {
                let mut facts = HashMap::new();
                collect_facts(&file.root().model.root, &mut facts);
                progress.step(format!("lowering {}", path.display()));
                let eg = input::lower_model(path, &file, 0, &LowerOptions::default())?;
                input::release(file);
                (eg, facts)
            }
        };
        computable(path, &eg)?;
        Ok(Side {
            path: path.to_path_buf(),
            eg: Arc::new(eg),
            facts,
        })
    }

    fn run(
        &self,
        executor: ExecutorType,
        inputs: &[HostTensor],
    ) -> anyhow::Result<Vec<DumpedTensor>> {
        let device = Device::try_new(DeviceConfig {
            memory_bytes: default_memory_bytes(),
            ..DeviceConfig::default()
        })?;
        let config = SessionConfig {
            executor,
            ..SessionConfig::default()
        };
        let session = Session::new(&self.eg, &device, &config);
        let refs: Vec<&HostTensor> = inputs.iter().collect();
        session
            .dump_tensors(&refs)
            .map_err(|e| anyhow::Error::new(CheckFailure(format!("{}: {e}", self.path.display()))))
    }
}

/// Every node of `g` and its subgraphs that records original ops or output formats.
fn collect_facts(g: &ComputeGraph, out: &mut HashMap<String, NodeFacts>) {
    for n in &g.nodes {
        let text = |b: &Vec<u8>| String::from_utf8_lossy(b).into_owned();
        let originals: Vec<String> = match n.attrs.get(ORIGINAL_OP_NAMES) {
            Some(AttrValue::List(ListAttr::Str(items))) => items.iter().map(text).collect(),
            Some(AttrValue::Str(s)) => vec![text(s)],
            _ => Vec::new(),
        };
        let originals = originals.into_iter().filter(|s| !s.is_empty()).collect();
        out.insert(
            n.name.clone(),
            NodeFacts {
                originals,
                outputs: n.output_descs.iter().map(TensorFormat::of).collect(),
            },
        );
        for sub in &n.subgraphs {
            collect_facts(sub, out);
        }
    }
}

/// One op's dumped outputs: `calls[o]` lists output `o`'s copies in call order (a launch
/// in a loop body runs once per iteration).
struct DumpedOp<'a> {
    name: &'a str,
    op_type: &'a str,
    graph: &'a str,
    calls: Vec<Vec<&'a DumpedTensor>>,
}

/// The dumps grouped by op, ops in the order they first ran.
fn group(dumps: &[DumpedTensor]) -> Vec<DumpedOp<'_>> {
    let mut ops: Vec<DumpedOp<'_>> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for d in dumps {
        let k = *at.entry(&d.op).or_insert_with(|| {
            ops.push(DumpedOp {
                name: &d.op,
                op_type: &d.op_type,
                graph: &d.graph,
                calls: Vec::new(),
            });
            ops.len() - 1
        });
        let calls = &mut ops[k].calls;
        if calls.len() <= d.output {
            calls.resize_with(d.output + 1, Vec::new);
        }
        calls[d.output].push(d);
    }
    ops
}

/// How a candidate op found its reference op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MatchedBy {
    Name,
    /// The candidate op's fusion record names the reference op.
    CandidateFusion,
    /// The reference op's fusion record names the candidate op.
    ReferenceFusion,
}

impl MatchedBy {
    fn name(self) -> &'static str {
        match self {
            MatchedBy::Name => "name",
            MatchedBy::CandidateFusion => "candidate's original_op_names",
            MatchedBy::ReferenceFusion => "reference's original_op_names",
        }
    }
}

/// The pairs (reference op, candidate op) in the candidate's order, and the ops of each
/// model that a fused op of the other stands for besides its match.
struct Matching {
    pairs: Vec<(usize, usize, MatchedBy)>,
    fused_reference: Vec<usize>,
    fused_candidate: Vec<usize>,
}

/// Matches ops by name, then by fusion records (see the module doc).
fn match_ops(
    r: &[DumpedOp<'_>],
    r_facts: &HashMap<String, NodeFacts>,
    c: &[DumpedOp<'_>],
    c_facts: &HashMap<String, NodeFacts>,
) -> Matching {
    let r_at: HashMap<&str, usize> = r.iter().enumerate().map(|(i, o)| (o.name, i)).collect();
    let c_at: HashMap<&str, usize> = c.iter().enumerate().map(|(i, o)| (o.name, i)).collect();
    let mut m = Matching {
        pairs: Vec::new(),
        fused_reference: Vec::new(),
        fused_candidate: Vec::new(),
    };
    // A fused op stands for the last of its original ops the other model ran (the
    // pattern's output); the others it absorbed.
    let stands_for = |originals: &[String], other: &HashMap<&str, usize>| {
        let mut ran = originals
            .iter()
            .filter_map(|n| other.get(n.as_str()).copied());
        let last = ran.next_back();
        (last, ran.collect::<Vec<usize>>())
    };
    // The reference's fused ops, seen from the candidate's ops they stand for.
    let mut reverse: HashMap<usize, usize> = HashMap::new();
    for (ri, op) in r.iter().enumerate() {
        let originals = r_facts.get(op.name).map_or(&[][..], |f| &f.originals[..]);
        if c_at.contains_key(op.name) {
            continue;
        }
        if let (Some(ci), absorbed) = stands_for(originals, &c_at) {
            reverse.entry(ci).or_insert(ri);
            m.fused_candidate.extend(absorbed);
        }
    }
    let mut taken = HashSet::new();
    for (ci, op) in c.iter().enumerate() {
        let originals = c_facts.get(op.name).map_or(&[][..], |f| &f.originals[..]);
        let found = if let Some(&ri) = r_at.get(op.name) {
            Some((ri, MatchedBy::Name))
        } else if let (Some(ri), absorbed) = stands_for(originals, &r_at) {
            m.fused_reference.extend(absorbed);
            Some((ri, MatchedBy::CandidateFusion))
        } else {
            reverse.get(&ci).map(|&ri| (ri, MatchedBy::ReferenceFusion))
        };
        if let Some((ri, by)) = found
            && taken.insert(ri)
        {
            m.pairs.push((ri, ci, by));
        }
    }
    let paired: HashSet<usize> = m.pairs.iter().map(|p| p.1).collect();
    for (list, paired) in [
        (&mut m.fused_reference, &taken),
        (&mut m.fused_candidate, &paired),
    ] {
        list.retain(|i| !paired.contains(i));
        list.sort_unstable();
        list.dedup();
    }
    m
}

/// A tensor's values in float64, in its origin layout where its descriptor records one.
struct Values {
    dtype: DType,
    shape: Vec<i64>,
    values: Vec<f64>,
    /// Integers and bools: compared exactly.
    exact: bool,
}

fn origin_values(d: &DumpedTensor, format: Option<&TensorFormat>) -> Values {
    let mut t = HostTensor {
        dtype: d.dtype,
        shape: d.shape.clone(),
        data: d.data.to_vec().into(),
    };
    if let Some(origin) = format.and_then(|f| to_origin(&t, f)) {
        t = origin;
    }
    Values {
        dtype: t.dtype,
        exact: !matches!(t.dtype, DType::F32 | DType::F64 | DType::F16 | DType::Bf16),
        values: check::elements(&t),
        shape: t.shape,
    }
}

/// `t` converted from its storage format to its origin format, when it is held in a
/// storage form (its shape is not the origin shape) that a transfer undoes.
fn to_origin(t: &HostTensor, f: &TensorFormat) -> Option<HostTensor> {
    let origin = f.origin_shape.as_ref()?;
    if f.format == f.origin_format || *origin == t.shape {
        return None;
    }
    let dims =
        |s: &[i64]| -> Option<Vec<usize>> { s.iter().map(|&d| usize::try_from(d).ok()).collect() };
    let (src_shape, dst_shape) = (dims(&t.shape)?, dims(origin)?);
    let src = StorageFormat::from_int(f.format).ok()?;
    let dst = StorageFormat::from_int(f.origin_format).ok()?;
    let mut data = vec![0u8; dst_shape.iter().product::<usize>() * t.dtype.size()];
    transfer(
        (src, &src_shape, &t.data),
        (dst, &dst_shape, &mut data),
        t.dtype,
    )
    .ok()?;
    Some(HostTensor {
        dtype: t.dtype,
        shape: origin.clone(),
        data: data.into(),
    })
}

/// One matched output, compared.
struct Row {
    reference_op: String,
    candidate_op: String,
    op_type: String,
    graph: String,
    output: usize,
    call: usize,
    by: MatchedBy,
    shapes: (Vec<i64>, Vec<i64>),
    dtypes: (DType, DType),
    tol: Tolerance,
    elements: usize,
    metrics: Metrics,
}

impl Row {
    fn within(&self) -> bool {
        self.metrics.problem.is_none() && self.metrics.mismatches == 0
    }
}

/// What comparing two outputs found.
struct Metrics {
    /// Over the elements both hold as finite numbers; `None` where there are none.
    cosine: Option<f64>,
    max_abs_err: f64,
    max_rel_err: f64,
    mismatches: usize,
    /// Why the outputs are not comparable element by element (their element counts).
    problem: Option<String>,
    /// Shapes that differ but hold as many elements: compared flat, and said.
    note: Option<String>,
}

fn compare_values(r: &Values, c: &Values, tol: Tolerance) -> Metrics {
    let shapes = || {
        format!(
            "shape {} against the reference's {}",
            shape_text(&c.shape),
            shape_text(&r.shape)
        )
    };
    if r.values.len() != c.values.len() {
        return Metrics {
            cosine: None,
            max_abs_err: f64::INFINITY,
            max_rel_err: f64::INFINITY,
            mismatches: 0,
            problem: Some(shapes()),
            note: None,
        };
    }
    let exact = r.exact || c.exact;
    let (mut dot, mut rr, mut cc) = (0.0f64, 0.0f64, 0.0f64);
    let mut m = Metrics {
        cosine: None,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        mismatches: 0,
        problem: None,
        note: (r.shape != c.shape).then(|| format!("{} (compared element by element)", shapes())),
    };
    for (&a, &b) in r.values.iter().zip(&c.values) {
        // The reference is the expected value, as `rt2 run --check`'s data set is.
        let (err, close) = if exact {
            ((a - b).abs(), a == b)
        } else {
            float_error(b, a, tol)
        };
        if a.is_finite() && b.is_finite() {
            dot += a * b;
            rr += a * a;
            cc += b * b;
        }
        m.max_abs_err = m.max_abs_err.max(err);
        if a != 0.0 && a.is_finite() {
            m.max_rel_err = m.max_rel_err.max(err / a.abs());
        }
        m.mismatches += usize::from(!close);
    }
    m.cosine = if rr == 0.0 && cc == 0.0 {
        // Two zero tensors point the same way.
        (!r.values.is_empty()).then_some(1.0)
    } else if rr == 0.0 || cc == 0.0 {
        Some(0.0)
    } else {
        // One square root of the product: identical tensors give exactly 1 (the sums
        // of float32 or float16 squares are far from overflowing f64 when multiplied).
        Some((dot / (rr * cc).sqrt()).clamp(-1.0, 1.0))
    };
    m
}

fn rows(
    reference: (&Side, &[DumpedOp<'_>]),
    candidate: (&Side, &[DumpedOp<'_>]),
    matching: &Matching,
    tol: (Option<f64>, Option<f64>),
) -> Vec<Row> {
    let mut rows = Vec::new();
    for &(ri, ci, by) in &matching.pairs {
        let (r, c) = (&reference.1[ri], &candidate.1[ci]);
        let r_facts = reference.0.facts.get(r.name);
        let c_facts = candidate.0.facts.get(c.name);
        for (output, (r_calls, c_calls)) in r.calls.iter().zip(&c.calls).enumerate() {
            for (call, (rd, cd)) in r_calls.iter().zip(c_calls).enumerate() {
                let rv = origin_values(rd, r_facts.and_then(|f| f.outputs.get(output)));
                let cv = origin_values(cd, c_facts.and_then(|f| f.outputs.get(output)));
                let default = default_tolerance(rv.dtype, cv.dtype);
                let tol = Tolerance {
                    rtol: tol.0.unwrap_or(default.rtol),
                    atol: tol.1.unwrap_or(default.atol),
                };
                let metrics = compare_values(&rv, &cv, tol);
                rows.push(Row {
                    reference_op: r.name.to_string(),
                    candidate_op: c.name.to_string(),
                    op_type: c.op_type.to_string(),
                    graph: c.graph.to_string(),
                    output,
                    call,
                    by,
                    shapes: (rv.shape, cv.shape),
                    dtypes: (rv.dtype, cv.dtype),
                    tol,
                    elements: rv.values.len().max(cv.values.len()),
                    metrics,
                });
            }
        }
    }
    rows
}

/// The candidate's inputs: the reference's values, matched by name, else by position,
/// converted to the candidate's float type where the two differ.
fn candidate_inputs(
    reference: &Side,
    r_inputs: &[HostTensor],
    candidate: &Side,
) -> anyhow::Result<Vec<HostTensor>> {
    let at = candidate.path.display();
    candidate
        .eg
        .inputs
        .iter()
        .enumerate()
        .map(|(k, io)| {
            let ri = reference
                .eg
                .inputs
                .iter()
                .position(|r| r.name == io.name)
                .or_else(|| (k < reference.eg.inputs.len()).then_some(k))
                .ok_or_else(|| {
                    anyhow!(
                        "{at}: input {k} {:?}: the reference {} has {} input(s) and none of that name",
                        io.name,
                        reference.path.display(),
                        reference.eg.inputs.len()
                    )
                })?;
            convert_input(&r_inputs[ri], io)
                .with_context(|| format!("{at}: input {k} {:?}", io.name))
        })
        .collect()
}

fn convert_input(t: &HostTensor, io: &ModelIo) -> anyhow::Result<HostTensor> {
    let known = io.shape != [-2];
    if known
        && (io.shape.len() != t.shape.len()
            || io
                .shape
                .iter()
                .zip(&t.shape)
                .any(|(&w, &g)| w >= 0 && w != g))
    {
        bail!(
            "takes shape {}, the reference's input is {}",
            shape_text(&io.shape),
            shape_text(&t.shape)
        );
    }
    let Some(want) = io.dtype else {
        bail!("has a type the device does not compute on");
    };
    if want == t.dtype {
        return Ok(t.clone());
    }
    let float = |d: DType| matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::Bf16);
    if !(float(want) && float(t.dtype)) {
        bail!("takes {want}, the reference's input is {}", t.dtype);
    }
    let values = check::elements(t);
    let mut data = Vec::with_capacity(values.len() * want.size());
    for v in values {
        match want {
            DType::F32 => data.extend_from_slice(&(v as f32).to_le_bytes()),
            DType::F64 => data.extend_from_slice(&v.to_le_bytes()),
            DType::F16 => data.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            _ => data.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
        }
    }
    Ok(HostTensor {
        dtype: want,
        shape: t.shape.clone(),
        data: data.into(),
    })
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    for (flag, v) in [("--rtol", args.rtol), ("--atol", args.atol)] {
        if let Some(v) = v
            && !(v.is_finite() && v >= 0.0)
        {
            bail!("{flag} {v}: a tolerance is a finite number, 0 or more");
        }
    }
    let progress = Progress::start(args.format == ReportFormat::Table);
    let reference = Side::load(&args.reference, &progress)?;
    let candidate = Side::load(&args.candidate, &progress)?;
    progress.step("preparing the inputs");
    let (r_inputs, _) = feed::given_inputs(
        &reference.path,
        &args.feed.inputs,
        &args.feed.shapes,
        args.feed.seed,
        args.feed.weights,
        &reference.eg.inputs,
        default_memory_bytes(),
    )?;
    let c_inputs = candidate_inputs(&reference, &r_inputs, &candidate)?;
    progress.step(format!("running {}", reference.path.display()));
    let r_dumps = reference.run(args.executor, &r_inputs)?;
    progress.step(format!("running {}", candidate.path.display()));
    let c_dumps = candidate.run(args.executor, &c_inputs)?;
    drop(progress);

    let (r_ops, c_ops) = (group(&r_dumps), group(&c_dumps));
    let matching = match_ops(&r_ops, &reference.facts, &c_ops, &candidate.facts);
    let rows = rows(
        (&reference, &r_ops),
        (&candidate, &c_ops),
        &matching,
        (args.rtol, args.atol),
    );
    let report = Report {
        reference: &reference,
        candidate: &candidate,
        r_ops: &r_ops,
        c_ops: &c_ops,
        matching: &matching,
        rows: &rows,
    };
    match args.format {
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&report.json())?),
        ReportFormat::Table => print!("{}", report.table()),
    }
    if let Some(row) = rows.iter().find(|r| !r.within()) {
        return Err(CheckFailure(format!(
            "{}: diverges from {} at op {:?} ({}), output {}: {}",
            candidate.path.display(),
            reference.path.display(),
            row.candidate_op,
            row.op_type,
            row.output,
            divergence_text(row)
        ))
        .into());
    }
    Ok(Status::Success)
}

fn divergence_text(row: &Row) -> String {
    let m = &row.metrics;
    match &m.problem {
        Some(p) => p.clone(),
        None => format!(
            "{} of {} element(s) beyond rtol {} atol {} (max abs error {}, cosine {})",
            m.mismatches,
            row.elements,
            row.tol.rtol,
            row.tol.atol,
            number(m.max_abs_err),
            cosine_text(m.cosine)
        ),
    }
}

fn cosine_text(c: Option<f64>) -> String {
    c.map_or("-".to_string(), |c| format!("{c:.6}"))
}

fn number(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.is_finite() {
        format!("{v:.3e}")
    } else {
        format!("{v}")
    }
}

struct Report<'a> {
    reference: &'a Side,
    candidate: &'a Side,
    r_ops: &'a [DumpedOp<'a>],
    c_ops: &'a [DumpedOp<'a>],
    matching: &'a Matching,
    rows: &'a [Row],
}

impl Report<'_> {
    /// Ops of each model neither matched nor fused into a matched op.
    fn unmatched(&self) -> (Vec<&str>, Vec<&str>) {
        let r_seen: HashSet<usize> = self
            .matching
            .pairs
            .iter()
            .map(|p| p.0)
            .chain(self.matching.fused_reference.iter().copied())
            .collect();
        let c_seen: HashSet<usize> = self
            .matching
            .pairs
            .iter()
            .map(|p| p.1)
            .chain(self.matching.fused_candidate.iter().copied())
            .collect();
        let r = (0..self.r_ops.len())
            .filter(|i| !r_seen.contains(i))
            .map(|i| self.r_ops[i].name)
            .collect();
        let c = (0..self.c_ops.len())
            .filter(|i| !c_seen.contains(i))
            .map(|i| self.c_ops[i].name)
            .collect();
        (r, c)
    }

    fn json(&self) -> Value {
        let (only_r, only_c) = self.unmatched();
        let row = |r: &Row| {
            json!({
                "reference_op": r.reference_op, "candidate_op": r.candidate_op,
                "op_type": r.op_type, "graph": r.graph, "output": r.output, "call": r.call,
                "matched_by": r.by.name(),
                "reference": {"dtype": r.dtypes.0.name(), "shape": r.shapes.0},
                "candidate": {"dtype": r.dtypes.1.name(), "shape": r.shapes.1},
                "elements": r.elements, "cosine": r.metrics.cosine,
                "max_abs_err": r.metrics.max_abs_err, "max_rel_err": r.metrics.max_rel_err,
                "mismatches": r.metrics.mismatches, "rtol": r.tol.rtol, "atol": r.tol.atol,
                "within": r.within(), "problem": r.metrics.problem, "note": r.metrics.note,
            })
        };
        let names = |v: &[usize], ops: &[DumpedOp<'_>]| -> Vec<String> {
            v.iter().map(|&i| ops[i].name.to_string()).collect()
        };
        json!({
            "reference": self.reference.path.display().to_string(),
            "candidate": self.candidate.path.display().to_string(),
            "matched": self.matching.pairs.len(),
            "fused_in_reference": names(&self.matching.fused_reference, self.r_ops),
            "fused_in_candidate": names(&self.matching.fused_candidate, self.c_ops),
            "only_in_reference": only_r,
            "only_in_candidate": only_c,
            "ops": self.rows.iter().map(row).collect::<Vec<_>>(),
            "first_divergence": self.rows.iter().find(|r| !r.within()).map(row),
        })
    }

    fn table(&self) -> String {
        let mut t = table();
        t.set_header(vec![
            "op",
            "type",
            "out",
            "shape",
            "cosine",
            "max abs err",
            "max rel err",
            "beyond tol",
        ]);
        let first = self.rows.iter().position(|r| !r.within());
        for (k, r) in self.rows.iter().enumerate() {
            let mut op = if r.reference_op == r.candidate_op {
                r.candidate_op.clone()
            } else {
                format!("{} (reference {})", r.candidate_op, r.reference_op)
            };
            if r.call > 0 {
                op.push_str(&format!(" #{}", r.call));
            }
            let verdict = match (&r.metrics.problem, r.metrics.mismatches) {
                (Some(_), _) => "shape".to_string(),
                (None, 0) => "0".to_string(),
                (None, n) => format!("{n}/{}", r.elements),
            };
            let mark = if Some(k) == first { " <- first" } else { "" };
            t.add_row(vec![
                op,
                r.op_type.clone(),
                r.output.to_string(),
                shape_text(&r.shapes.1),
                cosine_text(r.metrics.cosine),
                number(r.metrics.max_abs_err),
                number(r.metrics.max_rel_err),
                format!("{verdict}{mark}"),
            ]);
        }
        let (only_r, only_c) = self.unmatched();
        let mut s = format!(
            "{} against {}\n{t}\n",
            self.candidate.path.display(),
            self.reference.path.display()
        );
        let through_fusion = self
            .matching
            .pairs
            .iter()
            .filter(|p| p.2 != MatchedBy::Name)
            .count();
        s.push_str(&format!(
            "matched {} op(s) ({through_fusion} through fusion records); {} fused into them in \
             the reference, {} in the candidate; {} only in the reference, {} only in the \
             candidate\n",
            self.matching.pairs.len(),
            self.matching.fused_reference.len(),
            self.matching.fused_candidate.len(),
            only_r.len(),
            only_c.len(),
        ));
        for (side, names) in [("reference", &only_r), ("candidate", &only_c)] {
            if !names.is_empty() {
                let shown: Vec<&str> = names.iter().take(8).copied().collect();
                let more = names.len().saturating_sub(shown.len());
                let more = if more > 0 {
                    format!(", and {more} more")
                } else {
                    String::new()
                };
                s.push_str(&format!("only in the {side}: {}{more}\n", shown.join(", ")));
            }
        }
        match first.map(|k| &self.rows[k]) {
            Some(r) => s.push_str(&format!(
                "first divergence: {} ({}), output {}: {}\n",
                r.candidate_op,
                r.op_type,
                r.output,
                divergence_text(r)
            )),
            None => s.push_str("no divergence: every matched output is within tolerance\n"),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(v: &[f64], shape: &[i64]) -> Values {
        Values {
            dtype: DType::F32,
            shape: shape.to_vec(),
            values: v.to_vec(),
            exact: false,
        }
    }

    const TIGHT: Tolerance = Tolerance {
        rtol: 1e-3,
        atol: 1e-4,
    };

    #[test]
    fn metrics_of_close_far_and_nan_values() {
        let r = values(&[1.0, -2.0, 0.0, f64::NAN], &[4]);
        let m = compare_values(&r, &r, TIGHT);
        assert_eq!((m.mismatches, m.max_abs_err, m.cosine), (0, 0.0, Some(1.0)));
        // 1.0005 is within 1e-4 + 1e-3; -2.5 is not; a number for a NaN is a mismatch.
        let c = values(&[1.0005, -2.5, 0.0, 3.0], &[4]);
        let m = compare_values(&r, &c, TIGHT);
        assert_eq!(m.mismatches, 2);
        assert_eq!(m.max_abs_err, f64::INFINITY);
        // Cosine over the finite pairs: (1.0005 + 5) / (sqrt(5) * sqrt(1.0005^2 + 6.25)).
        let want = (1.0005 + 5.0) / (5.0 * (1.0005f64 * 1.0005 + 6.25)).sqrt();
        assert!((m.cosine.unwrap() - want).abs() < 1e-12, "{:?}", m.cosine);
        assert!(m.problem.is_none());
        // As many elements in another shape: compared flat, and said.
        let flat = compare_values(
            &values(&[1.0, 2.0], &[2]),
            &values(&[1.0, 2.0], &[1, 2]),
            TIGHT,
        );
        assert_eq!(flat.mismatches, 0);
        assert!(
            flat.note
                .unwrap()
                .contains("[1, 2] against the reference's [2]")
        );
        // Another count: not comparable.
        let other = compare_values(&values(&[1.0, 2.0], &[2]), &values(&[1.0], &[1]), TIGHT);
        assert!(other.problem.is_some());
        // Integers are equal or not, whatever the tolerance.
        let mut i = values(&[3.0], &[1]);
        i.exact = true;
        let mut j = values(&[3.0 + 1e-9], &[1]);
        j.exact = true;
        assert_eq!(compare_values(&i, &j, TIGHT).mismatches, 1);
        // A zero tensor against a nonzero one points nowhere alike.
        let z = compare_values(
            &values(&[0.0, 0.0], &[2]),
            &values(&[0.0, 1.0], &[2]),
            TIGHT,
        );
        assert_eq!(z.cosine, Some(0.0));
    }

    #[test]
    fn default_tolerance_is_the_coarser_types() {
        assert_eq!(default_tolerance(DType::F32, DType::F64), TIGHT);
        assert_eq!(default_tolerance(DType::F32, DType::F16).rtol, 1e-2);
        assert_eq!(default_tolerance(DType::Bf16, DType::F16).rtol, 4e-2);
    }

    #[test]
    fn a_storage_format_tensor_is_compared_in_its_origin_layout() {
        // NCHW [1, 3, 2, 2] held as NC1HWC0 [1, 1, 2, 2, 16] float32: element (c, h, w)
        // at ((h * 2 + w) * 16 + c), the padding channels zero.
        let mut data = vec![0f32; 2 * 2 * 16];
        for c in 0..3 {
            for hw in 0..4 {
                data[hw * 16 + c] = (c * 10 + hw) as f32;
            }
        }
        let t = HostTensor {
            dtype: DType::F32,
            shape: vec![1, 1, 2, 2, 16],
            data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let f = TensorFormat {
            format: 3, // NC1HWC0
            origin_format: 0,
            origin_shape: Some(vec![1, 3, 2, 2]),
        };
        let o = to_origin(&t, &f).expect("converted");
        assert_eq!(o.shape, [1, 3, 2, 2]);
        let want: Vec<f64> = (0..3)
            .flat_map(|c| (0..4).map(move |hw| (c * 10 + hw) as f64))
            .collect();
        assert_eq!(check::elements(&o), want);
        // Already in its origin shape, or plain: left as it is.
        assert!(to_origin(&o, &f).is_none());
        let plain = TensorFormat {
            format: 0,
            origin_format: 0,
            origin_shape: Some(vec![1, 3, 2, 2]),
        };
        assert!(to_origin(&t, &plain).is_none());
    }

    #[test]
    fn fused_ops_stand_for_the_last_original_the_other_model_ran() {
        let op = |name: &'static str| DumpedOp {
            name,
            op_type: "T",
            graph: "Main",
            calls: Vec::new(),
        };
        let facts = |pairs: &[(&str, &[&str])]| -> HashMap<String, NodeFacts> {
            pairs
                .iter()
                .map(|(n, o)| {
                    let f = NodeFacts {
                        originals: o.iter().map(|s| s.to_string()).collect(),
                        outputs: Vec::new(),
                    };
                    (n.to_string(), f)
                })
                .collect()
        };
        let r = [op("a"), op("b"), op("c"), op("d")];
        // "bc" records b and c (and x, which the reference never ran); d matches by name.
        let c = [op("a"), op("bc"), op("d"), op("new")];
        let m = match_ops(&r, &HashMap::new(), &c, &facts(&[("bc", &["b", "c", "x"])]));
        assert_eq!(
            m.pairs,
            [
                (0, 0, MatchedBy::Name),
                (2, 1, MatchedBy::CandidateFusion),
                (3, 2, MatchedBy::Name)
            ]
        );
        assert_eq!(m.fused_reference, [1]);
        assert!(m.fused_candidate.is_empty());
        // Seen from the other side.
        let m = match_ops(&c, &facts(&[("bc", &["b", "c", "x"])]), &r, &HashMap::new());
        assert_eq!(
            m.pairs,
            [
                (0, 0, MatchedBy::Name),
                (1, 2, MatchedBy::ReferenceFusion),
                (2, 3, MatchedBy::Name)
            ]
        );
        assert_eq!(m.fused_candidate, [1]);
    }
}
