//! GE op types that are a library op under another name and other attribute names, or
//! with an attribute given as an input: each is one row of [`ALIASES`], saying which
//! library op it is and how its attributes (and the values of its axis inputs) become that
//! op's. Lowering launches the library op itself ([`OpSpec::translates`]), so the
//! translation is made once; only a node whose axis input is not a constant computes
//! through the alias, translating per launch (an attribute map built each time).
//!
//! Sources, the prototypes in `prototypes/`: Maximum, Minimum, AddV2, Select
//! (`elewise_calculation_ops`, `selection_ops`), ExpandDims (`array_ops`), ConcatV2
//! (`split_combination_ops`), GatherV2, GatherV2D (`selection_ops`), ReduceMaxD,
//! ReduceMinD, ReduceProdD (`reduce_ops`), LogSoftmaxV2 (`nn_norm_ops`), ClipByValue
//! (`elewise_calculation_ops`), TopKV2 (`selection_ops`), SqueezeV3, UnsqueezeV3,
//! StridedSliceV2 (`array_ops`, `selection_ops`), BatchNorm (`nn_batch_norm_ops`), AddN,
//! AccumulateNV2, MaxN, ClipByValueV2, ArgMaxV2, Conv2DTranspose, Conv2DTransposeD
//! (`nn_calculation_ops`), Cumsum, Cumprod, GatherNd (`selection_ops`), (`elewise_calculation_ops`), PadD, PadV2D, PadV3,
//! BroadcastTo (`pad_ops`), SliceD (`selection_ops`), SplitV, SplitVD
//! (`split_combination_ops`), SqueezeV2, UnsqueezeV2 (`array_ops`).

use super::attrs::{no_offset_x, onnx_attrs, required_int, required_ints, required_list};
use crate::ops::registry::library;
use crate::ops::{
    Attr, Attrs, Compute, DType, InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut,
    TensorRef, Translation,
};

/// What a GE node of an alias is: the library op, its attributes and how many of the
/// node's leading inputs it takes.
type TargetFn = fn(&InferCtx) -> Result<Translation, OpError>;

