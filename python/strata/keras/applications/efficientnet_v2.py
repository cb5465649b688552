"""``strata.keras.applications.efficientnet_v2``: as ``keras.applications.efficientnet_v2``."""
from . import (EfficientNetV2B0, EfficientNetV2B1, EfficientNetV2B2, EfficientNetV2B3, EfficientNetV2L,
               EfficientNetV2M, EfficientNetV2S)
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["EfficientNetV2B0", "EfficientNetV2B1", "EfficientNetV2B2", "EfficientNetV2B3", "EfficientNetV2S",
           "EfficientNetV2M", "EfficientNetV2L", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """A pass-through, as Keras's: EfficientNetV2 rescales (and, B0-B3, normalizes) inside the model
    (include_preprocessing=False leaves it to the caller)."""
    return x
