"""Keras's own model source, computed: a float64 stand-in for the Keras modules.

keras_applications 1.0.8 (Debian's python3-keras-applications) builds each model from the
`layers`, `backend`, `models` and `utils` modules it is handed. applications_structure_test.py
hands it a stand-in that only traces shapes; this one computes, with torch.nn.functional, so that
Keras's own source becomes the oracle for the models torchvision has no twin of (issue 44):
ResNet and ResNetV2, MobileNet V1, InceptionV3, InceptionResNetV2 and NASNetMobile, and for
every gradient of DenseNet169 (torchvision's twin is checked on its last layers only).

    model = build("resnet50_v2", input_shape=(64, 64, 3), classes=10, logits=True)
    model.weights                     # {"conv1_conv/kernel": tensor, ...}, Keras's names and shapes
    y = model.forward(x_nhwc, training=True)   # autograd reaches every trainable weight

What it keeps of Keras (channels_last only, as Strata):
  - tensors are NHWC; a convolution or pool views them as NCHW only around the torch call;
  - 'same' is TensorFlow's: out = ceil(n / stride), the odd padding pixel at the end (bottom,
    right); max pools pad with -inf (the padding is never the max), average pools divide by the
    pixels inside the image only;
  - weights in Keras's creation order, names and shapes (depthwise kernels [k, k, C, m]; Strata's
    [k, k, 1, C*m] holds the same elements in the same order: strata_layout), named by Keras's
    automatic names where the source gives none ("conv2d", "conv2d_1", ...), then renamed to
    tf.keras 2.x's where 1.0.8 differs (TF_KERAS_RENAMES of applications_structure_test.py, the
    one home of those renames);
  - batch norm: moving statistics in inference; in training the batch's mean and biased
    variance (the moving statistics are not updated: the oracle is a function of the weights);
  - Dropout is the identity (compare training steps with dropout=0);
  - Lambda calls its function on the torch tensors (InceptionResNetV2's residual scaling).
Every layer's output shape comes from computing it once on a zero batch of one at build time, so
what the source reads back (backend.int_shape) is what the layer computes.

Adding a model: one KERAS_FUNCTIONS entry (and its renames, if any, in TF_KERAS_RENAMES).
"""
import contextlib
import math
import os
import sys
import types

import numpy as np
import torch
import torch.nn.functional as F

from keras_applications import (densenet, inception_resnet_v2, inception_v3, mobilenet, nasnet, resnet_common,
                                vgg16, xception)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from applications_structure_test import TF_KERAS_RENAMES, strata_depthwise_shape  # noqa: E402

KERAS_FUNCTIONS = {
    "vgg16": vgg16.VGG16,
    "resnet50": resnet_common.ResNet50,
    "resnet101": resnet_common.ResNet101,
    "resnet50_v2": resnet_common.ResNet50V2,
    "resnet101_v2": resnet_common.ResNet101V2,
    "mobilenet": mobilenet.MobileNet,
    "xception": xception.Xception,
    "densenet121": densenet.DenseNet121,
    "densenet169": densenet.DenseNet169,
    "inception_v3": inception_v3.InceptionV3,
    "inception_resnet_v2": inception_resnet_v2.InceptionResNetV2,
    "nasnet_mobile": nasnet.NASNetMobile,
}


# ---- one build: Keras's automatic names, the graph, the weights ------------------------------
class _Build:
    def __init__(self, renames, generator, dtype):
        self.renames, self.generator, self.dtype = renames, generator, dtype
        self.counts = {}
        self.nodes = []     # (layer, input tensors, output tensor), in call order: a topological order
        self.weights = {}   # name -> tensor, in creation order
        self.trainable = set()

    def auto_name(self, prefix):
        """Keras's backend.unique_object_name: the prefix, then prefix_1, prefix_2, ..."""
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return prefix if n == 0 else "%s_%d" % (prefix, n)


_BUILD = None


class KTensor:
    """A symbolic Keras tensor: its shape (batch None) and the node that makes it."""

    def __init__(self, shape, index):
        self.shape, self.index = tuple(shape), index


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _glorot_uniform(shape, generator):
    """Keras's default kernel initializer, on Keras's shape."""
    receptive = math.prod(shape[:-2]) if len(shape) > 2 else 1
    limit = math.sqrt(6.0 / (receptive * shape[-2] + receptive * shape[-1]))
    return (torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1) * limit


