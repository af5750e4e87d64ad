//! GE's ONNX parser plugins, as facts: for each ONNX op a plugin registers
//! (`ai.onnx::<opset>::<Op>`), the GE op type ATC's graph holds after parsing (the op the
//! plugin builds, or the op inside the `PartitionedCall` it builds, which GE inlines), with
//! the plugin's attribute conversion and the Const inputs it adds. [`PLUGINS`] is the one
//! table; docs/ONNX_IMPORT.md's mapping table is generated from it (`rt2::om::onnx::
//! plugin_table`, kept current by a test).
//!
//! A conversion is exact or it does not happen: where a plugin would lose a meaning the
//! ONNX node has (a MaxPool's dilations, which GE's MaxPoolV3 has no place for; SAME_LOWER,
//! which GE's `SAME` pads as SAME_UPPER) or refuses the node outright (a MaxPool's indices
//! output), the node keeps its ONNX type and attributes, as a node no plugin maps does, and
//! rt2 computes it by ONNX's rules. Each plugin's `keeps` line says when.
//!
//! Pure functions of a node's attributes (its opset defaults already written out) and its
//! inputs' types; no graph knowledge. The importer is the only caller.

use std::collections::BTreeMap;

use super::tensor::{Shape, ValueType, attr_i, attr_ints, attr_s, descriptor};
use crate::om::DataType;
use crate::proto::ge_ir::attr_def::Value;
use crate::proto::ge_ir::{AttrDef, TensorDef};

/// Where the plugin facts come from: the CANN op repositories' `framework/` directories
/// (hicann/ops-nn, ops-math, ops-cv) and, for the renames, the plugin file registering
/// ONNX ops GE takes over unchanged.
const OPS_NN: &str = "hicann/ops-nn";
const OPS_MATH: &str = "hicann/ops-math";
const SIMILAR: &str = "hicann/ops-math common/src/framework/similar_opp_onnx_plugin.cpp";

/// One ONNX op as a GE plugin maps it.
pub struct Plugin {
    /// The ONNX op type (default domain).
    pub onnx: &'static str,
    /// The opsets GE registers the plugin for, inclusive (rt2 applies it to later ones
    /// too, see [`plugin`]).
    pub opsets: (i64, i64),
    /// The GE op type the node becomes.
    pub ge: &'static str,
    /// The conversion, one line for the docs.
    pub converts: &'static str,
    /// When the node keeps its ONNX type instead, one line for the docs ("" when never).
    pub keeps: &'static str,
    /// Where the plugin is.
    pub source: &'static str,
    /// The conversion itself; `None` keeps the node as ONNX wrote it.
    map: fn(&Plugin, &Node) -> Option<Mapped>,
}

/// What a plugin sees of a node.
pub struct Node<'a> {
    /// The opset the node was written against.
    pub opset: i64,
    /// Its ONNX attributes, with the opset's defaults written out.
    pub attrs: &'a BTreeMap<String, AttrDef>,
    /// Its inputs' types, `None` for an omitted optional input.
    pub inputs: &'a [Option<ValueType>],
    /// Its output names (`""` for an output nobody reads).
    pub outputs: &'a [String],
}

