//! The compute of LSTM, GRU and RNN: every direction, `sequence_lens`, initial states,
//! peepholes, `clip`, `input_forget`, `linear_before_reset`, the `activations` list and
//! both layouts.
//!
//! The input projection of all time steps is one GEMM per direction (`X . W^T`, with the
//! biases folded in); each step then adds `H_{t-1} . R^T`, another GEMM over the batch,
//! and applies the gates row by row. An LSTM with the default activations and no
//! peepholes (every exported `nn.LSTM`) and a GRU with the default activations (every
//! exported `nn.GRU`) run in float32 on rt2's GEMM kernels and vector math, as ONNX
//! Runtime does ([`Recurrence::direction_f32`]); every other form runs in f64 and is
//! rounded once into the outputs.

use crate::ops::linalg::sgemv::sgemv;
use crate::ops::nn::gemm::{Mat, gemm};
use crate::ops::nn::scalar::{read_f64s, widened, write_f64s};
use crate::ops::nn::scratch::with_scratch;
use crate::ops::shape::movement::{View, copy_view};
use crate::ops::{Attr, DType, HostTensor, InferCtx, OpError, Prepack, TensorMut, TensorRef};

use super::units::{SPLIT_HIDDEN, Units};

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
#[derive(Clone)]
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

/// One call's attributes and dimensions, read and checked: what every direction runs on.
struct Recurrence {
    kind: Kind,
    dm: Dims,
    /// Gate values per hidden unit times the hidden size: a row of the projections.
    gh: usize,
    /// Each batch entry's step count.
    lens: Vec<usize>,
    /// Whether the op has peepholes (LSTM's input 7).
    peepholes: bool,
    acts: Vec<Act>,
    reverse_only: bool,
    clip: Option<f64>,
    input_forget: bool,
    linear_before_reset: bool,
    /// W is stored transposed, `[dirs, input, gates * hidden]` ([`prepack_weights`]).
    w_transposed: bool,
}

/// The float operands widened to f64, for [`Recurrence::direction`].
struct Wide {
    xv: Vec<f64>,
    w: Vec<f64>,
    r: Vec<f64>,
    bias: Vec<f64>,
    init_h: Option<Vec<f64>>,
    init_c: Option<Vec<f64>>,
    peep: Option<Vec<f64>>,
}

/// The float32 operands of an LSTM or GRU, read in place, for [`Recurrence::direction_f32`].
struct Narrow<'a> {
    x: &'a [f32],
    w: &'a [f32],
    r: &'a [f32],
    bias: Option<&'a [f32]>,
    init_h: Option<&'a [f32]>,
    init_c: Option<&'a [f32]>,
}

