"""``strata.keras.applications.mobilenet_v2``: as ``keras.applications.mobilenet_v2``."""
from . import MobileNetV2
from . import imagenet_utils
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["MobileNetV2", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """Keras's mobilenet_v2.preprocess_input: imagenet_utils.preprocess_input with mode "tf"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
