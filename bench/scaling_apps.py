#!/usr/bin/python3
"""The applications scaling_model.py projects (docs/scaling.md): each model's measured
one-host step (BENCHMARKS.md's rows, or the runs' own) and the profile of when its gradient
bytes are final during the backward pass, from Keras's layer list."""
import dataclasses
import math
import sys

import numpy as np

from scaling_fit import BACKWARD_END, BUCKET_BYTES

# "<model> | train | f32": `strata bench-step --batch 32 --replicas 2` on 2 cores of a family-25
# (Zen 4) EPYC VM, so half the row per core. Measured runs replace them for their models.
#
# Gradient-ready profiles: x, the fraction of the gradient bytes final (in backward order), is
# reached at fraction t of the backward pass. From Keras's layer list (the same builds), a
# layer's backward time taken proportional to its multiply-adds plus 30 per output element (the
# memory-bound layers: ~18 GB/s of triad against ~60 G multiply-adds/s per core).
PROFILE_X = (0, .1, .2, .3, .4, .5, .6, .7, .8, .85, .9, .95, .97, .98, .99, .995, 1)


@dataclasses.dataclass
class App:
    name: str
    trainable: int
    nontrainable: int
    per_core_rate: float             # training images/s per core
    batch: int                       # per replica
    rate_source: str
    profile_t: tuple = ()            # Keras apps: fraction of the compute step at which PROFILE_X are final
    measured: tuple = ()             # measured apps: (f32 bytes, ready fraction of the compute step) a bucket
    backward_end: float = BACKWARD_END  # fraction of the compute step

    def buckets(self, cap):
        """(f32 bytes, ready fraction of the compute step) per bucket of at most `cap` bytes."""
        if self.measured:
            return self.measured_buckets(cap)
        # Strata cuts the block in backward order, a bucket growing over the next gradient while
        # it fits; a bucket is ready when its last gradient is.
        total = 4 * self.trainable
        ends = np.minimum(np.arange(1, math.ceil(total / cap) + 1) * cap, total)
        sizes = np.diff(np.concatenate([[0], ends]))
        return sizes.astype(float), np.interp(ends / total, PROFILE_X, self.profile_t)

    def measured_buckets(self, cap):
        """The runs' buckets under a larger cap. Two neighbours too big to share a 4 MiB bucket
        were split by the cap and merge while they fit; the others were split because their
        gradients are not next to each other in the block, and stay apart. (A smaller cap than
        the runs' is not modelled: their buckets are kept.)"""
        sizes, ready = [], []
        for i, (size, t) in enumerate(self.measured):
            split_by_cap = i > 0 and self.measured[i - 1][0] + size > BUCKET_BYTES
            if split_by_cap and sizes[-1] + size <= cap:
                sizes[-1], ready[-1] = sizes[-1] + size, t
            else:
                sizes.append(size)
                ready.append(t)
        return np.array(sizes, float), np.array(ready)


def keras_profile(t_backward):
    """Backward-pass fractions to compute-step fractions: the forward pass takes the first third
    of the compute before the backward pass (about twice the forward's work)."""
    forward = BACKWARD_END / 3
    return tuple(forward + t * (BACKWARD_END - forward) for t in t_backward)


BENCH_ROW = ("BENCHMARKS.md, Keras applications against torchvision, after the residual-sum fusion: "
             "'{} | train | f32 | {}' img/s on 2 cores (bench-step 32 x 2), half per core")
KERAS_APPS = {
    "resnet50": App("resnet50", 25_583_592, 53_120, 10.3 / 2, 32, BENCH_ROW.format("ResNet50", 10.3), keras_profile(
        (0, .013, .037, .085, .096, .119, .154, .211, .328, .379, .440, .529, .644, .687, .735, .863, 1))),
    "mobilenet_v2": App("mobilenet_v2", 3_504_872, 34_112, 49.2 / 2, 32, BENCH_ROW.format("MobileNetV2", 49.2),
                        keras_profile((.001, .001, .001, .001, .030, .048, .067, .094, .122, .168, .255, .320, .357,
                                       .373, .451, .564, 1))),
    "efficientnet_b0": App("efficientnet_b0", 5_288_548, 42_023, 35.4 / 2, 32,
                           BENCH_ROW.format("EfficientNetB0", 35.4), keras_profile(
        (.001, .001, .001, .026, .045, .079, .111, .146, .175, .221, .292, .375, .411, .435, .484, .543, 1))),
    "xception": App("xception", 22_855_952, 54_528, 6.3 / 2, 32, BENCH_ROW.format("Xception", 6.3), keras_profile(
        (0, .030, .030, .074, .124, .209, .316, .402, .487, .530, .573, .615, .699, .735, .744, .822, 1))),
    "densenet121": App("densenet121", 7_978_856, 83_648, 12.4 / 2, 32, BENCH_ROW.format("DenseNet121", 12.4),
                       keras_profile((0, 0, .012, .026, .065, .089, .149, .207, .261, .341, .450, .552, .728, .791,
                                      .886, .937, 1))),
}
APP_ORDER = ("reference-cnn", "resnet50", "mobilenet_v2", "efficientnet_b0", "xception", "densenet121")


def measured_app(runs, keras):
    """The model as its runs show it: the one-host per-core rate, the batch, and the buckets of its
    least disturbed run (f32, fewest hosts, fastest link), ready times as fractions of its compute."""
    r = min(runs, key=lambda r: (r.wire != "f32", r.hosts, -r.nominal_bps))
    own_compute = r.step_s - r.wait_s
    grads = r.grad_f32_bytes
    f32_bytes = r.wire_bytes * grads / r.wire_bytes.sum()
    rate = r.replicas * r.batch / r.one_host_step_s
    source = f"measured: one host, {r.replicas} x {r.batch}, {r.one_host_step_s * 1e3:.1f} ms a step"
    trainable, nontrainable = round(grads / 4), round(r.stats_bytes / 4)
    if keras:
        if abs(trainable - keras.trainable) > 0.01 * keras.trainable:
            print(f"note: {r.model}'s runs all-reduce {grads:,.0f} gradient bytes, Keras has "
                  f"{4 * keras.trainable:,} (kept Keras's)", file=sys.stderr)
        trainable, nontrainable = keras.trainable, keras.nontrainable
    return App(r.model, trainable, nontrainable, rate, r.batch, source,
               measured=tuple(zip(f32_bytes, r.ready_s / own_compute)), backward_end=r.backward_end_s / own_compute)


def applications(runs, batch_override):
    """The projected models: measured where there are runs, else Keras's counts and the table's rates."""
    apps = {}
    for name in APP_ORDER:
        mine = [r for r in runs if r.model == name]
        if mine:
            apps[name] = measured_app(mine, KERAS_APPS.get(name))
        elif name in KERAS_APPS:
            apps[name] = KERAS_APPS[name]
        else:
            print(f"note: no runs of {name}: left out of the projection", file=sys.stderr)
            continue
        if name in batch_override:
            apps[name] = dataclasses.replace(apps[name], batch=batch_override[name])
    return apps


# --- Projection -----------------------------------------------------------------------------
