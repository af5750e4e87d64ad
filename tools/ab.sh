#!/usr/bin/env bash
# Compares rt2 binaries on one model in alternated rounds, so that a machine's slow and
# fast phases fall on every binary alike: each round runs every binary once
# (`rt2 run MODEL --compute-threads THREADS --iterations 100 --warmup 10`), in turn.
# Prints, per binary, the median of the rounds' medians and the best minimum, in us.
#
# Usage: tools/ab.sh MODEL THREADS ROUNDS BINARY...
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 MODEL THREADS ROUNDS BINARY..." >&2
  exit 2
fi
model=$1 threads=$2 rounds=$3
shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for _ in $(seq "$rounds"); do
  for i in $(seq $#); do
    bin=${!i}
    "$bin" run "$model" --compute-threads "$threads" --iterations 100 --warmup 10 \
      | sed -nE 's/^latency .*min ([0-9.]+), median ([0-9.]+).*/\1 \2/p' >>"$dir/$i"
  done
done
for i in $(seq $#); do
  sort -n -k2 "$dir/$i" | awk -v bin="${!i}" '
    { min[NR] = $1; med[NR] = $2 }
    END {
      best = min[1]; for (r = 2; r <= NR; r++) if (min[r] < best) best = min[r]
      m = (NR % 2) ? med[(NR + 1) / 2] : (med[NR / 2] + med[NR / 2 + 1]) / 2
      printf "%s: median of medians %.1f us, best %.1f us (%d rounds)\n", bin, m, best, NR
    }'
done
