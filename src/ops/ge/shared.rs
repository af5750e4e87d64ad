//! Op types GE and ONNX both name, read from a GE graph. rt2 computes such a type with
//! the ONNX op of the name, which is right for a GE node only where the two contracts
//! agree: GE's prototype may add attributes (Exp's `base`, `scale`, `shift`), name one
//! differently (GatherElements' `dim`), default it differently (HardSigmoid's `alpha`,
//! the reductions' `keep_dims`), or order the inputs differently (Split's `split_dim`
//! first). [`ge_node_attrs`] makes a GE node's attributes say to the ONNX op what GE's
//! mean, or refuses the node when they cannot: lowering then treats it as an op rt2
//! cannot compute (a compiled kernel's launch, refused by `rt2 run` with the reason),
//! never as the ONNX op computing something else.
//!
//! A node the ONNX importer made (it carries `onnx_opset`) is ONNX's and is not asked.
//! Lowering asks through the op's [`crate::ops::OpSpec::ge_contract`] hook. Op types only
//! GE names, and GE's own family ([`super::coverage::GE_CONTRACT`]), are not
//! in question either. The facts are each type's prototype ([`super::prototype`]).

use super::attrs::onnx_attrs;
use crate::ops::{Attr, Attrs, DType, GeContractFn, GeUse, InferCtx};

/// A value in a rule.
#[derive(Debug, Clone, Copy, PartialEq)]
enum V {
    I(i64),
    F(f64),
    B(bool),
    S(&'static str),
    /// An element type (a type attribute, already read in GE's numbering by lowering).
    T(DType),
}

impl V {
    fn matches(self, a: &Attr) -> bool {
        match (self, a) {
            (V::I(v), Attr::Int(i)) => *i == v,
            (V::B(v), Attr::Int(i)) => (*i != 0) == v,
            (V::B(v), Attr::Bool(b)) => *b == v,
            // GE stores floats as float32: compare at that precision.
            (V::F(v), Attr::Float(f)) => (*f as f32) == (v as f32),
            (V::I(v), Attr::Float(f)) => *f == v as f64,
            (V::S(v), Attr::Str(s)) => s == v,
            (V::T(v), Attr::DType(d)) => *d == v,
            _ => false,
        }
    }

