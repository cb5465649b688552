"""strata.keras's Adam, AdamW and RMSprop against Keras's published update rules (issue 36).

The oracle (`KerasOptimizer` below) is a NumPy transcription, in float64, of Keras 3's
`keras/src/optimizers/{adam,adamw,rmsprop,base_optimizer}.py` and
`schedules/learning_rate_schedule.py` (the rules Keras 2.11+'s optimizers share), written from
that source and its docstrings, not from Strata's code. Keras's own words, step by step:

- `BaseOptimizer.apply`: `lr = schedule(iterations)` (the step count *before* this update),
  `grads = _clip_gradients(grads)` (clipnorm: each variable's `g * c / max(||g||, c)`;
  global_clipnorm: every gradient times `c * min(1 / N, 1 / c)`, N the norm of them all), then
  `_apply_weight_decay`: `variable - variable * wd * lr` for *every* optimizer given a
  weight_decay (decoupled; AdamW is Adam with weight_decay required), then `update_step`,
  then `iterations += 1`.
- Adam: `t = iterations + 1`, `alpha = lr * sqrt(1 - b2^t) / (1 - b1^t)`,
  `m += (g - m)(1 - b1)`, `v += (g^2 - v)(1 - b2)`, `w -= m alpha / (sqrt(v) + eps)`: epsilon is
  "epsilon hat", added to sqrt(v) *outside* the bias correction (PyTorch adds its eps to
  sqrt(v / (1 - b2^t)), so torch's eps is Keras's divided by sqrt(1 - b2^t)).
- RMSprop: `vel = rho vel + (1 - rho) g^2`, `inc = lr g / sqrt(vel + eps)` (epsilon *inside* the
  square root, unlike PyTorch's `sqrt(vel) + eps` and unlike Keras 2's legacy optimizer_v2
  RMSprop without momentum), with momentum `mom = momentum mom + inc; w -= mom` (the learning
  rate is inside the momentum, unlike PyTorch's), else `w -= inc`.

The oracle is itself checked twice: against the numbers Keras publishes for these optimizers
(its docstring example and the golden values of its optimizer tests, at their tolerances), and
against PyTorch 1.13's Adam, AdamW and RMSprop where the rules coincide (torch's eps set each
step to Keras's eps / sqrt(1 - b2^t); RMSprop with eps = 0 and a constant learning rate).

Strata is driven through its Python API: a Dense layer (kernel [3, 4] and bias [4]: two
variables, so clipnorm's per-variable norms differ from the global one) set to known weights;
each step writes chosen gradients into `model.gradients()` and calls `apply_gradients()`; the
weights after every step must equal the oracle's to |strata - keras| <= 1e-6 + 1e-6 |keras|
(float32 weights of magnitude <= ~3 against a float64 oracle). The gradients span signs and
magnitudes 1e-9..10 with exact zeros, so that epsilon dominates some elements and not others;
hyperparameters are mostly dyadic (0.875, 0.984375, ...) so that float32's rounding of beta_2
(1 - 0.999f is 1.3e-5 off 0.001) does not blur the 1e-6 comparison.
"""
import math

import numpy as np
import pytest

import strata
from strata.keras import layers

OPT = strata.keras.optimizers
IN, UNITS = 3, 4
RTOL = ATOL = 1e-6


# ---- the oracle: Keras 3's rules in NumPy (float64) -------------------------------------------

class ExponentialDecay:
    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False):
        self.a = (initial_learning_rate, decay_steps, decay_rate, staircase)

    def __call__(self, step):
        lr, steps, rate, staircase = self.a
        p = step / steps
        return lr * rate ** (math.floor(p) if staircase else p)


class PiecewiseConstantDecay:
    def __init__(self, boundaries, values):
        self.boundaries, self.values = boundaries, values

    def __call__(self, step):  # values[0] while step <= boundaries[0], ..., values[-1] after the last
        for b, v in zip(self.boundaries, self.values):
            if step <= b:
                return v
        return self.values[-1]


class CosineDecay:
    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, warmup_target=None, warmup_steps=0):
        self.a = (initial_learning_rate, decay_steps, alpha, warmup_target, warmup_steps)

    def __call__(self, step):
        initial, decay_steps, alpha, target, warmup_steps = self.a

        def decay(s, frm):
            cosine = 0.5 * (1.0 + math.cos(math.pi * s / decay_steps))
            return frm * ((1 - alpha) * cosine + alpha)

        if target is None:
            return decay(min(step, decay_steps), initial)
        step = min(step, decay_steps + warmup_steps)
        if step < warmup_steps:
            return (target - initial) * (step / warmup_steps) + initial
        return decay(step - warmup_steps, target)


