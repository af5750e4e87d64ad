#!/usr/bin/env bash
# Coverage-guided fuzzing of rt2's readers on stable Rust (docs/FUZZING.md).
#
#   tools/fuzz.sh build                  build every target (instrumented, release)
#   tools/fuzz.sh TARGET [SECONDS]       build, then fuzz TARGET for SECONDS (default 60)
#   tools/fuzz.sh all [SECONDS]          every target in turn, SECONDS each
#   tools/fuzz.sh seeds                  regenerate fuzz/seeds/ and fuzz/dicts/ from the fixtures
#   tools/fuzz.sh list                   the target names
#
# The targets are libFuzzer binaries (fuzz/, cargo-fuzz layout) built by plain cargo with
# LLVM's SanitizerCoverage passes turned on through stable codegen flags, so no nightly
# toolchain is needed (only AddressSanitizer would need one, and safe Rust has little use
# for it). New inputs go to fuzz/corpus/TARGET (not committed), the committed seeds are
# read from fuzz/seeds/TARGET, and crashes land in fuzz/artifacts/TARGET/. Environment:
#   FUZZ_FLAGS   more libFuzzer flags (e.g. "-jobs=2 -workers=2", "-runs=0")
#   FUZZ_LOG     a file each run's final statistics are appended to
#   FUZZ_NO_BUILD=1  run the binaries as last built
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(om ge_binary ge_text ge_json onnx exeg rim_json capture_script npy pb lower_run)
TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
BIN="fuzz/target/$TRIPLE/release"

# SanitizerCoverage as cargo-fuzz configures it (inline 8-bit counters, the PC table and
# comparison tracing are what libFuzzer's coverage and value profile read), plus debug
# assertions and overflow checks: an overflow is a panic the fuzzer can find.
RUSTFLAGS_FUZZ="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
--cfg fuzzing -Cdebug-assertions -Coverflow-checks"

build() {
  if [[ -n "${FUZZ_NO_BUILD:-}" ]]; then return; fi
  # An explicit --target keeps the flags off build scripts and proc macros (rt2's
  # build.rs generates the protobuf code and must not be instrumented).
  (cd fuzz && RUSTFLAGS="$RUSTFLAGS_FUZZ" cargo build --release --locked --target "$TRIPLE" --bins)
}

# The largest input each target is given: model files need room (the seeds go up to
# 40 KB), a tensor or a script does not.
max_len() {
  case "$1" in
    om|ge_binary|ge_text|ge_json|onnx|exeg|lower_run) echo 65536 ;;
    *) echo 16384 ;;
  esac
}

# Seconds one input may take before libFuzzer calls it a hang. lower_run reads, lowers
# and executes a model twice on a fresh device.
timeout_for() {
  case "$1" in
    lower_run|rim_json) echo 30 ;;
    *) echo 10 ;;
  esac
}

run() {
  local t="$1" secs="$2"
  local corpus="fuzz/corpus/$t" seeds="fuzz/seeds/$t" art="fuzz/artifacts/$t"
  mkdir -p "$corpus" "$art" "$seeds"
  local dict=()
  if [[ -f "fuzz/dicts/$t.dict" ]]; then dict=("-dict=fuzz/dicts/$t.dict"); fi
  echo "fuzz: $t for ${secs}s"
  local log
  log="$(mktemp)"
  local status=0
  # shellcheck disable=SC2086
  "$BIN/$t" "$corpus" "$seeds" \
    -max_len="$(max_len "$t")" -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -timeout="$(timeout_for "$t")" -max_total_time="$secs" -print_final_stats=1 \
    -print_pcs=0 -artifact_prefix="$art/" "${dict[@]}" ${FUZZ_FLAGS:-} >"$log" 2>&1 || status=$?
  # The progress lines and what went wrong, without the per-input chatter.
  grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE)|NEW_FUNC|Uses:|^[[:space:]]+(at |[0-9]+: )' "$log" || true
  if [[ -n "${FUZZ_LOG:-}" ]]; then
    { echo "== $t ${secs}s exit $status"; grep -E '^#[0-9]+.*DONE|stat::|ERROR|panicked' "$log" || true; } >>"$FUZZ_LOG"
  fi
  rm -f "$log"
  return "$status"
}

case "${1:-}" in
  build) build ;;
  list) printf '%s\n' "${TARGETS[@]}" ;;
  seeds)
    # The ONNX backend node tests add a model per op; tools/pyenv.sh finds (or makes) them.
    if [[ -z "${RT2_ONNX_NODE_DATA:-}" ]] && py="$(bash tools/pyenv.sh 2>/dev/null)"; then
      RT2_ONNX_NODE_DATA="$("$py" -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/node"))')"
      export RT2_ONNX_NODE_DATA
    fi
    rm -rf fuzz/seeds fuzz/dicts
    cargo run --locked --quiet --example fuzz_seeds -- fuzz/seeds
    du -sh fuzz/seeds
    ;;
  all)
    secs="${2:-60}"
    build
    failed=()
    for t in "${TARGETS[@]}"; do run "$t" "$secs" || failed+=("$t"); done
    if ((${#failed[@]})); then echo "fuzz: findings in: ${failed[*]}"; exit 1; fi
    ;;
  "" | -h | --help)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    ;;
  *)
    t="$1"
    if [[ ! " ${TARGETS[*]} " == *" $t "* ]]; then
      echo "fuzz: no target $t (targets: ${TARGETS[*]})" >&2
      exit 2
    fi
    build
    run "$t" "${2:-60}"
    ;;
esac
