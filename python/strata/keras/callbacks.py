"""Keras callbacks (``strata.keras.callbacks``).

Subclass ``Callback`` in Python and override the hooks you need; fit calls them from its loop
with the GIL taken (``self.model`` is the model; ``self.model.stop_training = True`` stops after
the current epoch's step). An exception a hook raises stops fit and reaches fit's caller. The
built-ins (EarlyStopping, ModelCheckpoint, ...) run in C++.
"""
from .. import _strata

_k = _strata.keras

__all__ = ["Callback", "EarlyStopping", "ModelCheckpoint", "ReduceLROnPlateau", "LearningRateScheduler",
           "CSVLogger", "TerminateOnNaN", "BackupAndRestore", "TensorBoard", "LambdaCallback", "History"]


class Callback:
    """Base class of the callbacks, with Keras's hooks (each does nothing here)."""

    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def on_batch_end(self, batch, logs=None):
        pass

    def _wants_batch(self):
        # A callback that overrides no batch hook is not called per step (each call takes the GIL).
        cls = type(self)
        return (cls.on_train_batch_end is not Callback.on_train_batch_end
                or cls.on_batch_end is not Callback.on_batch_end)


class LambdaCallback(Callback):
    """Keras's LambdaCallback: hooks given as functions."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None, on_train_end=None,
                 on_train_batch_end=None, on_batch_end=None, **kwargs):
        super().__init__()
        self._batch = on_train_batch_end or on_batch_end
        for name, fn in (("on_epoch_begin", on_epoch_begin), ("on_epoch_end", on_epoch_end),
                         ("on_train_begin", on_train_begin), ("on_train_end", on_train_end),
                         ("on_train_batch_end", self._batch)):
            if fn is not None:
                setattr(self, name, fn)

    def _wants_batch(self):
        return self._batch is not None


class History(Callback):
    """What fit returns: ``history`` (metric name -> one value per epoch) and ``epoch``."""

    def __init__(self, epoch=None, history=None, model=None):
        super().__init__()
        self.epoch = list(epoch or [])
        self.history = dict(history or {})
        self.model = model

    def __repr__(self):
        return f"<History epochs={len(self.epoch)} keys={sorted(self.history)}>"


class _Builtin(Callback):
    """A callback that runs in C++ (its hooks are not Python methods)."""

    def __init__(self, cc):
        super().__init__()
        self._cc = cc


class EarlyStopping(_Builtin):
    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto", baseline=None,
                 restore_best_weights=False, start_from_epoch=0):
        if baseline is not None:
            raise NotImplementedError("EarlyStopping: baseline is not supported")
        super().__init__(_k.EarlyStopping(monitor, float(min_delta), int(patience), mode, bool(restore_best_weights),
                                          int(start_from_epoch)))


class ModelCheckpoint(_Builtin):
    """Saves after each epoch: a path ending in .h5 as a Keras weight file, others as a Strata
    checkpoint. ``{epoch}`` / ``{epoch:02d}`` in filepath is the 1-based epoch."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False, save_weights_only=True,
                 mode="auto", save_freq="epoch"):
        if save_freq != "epoch":
            raise NotImplementedError("ModelCheckpoint: only save_freq='epoch' is supported (BackupAndRestore saves by steps)")
        import re
        path = re.sub(r"\{epoch(:[^}]*)?\}", "{epoch}", str(filepath))
        super().__init__(_k.ModelCheckpoint(path, monitor, bool(save_best_only), mode, int(verbose)))


class ReduceLROnPlateau(_Builtin):
    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto", min_delta=1e-4,
                 cooldown=0, min_lr=0.0):
        super().__init__(_k.ReduceLROnPlateau(monitor, float(factor), int(patience), mode, float(min_delta),
                                              int(cooldown), float(min_lr), int(verbose)))


class CSVLogger(_Builtin):
    def __init__(self, filename, separator=",", append=False):
        if separator != ",":
            raise NotImplementedError("CSVLogger: only separator=',' is supported")
        super().__init__(_k.CSVLogger(str(filename), bool(append)))


class TerminateOnNaN(_Builtin):
    def __init__(self):
        super().__init__(_k.TerminateOnNaN())


class BackupAndRestore(_Builtin):
    """Resumes a killed or interrupted fit from ``backup_dir`` (weights, optimizer, epoch, step
    and the input position). save_freq: "epoch" or a number of steps."""

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True):
        freq = 0 if save_freq == "epoch" else int(save_freq)
        super().__init__(_k.BackupAndRestore(str(backup_dir), freq, bool(delete_checkpoint)))


class TensorBoard(_Builtin):
    def __init__(self, log_dir="logs", update_freq="epoch", **kwargs):
        freq = 0 if update_freq == "epoch" else int(update_freq)
        super().__init__(_k.TensorBoard(str(log_dir), freq))


class LearningRateScheduler(Callback):
    """Sets the learning rate at each epoch's start to ``schedule(epoch, lr)`` (or ``schedule(epoch)``)."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        self.schedule = schedule
        self.verbose = verbose

    def on_epoch_begin(self, epoch, logs=None):
        try:
            lr = self.schedule(epoch, self.model.learning_rate)
        except TypeError:
            lr = self.schedule(epoch)
        lr = float(lr)
        self.model._cc.set_learning_rate_override(lr)
        if self.verbose:
            print(f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {lr}.")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = self.model.learning_rate
