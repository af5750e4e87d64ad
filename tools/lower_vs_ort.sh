#!/usr/bin/env bash
# Whole-process `rt2 inspect`, `rt2 lower` and `rt2 compile` of one ONNX model beside ONNX
# Runtime's session creation for it, in one run (issue 26's "a quarter of ONNX Runtime's
# session creation"). Each rt2 command runs ROUNDS times under `/usr/bin/time`, the
# commands alternated so that a slow phase of the machine falls on all of them;
# `tools/ort_session.py` runs before and after. Prints a Markdown table: per command the
# median and range of the wall time, the peak RSS range, and the median over ONNX
# Runtime's median session creation (both measurements of it given).
#
# Usage: tools/lower_vs_ort.sh [RT2_BINARY [MODEL.onnx [ROUNDS]]] (defaults:
# target/release/rt2, the 10,000-Add chain of tools/chain_model.py, 7 rounds; an empty
# MODEL also takes the chain)
set -euo pipefail
. "$(dirname "$0")/lib.sh" "$@"
model="${2:-}"
if [ -z "$model" ]; then
  model="$dir/chain10k.onnx"
  "$py" "$root/tools/chain_model.py" "$model"
fi
rounds="${3:-7}"
session() {
  "$py" "$root/tools/ort_session.py" "$model" 10 |
    "$py" -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["session_ms"]["median"] / 1e3))'
}
before="$(session)"
commands=(inspect lower compile)
for _ in $(seq "$rounds"); do
  for c in "${commands[@]}"; do
    case "$c" in
      inspect) args=(inspect "$model") ;;
      lower) args=(lower "$model" -o "$dir/out.exeg") ;;
      compile) args=(compile "$model" -o "$dir/out.om") ;;
    esac
    # Wall time from bash's microsecond clock (`time`'s %e counts hundredths, too coarse
    # for a command of a tenth of a second); peak RSS from /usr/bin/time.
    start=$EPOCHREALTIME
    /usr/bin/time -f "%M" -o "$dir/t" "$rt2" "${args[@]}" > /dev/null
    end=$EPOCHREALTIME
    echo "$start $end $(cat "$dir/t")" >> "$dir/$c"
  done
done
after="$(session)"
echo "ONNX Runtime session creation: $before s before, $after s after (median of 10 each)"
echo
echo "| command | median | range | peak RSS | median / ORT session |"
echo "|---|---:|---:|---:|---:|"
for c in "${commands[@]}"; do
  "$py" - "$c" "$dir/$c" "$before" "$after" <<'PY'
import statistics, sys
cmd, path, before, after = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
rows = [line.split() for line in open(path) if line.strip()]
t = sorted(float(r[1]) - float(r[0]) for r in rows)
m = sorted(int(r[2]) / 1024 for r in rows)
med = statistics.median(t)
print(f"| `rt2 {cmd}` | {med:.3f} s | {t[0]:.3f}-{t[-1]:.3f} s | {m[0]:.0f}-{m[-1]:.0f} MB "
      f"| {med / max(before, after):.2f}-{med / min(before, after):.2f} |")
PY
done
