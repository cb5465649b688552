"""strata.distribute: tf.distribute's names over the C++ strategies. A custom training loop under
strategy.run takes exactly the step fit and train_on_batch take (same weights, bit for bit), also
over two MPI workers;
per-replica functions run on every replica's own thread; reduce, the distributed dataset and
the cluster resolver behave as TensorFlow's, and misuse raises the right exception."""
import json
import os
import pathlib
import subprocess
import threading

import numpy as np
import pytest

import strata
from strata import distribute, keras


def test_mirrored_strategy_replicas():
    assert distribute.MirroredStrategy(replicas=2).num_replicas_in_sync == 2
    s = distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1", "/device:CPU:2"])
    assert s.num_replicas_in_sync == 3 and s.num_local_replicas == 3 and s.num_workers == 1 and s.worker_index == 0
    [host] = strata.devices()
    assert distribute.MirroredStrategy().num_replicas_in_sync == host.cores  # one replica per usable core
    assert distribute.OneDeviceStrategy().num_replicas_in_sync == 1
    with pytest.raises(ValueError, match="GPU:0.*not a CPU"):
        distribute.MirroredStrategy(devices=["/GPU:0"])
    with pytest.raises(ValueError, match="not both"):
        distribute.MirroredStrategy(devices=["/cpu:0"], replicas=1)
    with pytest.raises(ValueError, match="replicas must be >= 1"):
        distribute.MirroredStrategy(replicas=0)


def test_scopes_nest_per_thread():
    a, b = distribute.MirroredStrategy(replicas=2), distribute.OneDeviceStrategy()
    assert not distribute.has_strategy()
    assert distribute.get_strategy().num_replicas_in_sync == 1  # the default strategy
    with a.scope() as entered:
        assert entered is a and distribute.get_strategy() is a and a._cpp._is_current()
        with b.scope():
            assert distribute.get_strategy() is b and b._cpp._is_current()
            seen = []
            t = threading.Thread(target=lambda: seen.append(distribute.has_strategy()))
            t.start()
            t.join()
            assert seen == [False]  # a scope belongs to the thread that opened it
        assert distribute.get_strategy() is a and a._cpp._is_current()
        assert distribute.get_replica_context() is None  # cross-replica context
    assert not distribute.has_strategy() and not a._cpp._is_current()
    with pytest.raises(ValueError, match="reverse order"):
        a._cpp._exit_scope()


def test_a_model_keeps_the_strategy_of_the_scope_it_was_compiled_in():
    """`with MirroredStrategy().scope():` leaves no other reference to the strategy: the model
    holds it (before, the strategy was freed with the block and the next step crashed or hung)."""
    import gc
    for replicas in (1, 2):
        with distribute.MirroredStrategy(replicas=replicas).scope():
            model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3)])
            model.compile(optimizer="sgd", loss="mse", seed=1)
        gc.collect()
        x, y = np.ones((4, 4), np.float32), np.zeros((4, 3), np.float32)
        assert model.predict(x, verbose=0).shape == (4, 3)
        assert np.isfinite(model.compute_gradients(x, y))


def test_per_replica_functions_run_on_each_replicas_thread():
    s = distribute.MirroredStrategy(replicas=3)
    ids = s.experimental_distribute_values_from_function(lambda ctx: ctx.replica_id_in_sync_group)
    assert ids.values == (0, 1, 2)

    def fn(i, scale):
        ctx = distribute.get_replica_context()
        assert not distribute.in_cross_replica_context()
        return ctx.replica_id_in_sync_group, i * scale, threading.get_ident(), ctx.num_replicas_in_sync

    out = s.run(fn, args=(ids,), kwargs={"scale": 10})
    assert isinstance(out, distribute.PerReplica) and len(out) == 3
    assert [o[:2] for o in out.values] == [(0, 0), (1, 10), (2, 20)]
    threads = {o[2] for o in out.values}
    assert len(threads) == 3 and threading.get_ident() not in threads
    assert {o[3] for o in out.values} == {3}
    assert distribute.in_cross_replica_context()
    assert s.experimental_local_results(out) == out.values


