"""``strata.keras.applications.vgg19``: as ``keras.applications.vgg19``."""
from . import VGG19
from . import imagenet_utils

__all__ = ["VGG19", "preprocess_input"]


def preprocess_input(x, data_format=None):
    """Keras's vgg19.preprocess_input: imagenet_utils.preprocess_input with mode "caffe"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")
