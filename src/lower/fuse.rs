//! Activations that graphs write as several elementwise ops, fused at lowering into the
//! one op that computes them in a single pass with the vector math; and the activation
//! after a convolution, fused into the convolution.
//!
//! Exporters spell out what their framework computes as one function: PyTorch writes
//! `nn.GELU()` as `x * 0.5 * (1 + Erf(x / √2))` (five nodes, each a full pass over the
//! tensor and a tensor of memory), `nn.LayerNorm` before opset 17 as nine, and SiLU
//! before opset 14 as `x * Sigmoid(x)`. Each is
//! found here and replaced by one node:
//!
//! | pattern | becomes |
//! |---|---|
//! | `Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5)`, `Mul(Mul(x, 0.5), Add(...))`, `x * 1/√2` for the division, either operand order of every Mul and Add, `RealDiv` for Div | `Gelu` (ONNX's, `approximate` "none") |
//! | `0.5 x (1 + Tanh(√(2/π) (x + 0.044715 x³)))` with its products associated any way (a tree of Muls, constants anywhere in it), the cube as `x x x` or `Pow(x, 3)`, either operand order of the Adds, `AddV2` for Add: PyTorch's `approximate='tanh'` before opset 20, JAX's and TensorFlow's `gelu`, Hugging Face's `gelu_new` | `Gelu` (ONNX's, `approximate` "tanh") |
//! | `Mul(x, Sigmoid(x))`, either order | `Swish` (GE's, `scale` 1) |
//! | `Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)` (Paddle2ONNX's hard_swish), `RealDiv` for Div or `Mul` by 1/6, `Relu6` or `ClipByValue` for the Clip, either operand order of the Mul and Add | `HardSwish` (ONNX's), which the next rule then fuses into a convolution before it |
//! | `Add(Mul(Div(d, Sqrt(Add(ReduceMean(Pow(d, 2)), eps))), gamma), beta)` with `d = Sub(x, ReduceMean(x))`, both means over the last axis keeping it, the square as `Pow(d, 2)` or `Mul(d, d)`, either operand order of the Mul and Adds, gamma and beta constant vectors | `LayerNormalization` (ONNX's, `axis` -1) |
//! | inference `BatchNormalization` or `BatchNorm` (constant statistics) of a float32 `Conv` or NCHW `Conv2D` (constant filter and bias) | the convolution, its filter and bias scaled and shifted per channel ([`batch_norm`]); folded first |
//! | `Relu`, `LeakyRelu`, `Clip` or `ClipByValue` (constant bounds), `Relu6`, `HardSigmoid` or `HardSwish` of a float32 `Conv` or `Conv2D` | the convolution, applying the activation as it stores its output (`_rt2_fused_activation`, see `ops::nn::epilogue`) |
//! | `Softmax(Div(x, c))` (or `RealDiv`), `Softmax(Mul(x, c))` in either order, or `Softmax(Muls(x))`, with `c` a positive constant scalar (attention's scores over √d); `SoftmaxV2` alike | the Softmax with the factor (`1/c` for a division) as `_rt2_softmax_scale`, applied as it subtracts each row's max ([`crate::ops::SOFTMAX_SCALE_ATTR`]) |
//! | `Add(P, b)`, either operand order, with `P` a float32 `BatchMatMulV2` or `MatMulV2` (what the importer makes of ONNX's MatMul and Gemm) of two inputs whose `x2` is a constant matrix, and `b` a constant float32 `[N]` (a Linear layer as PyTorch exports it) | the product with `b` as its bias (input 2), which `MatMulPacked` adds as it stores the product's tiles |
//!
//! A CNN's convolutions are nearly all followed by Relu (or Relu6, LeakyRelu, HardSwish):
//! run apart, each is a second pass over the convolution's output. Fused, the
//! convolution applies it to each tile as it stores it (`ops::nn::epilogue`, with the
//! standalone op's arithmetic, so the result has the same bits). A transformer's
//! projections are each a MatMul and a bias Add, the Add another pass over the product
//! (twelve in a two-layer encoder); fused, the bias is added to the finished sums in
//! registers, rounded once as the Add rounds them (GE's fusion engine does the same for
//! MatMul and BiasAdd).
//!
//! A pattern fuses only where every node inside it is read by the next one alone (an
//! intermediate another node or the graph's outputs read must be computed), its
//! constants are the scalars of the formula (to float32 precision), and `x` is a
//! floating-point tensor the fused op computes. The fused node keeps the last node's name
//! and output descriptor and records the fused nodes' names in
//! `_datadump_original_op_names`, as GE's own fusion passes do, so `rt2 compare` matches
//! it. The other nodes of the pattern are removed.