/// (GE op type, inputs whose values the translation reads, the translation).
const ALIASES: &[(&str, &[usize], TargetFn)] = &[
    ("Maximum", &[], |ctx| same("Max", ctx, 2)),
    ("Minimum", &[], |ctx| same("Min", ctx, 2)),
    ("AddV2", &[], |ctx| same("Add", ctx, 2)),
    ("Select", &[], select),
    ("ExpandDims", &[1], expand_dims),
    // Its axis is its last input, whichever that is: a constant, or the node does not
    // lower (the value is needed for the output shape).
    ("ConcatV2", &[], concat_v2),
    ("GatherV2", &[2], gather_v2),
    ("GatherV2D", &[], gather_v2d),
    ("ReduceMaxD", &[], |ctx| reduce_d("ReduceMax", ctx)),
    ("ReduceMinD", &[], |ctx| reduce_d("ReduceMin", ctx)),
    ("ReduceProdD", &[], |ctx| reduce_d("ReduceProd", ctx)),
    ("LogSoftmaxV2", &[], log_softmax_v2),
    ("ClipByValue", &[], |ctx| same("Clip", ctx, 3)),
    ("TopKV2", &[1], top_k),
    // What GE's ONNX plugins make: Squeeze and Unsqueeze from opset 13 (axes an input),
    // Slice from opset 10, BatchNormalization.
    ("SqueezeV3", &[1], |ctx| leading("Squeeze", ctx, 1, 2)),
    ("UnsqueezeV3", &[1], |ctx| leading("Unsqueeze", ctx, 2, 2)),
    ("StridedSliceV2", &[1, 2, 3, 4], strided_slice_v2),
    ("BatchNorm", &[], batch_norm),
    // elewise_calculation_ops: AddN (and AccumulateNV2, what GE's ONNX Sum plugin makes)
    // and MaxN sum and max any number of tensors (`N`, when
    // given, the count); ClipByValueV2 is ClipByValue.
    ("AddN", &[], |ctx| variadic("Sum", ctx)),
    ("AccumulateNV2", &[], |ctx| variadic("Sum", ctx)),
    ("MaxN", &[], |ctx| variadic("Max", ctx)),
    ("ClipByValueV2", &[], |ctx| same("Clip", ctx, 3)),
    // matrix_calculation_ops: GEMM(a, b, c, alpha, beta) is ONNX's Gemm with alpha and
    // beta the values of their constant inputs.
    ("GEMM", &[3, 4], gemm),
    // pad_ops: PadD's `paddings` (a [before, after] row per dim, as rt2 reads a list of
    // int lists: flattened row by row) and PadV3's input (`paddings_contiguous` true:
    // the same interleaving; false: ONNX's begins then ends), constant values from
    // PadV2D's input 1 and PadV3's input 2.
    ("PadD", &[], pad_d),
    ("PadV2D", &[1], pad_d),
    ("PadV3", &[1], pad_v3),
    // selection_ops: SliceD(x; offsets, size), a size of -1 to the end.
    ("SliceD", &[], slice_d),
    // split_combination_ops: SplitV(x, size_splits, split_dim; num_split) and SplitVD,
    // one size of -1 the rest.
    ("SplitV", &[1, 2], split_v),
    ("SplitVD", &[], split_v),
    // array_ops: SqueezeV2 and UnsqueezeV2 with `axis` (SqueezeV2's empty: every 1).
    ("SqueezeV2", &[], |ctx| axes_as("Squeeze", ctx)),
    ("UnsqueezeV2", &[], |ctx| axes_as("Unsqueeze", ctx)),
    // pad_ops: BroadcastTo(x, shape), x broadcast to the shape (the library's Expand,
    // which also takes a shape x is not broadcast to: inference checks it is the shape).
    ("BroadcastTo", &[1], |ctx| leading("Expand", ctx, 2, 2)),
    // nn_calculation_ops: Conv2DTranspose(input_size, x, filter, bias?, offset_w?) and
    // Conv2DTransposeD(x, filter, bias?, offset_w?; input_size), what GE's ONNX
    // ConvTranspose plugin makes.
    ("Conv2DTranspose", &[0], conv2d_transpose),
    ("Conv2DTransposeD", &[], conv2d_transpose),
    // selection_ops: Cumsum / Cumprod(x, axis; exclusive false, reverse false), ONNX's
    // CumSum / CumProd with the flags as ints; GatherNd(x, indices), ONNX's GatherND
    // with no batch dims.
    ("Cumsum", &[], |ctx| cumulative("CumSum", ctx)),
    ("Cumprod", &[], |ctx| cumulative("CumProd", ctx)),
    ("GatherNd", &[], |ctx| leading("GatherND", ctx, 2, 2)),
    // elewise_calculation_ops: ArgMaxV2(x, dimension; dtype int64).
    ("ArgMaxV2", &[1], arg_max_v2),
];

/// Pad's `pads` (all begins, then all ends) from GE's per-dim [before, after] pairs,
/// interleaved (`b0, e0, b1, e1, ...`).
fn pads_from_pairs(ctx: &InferCtx, name: &str, pairs: &[i64]) -> Result<Vec<i64>, OpError> {
    let rank = ctx.inputs[0].shape.as_ref().map(Vec::len);
    if !pairs.len().is_multiple_of(2) || rank.is_some_and(|r| pairs.len() != 2 * r) {
        return Err(ctx.attr_error(
            name,
            format!("{pairs:?} is not a [before, after] pair for each of x's dims"),
        ));
    }
    let (b, e): (Vec<i64>, Vec<i64>) = pairs.chunks(2).map(|p| (p[0], p[1])).unzip();
    Ok(b.into_iter().chain(e).collect())
}

/// The one value of input `i`, a float (a pad's constant).
fn scalar_input(ctx: &InferCtx, i: usize) -> Result<Option<f64>, OpError> {
    let Some(t) = ctx.values.get(i).copied().flatten() else {
        return match ctx.inputs.get(i) {
            Some(_) => Err(ctx.input_error(i, "its value is needed and is not known")),
            None => Ok(None),
        };
    };
    match (t.element_count(), t.float_at(0)) {
        (Some(1), Some(v)) => Ok(Some(v)),
        _ => Err(ctx.input_error(i, format!("is {} {:?}, not one value", t.dtype, t.shape))),
    }
}

