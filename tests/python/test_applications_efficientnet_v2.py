"""Strata's EfficientNetV2 against torchvision 0.14's (issue 45's independent check).

torchvision's EfficientNet class is an implementation of its own: efficientnet_v2_s as it ships,
and B0 to B3 built from its FusedMBConvConfig / MBConvConfig on Keras's block table (widths by
Keras's round_filters, depths by its round_repeats; torchvision has no B models of V2). Both
define the same blocks (fused: a 3x3 expansion with the stride, or one 3x3 convolution with swish
where there is no expansion; MBConv: 1x1, 3x3 depthwise, squeeze-and-excitation to a quarter of
the block's input, 1x1), batch-norm epsilon 1e-3 and swish. torchvision pads every stride-2
convolution k // 2 on each side and Keras "same" (one less at the top and left of an even side),
so torch's are patched to Keras's (applications_common.keras_correct_pad); Strata takes pixels in
[0, 255] through its preprocessing and torch the preprocessed images (B: (x / 255 - mean) / sd;
S: x / 128 - 1). Weights are copied by a name map (features.<i>.<j> -> block<i><a + j>_).

Every weight is randomized and the batch norms' statistics calibrated (applications_common).
Strata in float32 against torch in float64: the logits to 1e-4 of the largest (B0 to B3 and S at
67 x 64 px); one training step (B0 to B3 and S) with its loss to 1e-4 and every gradient to 1e-3 of its
variable's largest, Keras's drop-connect and top dropout on (they take no rate to stop them),
torch given Strata's own masks (applications_common.use_strata_dropout_masks); torch's own
float32 held to a quarter and a half of the tolerances. M and L (torchvision's
efficientnet_v2_m / _l, S's code at other depths and widths) pass the same checks with
STRATA_EFFICIENTNET_V2_ALL=1 (all 15 checks in about a minute); CI runs B0-B3 and S, and M's and L's
parameter counts are tests/keras/applications_test.cc's.
"""
import functools
import math
import os

import numpy as np
import pytest
import torch
import torchvision
from torchvision.models.efficientnet import EfficientNet, FusedMBConvConfig, MBConvConfig

import strata
from applications_common import (assert_logits_match, assert_training_step_matches, copy_into_strata,
                                 keras_batch_norm_net, torch_gradients, torch_training_step, use_strata_dropout_masks)

INPUT = (67, 64, 3)
CLASSES = 10
LABELS = np.array([3, 7, 0, 5], np.int64)
LOSS_TOLERANCE = 1e-4
GRAD_TOLERANCE = 1e-3
MEAN = np.array([0.485, 0.456, 0.406])
SD = np.array([0.229, 0.224, 0.225])

# Keras's DEFAULT_BLOCKS_ARGS["efficientnetv2-b0"]: (fused, repeats, filters in, out, expansion, stride).
B_BLOCKS = [(True, 1, 32, 16, 1, 1), (True, 2, 16, 32, 4, 2), (True, 2, 32, 48, 4, 2), (False, 3, 48, 96, 4, 2),
            (False, 5, 96, 112, 6, 1), (False, 8, 112, 192, 6, 2)]
B_SCALES = {"b0": (1.0, 1.0), "b1": (1.0, 1.1), "b2": (1.1, 1.2), "b3": (1.2, 1.4)}


