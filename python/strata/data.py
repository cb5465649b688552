"""strata.data: tf.data's Dataset, running in C++.

    ds = (strata.data.TFRecordDataset(strata.data.Dataset.list_files("/data/flowers/*.tfrec"),
                                      num_parallel_reads=strata.data.AUTOTUNE)
          .shuffle(2048)
          .map(strata.io.parse_example({"image": strata.io.FixedLenFeature([], "string"),
                                        "class": strata.io.FixedLenFeature([], "int64")}),
               num_parallel_calls=strata.data.AUTOTUNE)
          .map(strata.data.experimental.decode_image(size=192, random_flip_left_right=0.5),
               num_parallel_calls=strata.data.AUTOTUNE)
          .batch(64, drop_remainder=True)
          .prefetch(strata.data.AUTOTUNE))
    for images, labels in ds.take(10): ...

Every stage is the C++ pipeline's (src/strata/data): its threads run without the GIL, and the
GIL is released while an element is produced. A map function is either a built-in one
(``strata.io.parse_example``, ``strata.data.experimental.decode_image``), which runs in C++,
or any Python callable, which is called with numpy arrays (the GIL is taken for each call).
Consecutive built-in maps run as one stage; a built-in decode followed by ``batch`` writes each
image straight into its batch row.

Elements come out as numpy arrays (a 0-d array as a numpy scalar), tuples and dicts of them;
a byte-string component (a record, a file name, a ``string`` feature) as ``bytes`` (batched: a
numpy object array of ``bytes``). docs/python.md lists what differs from tf.data.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import _strata

_data = _strata.data

AUTOTUNE = _data.AUTOTUNE
"""Let the pipeline choose a parallelism or buffer size (tf.data.AUTOTUNE)."""

__all__ = ["AUTOTUNE", "BuiltinMapFunction", "Dataset", "Iterator", "Options", "AutotuneOptions", "OptimizationOptions",
           "TFRecordDataset", "experimental"]


# ---- element structure ------------------------------------------------------------------------
# An element crosses into C++ as a flat list of arrays. Its shape in Python (nested tuples and
# dicts, which leaves are byte strings) is kept here, beside the C++ dataset.

class _Leaf:
    __slots__ = ("string",)

    def __init__(self, string=False):
        self.string = string

    def __repr__(self):
        return "bytes" if self.string else "array"


class _Later:
    """The structure a Python function returns: known once it has run (set at each call)."""
    __slots__ = ("value",)

    def __init__(self):
        self.value = None


def _resolve(s, n=None):
    if isinstance(s, _Later):
        if s.value is None:  # not run yet in this process (a file cache): a flat tuple
            return _Leaf() if n == 1 else tuple(_Leaf() for _ in range(n or 0))
        return s.value
    return s


def _leaves(s):
    s = _resolve(s)
    if isinstance(s, _Leaf):
        return 1
    if isinstance(s, dict):
        return sum(_leaves(v) for v in s.values())
    return sum(_leaves(v) for v in s)


def _out_value(leaf, a):
    if leaf.string and a.dtype == np.uint8 and a.ndim >= 1:
        if a.ndim == 1:
            return a.tobytes()
        rows = a.reshape(-1, a.shape[-1])
        out = np.empty(rows.shape[0], dtype=object)
        for i, r in enumerate(rows):
            out[i] = r.tobytes()
        return out.reshape(a.shape[:-1])
    if a.ndim == 0:
        return a[()]
    return a


def _unflatten(s, flat, pos=0):
    """(value, next position) of structure `s` over the flat list of arrays."""
    s = _resolve(s, len(flat) - pos)
    if isinstance(s, _Leaf):
        return _out_value(s, flat[pos]), pos + 1
    if isinstance(s, dict):
        out = {}
        for k, v in s.items():
            out[k], pos = _unflatten(v, flat, pos)
        return out, pos
    items = []
    for v in s:
        x, pos = _unflatten(v, flat, pos)
        items.append(x)
    return tuple(items), pos


def _to_array(v, what):
    """A numpy array Strata holds: float64 -> float32 (Strata has no float64), bool -> uint8,
    other integers -> int64 (int32 stays)."""
    a = np.asarray(v)
    k = a.dtype.kind
    if k == "f" and a.dtype != np.float32:
        a = a.astype(np.float32)
    elif k == "b":
        a = a.astype(np.uint8)
    elif k in "iu" and a.dtype not in (np.int32, np.int64, np.uint8):
        a = a.astype(np.int64)
    elif k not in "fiub":
        raise TypeError(f"{what}: cannot hold a value of dtype {a.dtype} (numbers, bytes, numpy arrays only)")
    return a if a.flags.c_contiguous else a.copy()  # (np.ascontiguousarray makes a 0-d array 1-d)


def _flatten_value(v, what, flat):
    """Appends v's arrays to flat; returns its structure."""
    if isinstance(v, dict):
        return {k: _flatten_value(x, f"{what}[{k!r}]", flat) for k, x in v.items()}
    if isinstance(v, tuple):
        return tuple(_flatten_value(x, f"{what}[{i}]", flat) for i, x in enumerate(v))
    if isinstance(v, (bytes, bytearray, memoryview)):
        flat.append(np.frombuffer(bytes(v), dtype=np.uint8).copy())
        return _Leaf(string=True)
    if isinstance(v, str):
        flat.append(np.frombuffer(v.encode(), dtype=np.uint8).copy())
        return _Leaf(string=True)
    flat.append(_to_array(v, what))
    return _Leaf()


