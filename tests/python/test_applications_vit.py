"""Strata's ViTS16 and ViTB16 against torchvision 0.14's VisionTransformer (issue 45's independent
check).

torchvision's ViT is an implementation of its own with KerasHub's definition: a 16 x 16 / 16
patch convolution, the class token in front, a learned position embedding, pre-norm encoder
blocks (layer norm epsilon 1e-6, nn.MultiheadAttention, exact GELU MLP), a final layer norm and
the head on the class token. Its weights are copied into Strata's by a name map (conv_proj ->
vit_patching_and_embedding/patch_embedding, encoder.layers.encoder_layer_<i> ->
vit_encoder/transformer_block_<i + 1>; nn.MultiheadAttention's in_proj_weight [3 D, D] split
into Keras's query / key / value kernels [D, heads, key_dim], out_proj into attention_output
[heads, key_dim, D]). ViT-S/16 is torchvision's VisionTransformer class at S/16's sizes (384
features, 6 heads, MLP 1536); B/16 is its vit_b_16 layout. Both at small inputs (48 and 32 px:
9 and 4 patches), which change only the position embedding's rows.

Every weight is randomized (layer norms' gammas and betas, the class token and the position
embedding too). Strata in float32 against torch in float64: the logits to 1e-4 of the largest,
one training step's loss to 1e-4 and every gradient to 1e-4 of its variable's largest (no batch
norm or dropout: well conditioned); torch's own float32 within a quarter and a half of those.
"""
import numpy as np
import pytest
import torch
from torchvision.models.vision_transformer import VisionTransformer

import strata
from applications_common import (assert_logits_match, assert_training_step_matches, copy_into_strata, torch_gradients,
                                 torch_training_step)

CLASSES = 10
LABELS = np.array([3, 7], np.int64)
VARIANTS = {"s16": (384, 6, 1536, 48), "b16": (768, 12, 3072, 32)}  # hidden, heads, mlp, input side


def vit_keras_weight(hidden, heads):
    key_dim = hidden // heads

    def weight(layer, kind, value, strata_names=None):
        if layer.endswith("/mha"):
            if kind in ("in_proj_weight", "in_proj_bias"):
                raise AssertionError("split by copy_attention")
            if kind == "weight":  # out_proj [D, H k] -> [H, k, D]
                return f"{layer}/attention_output/kernel", value.T.reshape(heads, key_dim, hidden)
            return f"{layer}/attention_output/bias", value
        if layer == "vit_patching_and_embedding":
            if kind == "class_token":
                return f"{layer}/class_token", value
            if kind == "pos_embedding":
                return f"{layer}/position_embedding/embeddings", value.reshape(value.shape[1], hidden)
            return f"{layer}/patch_embedding/{'kernel' if kind == 'weight' else 'bias'}", \
                value.transpose(2, 3, 1, 0) if kind == "weight" else value
        if "/ln" in layer or layer.endswith("ln"):
            return f"{layer}/{'gamma' if kind == 'weight' else 'beta'}", value
        return f"{layer}/{'kernel' if kind == 'weight' else 'bias'}", value.T if kind == "weight" else value

    return weight


def name_map(layers):
    """torchvision module path -> Keras layer name (the leaves' parents)."""
    m = {"conv_proj": "vit_patching_and_embedding", "embedding": "vit_patching_and_embedding",
         "encoder": "vit_patching_and_embedding", "encoder.ln": "vit_encoder/ln", "heads.head": "predictions"}
    for i in range(layers):
        t, k = f"encoder.layers.encoder_layer_{i}", f"vit_encoder/transformer_block_{i + 1}"
        m.update({t + ".ln_1": k + "/ln_1", t + ".ln_2": k + "/ln_2", t + ".self_attention": k + "/mha",
                  t + ".self_attention.out_proj": k + "/mha", t + ".mlp.0": k + "/mlp/dense_1",
                  t + ".mlp.3": k + "/mlp/dense_2"})
    return m


def split_in_projection(named):
    """torch's (name, tensor) pairs, the class token under "embedding.class_token" (it has no module),
    without nn.MultiheadAttention's in_proj_weight [3 D, D] and in_proj_bias [3 D], which are
    returned apart, by (module, kind), for attention_weights to split."""
    out, split = [], {}
    for name, tensor in named:
        if name == "class_token":
            name = "embedding.class_token"
        prefix, kind = name.rsplit(".", 1)
        if kind in ("in_proj_weight", "in_proj_bias"):
            split[(prefix, kind)] = tensor
        else:
            out.append((name, tensor))
    return out, split


def attention_weights(split, names, hidden, heads, grad=False):
    """{Keras name: value} of the split in-projections (their gradients where grad)."""
    key_dim = hidden // heads
    out = {}
    for (prefix, kind), t in split.items():
        v = (t.grad if grad else t).detach().double().numpy()
        layer = names[prefix]
        for j, part in enumerate(("query", "key", "value")):
            block = v[j * hidden:(j + 1) * hidden]
            if kind == "in_proj_weight":
                out[f"{layer}/{part}/kernel"] = block.T.reshape(hidden, heads, key_dim)
            else:
                out[f"{layer}/{part}/bias"] = block.reshape(heads, key_dim)
    return out


def randomized_torch_vit(hidden, heads, mlp, side, seed):
    torch.manual_seed(seed)
    net = VisionTransformer(side, 16, 12, heads, hidden, mlp, num_classes=CLASSES).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in net.named_parameters():
            kind = name.rsplit(".", 1)[-1]
            if name in ("class_token", "encoder.pos_embedding"):
                p.normal_(0.0, 0.5, generator=g)
            elif p.ndim >= 2:
                p.normal_(0.0, p[0].numel() ** -0.5, generator=g)
            elif kind == "weight":  # layer norms' gammas
                p.normal_(1.0, 0.2, generator=g)
            else:
                p.normal_(0.0, 0.1, generator=g)
            p.copy_(p.float().double())  # float32 values: Strata's copy is exact
    return net


