//! `rt2 run`: load a model (lowering it unless it is an `.exeg`), run it on the emulated
//! device with one of the executors, time the runs, write the outputs as `.npy`, and
//! optionally check them against an ONNX backend-test data set.
//!
//! A thin adapter over [`Session`]: the flags are checked and resolved once into a
//! [`Config`]; every input is resolved ([`feed`]) before anything runs; the session runs
//! and times the executions (`--streams N`: N threads, one executor each); this file then
//! compares, writes the outputs (each file whole or not at all, only after every
//! execution succeeded) and prints the report. A failing kernel is exit 1 (the command
//! ran, the run failed); so is a check that finds a difference.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::cmd::check::{self, Comparison, Tolerance};
use crate::cmd::feed::{self, Source, shape_text};
use crate::cmd::format::{ReportFormat, table};
use crate::cmd::input;
use crate::cmd::progress::Progress;
use crate::cmd::status::{CheckFailure, Status};
use crate::cmd::{diagnostics, npy, output, sanitize};
use crate::exec::runtime::session::{
    Measurement, Record, Session, SessionConfig, SessionError, Step,
};
use crate::exec::runtime::subscribers::Profile;
use crate::exec::runtime::{
    DEFAULT_MAX_ITERATIONS, ExecError, ExecutorType, KernelError, ops_without_compute,
};
use crate::exec::{ExecuteGraph, GraphKind, ModelIo};
use crate::lower::LowerOptions;
use crate::npu::device::{
    Device, DeviceConfig, NpuError, SanitizeChecks, SanitizerReport, default_memory_bytes,
    host_memory_bytes,
};
use crate::ops::{HostTensor, OpRegistry};

/// The most compute threads `--compute-threads` asks for: far above any core count this
/// runs on, far below what exhausts the operating system's threads.
const MAX_COMPUTE_THREADS: i64 = 1024;

