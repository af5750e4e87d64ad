"""Writes one-op ONNX models at the shapes real models give those ops (a BERT layer's
matrices and LayerNorm, a ResNet or MobileNet stage's convolutions, pools and
activations, an attention's Softmax and Einsum, a speech model's LSTM and GRU), for
`tools/ops_vs_ort.sh`, which runs each with rt2 beside ONNX Runtime. A slow op hidden
inside a whole model (a map left scalar, a reduction one element at a time) stands out
here as a ratio far above the others. Inputs are the graph inputs; weights and other
operands are seeded initializers.

Usage: $(tools/pyenv.sh) tools/op_models.py OUT_DIR
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

F = T.FLOAT


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def ints(*values):
        return np.array(values, np.int64)

    def model(name, op, inputs, inits=(), attrs=None, opset=17, outs=(F,)):
        """One `op` node: graph inputs `inputs` [(name, shape)], then `inits` [(name,
        array)] as initializers, outputs of the element types `outs`."""
        ins = [h.make_tensor_value_info(n, F, s) for n, s in inputs]
        names = [f"y{i}" if i else "y" for i in range(len(outs))]
        node = h.make_node(op, [n for n, _ in inputs] + [n for n, _ in inits], names, **(attrs or {}))
        graph = h.make_graph(
            [node],
            name,
            ins,
            [h.make_tensor_value_info(n, t, None) for n, t in zip(names, outs)],
            [nh.from_array(a, n) for n, a in inits],
        )
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)
        onnx.save(m, f"{out}/{name}.onnx")

    act = [("x", [1, 64, 56, 56])]
    model("matmul_bert", "MatMul", [("x", [1, 128, 768])], [("w", r(768, 768))])
    model("matmul_attn", "MatMul", [("x", [12, 128, 64]), ("z", [12, 64, 128])])
    model("matmul_vec", "MatMul", [("x", [1, 1, 512])], [("w", r(512, 2048))])
    model("gemm_fc", "Gemm", [("x", [1, 2048])], [("w", r(1000, 2048)), ("b", r(1000))], {"transB": 1})
    model("einsum_bmm", "Einsum", [("x", [12, 128, 64]), ("z", [12, 128, 64])], attrs={"equation": "bid,bjd->bij"})
    model("softmax_attn", "Softmax", [("x", [12, 128, 128])], attrs={"axis": -1})
    model("logsoftmax", "LogSoftmax", [("x", [32, 1, 37])], attrs={"axis": -1})
    model("layernorm", "LayerNormalization", [("x", [1, 128, 768])], [("g", r(768)), ("b", r(768))], {"axis": -1})
    model("erf", "Erf", [("x", [1, 128, 3072])])
    model("gelu", "Gelu", [("x", [1, 128, 3072])], opset=20)
    model("add_bias", "Add", [("x", [1, 128, 768])], [("b", r(768))])
    model("mul", "Mul", act + [("z", [1, 64, 56, 56])])
    model("div", "Div", act + [("z", [1, 64, 56, 56])])
    model("pow2", "Pow", [("x", [1, 128, 768])], [("e", np.array(2, np.float32))])
    for op in ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Softplus", "HardSwish"]:
        model(op.lower(), op, act)
    model("leakyrelu", "LeakyRelu", act, attrs={"alpha": 0.1})
    model("clip6", "Clip", act, [("lo", np.array(0, np.float32)), ("hi", np.array(6, np.float32))])
    model("prelu", "PRelu", act, [("s", r(64, 1, 1))])
    model("cast_f16", "Cast", act, attrs={"to": T.FLOAT16}, outs=(T.FLOAT16,))
    model("transpose_heads", "Transpose", [("x", [1, 128, 12, 64])], attrs={"perm": [0, 2, 1, 3]})
    model("transpose_nhwc", "Transpose", act, attrs={"perm": [0, 2, 3, 1]})
    model("concat", "Concat", act + [("z", [1, 64, 56, 56])], attrs={"axis": 1})
    model("split", "Split", [("x", [1, 128, 56, 56])], [("sp", ints(64, 64))], {"axis": 1}, opset=13, outs=(F, F))
    model("slice", "Slice", [("x", [1, 128, 56, 56])], [("st", ints(0, 8)), ("en", ints(64, 48)), ("ax", ints(1, 2))])
    model("pad", "Pad", act, [("p", ints(0, 0, 1, 1, 0, 0, 1, 1))])
    model("expand", "Expand", [("x", [1, 64, 1, 1])], [("s", ints(1, 64, 56, 56))])
    model("gather_embedding", "Gather", [], [("table", r(30522, 768)), ("idx", rng.integers(0, 30522, (1, 128)))])
    model("reducemean_last", "ReduceMean", [("x", [1, 128, 768])], attrs={"axes": [-1]}, opset=13)
    model("reducemax_last", "ReduceMax", [("x", [1, 128, 768])], attrs={"axes": [-1]}, opset=13)
    model("reducesum_channels", "ReduceSum", act, [("ax", ints(1))], opset=13)
    model("argmax", "ArgMax", [("x", [1, 1000, 64])], attrs={"axis": 1}, outs=(T.INT64,))
    model("cumsum", "CumSum", [("x", [1, 128, 768])], [("ax", np.array(1, np.int64))])
    model("topk", "TopK", [("x", [1, 1000])], [("k", ints(5))], outs=(F, T.INT64))
    model("conv3x3", "Conv", act, [("w", r(64, 64, 3, 3)), ("b", r(64))], {"pads": [1, 1, 1, 1]})
    model("conv1x1", "Conv", [("x", [1, 256, 56, 56])], [("w", r(64, 256, 1, 1)), ("b", r(64))])
    model("conv_depthwise", "Conv", [("x", [1, 128, 56, 56])], [("w", r(128, 1, 3, 3))], {"pads": [1, 1, 1, 1], "group": 128})
    model("conv_stem", "Conv", [("x", [1, 3, 224, 224])], [("w", r(64, 3, 7, 7))], {"pads": [3, 3, 3, 3], "strides": [2, 2]})
    model("conv_stride2", "Conv", [("x", [1, 128, 56, 56])], [("w", r(256, 128, 3, 3))], {"pads": [1, 1, 1, 1], "strides": [2, 2]})
    model("conv1d", "Conv", [("x", [1, 80, 400])], [("w", r(256, 80, 5))], {"pads": [2, 2]})
    model("conv_transpose", "ConvTranspose", act, [("w", r(64, 32, 2, 2))], {"strides": [2, 2]})
    pool = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    model("maxpool", "MaxPool", [("x", [1, 64, 112, 112])], attrs=pool)
    model("avgpool", "AveragePool", [("x", [1, 64, 112, 112])], attrs=pool)
    model("global_avgpool", "GlobalAveragePool", [("x", [1, 2048, 7, 7])])
    stats = [("s", r(64)), ("b", r(64)), ("m", r(64)), ("v", np.abs(r(64)) + 1)]
    model("batchnorm", "BatchNormalization", act, stats)
    model("instancenorm", "InstanceNormalization", act, [("s", r(64)), ("b", r(64))])
    scales = [("roi", np.zeros(0, np.float32)), ("sc", np.array([1, 1, 2, 2], np.float32))]
    model("resize_nearest", "Resize", act, scales, {"mode": "nearest"})
    model("resize_linear", "Resize", act, scales, {"mode": "linear"})
    lstm = [("W", r(1, 512, 128) * 0.1), ("R", r(1, 512, 128) * 0.1), ("B", r(1, 1024) * 0.1)]
    model("lstm", "LSTM", [("x", [50, 1, 128])], lstm, {"hidden_size": 128})
    gru = [("W", r(1, 384, 128) * 0.1), ("R", r(1, 384, 128) * 0.1), ("B", r(1, 768) * 0.1)]
    model("gru", "GRU", [("x", [50, 1, 128])], gru, {"hidden_size": 128})


if __name__ == "__main__":
    main()