use std::borrow::Cow;

use crate::om::graph::{
    AttrValue, ComputeGraph, ComputeModel, ComputeNode, ListAttr, OutPort, Shape, is_const_type,
};

use super::attrs::ONNX_OPSET_ATTR;
use crate::ops::{
    DType, FUSED_ACTIVATION_ATTR as ACTIVATION_ATTR, FUSED_ACTIVATION_PARAMS_ATTR as PARAMS_ATTR,
    SOFTMAX_SCALE_ATTR,
};
use view::{ORIGINAL_OP_NAMES, View, near, rank, remove};

/// The model with its activation patterns fused ([the module](self)), or the model itself
/// when it has none.
pub fn activations(model: &ComputeModel) -> Cow<'_, ComputeModel> {
    let mut any = false;
    model.root.walk(&mut |g| {
        let v = View::new(g);
        any |= batch_norm::any(&v) || !find(&v).is_empty();
    });
    if !any {
        return Cow::Borrowed(model);
    }
    let mut m = model.clone();
    fuse_graph(&mut m.root);
    Cow::Owned(m)
}

fn fuse_graph(g: &mut ComputeGraph) {
    for n in &mut g.nodes {
        for s in &mut n.subgraphs {
            fuse_graph(s);
        }
    }
    // First, so that the activation after a folded normalization follows the
    // convolution it now fuses into.
    batch_norm::fold_all(g);
    // A second round finds what the first made: a HardSwish written out, now one node,
    // after the convolution it fuses into. Each round removes nodes, so the rounds end.
    for _ in 0..2 {
        let found = find(&View::new(g));
        if found.is_empty() {
            return;
        }
        let mut dead = vec![false; g.nodes.len()];
        for f in found {
            for &k in &f.inner {
                dead[k] = true;
            }
            apply(g, f);
        }
        remove(g, &dead);
    }
}

/// One pattern found: the node that becomes the fused op, its input, what it becomes,
/// and the nodes it replaces (the last one excluded).
#[derive(Debug)]
struct Fusion {
    last: usize,
    x: OutPort,
    op: Fused,
    inner: Vec<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fused {
    Gelu,
    /// GELU's tanh approximation.
    GeluTanh,
    Swish,
    HardSwish,
    /// The convolution node `conv` applying the activation (see `ops::nn::epilogue`).
    ConvActivation {
        conv: usize,
        kind: &'static str,
        params: [f32; 2],
        count: usize,
    },
    /// LayerNormalization over the last axis, with its scale and bias and epsilon.
    LayerNorm {
        gamma: OutPort,
        beta: OutPort,
        epsilon: f32,
    },
    /// The product node `matmul` adding `bias`, the last node's input `input`.
    MatMulBias {
        matmul: usize,
        bias: OutPort,
        input: usize,
    },
    /// The Softmax (the last node) of `x` scaled by `scale`.
    SoftmaxScale {
        scale: f32,
    },
}

/// Every pattern of `g`, none overlapping another (a node belongs to one pattern).
fn find(v: &View) -> Vec<Fusion> {
    let g = v.g;
    let mut taken = vec![false; g.nodes.len()];
    let mut found = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let f = match n.op_type.as_str() {
            "Mul" => gelu(v, i, n)
                .or_else(|| gelu_tanh(v, i, n))
                .or_else(|| swish(v, i, n))
                .or_else(|| hard_swish(v, i, n)),
            "Div" | "RealDiv" => hard_swish(v, i, n),
            "Add" => layer_norm(v, i, n).or_else(|| matmul_bias(v, i, n)),
            "Softmax" | "SoftmaxV2" => softmax_scale(v, i, n),
            "Relu" | "LeakyRelu" | "Clip" | "ClipByValue" | "Relu6" | "Relu6D" | "HardSigmoid"
            | "HardSwish" => conv_activation(v, i, n),
            _ => None,
        };
        let Some(f) = f else {
            continue;
        };
        if f.inner.iter().chain([&f.last]).any(|&k| taken[k]) {
            continue;
        }
        for &k in f.inner.iter().chain([&f.last]) {
            taken[k] = true;
        }
        found.push(f);
    }
    found
}

