"""``strata.keras.applications.convnext``: as ``keras.applications.convnext``."""
from . import ConvNeXtBase, ConvNeXtLarge, ConvNeXtSmall, ConvNeXtTiny, ConvNeXtXLarge
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["ConvNeXtTiny", "ConvNeXtSmall", "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtXLarge", "preprocess_input",
           "decode_predictions"]


def preprocess_input(x, data_format=None):
    """A pass-through, as Keras's: ConvNeXt normalizes inside the model (its prestem
    Normalization takes pixels in [0, 255]; include_preprocessing=False leaves it to the caller)."""
    return x
