//! Einsum: NumPy's Einstein summation over any number of operands. Shape and dtype
//! inference and CPU compute.
//!
//! An equation is parsed once into label ids: letters, and for `...` one id per
//! broadcast dim (right-aligned across operands, as NumPy broadcasts them). Compute
//! works on dense operands whose dims each carry one label:
//! 1. an input with a repeated label (a diagonal, a trace) becomes a strided copy whose
//!    stride for the label is the sum of its occurrences' strides;
//! 2. labels no other operand and not the output uses are summed out;
//! 3. operands are contracted left to right, each pair as one batched [`gemm`]: both are
//!    copied into [batch, free, contracted] order (the only data movement), which turns
//!    every contraction, transposed or not, into plain matrix products;
//! 4. the result is permuted (and broadcast) to the output's labels.

use std::collections::BTreeSet;

use half::{bf16, f16};

use super::operands::not_float;
use super::real::{Acc, MatLayout, Real, gemm, widen_all};
use crate::dispatch;
use crate::ops::tensor::{TensorMut, TensorRef};
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, UNKNOWN, meta};

/// Registers Einsum.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new("Einsum", infer_einsum).computes(compute_einsum));
}

/// Label ids: letters are 0..52; the k-th broadcast dim of `...` is 52 + k.
const ELLIPSIS_BASE: usize = 52;

/// One term of the equation as written: letters and at most one ellipsis.
#[derive(Debug, Clone, PartialEq)]
enum Sym {
    Letter(usize),
    Ellipsis,
}

/// The equation with every dim of every operand labelled.
#[derive(Debug, Clone, PartialEq)]
struct Equation {
    inputs: Vec<Vec<usize>>,
    output: Vec<usize>,
}

fn letter(c: char) -> Option<usize> {
    match c {
        'a'..='z' => Some(c as usize - 'a' as usize + 26),
        'A'..='Z' => Some(c as usize - 'A' as usize),
        _ => None,
    }
}

fn parse_term(term: &str) -> Result<Vec<Sym>, String> {
    let mut out = Vec::new();
    let mut rest = term;
    while let Some(c) = rest.chars().next() {
        if let Some(stripped) = rest.strip_prefix("...") {
            if out.contains(&Sym::Ellipsis) {
                return Err(format!("term {term:?} has two ellipses"));
            }
            out.push(Sym::Ellipsis);
            rest = stripped;
            continue;
        }
        out.push(Sym::Letter(letter(c).ok_or_else(|| {
            format!("{c:?} in term {term:?} is not a letter")
        })?));
        rest = &rest[c.len_utf8()..];
    }
    Ok(out)
}

/// Labels the equation for operands of the given ranks.
fn label(equation: &str, ranks: &[usize]) -> Result<Equation, String> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<Vec<Sym>> = lhs.split(',').map(parse_term).collect::<Result<_, _>>()?;
    if terms.len() != ranks.len() {
        return Err(format!("{} terms for {} inputs", terms.len(), ranks.len()));
    }
    // How many dims each operand's ellipsis stands for.
    let mut spans = Vec::with_capacity(terms.len());
    for (i, (t, &rank)) in terms.iter().zip(ranks).enumerate() {
        let letters = t.iter().filter(|s| matches!(s, Sym::Letter(_))).count();
        let has = t.contains(&Sym::Ellipsis);
        if rank < letters || (!has && rank != letters) {
            return Err(format!("term {i} has {letters} letters for rank {rank}"));
        }
        spans.push(rank - letters);
    }
    let width = spans.iter().copied().max().unwrap_or(0);
    if width > ELLIPSIS_BASE {
        return Err(format!(
            "{width} broadcast dims are more than {ELLIPSIS_BASE}"
        ));
    }
    let expand = |t: &[Sym], span: usize| -> Vec<usize> {
        t.iter()
            .flat_map(|s| match s {
                Sym::Letter(l) => vec![*l],
                Sym::Ellipsis => (width - span..width).map(|k| ELLIPSIS_BASE + k).collect(),
            })
            .collect()
    };
    let inputs: Vec<Vec<usize>> = terms
        .iter()
        .zip(&spans)
        .map(|(t, &s)| expand(t, s))
        .collect();
    let output = match rhs {
        Some(r) => {
            let t = parse_term(r)?;
            let out = expand(&t, width);
            let unique: BTreeSet<usize> = out.iter().copied().collect();
            if unique.len() != out.len() {
                return Err(format!("output {r:?} repeats a label"));
            }
            if let Some(l) = out.iter().find(|l| !inputs.iter().any(|i| i.contains(l))) {
                return Err(format!("output label {} is in no input", display(*l)));
            }
            out
        }
        None => {
            // NumPy's implicit output: the broadcast dims, then the letters used once,
            // in alphabetical (character code) order.
            let mut out: Vec<usize> = (0..width).map(|k| ELLIPSIS_BASE + k).collect();
            let mut once: Vec<usize> = (0..ELLIPSIS_BASE)
                .filter(|l| inputs.iter().flatten().filter(|x| *x == l).count() == 1)
                .collect();
            once.sort_unstable();
            out.extend(once);
            out
        }
    };
    Ok(Equation { inputs, output })
}

