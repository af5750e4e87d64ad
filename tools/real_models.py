"""Writes the five real-model classes of rt2's benchmark beside ONNX Runtime
(benches/real_models.rs) and their correctness test (tests/real_models.rs) into
fixtures/real_models/NAME/: model.onnx, test_data_set_0/input_0.pb and ONNX Runtime's
output_0.pb (tools/ort_golden.py: one thread, graph optimizations off), the ONNX
backend-test layout.

Each model is built with onnx.helper the way PyTorch's exporter writes it at opset 17
(node names like /stage/Conv, outputs like /stage/Conv_output_0, Linear on a 3-D input as
MatMul + Add, nn.LSTM as one LSTM node per layer with W/R/B initializers and
sequence-first Transposes around it), with seeded weights, and checked with
onnx.checker.check_model(full_check=True):

- encoder: two transformer encoder layers (tools/torch_models.py's encoder(): GELU as
  Div/Erf/Add/Mul/Mul, LayerNorm as nine ops), d_model 128, 4 heads, FFN 512,
  sequence 128, batch 1.
- mobilenet: MobileNetV3-small's block table at width 0.45 on [1, 3, 224, 224]: a strided
  stem conv + HardSwish, inverted residuals (1x1 expand, 3x3/5x5 depthwise, squeeze-excite
  with HardSigmoid, 1x1 project, residual Add), GlobalAveragePool, Flatten, Gemm to 1000
  classes; BatchNormalization folded into the convs, as eval-mode export does.
- unet: a three-level UNet on [1, 3, 256, 256]: 3x3 Conv + BatchNormalization + Relu
  pairs, MaxPool 2x2, a bottleneck, a decoder of ConvTranspose 2x2/2, Resize linear
  (half_pixel) and Resize nearest (asymmetric, floor), Concat with the skips, a 1x1 conv
  to 4 classes.
- lstm_speech: a voice-activity model on [1, 200, 64] log-mel frames: Conv1d as
  Transpose + Conv (1-D kernel 3) + Relu, two stacked LSTM layers (hidden 128), a
  MatMul + Add head and a Sigmoid per frame.
- crnn: a CRNN text recognizer on [1, 1, 32, 128]: a VGG-like conv stack (Relu, MaxPool
  2x2 then 2x1, BatchNormalization on some convs) pooling the height to 1, Squeeze,
  Transpose to [T, N, C], two bidirectional LSTM layers (hidden 96), MatMul + Add to 37
  classes, LogSoftmax.

The widths are narrow so that each model.onnx stays under 2 MB; the input sizes are the
real ones. The files are checked in; rt2's build and tests never run this script.

Usage: $(bash tools/pyenv.sh) tools/real_models.py [OUT_DIR]
"""

import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
import torch_models  # noqa: E402  (tools/ is not a package)

ROOT = os.path.join(TOOLS, "..", "fixtures", "real_models")
OPSET = 17
LIMIT = 2 * 1024 * 1024
F32 = np.float32
LSTM_GAIN = 3.0


