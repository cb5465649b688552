#!/usr/bin/python3
"""The reference CNN training step in PyTorch: the peer `strata bench-step` is compared with.

Same model as tests/common/reference_cnn_graph.h (Keras defaults): three-by-three convolutions
with bias, batch norm (eps 1e-3, Keras momentum 0.99 = torch momentum 0.01), ReLU, 2x2 max
pooling, Dense(128)-ReLU, Dropout(0.3), Dense(10); cross-entropy; SGD Nesterov momentum 0.9.
Synthetic inputs of the model's shape, like bench-step. Prints one JSON object.

Run with Debian's Python (python3-torch 1.13): /usr/bin/python3 bench/torch_reference_cnn.py
"""
import argparse
import json
import resource
import time

import torch
import torch.nn as nn


def model(channels_last):
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01), nn.ReLU()]
    m = nn.Sequential(*block(1, 32), *block(32, 32), nn.MaxPool2d(2),
                      *block(32, 64), *block(64, 64), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 10))
    return m.to(memory_format=torch.channels_last) if channels_last else m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--steps", type=int, default=0, help="run exactly this many steps instead (e.g. 468: one epoch)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net = model(a.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, nesterov=True)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(a.batch, 1, 28, 28)
    if a.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (a.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        if a.precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = net(x)
            loss = loss_fn(out.float(), y)
        else:
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    times = []
    cpu0 = time.process_time()
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        if a.steps and len(times) >= a.steps:
            break
        if not a.steps and time.perf_counter() - start >= a.seconds:
            break
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0  # all threads of the process: one with --threads 1
    times.sort()
    print(json.dumps({
        "framework": "pytorch " + torch.__version__,
        "precision": a.precision,
        "channels_last": a.channels_last,
        "batch": a.batch,
        "steps": len(times),
        "seconds": elapsed,
        "images_per_second": len(times) * a.batch / elapsed,
        "step_ms": times[len(times) // 2] * 1e3,
        "cpu_seconds": cpu,
        "images_per_cpu_second": len(times) * a.batch / cpu,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))


if __name__ == "__main__":
    main()
