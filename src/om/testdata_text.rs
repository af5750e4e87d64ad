//! Generated GE IR models for the tests and benches of the text dump and JSON views.
//!
//! Owns deterministic model builders only: no randomness, no IO, nothing used by the readers
//! or writers themselves. Public so that `benches/` can reuse the same inputs.

use std::collections::BTreeMap;

use crate::proto::ge_ir::{
    AttrDef, AttrGroupDef, AttrGroups, GraphDef, InputSourceDef, ModelDef, NamedAttrs, OpDef,
    OtherGroupDef, ReplacementDef, ShapeDef, ShapeEnvAttrGroupsDef, ShapeEnvSettingDef,
    SymbolCheckInfoDef, SymbolInfoDef, TensorDef, TensorDescAttrGroupsDef, TensorDescriptor,
    attr_def, attr_group_def,
};

fn attr(value: attr_def::Value) -> AttrDef {
    AttrDef { value: Some(value) }
}

fn int_list(values: &[i64]) -> AttrDef {
    attr(attr_def::Value::List(Box::new(attr_def::ListValue {
        i: values.to_vec(),
        val_type: attr_def::list_value::ListValueType::VtListInt as i32,
        ..Default::default()
    })))
}

/// A tensor descriptor as GE serializes one: dtype, layout, shape, device type and the
/// always-added format attrs.
pub fn tensor_desc(dtype: i32, dims: &[i64], layout: &str) -> TensorDescriptor {
    let mut attrs = BTreeMap::new();
    attrs.insert("format_for_int".to_owned(), attr(attr_def::Value::I(2)));
    attrs.insert(
        "origin_format".to_owned(),
        attr(attr_def::Value::S(layout.as_bytes().to_vec())),
    );
    attrs.insert(
        "origin_format_for_int".to_owned(),
        attr(attr_def::Value::I(2)),
    );
    attrs.insert("origin_shape".to_owned(), int_list(dims));
    attrs.insert(
        "origin_shape_initialized".to_owned(),
        attr(attr_def::Value::B(true)),
    );
    TensorDescriptor {
        dtype,
        shape: Some(ShapeDef { dim: dims.to_vec() }),
        layout: layout.to_owned(),
        attr: attrs,
        device_type: "NPU".to_owned(),
        real_dim_cnt: dims.len() as i64,
        ..Default::default()
    }
}

/// A tensor descriptor with every field set to a non-default value.
pub fn full_tensor_desc() -> TensorDescriptor {
    let mut other = BTreeMap::new();
    other.insert(
        "g".to_owned(),
        crate::proto::ge_ir::AttributeDef {
            value: Some(crate::proto::ge_ir::attribute_def::Value::Bt(vec![
                0, 1, 0xff,
            ])),
        },
    );
    TensorDescriptor {
        name: "td\u{e9}".to_owned(),
        dtype: 27,
        shape: Some(ShapeDef {
            dim: vec![-1, 3, -2, 1 << 40],
        }),
        layout: "NC1HWC0".to_owned(),
        attr: BTreeMap::from([("k".to_owned(), attr(attr_def::Value::I(-7)))]),
        attr_groups: Some(AttrGroups {
            other_group_def: Some(OtherGroupDef { attr: other }),
            attr_group_def: vec![
                AttrGroupDef {
                    attr_group: Some(attr_group_def::AttrGroup::TensorAttrGroup(
                        TensorDescAttrGroupsDef {
                            origin_symbol_shape: vec!["s0".into(), "s1 * 2".into()],
                            symbolic_value: vec!["v".into()],
                        },
                    )),
                },
                AttrGroupDef {
                    attr_group: Some(attr_group_def::AttrGroup::ShapeEnvAttrGroup(
                        ShapeEnvAttrGroupsDef {
                            symbol_to_value: BTreeMap::from([("s0".into(), 4), ("s1".into(), 0)]),
                            value_to_symbol: BTreeMap::from([
                                (
                                    4,
                                    SymbolInfoDef {
                                        symbols: vec!["s0".into()],
                                    },
                                ),
                                (-1, SymbolInfoDef::default()),
                            ]),
                            symbol_to_source: BTreeMap::from([(
                                "s0".into(),
                                InputSourceDef {
                                    input_data_idx: 1,
                                    dim_idx: 2,
                                },
                            )]),
                            replacements: BTreeMap::from([(
                                "s1".into(),
                                ReplacementDef {
                                    replace_expr: "s0".into(),
                                    rank: -3,
                                },
                            )]),
                            symbol_check_infos: vec![SymbolCheckInfoDef {
                                expr: "s0 > 1".into(),
                                file: "a.cc".into(),
                                line: 12,
                                dfx: "d".into(),
                            }],
                            symbol_assert_infos: vec![SymbolCheckInfoDef::default()],
                            shape_setting: Some(ShapeEnvSettingDef {
                                specialize_zero_one: true,
                                dynamic_mode: 2,
                            }),
                            unique_sym_id: u64::MAX,
                        },
                    )),
                },
            ],
        }),
        has_out_attr: true,
        size: 1 << 33,
        weight_size: 96,
        reuse_input: true,
        output_tensor: true,
        device_type: "CPU".to_owned(),
        input_tensor: true,
        real_dim_cnt: 4,
        reuse_input_index: 1,
        data_offset: 512,
        cmps_size: 9,
        cmps_tab: "tab".to_owned(),
        cmps_tab_offset: 3,
    }
}