/// A node as GE's plugin leaves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    /// The GE op type.
    pub op_type: &'static str,
    /// The GE attributes, in place of the ONNX ones.
    pub attrs: BTreeMap<String, AttrDef>,
    /// The op keeps ONNX's meaning whole (a rename), so `onnx_opset` stays true of it.
    pub onnx_meaning: bool,
    /// Const inputs the plugin appends after the node's own, each with a name suffix for
    /// its op (`<node>_<suffix>`): a Transpose's `perm`, a Gather's `axis`.
    pub consts: Vec<(&'static str, TensorDef)>,
    /// Const inputs the plugin puts before the node's own (Conv2DTranspose's
    /// `input_size`), named the same way.
    pub leading_consts: Vec<(&'static str, TensorDef)>,
    /// The node's inputs the GE op takes, in its order, when not all of them as they are
    /// (Clip with only a max bound is Minimum(x, max)).
    pub inputs: Option<Vec<usize>>,
    /// Ops of the plugin's subgraph that feed the op: each `(i, op)` computes what the
    /// op reads in place of the node's input `i` (before-opset-11 Clip's Cast).
    pub before: Vec<(usize, Extra)>,
    /// Ops of the plugin's subgraph after the op, in order; the last gives the node's
    /// output, under the node's name, and the mapped op is renamed `<node>_<GE type>`
    /// (ArgMax's ExpandDims, Gemm's bias Add).
    pub after: Vec<Extra>,
    /// How many outputs the GE op has when not the node's count (LayerNorm's three).
    pub outputs: Option<usize>,
    /// Where each of the node's outputs comes from, when not all from one op: the mapped
    /// op's output k ([`Operand::MappedOutput`]) or output 0 of an op after it
    /// ([`Operand::After`]). The mapped op then keeps the node's name (LayerNormalization's
    /// Y from LayerNorm, Mean and InvStdDev from the Casts after it).
    pub node_outputs: Option<Vec<Operand>>,
}

/// One more op of the subgraph a plugin builds (GE inlines the `PartitionedCall`, so ATC's
/// graph holds these ops beside the mapped one).
#[derive(Debug, Clone, PartialEq)]
pub struct Extra {
    /// Its GE op type.
    pub op_type: &'static str,
    /// It is named `<node>_<suffix>` (unless it is the last of [`Mapped::after`]).
    pub suffix: &'static str,
    /// Its GE attributes.
    pub attrs: BTreeMap<String, AttrDef>,
    /// Its inputs, in order.
    pub inputs: Vec<Operand>,
}

/// Where an [`Extra`] op's input comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// The ONNX node's input `i`.
    Input(usize),
    /// The mapped op's output 0.
    Mapped,
    /// The mapped op's output k (LayerNorm's mean and variance).
    MappedOutput(usize),
    /// Output 0 of [`Mapped::after`]'s op `k`.
    After(usize),
    /// A Const the plugin makes, named `<node>_<suffix>`.
    Const(&'static str, Box<TensorDef>),
}

impl Extra {
    fn new(op_type: &'static str, suffix: &'static str, inputs: Vec<Operand>) -> Extra {
        Extra {
            op_type,
            suffix,
            attrs: BTreeMap::new(),
            inputs,
        }
    }

    fn with(mut self, name: &str, value: AttrDef) -> Extra {
        self.attrs.insert(name.to_string(), value);
        self
    }
}

/// Every plugin rt2 applies, by ONNX op type.
pub const PLUGINS: &[Plugin] = &[
    rename("And", "LogicalAnd"),
    Plugin {
        onnx: "ArgMax",
        opsets: (8, 18),
        ge: "ArgMaxV2, ExpandDims",
        converts: "axis -> Const int32 scalar dimension; dtype int64; keepdims 1: ExpandDims(y, the same axis) after",
        keeps: "select_last_index 1 (GE refuses)",
        source: OPS_MATH,
        map: arg_max,
    },
    Plugin {
        onnx: "AveragePool",
        opsets: (8, 18),
        ge: "AvgPoolV2 (1-D: Unsqueeze, AvgPoolV2, Squeeze)",
        converts: "kernel_shape -> ksize [1,1,kh,kw]; strides -> [1,1,sh,sw]; pads [t,l,b,r] -> [t,b,l,r]; \
                   auto_pad NOTSET/SAME_UPPER/VALID -> padding_mode CALCULATED/SAME/VALID; ceil_mode -> bool; \
                   count_include_pad -> exclusive = !count_include_pad; data_format NCHW; \
                   a 1-D pool runs on x unsqueezed at axis 3 (ksize [1,1,k,1], pads [b,e,0,0]), squeezed after",
        keeps: "kernel 3-D; dilations other than 1; auto_pad SAME_LOWER",
        source: OPS_NN,
        map: average_pool,
    },
    Plugin {
        onnx: "BatchNormalization",
        opsets: (8, 18),
        ge: "BatchNorm",
        converts: "epsilon kept; data_format NCHW, is_training false; momentum dropped; inputs as (x, scale, \
                   offset, mean, variance)",
        keeps: "training_mode 1, or the running statistics outputs read",
        source: OPS_NN,
        map: batch_norm,
    },
    Plugin {
        onnx: "Cast",
        opsets: (8, 18),
        ge: "Cast",
        converts: "to (ONNX type) -> dst_type (GE type number)",
        keeps: "a target type past ONNX's 16 (bfloat16): float8, int4, ... (GE's table stops there)",
        source: OPS_MATH,
        map: cast,
    },
    Plugin {
        onnx: "Clip",
        opsets: (11, 18),
        ge: "ClipByValue, Minimum, Maximum",
        converts: "both bounds: ClipByValue(x, min, max); only max: Minimum(x, max); only min: Maximum(x, min)",
        keeps: "no bound given (GE refuses)",
        source: OPS_MATH,
        map: clip,
    },
    Plugin {
        onnx: "Clip",
        opsets: (8, 10),
        ge: "Cast, ClipByValue",
        converts: "Cast(x) to float32, then ClipByValue(x, Const min, Const max) from the attributes",
        keeps: "x not known to be float32 (the Cast would change its type)",
        source: OPS_MATH,
        map: clip_attrs,
    },
    Plugin {
        onnx: "Concat",
        opsets: (8, 18),
        ge: "ConcatD",
        converts: "axis -> concat_dim; N = the input count (one input: Identity)",
        keeps: "",
        source: OPS_MATH,
        map: concat,
    },
    Plugin {
        onnx: "ConstantOfShape",
        opsets: (8, 18),
        ge: "Fill",
        converts: "value -> Const scalar input (float32 0 when absent)",
        keeps: "",
        source: OPS_MATH,
        map: constant_of_shape,
    },
    Plugin {
        onnx: "Conv",
        opsets: (8, 18),
        ge: "Conv2D",
        converts: "strides, dilations -> [1,1,h,w]; pads [t,l,b,r] -> [t,b,l,r]; group -> groups; \
                   data_format NCHW; auto_pad kept",
        keeps: "kernel 3-D (GE: Conv3D)",
        source: OPS_NN,
        map: conv,
    },
    Plugin {
        onnx: "ConvTranspose",
        opsets: (8, 18),
        ge: "Conv2DTranspose",
        converts: "Const int64 input_size [0,0,0,0] first; strides, dilations -> [1,1,h,w]; pads [t,l,b,r] -> \
                   [t,b,l,r]; output_padding -> [0,0,ph,pw]; group -> groups; data_format NCHW",
        keeps: "kernel not 2-D (GE adds Unsqueeze/Squeeze or makes Conv3DTranspose); auto_pad other than \
                NOTSET; output_shape given",
        source: OPS_NN,
        map: conv_transpose,
    },
    rename("Det", "MatrixDeterminant"),
    Plugin {
        onnx: "Elu",
        opsets: (8, 18),
        ge: "Elu",
        converts: "alpha kept (1.0 when absent)",
        keeps: "",
        source: OPS_NN,
        map: same_attrs,
    },
    Plugin {
        onnx: "Flatten",
        opsets: (8, 18),
        ge: "Flatten",
        converts: "axis kept",
        keeps: "",
        source: OPS_MATH,
        map: same_attrs,
    },
    Plugin {
        onnx: "Gather",
        opsets: (8, 18),
        ge: "GatherV2",
        converts: "axis -> Const input 2 (int32 scalar); negative_index_support true",
        keeps: "",
        source: OPS_MATH,
        map: gather,
    },
    Plugin {
        onnx: "GatherElements",
        opsets: (11, 18),
        ge: "GatherElements",
        converts: "axis -> dim",
        keeps: "",
        source: OPS_MATH,
        map: gather_elements,
    },
    rename("Div", "RealDiv"),
    rename("GreaterOrEqual", "GreaterEqual"),
    Plugin {
        onnx: "HardSigmoid",
        opsets: (8, 18),
        ge: "HardSigmoid",
        converts: "alpha, beta kept (0.2, 0.5 when absent)",
        keeps: "",
        source: OPS_NN,
        map: same_attrs,
    },
    rename("IsNaN", "IsNan"),
    Plugin {
        onnx: "LayerNormalization",
        opsets: (17, 18),
        ge: "LayerNorm",
        converts: "axis -> begin_norm_axis and begin_params_axis; epsilon kept; no B: a Const scalar 0 beta; \
                   GE's BroadcastTo of scale and B to x's shape left out (the same values); Mean read: \
                   Cast(mean) to float32; InvStdDev read: Cast(Rsqrt(Adds(variance, epsilon))) to float32",
        keeps: "Mean or InvStdDev read with X not known to be float32 (GE rounds them to X's type first)",
        source: OPS_NN,
        map: layer_norm,
    },
    Plugin {
        onnx: "LRN",
        opsets: (8, 18),
        ge: "LRN",
        converts: "size -> depth_radius (size - 1) / 2; alpha -> alpha / size; beta, bias kept; norm_region ACROSS_CHANNELS",
        keeps: "an even size (GE's window is 2 depth_radius + 1 channels)",
        source: OPS_NN,
        map: lrn,
    },
    Plugin {
        onnx: "LeakyRelu",
        opsets: (8, 18),
        ge: "LeakyRelu",
        converts: "alpha -> negative_slope (0.01 when absent)",
        keeps: "",
        source: OPS_NN,
        map: leaky_relu,
    },
    rename("LessOrEqual", "LessEqual"),
    Plugin {
        onnx: "LogSoftmax",
        opsets: (8, 18),
        ge: "LogSoftmaxV2",
        converts: "axis -> axes [axis]",
        keeps: "before opset 13, an axis not the last (ONNX flattens there; GE's op takes one axis)",
        source: OPS_NN,
        map: softmax,
    },
    Plugin {
        onnx: "Gemm",
        opsets: (8, 18),
        ge: "MatMulV2, Add, Muls",
        converts: "MatMulV2(A, B; transpose_x1 transA, transpose_x2 transB), then Add(y, C) when alpha and beta are 1, else Add(Muls(y, alpha), Muls(C, beta))",
        keeps: "A or B known not to be float32, float16 or bfloat16; no C with alpha other than 1 (GE drops alpha)",
        source: OPS_NN,
        map: gemm,
    },
    Plugin {
        onnx: "MatMul",
        opsets: (8, 18),
        ge: "BatchMatMulV2",
        converts: "adj_x1, adj_x2 false",
        keeps: "",
        source: OPS_NN,
        map: matmul,
    },
    Plugin {
        onnx: "MaxPool",
        opsets: (8, 18),
        ge: "MaxPoolV3 (1-D: Unsqueeze, MaxPoolV3, Squeeze)",
        converts: "kernel_shape -> ksize [1,1,kh,kw]; strides -> [1,1,sh,sw]; pads [t,l,b,r] -> [t,b,l,r]; \
                   auto_pad NOTSET/SAME_UPPER/VALID -> padding_mode CALCULATED/SAME/VALID; ceil_mode -> bool; \
                   data_format NCHW; a 1-D pool runs on x unsqueezed at axis 3 (ksize [1,1,k,1], pads \
                   [b,e,0,0]), squeezed after",
        keeps: "kernel 3-D; dilations other than 1; auto_pad SAME_LOWER; storage_order 1 or the \
                Indices output read (GE refuses both)",
        source: OPS_NN,
        map: max_pool,
    },
    rename("Not", "LogicalNot"),
    rename("Or", "LogicalOr"),
    Plugin {
        onnx: "Pad",
        opsets: (11, 18),
        ge: "PadV3",
        converts: "mode kept; paddings_contiguous false (ONNX's begins-then-ends pads)",
        keeps: "opsets 8-10 (GE builds a subgraph); mode other than constant, reflect, edge; \
                the axes input (opset 18)",
        source: OPS_NN,
        map: pad,
    },
    reduce("ReduceMax"),
    reduce("ReduceMean"),
    reduce("ReduceMin"),
    reduce("ReduceProd"),
    reduce("ReduceSum"),
    Plugin {
        onnx: "Reshape",
        opsets: (8, 18),
        ge: "Reshape",
        converts: "allowzero kept (0 when absent)",
        keeps: "",
        source: OPS_MATH,
        map: reshape,
    },
    Plugin {
        onnx: "ScatterND",
        opsets: (11, 18),
        ge: "TensorScatterUpdate",
        converts: "none (same inputs and meaning)",
        keeps: "reduction other than none",
        source: SIMILAR,
        map: scatter_nd,
    },
    Plugin {
        onnx: "Size",
        opsets: (8, 18),
        ge: "Size",
        converts: "dtype int64",
        keeps: "",
        source: OPS_MATH,
        map: size,
    },
    Plugin {
        onnx: "Slice",
        opsets: (8, 18),
        ge: "StridedSliceV2",
        converts: "inputs (data, starts, ends, axes, steps) as (x, begin, end, axes, strides); before opset 10 \
                   starts, ends, axes -> Const int64 inputs",
        keeps: "",
        source: OPS_MATH,
        map: slice,
    },
    Plugin {
        onnx: "Softmax",
        opsets: (8, 18),
        ge: "SoftmaxV2",
        converts: "axis -> axes [axis]",
        keeps: "before opset 13, an axis not the last (ONNX flattens there; GE marks need_fusion)",
        source: OPS_NN,
        map: softmax,
    },
    Plugin {
        onnx: "Squeeze",
        opsets: (8, 18),
        ge: "Squeeze, SqueezeV3",
        converts: "before opset 13: Squeeze, axes -> axis ([] when absent); from 13: SqueezeV3 (x, axes)",
        keeps: "",
        source: OPS_MATH,
        map: squeeze,
    },
    Plugin {
        onnx: "Sum",
        opsets: (8, 18),
        ge: "AccumulateNV2",
        converts: "N = the input count",
        keeps: "",
        source: OPS_MATH,
        map: sum,
    },
    Plugin {
        onnx: "Transpose",
        opsets: (8, 18),
        ge: "Transpose",
        converts: "perm -> Const input 1 (int32)",
        keeps: "perm absent (GE refuses: the reversed axes are not supported)",
        source: OPS_MATH,
        map: transpose,
    },
    Plugin {
        onnx: "Unsqueeze",
        opsets: (8, 18),
        ge: "Unsqueeze, UnsqueezeV3",
        converts: "before opset 13: Unsqueeze, axes kept; from 13: UnsqueezeV3 (x, axes)",
        keeps: "",
        source: OPS_MATH,
        map: unsqueeze,
    },
    rename("Where", "SelectV2"),
];

/// The reductions' plugin: `ReduceX` with `axes` as input 1 (a Const int32 from the
/// attribute, or the node's own axes input) and `keep_dims` a bool.
const fn reduce(onnx: &'static str) -> Plugin {
    Plugin {
        onnx,
        opsets: (8, 18),
        ge: onnx,
        converts: "axes -> input 1 (Const int32 from the attribute; [] reduces all); keepdims -> keep_dims \
                   (bool); noop_with_empty_axes kept (0 before opset 13)",
        keeps: "ReduceMax/Min/Prod at opsets 13-17 with an axes attribute (GE's plugin drops it and would \
                reduce every axis)",
        source: OPS_MATH,
        map: reduce_op,
    }
}

/// An ONNX op GE takes over under another name, attributes and inputs unchanged (the
/// plugins registered with an empty ParseParams).
const fn rename(onnx: &'static str, ge: &'static str) -> Plugin {
    Plugin {
        onnx,
        opsets: (8, 18),
        ge,
        converts: "none (same inputs and meaning)",
        keeps: "",
        source: SIMILAR,
        map: renamed,
    }
}

/// The plugin for `op_type` at `opset`, if any. GE registers its plugins up to opset 18
/// and ATC refuses later ones; rt2 applies the newest registration to later opsets too,
/// since the ONNX ops it maps changed only their type lists since (and where a later
/// version added an attribute, the conversion reads it: AveragePool's dilations).
pub fn plugin(op_type: &str, opset: i64) -> Option<&'static Plugin> {
    // Some ops have one plugin per opset range (Clip's before and from opset 11): the one
    // starting latest at or below the node's opset applies.
    PLUGINS
        .iter()
        .filter(|p| p.onnx == op_type && opset >= p.opsets.0)
        .max_by_key(|p| p.opsets.0)
}

