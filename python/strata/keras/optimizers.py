"""Keras optimizers (``strata.keras.optimizers``) and learning-rate schedules.

The update runs in C++, sharded over the replicas, at the scheduled rate; these objects only
describe it. ``compile(optimizer="adam")`` takes the Keras names too.
"""

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "get", "schedules"]


class Optimizer:
    """Base class: the learning rate (a number or a schedule) and Keras's clipping arguments."""

    _kind = None

    def __init__(self, learning_rate, weight_decay=None, clipnorm=None, global_clipnorm=None, use_ema=False,
                 ema_momentum=0.99, ema_overwrite_frequency=None, name=None, **kwargs):
        if clipnorm and global_clipnorm:
            raise ValueError(f"{type(self).__name__}: pass clipnorm or global_clipnorm, not both")
        if not 0 <= ema_momentum <= 1:
            raise ValueError(f"{type(self).__name__}: ema_momentum must be in [0, 1], got {ema_momentum}")
        if ema_overwrite_frequency is not None and (int(ema_overwrite_frequency) != ema_overwrite_frequency
                                                    or ema_overwrite_frequency < 1):
            raise ValueError(f"{type(self).__name__}: ema_overwrite_frequency must be None or a positive integer, "
                             f"got {ema_overwrite_frequency}")
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.clipnorm = clipnorm
        self.global_clipnorm = global_clipnorm
        # Keras's weight averaging: the moving average of the weights, which the model takes at
        # the end of fit (and every ema_overwrite_frequency steps).
        self.use_ema = bool(use_ema)
        self.ema_momentum = ema_momentum
        self.ema_overwrite_frequency = ema_overwrite_frequency
        self.name = name or self._kind

    def _spec(self):
        lr = self.learning_rate
        if isinstance(lr, schedules.LearningRateSchedule):
            lr = lr._spec()
        elif not isinstance(lr, (int, float)):
            raise TypeError(f"{type(self).__name__}: learning_rate must be a number or a "
                            f"strata.keras.optimizers.schedules schedule, got {type(lr).__name__}")
        spec = {k: v for k, v in vars(self).items() if v is not None and k not in ("name", "learning_rate")}
        spec.update(kind=self._kind, learning_rate=lr)
        return spec

    def __repr__(self):
        return f"<{self._kind} learning_rate={self.learning_rate}>"


class SGD(Optimizer):
    _kind = "SGD"

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.momentum = momentum
        self.nesterov = nesterov


class Adam(Optimizer):
    _kind = "Adam"

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon


class AdamW(Adam):
    _kind = "AdamW"

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, weight_decay=weight_decay,
                         **kwargs)


class RMSprop(Optimizer):
    _kind = "RMSprop"

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.rho, self.momentum, self.epsilon = rho, momentum, epsilon


_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop}


def get(identifier):
    """An optimizer from a Keras name ("adam", "sgd", "rmsprop", "adamw") or an Optimizer."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier.lower())
        if cls is None:
            raise ValueError(f"optimizer: unknown optimizer {identifier!r}; Strata has {', '.join(sorted(_BY_NAME))} "
                             f"(or pass a strata.keras.optimizers object)")
        return cls()
    raise TypeError(f"optimizer: expected a name or a strata.keras.optimizers object, got {type(identifier).__name__}")


class _Schedules:
    """``strata.keras.optimizers.schedules``: Keras's LearningRateSchedule classes Strata has."""

    class LearningRateSchedule:
        def _spec(self):
            return dict(vars(self), kind=type(self).__name__)

    class CosineDecay(LearningRateSchedule):
        def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name=None, warmup_target=None,
                     warmup_steps=0):
            self.initial_learning_rate, self.decay_steps, self.alpha = initial_learning_rate, int(decay_steps), alpha
            self.warmup_target, self.warmup_steps = warmup_target, int(warmup_steps)

    class ExponentialDecay(LearningRateSchedule):
        def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name=None):
            self.initial_learning_rate, self.decay_steps = initial_learning_rate, int(decay_steps)
            self.decay_rate, self.staircase = decay_rate, bool(staircase)

    class PiecewiseConstantDecay(LearningRateSchedule):
        def __init__(self, boundaries, values, name=None):
            if len(values) != len(boundaries) + 1:
                raise ValueError(f"PiecewiseConstantDecay: values needs one more entry than boundaries "
                                 f"({len(values)} values, {len(boundaries)} boundaries)")
            self.boundaries, self.values = [int(b) for b in boundaries], [float(v) for v in values]


schedules = _Schedules
