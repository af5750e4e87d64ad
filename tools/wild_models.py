"""rt2 beside ONNX Runtime on models published for real use, the classes issue 26 names:
Silero VAD (speech activity, an LSTM inside sample-rate Ifs), RapidOCR's PP-OCRv4
detection and recognition and its PP-OCR direction classifier, and Magika (file types).
Each comes from its package on PyPI at a pinned version (downloaded once, without its
dependencies, into RT2_WILD or ~/.cache/rt2/wild; nothing is installed). Each model runs
on the same seeded inputs in both tools: `rt2 run --input ... --output-dir` (300
executions after 20) and ONNX Runtime (300 runs after 20), one thread each, then both
tools' defaults; rt2's outputs are compared with ONNX Runtime's.

Prints a Markdown table: medians and bests in microseconds, their ratios, and the largest
difference of an output from ONNX Runtime's relative to that output's largest magnitude.

Usage: $(tools/pyenv.sh) tools/wild_models.py [RT2_BINARY] (default target/release/rt2)
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("RT2_WILD", os.path.expanduser("~/.cache/rt2/wild"))
PACKAGES = ["silero-vad==6.2.3", "rapidocr-onnxruntime==1.4.4", "magika==1.0.3"]
RUNS, WARMUP = 300, 20


def models():
    """(name, model path, {input: array}) for each model."""
    rng = np.random.RandomState(0)
    vad = {
        "input": (rng.randn(1, 512) * 0.1).astype(np.float32),
        "state": np.zeros((2, 1, 128), np.float32),
        "sr": np.array(16000, np.int64),
    }
    ocr = "rapidocr_onnxruntime/models"
    return [
        ("silero_vad", "silero_vad/data/silero_vad.onnx", vad),
        ("silero_vad_ifless", "silero_vad/data/silero_vad_op18_ifless.onnx", vad),
        ("magika", "magika/models/standard_v3_3/model.onnx",
         {"bytes": rng.randint(0, 256, (1, 2048)).astype(np.int32)}),
        ("ppocr_cls", f"{ocr}/ch_ppocr_mobile_v2.0_cls_infer.onnx",
         {"x": rng.rand(1, 3, 48, 192).astype(np.float32)}),
        ("ppocrv4_rec", f"{ocr}/ch_PP-OCRv4_rec_infer.onnx",
         {"x": rng.rand(1, 3, 48, 320).astype(np.float32)}),
        ("ppocrv4_det", f"{ocr}/ch_PP-OCRv4_det_infer.onnx",
         {"x": rng.rand(1, 3, 640, 640).astype(np.float32)}),
    ]


def fetch():
    """The packages' files, extracted under CACHE/x (once)."""
    out = os.path.join(CACHE, "x")
    stamp = os.path.join(CACHE, ".fetched-1")
    if not os.path.exists(stamp):
        os.makedirs(CACHE, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--disable-pip-version-check", "-d", CACHE, *PACKAGES], check=True)
        for f in os.listdir(CACHE):
            if f.endswith(".whl"):
                with zipfile.ZipFile(os.path.join(CACHE, f)) as z:
                    z.extractall(out, [n for n in z.namelist() if n.endswith(".onnx")])
        open(stamp, "w").close()
    return out


def ort_times(path, feeds, threads):
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    for _ in range(WARMUP):
        outs = sess.run(None, feeds)
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times), min(times), [o.name for o in sess.get_outputs()], outs


def rt2_times(rt2, path, files, threads, out_dir):
    args = [rt2, "run", path, "--iterations", str(RUNS), "--warmup", str(WARMUP),
            "--output-dir", out_dir]
    for name, f in files.items():
        args += ["--input", f"{name}={f}"]
    if threads:
        args += ["--compute-threads", str(threads)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip())
    m = re.search(r"min ([0-9.]+), median ([0-9.]+)", r.stdout)
    return float(m.group(2)), float(m.group(1))


def worst(names, want, out_dir):
    """The largest difference of an output from ONNX Runtime's, relative to the output's
    largest magnitude (the share of elements that differ, for integer outputs)."""
    w = 0.0
    for name, v in zip(names, want):
        got = np.load(os.path.join(out_dir, re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".npy"))
        if got.shape != v.shape:
            return float("inf")
        if v.dtype.kind == "f":
            scale = max(float(np.max(np.abs(v))), 1e-30)
            w = max(w, float(np.max(np.abs(got.astype(np.float64) - v))) / scale)
        else:
            w = max(w, float(np.mean(got != v)))
    return w


def main():
    rt2 = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/rt2")
    base = fetch()
    print("| model | threads | rt2 median | rt2 best | ORT median | ORT best "
          "| median / ORT | best / ORT | largest difference |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, rel, feeds in models():
            path = os.path.join(base, rel)
            files = {}
            for k, v in feeds.items():
                files[k] = os.path.join(tmp, f"{name}.{k}.npy")
                np.save(files[k], v)
            for threads, label in ((1, "1"), (0, "default")):
                out_dir = os.path.join(tmp, f"{name}.{label}")
                omed, obest, names, want = ort_times(path, feeds, threads)
                try:
                    med, best = rt2_times(rt2, path, files, threads, out_dir)
                except RuntimeError as e:
                    print(f"| {name} | {label} | failed: {e} |")
                    continue
                diff = worst(names, want, out_dir)
                print(f"| {name} | {label} | {med:.1f} | {best:.1f} | {omed:.1f} | {obest:.1f} "
                      f"| {med / omed:.2f} | {best / obest:.2f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
