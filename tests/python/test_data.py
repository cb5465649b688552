"""strata.data from Python: numpy round trips, tf.data's documented semantics of take / skip /
shard / repeat / shuffle, deterministic order, Python map / filter / interleave and their
errors, the built-in image stage."""
import numpy as np
import pytest

import strata
from strata import errors

D = strata.data


def as_list(ds):
    return [x.tolist() if isinstance(x, np.ndarray) else x for x in ds]


def test_from_tensor_slices_batch_equals_numpy_slicing():
    x = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    y = np.arange(10, dtype=np.int64) * 7
    batches = list(D.Dataset.from_tensor_slices((x, y)).batch(4))
    assert [b[0].shape for b in batches] == [(4, 3), (4, 3), (2, 3)]
    for i, (bx, by) in enumerate(batches):
        np.testing.assert_array_equal(bx, x[4 * i:4 * i + 4])
        np.testing.assert_array_equal(by, y[4 * i:4 * i + 4])
        assert bx.dtype == np.float32 and by.dtype == np.int64
    assert len(list(D.Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=True))) == 2
    # dicts keep their keys; unbatched scalars come out as numpy scalars
    d = list(D.Dataset.from_tensor_slices({"a": y, "b": x}))
    assert list(d[3]) == ["a", "b"] and d[3]["a"] == 21 and d[3]["b"].tolist() == [9.0, 10.0, 11.0]
    # float64 becomes float32 (Strata has no float64), a Python list works like np.asarray
    assert next(iter(D.Dataset.from_tensor_slices([0.5, 1.5]))).dtype == np.float32


