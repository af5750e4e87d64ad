//! What the fusion passes share: a view of one graph for matching (who reads each node,
//! each node's element type, constant values) and the removal of the nodes a fusion
//! replaced.

use crate::om::graph::{
    AttrValue, ComputeGraph, ComputeNode, ListAttr, NodeId, OutPort, Shape, TensorDesc,
    is_const_type,
};
use crate::ops::DType;

use super::super::attrs::tensor;

/// Where GE's fusion passes record the nodes a fused node replaces.
pub(super) const ORIGINAL_OP_NAMES: &str = "_datadump_original_op_names";

/// Removes the nodes marked in `dead`, which nothing outside them reads, and renumbers
/// every reference to the others.
pub(super) fn remove(g: &mut ComputeGraph, dead: &[bool]) {
    let mut new_id = Vec::with_capacity(dead.len());
    let mut next = 0u32;
    for &d in dead {
        new_id.push(next);
        next += u32::from(!d);
    }
    let mut i = 0;
    g.nodes.retain(|_| {
        i += 1;
        !dead[i - 1]
    });
    let port = |p: &mut OutPort| p.node = NodeId(new_id[p.node.index()]);
    for n in &mut g.nodes {
        n.inputs.iter_mut().flatten().for_each(port);
        n.control_inputs.retain(|c| !dead[c.index()]);
        for c in &mut n.control_inputs {
            *c = NodeId(new_id[c.index()]);
        }
    }
    g.inputs.iter_mut().for_each(port);
    g.outputs.iter_mut().for_each(port);
}

/// How many times each node's outputs are read (by nodes and as graph outputs): the
/// fused patterns only swallow nodes read once.
pub(super) fn readers(g: &ComputeGraph) -> Vec<u32> {
    let mut count = vec![0u32; g.nodes.len()];
    let ports = g.nodes.iter().flat_map(|n| n.inputs.iter().flatten());
    for p in ports.chain(&g.outputs) {
        if let Some(c) = count.get_mut(p.node.index()) {
            *c += 1;
        }
    }
    count
}

/// Whether `v` is `want` to float32 precision: a constant rounded to float32, or a
/// product of such, may be a few float32 steps off the formula's value.
pub(super) fn near(v: f64, want: f64) -> bool {
    (v - want).abs() <= 1e-6 * want.abs()
}

/// The rank of a value whose descriptor `d` has known dims.
pub(super) fn rank(d: Option<&TensorDesc>) -> Option<usize> {
    match d.map(|d| &d.shape) {
        Some(Shape::Dims(d)) => Some(d.len()),
        _ => None,
    }
}

/// A view of one graph for matching.
pub(super) struct View<'a> {
    pub(super) g: &'a ComputeGraph,
    pub(super) readers: Vec<u32>,
    /// Each node's output 0 element type, where known ([`output_types`]).
    pub(super) types: Vec<Option<DType>>,
}

/// Ops whose output has the element type of their input 0, whatever the values: a value
/// the importer left undescribed after one of them has its input's type.
const TYPE_PRESERVING: &[&str] = &[
    "Conv",
    "Conv2D",
    "DepthwiseConv2D",
    "Relu",
    "Relu6",
    "LeakyRelu",
    "Clip",
    "ClipByValue",
    "Sigmoid",
    "Tanh",
    "HardSwish",
    "HardSigmoid",
    "MaxPool",
    "MaxPoolV3",
    "AvgPool",
    "AvgPoolV2",
    "AveragePool",
    "GlobalAveragePool",
    "Pooling",
    "BatchNorm",
    "BatchNormalization",
    "Add",
    "AddV2",
    "Sub",
    "Mul",
    "Div",
    "RealDiv",
    "Sum",
    "AddN",
    "AccumulateNV2",
    "Max",
    "MaxN",
    "Min",
    "Neg",
    "Abs",
    "Exp",
    "Sqrt",
    "Erf",
    "Gelu",
    "Swish",
    "Softplus",
    "LayerNormalization",
    "InstanceNormalization",
    "LRN",
    "ConvTranspose",
    "Conv2DTransposeD",
    "Deconvolution",
    "Upsample",
    "Slice",
    "Tile",
    "Expand",
    "Concat",
    "ConcatD",
    "ConcatV2D",
    "Identity",
    "Reshape",
    "Transpose",
    "TransposeD",
    "Pad",
    "PadD",
    "Flatten",
    "Squeeze",
    "SqueezeV3",
    "Unsqueeze",
    "UnsqueezeV3",
    "ExpandDims",
    "Resize",
    "Softmax",
    "SoftmaxV2",
    "Dropout",
    // Data movement and reductions of input 0's values.
    "Gather",
    "GatherV2",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "LogSoftmax",
    "LogSoftmaxV2",
    "Pow",
    // The recurrent layers: output 0 (Y) is of X's type.
    "LSTM",
    "GRU",
    "RNN",
];

