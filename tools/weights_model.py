"""Writes a weight-heavy ONNX model for measuring peak memory: a chain of MatMuls of a
`[1, N]` float32 input by `[N, N]` float32 initializers (raw_data, as exporters write
them), so the file is almost all weights. The defaults (4 layers, N = 2560) make a
105 MB file.

Usage: $(tools/pyenv.sh) tools/weights_model.py OUT.onnx [LAYERS] [N]
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out = sys.argv[1]
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2560
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        w = (rng.random((n, n), dtype=np.float32) * 0.01).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        y = "y" if i == layers - 1 else f"y{i}"
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [y], name=f"mm{i}"))
        prev = y
    graph = helper.make_graph(
        nodes,
        "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, out)


if __name__ == "__main__":
    main()
