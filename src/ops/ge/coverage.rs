//! The GE op coverage table (`docs/GE_OP_COVERAGE.md`): every op type of GE's
//! prototypes ([`super::prototype`]) beside what rt2 does with it, generated from the
//! registry so it cannot drift (a test compares the file with [`markdown`]).

use std::fmt::Write;

use super::prototype::{DTYPE_CODES, PortKind, Prototype, prototypes};
use crate::ops::OpRegistry;

/// The op types whose compute follows GE's prototype: the GE family's, and the ops shared
/// with ONNX that read GE's attributes where a GE graph gives them (MaxPool's `ksize`,
/// LeakyRelu's `negative_slope`, Cast's `dst_type`, Shape's and Size's `dtype`) or that
/// only GE names (RealDiv, SelectV2, the Logical* and *Equal comparisons).
pub const GE_CONTRACT: &[&str] = &[
    "Aipp",
    "AvgPool",
    "AvgPoolV2",
    "BNInference",
    "BatchMatMul",
    "BatchMatMulV2",
    "Cast",
    "ConcatD",
    "ConcatV2D",
    "Conv2D",
    "Eltwise",
    "FullyConnection",
    "GreaterEqual",
    "LeakyRelu",
    "LessEqual",
    "LogicalAnd",
    "LogicalNot",
    "LogicalOr",
    "MatMulV2",
    "MaxPool",
    "MaxPoolV3",
    "Pooling",
    "Power",
    "Rank",
    "RealDiv",
    "ReduceMeanD",
    "ReduceSumD",
    "Scale",
    "SelectV2",
    "Shape",
    "Size",
    "SoftmaxV2",
    "SplitD",
    "TransData",
    "TransposeD",
];

/// Every op type computed with GE's contract: [`GE_CONTRACT`], the aliases
/// ([`super::alias`]), GE's elementwise math ([`super::math`]), data movement
/// ([`super::array`], [`super::arrange`]), selection, scatter and segment ops
/// ([`super::select`]), LayerNorm ([`super::norm`]) and the other normalizations
/// ([`super::normalize`]), statistics and norms ([`super::stats`]), activations and fake
/// quantization ([`super::activation`]), image resampling ([`super::resize`]), the matrix
/// ops ([`super::matrix`]), the convolutions and pools beyond Conv2D's and Pooling's
/// ([`super::convs`], [`super::pools`]), detection ([`super::detect`]), quantization
/// ([`super::quant`], [`super::quants`]), dropout's mask, AffineGrid, Dilation and
/// MaxPoolExt2 ([`super::misc`]), the Netron-named types whose header was found
/// ([`super::named`]) and deformable convolution ([`super::deform`]).
pub fn ge_contract_ops() -> impl Iterator<Item = &'static str> {
    GE_CONTRACT
        .iter()
        .copied()
        .chain(super::alias::names())
        .chain(super::math::names())
        .chain(super::array::names())
        .chain(super::norm::names())
        .chain(super::resize::names())
        .chain(super::matrix::names())
        .chain(super::arrange::names())
        .chain(super::normalize::names())
        .chain(super::stats::names())
        .chain(super::activation::names())
        .chain(super::convs::names())
        .chain(super::pools::names())
        .chain(super::select::names())
        .chain(super::detect::names())
        .chain(super::quant::names())
        .chain(super::quants::names())
        .chain(super::misc::names())
        .chain(super::named::names())
        .chain(super::deform::names())
}

/// Whether `op` is computed with GE's contract (see [`ge_contract_ops`]).
pub fn is_ge_contract(op: &str) -> bool {
    ge_contract_ops().any(|o| o == op)
}

/// Op types lowering itself handles: the graph's inputs, constants and outputs.
const STRUCTURE: &[&str] = &[
    "Data",
    "RefData",
    "Const",
    "Constant",
    "NetOutput",
    "PlaceHolder",
    "End",
];

/// What rt2 does with one GE op type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Support {
    /// Computed with GE's prototype (inputs, attributes and defaults).
    GeContract,
    /// Computed by the op of the same name shared with ONNX; the prototype has no
    /// attributes, so the two contracts are the same inputs in the same order.
    SharedNoAttributes,
    /// Lowered as the graph's structure (inputs, constants, outputs).
    Structure,
    /// Computed by the ONNX op of the same name, GE's attributes checked or translated
    /// to it, by another library op GE's inputs are translated to, or by an internal
    /// `ge.*` op of GE's meaning (GE's Caffe LSTM, NonZero, Unique, ...;
    /// [`super::shared`]).
    Adapted,
    /// rt2 has an ONNX op of this name under another contract: a GE graph's node of it is
    /// not computed (lowered as its compiled kernel's launch).
    OnnxContract,
    /// Not in the op library: lowers as the launch of its compiled kernel when the graph
    /// gives its output shapes; `rt2 run` refuses it.
    LaunchOnly,
}