/// The library's Pad, constant mode, with `pads` and the fill `value`.
fn pad(pads: Vec<i64>, mode: &str, value: f64) -> Translation {
    Translation {
        first: 0,
        op: "Pad",
        attrs: onnx_attrs(vec![
            ("pads", Attr::Ints(pads)),
            ("mode", Attr::Str(mode.to_string())),
            ("value", Attr::Float(value)),
        ]),
        inputs: 1,
    }
}

/// PadD(x; paddings) and PadV2D(x, constant_values; paddings).
fn pad_d(ctx: &InferCtx) -> Result<Translation, OpError> {
    let n = if ctx.op == "PadV2D" { 2 } else { 1 };
    ctx.arity(n, n)?;
    let pairs = required_list(ctx, "paddings")?;
    let value = if n == 2 {
        scalar_input(ctx, 1)?.unwrap_or(0.0)
    } else {
        0.0
    };
    Ok(pad(
        pads_from_pairs(ctx, "paddings", &pairs)?,
        "constant",
        value,
    ))
}

/// PadV3(x, paddings, constant_values?; mode "constant", paddings_contiguous true): the
/// library's Pad on the same inputs, its constant read as Pad's input 2. ONNX's layout
/// (`paddings_contiguous` false, what GE's ONNX Pad plugin writes) is Pad's own, so the
/// paddings may be known only at run time; GE's interleaved layout is reordered into
/// Pad's `pads` attribute, from a constant.
fn pad_v3(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, 3)?;
    let mode = match ctx.attr_str("mode", "constant")? {
        m @ ("constant" | "reflect" | "edge") => m,
        other => {
            return Err(ctx.attr_error(
                "mode",
                format!("{other:?}: constant, reflect and edge are computed"),
            ));
        }
    };
    let mut attrs = vec![("mode", Attr::Str(mode.to_string()))];
    if ctx.attr_bool("paddings_contiguous", true)? {
        let values = ctx.value_ints(1)?.ok_or_else(|| {
            ctx.input_error(
                1,
                "its value is needed (interleaved paddings are reordered at lowering) and is \
                 not known",
            )
        })?;
        attrs.push((
            "pads",
            Attr::Ints(pads_from_pairs(ctx, "paddings", &values)?),
        ));
    }
    Ok(Translation {
        first: 0,
        op: "Pad",
        attrs: onnx_attrs(attrs),
        inputs: ctx.inputs.len(),
    })
}

/// SliceD(x; offsets, size): Slice from `offsets` for `size` (-1: to the end).
fn slice_d(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(1, 1)?;
    let (offsets, size) = (required_list(ctx, "offsets")?, required_list(ctx, "size")?);
    Ok(Translation {
        first: 0,
        op: "Slice",
        attrs: offset_size_attrs(ctx, &offsets, &size)?,
        inputs: 1,
    })
}

/// Slice's `starts` and `ends` for TensorFlow's `begin` and `size` (-1: to the end).
pub fn offset_size_attrs(ctx: &InferCtx, offsets: &[i64], size: &[i64]) -> Result<Attrs, OpError> {
    if offsets.len() != size.len()
        || ctx.inputs[0]
            .shape
            .as_ref()
            .is_some_and(|s| s.len() != size.len())
        || offsets.iter().zip(size).any(|(&o, &n)| o < 0 || n < -1)
    {
        return Err(ctx.attr_error(
            "size",
            format!("offsets {offsets:?} and size {size:?} do not fit x"),
        ));
    }
    let ends = offsets
        .iter()
        .zip(size)
        .map(|(&o, &n)| if n == -1 { i64::MAX } else { o + n })
        .collect();
    Ok(onnx_attrs(vec![
        ("starts", Attr::Ints(offsets.to_vec())),
        ("ends", Attr::Ints(ends)),
    ]))
}

