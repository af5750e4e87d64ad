//! Elementwise ops: unary maps, binary and variadic arithmetic, comparisons and logic with
//! NumPy broadcasting, and Where. Shape and dtype inference.
//!
//! Broadcasting aligns shapes on the right; a pair of dims agrees when equal or when one
//! is 1. With unknown dims (-1), a known dim greater than 1 decides the result (the
//! unknown one must be it or 1); against a 1 or another unknown the result stays unknown.
//! An unknown rank anywhere makes the result's rank unknown.
//!
//! Compute lives in the submodules: [`broadcast`](mod@broadcast) is the one broadcasting engine
//! every multi-input compute function runs on, [`num`] says what the arithmetic means per element
//! type, and the compute functions are grouped by shape of work (unary maps, broadcasting ops,
//! casts, quantization, the axis-wise Hardmax and MeanVarianceNormalization).

pub(crate) mod binary;
pub mod broadcast;
mod cast;
mod normalize;
pub mod num;
mod quant;
pub(crate) mod unary;
pub(crate) mod vmath;

use crate::ops::DType;
use crate::ops::{
    ComputeFn, InferCtx, InferFn, OpError, OpRegistry, OpSpec, TensorMeta, UNKNOWN, meta,
};

/// Unary ops whose output has the input's shape and dtype.
const SAME_AS_INPUT: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "Ceil",
    "Celu",
    "Cos",
    "Cosh",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "LeakyRelu",
    "Log",
    "Mish",
    "Neg",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "BitwiseNot",
    "Hardmax",
    "MeanVarianceNormalization",
];

/// Binary and variadic arithmetic: inputs of one dtype, output of that dtype.
const ARITHMETIC: &[(&str, usize, usize)] = &[
    ("Add", 2, 2),
    ("Sub", 2, 2),
    ("Mul", 2, 2),
    ("Div", 2, 2),
    ("RealDiv", 2, 2),
    ("Mod", 2, 2),
    ("Max", 1, usize::MAX),
    ("Min", 1, usize::MAX),
    ("Sum", 1, usize::MAX),
    ("Mean", 1, usize::MAX),
    ("BitShift", 2, 2),
    ("BitwiseAnd", 2, 2),
    ("BitwiseOr", 2, 2),
    ("BitwiseXor", 2, 2),
];

/// Comparisons: inputs of one dtype, bool output.
const COMPARISON: &[&str] = &[
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "LessEqual",
    "GreaterEqual",
];

/// Logic on bools (ONNX names and GE's).
const LOGIC: &[&str] = &["And", "Or", "Xor", "LogicalAnd", "LogicalOr"];

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    for &name in SAME_AS_INPUT {
        let compute: ComputeFn = match name {
            "Identity" => unary::compute_identity,
            "BitwiseNot" => unary::compute_bitwise_not,
            "Hardmax" => normalize::compute_hardmax,
            "MeanVarianceNormalization" => normalize::compute_mvn,
            _ => unary::compute,
        };
        reg.add(OpSpec::new(name, infer_unary).computes(compute));
    }
    for &(name, _, _) in ARITHMETIC {
        reg.add(
            OpSpec::new(name, infer_arithmetic)
                .computes(binary::compute_arithmetic)
                .specializes(binary::specialize_arithmetic),
        );
    }
    for &name in COMPARISON {
        reg.add(OpSpec::new(name, infer_comparison).computes(binary::compute_comparison));
    }
    for &name in LOGIC {
        reg.add(OpSpec::new(name, infer_logic).computes(binary::compute_logic));
    }
    let ops: [(&'static str, InferFn, ComputeFn); 14] = [
        ("Not", infer_not, unary::compute_not),
        ("LogicalNot", infer_not, unary::compute_not),
        ("IsNaN", infer_is_class, unary::compute_is_class),
        ("IsNan", infer_is_class, unary::compute_is_class),
        ("IsInf", infer_is_class, unary::compute_is_class),
        ("PRelu", infer_prelu, binary::compute_prelu),
        ("Pow", infer_pow, binary::compute_pow),
        ("Clip", infer_clip, binary::compute_clip),
        ("Where", infer_where, binary::compute_where),
        ("SelectV2", infer_where, binary::compute_where),
        ("Cast", infer_cast, cast::compute),
        ("CastLike", infer_cast_like, cast::compute),
        (
            "DequantizeLinear",
            infer_dequantize,
            quant::compute_dequantize,
        ),
        ("QuantizeLinear", infer_quantize, quant::compute_quantize),
    ];
    for (name, infer, compute) in ops {
        reg.add(OpSpec::new(name, infer).computes(compute));
    }
}

