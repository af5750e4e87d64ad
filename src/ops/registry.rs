//! The op library's registry: per op type, its shape and dtype inference (what the
//! runtime's InferShape kernel calls and what lowering asks to decide which ops exist and
//! which shapes it can know ahead of time), its compute, and its optional hooks.
//!
//! An op's inference works on [`TensorMeta`]s whose dims may be unknown (-1) or whose
//! rank may be unknown (`None`): lowering runs it on the model's declared shapes to learn
//! what is static, and the runtime runs it on concrete shapes. Inference never panics on
//! any input; a bad combination is an [`OpError`] naming the input or attribute.

use std::collections::HashMap;
use std::fmt;

use super::attr::{Attr, AttrMap, HostTensor};
use super::dtype::DType;
use super::error::OpError;
use super::tensor::{Tensor, TensorMut, TensorRef};

/// Dimension value for an unknown dim.
pub const UNKNOWN: i64 = -1;

/// What shape inference knows of a tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorMeta {
    pub dtype: DType,
    /// `None`: unknown rank. A dim of -1: unknown.
    pub shape: Option<Vec<i64>>,
}

/// What a shape op gives for a tensor of `dims`, knowing nothing but them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeValues<'d> {
    /// Shape's: the dims from `start` to `end`.
    Dims(&'d [i64]),
    /// Size's element count or Rank's rank.
    One(i64),
}

/// The value of shape op `op` (`Shape` with its `start` and `end`, clamped as ONNX says;
/// `Size`; GE's `Rank`) for a tensor of `dims`: what inference knows of them from the
/// shape alone: the one definition that folding at lowering and the host kernel at run
/// time both use. `None` for another op, or a
/// `Size` past `i64` (which only a declared shape, checked by no inference, can give).
pub fn shape_values<'d>(op: &str, attrs: &Attrs, dims: &'d [i64]) -> Option<ShapeValues<'d>> {
    match op {
        "Shape" => {
            let r = dims.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let int = |k: &str| attrs.get(k).and_then(crate::ops::Attr::as_int);
            let start = clamp(int("start").unwrap_or(0));
            let end = clamp(int("end").unwrap_or(r));
            Some(ShapeValues::Dims(&dims[start..end.max(start)]))
        }
        "Size" => dims
            .iter()
            .try_fold(1i64, |n, &d| n.checked_mul(d))
            .map(ShapeValues::One),
        "Rank" => Some(ShapeValues::One(dims.len() as i64)),
        _ => None,
    }
}

impl TensorMeta {
    /// The type and (static) shape of `t`, as inference takes them.
    pub fn of(t: &Tensor) -> TensorMeta {
        let dims: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
        TensorMeta::new(t.dtype, &dims)
    }
    pub fn new(dtype: DType, shape: &[i64]) -> Self {
        TensorMeta {
            dtype,
            shape: Some(shape.to_vec()),
        }
    }
    pub fn unknown_rank(dtype: DType) -> Self {
        TensorMeta { dtype, shape: None }
    }
    /// Every dim known.
    pub fn is_static(&self) -> bool {
        self.shape
            .as_ref()
            .is_some_and(|s| s.iter().all(|&d| d >= 0))
    }
}

impl fmt::Display for TensorMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.shape {
            None => write!(f, "{} [?]", self.dtype),
            Some(s) => write!(f, "{} {s:?}", self.dtype),
        }
    }
}

/// The one output of an op, as inference returns it.
pub fn meta(dtype: DType, shape: Option<Vec<i64>>) -> Vec<TensorMeta> {
    vec![TensorMeta { dtype, shape }]
}

/// Attributes by name.
pub type Attrs = AttrMap;

/// What an op's inference is given. An optional input left out in the middle (Resize's
/// roi, Clip's min) is given as an empty 1-D tensor of input 0's type whose (empty) value
/// is known, ONNX's own spelling of "no value": inference treats an empty value as absent.
pub struct InferCtx<'a> {
    pub op: &'a str,
    pub inputs: &'a [TensorMeta],
    /// Values of inputs known ahead of time (constants, folded shapes), by input index.
    pub values: &'a [Option<&'a HostTensor>],
    pub attrs: &'a Attrs,
    /// How many outputs the node has (Split divides into that many).
    pub outputs: usize,
}