/// A model that uses every `AttrDef` variant (and every list kind), every
/// `TensorDescriptor` field, attribute groups, subgraphs, control edges and bytes that are
/// not UTF-8, for round-trip tests.
pub fn every_variant_model() -> ModelDef {
    use attr_def::Value as V;
    let t = TensorDef {
        desc: Some(tensor_desc(4, &[2, 2], "ND")),
        data: vec![0, 1, 0x7f, 0x80, 0xc3, 0xa9, b'"', b'\\', b'\n', 0xff].into(),
    };
    let sub = GraphDef {
        name: "then_branch".to_owned(),
        input: vec!["sub_data:0".to_owned()],
        op: vec![OpDef {
            name: "sub_data".to_owned(),
            r#type: "Data".to_owned(),
            attr: BTreeMap::from([("_parent_node_index".to_owned(), attr(V::I(1)))]),
            ..Default::default()
        }],
        ..Default::default()
    };
    let named = NamedAttrs {
        name: "fn".to_owned(),
        attr: BTreeMap::from([("x".to_owned(), attr(V::F(0.1)))]),
    };
    let mut attrs = BTreeMap::new();
    attrs.insert(
        "a_s".to_owned(),
        attr(V::S(b"str \xe4\xb8\xad 'q'".to_vec())),
    );
    attrs.insert("b_i".to_owned(), attr(V::I(i64::MIN)));
    attrs.insert("c_f".to_owned(), attr(V::F(1e-5)));
    attrs.insert("c_f_inf".to_owned(), attr(V::F(f32::NEG_INFINITY)));
    attrs.insert("c_f_zero".to_owned(), attr(V::F(0.0)));
    attrs.insert("d_b".to_owned(), attr(V::B(false)));
    attrs.insert(
        "e_bt".to_owned(),
        attr(V::Bt(vec![0xde, 0xad, 0xbe, 0xef, 0])),
    );
    attrs.insert(
        "f_list".to_owned(),
        attr(V::List(Box::new(attr_def::ListValue {
            s: vec![b"x".to_vec(), vec![], vec![0xfe]],
            i: vec![1, -1, 0],
            f: vec![0.5, -2.25, 123456789.0, f32::INFINITY],
            b: vec![true, false],
            bt: vec![vec![0, 1]],
            td: vec![tensor_desc(1, &[1], "NCHW")],
            t: vec![t.clone()],
            g: vec![sub.clone()],
            na: vec![named.clone()],
            dt: vec![0, 9, 28],
            val_type: attr_def::list_value::ListValueType::VtListDataType as i32,
        }))),
    );
    attrs.insert("g_func".to_owned(), attr(V::Func(Box::new(named))));
    attrs.insert("h_td".to_owned(), attr(V::Td(Box::new(full_tensor_desc()))));
    attrs.insert("i_t".to_owned(), attr(V::T(Box::new(t))));
    attrs.insert("j_g".to_owned(), attr(V::G(Box::new(sub.clone()))));
    attrs.insert(
        "k_lli".to_owned(),
        attr(V::ListListInt(Box::new(attr_def::ListListInt {
            list_list_i: vec![
                attr_def::list_list_int::ListInt { list_i: vec![1, 2] },
                attr_def::list_list_int::ListInt { list_i: vec![] },
            ],
        }))),
    );
    attrs.insert("l_dt".to_owned(), attr(V::Dt(0)));
    attrs.insert(
        "m_llf".to_owned(),
        attr(V::ListListFloat(Box::new(attr_def::ListListFloat {
            list_list_f: vec![attr_def::list_list_float::ListFloat {
                list_f: vec![1.5, 1e-7],
            }],
        }))),
    );
    attrs.insert("n_expr".to_owned(), attr(V::Expression(b"s0 + 1".to_vec())));
    attrs.insert("o_empty".to_owned(), AttrDef::default());
    attrs.insert("".to_owned(), attr(V::I(0)));
    let op = OpDef {
        name: "if0".to_owned(),
        r#type: "If".to_owned(),
        input: vec!["data:0".to_owned(), String::new(), "other:-1".to_owned()],
        attr: attrs,
        attr_groups: Some(AttrGroups::default()),
        has_out_attr: true,
        id: 3,
        stream_id: -1,
        input_name: vec!["cond".to_owned()],
        src_name: vec!["data".to_owned()],
        src_index: vec![0],
        dst_name: vec!["out".to_owned()],
        dst_index: vec![1],
        input_i: vec![64],
        output_i: vec![128],
        workspace: vec![256],
        workspace_bytes: vec![32],
        is_input_const: vec![false, true],
        input_desc: vec![full_tensor_desc(), tensor_desc(7, &[], "ND")],
        output_desc: vec![tensor_desc(1, &[1, 3, 224, 224], "NCHW")],
        subgraph_name: vec!["then_branch".to_owned()],
    };
    ModelDef {
        name: "model".to_owned(),
        version: 2,
        custom_version: "v\u{1F600}".to_owned(),
        graph: vec![
            GraphDef {
                name: "root".to_owned(),
                input: vec!["data:0".to_owned()],
                output: vec!["if0:0".to_owned()],
                op: vec![op],
                attr: BTreeMap::from([("_dynamic_shape_partitioned".to_owned(), attr(V::B(true)))]),
                attr_groups: None,
            },
            sub,
        ],
        attr: BTreeMap::from([("version".to_owned(), attr(V::S(b"1".to_vec())))]),
        attr_groups: Some(AttrGroups {
            other_group_def: Some(OtherGroupDef::default()),
            attr_group_def: vec![],
        }),
    }
}

