"""Strata from Python: Keras models and a tf.data-style pipeline whose steps run in C++.

    import strata
    model = strata.keras.Sequential([...])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=12)

docs/python.md maps each Keras and tf.data name to Strata's and lists what differs.
"""
from . import errors
from ._strata import __version__

__all__ = ["errors", "__version__"]