/// SplitV(x, size_splits, split_dim; num_split) and SplitVD(x; size_splits, split_dim,
/// num_split): Split with `split` the sizes, one -1 the rest of the dim.
fn split_v(ctx: &InferCtx) -> Result<Translation, OpError> {
    let (mut sizes, dim) = if ctx.op == "SplitV" {
        ctx.arity(3, 3)?;
        (
            ctx.value_ints(1)?
                .ok_or_else(|| ctx.input_error(1, "its value is needed and is not known"))?,
            axis_input(ctx, 2)?,
        )
    } else {
        ctx.arity(1, 1)?;
        (
            required_list(ctx, "size_splits")?,
            required_int(ctx, "split_dim")?,
        )
    };
    let num = ctx.attr_int("num_split", sizes.len() as i64)?;
    if num != sizes.len() as i64 {
        return Err(ctx.attr_error(
            "num_split",
            format!("is {num}, but size_splits has {} sizes", sizes.len()),
        ));
    }
    let rest: Vec<usize> = (0..sizes.len()).filter(|&i| sizes[i] == -1).collect();
    if let [i] = rest[..] {
        let shape = ctx.inputs[0].shape.as_ref();
        let total = shape.and_then(|s| {
            let r = s.len() as i64;
            let a = if dim < 0 { dim + r } else { dim };
            s.get(usize::try_from(a).ok()?).copied()
        });
        let known: i64 = sizes.iter().filter(|&&v| v != -1).sum();
        match total {
            Some(t) if t >= known && t != crate::ops::UNKNOWN => sizes[i] = t - known,
            _ => {
                return Err(ctx.attr_error(
                    "size_splits",
                    format!("{sizes:?}: the -1 needs the split dim's size"),
                ));
            }
        }
    } else if !rest.is_empty() {
        return Err(ctx.attr_error("size_splits", format!("{sizes:?} has more than one -1")));
    }
    Ok(Translation {
        first: 0,
        op: "Split",
        attrs: onnx_attrs(vec![("axis", Attr::Int(dim)), ("split", Attr::Ints(sizes))]),
        inputs: 1,
    })
}

/// SqueezeV2 / UnsqueezeV2(x; axis): the library op with `axes` the list (an empty
/// Squeeze list squeezes every 1, as an absent `axes`).
fn axes_as(op: &'static str, ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(1, 1)?;
    let axes = ctx.attr_ints("axis")?.unwrap_or(&[]).to_vec();
    let attrs = if axes.is_empty() && op == "Squeeze" {
        Attrs::new()
    } else {
        onnx_attrs(vec![("axes", Attr::Ints(axes))])
    };
    Ok(Translation {
        first: 0,
        op,
        attrs,
        inputs: 1,
    })
}

