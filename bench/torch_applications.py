#!/usr/bin/python3
"""The Keras applications' peers in PyTorch 1.13 + torchvision 0.14: training step or inference.

The peer of `strata bench-step --model M` (training: forward, cross-entropy, backward, SGD
Nesterov momentum 0.9, as bench-step's step) and of bench/applications_predict_bench (inference:
eval mode, no autograd). torchvision's model of the same name (vgg16/19, resnet50/101/152,
inception_v3 without its auxiliary classifier, mobilenet_v2, mobilenet_v3_small/large,
densenet121/169/201, efficientnet_b0-b7, efficientnet_v2_s/m/l, convnext_*, vit_b_16 for vit_b16;
efficientnet_v2_b0-b3 from its EfficientNet class on Keras's table, vit_s16 from its
VisionTransformer class) with 1000 classes, as Strata builds the Keras models for bench-step; Xception, which torchvision
lacks, is Keras's Xception written here in torch (the same layers and widths: separable
convolutions = depthwise 3x3 + pointwise 1x1, no bias, batch norm, ReLU; 'same' max pooling as
padding 1). torchvision's ResNet50 is v1.5 (stride on the 3x3; Keras's on the 1x1): the same
parameter count, about 4 % more FLOPs than Keras's, which favours Strata's ratio very slightly.
Synthetic inputs of the model's shape, like bench-step. Prints one JSON object.

    /usr/bin/python3 bench/torch_applications.py --model resnet50 --mode train --batch 64 --threads 2
"""
import argparse
import json
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SeparableConv2d(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False), nn.Conv2d(cin, cout, 1, bias=False))


def bn(c):
    return nn.BatchNorm2d(c, eps=1e-3, momentum=0.01)  # Keras's defaults


