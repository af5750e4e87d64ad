//! A synthetic GE ComputeGraph shaped like a real one, for benchmarks.

use rt2::om::DataType;
use rt2::proto::ge_ir::{
    AttrDef, GraphDef, ModelDef, OpDef, ShapeDef, TensorDescriptor, attr_def::ListValue,
    attr_def::Value,
};
use std::collections::BTreeMap;
fn attr_s(s: &str) -> AttrDef {
    AttrDef {
        value: Some(Value::S(s.as_bytes().to_vec())),
    }
}
fn attr_i(i: i64) -> AttrDef {
    AttrDef {
        value: Some(Value::I(i)),
    }
}
fn attr_ints(v: &[i64]) -> AttrDef {
    AttrDef {
        value: Some(Value::List(Box::new(ListValue {
            i: v.to_vec(),
            val_type: 2,
            ..Default::default()
        }))),
    }
}

/// A tensor descriptor as GE serializes one (`GeTensorDescAsProto`): dtype, shape, layout
/// and the always-present format/origin attributes.
fn desc(dims: &[i64]) -> TensorDescriptor {
    let mut attr = BTreeMap::new();
    attr.insert("origin_format".to_string(), attr_s("NCHW"));
    attr.insert("origin_format_for_int".to_string(), attr_i(0));
    attr.insert("format_for_int".to_string(), attr_i(0));
    attr.insert(
        "origin_shape_initialized".to_string(),
        AttrDef {
            value: Some(Value::B(true)),
        },
    );
    attr.insert("origin_shape".to_string(), attr_ints(dims));
    TensorDescriptor {
        dtype: DataType::Float32.to_proto(),
        shape: Some(ShapeDef { dim: dims.to_vec() }),
        layout: "NCHW".into(),
        attr,
        device_type: "NPU".into(),
        size: dims.iter().product::<i64>() * 4,
        real_dim_cnt: dims.len() as i64,
        ..Default::default()
    }
}

/// A GE ComputeGraph of `n` nodes shaped like a real one: a Data node, then a long run of
/// ops each reading the previous two outputs, with GE-style descriptors and op attributes.
pub fn ge_graph(n: usize) -> ModelDef {
    let dims = [1, 64, 56, 56];
    let mut ops = Vec::with_capacity(n + 2);
    let mut data = OpDef {
        name: "input".into(),
        r#type: "Data".into(),
        input: vec![String::new()],
        ..Default::default()
    };
    data.attr.insert("index".into(), attr_i(0));
    data.input_desc.push(desc(&dims));
    data.output_desc.push(desc(&dims));
    ops.push(data);
    for i in 0..n {
        let prev = ops
            .last()
            .map(|o: &OpDef| o.name.clone())
            .unwrap_or_default();
        let prev2 = if i >= 2 {
            format!("op_{}", i - 2)
        } else {
            "input".to_string()
        };
        let ty = ["Add", "Relu", "Mul", "Conv2D"][i % 4];
        let mut op = OpDef {
            name: format!("op_{i}"),
            r#type: ty.into(),
            input: vec![format!("{prev}:0"), format!("{prev2}:0")],
            id: i as i64 + 1,
            stream_id: 0,
            input_desc: vec![desc(&dims), desc(&dims)],
            output_desc: vec![desc(&dims)],
            input_name: vec!["x1".into(), "x2".into()],
            ..Default::default()
        };
        op.attr.insert("_input_name_key".into(), attr_ints(&[0, 1]));
        op.attr.insert(
            "_kernelname".into(),
            attr_s(&format!("te_{}_{i:08x}", ty.to_lowercase())),
        );
        op.attr.insert("imply_type".into(), attr_i(1));
        ops.push(op);
    }
    let last = ops.last().map(|o| o.name.clone()).unwrap_or_default();
    ops.push(OpDef {
        name: "out".into(),
        r#type: "NetOutput".into(),
        input: vec![format!("{last}:0")],
        input_desc: vec![desc(&dims)],
        ..Default::default()
    });
    ModelDef {
        name: "bench".into(),
        version: 2,
        graph: vec![GraphDef {
            name: "bench".into(),
            input: vec!["input:0".into()],
            output: vec![format!("{last}:0")],
            op: ops,
            ..Default::default()
        }],
        ..Default::default()
    }
}
