//! ONNX backend conformance: the backend's node test cases, run op by op, checked against
//! the expected outputs they ship.
//!
//! A case is a folder with `model.onnx` and `test_data_set_*/{input,output}_K.pb`. The
//! model is imported as rt2 imports any model, then runs op by op on an emulated device,
//! in graph order: the data set's inputs are uploaded, each op's outputs are inferred
//! from the concrete shapes and allocated in device memory, the op is launched on a
//! stream, and the graph outputs are downloaded. Each output is checked for element type
//! and shape, then for values within a [`Tolerance`].
//!
//! The passing cases are kept in a manifest (one `name tolerance` line each, sorted):
//! `tests/conformance.rs` runs it, and regenerates it from what passes with
//! `RT2_BLESS=1`. A case fails one of three ways: the model uses something rt2 does not
//! run ([`Outcome::Unsupported`]), an op reports an error ([`Outcome::Error`]), or an
//! output differs ([`Outcome::Mismatch`]).

use std::fmt;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::exec::runtime::executor::ExecutorOptions;
use crate::exec::runtime::{ExecutorType, ModelV2Executor};
use crate::lower::attrs;
use crate::npu::device::{Device, DeviceConfig, DevicePtr, Launch, NpuError, StreamId, TensorArg};
use crate::om::file::{self, ReadOptions};
use crate::om::graph::{ComputeGraph, ComputeNode, is_const_type, is_data_type};
use crate::ops::{Compute, InferCtx, OpError, OpRegistry, Tensor, TensorMeta};
use crate::ops::{DType, HostTensor};

/// How close an output must be to the expected one. Floats compare as
/// `|got - want| <= atol + rtol * |want|`, NaN equal to NaN; integers and bools exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tolerance {
    /// Bit for bit.
    Exact,
    /// rtol 1e-5, atol 1e-6.
    Tight,
    /// The ONNX backend runner's default: rtol 1e-3, atol 1e-7.
    Default,
    /// rtol 1e-2, atol 1e-3: half-precision results and long accumulations.
    Loose,
}

impl Tolerance {
    /// Tightest first.
    pub const LADDER: [Tolerance; 4] = [
        Tolerance::Exact,
        Tolerance::Tight,
        Tolerance::Default,
        Tolerance::Loose,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Tolerance::Exact => "exact",
            Tolerance::Tight => "tight",
            Tolerance::Default => "default",
            Tolerance::Loose => "loose",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        Self::LADDER.into_iter().find(|t| t.name() == s)
    }
    /// (rtol, atol); `None` for [`Tolerance::Exact`].
    fn bounds(self) -> Option<(f64, f64)> {
        match self {
            Tolerance::Exact => None,
            Tolerance::Tight => Some((1e-5, 1e-6)),
            Tolerance::Default => Some((1e-3, 1e-7)),
            Tolerance::Loose => Some((1e-2, 1e-3)),
        }
    }
}

/// One case: its model and data sets.
#[derive(Debug)]
pub struct Case {
    pub name: String,
    pub dir: PathBuf,
}

/// What running a case gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every output of every data set is within this tolerance (the tightest that holds).
    Pass(Tolerance),
    /// The model uses what rt2 does not run: an element type, an op, a subgraph.
    Unsupported(String),
    /// An op failed, or the case's files are unusable.
    Error(String),
    /// An output differs beyond the loosest tolerance.
    Mismatch(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Pass(t) => write!(f, "pass ({})", t.name()),
            Outcome::Unsupported(m) => write!(f, "unsupported: {m}"),
            Outcome::Error(m) => write!(f, "error: {m}"),
            Outcome::Mismatch(m) => write!(f, "mismatch: {m}"),
        }
    }
}

/// The case folders under `dir` (those with a `model.onnx`), sorted by name.
pub fn cases(dir: &Path) -> std::io::Result<Vec<Case>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let dir = e?.path();
        if dir.join("model.onnx").is_file() {
            let name = dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            v.push(Case { name, dir });
        }
    }
    v.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(v)
}