class KerasOptimizer:
    """Keras 3's Adam / AdamW / RMSprop on float64 copies of the variables."""

    def __init__(self, kind, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False,
                 rho=0.9, momentum=0.0, centered=False, weight_decay=None, clipnorm=None, global_clipnorm=None,
                 use_ema=False, ema_momentum=0.99, ema_overwrite_frequency=None):
        if kind == "AdamW" and weight_decay is None:
            weight_decay = 0.004  # AdamW's default (and it refuses None)
        self.kind, self.lr = kind, learning_rate
        self.beta_1, self.beta_2, self.epsilon, self.amsgrad = beta_1, beta_2, epsilon, amsgrad
        self.rho, self.momentum, self.centered = rho, momentum, centered
        self.weight_decay, self.clipnorm, self.global_clipnorm = weight_decay, clipnorm, global_clipnorm
        self.use_ema, self.ema_momentum, self.ema_overwrite_frequency = use_ema, ema_momentum, ema_overwrite_frequency
        self.iterations = 0
        self.slots = None

    def learning_rate(self):
        return self.lr(self.iterations) if callable(self.lr) else self.lr

    def clip(self, grads):
        if self.clipnorm:
            c = self.clipnorm
            return [g * c / max(np.sqrt(np.sum(g * g)), c) for g in grads]
        if self.global_clipnorm:
            c = self.global_clipnorm
            norm = np.sqrt(sum(np.sum(g * g) for g in grads))
            return [g * (c * min(1.0 / norm, 1.0 / c)) for g in grads]
        return grads

    def apply(self, grads, variables):
        grads = [np.asarray(g, np.float64) for g in grads]
        if self.slots is None:
            self.slots = [dict(m=np.zeros_like(v), v=np.zeros_like(v), vhat=np.zeros_like(v), mom=np.zeros_like(v),
                               avg=np.zeros_like(v)) for v in variables]
        lr = self.learning_rate()
        grads = self.clip(grads)
        if self.weight_decay is not None:
            for w in variables:
                w -= w * self.weight_decay * lr
        for g, w, s in zip(grads, variables, self.slots):
            if self.kind in ("Adam", "AdamW"):
                t = self.iterations + 1
                alpha = lr * math.sqrt(1 - self.beta_2 ** t) / (1 - self.beta_1 ** t)
                s["m"] += (g - s["m"]) * (1 - self.beta_1)
                s["v"] += (g * g - s["v"]) * (1 - self.beta_2)
                v = s["v"]
                if self.amsgrad:
                    s["vhat"] = np.maximum(s["vhat"], v)
                    v = s["vhat"]
                w -= s["m"] * alpha / (np.sqrt(v) + self.epsilon)
            elif self.kind == "RMSprop":
                s["v"][...] = self.rho * s["v"] + (1 - self.rho) * g * g
                if self.centered:
                    s["avg"][...] = self.rho * s["avg"] + (1 - self.rho) * g
                    denominator = s["v"] - s["avg"] ** 2 + self.epsilon
                else:
                    denominator = s["v"] + self.epsilon
                increment = lr * g / np.sqrt(denominator)
                if self.momentum > 0:
                    s["mom"][...] = self.momentum * s["mom"] + increment
                    w -= s["mom"]
                else:
                    w -= increment
            else:
                raise ValueError(self.kind)
        if self.use_ema:  # _update_model_variables_moving_average, then the periodic overwrite
            m = 0.0 if self.iterations == 0 else self.ema_momentum
            for w, s in zip(variables, self.slots):
                s["ema"] = m * s.get("ema", np.zeros_like(w)) + (1 - m) * w
            if self.ema_overwrite_frequency and (self.iterations + 1) % self.ema_overwrite_frequency == 0:
                for w, s in zip(variables, self.slots):
                    w[...] = s["ema"]
        self.iterations += 1


def keras_run(kind, kwargs, w0, grad_steps):
    """The oracle's weights after each step: [step][variable] arrays."""
    opt = KerasOptimizer(kind, **kwargs)
    ws = [np.array(w, np.float64) for w in w0]
    out = []
    for grads in grad_steps:
        opt.apply(grads, ws)
        out.append([w.copy() for w in ws])
    return out


