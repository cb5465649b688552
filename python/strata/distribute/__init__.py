"""tf.distribute's names over Strata's C++ strategies: synchronous data parallelism where a replica
is a core (a pinned thread) and workers are MPI processes.

    strategy = strata.distribute.MirroredStrategy()        # one replica per usable core
    with strategy.scope():
        model = strata.keras.Sequential([...])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=32 * strategy.num_replicas_in_sync)

What differs from TensorFlow (docs/python.md, "strata.distribute"): a model's step is already
spread over every replica by the compiled C++ step, so ``strategy.run(step, args=(x, y))`` with
plain (global) arrays calls ``step`` once, and the model calls inside it split the batch over the
replicas as ``fit`` does; with PerReplica arguments (``experimental_distribute_dataset``,
``experimental_distribute_values_from_function``) ``fn`` runs once per replica on that replica's
own core, for work that is not a model step.
"""
import contextlib
import enum
import threading
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np

from .. import _strata
from . import cluster_resolver
from .cluster_resolver import ClusterResolver

_impl = _strata.distribute

__all__ = [
    "ClusterResolver", "DistributedDataset", "InputContext", "MirroredStrategy", "MultiWorkerMirroredStrategy",
    "OneDeviceStrategy", "PerReplica", "ReduceOp", "ReplicaContext", "Strategy", "cluster_resolver",
    "get_replica_context", "get_strategy", "has_strategy", "in_cross_replica_context",
]


class ReduceOp(enum.Enum):
    """How ``Strategy.reduce`` combines the replicas' values (tf.distribute.ReduceOp)."""

    SUM = "SUM"
    MEAN = "MEAN"


class PerReplica:
    """One value per local replica, in replica order (tf.distribute's PerReplica).

    ``values`` is the tuple; ``strategy.experimental_local_results(v)`` returns it too.
    """

    def __init__(self, values: Sequence[Any]):
        self.values = tuple(values)

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return "PerReplica({%s})" % ", ".join("%d: %r" % (i, v) for i, v in enumerate(self.values))


class ReplicaContext:
    """Where a per-replica function runs (tf.distribute.get_replica_context() inside strategy.run)."""

    def __init__(self, strategy: "Strategy", replica_id_in_sync_group: int):
        self.strategy = strategy
        self.replica_id_in_sync_group = replica_id_in_sync_group

    @property
    def num_replicas_in_sync(self) -> int:
        return self.strategy.num_replicas_in_sync


class InputContext:
    """What one input pipeline is (tf.distribute.InputContext), for value functions."""

    def __init__(self, num_input_pipelines: int = 1, input_pipeline_id: int = 0, num_replicas_in_sync: int = 1):
        self.num_input_pipelines = num_input_pipelines
        self.input_pipeline_id = input_pipeline_id
        self.num_replicas_in_sync = num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        """The global batch divided over every replica; a ValueError when it does not divide."""
        if self.num_replicas_in_sync < 1 or global_batch_size % self.num_replicas_in_sync != 0:
            raise ValueError("the global batch size %d is not divisible by num_replicas_in_sync %d"
                             % (global_batch_size, self.num_replicas_in_sync))
        return global_batch_size // self.num_replicas_in_sync


# Per thread: the strategies whose scope is open (innermost last) and, inside a per-replica
# function, its ReplicaContext.
_local = threading.local()


def _scopes() -> list:
    if not hasattr(_local, "scopes"):
        _local.scopes = []
    return _local.scopes