/// GELU ending at the Mul `last` (see the module doc for its spellings).
fn gelu(v: &View, last: usize, n: &ComputeNode) -> Option<Fusion> {
    let (a, b) = View::two(n)?;
    // The last Mul is either (x * (1 + erf)) * 0.5 or (x * 0.5) * (1 + erf): candidates
    // (x, the Add's output, the other Mul's output), each checked to the end.
    let mut candidates = Vec::with_capacity(4);
    if let Some(m) = v.with_const(n, 0.5)
        && let Some(inner) = v.sole(m, &["Mul"])
        && let Some((p, q)) = View::two(inner)
    {
        candidates.extend([(p, q, m), (q, p, m)]);
    }
    for (h, plus) in [(a, b), (b, a)] {
        if let Some(x) = v.sole(h, &["Mul"]).and_then(|h| v.with_const(h, 0.5)) {
            candidates.push((x, plus, h));
        }
    }
    candidates.into_iter().find_map(|(x, plus, mul)| {
        let (erf_out, scaled) = gelu_erf(v, x, plus)?;
        let inner = [mul, plus, erf_out, scaled]
            .iter()
            .map(|p| p.node.index())
            .collect();
        Some(Fusion {
            last,
            x,
            op: Fused::Gelu,
            inner,
        })
    })
}

/// For GELU's `1 + Erf(x / √2)` at `plus`: the outputs of the Erf and of the division
/// (or multiplication by 1/√2).
fn gelu_erf(v: &View, x: OutPort, plus: OutPort) -> Option<(OutPort, OutPort)> {
    let add = v.sole(plus, &["Add"])?;
    let erf_out = v.with_const(add, 1.0)?;
    let erf = v.sole(erf_out, &["Erf"])?;
    let scaled = erf.inputs.first().copied().flatten()?;
    let div = v.sole(scaled, &["Div", "RealDiv", "Mul"])?;
    let xs = if div.op_type == "Mul" {
        v.with_const(div, std::f64::consts::FRAC_1_SQRT_2)?
    } else {
        let (p, q) = View::two(div)?;
        let r = v.scalar(q)?;
        ((r - std::f64::consts::SQRT_2).abs() <= 1e-6).then_some(p)?
    };
    let xi = div.inputs.iter().position(|p| *p == Some(x))?;
    (xs == x && v.float_input(div, xi)).then_some((erf_out, scaled))
}

/// The factors of a product written as a tree of Muls: the product of its scalar
/// constants and its other operands, in no particular order.
struct Factors {
    scale: f64,
    of: Vec<OutPort>,
}

/// Most Muls one product of [`factors`] may span: GELU's tanh form has at most five.
const MAX_PRODUCT_NODES: usize = 8;

/// The factors of the product computed by the Mul `n`: every operand that is itself a
/// Mul read only by this product is opened in turn (its node index added to `inner`),
/// so `(0.5 x) y`, `0.5 (x y)` and `x (y 0.5)` all give `0.5` and `[x, y]`.
fn factors(v: &View, n: &ComputeNode, inner: &mut Vec<usize>) -> Option<Factors> {
    let (a, b) = View::two(n)?;
    let mut open = vec![a, b];
    let mut f = Factors {
        scale: 1.0,
        of: Vec::new(),
    };
    let mut opened = 0;
    while let Some(p) = open.pop() {
        if let Some(c) = v.scalar(p) {
            f.scale *= c;
        } else if let Some(m) = v.sole(p, &["Mul"]) {
            opened += 1;
            if opened > MAX_PRODUCT_NODES {
                return None;
            }
            let (c, d) = View::two(m)?;
            inner.push(p.node.index());
            open.extend([c, d]);
        } else {
            f.of.push(p);
        }
    }
    Some(f)
}

