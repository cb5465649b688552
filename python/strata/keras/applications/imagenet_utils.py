"""``strata.keras.applications.imagenet_utils``: Keras's ``preprocess_input`` modes for ImageNet
weights, computed in C++ (keras::applications::PreprocessInput) in float32, in Keras's order of
operations, and ``decode_predictions`` over Keras's ImageNet class index (shipped inside Strata,
byte for byte Keras's imagenet_class_index.json: nothing is downloaded)."""
import numpy as np

from ... import _strata

__all__ = ["preprocess_input", "decode_predictions"]


_CLASSES = None


def decode_predictions(preds, top=5):
    """Keras's imagenet_utils.decode_predictions: for each row of ``preds`` (samples, 1000), a
    list of the ``top`` (class id, class name, score) tuples, highest score first, ranked by
    NumPy's argsort as Keras's are (so equal scores come out in Keras's order too); scores are
    ``preds``' own elements. Another shape raises ValueError naming it."""
    global _CLASSES
    preds = np.asarray(preds)
    if preds.ndim != 2 or preds.shape[1] != 1000:
        raise ValueError("decode_predictions expects a batch of predictions (i.e. a 2D array of shape "
                         f"(samples, 1000)). Found array with shape: {preds.shape}")
    if _CLASSES is None:
        _CLASSES = _strata.keras.imagenet_classes()
    results = []
    for pred in preds:
        top_indices = pred.argsort()[-top:][::-1]
        results.append([(*_CLASSES[i], pred[i]) for i in top_indices])
    return results


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
