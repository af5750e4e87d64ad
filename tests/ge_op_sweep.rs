//! Every op type computed with GE's contract, run on the host on inputs of many shapes
//! (scalars, empty, mismatched ranks, the wrong counts) and attributes at and around
//! their edges, built from its prototype: each run gives results or an error, never a
//! panic, and its results do not depend on what the output memory held (each computing
//! case runs twice, its outputs poisoned with 0x00 and then 0xFF). Bad input of any kind is an error naming the op; this sweep holds every GE
//! family to that without a hand-written case per op.

use std::panic::{AssertUnwindSafe, catch_unwind};

use rt2::ops::ge::coverage::ge_contract_ops;
use rt2::ops::ge::prototype::{PortKind, Prototype, prototype};
use rt2::ops::{Attr, AttrMap, DType, OpRegistry, Tensor};

/// The device type a prototype's type code names; float32 where it names none rt2 has.
fn dtype(code: &str) -> DType {
    match code {
        "F16" => DType::F16,
        "BF16" => DType::Bf16,
        "F64" => DType::F64,
        "I8" => DType::I8,
        "I16" => DType::I16,
        "I32" => DType::I32,
        "I64" => DType::I64,
        "U8" => DType::U8,
        "U16" => DType::U16,
        "U32" => DType::U32,
        "U64" => DType::U64,
        "B" => DType::Bool,
        _ => DType::F32,
    }
}

/// A tensor of `dtype` and `shape` holding small values: 0 and 1 for integers (valid
/// indices and counts in most places), a few signed values for floats.
fn tensor(dtype: DType, shape: &[usize]) -> Tensor {
    let mut t = Tensor::zeroed(dtype, shape);
    let width = dtype.size();
    for (i, chunk) in t.data.as_bytes_mut().chunks_exact_mut(width).enumerate() {
        let f = ((i % 7) as f32 - 3.0) * 0.5;
        match dtype {
            DType::F32 => chunk.copy_from_slice(&f.to_le_bytes()),
            DType::F64 => chunk.copy_from_slice(&f64::from(f).to_le_bytes()),
            DType::F16 => chunk.copy_from_slice(&half::f16::from_f32(f).to_le_bytes()),
            DType::Bf16 => chunk.copy_from_slice(&half::bf16::from_f32(f).to_le_bytes()),
            _ => chunk[0] = (i % 2) as u8,
        }
    }
    t
}

/// The attribute values tried for a required attribute of GE type `ty`.
fn values(ty: &str) -> Vec<Attr> {
    match ty {
        "Int" => vec![Attr::Int(1), Attr::Int(0), Attr::Int(-1), Attr::Int(3)],
        "Float" => vec![Attr::Float(0.5), Attr::Float(0.0), Attr::Float(-1.0)],
        "Bool" => vec![Attr::Int(0), Attr::Int(1)],
        "String" => vec![Attr::Str(String::new()), Attr::Str("NCHW".into())],
        "ListInt" | "ListListInt" => vec![
            Attr::Ints(vec![1, 1, 1, 1]),
            Attr::Ints(vec![0, 0, 0, 0]),
            Attr::Ints(vec![2]),
            Attr::Ints(vec![-1, 2]),
            Attr::Ints(vec![]),
        ],
        "ListFloat" => vec![Attr::Floats(vec![1.0]), Attr::Floats(vec![])],
        "Type" => vec![Attr::DType(DType::F32), Attr::DType(DType::I32)],
        _ => vec![Attr::Int(1)],
    }
}

/// The attribute sets tried: every required attribute at its first value, then each
/// attribute (required or optional) at each of its values with the others at their
/// first.
fn attr_sets(p: &Prototype) -> Vec<AttrMap> {
    let base: Vec<(String, Attr)> = p
        .attrs
        .iter()
        .filter(|a| a.required)
        .map(|a| (a.name.to_string(), values(a.ty).remove(0)))
        .collect();
    let mut sets = vec![base.iter().cloned().collect::<AttrMap>()];
    for a in &p.attrs {
        for v in values(a.ty) {
            let mut set: AttrMap = base.iter().cloned().collect();
            set.insert(a.name.to_string(), v);
            sets.push(set);
        }
    }
    sets.truncate(24);
    sets
}

