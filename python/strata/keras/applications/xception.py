"""``strata.keras.applications.xception``: as ``keras.applications.xception``."""
from . import Xception
from . import imagenet_utils

__all__ = ["Xception", "preprocess_input"]


def preprocess_input(x, data_format=None):
    """Keras's xception.preprocess_input: imagenet_utils.preprocess_input with mode "tf"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
