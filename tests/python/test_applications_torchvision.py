"""Strata's DenseNet169, VGG16, EfficientNetB1 to B7 and InceptionV3 against torchvision 0.14's
(issue 44's independent check); the others' tests follow DenseNet169's, which this text describes.

torchvision's model is an implementation of its own; its weights are copied into Strata's by a
name map (features.denseblock<s>.denselayer<b>.norm1 -> conv<s+1>_block<b>_0_bn, ...; kernels
OIHW -> HWIO, the classifier [out, in] -> [in, out]). Where torchvision differs from Keras it is
patched: the batch norms take Keras's epsilon 1.001e-5 (torchvision: 1e-5). The two pad alike
otherwise (Keras's ZeroPadding2D before the stem's 'valid' convolution and max pool is
torchvision's padding=3 and padding=1; zeros and -inf pad a max pool over ReLU outputs alike).
Every batch-norm weight and statistic is randomized (no identity-like values), there is no
dropout (drop_rate 0), and the input is 65 x 64 px (an odd and an even side), batch 2, 10 classes:
the last dense block normalizes 2 x 2 pixels of 2 images (at 33 px its 1 x 1 x 2 values make
the training step's loss chaotic: torch's own float32 loss is 3 % off its float64 one).

Compared, in float32 against torch in float64: the inference logits (|Strata - torch| <= 1e-4 x
max |torch|), and one training step (batch norm on the batch's statistics): the loss (1e-4) and
the gradients of the classifier and the last batch norm (1e-3 of each variable's largest).
"""
import copy

import numpy as np
import pytest
import torch
import torchvision

import strata
from applications_common import (copy_into_strata, gradient_scales, keras_batch_norm_net, randomize_batch_norm,
                                 strata_gradients, torch_gradients, torch_training_step, use_strata_dropout_masks,
                                 worst_gradient)

EPS = 1.001e-5


def keras_name_map(blocks):
    """torchvision parameter prefix -> Keras layer name, for DenseNet with `blocks` per block."""
    m = {"features.conv0": "conv1/conv", "features.norm0": "conv1/bn", "features.norm5": "bn",
         "classifier": "predictions"}
    for s, n in enumerate(blocks):
        for b in range(1, n + 1):
            t, k = f"features.denseblock{s + 1}.denselayer{b}", f"conv{s + 2}_block{b}"
            m.update({t + ".norm1": k + "_0_bn", t + ".conv1": k + "_1_conv", t + ".norm2": k + "_1_bn",
                      t + ".conv2": k + "_2_conv"})
        if s < len(blocks) - 1:
            m.update({f"features.transition{s + 1}.norm": f"pool{s + 2}_bn",
                      f"features.transition{s + 1}.conv": f"pool{s + 2}_conv"})
    return m


def randomized_torch_densenet169(seed):
    torch.manual_seed(seed)
    net = torchvision.models.densenet169(num_classes=10).double()
    g = torch.Generator().manual_seed(seed)
    for mod in net.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            randomize_batch_norm(mod, EPS, g)
    net.classifier.bias.data.normal_(0.0, 0.3, generator=g)
    return net


@pytest.fixture(scope="module")
def pair():
    blocks = (6, 12, 32, 32)
    net = randomized_torch_densenet169(3)
    # One replica: the batch's statistics over both images, as torch's (two replicas would each
    # normalize their own image, as Keras's per-replica batch norm does).
    with strata.distribute.MirroredStrategy(replicas=1).scope():
        model = strata.keras.applications.DenseNet169(weights=None, input_shape=(65, 64, 3), classes=10,
                                                      classifier_activation=None)
        model.compile(optimizer="sgd", loss=strata.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      seed=1)
    left = copy_into_strata(list(net.named_parameters()) + list(net.named_buffers()), keras_name_map(blocks), model)
    assert not left, f"left unset: {sorted(left)[:5]}"
    x = np.random.default_rng(5).normal(size=(2, 65, 64, 3)).astype(np.float32)
    return net, model, x


def test_densenet169_forward_matches_torchvision(pair):
    net, model, x = pair
    net.eval()
    with torch.no_grad():
        want = net(torch.from_numpy(x).double().permute(0, 3, 1, 2)).numpy()
    got = model.predict(x, verbose=0)
    scale = np.abs(want).max()
    err = np.abs(got - want).max() / scale
    assert err <= 1e-4, f"max |strata - torch| = {err:.2e} x max |torch|"
    assert np.abs(want[0] - want[1]).max() > 10 * 1e-4 * scale  # the images give different logits


