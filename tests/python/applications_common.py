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


def gradient_scales(grads, siblings=None):
    """Each variable's largest |gradient|; for one that is zero in exact arithmetic (below 1e-10 of
    its sibling's), its sibling's: `siblings[name]` where given, else a bias takes its layer's
    kernel's and a beta its batch norm's gamma's."""
    scales = {}
    for n, g in grads.items():
        layer, leaf = n.rsplit("/", 1)
        sibling = (siblings or {}).get(n) or {"bias": layer + "/kernel", "beta": layer + "/gamma"}.get(leaf)
        own = np.abs(g).max()
        scales[n] = np.abs(grads[sibling]).max() if sibling in grads and own < 1e-10 * np.abs(grads[sibling]).max() \
            else own
    return scales


def worst_gradient(got, want, scales):
    """The largest max |got - want| of a variable over its scale, and that variable's name."""
    return max((np.abs(got[n] - want[n]).max() / scales[n], n) for n in want)
