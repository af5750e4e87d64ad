//! The compute of LSTM, GRU and RNN: every direction, `sequence_lens`, initial states,
//! peepholes, `clip`, `input_forget`, `linear_before_reset`, the `activations` list and
//! both layouts.
//!
//! The input projection of all time steps is one GEMM per direction (`X . W^T`, with the
//! biases folded in); each step then adds `H_{t-1} . R^T`, another GEMM over the batch,
//! and applies the gates row by row. An LSTM with the default activations and no
//! peepholes (every exported `nn.LSTM`) runs in float32 on rt2's GEMM kernels and vector
//! math, as ONNX Runtime does ([`Recurrence::direction_f32`]); every other form runs in
//! f64 and is rounded once into the outputs.

use crate::ops::nn::gemm::{Mat, gemm};
use crate::ops::nn::scalar::{read_f64s, write_f64s};
use crate::ops::{InferCtx, OpError, TensorMut, TensorRef};

/// An activation function with its alpha and beta.
#[derive(Debug, Clone, Copy)]
enum Act {
    Sigmoid,
    Tanh,
    Relu,
    Affine(f64, f64),
    LeakyRelu(f64),
    ThresholdedRelu(f64),
    ScaledTanh(f64, f64),
    HardSigmoid(f64, f64),
    Elu(f64),
    Softsign,
    Softplus,
}

impl Act {
    #[inline]
    fn apply(self, x: f64) -> f64 {
        match self {
            Act::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Act::Tanh => x.tanh(),
            Act::Relu => x.max(0.0),
            Act::Affine(a, b) => a * x + b,
            Act::LeakyRelu(a) => {
                if x >= 0.0 {
                    x
                } else {
                    a * x
                }
            }
            Act::ThresholdedRelu(a) => {
                if x > a {
                    x
                } else {
                    0.0
                }
            }
            Act::ScaledTanh(a, b) => a * (b * x).tanh(),
            Act::HardSigmoid(a, b) => (a * x + b).clamp(0.0, 1.0),
            Act::Elu(a) => {
                if x >= 0.0 {
                    x
                } else {
                    a * (x.exp() - 1.0)
                }
            }
            Act::Softsign => x / (1.0 + x.abs()),
            Act::Softplus => (1.0 + x.exp()).ln(),
        }
    }
}

/// The `activations` for each direction, `per_dir` each, with the defaults of `op`;
/// `activation_alpha`/`activation_beta` are taken in order by the functions that have
/// those parameters.
fn activations(ctx: &InferCtx, dirs: usize, defaults: &[&str]) -> Result<Vec<Act>, OpError> {
    let per_dir = defaults.len();
    let names: Vec<String> = match ctx.attrs.get("activations") {
        Some(crate::ops::Attr::Strs(v)) => v.clone(),
        _ => (0..dirs)
            .flat_map(|_| defaults.iter().map(|s| s.to_string()))
            .collect(),
    };
    if names.len() != per_dir * dirs {
        return Err(ctx.attr_error(
            "activations",
            format!("{} names for {dirs} direction(s) of {per_dir}", names.len()),
        ));
    }
    let floats = |n: &str| match ctx.attrs.get(n) {
        Some(crate::ops::Attr::Floats(v)) => v.clone(),
        _ => Vec::new(),
    };
    let (alphas, betas) = (floats("activation_alpha"), floats("activation_beta"));
    let (mut ai, mut bi) = (0, 0);
    let mut alpha = |d: f64| {
        ai += 1;
        alphas.get(ai - 1).copied().unwrap_or(d)
    };
    let mut beta = |d: f64| {
        bi += 1;
        betas.get(bi - 1).copied().unwrap_or(d)
    };
    names
        .iter()
        .map(|n| {
            Ok(match n.to_ascii_lowercase().as_str() {
                "sigmoid" => Act::Sigmoid,
                "tanh" => Act::Tanh,
                "relu" => Act::Relu,
                "affine" => Act::Affine(alpha(1.0), beta(0.0)),
                "leakyrelu" => Act::LeakyRelu(alpha(0.01)),
                "thresholdedrelu" => Act::ThresholdedRelu(alpha(1.0)),
                "scaledtanh" => Act::ScaledTanh(alpha(1.0), beta(1.0)),
                "hardsigmoid" => Act::HardSigmoid(alpha(0.2), beta(0.5)),
                "elu" => Act::Elu(alpha(1.0)),
                "softsign" => Act::Softsign,
                "softplus" => Act::Softplus,
                _ => return Err(ctx.attr_error("activations", format!("{n:?} is not an activation"))),
            })
        })
        .collect()
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Lstm,
    Gru,
    Rnn,
}