impl InferCtx<'_> {
    /// Checks the input count is within `min..=max`.
    pub fn arity(&self, min: usize, max: usize) -> Result<(), OpError> {
        let got = self.inputs.len();
        if got < min || got > max {
            let expected = if min == max {
                min.to_string()
            } else {
                format!("{min} to {max}")
            };
            return Err(OpError::Arity {
                op: self.op.to_string(),
                expected,
                got,
            });
        }
        Ok(())
    }
    pub fn input_error(&self, index: usize, msg: impl Into<String>) -> OpError {
        OpError::Input {
            op: self.op.to_string(),
            index,
            msg: msg.into(),
        }
    }

    pub fn attr_error(&self, name: &str, msg: impl Into<String>) -> OpError {
        OpError::Attribute {
            op: self.op.to_string(),
            name: name.to_string(),
            msg: msg.into(),
        }
    }

    /// An int attribute, `default` when absent.
    pub fn attr_int(&self, name: &str, default: i64) -> Result<i64, OpError> {
        match self.attrs.get(name) {
            None => Ok(default),
            Some(Attr::Int(v)) => Ok(*v),
            Some(other) => Err(self.attr_error(name, format!("is {other:?}, not an int"))),
        }
    }

    /// A list-of-ints attribute, `None` when absent.
    pub fn attr_ints(&self, name: &str) -> Result<Option<&[i64]>, OpError> {
        match self.attrs.get(name) {
            None => Ok(None),
            Some(Attr::Ints(v)) => Ok(Some(v)),
            Some(other) => Err(self.attr_error(name, format!("is {other:?}, not a list of ints"))),
        }
    }

    /// A list-of-ints attribute, or `len` copies of `fill` when absent (ONNX's defaults
    /// for strides, dilations, pads and output padding).
    pub fn attr_ints_or(&self, name: &str, fill: i64, len: usize) -> Result<Vec<i64>, OpError> {
        Ok(self
            .attr_ints(name)?
            .map_or_else(|| vec![fill; len], <[i64]>::to_vec))
    }

    /// A possibly negative axis, normalized for `rank`; `name` is the attribute it came from.
    pub fn axis(&self, axis: i64, rank: usize, name: &str) -> Result<usize, OpError> {
        let r = rank as i64;
        let a = if axis < 0 { axis + r } else { axis };
        if a < 0 || a >= r {
            return Err(
                self.attr_error(name, format!("axis {axis} is out of range for rank {rank}"))
            );
        }
        Ok(a as usize)
    }

    /// A failure while computing, naming the op.
    pub fn compute_error(&self, msg: impl Into<String>) -> OpError {
        OpError::Compute {
            op: self.op.to_string(),
            msg: msg.into(),
        }
    }

    /// A float attribute, `default` when absent (an int is taken as its value).
    pub fn attr_float(&self, name: &str, default: f32) -> Result<f32, OpError> {
        match self.attrs.get(name) {
            None => Ok(default),
            Some(Attr::Float(v)) => Ok(*v as f32),
            Some(Attr::Int(v)) => Ok(*v as f32),
            Some(other) => Err(self.attr_error(name, format!("is {other:?}, not a float"))),
        }
    }

    /// A bool attribute, `default` when absent (GE's `Bool`; an int is taken as nonzero).
    pub fn attr_bool(&self, name: &str, default: bool) -> Result<bool, OpError> {
        match self.attrs.get(name) {
            None => Ok(default),
            Some(Attr::Bool(v)) => Ok(*v),
            Some(Attr::Int(v)) => Ok(*v != 0),
            Some(other) => Err(self.attr_error(name, format!("is {other:?}, not a bool"))),
        }
    }

    /// A list-of-floats attribute, `None` when absent (a list of ints is taken as its values,
    /// and an empty list of unknown type as empty).
    pub fn attr_floats(&self, name: &str) -> Result<Option<Vec<f64>>, OpError> {
        match self.attrs.get(name) {
            None => Ok(None),
            Some(Attr::Floats(v)) => Ok(Some(v.clone())),
            Some(Attr::Ints(v)) => Ok(Some(v.iter().map(|&i| i as f64).collect())),
            Some(other) => {
                Err(self.attr_error(name, format!("is {other:?}, not a list of floats")))
            }
        }
    }

    /// A string attribute, `default` when absent.
    pub fn attr_str<'s>(&'s self, name: &str, default: &'s str) -> Result<&'s str, OpError> {
        match self.attrs.get(name) {
            None => Ok(default),
            Some(Attr::Str(v)) => Ok(v),
            Some(other) => Err(self.attr_error(name, format!("is {other:?}, not a string"))),
        }
    }

    /// The integer value of input `i`, when known ahead of time.
    pub fn value_ints(&self, i: usize) -> Result<Option<Vec<i64>>, OpError> {
        match self.values.get(i).copied().flatten() {
            None => Ok(None),
            Some(t) => t.int_values().map(Some).ok_or_else(|| {
                self.input_error(i, format!("is {}, expected int64 values", t.dtype))
            }),
        }
    }
}

