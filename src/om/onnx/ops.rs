//! What the importer knows about individual ONNX ops besides GE's plugins
//! ([`super::plugins`]): the opset-dependent attribute defaults it writes out explicitly,
//! and which ops are laid out NCHW.
//!
//! Plain data and small pure functions; the importer is the only caller. Nothing here
//! changes an op's inputs or the meaning of an attribute ONNX already set.

use std::collections::BTreeMap;

use super::tensor::{attr_f, attr_i, attr_ints, attr_s, attr_strings};
use crate::proto::ge_ir::AttrDef;
use crate::proto::ge_ir::attr_def::Value;

/// Ops whose 4-D data input 0 and output 0 GE lays out NCHW (its Conv plugin calls
/// `ChangeFormatFromOnnx(op, 0, FORMAT_NCHW)` for 4-D input); everything else is ND.
pub const NCHW_OPS: &[&str] = &[
    "AveragePool",
    "BatchNormalization",
    "Conv",
    "ConvTranspose",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "InstanceNormalization",
    "LRN",
    "LpPool",
    "MaxPool",
];

/// What the defaults need to know about the node besides its attributes.
pub struct NodeFacts {
    /// Number of spatial axes, when known (from `kernel_shape`, the weight or the input).
    pub spatial: Option<usize>,
}