/// What every step of every direction shares.
struct Dims {
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
    batch_first: bool,
}

impl Dims {
    /// Row of X (and of the input projection) for step t, batch b.
    fn x_row(&self, t: usize, b: usize) -> usize {
        if self.batch_first {
            b * self.seq + t
        } else {
            t * self.batch + b
        }
    }
    /// Offset of Y's hidden vector for step t, direction d, batch b.
    fn y_at(&self, t: usize, d: usize, b: usize) -> usize {
        let h = self.hidden;
        if self.batch_first {
            ((b * self.seq + t) * self.dirs + d) * h
        } else {
            ((t * self.dirs + d) * self.batch + b) * h
        }
    }
    /// Offset of a state vector (initial_h, Y_h, ...) for direction d, batch b.
    fn state_at(&self, d: usize, b: usize) -> usize {
        let h = self.hidden;
        if self.batch_first {
            (b * self.dirs + d) * h
        } else {
            (d * self.batch + b) * h
        }
    }
}

/// One call's operands and attributes, read and checked: what every direction runs on.
struct Recurrence {
    kind: Kind,
    dm: Dims,
    /// Gate values per hidden unit times the hidden size: a row of the projections.
    gh: usize,
    xv: Vec<f64>,
    w: Vec<f64>,
    r: Vec<f64>,
    bias: Vec<f64>,
    /// Each batch entry's step count.
    lens: Vec<usize>,
    init_h: Option<Vec<f64>>,
    init_c: Option<Vec<f64>>,
    peep: Option<Vec<f64>>,
    acts: Vec<Act>,
    reverse_only: bool,
    clip: Option<f64>,
    input_forget: bool,
    linear_before_reset: bool,
}

