//! The plugins' conversions, case by case, and the docs table kept current.

use super::*;

fn node<'a>(
    opset: i64,
    attrs: &'a BTreeMap<String, AttrDef>,
    inputs: &'a [Option<ValueType>],
    outputs: &'a [String],
) -> Node<'a> {
    Node {
        opset,
        attrs,
        inputs,
        outputs,
    }
}

fn ints(m: &Mapped, name: &str) -> Vec<i64> {
    ints_attr(&m.attrs, name).unwrap().to_vec()
}

fn tensor(dims: &[i64]) -> Option<ValueType> {
    Some(ValueType {
        dtype: Some(DataType::Float32),
        shape: Shape::known(dims),
    })
}

/// docs/ONNX_IMPORT.md carries [`table`] between its plugin markers; `RT2_BLESS=1`
/// rewrites it.
#[test]
fn plugin_table_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ONNX_IMPORT.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = ("<!-- plugins:begin -->\n", "<!-- plugins:end -->");
    let a = doc.find(begin).expect("begin marker") + begin.len();
    let b = doc.find(end).expect("end marker");
    let want = format!("{}{}", &doc[..a], table()) + &doc[b..];
    if std::env::var_os("RT2_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    assert!(
        doc == want,
        "docs/ONNX_IMPORT.md's plugin table is stale: RT2_BLESS=1"
    );
}

#[test]
fn conv_becomes_conv2d_with_ge_lists() {
    let attrs = BTreeMap::from([
        ("kernel_shape".to_string(), attr_ints(&[3, 5])),
        ("strides".to_string(), attr_ints(&[2, 3])),
        ("dilations".to_string(), attr_ints(&[1, 2])),
        // ONNX: top, left, bottom, right.
        ("pads".to_string(), attr_ints(&[1, 2, 3, 4])),
        ("group".to_string(), attr_i(2)),
        ("auto_pad".to_string(), attr_s("NOTSET")),
    ]);
    let inputs = [tensor(&[1, 4, 9, 9]), tensor(&[6, 2, 3, 5])];
    let m = map("Conv", &node(11, &attrs, &inputs, &["y".into()])).unwrap();
    assert_eq!(m.op_type, "Conv2D");
    assert_eq!(ints(&m, "strides"), [1, 1, 2, 3]);
    assert_eq!(ints(&m, "dilations"), [1, 1, 1, 2]);
    // GE: top, bottom, left, right.
    assert_eq!(ints(&m, "pads"), [1, 3, 2, 4]);
    assert_eq!(int_attr(&m.attrs, "groups"), Some(2));
    assert_eq!(str_attr(&m.attrs, "data_format"), Some("NCHW"));
    assert!(!m.onnx_meaning);
    // A 1-D kernel runs as a 2-D one over [N, C, L, 1]: x and the weight unsqueezed
    // at axis 3 first, the result squeezed after.
    let one_d = BTreeMap::from([
        ("kernel_shape".to_string(), attr_ints(&[3])),
        ("strides".to_string(), attr_ints(&[2])),
        ("pads".to_string(), attr_ints(&[1, 0])),
    ]);
    let m = map("Conv", &node(11, &one_d, &inputs, &[])).unwrap();
    assert_eq!(ints(&m, "strides"), [1, 1, 2, 1]);
    assert_eq!(ints(&m, "pads"), [1, 0, 0, 0]);
    let before: Vec<_> = m.before.iter().map(|(i, e)| (*i, e.op_type)).collect();
    assert_eq!(before, [(0, "Unsqueeze"), (1, "Unsqueeze")]);
    assert_eq!(ints_attr(&m.before[1].1.attrs, "axes"), Some(&[3][..]));
    assert_eq!(m.after[0].op_type, "Squeeze");
    assert_eq!(ints_attr(&m.after[0].attrs, "axis"), Some(&[3][..]));
    // A 3-D kernel keeps ONNX's Conv; so does an opset before GE's first.
    let three_d = BTreeMap::from([("kernel_shape".to_string(), attr_ints(&[3, 3, 3]))]);
    assert!(map("Conv", &node(11, &three_d, &inputs, &[])).is_none());
    assert!(map("Conv", &node(7, &attrs, &inputs, &[])).is_none());
    // Later opsets than GE registers take the newest registration.
    assert!(map("Conv", &node(22, &attrs, &inputs, &[])).is_some());
}