/// The GE form of an ONNX default-domain node, or `None` to keep it as written.
pub fn map(op_type: &str, node: &Node) -> Option<Mapped> {
    let p = plugin(op_type, node.opset)?;
    (p.map)(p, node)
}

/// The markdown table of [`PLUGINS`] docs/ONNX_IMPORT.md carries.
pub fn table() -> String {
    let mut out = String::from(
        "| ONNX | GE registers | GE | conversion | kept as ONNX when |\n|---|---|---|---|---|\n",
    );
    for p in PLUGINS {
        let keeps = if p.keeps.is_empty() { "-" } else { p.keeps };
        let opsets = format!("{}-{}", p.opsets.0, p.opsets.1);
        out.push_str(&format!(
            "| {} | {opsets} | {} | {} | {keeps} |\n",
            p.onnx, p.ge, p.converts
        ));
    }
    out
}

fn renamed(p: &Plugin, n: &Node) -> Option<Mapped> {
    Some(Mapped {
        onnx_meaning: true,
        ..ge_op(p.ge, n.attrs.clone())
    })
}

fn scatter_nd(p: &Plugin, n: &Node) -> Option<Mapped> {
    match str_attr(n.attrs, "reduction") {
        None | Some("none") => renamed(p, n),
        Some(_) => None,
    }
}

