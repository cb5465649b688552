"""The binding core: numpy arrays in and out without copies where they can be shared, and every
C++ status code raised as the matching strata.errors class (and built-in base)."""
import gc
import sys

import numpy as np
import pytest

import strata
from strata import _strata


def aligned(shape, dtype):
    """A C-contiguous array whose buffer starts on a 64-byte boundary."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(n + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off:off + n].view(dtype).reshape(shape)


def test_version_is_the_projects():
    assert strata.__version__.count(".") == 2


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8])
def test_an_aligned_array_is_borrowed_and_comes_back_over_the_same_memory(dtype):
    a = aligned((3, 5), dtype)
    a[...] = np.arange(15).reshape(3, 5)
    b = _strata._array_roundtrip(a)
    assert b.dtype == a.dtype and b.shape == a.shape
    assert b.ctypes.data == a.ctypes.data
    np.testing.assert_array_equal(a, b)


def test_a_borrowed_array_lives_as_long_as_the_tensor():
    a = aligned((1000,), np.float32)
    a[...] = 7
    before = sys.getrefcount(a)
    b = _strata._array_roundtrip(a)
    assert sys.getrefcount(a) == before + 1  # the tensor holds one reference
    del b
    gc.collect()
    assert sys.getrefcount(a) == before


def test_an_unaligned_array_is_copied():
    raw = np.zeros(17, dtype=np.float32)
    a = raw[1:] if raw.ctypes.data % 64 == 0 else raw[:16]
    if a.ctypes.data % 64 == 0:
        a = raw[1:]
    a[...] = np.arange(16)
    b = _strata._array_roundtrip(a)
    assert b.ctypes.data != a.ctypes.data
    np.testing.assert_array_equal(a, b)


def test_a_non_contiguous_array_is_a_value_error_naming_the_argument_and_shape():
    a = np.zeros((4, 6), dtype=np.float32)[:, ::2]
    with pytest.raises(ValueError, match=r"a: .*\(4, 3\).*not C-contiguous"):
        _strata._array_roundtrip(a)


def test_an_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="complex128"):
        _strata._array_roundtrip(np.zeros(3, dtype=np.complex128))
    with pytest.raises(TypeError, match="a: dtype object"):
        _strata._array_roundtrip(object())  # np.asarray makes it a 0-d object array


CODES = [(1, strata.errors.InvalidArgumentError, ValueError),
         (2, strata.errors.NotFoundError, FileNotFoundError),
         (3, strata.errors.DataLossError, strata.errors.StrataError),
         (4, strata.errors.TruncatedRecordError, strata.errors.DataLossError),
         (5, strata.errors.OutOfRangeError, IndexError),
         (6, strata.errors.FileSystemError, OSError),
         (7, strata.errors.UnimplementedError, NotImplementedError),
         (8, strata.errors.InternalError, RuntimeError)]


@pytest.mark.parametrize("code,cls,builtin", CODES)
def test_each_status_code_becomes_its_exception_with_the_message_unchanged(code, cls, builtin):
    with pytest.raises(cls) as info:
        _strata._raise_status(code, "bad CRC in a.tfrecord at byte 12")
    assert isinstance(info.value, builtin)
    assert str(info.value) == "bad CRC in a.tfrecord at byte 12"


@pytest.mark.parametrize("code,cls,builtin", CODES[:2])
def test_a_status_thrown_with_the_gil_released_becomes_the_same_exception(code, cls, builtin):
    with pytest.raises(cls, match="^no such file x.h5$"):
        _strata._raise_status_without_gil(code, "no such file x.h5")


def test_a_failing_save_weights_raises_instead_of_crashing(tmp_path):
    from strata.keras import layers
    model = strata.keras.Sequential([strata.keras.Input(shape=(4,)), layers.Dense(2)])
    with pytest.raises(strata.errors.StrataError, match="nonexistent"):
        model.save_weights(str(tmp_path / "nonexistent" / "w.ckpt"))


def test_a_read_only_aligned_array_is_borrowed_too():
    a = aligned((64,), np.float32)
    a[...] = 3
    a.flags.writeable = False
    b = _strata._array_roundtrip(a)
    assert b.ctypes.data == a.ctypes.data
