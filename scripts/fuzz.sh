#!/usr/bin/env bash
# Runs libFuzzer targets (*_fuzz) of a Fuzz build directory, one after another, each for the
# given number of seconds over a scratch copy of its corpus (fuzz/corpus/<target>/ is never
# modified unless FUZZ_MERGE=1). Work corpora, logs and any crash-*/timeout-*/oom-* inputs
# land in BUILD_DIR/fuzz-work/<target>/. With FUZZ_MERGE=1 the inputs that add coverage are
# merged into fuzz/corpus/<target>/ afterwards, minimized to edge coverage (-merge=1
# -use_counters=0: the fewest inputs that reach every edge reached), to be committed.
# Each target's last line: seconds, executions, exec/s, coverage (cov/ft), corpus size, peak RSS.
# usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]   (default: every target)
set -euo pipefail
BUILD=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]}
SECONDS_PER=${2:?usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]}
shift 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -gt 0 ]; then
  TARGETS=()
  for t in "$@"; do TARGETS+=("$(find "$BUILD" -maxdepth 3 -type f -name "$t" -perm -u+x | head -1)"); done
else
  mapfile -t TARGETS < <(find "$BUILD" -maxdepth 3 -type f -name '*_fuzz' -perm -u+x | sort)
fi
[ ${#TARGETS[@]} -gt 0 ] && [ -n "${TARGETS[0]}" ] || { echo "fuzz.sh: no *_fuzz binaries under $BUILD" >&2; exit 1; }
status=0
for bin in "${TARGETS[@]}"; do
  [ -x "$bin" ] || { echo "fuzz.sh: no such target binary: $bin" >&2; status=1; continue; }
  name=$(basename "$bin")
  work="$BUILD/fuzz-work/$name"
  mkdir -p "$work/corpus"
  [ -d "$ROOT/fuzz/corpus/$name" ] && cp -n "$ROOT/fuzz/corpus/$name"/* "$work/corpus"/ 2>/dev/null || true
  echo "== $name: ${SECONDS_PER}s over $(ls "$work/corpus" | wc -l) inputs" >&2
  log="$work/fuzz.log"
  # -timeout: an input that runs 10 s is a hang, reported as timeout-*; -close_fd_mask=3: the
  # targets' own output (error messages by design) is dropped, sanitizer reports still show.
  # fuzz/<target>.options: that target's own libFuzzer flags (they come last, so they win).
  read -r -a extra < <(cat "$ROOT/fuzz/$name.options" 2>/dev/null || true) || true
  if "$bin" "$work/corpus" -max_total_time="$SECONDS_PER" -timeout=10 -close_fd_mask=3 \
       -artifact_prefix="$work/" -print_final_stats=1 "${extra[@]}" >"$log" 2>&1; then
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
    cov=$(echo "$done_line" | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
    corp=$(echo "$done_line" | grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' || true)
    echo "$name: ${SECONDS_PER}s, $execs execs ($speed/s), $cov, $corp, peak ${rss} MB" >&2
  else
    echo "fuzz.sh: $name FAILED, see $log and $work/{crash,timeout,oom,leak}-*" >&2
    tail -40 "$log" >&2
    status=1
  fi
  if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    mkdir -p "$ROOT/fuzz/corpus/$name"
    "$bin" -merge=1 -use_counters=0 -close_fd_mask=3 "$ROOT/fuzz/corpus/$name" "$work/corpus" >"$work/merge.log" 2>&1 ||
      { echo "fuzz.sh: merge of $name failed, see $work/merge.log" >&2; status=1; }
  fi
done
exit $status
