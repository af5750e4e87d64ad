//! Constant folding at the ComputeGraph level: ops whose inputs are all known at lowering
//! time are evaluated on the host and become constants, so neither their kernels nor the
//! shape inference that depends on their values reach the ExecuteGraph.
//!
//! This is shape arithmetic above all: `Shape` of a tensor whose shape is static, and the
//! `Gather`, `Concat`, `Unsqueeze`, `Cast`, `Mul`, ... chains exporters build on top of it
//! to compute the target of a `Reshape` or `Expand`. The evaluators here are exact on the
//! types such chains use (every integer type and bool; the float types for Cast and
//! data movement) and say `None` for anything else, which leaves the node to run on the
//! device. The output shape always comes from the op's shape inference, so an evaluator
//! only produces bytes.
//!
//! A folded constant is stored in the `.exeg` and uploaded once by Init instead of being
//! computed on every execution, so weights that a model builds from constants (the ONNX
//! "light" models make every weight with `ConstantOfShape`) are folded however large, up
//! to [`MAX_FOLD_BYTES`] per node, a bound against a pathological file.

use half::{bf16, f16};

use crate::ops::ShapeValues;
use crate::ops::{Attr, DType, HostTensor};
use crate::ops::{Attrs, TensorMeta};

/// The largest output, in bytes, that folding produces.
pub const MAX_FOLD_BYTES: usize = 256 << 20;

/// Whether outputs of these metas may be folded: every one static, and all of them
/// within [`MAX_FOLD_BYTES`] together.
pub fn within_bound(outs: &[TensorMeta]) -> bool {
    let bytes = outs.iter().try_fold(0u64, |acc, m| {
        acc.checked_add(m.dtype.tensor_bytes(m.shape.as_ref()?)?)
    });
    bytes.is_some_and(|b| b <= MAX_FOLD_BYTES as u64)
}

/// Whether `op` can be folded knowing only its inputs' static shapes (not their values).
pub fn needs_only_shapes(op: &str) -> bool {
    matches!(op, "Shape" | "Size" | "Rank")
}

/// `values` as the little-endian bytes of an int64 or int32 tensor (Shape's, Size's and
/// Rank's output types); `None` for another type or a value int32 cannot hold.
fn ints(dtype: DType, values: &[i64]) -> Option<Vec<u8>> {
    match dtype {
        DType::I64 => Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        DType::I32 => values
            .iter()
            .map(|&v| i32::try_from(v).ok().map(i32::to_le_bytes))
            .collect::<Option<Vec<_>>>()
            .map(|v| v.concat()),
        _ => None,
    }
}

