#!/usr/bin/python3
"""The cost model of Strata's data-parallel training step (docs/scaling.md).

  scaling_model.py fit MEASUREMENTS.jsonl [--algorithm auto|binomial|binomial-serial|ring|rabenseifner]
  scaling_model.py project MEASUREMENTS.jsonl --out-json F --plot PNG [options]
  scaling_model.py selftest

A step is the per-replica compute (the measured one-host step) plus the part of the gradient
all-reduce that is still running when the backward pass ends, plus the blocking all-reduce of
the batch-norm moving statistics. Each gradient bucket costs an alpha-beta all-reduce and starts
at max(its ready time, the previous bucket's end). Where the measured hosts share a core (more
namespaced hosts than cores), each exchange round of the all-reduce also waits tau for a peer
that is not running. `fit` finds alpha and beta per link rate from the runs of hosts with a core
each, then tau from the runs of hosts that share one, and compares predicted with measured step
times (a configuration measured several times counts once, as its median); `project` carries
the model to 2-1,024 hosts of 2-128 cores, each with cores of its own; `selftest` checks the
arithmetic on hand-computed cases.
"""
import argparse
import dataclasses
import json
import math
import sys

import numpy as np

MIB = 1 << 20
BUCKET_BYTES = 4 * MIB             # STRATA_ALLREDUCE_BUCKET_BYTES' default, which the runs are taken to use
UNSHAPED_BPS = 9e9                 # an unshaped veth between the namespaces moved about 9 Gbit/s
ALPHA_PRIOR_S = 50e-6              # where alpha stays when the runs cannot see it
TAU_PRIOR_S = 1e-3                 # where tau stays when no run has hosts sharing a core
WITHIN = 0.15                      # the bound on the prediction error
ALGORITHMS = ("binomial", "binomial-serial", "ring", "rabenseifner")
CPU = "AMD EPYC Zen 5 (family 26), 2-vCPU VM"
BACKWARD_END = 0.97                # of the compute step, where no run says: the update takes the rest


# --- The all-reduce of one message, and the bucket schedule ---------------------------------

def allreduce_s(algorithm, nbytes, p, alpha, beta):
    """Seconds to all-reduce nbytes (as sent) among p ranks (p a power of two).

    ring: 2(p-1) steps, each moving nbytes/p.
    rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather (libnbc's
      choice for >= 4 ranks, >= 64 KiB and a separate send buffer).
    binomial: libnbc's choice for MPI_IN_PLACE (Strata's buckets) or < 4 ranks: a binomial
      reduce to rank 0 (L = log2 p rounds of the whole message), then a binomial broadcast in
      which each rank posts the sends to all its children at once, so they share its link: the
      path 0 -> 1 -> 3 -> 7 ... carries L + (L - 1) + ... + 1 whole messages.
    binomial-serial: the same if a rank's link served its children one after another (the
      textbook broadcast, L rounds); the 4-host runs tell the two apart.
    """
    if p <= 1:
        return 0.0
    steps = math.ceil(math.log2(p))
    if algorithm == "ring":
        return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes * beta
    if algorithm == "rabenseifner":
        return 2 * steps * alpha + 2 * (p - 1) / p * nbytes * beta
    if algorithm == "binomial":
        return 2 * steps * alpha + (steps + steps * (steps + 1) / 2) * nbytes * beta
    if algorithm == "binomial-serial":
        return 2 * steps * (alpha + nbytes * beta)
    raise ValueError(f"unknown all-reduce algorithm {algorithm!r}")


def exchange_rounds(algorithm, p):
    """The message rounds of one all-reduce among p ranks: each a point where a rank waits for
    a peer's message (2(p - 1) for a ring, 2 log2 p for the others)."""
    if p <= 1:
        return 0
    return 2 * (p - 1) if algorithm == "ring" else 2 * math.ceil(math.log2(p))


def core_sharing_s(algorithm, p, hosts_per_core, tau):
    """What hosts sharing a core add to the step: with k hosts on a core the scheduler runs one
    at a time, so each exchange round of the last bucket waits about tau for each of the k - 1
    peers that are not running (they spin in MPI_Waitall or still compute). Real hosts have
    cores of their own (k = 1): the projection has no such term."""
    return (hosts_per_core - 1) * exchange_rounds(algorithm, p) * tau


def buckets_finish_s(ready_s, wire_bytes, algorithm, p, alpha, beta):
    """When the last bucket's all-reduce ends. Strata starts the buckets in order and MPI's
    link carries one at a time, so each starts at max(its ready time, the previous one's end)."""
    finish = 0.0
    for ready, nbytes in zip(ready_s, wire_bytes):
        finish = np.maximum(finish, ready) + allreduce_s(algorithm, nbytes, p, alpha, beta)
    return finish


def exposed_s(ready_s, wire_bytes, backward_end_s, algorithm, p, alpha, beta):
    """The all-reduce time the step waits for: what finishes after the backward pass ends."""
    return np.maximum(0.0, buckets_finish_s(ready_s, wire_bytes, algorithm, p, alpha, beta) - backward_end_s)


def bf16_unpack_s(grad_f32_bytes, core_bw):
    """After MPI_Waitall a bf16 wire is widened back to f32 (read half, write all), inside the wait."""
    return 1.5 * grad_f32_bytes / core_bw


def compute_time(one_host_step, replicas, cores_per_host, alone_step):
    """The compute a run's step is set against. The runs' own: n processes of a replica each, on
    the hosts' cores, without the network (alone_step). Files without it: the one-process run,
    which had a core per replica; each host has cores_per_host of a core, so it stretches by that."""
    if alone_step and replicas == 1:
        return alone_step
    return one_host_step * replicas / cores_per_host


# --- Measured runs --------------------------------------------------------------------------

@dataclasses.dataclass
class Run:
    model: str
    hosts: int
    replicas: int
    batch: int
    rate_bps: float                  # 0: unshaped veth
    wire: str
    step_s: float
    wait_s: float
    backward_end_s: float
    ready_s: np.ndarray              # bucket start times, from the step's first kernel
    wire_bytes: np.ndarray           # per bucket, as sent
    grad_f32_bytes: float
    stats_bytes: float               # moving statistics, all-reduced as f32 after the update
    one_host_step_s: float
    cores_per_host: float
    hosts_per_core: int = 1          # namespaced hosts on one core (2: 4 hosts on 2 cores)
    reps: int = 1                    # runs of this configuration (the figures are their medians)
    step_spread: float = 0.0         # (slowest - fastest) / median step over those runs
    cpu_share: float = 0.0           # of a core each host's worker used, measured (0: not recorded)
    alone_step_s: float = 0.0        # the slowest of n one-replica processes at once on the hosts' cores (0: not recorded)

    @property
    def compute_s(self):
        return compute_time(self.one_host_step_s, self.replicas, self.cores_per_host, self.alone_step_s)

    @property
    def nominal_bps(self):
        return self.rate_bps or UNSHAPED_BPS

    def label(self):
        return f"{self.model}, {self.hosts} hosts, {link_name(self.rate_bps)}, {self.wire}"


def link_name(rate_bps):
    if not rate_bps:
        return "unshaped"
    return f"{rate_bps / 1e9:g} Gbit/s" if rate_bps >= 1e9 else f"{rate_bps / 1e6:g} Mbit/s"


# The figures of a configuration's runs that are taken as their median; the rest (the bucket
# schedule, the workers' list) come from the run whose step is the median.
MEDIAN_FIELDS = ("step_ms", "images_per_second", "all_reduce_ms_per_step", "all_reduce_wait_ms_per_step",
                 "least_wait_ms_per_step", "backward_end_ms", "one_host_step_ms", "alone_step_ms", "cpu_share")


