//! What the GE ops share in reading their attributes (GE's required and fixed-length
//! lists, quantization offsets that must be neutral, optional inputs left out) and in
//! handing translated attributes to the ONNX ops' kernels. Below every op file of the
//! family.

use crate::ops::{Attr, Attrs, INPUT_FORMATS_ATTR, InferCtx, OpError};

/// A required int attribute.
pub fn required_int(ctx: &InferCtx, name: &str) -> Result<i64, OpError> {
    match ctx.attrs.get(name) {
        None => Err(ctx.attr_error(name, "is required and missing")),
        Some(_) => ctx.attr_int(name, 0),
    }
}

/// A required float attribute.
pub fn required_float(ctx: &InferCtx, name: &str) -> Result<f32, OpError> {
    match ctx.attrs.get(name) {
        None => Err(ctx.attr_error(name, "is required and missing")),
        Some(_) => ctx.attr_float(name, 0.0),
    }
}

/// A required list-of-ints attribute, of any length.
pub fn required_list(ctx: &InferCtx, name: &str) -> Result<Vec<i64>, OpError> {
    ctx.attr_ints(name)?
        .map(<[i64]>::to_vec)
        .ok_or_else(|| ctx.attr_error(name, "is required and missing"))
}

/// A required list-of-ints attribute of exactly `len` values.
pub fn required_ints(ctx: &InferCtx, name: &str, len: usize) -> Result<Vec<i64>, OpError> {
    let v = required_list(ctx, name)?;
    checked_len(ctx, name, &v, len)
}

/// A list-of-ints attribute of exactly `len` values, `default` when absent.
pub fn ints_or(ctx: &InferCtx, name: &str, default: &[i64]) -> Result<Vec<i64>, OpError> {
    let v = ctx.attr_ints(name)?.unwrap_or(default);
    checked_len(ctx, name, v, default.len())
}

fn checked_len(ctx: &InferCtx, name: &str, v: &[i64], len: usize) -> Result<Vec<i64>, OpError> {
    if v.len() != len {
        return Err(ctx.attr_error(name, format!("has {} values, not {len}: {v:?}", v.len())));
    }
    Ok(v.to_vec())
}

/// A quantization offset (`offset_x`) that must be 0: the float ops take no offset.
pub fn no_offset_x(ctx: &InferCtx) -> Result<(), OpError> {
    match ctx.attr_int("offset_x", 0)? {
        0 => Ok(()),
        v => Err(ctx.attr_error(
            "offset_x",
            format!("is {v}; only 0 is supported (a nonzero offset is for quantized int8 inputs)"),
        )),
    }
}

/// Whether optional input `i` is given (present and not the empty "left out" tensor).
pub fn given(ctx: &InferCtx, i: usize) -> bool {
    ctx.inputs
        .get(i)
        .is_some_and(|m| m.shape.as_deref() != Some(&[0][..]))
}

/// A quantization weight offset input (`offset_w`, input `i`) that must be left out.
pub fn no_offset_w(ctx: &InferCtx, i: usize) -> Result<(), OpError> {
    if given(ctx, i) {
        return Err(ctx.input_error(
            i,
            "offset_w is only for quantized int8 weights, which are not supported",
        ));
    }
    Ok(())
}

/// The ONNX attributes a GE op hands to the shared kernel it runs.
pub fn onnx_attrs(pairs: Vec<(&str, Attr)>) -> Attrs {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `ctx` with `attrs` in place of the node's own: what the shared kernel is called with.
pub fn with_attrs<'a>(ctx: &InferCtx<'a>, attrs: &'a Attrs) -> InferCtx<'a> {
    InferCtx {
        op: ctx.op,
        inputs: ctx.inputs,
        values: ctx.values,
        attrs,
        outputs: ctx.outputs,
    }
}

/// Reads `data_format` (NCHW or NHWC, `default` when absent): whether it is NCHW.
pub fn data_format(ctx: &InferCtx, default: &str) -> Result<bool, OpError> {
    match ctx.attr_str("data_format", default)? {
        "NCHW" => Ok(true),
        "NHWC" => Ok(false),
        other => Err(ctx.attr_error("data_format", format!("{other:?} is not NCHW or NHWC"))),
    }
}

/// The origin format of input `i` as lowering recorded it ([`INPUT_FORMATS_ATTR`], ND
/// where a descriptor names none);
/// `None` when the node carries none (an ONNX import, a unit test) or the number is not a
/// format.
pub fn input_format(ctx: &InferCtx, i: usize) -> Option<crate::formats::Format> {
    let v = ctx.attr_ints(INPUT_FORMATS_ATTR).ok().flatten()?;
    let n = u8::try_from(*v.get(i)?).ok()?;
    crate::formats::Format::from_number(n)
}