def torch_step(dtype, x, y):
    """torch's loss and gradients of one training-mode step of the randomized densenet169."""
    net = randomized_torch_densenet169(3).to(dtype)
    net.train()
    loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(x).permute(0, 3, 1, 2).to(dtype)), torch.from_numpy(y))
    loss.backward()
    return loss.item(), list(net.named_parameters())


def test_densenet169_training_step_matches_torchvision(pair):
    """One training-mode step: the loss, and the gradients of the classifier and of the last batch
    norm, which every layer's training-mode output reaches. The deeper gradients are not compared:
    over 169 layers with random weights, training mode amplifies rounding (torch's own float32
    gradients are up to 16 % of a variable's largest off its float64 ones in the last dense block,
    and Strata's float32 ones as far, in other variables). Every gradient of DenseNet169 is
    compared in test_applications_keras_source.py instead: Keras's own densenet.py in float64 at
    64 px with well-conditioned weights (randomize, then clear_kinks), where torch's own float32 is
    within 7.6e-5 of each variable's largest gradient and Strata within 1.3e-4 (tolerance 1e-3)."""
    _, model, x = pair
    y = np.array([3, 7], np.int64)
    loss64, params64 = torch_step(torch.float64, x, y)
    got_loss = model.compute_gradients(x, y)
    assert abs(got_loss - loss64) <= 1e-4 * abs(loss64), (got_loss, loss64)
    want = torch_gradients(params64, keras_name_map((6, 12, 32, 32)), model)
    compared = []
    for name, got in strata_gradients(model, {k: w.shape for k, w in want.items()}).items():
        if name.split("/")[0] in ("predictions", "bn"):
            w = want[name]
            err = np.abs(got - w).max() / np.abs(w).max()
            assert err <= 1e-3, f"gradient of {name}: {err:.2e} x its largest"
            compared.append(name)
    assert sorted(compared) == ["bn/beta", "bn/gamma", "predictions/bias", "predictions/kernel"]


# ---- VGG16: torchvision's vgg16 features (no batch norm: a well-conditioned training step) ----

def vgg16_name_map():
    """torchvision's features.<index> -> Keras's block<b>_conv<c> (indices skip ReLUs and pools)."""
    names, i = {}, 0
    for b, convs in enumerate((2, 2, 3, 3, 3), start=1):
        for c in range(1, convs + 1):
            names[f"features.{i}"] = f"block{b}_conv{c}"
            i += 2  # Conv2d, ReLU
        i += 1      # MaxPool2d
    return names


def test_vgg16_features_forward_and_training_step_match_torchvision():
    """VGG16 without the top, average-pooled (Keras's pooling="avg"), at 64 x 64 px, batch 2: the
    features in inference, then one step of mean squared error against random targets, every
    gradient. torchvision's 3x3 convolutions with padding 1 are Keras's "same"; its 2x2 max pools
    Keras's; its biases are zero, so they are drawn N(0, 0.05) here."""
    torch.manual_seed(4)
    net = torchvision.models.vgg16().double()
    g = torch.Generator().manual_seed(4)
    for mod in net.features:
        if isinstance(mod, torch.nn.Conv2d):
            mod.bias.data.normal_(0.0, 0.05, generator=g)
    with strata.distribute.MirroredStrategy(replicas=1).scope():
        model = strata.keras.applications.VGG16(weights=None, include_top=False, input_shape=(64, 64, 3),
                                                pooling="avg")
        model.compile(optimizer="sgd", loss="mse", seed=1)
    names = vgg16_name_map()

    def features_parameters():
        return [(f"features.{n}", p) for n, p in net.features.named_parameters()]

    assert not copy_into_strata(features_parameters(), names, model)
    rng = np.random.default_rng(6)
    x = rng.normal(size=(2, 64, 64, 3)).astype(np.float32)
    target = rng.normal(size=(2, 512)).astype(np.float32)

    def torch_features(inp):
        return net.features(torch.from_numpy(inp).double().permute(0, 3, 1, 2)).mean(dim=(2, 3))

    with torch.no_grad():
        want = torch_features(x).numpy()
    got = model.predict(x, verbose=0)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-4, f"features: {err:.2e} x the largest"

    net.zero_grad()
    loss = torch.nn.functional.mse_loss(torch_features(x), torch.from_numpy(target).double())
    loss.backward()
    got_loss = model.compute_gradients(x, target)
    assert abs(got_loss - loss.item()) <= 1e-4 * loss.item(), (got_loss, loss.item())
    want_grads = torch_gradients(features_parameters(), names, model)
    got_grads = strata_gradients(model, {k: w.shape for k, w in want_grads.items()})
    assert set(got_grads) == set(want_grads)
    for name, got_g in got_grads.items():
        w = want_grads[name]
        err = np.abs(got_g - w).max() / np.abs(w).max()
        assert err <= 1e-4, f"gradient of {name}: {err:.2e} x its largest"


