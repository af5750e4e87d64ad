//! GE's (Caffe's) LSTM run as lowering runs a GE graph's LSTM node, against values worked
//! out by hand and against a reference written here from Caffe's equations.

use crate::ops::testing::{f16_tensor, f16_values, try_run_ge};
use crate::ops::{Attr, DType, Tensor};

fn f(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v)
}

/// The tensor an optional input left out in the middle is given as.
fn absent() -> Tensor {
    f(&[0], &[])
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.slice::<f32>().unwrap().to_vec()
}

/// `n` deterministic values in [-1, 1).
fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(7);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            ((s >> 8) % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// Caffe's LSTM written out in float64, one gate at a time: (h `[T, N, H]`, h_T, c_T).
#[allow(clippy::too_many_arguments)]
fn reference(
    (t, n, i, h): (usize, usize, usize, usize),
    x: &[f32],
    cont: &[f32],
    w_x: &[f32],
    bias: &[f32],
    w_h: &[f32],
    stat: Option<(&[f32], &[f32], usize)>,
    init: Option<(&[f32], &[f32])>,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let (mut hp, mut cp) = match init {
        Some((h0, c0)) => (
            h0.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
            c0.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        ),
        None => (vec![0.0; n * h], vec![0.0; n * h]),
    };
    let mut out = Vec::new();
    for s in 0..t {
        let mut hn = vec![0.0; n * h];
        for b in 0..n {
            let k = f64::from(cont[s * n + b]);
            // Gate `q` (0 i, 1 f, 2 o, 3 candidate) of unit `j`: row `q H + j`.
            let pre = |q: usize, j: usize| {
                let r = q * h + j;
                let mut v = f64::from(bias[r]);
                for c in 0..i {
                    v += f64::from(w_x[r * i + c]) * f64::from(x[(s * n + b) * i + c]);
                }
                for c in 0..h {
                    v += f64::from(w_h[r * h + c]) * k * hp[b * h + c];
                }
                if let Some((xs, ws, sd)) = stat {
                    for c in 0..sd {
                        v += f64::from(ws[r * sd + c]) * f64::from(xs[b * sd + c]);
                    }
                }
                v
            };
            for j in 0..h {
                let (ig, fg, og, g) = (
                    sig(pre(0, j)),
                    sig(pre(1, j)),
                    sig(pre(2, j)),
                    pre(3, j).tanh(),
                );
                let c = k * fg * cp[b * h + j] + ig * g;
                cp[b * h + j] = c;
                hn[b * h + j] = og * c.tanh();
            }
        }
        hp = hn;
        out.extend_from_slice(&hp);
    }
    (out, hp, cp)
}

fn close(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((f64::from(*g) - w).abs() <= 2e-6, "{got:?}\nvs {want:?}");
    }
}

#[test]
fn one_unit_by_hand_and_cont_restarts_the_sequence() {
    // Zero weights, bias (0, 0, 0, b): every gate 1/2, the candidate tanh(b). Step 1:
    // c1 = tanh(b) / 2, h1 = tanh(c1) / 2. Step 2 continuing: c2 = c1 / 2 + tanh(b) / 2;
    // restarting (cont 0): c2 = tanh(b) / 2 again.
    let b = 0.8f32;
    let g = f64::from(b).tanh();
    let zeros = f(&[4, 1], &[0.0; 4]);
    let run = |cont: [f32; 2]| {
        let inputs = [
            f(&[2, 1, 1], &[0.3, -0.6]),
            f(&[2, 1], &cont),
            zeros.clone(),
            f(&[4], &[0.0, 0.0, 0.0, b]),
            zeros.clone(),
        ];
        try_run_ge("LSTM", &[], &inputs, 3).unwrap()
    };
    let c1 = g / 2.0;
    let y = run([0.0, 1.0]);
    assert_eq!(y[0].shape, [2, 1, 1]);
    assert_eq!(
        (y[1].shape.clone(), y[2].shape.clone()),
        (vec![1, 1, 1], vec![1, 1, 1])
    );
    let c2 = c1 / 2.0 + g / 2.0;
    close(&vals(&y[0]), &[c1.tanh() / 2.0, c2.tanh() / 2.0]);
    close(&vals(&y[2]), &[c2]);
    close(&vals(&y[1]), &[c2.tanh() / 2.0]);
    let y = run([1.0, 0.0]);
    close(&vals(&y[0]), &[c1.tanh() / 2.0, c1.tanh() / 2.0]);
    close(&vals(&y[2]), &[c1]);
}