def round_filters(filters, width):
    return max(8, int(filters * width + 4) // 8 * 8)


def torch_b_model(variant):
    """torchvision's EfficientNet class on Keras's B table at the variant's width and depth."""
    width, depth = B_SCALES[variant]
    setting = []
    for fused, repeats, fin, fout, expand, stride in B_BLOCKS:
        n = int(math.ceil(depth * repeats))
        if fused:
            setting.append(FusedMBConvConfig(expand, 3, stride, round_filters(fin, width), round_filters(fout, width), n))
        else:
            setting.append(MBConvConfig(expand, 3, stride, round_filters(fin, width), round_filters(fout, width), n,
                                        1.0, 1.0))
    return EfficientNet(setting, dropout=0.2, stochastic_depth_prob=0.2, num_classes=CLASSES,
                        norm_layer=functools.partial(torch.nn.BatchNorm2d, eps=1e-3),
                        last_channel=round_filters(1280, width))


def keras_drop_rates(net):
    """Keras's drop-connect rates: 0.2 x the block's index over the whole model / the table's
    *unscaled* block count (21 for B), where torchvision divides by the scaled count (B1-B3: 23,
    25, 30 blocks); the same for B0 and S."""
    b, blocks = 0, sum(repeats for _, repeats, *_ in B_BLOCKS)
    for i in range(1, len(net.features) - 1):
        for block in net.features[i]:
            block.stochastic_depth.p = 0.2 * b / blocks
            b += 1


def name_map(net):
    """torchvision module path -> Keras layer name."""
    last = len(net.features) - 1
    m = {"features.0.0": "stem_conv", "features.0.1": "stem_bn", f"features.{last}.0": "top_conv",
         f"features.{last}.1": "top_bn", "classifier.1": "predictions"}
    for i in range(1, last):
        for j, block in enumerate(net.features[i]):
            t, k = f"features.{i}.{j}.block", f"block{i}{chr(97 + j)}_"
            mods = list(block.block)
            if type(block).__name__ == "FusedMBConv":
                parts = ["expand", "project"] if len(mods) == 2 else ["project"]
            else:
                parts = (["expand"] if len(mods) == 4 else []) + ["dw", "se", "project"]
            for n, part in enumerate(parts):
                if part == "se":
                    m[f"{t}.{n}.fc1"], m[f"{t}.{n}.fc2"] = k + "se_reduce", k + "se_expand"
                else:
                    conv, bn = {"expand": ("expand_conv", "expand_bn"), "dw": ("dwconv2", "bn"),
                                "project": ("project_conv", "project_bn")}[part]
                    m[f"{t}.{n}.0"], m[f"{t}.{n}.1"] = k + conv, k + bn
    return m


def images(variant, n):
    """n images in [0, 255] (Strata's input) and torch's preprocessed NCHW float64 copy."""
    x = np.random.default_rng(13).uniform(0, 255, size=(n,) + INPUT).astype(np.float32)
    t = (x.astype(np.float64) / 255 - MEAN) / SD if variant.startswith("b") else x.astype(np.float64) / 128 - 1
    return x, torch.from_numpy(t).permute(0, 3, 1, 2).contiguous()


@pytest.fixture(scope="module")
def efficientnet_v2(request):
    """(variant, torch's net patched to Keras's padding, randomized, float32 values in float64,
    Strata's model with its weights: one replica, SGD, the cross-entropy from logits, seed 1)."""
    variant = request.param
    torch.manual_seed(10)
    net = (torch_b_model(variant) if variant.startswith("b") else
           getattr(torchvision.models, f"efficientnet_v2_{variant}")(num_classes=CLASSES)).double().eval()
    if variant.startswith("b"):
        keras_drop_rates(net)
    net.classifier[0].p = 0.2  # Keras's top dropout for every variant (torchvision's M: 0.3, L: 0.4)
    keras_batch_norm_net(net, images(variant, 4)[1], 10)
    net.float().double()
    with strata.distribute.MirroredStrategy(replicas=1).scope():
        model = getattr(strata.keras.applications, f"EfficientNetV2{variant.upper()}")(
            weights=None, input_shape=INPUT, classes=CLASSES, classifier_activation=None)
        model.compile(optimizer="sgd", loss=strata.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      seed=1)
    tensors = list(net.named_parameters()) + list(net.named_buffers())
    assert not copy_into_strata(tensors, name_map(net), model), "every Strata weight has a torch twin"
    return variant, net, model


# M and L (54 M and 119 M weights: 45 s together, mostly initializing them twice) with
# STRATA_EFFICIENTNET_V2_ALL=1.
VARIANTS = ["b0", "b1", "b2", "b3", "s"] + (["m", "l"] if os.environ.get("STRATA_EFFICIENTNET_V2_ALL") else [])


@pytest.mark.parametrize("efficientnet_v2", VARIANTS, indirect=True)
def test_efficientnet_v2_forward_matches_torchvision(efficientnet_v2):
    variant, net, model = efficientnet_v2
    x, t = images(variant, 2)
    assert_logits_match(net, model, x, t, f"EfficientNetV2{variant.upper()}")


@pytest.mark.parametrize("efficientnet_v2", VARIANTS, indirect=True)
def test_efficientnet_v2_training_step_matches_torchvision(efficientnet_v2):
    """One training step on four images, with Strata's drop-connect and top-dropout masks given
    to torch (at Keras's rates: keras_drop_rates)."""
    variant, net, model = efficientnet_v2
    x, t = images(variant, 4)
    assert model._cc.global_step == 0
    use_strata_dropout_masks(net, len(x))

    def step(dtype):
        return torch_training_step(net, t, dtype, LABELS,
                                   lambda n: torch_gradients(n.named_parameters(), name_map(n), model))

    assert_training_step_matches(net, model, x, LABELS, step, f"EfficientNetV2{variant.upper()}", LOSS_TOLERANCE,
                                 GRAD_TOLERANCE, torch_loss_check=True)


def test_efficientnet_v2_keras_arguments_and_files():
    """include_preprocessing (B: Rescaling + Normalization, S/M/L: Rescaling; no weights either
    way), preprocess_input is a pass-through, and Keras's ImageNet files and their MD5s."""
    apps = strata.keras.applications
    b0 = apps.EfficientNetV2B0(include_top=False, input_shape=(32, 32, 3))
    raw = apps.EfficientNetV2B0(include_top=False, input_shape=(32, 32, 3), include_preprocessing=False)
    assert [l.name for l in b0.layers][:3] == ["rescaling", "normalization", "stem_conv"]
    assert [l.name for l in raw.layers][0] == "stem_conv" and raw.count_params() == b0.count_params()
    assert apps.EfficientNetV2M(include_top=False, input_shape=(32, 32, 3)).name == "efficientnetv2-m"
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    assert apps.efficientnet_v2.preprocess_input(x) is x
    w = strata._strata.keras.imagenet_weights
    assert w("efficientnet_v2_s", True, None, 1000) == (
        "https://storage.googleapis.com/tensorflow/keras-applications/efficientnet_v2/efficientnetv2-s.h5",
        "efficientnetv2-s.h5", "e1d88a8495beba45748fedd0cecbe016")
    assert w("efficientnet_v2_b3", False, [160, 160, 3], 1000)[1:] == (
        "efficientnetv2-b3_notop.h5", "f6abf7b5849ac99a89b50dd3fd532856")
    with pytest.raises(ValueError, match=r"input_shape \[480, 480, 3\]"):
        apps.EfficientNetV2L(weights="imagenet", input_shape=(224, 224, 3))
