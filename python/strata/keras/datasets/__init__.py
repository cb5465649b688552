"""``strata.keras.datasets``: Keras's dataset loaders, from files already on the machine."""
from . import fashion_mnist

__all__ = ["fashion_mnist"]