// The field docs are `--help` text, where `DIR/<name>` is a placeholder, not HTML.
#[allow(rustdoc::invalid_html_tags)]
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model file of any kind (OM, GE IR binary, GE text dump, GE JSON, ONNX), lowered
    /// first, or an `.exeg`.
    pub file: PathBuf,
    /// The executor type: seq (kSequentialPriority), topo (kTopological), topo-prio
    /// (kTopologicalPriority) or topo-mt (kTopologicalMultiThread, with the multi-thread
    /// passes applied where the file lacks them).
    #[arg(long, default_value = "topo", value_parser = executor_parser())]
    pub executor: ExecutorType,
    /// When lowering: keep constant MatMul, Gemm and Conv weights as the model stores
    /// them (see `rt2 lower --keep-weight-layout`).
    #[arg(long)]
    pub keep_weight_layout: bool,
    /// Plan the device memory of Main's static tensors (see `rt2 lower --static-memory`),
    /// when lowering or for an `.exeg` without the plan (the default).
    #[arg(long, overrides_with = "no_static_memory")]
    pub static_memory: bool,
    /// Run Main with an AllocMemHbm and a FreeMemory per tensor per execution (a model
    /// lowered here, or an `.exeg` as it is).
    #[arg(long, overrides_with = "static_memory")]
    pub no_static_memory: bool,
    /// When lowering: keep the dims the model's inputs leave unknown as they are, the
    /// shapes they decide inferred and their memory allocated per execution. By default
    /// they are fixed to the given inputs' (every execution runs the same inputs), as
    /// `rt2 lower --input-shape` fixes them, so that this happens once, at lowering
    /// (inputs that lowering fails for run as the model has them).
    #[arg(long)]
    pub keep_dynamic_shapes: bool,
    /// Threads of the emulated device's compute cores, which kernels split large work
    /// over; 0: one per CPU. With 1, every kernel computes on the thread that issues it,
    /// as a one-thread runtime would. At most 1024.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=MAX_COMPUTE_THREADS))]
    pub compute_threads: u16,
    /// The emulated device's memory: plain bytes or with a K, M, G or T suffix (powers of
    /// 1024: 512M, 4G). An allocation past it is out of device memory (exit 1), an input
    /// larger than it an error (exit 2). Default: half of the host's memory; at most all
    /// of it (the device's memory is the host's).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub device_memory: Option<u64>,
    /// The most times a loop (ONNX Loop, GE While) runs its body in one execution of the
    /// loop, and the device's WHILE watchdog; one more is an error naming the loop.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_ITERATIONS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_iterations: u64,
    #[command(flatten)]
    pub feed: feed::FeedArgs,
    /// Timed executions (per stream).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: u64,
    /// Untimed executions before them.
    #[arg(long, default_value_t = 0)]
    pub warmup: u64,
    /// Write each output to DIR/<output name>.npy (created if missing). In the file name,
    /// characters other than ASCII letters, digits, `.`, `-` and `_` become `_`, as does a
    /// leading `.`; an empty name becomes `output_K`, and a name already taken gets `_K`
    /// appended (K the output's position).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
    /// Feed the inputs of an ONNX backend-test data set (DIR/input_K.pb, K counting the
    /// model's inputs, not the weights --weights fills) and compare the outputs with
    /// DIR/output_K.pb, by position; a difference exits 1.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["inputs", "shapes"])]
    pub check: Option<PathBuf>,
    /// Relative tolerance of --check: |got - want| <= atol + rtol * |want|.
    #[arg(long, default_value_t = 1e-3, requires = "check")]
    pub rtol: f64,
    /// Absolute tolerance of --check.
    #[arg(long, default_value_t = 1e-4, requires = "check")]
    pub atol: f64,
    /// Concurrent requests: N threads, each with its own stream and executor.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub streams: u32,
    /// Which model of a multi-model OM (0 is the root model).
    #[arg(long, default_value_t = 0)]
    pub model: usize,
    /// After the timed executions (not the warmup), print where the time went: host time
    /// per kernel type and per op (calls, total, mean, share; an owner kernel's own time,
    /// without its subgraph's), and device time per op (each launch's time on its
    /// stream). With --format json it is the "profile" key.
    #[arg(long)]
    pub profile: bool,
    /// Write a Chrome trace-event JSON of the timed executions to OUT.json (open it in
    /// Perfetto or chrome://tracing): a track per host executor thread with each node call
    /// (node, kernel type, the op it serves, a launch's shapes) and a track per device
    /// stream with each task (launches, copies, memsets, event records and waits).
    #[arg(long, value_name = "OUT.json")]
    pub trace: Option<PathBuf>,
    /// Run once more, before the warmup, copying every launch's outputs back from device
    /// memory, and write each to DIR/<op name>.<output index>.npy (the op name made safe
    /// as for --output-dir; a launch run several times in a loop keeps its last values),
    /// plus DIR/index.json listing op, op type, output, dtype, shape and file.
    #[arg(long, value_name = "DIR")]
    pub dump_tensors: Option<PathBuf>,
    /// Run under the emulated device's sanitizer: `init` (reads of memory nothing wrote
    /// since its allocation, and kernels whose outputs depend on what their output memory
    /// held: each launch runs twice, on outputs filled with 0xFF and with zeroes), `mem`
    /// (accesses outside an allocation, use after free, double free, with the block's
    /// history), `race` (tasks on different streams touching the same bytes, one writing,
    /// with no event, notify or stream order between them); a comma-separated list, all
    /// three when given alone. The findings are a table (or the "sanitizer" key of the
    /// JSON); any finding exits 1. Debug builds always sanitize.
    #[arg(long, value_name = "CHECKS", num_args = 0..=1, require_equals = true,
          default_missing_value = "all", value_parser = sanitize::parse_checks)]
    pub sanitize: Option<SanitizeChecks>,
    /// Graph mode: capture the first execution's device work as a model (NPUGraph, CUDA
    /// Graphs) and replay it for every later one, with no host work per node. Needs
    /// shapes that are static for the inputs and a Main that reads no device memory on
    /// the host; the outputs are the plain run's, bit for bit. One stream only.
    #[arg(long)]
    pub graph: bool,
}