/// The broadcast shape of `shapes`, or the pair that does not broadcast.
pub fn broadcast(shapes: &[Option<&[i64]>]) -> Result<Option<Vec<i64>>, (usize, usize)> {
    let mut out: Vec<i64> = Vec::new();
    let mut owner: Vec<usize> = Vec::new(); // which input decided each dim, for errors
    for (k, s) in shapes.iter().enumerate() {
        let Some(s) = s else { return Ok(None) };
        if s.len() > out.len() {
            let extra = s.len() - out.len();
            out.splice(0..0, std::iter::repeat_n(1, extra));
            owner.splice(0..0, std::iter::repeat_n(k, extra));
        }
        let off = out.len() - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = out[off + i];
            let merged = match (o, d) {
                (a, b) if a == b => a,
                (1, b) => b,
                (a, 1) => a,
                (UNKNOWN, b) if b > 1 => b,
                (a, UNKNOWN) if a > 1 => a,
                _ => return Err((owner[off + i], k)),
            };
            if merged != o {
                owner[off + i] = k;
            }
            out[off + i] = merged;
        }
    }
    Ok(Some(out))
}

fn broadcast_all(ctx: &InferCtx, inputs: &[usize]) -> Result<Option<Vec<i64>>, OpError> {
    let shapes: Vec<Option<&[i64]>> = inputs
        .iter()
        .map(|&i| ctx.inputs[i].shape.as_deref())
        .collect();
    broadcast(&shapes).map_err(|(a, b)| OpError::Broadcast {
        op: ctx.op.to_string(),
        a: inputs[a],
        b: inputs[b],
        a_shape: ctx.inputs[inputs[a]].shape.clone().unwrap_or_default(),
        b_shape: ctx.inputs[inputs[b]].shape.clone().unwrap_or_default(),
    })
}

/// All inputs share input 0's dtype.
fn same_dtype(ctx: &InferCtx) -> Result<DType, OpError> {
    let d = ctx.inputs[0].dtype;
    for (i, t) in ctx.inputs.iter().enumerate().skip(1) {
        if t.dtype != d {
            return Err(ctx.input_error(i, format!("is {}, input 0 is {d}", t.dtype)));
        }
    }
    Ok(d)
}

fn infer_unary(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    Ok(vec![ctx.inputs[0].clone()])
}

pub(crate) fn infer_arithmetic(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    let (min, max) = ARITHMETIC
        .iter()
        .find(|(n, _, _)| *n == ctx.op)
        .map(|&(_, a, b)| (a, b))
        .unwrap_or((2, 2));
    ctx.arity(min, max)?;
    let dtype = same_dtype(ctx)?;
    let all: Vec<usize> = (0..ctx.inputs.len()).collect();
    Ok(meta(dtype, broadcast_all(ctx, &all)?))
}

pub(crate) fn infer_comparison(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    same_dtype(ctx)?;
    Ok(meta(DType::Bool, broadcast_all(ctx, &[0, 1])?))
}

fn require_bool(ctx: &InferCtx) -> Result<(), OpError> {
    for (i, t) in ctx.inputs.iter().enumerate() {
        if t.dtype != DType::Bool {
            return Err(ctx.input_error(i, format!("is {}, the op takes bool", t.dtype)));
        }
    }
    Ok(())
}

fn infer_logic(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    require_bool(ctx)?;
    Ok(meta(DType::Bool, broadcast_all(ctx, &[0, 1])?))
}

fn infer_not(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    require_bool(ctx)?;
    Ok(vec![ctx.inputs[0].clone()])
}

fn infer_is_class(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    Ok(meta(DType::Bool, ctx.inputs[0].shape.clone()))
}

/// Pow's exponent may have its own dtype (ONNX T1); the output has the base's.
fn infer_pow(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    Ok(meta(ctx.inputs[0].dtype, broadcast_all(ctx, &[0, 1])?))
}

/// Clip: the optional min and max inputs are scalars of the input's dtype.
fn infer_clip(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 3)?;
    same_dtype(ctx)?;
    for (i, t) in ctx.inputs.iter().enumerate().skip(1) {
        if let Some(s) = &t.shape
            && s.iter().product::<i64>() > 1
        {
            return Err(ctx.input_error(i, format!("is {s:?}; min and max are scalars")));
        }
    }
    Ok(vec![ctx.inputs[0].clone()])
}

/// PRelu(x, slope): the output has x's shape. Before opset 7 a 1-D slope with one value
/// per channel applies along axis 1 (PyTorch's per-channel PReLU as exported then); from
/// opset 7 the slope broadcasts to x as in the other arithmetic ops.
fn infer_prelu(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    if binary::channel_slope(ctx)?
        && let (Some(x), Some(s)) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape)
        && s.len() == 1
        && x.len() >= 2
        && (s[0] == x[1] || s[0] == 1 || s[0] < 0 || x[1] < 0)
    {
        same_dtype(ctx)?;
        return Ok(vec![ctx.inputs[0].clone()]);
    }
    infer_arithmetic(ctx)
}