impl Recurrence {
    fn read(ctx: &InferCtx, inputs: &[TensorRef]) -> Result<Self, OpError> {
        let kind = match ctx.op {
            "LSTM" => Kind::Lstm,
            "GRU" => Kind::Gru,
            _ => Kind::Rnn,
        };
        let gates = match kind {
            Kind::Lstm => 4,
            Kind::Gru => 3,
            Kind::Rnn => 1,
        };
        let x = &inputs[0];
        if x.rank() != 3 || inputs.len() < 3 {
            return Err(ctx.input_error(0, "needs X [seq, batch, input], W and R"));
        }
        let hidden = ctx.attr_int("hidden_size", 0)?;
        let dirs = match ctx.attr_str("direction", "forward")? {
            "bidirectional" => 2,
            _ => 1,
        };
        let reverse_only = ctx.attr_str("direction", "forward")? == "reverse";
        let batch_first = ctx.attr_int("layout", 0)? == 1;
        let (seq, batch) = if batch_first {
            (x.shape[1], x.shape[0])
        } else {
            (x.shape[0], x.shape[1])
        };
        let dm = Dims {
            seq,
            batch,
            input: x.shape[2],
            hidden: usize::try_from(hidden)
                .map_err(|_| ctx.attr_error("hidden_size", "must be >= 0"))?,
            dirs,
            batch_first,
        };
        let h = dm.hidden;
        let gh = gates * h;
        let present = |i: usize| inputs.get(i).filter(|t| !t.is_empty());
        let floats = |i: usize, len: usize, what: &str| -> Result<Option<Vec<f64>>, OpError> {
            let Some(t) = present(i) else { return Ok(None) };
            let v = read_f64s(t).map_err(|_| ctx.input_error(i, "expected a float type"))?;
            if v.len() != len {
                return Err(
                    ctx.input_error(i, format!("{what} has {} values, expected {len}", v.len()))
                );
            }
            Ok(Some(v))
        };
        let xv = floats(0, seq * batch * dm.input, "X")?.unwrap_or_default();
        let w = floats(1, dirs * gh * dm.input, "W")?
            .ok_or_else(|| ctx.input_error(1, "W is required"))?;
        let r =
            floats(2, dirs * gh * h, "R")?.ok_or_else(|| ctx.input_error(2, "R is required"))?;
        let bias = floats(3, dirs * 2 * gh, "B")?.unwrap_or_else(|| vec![0.0; dirs * 2 * gh]);
        let lens: Vec<usize> = match present(4) {
            None => vec![seq; batch],
            Some(t) => {
                let v: Vec<i64> = match t.dtype {
                    crate::ops::DType::I32 => t.slice::<i32>()?.iter().map(|&v| v as i64).collect(),
                    _ => t.slice::<i64>()?.to_vec(),
                };
                if v.len() != batch {
                    return Err(ctx.input_error(4, "sequence_lens has one value per batch entry"));
                }
                v.iter().map(|&l| (l.max(0) as usize).min(seq)).collect()
            }
        };
        let init_h = floats(5, dirs * batch * h, "initial_h")?;
        let init_c = if kind == Kind::Lstm {
            floats(6, dirs * batch * h, "initial_c")?
        } else {
            None
        };
        let peep = if kind == Kind::Lstm {
            floats(7, dirs * 3 * h, "P")?
        } else {
            None
        };
        let acts = activations(
            ctx,
            dirs,
            match kind {
                Kind::Lstm => &["Sigmoid", "Tanh", "Tanh"],
                Kind::Gru => &["Sigmoid", "Tanh"],
                Kind::Rnn => &["Tanh"],
            },
        )?;
        let clip = ctx.attrs.get("clip").and_then(|a| a.as_float());
        let input_forget = ctx.attr_int("input_forget", 0)? != 0;
        let linear_before_reset = ctx.attr_int("linear_before_reset", 0)? != 0;
        Ok(Recurrence {
            kind,
            dm,
            gh,
            xv,
            w,
            r,
            bias,
            lens,
            init_h,
            init_c,
            peep,
            acts,
            reverse_only,
            clip,
            input_forget,
            linear_before_reset,
        })
    }

    /// A gate's pre-activation clipped to `clip`, when the op has one.
    fn clamp(&self, v: f64) -> f64 {
        self.clip.map_or(v, |c| v.clamp(-c, c))
    }

