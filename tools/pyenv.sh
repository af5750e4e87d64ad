#!/usr/bin/env bash
# Creates (once) the Python environment rt2's peer benchmarks and conformance data use:
# numpy, onnx 1.22.0 (the last wheel that ships the ONNX backend test data) and ONNX
# Runtime, pinned. Prints the interpreter's path. Reuses an existing environment; never
# fails because it is already there. The Rust build and core tests never need it.
set -euo pipefail
root="${RT2_PYENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rt2/pyenv}"
stamp="$root/.rt2-pins-1"
if [ ! -f "$stamp" ]; then
  python3 -m venv "$root" >&2
  "$root/bin/pip" install --quiet --disable-pip-version-check \
    numpy==2.4.6 onnx==1.22.0 onnxruntime==1.32.0 >&2
  touch "$stamp"
fi
echo "$root/bin/python"
