"""``strata.keras.Model`` / ``Sequential`` / ``Input``: Keras's model API over Strata's compiled step."""
import sys

import numpy as np

from .. import _strata, errors
from . import callbacks as callbacks_module
from . import layers as layers_module
from . import losses as losses_module
from . import optimizers as optimizers_module

_k = _strata.keras

__all__ = ["Model", "Sequential", "Input"]


def Input(shape, batch_size=None, name=None, dtype="float32"):
    """A model input of per-example ``shape`` (no batch dimension), as ``keras.Input``."""
    shape = tuple(int(d) for d in shape)
    cc = _k.Input(list(shape), dtype or "float32", name or "")
    return layers_module.KerasTensor(cc, shape=(None,) + shape, dtype=dtype, name=name)


def _contiguous(a, arg):
    """An array the C++ side can borrow without a copy. As everywhere in strata, a non-contiguous
    one (a strided slice, a transpose) is a ValueError naming the argument rather than a silent
    copy of what may be the whole training set."""
    a = np.asarray(a)
    if not a.flags.c_contiguous:
        raise ValueError(f"{arg}: the array of shape {a.shape} is not C-contiguous; "
                         f"pass np.ascontiguousarray({arg.split('[')[0]}) (one copy)")
    return a


def _arrays(x, arg="x"):
    """numpy arrays (a list for several inputs) stay as they are; a Dataset passes through."""
    if isinstance(x, dict):
        raise TypeError(f"{arg}: dict inputs are not supported; pass a list of arrays in the model's input order")
    if isinstance(x, (list, tuple)):
        return [_contiguous(a, f"{arg}[{i}]") for i, a in enumerate(x)]
    if isinstance(x, np.ndarray) or np.isscalar(x):
        return _contiguous(x, arg)
    if hasattr(x, "__array__") and not hasattr(x, "_to_cpp"):
        return _contiguous(x, arg)
    return x


