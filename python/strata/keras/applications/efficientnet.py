"""``strata.keras.applications.efficientnet``: as ``keras.applications.efficientnet``."""
from . import EfficientNetB0, EfficientNetB1, EfficientNetB2, EfficientNetB3, EfficientNetB4, EfficientNetB5, EfficientNetB6, EfficientNetB7
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4", "EfficientNetB5", "EfficientNetB6", "EfficientNetB7", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """A pass-through, as Keras's: EfficientNet rescales and normalizes inside the model (its
    Rescaling and Normalization layers take pixels in [0, 255])."""
    return x
