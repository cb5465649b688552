#!/usr/bin/python3
"""An independent PyTorch forward of Keras's ResNet50, MobileNetV2, EfficientNetB0, Xception and
DenseNet121, and one training step (loss, gradients, moving statistics) of any of them.

The oracle of tests/keras/applications_oracle_test.cc. It is written from Keras's model
definitions (keras_applications/resnet_common.py, mobilenet_v2.py, xception.py and
densenet.py, tf.keras's efficientnet.py), not from Strata's code: it reads only the weights, by
their Keras names, from the checkpoint Strata's Model::save_weights wrote
(docs/formats/checkpoint.md), and computes in
float64, NCHW, with torch.nn.functional. The Keras semantics it keeps:
  - kernels HWIO -> OIHW, depthwise [kh, kw, C, m] -> [C*m, 1, kh, kw], Dense [in, out] -> [out, in];
  - padding 'same' as TensorFlow pads (the odd pixel at the end), ZeroPadding2D's correct_pad
    before stride-2 convolutions (asymmetric on an even side), ResNet's stride on the 1x1
    convolution (Keras's v1, not torchvision's v1.5);
  - batch-norm epsilon per model (1.001e-5 ResNet50 and DenseNet121, 1e-3 the others),
    ReLU6, swish, squeeze-and-excitation (Multiply), EfficientNet's Rescaling(1/255) and
    Normalization stem ((x - mean) / max(sqrt(variance), 1e-7)); dropout is the identity;
  - Xception: Keras's default batch-norm epsilon (1e-3), SeparableConv2D as depthwise then
    pointwise, 'same' max pools (TensorFlow's windows; padding never the max), Keras's
    automatic names for the four unnamed residual convolutions and batch norms (conv2d,
    conv2d_1, ..., batch_normalization, batch_normalization_1, ...);
  - DenseNet121: epsilon 1.001e-5, Concatenate([x, x1]) (the block's input first), 'valid'
    2x2 average pools in the transitions (an odd side floors), layer names with a slash
    ("conv1/conv").

    applications_oracle.py MODEL DIR [--keras-h5 | --train]
    applications_oracle.py --check-saved DIR
DIR holds init.ckpt (the initialised weights) and input.f32 (+ input.json: its shape [N, H, W, C]).
The oracle makes the weights nontrivial: every batch norm's moving statistics come from its own
input on this batch (mean: the channel's mean x U(0.5, 1); variance: the layer's mean variance
x 4 x U(0.5, 2) per channel), gamma ~ U(0.5, 1.5) but U(4, 8) in one channel of
20 (so ReLU6 clips; not in DenseNet121), beta ~ N(0, 0.3), every bias ~ N(0, 0.3), so
no layer is an identity and the signal neither dies nor explodes through the depth. It checks
the weights are well conditioned (torch's own float32 forward within a quarter of the tolerance
of float64: fully normalising batch norms made the network chaotic, 5e-5) and writes
DIR/weights.f32 (the checkpoint's parameter record with those values, same offsets) and
DIR/expected.f32 (the float64 forward, as f32).

It proves it can tell: each mutation below (a Keras detail done the other way) must move the
output by more than MUTATION_FACTOR x the test's tolerance, else it exits 1 (the weights would
be too weak to catch that mistake). It prints one JSON line.

--keras-h5 (tests/keras/applications_oracle_test.cc's KerasH5Weights... tests): the weights are
made here, not taken from Strata: every kernel too is drawn anew (Keras's glorot_uniform, from
Keras's shapes), and they go out as Keras's legacy weight file (model.save_weights('w.h5'),
written with h5py from Keras's layout, docs/formats/h5.md): DIR/keras.h5 with Keras's layer
names, in Keras's model.layers order (the forward's order of first use; for MobileNetV2 the
graph is a chain), depthwise kernels as Keras's [k, k, C, multiplier]; DIR/keras_renamed.h5, the
same weights under other layer and weight names, which only Keras's positional pairing
(by_name=False) can load. weights.f32 is not written then.
--train (the TrainStep... tests): one training step instead of the inference forward, with
torch autograd in float64 (main_train says what it writes, and how the weights are made well
conditioned for training mode): batch norm on the batch's mean and biased variance, the moving
averages updated with the unbiased one (TF's fused kernel) at keras_applications' momentum,
the sparse categorical cross-entropy averaged over the batch. Its self-check: torch's float32
step within a quarter of each tolerance, and each of TRAIN_MUTATIONS / MOVING_MUTATIONS moving
what the test compares by more than MUTATION_FACTOR x its tolerance.
--check-saved DIR: reads DIR/strata.h5 (Strata's SaveKerasWeights of the model loaded from
DIR/keras.h5) back with h5py and checks it holds Keras's legacy layout with keras.h5's layers,
weight names, shapes and values; exits 1 naming the first difference.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

from applications_oracle_models import MODELS, Forward  # the models, beside this file

try:
    import h5py  # only for --keras-h5 and --check-saved
except ImportError:
    h5py = None

TOLERANCE = 1e-4        # the test's: max |strata - torch| <= TOLERANCE * max |torch|
MUTATION_FACTOR = 10    # a mutation must move the output by 10x that


# ---- the checkpoint, read from docs/formats/checkpoint.md ----------------------------------
def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def masked_crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def read_checkpoint(path):
    """Returns (header dict, params f32 array). Checks every length's CRC and the header's
    data CRC; the parameter record's data CRC (~100 MB) is left to Strata's reader, which
    checks it when it loads: a pure-Python CRC over it would take minutes."""
    blob = open(path, "rb").read()
    records, pos = [], 0
    while pos < len(blob):
        (length,) = struct.unpack_from("<Q", blob, pos)
        (length_crc,) = struct.unpack_from("<I", blob, pos + 8)
        if masked_crc32c(blob[pos:pos + 8]) != length_crc:
            sys.exit("%s: length CRC mismatch at byte %d" % (path, pos))
        start = pos + 12
        records.append((start, length))
        pos = start + length + 4
    if len(records) != 4:
        sys.exit("%s: %d records, the format has 4" % (path, len(records)))
    hs, hl = records[0]
    header_bytes = blob[hs:hs + hl]
    (header_crc,) = struct.unpack_from("<I", blob, hs + hl)
    if masked_crc32c(header_bytes) != header_crc:
        sys.exit("%s: header CRC mismatch" % path)
    header = json.loads(header_bytes)
    if header.get("format") != "strata-checkpoint":
        sys.exit("%s: not a strata checkpoint" % path)
    ps, pl = records[1]
    if pl != 4 * header["params"]:
        sys.exit("%s: parameter record of %d bytes for %d params" % (path, pl, header["params"]))
    params = np.frombuffer(blob, dtype="<f4", count=header["params"], offset=ps).copy()
    return header, params


class Weights:
    """The variables by Keras name ("conv1_conv/kernel"), as torch tensors (float64 unless told)."""

    def __init__(self, header, params, dtype=torch.float64, grad=False):
        self.header, self.params, self.dtype = header, params, dtype
        self.grad = grad        # the trainable variables require a gradient (--train)
        self.vars = {v["name"]: v for v in header["variables"]}
        self.cache = {}
        self.used = set()
        self.layer_order = []   # the layers, in the forward's order of first use
        self.keras_shapes = {}  # variable -> Keras's shape where Strata's differs (depthwise)

    def has(self, name):
        return name in self.vars

    def numpy(self, name):
        v = self.vars.get(name)
        if v is None:
            sys.exit("no variable %r in the checkpoint (Keras's name); it has e.g. %s" % (
                name, sorted(self.vars)[:8]))
        return self.params[v["offset"]:v["offset"] + v["size"]].reshape(v["shape"])

    def set(self, name, values):
        v = self.vars[name]
        self.params[v["offset"]:v["offset"] + v["size"]] = np.asarray(values, np.float32).reshape(-1)
        self.cache.pop(name, None)

    def __getitem__(self, name):
        self.used.add(name)
        layer = name.rsplit("/", 1)[0]
        if layer not in self.layer_order:
            self.layer_order.append(layer)
        if name not in self.cache:
            t = torch.from_numpy(self.numpy(name).astype(np.float64)).to(self.dtype)
            self.cache[name] = t.requires_grad_(True) if self.grad and self.vars[name]["trainable"] else t
        return self.cache[name]


# Keras's weight order within a layer (trainable, then non-trainable, in creation order).
KERAS_WEIGHT_ORDER = ["kernel", "depthwise_kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance",
                      "mean", "variance", "count"]


def glorot_uniform(rng, shape):
    """keras.initializers.GlorotUniform on Keras's shape: limit sqrt(6 / (fan_in + fan_out)),
    fan_in = receptive field x input channels, fan_out = receptive field x output channels.
    (Strata's depthwise [k, k, 1, C] has the fan sum of Keras's [k, k, C, 1].)"""
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    fan_in, fan_out = receptive * shape[-2], receptive * shape[-1]
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, int(np.prod(shape)))


def keras_layers(w):
    """[(layer, [(weight short name, array in Keras's shape)])] in Keras's model.layers order."""
    out = []
    for layer in w.layer_order:
        names = [n for n in w.vars if n.rsplit("/", 1)[0] == layer]
        names.sort(key=lambda n: KERAS_WEIGHT_ORDER.index(n.rsplit("/", 1)[1]))
        out.append((layer, [(n.rsplit("/", 1)[1], w.numpy(n).reshape(w.keras_shapes.get(n, w.vars[n]["shape"])))
                            for n in names]))
    return out


def write_keras_legacy_h5(path, layers, rename=None):
    """Keras 2's model.save_weights('w.h5') (keras/saving/legacy/hdf5_format.py,
    save_weights_to_hdf5_group): root attributes layer_names (every layer, weightless ones with
    an empty weight_names), backend, keras_version; a group per layer whose weight_names
    attribute lists "<layer>/<weight>:0", each a dataset at that path inside the group."""
    rename = rename or (lambda n: n)
    weightless_first, weightless_last = "input_1", "global_average_pooling2d"
    all_layers = [weightless_first] + [rename(l) for l, _ in layers[:-1]] + [weightless_last, rename(layers[-1][0])]
    weights = {rename(l): ws for l, ws in layers}
    with h5py.File(path, "w") as f:
        f.attrs["layer_names"] = [n.encode("utf8") for n in all_layers]
        f.attrs["backend"] = b"tensorflow"
        f.attrs["keras_version"] = b"2.15.0"
        for layer in all_layers:
            g = f.create_group(layer)
            ws = weights.get(layer, [])
            names = ["%s/%s:0" % (layer, n) for n, _ in ws]
            g.attrs["weight_names"] = [n.encode("utf8") for n in names]  # [] as Keras: empty float64
            for n, (_, a) in zip(names, ws):
                g.create_dataset(n, data=np.asarray(a, np.float32))


def check_saved(d):
    """Strata's SaveKerasWeights output against the Keras file it loaded (see the docstring)."""
    def weighted(f):
        out = []
        for layer in [n.decode() if isinstance(n, bytes) else n for n in f.attrs["layer_names"]]:
            names = [n.decode() if isinstance(n, bytes) else n for n in f[layer].attrs["weight_names"]]
            if names:
                out.append((layer, names, [f[layer][n][()] for n in names]))
        return out
    with h5py.File(os.path.join(d, "keras.h5"), "r") as k, h5py.File(os.path.join(d, "strata.h5"), "r") as s:
        for attr in ("layer_names", "backend", "keras_version"):
            if attr not in s.attrs:
                sys.exit("strata.h5: no root attribute %s (Keras's legacy layout)" % attr)
        want, got = weighted(k), weighted(s)
        if [l for l, _, _ in got] != [l for l, _, _ in want]:
            sys.exit("strata.h5: layers with weights %s..., keras.h5 %s..." % (
                [l for l, _, _ in got][:6], [l for l, _, _ in want][:6]))
        checked = 0
        for (layer, wn, wv), (_, gn, gv) in zip(want, got):
            if gn != wn:
                sys.exit("strata.h5: layer %s has weight_names %s, Keras's %s" % (layer, gn, wn))
            for n, a, b in zip(wn, wv, gv):
                if a.shape != b.shape or b.dtype != np.float32:
                    sys.exit("strata.h5: %s is %s %s, Keras's %s float32" % (n, b.dtype, b.shape, a.shape))
                if not np.array_equal(a, b):
                    sys.exit("strata.h5: %s differs from keras.h5 (max %g)" % (n, np.abs(a - b).max()))
                checked += 1
    print(json.dumps({"saved_layers": len(got), "saved_weights": checked}))


# ---- --train: one training step -------------------------------------------------------------
TRAIN_LOSS_TOLERANCE = 1e-4   # the test's: |strata - torch| <= this x |torch loss|
TRAIN_GRAD_TOLERANCE = 5e-4   # per variable: max |strata - torch| <= this x the variable's scale
MOVING_TOLERANCE = 2e-3       # per moving statistic: max |strata's change - torch's| <= this x max |torch's|
KINK_MARGIN = 1e-3            # no ReLU input this close to a kink, in its channel's standard deviations
# keras_applications' BatchNormalization momentum: Keras's default 0.99, MobileNetV2's 0.999.
BN_MOMENTUM = {"resnet50": 0.99, "mobilenet_v2": 0.999, "efficientnet_b0": 0.99, "xception": 0.99,
               "densenet121": 0.99}
# Keras details of a training step done the other way; the forward-only ones need only move
# the loss, "batch_stats_constant" (batch norm's backward without the batch statistics'
# dependence on the input: same loss) must move the gradients.
TRAIN_MUTATIONS = ["moving_statistics", "unbiased_variance", "sum_over_batch", "batch_stats_constant"]
MOVING_MUTATIONS = ["moving_variance_biased", "momentum"]


def train_step(header, params, forward, eps, x, labels, from_logits, mutate=None, dtype=torch.float64,
               backward=True):
    """Keras's train_step up to the gradients: the forward with training=True, the sparse
    categorical cross-entropy averaged over the batch (Keras's SUM_OVER_BATCH_SIZE), and
    tape.gradient of every trainable variable. Returns (loss, {variable: gradient as float64},
    {batch norm: (batch mean, unbiased batch variance, values per channel)})."""
    w = Weights(header, params, dtype, grad=True)
    f = Forward(w, eps, mutate=mutate, training=True)
    logits = forward(f, x.to(dtype))
    if from_logits:
        log_p = F.log_softmax(logits, dim=1)
    else:
        # A model ending in softmax, compiled with from_logits=False: Keras takes
        # -log(clip(p, 1e-7, 1 - 1e-7)) (in graph mode it uses the softmax's logits: the
        # same while nothing is near the clip, checked).
        p = torch.softmax(logits, dim=1)
        if not (p.min().item() > 1e-5 and p.max().item() < 1 - 1e-5):
            sys.exit("softmax outputs near Keras's clip (1e-7): %g .. %g" % (p.min().item(), p.max().item()))
        log_p = torch.log(torch.clamp(p, 1e-7, 1 - 1e-7))
    per_example = -log_p[torch.arange(len(labels)), torch.tensor(labels)]
    loss = per_example.sum() if mutate == "sum_over_batch" else per_example.mean()
    grads = {}
    if backward:
        loss.backward()
        grads = {n: t.grad.double() for n, t in w.cache.items() if t.requires_grad and t.grad is not None}
        unused = sorted(n for n, v in w.vars.items() if v["trainable"] and n not in grads)
        if unused:
            sys.exit("trainable variables without a gradient: %s" % unused[:10])
    return loss.item(), grads, f.batch_stats


def main_train(model, d, header, params, x, spec):
    """--train: input.json also has "labels" (one class per example) and "from_logits" (how
    the test compiles the loss: true for a linear classifier, false for softmax). Writes
    DIR/weights.f32 (as without --train), DIR/loss.f32 (the float64 loss as one f32),
    DIR/grads.f32 (every trainable variable's gradient at its checkpoint offset: the
    trainable block, which comes first), DIR/grad_scales.txt ("variable scale" lines: what
    the test divides the error by) and DIR/moving_delta.f32 (each moving statistic's change in
    the step, momentum x old + (1 - momentum) x batch minus old, over the state block)."""
    forward, eps, _ = MODELS[model]
    momentum = BN_MOMENTUM[model]
    labels, from_logits = spec["labels"], spec["from_logits"]
    # In training mode every batch norm normalises its channels fully, and a deep ReLU network
    # of such layers is chaotic: with the inference weights torch's own float32 gradients are
    # 1-10 % off float64. What tames it, per model (the moving statistics stay as calibrated):
    # ResNet50's residual branches end in a batch norm of gamma U(0.1, 0.3) (as Goyal et al.'s
    # zero-init residual gamma: each block near the identity); MobileNetV2's betas are N(1, 0.3),
    # so most ReLU6 inputs lie in its linear part (gamma 4..8 in one channel of 20 still clips
    # at 6).
    w = Weights(header, params)
    rng = np.random.default_rng(36)
    for name, v in w.vars.items():
        if model == "resnet50" and name.endswith("_3_bn/gamma"):
            w.set(name, rng.uniform(0.1, 0.3, v["size"]))
        elif model == "mobilenet_v2" and name.endswith("/beta"):
            w.set(name, rng.normal(1.0, 0.3, v["size"]))
    # A gradient jumps where a ReLU's input crosses its kink, and float32 moves every input by
    # ~1e-5 of its channel's spread: an input within that of a kink (deep layers see only 12
    # values a channel) made one of ResNet50's beta gradients 17 % off between float32 and
    # float64. So no ReLU / ReLU6 input may lie within KINK_MARGIN x its channel's standard
    # deviation of a kink: a training-mode pass shifts each channel that has one by the
    # smallest shift of the batch norm's beta that clears it (a small fraction of that spread).
    shifted = []

    def kink_guard(weights, bn, pre, kinks):
        c = pre.shape[1]
        v = pre.transpose(0, 1).reshape(c, -1).numpy()
        margin = KINK_MARGIN * v.std(axis=1)
        dist = np.min([np.abs(v - k).min(axis=1) for k in kinks], axis=0)
        delta = np.zeros(c)
        for ch in np.nonzero(dist < margin)[0]:
            srt = np.sort(v[ch])
            gaps = (srt[1:] - srt[:-1]) >= 4 * margin[ch]
            mids = ((srt[1:] + srt[:-1]) / 2)[gaps]
            # a shift d puts kink k at k - d: the middle of a gap of at least 4 margins
            for d in sorted((k - mid for k in kinks for mid in mids), key=abs):
                if min(np.abs(srt + d - k).min() for k in kinks) >= margin[ch]:
                    delta[ch] = d
                    break
            else:
                sys.exit("%s: no shift of channel %d clears the activation's kinks" % (bn, ch))
        if delta.any():
            shifted.append(int(np.count_nonzero(delta)))
            weights.set(bn + "/beta", weights.numpy(bn + "/beta") + delta)
            pre = pre + torch.from_numpy(delta).view(1, -1, 1, 1)
        return pre

    with torch.no_grad():
        forward(Forward(Weights(header, params), eps, training=True, kink_guard=kink_guard), x)
    loss, grads, stats = train_step(header, params, forward, eps, x, labels, from_logits)
    trainable = [v for v in header["variables"] if v["trainable"]]
    num_trainable = sum(v["size"] for v in trainable)
    if [v["offset"] for v in trainable] != sorted(v["offset"] for v in trainable) or \
            max(v["offset"] + v["size"] for v in trainable) != num_trainable:
        sys.exit("the checkpoint's trainable variables are not its first block")

    # Each gradient's scale: its own largest magnitude, except where the exact gradient is zero
    # (a shift that a batch norm in training mode takes out with the batch mean: a
    # convolution's bias before one; MobileNetV2's project_BN beta, whose every consumer is a
    # 1x1 convolution and a batch norm), which is held to the scale of its layer's other
    # gradient (the kernel's; gamma's).
    scales, report_zero = {}, []
    for v in trainable:
        name = v["name"]
        own = grads[name].abs().max().item()
        layer, leaf = name.rsplit("/", 1)
        sibling = layer + {"bias": "/kernel", "beta": "/gamma"}.get(leaf, "")
        if sibling in grads and own < 1e-10 * grads[sibling].abs().max().item():
            scales[name] = grads[sibling].abs().max().item()
            report_zero.append(name)
        else:
            scales[name] = own

    def grad_error(g):  # the largest error of any variable relative to its scale
        worst, at = 0.0, None
        for name, ref in grads.items():
            e = (g[name] - ref).abs().max().item() / scales[name]
            if e > worst or math.isnan(e):
                worst, at = e, name
        return worst, at

    def moving_delta(batch_stats, mutate=None):
        m = momentum if mutate != "momentum" else 0.999 if momentum == 0.99 else 0.99
        delta = {}
        for bn, (mean, unbiased, n) in batch_stats.items():
            var = unbiased * (n - 1) / n if mutate == "moving_variance_biased" else unbiased
            for stat, value in (("moving_mean", mean), ("moving_variance", var)):
                name = bn + "/" + stat
                v = header["variables"][[u["name"] for u in header["variables"]].index(name)]
                old = torch.from_numpy(params[v["offset"]:v["offset"] + v["size"]].astype(np.float64))
                delta[name] = (m * old + (1 - m) * value) - old
        return delta

    delta = moving_delta(stats)
    delta_scales = {n: t.abs().max().item() for n, t in delta.items()}

    def moving_error(dl):
        return max((dl[n] - delta[n]).abs().max().item() / delta_scales[n] for n in delta)

    report = {"model": model, "train": True, "input": list(x.shape), "labels": labels, "from_logits": from_logits,
              "loss": loss, "momentum": momentum, "zero_gradients": len(report_zero),
              "kink_shifted_channels": sum(shifted), "mutations": {}}
    # Well conditioned: torch's own float32 step within a quarter of each tolerance.
    loss32, grads32, stats32 = train_step(header, params, forward, eps, x, labels, from_logits, dtype=torch.float32)
    report["torch_f32_loss_error"] = abs(loss32 - loss) / abs(loss)
    report["torch_f32_grad_error"], report["torch_f32_grad_worst"] = grad_error(grads32)
    report["torch_f32_moving_error"] = moving_error(moving_delta(stats32))
    weak = []
    for m in TRAIN_MUTATIONS:
        if m == "batch_stats_constant":  # in float32, half the time: it moves the gradients ~1e4x
            _, g, _ = train_step(header, params, forward, eps, x, labels, from_logits, mutate=m, dtype=torch.float32)
            moved = grad_error(g)[0] / TRAIN_GRAD_TOLERANCE
        else:
            with torch.no_grad():
                lm, _, _ = train_step(header, params, forward, eps, x, labels, from_logits, mutate=m, backward=False)
            moved = abs(lm - loss) / abs(loss) / TRAIN_LOSS_TOLERANCE
        report["mutations"][m] = moved  # in units of the tolerance
        if not moved > MUTATION_FACTOR:
            weak.append(m)
    for m in MOVING_MUTATIONS:
        moved = moving_error(moving_delta(stats, m)) / MOVING_TOLERANCE
        report["mutations"][m] = moved
        if not moved > MUTATION_FACTOR:
            weak.append(m)

    params.astype("<f4").tofile(os.path.join(d, "weights.f32"))
    np.array([loss], "<f4").tofile(os.path.join(d, "loss.f32"))
    flat = np.zeros(num_trainable, np.float64)
    for v in trainable:
        flat[v["offset"]:v["offset"] + v["size"]] = grads[v["name"]].numpy().reshape(-1)
    flat.astype("<f4").tofile(os.path.join(d, "grads.f32"))
    with open(os.path.join(d, "grad_scales.txt"), "w") as out:
        for v in trainable:
            out.write("%s %.9g\n" % (v["name"], scales[v["name"]]))
    state = np.zeros(len(params) - num_trainable, np.float64)
    for name, t in delta.items():
        v = header["variables"][[u["name"] for u in header["variables"]].index(name)]
        state[v["offset"] - num_trainable:v["offset"] - num_trainable + v["size"]] = t.numpy()
    state.astype("<f4").tofile(os.path.join(d, "moving_delta.f32"))
    print(json.dumps(report))
    if weak:
        sys.exit("%s: the training step cannot tell these mistakes from Keras (moved < %gx tolerance): %s" % (
            model, MUTATION_FACTOR, weak))
    for what, err, tol in (("loss", report["torch_f32_loss_error"], TRAIN_LOSS_TOLERANCE),
                           ("gradients", report["torch_f32_grad_error"], TRAIN_GRAD_TOLERANCE),
                           ("moving statistics", report["torch_f32_moving_error"], MOVING_TOLERANCE)):
        if not err < tol / 4:
            sys.exit("%s: the weights are ill-conditioned: torch's own float32 %s are %g off float64" % (
                model, what, err))


def main():
    if sys.argv[1] == "--check-saved":
        return check_saved(sys.argv[2])
    model, d = sys.argv[1], sys.argv[2]
    keras_h5 = "--keras-h5" in sys.argv[3:]
    train = "--train" in sys.argv[3:]
    forward, eps, mutations = MODELS[model]
    torch.set_num_threads(1)
    header, params = read_checkpoint(os.path.join(d, "init.ckpt"))
    w = Weights(header, params)
    shape = json.load(open(os.path.join(d, "input.json")))["shape"]
    x_nhwc = np.fromfile(os.path.join(d, "input.f32"), dtype="<f4").reshape(shape)
    x = torch.from_numpy(x_nhwc.astype(np.float64)).permute(0, 3, 1, 2).contiguous()
    rng = np.random.default_rng(18)

    # Nontrivial weights: biases, the Normalization stem's statistics, then the batch norms
    # from their inputs (in network order, during one pass).
    for name, v in w.vars.items():
        n = v["size"]
        if keras_h5 and (name.endswith("/kernel") or name.endswith("/depthwise_kernel")):
            w.set(name, glorot_uniform(rng, v["shape"]))  # made here: nothing of Strata's kept
        elif name.endswith("/bias"):
            w.set(name, rng.normal(0, 0.3, n))
        elif name.endswith("/mean") and "normalization" in name:
            w.set(name, rng.uniform(0.35, 0.65, n))           # after Rescaling: pixels in [0, 1]
        elif name.endswith("/variance") and "normalization" in name:
            w.set(name, rng.uniform(0.04, 0.12, n))

    big_gamma = 0.0 if model == "densenet121" else 0.05

    def calibrate(weights, name, inp):
        # Scale-preserving batch norms (each channel normalised to its own std) make a deep
        # random network chaotic: rounding errors grow ~1.2x per layer and even torch's float32
        # forward lands 5e-5 off float64. So the moving variance is the layer's mean variance
        # x 4 x U(0.5, 2) per channel (outputs at about half of gamma: contracting), the moving
        # mean a random part of the channel's mean: nontrivial, and well conditioned (checked).
        c = inp.shape[1]
        mean = inp.mean(dim=(0, 2, 3)).numpy()
        var = float(inp.var(dim=(0, 2, 3), unbiased=False).mean())
        weights.set(name + "/moving_mean", mean * rng.uniform(0.5, 1.0, c))
        weights.set(name + "/moving_variance", var * 4 * rng.uniform(0.5, 2, c) + 1e-6)
        # ... one channel in 20 with gamma 4..8: ReLU6 clips there (else it acts as ReLU). Not
        # in DenseNet121 (ReLU only), whose concatenations carry such a channel's amplified
        # signal into every later layer of its block: its float32 forward was 2.9e-5 off.
        weights.set(name + "/gamma", np.where(rng.uniform(0, 1, c) < big_gamma, rng.uniform(4, 8, c),
                                              rng.uniform(0.5, 1.5, c)))
        weights.set(name + "/beta", rng.normal(0, 0.3, c))

    with torch.no_grad():
        forward(Forward(w, eps, calibrate=calibrate), x)
    if train:
        return main_train(model, d, header, params, x, json.load(open(os.path.join(d, "input.json"))))
    with torch.no_grad():
        w.cache.clear()
        w.used.clear()
        w.layer_order.clear()
        expected = forward(Forward(w, eps), x)
        unused = sorted(n for n in w.vars if n not in w.used and not n.endswith("/count"))
        if unused:
            sys.exit("%s: checkpoint variables the Keras forward never read: %s" % (model, unused[:10]))
        scale = expected.abs().max().item()
        report = {"model": model, "input": shape, "output": list(expected.shape), "scale": scale,
                  "spread": expected.std(dim=0).mean().item() / scale, "mutations": {}}
        # The weights must be well conditioned: the same forward in float32 stays within a
        # quarter of the tolerance of float64, else rounding alone could fail the test.
        w32 = Weights(header, params, torch.float32)
        f32_error = (forward(Forward(w32, eps), x.float()).double() - expected).abs().max().item() / scale
        report["torch_f32_error"] = f32_error
        weak = []
        for m in mutations:
            moved = (forward(Forward(w, eps, mutate=m), x) - expected).abs().max().item() / scale
            report["mutations"][m] = moved
            if not moved > MUTATION_FACTOR * TOLERANCE:
                weak.append(m)
    if keras_h5:
        layers = keras_layers(w)
        write_keras_legacy_h5(os.path.join(d, "keras.h5"), layers)
        write_keras_legacy_h5(os.path.join(d, "keras_renamed.h5"), layers, rename=lambda n: "k%03d" % (
            [l for l, _ in layers].index(n)))
        report["keras_h5_layers"] = len(layers)
    else:
        params.astype("<f4").tofile(os.path.join(d, "weights.f32"))
    expected.numpy().astype("<f4").tofile(os.path.join(d, "expected.f32"))
    print(json.dumps(report))
    if weak:
        sys.exit("%s: the weights cannot tell these mistakes from Keras (moved < %gx tolerance): %s" % (
            model, MUTATION_FACTOR, weak))
    if not f32_error < TOLERANCE / 4:
        sys.exit("%s: the weights are ill-conditioned: torch's own float32 forward is %g off float64" % (
            model, f32_error))
    if report["spread"] < 0.01:
        sys.exit("%s: the two examples' outputs barely differ (spread %g): the input hardly matters" % (
            model, report["spread"]))


if __name__ == "__main__":
    main()