# ---- the oracle against Keras's published numbers -----------------------------------------------

def keras_test_case(kind, kwargs, steps=1):
    """Keras's optimizer tests: variables [1, 2, 3, 4], gradients [1, 6, 7, 2], one step."""
    return keras_run(kind, kwargs, [[1.0, 2.0, 3.0, 4.0]], [[[1.0, 6.0, 7.0, 2.0]]] * steps)[-1][0]


def keras_golden(kind, kwargs):
    """Keras's golden tests: x = ones(10), a step on 0.01 each, then steps on 0.1, 0.2, ..., 1.0;
    the values after each of the first five steps."""
    grads = [[np.full(10, 0.01)]] + [[np.arange(1, 11) / 10]] * 4
    return np.array([s[0] for s in keras_run(kind, kwargs, [np.ones(10)], grads)])


def test_the_oracle_reproduces_keras_published_numbers():
    # keras/src/optimizers/*_test.py, test_single_step (atol = rtol = 1e-4 there).
    np.testing.assert_allclose(keras_test_case("Adam", dict(learning_rate=0.5)), [0.5, 1.5, 2.5, 3.5], atol=1e-4)
    np.testing.assert_allclose(keras_test_case("AdamW", dict(learning_rate=0.5)), [0.4980, 1.4960, 2.494, 3.492],
                               atol=1e-4)
    np.testing.assert_allclose(keras_test_case("RMSprop", dict(learning_rate=0.5)),
                               [-0.5811, 0.4189, 1.4189, 2.4189], atol=1e-4)
    # RMSprop's docstring: var1 = 10, loss var1^2 / 2 (gradient = var1), RMSprop(0.1) -> 9.683772.
    assert keras_run("RMSprop", dict(learning_rate=0.1), [[10.0]], [[[10.0]]])[0][0][0] == pytest.approx(9.683772, abs=1e-6)
    # test_weight_decay: 2.0 decayed by three optimizers (lr 1, wd 0.004, zero gradient) -> 1.9760959,
    # the same for Adam, AdamW and RMSprop: Keras's weight_decay is decoupled for all of them.
    for kind in ("Adam", "AdamW", "RMSprop"):
        w = [np.array(2.0)]
        for _ in range(3):
            KerasOptimizer(kind, learning_rate=1.0, weight_decay=0.004).apply([np.array(0.0)], w)
        assert w[0] == pytest.approx(1.9760959, abs=1e-6), kind
    # test_correctness_with_golden (rtol = atol = 5e-4 there).
    np.testing.assert_allclose(keras_golden("Adam", dict(amsgrad=True)),
                               np.tile([[0.999], [0.9982], [0.9974], [0.9965], [0.9955]], (1, 10)), atol=5e-4)
    np.testing.assert_allclose(keras_golden("RMSprop", dict(centered=True)),
                               np.tile([[0.9967], [0.9933], [0.9908], [0.9885], [0.9864]], (1, 10)), atol=5e-4)
    np.testing.assert_allclose(keras_golden("AdamW", dict(learning_rate=1.0, weight_decay=0.5, epsilon=2)), [
        [0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998],
        [0.2486, 0.2475, 0.2463, 0.2451, 0.244, 0.2428, 0.2417, 0.2405, 0.2394, 0.2382],
        [0.1223, 0.1198, 0.1174, 0.1149, 0.1124, 0.11, 0.1075, 0.1051, 0.1027, 0.1003],
        [0.0586, 0.0549, 0.0512, 0.0475, 0.0439, 0.0402, 0.0366, 0.033, 0.0294, 0.0258],
        [0.0263, 0.0215, 0.0167, 0.012, 0.0073, 0.0026, -0.0021, -0.0067, -0.0113, -0.0159]], atol=5e-4)
    # test_clip_norm: clipnorm 1 on [100, 100] -> [sqrt(2)/2, sqrt(2)/2].
    np.testing.assert_allclose(KerasOptimizer("Adam", clipnorm=1).clip([np.array([100.0, 100.0])])[0],
                               [2 ** 0.5 / 2] * 2, rtol=1e-7)
    # The schedules' docstrings: PiecewiseConstantDecay([100000, 110000], [1.0, 0.5, 0.1]) and Keras's
    # CosineDecay with warm-up (tests/keras/schedules_test.cc's case).
    p = PiecewiseConstantDecay([100000, 110000], [1.0, 0.5, 0.1])
    assert [p(0), p(100000), p(100001), p(110000), p(110001)] == [1.0, 1.0, 0.5, 0.5, 0.1]
    c = CosineDecay(0.0, 100, warmup_target=0.1, warmup_steps=10)
    np.testing.assert_allclose([c(0), c(5), c(10), c(60), c(110), c(500)], [0, 0.05, 0.1, 0.05, 0, 0], atol=1e-12)


