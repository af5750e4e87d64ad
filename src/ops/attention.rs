//! Transformer blocks: Attention (ai.onnx opset 23/24: multi-head, grouped-query and
//! multi-query, with masks, causality, softcap, a KV cache and the scores as an output),
//! RotaryEmbedding, and Swish (the SiLU gate of transformer MLPs). Shape and dtype
//! inference and CPU compute.
//!
//! Attention computes one head at a time: the scores are one strided [`gemm`] straight
//! from Q and the key cache (3-D inputs are read in place, heads interleaved in the
//! hidden dim, never transposed into a copy), the probabilities a second. Heads run in
//! parallel when there is enough work. Float types compute in f32 (f64 for float64) and
//! round once per output element.

use half::{bf16, f16};
use rayon::prelude::*;

use crate::dispatch;
use crate::ops::DType;
use crate::ops::elementwise::vmath::Fun;
use crate::ops::linalg::{
    Acc, MatLayout, Real, absent, dim_add, dim_div, dim_mul, gemm, index_values, min_chunks,
    narrow_into, not_float, widen_all,
};
use crate::ops::tensor::{TensorMut, TensorRef};
use crate::ops::{InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, UNKNOWN, meta};

/// Registers the family.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new("Attention", infer_attention).computes(compute_attention));
    reg.add(OpSpec::new("RotaryEmbedding", infer_rotary).computes(compute_rotary));
    reg.add(OpSpec::new("Swish", infer_swish).computes(compute_swish));
}

/// Attention's sizes. Dims may be unknown (-1) during inference; compute converts them.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    batch: i64,
    q_heads: i64,
    kv_heads: i64,
    q_seq: i64,
    kv_seq: i64,
    /// Length of the past key/value cache (0 without one).
    past: i64,
    /// Head size of Q and K.
    head: i64,
    /// Head size of V.
    v_head: i64,
    /// Q, K and V are [batch, seq, heads * head] rather than [batch, heads, seq, head].
    three_d: bool,
}

/// Attention's geometry from its inputs' shapes, `None` while a rank is unknown.
fn geometry(ctx: &InferCtx) -> Result<Option<Geometry>, OpError> {
    let (Some(q), Some(k), Some(v)) = (
        ctx.inputs[0].shape.as_deref(),
        ctx.inputs[1].shape.as_deref(),
        ctx.inputs[2].shape.as_deref(),
    ) else {
        return Ok(None);
    };
    if q.len() != k.len() || q.len() != v.len() || !(q.len() == 3 || q.len() == 4) {
        return Err(ctx.input_error(
            0,
            format!("Q {q:?}, K {k:?} and V {v:?} must all be 3-D or all 4-D"),
        ));
    }
    let heads_attr = |name: &str| -> Result<Option<i64>, OpError> {
        match ctx.attrs.get(name) {
            None => Ok(None),
            Some(_) => {
                let h = ctx.attr_int(name, 0)?;
                if h < 1 {
                    return Err(ctx.attr_error(name, "must be positive"));
                }
                Ok(Some(h))
            }
        }
    };
    let past = match ctx.inputs.get(4) {
        m if absent(m) => 0,
        Some(TensorMeta { shape: Some(p), .. }) if p.len() == 4 => p[2],
        Some(TensorMeta { shape: Some(p), .. }) => {
            return Err(ctx.input_error(4, format!("past_key is {p:?}, expected 4-D")));
        }
        _ => UNKNOWN,
    };
    let g = if q.len() == 3 {
        let (Some(q_heads), Some(kv_heads)) =
            (heads_attr("q_num_heads")?, heads_attr("kv_num_heads")?)
        else {
            return Err(ctx.attr_error(
                "q_num_heads/kv_num_heads",
                "are required with 3-D Q, K and V",
            ));
        };
        for (i, s, h) in [(0, q, q_heads), (1, k, kv_heads), (2, v, kv_heads)] {
            if s[2] >= 0 && s[2] % h != 0 {
                return Err(ctx.input_error(
                    i,
                    format!("hidden size {} is not a multiple of {h} heads", s[2]),
                ));
            }
        }
        Geometry {
            batch: q[0],
            q_heads,
            kv_heads,
            q_seq: q[1],
            kv_seq: k[1],
            past,
            head: dim_div(q[2], q_heads),
            v_head: dim_div(v[2], kv_heads),
            three_d: true,
        }
    } else {
        Geometry {
            batch: q[0],
            q_heads: q[1],
            kv_heads: k[1],
            q_seq: q[2],
            kv_seq: k[2],
            past,
            head: q[3],
            v_head: v[3],
            three_d: false,
        }
    };
    // V must have K's batch, heads (4-D) and sequence; Q must have their batch.
    let (kv_seq_at, heads_at) = if g.three_d { (1, None) } else { (2, Some(1)) };
    let clash = |a: i64, b: i64| a >= 0 && b >= 0 && a != b;
    if clash(v[kv_seq_at], k[kv_seq_at])
        || heads_at.is_some_and(|h| clash(v[h], k[h]))
        || clash(v[0], k[0])
        || clash(q[0], k[0])
        || (!g.three_d && clash(q[3], k[3]))
    {
        return Err(ctx.input_error(2, format!("Q {q:?}, K {k:?} and V {v:?} do not agree")));
    }
    if g.kv_heads == 0 && g.q_heads != 0 {
        return Err(ctx.input_error(1, "K and V have no heads"));
    }
    if g.q_heads > 0 && g.kv_heads > 0 && g.q_heads % g.kv_heads != 0 {
        return Err(ctx.input_error(
            1,
            format!(
                "{} query heads are not a multiple of {} key/value heads",
                g.q_heads, g.kv_heads
            ),
        ));
    }
    Ok(Some(g))
}

