"""strata.keras from Python: models built the Keras ways agree, weights round-trip, Python
callbacks see each epoch and can stop or fail fit, predict hands back numpy over the C++
result, bad input is a typed error naming the argument, and Ctrl-C stops fit cleanly."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import numpy as np
import pytest

import strata
from strata import errors
from strata.keras import layers

FEATURES, CLASSES = 8, 3


def blobs(n=256, seed=0):
    """A separable 3-class problem: class c's points sit around centre c."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, n)
    centres = rng.normal(0, 3, (CLASSES, FEATURES)).astype(np.float32)
    x = centres[y] + rng.normal(0, 1, (n, FEATURES)).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)


def sequential(seed=42):
    model = strata.keras.Sequential([
        strata.keras.Input(shape=(FEATURES,)),
        layers.Dense(16, activation="relu"),
        layers.Dense(CLASSES, activation="softmax"),
    ], name="mlp")
    model.compile(optimizer=strata.keras.optimizers.SGD(learning_rate=0.1, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"], seed=seed)
    return model


def functional(seed=42):
    inputs = strata.keras.Input(shape=(FEATURES,), name="features")
    h = layers.Dense(16, activation="relu")(inputs)
    outputs = layers.Dense(CLASSES, activation="softmax")(h)
    model = strata.keras.Model(inputs=inputs, outputs=outputs, name="mlp_functional")
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"], seed=seed)
    return model


def test_fit_learns_and_returns_a_keras_history():
    x, y = blobs()
    model = sequential()
    history = model.fit(x, y, batch_size=32, epochs=4, verbose=0, validation_split=0.25)
    assert history.epoch == [0, 1, 2, 3]
    assert set(history.history) >= {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert all(len(v) == 4 for v in history.history.values())
    assert history.history["loss"][-1] < history.history["loss"][0]
    loss, accuracy = model.evaluate(x, y, batch_size=64, verbose=0)
    assert accuracy > 0.9 and loss < 0.5
    logs = model.evaluate(x, y, verbose=0, return_dict=True)
    assert set(logs) == {"loss", "accuracy"} and logs["accuracy"] == pytest.approx(accuracy)


def test_sequential_and_functional_give_the_same_predictions_for_the_same_weights(tmp_path):
    x, y = blobs(64)
    a = sequential(seed=1)
    a.fit(x, y, batch_size=16, epochs=1, verbose=0)
    b = functional(seed=2)  # other initial weights, until the load
    assert not np.allclose(a.predict(x), b.predict(x))
    path = str(tmp_path / "mlp.h5")
    a.save_weights(path)
    report = b.load_weights(path)
    assert report["layout"] == "h5" and len(report["loaded"]) == 2
    np.testing.assert_array_equal(a.predict(x, batch_size=7), b.predict(x))


def test_h5_and_checkpoint_round_trips_restore_every_weight(tmp_path):
    x, y = blobs(64)
    a = sequential()
    a.fit(x, y, batch_size=16, epochs=2, verbose=0)
    for name in ("w.h5", "w.ckpt"):
        path = str(tmp_path / name)
        a.save_weights(path)
        b = sequential(seed=7)
        b.load_weights(path)
        for wa, wb in zip(a.get_weights(), b.get_weights()):
            np.testing.assert_array_equal(wa, wb)
        np.testing.assert_array_equal(a.predict(x), b.predict(x))


def test_predict_returns_numpy_over_the_cpp_result():
    x, _ = blobs(50)
    out = sequential().predict(x, batch_size=16)  # 50 = 3 x 16 + a short last batch
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (50, CLASSES)
    assert not out.flags.owndata and out.base is not None  # a view of the C++ tensor, not a copy
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


def test_layers_summary_and_get_layer():
    model = sequential()
    names = [l.name for l in model.layers]
    assert names == ["dense", "dense_1"]
    assert model.get_layer("dense_1") is model.layers[1]
    assert model.count_params() == FEATURES * 16 + 16 + 16 * CLASSES + CLASSES
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "dense_1 (Dense)" in text and f"Total params: {model.count_params():,}" in text
    with pytest.raises(ValueError, match="no layer named 'nope'"):
        model.get_layer("nope")


def test_every_registered_layer_class_is_a_python_layer_with_the_same_keywords():
    """The C++ layer registry (keras/layer_registry.h) and strata.keras.layers cannot drift: each
    registered class exists in Python, takes exactly the config keys its C++ from-config function
    reads (besides the ones Strata accepts and ignores, and the base Layer's), and each Python
    layer class is registered."""
    import inspect
    registry = strata._strata.keras.layer_classes()
    ignored = set(strata._strata.keras.ignored_config_keys())
    assert {"Dense", "Conv2D", "BatchNormalization", "MaxPool2D", "Concatenate"} <= set(registry)
    base = {"self", "kwargs", "name", "trainable", "dtype", "input_shape"}
    for cls_name, keys in registry.items():
        cls = getattr(layers, cls_name, None)
        assert cls is not None, f"{cls_name} is registered in C++ but strata.keras.layers has no such class"
        params = set(inspect.signature(cls.__init__).parameters) - base
        assert params - ignored == set(keys) - ignored, (
            f"{cls_name}: Python keywords {sorted(params - ignored)}, C++ config keys {sorted(set(keys) - ignored)}")
    for name in layers.__all__:
        if name in ("Layer", "InputLayer", "KerasTensor"):
            continue
        assert name in registry, f"strata.keras.layers.{name} has no C++ registry entry"


def test_applications_have_kerass_parameter_counts():
    # keras.applications.ResNet50(weights=None, classes=10) / MobileNetV2(weights=None).count_params()
    assert strata.keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3), classes=10).count_params() == 23608202
    assert strata.keras.applications.MobileNetV2(weights=None).count_params() == 3538984


def test_every_application_is_a_keras_function_of_the_same_name():
    apps = strata.keras.applications
    # The C++ table's command-line names, one Keras function each (resnet50_v2 -> ResNet50V2).
    camel = {n.replace("_", "").lower(): n for n in apps.__all__}
    for name in strata._strata.keras.application_names():
        assert name.replace("_", "") in camel, f"--model {name} has no strata.keras.applications function"
    assert len(apps.__all__) == len(strata._strata.keras.application_names())
    # Keras's totals (keras.io/api/applications), and the widths Keras names its models by.
    assert apps.VGG16(weights=None).count_params() == 138357544
    assert apps.ResNet152V2(weights=None).count_params() == 60380648
    assert apps.EfficientNetB7(weights=None).count_params() == 66658687
    assert apps.MobileNetV2(alpha=0.35, weights=None, input_shape=(96, 96, 3)).name == "mobilenetv2_0.35_96"
    b3 = apps.EfficientNetB3(weights=None, include_top=False, input_shape=(64, 64, 3), pooling="avg")
    assert b3.output_shape == (None, 1536)
    with pytest.raises(ValueError, match="alpha"):
        strata.keras.applications.MobileNetV2(alpha=0.0, weights=None)


def test_application_on_an_input_tensor_takes_its_source_inputs():
    """Keras's input_tensor: the application is built on a symbolic tensor (here a Rescaling on an
    Input, as a user puts preprocessing in front of a backbone) and takes the Input as its own; it
    computes what the same application on input_shape computes on the rescaled images."""
    k = strata.keras
    inp = k.Input((72, 70, 3), name="photo")
    x = k.layers.Rescaling(1 / 127.5, offset=-1.0)(inp)
    assert x.shape == (None, 72, 70, 3)  # inferred through the layer
    model = k.applications.MobileNetV2(input_tensor=x, include_top=False, pooling="avg", weights=None, alpha=0.35)
    assert model.input_shape == (None, 72, 70, 3) and model.output_shape == (None, 1280)
    names = [l.name for l in model.layers]
    assert names[:2] == ["rescaling", "Conv1"], names[:2]
    plain = k.applications.MobileNetV2(input_shape=(72, 70, 3), include_top=False, pooling="avg", weights=None,
                                       alpha=0.35)
    assert model.count_params() == plain.count_params()
    views = dict(plain.weights)
    for name, w in model.weights:
        views[name][...] = w
    images = np.random.default_rng(1).uniform(0, 255, (2, 72, 70, 3)).astype(np.float32)
    np.testing.assert_allclose(model.predict(images, verbose=0), plain.predict(images / 127.5 - 1, verbose=0),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(strata.errors.InvalidArgumentError, match="differs from the input_tensor's shape"):
        k.applications.ResNet50(input_tensor=x, input_shape=(64, 64, 3), weights=None)
    with pytest.raises(strata.errors.InvalidArgumentError, match="input_tensor must be images"):
        k.applications.ResNet50(input_tensor=k.Input((64,)), weights=None)
    with pytest.raises(TypeError, match="symbolic tensor"):
        k.applications.ResNet50(input_tensor=images, weights=None)


def test_preprocess_input_is_kerass_to_the_bit():
    """Each family's preprocess_input against Keras's own imagenet_utils (Debian's
    keras_applications, its NumPy path, given a NumPy stand-in for the backend), on uint8 and
    float32 images: the same float32 bits, and the modes per family as Keras's modules have them."""
    import types
    from keras_applications import imagenet_utils as keras_utils
    backend = types.SimpleNamespace(floatx=lambda: "float32", image_data_format=lambda: "channels_last")
    apps = strata.keras.applications
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(2, 5, 7, 3), dtype=np.uint8)
    for x in (pixels, pixels.astype(np.float32) + rng.random(pixels.shape, dtype=np.float32)):
        for module, mode in ((apps.vgg16, "caffe"), (apps.resnet, "caffe"), (apps.resnet50, "caffe"),
                             (apps.resnet_v2, "tf"), (apps.mobilenet, "tf"), (apps.mobilenet_v2, "tf"),
                             (apps.xception, "tf"), (apps.densenet, "torch")):
            want = keras_utils.preprocess_input(x.copy(), mode=mode, backend=backend)
            got = module.preprocess_input(x)
            assert got.dtype == np.float32 and got.shape == x.shape
            np.testing.assert_array_equal(got, want, err_msg=f"{module.__name__} ({mode})")
        assert apps.efficientnet.preprocess_input(x) is x  # Keras's is a pass-through too
    before = pixels.copy()
    apps.imagenet_utils.preprocess_input(pixels, mode="torch")
    np.testing.assert_array_equal(pixels, before)  # a new array; the input is left as it was
    # The C++ table agrees with the modules.
    assert strata._strata.keras.preprocess_mode("resnet152_v2") == "tf"
    assert strata._strata.keras.preprocess_mode("densenet201") == "torch"
    assert strata._strata.keras.preprocess_mode("efficientnet_b7") == ""
    with pytest.raises(ValueError, match="3 channels"):
        apps.vgg16.preprocess_input(np.zeros((1, 4, 4, 1), np.float32))
    with pytest.raises(ValueError, match="mode"):
        apps.imagenet_utils.preprocess_input(pixels, mode="inception")


def test_decode_predictions_is_kerass(tmp_path):
    """decode_predictions against Keras's own (Debian's keras_applications), whose get_file is
    handed the class index Strata ships: that file is byte for byte the one Keras downloads (its
    MD5 is the file_hash Keras checks), and the tables agree for random and tied rows (equal
    scores too: both rank with NumPy's argsort)."""
    import hashlib
    import types
    from keras_applications import imagenet_utils as keras_utils
    index = strata._strata.keras.imagenet_class_index_json()
    assert hashlib.md5(index).hexdigest() == "c2c37ea517e94d9795004a39431a14cb"
    path = tmp_path / "imagenet_class_index.json"
    path.write_bytes(index)
    keras_utils.CLASS_INDEX = None  # Keras caches the parsed index in the module
    utils = types.SimpleNamespace(get_file=lambda *args, **kwargs: str(path))
    rng = np.random.default_rng(1)
    preds = rng.dirichlet(np.ones(1000), size=3).astype(np.float32)
    preds[2] = 0
    preds[2, [7, 400, 999]] = [0.2, 0.5, 0.3]
    for top in (1, 5, 10):
        want = keras_utils.decode_predictions(preds, top=top, utils=utils)
        got = strata.keras.applications.imagenet_utils.decode_predictions(preds, top=top)
        assert got == want
        assert all(type(score) is np.float32 for row in got for _, _, score in row)
    assert got[2][:3] == [("n02669723", "academic_gown", np.float32(0.5)),
                          ("n15075141", "toilet_tissue", np.float32(0.3)), ("n01514668", "cock", np.float32(0.2))]
    assert strata.keras.applications.resnet50.decode_predictions is strata.keras.applications.imagenet_utils.decode_predictions
    with pytest.raises(ValueError, match=r"\(samples, 1000\).*\(2, 10\)"):
        strata.keras.applications.imagenet_utils.decode_predictions(np.zeros((2, 10), np.float32))


class Recorder(strata.keras.callbacks.Callback):
    def __init__(self, stop_after_epoch=None):
        super().__init__()
        self.events, self.stop_after_epoch = [], stop_after_epoch

    def on_train_begin(self, logs=None):
        self.events.append("begin")

    def on_epoch_begin(self, epoch, logs=None):
        self.events.append(("epoch_begin", epoch))

    def on_train_batch_end(self, batch, logs=None):
        assert set(logs) == {"loss", "accuracy"}
        self.events.append(("batch", batch))

    def on_epoch_end(self, epoch, logs=None):
        assert "val_loss" in logs
        logs["from_python"] = 10.0 + epoch  # Keras lets callbacks add to the logs
        self.events.append(("epoch_end", epoch))
        if epoch == self.stop_after_epoch:
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        self.events.append("end")


def test_a_python_callback_sees_each_epoch_and_can_stop_training():
    x, y = blobs(64)
    model = sequential()
    recorder = Recorder(stop_after_epoch=1)
    history = model.fit(x, y, batch_size=32, epochs=5, verbose=0, validation_data=(x, y), callbacks=[recorder])
    assert recorder.model is model
    batches = [("batch", 0), ("batch", 1)]  # 64 examples, batch 32
    assert recorder.events == (["begin", ("epoch_begin", 0)] + batches + [("epoch_end", 0), ("epoch_begin", 1)] +
                               batches + [("epoch_end", 1), "end"])
    assert history.epoch == [0, 1]
    assert history.history["from_python"] == [10.0, 11.0]


def test_an_exception_in_a_python_callback_reaches_the_caller():
    class Boom(strata.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise RuntimeError(f"boom at epoch {epoch}")

    x, y = blobs(64)
    with pytest.raises(RuntimeError, match="boom at epoch 0"):
        sequential().fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=[Boom()])


def test_builtin_callbacks_early_stopping_and_csv_logger(tmp_path):
    x, y = blobs(64)
    csv = tmp_path / "log.csv"
    # min_delta 10: no epoch improves the loss that much, so patience 1 stops after 2 epochs.
    history = sequential().fit(x, y, batch_size=32, epochs=6, verbose=0, callbacks=[
        strata.keras.callbacks.EarlyStopping(monitor="loss", min_delta=10, patience=1),
        strata.keras.callbacks.CSVLogger(str(csv))])
    assert history.epoch == [0, 1]
    rows = csv.read_text().strip().splitlines()
    assert rows[0].startswith("epoch,") and len(rows) == 3


def test_learning_rate_scheduler_sets_each_epochs_rate():
    x, y = blobs(64)
    seen = []
    lr = strata.keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.1 / (epoch + 1))
    spy = strata.keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(logs["lr"]))
    sequential().fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=[lr, spy])
    np.testing.assert_allclose(seen, [0.1, 0.05, 0.1 / 3], rtol=1e-6)


