#!/usr/bin/python3
"""Runs allreduce_sim on simulated clusters (bench/smpi/README.md).

  simulate_scaling.py RECORD.json [RECORD.json ...] [--hosts 2 4 16 64 256] [--gbps 10]
                      [--topology flat fat-tree] [--steps 5] [--out results.jsonl] [--csv results.csv]
  simulate_scaling.py --closed-form 4194304 [--hosts 2 4 16 64 256 1024] [--triad 17.9e9]

Compiles allreduce_sim.cc with smpicxx (when the binary is older than the source), writes a
platform for each host count, link rate and topology (cluster_xml.py), runs the simulation under
`nice -n 10`, one at a time, and appends one JSON line per run (the program's line plus the
platform, the network settings and the wall time of the simulation) to --out, and a row to
--csv. --closed-form runs one all-reduce of that many bytes with no compute instead and prints
it against 2 log2(p) alpha + 2 (p-1)/p S beta (+ the reductions), alpha = 2 x --lat (a flat
switch: two links), beta = 1 / the link rate, with the factors at 1.

The SMPI network model is a parameter: --network-model (SimGrid's network/model, default SMPI),
--bw-factor and --lat-factor (smpi/bw-factor and smpi/lat-factor: "size:factor;size:factor",
the factor applying from that message size up; default "0:1", the links' nominal bandwidth and
latency, until a calibration against a measured ping-pong sets them: fit_factors.py), and
--crosstraffic (network/crosstraffic: 0, the default, leaves the reverse direction free of
TCP's acknowledgements). --cfg passes any other SimGrid option.
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster_xml as platform_xml  # noqa: E402  (bench/smpi/cluster_xml.py)

# What every run needs: replayed compute (smpi_execute at the platform's 1 Gflop/s), nothing
# injected into MPI calls (the progress engine calls MPI_Waitany and friends often), messages
# up to 64 KiB sent eagerly, without waiting for the receive (Open MPI's TCP transport: its
# eager limit is 64 KiB; SMPI's default waits), and one copy of the shared buffers per call
# site (memory that does not grow with the ranks).
BASE_CFG = [
    "smpi/simulate-computation:no", f"smpi/host-speed:{platform_xml.SPEED}", "smpi/cpu-threshold:0",
    "smpi/test:0", "smpi/iprobe:0", "smpi/grow-injected-times:no", "smpi/wtime:0",
    "smpi/send-is-detached-thresh:65536", "smpi/async-small-thresh:65536", "smpi/shared-malloc:local",
]


def seconds(text):
    m = re.fullmatch(r"([0-9.eE+-]+)\s*(s|ms|us|ns)?", text.strip())
    if not m:
        raise ValueError(f"a latency: {text}")
    return float(m[1]) * {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, None: 1}[m[2]]


def build(build_dir):
    source = os.path.join(HERE, "allreduce_sim.cc")
    binary = os.path.join(build_dir, "allreduce_sim")
    os.makedirs(build_dir, exist_ok=True)
    if not os.path.exists(binary) or os.path.getmtime(binary) < os.path.getmtime(source):
        subprocess.run(["nice", "-n", "10", "smpicxx", "-O2", "-std=c++17", "-Wall", "-Wextra", source, "-o", binary],
                       check=True)
    return binary


def network_cfg(a):
    cfg = BASE_CFG + [f"network/model:{a.network_model}", f"network/crosstraffic:{a.crosstraffic}"]
    if a.network_model == "SMPI":  # the factors belong to the SMPI model
        cfg += [f"smpi/bw-factor:{a.bw_factor}", f"smpi/lat-factor:{a.lat_factor}"]
    return cfg + list(a.cfg)


def simulate(binary, args, hosts, topology, gbps, a):
    """Runs one simulation; returns (its JSON line as a dict, wall seconds)."""
    where = os.path.join(a.build_dir, f"{topology}-{hosts}-{gbps:g}g")
    platform, hostfile = platform_xml.write(topology, hosts, where, gbps, a.lat, a.hosts_per_leaf, a.oversubscription)
    cmd = (["nice", "-n", "10", "smpirun", "-no-privatize", "-np", str(hosts), "-platform", platform, "-hostfile", hostfile]
           + [f"--cfg={c}" for c in network_cfg(a)] + ["--log=root.thres:warning", binary] + args)
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - start
    wall = time.monotonic() - start
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 or not lines:
        sys.stderr.write(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-2000:]}{p.stderr[-2000:]}\n")
        return None, wall
    return json.loads(lines[-1]), wall


def rabenseifner_s(p, nbytes, alpha, beta, triad):
    """(network seconds, reduction seconds) of libnbc's Rabenseifner all-reduce on p ranks: over
    the largest power of two p' <= p, 2 log2(p') alpha + 2 (p'-1)/p' S beta; beyond it the fold
    (half the buffer each way, a half back) and the result sent to the folded ranks, 3 alpha + 2 S beta.
    A reduction reads two operands and writes one: 3 bytes per byte reduced at the triad rate."""
    pof2 = 1 << (p.bit_length() - 1)
    network = 2 * math.log2(pof2) * alpha + 2 * (pof2 - 1) / pof2 * nbytes * beta
    reduced = (pof2 - 1) / pof2 * nbytes
    if p > pof2:
        network += 3 * alpha + 2 * nbytes * beta
        reduced += nbytes / 2
    return network, (3 * reduced / triad if triad else 0.0)


def closed_form(a, binary):
    alpha, rows = 2 * seconds(a.lat), []
    for hosts in a.hosts:
        for nbytes in a.closed_form:
            args = ["--closed-form", str(nbytes)] + (["--triad", str(a.triad)] if a.triad else [])
            r, wall = simulate(binary, args, hosts, "flat", a.gbps[0], a)
            if r is None:
                print(f"{hosts} hosts, {nbytes} bytes: no result (timed out after {wall:.0f} s or failed)")
                continue
            predicted, reduce = rabenseifner_s(hosts, nbytes, alpha, 8 / (a.gbps[0] * 1e9), a.triad)
            rows.append({**r, "closed_form_s": predicted + reduce, "reduce_closed_form_s": reduce,
                         "ratio": r["seconds"] / (predicted + reduce), "gbps": a.gbps[0], "lat": a.lat, "wall_s": wall})
            print(f"{hosts:5d} hosts {nbytes:>10d} B: simulated {r['seconds'] * 1e3:9.4f} ms, closed form "
                  f"{(predicted + reduce) * 1e3:9.4f} ms (reductions {reduce * 1e3:.4f}), ratio {rows[-1]['ratio']:.5f}, "
                  f"{r['algorithm']}, {wall:.1f} s of wall time", flush=True)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("records", nargs="*")
    p.add_argument("--hosts", type=int, nargs="+", default=[2, 4, 16, 64, 256])
    p.add_argument("--gbps", type=float, nargs="+", default=[10.0], help="link rates, Gbit/s (1 10 25 100)")
    p.add_argument("--topology", nargs="+", default=["flat"], choices=["flat", "fat-tree"])
    p.add_argument("--lat", default="5us", help="every link's latency (default 5us: 10 us host to host, flat)")
    p.add_argument("--hosts-per-leaf", type=int, default=16)
    p.add_argument("--oversubscription", type=int, default=1)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--progress-interval", type=float, help="seconds between progress calls (the record's by default)")
    p.add_argument("--triad", type=float, help="bytes/s for the reductions (the record's by default; 0: free)")
    p.add_argument("--jitter", type=float, help="relative standard deviation of the compute (the record's by default)")
    p.add_argument("--network-model", default="SMPI")
    p.add_argument("--bw-factor", default="0:1")
    p.add_argument("--lat-factor", default="0:1")
    p.add_argument("--crosstraffic", default="0")
    p.add_argument("--cfg", action="append", default=[], help="another SimGrid option, e.g. network/TCP-gamma:0")
    p.add_argument("--closed-form", type=int, nargs="+", metavar="BYTES")
    p.add_argument("--out", default="/tmp/strata-smpi/results.jsonl")
    p.add_argument("--csv")
    p.add_argument("--build-dir", default="/tmp/strata-smpi")
    p.add_argument("--timeout", type=float, default=1800, help="seconds one simulation may take")
    a = p.parse_args()
    if not a.records and not a.closed_form:
        p.error("a record, or --closed-form")
    binary = build(a.build_dir)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    settings = {"network_model": a.network_model, "bw_factor": a.bw_factor, "lat_factor": a.lat_factor,
                "crosstraffic": a.crosstraffic, "cfg": a.cfg}
    if a.closed_form:
        rows = closed_form(a, binary)
        with open(a.out, "a") as f:
            for r in rows:
                f.write(json.dumps({**r, **settings}) + "\n")
        return
    rows = []
    for record in a.records:
        args = [os.path.abspath(record), "--steps", str(a.steps), "--seed", str(a.seed)]
        args += ["--progress-interval", str(a.progress_interval)] if a.progress_interval is not None else []
        args += ["--triad", str(a.triad)] if a.triad is not None else []
        args += ["--jitter", str(a.jitter)] if a.jitter is not None else []
        for topology in a.topology:
            for gbps in a.gbps:
                for hosts in a.hosts:
                    r, wall = simulate(binary, args, hosts, topology, gbps, a)
                    if r is None:
                        print(f"{record}: {hosts} hosts {topology} {gbps:g} Gbit/s: no result after {wall:.0f} s")
                        continue
                    r = {**r, "record_file": os.path.basename(record), "topology": topology, "gbps": gbps,
                         "lat": a.lat, **settings, "wall_s": round(wall, 2)}
                    rows.append(r)
                    with open(a.out, "a") as f:
                        f.write(json.dumps(r) + "\n")
                    print(f"{os.path.basename(record)} {topology} {gbps:g} Gbit/s {hosts:5d} hosts: step "
                          f"{r['step_s_median'] * 1e3:9.2f} ms (max {r['step_s_max'] * 1e3:.2f}), waited "
                          f"{r['wait_s_median'] * 1e3:7.2f} ms (least {r['least_wait_s_median'] * 1e3:.3f}), "
                          f"efficiency {100 * r['efficiency']:6.2f} %, {wall:.1f} s of wall time", flush=True)
    if a.csv and rows:
        keys = list(dict.fromkeys(k for r in rows for k in r if not isinstance(r[k], list)))
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