/// Y, then the optional present key and value (the cache with the new tokens appended,
/// always 4-D) and the attention scores [batch, q_heads, q_seq, past + kv_seq].
///
/// The scores are taken where `qk_matmul_output_mode` says: 0 the scaled product, 1
/// after softcap, 2 after the mask, 3 the probabilities. Mode 0 follows the spec's
/// words, not ONNX's reference implementation, which softcaps in place and so gives
/// mode 1's values for mode 0 when a softcap is set (no backend test has that case).
fn infer_attention(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 7)?;
    let (qt, kt, vt) = (
        ctx.inputs[0].dtype,
        ctx.inputs[1].dtype,
        ctx.inputs[2].dtype,
    );
    if kt != qt {
        return Err(ctx.input_error(1, format!("K is {kt}, Q is {qt}")));
    }
    let count = ctx.outputs.clamp(1, 4);
    let Some(g) = geometry(ctx)? else {
        let mut v = vec![
            TensorMeta::unknown_rank(qt),
            TensorMeta::unknown_rank(kt),
            TensorMeta::unknown_rank(vt),
            TensorMeta::unknown_rank(qt),
        ];
        v.truncate(count);
        return Ok(v);
    };
    let overflow = || ctx.input_error(1, "the sequence or head dims overflow");
    let total = dim_add(g.past, g.kv_seq).ok_or_else(overflow)?;
    let y = if g.three_d {
        vec![
            g.batch,
            g.q_seq,
            dim_mul(g.q_heads, g.v_head).ok_or_else(overflow)?,
        ]
    } else {
        vec![g.batch, g.q_heads, g.q_seq, g.v_head]
    };
    let mut v = vec![
        TensorMeta::new(qt, &y),
        TensorMeta::new(kt, &[g.batch, g.kv_heads, total, g.head]),
        TensorMeta::new(vt, &[g.batch, g.kv_heads, total, g.v_head]),
        TensorMeta::new(qt, &[g.batch, g.q_heads, g.q_seq, total]),
    ];
    v.truncate(count);
    Ok(v)
}

/// Concrete sizes, as compute uses them.
struct Sizes {
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    q_seq: usize,
    kv_seq: usize,
    past: usize,
    total: usize,
    head: usize,
    v_head: usize,
    three_d: bool,
}

impl Sizes {
    fn of(ctx: &InferCtx, g: Geometry) -> Result<Self, OpError> {
        let u =
            |d: i64| usize::try_from(d).map_err(|_| ctx.compute_error("unknown dims at run time"));
        let (past, kv_seq) = (u(g.past)?, u(g.kv_seq)?);
        Ok(Sizes {
            batch: u(g.batch)?,
            q_heads: u(g.q_heads)?,
            kv_heads: u(g.kv_heads)?,
            q_seq: u(g.q_seq)?,
            kv_seq,
            past,
            total: past + kv_seq,
            head: u(g.head)?,
            v_head: u(g.v_head)?,
            three_d: g.three_d,
        })
    }
    /// Where head `h` of batch `b` starts in a Q/K/V input with `heads` heads of `seq`
    /// rows of `width`, and how far apart its rows are: 4-D inputs hold a head's rows
    /// together, 3-D inputs interleave the heads within each row.
    fn head_rows(
        &self,
        b: usize,
        h: usize,
        heads: usize,
        seq: usize,
        width: usize,
    ) -> (usize, usize) {
        if self.three_d {
            (b * seq * heads * width + h * width, heads * width)
        } else {
            ((b * heads + h) * seq * width, width)
        }
    }
}

