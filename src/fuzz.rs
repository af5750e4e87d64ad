//! Fuzz targets: one function per reader of untrusted bytes, and one for the whole pipeline
//! (read, lower, execute once), defined here once so that a coverage-guided fuzzer
//! (`fuzz/`, libFuzzer) and plain tests (`tests/fuzz_corpus.rs`) drive the same code.
//! docs/FUZZING.md says how to run them.
//!
//! A target takes any bytes and returns normally when the invariants hold; it panics when
//! one breaks, which is what a fuzzer reports. The invariants:
//! - no panic, anywhere below the reader: bad input is an error value;
//! - errors are returned, not printed: the targets call library functions, which never
//!   print, and discard the errors (a message is only built, to run its `Display`);
//! - a round trip where the format has a writer: what was read, written and read again is
//!   what was read (`write(read(x))` reads back equal), compared through `Debug` so that
//!   NaNs compare equal to themselves;
//! - where two readers of one format exist (the GE IR's fast reader beside the plain
//!   decoder), they agree.
//!
//! What bounds the work: libFuzzer's `-max_len` bounds the input; [`lower_run`] executes
//! on a small device ([`RUN_DEVICE_MEMORY`], one compute core, a low WHILE watchdog), with
//! inputs of at most [`RUN_INPUT_BYTES`], on the `seq` engine and once more on `topo`,
//! whose outputs must be the same bits; a saved capture model replays under a low
//! watchdog. This module uses everything and nothing uses it, like `cmd`.

use std::fmt::Debug;

use prost::Message;

use crate::capture::{rim, script};
use crate::cmd::format::ReportFormat;
use crate::cmd::{inspect, npy, random};
use crate::exec::runtime::{ExecutorOptions, ExecutorType, ModelV2Executor};
use crate::exec::{ExecuteGraph, exeg, view};
use crate::lower::{LowerOptions, lower};
use crate::npu::device::{Device, DeviceConfig, SanitizeChecks};
use crate::om::container::OmFile;
use crate::om::file::{self, ReadOptions};
use crate::om::json::{self, JsonOptions};
use crate::om::om_writer::{OmBuildOptions, build_om};
use crate::om::onnx::{self, ImportOptions};
use crate::om::{ComputeModel, Place, compress, ir, text, verify, wire};
use crate::ops::HostTensor;
use crate::proto::ge_ir::{AttrDef, GraphDef, ModelDef, attr_def};

/// A target: any bytes in, a panic when an invariant breaks.
pub type Target = fn(&[u8]);

/// Every target by name, in the order docs/FUZZING.md lists them. The names are the
/// libFuzzer binaries' (`fuzz/fuzz_targets/<name>.rs`) and the seed folders'
/// (`fuzz/seeds/<name>/`).
pub const TARGETS: &[(&str, Target)] = &[
    ("om", om),
    ("ge_binary", ge_binary),
    ("ge_text", ge_text),
    ("ge_json", ge_json),
    ("onnx", onnx),
    ("exeg", exeg),
    ("rim_json", rim_json),
    ("capture_script", capture_script),
    ("npy", npy),
    ("pb", pb),
    ("lower_run", lower_run),
];

/// The device memory [`lower_run`] executes in: enough for every fixture, small enough
/// that a model asking for more fails fast with out-of-memory instead of paging.
pub const RUN_DEVICE_MEMORY: u64 = 256 << 20;

/// The most bytes [`lower_run`] gives one execution as inputs (random, seeded); a model
/// whose inputs (unknown dims taken as 1) need more is read and lowered, not executed.
pub const RUN_INPUT_BYTES: u64 = 16 << 20;

/// The WHILE watchdog of the device [`lower_run`] executes on and of replayed capture
/// models: body runs one loop may make in one execution.
pub const RUN_MAX_WHILE_ITERATIONS: u64 = 256;

/// `Debug` equality: values that print the same are the same, NaNs included (which `==`
/// never finds equal, and whose payloads the text formats do not keep).
fn same<T: Debug>(a: &T, b: &T) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

