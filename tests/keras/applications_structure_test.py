#!/usr/bin/env python3
"""The applications' structure, checked against Keras's own definitions.

Debian's python3-keras-applications holds Keras's model functions (keras_applications 1.0.8).
They take the Keras modules as arguments (backend=, layers=, models=, utils=), so this test
passes its own small shape-tracing implementation of those modules: each layer class computes
its output shape and its weights (names, shapes, trainable) from its config by Keras's rules.
Running Keras's ResNet50, MobileNetV2, Xception and DenseNet121 through it yields Keras's
list of (layer name, class, output shape, parameters) and weights straight from Keras's
source; the test compares it with what Strata builds (tests/keras/applications_dump prints
the model's summary and variables).

Strata follows tf.keras 2.x, which renamed a few layers of keras_applications 1.0.8; the
renames are listed in TF_KERAS_RENAMES and applied to Keras's list, nothing else is.

  applications_structure_test.py PATH/TO/applications_dump
"""
import contextlib
import math
import subprocess
import sys
import types

from keras_applications import (densenet, inception_resnet_v2, inception_v3, mobilenet, nasnet, mobilenet_v2, resnet_common, vgg16, vgg19,
                                xception)

# tf.keras 2.x against keras_applications 1.0.8: the classifier is "predictions" in every
# model, and MobileNetV2's first convolution pads "same" itself (no Conv1_pad layer; the
# shapes are the same, as correct_pad reproduces TensorFlow's "same" for a stride-2 3x3).
TF_KERAS_RENAMES = {
    **{m: {"probs": "predictions"} for m in ("resnet50", "resnet101", "resnet152", "resnet50_v2", "resnet101_v2",
                                               "resnet152_v2")},
    **{m: {"fc1000": "predictions"} for m in ("densenet121", "densenet169", "densenet201")},
    "mobilenet_v2": {"Logits": "predictions", "Conv1_pad": None},
    # MobileNet: the same for its stem (compared without the top: tf.keras's top pools with
    # keepdims=True and has no reshape_1, which 1.0.8 lacks; tests/keras/applications_test.cc
    # checks it).
    "mobilenet": {"conv1_pad": None},
    "xception": {},
    "inception_v3": {},
    "inception_resnet_v2": {},
    "nasnet_mobile": {},
    "nasnet_large": {},
    "vgg16": {},
    "vgg19": {},
}

# The variable store names depthwise kernels [k, k, 1, C*m] where Keras has [k, k, C, m]
# (the same elements in the same order); reported in /tmp/helpers/B-needs.txt and
# docs/applications.md. This is the one shape mapping the test applies.
def strata_depthwise_shape(shape):
    k1, k2, c, m = shape
    return (k1, k2, 1, c * m)


# ---- a shape-tracing stand-in for the Keras modules -------------------------------------
class Trace:
    """One model build: Keras's automatic names and the layers in call order."""

    def __init__(self):
        self.counts = {}
        self.layers = []
        self.output = None

    def auto_name(self, prefix):
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return prefix if n == 0 else "%s_%d" % (prefix, n)


TRACE = None


class KTensor:
    def __init__(self, shape, layer):
        self.shape = tuple(shape)
        self.layer = layer


def pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def window_out(n, k, s, padding, d=1):
    if n is None:
        return None
    padding = padding.lower()
    if padding == "same":
        return -(-n // s)
    if padding == "valid":
        return (n - ((k - 1) * d + 1)) // s + 1
    raise ValueError("padding %r" % padding)


class Layer:
    prefix = None

    def __init__(self, name=None, **kwargs):
        self.name = name or TRACE.auto_name(self.prefix)
        self.config = kwargs
        self.weights = []  # (name, shape, trainable) in Keras's creation order

    def add_weight(self, name, shape, trainable=True):
        self.weights.append(("%s/%s" % (self.name, name), tuple(shape), trainable))

    def __call__(self, inputs):
        xs = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        self.inbound = [x.layer for x in xs]
        self.output_shape = self.compute([x.shape for x in xs])
        TRACE.layers.append(self)
        return KTensor(self.output_shape, self)

    @property
    def params(self):
        return sum(math.prod(s) for _, s, _ in self.weights)


class InputLayer(Layer):
    prefix = "input"


def Input(shape=None, tensor=None, **kwargs):
    layer = InputLayer(name="input_1")  # Keras numbers inputs from 1
    layer.output_shape = (None,) + tuple(shape)
    TRACE.layers.append(layer)
    return KTensor(layer.output_shape, layer)


class Conv2D(Layer):
    prefix = "conv2d"

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", use_bias=True,
                 dilation_rate=1, activation=None, name=None, **kwargs):
        super().__init__(name)
        self.filters, self.k, self.s = filters, pair(kernel_size), pair(strides)
        self.padding, self.use_bias, self.d = padding, use_bias, pair(dilation_rate)

    def compute(self, shapes):
        n, h, w, c = shapes[0]
        self.add_weight("kernel", self.k + (c, self.filters))
        if self.use_bias:
            self.add_weight("bias", (self.filters,))
        return (n, window_out(h, self.k[0], self.s[0], self.padding, self.d[0]),
                window_out(w, self.k[1], self.s[1], self.padding, self.d[1]), self.filters)


class DepthwiseConv2D(Layer):
    prefix = "depthwise_conv2d"

    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1, use_bias=True,
                 activation=None, name=None, **kwargs):
        super().__init__(name)
        self.k, self.s, self.padding = pair(kernel_size), pair(strides), padding
        self.m, self.use_bias = depth_multiplier, use_bias

    def compute(self, shapes):
        n, h, w, c = shapes[0]
        self.add_weight("depthwise_kernel", self.k + (c, self.m))
        if self.use_bias:
            self.add_weight("bias", (c * self.m,))
        return (n, window_out(h, self.k[0], self.s[0], self.padding),
                window_out(w, self.k[1], self.s[1], self.padding), c * self.m)


class SeparableConv2D(Layer):
    prefix = "separable_conv2d"

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1,
                 use_bias=True, activation=None, name=None, **kwargs):
        super().__init__(name)
        self.filters, self.k, self.s, self.padding = filters, pair(kernel_size), pair(strides), padding
        self.m, self.use_bias = depth_multiplier, use_bias

    def compute(self, shapes):
        n, h, w, c = shapes[0]
        self.add_weight("depthwise_kernel", self.k + (c, self.m))
        self.add_weight("pointwise_kernel", (1, 1, c * self.m, self.filters))
        if self.use_bias:
            self.add_weight("bias", (self.filters,))
        return (n, window_out(h, self.k[0], self.s[0], self.padding),
                window_out(w, self.k[1], self.s[1], self.padding), self.filters)


class BatchNormalization(Layer):
    prefix = "batch_normalization"

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True, name=None, **kwargs):
        super().__init__(name)
        self.center, self.scale = center, scale

    def compute(self, shapes):
        c = shapes[0][-1]
        if self.scale:
            self.add_weight("gamma", (c,))
        if self.center:
            self.add_weight("beta", (c,))
        self.add_weight("moving_mean", (c,), trainable=False)
        self.add_weight("moving_variance", (c,), trainable=False)
        return shapes[0]


class Elementwise(Layer):
    def __init__(self, *args, name=None, **kwargs):
        super().__init__(name)

    def compute(self, shapes):
        if any(s != shapes[0] for s in shapes):
            raise ValueError("%s: inputs %s differ" % (self.name, shapes))
        return shapes[0]


class Activation(Elementwise):
    prefix = "activation"


class ReLU(Elementwise):
    prefix = "re_lu"


class Add(Elementwise):
    prefix = "add"


class Lambda(Elementwise):
    """InceptionResNetV2's scaled residual: a Lambda in keras_applications 1.0.8, Keras's
    CustomScaleLayer since (the same computation, no weights)."""
    prefix = "lambda"
    tf_keras_class = "CustomScaleLayer"