impl Support {
    pub fn text(self) -> &'static str {
        match self {
            Support::GeContract => "computes (GE's prototype)",
            Support::SharedNoAttributes => "computes (shared with ONNX, no attributes)",
            Support::Structure => "graph structure",
            Support::Adapted => {
                "computes (GE's meaning, by a library op or an internal ge.* op, GE's inputs and attributes translated)"
            }
            Support::OnnxContract => {
                "compiled kernel launch only (rt2's op of this name is ONNX's)"
            }
            Support::LaunchOnly => "compiled kernel launch only",
        }
    }
}

/// What rt2 does with `p`'s op type, given the op library `reg`.
pub fn support(p: &Prototype, reg: &OpRegistry) -> Support {
    if STRUCTURE.contains(&p.name) {
        return Support::Structure;
    }
    let computes = reg.get(p.name).is_some_and(|s| s.compute.is_some());
    if !computes {
        Support::LaunchOnly
    } else if is_ge_contract(p.name) {
        Support::GeContract
    } else {
        match super::shared::adapts(p.name) {
            Some(true) => Support::Adapted,
            Some(false) => Support::OnnxContract,
            None if p.from_header() && p.attrs.is_empty() => Support::SharedNoAttributes,
            // A shared name neither checked nor refused: `the_shared_ops_are_all_ruled`
            // keeps this from happening.
            None => Support::OnnxContract,
        }
    }
}

fn dtype_names(codes: &[&str]) -> String {
    codes
        .iter()
        .map(|c| {
            DTYPE_CODES
                .iter()
                .find(|(k, _)| k == c)
                .map_or(*c, |(_, n)| *n)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn inputs(p: &Prototype) -> String {
    p.inputs
        .iter()
        .map(|i| match i.kind {
            PortKind::Required => i.name.to_string(),
            PortKind::Optional => format!("{}?", i.name),
            PortKind::Dynamic => format!("{}...", i.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn attrs(p: &Prototype) -> String {
    p.attrs
        .iter()
        .map(|a| match (a.required, a.default) {
            (true, _) => format!("**{}**", a.name),
            (false, Some(d)) => format!("{}={}", a.name, d.replace('|', "\\|")),
            (false, None) => a.name.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The whole coverage page.
pub fn markdown(reg: &OpRegistry) -> String {
    let all = prototypes();
    let mut counts = std::collections::BTreeMap::new();
    for p in all.values() {
        *counts.entry(support(p, reg)).or_insert(0usize) += 1;
    }
    let mut s = String::new();
    s.push_str(
        "# GE op coverage\n\n\
         Generated from the op registry and GE's prototypes (`src/ops/ge/prototypes/`) by\n\
         `RT2_BLESS=1 cargo test --test ge_ops`; the test fails when this page is stale.\n\n\
         Every op type of GE's prototypes rt2 knows: those read from CANN's `REG_OP`\n\
         headers (inputs, attributes, defaults and element types), and those Netron's GE\n\
         metadata names (names only). What rt2 does with each:\n\n",
    );
    for (k, n) in &counts {
        let _ = writeln!(s, "- {}: {n}", k.text());
    }
    s.push_str(
        "\nInputs: `x?` optional, `x...` dynamic (any number). Attributes: **bold** \
         required, `name=default` optional. Element types are the first input's (the \
         first output's for ops without inputs), as the prototype declares them; rt2 \
         computes the float types (float32, float16, bfloat16, float64) and the integer \
         and bool types its kernels take.\n\n",
    );
    s.push_str("| op type | rt2 | inputs | attributes | element types | source |\n");
    s.push_str("|---|---|---|---|---|---|\n");
    for p in all.values() {
        let types = p
            .inputs
            .first()
            .or(p.outputs.first())
            .map_or(String::new(), |port| dtype_names(&port.dtypes));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            p.name,
            support(p, reg).text(),
            inputs(p),
            attrs(p),
            types,
            p.file
        );
    }
    s
}
