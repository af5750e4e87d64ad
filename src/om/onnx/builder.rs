//! A small ONNX model builder for tests, CLI tests and benchmarks: models are written in
//! Rust, so no Python or checked-in binaries are needed.
//!
//! It builds protos and nothing else; it checks nothing, so tests can build broken models
//! on purpose.

use prost::Message;

use crate::proto::onnx::attribute_proto::AttributeType;
use crate::proto::onnx::tensor_shape_proto::{Dimension, dimension};
use crate::proto::onnx::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, type_proto,
};

/// ONNX element type numbers (`TensorProto.DataType`).
pub const F32: i32 = 1;
pub const U8: i32 = 2;
pub const I8: i32 = 3;
pub const I32: i32 = 6;
pub const I64: i32 = 7;
pub const STRING: i32 = 8;
pub const BOOL: i32 = 9;
pub const F16: i32 = 10;
pub const F64: i32 = 11;
pub const BF16: i32 = 16;

/// One dim of a value's shape, in every spelling exporters use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    /// `dim_value` (exporters write `-1` for unknown too).
    Value(i64),
    /// `dim_param` (`"batch"`, `"unk__12"`, `"?"`, `"2*seq+1"`).
    Param(String),
    /// A dim with neither field set.
    Missing,
}

impl Dim {
    pub fn param(s: &str) -> Dim {
        Dim::Param(s.to_string())
    }
}

impl From<i64> for Dim {
    fn from(v: i64) -> Dim {
        Dim::Value(v)
    }
}

impl From<&str> for Dim {
    fn from(s: &str) -> Dim {
        Dim::Param(s.to_string())
    }
}

/// A tensor value type; `dims: None` leaves the shape out (unknown rank).
pub fn value_info(name: &str, elem_type: i32, dims: Option<&[Dim]>) -> ValueInfoProto {
    let shape = dims.map(|dims| TensorShapeProto {
        dim: dims
            .iter()
            .map(|d| Dimension {
                value: match d {
                    Dim::Value(v) => Some(dimension::Value::DimValue(*v)),
                    Dim::Param(p) => Some(dimension::Value::DimParam(p.clone())),
                    Dim::Missing => None,
                },
                ..Default::default()
            })
            .collect(),
    });
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem_type),
                shape,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A float tensor in `float_data`.
pub fn tensor_f32(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.to_string()),
        dims: dims.to_vec(),
        data_type: Some(F32),
        float_data: data.to_vec(),
        ..Default::default()
    }
}

/// An int64 tensor in `int64_data`.
pub fn tensor_i64(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.to_string()),
        dims: dims.to_vec(),
        data_type: Some(I64),
        int64_data: data.to_vec(),
        ..Default::default()
    }
}

/// A bool tensor, held in `int32_data` as ONNX requires.
pub fn tensor_bool(name: &str, dims: &[i64], data: &[bool]) -> TensorProto {
    TensorProto {
        name: Some(name.to_string()),
        dims: dims.to_vec(),
        data_type: Some(BOOL),
        int32_data: data.iter().map(|b| *b as i32).collect(),
        ..Default::default()
    }
}

fn attr(name: &str, kind: AttributeType) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(kind as i32),
        ..Default::default()
    }
}
pub fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        i: Some(v),
        ..attr(name, AttributeType::Int)
    }
}
pub fn attr_f(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        f: Some(v),
        ..attr(name, AttributeType::Float)
    }
}
pub fn attr_s(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        s: Some(v.as_bytes().to_vec()),
        ..attr(name, AttributeType::String)
    }
}
pub fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        ints: v.to_vec(),
        ..attr(name, AttributeType::Ints)
    }
}
pub fn attr_floats(name: &str, v: &[f32]) -> AttributeProto {
    AttributeProto {
        floats: v.to_vec(),
        ..attr(name, AttributeType::Floats)
    }
}
pub fn attr_t(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        t: Some(t),
        ..attr(name, AttributeType::Tensor)
    }
}
pub fn attr_g(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        g: Some(g),
        ..attr(name, AttributeType::Graph)
    }
}

