"""``strata.keras.applications.mobilenet_v3``: as ``keras.applications.mobilenet_v3``."""
from . import MobileNetV3Large, MobileNetV3Small
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["MobileNetV3Small", "MobileNetV3Large", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """A pass-through, as Keras's: MobileNetV3 rescales inside the model (its Rescaling takes
    pixels in [0, 255]; include_preprocessing=False leaves it to the caller)."""
    return x
