"""weights= on the applications, as Keras's: "imagenet" fetches Keras's published file (its URL,
cache name and hash) once into Strata's cache and loads it in order; a path loads in order too,
and a file that does not match is an error naming what differs. The download runs against a
local HTTP server (Python's http.server) serving a file this test writes, with the URL and hash
pointed at it; io/get_file.h's retries and cuts are tests/e2e/get_file_test.cc's."""
import hashlib
import http.server
import threading

import numpy as np
import pytest

import strata
from strata import errors

apps = strata.keras.applications


def test_imagenet_weights_are_kerass_files_and_rules():
    w = strata._strata.keras.imagenet_weights
    assert w("resnet50", True, None, 1000) == (
        "https://storage.googleapis.com/tensorflow/keras-applications/resnet/resnet50_weights_tf_dim_ordering_tf_kernels.h5",
        "resnet50_weights_tf_dim_ordering_tf_kernels.h5", "2cb95161c43110f7111970584f804107")
    assert w("resnet152_v2", False, [160, 160, 3], 1000)[1:] == (
        "resnet152v2_weights_tf_dim_ordering_tf_kernels_notop.h5", "ed17cf2e0169df9d443503ef94b23b33")
    assert w("efficientnet_b7", False, None, 1000) == (
        "https://storage.googleapis.com/keras-applications/efficientnetb7_notop.h5", "efficientnetb7_notop.h5",
        "cbcfe4450ddf6f3ad90b1b398090fe4a")
    assert w("inception_resnet_v2", True, None, 1000)[2] == "e693bd0210a403b3192acc6073ad2e96"
    # MobileNet's files: one per width and size, no hash (Keras publishes none).
    assert w("mobilenet", False, [128, 128, 3], 1000, 0.25) == (
        "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet/mobilenet_2_5_128_tf_no_top.h5",
        "mobilenet_2_5_128_tf_no_top.h5", "")
    assert w("mobilenet_v2", True, [96, 96, 3], 1000, 0.35)[1] == \
        "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_0.35_96.h5"
    assert w("mobilenet_v2", False, [100, 100, 3], 1000, 1.4)[1] == \
        "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.4_224_no_top.h5"  # Keras falls back to 224
    with pytest.raises(ValueError, match="classes=1000"):
        apps.ResNet50(weights="imagenet", classes=10)
    with pytest.raises(ValueError, match=r"input_shape \[299, 299, 3\]"):
        apps.Xception(weights="imagenet", input_shape=(150, 150, 3))
    with pytest.raises(ValueError, match="alpha 0.35, 0.5, 0.75, 1.0, 1.3 or 1.4, got 0.6"):
        apps.MobileNetV2(weights="imagenet", alpha=0.6, include_top=False)
    with pytest.raises(ValueError, match="no such file"):
        apps.VGG16(weights="/nonexistent/vgg16.h5")


class _Server:
    """http.server on a loopback port, serving `root`, in a thread."""

    def __init__(self, root):
        handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(root), **k)  # noqa: E731
        http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _mobilenet(weights=None, include_top=False):
    return apps.MobileNet(input_shape=(32, 32, 3), alpha=0.25, include_top=include_top, classes=1000,
                          weights=weights)


