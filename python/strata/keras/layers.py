"""Keras layers (``strata.keras.layers``) with Keras's constructor keywords and defaults.

Each builds its C++ layer from its Keras class name and config, as a model spec file's layer
entry is built, so an unknown keyword is a ``strata.errors.InvalidArgumentError`` naming the layer.
Calling a layer on a symbolic tensor (``strata.keras.Input`` or another layer's output) gives a
symbolic tensor: the functional API.
"""
import json
import weakref

from .. import _strata

_k = _strata.keras

__all__ = [
    "Layer", "InputLayer", "Dense", "Conv2D", "DepthwiseConv2D", "SeparableConv2D", "BatchNormalization",
    "Activation", "ReLU", "MaxPooling2D", "AveragePooling2D", "MaxPool2D", "AvgPool2D", "GlobalAveragePooling2D",
    "GlobalMaxPooling2D", "Flatten", "Dropout", "Add", "Multiply", "Concatenate", "CustomScaleLayer", "Rescaling", "Reshape",
    "ZeroPadding2D", "Cropping2D", "Normalization", "LayerNormalization", "LayerScale", "StochasticDepth",
    "MultiHeadAttention", "Embedding", "KerasTensor",
]


class KerasTensor:
    """A symbolic tensor: ``strata.keras.Input(...)`` or a layer called on symbolic tensors."""

    def __init__(self, cc, shape=None, dtype="float32", name=None, keras_history=None):
        self._cc = cc
        self._keras_history = keras_history  # (layer, inputs) that made it: keeps them alive
        self._shape = shape  # (None, ...) for an Input; a layer's output is inferred when asked
        self.dtype = dtype
        self.name = name

    @property
    def shape(self):
        """(None, ...): the batch dimension, then the per-example shape, inferred through the layers
        that make the tensor (a shape error names the layer)."""
        if self._shape is None:
            self._shape = (None,) + tuple(_k.shape_of(self._cc))
        return self._shape

    def __repr__(self):
        return f"<KerasTensor shape={self._shape} dtype={self.dtype} name={self.name}>"


# C++ layer address -> its Python layer, so model.layers gives back the objects the user made.
_by_address = weakref.WeakValueDictionary()


def _symbolic(inputs):
    if isinstance(inputs, KerasTensor):
        return inputs._cc
    if isinstance(inputs, (list, tuple)):
        out = []
        for x in inputs:
            if not isinstance(x, KerasTensor):
                raise TypeError(f"inputs: expected symbolic tensors (strata.keras.Input or a layer's output), got "
                                f"{type(x).__name__}")
            out.append(x._cc)
        return out
    raise TypeError(f"inputs: a layer is called on symbolic tensors (strata.keras.Input or a layer's output); "
                    f"got {type(inputs).__name__} (use model.predict for arrays)")


def _activation(a):
    """A Keras activation name, or a function of strata.keras.activations (gelu with approximate=True
    bound by functools.partial included), as the name its C++ layer reads."""
    if a is None:
        return "linear"
    if isinstance(a, str):
        return a
    from . import activations
    name = activations._name_of(a)
    if name is None:
        raise TypeError(f"activation: expected a Keras activation name ('relu', 'softmax', ...) or a function of "
                        f"strata.keras.activations, got {a!r}")
    return name


class Layer:
    """Base class of the layers: name, trainable, and calling on symbolic tensors."""

    _class_name = None

    def __init__(self, name=None, trainable=True, dtype=None, input_shape=None, _config=None, _cc=None, **kwargs):
        if dtype not in (None, "float32"):
            raise ValueError(f"{type(self).__name__}: dtype must be float32 (mixed precision is compile(precision=...)); "
                             f"got {dtype!r}")
        if _cc is None:
            config = dict(_config or {})
            config.update(kwargs)  # Keras keywords passed through: the C++ spec parser names unknown ones
            _cc = _k.layer_from_config(self._class_name or type(self).__name__, json.dumps(config), name or "")
        self._cc = _cc
        self._cc.trainable = bool(trainable)
        _by_address[_cc._address] = self
        # Keras's input_shape= on a Sequential's first layer: the per-example shape.
        self._input_shape = tuple(input_shape) if input_shape is not None else None

    @classmethod
    def _wrap(cls, cc):
        layer = Layer.__new__(Layer)
        layer._cc = cc
        layer._input_shape = None
        return layer

    @property
    def name(self):
        return self._cc.name

    @property
    def trainable(self):
        return self._cc.trainable

    @trainable.setter
    def trainable(self, value):
        # Takes effect at the next compile(), as in Keras.
        self._cc.trainable = bool(value)

    @property
    def class_name(self):
        return self._cc.class_name

    def __call__(self, inputs):
        return KerasTensor(_k.call(self._cc, _symbolic(inputs)), keras_history=(self, inputs))

    def __repr__(self):
        return f"<{self._cc.class_name} name={self._cc.name}>"


