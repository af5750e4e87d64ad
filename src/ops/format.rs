//! TransData, GE's op that converts a tensor between formats (NCHW to NC1HWC0, ND to
//! FRACTAL_NZ, ...): its shape inference and its compute, both through
//! [`crate::formats::Transfer`], which owns every layout.
//!
//! GE's prototype (`REG_OP(TransData)`): input `src`, output `dst`, required string
//! attributes `src_format` and `dst_format` (GE's names, `"FRACTAL_Z:16"` spelling a
//! sub-format), int attributes `src_subformat` and `dst_subformat` (default 0) and
//! `groups` (default 1). Out of a blocked format the plain shape cannot be inferred (the
//! true C is lost to padding); GE has no attribute for it, so rt2 reads it from
//! [`DECLARED_SHAPE_ATTR`], which lowering sets from the node's declared output shape.

use super::DECLARED_SHAPE_ATTR;
use super::attr::Attr;
use super::error::OpError;
use super::registry::{InferCtx, OpRegistry, OpSpec, TensorMeta, UNKNOWN, meta};
use super::tensor::{TensorMut, TensorRef};
use crate::formats::{FormatError, StorageFormat, Transfer};

/// Registers TransData.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new("TransData", infer_trans_data).computes(compute_trans_data));
}

/// The transfer TransData's attributes and input type ask for.
fn transfer_of(ctx: &InferCtx) -> Result<Transfer, OpError> {
    let dtype = ctx
        .inputs
        .first()
        .map(|m| m.dtype)
        .ok_or_else(|| ctx.input_error(0, "is missing"))?;
    let format = |name: &str, sub: &str| -> Result<StorageFormat, OpError> {
        let text = match ctx.attrs.get(name) {
            Some(Attr::Str(s)) => s,
            Some(other) => return Err(ctx.attr_error(name, format!("is {other:?}, not a string"))),
            None => return Err(ctx.attr_error(name, "is required")),
        };
        let mut f = StorageFormat::parse(text).map_err(|e| ctx.attr_error(name, e.to_string()))?;
        let sub_format = ctx.attr_int(sub, 0)?;
        if sub_format != 0 {
            f.sub_format = u16::try_from(sub_format).map_err(|_| {
                ctx.attr_error(sub, format!("{sub_format} is not a 16-bit sub-format"))
            })?;
        }
        Ok(f)
    };
    let src = format("src_format", "src_subformat")?;
    let dst = format("dst_format", "dst_subformat")?;
    let t = Transfer::new(src, dst, dtype).map_err(|e| format_error(ctx, e))?;
    let groups = ctx.attr_int("groups", 1)?;
    if groups > 1 && src.sub_format == 0 && dst.sub_format == 0 {
        let groups = usize::try_from(groups).map_err(|_| ctx.attr_error("groups", "too large"))?;
        return t.with_groups(groups).map_err(|e| format_error(ctx, e));
    }
    Ok(t)
}

fn format_error(ctx: &InferCtx, e: FormatError) -> OpError {
    OpError::Compute {
        op: ctx.op.to_string(),
        msg: e.to_string(),
    }
}

fn usizes(dims: &[i64]) -> Option<Vec<usize>> {
    dims.iter().map(|&d| usize::try_from(d).ok()).collect()
}

fn i64s(dims: &[usize]) -> Vec<i64> {
    dims.iter().map(|&d| d as i64).collect()
}

fn infer_trans_data(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let t = transfer_of(ctx)?;
    let dtype = ctx.inputs[0].dtype;
    let given = ctx.attr_ints(DECLARED_SHAPE_ATTR)?;
    let Some(shape) = &ctx.inputs[0].shape else {
        return Ok(meta(dtype, given.map(<[i64]>::to_vec)));
    };
    let concrete = usizes(shape);
    if let Some(given) = given {
        let dst = usizes(given).ok_or_else(|| {
            ctx.attr_error(DECLARED_SHAPE_ATTR, format!("{given:?} has a negative dim"))
        })?;
        if let Some(src) = &concrete {
            t.check_shapes(src, &dst)
                .map_err(|e| format_error(ctx, e))?;
        }
        return Ok(meta(dtype, Some(given.to_vec())));
    }
    match concrete {
        Some(src) => {
            let dst = t.dst_shape(&src).map_err(|e| format_error(ctx, e))?;
            Ok(meta(dtype, Some(i64s(&dst))))
        }
        None => {
            // Unknown dims: the rank still follows from a shape of ones of the same rank.
            let ones = vec![1; shape.len()];
            let rank = t.dst_shape(&ones).map_err(|e| format_error(ctx, e))?.len();
            Ok(meta(dtype, Some(vec![UNKNOWN; rank])))
        }
    }
}

fn compute_trans_data(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let t = transfer_of(ctx)?;
    let (src, dst) = (&inputs[0], &mut outputs[0]);
    t.run(src.shape, src.data, dst.shape, dst.data)
        .map_err(|e| format_error(ctx, e))
}

#[cfg(test)]
mod tests {
    use super::DECLARED_SHAPE_ATTR;
    use crate::ops::testing::{infer1, run1, try_run};
    use crate::ops::{Attr, DType, Tensor, TensorMeta};