class Layer:
    prefix = None  # Keras's automatic name prefix: the class name in snake case

    def __init__(self, name=None, **kwargs):
        own = name or _BUILD.auto_name(self.prefix)
        renamed = _BUILD.renames.get(own, own)
        self.name = own if renamed is None else renamed  # None: tf.keras has no such layer (weightless)
        self.built = False

    def add_weight(self, name, shape, init="zeros", trainable=True):
        full = "%s/%s" % (self.name, name)
        assert full not in _BUILD.weights, "two weights named %s" % full
        if init == "glorot_uniform":
            value = _glorot_uniform(tuple(shape), _BUILD.generator)
        else:
            value = {"zeros": torch.zeros, "ones": torch.ones}[init](tuple(shape), dtype=torch.float64)
        value = value.to(_BUILD.dtype).requires_grad_(trainable)
        _BUILD.weights[full] = value
        if trainable:
            _BUILD.trainable.add(full)
        return full

    def build(self, shapes):
        """Creates the weights from the input shapes (Keras's Layer.build)."""

    def call(self, x, w, training):
        """The output from the input tensor (a list for merge layers) and the weights dict."""
        raise NotImplementedError

    def __call__(self, inputs):
        many = isinstance(inputs, (list, tuple))
        xs = list(inputs) if many else [inputs]
        if not self.built:
            self.build([x.shape for x in xs])
            self.built = True
        zeros = [torch.zeros((1,) + x.shape[1:], dtype=_BUILD.dtype) for x in xs]
        with torch.no_grad():
            out = self.call(zeros if many else zeros[0], _BUILD.weights, False)
        _BUILD.nodes.append((self, [x.index for x in xs], many))
        return KTensor((None,) + tuple(out.shape[1:]), len(_BUILD.nodes) - 1)


class InputLayer(Layer):
    prefix = "input"


def Input(shape=None, tensor=None, name=None, **kwargs):
    assert tensor is None, "the oracle builds its own input"
    _BUILD.counts.setdefault("input", 1)  # Keras numbers inputs from 1
    layer = InputLayer(name)
    _BUILD.nodes.append((layer, [], False))
    return KTensor((None,) + tuple(shape), len(_BUILD.nodes) - 1)


# ---- activations -----------------------------------------------------------------------------
ACTIVATIONS = {
    None: lambda x: x,
    "linear": lambda x: x,
    "relu": F.relu,
    "relu6": lambda x: torch.clamp(x, 0.0, 6.0),
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "elu": F.elu,
    "selu": F.selu,
    "softplus": F.softplus,
    "softsign": F.softsign,
    "swish": F.silu,
    "hard_sigmoid": lambda x: torch.clamp(0.2 * x + 0.5, 0.0, 1.0),  # Keras 2's
    "exponential": torch.exp,
}


def _activation(name):
    if callable(name):
        return name
    if name not in ACTIVATIONS:
        raise ValueError("activation %r: not in the oracle's ACTIVATIONS" % name)
    return ACTIVATIONS[name]


