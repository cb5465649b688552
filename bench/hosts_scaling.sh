#!/usr/bin/env bash
# The training step across namespaced hosts (tests/common/hosts.sh: one network namespace, one
# hostname and one core per host, veth links shaped by tc tbf), for each model, host count,
# link rate and wire type; one JSON line per run, the input of bench/scaling_model.py
# (docs/scaling.md). Needs root. Not a test: it takes tens of minutes.
#
#   bench/hosts_scaling.sh [BUILD_DIR] [OUT.jsonl]
#   MODELS="reference-cnn mobilenet_v2 resnet50" HOSTS="2 4" RATES="100mbit 1gbit 10gbit"
#   WIRES="f32 bf16" STEPS=6 bench/hosts_scaling.sh build /tmp/scaling.jsonl
#
# Each run trains 2 epochs of STEPS steps (the first epoch pays the compile and first touch;
# the step time is the second epoch's) with 1 replica per host, and one host alone with the
# same per-replica batch gives one_host_step_ms. 4 hosts on this 2-core machine share the cores
# two by two (cores_per_host 0.5): their compute takes about twice as long, which the model
# takes into account; per-host CPU seconds are reported to show it.
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
STEPS=${STEPS:-6}
work=$(mktemp -d)
cluster="bs$$"
cleanup() { "$hosts_sh" down "$cluster" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
export STRATA_CACHE_DIR=${STRATA_CACHE_DIR:-$work/cache} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
"$hosts_sh" check >/dev/null || { "$hosts_sh" check; exit 1; }
cpu=$(lscpu | sed -n 's/^Model name: *//p')
isa=$("$strata" devices --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("isa",""))' || true)
echo "# $cpu ($isa), $(nproc) cores; $(date -u +%F)" >&2

"$strata" make-records --from generated-flowers --classes 10 --per-class 40 --val-per-class 1 --test-per-class 1 \
  --image-size 224 --out "$work/flowers" --quiet
"$strata" train --epochs 1 --steps-per-epoch 1 --no-monitor --out "$work/warm.ckpt" >/dev/null  # Fashion-MNIST's records

args_of() {  # the training flags of a model
  case "$1" in
    # With --data the run has no validation pass, whose time would count in the epoch's.
    reference-cnn) echo "--data $STRATA_CACHE_DIR/datasets/fashion_mnist/3.0.1/fashion_mnist-train.tfrecord-* --batch-per-replica 128" ;;
    mobilenet_v2) echo "--model mobilenet_v2 --image-size 224 --data $work/flowers/train/*.tfrec --batch-per-replica 16" ;;
    resnet50) echo "--model resnet50 --image-size 224 --data $work/flowers/train/*.tfrec --batch-per-replica 8" ;;
  esac
}

# The second epoch's seconds per step, from --summary-json.
step_ms() { /usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); t=j["seconds_at_epoch_end"]; print((t[1]-t[0])*1e3/int(sys.argv[2]))' "$1" "$2"; }

: > "$out"
for model in $MODELS; do
  margs=$(args_of "$model")
  common="train --epochs 2 --steps-per-epoch $STEPS --no-monitor --seed 1 --replicas 1 $margs"
  # One host alone, one core: the compute the all-reduce is set against.
  taskset -c 0 "$strata" $common --summary-json "$work/one.json" --out "$work/one.ckpt" >/dev/null 2>&1
  one_ms=$(step_ms "$work/one.json" "$STEPS")
  for n in $HOST_COUNTS; do
    for rate in $RATES; do
      "$hosts_sh" down "$cluster" >/dev/null 2>&1 || true
      HOSTS_OWNER=$$ "$hosts_sh" up "$cluster" "$n" "$rate"
      for wire in $WIRES; do
        rm -f "$work/run.json"
        /usr/bin/time -f "%e %U %S" -o "$work/time" env STRATA_ALLREDUCE_WIRE="$wire" \
          "$hosts_sh" mpirun "$cluster" 1 "$strata" $common --summary-json "$work/run.json" --out "$work/run.ckpt" \
          >"$work/run.log" 2>&1 || { echo "failed: $model $n hosts $rate $wire" >&2; tail -5 "$work/run.log" >&2; continue; }
        ms=$(step_ms "$work/run.json" "$STEPS")
        /usr/bin/python3 - "$work/run.json" "$model" "$n" "$rate" "$wire" "$STEPS" "$ms" "$one_ms" "$work/time" "$margs" >>"$out" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
model, n, rate, wire, steps, ms, one_ms, timefile, margs = sys.argv[2:]
n, steps = int(n), int(steps)
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate)
bits = float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2]] if m else 0
x = j["cross_host"]
batch = int(re.search(r"--batch-per-replica (\d+)", margs)[1])
size = int(re.search(r"--image-size (\d+)", margs)[1]) if "--image-size" in margs else 28
wall, user, sys_ = (float(v) for v in open(timefile).read().split()[-3:])
print(json.dumps({
    "model": model, "image_size": size, "hosts": n, "replicas_per_host": 1, "batch_per_replica": batch,
    "rate_bits_per_s": bits, "wire": wire, "steps": steps, "step_ms": float(ms),
    "images_per_second": n * batch / (float(ms) / 1e3),
    "all_reduce_bytes_per_step": x["all_reduce_bytes_per_step"], "wire_bytes_per_step": x["wire_bytes_per_step"],
    "all_reduce_ms_per_step": x["all_reduce_ms_per_step"], "all_reduce_wait_ms_per_step": x["all_reduce_wait_ms_per_step"],
    "backward_end_ms": x.get("backward_end_ms", 0), "buckets": x.get("buckets", []),
    "buckets_started_during_backward": x.get("buckets_started_during_backward", 0),
    "buckets_started_after_backward": x.get("buckets_started_after_backward", 0),
    "one_host_step_ms": float(one_ms),
    # Every host's processes together (the job's CPU time over the host count): with 4 hosts
    # on 2 cores each host gets about half a core.
    "cpu_seconds_per_host": [(user + sys_) / n] * n, "cores_per_host": min(1.0, 2 / n),
    "wall_seconds": wall}))
PY
        tail -1 "$out" | /usr/bin/python3 -c 'import json,sys; r=json.loads(sys.stdin.read());
print(f"{r[\"model\"]:14s} {r[\"hosts\"]} hosts {r[\"rate_bits_per_s\"]/1e9:6.2f} Gbit/s {r[\"wire\"]:4s}: step {r[\"step_ms\"]:8.1f} ms (one host {r[\"one_host_step_ms\"]:7.1f}), all-reduce {r[\"wire_bytes_per_step\"]/1e6:7.2f} MB {r[\"all_reduce_ms_per_step\"]:8.1f} ms, waited {r[\"all_reduce_wait_ms_per_step\"]:8.1f} ms, backward ends {r[\"backward_end_ms\"]:7.1f} ms", file=sys.stderr)'
      done
    done
  done
done
echo "wrote $out" >&2