/// A byte count: plain digits, or digits with a K, M, G or T suffix (powers of 1024;
/// `KB`, `KiB` and lowercase spellings too). Zero and counts past `u64` are refused.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(format!(
                "{s:?}: expected bytes, or a number with K, M, G or T"
            ));
        }
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s:?}: expected bytes, or a number with K, M, G or T"))?;
    let bytes = n
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?}: more bytes than 64 bits count"))?;
    if bytes == 0 {
        return Err(format!("{s:?}: a device needs some memory"));
    }
    Ok(bytes)
}

pub fn executor_parser() -> impl TypedValueParser<Value = ExecutorType> {
    PossibleValuesParser::new(ExecutorType::ALL.map(ExecutorType::name))
        .map(|s| ExecutorType::from_name(&s).unwrap_or_default())
}

/// `rt2 run`'s flags, checked and resolved: what to load, how to run it, what to report.
struct Config {
    file: PathBuf,
    model: usize,
    lower: LowerOptions,
    device: DeviceConfig,
    session: SessionConfig,
    /// Lower again for the inputs' shapes when the model leaves some of their dims
    /// unknown (not `--keep-dynamic-shapes`).
    specialize: bool,
    /// `--input` and `--shape` as given; resolved against the model's inputs once it is
    /// loaded.
    inputs: Vec<String>,
    shapes: Vec<String>,
    seed: u64,
    weights: Option<feed::WeightFill>,
    /// `--check DIR` and its tolerance.
    check: Option<(PathBuf, Tolerance)>,
    output_dir: Option<PathBuf>,
    format: ReportFormat,
    profile: bool,
    trace: Option<PathBuf>,
    dump_tensors: Option<PathBuf>,
    /// `--sanitize` was given (its report is printed even when clean).
    sanitize: bool,
}

impl Config {
    fn resolve(args: Args) -> anyhow::Result<Config> {
        for (flag, v) in [("--rtol", args.rtol), ("--atol", args.atol)] {
            if !(v.is_finite() && v >= 0.0) {
                bail!("{flag} {v}: a tolerance is a finite number, 0 or more");
            }
        }
        if args.graph && args.streams > 1 {
            bail!("--graph replays one captured stream; it cannot be combined with --streams");
        }
        let record = match (args.trace.is_some(), args.profile) {
            (true, _) => Record::SpansAndTraceLines,
            (false, true) => Record::Spans,
            (false, false) => Record::Nothing,
        };
        // The device's memory is the host's: a capacity past it would let a model map
        // pages the host does not have, and the OOM killer, not an out-of-memory error,
        // would end the run.
        if let (Some(want), Some(host)) = (args.device_memory, host_memory_bytes())
            && want > host
        {
            bail!(
                "--device-memory {want}: more than the host's memory ({host} bytes), which \
                 the emulated device's memory is"
            );
        }
        let tolerance = Tolerance {
            rtol: args.rtol,
            atol: args.atol,
        };
        Ok(Config {
            lower: LowerOptions {
                multi_thread: args.executor == ExecutorType::TopologicalMultiThread,
                keep_weight_layout: args.keep_weight_layout,
                static_memory: !args.no_static_memory,
            },
            device: DeviceConfig {
                compute_threads: usize::from(args.compute_threads),
                sanitize: args.sanitize.or(DeviceConfig::default().sanitize),
                memory_bytes: args.device_memory.unwrap_or_else(default_memory_bytes),
                // One flag bounds both kinds of loop: the executor's loop kernels and the
                // device's WHILE tasks (a graph-mode replay of a captured loop).
                max_while_iterations: args.max_iterations,
                ..DeviceConfig::default()
            },
            session: SessionConfig {
                executor: args.executor,
                streams: args.streams,
                warmup: args.warmup,
                iterations: args.iterations,
                graph: args.graph,
                record,
                max_iterations: args.max_iterations,
            },
            file: args.file,
            model: args.model,
            specialize: !args.keep_dynamic_shapes,
            inputs: args.feed.inputs,
            shapes: args.feed.shapes,
            seed: args.feed.seed,
            weights: args.feed.weights,
            check: args.check.map(|dir| (dir, tolerance)),
            output_dir: args.output_dir,
            format: args.format,
            profile: args.profile,
            trace: args.trace,
            dump_tensors: args.dump_tensors,
            sanitize: args.sanitize.is_some(),
        })
    }
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let config = Config::resolve(args)?;
    let for_people = config.format == ReportFormat::Table;
    let progress = Progress::start(for_people);
    progress.step(format!("reading {}", config.file.display()));
    let (eg, file) =
        input::execute_graph(&config.file, config.model, &config.lower, &[], &progress)?;
    let at = config.file.display().to_string();
    // Refused before any input is prepared.
    computable(&config.file, &eg)?;

