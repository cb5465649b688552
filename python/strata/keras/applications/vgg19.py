"""``strata.keras.applications.vgg19``: as ``keras.applications.vgg19``."""
from . import VGG19
from . import imagenet_utils
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["VGG19", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """Keras's vgg19.preprocess_input: imagenet_utils.preprocess_input with mode "caffe"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")
