#!/usr/bin/env bash
# The reference CNN training step, Strata vs PyTorch 1.13, on one core, in the same run.
#
#   bench/step_vs_torch.sh [build-dir] [seconds] [repeats]
#
# Every configuration runs pinned to one core (taskset -c $CORE, default 0), one after the
# other, `repeats` times round-robin; the table shows medians of images/s and the ratios to
# PyTorch (and LibTorch, its C++ API, where `make bench` built bench/libtorch_step) at its
# default malloc and at its best (GLIBC_TUNABLES: no mmap, no trim; the
# architecture notes' best configuration for PyTorch here). Channels-last is PyTorch's
# faster layout on CPU and is reported too. Strata runs its default (Winograd for the f32
# 3x3 convolutions, docs/engine.md) and, for f32, STRATA_CONV_ALGORITHM=direct as an
# ablation. Utilization is Strata's counted matrix FLOPs / time / calibrated peak of one
# core (model FLOPs: with Winograd it is an effective figure). On a machine shared with other work the wall-clock
# figures understate everyone; images per CPU-second (the process's own CPU time, one
# thread each) estimate a dedicated core, and the ratios are given for both.
#
# ISA=avx2 measures an AVX2-only host on a wider machine: every configuration, Strata and
# PyTorch alike, runs with oneDNN capped (ONEDNN_MAX_CPU_ISA=AVX2, which PyTorch's bundled
# oneDNN honours too), Strata's own kernels capped (STRATA_MAX_ISA=avx2) and PyTorch's ATen
# kernels capped (ATEN_CPU_CAPABILITY=avx2). bf16 is skipped there: Strata refuses it below
# AVX-512 (docs/engine.md). The first line printed names the CPU and the ISA.
set -euo pipefail
BUILD=${1:-build}
SECONDS_PER_RUN=${2:-10}
REPEATS=${3:-3}
CORE=${CORE:-0}
STRATA=$BUILD/tools/strata/strata
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
# The peer at its best: OpenBLAS (Debian's PyTorch calls libblas.so.3) with its own CPU
# detection, not an override some VMs export.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
TUNED="glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"
ISA=${ISA:-native}
CAP=()
PRECISIONS="f32 bf16"
if [ "$ISA" = avx2 ]; then
  CAP=(env ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 STRATA_MAX_ISA=avx2 ATEN_CPU_CAPABILITY=avx2)
  PRECISIONS="f32"
elif [ "$ISA" != native ]; then
  echo "ISA must be native or avx2" >&2; exit 2
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); ISA: $ISA ($("${CAP[@]}" "$STRATA" devices --json | "$PY" -c 'import json,sys; print(" ".join(json.load(sys.stdin)["isa"]))'))"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

run() {  # name command...
  local name=$1; shift
  taskset -c "$CORE" "${CAP[@]}" "$@" >> "$OUT/$name.jsonl"
}

for r in $(seq "$REPEATS"); do
  for p in $PRECISIONS; do
    run strata_$p "$STRATA" bench-step --model reference-cnn --batch 128 --replicas 1 --precision $p \
        --seconds "$SECONDS_PER_RUN" --json
    [ "$p" = f32 ] && run strata_direct_$p env STRATA_CONV_ALGORITHM=direct "$STRATA" bench-step \
        --model reference-cnn --batch 128 --replicas 1 --precision $p --seconds "$SECONDS_PER_RUN" --json
    run torch_default_$p "$PY" "$HERE/torch_reference_cnn.py" --precision $p --seconds "$SECONDS_PER_RUN"
    run torch_tuned_$p env GLIBC_TUNABLES=$TUNED "$PY" "$HERE/torch_reference_cnn.py" --precision $p \
        --seconds "$SECONDS_PER_RUN"
    run torch_tuned_cl_$p env GLIBC_TUNABLES=$TUNED "$PY" "$HERE/torch_reference_cnn.py" --precision $p \
        --channels-last --seconds "$SECONDS_PER_RUN"
    if [ "$p" = f32 ] && [ -x "$BUILD/bench/libtorch_step" ]; then  # the C++ peer (make bench builds it)
      run libtorch_default_$p "$BUILD/bench/libtorch_step" --seconds "$SECONDS_PER_RUN"
      run libtorch_tuned_cl_$p env GLIBC_TUNABLES=$TUNED "$BUILD/bench/libtorch_step" --channels-last \
          --seconds "$SECONDS_PER_RUN"
    fi
  done
done

"$PY" - "$OUT" <<'PYEOF'
import json, os, statistics, sys
out = sys.argv[1]
def load(name):
    rows = [json.loads(l) for l in open(os.path.join(out, name + ".jsonl")) if l.strip()]
    return rows
print("| precision | configuration | images/s (median) | runs | step ms | utilization | images per CPU-s | peak RSS MiB | Strata / this (wall) | Strata / this (CPU-s) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for p in ("f32", "bf16"):
    if not os.path.exists(os.path.join(out, "strata_" + p + ".jsonl")):
        continue  # ISA=avx2: f32 only
    s = load("strata_" + p)
    s_ips = statistics.median(r["images_per_second"] for r in s)
    s_cpu = statistics.median(r["images_per_cpu_second"] for r in s)
    for name, label in (("strata_" + p, "Strata bench-step"),
                        ("strata_direct_" + p, "Strata, direct convolutions only (ablation)"),
                        ("torch_default_" + p, "PyTorch, default malloc"),
                        ("torch_tuned_" + p, "PyTorch, tuned malloc (best)"),
                        ("torch_tuned_cl_" + p, "PyTorch, tuned malloc, channels-last"),
                        ("libtorch_default_" + p, "LibTorch (C++), default malloc"),
                        ("libtorch_tuned_cl_" + p, "LibTorch (C++), tuned malloc, channels-last")):
        if not os.path.exists(os.path.join(out, name + ".jsonl")):
            continue  # bf16 has no Winograd ablation; LibTorch only where make bench built it
        rows = load(name)
        ips = statistics.median(r["images_per_second"] for r in rows)
        util = "%.1f %%" % (100 * statistics.median(r["utilization"] for r in rows)) if "utilization" in rows[0] else ""
        rss = statistics.median(r.get("peak_rss_bytes", 0) for r in rows) / 2**20
        cpu = statistics.median(r["images_per_cpu_second"] for r in rows)
        ratio = "" if name == "strata_" + p else "%.2fx" % (s_ips / ips)
        ratio_cpu = "" if name == "strata_" + p else "%.2fx" % (s_cpu / cpu)
        if name.startswith("strata"):
            util += " (%.1f %% per CPU-s)" % (100 * statistics.median(r["utilization_cpu"] for r in rows))
        print("| %s | %s | %.1f | %s | %.1f | %s | %.1f | %.0f | %s | %s |" % (
            p, label, ips, " ".join("%.0f" % r["images_per_second"] for r in rows),
            statistics.median(r["step_ms"] for r in rows), util, cpu, rss, ratio, ratio_cpu))
PYEOF