/// Conv2DTranspose and Conv2DTransposeD, NCHW: ONNX's ConvTranspose on x, filter (`[Cin,
/// Cout/groups, kh, kw]`, ONNX's W) and bias. The 4-element `strides`, `dilations` and
/// `output_padding` give their (h, w); `pads` [top, bottom, left, right] are removed from
/// the full output as ONNX's. `input_size` is the output's shape; all zeros (what GE's
/// ONNX plugin writes) leaves it to the attributes, otherwise rows and columns past the
/// attributes' output are output padding, as TensorFlow's conv2d_transpose adds them. The
/// plugin's `auto_pad` and `output_shape` pass through. Quantization (`offset_w`,
/// `offset_x`) is refused.
fn conv2d_transpose(ctx: &InferCtx) -> Result<Translation, OpError> {
    let first = usize::from(ctx.op == "Conv2DTranspose");
    ctx.arity(first + 2, first + 4)?;
    if ctx.inputs.len() > first + 3 {
        return Err(ctx.input_error(first + 3, "offset_w: quantized convolution is not computed"));
    }
    no_offset_x(ctx)?;
    if ctx.attr_str("data_format", "NHWC")? != "NCHW" {
        return Err(ctx.attr_error("data_format", "only NCHW is computed"));
    }
    let hw = |name: &str, default: Option<i64>| -> Result<[i64; 2], OpError> {
        let v = match (ctx.attr_ints(name)?, default) {
            (Some(v), _) => v.to_vec(),
            (None, Some(d)) => vec![d; 4],
            (None, None) => return Err(ctx.attr_error(name, "is required and missing")),
        };
        match v[..] {
            [n, c, h, w] if name == "output_padding" || (n == 1 && c == 1) => Ok([h, w]),
            _ => Err(ctx.attr_error(name, format!("{v:?} is not [1, 1, h, w]"))),
        }
    };
    let (strides, dilations) = (hw("strides", None)?, hw("dilations", Some(1))?);
    let mut output_padding = hw("output_padding", Some(0))?;
    let pads = required_ints(ctx, "pads", 4)?;
    let (t, b, l, r) = (pads[0], pads[1], pads[2], pads[3]);
    let size = if first == 1 {
        ctx.value_ints(0)?
    } else {
        Some(required_list(ctx, "input_size")?)
    };
    if let Some(size) = size.filter(|s| s.iter().any(|&d| d != 0)) {
        let dims = |i: usize| ctx.inputs[first + i].shape.clone().filter(|s| s.len() == 4);
        let (Some(x), Some(w), &[_, _, oh, ow]) = (dims(0), dims(1), &size[..]) else {
            return Err(ctx.attr_error(
                "input_size",
                format!("{size:?} needs x's and filter's (H, W) and four dims"),
            ));
        };
        let spatial = [(oh, x[2], w[2], t + b), (ow, x[3], w[3], l + r)];
        for (k, (out, i, kernel, pad)) in spatial.into_iter().enumerate() {
            let natural =
                strides[k] * (i - 1) + output_padding[k] + (kernel - 1) * dilations[k] + 1 - pad;
            if out < natural {
                return Err(ctx.attr_error(
                    "input_size",
                    format!("{size:?} is smaller than the attributes' output"),
                ));
            }
            output_padding[k] += out - natural;
        }
    }
    let mut attrs = vec![
        ("strides", Attr::Ints(strides.to_vec())),
        ("dilations", Attr::Ints(dilations.to_vec())),
        ("pads", Attr::Ints(vec![t, l, b, r])),
        ("output_padding", Attr::Ints(output_padding.to_vec())),
        ("group", Attr::Int(ctx.attr_int("groups", 1)?)),
    ];
    if let Ok(pad) = ctx.attr_str("auto_pad", "NOTSET")
        && pad != "NOTSET"
    {
        attrs.push(("auto_pad", Attr::Str(pad.to_string())));
    }
    if let Some(shape) = ctx.attr_ints("output_shape")?.filter(|s| !s.is_empty()) {
        attrs.push(("output_shape", Attr::Ints(shape.to_vec())));
    }
    Ok(Translation {
        first,
        op: "ConvTranspose",
        attrs: onnx_attrs(attrs),
        inputs: ctx.inputs.len() - first,
    })
}

/// GE's Cumsum / Cumprod: the library's op on (x, axis), `exclusive` and `reverse` as ints.
fn cumulative(op: &'static str, ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, 2)?;
    Ok(Translation {
        first: 0,
        op,
        attrs: cumulative_flags(ctx)?,
        inputs: 2,
    })
}

/// GE's `exclusive` and `reverse` (bools, false) as the library's CumSum takes them.
pub fn cumulative_flags(ctx: &InferCtx) -> Result<Attrs, OpError> {
    let flag = |name: &str| -> Result<Attr, OpError> {
        Ok(Attr::Int(i64::from(ctx.attr_bool(name, false)?)))
    };
    Ok(onnx_attrs(vec![
        ("exclusive", flag("exclusive")?),
        ("reverse", flag("reverse")?),
    ]))
}

/// ArgMaxV2(x, dimension; dtype int64): ArgMax without the dim, first index on ties.
fn arg_max_v2(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, 2)?;
    match ctx.attrs.get("dtype") {
        None | Some(Attr::DType(crate::ops::DType::I64)) => {}
        Some(other) => {
            return Err(ctx.attr_error("dtype", format!("{other:?}: int64 indices are computed")));
        }
    }
    Ok(Translation {
        first: 0,
        op: "ArgMax",
        attrs: onnx_attrs(vec![
            ("axis", Attr::Int(axis_input(ctx, 1)?)),
            ("keepdims", Attr::Int(0)),
        ]),
        inputs: 1,
    })
}

