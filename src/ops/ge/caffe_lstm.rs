//! GE's LSTM, which is Caffe's LSTM layer (its prototype, graphengine `nn_calculation_ops.h`,
//! says "Compatible with the Caffe operator LSTM"), not ONNX's: computed by the internal op
//! `ge.LSTM`, which a GE graph's LSTM node is launched as (`shared.rs`). ONNX's LSTM keeps
//! the library's op of that name.
//!
//! The contract (`prototypes/nn_calculation_ops.txt`): inputs x, cont, w_x, bias, w_h, and
//! the optional x_static, h_0, c_0, w_x_static; outputs h, h_t, c_t; attributes
//! `num_output` (int, 0) and `expose_hidden` (bool, false). The header gives no shapes; they
//! and the arithmetic are Caffe's `LSTMLayer` (an unrolled recurrence of `LSTMUnit`s), whose
//! blobs the inputs are:
//!
//! - x `[T, N, I]` (time major), cont `[T, N]` (0 where a sequence begins at step t);
//! - w_x `[4H, I]`, bias `[4H]`, w_h `[4H, H]`; x_static `[N, S]` with w_x_static `[4H, S]`
//!   (both or neither); h_0 and c_0 `[1, N, H]`, read only with `expose_hidden`;
//! - per step, with `h'` the previous h times cont_t: the gates
//!   `g = w_x x_t + bias + w_x_static x_static + w_h h'`, split in four H-wide blocks in
//!   Caffe's order i, f, o, and the candidate: `i = sigmoid(g_0)`, `f = sigmoid(g_1)`,
//!   `o = sigmoid(g_2)`, `c~ = tanh(g_3)`; `c_t = cont_t f c_{t-1} + i c~`,
//!   `h_t = o tanh(c_t)`. The state before step 0 is h_0 and c_0 with `expose_hidden`,
//!   zeros without.
//! - h is every step's h_t `[T, N, H]`; h_t and c_t are the last step's `[1, N, H]`.
//!
//! H is w_h's second dim; a nonzero `num_output` must equal it (GE's default 0 leaves it
//! to the weights, as a Caffe net always gives it). rt2's choices where the header is
//! silent: float32 and float16 operands (the header's float16, and float32), computed in
//! float32 with the recurrent state kept in float32 and each output rounded once to x's
//! type; the int16/int32 bias of a quantized net is refused, and h_0 or c_0 given without
//! `expose_hidden` (Caffe has no such input then) is refused rather than guessed at.

use half::f16;

use crate::ops::shape::args::{input, output};
use crate::ops::{
    DType, InferCtx, OpError, OpRegistry, OpSpec, TensorMeta, TensorMut, TensorRef, UNKNOWN,
};

/// The internal op a GE graph's LSTM (Caffe's) runs as.
pub const CAFFE_LSTM: &str = "ge.LSTM";

/// Input positions, the prototype's order.
const X: usize = 0;
const CONT: usize = 1;
const W_X: usize = 2;
const BIAS: usize = 3;
const W_H: usize = 4;
const X_STATIC: usize = 5;
const H_0: usize = 6;
const C_0: usize = 7;
const W_X_STATIC: usize = 8;

/// Registers `ge.LSTM`.
pub fn register(reg: &mut OpRegistry) {
    reg.add(OpSpec::new(CAFFE_LSTM, infer).computes(lstm));
}

/// Whether optional input `k` is given: present and not the empty tensor that stands for
/// a left-out optional input.
fn given(inputs: &[TensorMeta], k: usize) -> bool {
    inputs
        .get(k)
        .is_some_and(|m| m.shape.as_deref() != Some(&[0][..]))
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16)
}

/// The dims of input `k`, or `None` while unknown; `Err` when its rank is not `rank`.
fn dims(ctx: &InferCtx, k: usize, rank: usize) -> Result<Option<Vec<i64>>, OpError> {
    match ctx.inputs[k].shape.clone() {
        Some(s) if s.len() != rank => Err(ctx.input_error(
            k,
            format!("has shape {s:?}; Caffe's LSTM takes it {rank}-D"),
        )),
        s => Ok(s),
    }
}

/// Checks that dim `a` of one input and dim `b` of another agree where both are known.
fn agree(ctx: &InferCtx, k: usize, a: i64, b: i64, what: &str) -> Result<(), OpError> {
    if a >= 0 && b >= 0 && a != b {
        return Err(ctx.input_error(k, format!("has {what} {a}, not {b}")));
    }
    Ok(())
}

