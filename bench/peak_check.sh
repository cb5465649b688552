#!/usr/bin/env bash
# The cached peak against the independent asm loop, as a user gets it: `strata devices --check`
# on a fresh cache each run (so each run calibrates, then compares), RUNS times, and
# build/bench/peak_bench (a calibration beside the asm in one process) where it is built.
# BENCHMARKS.md, "Peak FLOP/s calibration", has the figures and the CPU they came from.
# Usage: bench/peak_check.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-3}
strata="$build/tools/strata/strata"
[ -x "$strata" ] || { echo "peak_check: $strata is not built (make build)" >&2; exit 1; }
lscpu | grep -E "^Model name|^CPU family|^Model:" || true
for i in $(seq "$runs"); do
  cache=$(mktemp -d)
  echo "== run $i: strata devices --check (fresh cache $cache)"
  STRATA_CACHE_DIR="$cache" "$strata" devices --check
  rm -rf "$cache"
done
if [ -x "$build/bench/peak_bench" ]; then
  echo "== peak_bench"
  "$build/bench/peak_bench"
  echo "== STRATA_MAX_ISA=avx2 peak_bench"
  STRATA_MAX_ISA=avx2 "$build/bench/peak_bench"
fi
