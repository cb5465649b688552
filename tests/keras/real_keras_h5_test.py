#!/usr/bin/env python3
"""Keras weight files that Keras itself wrote, loaded by Strata (issue 36).

tests/keras/h5_weights_test.py writes its "Keras" files with h5py from our own reading of the
layouts. The files here were written by Keras (2.3.0, 2.3.1 and 3.1.1) and published in public
repositories; testdata/real/keras/PROVENANCE.md says where each comes from (repository, path,
commit, git blob, SHA-256). For each file this test
  - checks with h5py that Keras wrote it (keras_version / backend attributes, or the .keras
    archive's metadata.json) and reads every weight as Keras stored it;
  - builds the model from the architecture Keras wrote with it (the file's model_config, the
    .keras archive's config.json, or the repository's model.to_json() file), unchanged;
  - loads the file with h5_weights_tool, saves the model back with --save, and checks with h5py
    that the saved file holds every weight under the same layer name, in Keras's order, with the
    same shape and exactly the same values as the original, so Strata read what Keras wrote;
  - runs Strata's forward pass and compares it with the outputs the repository publishes for
    its inputs (KERAS_mnist_mlp_outputs.dat; the prediction printed in the MNIST-models
    notebook), and with a NumPy forward pass written here from the h5py weights and the Keras
    config (independent of Strata);
  - loads Strata's saved file back and gets the same outputs.
Usage: real_keras_h5_test.py path/to/h5_weights_tool
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import zipfile

import h5py
import numpy as np
from PIL import Image

TOOL = None
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "real", "keras")
# Strata's float32 forward against Keras's (or NumPy's float64) outputs, compared as log
# probabilities so that a 1e-20 output is checked as closely as a 0.9 one.
LOG_TOL = 5e-4
PUBLISHED_PRINT_LOG_TOL = 1e-4  # the notebook prints 8 significant digits

# keras_model.ipynb (Moonflower2022/MNIST-models, commit fdb760a8), cell 14: Keras 3.1.1's
# model.predict for 1.png, as printed (PROVENANCE.md). mnist_model.keras holds that model.
NOTEBOOK_PREDICTION_1_PNG = [5.9889885e-07, 9.9855095e-01, 1.6816367e-07, 5.4757635e-12, 1.4087553e-03,
                             1.4997115e-06, 3.3696386e-05, 2.1049821e-06, 2.1774003e-06, 1.1679341e-08]


def data(name):
    return os.path.join(DATA, name)


def text(v):
    return v.decode("utf8") if isinstance(v, bytes) else str(v)


def run_tool(*args):
    p = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError(f"h5_weights_tool {' '.join(args)} failed: {p.stderr}")
    return p.stdout


def short_name(weight_name):
    """'fc1_relu/kernel:0' (Keras 2) or 'kernel' (Keras 3.1's legacy writer) -> 'kernel'."""
    return weight_name.split("/")[-1].split(":")[0]


# ---- what Keras wrote, read with h5py -----------------------------------------------------------
def read_legacy(path):
    """A legacy file (save_weights, or model.save's model_weights group): the root's attributes
    and [(layer, [(weight short name, array)])] in layer_names order, every layer listed."""
    with h5py.File(path, "r") as f:
        root = f["model_weights"] if "model_weights" in f else f
        attrs = {k: f.attrs[k] for k in f.attrs}
        layers = []
        for layer in (text(n) for n in root.attrs["layer_names"]):
            g = root[layer]
            layers.append((layer, [(short_name(text(w)), g[text(w)][()]) for w in g.attrs["weight_names"]]))
        return attrs, layers


def snake_case(cls):  # keras.src.utils.naming.to_snake_case
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", cls)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


KERAS3_WEIGHT_NAMES = {"Conv2D": ["kernel", "bias"], "Dense": ["kernel", "bias"]}


def read_keras3(weights_h5, config):
    """A Keras 3 .weights.h5: layers/<snake_case class>[_n]/vars/<i>, keyed in model.layers order
    (config.json); -> [(layer name, [(weight name, array)])] for every layer of the config."""
    layers, seen = [], {}
    with h5py.File(weights_h5, "r") as f:
        keys = set(f["layers"].keys())
        expected_keys = set()
        for l in config["config"]["layers"]:
            if l["class_name"] == "InputLayer":
                continue
            base = snake_case(l["class_name"])
            n = seen.get(base, 0)
            seen[base] = n + 1
            key = base if n == 0 else f"{base}_{n}"
            expected_keys.add(key)
            vars_ = f["layers"][key]["vars"]
            arrays = [vars_[str(i)][()] for i in range(len(vars_))]
            names = KERAS3_WEIGHT_NAMES.get(l["class_name"], [])[:len(arrays)]
            assert len(names) == len(arrays), (key, len(arrays))
            layers.append((l["config"]["name"], list(zip(names, arrays))))
        assert keys == expected_keys, (sorted(keys), sorted(expected_keys))
    return layers


# ---- an independent NumPy forward pass of a chain of Keras layers -------------------------------
def chain(config):
    """The layers of a Sequential, or of a Functional model that is a single chain, in order."""
    layers = [l for l in config["config"]["layers"] if l["class_name"] != "InputLayer"]
    if config["class_name"] in ("Model", "Functional"):
        prev = config["config"]["input_layers"][0][0]
        for l in layers:
            assert l["inbound_nodes"][0][0][0] == prev, "not a chain"
            prev = l["name"]
    return layers


def activation(name, x):
    if name in ("linear", None):
        return x
    if name == "relu":
        return np.maximum(x, 0)
    if name == "softmax":
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    raise NotImplementedError(name)


def conv2d_valid(x, k, b):
    kh, kw = k.shape[:2]
    h, w = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    return sum(np.einsum("nhwc,co->nhwo", x[:, i:i + h, j:j + w, :], k[i, j])
               for i in range(kh) for j in range(kw)) + b


def numpy_forward(config, weights, x):
    """weights: {layer: [arrays in Keras's order]}; float64 throughout."""
    y = x.astype(np.float64)
    for l in chain(config):
        cls, cfg = l["class_name"], l["config"]
        w = [a.astype(np.float64) for a in weights.get(cfg["name"], [])]
        if cls == "Dense":
            y = activation(cfg["activation"], y @ w[0] + w[1])
        elif cls == "Conv2D":
            assert cfg["padding"] == "valid" and list(cfg["strides"]) == [1, 1], cfg
            y = activation(cfg["activation"], conv2d_valid(y, w[0], w[1]))
        elif cls == "MaxPooling2D":
            assert list(cfg["pool_size"]) == [2, 2] and list(cfg["strides"]) == [2, 2] and cfg["padding"] == "valid"
            n, h, wd, c = y.shape
            y = y[:, :h // 2 * 2, :wd // 2 * 2, :].reshape(n, h // 2, 2, wd // 2, 2, c).max(axis=(2, 4))
        elif cls == "BatchNormalization":
            gamma, beta, mean, var = w
            y = (y - mean) / np.sqrt(var + cfg["epsilon"]) * gamma + beta
        elif cls == "Activation":
            y = activation(cfg["activation"], y)
        elif cls == "Flatten":
            y = y.reshape(y.shape[0], -1)  # channels_last: Keras flattens NHWC row-major
        elif cls == "Dropout":
            pass  # inference
        else:
            raise NotImplementedError(cls)
    return y


def assert_same_probabilities(test, got, expected, tol, what):
    got = np.asarray(got, np.float64)
    expected = np.asarray(expected, np.float64)
    test.assertEqual(got.shape, expected.shape, what)
    test.assertTrue(np.all(got > 0), f"{what}: Strata gave a zero probability: {got}")
    np.testing.assert_allclose(np.log(got), np.log(expected), atol=tol, rtol=0, err_msg=what)


class RealKerasFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, f"{self.id().split('.')[-1]}_{name}")

    def strata(self, spec, weights_file, x, expected_loaded):
        """Loads, predicts, saves, reloads the saved file and predicts again."""
        spec_path = self.path("spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        x_path, y_path, saved = self.path("x.f32"), self.path("y.f32"), self.path("saved.h5")
        x.astype(np.float32).tofile(x_path)
        out = run_tool("--spec", spec_path, "--load", weights_file, "--input", x_path, "--output", y_path,
                       "--save", saved)
        report = dict(line.partition(" ")[::2] for line in out.splitlines())
        self.assertEqual(report["loaded"].split(), expected_loaded)
        y = np.fromfile(y_path, dtype=np.float32).reshape(x.shape[0], -1)
        run_tool("--spec", spec_path, "--load", saved, "--input", x_path, "--output", y_path)
        np.testing.assert_array_equal(np.fromfile(y_path, dtype=np.float32).reshape(y.shape), y,
                                      "Strata's saved file gives other outputs")
        return report, y, saved

    def check_saved_equals_original(self, saved, original, input_layers):
        """Strata's saved file against the original as h5py read it: same layers in Keras's order
        (less the InputLayer), same weights per layer in order, names, shapes and exact values."""
        _, got = read_legacy(saved)
        expected = [(n, ws) for n, ws in original if n not in input_layers]
        self.assertEqual([n for n, _ in got], [n for n, _ in expected])
        for (layer, got_ws), (_, exp_ws) in zip(got, expected):
            self.assertEqual([n for n, _ in got_ws], [n for n, _ in exp_ws], layer)
            for (name, a), (_, b) in zip(got_ws, exp_ws):
                what = f"{layer}/{name}"
                self.assertEqual(a.shape, b.shape, what)
                self.assertEqual(a.dtype, np.float32, what)
                self.assertEqual(b.dtype, np.float32, what)
                np.testing.assert_array_equal(a, b, what)

    def test_keras2_save_weights_mnist_mlp_matches_published_outputs(self):
        # hls4ml: Keras 2.3.0 model.save_weights, the repository's model.to_json() and the
        # outputs Keras computed for three MNIST digits.
        weights = data("hls4ml_KERAS_mnist_mlp_weights.h5")
        attrs, original = read_legacy(weights)
        self.assertEqual(text(attrs["keras_version"]), "2.3.0")
        self.assertEqual(text(attrs["backend"]), "tensorflow")
        self.assertNotIn("model_config", attrs)  # save_weights: weights only
        self.assertEqual([(n, [(w, a.shape) for w, a in ws]) for n, ws in original], [
            ("dense_1", [("kernel", (784, 256)), ("bias", (256,))]), ("dropout_1", []),
            ("dense_2", [("kernel", (256, 256)), ("bias", (256,))]), ("dropout_2", []),
            ("dense_3", [("kernel", (256, 10)), ("bias", (10,))])])
        with open(data("hls4ml_KERAS_mnist_mlp.json")) as f:
            spec = json.load(f)
        self.assertEqual(spec["keras_version"], "2.3.0")
        x = np.loadtxt(data("hls4ml_KERAS_mnist_mlp_inputs.dat"), dtype=np.float64)
        published = np.loadtxt(data("hls4ml_KERAS_mnist_mlp_outputs.dat"), dtype=np.float64)
        self.assertEqual((x.shape, published.shape), ((3, 784), (3, 10)))
        # The published outputs are the model's: the NumPy forward reproduces them.
        ref = numpy_forward(spec, {n: [a for _, a in ws] for n, ws in original}, x)
        assert_same_probabilities(self, ref, published, 1e-4, "NumPy forward vs published outputs")
        report, y, saved = self.strata(spec, weights, x, ["dense_1", "dense_2", "dense_3"])
        self.assertEqual(report["layout"], "legacy")
        self.assertEqual(list(y.argmax(axis=1)), [7, 0, 1])
        assert_same_probabilities(self, y, published, LOG_TOL, "Strata vs the published Keras outputs")
        assert_same_probabilities(self, y, ref, LOG_TOL, "Strata vs NumPy")
        self.check_saved_equals_original(saved, original, set())

    def test_keras2_full_model_with_batch_norm(self):
        # fastmachinelearning/example-models: Keras 2.3.1 model.save (model_config, model_weights).
        path = data("example-models_keras_3layer_batch_norm.h5")
        attrs, original = read_legacy(path)
        self.assertEqual(text(attrs["keras_version"]), "2.3.1")
        self.assertEqual(text(attrs["backend"]), "tensorflow")
        spec = json.loads(text(attrs["model_config"]))
        self.assertEqual(spec["class_name"], "Model")
        bn = [(n, [(w, a.shape) for w, a in ws]) for n, ws in original if n.startswith("bn")]
        self.assertEqual(bn[0], ("bn1", [("gamma", (64,)), ("beta", (64,)), ("moving_mean", (64,)),
                                         ("moving_variance", (64,))]))
        self.assertEqual(len(bn), 4)
        # The file's own BatchNormalization epsilon (1e-6, not Keras's default 1e-3) matters here.
        self.assertEqual({l["config"]["epsilon"] for l in spec["config"]["layers"]
                          if l["class_name"] == "BatchNormalization"}, {1e-06})
        x = np.random.default_rng(36).standard_normal((8, 16))
        ref = numpy_forward(spec, {n: [a for _, a in ws] for n, ws in original}, x)
        report, y, saved = self.strata(spec, path, x, ["fc1_relu", "bn1", "fc2_relu", "bn2", "fc3_relu", "bn3",
                                                       "output_softmax", "bn4"])
        self.assertEqual(report["layout"], "legacy")
        assert_same_probabilities(self, y, ref, LOG_TOL, "Strata vs NumPy")
        self.check_saved_equals_original(saved, original, {"input_1"})

    def mnist_models_inputs(self):
        # As the repository's notebook prepares them: Pillow's grayscale, / 255.
        return np.stack([np.asarray(Image.open(data(f"MNIST-models_{n}.png")).convert("L"), np.float64) / 255
                         for n in (1, 8)]).reshape(2, 28, 28, 1)

    def test_keras3_dot_keras_archive_matches_published_prediction(self):
        # Moonflower2022/MNIST-models: a Keras 3.1.1 .keras archive (metadata.json, config.json,
        # model.weights.h5 in Keras 3's layout) and the prediction its notebook printed for 1.png.
        with zipfile.ZipFile(data("MNIST-models_mnist_model.keras")) as z:
            self.assertEqual(sorted(z.namelist()), ["config.json", "metadata.json", "model.weights.h5"])
            self.assertEqual(json.loads(z.read("metadata.json"))["keras_version"], "3.1.1")
            spec = json.loads(z.read("config.json"))
            weights = self.path("model.weights.h5")
            with open(weights, "wb") as f:
                f.write(z.read("model.weights.h5"))
        with h5py.File(weights, "r") as f:
            self.assertNotIn("layer_names", f.attrs)  # not the legacy layout
            self.assertEqual(sorted(f.keys()), ["layers", "optimizer", "vars"])
        original = read_keras3(weights, spec)
        self.assertEqual([(n, [(w, a.shape) for w, a in ws]) for n, ws in original if ws], [
            ("conv2d", [("kernel", (3, 3, 1, 32)), ("bias", (32,))]),
            ("conv2d_1", [("kernel", (3, 3, 32, 64)), ("bias", (64,))]),
            ("dense", [("kernel", (1600, 10)), ("bias", (10,))])])
        x = self.mnist_models_inputs()
        ref = numpy_forward(spec, {n: [a for _, a in ws] for n, ws in original}, x)
        assert_same_probabilities(self, ref[:1], [NOTEBOOK_PREDICTION_1_PNG], PUBLISHED_PRINT_LOG_TOL,
                                  "NumPy forward vs the notebook's printed prediction")
        report, y, saved = self.strata(spec, weights, x, ["conv2d", "conv2d_1", "dense"])
        self.assertEqual(report["layout"], "keras3")
        self.assertEqual(list(y.argmax(axis=1)), [1, 8])
        assert_same_probabilities(self, y[:1], [NOTEBOOK_PREDICTION_1_PNG], LOG_TOL,
                                  "Strata vs the notebook's printed Keras prediction")
        assert_same_probabilities(self, y, ref, LOG_TOL, "Strata vs NumPy")
        self.check_saved_equals_original(saved, original, set())

    def test_keras3_legacy_h5_full_model(self):
        # The same repository's Keras 3.1.1 model.save("mnist_model.h5") (another training run
        # than the .keras file): Keras 3's legacy writer, with variable-length string attributes,
        # bare weight names ("kernel") and a top_level_model_weights group beside the layers.
        path = data("MNIST-models_mnist_model.h5")
        attrs, original = read_legacy(path)
        self.assertEqual(text(attrs["keras_version"]), "3.1.1")
        self.assertEqual(text(attrs["backend"]), "tensorflow")
        self.assertIn("training_config", attrs)
        with h5py.File(path, "r") as f:
            mw = f["model_weights"]
            self.assertEqual(mw.attrs["layer_names"].dtype, object)  # h5py 3: variable-length strings
            self.assertEqual([text(n) for n in mw["conv2d"].attrs["weight_names"]], ["kernel", "bias"])
            self.assertIn("top_level_model_weights", mw)
            self.assertNotIn("top_level_model_weights", [text(n) for n in mw.attrs["layer_names"]])
            self.assertIn("optimizer_weights", f)
        spec = json.loads(text(attrs["model_config"]))
        x = self.mnist_models_inputs()
        ref = numpy_forward(spec, {n: [a for _, a in ws] for n, ws in original}, x)
        report, y, saved = self.strata(spec, path, x, ["conv2d", "conv2d_1", "dense"])
        self.assertEqual(report["layout"], "legacy")
        self.assertEqual(list(y.argmax(axis=1)), [1, 8])
        assert_same_probabilities(self, y, ref, LOG_TOL, "Strata vs NumPy")
        self.check_saved_equals_original(saved, original, set())


if __name__ == "__main__":
    TOOL = sys.argv.pop(1)
    unittest.main(verbosity=2)
