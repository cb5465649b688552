"""``strata.keras.applications.efficientnet``: as ``keras.applications.efficientnet``."""
from . import EfficientNetB0, EfficientNetB1, EfficientNetB2, EfficientNetB3, EfficientNetB4, EfficientNetB5, EfficientNetB6, EfficientNetB7

__all__ = ["EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4", "EfficientNetB5", "EfficientNetB6", "EfficientNetB7", "preprocess_input"]


def preprocess_input(x, data_format=None):
    """A pass-through, as Keras's: EfficientNet rescales and normalizes inside the model (its
    Rescaling and Normalization layers take pixels in [0, 255])."""
    return x