/// A dump-sized model: one graph of `ops` chained nodes, each with an input and an output
/// descriptor and the attrs GE adds to real nodes; 5,000 ops print to roughly 7 MB.
pub fn large_model(ops: usize) -> ModelDef {
    use attr_def::Value as V;
    let mut op = Vec::with_capacity(ops);
    for n in 0..ops {
        let name = format!("block_{}/conv_{n}/Conv2D", n / 10);
        let input = if n == 0 {
            vec![]
        } else {
            vec![format!("block_{}/conv_{}/Conv2D:0", (n - 1) / 10, n - 1)]
        };
        let mut attr = BTreeMap::new();
        attr.insert("_input_name_key".to_owned(), attr_s_list(&["x", "filter"]));
        attr.insert("_input_name_value".to_owned(), int_list(&[0, 1]));
        attr.insert("dilations".to_owned(), int_list(&[1, 1, 1, 1]));
        attr.insert("pads".to_owned(), int_list(&[0, 0, 1, 1]));
        attr.insert("data_format".to_owned(), self::attr(V::S(b"NCHW".to_vec())));
        attr.insert("epsilon".to_owned(), self::attr(V::F(1e-5)));
        attr.insert("T".to_owned(), self::attr(V::Dt(0)));
        attr.insert("_op_id".to_owned(), self::attr(V::I(n as i64)));
        if n % 50 == 0 {
            let data: Vec<u8> = (0..256u32).map(|i| (i * 7 + n as u32) as u8).collect();
            attr.insert(
                "value".to_owned(),
                self::attr(V::T(Box::new(TensorDef {
                    desc: Some(tensor_desc(4, &[256], "ND")),
                    data: data.into(),
                }))),
            );
        }
        op.push(OpDef {
            name,
            r#type: "Conv2D".to_owned(),
            input,
            attr,
            id: n as i64,
            input_desc: vec![tensor_desc(1, &[1, 64, 56, 56], "NCHW")],
            output_desc: vec![tensor_desc(1, &[1, 64, 56, 56], "NCHW")],
            ..Default::default()
        });
    }
    ModelDef {
        graph: vec![GraphDef {
            name: "large_graph".to_owned(),
            op,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn attr_s_list(values: &[&str]) -> AttrDef {
    attr(attr_def::Value::List(Box::new(attr_def::ListValue {
        s: values.iter().map(|s| s.as_bytes().to_vec()).collect(),
        val_type: attr_def::list_value::ListValueType::VtListString as i32,
        ..Default::default()
    })))
}

/// One op of a GE graph dump, built for tests the way `DUMP_GE_GRAPH` writes ops at a
/// build stage: inputs as `"src:index"` strings, descriptors with GE's always-added
/// format attrs, and whatever attributes a stage adds (`_ge_attr_op_kernel_lib_name`,
/// `peerIndex`, ...).
#[derive(Debug, Clone, Default)]
pub struct DumpOp(pub OpDef);

impl DumpOp {
    pub fn new(name: &str, op_type: &str) -> Self {
        DumpOp(OpDef {
            name: name.to_owned(),
            r#type: op_type.to_owned(),
            ..Default::default()
        })
    }
    /// A data input, `"src:index"` (or `""` for an unconnected one).
    pub fn input(mut self, src: &str) -> Self {
        self.0.input.push(src.to_owned());
        self
    }
    pub fn attr_i(mut self, key: &str, v: i64) -> Self {
        self.0
            .attr
            .insert(key.to_owned(), attr(attr_def::Value::I(v)));
        self
    }
    pub fn attr_s(mut self, key: &str, v: &str) -> Self {
        self.0.attr.insert(
            key.to_owned(),
            attr(attr_def::Value::S(v.as_bytes().to_vec())),
        );
        self
    }
    pub fn attr_ints(mut self, key: &str, v: &[i64]) -> Self {
        self.0.attr.insert(key.to_owned(), int_list(v));
        self
    }
    /// A list of strings (`_datadump_original_op_names`, say).
    pub fn attr_strs(mut self, key: &str, v: &[&str]) -> Self {
        let list = attr_def::ListValue {
            s: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
            val_type: attr_def::list_value::ListValueType::VtListString as i32,
            ..Default::default()
        };
        self.0
            .attr
            .insert(key.to_owned(), attr(attr_def::Value::List(Box::new(list))));
        self
    }
    pub fn attr_f(mut self, key: &str, v: f32) -> Self {
        self.0
            .attr
            .insert(key.to_owned(), attr(attr_def::Value::F(v)));
        self
    }
    /// A named attribute (`NamedAttrs`, as GE stores Aipp's `aipp` configuration) of
    /// `members`.
    pub fn attr_named(mut self, key: &str, members: Vec<(&str, attr_def::Value)>) -> Self {
        let named = NamedAttrs {
            name: String::new(),
            attr: members
                .into_iter()
                .map(|(k, v)| (k.to_owned(), attr(v)))
                .collect(),
        };
        self.0
            .attr
            .insert(key.to_owned(), attr(attr_def::Value::Func(Box::new(named))));
        self
    }
    pub fn in_desc(mut self, d: TensorDescriptor) -> Self {
        self.0.input_desc.push(d);
        self
    }
    pub fn out_desc(mut self, d: TensorDescriptor) -> Self {
        self.0.output_desc.push(d);
        self
    }
    /// A Const's `value`: `data` may be empty, as in a dump written without weights.
    pub fn value(mut self, desc: TensorDescriptor, data: Vec<u8>) -> Self {
        let t = TensorDef {
            desc: Some(desc),
            data: data.into(),
        };
        self.0
            .attr
            .insert("value".to_owned(), attr(attr_def::Value::T(Box::new(t))));
        self
    }
}

/// A float32 (`DT_FLOAT`) ND descriptor of `dims`, origin shape the same.
pub fn f32_desc(dims: &[i64]) -> TensorDescriptor {
    tensor_desc(1, dims, "ND")
}

/// A descriptor in storage format `layout` (`format_for_int` = `format`) of `dims`, for a
/// tensor whose origin format is `origin` with shape `origin_dims`: what GE writes once
/// it has chosen a device format for a tensor.
pub fn formatted_desc(
    dtype: i32,
    dims: &[i64],
    layout: &str,
    format: i64,
    origin: (&str, i64),
    origin_dims: &[i64],
) -> TensorDescriptor {
    let mut d = tensor_desc(dtype, dims, layout);
    d.attr.insert(
        "format_for_int".to_owned(),
        attr(attr_def::Value::I(format)),
    );
    d.attr.insert(
        "origin_format".to_owned(),
        attr(attr_def::Value::S(origin.0.as_bytes().to_vec())),
    );
    d.attr.insert(
        "origin_format_for_int".to_owned(),
        attr(attr_def::Value::I(origin.1)),
    );
    d.attr
        .insert("origin_shape".to_owned(), int_list(origin_dims));
    d
}

/// The descriptor GE writes for an optional input left unconnected: layout
/// `FORMAT_RESERVED`, no data type, no shape.
pub fn reserved_desc() -> TensorDescriptor {
    let mut d = tensor_desc(0, &[], "FORMAT_RESERVED");
    d.attr
        .insert("format_for_int".to_owned(), attr(attr_def::Value::I(40)));
    d.attr.insert(
        "origin_format".to_owned(),
        attr(attr_def::Value::S(b"RESERVED".to_vec())),
    );
    d.attr.insert(
        "origin_format_for_int".to_owned(),
        attr(attr_def::Value::I(40)),
    );
    d
}

/// A dump of one graph named `graph` (no model name, as `DUMP_GE_GRAPH` writes it).
pub fn dump_model(graph: &str, ops: Vec<DumpOp>) -> ModelDef {
    ModelDef {
        graph: vec![GraphDef {
            name: graph.to_owned(),
            op: ops.into_iter().map(|o| o.0).collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}
