"""``strata.keras.applications.imagenet_utils``: Keras's ``preprocess_input`` modes for ImageNet
weights, computed in C++ (keras::applications::PreprocessInput) in float32, in Keras's order of
operations."""
from ... import _strata

__all__ = ["preprocess_input"]


def preprocess_input(x, data_format=None, mode="caffe"):
    """Keras's imagenet_utils.preprocess_input: ``x`` RGB in [0, 255], channels last, as any numeric
    array (converted to float32). mode "caffe": to BGR, minus ImageNet's mean per channel; "tf": to
    [-1, 1]; "torch": to [0, 1], minus the mean, over the deviation per channel. Returns a new
    float32 array (Keras changes a float32 ``x`` in place and returns it)."""
    if data_format not in (None, "channels_last"):
        raise ValueError(f"preprocess_input: only data_format='channels_last' (Strata's layout), got {data_format!r}")
    if mode not in ("caffe", "tf", "torch"):
        raise ValueError(f"preprocess_input: mode must be 'caffe', 'tf' or 'torch', got {mode!r}")
    return _strata.keras.preprocess_input(x, mode)
