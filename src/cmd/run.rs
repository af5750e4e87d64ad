//! `rt2 run`: load a model (lowering it unless it is an `.exeg`), run it on the emulated
//! device with one of the executors, time the runs, write the outputs as `.npy`, and
//! optionally check them against an ONNX backend-test data set.
//!
//! The flow: arguments are checked and every input resolved (from a file, a data set, or
//! the seeded generator of [`random`]) before anything runs, so a bad input is an exit-2
//! error naming it rather than a failure half-way. Executions are timed one by one with the
//! wall clock (the call that runs Main, waits for the stream and downloads the outputs).
//! With `--streams N`, N threads each take a stream of their own and their own loaded
//! executor through [`StreamExecutor`]; every thread's outputs must equal the first's bit
//! for bit. A failing kernel is exit 1 (the command ran, the run failed); so is a check
//! that finds a difference. Outputs are written only after every execution succeeded,
//! each file whole or not at all.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, PoisonError};
use std::time::Instant;

use anyhow::{Context, anyhow, bail};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::cmd::check::{self, Comparison, Tolerance};
use crate::cmd::format::{ReportFormat, table};
use crate::cmd::input;
use crate::cmd::progress::Progress;
use crate::cmd::status::{CheckFailure, Status};
use crate::cmd::{diagnostics, npy, output, random};
use crate::exec::runtime::subscribers::{
    DumpedTensor, NodeRecorder, Profile, Recording, TensorDumper,
};
use crate::exec::runtime::{
    ExecError, ExecutorOptions, ExecutorType, ModelExecuteArg, ModelV2Executor, StreamExecutor,
};
use crate::exec::{ExecuteGraph, GraphKind, ModelIo};
use crate::lower::LowerOptions;
use crate::npu::device::{Device, DeviceConfig, StreamId, TaskRecord};
use crate::ops::{DType, HostTensor};

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
    /// When lowering: keep constant MatMul weights as the model stores them (see
    /// `rt2 lower --keep-weight-layout`).
    #[arg(long)]
    pub keep_weight_layout: bool,
    /// Plan the device memory of Main's static tensors (see `rt2 lower --static-memory`),
    /// when lowering or for an `.exeg` without the plan.
    #[arg(long)]
    pub static_memory: bool,
    /// Threads of the emulated device's compute cores, which kernels split large work
    /// over; 0: one per CPU. With 1, every kernel computes on the thread that issues it,
    /// as a one-thread runtime would.
    #[arg(long, default_value_t = 0)]
    pub compute_threads: usize,
    /// An input from a file: `.npy`, or an ONNX TensorProto (`.pb`), recognised by content.
    /// Inputs not given are random (see --seed).
    #[arg(long = "input", value_name = "NAME=PATH")]
    pub inputs: Vec<String>,
    /// The shape of a random input, for the dims the model leaves unknown.
    #[arg(long = "shape", value_name = "NAME=D0,D1,...")]
    pub shapes: Vec<String>,
    /// Seed of the random inputs: SplitMix64, floats uniform in [-1, 1), integers in
    /// [0, 10), bools 0 or 1; one stream per input position.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
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
    /// Feed the inputs of an ONNX backend-test data set (DIR/input_K.pb) and compare the
    /// outputs with DIR/output_K.pb, by position; a difference exits 1.
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
    /// Graph mode: capture the first execution's device work as a model (NPUGraph, CUDA
    /// Graphs) and replay it for every later one, with no host work per node. Needs
    /// shapes that are static for the inputs and a Main that reads no device memory on
    /// the host; the outputs are the plain run's, bit for bit. One stream only.
    #[arg(long)]
    pub graph: bool,
}

fn executor_parser() -> impl TypedValueParser<Value = ExecutorType> {
    PossibleValuesParser::new(ExecutorType::ALL.map(ExecutorType::name))
        .map(|s| ExecutorType::from_name(&s).unwrap_or_default())
}

/// Where an input came from.
#[derive(Debug, Clone)]
enum Source {
    File(PathBuf),
    Random,
}

impl Source {
    fn describe(&self, seed: u64) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Random => format!("random (seed {seed})"),
        }
    }
}

