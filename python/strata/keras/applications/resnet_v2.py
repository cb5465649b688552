"""``strata.keras.applications.resnet_v2``: as ``keras.applications.resnet_v2``."""
from . import ResNet50V2, ResNet101V2, ResNet152V2
from . import imagenet_utils
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["ResNet50V2", "ResNet101V2", "ResNet152V2", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """Keras's resnet_v2.preprocess_input: imagenet_utils.preprocess_input with mode "tf"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
