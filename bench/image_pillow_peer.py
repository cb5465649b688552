#!/usr/bin/python3
"""The Pillow peer of bench/image_bench.cc: full-size JPEG decode of the same tile files,
one core, images per CPU second (time.process_time, as Google Benchmark's
items_per_second counts CPU time: on a shared machine wall time would charge Pillow for
other processes). Run with Debian's python3 (python3-pil, built on libjpeg-turbo).

usage: image_pillow_peer.py TILE_DIR SECONDS SIZE...   -> one JSON object on stdout
"""
import io
import json
import os
import sys
import time

from PIL import Image


def main():
    tile_dir, seconds, sizes = sys.argv[1], float(sys.argv[2]), [int(s) for s in sys.argv[3:]]
    result = {}
    for size in sizes:
        d = os.path.join(tile_dir, str(size))
        blobs = [open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d)) if f.endswith(".jpg")]
        runs = []
        for _ in range(3):  # median of three timed runs
            n, start = 0, time.process_time()
            while True:
                for b in blobs:
                    im = Image.open(io.BytesIO(b))
                    im.load()  # decodes into Pillow's RGB buffer
                n += len(blobs)
                elapsed = time.process_time() - start
                if elapsed >= seconds:
                    break
            runs.append(n / elapsed)
        result[str(size)] = sorted(runs)[1]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
