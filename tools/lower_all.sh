#!/usr/bin/env bash
# Lowers every model of the ONNX backend test data (onnx 1.22.0 wheel, ~1,900 models)
# with `rt2 lower`, with and without the multi-thread passes, and sorts the outcomes:
# lowered (exit 0), unsupported ops (exit 1, the ops rt2 does not have yet), refused
# (exit 2: a model rt2 judges invalid), and crashes (anything else, or an internal
# error): the last must be zero. Prints each refusal and crash with its message. A
# robustness check on real models; not part of `cargo test` (it needs the Python
# environment for the data).
# Usage: tools/lower_all.sh [path/to/rt2]
set -uo pipefail
rt2="${1:-target/release/rt2}"
py="$(dirname "$0")/pyenv.sh"
data="$("$("$py")" -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data"))')"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
lowered=0; unsupported=0; refused=0; crashed=0
for dir in "$data"/node/*/ "$data"/simple/*/ "$data"/pytorch-converted/*/ "$data"/pytorch-operator/*/; do
  model="$dir/model.onnx"; [ -f "$model" ] || continue
  for mt in "" "--multi-thread"; do
    "$rt2" lower "$model" -o "$tmp/m.exeg" $mt >/dev/null 2>"$tmp/err"
    code=$?
    if grep -q "internal error\|panicked" "$tmp/err"; then code=99; fi
    case "$code" in
      0) [ -z "$mt" ] && lowered=$((lowered+1)) ;;
      1) [ -z "$mt" ] && unsupported=$((unsupported+1)) ;;
      2) [ -z "$mt" ] && { refused=$((refused+1)); echo "refused $(basename "$dir"): $(head -c 300 "$tmp/err")"; } ;;
      *) crashed=$((crashed+1)); echo "CRASH ($code) $(basename "$dir") $mt: $(head -c 500 "$tmp/err")" ;;
    esac
  done
done
echo "lower_all: $lowered lowered, $unsupported with unsupported ops, $refused refused, $crashed crashed"
[ "$crashed" -eq 0 ]