# ---- windows: TensorFlow's 'same', NHWC <-> NCHW ----------------------------------------------
def same_padding(n, k, s, d=1):
    """TensorFlow's 'same' on one side of n pixels: (before, after), the odd pixel after."""
    k_eff = (k - 1) * d + 1
    total = max((-(-n // s) - 1) * s + k_eff - n, 0)
    return total // 2, total - total // 2


def _pad_nhwc(x, rows, cols, value=0.0):
    """Pads the H and W of an NHWC tensor: rows = (top, bottom), cols = (left, right)."""
    if not any(rows + cols):
        return x
    return F.pad(x, (0, 0) + tuple(cols) + tuple(rows), value=value)


def _window_pad(x, padding, k, s, d=(1, 1), value=0.0):
    padding = padding.lower()
    if padding == "valid":
        return x
    if padding != "same":
        raise ValueError("padding %r" % padding)
    return _pad_nhwc(x, same_padding(x.shape[1], k[0], s[0], d[0]), same_padding(x.shape[2], k[1], s[1], d[1]), value)


def _nchw(x):
    return x.permute(0, 3, 1, 2)


def _nhwc(x):
    return x.permute(0, 2, 3, 1)


def _hwio_to_oihw(kernel):
    return kernel.permute(3, 2, 0, 1)


def _depthwise_to_torch(kernel):
    """Keras's [k, k, C, m] -> torch's grouped [C*m, 1, k, k] (output channel c*m + j, as TF)."""
    kh, kw, c, m = kernel.shape
    return kernel.reshape(kh, kw, 1, c * m).permute(3, 2, 0, 1)


# ---- convolutions ----------------------------------------------------------------------------
class _Conv(Layer):
    def __init__(self, kernel_size, strides=(1, 1), padding="valid", dilation_rate=(1, 1), use_bias=True,
                 activation=None, depth_multiplier=1, name=None, data_format=None, **kwargs):
        super().__init__(name)
        assert data_format in (None, "channels_last")
        self.k, self.s, self.d = _pair(kernel_size), _pair(strides), _pair(dilation_rate)
        self.padding, self.use_bias, self.m = padding, use_bias, depth_multiplier
        self.activation = activation

    def _torch_conv(self, x, weight, groups=1):
        x = _window_pad(x, self.padding, self.k, self.s, self.d)
        return _nhwc(F.conv2d(_nchw(x), weight, stride=self.s, dilation=self.d, groups=groups))

    def _finish(self, y, w):
        if self.use_bias:
            y = y + w[self.name + "/bias"]
        return _activation(self.activation)(y)


class Conv2D(_Conv):
    prefix = "conv2d"

    def __init__(self, filters, kernel_size, **kwargs):
        super().__init__(kernel_size, **kwargs)
        self.filters = filters

    def build(self, shapes):
        self.add_weight("kernel", self.k + (shapes[0][-1], self.filters), "glorot_uniform")
        if self.use_bias:
            self.add_weight("bias", (self.filters,))

    def call(self, x, w, training):
        return self._finish(self._torch_conv(x, _hwio_to_oihw(w[self.name + "/kernel"])), w)


class DepthwiseConv2D(_Conv):
    prefix = "depthwise_conv2d"

    def build(self, shapes):
        c = shapes[0][-1]
        self.add_weight("depthwise_kernel", self.k + (c, self.m), "glorot_uniform")
        if self.use_bias:
            self.add_weight("bias", (c * self.m,))

    def call(self, x, w, training):
        y = self._torch_conv(x, _depthwise_to_torch(w[self.name + "/depthwise_kernel"]), groups=x.shape[-1])
        return self._finish(y, w)


class SeparableConv2D(_Conv):
    """The depthwise convolution (strides, padding, dilation), then the 1x1 pointwise one."""
    prefix = "separable_conv2d"

    def __init__(self, filters, kernel_size, **kwargs):
        super().__init__(kernel_size, **kwargs)
        self.filters = filters

    def build(self, shapes):
        c = shapes[0][-1]
        self.add_weight("depthwise_kernel", self.k + (c, self.m), "glorot_uniform")
        self.add_weight("pointwise_kernel", (1, 1, c * self.m, self.filters), "glorot_uniform")
        if self.use_bias:
            self.add_weight("bias", (self.filters,))

    def call(self, x, w, training):
        y = self._torch_conv(x, _depthwise_to_torch(w[self.name + "/depthwise_kernel"]), groups=x.shape[-1])
        y = _nhwc(F.conv2d(_nchw(y), _hwio_to_oihw(w[self.name + "/pointwise_kernel"])))
        return self._finish(y, w)


class Dense(Layer):
    prefix = "dense"

    def __init__(self, units, activation=None, use_bias=True, name=None, **kwargs):
        super().__init__(name)
        self.units, self.activation, self.use_bias = units, activation, use_bias

    def build(self, shapes):
        self.add_weight("kernel", (shapes[0][-1], self.units), "glorot_uniform")
        if self.use_bias:
            self.add_weight("bias", (self.units,))

    def call(self, x, w, training):
        y = x @ w[self.name + "/kernel"]
        if self.use_bias:
            y = y + w[self.name + "/bias"]
        return _activation(self.activation)(y)


# ---- normalization ---------------------------------------------------------------------------
class BatchNormalization(Layer):
    """Inference: the moving statistics. Training: the batch's mean and biased variance over every
    axis but the channels (as TF's fused batch norm normalises)."""
    prefix = "batch_normalization"

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True, name=None, **kwargs):
        super().__init__(name)
        self.axis, self.momentum, self.epsilon = axis, momentum, epsilon
        self.center, self.scale = center, scale

    def build(self, shapes):
        rank = len(shapes[0])
        assert self.axis in (-1, rank - 1), "channels_last only: axis %r" % self.axis
        c = shapes[0][-1]
        if self.scale:
            self.add_weight("gamma", (c,), "ones")
        if self.center:
            self.add_weight("beta", (c,))
        self.add_weight("moving_mean", (c,), trainable=False)
        self.add_weight("moving_variance", (c,), "ones", trainable=False)

    def call(self, x, w, training):
        if training:
            dims = tuple(range(x.dim() - 1))
            mean, var = x.mean(dim=dims), x.var(dim=dims, unbiased=False)
        else:
            mean, var = w[self.name + "/moving_mean"], w[self.name + "/moving_variance"]
        y = (x - mean) * torch.rsqrt(var + self.epsilon)
        if self.scale:
            y = y * w[self.name + "/gamma"]
        if self.center:
            y = y + w[self.name + "/beta"]
        return y


# ---- elementwise and merge -------------------------------------------------------------------
class Activation(Layer):
    prefix = "activation"

    def __init__(self, activation, name=None, **kwargs):
        super().__init__(name)
        self.activation = activation

    def call(self, x, w, training):
        return _activation(self.activation)(x)


class ReLU(Layer):
    """Keras's ReLU layer: max_value caps, below the threshold the slope is negative_slope."""
    prefix = "re_lu"

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, name=None, **kwargs):
        super().__init__(name)
        self.max_value, self.negative_slope, self.threshold = max_value, negative_slope, threshold

    def call(self, x, w, training):
        if self.negative_slope == 0.0 and self.threshold == 0.0:
            y = F.relu(x)
        else:
            y = torch.where(x >= self.threshold, x, self.negative_slope * (x - self.threshold))
        return y if self.max_value is None else torch.clamp(y, max=float(self.max_value))


class Dropout(Layer):
    """The identity: the oracle's training step is compared with dropout 0."""
    prefix = "dropout"

    def __init__(self, rate, name=None, **kwargs):
        super().__init__(name)
        self.rate = rate

    def call(self, x, w, training):
        return x


class _Merge(Layer):
    def __init__(self, name=None, **kwargs):
        super().__init__(name)


class Add(_Merge):
    prefix = "add"

    def call(self, xs, w, training):
        return sum(xs[1:], xs[0])


class Multiply(_Merge):
    prefix = "multiply"

    def call(self, xs, w, training):
        y = xs[0]
        for x in xs[1:]:
            y = y * x
        return y


class Concatenate(Layer):
    prefix = "concatenate"

    def __init__(self, axis=-1, name=None, **kwargs):
        super().__init__(name)
        self.axis = axis

    def call(self, xs, w, training):
        return torch.cat(xs, dim=self.axis)


def add(inputs, **kwargs):
    return Add(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    return Multiply(**kwargs)(inputs)


def concatenate(inputs, axis=-1, **kwargs):
    return Concatenate(axis=axis, **kwargs)(inputs)


# ---- pooling, padding, reshaping -------------------------------------------------------------
class _Pooling2D(Layer):
    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", name=None, data_format=None, **kwargs):
        super().__init__(name)
        assert data_format in (None, "channels_last")
        self.k = _pair(pool_size)
        self.s = _pair(strides if strides is not None else pool_size)
        self.padding = padding


class MaxPooling2D(_Pooling2D):
    prefix = "max_pooling2d"

    def call(self, x, w, training):
        x = _window_pad(x, self.padding, self.k, self.s, value=-math.inf)  # the padding is never the max
        return _nhwc(F.max_pool2d(_nchw(x), self.k, self.s))


class AveragePooling2D(_Pooling2D):
    """'same' averages the pixels of the window inside the image only (TF's avg_pool)."""
    prefix = "average_pooling2d"

    def call(self, x, w, training):
        summed = _nhwc(F.avg_pool2d(_nchw(_window_pad(x, self.padding, self.k, self.s)), self.k, self.s))
        if self.padding.lower() == "valid":
            return summed
        ones = torch.ones((1,) + tuple(x.shape[1:3]) + (1,), dtype=x.dtype)
        inside = _nhwc(F.avg_pool2d(_nchw(_window_pad(ones, self.padding, self.k, self.s)), self.k, self.s))
        return summed / inside


class GlobalAveragePooling2D(Layer):
    prefix = "global_average_pooling2d"

    def call(self, x, w, training):
        return x.mean(dim=(1, 2))


class GlobalMaxPooling2D(Layer):
    prefix = "global_max_pooling2d"

    def call(self, x, w, training):
        return x.amax(dim=(1, 2))


def _two_pairs(v):
    """Keras's padding / cropping argument: n, (rows, cols) or ((top, bottom), (left, right))."""
    if isinstance(v, int):
        return (v, v), (v, v)
    return _pair(v[0]), _pair(v[1])


class ZeroPadding2D(Layer):
    prefix = "zero_padding2d"

    def __init__(self, padding=(1, 1), name=None, data_format=None, **kwargs):
        super().__init__(name)
        assert data_format in (None, "channels_last")
        self.padding = _two_pairs(padding)

    def call(self, x, w, training):
        return _pad_nhwc(x, *self.padding)


class Cropping2D(Layer):
    prefix = "cropping2d"

    def __init__(self, cropping=((0, 0), (0, 0)), name=None, data_format=None, **kwargs):
        super().__init__(name)
        assert data_format in (None, "channels_last")
        self.cropping = _two_pairs(cropping)

    def call(self, x, w, training):
        (t, b), (l, r) = self.cropping
        return x[:, t:x.shape[1] - b, l:x.shape[2] - r, :]


class Flatten(Layer):
    prefix = "flatten"

    def call(self, x, w, training):
        return x.reshape(x.shape[0], -1)  # NHWC order, as Keras's channels_last Flatten


class Reshape(Layer):
    prefix = "reshape"

    def __init__(self, target_shape, name=None, **kwargs):
        super().__init__(name)
        self.target_shape = tuple(target_shape)

    def call(self, x, w, training):
        return x.reshape((x.shape[0],) + self.target_shape)


class Lambda(Layer):
    """Calls the source's function on the torch tensors, with its `arguments` as keywords."""
    prefix = "lambda"

    def __init__(self, function, output_shape=None, arguments=None, name=None, **kwargs):
        super().__init__(name)
        self.function, self.arguments = function, arguments or {}

    def call(self, x, w, training):
        return self.function(x, **self.arguments)


# ---- the model -------------------------------------------------------------------------------
class Model:
    """Keras's functional model over the build's graph: forward(x_nhwc, training) runs it.

    weights: name -> tensor (Keras's names, shapes and creation order; the trainable ones require
    a gradient). layers: every layer in call order. hook(layer, inputs), if given to forward, runs
    before each layer (calibration reads a batch norm's input there)."""

    def __init__(self, inputs, outputs, name=None):
        self.name = name
        self.nodes = list(_BUILD.nodes)
        self.weights = dict(_BUILD.weights)
        self.trainable = set(_BUILD.trainable)
        self.input_index = inputs.index
        self.output_index = outputs.index
        self.layers = [layer for layer, _, _ in self.nodes]

    def layer(self, name):
        return next(l for l in self.layers if l.name == name)

    def inbound_layers(self, layer):
        """The layers whose outputs `layer` takes (each layer is called once in these models)."""
        (inbound,) = [inb for l, inb, _ in self.nodes if l is layer]
        return [self.nodes[j][0] for j in inbound]

    def forward(self, x, training=False, hook=None):
        dtype = next(iter(self.weights.values())).dtype
        x = torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x).to(dtype)
        values = {self.input_index: x}
        for i, (layer, inbound, many) in enumerate(self.nodes):
            if i == self.input_index or not inbound:
                continue
            xs = [values[j] for j in inbound]
            if hook is not None:
                hook(layer, xs)
            values[i] = layer.call(xs if many else xs[0], self.weights, training)
        return values[self.output_index]

    __call__ = forward

    def astype(self, dtype):
        """The same graph over a copy of the weights in another dtype (torch's own float32, to
        measure what rounding alone does)."""
        other = object.__new__(Model)
        other.__dict__.update(self.__dict__)
        other.weights = {n: t.detach().to(dtype).requires_grad_(n in self.trainable) for n, t in self.weights.items()}
        return other

    def trainable_weights(self):
        return {n: t for n, t in self.weights.items() if n in self.trainable}


def strata_layout(name, value):
    """A weight in the layout of Strata's variable store: depthwise kernels [k, k, 1, C*m]."""
    if name.endswith("/depthwise_kernel"):
        return value.reshape(strata_depthwise_shape(value.shape))
    return value


@contextlib.contextmanager
def _name_scope(name):
    yield


def _set_image_data_format(fmt):
    assert fmt == "channels_last", "the oracle is channels_last only"


LAYERS = types.SimpleNamespace(
    Input=Input, Conv2D=Conv2D, DepthwiseConv2D=DepthwiseConv2D, SeparableConv2D=SeparableConv2D,
    Dense=Dense, BatchNormalization=BatchNormalization, Activation=Activation, ReLU=ReLU, Dropout=Dropout,
    Add=Add, add=add, Multiply=Multiply, multiply=multiply, Concatenate=Concatenate, concatenate=concatenate,
    MaxPooling2D=MaxPooling2D, AveragePooling2D=AveragePooling2D, GlobalAveragePooling2D=GlobalAveragePooling2D,
    GlobalMaxPooling2D=GlobalMaxPooling2D, ZeroPadding2D=ZeroPadding2D, Cropping2D=Cropping2D, Flatten=Flatten,
    Reshape=Reshape, Lambda=Lambda)
BACKEND = types.SimpleNamespace(
    image_data_format=lambda: "channels_last", set_image_data_format=_set_image_data_format,
    int_shape=lambda x: x.shape, is_keras_tensor=lambda x: isinstance(x, KTensor), backend=lambda: "tensorflow",
    name_scope=_name_scope)
MODELS = types.SimpleNamespace(Model=Model)
UTILS = types.SimpleNamespace(get_source_inputs=lambda t: [t])


def build(model, input_shape, classes=1000, include_top=True, pooling=None, logits=False, seed=0,
          dtype=torch.float64, **kwargs):
    """Keras's `model` (a KERAS_FUNCTIONS key) built by its 1.0.8 source over this module's
    layers: weights=None, kernels glorot_uniform from `seed`, the rest Keras's initial values.
    logits=True: the classifier's softmax becomes linear (tf.keras's classifier_activation=None;
    1.0.8 has no such argument). kwargs: the function's own (alpha, depth_multiplier, dropout)."""
    global _BUILD
    _BUILD = _Build(TF_KERAS_RENAMES.get(model, {}), torch.Generator().manual_seed(seed), dtype)
    try:
        net = KERAS_FUNCTIONS[model](include_top=include_top, weights=None, input_shape=tuple(input_shape),
                                     pooling=pooling, classes=classes, backend=BACKEND, layers=LAYERS,
                                     models=MODELS, utils=UTILS, **kwargs)
    finally:
        _BUILD = None
    if logits:
        top = net.nodes[net.output_index][0]
        if getattr(top, "activation", None) != "softmax":
            raise ValueError("%s ends in %s, not a softmax" % (model, top.name))
        top.activation = "linear"
    return net


# ---- nontrivial, well-conditioned weights ----------------------------------------------------
def randomize(net, x, seed, big_gamma=0.0, beta=(0.0, 0.3)):
    """Draws every bias and batch-norm parameter away from Keras's initial values, and derives
    each batch norm's moving statistics from its own input on the batch x (as
    applications_oracle.py does, in network order during one inference pass), so the signal
    neither dies nor explodes through the depth:
      moving mean: the channel's batch mean x U(0.5, 1); moving variance: the layer's mean
      batch variance x 4 x U(0.5, 2) per channel (outputs at about half of gamma: contracting,
      which keeps rounding from growing layer over layer); gamma U(0.5, 1.5), but U(4, 8) in a
      `big_gamma` fraction of the channels (so ReLU6 clips); beta N(beta[0], beta[1]) (by
      default N(0, 0.3)); biases N(0, 0.3).
    Kernels keep their glorot_uniform draw."""
    rng = np.random.default_rng(seed)

    def set_(name, values):
        with torch.no_grad():
            net.weights[name].copy_(torch.as_tensor(np.asarray(values, np.float64)))

    for name, t in net.weights.items():
        if name.endswith("/bias"):
            set_(name, rng.normal(0.0, 0.3, t.shape))

    def calibrate(layer, xs):
        if not isinstance(layer, BatchNormalization):
            return
        inp = xs[0]
        c = inp.shape[-1]
        dims = tuple(range(inp.dim() - 1))
        mean = inp.mean(dim=dims).numpy()
        var = float(inp.var(dim=dims, unbiased=False).mean())
        set_(layer.name + "/moving_mean", mean * rng.uniform(0.5, 1.0, c))
        set_(layer.name + "/moving_variance", var * 4 * rng.uniform(0.5, 2.0, c) + 1e-6)
        if layer.scale:
            set_(layer.name + "/gamma", np.where(rng.uniform(0, 1, c) < big_gamma, rng.uniform(4, 8, c),
                                                 rng.uniform(0.5, 1.5, c)))
        if layer.center:
            set_(layer.name + "/beta", rng.normal(beta[0], beta[1], c))

    with torch.no_grad():
        net.forward(x, training=False, hook=calibrate)
    return net


def kinks(layer):
    """Where `layer`'s output has a kink in its input (ReLU: 0; ReLU6: 0 and 6), or []."""
    if isinstance(layer, ReLU):
        return [layer.threshold] + ([] if layer.max_value is None else [float(layer.max_value)])
    if isinstance(layer, Activation):
        return {"relu": [0.0], "relu6": [0.0, 6.0]}.get(layer.activation, [])
    return []


def clear_kinks(net, x, margin=1e-3, tie_margin=1e-4, passes=8):
    """Keeps every ReLU input of the training-mode pass on x at least `margin` x its channel's
    standard deviation away from a kink, by shifting the beta of the batch norm that feeds it
    (or the bias of InceptionResNetV2's residual branch, see shiftable); and the two largest
    positive values of every max-pool window at least `tie_margin` x the channel's standard
    deviation apart (see _separate_ties).

    A gradient jumps where a ReLU's input crosses its kink, and float32 moves every input by
    about 1e-5 of its channel's spread: an input that close to a kink gives float32 and float64
    different gradients (one of ResNet50V2's post_bn beta gradients: 11 %). Each channel that
    has such an input moves by the smallest beta shift that puts the kinks in the middle of a
    gap of at least 4 margins between its values (a small fraction of its spread); shifts are
    made in network order during one pass, so later layers see them. A kink after any other
    layer is left as it is (none in ResNet, MobileNet, InceptionV3, InceptionResNetV2 or
    DenseNet; NASNet's on each cell's inputs, concatenations, are).

    A max pool's gradient goes to its window's largest value: where the runner-up is within
    float32's rounding of it, float32 may route it elsewhere (InceptionResNetV2 at 107 px: one
    stem window 1.1e-6 of its channel's spread apart moved 4e-3 of conv2d_2's kernel gradient).
    A pool with such windows nudges the kernel that makes them and the pass starts again (the
    later values are stale), until a pass nudges nothing. Returns the number of beta shifts and
    of windows separated, over all passes."""
    shifted = [0]

    def shiftable(layer):
        """(variable, factor): the variable whose change by d / factor moves `layer`'s input by
        d: the beta of the batch norm that produces it, or of one term of the Add that produces
        it (ResNet's block output); for InceptionResNetV2's scaled residual x + scale * up (a
        Lambda), the bias of up's convolution, factor scale."""
        (producer,) = net.inbound_layers(layer)
        if isinstance(producer, Lambda) and set(producer.arguments) == {"scale"}:
            _, up = net.inbound_layers(producer)
            if isinstance(up, Conv2D) and up.use_bias:
                return up.name + "/bias", producer.arguments["scale"]
            return None
        terms = net.inbound_layers(producer) if isinstance(producer, Add) else [producer]
        bn = next((t for t in terms if isinstance(t, BatchNormalization) and t.center), None)
        return None if bn is None else (bn.name + "/beta", 1.0)

    def guard(layer, xs):
        where = kinks(layer)
        target = shiftable(layer) if where else None
        if target is None:
            return
        variable, factor = target
        pre = xs[0]
        v = pre.reshape(-1, pre.shape[-1]).t().numpy()
        width = margin * v.std(axis=1)
        dist = np.min([np.abs(v - k).min(axis=1) for k in where], axis=0)
        delta = np.zeros(len(v))
        for ch in np.nonzero(dist < width)[0]:
            values = np.sort(v[ch])
            gaps = values[1:] - values[:-1] >= 4 * width[ch]
            mids = ((values[1:] + values[:-1]) / 2)[gaps]
            # a shift d puts kink k at k - d relative to the values: the middle of a wide gap
            for d in sorted((k - mid for k in where for mid in mids), key=abs):
                if min(np.abs(values + d - k).min() for k in where) >= width[ch]:
                    delta[ch] = d
                    break
            else:
                raise ValueError("%s: no shift of channel %d clears its kinks" % (variable, ch))
        if delta.any():
            shifted[0] += int(np.count_nonzero(delta))
            d = torch.as_tensor(delta, dtype=pre.dtype)
            net.weights[variable].add_(d / factor)
            pre.add_(d)  # in place: every consumer of the shifted output sees the shift

    class _Restart(Exception):
        pass

    separated = 0
    for _ in range(passes):
        seen = {}  # layer name -> its inputs in this pass

        def hook(layer, xs):
            nonlocal separated
            seen[layer.name] = xs
            if isinstance(layer, MaxPooling2D):
                n = _separate_ties(net, layer, xs[0], seen, tie_margin)
                if n:
                    separated += n
                    raise _Restart  # the values after the nudged kernels are stale
            else:
                guard(layer, xs)

        try:
            with torch.no_grad():
                net.forward(x, training=True, hook=hook)
        except _Restart:
            continue
        return shifted[0], separated
    raise ValueError("max-pool ties still within %g of the spread after %d passes" % (tie_margin, passes))


def _tie_source(net, layer, channel, seen):
    """Follows channel `channel` of `layer`'s input back to the convolution that makes it, through
    what keeps the order of a channel's positive values (ReLU, training-mode batch norm with a
    positive gamma, concatenation, InceptionResNetV2's residual x + scale * up, zero padding):
    (conv, its channel, (dy, dx) to add to a position to get the conv's output position,
    d value / d conv output), or None. seen: each layer's inputs in this pass."""
    slope, shift = 1.0, (0, 0)
    (producer,) = net.inbound_layers(layer)
    while True:
        if isinstance(producer, Conv2D):
            return producer, channel, shift, slope
        if isinstance(producer, (Activation, ReLU)) and kinks(producer)[:1] == [0.0]:
            (producer,) = net.inbound_layers(producer)
        elif isinstance(producer, BatchNormalization):
            inp = seen[producer.name][0]
            var = float(inp[..., channel].var(unbiased=False))
            gamma = float(net.weights[producer.name + "/gamma"][channel]) if producer.scale else 1.0
            if gamma <= 0:
                return None
            slope *= gamma / math.sqrt(var + producer.epsilon)
            (producer,) = net.inbound_layers(producer)
        elif isinstance(producer, ZeroPadding2D):
            (top, _), (left, _) = producer.padding
            shift = (shift[0] - top, shift[1] - left)
            (producer,) = net.inbound_layers(producer)
        elif isinstance(producer, Concatenate) and producer.axis in (-1, 3):
            for term, t in zip(net.inbound_layers(producer), seen[producer.name]):
                if channel < t.shape[-1]:
                    producer = term
                    break
                channel -= t.shape[-1]
        elif isinstance(producer, Lambda) and set(producer.arguments) == {"scale"}:
            slope *= producer.arguments["scale"]
            producer = net.inbound_layers(producer)[1]
        else:
            return None


def _separate_ties(net, pool, P, seen, tie_margin):
    """Nudges kernels so that no window of the max pool `pool` over P (NHWC, this pass) has its
    two largest values positive and within tie_margin x the channel's standard deviation: the
    smallest change of the making convolution's kernel column (along the difference of the two
    positions' input patches) that opens the gap to 2 tie_margins. Returns the number nudged."""
    if pool.k[0] * pool.k[1] < 2:
        return 0  # ResNetV2's 1x1 strided pools: no window to tie in
    std = P.reshape(-1, P.shape[-1]).std(dim=0, unbiased=False)
    rows, cols = same_padding(P.shape[1], pool.k[0], pool.s[0]), same_padding(P.shape[2], pool.k[1], pool.s[1])
    if pool.padding.lower() == "valid":
        rows, cols = (0, 0), (0, 0)
    v = _nchw(_pad_nhwc(P, rows, cols, value=-math.inf))
    n, c, h, w = v.shape
    windows = F.unfold(v.reshape(n * c, 1, h, w), pool.k, stride=pool.s)  # [n*c, k*k, L]
    top = windows.topk(2, dim=1)
    gap = top.values[:, 0] - top.values[:, 1]
    near = (top.values[:, 1] > 0) & (gap < tie_margin * std.repeat(n)[:, None])
    out_w = (w - pool.k[1]) // pool.s[1] + 1
    nudged = 0
    for nc, l in near.nonzero().tolist():
        b, ch = divmod(nc, c)
        oy, ox = divmod(l, out_w)
        where = []
        for j in (0, 1):  # the largest, then the runner-up: positions in P
            ky, kx = divmod(int(top.indices[nc, j, l]), pool.k[1])
            where.append((oy * pool.s[0] + ky - rows[0], ox * pool.s[1] + kx - cols[0]))
        source = _tie_source(net, pool, ch, seen)
        if source is None:
            raise ValueError("%s: a tie in channel %d, not made by a convolution the oracle can nudge"
                             % (pool.name, ch))
        conv, out_ch, (dy, dx), slope = source
        inp = _window_pad(seen[conv.name][0], conv.padding, conv.k, conv.s, conv.d)
        patches = []
        for y, x_ in where:
            y, x_ = (y + dy) * conv.s[0], (x_ + dx) * conv.s[1]
            patches.append(inp[b, y:y + (conv.k[0] - 1) * conv.d[0] + 1:conv.d[0],
                               x_:x_ + (conv.k[1] - 1) * conv.d[1] + 1:conv.d[1], :])
        diff = patches[0] - patches[1]
        norm2 = float((diff * diff).sum())
        if norm2 == 0.0:
            raise ValueError("%s: an exact tie in channel %d (equal input patches)" % (pool.name, ch))
        need = (2 * tie_margin * float(std[ch]) - float(gap[nc, l])) / slope
        net.weights[conv.name + "/kernel"][..., out_ch].add_(diff * (need / norm2))
        nudged += 1
    return nudged
