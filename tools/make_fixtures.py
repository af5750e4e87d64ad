"""Builds the ONNX fixtures in fixtures/models/ with the onnx package, the way exporters
write them, and their expected outputs with ONNX Runtime in the ONNX backend-test layout
(MODEL_DIR/test_data_set_0/input_N.pb, output_N.pb).

Run with the pinned environment: `$(tools/pyenv.sh) tools/make_fixtures.py`. The outputs
are checked in; rt2's build and tests never run this script.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "models")
RNG = np.random.default_rng(20261130)


def const_node(name, array):
    return helper.make_node("Constant", [], [name], name=name + "_const",
                            value=numpy_helper.from_array(array, name + "_value"))


def weights(*shape):
    return RNG.standard_normal(shape).astype(np.float32) * 0.5


def nested_if_weights():
    """Weights only in Constant nodes inside nested If branches; an outer-scope value
    (x) used two levels down; symbolic batch dims in the exporter spellings."""
    inner_then = helper.make_graph(
        [const_node("w_tt", weights(4, 3)),
         helper.make_node("MatMul", ["x", "w_tt"], ["y_tt"], name="mm_tt")],
        "inner_then", [], [helper.make_tensor_value_info("y_tt", TensorProto.FLOAT, ["batch", 3])])
    inner_else = helper.make_graph(
        [const_node("w_te", weights(4, 3)),
         helper.make_node("MatMul", ["x", "w_te"], ["mm_te"], name="mm_te"),
         helper.make_node("Relu", ["mm_te"], ["y_te"], name="relu_te")],
        "inner_else", [], [helper.make_tensor_value_info("y_te", TensorProto.FLOAT, ["batch", 3])])
    outer_then = helper.make_graph(
        [const_node("zero", np.array(0.0, np.float32)),
         helper.make_node("ReduceSum", ["x"], ["sx"], name="sum_t", keepdims=0),
         helper.make_node("Greater", ["sx", "zero"], ["c2"], name="gt_t"),
         helper.make_node("If", ["c2"], ["y_t"], name="inner_if",
                          then_branch=inner_then, else_branch=inner_else)],
        "outer_then", [], [helper.make_tensor_value_info("y_t", TensorProto.FLOAT, ["batch", 3])])
    outer_else = helper.make_graph(
        [const_node("w_e", weights(4, 3)),
         const_node("b_e", weights(3)),
         helper.make_node("Gemm", ["x", "w_e", "b_e"], ["y_e"], name="gemm_e")],
        "outer_else", [], [helper.make_tensor_value_info("y_e", TensorProto.FLOAT, ["unk__12", 3])])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], name="outer_if",
                          then_branch=outer_then, else_branch=outer_else)],
        "nested_if_weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="rt2-fixtures")
    inputs = [RNG.standard_normal((2, 4)).astype(np.float32), np.array(True)]
    return "nested_if_weights", model, inputs


def loop_counter():
    """A Loop with a trip count, a loop-carried value and a scan output."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
         helper.make_node("Cast", ["i"], ["i_f"], name="cast_i", to=TensorProto.FLOAT),
         helper.make_node("Add", ["acc_in", "i_f"], ["acc_sum"], name="add_i"),
         helper.make_node("Mul", ["acc_sum", "scale"], ["acc_out"], name="scale_acc"),
         helper.make_node("Identity", ["acc_out"], ["scan_out"], name="emit")],
        "loop_body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trip", "cond", "acc0"], ["acc", "history"], name="loop", body=body)],
        "loop_counter",
        [helper.make_tensor_value_info("trip", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc0", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("history", TensorProto.FLOAT, ["iters", 2])],
        initializer=[numpy_helper.from_array(np.array([1.5, 0.5], np.float32), "scale")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="rt2-fixtures")
    inputs = [np.array(4, np.int64), np.array(True), np.array([1.0, -1.0], np.float32)]
    return "loop_counter", model, inputs


def lstm():
    """A bidirectional LSTM with a symbolic sequence length, as exporters write it."""
    seq, batch, inp, hidden = "seq", 2, 3, 4
    w = weights(2, 4 * hidden, inp)
    r = weights(2, 4 * hidden, hidden)
    b = weights(2, 8 * hidden)
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "y_h", "y_c"], name="lstm",
                          hidden_size=hidden, direction="bidirectional")],
        "lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, inp])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, 2, batch, hidden]),
         helper.make_tensor_value_info("y_h", TensorProto.FLOAT, [2, batch, hidden]),
         helper.make_tensor_value_info("y_c", TensorProto.FLOAT, [2, batch, hidden])],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"),
                     numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                              producer_name="rt2-fixtures")
    inputs = [RNG.standard_normal((5, batch, inp)).astype(np.float32)]
    return "lstm", model, inputs


def cnn_bn():
    """A small CNN with batch norm, pooling and a classifier head; dynamic batch as '?'-like
    dim_param and a '-1' reshape."""
    c1w, c1b = weights(8, 3, 3, 3), weights(8)
    scale, bias = np.abs(weights(8)) + 0.5, weights(8)
    mean, var = weights(8), np.abs(weights(8)) + 0.5
    fcw, fcb = weights(10, 8 * 4 * 4), weights(10)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "c1w", "c1b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c1", "scale", "bias", "mean", "var"], ["bn"],
                          name="bn1", epsilon=1e-5),
         helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
         helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Reshape", ["p1", "flat"], ["f"], name="flatten"),
         helper.make_node("Gemm", ["f", "fcw", "fcb"], ["logits"], name="fc", transB=1),
         helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1)],
        "cnn_bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
        initializer=[numpy_helper.from_array(a, n) for n, a in [
            ("c1w", c1w), ("c1b", c1b), ("scale", scale), ("bias", bias), ("mean", mean),
            ("var", var), ("fcw", fcw), ("fcb", fcb),
            ("flat", np.array([-1, 8 * 4 * 4], np.int64))]])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="rt2-fixtures")
    inputs = [RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)]
    return "cnn_bn", model, inputs


def main():
    import onnxruntime as ort

    os.makedirs(ROOT, exist_ok=True)
    for build in (nested_if_weights, loop_counter, lstm, cnn_bn):
        name, model, inputs = build()
        onnx.checker.check_model(model, full_check=True)
        path = os.path.join(ROOT, name + ".onnx")
        onnx.save(model, path)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {i.name: a for i, a in zip(sess.get_inputs(), inputs)}
        outputs = sess.run(None, feeds)
        data = os.path.join(ROOT, name, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        for k, (i, a) in enumerate(zip(sess.get_inputs(), inputs)):
            with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(a), i.name).SerializeToString())
        for k, (o, a) in enumerate(zip(sess.get_outputs(), outputs)):
            with open(os.path.join(data, f"output_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(a), o.name).SerializeToString())
        print(f"{name}: {os.path.getsize(path)} bytes, outputs "
              + ", ".join(f"{o.name}{list(np.shape(a))}" for o, a in zip(sess.get_outputs(), outputs)))


if __name__ == "__main__":
    sys.exit(main())