    progress.step("preparing the inputs");
    let (inputs, sources) = match &config.check {
        Some((dir, _)) => feed::data_set_inputs(
            dir,
            &config.file,
            config.seed,
            config.weights,
            &eg.inputs,
            config.device.memory_bytes,
        )?,
        None => feed::given_inputs(
            &config.file,
            &config.inputs,
            &config.shapes,
            config.seed,
            config.weights,
            &eg.inputs,
            config.device.memory_bytes,
        )?,
    };
    let expected = match &config.check {
        Some((dir, _)) => Some(feed::data_set_outputs(dir, &eg.outputs)?),
        None => None,
    };
    let eg = Arc::new(match file {
        Some(file) => specialized(&config, &progress, file, eg, &inputs)?,
        None => eg,
    });
    drop(progress);

    let device = Device::try_new(config.device.clone())?;
    let session = Session::new(&eg, &device, &config.session);
    // Shared, so that every execution binds them without a copy (`ModelInput`).
    let inputs: Vec<Arc<HostTensor>> = inputs.into_iter().map(Arc::new).collect();
    let refs: Vec<&HostTensor> = inputs.iter().map(|t| &**t).collect();
    let dumps = match &config.dump_tensors {
        Some(_) => Some(
            session
                .dump_tensors(&refs)
                .map_err(|e| failed(&config, &eg, &device, e))?,
        ),
        None => None,
    };
    let bar = iteration_bar(&config);
    let outcome = session
        .measure(&inputs, &|| bar.inc(1))
        .map_err(|e| failed(&config, &eg, &device, e))?;
    bar.finish_and_clear();
    // Reported when asked for, or when a debug build's own sanitizer found something.
    let sanitized = device
        .take_sanitizer_report()
        .filter(|r| config.sanitize || !r.is_clean());

    let comparisons: Option<Vec<Comparison>> =
        expected
            .as_ref()
            .zip(config.check.as_ref())
            .map(|(want, (_, tol))| {
                outcome
                    .outputs
                    .iter()
                    .zip(want)
                    .map(|(g, w)| check::compare(g, w, *tol))
                    .collect()
            });

    let paths = match &config.output_dir {
        Some(dir) => Some(write_outputs(dir, &eg.outputs, &outcome.outputs)?),
        None => None,
    };
    let profile = match (&outcome.recorded, config.profile) {
        (Some((host, device)), true) => Some(Profile::new(host, device)),
        _ => None,
    };
    if let (Some(path), Some((host, device))) = (&config.trace, &outcome.recorded) {
        diagnostics::write_trace(path, host, device)?;
    }
    if let (Some(dir), Some(dumps)) = (&config.dump_tensors, &dumps) {
        diagnostics::write_dumps(dir, dumps)?;
    }

