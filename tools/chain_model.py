"""Writes the N-Add chain the lowering and compiling measurements of issue 26 use: input
`x` [1, 16] float32, `t_i = t_{i-1} + c_i` with one [1, 16] initializer per Add (every
element 0.001), output `y`; unnamed nodes, opset 17, graph `chain`, as onnx.helper writes
it. 10,000 Adds make 20,000 GE ops (10,000 Consts) and some 50,000 tensor descriptors
with next to no weights, so reading, lowering and writing it is all graph and no bytes.

Usage: $(tools/pyenv.sh) tools/chain_model.py OUT.onnx [N]   (N defaults to 10,000)
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def chain(n):
    nodes, inits = [], []
    prev = "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        inits.append(numpy_helper.from_array(np.full((1, 16), 0.001, np.float32), f"c{i}"))
        nodes.append(helper.make_node("Add", [prev, f"c{i}"], [out]))
        prev = out
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=13)


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    onnx.save(chain(n), out)


if __name__ == "__main__":
    main()
