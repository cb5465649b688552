"""Helpers the applications tests share (test_applications_torchvision.py,
test_applications_keras_source.py, test_applications_convnext.py,
test_applications_mobilenet_v3.py): torch's weights into Strata's by a name map, torch's
gradients under Keras's names, Keras's padding and epsilon patched into torchvision, and the
gradient comparison."""
import numpy as np
import torch

import strata


def randomize_batch_norm(bn, eps, g):
    """Keras's epsilon, and gamma, beta and the moving statistics drawn away from identity."""
    c = bn.num_features
    bn.eps = eps
    bn.weight.data = torch.empty(c, dtype=torch.float64).uniform_(0.5, 1.5, generator=g)
    bn.bias.data = torch.empty(c, dtype=torch.float64).normal_(0.0, 0.3, generator=g)
    bn.running_mean.data = torch.empty(c, dtype=torch.float64).normal_(0.0, 0.5, generator=g)
    bn.running_var.data = torch.empty(c, dtype=torch.float64).uniform_(0.5, 2.0, generator=g)


def keras_weight(layer, kind, value, strata_names):
    """The Keras name of torch's `kind` ("weight", "bias", "running_mean", ...) of the layer Keras
    calls `layer`, and `value` in Keras's layout: convolution kernels OIHW -> HWIO (a depthwise
    one's [C, 1, k, k] -> Strata's [k, k, 1, C]), dense kernels transposed; a batch norm's weight
    and bias are gamma and beta (a layer with a Keras bias keeps "bias")."""
    if kind == "weight" and value.ndim == 4:
        depthwise = f"{layer}/depthwise_kernel" in strata_names
        return f"{layer}/{'depthwise_kernel' if depthwise else 'kernel'}", value.transpose(2, 3, 1, 0)
    if kind == "weight" and value.ndim == 2:
        return f"{layer}/kernel", value.T
    if kind == "weight":
        return f"{layer}/gamma", value
    if kind == "bias":
        return f"{layer}/{'bias' if f'{layer}/bias' in strata_names else 'beta'}", value
    return f"{layer}/{ {'running_mean': 'moving_mean', 'running_var': 'moving_variance'}[kind]}", value


def copy_into_strata(named_tensors, names, model, keras_weight=keras_weight):
    """Writes torch's (name, tensor) pairs into the Strata model's weights, `names` mapping a torch
    module path to its Keras layer and `keras_weight` giving each one's Keras name and layout;
    returns the Strata weights left unset."""
    views = {n: a for n, a in model.weights}
    copied = set()
    for tname, tensor in named_tensors:
        prefix, kind = tname.rsplit(".", 1)
        if kind == "num_batches_tracked":
            continue
        key, v = keras_weight(names[prefix], kind, tensor.detach().numpy(), views)
        assert views[key].shape == v.shape, (key, views[key].shape, v.shape)
        views[key][...] = v
        copied.add(key)
    return set(views) - copied


def torch_gradients(named_parameters, names, model, keras_weight=keras_weight):
    """torch's gradients of (name, parameter) pairs under their Keras names, in Keras's layout."""
    strata_names = {n for n, _ in model.weights}
    out = {}
    for tname, p in named_parameters:
        prefix, kind = tname.rsplit(".", 1)
        key, g = keras_weight(names[prefix], kind, p.grad.double().numpy(), strata_names)
        out[key] = g
    return out


def keras_correct_pad(conv):
    """A stride-2 convolution of torchvision's pads k // 2 on every side; Keras's correct_pad pads
    one less at the top (left) of an even side. The convolution pads nothing and this pads first."""
    k = conv.kernel_size[0]
    conv.padding = (0, 0)
    forward = conv.forward

    def padded(x):
        h, w = x.shape[2], x.shape[3]
        c = k // 2
        return forward(torch.nn.functional.pad(x, (c - (1 - w % 2), c, c - (1 - h % 2), c)))

    conv.forward = padded


def calibrate_batch_norms(net, torch_x, g):
    """During one inference pass of `net` over torch_x, in network order, sets each batch norm's
    moving statistics from its own input: the channel's mean shifted by N(0, 0.2) of its
    deviation, and 4 x its variance x U(0.5, 2) (outputs at about half of gamma: contracting, so
    rounding does not grow through the depth). Statistics of a fixed scale would wash the images
    out; statistics from a training-mode pass miss each batch norm's inference input by the
    perturbations upstream of it, which compound."""

    def calibrate(bn, inputs):
        inp, c = inputs[0], bn.num_features
        sd = inp.std(dim=(0, 2, 3), unbiased=False)
        bn.running_mean.copy_(inp.mean(dim=(0, 2, 3))
                              + torch.empty(c, dtype=torch.float64).normal_(0.0, 0.2, generator=g) * sd)
        bn.running_var.copy_(4 * sd * sd * torch.empty(c, dtype=torch.float64).uniform_(0.5, 2.0, generator=g))

    bns = [mod for mod in net.modules() if isinstance(mod, torch.nn.BatchNorm2d)]
    hooks = [bn.register_forward_pre_hook(calibrate) for bn in bns]
    with torch.no_grad():
        net(torch_x)
    for hook in hooks:
        hook.remove()