/// GELU's tanh approximation ending at the Mul `last`: the product `0.5 x (1 + t)` with
/// `t = Tanh(k (x + c x³))`, `k = √(2/π)` and `c = 0.044715`, each product in any
/// association ([`factors`]) and the cube as three factors x or `Pow(x, 3)`.
fn gelu_tanh(v: &View, last: usize, n: &ComputeNode) -> Option<Fusion> {
    let mut inner = Vec::new();
    let top = factors(v, n, &mut inner)?;
    let [p, q] = top.of[..] else {
        return None;
    };
    if !near(top.scale, 0.5) {
        return None;
    }
    [(p, q), (q, p)].into_iter().find_map(|(x, plus)| {
        let mut inner = inner.clone();
        let add = v.sole(plus, &["Add", "AddV2"])?;
        let t = v.with_const(add, 1.0)?;
        let tanh = v.sole(t, &["Tanh"])?;
        let arg = tanh.inputs.first().copied().flatten()?;
        let scaled = factors(v, v.sole(arg, &["Mul"])?, &mut inner)?;
        let [sum] = scaled.of[..] else {
            return None;
        };
        let k = (2.0 / std::f64::consts::PI).sqrt();
        let add2 = v
            .sole(sum, &["Add", "AddV2"])
            .filter(|_| near(scaled.scale, k))?;
        let (a, b) = View::two(add2)?;
        let cube = if a == x { b } else { a };
        let xi = add2.inputs.iter().position(|p| *p == Some(x))?;
        let cubed = factors(v, v.sole(cube, &["Mul"])?, &mut inner)?;
        match cubed.of[..] {
            [a, b, c] if [a, b, c] == [x; 3] => {}
            [pw] => {
                let (base, e) = View::two(v.sole(pw, &["Pow"])?)?;
                (base == x && v.scalar(e) == Some(3.0)).then_some(())?;
                inner.push(pw.node.index());
            }
            _ => return None,
        }
        // A constant of a higher rank than x would broadcast it to more dims than the
        // fused op's output has.
        let ranks = (rank(add2.input_descs.get(xi)), rank(n.output_descs.first()));
        if !near(cubed.scale, 0.044_715)
            || !v.float_input(add2, xi)
            || matches!(ranks, (Some(a), Some(b)) if a != b)
        {
            return None;
        }
        inner.extend([plus, t, arg, sum, cube].map(|p| p.node.index()));
        Some(Fusion {
            last,
            x,
            op: Fused::GeluTanh,
            inner,
        })
    })
}

/// LayerNorm over the last axis as PyTorch writes it before opset 17, ending at the Add
/// `last`: `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * gamma + beta`, the square
/// as `Pow(d, 2)` or `Mul(d, d)`, gamma and beta constant vectors.
fn layer_norm(v: &View, last: usize, n: &ComputeNode) -> Option<Fusion> {
    let (a, b) = View::two(n)?;
    let (scaled, beta) = [(a, b), (b, a)]
        .into_iter()
        .find(|&(s, c)| v.sole(s, &["Mul"]).is_some() && vector(v, c))?;
    let mul = v.node(scaled)?;
    let (p, q) = View::two(mul)?;
    let (normed, gamma) = [(p, q), (q, p)]
        .into_iter()
        .find(|&(r, c)| v.sole(r, &["Div", "RealDiv"]).is_some() && vector(v, c))?;
    let div = v.node(normed)?;
    let (centred, root) = View::two(div)?;
    // d is read by the division and the square: twice by a Mul(d, d).
    let sub = v
        .read(centred, &["Sub"], 2)
        .or_else(|| v.read(centred, &["Sub"], 3))?;
    let (x, mean) = View::two(sub)?;
    if v.mean_of_last(v.sole(mean, &["ReduceMean"])?)? != x {
        return None;
    }
    let sqrt = v.sole(root, &["Sqrt"])?;
    let plus = sqrt.inputs.first().copied().flatten()?;
    let add = v.sole(plus, &["Add"])?;
    let (var, eps) = View::two(add)?;
    let (var, epsilon) = match (v.scalar(eps), v.scalar(var)) {
        (Some(e), _) => (var, e),
        (None, Some(e)) => (eps, e),
        _ => return None,
    };
    let square = v.mean_of_last(v.sole(var, &["ReduceMean"])?)?;
    let sq = v.sole(square, &["Pow", "Mul"])?;
    let reads = v.readers[centred.node.index()];
    let squares = match (sq.op_type.as_str(), View::two(sq)?) {
        ("Pow", (d, two)) => d == centred && v.scalar(two) == Some(2.0) && reads == 2,
        (_, (d, e)) => d == centred && e == centred && reads == 3,
    };
    if !squares || epsilon.is_nan() || epsilon <= 0.0 || !v.float_input(sub, 0) {
        return None;
    }
    let inner = [scaled, normed, centred, mean, root, plus, var, square]
        .iter()
        .map(|p| p.node.index())
        .collect();
    Some(Fusion {
        last,
        x,
        op: Fused::LayerNorm {
            gamma,
            beta,
            epsilon: epsilon as f32,
        },
        inner,
    })
}