def test_an_exception_in_a_replica_reaches_the_caller():
    s = distribute.MirroredStrategy(replicas=2)

    def fn(i):
        if i == 1:
            raise KeyError("replica one")
        return i

    with pytest.raises(KeyError, match="replica one"):
        s.run(fn, args=(s.experimental_distribute_values_from_function(lambda c: c.replica_id_in_sync_group),))
    with pytest.raises(ValueError, match="3 per-replica values for 2 local replicas"):
        s.run(fn, args=(distribute.PerReplica([0, 1, 2]),))
    # The strategy still works afterwards.
    assert s.run(lambda i: i + 1, args=(distribute.PerReplica([1, 2]),)).values == (2, 3)


def test_running_the_strategy_inside_its_own_replica_is_an_error_not_a_deadlock():
    s = distribute.MirroredStrategy(replicas=2)
    with pytest.raises(strata.errors.InvalidArgumentError, match="inside one of .*own replicas"):
        s.run(lambda _: s._cpp._run_per_replica(lambda r: None), args=(distribute.PerReplica([0, 1]),))
    other = distribute.MirroredStrategy(replicas=2)  # another strategy's run is fine inside a replica
    done = s.run(lambda _: other._cpp._run_per_replica(lambda r: None), args=(distribute.PerReplica([0, 1]),))
    assert done.values == (None, None)



def test_threads_calling_one_strategy_at_once_take_turns():
    """The C++ Strategy::run serves one caller at a time: callers from several threads queue
    (before, two at once shared its one job slot: a hang or a crash)."""
    s = distribute.MirroredStrategy(replicas=2)
    calls = []

    def caller():
        for _ in range(20):
            s._cpp._run_per_replica(calls.append)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert sorted(calls) == [0] * 80 + [1] * 80

def test_reduce_as_tensorflow():
    s = distribute.MirroredStrategy(replicas=2)
    v = distribute.PerReplica([1.5, 2.5])
    assert s.reduce("SUM", v, axis=None) == 4.0
    assert s.reduce(distribute.ReduceOp.MEAN, v, axis=None) == 2.0
    a = distribute.PerReplica([np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((3, 2), np.float32)])
    np.testing.assert_array_equal(s.reduce("SUM", a), a.values[0] + a.values[1])
    both = np.concatenate(a.values)
    np.testing.assert_allclose(s.reduce("MEAN", a, axis=0), both.mean(axis=0))
    np.testing.assert_allclose(s.reduce("SUM", a, axis=0), both.sum(axis=0))
    np.testing.assert_array_equal(s.gather(a, axis=0), both)
    assert s.reduce("MEAN", 3.25) == 3.25  # a value the whole step computed
    with pytest.raises(ValueError, match="cannot be reduced with SUM"):
        s.reduce("SUM", 3.25)
    with pytest.raises(ValueError, match="reduce_op"):
        s.reduce("MAX", v)
    with pytest.raises(ValueError, match="different shapes"):
        s.reduce("SUM", distribute.PerReplica([np.ones(2), np.ones(3)]))


def test_a_distributed_dataset_splits_global_batches_into_views():
    s = distribute.MirroredStrategy(replicas=2)
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    y = np.arange(8, dtype=np.int64)
    batches = [(x[:4], y[:4]), (x[4:], y[4:])]
    steps = list(s.experimental_distribute_dataset(batches))
    assert len(steps) == 2
    for (gx, gy), per_replica in zip(batches, steps):
        (x0, y0), (x1, y1) = per_replica.values
        np.testing.assert_array_equal(np.concatenate([x0, x1]), gx)
        np.testing.assert_array_equal(np.concatenate([y0, y1]), gy)
        assert np.shares_memory(x0, gx) and np.shares_memory(x1, gx)  # views, not copies
    ds = strata.data.Dataset.from_tensor_slices({"x": x, "y": y}).batch(4)
    per_replica = next(iter(s.experimental_distribute_dataset(ds)))
    np.testing.assert_array_equal(per_replica.values[1]["x"], x[2:4])
    np.testing.assert_array_equal(s.run(lambda e: e["y"].sum(), args=(per_replica,)).values, [1, 5])
    with pytest.raises(ValueError, match="3 rows does not split over 2 replicas"):
        list(s.experimental_distribute_dataset([x[:3]]))