/// The node's attributes under their ONNX names, as GE's op of the plugin takes them.
fn same_attrs(p: &Plugin, n: &Node) -> Option<Mapped> {
    Some(ge_op(p.ge, n.attrs.clone()))
}

fn ge_op(op_type: &'static str, attrs: BTreeMap<String, AttrDef>) -> Mapped {
    Mapped {
        op_type,
        attrs,
        onnx_meaning: false,
        consts: Vec::new(),
        leading_consts: Vec::new(),
        inputs: None,
        before: Vec::new(),
        after: Vec::new(),
        outputs: None,
        node_outputs: None,
    }
}

/// ArgMax(x; axis, keepdims): ArgMaxV2(x, dimension) with int64 indices, the dim dropped;
/// with keepdims 1 an ExpandDims(y, axis) puts it back (the same Const axis: a negative
/// one counts from the end of ArgMaxV2's output, which lands where x's dim was).
fn arg_max(_: &Plugin, n: &Node) -> Option<Mapped> {
    if int_attr(n.attrs, "select_last_index").unwrap_or(0) != 0 {
        return None;
    }
    let mut m = ge_op(
        "ArgMaxV2",
        BTreeMap::from([("dtype".to_string(), attr_i(DataType::Int64.to_ge()))]),
    );
    let axis = int_attr(n.attrs, "axis").unwrap_or(0);
    let dimension = int_tensor(DataType::Int32, &[], &[axis]);
    m.consts.push(("dimension", dimension.clone()));
    if int_attr(n.attrs, "keepdims").unwrap_or(1) == 1 {
        let inputs = vec![Operand::Mapped, Operand::Const("axis", Box::new(dimension))];
        m.after.push(Extra::new("ExpandDims", "ExpandDims", inputs));
    }
    Some(m)
}

/// Gemm(A, B, C?; alpha, beta, transA, transB): MatMulV2(A, B) with the transposes, then
/// `+ C` (Add) when alpha and beta are 1, else `alpha AB + beta C` as two Muls and an
/// Add. Without C and with an alpha other than 1 GE's subgraph is the MatMulV2 alone,
/// which loses alpha: such a node keeps its ONNX type.
fn gemm(_: &Plugin, n: &Node) -> Option<Mapped> {
    let float = |k: &str| match n.attrs.get(k).and_then(|a| a.value.as_ref()) {
        Some(Value::F(v)) => *v,
        _ => 1.0,
    };
    let (alpha, beta) = (float("alpha"), float("beta"));
    let flag = |k: &str| attr_b(int_attr(n.attrs, k).unwrap_or(0) != 0);
    // An input of unknown type (an intermediate value without value_info) is taken as
    // the float it almost always is; a known integer or double one keeps ONNX's Gemm.
    let not_float = |i: usize| {
        n.inputs.get(i).cloned().flatten().is_some_and(|v| {
            v.dtype.is_some_and(|d| {
                !matches!(
                    d,
                    DataType::Float32 | DataType::Float16 | DataType::Bfloat16
                )
            })
        })
    };
    if not_float(0) || not_float(1) {
        return None;
    }
    let mut m = ge_op(
        "MatMulV2",
        BTreeMap::from([
            ("transpose_x1".to_string(), flag("transA")),
            ("transpose_x2".to_string(), flag("transB")),
            ("offset_x".to_string(), attr_i(0)),
        ]),
    );
    m.inputs = Some(vec![0, 1]);
    let one = |v: f32| (v - 1.0).abs() <= f32::EPSILON;
    match n.inputs.get(2) {
        Some(Some(_)) if one(alpha) && one(beta) => {
            m.after.push(Extra::new(
                "Add",
                "Add",
                vec![Operand::Mapped, Operand::Input(2)],
            ));
        }
        Some(Some(_)) => {
            let muls = |suffix, from, value| {
                Extra::new("Muls", suffix, vec![from]).with("value", super::tensor::attr_f(value))
            };
            m.after.push(muls("Muls", Operand::Mapped, alpha));
            m.after.push(muls("Muls_C", Operand::Input(2), beta));
            let add = vec![Operand::After(0), Operand::After(1)];
            m.after.push(Extra::new("Add", "Add", add));
        }
        _ if one(alpha) => {}
        _ => return None,
    }
    Some(m)
}