    fn attr(self) -> Attr {
        match self {
            V::I(v) => Attr::Int(v),
            V::F(v) => Attr::Float(v),
            V::B(v) => Attr::Int(i64::from(v)),
            V::S(v) => Attr::Str(v.to_string()),
            V::T(v) => Attr::DType(v),
        }
    }
}

/// One adjustment of a GE node's attributes.
#[derive(Debug, Clone, Copy)]
enum Fix {
    /// GE's attribute must be absent or hold the value that makes GE's op the ONNX one.
    Neutral(&'static str, V),
    /// Absent, GE's default applies, which is not ONNX's: it is written out.
    Default(&'static str, V),
    /// GE's attribute (or its default, absent) is the ONNX op's under another name.
    Rename(&'static str, &'static str, Option<V>),
    /// GE's default is something the ONNX op does not compute: the node must give the
    /// attribute, with this value.
    Require(&'static str, V),
    /// At most this many inputs (GE's optional bias of MatMul, say, has no ONNX
    /// counterpart).
    MaxInputs(usize),
    /// A list GE's op reads as "all" when empty (Squeeze's `axis`), ONNX's when absent:
    /// renamed when it has values, dropped when empty.
    RenameNonEmpty(&'static str, &'static str),
}

use Fix::{Default, MaxInputs, Neutral, Rename, RenameNonEmpty, Require};

/// The reductions: GE's `keep_dims` (default false) is ONNX's `keepdims` (default 1), and
/// an empty `axes` reduces nothing, as TensorFlow's reductions GE's come from do (GE's
/// ReduceMean declares `noop_with_empty_axes` true).
const REDUCE: &[Fix] = &[
    Rename("keep_dims", "keepdims", Some(V::B(false))),
    Default("noop_with_empty_axes", V::B(true)),
];

/// The GE op types whose contract can be made the ONNX op's, and how.
const RULES: &[(&str, &[Fix])] = &[
    ("DepthToSpace", &[Require("data_format", V::S("NCHW"))]),
    ("Einsum", &[]),
    (
        "Elu",
        &[
            Neutral("scale", V::F(1.0)),
            Neutral("input_scale", V::F(1.0)),
        ],
    ),
    ("Erf", &[]),
    (
        "Exp",
        &[
            Neutral("base", V::F(-1.0)),
            Neutral("scale", V::F(1.0)),
            Neutral("shift", V::F(0.0)),
        ],
    ),
    ("Flatten", &[]),
    ("Gather", &[Neutral("batch_dims", V::I(0))]),
    ("GatherElements", &[Rename("dim", "axis", Some(V::I(0)))]),
    (
        "HardSigmoid",
        &[
            Default("alpha", V::F(0.16666666)),
            Default("beta", V::F(0.5)),
        ],
    ),
    (
        "Log",
        &[
            Neutral("base", V::F(-1.0)),
            Neutral("scale", V::F(1.0)),
            Neutral("shift", V::F(0.0)),
        ],
    ),
    (
        "MatMul",
        &[
            Neutral("transpose_x1", V::B(false)),
            Neutral("transpose_x2", V::B(false)),
            MaxInputs(2),
        ],
    ),
    ("ReduceLogSum", REDUCE),
    ("ReduceLogSumExp", REDUCE),
    ("ReduceMax", REDUCE),
    ("ReduceMean", REDUCE),
    ("ReduceMin", REDUCE),
    ("ReduceProd", REDUCE),
    ("ReduceSum", REDUCE),
    (
        "Reshape",
        &[Neutral("axis", V::I(0)), Neutral("num_axes", V::I(-1))],
    ),
    (
        "ReverseSequence",
        &[
            Rename("seq_dim", "time_axis", None),
            Rename("batch_dim", "batch_axis", Some(V::I(0))),
        ],
    ),
    // GE's Mod is TensorFlow's: the remainder of a truncating division, C's `fmod`, for
    // integers and floats (ONNX's Mod without `fmod` floors integers and refuses floats).
    ("Mod", &[Default("fmod", V::I(1))]),
    // GE's PRelu weight is one slope per channel (dim 1) when 1-D, where ONNX's
    // broadcasting would align it with the last dim.
    ("PRelu", &[Default("channel_slope", V::B(true))]),
    ("Round", &[Neutral("decimals", V::I(0))]),
    ("ScatterElements", &[]),
    // GE's dtype default is int32; the library's, absent, is int64 (ONNX's).
    ("Shape", &[Default("dtype", V::T(DType::I32))]),
    ("Shrink", &[]),
    // GE's ignore_index defaults to 0 (its prototype's); ONNX's, absent, ignores no class.
    (
        "SoftmaxCrossEntropyLoss",
        &[Default("ignore_index", V::I(0))],
    ),
    ("Size", &[Default("dtype", V::T(DType::I32))]),
    ("SpaceToDepth", &[Require("data_format", V::S("NCHW"))]),
    // GE's `axis` [] squeezes every 1 (TensorFlow's), as ONNX's absent `axes`.
    ("Squeeze", &[RenameNonEmpty("axis", "axes")]),
    // GE's `scale` (nonlinear_fuc_ops) is the slope ONNX's Swish calls `alpha`.
    ("Swish", &[Rename("scale", "alpha", Some(V::F(1.0)))]),
    ("ThresholdedRelu", &[]),
    ("Unsqueeze", &[]),
];

/// GE op types computed by another library op, their axis input made an attribute.
const RELAUNCH: &[(&str, GeContractFn)] = &[
    ("ArgMax", arg_max),
    ("ArgMin", arg_min),
    ("Celu", celu),
    ("Concat", concat),
    ("LRN", lrn),
    ("LSTM", lstm),
    ("LogSoftmax", log_softmax),
    ("NonZero", non_zero),
    ("OneHot", one_hot),
    ("Pad", pad),
    ("Scatter", scatter),
    ("Slice", slice),
    ("Softmax", softmax),
    ("Split", split),
    ("TopK", top_k),
    ("Transpose", transpose),
    ("Unique", unique),
    ("Upsample", upsample),
    ("Where", where_),
];

/// GE's Transpose(x, perm): the library's Transpose with `perm` the constant's values.
fn transpose(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 2, "x and perm")?;
    let perm = ctx
        .values
        .get(1)
        .copied()
        .flatten()
        .and_then(|t| t.int_values())
        .ok_or_else(|| {
            "GE's Transpose with a perm (input 1) known only at run time is not computed"
                .to_string()
        })?;
    Ok(GeUse::Launch {
        op: "Transpose",
        attrs: onnx_attrs(vec![("perm", Attr::Ints(perm))]),
        first: 0,
        count: 1,
    })
}

/// GE's TopK (x, k; `dim`, int32 indices): the library's TopK as GE's TopKV2 translates.
fn top_k(ctx: &InferCtx) -> Result<GeUse, String> {
    let t = super::alias::top_k(ctx).map_err(|e| e.to_string())?;
    Ok(GeUse::Attrs(t.attrs))
}

/// The int value of input `i`, a constant: a GE graph's axis input.
fn const_int(ctx: &InferCtx, i: usize, what: &str) -> Result<i64, String> {
    let t = ctx.values.get(i).copied().flatten().ok_or_else(|| {
        format!(
            "GE's {} with a {what} (input {i}) known only at run time is not computed",
            ctx.op
        )
    })?;
    match t.int_values().as_deref() {
        Some([v]) => Ok(*v),
        _ => Err(format!(
            "GE's {} {what} is {} {:?}, not one int",
            ctx.op, t.dtype, t.shape
        )),
    }
}

/// GE's Concat(concat_dim, x...; N): Concat on `axis` concat_dim over the tensors.
fn concat(ctx: &InferCtx) -> Result<GeUse, String> {
    let n = ctx.inputs.len().saturating_sub(1);
    if n == 0 {
        return Err("GE's Concat needs concat_dim and at least one tensor".into());
    }
    let axis = const_int(ctx, 0, "concat_dim")?;
    Ok(GeUse::Launch {
        op: "Concat",
        attrs: [("axis".to_string(), Attr::Int(axis))]
            .into_iter()
            .collect(),
        first: 1,
        count: n,
    })
}

/// That the node has `n` inputs, GE's `what`.
fn takes(ctx: &InferCtx, n: usize, what: &str) -> Result<(), String> {
    if ctx.inputs.len() == n {
        return Ok(());
    }
    Err(format!(
        "GE's {} takes {what}, not {} inputs",
        ctx.op,
        ctx.inputs.len()
    ))
}

/// The int values of constant input `i`.
fn const_ints(ctx: &InferCtx, i: usize, what: &str) -> Result<Vec<i64>, String> {
    ctx.values
        .get(i)
        .copied()
        .flatten()
        .and_then(|t| t.int_values())
        .ok_or_else(|| {
            format!(
                "GE's {} with {what} (input {i}) known only at run time is not computed",
                ctx.op
            )
        })
}

/// GE's Slice(x, offsets, size), TensorFlow's (a size of -1 to the end): SliceD, where
/// ONNX's Slice would read size as the ends.
fn slice(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 3, "x, offsets and size")?;
    let (offsets, size) = (const_ints(ctx, 1, "offsets")?, const_ints(ctx, 2, "size")?);
    Ok(GeUse::Launch {
        op: "SliceD",
        attrs: onnx_attrs(vec![
            ("offsets", Attr::Ints(offsets)),
            ("size", Attr::Ints(size)),
        ]),
        first: 0,
        count: 1,
    })
}

/// GE's ArgMin(x, dimension; dtype int64): the library's ArgMin on x, `axis` the constant
/// dimension, the dim dropped. An int32 `dtype` is not computed (the library's indices are
/// int64).
fn arg_min(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 2, "x and dimension")?;
    match ctx.attrs.get("dtype") {
        None | Some(Attr::DType(DType::I64)) => {}
        Some(other) => return Err(format!("GE's ArgMin with dtype {other:?} is not computed")),
    }
    let axis = const_int(ctx, 1, "dimension")?;
    Ok(GeUse::Launch {
        op: "ArgMin",
        attrs: onnx_attrs(vec![("axis", Attr::Int(axis)), ("keepdims", Attr::Int(0))]),
        first: 0,
        count: 1,
    })
}

/// GE's ArgMax(x, dimension; output_type int64), graphengine's 2020 prototype (later
/// ArgMaxV2): the library's ArgMax on x, `axis` the constant dimension, the dim dropped,
/// the first index on ties (the header's constraint). An int32 `output_type` is not
/// computed (the library's indices are int64).
fn arg_max(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 2, "x and dimension")?;
    match ctx.attrs.get("output_type") {
        None | Some(Attr::DType(DType::I64)) => {}
        Some(other) => {
            return Err(format!(
                "GE's ArgMax with output_type {other:?} is not computed (int64 indices are)"
            ));
        }
    }
    let axis = const_int(ctx, 1, "dimension")?;
    Ok(GeUse::Launch {
        op: "ArgMax",
        attrs: onnx_attrs(vec![
            ("axis", Attr::Int(axis)),
            ("keepdims", Attr::Int(0)),
            ("select_last_index", Attr::Int(0)),
        ]),
        first: 0,
        count: 1,
    })
}

