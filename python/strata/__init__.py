"""Strata from Python: Keras models and a tf.data-style pipeline whose steps run in C++.

    import strata
    model = strata.keras.Sequential([...])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=12)

Submodules: strata.keras, strata.data, strata.io, strata.distribute, strata.monitor,
strata.presets, strata.errors (each imported on first use). strata.devices() describes this host;
strata.train(...) runs a training recipe as `strata train` does (same flags, same weights).
docs/python.md maps each Keras and tf.data name to Strata's and lists what differs.
"""
import importlib
from typing import List

from . import _strata, errors
from ._device import Device
from ._strata import __version__

# Imported on first access (PEP 562), so `import strata` stays cheap and each works alone.
_SUBMODULES = ("data", "distribute", "io", "keras", "monitor", "presets")

__all__ = ["Device", "data", "devices", "distribute", "errors", "io", "keras", "monitor", "presets", "train",
           "__version__"]


def devices(recalibrate: bool = False) -> List[Device]:
    """This host as ``strata devices`` prints it: one Device (hostname, CPU model, usable cores,
    ISA list, memory, replicas, calibrated peak FLOP/s per core for f32 and bf16, precisions).

    The peak is measured once per machine and cached (a few hundred ms the first time);
    ``recalibrate=True`` measures it again. Under mpirun/srun every worker's host is in
    ``strata.distribute.ClusterResolver().connect().cluster_spec().host_info``.
    """
    return [Device(**d) for d in _strata._devices(bool(recalibrate))]


def train(recipe=None, *, preset=None, **kwargs):
    """Trains as ``strata train`` does with the same flags (keywords: the flags' names with
    underscores; ``preset="flowers"`` as ``--preset flowers``) and returns a
    strata.presets.TrainResult (history, val_accuracy, model_path, ...). Same seed and flags as a
    ``strata train`` run: the same weights, bit for bit. ``recipe``: a strata.presets Recipe that
    the keywords override. strata.presets has the recipes' pieces."""
    from .presets import _recipe
    return _recipe.train(recipe, preset=preset, **kwargs)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'strata' has no attribute %r" % (name,))


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_SUBMODULES))