class Strategy:
    """The base of every strategy (tf.distribute.Strategy). Make one with MirroredStrategy(),
    OneDeviceStrategy() or MultiWorkerMirroredStrategy()."""

    def __init__(self, _cpp: "_strata.distribute.Strategy"):
        self._cpp = _cpp
        self._run_lock = threading.Lock()  # one per-replica run at a time (the C++ run is not reentrant)

    @property
    def num_replicas_in_sync(self) -> int:
        """Replicas in every worker together: the global batch is the per-replica batch times this."""
        return self._cpp.num_replicas_in_sync

    @property
    def num_local_replicas(self) -> int:
        """Replicas (pinned threads, one per core) in this process."""
        return self._cpp.num_local_replicas

    @property
    def num_workers(self) -> int:
        """MPI worker processes (1 outside an MPI launch)."""
        return self._cpp.num_workers

    @property
    def worker_index(self) -> int:
        """This process's rank among the workers (0: the chief)."""
        return self._cpp.worker_index

    def __repr__(self) -> str:
        return "<strata.distribute.%s: %d replicas in sync (%d local, %d workers)>" % (
            type(self).__name__, self.num_replicas_in_sync, self.num_local_replicas, self.num_workers)

    @contextlib.contextmanager
    def scope(self) -> Iterator["Strategy"]:
        """``with strategy.scope():`` models created and compiled inside use this strategy."""
        self._cpp._enter_scope()
        _scopes().append(self)
        try:
            yield self
        finally:
            _scopes().pop()
            self._cpp._exit_scope()

    def run(self, fn: Callable[..., Any], args: Tuple[Any, ...] = (), kwargs: Optional[dict] = None) -> Any:
        """Runs ``fn(*args, **kwargs)`` in this strategy (tf.distribute.Strategy.run).

        With no PerReplica among the arguments, ``fn`` runs once, on this thread, in the
        strategy's scope: a model step inside it (``model.compute_gradients``/``apply_gradients``,
        ``train_on_batch``) splits its global batch over every replica itself, as ``fit`` does,
        and its result is returned as is. With PerReplica arguments, ``fn`` runs once per local
        replica on that replica's own core, with that replica's values (other arguments are
        passed to every replica), and the results come back as a PerReplica; the first exception
        (lowest replica) is raised. A model step cannot run inside a per-replica function.
        """
        kwargs = dict(kwargs or {})
        per_replica = any(isinstance(a, PerReplica) for a in list(args) + list(kwargs.values()))
        if not per_replica:
            with self.scope():
                return fn(*args, **kwargs)
        n = self.num_local_replicas
        for name, a in list(enumerate(args)) + list(kwargs.items()):
            if isinstance(a, PerReplica) and len(a) != n:
                raise ValueError("strategy.run: argument %r has %d per-replica values for %d local replicas"
                                 % (name, len(a), n))

        def pick(a: Any, r: int) -> Any:
            return a.values[r] if isinstance(a, PerReplica) else a

        results: list = [None] * n
        errors: list = [None] * n
        first_replica = self.worker_index * n

        def replica_fn(r: int) -> None:
            _local.replica_context = ReplicaContext(self, first_replica + r)
            try:
                results[r] = fn(*[pick(a, r) for a in args], **{k: pick(v, r) for k, v in kwargs.items()})
            except BaseException as e:  # noqa: B902 -- re-raised below, on the caller's thread
                errors[r] = e
            finally:
                _local.replica_context = None

        with self._run_lock:
            self._cpp._run_per_replica(replica_fn)
        for e in errors:
            if e is not None:
                raise e
        return PerReplica(results)

    def reduce(self, reduce_op: Any, value: Any, axis: Optional[int] = None) -> Any:
        """Combines a PerReplica into one value (tf.distribute.Strategy.reduce).

        ``reduce_op``: ``"SUM"``, ``"MEAN"`` or a ReduceOp. With ``axis=None`` the replicas'
        values are summed (or averaged) element by element; with an axis, each replica's value
        is also reduced along it (MEAN: the mean over every row of every replica). Scalars are
        reduced over every worker (an all-reduce); arrays over this worker's replicas. A value
        that is not a PerReplica (what a model step returns) is already this worker's replicas'
        mean: MEAN returns it, averaged over the workers when there are several; SUM of it is a
        ValueError unless there is one replica (as in TensorFlow).
        """
        op = _reduce_op(reduce_op)
        if not isinstance(value, PerReplica):
            if op == "SUM" and self.num_replicas_in_sync > 1:
                raise ValueError("strategy.reduce: a value that is not a PerReplica (%r) cannot be reduced with SUM "
                                 "over %d replicas" % (value, self.num_replicas_in_sync))
            if self.num_workers == 1:
                return value
            if np.ndim(value) != 0:
                raise NotImplementedError("strategy.reduce: across workers only scalars are reduced")
            # A model step's value is this worker's (its replicas'): the mean over every worker.
            return self._cpp._reduce("MEAN", [float(value)] * self.num_local_replicas)
        vals = value.values
        if len(vals) != self.num_local_replicas:
            raise ValueError("strategy.reduce: %d per-replica values for %d local replicas"
                             % (len(vals), self.num_local_replicas))
        if axis is None and all(np.ndim(v) == 0 for v in vals):
            return self._cpp._reduce(op, [float(v) for v in vals])
        if self.num_workers > 1:
            raise NotImplementedError("strategy.reduce: arrays are reduced over one worker's replicas only; "
                                      "reduce scalars across workers")
        arrays = [np.asarray(v) for v in vals]
        if axis is None:
            shapes = {a.shape for a in arrays}
            if len(shapes) != 1:
                raise ValueError("strategy.reduce: the replicas' values have different shapes %s" % sorted(shapes))
            total = np.sum(np.stack(arrays), axis=0)
            return total / len(arrays) if op == "MEAN" else total
        joined = np.concatenate(arrays, axis=axis)
        return joined.mean(axis=axis) if op == "MEAN" else joined.sum(axis=axis)

    def gather(self, value: Any, axis: int) -> Any:
        """The replicas' arrays concatenated along ``axis`` (tf.distribute.Strategy.gather)."""
        if not isinstance(value, PerReplica):
            return value
        return np.concatenate([np.asarray(v) for v in value.values], axis=axis)

    def experimental_local_results(self, value: Any) -> Tuple[Any, ...]:
        """This worker's per-replica values as a tuple (one element for a non-PerReplica)."""
        return value.values if isinstance(value, PerReplica) else (value,)

    def experimental_distribute_values_from_function(self, value_fn: Callable[[ReplicaContext], Any]) -> PerReplica:
        """``value_fn(ctx)`` once per local replica (``ctx.replica_id_in_sync_group``), as a PerReplica."""
        first = self.worker_index * self.num_local_replicas
        return PerReplica([value_fn(ReplicaContext(self, first + r)) for r in range(self.num_local_replicas)])

    def experimental_distribute_dataset(self, dataset: Iterable[Any], options: Any = None) -> "DistributedDataset":
        """Splits every global batch of ``dataset`` over the replicas (tf's DATA auto-sharding).

        ``dataset``: a strata.data Dataset or any iterable of batches (arrays, tuples or dicts of
        arrays with the batch first), batched by the GLOBAL batch size, which must be a multiple of
        num_replicas_in_sync. Iterating yields PerReplica values of views (no copies), to pass to
        ``strategy.run``. One worker only: across workers, shard the files (Dataset.shard).
        """
        if options is not None:
            raise ValueError("experimental_distribute_dataset: options are not supported (pass None)")
        if self.num_workers > 1:
            raise NotImplementedError("experimental_distribute_dataset from Python runs in one worker: shard the "
                                      "input per worker (Dataset.shard(num_workers, worker_index))")
        return DistributedDataset(dataset, self.num_local_replicas)