def test_take_skip_shard_repeat_follow_tf_data():
    r = D.Dataset.range
    assert as_list(r(5)) == [0, 1, 2, 3, 4]
    assert as_list(r(2, 11, 3)) == [2, 5, 8] and as_list(r(5, 0, -2)) == [5, 3, 1]
    assert as_list(r(10).take(3)) == [0, 1, 2] and as_list(r(3).take(-1)) == [0, 1, 2]
    assert as_list(r(10).skip(7)) == [7, 8, 9] and as_list(r(3).skip(-1)) == []
    assert as_list(r(10).shard(3, 1)) == [1, 4, 7]  # elements i with i % num_shards == index
    assert as_list(r(3).repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert as_list(r(2).repeat().take(5)) == [0, 1, 0, 1, 0]
    assert as_list(r(3).enumerate(start=5)) == [(5, 0), (6, 1), (7, 2)]
    assert as_list(D.Dataset.zip(r(3), r(10, 20))) == [(0, 10), (1, 11), (2, 12)]
    assert as_list(D.Dataset.zip((r(2), r(3).map(lambda v: {"v": v})))) == [(0, {"v": 0}), (1, {"v": 1})]
    assert as_list(r(5).filter(lambda v: v % 2 == 0)) == [0, 2, 4]
    assert as_list(r(3).interleave(lambda v: r(v * 10, v * 10 + 2), cycle_length=3)) == [0, 10, 20, 1, 11, 21]


def test_shuffle_seeds_and_epochs():
    ds = D.Dataset.range(50).shuffle(50, seed=7)
    a, b = as_list(ds), as_list(ds)
    assert a == b and sorted(a) == list(range(50)) and a != list(range(50))
    two = as_list(D.Dataset.range(20).shuffle(20, seed=3).repeat(2))
    assert sorted(two[:20]) == sorted(two[20:]) == list(range(20)) and two[:20] != two[20:]
    same = as_list(D.Dataset.range(20).shuffle(20, seed=3, reshuffle_each_iteration=False).repeat(2))
    assert same[:20] == same[20:]


def test_parallel_python_map_is_deterministic_with_options():
    opts = D.Options()
    opts.deterministic = True
    slow_first = lambda v: (v * v, np.full((2,), v, np.int32))  # noqa: E731
    ds = D.Dataset.range(200).map(slow_first, num_parallel_calls=4).batch(16).with_options(opts)
    got = list(ds)
    flat = np.concatenate([b[0] for b in got])
    np.testing.assert_array_equal(flat, np.arange(200) ** 2)
    assert got[0][1].dtype == np.int32 and got[0][1].shape == (16, 2)
    # deterministic=False may reorder, never lose or duplicate
    opts.deterministic = False
    loose = as_list(D.Dataset.range(100).map(lambda v: v + 1, num_parallel_calls=D.AUTOTUNE).with_options(opts))
    assert sorted(loose) == list(range(1, 101))


def test_python_map_gets_and_returns_structures():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    ds = D.Dataset.from_tensor_slices({"x": x, "y": np.array([1, 2, 3])})
    seen = []

    def fn(e):
        seen.append(type(e))
        assert not e["x"].flags.writeable  # the pipeline's tensors are not the caller's to change
        return {"sum": e["x"].sum(), "pair": (e["y"] * 2, b"tag")}
    out = list(ds.map(fn))
    assert seen[0] is dict
    assert [o["sum"] for o in out] == [1.0, 5.0, 9.0] and out[0]["sum"].dtype == np.float32
    assert [o["pair"] for o in out] == [(2, b"tag"), (4, b"tag"), (6, b"tag")]
    # tuples are passed as positional arguments, as in tf.data
    assert as_list(D.Dataset.from_tensor_slices((x, np.arange(3))).map(lambda a, b: a[0] + b)) == [0.0, 3.0, 6.0]


class Boom(Exception):
    pass


@pytest.mark.parametrize("parallel", [None, 3])
def test_python_map_exception_reaches_the_caller(parallel):
    def fn(v):
        if v == 4:
            raise Boom(f"no {v}")
        return v
    it = iter(D.Dataset.range(8).map(fn, num_parallel_calls=parallel))
    got = [next(it) for _ in range(4)]
    with pytest.raises(Boom, match="no 4") as e:
        next(it)
    assert "map" in "".join(getattr(e.value, "__notes__", ["map"]))
    assert got == [0, 1, 2, 3] and list(it) == [5, 6, 7]  # the failed element is skipped, as in tf.data
    assert as_list(D.Dataset.range(8).map(fn).ignore_errors()) == [0, 1, 2, 3, 5, 6, 7]
    with pytest.raises(KeyError, match="missing"):
        list(D.Dataset.range(3).filter(lambda v: {}["missing"]))


def test_bad_arguments_raise_the_strata_error_classes(tmp_path):
    with pytest.raises(errors.InvalidArgumentError, match="batch"):
        list(D.Dataset.range(3).batch(0))
    with pytest.raises(errors.NotFoundError, match="nothing-here"):
        D.Dataset.list_files(str(tmp_path / "nothing-here*.tfrec"))
    with pytest.raises(TypeError, match="dtype"):
        list(D.Dataset.range(2).map(lambda v: np.array(["a"])))
    with pytest.raises(TypeError, match="object"):
        D.Dataset.from_tensor_slices(np.array([object()]))
    with pytest.raises(ValueError, match="first dimensions"):
        D.Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with pytest.raises(TypeError, match="callable"):
        D.Dataset.range(2).map(3)
    with pytest.raises(ValueError, match="num_parallel_calls"):
        D.Dataset.range(2).map(lambda v: v, num_parallel_calls=0)
    with pytest.raises(errors.InvalidArgumentError):  # shapes differ inside a batch
        list(D.Dataset.range(3).map(lambda v: np.zeros(v)).batch(3))


def test_list_files_cache_and_tfrecord_sources(tmp_path):
    for i in range(3):
        with strata.io.TFRecordWriter(tmp_path / f"part-{i}.tfrec") as w:
            for j in range(4):
                w.write(f"{i}:{j}".encode())
    files = as_list(D.Dataset.list_files(str(tmp_path / "part-*.tfrec"), shuffle=False))
    assert files == [str(tmp_path / f"part-{i}.tfrec").encode() for i in range(3)]
    shuffled = D.Dataset.list_files(str(tmp_path / "part-*.tfrec"), seed=1)
    assert sorted(as_list(shuffled)) == files
    seq = as_list(D.TFRecordDataset(D.Dataset.list_files(str(tmp_path / "*.tfrec"), shuffle=False)))
    assert seq == [f"{i}:{j}".encode() for i in range(3) for j in range(4)]
    par = as_list(D.TFRecordDataset([f.decode() for f in files], num_parallel_reads=3))
    assert par == [f"{i}:{j}".encode() for j in range(4) for i in range(3)]  # round-robin over 3 open files
    calls = []
    cached = D.Dataset.range(4).map(lambda v: calls.append(1) or v).cache(str(tmp_path / "c"))
    assert as_list(cached.repeat(3)) == [0, 1, 2, 3] * 3 and len(calls) == 4


def test_decode_image_fused_with_batch_equals_unfused(testdata):
    path = str(testdata / "real" / "tfx_cifar10_test.tfrecord")  # 32x32 PNGs, int64 label
    spec = {"image": strata.io.FixedLenFeature([], "string"), "label": strata.io.FixedLenFeature([], "int64")}
    decode = dict(label_key="label", size=(24, 20), random_flip_left_right=0.5, saturation=(0.0, 2.0), seed=5)

    def pipeline(fused, parallel):
        ds = D.TFRecordDataset(path).map(strata.io.parse_example(spec), num_parallel_calls=parallel)
        if not fused:  # a Python stage between parse and decode, and decode not written into the batch rows
            ds = ds.map(lambda e: e)
        ds = ds.map(D.experimental.decode_image(**decode), num_parallel_calls=parallel).batch(32)
        opts = D.Options()
        opts.experimental_optimization.map_and_batch_fusion = fused
        return ds.with_options(opts)
    a = list(pipeline(True, D.AUTOTUNE))
    b = list(pipeline(False, 1))
    assert len(a) == 4 and a[0][0].shape == (32, 24, 20, 3) and a[0][0].dtype == np.float32
    for (ia, la), (ib, lb) in zip(a, b):
        np.testing.assert_array_equal(ia, ib)  # same seed: same pixels for any thread count and fusion
        np.testing.assert_array_equal(la, lb)
    assert a[0][1][:5].tolist() == [7, 0, 6, 9, 5]
    assert -1e-6 <= a[0][0].min() and a[0][0].max() <= 1 + 1e-6  # saturation rounds a hair past [0, 1]
    # Without augmentation at the stored size, every value is a byte / 255.
    plain = next(iter(D.TFRecordDataset(path).map(strata.io.parse_example(spec)).map(
        D.experimental.decode_image(label_key=None, size=32))))
    np.testing.assert_allclose(plain * 255, np.round(plain * 255), atol=1e-3)
    with pytest.raises(errors.StrataError, match="image"):
        list(D.TFRecordDataset(path).map(strata.io.parse_example({"id": spec["image"]})).map(
            D.experimental.decode_image(label_key=None, size=8)))


def test_a_signal_interrupts_an_endless_iteration():
    import signal

    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted()
    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Interrupted):  # the handler runs between elements: the loop does not hold it off
            for _ in D.Dataset.range(10).map(lambda v: v, num_parallel_calls=2).repeat().prefetch(4):
                pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_padded_batch_and_parallel_interleave():
    ragged = D.Dataset.range(1, 5).map(lambda v: np.arange(v))
    got = list(ragged.padded_batch(2, padded_shapes=[5], padding_values=-1))
    assert [b.tolist() for b in got] == [[[0, -1, -1, -1, -1], [0, 1, -1, -1, -1]],
                                         [[0, 1, 2, -1, -1], [0, 1, 2, 3, -1]]]
    assert list(ragged.padded_batch(2))[0].shape == (2, 2)  # the batch's longest
    inter = D.Dataset.range(4).interleave(lambda v: D.Dataset.range(v * 10, v * 10 + 3), cycle_length=2,
                                          num_parallel_calls=2)
    assert as_list(inter) == [0, 10, 1, 11, 2, 12, 20, 30, 21, 31, 22, 32]  # deterministic by default