/// The `axis` list of GE's Softmax and LogSoftmax (`ListInt`, default `[-1]`). An int is
/// refused: it is HiAI's contract (an `Int` axis, default 0 or 1), not GE's.
fn axis_list(ctx: &InferCtx) -> Result<Vec<i64>, String> {
    match ctx.attrs.get("axis") {
        None => Ok(vec![-1]),
        Some(Attr::Ints(v)) if !v.is_empty() => Ok(v.clone()),
        Some(other) => Err(format!(
            "GE's {} axis is {other:?}, not a non-empty list of ints (GE's prototype \
             declares ListInt; an int axis is another contract's)",
            ctx.op
        )),
    }
}

/// GE's Softmax(x; axis [-1]), graphengine's 2020 prototype (later SoftmaxV2's `axes`):
/// SoftmaxV2 over those axes (one softmax over their flattened extent; SoftmaxV2 requires
/// them adjacent).
fn softmax(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 1, "x")?;
    let axes = onnx_attrs(vec![("axes", Attr::Ints(axis_list(ctx)?))]);
    let attrs = crate::ops::nn::softmax::with_scale(ctx, axes);
    Ok(GeUse::Launch {
        op: "SoftmaxV2",
        attrs,
        first: 0,
        count: 1,
    })
}

/// GE's LogSoftmax(logits; axis [-1]), graphengine's 2020 prototype (later
/// LogSoftmaxV2's `axes`): the library's LogSoftmax over the one axis; several axes are
/// not computed.
fn log_softmax(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 1, "logits")?;
    let axes = axis_list(ctx)?;
    let [axis] = axes[..] else {
        return Err(format!(
            "GE's LogSoftmax over axes {axes:?} is not computed (one axis is)"
        ));
    };
    Ok(GeUse::Launch {
        op: "LogSoftmax",
        attrs: onnx_attrs(vec![("axis", Attr::Int(axis))]),
        first: 0,
        count: 1,
    })
}