/// Evaluates `op` on host values. `inputs[i]` is `None` for an omitted optional input;
/// `shapes` are the input metas (static for a foldable node) and `outs` the inferred
/// output metas. Returns `None` when the op, its types or its size are not foldable.
pub fn fold(
    op: &str,
    attrs: &Attrs,
    inputs: &[Option<&HostTensor>],
    shapes: &[TensorMeta],
    outs: &[TensorMeta],
) -> Option<Vec<HostTensor>> {
    let out_shape = |i: usize| -> Option<Vec<i64>> {
        let m = outs.get(i)?;
        m.is_static().then(|| m.shape.clone()).flatten()
    };
    if !within_bound(outs) {
        return None;
    }
    let input = |i: usize| inputs.get(i).copied().flatten();
    let one = |data: Vec<u8>| -> Option<Vec<HostTensor>> {
        let t = HostTensor {
            dtype: outs.first()?.dtype,
            shape: out_shape(0)?,
            data: data.into(),
        };
        t.is_consistent().then(|| vec![t])
    };
    match op {
        // A declared input shape is not checked by any inference: a Size past i64 is
        // left to the device (which refuses it).
        "Shape" | "Rank" | "Size" => {
            let dims = shapes.first()?.shape.as_ref()?;
            let d = outs.first()?.dtype;
            match crate::ops::shape_values(op, attrs, dims)? {
                ShapeValues::Dims(v) => one(ints(d, v)?),
                ShapeValues::One(v) => one(ints(d, &[v])?),
            }
        }
        // The bytes stay; only the shape changes, and inference gave it.
        "Identity" | "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" => {
            one(input(0)?.data.to_vec())
        }
        "Concat" => {
            let axis = attr_int(attrs, "axis")?;
            let parts: Vec<&HostTensor> = (0..inputs.len()).map(input).collect::<Option<_>>()?;
            one(concat(&parts, axis)?)
        }
        "Gather" => one(gather(
            input(0)?,
            input(1)?,
            attr_int(attrs, "axis").unwrap_or(0),
        )?),
        "Cast" => {
            let to = outs.first()?.dtype;
            one(cast(input(0)?, to)?)
        }
        "ConstantOfShape" => {
            let n: usize = out_shape(0)?.iter().map(|&d| d as usize).product();
            let value = match attrs.get("value") {
                Some(Attr::Tensor(t)) if t.data.len() == t.dtype.size() => t.data.to_vec(),
                Some(_) => return None,
                None => vec![0u8; 4],
            };
            one(value.repeat(n))
        }
        // GE's Fill(dims, value) (what GE's ONNX plugin makes of ConstantOfShape) and
        // FillD(value; dims).
        "Fill" | "FillD" => {
            let value = input(if op == "Fill" { 1 } else { 0 })?;
            if value.data.len() != value.dtype.size() {
                return None;
            }
            let n: usize = out_shape(0)?.iter().map(|&d| d as usize).product();
            one(value.data.repeat(n))
        }
        "Range" => {
            let (s, l, d) = (input(0)?, input(1)?, input(2)?);
            let dt = s.dtype;
            if !DType::is_int(dt) {
                return None;
            }
            let (s, d) = (s.int_at(0)?, d.int_at(0)?);
            let _ = l.int_at(0)?;
            let n: usize = out_shape(0)?.iter().map(|&d| d as usize).product();
            let mut out = Vec::with_capacity(n * dt.size());
            for k in 0..n as i64 {
                put_int(&mut out, dt, s.checked_add(k.checked_mul(d)?)?);
            }
            one(out)
        }
        "Add" | "Sub" | "Mul" | "Div" | "Max" | "Min" | "Mod" => {
            let (a, b) = (input(0)?, input(1)?);
            let shape = out_shape(0)?;
            let f = |x: i64, y: i64| -> Option<i64> {
                match op {
                    "Add" => x.checked_add(y),
                    "Sub" => x.checked_sub(y),
                    "Mul" => x.checked_mul(y),
                    // ONNX integer Div truncates, as C does.
                    "Div" => x.checked_div(y),
                    "Max" => Some(x.max(y)),
                    "Min" => Some(x.min(y)),
                    // fmod = 0: the result takes the divisor's sign (Python's %).
                    _ if attr_int(attrs, "fmod").unwrap_or(0) == 0 => x
                        .checked_rem_euclid(y)
                        .map(|r| if r != 0 && y < 0 { r + y } else { r }),
                    _ => x.checked_rem(y),
                }
            };
            one(binary_int(a, b, &shape, a.dtype, f)?)
        }
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "LessEqual"
        | "GreaterEqual" => {
            let (a, b) = (input(0)?, input(1)?);
            let shape = out_shape(0)?;
            let f = |x: i64, y: i64| -> Option<i64> {
                Some(match op {
                    "Equal" => x == y,
                    "Less" => x < y,
                    "Greater" => x > y,
                    "LessOrEqual" | "LessEqual" => x <= y,
                    _ => x >= y,
                } as i64)
            };
            one(binary_int(a, b, &shape, DType::Bool, f)?)
        }
        "Neg" | "Abs" => {
            let a = input(0)?;
            let mut out = Vec::with_capacity(a.data.len());
            for k in 0..a.element_count()? {
                let x = a.int_at(k)?;
                put_int(
                    &mut out,
                    a.dtype,
                    if op == "Neg" {
                        x.checked_neg()?
                    } else {
                        x.checked_abs()?
                    },
                );
            }
            one(out)
        }
        _ => None,
    }
}

fn attr_int(attrs: &Attrs, name: &str) -> Option<i64> {
    attrs.get(name).and_then(Attr::as_int)
}

/// Appends `v` as one element of integer type `d`, wrapping as a C cast does.
fn put_int(out: &mut Vec<u8>, d: DType, v: i64) {
    match d {
        DType::I8 | DType::U8 => out.push(v as u8),
        DType::Bool => out.push((v != 0) as u8),
        DType::I16 | DType::U16 => out.extend((v as u16).to_le_bytes()),
        DType::I32 | DType::U32 => out.extend((v as u32).to_le_bytes()),
        _ => out.extend(v.to_le_bytes()),
    }
}

fn put_float(out: &mut Vec<u8>, d: DType, v: f64) {
    match d {
        DType::F32 => out.extend((v as f32).to_le_bytes()),
        DType::F64 => out.extend(v.to_le_bytes()),
        DType::F16 => out.extend(f16::from_f64(v).to_le_bytes()),
        DType::Bf16 => out.extend(bf16::from_f64(v).to_le_bytes()),
        DType::Bool => out.push((v != 0.0) as u8),
        // Float to integer truncates toward zero (C's conversion); NaN and out-of-range
        // saturate, as Rust's `as` does, where C leaves them undefined.
        _ => put_int(out, d, v as i64),
    }
}