/// Where(condition, x, y): condition is bool; x and y share a dtype; all broadcast.
fn infer_where(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 3)?;
    if ctx.inputs[0].dtype != DType::Bool {
        return Err(ctx.input_error(
            0,
            format!("is {}, the condition is bool", ctx.inputs[0].dtype),
        ));
    }
    if ctx.inputs[1].dtype != ctx.inputs[2].dtype {
        return Err(ctx.input_error(
            2,
            format!(
                "is {}, input 1 is {}",
                ctx.inputs[2].dtype, ctx.inputs[1].dtype
            ),
        ));
    }
    Ok(meta(ctx.inputs[1].dtype, broadcast_all(ctx, &[0, 1, 2])?))
}

/// Cast: attribute `to` is the target element type (lowering converts ONNX's numbering), or
/// in a GE graph `dst_type`, a GE type number ([`ge_type_attr`]).
fn infer_cast(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    let to = match (ctx.attrs.get("to"), ctx.attrs.get("dst_type")) {
        (Some(crate::ops::Attr::DType(d)), _) => *d,
        (Some(other), _) => {
            return Err(ctx.attr_error("to", format!("is {other:?}, not an element type")));
        }
        // GE's Cast names its target `dst_type`, in GE's own type numbering.
        (None, Some(_)) => ge_type_attr(ctx, "dst_type", None)?,
        (None, None) => return Err(ctx.attr_error("to", "is missing")),
    };
    Ok(meta(to, ctx.inputs[0].shape.clone()))
}

/// A GE type attribute `name`: a GE type number (C++ `ge::DataType`:
/// `inc/external/graph/types.h`), or an element type lowering already converted;
/// `default` when absent (required when `None`). Cast's `dst_type`, Eye's `dtype`.
pub(crate) fn ge_type_attr(
    ctx: &InferCtx,
    name: &str,
    default: Option<DType>,
) -> Result<DType, OpError> {
    let number = match (ctx.attrs.get(name), default) {
        (Some(crate::ops::Attr::DType(d)), _) => return Ok(*d),
        (Some(crate::ops::Attr::Int(n)), _) => *n,
        (Some(other), _) => return Err(ctx.attr_error(name, format!("is {other:?}, not a type"))),
        (None, Some(d)) => return Ok(d),
        (None, None) => return Err(ctx.attr_error(name, "is missing")),
    };
    Ok(match number {
        0 => DType::F32,
        1 => DType::F16,
        2 => DType::I8,
        3 => DType::I32,
        4 => DType::U8,
        6 => DType::I16,
        7 => DType::U16,
        8 => DType::U32,
        9 => DType::I64,
        10 => DType::U64,
        11 => DType::F64,
        12 => DType::Bool,
        27 => DType::Bf16,
        other => {
            return Err(ctx.attr_error(
                name,
                format!("GE type {other} is not one the device computes on"),
            ));
        }
    })
}

/// CastLike: input 0 converted to input 1's element type.
fn infer_cast_like(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 2)?;
    Ok(meta(ctx.inputs[1].dtype, ctx.inputs[0].shape.clone()))
}

/// DequantizeLinear: x's shape, in the scale's floating-point type.
fn infer_dequantize(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    Ok(meta(ctx.inputs[1].dtype, ctx.inputs[0].shape.clone()))
}