/// ConstantOfShape(input; value): Fill(dims, value), the value a scalar Const (a float32
/// 0 without the attribute, ONNX's default).
fn constant_of_shape(_: &Plugin, n: &Node) -> Option<Mapped> {
    let value = match n.attrs.get("value").and_then(|a| a.value.as_ref()) {
        Some(Value::T(t)) => {
            let mut t = (**t).clone();
            if let Some(d) = t.desc.as_mut() {
                d.shape = Some(Default::default());
            }
            t
        }
        None => TensorDef {
            desc: Some(descriptor(
                &ValueType {
                    dtype: Some(DataType::Float32),
                    shape: Shape::known(&[]),
                },
                "ND",
            )),
            data: 0f32.to_le_bytes().to_vec().into(),
        },
        Some(_) => return None,
    };
    let mut m = ge_op("Fill", BTreeMap::new());
    m.consts.push(("value", value));
    Some(m)
}

/// Pad from opset 11 (pads an input): PadV3 with ONNX's pads layout.
fn pad(_: &Plugin, n: &Node) -> Option<Mapped> {
    let mode = str_attr(n.attrs, "mode").unwrap_or("constant");
    if n.inputs.len() > 3 || !matches!(mode, "constant" | "reflect" | "edge") {
        return None;
    }
    Some(ge_op(
        "PadV3",
        BTreeMap::from([
            ("mode".to_string(), attr_s(mode)),
            ("paddings_contiguous".to_string(), attr_b(false)),
        ]),
    ))
}

fn sum(_: &Plugin, n: &Node) -> Option<Mapped> {
    one_int("AccumulateNV2", "N", n.inputs.len() as i64)
}

fn batch_norm(_: &Plugin, n: &Node) -> Option<Mapped> {
    let stats_read = n.outputs.iter().skip(1).any(|o| !o.is_empty());
    if stats_read || int_attr(n.attrs, "training_mode").unwrap_or(0) != 0 {
        return None;
    }
    let epsilon = match n.attrs.get("epsilon")?.value.as_ref()? {
        Value::F(e) => *e,
        _ => return None,
    };
    Some(ge_op(
        "BatchNorm",
        BTreeMap::from([
            ("epsilon".to_string(), super::tensor::attr_f(epsilon)),
            ("data_format".to_string(), attr_s("NCHW")),
            ("is_training".to_string(), attr_b(false)),
        ]),
    ))
}

fn clip(_: &Plugin, n: &Node) -> Option<Mapped> {
    let given = |i: usize| n.inputs.get(i).is_some_and(Option::is_some);
    let (op, inputs) = match (given(1), given(2)) {
        (true, true) => ("ClipByValue", vec![0, 1, 2]),
        (false, true) => ("Minimum", vec![0, 2]),
        (true, false) => ("Maximum", vec![0, 1]),
        (false, false) => return None,
    };
    let mut m = ge_op(op, BTreeMap::new());
    m.inputs = Some(inputs);
    Some(m)
}

/// Clip before opset 11 (bounds as attributes): Cast(x) to float32, then
/// ClipByValue(x, min, max) with the bounds as scalar Consts. The Cast changes a float16
/// or double input's type, which ONNX keeps: only an input known to be float32 is mapped.
fn clip_attrs(_: &Plugin, n: &Node) -> Option<Mapped> {
    let is_f32 = n.inputs.first().cloned().flatten()?.dtype == Some(DataType::Float32);
    if !is_f32 {
        return None;
    }
    let bound = |k: &str, default: f32| {
        let v = match n.attrs.get(k).and_then(|a| a.value.as_ref()) {
            Some(Value::F(v)) => *v,
            _ => default,
        };
        f32_scalar(v)
    };
    let mut m = ge_op("ClipByValue", BTreeMap::new());
    let cast = Extra::new("Cast", "Cast", vec![Operand::Input(0)])
        .with("dst_type", attr_i(DataType::Float32.to_ge()));
    m.before.push((0, cast));
    m.consts.push(("min", bound("min", f32::MIN)));
    m.consts.push(("max", bound("max", f32::MAX)));
    Some(m)
}

/// LayerNormalization(X, Scale, B?; axis -1, epsilon 1e-5): GE's LayerNorm(x, gamma, beta)
/// normalizing from `axis`, its y the node's Y. GE's plugin broadcasts Scale and B to X's
/// shape with BroadcastTo and leaves begin_params_axis at 0; starting the parameters at
/// `axis` instead gives the same values without the two broadcasts (rt2's choice).
///
/// Mean and InvStdDev, when read, are GE's subgraph after LayerNorm: Cast(mean) and
/// Cast(Rsqrt(Adds(variance, epsilon))) to float32 (`stash_type` 1; GE's Identity ops
/// left out). LayerNorm gives them in X's type, so only a float32 X gives ONNX's values.
fn layer_norm(_: &Plugin, n: &Node) -> Option<Mapped> {
    let read = |k: usize| n.outputs.get(k).is_some_and(|o| !o.is_empty());
    let stats = read(1) || read(2);
    let is_f32 =
        n.inputs.first().cloned().flatten().and_then(|t| t.dtype) == Some(DataType::Float32);
    if stats && !is_f32 {
        return None;
    }
    let axis = int_attr(n.attrs, "axis").unwrap_or(-1);
    let epsilon = match n.attrs.get("epsilon").and_then(|a| a.value.as_ref()) {
        Some(Value::F(v)) => *v,
        _ => 1e-5,
    };
    let mut m = ge_op(
        "LayerNorm",
        BTreeMap::from([
            ("begin_norm_axis".to_string(), attr_i(axis)),
            ("begin_params_axis".to_string(), attr_i(axis)),
            ("epsilon".to_string(), super::tensor::attr_f(epsilon)),
        ]),
    );
    if !n.inputs.get(2).is_some_and(Option::is_some) {
        // As GE's plugin: a float32 scalar 0 for the missing B.
        m.inputs = Some(vec![0, 1]);
        m.consts.push(("beta", f32_scalar(0.0)));
    }
    // GE's LayerNorm has three outputs (y, mean, variance) where the node has one.
    m.outputs = Some(3);
    if stats {
        let to_f32 = |e: Extra| e.with("dst_type", attr_i(DataType::Float32.to_ge()));
        let adds = Extra::new("Adds", "Adds", vec![Operand::MappedOutput(2)])
            .with("value", super::tensor::attr_f(epsilon));
        m.after = vec![
            adds,
            Extra::new("Rsqrt", "Rsqrt", vec![Operand::After(0)]),
            to_f32(Extra::new("Cast", "cast1", vec![Operand::After(1)])),
            to_f32(Extra::new("Cast", "cast2", vec![Operand::MappedOutput(1)])),
        ];
        m.node_outputs = Some(vec![
            Operand::MappedOutput(0),
            Operand::After(3),
            Operand::After(2),
        ]);
    }
    Some(m)
}

