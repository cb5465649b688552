"""``strata.keras.datasets.fashion_mnist.load_data()``, as Keras's, read from Debian's
dataset-fashion-mnist (the IDX files ``strata make-records --from fashion-mnist`` reads):
nothing is downloaded."""
import gzip
import os

import numpy as np

__all__ = ["load_data", "DEFAULT_DIR"]

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"


def _read_idx(path, magic, header_ints):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    header = np.frombuffer(data, dtype=">u4", count=1 + header_ints)
    if header[0] != magic:
        raise ValueError(f"{path}: not an IDX file of this kind (magic {int(header[0]):#x}, expected {magic:#x})")
    dims = [int(d) for d in header[1:]]
    body = np.frombuffer(data, dtype=np.uint8, offset=4 * (1 + header_ints))
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {body.size} bytes of data for shape {tuple(dims)}")
    return body.reshape(dims).copy()  # writable, as Keras's


def _find(directory, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{os.path.join(directory, stem)}[.gz] not found: install Debian's dataset-fashion-mnist "
                            f"(scripts/deps.sh) or pass path= the directory of the IDX files")


def load_data(path=None):
    """((x_train, y_train), (x_test, y_test)): uint8 images [N, 28, 28] and uint8 labels [N], as Keras."""
    directory = path or os.environ.get("STRATA_FASHION_MNIST_DIR", DEFAULT_DIR)
    out = []
    for split in ("train", "t10k"):
        images = _read_idx(_find(directory, f"{split}-images-idx3-ubyte"), 0x803, 3)
        labels = _read_idx(_find(directory, f"{split}-labels-idx1-ubyte"), 0x801, 1)
        if len(images) != len(labels):
            raise ValueError(f"{directory}: {len(images)} {split} images but {len(labels)} labels")
        out.append((images, labels))
    return tuple(out)