    fn formats(src: &str, dst: &str) -> Vec<(&'static str, Attr)> {
        vec![
            ("src_format", Attr::Str(src.into())),
            ("dst_format", Attr::Str(dst.into())),
        ]
    }

    #[test]
    fn nchw_to_nc1hwc0_pads_with_zeros() {
        let x = Tensor::from_vec(&[1, 3, 1, 2], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let y = run1("TransData", &formats("NCHW", "NC1HWC0"), &[x]);
        assert_eq!(y.shape, [1, 1, 1, 2, 16]);
        let v = y.slice::<f32>().unwrap();
        assert_eq!(&v[..4], &[1.0, 3.0, 5.0, 0.0]);
        assert!(v[3..16].iter().all(|&e| e == 0.0));
        assert_eq!(&v[16..19], &[2.0, 4.0, 6.0]);
    }

    #[test]
    fn back_to_nchw_takes_the_shape_from_the_attribute() {
        let x = Tensor::from_vec(&[1, 3, 1, 2], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let y = run1(
            "TransData",
            &formats("NCHW", "NC1HWC0"),
            std::slice::from_ref(&x),
        );
        let mut attrs = formats("NC1HWC0", "NCHW");
        attrs.push((DECLARED_SHAPE_ATTR, Attr::Ints(vec![1, 3, 1, 2])));
        let z = run1("TransData", &attrs, &[y]);
        assert_eq!(z.shape, [1, 3, 1, 2]);
        assert_eq!(z.slice::<f32>().unwrap(), x.slice::<f32>().unwrap());
    }

    #[test]
    fn inference_without_the_shape_says_it_must_be_given() {
        let x = TensorMeta::new(DType::F16, &[1, 1, 2, 2, 16]);
        let e = infer1("TransData", &[x], &[], &formats("NC1HWC0", "NCHW")).unwrap_err();
        assert!(e.to_string().contains("must be given"), "{e}");
    }

    #[test]
    fn inference_keeps_the_rank_of_unknown_dims() {
        let x = TensorMeta::new(DType::F16, &[-1, 64, 7, 7]);
        let y = infer1("TransData", &[x], &[], &formats("NCHW", "NC1HWC0")).unwrap();
        assert_eq!(y.shape, Some(vec![-1; 5]));
        let x = TensorMeta::new(DType::I8, &[2, 64, 7, 7]);
        let y = infer1("TransData", &[x], &[], &formats("NCHW", "NC1HWC0")).unwrap();
        assert_eq!(y.shape, Some(vec![2, 2, 7, 7, 32]));
    }

    #[test]
    fn groups_and_subformats_reach_fractal_z() {
        let x = TensorMeta::new(DType::F16, &[4, 2, 3, 3]);
        let mut attrs = formats("HWCN", "FRACTAL_Z");
        let hwcn = TensorMeta::new(DType::F16, &[3, 3, 2, 4]);
        attrs.push(("groups", Attr::Int(2)));
        let by_attr = infer1("TransData", std::slice::from_ref(&hwcn), &[], &attrs).unwrap();
        let by_name = infer1("TransData", &[hwcn], &[], &formats("HWCN", "FRACTAL_Z:2")).unwrap();
        assert_eq!(by_attr, by_name);
        // e = min(lcm(lcm(2,16)/2, lcm(2,16)/2), 2) = 2: one block of 1 C1 x 9 positions.
        assert_eq!(by_attr.shape, Some(vec![9, 1, 16, 16]));
        let plain = infer1("TransData", &[x], &[], &formats("NCHW", "FRACTAL_Z")).unwrap();
        assert_eq!(plain.shape, Some(vec![9, 1, 16, 16]));
    }

    #[test]
    fn refusals_name_the_formats() {
        let x = Tensor::from_vec(&[2, 2], &[1.0f32; 4]);
        let e = try_run(
            "TransData",
            &formats("ND", "NC1HWC0"),
            std::slice::from_ref(&x),
            1,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("no transfer from ND to NC1HWC0"),
            "{e}"
        );
        let e = try_run(
            "TransData",
            &formats("ND", "BOGUS"),
            std::slice::from_ref(&x),
            1,
        )
        .unwrap_err();
        assert!(e.to_string().contains("BOGUS"), "{e}");
        let e = try_run(
            "TransData",
            &[("src_format", Attr::Str("ND".into()))],
            &[x],
            1,
        )
        .unwrap_err();
        assert!(e.to_string().contains("dst_format"), "{e}");
    }

    #[test]
    fn every_output_byte_is_written() {
        // run_on_host poisons outputs: padding left unwritten would show as 0xFF.
        let x = Tensor::from_vec(&[3, 5], &[7u8; 15]);
        let y = run1("TransData", &formats("ND", "FRACTAL_NZ"), &[x]);
        assert_eq!(y.shape, [1, 1, 16, 32]);
        let bytes = y.data.as_bytes();
        assert_eq!(bytes.iter().filter(|&&b| b == 7).count(), 15);
        assert!(bytes.iter().all(|&b| b == 7 || b == 0));
    }
}
