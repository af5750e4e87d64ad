"""ONNX Runtime's per-node kernel times for one model: the peer column of `rt2 run MODEL
--compute-threads 1 --profile` (or of `rt2 run MODEL --profile` with THREADS 0).

Usage: tools/ort_profile.py MODEL.onnx [RUNS [THREADS]] (default 20 runs, after five
warm-up runs, on one intra-op thread; 0 threads is ONNX Runtime's default).
Prints one line per node, slowest first: node name, op type, mean microseconds per run.
Inputs are seeded standard-normal float32, symbolic dims 1. ONNX Runtime's profile file
is read and removed.
"""
import collections
import json
import os
import sys

import numpy as np
import onnxruntime as ort

path = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
options = ort.SessionOptions()
options.intra_op_num_threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
options.enable_profiling = True
session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
feeds = {
    i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(
        np.float32
    )
    for i in session.get_inputs()
}
for _ in range(5):
    session.run(None, feeds)
for _ in range(runs):
    session.run(None, feeds)
profile = session.end_profiling()
with open(profile) as f:
    events = json.load(f)
os.remove(profile)
total = collections.defaultdict(float)
count = collections.Counter()
op = {}
for e in events:
    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
        name = e["name"][: -len("_kernel_time")]
        total[name] += e["dur"]
        count[name] += 1
        op[name] = e["args"].get("op_name")
for name in sorted(total, key=lambda n: -total[n]):
    print(f"{name}\t{op[name]}\t{total[name] / count[name]:.1f}")