class Pooling2D(Layer):
    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", name=None, **kwargs):
        super().__init__(name)
        self.k = pair(pool_size)
        self.s = pair(strides if strides is not None else pool_size)
        self.padding = padding

    def compute(self, shapes):
        n, h, w, c = shapes[0]
        return (n, window_out(h, self.k[0], self.s[0], self.padding),
                window_out(w, self.k[1], self.s[1], self.padding), c)


class MaxPooling2D(Pooling2D):
    prefix = "max_pooling2d"


class AveragePooling2D(Pooling2D):
    prefix = "average_pooling2d"


class GlobalPooling2D(Layer):
    def __init__(self, name=None, **kwargs):
        super().__init__(name)

    def compute(self, shapes):
        return (shapes[0][0], shapes[0][-1])


class GlobalAveragePooling2D(GlobalPooling2D):
    prefix = "global_average_pooling2d"


class GlobalMaxPooling2D(GlobalPooling2D):
    prefix = "global_max_pooling2d"


class ZeroPadding2D(Layer):
    prefix = "zero_padding2d"

    def __init__(self, padding=(1, 1), name=None, **kwargs):
        super().__init__(name)
        if isinstance(padding, int):
            padding = ((padding, padding), (padding, padding))
        self.pad = tuple(pair(p) for p in padding)

    def compute(self, shapes):
        n, h, w, c = shapes[0]
        (t, b), (l, r) = self.pad
        return (n, h + t + b, w + l + r, c)


class Cropping2D(Layer):
    prefix = "cropping2d"

    def __init__(self, cropping=((0, 0), (0, 0)), name=None, **kwargs):
        super().__init__(name)
        if isinstance(cropping, int):
            cropping = ((cropping, cropping), (cropping, cropping))
        self.crop = tuple(pair(c) for c in cropping)

    def compute(self, shapes):
        n, h, w, c = shapes[0]
        (t, b), (l, r) = self.crop
        return (n, h - t - b, w - l - r, c)


class Concatenate(Layer):
    prefix = "concatenate"

    def __init__(self, axis=-1, name=None, **kwargs):
        super().__init__(name)

    def compute(self, shapes):
        return shapes[0][:-1] + (sum(s[-1] for s in shapes),)


class Dense(Layer):
    prefix = "dense"

    def __init__(self, units, activation=None, use_bias=True, name=None, **kwargs):
        super().__init__(name)
        self.units, self.use_bias = units, use_bias

    def compute(self, shapes):
        self.add_weight("kernel", (shapes[0][-1], self.units))
        if self.use_bias:
            self.add_weight("bias", (self.units,))
        return (shapes[0][0], self.units)


class Flatten(Layer):
    prefix = "flatten"

    def __init__(self, name=None, **kwargs):
        super().__init__(name)

    def compute(self, shapes):
        return (shapes[0][0], math.prod(shapes[0][1:]))


def add(inputs, name=None):
    return Add(name=name)(inputs)


def concatenate(inputs, axis=-1, name=None):
    return Concatenate(axis=axis, name=name)(inputs)


class FakeModel:
    def __init__(self, inputs, outputs, name=None):
        self.name = name
        TRACE.output = outputs


def keras_layer_order(output):
    """Keras's model.layers order (functional.py's _map_graph_network): a depth-first walk
    from the output numbers the layers as it first meets them; a layer's depth is its longest
    distance to the output; layers come deepest first, ties by that number. Every layer here
    is called once, so a layer is its node."""
    first_seen, post_order, finished = {}, [], set()

    def walk(layer):
        if layer in finished:
            return
        first_seen.setdefault(layer, len(first_seen))
        for parent in getattr(layer, "inbound", []):
            walk(parent)
        finished.add(layer)
        post_order.append(layer)

    walk(output.layer)
    depth = {}
    for layer in reversed(post_order):
        d = depth.setdefault(layer, 0)
        for parent in getattr(layer, "inbound", []):
            depth[parent] = max(depth.get(parent, 0), d + 1)
    return sorted(post_order, key=lambda l: (-depth[l], first_seen[l]))


