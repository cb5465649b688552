#!/usr/bin/env python3
"""Writes models/flowers-squeezenet.json and models/flowers-xception.json: Keras-style
Functional specs (the structure of model.to_json()) for the 104 flower classes at 192 px,
sized for CPU training. Run from the repository root; the JSON files are what is built in."""
import json


class Spec:
    def __init__(self, name):
        self.name, self.layers, self.count = name, [], {}

    def add(self, cls, inputs, **config):
        base = config.pop("name", None) or cls.lower()
        self.count[base] = self.count.get(base, 0) + 1
        name = base if self.count[base] == 1 else f"{base}_{self.count[base] - 1}"
        config["name"] = name
        layer = {"class_name": cls, "name": name, "config": config}
        if cls != "InputLayer":
            layer["inbound_nodes"] = [[[i, 0, 0, {}] for i in inputs]]
        self.layers.append(layer)
        return name

    def dump(self, path, inputs, outputs):
        spec = {"class_name": "Functional", "config": {"name": self.name, "layers": self.layers,
                "input_layers": [[i, 0, 0] for i in inputs], "output_layers": [[o, 0, 0] for o in outputs]}}
        with open(path, "w") as f:
            f.write("{\"class_name\": \"Functional\", \"config\": {\"name\": %s, \"layers\": [\n" % json.dumps(self.name))
            f.write(",\n".join("  " + json.dumps(l) for l in self.layers))
            f.write("\n], \"input_layers\": %s, \"output_layers\": %s}}\n" % (
                json.dumps(spec["config"]["input_layers"]), json.dumps(spec["config"]["output_layers"])))


def squeezenet():
    # SqueezeNet 1.1 (Iandola et al. 2016) at half width, with batch norm after each fire
    # module (it trains from scratch without the original's careful initialisation).
    s = Spec("flowers_squeezenet")
    x = s.add("InputLayer", [], batch_input_shape=[None, 192, 192, 3], name="image")
    x = s.add("Conv2D", [x], filters=32, kernel_size=3, strides=2, padding="same", use_bias=False, name="conv1")
    x = s.add("BatchNormalization", [x], name="conv1_bn")
    x = s.add("ReLU", [x], name="conv1_relu")
    x = s.add("MaxPooling2D", [x], pool_size=3, strides=2, padding="same", name="pool1")

    def fire(x, squeeze, expand, n):
        sq = s.add("Conv2D", [x], filters=squeeze, kernel_size=1, activation="relu", name=f"fire{n}_squeeze")
        e1 = s.add("Conv2D", [sq], filters=expand, kernel_size=1, activation="relu", name=f"fire{n}_expand1x1")
        e3 = s.add("Conv2D", [sq], filters=expand, kernel_size=3, padding="same", activation="relu", name=f"fire{n}_expand3x3")
        x = s.add("Concatenate", [e1, e3], axis=-1, name=f"fire{n}_concat")
        return s.add("BatchNormalization", [x], name=f"fire{n}_bn")

    x = fire(x, 8, 32, 2)
    x = fire(x, 8, 32, 3)
    x = s.add("MaxPooling2D", [x], pool_size=3, strides=2, padding="same", name="pool3")
    x = fire(x, 16, 64, 4)
    x = fire(x, 16, 64, 5)
    x = s.add("MaxPooling2D", [x], pool_size=3, strides=2, padding="same", name="pool5")
    x = fire(x, 24, 96, 6)
    x = fire(x, 24, 96, 7)
    x = fire(x, 32, 128, 8)
    x = fire(x, 32, 128, 9)
    x = s.add("Dropout", [x], rate=0.5, name="drop9")
    x = s.add("Conv2D", [x], filters=104, kernel_size=1, name="conv10")
    x = s.add("GlobalAveragePooling2D", [x], name="avgpool10")
    x = s.add("Activation", [x], activation="softmax", name="probabilities")
    s.dump("models/flowers-squeezenet.json", ["image"], [x])


def xception():
    # A small Xception (Chollet 2017): entry convolutions, residual blocks of two
    # depthwise-separable convolutions with a strided 1x1 shortcut, one middle block, exit.
    s = Spec("flowers_xception")
    x = s.add("InputLayer", [], batch_input_shape=[None, 192, 192, 3], name="image")
    x = s.add("Conv2D", [x], filters=32, kernel_size=3, strides=2, padding="same", use_bias=False, name="block1_conv1")
    x = s.add("BatchNormalization", [x], name="block1_conv1_bn")
    x = s.add("ReLU", [x], name="block1_conv1_act")
    x = s.add("Conv2D", [x], filters=64, kernel_size=3, strides=2, padding="same", use_bias=False, name="block1_conv2")
    x = s.add("BatchNormalization", [x], name="block1_conv2_bn")
    x = s.add("ReLU", [x], name="block1_conv2_act")
    for n, f in ((2, 128), (3, 256), (4, 512)):
        r = s.add("Conv2D", [x], filters=f, kernel_size=1, strides=2, padding="same", use_bias=False, name=f"block{n}_shortcut")
        r = s.add("BatchNormalization", [r], name=f"block{n}_shortcut_bn")
        y = s.add("SeparableConv2D", [x], filters=f, kernel_size=3, padding="same", use_bias=False, name=f"block{n}_sepconv1")
        y = s.add("BatchNormalization", [y], name=f"block{n}_sepconv1_bn")
        y = s.add("ReLU", [y], name=f"block{n}_sepconv2_act")
        y = s.add("SeparableConv2D", [y], filters=f, kernel_size=3, padding="same", use_bias=False, name=f"block{n}_sepconv2")
        y = s.add("BatchNormalization", [y], name=f"block{n}_sepconv2_bn")
        y = s.add("MaxPooling2D", [y], pool_size=3, strides=2, padding="same", name=f"block{n}_pool")
        x = s.add("Add", [y, r], name=f"block{n}_add")
        x = s.add("ReLU", [x], name=f"block{n}_act")
    y = x
    for i in (1, 2):
        y = s.add("SeparableConv2D", [y], filters=512, kernel_size=3, padding="same", use_bias=False, name=f"block5_sepconv{i}")
        y = s.add("BatchNormalization", [y], name=f"block5_sepconv{i}_bn")
        if i == 1:
            y = s.add("ReLU", [y], name="block5_sepconv2_act")
    x = s.add("Add", [y, x], name="block5_add")
    x = s.add("ReLU", [x], name="block5_act")
    x = s.add("SeparableConv2D", [x], filters=768, kernel_size=3, padding="same", use_bias=False, name="exit_sepconv")
    x = s.add("BatchNormalization", [x], name="exit_sepconv_bn")
    x = s.add("ReLU", [x], name="exit_act")
    x = s.add("GlobalAveragePooling2D", [x], name="avg_pool")
    x = s.add("Dropout", [x], rate=0.2, name="dropout")
    x = s.add("Dense", [x], units=104, activation="softmax", name="predictions")
    s.dump("models/flowers-xception.json", ["image"], [x])


if __name__ == "__main__":
    squeezenet()
    xception()