/// Products, whose output has the element type of their input 0 when that is a float
/// type (an int8 product's is int32).
const FLOAT_PRESERVING: &[&str] = &["MatMul", "MatMulV2", "BatchMatMul", "BatchMatMulV2", "Gemm"];

/// The element type of each node's output 0: its descriptor's, else, after a
/// [`TYPE_PRESERVING`] op, its input 0's (a Conv2DTranspose's x, its input 1), and after
/// a [`FLOAT_PRESERVING`] op its input 0's float type. Nodes are visited in order, so a
/// value read from a later node (none in a graph the readers made) stays unknown.
pub(super) fn output_types(g: &ComputeGraph) -> Vec<Option<DType>> {
    let mut types: Vec<Option<DType>> = Vec::with_capacity(g.nodes.len());
    for (i, n) in g.nodes.iter().enumerate() {
        let described = n
            .output_descs
            .first()
            .and_then(|d| super::super::attrs::dtype(d.dtype));
        let inherited = || {
            let op = n.op_type.as_str();
            // GE's Conv2DTranspose takes the output's size first and x second.
            let (data, floats) = match op {
                "Conv2DTranspose" => (1, false),
                _ if TYPE_PRESERVING.contains(&op) => (0, false),
                _ if FLOAT_PRESERVING.contains(&op) => (0, true),
                _ => return None,
            };
            let x = n.inputs.get(data).copied().flatten()?;
            let from = x.node.index();
            let t = (x.index == 0 && from < i).then(|| types[from]).flatten()?;
            (!floats || t.is_float()).then_some(t)
        };
        let t = described.or_else(inherited);
        types.push(t);
    }
    types
}

impl<'a> View<'a> {
    /// The view of `g`: its readers and element types, computed once.
    pub(super) fn new(g: &'a ComputeGraph) -> View<'a> {
        View {
            g,
            readers: readers(g),
            types: output_types(g),
        }
    }

    pub(super) fn node(&self, p: OutPort) -> Option<&'a ComputeNode> {
        self.g.nodes.get(p.node.index())
    }

    /// The value of the constant at `p`, when it is one the device holds: a constant
    /// node's, or a Fill's of constant dims and value (ONNX's ConstantOfShape, as the
    /// importer writes it; the ONNX "light" models make every weight so).
    pub(super) fn constant(&self, p: OutPort) -> Option<crate::ops::HostTensor> {
        let n = self.node(p)?;
        if n.op_type == "Fill" && p.index == 0 {
            return self.filled(n);
        }
        if !is_const_type(&n.op_type) {
            return None;
        }
        let Some(AttrValue::Tensor(t)) = n.attr("value") else {
            return None;
        };
        tensor(t)
    }