class _GivenMaskDropout(torch.nn.Module):
    """A dropout of rate p with a given keep mask (broadcast over the input): x * keep / (1 - p)
    in training, x in inference."""

    def __init__(self, p, keep):
        super().__init__()
        self.p, self.keep = p, keep

    def forward(self, x):
        if not self.training:
            return x
        return x * (torch.from_numpy(self.keep).to(x.dtype) / (1 - self.p))


def use_strata_dropout_masks(net, batch):
    """Gives torchvision's dropouts the masks of Strata's first training step on `batch` images
    (compile seed 1, one replica). Strata's EfficientNet drops in training, as Keras's: each
    residual branch (Keras's block<stage><letter>_drop, a Dropout with noise_shape (None, 1, 1,
    1); torchvision's StochasticDepth "row"; both at rate 0.2 x the block's index / the number of
    blocks, none at rate 0) and the pooled features (top_dropout; torchvision's classifier
    Dropout, at the same rate), and neither Keras's EfficientNetB<n> nor Strata's takes a rate to
    turn them off. A Strata mask depends on the compile seed, the replica, the layer's name and
    rate, the step and the element's index only (src/strata/backend/dropout_mask.h), so a model
    of Dropout layers of the same names, rates and mask shapes draws the same ones: each takes a
    zero Dense kernel's product with one-hot images, so under the squared error to -1 row i of
    that kernel's gradient is image i's mask (times 2 / the outputs' count). The rates are
    torchvision's: a Strata model at other rates would draw other masks and miss torch's step.
    EfficientNetV2's blocks drop the same way (Keras's MBConvBlock / FusedMBConvBlock)."""
    layers = strata.keras.layers
    sites = {"top_dropout": (net.classifier, "0", net.classifier[1].in_features)}  # name: (parent, child, units)
    for i in range(1, len(net.features) - 1):  # the stages, between the stem and the top convolution
        for j, block in enumerate(net.features[i]):
            if block.use_res_connect and block.stochastic_depth.p > 0:
                sites[f"block{i}{chr(97 + j)}_drop"] = (block, "stochastic_depth", 1)
    one_hot = strata.keras.Input((batch,))
    outputs = []
    for name, (parent, child, units) in sites.items():
        y = layers.Dense(units, use_bias=False, kernel_initializer="zeros", name=name + "_probe")(one_hot)
        p = getattr(parent, child).p
        if units == 1:  # drop-connect: one draw per image
            y = layers.Reshape((1, 1, 1))(y)
            y = layers.Flatten()(layers.Dropout(p, noise_shape=(None, 1, 1, 1), name=name)(y))
        else:
            y = layers.Dropout(p, name=name)(y)
        outputs.append(y)
    with strata.distribute.MirroredStrategy(replicas=1).scope():
        probe = strata.keras.Model(one_hot, layers.Concatenate()(outputs))
        probe.compile(optimizer="sgd", loss="mse", seed=1)
    width = sum(units for _, _, units in sites.values())
    probe.compute_gradients(np.eye(batch, dtype=np.float32), np.full((batch, width), -1.0, np.float32))
    grads = strata_gradients(probe, {n: w.shape for n, w in probe.weights})
    for name, (parent, child, units) in sites.items():
        keep = grads[name + "_probe/kernel"] > 0
        setattr(parent, child, _GivenMaskDropout(getattr(parent, child).p,
                                                 keep.reshape(batch, 1, 1, 1) if units == 1 else keep))
    top = net.classifier[0]
    assert abs(top.keep.mean() - (1 - top.p)) < 0.05  # the probe reads masks of rate p


def keras_batch_norm_net(net, torch_x, seed):
    """A torchvision convnet patched to Keras's definition and drawn away from identity, in place:
    Keras's correct_pad / "same" padding before every stride-2 convolution (keras_correct_pad),
    every batch norm at Keras's epsilon 1e-3 with gamma, beta randomized (randomize_batch_norm),
    every convolution's and Linear's bias N(0, 0.3), then the moving statistics calibrated on
    torch_x (calibrate_batch_norms). The generator is seeded with `seed`."""
    g = torch.Generator().manual_seed(seed)
    for mod in net.modules():
        if isinstance(mod, torch.nn.Conv2d) and mod.stride[0] == 2:
            keras_correct_pad(mod)
        if isinstance(mod, torch.nn.BatchNorm2d):
            randomize_batch_norm(mod, 1e-3, g)
        elif isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)) and mod.bias is not None:
            mod.bias.data.normal_(0.0, 0.3, generator=g)
    calibrate_batch_norms(net, torch_x, g)
    return net