/// GE's LSTM(x, cont, w_x, bias, w_h, x_static?, h_0?, c_0?, w_x_static?; num_output 0,
/// expose_hidden false), Caffe's: `ge.LSTM` on every input the node gives.
fn lstm(ctx: &InferCtx) -> Result<GeUse, String> {
    if !(5..=9).contains(&ctx.inputs.len()) {
        return Err(format!(
            "GE's LSTM takes x, cont, w_x, bias, w_h and up to four optional inputs, not {} \
             inputs",
            ctx.inputs.len()
        ));
    }
    Ok(internal(
        ctx,
        super::caffe_lstm::CAFFE_LSTM,
        ctx.inputs.len(),
    ))
}

/// GE's LRN(x; depth_radius 5, bias 1, alpha 1, beta 0.5, norm_region
/// "ACROSS_CHANNELS"), TensorFlow's local response normalization over the
/// `2 depth_radius + 1` channels around each, `x / (bias + alpha sum x^2)^beta`: the
/// library's (ONNX's) LRN with `size` that window and `alpha` times it (ONNX divides
/// alpha by size). NCHW only (the library's channels are dim 1; an NHWC x, as a
/// TensorFlow graph holds, is not computed), and Caffe's WITHIN_CHANNEL region is not.
fn lrn(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 1, "x")?;
    if ctx.inputs[0].shape.as_ref().is_some_and(|s| s.len() != 4) {
        return Err("GE's LRN takes a 4-D x".into());
    }
    if let Some(f) = super::attrs::input_format(ctx, 0)
        && f != crate::formats::Format::Nchw
    {
        return Err(format!(
            "GE's LRN on an {} x is not computed (NCHW only)",
            f.name()
        ));
    }
    let region = ctx.attrs.get("norm_region").and_then(Attr::as_str);
    if region.is_some_and(|r| r != "ACROSS_CHANNELS") {
        return Err(format!(
            "GE's LRN with norm_region {region:?} is not computed"
        ));
    }
    let radius = ctx
        .attrs
        .get("depth_radius")
        .and_then(Attr::as_int)
        .unwrap_or(5);
    if !(0..=1 << 20).contains(&radius) {
        return Err(format!(
            "GE's LRN depth_radius {radius} is not a window radius"
        ));
    }
    let size = 2 * radius + 1;
    let float = |k: &str, d: f64| ctx.attrs.get(k).and_then(Attr::as_float).unwrap_or(d);
    Ok(GeUse::Launch {
        op: "LRN",
        attrs: onnx_attrs(vec![
            ("size", Attr::Int(size)),
            ("alpha", Attr::Float(float("alpha", 1.0) * size as f64)),
            ("beta", Attr::Float(float("beta", 0.5))),
            ("bias", Attr::Float(float("bias", 1.0))),
        ]),
        first: 0,
        count: 1,
    })
}