fn read_tensor(path: &Path) -> Result<Tensor, Outcome> {
    let bytes =
        std::fs::read(path).map_err(|e| Outcome::Error(format!("{}: {e}", path.display())))?;
    let t = crate::om::onnx::read_tensor(&bytes, &path.display().to_string())
        .map_err(|e| Outcome::Unsupported(e.to_string()))?;
    let host = attrs::tensor(&t).ok_or_else(|| {
        Outcome::Unsupported(format!(
            "{}: element type {:?} is not a device type",
            path.display(),
            t.desc.dtype
        ))
    })?;
    Tensor::from_host(&host)
        .ok_or_else(|| Outcome::Error(format!("{}: inconsistent tensor", path.display())))
}

/// One data set: the inputs and the expected outputs.
type DataSet = (Vec<Tensor>, Vec<Tensor>);

/// The data sets of a case.
fn data_sets(case: &Case) -> Result<Vec<DataSet>, Outcome> {
    let mut sets = Vec::new();
    for k in 0.. {
        let d = case.dir.join(format!("test_data_set_{k}"));
        if !d.is_dir() {
            break;
        }
        let read_all = |prefix: &str| -> Result<Vec<Tensor>, Outcome> {
            let mut v = Vec::new();
            for i in 0.. {
                let p = d.join(format!("{prefix}_{i}.pb"));
                if !p.is_file() {
                    break;
                }
                v.push(read_tensor(&p)?);
            }
            Ok(v)
        };
        sets.push((read_all("input")?, read_all("output")?));
    }
    if sets.is_empty() {
        return Err(Outcome::Error("no test_data_set_0".into()));
    }
    Ok(sets)
}

/// How a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    /// Op by op on the device, straight from the ComputeGraph: the op library alone.
    OpByOp,
    /// The whole pipeline: lower (with the multi-thread passes for `topo-mt`), load, and
    /// execute with the executor type.
    Engine(ExecutorType),
    /// [`Runner::Engine`] with static memory planning (`LowerOptions::static_memory`).
    Planned(ExecutorType),
}

/// Runs one case op by op on a fresh emulated device running `ops`.
pub fn run_case(case: &Case, ops: &Arc<OpRegistry>) -> Outcome {
    run_case_with(case, ops, Runner::OpByOp)
}

/// Runs one case with `runner` on a fresh emulated device running `ops`.
pub fn run_case_with(case: &Case, ops: &Arc<OpRegistry>, runner: Runner) -> Outcome {
    let r = match runner {
        Runner::OpByOp => try_run(case, ops),
        Runner::Engine(e) => try_run_engine(case, ops, e, false),
        Runner::Planned(e) => try_run_engine(case, ops, e, true),
    };
    match r {
        Ok(t) => Outcome::Pass(t),
        Err(o) => o,
    }
}

fn check_outputs(
    got: &[Tensor],
    expected: &[Tensor],
    worst: &mut Tolerance,
) -> Result<(), Outcome> {
    if got.len() != expected.len() {
        return Err(Outcome::Error(format!(
            "{} outputs computed, {} expected",
            got.len(),
            expected.len()
        )));
    }
    for (i, (g, w)) in got.iter().zip(expected).enumerate() {
        let t = compare(g, w).map_err(|m| Outcome::Mismatch(format!("output {i}: {m}")))?;
        *worst = (*worst).max(t);
    }
    Ok(())
}

