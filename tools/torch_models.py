"""Writes the models of rt2's speed comparison with ONNX Runtime (tools/speed_vs_ort.sh)
into a directory, built with onnx.helper the way PyTorch's exporter writes them at opset
13: a two-layer transformer encoder (d_model 256, 4 heads, FFN 1024) with nn.GELU as
Div/Erf/Add/Mul/Mul and nn.LayerNorm as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add,
at sequence 16 and 128; and one-op models of the transcendental elementwise ops on
[1, 16, 2048] float32. Weights are seeded; the same files every time.

Usage: $(tools/pyenv.sh) tools/torch_models.py DIR
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def encoder(seq, d=256, heads=4, ffn=1024, layers=2):
    rng = np.random.default_rng(0)
    dh = d // heads
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, out, **attrs):
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    f32 = np.float32
    const("sqrt2", np.array(np.sqrt(2.0), f32))
    const("one", np.array(1.0, f32))
    const("half", np.array(0.5, f32))
    const("two", np.array(2.0, f32))
    const("eps", np.array(1e-5, f32))
    const("scale", np.array(np.sqrt(dh), f32))
    const("heads_shape", np.array([1, seq, heads, dh], np.int64))
    const("model_shape", np.array([1, seq, d], np.int64))

    def layer_norm(x, p):
        mean = node("ReduceMean", [x], p + "mean", axes=[-1])
        centred = node("Sub", [x, mean], p + "centred")
        square = node("Pow", [centred, "two"], p + "square")
        var = node("ReduceMean", [square], p + "var", axes=[-1])
        root = node("Sqrt", [node("Add", [var, "eps"], p + "var_eps")], p + "std")
        normed = node("Div", [centred, root], p + "normed")
        gamma = const(p + "gamma", (1 + 0.1 * rng.standard_normal(d)).astype(f32))
        beta = const(p + "beta", (0.1 * rng.standard_normal(d)).astype(f32))
        return node("Add", [node("Mul", [normed, gamma], p + "scaled"), beta], p + "out")

    def linear(x, n_in, n_out, p):
        w = const(p + "w", (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(f32))
        b = const(p + "b", (0.02 * rng.standard_normal(n_out)).astype(f32))
        return node("Add", [node("MatMul", [x, w], p + "mm"), b], p + "out")

    def heads_of(x, p, perm):
        split = node("Reshape", [x, "heads_shape"], p + "split")
        return node("Transpose", [split], p + "t", perm=perm)

    x = "x"
    for layer in range(layers):
        p = f"l{layer}_"
        q = heads_of(linear(x, d, d, p + "q_"), p + "q_", [0, 2, 1, 3])
        k = heads_of(linear(x, d, d, p + "k_"), p + "k_", [0, 2, 3, 1])
        v = heads_of(linear(x, d, d, p + "v_"), p + "v_", [0, 2, 1, 3])
        scores = node("Div", [node("MatMul", [q, k], p + "qk"), "scale"], p + "scores")
        probs = node("Softmax", [scores], p + "probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], p + "ctx")], p + "ctx_t", perm=[0, 2, 1, 3])
        attn = linear(node("Reshape", [ctx, "model_shape"], p + "ctx_r"), d, d, p + "o_")
        x1 = layer_norm(node("Add", [x, attn], p + "res1"), p + "ln1_")
        h = linear(x1, d, ffn, p + "ffn1_")
        erf = node("Erf", [node("Div", [h, "sqrt2"], p + "gelu_div")], p + "gelu_erf")
        plus = node("Add", [erf, "one"], p + "gelu_add")
        gelu = node("Mul", [node("Mul", [h, plus], p + "gelu_mul"), "half"], p + "gelu")
        x = layer_norm(node("Add", [x1, linear(gelu, ffn, d, p + "ffn2_")], p + "res2"), p + "ln2_")
    nodes.append(helper.make_node("Identity", [x], ["y"], name="y"))
    io = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, seq, d])
    graph = helper.make_graph(nodes, "encoder", [io("x")], [io("y")], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def one_op(op, **attrs):
    io = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 16, 2048])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], op, [io("x")], [io("y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    models = {f"encoder_s{s}": encoder(s) for s in (16, 128)}
    for op in ["Exp", "Erf", "Tanh", "Sigmoid", "Log", "Softplus", "Gelu"]:
        models[f"op_{op.lower()}"] = one_op(op)
    for name, model in models.items():
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(out, name + ".onnx"))
        print(os.path.join(out, name + ".onnx"))


if __name__ == "__main__":
    main()