/// GE's OneHot(x, depth, on_value, off_value; axis -1), TensorFlow's (an index out of
/// range gives a row of off_value; ONNX's wraps negative ones and takes the two values as
/// one input): OneHotD on all four inputs with the constant depth as its attribute.
fn one_hot(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 4, "x, depth, on_value and off_value")?;
    let depth = const_int(ctx, 1, "depth")?;
    let axis = ctx.attrs.get("axis").and_then(Attr::as_int).unwrap_or(-1);
    Ok(GeUse::Launch {
        op: "OneHotD",
        attrs: onnx_attrs(vec![("depth", Attr::Int(depth)), ("axis", Attr::Int(axis))]),
        first: 0,
        count: 4,
    })
}

/// GE's Pad(x, paddings), TensorFlow's (a [before, after] row per dim, zeros): PadD,
/// where ONNX's Pad would read the pairs as all begins then all ends.
fn pad(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 2, "x and paddings")?;
    Ok(GeUse::Launch {
        op: "PadD",
        attrs: onnx_attrs(vec![(
            "paddings",
            Attr::Ints(const_ints(ctx, 1, "paddings")?),
        )]),
        first: 0,
        count: 1,
    })
}

/// GE's Split(split_dim, x; num_split): SplitD (equal parts) of x.
fn split(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 2, "split_dim and x")?;
    let dim = const_int(ctx, 0, "split_dim")?;
    let parts = match ctx.attrs.get("num_split") {
        Some(Attr::Int(n)) => *n,
        _ => return Err("GE's Split needs num_split, an int".into()),
    };
    Ok(GeUse::Launch {
        op: "SplitD",
        attrs: onnx_attrs(vec![
            ("split_dim", Attr::Int(dim)),
            ("num_split", Attr::Int(parts)),
        ]),
        first: 1,
        count: 1,
    })
}

/// A bool attribute of a GE node (a bool, or GE's 0/1 int), `default` when absent.
fn flag(ctx: &InferCtx, name: &str, default: bool) -> Result<bool, String> {
    match ctx.attrs.get(name) {
        None => Ok(default),
        Some(Attr::Bool(b)) => Ok(*b),
        Some(Attr::Int(i)) => Ok(*i != 0),
        Some(other) => Err(format!("GE's {} {name} is {other:?}, not a bool", ctx.op)),
    }
}

/// The launch of GE's meaning of the node's type: the internal op `op` ([`super::misc`])
/// on the node's first `count` inputs with its attributes.
fn internal(ctx: &InferCtx, op: &'static str, count: usize) -> GeUse {
    GeUse::Launch {
        op,
        attrs: ctx.attrs.clone(),
        first: 0,
        count,
    }
}

/// GE's NonZero(x; transpose false, dtype int64), PyTorch's (`[N, rank]` coordinates, or
/// `[rank, N]` with transpose): ONNX's NonZero where that is transposed int64, else
/// `ge.NonZero`.
fn non_zero(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 1, "x")?;
    let int64 = matches!(
        ctx.attrs.get("dtype"),
        None | Some(Attr::DType(DType::I64)) | Some(Attr::Int(9))
    );
    if flag(ctx, "transpose", false)? && int64 {
        return Ok(GeUse::Attrs(Attrs::new()));
    }
    Ok(internal(ctx, super::misc::NON_ZERO, 1))
}