fn display(l: usize) -> String {
    match l {
        0..26 => ((b'A' + l as u8) as char).to_string(),
        26..52 => ((b'a' + (l - 26) as u8) as char).to_string(),
        _ => "...".into(),
    }
}

/// The size of every label (indexed by label id) from the operands' dims; a dim of 1
/// broadcasts against a larger one. Unknown dims (-1) stay unknown unless known
/// elsewhere.
fn label_sizes(eq: &Equation, shapes: &[&[i64]]) -> Result<Vec<i64>, String> {
    let mut size = vec![1i64; ELLIPSIS_BASE * 2];
    let mut seen = [false; ELLIPSIS_BASE * 2];
    let mut unknown = [false; ELLIPSIS_BASE * 2];
    for (labels, shape) in eq.inputs.iter().zip(shapes) {
        for (&l, &d) in labels.iter().zip(shape.iter()) {
            if d < 0 {
                unknown[l] = true;
                continue;
            }
            if seen[l] && size[l] != d && size[l] != 1 && d != 1 {
                return Err(format!("label {} is both {} and {d}", display(l), size[l]));
            }
            if !seen[l] || size[l] == 1 {
                size[l] = d;
            }
            seen[l] = true;
        }
    }
    for l in 0..size.len() {
        if unknown[l] && (!seen[l] || size[l] == 1) {
            size[l] = UNKNOWN;
        }
    }
    Ok(size)
}

fn equation_attr<'a>(ctx: &'a InferCtx) -> Result<&'a str, OpError> {
    let eq = ctx.attr_str("equation", "")?;
    if eq.is_empty() {
        return Err(ctx.attr_error("equation", "is required"));
    }
    Ok(eq)
}

fn infer_einsum(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, usize::MAX)?;
    let dtype = ctx.inputs[0].dtype;
    for (i, t) in ctx.inputs.iter().enumerate() {
        if t.dtype != dtype {
            return Err(ctx.input_error(i, format!("is {}, input 0 is {dtype}", t.dtype)));
        }
    }
    let eq = equation_attr(ctx)?;
    let shapes: Option<Vec<&[i64]>> = ctx.inputs.iter().map(|t| t.shape.as_deref()).collect();
    let Some(shapes) = shapes else {
        return Ok(meta(dtype, None));
    };
    let ranks: Vec<usize> = shapes.iter().map(|s| s.len()).collect();
    let e = label(eq, &ranks).map_err(|m| ctx.attr_error("equation", m))?;
    let size = label_sizes(&e, &shapes).map_err(|m| ctx.attr_error("equation", m))?;
    Ok(meta(
        dtype,
        Some(e.output.iter().map(|&l| size[l]).collect()),
    ))
}

fn compute_einsum(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f64, f16, bf16] => einsum::<T>(ctx, inputs, outputs),
        other => Err(not_float(ctx, 0, other)))
}

/// A dense operand whose dims each carry one distinct label.
#[derive(Debug, Clone)]
struct Operand<A> {
    labels: Vec<usize>,
    dims: Vec<usize>,
    data: Vec<A>,
}

fn row_major(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// The dense row-major copy of the elements at `sum(index[k] * strides[k])` for every
/// index of `dims`. The innermost dim runs as a plain strided loop; the outer ones step
/// an odometer, so the cost per element is one add.
fn strided_copy<A: Copy>(src: &[A], dims: &[usize], strides: &[usize]) -> Vec<A> {
    let total: usize = dims.iter().product();
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    let Some((&inner, outer)) = dims.split_last() else {
        out.push(src[0]);
        return out;
    };
    let inner_stride = strides[dims.len() - 1];
    let mut index = vec![0usize; outer.len()];
    let mut base = 0usize;
    loop {
        out.extend((0..inner).map(|k| src[base + k * inner_stride]));
        // Advance the odometer over the outer dims.
        let mut d = outer.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            index[d] += 1;
            base += strides[d];
            if index[d] < outer[d] {
                break;
            }
            base -= strides[d] * outer[d];
            index[d] = 0;
        }
    }
}