@pytest.fixture(scope="module", params=list(VARIANTS))
def vit(request):
    variant = request.param
    hidden, heads, mlp, side = VARIANTS[variant]
    net = randomized_torch_vit(hidden, heads, mlp, side, 3)
    with strata.distribute.MirroredStrategy(replicas=1).scope():
        model = getattr(strata.keras.applications, f"ViT{variant.upper()}")(
            weights=None, input_shape=(side, side, 3), classes=CLASSES, classifier_activation=None)
        model.compile(optimizer="sgd", loss=strata.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      seed=1)
    names = name_map(12)
    plain, split = split_in_projection(net.named_parameters())
    weight = vit_keras_weight(hidden, heads)
    left = copy_into_strata(plain, names, model, weight)
    views = dict(model.weights)
    for key, v in attention_weights(split, names, hidden, heads).items():
        assert views[key].shape == v.shape, (key, views[key].shape, v.shape)
        views[key][...] = v
        left.discard(key)
    assert not left, f"left unset: {sorted(left)[:5]}"
    return variant, net, model, side


def images(side):
    x = np.random.default_rng(4).uniform(-1, 1, size=(2, side, side, 3)).astype(np.float32)
    return x, torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2).contiguous()


def test_vit_forward_matches_torchvision(vit):
    variant, net, model, side = vit
    x, t = images(side)
    assert_logits_match(net, model, x, t, f"ViT {variant}")


def vit_gradients(net, model, hidden, heads):
    """torch's gradients under Keras's names, the in-projection split into query, key and value."""
    names = name_map(12)
    plain, split = split_in_projection(net.named_parameters())
    grads = torch_gradients(plain, names, model, vit_keras_weight(hidden, heads))
    grads.update(attention_weights(split, names, hidden, heads, grad=True))
    return grads


def test_vit_training_step_matches_torchvision(vit):
    variant, net, model, side = vit
    hidden, heads, _, _ = VARIANTS[variant]
    x, t = images(side)

    def step(dtype):
        return torch_training_step(net, t, dtype, LABELS, lambda n: vit_gradients(n, model, hidden, heads))

    assert_training_step_matches(net, model, x, LABELS, step, f"ViT {variant}")


def test_vit_keras_arguments():
    """KerasHub's layer and weight names, the tokens without the top (pooled on request), sides
    that are not whole patches refused, preprocess_input as KerasHub's converter (x / 127.5 - 1)."""
    apps = strata.keras.applications
    m = apps.ViTS16(input_shape=(32, 32, 3), include_top=False)
    assert m.output_shape == (None, 5, 384)
    names = [n for n, _ in m.weights]
    assert names[:4] == ["vit_patching_and_embedding/class_token", "vit_patching_and_embedding/patch_embedding/kernel",
                         "vit_patching_and_embedding/patch_embedding/bias",
                         "vit_patching_and_embedding/position_embedding/embeddings"]
    assert "vit_encoder/transformer_block_12/mha/attention_output/kernel" in names
    assert names[-2:] == ["vit_encoder/ln/gamma", "vit_encoder/ln/beta"]
    assert apps.ViTS16(input_shape=(32, 32, 3), include_top=False, pooling="avg").output_shape == (None, 384)
    with pytest.raises(ValueError, match="multiples of the patch size 16"):
        apps.ViTB16(input_shape=(40, 32, 3))
    x = np.full((1, 2, 2, 3), 255, np.float32)
    np.testing.assert_allclose(apps.vit.preprocess_input(x), 1.0)


def test_vit_position_embedding_is_resampled_for_another_input_size(tmp_path):
    """Weights saved at one input size load into a ViT at another, as timm resamples them: the
    class token's row as it is and the grid's rows (here 2 x 2 patches to 3 x 3) by
    torch.nn.functional.interpolate(mode="bicubic", align_corners=False); every other weight as
    it is. A grid that is not square in the file is a mismatch, named."""
    apps = strata.keras.applications
    small = apps.ViTS16(input_shape=(32, 32, 3), include_top=False)
    small.compile(optimizer="sgd", loss="mse", seed=2)
    small.save_weights(tmp_path / "vit_32.h5")
    big = apps.ViTS16(input_shape=(48, 48, 3), include_top=False)
    big.compile(optimizer="sgd", loss="mse", seed=3)
    big.load_weights(tmp_path / "vit_32.h5")
    key = "vit_patching_and_embedding/position_embedding/embeddings"
    src, got = dict(small.weights)[key], dict(big.weights)[key]
    assert src.shape == (5, 384) and got.shape == (10, 384)
    grid = torch.from_numpy(src[1:].astype(np.float64)).reshape(1, 2, 2, 384).permute(0, 3, 1, 2)
    want = torch.nn.functional.interpolate(grid, size=(3, 3), mode="bicubic", align_corners=False)
    want = want.permute(0, 2, 3, 1).reshape(9, 384).numpy()
    np.testing.assert_array_equal(got[0], src[0])
    np.testing.assert_allclose(got[1:], want, rtol=1e-5, atol=1e-6)
    for (name, a), (_, b) in zip(small.weights, big.weights):
        if name != key:
            np.testing.assert_array_equal(b, a, err_msg=name)
    wide = apps.ViTS16(input_shape=(32, 48, 3), include_top=False)
    wide.compile(optimizer="sgd", loss="mse")
    wide.load_weights(tmp_path / "vit_32.h5")  # a 2 x 3 grid from the square 2 x 2
    assert dict(wide.weights)[key].shape == (7, 384)