def _names_of(s):
    """C++ component names: the keys of a flat dict (so built-in maps find features by name)."""
    s = _resolve(s)
    if isinstance(s, dict) and all(isinstance(_resolve(v), _Leaf) for v in s.values()):
        return list(s.keys())
    return None


def _call_with(fn, value):
    # tf.data: a tuple element is passed as positional arguments, anything else as one.
    return fn(*value) if isinstance(value, tuple) else fn(value)


def _python_map(fn, in_structure, out):
    def call(*arrays):
        value, _ = _unflatten(in_structure, [_readonly(a) for a in arrays])
        flat = []
        out.value = _flatten_value(_call_with(fn, value), "map function output", flat)
        return flat, _names_of(out.value)
    return call


def _readonly(a):
    # Views of the pipeline's tensors (a cached element may be handed out again): immutable,
    # as tf.data's tensors are.
    a.flags.writeable = False
    return a


# ---- options --------------------------------------------------------------------------------

class AutotuneOptions:
    """tf.data.experimental.AutotuneOptions: `enabled`, `cpu_budget` (threads), `ram_budget` (bytes)."""

    def __init__(self):
        self.enabled = None
        self.cpu_budget = None
        self.ram_budget = None


class OptimizationOptions:
    """tf.data.experimental.OptimizationOptions: `map_and_batch_fusion` (default True)."""

    def __init__(self):
        self.map_and_batch_fusion = None


class Options:
    """tf.data.Options: `deterministic` (default True: the exact order for any thread count),
    `autotune` (AutotuneOptions), `experimental_optimization` (OptimizationOptions)."""

    def __init__(self):
        self.deterministic = None
        self.autotune = AutotuneOptions()
        self.experimental_optimization = OptimizationOptions()

    @property
    def experimental_deterministic(self):
        return self.deterministic

    @experimental_deterministic.setter
    def experimental_deterministic(self, value):
        self.deterministic = value


# ---- the dataset ------------------------------------------------------------------------------