    /// Runs direction `d` over every step: its outputs into `y`, its last states into
    /// `y_h` and `y_c`.
    fn direction(&self, d: usize, y: &mut [f64], y_h: &mut [f64], y_c: &mut [f64]) {
        let (dm, kind, gh) = (&self.dm, self.kind, self.gh);
        let (seq, batch, h) = (dm.seq, dm.batch, dm.hidden);
        let rows = seq * batch;
        let per_dir = self.acts.len() / dm.dirs;
        let reverse = self.reverse_only || d == 1;
        let act = &self.acts[d * per_dir..][..per_dir];
        let wd = Mat::row_major(&self.w[d * gh * dm.input..][..gh * dm.input], gh, dm.input);
        let rd = &self.r[d * gh * h..][..gh * h];
        let bias = &self.bias;
        let (wb, rb) = (&bias[d * 2 * gh..][..gh], &bias[d * 2 * gh + gh..][..gh]);
        // Input projection of every step, biases folded in (GRU's recurrent bias of the
        // candidate gate stays out: with linear_before_reset it is inside the reset).
        let mut xw = vec![0.0f64; rows * gh];
        for row in xw.chunks_mut(gh) {
            for (g, v) in row.iter_mut().enumerate() {
                let rec = if kind == Kind::Gru && g >= 2 * h {
                    0.0
                } else {
                    rb[g]
                };
                *v = wb[g] + rec;
            }
        }
        if rows > 0 && dm.input > 0 {
            gemm(
                1.0,
                Mat::row_major(&self.xv, rows, dm.input),
                wd.t(),
                1.0,
                &mut xw,
                gh,
            );
        }
        let mut hs = vec![0.0f64; batch * h];
        let mut cs = vec![0.0f64; batch * h];
        for b in 0..batch {
            let at = dm.state_at(d, b);
            if let Some(v) = &self.init_h {
                hs[b * h..][..h].copy_from_slice(&v[at..][..h]);
            }
            if let Some(v) = &self.init_c {
                cs[b * h..][..h].copy_from_slice(&v[at..][..h]);
            }
        }
        let mut hr = vec![0.0f64; batch * gh];
        let mut rh = vec![0.0f64; batch * h];
        for step in 0..seq {
            let t = if reverse { seq - 1 - step } else { step };
            // H_{t-1} . R^T for every gate (GRU without linear_before_reset: z and r only;
            // its candidate gate needs the reset applied to H first).
            let rmat = Mat::row_major(rd, gh, h).t();
            gemm(1.0, Mat::row_major(&hs, batch, h), rmat, 0.0, &mut hr, gh);
            if kind == Kind::Gru && !self.linear_before_reset {
                for b in 0..batch {
                    let pre = &xw[dm.x_row(t, b) * gh..][..gh];
                    for j in 0..h {
                        let rg = act[0].apply(self.clamp(pre[h + j] + hr[b * gh + h + j]));
                        rh[b * h + j] = rg * hs[b * h + j];
                    }
                }
                let rh_mat = Mat::row_major(&rd[2 * h * h..], h, h).t();
                let mut cand = vec![0.0f64; batch * h];
                gemm(
                    1.0,
                    Mat::row_major(&rh, batch, h),
                    rh_mat,
                    0.0,
                    &mut cand,
                    h,
                );
                for b in 0..batch {
                    hr[b * gh + 2 * h..][..h].copy_from_slice(&cand[b * h..][..h]);
                }
            }
            for b in 0..batch {
                if t >= self.lens[b] {
                    continue;
                }
                let pre = &xw[dm.x_row(t, b) * gh..][..gh];
                let rec = &hr[b * gh..][..gh];
                let hb = &mut hs[b * h..][..h];
                let cb = &mut cs[b * h..][..h];
                self.cell(d, act, rb, pre, rec, hb, cb);
                y[dm.y_at(t, d, b)..][..h].copy_from_slice(hb);
            }
        }
        for b in 0..batch {
            let at = dm.state_at(d, b);
            y_h[at..][..h].copy_from_slice(&hs[b * h..][..h]);
            y_c[at..][..h].copy_from_slice(&cs[b * h..][..h]);
        }
    }

    /// Whether direction `d` runs in float32 ([`Recurrence::direction_f32`]): an LSTM
    /// with its default activations (sigmoid gates, tanh cell and output), no peepholes
    /// and no coupled input and forget gates: what exporters write for `nn.LSTM`.
    fn runs_in_f32(&self, d: usize) -> bool {
        let per_dir = self.acts.len() / self.dm.dirs;
        let act = &self.acts[d * per_dir..][..per_dir];
        self.kind == Kind::Lstm
            && matches!(act, [Act::Sigmoid, Act::Tanh, Act::Tanh])
            && self.peep.is_none()
            && !self.input_forget
    }

