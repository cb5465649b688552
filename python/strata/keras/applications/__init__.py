"""``strata.keras.applications``: the Keras applications Strata builds, with Keras's layer names
and weight layout. ``weights`` is None, "imagenet" (Keras's published file, downloaded once into
``~/.cache/strata/models`` or ``$STRATA_HOME/models`` and checked against Keras's hash; a copy
in Keras's ``~/.keras/models`` is used as it is) or the path of a Keras weight file, loaded as
Keras's applications load it: in order, every layer, or an error naming what does not match.
Each family's module (``resnet_v2``, ``efficientnet``, ...) has Keras's ``preprocess_input`` and
``decode_predictions``; ``imagenet_utils`` has the modes."""
import os

from ... import _strata
from ..layers import KerasTensor
from ..models import Model


def _imagenet_file(app, include_top, input_shape, classes, alpha, depth_multiplier, minimalistic=False):
    """Keras's (url, fname, file_hash) for the configuration (tests point it at a local server)."""
    return _strata.keras.imagenet_weights(app, include_top, input_shape, classes, alpha, depth_multiplier,
                                          minimalistic)

__all__ = ["VGG16", "VGG19", "ResNet50", "ResNet101", "ResNet152", "ResNet50V2", "ResNet101V2", "ResNet152V2",
           "MobileNet", "MobileNetV2", "MobileNetV3Small", "MobileNetV3Large", "EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4",
           "EfficientNetB5", "EfficientNetB6", "EfficientNetB7", "EfficientNetV2B0", "EfficientNetV2B1",
           "EfficientNetV2B2", "EfficientNetV2B3", "EfficientNetV2S", "EfficientNetV2M", "EfficientNetV2L", "InceptionV3", "InceptionResNetV2", "Xception",
           "NASNetMobile", "NASNetLarge", "DenseNet121", "DenseNet169", "DenseNet201",
           "ConvNeXtTiny", "ConvNeXtSmall", "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtXLarge", "ViTB16", "ViTS16"]


