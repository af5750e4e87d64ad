#!/usr/bin/env bash
# rt2 beside ONNX Runtime on the one-op models of tools/op_models.py (or the models given),
# one thread each (`rt2 run --compute-threads 1`, ORT with one intra-op thread), in one run.
# Prints a Markdown table of median latencies in microseconds and their ratio. A model
# whose every operand is an initializer (gather_embedding) is folded to a constant by
# ONNX Runtime at session creation, so its ratio says nothing of the op.
#
# Usage: tools/ops_vs_ort.sh [RT2_BINARY [MODEL.onnx ...]] (default target/release/rt2;
# build it first)
set -euo pipefail
. "$(dirname "$0")/lib.sh" "$@"
models_from op_models.py "$@"
runs=200
echo "| model | rt2 median | ORT median | rt2 / ORT |"
echo "|---|---:|---:|---:|"
for model in "${models[@]}"; do
  name="$(basename "$model" .onnx)"
  ours="$("$rt2" run "$model" --compute-threads 1 --iterations "$runs" --warmup 20 |
    sed -n 's/^latency.* median \([0-9.]*\),.*/\1/p')"
  peer="$("$py" "$root/tools/ort_run.py" "$model" "$runs" 1 |
    "$py" -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["run_ms"]["median"] * 1e3))')"
  echo "| $name | $ours | $peer | $(awk -v a="$ours" -v b="$peer" 'BEGIN { printf "%.2f", a / b }') |"
done