# ---- the oracle against PyTorch 1.13 --------------------------------------------------------------

def gradient_steps(seed, steps, shapes=((IN, UNITS), (UNITS,)), scale=1.0, zeros=True):
    """Per step, one gradient per variable: random signs, magnitudes 10^U(-9, 1) (epsilon dominates
    the small ones), a few exact zeros; `scale` multiplies a step's gradients (clipping cases)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(steps):
        step = []
        for shape in shapes:
            g = rng.choice([-1.0, 1.0], size=shape) * 10.0 ** rng.uniform(-9, 1, size=shape)
            if zeros:
                g[rng.random(shape) < 0.1] = 0.0
            s = scale[t % len(scale)] if isinstance(scale, (list, tuple)) else scale
            step.append((g * s).astype(np.float32))
        out.append(step)
    return out


def initial_weights(seed=7):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-2, 2, (IN, UNITS)).astype(np.float32), rng.uniform(-2, 2, (UNITS,)).astype(np.float32)]


def torch_run(kind, kwargs, w0, grad_steps, keras_epsilon=True):
    """PyTorch's optimizer on float64 tensors. keras_epsilon: Adam's eps is set each step to
    Keras's eps / sqrt(1 - b2^t), which puts it where Keras adds it."""
    import torch  # Debian's python3-torch (scripts/deps.sh)

    torch.set_num_threads(1)
    params = [torch.tensor(np.asarray(w, np.float64), requires_grad=True) for w in w0]
    lr = kwargs.get("learning_rate", 0.001)
    schedule = lr if callable(lr) else (lambda step: lr)
    if kind in ("Adam", "AdamW"):
        b1, b2, eps = kwargs.get("beta_1", 0.9), kwargs.get("beta_2", 0.999), kwargs.get("epsilon", 1e-7)
        wd = kwargs.get("weight_decay", 0.004 if kind == "AdamW" else None)
        cls = torch.optim.AdamW if wd is not None else torch.optim.Adam  # torch's AdamW decays as Keras's weight_decay
        opt = cls(params, lr=schedule(0), betas=(b1, b2), eps=eps, weight_decay=wd or 0.0)
    else:
        opt = torch.optim.RMSprop(params, lr=schedule(0), alpha=kwargs.get("rho", 0.9), eps=kwargs.get("epsilon", 1e-7),
                                  momentum=kwargs.get("momentum", 0.0), centered=kwargs.get("centered", False))
    out = []
    for i, grads in enumerate(grad_steps):
        for p, g in zip(params, grads):
            p.grad = torch.tensor(np.asarray(g, np.float64))
        for group in opt.param_groups:
            group["lr"] = schedule(i)
            if kind in ("Adam", "AdamW") and keras_epsilon:
                group["eps"] = eps / math.sqrt(1 - b2 ** (i + 1))
        opt.step()
        out.append([p.detach().numpy().copy() for p in params])
    return out


TORCH_CASES = {
    "adam": ("Adam", dict(learning_rate=0.0625, beta_1=0.875, beta_2=0.984375)),
    "adam_defaults": ("Adam", dict()),
    "adam_big_epsilon": ("Adam", dict(learning_rate=0.03125, beta_1=0.75, beta_2=0.9375, epsilon=0.01)),
    "adam_schedule": ("Adam", dict(learning_rate=ExponentialDecay(0.125, 2, 0.5), beta_1=0.8, beta_2=0.99)),
    "adam_weight_decay": ("Adam", dict(learning_rate=0.0625, weight_decay=0.25)),
    "adamw": ("AdamW", dict(learning_rate=0.0625, weight_decay=0.25, beta_1=0.875, beta_2=0.984375)),
    "adamw_warmup": ("AdamW", dict(learning_rate=CosineDecay(0.01, 4, 0.125, warmup_target=0.1, warmup_steps=2))),
    # torch's RMSprop adds eps outside the square root and keeps lr outside its momentum buffer:
    # the rules coincide with eps = 0 and a constant learning rate.
    "rmsprop": ("RMSprop", dict(learning_rate=0.015625, rho=0.75, epsilon=0.0)),
    "rmsprop_momentum": ("RMSprop", dict(learning_rate=0.03125, rho=0.875, momentum=0.75, epsilon=0.0)),
    "rmsprop_centered": ("RMSprop", dict(learning_rate=0.03125, rho=0.875, momentum=0.5, centered=True, epsilon=0.0)),
    "rmsprop_schedule": ("RMSprop", dict(learning_rate=PiecewiseConstantDecay([1, 3], [0.1, 0.05, 0.025]),
                                         epsilon=0.0)),
}