    let report = Report {
        config: &config,
        eg: &eg,
        inputs: &inputs,
        sources: &sources,
        outcome: &outcome,
        paths: paths.as_deref(),
        comparisons: comparisons.as_deref(),
        profile: profile.as_ref(),
        sanitized: sanitized.as_ref(),
    };
    match config.format {
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&report.json())?),
        ReportFormat::Table => print!("{}", report.table()),
    }
    if let Some(r) = &sanitized {
        sanitize::verdict(&at, r)?;
    }

    if let (Some(cs), Some((dir, tol))) = (&comparisons, &config.check) {
        let bad: Vec<String> = cs
            .iter()
            .zip(&eg.outputs)
            .enumerate()
            .filter(|(_, (c, _))| !c.ok)
            .map(|(k, (c, io))| {
                format!(
                    "output {k} {:?}: {} ({} element(s) beyond tolerance)",
                    io.name,
                    c.detail.as_deref().unwrap_or("differs"),
                    c.mismatches
                )
            })
            .collect();
        if !bad.is_empty() {
            return Err(CheckFailure(format!(
                "{at}: --check {}: {} (rtol {}, atol {})",
                dir.display(),
                bad.join("; "),
                tol.rtol,
                tol.atol
            ))
            .into());
        }
    }
    Ok(Status::Success)
}

/// Refuses a graph that launches ops rt2 cannot compute, naming every one: the model is
/// valid, rt2 lacks the compute (exit 1, as an unsupported op is).
pub fn computable(file: &Path, eg: &ExecuteGraph) -> anyhow::Result<()> {
    let missing = ops_without_compute(eg, &OpRegistry::new());
    if missing.is_empty() {
        return Ok(());
    }
    Err(CheckFailure(format!(
        "{}: {}",
        file.display(),
        ExecError::NoCompute(missing)
    ))
    .into())
}

/// The graph to run for `inputs`, which were resolved against `eg`, lowered from `file`
/// with the dims its inputs leave unknown: `file`'s model lowered again with those dims
/// fixed to the inputs' (every execution of a run binds the same inputs); `eg` as it is
/// with `--keep-dynamic-shapes` or when no dim is unknown; the model as declared again
/// when the fixed lowering fails.
///
/// Fixed dims let lowering infer every shape their inputs decide and plan their memory
/// (each If branch's too), where a dynamic graph runs an InferShape, a CalcTensorSize and
/// an allocation per node per execution: Silero VAD's step runs in about two thirds of
/// the time.
fn specialized(
    config: &Config,
    progress: &Progress,
    file: crate::om::file::ModelFile,
    mut eg: ExecuteGraph,
    inputs: &[HostTensor],
) -> anyhow::Result<ExecuteGraph> {
    let open = eg.inputs.iter().any(|io| io.shape.iter().any(|&d| d < 0));
    if !config.specialize || !open {
        input::release(file);
        return Ok(eg);
    }
    progress.step("lowering for the inputs' shapes");
    let dims: Vec<(String, Vec<i64>)> = eg
        .inputs
        .iter()
        .zip(inputs)
        .map(|(io, t)| (io.name.clone(), t.shape.clone()))
        .collect();
    let declared = std::mem::take(&mut eg.inputs);
    // Let go before lowering again, so that the run's peak memory holds one lowered model
    // (its prepared weights), not two; the rare fallback lowers the model once more.
    drop(eg);
    let lower = |dims: &[(String, Vec<i64>)]| {
        input::lower_model_for(&config.file, &file, config.model, &config.lower, dims)
    };
    let eg = match lower(&dims) {
        // The same inputs, in the same order, each of its given shape.
        Ok(fixed)
            if fixed.inputs.len() == declared.len()
                && fixed
                    .inputs
                    .iter()
                    .zip(&declared)
                    .zip(inputs)
                    .all(|((f, d), t)| {
                        f.name == d.name && f.dtype == d.dtype && f.shape == t.shape
                    })
                && ops_without_compute(&fixed, &OpRegistry::new()).is_empty() =>
        {
            Ok(fixed)
        }
        // Unnoted: inputs the fixed lowering fails on are nearly always inputs the model
        // cannot run, which running the model as declared reports in one line, naming
        // the node where it fails (`rt2 lower --input-shape` shows the fixed lowering's
        // own error).
        Ok(_) | Err(_) => lower(&[]),
    };
    input::release(file);
    eg
}

