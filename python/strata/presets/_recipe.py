"""The recipe machinery behind strata.train(...) and strata.presets: one home for both, over the
library's train::Recipe and train::Trainer (strata/train/), which `strata train` runs too."""
from .. import _strata
from ..keras.optimizers import schedules as _schedules

_t = _strata.train

Recipe = _t.Recipe


class TrainResult:
    """What strata.train(...) returns: ``history`` (Keras's History.history: per-epoch "loss",
    "accuracy", "val_loss", ...), ``val_loss``/``val_accuracy``/``val_f1_macro`` on ``val`` after
    training (``val_accuracy_tta`` with ``tta="flip"``: each image's prediction the mean over it
    and its mirror image; 0 without), ``model_path`` (load it with ``strata evaluate --model``), ``replicas``,
    ``global_batch``, ``steps_per_epoch``, ``train_seconds`` (validation left out), ``validation_seconds``, ``images_per_second``,
    ``seconds_at_epoch_end`` and ``chief`` (False on the other workers of an MPI job)."""

    def __init__(self, report):
        self.__dict__.update(report)

    def __repr__(self):
        return (f"<TrainResult {self.model_path} val_accuracy={self.val_accuracy:.4f} "
                f"images/s={self.images_per_second:.0f}>")


def _override(r, overrides, where):
    """Sets ``overrides`` on the Recipe ``r``: a keyword that is no field is a TypeError listing them."""
    unknown = sorted(k for k in overrides if k not in Recipe.fields())
    if unknown:
        raise TypeError(f"{where}: unexpected keyword argument(s) {', '.join(unknown)}; a recipe has "
                        f"{', '.join(Recipe.fields())}")
    for key, value in overrides.items():
        setattr(r, key, list(value) if key == "metrics" else value)
    return r


def recipe(preset=None, **overrides):
    """The recipe a preset names ("fashion_mnist", the default, or "flowers") with ``overrides``
    set: one keyword per field of train::Recipe, as `strata train`'s flags with underscores."""
    return _override(_t.preset(preset or ""), overrides, "recipe")


def train(recipe_=None, *, preset=None, **overrides):
    """Trains as ``strata train`` does with the same flags (keywords: the flags' names with
    underscores) and returns a TrainResult. Same seed and flags, same weights, bit for bit.

        strata.train(preset="flowers", model="efficientnet_b0", data="/data/train/*.tfrec",
                     val="/data/val/*.tfrec", weights="efficientnet_b0_notop.h5",
                     freeze_until="top_activation", freeze_backbone_epochs=2)

    ``recipe_`` may be a Recipe (strata.presets.flowers.recipe(...)); keywords then override it."""
    if recipe_ is not None:
        if not isinstance(recipe_, Recipe):
            raise TypeError(f"train: expected a strata.presets Recipe, got {type(recipe_).__name__}")
        if preset is not None:
            raise TypeError("train: pass a recipe or preset=, not both")
        r = _override(recipe_.copy(), overrides, "train")
    else:
        r = recipe(preset, **overrides)
    return TrainResult(_t.run(r))


class Schedule(_schedules.LearningRateSchedule):
    """A recipe's learning-rate schedule (computed in C++): ``schedule(step)`` is the rate at that
    global step; pass it as any strata.keras optimizer's ``learning_rate``."""

    def __init__(self, cc):
        self._cc = cc

    def __call__(self, step):
        return self._cc(int(step))

    @property
    def description(self):
        return self._cc.description

    def _spec(self):
        return self._cc

    def __repr__(self):
        return f"<Schedule {self.description}>"


class Preset:
    """One preset's recipe and its pieces: ``recipe()``, ``dataset()``, ``schedule()``, ``model()``.
    Each takes the recipe's fields as keywords, so the pieces agree with strata.train(...)."""

    def __init__(self, name):
        self.name = name

    def recipe(self, **overrides):
        """The preset's recipe with ``overrides`` (a train::Recipe)."""
        return recipe(self.name, **overrides)

    def _resolved(self, overrides, make_data=True):
        r = self.recipe(**overrides)
        _t.resolve_inputs(r, make_data)
        return r

    def dataset(self, pattern=None, training=True, replicas=None, **overrides):
        """The preset's input pipeline (a strata.data.Dataset of (images, labels) batches of
        ``batch_per_replica`` x ``replicas`` images): over ``pattern``, else the recipe's ``data``
        (``val`` when not ``training``); Fashion-MNIST's TFRecords when the recipe has none."""
        from ..data import Dataset, _Leaf
        if pattern and not overrides.get("data"):
            overrides = dict(overrides, data=pattern)  # its first record says the channels
        r = self._resolved(overrides)
        pattern = pattern or (r.data if training else r.val)
        replicas = replicas or r.replicas or _t.usable_cores()
        return Dataset(_t.make_dataset(r, pattern, int(replicas), bool(training)), (_Leaf(), _Leaf()))

    def schedule(self, steps_per_epoch, replicas=None, **overrides):
        """The preset's learning-rate schedule for ``steps_per_epoch`` steps an epoch and
        ``replicas`` replicas in sync (default: this machine's usable cores)."""
        r = self.recipe(**overrides)
        replicas = replicas or r.replicas or _t.usable_cores()
        return Schedule(_t.make_schedule(r, int(steps_per_epoch), int(replicas)))

    def model(self, **overrides):
        """The preset's model (uncompiled strata.keras.Model), built for the recipe's image size,
        channels and classes as `strata train` builds it."""
        from ..keras.models import Model
        r = self._resolved(overrides, make_data=False)
        return Model(_cc=_t.make_model(r))

    def __repr__(self):
        return f"<strata.presets.{self.name}>"
