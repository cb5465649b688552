#!/usr/bin/env bash
# Runs bench/record_bench with repetitions and prints medians and the ratios to the peers.
# usage: bench/record_bench.sh [BUILD_DIR=build] [REPETITIONS=5]
set -euo pipefail
BUILD=${1:-build}
REPS=${2:-5}
BIN=${BENCH_BIN:-$BUILD/bench/record_bench}
OUT=$(mktemp)
"$BIN" --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true --benchmark_format=json >"$OUT"
/usr/bin/python3 - "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
med = {b["run_name"]: b for b in d["benchmarks"] if b.get("aggregate_name") == "median"}
def gbs(n): return med[n]["bytes_per_second"] / 1e9
def ips(n): return med[n]["items_per_second"]
print("context: %s, %d CPUs @ %s MHz, load %s" % (d["context"]["date"], d["context"]["num_cpus"],
      d["context"]["mhz_per_cpu"], d["context"].get("load_avg")))
rows = [
  ("CRC32C SSE4.2 3-stream", gbs("BM_Crc32cHardware"), "GB/s", "memcpy 1 MiB", gbs("BM_MemcpyPeer")),
  ("CRC32C portable (slicing-by-8)", gbs("BM_Crc32cPortable"), "GB/s", "memcpy 1 MiB", gbs("BM_MemcpyPeer")),
  ("read 100 kB records (page cache)", gbs("BM_ReadRecords100kB/real_time"), "GB/s", "memcpy same bytes", gbs("BM_MemcpyRecordBytesPeer/real_time")),
  ("read 100 kB records (page cache)", gbs("BM_ReadRecords100kB/real_time"), "GB/s", "pread whole file", gbs("BM_PreadFilePeer/real_time")),
  ("parse penguin Example (ExampleParser)", ips("BM_ParsePenguinStrata") / 1e6, "M/s", "libprotobuf ParseFromString", ips("BM_ParsePenguinProtobufPeer") / 1e6),
  ("decode penguin Example (DecodeExample)", ips("BM_DecodePenguinAllocating") / 1e6, "M/s", "libprotobuf ParseFromString", ips("BM_ParsePenguinProtobufPeer") / 1e6),
]
print("%-40s %10s   %-28s %10s  %s" % ("strata", "", "peer", "", "ratio"))
for name, v, unit, peer, pv in rows:
  print("%-40s %7.2f %s   %-28s %7.2f %s  %.2fx" % (name, v, unit, peer, pv, unit, v / pv))
PY
rm -f "$OUT"