LAYERS = types.SimpleNamespace(
    Input=Input, Conv2D=Conv2D, DepthwiseConv2D=DepthwiseConv2D, SeparableConv2D=SeparableConv2D,
    BatchNormalization=BatchNormalization, Activation=Activation, ReLU=ReLU, Add=Add, add=add, Lambda=Lambda,
    MaxPooling2D=MaxPooling2D, AveragePooling2D=AveragePooling2D,
    GlobalAveragePooling2D=GlobalAveragePooling2D, GlobalMaxPooling2D=GlobalMaxPooling2D,
    ZeroPadding2D=ZeroPadding2D, Cropping2D=Cropping2D, Concatenate=Concatenate, concatenate=concatenate, Dense=Dense, Flatten=Flatten)
BACKEND = types.SimpleNamespace(
    image_data_format=lambda: "channels_last", int_shape=lambda x: x.shape,
    is_keras_tensor=lambda x: isinstance(x, KTensor), backend=lambda: "tensorflow",
    name_scope=lambda name: contextlib.nullcontext())
MODELS = types.SimpleNamespace(Model=FakeModel)
UTILS = types.SimpleNamespace(get_source_inputs=lambda t: [t])

KERAS_FUNCTIONS = {
    "vgg16": vgg16.VGG16,
    "vgg19": vgg19.VGG19,
    "resnet50": resnet_common.ResNet50,
    "resnet101": resnet_common.ResNet101,
    "resnet152": resnet_common.ResNet152,
    "resnet50_v2": resnet_common.ResNet50V2,
    "resnet101_v2": resnet_common.ResNet101V2,
    "resnet152_v2": resnet_common.ResNet152V2,
    "mobilenet": mobilenet.MobileNet,
    "mobilenet_v2": mobilenet_v2.MobileNetV2,
    "xception": xception.Xception,
    "inception_v3": inception_v3.InceptionV3,
    "inception_resnet_v2": inception_resnet_v2.InceptionResNetV2,
    "nasnet_mobile": nasnet.NASNetMobile,
    "nasnet_large": nasnet.NASNetLarge,
    "densenet121": densenet.DenseNet121,
    "densenet169": densenet.DenseNet169,
    "densenet201": densenet.DenseNet201,
}


def keras_structure(model, size, include_top, pooling, classes, alpha=None, depth_multiplier=None):
    """Keras's (layers, trainable weights, non-trainable weights) for one configuration."""
    global TRACE
    TRACE = Trace()
    extra = {} if alpha is None else {"alpha": alpha}
    if depth_multiplier is not None:
        extra["depth_multiplier"] = depth_multiplier
    KERAS_FUNCTIONS[model](include_top=include_top, weights=None, input_shape=(size, size, 3), pooling=pooling,
                           classes=classes, backend=BACKEND, layers=LAYERS, models=MODELS, utils=UTILS, **extra)
    renames = TF_KERAS_RENAMES[model]
    layers = {}
    trainable, state = [], []
    for layer in TRACE.layers:
        name = renames.get(layer.name, layer.name)
        if name is None:
            continue
        cls = getattr(layer, "tf_keras_class", type(layer).__name__)
        layers[name] = (cls, tuple(layer.output_shape), layer.params if cls != "InputLayer" else 0)
        for wname, shape, tr in layer.weights:
            wname = name + wname[len(layer.name):]
            if wname.endswith("/depthwise_kernel"):
                shape = strata_depthwise_shape(shape)
            (trainable if tr else state).append((wname, shape))
    order = [renames.get(l.name, l.name) for l in keras_layer_order(TRACE.output)
             if not isinstance(l, InputLayer)]
    return layers, trainable, state, [n for n in order if n is not None]


# ---- Strata's side: the dump's summary and variables ------------------------------------
def parse_shape(text):
    text = text.strip().strip("[]")
    inner = text.strip("()").rstrip(",")
    return tuple(None if p.strip() == "None" else int(p) for p in inner.split(","))


