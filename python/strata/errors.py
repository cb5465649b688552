"""The exceptions a C++ error becomes, one per Strata status code (the message is unchanged).

Each also derives from the built-in exception a Python user would catch for it, so
``except ValueError`` catches a bad argument, ``except FileNotFoundError`` a missing file.
"""


class StrataError(Exception):
    """Base class of every error raised from Strata's C++ core."""


class InvalidArgumentError(StrataError, ValueError):
    """A shape, dtype, option or spec that cannot work (TensorFlow's InvalidArgumentError)."""


class NotFoundError(StrataError, FileNotFoundError):
    """A file, key or feature that should exist does not."""


class DataLossError(StrataError):
    """Bytes on disk are not what the format says (bad CRC, bad varint)."""


class TruncatedRecordError(DataLossError):
    """A file ends inside a record (a writer may still be appending)."""


class OutOfRangeError(StrataError, IndexError):
    """The end of a sequence, or an index past it."""


class FileSystemError(StrataError, OSError):
    """The operating system refused (open, read, write, fsync, rename)."""


class UnimplementedError(StrataError, NotImplementedError):
    """A valid request this build does not support."""


class InternalError(StrataError, RuntimeError):
    """A bug in Strata or an error from a library it calls: please report it."""