/// The additive bias of the scores from `attn_mask`, broadcast to
/// [batch, q_heads, q_seq, total]: bool masks become 0 (attend) or -inf, and columns
/// past the mask's last dim are -inf (the mask may be shorter than the cache).
struct Bias<A> {
    values: Vec<A>,
    /// Strides of the mask for batch, head, query row and key column; 0 where it
    /// broadcasts.
    strides: [usize; 4],
    columns: usize,
}

impl<A: Acc> Bias<A> {
    fn of<T: Real<Acc = A>>(ctx: &InferCtx, mask: &TensorRef, s: &Sizes) -> Result<Self, OpError> {
        let values: Vec<A> = if mask.dtype == DType::Bool {
            mask.slice::<u8>()
                .map_err(|e| ctx.input_error(3, e.to_string()))?
                .iter()
                .map(|&m| if m != 0 { A::ZERO } else { A::NEG_INFINITY })
                .collect()
        } else if mask.dtype == T::DTYPE {
            widen_all(
                mask.slice::<T>()
                    .map_err(|e| ctx.input_error(3, e.to_string()))?,
            )
        } else {
            return Err(ctx.input_error(
                3,
                format!("attn_mask is {}; expected bool or {}", mask.dtype, T::DTYPE),
            ));
        };
        let target = [s.batch, s.q_heads, s.q_seq, s.total];
        if mask.rank() > 4 || mask.rank() == 0 {
            return Err(ctx.input_error(3, format!("attn_mask {:?} is not 1-D to 4-D", mask.shape)));
        }
        let mut dims = [1usize; 4];
        dims[4 - mask.rank()..].copy_from_slice(mask.shape);
        let columns = dims[3];
        let bad = columns > s.total || (0..3).any(|a| dims[a] != 1 && dims[a] != target[a]);
        if bad {
            return Err(ctx.input_error(
                3,
                format!(
                    "attn_mask {:?} does not broadcast to {target:?}",
                    mask.shape
                ),
            ));
        }
        let mut strides = [0usize; 4];
        let mut acc = 1;
        for a in (0..4).rev() {
            strides[a] = if dims[a] == 1 && a < 3 { 0 } else { acc };
            acc *= dims[a];
        }
        Ok(Bias {
            values,
            strides,
            columns,
        })
    }
}

/// The caches with the new tokens appended, [batch, kv_heads, total, head]: what the
/// present outputs are, and what the products read.
fn present<A: Acc>(s: &Sizes, new: &[A], past: Option<&Vec<A>>, width: usize) -> Vec<A> {
    let mut out = Vec::with_capacity(s.batch * s.kv_heads * s.total * width);
    for b in 0..s.batch {
        for h in 0..s.kv_heads {
            if let Some(p) = past {
                let at = (b * s.kv_heads + h) * s.past * width;
                out.extend_from_slice(&p[at..at + s.past * width]);
            }
            let (off, rs) = s.head_rows(b, h, s.kv_heads, s.kv_seq, width);
            for r in 0..s.kv_seq {
                out.extend_from_slice(&new[off + r * rs..off + r * rs + width]);
            }
        }
    }
    out
}

/// An Attention call's operands and attributes, read and checked: what each query head
/// computes with.
struct Heads<'a, A> {
    s: &'a Sizes,
    q: &'a [A],
    /// The caches with the new tokens appended (see [`present`]).
    keys: &'a [A],
    values: &'a [A],
    bias: Option<&'a Bias<A>>,
    /// `nonpad_kv_seqlen`: each batch entry's key count.
    lengths: Option<&'a [i64]>,
    scale: A,
    softcap: A,
    /// `qk_matmul_output_mode`: which intermediate the fourth output keeps.
    mode: i64,
    causal: bool,
    /// Query heads per key/value head.
    group: usize,
}

