#!/usr/bin/python3
"""An independent PyTorch forward of Keras's ResNet50, MobileNetV2 and EfficientNetB0.

The oracle of tests/keras/applications_oracle_test.cc. It is written from Keras's model
definitions (keras_applications/resnet_common.py and mobilenet_v2.py, tf.keras's
efficientnet.py), not from Strata's code: it reads only the weights, by their Keras names, from
the checkpoint Strata's Model::save_weights wrote (docs/formats/checkpoint.md), and computes in
float64, NCHW, with torch.nn.functional. The Keras semantics it keeps:
  - kernels HWIO -> OIHW, depthwise [kh, kw, C, m] -> [C*m, 1, kh, kw], Dense [in, out] -> [out, in];
  - padding 'same' as TensorFlow pads (the odd pixel at the end), ZeroPadding2D's correct_pad
    before stride-2 convolutions (asymmetric on an even side), ResNet's stride on the 1x1
    convolution (Keras's v1, not torchvision's v1.5);
  - batch-norm epsilon per model (1.001e-5 ResNet50, 1e-3 MobileNetV2 and EfficientNetB0),
    ReLU6, swish, squeeze-and-excitation (Multiply), EfficientNet's Rescaling(1/255) and
    Normalization stem ((x - mean) / max(sqrt(variance), 1e-7)); dropout is the identity.

    applications_oracle.py MODEL DIR [--keras-h5]
    applications_oracle.py --check-saved DIR
DIR holds init.ckpt (the initialised weights) and input.f32 (+ input.json: its shape [N, H, W, C]).
The oracle makes the weights nontrivial: every batch norm's moving statistics come from its own
input on this batch (mean: the channel's mean x U(0.5, 1); variance: the layer's mean variance
x 4 x U(0.5, 2) per channel), gamma ~ U(0.5, 1.5) but U(4, 8) in one channel of
20 (so ReLU6 clips), beta ~ N(0, 0.3), every bias ~ N(0, 0.3), so
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

    def __init__(self, header, params, dtype=torch.float64):
        self.header, self.params, self.dtype = header, params, dtype
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
            self.cache[name] = torch.from_numpy(self.numpy(name).astype(np.float64)).to(self.dtype)
        return self.cache[name]


# ---- Keras layers in torch (NCHW, float64) --------------------------------------------------
class Forward:
    """One forward pass. `mutate` names a Keras detail to get wrong (the self-check);
    `calibrate` sets each batch norm's moving statistics from its input on the way."""

    def __init__(self, w, bn_eps, mutate=None, calibrate=None):
        self.w, self.bn_eps, self.mutate, self.calibrate = w, bn_eps, mutate, calibrate

    def pad(self, x, top, bottom, left, right):  # ZeroPadding2D
        return F.pad(x, (left, right, top, bottom))

    def correct_pad(self, x, k):
        """keras_applications.correct_pad: ((k//2 - adjust, k//2), ...), adjust = 1 - size % 2,
        so an even side gets its extra pixel at the end."""
        h, w = x.shape[2], x.shape[3]
        c = k // 2
        ah, aw = 1 - h % 2, 1 - w % 2
        if self.mutate == "pad_at_start":
            return self.pad(x, c, c - ah, c, c - aw)
        return self.pad(x, c - ah, c, c - aw, c)

    def same_pad(self, x, k, stride):
        """TensorFlow's 'same': out = ceil(in / s), the odd pixel of padding at the end."""
        pads = []
        for size in (x.shape[2], x.shape[3]):
            out = -(-size // stride)
            total = max((out - 1) * stride + k - size, 0)
            pads.append((total // 2, total - total // 2))
        (t, b), (l, r) = pads
        if self.mutate == "pad_at_start":
            t, b, l, r = b, t, r, l
        return self.pad(x, t, b, l, r)

    def conv(self, x, name, stride=1, padding="valid", activation=None, use_bias=False):
        k = self.w[name + "/kernel"]                       # HWIO
        bias = self.w[name + "/bias"] if use_bias else None
        if padding == "same":
            x = self.same_pad(x, k.shape[0], stride)
        x = F.conv2d(x, k.permute(3, 2, 0, 1), bias, stride=stride)
        return self.act(x, activation)

    def depthwise(self, x, name, stride=1, padding="valid"):  # use_bias=False in all three
        # Keras's [kh, kw, C, multiplier]; Strata stores the same elements as [kh, kw, 1, C*m]
        # (docs/applications.md), so take C from the input.
        k = self.w[name + "/depthwise_kernel"]
        c = x.shape[1]
        kh, kw = k.shape[0], k.shape[1]
        m = k.numel() // (kh * kw * c)
        k = k.reshape(kh, kw, c, m)
        self.w.keras_shapes[name + "/depthwise_kernel"] = (kh, kw, c, m)
        if padding == "same":
            x = self.same_pad(x, kh, stride)
        return F.conv2d(x, k.permute(2, 3, 0, 1).reshape(c * m, 1, kh, kw), None, stride=stride, groups=c)

    def bn(self, x, name):
        eps = self.bn_eps
        if self.mutate == "bn_epsilon":
            eps = 1e-3 if eps < 1e-4 else 1.001e-5
        if self.calibrate is not None:
            self.calibrate(self.w, name, x)
        mean, var = self.w[name + "/moving_mean"], self.w[name + "/moving_variance"]
        gamma, beta = self.w[name + "/gamma"], self.w[name + "/beta"]
        shape = (1, -1, 1, 1)
        return (x - mean.view(shape)) / torch.sqrt(var.view(shape) + eps) * gamma.view(shape) + beta.view(shape)

    def act(self, x, activation):
        if activation is None:
            return x
        if activation == "relu":
            return F.relu(x)
        if activation == "relu6":
            return F.relu(x) if self.mutate == "relu6_as_relu" else torch.clamp(x, 0, 6)
        if activation == "swish":
            return F.relu(x) if self.mutate == "swish_as_relu" else x * torch.sigmoid(x)
        if activation == "sigmoid":
            return torch.sigmoid(x)
        raise ValueError(activation)

    def dense(self, x, names):
        for name in names:
            if self.w.has(name + "/kernel"):
                return x @ self.w[name + "/kernel"] + self.w[name + "/bias"]
        sys.exit("no classifier Dense among %s" % names)


def resnet50(f, x):
    """keras_applications/resnet_common.py: ResNet(stack1 x [3, 4, 6, 3]), use_bias=True."""
    x = f.pad(x, 3, 3, 3, 3)                                    # conv1_pad
    x = f.conv(x, "conv1_conv", stride=2, use_bias=True)
    x = f.act(f.bn(x, "conv1_bn"), "relu")
    x = f.pad(x, 1, 1, 1, 1)                                    # pool1_pad
    x = F.max_pool2d(x, 3, stride=2)                            # pool1_pool

    def block1(x, filters, stride, conv_shortcut, name):
        if conv_shortcut:
            shortcut = f.bn(f.conv(x, name + "_0_conv", stride=stride, use_bias=True), name + "_0_bn")
        else:
            shortcut = x
        s1, s2 = (1, stride) if f.mutate == "stride_on_3x3" else (stride, 1)
        y = f.act(f.bn(f.conv(x, name + "_1_conv", stride=s1, use_bias=True), name + "_1_bn"), "relu")
        y = f.act(f.bn(f.conv(y, name + "_2_conv", stride=s2, padding="same", use_bias=True), name + "_2_bn"), "relu")
        y = f.bn(f.conv(y, name + "_3_conv", use_bias=True), name + "_3_bn")
        return F.relu(shortcut + y)

    for stack, (filters, blocks, stride1) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        name = "conv%d" % (stack + 2)
        x = block1(x, filters, stride1, True, name + "_block1")
        for i in range(2, blocks + 1):
            x = block1(x, filters, 1, False, name + "_block%d" % i)
    x = x.mean(dim=(2, 3))                                      # avg_pool
    return f.dense(x, ["predictions", "probs"])


def _make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def mobilenet_v2(f, x):
    """keras_applications/mobilenet_v2.py, alpha 1.0."""
    x = f.correct_pad(x, 3)                                     # Conv1_pad
    x = f.conv(x, "Conv1", stride=2)
    x = f.act(f.bn(x, "bn_Conv1"), "relu6")

    def inverted_res_block(inputs, expansion, stride, filters, block_id):
        in_channels = inputs.shape[1]
        pointwise_filters = _make_divisible(int(filters * 1.0), 8)
        y = inputs
        prefix = "block_%d_" % block_id
        if block_id:
            y = f.act(f.bn(f.conv(y, prefix + "expand"), prefix + "expand_BN"), "relu6")
        else:
            prefix = "expanded_conv_"
        if stride == 2:
            y = f.correct_pad(y, 3)
            y = f.depthwise(y, prefix + "depthwise", stride=2)
        else:
            y = f.depthwise(y, prefix + "depthwise", padding="same")
        y = f.act(f.bn(y, prefix + "depthwise_BN"), "relu6")
        y = f.bn(f.conv(y, prefix + "project"), prefix + "project_BN")
        if in_channels == pointwise_filters and stride == 1:
            return inputs + y
        return y

    table = [(16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (32, 1, 6), (64, 2, 6), (64, 1, 6),
             (64, 1, 6), (64, 1, 6), (96, 1, 6), (96, 1, 6), (96, 1, 6), (160, 2, 6), (160, 1, 6),
             (160, 1, 6), (320, 1, 6)]
    for block_id, (filters, stride, expansion) in enumerate(table):
        x = inverted_res_block(x, expansion, stride, filters, block_id)
    x = f.act(f.bn(f.conv(x, "Conv_1"), "Conv_1_bn"), "relu6")  # out_relu
    x = x.mean(dim=(2, 3))
    return f.dense(x, ["predictions", "Logits"])


EFFICIENTNET_B0_BLOCKS = [  # kernel, repeats, filters_in, filters_out, expand_ratio, strides (se 0.25)
    (3, 1, 32, 16, 1, 1), (3, 2, 16, 24, 6, 2), (5, 2, 24, 40, 6, 2), (3, 3, 40, 80, 6, 2),
    (5, 3, 80, 112, 6, 1), (5, 4, 112, 192, 6, 2), (3, 1, 192, 320, 6, 1)]


def efficientnet_b0(f, x):
    """tf.keras.applications.efficientnet: width and depth 1.0, swish, se_ratio 0.25."""
    if f.mutate != "no_rescaling":
        x = x / 255.0                                           # rescaling
    mean = [n for n in f.w.vars if n.endswith("/mean") and "normalization" in n]
    if len(mean) != 1:
        sys.exit("EfficientNetB0: one Normalization layer's mean expected, found %s" % mean)
    norm = mean[0][:-len("/mean")]
    m, v = f.w[norm + "/mean"].reshape(1, -1, 1, 1), f.w[norm + "/variance"].reshape(1, -1, 1, 1)
    x = (x - m) / torch.clamp(torch.sqrt(v), min=1e-7)          # normalization
    x = f.correct_pad(x, 3)                                     # stem_conv_pad
    x = f.act(f.bn(f.conv(x, "stem_conv", stride=2), "stem_bn"), "swish")

    def block(inputs, name, filters_in, filters_out, kernel, stride, expand_ratio):
        filters = filters_in * expand_ratio
        if expand_ratio != 1:
            y = f.act(f.bn(f.conv(inputs, name + "expand_conv"), name + "expand_bn"), "swish")
        else:
            y = inputs
        if stride == 2:
            y = f.depthwise(f.correct_pad(y, kernel), name + "dwconv", stride=2)
        else:
            y = f.depthwise(y, name + "dwconv", padding="same")
        y = f.act(f.bn(y, name + "bn"), "swish")
        if f.mutate != "no_squeeze_excite":
            se = y.mean(dim=(2, 3), keepdim=True)               # se_squeeze + se_reshape
            se = f.conv(se, name + "se_reduce", activation="swish", use_bias=True)
            se = f.conv(se, name + "se_expand", activation="sigmoid", use_bias=True)
            assert se.shape[1] == filters
            y = y * se                                          # se_excite (Multiply)
        y = f.bn(f.conv(y, name + "project_conv"), name + "project_bn")
        if stride == 1 and filters_in == filters_out:
            y = y + inputs                                      # (drop: identity in inference)
        return y

    for i, (kernel, repeats, fin, fout, expand, stride) in enumerate(EFFICIENTNET_B0_BLOCKS):
        for j in range(repeats):
            x = block(x, "block%d%s_" % (i + 1, chr(97 + j)), fin if j == 0 else fout, fout, kernel,
                      stride if j == 0 else 1, expand)
    x = f.act(f.bn(f.conv(x, "top_conv"), "top_bn"), "swish")
    x = x.mean(dim=(2, 3))                                      # avg_pool (+ top_dropout: identity)
    return f.dense(x, ["predictions"])


MODELS = {
    # name: (forward, batch-norm epsilon, the mutations the weights must be able to catch)
    # (ResNet50 pads symmetrically everywhere: no padding mutation applies.)
    "resnet50": (resnet50, 1.001e-5, ["bn_epsilon", "stride_on_3x3"]),
    "mobilenet_v2": (mobilenet_v2, 1e-3, ["pad_at_start", "bn_epsilon", "relu6_as_relu"]),
    "efficientnet_b0": (efficientnet_b0, 1e-3,
                        ["pad_at_start", "bn_epsilon", "swish_as_relu", "no_squeeze_excite", "no_rescaling"]),
}


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


def main():
    if sys.argv[1] == "--check-saved":
        return check_saved(sys.argv[2])
    model, d = sys.argv[1], sys.argv[2]
    keras_h5 = "--keras-h5" in sys.argv[3:]
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
        # ... one channel in 20 with gamma 4..8: ReLU6 clips there (else it acts as ReLU).
        weights.set(name + "/gamma", np.where(rng.uniform(0, 1, c) < 0.05, rng.uniform(4, 8, c),
                                              rng.uniform(0.5, 1.5, c)))
        weights.set(name + "/beta", rng.normal(0, 0.3, c))

    with torch.no_grad():
        forward(Forward(w, eps, calibrate=calibrate), x)
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
