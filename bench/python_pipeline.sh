#!/usr/bin/env bash
# make bench (run_all.sh): the flowers pipeline iterated from Python (strata.data) against
# `strata bench-input` and PyTorch's DataLoader, in one run (bench/python_pipeline_bench.py).
# Needs the records data_bench writes on its first run (run_all.sh runs it before this).
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -e "$build/python/strata/__init__.py" ]; then
  echo "python_pipeline: no Python module in $build (python3-dev, pybind11-dev): skipped"
  exit 0
fi
PYTHONPATH="$build/python" exec /usr/bin/python3 "$here/python_pipeline_bench.py" --build "$build"