# ---- EfficientNetB1 to B7: torchvision's efficientnet_b<n>, patched to Keras's padding and epsilon ----

def efficientnet_name_map(net):
    """torchvision module path -> Keras layer name: the stem, each MBConv's expand / depthwise /
    squeeze-excite / project, the top convolution and the classifier."""
    m = {"features.0.0": "stem_conv", "features.0.1": "stem_bn", "features.8.0": "top_conv",
         "features.8.1": "top_bn", "classifier.1": "predictions"}
    for i in range(1, 8):
        for j, block in enumerate(net.features[i]):
            t, k = f"features.{i}.{j}.block", f"block{i}{chr(97 + j)}_"
            parts = ["expand", "dw", "se", "project"] if len(block.block) == 4 else ["dw", "se", "project"]
            for n, part in enumerate(parts):
                if part == "se":
                    m[f"{t}.{n}.fc1"], m[f"{t}.{n}.fc2"] = k + "se_reduce", k + "se_expand"
                else:
                    conv, bn = {"expand": ("expand_conv", "expand_bn"), "dw": ("dwconv", "bn"),
                                "project": ("project_conv", "project_bn")}[part]
                    m[f"{t}.{n}.0"], m[f"{t}.{n}.1"] = k + conv, k + bn
    return m


def randomized_torch_efficientnet(variant, torch_x, seed=7):
    """torchvision's efficientnet_<variant> in float64, in inference, patched to Keras's
    definition: Keras's correct_pad before every stride-2 convolution, Keras's epsilon 1e-3
    (torchvision's B-series: 1e-5). Every batch-norm gamma and beta and every bias randomized
    (randomize_batch_norm; biases N(0, 0.3)); then, during one inference pass over torch_x, in
    network order, each batch norm's moving statistics from its own input: the channel's mean
    shifted by N(0, 0.2) of its deviation, and 4 x its variance x U(0.5, 2) (outputs at about
    half of gamma: contracting, so rounding does not grow through the depth). Statistics of a fixed
    scale would wash the images out (both gave the same logits); statistics taken from a
    training-mode pass (as InceptionV3's below) miss each batch norm's inference input by the
    perturbations upstream of it, which compound: B5's logits reach 1e4 and torch's own float32
    is 5.3e-4 of them off its float64. With these, torch's float32 is within 1.3e-5 for B1 to B7."""
    torch.manual_seed(seed)
    net = getattr(torchvision.models, f"efficientnet_{variant}")(num_classes=10).double().eval()
    return keras_batch_norm_net(net, torch_x, seed)

EFFICIENTNET_INPUT = (67, 64, 3)  # odd and even sides


def efficientnet_images(n):
    """n images of EFFICIENTNET_INPUT, pixels in [0, 255] (Strata's input), and torch's x / 255
    (NCHW, float64); the first two are the forward test's."""
    x = np.random.default_rng(8).uniform(0, 255, size=(n,) + EFFICIENTNET_INPUT).astype(np.float32)
    return x, torch.from_numpy(x / 255.0).double().permute(0, 3, 1, 2)