/// Gemm is MatMulV2 with the transposes, then `+ C` or `alpha AB + beta C`.
#[test]
fn gemm_becomes_matmul_and_its_bias_ops() {
    let f = |k: &str, v: f32| (k.to_string(), super::super::tensor::attr_f(v));
    let ab = [tensor(&[3, 4]), tensor(&[5, 4]), tensor(&[3, 5])];
    let plain = BTreeMap::from([("transB".to_string(), attr_i(1))]);
    let m = map("Gemm", &node(13, &plain, &ab, &[])).unwrap();
    assert_eq!(m.op_type, "MatMulV2");
    assert_eq!(m.inputs, Some(vec![0, 1]));
    assert!(matches!(
        m.attrs["transpose_x2"].value,
        Some(Value::B(true))
    ));
    assert!(matches!(
        m.attrs["transpose_x1"].value,
        Some(Value::B(false))
    ));
    let ops: Vec<_> = m
        .after
        .iter()
        .map(|e| (e.op_type, e.inputs.clone()))
        .collect();
    assert_eq!(ops, [("Add", vec![Operand::Mapped, Operand::Input(2)])]);

    let scaled = BTreeMap::from([f("alpha", 0.5), f("beta", 2.0)]);
    let m = map("Gemm", &node(13, &scaled, &ab, &[])).unwrap();
    let ops: Vec<_> = m
        .after
        .iter()
        .map(|e| (e.op_type, e.inputs.clone()))
        .collect();
    assert_eq!(
        ops,
        [
            ("Muls", vec![Operand::Mapped]),
            ("Muls", vec![Operand::Input(2)]),
            ("Add", vec![Operand::After(0), Operand::After(1)]),
        ]
    );
    let value = |k: usize| m.after[k].attrs["value"].value.clone();
    assert_eq!(value(0), Some(Value::F(0.5)));
    assert_eq!(value(1), Some(Value::F(2.0)));

    // No C: the MatMulV2 alone, unless alpha scales it (GE would drop alpha).
    let m = map("Gemm", &node(13, &plain, &ab[..2], &[])).unwrap();
    assert!(m.after.is_empty());
    assert!(map("Gemm", &node(13, &scaled, &ab[..2], &[])).is_none());
    let ints = [
        Some(ValueType {
            dtype: Some(DataType::Int32),
            shape: Shape::known(&[2, 2]),
        }),
        tensor(&[2, 2]),
    ];
    assert!(map("Gemm", &node(13, &plain, &ints, &[])).is_none());
}

/// Clip before opset 11 takes its bounds as attributes: a Cast to float32 feeds a
/// ClipByValue with the bounds as Consts, for float32 inputs only. From opset 11 the
/// other plugin applies.
#[test]
fn clip_before_opset_11_casts_and_clips() {
    let bounds = BTreeMap::from([("min".to_string(), super::super::tensor::attr_f(-1.5))]);
    let x = [tensor(&[4])];
    let m = map("Clip", &node(9, &bounds, &x, &[])).unwrap();
    assert_eq!(m.op_type, "ClipByValue");
    assert_eq!(m.before.len(), 1);
    assert_eq!(m.before[0].0, 0);
    assert_eq!(m.before[0].1.op_type, "Cast");
    assert_eq!(
        int_attr(&m.before[0].1.attrs, "dst_type"),
        Some(DataType::Float32.to_ge())
    );
    assert_eq!(m.consts[0].1.data[..], (-1.5f32).to_le_bytes());
    assert_eq!(m.consts[1].1.data[..], f32::MAX.to_le_bytes());
    let half = [Some(ValueType {
        dtype: Some(DataType::Float16),
        shape: Shape::known(&[4]),
    })];
    assert!(map("Clip", &node(9, &bounds, &half, &[])).is_none());
    assert!(
        map("Clip", &node(6, &bounds, &x, &[])).is_none(),
        "before GE registers it"
    );
    let m = map(
        "Clip",
        &node(11, &bounds, &[tensor(&[4]), tensor(&[])], &[]),
    )
    .unwrap();
    assert_eq!(m.op_type, "Maximum");
    assert!(m.before.is_empty());
}