/// Builds one ONNX graph, and the model around it when it is the main graph.
#[derive(Debug, Clone)]
pub struct OnnxBuilder {
    graph: GraphProto,
    opsets: Vec<(String, i64)>,
    producer: Option<(String, String)>,
}

impl OnnxBuilder {
    /// A graph named `name`, opset 17 of `ai.onnx` unless [`OnnxBuilder::opset`] says otherwise.
    pub fn new(name: &str) -> Self {
        OnnxBuilder {
            graph: GraphProto {
                name: Some(name.to_string()),
                ..Default::default()
            },
            opsets: Vec::new(),
            producer: None,
        }
    }
    /// Imports `version` of `domain` (`""` is `ai.onnx`).
    pub fn opset(mut self, domain: &str, version: i64) -> Self {
        self.opsets.push((domain.to_string(), version));
        self
    }
    pub fn producer(mut self, name: &str, version: &str) -> Self {
        self.producer = Some((name.to_string(), version.to_string()));
        self
    }
    /// A graph input with a shape.
    pub fn input(mut self, name: &str, elem_type: i32, dims: &[Dim]) -> Self {
        self.graph
            .input
            .push(value_info(name, elem_type, Some(dims)));
        self
    }
    /// A graph input, or output or value_info, from a ready `ValueInfoProto`.
    pub fn input_info(mut self, vi: ValueInfoProto) -> Self {
        self.graph.input.push(vi);
        self
    }
    pub fn output(mut self, name: &str, elem_type: i32, dims: &[Dim]) -> Self {
        self.graph
            .output
            .push(value_info(name, elem_type, Some(dims)));
        self
    }
    pub fn output_info(mut self, vi: ValueInfoProto) -> Self {
        self.graph.output.push(vi);
        self
    }
    pub fn value_info(mut self, vi: ValueInfoProto) -> Self {
        self.graph.value_info.push(vi);
        self
    }
    pub fn initializer(mut self, t: TensorProto) -> Self {
        self.graph.initializer.push(t);
        self
    }
    /// An unnamed node of the default domain.
    pub fn node(
        self,
        op_type: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> Self {
        self.named_node("", op_type, inputs, outputs, attrs)
    }
    /// A node with a name (`""` leaves it unnamed).
    pub fn named_node(
        mut self,
        name: &str,
        op_type: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> Self {
        self.graph.node.push(NodeProto {
            name: (!name.is_empty()).then(|| name.to_string()),
            op_type: Some(op_type.to_string()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute: attrs,
            ..Default::default()
        });
        self
    }
    /// A node from a ready `NodeProto` (other domains, odd fields).
    pub fn raw_node(mut self, node: NodeProto) -> Self {
        self.graph.node.push(node);
        self
    }
    /// The graph alone, for `If`/`Loop`/`Scan` attributes.
    pub fn graph(self) -> GraphProto {
        self.graph
    }
    /// The model proto.
    pub fn model(self) -> ModelProto {
        let mut opsets = self.opsets;
        if opsets.is_empty() {
            opsets.push((String::new(), 17));
        }
        let (producer_name, producer_version) = match self.producer {
            Some((n, v)) => (Some(n), Some(v)),
            None => (Some("rt2-builder".to_string()), None),
        };
        ModelProto {
            ir_version: Some(8),
            opset_import: opsets
                .into_iter()
                .map(|(d, v)| OperatorSetIdProto {
                    domain: Some(d),
                    version: Some(v),
                })
                .collect(),
            producer_name,
            producer_version,
            graph: Some(self.graph),
            ..Default::default()
        }
    }
    /// The encoded model.
    pub fn build(self) -> Vec<u8> {
        self.model().encode_to_vec()
    }
}

/// A chain of `n` nodes (Add, Relu, Mul repeating, with small constants) over one
/// `[1, 64]` float input, for import benchmarks.
pub fn chain_model(n: usize) -> Vec<u8> {
    let mut b = OnnxBuilder::new("chain")
        .input("x", F32, &[Dim::Value(1), Dim::Value(64)])
        .initializer(tensor_f32("bias", &[64], &[0.5; 64]))
        .initializer(tensor_f32("scale", &[64], &[0.99; 64]));
    let mut prev = "x".to_string();
    for i in 0..n {
        let out = format!("v{i}");
        b = match i % 3 {
            0 => b.named_node(&format!("add{i}"), "Add", &[&prev, "bias"], &[&out], vec![]),
            1 => b.named_node(&format!("relu{i}"), "Relu", &[&prev], &[&out], vec![]),
            _ => b.named_node(
                &format!("mul{i}"),
                "Mul",
                &[&prev, "scale"],
                &[&out],
                vec![],
            ),
        };
        prev = out;
    }
    b.output(&prev, F32, &[Dim::Value(1), Dim::Value(64)])
        .build()
}

/// A chain of `n` Adds over one `[1, width]` float input, each adding a small constant
/// to the previous value: the per-node cost of an execution, end to end.
pub fn add_chain_model(n: usize, width: i64) -> Vec<u8> {
    let w = width.max(0) as usize;
    let mut b = OnnxBuilder::new("add_chain")
        .input("x", F32, &[Dim::Value(1), Dim::Value(width)])
        .initializer(tensor_f32("c", &[width], &vec![0.25; w]));
    let mut prev = "x".to_string();
    for i in 0..n {
        let out = format!("v{i}");
        b = b.named_node(&format!("add{i}"), "Add", &[&prev, "c"], &[&out], vec![]);
        prev = out;
    }
    b.output(&prev, F32, &[Dim::Value(1), Dim::Value(width)])
        .build()
}

/// Seeded values in [-scale, scale): a model's weights, the same on every build.
pub fn seeded_f32(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(0x6A09_E667_F3BC_C909);
    (0..n)
        .map(|_| {
            // SplitMix64.
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// The sizes of [`encoder_block_model`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderBlock {
    pub d_model: usize,
    pub heads: usize,
    pub ffn: usize,
}

impl EncoderBlock {
    /// The base transformer's sizes: d_model 512, 8 heads, FFN 2048.
    pub const BASE: EncoderBlock = EncoderBlock {
        d_model: 512,
        heads: 8,
        ffn: 2048,
    };

    /// The weights' names, shapes and seeds, in the order the model declares them.
    pub fn weights(self) -> Vec<(&'static str, Vec<i64>, u64)> {
        let (d, f) = (self.d_model as i64, self.ffn as i64);
        vec![
            ("wq", vec![d, d], 1),
            ("bq", vec![d], 2),
            ("wk", vec![d, d], 3),
            ("bk", vec![d], 4),
            ("wv", vec![d, d], 5),
            ("bv", vec![d], 6),
            ("wo", vec![d, d], 7),
            ("bo", vec![d], 8),
            ("ln1_g", vec![d], 9),
            ("ln1_b", vec![d], 10),
            ("w1", vec![d, f], 11),
            ("b1", vec![f], 12),
            ("w2", vec![f, d], 13),
            ("b2", vec![d], 14),
            ("ln2_g", vec![d], 15),
            ("ln2_b", vec![d], 16),
        ]
    }

    /// A weight's values: matrices scaled by 1/sqrt(fan-in), biases small, LayerNorm
    /// scales near 1.
    pub fn weight(name: &str, shape: &[i64], seed: u64) -> Vec<f32> {
        let n = shape.iter().product::<i64>() as usize;
        match (name, shape) {
            (n_, _) if n_.ends_with("_g") => seeded_f32(n, seed, 0.1)
                .into_iter()
                .map(|v| 1.0 + v)
                .collect(),
            (_, [fan_in, _]) => seeded_f32(n, seed, 1.0 / (*fan_in as f32).sqrt()),
            _ => seeded_f32(n, seed, 0.1),
        }
    }
}

/// A post-norm transformer encoder block over `x: [seq, d_model]` float32 with a symbolic
/// `seq`: multi-head self-attention (MatMul + Add projections; heads split by Reshape to
/// `[seq, heads, d_head]` and Transpose; scores scaled by 1/sqrt(d_head), Softmax over
/// the keys), the output projection, residual and LayerNormalization, then the FFN
/// (MatMul, Add, Relu, MatMul, Add), residual and LayerNormalization. Weights are
/// initializers ([`EncoderBlock::weight`]), as an exported model has them.
/// `seq`: `None` for the symbolic length, or a fixed one (for peers that run a model at
/// its declared shape).
pub fn encoder_block_model(sizes: EncoderBlock, seq: Option<i64>) -> Vec<u8> {
    let EncoderBlock { d_model, heads, .. } = sizes;
    let d_head = (d_model / heads.max(1)) as i64;
    let seq = || seq.map_or_else(|| Dim::param("seq"), Dim::Value);
    let mut b = OnnxBuilder::new("encoder_block")
        .input("x", F32, &[seq(), Dim::Value(d_model as i64)])
        .initializer(tensor_i64("heads_shape", &[3], &[-1, heads as i64, d_head]))
        .initializer(tensor_i64("model_shape", &[2], &[-1, d_model as i64]))
        .initializer(tensor_f32("scale", &[], &[1.0 / (d_head as f32).sqrt()]));
    for (name, shape, seed) in sizes.weights() {
        b = b.initializer(tensor_f32(
            name,
            &shape,
            &EncoderBlock::weight(name, &shape, seed),
        ));
    }
    let node = |b: OnnxBuilder, op: &str, ins: &[&str], out: &str, attrs| {
        b.named_node(out, op, ins, &[out], attrs)
    };
    for p in ["q", "k", "v"] {
        let (w, bias) = (format!("w{p}"), format!("b{p}"));
        let (mm, lin, split) = (format!("{p}_mm"), format!("{p}_lin"), format!("{p}_split"));
        b = node(b, "MatMul", &["x", &w], &mm, vec![]);
        b = node(b, "Add", &[&mm, &bias], &lin, vec![]);
        b = node(b, "Reshape", &[&lin, "heads_shape"], &split, vec![]);
    }
    // [heads, seq, d_head] for Q and V, [heads, d_head, seq] for K.
    b = node(
        b,
        "Transpose",
        &["q_split"],
        "q_h",
        vec![attr_ints("perm", &[1, 0, 2])],
    );
    b = node(
        b,
        "Transpose",
        &["k_split"],
        "k_t",
        vec![attr_ints("perm", &[1, 2, 0])],
    );
    b = node(
        b,
        "Transpose",
        &["v_split"],
        "v_h",
        vec![attr_ints("perm", &[1, 0, 2])],
    );
    b = node(b, "MatMul", &["q_h", "k_t"], "scores", vec![]);
    b = node(b, "Mul", &["scores", "scale"], "scaled", vec![]);
    b = node(b, "Softmax", &["scaled"], "probs", vec![attr_i("axis", -1)]);
    b = node(b, "MatMul", &["probs", "v_h"], "ctx_h", vec![]);
    b = node(
        b,
        "Transpose",
        &["ctx_h"],
        "ctx_t",
        vec![attr_ints("perm", &[1, 0, 2])],
    );
    b = node(b, "Reshape", &["ctx_t", "model_shape"], "ctx", vec![]);
    b = node(b, "MatMul", &["ctx", "wo"], "o_mm", vec![]);
    b = node(b, "Add", &["o_mm", "bo"], "attn", vec![]);
    b = node(b, "Add", &["x", "attn"], "res1", vec![]);
    let ln = |b: OnnxBuilder, x: &str, g: &str, beta: &str, out: &str| {
        node(
            b,
            "LayerNormalization",
            &[x, g, beta],
            out,
            vec![attr_i("axis", -1), attr_f("epsilon", 1e-5)],
        )
    };
    b = ln(b, "res1", "ln1_g", "ln1_b", "ln1");
    b = node(b, "MatMul", &["ln1", "w1"], "f1_mm", vec![]);
    b = node(b, "Add", &["f1_mm", "b1"], "f1", vec![]);
    b = node(b, "Relu", &["f1"], "f1_act", vec![]);
    b = node(b, "MatMul", &["f1_act", "w2"], "f2_mm", vec![]);
    b = node(b, "Add", &["f2_mm", "b2"], "f2", vec![]);
    b = node(b, "Add", &["ln1", "f2"], "res2", vec![]);
    b = ln(b, "res2", "ln2_g", "ln2_b", "y");
    b.output("y", F32, &[seq(), Dim::Value(d_model as i64)])
        .build()
}