fn try_run_engine(
    case: &Case,
    ops: &Arc<OpRegistry>,
    executor: ExecutorType,
    static_memory: bool,
) -> Result<Tolerance, Outcome> {
    let bytes = std::fs::read(case.dir.join("model.onnx"))
        .map_err(|e| Outcome::Error(format!("model.onnx: {e}")))?;
    let f = file::read(&bytes, &ReadOptions::default())
        .map_err(|e| Outcome::Unsupported(format!("import: {e}")))?;
    let opts = crate::lower::LowerOptions {
        multi_thread: executor == ExecutorType::TopologicalMultiThread,
        static_memory,
        ..Default::default()
    };
    let eg = crate::lower::lower(&f.root().model, &opts).map_err(|e| match e {
        crate::lower::LowerError::Unsupported(_) => Outcome::Unsupported(format!("lower: {e}")),
        e => Outcome::Error(format!("lower: {e}")),
    })?;
    let device = Device::new(DeviceConfig {
        ops: Some(ops.clone()),
        ..DeviceConfig::default()
    });
    let options = ExecutorOptions {
        executor,
        ..ExecutorOptions::default()
    };
    let mut ex = ModelV2Executor::create(&eg, &device, options)
        .map_err(|e| Outcome::Error(format!("create: {e}")))?;
    ex.load()
        .map_err(|e| Outcome::Error(format!("load: {e}")))?;
    let mut worst = Tolerance::Exact;
    let mut outs = Vec::new();
    for (inputs, expected) in data_sets(case)? {
        let hosts: Vec<HostTensor> = inputs.iter().map(Tensor::to_host).collect();
        let refs: Vec<&HostTensor> = hosts.iter().collect();
        ex.execute_sync(&refs, &mut outs)
            .map_err(|e| Outcome::Error(format!("execute: {e}")))?;
        let got: Vec<Tensor> = outs
            .iter()
            .map(|h| {
                Tensor::from_host(h).ok_or_else(|| Outcome::Error("inconsistent output".into()))
            })
            .collect::<Result<_, _>>()?;
        check_outputs(&got, &expected, &mut worst)?;
    }
    ex.unload()
        .map_err(|e| Outcome::Error(format!("unload: {e}")))?;
    Ok(worst)
}

fn try_run(case: &Case, ops: &Arc<OpRegistry>) -> Result<Tolerance, Outcome> {
    let bytes = std::fs::read(case.dir.join("model.onnx"))
        .map_err(|e| Outcome::Error(format!("model.onnx: {e}")))?;
    let f = file::read(&bytes, &ReadOptions::default())
        .map_err(|e| Outcome::Unsupported(format!("import: {e}")))?;
    let g = &f.root().model.root;
    let device = Device::new(DeviceConfig {
        ops: Some(ops.clone()),
        ..DeviceConfig::default()
    });
    let mut worst = Tolerance::Exact;
    for (inputs, expected) in data_sets(case)? {
        let got = OnDevice::new(&device).evaluate(g, inputs)?;
        check_outputs(&got, &expected, &mut worst)?;
    }
    Ok(worst)
}

/// A graph run op by op on a device, the way the runtime's kernels drive it: values live
/// in device memory; before each op, the values its inference reads are downloaded, the
/// outputs are inferred and allocated, and the op is launched on the stream.
struct OnDevice<'d> {
    device: &'d Device,
    stream: StreamId,
    /// Everything allocated, freed when the run ends.
    allocated: Vec<DevicePtr>,
}

impl Drop for OnDevice<'_> {
    fn drop(&mut self) {
        for p in self.allocated.drain(..) {
            // The device is dropped with the case; a failed free changes no result.
            let _ = self.device.free(p, self.stream);
        }
    }
}

impl<'d> OnDevice<'d> {
    fn new(device: &'d Device) -> Self {
        OnDevice {
            device,
            stream: device.default_stream(),
            allocated: Vec::new(),
        }
    }

    fn alloc(&mut self, dtype: DType, shape: &[usize]) -> Result<TensorArg, NpuError> {
        let bytes = shape.iter().product::<usize>() * dtype.size();
        // A zero-byte tensor still gets an address of its own.
        let ptr = self.device.malloc(bytes.max(1), self.stream)?;
        self.allocated.push(ptr);
        Ok(TensorArg::new(ptr, dtype, shape))
    }

    fn upload(&mut self, t: &Tensor) -> Result<TensorArg, NpuError> {
        let arg = self.alloc(t.dtype, &t.shape)?;
        self.device.memcpy_h2d(arg.ptr, t.data.as_bytes())?;
        Ok(arg)
    }