/// What the runs measured and produced.
struct Outcome {
    /// Outputs of the last execution of the first stream.
    outputs: Vec<HostTensor>,
    /// Microseconds per timed execution, every stream's.
    latencies_us: Vec<f64>,
    /// What the subscribers recorded over the timed executions (--profile, --trace).
    recorded: Option<(Recording, Vec<TaskRecord>)>,
    /// Each launch's outputs (--dump-tensors).
    dumps: Vec<DumpedTensor>,
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    for (flag, v) in [("--rtol", args.rtol), ("--atol", args.atol)] {
        if !(v.is_finite() && v >= 0.0) {
            bail!("{flag} {v}: a tolerance is a finite number, 0 or more");
        }
    }
    if args.graph && args.streams > 1 {
        bail!("--graph replays one captured stream; it cannot be combined with --streams");
    }
    let for_people = args.format == ReportFormat::Table;
    let progress = Progress::start(for_people);
    progress.step(format!("reading {}", args.file.display()));
    let eg = Arc::new(load_graph(&args, &progress)?);
    let at = args.file.display().to_string();

    progress.step("preparing the inputs");
    let (inputs, sources) = match &args.check {
        Some(dir) => data_set_inputs(dir, &eg.inputs)?,
        None => given_inputs(&args, &eg.inputs)?,
    };
    let expected = match &args.check {
        Some(dir) => Some(data_set_outputs(dir, &eg.outputs)?),
        None => None,
    };
    drop(progress);

    let outcome = execute(&args, &eg, &inputs)?;

    let comparisons: Option<Vec<Comparison>> = expected.as_ref().map(|want| {
        let tol = Tolerance {
            rtol: args.rtol,
            atol: args.atol,
        };
        outcome
            .outputs
            .iter()
            .zip(want)
            .map(|(g, w)| check::compare(g, w, tol))
            .collect()
    });

    let paths = match &args.output_dir {
        Some(dir) => Some(write_outputs(dir, &eg.outputs, &outcome.outputs)?),
        None => None,
    };
    let profile = match (&outcome.recorded, args.profile) {
        (Some((host, device)), true) => Some(Profile::new(host, device)),
        _ => None,
    };
    if let (Some(path), Some((host, device))) = (&args.trace, &outcome.recorded) {
        diagnostics::write_trace(path, host, device)?;
    }
    if let Some(dir) = &args.dump_tensors {
        diagnostics::write_dumps(dir, &outcome.dumps)?;
    }

    let report = Report {
        args: &args,
        eg: &eg,
        inputs: &inputs,
        sources: &sources,
        outcome: &outcome,
        paths: paths.as_deref(),
        comparisons: comparisons.as_deref(),
        profile: profile.as_ref(),
    };
    match args.format {
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&report.json())?),
        ReportFormat::Table => print!("{}", report.table()),
    }

    if let Some(cs) = &comparisons {
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
                args.check.as_deref().unwrap_or(Path::new("")).display(),
                bad.join("; "),
                args.rtol,
                args.atol
            ))
            .into());
        }
    }
    Ok(Status::Success)
}

/// The ExecuteGraph to run: the file's own, or its model lowered, with the multi-thread
/// passes for topo-mt.
fn load_graph(args: &Args, progress: &Progress) -> anyhow::Result<ExecuteGraph> {
    let opts = LowerOptions {
        multi_thread: args.executor == ExecutorType::TopologicalMultiThread,
        keep_weight_layout: args.keep_weight_layout,
        static_memory: args.static_memory,
    };
    let (eg, file) = input::execute_graph(&args.file, args.model, &opts, progress)?;
    if let Some(file) = file {
        input::release(file);
    }
    Ok(eg)
}

