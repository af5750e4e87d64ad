//! Shape inference on attributes and values at the edge of 64 bits: every op family's
//! output sizes are computed in checked arithmetic, so an overflowing attribute is an
//! error naming the op, never a wrapped dim, a zero-sized output that hides the mistake,
//! a panic (debug builds check overflow) or an allocation the size of the address space.
//!
//! A table of one case per op family, then a property test that throws huge and negative
//! attributes at the window ops (Conv, ConvTranspose, the pools, ConvInteger), whose
//! arithmetic has the most steps.

use proptest::prelude::*;
use rt2::ops::{
    Attr, AttrMap, DType, HostTensor, InferCtx, OpError, OpRegistry, TensorMeta, UNKNOWN,
};

fn f32s(shape: &[i64]) -> TensorMeta {
    TensorMeta::new(DType::F32, shape)
}

fn i64s(v: &[i64]) -> HostTensor {
    HostTensor {
        dtype: DType::I64,
        shape: vec![v.len() as i64],
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn f32_values(v: &[f32]) -> HostTensor {
    HostTensor {
        dtype: DType::F32,
        shape: vec![v.len() as i64],
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn scalar_f64(v: f64) -> HostTensor {
    HostTensor {
        dtype: DType::F64,
        shape: vec![],
        data: v.to_le_bytes().to_vec().into(),
    }
}

/// The metas of known values: their own shape and dtype.
fn meta_of(t: &HostTensor) -> TensorMeta {
    TensorMeta::new(t.dtype, &t.shape)
}

/// Runs `op`'s checked inference ([`rt2::ops::OpSpec::infer_shapes`], what lowering, the
/// runtime and the host driver call).
fn infer(
    op: &str,
    inputs: &[TensorMeta],
    values: &[Option<&HostTensor>],
    attrs: &[(&str, Attr)],
    outputs: usize,
) -> Result<Vec<TensorMeta>, OpError> {
    let reg = OpRegistry::new();
    let spec = reg.get(op).unwrap_or_else(|| panic!("{op} is registered"));
    let attrs: AttrMap = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let mut values = values.to_vec();
    values.resize(inputs.len(), None);
    spec.infer_shapes(&InferCtx {
        op,
        inputs,
        values: &values,
        attrs: &attrs,
        outputs,
    })
}

/// Asserts inference fails with a message containing `want`.
#[track_caller]
fn refused(r: Result<Vec<TensorMeta>, OpError>, want: &str) {
    match r {
        Ok(m) => panic!("accepted: {m:?}; expected an error containing {want:?}"),
        Err(e) => assert!(e.to_string().contains(want), "{e}; expected {want:?}"),
    }
}

const BIG: i64 = 1 << 40;

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

#[test]
fn window_ops_refuse_windows_that_overflow_or_outgrow_the_input() {
    let (x, w) = (f32s(&[1, 1, 8, 8]), f32s(&[1, 1, 3, 3]));
    // A dilation of 2^40: the window is 2^41 + 1 wide, the input 8: not a [1, 1, 0, 0]
    // output, an error.
    refused(
        infer(
            "Conv",
            &[x.clone(), w.clone()],
            &[],
            &[("dilations", ints(&[BIG, BIG]))],
            1,
        ),
        "wider than the padded input",
    );
    refused(
        infer(
            "Conv",
            &[x.clone(), w.clone()],
            &[],
            &[("dilations", ints(&[i64::MAX, 1]))],
            1,
        ),
        "overflows",
    );
    refused(
        infer(
            "Conv",
            &[x.clone(), w.clone()],
            &[],
            &[("pads", ints(&[i64::MAX, 0, 1, 0]))],
            1,
        ),
        "overflows",
    );
    refused(
        infer(
            "Conv",
            &[x.clone(), w.clone()],
            &[],
            &[("kernel_shape", ints(&[3, 3, 3]))],
            1,
        ),
        "spatial dims need rank",
    );
    refused(
        infer(
            "MaxPool",
            std::slice::from_ref(&x),
            &[],
            &[
                ("kernel_shape", ints(&[2, 2])),
                ("strides", ints(&[i64::MAX, 1])),
                ("pads", ints(&[i64::MAX - 8, 0, 0, 0])),
                ("ceil_mode", Attr::Int(1)),
            ],
            2,
        ),
        "overflows",
    );
    refused(
        infer(
            "AveragePool",
            std::slice::from_ref(&x),
            &[],
            &[("kernel_shape", ints(&[BIG, 2]))],
            1,
        ),
        "wider than the padded input",
    );
    refused(
        infer(
            "ConvTranspose",
            &[x.clone(), w.clone()],
            &[],
            &[("strides", ints(&[1 << 62, 1]))],
            1,
        ),
        "overflows",
    );
    refused(
        infer(
            "ConvTranspose",
            &[x.clone(), w.clone()],
            &[],
            &[("pads", ints(&[100, 0, 100, 0]))],
            1,
        ),
        "would have",
    );
    refused(
        infer(
            "ConvTranspose",
            &[x.clone(), w.clone()],
            &[],
            &[("group", Attr::Int(i64::MAX))],
            1,
        ),
        "more bytes than 64 bits count",
    );
    let (xq, wq) = (
        TensorMeta::new(DType::U8, &[1, 1, 8, 8]),
        TensorMeta::new(DType::U8, &[1, 1, 3, 3]),
    );
    refused(
        infer(
            "ConvInteger",
            &[xq.clone(), wq.clone()],
            &[],
            &[("dilations", ints(&[BIG, 1]))],
            1,
        ),
        "wider than the padded input",
    );
    refused(
        infer(
            "ConvInteger",
            &[xq, wq],
            &[],
            &[("dilations", ints(&[i64::MAX, 1]))],
            1,
        ),
        "overflows",
    );
    // What fits still infers: an empty spatial dim gives an empty output dim.
    let ok = infer("Conv", &[f32s(&[1, 1, 0, 8]), w], &[], &[], 1).unwrap();
    assert_eq!(ok[0].shape.as_deref(), Some(&[1, 1, 0, 6][..]));
}

#[test]
fn repeats_pads_ranges_and_scales_that_overflow_are_errors() {
    let repeats = i64s(&[1 << 62, 4]);
    refused(
        infer(
            "Tile",
            &[f32s(&[4, 4]), meta_of(&repeats)],
            &[None, Some(&repeats)],
            &[],
            1,
        ),
        "overflow",
    );
    // Padded past i64, and cut below nothing.
    for pads in [[i64::MAX, 1], [-10, 0]] {
        let pads = i64s(&pads);
        refused(
            infer(
                "Pad",
                &[f32s(&[4]), meta_of(&pads)],
                &[None, Some(&pads)],
                &[],
                1,
            ),
            "is not a dim",
        );
    }
    let (start, limit, delta) = (scalar_f64(0.0), scalar_f64(1e300), scalar_f64(1.0));
    let m = meta_of(&start);
    refused(
        infer(
            "Range",
            &[m.clone(), m.clone(), m],
            &[Some(&start), Some(&limit), Some(&delta)],
            &[],
            1,
        ),
        "no element count",
    );
    let shape = i64s(&[BIG, BIG]);
    refused(
        infer(
            "Expand",
            &[f32s(&[1, BIG]), meta_of(&shape)],
            &[None, Some(&shape)],
            &[],
            1,
        ),
        "more bytes than 64 bits count",
    );
    let scales = f32_values(&[1.0, 1.0, 1e30, 1e30]);
    let empty = f32_values(&[]);
    refused(
        infer(
            "Resize",
            &[f32s(&[1, 1, 4, 4]), meta_of(&empty), meta_of(&scales)],
            &[None, Some(&empty), Some(&scales)],
            &[],
            1,
        ),
        "is not a dim",
    );
    let sizes = i64s(&[1, 1, -4, 4]);
    refused(
        infer(
            "Resize",
            &[
                f32s(&[1, 1, 4, 4]),
                meta_of(&empty),
                meta_of(&empty),
                meta_of(&sizes),
            ],
            &[None, Some(&empty), Some(&empty), Some(&sizes)],
            &[],
            1,
        ),
        "negative",
    );
    let depth = i64s(&[-5]);
    refused(
        infer(
            "OneHot",
            &[
                TensorMeta::new(DType::I64, &[3]),
                meta_of(&depth),
                f32s(&[2]),
            ],
            &[None, Some(&depth), None],
            &[],
            1,
        ),
        "negative",
    );
}

#[test]
fn shape_ops_count_in_checked_arithmetic() {
    refused(
        infer(
            "Concat",
            &[f32s(&[1 << 62]), f32s(&[1 << 62])],
            &[],
            &[("axis", Attr::Int(0))],
            1,
        ),
        "overflows",
    );
    refused(
        infer(
            "Flatten",
            &[f32s(&[1 << 32, 1 << 32, 1 << 32])],
            &[],
            &[("axis", Attr::Int(1))],
            1,
        ),
        "overflows",
    );
    refused(
        infer(
            "DepthToSpace",
            &[f32s(&[1, 16, 2, 2])],
            &[],
            &[("blocksize", Attr::Int(1 << 32))],
            1,
        ),
        "overflows",
    );
    refused(
        infer(
            "SpaceToDepth",
            &[f32s(&[1, 1 << 40, 2, 2])],
            &[],
            &[("blocksize", Attr::Int(1 << 20))],
            1,
        ),
        "overflows",
    );
    refused(
        infer(
            "Split",
            &[f32s(&[4])],
            &[],
            &[("num_outputs", Attr::Int(1_000_000_000_000))],
            2,
        ),
        "num_outputs",
    );
    // A step of i64::MIN has no negation; the slice is its first element.
    let (starts, ends, axes, steps) = (i64s(&[9]), i64s(&[-100]), i64s(&[0]), i64s(&[i64::MIN]));
    let m = meta_of(&starts);
    let out = infer(
        "Slice",
        &[f32s(&[10]), m.clone(), m.clone(), m.clone(), m],
        &[None, Some(&starts), Some(&ends), Some(&axes), Some(&steps)],
        &[],
        1,
    )
    .unwrap();
    assert_eq!(out[0].shape.as_deref(), Some(&[1][..]));
    // A shape input declared 2^40 long, value unknown: the rank is unknown, not 2^40
    // unknown dims spelled out.
    let out = infer(
        "ConstantOfShape",
        &[TensorMeta::new(DType::I64, &[BIG])],
        &[],
        &[],
        1,
    )
    .unwrap();
    assert_eq!(out[0].shape, None);
    let out = infer(
        "Reshape",
        &[f32s(&[4]), TensorMeta::new(DType::I64, &[BIG])],
        &[],
        &[],
        1,
    )
    .unwrap();
    assert_eq!(out[0].shape, None);
    let blocks = i64s(&[1 << 32, 1 << 32]);
    let image = i64s(&[4, 4]);
    refused(
        infer(
            "Col2Im",
            &[f32s(&[1, 4, 4]), meta_of(&image), meta_of(&blocks)],
            &[None, Some(&image), Some(&blocks)],
            &[],
            1,
        ),
        "overflows",
    );
}

/// Attribute values from small to the edge of `i64`, negative ones included.
fn edgy() -> impl Strategy<Value = i64> {
    prop_oneof![
        -3i64..12,
        Just(i64::MAX),
        Just(i64::MIN),
        Just(i64::MAX / 2),
        Just(1 << 40),
        Just(1 << 62),
        any::<i64>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Whatever the attributes, a window op's inference returns (no panic, no overflow),
    /// and what it accepts has non-negative dims whose byte count fits.
    #[test]
    fn window_ops_never_panic_and_what_they_accept_fits(
        op in prop::sample::select(vec!["Conv", "ConvTranspose", "MaxPool", "AveragePool", "ConvInteger"]),
        input in prop::collection::vec(prop_oneof![0i64..20, Just(UNKNOWN), Just(1i64 << 40)], 2),
        kernel in prop::collection::vec(edgy(), 2),
        strides in prop::collection::vec(edgy(), 2),
        dilations in prop::collection::vec(edgy(), 2),
        pads in prop::collection::vec(edgy(), 4),
        output_padding in prop::collection::vec(edgy(), 2),
        ceil in any::<bool>(),
        same in any::<bool>(),
    ) {
        let dtype = if op == "ConvInteger" { DType::U8 } else { DType::F32 };
        let x = TensorMeta::new(dtype, &[1, 2, input[0], input[1]]);
        let w = TensorMeta::new(dtype, &[2, 2, kernel[0], kernel[1]]);
        let inputs: Vec<TensorMeta> = if op.ends_with("Pool") { vec![x] } else { vec![x, w] };
        let mut attrs = vec![
            ("kernel_shape", ints(&kernel)),
            ("strides", ints(&strides)),
            ("dilations", ints(&dilations)),
            ("pads", ints(&pads)),
            ("output_padding", ints(&output_padding)),
            ("ceil_mode", Attr::Int(ceil as i64)),
        ];
        if same {
            attrs.push(("auto_pad", Attr::Str("SAME_UPPER".into())));
        }
        if let Ok(outs) = infer(op, &inputs, &[], &attrs, 2) {
            for m in outs {
                let shape = m.shape.expect("a window op knows its rank");
                prop_assert!(shape.iter().all(|&d| d >= 0 || d == UNKNOWN), "{op}: {shape:?}");
                let known: Vec<i64> = shape.iter().map(|&d| d.max(0)).collect();
                prop_assert!(m.dtype.tensor_bytes(&known).is_some_and(|b| b <= i64::MAX as u64));
            }
        }
    }
}