def _count(value, what, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    return int(value)


def _parallel(value, what):
    if value is None:
        return 1
    n = _count(value, what)
    if n != AUTOTUNE and n < 1:
        raise ValueError(f"{what} must be >= 1 or strata.data.AUTOTUNE, got {n}")
    return n


class Dataset:
    """A pipeline description (tf.data.Dataset). Transformations return new datasets."""

    def __init__(self, cpp, structure, pending=None):
        self._cpp = cpp              # _strata.data.Dataset (before `pending`)
        self._structure = structure  # the element's nesting
        self._pending = pending      # (BuiltinMap, num_parallel_calls, deterministic) not applied yet

    # -- the C++ dataset, for strata.keras / strata.distribute
    def _to_cpp(self):
        if self._pending is None:
            return self._cpp
        fn, n, det = self._pending
        return self._cpp.map_builtin(fn, num_parallel_calls=n, deterministic=det)

    def _then(self, cpp, structure=None):
        return Dataset(cpp, self._structure if structure is None else structure)

    # -- sources
    @staticmethod
    def range(*args):
        """range(stop), range(start, stop[, step]): int64 scalars, as Python's range."""
        if not 1 <= len(args) <= 3:
            raise TypeError(f"range takes 1 to 3 arguments, got {len(args)}")
        args = [_count(a, "range argument") for a in args]
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        if step == 0:
            raise ValueError("range: step must not be 0")
        return Dataset(_data.Dataset.range(start, stop, step), _Leaf())

    @staticmethod
    def from_tensor_slices(tensors):
        """Slices a numpy array, or a tuple / dict of them, along the first dimension (no copy
        for aligned C-contiguous float32/int32/int64/uint8 arrays)."""
        flat = []
        structure = _flatten_value(tensors, "from_tensor_slices", flat)
        for i, a in enumerate(flat):
            if a.ndim == 0:
                raise ValueError(f"from_tensor_slices: component {i} is a scalar; it needs a first dimension to slice")
        if any(a.shape[0] != flat[0].shape[0] for a in flat):
            raise ValueError("from_tensor_slices: the components' first dimensions differ: " +
                             ", ".join(str(a.shape[0]) for a in flat))
        return Dataset(_data.Dataset.from_tensor_slices(flat, _names_of(structure)), structure)

    @staticmethod
    def zip(*datasets):
        """zip((a, b)) or zip(a, b): tuples of their elements, ending with the shortest."""
        if len(datasets) == 1 and isinstance(datasets[0], (tuple, list)):
            datasets = tuple(datasets[0])
        for d in datasets:
            if not isinstance(d, Dataset):
                raise TypeError(f"zip: expected strata.data.Dataset objects, got {type(d).__name__}")
        return Dataset(_data.Dataset.zip([d._to_cpp() for d in datasets]), tuple(d._structure for d in datasets))

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None):
        """The files matching a glob pattern (or a list of them), as bytes. As in tf.data, they
        are shuffled unless shuffle=False (then sorted by name)."""
        if isinstance(file_pattern, (list, tuple)):
            file_pattern = ",".join(str(p) for p in file_pattern)
        shuffle = True if shuffle is None else bool(shuffle)
        return Dataset(_data.Dataset.list_files(str(file_pattern), shuffle, _count(seed, "seed", True)),
                       _Leaf(string=True))

    # -- transformations
    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        """map_func: a built-in function (strata.io.parse_example, strata.data.experimental.
        decode_image: runs in C++) or a Python callable taking and returning numpy values."""
        n = _parallel(num_parallel_calls, "map: num_parallel_calls")
        if isinstance(map_func, BuiltinMapFunction):
            structure = map_func._structure
            if self._pending is not None:  # map fusion: one stage, one hand-off per element
                fn0, n0, det0 = self._pending
                n = AUTOTUNE if AUTOTUNE in (n, n0) else max(n, n0)
                det = deterministic if deterministic is not None else det0
                return Dataset(self._cpp, structure, (fn0.then(map_func._cpp), n, det))
            return Dataset(self._cpp, structure, (map_func._cpp, n, deterministic))
        if not callable(map_func):
            raise TypeError(f"map: map_func must be callable, got {type(map_func).__name__}")
        out = _Later()
        cpp = self._to_cpp().map_python(_python_map(map_func, self._structure, out), n, deterministic)
        return Dataset(cpp, out)

    def filter(self, predicate, name=None):
        """Keeps the elements for which the Python `predicate` returns True."""
        if not callable(predicate):
            raise TypeError(f"filter: predicate must be callable, got {type(predicate).__name__}")
        structure = self._structure

        def call(*arrays):
            value, _ = _unflatten(structure, [_readonly(a) for a in arrays])
            r = np.asarray(_call_with(predicate, value))
            if r.shape != () or r.dtype != np.bool_:
                raise TypeError(f"filter: the predicate must return a scalar bool, got {r.dtype} of shape {r.shape}")
            return bool(r)
        return self._then(self._to_cpp().filter_python(call))

    def interleave(self, map_func, cycle_length=None, block_length=None, num_parallel_calls=None,
                   deterministic=None, name=None):
        """map_func turns an element into a Dataset; their elements are interleaved."""
        if not callable(map_func):
            raise TypeError(f"interleave: map_func must be callable, got {type(map_func).__name__}")
        structure, out = self._structure, _Later()

        def call(*arrays):
            value, _ = _unflatten(structure, [_readonly(a) for a in arrays])
            ds = _call_with(map_func, value)
            if not isinstance(ds, Dataset):
                raise TypeError(f"interleave: map_func must return a strata.data.Dataset, got {type(ds).__name__}")
            out.value = _resolve(ds._structure)
            return ds._to_cpp()
        cycle = AUTOTUNE if cycle_length is None else _parallel(cycle_length, "interleave: cycle_length")
        block = 1 if block_length is None else _count(block_length, "interleave: block_length")
        return Dataset(self._to_cpp().interleave_python(call, cycle, block,
                                                        _parallel(num_parallel_calls, "interleave: num_parallel_calls"),
                                                        deterministic), out)

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):
        """Stacks batch_size consecutive elements (the last batch may be short unless drop_remainder)."""
        return self._then(self._to_cpp().batch(_count(batch_size, "batch: batch_size"), bool(drop_remainder)))

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False, name=None):
        """batch, each component padded to padded_shapes (None / -1: the batch's longest)."""
        shapes = []
        if padded_shapes is not None:
            flat = padded_shapes if isinstance(padded_shapes, (tuple, list)) and padded_shapes and \
                isinstance(padded_shapes[0], (tuple, list)) else [padded_shapes]
            shapes = [[-1 if d is None else int(d) for d in s] for s in flat]
        value = 0.0 if padding_values is None else float(padding_values)
        return self._then(self._to_cpp().padded_batch(_count(batch_size, "padded_batch: batch_size"), shapes, value,
                                                      bool(drop_remainder)))

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True, name=None):
        """Uniform sampling from a buffer of buffer_size elements."""
        return self._then(self._to_cpp().shuffle(_count(buffer_size, "shuffle: buffer_size"),
                                                 _count(seed, "shuffle: seed", True), bool(reshuffle_each_iteration)))

    def prefetch(self, buffer_size, name=None):
        """Produces up to buffer_size elements ahead in a thread (AUTOTUNE: the tuner sizes it)."""
        return self._then(self._to_cpp().prefetch(_count(buffer_size, "prefetch: buffer_size")))

    def cache(self, filename="", name=None):
        """Keeps the elements of the first pass (in memory, or in `filename`) for the next ones."""
        return self._then(self._to_cpp().cache(str(filename)))

    def repeat(self, count=None, name=None):
        """count passes (None or -1: forever)."""
        return self._then(self._to_cpp().repeat(-1 if count is None else _count(count, "repeat: count")))

    def take(self, count, name=None):
        """The first count elements (-1: all)."""
        return self._then(self._to_cpp().take(_count(count, "take: count")))

    def skip(self, count, name=None):
        """All but the first count elements (-1: none)."""
        return self._then(self._to_cpp().skip(_count(count, "skip: count")))

    def shard(self, num_shards, index, name=None):
        """Every num_shards-th element, starting at index."""
        return self._then(self._to_cpp().shard(_count(num_shards, "shard: num_shards"), _count(index, "shard: index")))

    def enumerate(self, start=0, name=None):
        """(index, element) pairs, the index an int64 from start."""
        return Dataset(self._to_cpp().enumerate(_count(start, "enumerate: start")), (_Leaf(), self._structure))

    def ignore_errors(self, log_warning=False, name=None):
        """Drops the elements whose production failed (a corrupt record, a failing map)."""
        return self._then(self._to_cpp().ignore_errors())

    def with_options(self, options, name=None):
        """Applies tf.data.Options to the whole pipeline."""
        if not isinstance(options, Options):
            raise TypeError(f"with_options: expected strata.data.Options, got {type(options).__name__}")
        a, o = options.autotune, options.experimental_optimization
        return self._then(self._to_cpp().with_options(
            options.deterministic, a.enabled, a.cpu_budget, a.ram_budget, o.map_and_batch_fusion))

    def apply(self, transformation_func):
        """transformation_func(self)."""
        return transformation_func(self)

    # -- iteration
    def __iter__(self):
        return Iterator(self._to_cpp().make_iterator(), self._structure)

    def as_numpy_iterator(self):
        """The same as iter(ds): elements are numpy values already."""
        return iter(self)

    def __repr__(self):
        return f"<strata.data.Dataset element={_resolve(self._structure)!r}>"


