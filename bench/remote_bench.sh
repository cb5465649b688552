#!/usr/bin/env bash
# Remote vs local read speed of one TFRecordDataset pipeline (BENCHMARKS.md, "Remote data").
#
#   bench/remote_bench.sh [BUILD_DIR]     (default: build; needs BUILD_DIR/bench/remote_bench, nginx)
#
# Writes 16 TFRecord files of ~50 MB into /tmp/strata-remote-bench (kept for the next run;
# never in the repository), serves them with nginx on a loopback port (keep-alive,
# sendfile), warms the page cache, then reads them, 3 runs of 3 passes each (a pass is an
# epoch; the first also maps the reader's pooled block memory), best first pass and best pass:
#   local  16 files, num_parallel_reads=16      http  the same 16 files as http:// URLs
#   local  one file alone, num_parallel_reads=1 http  that file alone over one stream
# and, as the peer, the transport alone: bare libcurl GETs of the same URLs whose bodies are
# discarded (`remote_bench transport`), the most loopback HTTP delivers on this machine.
set -euo pipefail
build=${1:-build}
bin=$build/bench/remote_bench
work=${STRATA_REMOTE_BENCH_DIR:-/tmp/strata-remote-bench}
files=16
mb=50
[ -x "$bin" ] || { echo "remote_bench: $bin not built (cmake --build $build --target remote_bench)" >&2; exit 1; }
command -v nginx >/dev/null || PATH=$PATH:/usr/sbin
command -v nginx >/dev/null || { echo "remote_bench: nginx missing (scripts/deps.sh installs nginx-light)" >&2; exit 1; }
mkdir -p "$work/data" "$work/tmp"
chmod 755 "$work" "$work/data"
last=$(printf '%s/data/train-%05d-of-%05d.tfrecord' "$work" $((files - 1)) "$files")
[ -f "$last" ] || "$bin" make "$work/data" "$files" "$mb"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$work/nginx.conf" <<CONF
daemon off;
worker_processes 2;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/tmp;
  keepalive_timeout 60s;
  keepalive_requests 100000;
  sendfile on;
  tcp_nopush on;
  default_type application/octet-stream;
  server { listen 127.0.0.1:$port; root $work/data; }
}
CONF
nginx -e "$work/error.log" -p "$work" -c "$work/nginx.conf" &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null; wait $nginx_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
# The server's CPU is counted per pass (remote_bench reads /proc/PID/stat of these pids).
STRATA_BENCH_SERVER_PIDS="$nginx_pid $(pgrep -P "$nginx_pid" | tr '\n' ' ')"
export STRATA_BENCH_SERVER_PIDS

cat "$work"/data/*.tfrecord > /dev/null  # page cache: both sides read from memory
local_files=("$work"/data/*.tfrecord)
urls=()
for f in "${local_files[@]}"; do urls+=("http://127.0.0.1:$port/$(basename "$f")"); done

# "first-pass-best best cpu server_cpu" over 3 runs of `remote_bench MODE ARGS...` (3 passes
# each): MB/s, then the median CPU ms per MB of the later (steady) passes, client and server.
best() {
  local all=""
  for _ in 1 2 3; do all+=$("$bin" "$@" 2>>"$work/stages.txt")$'\n'; done
  python3 -c '
import json, statistics, sys
runs = [json.loads(l) for l in sys.stdin if l.strip()]
steady = [r for r in runs if r["pass"] > 1]
print("%.0f %.0f %.4f %.4f" % (max(r["mb_per_s"] for r in runs if r["pass"] == 1), max(r["mb_per_s"] for r in runs),
      statistics.median(r["cpu_ms_per_mb"] for r in steady), statistics.median(r["server_cpu_ms_per_mb"] for r in steady)))' <<<"$all"
}

: > "$work/stages.txt"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); block ${STRATA_IO_BLOCK_BYTES:-8388608} B, read-ahead ${STRATA_IO_READAHEAD_BLOCKS:-2}"
l16=$(best read 16 "${local_files[@]}")
h16=$(best read 16 "${urls[@]}")
t16=$(best transport "${urls[@]}")
l1=$(best read 1 "${local_files[0]}")
h1=$(best read 1 "${urls[0]}")
t1=$(best transport "${urls[0]}")
p16=$(best pread "${local_files[@]}")
python3 - "$l16" "$h16" "$l1" "$h1" "$t16" "$t1" "$p16" "$files" "$mb" "$(nproc)" <<'PY'
import sys
rows = [list(map(float, a.split())) for a in sys.argv[1:8]]
(l16a, l16, *_), (h16a, h16, *_), (l1a, l1, *_), (h1a, h1, *_), (_, t16, *_), (_, t1, *_), (_, p16, *_) = rows
files, mb, cores = sys.argv[8], sys.argv[9], int(sys.argv[10])
# The transport column: bare libcurl GETs of the same URLs with the bodies discarded (no
# copy, no reader): what loopback HTTP delivers at all while nginx shares the cores.
print("| read | local page cache MB/s | HTTP (nginx, loopback) MB/s | HTTP / local | bare libcurl, bodies discarded: MB/s, / local | first pass: local, HTTP, ratio |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
print(f"| {files} files x {mb} MB, num_parallel_reads={files} | {l16:.0f} | {h16:.0f} | {100*h16/l16:.0f} % | {t16:.0f}, {100*t16/l16:.0f} % | {l16a:.0f}, {h16a:.0f}, {100*h16a/l16a:.0f} % |")
print(f"| one file, one stream | {l1:.0f} | {h1:.0f} | {100*h1/l1:.0f} % | {t1:.0f}, {100*t1/l1:.0f} % | {l1a:.0f}, {h1a:.0f}, {100*h1a/l1a:.0f} % |")
# CPU per MB (steady passes, medians; client = this process, server = nginx). An HTTP
# pipeline does the local pipeline's record work except the local read itself, plus at
# least the bare transport: CPU >= transport + local - pread. On `cores` cores that CPU
# caps its rate, whatever the reader does; against the local rate that caps the ratio.
names = ["local pipeline, 16 files", "HTTP pipeline, 16 files", "local pipeline, one file", "HTTP pipeline, one file",
         "bare transport, 16 streams", "bare transport, one stream", "bare pread, 16 files (1 MiB reads)"]
print()
print("| steady pass | MB/s | client CPU ms/MB | server CPU ms/MB | total ms/MB |")
print("| --- | ---: | ---: | ---: | ---: |")
for name, r in zip(names, rows):
    print(f"| {name} | {r[1]:.0f} | {r[2]:.3f} | {r[3]:.3f} | {r[2] + r[3]:.3f} |")
total = [r[2] + r[3] for r in rows]
print(f"\nceiling: the bare transport alone (16 streams, bodies discarded, no reader) reads {t16:.0f} MB/s ="
      f" {100 * t16 / l16:.0f} % of the local pipeline (target for the HTTP pipeline: 80 %)")
for label, transport in (("16 streams", total[4]), ("one stream", total[5])):
    need = transport + total[0] - total[6]
    cap = 1000.0 * cores / need
    print(f"bound ({label}): >= {transport:.3f} transport + {total[0]:.3f} local pipeline - {total[6]:.3f} local read"
          f" = {need:.3f} CPU ms/MB; {cores} cores give <= {cap:.0f} MB/s = {100 * cap / l16:.0f} % of local")
print(f"measured: HTTP pipeline {total[1]:.3f} CPU ms/MB, {h16:.0f} MB/s = {100 * h16 / l16:.0f} % of local")

PY
echo "stage tables (MB/s/str): $work/stages.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