/// A session's error, after the sanitizer's findings if it has any: those are printed (in
/// the report's format) and make the error a check failure (exit 1), since a memcheck
/// finding often is what ended the run.
fn failed(config: &Config, eg: &ExecuteGraph, device: &Device, e: SessionError) -> anyhow::Error {
    let error = session_error(config, eg, e);
    match device.take_sanitizer_report() {
        Some(r) if !r.is_clean() => {
            match config.format {
                ReportFormat::Json => {
                    let j = serde_json::json!({ "sanitizer": sanitize::to_json(&r) });
                    println!("{}", serde_json::to_string_pretty(&j).unwrap_or_default());
                }
                ReportFormat::Table => print!("{}", sanitize::to_text(&r)),
            }
            CheckFailure(format!(
                "{error:#} ({} sanitizer finding(s) above)",
                r.findings.len() as u64 + r.dropped
            ))
            .into()
        }
        _ => error,
    }
}

/// A session's error in the command's words: a failed step or a disagreement between
/// streams is exit 1 (the command ran, the run failed), naming the file and the
/// executor; a graph that cannot be prepared or captured is exit 2.
fn session_error(config: &Config, eg: &ExecuteGraph, e: SessionError) -> anyhow::Error {
    let file = config.file.display();
    match e {
        SessionError::Prepare(e) if matches!(*e, ExecError::NoCompute(_)) => {
            CheckFailure(format!("{file}: {e}")).into()
        }
        SessionError::Prepare(e) => anyhow!("{file}: {e}"),
        SessionError::Failed {
            step,
            executor,
            source,
        } => {
            let what = match step {
                Step::DumpExecution => "the --dump-tensors execution".to_string(),
                step => step.to_string(),
            };
            // The limits a user can move get the flag that moves them.
            let root = source.kernel_error();
            let hint = if root.and_then(KernelError::iteration_limit).is_some()
                || matches!(source.npu_error(), Some(NpuError::WhileWatchdog { .. }))
            {
                " (--max-iterations)"
            } else if matches!(source.npu_error(), Some(NpuError::OutOfMemory { .. })) {
                " (--device-memory)"
            } else {
                ""
            };
            CheckFailure(format!(
                "{file}: {what} (executor {executor}): {source}{hint}"
            ))
            .into()
        }
        SessionError::Capture(e) => anyhow!("{file}: --graph: {e}"),
        SessionError::Dump(e) => CheckFailure(format!("{file}: --dump-tensors: {e}")).into(),
        SessionError::StreamsDiffer { stream, output } => CheckFailure(format!(
            "{file}: --streams {}: stream {stream}'s output {output} {:?} differs from \
             stream 0's",
            config.session.streams, eg.outputs[output].name
        ))
        .into(),
        SessionError::Panicked => anyhow!("a stream's thread panicked"),
    }
}

/// A counting bar over every execution on every stream; hidden unless stderr is a terminal
/// and the output is for people (the same rule as [`Progress`]).
fn iteration_bar(config: &Config) -> ProgressBar {
    let s = &config.session;
    let total = s
        .warmup
        .saturating_add(s.iterations)
        .saturating_mul(u64::from(s.streams));
    if config.format != ReportFormat::Table || !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} executions {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// The file name (without `.npy`) of each output; see `--output-dir`.
fn output_file_names(ios: &[ModelIo]) -> Vec<String> {
    output::safe_file_names(ios.iter().map(|io| io.name.as_str()), "output")
}

/// Writes each output to `dir/<name>.npy`; the paths written.
fn write_outputs(
    dir: &Path,
    ios: &[ModelIo],
    outputs: &[HostTensor],
) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--output-dir {}: cannot create it", dir.display()))?;
    let mut paths = Vec::with_capacity(outputs.len());
    for (name, t) in output_file_names(ios).iter().zip(outputs) {
        let path = dir.join(format!("{name}.npy"));
        let bytes = npy::write(t).with_context(|| format!("writing {}", path.display()))?;
        output::write_atomic(&path, &bytes)?;
        paths.push(path);
    }
    Ok(paths)
}

