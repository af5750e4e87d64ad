#!/usr/bin/env bash
# rt2 beside ONNX Runtime on the models of tools/torch_models.py, in one run: `rt2 run`
# with --compute-threads 1 against ORT with one intra-op thread, then both with their
# defaults. Prints a Markdown table of median and best latencies in microseconds.
#
# Usage: tools/speed_vs_ort.sh [RT2_BINARY] (default target/release/rt2; build it first)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rt2="${1:-$root/target/release/rt2}"
py="$(bash "$root/tools/pyenv.sh")"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$py" "$root/tools/torch_models.py" "$dir" > /dev/null
runs=300
echo "| model | threads | rt2 median | rt2 best | ORT median | ORT best | rt2 / ORT (median) |"
echo "|---|---|---|---|---|---|---|"
for model in "$dir"/*.onnx; do
  name="$(basename "$model" .onnx)"
  for threads in 1 default; do
    if [ "$threads" = 1 ]; then flag=(--compute-threads 1); ort=1; else flag=(); ort=0; fi
    line="$("$rt2" run "$model" "${flag[@]}" --iterations "$runs" --warmup 30 | grep '^latency')"
    best="$(sed 's/.*min \([0-9.]*\),.*/\1/' <<< "$line")"
    median="$(sed 's/.*median \([0-9.]*\),.*/\1/' <<< "$line")"
    peer="$("$py" "$root/tools/ort_run.py" "$model" "$runs" "$ort")"
    read -r omed obest < <("$py" -c 'import json,sys; r=json.loads(sys.argv[1])["run_ms"]; print(r["median"]*1e3, r["min"]*1e3)' "$peer")
    ratio="$("$py" -c "print(f'{$median / $omed:.2f}')")"
    printf '| %s | %s | %.1f | %.1f | %.1f | %.1f | %s |\n' "$name" "$threads" "$median" "$best" "$omed" "$obest" "$ratio"
  done
done
