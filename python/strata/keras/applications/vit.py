"""``strata.keras.applications.vit``: the Vision Transformer as KerasHub builds it (ViTB16, ViTS16),
with its image converter's scaling as ``preprocess_input``."""
from . import ViTB16, ViTS16
from . import imagenet_utils
from .imagenet_utils import decode_predictions  # noqa: F401

__all__ = ["ViTB16", "ViTS16", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """KerasHub's ViT image converter for its ImageNet presets: x / 127.5 - 1 (imagenet_utils'
    mode "tf")."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