class Graph:
    """Nodes and initializers of one model, named as PyTorch's exporter names them."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def const(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op, inputs, scope, outputs=1, **attrs):
        name = f"{scope}/{op}"
        outs = [f"{name}_output_{k}" for k in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape) * std).astype(F32)

    def conv(self, x, c_in, c_out, k, scope, stride=1, group=1, bias=True, one_d=False):
        """nn.Conv2d (or Conv1d) with He-scaled weights; `same` padding for odd kernels."""
        kernel = [k] if one_d else [k, k]
        fan_in = c_in // group * int(np.prod(kernel))
        w = self.const(f"{scope}.weight", self.normal([c_out, c_in // group, *kernel], np.sqrt(2.0 / fan_in)))
        inputs = [x, w]
        if bias:
            inputs.append(self.const(f"{scope}.bias", self.normal([c_out], 0.02)))
        pad = k // 2
        return self.node("Conv", inputs, scope, dilations=[1] * len(kernel), group=group,
                         kernel_shape=kernel, pads=[pad] * 2 * len(kernel), strides=[stride] * len(kernel))

    def batch_norm(self, x, c, scope):
        """nn.BatchNorm2d in eval mode: running statistics as initializers."""
        p = [self.const(f"{scope}.{n}", v) for n, v in [
            ("weight", (1 + 0.1 * self.rng.standard_normal(c)).astype(F32)),
            ("bias", self.normal([c], 0.1)),
            ("running_mean", self.normal([c], 0.1)),
            ("running_var", (1 + 0.2 * np.abs(self.rng.standard_normal(c))).astype(F32))]]
        return self.node("BatchNormalization", [x, *p], scope, epsilon=1e-5, momentum=0.9)

    def linear(self, x, n_in, n_out, scope, gain):
        """nn.Linear on a 3-D input: MatMul by the transposed weight, then Add. `gain`
        times PyTorch's initial range, as a trained head's weights are larger."""
        bound = gain / np.sqrt(n_in)
        w = self.const(f"onnx::MatMul_{scope}", self.rng.uniform(-bound, bound, (n_in, n_out)).astype(F32))
        b = self.const(f"{scope}.bias", self.rng.uniform(-bound, bound, n_out).astype(F32))
        return self.node("Add", [self.node("MatMul", [x, w], scope), b], scope)

    def lstm(self, x, n_in, hidden, scope, bidirectional=False):
        """One layer of nn.LSTM as the exporter writes it: sequence-first X, W/R/B and zero
        initial states as initializers; Y is [T, directions, N, hidden]. The weights span
        GAIN times PyTorch's initial range, as trained ones do, so that the gates open and
        close and the recurrence shows in the output."""
        dirs = 2 if bidirectional else 1
        bound = LSTM_GAIN / np.sqrt(hidden)
        u = lambda *s: self.rng.uniform(-bound, bound, s).astype(F32)
        w = self.const(f"onnx::LSTM_{scope}_W", u(dirs, 4 * hidden, n_in))
        r = self.const(f"onnx::LSTM_{scope}_R", u(dirs, 4 * hidden, hidden))
        b = self.const(f"onnx::LSTM_{scope}_B", u(dirs, 8 * hidden))
        h0 = self.const(f"onnx::LSTM_{scope}_h0", np.zeros((dirs, 1, hidden), F32))
        c0 = self.const(f"onnx::LSTM_{scope}_c0", np.zeros((dirs, 1, hidden), F32))
        return self.node("LSTM", [x, w, r, b, "", h0, c0], scope, outputs=3, hidden_size=hidden,
                         direction="bidirectional" if bidirectional else "forward")[0]

    def model(self, name, x_shape, y, y_shape):
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, y_shape)], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                 producer_name="pytorch", producer_version="2.5.1")


def encoder():
    """tools/torch_models.py's encoder at sequence 128, narrowed to d_model 128 (FFN 512)
    so that the file stays under 2 MB; opset 17 keeps ReduceMean's axes attribute."""
    model = torch_models.encoder(128, d=128, heads=4, ffn=512, layers=2)
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("", OPSET))
    model.producer_name, model.producer_version = "pytorch", "2.5.1"
    return model, [1, 128, 128]


