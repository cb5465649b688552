#!/usr/bin/env bash
# Installs @roboflow/tfrecords (an independent TFRecord reader, the oracle of
# tests/e2e/remote_npm_reader_test.cc) from the npm registry into DEST (a folder in the build
# tree), exactly as pinned by tfrecords_reader/package-lock.json, without running any package
# scripts. Does nothing when DEST already holds that lock's install. Prints DEST.
# Other npm oracles pass their own folder (package.json + package-lock.json) and a file the
# install must hold: tests/e2e/export_onnx_test.cc installs onnxruntime-node from
# tests/e2e/onnx with  install_tfrecords_reader.sh DEST tests/e2e/onnx onnxruntime-node/package.json
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: install_tfrecords_reader.sh DEST [PACKAGE_DIR MARKER]}
pkg=${2:-$here/tfrecords_reader}
marker=${3:-@roboflow/tfrecords/src/tensorFlowReader.js}
mkdir -p "$dest"
# Tests run in parallel (ctest -j) may call this at once: one npm ci at a time per DEST.
exec 9>"$dest.lock"
flock 9
if ! cmp -s "$pkg/package-lock.json" "$dest/package-lock.json" || [ ! -f "$dest/node_modules/$marker" ]; then
  cp "$pkg/package.json" "$pkg/package-lock.json" "$dest/"
  (cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
fi
echo "$dest"