fn cast(t: &HostTensor, to: DType) -> Option<Vec<u8>> {
    let n = t.element_count()?;
    let mut out = Vec::with_capacity(n * to.size());
    for k in 0..n {
        if DType::is_int(t.dtype) && DType::is_int(to) {
            put_int(&mut out, to, t.int_at(k)?);
        } else {
            put_float(&mut out, to, t.float_at(k)?);
        }
    }
    Some(out)
}

/// Concatenation along `axis` of tensors of one dtype.
fn concat(parts: &[&HostTensor], axis: i64) -> Option<Vec<u8>> {
    let first = parts.first()?;
    let rank = first.shape.len() as i64;
    let axis = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&axis) {
        return None;
    }
    let axis = axis as usize;
    let outer: usize = first.shape[..axis].iter().map(|&d| d as usize).product();
    let es = first.dtype.size();
    let mut out = Vec::new();
    for o in 0..outer {
        for p in parts {
            if p.dtype != first.dtype || p.shape.len() != first.shape.len() {
                return None;
            }
            let block: usize = p.shape[axis..]
                .iter()
                .map(|&d| d as usize)
                .product::<usize>()
                * es;
            out.extend_from_slice(p.data.get(o * block..(o + 1) * block)?);
        }
    }
    Some(out)
}

/// Gather along `axis` with integer indices; negative indices count from the end.
fn gather(data: &HostTensor, idx: &HostTensor, axis: i64) -> Option<Vec<u8>> {
    let rank = data.shape.len() as i64;
    let axis = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&axis) || !DType::is_int(idx.dtype) {
        return None;
    }
    let axis = axis as usize;
    let dim = data.shape[axis];
    let outer: usize = data.shape[..axis].iter().map(|&d| d as usize).product();
    let inner: usize = data.shape[axis + 1..]
        .iter()
        .map(|&d| d as usize)
        .product::<usize>()
        * data.dtype.size();
    let mut out = Vec::new();
    for o in 0..outer {
        for k in 0..idx.element_count()? {
            let mut i = idx.int_at(k)?;
            if i < 0 {
                i += dim;
            }
            if !(0..dim).contains(&i) {
                return None;
            }
            let at = (o * dim as usize + i as usize) * inner;
            out.extend_from_slice(data.data.get(at..at + inner)?);
        }
    }
    Some(out)
}

/// A broadcasting binary op over integer values; `shape` is the broadcast output shape.
fn binary_int(
    a: &HostTensor,
    b: &HostTensor,
    shape: &[i64],
    out_dtype: DType,
    f: impl Fn(i64, i64) -> Option<i64>,
) -> Option<Vec<u8>> {
    if !DType::is_int(a.dtype) || a.dtype != b.dtype {
        return None;
    }
    let n: usize = shape.iter().map(|&d| d as usize).product();
    let mut out = Vec::with_capacity(n * out_dtype.size());
    let mut pos = vec![0usize; shape.len()];
    for _ in 0..n {
        let x = a.int_at(broadcast_offset(&a.shape, shape, &pos))?;
        let y = b.int_at(broadcast_offset(&b.shape, shape, &pos))?;
        put_int(&mut out, out_dtype, f(x, y)?);
        // Odometer step over the output position.
        for d in (0..shape.len()).rev() {
            pos[d] += 1;
            if (pos[d] as i64) < shape[d] {
                break;
            }
            pos[d] = 0;
        }
    }
    Some(out)
}

