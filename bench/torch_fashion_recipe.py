#!/usr/bin/python3
"""`strata train`'s default job in PyTorch: the peer for wall time and time to a target accuracy.

The same model as models/reference-cnn.json with Keras's defaults (glorot-uniform kernels,
zero biases, bias-free convolutions, batch norm eps 1e-3 and Keras momentum 0.99 = torch
momentum 0.01), the same data (Debian's dataset-fashion-mnist, scaled to [0, 1]) and the same
recipe, each part a flag with the default job's value: SGD with Nesterov momentum 0.9, weight
decay 5e-4 (added to the gradient, as torch.optim.SGD and Strata do), learning rate --lr x
(global batch / 128), linear warm-up over --warmup-epochs, cosine decay to 0, global batch
--batch-per-replica x --replicas, the remainder of each epoch dropped, --label-smoothing, and
the augmentation of `strata train --pad-crop N --flip P` (a random 28x28 window of the image
padded by N zero pixels, mirrored with probability P; drawn per image per epoch, on the batch,
inside the timed loop as Strata's pipeline is inside its time). Test accuracy after every
epoch; the time to --target counts training only (the test passes left out, as `strata train`'s
train_seconds). One JSON object per epoch, then a summary.

Run with Debian's Python (python3-torch 1.13); at its best on this VM (OpenBLAS under torch:
libopenblas0-pthread, which scripts/deps.sh --bench installs):
  GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
    /usr/bin/python3 bench/torch_fashion_recipe.py --threads 2
"""
import argparse
import gzip
import json
import math
import time

import numpy as np
import torch
import torch.nn as nn

DATA = "/usr/share/datasets/fashion-mnist"


def idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load(split):
    x = idx(f"{DATA}/{split}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32) / 255.0
    y = idx(f"{DATA}/{split}-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def blas_in_use():
    """The BLAS library this process mapped (Debian's libblas.so.3 alternative: reference or OpenBLAS)."""
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1].rsplit("/", 1)[-1] for line in f if "blas" in line.lower()}
    return ", ".join(sorted(libs)) or "none"


def model():
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01), nn.ReLU()]
    m = nn.Sequential(*block(1, 32), *block(32, 32), nn.MaxPool2d(2),
                      *block(32, 64), *block(64, 64), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 10))
    for layer in m:
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(layer.weight)  # Keras's glorot_uniform
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--steps-per-epoch", type=int, default=0, help="0: the training set / global batch")
    ap.add_argument("--replicas", type=int, default=2, help="global batch = 128 x replicas, as strata train")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-per-replica", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05, help="for a global batch of 128 (scaled linearly)")
    ap.add_argument("--warmup-epochs", type=float, default=0.5)
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--pad-crop", type=int, default=0)
    ap.add_argument("--flip", type=float, default=0.0)
    ap.add_argument("--target", type=float, default=0.94, help="the test accuracy whose training time is reported")
    ap.add_argument("--bf16", action="store_true", help="torch.autocast(cpu, bfloat16) around the forward pass")
    ap.add_argument("--channels-last", action="store_true", help="NHWC memory format: PyTorch's faster CPU layout")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    x_train, y_train = load("train")
    x_test, y_test = load("t10k")
    batch = a.batch_per_replica * a.replicas
    steps = a.steps_per_epoch or len(x_train) // batch
    total = steps * a.epochs
    warmup = round(a.warmup_epochs * steps)
    peak = a.lr * batch / 128
    net = model()
    layout = torch.channels_last if a.channels_last else torch.contiguous_format
    net = net.to(memory_format=layout)
    opt = torch.optim.SGD(net.parameters(), lr=0.0, momentum=0.9, nesterov=True, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=a.label_smoothing)
    pad = a.pad_crop
    padded_train = nn.functional.pad(x_train, (pad, pad, pad, pad)) if pad else x_train
    ramp = torch.arange(28)

    def augment(idx_b):
        """strata's pad-crop-mirror (image/pad_crop.h) on a batch: out(y, x) reads the padded
        image at (y + dy + pad, x + dx + pad), or at column 27 - (x + dx) + pad mirrored."""
        if not pad and not a.flip:
            return x_train[idx_b]
        n = len(idx_b)
        dy = torch.randint(-pad, pad + 1, (n, 1))
        dx = torch.randint(-pad, pad + 1, (n, 1))
        mirror = torch.rand(n, 1) < a.flip
        rows = ramp[None, :] + dy + pad
        cols = torch.where(mirror, 27 - (ramp[None, :] + dx), ramp[None, :] + dx) + pad
        src = padded_train[idx_b, 0]
        out = src[torch.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
        return out[:, None]

    def lr_at(step):
        if step < warmup:
            return peak * step / warmup
        return peak * 0.5 * (1 + math.cos(math.pi * min(step - warmup, total - warmup) / max(1, total - warmup)))

    def test_accuracy():
        net.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(x_test), 1000):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                    out = net(x_test[i:i + 1000].contiguous(memory_format=layout))
                correct += (out.argmax(1) == y_test[i:i + 1000]).sum().item()
        net.train()
        return correct / len(x_test)

    history, time_to_target = [], None
    train_seconds = 0.0
    step = 0
    order = torch.randperm(len(x_train))
    cursor = 0
    start = time.perf_counter()
    for epoch in range(a.epochs):
        t0 = time.perf_counter()
        for _ in range(steps):
            if cursor + batch > len(order):
                order, cursor = torch.randperm(len(x_train)), 0
            idx_b = order[cursor:cursor + batch]
            cursor += batch
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                logits = net(augment(idx_b).contiguous(memory_format=layout))
            loss = loss_fn(logits.float(), y_train[idx_b])
            loss.backward()
            opt.step()
            step += 1
        train_seconds += time.perf_counter() - t0
        acc = test_accuracy()
        wall = time.perf_counter() - start  # with the test pass, as strata's seconds_at_epoch_end
        history.append({"epoch": epoch + 1, "train_seconds": train_seconds, "wall_seconds": wall,
                        "test_accuracy": acc, "loss": loss.item()})
        print(json.dumps(history[-1]), flush=True)
        if time_to_target is None and acc >= a.target:
            time_to_target = train_seconds
    print(json.dumps({"framework": "pytorch " + torch.__version__, "threads": a.threads, "bf16": a.bf16,
                      "channels_last": a.channels_last, "global_batch": batch,
                      "steps_per_epoch": steps, "epochs": a.epochs, "train_seconds": train_seconds,
                      "seconds_per_epoch": train_seconds / a.epochs, "target": a.target,
                      "time_to_target_seconds": time_to_target, "blas": blas_in_use(),
                      "final_test_accuracy": history[-1]["test_accuracy"], "history": history}))


if __name__ == "__main__":
    main()