/// GEMM(a, b, c, alpha, beta; transpose_a, transpose_b false): `alpha op(a) op(b) + beta
/// c`, the library's Gemm on (a, b, c) with alpha and beta from their one-element inputs,
/// which must be constants (the node is refused otherwise: a run-time scale is not
/// computed). Float types only: GE's int8 GEMM is a quantized kernel.
fn gemm(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(5, 5)?;
    if !matches!(ctx.inputs[0].dtype, DType::F32 | DType::F16) {
        let d = ctx.inputs[0].dtype;
        return Err(ctx.input_error(0, format!("is {d}: only float GEMM is computed")));
    }
    let scale = |i: usize, name: &str| -> Result<f32, OpError> {
        let t = ctx.values.get(i).copied().flatten().ok_or_else(|| {
            ctx.input_error(
                i,
                format!("{name} is not a constant: GEMM is computed with its value"),
            )
        })?;
        let one = |v: f32| {
            if t.element_count() == Some(1) {
                Ok(v)
            } else {
                Err(())
            }
        };
        let v = match t.dtype {
            DType::F32 => t
                .data
                .get(..4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            DType::F16 => t
                .data
                .get(..2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()),
            _ => None,
        };
        v.and_then(|v| one(v).ok())
            .ok_or_else(|| ctx.input_error(i, format!("{name} is not one float value")))
    };
    let flag = |name: &str| -> Result<i64, OpError> { Ok(i64::from(ctx.attr_bool(name, false)?)) };
    Ok(Translation {
        first: 0,
        op: "Gemm",
        attrs: onnx_attrs(vec![
            ("alpha", Attr::Float(f64::from(scale(3, "alpha")?))),
            ("beta", Attr::Float(f64::from(scale(4, "beta")?))),
            ("transA", Attr::Int(flag("transpose_a")?)),
            ("transB", Attr::Int(flag("transpose_b")?)),
        ]),
        inputs: 3,
    })
}

/// The library's variadic `op` on every input; GE's `N`, when given, must count them.
fn variadic(op: &'static str, ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(1, usize::MAX)?;
    let n = ctx.inputs.len();
    let given = ctx.attr_int("N", n as i64)?;
    if given != n as i64 {
        return Err(ctx.attr_error("N", format!("is {given}, but the node has {n} tensors")));
    }
    Ok(Translation {
        first: 0,
        op,
        attrs: Attrs::new(),
        inputs: n,
    })
}

/// The library op `op` on the node's inputs (between `min` and `max` of them), no
/// attributes.
fn leading(
    op: &'static str,
    ctx: &InferCtx,
    min: usize,
    max: usize,
) -> Result<Translation, OpError> {
    ctx.arity(min, max)?;
    Ok(Translation {
        first: 0,
        op,
        attrs: Attrs::new(),
        inputs: ctx.inputs.len(),
    })
}

/// StridedSliceV2(x, begin, end, axes?, strides?; the five masks 0): Slice, whose inputs
/// (data, starts, ends, axes, steps) these are. A mask (TensorFlow's bit-per-axis
/// modifiers) is refused.
fn strided_slice_v2(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(3, 5)?;
    for mask in [
        "begin_mask",
        "end_mask",
        "ellipsis_mask",
        "new_axis_mask",
        "shrink_axis_mask",
    ] {
        if ctx.attr_int(mask, 0)? != 0 {
            return Err(ctx.attr_error(mask, "only 0 is computed (no TensorFlow masks)"));
        }
    }
    leading("Slice", ctx, 3, 5)
}

/// BatchNorm(x, scale, offset, mean, variance; epsilon 1e-4, data_format NHWC,
/// is_training true) in inference (is_training false): BatchNormalization, on NCHW (or
/// any layout whose channel is dim 1; NHWC is refused).
fn batch_norm(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(5, 5)?;
    if ctx.attr_bool("is_training", true)? {
        return Err(ctx.attr_error(
            "is_training",
            "is true; only inference (false, the running mean and variance) is computed",
        ));
    }
    match ctx.attr_str("data_format", "NHWC")? {
        "NCHW" | "NCDHW" | "ND" => {}
        other => {
            return Err(ctx.attr_error(
                "data_format",
                format!("{other:?}: only a channel-first layout (NCHW) is computed"),
            ));
        }
    }
    let epsilon = f64::from(ctx.attr_float("epsilon", 1e-4)?);
    Ok(Translation {
        first: 0,
        op: "BatchNormalization",
        attrs: onnx_attrs(vec![("epsilon", Attr::Float(epsilon))]),
        inputs: 5,
    })
}

/// The library op `op` on the node's `n` inputs, no attributes.
fn same(op: &'static str, ctx: &InferCtx, n: usize) -> Result<Translation, OpError> {
    ctx.arity(n, n)?;
    Ok(Translation {
        first: 0,
        op,
        attrs: Attrs::new(),
        inputs: n,
    })
}

/// The int value of input `i` (a scalar or a one-element tensor), which the translation
/// needs: a constant at lowering, or the value run-time inference read.
fn axis_input(ctx: &InferCtx, i: usize) -> Result<i64, OpError> {
    let t = ctx
        .values
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| ctx.input_error(i, "its value is needed and is not known"))?;
    match t.int_values().as_deref() {
        Some([v]) => Ok(*v),
        _ => Err(ctx.input_error(i, format!("is {} {:?}, not one int", t.dtype, t.shape))),
    }
}