@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_the_oracle_agrees_with_pytorch_where_the_rules_coincide(case):
    kind, kwargs = TORCH_CASES[case]
    grads = gradient_steps(1, 6, zeros=kind != "RMSprop")  # eps = 0: no 0 / 0
    keras, torch = keras_run(kind, kwargs, initial_weights(), grads), torch_run(kind, kwargs, initial_weights(), grads)
    for step, (k, t) in enumerate(zip(keras, torch)):
        for v, (kv, tv) in enumerate(zip(k, t)):
            np.testing.assert_allclose(kv, tv, rtol=1e-12, atol=1e-12, err_msg=f"{case}: step {step + 1}, variable {v}")


def test_epsilon_placement_differs_from_pytorch_and_matters():
    """The same epsilon in both frameworks: Keras's Adam adds it outside the bias correction and
    Keras 3's RMSprop inside the square root; PyTorch, eps as given, moves weights with tiny
    gradients (1e-7) over 3 times as far for Adam, over 100 times for RMSprop (so the oracle is not
    PyTorch under another name)."""
    grads = [[np.full(4, 1e-7)]] * 3
    for kind, kwargs, factor in (("Adam", dict(learning_rate=0.0625, beta_1=0.875, beta_2=0.984375, epsilon=1e-7), 3),
                                 ("RMSprop", dict(learning_rate=0.0625, epsilon=1e-7), 100)):
        keras = keras_run(kind, kwargs, [np.zeros(4)], grads)[-1][0]
        torch = torch_run(kind, kwargs, [np.zeros(4)], grads, keras_epsilon=False)[-1][0]
        assert np.all(np.abs(torch) > factor * np.abs(keras)), (kind, keras, torch)


# ---- Strata against the oracle ---------------------------------------------------------------------

def strata_schedule(schedule):
    """The oracle's schedule as strata.keras.optimizers.schedules' class of the same name."""
    if not callable(schedule):
        return schedule
    cls = getattr(OPT.schedules, type(schedule).__name__)
    if isinstance(schedule, PiecewiseConstantDecay):
        return cls(schedule.boundaries, schedule.values)
    if isinstance(schedule, ExponentialDecay):
        lr, steps, rate, staircase = schedule.a
        return cls(lr, steps, rate, staircase=staircase)
    lr, steps, alpha, target, warmup = schedule.a
    return cls(lr, steps, alpha=alpha, warmup_target=target, warmup_steps=warmup)


def strata_run(kind, kwargs, w0, grad_steps, use_bias=True):
    """Strata's weights after each step, and the learning rate it fed each step."""
    strata_kwargs = dict(kwargs)
    if "learning_rate" in strata_kwargs:
        strata_kwargs["learning_rate"] = strata_schedule(strata_kwargs["learning_rate"])
    units = w0[0].shape[1]
    model = strata.keras.Sequential([strata.keras.Input(shape=(w0[0].shape[0],)),
                                     layers.Dense(units, use_bias=use_bias)])
    model.compile(optimizer=getattr(OPT, kind)(**strata_kwargs), loss="mse", seed=1)
    views = [a for _, a in model.weights]
    assert [v.shape for v in views] == [np.shape(w) for w in w0]
    for v, w in zip(views, w0):
        v[...] = w
    x, y = np.zeros((2, w0[0].shape[0]), np.float32), np.zeros((2, units), np.float32)
    weights, rates = [], []
    for grads in grad_steps:
        rates.append(model.learning_rate)
        model.compute_gradients(x, y)
        g = model.gradients()
        g[:] = np.concatenate([np.ravel(gi) for gi in grads])  # the trainable block: kernel, then bias
        model.apply_gradients()
        weights.append(model.get_weights())
    return weights, rates


