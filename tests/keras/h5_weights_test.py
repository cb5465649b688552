#!/usr/bin/env python3
"""Keras weight files in and out of Strata (issue 19), checked against h5py and NumPy.

The files are written here with h5py in Keras's own layouts, from the layouts as Keras
documents and writes them (Model.save_weights's docstring, legacy_h5_format.py's
save_weights_to_hdf5_group, saving_lib.py's H5IOStore), never from Strata's writer:
  - Keras 2 `model.save_weights("w.h5")`: root attrs layer_names / backend / keras_version,
    a group per layer with attr weight_names ("conv/kernel:0"), datasets at
    <layer>/<weight name> inside it;
  - a full-model `model.save("m.h5")`: the same under a `model_weights` group (Keras 3's
    legacy writer names weights by path, "conv/kernel");
  - Keras 3 `.weights.h5`: layers/<snake_case class>[_n]/vars/<i>, layers numbered per class in
    model.layers order.
The expected outputs come from a NumPy forward pass written here. Strata's saved file is read
back with h5py. Usage: h5_weights_test.py path/to/h5_weights_tool
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

TOOL = None
TOL = 1e-4
EPS = 1e-3  # Keras's BatchNormalization epsilon

# A sequential model with every weight kind: Conv2D (+bias), BatchNormalization,
# DepthwiseConv2D, SeparableConv2D, Dense.
SEQ_LAYERS = [
    ("conv", "Conv2D", {"filters": 4, "kernel_size": 3, "padding": "same"}),
    ("bn", "BatchNormalization", {}),
    ("relu", "ReLU", {}),
    ("dw", "DepthwiseConv2D", {"kernel_size": 3, "padding": "same"}),
    ("bn_1", "BatchNormalization", {}),
    ("sep", "SeparableConv2D", {"filters": 5, "kernel_size": 3, "padding": "same"}),
    ("gap", "GlobalAveragePooling2D", {}),
    ("head", "Dense", {"units": 3}),
]
H = W = 6
C = 3


def seq_spec(layers=SEQ_LAYERS):
    entries = [{"class_name": "InputLayer", "config": {"batch_input_shape": [None, H, W, C], "name": "input_1"}}]
    for name, cls, cfg in layers:
        entries.append({"class_name": cls, "config": dict(cfg, name=name)})
    return {"class_name": "Sequential", "config": {"name": "seq", "layers": entries}}


def seq_weights(rng, head_units=3):
    """Keras's weights of each layer, in Keras's order, with Keras's shapes."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.5
    pos = lambda *s: (rng.random(s).astype(np.float32) + 0.5)
    return {
        "conv": [("kernel", r(3, 3, C, 4)), ("bias", r(4))],
        "bn": [("gamma", pos(4)), ("beta", r(4)), ("moving_mean", r(4)), ("moving_variance", pos(4))],
        "dw": [("depthwise_kernel", r(3, 3, 4, 1)), ("bias", r(4))],
        "bn_1": [("gamma", pos(4)), ("beta", r(4)), ("moving_mean", r(4)), ("moving_variance", pos(4))],
        "sep": [("depthwise_kernel", r(3, 3, 4, 1)), ("pointwise_kernel", r(1, 1, 4, 5)), ("bias", r(5))],
        "head": [("kernel", r(5, head_units)), ("bias", r(head_units))],
    }


# ---- NumPy forward (NHWC, "same" padding, stride 1) ------------------------------------------
def conv(x, k, b=None):
    p = k.shape[0] // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    out = sum(np.einsum("nhwc,co->nhwo", xp[:, i:i + x.shape[1], j:j + x.shape[2], :], k[i, j])
              for i in range(k.shape[0]) for j in range(k.shape[1]))
    return out if b is None else out + b


def depthwise(x, k, b=None):  # k: Keras's [kh, kw, C, 1]
    p = k.shape[0] // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    out = sum(xp[:, i:i + x.shape[1], j:j + x.shape[2], :] * k[i, j, :, 0]
              for i in range(k.shape[0]) for j in range(k.shape[1]))
    return out if b is None else out + b