/// The sizes the inputs say: (T, N, I, H, S), UNKNOWN where not known.
fn sizes(ctx: &InferCtx) -> Result<[i64; 5], OpError> {
    let u = UNKNOWN;
    let x = dims(ctx, X, 3)?.unwrap_or(vec![u, u, u]);
    let (t, n, i) = (x[0], x[1], x[2]);
    if let Some(c) = dims(ctx, CONT, 2)? {
        agree(ctx, CONT, c[0], t, "steps")?;
        agree(ctx, CONT, c[1], n, "batch")?;
    }
    let wh = dims(ctx, W_H, 2)?.unwrap_or(vec![u, u]);
    let h = wh[1];
    agree(ctx, W_H, wh[0], if h >= 0 { 4 * h } else { u }, "rows")?;
    let four_h = if h >= 0 { 4 * h } else { u };
    if let Some(w) = dims(ctx, W_X, 2)? {
        agree(ctx, W_X, w[0], four_h, "rows")?;
        agree(ctx, W_X, w[1], i, "columns")?;
    }
    if let Some(b) = dims(ctx, BIAS, 1)? {
        agree(ctx, BIAS, b[0], four_h, "length")?;
    }
    let num_output = ctx.attr_int("num_output", 0)?;
    if num_output != 0 {
        agree(ctx, W_H, h, num_output, "columns (H) against num_output")?;
    }
    let mut s = UNKNOWN;
    match (given(ctx.inputs, X_STATIC), given(ctx.inputs, W_X_STATIC)) {
        (false, false) => {}
        (true, true) => {
            let xs = dims(ctx, X_STATIC, 2)?.unwrap_or(vec![u, u]);
            agree(ctx, X_STATIC, xs[0], n, "batch")?;
            s = xs[1];
            if let Some(w) = dims(ctx, W_X_STATIC, 2)? {
                agree(ctx, W_X_STATIC, w[0], four_h, "rows")?;
                agree(ctx, W_X_STATIC, w[1], s, "columns")?;
            }
        }
        (true, false) => return Err(ctx.input_error(X_STATIC, "is given without w_x_static")),
        (false, true) => return Err(ctx.input_error(W_X_STATIC, "is given without x_static")),
    }
    let expose = ctx.attr_bool("expose_hidden", false)?;
    for k in [H_0, C_0] {
        match (given(ctx.inputs, k), expose) {
            (true, false) => {
                return Err(ctx.input_error(
                    k,
                    "is given without expose_hidden (Caffe's LSTM then starts from zeros \
                     and has no such input)",
                ));
            }
            (false, true) => {
                return Err(ctx.input_error(k, "is missing; expose_hidden needs h_0 and c_0"));
            }
            (true, true) => {
                if let Some(d) = dims(ctx, k, 3)? {
                    agree(ctx, k, d[0], 1, "dim 0")?;
                    agree(ctx, k, d[1], n, "batch")?;
                    agree(ctx, k, d[2], h, "width (H)")?;
                }
            }
            (false, false) => {}
        }
    }
    Ok([t, n, i, h, s])
}

fn infer(ctx: &InferCtx) -> Result<Vec<TensorMeta>, OpError> {
    ctx.arity(5, 9)?;
    let dtype = ctx.inputs[X].dtype;
    for k in 0..ctx.inputs.len() {
        let d = ctx.inputs[k].dtype;
        if (k == X || given(ctx.inputs, k)) && !is_float(d) {
            return Err(ctx.input_error(
                k,
                format!("is {d}; float32 and float16 are computed (a quantized LSTM is not)"),
            ));
        }
    }
    let [t, n, _, h, _] = sizes(ctx)?;
    let known = |d: &[i64]| d.iter().all(|&v| v >= 0).then(|| d.to_vec());
    let mut out = vec![
        TensorMeta {
            dtype,
            shape: known(&[t, n, h]),
        },
        TensorMeta {
            dtype,
            shape: known(&[1, n, h]),
        },
        TensorMeta {
            dtype,
            shape: known(&[1, n, h]),
        },
    ];
    out.truncate(ctx.outputs.clamp(1, 3));
    Ok(out)
}

/// A float32 or float16 tensor's values in float32.
fn values(ctx: &InferCtx, t: &TensorRef, k: usize) -> Result<Vec<f32>, OpError> {
    match t.dtype {
        DType::F32 => Ok(t.slice::<f32>()?.to_vec()),
        DType::F16 => Ok(t.slice::<f16>()?.iter().map(|v| v.to_f32()).collect()),
        d => Err(ctx.input_error(k, format!("is {d}, not float32 or float16"))),
    }
}

