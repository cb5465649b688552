"""``strata.keras.applications.densenet``: as ``keras.applications.densenet``."""
from . import DenseNet121, DenseNet169, DenseNet201
from . import imagenet_utils

__all__ = ["DenseNet121", "DenseNet169", "DenseNet201", "preprocess_input"]


def preprocess_input(x, data_format=None):
    """Keras's densenet.preprocess_input: imagenet_utils.preprocess_input with mode "torch"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="torch")