def test_cluster_resolver_alone_is_this_host():
    r = distribute.cluster_resolver.ClusterResolver(environment={})
    assert r is not None and distribute.ClusterResolver is distribute.cluster_resolver.ClusterResolver
    assert r.environment == "local" and r.num_workers == 1 and r.task_id == 0 and r.task_type == "worker"
    assert r.connect() is r
    spec = r.cluster_spec()
    [host] = strata.devices()
    assert spec.hosts == 1 and spec.num_replicas == host.cores and spec.num_tasks("worker") == 1
    assert spec.as_dict() == {"worker": [host.hostname]}
    assert spec.host_info[0].cores == host.cores and spec.host_info[0].isa == host.isa
    assert r.num_accelerators() == {"CPU": host.cores}
    assert distribute.cluster_resolver.ClusterResolver(replicas=2, environment={}).num_accelerators() == {"CPU": 2}
    assert r.master() == host.hostname
    s = distribute.MultiWorkerMirroredStrategy(r)  # outside MPI: one worker
    assert s.num_workers == 1 and s.num_replicas_in_sync == host.cores
    assert distribute.MultiWorkerMirroredStrategy(replicas_per_worker=2).num_replicas_in_sync == 2


def test_cluster_resolver_errors_name_the_problem():
    with pytest.raises(strata.errors.InvalidArgumentError, match="STRATA_CLUSTER"):
        distribute.ClusterResolver(environment={"STRATA_CLUSTER": "{not json"})
    two = '{"cluster": {"worker": ["node1", "node2"]}, "task": {"type": "worker", "index": 1}}'
    r = distribute.ClusterResolver(environment={"STRATA_CLUSTER": two})
    assert r.num_workers == 2 and r.task_id == 1 and r.worker_hosts == ["node1", "node2"] and r.master() == "node1"
    with pytest.raises(ValueError, match="no MPI launcher"):
        r.connect()
    with pytest.raises(ValueError, match="lists 2 workers but OpenMPI started 3"):
        distribute.ClusterResolver(environment={"STRATA_CLUSTER": two, "OMPI_COMM_WORLD_SIZE": "3",
                                                "OMPI_COMM_WORLD_RANK": "1"})
    with pytest.raises(ValueError, match="replicas must be >= 0"):
        distribute.ClusterResolver(replicas=-1)


# ---- a custom training loop -------------------------------------------------------------------
GLOBAL_BATCH = 16


def data(steps, seed=3):
    """A learnable problem: the class is the argmax of a fixed linear map of x."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(steps * GLOBAL_BATCH, 12)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(12, 4)), axis=1).astype(np.int64)
    return x, y


def make_model(strategy):
    with strategy.scope():
        model = keras.Sequential([keras.Input(shape=(12,)), keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(4)])
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2, momentum=0.9),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), seed=11)
    return model


def custom_loop(strategy, model, x, y):
    """Keras's custom-loop pattern: the step under strategy.run, the loss reduced."""
    def step(xb, yb):
        loss = model.compute_gradients(xb, yb)  # forward and backward on every replica's rows
        model.apply_gradients()                  # the optimizer's (sharded) update
        return loss

    losses = []
    for i in range(0, len(x), GLOBAL_BATCH):
        per_replica_loss = strategy.run(step, args=(x[i:i + GLOBAL_BATCH], y[i:i + GLOBAL_BATCH]))
        losses.append(strategy.reduce("MEAN", per_replica_loss, axis=None))
    return losses


def test_a_custom_loop_under_strategy_run_takes_train_on_batchs_step():
    strategy = distribute.MirroredStrategy(replicas=2)
    x, y = data(steps=30)
    loop_model, reference = make_model(strategy), make_model(strategy)
    assert all(np.array_equal(a, b) for a, b in zip(loop_model.get_weights(), reference.get_weights()))
    losses = custom_loop(strategy, loop_model, x, y)
    reference_losses = [reference.train_on_batch(x[i:i + GLOBAL_BATCH], y[i:i + GLOBAL_BATCH])
                        for i in range(0, len(x), GLOBAL_BATCH)]
    assert losses == pytest.approx(reference_losses, rel=1e-6)
    # The same step on the same batches from the same seed: the same weights, bit for bit.
    for a, b in zip(loop_model.get_weights(), reference.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])  # it learns


