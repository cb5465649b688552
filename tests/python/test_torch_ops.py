"""The op registry's newer ops against PyTorch 1.13 (Debian's python3-torch), an independent
implementation: layer normalization (torch.nn.functional.layer_norm), GELU in both forms
(torch.nn.functional.gelu, approximate 'none' and 'tanh'), hard swish and hard sigmoid
(torch.nn.functional.hardswish / hardsigmoid) and grouped convolution
(torch.nn.functional.conv2d(groups=)). Each builds a small Keras model in Strata, copies its
weights into PyTorch, and compares the forward pass (predict) and one backward pass
(compute_gradients: every trainable weight's gradient of the mean squared error, which
reaches the op's input gradient through the layer in front of it) in float64 on the torch side.
"""
import functools

import numpy as np
import pytest

import strata
from strata.keras import activations, layers

torch = pytest.importorskip("torch")  # Debian's python3-torch (scripts/deps.sh)
F = torch.nn.functional


def strata_run(model, x, y):
    """(predictions, {weight name: gradient}) of one compute_gradients on (x, y) in float32."""
    model.compile(optimizer="sgd", loss="mse")
    pred = model.predict(x, batch_size=len(x), verbose=0)
    model.compute_gradients(x, y)
    flat = np.array(model.gradients(), copy=True)
    grads, at = {}, 0
    for name, array, trainable in model._cc.weights():
        if trainable:
            grads[name] = flat[at:at + array.size].reshape(array.shape)
            at += array.size
    assert at == flat.size
    return pred, grads


def set_weights(model, rng):
    """Random values (not Keras's initial ones: gamma 1 and beta 0 would hide their gradients)."""
    values = {}
    for name, array in model.weights:
        array[...] = rng.uniform(-1, 1, array.shape).astype(np.float32)
        values[name] = torch.tensor(array.astype(np.float64), requires_grad=True)
    return values


def torch_grads(out, y, weights):
    loss = ((out - torch.tensor(y.astype(np.float64))) ** 2).mean()  # Keras's mse over every element
    loss.backward()
    return {name: w.grad.numpy() for name, w in weights.items()}


def assert_close(pred, grads, out, want, atol=2e-5):
    np.testing.assert_allclose(pred, out.detach().numpy(), rtol=1e-4, atol=atol)
    for name, g in want.items():
        np.testing.assert_allclose(grads[name], g, rtol=1e-3, atol=atol, err_msg=name)


@pytest.mark.parametrize("center,scale", [(True, True), (False, True), (True, False)])
def test_layer_normalization_matches_torch_layer_norm(center, scale):
    rng = np.random.default_rng(1)
    inp = strata.keras.Input(shape=(6,))
    h = layers.Dense(8, name="dense")(inp)
    out = layers.LayerNormalization(epsilon=1e-5, center=center, scale=scale, name="ln")(h)
    model = strata.keras.Model(inp, out)
    assert model.count_params() == 6 * 8 + 8 + 8 * (int(center) + int(scale))  # Keras's count
    w = set_weights(model, rng)
    x = rng.uniform(-2, 2, (5, 6)).astype(np.float32)
    y = rng.uniform(-1, 1, (5, 8)).astype(np.float32)
    pred, grads = strata_run(model, x, y)
    hidden = torch.tensor(x.astype(np.float64)) @ w["dense/kernel"] + w["dense/bias"]
    ref = F.layer_norm(hidden, (8,), w.get("ln/gamma"), w.get("ln/beta"), eps=1e-5)
    assert_close(pred, grads, ref, torch_grads(ref, y, w))


def test_layer_normalization_over_channels_after_a_grouped_convolution_matches_torch():
    rng = np.random.default_rng(2)
    inp = strata.keras.Input(shape=(5, 5, 4))
    h = layers.Conv2D(6, 3, padding="same", groups=2, name="conv")(inp)
    h = layers.LayerNormalization(name="ln")(h)  # Keras's epsilon 1e-3
    model = strata.keras.Model(inp, layers.Flatten()(h))
    w = set_weights(model, rng)
    x = rng.uniform(-1, 1, (3, 5, 5, 4)).astype(np.float32)
    y = rng.uniform(-1, 1, (3, 5 * 5 * 6)).astype(np.float32)
    pred, grads = strata_run(model, x, y)
    # NHWC with an HWIO kernel [3, 3, 2, 6] against torch's NCHW and OIHW [6, 2, 3, 3].
    xt = torch.tensor(x.astype(np.float64)).permute(0, 3, 1, 2)
    conv = F.conv2d(xt, w["conv/kernel"].permute(3, 2, 0, 1), w["conv/bias"], padding=1, groups=2)
    nhwc = conv.permute(0, 2, 3, 1)
    ref = F.layer_norm(nhwc, (6,), w["ln/gamma"], w["ln/beta"], eps=1e-3).reshape(3, -1)
    assert_close(pred, grads, ref, torch_grads(ref, y, w))


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu_matches_torch_in_both_forms(approximate):
    rng = np.random.default_rng(3)
    inp = strata.keras.Input(shape=(7,))
    h = layers.Dense(9, name="dense")(inp)
    out = activations.gelu(h, approximate=approximate)  # the functional form
    model = strata.keras.Model(inp, out)
    w = set_weights(model, rng)
    x = rng.uniform(-3, 3, (6, 7)).astype(np.float32)
    y = rng.uniform(-1, 1, (6, 9)).astype(np.float32)
    pred, grads = strata_run(model, x, y)
    hidden = torch.tensor(x.astype(np.float64)) @ w["dense/kernel"] + w["dense/bias"]
    ref = F.gelu(hidden, approximate="tanh" if approximate else "none")
    assert_close(pred, grads, ref, torch_grads(ref, y, w))