def strata_structure(dump, model, size, include_top, pooling, classes, alpha=None, depth_multiplier=None):
    args = [dump, model, "--size", str(size), "--classes", str(classes)]
    if alpha is not None:
        args += ["--alpha", repr(alpha)]
    if depth_multiplier is not None:
        args += ["--depth-multiplier", str(depth_multiplier)]
    if not include_top:
        args.append("--no-top")
    if pooling:
        args += ["--pooling", pooling]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise AssertionError("%s failed: %s" % (" ".join(args), out.stderr))
    summary, rest = out.stdout.split("== weights\n")
    weights, order = rest.split("== layers\n")
    lines = summary.splitlines()
    rules = [i for i, l in enumerate(lines) if l.startswith("=")]
    layers = {}
    # Summary(1000): the columns start where the header's titles do (Keras's positions: 0.33,
    # 0.55 and 0.67 of the line for a graph, 0.45 and 0.85 for a chain of layers, which has no
    # "Connected to").
    header = next(l for l in lines if l.startswith(" Layer (type)"))
    shape_at, param_at = header.index("Output Shape"), header.index("Param #")
    param_end = header.index("Connected to") if "Connected to" in header else len(header)
    for line in lines[rules[0] + 1:rules[1]]:
        if not line[:shape_at].strip():
            continue
        name_cls = line[:shape_at].strip()
        name, cls = name_cls[:-1].rsplit(" (", 1)
        layers[name] = (cls, parse_shape(line[shape_at:param_at]), int(line[param_at:param_end]))
    total = int(next(l for l in lines if l.startswith("Total params:")).split(":")[1].replace(",", ""))
    trainable, state = [], []
    for line in weights.splitlines():
        name, dims, tr = line.split("\t")
        (trainable if tr == "1" else state).append((name, tuple(int(d) for d in dims.split(",") if d)))
    return layers, trainable, state, total, order.split()


def compare(dump, model, size, include_top=True, pooling=None, classes=1000, alpha=None, depth_multiplier=None):
    label = "%s size %d include_top=%s pooling=%s classes=%d%s%s" % (
        model, size, include_top, pooling, classes, "" if alpha is None else " alpha=%s" % alpha,
        "" if depth_multiplier is None else " depth_multiplier=%d" % depth_multiplier)
    k_layers, k_train, k_state, k_order = keras_structure(model, size, include_top, pooling, classes, alpha,
                                                          depth_multiplier)
    s_layers, s_train, s_state, s_total, s_order = strata_structure(dump, model, size, include_top, pooling, classes,
                                                                    alpha, depth_multiplier)
    problems = []
    for name in sorted(set(k_layers) | set(s_layers)):
        k, s = k_layers.get(name), s_layers.get(name)
        if k != s:
            problems.append("layer %s: Keras %s, Strata %s" % (name, k, s))
    k_total = sum(p for _, _, p in k_layers.values())
    if k_total != s_total:
        problems.append("total params: Keras %d, Strata %d" % (k_total, s_total))
    # Weights: the same names and shapes, trainable and non-trainable alike. Within a layer
    # the order must be Keras's (kernel before bias; gamma, beta before the moving statistics).
    for kind, k, s in (("trainable", k_train, s_train), ("non-trainable", k_state, s_state)):
        if sorted(k) != sorted(s):
            missing = sorted(set(k) - set(s))[:10]
            extra = sorted(set(s) - set(k))[:10]
            problems.append("%s weights differ: Keras only %s; Strata only %s" % (kind, missing, extra))

        def per_layer(ws):
            by = {}
            for n, _ in ws:
                by.setdefault(n.rsplit("/", 1)[0], []).append(n)
            return by

        if per_layer(k) != per_layer(s):
            problems.append("%s weights: the order within a layer differs" % kind)
    # Model::layers(): Keras's order, by which Keras weight files are matched by position.
    summary_order = [n for n, (cls, _, _) in s_layers.items() if cls != "InputLayer"]
    if summary_order != s_order:
        problems.append("summary() lists the layers in another order than Model::layers()")
    if k_order != s_order:
        i = next(i for i, (a, b) in enumerate(zip(k_order + [None], s_order + [None])) if a != b)
        problems.append("layer order differs from position %d: Keras %s, Strata %s" % (i, k_order[i:i + 4], s_order[i:i + 4]))
    if problems:
        print("FAIL %s (%d problems)" % (label, len(problems)))
        for p in problems[:30]:
            print("  " + p)
        return False
    print("ok   %s: %d layers, %d params, %d + %d weights" % (label, len(k_layers), k_total, len(k_train),
                                                          len(k_state)))
    return True