def assert_matches_keras(case, kind, kwargs, w0, grads, use_bias=True):
    keras = keras_run(kind, kwargs, w0, grads)
    got, rates = strata_run(kind, kwargs, w0, grads, use_bias)
    schedule = kwargs.get("learning_rate", 0.001)
    want_rates = [schedule(i) if callable(schedule) else schedule for i in range(len(grads))]
    np.testing.assert_allclose(rates, want_rates, rtol=1e-6, err_msg=f"{case}: the learning rate fed each step")
    for step, (k, s) in enumerate(zip(keras, got)):
        for v, (kv, sv) in enumerate(zip(k, s)):
            np.testing.assert_allclose(sv, kv, rtol=RTOL, atol=ATOL,
                                       err_msg=f"{case}: step {step + 1}, variable {('kernel', 'bias')[v]}")


# name -> (optimizer, its keyword arguments, gradient scale per step)
CASES = {
    "adam_defaults": ("Adam", dict(), 1.0),
    "adam": ("Adam", dict(learning_rate=0.0625, beta_1=0.875, beta_2=0.984375), 1.0),
    "adam_big_epsilon": ("Adam", dict(learning_rate=0.03125, beta_1=0.75, beta_2=0.9375, epsilon=0.01), 1.0),
    "adam_exponential_decay": ("Adam", dict(learning_rate=ExponentialDecay(0.125, 2, 0.5), beta_1=0.75,
                                            beta_2=0.96875), 1.0),
    "adam_exponential_staircase": ("Adam", dict(learning_rate=ExponentialDecay(0.125, 2, 0.5, staircase=True),
                                                beta_1=0.875, beta_2=0.9921875), 1.0),
    "adam_clipnorm": ("Adam", dict(learning_rate=0.0625, beta_1=0.875, beta_2=0.984375, clipnorm=0.5),
                      [10.0, 0.01, 3.0]),
    "adam_global_clipnorm": ("Adam", dict(learning_rate=0.0625, beta_1=0.875, beta_2=0.984375, global_clipnorm=1.0),
                             [10.0, 0.01, 3.0]),
    "adamw": ("AdamW", dict(learning_rate=0.0625, weight_decay=0.25, beta_1=0.875, beta_2=0.984375), 1.0),
    "adamw_default_decay": ("AdamW", dict(learning_rate=0.03125), 1.0),
    "adamw_cosine_warmup": ("AdamW", dict(learning_rate=CosineDecay(0.01, 4, 0.125, warmup_target=0.1, warmup_steps=2),
                                          weight_decay=0.5, beta_1=0.875, beta_2=0.984375), 1.0),
    "adamw_piecewise_clipnorm": ("AdamW", dict(learning_rate=PiecewiseConstantDecay([1, 3], [0.1, 0.05, 0.025]),
                                               weight_decay=0.125, beta_1=0.75, beta_2=0.9375, clipnorm=0.75),
                                 [10.0, 0.01, 3.0]),
    "rmsprop_defaults": ("RMSprop", dict(), 1.0),
    "rmsprop": ("RMSprop", dict(learning_rate=0.015625, rho=0.75), 1.0),
    "rmsprop_big_epsilon": ("RMSprop", dict(learning_rate=0.0625, rho=0.875, epsilon=0.0625), 1.0),
    "rmsprop_momentum": ("RMSprop", dict(learning_rate=0.03125, rho=0.875, momentum=0.75), 1.0),
    "rmsprop_momentum_piecewise": ("RMSprop", dict(learning_rate=PiecewiseConstantDecay([1, 3], [0.1, 0.05, 0.025]),
                                                   rho=0.75, momentum=0.5), 1.0),
    "rmsprop_cosine": ("RMSprop", dict(learning_rate=CosineDecay(0.0625, 3, alpha=0.25), rho=0.875), 1.0),
    "rmsprop_global_clipnorm": ("RMSprop", dict(learning_rate=0.03125, rho=0.75, momentum=0.25, global_clipnorm=2.0),
                                [10.0, 0.01, 3.0]),
    # Keras's CosineDecay with a warmup_target and warmup_steps=0 decays from warmup_target.
    "adam_cosine_target_without_warmup": ("Adam", dict(learning_rate=CosineDecay(0.0, 4, warmup_target=0.125),
                                                       beta_1=0.875, beta_2=0.984375), 1.0),
    # Keras 3's weight_decay is decoupled on every optimizer (w -= w wd lr before the update,
    # base_optimizer._apply_weight_decay): Adam's is AdamW's.
    "adam_weight_decay": ("Adam", dict(learning_rate=0.0625, beta_1=0.875, beta_2=0.984375, weight_decay=0.25), 1.0),
    "rmsprop_weight_decay": ("RMSprop", dict(learning_rate=0.03125, rho=0.75, weight_decay=0.25), 1.0),
    # use_ema: the weights take the moving average after updates 3 and 6 (Keras 3's
    # base_optimizer: the average starts at the weights on the first update).
    "adam_ema_overwrite": ("Adam", dict(learning_rate=0.0625, beta_1=0.875, beta_2=0.984375, use_ema=True,
                                        ema_momentum=0.75, ema_overwrite_frequency=3), 1.0),
    "rmsprop_ema_overwrite": ("RMSprop", dict(learning_rate=0.03125, rho=0.75, momentum=0.5, use_ema=True,
                                              ema_momentum=0.5, ema_overwrite_frequency=2), 1.0),
}

