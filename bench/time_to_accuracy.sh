#!/usr/bin/env bash
# The default job's time to a test accuracy, Strata against PyTorch on the same recipe, in the
# same run (issue 48): the time-to-accuracy comparison of DAWNBench and the CIFAR-10 speed runs.
#
#   bench/time_to_accuracy.sh [build-dir] [target]        (target default 0.94)
#   SEEDS="1 2 3" TORCH_SEEDS="1" bench/time_to_accuracy.sh build
#   REUSE=DIR bench/time_to_accuracy.sh build     # Strata's runs from DIR/strata-SEED.json, not run again
#
# Strata runs `strata train` as a user does (the default job: its recipe, precision and
# monitor) once per seed in SEEDS; PyTorch 1.13 (Debian's python3-torch) runs the same recipe,
# read from Strata's summary JSON ("recipe": lr, batch, warm-up, label smoothing, pad-crop, flip,
# ...), through bench/torch_fashion_recipe.py at its best here (2 threads, channels-last, bf16
# autocast where Strata's recipe is bf16, OpenBLAS under torch: libopenblas0-pthread, and
# GLIBC_TUNABLES without mmap and trim) once per seed in TORCH_SEEDS
# (each is ~10 minutes). Times are training only, the validation after each epoch left out:
# Strata's train_seconds, and its time to the target is the first epoch end at or above it less
# the validation passes before it (equal shares of validation_seconds). The first line names the
# CPU and its ISA.
set -euo pipefail
BUILD=${1:-build}
TARGET=${2:-0.94}
SEEDS=${SEEDS:-1 2 3}
TORCH_SEEDS=${TORCH_SEEDS:-1}
STRATA=$BUILD/tools/strata/strata
HERE=$(cd "$(dirname "$0")" && pwd)
# The peer at its best: OpenBLAS (Debian's PyTorch calls libblas.so.3) with its own CPU
# detection, not an override some VMs export.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
family=$(grep -m1 "cpu family" /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
model=$(grep -m1 "^model\s*:" /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
isa=$("$STRATA" devices --json | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["isa"]))' 2>/dev/null || echo "?")
echo "CPU: $cpu (family $family model $model), $(nproc) cores; ISA: $isa; target test accuracy $TARGET"

for seed in $SEEDS; do
  if [ -n "${REUSE:-}" ]; then cp "$REUSE/strata-$seed.json" "$OUT/"; continue; fi
  "$STRATA" train --seed "$seed" --summary-json "$OUT/strata-$seed.json" > "$OUT/strata-$seed.log" 2>&1 ||
    { cat "$OUT/strata-$seed.log"; exit 1; }
done
recipe_seed=$(echo "$SEEDS" | awk '{print $1}')
for seed in $TORCH_SEEDS; do
  flags=$(python3 - "$OUT/strata-$recipe_seed.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["recipe"]
if r["model"] != "reference-cnn" or r["optimizer"] != "sgd" or r["schedule"] != "cosine" or r["lr_scaling"] != "linear":
    sys.exit("torch_fashion_recipe.py runs the reference CNN, SGD, cosine, linear scaling only: " + json.dumps(r))
print(f'--epochs {r["epochs"]} --batch-per-replica {r["batch_per_replica"]} --lr {r["lr"]} '
      f'--warmup-epochs {r["warmup_epochs"]} --label-smoothing {r["label_smoothing"]} '
      f'--pad-crop {r["pad_crop"]} --flip {r["flip"]} --channels-last' + (" --bf16" if r["precision"] == "bf16" else ""))
PY
)
  GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
    /usr/bin/python3 "$HERE/torch_fashion_recipe.py" --threads 2 --seed "$seed" --target "$TARGET" $flags \
    > "$OUT/torch-$seed.log" 2>&1 || { cat "$OUT/torch-$seed.log"; exit 1; }
done

python3 - "$OUT" "$TARGET" "$SEEDS" "$TORCH_SEEDS" <<'PY'
import json, statistics, sys
out, target, seeds, torch_seeds = sys.argv[1], float(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()

def strata_row(seed):
    j = json.load(open(f"{out}/strata-{seed}.json"))
    acc, ends, epochs = j["history"]["val_accuracy"], j["seconds_at_epoch_end"], len(j["history"]["val_accuracy"])
    per_val = j["validation_seconds"] / epochs
    hit = next((i for i, a in enumerate(acc) if a >= target), None)
    t = None if hit is None else ends[hit] - per_val * (hit + 1)
    return j["test_accuracy"], j["train_seconds"], t, j["wall_seconds"], j["recipe"]["precision"]

def torch_row(seed):
    lines = [l for l in open(f"{out}/torch-{seed}.log") if l.startswith("{")]
    j = json.loads(lines[-1])
    return j["final_test_accuracy"], j["train_seconds"], j["time_to_target_seconds"], j["blas"], "bf16" if j["bf16"] else "f32"

fmt = lambda t: "not reached" if t is None else f"{t:.1f} s"
rows = []
print(f"{'run':28s} {'test acc':>9s} {'train s':>9s} {'to ' + str(target):>12s}")
for s in seeds:
    acc, train, t, wall, precision = strata_row(s)
    rows.append((acc, train, t))
    print(f"{'strata ' + precision + ' seed ' + s:28s} {acc:9.4f} {train:9.1f} {fmt(t):>12s}   (command wall {wall:.1f} s)")
accs = [r[0] for r in rows]
trains = [r[1] for r in rows]
print(f"{'strata mean':28s} {statistics.mean(accs):9.4f} {statistics.mean(trains):9.1f}   min accuracy {min(accs):.4f}")
for s in torch_seeds:
    acc, train, t, blas, prec = torch_row(s)
    print(f"{'pytorch ' + prec + ' seed ' + s:28s} {acc:9.4f} {train:9.1f} {fmt(t):>12s}   (BLAS: {blas})")
    if t is not None and all(r[2] is not None for r in rows):
        print(f"  time to {target}: pytorch / strata = {t / statistics.mean(r[2] for r in rows):.2f}x")
    print(f"  training time: pytorch / strata = {train / statistics.mean(trains):.2f}x")
PY