/// The names of the model's inputs, for error messages.
fn names(ios: &[ModelIo]) -> String {
    ios.iter()
        .map(|io| format!("{:?}", io.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Position of the input called `name`, or an error listing the model's inputs.
fn find_input(ios: &[ModelIo], flag: &str, name: &str, file: &Path) -> anyhow::Result<usize> {
    ios.iter().position(|io| io.name == name).ok_or_else(|| {
        anyhow!(
            "{}: {flag} {name}: the model has no input {name:?}; its inputs: {}",
            file.display(),
            names(ios)
        )
    })
}

fn shape_text(shape: &[i64]) -> String {
    if shape == [-2] {
        return "[unknown rank]".into();
    }
    let dims: Vec<String> = shape
        .iter()
        .map(|&d| if d < 0 { "?".into() } else { d.to_string() })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// Why `shape` does not fit the model's `want` (`-1` unknown dims, `[-2]` unknown rank).
fn misfit(shape: &[i64], want: &[i64]) -> Option<String> {
    if want == [-2] {
        return None;
    }
    if shape.len() != want.len() {
        return Some(format!(
            "rank {} where the model's shape {} has rank {}",
            shape.len(),
            shape_text(want),
            want.len()
        ));
    }
    let k = shape
        .iter()
        .zip(want)
        .position(|(&d, &w)| w >= 0 && d != w)?;
    Some(format!(
        "dim {k} is {} where the model's shape {} has {}",
        shape[k],
        shape_text(want),
        want[k]
    ))
}

/// Checks a tensor read from `file` against input `io`.
fn fit(file: &Path, io: &ModelIo, t: &HostTensor) -> anyhow::Result<()> {
    let at = || format!("{}: input {:?}", file.display(), io.name);
    if Some(t.dtype) != io.dtype {
        bail!(
            "{}: element type {} where the model takes {}",
            at(),
            t.dtype,
            io.dtype
                .map_or("a type the device does not compute on", DType::name)
        );
    }
    if let Some(why) = misfit(&t.shape, &io.shape) {
        bail!("{}: shape {}: {why}", at(), shape_text(&t.shape));
    }
    Ok(())
}

/// Reads an input tensor file: `.npy`, or an ONNX TensorProto.
fn read_tensor_file(path: &Path, expect: Option<DType>) -> anyhow::Result<HostTensor> {
    let bytes = input::read_bytes(path)?;
    let at = || path.display().to_string();
    if npy::is_npy(&bytes) {
        return npy::read(&bytes, expect).with_context(at);
    }
    let t = crate::om::onnx::read_tensor(&bytes, &at())
        .map_err(|e| anyhow!("{e} (neither a .npy file nor an ONNX TensorProto)"))?;
    crate::lower::attrs::tensor(&t).ok_or_else(|| {
        anyhow!(
            "{}: ONNX tensor of element type {:?} and shape {:?}: not a tensor the device \
             computes on, or its data does not fill its shape",
            at(),
            t.desc.dtype,
            t.desc.shape
        )
    })
}

/// The inputs from `--input` and `--shape`, the rest random.
fn given_inputs(args: &Args, ios: &[ModelIo]) -> anyhow::Result<(Vec<HostTensor>, Vec<Source>)> {
    let file = &args.file;
    let mut given: Vec<Option<(PathBuf, HostTensor)>> = vec![None; ios.len()];
    for spec in &args.inputs {
        let (name, path) = spec
            .split_once('=')
            .filter(|(n, p)| !n.is_empty() && !p.is_empty())
            .ok_or_else(|| anyhow!("--input {spec:?}: expected NAME=PATH"))?;
        let k = find_input(ios, "--input", name, file)?;
        if given[k].is_some() {
            bail!("--input {name}: given twice");
        }
        let path = PathBuf::from(path);
        let t = read_tensor_file(&path, ios[k].dtype)?;
        fit(&path, &ios[k], &t)?;
        given[k] = Some((path, t));
    }
    let mut shapes: Vec<Option<Vec<i64>>> = vec![None; ios.len()];
    for spec in &args.shapes {
        let (name, dims) =
            input::parse_named_shape(spec, '=').map_err(|e| anyhow!("--shape {e}"))?;
        let k = find_input(ios, "--shape", &name, file)?;
        if shapes[k].is_some() {
            bail!("--shape {name}: given twice");
        }
        if let Some(d) = dims.iter().position(|&d| d < 0) {
            bail!("--shape {spec}: dim {d} is unknown; --shape gives every dim");
        }
        if let Some(why) = misfit(&dims, &ios[k].shape) {
            bail!("{}: --shape {spec}: input {name:?}: {why}", file.display());
        }
        if let Some((path, t)) = &given[k]
            && t.shape != dims
        {
            bail!(
                "--shape {spec}: input {name:?} from {} has shape {}",
                path.display(),
                shape_text(&t.shape)
            );
        }
        shapes[k] = Some(dims);
    }
    let mut inputs = Vec::with_capacity(ios.len());
    let mut sources = Vec::with_capacity(ios.len());
    for (k, (io, g)) in ios.iter().zip(given).enumerate() {
        if let Some((path, t)) = g {
            inputs.push(t);
            sources.push(Source::File(path));
            continue;
        }
        let at = || format!("{}: input {:?}", file.display(), io.name);
        let Some(dtype) = io.dtype else {
            bail!("{}: an element type the device does not compute on", at());
        };
        let shape = match shapes[k].take() {
            Some(s) => s,
            None if io.shape == [-2] => bail!(
                "{}: the rank is unknown; give the shape with --shape {}=D0,D1,...",
                at(),
                io.name
            ),
            None => {
                if let Some(d) = io.shape.iter().position(|&d| d < 0) {
                    let dims: Vec<String> = (0..io.shape.len()).map(|i| format!("D{i}")).collect();
                    bail!(
                        "{}: shape {}: dim {d} is unknown; give the shape with --shape {}={}",
                        at(),
                        shape_text(&io.shape),
                        io.name,
                        dims.join(",")
                    );
                }
                io.shape.clone()
            }
        };
        let t = random::tensor(dtype, &shape, args.seed, k)
            .ok_or_else(|| anyhow!("{}: shape {shape:?} is too large", at()))?;
        inputs.push(t);
        sources.push(Source::Random);
    }
    Ok((inputs, sources))
}

/// The `PREFIX_K.pb` files of a data set (K from 0 while they exist), one per model
/// input or output `ios`.
fn data_set_files(dir: &Path, prefix: &str, ios: &[ModelIo]) -> anyhow::Result<Vec<PathBuf>> {
    let files: Vec<PathBuf> = (0..)
        .map(|k| dir.join(format!("{prefix}_{k}.pb")))
        .take_while(|p| p.is_file())
        .collect();
    if files.len() != ios.len() {
        bail!(
            "--check {}: {} {prefix}_K.pb file(s), the model has {} {prefix}(s): {}",
            dir.display(),
            files.len(),
            ios.len(),
            names(ios)
        );
    }
    Ok(files)
}

/// The inputs of an ONNX backend-test data set, by position.
fn data_set_inputs(dir: &Path, ios: &[ModelIo]) -> anyhow::Result<(Vec<HostTensor>, Vec<Source>)> {
    if !dir.is_dir() {
        bail!("--check {}: not a directory", dir.display());
    }
    let files = data_set_files(dir, "input", ios)?;
    let mut inputs = Vec::with_capacity(files.len());
    for (path, io) in files.iter().zip(ios) {
        let t = read_tensor_file(path, io.dtype)?;
        fit(path, io, &t)?;
        inputs.push(t);
    }
    Ok((inputs, files.into_iter().map(Source::File).collect()))
}

/// The expected outputs of an ONNX backend-test data set, by position.
fn data_set_outputs(dir: &Path, ios: &[ModelIo]) -> anyhow::Result<Vec<HostTensor>> {
    data_set_files(dir, "output", ios)?
        .iter()
        .zip(ios)
        .map(|(p, io)| read_tensor_file(p, io.dtype))
        .collect()
}

/// A run failure: exit 1, naming the file and the executor.
fn failed(args: &Args, what: &str, e: ExecError) -> anyhow::Error {
    CheckFailure(format!(
        "{}: {what} (executor {}): {e}",
        args.file.display(),
        args.executor.name()
    ))
    .into()
}

/// A counting bar over every execution on every stream; hidden unless stderr is a terminal
/// and the output is for people (the same rule as [`Progress`]).
fn iteration_bar(args: &Args) -> ProgressBar {
    let total = (args.warmup + args.iterations) * u64::from(args.streams);
    if args.format != ReportFormat::Table || !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} executions {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Switches the recorders on for the timed executions and off after them. With several
/// streams every thread first finishes its warmup (or its timed executions): each thread's
/// [`Timing`] meets the others at a barrier, one switches the recorders, and all go on
/// only after that, so no stream's warmup, loading or unloading is recorded. A thread that
/// fails (or panics) still arrives, from its guard's drop, so no other thread waits
/// forever.
struct Window<'a> {
    recorder: Option<&'a NodeRecorder>,
    device: &'a Device,
    barrier: Option<Barrier>,
}

impl Window<'_> {
    fn switch(&self, on: bool) {
        if let Some(r) = self.recorder {
            r.set(on);
            self.device.record_tasks(on);
        }
    }

    /// Every stream arrives, then the recorders are `on`.
    fn arrive(&self, on: bool) {
        match &self.barrier {
            None => self.switch(on),
            Some(b) => {
                if b.wait().is_leader() {
                    self.switch(on);
                }
                b.wait();
            }
        }
    }
}

/// One stream's passage through a [`Window`]: opened once, then closed once, when asked
/// or when dropped before that.
struct Timing<'a> {
    window: &'a Window<'a>,
    opened: bool,
    closed: bool,
}

impl<'a> Timing<'a> {
    fn new(window: &'a Window<'a>) -> Self {
        Timing {
            window,
            opened: false,
            closed: false,
        }
    }
    fn open(&mut self) {
        if !self.opened {
            self.opened = true;
            self.window.arrive(true);
        }
    }
    fn close(&mut self) {
        self.open();
        if !self.closed {
            self.closed = true;
            self.window.arrive(false);
        }
    }
}

impl Drop for Timing<'_> {
    fn drop(&mut self) {
        self.close();
    }
}

/// Loads the executor(s) and runs warmup and timed executions on every stream.
fn execute(args: &Args, eg: &Arc<ExecuteGraph>, inputs: &[HostTensor]) -> anyhow::Result<Outcome> {
    let device = Device::new(DeviceConfig {
        compute_threads: args.compute_threads,
        ..DeviceConfig::default()
    });
    let recorder = (args.profile || args.trace.is_some())
        .then(|| Arc::new(NodeRecorder::new(args.trace.is_some())));
    let options = ExecutorOptions {
        executor: args.executor,
        subscriber: recorder
            .clone()
            .map(|r| r as Arc<dyn crate::exec::runtime::Subscriber>),
        ..ExecutorOptions::default()
    };
    let refs: Vec<&HostTensor> = inputs.iter().collect();
    let dumps = match &args.dump_tensors {
        Some(_) => dump_once(args, eg, &device, &refs)?,
        None => Vec::new(),
    };
    let window = Window {
        recorder: recorder.as_deref(),
        device: &device,
        barrier: (args.streams > 1).then(|| Barrier::new(args.streams as usize)),
    };
    let bar = iteration_bar(args);
    let (outputs, latencies_us) = if args.streams == 1 {
        let mut ex = ModelV2Executor::create(eg, &device, options)
            .map_err(|e| anyhow!("{}: {e}", args.file.display()))?;
        ex.load().map_err(|e| failed(args, "loading", e))?;
        let mut timing = Timing::new(&window);
        let r = repeat(args, &mut ex, None, &refs, &bar, &mut timing);
        timing.close();
        let (outputs, latencies_us) = r?;
        ex.unload().map_err(|e| failed(args, "unloading", e))?;
        (outputs, latencies_us)
    } else {
        // Fail early and as a usage error if the graph cannot be prepared at all.
        ModelV2Executor::create(eg, &device, options.clone())
            .map_err(|e| anyhow!("{}: {e}", args.file.display()))?;
        let streams = StreamExecutor::new(eg.clone(), &device, options);
        let results: Vec<anyhow::Result<(Vec<HostTensor>, Vec<f64>)>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..args.streams)
                    .map(|_| {
                        let (device, streams, refs, bar, window) =
                            (&device, &streams, &refs, &bar, &window);
                        scope.spawn(move || {
                            let mut timing = Timing::new(window);
                            let stream = device.create_stream();
                            let ex = streams
                                .get_or_create_loaded(stream)
                                .map_err(|e| failed(args, "loading", e))?;
                            let mut ex = ex.lock().unwrap_or_else(PoisonError::into_inner);
                            let r = repeat(args, &mut ex, Some(stream), refs, bar, &mut timing);
                            // Recording stops before any stream unloads.
                            timing.close();
                            drop(ex);
                            streams.erase(stream);
                            r
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(anyhow!("a stream's thread panicked")))
                    })
                    .collect()
            });
        let mut first: Option<Vec<HostTensor>> = None;
        let mut latencies_us = Vec::new();
        for (k, r) in results.into_iter().enumerate() {
            let (outs, lat) = r?;
            latencies_us.extend(lat);
            match &first {
                None => first = Some(outs),
                Some(f) => {
                    if let Some(o) = (0..f.len()).find(|&o| f[o] != outs[o]) {
                        return Err(CheckFailure(format!(
                            "{}: --streams {}: stream {k}'s output {o} {:?} differs from \
                             stream 0's",
                            args.file.display(),
                            args.streams,
                            eg.outputs[o].name
                        ))
                        .into());
                    }
                }
            }
        }
        (first.unwrap_or_default(), latencies_us)
    };
    bar.finish_and_clear();
    let recorded = recorder.map(|r| (r.take(), device.take_task_records()));
    Ok(Outcome {
        outputs,
        latencies_us,
        recorded,
        dumps,
    })
}