class DistributedDataset:
    """Iterating yields one PerReplica per global batch (tf.distribute.DistributedDataset)."""

    def __init__(self, dataset: Iterable[Any], replicas: int):
        self._dataset = dataset
        self._replicas = replicas

    def __iter__(self) -> Iterator[PerReplica]:
        for element in self._dataset:
            yield _split_batch(element, self._replicas)


def _rows(element: Any) -> int:
    if isinstance(element, dict):
        return _rows(next(iter(element.values())))
    if isinstance(element, (tuple, list)):
        return _rows(element[0])
    return int(np.shape(element)[0])


def _slice(element: Any, begin: int, end: int) -> Any:
    if isinstance(element, dict):
        return {k: _slice(v, begin, end) for k, v in element.items()}
    if isinstance(element, tuple):
        return tuple(_slice(v, begin, end) for v in element)
    if isinstance(element, list):
        return [_slice(v, begin, end) for v in element]
    return element[begin:end]


def _split_batch(element: Any, replicas: int) -> PerReplica:
    rows = _rows(element)
    if rows % replicas != 0:
        raise ValueError("distributed dataset: a global batch of %d rows does not split over %d replicas; batch with "
                         "a multiple of num_replicas_in_sync and drop_remainder" % (rows, replicas))
    per = rows // replicas
    return PerReplica([_slice(element, r * per, (r + 1) * per) for r in range(replicas)])


def _reduce_op(op: Any) -> str:
    if isinstance(op, ReduceOp):
        return op.value
    if isinstance(op, str) and op.upper() in ("SUM", "MEAN"):
        return op.upper()
    raise ValueError('reduce_op must be "SUM", "MEAN" or a strata.distribute.ReduceOp, got %r' % (op,))


