"""Helpers the applications tests share (test_applications_torchvision.py,
test_applications_keras_source.py)."""
import numpy as np


def strata_gradients(model, shapes):
    """compute_gradients' block (the trainable variables' gradients, in the store's order) as
    name -> array of the given shape; every value of the block is someone's."""
    grads, offset, out = model.gradients(), 0, {}
    for name, _, trainable in model._cc.weights():
        if trainable:
            size = int(np.prod(shapes[name]))
            out[name] = grads[offset:offset + size].reshape(shapes[name])
            offset += size
    assert offset == grads.size
    return out