/// One execution on an executor of its own with a [`TensorDumper`]: every launch's
/// outputs, copied back once the execution's stream is synchronized.
fn dump_once(
    args: &Args,
    eg: &ExecuteGraph,
    device: &Device,
    inputs: &[&HostTensor],
) -> anyhow::Result<Vec<DumpedTensor>> {
    let dumper = Arc::new(TensorDumper::new());
    let options = ExecutorOptions {
        executor: args.executor,
        subscriber: Some(dumper.clone()),
        ..ExecutorOptions::default()
    };
    let mut ex = ModelV2Executor::create(eg, device, options)
        .map_err(|e| anyhow!("{}: {e}", args.file.display()))?;
    ex.load().map_err(|e| failed(args, "loading", e))?;
    let mut outputs = Vec::new();
    ex.execute_sync(inputs, &mut outputs)
        .map_err(|e| failed(args, "the --dump-tensors execution", e))?;
    // The copies were queued on the streams the launches ran on.
    device
        .synchronize_device()
        .map_err(|e| failed(args, "the --dump-tensors execution", e.into()))?;
    ex.unload().map_err(|e| failed(args, "unloading", e))?;
    dumper
        .take()
        .map_err(|e| CheckFailure(format!("{}: --dump-tensors: {e}", args.file.display())).into())
}

