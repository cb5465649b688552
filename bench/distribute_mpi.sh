#!/usr/bin/env bash
# The MPI path's cost against the in-process path, on one machine over loopback:
#   strata train --replicas 2               (one process, 2 replicas, shared-memory reduce)
#   mpirun -np 2 strata train --replicas 1  (2 workers x 1 replica, MPI all-reduce between them)
# Same global batch (256), same steps, no validation. Prints images/s of both and the
# per-step all-reduce bytes and time the MPI run reports (cross_host in --summary-json): the
# time the all-reduce was in flight and the part the step waited for (the rest overlapped the
# backward pass; STRATA_ALLREDUCE_OVERLAP=0 bench/distribute_mpi.sh for the all-reduce after it).
# Usage: bench/distribute_mpi.sh [BUILD_DIR] [STEPS]
set -euo pipefail
build=${1:-build}
steps=${2:-60}
strata="$build/tools/strata/strata"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$strata" train --epochs 1 --steps-per-epoch 1 --no-monitor --out "$out/warm.ckpt" >/dev/null  # makes the records once
cache=${STRATA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata}
data="$cache/datasets/fashion_mnist/3.0.1/fashion_mnist-train.tfrecord-*"
common=(train --data "$data" --epochs 1 --steps-per-epoch "$steps" --no-monitor)
"$strata" "${common[@]}" --replicas 2 --summary-json "$out/local.json" --out "$out/local.ckpt" >/dev/null
mpirun --oversubscribe --bind-to none --mca btl self,vader,tcp --mca btl_tcp_if_include lo -np 2 \
  "$strata" "${common[@]}" --replicas 1 --summary-json "$out/mpi.json" --out "$out/mpi.ckpt" >/dev/null
/usr/bin/python3 - "$out/local.json" "$out/mpi.json" <<'PY'
import json, sys
local, mpi = (json.load(open(p)) for p in sys.argv[1:3])
x = mpi["cross_host"]
print(json.dumps({
    "in_process_images_per_second": local["images_per_second"],
    "mpi_images_per_second": mpi["images_per_second"],
    "mpi_over_in_process": mpi["images_per_second"] / local["images_per_second"],
    "all_reduce_mb_per_step": x["all_reduce_bytes_per_step"] / 1e6,
    "all_reduce_ms_per_step": x["all_reduce_ms_per_step"],
    # Overlapped with the backward pass, only this part is step time; the rest is hidden.
    "all_reduce_wait_ms_per_step": x["all_reduce_wait_ms_per_step"],
    "all_reduce_hidden_share": 1 - x["all_reduce_wait_ms_per_step"] / max(x["all_reduce_ms_per_step"], 1e-9),
    "step_ms": x["step_ms"],
    "all_reduce_share_of_step": x["all_reduce_ms_per_step"] / x["step_ms"],
}, indent=2))
PY
