"""``strata.keras.regularizers``: L2 only (as Strata's layers take it)."""

__all__ = ["l2", "L2"]


def L2(l2=0.01):
    """Keras's regularizers.L2: a penalty l2 * sum(w ** 2) on a kernel (kernel_regularizer=)."""
    return {"class_name": "L2", "config": {"l2": float(l2)}}


l2 = L2