@pytest.fixture(scope="module")
def efficientnet(request):
    """(variant, randomized_torch_efficientnet calibrated on the forward test's images, Strata's
    EfficientNet<variant> with its weights, compiled as the training test needs: one replica,
    SGD, the cross-entropy from logits, seed 1). torch's weights are rounded to float32 values, so
    Strata's copy is exact and either test may leave the net in float32 (converted in place,
    which keeps keras_correct_pad's forwards) for the other to convert back without loss."""
    variant = request.param
    net = randomized_torch_efficientnet(variant, efficientnet_images(2)[1])
    net.float().double()
    with strata.distribute.MirroredStrategy(replicas=1).scope():
        model = getattr(strata.keras.applications, f"EfficientNet{variant.upper()}")(
            weights=None, input_shape=EFFICIENTNET_INPUT, classes=10, classifier_activation=None)
        model.compile(optimizer="sgd", loss=strata.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      seed=1)
    left = copy_into_strata(list(net.named_parameters()) + list(net.named_buffers()), efficientnet_name_map(net), model)
    # Keras's Normalization keeps its (un-adapted) mean, variance and count: not torchvision's.
    assert left == {"normalization/mean", "normalization/variance", "normalization/count"}
    return variant, net, model


EFFICIENTNETS = ["b1", "b2", "b3", "b4", "b5", "b6", "b7"]


@pytest.mark.parametrize("efficientnet", EFFICIENTNETS, indirect=True)
def test_efficientnet_forward_matches_torchvision(efficientnet):
    """EfficientNetB1 to B7 at 67 x 64 px (odd and even sides), batch 2, 10 classes, inference,
    against randomized_torch_efficientnet (torchvision patched to Keras's correct_pad and
    epsilon); torch is fed x / 255, which Keras's Rescaling and un-adapted Normalization layers
    compute inside the model. B2 to B7 differ from B1 in Keras's round_filters / round_repeats
    only (torchvision's _make_divisible and ceil give the same widths and depths: the copy checks
    every shape). The logits to 1e-4 of the largest (measured: Strata 4e-6 to 2e-5 of them off,
    torch's own float32 2e-6 to 1.3e-5, which the test holds to a quarter of the tolerance, else
    the weights, not Strata, would be to blame). The seven take about 15 s on two cores, the
    efficientnet fixture's build (torch's net, Strata's model) counted here (B7: 5 s)."""
    variant, net, model = efficientnet
    x, torch_x = efficientnet_images(2)
    net.double().eval()  # the training test may have left it in float32 and training mode
    with torch.no_grad():
        want = net(torch_x).numpy()
        want32 = net.float()(torch_x.float()).double().numpy()  # in place: the patched paddings stay
    scale = np.abs(want).max()
    assert np.abs(want32 - want).max() / scale <= 1e-4 / 4, "ill-conditioned weights: torch's own float32 is off"
    assert np.abs(want[0] - want[1]).max() > 100 * 1e-4 * scale  # the images give different logits
    got = model.predict(x, verbose=0)
    err = np.abs(got - want).max() / scale
    assert err <= 1e-4, f"EfficientNet{variant.upper()}: max |strata - torch| = {err:.2e} x max |torch|"


def efficientnet_training_step(net, torch_x, y, dtype, model):
    """torch's loss and gradients (Keras's names and layout) of one training-mode step of `net`,
    converted in place to dtype (applications_common.torch_training_step)."""
    return torch_training_step(net, torch_x, dtype, y,
                               lambda n: torch_gradients(list(n.named_parameters()), efficientnet_name_map(n), model))


LOSS_TOLERANCE = 1e-4
GRAD_TOLERANCE = 1e-3
EFFICIENTNET_LABELS = np.array([3, 7, 0, 5], np.int64)


def strata_efficientnet_step(model, x):
    """Strata's loss and gradients of its first training step (the step use_strata_dropout_masks
    reads the masks of)."""
    assert model._cc.global_step == 0
    loss = model.compute_gradients(x, EFFICIENTNET_LABELS)
    # Every trainable variable: the Normalization's mean, variance and count are not.
    return loss, strata_gradients(model, {n: w.shape for n, w in model.weights})