    fn download(&self, arg: &TensorArg) -> Result<Tensor, NpuError> {
        let mut t = Tensor::zeroed(arg.dtype, &arg.shape);
        self.device.memcpy_d2h(t.data.as_bytes_mut(), arg.ptr)?;
        Ok(t)
    }

    /// Runs the graph's ops in order on `inputs`; the graph outputs.
    fn evaluate(&mut self, g: &ComputeGraph, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, Outcome> {
        let order = crate::lower::convert::compute_order(g).map_err(Outcome::Error)?;
        let mut values: Vec<Vec<Option<TensorArg>>> = vec![Vec::new(); g.nodes.len()];
        for id in order {
            let n = g.node(id);
            let at = |msg: String| format!("node {:?} ({}): {msg}", n.name, n.op_type);
            let fault = |e: NpuError| Outcome::Error(at(e.to_string()));
            if !n.subgraphs.is_empty() {
                return Err(Outcome::Unsupported(at(
                    "control flow runs in an executor".into()
                )));
            }
            let mut args = Vec::with_capacity(n.inputs.len());
            for p in &n.inputs {
                match p {
                    Some(p) => args.push(
                        values[p.node.index()]
                            .get(p.index as usize)
                            .and_then(Option::clone)
                            .ok_or_else(|| {
                                Outcome::Error(at(format!("input {p:?} has no value")))
                            })?,
                    ),
                    // An optional input left out: an empty 1-D tensor, as the op library
                    // takes it.
                    None => {
                        let dtype = args.first().map_or(DType::F32, |t: &TensorArg| t.dtype);
                        args.push(self.alloc(dtype, &[0]).map_err(fault)?);
                    }
                }
            }
            let out: Vec<Option<TensorArg>> = if is_data_type(&n.op_type) {
                let k = n.attr_int("index").unwrap_or(0) as usize;
                let t = inputs
                    .get(k)
                    .ok_or_else(|| Outcome::Error(at(format!("no input_{k}.pb"))))?;
                vec![Some(self.upload(t).map_err(fault)?)]
            } else if is_const_type(&n.op_type) {
                let t = n
                    .attr("value")
                    .and_then(|v| v.as_tensor())
                    .and_then(attrs::tensor)
                    .and_then(|h: HostTensor| Tensor::from_host(&h))
                    .ok_or_else(|| {
                        Outcome::Unsupported(at("a constant of a non-device type".into()))
                    })?;
                vec![Some(self.upload(&t).map_err(fault)?)]
            } else if n.op_type == "NetOutput" {
                // Every launch ended in a synchronize: the stream is idle here.
                return args
                    .iter()
                    .map(|a| self.download(a).map_err(fault))
                    .collect();
            } else {
                self.launch(n, args).map_err(|e| match e {
                    Launched::Unsupported(m) => Outcome::Unsupported(at(m)),
                    Launched::Failed(m) => Outcome::Error(at(m)),
                })?
            };
            values[id.index()] = out;
        }
        Err(Outcome::Error("the graph has no NetOutput".into()))
    }

    /// One op: inference on the concrete shapes (with the values it reads downloaded),
    /// outputs allocated, the launch, and a synchronize so a fault names this node.
    fn launch(
        &mut self,
        n: &ComputeNode,
        args: Vec<TensorArg>,
    ) -> Result<Vec<Option<TensorArg>>, Launched> {
        let failed = |e: NpuError| Launched::Failed(e.to_string());
        let spec = *self
            .device
            .ops()
            .get(&n.op_type)
            .ok_or_else(|| Launched::Unsupported("no such op in the library".into()))?;
        let (spec, op_attrs, args) = self.ge_use(n, spec, args)?;
        let compute = spec.compute.ok_or_else(|| {
            Launched::Unsupported(
                OpError::NoCompute {
                    op: n.op_type.clone(),
                }
                .to_string(),
            )
        })?;
        let outputs = n.output_descs.len();
        let allocating = matches!(compute, Compute::Alloc(_));
        let launch = if allocating {
            Launch::allocating(spec.name.to_string(), op_attrs, args, outputs)
        } else {
            // The previous launch ended in a synchronize and uploads are synchronous, so
            // the values inference reads can be downloaded at once.
            let metas: Vec<TensorMeta> = args.iter().map(TensorArg::meta).collect();
            let hosts: Vec<Option<HostTensor>> = args
                .iter()
                .enumerate()
                .map(|(i, a)| match spec.value_inputs.contains(&i) {
                    true => self.download(a).map(|t| Some(t.to_host())),
                    false => Ok(None),
                })
                .collect::<Result<_, _>>()
                .map_err(failed)?;
            let values: Vec<Option<&HostTensor>> = hosts.iter().map(Option::as_ref).collect();
            let ctx = InferCtx {
                op: spec.name,
                inputs: &metas,
                values: &values,
                attrs: &op_attrs,
                outputs,
            };
            let metas = spec
                .infer_shapes(&ctx)
                .map_err(|e| Launched::Failed(e.to_string()))?;
            let mut outs = Vec::with_capacity(metas.len());
            for m in &metas {
                let shape: Option<Vec<usize>> = m
                    .shape
                    .as_ref()
                    .and_then(|s| s.iter().map(|&d| usize::try_from(d).ok()).collect());
                let shape = shape.ok_or_else(|| {
                    Launched::Failed(format!("output inferred as {m}, not a concrete shape"))
                })?;
                outs.push(self.alloc(m.dtype, &shape).map_err(failed)?);
            }
            Launch::new(spec.name.to_string(), op_attrs, args, outs)
        };
        let outs = if allocating {
            let outs = self
                .device
                .launch_alloc_outputs(self.stream, launch)
                .map_err(failed)?
                .wait()
                .map_err(failed)?;
            self.allocated.extend(outs.iter().map(|a| a.ptr));
            outs
        } else {
            let outs = launch.outputs().to_vec();
            self.device.launch(self.stream, launch).map_err(failed)?;
            outs
        };
        self.device.synchronize(self.stream).map_err(failed)?;
        Ok(outs.into_iter().map(Some).collect())
    }
}

impl OnDevice<'_> {
    /// The op, attributes and operands a node launches as: a GE graph's node of a type
    /// the library shares with ONNX goes through the op's GE contract, as lowering takes
    /// it (GE's Transpose with its `perm` input is the library's Transpose with `perm`
    /// the attribute); any other node as it is.
    fn ge_use(
        &self,
        n: &ComputeNode,
        spec: crate::ops::OpSpec,
        args: Vec<TensorArg>,
    ) -> Result<(crate::ops::OpSpec, crate::ops::Attrs, Vec<TensorArg>), Launched> {
        let op_attrs = attrs::op_attrs(&n.attrs);
        let Some(contract) = spec
            .ge_contract
            .filter(|_| !n.attrs.contains_key(attrs::ONNX_OPSET_ATTR))
        else {
            return Ok((spec, op_attrs, args));
        };
        let metas: Vec<TensorMeta> = args.iter().map(TensorArg::meta).collect();
        let hosts: Vec<HostTensor> = args
            .iter()
            .map(|a| self.download(a).map(|t| t.to_host()))
            .collect::<Result<_, _>>()
            .map_err(|e| Launched::Failed(e.to_string()))?;
        let values: Vec<Option<&HostTensor>> = hosts.iter().map(Some).collect();
        let ctx = InferCtx {
            op: &n.op_type,
            inputs: &metas,
            values: &values,
            attrs: &op_attrs,
            outputs: n.output_descs.len(),
        };
        let (target, attrs, range) = contract(&ctx)
            .and_then(|u| u.resolve(self.device.ops(), spec, args.len()))
            .map_err(Launched::Unsupported)?;
        Ok((target, attrs, args[range].to_vec()))
    }
}

