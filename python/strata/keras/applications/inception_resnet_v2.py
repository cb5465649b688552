"""``strata.keras.applications.inception_resnet_v2``: as ``keras.applications.inception_resnet_v2``."""
from . import InceptionResNetV2
from . import imagenet_utils
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["InceptionResNetV2", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """Keras's inception_resnet_v2.preprocess_input: imagenet_utils.preprocess_input with mode "tf"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")