/// An op's shape and dtype inference.
pub type InferFn = fn(&InferCtx) -> Result<Vec<TensorMeta>, OpError>;

/// An op's CPU compute into outputs the runtime allocated from inference: the context
/// (attributes, and the inputs' metas with any values inference read), the inputs, and
/// the outputs, shaped as inference said.
pub type ComputeFn = fn(&InferCtx, &[TensorRef], &mut [TensorMut]) -> Result<(), OpError>;

/// The compute of an op whose output shapes depend on the data (NonZero, Unique): it
/// allocates its outputs itself, and the runtime copies them to device memory.
pub type ComputeAllocFn = fn(&InferCtx, &[TensorRef]) -> Result<Vec<Tensor>, OpError>;

/// A compute function specialized for one launch's exact operands, chosen once by the op's
/// [`SpecializeFn`] when the launch is bound, and then called with the operands' bytes
/// alone: no dtype dispatch, no op-name match, no shape checks, no tensor views. This is
/// RT2's division of labour at its smallest grain: what a launch's types and shapes decide
/// is decided ahead of the run, so a small launch in steady state is its arithmetic.
///
/// It checks the byte lengths it is given against its own assumptions and returns `false`
/// without writing anything when they do not hold; the caller then runs the op's
/// general compute, which produces the result or names the error. So a specialization can
/// make a launch faster but never wrong. It writes exactly what the general compute would
/// (the same per-element functions), bit for bit.
pub type SpecialFn = fn(&[&[u8]], &mut [&mut [u8]]) -> bool;

/// Chooses an op's [`SpecialFn`] for a launch: the context (op name, attributes, the
/// inputs' metas) and the outputs' metas, all concrete. `None`: no specialization for
/// this case (the general compute runs). Cheap and allocation-free, as it runs whenever
/// a launch is rebound to new shapes.
pub type SpecializeFn = fn(&InferCtx, &[TensorMeta]) -> Option<SpecialFn>;

/// How an op computes.
#[derive(Clone, Copy)]
pub enum Compute {
    Into(ComputeFn),
    Alloc(ComputeAllocFn),
}

