#!/usr/bin/env bash
# make bench: runs every benchmark program of a Release build, one after another.
# Usage: bench/run_all.sh BUILD_DIR. Area scripts (bench/*.sh other than this one) run after.
set -uo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
for b in "$build"/bench/*_bench; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
done
for s in "$here"/*.sh; do
  [ "$(basename "$s")" = run_all.sh ] && continue
  echo "== $(basename "$s")"
  bash "$s" "$build"
done
