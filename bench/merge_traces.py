#!/usr/bin/python3
"""Merges the Chrome traces of a multi-worker job's workers into one file that Perfetto opens,
on one time line: the communication timeline (each worker's gradient buckets, ready, started,
finished, beside its replicas' steps), as Horovod's timeline shows.

    bench/merge_traces.py t.json t.worker1.json [...] -o merged.json

Each worker writes its own trace (`strata train --trace t.json` under mpirun: the chief t.json,
worker w t.worker<w>.json), with timestamps in microseconds since its own monitor started. The
workers' clocks are not one clock across hosts (a steady clock counts from its host's boot), so
each trace records two readings of its own clock (the "strata_clock" metadata event): at its
start (ts 0) and at a moment every worker shared, the exit of a barrier before training. A
worker's events are shifted by (its start - its sync) - (the chief's start - the chief's sync):
the barrier's exit becomes the same instant in every trace, whatever each host's clock reads.
The alignment is as good as the barrier's exit is simultaneous (its last message's latency:
tens of microseconds on a LAN).

Each worker's tracks become a process group of its own ("worker W: strata replicas", ...), and
its all-reduce buckets' async ids are made unique per worker. The output is written whole to a
temporary file and renamed.
"""
import argparse
import json
import os
import sys
import tempfile


def load(path):
    """A trace as Strata writes it; one cut short (a crash: no closing bracket) still loads."""
    text = open(path, encoding="utf-8").read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return json.loads(text.rstrip().rstrip(",") + "]}")
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}: not a Chrome trace Strata wrote ({e})")


def clock(path, trace):
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "M" and e.get("name") == "strata_clock":
            a = e.get("args", {})
            try:
                return int(a["worker"]), int(a["trace_start_ns"]), int(a["clock_sync_ns"])
            except (KeyError, TypeError, ValueError):
                raise SystemExit(f"{path}: its strata_clock event lacks worker, trace_start_ns or clock_sync_ns: {a}")
    raise SystemExit(f"{path}: no strata_clock event (a trace of a one-worker run, or written before the "
                     "communication timeline existed): nothing to align it by")


def merge(paths):
    traces = [(p, load(p)) for p in paths]
    clocks = {}
    for p, t in traces:
        w, start, sync = clock(p, t)
        if w in clocks:
            raise SystemExit(f"{p}: worker {w} given twice (also {clocks[w][0]})")
        clocks[w] = (p, start, sync)
    if 0 not in clocks:
        raise SystemExit("the chief's trace (worker 0) is not among the files: it is the time line the others join")
    ref = clocks[0][1] - clocks[0][2]
    events, shifts = [], {}
    for p, t in traces:
        w, start, sync = clock(p, t)
        shift_us = ((start - sync) - ref) * 1e-3
        shifts[w] = shift_us
        for e in t.get("traceEvents", []):
            e = dict(e)
            if "pid" in e:
                e["pid"] = w * 10 + int(e["pid"])
            if "ts" in e:
                e["ts"] = e["ts"] + shift_us
            if e.get("ph") == "M" and e.get("name") == "process_name":
                e["args"] = {"name": f"worker {w}: {e['args']['name']}"}
            if e.get("ph") == "M" and e.get("name") == "process_sort_index":
                e["args"] = {"sort_index": w * 10 + int(e["args"].get("sort_index", 0))}
            if e.get("ph") in ("b", "e", "n") and "id" in e:
                e["id"] = f"w{w}-{e['id']}"
            events.append(e)
    other = {"merged_from": {str(w): clocks[w][0] for w in sorted(clocks)},
             "shift_us": {str(w): shifts[w] for w in sorted(shifts)}}
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", help="every worker's trace (the chief's among them)")
    ap.add_argument("-o", "--out", required=True, help="the merged trace")
    a = ap.parse_args()
    merged = merge(a.traces)
    out_dir = os.path.dirname(os.path.abspath(a.out))
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".merge_traces.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(merged, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, a.out)
    except BaseException:
        os.unlink(tmp)
        raise
    shifts = ", ".join(f"worker {w} {s / 1e3:+.3f} ms" for w, s in merged["otherData"]["shift_us"].items())
    print(f"{a.out}: {len(a.traces)} workers, {len(merged['traceEvents'])} events; shifted by {shifts}")


if __name__ == "__main__":
    sys.exit(main())
