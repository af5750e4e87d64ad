#!/usr/bin/env bash
# Imports every model of the ONNX backend test data (onnx 1.22.0 wheel, ~1,900 models)
# through `rt2 compile` to an OM and back, and checks that the OM describes the same
# graph as the ONNX model with no verifier problems. A robustness check on real models;
# not part of `cargo test` (it needs the Python environment for the data).
# Usage: tools/import_all.sh [path/to/rt2]
set -euo pipefail
rt2="${1:-target/release/rt2}"
py="$(dirname "$0")/pyenv.sh"
data="$("$("$py")" -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data"))')"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
ok=0; failed=0
for dir in "$data"/node/*/ "$data"/simple/*/ "$data"/pytorch-converted/*/ "$data"/pytorch-operator/*/; do
  model="$dir/model.onnx"; [ -f "$model" ] || continue
  if "$rt2" compile "$model" -o "$tmp/m.om" 2>"$tmp/err" \
     && "$rt2" inspect "$tmp/m.om" --format json >"$tmp/a.json" 2>>"$tmp/err" \
     && "$rt2" inspect "$model" --format json >"$tmp/b.json" 2>>"$tmp/err" \
     && python3 -c 'import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(int(a["graphs"]!=b["graphs"] or bool(a["problems"]) or bool(b["problems"])))' "$tmp/a.json" "$tmp/b.json"; then
    ok=$((ok+1))
  else
    failed=$((failed+1)); echo "$(basename "$dir"): $(head -c 300 "$tmp/err")"
  fi
done
echo "import_all: $ok passed, $failed failed"
[ "$failed" -eq 0 ]