/// Select(condition, x1, x2): Where, where the condition broadcasts as NumPy's does. GE's
/// (TensorFlow's) Select also takes a 1-D condition picking rows of higher-rank x1 and
/// x2, which NumPy broadcasting would align with the last dim instead: refused.
fn select(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(3, 3)?;
    let rank = |i: usize| ctx.inputs[i].shape.as_ref().map(Vec::len);
    if let (Some(c), Some(x)) = (rank(0), rank(1))
        && c != 0
        && c != x
    {
        return Err(ctx.input_error(
            0,
            format!(
                "is rank {c} against x1's rank {x}: GE's row-selecting Select is not \
                 computed (only a condition of x1's rank, or a scalar)"
            ),
        ));
    }
    Ok(Translation {
        first: 0,
        op: "Where",
        attrs: Attrs::new(),
        inputs: 3,
    })
}

/// ExpandDims(x, axis): Unsqueeze with `axes` `[axis]`.
fn expand_dims(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, 2)?;
    let axis = axis_input(ctx, 1)?;
    Ok(Translation {
        first: 0,
        op: "Unsqueeze",
        attrs: onnx_attrs(vec![("axes", Attr::Ints(vec![axis]))]),
        inputs: 1,
    })
}

/// ConcatV2(x..., concat_dim): Concat on `axis` concat_dim; `N`, when given, the count.
fn concat_v2(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, usize::MAX)?;
    let n = ctx.inputs.len() - 1;
    let given = ctx.attr_int("N", n as i64)?;
    if given != n as i64 {
        return Err(ctx.attr_error("N", format!("is {given}, but the node has {n} tensors")));
    }
    let axis = axis_input(ctx, n)?;
    Ok(Translation {
        first: 0,
        op: "Concat",
        attrs: onnx_attrs(vec![("axis", Attr::Int(axis))]),
        inputs: n,
    })
}

/// Gather on `axis`; GE's `batch_dims` must be 0 (ONNX's Gather has none).
fn gather(ctx: &InferCtx, axis: i64) -> Result<Translation, OpError> {
    let batch = ctx.attr_int("batch_dims", 0)?;
    if batch != 0 {
        return Err(ctx.attr_error("batch_dims", format!("is {batch}; only 0 is computed")));
    }
    Ok(Translation {
        first: 0,
        op: "Gather",
        attrs: onnx_attrs(vec![("axis", Attr::Int(axis))]),
        inputs: 2,
    })
}

/// GatherV2(x, indices, axis).
fn gather_v2(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(3, 3)?;
    gather(ctx, axis_input(ctx, 2)?)
}

/// GatherV2D(x, indices; axis required).
fn gather_v2d(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, 2)?;
    gather(ctx, required_int(ctx, "axis")?)
}

