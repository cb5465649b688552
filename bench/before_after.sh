#!/usr/bin/env bash
# Speed before and after a change, in the same run on the same machine: two Release builds
# (e.g. a worktree of the old commit built into its build/, and this checkout's build/),
# measured in alternated rounds so that load drifts hit both alike.
#
#   bench/before_after.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]      (default 3 rounds)
#
# Each round, for each build (the order alternates between rounds):
#   bench-step --replicas 1 and 2   (the reference CNN's step, 128 images per replica, 8 s)
#   scaling_bench                   (fit's steady state on in-memory data, 1 and 2 replicas)
#   strata train                    (the default job on Fashion-MNIST, 1 and 2 replicas, 150 steps)
#   data_bench FlowersRecipe/2/0/1  (the flowers pipeline, 2 threads)
# Prints each figure's median per build and after / before. Needs the Fashion-MNIST records the
# default job makes on its first run, and the flowers benchmark's data (data_bench makes it).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "before_after.sh: needs BEFORE_BUILD and AFTER_BUILD (skipped)"
  exit 0
fi
before=$1 after=$2 rounds=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

measure() {  # build label round
  local b=$1 label=$2 r=$3 f="$out/$2.$3"
  for rep in 1 2; do
    "$b/tools/strata/strata" bench-step --replicas $rep --seconds 8 --json >"$f.step$rep.json"
    "$b/tools/strata/strata" train --epochs 1 --steps-per-epoch 150 --replicas $rep --no-monitor \
      --out "$out/model-$label" --summary-json "$f.train$rep.json" >/dev/null
  done
  "$b/bench/scaling_bench" --steps 40 --repeats 1 >"$f.fit.json"
  "$b/bench/data_bench" --benchmark_filter='FlowersRecipe/2/0/1/' --benchmark_format=json >"$f.pipe.json" 2>/dev/null
}

for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="before after"; else order="after before"; fi
  for label in $order; do
    if [ "$label" = before ]; then b=$before; else b=$after; fi
    echo "round $r: $label ($(uptime | sed 's/.*load average: //'))" >&2
    measure "$b" "$label" "$r"
  done
done

python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys, os
out, rounds = sys.argv[1], int(sys.argv[2])
def load(label, r, name):
    return json.load(open(os.path.join(out, f"{label}.{r}.{name}.json")))
figures = [
    ("bench-step, 1 replica (img/s)", lambda l, r: load(l, r, "step1")["images_per_second"]),
    ("bench-step, 2 replicas (img/s)", lambda l, r: load(l, r, "step2")["images_per_second"]),
    ("fit steady state, 1 replica (img/s)", lambda l, r: load(l, r, "fit")["images_per_second"]["1"]),
    ("fit steady state, 2 replicas (img/s)", lambda l, r: load(l, r, "fit")["images_per_second"]["2"]),
    ("default job (strata train), 1 replica (img/s)", lambda l, r: load(l, r, "train1")["images_per_second"]),
    ("default job (strata train), 2 replicas (img/s)", lambda l, r: load(l, r, "train2")["images_per_second"]),
    ("flowers pipeline, 2 threads (img/s)",
     lambda l, r: [b for b in load(l, r, "pipe")["benchmarks"] if b.get("run_type", "iteration") == "iteration"][0]["items_per_second"]),
]
print("| figure | before (median) | after (median) | after / before | after, every round |")
print("| --- | --- | --- | --- | --- |")
med = {}
for name, get in figures:
    b = [get("before", r) for r in range(1, rounds + 1)]
    a = [get("after", r) for r in range(1, rounds + 1)]
    mb, ma = statistics.median(b), statistics.median(a)
    med[name] = ma
    print(f"| {name} | {mb:,.1f} | {ma:,.1f} | {ma / mb:.3f} | {', '.join(f'{x:,.0f}' for x in a)} |")
for rep in ("1 replica", "2 replicas"):
    s, f = med[f"bench-step, {rep} (img/s)"], med[f"fit steady state, {rep} (img/s)"]
    print(f"\nafter: bench-step / fit steady state, {rep}: {s / f:.3f}")
EOF
