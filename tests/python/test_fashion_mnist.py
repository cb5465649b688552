"""The default Fashion-MNIST job from Python (numpy arrays read from Debian's IDX files) reaches
the accuracy `strata train` reaches with the same model, seed, optimizer, schedule and budget.

"The same" here: both runs start from identical weights (same seed, same layer names) and take
the same 150 steps of 32 images with the same SGD-Nesterov cosine schedule over the same 60,000
training images, scaled to [0, 1] the same way; only the order in which the examples are drawn
differs (strata train shuffles the decoded TFRecords with its pipeline's seed, fit shuffles the
arrays with its own), and with dropout that changes the trajectory. The figure compared is the
epoch's training accuracy (the mean over its 4,800 examples, which both report the same way).
Measured on this budget, order alone moves it by up to 2 points (strata train 66.7 / 67.3 % with
two seeds, fit 65.4 - 66.2 % with three), so the two must agree within 4 points, and both must
have learnt (chance is 10 %). The budget keeps the test to seconds of CPU: the batch-norm moving
statistics have not settled after 150 steps, so a test-set accuracy would say little here."""
import json
import subprocess

import numpy as np

import strata
from strata.keras import layers

STEPS, BATCH, SEED = 150, 32, 42
LR, WEIGHT_DECAY, WARMUP_EPOCHS = 0.05, 5e-4, 0.5  # strata train's defaults (--lr is per 128 examples)


def reference_cnn():
    """models/reference-cnn.json, written with strata.keras."""
    conv = lambda filters: [layers.Conv2D(filters, 3, padding="same", use_bias=False), layers.BatchNormalization(),
                            layers.ReLU()]
    return strata.keras.Sequential(
        [strata.keras.Input(shape=(28, 28, 1))] + conv(32) + conv(32) + [layers.MaxPooling2D(2)] + conv(64) + conv(64) +
        [layers.MaxPooling2D(2), layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dropout(0.3),
         layers.Dense(10)], name="reference_cnn")


def test_fit_from_numpy_reaches_strata_trains_accuracy(strata_cli, tmp_path):
    # strata train on the TFRecords `strata make-records` writes from the same IDX files.
    subprocess.run([strata_cli, "make-records", "--from", "fashion-mnist", "--out", str(tmp_path)], check=True,
                   capture_output=True)
    records = tmp_path / "fashion_mnist" / "3.0.1"
    summary = tmp_path / "summary.json"
    subprocess.run([strata_cli, "train", "--data", str(records / "fashion_mnist-train.tfrecord-*"), "--epochs", "1",
                    "--steps-per-epoch", str(STEPS), "--replicas", "1", "--batch-per-replica", str(BATCH),
                    "--seed", str(SEED), "--no-monitor", "--summary-json", str(summary),
                    "--out", str(tmp_path / "cli.ckpt")], check=True, capture_output=True)
    cli_accuracy = json.loads(summary.read_text())["history"]["accuracy"][-1]

    (x_train, y_train), (_, y_test) = strata.keras.datasets.fashion_mnist.load_data()
    assert x_train.shape == (60000, 28, 28) and y_test.shape == (10000,)
    x_train = (x_train.astype(np.float32) / 255.0)[..., None]

    model = reference_cnn()
    warmup = round(WARMUP_EPOCHS * STEPS)
    schedule = strata.keras.optimizers.schedules.CosineDecay(
        0.0, decay_steps=STEPS - warmup, alpha=0.0, warmup_target=LR * BATCH / 128, warmup_steps=warmup)
    model.compile(optimizer=strata.keras.optimizers.SGD(schedule, momentum=0.9, nesterov=True, weight_decay=WEIGHT_DECAY),
                  loss=strata.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  seed=SEED)
    history = model.fit(x_train, y_train, batch_size=BATCH, epochs=1, steps_per_epoch=STEPS, verbose=0, seed=SEED)
    accuracy = history.history["accuracy"][-1]

    assert cli_accuracy > 0.5 and accuracy > 0.5, (cli_accuracy, accuracy)
    assert abs(accuracy - cli_accuracy) < 0.04, (cli_accuracy, accuracy)
