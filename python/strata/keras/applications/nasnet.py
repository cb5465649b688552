"""``strata.keras.applications.nasnet``: as ``keras.applications.nasnet``."""
from . import NASNetLarge, NASNetMobile
from . import imagenet_utils
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["NASNetMobile", "NASNetLarge", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """Keras's nasnet.preprocess_input: imagenet_utils.preprocess_input with mode "tf"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