/// Why an op could not run.
enum Launched {
    Unsupported(String),
    Failed(String),
}

/// The tightest tolerance `got` meets against `want`, or what differs.
pub fn compare(got: &Tensor, want: &Tensor) -> Result<Tolerance, String> {
    if got.dtype != want.dtype {
        return Err(format!(
            "type {} where {} was expected",
            got.dtype, want.dtype
        ));
    }
    if got.shape != want.shape {
        return Err(format!(
            "shape {:?} where {:?} was expected",
            got.shape, want.shape
        ));
    }
    if got.data.as_bytes() == want.data.as_bytes() {
        return Ok(Tolerance::Exact);
    }
    let (g, w) = match (floats(got), floats(want)) {
        (Some(g), Some(w)) => (g, w),
        _ => {
            let at = got
                .data
                .as_bytes()
                .iter()
                .zip(want.data.as_bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(0)
                / got.dtype.size().max(1);
            return Err(format!("element {at} differs (exact type {})", got.dtype));
        }
    };
    let mut worst = (0usize, 0.0f64);
    'ladder: for t in &Tolerance::LADDER[1..] {
        let (rtol, atol) = t.bounds().expect("inexact tolerances have bounds");
        for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
            let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
            if !ok {
                worst = (i, a);
                continue 'ladder;
            }
        }
        return Ok(*t);
    }
    let (i, a) = worst;
    Err(format!(
        "element {i} is {a}, expected {} (beyond rtol 1e-2)",
        w[i]
    ))
}

