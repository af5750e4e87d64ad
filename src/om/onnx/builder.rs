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
