#!/usr/bin/python3
"""SMPI's bandwidth and latency factors fitted to a measured ping-pong (pingpong.cc).

  fit_factors.py REAL.csv --gbps 10 --lat 5us [--links 2] [--breakpoints 0 1024 16384 65536 1048576]
                 [--check SIM.csv]

SimGrid's SMPI model sends s bytes in lat_factor(s) x L + s / (bw_factor(s) x B), L the route's
latency (--links x --lat: 2 links host to host on cluster_xml.py's flat switch), B the link's rate;
each factor is piecewise constant from a breakpoint up. In each piece this fits a + b s to the
measured one-way times (least squares on relative errors), so lat_factor = a / L and
bw_factor = 1 / (b B), and prints them as --lat-factor and --bw-factor for simulate_scaling.py.
--check compares a simulated ping-pong (run with those factors) against the measured one.
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from simulate_scaling import seconds  # noqa: E402


def read(path):
    with open(path) as f:
        return [(int(r["bytes"]), float(r["one_way_s"])) for r in csv.DictReader(f)]


def fit_piece(points):
    """(a, b) minimising sum ((a + b s - t) / t)^2, a >= 0 and b > 0."""
    if len(points) == 1:
        s, t = points[0]
        return 0.0, t / s
    # Normal equations of the weighted problem (weights 1 / t^2).
    w = [1 / t ** 2 for _, t in points]
    sw = sum(w)
    ss = sum(wi * s for wi, (s, _) in zip(w, points))
    sss = sum(wi * s * s for wi, (s, _) in zip(w, points))
    st = sum(wi * t for wi, (_, t) in zip(w, points))
    sst = sum(wi * s * t for wi, (s, t) in zip(w, points))
    det = sw * sss - ss * ss
    a, b = (st * sss - ss * sst) / det, (sw * sst - ss * st) / det
    if a < 0:  # all bandwidth: refit through the origin
        a, b = 0.0, sst / sss
    if b <= 0:  # all latency
        a, b = st / sw, 1e-30
    return a, b


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("real")
    p.add_argument("--gbps", type=float, required=True, help="the simulated links' rate")
    p.add_argument("--lat", required=True, help="the simulated links' latency, e.g. 5us")
    p.add_argument("--links", type=int, default=2, help="links on the route (flat switch: 2)")
    p.add_argument("--breakpoints", type=int, nargs="+", default=[0, 1024, 16384, 65536, 1048576])
    p.add_argument("--check", help="a simulated ping-pong's CSV, to compare")
    a = p.parse_args()
    points = read(a.real)
    route_lat, rate = a.links * seconds(a.lat), a.gbps * 1e9 / 8
    bps = sorted(set(a.breakpoints) | {0})
    lat_f, bw_f = [], []
    print("| from bytes | points | latency factor | bandwidth factor |\n|---|---|---|---|")
    for lo, hi in zip(bps, bps[1:] + [float("inf")]):
        piece = [(s, t) for s, t in points if lo <= s < hi]
        if not piece:
            continue
        a_s, b_s = fit_piece(piece)
        lat_f.append((lo, a_s / route_lat))
        bw_f.append((lo, 1 / (b_s * rate)))
        print(f"| {lo} | {len(piece)} | {lat_f[-1][1]:.4g} | {bw_f[-1][1]:.4g} |")
    fmt = lambda fs: ";".join(f"{lo}:{v:.6g}" for lo, v in reversed(fs))  # noqa: E731
    print(f"\n--lat-factor '{fmt(lat_f)}' --bw-factor '{fmt(bw_f)}'")

    def model(s):
        lf = [v for lo, v in lat_f if lo <= s][-1]
        bf = [v for lo, v in bw_f if lo <= s][-1]
        return lf * route_lat + s / (bf * rate)
    sim = dict(read(a.check)) if a.check else {}
    print("\n| bytes | measured us | fitted model us | " + ("simulated us | simulated / measured |" if sim else "") +
          "\n|---|---|---|" + ("---|---|" if sim else ""))
    for s, t in points:
        row = f"| {s} | {t * 1e6:.2f} | {model(s) * 1e6:.2f} |"
        if s in sim:
            row += f" {sim[s] * 1e6:.2f} | {sim[s] / t:.3f} |"
        print(row)


if __name__ == "__main__":
    main()
