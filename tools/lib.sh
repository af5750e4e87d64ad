# Sourced (`. "$(dirname "$0")/lib.sh" "$@"`) by the scripts that measure rt2 beside ONNX
# Runtime: sets `root` (the repository), `rt2` (the script's first argument, else
# target/release/rt2), `py` (the pinned Python environment's interpreter, made once by
# tools/pyenv.sh) and `dir` (a temporary directory, removed when the script exits).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rt2="${1:-$root/target/release/rt2}"
py="$(bash "$root/tools/pyenv.sh")"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

# Sets `models` to the script's arguments after the binary (`models_from GENERATOR "$@"`),
# or, when there are none, to the models the Python script GENERATOR writes into `dir`.
models_from() {
  local generator=$1
  shift
  if [ "$#" -gt 1 ]; then
    models=("${@:2}")
  else
    "$py" "$root/tools/$generator" "$dir" > /dev/null
    models=("$dir"/*.onnx)
  fi
}