def bn(x, g, b, m, v):
    return (x - m) / np.sqrt(v + EPS) * g + b


def seq_forward(x, w):
    v = lambda layer: [a for _, a in w[layer]]
    y = conv(x, *v("conv"))
    y = np.maximum(bn(y, *v("bn")), 0)
    y = depthwise(y, *v("dw"))
    y = bn(y, *v("bn_1"))
    dk, pk, pb = v("sep")
    y = conv(depthwise(y, dk), pk, pb)
    y = y.mean(axis=(1, 2))
    k, b = v("head")
    return y @ k + b


# ---- Keras's layouts, written with h5py -------------------------------------------------------
def write_legacy(path, all_layers, weights, group=None, name_style="keras2", fixed_length=False):
    """model.save_weights('w.h5') (group=None) or model.save('m.h5') (group='model_weights').
    Keras assigns lists of byte strings: h5py 3 stores them as variable-length strings, the
    h5py 2 of the keras.applications files as a fixed-length array (np.asarray's S<n>)."""
    with h5py.File(path, "w") as f:
        root = f if group is None else f.create_group(group)
        names = [n.encode("utf8") for n in all_layers]
        root.attrs["layer_names"] = np.asarray(names) if fixed_length else names
        root.attrs["backend"] = b"tensorflow"
        root.attrs["keras_version"] = b"2.15.0"
        for layer in all_layers:
            g = root.create_group(layer)
            ws = weights.get(layer, [])
            names = [f"{layer}/{n}:0" if name_style == "keras2" else f"{layer}/{n}" for n, _ in ws]
            encoded = [n.encode("utf8") for n in names]  # [] -> an empty float64 array, as Keras's
            g.attrs["weight_names"] = np.asarray(encoded) if fixed_length and encoded else encoded
            for n, (_, a) in zip(names, ws):
                g.create_dataset(n, data=a)


def write_keras3(path, keyed_weights):
    """model.save_weights('w.weights.h5'): keyed_weights is [(key, [arrays])]."""
    with h5py.File(path, "w") as f:
        f.create_group("vars")
        layers = f.create_group("layers")
        for key, arrays in keyed_weights:
            vars_ = layers.create_group(key).create_group("vars")
            for i, a in enumerate(arrays):
                vars_.create_dataset(str(i), data=a)


def run_tool(*args, ok=True):
    p = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=120)
    if ok and p.returncode != 0:
        raise AssertionError(f"h5_weights_tool {' '.join(args)} failed: {p.stderr}")
    if not ok and p.returncode == 0:
        raise AssertionError(f"h5_weights_tool {' '.join(args)} succeeded; expected an error")
    return p


def report(stdout):
    out = {}
    for line in stdout.splitlines():
        k, _, v = line.partition(" ")
        out.setdefault(k, []).append(v)
    return out