@pytest.mark.parametrize("efficientnet", EFFICIENTNETS, indirect=True)
def test_efficientnet_training_step_matches_torchvision(efficientnet):
    """One training-mode step, as test_applications_keras_source.py's: Strata in float32 against
    torch in float64 (the fixture's weights), batch norm on the batch's mean and biased variance
    (Keras's), the sparse cross-entropy from logits, on four images of 67 x 64 px (the forward
    test's two and two more; the last stage normalizes 3 x 2 pixels of each), labels 3, 7, 0, 5.
    The loss to 1e-4 of itself and every trainable variable's gradient to 1e-3 of that variable's
    largest; the names are torch's parameters', all of them (the Normalization's mean, variance and
    count are not trainable). A gradient zero in exact arithmetic is held to its sibling's scale
    (applications_common.gradient_scales): a project_bn's beta shifts the residual stream by a
    constant that the next 1x1 convolution's training-mode batch norm takes out (17 to 37 of them
    per variant; not where the next block's zero-padded depthwise convolution reads the stream, in
    stage 1, which has no expansion, nor after a drop-connect that drops some of the images), held
    to its gamma's. Dropout stays on, as in Strata's training step: use_strata_dropout_masks gives
    torch Strata's masks.

    torch's own float32 step must stay within half of each tolerance, else the weights, not
    Strata, would be to blame. Measured, off torch's float64 (loss; worst gradient over its scale):
      B1  Strata 9e-8, 1.6e-4 (block1a_project_bn/beta); torch float32 4e-7, 8.8e-5 (block6e_expand_bn/gamma)
      B2  Strata 5e-7, 3.3e-5 (block2a_expand_bn/gamma); torch float32 6e-6, 6.0e-5 (block1b_se_expand/kernel)
      B3  Strata 2.5e-6, 7.9e-5 (block1a_project_bn/beta); torch float32 2e-6, 8.6e-5 (the same)
      B4  Strata 2.6e-6, 4.5e-5 (block3d_se_reduce/bias); torch float32 1e-5, 6.4e-5 (block3c_se_reduce/kernel)
      B5  Strata 9e-7, 8.3e-5 (block1b_dwconv/depthwise_kernel); torch float32 2e-7, 1.1e-4 (block1b_project_bn/beta)
      B6  Strata 7.6e-6, 1.2e-4 (block2d_se_reduce/bias); torch float32 8e-6, 2.1e-4 (the same)
      B7  Strata 1.2e-6, 1.05e-4 (block1d_se_expand/kernel); torch float32 8e-6, 3.1e-4 (block2a_se_reduce/kernel)
    Batch 4, not 2: at 2, torch's own float32 gradients are 1e-4 to 4.7e-4 off as the draws go
    (B1's block1b_se_reduce with labels 0, 3: 4.7e-4, at the edge of half the tolerance), and B7's
    drop-connect drops both images' branch in block4j and block6l (no gradient there to compare).
    The depthwise kernels are torchvision's (kaiming over a fan_out of C x k x k: std
    sqrt(2 / (C k^2)); Keras's fan_out is k x k): the depthwise outputs' batch variances are small
    (B1's medians 1e-4 to 1e-2, under 1e-3 from block4b on), so Keras's epsilon 1e-3 weighs in and
    the steps contract; the batch's statistics still count (the unbiased variance moves a gradient
    by 240 x the tolerance, below). Redrawn at Keras's scale (variances about 0.1), rounding grows
    through the depth: torch's own float32 gradients 8.7e-4 off (B7's block1c_se_reduce kernel),
    its logits 2.8e-5 and 4.2e-5 (B5, B7; the forward test allows 2.5e-5).

    All seven: 17 to 22 s on two cores (B7: 6 to 7 s, 5 s of it torch's float64 step, whose
    depthwise convolution runs on the CPU one channel at a time), within the budget for all seven;
    the fixture's build is counted in the forward test's."""
    variant, net, model = efficientnet
    x, torch_x = efficientnet_images(len(EFFICIENTNET_LABELS))
    use_strata_dropout_masks(net, len(x))
    loss64, want = efficientnet_training_step(net, torch_x, EFFICIENTNET_LABELS, torch.float64, model)
    scales = gradient_scales(want)
    assert min(scales.values()) > 0  # no drop-connect drops every image's branch
    loss32, want32 = efficientnet_training_step(net, torch_x, EFFICIENTNET_LABELS, torch.float32, model)
    assert abs(loss32 - loss64) <= LOSS_TOLERANCE / 2 * abs(loss64)
    rounding, at = worst_gradient(want32, want, scales)
    assert rounding <= GRAD_TOLERANCE / 2, f"ill-conditioned: torch's float32 gradient of {at} is {rounding:.2e} off"

    got_loss, got = strata_efficientnet_step(model, x)
    assert abs(got_loss - loss64) <= LOSS_TOLERANCE * abs(loss64), (got_loss, loss64)
    assert set(got) == set(want)
    err, at = worst_gradient(got, want, scales)
    assert err <= GRAD_TOLERANCE, f"EfficientNet{variant.upper()}: gradient of {at}: {err:.2e} x its scale"


