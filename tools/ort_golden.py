"""Writes ONNX Runtime's outputs for one model in the ONNX backend-test layout: reads
DIR/model.onnx and DIR/test_data_set_0/input_K.pb, checks the model
(onnx.checker, full check), runs it on ONNX Runtime's CPU provider and writes
DIR/test_data_set_0/output_K.pb, each named as the model's output K.

Usage: $(bash tools/pyenv.sh) tools/ort_golden.py DIR

One thread and graph optimizations off, so each op computes as the ONNX specification
says, with no fusion changing the arithmetic. `RT2_BLESS=1 cargo test --test ge_fused`
writes fixtures/fused_cnn's model and input and then runs this; rt2's build and tests
never need it.
"""

import glob
import os
import sys

import onnx
import onnxruntime as ort
from onnx import numpy_helper


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ort_golden.py DIR")
    root = sys.argv[1]
    model_path = os.path.join(root, "model.onnx")
    onnx.checker.check_model(onnx.load(model_path), full_check=True)
    data = os.path.join(root, "test_data_set_0")
    feeds = {}
    inputs = sorted(glob.glob(os.path.join(data, "input_*.pb")),
                    key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
    for path in inputs:
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        feeds[t.name] = numpy_helper.to_array(t)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    for old in glob.glob(os.path.join(data, "output_*.pb")):
        os.remove(old)
    for k, (name, value) in enumerate(zip(names, sess.run(names, feeds))):
        with open(os.path.join(data, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, name).SerializeToString())
    print(f"{root}: {len(names)} outputs from onnxruntime {ort.__version__}")


if __name__ == "__main__":
    main()