/// Whether `p` is a constant vector (a scale or bias over the last axis).
fn vector(v: &View, p: OutPort) -> bool {
    v.node(p).is_some_and(|n| {
        is_const_type(&n.op_type)
            && matches!(n.attr("value"), Some(AttrValue::Tensor(t))
                if matches!(&t.desc.shape, Shape::Dims(d) if d.len() == 1))
    })
}

/// `x * Sigmoid(x)` at the Mul `last`.
fn swish(v: &View, last: usize, n: &ComputeNode) -> Option<Fusion> {
    let (a, b) = View::two(n)?;
    let (x, s) = [(a, b), (b, a)].into_iter().find(|&(x, s)| {
        v.sole(s, &["Sigmoid"])
            .is_some_and(|s| s.inputs.as_slice() == [Some(x)])
    })?;
    let xi = n.inputs.iter().position(|p| *p == Some(x))?;
    v.float_input(n, xi).then(|| Fusion {
        last,
        x,
        op: Fused::Swish,
        inner: vec![s.node.index()],
    })
}

/// `x * Clip(x + 3, 0, 6) / 6` at the division (or the multiplication by 1/6) `last`.
fn hard_swish(v: &View, last: usize, n: &ComputeNode) -> Option<Fusion> {
    let product = match n.op_type.as_str() {
        "Mul" => v.with_const(n, 1.0 / 6.0)?,
        _ => {
            let (p, q) = View::two(n)?;
            (v.scalar(q)? == 6.0).then_some(p)?
        }
    };
    let mul = v.sole(product, &["Mul"])?;
    let (a, b) = View::two(mul)?;
    let (x, clipped) = [(a, b), (b, a)].into_iter().find(|&(x, c)| {
        v.sole(c, &["Clip", "ClipByValue", "Relu6"])
            .and_then(|clip| relu6_input(v, clip))
            .and_then(|shifted| v.sole(shifted, &["Add"]))
            .and_then(|add| v.with_const(add, 3.0))
            == Some(x)
    })?;
    let shifted = v.node(clipped)?.inputs.first().copied().flatten()?;
    let xi = mul.inputs.iter().position(|p| *p == Some(x))?;
    v.float_input(mul, xi).then(|| Fusion {
        last,
        x,
        op: Fused::HardSwish,
        inner: [product, clipped, shifted]
            .iter()
            .map(|p| p.node.index())
            .collect(),
    })
}

/// The input of `n` when `n` is `min(max(input, 0), 6)`: a `Relu6` of scale 1, or a
/// `Clip` or `ClipByValue` with constant bounds 0 and 6 (inputs from opset 11 on, else
/// attributes).
fn relu6_input(v: &View, n: &ComputeNode) -> Option<OutPort> {
    let input = n.inputs.first().copied().flatten()?;
    let bounds = match n.op_type.as_str() {
        "Relu6" => (float_attr(n, "scale").unwrap_or(1.0) == 1.0).then_some((0.0, 6.0))?,
        _ => clip_bounds(v, n)?,
    };
    (bounds == (0.0, 6.0)).then_some(input)
}

/// The float attribute `k` of `n`.
fn float_attr(n: &ComputeNode, k: &str) -> Option<f32> {
    match n.attr(k) {
        Some(AttrValue::Float(f)) => Some(*f),
        _ => None,
    }
}

/// The bounds an ONNX `Clip` or a GE `ClipByValue` (which the importer makes of it: the
/// same compute, both bounds inputs) clips to, when they are plain values: constant scalar
/// inputs (opset 11 on), else the attributes, an absent bound infinite. `None` for
/// GE's own `Clip`, another op, and a bound computed at run time.
fn clip_bounds(v: &View, n: &ComputeNode) -> Option<(f64, f64)> {
    let onnx = n.attr(ONNX_OPSET_ATTR).is_some();
    if !(n.op_type == "ClipByValue" || n.op_type == "Clip" && onnx) {
        return None;
    }
    let bound = |i: usize, k: &str, none: f32| match n.inputs.get(i).copied().flatten() {
        Some(p) => v.scalar(p),
        None => Some(f64::from(float_attr(n, k).unwrap_or(none))),
    };
    Some((
        bound(1, "min", f32::NEG_INFINITY)?,
        bound(2, "max", f32::INFINITY)?,
    ))
}