def test_compute_and_apply_gradients_is_the_step_train_on_batch_takes():
    x, y = blobs(32)
    a, b = sequential(), sequential()
    loss = a.compute_gradients(x, y)
    grads = a.gradients()
    assert grads.dtype == np.float32 and grads.shape == (a.count_params(),) and np.abs(grads).sum() > 0
    a.apply_gradients()
    logs = b.train_on_batch(x, y, return_dict=True)
    assert logs["loss"] == pytest.approx(loss, rel=1e-6)
    np.testing.assert_allclose(a.predict(x), b.predict(x), rtol=1e-6)


def test_fit_takes_a_strata_data_dataset():
    x, y = blobs(128)
    ds = strata.data.Dataset.from_tensor_slices((x, y)).shuffle(128, seed=1).batch(32, drop_remainder=True)
    model = sequential()
    history = model.fit(ds, epochs=3, verbose=0)
    assert len(history.history["loss"]) == 3 and history.history["loss"][-1] < history.history["loss"][0]
    out = model.predict(strata.data.Dataset.from_tensor_slices(x).batch(50))
    assert out.shape == (128, CLASSES)


def test_fit_serves_the_live_monitor_page_as_strata_train_monitor_port_does(capfd):
    seen = {}

    class Probe(strata.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1 and not seen:  # the server is up from the first compiled step to the end of fit
                url = re.search(r"monitor: (http://\S+)", capfd.readouterr().err).group(1)
                seen["monitor"] = json.loads(urllib.request.urlopen(url.rstrip("/") + "/api/v1/monitor", timeout=30).read())

    x, y = blobs(128)
    sequential().fit(x, y, batch_size=32, epochs=1, verbose=0, monitor_port=0, callbacks=[Probe()])
    assert isinstance(seen["monitor"], dict) and seen["monitor"]


def test_fit_releases_the_gil_so_python_threads_run_during_training():
    window = {}

    class Window(strata.keras.callbacks.Callback):  # no batch hook: nothing in Python between these
        def on_train_begin(self, logs=None):
            window["begin"] = time.perf_counter()

        def on_train_end(self, logs=None):
            window["end"] = time.perf_counter()

    stamps, done = [], threading.Event()

    def spin():
        while not done.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.001)

    x, y = blobs(256)
    thread = threading.Thread(target=spin)
    thread.start()
    try:
        sequential().fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[Window()])
    finally:
        done.set()
        thread.join()
    assert any(window["begin"] < t < window["end"] for t in stamps)