impl<A: Acc> Operand<A> {
    /// An input with labels possibly repeated: the diagonal over each repeated label.
    fn new(data: Vec<A>, labels: &[usize], dims: &[usize]) -> Result<Self, String> {
        let strides = row_major(dims);
        let mut unique: Vec<usize> = Vec::new();
        let mut udims = Vec::new();
        let mut ustrides: Vec<usize> = Vec::new();
        for (k, &l) in labels.iter().enumerate() {
            match unique.iter().position(|&u| u == l) {
                Some(p) => {
                    if udims[p] != dims[k] {
                        return Err(format!(
                            "label {} repeats with sizes {} and {}",
                            display(l),
                            udims[p],
                            dims[k]
                        ));
                    }
                    ustrides[p] += strides[k];
                }
                None => {
                    unique.push(l);
                    udims.push(dims[k]);
                    ustrides.push(strides[k]);
                }
            }
        }
        if unique.len() == labels.len() {
            return Ok(Operand {
                labels: unique,
                dims: udims,
                data,
            });
        }
        let data = strided_copy(&data, &udims, &ustrides);
        Ok(Operand {
            labels: unique,
            dims: udims,
            data,
        })
    }

    /// The operand with its dims in `order`, each of `sizes` (a dim of 1 broadcasts to
    /// its size).
    fn arranged(&self, order: &[usize], sizes: &[usize]) -> Vec<A> {
        let strides = row_major(&self.dims);
        let (dims, st): (Vec<usize>, Vec<usize>) = order
            .iter()
            .map(|l| {
                let p = self
                    .labels
                    .iter()
                    .position(|x| x == l)
                    .expect("arranged over the operand's own labels");
                let s = if self.dims[p] == 1 { 0 } else { strides[p] };
                (sizes[*l], s)
            })
            .unzip();
        strided_copy(&self.data, &dims, &st)
    }

    /// The stride of the labels `group` as one dim of the dense data, when they are
    /// adjacent dims in the same order and none broadcasts (a dim of 1 for a larger
    /// size); 0 for no label. What lets [`contract`] hand the data to the gemm as it is,
    /// with strides, instead of copying it into the gemm's order first.
    fn merged_stride(&self, group: &[usize], sizes: &[usize]) -> Option<usize> {
        let Some(&first) = group.first() else {
            return Some(0);
        };
        let p = self.labels.iter().position(|&x| x == first)?;
        for (k, &l) in group.iter().enumerate() {
            if self.labels.get(p + k) != Some(&l) || self.dims[p + k] != sizes[l] {
                return None;
            }
        }
        Some(self.dims[p + group.len()..].iter().product())
    }

    /// Sums out every label not in `keep`.
    fn sum_out(self, keep: &BTreeSet<usize>) -> Self {
        let (kept, gone): (Vec<usize>, Vec<usize>) =
            self.labels.iter().partition(|l| keep.contains(l));
        if gone.is_empty() {
            return self;
        }
        let dim = |l: &usize| self.dims[self.labels.iter().position(|x| x == l).unwrap_or(0)];
        let kdims: Vec<usize> = kept.iter().map(dim).collect();
        let block: usize = gone.iter().map(dim).product();
        let mut sizes = vec![1usize; ELLIPSIS_BASE * 2];
        for (l, d) in self.labels.iter().zip(&self.dims) {
            sizes[*l] = *d;
        }
        let order: Vec<usize> = kept.iter().chain(&gone).copied().collect();
        let arranged = self.arranged(&order, &sizes);
        let data: Vec<A> = if block == 0 {
            vec![A::ZERO; kdims.iter().product()]
        } else {
            arranged
                .chunks_exact(block)
                .map(|c| c.iter().fold(A::ZERO, |s, &x| s + x))
                .collect()
        };
        Operand {
            labels: kept,
            dims: kdims,
            data,
        }
    }
}

