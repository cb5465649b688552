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

from scaling_fit import (  # the cost model and its fit, beside this file
    ALGORITHMS, CPU, Law, MIB, Run, WITHIN, allreduce_s, bf16_unpack_s, choose_algorithm, cmd_fit,
    compute_time, core_sharing_s, exposed_s, fit_all, fit_link, link_name, load_runs, median_rows, parse_run,
    predict_wait_s, prediction_errors, projection_law, read_rows, step_spread)
from scaling_apps import APP_ORDER, App, PROFILE_X, applications  # the models projected


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
