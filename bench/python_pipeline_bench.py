#!/usr/bin/python3
"""The flowers input pipeline driven from Python (strata.data) against the same pipeline in C++
(`strata bench-input`) and PyTorch's DataLoader (bench/data_torch_peer.py), in one run.

The Python side builds bench-input's pipeline stage by stage through the public API (no C++
shortcut): list_files(shuffle) -> TFRecordDataset(num_parallel_reads=AUTOTUNE) ->
deterministic=False -> repeat -> shuffle(2048) -> parse_example -> decode_image (resize 192,
flip, saturation [0, 2]) -> batch(64, drop_remainder) -> prefetch(AUTOTUNE), and iterates it
in Python (every batch handed to Python as numpy arrays). The two built-in maps run fused as one
stage written into the batch rows, as the C++ recipe (datasets/flowers.cc) does.

  PYTHONPATH=build/python /usr/bin/python3 bench/python_pipeline_bench.py --build build \
      [--data '/tmp/strata_data_bench/flowers-*.tfrec'] [--seconds 10] [--rounds 2] [--no-torch]

The records are the ones build/bench/data_bench writes on its first run (512 px JPEGs; jpegs.bin
beside them is the PyTorch peer's input). Rounds alternate C++ / Python / PyTorch so that a
change in the machine's load hits all three; the best round of each and the median ratio of
back-to-back rounds are reported.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def python_pipeline(strata, glob, seed, batch, size):
    D = strata.data
    files = D.Dataset.list_files(glob, shuffle=True, seed=seed)
    opts = D.Options()
    opts.deterministic = False
    spec = {"image": strata.io.FixedLenFeature([], "string"), "class": strata.io.FixedLenFeature([], "int64")}
    return (D.TFRecordDataset(files, num_parallel_reads=D.AUTOTUNE)
            .with_options(opts)
            .repeat()
            .shuffle(2048, seed=seed)
            .map(strata.io.parse_example(spec), num_parallel_calls=D.AUTOTUNE)
            .map(D.experimental.decode_image(image_key="image", label_key="class", size=size,
                                             random_flip_left_right=0.5, saturation=(0.0, 2.0), seed=seed),
                 num_parallel_calls=D.AUTOTUNE)
            .batch(batch, drop_remainder=True)
            .prefetch(D.AUTOTUNE))


def run_python(strata, a):
    it = iter(python_pipeline(strata, a.data, 1, a.batch, a.size))
    images, labels = next(it)  # opening files and filling the shuffle buffer: not measured
    assert images.shape == (a.batch, a.size, a.size, 3), images.shape
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < a.seconds:
        images, labels = next(it)
        n += images.shape[0]
    return n / (time.perf_counter() - t0)


def python_map_cost(strata, n=200_000):
    """Microseconds a Python map function adds per element (identity function, batch of 1000,
    iterated from Python), against the same pipeline without it: the GIL round trip, arrays
    in and out."""
    D = strata.data

    def seconds(ds):
        t0 = time.perf_counter()
        for _ in ds:
            pass
        return time.perf_counter() - t0
    base = min(seconds(D.Dataset.range(n).batch(1000)) for _ in range(2))
    with_map = {p: min(seconds(D.Dataset.range(n).map(lambda v: v, num_parallel_calls=p).batch(1000))
                       for _ in range(2)) for p in (None, D.AUTOTUNE)}
    return {("1" if p is None else "AUTOTUNE"): (t - base) / n * 1e6 for p, t in with_map.items()}


def run_cpp(a):
    out = subprocess.run([a.cli, "bench-input", "--data", a.data, "--seconds", str(a.seconds), "--batch",
                          str(a.batch), "--image-size", str(a.size), "--seed", "1", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["images_per_second"]


def run_torch(a):
    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data_torch_peer.py")
    out = subprocess.run(["/usr/bin/python3", peer, "--dir", os.path.dirname(a.data), "--seconds", str(a.seconds),
                          "--batch", str(a.batch), "--size", str(a.size)],
                         check=True, capture_output=True, text=True).stdout
    return float(out.split("images/s")[1].split()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--data", default="/tmp/strata_data_bench/flowers-*.tfrec")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=192)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--map-cost-only", action="store_true", help="only the Python map function's cost")
    a = ap.parse_args()
    import importlib.util
    if not a.no_torch and importlib.util.find_spec("torch") is None:
        print("no torch for this python: PyTorch peer skipped (scripts/deps.sh --bench)", file=sys.stderr)
        a.no_torch = True
    a.cli = os.path.join(a.build, "tools", "strata", "strata")
    if not os.path.exists(a.cli):
        a.cli = os.path.join(a.build, "strata")
    sys.path.insert(0, os.path.join(a.build, "python"))
    import strata  # noqa: E402  (the build's module)
    cost = python_map_cost(strata)
    print("Python map function (identity) cost per element: " +
          ", ".join(f"num_parallel_calls={k}: {v:.2f} us" for k, v in cost.items()))
    if a.map_cost_only:
        return
    import glob as globmod
    if not globmod.glob(a.data):
        sys.exit(f"no records match {a.data}: run {a.build}/bench/data_bench once (it writes them)")
    runs = {"cpp": [], "python": [], "torch": []}
    for r in range(a.rounds):
        runs["cpp"].append(run_cpp(a))
        runs["python"].append(run_python(strata, a))
        if not a.no_torch:
            runs["torch"].append(run_torch(a))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in runs.items() if v), file=sys.stderr)
    best = {k: max(v) if v else 0.0 for k, v in runs.items()}
    # The machine's load moves between rounds: the ratio of runs made back to back is steadier.
    ratios = sorted(p / c for p, c in zip(runs["python"], runs["cpp"]))
    median = ratios[len(ratios) // 2] if len(ratios) % 2 else (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
    load = os.getloadavg()
    print(f"flowers pipeline {a.size}px batch {a.batch}, {a.seconds:.0f} s x {a.rounds} rounds, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"strata bench-input (C++)       images/s best {best['cpp']:.1f}  rounds " +
          " ".join(f"{v:.1f}" for v in runs["cpp"]))
    print(f"strata.data from Python        images/s best {best['python']:.1f}  rounds " +
          " ".join(f"{v:.1f}" for v in runs["python"]))
    print(f"Python / C++: best {best['python'] / best['cpp']:.3f}, median of back-to-back rounds {median:.3f} "
          f"(each: {' '.join(f'{x:.3f}' for x in ratios)})")
    if not a.no_torch:
        print(f"PyTorch DataLoader (peer)      images/s best {best['torch']:.1f}  rounds " +
              " ".join(f"{v:.1f}" for v in runs["torch"]))
        print(f"strata.data from Python / PyTorch: best {best['python'] / best['torch']:.2f}x")

if __name__ == "__main__":
    main()
