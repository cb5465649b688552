"""Strata's MobileNetV3Small and MobileNetV3Large against torchvision 0.14's (issue 45's
independent check), and Keras's arguments.

torchvision's MobileNetV3 is an implementation of its own, with Keras's widths, kernels, squeeze-
and-excite widths (_make_divisible(expanded // 4, 8) = Keras's _depth(expanded * 0.25)), batch-norm
epsilon 1e-3, hard swish x relu6(x + 3) / 6 and hard sigmoid relu6(x + 3) / 6. Its weights are
copied into Strata's by a name map (features.0 -> conv / conv_bn; the InvertedResidual of
features.<i> -> Keras's expanded_conv_<i - 1>_ expand / depthwise / squeeze_excite_conv(_1) /
project; the last features -> conv_1; the classifier's Linear layers -> the 1x1 convolutions conv_2
and logits). torchvision differs from Keras in what the caller does and where it pads: Strata
takes pixels in [0, 255] through its Rescaling, torch x / 127.5 - 1; and every stride-2
convolution of torch's pads k // 2 on each side where Keras's stem pads "same" and its depthwise
convolutions correct_pad (one less at the top and left of an even side), so torch's are patched
to Keras's padding (applications_common.keras_correct_pad). The classifier's dropout is off on
both sides (Keras's dropout_rate=0 builds no Dropout layer).

Every weight is randomized, the batch norms' statistics calibrated (applications_common), and
Strata in float32 is compared with torch in float64 as EfficientNet's check is: the logits to
1e-4 of the largest, one training step's loss to 1e-4 and every gradient to 1e-3 of its
variable's largest (batch norm on four images' statistics), torch's own float32 held to a
quarter and a half of those. At 67 x 64 px (odd and even sides; both models and Small's
minimalistic form, built from torchvision's block table, about 12 s).
"""
import numpy as np
import pytest
import torch
import torchvision

import strata
from applications_common import (assert_logits_match, assert_training_step_matches, copy_into_strata,
                                 keras_batch_norm_net, keras_weight, torch_gradients, torch_training_step)

INPUT = (67, 64, 3)
CLASSES = 10
LABELS = np.array([3, 7, 0, 5], np.int64)
LOSS_TOLERANCE = 1e-4
GRAD_TOLERANCE = 1e-3


def name_map(net):
    """torchvision module path -> Keras layer name."""
    m = {"features.0.0": "conv", "features.0.1": "conv_bn", "classifier.0": "conv_2", "classifier.3": "logits"}
    last = len(net.features) - 1
    m[f"features.{last}.0"], m[f"features.{last}.1"] = "conv_1", "conv_1_bn"
    for i in range(1, last):
        block = net.features[i].block
        prefix = "expanded_conv_" if i == 1 else f"expanded_conv_{i - 1}_"
        parts = [type(mod).__name__ for mod in block]
        names = (["expand"] if len(block) == 4 - ("SqueezeExcitation" not in parts) else []) + ["depthwise"]
        for n, mod in enumerate(block):
            t = f"features.{i}.block.{n}"
            if type(mod).__name__ == "SqueezeExcitation":
                m[t + ".fc1"], m[t + ".fc2"] = prefix + "squeeze_excite_conv", prefix + "squeeze_excite_conv_1"
                continue
            part = names[n] if n < len(names) else "project"
            m[t + ".0"], m[t + ".1"] = prefix + part, prefix + part + "_bn"
    return m


def v3_keras_weight(layer, kind, value, strata_names):
    """keras_weight, with the classifier's Linear layers as Keras's 1x1 convolutions [1, 1, in, out]."""
    key, v = keras_weight(layer, kind, value, strata_names)
    if layer in ("conv_2", "logits") and kind == "weight":
        v = v.reshape((1, 1) + v.shape)
    return key, v


def images(n):
    """n images in [0, 255] (Strata's input) and torch's x / 127.5 - 1, NCHW float64."""
    x = np.random.default_rng(12).uniform(0, 255, size=(n,) + INPUT).astype(np.float32)
    return x, torch.from_numpy(x.astype(np.float64) / 127.5 - 1).permute(0, 3, 1, 2).contiguous()


def torchvision_net(variant, minimalistic):
    """torchvision's MobileNetV3; minimalistic: built from its own block table as Keras's
    minimalistic models are (torchvision has none): every kernel 3x3, ReLU for hard swish in the
    blocks, the stem, the last convolution and the classifier, no squeeze-and-excite."""
    if not minimalistic:
        return getattr(torchvision.models, f"mobilenet_v3_{variant}")(num_classes=CLASSES, dropout=0.0)
    from torchvision.models import mobilenetv3
    settings, last_channel = mobilenetv3._mobilenet_v3_conf(f"mobilenet_v3_{variant}")
    for c in settings:
        c.kernel, c.use_se, c.use_hs = 3, False, False
    net = mobilenetv3.MobileNetV3(settings, last_channel, num_classes=CLASSES, dropout=0.0)
    net.features[0][2] = net.features[-1][2] = net.classifier[1] = torch.nn.ReLU()
    return net


