"""``strata.keras.applications.inception_v3``: as ``keras.applications.inception_v3``."""
from . import InceptionV3
from . import imagenet_utils
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["InceptionV3", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """Keras's inception_v3.preprocess_input: imagenet_utils.preprocess_input with mode "tf"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
