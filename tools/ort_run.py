"""Measures ONNX Runtime running one model on one thread, the peer number for rt2's op and
engine benchmarks. Inputs are seeded random float32 (or int64 zeros) of the model's
declared shapes, made once; each run feeds the same inputs. Prints one JSON line:
{"model": PATH, "ort_version": V, "run_ms": {"min", "median", "max"}, "runs": N}.

Usage: $(tools/pyenv.sh) tools/ort_run.py MODEL.onnx [RUNS] [THREADS]
One intra-op thread (THREADS 1, the default) or ONNX Runtime's own default (THREADS 0),
default graph optimizations.
"""

import json
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(double)": np.float64}


def main():
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    opts = ort.SessionOptions()
    if threads > 0:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        dtype = TYPES[i.type]
        if np.issubdtype(dtype, np.floating):
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[i.name] = np.zeros(shape, dtype)
    for _ in range(5):
        sess.run(None, feeds)  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({
        "model": path,
        "ort_version": ort.__version__,
        "run_ms": {"min": min(times), "median": statistics.median(times), "max": max(times)},
        "runs": runs,
    }))


if __name__ == "__main__":
    main()