/// An activation at `last` applied to a float32 convolution's output that nothing else
/// reads: the convolution applies it as it stores (`ops::nn::epilogue`). Each
/// activation's parameters are read as its compute reads them; a form whose parameters
/// are not plain values here (Clip's bounds computed at run time, GE's Clip, a GE
/// HardSigmoid relying on its defaults, which lowering writes later) is left alone.
fn conv_activation(v: &View, last: usize, n: &ComputeNode) -> Option<Fusion> {
    let x = n.inputs.first().copied().flatten()?;
    let conv = v.sole(x, &["Conv", "Conv2D"])?;
    let f32_out = v.types[x.node.index()] == Some(DType::F32);
    if !f32_out || conv.attr(ACTIVATION_ATTR).is_some() || !conv.subgraphs.is_empty() {
        return None;
    }
    let float = |k: &str| float_attr(n, k);
    let (kind, params, count) = match n.op_type.as_str() {
        "Relu" => ("Relu", [0.0; 2], 0),
        "HardSwish" => ("HardSwish", [0.0; 2], 0),
        // As the unary compute: ONNX's alpha, else GE's negative_slope (default 0).
        "LeakyRelu" => {
            let alpha = float("alpha")
                .or_else(|| float("negative_slope"))
                .unwrap_or(0.0);
            ("LeakyRelu", [alpha, 0.0], 1)
        }
        "HardSigmoid" => ("HardSigmoid", [float("alpha")?, float("beta")?], 2),
        "Relu6" | "Relu6D" => ("Clip", [0.0, 6.0 * float("scale").unwrap_or(1.0)], 2),
        "Clip" | "ClipByValue" => {
            let (lo, hi) = clip_bounds(v, n)?;
            ("Clip", [lo as f32, hi as f32], 2)
        }
        _ => return None,
    };
    Some(Fusion {
        last,
        x,
        op: Fused::ConvActivation {
            conv: x.node.index(),
            kind,
            params,
            count,
        },
        inner: vec![x.node.index()],
    })
}

/// A Linear layer's bias at the Add `last`: `Add(P, b)` in either order, where `P` is
/// a `BatchMatMulV2` or `MatMulV2` of two inputs that nothing else reads, its x1 float32
/// and its x2 a constant float32 matrix, and `b` a constant float32 `[N]` for the
/// product's N columns (GE's ops take the bias as their input 2).
fn matmul_bias(v: &View, last: usize, n: &ComputeNode) -> Option<Fusion> {
    let (a, b) = View::two(n)?;
    let (product, bias) = [(a, b), (b, a)]
        .into_iter()
        .find(|&(p, _)| v.sole(p, &["BatchMatMulV2", "MatMulV2"]).is_some())?;
    let mm = v.node(product)?;
    let (x, w) = View::two(mm)?;
    let f32_out = v.types[product.node.index()] == Some(DType::F32);
    if !f32_out || !mm.subgraphs.is_empty() {
        return None;
    }
    let x2_t = if mm.op_type == "BatchMatMulV2" {
        "adj_x2"
    } else {
        "transpose_x2"
    };
    let (DType::F32, &[rows, cols]) = const_desc(v, w)? else {
        return None;
    };
    let (DType::F32, &[len]) = const_desc(v, bias)? else {
        return None;
    };
    if len != if flag(mm, x2_t)? { rows } else { cols } {
        return None;
    }
    Some(Fusion {
        last,
        x,
        op: Fused::MatMulBias {
            matmul: product.node.index(),
            bias,
            input: n.inputs.iter().position(|p| *p == Some(bias))?,
        },
        inner: vec![product.node.index()],
    })
}