_CPU_DEVICE_PREFIXES = ("/cpu:", "cpu:", "/device:cpu:", "/job:localhost/replica:0/task:0/device:cpu:")


def _replicas_of_devices(devices: Sequence[str]) -> int:
    if isinstance(devices, str) or not devices:
        raise ValueError("devices must be a non-empty list of CPU device names such as ['/cpu:0', '/cpu:1'], got %r"
                         % (devices,))
    for d in devices:
        if not isinstance(d, str) or not d.lower().startswith(_CPU_DEVICE_PREFIXES):
            raise ValueError("devices: %r is not a CPU device name ('/cpu:N'): a Strata replica is a core" % (d,))
    return len(devices)


class MirroredStrategy(Strategy):
    """Synchronous replicas on this host's cores (tf.distribute.MirroredStrategy).

    ``devices``: TensorFlow's device list; its length is the number of replicas (names must be
    CPU devices, ``"/cpu:N"``). ``replicas``: the same as a number. Neither: one replica per
    usable core (CPU affinity and cgroup quota honoured). Replica r is pinned to the r-th usable
    core; replicas beyond the core count share cores (fine for tests, slow for training).
    """

    def __init__(self, devices: Optional[Sequence[str]] = None, *, replicas: Optional[int] = None):
        if devices is not None and replicas is not None:
            raise ValueError("MirroredStrategy: pass devices or replicas, not both")
        n = _replicas_of_devices(devices) if devices is not None else (0 if replicas is None else int(replicas))
        if replicas is not None and n < 1:
            raise ValueError("MirroredStrategy: replicas must be >= 1, got %r" % (replicas,))
        super().__init__(_impl.MirroredStrategy(n))


class OneDeviceStrategy(Strategy):
    """One replica (tf.distribute.OneDeviceStrategy): ``device`` must be a CPU, ``"/cpu:0"``."""

    def __init__(self, device: str = "/cpu:0"):
        _replicas_of_devices([device])
        super().__init__(_impl.OneDeviceStrategy())


class MultiWorkerMirroredStrategy(Strategy):
    """Mirrored replicas in every worker of an MPI job (tf.distribute.MultiWorkerMirroredStrategy).

    ``cluster_resolver``: a ClusterResolver (connected or not); None reads the launch
    environment (mpirun / srun / STRATA_CLUSTER). Outside an MPI launch it is a MirroredStrategy
    with one worker. ``replicas_per_worker``: None or 0 for one per usable core.
    """

    def __init__(self, cluster_resolver: Optional[ClusterResolver] = None, *,
                 replicas_per_worker: Optional[int] = None):
        if cluster_resolver is not None and replicas_per_worker is not None:
            raise ValueError("MultiWorkerMirroredStrategy: replicas_per_worker is the resolver's (ClusterResolver("
                             "replicas=...)) when a resolver is given")
        resolver = cluster_resolver._cpp if cluster_resolver is not None else None
        super().__init__(_impl.MultiWorkerMirroredStrategy(resolver, int(replicas_per_worker or 0)))


_default_strategy: Optional[Strategy] = None
_default_lock = threading.Lock()


def has_strategy() -> bool:
    """Whether a ``with strategy.scope():`` block is open on this thread."""
    return bool(_scopes())


def get_strategy() -> Strategy:
    """The strategy of the innermost open scope on this thread, else the default strategy (one
    replica, as tf.distribute.get_strategy())."""
    scopes = _scopes()
    if scopes:
        return scopes[-1]
    global _default_strategy
    with _default_lock:
        if _default_strategy is None:
            _default_strategy = OneDeviceStrategy()
        return _default_strategy


def in_cross_replica_context() -> bool:
    """False inside a per-replica function of ``strategy.run``, True elsewhere."""
    return getattr(_local, "replica_context", None) is None


def get_replica_context() -> Optional[ReplicaContext]:
    """Inside a per-replica function: its ReplicaContext. Elsewhere: None when a scope is open (the
    cross-replica context), else the default strategy's one replica."""
    ctx = getattr(_local, "replica_context", None)
    if ctx is not None:
        return ctx
    if has_strategy():
        return None
    return ReplicaContext(get_strategy(), 0)