def configuration(r):
    return (r["model"], r.get("image_size"), r["hosts"], r["replicas_per_host"], r["batch_per_replica"],
            r["rate_bits_per_s"], r["wire"])


def median_rows(rows):
    """One row per configuration, in first-seen order: the median of its runs (REPS of
    bench/hosts_scaling.sh), with `reps` and `step_ms_runs` added."""
    groups = {}
    for r in rows:
        groups.setdefault(configuration(r), []).append(r)
    out = []
    for runs in groups.values():
        by_step = sorted(runs, key=lambda r: r["step_ms"])
        m = dict(by_step[(len(by_step) - 1) // 2])
        for field in MEDIAN_FIELDS:
            if all(field in r for r in runs):
                m[field] = float(np.median([r[field] for r in runs]))
        m["reps"] = len(runs)
        m["step_ms_runs"] = [r["step_ms"] for r in runs]
        out.append(m)
    return out


def step_spread(row):
    """(slowest - fastest) / median step of a configuration's runs (median_rows' row)."""
    steps = row.get("step_ms_runs", [row["step_ms"]])
    return (max(steps) - min(steps)) / row["step_ms"]


def read_rows(path):
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                rows.append(json.loads(line))
                rows[-1]["_line"] = number
    return rows


def load_runs(path):
    runs = []
    for r in median_rows(read_rows(path)):
        if not r.get("buckets"):  # the all-reduce after the backward pass (no overlap): not this model
            print(f"note: {path}:{r['_line']}: no bucket schedule, skipped", file=sys.stderr)
            continue
        try:
            runs.append(parse_run(r))
        except KeyError as e:
            sys.exit(f"{path}:{r['_line']}: missing field {e}")
    if not runs:
        sys.exit(f"{path}: no runs")
    return runs


def parse_run(r):
    bf16 = r["wire"] == "bf16"
    bucket_bytes = np.array([b["bytes"] for b in r["buckets"]], float)
    # The f32 gradient bytes, whichever unit the buckets were written in: a bf16 wire halves the
    # gradients and leaves the f32 moving statistics, so f32 minus wire bytes is half the gradients.
    grad = 2 * (r["all_reduce_bytes_per_step"] - r["wire_bytes_per_step"]) if bf16 else bucket_bytes.sum()
    scale = grad * (0.5 if bf16 else 1.0) / bucket_bytes.sum()
    return Run(
        model=r["model"], hosts=r["hosts"], replicas=r["replicas_per_host"],
        batch=r["batch_per_replica"], rate_bps=float(r["rate_bits_per_s"]), wire=r["wire"],
        # The slowest worker's wait (the network's alone; the chief's includes waiting for it).
        step_s=r["step_ms"] / 1e3, wait_s=r.get("least_wait_ms_per_step", r["all_reduce_wait_ms_per_step"]) / 1e3,
        backward_end_s=r["backward_end_ms"] / 1e3,
        ready_s=np.array([b["start_ms"] for b in r["buckets"]], float) / 1e3,
        wire_bytes=bucket_bytes * scale, grad_f32_bytes=grad,
        stats_bytes=max(0.0, r["all_reduce_bytes_per_step"] - grad),
        one_host_step_s=r["one_host_step_ms"] / 1e3, cores_per_host=r["cores_per_host"],
        hosts_per_core=max(1, round(1 / r.get("core_share", 1.0))), reps=r.get("reps", 1),
        step_spread=step_spread(r),
        cpu_share=r.get("cpu_share", 0.0), alone_step_s=r.get("alone_step_ms", 0.0) / 1e3)


def predict_wait_s(run, algorithm, alpha, beta, core_bw, tau=0.0):
    """The predicted time the step waits for the all-reduces (arrays when alpha, beta or tau are)."""
    wait = exposed_s(run.ready_s, run.wire_bytes, run.backward_end_s, algorithm, run.hosts, alpha, beta)
    wait = wait + allreduce_s(algorithm, run.stats_bytes, run.hosts, alpha, beta)
    wait = wait + core_sharing_s(algorithm, run.hosts, run.hosts_per_core, tau)
    return wait + (bf16_unpack_s(run.grad_f32_bytes, core_bw) if run.wire == "bf16" else 0.0)


# --- Fitting alpha and beta per link rate ---------------------------------------------------

@dataclasses.dataclass
class LinkFit:
    rate_bps: float
    alpha: float
    beta: float
    runs: list
    alpha_seen: bool                 # doubling and halving alpha / beta move some predicted wait by > 10 %
    beta_seen: bool
    at_grid_edge: bool
    beta_weight: float               # how sharply the runs pin beta: the loss's curvature in log beta
    tau: float = 0.0                 # the core-sharing term, fitted over every link's shared runs


def relative_loss(runs, predicted):
    """The fits' loss: squared error of the predicted wait, relative to the measured wait plus
    1 % of the step, averaged."""
    return sum(((p - r.wait_s) / (r.wait_s + 0.01 * r.step_s)) ** 2 for r, p in zip(runs, predicted)) / len(runs)


def fit_link(runs, algorithm, core_bw, tau=0.0):
    """alpha, beta minimising the squared relative error of the predicted wait over the link's
    runs, given tau (the core-sharing term of the runs whose hosts share a core).

    The wait (not the step) is fitted so that the step-time check stays a prediction: its
    compute part comes from the one-host run. Each error is relative to the measured wait plus
    1 % of the step, so that the small waits of the fast links (mostly latency) count as much as
    the long ones of the slow links (mostly bytes), and a wait of nearly nothing does not blow up.
    A faint pull toward the line rate and 50 us keeps a parameter the runs cannot see at a
    physical value."""
    line_beta = 8 / runs[0].nominal_bps
    scale = [r.wait_s + 0.01 * r.step_s for r in runs]

    def loss(alpha, beta):
        err = relative_loss(runs, [predict_wait_s(r, algorithm, alpha, beta, core_bw, tau) for r in runs])
        return err + 1e-8 * (np.log(beta / line_beta) ** 2 + np.log(alpha / ALPHA_PRIOR_S) ** 2)

    # A coarse grid over five decades of alpha and 2.4 of beta, then finer grids around the
    # best point.
    alphas = np.logspace(-6, -1, 151)
    # A link shaped by tc tbf passes no more than its rate (beyond a burst of 10 ms): beta is at
    # least the line rate's. An unshaped veth has no such rate; its nominal one is a guess.
    floor = 0.98 * line_beta if runs[0].rate_bps else 0.0
    betas = line_beta * np.logspace(-0.7, 1.7, 151)
    betas = betas[betas >= floor]
    grid = loss(alphas[:, None], betas[None, :])
    i, j = np.unravel_index(np.argmin(grid), grid.shape)
    edge = i in (0, alphas.size - 1) or j == betas.size - 1 or (j == 0 and not floor)  # beta at the line rate is no edge
    alpha, beta = alphas[i], betas[j]
    wa, wb = 2 * np.log10(alphas[1] / alphas[0]), 2 * np.log10(betas[1] / betas[0])  # decades
    for _ in range(60):  # the valley can run diagonally: follow it, narrowing once inside
        fine_a, fine_b = alpha * np.logspace(-wa, wa, 21), np.maximum(floor, beta * np.logspace(-wb, wb, 21))
        fine = loss(fine_a[:, None], fine_b[None, :])
        k, m = np.unravel_index(np.argmin(fine), fine.shape)
        alpha, beta = float(fine_a[k]), float(fine_b[m])
        if 0 < k < 20 and (0 < m < 20 or fine_b[m] <= floor):
            wa, wb = wa / 4, wb / 4
            if wb < 1e-5:
                break

    def moves(da, db):  # does scaling alpha or beta move some predicted wait by > 10 % of its scale?
        base = [predict_wait_s(r, algorithm, alpha, beta, core_bw, tau) for r in runs]
        moved = [predict_wait_s(r, algorithm, alpha * da, beta * db, core_bw, tau) for r in runs]
        return any(abs(m - b) > 0.1 * s for m, b, s in zip(moved, base, scale))

    def seen(da, db):  # both ways: a parameter the waits only bound from one side is not measured
        return moves(da, db) and moves(1 / da, 1 / db)

    h = 0.05
    curvature = (loss(alpha, beta * math.exp(h)) + loss(alpha, beta * math.exp(-h)) - 2 * loss(alpha, beta)) / h**2
    return LinkFit(runs[0].rate_bps, alpha, beta, runs, seen(2, 1), seen(1, 2), edge,
                   beta_weight=len(runs) * max(float(curvature), 0.0), tau=tau)


def fit_tau(fits, algorithm, core_bw):
    """tau, the wait per exchange round and per peer sharing the core (core_sharing_s), over
    the runs of hosts that share a core on every link, with that link's alpha and beta."""
    shared = [(r, f) for f in fits for r in f.runs if r.hosts_per_core > 1]
    if not shared:
        return TAU_PRIOR_S
    def best(taus):
        loss = relative_loss([r for r, _ in shared],
                             [predict_wait_s(r, algorithm, f.alpha, f.beta, core_bw, taus) for r, f in shared])
        return float(taus[np.argmin(loss)])
    tau = best(np.logspace(-6, 0, 601))  # 1 us to 1 s, then finer around the best
    return best(tau * np.logspace(-0.02, 0.02, 81))


def fit_all(runs, algorithm, core_bw):
    """Per link alpha and beta, and over every link tau, fitted in turn: first alpha and beta
    from the runs whose hosts have a core each (tau 0), then tau from the others with those,
    then alpha and beta from all the link's runs with that tau, and tau once more."""
    rates = sorted({r.rate_bps for r in runs}, key=lambda rate: rate or UNSHAPED_BPS)
    by_rate = [[r for r in runs if r.rate_bps == rate] for rate in rates]
    fits = [fit_link([r for r in mine if r.hosts_per_core == 1] or mine, algorithm, core_bw) for mine in by_rate]
    for f, mine in zip(fits, by_rate):
        f.runs = mine
    tau = fit_tau(fits, algorithm, core_bw)
    if any(r.hosts_per_core > 1 for r in runs):
        fits = [fit_link(mine, algorithm, core_bw, tau) for mine in by_rate]
        tau = fit_tau(fits, algorithm, core_bw)
    for f in fits:
        f.tau = tau
    return fits


def prediction_errors(fits, algorithm, core_bw):
    """(run, predicted wait, predicted step, relative error) for every run."""
    out = []
    for f in fits:
        for r in f.runs:
            wait = float(predict_wait_s(r, algorithm, f.alpha, f.beta, core_bw, f.tau))
            step = r.compute_s + wait
            out.append((r, wait, step, step / r.step_s - 1))
    return out


@dataclasses.dataclass
class Law:
    """alpha and beta at any link rate, for the projection: beta(R) = k * 8/R + c."""
    alpha: float
    k: float
    c: float
    note: str

    def beta(self, rate_bps):
        return self.k * 8 / rate_bps + self.c


def byte_bound(f):
    """A shaped link whose waits its bytes explain: beta seen, and the transfers reaching at least
    half the link's rate. A slower beta says the waits there are something else (on the
    namespaced hosts at 10 Gbit/s: the hosts sharing a core, the last buckets' latency; f32 and
    bf16 runs wait alike), which a line through the links' betas must not take as a per-byte cost."""
    return bool(f.rate_bps) and f.beta_seen and f.beta <= 2 * 8 / f.rate_bps


def projection_law(fits, alpha_override=None):
    """A line through the fitted beta of the shaped links against 8/R: the slope says how much
    of the line rate the transfers reach, the intercept is the per-byte cost of the hosts. Each
    link counts as sharply as its runs pin its beta (a link whose bytes all hide counts little)."""
    shaped = [f for f in fits if byte_bound(f)]
    x = np.array([8 / f.rate_bps for f in shaped])
    y = np.array([f.beta for f in shaped])
    w = np.sqrt([f.beta_weight for f in shaped])
    if len(shaped) >= 2:
        # relative residuals, (k x + c) / y - 1, weighted
        (k, c), *_ = np.linalg.lstsq(np.column_stack([x / y, 1 / y]) * w[:, None], w, rcond=None)
        if c < 0:
            k, c = float(np.sum(w**2 * x / y) / np.sum(w**2 * (x / y) ** 2)), 0.0
        note = f"line through {len(shaped)} shaped links"
    elif shaped:
        k, c, note = float(y[0] / x[0]), 0.0, "from the one shaped link whose beta the runs see"
    else:
        k, c, note = 1.0, 0.0, "no fitted beta: the line rate"
    seen_alphas = [f.alpha for f in fits if f.alpha_seen]
    if alpha_override is not None:
        alpha, note = alpha_override, note + "; alpha given"
    elif seen_alphas:
        n = len(seen_alphas)
        alpha, note = float(np.median(seen_alphas)), note + f"; alpha the median of {n} link{'s' * (n > 1)}"
    else:
        alpha, note = ALPHA_PRIOR_S, note + "; alpha assumed (no run sees it)"
    return Law(alpha, float(k), float(c), note)


def choose_algorithm(runs, requested, core_bw):
    """The requested algorithm, or (auto) the one whose fits predict the steps best."""
    candidates = ALGORITHMS if requested == "auto" else (requested,)
    scored = []
    for algorithm in candidates:
        fits = fit_all(runs, algorithm, core_bw)
        errors = np.array([e for *_, e in prediction_errors(fits, algorithm, core_bw)])
        scored.append((float(np.sqrt(np.mean(errors**2))), algorithm, fits, errors))
    scored.sort(key=lambda s: s[0])
    return scored


def cmd_fit(args):
    runs = load_runs(args.measurements)
    core_bw = args.core_bandwidth_gbs * 1e9
    scored = choose_algorithm(runs, args.algorithm, core_bw)
    _, algorithm, fits, _ = scored[0]
    why = " (Open MPI 4.1 libnbc's own choice for in-place buckets, which Strata overrides with Rabenseifner's)" if algorithm.startswith("binomial") else ""
    print(f"{len(runs)} runs; all-reduce model: {algorithm}{why}")
    if len(scored) > 1:
        print("algorithms, step-time error over all runs: " + "; ".join(
            f"{a}: rms {100 * rms:.1f} %, largest {100 * np.max(np.abs(e)):.1f} %" for rms, a, _, e in scored))
    print_fit(fits)
    if any(r.hosts_per_core > 1 for f in fits for r in f.runs):
        print(f"\ncore sharing: tau = {fits[0].tau * 1e3:.2f} ms per exchange round and per peer on the same core "
              f"(fitted over the runs of hosts sharing a core, with each link's alpha and beta)")
    law = projection_law(fits)
    print(f"\nprojection: beta(R) = {law.k:.3f} x 8/R + {law.c * 1e9:.3f} ns/B, alpha = {law.alpha * 1e6:.1f} us "
          f"({law.note})\n")
    errors = prediction_errors(fits, algorithm, core_bw)
    print_predictions(errors)


def print_fit(fits):
    print(f"\n{'link':>14} {'runs':>5} {'alpha us':>9} {'beta ns/B':>10} {'= Gbit/s':>9}  notes")
    for f in fits:
        notes = [n for n, bad in (("alpha barely moves these waits", not f.alpha_seen),
                                  ("beta barely moves these waits (the bytes hide)", not f.beta_seen),
                                  ("at the search grid's edge", f.at_grid_edge),
                                  ("under half the link's rate: not its bytes, left out of the projection",
                                   f.rate_bps and f.beta_seen and not byte_bound(f))) if bad]
        print(f"{link_name(f.rate_bps):>14} {len(f.runs):>5} {f.alpha * 1e6:>9.1f} {f.beta * 1e9:>10.3f} "
              f"{8 / f.beta / 1e9:>9.3f}  {', '.join(notes)}")


def print_predictions(errors):
    print(f"{'model':>13} {'hosts':>5} {'link':>12} {'wire':>4} {'B':>4} {'runs':>4} {'spread':>6} {'core':>5} "
          f"{'compute ms':>10} {'wait ms meas/pred':>18} {'step ms meas/pred':>18} {'error':>7}")
    for r, wait, step, e in errors:
        print(f"{r.model:>13} {r.hosts:>5} {link_name(r.rate_bps):>12} {r.wire:>4} {r.batch:>4} {r.reps:>4} "
              f"{100 * r.step_spread:>5.0f}% {r.cpu_share:>5.2f} "
              f"{r.compute_s * 1e3:>10.1f} {r.wait_s * 1e3:>8.1f} / {wait * 1e3:>7.1f} "
              f"{r.step_s * 1e3:>8.1f} / {step * 1e3:>7.1f} {100 * e:>6.1f}%")
    print("(runs: the configuration's runs, whose median is shown; spread: their slowest minus fastest step "
          "over the median; core: of a core each host's worker used)")
    worst = max(errors, key=lambda x: abs(x[3]))
    verdict = "yes" if abs(worst[3]) <= WITHIN else "no"
    inside = sum(abs(e) <= WITHIN for *_, e in errors)
    print(f"\nevery prediction within {100 * WITHIN:.0f} %: {verdict} ({inside} of {len(errors)}; "
          f"largest {100 * worst[3]:+.1f} %: {worst[0].label()})")
    for shared, what in ((False, "hosts with a core each"), (True, "hosts sharing a core")):
        mine = [e for r, *_, e in errors if (r.hosts_per_core > 1) == shared]
        if mine:
            print(f"  {what}: {sum(abs(e) <= WITHIN for e in mine)} of {len(mine)} within {100 * WITHIN:.0f} %, "
                  f"errors {100 * min(mine):+.1f} to {100 * max(mine):+.1f} %")


# --- The applications, for the projection ---------------------------------------------------

# Parameter counts from Keras (keras_applications 1.0.8; EfficientNetB0 from keras-team's
# efficientnet.py, whose 5,330,564 plus tf.keras's Normalization layer (7 statistics) is Keras's
# 5,330,571): trainable weights are all-reduced as gradients, the rest are batch-norm moving
# statistics (f32, all-reduced after the update).
#
# Per-core training rates (f32, 224 px): BENCHMARKS.md, "Keras applications against torchvision
# (issue 18)" -> "After the residual-sum fusion (2026-12-04 18:05-18:50, quiet)", the rows
# "<model> | train | f32": `strata bench-step --batch 32 --replicas 2` on 2 cores of a family-25
# (Zen 4) EPYC VM, so half the row per core. Measured runs replace them for their models.
#
# Gradient-ready profiles: x, the fraction of the gradient bytes final (in backward order), is
# reached at fraction t of the backward pass. From Keras's layer list (the same builds), a
# layer's backward time taken proportional to its multiply-adds plus 30 per output element (the
# memory-bound layers: ~18 GB/s of triad against ~60 G multiply-adds/s per core).
PROFILE_X = (0, .1, .2, .3, .4, .5, .6, .7, .8, .85, .9, .95, .97, .98, .99, .995, 1)


@dataclasses.dataclass
class App:
    name: str
    trainable: int
    nontrainable: int
    per_core_rate: float             # training images/s per core
    batch: int                       # per replica
    rate_source: str
    profile_t: tuple = ()            # Keras apps: fraction of the compute step at which PROFILE_X are final
    measured: tuple = ()             # measured apps: (f32 bytes, ready fraction of the compute step) a bucket
    backward_end: float = BACKWARD_END  # fraction of the compute step

    def buckets(self, cap):
        """(f32 bytes, ready fraction of the compute step) per bucket of at most `cap` bytes."""
        if self.measured:
            return self.measured_buckets(cap)
        # Strata cuts the block in backward order, a bucket growing over the next gradient while
        # it fits; a bucket is ready when its last gradient is.
        total = 4 * self.trainable
        ends = np.minimum(np.arange(1, math.ceil(total / cap) + 1) * cap, total)
        sizes = np.diff(np.concatenate([[0], ends]))
        return sizes.astype(float), np.interp(ends / total, PROFILE_X, self.profile_t)

    def measured_buckets(self, cap):
        """The runs' buckets under a larger cap. Two neighbours too big to share a 4 MiB bucket
        were split by the cap and merge while they fit; the others were split because their
        gradients are not next to each other in the block, and stay apart. (A smaller cap than
        the runs' is not modelled: their buckets are kept.)"""
        sizes, ready = [], []
        for i, (size, t) in enumerate(self.measured):
            split_by_cap = i > 0 and self.measured[i - 1][0] + size > BUCKET_BYTES
            if split_by_cap and sizes[-1] + size <= cap:
                sizes[-1], ready[-1] = sizes[-1] + size, t
            else:
                sizes.append(size)
                ready.append(t)
        return np.array(sizes, float), np.array(ready)


def keras_profile(t_backward):
    """Backward-pass fractions to compute-step fractions: the forward pass takes the first third
    of the compute before the backward pass (about twice the forward's work)."""
    forward = BACKWARD_END / 3
    return tuple(forward + t * (BACKWARD_END - forward) for t in t_backward)


BENCH_ROW = ("BENCHMARKS.md, Keras applications against torchvision, after the residual-sum fusion: "
             "'{} | train | f32 | {}' img/s on 2 cores (bench-step 32 x 2), half per core")
KERAS_APPS = {
    "resnet50": App("resnet50", 25_583_592, 53_120, 10.3 / 2, 32, BENCH_ROW.format("ResNet50", 10.3), keras_profile(
        (0, .013, .037, .085, .096, .119, .154, .211, .328, .379, .440, .529, .644, .687, .735, .863, 1))),
    "mobilenet_v2": App("mobilenet_v2", 3_504_872, 34_112, 49.2 / 2, 32, BENCH_ROW.format("MobileNetV2", 49.2),
                        keras_profile((.001, .001, .001, .001, .030, .048, .067, .094, .122, .168, .255, .320, .357,
                                       .373, .451, .564, 1))),
    "efficientnet_b0": App("efficientnet_b0", 5_288_548, 42_023, 35.4 / 2, 32,
                           BENCH_ROW.format("EfficientNetB0", 35.4), keras_profile(
        (.001, .001, .001, .026, .045, .079, .111, .146, .175, .221, .292, .375, .411, .435, .484, .543, 1))),
    "xception": App("xception", 22_855_952, 54_528, 6.3 / 2, 32, BENCH_ROW.format("Xception", 6.3), keras_profile(
        (0, .030, .030, .074, .124, .209, .316, .402, .487, .530, .573, .615, .699, .735, .744, .822, 1))),
    "densenet121": App("densenet121", 7_978_856, 83_648, 12.4 / 2, 32, BENCH_ROW.format("DenseNet121", 12.4),
                       keras_profile((0, 0, .012, .026, .065, .089, .149, .207, .261, .341, .450, .552, .728, .791,
                                      .886, .937, 1))),
}
APP_ORDER = ("reference-cnn", "resnet50", "mobilenet_v2", "efficientnet_b0", "xception", "densenet121")


def measured_app(runs, keras):
    """The model as its runs show it: the one-host per-core rate, the batch, and the buckets of its
    least disturbed run (f32, fewest hosts, fastest link), ready times as fractions of its compute."""
    r = min(runs, key=lambda r: (r.wire != "f32", r.hosts, -r.nominal_bps))
    own_compute = r.step_s - r.wait_s
    grads = r.grad_f32_bytes
    f32_bytes = r.wire_bytes * grads / r.wire_bytes.sum()
    rate = r.replicas * r.batch / r.one_host_step_s
    source = f"measured: one host, {r.replicas} x {r.batch}, {r.one_host_step_s * 1e3:.1f} ms a step"
    trainable, nontrainable = round(grads / 4), round(r.stats_bytes / 4)
    if keras:
        if abs(trainable - keras.trainable) > 0.01 * keras.trainable:
            print(f"note: {r.model}'s runs all-reduce {grads:,.0f} gradient bytes, Keras has "
                  f"{4 * keras.trainable:,} (kept Keras's)", file=sys.stderr)
        trainable, nontrainable = keras.trainable, keras.nontrainable
    return App(r.model, trainable, nontrainable, rate, r.batch, source,
               measured=tuple(zip(f32_bytes, r.ready_s / own_compute)), backward_end=r.backward_end_s / own_compute)


def applications(runs, batch_override):
    """The projected models: measured where there are runs, else Keras's counts and the table's rates."""
    apps = {}
    for name in APP_ORDER:
        mine = [r for r in runs if r.model == name]
        if mine:
            apps[name] = measured_app(mine, KERAS_APPS.get(name))
        elif name in KERAS_APPS:
            apps[name] = KERAS_APPS[name]
        else:
            print(f"note: no runs of {name}: left out of the projection", file=sys.stderr)
            continue
        if name in batch_override:
            apps[name] = dataclasses.replace(apps[name], batch=batch_override[name])
    return apps


# --- Projection -----------------------------------------------------------------------------

@dataclasses.dataclass
class Host:
    cores: int
    core_bw: float                   # bytes/s one core streams (the in-host averaging)
    host_bw: float                   # bytes/s the whole host streams

    def plain_reduce_s(self, nbytes):
        """One host: every replica averages its slice of all replicas' gradients (reduce-scatter)."""
        if self.cores == 1:
            return 0.0
        return max(nbytes / self.core_bw, self.cores * nbytes / self.host_bw)

    def bucket_reduce_s(self, nbytes):
        """Several hosts: the last replica to finish a bucket averages it over the host's replicas alone."""
        return 0.0 if self.cores == 1 else self.cores * nbytes / self.core_bw


def project_step(app, hosts, host, link_bps, algorithm, wire, bucket_bytes, batch, law, flat=False):
    """(step seconds of `hosts` hosts, step seconds of one host), each replica running `batch`.

    Strata (flat=False): the host's replicas average each bucket in shared memory, then one rank
    per host all-reduces it across hosts. flat=True: one rank per core, all in one ring (each
    host's link still carries one ring hop)."""
    compute = batch / app.per_core_rate
    grad = 4.0 * app.trainable
    one_host = compute + host.plain_reduce_s(grad)
    sizes, ready = app.buckets(bucket_bytes)
    ranks = hosts * host.cores if flat else hosts
    ready_s = ready * compute + (0.0 if flat else np.array([host.bucket_reduce_s(b) for b in sizes]))
    alpha, beta = law.alpha, law.beta(link_bps)
    wire_factor = 0.5 if wire == "bf16" else 1.0
    step = compute + float(exposed_s(ready_s, sizes * wire_factor, app.backward_end * compute, algorithm, ranks,
                                     alpha, beta))
    step += allreduce_s(algorithm, 4.0 * app.nontrainable, ranks, alpha, beta)
    if wire == "bf16":
        step += bf16_unpack_s(grad, host.core_bw)
    return step, one_host


def variants(measured):
    """(name, algorithm, flat) of each projected design."""
    return (("strata", measured, False),           # the all-reduce Strata runs (--algorithm: Rabenseifner)
            ("ring", "ring", False),               # coll_libnbc_iallreduce_algorithm=1, or Strata's own ring
            ("rabenseifner", "rabenseifner", False),  # libnbc's choice given a separate send buffer
            ("flat-ring", "ring", True))           # one rank per core, as one process per GPU


def efficiency_row(app, hosts, host, link_bps, variant, wire, bucket_bytes, batch, law):
    name, algorithm, flat = variant
    step, one_host = project_step(app, hosts, host, link_bps, algorithm, wire, bucket_bytes, batch, law, flat)
    return {"model": app.name, "hosts": hosts, "cores": host.cores, "link_gbps": link_bps / 1e9,
            "variant": name, "algorithm": algorithm, "wire": wire, "bucket_mib": bucket_bytes / MIB,
            "batch_per_replica": batch, "global_batch": hosts * host.cores * batch, "step_s": step,
            "one_host_step_s": one_host, "images_per_s": hosts * host.cores * batch / step,
            "efficiency": one_host / step}


def capped_batch(app, hosts, cores, max_global):
    """The per-replica batch under a global-batch cap (0: more replicas than images)."""
    return min(app.batch, max_global // (hosts * cores)) if max_global else app.batch


def link_needed(app, hosts, host, variant, wire, bucket_bytes, batch, law, target=0.9):
    """(the slowest link in Gbit/s that keeps the efficiency at `target`, None), or (None, what
    stops it) when even an infinitely fast link does not: the in-host averaging, alpha, or c."""
    def efficiency(gbps, law=law):
        return efficiency_row(app, hosts, host, gbps * 1e9, variant, wire, bucket_bytes, batch, law)["efficiency"]
    for limit, without in (("in-host", Law(0.0, 0.0, 0.0, "")), ("alpha", Law(law.alpha, 0.0, 0.0, "")),
                           ("c", Law(law.alpha, 0.0, law.c, ""))):   # k * 8/R gone: an infinite link
        if efficiency(1.0, without) < target:
            return None, limit
    low, high = 0.01, 1e9
    if efficiency(low) >= target:
        return low, None
    while high / low > 1.01:
        mid = math.sqrt(low * high)
        low, high = (low, mid) if efficiency(mid) >= target else (mid, high)
    return high, None


def cmd_project(args):
    runs = load_runs(args.measurements)
    core_bw = args.core_bandwidth_gbs * 1e9
    scored = choose_algorithm(runs, args.algorithm, core_bw)
    _, algorithm, fits, _ = scored[0]
    law = projection_law(fits, None if args.alpha_us is None else args.alpha_us * 1e-6)
    apps = applications(runs, dict(args.batch))
    hosts_list = [2 ** i for i in range(1, int(math.log2(args.max_hosts)) + 1)]
    host_kinds = [Host(c, core_bw, min(c * core_bw, args.host_bandwidth_gbs * 1e9)) for c in args.cores]
    regimes = (("per-replica", 0), ("capped", args.max_global_batch))
    rows = []
    for app in apps.values():
        for host in host_kinds:
            for gbps in args.links:
                for hosts in hosts_list:
                    for regime, cap in regimes:
                        batch = capped_batch(app, hosts, host.cores, cap)
                        if batch < 1:
                            continue
                        for variant in variants(algorithm):
                            for wire in ("f32", "bf16"):
                                for mib in args.bucket_mib:
                                    row = efficiency_row(app, hosts, host, gbps * 1e9, variant, wire, mib * MIB,
                                                         batch, law)
                                    rows.append({"regime": regime, **row})
    needed = []
    for app in apps.values():
        for host in host_kinds:
            for hosts in args.table_hosts:
                for regime, cap in regimes:
                    batch = capped_batch(app, hosts, host.cores, cap)
                    for variant, wire in ((variants(algorithm)[0], "f32"), (variants(algorithm)[0], "bf16")):
                        gbps, limit = (None, "more replicas than images") if batch < 1 else link_needed(
                            app, hosts, host, variant, wire, args.bucket_mib[0] * MIB, batch, law)
                        needed.append({"model": app.name, "cores": host.cores, "hosts": hosts, "regime": regime,
                                       "variant": variant[0], "wire": wire, "batch_per_replica": batch,
                                       "global_batch": hosts * host.cores * batch, "link_gbps": gbps, "limit": limit})
    result = {
        "cpu": args.cpu, "measurements": args.measurements, "fit_algorithm": algorithm,
        "fits": [{"link": link_name(f.rate_bps), "rate_bps": f.rate_bps, "alpha_s": f.alpha, "beta_s_per_byte": f.beta,
                  "alpha_seen": f.alpha_seen, "beta_seen": f.beta_seen, "runs": len(f.runs)} for f in fits],
        "law": {"alpha_s": law.alpha, "k": law.k, "c_s_per_byte": law.c, "note": law.note},
        "assumptions": {"core_bandwidth_gbs": args.core_bandwidth_gbs, "host_bandwidth_gbs": args.host_bandwidth_gbs,
                        "max_global_batch": args.max_global_batch},
        "applications": {a.name: {"trainable": a.trainable, "nontrainable": a.nontrainable,
                                  "per_core_images_per_s": a.per_core_rate, "batch_per_replica": a.batch,
                                  "rate_source": a.rate_source, "backward_end": a.backward_end} for a in apps.values()},
        "rows": rows, "link_needed_for_90_percent": needed,
    }
    with open(args.out_json, "w") as f:
        json.dump(result, f)
    print(f"all-reduce model {algorithm}; projection: beta(R) = {law.k:.3f} x 8/R + {law.c * 1e9:.3f} ns/B, "
          f"alpha = {law.alpha * 1e6:.1f} us ({law.note})")
    for a in apps.values():
        print(f"  {a.name}: {a.trainable:,} trainable + {a.nontrainable:,} statistics, {a.per_core_rate:.2f} img/s "
              f"per core, {a.batch} per replica ({a.rate_source})")
    print_efficiency_table(rows, algorithm, args)
    print_link_table(needed, algorithm, args)
    plot(args.plot, runs, fits, algorithm, core_bw, rows, args)
    print(f"\nwrote {args.out_json} ({len(rows)} rows) and {args.plot}")


def markdown_table(cells, args):
    """cells[(model, cores)][hosts] -> text, as a Markdown table with a column per host count."""
    lines = ["| model | cores | " + " | ".join(f"{n} hosts" for n in args.table_hosts) + " |",
             "|---|---|" + "---|" * len(args.table_hosts)]
    for (model, cores), row in sorted(cells.items(), key=lambda kv: (APP_ORDER.index(kv[0][0]), kv[0][1])):
        lines.append(f"| {model} | {cores} | " + " | ".join(row.get(n, "") for n in args.table_hosts) + " |")
    return "\n".join(lines)


def print_efficiency_table(rows, algorithm, args):
    link = 25.0 if 25.0 in args.links else args.links[0]
    mib = args.bucket_mib[0]
    index = {(r["model"], r["cores"], r["hosts"], r["variant"], r["wire"]): r for r in rows
             if r["regime"] == "per-replica" and r["link_gbps"] == link and r["bucket_mib"] == mib}
    cells = {}
    for (model, cores, hosts, variant, wire), r in index.items():
        other = index.get((model, cores, hosts, "strata", "bf16"))
        if variant == "strata" and wire == "f32" and other and hosts in args.table_hosts:
            cells.setdefault((model, cores), {})[hosts] = \
                f"{100 * r['efficiency']:.0f} / {100 * other['efficiency']:.0f} %"
    print(f"\nefficiency at {link:g} Gbit/s, {mib:g} MiB buckets, per-replica batch fixed "
          f"(Strata, {algorithm}: f32 / bf16 on the wire):")
    print(markdown_table(cells, args))


def print_link_table(needed, algorithm, args):
    def text(e):
        if e["link_gbps"] is None:
            return "never: " + e["limit"] if e["batch_per_replica"] >= 1 else e["limit"]
        return f"{e['link_gbps']:,.0f}" if e["link_gbps"] >= 10 else f"{e['link_gbps']:.2g}"
    for regime in ("per-replica", "capped"):
        cells = {}
        for e in needed:
            if e["regime"] == regime:
                pair = cells.setdefault((e["model"], e["cores"]), {}).setdefault(e["hosts"], {})
                pair[e["wire"]] = text(e)
        cells = {k: {n: f"{v['f32']} / {v['bf16']}" for n, v in row.items()} for k, row in cells.items()}
        title = ("per-replica batch fixed" if regime == "per-replica"
                 else f"global batch capped at {args.max_global_batch:,}")
        print(f"\nlink (Gbit/s) for >= 90 % efficiency, {args.bucket_mib[0]:g} MiB buckets, {title} "
              f"(Strata, {algorithm}: f32 / bf16 on the wire):")
        print(markdown_table(cells, args))
    print("(never: no link rate is enough, what is left at an infinite rate costs over 10 %: in-host = "
          "averaging each bucket over the host's replicas, alpha = the latency terms, c = the hosts' "
          "per-byte cost)")


# --- The plot -------------------------------------------------------------------------------

def plot(path, runs, fits, algorithm, core_bw, rows, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(14, 10.5))
    colors = dict(zip(APP_ORDER, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    errors = prediction_errors(fits, algorithm, core_bw)

    # (a) measured and predicted compute / step (1: the all-reduce hidden) against the link; the
    # unshaped veth sits right of the fastest shaped link.
    ax = axes[0, 0]
    shaped = sorted({r.rate_bps for r in runs if r.rate_bps})
    unshaped_x = 3 * shaped[-1] / 1e9 if shaped else 1.0

    def x_of(run):
        return run.rate_bps / 1e9 if run.rate_bps else unshaped_x
    for (model, hosts, wire) in sorted({(r.model, r.hosts, r.wire) for r in runs}):
        mine = sorted([e for e in errors if (e[0].model, e[0].hosts, e[0].wire) == (model, hosts, wire)],
                      key=lambda e: x_of(e[0]))
        x = [x_of(e[0]) for e in mine]
        ax.plot(x, [e[0].compute_s / e[0].step_s for e in mine], linestyle="none", color=colors.get(model),
                marker="o" if hosts == 2 else "s", fillstyle="full" if wire == "f32" else "none")
        ax.plot(x, [e[0].compute_s / e[2] for e in mine], linestyle="-" if wire == "f32" else "--",
                color=colors.get(model), label=f"{model}, {hosts} hosts, {wire}")
    ticks = [rate / 1e9 for rate in shaped] + ([unshaped_x] if any(not r.rate_bps for r in runs) else [])
    ax.set_xscale("log")
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks[:len(shaped)]] + ["unshaped"] * (len(ticks) - len(shaped)))
    ax.minorticks_off()
    ax.set_xlabel("link rate, Gbit/s (tc tbf)")
    ax.set_ylabel("compute / step (1: the all-reduce hidden)")
    ax.set_title("measured (o 2 hosts, s 4 hosts; hollow: bf16) and predicted (lines)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, ncol=2)

    # (b) predicted against measured step time
    ax = axes[0, 1]
    measured = np.array([e[0].step_s * 1e3 for e in errors])
    predicted = np.array([e[2] * 1e3 for e in errors])
    for e, m, p in zip(errors, measured, predicted):
        ax.plot(m, p, marker="o" if e[0].hosts == 2 else "s", color=colors.get(e[0].model),
                fillstyle="full" if e[0].wire == "f32" else "none", linestyle="none")
    span = np.array([measured.min() * 0.8, measured.max() * 1.25])
    ax.plot(span, span, color="black", linewidth=0.8)
    ax.fill_between(span, span * (1 - WITHIN), span * (1 + WITHIN), color="grey", alpha=0.2,
                    label=f"within {100 * WITHIN:.0f} %")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured step, ms")
    ax.set_ylabel("predicted step, ms")
    ax.set_title(f"every measured run ({algorithm} all-reduce, alpha and beta fitted per link)")
    ax.legend(fontsize=8)

    # (c), (d): projected efficiency against hosts
    mib = args.bucket_mib[0]
    for ax, cores, regime in ((axes[1, 0], 32, "per-replica"), (axes[1, 1], 128, "capped")):
        cores = cores if cores in args.cores else args.cores[-1]
        gbps = 25.0 if 25.0 in args.links else args.links[0]
        hosts_seen = set()
        for model in APP_ORDER:
            for variant, wire, style in (("strata", "f32", "-"), ("strata", "bf16", "--")):
                pts = sorted((r["hosts"], r["efficiency"]) for r in rows
                             if (r["model"], r["cores"], r["link_gbps"], r["variant"], r["wire"], r["bucket_mib"],
                                 r["regime"]) == (model, cores, gbps, variant, wire, mib, regime))
                if pts:
                    hosts_seen.update(h for h, _ in pts)
                    ax.plot(*zip(*pts), linestyle=style, color=colors[model], label=model if style == "-" else None)
        ax.axhline(0.9, color="grey", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(hosts_seen))
        ax.set_xticklabels([str(h) for h in sorted(hosts_seen)])
        ax.minorticks_off()
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("hosts")
        ax.set_ylabel("scaling efficiency (images/s over hosts x one host)")
        batch = ("per-replica batch fixed" if regime == "per-replica" else
                 f"global batch at most {args.max_global_batch:,} (to where replicas outnumber images)")
        ax.set_title(f"projection: {cores}-core hosts, {gbps:g} Gbit/s, {mib:g} MiB buckets\n{batch}\n"
                     f"solid: Strata ({algorithm}, f32 on the wire); dashed: bf16 on the wire",
                     fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(f"Strata's data-parallel step, measured on {args.cpu} (hosts: network namespaces, links "
                 f"shaped by tc tbf), and projected")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# --- Self-check -----------------------------------------------------------------------------

def cmd_selftest(_args):
    failures = 0

    def check(name, got, want, rel=1e-9):
        nonlocal failures
        ok = abs(got - want) <= rel * max(abs(want), 1e-15)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {got:.9g} (want {want:.9g})")

    alpha, beta, s = 10e-6, 1e-9, 4 * MIB
    # 2 hosts, ring: 2 steps of alpha, each host sends and receives half the bucket twice.
    check("ring, 2 hosts, one 4 MiB bucket", allreduce_s("ring", s, 2, alpha, beta), 2 * alpha + s * beta)
    check("ring, 8 hosts", allreduce_s("ring", s, 8, alpha, beta), 14 * alpha + 2 * 7 / 8 * s * beta)
    # 4 hosts, binomial: reduce 2 rounds of the whole bucket, broadcast 0 -> {1, 2} shared then 1 -> 3.
    check("binomial, 4 hosts", allreduce_s("binomial", s, 4, alpha, beta), 4 * alpha + 5 * s * beta)
    check("binomial, 2 hosts = twice the ring's bytes", allreduce_s("binomial", s, 2, alpha, beta),
          2 * alpha + 2 * s * beta)
    check("rabenseifner, 8 hosts", allreduce_s("rabenseifner", s, 8, alpha, beta), 6 * alpha + 1.75 * s * beta)
    check("one host: nothing to all-reduce", allreduce_s("ring", s, 1, alpha, beta), 0.0)

    # Three buckets of 1 ms each (2 hosts, ring, alpha 0, beta such that 1 MB takes 1 ms).
    sizes, one_ms = np.full(3, 1e6), 1e-9
    check("schedule: all hidden (ready at 0, 10, 20 ms, backward ends at 50)",
          float(exposed_s([0, .010, .020], sizes, .050, "ring", 2, 0.0, one_ms)), 0.0)
    check("schedule: nothing hidden (all ready at the end of the backward pass)",
          float(exposed_s([.050] * 3, sizes, .050, "ring", 2, 0.0, one_ms)), .003)
    check("schedule: buckets queue (ready 0, 1, 2 ms, 5 ms each, backward ends at 12)",
          float(exposed_s([0, .001, .002], sizes * 5, .012, "ring", 2, 0.0, one_ms)), .003)

    app = App("t", trainable=10 * MIB // 4, nontrainable=0, per_core_rate=1, batch=1, rate_source="",
              profile_t=tuple(0.5 + 0.5 * np.array(PROFILE_X)))
    sizes, ready = app.buckets(4 * MIB)
    check("10 MiB cut into 4 MiB buckets: the last has 2 MiB", sizes[-1], 2 * MIB)
    check("the last bucket is ready at the end of the profile", ready[-1], 1.0)
    # Measured 4, 4, 1 and 1 MiB: the cap split the first three, the layout the last two.
    app = dataclasses.replace(app, measured=((4 * MIB, .5), (4 * MIB, .6), (1 * MIB, .7), (1 * MIB, .8)))
    sizes, ready = app.buckets(16 * MIB)
    check("a 16 MiB cap merges the buckets the 4 MiB cap split: 9 MiB", sizes[0], 9 * MIB)
    check("the merged bucket is ready with its last part", ready[0], .7)
    check("the bucket the layout split stays apart", len(sizes), 2)
    check("in-host: 128 replicas' 4 MiB bucket averaged by one core at 17.9 GB/s",
          Host(128, 17.9e9, 460e9).bucket_reduce_s(4 * MIB), 128 * 4 * MIB / 17.9e9)

    # The fit finds alpha and beta back from runs made by the model itself.
    truth_alpha, truth_beta = 80e-6, 8 / 1e9 * 1.1
    runs = []
    for hosts in (2, 4):
        for wire in ("f32", "bf16"):
            factor = 0.5 if wire == "bf16" else 1.0
            run = Run("t", hosts, 1, 8, 1e9, wire, step_s=0.1, wait_s=0.0, backward_end_s=0.09,
                      ready_s=np.array([0.05, 0.07, 0.09]), wire_bytes=np.array([2e6, 2e6, 1e4]) * factor,
                      grad_f32_bytes=4.01e6, stats_bytes=1e3, one_host_step_s=0.095, cores_per_host=1.0)
            run.wait_s = float(predict_wait_s(run, "binomial", truth_alpha, truth_beta, 17.9e9))
            run.step_s = run.compute_s + run.wait_s
            runs.append(run)
    f = fit_link(runs, "binomial", 17.9e9)
    check("fit recovers beta", f.beta, truth_beta, rel=0.02)
    check("fit recovers alpha", f.alpha, truth_alpha, rel=0.02)

    # Hosts sharing a core: tau per exchange round (Rabenseifner's 2 log2 p) and per peer on the core.
    check("core sharing: 4 hosts two a core, 4 rounds of tau", core_sharing_s("rabenseifner", 4, 2, 1e-3), 4e-3)
    check("core sharing: a ring of 4 hosts has 6 rounds", core_sharing_s("ring", 4, 2, 1e-3), 6e-3)
    check("hosts with a core each: no term", core_sharing_s("rabenseifner", 4, 1, 1e-3), 0.0)
    # The fit finds tau back (alpha and beta from the runs of hosts with a core each).
    truth_tau, shared_runs = 9e-3, []
    for hosts, k in ((2, 1), (2, 1), (4, 2), (4, 2)):
        run = Run("t", hosts, 1, 8, 1e9, "f32", step_s=0.1, wait_s=0.0, backward_end_s=0.09,
                  ready_s=np.array([0.05, 0.09]), wire_bytes=np.array([2e6, 1e6 * hosts]), grad_f32_bytes=3e6,
                  stats_bytes=1e3, one_host_step_s=0.095, cores_per_host=1.0, hosts_per_core=k)
        run.wait_s = float(predict_wait_s(run, "rabenseifner", truth_alpha, truth_beta, 17.9e9, truth_tau))
        run.step_s = run.compute_s + run.wait_s
        shared_runs.append(run)
    check("fit recovers tau", fit_all(shared_runs, "rabenseifner", 17.9e9)[0].tau, truth_tau, rel=0.03)
    # The compute: the processes alone where the file has them, else the one process, stretched by the share.
    shared = dataclasses.replace(shared_runs[-1], cores_per_host=0.5)
    check("compute: one process, half a core each", shared.compute_s, 0.19)
    check("compute: the processes alone", dataclasses.replace(shared, alone_step_s=0.23).compute_s, 0.23)
    # A configuration run three times counts once, as its median.
    base = {"model": "t", "hosts": 2, "replicas_per_host": 1, "batch_per_replica": 8, "rate_bits_per_s": 1e9,
            "wire": "f32", "one_host_step_ms": 1}
    rows = median_rows([{**base, "step_ms": 3, "rep": 1}, {**base, "step_ms": 1, "rep": 2},
                        {**base, "step_ms": 2, "rep": 3}, {**base, "hosts": 4, "step_ms": 5, "rep": 1}])
    check("three runs of a configuration: one row", len(rows), 2)
    check("... whose step is their median", rows[0]["step_ms"], 2)
    check("... from the run with that step", rows[0]["rep"], 3)

    # bf16 runs describe their buckets in f32 or in wire bytes: the same wire bytes either way.
    line = {"model": "t", "image_size": 224, "hosts": 2, "replicas_per_host": 1, "batch_per_replica": 8,
            "rate_bits_per_s": 1e9, "wire": "bf16", "steps": 1, "step_ms": 1, "images_per_second": 1,
            "all_reduce_bytes_per_step": 8e6 + 1e5, "wire_bytes_per_step": 4e6 + 1e5, "all_reduce_ms_per_step": 1,
            "all_reduce_wait_ms_per_step": 1, "backward_end_ms": 1, "one_host_step_ms": 1,
            "cpu_seconds_per_host": [1, 1], "cores_per_host": 1}
    as_f32 = parse_run({**line, "buckets": [{"bytes": 4e6, "start_ms": 0}, {"bytes": 4e6, "start_ms": 1}]})
    as_wire = parse_run({**line, "buckets": [{"bytes": 2e6, "start_ms": 0}, {"bytes": 2e6, "start_ms": 1}]})
    check("bf16 run, buckets in f32 bytes: 4 MB on the wire", as_f32.wire_bytes.sum(), 4e6)
    check("bf16 run, buckets in wire bytes: 4 MB on the wire", as_wire.wire_bytes.sum(), 4e6)
    check("bf16 run: the moving statistics stay f32", as_wire.stats_bytes, 1e5)

    print("selftest: " + ("all passed" if failures == 0 else f"{failures} FAILED"))
    return 1 if failures else 0


def cmd_table(args):
    """Every run as a Markdown row, and the overlap rule checked: where the bytes of a step take
    less than half the backward pass at the link's rate, the step may wait at most 10 % for them."""
    rows = median_rows(read_rows(args.measurements))
    print("| model | hosts | link | wire | runs | step ms (median) | spread | compute ms | efficiency | MB sent "
          "| bytes at line rate ms | backward ms | chief waited ms | least any worker waited ms (% of step) "
          "| of a core a host | rule applies | hidden |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        p = r["hosts"]
        compute = compute_time(r["one_host_step_ms"], r["replicas_per_host"], r["cores_per_host"], r.get("alone_step_ms", 0))
        # Rabenseifner's (and a ring's) bytes each way per host: 2 (p - 1) / p of the block.
        line_ms = 2 * (p - 1) / p * r["wire_bytes_per_step"] * 8 / r["rate_bits_per_s"] * 1e3 if r["rate_bits_per_s"] else 0
        # The backward pass as two thirds of the forward + backward (its FLOPs are twice the forward's).
        backward = r["backward_end_ms"] * 2 / 3
        applies = line_ms < backward / 2
        # The slowest worker waits for the network alone; the others for it as well (imbalance).
        least = r.get("least_wait_ms_per_step", r["all_reduce_wait_ms_per_step"])
        wait_share = least / r["step_ms"]
        hidden = ("yes" if wait_share <= 0.10 else "**no**") if applies else "-"
        spread = step_spread(r)
        share = f"{r['cpu_share']:.2f}" if "cpu_share" in r else "-"
        print(f"| {r['model']} | {p} | {link_name(r['rate_bits_per_s'])} | {r['wire']} | {r['reps']} | {r['step_ms']:.0f} "
              f"| {spread:.0%} | {compute:.0f} | {compute / r['step_ms']:.0%} | {r['wire_bytes_per_step'] / 1e6:.2f} "
              f"| {line_ms:.0f} | {backward:.0f} | {r['all_reduce_wait_ms_per_step']:.1f} | {least:.1f} ({wait_share:.1%}) "
              f"| {share} | {'yes' if applies else 'no'} | {hidden} |")


def model_batch(text):
    model, _, batch = text.partition("=")
    if model not in APP_ORDER or not batch.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: MODEL=B, MODEL one of {', '.join(APP_ORDER)}")
    return model, int(batch)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("measurements", help="JSON lines, one run per line (docs/scaling.md)")
        p.add_argument("--algorithm", choices=("auto",) + ALGORITHMS, default="rabenseifner",
                       help="the all-reduce the runs used (auto: the one that predicts them best)")
        p.add_argument("--core-bandwidth-gbs", type=float, default=17.9,
                       help="GB/s one core streams (the triad of BENCHMARKS.md's flowers-preset trace)")

    common(sub.add_parser("fit", help="fit alpha and beta per link rate; measured against predicted steps"))
    proj = sub.add_parser("project", help="scaling efficiency from 2 to --max-hosts hosts")
    common(proj)
    proj.add_argument("--out-json", required=True)
    proj.add_argument("--plot", required=True, help="PNG")
    proj.add_argument("--links", type=float, nargs="+", default=[10.0, 25.0, 100.0], help="Gbit/s")
    proj.add_argument("--cores", type=int, nargs="+", default=[2, 32, 128], help="cores (replicas) per host")
    proj.add_argument("--max-hosts", type=int, default=1024)
    proj.add_argument("--table-hosts", type=int, nargs="+", default=[16, 128, 1024])
    proj.add_argument("--bucket-mib", type=float, nargs="+", default=[4.0, 32.0],
                      help="bucket sizes; the first is the tables' and the plot's")
    proj.add_argument("--max-global-batch", type=int, default=32768,
                      help="the 'capped' regime's global batch (LARS/LAMB's reach for ResNet-50)")
    proj.add_argument("--alpha-us", type=float, help="alpha for the projection instead of the fitted one")
    proj.add_argument("--batch", type=model_batch, action="append", default=[], metavar="MODEL=B",
                      help="per-replica batch of a model in the projection (default: its runs', else 32)")
    proj.add_argument("--host-bandwidth-gbs", type=float, default=460.0,
                      help="GB/s a whole host streams (an EPYC socket's DDR5, sustained)")
    proj.add_argument("--cpu", default=CPU, help="the CPU the measurements ran on, for the plot's title")
    sub.add_parser("selftest", help="check the model's arithmetic on hand-computed cases")
    table = sub.add_parser("table", help="every run as a Markdown row, with the overlap rule checked")
    table.add_argument("measurements")
    args = parser.parse_args()
    if args.command == "fit":
        cmd_fit(args)
    elif args.command == "table":
        cmd_table(args)
    elif args.command == "project":
        cmd_project(args)
    else:
        sys.exit(cmd_selftest(args))


if __name__ == "__main__":
    main()