class Model:
    """A Keras model: ``Model(inputs=, outputs=, name=)`` (functional), or ``Sequential([...])``."""

    def __init__(self, inputs=None, outputs=None, name=None, _cc=None, **kwargs):
        if kwargs:
            raise TypeError(f"Model: unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
        if _cc is None:
            if inputs is None or outputs is None:
                raise ValueError("Model: pass inputs= and outputs= (symbolic tensors), or use Sequential([...])")
            _cc = _k.Model.functional(layers_module._symbolic(_as_list(inputs)), layers_module._symbolic(_as_list(outputs)),
                                      name or "model")
        self._cc = _cc
        self._wrapped = {}
        # The Python layers live as long as the model (model.layers gives the same objects back).
        self._outputs = outputs
        self._compiled_by_user = False
        self._strategy = None
        self.history = None

    # ---- structure --------------------------------------------------------------------------
    @property
    def name(self):
        return self._cc.name

    @property
    def layers(self):
        """Keras's model.layers (without the inputs), in Keras's order."""
        out = []
        for l in self._cc.layers():
            layer = layers_module._by_address.get(l._address)
            if layer is None:  # made in C++ (an application's): one wrapper per layer, kept
                layer = self._wrapped.setdefault(l._address, layers_module.Layer._wrap(l))
            out.append(layer)
        return out

    def get_layer(self, name=None, index=None):
        layers = self.layers
        if index is not None:
            return layers[index]
        for l in layers:
            if l.name == name:
                return l
        raise ValueError(f"get_layer: model '{self.name}' has no layer named {name!r}; it has "
                         f"{', '.join(l.name for l in layers)}")

    def count_params(self):
        return self._cc.count_params()

    def summary(self, line_length=None, print_fn=None, **kwargs):
        text = self._cc.summary_text(line_length or 65)
        (print_fn or print)(text.rstrip("\n"))

    @property
    def input_shape(self):
        return (None,) + tuple(self._cc.input_shape(0))

    @property
    def output_shape(self):
        return (None,) + tuple(self._cc.output_shape(0))

    @property
    def trainable(self):
        return self._cc.trainable

    @trainable.setter
    def trainable(self, value):
        self._cc.trainable = bool(value)

    @property
    def stop_training(self):
        return self._cc.stop_training

    @stop_training.setter
    def stop_training(self, value):
        self._cc.stop_training = bool(value)

    @property
    def learning_rate(self):
        """The learning rate fed at the current step."""
        return self._cc.learning_rate

    @property
    def optimizer(self):
        return getattr(self, "_optimizer", None)

    def get_weights(self):
        """Copies of the variables' values (parameters, then state such as moving statistics), as
        Strata's variable store orders them."""
        self._ensure_built()
        return [np.array(a) for _, a, _ in self._cc.weights()]

    @property
    def weights(self):
        """(name, array over the model's storage) per variable: writes to the arrays change the model."""
        self._ensure_built()
        return [(n, a) for n, a, _ in self._cc.weights()]

    # ---- compile ----------------------------------------------------------------------------
    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None, weighted_metrics=None,
                run_eagerly=False, steps_per_execution=1, jit_compile="auto", seed=42, precision="float32",
                threads=1, strategy=None, fold_batch_norm=True, **kwargs):
        """Keras's compile. Strata's own keywords: seed (initializers and dropout), precision
        ("float32" or "mixed_bfloat16"), threads (oneDNN threads per replica), strategy (a
        strata.distribute strategy; default: the enclosing ``strategy.scope()``, else one replica)."""
        if kwargs:
            raise TypeError(f"compile: unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
        if loss is None:
            raise ValueError("compile: pass loss= (e.g. 'sparse_categorical_crossentropy')")
        if loss_weights is not None or weighted_metrics is not None:
            raise NotImplementedError("compile: loss_weights and weighted_metrics are not supported")
        opt = optimizers_module.get(optimizer)
        loss_name, from_logits, smoothing = losses_module.get(loss)
        names = []
        for m in metrics or []:
            if not isinstance(m, str):
                raise TypeError(f"metrics: Strata takes metric names ('accuracy', 'sparse_top_k_categorical_accuracy', "
                                f"'f1_macro'), got {type(m).__name__}")
            names.append(m)
        # The enclosing scope's strategy, held by the model: `with MirroredStrategy().scope():`
        # leaves no other reference to it once the block ends, and the compiled model runs on it.
        if strategy is None:
            from .. import distribute
            if distribute.has_strategy():
                strategy = distribute.get_strategy()
        # strata.distribute's strategies wrap the C++ one (its _cpp).
        cc_strategy = getattr(strategy, "_cpp", strategy)
        self._cc.compile(opt._spec(), loss_name, from_logits, smoothing, names, int(seed), precision, int(threads),
                         cc_strategy, bool(fold_batch_norm))
        self._strategy = strategy
        self._optimizer = opt
        self._compiled_by_user = True

    def _ensure_built(self):
        # Keras predicts and loads weights without compile(): a default compile creates the
        # variables (a later compile keeps them, as Keras's recompile does).
        if not self._cc.compiled:
            # Any loss the output takes will do: only the variables are wanted.
            classifier = len(self._cc.output_shape(0)) == 1
            self._cc.compile({"kind": "SGD", "learning_rate": 0.01},
                             "sparse_categorical_crossentropy" if classifier else "mse",
                             classifier and not self._cc.ends_in_softmax(), 0.0, [], 42, "float32", 1, None, True)

    # ---- training -----------------------------------------------------------------------------
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None, validation_freq=1,
            monitor_port=None, seed=None):
        """Keras's fit on numpy arrays (x, y) or a strata.data Dataset of (x, y) batches.

        With arrays, each epoch takes len(x) // batch_size full batches (the compiled step has a
        static batch), in a new order when shuffle. monitor_port: serve the live monitor page
        (as ``strata train --monitor-port``; 0 picks a free port). Ctrl-C stops after the current
        step and raises KeyboardInterrupt (a BackupAndRestore backup stays whole)."""
        if class_weight is not None or sample_weight is not None:
            raise NotImplementedError("fit: class_weight and sample_weight are not supported")
        if validation_freq != 1:
            raise NotImplementedError("fit: validation_freq must be 1")
        if not self._compiled_by_user:
            raise errors.InvalidArgumentError(f"model {self.name}: call compile() before fit()")
        if x is None:
            raise ValueError("fit: pass x (numpy arrays with y, or a strata.data Dataset)")
        x = _arrays(x)
        is_arrays = isinstance(x, (np.ndarray, list))
        if is_arrays and y is None:
            raise ValueError("fit: y is needed with numpy x (or pass a Dataset of (x, y) batches)")
        if y is not None:
            y = _contiguous(y, "y")
        val_x = val_y = None
        if validation_data is not None:
            if isinstance(validation_data, (tuple, list)):
                if len(validation_data) != 2:
                    raise ValueError("validation_data: expected (x_val, y_val)"
                                     + (" (sample weights are not supported)" if len(validation_data) == 3 else ""))
                val_x, val_y = _arrays(validation_data[0], "validation_data[0]"), _contiguous(validation_data[1], "validation_data[1]")
            else:
                val_x = validation_data
        elif validation_split:
            if not is_arrays:
                raise ValueError("validation_split needs numpy arrays; pass validation_data with a Dataset")
            if not 0.0 < validation_split < 1.0:
                raise ValueError(f"validation_split must be in (0, 1), got {validation_split}")
            n = len(x[0]) if isinstance(x, list) else len(x)
            if len(y) != n:
                raise ValueError(f"x and y: x has {n} examples but y has shape {y.shape}: they must have the same length")
            split = int(n * (1.0 - validation_split))  # Keras: the last fraction, before shuffling
            if isinstance(x, list):
                x, val_x = [a[:split] for a in x], [a[split:] for a in x]
            else:
                x, val_x = x[:split], x[split:]
            y, val_y = y[:split], y[split:]
        if verbose == "auto":
            verbose = 1
        callbacks = list(callbacks or [])
        for cb in callbacks:
            if not isinstance(cb, callbacks_module.Callback):
                raise TypeError(f"callbacks: expected strata.keras.callbacks.Callback objects, got {type(cb).__name__}")
            cb.set_model(self)
            cb.set_params({"epochs": epochs, "steps": steps_per_epoch, "verbose": verbose})
        cc_callbacks = [cb._cc if isinstance(cb, callbacks_module._Builtin) else cb for cb in callbacks]
        epoch, history = _k.fit(self._cc, x, y, int(batch_size or 32), int(epochs), int(verbose), cc_callbacks,
                                val_x, val_y, bool(shuffle), int(initial_epoch), steps_per_epoch, validation_steps,
                                monitor_port, int(seed if seed is not None else 42))
        self.history = callbacks_module.History(epoch, history, self)
        return self.history

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", steps=None, return_dict=False, **kwargs):
        """[loss, metrics...] (or the loss alone, or a dict with return_dict) over x, y or a Dataset."""
        if kwargs:
            raise TypeError(f"evaluate: unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
        if not self._compiled_by_user:
            raise errors.InvalidArgumentError(f"model {self.name}: call compile() before evaluate()")
        x = _arrays(x)
        if y is not None:
            y = _contiguous(y, "y")
        logs = _k.evaluate(self._cc, x, y, int(batch_size or 32), steps, 1 if verbose == "auto" else int(verbose))
        if return_dict:
            return dict(logs)
        values = [v for _, v in logs]
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose="auto", steps=None, **kwargs):
        """The model's output for every example, a numpy array over the C++ result (no copy)."""
        if kwargs:
            raise TypeError(f"predict: unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
        self._ensure_built()
        return _k.predict(self._cc, _arrays(x), int(batch_size or 32), steps)

    def __call__(self, x):
        if isinstance(x, layers_module.KerasTensor) or (isinstance(x, (list, tuple)) and x
                                                         and isinstance(x[0], layers_module.KerasTensor)):
            raise NotImplementedError("calling a model on symbolic tensors (nesting models) is not supported")
        return self.predict(x)

    # ---- custom training loops ------------------------------------------------------------------
    def train_on_batch(self, x, y, return_dict=False):
        logs = self._cc.train_on_batch(_arrays(x), _contiguous(y, "y"))
        if return_dict:
            return logs
        values = list(logs.values())
        return values[0] if len(values) == 1 else values

    def compute_gradients(self, x, y):
        """Forward and backward of the global batch (x, y) on every replica, nothing updated yet
        (Keras's GradientTape + tape.gradient). Returns the mean loss; the averaged gradients are
        ``gradients()``."""
        if not self._compiled_by_user:
            raise errors.InvalidArgumentError(f"model {self.name}: call compile() before compute_gradients()")
        return self._cc.compute_gradients(_arrays(x), _contiguous(y, "y"))

    def gradients(self):
        """The averaged gradients, one float32 vector over the trainable variables, over the
        model's storage: edit it in place before apply_gradients() (clipping by hand, ...)."""
        return self._cc.gradients()

    def apply_gradients(self):
        """The optimizer's step on gradients() (optimizer.apply_gradients)."""
        self._cc.apply_gradients()

    # ---- weights ------------------------------------------------------------------------------
    def save_weights(self, filepath, overwrite=True):
        """A path ending in .h5: a Keras (legacy layout) weight file; otherwise a Strata checkpoint
        (weights and optimizer state)."""
        self._ensure_built()
        self._cc.save_weights(str(filepath))

    def load_weights(self, filepath, by_name=False, skip_mismatch=False):
        """A Keras .h5 / .weights.h5 file (by position, or by_name) or a Strata checkpoint.
        Returns what was loaded, skipped (skip_mismatch), absent from the file and left unused in
        it (by_name: a partial load, also logged as one warning line) for a Keras .h5."""
        self._ensure_built()
        return self._cc.load_weights(str(filepath), bool(by_name), bool(skip_mismatch))

    def __repr__(self):
        return f"<strata.keras.Model name={self.name}>"


class Sequential(Model):
    """``Sequential([layers...], name=)``: the first entry is ``Input(shape=)``/``InputLayer``, or
    the first layer takes ``input_shape=`` (Keras's forms)."""

    def __init__(self, layers=None, name=None, **kwargs):
        if kwargs:
            raise TypeError(f"Sequential: unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
        layers = list(layers or [])
        if not layers:
            raise ValueError("Sequential: pass the layers (the first an Input or with input_shape=)")
        first = layers[0]
        if isinstance(first, layers_module.KerasTensor):
            if first._keras_history is not None:
                raise ValueError("Sequential: the first entry must be strata.keras.Input(shape=...), not a layer's output")
            layers = [layers_module.InputLayer(shape=first.shape[1:], dtype=first.dtype, name=first.name)] + layers[1:]
        elif not isinstance(first, layers_module.InputLayer):
            if getattr(first, "_input_shape", None) is None:
                raise ValueError("Sequential: the model needs its input shape: start with strata.keras.Input(shape=...) "
                                 "or pass input_shape= to the first layer")
            layers = [layers_module.InputLayer(shape=first._input_shape)] + layers
        for l in layers:
            if not isinstance(l, layers_module.Layer):
                raise TypeError(f"Sequential: expected strata.keras.layers objects, got {type(l).__name__}")
        super().__init__(_cc=_k.Model.sequential([l._cc for l in layers], name or "sequential"))
        self._py_layers = layers


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else x
