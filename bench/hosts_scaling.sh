#!/usr/bin/env bash
# The training step across namespaced hosts (tests/common/hosts.sh: one network namespace, one
# hostname and one core per host, veth links shaped by tc tbf), for each model, host count,
# link rate and wire type; one JSON line per run, the input of bench/scaling_model.py
# (docs/scaling.md). Needs root. Not a test: it takes tens of minutes.
#
#   bench/hosts_scaling.sh [BUILD_DIR] [OUT.jsonl]
#   MODELS="reference-cnn mobilenet_v2 resnet50" HOSTS="2 4" RATES="100mbit 1gbit 10gbit"
#   WIRES="f32 bf16" STEPS=6 REPS=3 bench/hosts_scaling.sh build /tmp/scaling.jsonl
#
# STRATA_ALLREDUCE_WAIT=yield (exported) makes the waiting ranks yield their core; each line
# records the mode as `allreduce_wait`.
#
# REPS (default 3) runs the whole matrix that many times over, one repetition after the other
# (each with its own one-process baselines), so that a drift of the VM spreads over every
# configuration; each run is a line with its `rep`, and bench/scaling_model.py takes the median
# of a configuration's runs.
#
# Each run trains 2 epochs of STEPS steps (the first epoch pays the compile and first touch;
# the figures are the second epoch's, `after_first_epoch`) with 1 replica per host; one process
# with as many replicas as hosts, on the same 2 cores and at the same per-replica batch, gives
# one_host_step_ms: the compute under the same sharing of cores (4 hosts on this 2-core machine
# share them two by two, core_share 0.5), so that what the runs add to it is the network's.
# Each host's CPU time per step of the second epoch (its worker's) is reported beside: where
# hosts share a core it says what part of it each had.
set -euo pipefail
set -f  # the --data patterns are strata's globs, not the shell's
build=${1:-build}
out=${2:-/tmp/hosts_scaling.jsonl}
strata=$(readlink -f "$build/tools/strata/strata")
hosts_sh=$(dirname "$(readlink -f "$0")")/../tests/common/hosts.sh
MODELS=${MODELS:-reference-cnn mobilenet_v2 resnet50}
HOST_COUNTS=${HOSTS:-2 4}
RATES=${RATES:-100mbit 1gbit 10gbit}
WIRES=${WIRES:-f32 bf16}
STEPS=${STEPS:-8}
REPS=${REPS:-3}
work=$(mktemp -d)
cluster="bs$$"
cleanup() { "$hosts_sh" down "$cluster" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-$work/cache} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
"$hosts_sh" check >/dev/null || { "$hosts_sh" check; exit 1; }
cpu=$(lscpu | sed -n 's/^Model name: *//p')
isa=$("$strata" devices --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(", ".join(json.load(sys.stdin).get("isa", [])))' || true)
echo "# $cpu ($isa), $(nproc) cores; $(date -u +%F)" >&2

"$strata" make-records --from generated-flowers --classes 10 --per-class 40 --val-per-class 1 --test-per-class 1 \
  --image-size 224 --out "$work/flowers" --quiet
"$strata" train --epochs 1 --steps-per-epoch 1 --no-monitor --out "$work/warm.ckpt" >/dev/null  # Fashion-MNIST's records

flowers="--data $work/flowers/train/*.tfrec --label-key class --classes 10"
args_of() {  # the training flags of a model
  case "$1" in
    # With --data the run has no validation pass, whose time would count in the epoch's.
    reference-cnn) echo "--data $STRATA_CACHE_DIR/datasets/fashion_mnist/3.0.1/fashion_mnist-train.tfrecord-* --batch-per-replica 128" ;;
    mobilenet_v2) echo "--model mobilenet_v2 --image-size 224 $flowers --batch-per-replica 16" ;;
    resnet50) echo "--model resnet50 --image-size 224 $flowers --batch-per-replica 8" ;;
  esac
}

# The second epoch's seconds per step, from --summary-json.
step_ms() { /usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); t=j["seconds_at_epoch_end"]; print((t[1]-t[0])*1e3/int(sys.argv[2]))' "$1" "$2"; }

