//! Lowering of control flow: `If`/`Case` (a branch per subgraph, or the one branch a
//! constant selector picks), `While` and ONNX `Loop` into owner kernels whose subgraphs
//! read their inputs through `InnerData` and hand results out through `InnerNetOutput`.
//!
//! The second half of [`Lowering`]: [`super::convert`] converts a graph node by node and
//! hands each control-flow node here; the subgraphs are lowered by the same
//! [`Lowering::graph`], one level deeper.

use std::collections::BTreeSet;
use std::sync::Arc;

use compact_str::format_compact;
use smallvec::smallvec;

use super::builder::{Builder, Global, TVal, node};
use super::convert::{
    Bind, Converter, Lowering, Result, bound, for_each_value, merge_meta, node_error, stub,
};
use crate::exec::{KernelAttr, KernelGraph, KernelNodeId, Origin, ValueRef};
use crate::om::graph::{ComputeGraph, ComputeNode};
use crate::om::onnx::LOOP_CARRIED;
use crate::ops::{DType, HostTensor, TensorMeta};

impl Lowering<'_> {
    /// Binds `ins` as owner inputs of a subgraph: for each present input, its (shape,
    /// memory) pair is appended to `owner_inputs` and read in the subgraph by `InnerData`.
    fn pass_in(
        &mut self,
        name: &str,
        ins: &mut [Option<TVal>],
        owner_inputs: &mut Vec<ValueRef>,
    ) -> Vec<Option<usize>> {
        for_each_value(ins, |t| {
            self.b.shape_of(t);
            self.b.mem_of(t, name);
        });
        ins.iter()
            .map(|t| {
                let t = t.as_ref()?;
                let (s, m) = (t.shape?, t.mem?);
                owner_inputs.push(s);
                owner_inputs.push(m);
                Some(owner_inputs.len() - 2)
            })
            .collect()
    }

    /// In the current (sub)graph level: the tensors read through owner inputs at `at`.
    fn read_in(
        &mut self,
        ins: &[Option<TVal>],
        at: &[Option<usize>],
        owned: bool,
    ) -> Vec<Option<TVal>> {
        ins.iter()
            .zip(at)
            .map(|(t, &pos)| {
                let (t, pos) = (t.as_ref()?, pos?);
                let mut v = bound(&t.meta, t.konst);
                let s = self.inner_data(&format!("in{pos}/shape"), pos);
                let m = self.inner_data(&format!("in{pos}/mem"), pos + 1);
                v.shape = Some(s);
                v.mem = Some(m);
                if owned {
                    v.konst = None;
                    self.b.own(m, None);
                }
                Some(v)
            })
            .collect()
    }

    fn inner_data(&mut self, name: &str, index: usize) -> ValueRef {
        let mut d = node(name, "InnerData");
        d.outputs = 1;
        d.attrs
            .insert("index".into(), KernelAttr::Int(index as i64));
        ValueRef {
            node: self.b.add(d),
            output: 0,
        }
    }

    /// The node that owns subgraphs, with the captures appended and every input's writer
    /// ordered before it.
    #[allow(clippy::too_many_arguments)]
    fn owner_node(
        &mut self,
        name: &str,
        kernel: &str,
        mut inputs: Vec<ValueRef>,
        captures: Vec<Global>,
        outputs: u32,
        subgraphs: Vec<KernelGraph>,
        ins: &[Option<TVal>],
        origin: &Arc<Origin>,
    ) -> KernelNodeId {
        inputs.extend(self.b.capture_inputs(&captures));
        let mut o = node(name, kernel);
        o.inputs = inputs.into();
        o.outputs = outputs;
        o.subgraphs = subgraphs;
        o.origin = Some(origin.clone());
        let order: BTreeSet<KernelNodeId> = ins.iter().flatten().filter_map(|t| t.order).collect();
        o.control_inputs = order.into_iter().collect();
        self.b.add(o)
    }

    /// The owner's outputs as tensors of the current level, which owns their memory.
    fn owner_outputs(
        &mut self,
        id: KernelNodeId,
        metas: &[TensorMeta],
        first: u32,
    ) -> Vec<Option<TVal>> {
        metas
            .iter()
            .enumerate()
            .map(|(k, m)| {
                let k = first + 2 * k as u32;
                let mem = ValueRef {
                    node: id,
                    output: k + 1,
                };
                self.b.own(mem, Some(id));
                let mut t = TVal::new(m.clone());
                t.shape = Some(ValueRef {
                    node: id,
                    output: k,
                });
                t.mem = Some(mem);
                t.order = Some(id);
                Some(t)
            })
            .collect()
    }

    /// `If` and `Case`: a constant selector inlines its branch; otherwise the branch index
    /// is computed on the host and the owner node runs one of its subgraphs.
    pub(super) fn branch(
        &mut self,
        path: &str,
        n: &ComputeNode,
        ins: &mut [Option<TVal>],
        origin: &Arc<Origin>,
        conv: Converter,
    ) -> Result<Vec<Option<TVal>>> {
        let count = n.subgraphs.len();
        let want = if conv == Converter::If {
            count == 2
        } else {
            count >= 1
        };
        if !want {
            return Err(node_error(path, n, format!("has {count} subgraphs")));
        }
        let Some(Some(mut sel)) = ins.first().cloned() else {
            return Ok(vec![None; n.output_descs.len()]);
        };
        if ins
            .iter()
            .skip(1)
            .zip(n.inputs.iter().skip(1))
            .any(|(t, p)| p.is_some() && t.is_none())
        {
            return Ok(vec![None; n.output_descs.len()]);
        }
        let sub_path = |k: usize| format!("{path}/{}.{}", n.name, n.subgraphs[k].name);
        // Constant selector: the branch is known now.
        if let Some(id) = sel.konst {
            let v = fold_index(&self.b.consts[id as usize], conv, count).ok_or_else(|| {
                node_error(
                    path,
                    n,
                    "the branch selector is not an integer or bool scalar",
                )
            })?;
            return self.graph(&n.subgraphs[v], &sub_path(v), &mut Bind::Parent(ins));
        }
        let name = n.name.clone();
        let host = self
            .b
            .host_of(&mut sel, &name)
            .ok_or_else(|| node_error(path, n, "branch selector has no value"))?;
        let (gen_kernel, owner_kernel) = if conv == Converter::If {
            ("GenIndexForIf", "If")
        } else {
            ("GenIndexForCase", "Case")
        };
        let mut gi = node(format_compact!("{name}/{gen_kernel}"), gen_kernel);
        gi.inputs = smallvec![host];
        gi.outputs = 1;
        gi.origin = Some(origin.clone());
        if conv == Converter::Case {
            gi.attrs
                .insert("branches".into(), KernelAttr::Int(count as i64));
        }
        let gi = self.b.add(gi);
        let mut owner_inputs = vec![ValueRef {
            node: gi,
            output: 0,
        }];
        // Input 0 is the selector; the rest go in as (shape, memory) pairs.
        // The selector's host form serves later readers; it is not passed in.
        ins[0] = None;
        let at = self.pass_in(&name, ins, &mut owner_inputs);
        ins[0] = Some(sel);
        self.b.push_owner(&n.subgraphs[0].name, owner_inputs.len());
        let mut graphs = Vec::with_capacity(count);
        let mut metas: Option<Vec<TensorMeta>> = None;
        for (k, sub) in n.subgraphs.iter().enumerate() {
            if k > 0 {
                self.b.push_sibling(&sub.name);
            }
            let outs = self.branch_graph(sub, &sub_path(k), ins, &at)?;
            let Some(mut outs) = outs.into_iter().collect::<Option<Vec<TVal>>>() else {
                self.b.pop_level();
                continue;
            };
            metas = Some(match metas {
                None => outs.iter().map(|t| t.meta.clone()).collect(),
                Some(m) if m.len() == outs.len() => m
                    .iter()
                    .zip(&outs)
                    .map(|(a, t)| merge_meta(a, &t.meta))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        node_error(path, n, "branches give outputs of different types")
                    })?,
                Some(m) => {
                    return Err(node_error(
                        path,
                        n,
                        format!("branches give {} and {} outputs", m.len(), outs.len()),
                    ));
                }
            });
            let pairs = self.hand_out(&format!("{name}/out"), &mut outs);
            graphs.push(self.inner_output(pairs, &outs));
        }
        let captures = self.b.pop_owner();
        let Some(metas) = metas.filter(|_| graphs.len() == count) else {
            return Ok(vec![None; n.output_descs.len()]);
        };
        let id = self.owner_node(
            &name,
            owner_kernel,
            owner_inputs,
            captures,
            2 * metas.len() as u32,
            graphs,
            ins,
            origin,
        );
        Ok(self.owner_outputs(id, &metas, 0))
    }

    /// One branch of an `If` or `Case`, its level open, reading `ins` at owner inputs
    /// `at`. A branch whose shapes fail to infer for the inputs' static shapes may be one
    /// those inputs never take (Silero VAD's 8 kHz branch, given 16 kHz frames, where
    /// ONNX Runtime infers nothing ahead): it is lowered again with the inputs' dims
    /// known only at run time, where an error is one only if the branch runs. If that
    /// fails too, the first error stands.
    fn branch_graph(
        &mut self,
        sub: &ComputeGraph,
        path: &str,
        ins: &[Option<TVal>],
        at: &[Option<usize>],
    ) -> Result<Vec<Option<TVal>>> {
        let mark = self.b.mark();
        let reported = self.unsupported.len();
        let mut bound = self.read_in(ins, at, false);
        let error = match self.graph(sub, path, &mut Bind::Parent(&mut bound)) {
            Ok(outs) => return Ok(outs),
            Err(e) => e,
        };
        // Inputs whose dims the retry leaves to run time: those not constant, of known rank.
        let loosened = |t: &TVal| t.konst.is_none() && t.meta.shape.is_some();
        if !ins.iter().flatten().any(loosened) {
            return Err(error);
        }
        self.b.rewind(mark);
        self.unsupported.truncate(reported);
        let mut bound = self.read_in(ins, at, false);
        for t in bound.iter_mut().flatten().filter(|t| loosened(t)) {
            if let Some(dims) = &mut t.meta.shape {
                dims.fill(-1);
            }
        }
        self.graph(sub, path, &mut Bind::Parent(&mut bound))
            .map_err(|_| error)
    }

    /// Loop-carried metas: starting from the inputs', generalized until the body gives
    /// back what it was given (three rounds, then unknown rank).
    fn carried_metas(
        &mut self,
        body: &ComputeGraph,
        path: &str,
        mut metas: Vec<TensorMeta>,
        bind: &dyn Fn(&[TensorMeta]) -> Vec<Option<TVal>>,
        carried_out: &dyn Fn(usize) -> usize,
    ) -> Result<Vec<TensorMeta>> {
        let was_dry = self.b.dry;
        self.b.dry = true;
        let mut result = None;
        for _ in 0..3 {
            self.b.push_owner("trial", 0);
            let mut bound = bind(&metas);
            let outs = self.graph(body, path, &mut Bind::Parent(&mut bound));
            self.b.pop_level();
            self.b.pop_owner();
            let outs = outs?;
            let mut next = metas.clone();
            for (k, m) in next.iter_mut().enumerate() {
                if let Some(Some(t)) = outs.get(carried_out(k)) {
                    *m = merge_meta(m, &t.meta).unwrap_or(TensorMeta::unknown_rank(m.dtype));
                }
            }
            if next == metas {
                result = Some(metas.clone());
                break;
            }
            metas = next;
        }
        self.b.dry = was_dry;
        Ok(result.unwrap_or_else(|| {
            metas
                .iter()
                .map(|m| TensorMeta::unknown_rank(m.dtype))
                .collect()
        }))
    }

    /// A copy of loop input `t` that the loop takes over (the current level does not free
    /// it), with the loop-carried meta.
    fn take_over(&mut self, name: &str, t: &mut TVal, meta: &TensorMeta) -> Option<TVal> {
        let mut c = self.copy(name, t)?;
        if let Some(m) = c.mem {
            self.b.keep(m);
        }
        c.meta = meta.clone();
        Some(c)
    }

    /// Closes a subgraph level and its owner's captures after a part of the subgraph
    /// could not be lowered (the unsupported op is reported already): `outputs` unknowns.
    fn abandon_owner(&mut self, outputs: usize) -> Vec<Option<TVal>> {
        self.b.pop_level();
        self.b.pop_owner();
        vec![None; outputs]
    }

    /// GE's `While`: inputs are the loop variables; subgraph 0 (cond) gives the condition,
    /// subgraph 1 (body) the next values. The owner takes over copies of the inputs; the
    /// body owns (and frees) the values it is given, so a value it passes through unchanged
    /// costs nothing.
    pub(super) fn while_loop(
        &mut self,
        path: &str,
        n: &ComputeNode,
        ins: &mut [Option<TVal>],
        origin: &Arc<Origin>,
    ) -> Result<Vec<Option<TVal>>> {
        if n.subgraphs.len() != 2 {
            return Err(node_error(
                path,
                n,
                format!("has {} subgraphs, While needs 2", n.subgraphs.len()),
            ));
        }
        if ins.iter().any(Option::is_none) {
            return Ok(vec![None; n.output_descs.len()]);
        }
        let vars = ins;
        let name = n.name.clone();
        let nv = vars.len();
        let metas: Vec<TensorMeta> = vars.iter().flatten().map(|t| t.meta.clone()).collect();
        let body_path = format!("{path}/{}.{}", n.name, n.subgraphs[1].name);
        let metas = self.carried_metas(
            &n.subgraphs[1],
            &body_path,
            metas,
            &|m| m.iter().map(stub).collect(),
            &|k| k,
        )?;
        // Copies the owner takes over.
        let mut owner_inputs = Vec::new();
        let mut carried: Vec<Option<TVal>> = Vec::with_capacity(nv);
        for (k, v) in vars.iter_mut().flatten().enumerate() {
            carried.push(self.take_over(&format!("{name}/in_{k}"), v, &metas[k]));
        }
        let at = self.pass_in(&name, &mut carried, &mut owner_inputs);
        let cond_path = format!("{path}/{}.{}", n.name, n.subgraphs[0].name);
        self.b.push_owner(&n.subgraphs[0].name, owner_inputs.len());
        let mut bound_in = self.read_in(&carried, &at, false);
        let outs = self.graph(
            &n.subgraphs[0],
            &cond_path,
            &mut Bind::Parent(&mut bound_in),
        )?;
        let Some(Some(mut c)) = outs.into_iter().next() else {
            return Ok(self.abandon_owner(n.output_descs.len()));
        };
        let host = self.b.host_of(&mut c, &format!("{name}/cond"));
        let mut gc = node(format_compact!("{name}/GenCondForWhile"), "GenCondForWhile");
        gc.inputs = host.into_iter().collect();
        gc.outputs = 1;
        let gc = self.b.add(gc);
        let cond = self.inner_output(
            vec![ValueRef {
                node: gc,
                output: 0,
            }],
            &[],
        );

        self.b.push_sibling(&n.subgraphs[1].name);
        let bound_in = self.read_in(&carried, &at, true);
        let mut bound_in = bound_in;
        let outs = self.graph(
            &n.subgraphs[1],
            &body_path,
            &mut Bind::Parent(&mut bound_in),
        )?;
        let mut outs: Vec<TVal> = outs.into_iter().take(nv).flatten().collect();
        if outs.len() != nv {
            return Ok(self.abandon_owner(n.output_descs.len()));
        }
        let pairs = self.hand_out(&format!("{name}/next"), &mut outs);
        let body = self.inner_output(pairs, &outs);
        let captures = self.b.pop_owner();
        let id = self.owner_node(
            &name,
            "While",
            owner_inputs,
            captures,
            2 * nv as u32,
            vec![cond, body],
            &carried,
            origin,
        );
        Ok(self.owner_outputs(id, &metas, 0))
    }

    /// ONNX `Loop` (rt2's `Loop` kernel): inputs trip count M and condition (either may be
    /// omitted), then the loop-carried values, then captured outer values; the body gives
    /// the next condition, the next loop-carried values and per-iteration scan outputs,
    /// which the kernel stacks.
    pub(super) fn onnx_loop(
        &mut self,
        path: &str,
        n: &ComputeNode,
        ins: &mut [Option<TVal>],
        origin: &Arc<Origin>,
    ) -> Result<Vec<Option<TVal>>> {
        let Some(body) = n.subgraphs.first().filter(|_| n.subgraphs.len() == 1) else {
            return Err(node_error(
                path,
                n,
                format!("has {} subgraphs, Loop needs 1", n.subgraphs.len()),
            ));
        };
        if ins.len() < 2 {
            return Err(node_error(
                path,
                n,
                "needs the trip count and condition inputs (either may be empty)",
            ));
        }
        let nv = match n.attr_int(LOOP_CARRIED) {
            Some(c) if c >= 0 && (c as usize) + 2 <= ins.len() => c as usize,
            Some(c) => {
                return Err(node_error(
                    path,
                    n,
                    format!("{LOOP_CARRIED} {c} does not fit {} inputs", ins.len()),
                ));
            }
            None => ins.len() - 2,
        };
        let outputs = n.output_descs.len();
        if outputs < nv {
            return Err(node_error(
                path,
                n,
                format!("{nv} loop-carried values but {outputs} outputs"),
            ));
        }
        if ins.iter().skip(2).any(Option::is_none) {
            return Ok(vec![None; outputs]);
        }
        let name = n.name.clone();
        let body_path = format!("{path}/{}.{}", n.name, body.name);
        let scalar = |d: DType| TensorMeta::new(d, &[]);
        let captured: Vec<TensorMeta> = ins[2 + nv..]
            .iter()
            .flatten()
            .map(|t| t.meta.clone())
            .collect();
        let metas: Vec<TensorMeta> = ins[2..2 + nv]
            .iter()
            .flatten()
            .map(|t| t.meta.clone())
            .collect();
        let metas = self.carried_metas(
            body,
            &body_path,
            metas,
            &|m| {
                [stub(&scalar(DType::I64)), stub(&scalar(DType::Bool))]
                    .into_iter()
                    .chain(m.iter().map(stub))
                    .chain(captured.iter().map(stub))
                    .collect()
            },
            &|k| k + 1,
        )?;

        let stream = self.b.global(Global::Stream);
        let alloc = self.b.global(Global::Allocator);
        let limit = |b: &mut Builder, t: Option<&mut TVal>, default: HostTensor| match t {
            Some(t) => b.host_of(t, &name),
            None => {
                let id = b.add_const(default);
                let mut t = TVal::new(scalar(DType::I64));
                t.konst = Some(id);
                b.host_of(&mut t, &name)
            }
        };
        let m = limit(
            &mut self.b,
            ins[0].as_mut(),
            HostTensor {
                dtype: DType::I64,
                shape: vec![],
                data: i64::MAX.to_le_bytes().to_vec().into(),
            },
        );
        let c = limit(
            &mut self.b,
            ins[1].as_mut(),
            HostTensor {
                dtype: DType::Bool,
                shape: vec![],
                data: vec![1].into(),
            },
        );
        let (Some(m), Some(c)) = (m, c) else {
            return Ok(vec![None; outputs]);
        };
        let mut owner_inputs = vec![stream, alloc, m, c];
        // Loop-carried values: copies the owner takes over; captures: borrowed.
        let mut data: Vec<Option<TVal>> = vec![None, None];
        for (k, t) in ins.iter_mut().enumerate().skip(2) {
            let Some(t) = t.as_mut() else { continue };
            if k < 2 + nv {
                data.push(self.take_over(&format!("{name}/in_{k}"), t, &metas[k - 2]));
            } else {
                data.push(Some(t.clone()));
            }
        }
        let at = self.pass_in(&name, &mut data, &mut owner_inputs);
        // The captures' forms (an upload, say) serve later readers.
        for k in 2 + nv..ins.len() {
            ins[k].clone_from(&data[k]);
        }
        self.b.push_owner(&body.name, owner_inputs.len());
        let mut bound_in = Vec::with_capacity(data.len());
        let iter = self.inner_data("iteration", 0);
        let cond_in = self.inner_data("cond", 1);
        for (v, d) in [(iter, DType::I64), (cond_in, DType::Bool)] {
            let mut t = TVal::new(scalar(d));
            t.host = Some(v);
            t.shape = Some(self.b.const_shape(&[]));
            bound_in.push(Some(t));
        }
        let carried_in = self.read_in(&data[2..2 + nv], &at[2..2 + nv], true);
        let captured_in = self.read_in(&data[2 + nv..], &at[2 + nv..], false);
        bound_in.extend(carried_in);
        bound_in.extend(captured_in);
        let outs = self.graph(body, &body_path, &mut Bind::Parent(&mut bound_in))?;
        let Some(mut outs) = outs.into_iter().collect::<Option<Vec<TVal>>>() else {
            return Ok(self.abandon_owner(outputs));
        };
        if outs.len() != 1 + outputs {
            self.b.pop_level();
            self.b.pop_owner();
            return Err(node_error(
                path,
                n,
                format!(
                    "body gives {} outputs, the Loop has {outputs} (plus the condition)",
                    outs.len()
                ),
            ));
        }
        let mut c = outs.remove(0);
        let cond_out = self.b.host_of(&mut c, &format!("{name}/cond"));
        let scans: Vec<TensorMeta> = outs[nv..]
            .iter()
            .map(|t| TensorMeta {
                dtype: t.meta.dtype,
                shape: t
                    .meta
                    .shape
                    .as_ref()
                    .map(|s| [-1].into_iter().chain(s.iter().copied()).collect()),
            })
            .collect();
        let pairs = self.hand_out(&format!("{name}/next"), &mut outs);
        let g = self.inner_output(cond_out.into_iter().chain(pairs).collect(), &outs);
        let captures = self.b.pop_owner();
        let all: Vec<TensorMeta> = metas.into_iter().chain(scans).collect();
        let id = self.owner_node(
            &name,
            "Loop",
            owner_inputs,
            captures,
            2 * all.len() as u32,
            vec![g],
            &data,
            origin,
        );
        self.b
            .node_mut(id)
            .attrs
            .insert("carried".into(), KernelAttr::Int(nv as i64));
        Ok(self.owner_outputs(id, &all, 0))
    }
}