impl<A: Acc> Heads<'_, A> {
    /// One head: scores, the requested intermediate, probabilities, then Y's rows.
    fn head(&self, idx: usize, sc: &mut [A], stage: Option<&mut [A]>, y: &mut [A]) {
        let s = self.s;
        let (t, vp) = (s.total, s.v_head.max(1));
        let (b, h) = (idx / s.q_heads, idx % s.q_heads);
        let kv = h / self.group;
        let (qo, qrs) = s.head_rows(b, h, s.q_heads, s.q_seq, s.head);
        let lq = MatLayout::rows(s.q_seq, s.head, qo, qrs);
        let lk = MatLayout::dense(t, s.head, (b * s.kv_heads + kv) * t * s.head).t();
        // The spec scales Q and K by sqrt(scale) each (against overflow in half
        // precision); computing in f32 or wider, one scale as gemm's alpha is the same.
        gemm(
            self.scale,
            self.q,
            lq,
            self.keys,
            lk,
            A::ZERO,
            sc,
            MatLayout::dense(s.q_seq, t, 0),
        );
        let mut stage = stage;
        let mut save = |at: i64, sc: &[A]| {
            if self.mode == at
                && let Some(st) = stage.as_deref_mut()
            {
                st.copy_from_slice(sc);
            }
        };
        save(0, sc);
        let softcap = self.softcap;
        if softcap > A::ZERO {
            for x in sc.iter_mut() {
                *x = softcap * (*x / softcap).tanh();
            }
        }
        save(1, sc);
        let len = self
            .lengths
            .map_or(t, |l| usize::try_from(l[b]).unwrap_or(0).min(t));
        for (i, row) in sc.chunks_exact_mut(t).enumerate() {
            if let Some(m) = self.bias {
                let base = b * m.strides[0] + h * m.strides[1] + i * m.strides[2];
                for (j, x) in row.iter_mut().enumerate() {
                    *x += if j < m.columns {
                        m.values[base + j * m.strides[3]]
                    } else {
                        A::NEG_INFINITY
                    };
                }
            }
            // Causal: query i (after `past` cached tokens) sees keys up to past + i;
            // padding: keys from the batch's length on are not there.
            let visible = if self.causal {
                (s.past + i + 1).min(len)
            } else {
                len
            };
            for x in &mut row[visible..] {
                *x += A::NEG_INFINITY;
            }
        }
        save(2, sc);
        for row in sc.chunks_exact_mut(t) {
            softmax(row);
        }
        let lv = MatLayout::dense(t, s.v_head, (b * s.kv_heads + kv) * t * s.v_head);
        gemm(
            A::ONE,
            sc,
            MatLayout::dense(s.q_seq, t, 0),
            self.values,
            lv,
            A::ZERO,
            y,
            MatLayout::rows(s.q_seq, s.v_head, 0, vp),
        );
    }
}

fn compute_attention(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f16, bf16, f64] => attention::<T>(ctx, inputs, outputs),
        other => Err(not_float(ctx, 0, other)))
}