/// The Softmax `last` of a tensor divided or multiplied by a positive constant scalar
/// (see the module doc): the factor, as float32, and the tensor. The scalar must not
/// broadcast the tensor to a higher rank (a one-element constant of rank at most the
/// described tensor's; of rank 0 where the tensor is not described), so the Softmax
/// sees the same shape without it.
fn softmax_scale(v: &View, last: usize, n: &ComputeNode) -> Option<Fusion> {
    if n.attr(SOFTMAX_SCALE_ATTR).is_some() || !n.subgraphs.is_empty() {
        return None;
    }
    let scaled = n.inputs.first().copied().flatten()?;
    let op = v.sole(scaled, &["Div", "RealDiv", "Mul", "Muls"])?;
    let rank_of = |i: usize| rank(op.input_descs.get(i));
    // (x, its position, the factor).
    let (x, xi, factor) = match op.op_type.as_str() {
        "Muls" => match op.attr("value") {
            Some(AttrValue::Float(f)) => (op.inputs.first().copied().flatten()?, 0, *f as f64),
            _ => return None,
        },
        kind => {
            let (a, b) = View::two(op)?;
            let at = |x: OutPort, xi: usize, c: OutPort| {
                let value = v.scalar(c)?;
                let (_, dims) = const_desc(v, c)?;
                (dims.len() <= rank_of(xi).unwrap_or(0)).then_some((x, xi, value))
            };
            match kind {
                "Mul" => at(a, 0, b).or_else(|| at(b, 1, a))?,
                _ => {
                    let (x, xi, c) = at(a, 0, b)?;
                    (x, xi, 1.0 / c)
                }
            }
        }
    };
    let scale = factor as f32;
    let usable = scale > 0.0 && scale.is_finite() && scale >= f32::MIN_POSITIVE;
    (usable && v.float_input(op, xi)).then(|| Fusion {
        last,
        x,
        op: Fused::SoftmaxScale { scale },
        inner: vec![scaled.node.index()],
    })
}

/// A boolean attribute of `n` (false when absent); `None` for one of another type.
fn flag(n: &ComputeNode, name: &str) -> Option<bool> {
    match n.attr(name) {
        None => Some(false),
        Some(AttrValue::Bool(b)) => Some(*b),
        Some(AttrValue::Int(i)) => Some(*i != 0),
        Some(_) => None,
    }
}

/// The element type and dims of the constant node's value at `p`, from its descriptor
/// (the value itself is not read).
fn const_desc<'a>(v: &View<'a>, p: OutPort) -> Option<(DType, &'a [i64])> {
    let n = v.node(p)?;
    if !is_const_type(&n.op_type) || p.index != 0 {
        return None;
    }
    let Some(AttrValue::Tensor(t)) = n.attr("value") else {
        return None;
    };
    let Shape::Dims(d) = &t.desc.shape else {
        return None;
    };
    Some((super::attrs::dtype(t.desc.dtype)?, d))
}

/// Rewrites `g` for `f`: the last node becomes the fused op (the inner nodes, now
/// unread, are removed by the caller).
fn apply(g: &mut ComputeGraph, f: Fusion) {
    match f.op {
        Fused::ConvActivation {
            conv,
            kind,
            params,
            count,
        } => conv_in_place(g, f.last, conv, kind, &params[..count]),
        Fused::MatMulBias {
            matmul,
            bias,
            input,
        } => matmul_in_place(g, f.last, matmul, bias, input),
        Fused::SoftmaxScale { scale } => softmax_in_place(g, f.last, f.x, scale),
        _ => activation_in_place(g, f),
    }
}

/// The node `last` becomes `inner` (its names recorded) under `last`'s name and output
/// descriptors, with `last`'s control inputs added to its own: its readers keep reading
/// it. Returns the node, for the caller to finish.
fn take_place(g: &mut ComputeGraph, last: usize, inner: usize) -> &mut ComputeNode {
    let outer = &g.nodes[last];
    let mut n = g.nodes[inner].clone();
    let names = vec![n.name.clone().into_bytes(), outer.name.clone().into_bytes()];
    n.name = outer.name.clone();
    n.output_descs = outer.output_descs.clone();
    for c in &outer.control_inputs {
        if !n.control_inputs.contains(c) {
            n.control_inputs.push(*c);
        }
    }
    n.attrs.insert(
        ORIGINAL_OP_NAMES.to_string(),
        AttrValue::List(ListAttr::Str(names)),
    );
    g.nodes[last] = n;
    &mut g.nodes[last]
}

/// The Add `last` becomes the product `matmul` with `bias` (the Add's input `input`) as
/// its bias.
fn matmul_in_place(g: &mut ComputeGraph, last: usize, matmul: usize, bias: OutPort, input: usize) {
    let desc = g.nodes[last].input_descs.get(input).cloned();
    let n = take_place(g, last, matmul);
    n.inputs.push(Some(bias));
    if let Some(d) = desc
        && n.input_descs.len() == 2
    {
        n.input_descs.push(d);
    }
}

