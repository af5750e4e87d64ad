#!/usr/bin/env bash
# rt2 beside ONNX Runtime on the models of tools/torch_models.py (or the models given),
# in one run: `rt2 run` with --compute-threads 1 against ORT with one intra-op thread,
# then both with their defaults. Prints a Markdown table of median and best latencies in
# microseconds, and the geometric mean of the median ratios per pairing.
#
# Usage: tools/speed_vs_ort.sh [RT2_BINARY [MODEL.onnx ...]] (default
# target/release/rt2; build it first), e.g. with fixtures/real_models/*/model.onnx
set -euo pipefail
. "$(dirname "$0")/lib.sh" "$@"
models_from torch_models.py "$@"
runs=300
declare -A logs=([1]=0 [default]=0) counts=([1]=0 [default]=0)
echo "| model | threads | rt2 median | rt2 best | ORT median | ORT best | rt2 / ORT (median) |"
echo "|---|---|---|---|---|---|---|"
for model in "${models[@]}"; do
  name="$(basename "$model" .onnx)"
  [ "$name" = model ] && name="$(basename "$(dirname "$model")")"
  for threads in 1 default; do
    if [ "$threads" = 1 ]; then flag=(--compute-threads 1); ort=1; else flag=(); ort=0; fi
    line="$("$rt2" run "$model" "${flag[@]}" --iterations "$runs" --warmup 30 | grep '^latency')"
    best="$(sed 's/.*min \([0-9.]*\),.*/\1/' <<< "$line")"
    median="$(sed 's/.*median \([0-9.]*\),.*/\1/' <<< "$line")"
    peer="$("$py" "$root/tools/ort_run.py" "$model" "$runs" "$ort")"
    read -r omed obest < <("$py" -c 'import json,sys; r=json.loads(sys.argv[1])["run_ms"]; print(r["median"]*1e3, r["min"]*1e3)' "$peer")
    ratio="$("$py" -c "print(f'{$median / $omed:.2f}')")"
    printf '| %s | %s | %.1f | %.1f | %.1f | %.1f | %s |\n' "$name" "$threads" "$median" "$best" "$omed" "$obest" "$ratio"
    logs[$threads]="$("$py" -c "import math; print(${logs[$threads]} + math.log($median / $omed))")"
    counts[$threads]=$((counts[$threads] + 1))
  done
done
for threads in 1 default; do
  "$py" -c "import math; print(f'geometric mean, threads $threads: {math.exp(${logs[$threads]} / ${counts[$threads]}):.2f}')"
done
