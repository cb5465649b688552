"""Keras losses (``strata.keras.losses``): the ones Strata's compiled step has."""

__all__ = ["Loss", "SparseCategoricalCrossentropy", "CategoricalCrossentropy", "BinaryCrossentropy",
           "MeanSquaredError", "get"]


class Loss:
    _name = None

    def __init__(self, from_logits=False, label_smoothing=0.0, name=None, reduction="sum_over_batch_size"):
        if reduction not in ("sum_over_batch_size", "auto"):
            raise ValueError(f"{type(self).__name__}: only reduction='sum_over_batch_size' (the mean) is supported")
        self.from_logits = bool(from_logits)
        self.label_smoothing = float(label_smoothing)
        self.name = name or self._name

    def __repr__(self):
        return f"<{type(self).__name__} from_logits={self.from_logits}>"


class SparseCategoricalCrossentropy(Loss):
    _name = "sparse_categorical_crossentropy"

    def __init__(self, from_logits=False, **kwargs):
        super().__init__(from_logits=from_logits, **kwargs)


class CategoricalCrossentropy(Loss):
    _name = "categorical_crossentropy"


class BinaryCrossentropy(Loss):
    _name = "binary_crossentropy"

    def __init__(self, from_logits=False, **kwargs):
        super().__init__(from_logits=from_logits, **kwargs)


class MeanSquaredError(Loss):
    _name = "mean_squared_error"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)


def get(identifier):
    """(name, from_logits, label_smoothing) of a loss name or object; the C++ side checks the name."""
    if isinstance(identifier, Loss):
        return identifier._name, identifier.from_logits, identifier.label_smoothing
    if isinstance(identifier, str):
        return identifier, False, 0.0
    raise TypeError(f"loss: expected a Keras loss name or a strata.keras.losses object, got {type(identifier).__name__}")
