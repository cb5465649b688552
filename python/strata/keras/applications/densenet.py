"""``strata.keras.applications.densenet``: as ``keras.applications.densenet``."""
from . import DenseNet121, DenseNet169, DenseNet201
from . import imagenet_utils
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["DenseNet121", "DenseNet169", "DenseNet201", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """Keras's densenet.preprocess_input: imagenet_utils.preprocess_input with mode "torch"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="torch")