/// The input lists tried: the prototype's inputs (a dynamic one twice), each at several
/// shapes; then one input too few and one too many.
fn input_sets(p: &Prototype) -> Vec<Vec<Tensor>> {
    let ports: Vec<DType> = p
        .inputs
        .iter()
        .flat_map(|port| {
            let d = dtype(port.dtypes.first().copied().unwrap_or("F32"));
            let n = match port.kind {
                PortKind::Dynamic => 2,
                _ => 1,
            };
            std::iter::repeat_n(d, n)
        })
        .collect();
    let shapes: [&[usize]; 6] = [&[2, 3, 4, 5], &[1, 2, 2, 2], &[], &[0], &[4], &[2, 0, 3]];
    let mut sets: Vec<Vec<Tensor>> = shapes
        .iter()
        .map(|s| ports.iter().map(|&d| tensor(d, s)).collect())
        .collect();
    // x 4-D with the other inputs small vectors (shape and index inputs).
    sets.push(
        ports
            .iter()
            .enumerate()
            .map(|(i, &d)| tensor(d, if i == 0 { &[1, 2, 3, 4] } else { &[2] }))
            .collect(),
    );
    let full: Vec<Tensor> = ports.iter().map(|&d| tensor(d, &[2, 2])).collect();
    if !full.is_empty() {
        sets.push(full[..full.len() - 1].to_vec());
    }
    let mut more = full;
    more.push(tensor(DType::F32, &[2, 2]));
    sets.push(more);
    sets
}

#[test]
fn every_ge_op_errors_instead_of_panicking_and_writes_all_its_outputs() {
    let reg = OpRegistry::new();
    // The sweep expects panics to be caught, not printed 1,000 times.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut panics = Vec::new();
    let mut unwritten = Vec::new();
    let mut runs = 0usize;
    let mut ok = 0usize;
    for op in ge_contract_ops() {
        let Some(p) = prototype(op) else { continue };
        let outputs = p.outputs.len().max(1);
        for inputs in input_sets(p) {
            for attrs in attr_sets(p) {
                runs += 1;
                let r = catch_unwind(AssertUnwindSafe(|| {
                    let a = reg.run_on_host_poisoned(op, &attrs, &inputs, outputs, 0x00);
                    let b = reg.run_on_host_poisoned(op, &attrs, &inputs, outputs, 0xFF);
                    (a, b)
                }));
                match r {
                    Ok((Ok(a), Ok(b))) => {
                        ok += 1;
                        let bytes = |t: &[Tensor]| -> Vec<Vec<u8>> {
                            t.iter().map(|t| t.data.as_bytes().to_vec()).collect()
                        };
                        if bytes(&a) != bytes(&b) {
                            let shapes: Vec<_> = inputs.iter().map(|t| t.shape.clone()).collect();
                            unwritten.push(format!("{op} on {shapes:?} with {attrs:?}"));
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let shapes: Vec<_> = inputs.iter().map(|t| t.shape.clone()).collect();
                        let why = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        panics.push(format!("{op} on {shapes:?} with {attrs:?}: {why}"));
                    }
                }
            }
        }
    }
    std::panic::set_hook(hook);
    eprintln!("{runs} runs, {ok} computed");
    // Some runs must compute, or the sweep would test only the first check of each op.
    assert!(ok * 20 > runs, "only {ok} of {runs} runs computed");
    panics.sort();
    panics.dedup_by(|a, b| a.split(' ').next() == b.split(' ').next());
    assert!(
        panics.is_empty(),
        "{} ops panicked, first case of each:\n{}",
        panics.len(),
        panics.join("\n")
    );
}