/// A constant input re-laid out once, ahead of every launch: what an op's [`PrepackFn`]
/// asks of whoever prepares the graph (lowering). GE's ATC stores weights in the Cube
/// unit's fractal formats for the same reason: a weight is constant for the model's life,
/// so rearranging it belongs with the work moved out of execution.
#[derive(Debug, Clone)]
pub struct Prepack {
    /// The op launched instead, on the prepared input.
    pub op: &'static str,
    /// Which input is prepared; it must be a constant.
    pub input: usize,
    /// Attributes the launched op takes beside the node's own.
    pub attrs: Vec<(&'static str, Attr)>,
    /// The input's new layout, from its value; `None` when the value does not fit after
    /// all (lowering then keeps the node as it is). A constant read by several launches
    /// is prepared once per `op`.
    pub pack: fn(&HostTensor) -> Option<HostTensor>,
}

/// Chooses a prepared layout for one of a launch's constant inputs, from the launch's
/// input metas, known values and attributes; `None` keeps the inputs as they are.
pub type PrepackFn = fn(&InferCtx) -> Option<Prepack>;

/// The op of the library a node is launched as, under that op's attribute names: what
/// an op's [`TranslateFn`] tells lowering.
#[derive(Debug, Clone)]
pub struct Translation {
    /// The op launched instead.
    pub op: &'static str,
    /// Its attributes, in place of the node's own.
    pub attrs: Attrs,
    /// The first of the node's inputs it takes (GE's Conv2DTranspose leaves out its
    /// input_size, input 0).
    pub first: usize,
    /// How many of the node's inputs it takes, from `first`; the rest are left out.
    pub inputs: usize,
}

/// Translates a node into another op of the library with the same results, once, at
/// lowering, from the node's input metas, known values and attributes (already checked by
/// the node's inference); `None` keeps the node as it is (a case the other op does not
/// cover, such as a layout it does not take). GE's ops are ONNX ops under other attribute
/// names: translating at lowering keeps that work, and the attribute maps it builds, out
/// of every launch, and lets the launched op's own lowering hooks ([`Prepack`]) apply.
pub type TranslateFn = fn(&InferCtx) -> Option<Translation>;

/// How a GE graph's node of an op type GE and ONNX both name is computed (see
/// [`GeContractFn`]).
#[derive(Debug, Clone)]
pub enum GeUse {
    /// By this op, with these attributes in place of the node's.
    Attrs(Attrs),
    /// By another op of the library: `op` with `attrs`, on the node's inputs
    /// `first..first + count` (GE's Split, whose `split_dim` input 0 is an attribute of
    /// SplitD).
    Launch {
        op: &'static str,
        attrs: Attrs,
        first: usize,
        count: usize,
    },
}

/// For an op type GE and ONNX both name: how a GE graph's node of it (one the ONNX
/// importer did not make) is computed so that it means what GE's prototype says, from the
/// node's input metas, known values and attributes. `Err` says why it cannot be, and the
/// node is then not computed (lowered as GE's compiled kernel).
pub type GeContractFn = fn(&InferCtx) -> Result<GeUse, String>;

impl GeUse {
    /// The op a node of `spec` with `inputs` inputs is launched as, the attributes it is
    /// launched with and the range of the node's inputs it takes; `Err` names a launch
    /// the library cannot make. One reading for lowering and for the op-by-op
    /// conformance runner.
    pub fn resolve(
        self,
        reg: &OpRegistry,
        spec: OpSpec,
        inputs: usize,
    ) -> Result<(OpSpec, Attrs, std::ops::Range<usize>), String> {
        match self {
            GeUse::Attrs(a) => Ok((spec, a, 0..inputs)),
            GeUse::Launch {
                op,
                attrs: a,
                first,
                count,
            } => match reg.get(op) {
                Some(target) if first + count <= inputs => Ok((*target, a, first..first + count)),
                _ => Err(format!(
                    "{op} on inputs {first}..{} is not in the op library",
                    first + count
                )),
            },
        }
    }
}

/// One op type of the library.
#[derive(Clone, Copy)]
pub struct OpSpec {
    pub name: &'static str,
    pub infer: InferFn,
    /// `None` while the op has shape inference only (lowering takes it; running it is an
    /// error naming the op).
    pub compute: Option<Compute>,
    /// Inputs whose *values* inference needs (Reshape's shape, Expand's shape): when they
    /// are not constants, the output shape is only known at run time.
    pub value_inputs: &'static [usize],
    /// The output shape depends on the data itself (NonZero, Unique): known only after the
    /// op has run.
    pub data_dependent: bool,
    /// Chooses a compute function specialized for a launch's operands, if the op has any.
    pub specialize: Option<SpecializeFn>,
    /// Chooses a layout for a constant input to be prepared in ahead of time, if the op
    /// has one.
    pub prepack: Option<PrepackFn>,
    /// Translates a node into another op of the library at lowering, if the op can be.
    pub translate: Option<TranslateFn>,
    /// For an ONNX op GE also names: what a GE graph's node of it needs (see
    /// [`GeContractFn`]).
    pub ge_contract: Option<GeContractFn>,
}

impl OpSpec {
    /// An op whose inference needs shapes only and whose output shape does not depend on
    /// the data.
    pub const fn new(name: &'static str, infer: InferFn) -> Self {
        OpSpec {
            name,
            infer,
            compute: None,
            value_inputs: &[],
            data_dependent: false,
            specialize: None,
            prepack: None,
            translate: None,
            ge_contract: None,
        }
    }
    /// The op computes into outputs shaped by inference.
    pub const fn computes(mut self, f: ComputeFn) -> Self {
        self.compute = Some(Compute::Into(f));
        self
    }
    /// The op computes outputs it allocates (data-dependent shapes).
    pub const fn computes_alloc(mut self, f: ComputeAllocFn) -> Self {
        self.compute = Some(Compute::Alloc(f));
        self
    }
    /// Inference also reads the values of these inputs.
    pub const fn reading(mut self, value_inputs: &'static [usize]) -> Self {
        self.value_inputs = value_inputs;
        self
    }
    /// The output shape depends on the data.
    pub const fn data_dependent(mut self) -> Self {
        self.data_dependent = true;
        self
    }
    /// The op has compute functions specialized for some launches (see [`SpecialFn`]).
    pub const fn specializes(mut self, f: SpecializeFn) -> Self {
        self.specialize = Some(f);
        self
    }
    /// The op would rather read a constant input in a layout prepared ahead of time (see
    /// [`Prepack`]).
    pub const fn prepacks(mut self, f: PrepackFn) -> Self {
        self.prepack = Some(f);
        self
    }
    /// The op is another op of the library under other attribute names where `f` says
    /// so (see [`Translation`]).
    pub const fn translates(mut self, f: TranslateFn) -> Self {
        self.translate = Some(f);
        self
    }
    /// The op's shape and dtype inference, with every output's size checked: the product
    /// of an output's known dims, times its element size, must fit in `i64` (what shapes
    /// and sizes are counted in), else [`OpError::TooLarge`]. Each op's inference checks
    /// its own arithmetic; this is the net under all of them, so no caller ever sizes a
    /// tensor from a product that wrapped. Every caller of inference goes through here.
    pub fn infer_shapes(&self, ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
        let outs = (self.infer)(ctx)?;
        for (index, m) in outs.iter().enumerate() {
            let Some(shape) = &m.shape else { continue };
            let known = shape
                .iter()
                .filter(|&&d| d >= 0)
                .try_fold(m.dtype.size() as i64, |n, &d| n.checked_mul(d));
            if known.is_none() {
                return Err(OpError::TooLarge {
                    op: ctx.op.to_string(),
                    index,
                    shape: shape.clone(),
                    dtype: m.dtype,
                });
            }
        }
        Ok(outs)
    }
    /// The compute function specialized for a launch of this op on `ctx`'s inputs into `outputs`,
    /// if there is one.
    pub fn special(&self, ctx: &InferCtx, outputs: &[TensorMeta]) -> Option<SpecialFn> {
        self.specialize.and_then(|f| f(ctx, outputs))
    }
}

impl fmt::Debug for OpSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpSpec")
            .field("name", &self.name)
            .field("value_inputs", &self.value_inputs)
            .field("data_dependent", &self.data_dependent)
            .field("computes", &self.compute.is_some())
            .field("specializes", &self.specialize.is_some())
            .field("prepacks", &self.prepack.is_some())
            .field("translates", &self.translate.is_some())
            .field("ge_contract", &self.ge_contract.is_some())
            .finish()
    }
}