/// A float tensor's elements as f64.
fn floats(t: &Tensor) -> Option<Vec<f64>> {
    use half::{bf16, f16};
    Some(match t.dtype {
        DType::F32 => t.slice::<f32>().ok()?.iter().map(|&x| x as f64).collect(),
        DType::F64 => t.slice::<f64>().ok()?.to_vec(),
        DType::F16 => t.slice::<f16>().ok()?.iter().map(|x| x.to_f64()).collect(),
        DType::Bf16 => t.slice::<bf16>().ok()?.iter().map(|x| x.to_f64()).collect(),
        _ => return None,
    })
}

/// A manifest: passing case names with their tolerances, one `name tolerance` line each.
pub fn parse_manifest(text: &str) -> Result<Vec<(String, Tolerance)>, String> {
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(name), Some(tol), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("line {}: expected `name tolerance`", i + 1));
        };
        let tol = Tolerance::from_name(tol)
            .ok_or_else(|| format!("line {}: unknown tolerance {tol:?}", i + 1))?;
        v.push((name.to_string(), tol));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_finds_the_tightest_tolerance() {
        let a = Tensor::from_vec(&[3], &[1.0f32, 2.0, f32::NAN]);
        assert_eq!(compare(&a, &a), Ok(Tolerance::Exact));
        let b = Tensor::from_vec(&[3], &[1.000001f32, 2.0, f32::NAN]);
        assert_eq!(compare(&b, &a), Ok(Tolerance::Tight));
        let c = Tensor::from_vec(&[3], &[1.0005f32, 2.0, f32::NAN]);
        assert_eq!(compare(&c, &a), Ok(Tolerance::Default));
        let d = Tensor::from_vec(&[3], &[1.5f32, 2.0, f32::NAN]);
        assert!(compare(&d, &a).unwrap_err().contains("element 0"));
        let e = Tensor::from_vec(&[1, 3], &[1.0f32, 2.0, f32::NAN]);
        assert!(compare(&e, &a).unwrap_err().contains("shape"));
        let i = Tensor::from_vec(&[2], &[1i64, 2]);
        let j = Tensor::from_vec(&[2], &[1i64, 3]);
        assert!(compare(&i, &j).unwrap_err().contains("element 1"));
    }

    #[test]
    fn manifest_lines_parse_and_bad_ones_are_named() {
        let m = parse_manifest("# c\ntest_abs exact\n\ntest_add default\n").unwrap();
        assert_eq!(
            m,
            vec![
                ("test_abs".into(), Tolerance::Exact),
                ("test_add".into(), Tolerance::Default)
            ]
        );
        assert!(
            parse_manifest("test_x fuzzy")
                .unwrap_err()
                .contains("line 1")
        );
        assert!(parse_manifest("test_x").unwrap_err().contains("line 1"));
    }
}
