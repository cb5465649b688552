"""``strata.keras``: Keras's model API (Sequential, functional, compile / fit / evaluate /
predict, callbacks, weights) over Strata's compiled training step.

    import strata
    model = strata.keras.Sequential([strata.keras.Input(shape=(28, 28, 1)),
                                     strata.keras.layers.Flatten(),
                                     strata.keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x, y, batch_size=128, epochs=3)

docs/python.md ("strata.keras") lists the Keras names Strata has and what differs.
"""
from . import activations, applications, callbacks, datasets, layers, losses, optimizers, regularizers
from .models import Input, Model, Sequential

__all__ = ["Input", "Model", "Sequential", "activations", "applications", "callbacks", "datasets", "layers", "losses",
           "optimizers", "regularizers"]