@pytest.mark.parametrize("name,torch_fn", [("hard_swish", F.hardswish), ("hard_sigmoid_keras3", F.hardsigmoid)])
def test_hard_swish_and_sigmoid_match_torch_fused_and_alone(name, torch_fn):
    """MobileNetV3's activations: fused into a 1x1 convolution's epilogue (oneDNN post-ops) and on
    their own after a layer normalization (Strata's hard sigmoid kernel, oneDNN's hardswish), with
    inputs across both kinks (-3 and 3)."""
    rng = np.random.default_rng(6)
    inp = strata.keras.Input(shape=(4, 4, 3))
    h = layers.Conv2D(5, 1, activation=name, name="conv")(inp)
    h = layers.LayerNormalization(name="ln")(h)
    h = layers.Rescaling(4.0)(h)
    out = layers.Flatten()(layers.Activation(name)(h))
    model = strata.keras.Model(inp, out)
    w = set_weights(model, rng)
    x = rng.uniform(-4, 4, (3, 4, 4, 3)).astype(np.float32)
    y = rng.uniform(-1, 1, (3, 4 * 4 * 5)).astype(np.float32)
    pred, grads = strata_run(model, x, y)
    conv = torch.tensor(x.astype(np.float64)) @ w["conv/kernel"][0, 0] + w["conv/bias"]
    ln = F.layer_norm(torch_fn(conv), (5,), w["ln/gamma"], w["ln/beta"], eps=1e-3)
    ref = torch_fn(4 * ln).reshape(3, -1)
    assert_close(pred, grads, ref, torch_grads(ref, y, w))


def test_gelu_is_a_layer_activation_by_name_function_or_partial():
    rng = np.random.default_rng(4)
    x = rng.uniform(-3, 3, (4, 5)).astype(np.float32)
    for activation, form in [("gelu", "none"), ("gelu_approximate", "tanh"), (activations.gelu, "none"),
                             (functools.partial(activations.gelu, approximate=True), "tanh")]:
        inp = strata.keras.Input(shape=(5,))
        model = strata.keras.Model(inp, layers.Dense(3, activation=activation, name="dense")(inp))
        w = set_weights(model, rng)
        hidden = torch.tensor(x.astype(np.float64)) @ w["dense/kernel"] + w["dense/bias"]
        np.testing.assert_allclose(model.predict(x, verbose=0), F.gelu(hidden, approximate=form).detach().numpy(),
                                   rtol=1e-4, atol=2e-5, err_msg=repr(activation))
    with pytest.raises(TypeError, match="strata.keras.activations"):
        layers.Dense(4, activation=lambda t: t)


def test_layer_normalization_refuses_what_it_does_not_do():
    inp = strata.keras.Input(shape=(4, 6))
    with pytest.raises(Exception, match="only the last axis"):
        strata.keras.Model(inp, layers.LayerNormalization(axis=1)(inp)).compile(loss="mse")
    with pytest.raises(Exception, match="rms_scaling"):
        layers.LayerNormalization(rms_scaling=True)


def test_layer_normalization_and_gelu_in_mixed_bfloat16_follow_torch_or_are_refused():
    """Under mixed_bfloat16 (where the CPU runs it: AVX-512) the convolution and the layer norm read
    bf16, and the results stay within bf16's rounding of PyTorch's float64; elsewhere compile refuses."""
    rng = np.random.default_rng(5)
    inp = strata.keras.Input(shape=(5, 5, 4))
    h = layers.Conv2D(6, 3, padding="same", groups=2, name="conv")(inp)
    h = layers.LayerNormalization(name="ln")(h)
    h = activations.gelu(h, approximate=True)
    model = strata.keras.Model(inp, layers.Flatten()(h))
    if "bf16" not in strata.devices()[0].precisions:
        with pytest.raises(Exception, match="bf16|bfloat16"):
            model.compile(optimizer="sgd", loss="mse", precision="mixed_bfloat16")
        return
    model.compile(optimizer="sgd", loss="mse", precision="mixed_bfloat16")
    w = set_weights(model, rng)
    x = rng.uniform(-1, 1, (3, 5, 5, 4)).astype(np.float32)
    y = rng.uniform(-1, 1, (3, 5 * 5 * 6)).astype(np.float32)
    pred = model.predict(x, batch_size=3, verbose=0)
    model.compute_gradients(x, y)
    flat = np.array(model.gradients(), copy=True)
    xt = torch.tensor(x.astype(np.float64)).permute(0, 3, 1, 2)
    conv = F.conv2d(xt, w["conv/kernel"].permute(3, 2, 0, 1), w["conv/bias"], padding=1, groups=2)
    ln = F.layer_norm(conv.permute(0, 2, 3, 1), (6,), w["ln/gamma"], w["ln/beta"], eps=1e-3)
    ref = F.gelu(ln, approximate="tanh").reshape(3, -1)
    want = torch_grads(ref, y, w)
    np.testing.assert_allclose(pred, ref.detach().numpy(), atol=0.05)  # bf16: 8 bits of mantissa
    at = 0
    for name, array, trainable in model._cc.weights():
        g = flat[at:at + array.size].reshape(array.shape)
        at += array.size
        np.testing.assert_allclose(g, want[name], atol=0.05 * np.abs(want[name]).max(), err_msg=name)
