"""Strata's ConvNeXt against torchvision 0.14's (issue 45's independent check).

torchvision's ConvNeXt is an implementation of its own: its weights are copied into Strata's by a
name map (features.0.0 -> convnext_tiny_stem_conv, features.<2s+1>.<j>.block.0 ->
convnext_tiny_stage_<s>_block_<j>_depthwise_conv, ...; kernels OIHW -> HWIO, a depthwise kernel
[C, 1, 7, 7] -> Keras's grouped [7, 7, 1, C], Linear [out, in] -> Dense [in, out], the layer
scale [C, 1, 1] -> [C]). The two definitions agree (layer-norm epsilon 1e-6, exact GELU, the 7x7
depthwise padded 3 = "same", the 4x4/4 stem and 2x2/2 downsampling unpadded, the head's pooling,
layer norm and Linear), but for Keras's prestem Normalization, which torch's caller does: Strata
takes pixels in [0, 255] and torch (x / 255 - mean) / sd. Every weight is randomized, the layer
scales too (torchvision's 1e-6 would leave each block's branch invisible, so a wrong block would
pass), and there is no stochastic depth (Keras's ConvNeXt* take none).

Compared, Strata in float32 against torch in float64: the logits to 1e-4 of the largest, and one
training step's loss to 1e-4 of itself and every gradient to 1e-4 of that variable's largest
(torch's own float32 must be within a quarter and a half of those). Tiny at 64 px and Base at 32
px here; STRATA_CONVNEXT_ALL=1 adds Small, Large and XLarge (all pass; about 3 minutes).
"""
import os

import numpy as np
import pytest
import torch
import torchvision
from torchvision.models import convnext as tv_convnext

import strata
from applications_common import (assert_logits_match, assert_training_step_matches, copy_into_strata, torch_gradients,
                                 torch_training_step)

MEAN = np.array([0.485, 0.456, 0.406])
SD = np.array([0.229, 0.224, 0.225])


def name_map(net, prefix, depths):
    """torchvision module path -> Keras layer name."""
    names = {"features.0.0": f"{prefix}_stem_conv", "features.0.1": f"{prefix}_stem_layernorm",
             "classifier.0": f"{prefix}_head_layernorm", "classifier.2": f"{prefix}_head_dense"}
    for s, depth in enumerate(depths):
        if s > 0:
            names[f"features.{2 * s}.0"] = f"{prefix}_downsampling_layernorm_{s - 1}"
            names[f"features.{2 * s}.1"] = f"{prefix}_downsampling_conv_{s - 1}"
        for j in range(depth):
            t, k = f"features.{2 * s + 1}.{j}", f"{prefix}_stage_{s}_block_{j}"
            names[f"{t}.block.0"] = f"{k}_depthwise_conv"
            names[f"{t}.block.2"] = f"{k}_layernorm"
            names[f"{t}.block.3"] = f"{k}_pointwise_conv_1"
            names[f"{t}.block.5"] = f"{k}_pointwise_conv_2"
            names[t] = f"{k}_layer_scale"  # its parameter "layer_scale"
    return names


def keras_weight(layer, kind, value, strata_names=None):
    """The Keras name and layout of torch's parameter `kind` of the layer Keras calls `layer`."""
    if kind == "layer_scale":
        return f"{layer}/gamma", value.reshape(-1)
    if value.ndim == 4:
        return f"{layer}/kernel", value.transpose(2, 3, 1, 0)
    if value.ndim == 2:
        return f"{layer}/kernel", value.T
    is_norm = "layernorm" in layer
    return f"{layer}/{({'weight': 'gamma', 'bias': 'beta'} if is_norm else {'bias': 'bias'})[kind]}", value


def randomized_torch_convnext(blocks, classes, seed):
    """torchvision's ConvNeXt of `blocks` (CNBlockConfig list), float64, every weight randomized:
    convolution and Linear weights N(0, 1/fan_in) (a unit-gain residual branch), biases N(0, 0.1),
    layer-norm gammas N(1, 0.2) and betas N(0, 0.1), layer scales N(0, 0.5)."""
    torch.manual_seed(seed)
    net = tv_convnext.ConvNeXt(blocks, stochastic_depth_prob=0.0, num_classes=classes).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in net.named_parameters():
            kind = name.rsplit(".", 1)[1]
            if kind == "layer_scale":
                p.normal_(0.0, 0.5, generator=g)
            elif p.ndim >= 2:
                fan_in = p[0].numel()
                p.normal_(0.0, fan_in ** -0.5, generator=g)
            elif kind == "weight":  # a layer norm's gamma
                p.normal_(1.0, 0.2, generator=g)
            else:
                p.normal_(0.0, 0.1, generator=g)
    return net


