"""Builds the inputs of the lowering golden tests (tests/lower/*.ge.txt): small ONNX models,
one per converter or pass rule, compiled by rt2 into GE text dumps. The GE-native cases
(Case, While, PartitionedCall) are written by hand in tests/lower/ and not touched here.

Run from the repository root with the pinned environment after `cargo build`:
`$(tools/pyenv.sh) tools/make_lower_cases.py`. Then bless the expected ExecuteGraphs with
`RT2_BLESS=1 cargo test --test lower`. rt2's build and tests never run this script.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "lower")
RT2 = os.path.join(ROOT, "target", "debug", "rt2")
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def model(name, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def cases():
    yield "add_one", model(
        "add_one",
        [helper.make_node("Add", ["x", "one"], ["y"], name="add")],
        [vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
        [const("one", np.ones([3], np.float32))])

    # Symbolic batch: every shape downstream of x is computed at run time.
    yield "dynamic_batch", model(
        "dynamic_batch",
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Relu", ["h"], ["y"], name="relu")],
        [vi("x", F, ["N", 4])], [vi("y", F, ["N", 2])],
        [const("w", np.arange(8, dtype=np.float32).reshape(4, 2))])

    # Shape arithmetic on a static shape folds away: the Reshape's target is a constant.
    shape_chain = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "i0"], ["d0"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["d0", "ax0"], ["d0u"], name="unsqueeze"),
        helper.make_node("Concat", ["d0u", "minus1"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
    ]
    inits = [const("i0", np.array(0, np.int64)), const("ax0", np.array([0], np.int64)),
             const("minus1", np.array([-1], np.int64))]
    yield "reshape_folded", model("reshape_folded", shape_chain,
                                  [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 12])], inits)
    # The same chain on a dynamic shape: the Reshape's InferShape reads the target's value,
    # downloaded from the device.
    yield "reshape_dynamic", model("reshape_dynamic", shape_chain,
                                   [vi("x", F, ["N", 3, 4])], [vi("y", F, ["N", None])], inits)

    # Data-dependent output shape.
    yield "nonzero", model(
        "nonzero",
        [helper.make_node("NonZero", ["x"], ["idx"], name="nonzero"),
         helper.make_node("Cast", ["idx"], ["y"], name="cast", to=TensorProto.INT32)],
        [vi("x", F, [3, 4])], [vi("y", TensorProto.INT32, [2, None])])

    # If with a run-time condition and weights in the branches.
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t"], name="mul")], "then", [],
        [vi("t", F, [2])], [const("two", np.full([2], 2, np.float32))])
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"], name="neg")], "else", [], [vi("e", F, [2])])
    yield "if_branches", model(
        "if_branches",
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
        [vi("c", TensorProto.BOOL, []), vi("x", F, [2])], [vi("y", F, [2])])
    # A constant condition: the branch is inlined.
    yield "if_constant", model(
        "if_constant",
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
        [vi("x", F, [2])], [vi("y", F, [2])], [const("c", np.array(False))])

    # Loop: a counter and a running sum, one scan output.
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="acc"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("Identity", ["acc_out"], ["scan"], name="scan_out")],
        "body",
        [vi("i", I64, []), vi("cond_in", TensorProto.BOOL, []), vi("acc_in", F, [2])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", F, [2]), vi("scan", F, [2])])
    yield "loop", model(
        "loop",
        [helper.make_node("Loop", ["trips", "", "init"], ["acc", "scans"], name="loop", body=body)],
        [vi("trips", I64, []), vi("init", F, [2]), vi("x", F, [2])],
        [vi("acc", F, [2]), vi("scans", F, [None, 2])])

    # Outputs that are not the graph's own memory: an input passed through, the same value
    # twice, a constant.
    yield "outputs_copied", model(
        "outputs_copied",
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Identity", ["k"], ["kc"], name="konst")],
        [vi("x", F, [2])], [vi("x", F, [2]), vi("r", F, [2]), vi("r", F, [2]), vi("kc", F, [2])],
        [const("k", np.array([1, 2], np.float32))])

    # Unsupported ops, all reported.
    yield "unsupported", model(
        "unsupported",
        [helper.make_node("Relu", ["x"], ["a"], name="relu"),
         helper.make_node("Frobnicate", ["a"], ["b"], name="frob", domain="example.com"),
         helper.make_node("Wibble", ["b"], ["y"], name="wib", domain="example.com")],
        [vi("x", F, [2])], [vi("y", F, [2])])


def main():
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, m in cases():
            if name == "unsupported":
                m.opset_import.append(helper.make_opsetid("example.com", 1))
            path = os.path.join(tmp, name + ".onnx")
            onnx.save(m, path)
            out = os.path.join(OUT, name + ".ge.txt")
            subprocess.run([RT2, "compile", path, "-o", out], check=True)
            print(out)


if __name__ == "__main__":
    sys.exit(main())