def test_weights_imagenet_downloads_once_checks_the_hash_and_loads(tmp_path, monkeypatch):
    served = tmp_path / "served"
    served.mkdir()
    source = _mobilenet()
    rng = np.random.default_rng(3)
    for _, a in source.weights:
        a[...] = rng.normal(size=a.shape)
    source.save_weights(served / "mobilenet_test_no_top.h5")
    md5 = hashlib.md5((served / "mobilenet_test_no_top.h5").read_bytes()).hexdigest()
    monkeypatch.setenv("STRATA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    server = _Server(served)
    file = {"hash": md5}
    monkeypatch.setattr(apps, "_imagenet_file", lambda *a: (server.url("mobilenet_test_no_top.h5"),
                                                            "mobilenet_test_no_top.h5", file["hash"]))
    try:
        model = _mobilenet(weights="imagenet")
    finally:
        server.close()
    cached = tmp_path / "home" / "models" / "mobilenet_test_no_top.h5"
    assert cached.read_bytes() == (served / "mobilenet_test_no_top.h5").read_bytes()
    for (name, want), (_, got) in zip(source.weights, model.weights):
        np.testing.assert_array_equal(got, want, err_msg=name)
    # The server is gone: the cached copy serves.
    again = _mobilenet(weights="imagenet")
    np.testing.assert_array_equal(again.weights[0][1], source.weights[0][1])
    # A wrong hash: the cached copy is not used, the download is refused naming the URL, and
    # nothing is kept (the server is back, serving the same bytes).
    cached.unlink()
    server = _Server(served)
    file["hash"] = "0" * 32
    try:
        with pytest.raises(errors.InvalidArgumentError, match=r"downloading http://127\.0\.0\.1:\d+/mobilenet_test"):
            _mobilenet(weights="imagenet")
    finally:
        server.close()
    assert list((tmp_path / "home" / "models").iterdir()) == []


def test_a_weights_file_loads_in_order_or_names_what_differs(tmp_path):
    source = _mobilenet(include_top=True)
    rng = np.random.default_rng(4)
    for _, a in source.weights:
        a[...] = rng.normal(size=a.shape)
    source.save_weights(tmp_path / "top.h5")
    loaded = _mobilenet(weights=tmp_path / "top.h5", include_top=True)
    for (name, want), (_, got) in zip(source.weights, loaded.weights):
        np.testing.assert_array_equal(got, want, err_msg=name)
    # The with-top file into the model without the top: Keras's error, naming the extra layer.
    with pytest.raises(errors.InvalidArgumentError, match="only in the file: conv_preds"):
        _mobilenet(weights=str(tmp_path / "top.h5"), include_top=False)
    # The partial load the user asks for: by name, reporting what the file had that was not used.
    notop = _mobilenet()
    report = notop.load_weights(tmp_path / "top.h5", by_name=True, skip_mismatch=True)
    assert report["unused"] == ["conv_preds"] and report["absent"] == [] and report["skipped"] == []
    np.testing.assert_array_equal(notop.weights[0][1], source.weights[0][1])


def test_strata_predict_classifies_photos_as_keras_would(tmp_path, strata_cli):
    """`strata predict --model mobilenet --weights FILE.h5 photo.png photo.jpg folder/` against the
    same model in Python (a Keras user's three lines: preprocess_input, predict,
    decode_predictions): the same classes and scores. The photos are 224 x 224 (the model's size,
    where the bilinear resize is the identity); a larger one is resized and classified too. A
    corrupt photo and a model that is no application are errors naming them."""
    import json
    import subprocess
    from PIL import Image

    model = apps.MobileNet(weights=None, classifier_activation="softmax")
    rng = np.random.default_rng(5)
    for name, a in model.weights:  # statistics that keep the signal alive through 28 layers
        if name.endswith("moving_variance"):
            a[...] = rng.uniform(0.02, 0.05, size=a.shape)
        if name.endswith("moving_mean"):
            a[...] = rng.normal(0, 0.1, size=a.shape)
    model.save_weights(tmp_path / "mobilenet.h5")
    pixels = rng.integers(0, 256, size=(2, 224, 224, 3), dtype=np.uint8)
    Image.fromarray(pixels[0]).save(tmp_path / "a.png")
    (tmp_path / "folder").mkdir()
    Image.fromarray(pixels[1]).save(tmp_path / "folder" / "b.png")
    Image.fromarray(pixels[0]).resize((300, 260)).save(tmp_path / "big.jpg", quality=95)
    want = apps.mobilenet.decode_predictions(model.predict(apps.mobilenet.preprocess_input(pixels), verbose=0), top=3)

    out = subprocess.run([strata_cli, "predict", "--model", "mobilenet", "--weights", str(tmp_path / "mobilenet.h5"),
                          "--top", "3", "--json", str(tmp_path / "a.png"), str(tmp_path / "folder"),
                          str(tmp_path / "big.jpg")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["file"] for r in rows] == [str(tmp_path / "a.png"), str(tmp_path / "folder" / "b.png"),
                                         str(tmp_path / "big.jpg")]
    for row, expected in zip(rows, want):
        assert [(p["class_id"], p["name"]) for p in row["predictions"]] == [(c, n) for c, n, _ in expected]
        np.testing.assert_allclose([p["score"] for p in row["predictions"]], [s for _, _, s in expected], rtol=1e-4)
    assert len(rows[2]["predictions"]) == 3
    assert rows[0]["predictions"] != rows[1]["predictions"]
    table = subprocess.run([strata_cli, "predict", "--model", "mobilenet", "--weights", str(tmp_path / "mobilenet.h5"),
                            str(tmp_path / "a.png")], capture_output=True, text=True, timeout=300)
    assert table.returncode == 0 and f"1. {want[0][0][0]}" in table.stdout and want[0][0][1] in table.stdout, table.stdout

    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8\xff not a jpeg")
    bad = subprocess.run([strata_cli, "predict", "--model", "mobilenet", "--weights", str(tmp_path / "mobilenet.h5"),
                          str(tmp_path / "bad.jpg")], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "bad.jpg" in bad.stderr, bad.stderr
    spec = subprocess.run([strata_cli, "predict", "--model", "reference-cnn", "--weights", "imagenet",
                           str(tmp_path / "a.png")], capture_output=True, text=True, timeout=60)
    assert spec.returncode == 2 and "Keras applications" in spec.stderr, spec.stderr