fn attention<T: Real>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let g = geometry(ctx)?.ok_or_else(|| ctx.compute_error("unknown ranks at run time"))?;
    let s = Sizes::of(ctx, g)?;
    let read = |i: usize| -> Result<Vec<T::Acc>, OpError> {
        let t = &inputs[i];
        if t.dtype != T::DTYPE {
            return Err(ctx.input_error(i, format!("is {}, Q is {}", t.dtype, T::DTYPE)));
        }
        Ok(widen_all(
            t.slice::<T>()
                .map_err(|e| ctx.input_error(i, e.to_string()))?,
        ))
    };
    let given = |i: usize| inputs.get(i).filter(|t| !(t.rank() == 1 && t.is_empty()));
    let (q, k, v) = (read(0)?, read(1)?, read(2)?);
    let (past_k, past_v) = match (given(4), given(5)) {
        (Some(_), Some(_)) => (Some(read(4)?), Some(read(5)?)),
        (None, None) => (None, None),
        _ => return Err(ctx.input_error(4, "past_key and past_value go together")),
    };
    if let Some(pv) = given(5)
        && pv.shape != [s.batch, s.kv_heads, s.past, s.v_head]
    {
        return Err(ctx.input_error(5, format!("past_value is {:?}", pv.shape)));
    }
    if let Some(pk) = given(4)
        && pk.shape != [s.batch, s.kv_heads, s.past, s.head]
    {
        return Err(ctx.input_error(4, format!("past_key is {:?}", pk.shape)));
    }
    let expected = |t: &TensorRef, width: usize| t.len() == s.batch * s.kv_seq * s.kv_heads * width;
    if !expected(&inputs[1], s.head)
        || !expected(&inputs[2], s.v_head)
        || q.len() != s.batch * s.q_heads * s.q_seq * s.head
    {
        return Err(ctx.input_error(1, "Q, K and V sizes do not agree"));
    }
    let keys = present(&s, &k, past_k.as_ref(), s.head);
    let values = present(&s, &v, past_v.as_ref(), s.v_head);
    for (o, cache) in [(1, &keys), (2, &values)] {
        if let Some(out) = outputs.get_mut(o) {
            narrow_into::<T>(cache, out.slice_mut::<T>()?);
        }
    }
    let bias = match given(3) {
        Some(m) => Some(Bias::of::<T>(ctx, m, &s)?),
        None => None,
    };
    let lengths = match given(6) {
        Some(t) => {
            let l = index_values(ctx, t, 6)?;
            if l.len() != s.batch {
                return Err(
                    ctx.input_error(6, format!("{} lengths for batch {}", l.len(), s.batch))
                );
            }
            Some(l)
        }
        None => None,
    };
    let scale = match ctx.attrs.get("scale") {
        Some(_) => ctx.attr_float("scale", 1.0)? as f64,
        None => 1.0 / (s.head as f64).sqrt(),
    };
    let softcap = ctx.attr_float("softcap", 0.0)? as f64;
    let mode = ctx.attr_int("qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&mode) {
        return Err(ctx.attr_error("qk_matmul_output_mode", format!("{mode} is not 0 to 3")));
    }
    let causal = ctx.attr_int("is_causal", 0)? != 0;
    let heads = s.batch * s.q_heads;
    if heads == 0 || s.q_seq == 0 || s.total == 0 {
        // Nothing to attend to (or nobody attending): Y and the scores stay zero.
        return Ok(());
    }
    let (t, vp) = (s.total, s.v_head.max(1));
    let want_stage = outputs.len() > 3 && mode < 3;
    let attend = Heads {
        s: &s,
        q: &q,
        keys: &keys,
        values: &values,
        bias: bias.as_ref(),
        lengths: lengths.as_deref(),
        scale: T::Acc::from_f64(scale),
        softcap: T::Acc::from_f64(softcap),
        mode,
        causal,
        group: s.q_heads / s.kv_heads,
    };
    // Heads are independent: each job takes enough heads to be worth a thread.
    let per_head = s.q_seq * t * (s.head + s.v_head);
    let jobs = min_chunks(per_head);
    let mut scores = vec![T::Acc::ZERO; heads * s.q_seq * t];
    let mut ys = vec![T::Acc::ZERO; heads * s.q_seq * vp];
    let mut stage = if want_stage {
        scores.clone()
    } else {
        Vec::new()
    };
    let (cs, cy) = (s.q_seq * t, s.q_seq * vp);
    if want_stage {
        scores
            .par_chunks_mut(cs)
            .zip(stage.par_chunks_mut(cs))
            .zip(ys.par_chunks_mut(cy))
            .enumerate()
            .with_min_len(jobs)
            .for_each(|(i, ((sc, st), y))| attend.head(i, sc, Some(st), y));
    } else {
        scores
            .par_chunks_mut(cs)
            .zip(ys.par_chunks_mut(cy))
            .enumerate()
            .with_min_len(jobs)
            .for_each(|(i, (sc, y))| attend.head(i, sc, None, y));
    }
    // Y from [batch, heads, q_seq, v_head] into the output's layout.
    let y = outputs[0].slice_mut::<T>()?;
    for idx in 0..heads {
        let (b, h) = (idx / s.q_heads, idx % s.q_heads);
        let (off, rs) = s.head_rows(b, h, s.q_heads, s.q_seq, s.v_head);
        for i in 0..s.q_seq {
            let src = &ys[(idx * s.q_seq + i) * vp..][..s.v_head];
            narrow_into::<T>(src, &mut y[off + i * rs..off + i * rs + s.v_head]);
        }
    }
    if let Some(out) = outputs.get_mut(3) {
        let src = if mode == 3 { &scores } else { &stage };
        narrow_into::<T>(src, out.slice_mut::<T>()?);
    }
    Ok(())
}

/// Softmax of one row in place, as NumPy computes it: a row of -inf (every key masked)
/// gives NaN, as the reference does.
fn softmax<A: Acc>(row: &mut [A]) {
    let max = row.iter().fold(A::NEG_INFINITY, |m, &x| m.max_nan(x));
    let mut sum = A::ZERO;
    for x in row.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    for x in row.iter_mut() {
        *x = *x / sum;
    }
}

/// RotaryEmbedding: Y has X's shape and type.
fn infer_rotary(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(3, 4)?;
    let x = &ctx.inputs[0];
    if let Some(s) = &x.shape
        && !(s.len() == 3 || s.len() == 4)
    {
        return Err(ctx.input_error(0, format!("is {s:?}, expected 3-D or 4-D")));
    }
    if x.shape.as_ref().is_some_and(|s| s.len() == 3) && ctx.attr_int("num_heads", 0)? < 1 {
        return Err(ctx.attr_error("num_heads", "is required (and positive) for 3-D input"));
    }
    Ok(vec![x.clone()])
}

