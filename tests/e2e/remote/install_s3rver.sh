#!/usr/bin/env bash
# Installs s3rver (the S3-compatible server of the s3:// tests) from the npm registry into
# DEST (a folder in the build tree), exactly as pinned by s3rver/package-lock.json.
# Does nothing when DEST already holds that lock's install. Prints the s3rver entry point.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: install_s3rver.sh DEST}
mkdir -p "$dest"
# Tests run in parallel (ctest -j) may call this at once: one npm ci at a time per DEST.
exec 9>"$dest.lock"
flock 9
if ! cmp -s "$here/s3rver/package-lock.json" "$dest/package-lock.json" || [ ! -f "$dest/node_modules/s3rver/bin/s3rver.js" ]; then
  cp "$here/s3rver/package.json" "$here/s3rver/package-lock.json" "$dest/"
  (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
echo "$dest/node_modules/s3rver/bin/s3rver.js"