/// LRN(X; size, alpha 1e-4, beta 0.75, bias 1): GE's LRN over `2 depth_radius + 1`
/// channels with TensorFlow's undivided alpha. An even size has no such window: kept.
fn lrn(_: &Plugin, n: &Node) -> Option<Mapped> {
    let size = int_attr(n.attrs, "size").filter(|s| *s > 0 && s % 2 == 1)?;
    let float = |k: &str, d: f32| match n.attrs.get(k).and_then(|a| a.value.as_ref()) {
        Some(Value::F(v)) => *v,
        _ => d,
    };
    let f = super::tensor::attr_f;
    Some(ge_op(
        "LRN",
        BTreeMap::from([
            ("depth_radius".to_string(), attr_i((size - 1) / 2)),
            ("alpha".to_string(), f(float("alpha", 1e-4) / size as f32)),
            ("beta".to_string(), f(float("beta", 0.75))),
            ("bias".to_string(), f(float("bias", 1.0))),
            ("norm_region".to_string(), attr_s("ACROSS_CHANNELS")),
        ]),
    ))
}

fn leaky_relu(_: &Plugin, n: &Node) -> Option<Mapped> {
    let alpha = match n.attrs.get("alpha").and_then(|a| a.value.as_ref()) {
        Some(Value::F(a)) => *a,
        _ => 0.01,
    };
    Some(ge_op(
        "LeakyRelu",
        BTreeMap::from([("negative_slope".to_string(), super::tensor::attr_f(alpha))]),
    ))
}

fn matmul(_: &Plugin, _: &Node) -> Option<Mapped> {
    Some(ge_op(
        "BatchMatMulV2",
        BTreeMap::from([
            ("adj_x1".to_string(), attr_b(false)),
            ("adj_x2".to_string(), attr_b(false)),
            ("offset_x".to_string(), attr_i(0)),
        ]),
    ))
}

/// Softmax and LogSoftmax: `axes` `[axis]`. Before opset 13 ONNX normalizes the input
/// flattened to 2-D at `axis`, which is one axis only when `axis` is the last.
fn softmax(p: &Plugin, n: &Node) -> Option<Mapped> {
    let axis = int_attr(n.attrs, "axis")?;
    if n.opset < 13 {
        let rank = n.inputs.first()?.as_ref()?.shape.rank()? as i64;
        if axis != rank - 1 && axis != -1 {
            return None;
        }
    }
    Some(ge_op(
        p.ge,
        BTreeMap::from([("axes".to_string(), attr_ints(&[axis]))]),
    ))
}

fn cast(_: &Plugin, n: &Node) -> Option<Mapped> {
    // The plugin's type table covers ONNX's types 1 (float) to 16 (bfloat16).
    let to = int_attr(n.attrs, "to").filter(|t| (1..=16).contains(t))?;
    let to = DataType::from_onnx(to as i32)?;
    let attrs = BTreeMap::from([("dst_type".to_string(), attr_i(to.to_ge()))]);
    Some(ge_op("Cast", attrs))
}

fn concat(_: &Plugin, n: &Node) -> Option<Mapped> {
    let axis = int_attr(n.attrs, "axis")?;
    if n.inputs.len() == 1 {
        return Some(ge_op("Identity", BTreeMap::new()));
    }
    let attrs = BTreeMap::from([
        ("concat_dim".to_string(), attr_i(axis)),
        ("N".to_string(), attr_i(n.inputs.len() as i64)),
    ]);
    Some(ge_op("ConcatD", attrs))
}

fn gather(_: &Plugin, n: &Node) -> Option<Mapped> {
    let axis = int_attr(n.attrs, "axis").unwrap_or(0);
    let mut m = ge_op(
        "GatherV2",
        BTreeMap::from([("negative_index_support".to_string(), attr_b(true))]),
    );
    m.consts
        .push(("axis", int_tensor(DataType::Int32, &[], &[axis])));
    Some(m)
}

/// GE's `op` with one int attribute `name` = `value`.
fn one_int(op: &'static str, name: &str, value: i64) -> Option<Mapped> {
    Some(ge_op(
        op,
        BTreeMap::from([(name.to_string(), attr_i(value))]),
    ))
}

fn gather_elements(_: &Plugin, n: &Node) -> Option<Mapped> {
    one_int(
        "GatherElements",
        "dim",
        int_attr(n.attrs, "axis").unwrap_or(0),
    )
}

fn reduce_op(p: &Plugin, n: &Node) -> Option<Mapped> {
    let keep = int_attr(n.attrs, "keepdims").unwrap_or(1) != 0;
    let noop = if n.opset < 13 {
        0
    } else {
        int_attr(n.attrs, "noop_with_empty_axes").unwrap_or(0)
    };
    let attrs = BTreeMap::from([
        ("keep_dims".to_string(), attr_b(keep)),
        ("noop_with_empty_axes".to_string(), attr_i(noop)),
    ]);
    let mut m = ge_op(p.ge, attrs);
    if n.inputs.len() == 1 {
        let axes = ints_attr(n.attrs, "axes");
        if axes.is_some() && n.opset >= 13 && !matches!(p.ge, "ReduceMean" | "ReduceSum") {
            return None;
        }
        let axes = axes.unwrap_or_default();
        m.consts.push(("axes", int_list(DataType::Int32, axes)));
    }
    Some(m)
}

fn reshape(_: &Plugin, n: &Node) -> Option<Mapped> {
    one_int(
        "Reshape",
        "allowzero",
        int_attr(n.attrs, "allowzero").unwrap_or(0),
    )
}

fn size(_: &Plugin, _: &Node) -> Option<Mapped> {
    one_int("Size", "dtype", DataType::Int64.to_ge())
}

