//! How a GE op family registers its table of op types: each type with the inputs whose
//! values its inference reads, and the inference and compute functions the family's
//! `pick` gives it. One loop for every family's table, so a family states only its
//! table and its choice of functions.

use crate::ops::{ComputeFn, InferFn, OpRegistry, OpSpec};

/// An op family's table: each op type with the inputs whose values its inference reads.
pub type Table = [(&'static str, &'static [usize])];

/// Registers every op type of `ops` with the functions `pick` chooses for it.
pub fn register(reg: &mut OpRegistry, ops: &Table, pick: impl Fn(&str) -> (InferFn, ComputeFn)) {
    for &(name, reads) in ops {
        let (infer, compute) = pick(name);
        let mut spec = OpSpec::new(name, infer).computes(compute);
        if !reads.is_empty() {
            spec = spec.reading(reads);
        }
        reg.add(spec);
    }
}

/// An op family's table with each type's functions in it: the op type, the inputs whose
/// values its inference reads, its inference and its compute.
pub type Entries = [(&'static str, &'static [usize], InferFn, ComputeFn)];

/// Registers every op type of `ops` with its functions.
pub fn register_entries(reg: &mut OpRegistry, ops: &Entries) {
    for &(name, reads, infer, compute) in ops {
        let mut spec = OpSpec::new(name, infer).computes(compute);
        if !reads.is_empty() {
            spec = spec.reading(reads);
        }
        reg.add(spec);
    }
}

/// The op types of an [`Entries`] table.
pub fn entry_names(ops: &'static Entries) -> impl Iterator<Item = &'static str> {
    ops.iter().map(|e| e.0)
}

/// The op types of `ops`.
pub fn names(ops: &'static Table) -> impl Iterator<Item = &'static str> {
    ops.iter().map(|(name, _)| *name)
}