/// Builds an error's message, as the command line would print it, and drops it.
fn word<E: std::fmt::Display>(e: E) {
    let _ = e.to_string();
}

/// What the verifier and `rt2 inspect` make of a read model file; never fails for a file
/// that read.
fn inspect_file(f: &file::ModelFile) {
    for m in &f.models {
        for p in verify::verify(&m.model) {
            word(p);
        }
    }
    for format in [ReportFormat::Table, ReportFormat::Json] {
        match inspect::report(f, format) {
            Ok(text) => assert!(!text.is_empty(), "the inspect report is empty"),
            Err(e) => word(e),
        }
    }
}

/// A ComputeModel's GE IR, in binary, read back by the reader of binary GE IR: the
/// `ModelDef -> ComputeModel -> ModelDef` trip loses nothing.
fn check_model_round_trip(model: &ComputeModel) {
    let def = ir::to_model_def(model);
    let bytes = def.encode_to_vec();
    let back = wire::read_model(&bytes, None, &Place::offset(0))
        .unwrap_or_else(|e| panic!("the GE IR of a model that read does not read back: {e}"));
    assert!(
        same(&ir::to_model_def(&back), &def),
        "the GE IR of a model reads back different"
    );
}

/// Any model file, as `rt2 inspect` takes it: read by `om::file::read` (every kind,
/// recognised by content), verified and summarized (an OM's partitions decoded too). An
/// OM container writes back byte for byte (`OmFile::to_bytes(OmFile::parse(b)) == b`).
pub fn om(data: &[u8]) {
    if let Ok(container) = OmFile::parse(data) {
        let again = container
            .to_bytes()
            .unwrap_or_else(|e| panic!("an OM that parsed does not write: {e}"));
        assert!(
            again == data,
            "an OM container does not write back byte for byte"
        );
    }
    match file::read(data, &ReadOptions::default()) {
        Ok(f) => {
            assert!(!f.models.is_empty(), "a model file read with no model");
            inspect_file(&f);
        }
        Err(e) => word(e),
    }
}

/// The plain reading of binary GE IR: prost's decoder, attribute decompression, the typed
/// model. What the fast reader must agree with.
fn ge_binary_plain(data: &[u8]) -> crate::om::Result<ComputeModel> {
    let mut def = ModelDef::decode(data).map_err(|source| crate::om::OmError::Protobuf {
        place: Place::offset(0),
        message: "ge.proto.ModelDef",
        source,
    })?;
    compress::decompress(&mut def)?;
    ir::from_model_def(def)
}

/// Binary GE IR (`ge.proto.ModelDef`): the fast reader `om::wire::read_model` (what
/// `om::file::read` and the OM reader use) agrees with the plain decoder, both ways
/// (both fail, or both give the same model), and a model read writes back.
pub fn ge_binary(data: &[u8]) {
    let fast = wire::read_model(data, None, &Place::offset(0));
    let plain = ge_binary_plain(data);
    match (fast, plain) {
        (Ok(fast), Ok(plain)) => {
            assert!(
                same(&ir::to_model_def(&fast), &ir::to_model_def(&plain)),
                "the fast and the plain GE IR readers give different models"
            );
            for p in verify::verify(&fast) {
                word(p);
            }
            check_model_round_trip(&fast);
        }
        (Err(a), Err(b)) => {
            word(a);
            word(b);
        }
        (Ok(_), Err(e)) => panic!("only the plain GE IR reader fails: {e}"),
        (Err(e), Ok(_)) => panic!("only the fast GE IR reader fails: {e}"),
    }
}

/// A `ModelDef` read from text or JSON, as `om::file::read` continues: decompressed,
/// typed, verified, and its GE IR written back.
fn model_def_onwards(mut def: ModelDef) {
    if let Err(e) = compress::decompress(&mut def) {
        return word(e);
    }
    match ir::from_model_def(def) {
        Ok(model) => {
            for p in verify::verify(&model) {
                word(p);
            }
            check_model_round_trip(&model);
        }
        Err(e) => word(e),
    }
}

