"""Keras's activation functions (``strata.keras.activations``) on symbolic tensors.

Each applies an ``Activation`` layer to a symbolic tensor (the functional API), and can be passed
as a layer's ``activation=``, as in Keras:

    y = strata.keras.activations.gelu(x, approximate=True)             # the tanh form
    layers.Dense(64, activation=functools.partial(activations.gelu, approximate=True))
"""
import functools

__all__ = ["linear", "relu", "relu6", "gelu", "swish", "silu", "sigmoid", "tanh", "hard_sigmoid", "hard_sigmoid_keras3",
           "hard_swish", "hard_silu", "softmax"]


def _apply(name, x):
    from .layers import Activation
    return Activation(name)(x)


def linear(x):
    return _apply("linear", x)


def relu(x):
    return _apply("relu", x)


def relu6(x):
    return _apply("relu6", x)


def gelu(x, approximate=False):
    """x * Phi(x) with the normal CDF through erf; approximate=True: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return _apply(_gelu_name(approximate), x)


def swish(x):
    return _apply("swish", x)


def silu(x):
    return _apply("silu", x)


def sigmoid(x):
    return _apply("sigmoid", x)


def tanh(x):
    return _apply("tanh", x)


def hard_sigmoid(x):
    """tf.keras 2's: clip(0.2 x + 0.5, 0, 1)."""
    return _apply("hard_sigmoid", x)


def hard_sigmoid_keras3(x):
    """Keras 3's hard_sigmoid (MobileNetV3's gate): relu6(x + 3) / 6."""
    return _apply("hard_sigmoid_keras3", x)


def hard_swish(x):
    """x * relu6(x + 3) / 6 (Keras 3's hard_swish, MobileNetV3's activation)."""
    return _apply("hard_swish", x)


def hard_silu(x):
    return _apply("hard_silu", x)


def softmax(x, axis=-1):
    if axis != -1:
        raise ValueError(f"softmax: only axis=-1 is supported, got {axis}")
    return _apply("softmax", x)


def _gelu_name(approximate):
    return "gelu_approximate" if approximate else "gelu"


def _name_of(fn):
    """The activation name of one of this module's functions, or of gelu bound by functools.partial."""
    if isinstance(fn, functools.partial) and fn.func is gelu and not fn.args and set(fn.keywords) <= {"approximate"}:
        return _gelu_name(fn.keywords.get("approximate", False))
    if getattr(fn, "__module__", None) == __name__ and getattr(fn, "__name__", None) in __all__:
        return fn.__name__
    return None
