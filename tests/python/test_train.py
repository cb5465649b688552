"""strata.train(...) and strata.presets: the library's training recipe from Python.

The promise: the same seed and flags give the same weights from `strata train` and from
strata.train(...), bit for bit, for the default job's recipe and for the flowers preset with its
two-phase fine-tune; every flag of `strata train` is a keyword of the recipe and the other way
round; a preset's pieces (its schedule, dataset and model) are the ones the recipe trains with,
the schedule checked against the Kaggle notebooks' formula written out here."""
import re
import struct
import subprocess

import numpy as np
import pytest

import strata
from conftest import SOURCE_DIR

CIFAR = str(SOURCE_DIR / "testdata" / "real" / "tfx_cifar10_test.tfrecord")  # written by TensorFlow (TFX)


def records(path):
    """The records of a TFRecord file (length, masked CRCs skipped: the reader checks them)."""
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        out.append(data[pos + 12:pos + 12 + n])
        pos += 12 + n + 4
    return out


def weights_and_slots(path):
    """A checkpoint's parameters and optimizer slots (records 2 and 3; the header holds times)."""
    r = records(path)
    assert len(r) == 4, f"{path}: {len(r)} records"
    return r[1], r[2]


# Each case: the flags of `strata train` and the same run as strata.train keywords.
CASES = {
    "default-recipe": (["--data", CIFAR, "--val", CIFAR, "--image-size", "32", "--epochs", "2", "--steps-per-epoch", "3",
                        "--validation-steps", "2", "--batch-per-replica", "8", "--seed", "7", "--deterministic"],
                       dict(data=CIFAR, val=CIFAR, image_size=32, epochs=2, steps_per_epoch=3, validation_steps=2,
                            batch_per_replica=8, seed=7, deterministic=True)),
    "flowers-fine-tune": (["--preset", "flowers", "--model", "flowers-cnn", "--data", CIFAR, "--label-key", "label",
                           "--image-size", "32", "--classes", "10", "--epochs", "2", "--steps-per-epoch", "2",
                           "--batch-per-replica", "4", "--freeze-until", "re_lu_1", "--freeze-backbone-epochs", "1",
                           "--seed", "3", "--deterministic"],
                          dict(preset="flowers", model="flowers-cnn", data=CIFAR, label_key="label", image_size=32,
                               classes=10, epochs=2, steps_per_epoch=2, batch_per_replica=4, freeze_until="re_lu_1",
                               freeze_backbone_epochs=1, seed=3, deterministic=True)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_strata_train_and_strata_train_from_python_give_the_same_weights_bit_for_bit(case, strata_cli, tmp_path):
    flags, keywords = CASES[case]
    cli_out, py_out = tmp_path / "cli.ckpt", tmp_path / "py.ckpt"
    run = subprocess.run([strata_cli, "train", *flags, "--no-monitor", "--out", str(cli_out)], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    result = strata.train(**keywords, monitor=False, verbose=0, out=str(py_out))
    assert result.model_path == str(py_out)
    assert result.steps_per_epoch == int(flags[flags.index("--steps-per-epoch") + 1])
    assert len(result.history["loss"]) == int(flags[flags.index("--epochs") + 1])
    cli_weights, cli_slots = weights_and_slots(cli_out)
    py_weights, py_slots = weights_and_slots(py_out)
    assert len(py_weights) > 1000
    assert py_weights == cli_weights, "the weights differ"
    assert py_slots == cli_slots, "the optimizer slots differ"
    # A different seed trains to other weights: the comparison can fail.
    other = strata.train(**dict(keywords, seed=keywords["seed"] + 1), monitor=False, verbose=0,
                         out=str(tmp_path / "other.ckpt"))
    assert weights_and_slots(tmp_path / "other.ckpt")[0] != cli_weights
    assert other.replicas == result.replicas


def test_every_flag_of_strata_train_is_a_recipe_keyword_and_back(strata_cli):
    help_text = subprocess.run([strata_cli, "train", "--help"], capture_output=True, text=True, check=True).stdout
    flags = set(re.findall(r"^\s+--([a-z0-9-]+)", help_text, re.M))
    assert {"data", "epochs", "freeze-backbone-epochs"} <= flags, help_text
    command_only = {"summary-json": "the command's report file", "no-monitor": "the recipe's monitor=False"}
    keywords = {f.replace("-", "_") for f in flags - set(command_only)}
    fields = set(strata.presets.Recipe.fields())
    python_only = {"monitor": "--no-monitor", "metrics": "the preset's metrics (the command has no flag)",
                   "verbose": "the command prints as a terminal or log wants",
                   "default_data": "the preset's", "resize_spec_file": "the preset's", "val_split": "the preset's"}
    assert keywords - fields == set(), "flags without a recipe field"
    assert fields - keywords - set(python_only) == set(), "recipe fields without a flag"


def test_a_wrong_keyword_or_value_is_named():
    with pytest.raises(TypeError, match="unexpected keyword argument.*epoch\\b"):
        strata.train(epoch=3)
    with pytest.raises(strata.errors.InvalidArgumentError, match="--schedule must be cosine, constant or rampup"):
        strata.train(schedule="linear", verbose=0)
    with pytest.raises(strata.errors.InvalidArgumentError, match="--preset must be fashion_mnist or flowers"):
        strata.presets.recipe("imagenet")


def notebook_lr(epoch, start=1e-4, peak=5e-4, low=1e-5, rampup=3, sustain=2, decay=0.8, replicas=1):
    """The Kaggle "Flower Classification with TPUs" notebooks' lrfn(epoch), as published there,
    with this preset's from-scratch values (docs/flowers.md)."""
    peak *= replicas
    if epoch < rampup:
        return (peak - start) / rampup * epoch + start
    if epoch < rampup + sustain:
        return peak
    return (peak - low) * decay ** (epoch - rampup - sustain) + low


def test_the_flowers_presets_pieces():
    r = strata.presets.flowers.recipe(model="efficientnet_b0")
    assert (r.preset, r.model, r.image_size, r.classes, r.label_key, r.optimizer, r.schedule) == \
        ("flowers", "efficientnet_b0", 192, 104, "class", "adam", "rampup")
    assert list(r.metrics) == ["accuracy", "f1_macro"]

    steps = 5
    schedule = strata.presets.flowers.schedule(steps_per_epoch=steps, replicas=2)
    for epoch in range(9):
        assert schedule(epoch * steps + 1) == pytest.approx(notebook_lr(epoch, replicas=2), rel=1e-12), epoch
    assert "ramp" in schedule.description

    model = strata.presets.flowers.model(model="flowers-cnn", image_size=64, channels=3)
    assert model.input_shape == (None, 64, 64, 3) and model.output_shape == (None, 104)

    # Its pipeline on TensorFlow-written records (CIFAR-10 PNGs, `label`), and its schedule driving
    # a Keras-style compile/fit of its model: the pieces fit together.
    ds = strata.presets.flowers.dataset(CIFAR, replicas=1, label_key="label", image_size=32, batch_per_replica=4)
    images, labels = next(iter(ds))
    assert images.shape == (4, 32, 32, 3) and images.dtype == np.float32 and labels.shape == (4,)
    small = strata.presets.flowers.model(model="flowers-cnn", image_size=32, channels=3, classes=10)
    small.compile(optimizer=strata.keras.optimizers.Adam(strata.presets.flowers.schedule(steps_per_epoch=2, replicas=1)),
                  loss="sparse_categorical_crossentropy")
    history = small.fit(ds.take(2), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_the_default_recipes_pieces():
    r = strata.presets.fashion_mnist.recipe()
    assert (r.preset, r.model, r.optimizer, r.schedule, r.lr, r.batch_per_replica, r.epochs) == \
        ("", "reference-cnn", "sgd", "cosine", 0.05, 128, 15)
    assert (r.label_smoothing, r.flip, r.pad_crop) == (0.1, 0.5, 0)
    # bf16 where this CPU runs it natively (bf16 trains here and the ISA has AVX512_BF16 or AMX-BF16,
    # as strata.devices() reports them), f32 elsewhere.
    [host] = strata.devices()
    native = "bf16" in host.precisions and bool({"AVX512_BF16", "AMX-BF16"} & set(host.isa))
    assert r.precision == ("bf16" if native else "f32")
    model = strata.presets.fashion_mnist.model(data=CIFAR, image_size=32)  # channels from the records: RGB
    assert model.input_shape == (None, 32, 32, 3) and model.output_shape == (None, 10)
    # Warm-up to lr x global batch / 128 over half an epoch, then cosine decay to 0.
    schedule = strata.presets.fashion_mnist.schedule(steps_per_epoch=10, replicas=2, epochs=1)
    assert schedule(5) == pytest.approx(0.05 * 256 / 128, rel=1e-12)
    assert schedule(10) == pytest.approx(0.0, abs=1e-12)