@pytest.mark.parametrize("case", sorted(CASES))
def test_strata_follows_keras_update_rule(case):
    kind, kwargs, scale = CASES[case]
    assert_matches_keras(case, kind, kwargs, initial_weights(), gradient_steps(2, 7, scale=scale))


@pytest.mark.parametrize("kind, kwargs, expected", [
    # test_single_step of keras/src/optimizers/{adam,adamw,rmsprop}_test.py
    ("Adam", dict(learning_rate=0.5), [0.5, 1.5, 2.5, 3.5]),
    ("AdamW", dict(learning_rate=0.5), [0.4980, 1.4960, 2.494, 3.492]),
    ("RMSprop", dict(learning_rate=0.5), [-0.5811, 0.4189, 1.4189, 2.4189]),
])
def test_strata_reproduces_keras_single_step_tests(kind, kwargs, expected):
    got, _ = strata_run(kind, kwargs, [np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)],
                        [[np.array([1.0, 6.0, 7.0, 2.0], np.float32)]], use_bias=False)
    np.testing.assert_allclose(got[0][0].ravel(), expected, atol=1e-4)


def test_strata_reproduces_keras_adamw_golden_values():
    # AdamW(learning_rate=1.0, weight_decay=0.5, epsilon=2) from keras/src/optimizers/adamw_test.py
    grads = [[np.full(10, 0.01, np.float32)]] + [[(np.arange(1, 11) / 10).astype(np.float32)]] * 4
    got, _ = strata_run("AdamW", dict(learning_rate=1.0, weight_decay=0.5, epsilon=2),
                        [np.ones((1, 10), np.float32)], grads, use_bias=False)
    np.testing.assert_allclose([w[0].ravel() for w in got], keras_golden("AdamW", dict(
        learning_rate=1.0, weight_decay=0.5, epsilon=2)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[4][0].ravel()[[0, 5, 9]], [0.0263, 0.0026, -0.0159], atol=5e-4)


def test_fit_with_use_ema_ends_at_the_average():
    """Keras's finalize_variable_values: fit leaves the model at the weights' moving average. With
    ema_momentum 0 the average is the last update's weights, so the model is the same as without
    use_ema; with 0.9 it is not."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    y = (x @ rng.normal(size=(3, 2))).astype(np.float32)

    def fitted(**ema):
        model = strata.keras.Sequential([strata.keras.Input(shape=(3,)), layers.Dense(2)])
        model.compile(optimizer=OPT.SGD(learning_rate=0.05, momentum=0.5, **ema), loss="mse", seed=1)
        model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
        return model.get_weights()

    plain, zero, averaged = fitted(), fitted(use_ema=True, ema_momentum=0.0), fitted(use_ema=True)
    for a, b in zip(plain, zero):
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(plain, averaged))
    with pytest.raises(ValueError, match="ema_momentum"):
        OPT.SGD(use_ema=True, ema_momentum=1.5)


def test_strata_refuses_the_keras_options_it_lacks():
    """amsgrad and centered change the rule: refused, not ignored."""
    with pytest.raises(TypeError, match="amsgrad"):
        OPT.Adam(amsgrad=True)
    with pytest.raises(TypeError, match="centered"):
        OPT.RMSprop(centered=True)