/// Warmup, then timed executions on `stream` (`None`: the model's own); the outputs of the last one and each timed one's microseconds.
/// `timing` switches the recorders on for the timed ones (see [`Window`]).
fn repeat(
    args: &Args,
    ex: &mut ModelV2Executor,
    stream: Option<StreamId>,
    inputs: &[&HostTensor],
    bar: &ProgressBar,
    timing: &mut Timing<'_>,
) -> anyhow::Result<(Vec<HostTensor>, Vec<f64>)> {
    let mut outputs = Vec::new();
    let mut latencies = Vec::with_capacity(args.iterations as usize);
    for i in 0..args.warmup + args.iterations {
        if i == args.warmup {
            timing.open();
        }
        let start = Instant::now();
        let arg = ModelExecuteArg {
            stream,
            allocator: None,
        };
        let r = if args.graph {
            // The first execution is captured, then every one replays the graph.
            let captured = if ex.has_graph() {
                Ok(())
            } else {
                ex.capture_main(inputs)
                    .map_err(|e| anyhow!("{}: --graph: {e}", args.file.display()))
            };
            captured.and_then(|()| {
                ex.replay_sync(inputs, &mut outputs)
                    .map_err(|e| failed(args, &format!("execution {}", i + 1), e))
            })
        } else {
            ex.execute_sync_with(&arg, inputs, &mut outputs)
                .map_err(|e| failed(args, &format!("execution {}", i + 1), e))
        };
        let elapsed = start.elapsed();
        r?;
        if i >= args.warmup {
            latencies.push(elapsed.as_secs_f64() * 1e6);
        }
        bar.inc(1);
    }
    Ok((outputs, latencies))
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

/// (min, median, max, mean) of `v`.
fn stats(v: &[f64]) -> (f64, f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    (s[0], median, s[n - 1], s.iter().sum::<f64>() / n as f64)
}

/// Microseconds to one decimal, for the report.
fn us(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

struct Report<'a> {
    args: &'a Args,
    eg: &'a ExecuteGraph,
    inputs: &'a [HostTensor],
    sources: &'a [Source],
    outcome: &'a Outcome,
    paths: Option<&'a [PathBuf]>,
    comparisons: Option<&'a [Comparison]>,
    profile: Option<&'a Profile>,
}

impl Report<'_> {
    fn path(&self, k: usize) -> Option<String> {
        self.paths
            .and_then(|p| p.get(k))
            .map(|p| p.display().to_string())
    }

    fn json(&self) -> serde_json::Value {
        let a = self.args;
        let (min, median, max, mean) = stats(&self.outcome.latencies_us);
        let inputs: Vec<_> = self
            .eg
            .inputs
            .iter()
            .zip(self.inputs)
            .zip(self.sources)
            .map(|((io, t), s)| {
                json!({"name": io.name, "dtype": t.dtype.name(), "shape": t.shape,
                       "source": match s { Source::File(p) => json!(p.display().to_string()),
                                           Source::Random => json!("random") }})
            })
            .collect();
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
            "executor": a.executor.name(),
            "iterations": a.iterations,
            "warmup": a.warmup,
            "streams": a.streams,
            "seed": a.seed,
            "inputs": inputs,
            "outputs": outputs,
            "latency_us": {"min": us(min), "median": us(median), "max": us(max), "mean": us(mean),
                           "samples": self.outcome.latencies_us.len()},
            "nodes": nodes,
        });
        if let (Some(cs), Some(dir)) = (self.comparisons, &a.check) {
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
                "rtol": a.rtol,
                "atol": a.atol,
                "ok": cs.iter().all(|c| c.ok),
                "outputs": outs,
            });
        }
        if let Some(p) = self.profile {
            j["profile"] = diagnostics::profile_json(p, self.outcome.latencies_us.len());
        }
        j
    }

    fn table(&self) -> String {
        let a = self.args;
        let mut out = format!(
            "{}: executor {}, {} iteration(s) after {} warmup, {} stream(s)\n",
            a.file.display(),
            a.executor.name(),
            a.iterations,
            a.warmup,
            a.streams
        );
        let mut t = table();
        t.set_header(["input", "dtype", "shape", "from"]);
        for ((io, x), s) in self.eg.inputs.iter().zip(self.inputs).zip(self.sources) {
            t.add_row([
                io.name.clone(),
                x.dtype.name().to_string(),
                shape_text(&x.shape),
                s.describe(a.seed),
            ]);
        }
        out += &format!("{t}\n");
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
        let (min, median, max, _) = stats(&self.outcome.latencies_us);
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
        if let Some(cs) = self.comparisons {
            out += &format!(
                "check (rtol {}, atol {}): {}\n",
                a.rtol,
                a.atol,
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
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(name: &str) -> ModelIo {
        ModelIo {
            name: name.into(),
            dtype: Some(DType::F32),
            shape: vec![1],
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

    #[test]
    fn shapes_fit_or_say_why() {
        assert_eq!(misfit(&[2, 3], &[-1, 3]), None);
        assert_eq!(misfit(&[2, 3, 4], &[-2]), None);
        assert_eq!(
            misfit(&[2, 4], &[-1, 3]).unwrap(),
            "dim 1 is 4 where the model's shape [?, 3] has 3"
        );
        assert!(misfit(&[2], &[-1, 3]).unwrap().contains("rank 1"));
    }

    #[test]
    fn stats_of_latencies() {
        assert_eq!(stats(&[3.0, 1.0, 2.0]), (1.0, 2.0, 3.0, 2.0));
        assert_eq!(stats(&[4.0, 1.0, 2.0, 3.0]), (1.0, 2.5, 4.0, 2.5));
    }
}