# ---- errors ----------------------------------------------------------------------------------

def test_x_and_y_of_different_lengths_name_both_shapes():
    x, y = blobs(64)
    with pytest.raises(ValueError, match=r"x has 64 examples \(shape \(64, 8\)\) but y has shape \(60,\)"):
        sequential().fit(x, y[:60], verbose=0)


def test_an_input_of_the_wrong_rank_or_shape_names_the_argument_and_both_shapes():
    x, y = blobs(64)
    with pytest.raises(ValueError, match=r"x: model 'mlp' input 0 takes arrays of shape \(None, 8\), got an array of shape \(64, 8, 1\)"):
        sequential().fit(x[:, :, None], y, verbose=0)
    with pytest.raises(ValueError, match=r"takes arrays of shape \(None, 8\), got an array of shape \(64, 4\)"):
        sequential().predict(np.ascontiguousarray(x[:, :4]))


def test_a_non_contiguous_array_is_a_value_error_naming_the_argument_and_its_shape():
    x, y = blobs(64)
    with pytest.raises(ValueError, match=r"x: the array of shape \(32, 8\) is not C-contiguous"):
        sequential().predict(x[::2])
    with pytest.raises(ValueError, match=r"y: the array of shape \(32,\) is not C-contiguous"):
        sequential().fit(np.ascontiguousarray(x[::2]), y[::2], verbose=0)


