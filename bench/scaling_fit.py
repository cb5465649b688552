#!/usr/bin/python3
"""The cost model of one data-parallel training step and its fit to measured runs, for
scaling_model.py (docs/scaling.md): the all-reduce algorithms' alpha-beta costs, the buckets'
overlap with the backward pass, the runs read from `bench/hosts_scaling.sh`'s JSON lines, the
fit of alpha and beta per link rate (and tau where hosts share a core), the projection law, and
`scaling_model.py fit`'s report."""
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