class Iterator:
    """A running pipeline (its threads stop when it is dropped)."""

    def __init__(self, cpp, structure):
        self._it = cpp
        self._structure = structure

    def __iter__(self):
        return self

    def __next__(self):
        flat = self._it.__next__()  # the GIL is released while C++ produces it
        return _unflatten(self._structure, flat)[0]

    def get_next(self):
        return self.__next__()

    def stats_table(self):
        """Per-stage statistics: busy and blocked time, buffer fill, parallelism (* = AUTOTUNE)."""
        return self._it.stats_table()


def TFRecordDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None):
    """The records (bytes) of TFRecord files: a file name, a list of them, or a Dataset of names.

    compression_type: None (detected per file), "" (none), "GZIP" or "ZLIB".
    num_parallel_reads: None (one file at a time, read by the consumer), N or AUTOTUNE.
    """
    if isinstance(filenames, Dataset):
        files = filenames._to_cpp()
    else:
        if isinstance(filenames, (str, bytes)):
            filenames = [filenames]
        names = [f.decode() if isinstance(f, bytes) else str(f) for f in filenames]
        files = _data.Dataset.from_strings(names)
    n = _parallel(num_parallel_reads, "TFRecordDataset: num_parallel_reads")
    return Dataset(_data.Dataset.tfrecord(files, compression_type, _count(buffer_size, "buffer_size", True), n, 0),
                   _Leaf(string=True))


