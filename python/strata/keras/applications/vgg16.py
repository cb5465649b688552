"""``strata.keras.applications.vgg16``: as ``keras.applications.vgg16``."""
from . import VGG16
from . import imagenet_utils

__all__ = ["VGG16", "preprocess_input"]


def preprocess_input(x, data_format=None):
    """Keras's vgg16.preprocess_input: imagenet_utils.preprocess_input with mode "caffe"."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")