/// GE text dumps (protobuf text format of `ModelDef`): `parse_text(print_text(m)) == m`,
/// then the model as `om::file::read` takes it on.
pub fn ge_text(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match text::parse_text(s) {
        Ok(def) => {
            let printed = text::print_text(&def);
            let back = text::parse_text(&printed)
                .unwrap_or_else(|e| panic!("a printed text dump does not parse: {e}"));
            assert!(same(&back, &def), "a text dump reads back different");
            model_def_onwards(def);
        }
        Err(e) => word(e),
    }
}

/// GE JSON: `from_json(to_json(m)) == m` (rt2's layout, not atc's lossy one), then the
/// model as `om::file::read` takes it on.
pub fn ge_json(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match json::from_json(s) {
        Ok(def) => {
            let written = json::to_json(&def, &JsonOptions::default()).to_string();
            let back = json::from_json(&written)
                .unwrap_or_else(|e| panic!("written GE JSON does not read: {e}"));
            assert!(same(&back, &def), "GE JSON reads back different");
            // atc's layout only has to be writable.
            let _ = json::to_json(&def, &JsonOptions { atc_compat: true }).to_string();
            model_def_onwards(def);
        }
        Err(e) => word(e),
    }
}

/// ONNX import (the ATC step), then what `rt2 compile` does with the result: an OM built
/// from the imported model reads back as the same model.
pub fn onnx(data: &[u8]) {
    let def = match onnx::import(data, &ImportOptions::default()) {
        Ok(def) => def,
        Err(e) => return word(e),
    };
    let mut typed = def.clone();
    if let Err(e) = compress::decompress(&mut typed) {
        return word(e);
    }
    let model = match ir::from_model_def(typed) {
        Ok(m) => m,
        Err(e) => return word(e),
    };
    for p in verify::verify(&model) {
        word(p);
    }
    // GE's attribute compression loses what `round_trips` names; the OM must still read.
    let lossless = compress::round_trips(&def);
    let om = match build_om(def, &OmBuildOptions::default()).and_then(|om| om.to_bytes()) {
        Ok(bytes) => bytes,
        Err(e) => return word(e),
    };
    let back = file::read(&om, &ReadOptions::default())
        .unwrap_or_else(|e| panic!("the OM compiled from an ONNX model does not read: {e}"));
    assert!(
        !lossless || same(&graphs(&back.root().model), &graphs(&model)),
        "the OM compiled from an ONNX model reads back different graphs"
    );
}

/// A model's GE IR graphs without where each Const's weight was placed (`data_offset` and
/// `weight_size` in its value's descriptor), which writing an OM sets: what an OM built
/// from a model must give back. (The model's own fields differ too: the OM writer sets
/// its version and its size attributes.)
fn graphs(model: &ComputeModel) -> Vec<GraphDef> {
    let mut graphs = ir::to_model_def(model).graph;
    for op in graphs.iter_mut().flat_map(|g| g.op.iter_mut()) {
        if op.r#type != "Const" {
            continue;
        }
        if let Some(AttrDef {
            value: Some(attr_def::Value::T(t)),
        }) = op.attr.get_mut("value")
            && let Some(d) = t.desc.as_mut()
        {
            d.data_offset = 0;
            d.weight_size = 0;
        }
    }
    graphs
}

/// The text form of an `.exeg` starts (after comments) with its `magic` field, as
/// `cmd::input` recognises it.
fn is_exeg_text(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&data[..data.len().min(4096)]);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with("magic:") && l.contains(exeg::MAGIC))
}

/// An `.exeg`, binary or text, as `cmd::input::read_input` reads it.
fn read_exeg(data: &[u8]) -> Option<Result<ExecuteGraph, exeg::ExegError>> {
    if exeg::is_exeg(data) {
        return Some(exeg::decode(data));
    }
    if is_exeg_text(data) {
        let text = std::str::from_utf8(data).ok()?;
        return Some(view::from_text(text));
    }
    None
}