#[test]
fn pools_map_only_where_exact() {
    let mut attrs = BTreeMap::from([
        ("kernel_shape".to_string(), attr_ints(&[2, 2])),
        ("pads".to_string(), attr_ints(&[0, 1, 0, 1])),
        ("auto_pad".to_string(), attr_s("NOTSET")),
        ("ceil_mode".to_string(), attr_i(1)),
        ("count_include_pad".to_string(), attr_i(1)),
    ]);
    let x = [tensor(&[1, 1, 5, 5])];
    let y = ["y".to_string()];
    let m = map("AveragePool", &node(11, &attrs, &x, &y)).unwrap();
    assert_eq!(m.op_type, "AvgPoolV2");
    assert_eq!(ints(&m, "ksize"), [1, 1, 2, 2]);
    assert_eq!(ints(&m, "pads"), [0, 0, 1, 1]);
    assert_eq!(str_attr(&m.attrs, "padding_mode"), Some("CALCULATED"));
    assert!(matches!(m.attrs["ceil_mode"].value, Some(Value::B(true))));
    assert!(matches!(m.attrs["exclusive"].value, Some(Value::B(false))));
    // MaxPool's indices output read: GE refuses it, rt2 keeps ONNX's MaxPool.
    let both = ["y".to_string(), "i".to_string()];
    assert_eq!(
        map("MaxPool", &node(12, &attrs, &x, &y)).unwrap().op_type,
        "MaxPoolV3"
    );
    assert!(map("MaxPool", &node(12, &attrs, &x, &both)).is_none());
    attrs.insert("auto_pad".into(), attr_s("SAME_LOWER"));
    assert!(map("MaxPool", &node(12, &attrs, &x, &y)).is_none());
    attrs.insert("auto_pad".into(), attr_s("NOTSET"));
    attrs.insert("dilations".into(), attr_ints(&[2, 2]));
    assert!(map("MaxPool", &node(12, &attrs, &x, &y)).is_none());
    // A 1-D MaxPool: GE's `trans_2d`, MaxPoolV3 over [N, C, L, 1] between an Unsqueeze
    // and a Squeeze at axis 3; dilated, it keeps ONNX's.
    let mut one_d = BTreeMap::from([
        ("kernel_shape".to_string(), attr_ints(&[3])),
        ("strides".to_string(), attr_ints(&[2])),
        ("pads".to_string(), attr_ints(&[1, 2])),
    ]);
    let x1 = [tensor(&[1, 2, 9])];
    let m = map("MaxPool", &node(12, &one_d, &x1, &y)).unwrap();
    assert_eq!(m.op_type, "MaxPoolV3");
    assert_eq!(ints(&m, "ksize"), [1, 1, 3, 1]);
    assert_eq!(ints(&m, "strides"), [1, 1, 2, 1]);
    assert_eq!(ints(&m, "pads"), [1, 2, 0, 0]);
    let before: Vec<_> = m.before.iter().map(|(i, e)| (*i, e.op_type)).collect();
    assert_eq!(before, [(0, "Unsqueeze")]);
    assert_eq!(ints_attr(&m.before[0].1.attrs, "axes"), Some(&[3][..]));
    assert_eq!(m.after.len(), 1);
    assert_eq!(m.after[0].op_type, "Squeeze");
    assert_eq!(m.after[0].inputs, [Operand::Mapped]);
    assert_eq!(ints_attr(&m.after[0].attrs, "axis"), Some(&[3][..]));
    one_d.insert("dilations".into(), attr_ints(&[2]));
    assert!(map("MaxPool", &node(12, &one_d, &x1, &y)).is_none());
}