# Keras's depths and widths, and the input each is tested at. Small, Large and XLarge are the
# same code at Tiny's widths and Base's depth, or Base's depth at other widths: all five pass
# here (measured: 184 s with Large and XLarge, whose 198 M and 350 M weights take most of it to
# initialize twice), so CI runs Tiny and Base, and the parameter counts of all five against
# torchvision's (XLarge: its ConvNeXt class) are tests/keras/applications_test.cc's.
VARIANTS = {
    "tiny": ((3, 3, 9, 3), (96, 192, 384, 768), (64, 64, 3)),    # stages at 16, 8, 4, 2 px
    "base": ((3, 3, 27, 3), (128, 256, 512, 1024), (32, 32, 3)),  # stages at 8, 4, 2, 1 px
}
OTHERS = {  # run with STRATA_CONVNEXT_ALL=1
    "small": ((3, 3, 27, 3), (96, 192, 384, 768), (32, 32, 3)),
    "large": ((3, 3, 27, 3), (192, 384, 768, 1536), (32, 32, 3)),
    "xlarge": ((3, 3, 27, 3), (256, 512, 1024, 2048), (32, 32, 3)),  # torchvision has no XLarge: its class
}
if os.environ.get("STRATA_CONVNEXT_ALL"):
    VARIANTS.update(OTHERS)
FUNCTIONS = {"tiny": "ConvNeXtTiny", "small": "ConvNeXtSmall", "base": "ConvNeXtBase", "large": "ConvNeXtLarge",
             "xlarge": "ConvNeXtXLarge"}
CLASSES = 10
LABELS = np.array([3, 7], np.int64)


def images(shape):
    """Two images in [0, 255] (Strata's input) and torch's normalized NCHW float64 copy."""
    x = np.random.default_rng(11).uniform(0, 255, size=(2,) + shape).astype(np.float32)
    t = (x.astype(np.float64) / 255 - MEAN) / SD
    return x, torch.from_numpy(t).permute(0, 3, 1, 2).contiguous()


@pytest.fixture(scope="module", params=list(VARIANTS))
def convnext(request):
    """(variant, torch's randomized net in float64 with float32 values, Strata's model with its
    weights (one replica, SGD, cross-entropy from logits), the name map, the input shape)."""
    variant = request.param
    depths, dims, shape = VARIANTS[variant]
    blocks = [tv_convnext.CNBlockConfig(dims[i], dims[i + 1] if i < 3 else None, depths[i]) for i in range(4)]
    net = randomized_torch_convnext(blocks, CLASSES, 5)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(p.float().double())  # float32 values: Strata's copy is exact
    with strata.distribute.MirroredStrategy(replicas=1).scope():
        model = getattr(strata.keras.applications, FUNCTIONS[variant])(
            weights=None, input_shape=shape, classes=CLASSES, classifier_activation=None)
        model.compile(optimizer="sgd", loss=strata.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      seed=1)
    names = name_map(net, f"convnext_{variant}", depths)
    assert not copy_into_strata(net.named_parameters(), names, model, keras_weight), "every Strata weight has a torch twin"
    yield variant, net, model, names, shape
    del net, model


def test_convnext_forward_matches_torchvision(convnext):
    """Inference logits to 1e-4 of the largest; torch's own float32 must be within a quarter of
    that, or the weights, not Strata, would be to blame."""
    variant, net, model, _, shape = convnext
    x, t = images(shape)
    assert_logits_match(net, model, x, t, f"ConvNeXt {variant}")


def test_convnext_training_step_matches_torchvision(convnext):
    """One training step (no batch norm or dropout in ConvNeXt: the step's forward is the
    inference one): the loss to 1e-4 of itself and every variable's gradient to 1e-4 of that
    variable's largest, against torch in float64; torch's own float32 must be within half that."""
    variant, net, model, names, shape = convnext
    x, t = images(shape)

    def step(dtype):
        return torch_training_step(net, t, dtype, LABELS,
                                   lambda n: torch_gradients(n.named_parameters(), names, model, keras_weight))

    assert_training_step_matches(net, model, x, LABELS, step, f"ConvNeXt {variant}")
    if variant == "tiny":
        # The comparison can fail: one block's layer scale negated (a build that ignored
        # LayerScale's weight, or read it reversed) moves the logits far past the tolerance.
        views = {n: a for n, a in model.weights}
        key = "convnext_tiny_stage_2_block_4_layer_scale/gamma"
        saved = views[key].copy()
        views[key][...] = -saved
        try:
            with torch.no_grad():
                want_logits = net(t).numpy()  # the step left it in float64
            wrong = np.abs(model.predict(x, verbose=0) - want_logits).max() / np.abs(want_logits).max()
            assert wrong > 100 * 1e-4, wrong
        finally:
            views[key][...] = saved