def main():
    dump = sys.argv[1]
    cases = []
    for model, default, minimum in (("resnet50", 224, 32), ("mobilenet_v2", 224, 32), ("xception", 299, 71),
                                    ("densenet121", 224, 32)):
        cases += [
            dict(model=model, size=default),                                              # Keras's published model
            dict(model=model, size=minimum, include_top=False, pooling=None),             # the smallest input
            dict(model=model, size=minimum + 6, include_top=False, pooling="avg"),        # even, unequal to the default
            dict(model=model, size=minimum + 13, include_top=False, pooling="max"),       # odd: correct_pad's other case
            dict(model=model, size=minimum + 32, include_top=True, classes=104),          # flowers' classes
        ]
    # The deeper and wider members of the families: Keras's published model, and the smallest
    # input without the top (the blocks are the same as above, repeated).
    for model in ("vgg16", "vgg19", "resnet101", "resnet152", "resnet50_v2", "resnet101_v2", "resnet152_v2",
                  "densenet169", "densenet201"):
        cases += [dict(model=model, size=224), dict(model=model, size=45, include_top=False, pooling="avg")]
    cases += [dict(model="resnet50_v2", size=32, include_top=False), dict(model="vgg16", size=64, classes=104)]
    # The Inception family: Keras's published model, and its smallest input, odd, without the top.
    for model in ("inception_v3", "inception_resnet_v2"):
        cases += [dict(model=model, size=299), dict(model=model, size=75, include_top=False, pooling="max")]
    # NASNet: the mobile model at its size and at an odd, small one without the top (the adjust
    # blocks' cropping path and correct_pad's other case), and the large one.
    cases += [dict(model="nasnet_mobile", size=224), dict(model="nasnet_mobile", size=45, include_top=False,
                                                         pooling="avg"),
              dict(model="nasnet_large", size=331)]
    # MobileNetV2's widths (Keras publishes weights for each), and one it has none for.
    for alpha in (0.35, 0.5, 0.75, 1.3, 1.4):
        cases.append(dict(model="mobilenet_v2", size=224, alpha=alpha))
    cases.append(dict(model="mobilenet_v2", size=45, include_top=False, pooling="max", alpha=0.6))
    # MobileNet's widths and depth multiplier, without the top, at even sizes only: on an odd side
    # 1.0.8's conv1_pad + 'valid' stem gives one row less than tf.keras's 'same' (which Strata
    # follows, as for MobileNetV2's Conv1).
    for alpha in (0.25, 0.5, 0.75, 1.0):
        cases.append(dict(model="mobilenet", size=224, include_top=False, alpha=alpha))
    cases += [dict(model="mobilenet", size=46, include_top=False, pooling="avg", depth_multiplier=2),
              dict(model="mobilenet", size=68, include_top=False, pooling="max", alpha=0.75)]
    ok = all([compare(dump, **c) for c in cases])
    # The oracle itself: Keras's published totals come out of the traced definitions.
    published = {"resnet50": 25636712, "mobilenet_v2": 3538984, "xception": 22910480, "densenet121": 8062504,
                 "vgg16": 138357544, "vgg19": 143667240, "resnet101": 44707176, "resnet152": 60419944,
                 "resnet50_v2": 25613800, "resnet101_v2": 44675560, "resnet152_v2": 60380648,
                 "densenet169": 14307880, "densenet201": 20242984, "inception_v3": 23851784,
                 "inception_resnet_v2": 55873736, "nasnet_mobile": 5326716, "nasnet_large": 88949818}
    for model, total in published.items():
        size = {"xception": 299, "inception_v3": 299, "inception_resnet_v2": 299, "nasnet_large": 331}.get(model, 224)
        layers, _, _, _ = keras_structure(model, size, True, None, 1000)
        got = sum(p for _, _, p in layers.values())
        if got != total:
            print("FAIL the tracer: Keras's %s has %d params, the tracer counts %d" % (model, total, got))
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