def test_a_read_only_array_is_accepted_as_it_is():
    x, y = blobs(64)
    x.flags.writeable = False
    model = sequential()
    np.testing.assert_array_equal(model.predict(x), model.predict(x.copy()))


def test_an_input_of_a_non_numeric_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="x: dtype <U1 cannot be converted to f32"):
        sequential().predict(np.full((4, FEATURES), "a"))


def test_unknown_names_in_compile_are_value_errors_naming_them():
    model = strata.keras.Sequential([strata.keras.Input(shape=(FEATURES,)), layers.Dense(CLASSES)])
    with pytest.raises(ValueError, match="unknown optimizer 'adagrad'"):
        model.compile(optimizer="adagrad", loss="sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match="hinge"):
        model.compile(optimizer="adam", loss="hinge")
    with pytest.raises(ValueError, match="precision_at_k"):
        model.compile(optimizer="adam", loss="mse", metrics=["precision_at_k"])


def test_fit_before_compile_is_an_error():
    model = strata.keras.Sequential([strata.keras.Input(shape=(FEATURES,)), layers.Dense(CLASSES)])
    x, y = blobs(32)
    with pytest.raises(errors.InvalidArgumentError, match="call compile\\(\\) before fit\\(\\)"):
        model.fit(x, y)


def test_an_unknown_layer_keyword_names_the_layer():
    with pytest.raises(ValueError, match=r'my_dense \(Dense\): unknown argument "kernel_constraints"'):
        layers.Dense(4, kernel_constraints=None, name="my_dense")
    with pytest.raises(ValueError, match="input shape"):
        strata.keras.Sequential([layers.Dense(4)])


# ---- Ctrl-C ----------------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import strata
    from strata.keras import layers

    backup_dir = sys.argv[1]
    x = np.random.default_rng(0).normal(size=(4096, 64)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = strata.keras.Sequential([strata.keras.Input(shape=(64,)), layers.Dense(256, activation="relu"),
                                     layers.Dense(2, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")

    class Ready(strata.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 3:
                print("training", flush=True)

    try:
        model.fit(x, y, batch_size=16, epochs=1000, verbose=0,
                  callbacks=[strata.keras.callbacks.BackupAndRestore(backup_dir, save_freq=2), Ready()])
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        sys.exit(3)
    print("fit returned", flush=True)
""")


def test_ctrl_c_stops_fit_between_steps_with_keyboard_interrupt_and_leaves_the_backup_whole(tmp_path):
    backup_dir = tmp_path / "backup"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(backup_dir)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert child.stdout.readline().strip() == "training"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 3, (out, err)
    assert "KeyboardInterrupt" in out
    backup = backup_dir / "backup.ckpt"
    assert backup.exists() and not [p for p in backup_dir.iterdir() if p.name != "backup.ckpt"]
    model = strata.keras.Sequential([strata.keras.Input(shape=(64,)), layers.Dense(256, activation="relu"),
                                     layers.Dense(2, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.load_weights(str(backup))  # whole: its CRCs and sizes check out
    assert np.isfinite(model.predict(np.zeros((2, 64), np.float32))).all()