/// The activation node `last` becomes the convolution `conv` applying `kind`: under the
/// activation's name and output (its readers keep reading it), with the activation's
/// control inputs added to its own.
fn conv_in_place(g: &mut ComputeGraph, last: usize, conv: usize, kind: &str, params: &[f32]) {
    let n = take_place(g, last, conv);
    n.attrs.insert(
        ACTIVATION_ATTR.to_string(),
        AttrValue::Str(kind.as_bytes().to_vec()),
    );
    if !params.is_empty() {
        n.attrs.insert(
            PARAMS_ATTR.to_string(),
            AttrValue::List(ListAttr::Float(params.to_vec())),
        );
    }
}

/// The Softmax `last` reads `x` itself, scaling it by `scale` (the operation that
/// scaled it, now unread, is removed by the caller); its input descriptor, the scaled
/// tensor's, describes `x` as well (the same shape and type).
fn softmax_in_place(g: &mut ComputeGraph, last: usize, x: OutPort, scale: f32) {
    let scaled = g.nodes[last].inputs[0].map(|p| g.nodes[p.node.index()].name.clone());
    let n = &mut g.nodes[last];
    n.inputs[0] = Some(x);
    n.attrs
        .insert(SOFTMAX_SCALE_ATTR.to_string(), AttrValue::Float(scale));
    let names = scaled
        .into_iter()
        .chain([n.name.clone()])
        .map(String::into_bytes)
        .collect();
    n.attrs.insert(
        ORIGINAL_OP_NAMES.to_string(),
        AttrValue::List(ListAttr::Str(names)),
    );
}

/// The last node of an elementwise pattern becomes the fused op on `x`.
fn activation_in_place(g: &mut ComputeGraph, f: Fusion) {
    // x's descriptor, from a node of the pattern that reads it.
    let x_desc = f.inner.iter().chain([&f.last]).find_map(|&k| {
        let n = &g.nodes[k];
        let i = n.inputs.iter().position(|p| *p == Some(f.x))?;
        n.input_descs.get(i).cloned()
    });
    let mut names: Vec<Vec<u8>> = f
        .inner
        .iter()
        .map(|&k| g.nodes[k].name.clone().into_bytes())
        .collect();
    names.push(g.nodes[f.last].name.clone().into_bytes());
    let consts = |p: OutPort, g: &ComputeGraph| {
        let c = &g.nodes[p.node.index()];
        c.output_descs
            .get(p.index as usize)
            .cloned()
            .unwrap_or_default()
    };
    let (inputs, descs) = match f.op {
        Fused::LayerNorm { gamma, beta, .. } => (
            vec![Some(f.x), Some(gamma), Some(beta)],
            x_desc
                .map(|x| vec![x, consts(gamma, g), consts(beta, g)])
                .unwrap_or_default(),
        ),
        _ => (vec![Some(f.x)], x_desc.into_iter().collect()),
    };
    let n = &mut g.nodes[f.last];
    n.inputs = inputs;
    n.input_descs = descs;
    n.attrs.clear();
    match f.op {
        Fused::Gelu | Fused::GeluTanh => {
            let approximate = if f.op == Fused::GeluTanh {
                "tanh"
            } else {
                "none"
            };
            n.op_type = "Gelu".to_string();
            n.attrs
                .insert(ONNX_OPSET_ATTR.to_string(), AttrValue::Int(20));
            n.attrs.insert(
                "approximate".to_string(),
                AttrValue::Str(approximate.as_bytes().to_vec()),
            );
        }
        Fused::Swish => {
            n.op_type = "Swish".to_string();
            n.attrs.insert("scale".to_string(), AttrValue::Float(1.0));
        }
        Fused::HardSwish => {
            n.op_type = "HardSwish".to_string();
            n.attrs
                .insert(ONNX_OPSET_ATTR.to_string(), AttrValue::Int(14));
        }
        Fused::ConvActivation { .. } | Fused::MatMulBias { .. } | Fused::SoftmaxScale { .. } => {
            unreachable!("fused by conv_in_place, matmul_in_place and softmax_in_place")
        }
        Fused::LayerNorm { epsilon, .. } => {
            n.op_type = "LayerNormalization".to_string();
            n.attrs
                .insert(ONNX_OPSET_ATTR.to_string(), AttrValue::Int(17));
            n.attrs.insert("axis".to_string(), AttrValue::Int(-1));
            n.attrs
                .insert("epsilon".to_string(), AttrValue::Float(epsilon));
        }
    }
    n.attrs.insert(
        ORIGINAL_OP_NAMES.to_string(),
        AttrValue::List(ListAttr::Str(names)),
    );
}

mod batch_norm;
mod view;

#[cfg(test)]
mod tests;
