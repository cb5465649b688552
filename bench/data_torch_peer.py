#!/usr/bin/python3
"""PyTorch DataLoader peer for the flowers decode work (bench/data_bench.cc, FlowersRecipe).

Same work per image as Strata's recipe: decode a 512 px JPEG from bytes held in memory
(Pillow, with draft() so libjpeg scales the DCT down like Strata does), bilinear resize to
192x192, random left-right flip, random saturation in [0, 2], to float32 [0, 1] (HWC ->
CHW tensor), batches of 64, num_workers = cores, persistent workers, shuffle.

Run with Debian's python (it has torch and PIL):
  /usr/bin/python3 bench/data_torch_peer.py [--dir /tmp/strata_data_bench] [--seconds 10] [--workers N]
  GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 /usr/bin/python3 ...
jpegs.bin (u32 length + JPEG bytes, repeated) is written by data_bench on its first run.
"""
import argparse
import io
import os
import random
import struct
import time

import numpy as np
import torch
from PIL import Image, ImageEnhance
from torch.utils.data import DataLoader, Dataset


def load_jpegs(path):
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + 4 <= len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        out.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return out


class Flowers(Dataset):
    def __init__(self, jpegs, size, length):
        self.jpegs, self.size, self.length = jpegs, size, length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        img = Image.open(io.BytesIO(self.jpegs[i % len(self.jpegs)]))
        img.draft("RGB", (self.size, self.size))  # DCT-scaled decode, as Strata's
        img = img.convert("RGB").resize((self.size, self.size), Image.BILINEAR)
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        img = ImageEnhance.Color(img).enhance(random.uniform(0.0, 2.0))
        x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)
        return x, i % 104


def cpu_seconds(pids):
    """utime + stime of the given processes (the main one and the DataLoader workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.environ.get("STRATA_BENCH_DIR", "/tmp/strata_data_bench"))
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=192)
    a = ap.parse_args()
    torch.set_num_threads(1)
    jpegs = load_jpegs(os.path.join(a.dir, "jpegs.bin"))
    ds = Flowers(jpegs, a.size, 10**7)
    dl = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, persistent_workers=a.workers > 0,
                    drop_last=True, prefetch_factor=2 if a.workers > 0 else None)
    it = iter(dl)
    for _ in range(3):  # warm: workers started, first batches in flight
        next(it)
    pids = [os.getpid()] + [w.pid for w in getattr(it, "_workers", [])]
    cpu0 = cpu_seconds(pids)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < a.seconds:
        x, y = next(it)
        n += x.shape[0]
    dt = time.perf_counter() - t0
    cpu = cpu_seconds(pids) - cpu0
    print(f"pytorch DataLoader workers={a.workers} images/s {n / dt:.1f} cpu_us_per_image {cpu * 1e6 / n:.0f} "
          f"(GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', 'default')})")


if __name__ == "__main__":
    main()