/// Microseconds to one decimal, for the report.
fn us(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

struct Report<'a> {
    config: &'a Config,
    eg: &'a ExecuteGraph,
    inputs: &'a [Arc<HostTensor>],
    sources: &'a [Source],
    outcome: &'a Measurement,
    paths: Option<&'a [PathBuf]>,
    comparisons: Option<&'a [Comparison]>,
    profile: Option<&'a Profile>,
    sanitized: Option<&'a SanitizerReport>,
}

impl Report<'_> {
    fn path(&self, k: usize) -> Option<String> {
        self.paths
            .and_then(|p| p.get(k))
            .map(|p| p.display().to_string())
    }

    fn json(&self) -> serde_json::Value {
        let a = self.config;
        let s = &a.session;
        let l = self.outcome.latency();
        let (min, median, max, mean) = (l.min, l.median, l.max, l.mean);
        // The model's inputs, then apart the weights it was written without.
        let fed = |weight: bool| -> Vec<serde_json::Value> {
            self.eg
                .inputs
                .iter()
                .zip(self.inputs)
                .zip(self.sources)
                .filter(|((io, _), _)| io.weight == weight)
                .map(|((io, t), s)| {
                    json!({"name": io.name, "dtype": t.dtype.name(), "shape": t.shape,
                           "source": match s { Source::File(p) => json!(p.display().to_string()),
                                               Source::Random => json!("random"),
                                               Source::Zeros => json!("zeros") }})
                })
                .collect()
        };
        let (inputs, weights) = (fed(false), fed(true));
        let outputs: Vec<_> = self
            .eg
            .outputs
            .iter()
            .zip(&self.outcome.outputs)
            .enumerate()
            .map(|(k, (io, t))| {
                json!({"name": io.name, "dtype": t.dtype.name(), "shape": t.shape,
                       "path": self.path(k)})
            })
            .collect();
        let nodes: serde_json::Map<String, serde_json::Value> = GraphKind::ALL
            .iter()
            .map(|&k| {
                (
                    k.name().to_lowercase(),
                    json!(self.eg.graph(k).total_nodes()),
                )
            })
            .collect();
        let mut j = json!({
            "file": a.file.display().to_string(),
            "executor": s.executor.name(),
            "iterations": s.iterations,
            "warmup": s.warmup,
            "streams": s.streams,
            "seed": a.seed,
            "inputs": inputs,
            "weights": weights,
            "outputs": outputs,
            "latency_us": {"min": us(min), "median": us(median), "max": us(max), "mean": us(mean),
                           "samples": self.outcome.latencies_us.len()},
            "nodes": nodes,
        });
        if let (Some(cs), Some((dir, tol))) = (self.comparisons, &a.check) {
            let outs: Vec<_> = self
                .eg
                .outputs
                .iter()
                .zip(cs)
                .map(|(io, c)| {
                    json!({"name": io.name, "ok": c.ok, "max_abs_err": c.max_abs_err,
                           "max_rel_err": c.max_rel_err, "mismatches": c.mismatches,
                           "detail": c.detail})
                })
                .collect();
            j["check"] = json!({
                "dir": dir.display().to_string(),
                "rtol": tol.rtol,
                "atol": tol.atol,
                "ok": cs.iter().all(|c| c.ok),
                "outputs": outs,
            });
        }
        if let Some(p) = self.profile {
            j["profile"] = diagnostics::profile_json(p, self.outcome.latencies_us.len());
        }
        if let Some(r) = self.sanitized {
            j["sanitizer"] = sanitize::to_json(r);
        }
        j
    }

    fn table(&self) -> String {
        let a = self.config;
        let s = &a.session;
        let mut out = format!(
            "{}: executor {}, {} iteration(s) after {} warmup, {} stream(s)\n",
            a.file.display(),
            s.executor.name(),
            s.iterations,
            s.warmup,
            s.streams
        );
        // The model's inputs, then apart the weights it was written without, if any.
        for (weight, head) in [(false, "input"), (true, "weight")] {
            let mut t = table();
            t.set_header([head, "dtype", "shape", "from"]);
            let fed = self.eg.inputs.iter().zip(self.inputs).zip(self.sources);
            for ((io, x), s) in fed.filter(|((io, _), _)| io.weight == weight) {
                t.add_row([
                    io.name.clone(),
                    x.dtype.name().to_string(),
                    shape_text(&x.shape),
                    s.describe(a.seed),
                ]);
            }
            if !weight || t.row_count() > 0 {
                out += &format!("{t}\n");
            }
        }
        let mut t = table();
        let mut header = vec!["output", "dtype", "shape"];
        if self.paths.is_some() {
            header.push("path");
        }
        if self.comparisons.is_some() {
            header.extend(["max abs err", "max rel err", "check"]);
        }
        t.set_header(header);
        for (k, (io, x)) in self
            .eg
            .outputs
            .iter()
            .zip(&self.outcome.outputs)
            .enumerate()
        {
            let mut row = vec![io.name.clone(), x.dtype.name().into(), shape_text(&x.shape)];
            if let Some(p) = self.path(k) {
                row.push(p);
            }
            if let Some(c) = self.comparisons.and_then(|cs| cs.get(k)) {
                row.push(format!("{:.3e}", c.max_abs_err));
                row.push(format!("{:.3e}", c.max_rel_err));
                row.push(if c.ok {
                    "ok".into()
                } else {
                    format!("FAIL ({} element(s))", c.mismatches)
                });
            }
            t.add_row(row);
        }
        out += &format!("{t}\n");
        let l = self.outcome.latency();
        let (min, median, max) = (l.min, l.median, l.max);
        out += &format!(
            "latency (us, {} execution(s)): min {:.1}, median {:.1}, max {:.1}\n",
            self.outcome.latencies_us.len(),
            min,
            median,
            max
        );
        let nodes: Vec<String> = GraphKind::ALL
            .iter()
            .map(|&k| format!("{} {}", k.name(), self.eg.graph(k).total_nodes()))
            .collect();
        out += &format!("nodes: {}\n", nodes.join(", "));
        if let (Some(cs), Some((_, tol))) = (self.comparisons, &a.check) {
            out += &format!(
                "check (rtol {}, atol {}): {}\n",
                tol.rtol,
                tol.atol,
                if cs.iter().all(|c| c.ok) {
                    "every output within tolerance"
                } else {
                    "MISMATCH"
                }
            );
        }
        if let Some(p) = self.profile {
            out += &diagnostics::profile_table(p, self.outcome.latencies_us.len());
        }
        if let Some(r) = self.sanitized {
            out += &sanitize::to_text(r);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::DType;

    fn io(name: &str) -> ModelIo {
        ModelIo {
            name: name.into(),
            dtype: Some(DType::F32),
            shape: vec![1],
            weight: false,
        }
    }

    #[test]
    fn output_file_names_are_safe_and_distinct() {
        let ios: Vec<ModelIo> = ["y", "a/b:0", "..", "", "a_b_0", "ok.1-x", "é"]
            .into_iter()
            .map(io)
            .collect();
        assert_eq!(
            output_file_names(&ios),
            ["y", "a_b_0", "_.", "output_3", "a_b_0_4", "ok.1-x", "_"]
        );
    }
}
