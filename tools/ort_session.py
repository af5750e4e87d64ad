"""Measures ONNX Runtime's session creation for one model, the peer number for
`rt2 compile` and lowering benchmarks. Prints one JSON line:
{"model": PATH, "ort_version": V, "session_ms": {"min", "median", "max"}, "runs": N}.

Usage: $(tools/pyenv.sh) tools/ort_session.py MODEL.onnx [RUNS]
One intra-op thread and default graph optimizations, as a user would create a session.
"""

import json
import statistics
import sys
import time

import onnxruntime as ort


def main():
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({
        "model": path,
        "ort_version": ort.__version__,
        "session_ms": {"min": min(times), "median": statistics.median(times), "max": max(times)},
        "runs": runs,
    }))


if __name__ == "__main__":
    main()