fn compute_rotary(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    dispatch!(inputs[0].dtype, T in [f32, f16, bf16, f64] => rotary::<T>(ctx, inputs, outputs),
        other => Err(not_float(ctx, 0, other)))
}

/// Rotates the first `rotary_embedding_dim` elements of each head's vector by the angle
/// of its token's position: pairs are (i, i + dim/2), or (2i, 2i + 1) when interleaved.
fn rotary<T: Real>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let xs = &inputs[0];
    let x = xs.slice::<T>()?;
    let (batch, heads, seq, head, three_d) = match *xs.shape {
        [b, h, s, d] => (b, h, s, d, false),
        [b, s, hidden] => {
            let h = usize::try_from(ctx.attr_int("num_heads", 0)?).unwrap_or(0);
            if h == 0 || !hidden.is_multiple_of(h) {
                return Err(
                    ctx.attr_error("num_heads", format!("does not divide hidden size {hidden}"))
                );
            }
            (b, h, s, hidden / h, true)
        }
        _ => return Err(ctx.input_error(0, format!("is {:?}, expected 3-D or 4-D", xs.shape))),
    };
    let dim = match ctx.attr_int("rotary_embedding_dim", 0)? {
        0 => head,
        d => usize::try_from(d).unwrap_or(usize::MAX),
    };
    if dim > head || dim % 2 != 0 {
        return Err(ctx.attr_error(
            "rotary_embedding_dim",
            format!("{dim} must be even and at most the head size {head}"),
        ));
    }
    let half = dim / 2;
    let interleaved = ctx.attr_int("interleaved", 0)? != 0;
    let read = |i: usize| -> Result<&[T], OpError> {
        if inputs[i].dtype != T::DTYPE {
            return Err(ctx.input_error(i, format!("is {}, X is {}", inputs[i].dtype, T::DTYPE)));
        }
        inputs[i].slice::<T>()
    };
    let (cos, sin) = (read(1)?, read(2)?);
    let rank = if inputs
        .get(3)
        .is_some_and(|t| !(t.rank() == 1 && t.is_empty()))
    {
        2
    } else {
        3
    };
    if inputs[1].shape != inputs[2].shape
        || inputs[1].rank() != rank
        || inputs[1].shape.last() != Some(&half)
    {
        return Err(ctx.input_error(
            1,
            format!(
                "cos {:?} and sin {:?} caches must be {rank}-D and end in rotary_embedding_dim / 2 = {half}",
                inputs[1].shape, inputs[2].shape
            ),
        ));
    }
    // The cache row of each (batch, position): by position id, or the caches are
    // already [batch, seq, half].
    let rows: Vec<usize> = match inputs.get(3).filter(|t| !(t.rank() == 1 && t.is_empty())) {
        Some(p) => {
            let ids = index_values(ctx, p, 3)?;
            let max = inputs[1].shape[0];
            if ids.len() != batch * seq {
                return Err(ctx.input_error(
                    3,
                    format!("position_ids {:?} is not [{batch}, {seq}]", p.shape),
                ));
            }
            ids.iter()
                .map(|&i| usize::try_from(i).ok().filter(|&i| i < max))
                .collect::<Option<_>>()
                .ok_or_else(|| ctx.input_error(3, format!("a position id is outside 0..{max}")))?
        }
        None => {
            if inputs[1].shape != [batch, seq, half] {
                return Err(ctx.input_error(
                    1,
                    format!("without position_ids the caches are [{batch}, {seq}, {half}]"),
                ));
            }
            (0..batch * seq).collect()
        }
    };
    let y = outputs[0].slice_mut::<T>()?;
    y.copy_from_slice(x);
    for b in 0..batch {
        for h in 0..heads {
            for p in 0..seq {
                let at = if three_d {
                    (b * seq + p) * heads * head + h * head
                } else {
                    ((b * heads + h) * seq + p) * head
                };
                let (c, sn) = (
                    &cos[rows[b * seq + p] * half..][..half],
                    &sin[rows[b * seq + p] * half..][..half],
                );
                for i in 0..half {
                    let (i1, i2) = if interleaved {
                        (2 * i, 2 * i + 1)
                    } else {
                        (i, i + half)
                    };
                    let (x1, x2) = (x[at + i1].widen(), x[at + i2].widen());
                    let (cv, sv) = (c[i].widen(), sn[i].widen());
                    y[at + i1] = T::narrow(cv * x1 - sv * x2);
                    y[at + i2] = T::narrow(sv * x1 + cv * x2);
                }
            }
        }
    }
    Ok(())
}