/// Every op type the library has.
#[derive(Debug, Default)]
pub struct OpRegistry {
    /// foldhash, not SipHash: every launch a stream worker runs looks its op up here.
    ops: HashMap<&'static str, OpSpec, foldhash::fast::FixedState>,
}

/// The whole op library, built once: for an op that is another op of the library under
/// other names (GE's aliases) and must reach that op's inference and compute from a
/// function pointer. (`OpRegistry::new`, which assembles it, is the library's top file's.)
pub fn library() -> &'static OpRegistry {
    static LIBRARY: std::sync::LazyLock<OpRegistry> = std::sync::LazyLock::new(OpRegistry::new);
    &LIBRARY
}

/// The byte [`OpRegistry::run_on_host`] fills outputs with before computing: a NaN in
/// every float type, -1 in every signed integer type, the maximum in every unsigned one.
pub const HOST_POISON: u8 = 0xFF;

impl OpRegistry {
    /// Adds an op; a later registration of the same name replaces the earlier.
    pub fn add(&mut self, spec: OpSpec) {
        self.ops.insert(spec.name, spec);
    }
    pub fn get(&self, name: &str) -> Option<&OpSpec> {
        self.ops.get(name)
    }
    /// Runs `op` on host tensors, the way a launch runs it on device memory: infers the
    /// outputs from the inputs' concrete shapes (and the values of the inputs inference
    /// reads), allocates them, and computes. An optional input left out is an empty 1-D
    /// tensor, as [`InferCtx`] says. The reference driver for tests and the conformance
    /// harness.
    ///
    /// Outputs start poisoned ([`HOST_POISON`] in every byte), as a block the device's
    /// caching allocator hands out again holds whatever its last tensor left: a compute
    /// function must write every output element, never add onto what it finds.
    pub fn run_on_host(
        &self,
        op: &str,
        attrs: &Attrs,
        inputs: &[Tensor],
        outputs: usize,
    ) -> Result<Vec<Tensor>, OpError> {
        self.run_on_host_poisoned(op, attrs, inputs, outputs, HOST_POISON)
    }