    /// [`Recurrence::direction`] of an LSTM in float32, as ONNX Runtime computes it: the
    /// input projection and each step's `H . R^T` are float32 products on rt2's GEMM
    /// kernels (W and R transposed once per call, so the per-step product streams R's
    /// rows as whole vectors), and each step's gates are whole-slice vector sigmoid and
    /// tanh (`vmath`). In f64 every step went through matrixmultiply's dgemm, which
    /// packs R again on every step, and through scalar `exp` and `tanh`: a speech
    /// model's 200-step LSTM took 13 times ONNX Runtime's time.
    fn direction_f32(&self, d: usize, y: &mut [f64], y_h: &mut [f64], y_c: &mut [f64]) {
        use crate::ops::elementwise::vmath::{Fun, map};
        let (dm, gh) = (&self.dm, self.gh);
        let (seq, batch, h, input) = (dm.seq, dm.batch, dm.hidden, dm.input);
        let rows = seq * batch;
        let reverse = self.reverse_only || d == 1;
        let transposed = |m: &[f64], r: usize, c: usize| -> Vec<f32> {
            let mut t = vec![0.0f32; r * c];
            for (i, row) in m.chunks_exact(c.max(1)).take(r).enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    t[j * r + i] = v as f32;
                }
            }
            t
        };
        // W^T [input, gh] and R^T [h, gh], row-major.
        let wt = transposed(&self.w[d * gh * input..][..gh * input], gh, input);
        let rt = transposed(&self.r[d * gh * h..][..gh * h], gh, h);
        let bias = &self.bias[d * 2 * gh..][..2 * gh];
        let mut xw = vec![0.0f32; rows * gh];
        for row in xw.chunks_mut(gh) {
            for (g, v) in row.iter_mut().enumerate() {
                *v = (bias[g] + bias[gh + g]) as f32;
            }
        }
        if rows > 0 && input > 0 {
            let xv: Vec<f32> = self.xv.iter().map(|&v| v as f32).collect();
            gemm(
                1.0,
                Mat::row_major(&xv, rows, input),
                Mat::row_major(&wt, input, h * 4),
                1.0,
                &mut xw,
                gh,
            );
        }
        let state = |v: &Option<Vec<f64>>| -> Vec<f32> {
            let mut s = vec![0.0f32; batch * h];
            if let Some(v) = v {
                for b in 0..batch {
                    let at = dm.state_at(d, b);
                    for (o, &i) in s[b * h..][..h].iter_mut().zip(&v[at..][..h]) {
                        *o = i as f32;
                    }
                }
            }
            s
        };
        let (mut hs, mut cs) = (state(&self.init_h), state(&self.init_c));
        let mut g = vec![0.0f32; batch * gh];
        let mut act = vec![0.0f32; gh];
        let clip = self.clip.map(|c| c as f32);
        for step in 0..seq {
            let t = if reverse { seq - 1 - step } else { step };
            gemm(
                1.0,
                Mat::row_major(&hs, batch, h),
                Mat::row_major(&rt, h, gh),
                0.0,
                &mut g,
                gh,
            );
            for b in 0..batch {
                if t >= self.lens[b] {
                    continue;
                }
                let gb = &mut g[b * gh..][..gh];
                for (v, &p) in gb.iter_mut().zip(&xw[dm.x_row(t, b) * gh..][..gh]) {
                    *v += p;
                    if let Some(c) = clip {
                        *v = v.clamp(-c, c);
                    }
                }
                // Gates i, o, f (sigmoid), then the cell candidate (tanh).
                map(Fun::Sigmoid, &gb[..3 * h], &mut act[..3 * h]);
                map(Fun::Tanh, &gb[3 * h..], &mut act[3 * h..]);
                let (i, rest) = act.split_at(h);
                let (o, rest) = rest.split_at(h);
                let (f, c_in) = rest.split_at(h);
                let cb = &mut cs[b * h..][..h];
                for j in 0..h {
                    cb[j] = f[j] * cb[j] + i[j] * c_in[j];
                }
                let hb = &mut hs[b * h..][..h];
                map(Fun::Tanh, cb, hb);
                for j in 0..h {
                    hb[j] *= o[j];
                }
                for (o, &v) in y[dm.y_at(t, d, b)..][..h].iter_mut().zip(hb.iter()) {
                    *o = f64::from(v);
                }
            }
        }
        for b in 0..batch {
            let at = dm.state_at(d, b);
            for j in 0..h {
                y_h[at + j] = f64::from(hs[b * h + j]);
                y_c[at + j] = f64::from(cs[b * h + j]);
            }
        }
    }

    /// One step of one batch entry in direction `d`: the gates from the input projection
    /// `pre` and the recurrent product `rec`, updating the hidden state `hb` (and the cell
    /// state `cb`) in place.
    #[allow(clippy::too_many_arguments)]
    fn cell(
        &self,
        d: usize,
        act: &[Act],
        rb: &[f64],
        pre: &[f64],
        rec: &[f64],
        hb: &mut [f64],
        cb: &mut [f64],
    ) {
        let h = self.dm.hidden;
        for j in 0..h {
            let g = |k: usize| pre[k * h + j] + rec[k * h + j];
            match self.kind {
                Kind::Rnn => hb[j] = act[0].apply(self.clamp(g(0))),
                Kind::Gru => {
                    let z = act[0].apply(self.clamp(g(0)));
                    let cand = if self.linear_before_reset {
                        let rg = act[0].apply(self.clamp(g(1)));
                        pre[2 * h + j] + rg * (rec[2 * h + j] + rb[2 * h + j])
                    } else {
                        g(2) + rb[2 * h + j]
                    };
                    let n = act[1].apply(self.clamp(cand));
                    hb[j] = (1.0 - z) * n + z * hb[j];
                }
                Kind::Lstm => {
                    let p = |k: usize| self.peep.as_ref().map_or(0.0, |p| p[d * 3 * h + k * h + j]);
                    let c_prev = cb[j];
                    let i = act[0].apply(self.clamp(g(0) + p(0) * c_prev));
                    let f = if self.input_forget {
                        1.0 - i
                    } else {
                        act[0].apply(self.clamp(g(2) + p(2) * c_prev))
                    };
                    let c_in = act[1].apply(self.clamp(g(3)));
                    let c = f * c_prev + i * c_in;
                    let o = act[0].apply(self.clamp(g(1) + p(1) * c));
                    cb[j] = c;
                    hb[j] = o * act[2].apply(c);
                }
            }
        }
    }
}