class Xception(nn.Module):
    """keras_applications/xception.py: entry flow, 8 middle blocks of 728, exit flow."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, bias=False), bn(32), nn.ReLU(),
                                  nn.Conv2d(32, 64, 3, bias=False), bn(64), nn.ReLU())

        def down(cin, c1, c2, relu_first):
            main = ([nn.ReLU()] if relu_first else []) + [SeparableConv2d(cin, c1), bn(c1), nn.ReLU(),
                                                          SeparableConv2d(c1, c2), bn(c2),
                                                          nn.MaxPool2d(3, stride=2, padding=1)]
            return nn.ModuleDict({"main": nn.Sequential(*main),
                                  "residual": nn.Sequential(nn.Conv2d(cin, c2, 1, stride=2, bias=False), bn(c2))})

        self.entry = nn.ModuleList([down(64, 128, 128, False), down(128, 256, 256, True), down(256, 728, 728, True)])
        self.middle = nn.ModuleList([
            nn.Sequential(*[m for _ in range(3) for m in (nn.ReLU(), SeparableConv2d(728, 728), bn(728))])
            for _ in range(8)])
        self.exit_down = down(728, 728, 1024, True)
        self.exit = nn.Sequential(SeparableConv2d(1024, 1536), bn(1536), nn.ReLU(),
                                  SeparableConv2d(1536, 2048), bn(2048), nn.ReLU())
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.stem(x)
        for d in self.entry:
            x = d["main"](x) + d["residual"](x)
        for m in self.middle:
            x = m(x) + x
        x = self.exit_down["main"](x) + self.exit_down["residual"](x)
        x = self.exit(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build(name):
    if name == "xception":
        return Xception()
    import torchvision
    if name == "inception_v3":  # Keras's has no auxiliary classifier; init_weights: no scipy draws
        return torchvision.models.inception_v3(aux_logits=False, init_weights=False)
    if name.startswith("efficientnet_v2_b"):
        return efficientnet_v2_b(name[-2:])
    if name == "vit_b16":
        return torchvision.models.vit_b_16()
    if name == "vit_s16":  # timm's / KerasHub's ViT-S/16 from torchvision's class
        from torchvision.models.vision_transformer import VisionTransformer
        return VisionTransformer(224, 16, 12, 6, 384, 1536)
    return getattr(torchvision.models, name)()  # weights=None: random initialisation, 1000 classes


def efficientnet_v2_b(variant):
    """Keras's EfficientNetV2B0-B3, which torchvision lacks, from torchvision's EfficientNet class
    and its FusedMBConvConfig / MBConvConfig on Keras's block table (widths by Keras's
    round_filters, depths by its round_repeats), batch-norm epsilon 1e-3."""
    import functools
    import math
    from torchvision.models.efficientnet import EfficientNet, FusedMBConvConfig, MBConvConfig
    width, depth = {"b0": (1.0, 1.0), "b1": (1.0, 1.1), "b2": (1.1, 1.2), "b3": (1.2, 1.4)}[variant]

    def filters(f):
        return max(8, int(f * width + 4) // 8 * 8)

    setting = []
    for fused, n, fin, fout, expand, stride in [(True, 1, 32, 16, 1, 1), (True, 2, 16, 32, 4, 2), (True, 2, 32, 48, 4, 2),
                                                (False, 3, 48, 96, 4, 2), (False, 5, 96, 112, 6, 1),
                                                (False, 8, 112, 192, 6, 2)]:
        n = int(math.ceil(depth * n))
        setting.append(FusedMBConvConfig(expand, 3, stride, filters(fin), filters(fout), n) if fused else
                       MBConvConfig(expand, 3, stride, filters(fin), filters(fout), n, 1.0, 1.0))
    return EfficientNet(setting, 0.2, 0.2, 1000, functools.partial(nn.BatchNorm2d, eps=1e-3), filters(1280))


def main():
    ap = argparse.ArgumentParser()
    # Strata's --model names that torchvision 0.14 also has (its names are the same), and Xception.
    ap.add_argument("--model", required=True,
                    choices=["vgg16", "vgg19", "resnet50", "resnet101", "resnet152", "inception_v3", "mobilenet_v2",
                             "densenet121", "densenet169", "densenet201", "xception", "convnext_tiny",
                             "convnext_small", "convnext_base", "convnext_large", "mobilenet_v3_small",
                             "mobilenet_v3_large", "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l", "vit_b16",
                             "vit_s16"] +
                            [f"efficientnet_b{i}" for i in range(8)] + [f"efficientnet_v2_b{i}" for i in range(4)])
    ap.add_argument("--mode", choices=["train", "infer"], default="train")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=64, help="the global batch (Strata: per replica x replicas)")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net = build(a.model)
    if a.channels_last:
        net = net.to(memory_format=torch.channels_last)
    x = torch.rand(a.batch, 3, a.image_size, a.image_size)
    if a.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,))
    loss_fn = nn.CrossEntropyLoss()
    if a.mode == "train":
        net.train()
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, nesterov=True)

        def step():
            opt.zero_grad(set_to_none=True)
            if a.precision == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = net(x)
                loss = loss_fn(out.float(), y)
            else:
                loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
    else:
        net.eval()

        def step():
            with torch.inference_mode():
                if a.precision == "bf16":
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        return net(x)
                return net(x)

    for _ in range(a.warmup):
        step()
    times = []
    cpu0 = time.process_time()
    start = time.perf_counter()
    while not times or time.perf_counter() - start < a.seconds:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    times.sort()
    print(json.dumps({
        "framework": "pytorch " + torch.__version__,
        "model": a.model,
        "mode": a.mode,
        "precision": a.precision,
        "channels_last": a.channels_last,
        "image_size": a.image_size,
        "batch": a.batch,
        "threads": a.threads,
        "steps": len(times),
        "seconds": elapsed,
        "images_per_second": len(times) * a.batch / elapsed,
        "step_ms": times[len(times) // 2] * 1e3,
        "cpu_seconds": cpu,
        "images_per_cpu_second": len(times) * a.batch / cpu * a.threads,  # as bench-step: x cores
        "parameters": sum(p.numel() for p in net.parameters()),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))


if __name__ == "__main__":
    main()