class InputLayer(Layer):
    """A Sequential's first entry: the per-example input shape (no batch dimension)."""

    def __init__(self, shape=None, batch_size=None, dtype="float32", name=None, input_shape=None, **kwargs):
        shape = shape if shape is not None else input_shape
        if shape is None:
            raise ValueError("InputLayer: pass shape= (the per-example shape, without the batch dimension)")
        self._cc = _k.input_layer([int(d) for d in shape], dtype or "float32", name or "")
        _by_address[self._cc._address] = self
        self._input_shape = tuple(shape)


class Dense(Layer):
    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, **kwargs):
        super().__init__(_config=dict(units=units, activation=_activation(activation), use_bias=use_bias,
                                      kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                                      kernel_regularizer=kernel_regularizer), **kwargs)


class Conv2D(Layer):
    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", dilation_rate=(1, 1), groups=1,
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, **kwargs):
        super().__init__(_config=dict(filters=filters, kernel_size=kernel_size, strides=strides, padding=padding,
                                      dilation_rate=dilation_rate, groups=groups, activation=_activation(activation),
                                      use_bias=use_bias, kernel_initializer=kernel_initializer,
                                      bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer),
                         **kwargs)


class DepthwiseConv2D(Layer):
    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1, dilation_rate=(1, 1),
                 activation=None, use_bias=True, depthwise_initializer="glorot_uniform", bias_initializer="zeros",
                 depthwise_regularizer=None, **kwargs):
        super().__init__(_config=dict(kernel_size=kernel_size, strides=strides, padding=padding,
                                      depth_multiplier=depth_multiplier, dilation_rate=dilation_rate,
                                      activation=_activation(activation), use_bias=use_bias,
                                      depthwise_initializer=depthwise_initializer, bias_initializer=bias_initializer,
                                      depthwise_regularizer=depthwise_regularizer), **kwargs)


class SeparableConv2D(Layer):
    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", dilation_rate=(1, 1),
                 depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(_config=dict(filters=filters, kernel_size=kernel_size, strides=strides, padding=padding,
                                      dilation_rate=dilation_rate, depth_multiplier=depth_multiplier,
                                      activation=_activation(activation), use_bias=use_bias,
                                      depthwise_initializer=depthwise_initializer,
                                      pointwise_initializer=pointwise_initializer,
                                      bias_initializer=bias_initializer), **kwargs)


class BatchNormalization(Layer):
    def __init__(self, axis=-1, momentum=0.99, epsilon=0.001, center=True, scale=True, synchronized=False, **kwargs):
        super().__init__(_config=dict(axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
                                      synchronized=synchronized), **kwargs)


class Activation(Layer):
    def __init__(self, activation, **kwargs):
        super().__init__(_config=dict(activation=_activation(activation)), **kwargs)


class ReLU(Layer):
    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        super().__init__(_config=dict(max_value=-1 if max_value is None else max_value, negative_slope=negative_slope,
                                      threshold=threshold), **kwargs)


class _Pooling2D(Layer):
    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", **kwargs):
        super().__init__(_config=dict(pool_size=pool_size, strides=strides, padding=padding), **kwargs)


class MaxPooling2D(_Pooling2D):
    _class_name = "MaxPooling2D"


class AveragePooling2D(_Pooling2D):
    _class_name = "AveragePooling2D"


MaxPool2D = MaxPooling2D
AvgPool2D = AveragePooling2D


class GlobalAveragePooling2D(Layer):
    def __init__(self, keepdims=False, **kwargs):
        super().__init__(_config={"keepdims": bool(keepdims)}, **kwargs)


class GlobalMaxPooling2D(Layer):
    def __init__(self, keepdims=False, **kwargs):
        super().__init__(_config={"keepdims": bool(keepdims)}, **kwargs)


class Flatten(Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)


class Dropout(Layer):
    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(_config=dict(rate=rate, noise_shape=list(noise_shape) if noise_shape is not None else None,
                                      seed=seed), **kwargs)


class LayerScale(Layer):
    """ConvNeXt's LayerScale (keras.applications.convnext): x * gamma along the last axis, one
    trainable weight gamma [projection_dim], every entry init_values at first."""

    def __init__(self, init_values, projection_dim, **kwargs):
        super().__init__(_config=dict(init_values=float(init_values), projection_dim=int(projection_dim)), **kwargs)