def torch_training_step(net, t, dtype, labels, gradients):
    """torch's loss of one training-mode step of `net` (converted in place to dtype; batch norm on
    the batch's mean and biased variance, momentum 0 so the moving statistics stay) under the
    sparse cross-entropy from logits, and gradients(net): its gradients in Keras's names and layout."""
    net.to(dtype).train()
    for mod in net.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.momentum = 0.0
    net.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(net(t.to(dtype)), torch.from_numpy(labels))
    loss.backward()
    grads = gradients(net)
    net.zero_grad(set_to_none=True)
    return loss.item(), grads


def assert_logits_match(net, model, x, t, what, tolerance=1e-4):
    """Strata's predict(x) against net(t) in float64 (left so, in inference mode): within
    `tolerance` of the largest logit. torch's own float32 must be within a quarter of it, or the
    weights, not Strata, would be to blame; and the two images must give different logits."""
    net.double().eval()
    with torch.no_grad():
        want = net(t).numpy()
        want32 = net.float()(t.float()).double().numpy()  # in place: patched paddings stay
    net.double()
    scale = np.abs(want).max()
    assert np.abs(want32 - want).max() / scale <= tolerance / 4, "ill-conditioned weights: torch's own float32 is off"
    assert np.abs(want[0] - want[1]).max() > 100 * tolerance * scale  # the images give different logits
    err = np.abs(model.predict(x, verbose=0) - want).max() / scale
    assert err <= tolerance, f"{what}: max |strata - torch| = {err:.2e} x max |torch|"


def assert_training_step_matches(net, model, x, labels, step, what, loss_tolerance=1e-4, grad_tolerance=1e-4,
                                 torch_loss_check=False):
    """One training step: step(dtype) gives torch's (loss, {Keras name: gradient}) with `net` in
    that dtype, run in float64 and float32 (the net left in float64, inference mode). Strata's
    loss within loss_tolerance of torch's float64 one, and every gradient within grad_tolerance of
    its variable's largest (gradient_scales); torch's own float32 gradients (and loss, with
    torch_loss_check) within half of those, or the weights would be to blame."""
    loss64, want = step(torch.float64)
    loss32, want32 = step(torch.float32)
    net.double().eval()
    scales = gradient_scales(want)
    own, own_name = worst_gradient(want32, want, scales)
    if torch_loss_check:
        assert abs(loss32 - loss64) <= loss_tolerance / 2 * abs(loss64)
    assert own <= grad_tolerance / 2, f"ill-conditioned: torch's own float32 gradient of {own_name} is {own:.2e} off"
    got_loss = model.compute_gradients(x, labels)
    assert abs(got_loss - loss64) <= loss_tolerance * abs(loss64), (what, got_loss, loss64)
    got = strata_gradients(model, {n: w.shape for n, w in model.weights})
    assert set(got) == set(want)
    err, name = worst_gradient(got, want, scales)
    assert err <= grad_tolerance, f"{what}: gradient of {name}: {err:.2e} x its largest"


def strata_gradients(model, shapes):
    """compute_gradients' block (the trainable variables' gradients, in the store's order) as
    name -> array of the given shape; every value of the block is someone's."""
    grads, offset, out = model.gradients(), 0, {}
    for name, _, trainable in model._cc.weights():
        if trainable:
            size = int(np.prod(shapes[name]))
            out[name] = grads[offset:offset + size].reshape(shapes[name])
            offset += size
    assert offset == grads.size
    return out


def gradient_scales(grads, siblings=None):
    """Each variable's largest |gradient|; for one that is zero in exact arithmetic (below 1e-10 of
    its sibling's), its sibling's: `siblings[name]` where given, else a bias takes its layer's
    kernel's and a beta its batch norm's gamma's."""
    scales = {}
    for n, g in grads.items():
        layer, leaf = n.rsplit("/", 1)
        sibling = (siblings or {}).get(n) or {"bias": layer + "/kernel", "beta": layer + "/gamma"}.get(leaf)
        own = np.abs(g).max()
        scales[n] = np.abs(grads[sibling]).max() if sibling in grads and own < 1e-10 * np.abs(grads[sibling]).max() \
            else own
    return scales


def worst_gradient(got, want, scales):
    """The largest max |got - want| of a variable over its scale, and that variable's name."""
    return max((np.abs(got[n] - want[n]).max() / scales[n], n) for n in want)