    /// The value of Fill `n` (dims, value), when both inputs are constants and the
    /// result is within const_eval's bound on what lowering folds.
    pub(super) fn filled(&self, n: &ComputeNode) -> Option<crate::ops::HostTensor> {
        let [Some(dims), Some(value)] = n.inputs[..] else {
            return None;
        };
        let dims = self.ints(dims)?;
        let value = self.constant(value)?;
        if value.data.len() != value.dtype.size() || dims.iter().any(|&d| d < 0) {
            return None;
        }
        let count = dims
            .iter()
            .try_fold(1usize, |c, &d| c.checked_mul(usize::try_from(d).ok()?))?;
        let bytes = count.checked_mul(value.data.len())?;
        (bytes <= super::super::const_eval::MAX_FOLD_BYTES).then(|| crate::ops::HostTensor {
            dtype: value.dtype,
            shape: dims,
            data: value.data.repeat(count).into(),
        })
    }

    /// The value of a scalar (one-element) float constant at `p`.
    pub(super) fn scalar(&self, p: OutPort) -> Option<f64> {
        let t = self.constant(p)?;
        (t.dtype.is_float() && t.element_count()? == 1).then(|| t.float_at(0))?
    }

    /// `n`'s two data inputs, when it has exactly two.
    pub(super) fn two(n: &ComputeNode) -> Option<(OutPort, OutPort)> {
        match n.inputs.as_slice() {
            [Some(a), Some(b)] => Some((*a, *b)),
            _ => None,
        }
    }

    /// For a commutative binary `n` with a scalar constant operand equal to `c` (to
    /// float32 precision): the other operand.
    pub(super) fn with_const(&self, n: &ComputeNode, c: f64) -> Option<OutPort> {
        let (a, b) = Self::two(n)?;
        if self.scalar(b).is_some_and(|v| near(v, c)) {
            Some(a)
        } else if self.scalar(a).is_some_and(|v| near(v, c)) {
            Some(b)
        } else {
            None
        }
    }

    /// The node producing `p`, when it is of one of `ops`, `p` is its output 0, and
    /// nothing but the pattern reads it.
    pub(super) fn sole(&self, p: OutPort, ops: &[&str]) -> Option<&'a ComputeNode> {
        self.read(p, ops, 1)
    }

    /// [`View::sole`] for a node the pattern reads `times` times.
    pub(super) fn read(&self, p: OutPort, ops: &[&str], times: u32) -> Option<&'a ComputeNode> {
        let n = self.node(p)?;
        (p.index == 0 && ops.contains(&n.op_type.as_str()) && self.readers[p.node.index()] == times)
            .then_some(n)
    }

    /// The integer values of a constant at `p`.
    pub(super) fn ints(&self, p: OutPort) -> Option<Vec<i64>> {
        self.constant(p)?.int_values()
    }

    /// For a ReduceMean `n` of the importer's or GE's form: its input, when it reduces
    /// the last axis alone (`-1`, or `rank - 1` of a described input) keeping the dim.
    pub(super) fn mean_of_last(&self, n: &ComputeNode) -> Option<OutPort> {
        let x = n.inputs.first().copied().flatten()?;
        let axes = match (n.inputs.get(1).copied().flatten(), n.attr("axes")) {
            (Some(a), _) => self.ints(a)?,
            (None, Some(AttrValue::List(ListAttr::Int(a)))) => a.clone(),
            _ => return None,
        };
        let keep = match n.attr("keep_dims").or_else(|| n.attr("keepdims")) {
            Some(AttrValue::Bool(b)) => *b,
            Some(AttrValue::Int(k)) => *k != 0,
            _ => false,
        };
        let rank = rank(n.input_descs.first()).map(|r| r as i64);
        let last = matches!(axes.as_slice(), [-1]) || (rank.is_some() && axes == [rank? - 1]);
        (keep && last).then_some(x)
    }

    /// Whether `x` is described as a float tensor (or not described: the op checks).
    pub(super) fn float_input(&self, n: &ComputeNode, i: usize) -> bool {
        n.input_descs
            .get(i)
            .is_none_or(|d| super::super::attrs::dtype(d.dtype).is_none_or(|t| t.is_float()))
    }
}
