"""strata.devices() describes this host as `strata devices --json` does (same cores, ISA, memory,
calibrated peak), and strata.monitor serves the live page of a run as `strata train
--monitor-port` does: a custom loop's steps reach /api/v1/monitor, /metrics and the report."""
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import strata


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh calibration cache shared by this process and the `strata` command."""
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_devices_equal_what_strata_devices_prints(strata_cli, cache_dir):
    [measured] = strata.devices()  # no cache yet: measured now, then cached
    assert not measured.peak_from_cache
    # A doubtful figure (a core shared with another test) would be measured again at the next
    # start; this test is about the command and Python reading one cache, so it is made clean.
    [path] = cache_dir.glob("peak-flops-*.json")
    cached_file = json.loads(path.read_text())
    assert cached_file["provisional"] == measured.peak_provisional
    cached_file["provisional"] = False
    path.write_text(json.dumps(cached_file))
    out = subprocess.run([strata_cli, "devices", "--json"], check=True, capture_output=True, text=True,
                         env=dict(os.environ), timeout=120).stdout
    cli = json.loads(out)
    [cached] = strata.devices()
    assert cached.peak_from_cache and cli["peak_from_cache"]
    for d in (measured, cached):
        assert d.hostname == cli["hostname"] and d.cpu_model == cli["cpu_model"]
        assert d.cores == cli["cores"] and d.cpu_ids == cli["cpu_ids"] and d.replicas == cli["replicas"]
        assert d.isa == cli["isa"] and d.memory_bytes == cli["memory_bytes"]
        assert d.precisions == cli["precisions"]
        assert d.f32_kernel == cli["peak_kernels"]["f32"] and d.bf16_kernel == cli["peak_kernels"]["bf16"]
    # The command read the figure this process measured and cached: the same numbers.
    assert cached.peak_f32_gflops_per_core == pytest.approx(cli["peak_gflops_f32_per_core"], rel=1e-9)
    assert cached.peak_bf16_gflops_per_core == pytest.approx(cli["peak_gflops_bf16_per_core"], rel=1e-9)
    assert cached.peak_f32_gflops_per_core == pytest.approx(measured.peak_f32_gflops_per_core, rel=1e-9)
    assert measured.peak_f32_gflops_per_core > 0 and measured.cores >= 1 and measured.replicas == measured.cores
    assert "f32" in measured.precisions and measured.device_type == "CPU"


def test_recalibrate_measures_again(cache_dir):
    strata.devices()
    [again] = strata.devices(recalibrate=True)
    assert not again.peak_from_cache and again.peak_f32_gflops_per_core > 0


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def test_a_custom_loop_under_the_monitor_serves_its_steps(tmp_path, cache_dir):
    report = tmp_path / "report.json"
    mon = strata.monitor.Monitor(port=0, interval_seconds=0.2, console=False, report_json=str(report))
    assert mon.url == "" and not mon.running
    mon.step_begin(0)  # before start: ignored, not a crash
    mon.step_end(0, 1e9, 16)
    mon.start(replicas=2, initial_step=100)
    assert mon.running and mon.url.startswith("http://127.0.0.1:")
    with pytest.raises(ValueError, match="already running"):
        mon.start(replicas=2)
    status, _, body = get(mon.url + "api/v1/monitor")
    api = json.loads(body)
    assert status == 200 and api["running"] and api["run"]["replicas"] == 2
    for _ in range(5):
        for r in range(2):
            mon.input_wait_begin(r)
            mon.input_wait_end(r)
            mon.step_begin(r)
            time.sleep(0.01)
            mon.step_end(r, matrix_flops=1e9, examples=16)
    # The windows close every 0.2 s on the monitor's thread: wait (60 s at most) for the one
    # that holds the last step.
    deadline = time.monotonic() + 60
    while True:
        latest = json.loads(get(mon.url + "api/v1/monitor")[2])["latest"]
        if latest is not None and latest["step"] == 105:
            break
        assert time.monotonic() < deadline, "no window reached step 105: %r" % (latest,)
        time.sleep(0.05)
    status, ctype, metrics = get(mon.url + "metrics")
    assert status == 200 and "text/plain" in ctype
    assert "strata_monitor_replicas 2" in metrics and "strata_monitor_running 1" in metrics
    url = mon.url
    mon.stop()
    mon.stop()  # idempotent
    assert not mon.running and mon.url == url
    rep = json.loads(report.read_text())
    assert rep["steps"] == 5 and rep["examples"] == 5 * 2 * 16 and rep["replicas"] == 2
    with pytest.raises(urllib.error.URLError):  # the page ends with the run
        get(url + "metrics", timeout=5)
    mon.step_end(0, 1e9, 16)  # after stop: ignored


def test_monitor_arguments_are_checked():
    with pytest.raises(ValueError, match="port"):
        strata.monitor.Monitor(port=70000)
    with pytest.raises(TypeError, match="port"):
        strata.monitor.Monitor(port="8080")
    with pytest.raises(ValueError, match="interval_seconds"):
        strata.monitor.Monitor(interval_seconds=0)
    with pytest.raises(ValueError, match="replicas"):
        strata.monitor.Monitor(console=False).start(replicas=0)


def test_a_bad_tensorboard_dir_is_a_file_error_at_start(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    mon = strata.monitor.Monitor(console=False, tensorboard_dir=str(blocker / "logs"))
    with pytest.raises(strata.errors.StrataError):
        mon.start()
    assert not mon.running


def test_fit_serves_the_monitor_page_while_it_trains(capfd, cache_dir):
    """fit(monitor_port=0) starts the page as `strata train --monitor-port 0` does (the address on
    stderr); a callback reads it while fit is between epochs."""
    seen = []

    class Probe(strata.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            url = re.search(r"monitor: (http://\S+)", capfd.readouterr().err).group(1)
            seen.append(json.loads(get(url + "api/v1/monitor")[2]))

    model = strata.keras.Sequential([strata.keras.Input(shape=(4,)), strata.keras.layers.Dense(3)])
    model.compile(optimizer="sgd", loss=strata.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.zeros((32, 4), np.float32)
    y = np.zeros((32,), np.int64)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, monitor_port=0, callbacks=[Probe()])
    assert len(seen) == 1 and seen[0]["running"] and seen[0]["run"]["replicas"] == 1