#[test]
fn axes_and_perm_become_const_inputs() {
    let attrs = BTreeMap::from([("perm".to_string(), attr_ints(&[0, 2, 1]))]);
    let m = map("Transpose", &node(13, &attrs, &[tensor(&[2, 3, 4])], &[])).unwrap();
    assert_eq!(m.op_type, "Transpose");
    let (name, perm) = &m.consts[0];
    assert_eq!(*name, "perm");
    let values: Vec<i32> = perm
        .data
        .chunks(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(values, [0, 2, 1]);
    // No perm: GE refuses (reversed axes unsupported), ONNX's Transpose stays.
    assert!(
        map(
            "Transpose",
            &node(13, &BTreeMap::new(), &[tensor(&[2, 3])], &[])
        )
        .is_none()
    );

    let axes = BTreeMap::from([
        ("axes".to_string(), attr_ints(&[1])),
        ("keepdims".to_string(), attr_i(0)),
    ]);
    let x = [tensor(&[2, 3])];
    let m = map("ReduceMean", &node(13, &axes, &x, &[])).unwrap();
    assert!(matches!(m.attrs["keep_dims"].value, Some(Value::B(false))));
    assert_eq!(m.consts[0].1.data[..], 1i32.to_le_bytes());
    // GE's ReduceMax plugin drops an opset-13 axes attribute: kept as ONNX.
    assert!(map("ReduceMax", &node(13, &axes, &x, &[])).is_none());
    assert!(map("ReduceMax", &node(11, &axes, &x, &[])).is_some());
}

#[test]
fn conv_transpose_puts_input_size_first() {
    let attrs = BTreeMap::from([
        ("strides".to_string(), attr_ints(&[2, 2])),
        ("pads".to_string(), attr_ints(&[1, 0, 1, 0])),
        ("output_padding".to_string(), attr_ints(&[1, 0])),
        ("group".to_string(), attr_i(2)),
    ]);
    let x = [tensor(&[1, 4, 5, 5]), tensor(&[4, 3, 3, 3])];
    let m = map("ConvTranspose", &node(13, &attrs, &x, &[])).unwrap();
    assert_eq!(m.op_type, "Conv2DTranspose");
    assert_eq!(ints(&m, "strides"), [1, 1, 2, 2]);
    assert_eq!(ints(&m, "pads"), [1, 1, 0, 0]);
    assert_eq!(ints(&m, "output_padding"), [0, 0, 1, 0]);
    assert_eq!(int_attr(&m.attrs, "groups"), Some(2));
    assert_eq!(m.leading_consts[0].0, "input_size");
    assert_eq!(m.leading_consts[0].1.data[..], [0u8; 32]);
    let shaped = BTreeMap::from([("output_shape".to_string(), attr_ints(&[10, 10]))]);
    assert!(map("ConvTranspose", &node(13, &shaped, &x, &[])).is_none());
    let same = BTreeMap::from([("auto_pad".to_string(), attr_s("SAME_UPPER"))]);
    assert!(map("ConvTranspose", &node(13, &same, &x, &[])).is_none());
}

#[test]
fn pad_arg_max_fill_and_sum() {
    let x = [tensor(&[2, 3]), tensor(&[4]), tensor(&[])];
    let reflect = BTreeMap::from([("mode".to_string(), attr_s("reflect"))]);
    let m = map("Pad", &node(13, &reflect, &x, &[])).unwrap();
    assert_eq!(m.op_type, "PadV3");
    assert!(matches!(
        m.attrs["paddings_contiguous"].value,
        Some(Value::B(false))
    ));
    assert_eq!(str_attr(&m.attrs, "mode"), Some("reflect"));
    // Opset 10's pads attribute: GE builds a subgraph, the node stays ONNX's.
    assert!(map("Pad", &node(10, &reflect, &x[..1], &[])).is_none());
    let wrap = BTreeMap::from([("mode".to_string(), attr_s("wrap"))]);
    assert!(map("Pad", &node(18, &wrap, &x, &[])).is_none());

    let keep0 = BTreeMap::from([
        ("axis".to_string(), attr_i(-1)),
        ("keepdims".to_string(), attr_i(0)),
    ]);
    let m = map("ArgMax", &node(13, &keep0, &x[..1], &[])).unwrap();
    assert_eq!(m.op_type, "ArgMaxV2");
    assert_eq!(m.consts[0].0, "dimension");
    assert_eq!(m.consts[0].1.data[..], (-1i32).to_le_bytes());
    assert!(m.after.is_empty());
    // keepdims 1 (the default): GE's ExpandDims after it, on the same axis.
    let m = map("ArgMax", &node(13, &BTreeMap::new(), &x[..1], &[])).unwrap();
    assert_eq!(m.after.len(), 1);
    assert_eq!(m.after[0].op_type, "ExpandDims");
    assert_eq!(m.after[0].inputs[0], Operand::Mapped);
    assert!(
        matches!(&m.after[0].inputs[1], Operand::Const("axis", t) if t.data[..] == 0i32.to_le_bytes())
    );

    let m = map(
        "ConstantOfShape",
        &node(13, &BTreeMap::new(), &x[1..2], &[]),
    )
    .unwrap();
    assert_eq!(m.op_type, "Fill");
    assert_eq!(m.consts[0].1.data[..], 0f32.to_le_bytes());
    let shape = m.consts[0].1.desc.as_ref().and_then(|d| d.shape.as_ref());
    assert!(shape.is_none_or(|s| s.dim.is_empty()), "a scalar");

    let m = map("Sum", &node(13, &BTreeMap::new(), &x, &[])).unwrap();
    assert_eq!(m.op_type, "AccumulateNV2");
    assert_eq!(int_attr(&m.attrs, "N"), Some(3));
}

#[test]
fn clip_softmax_and_cast() {
    let x = tensor(&[4]);
    let only_max = [x.clone(), None, x.clone()];
    let m = map("Clip", &node(13, &BTreeMap::new(), &only_max, &[])).unwrap();
    assert_eq!((m.op_type, m.inputs), ("Minimum", Some(vec![0, 2])));
    assert!(
        map(
            "Clip",
            &node(13, &BTreeMap::new(), std::slice::from_ref(&x), &[])
        )
        .is_none()
    );

    // Before opset 13 Softmax flattens at axis: only the last axis maps.
    let axis1 = BTreeMap::from([("axis".to_string(), attr_i(1))]);
    let rank3 = [tensor(&[2, 3, 4])];
    assert!(map("Softmax", &node(11, &axis1, &rank3, &[])).is_none());
    let m = map("Softmax", &node(13, &axis1, &rank3, &[])).unwrap();
    assert_eq!((m.op_type, ints(&m, "axes")), ("SoftmaxV2", vec![1]));

    let to_half = BTreeMap::from([("to".to_string(), attr_i(10))]);
    let m = map("Cast", &node(13, &to_half, std::slice::from_ref(&x), &[])).unwrap();
    assert_eq!(
        int_attr(&m.attrs, "dst_type"),
        Some(DataType::Float16.to_ge())
    );
    let to_fp8 = BTreeMap::from([("to".to_string(), attr_i(17))]);
    assert!(map("Cast", &node(19, &to_fp8, &[x], &[])).is_none());
}

/// LayerNormalization is GE's LayerNorm with its parameters from the same axis, a Const
/// 0 beta without B, three outputs; a node whose Mean or InvStdDev is read gets GE's
/// Casts and Rsqrt(Adds(variance, epsilon)) after, for a float32 X only.
#[test]
fn layer_normalization_becomes_layer_norm() {
    let attrs = BTreeMap::from([("axis".to_string(), attr_i(-2))]);
    let x = [tensor(&[2, 3, 4]), tensor(&[3, 4])];
    let m = map("LayerNormalization", &node(17, &attrs, &x, &["y".into()])).unwrap();
    assert_eq!(m.op_type, "LayerNorm");
    assert_eq!(int_attr(&m.attrs, "begin_norm_axis"), Some(-2));
    assert_eq!(int_attr(&m.attrs, "begin_params_axis"), Some(-2));
    assert_eq!(m.attrs["epsilon"].value, Some(Value::F(1e-5)));
    assert_eq!(m.inputs, Some(vec![0, 1]));
    assert_eq!(m.consts[0].0, "beta");
    assert_eq!(m.consts[0].1.data[..], 0f32.to_le_bytes());
    assert_eq!(m.outputs, Some(3));
    assert!(m.after.is_empty() && m.node_outputs.is_none());
    let unread = ["y".to_string(), String::new(), String::new()];
    let m = map("LayerNormalization", &node(17, &attrs, &x, &unread)).unwrap();
    assert!(m.after.is_empty() && m.node_outputs.is_none());

    let read_mean = ["y".to_string(), "mean".to_string()];
    let m = map("LayerNormalization", &node(17, &attrs, &x, &read_mean)).unwrap();
    let ops: Vec<_> = m
        .after
        .iter()
        .map(|e| (e.op_type, e.inputs.clone()))
        .collect();
    assert_eq!(
        ops,
        [
            ("Adds", vec![Operand::MappedOutput(2)]),
            ("Rsqrt", vec![Operand::After(0)]),
            ("Cast", vec![Operand::After(1)]),
            ("Cast", vec![Operand::MappedOutput(1)]),
        ]
    );
    assert_eq!(m.after[0].attrs["value"].value, Some(Value::F(1e-5)));
    let float = DataType::Float32.to_ge();
    assert_eq!(int_attr(&m.after[2].attrs, "dst_type"), Some(float));
    assert_eq!(int_attr(&m.after[3].attrs, "dst_type"), Some(float));
    assert_eq!(
        m.node_outputs,
        Some(vec![
            Operand::MappedOutput(0),
            Operand::After(3),
            Operand::After(2)
        ])
    );
    // A float16 X: GE's mean and variance are float16 before the Casts; ONNX's are not.
    let half = [
        Some(ValueType {
            dtype: Some(DataType::Float16),
            shape: Shape::known(&[2, 3, 4]),
        }),
        tensor(&[3, 4]),
    ];
    let read_inv = ["y".to_string(), String::new(), "inv".to_string()];
    assert!(map("LayerNormalization", &node(17, &attrs, &half, &read_inv)).is_none());
    assert!(
        map(
            "LayerNormalization",
            &node(17, &attrs, &half, &["y".into()])
        )
        .is_some()
    );
}

/// LRN: GE's depth_radius from an odd size and TensorFlow's alpha (divided by the size);
/// an even size has no symmetric window and keeps ONNX's LRN.
#[test]
fn lrn_becomes_ge_lrn_for_odd_sizes() {
    let f = super::super::tensor::attr_f;
    let attrs = BTreeMap::from([
        ("size".to_string(), attr_i(5)),
        ("alpha".to_string(), f(0.0005)),
    ]);
    let x = [tensor(&[1, 8, 3, 3])];
    let m = map("LRN", &node(13, &attrs, &x, &[])).unwrap();
    assert_eq!(m.op_type, "LRN");
    assert_eq!(int_attr(&m.attrs, "depth_radius"), Some(2));
    assert_eq!(m.attrs["alpha"].value, Some(Value::F(0.0005 / 5.0)));
    assert_eq!(m.attrs["beta"].value, Some(Value::F(0.75)));
    assert_eq!(str_attr(&m.attrs, "norm_region"), Some("ACROSS_CHANNELS"));
    let even = BTreeMap::from([("size".to_string(), attr_i(4))]);
    assert!(map("LRN", &node(13, &even, &x, &[])).is_none());
}