/// Writes `v` to a float32 or float16 output, rounding once.
fn store(ctx: &InferCtx, out: &mut TensorMut, v: &[f32]) -> Result<(), OpError> {
    if out.len() != v.len() {
        return Err(ctx.compute_error("an output does not hold what the LSTM gives"));
    }
    match out.dtype {
        DType::F32 => out.slice_mut::<f32>()?.copy_from_slice(v),
        DType::F16 => {
            for (o, &x) in out.slice_mut::<f16>()?.iter_mut().zip(v) {
                *o = f16::from_f32(x);
            }
        }
        d => return Err(ctx.compute_error(format!("output type {d} is not computed"))),
    }
    Ok(())
}

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

/// `acc[r] += sum_c w[r, c] v[c]` for the `acc.len()` rows of row-major `w`.
fn gemv(acc: &mut [f32], w: &[f32], v: &[f32]) {
    let cols = v.len();
    for (a, row) in acc.iter_mut().zip(w.chunks_exact(cols.max(1))) {
        *a += row.iter().zip(v).map(|(w, x)| w * x).sum::<f32>();
    }
}

fn lstm(ctx: &InferCtx, inputs: &[TensorRef], outputs: &mut [TensorMut]) -> Result<(), OpError> {
    let metas: Vec<TensorMeta> = inputs
        .iter()
        .map(|t| TensorMeta {
            dtype: t.dtype,
            shape: Some(t.shape.iter().map(|&d| d as i64).collect()),
        })
        .collect();
    let checked = InferCtx {
        op: ctx.op,
        inputs: &metas,
        values: ctx.values,
        attrs: ctx.attrs,
        outputs: ctx.outputs,
    };
    let [t, n, i, h, s] = sizes(&checked)?.map(|d| d as usize);
    let read = |k: usize| -> Result<Vec<f32>, OpError> { values(ctx, input(ctx, inputs, k)?, k) };
    let (x, cont, w_x, bias, w_h) = (read(X)?, read(CONT)?, read(W_X)?, read(BIAS)?, read(W_H)?);
    // The static input's gate contribution is the same at every step: once per sequence.
    let mut static_gates = vec![0.0f32; n * 4 * h];
    if given(&metas, X_STATIC) {
        let (xs, ws) = (read(X_STATIC)?, read(W_X_STATIC)?);
        for b in 0..n {
            gemv(
                &mut static_gates[b * 4 * h..(b + 1) * 4 * h],
                &ws,
                &xs[b * s..(b + 1) * s],
            );
        }
    }
    let (mut h_prev, mut c_prev) = if given(&metas, H_0) {
        (read(H_0)?, read(C_0)?)
    } else {
        (vec![0.0; n * h], vec![0.0; n * h])
    };
    let mut all_h = vec![0.0f32; t * n * h];
    let mut gates = vec![0.0f32; 4 * h];
    let mut conted = vec![0.0f32; h];
    for step in 0..t {
        for b in 0..n {
            let keep = cont[step * n + b];
            let hp = &h_prev[b * h..(b + 1) * h];
            for (o, &v) in conted.iter_mut().zip(hp) {
                *o = keep * v;
            }
            gates.copy_from_slice(&bias);
            for (g, &v) in gates.iter_mut().zip(&static_gates[b * 4 * h..]) {
                *g += v;
            }
            let xt = &x[(step * n + b) * i..(step * n + b + 1) * i];
            gemv(&mut gates, &w_x, xt);
            gemv(&mut gates, &w_h, &conted);
            for j in 0..h {
                let ig = sigmoid(gates[j]);
                let fg = sigmoid(gates[h + j]);
                let og = sigmoid(gates[2 * h + j]);
                let cand = gates[3 * h + j].tanh();
                let c = keep * fg * c_prev[b * h + j] + ig * cand;
                c_prev[b * h + j] = c;
                let hv = og * c.tanh();
                all_h[(step * n + b) * h + j] = hv;
            }
            h_prev[b * h..(b + 1) * h].copy_from_slice(&all_h[(step * n + b) * h..][..h]);
        }
    }
    store(ctx, output(ctx, outputs, 0)?, &all_h)?;
    if outputs.len() > 1 {
        store(ctx, output(ctx, outputs, 1)?, &h_prev)?;
    }
    if outputs.len() > 2 {
        store(ctx, output(ctx, outputs, 2)?, &c_prev)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
