"""strata.monitor: the utilization / idle monitor and its live page, as `strata train --monitor-port`
runs them (docs/monitor.md).

fit starts one itself with ``model.fit(..., monitor_port=8080)``; a Monitor object gives the
same to a custom loop, or more options to fit::

    mon = strata.monitor.Monitor(port=0, interval_seconds=2)    # 0: any free port
    mon.start(replicas=strategy.num_replicas_in_sync)
    for x, y in batches:
        mon.step_begin(); ...; mon.step_end(matrix_flops=f, examples=len(x))
    print(mon.url)                  # http://127.0.0.1:PORT/ : the page, /metrics, /api/v1/monitor
    mon.stop()

The page serves GET / (gauges and charts), /metrics (Prometheus text) and /api/v1/monitor
(JSON) while the monitor runs; it binds 127.0.0.1 unless told otherwise.
"""
from typing import Optional

from . import _strata

__all__ = ["Monitor"]


class Monitor:
    """The monitor of one run: a console line, TensorBoard scalars, a Chrome trace, the live page.

    ``port``: serve the live page there (0: any free port, read ``url``; None: no page).
    ``interval_seconds``: one window (console line, scalars, chart point) per interval.
    ``console``: print "matrix 61% · idle 3% · 1,840 img/s · step 69 ms" lines on stderr.
    ``tensorboard_dir``, ``trace_path``, ``report_json``: where to write the monitor/* scalars,
    the Chrome trace and the post-run input-pipeline report (None: nowhere).
    ``bind``: the page's address ("0.0.0.0" exposes it to the network).
    """

    def __init__(self, port: Optional[int] = None, interval_seconds: float = 10.0, console: bool = True,
                 tensorboard_dir: Optional[str] = None, trace_path: Optional[str] = None,
                 report_json: Optional[str] = None, bind: str = "127.0.0.1"):
        if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
            raise TypeError("port must be an int or None, got %r" % (port,))
        self._cpp = _strata.monitor.FitMonitor(float(interval_seconds), bool(console), tensorboard_dir or "",
                                               trace_path or "", -1 if port is None else port, bind,
                                               report_json or "")

    @property
    def url(self) -> str:
        """The live page's address ("http://127.0.0.1:8080/") once started; "" without a port."""
        return self._cpp.url

    @property
    def running(self) -> bool:
        """Between start() (or fit's first step) and stop() (or fit's end)."""
        return self._cpp.running

    def start(self, replicas: int = 1, bf16: bool = False, initial_step: int = 0) -> "Monitor":
        """Starts the first window and the page (fit calls this once its step is compiled).

        ``replicas``: the threads that will report steps (indices 0..replicas-1); ``bf16``: the
        steps run mixed_bfloat16 (the utilization divides by the bf16 peak); ``initial_step``:
        the global step of the first step (a resumed run's).
        """
        self._cpp.start(int(replicas), bool(bf16), int(initial_step))
        return self

    def stop(self) -> None:
        """Closes the last window, writes report_json and stops the page. Idempotent."""
        self._cpp.stop()

    def step_begin(self, replica: int = 0) -> None:
        """Replica ``replica`` starts a step (ignored unless running)."""
        self._cpp.step_begin(replica)

    def step_end(self, replica: int = 0, matrix_flops: float = 0.0, examples: int = 0,
                 executed_flops: float | None = None) -> None:
        """Replica ``replica`` ended a step that ran ``matrix_flops`` FLOPs of matrix kernels on
        ``examples`` examples (ignored unless running). ``executed_flops``: what the kernels
        executed of them where that is fewer (a Winograd convolution); the calibrated peak is
        corrected when a window's executed rate beats it. Default: ``matrix_flops``."""
        self._cpp.step_end(replica, float(matrix_flops), int(examples),
                           -1.0 if executed_flops is None else float(executed_flops))

    def input_wait_begin(self, replica: int = 0) -> None:
        """Replica ``replica`` starts waiting for input (its idle time)."""
        self._cpp.input_wait_begin(replica)

    def input_wait_end(self, replica: int = 0) -> None:
        self._cpp.input_wait_end(replica)

    def pause(self) -> None:
        """No training step runs until resume() (validation): the open window closes now."""
        self._cpp.pause()

    def resume(self) -> None:
        self._cpp.resume()

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