@pytest.mark.parametrize("efficientnet", ["b1"], indirect=True)
def test_efficientnet_training_step_comparison_can_fail(efficientnet, monkeypatch):
    """The training comparison can fail: torch normalizing by the unbiased batch variance
    (n / (n - 1) times the biased one that Keras and torch's training mode use; n is 4 images x the
    pixels, 24 in the last stage) lands 240 x the tolerance away from Strata's B1 gradients
    (block1a_project_bn/beta). (torchvision's epsilon 1e-5 for Keras's 1e-3 lands over 4000 x
    away: the depthwise batch norms' variances are near the epsilon.) About 1 s."""
    _, net, model = efficientnet
    x, torch_x = efficientnet_images(len(EFFICIENTNET_LABELS))
    use_strata_dropout_masks(net, len(x))
    _, got = strata_efficientnet_step(model, x)

    def unbiased(inp, running_mean, running_var, weight, bias, training, momentum, eps):
        assert training
        dims = (0, 2, 3)
        mean, var = inp.mean(dims, keepdim=True), inp.var(dims, unbiased=True, keepdim=True)
        return (inp - mean) * torch.rsqrt(var + eps) * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)

    monkeypatch.setattr(torch.nn.functional, "batch_norm", unbiased)
    _, wrong = efficientnet_training_step(net, torch_x, EFFICIENTNET_LABELS, torch.float64, model)
    err, at = worst_gradient(got, wrong, gradient_scales(wrong))
    assert err > 10 * GRAD_TOLERANCE, f"the unbiased variance's gradient of {at} is only {err:.2e} x its scale off"


# ---- InceptionV3: torchvision's inception_v3, patched to Keras's pooling and batch norm ----

def inception_v3_name_map(net):
    """torchvision module path -> Keras layer name. torchvision registers its BasicConv2d modules
    (the stem, then each Mixed block's branches) in the order Keras's InceptionV3 calls conv2d_bn,
    so the i-th convolution is Keras's automatic conv2d_<i> and its batch norm
    batch_normalization_<i>; the classifier is `predictions`."""
    names, i = {"fc": "predictions"}, 0
    for path, mod in net.named_modules():
        if isinstance(mod, torchvision.models.inception.BasicConv2d):
            suffix = "" if i == 0 else f"_{i}"
            names[f"{path}.conv"], names[f"{path}.bn"] = "conv2d" + suffix, "batch_normalization" + suffix
            i += 1
    assert i == 94  # Keras's InceptionV3 has 94 conv2d_bn
    return names


class _KerasPoolingF:
    """torch.nn.functional as torchvision's inception module sees it, but its 3x3/1 average pools
    leave the zero padding out of the mean, as Keras's AveragePooling2D(padding="same") does
    (torchvision counts it)."""

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)

    @staticmethod
    def avg_pool2d(x, kernel_size, stride=None, padding=0, **kwargs):
        return torch.nn.functional.avg_pool2d(x, kernel_size, stride, padding, count_include_pad=False)


