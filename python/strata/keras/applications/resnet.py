"""``strata.keras.applications.resnet``: as ``keras.applications.resnet``."""
from . import ResNet50, ResNet101, ResNet152
from . import imagenet_utils
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["ResNet50", "ResNet101", "ResNet152", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """Keras's resnet.preprocess_input: imagenet_utils.preprocess_input with mode "caffe"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")