/// The element offset in a tensor of shape `s` (right-aligned against `out`, dims of 1
/// broadcast) of output position `pos`.
fn broadcast_offset(s: &[i64], out: &[i64], pos: &[usize]) -> usize {
    let skip = out.len() - s.len().min(out.len());
    let mut off = 0usize;
    for (k, &d) in s.iter().enumerate() {
        let p = if d == 1 { 0 } else { pos[skip + k] };
        off = off * d.max(0) as usize + p;
    }
    off
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::i64s;

    #[test]
    fn rank_and_int32_shapes_fold() {
        let x = TensorMeta::new(DType::F32, &[2, 5]);
        let scalar = |d| TensorMeta::new(d, &[]);
        let rank = fold(
            "Rank",
            &Attrs::new(),
            &[None],
            std::slice::from_ref(&x),
            &[scalar(DType::I32)],
        );
        assert_eq!(rank.unwrap()[0].data, 2i32.to_le_bytes());
        let shape = fold(
            "Shape",
            &Attrs::new(),
            &[None],
            std::slice::from_ref(&x),
            &[TensorMeta::new(DType::I32, &[2])],
        );
        assert_eq!(shape.unwrap()[0].data, [2, 0, 0, 0, 5, 0, 0, 0]);
        let size = fold("Size", &Attrs::new(), &[None], &[x], &[scalar(DType::I32)]);
        assert_eq!(size.unwrap()[0].data, 10i32.to_le_bytes());
    }

    #[test]
    fn the_size_of_a_shape_past_i64_is_not_folded() {
        let big = TensorMeta::new(DType::F32, &[1 << 40, 1 << 40]);
        let out = TensorMeta::new(DType::I64, &[]);
        let fold_size = |m: &TensorMeta| {
            fold(
                "Size",
                &Attrs::new(),
                &[None],
                std::slice::from_ref(m),
                std::slice::from_ref(&out),
            )
        };
        assert_eq!(fold_size(&big), None);
        let small = TensorMeta::new(DType::F32, &[3, 4]);
        assert_eq!(fold_size(&small).unwrap()[0].data, 12i64.to_le_bytes());
    }

    fn meta(d: DType, s: &[i64]) -> TensorMeta {
        TensorMeta::new(d, s)
    }

    fn ints(t: &HostTensor) -> Vec<i64> {
        (0..t.element_count().unwrap())
            .map(|k| t.int_at(k).unwrap())
            .collect()
    }

    #[test]
    fn shape_gather_concat_chain() {
        let attrs = Attrs::new();
        let x = meta(DType::F32, &[2, 3, 4]);
        let s = fold("Shape", &attrs, &[None], &[x], &[meta(DType::I64, &[3])]).unwrap();
        assert_eq!(ints(&s[0]), [2, 3, 4]);
        let idx = i64s(&[-1, 0]);
        let mut ga = Attrs::new();
        ga.insert("axis".into(), Attr::Int(0));
        let g = fold(
            "Gather",
            &ga,
            &[Some(&s[0]), Some(&idx)],
            &[],
            &[meta(DType::I64, &[2])],
        )
        .unwrap();
        assert_eq!(ints(&g[0]), [4, 2]);
        let c = fold(
            "Concat",
            &ga,
            &[Some(&g[0]), Some(&i64s(&[7]))],
            &[],
            &[meta(DType::I64, &[3])],
        )
        .unwrap();
        assert_eq!(ints(&c[0]), [4, 2, 7]);
    }

    #[test]
    fn integer_arithmetic_broadcasts_and_checks() {
        let a = HostTensor {
            dtype: DType::I64,
            shape: vec![2, 1],
            data: [3i64, -7].iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let b = i64s(&[2, -2]);
        let out = [meta(DType::I64, &[2, 2])];
        let run =
            |op: &str| ints(&fold(op, &Attrs::new(), &[Some(&a), Some(&b)], &[], &out).unwrap()[0]);
        assert_eq!(run("Mul"), [6, -6, -14, 14]);
        assert_eq!(run("Div"), [1, -1, -3, 3], "truncates toward zero");
        assert_eq!(run("Mod"), [1, -1, 1, -1], "takes the divisor's sign");
        let zero = i64s(&[0, 1]);
        assert!(fold("Div", &Attrs::new(), &[Some(&a), Some(&zero)], &[], &out).is_none());
    }

    #[test]
    fn cast_and_shape_start_end() {
        let t = HostTensor {
            dtype: DType::F32,
            shape: vec![3],
            data: [1.9f32, -1.9, 300.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        };
        let c = fold(
            "Cast",
            &Attrs::new(),
            &[Some(&t)],
            &[],
            &[meta(DType::I32, &[3])],
        )
        .unwrap();
        assert_eq!(ints(&c[0]), [1, -1, 300]);
        let mut a = Attrs::new();
        a.insert("start".into(), Attr::Int(-2));
        let s = fold(
            "Shape",
            &a,
            &[None],
            &[meta(DType::F32, &[5, 6, 7])],
            &[meta(DType::I64, &[2])],
        )
        .unwrap();
        assert_eq!(ints(&s[0]), [6, 7]);
    }

    #[test]
    fn large_outputs_and_unknown_ops_are_left_alone() {
        let big = [meta(DType::F32, &[1 << 16, 1 << 16])];
        let shape = i64s(&[1 << 16, 1 << 16]);
        assert!(fold("ConstantOfShape", &Attrs::new(), &[Some(&shape)], &[], &big).is_none());
        assert!(fold("Conv", &Attrs::new(), &[], &[], &[meta(DType::F32, &[1])]).is_none());
    }
}
