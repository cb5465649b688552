"""``strata.keras.applications.mobilenet_v2``: as ``keras.applications.mobilenet_v2``."""
from . import MobileNetV2
from . import imagenet_utils

__all__ = ["MobileNetV2", "preprocess_input"]


def preprocess_input(x, data_format=None):
    """Keras's mobilenet_v2.preprocess_input: imagenet_utils.preprocess_input with mode "tf"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