def divisible(v, d=8):
    """torchvision's _make_divisible: channels rounded to a multiple of 8, never below 90%."""
    new = max(d, int(v + d / 2) // d * d)
    return new + d if new < 0.9 * v else new


# torchvision's MobileNetV3-small: kernel, expanded, out, squeeze-excite, HardSwish, stride.
MOBILENET_SMALL = [
    (3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
    (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
    (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
    (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1),
]


def mobilenet(width=0.45):
    g = Graph(1)
    ch = lambda c: divisible(c * width)
    c = ch(16)
    x = g.node("HardSwish", [g.conv("input", 3, c, 3, "/features/0/0", stride=2)], "/features/0/2")
    for i, (k, exp, out, se, hs, stride) in enumerate(MOBILENET_SMALL, start=1):
        s = f"/features/{i}/block"
        e, o = ch(exp), ch(out)
        act = (lambda v, sc: g.node("HardSwish", [v], sc)) if hs else (lambda v, sc: g.node("Relu", [v], sc))
        h = x
        if e != c:
            h = act(g.conv(h, c, e, 1, f"{s}/0/0"), f"{s}/0/2")
        h = act(g.conv(h, e, e, k, f"{s}/1/0", stride=stride, group=e), f"{s}/1/2")
        if se:
            sq = divisible(e // 4)
            pooled = g.node("GlobalAveragePool", [h], f"{s}/2/avgpool")
            z = g.node("Relu", [g.conv(pooled, e, sq, 1, f"{s}/2/fc1")], f"{s}/2/relu")
            gate = g.node("HardSigmoid", [g.conv(z, sq, e, 1, f"{s}/2/fc2")], f"{s}/2/scale_activation",
                          alpha=1.0 / 6, beta=0.5)
            h = g.node("Mul", [gate, h], f"{s}/2")
        h = g.conv(h, e, o, 1, f"{s}/3/0")
        x = g.node("Add", [h, x], f"/features/{i}") if stride == 1 and o == c else h
        c = o
    last = ch(576)
    x = g.node("HardSwish", [g.conv(x, c, last, 1, "/features/12/0")], "/features/12/2")
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x], "/avgpool")], "/flatten", axis=1)
    bound = 1.0 / np.sqrt(last)
    w = g.const("classifier.weight", g.rng.uniform(-bound, bound, (1000, last)).astype(F32))
    b = g.const("classifier.bias", g.rng.uniform(-bound, bound, 1000).astype(F32))
    y = g.node("Gemm", [x, w, b], "/classifier", alpha=1.0, beta=1.0, transB=1)
    return g.model("mobilenet", [1, 3, 224, 224], y, [1, 1000]), [1, 3, 224, 224]


def unet(base=16, classes=4):
    g = Graph(2)

    def double_conv(x, c_in, c_out, s):
        for j, ci in enumerate([c_in, c_out]):
            x = g.conv(x, ci, c_out, 3, f"{s}/conv{j}", bias=False)
            x = g.node("Relu", [g.batch_norm(x, c_out, f"{s}/bn{j}")], f"{s}/relu{j}")
        return x

    chans = [base, 2 * base, 4 * base]
    skips, x, c = [], "input", 3
    for i, ch in enumerate(chans):
        x = double_conv(x, c, ch, f"/down{i}")
        skips.append((x, ch))
        x = g.node("MaxPool", [x], f"/down{i}/pool", ceil_mode=0, kernel_shape=[2, 2], pads=[0, 0, 0, 0],
                   strides=[2, 2])
        c = ch
    x = double_conv(x, c, 8 * base, "/bottleneck")
    c = 8 * base
    roi = ""
    scales = g.const("up_scales", np.array([1, 1, 2, 2], F32))
    for i, (skip, ch) in enumerate(reversed(skips)):
        s = f"/up{i}"
        if i == 0:
            w = g.const(f"{s}.up.weight", g.normal([c, ch, 2, 2], np.sqrt(1.0 / c)))
            b = g.const(f"{s}.up.bias", g.normal([ch], 0.02))
            x = g.node("ConvTranspose", [x, w, b], f"{s}/up", dilations=[1, 1], group=1, kernel_shape=[2, 2],
                       pads=[0, 0, 0, 0], strides=[2, 2])
            c = ch
        elif i == 1:
            x = g.node("Resize", [x, roi, scales], f"{s}/up", coordinate_transformation_mode="half_pixel",
                       cubic_coeff_a=-0.75, mode="linear", nearest_mode="floor")
        else:
            x = g.node("Resize", [x, roi, scales], f"{s}/up", coordinate_transformation_mode="asymmetric",
                       cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")
        x = g.node("Concat", [x, skip], s, axis=1)
        x = double_conv(x, c + ch, ch, s)
        c = ch
    y = g.conv(x, c, classes, 1, "/outc")
    return g.model("unet", [1, 3, 256, 256], y, [1, classes, 256, 256]), [1, 3, 256, 256]


def lstm_speech(frames=200, mels=64, channels=64, hidden=128):
    g = Graph(3)
    x = g.node("Transpose", ["input"], "/conv_in", perm=[0, 2, 1])
    x = g.node("Relu", [g.conv(x, mels, channels, 3, "/conv", one_d=True)], "/relu")
    x = g.node("Transpose", [x], "/lstm_in", perm=[2, 0, 1])
    c = channels
    for layer in range(2):
        s = f"/lstm/l{layer}"
        y = g.lstm(x, c, hidden, s)
        x = g.node("Squeeze", [y, g.const(f"{s}_squeeze_axes", np.array([1], np.int64))], s)
        c = hidden
    x = g.node("Transpose", [x], "/lstm_out", perm=[1, 0, 2])
    y = g.node("Sigmoid", [g.linear(x, hidden, 1, "/head", gain=4.0)], "/sigmoid")
    return g.model("lstm_speech", [1, frames, mels], y, [1, frames, 1]), [1, frames, mels]


def crnn(hidden=96, classes=37):
    g = Graph(4)
    # (out channels, BatchNormalization, pool kernel = stride)
    stack = [(16, False, [2, 2]), (32, False, [2, 2]), (48, True, None), (48, False, [2, 1]),
             (64, True, None), (64, False, [2, 1]), (64, True, [2, 1])]
    x, c = "input", 1
    for i, (ch, bn, pool) in enumerate(stack):
        s = f"/cnn/{i}"
        x = g.conv(x, c, ch, 3, f"{s}/conv", bias=not bn)
        if bn:
            x = g.batch_norm(x, ch, f"{s}/bn")
        x = g.node("Relu", [x], f"{s}/relu")
        if pool:
            x = g.node("MaxPool", [x], f"{s}/pool", ceil_mode=0, kernel_shape=pool, pads=[0, 0, 0, 0],
                       strides=pool)
        c = ch
    x = g.node("Squeeze", [x, g.const("squeeze_axes", np.array([2], np.int64))], "/squeeze")
    x = g.node("Transpose", [x], "/seq", perm=[2, 0, 1])
    steps = 128 // 4
    for layer in range(2):
        s = f"/rnn/{layer}"
        y = g.lstm(x, c, hidden, s, bidirectional=True)
        y = g.node("Transpose", [y], s, perm=[0, 2, 1, 3])
        x = g.node("Reshape", [y, g.const(f"{s}_shape", np.array([steps, 1, 2 * hidden], np.int64))], s)
        c = 2 * hidden
    y = g.node("LogSoftmax", [g.linear(x, c, classes, "/fc", gain=4.0)], "/log_softmax", axis=2)
    return g.model("crnn", [1, 1, 32, 128], y, [steps, 1, classes]), [1, 1, 32, 128]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else ROOT
    rng = np.random.default_rng(26)
    for build in (encoder, mobilenet, unet, lstm_speech, crnn):
        name = build.__name__
        model, shape = build()
        onnx.checker.check_model(model, full_check=True)
        folder = os.path.join(out, name)
        data = os.path.join(folder, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        path = os.path.join(folder, "model.onnx")
        onnx.save(model, path)
        size = os.path.getsize(path)
        if size >= LIMIT:
            sys.exit(f"{path}: {size} bytes, over the 2 MB a fixture may take")
        x = rng.standard_normal(shape).astype(F32)
        input_name = model.graph.input[0].name
        with open(os.path.join(data, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, input_name).SerializeToString())
        subprocess.run([sys.executable, os.path.join(TOOLS, "ort_golden.py"), folder], check=True)
        print(f"{name}: {size} bytes, {len(model.graph.node)} nodes")


if __name__ == "__main__":
    main()