/// ExecuteGraphs (`.exeg`), binary or text: a graph read is one the checker passes
/// (`decode` runs it), and it writes back in both forms to the same graph.
pub fn exeg(data: &[u8]) {
    // Text when it is not binary: the fuzzer's mutations of either kind reach a reader.
    let read = match read_exeg(data) {
        Some(r) => r,
        None => match std::str::from_utf8(data) {
            Ok(text) => view::from_text(text),
            Err(_) => exeg::decode(data),
        },
    };
    let eg = match read {
        Ok(eg) => eg,
        Err(e) => return word(e),
    };
    assert!(
        exeg::check_or_err(&eg).is_ok(),
        "a graph that read does not pass the checker"
    );
    let binary = exeg::encode(&eg);
    let back =
        exeg::decode(&binary).unwrap_or_else(|e| panic!("an encoded .exeg does not decode: {e}"));
    assert!(same(&back, &eg), "an .exeg reads back different (binary)");
    let printed = view::to_text(&eg);
    let back =
        view::from_text(&printed).unwrap_or_else(|e| panic!("a printed .exeg does not parse: {e}"));
    assert!(same(&back, &eg), "an .exeg reads back different (text)");
}

/// Saved capture models (`.rim.json`): parsed, written back equal, loaded onto a fresh
/// device and executed once under a low WHILE watchdog (the file's own watchdog could
/// let a loop run for a long time).
pub fn rim_json(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let mut f = match rim::parse(s) {
        Ok(f) => f,
        Err(e) => return word(e),
    };
    let written = serde_json::to_string(&f).expect("a saved model serializes");
    let back = rim::parse(&written)
        .unwrap_or_else(|e| panic!("a written saved model does not parse: {e}"));
    assert!(same(&back, &f), "a saved model reads back different");
    f.max_while_iterations = f.max_while_iterations.min(RUN_MAX_WHILE_ITERATIONS);
    let replay = match rim::load(&f, &Default::default()) {
        Ok(r) => r,
        Err(e) => return word(e),
    };
    match replay.execute(1) {
        Ok(()) => {
            let buffers = replay
                .buffers()
                .unwrap_or_else(|e| panic!("the buffers of a replayed model do not read: {e}"));
            assert_eq!(buffers.len(), f.buffers.len(), "a buffer went missing");
        }
        Err(e) => word(e),
    }
    // A saved model may race or read what nothing wrote: that is the model's doing, and
    // what `rt2 replay` reports; here it is not a crash.
    let _ = replay.acl.device().take_sanitizer_report();
}

/// Capture scripts: TOML parsed and statically checked (`capture::script::parse`).
pub fn capture_script(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match script::parse(s) {
        Ok(sc) => {
            let _ = format!("{sc:?}");
        }
        Err(e) => word(e),
    }
}

/// `.npy` tensors as `rt2 run --input` reads them, for either reading of a two-byte
/// type; a tensor read writes back and reads back equal.
pub fn npy(data: &[u8]) {
    for expect in [None, Some(crate::ops::DType::Bf16)] {
        match npy::read(data, expect) {
            Ok(t) => check_npy_round_trip(&t, true),
            Err(e) => word(format!("{e:#}")),
        }
    }
}

/// A tensor written as `.npy` reads back equal. `must_write`: the tensor was read from a
/// `.npy` file, so it must write (a tensor from elsewhere may have a shape `.npy` refuses,
/// dims multiplying beyond 64 bits beside a zero dim).
fn check_npy_round_trip(t: &HostTensor, must_write: bool) {
    let bytes = match npy::write(t) {
        Ok(b) => b,
        Err(e) if must_write => panic!("a tensor read does not write: {e:#}"),
        Err(e) => return word(format!("{e:#}")),
    };
    let back = npy::read(&bytes, Some(t.dtype))
        .unwrap_or_else(|e| panic!("a written .npy does not read: {e:#}"));
    assert!(back == *t, "a .npy reads back different");
}