class StochasticDepth(Layer):
    """Stochastic depth on a residual branch (ConvNeXt's StochasticDepth, timm's DropPath): in
    training each example's branch is dropped whole with probability drop_path_rate, the kept
    ones scaled by 1 / (1 - rate); the identity at inference."""

    def __init__(self, drop_path_rate, **kwargs):
        super().__init__(_config=dict(drop_path_rate=float(drop_path_rate)), **kwargs)


class MultiHeadAttention(Layer):
    """keras.layers.MultiHeadAttention: attention of query over value (and key, by default the
    value) in num_heads heads of key_dim (queries, keys) and value_dim (values; default key_dim),
    projected back to output_shape (default the query's features). Weights as Keras's EinsumDense
    kernels: query/kernel [d, num_heads, key_dim], ..., attention_output/kernel [num_heads,
    value_dim, out]. attention_mask: [batch, query tokens, key tokens], 1 to attend, 0 not."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None,
                 attention_axes=None, kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        config = dict(num_heads=int(num_heads), key_dim=int(key_dim), dropout=float(dropout), use_bias=bool(use_bias),
                      kernel_initializer=kernel_initializer, bias_initializer=bias_initializer)
        if value_dim is not None:
            config["value_dim"] = int(value_dim)
        if output_shape is not None:
            config["output_shape"] = output_shape if isinstance(output_shape, int) else list(output_shape)
        if attention_axes is not None:
            config["attention_axes"] = attention_axes
        super().__init__(_config=config, **kwargs)

    def __call__(self, query, value, key=None, attention_mask=None, return_attention_scores=False, training=None):
        if return_attention_scores:
            raise NotImplementedError(f"{self.name}: return_attention_scores is not offered (a layer has one output)")
        inputs = [query, value]
        if key is not None or attention_mask is not None:
            inputs.append(value if key is None else key)
        if attention_mask is not None:
            inputs.append(attention_mask)
        return super().__call__(inputs)


class Embedding(Layer):
    """keras.layers.Embedding: the row of `embeddings` [input_dim, output_dim] at each id (int32
    or whole-number floats); an id outside [0, input_dim) fails the step naming the layer."""

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", mask_zero=False, **kwargs):
        super().__init__(_config=dict(input_dim=int(input_dim), output_dim=int(output_dim),
                                      embeddings_initializer=embeddings_initializer, mask_zero=bool(mask_zero)),
                         **kwargs)


class Add(Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)


class Multiply(Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)


class Concatenate(Layer):
    def __init__(self, axis=-1, **kwargs):
        super().__init__(_config=dict(axis=axis), **kwargs)


class CustomScaleLayer(Layer):
    """keras.applications' scaled residual (InceptionResNetV2): called on [shortcut, residual],
    returns shortcut + residual * scale."""

    def __init__(self, scale, **kwargs):
        super().__init__(_config=dict(scale=float(scale)), **kwargs)


class Rescaling(Layer):
    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(_config=dict(scale=scale, offset=offset), **kwargs)


class Reshape(Layer):
    def __init__(self, target_shape, **kwargs):
        super().__init__(_config=dict(target_shape=[int(d) for d in target_shape]), **kwargs)


class ZeroPadding2D(Layer):
    def __init__(self, padding=(1, 1), **kwargs):
        super().__init__(_config=dict(padding=padding), **kwargs)


class Cropping2D(Layer):
    """Keras's Cropping2D: ``cropping`` an int, (rows, cols) or ((top, bottom), (left, right))."""

    def __init__(self, cropping=((0, 0), (0, 0)), **kwargs):
        super().__init__(_config=dict(cropping=cropping), **kwargs)


class LayerNormalization(Layer):
    """Keras's LayerNormalization over the last axis: weights gamma (scale) and beta (center)."""

    def __init__(self, axis=-1, epsilon=0.001, center=True, scale=True, rms_scaling=False, **kwargs):
        super().__init__(_config=dict(axis=axis, epsilon=epsilon, center=center, scale=scale, rms_scaling=rms_scaling),
                         **kwargs)


class Normalization(Layer):
    def __init__(self, axis=-1, mean=None, variance=None, invert=False, **kwargs):
        import numpy as np
        flat = lambda v: None if v is None else [float(x) for x in np.ravel(np.asarray(v, dtype=np.float64))]
        super().__init__(_config=dict(axis=axis, mean=flat(mean), variance=flat(variance), invert=invert), **kwargs)