fn slice(_: &Plugin, n: &Node) -> Option<Mapped> {
    let mut m = ge_op("StridedSliceV2", BTreeMap::new());
    if n.opset < 10 {
        let starts = ints_attr(n.attrs, "starts")?;
        let ends = ints_attr(n.attrs, "ends")?;
        m.consts.push(("begin", int_list(DataType::Int64, starts)));
        m.consts.push(("end", int_list(DataType::Int64, ends)));
        if let Some(axes) = ints_attr(n.attrs, "axes") {
            m.consts.push(("axes", int_list(DataType::Int64, axes)));
        }
    }
    Some(m)
}

fn squeeze(_: &Plugin, n: &Node) -> Option<Mapped> {
    if n.opset >= 13 {
        return Some(ge_op("SqueezeV3", BTreeMap::new()));
    }
    let axes = ints_attr(n.attrs, "axes").unwrap_or_default();
    Some(ge_op(
        "Squeeze",
        BTreeMap::from([("axis".to_string(), attr_ints(axes))]),
    ))
}

fn unsqueeze(_: &Plugin, n: &Node) -> Option<Mapped> {
    if n.opset >= 13 {
        return Some(ge_op("UnsqueezeV3", BTreeMap::new()));
    }
    let axes = ints_attr(n.attrs, "axes").filter(|a| !a.is_empty())?;
    Some(ge_op(
        "Unsqueeze",
        BTreeMap::from([("axes".to_string(), attr_ints(axes))]),
    ))
}

fn transpose(_: &Plugin, n: &Node) -> Option<Mapped> {
    let perm = ints_attr(n.attrs, "perm").filter(|p| !p.is_empty())?;
    let mut m = ge_op("Transpose", BTreeMap::new());
    m.consts.push(("perm", int_list(DataType::Int32, perm)));
    Some(m)
}

/// A 1-D Const tensor of `values` ([`int_tensor`]).
fn int_list(dtype: DataType, values: &[i64]) -> TensorDef {
    int_tensor(dtype, &[values.len() as i64], values)
}

/// A float32 scalar Const.
fn f32_scalar(v: f32) -> TensorDef {
    let vt = ValueType {
        dtype: Some(DataType::Float32),
        shape: Shape::known(&[]),
    };
    TensorDef {
        desc: Some(descriptor(&vt, "ND")),
        data: v.to_le_bytes().to_vec().into(),
    }
}

/// A Const tensor of ints, `dtype` int32 or int64, little-endian.
fn int_tensor(dtype: DataType, dims: &[i64], values: &[i64]) -> TensorDef {
    let vt = ValueType {
        dtype: Some(dtype),
        shape: Shape::known(dims),
    };
    let data = match dtype {
        DataType::Int32 => values
            .iter()
            .flat_map(|&v| (v.clamp(i32::MIN.into(), i32::MAX.into()) as i32).to_le_bytes())
            .collect(),
        _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    TensorDef {
        desc: Some(descriptor(&vt, "ND")),
        data,
    }
}

// ---- attribute readers -------------------------------------------------------------

fn int_attr(attrs: &BTreeMap<String, AttrDef>, name: &str) -> Option<i64> {
    match attrs.get(name)?.value.as_ref()? {
        Value::I(v) => Some(*v),
        _ => None,
    }
}

fn ints_attr<'a>(attrs: &'a BTreeMap<String, AttrDef>, name: &str) -> Option<&'a [i64]> {
    match attrs.get(name)?.value.as_ref()? {
        Value::List(l) => Some(&l.i),
        _ => None,
    }
}

fn str_attr<'a>(attrs: &'a BTreeMap<String, AttrDef>, name: &str) -> Option<&'a str> {
    match attrs.get(name)?.value.as_ref()? {
        Value::S(s) => std::str::from_utf8(s).ok(),
        _ => None,
    }
}

fn attr_b(v: bool) -> AttrDef {
    AttrDef {
        value: Some(Value::B(v)),
    }
}

// ---- windows: convolutions and pools ------------------------------------------------

/// A 2-D window's attributes as GE's NCHW ops take them: 4-element `[1,1,h,w]` lists and
/// pads reordered from ONNX's [top, left, bottom, right] to GE's [top, bottom, left,
/// right]. `None` when the window is not 2-D or a list is malformed.
struct Window2d {
    strides: Vec<i64>,
    dilations: Vec<i64>,
    pads: Vec<i64>,
}

/// The node's spatial rank: `kernel_shape`'s length, else the weight's rank - 2 (input 1,
/// convolutions), else the data's.
fn spatial_rank(n: &Node, weight: bool) -> Option<usize> {
    if let Some(k) = ints_attr(n.attrs, "kernel_shape") {
        return Some(k.len());
    }
    let rank = |i: usize| {
        n.inputs
            .get(i)?
            .as_ref()?
            .shape
            .rank()
            .and_then(|r| r.checked_sub(2))
    };
    if weight { rank(1) } else { None }.or_else(|| rank(0))
}

fn window2d(n: &Node, weight: bool) -> Option<Window2d> {
    if spatial_rank(n, weight)? != 2 {
        return None;
    }
    let pair = |name: &str| -> Option<Vec<i64>> {
        match ints_attr(n.attrs, name) {
            None => Some(vec![1, 1, 1, 1]),
            Some(&[h, w]) => Some(vec![1, 1, h, w]),
            Some(_) => None,
        }
    };
    let pads = match ints_attr(n.attrs, "pads") {
        None => vec![0; 4],
        Some(&[t, l, b, r]) => vec![t, b, l, r],
        Some(_) => return None,
    };
    Some(Window2d {
        strides: pair("strides")?,
        dilations: pair("dilations")?,
        pads,
    })
}

/// The ONNX `auto_pad` as GE's pools' `padding_mode`; `None` for SAME_LOWER, which GE's
/// SAME (TensorFlow's, the larger half of the padding last) would pad as SAME_UPPER.
fn padding_mode(n: &Node) -> Option<&'static str> {
    match str_attr(n.attrs, "auto_pad").unwrap_or("NOTSET") {
        "NOTSET" => Some("CALCULATED"),
        "SAME_UPPER" => Some("SAME"),
        "VALID" => Some("VALID"),
        _ => None,
    }
}