#[test]
fn gates_in_caffes_order_with_static_input_and_exposed_state() {
    let (t, n, i, h, sd) = (3, 2, 3, 2, 2);
    let x = data(t * n * i, 1);
    let cont = [0.0, 0.0, 1.0, 1.0, 1.0, 0.0];
    let (w_x, bias, w_h) = (data(4 * h * i, 2), data(4 * h, 3), data(4 * h * h, 4));
    let (xs, ws) = (data(n * sd, 5), data(4 * h * sd, 6));
    let (h0, c0) = (data(n * h, 7), data(n * h, 8));
    let inputs = [
        f(&[t, n, i], &x),
        f(&[t, n], &cont),
        f(&[4 * h, i], &w_x),
        f(&[4 * h], &bias),
        f(&[4 * h, h], &w_h),
        f(&[n, sd], &xs),
        f(&[1, n, h], &h0),
        f(&[1, n, h], &c0),
        f(&[4 * h, sd], &ws),
    ];
    let attrs = [
        ("expose_hidden", Attr::Bool(true)),
        ("num_output", Attr::Int(h as i64)),
    ];
    let y = try_run_ge("LSTM", &attrs, &inputs, 3).unwrap();
    let (want, wh, wc) = reference(
        (t, n, i, h),
        &x,
        &cont,
        &w_x,
        &bias,
        &w_h,
        Some((&xs, &ws, sd)),
        Some((&h0, &c0)),
    );
    assert_eq!(y[0].shape, [t, n, h]);
    close(&vals(&y[0]), &want);
    close(&vals(&y[1]), &wh);
    close(&vals(&y[2]), &wc);
    // Without the static input (left out in the middle) and without exposed state: the
    // recurrence starts from zeros.
    let mut plain = inputs[..5].to_vec();
    plain.extend([absent()]);
    let y = try_run_ge("LSTM", &[], &plain, 1).unwrap();
    let (want, _, _) = reference((t, n, i, h), &x, &cont, &w_x, &bias, &w_h, None, None);
    close(&vals(&y[0]), &want);
    // Defaults: expose_hidden false is the same as zeros given as h_0 and c_0.
    let zero = f(&[1, n, h], &vec![0.0; n * h]);
    let exposed = [&inputs[..5], &[absent(), zero.clone(), zero][..]].concat();
    let z = try_run_ge("LSTM", &[("expose_hidden", Attr::Bool(true))], &exposed, 1).unwrap();
    assert_eq!(vals(&z[0]), vals(&y[0]));
}

#[test]
fn float16_rounds_each_output_once() {
    let (t, n, i, h) = (2, 1, 2, 3);
    let x = data(t * n * i, 11);
    let (w_x, bias, w_h) = (data(4 * h * i, 12), data(4 * h, 13), data(4 * h * h, 14));
    let halves = |shape: &[usize], v: &[f32]| f16_tensor(shape, v);
    let inputs = [
        halves(&[t, n, i], &x),
        halves(&[t, n], &[1.0, 1.0]),
        halves(&[4 * h, i], &w_x),
        halves(&[4 * h], &bias),
        halves(&[4 * h, h], &w_h),
    ];
    let y = try_run_ge("LSTM", &[], &inputs, 1).unwrap();
    assert_eq!(y[0].dtype, DType::F16);
    // The reference on the float16 operands' values.
    let back = |t: &Tensor| f16_values(t);
    let (want, _, _) = reference(
        (t, n, i, h),
        &back(&inputs[0]),
        &back(&inputs[1]),
        &back(&inputs[2]),
        &back(&inputs[3]),
        &back(&inputs[4]),
        None,
        None,
    );
    for (g, w) in f16_values(&y[0]).iter().zip(&want) {
        // One rounding to float16: half an ulp, 2^-11 relative, plus float32's error.
        assert!(
            (f64::from(*g) - w).abs() <= w.abs() / 2048.0 + 1e-6,
            "{g} vs {w}"
        );
    }
}

#[test]
fn what_caffe_does_not_define_is_refused() {
    let base = || {
        vec![
            f(&[1, 1, 2], &[0.5, 0.5]),
            f(&[1, 1], &[1.0]),
            f(&[4, 2], &[0.1; 8]),
            f(&[4], &[0.0; 4]),
            f(&[4, 1], &[0.2; 4]),
        ]
    };
    let err = |attrs: &[(&str, Attr)], inputs: &[Tensor]| {
        try_run_ge("LSTM", attrs, inputs, 1).unwrap_err()
    };
    // h_0 and c_0 without expose_hidden.
    let mut with_state = base();
    with_state.extend([absent(), f(&[1, 1, 1], &[0.0]), f(&[1, 1, 1], &[0.0])]);
    let e = err(&[], &with_state);
    assert!(e.contains("without expose_hidden"), "{e}");
    // expose_hidden without them.
    let e = err(&[("expose_hidden", Attr::Bool(true))], &base());
    assert!(e.contains("expose_hidden needs h_0 and c_0"), "{e}");
    // num_output must be w_h's H.
    let e = err(&[("num_output", Attr::Int(3))], &base());
    assert!(e.contains("num_output"), "{e}");
    // A quantized (int32) bias.
    let mut quantized = base();
    quantized[3] = Tensor::from_vec(&[4], &[0i32; 4]);
    let e = err(&[], &quantized);
    assert!(e.contains("quantized"), "{e}");
    // x_static without its weight.
    let mut half_static = base();
    half_static.push(f(&[1, 1], &[1.0]));
    let e = err(&[], &half_static);
    assert!(e.contains("without w_x_static"), "{e}");
    // Too few inputs for GE's prototype.
    let e = err(&[], &base()[..4]);
    assert!(e.contains("GE's LSTM takes"), "{e}");
}