: > "$out"
for rep in $(seq 1 "$REPS"); do
for model in $MODELS; do
  margs=$(args_of "$model")
  common="train --epochs 2 --steps-per-epoch $STEPS --no-monitor --seed 1 --replicas 1 $margs"
  for n in $HOST_COUNTS; do
    # The compute the all-reduce is set against: a replica's step with the cores shared as in
    # the runs, from one process with n replicas on the 2 cores (2 hosts: a replica on each
    # core, which ran 0-30 % slower than one alone on this VM; 4 hosts: two replicas a core,
    # which took 1.9-2.2x a replica on each core). No MPI, no network: what is left is the network's.
    "$strata" ${common/--replicas 1/--replicas $n} --summary-json "$work/one.json" --out "$work/one.ckpt" >"$work/one.log" 2>&1 ||
      { echo "failed: $model, $n replicas in one process" >&2; tail -5 "$work/one.log" >&2; exit 1; }
    one_ms=$(step_ms "$work/one.json" "$STEPS")
    # The same compute as the runs' own: n single-replica processes at once, one on each of the
    # hosts (their namespaces and cores), without MPI (not launched by mpirun, each trains
    # alone). They share the cores as the hosts do, as processes (each its own weights and
    # caches, taking turns where two share a core), which the one process above does not; the
    # slowest one's step is the compute a synchronous run waits for.
    "$hosts_sh" down "$cluster" >/dev/null 2>&1 || true
    HOSTS_OWNER=$$ "$hosts_sh" up "$cluster" "$n" none
    pids=()
    for k in $(seq 1 "$n"); do
      "$hosts_sh" exec "$cluster" "$k" "$strata" $common --summary-json "$work/alone$k.json" --out "$work/alone$k.ckpt" \
        >"$work/alone$k.log" 2>&1 &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do
      wait "$pid" || { echo "failed: $model, $n processes alone" >&2; tail -5 "$work"/alone*.log >&2; exit 1; }
    done
    alone_ms=$(for k in $(seq 1 "$n"); do step_ms "$work/alone$k.json" "$STEPS"; done | sort -g | tail -1)
    for rate in $RATES; do
      "$hosts_sh" down "$cluster" >/dev/null 2>&1 || true
      HOSTS_OWNER=$$ "$hosts_sh" up "$cluster" "$n" "$rate"
      for wire in $WIRES; do
        rm -f "$work/run.json"
        /usr/bin/time -f "%e %U %S" -o "$work/time" env STRATA_ALLREDUCE_WIRE="$wire" \
          "$hosts_sh" mpirun "$cluster" 1 "$strata" $common --summary-json "$work/run.json" --out "$work/run.ckpt" \
          >"$work/run.log" 2>&1 || { echo "failed: $model $n hosts $rate $wire" >&2; tail -5 "$work/run.log" >&2; continue; }
        /usr/bin/python3 - "$work/run.json" "$model" "$n" "$rate" "$wire" "$STEPS" "$one_ms" "$work/time" "$margs" "$rep" "$alone_ms" >>"$out" <<'PY'
import json, os, re, sys
j = json.load(open(sys.argv[1]))
model, n, rate, wire, steps, one_ms, timefile, margs, rep, alone_ms = sys.argv[2:]
n, steps = int(n), int(steps)
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate)
bits = float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2]] if m else 0
# The second epoch's steps (after_first_epoch): the first compiles the programs, and the
# workers first meet in its all-reduce, each after its own compile.
x = j["cross_host"]["after_first_epoch"]
ms = x["step_ms"]
batch = int(re.search(r"--batch-per-replica (\d+)", margs)[1])
size = int(re.search(r"--image-size (\d+)", margs)[1]) if "--image-size" in margs else 28
wall = float(open(timefile).read().split()[-3])
print(json.dumps({
    "model": model, "image_size": size, "hosts": n, "replicas_per_host": 1, "batch_per_replica": batch,
    "rate_bits_per_s": bits, "wire": wire, "steps": steps, "step_ms": ms,
    "images_per_second": n * batch / (ms / 1e3),
    "all_reduce_bytes_per_step": x["all_reduce_bytes_per_step"], "wire_bytes_per_step": x["wire_bytes_per_step"],
    "all_reduce_ms_per_step": x["all_reduce_ms_per_step"], "all_reduce_wait_ms_per_step": x["all_reduce_wait_ms_per_step"],
    # The slowest worker's wait is the network's alone; the others wait for it too.
    "least_wait_ms_per_step": x["least_wait_ms_per_step"], "per_worker": x["per_worker"],
    "backward_end_ms": x.get("backward_end_ms", 0), "buckets": x.get("buckets", []),
    "buckets_started_during_backward": x.get("buckets_started_during_backward", 0),
    "buckets_started_after_backward": x.get("buckets_started_after_backward", 0),
    "one_host_step_ms": float(one_ms),
    # The slowest of n single-replica processes training at once on the hosts' cores, no MPI:
    # the compute of the run's workers without the network (the model's compute).
    "alone_step_ms": float(alone_ms),
    # Each host's worker's CPU time per step of the second epoch, and the cores it used then
    # (CPU seconds per second): with 4 hosts on 2 cores each host has about half a core
    # (cpu_share, the hosts' mean, measured; core_share, what the pinning gives).
    # one_host_step_ms already has that sharing in it (cores_per_host 1 for the model).
    "cpu_ms_per_step_per_host": [w.get("cpu_ms_per_step", 0) for w in x["per_worker"]],
    "cpu_share": sum(w.get("cores_used", 0) for w in x["per_worker"]) / len(x["per_worker"]),
    "cpu_seconds_per_host": [w["cpu_seconds"] for w in x["per_worker"]], "cores_per_host": 1.0, "core_share": min(1.0, 2 / n),
    # How a waiting rank waited (STRATA_ALLREDUCE_WAIT: spin, Open MPI's own, or yield).
    "allreduce_wait": os.environ.get("STRATA_ALLREDUCE_WAIT", "spin"),
    "rep": int(rep), "wall_seconds": wall}))
PY
        tail -1 "$out" | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
print("rep %d %-14s %d hosts %6.2f Gbit/s %-4s: step %8.1f ms (one host %7.1f, alone %7.1f), all-reduce %7.2f MB %8.1f ms, waited %8.1f ms, "
      "backward ends %7.1f ms, %.2f of a core a host" % (r["rep"], r["model"], r["hosts"], r["rate_bits_per_s"] / 1e9, r["wire"],
      r["step_ms"], r["one_host_step_ms"], r["alone_step_ms"], r["wire_bytes_per_step"] / 1e6, r["all_reduce_ms_per_step"],
      r["all_reduce_wait_ms_per_step"], r["backward_end_ms"], r["cpu_share"]), file=sys.stderr)' 
      done
    done
  done
done
done
echo "wrote $out" >&2