/// GE's Where(x), TensorFlow's: the int64 `[N, rank]` coordinates of x's true elements,
/// `ge.NonZero` with its defaults.
fn where_(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 1, "x")?;
    Ok(GeUse::Launch {
        op: super::misc::NON_ZERO,
        attrs: Attrs::new(),
        first: 0,
        count: 1,
    })
}

/// GE's Unique(x; out_idx int32), TensorFlow's (y and idx): `ge.Unique`.
fn unique(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 1, "x")?;
    Ok(internal(ctx, super::misc::UNIQUE, 1))
}

/// GE's Upsample(x; scale, stride_h, stride_w), Caffe's: `ge.Upsample`.
fn upsample(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 1, "x")?;
    Ok(internal(ctx, super::misc::UPSAMPLE, 1))
}

/// GE's Scatter(var, indices, updates; reduce, axis), the KV-cache scatter: `ge.Scatter`.
fn scatter(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 3, "var, indices and updates")?;
    Ok(internal(ctx, super::misc::SCATTER, 3))
}

/// GE's Celu(x; alpha1, alpha2, alpha3 all 1): `alpha3 max(x, 0) + alpha1 (exp(min(x, 0)
/// / alpha2) - 1)`, ONNX's Celu with `alpha` alpha1 where alpha1 is alpha2 and alpha3 is
/// 1, else `ge.Celu`.
fn celu(ctx: &InferCtx) -> Result<GeUse, String> {
    takes(ctx, 1, "x")?;
    let alpha = |k: &str| ctx.attrs.get(k).and_then(Attr::as_float).unwrap_or(1.0) as f32;
    let (a1, a2, a3) = (alpha("alpha1"), alpha("alpha2"), alpha("alpha3"));
    if a1 == a2 && a3 == 1.0 && a1 != 0.0 {
        return Ok(GeUse::Attrs(onnx_attrs(vec![(
            "alpha",
            Attr::Float(f64::from(a1)),
        )])));
    }
    Ok(internal(ctx, super::misc::CELU, 1))
}

/// How a GE graph's node of a type GE and ONNX both name is computed (the library op's
/// [`crate::ops::OpSpec::ge_contract`]): by another library op, or by its own with GE's
/// attributes made its ([`ge_node_attrs`]).
pub fn ge_node(ctx: &InferCtx) -> Result<GeUse, String> {
    if let Some((_, f)) = RELAUNCH.iter().find(|(op, _)| *op == ctx.op) {
        return f(ctx);
    }
    let mut attrs = ctx.attrs.clone();
    ge_node_attrs(ctx.op, &mut attrs, ctx.inputs.len())?;
    Ok(GeUse::Attrs(attrs))
}

/// Op types the op library (ONNX) names that no GE op prototype defines, so a GE graph's
/// node of one has no contract rt2 could compute it by: it is not computed (see the
/// module doc), with the reason.
const DIFFERENT: &[(&str, &str)] = &[
    (
        "Clip",
        "no GE op prototype (graphengine's or ops-math's, ops-nn's, ops-cv's REG_OP headers) \
         defines Clip; GE's own clipping ops are ClipByValue and ClipByValueV2",
    ),
    (
        "ConvTranspose",
        "no GE op prototype defines ConvTranspose: only HiAI's IR header does \
         (output_shape, filter, x, bias, offset_w; pad_mode), and GE's transposed \
         convolutions are Conv2DTranspose and Conv2DTransposeD",
    ),
];

