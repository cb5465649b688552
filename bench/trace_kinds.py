#!/usr/bin/python3
"""Where a traced Strata step spends its time, per kernel kind, against each kind's limit.

    STRATA_TRACE=1 strata bench-step ... --warmup 1 --steps 1 2> trace.txt
    /usr/bin/python3 bench/trace_kinds.py --replicas 2 trace.txt
    /usr/bin/python3 bench/trace_kinds.py --triad-only

Reads the `strata_trace,OP,NAME,IMPL,SHAPES,T us` lines (backend/cpu: one per kernel run),
keeps the second half (the measured step of every replica; the first half is the warm-up step)
and sums time per kind: the op, with convolutions split into 1x1, depthwise (Strata's [k,k,1,C]
kernel), stem (3 input channels) and kxk. Memory-bound kinds are set against
their roofline: the bytes each kernel must move at least (every tensor in its shapes read or
written once) over the STREAM triad bandwidth measured here (torch a = b + s*c on 2^25 floats,
one thread: one replica's core; best of 5), and the matrix kinds against the FLOPs the shapes
imply at the calibrated peak when --peak-gflops is given (bench-step's peak_gflops_per_core; one
replica per core): a convolution's FLOPs are 2 x (elements of its output-side tensor: the
forward's result, the data gradient's dy, the weight gradient's dy) x kh x kw x (input channels
per group).
"""
import argparse
import collections
import re
import sys
import time

SIZES = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "i64": 8, "u8": 1, "s8": 1, "i8": 1}
TENSOR = re.compile(r"(f32|bf16|f16|i32|i64|u8|s8|i8)\[([0-9, ]*)\]")


def triad_gbs(threads):
    import torch
    torch.set_num_threads(threads)
    n = 1 << 25
    a, b, c = torch.empty(n), torch.rand(n), torch.rand(n)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        best = min(best, time.perf_counter() - t0)
    return 3 * 4 * n / best / 1e9


def tensors(shapes):
    out = []
    for dtype, dims in TENSOR.findall(shapes):
        d = [int(x) for x in dims.replace(" ", "").split(",") if x]
        n = 1
        for x in d:
            n *= x
        out.append((dtype, d, n * SIZES[dtype]))
    return out


def kind(op, name, shapes):
    if not op.startswith("conv"):
        return op
    ts = tensors(shapes)
    weights = [d for _, d, _ in ts if len(d) == 4]
    # The kernel is the 4-D tensor whose leading dims are the window (HWIO); activations are NHWC.
    batch = ts[0][1][0] if ts and ts[0][1] else -1
    window = [d for d in weights if d[0] <= 7 and d[0] == d[1]]
    k = next((d for d in window if d[0] != batch), window[0] if window else None)
    if "depthwise" in name.lower() or "dwconv" in name.lower() or (k and k[2] == 1 and k[3] > 1):
        return op + " depthwise"
    if k and k[0] == 1:
        return op + " 1x1"
    if k and k[2] == 3:
        return op + " stem"
    return op + " %dx%d" % (k[0], k[1]) if k else op


def conv_flops(op, shapes):
    """2 x output-side elements x kh x kw x input channels per group, from the trace's shapes."""
    ts = tensors(shapes)
    if len(ts) < 3:
        return 0
    batch = ts[0][1][0] if ts[0][1] else -1
    window = [d for _, d, _ in ts if len(d) == 4 and d[0] <= 7 and d[0] == d[1] and d[0] != batch]
    if not window:
        return 0
    k = window[0]
    if op == "conv_fwd":
        out = ts[-1]
    elif op == "conv_bwd_data":
        out = ts[0]
    else:  # conv_bwd_weights: x, dy -> kernel
        out = ts[1]
    return 2 * (out[2] // SIZES[out[0]]) * k[0] * k[1] * k[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="?")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--triad-only", action="store_true")
    ap.add_argument("--peak-gflops", type=float, default=0,
                    help="peak GFLOP/s of one core (bench-step's peak_gflops_per_core): convolutions' %% of peak")
    a = ap.parse_args()
    bw1 = triad_gbs(1)
    if a.triad_only or not a.trace:
        print("STREAM triad (torch, 2^25 f32): %.1f GB/s one thread, %.1f GB/s two threads" % (bw1, triad_gbs(2)))
        return
    lines = [l.rstrip("\n") for l in open(a.trace) if l.startswith("strata_trace,")]
    if not lines:
        sys.exit("%s: no strata_trace lines (STRATA_TRACE=1?)" % a.trace)
    lines = lines[len(lines) // 2:]
    total = collections.Counter()
    count = collections.Counter()
    bytes_moved = collections.Counter()
    flops = collections.Counter()
    for l in lines:
        head, us = l.rsplit(",", 1)
        parts = head.split(",", 4)
        op, name, impl, shapes = parts[1], parts[2], parts[3], parts[4]
        t = float(us.replace("us", "").strip())
        k = kind(op, name, shapes)
        total[k] += t
        count[k] += 1
        bytes_moved[k] += sum(b for _, _, b in tensors(shapes))
        if op.startswith("conv"):
            flops[k] += conv_flops(op, shapes)
    step = sum(total.values()) / a.replicas
    peak = ["", ""]
    if a.peak_gflops > 0:
        peak = [" GFLOP/s | %% of peak (%.0f GFLOP/s) |" % a.peak_gflops, "---|---|"]
    print("| kernel kind | kernels | ms per replica step | share | GB moved (at least) | GB/s achieved | "
          "roofline (triad %.1f GB/s) |%s" % (bw1, peak[0]))
    print("|---|---|---|---|---|---|---|%s" % peak[1])
    for k, t in total.most_common():
        ms = t / a.replicas / 1e3
        gb = bytes_moved[k] / a.replicas / 1e9
        gbs = gb / (ms / 1e3) if ms > 0 else 0
        memory_bound = "depthwise" in k or "1x1" in k or not k.startswith(("conv", "matmul", "inner"))
        roof = "%.0f %% of triad" % (100 * gbs / bw1) if memory_bound and gb > 0 else ""
        compute = ""
        if a.peak_gflops > 0:
            gflops = flops[k] / a.replicas / 1e9 / (ms / 1e3) if ms > 0 and flops[k] else 0
            compute = " %s | %s |" % (("%.1f" % gflops, "%.1f %%" % (100 * gflops / a.peak_gflops)) if gflops else ("", ""))
        print("| %s | %d | %.1f | %.1f %% | %.3f | %.1f | %s |%s" % (k, count[k] // a.replicas, ms, 100 * ms / (step / 1e3),
                                                               gb, gbs, roof, compute))
    print("| total | %d | %.1f | | | | |%s" % (len(lines) // a.replicas, step / 1e3, " | |" if a.peak_gflops > 0 else ""))


if __name__ == "__main__":
    main()