def _build(app, include_top, weights, input_tensor, input_shape, pooling, classes, classifier_activation, name,
           alpha=1.0, depth_multiplier=1, dropout=1e-3, include_preprocessing=True, minimalistic=False,
           dropout_rate=0.2, **kwargs):
    if kwargs:
        raise TypeError(f"{app}: unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
    tensor_cc = None
    if input_tensor is not None:
        # Keras's input_tensor: the model is built on it and takes its source inputs as its own.
        if not isinstance(input_tensor, KerasTensor):
            raise TypeError(f"{app}: input_tensor must be a symbolic tensor (strata.keras.Input or a layer's "
                            f"output), got {type(input_tensor).__name__}")
        tensor_cc = input_tensor._cc
        if input_shape is None:
            input_shape = input_tensor.shape[1:]
    shape = list(input_shape) if input_shape else None
    if weights == "imagenet":
        # Keras's checks (classes, input size, widths) before anything is built or fetched.
        url, fname, file_hash = _imagenet_file(app, bool(include_top), shape, int(classes), float(alpha),
                                               int(depth_multiplier), bool(minimalistic))
    elif weights is not None and not os.path.exists(weights):
        raise ValueError(f"{app}: weights must be None, 'imagenet' or the path of a weights file; no such file: "
                         f"{weights!r}")
    cc = _strata.keras.Model.application(app, bool(include_top), shape,
                                         int(classes), pooling or "", classifier_activation or "linear", name or "",
                                         float(alpha), int(depth_multiplier), float(dropout), tensor_cc,
                                         bool(include_preprocessing), bool(minimalistic), float(dropout_rate))
    model = Model(_cc=cc)
    if weights == "imagenet":
        weights = _strata.keras.get_file(fname, url, file_hash)
    if weights is not None:
        # As Keras's applications: model.load_weights(path), the layers in order; a file whose
        # layers or shapes differ is an error naming the first that differs (a partial load is
        # model.load_weights(path, by_name=True, skip_mismatch=True), which reports what it skipped).
        model.load_weights(weights)
    return model


def _application(function, app, doc, preprocessing=False):
    """Keras's signature for the applications without a width argument; `preprocessing`: with
    Keras's include_preprocessing after classifier_activation (EfficientNetV2's)."""

    if preprocessing:
        def build(include_top=True, weights=None, input_tensor=None, input_shape=None, pooling=None, classes=1000,
                  classifier_activation="softmax", include_preprocessing=True, name=None, **kwargs):
            return _build(app, include_top, weights, input_tensor, input_shape, pooling, classes,
                          classifier_activation, name, include_preprocessing=include_preprocessing, **kwargs)
    else:
        def build(include_top=True, weights=None, input_tensor=None, input_shape=None, pooling=None, classes=1000,
                  classifier_activation="softmax", name=None, **kwargs):
            return _build(app, include_top, weights, input_tensor, input_shape, pooling, classes,
                          classifier_activation, name, **kwargs)

    build.__name__ = build.__qualname__ = function
    build.__doc__ = f"keras.applications.{function}: {doc}"
    return build


VGG16 = _application("VGG16", "vgg16", "16 layers, a flattened 4096-4096 classifier (224 px)")
VGG19 = _application("VGG19", "vgg19", "19 layers, a flattened 4096-4096 classifier (224 px)")
ResNet50 = _application("ResNet50", "resnet50", "bottleneck blocks 3-4-6-3 (224 px)")
ResNet101 = _application("ResNet101", "resnet101", "bottleneck blocks 3-4-23-3 (224 px)")
ResNet152 = _application("ResNet152", "resnet152", "bottleneck blocks 3-8-36-3 (224 px)")
ResNet50V2 = _application("ResNet50V2", "resnet50_v2", "pre-activation blocks 3-4-6-3 (224 px)")
ResNet101V2 = _application("ResNet101V2", "resnet101_v2", "pre-activation blocks 3-4-23-3 (224 px)")
ResNet152V2 = _application("ResNet152V2", "resnet152_v2", "pre-activation blocks 3-8-36-3 (224 px)")
EfficientNetB0 = _application("EfficientNetB0", "efficientnet_b0", "MBConv blocks, width 1.0, depth 1.0 (224 px)")
EfficientNetB1 = _application("EfficientNetB1", "efficientnet_b1", "width 1.0, depth 1.1 (240 px)")
EfficientNetB2 = _application("EfficientNetB2", "efficientnet_b2", "width 1.1, depth 1.2 (260 px)")
EfficientNetB3 = _application("EfficientNetB3", "efficientnet_b3", "width 1.2, depth 1.4 (300 px)")
EfficientNetB4 = _application("EfficientNetB4", "efficientnet_b4", "width 1.4, depth 1.8 (380 px)")
EfficientNetB5 = _application("EfficientNetB5", "efficientnet_b5", "width 1.6, depth 2.2 (456 px)")
EfficientNetB6 = _application("EfficientNetB6", "efficientnet_b6", "width 1.8, depth 2.6 (528 px)")
EfficientNetB7 = _application("EfficientNetB7", "efficientnet_b7", "width 2.0, depth 3.1 (600 px)")
EfficientNetV2B0 = _application("EfficientNetV2B0", "efficientnet_v2_b0",
                                "fused MBConv stages, then MBConv; width 1.0, depth 1.0 (224 px)", True)
EfficientNetV2B1 = _application("EfficientNetV2B1", "efficientnet_v2_b1", "width 1.0, depth 1.1 (240 px)", True)
EfficientNetV2B2 = _application("EfficientNetV2B2", "efficientnet_v2_b2", "width 1.1, depth 1.2 (260 px)", True)
EfficientNetV2B3 = _application("EfficientNetV2B3", "efficientnet_v2_b3", "width 1.2, depth 1.4 (300 px)", True)
EfficientNetV2S = _application("EfficientNetV2S", "efficientnet_v2_s", "stages of 2-4-4-6-9-15 blocks (384 px)", True)
EfficientNetV2M = _application("EfficientNetV2M", "efficientnet_v2_m", "stages of 3-5-5-7-14-18-5 blocks (480 px)",
                               True)
EfficientNetV2L = _application("EfficientNetV2L", "efficientnet_v2_l", "stages of 4-7-7-10-19-25-7 blocks (480 px)",
                               True)
InceptionV3 = _application("InceptionV3", "inception_v3", "inception blocks with factorized 7x7 convolutions (299 px)")
InceptionResNetV2 = _application("InceptionResNetV2", "inception_resnet_v2",
                                 "Inception-ResNet blocks with scaled residuals (299 px)")
Xception = _application("Xception", "xception", "depthwise-separable blocks (299 px)")
NASNetMobile = _application("NASNetMobile", "nasnet_mobile", "NASNet-A cells, 4 @ 1056 (224 px)")
NASNetLarge = _application("NASNetLarge", "nasnet_large", "NASNet-A cells, 6 @ 4032 (331 px)")
DenseNet121 = _application("DenseNet121", "densenet121", "dense blocks 6-12-24-16 (224 px)")
DenseNet169 = _application("DenseNet169", "densenet169", "dense blocks 6-12-32-32 (224 px)")
DenseNet201 = _application("DenseNet201", "densenet201", "dense blocks 6-12-48-32 (224 px)")


def _convnext(function, app, doc):
    """Keras's ConvNeXt signature: model_name first, include_preprocessing (the ImageNet
    normalization as the model's first layer: it takes [0, 255] pixels)."""

    def build(model_name=None, include_top=True, include_preprocessing=True, weights=None, input_tensor=None,
              input_shape=None, pooling=None, classes=1000, classifier_activation="softmax", name=None, **kwargs):
        return _build(app, include_top, weights, input_tensor, input_shape, pooling, classes, classifier_activation,
                      name or model_name, include_preprocessing=include_preprocessing, **kwargs)

    build.__name__ = build.__qualname__ = function
    build.__doc__ = f"keras.applications.{function}: {doc}"
    return build


ConvNeXtTiny = _convnext("ConvNeXtTiny", "convnext_tiny", "ConvNeXt blocks 3-3-9-3, widths 96-768 (224 px)")
ConvNeXtSmall = _convnext("ConvNeXtSmall", "convnext_small", "ConvNeXt blocks 3-3-27-3, widths 96-768 (224 px)")
ConvNeXtBase = _convnext("ConvNeXtBase", "convnext_base", "ConvNeXt blocks 3-3-27-3, widths 128-1024 (224 px)")
ConvNeXtLarge = _convnext("ConvNeXtLarge", "convnext_large", "ConvNeXt blocks 3-3-27-3, widths 192-1536 (224 px)")
ConvNeXtXLarge = _convnext("ConvNeXtXLarge", "convnext_xlarge", "ConvNeXt blocks 3-3-27-3, widths 256-2048 (224 px)")


def MobileNet(input_shape=None, alpha=1.0, depth_multiplier=1, dropout=1e-3, include_top=True, weights=None,
              input_tensor=None, pooling=None, classes=1000, classifier_activation="softmax", name=None, **kwargs):
    """keras.applications.MobileNet: depthwise-separable blocks at width `alpha` (Keras has ImageNet
    weights for 0.25, 0.5, 0.75 and 1.0) and `depth_multiplier`; the top convolves the pooled
    features (conv_preds)."""
    return _build("mobilenet", include_top, weights, input_tensor, input_shape, pooling, classes,
                  classifier_activation, name, alpha=alpha, depth_multiplier=depth_multiplier, dropout=dropout,
                  **kwargs)


def MobileNetV2(input_shape=None, alpha=1.0, include_top=True, weights=None, input_tensor=None, pooling=None,
                classes=1000, classifier_activation="softmax", name=None, **kwargs):
    """keras.applications.MobileNetV2: inverted residual blocks at width `alpha` (Keras has
    ImageNet weights for 0.35, 0.5, 0.75, 1.0, 1.3 and 1.4)."""
    return _build("mobilenet_v2", include_top, weights, input_tensor, input_shape, pooling, classes,
                  classifier_activation, name, alpha=alpha, **kwargs)


def _mobilenet_v3(function, app, doc):
    """Keras's MobileNetV3 signature: alpha, minimalistic (3x3 kernels, ReLU, no squeeze-and-excite),
    dropout_rate, include_preprocessing (the Rescaling to [-1, 1] as the model's first layer: it
    takes [0, 255] pixels)."""

    def build(input_shape=None, alpha=1.0, minimalistic=False, include_top=True, weights=None, input_tensor=None,
              classes=1000, pooling=None, dropout_rate=0.2, classifier_activation="softmax",
              include_preprocessing=True, name=None, **kwargs):
        return _build(app, include_top, weights, input_tensor, input_shape, pooling, classes, classifier_activation,
                      name, alpha=alpha, minimalistic=minimalistic, dropout_rate=dropout_rate,
                      include_preprocessing=include_preprocessing, **kwargs)

    build.__name__ = build.__qualname__ = function
    build.__doc__ = f"keras.applications.{function}: {doc}"
    return build


MobileNetV3Small = _mobilenet_v3("MobileNetV3Small", "mobilenet_v3_small",
                                 "inverted residual blocks with squeeze-and-excite and hard swish, 11 blocks (224 px)")
MobileNetV3Large = _mobilenet_v3("MobileNetV3Large", "mobilenet_v3_large",
                                 "inverted residual blocks with squeeze-and-excite and hard swish, 15 blocks (224 px)")


ViTB16 = _application("ViTB16", "vit_b16", "KerasHub's ViT-B/16: 12 pre-norm encoder blocks of 768 features, 12 heads "
                      "(224 px; sides multiples of 16)")
ViTS16 = _application("ViTS16", "vit_s16", "ViT-S/16: 12 pre-norm encoder blocks of 384 features, 6 heads (224 px; sides "
                      "multiples of 16)")


# Keras's per-family modules (keras.applications.resnet_v2.preprocess_input, ...), after the
# functions they re-export.
from . import (convnext, densenet, efficientnet, efficientnet_v2, imagenet_utils, inception_resnet_v2, inception_v3, mobilenet,  # noqa: E402
               mobilenet_v2, mobilenet_v3, nasnet, resnet, resnet50, resnet_v2, vgg16, vgg19, vit, xception)