def test_convnext_imagenet_files_are_kerass():
    """Keras's ConvNeXt files and their SHA-256 digests (keras/applications/convnext.py)."""
    w = strata._strata.keras.imagenet_weights
    assert w("convnext_tiny", True, None, 1000) == (
        "https://storage.googleapis.com/tensorflow/keras-applications/convnext/convnext_tiny.h5", "convnext_tiny.h5",
        "8ae6e78ce2933352b1ef4008e6dd2f17bc40771563877d156bc6426c7cf503ff")
    assert w("convnext_xlarge", False, [160, 160, 3], 1000)[1:] == (
        "convnext_xlarge_notop.h5", "de3f8a54174130e0cecdc71583354753d557fcf1f4487331558e2a16ba0cfe05")
    with pytest.raises(ValueError, match="classes=1000"):
        strata.keras.applications.ConvNeXtTiny(weights="imagenet", classes=10)


def test_convnext_keras_arguments():
    """include_preprocessing: the prestem Normalization (no weights) or nothing; model_name is the
    model's name and every layer's prefix, as Keras's; the no-top model ends in Keras's unnamed
    layer normalization, pooled or not; preprocess_input is a pass-through."""
    apps = strata.keras.applications
    with_pre = apps.ConvNeXtTiny(include_top=False, input_shape=(32, 32, 3))
    without = apps.ConvNeXtTiny(include_top=False, include_preprocessing=False, input_shape=(32, 32, 3))
    names = [l.name for l in with_pre.layers]
    assert names[0] == "convnext_tiny_prestem_normalization" and names[-1] == "layer_normalization"
    assert "convnext_tiny_prestem_normalization" not in [l.name for l in without.layers]
    assert with_pre.count_params() == without.count_params()
    pooled = apps.ConvNeXtSmall(include_top=False, pooling="max", input_shape=(32, 32, 3))
    assert pooled.output_shape == (None, 768) and pooled.layers[-2].name == "global_max_pooling2d"
    custom = apps.ConvNeXtTiny(model_name="mine", input_shape=(32, 32, 3), include_top=False)
    assert custom.name == "mine" and custom.layers[1].name == "mine_stem_conv"
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    assert apps.convnext.preprocess_input(x) is x
    with pytest.raises(ValueError, match="include_preprocessing"):
        strata.keras.applications.ResNet50(include_preprocessing=False)


def test_convnext_loads_kerass_nested_weight_layout(tmp_path):
    """Keras's ConvNeXt files hold the stem and each downsampling pair as a nested Sequential: one
    group ("convnext_tiny_stem") whose weight_names name the inner layers
    (convnext_tiny_stem_conv/kernel:0, ..., convnext_tiny_stem_layernorm/beta:0). A file written
    in that layout (here with h5py, from a model's own weights, the nested groups' names in one
    of the two forms Keras writes, with and without the group's prefix) loads in order into a
    fresh model, every value in place."""
    import h5py
    apps = strata.keras.applications

    def build(seed):
        m = apps.ConvNeXtTiny(include_top=False, input_shape=(32, 32, 3))
        m.compile(optimizer="sgd", loss="mse", seed=seed)
        return m

    src, dst = build(1), build(2)
    values = dict(src.weights)
    layers = [l.name for l in src.layers]
    nested = {"convnext_tiny_stem": ["convnext_tiny_stem_conv", "convnext_tiny_stem_layernorm"]}
    for i in range(3):
        nested[f"convnext_tiny_downsampling_block_{i}"] = [f"convnext_tiny_downsampling_layernorm_{i}",
                                                            f"convnext_tiny_downsampling_conv_{i}"]
    inner = {n: group for group, members in nested.items() for n in members}
    file_layers = []
    for name in ["input_1"] + layers:
        group = inner.get(name, name)
        if group not in file_layers:
            file_layers.append(group)
    path = tmp_path / "convnext_tiny_notop.h5"
    with h5py.File(path, "w") as f:
        f.attrs["layer_names"] = [n.encode() for n in file_layers]
        f.attrs["backend"] = b"tensorflow"
        f.attrs["keras_version"] = b"2.13.1"
        for group in file_layers:
            g = f.create_group(group)
            members = nested.get(group, [group])
            weight_names = []
            for member in members:
                for key in [k for k in values if k.startswith(member + "/")]:
                    # The stem's names carry the group's prefix; the others do not.
                    wn = (f"{group}/" if group == "convnext_tiny_stem" else "") + key + ":0"
                    g.create_dataset(wn, data=values[key])
                    weight_names.append(wn.encode())
            g.attrs["weight_names"] = weight_names
    assert not all(np.array_equal(a, values[n]) for n, a in dst.weights)
    dst.load_weights(str(path))
    for n, a in dst.weights:
        np.testing.assert_array_equal(a, values[n], err_msg=n)