/// A · B over their shared labels: those in `keep` stay as batch dims, the others are
/// contracted. One gemm per batch index.
fn contract<A: Acc>(
    a: Operand<A>,
    b: Operand<A>,
    keep: &BTreeSet<usize>,
    sizes: &[usize],
) -> Operand<A> {
    let in_b = |l: &usize| b.labels.contains(l);
    let batch: Vec<usize> = a
        .labels
        .iter()
        .copied()
        .filter(|l| in_b(l) && keep.contains(l))
        .collect();
    let summed: Vec<usize> = a
        .labels
        .iter()
        .copied()
        .filter(|l| in_b(l) && !keep.contains(l))
        .collect();
    let a_free: Vec<usize> = a.labels.iter().copied().filter(|l| !in_b(l)).collect();
    let b_free: Vec<usize> = b
        .labels
        .iter()
        .copied()
        .filter(|l| !a.labels.contains(l))
        .collect();
    let prod = |ls: &[usize]| ls.iter().map(|&l| sizes[l]).product::<usize>();
    let (nb, m, k, n) = (prod(&batch), prod(&a_free), prod(&summed), prod(&b_free));
    let order_a: Vec<usize> = batch
        .iter()
        .chain(&a_free)
        .chain(&summed)
        .copied()
        .collect();
    let order_b: Vec<usize> = batch
        .iter()
        .chain(&summed)
        .chain(&b_free)
        .copied()
        .collect();
    let mut out = vec![A::ZERO; nb * m * n];
    // Each operand as a batch of matrices: its data as it is when each group of labels
    // is one dim of it (a transposed or batched operand, the common case: attention's
    // `bhqd,bhkd->bhqk`), else a copy in the gemm's order. Copying both operands, the
    // second one transposed, took half of a `bid,bjd->bij` einsum.
    let view = |o: &Operand<A>, g: [&[usize]; 3]| -> Option<[usize; 3]> {
        Some([
            o.merged_stride(g[0], sizes)?,
            o.merged_stride(g[1], sizes)?,
            o.merged_stride(g[2], sizes)?,
        ])
    };
    let (va, vb) = (
        view(&a, [&batch, &a_free, &summed]),
        view(&b, [&batch, &summed, &b_free]),
    );
    let (pa, pb);
    let (da, db, [sa0, sa1, sa2], [sb0, sb1, sb2]) = match (va, vb) {
        (Some(va), Some(vb)) => (&a.data, &b.data, va, vb),
        _ => {
            pa = a.arranged(&order_a, sizes);
            pb = b.arranged(&order_b, sizes);
            (&pa, &pb, [m * k, k, 1], [k * n, n, 1])
        }
    };
    for i in 0..nb {
        let la = MatLayout {
            rows: m,
            cols: k,
            offset: i * sa0,
            row_stride: sa1,
            col_stride: sa2,
        };
        let lb = MatLayout {
            rows: k,
            cols: n,
            offset: i * sb0,
            row_stride: sb1,
            col_stride: sb2,
        };
        gemm(
            A::ONE,
            da,
            la,
            db,
            lb,
            A::ZERO,
            &mut out,
            MatLayout::dense(m, n, i * m * n),
        );
    }
    let labels: Vec<usize> = batch
        .iter()
        .chain(&a_free)
        .chain(&b_free)
        .copied()
        .collect();
    Operand {
        dims: labels.iter().map(|&l| sizes[l]).collect(),
        labels,
        data: out,
    }
}