/// Batch sizes up to which each step's recurrent product is one [`sgemv`] per batch
/// entry on R as stored; larger batches transpose R once per call and run each step as
/// one GEMM, which reads R once for every row it holds in registers.
const GEMV_BATCH: usize = 2;

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
        // Each float operand's element count, checked here; the values are read by
        // whichever path runs (`wide` or `narrow`).
        let check = |i: usize, len: usize, what: &str| -> Result<bool, OpError> {
            let Some(t) = present(i) else {
                return Ok(false);
            };
            if !t.dtype.is_float() {
                return Err(ctx.input_error(i, "expected a float type"));
            }
            if t.len() != len {
                return Err(
                    ctx.input_error(i, format!("{what} has {} values, expected {len}", t.len()))
                );
            }
            Ok(true)
        };
        check(0, seq * batch * dm.input, "X")?;
        if !check(1, dirs * gh * dm.input, "W")? {
            return Err(ctx.input_error(1, "W is required"));
        }
        if !check(2, dirs * gh * h, "R")? {
            return Err(ctx.input_error(2, "R is required"));
        }
        check(3, dirs * 2 * gh, "B")?;
        check(5, dirs * batch * h, "initial_h")?;
        if kind == Kind::Lstm {
            check(6, dirs * batch * h, "initial_c")?;
        }
        let peepholes = kind == Kind::Lstm && check(7, dirs * 3 * h, "P")?;
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
        let w_transposed = ctx.attr_int(W_TRANSPOSED, 0)? != 0;
        Ok(Recurrence {
            kind,
            dm,
            gh,
            lens,
            peepholes,
            acts,
            reverse_only,
            clip,
            input_forget,
            linear_before_reset,
            w_transposed,
        })
    }

    /// A gate's pre-activation clipped to `clip`, when the op has one.
    fn clamp(&self, v: f64) -> f64 {
        self.clip.map_or(v, |c| v.clamp(-c, c))
    }

    /// Runs direction `d` over every step: its outputs into `y`, its last states into
    /// `y_h` and `y_c`.
    fn direction(&self, ops: &Wide, d: usize, y: &mut [f64], y_h: &mut [f64], y_c: &mut [f64]) {
        let (dm, kind, gh) = (&self.dm, self.kind, self.gh);
        let (seq, batch, h) = (dm.seq, dm.batch, dm.hidden);
        let rows = seq * batch;
        let per_dir = self.acts.len() / dm.dirs;
        let reverse = self.reverse_only || d == 1;
        let act = &self.acts[d * per_dir..][..per_dir];
        let wd = &ops.w[d * gh * dm.input..][..gh * dm.input];
        let wt = if self.w_transposed {
            Mat::row_major(wd, dm.input, gh)
        } else {
            Mat::row_major(wd, gh, dm.input).t()
        };
        let rd = &ops.r[d * gh * h..][..gh * h];
        let bias = &ops.bias;
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
                Mat::row_major(&ops.xv, rows, dm.input),
                wt,
                1.0,
                &mut xw,
                gh,
            );
        }
        let mut hs = vec![0.0f64; batch * h];
        let mut cs = vec![0.0f64; batch * h];
        for b in 0..batch {
            let at = dm.state_at(d, b);
            if let Some(v) = &ops.init_h {
                hs[b * h..][..h].copy_from_slice(&v[at..][..h]);
            }
            if let Some(v) = &ops.init_c {
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
                self.cell(ops, d, act, rb, pre, rec, hb, cb);
                y[dm.y_at(t, d, b)..][..h].copy_from_slice(hb);
            }
        }
        for b in 0..batch {
            let at = dm.state_at(d, b);
            y_h[at..][..h].copy_from_slice(&hs[b * h..][..h]);
            y_c[at..][..h].copy_from_slice(&cs[b * h..][..h]);
        }
    }

    /// Whether the op runs in float32 ([`Recurrence::direction_f32`]): an LSTM with the
    /// default activations in every direction (sigmoid gates, tanh cell and output), no
    /// peepholes and no coupled input and forget gates, what exporters write for
    /// `nn.LSTM`; or a GRU with the default activations (sigmoid gates, tanh candidate),
    /// what they write for `nn.GRU`, with either `linear_before_reset`.
    fn runs_in_f32(&self) -> bool {
        match self.kind {
            Kind::Lstm => {
                self.acts
                    .chunks(3)
                    .all(|a| matches!(a, [Act::Sigmoid, Act::Tanh, Act::Tanh]))
                    && !self.peepholes
                    && !self.input_forget
            }
            Kind::Gru => self
                .acts
                .chunks(2)
                .all(|a| matches!(a, [Act::Sigmoid, Act::Tanh])),
            Kind::Rnn => false,
        }
    }

    /// The float operands widened to f64.
    fn wide(&self, ctx: &InferCtx, inputs: &[TensorRef]) -> Result<Wide, OpError> {
        let floats = |i: usize| -> Result<Option<Vec<f64>>, OpError> {
            match inputs.get(i).filter(|t| !t.is_empty()) {
                Some(t) => read_f64s(t)
                    .map(Some)
                    .map_err(|_| ctx.input_error(i, "expected a float type")),
                None => Ok(None),
            }
        };
        let lstm = self.kind == Kind::Lstm;
        Ok(Wide {
            xv: floats(0)?.unwrap_or_default(),
            w: floats(1)?.unwrap_or_default(),
            r: floats(2)?.unwrap_or_default(),
            bias: floats(3)?.unwrap_or_else(|| vec![0.0; self.dm.dirs * 2 * self.gh]),
            init_h: floats(5)?,
            init_c: if lstm { floats(6)? } else { None },
            peep: if lstm { floats(7)? } else { None },
        })
    }

    /// [`Recurrence::direction`] of an LSTM or GRU in float32, as ONNX Runtime computes
    /// it, on the operands as they are stored:
    /// - The input projection of every step is one float32 GEMM, `X . W^T` with W read
    ///   in place (transposed by strides), onto the summed biases.
    /// - Each step's `H . R^T` is, at batch 1 or 2, a matrix-vector product per batch
    ///   entry reading R front to back ([`sgemv`]); larger batches transpose R once and
    ///   run one GEMM per step, reading R once for all the rows.
    /// - The gates are whole-slice vector sigmoid and tanh (`vmath`).
    /// - A GRU always takes the matrix-vector path: without linear_before_reset its
    ///   candidate rows of R multiply the reset state, known only once the other gates
    ///   are, so each step is two products per batch entry ([`Recurrence::gru_cell`]).
    ///
    /// The outputs are written as direction `od` of the layout `out` says: the op's own
    /// (`od` = `d`), or one direction's alone when the two run on two threads. The
    /// working memory (`scratch`) is kept by the caller's thread between calls, so a
    /// model's steady-state executions allocate nothing here. In f64 every step went
    /// through matrixmultiply's dgemm, which packs R again on every step, and scalar
    /// `exp` and `tanh`: a speech model's 200-step LSTM took 13 times ONNX Runtime's
    /// time; transposing W and R on every call (strided writes) was a further fifth of
    /// the time.
    #[allow(clippy::too_many_arguments)]
    fn direction_f32(
        &self,
        ops: &Narrow,
        d: usize,
        scratch: &mut [f32],
        (out, od, split): (&Dims, usize, bool),
        y: &mut [f32],
        y_h: &mut [f32],
        y_c: &mut [f32],
    ) {
        let (dm, gh) = (&self.dm, self.gh);
        let (seq, batch, h, input) = (dm.seq, dm.batch, dm.hidden, dm.input);
        let rows = seq * batch;
        let reverse = self.reverse_only || d == 1;
        let w = &ops.w[d * gh * input..][..gh * input];
        let r = &ops.r[d * gh * h..][..gh * h];
        let (xw, rest) = scratch.split_at_mut(rows * gh);
        let (g, rest) = rest.split_at_mut(batch * gh);
        let (act, rest) = rest.split_at_mut(gh);
        let (hs, rest) = rest.split_at_mut(batch * h);
        let (cs, rest) = rest.split_at_mut(batch * h);
        let (aux, rest) = rest.split_at_mut(h);
        let (units, rt) = rest.split_at_mut(if self.splits_units() { 10 * h } else { 0 });
        let gru = self.kind == Kind::Gru;
        // GRU's candidate gate keeps its recurrent bias out of the projection: it is
        // added to the recurrent product, inside the reset with linear_before_reset.
        let folded = if gru { 2 * h } else { gh };
        match ops.bias {
            Some(bias) => {
                // One row of biases, then copied into every row the product adds to.
                let (wb, rb) = bias[d * 2 * gh..][..2 * gh].split_at(gh);
                for (g, (v, (a, b))) in act.iter_mut().zip(wb.iter().zip(rb)).enumerate() {
                    *v = if g < folded { a + b } else { *a };
                }
                for row in xw.chunks_exact_mut(gh) {
                    row.copy_from_slice(act);
                }
            }
            None => xw.fill(0.0),
        }
        if rows > 0 && input > 0 {
            // W^T row-major, so the product runs on rt2's kernels (a strided B goes to
            // matrixmultiply, which packs it and multiplies at half their rate): as
            // lowering stored a constant W ([`prepack_weights`]), or transposed here.
            let wt = if self.w_transposed {
                w
            } else {
                transpose(w, gh, input, &mut rt[..input * gh]);
                &rt[..input * gh]
            };
            gemm(
                1.0,
                Mat::row_major(ops.x, rows, input),
                Mat::row_major(wt, input, gh),
                1.0,
                xw,
                gh,
            );
        }
        if !self.steps_by_gemv() {
            transpose(r, gh, h, &mut rt[..h * gh]);
        }
        for (state, init) in [(&mut *hs, ops.init_h), (&mut *cs, ops.init_c)] {
            for b in 0..batch {
                let to = &mut state[b * h..][..h];
                match init {
                    Some(v) => to.copy_from_slice(&v[dm.state_at(d, b)..][..h]),
                    None => to.fill(0.0),
                }
            }
        }
        if split && self.splits_units() {
            let steps = Units {
                r,
                xw,
                clip: self.clip.map_or(f32::INFINITY, |c| c as f32),
                reverse,
                seq,
                h,
            };
            steps.run(units, hs, cs, y, |t| out.y_at(t, od, 0));
        } else {
            self.steps_f32(ops, d, (xw, rt), (g, act, aux), hs, cs, (out, od), y);
        }
        for b in 0..batch {
            let at = out.state_at(od, b);
            y_h[at..][..h].copy_from_slice(&hs[b * h..][..h]);
            y_c[at..][..h].copy_from_slice(&cs[b * h..][..h]);
        }
    }

    /// The steps of [`Recurrence::direction_f32`] in turn on the caller's thread: per
    /// step the recurrent product of each batch entry, then its cell.
    #[allow(clippy::too_many_arguments)]
    fn steps_f32(
        &self,
        ops: &Narrow,
        d: usize,
        (xw, rt): (&[f32], &[f32]),
        (g, act, aux): (&mut [f32], &mut [f32], &mut [f32]),
        hs: &mut [f32],
        cs: &mut [f32],
        (out, od): (&Dims, usize),
        y: &mut [f32],
    ) {
        use crate::ops::elementwise::vmath::lstm_cell;
        let (dm, gh) = (&self.dm, self.gh);
        let (seq, batch, h) = (dm.seq, dm.batch, dm.hidden);
        let reverse = self.reverse_only || d == 1;
        let r = &ops.r[d * gh * h..][..gh * h];
        let gru = self.kind == Kind::Gru;
        let folded = if gru { 2 * h } else { gh };
        let rbh = ops
            .bias
            .map(|b| &b[d * 2 * gh + gh + folded..][..gh - folded]);
        let gemv = self.steps_by_gemv();
        // Rows of R each step's first product takes.
        let first = if gru && !self.linear_before_reset {
            2 * h
        } else {
            gh
        };
        let clip = self.clip.map(|c| c as f32);
        for step in 0..seq {
            let t = if reverse { seq - 1 - step } else { step };
            if gemv {
                for b in 0..batch {
                    sgemv(
                        &r[..first * h],
                        h,
                        &hs[b * h..][..h],
                        &mut g[b * gh..][..first],
                    );
                }
            } else {
                gemm(
                    1.0,
                    Mat::row_major(hs, batch, h),
                    Mat::row_major(&rt[..h * gh], h, gh),
                    0.0,
                    g,
                    gh,
                );
            }
            for b in 0..batch {
                let out = &mut y[out.y_at(t, od, b)..][..h];
                if t >= self.lens[b] {
                    // Past this entry's length: Y is zero and the state stays.
                    out.fill(0.0);
                    continue;
                }
                let gb = &mut g[b * gh..][..gh];
                if gru {
                    let xb = &xw[dm.x_row(t, b) * gh..][..gh];
                    let hb = &mut hs[b * h..][..h];
                    self.gru_cell(xb, gb, rbh, &r[2 * h * h..][..h * h], act, aux, hb);
                    out.copy_from_slice(hb);
                    continue;
                }
                // Gates i, o, f (sigmoid) and the cell candidate (tanh), then the state.
                let hb = &mut hs[b * h..][..h];
                lstm_cell(
                    gb,
                    &xw[dm.x_row(t, b) * gh..][..gh],
                    clip.unwrap_or(f32::INFINITY),
                    &mut cs[b * h..][..h],
                    hb,
                );
                out.copy_from_slice(hb);
            }
        }
    }

    /// One GRU step of one batch entry in float32, as the f64 [`Recurrence::cell`]
    /// computes it: `xb` the input projection (biases folded in but the candidate's
    /// recurrent one, `rbh`), `gb` the recurrent product of the update and reset rows
    /// (and, with linear_before_reset, the candidate rows), `rh` R's candidate rows,
    /// `act` and `aux` working memory; the state `hb` is updated in place.
    #[allow(clippy::too_many_arguments)]
    fn gru_cell(
        &self,
        xb: &[f32],
        gb: &mut [f32],
        rbh: Option<&[f32]>,
        rh: &[f32],
        act: &mut [f32],
        aux: &mut [f32],
        hb: &mut [f32],
    ) {
        use crate::ops::elementwise::vmath::{gru_state, sigmoid_gates};
        let h = hb.len();
        let clip = self.clip.map_or(f32::INFINITY, |c| c as f32);
        // Update z and reset r (sigmoid).
        sigmoid_gates(&gb[..2 * h], xb, clip, &mut act[..2 * h]);
        let (zr, r) = (&act[..2 * h], &act[h..2 * h]);
        let pre = &mut gb[2 * h..3 * h];
        if !self.linear_before_reset {
            // (r * H) . Rh^T, then + Rbh; with linear_before_reset r * (H . Rh^T + Rbh),
            // the product taken with the others.
            for j in 0..h {
                aux[j] = r[j] * hb[j];
            }
            sgemv(rh, h, aux, pre);
        }
        gru_state(
            &xb[2 * h..],
            pre,
            zr,
            rbh,
            self.linear_before_reset,
            clip,
            hb,
        );
    }

    /// Whether [`Recurrence::direction_f32`] takes each step's recurrent product as one
    /// matrix-vector product per batch entry on R as stored, rather than one GEMM on R
    /// transposed: at batch up to [`GEMV_BATCH`], and always for a GRU, whose candidate
    /// rows of R (without linear_before_reset) multiply the reset state, known only
    /// after the other gates.
    fn steps_by_gemv(&self) -> bool {
        self.dm.batch <= GEMV_BATCH || self.kind == Kind::Gru
    }

    /// Whether a direction's steps may split its hidden units between two threads
    /// ([`Units`]): a float32 LSTM ([`Recurrence::runs_in_f32`]) at batch 1, every
    /// step counted, of at least [`SPLIT_HIDDEN`] units. Its caller splits only where
    /// the pool has another thread and the directions do not already run one per
    /// thread.
    fn splits_units(&self) -> bool {
        self.kind == Kind::Lstm
            && self.dm.batch == 1
            && self.dm.hidden >= SPLIT_HIDDEN
            && self.lens.iter().all(|&l| l >= self.dm.seq)
    }

    /// Floats of working memory [`Recurrence::direction_f32`] takes: the projections,
    /// one step's gates and activations, the states, a GRU's reset state, and room for
    /// the transposes it makes (W unless lowering stored it transposed, R for GEMM
    /// steps).
    fn scratch_f32(&self) -> usize {
        let (dm, gh) = (&self.dm, self.gh);
        let w_rows = if self.w_transposed { 0 } else { dm.input };
        let r_rows = if self.steps_by_gemv() { 0 } else { dm.hidden };
        let rt = w_rows.max(r_rows) * gh;
        let units = if self.splits_units() {
            10 * dm.hidden
        } else {
            0
        };
        dm.seq * dm.batch * gh + dm.batch * gh + gh + (2 * dm.batch + 1) * dm.hidden + units + rt
    }

    /// One step of one batch entry in direction `d`: the gates from the input projection
    /// `pre` and the recurrent product `rec`, updating the hidden state `hb` (and the cell
    /// state `cb`) in place.
    #[allow(clippy::too_many_arguments)]
    fn cell(
        &self,
        ops: &Wide,
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
                    let p = |k: usize| ops.peep.as_ref().map_or(0.0, |p| p[d * 3 * h + k * h + j]);
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

/// The attribute telling the kernel that W is stored transposed ([`prepack_weights`]).
const W_TRANSPOSED: &str = "_rt2_w_transposed";

/// LSTM's, GRU's and RNN's prepack hook: a constant W (`[dirs, gates * hidden, input]`)
/// is stored transposed per direction (`[dirs, input, gates * hidden]`), once, at
/// lowering, and the op launched with `_rt2_w_transposed`. The input projection `X .
/// W^T` then reads it as a row-major B; transposing it on every execution took a
/// tenth of a CRNN's time (two bidirectional LSTMs, 512 x 256 weights each way).
pub fn prepack_weights(ctx: &InferCtx) -> Option<Prepack> {
    let op = match ctx.op {
        "LSTM" => "LSTM",
        "GRU" => "GRU",
        "RNN" => "RNN",
        _ => return None,
    };
    ctx.values.get(1).copied().flatten()?;
    let w = ctx.inputs.get(1)?;
    if !w.dtype.is_float() || w.shape.as_ref().is_none_or(|s| s.len() != 3) {
        return None;
    }
    Some(Prepack {
        op,
        input: 1,
        attrs: vec![(W_TRANSPOSED, Attr::Int(1))],
        pack: transposed_w,
    })
}

/// W (`[dirs, gates * hidden, input]`, any element type) with each direction's matrix
/// transposed: `[dirs, input, gates * hidden]`; `None` if the bytes do not fill the
/// shape.
fn transposed_w(w: &HostTensor) -> Option<HostTensor> {
    let dims: Vec<usize> = w
        .shape
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .collect::<Option<_>>()?;
    let &[dirs, gh, input] = dims.as_slice() else {
        return None;
    };
    let view = View::contiguous(&dims).permute(&[0, 2, 1]);
    let mut data = vec![0u8; w.data.len()];
    copy_view(w.dtype.size(), &w.data, &view, &mut data).ok()?;
    Some(HostTensor {
        dtype: w.dtype,
        shape: vec![dirs as i64, input as i64, gh as i64],
        data: data.into(),
    })
}

/// LSTM, GRU and RNN (the op name picks which).
pub fn recurrence(
    ctx: &InferCtx,
    inputs: &[TensorRef],
    outputs: &mut [TensorMut],
) -> Result<(), OpError> {
    let rec = Recurrence::read(ctx, inputs)?;
    let dtype = inputs[0].dtype;
    let same = inputs
        .iter()
        .enumerate()
        .all(|(i, t)| i == 4 || t.is_empty() || t.dtype == dtype);
    if rec.runs_in_f32() && same {
        // float16 and bfloat16 are widened once and rounded once, as the products are.
        match dtype {
            DType::F32 => return rec.run_f32(ctx, inputs, outputs),
            DType::F16 => {
                return widened::<half::f16>(inputs, outputs, |i, o| rec.run_f32(ctx, i, o));
            }
            DType::Bf16 => {
                return widened::<half::bf16>(inputs, outputs, |i, o| rec.run_f32(ctx, i, o));
            }
            _ => {}
        }
    }
    let ops = rec.wide(ctx, inputs)?;
    let dm = &rec.dm;
    let (dirs, batch, h) = (dm.dirs, dm.batch, dm.hidden);
    let mut y = vec![0.0f64; dm.seq * dirs * batch * h];
    let mut y_h = vec![0.0f64; dirs * batch * h];
    let mut y_c = vec![0.0f64; dirs * batch * h];
    for d in 0..dirs {
        rec.direction(&ops, d, &mut y, &mut y_h, &mut y_c);
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

impl Recurrence {
    /// Every direction of a float32 LSTM or GRU ([`Recurrence::direction_f32`]),
    /// straight into the outputs; a state output the node does not have goes to working
    /// memory (as does a GRU's cell state, which it has not).
    fn run_f32(
        &self,
        ctx: &InferCtx,
        inputs: &[TensorRef],
        outputs: &mut [TensorMut],
    ) -> Result<(), OpError> {
        let operand = |i: usize| -> Result<Option<&[f32]>, OpError> {
            match inputs.get(i).filter(|t| !t.is_empty()) {
                Some(t) => Ok(Some(t.slice::<f32>()?)),
                None => Ok(None),
            }
        };
        let ops = Narrow {
            x: operand(0)?.unwrap_or(&[]),
            w: operand(1)?.unwrap_or(&[]),
            r: operand(2)?.unwrap_or(&[]),
            bias: operand(3)?,
            init_h: operand(5)?,
            init_c: operand(6)?,
        };
        let dm = &self.dm;
        let state = dm.dirs * dm.batch * dm.hidden;
        let both = dm.dirs == 2 && rayon::current_num_threads() > 1;
        // Each direction's outputs of its own, when the two run at once.
        let local = if both { dm.seq * state + 2 * state } else { 0 };
        with_scratch(
            2 * state + local + self.scratch_f32(),
            |scratch: &mut [f32]| {
                let (spare, rest) = scratch.split_at_mut(2 * state);
                let (local, work) = rest.split_at_mut(local);
                let (spare_h, spare_c) = spare.split_at_mut(state);
                let mut outs = outputs.iter_mut();
                let y = match outs.next() {
                    Some(o) => o.slice_mut::<f32>()?,
                    None => return Err(ctx.compute_error("has no output Y")),
                };
                let y_h = match outs.next() {
                    Some(o) => o.slice_mut::<f32>()?,
                    None => spare_h,
                };
                let y_c = match outs.next() {
                    Some(o) => o.slice_mut::<f32>()?,
                    None => spare_c,
                };
                if y.len() != dm.seq * state || y_h.len() != state || y_c.len() != state {
                    return Err(ctx.compute_error("outputs do not match the operands' shapes"));
                }
                if both {
                    self.both_directions(&ops, (local, work), y, y_h, y_c);
                    return Ok(());
                }
                // One direction at a time: each may split its units between threads.
                let split = rayon::current_num_threads() > 1;
                for d in 0..dm.dirs {
                    self.direction_f32(&ops, d, work, (dm, d, split), y, y_h, y_c);
                }
                Ok(())
            },
        )
    }

    /// A bidirectional float32 LSTM's or GRU's two directions at once, one per thread: they share
    /// nothing but the input, and a step of one is too short to split. Each writes its
    /// outputs as a one-direction LSTM's would be laid out, into its half of `local`
    /// (direction 1 with working memory of the thread it runs on), and they are then
    /// copied into the op's layout, where the directions interleave. The values are
    /// those of the directions run in turn.
    fn both_directions(
        &self,
        ops: &Narrow,
        (local, work): (&mut [f32], &mut [f32]),
        y: &mut [f32],
        y_h: &mut [f32],
        y_c: &mut [f32],
    ) {
        let dm = &self.dm;
        let one = Dims {
            dirs: 1,
            ..dm.clone()
        };
        let (seq, batch, h) = (dm.seq, dm.batch, dm.hidden);
        let (ylen, slen) = (seq * batch * h, batch * h);
        let (l0, l1) = local.split_at_mut(ylen + 2 * slen);
        let (y0, s0) = l0.split_at_mut(ylen);
        let (h0, c0) = s0.split_at_mut(slen);
        let (y1, s1) = l1.split_at_mut(ylen);
        let (h1, c1) = s1.split_at_mut(slen);
        rayon::join(
            || self.direction_f32(ops, 0, work, (&one, 0, false), y0, h0, c0),
            || {
                with_scratch(self.scratch_f32(), |w: &mut [f32]| {
                    self.direction_f32(ops, 1, w, (&one, 0, false), y1, h1, c1)
                })
            },
        );
        for (d, (yd, hd, cd)) in [(&*y0, &*h0, &*c0), (&*y1, &*h1, &*c1)]
            .into_iter()
            .enumerate()
        {
            for t in 0..seq {
                for b in 0..batch {
                    y[dm.y_at(t, d, b)..][..h].copy_from_slice(&yd[one.y_at(t, 0, b)..][..h]);
                }
            }
            for b in 0..batch {
                let (to, from) = (dm.state_at(d, b), one.state_at(0, b));
                y_h[to..][..h].copy_from_slice(&hd[from..][..h]);
                y_c[to..][..h].copy_from_slice(&cd[from..][..h]);
            }
        }
    }
}

/// `dst` ([cols, rows]) = `src` ([rows, cols]) transposed, in 8 x 8 blocks so both
/// sides are touched a cache line at a time rather than one strided float per write.
fn transpose(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    const B: usize = 8;
    for i0 in (0..rows).step_by(B) {
        for j0 in (0..cols).step_by(B) {
            for i in i0..(i0 + B).min(rows) {
                for j in j0..(j0 + B).min(cols) {
                    dst[j * rows + i] = src[i * cols + j];
                }
            }
        }
    }
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

    /// Each output's values as their bits, for exact comparisons.
    fn bits(v: &[Vec<f32>]) -> Vec<Vec<u32>> {
        v.iter()
            .map(|o| o.iter().map(|f| f.to_bits()).collect())
            .collect()
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
    /// clip, and states large enough to saturate gates; at batch 1 and 2 (a
    /// matrix-vector product per step) and 3 (a GEMM per step), with an input size past
    /// a vector's width so the products have remainders; and the two directions run in
    /// turn or on two threads at once give the same bits.
    #[test]
    fn float32_lstm_agrees_with_the_f64_one() {
        for batch in 1..=3 {
            float32_lstm_agrees_at(batch);
        }
    }

    fn float32_lstm_agrees_at(batch: usize) {
        let seeded =
            |n: usize, seed: u64, scale: f32| crate::om::onnx::builder::seeded_f32(n, seed, scale);
        let (seq, input, h) = (6, 19, 7);
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
                let lens = Tensor::from_vec(&[batch], &[6i32, 3, 0][..batch]);
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
                // The directions one after the other and on two threads at once: the
                // same bits.
                let on = |threads: usize| {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
                    pool.unwrap().install(|| run_f32s("LSTM", &attrs, &ins, 3))
                };
                assert_eq!(bits(&on(1)), bits(&on(2)), "batch {batch}: 1 and 2 threads");
                ins.push(t(&[2, 3 * h], &vec![0.0; 2 * 3 * h]));
                let wide = run_f32s("LSTM", &attrs, &ins, 3);
                for (k, (f, w)) in fast.iter().zip(&wide).enumerate() {
                    assert!(w.iter().any(|&v| v != 0.0), "output {k} is all zero");
                    for (i, (a, b)) in f.iter().zip(w).enumerate() {
                        assert!(
                            (a - b).abs() <= 2e-5 * b.abs().max(1.0),
                            "batch {batch} batch_first {batch_first} clip {clip:?} output \
                             {k}[{i}]: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }

    /// A one-direction float32 LSTM at batch 1 with enough units splits them between
    /// two threads (`Units`): forward and reverse, with initial states and clip, at
    /// widths whose shares are equal (64, 128) and not (80: 48 and 32); the same bits on
    /// one thread, on two, and on two of which one is busy (the first thread then takes
    /// every share alone), and the f64 path's values.
    #[test]
    fn split_units_give_the_bits_of_the_steps_in_turn() {
        let seeded =
            |n: usize, seed: u64, scale: f32| crate::om::onnx::builder::seeded_f32(n, seed, scale);
        let (seq, input) = (9, 11);
        for h in [64, 80, 128] {
            for (direction, clip) in [("forward", None), ("reverse", Some(0.9f32))] {
                let x = t(&[seq, 1, input], &seeded(seq * input, 11, 2.0));
                let w = t(&[1, 4 * h, input], &seeded(4 * h * input, 12, 0.4));
                let r = t(&[1, 4 * h, h], &seeded(4 * h * h, 13, 0.3));
                let b = t(&[1, 8 * h], &seeded(8 * h, 14, 0.5));
                let h0 = t(&[1, 1, h], &seeded(h, 15, 1.0));
                let c0 = t(&[1, 1, h], &seeded(h, 16, 3.0));
                let mut attrs = vec![
                    ("hidden_size", Attr::Int(h as i64)),
                    ("direction", Attr::Str(direction.into())),
                ];
                if let Some(c) = clip {
                    attrs.push(("clip", Attr::Float(f64::from(c))));
                }
                let mut ins = vec![x, w, r, b, none(), h0, c0];
                let pool = |n: usize| {
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(n)
                        .build()
                        .unwrap()
                };
                let one = pool(1).install(|| run_f32s("LSTM", &attrs, &ins, 3));
                let two = pool(2).install(|| run_f32s("LSTM", &attrs, &ins, 3));
                // One of the two threads held until the LSTM is done.
                let busy = pool(2);
                let (hold, wait) = std::sync::mpsc::channel::<()>();
                let (held, started) = std::sync::mpsc::channel::<()>();
                busy.spawn(move || {
                    held.send(()).unwrap();
                    wait.recv().ok();
                });
                started.recv().unwrap();
                let alone = busy.install(|| run_f32s("LSTM", &attrs, &ins, 3));
                hold.send(()).unwrap();
                let what = format!("h {h} {direction}");
                assert_eq!(bits(&one), bits(&two), "{what}: 1 and 2 threads");
                assert_eq!(bits(&one), bits(&alone), "{what}: 1 thread and 2, one busy");
                // The float64 path (a zero peephole input takes it) agrees.
                ins.push(t(&[1, 3 * h], &vec![0.0; 3 * h]));
                let wide = run_f32s("LSTM", &attrs, &ins, 3);
                for (k, (f, w)) in one.iter().zip(&wide).enumerate() {
                    assert!(
                        w.iter().any(|&v| v != 0.0),
                        "{what}: output {k} is all zero"
                    );
                    for (i, (a, b)) in f.iter().zip(w).enumerate() {
                        assert!(
                            (a - b).abs() <= 2e-5 * b.abs().max(1.0),
                            "{what}: output {k}[{i}]: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }

    /// The float32 GRU computes what the f64 one does (the same operands as float64
    /// take the f64 path): both directions, both layouts, linear_before_reset 0 and 1,
    /// clip, sequence lengths (one of them 0) and initial states, at batch 1 to 3; and
    /// its two directions on one thread or two give the same bits.
    #[test]
    fn float32_gru_agrees_with_the_f64_one() {
        let seeded =
            |n: usize, seed: u64, scale: f32| crate::om::onnx::builder::seeded_f32(n, seed, scale);
        let wide = |t: &Tensor| {
            let v: Vec<f64> = t
                .slice::<f32>()
                .unwrap()
                .iter()
                .map(|&v| v.into())
                .collect();
            Tensor::from_vec(&t.shape, &v)
        };
        let (seq, input, h) = (6, 19, 7);
        for batch in 1..=3 {
            for (batch_first, lbr, clip) in [
                (false, 0, None),
                (true, 1, None),
                (false, 1, Some(0.8f32)),
                (true, 0, Some(0.8f32)),
            ] {
                let xs = if batch_first {
                    [batch, seq, input]
                } else {
                    [seq, batch, input]
                };
                let ss = if batch_first {
                    [batch, 2, h]
                } else {
                    [2, batch, h]
                };
                let ins = vec![
                    t(&xs, &seeded(seq * batch * input, 1, 2.0)),
                    t(&[2, 3 * h, input], &seeded(2 * 3 * h * input, 2, 1.0)),
                    t(&[2, 3 * h, h], &seeded(2 * 3 * h * h, 3, 1.0)),
                    t(&[2, 6 * h], &seeded(2 * 6 * h, 4, 0.5)),
                    Tensor::from_vec(&[batch], &[6i32, 3, 0][..batch]),
                    t(&ss, &seeded(2 * batch * h, 5, 1.0)),
                ];
                let mut attrs = vec![
                    ("hidden_size", Attr::Int(h as i64)),
                    ("direction", Attr::Str("bidirectional".into())),
                    ("layout", Attr::Int(i64::from(batch_first))),
                    ("linear_before_reset", Attr::Int(lbr)),
                ];
                if let Some(c) = clip {
                    attrs.push(("clip", Attr::Float(f64::from(c))));
                }
                let on = |threads: usize| {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
                    pool.unwrap().install(|| run_f32s("GRU", &attrs, &ins, 2))
                };
                let (one, two) = (on(1), on(2));
                assert_eq!(bits(&one), bits(&two), "batch {batch}: 1 and 2 threads");
                let reference: Vec<Tensor> = ins
                    .iter()
                    .enumerate()
                    .map(|(i, t)| if i == 4 { t.clone() } else { wide(t) })
                    .collect();
                let want = crate::ops::testing::run("GRU", &attrs, &reference, 2);
                let case =
                    format!("batch {batch} batch_first {batch_first} lbr {lbr} clip {clip:?}");
                for (k, (f, w)) in one.iter().zip(&want).enumerate() {
                    let w = w.slice::<f64>().unwrap();
                    assert!(
                        w.iter().any(|&v| v != 0.0),
                        "{case}: output {k} is all zero"
                    );
                    assert_eq!(f.len(), w.len());
                    for (i, (&a, &b)) in f.iter().zip(w).enumerate() {
                        assert!(
                            (f64::from(a) - b).abs() <= 2e-5 * b.abs().max(1.0),
                            "{case} output {k}[{i}]: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }

    /// W stored transposed by lowering's prepack ([`super::transposed_w`], launched with
    /// `_rt2_w_transposed`) gives the bits of W read as the op defines it: LSTM and GRU
    /// in float32 at batch 1 and 3, an LSTM with peepholes and an RNN in f64.
    #[test]
    fn a_transposed_w_gives_the_same_bits() {
        let seeded =
            |n: usize, seed: u64, scale: f32| crate::om::onnx::builder::seeded_f32(n, seed, scale);
        let (seq, input, h) = (5, 11, 6);
        for (op, gates, batch, peepholes) in [
            ("LSTM", 4, 1, false),
            ("LSTM", 4, 3, false),
            ("GRU", 3, 1, false),
            ("LSTM", 4, 2, true),
            ("RNN", 1, 2, false),
        ] {
            let gh = gates * h;
            let w = t(&[2, gh, input], &seeded(2 * gh * input, 2, 1.0));
            let mut ins = vec![
                t(&[seq, batch, input], &seeded(seq * batch * input, 1, 2.0)),
                w.clone(),
                t(&[2, gh, h], &seeded(2 * gh * h, 3, 1.0)),
                t(&[2, 2 * gh], &seeded(4 * gh, 4, 0.5)),
            ];
            if peepholes {
                ins.extend([
                    none(),
                    none(),
                    none(),
                    t(&[2, 3 * h], &seeded(6 * h, 5, 0.5)),
                ]);
            }
            let mut attrs = vec![
                ("hidden_size", Attr::Int(h as i64)),
                ("direction", Attr::Str("bidirectional".into())),
            ];
            let outs = if op == "LSTM" { 3 } else { 2 };
            let plain = run_f32s(op, &attrs, &ins, outs);
            let packed = super::transposed_w(&w.to_host()).unwrap();
            assert_eq!(packed.shape, [2, input as i64, gh as i64]);
            ins[1] = Tensor::from_host(&packed).unwrap();
            attrs.push((super::W_TRANSPOSED, Attr::Int(1)));
            let transposed = run_f32s(op, &attrs, &ins, outs);
            assert!(plain[0].iter().any(|&v| v != 0.0), "{op}: Y is all zero");
            assert_eq!(bits(&plain), bits(&transposed), "{op} batch {batch}");
        }
    }

    /// A float16 LSTM is the float32 one on its widened operands, rounded once: its
    /// outputs are the float32 LSTM's rounded to float16. A node with Y alone gives the
    /// Y of a node with every output.
    #[test]
    fn float16_and_y_only_lstms_are_the_float32_one() {
        let seeded =
            |n: usize, seed: u64, scale: f32| crate::om::onnx::builder::seeded_f32(n, seed, scale);
        let half = |v: &[f32]| {
            v.iter()
                .map(|&v| half::f16::from_f32(v))
                .collect::<Vec<_>>()
        };
        let (seq, batch, input, h) = (5, 1, 4, 6);
        let x = seeded(seq * batch * input, 1, 1.0);
        let w = seeded(4 * h * input, 2, 1.0);
        let r = seeded(4 * h * h, 3, 1.0);
        // Exactly representable in float16, so both runs read the same operands.
        let (x, w, r) = (
            half(&x).iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
            half(&w).iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
            half(&r).iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
        );
        let attrs = [("hidden_size", Attr::Int(h as i64))];
        let shapes = [[seq, batch, input], [1, 4 * h, input], [1, 4 * h, h]];
        let f32_in: Vec<Tensor> = [&x, &w, &r]
            .iter()
            .zip(&shapes)
            .map(|(v, s)| t(s, v))
            .collect();
        let wide = run_f32s("LSTM", &attrs, &f32_in, 3);
        let f16_in: Vec<Tensor> = [&x, &w, &r]
            .iter()
            .zip(&shapes)
            .map(|(v, s)| Tensor::from_vec(s, &half(v)))
            .collect();
        let narrow = crate::ops::testing::run("LSTM", &attrs, &f16_in, 3);
        for (k, (n, w)) in narrow.iter().zip(&wide).enumerate() {
            let got: Vec<u16> = n
                .slice::<half::f16>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            let want: Vec<u16> = half(w).iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "output {k}");
        }
        let y = run_f32s("LSTM", &attrs, &f32_in, 1);
        assert_eq!(y[0], wide[0]);
    }
}
