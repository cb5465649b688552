"""``strata.keras.applications.mobilenet``: as ``keras.applications.mobilenet``."""
from . import MobileNet
from . import imagenet_utils

__all__ = ["MobileNet", "preprocess_input"]


def preprocess_input(x, data_format=None):
    """Keras's mobilenet.preprocess_input: imagenet_utils.preprocess_input with mode "tf"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