/// LSTM, GRU and RNN (the op name picks which).
pub fn recurrence(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let rec = Recurrence::read(ctx, inputs)?;
    let dm = &rec.dm;
    let (dirs, batch, h) = (dm.dirs, dm.batch, dm.hidden);
    let mut y = vec![0.0f64; dm.seq * dirs * batch * h];
    let mut y_h = vec![0.0f64; dirs * batch * h];
    let mut y_c = vec![0.0f64; dirs * batch * h];
    for d in 0..dirs {
        if rec.runs_in_f32(d) {
            rec.direction_f32(d, &mut y, &mut y_h, &mut y_c);
        } else {
            rec.direction(d, &mut y, &mut y_h, &mut y_c);
        }
    }
    write_f64s(&mut outputs[0], &y)?;
    if let Some(o) = outputs.get_mut(1) {
        write_f64s(o, &y_h)?;
    }
    if let Some(o) = outputs.get_mut(2) {
        write_f64s(o, &y_c)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ops::Attr;
    use crate::ops::DType;
    use crate::ops::Tensor;
    use crate::ops::testing::run_f32s;

    fn t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_vec(shape, v)
    }

    fn none() -> Tensor {
        Tensor::zeroed(DType::F32, &[0])
    }

    #[test]
    fn rnn_directions_and_sequence_lengths() {
        // h_t = relu(x_t + 0.5 h_{t-1}); batch 0 has x = [1, 2], batch 1 only its first step.
        let x = t(&[2, 2, 1], &[1.0, 4.0, 2.0, 8.0]);
        let (w, r) = (t(&[1, 1, 1], &[1.0]), t(&[1, 1, 1], &[0.5]));
        let lens = Tensor::from_vec(&[2], &[2i32, 1]);
        let mut attrs = vec![
            ("hidden_size", Attr::Int(1)),
            ("activations", Attr::Strs(vec!["Relu".into()])),
        ];
        let y = run_f32s(
            "RNN",
            &attrs,
            &[x.clone(), w.clone(), r.clone(), none(), lens.clone()],
            2,
        );
        // Y [seq, dirs, batch, hidden]: step 0 (1, 4), step 1 (2.5, 0 past the length).
        assert_eq!(y[0], [1.0, 4.0, 2.5, 0.0]);
        assert_eq!(y[1], [2.5, 4.0]);
        attrs.push(("direction", Attr::Str("reverse".into())));
        let y = run_f32s("RNN", &attrs, &[x, w, r, none(), lens], 2);
        // Reverse: batch 0 sees 2 then 1 + 0.5 * 2; batch 1 only its step 0.
        assert_eq!(y[0], [2.0, 4.0, 2.0, 0.0]);
        assert_eq!(y[1], [2.0, 4.0]);
    }

    #[test]
    fn gru_and_lstm_with_zero_weights_decay_their_state() {
        let x = t(&[2, 1, 1], &[3.0, -3.0]);
        let zeros = |n: usize| t(&[1, n, 1], &vec![0.0; n]);
        let h0 = t(&[1, 1, 1], &[4.0]);
        // GRU: z = 0.5 and the candidate is tanh(0) = 0, so H halves each step.
        let attrs = [("hidden_size", Attr::Int(1))];
        let gru_in = [x.clone(), zeros(3), zeros(3), none(), none(), h0.clone()];
        let y = run_f32s("GRU", &attrs, &gru_in, 2);
        assert_eq!((y[0].clone(), y[1].clone()), (vec![2.0, 1.0], vec![1.0]));
        // LSTM: every gate is 0.5 and the cell input tanh(0) = 0: C halves, H = 0.5 tanh(C).
        let c0 = t(&[1, 1, 1], &[2.0]);
        let lstm_in = [x, zeros(4), zeros(4), none(), none(), h0, c0];
        let y = run_f32s("LSTM", &attrs, &lstm_in, 3);
        let h = |c: f32| 0.5 * c.tanh();
        assert!((y[0][0] - h(1.0)).abs() < 1e-6 && (y[0][1] - h(0.5)).abs() < 1e-6);
        assert_eq!(y[2], [0.5]);
    }

    /// The float32 LSTM computes what the f64 one does: the same model with zero
    /// peepholes (which sends it down the f64 path) agrees within float32 rounding, over
    /// both directions, both layouts, sequence lengths (one of them 0), initial states,
    /// clip, and states large enough to saturate gates.
    #[test]
    fn float32_lstm_agrees_with_the_f64_one() {
        let seeded =
            |n: usize, seed: u64, scale: f32| crate::om::onnx::builder::seeded_f32(n, seed, scale);
        let (seq, batch, input, h) = (6, 3, 5, 7);
        for batch_first in [false, true] {
            for clip in [None, Some(0.8f32)] {
                let xs = if batch_first {
                    [batch, seq, input]
                } else {
                    [seq, batch, input]
                };
                let x = t(&xs, &seeded(seq * batch * input, 1, 2.0));
                let w = t(&[2, 4 * h, input], &seeded(2 * 4 * h * input, 2, 1.0));
                let r = t(&[2, 4 * h, h], &seeded(2 * 4 * h * h, 3, 1.0));
                let b = t(&[2, 8 * h], &seeded(2 * 8 * h, 4, 0.5));
                let lens = Tensor::from_vec(&[batch], &[6i32, 3, 0]);
                let ss = if batch_first {
                    [batch, 2, h]
                } else {
                    [2, batch, h]
                };
                let h0 = t(&ss, &seeded(2 * batch * h, 5, 1.0));
                let c0 = t(&ss, &seeded(2 * batch * h, 6, 3.0));
                let mut attrs = vec![
                    ("hidden_size", Attr::Int(h as i64)),
                    ("direction", Attr::Str("bidirectional".into())),
                    ("layout", Attr::Int(i64::from(batch_first))),
                ];
                if let Some(c) = clip {
                    attrs.push(("clip", Attr::Float(f64::from(c))));
                }
                let mut ins = vec![x, w, r, b, lens, h0, c0];
                let fast = run_f32s("LSTM", &attrs, &ins, 3);
                ins.push(t(&[2, 3 * h], &vec![0.0; 2 * 3 * h]));
                let wide = run_f32s("LSTM", &attrs, &ins, 3);
                for (k, (f, w)) in fast.iter().zip(&wide).enumerate() {
                    assert!(w.iter().any(|&v| v != 0.0), "output {k} is all zero");
                    for (i, (a, b)) in f.iter().zip(w).enumerate() {
                        assert!(
                            (a - b).abs() <= 2e-5 * b.abs().max(1.0),
                            "batch_first {batch_first} clip {clip:?} output {k}[{i}]: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }
}
