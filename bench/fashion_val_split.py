#!/usr/bin/python3
"""Splits Fashion-MNIST's 60,000 training records into a tuning set and a validation set, so that
a recipe is tuned without ever looking at the test split (issue 48's rule).

    bench/fashion_val_split.py TRAIN.tfrecord OUT_DIR [--val 10000] [--seed 0]

Writes OUT_DIR/tune.tfrecord (the other records, in their order) and OUT_DIR/val.tfrecord (the held
out ones, chosen by a seeded permutation). Records are copied byte for byte, CRCs included: the
framing (length, masked CRC of the length, data, masked CRC of the data) is read, not recomputed.
"""
import argparse
import os
import random
import struct


def records(path):
    with open(path, "rb") as f:
        while True:
            head = f.read(12)
            if not head:
                return
            if len(head) != 12:
                raise SystemExit(f"{path}: truncated record header at byte {f.tell() - len(head)}")
            (length,) = struct.unpack("<Q", head[:8])
            body = f.read(length + 4)
            if len(body) != length + 4:
                raise SystemExit(f"{path}: truncated record at byte {f.tell() - len(body) - 12}")
            yield head + body


def write(path, items):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for r in items:
            f.write(r)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("out_dir")
    ap.add_argument("--val", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    all_records = list(records(a.train))
    held = set(random.Random(a.seed).sample(range(len(all_records)), a.val))
    os.makedirs(a.out_dir, exist_ok=True)
    write(os.path.join(a.out_dir, "tune.tfrecord"), [r for i, r in enumerate(all_records) if i not in held])
    write(os.path.join(a.out_dir, "val.tfrecord"), [r for i, r in enumerate(all_records) if i in held])
    print(f"{len(all_records) - a.val} tuning and {a.val} validation records in {a.out_dir}")


if __name__ == "__main__":
    main()
