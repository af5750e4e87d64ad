//! Constant folding on KernelGraphs: a pure kernel whose inputs are all `Const` nodes is
//! evaluated at lowering time and replaced by a `Const` of its result.
//!
//! The converters already give a static tensor's `AllocMemHbm` its byte size as an
//! attribute (they know it), so this pass is the general rule behind that shortcut: a
//! `CalcTensorSizeFromShape` of a `Const` shape becomes a `Const` byte size, and an
//! `AllocMemHbm` reading a `Const` size takes it as its `size` attribute. (Static-shape
//! nodes never get an `InferShape`: the converters already ran the op's inference.) A
//! folded node keeps its id, so nothing that reads it changes; its former producers may
//! become dead and go with dead-node elimination.

use crate::exec::{KernelAttr, KernelGraph};
use crate::ops::DType;

/// Folds the foldable nodes of `g` and its subgraphs; returns how many were folded.
pub fn fold_constants(g: &mut KernelGraph) -> usize {
    let mut count = 0;
    for n in &mut g.nodes {
        for s in &mut n.subgraphs {
            count += fold_constants(s);
        }
    }
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        if n.kernel != "CalcTensorSizeFromShape" || n.inputs.len() != 1 {
            continue;
        }
        let Some(src) = g.nodes.get(n.inputs[0].node.index()) else {
            continue;
        };
        let (Some(dims), Some(dtype)) = (
            src.attrs
                .get("shape")
                .and_then(KernelAttr::as_ints)
                .filter(|_| src.kernel == "Const"),
            n.attrs
                .get("dtype")
                .and_then(KernelAttr::as_str)
                .and_then(DType::from_name),
        ) else {
            continue;
        };
        let Some(size) = dtype.tensor_bytes(dims).and_then(|s| i64::try_from(s).ok()) else {
            continue;
        };
        let n = &mut g.nodes[i];
        n.kernel = "Const".into();
        n.class = crate::exec::KernelClass::Normal;
        n.inputs.clear();
        n.control_inputs.clear();
        n.attrs.clear();
        n.attrs.insert("size".into(), KernelAttr::Int(size));
        count += 1;
    }
    // An allocation of a constant size carries the size as its attribute: one node and one
    // value slot fewer per static tensor.
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        if n.kernel != "AllocMemHbm" || n.inputs.len() != 2 {
            continue;
        }
        let Some(size) = g
            .nodes
            .get(n.inputs[1].node.index())
            .filter(|src| src.kernel == "Const")
            .and_then(|src| src.attr_int("size"))
        else {
            continue;
        };
        let n = &mut g.nodes[i];
        n.inputs.truncate(1);
        n.attrs.insert("size".into(), KernelAttr::Int(size));
        count += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::passes::test_node;

    #[test]
    fn size_of_a_constant_shape_becomes_a_constant() {
        let mut g = KernelGraph::new("g");
        let mut shape = test_node("s", "Const", &[], &[]);
        shape
            .attrs
            .insert("shape".into(), KernelAttr::Ints(vec![2, 3]));
        g.add(shape);
        let mut calc = test_node("c", "CalcTensorSizeFromShape", &[0], &[]);
        calc.attrs
            .insert("dtype".into(), KernelAttr::Str("float16".into()));
        g.add(calc);
        let mut dynamic = test_node("c2", "CalcTensorSizeFromShape", &[2], &[]);
        dynamic
            .attrs
            .insert("dtype".into(), KernelAttr::Str("float32".into()));
        g.add(test_node("infer", "InferShape", &[], &[]));
        g.add(dynamic);
        g.add(test_node("allocator", "InnerData", &[], &[]));
        g.add(test_node("a", "AllocMemHbm", &[4, 1], &[]));
        g.add(test_node("a2", "AllocMemHbm", &[4, 3], &[]));
        assert_eq!(fold_constants(&mut g), 2);
        assert_eq!(g.nodes[1].kernel, "Const");
        assert_eq!(g.nodes[1].attr_int("size"), Some(12));
        assert!(g.nodes[1].inputs.is_empty());
        assert_eq!(
            g.nodes[3].kernel, "CalcTensorSizeFromShape",
            "reads InferShape"
        );
        assert_eq!(g.nodes[5].attr_int("size"), Some(12));
        assert_eq!(g.nodes[5].inputs.len(), 1, "the size input is gone");
        assert_eq!(g.nodes[6].inputs.len(), 2, "a run-time size stays an input");
    }
}