/// Writes the opset-dependent defaults of `op` that the node leaves unset, so a reader
/// never has to know ONNX's per-version default rules. Attributes ONNX moved to inputs
/// in later opsets (Squeeze axes, Clip min/max, Pad pads, Split split, Reduce axes) are
/// not invented: they stay wherever the node put them. Defaults that depend on a rank
/// (`strides`, `pads`, `dilations`) are written only when the rank is known.
pub fn apply_defaults(
    op: &str,
    opset: i64,
    facts: &NodeFacts,
    attrs: &mut BTreeMap<String, AttrDef>,
) {
    let mut set = |name: &str, v: AttrDef| {
        attrs.entry(name.to_string()).or_insert(v);
    };
    let ones = |n: usize| attr_ints(&vec![1; n]);
    let zeros = |n: usize| attr_ints(&vec![0; n]);
    match op {
        "Conv" | "ConvTranspose" | "ConvInteger" | "QLinearConv" => {
            set("auto_pad", attr_s("NOTSET"));
            set("group", attr_i(1));
            if let Some(n) = facts.spatial {
                set("strides", ones(n));
                set("dilations", ones(n));
                set("pads", zeros(2 * n));
                if op == "ConvTranspose" {
                    set("output_padding", zeros(n));
                }
            }
        }
        "MaxPool" | "AveragePool" | "LpPool" => {
            set("auto_pad", attr_s("NOTSET"));
            if let Some(n) = facts.spatial {
                set("strides", ones(n));
                set("pads", zeros(2 * n));
                let has_dilations = match op {
                    "MaxPool" => opset >= 10,
                    "AveragePool" => opset >= 19,
                    _ => opset >= 18,
                };
                if has_dilations {
                    set("dilations", ones(n));
                }
            }
            if opset >= 10 && op != "LpPool" || op == "LpPool" && opset >= 18 {
                set("ceil_mode", attr_i(0));
            }
            match op {
                "MaxPool" if opset >= 8 => set("storage_order", attr_i(0)),
                "AveragePool" => set("count_include_pad", attr_i(0)),
                "LpPool" => set("p", attr_i(2)),
                _ => {}
            }
        }
        "GlobalLpPool" => set("p", attr_i(2)),
        "Gemm" => {
            set("alpha", attr_f(1.0));
            set("beta", attr_f(1.0));
            set("transA", attr_i(0));
            set("transB", attr_i(0));
        }
        // The axis default moved from 1 to -1 in opset 13, and so did the meaning: before
        // 13 the input is flattened to 2-D at `axis`, from 13 on one axis is reduced.
        // `onnx_opset` on the op tells the two apart.
        "Softmax" | "LogSoftmax" | "Hardmax" => {
            set("axis", attr_i(if opset >= 13 { -1 } else { 1 }))
        }
        "Concat" if opset < 4 => set("axis", attr_i(1)),
        "Split" => set("axis", attr_i(0)),
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
        | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceSumSquare" => {
            set("keepdims", attr_i(1));
            let axes_input_from = if op == "ReduceSum" { 13 } else { 18 };
            if opset >= axes_input_from {
                set("noop_with_empty_axes", attr_i(0));
            }
        }
        "ArgMax" | "ArgMin" => {
            set("axis", attr_i(0));
            set("keepdims", attr_i(1));
            if opset >= 12 {
                set("select_last_index", attr_i(0));
            }
        }
        "LeakyRelu" => set("alpha", attr_f(0.01)),
        "Elu" | "Celu" | "ThresholdedRelu" => set("alpha", attr_f(1.0)),
        "Selu" => {
            set("alpha", attr_f(1.673_263_2));
            set("gamma", attr_f(1.050_701));
        }
        "HardSigmoid" => {
            set("alpha", attr_f(0.2));
            set("beta", attr_f(0.5));
        }
        "BatchNormalization" => {
            set("epsilon", attr_f(1e-5));
            set("momentum", attr_f(0.9));
        }
        "InstanceNormalization" => set("epsilon", attr_f(1e-5)),
        "LayerNormalization" => {
            set("axis", attr_i(-1));
            set("epsilon", attr_f(1e-5));
            set("stash_type", attr_i(1));
        }
        "Gather" | "GatherElements" | "ScatterElements" => set("axis", attr_i(0)),
        "GatherND" if opset >= 12 => set("batch_dims", attr_i(0)),
        "Flatten" => set("axis", attr_i(1)),
        "Resize" => {
            set("mode", attr_s("nearest"));
            if opset >= 11 {
                set("coordinate_transformation_mode", attr_s("half_pixel"));
                set("nearest_mode", attr_s("round_prefer_floor"));
                set("cubic_coeff_a", attr_f(-0.75));
                set("exclude_outside", attr_i(0));
                set("extrapolation_value", attr_f(0.0));
            }
            if opset >= 18 {
                set("antialias", attr_i(0));
                set("keep_aspect_ratio_policy", attr_s("stretch"));
            }
        }
        "Upsample" => set("mode", attr_s("nearest")),
        // Before opset 11 the bounds are attributes defaulting to the float range; from 11
        // on they are optional inputs and absent means unbounded.
        "Clip" if opset < 11 => {
            set("min", attr_f(f32::MIN));
            set("max", attr_f(f32::MAX));
        }
        "Pad" => {
            set("mode", attr_s("constant"));
            if opset < 11 {
                set("value", attr_f(0.0));
            }
        }
        "TopK" => {
            set("axis", attr_i(-1));
            if opset >= 11 {
                set("largest", attr_i(1));
                set("sorted", attr_i(1));
            }
        }
        "CumSum" => {
            set("exclusive", attr_i(0));
            set("reverse", attr_i(0));
        }
        "DepthToSpace" if opset >= 11 => set("mode", attr_s("DCR")),
        "OneHot" => set("axis", attr_i(-1)),
        "Trilu" => set("upper", attr_i(1)),
        "Shape" if opset >= 15 => set("start", attr_i(0)),
        "Mod" => set("fmod", attr_i(0)),
        "LSTM" | "GRU" | "RNN" => {
            let direction = match attrs.get("direction").and_then(|a| a.value.as_ref()) {
                Some(Value::S(s)) => String::from_utf8_lossy(s).into_owned(),
                _ => "forward".to_string(),
            };
            let dirs = if direction == "bidirectional" { 2 } else { 1 };
            let per_dir: &[&str] = match op {
                "LSTM" => &["Sigmoid", "Tanh", "Tanh"],
                "GRU" => &["Sigmoid", "Tanh"],
                _ => &["Tanh"],
            };
            let acts: Vec<&str> = (0..dirs).flat_map(|_| per_dir.iter().copied()).collect();
            let mut set = |name: &str, v: AttrDef| {
                attrs.entry(name.to_string()).or_insert(v);
            };
            set("direction", attr_s("forward"));
            set("activations", attr_strings(&acts));
            if opset >= 14 {
                set("layout", attr_i(0));
            }
            match op {
                "LSTM" => set("input_forget", attr_i(0)),
                "GRU" => set("linear_before_reset", attr_i(0)),
                _ => {}
            }
        }
        _ => {}
    }
}