@pytest.fixture(scope="module", params=["small", "large", "small minimalistic"])
def mobilenet_v3(request):
    """(variant, torchvision's net in float64 patched to Keras's padding, every weight randomized
    and rounded to float32 values, Strata's model with those weights: one replica, SGD, the cross-
    entropy from logits)."""
    variant = request.param
    size, minimalistic = variant.split()[0], variant.endswith("minimalistic")
    torch.manual_seed(9)
    net = torchvision_net(size, minimalistic).double().eval()
    keras_batch_norm_net(net, images(4)[1], 9)
    net.float().double()  # float32 values: Strata's copy is exact
    with strata.distribute.MirroredStrategy(replicas=1).scope():
        model = getattr(strata.keras.applications, f"MobileNetV3{size.title()}")(
            weights=None, input_shape=INPUT, classes=CLASSES, classifier_activation=None, dropout_rate=0.0,
            minimalistic=minimalistic)
        model.compile(optimizer="sgd", loss=strata.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      seed=1)
    tensors = list(net.named_parameters()) + list(net.named_buffers())
    assert not copy_into_strata(tensors, name_map(net), model, v3_keras_weight), "every Strata weight has a torch twin"
    return variant, net, model


def test_mobilenet_v3_forward_matches_torchvision(mobilenet_v3):
    variant, net, model = mobilenet_v3
    x, t = images(2)
    assert_logits_match(net, model, x, t, f"MobileNetV3 {variant}")


def test_mobilenet_v3_training_step_matches_torchvision(mobilenet_v3):
    """One training-mode step on four images: batch norm on their mean and biased variance."""
    variant, net, model = mobilenet_v3
    x, t = images(4)

    def step(dtype):
        return torch_training_step(net, t, dtype, LABELS,
                                   lambda n: torch_gradients(n.named_parameters(), name_map(n), model, v3_keras_weight))

    assert_training_step_matches(net, model, x, LABELS, step, f"MobileNetV3 {variant}", LOSS_TOLERANCE, GRAD_TOLERANCE,
                                 torch_loss_check=True)
    # The check can fail: torchvision's own padding (k // 2 on every side of the stride-2
    # convolutions, which the fixture patched to Keras's) moves the logits far from Strata's.
    if variant == "small":
        patched = [mod for mod in net.modules() if isinstance(mod, torch.nn.Conv2d) and mod.stride[0] == 2]
        for conv in patched:
            conv.padding, conv.keras_forward = (conv.kernel_size[0] // 2,) * 2, conv.forward
            del conv.forward  # torch's own
        try:
            with torch.no_grad():
                wrong = net(images(2)[1]).numpy()
        finally:
            for conv in patched:
                conv.padding, conv.forward = (0, 0), conv.keras_forward
        got = model.predict(images(2)[0], verbose=0)
        assert np.abs(got - wrong).max() > 100 * 1e-4 * np.abs(wrong).max()


def test_mobilenet_v3_keras_arguments():
    """minimalistic: 3x3 kernels, ReLU and no squeeze-and-excite (fewer weights); alpha widens
    every block (and conv_2 above 1.0); include_preprocessing: the Rescaling or nothing;
    dropout_rate: the top's Dropout or none; Keras's model names, layer names and classes;
    preprocess_input is a pass-through; Keras's ImageNet files and their MD5s."""
    apps = strata.keras.applications
    small = apps.MobileNetV3Small(input_shape=(64, 64, 3))
    classes = {l.name: l.class_name for l in small.layers}
    assert small.name == "MobileNetV3Small"
    for name, cls in {"rescaling": "Rescaling", "conv": "Conv2D", "conv_bn": "BatchNormalization",
                      "expanded_conv_depthwise_pad": "ZeroPadding2D", "expanded_conv_squeeze_excite_mul": "Multiply",
                      "expanded_conv_1_expand": "Conv2D", "expanded_conv_10_add": "Add", "conv_1": "Conv2D",
                      "conv_2": "Conv2D", "dropout": "Dropout", "logits": "Conv2D", "flatten": "Flatten",
                      "predictions": "Activation", "activation": "Activation", "re_lu": "ReLU"}.items():
        assert classes.get(name) == cls, (name, classes.get(name))
    minimal = apps.MobileNetV3Small(input_shape=(64, 64, 3), minimalistic=True)
    names = [l.name for l in minimal.layers]
    assert not any("squeeze_excite" in n for n in names) and minimal.count_params() < small.count_params()
    assert not any(l.class_name == "Activation" and l.name.startswith("activation") for l in minimal.layers)
    assert "dropout" not in [l.name for l in apps.MobileNetV3Large(input_shape=(64, 64, 3), dropout_rate=0).layers]
    raw = apps.MobileNetV3Large(input_shape=(64, 64, 3), include_preprocessing=False, include_top=False)
    assert "rescaling" not in [l.name for l in raw.layers] and raw.output_shape == (None, 2, 2, 960)
    wide = apps.MobileNetV3Large(input_shape=(64, 64, 3), alpha=1.25, include_top=False, pooling="avg")
    assert wide.output_shape == (None, 1200)  # _depth(160 x 1.25) = 200 channels x 6
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    assert apps.mobilenet_v3.preprocess_input(x) is x
    w = strata._strata.keras.imagenet_weights
    assert w("mobilenet_v3_large", True, None, 1000) == (
        "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v3/"
        "weights_mobilenet_v3_large_224_1.0_float.h5", "weights_mobilenet_v3_large_224_1.0_float.h5",
        "59e551e166be033d707958cf9e29a6a7")
    assert w("mobilenet_v3_small", False, [160, 160, 3], 1000, 1.0, 1, True)[1:] == (
        "weights_mobilenet_v3_small_minimalistic_224_1.0_float_no_top_v2.h5", "cde8136e733e811080d9fcd8a252f7e4")
    assert w("mobilenet_v3_small", True, None, 1000, 0.75)[2] == "cb65d4e5be93758266aa0a7f2c6708b7"
    with pytest.raises(ValueError, match="alpha 0.75 or 1.0"):
        apps.MobileNetV3Small(weights="imagenet", alpha=0.5)
    with pytest.raises(ValueError, match="minimalistic"):
        apps.MobileNetV2(minimalistic=True)