def test_a_custom_loop_ends_where_fit_ends():
    strategy = distribute.MirroredStrategy(replicas=2)
    x, y = data(steps=6, seed=5)
    loop_model, fitted = make_model(strategy), make_model(strategy)
    losses = custom_loop(strategy, loop_model, x, y)
    history = fitted.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(loop_model.get_weights(), fitted.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert history.history["loss"][0] == pytest.approx(np.mean(losses), rel=1e-6)


WORKER = r'''
import json, sys
import numpy as np
from strata import distribute, keras
sys.path.insert(0, sys.argv[2])
from test_distribute import GLOBAL_BATCH, custom_loop_steps, data, make_model

strategy = distribute.MultiWorkerMirroredStrategy(replicas_per_worker=1)
resolver = distribute.ClusterResolver().connect()
rank, workers = strategy.worker_index, strategy.num_workers
x, y = data(steps=8)
model = make_model(strategy)
half = GLOBAL_BATCH // workers
# Each worker feeds its own rows of every global batch; the gradients are all-reduced.
local = [(x[i + half * rank:i + half * (rank + 1)], y[i + half * rank:i + half * (rank + 1)])
         for i in range(0, len(x), GLOBAL_BATCH)]
losses = custom_loop_steps(strategy, model, local)
np.save("%s/weights%d.npy" % (sys.argv[1], rank), np.concatenate([w.ravel() for w in model.get_weights()]))
json.dump({"workers": workers, "in_sync": strategy.num_replicas_in_sync, "hosts": resolver.cluster_spec().hosts,
           "sum": strategy.reduce("SUM", distribute.PerReplica([rank + 1.0])), "losses": losses},
          open("%s/worker%d.json" % (sys.argv[1], rank), "w"))
'''


def custom_loop_steps(strategy, model, batches):
    def step(xb, yb):
        loss = model.compute_gradients(xb, yb)
        model.apply_gradients()
        return loss
    return [strategy.reduce("MEAN", strategy.run(step, args=b), axis=None) for b in batches]


def test_a_custom_loop_over_two_mpi_workers_equals_two_replicas_in_one_process(tmp_path):
    assert os.path.exists("/usr/bin/mpirun"), "mpirun is not installed (scripts/deps.sh installs openmpi-bin)"
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "session").mkdir()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_orte_tmpdir_base=str(tmp_path / "session"))
    here = str(pathlib.Path(__file__).resolve().parent)
    subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader,tcp", "--mca",
                    "btl_tcp_if_include", "lo", "-np", "2", "/usr/bin/python3", str(tmp_path / "worker.py"),
                    str(tmp_path), here], check=True, env=env, timeout=300)
    reports = [json.loads((tmp_path / ("worker%d.json" % r)).read_text()) for r in range(2)]
    weights = [np.load(tmp_path / ("weights%d.npy" % r)) for r in range(2)]
    for rep in reports:
        assert rep["workers"] == 2 and rep["in_sync"] == 2 and rep["hosts"] == 2 and rep["sum"] == 3.0
    np.testing.assert_array_equal(weights[0], weights[1])       # every worker holds the same model
    assert reports[0]["losses"] == reports[1]["losses"]          # the loss reduced over the workers
    # The same global batches on two replicas of one process: the same training, bit for bit (one
    # replica per worker: the all-reduce adds the same two gradients the in-process reduction adds).
    strategy = distribute.MirroredStrategy(replicas=2)
    model = make_model(strategy)
    x, y = data(steps=8)
    losses = custom_loop_steps(strategy, model, [(x[i:i + GLOBAL_BATCH], y[i:i + GLOBAL_BATCH])
                                                 for i in range(0, len(x), GLOBAL_BATCH)])
    np.testing.assert_array_equal(weights[0], np.concatenate([w.ravel() for w in model.get_weights()]))
    assert reports[0]["losses"] == losses