def test_inception_v3_forward_and_training_loss_match_torchvision(monkeypatch):
    """InceptionV3 at 107 x 104 px (odd and even sides), batch 2, 10 classes,
    against torchvision's `inception_v3` (no aux logits, no input transform). Patched to Keras's
    definition: the average pools exclude the padding, every batch norm has no gamma (Keras's
    conv2d_bn uses scale=False: torchvision's weight is set to 1 and Strata has none) and
    epsilon 1e-3 (both). Every beta and moving statistic is randomized, the statistics drawn
    from a training-mode pass over the batch (momentum 1) and perturbed (the mean by N(0, 0.2)
    deviations, the variance by U(0.5, 2)). Compared: the inference logits
    (1e-4 of the largest) and one training step's loss (1e-4) and classifier gradients (within
    twice torch's own float32 deviation from float64).
    Not smaller: at 79 x 76 px the last blocks normalize 1 x 1 pixels of 2 images in training
    mode and torch's own float32 loss is 6.7e-4 off its float64 one (1.6e-5 at 107 px); the
    deeper gradients stay chaotic (torch's own float32 ones 1.4e-3 off) and are not compared."""
    monkeypatch.setattr(torchvision.models.inception, "F", _KerasPoolingF())
    torch.manual_seed(11)
    net = torchvision.models.inception_v3(weights=None, aux_logits=False, transform_input=False, init_weights=False,
                                          num_classes=10, dropout=0.0).double()  # Keras's has no dropout
    g = torch.Generator().manual_seed(11)
    for mod in net.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.eps = 1e-3
            mod.weight.data.fill_(1.0)
            mod.weight.requires_grad_(False)
            mod.bias.data.normal_(0.0, 0.3, generator=g)
    net.fc.bias.data.normal_(0.0, 0.3, generator=g)
    x = np.random.default_rng(12).normal(size=(2, 107, 104, 3)).astype(np.float32)
    torch_x = torch.from_numpy(x).double().permute(0, 3, 1, 2)
    bns = [mod for mod in net.modules() if isinstance(mod, torch.nn.BatchNorm2d)]
    for bn in bns:
        bn.momentum = 1.0
    net.train()
    with torch.no_grad():
        net(torch_x)
    for bn in bns:
        c = bn.num_features
        sd = bn.running_var.sqrt()
        bn.running_mean += torch.empty(c, dtype=torch.float64).normal_(0.0, 0.2, generator=g) * sd
        bn.running_var *= torch.empty(c, dtype=torch.float64).uniform_(0.5, 2.0, generator=g)
    with strata.distribute.MirroredStrategy(replicas=1).scope():
        model = strata.keras.applications.InceptionV3(weights=None, input_shape=(107, 104, 3), classes=10,
                                                      classifier_activation=None)
        model.compile(optimizer="sgd", loss=strata.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      seed=1)
    names = inception_v3_name_map(net)
    tensors = [(n, t) for n, t in list(net.named_parameters()) + list(net.named_buffers())
               if not (n.endswith(".weight") and names.get(n.rsplit(".", 1)[0], "").startswith("batch_normalization"))]
    left = copy_into_strata(tensors, names, model)
    assert not left, f"left unset: {sorted(left)[:5]}"
    net.eval()
    with torch.no_grad():
        want = net(torch_x).numpy()
    got = model.predict(x, verbose=0)
    scale = np.abs(want).max()
    err = np.abs(got - want).max() / scale
    assert err <= 1e-4, f"max |strata - torch| = {err:.2e} x max |torch|"
    assert np.abs(want[0] - want[1]).max() > 100 * 1e-4 * scale  # the images give different logits

    # One training step: batch norm on the batch's statistics (torch's momentum back to Keras's
    # 0.01 so its buffers move as Strata's do; the loss does not depend on them).
    for bn in bns:
        bn.momentum = 0.01
    net.train()
    y = np.array([3, 7], np.int64)
    net32 = copy.deepcopy(net).float()  # torch's own float32 step: how far rounding alone goes
    loss = torch.nn.functional.cross_entropy(net(torch_x), torch.from_numpy(y))
    loss.backward()
    torch.nn.functional.cross_entropy(net32(torch_x.float()), torch.from_numpy(y)).backward()
    got_loss = model.compute_gradients(x, y)
    assert abs(got_loss - loss.item()) <= 1e-4 * abs(loss.item()), (got_loss, loss.item())
    fc = [(n, p) for n, p in net.named_parameters() if n.startswith("fc.")]
    want_grads = torch_gradients(fc, names, model)
    torch32_grads = torch_gradients([(n, p) for n, p in net32.named_parameters() if n.startswith("fc.")], names, model)
    got_grads = strata_gradients(model, {n: a.shape for n, a in model.weights})
    # The classifier's gradient takes the pooled features of training-mode batch norms: torch's
    # own float32 kernel gradient is 2.9e-3 of its largest off float64 here, so Strata's is held
    # to twice torch's float32 deviation, and never more than 1e-2.
    for name in ("predictions/kernel", "predictions/bias"):
        w = want_grads[name]
        err = np.abs(got_grads[name] - w).max() / np.abs(w).max()
        err32 = np.abs(torch32_grads[name] - w).max() / np.abs(w).max()
        assert err <= min(max(1e-4, 2 * err32), 1e-2), f"gradient of {name}: {err:.2e} (torch float32: {err32:.2e})"
