#!/usr/bin/env bash
# What sending the gradients as bf16 (STRATA_ALLREDUCE_WIRE=bf16) costs the default job: the
# whole default job (the reference CNN, 10 epochs of Fashion-MNIST) as 2 MPI workers of one
# replica each, with f32 and with bf16 on the wire, for each seed; prints both test accuracies
# and their difference in points. docs/scaling.md keeps the figures (bf16 stays off by default
# unless the difference is within 0.2 points). Not a test: about 5 minutes a run on 2 cores.
#
#   bench/bf16_wire_accuracy.sh [BUILD_DIR] [SEEDS...]      (default seeds: 1 2)
set -euo pipefail
build=${1:-build}
shift || true
seeds=${*:-1 2}
strata=$(readlink -f "$build/tools/strata/strata")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each worker on a core of its own; loopback (the link does not change the sums).
mpirun=(mpirun --map-by core --bind-to core --mca btl self,vader,tcp --mca btl_tcp_if_include lo -np 2)
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%F); the default job, 2 workers x 1 replica" >&2
printf "%-5s %-14s %-14s %s\n" seed "f32 accuracy" "bf16 accuracy" "bf16 - f32 (points)"
for seed in $seeds; do
  for wire in f32 bf16; do
    STRATA_ALLREDUCE_WIRE=$wire "${mpirun[@]}" "$strata" train --replicas 1 --no-monitor --seed "$seed" \
      --summary-json "$work/$wire.json" --out "$work/$wire.ckpt" >"$work/$wire.log" 2>&1 ||
      { tail -5 "$work/$wire.log" >&2; exit 1; }
  done
  /usr/bin/python3 - "$work/f32.json" "$work/bf16.json" "$seed" <<'PY'
import json, sys
a, b = (json.load(open(p))["test_accuracy"] for p in sys.argv[1:3])
print(f"{sys.argv[3]:<5} {a:<14.4f} {b:<14.4f} {100 * (b - a):+.2f}")
PY
done
