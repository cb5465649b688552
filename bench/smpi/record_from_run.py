#!/usr/bin/python3
"""A step record (bench/smpi/README.md) from one line of bench/hosts_scaling.sh's output.

  record_from_run.py RUNS.jsonl --model resnet50 [--hosts 2] [--gbps 10] [--wire f32] [--rep 1]
                     [--progress-interval 0.002] [--jitter 0.02] [--triad 17.9e9] > record.json

What a run records (src/strata/train/cross_host_report.cc, --summary-json's cross_host): each
bucket's bytes (f32) and mean ready, start and finish times from the start of the step's
program (ready_ms from 2026-12-08 on; older files have start_ms alone, taken as the ready
time), the backward pass's mean end, the chief's step and wait. What it does not, and this
script takes as given (listed under "assumed" in the record): the time between progress calls
(one MPI_Testsome per kernel of replica 0; the kernel count is not reported), the per-step
jitter of the compute (the summary has means; the --trace files have every step), the memory
bandwidth, and the split of the time after the wait (update, statistics all-reduce, feeding the
next batch), all of which goes into update_s.
"""
import argparse
import json
import sys


def pick(path, model, hosts, gbps, wire, rep):
    for line in open(path):
        r = json.loads(line)
        if (r["model"] == model and r["hosts"] == hosts and abs(r["rate_bits_per_s"] - gbps * 1e9) < 1
                and r["wire"] == wire and r.get("rep", 1) == rep):
            return r
    sys.exit(f"no run of {model}, {hosts} hosts, {gbps:g} Gbit/s, {wire}, rep {rep} in {path}")


def record(r, progress_interval, jitter, triad, path):
    if not r.get("buckets"):
        sys.exit("the run has no bucket schedule (the plain reducer, or a file before 2026-12-04)")
    step, backward, wait = r["step_ms"] / 1e3, r["backward_end_ms"] / 1e3, r["all_reduce_wait_ms_per_step"] / 1e3
    grads = sum(b["bytes"] for b in r["buckets"])  # f32, as ReducerStats counts them
    wire = 0.5 if r["wire"] == "bf16" else 1.0
    return {
        "name": f"{r['model']} ({r['hosts']} hosts, {r['rate_bits_per_s'] / 1e9:g} Gbit/s, {r['wire']}, rep {r.get('rep', 1)})",
        "source": f"{path}: bench/hosts_scaling.sh, the steps after the first epoch",
        "wire": r["wire"],
        "buckets": [{"bytes": int(b["bytes"] * wire), "ready_s": round(b.get("ready_ms", b["start_ms"]) / 1e3, 6)}
                    for b in r["buckets"]],
        "backward_end_s": round(backward, 6),
        "forward_backward_s": round(backward, 6),
        "update_s": round(max(0.0, step - backward - wait), 6),
        "stats_bytes": int(max(0, r["all_reduce_bytes_per_step"] - grads)),
        "jitter": jitter,
        "triad_bytes_per_s": triad,
        "progress_interval_s": progress_interval,
        "measured": {"step_s": round(step, 6), "wait_s": round(wait, 6),
                     "least_wait_s": round(r.get("least_wait_ms_per_step", 0) / 1e3, 6)},
        "assumed": ["progress_interval_s", "jitter", "triad_bytes_per_s",
                    "update_s: step - backward end - wait (update, statistics all-reduce, feed)",
                    "forward_backward_s: the recorded run's backward end (its compute with the network on)"],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs")
    p.add_argument("--model", required=True)
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--gbps", type=float, default=10)
    p.add_argument("--wire", default="f32")
    p.add_argument("--rep", type=int, default=1)
    p.add_argument("--progress-interval", type=float, default=0.002)
    p.add_argument("--jitter", type=float, default=0.02)
    p.add_argument("--triad", type=float, default=17.9e9, help="bytes/s (BENCHMARKS.md's triad, one core)")
    a = p.parse_args()
    r = pick(a.runs, a.model, a.hosts, a.gbps, a.wire, a.rep)
    print(dumps(record(r, a.progress_interval, a.jitter, a.triad, a.runs)))


def dumps(rec):
    """JSON with one bucket a line."""
    text = json.dumps({k: v for k, v in rec.items() if k != "buckets"}, indent=1)
    buckets = ",\n".join("  " + json.dumps(b) for b in rec["buckets"])
    return text[:-2] + f',\n "buckets": [\n{buckets}\n ]\n}}'



if __name__ == "__main__":
    main()
