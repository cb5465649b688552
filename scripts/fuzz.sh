#!/usr/bin/env bash
# Runs every libFuzzer target (*_fuzz) in a build directory, one after another, each for the
# given number of seconds over a scratch copy of its seeds (fuzz/seeds/<target>/; the seeds
# themselves are never modified). New crashes land in fuzz/corpus-<target>/ as crash-*.
# usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET
set -euo pipefail
BUILD=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET}
SECONDS_PER=${2:?usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mapfile -t TARGETS < <(find "$BUILD" -maxdepth 3 -type f -name '*_fuzz' -perm -u+x | sort)
[ ${#TARGETS[@]} -gt 0 ] || { echo "fuzz.sh: no *_fuzz binaries under $BUILD" >&2; exit 1; }
status=0
for bin in "${TARGETS[@]}"; do
  name=$(basename "$bin")
  corpus="$ROOT/fuzz/corpus-$name"
  mkdir -p "$corpus"
  if [ -d "$ROOT/fuzz/seeds/$name" ]; then cp -n "$ROOT/fuzz/seeds/$name"/* "$corpus"/ 2>/dev/null || true; fi
  echo "== $name: ${SECONDS_PER}s over $(ls "$corpus" | wc -l) inputs" >&2
  log="$corpus/fuzz.log"
  if "$bin" "$corpus" -max_total_time="$SECONDS_PER" -artifact_prefix="$corpus/" -print_final_stats=1 >"$log" 2>&1; then
    grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|cov:' "$log" | tail -3 >&2 || true
  else
    echo "fuzz.sh: $name FAILED, see $log and $corpus/crash-*" >&2
    tail -40 "$log" >&2
    status=1
  fi
done
exit $status
