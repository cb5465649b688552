"""strata.io: tf.io's Example parsing and TFRecord files.

    spec = {"image": strata.io.FixedLenFeature([], "string"),
            "class": strata.io.FixedLenFeature([], "int64"),
            "bbox": strata.io.VarLenFeature("float32")}
    ds = strata.data.TFRecordDataset(files).map(strata.io.parse_example(spec))   # parsed in C++
    with strata.io.TFRecordWriter("out.tfrec", "GZIP") as w:
        w.write(serialized_example)

Parsed values are numpy arrays: a FixedLenFeature of the spec's shape, a VarLenFeature as a
dense 1-D array of the record's values (TensorFlow gives a SparseTensor), a "string" feature as
bytes (one value per feature: a scalar FixedLenFeature, or a VarLenFeature holding one value).
"""
from __future__ import annotations

import collections
import numbers

import numpy as np

from . import _strata
from . import data as _data_mod

_io = _strata.io

__all__ = ["FixedLenFeature", "VarLenFeature", "parse_example", "parse_single_example", "TFRecordWriter",
           "TFRecordOptions", "tf_record_iterator"]


def _dtype_name(dtype, key):
    if isinstance(dtype, str):
        name = {"string": "string", "bytes": "string", "int64": "int64", "float32": "float32",
                "float": "float32"}.get(dtype)
        if name:
            return name
    elif dtype in (bytes, str):
        return "string"
    elif dtype is int:
        return "int64"
    elif dtype is float:
        return "float32"
    else:
        try:
            dt = np.dtype(dtype)
        except TypeError:
            dt = None
        if dt == np.int64:
            return "int64"
        if dt == np.float32:
            return "float32"
        if dt is not None and dt.kind in "SO":
            return "string"
    raise TypeError(f"feature '{key}': dtype must be 'string', 'int64' or 'float32' (or np.int64, np.float32, "
                    f"bytes), got {dtype!r}")


class FixedLenFeature(collections.namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"])):
    """A feature with a fixed number of values (the product of `shape`; [] = a scalar).
    Without default_value a record lacking it is an error."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature with any number of values: a 1-D array (TensorFlow: a SparseTensor)."""


def _spec_tuples(features):
    if not isinstance(features, dict) or not features:
        raise TypeError("features must be a non-empty dict of feature name -> FixedLenFeature / VarLenFeature")
    out = []
    for key, f in features.items():
        if not isinstance(key, str):
            raise TypeError(f"feature names must be str, got {key!r}")
        if isinstance(f, VarLenFeature):
            out.append((key, _dtype_name(f.dtype, key), True, [], None))
        elif isinstance(f, FixedLenFeature):
            dtype = _dtype_name(f.dtype, key)
            shape = [f.shape] if isinstance(f.shape, numbers.Integral) else list(f.shape)
            for d in shape:
                if not isinstance(d, numbers.Integral) or d < 0:
                    raise ValueError(f"feature '{key}': shape must hold sizes >= 0, got {f.shape!r}")
            default = None
            if f.default_value is not None:
                v = f.default_value
                if dtype == "string":
                    vals = [v] if isinstance(v, (bytes, str)) else list(v)
                    default = [x.encode() if isinstance(x, str) else bytes(x) for x in vals]
                else:
                    default = np.asarray(v).reshape(-1).tolist()
            out.append((key, dtype, False, [int(d) for d in shape], default))
        else:
            raise TypeError(f"feature '{key}': expected FixedLenFeature or VarLenFeature, got {type(f).__name__}")
    return out


def _structure(features):
    return {k: _data_mod._Leaf(string=_dtype_name(f.dtype, k) == "string") for k, f in features.items()}


def _parse_one(serialized, spec, structure):
    arrays, _ = _io.parse_single_example(bytes(serialized), spec)
    return _data_mod._unflatten(structure, arrays)[0]


def parse_example(serialized=None, features=None, name=None):
    """parse_example(features): a built-in map function for Dataset.map (parses in C++, no GIL).
    parse_example(serialized, features): parses now; `serialized` is one record or a list of them
    (values are stacked: fixed-length features only)."""
    if features is None and isinstance(serialized, dict):
        serialized, features = None, serialized
    spec = _spec_tuples(features)
    structure = _structure(features)
    if serialized is None:
        return _data_mod.BuiltinMapFunction(_io.parse_example(spec), structure)
    if isinstance(serialized, (bytes, bytearray)):
        return _parse_one(serialized, spec, structure)
    parsed = [_parse_one(s, spec, structure) for s in serialized]
    return {k: np.stack([p[k] for p in parsed]) if parsed else np.empty((0,)) for k in features}


def parse_single_example(serialized, features, name=None):
    """One serialized tf.train.Example (bytes) -> dict of numpy values."""
    return _parse_one(serialized, _spec_tuples(features), _structure(features))


class TFRecordOptions:
    """tf.io.TFRecordOptions: compression_type '' / 'GZIP' / 'ZLIB', compression_level (0..9, None: 6)."""

    def __init__(self, compression_type=None, compression_level=None):
        self.compression_type = compression_type or ""
        self.compression_level = -1 if compression_level is None else int(compression_level)


def _options(options):
    if options is None:
        return TFRecordOptions()
    if isinstance(options, str):
        return TFRecordOptions(options)
    if isinstance(options, TFRecordOptions):
        return options
    raise TypeError(f"options must be None, a compression type string or TFRecordOptions, got {type(options).__name__}")


class TFRecordWriter:
    """Writes a TFRecord file TensorFlow reads. The file appears at `path` on close() (written to
    a temporary beside it, fsynced, renamed): a writer never closed leaves no file."""

    def __init__(self, path, options=None):
        o = _options(options)
        self._w = _io.TFRecordWriter(str(path), o.compression_type, o.compression_level)

    def write(self, record):
        """Appends one record (bytes)."""
        self._w.write(bytes(record))

    def flush(self):
        self._w.flush()

    def close(self):
        self._w.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def tf_record_iterator(path, options=None):
    """The records of one TFRecord file, as bytes (tf.compat.v1.io.tf_record_iterator)."""
    compression = None if options is None else _options(options).compression_type
    return iter(_data_mod.TFRecordDataset(str(path), compression_type=compression))