fn infer_swish(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(1, 1)?;
    Ok(meta(ctx.inputs[0].dtype, ctx.inputs[0].shape.clone()))
}

fn compute_swish(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    use crate::ops::elementwise::num::Float;
    let fun = Fun::Swish(ctx.attr_float("alpha", 1.0)?);
    let (x, y) = (&inputs[0], &mut outputs[0]);
    // float32 and the 16-bit types run the vector math; float64 the scalar formula.
    match x.dtype {
        DType::F32 => f32::map_fun(fun, x.slice()?, y.slice_mut()?),
        DType::F16 => f16::map_fun(fun, x.slice()?, y.slice_mut()?),
        DType::Bf16 => bf16::map_fun(fun, x.slice()?, y.slice_mut()?),
        DType::F64 => return swish::<f64>(ctx, inputs, outputs),
        other => return Err(not_float(ctx, 0, other)),
    };
    Ok(())
}

/// Swish(x) = x * sigmoid(alpha * x) in float64, in chunks across threads for large
/// inputs.
fn swish<T: Real>(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let alpha = T::Acc::from_f64(ctx.attr_float("alpha", 1.0)? as f64);
    let x = inputs[0].slice::<T>()?;
    let y = outputs[0].slice_mut::<T>()?;
    let chunk = crate::ops::linalg::PAR_MIN_ELEMS;
    y.par_chunks_mut(chunk)
        .zip(x.par_chunks(chunk))
        .for_each(|(y, x)| {
            for (o, &v) in y.iter_mut().zip(x) {
                let v = v.widen();
                *o = T::narrow(v / (T::Acc::ONE + (-(alpha * v)).exp()));
            }
        });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Attr;
    use crate::ops::Tensor;
    use crate::ops::testing::run;
    use crate::ops::testing::try_run;

    use crate::ops::assert_close as close;

    #[test]
    fn attention_one_head_by_hand() {
        // One head of size 1: scores are q*k/sqrt(1); with q=1, keys [0, ln 3]
        // the weights are [1/4, 3/4] and Y = 1/4 * 4 + 3/4 * 8 = 7.
        let q = Tensor::from_vec(&[1, 1, 1, 1], &[1.0f32]);
        let k = Tensor::from_vec(&[1, 1, 2, 1], &[0.0f32, 3f32.ln()]);
        let v = Tensor::from_vec(&[1, 1, 2, 1], &[4.0f32, 8.0]);
        let out = run("Attention", &[], &[q.clone(), k.clone(), v.clone()], 1);
        close(out[0].slice::<f32>().unwrap(), &[7.0]);
        // A bool mask hiding the second key leaves the first: Y = 4.
        let mask = Tensor::from_vec(&[1, 2], &[1u8, 0]);
        let mask = Tensor {
            dtype: DType::Bool,
            ..mask
        };
        let out = run(
            "Attention",
            &[],
            &[q.clone(), k.clone(), v.clone(), mask],
            1,
        );
        close(out[0].slice::<f32>().unwrap(), &[4.0]);
        // The scores output, mode 3: the probabilities.
        let out = run(
            "Attention",
            &[("qk_matmul_output_mode", Attr::Int(3))],
            &[q, k, v],
            4,
        );
        close(out[3].slice::<f32>().unwrap(), &[0.25, 0.75]);
    }

    #[test]
    fn attention_cache_causality_and_grouped_heads() {
        // 3-D input, 2 query heads sharing 1 kv head, head size 1, a past of one token.
        // Query row 0 sees the past key and the first new key (causal, past 1).
        let q = Tensor::from_vec(&[1, 2, 2], &[0.0f32, 0.0, 0.0, 0.0]);
        let k = Tensor::from_vec(&[1, 2, 1], &[0.0f32, 0.0]);
        let v = Tensor::from_vec(&[1, 2, 1], &[2.0f32, 4.0]);
        let pk = Tensor::from_vec(&[1, 1, 1, 1], &[0.0f32]);
        let pv = Tensor::from_vec(&[1, 1, 1, 1], &[6.0f32]);
        let empty = Tensor::zeroed(DType::F32, &[0]);
        let attrs = [
            ("q_num_heads", Attr::Int(2)),
            ("kv_num_heads", Attr::Int(1)),
            ("is_causal", Attr::Int(1)),
        ];
        let out = run("Attention", &attrs, &[q, k, v, empty, pk, pv], 3);
        // Row 0 averages [6, 2] = 4; row 1 averages [6, 2, 4] = 4. Both heads alike.
        close(out[0].slice::<f32>().unwrap(), &[4.0, 4.0, 4.0, 4.0]);
        assert_eq!(out[1].shape, [1, 1, 3, 1]);
        close(out[2].slice::<f32>().unwrap(), &[6.0, 2.0, 4.0]);
    }

    #[test]
    fn attention_softcap_and_shapes() {
        let t = |s: &[i64]| TensorMeta::new(DType::F32, s);
        let attrs = [
            ("q_num_heads", Attr::Int(9)),
            ("kv_num_heads", Attr::Int(3)),
        ];
        let attrs = crate::ops::test_attrs(&attrs);
        let inputs = [t(&[2, 4, 72]), t(&[2, 6, 24]), t(&[2, 6, 30])];
        let ctx = InferCtx {
            op: "Attention",
            inputs: &inputs,
            values: &[],
            attrs: &attrs,
            outputs: 4,
        };
        let out = infer_attention(&ctx).unwrap();
        assert_eq!(out[0].shape.as_deref(), Some(&[2, 4, 90][..]));
        assert_eq!(out[2].shape.as_deref(), Some(&[2, 3, 6, 10][..]));
        assert_eq!(out[3].shape.as_deref(), Some(&[2, 9, 4, 6][..]));
        // softcap 1 caps a score of 100 at tanh(100) = 1: against a key scoring 0 the
        // weights are e/(1+e) and 1/(1+e).
        let q = Tensor::from_vec(&[1, 1, 1, 1], &[10.0f32]);
        let k = Tensor::from_vec(&[1, 1, 2, 1], &[10.0f32, 0.0]);
        let v = Tensor::from_vec(&[1, 1, 2, 1], &[1.0f32, 0.0]);
        let out = run("Attention", &[("softcap", Attr::Float(1.0))], &[q, k, v], 1);
        let e = std::f32::consts::E;
        close(out[0].slice::<f32>().unwrap(), &[e / (1.0 + e)]);
    }

    #[test]
    fn rotary_rotates_pairs() {
        // One head of 4: pairs (0, 2) and (1, 3); the angle at position 1 is 90 degrees
        // for the first pair and 0 for the second.
        let x = Tensor::from_vec(&[1, 1, 1, 4], &[1.0f32, 2.0, 3.0, 4.0]);
        let cos = Tensor::from_vec(&[2, 2], &[1.0f32, 1.0, 0.0, 1.0]);
        let sin = Tensor::from_vec(&[2, 2], &[0.0f32, 0.0, 1.0, 0.0]);
        let pos = Tensor::from_vec(&[1, 1], &[1i64]);
        let out = run(
            "RotaryEmbedding",
            &[],
            &[x.clone(), cos.clone(), sin.clone(), pos.clone()],
            1,
        );
        // (1, 3) rotated 90 degrees is (-3, 1); (2, 4) stays.
        close(out[0].slice::<f32>().unwrap(), &[-3.0, 2.0, 1.0, 4.0]);
        let out = run(
            "RotaryEmbedding",
            &[("interleaved", Attr::Int(1))],
            &[x, cos, sin, pos],
            1,
        );
        // Pairs (0, 1) by 90 degrees -> (-2, 1); (2, 3) unrotated.
        close(out[0].slice::<f32>().unwrap(), &[-2.0, 1.0, 3.0, 4.0]);
        let bad = Tensor::from_vec(&[1, 1], &[7i64]);
        let x = Tensor::from_vec(&[1, 1, 1, 4], &[1.0f32; 4]);
        let cos = Tensor::from_vec(&[2, 2], &[1.0f32; 4]);
        assert!(
            try_run("RotaryEmbedding", &[], &[x, cos.clone(), cos, bad], 1)
                .unwrap_err()
                .to_string()
                .contains("position id")
        );
    }

    #[test]
    fn swish_is_x_sigmoid_alpha_x() {
        let x = Tensor::from_vec(&[3], &[0.0f32, 1.0, -2.0]);
        let out = run("Swish", &[("alpha", Attr::Float(2.0))], &[x], 1);
        let s = |v: f32| v / (1.0 + (-2.0 * v).exp());
        close(out[0].slice::<f32>().unwrap(), &[0.0, s(1.0), s(-2.0)]);
    }
}
