"""``strata.keras.applications.vgg16``: as ``keras.applications.vgg16``."""
from . import VGG16
from . import imagenet_utils
from .imagenet_utils import decode_predictions  # noqa: F401 (Keras re-exports it per family)

__all__ = ["VGG16", "preprocess_input", "decode_predictions"]


def preprocess_input(x, data_format=None):
    """Keras's vgg16.preprocess_input: imagenet_utils.preprocess_input with mode "caffe"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")