class KerasWeights(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        rng = np.random.default_rng(19)
        cls.w = seq_weights(rng)
        cls.x = rng.standard_normal((4, H, W, C)).astype(np.float32)
        cls.expected = seq_forward(cls.x, cls.w)
        cls.spec = cls.path("seq.json")
        with open(cls.spec, "w") as f:
            json.dump(seq_spec(), f)
        cls.input = cls.path("x.f32")
        cls.x.tofile(cls.input)
        cls.all_layers = ["input_1"] + [n for n, _, _ in SEQ_LAYERS]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    def predict(self, weights_file, *flags, spec=None):
        out = self.path("y.f32")
        p = run_tool("--spec", spec or self.spec, "--load", weights_file, *flags, "--input", self.input, "--output", out)
        return np.fromfile(out, dtype=np.float32).reshape(self.x.shape[0], -1), report(p.stdout)

    def test_legacy_save_weights_layout_gives_numpy_outputs(self):
        f = self.path("legacy.h5")
        write_legacy(f, self.all_layers, self.w)
        y, rep = self.predict(f)
        self.assertEqual(rep["layout"], ["legacy"])
        self.assertEqual(rep["loaded"][0].split(), ["conv", "bn", "dw", "bn_1", "sep", "head"])
        np.testing.assert_allclose(y, self.expected, atol=TOL, rtol=0)

    def test_full_model_file_model_weights_group(self):
        f = self.path("full.h5")
        write_legacy(f, self.all_layers, self.w, group="model_weights", name_style="keras3", fixed_length=True)
        with h5py.File(f, "a") as h:
            h.attrs["model_config"] = b"{}"  # what a full-model file carries beside the weights
        y, _ = self.predict(f)
        np.testing.assert_allclose(y, self.expected, atol=TOL, rtol=0)

    def test_chunked_layer_names(self):
        # Keras splits a list over HDF5's 64 KiB attribute limit into layer_names0, 1, ...
        f = self.path("chunked.h5")
        write_legacy(f, self.all_layers, self.w)
        with h5py.File(f, "a") as h:
            del h.attrs["layer_names"]
            names = [n.encode("utf8") for n in self.all_layers]
            h.attrs["layer_names0"] = np.asarray(names[:4])
            h.attrs["layer_names1"] = np.asarray(names[4:])
        y, _ = self.predict(f)
        np.testing.assert_allclose(y, self.expected, atol=TOL, rtol=0)

    def test_keras3_weights_h5_layout(self):
        f = self.path("k3.weights.h5")
        keyed = [("conv2d", self.w["conv"]), ("batch_normalization", self.w["bn"]),
                 ("re_lu", []), ("depthwise_conv2d", self.w["dw"]),
                 ("batch_normalization_1", self.w["bn_1"]), ("separable_conv2d", self.w["sep"]),
                 ("global_average_pooling2d", []), ("dense", self.w["head"])]
        write_keras3(f, [(k, [a for _, a in ws]) for k, ws in keyed])
        y, rep = self.predict(f)
        self.assertEqual(rep["layout"], ["keras3"])
        np.testing.assert_allclose(y, self.expected, atol=TOL, rtol=0)

    def test_positional_load_ignores_names_as_keras(self):
        # Keras's by_name=False: layers with weights pair in order, whatever they are called.
        renamed = {f"other_{k}": v for k, v in self.w.items()}
        order = ["input_9", "other_conv", "other_bn", "r", "other_dw", "other_bn_1", "other_sep", "g", "other_head"]
        f = self.path("renamed.h5")
        write_legacy(f, order, renamed)
        y, _ = self.predict(f)
        np.testing.assert_allclose(y, self.expected, atol=TOL, rtol=0)

    def test_by_name_loads_a_backbone_into_a_new_head(self):
        # include_top=False: the file has no head; the model's head keeps its own weights.
        f = self.path("notop.h5")
        notop = {k: v for k, v in self.w.items() if k != "head"}
        write_legacy(f, [n for n in self.all_layers if n != "head"], notop)
        p = run_tool("--spec", self.spec, "--load", f, "--by-name")
        rep = report(p.stdout)
        self.assertEqual(rep["loaded"][0].split(), ["conv", "bn", "dw", "bn_1", "sep"])
        self.assertEqual(rep["absent"][0].split(), ["head"])
        # Without by_name the missing layer is an error naming it.
        p = run_tool("--spec", self.spec, "--load", f, ok=False)
        self.assertIn("layer count mismatch", p.stderr)
        self.assertIn("missing from the file: head", p.stderr)

    def test_skip_mismatch_skips_and_names_the_layer(self):
        other = dict(self.w)
        other["head"] = [("kernel", np.ones((5, 7), np.float32)), ("bias", np.ones(7, np.float32))]
        f = self.path("head7.h5")
        write_legacy(f, self.all_layers, other)
        p = run_tool("--spec", self.spec, "--load", f, ok=False)
        self.assertIn("layer head (Dense), weight kernel (file: head/kernel:0): the model expects shape (5, 3), "
                      "the file holds (5, 7)", p.stderr)
        p = run_tool("--spec", self.spec, "--load", f, "--by-name", "--skip-mismatch")
        rep = report(p.stdout)
        self.assertEqual(len(rep["skipped"]), 1)
        self.assertTrue(rep["skipped"][0].startswith("head: "), rep["skipped"])
        self.assertIn("skipping head", p.stderr)  # the warning
        self.assertNotIn("head", rep["loaded"][0].split())

    def test_wrong_dtype_is_an_error(self):
        bad = dict(self.w)
        bad["conv"] = [("kernel", np.ones((3, 3, C, 4), np.int32)), ("bias", self.w["conv"][1][1])]
        f = self.path("int.h5")
        write_legacy(f, self.all_layers, bad)
        p = run_tool("--spec", self.spec, "--load", f, ok=False)
        self.assertIn("layer conv (Conv2D), weight kernel (file: conv/kernel:0): dtype int32, expected a float dataset",
                      p.stderr)

    def test_saved_file_reads_back_in_keras_layout(self):
        src = self.path("src.h5")
        write_legacy(src, self.all_layers, self.w)
        out = self.path("strata_saved.h5")
        run_tool("--spec", self.spec, "--load", src, "--save", out)
        self.assertFalse([n for n in os.listdir(self.dir) if ".tmp." in n])  # the temporary is gone
        with h5py.File(out, "r") as f:
            names = [n.decode() for n in f.attrs["layer_names"]]
            self.assertEqual(names, [n for n, _, _ in SEQ_LAYERS])
            self.assertEqual(f.attrs["backend"], b"tensorflow")
            self.assertIn("keras_version", f.attrs)
            for layer in names:
                wn = [n.decode() for n in f[layer].attrs["weight_names"]]
                expected = self.w.get(layer, [])
                self.assertEqual(wn, [f"{layer}/{n}:0" for n, _ in expected], layer)
                for n, (_, a) in zip(wn, expected):
                    d = f[layer][n]
                    self.assertEqual(d.dtype, np.float32)
                    self.assertEqual(d.shape, a.shape, f"{layer}/{n}")
                    np.testing.assert_array_equal(d[()], a)
        # And Strata loads its own file back to the same outputs.
        y, _ = self.predict(out)
        np.testing.assert_allclose(y, self.expected, atol=TOL, rtol=0)


    def test_depth_multiplier_round_trips_in_keras_shape(self):
        # Keras holds a depthwise kernel as [k, k, C, M]; Strata as [k, k, 1, C * M] in the same
        # order. A file in Keras's shape loads, and Strata writes Keras's shape back (M = 2).
        layers = [("dw", "DepthwiseConv2D", {"kernel_size": 3, "padding": "same", "depth_multiplier": 2}),
                  ("gap", "GlobalAveragePooling2D", {}), ("head", "Dense", {"units": 3})]
        spec = self.path("dw2.json")
        with open(spec, "w") as f:
            json.dump(seq_spec(layers), f)
        rng = np.random.default_rng(7)
        k = rng.standard_normal((3, 3, C, 2)).astype(np.float32)
        w = {"dw": [("depthwise_kernel", k), ("bias", rng.standard_normal(C * 2).astype(np.float32))],
             "head": [("kernel", rng.standard_normal((C * 2, 3)).astype(np.float32)),
                      ("bias", rng.standard_normal(3).astype(np.float32))]}
        xp = np.pad(self.x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        # Output channel c * M + m is input channel c times k[..., c, m] (Keras's order).
        y = sum(xp[:, i:i + H, j:j + W, :, None] * k[i, j] for i in range(3) for j in range(3))
        y = y.reshape(self.x.shape[0], H, W, C * 2) + w["dw"][1][1]
        expected = y.mean(axis=(1, 2)) @ w["head"][0][1] + w["head"][1][1]
        src = self.path("dw2_src.h5")
        write_legacy(src, ["input_1", "dw", "gap", "head"], w)
        got, _ = self.predict(src, spec=spec)
        np.testing.assert_allclose(got, expected, atol=TOL, rtol=0)
        out = self.path("dw2_saved.h5")
        run_tool("--spec", spec, "--load", src, "--save", out)
        with h5py.File(out, "r") as f:
            d = f["dw"]["dw/depthwise_kernel:0"]
            self.assertEqual(d.shape, (3, 3, C, 2))
            np.testing.assert_array_equal(d[()], k)


class KerasLayerOrder(unittest.TestCase):
    """A residual block, where Keras's model.layers order (map_graph: deepest first, ties by a
    depth-first walk from the output) is not the order of definition."""

    def test_keras_order_for_positional_and_keras3_loads(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        d = tmp.name
        spec = {"class_name": "Functional", "config": {
            "name": "res", "input_layers": [["inp", 0, 0]], "output_layers": [["gap", 0, 0]],
            "layers": [
                {"class_name": "InputLayer", "name": "inp", "config": {"batch_input_shape": [None, 5, 5, 3], "name": "inp"},
                 "inbound_nodes": []},
                {"class_name": "Conv2D", "name": "c1", "config": {"name": "c1", "filters": 4, "kernel_size": 3, "padding": "same"},
                 "inbound_nodes": [[["inp", 0, 0, {}]]]},
                {"class_name": "ReLU", "name": "relu", "config": {"name": "relu"}, "inbound_nodes": [[["c1", 0, 0, {}]]]},
                {"class_name": "Conv2D", "name": "c2", "config": {"name": "c2", "filters": 6, "kernel_size": 3, "padding": "same"},
                 "inbound_nodes": [[["relu", 0, 0, {}]]]},
                {"class_name": "Conv2D", "name": "c0", "config": {"name": "c0", "filters": 6, "kernel_size": 1},
                 "inbound_nodes": [[["inp", 0, 0, {}]]]},
                {"class_name": "Add", "name": "add", "config": {"name": "add"},
                 "inbound_nodes": [[["c0", 0, 0, {}], ["c2", 0, 0, {}]]]},
                {"class_name": "GlobalAveragePooling2D", "name": "gap", "config": {"name": "gap"},
                 "inbound_nodes": [[["add", 0, 0, {}]]]},
            ]}}
        spec_path = os.path.join(d, "res.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        rng = np.random.default_rng(7)
        r = lambda *s: rng.standard_normal(s).astype(np.float32)
        w = {"c1": [r(3, 3, 3, 4), r(4)], "c2": [r(3, 3, 4, 6), r(6)], "c0": [r(1, 1, 3, 6), r(6)]}
        x = r(2, 5, 5, 3)
        xf = os.path.join(d, "x.f32")
        x.tofile(xf)
        expected = (conv(x, *w["c0"]) + conv(np.maximum(conv(x, *w["c1"]), 0), *w["c2"])).mean(axis=(1, 2))
        # Keras's model.layers for this graph: inp, c1, relu, c0, c2, add (c0 and c2 share a
        # depth; the walk from add meets c0 first), gap. Keras 3 numbers the Conv2D layers in it.
        keras_order = [("L1", [w["c1"][0], w["c1"][1]]), ("L0", w["c0"]), ("L2", w["c2"])]
        legacy = os.path.join(d, "pos.h5")
        write_legacy(legacy, ["in", "L1", "r", "L0", "L2", "a", "g"],
                     {n: [("kernel", a[0]), ("bias", a[1])] for n, a in keras_order})
        k3 = os.path.join(d, "res.weights.h5")
        write_keras3(k3, [("input_layer", []), ("conv2d", w["c1"]), ("re_lu", []), ("conv2d_1", w["c0"]),
                          ("conv2d_2", w["c2"]), ("add", []), ("global_average_pooling2d", [])])
        for f in (legacy, k3):
            out = os.path.join(d, "y.f32")
            run_tool("--spec", spec_path, "--load", f, "--input", xf, "--output", out)
            y = np.fromfile(out, dtype=np.float32).reshape(expected.shape)
            np.testing.assert_allclose(y, expected, atol=TOL, rtol=0, err_msg=f)
        # Strata's saved layer_names follow the same order.
        saved = os.path.join(d, "saved.h5")
        run_tool("--spec", spec_path, "--load", k3, "--save", saved)
        with h5py.File(saved, "r") as f:
            self.assertEqual([n.decode() for n in f.attrs["layer_names"]], ["c1", "relu", "c0", "c2", "add", "gap"])


if __name__ == "__main__":
    TOOL = sys.argv.pop(1)
    unittest.main(verbosity=2)
