"""The five Keras applications as PyTorch forward passes (float64, NCHW,
torch.nn.functional), written from Keras's model source, for tests/keras/applications_oracle.py
(which reads Strata's checkpoints and runs the checks): the Keras layers the models use
(`Forward`) and each model's structure (`MODELS`)."""
import math
import sys

import torch
import torch.nn.functional as F


# ---- Keras layers in torch (NCHW, float64) --------------------------------------------------
class Forward:
    """One forward pass. `mutate` names a Keras detail to get wrong (the self-check);
    `calibrate` sets each batch norm's moving statistics from its input on the way.
    `training`: Keras's training=True (batch norm on the batch's statistics; batch_stats
    collects each one's mean and unbiased variance, what the moving averages take)."""

    def __init__(self, w, bn_eps, mutate=None, calibrate=None, training=False, kink_guard=None):
        self.w, self.bn_eps, self.mutate, self.calibrate = w, bn_eps, mutate, calibrate
        self.training = training
        self.batch_stats = {}
        # kink_guard(weights, batch norm, x, kinks): called with every ReLU / ReLU6 input, which
        # the last batch norm's beta shifts channel by channel (ResNet's add included).
        self.kink_guard, self.last_bn = kink_guard, None

    def pad(self, x, top, bottom, left, right):  # ZeroPadding2D
        return F.pad(x, (left, right, top, bottom))

    def correct_pad(self, x, k):
        """keras_applications.correct_pad: ((k//2 - adjust, k//2), ...), adjust = 1 - size % 2,
        so an even side gets its extra pixel at the end."""
        h, w = x.shape[2], x.shape[3]
        c = k // 2
        ah, aw = 1 - h % 2, 1 - w % 2
        if self.mutate == "pad_at_start":
            return self.pad(x, c, c - ah, c, c - aw)
        return self.pad(x, c - ah, c, c - aw, c)

    def same_pads(self, x, k, stride):
        """TensorFlow's 'same': out = ceil(in / s), the odd pixel of padding at the end (at the
        start under the pad_at_start mutation). Returns (top, bottom, left, right)."""
        pads = []
        for size in (x.shape[2], x.shape[3]):
            out = -(-size // stride)
            total = max((out - 1) * stride + k - size, 0)
            pads.append((total // 2, total - total // 2))
        (t, b), (l, r) = pads
        if self.mutate == "pad_at_start":
            t, b, l, r = b, t, r, l
        return t, b, l, r

    def same_pad(self, x, k, stride):
        return self.pad(x, *self.same_pads(x, k, stride))

    def conv(self, x, name, stride=1, padding="valid", activation=None, use_bias=False):
        k = self.w[name + "/kernel"]                       # HWIO
        bias = self.w[name + "/bias"] if use_bias else None
        if padding == "same":
            x = self.same_pad(x, k.shape[0], stride)
        x = F.conv2d(x, k.permute(3, 2, 0, 1), bias, stride=stride)
        return self.act(x, activation)

    def depthwise(self, x, name, stride=1, padding="valid"):  # use_bias=False in all three
        # Keras's [kh, kw, C, multiplier]; Strata stores the same elements as [kh, kw, 1, C*m]
        # (docs/applications.md), so take C from the input.
        k = self.w[name + "/depthwise_kernel"]
        c = x.shape[1]
        kh, kw = k.shape[0], k.shape[1]
        m = k.numel() // (kh * kw * c)
        k = k.reshape(kh, kw, c, m)
        self.w.keras_shapes[name + "/depthwise_kernel"] = (kh, kw, c, m)
        if padding == "same":
            x = self.same_pad(x, kh, stride)
        return F.conv2d(x, k.permute(2, 3, 0, 1).reshape(c * m, 1, kh, kw), None, stride=stride, groups=c)

    def separable(self, x, name):
        """SeparableConv2D(padding='same', use_bias=False): depthwise (multiplier 1), then the
        1x1 pointwise convolution."""
        x = self.depthwise(x, name, padding="same")
        return F.conv2d(x, self.w[name + "/pointwise_kernel"].permute(3, 2, 0, 1))

    def max_pool_same(self, x, k, stride):
        """MaxPooling2D(padding='same'): TensorFlow's 'same' windows; the padding never wins
        (-inf; the mutation pads zeros, which win where a border window is all negative)."""
        t, b, l, r = self.same_pads(x, k, stride)
        fill = 0.0 if self.mutate == "pool_pad_zero" else -math.inf
        return F.max_pool2d(F.pad(x, (l, r, t, b), value=fill), k, stride=stride)

    def bn(self, x, name):
        eps = self.bn_eps
        if self.mutate == "bn_epsilon":
            eps = 1e-3 if eps < 1e-4 else 1.001e-5
        if self.calibrate is not None:
            self.calibrate(self.w, name, x)
        self.last_bn = name
        gamma, beta = self.w[name + "/gamma"], self.w[name + "/beta"]
        mean, var = self.w[name + "/moving_mean"], self.w[name + "/moving_variance"]
        if self.training:
            # Keras's training=True: the batch's mean and biased variance (over N, H, W)
            # normalise; the moving averages take the unbiased variance (TF's fused kernel).
            batch_mean = x.mean(dim=(0, 2, 3))
            unbiased = x.var(dim=(0, 2, 3), unbiased=True)
            self.batch_stats[name] = (batch_mean.detach(), unbiased.detach(), x.numel() // x.shape[1])
            if self.mutate != "moving_statistics":
                mean = batch_mean
                var = unbiased if self.mutate == "unbiased_variance" else x.var(dim=(0, 2, 3), unbiased=False)
                if self.mutate == "batch_stats_constant":  # no gradient through the statistics
                    mean, var = mean.detach(), var.detach()
        shape = (1, -1, 1, 1)
        return (x - mean.view(shape)) / torch.sqrt(var.view(shape) + eps) * gamma.view(shape) + beta.view(shape)

    def act(self, x, activation):
        if activation is None:
            return x
        if self.kink_guard is not None and activation in ("relu", "relu6"):
            x = self.kink_guard(self.w, self.last_bn, x, (0.0,) if activation == "relu" else (0.0, 6.0))
        if activation == "relu":
            return F.relu(x)
        if activation == "relu6":
            return F.relu(x) if self.mutate == "relu6_as_relu" else torch.clamp(x, 0, 6)
        if activation == "swish":
            return F.relu(x) if self.mutate == "swish_as_relu" else x * torch.sigmoid(x)
        if activation == "sigmoid":
            return torch.sigmoid(x)
        raise ValueError(activation)

    def dense(self, x, names):
        for name in names:
            if self.w.has(name + "/kernel"):
                return x @ self.w[name + "/kernel"] + self.w[name + "/bias"]
        sys.exit("no classifier Dense among %s" % names)


def resnet50(f, x):
    """keras_applications/resnet_common.py: ResNet(stack1 x [3, 4, 6, 3]), use_bias=True."""
    x = f.pad(x, 3, 3, 3, 3)                                    # conv1_pad
    x = f.conv(x, "conv1_conv", stride=2, use_bias=True)
    x = f.act(f.bn(x, "conv1_bn"), "relu")
    x = f.pad(x, 1, 1, 1, 1)                                    # pool1_pad
    x = F.max_pool2d(x, 3, stride=2)                            # pool1_pool

    def block1(x, filters, stride, conv_shortcut, name):
        if conv_shortcut:
            shortcut = f.bn(f.conv(x, name + "_0_conv", stride=stride, use_bias=True), name + "_0_bn")
        else:
            shortcut = x
        s1, s2 = (1, stride) if f.mutate == "stride_on_3x3" else (stride, 1)
        y = f.act(f.bn(f.conv(x, name + "_1_conv", stride=s1, use_bias=True), name + "_1_bn"), "relu")
        y = f.act(f.bn(f.conv(y, name + "_2_conv", stride=s2, padding="same", use_bias=True), name + "_2_bn"), "relu")
        y = f.bn(f.conv(y, name + "_3_conv", use_bias=True), name + "_3_bn")
        return f.act(shortcut + y, "relu")

    for stack, (filters, blocks, stride1) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        name = "conv%d" % (stack + 2)
        x = block1(x, filters, stride1, True, name + "_block1")
        for i in range(2, blocks + 1):
            x = block1(x, filters, 1, False, name + "_block%d" % i)
    x = x.mean(dim=(2, 3))                                      # avg_pool
    return f.dense(x, ["predictions", "probs"])


def xception(f, x):
    """keras_applications/xception.py: batch norms at Keras's default epsilon (1e-3); the four
    residual 1x1 convolutions and their batch norms are unnamed there, so Keras numbers them
    (conv2d, conv2d_1, ...; batch_normalization, batch_normalization_1, ...)."""
    def relu(t):
        return f.act(t, "relu")

    def residual(x, i):
        suffix = "" if i == 0 else "_%d" % i
        return f.bn(f.conv(x, "conv2d" + suffix, stride=2, padding="same"), "batch_normalization" + suffix)

    def sep_bn(x, name):
        return f.bn(f.separable(x, name), name + "_bn")

    x = relu(f.bn(f.conv(x, "block1_conv1", stride=2), "block1_conv1_bn"))
    x = relu(f.bn(f.conv(x, "block1_conv2"), "block1_conv2_bn"))
    r = residual(x, 0)
    x = sep_bn(x, "block2_sepconv1")              # no ReLU before block2's first (Keras)
    x = sep_bn(relu(x), "block2_sepconv2")
    x = f.max_pool_same(x, 3, 2) + r              # block2_pool + add
    for block, i in (("block3", 1), ("block4", 2)):
        r = residual(x, i)
        x = sep_bn(relu(x), block + "_sepconv1")
        x = sep_bn(relu(x), block + "_sepconv2")
        x = f.max_pool_same(x, 3, 2) + r
    for i in range(5, 13):                         # the middle flow: 8 identity blocks
        r = x
        for j in (1, 2, 3):
            x = sep_bn(relu(x), "block%d_sepconv%d" % (i, j))
        x = x + r
    r = residual(x, 3)
    x = sep_bn(relu(x), "block13_sepconv1")
    x = sep_bn(relu(x), "block13_sepconv2")
    x = f.max_pool_same(x, 3, 2) + r
    x = relu(sep_bn(x, "block14_sepconv1"))
    x = relu(sep_bn(x, "block14_sepconv2"))
    x = x.mean(dim=(2, 3))                                      # avg_pool
    return f.dense(x, ["predictions"])


def densenet121(f, x):
    """keras_applications/densenet.py, blocks [6, 12, 24, 16], growth 32, reduction 0.5,
    epsilon 1.001e-5 (tf.keras names the classifier predictions, keras_applications fc1000)."""
    def relu(t):
        return f.act(t, "relu")
    x = f.pad(x, 3, 3, 3, 3)                                    # zero_padding2d
    x = relu(f.bn(f.conv(x, "conv1/conv", stride=2), "conv1/bn"))
    x = f.pad(x, 1, 1, 1, 1)                                    # zero_padding2d_1 (after ReLU:
    x = F.max_pool2d(x, 3, stride=2)                            # zeros never win) + pool1
    for stage, blocks in enumerate([6, 12, 24, 16]):
        for i in range(blocks):                                 # conv_block
            name = "conv%d_block%d" % (stage + 2, i + 1)
            y = f.conv(relu(f.bn(x, name + "_0_bn")), name + "_1_conv")
            y = f.conv(relu(f.bn(y, name + "_1_bn")), name + "_2_conv", padding="same")
            x = torch.cat([y, x] if f.mutate == "concat_order" else [x, y], dim=1)  # _concat: [x, x1]
        if stage < 3:                                           # transition_block
            name = "pool%d" % (stage + 2)
            x = f.conv(relu(f.bn(x, name + "_bn")), name + "_conv")
            if f.mutate == "avg_pool_same":                     # 'same' would keep an odd side's last row
                x = F.avg_pool2d(x, 2, stride=2, ceil_mode=True)
            else:
                x = F.avg_pool2d(x, 2, stride=2)                # AveragePooling2D(2, 2): 'valid'
    x = relu(f.bn(x, "bn"))
    x = x.mean(dim=(2, 3))                                      # avg_pool
    return f.dense(x, ["predictions", "fc1000"])


def _make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def mobilenet_v2(f, x):
    """keras_applications/mobilenet_v2.py, alpha 1.0."""
    x = f.correct_pad(x, 3)                                     # Conv1_pad
    x = f.conv(x, "Conv1", stride=2)
    x = f.act(f.bn(x, "bn_Conv1"), "relu6")

    def inverted_res_block(inputs, expansion, stride, filters, block_id):
        in_channels = inputs.shape[1]
        pointwise_filters = _make_divisible(int(filters * 1.0), 8)
        y = inputs
        prefix = "block_%d_" % block_id
        if block_id:
            y = f.act(f.bn(f.conv(y, prefix + "expand"), prefix + "expand_BN"), "relu6")
        else:
            prefix = "expanded_conv_"
        if stride == 2:
            y = f.correct_pad(y, 3)
            y = f.depthwise(y, prefix + "depthwise", stride=2)
        else:
            y = f.depthwise(y, prefix + "depthwise", padding="same")
        y = f.act(f.bn(y, prefix + "depthwise_BN"), "relu6")
        y = f.bn(f.conv(y, prefix + "project"), prefix + "project_BN")
        if in_channels == pointwise_filters and stride == 1:
            return inputs + y
        return y

    table = [(16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (32, 1, 6), (64, 2, 6), (64, 1, 6),
             (64, 1, 6), (64, 1, 6), (96, 1, 6), (96, 1, 6), (96, 1, 6), (160, 2, 6), (160, 1, 6),
             (160, 1, 6), (320, 1, 6)]
    for block_id, (filters, stride, expansion) in enumerate(table):
        x = inverted_res_block(x, expansion, stride, filters, block_id)
    x = f.act(f.bn(f.conv(x, "Conv_1"), "Conv_1_bn"), "relu6")  # out_relu
    x = x.mean(dim=(2, 3))
    return f.dense(x, ["predictions", "Logits"])


EFFICIENTNET_B0_BLOCKS = [  # kernel, repeats, filters_in, filters_out, expand_ratio, strides (se 0.25)
    (3, 1, 32, 16, 1, 1), (3, 2, 16, 24, 6, 2), (5, 2, 24, 40, 6, 2), (3, 3, 40, 80, 6, 2),
    (5, 3, 80, 112, 6, 1), (5, 4, 112, 192, 6, 2), (3, 1, 192, 320, 6, 1)]


def efficientnet_b0(f, x):
    """tf.keras.applications.efficientnet: width and depth 1.0, swish, se_ratio 0.25."""
    if f.mutate != "no_rescaling":
        x = x / 255.0                                           # rescaling
    mean = [n for n in f.w.vars if n.endswith("/mean") and "normalization" in n]
    if len(mean) != 1:
        sys.exit("EfficientNetB0: one Normalization layer's mean expected, found %s" % mean)
    norm = mean[0][:-len("/mean")]
    m, v = f.w[norm + "/mean"].reshape(1, -1, 1, 1), f.w[norm + "/variance"].reshape(1, -1, 1, 1)
    x = (x - m) / torch.clamp(torch.sqrt(v), min=1e-7)          # normalization
    x = f.correct_pad(x, 3)                                     # stem_conv_pad
    x = f.act(f.bn(f.conv(x, "stem_conv", stride=2), "stem_bn"), "swish")

    def block(inputs, name, filters_in, filters_out, kernel, stride, expand_ratio):
        filters = filters_in * expand_ratio
        if expand_ratio != 1:
            y = f.act(f.bn(f.conv(inputs, name + "expand_conv"), name + "expand_bn"), "swish")
        else:
            y = inputs
        if stride == 2:
            y = f.depthwise(f.correct_pad(y, kernel), name + "dwconv", stride=2)
        else:
            y = f.depthwise(y, name + "dwconv", padding="same")
        y = f.act(f.bn(y, name + "bn"), "swish")
        if f.mutate != "no_squeeze_excite":
            se = y.mean(dim=(2, 3), keepdim=True)               # se_squeeze + se_reshape
            se = f.conv(se, name + "se_reduce", activation="swish", use_bias=True)
            se = f.conv(se, name + "se_expand", activation="sigmoid", use_bias=True)
            assert se.shape[1] == filters
            y = y * se                                          # se_excite (Multiply)
        y = f.bn(f.conv(y, name + "project_conv"), name + "project_bn")
        if stride == 1 and filters_in == filters_out:
            y = y + inputs                                      # (drop: identity in inference)
        return y

    for i, (kernel, repeats, fin, fout, expand, stride) in enumerate(EFFICIENTNET_B0_BLOCKS):
        for j in range(repeats):
            x = block(x, "block%d%s_" % (i + 1, chr(97 + j)), fin if j == 0 else fout, fout, kernel,
                      stride if j == 0 else 1, expand)
    x = f.act(f.bn(f.conv(x, "top_conv"), "top_bn"), "swish")
    x = x.mean(dim=(2, 3))                                      # avg_pool (+ top_dropout: identity)
    return f.dense(x, ["predictions"])


MODELS = {
    # name: (forward, batch-norm epsilon, the mutations the weights must be able to catch)
    # (ResNet50 pads symmetrically everywhere: no padding mutation applies.)
    "resnet50": (resnet50, 1.001e-5, ["bn_epsilon", "stride_on_3x3"]),
    "mobilenet_v2": (mobilenet_v2, 1e-3, ["pad_at_start", "bn_epsilon", "relu6_as_relu"]),
    "efficientnet_b0": (efficientnet_b0, 1e-3,
                        ["pad_at_start", "bn_epsilon", "swish_as_relu", "no_squeeze_excite", "no_rescaling"]),
    "xception": (xception, 1e-3, ["pad_at_start", "bn_epsilon", "pool_pad_zero"]),
    "densenet121": (densenet121, 1.001e-5, ["bn_epsilon", "concat_order", "avg_pool_same"]),
}