/// Makes a GE node's attributes (`attrs`, of a node with `inputs` inputs, not made by the
/// ONNX importer) say to the library op of the same name what GE's mean. `Err` says why
/// the library op would compute something else; the node is then not computed.
pub fn ge_node_attrs(op_type: &str, attrs: &mut Attrs, inputs: usize) -> Result<(), String> {
    if let Some((_, why)) = DIFFERENT.iter().find(|(op, _)| *op == op_type) {
        return Err(format!(
            "{why}; rt2 computes only ONNX's {op_type}, so a GE graph's is not computed"
        ));
    }
    let Some((_, fixes)) = RULES.iter().find(|(op, _)| *op == op_type) else {
        return Ok(());
    };
    for fix in *fixes {
        match *fix {
            Neutral(name, v) => {
                if let Some(a) = attrs.get(name)
                    && !v.matches(a)
                {
                    return Err(format!(
                        "GE's {op_type} with {name} {a:?} computes something ONNX's \
                         {op_type} does not (rt2 computes it only with {name} {v:?})"
                    ));
                }
            }
            Default(name, v) => {
                if !attrs.contains_key(name) {
                    attrs.insert(name.to_string(), v.attr());
                }
            }
            Rename(ge, onnx, default) => match (attrs.remove(ge), default) {
                (Some(a), _) => {
                    // GE's bools are ONNX's 0/1 ints.
                    let a = match a {
                        Attr::Bool(b) => Attr::Int(i64::from(b)),
                        a => a,
                    };
                    attrs.insert(onnx.to_string(), a);
                }
                (None, Some(v)) => {
                    attrs.insert(onnx.to_string(), v.attr());
                }
                (None, None) => return Err(format!("GE's {op_type} needs {ge}, which is missing")),
            },
            Require(name, v) => {
                if !attrs.get(name).is_some_and(|a| v.matches(a)) {
                    return Err(format!(
                        "GE's {op_type} is computed only with {name} {v:?} given (GE's \
                         default differs)"
                    ));
                }
            }
            RenameNonEmpty(ge, onnx) => {
                if let Some(a) = attrs.remove(ge)
                    && a.as_ints().is_none_or(|v| !v.is_empty())
                {
                    attrs.insert(onnx.to_string(), a);
                }
            }
            MaxInputs(n) => {
                if inputs > n {
                    return Err(format!(
                        "GE's {op_type} with {inputs} inputs (rt2 computes it with at most {n})"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Every op type [`ge_node_attrs`] has a rule or a refusal for: the library's assembly
/// hooks it onto each ([`crate::ops::OpSpec::ge_contract`]).
pub fn ruled() -> impl Iterator<Item = &'static str> {
    RULES
        .iter()
        .map(|(op, _)| *op)
        .chain(RELAUNCH.iter().map(|(op, _)| *op))
        .chain(DIFFERENT.iter().map(|(op, _)| *op))
}

/// Whether [`ge_node_attrs`] makes `op_type`'s GE contract the library op's (`Some(true)`),
/// refuses it (`Some(false)`), or does not ask (`None`).
pub fn adapts(op_type: &str) -> Option<bool> {
    if RULES.iter().any(|(op, _)| *op == op_type) || RELAUNCH.iter().any(|(op, _)| *op == op_type) {
        Some(true)
    } else if DIFFERENT.iter().any(|(op, _)| *op == op_type) {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, Attr)]) -> Attrs {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn neutral_attributes_pass_and_others_refuse() {
        let mut a = attrs(&[("base", Attr::Float(-1.0)), ("scale", Attr::Float(1.0))]);
        assert_eq!(ge_node_attrs("Exp", &mut a, 1), Ok(()));
        let mut a = attrs(&[("base", Attr::Float(2.0))]);
        let e = ge_node_attrs("Exp", &mut a, 1).unwrap_err();
        assert!(e.contains("base"), "{e}");
        let mut a = Attrs::new();
        assert!(ge_node_attrs("MatMul", &mut a, 3).is_err(), "a bias input");
        assert_eq!(ge_node_attrs("MatMul", &mut a, 2), Ok(()));
    }

    #[test]
    fn defaults_and_names_become_the_onnx_ops() {
        let mut a = Attrs::new();
        ge_node_attrs("HardSigmoid", &mut a, 1).unwrap();
        assert_eq!(a.get("alpha"), Some(&Attr::Float(0.16666666)));
        let mut a = Attrs::new();
        ge_node_attrs("ReduceSum", &mut a, 2).unwrap();
        assert_eq!(a.get("keepdims"), Some(&Attr::Int(0)));
        assert_eq!(a.get("noop_with_empty_axes"), Some(&Attr::Int(1)));
        let mut a = attrs(&[("keep_dims", Attr::Bool(true))]);
        ge_node_attrs("ReduceMean", &mut a, 2).unwrap();
        assert_eq!(a.get("keepdims"), Some(&Attr::Int(1)));
        assert!(!a.contains_key("keep_dims"));
        let mut a = attrs(&[("dim", Attr::Int(1))]);
        ge_node_attrs("GatherElements", &mut a, 2).unwrap();
        assert_eq!(a.get("axis"), Some(&Attr::Int(1)));
        // ReverseSequence's seq_dim is required in GE.
        assert!(ge_node_attrs("ReverseSequence", &mut Attrs::new(), 2).is_err());
    }

    #[test]
    fn tensorflow_forms_relaunch_as_library_ops() {
        use crate::ops::{HostTensor, TensorMeta};
        let scalar = |v: i32| HostTensor {
            dtype: DType::I32,
            shape: vec![],
            data: v.to_le_bytes().to_vec().into(),
        };
        let metas = [
            TensorMeta::new(DType::F32, &[2, 3]),
            TensorMeta::new(DType::I32, &[]),
        ];
        let dim = scalar(-1);
        let values = [None, Some(&dim)];
        let ctx = |op: &'static str, attrs: &'static Attrs| InferCtx {
            op,
            inputs: &metas,
            values: &values,
            attrs,
            outputs: 1,
        };
        static NONE: std::sync::LazyLock<Attrs> = std::sync::LazyLock::new(Attrs::new);
        /// The launch a GE node becomes: (op, attributes, first input, input count).
        fn launch(ctx: &InferCtx) -> (&'static str, Attrs, usize, usize) {
            match ge_node(ctx).unwrap() {
                GeUse::Launch {
                    op,
                    attrs,
                    first,
                    count,
                } => (op, attrs, first, count),
                other => panic!("{other:?}"),
            }
        }
        let (op, attrs, first, count) = launch(&ctx("ArgMin", &NONE));
        assert_eq!((op, first, count), ("ArgMin", 0, 1));
        assert_eq!(attrs.get("axis"), Some(&Attr::Int(-1)));
        assert_eq!(attrs.get("keepdims"), Some(&Attr::Int(0)));
        let one_hot_metas = [
            TensorMeta::new(DType::I32, &[4]),
            TensorMeta::new(DType::I32, &[]),
            TensorMeta::new(DType::F32, &[]),
            TensorMeta::new(DType::F32, &[]),
        ];
        let depth = scalar(5);
        let one_hot_values = [None, Some(&depth), None, None];
        let one_hot = InferCtx {
            op: "OneHot",
            inputs: &one_hot_metas,
            values: &one_hot_values,
            attrs: &NONE,
            outputs: 1,
        };
        let (op, attrs, first, count) = launch(&one_hot);
        assert_eq!((op, first, count), ("OneHotD", 0, 4));
        assert_eq!(attrs.get("depth"), Some(&Attr::Int(5)));
        assert_eq!(attrs.get("axis"), Some(&Attr::Int(-1)));
        let no_value = [None, None];
        let unknown = InferCtx {
            values: &no_value,
            ..ctx("ArgMin", &NONE)
        };
        assert!(ge_node(&unknown).unwrap_err().contains("dimension"));
    }

    #[test]
    fn ge_defaults_onnx_cannot_compute_are_refused() {
        // GE's SpaceToDepth defaults to NHWC.
        assert!(ge_node_attrs("SpaceToDepth", &mut Attrs::new(), 1).is_err());
        let mut a = attrs(&[("data_format", Attr::Str("NCHW".into()))]);
        assert_eq!(ge_node_attrs("SpaceToDepth", &mut a, 1), Ok(()));
        // Squeeze's empty `axis` is ONNX's absent `axes`.
        let mut a = attrs(&[("axis", Attr::Ints(vec![]))]);
        ge_node_attrs("Squeeze", &mut a, 1).unwrap();
        assert!(!a.contains_key("axes") && !a.contains_key("axis"));
        let mut a = attrs(&[("axis", Attr::Ints(vec![1]))]);
        ge_node_attrs("Squeeze", &mut a, 1).unwrap();
        assert_eq!(a.get("axes"), Some(&Attr::Ints(vec![1])));
        // GE's Shape gives int32 unless told otherwise.
        let mut a = Attrs::new();
        ge_node_attrs("Shape", &mut a, 1).unwrap();
        assert_eq!(a.get("dtype"), Some(&Attr::DType(DType::I32)));
        // Types only GE names, or GE's own family, are not in question.
        assert_eq!(ge_node_attrs("Conv2D", &mut Attrs::new(), 2), Ok(()));
    }
}