/// The branch an `If` or `Case` with a constant selector takes: If's true is 0 (then),
/// Case clamps an out-of-range index to the last branch as GE does.
fn fold_index(t: &HostTensor, conv: Converter, count: usize) -> Option<usize> {
    if t.element_count()? != 1 {
        return None;
    }
    // Any integer or bool type as itself, a float as truthy.
    let v = if t.dtype.is_int() {
        t.int_at(0)?
    } else {
        (t.float_at(0)? != 0.0) as i64
    };
    Some(match conv {
        Converter::If => usize::from(v == 0),
        _ if v < 0 || v as usize >= count => count - 1,
        _ => v as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(dtype: DType, data: &[u8]) -> HostTensor {
        HostTensor {
            dtype,
            shape: vec![],
            data: data.to_vec().into(),
        }
    }

    #[test]
    fn constant_selectors_pick_their_branch() {
        let t = scalar(DType::Bool, &[1]);
        assert_eq!(fold_index(&t, Converter::If, 2), Some(0), "true is then");
        let f = scalar(DType::F32, &0.0f32.to_le_bytes());
        assert_eq!(fold_index(&f, Converter::If, 2), Some(1), "0.0 is else");
        let i = scalar(DType::I32, &1i32.to_le_bytes());
        assert_eq!(fold_index(&i, Converter::Case, 3), Some(1));
        let neg = scalar(DType::I16, &(-1i16).to_le_bytes());
        assert_eq!(
            fold_index(&neg, Converter::Case, 3),
            Some(2),
            "out of range: last"
        );
        let big = scalar(DType::U8, &[200]);
        assert_eq!(
            fold_index(&big, Converter::Case, 256),
            Some(200),
            "u8 is unsigned"
        );
        let broken = scalar(DType::I64, &[]);
        assert_eq!(
            fold_index(&broken, Converter::Case, 3),
            None,
            "short data, no panic"
        );
    }
}