/// ONNX `TensorProto` files (`.pb`) as `rt2 run --input` and `--check` read them: the
/// tensor, then the host tensor the device takes, which writes to `.npy` and back.
pub fn pb(data: &[u8]) {
    match onnx::read_tensor(data, "input.pb") {
        Ok(t) => {
            if let Some(h) = crate::lower::attrs::tensor(&t) {
                check_npy_round_trip(&h, false);
            }
        }
        Err(e) => word(e),
    }
}

/// Any model file or `.exeg`, as `rt2 run` takes it: read, lowered (a model), then
/// executed once on a small device (see the module doc) with seeded random inputs, under
/// `seq` and under `topo`, which must give the same output bits.
pub fn lower_run(data: &[u8]) {
    let eg = match read_exeg(data) {
        Some(Ok(eg)) => eg,
        Some(Err(e)) => return word(e),
        None => {
            let f = match file::read(data, &ReadOptions::default()) {
                Ok(f) => f,
                Err(e) => return word(e),
            };
            match lower(&f.root().model, &LowerOptions::default()) {
                Ok(eg) => eg,
                Err(e) => return word(e),
            }
        }
    };
    let Some(inputs) = run_inputs(&eg) else {
        return;
    };
    let device = Device::new(DeviceConfig {
        memory_bytes: RUN_DEVICE_MEMORY,
        compute_threads: 1,
        max_while_iterations: RUN_MAX_WHILE_ITERATIONS,
        check_launch_shapes: true,
        // A graph rt2 lowered never touches memory wrongly: any finding is rt2's bug.
        sanitize: Some(SanitizeChecks::ALL),
        ..DeviceConfig::default()
    });
    if let Some(first) = execute_once(&eg, &device, ExecutorType::Sequential, &inputs)
        && let Some(again) = execute_once(&eg, &device, ExecutorType::Topological, &inputs)
    {
        assert!(
            first == again,
            "seq and topo executions of one graph give different outputs"
        );
    }
    if let Some(r) = device.take_sanitizer_report() {
        assert!(
            r.is_clean(),
            "the device sanitizer found {} problem(s) running a lowered graph, first: {}",
            r.findings.len(),
            r.findings.first().map_or(String::new(), |f| f.line())
        );
    }
}

/// Seeded random inputs for `eg`, unknown dims taken as 1 (an unknown rank as a scalar);
/// `None` when an input's type is not one the device computes on or the inputs are more
/// than [`RUN_INPUT_BYTES`].
fn run_inputs(eg: &ExecuteGraph) -> Option<Vec<HostTensor>> {
    let mut total = 0u64;
    let mut out = Vec::with_capacity(eg.inputs.len());
    for (i, io) in eg.inputs.iter().enumerate() {
        let dtype = io.dtype?;
        let shape: Vec<i64> = if io.shape == [-2] {
            Vec::new()
        } else {
            io.shape
                .iter()
                .map(|&d| if d < 0 { 1 } else { d })
                .collect()
        };
        total = total.checked_add(dtype.tensor_bytes(&shape)?)?;
        if total > RUN_INPUT_BYTES {
            return None;
        }
        out.push(random::tensor(dtype, &shape, 0, i).ok()?);
    }
    Some(out)
}

/// One execution of `eg` by a fresh executor of `engine`: its outputs, or `None` when a
/// step failed (the error was worded and dropped).
fn execute_once(
    eg: &ExecuteGraph,
    device: &Device,
    engine: ExecutorType,
    inputs: &[HostTensor],
) -> Option<Vec<HostTensor>> {
    let mut ex = match ModelV2Executor::create(
        eg,
        device,
        ExecutorOptions {
            executor: engine,
            ..ExecutorOptions::default()
        },
    ) {
        Ok(ex) => ex,
        Err(e) => {
            word(e);
            return None;
        }
    };
    if let Err(e) = ex.load() {
        word(e);
        return None;
    }
    let refs: Vec<&HostTensor> = inputs.iter().collect();
    let mut out = Vec::new();
    let ran = ex.execute_sync(&refs, &mut out);
    let unloaded = ex.unload();
    match (ran, unloaded) {
        (Ok(()), Ok(())) => Some(out),
        (Err(e), _) | (_, Err(e)) => {
            word(e);
            None
        }
    }
}