fn einsum<T: Real>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let ranks: Vec<usize> = inputs.iter().map(|t| t.rank()).collect();
    let eq = label(equation_attr(ctx)?, &ranks).map_err(|m| ctx.attr_error("equation", m))?;
    let shapes: Vec<Vec<i64>> = inputs
        .iter()
        .map(|t| t.shape.iter().map(|&d| d as i64).collect())
        .collect();
    let refs: Vec<&[i64]> = shapes.iter().map(Vec::as_slice).collect();
    let sizes: Vec<usize> = label_sizes(&eq, &refs)
        .map_err(|m| ctx.attr_error("equation", m))?
        .iter()
        .map(|&s| s.max(0) as usize)
        .collect();
    let mut ops = Vec::with_capacity(inputs.len());
    for (i, t) in inputs.iter().enumerate() {
        if t.dtype != T::DTYPE {
            return Err(ctx.input_error(i, format!("is {}, input 0 is {}", t.dtype, T::DTYPE)));
        }
        let data = widen_all(t.slice::<T>()?);
        ops.push(Operand::new(data, &eq.inputs[i], t.shape).map_err(|m| ctx.input_error(i, m))?);
    }
    let output: BTreeSet<usize> = eq.output.iter().copied().collect();
    // Labels still needed after operand `i`: the output's and those of later operands.
    let needed_after = |i: usize| -> BTreeSet<usize> {
        let mut s = output.clone();
        for o in &eq.inputs[i + 1..] {
            s.extend(o.iter().copied());
        }
        s
    };
    let mut ops = ops.into_iter().enumerate();
    let (_, first) = ops.next().ok_or_else(|| ctx.compute_error("no operands"))?;
    let mut needed = needed_after(0);
    let mut acc = first.sum_out(&needed);
    for (i, op) in ops {
        let mut keep_b = needed_after(i);
        keep_b.extend(acc.labels.iter().copied());
        let b = op.sum_out(&keep_b);
        needed = needed_after(i);
        let mut keep_a = needed.clone();
        keep_a.extend(b.labels.iter().copied());
        let a = acc.sum_out(&keep_a);
        acc = contract(a, b, &needed, &sizes);
    }
    let acc = acc.sum_out(&output);
    // Already in the output's order (a contraction's batch, A's, then B's labels, as
    // `bid,bjd->bij` has them): no copy.
    let in_order = acc.labels == eq.output
        && acc
            .dims
            .iter()
            .zip(&acc.labels)
            .all(|(&d, &l)| d == sizes[l]);
    let result = if in_order {
        acc.data
    } else {
        acc.arranged(&eq.output, &sizes)
    };
    let y = outputs[0].slice_mut::<T>()?;
    if y.len() != result.len() {
        return Err(ctx.compute_error(format!("{} results for {} outputs", result.len(), y.len())));
    }
    for (o, &r) in y.iter_mut().zip(&result) {
        *o = T::narrow(r);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run1;

    #[test]
    fn equations_label_broadcast_dims_and_implicit_outputs() {
        let e = label("...ii ->...i", &[3]).unwrap();
        assert_eq!(e.inputs, vec![vec![52, 34, 34]]);
        assert_eq!(e.output, vec![52, 34]);
        // Implicit: letters used once, alphabetical.
        let e = label("ij,jk", &[2, 2]).unwrap();
        assert_eq!(e.output, vec![26 + 8, 26 + 10]);
        assert!(
            label("ij,jk->il", &[2, 2])
                .unwrap_err()
                .contains("no input")
        );
        assert!(label("ij", &[3]).unwrap_err().contains("rank 3"));
    }

    /// Two-operand equations as models write them, against the sum over every
    /// assignment of the labels: operands the gemm reads in place with strides
    /// (batched, transposed, merged batch labels, an empty group) and ones it gets copied
    /// (broadcast dims, labels out of order within a group, a repeated label).
    #[test]
    fn contractions_read_in_place_or_copied_agree_with_the_definition() {
        // (equation, shape of A, shape of B), explicit outputs, no ellipsis.
        let cases: [(&str, &[usize], &[usize]); 9] = [
            ("bid,bjd->bij", &[3, 5, 7], &[3, 4, 7]),
            ("bij,bjk->bik", &[2, 5, 6], &[2, 6, 3]),
            ("bhqd,bhkd->bhqk", &[2, 3, 4, 5], &[2, 3, 6, 5]),
            ("ij,kj->ik", &[17, 9], &[5, 9]),
            ("bi,bj->bij", &[4, 3], &[4, 5]),
            ("ijk,jk->i", &[3, 4, 5], &[4, 5]),
            ("bid,bjd->bji", &[2, 3, 4], &[2, 5, 4]),
            ("bid,xjd->bij", &[3, 2, 4], &[1, 5, 4]),
            ("hbd,bhe->bhde", &[3, 2, 4], &[2, 3, 5]),
        ];
        for (eq, sa, sb) in cases {
            let (ins, out) = eq.split_once("->").unwrap();
            let (la, lb) = ins.split_once(',').unwrap();
            let value = |i: usize, salt: usize| ((i * 37 + salt * 11) % 23) as f64 * 0.25 - 2.5;
            let a: Vec<f64> = (0..sa.iter().product()).map(|i| value(i, 1)).collect();
            let b: Vec<f64> = (0..sb.iter().product()).map(|i| value(i, 2)).collect();
            // Every label's size; `x` broadcasts (size 1 in B, `b`'s size wherever read).
            let mut size = std::collections::BTreeMap::new();
            for (l, d) in la.chars().zip(sa).chain(lb.chars().zip(sb)) {
                let e = size.entry(l).or_insert(*d);
                *e = (*e).max(*d);
            }
            let labels: Vec<char> = size.keys().copied().collect();
            let at = |ls: &str, shape: &[usize], idx: &std::collections::BTreeMap<char, usize>| {
                ls.chars()
                    .zip(shape)
                    .fold(0, |o, (l, &d)| o * d + if d == 1 { 0 } else { idx[&l] })
            };
            let oshape: Vec<usize> = out.chars().map(|l| size[&l]).collect();
            let mut want = vec![0.0f64; oshape.iter().product()];
            let total: usize = labels.iter().map(|l| size[l]).product();
            for mut flat in 0..total {
                let mut idx = std::collections::BTreeMap::new();
                for l in labels.iter().rev() {
                    idx.insert(*l, flat % size[l]);
                    flat /= size[l];
                }
                want[at(out, &oshape, &idx)] += a[at(la, sa, &idx)] * b[at(lb, sb, &idx)];
            }
            let eq = eq.replace('x', "b");
            let got = run1(
                "Einsum",
                &[("equation", Attr::Str(eq.clone()))],
                &[Tensor::from_vec(sa, &a), Tensor::from_vec(sb, &b)],
            );
            assert_eq!(got.shape, oshape, "{eq}");
            for (g, w) in got.slice::<f64>().unwrap().iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-9 * (1.0 + w.abs()),
                    "{eq}: {g} against {w}"
                );
            }
        }
    }

    #[test]
    fn einsum_matmul_trace_diagonal_and_sum() {
        let a = Tensor::from_vec(&[2, 2], &[1.0f64, 2.0, 3.0, 4.0]);
        let b = Tensor::from_vec(&[2, 2], &[5.0f64, 6.0, 7.0, 8.0]);
        let mm = run1(
            "Einsum",
            &[("equation", Attr::Str("ij,jk->ik".into()))],
            &[a.clone(), b.clone()],
        );
        assert_eq!(mm.slice::<f64>().unwrap(), &[19.0, 22.0, 43.0, 50.0]);
        // Transposed result: (AB)^T.
        let t = run1(
            "Einsum",
            &[("equation", Attr::Str("ij,jk->ki".into()))],
            &[a.clone(), b],
        );
        assert_eq!(t.slice::<f64>().unwrap(), &[19.0, 43.0, 22.0, 50.0]);
        assert_eq!(
            run1(
                "Einsum",
                &[("equation", Attr::Str("ii".into()))],
                std::slice::from_ref(&a)
            )
            .slice::<f64>()
            .unwrap(),
            &[5.0]
        );
        assert_eq!(
            run1(
                "Einsum",
                &[("equation", Attr::Str("ii->i".into()))],
                std::slice::from_ref(&a)
            )
            .slice::<f64>()
            .unwrap(),
            &[1.0, 4.0]
        );
        assert_eq!(
            run1(
                "Einsum",
                &[("equation", Attr::Str("ij->j".into()))],
                std::slice::from_ref(&a)
            )
            .slice::<f64>()
            .unwrap(),
            &[4.0, 6.0]
        );
        // Outer product, then a three-operand chain sum: sum_ijk a_ij b_j c_k.
        let v = Tensor::from_vec(&[2], &[1.0f64, -1.0]);
        assert_eq!(
            run1(
                "Einsum",
                &[("equation", Attr::Str("i,j->ij".into()))],
                &[v.clone(), v.clone()]
            )
            .slice::<f64>()
            .unwrap(),
            &[1.0, -1.0, -1.0, 1.0]
        );
        assert_eq!(
            run1(
                "Einsum",
                &[("equation", Attr::Str("ij,j,k->".into()))],
                &[a, v.clone(), v]
            )
            .slice::<f64>()
            .unwrap(),
            &[0.0]
        );
        // Broadcast batch dims through the ellipsis: [2,1,2] x [3,2] -> [2,3].
        let x = Tensor::from_vec(&[2, 1, 2], &[1.0f32, 0.0, 0.0, 1.0]);
        let y = Tensor::from_vec(&[3, 2], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let r = run1(
            "Einsum",
            &[("equation", Attr::Str("...j,...j->...".into()))],
            &[x, y],
        );
        assert_eq!(r.shape, [2, 3]);
        assert_eq!(r.slice::<f32>().unwrap(), &[1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    }
}
