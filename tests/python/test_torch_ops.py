"""The op registry's newer ops against PyTorch 1.13 (Debian's python3-torch), an independent
implementation: layer normalization (torch.nn.functional.layer_norm), GELU in both forms
(torch.nn.functional.gelu, approximate 'none' and 'tanh'), hard swish and hard sigmoid
(torch.nn.functional.hardswish / hardsigmoid), multi-head attention (written in torch ops) and
grouped convolution
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
    pred = model.predict(x, batch_size=len(x[0]) if isinstance(x, list) else len(x), verbose=0)
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


@pytest.mark.parametrize("masked", [False, True])
def test_multi_head_attention_matches_torch(masked):
    """keras.layers.MultiHeadAttention (3 heads, key_dim 4, value_dim 5, output_shape 7; a query of
    4 tokens over a key and a value of 6) against the attention written in torch: its projections
    with Keras's kernels [d, heads, k] as matrices, softmax(q k^T / sqrt(key_dim)) over the keys
    with masked positions at -inf (masked_fill; Keras's mask is 1 to attend, 0 not), times the
    values, projected back. Forward and every weight's gradient; a mask that is ignored misses."""
    rng = np.random.default_rng(7)
    q_in = strata.keras.Input(shape=(4, 6))
    v_in = strata.keras.Input(shape=(6, 5))
    k_in = strata.keras.Input(shape=(6, 3))
    m_in = strata.keras.Input(shape=(4, 6))
    mha = layers.MultiHeadAttention(num_heads=3, key_dim=4, value_dim=5, output_shape=7, name="mha")
    out = mha(q_in, v_in, key=k_in, attention_mask=m_in if masked else None)
    model = strata.keras.Model([q_in, v_in, k_in] + ([m_in] if masked else []), layers.Flatten()(out))
    w = set_weights(model, rng)
    assert [n for n, _ in model.weights] == [f"mha/{p}/{k}" for p in ("query", "key", "value", "attention_output")
                                             for k in ("kernel", "bias")]
    assert model.weights[0][1].shape == (6, 3, 4) and model.weights[6][1].shape == (3, 5, 7)
    q = rng.uniform(-1, 1, (2, 4, 6)).astype(np.float32)
    v = rng.uniform(-1, 1, (2, 6, 5)).astype(np.float32)
    k = rng.uniform(-1, 1, (2, 6, 3)).astype(np.float32)
    mask = (rng.uniform(size=(2, 4, 6)) < 0.5).astype(np.float32)
    mask[:, :, 0] = 1  # every query attends to something
    y = rng.uniform(-1, 1, (2, 4 * 7)).astype(np.float32)
    pred, grads = strata_run(model, [q, v, k] + ([mask] if masked else []), y)

    def t64(a):
        return torch.tensor(a.astype(np.float64))

    def heads(x, name, d, width):  # [B, tokens, d] -> [B, H, tokens, width]
        y = x @ w[f"mha/{name}/kernel"].reshape(d, 3 * width) + w[f"mha/{name}/bias"].reshape(-1)
        return y.reshape(2, x.shape[1], 3, width).transpose(1, 2)

    def attention(use_mask):
        qh, kh, vh = heads(t64(q), "query", 6, 4), heads(t64(k), "key", 3, 4), heads(t64(v), "value", 5, 5)
        scores = qh @ kh.transpose(-1, -2) / 2.0  # sqrt(key_dim)
        if use_mask:
            scores = scores.masked_fill((t64(mask) == 0)[:, None], float("-inf"))
        ctx = (torch.softmax(scores, dim=-1) @ vh).transpose(1, 2).reshape(2, 4, 15)
        return (ctx @ w["mha/attention_output/kernel"].reshape(15, 7) + w["mha/attention_output/bias"]).reshape(2, -1)

    ref = attention(masked)
    assert_close(pred, grads, ref, torch_grads(ref, y, w))
    if masked:
        assert np.abs(attention(False).detach().numpy() - pred).max() > 1e-2


def test_multi_head_attention_weights_round_trip_keras_h5(tmp_path):
    """A MultiHeadAttention's weights (Keras's EinsumDense parts under the layer's group:
    mha/query/kernel:0, ...) written as a Keras .h5 file load back into a fresh model by order and
    by name, every value in place (the loader does not take the layer's group for a nested model's)."""
    rng = np.random.default_rng(8)

    def build():
        inp = strata.keras.Input(shape=(5, 8))
        out = layers.MultiHeadAttention(num_heads=2, key_dim=3, name="mha")(inp, inp)
        model = strata.keras.Model(inp, out)
        model.compile(optimizer="sgd", loss="mse")
        return model

    src, dst = build(), build()
    for _, a in src.weights:
        a[...] = rng.normal(size=a.shape)
    src.save_weights(tmp_path / "mha.h5")
    dst.load_weights(tmp_path / "mha.h5")
    for (name, want), (_, got) in zip(src.weights, dst.weights):
        np.testing.assert_array_equal(got, want, err_msg=name)
    again = build()
    again.load_weights(tmp_path / "mha.h5", by_name=True)
    np.testing.assert_array_equal(again.weights[6][1], src.weights[6][1])


def test_embedding_matches_torch_and_names_a_bad_id():
    """keras.layers.Embedding against torch.nn.functional.embedding: the rows at float ids (as
    Keras casts them), forward, and the table's gradient through a Dense (repeated ids add their
    rows); an id past the table fails the step naming the layer and the id."""
    rng = np.random.default_rng(9)
    inp = strata.keras.Input(shape=(5,))
    h = layers.Embedding(7, 4, name="emb")(inp)
    model = strata.keras.Model(inp, layers.Flatten()(layers.Dense(3, name="dense")(h)))
    w = set_weights(model, rng)
    ids = np.array([[0, 6, 2, 2, 5], [3, 3, 3, 1, 0]], np.float32)
    y = rng.uniform(-1, 1, (2, 15)).astype(np.float32)
    pred, grads = strata_run(model, ids, y)
    ref = (F.embedding(torch.tensor(ids, dtype=torch.long), w["emb/embeddings"]) @ w["dense/kernel"]
           + w["dense/bias"]).reshape(2, -1)
    assert_close(pred, grads, ref, torch_grads(ref, y, w))
    with pytest.raises(Exception, match=r"emb.*id 7 .*\[0, 7\)"):
        model.predict(np.array([[0, 1, 7, 2, 3]], np.float32), verbose=0)


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