/// QuantizeLinear: x's shape, in the zero point's integer type (uint8 without one, or the
/// `output_dtype` attribute).
fn infer_quantize(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(2, 3)?;
    let dtype = match (ctx.inputs.get(2), ctx.attrs.get("output_dtype")) {
        (Some(zero_point), _) => zero_point.dtype,
        (None, Some(crate::ops::Attr::DType(d))) => *d,
        (None, _) => DType::U8,
    };
    Ok(meta(dtype, ctx.inputs[0].shape.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Attr;
    use crate::ops::Attrs;

    fn infer(op: &str, inputs: &[TensorMeta], attrs: &Attrs) -> Result<Vec<TensorMeta>, OpError> {
        let pairs: Vec<(&str, Attr)> = attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        crate::ops::infer_for_test(op, inputs, &[], &pairs, 1)
    }

    fn f32(shape: &[i64]) -> TensorMeta {
        TensorMeta::new(DType::F32, shape)
    }

    #[test]
    fn broadcasting_known_and_unknown_dims() {
        let b = |a: &[i64], c: &[i64]| broadcast(&[Some(a), Some(c)]);
        assert_eq!(b(&[2, 1, 4], &[3, 1]), Ok(Some(vec![2, 3, 4])));
        assert_eq!(b(&[], &[5]), Ok(Some(vec![5])));
        assert_eq!(b(&[-1, 4], &[3, 4]), Ok(Some(vec![3, 4])));
        assert_eq!(b(&[-1, 4], &[1, 4]), Ok(Some(vec![-1, 4])));
        assert_eq!(b(&[-1], &[-1]), Ok(Some(vec![-1])));
        assert_eq!(b(&[2, 3], &[4, 3]), Err((0, 1)));
        assert_eq!(broadcast(&[Some(&[2][..]), None]), Ok(None));
        // Three inputs: the error names the input that decided the clashing dim.
        assert_eq!(
            broadcast(&[Some(&[1, 3][..]), Some(&[2, 1][..]), Some(&[4][..])]),
            Err((0, 2))
        );
    }

    #[test]
    fn arithmetic_comparison_logic() {
        let none = Attrs::new();
        assert_eq!(
            infer("Add", &[f32(&[2, 3]), f32(&[3])], &none).unwrap(),
            vec![f32(&[2, 3])]
        );
        assert_eq!(
            infer("Sum", &[f32(&[1]), f32(&[4, 1]), f32(&[5])], &none).unwrap(),
            vec![f32(&[4, 5])]
        );
        assert_eq!(
            infer("Less", &[f32(&[-1, 3]), f32(&[1])], &none).unwrap(),
            vec![TensorMeta::new(DType::Bool, &[-1, 3])]
        );
        let e = infer(
            "Add",
            &[f32(&[2]), TensorMeta::new(DType::I64, &[2])],
            &none,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "Add: input 1: is int64, input 0 is float32");
        let e = infer("Mul", &[f32(&[2, 3]), f32(&[4, 3])], &none).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Mul: inputs 0 and 1 do not broadcast: [2, 3] and [4, 3]"
        );
        let e = infer("And", &[f32(&[1]), f32(&[1])], &none).unwrap_err();
        assert!(e.to_string().contains("the op takes bool"), "{e}");
        let e = infer("Add", &[f32(&[1])], &none).unwrap_err();
        assert_eq!(e.to_string(), "Add: expects 2 input(s), got 1");
        assert_eq!(
            infer("Relu", &[TensorMeta::unknown_rank(DType::F16)], &none).unwrap()[0].shape,
            None
        );
    }

    #[test]
    fn where_pow_clip_cast() {
        let none = Attrs::new();
        let cond = TensorMeta::new(DType::Bool, &[3, 1]);
        assert_eq!(
            infer("Where", &[cond.clone(), f32(&[1, 4]), f32(&[4])], &none).unwrap(),
            vec![f32(&[3, 4])]
        );
        assert!(infer("Where", &[f32(&[1]), f32(&[1]), f32(&[1])], &none).is_err());
        assert_eq!(
            infer("Pow", &[f32(&[2]), TensorMeta::new(DType::I32, &[])], &none).unwrap(),
            vec![f32(&[2])]
        );
        assert!(infer("Clip", &[f32(&[5]), f32(&[]), f32(&[2])], &none).is_err());
        // PRelu: per-channel slope before opset 7, broadcasting from opset 7.
        let mut old = Attrs::new();
        old.insert("onnx_opset".into(), Attr::Int(6));
        assert_eq!(
            infer("PRelu", &[f32(&[2, 3, 4, 5]), f32(&[3])], &old).unwrap(),
            [f32(&[2, 3, 4, 5])]
        );
        assert!(infer("PRelu", &[f32(&[2, 3, 4, 5]), f32(&[3])], &none).is_err());
        assert_eq!(
            infer("PRelu", &[f32(&[2, 3, 4, 5]), f32(&[5])], &none).unwrap(),
            [f32(&[2, 3, 4, 5])]
        );
        let mut to = Attrs::new();
        to.insert("to".into(), Attr::DType(DType::I64));
        assert_eq!(
            infer("Cast", &[f32(&[2])], &to).unwrap(),
            vec![TensorMeta::new(DType::I64, &[2])]
        );
        let e = infer("Cast", &[f32(&[2])], &none).unwrap_err();
        assert_eq!(e.to_string(), "Cast: attribute \"to\": is missing");
    }

    #[test]
    fn ge_names_are_registered_too() {
        let reg = OpRegistry::new();
        for name in [
            "RealDiv",
            "SelectV2",
            "LogicalAnd",
            "LogicalNot",
            "GreaterEqual",
            "LessEqual",
            "IsNan",
        ] {
            assert!(reg.get(name).is_some(), "{name}");
        }
        assert!(
            reg.get("NonMaxSuppression").is_none(),
            "only what the library has"
        );
    }
}