fn conv(p: &Plugin, n: &Node) -> Option<Mapped> {
    let lifted = spatial_rank(n, true)? == 1;
    let w = if lifted {
        window1d(n)?
    } else {
        window2d(n, true)?
    };
    let mut attrs = BTreeMap::new();
    attrs.insert("strides".into(), attr_ints(&w.strides));
    attrs.insert("dilations".into(), attr_ints(&w.dilations));
    attrs.insert("pads".into(), attr_ints(&w.pads));
    attrs.insert(
        "groups".into(),
        attr_i(int_attr(n.attrs, "group").unwrap_or(1)),
    );
    attrs.insert("data_format".into(), attr_s("NCHW"));
    attrs.insert("offset_x".into(), attr_i(0));
    let auto_pad = str_attr(n.attrs, "auto_pad").unwrap_or("NOTSET");
    attrs.insert("auto_pad".into(), attr_s(auto_pad));
    let mut m = ge_op(p.ge, attrs);
    if lifted {
        // As GE's 1-D pools: the 1-D convolution runs as a 2-D one over [N, C, L, 1],
        // its weight [Cout, Cin/group, k] as [Cout, Cin/group, k, 1].
        for i in [0, 1] {
            let unsqueeze = Extra::new("Unsqueeze", UNSQUEEZE[i], vec![Operand::Input(i)])
                .with("axes", attr_ints(&[3]));
            m.before.push((i, unsqueeze));
        }
        let squeeze =
            Extra::new("Squeeze", "Squeeze", vec![Operand::Mapped]).with("axis", attr_ints(&[3]));
        m.after.push(squeeze);
    }
    Some(m)
}

/// The names of the Unsqueeze ops lifting a 1-D convolution's x and weight.
const UNSQUEEZE: [&str; 2] = ["Unsqueeze", "Unsqueeze_w"];

/// A 1-D window lifted to GE's 2-D lists over `[N, C, L, 1]`: `[1, 1, v, 1]` strides and
/// dilations, pads `[begin, end, 0, 0]`.
fn window1d(n: &Node) -> Option<Window2d> {
    let one = |name: &str| match ints_attr(n.attrs, name) {
        None => Some(vec![1, 1, 1, 1]),
        Some(&[v]) => Some(vec![1, 1, v, 1]),
        Some(_) => None,
    };
    let pads = match ints_attr(n.attrs, "pads") {
        None => vec![0; 4],
        Some(&[b, e]) => vec![b, e, 0, 0],
        Some(_) => return None,
    };
    Some(Window2d {
        strides: one("strides")?,
        dilations: one("dilations")?,
        pads,
    })
}

/// ConvTranspose, 2-D with explicit pads: Conv2DTranspose with an all-zero `input_size`
/// (the output's shape left to the attributes) as input 0.
fn conv_transpose(p: &Plugin, n: &Node) -> Option<Mapped> {
    if str_attr(n.attrs, "auto_pad").unwrap_or("NOTSET") != "NOTSET"
        || n.attrs.contains_key("output_shape")
    {
        return None;
    }
    let w = window2d(n, true)?;
    let output_padding = match ints_attr(n.attrs, "output_padding") {
        None => vec![0; 4],
        Some(&[h, w]) => vec![0, 0, h, w],
        Some(_) => return None,
    };
    let mut m = ge_op(
        p.ge,
        BTreeMap::from([
            ("strides".to_string(), attr_ints(&w.strides)),
            ("dilations".to_string(), attr_ints(&w.dilations)),
            ("pads".to_string(), attr_ints(&w.pads)),
            ("output_padding".to_string(), attr_ints(&output_padding)),
            (
                "groups".to_string(),
                attr_i(int_attr(n.attrs, "group").unwrap_or(1)),
            ),
            ("data_format".to_string(), attr_s("NCHW")),
            ("offset_x".to_string(), attr_i(0)),
        ]),
    );
    m.leading_consts
        .push(("input_size", int_list(DataType::Int64, &[0; 4])));
    Some(m)
}

/// A pool's window as GE's 2-D pools take it; with `lifted`, a 1-D pool's over
/// `[N, C, L, 1]` (`ksize` `[1, 1, k, 1]`, `pads` `[begin, end, 0, 0]`).
fn pool_window(n: &Node, lifted: bool) -> Option<BTreeMap<String, AttrDef>> {
    let (ksize, w) = match (lifted, ints_attr(n.attrs, "kernel_shape")?) {
        (true, &[k]) => ([1, 1, k, 1], window1d(n)?),
        (false, &[kh, kw]) => ([1, 1, kh, kw], window2d(n, false)?),
        _ => return None,
    };
    if w.dilations != [1, 1, 1, 1] {
        return None;
    }
    let mut attrs = BTreeMap::new();
    attrs.insert("ksize".into(), attr_ints(&ksize));
    attrs.insert("strides".into(), attr_ints(&w.strides));
    attrs.insert("pads".into(), attr_ints(&w.pads));
    attrs.insert("padding_mode".into(), attr_s(padding_mode(n)?));
    let ceil = int_attr(n.attrs, "ceil_mode").unwrap_or(0) != 0;
    attrs.insert("ceil_mode".into(), attr_b(ceil));
    attrs.insert("data_format".into(), attr_s("NCHW"));
    attrs.insert("global_pooling".into(), attr_b(false));
    Some(attrs)
}

fn max_pool(_: &Plugin, n: &Node) -> Option<Mapped> {
    let indices_read = n.outputs.get(1).is_some_and(|o| !o.is_empty());
    if indices_read || int_attr(n.attrs, "storage_order").unwrap_or(0) != 0 {
        return None;
    }
    let lifted = spatial_rank(n, false)? == 1;
    Some(lifted_pool(
        ge_op("MaxPoolV3", pool_window(n, lifted)?),
        lifted,
    ))
}

fn average_pool(_: &Plugin, n: &Node) -> Option<Mapped> {
    let lifted = spatial_rank(n, false)? == 1;
    let mut attrs = pool_window(n, lifted)?;
    let include = int_attr(n.attrs, "count_include_pad").unwrap_or(0) != 0;
    attrs.insert("exclusive".into(), attr_b(!include));
    attrs.insert("divisor_override".into(), attr_i(0));
    Some(lifted_pool(ge_op("AvgPoolV2", attrs), lifted))
}

/// A pool `m`; with `lifted`, GE's `trans_2d`: the 1-D pool runs as a 2-D one over
/// [N, C, L, 1], x unsqueezed at axis 3 before and the result squeezed there after.
fn lifted_pool(mut m: Mapped, lifted: bool) -> Mapped {
    if lifted {
        let unsqueeze = Extra::new("Unsqueeze", "Unsqueeze", vec![Operand::Input(0)])
            .with("axes", attr_ints(&[3]));
        m.before.push((0, unsqueeze));
        let squeeze =
            Extra::new("Squeeze", "Squeeze", vec![Operand::Mapped]).with("axis", attr_ints(&[3]));
        m.after.push(squeeze);
    }
    m
}

#[cfg(test)]
mod tests;
