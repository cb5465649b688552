"""``strata.keras.applications``: the Keras applications Strata builds, with Keras's layer names
and weight layout (so Keras .h5 weight files load by name). ``weights`` must be None or a path
to a Keras weight file: nothing is downloaded."""
from .. import _strata
from .models import Model

__all__ = ["ResNet50", "MobileNetV2", "EfficientNetB0", "Xception", "DenseNet121"]


def _build(app, include_top, weights, input_tensor, input_shape, pooling, classes, classifier_activation, name,
           **kwargs):
    if kwargs:
        raise TypeError(f"{app}: unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
    if input_tensor is not None:
        raise NotImplementedError(f"{app}: input_tensor is not supported; pass input_shape")
    if weights == "imagenet":
        raise ValueError(f"{app}: weights='imagenet' would download; pass weights=None or the path of a Keras .h5 file")
    cc = _strata.keras.Model.application(app, bool(include_top), list(input_shape) if input_shape else None,
                                         int(classes), pooling or "", classifier_activation or "linear", name or "")
    model = Model(_cc=cc)
    if weights is not None:
        model.load_weights(weights, by_name=True, skip_mismatch=not include_top)
    return model


def ResNet50(include_top=True, weights=None, input_tensor=None, input_shape=None, pooling=None, classes=1000,
             classifier_activation="softmax", name=None, **kwargs):
    return _build("resnet50", include_top, weights, input_tensor, input_shape, pooling, classes,
                  classifier_activation, name, **kwargs)


def MobileNetV2(input_shape=None, alpha=1.0, include_top=True, weights=None, input_tensor=None, pooling=None,
                classes=1000, classifier_activation="softmax", name=None, **kwargs):
    if alpha != 1.0:
        raise NotImplementedError("MobileNetV2: only alpha=1.0 is built")
    return _build("mobilenet_v2", include_top, weights, input_tensor, input_shape, pooling, classes,
                  classifier_activation, name, **kwargs)


def EfficientNetB0(include_top=True, weights=None, input_tensor=None, input_shape=None, pooling=None, classes=1000,
                   classifier_activation="softmax", name=None, **kwargs):
    return _build("efficientnet_b0", include_top, weights, input_tensor, input_shape, pooling, classes,
                  classifier_activation, name, **kwargs)


def Xception(include_top=True, weights=None, input_tensor=None, input_shape=None, pooling=None, classes=1000,
             classifier_activation="softmax", name=None, **kwargs):
    return _build("xception", include_top, weights, input_tensor, input_shape, pooling, classes,
                  classifier_activation, name, **kwargs)


def DenseNet121(include_top=True, weights=None, input_tensor=None, input_shape=None, pooling=None, classes=1000,
                classifier_activation="softmax", name=None, **kwargs):
    return _build("densenet121", include_top, weights, input_tensor, input_shape, pooling, classes,
                  classifier_activation, name, **kwargs)