    /// [`run_on_host`](Self::run_on_host) on host tensors, as lowering holds constants:
    /// the outputs as host tensors. `None` where a value does not fill its shape.
    pub fn run_on_host_values(
        &self,
        op: &str,
        attrs: &Attrs,
        inputs: &[&HostTensor],
        outputs: usize,
    ) -> Result<Option<Vec<HostTensor>>, OpError> {
        let Some(inputs) = inputs
            .iter()
            .map(|t| Tensor::from_host(t))
            .collect::<Option<Vec<Tensor>>>()
        else {
            return Ok(None);
        };
        let outs = self.run_on_host(op, attrs, &inputs, outputs)?;
        Ok(Some(outs.iter().map(Tensor::to_host).collect()))
    }

    /// [`run_on_host`](Self::run_on_host) with the outputs filled with `poison` first: two
    /// runs with different poisons give the same results only if the op writes every
    /// output byte (what tests/ge_op_sweep.rs checks of every GE op).
    pub fn run_on_host_poisoned(
        &self,
        op: &str,
        attrs: &Attrs,
        inputs: &[Tensor],
        outputs: usize,
        poison: u8,
    ) -> Result<Vec<Tensor>, OpError> {
        let spec = self
            .get(op)
            .ok_or_else(|| OpError::NoCompute { op: op.to_string() })?;
        let metas: Vec<TensorMeta> = inputs.iter().map(TensorMeta::of).collect();
        let hosts: Vec<Option<HostTensor>> = (0..inputs.len())
            .map(|i| spec.value_inputs.contains(&i).then(|| inputs[i].to_host()))
            .collect();
        let values: Vec<Option<&HostTensor>> = hosts.iter().map(Option::as_ref).collect();
        let ctx = InferCtx {
            op,
            inputs: &metas,
            values: &values,
            attrs,
            outputs,
        };
        let refs: Vec<TensorRef> = inputs.iter().map(Tensor::as_ref).collect();
        match spec.compute {
            None => Err(OpError::NoCompute { op: op.to_string() }),
            Some(Compute::Alloc(f)) => f(&ctx, &refs),
            Some(Compute::Into(f)) => {
                let out_metas = spec.infer_shapes(&ctx)?;
                let mut outs = Vec::with_capacity(out_metas.len());
                for (index, m) in out_metas.iter().enumerate() {
                    let shape: Option<Vec<usize>> = m
                        .shape
                        .as_ref()
                        .and_then(|s| s.iter().map(|&d| usize::try_from(d).ok()).collect());
                    let shape = shape.ok_or_else(|| OpError::NotConcrete {
                        op: op.to_string(),
                        index,
                        meta: m.to_string(),
                    })?;
                    let mut t = Tensor::zeroed(m.dtype, &shape);
                    t.data.as_bytes_mut().fill(poison);
                    outs.push(t);
                }
                let mut muts: Vec<TensorMut> = outs.iter_mut().map(Tensor::as_mut).collect();
                f(&ctx, &refs, &mut muts)?;
                Ok(outs)
            }
        }
    }
    /// Sets the GE-contract hook of `op`, if registered (the library's assembly, which
    /// knows both vocabularies, does this for the types they share).
    pub fn set_ge_contract(&mut self, op: &str, f: GeContractFn) {
        if let Some(spec) = self.ops.get_mut(op) {
            spec.ge_contract = Some(f);
        }
    }
    /// Op type names, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = self.ops.keys().copied().collect();
        v.sort_unstable();
        v
    }
}

/// rt2's attribute with a node's declared output shape (list of ints: the shape of its
/// first output descriptor, in its origin layout), for the ops whose output shape does not
/// follow from their inputs and attributes alone ([`DECLARED_SHAPE_OPS`]): TransData out of
/// a blocked format (NC1HWC0, FRACTAL_Z, ...: the padding hides the true C), and Aipp with
/// a crop size of 0 (GE then crops the model input's size). GE has no such attribute; its
/// ops read their output descriptors. Lowering sets it on those ops from the graph, and
/// each op checks it against what it computes.
pub const DECLARED_SHAPE_ATTR: &str = "_rt2_declared_shape";

/// The attribute lowering puts on each node of a GE graph: the origin format of each of
/// its inputs as the graph's tensor descriptors record them (`C_Format` numbers). An op
/// whose meaning depends on a layout its prototype takes from the tensor rather than from
/// an attribute (ResizeBilinearV2's NHWC or NCHW) reads it through
/// [`crate::ops::ge::input_format`]. GE has no such attribute: its ops read their
/// descriptors.
pub const INPUT_FORMATS_ATTR: &str = "_input_origin_formats";

/// The op types that read [`DECLARED_SHAPE_ATTR`].
pub const DECLARED_SHAPE_OPS: &[&str] = &["TransData", "Aipp"];