/// Reduce*D(x; axes required, keep_dims false).
fn reduce_d(op: &'static str, ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(1, 1)?;
    let axes = required_list(ctx, "axes")?;
    let keep = match ctx.attrs.get("keep_dims") {
        Some(Attr::Bool(b)) => i64::from(*b),
        _ => ctx.attr_int("keep_dims", 0)?,
    };
    // An empty `axes` reduces nothing, as TensorFlow's reductions.
    Ok(Translation {
        first: 0,
        op,
        attrs: onnx_attrs(vec![
            ("axes", Attr::Ints(axes)),
            ("keepdims", Attr::Int(keep)),
            ("noop_with_empty_axes", Attr::Int(1)),
        ]),
        inputs: 1,
    })
}

/// LogSoftmaxV2(logits; axes [-1]): LogSoftmax over one axis.
fn log_softmax_v2(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(1, 1)?;
    let axes = ctx.attr_ints("axes")?.unwrap_or(&[-1]).to_vec();
    let [axis] = axes[..] else {
        return Err(ctx.attr_error("axes", format!("{axes:?}: one axis is computed")));
    };
    Ok(Translation {
        first: 0,
        op: "LogSoftmax",
        attrs: onnx_attrs(vec![("axis", Attr::Int(axis))]),
        inputs: 1,
    })
}

/// GE's TopK and TopKV2 (x, k; sorted true, largest true, dim -1) as the library's TopK
/// on `axis` dim, with int32 indices (GE's).
pub fn top_k(ctx: &InferCtx) -> Result<Translation, OpError> {
    ctx.arity(2, 2)?;
    let flag = |name: &str| -> Result<i64, OpError> {
        match ctx.attrs.get(name) {
            Some(Attr::Bool(b)) => Ok(i64::from(*b)),
            _ => ctx.attr_int(name, 1),
        }
    };
    Ok(Translation {
        first: 0,
        op: "TopK",
        attrs: onnx_attrs(vec![
            ("axis", Attr::Int(ctx.attr_int("dim", -1)?)),
            ("largest", Attr::Int(flag("largest")?)),
            ("sorted", Attr::Int(flag("sorted")?)),
            ("index_dtype", Attr::DType(crate::ops::DType::I32)),
        ]),
        inputs: 2,
    })
}

fn target_fn(op: &str) -> Result<TargetFn, OpError> {
    ALIASES
        .iter()
        .find(|(name, _, _)| *name == op)
        .map(|(_, _, f)| *f)
        .ok_or_else(|| OpError::NoCompute { op: op.to_string() })
}

/// The target op's spec and a context for it: the node's inputs and values it takes
/// (from the translation's `first`, also handed to `f`), the translated attributes.
fn with_target<R>(
    ctx: &InferCtx,
    f: impl FnOnce(&OpSpec, &InferCtx, usize) -> Result<R, OpError>,
) -> Result<R, OpError> {
    let t = target_fn(ctx.op)?(ctx)?;
    let spec = library().get(t.op).ok_or_else(|| OpError::NoCompute {
        op: t.op.to_string(),
    })?;
    let taken = t.first..t.first + t.inputs;
    let values = ctx.values.get(taken.clone()).unwrap_or_default();
    let target = InferCtx {
        op: t.op,
        inputs: &ctx.inputs[taken],
        values,
        attrs: &t.attrs,
        outputs: ctx.outputs,
    };
    f(spec, &target, t.first)
}

fn infer(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    with_target(ctx, |spec, target, _| spec.infer_shapes(target))
}

fn compute(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    with_target(ctx, |spec, target, first| match spec.compute {
        Some(Compute::Into(f)) => f(target, &inputs[first..first + target.inputs.len()], outputs),
        _ => Err(OpError::NoCompute {
            op: target.op.to_string(),
        }),
    })
}

fn translate(ctx: &InferCtx) -> Option<Translation> {
    target_fn(ctx.op).ok()?(ctx).ok()
}

/// Registers every alias.
pub fn register(reg: &mut OpRegistry) {
    for &(name, reads, _) in ALIASES {
        let mut spec = OpSpec::new(name, infer)
            .computes(compute)
            .translates(translate);
        if !reads.is_empty() {
            spec = spec.reading(reads);
        }
        reg.add(spec);
    }
}

/// The op types this file registers.
pub fn names() -> impl Iterator<Item = &'static str> {
    ALIASES.iter().map(|(name, _, _)| *name)
}