# ---- built-in map functions -------------------------------------------------------------------

class BuiltinMapFunction:
    """A map function that runs in C++ (returned by strata.io.parse_example and
    strata.data.experimental.decode_image); pass it to Dataset.map."""

    def __init__(self, cpp, structure):
        self._cpp = cpp
        self._structure = structure

    def __repr__(self):
        return repr(self._cpp)


class _Experimental:
    """strata.data.experimental: Strata's built-in image stage and tf's experimental names."""

    AUTOTUNE = AUTOTUNE
    AutotuneOptions = AutotuneOptions
    OptimizationOptions = OptimizationOptions

    @staticmethod
    def decode_image(image_key="image", label_key="class", size=224, channels=3, random_flip_left_right=0.0,
                     random_flip_up_down=0.0, saturation=None, brightness=0.0, contrast=None, hue=0.0,
                     method="bilinear", seed=None):
        """A built-in map function: a parsed Example's encoded JPEG/PNG `image_key` feature (and
        int64 `label_key`, None for none) -> (float32 image [H, W, channels] in [0, 1], int64 label).

        The image is decoded (tf.io.decode_image), resized to `size` (an int or (H, W); tf.image.
        resize), flipped left-right / up-down with the given probabilities, its saturation scaled
        by a uniform factor in `saturation` = (lower, upper) (tf.image.random_saturation),
        brightness shifted by up to +-brightness, contrast scaled in (lower, upper), hue rotated
        by up to +-hue. The randomness comes from `seed` and the element's index, never from
        the thread: a seed gives the same pixels for any num_parallel_calls.
        """
        h, w = (size, size) if isinstance(size, numbers.Integral) else tuple(size)
        cpp = _data.decode_image(image_key, label_key, int(h), int(w), int(channels), float(random_flip_left_right),
                                 float(random_flip_up_down), None if saturation is None else tuple(map(float, saturation)),
                                 float(brightness), None if contrast is None else tuple(map(float, contrast)), float(hue),
                                 method, _count(seed, "decode_image: seed", True))
        return BuiltinMapFunction(cpp, (_Leaf(), _Leaf()) if label_key is not None else _Leaf())

    @staticmethod
    def ignore_errors(log_warning=False):
        """tf.data.experimental.ignore_errors(): for Dataset.apply."""
        return lambda ds: ds.ignore_errors()


experimental = _Experimental()
