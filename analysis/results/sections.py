"""The report's text and table sections: the headline (improvement over the
baseline, or on QEMU the kernel's counts) with the paper's figures beside ours
and the conditions under which they compare, the first-finding section
(positive control, go/no-go gate, improvement per NUMA factor, per-run means),
the warm-up effect, the host cost, the metric definitions and the input
problems. The figures are figures.py's; the order of all of them is report.py's.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from . import finding, gates, plots, run_cost, verdict
from .document import Figure, Section, Table, _fmt, pm
from .forest import MARK
from .frames import Frames
from .metrics import METRICS, summarize
from .reference import GROUP_COLS, baseline_name, cfg_label, improvement_summary, runs_note, select
from .warmup import WARMUP_METRICS, warmup_effect

PAPER = {"excl": 10.7, "mbplus": 11.1}
# The paper the Fig. N views and the headline figures refer to; the report
# names it in full because report.html travels without the README.
PAPER_REF = (
    'Chiang & Su [Chiang21]: M.-L. Chiang, W.-L. Su, "Thread-Aware Mechanism to Enhance '
    'Inter-Node Load Balancing for Multithreaded Applications on NUMA Systems", '
    "Applied Sciences 11(14), 6486, 2021, doi:10.3390/app11146486"
)
PAPER_NOTE = (
    "Chiang & Su [Chiang21], Sec. 4.3.5: 4 x AMD Opteron 6320 (8 cores each), "
    "NUMA factor 1.6, 29 PARSEC 3.0 programs run together, threads 1..32, "
    "improvement of elapsed time over the unmodified kernel. Its '1.6' is numactl's "
    "SLIT distance (16), not a measured latency ratio, and its 4 nodes are 4 packages "
    "(each 6320 package holds two dies with a memory controller each, which a BIOS "
    "usually shows as 8 nodes); ours is a 4-node machine whose factor is the measured "
    "remote/local load latency ratio (configs/README.md, 'The paper's machine')."
)


def warmup_section(mx: pd.DataFrame) -> Section | None:
    """The same point at different warm-ups (warmup.py), when the runs hold one."""
    rows = warmup_effect(mx)
    if not rows:
        return None
    s = Section("Warm-up effect")
    s.paras.append(
        "The same point run with different job.warmup_s (simulated seconds on the "
        "timing CPU before the ROI starts; 0 = the ROI starts with the caches the "
        "atomic boot left empty). Means over the runs; change against the longest warm-up."
    )
    table = [
        [cfg_label(r.point) + f" {r.point.get('policy')}", _fmt(r.warmup_s), r.runs]
        + [f"{_fmt(r.means[m])} ({r.change_pct[m]:+.1f} %)"
           if not math.isnan(r.change_pct[m]) else _fmt(r.means[m]) for m in WARMUP_METRICS]
        for r in rows
    ]  # fmt: skip
    s.items.append(Table(["point", "warm-up (s)", "runs", *WARMUP_METRICS], table))
    return s


def cost_section(runs: pd.DataFrame | None, mx: pd.DataFrame) -> Section | None:
    """Host seconds per run, per checkpoint boot and for the sweep (run_cost.py)."""
    if runs is None:
        return None
    rows = run_cost.summary(runs, mx)
    if not rows:
        return None
    s = Section("Cost on the host")
    speed = run_cost.sim_speed(mx)
    table = [[r.what, r.n, _fmt(r.median), _fmt(r.max), _fmt(r.total / 3600)] for r in rows]
    for rate in (speed, run_cost.roi_rate(runs)):  # rates: no total
        if rate is not None:
            table.append([rate.what, rate.n, _fmt(rate.median), _fmt(rate.max), "–"])
    s.items.append(
        Table(
            ["what", "n", "median (s)", "max (s)", "total (h)"],
            table,
            "Host seconds; a run's wall time includes the checkpoint boot it did or waited for",
        )  # fmt: skip
    )
    hours = run_cost.sweep_host_hours(runs)
    if hours is not None:
        s.paras.append(f"Sweep total: {hours:.2f} host-hours over {len(runs)} runs.")
    note = run_cost.phases_note(runs)  # measured phases, or today's estimate
    if note is not None:
        s.paras.append(note)
    return s


# The per-run means of the finding section, a table per topic (one table of
# 18 counters ran past the page); what each name means, where none is in METRICS.
FINDING_TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Task migrations", ("cross_node_migrations", "migrations_balance_xnode", "lb_migrated")),
    ("Memory and CPU (gem5)", ("remote_ratio", "ipc", "llc_mpki")),
    ("The kernel's cross-node balancing decisions (kMLB counters, all tasks)",
     ("lb_attempts", "lb_migrated", "lb_taken_leader_dst", "lb_skipped_leader_src",
      "lb_picked_none", "lb_active_moved")),
    ("NUMA-level balancing (schedstat, all tasks)",
     ("schedstat_numa_passes", "schedstat_numa_passes_newidle", "schedstat_numa_balanced",
      "schedstat_numa_gained")),
    ("Balancer refusals of the programs' worker threads",
     ("thread_refused_hot", "thread_refused_running", "thread_forced_hot")),
)  # fmt: skip
FINDING_METRICS = tuple(dict.fromkeys(m for _, ms in FINDING_TABLES for m in ms))
LB_LABELS = {  # kernel-patches 0009 and 0012, /proc/sched_numa_lb_stats
    "lb_attempts": "cross-node balance passes",
    "lb_taken_leader_dst": "leader-on-destination takes",
    "lb_skipped_leader_src": "leader-on-source skips",
    "lb_picked_none": "passes that moved nothing",
    "lb_active_moved": "tasks moved by active balance",
}


def metric_label(m: str) -> str:
    """A column header: the metric's label (METRICS, LB_LABELS) and its name."""
    label = LB_LABELS.get(m) or (METRICS[m].label if m in METRICS else m)
    return f"{label} ({m})" if label != m else m


def per_run_means(mx: pd.DataFrame) -> list[Table | str]:
    """FINDING_TABLES as tables of per-run means per policy and machine, each
    only with the counters the runs have (QEMU runs have no remote ratio, IPC
    or MPKI: no table promises them)."""
    present = set(mx["metric"].astype(str))
    have = [m for m in FINDING_METRICS if m in present]
    if not have:
        return []
    sub = mx[mx["metric"].isin(have)]
    t = summarize(
        sub.assign(machine=finding.machines_with_mix(sub)), ["policy", "machine", "metric"]
    )
    vals: dict[tuple[str, str], dict[str, float]] = {}
    for (pol, m_), gg in t.groupby(["policy", "machine"], dropna=False, observed=True):
        vals[(str(pol), str(m_))] = dict(zip(gg["metric"].astype(str), gg["mean"], strict=False))
    keys = sorted(vals, key=lambda k: (finding.machine_order(k[1]), plots.order_policies([k[0]])))
    out: list[Table | str] = []
    for title, ms in FINDING_TABLES:
        cols = [m for m in ms if m in present]
        if not cols:
            continue
        rows = [[pol, m_, *[_fmt(vals[(pol, m_)].get(m, math.nan)) for m in cols]]
                for pol, m_ in keys]  # fmt: skip
        out.append(Table(["policy", "machine", *map(metric_label, cols)], rows,
                         f"Per-run means: {title}"))  # fmt: skip
    if {"lb_migrated", "cross_node_migrations"} <= present:
        out.append("What the migration counts count: " + COUNTS_NOTE + ".")
    return out


def _mean_range(r: Any, metric: str) -> str:
    mean = getattr(r, f"{metric}_mean")
    if math.isnan(mean):
        return "–"
    lo, hi = getattr(r, f"{metric}_min"), getattr(r, f"{metric}_max")
    return f"{_fmt(mean)} ({_fmt(lo)}-{_fmt(hi)})"


NO_GATE = "no positive control and no policy the gate checks"


def finding_unfilled(mx: pd.DataFrame) -> str | None:
    """Why the runs @mx cannot fill the first-finding section (None: they can).
    It needs a positive control, or a gate over measured counters and paired
    repeats to give the improvement an interval: a one-repeat pipeline check
    (the quick preset) would show a FAILED gate that is no finding at all."""
    if finding.positive_control(mx) is not None:
        return None
    g = finding.gate(mx)
    if g is None or g.rows.empty:
        return NO_GATE
    if g.rows["value"].isna().any():
        missing = sorted(set(g.rows[g.rows["value"].isna()]["check"].astype(str)))
        return (
            f"the gate's counters were not measured ({', '.join(missing)}: a kernel "
            "without the per-process migration counters)"
        )
    imp = finding.improvement_by_factor(mx)
    if imp.empty or int(imp["n"].max()) < 2:
        return "one repeat per point, so no improvement has a 95 % interval"
    return None


def finding_section(
    mx: pd.DataFrame, note: str, metrics: pd.DataFrame | None = None
) -> Section | None:
    """Positive control, go/no-go gate, improvement per policy and NUMA factor
    with paired 95 % CIs (per mix, and per program from @metrics' program
    rows), the decision counters, and the conclusion (issue 15)."""
    ctl = finding.positive_control(mx)
    g = finding.gate(mx)
    imp = finding.improvement_by_factor(mx)
    progs = finding.improvement_by_program(metrics) if metrics is not None else None
    if ctl is None and g is None:
        return None
    s = Section("First finding: control, gate, improvement per NUMA factor" + note)
    if ctl is not None:
        s.items.append(
            Table(
                [
                    "machine",
                    "elapsed direct",
                    "elapsed crossed",
                    "crossed / direct",
                    "remote ratio direct",
                    "remote ratio crossed",
                ],
                [
                    [
                        r.machine,
                        _fmt(r.elapsed_direct),
                        _fmt(r.elapsed_crossed),
                        _fmt(r.crossed_over_direct),
                        _fmt(r.remote_ratio_direct),
                        _fmt(r.remote_ratio_crossed),
                    ]
                    for r in ctl.itertuples()
                ],
                "Positive control: one program pinned on its data's node (direct) or one hop "
                "away (crossed); mean over repeats",
            )  # fmt: skip
        )
    if g is not None:
        verdict = "PASSED" if g.passed else "FAILED"
        s.paras.append(
            f"Go/no-go gate: {verdict}. Needs, per run: under default at least "
            f"{finding.GATE_MIN_BALANCE_XNODE} cross-node load-balancing migrations (detach + "
            "active balance, the kernel's per-process counts); under mbplus and excl non-zero "
            "leader-on-destination takes and leader-on-source skips."
        )
        summ = (
            g.rows.groupby(["policy", "machine", "check"], observed=True)
            .agg(runs=("ok", "size"), passed=("ok", "sum"), min=("value", "min"),
                 roi=("roi_s", "mean"), rate=("per_100ms", "mean"))
            .reset_index()
        )  # fmt: skip
        s.items.append(
            Table(
                [
                    "policy",
                    "machine",
                    "check",
                    "runs",
                    "passed",
                    "min value",
                    "ROI (s, mean)",
                    "per 100 ms of ROI (mean)",
                ],
                [
                    [
                        r.policy,
                        r.machine,
                        r.check,
                        int(r.runs),
                        int(r.passed),
                        _fmt(float(r.min)),
                        _fmt(float(r.roi)),
                        _fmt(float(r.rate)),
                    ]
                    for r in summ.itertuples()
                ],  # fmt: skip
                "Gate checks per policy and machine (NUMA factor or link latency); ROI in "
                "simulated seconds on gem5. The count per 100 ms projects to a longer ROI only "
                "if the events come evenly through it, which one count per run cannot show",
            )
        )
    if not imp.empty:
        b = baseline_name(mx)
        s.items.append(
            Table(
                ["policy", "machine", f"improvement over {b}", "95 % CI", "pairs", "beyond CI"],
                [
                    [
                        r.policy,
                        r.machine,
                        f"{r.mean:+.2f} %",
                        f"[{r.ci95_lo:+.2f}, {r.ci95_hi:+.2f}]" if r.n >= 2 else "–",
                        int(r.n),
                        "yes" if r.differs else "no",
                    ]
                    for r in imp.itertuples()
                ],
                "Improvement = (baseline time / policy time − 1) × 100, paired by repeat",
            )  # fmt: skip
        )
    if progs is not None and not progs.empty and metrics is not None:
        b = baseline_name(metrics[metrics["entity_type"].astype(str) == "program"])
        s.items.append(
            Table(
                ["policy", "machine", "program", f"improvement over {b}", "95 % CI", "pairs",
                 "beyond CI"],
                [
                    [r.policy, r.machine, r.program, f"{r.mean:+.2f} %",
                     f"[{r.ci95_lo:+.2f}, {r.ci95_hi:+.2f}]" if r.n >= 2 else "–",
                     int(r.n), "yes" if r.differs else "no"]
                    for r in progs.itertuples()
                ],
                "Improvement per program of the mix (its own elapsed time), paired by repeat; "
                "the mix's elapsed time runs from the first start to the last exit",
            )
        )  # fmt: skip
    home = finding.home_node_by_program(metrics) if metrics is not None else pd.DataFrame()
    if not home.empty:
        s.items.append(
            Table(
                ["policy", "machine", "program", "runs", "workers started on the leader's node",
                 "home-node share", "home-node load"],
                [
                    [r.policy, r.machine, r.program, int(r.runs),
                     *[_mean_range(r, m) for m in finding.HOME_METRICS]]
                    for r in home.itertuples()
                ],
                "Where each program's threads ran, mean (min-max) over runs: the share of its "
                "workers that fork placement put on the leader's node; the share of its "
                "task-samples on its home node (the node holding most of its pages; kMLB "
                "kernels); that node's threads over the mean per node. A leader-on-destination "
                "take needs a thread away from home: shares of 1 leave nothing to take",
            )
        )  # fmt: skip
    s.items.extend(per_run_means(mx))
    backends = frozenset(mx["backend"].dropna().astype(str)) if "backend" in mx else frozenset()
    s.paras.extend(finding.conclusion(imp, g, ctl, backends, progs, home))
    return s


# ------------------------------------------------------------------ verdict
VERDICT_EXTRA_COLS = ("kernel_variant", "pinning", "sched_scale", "nb_scan", "cpu_roi")
VERDICT_MAX_DRAWN = 6  # configurations in the secondary table and the forest plot


def _verdict_labels(vs: list[verdict.Verdict]) -> list[str]:
    """cfg_label of each verdict's configuration, with the columns it does not
    show (kernel variant, pinning, time scales, CPU model) added where the
    configurations differ in them."""
    vary = [c for c in VERDICT_EXTRA_COLS
            if len({str(v.config.get(c)) for v in vs}) > 1]  # fmt: skip
    return [cfg_label(v.config) + "".join(f" {c}={v.config.get(c)}" for c in vary) for v in vs]


def _pct_interval(lo: float, hi: float) -> str:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "no interval"
    return f"[{verdict.pct(lo):+.2f}, {verdict.pct(hi):+.2f}]"


def _p(p: float) -> str:
    return "–" if not math.isfinite(p) else f"{p:.3g}"


def _arm_label(c: verdict.Contrast) -> str:
    """A contrast's policy, with its NUMA balancing when that is not the
    setting of its kind (autonuma runs with it on)."""
    usual = 1 if c.policy == verdict.AUTONUMA else verdict.NUMA_BALANCING
    return c.policy if c.numa_balancing == usual else f"{c.policy} nb={c.numa_balancing}"


def _primary_sentence(label: str, v: verdict.Verdict) -> str:
    c = v.contrast
    s = f"Primary verdict, {label}: {v.decision.upper()}. "
    s += f"{verdict.POLICY} against {verdict.BASELINE}: {verdict.pct(c.mean):+.2f} %"
    if c.has_interval:
        s += f" {_pct_interval(c.lo, c.hi)} (95 % t interval, n = {c.n} paired repeats)."
    else:
        s += f" (n = {c.n} paired repeat{'' if c.n == 1 else 's'}, no interval)."
    w = v.welch
    if w is not None:
        s += (
            f" Sensitivity, Welch's unpaired t interval on the per-run mean of ln(t) over "
            f"the programs ({w.n_policy} {verdict.POLICY} and {w.n_baseline} "
            f"{verdict.BASELINE} runs, {w.df:.1f} degrees of freedom): "
            f"{verdict.pct(w.mean):+.2f} % {_pct_interval(w.lo, w.hi)}."
        )
    else:
        s += " Sensitivity (Welch): no interval (fewer than 2 runs an arm, or no spread)."
    return s


def verdict_section(metrics: pd.DataFrame, runs: pd.DataFrame | None = None) -> Section | None:
    """The verdict (verdict.py): the pre-registered contrast's decision per
    configuration, the Welch check, the secondary contrasts and a forest plot
    of all of them, then beside it the gates, the mechanism and the
    improvement per program (verdict_beside); None unless some configuration
    has excl and default runs at NUMA balancing 0 paired in at least 2
    repeats. @runs (the runs frame) adds the runs that did not finish, which
    fail both gates; without it the runs are those of @metrics."""
    vs = verdict.verdicts(metrics)
    if not verdict.decided(vs):
        return None
    labels = _verdict_labels(vs)
    pol, base = verdict.POLICY, verdict.BASELINE
    s = Section(f"Verdict: {pol} against {base}, the pre-registered contrast")
    s.paras.append(
        "This section computes the verdict experiment's pre-registered analysis (issue 44). "
        "Its verdict is confirmatory only for the runs of a sweep whose pre-registration "
        "(findings/NAME/PREREGISTRATION.md, committed before the sweep's first run) fixes "
        "this endpoint, the number of repeats and the rule below; on other runs it is a "
        "description, and every other contrast here is exploratory. The per-run gates "
        "(regime, mechanism) and the mechanism are reported below, beside the result: a run "
        "that fails a gate stays in every contrast."
    )
    s.paras.append(
        f"Endpoint per repeat: the mean over the mix's programs of ln(t_{base} / t_{pol}), "
        "t = the program's guest elapsed time, the two runs paired by configuration and "
        "repeat (only programs both runs have); estimate: the mean over the repeats with a "
        "Student t interval, shown as (exp(x) − 1) × 100 %."
    )
    s.paras.append(
        f"Decision rule: confirmed if the 95 % interval's lower bound is above 0 %, refuted "
        f"if its upper bound is below +{verdict.pct(verdict.REFUTE_BELOW):.0f} % (a third of "
        f"the paper's +{verdict.PAPER_PCT} % for {pol}) and its lower bound is not, "
        f"'{verdict.CONFIRMED_SMALL}' if the whole interval lies between 0 and "
        f"+{verdict.pct(verdict.REFUTE_BELOW):.0f} % (each bound is a one-sided test at "
        "2.5 %), otherwise undecided; fewer than 2 paired repeats give no verdict. Both arms "
        f"run with NUMA balancing "
        f"{verdict.NUMA_BALANCING}; the pre-registered machine is gem5's at NUMA factor "
        f"{verdict.NUMA_FACTOR:g}."
    )
    primary = [(lab, v) for lab, v in zip(labels, vs, strict=True) if v.primary]
    if any(v.config.get("backend") == "qemu" for v in vs):
        s.paras.append(
            "WARNING — configurations on QEMU time host seconds under TCG, not architectural "
            "performance: their rows describe the pipeline, not the policies."
        )
    if not primary:
        s.paras.append(
            f"No configuration here is at the pre-registered machine (gem5, NUMA factor "
            f"{verdict.NUMA_FACTOR:g}): every verdict below is exploratory."
        )
    s.paras.extend(_primary_sentence(lab, v) for lab, v in primary)
    s.items.append(
        Table(
            ["configuration", "at the pre-registered machine", "pairs", f"{pol} vs {base}",
             "95 % CI", "decision", "Welch 95 % CI (runs)"],
            [
                [lab, "yes" if v.primary else "no (exploratory)", v.contrast.n,
                 f"{verdict.pct(v.contrast.mean):+.2f} %",
                 _pct_interval(v.contrast.lo, v.contrast.hi), v.decision,
                 "–" if v.welch is None else f"{_pct_interval(v.welch.lo, v.welch.hi)} "
                 f"({v.welch.n_policy} + {v.welch.n_baseline})"]
                for lab, v in zip(labels, vs, strict=True)
            ],
            f"The verdict per configuration: improvement of {pol} over {base} on the endpoint, "
            "paired by repeat, in %",
        )
    )  # fmt: skip
    # the secondary table and the forest: the pre-registered machine's configurations
    # first, those with a verdict next, at most VERDICT_MAX_DRAWN of them
    pick = sorted(range(len(vs)), key=lambda i: (not vs[i].primary, vs[i].contrast.n < 2))
    pick = sorted(pick[:VERDICT_MAX_DRAWN])
    if len(pick) < len(vs):
        s.paras.append(
            f"The secondary table and the forest plot show {len(pick)} of the {len(vs)} "
            "configurations (those at the pre-registered machine first); the others' primary "
            "contrast is in the verdict table."
        )
    order = plots.order_policies([c.policy for v in vs for c in v.secondary])
    shown = [(labels[i], vs[i], sorted(vs[i].secondary,
                                       key=lambda c: (order.index(c.policy), c.numa_balancing)))
             for i in pick]  # fmt: skip
    sec = [(lab, v, c) for lab, v, cs in shown for c in cs]
    if sec:
        s.items.append(
            Table(
                ["configuration", "policy", "pairs", f"improvement over {base}",
                 "Bonferroni interval", "level", "p (paired t)", "p (Holm)"],
                [
                    [lab, _arm_label(c), c.n, f"{verdict.pct(c.mean):+.2f} %",
                     _pct_interval(c.lo, c.hi), f"{c.level * 100:.2f} %", _p(c.p), _p(c.p_holm)]
                    for lab, v, c in sec
                ],
                f"Secondary contrasts (a Holm family; confirmatory only for the arms a "
                f"pre-registration names): every other policy against {base} on the same "
                "endpoint. p: two-sided paired t-test, Holm-adjusted over the m contrasts "
                "of the configuration that have one; interval at the Bonferroni level "
                f"1 − 0.05/m. autonuma is paired with {base} at NUMA balancing 0; stock boots "
                "another kernel from another checkpoint, so its pairs differ in starting state "
                "as well as in policy",
            )
        )  # fmt: skip
    rows = []
    for lab, v, cs in shown:
        for c, marked in [(v.contrast, v.primary)] + [(x, False) for x in cs]:
            rows.append({"group": lab, "label": _arm_label(c), "mean": verdict.pct(c.mean),
                         "lo": verdict.pct(c.lo), "hi": verdict.pct(c.hi), "n": c.n,
                         "marked": marked})  # fmt: skip
    levels = sorted({f"{v.bonferroni_level * 100:.2f} %" for _, v, _ in shown
                     if math.isfinite(v.bonferroni_level)})  # fmt: skip
    n_runs = sum(v.runs for _, v, _ in shown)
    caption = (
        f"Every contrast against {base} on the verdict's endpoint, per configuration: the "
        f"mean over the programs of ln(t_{base} / t_policy) paired by repeat, as "
        "(exp(x) − 1) × 100 %. Dot = mean over the repeats, n = pairs, the vertical line is "
        f"no difference, the dashed line +{verdict.pct(verdict.REFUTE_BELOW):.0f} % (refuted if "
        f"{pol}'s whole interval lies below it). {pol}'s bar is its 95 % t interval"
        + (f" (diamond, band: the {MARK} contrast at the pre-registered machine)"
           if primary else "")
        + (f"; the other policies' bars are at the Bonferroni level 1 − 0.05/m "
           f"({', '.join(levels)})" if levels else "")
        + "; a hollow dot has no interval. Only the marked contrast is confirmatory, and only "
        f"under a pre-registration. Runs: {n_runs} runs in {len(shown)} "
        f"configuration{'' if len(shown) == 1 else 's'}."
    )  # fmt: skip
    bound = verdict.pct(verdict.REFUTE_BELOW)
    png = plots.forest(rows, f"improvement over {base} (%)",
                       f"Verdict: {pol} and the other policies against {base}", MARK,
                       threshold=(bound, f"+{bound:.0f} %: refute bound"))  # fmt: skip
    s.items.append(Figure(png, caption, "verdict_forest"))
    s.items.extend(verdict_beside(metrics, runs, [(lab, v) for lab, v, _ in shown]))
    return s


# ------------------------------------------------------------------ beside the verdict
GATE_MAX_LISTED = 40  # runs in the table of runs failing a gate
GATE_VALUE_LABELS = {
    "sched_runnable_per_cpu_all_running": "runnable per CPU while all run",
    "sched_busy_fraction_all_running": "busy fraction while all run",
    gates.XNODE_BALANCE: "cross-node balancing migrations",
    "lb_taken_leader_dst": "leader-on-destination takes",
    "lb_skipped_leader_src": "leader-on-source skips",
    gates.PLATFORM: "CPUs halted with tasks queued while all run",
}
MECHANISM_LABELS = {
    "run_delay_ms_per_thread": "run-queue wait per thread (ms)",
    gates.PICKED_NONE_SHARE: "cross-node passes that moved nothing (share)",
    "remote_ratio": "remote ratio",
    gates.XNODE_BALANCE: "cross-node balancing migrations",
    "cross_node_migrations": "cross-node migrations, all causes",
}


def _gate_rule_text() -> str:
    regime = " and ".join(f"{m} >= {low:g}" for m, low in gates.REGIME.items())
    leader = " and ".join(f"{m} > 0" for m in gates.LEADER)
    return (
        f"regime (every policy): {regime}; mechanism: {', '.join(gates.XNODE_POLICIES)} at "
        f"least {gates.MIN_XNODE} cross-node balancing migrations ({' + '.join(gates.XNODE)}), "
        f"{', '.join(gates.LEADER_POLICIES)}: {leader}; platform (every policy, from "
        f"amendment 6): {gates.PLATFORM} = 0; a run that is not done, or whose "
        "value was not measured, fails the gate"
    )


def _cfg_key(v: verdict.Verdict) -> tuple[Any, ...]:
    """A verdict's configuration as gates.run_table's cfg (same column order)."""
    return tuple(v.config.values())


def _policy_order(g: pd.DataFrame, labels: dict[tuple[Any, ...], str]) -> pd.DataFrame:
    """@g's rows of the configurations in @labels, in their order, then by
    policy (plots.order_policies), NUMA balancing and repeat."""
    keys = list(labels)
    mine = g[[c in labels for c in g["cfg"]]]
    order = plots.order_policies(sorted(set(mine["policy"].astype(str))))
    reps = mine["repeat"] if "repeat" in mine.columns else pd.Series(0, index=mine.index)
    rank = [
        (keys.index(c), order.index(str(p)), int(nb), -1 if r is None or r != r else int(r))
        for c, p, nb, r in zip(mine["cfg"], mine["policy"], mine["numa_balancing"], reps,
                               strict=True)
    ]  # fmt: skip
    return mine.iloc[sorted(range(len(mine)), key=rank.__getitem__)]


COUNT_VALUES = (gates.XNODE_BALANCE, *gates.LEADER, gates.PLATFORM, "cross_node_migrations")


def _value(metric: str, v: float) -> str:
    """A gate or mechanism value; counts (and their medians) without decimals
    unless they have some."""
    if metric in COUNT_VALUES and math.isfinite(v) and v.is_integer():
        return str(int(v))
    return _fmt(v)


def _policy_label(policy: str, nb: int) -> str:
    usual = 1 if policy == verdict.AUTONUMA else verdict.NUMA_BALANCING
    return policy if nb == usual else f"{policy} nb={nb}"


def gate_table(g: pd.DataFrame, labels: dict[tuple[Any, ...], str]) -> Table:
    """Per configuration and policy, from gates.run_gates @g: the runs, those
    not done, those passing each gate, and the gate values' medians."""
    summ = _policy_order(gates.summary(g), labels)
    vals = list(GATE_VALUE_LABELS)
    rows = [
        [labels[r["cfg"]], _policy_label(str(r["policy"]), int(r["numa_balancing"])),
         int(r["runs"]), int(r["runs"] - r["done"]), int(r["regime"]),
         "–" if not gates.has_mechanism_gate(str(r["policy"])) else int(r["mechanism"]),
         int(r["platform"]), *[_value(m, float(r[m])) for m in vals]]
        for _, r in summ.iterrows()
    ]  # fmt: skip
    return Table(
        ["configuration", "policy", "runs", "not done", "regime passed", "mechanism passed",
         "platform passed",
         *[f"{GATE_VALUE_LABELS[m]} (median)" for m in vals]],
        rows,
        "The per-run gates, pre-registered in findings/2026-11-28-verdict-pilot/PLAN.md "
        f"({_gate_rule_text()}): per policy the runs, those not done, those passing each gate "
        "(–: the policy has no mechanism gate), and the medians over the done runs of the "
        "gate values (–: not measured). No run is dropped for failing a gate",
    )  # fmt: skip


def _fails(r: Any) -> str:
    failed = [name for name, ok in (("regime", r["regime_ok"]), ("mechanism", r["mechanism_ok"]),
                                    ("platform", r["platform_ok"]))
              if ok is not None and not bool(ok)]  # fmt: skip
    return " and ".join(failed)


def failing_runs_table(g: pd.DataFrame, labels: dict[tuple[Any, ...], str]) -> Table | str:
    """The runs of @g (gates.run_gates) that fail a gate, with their values
    (at most GATE_MAX_LISTED), or a sentence when none does."""
    mine = _policy_order(g, labels)
    bad = mine[[_fails(r) != "" for _, r in mine.iterrows()]]
    if bad.empty:
        return f"All {len(mine)} runs pass every gate that applies to them."
    vals = list(GATE_VALUE_LABELS)
    shown = bad.head(GATE_MAX_LISTED)
    rows = [
        [labels[r["cfg"]], _policy_label(str(r["policy"]), int(r["numa_balancing"])),
         r["repeat"], str(r["run_id"])[:16], r["state"], _fails(r),
         *[_value(m, float(r[m])) for m in vals]]
        for _, r in shown.iterrows()
    ]  # fmt: skip
    return Table(
        ["configuration", "policy", "repeat", "run", "state", "fails",
         *[GATE_VALUE_LABELS[m] for m in vals]],
        rows,
        f"The runs failing a gate: {len(bad)} of {len(mine)}"
        + (f", the first {len(shown)} listed" if len(shown) < len(bad) else "")
        + "; their values (–: not measured). They stay in every contrast above",
    )  # fmt: skip


def mechanism_table(g: pd.DataFrame, labels: dict[tuple[Any, ...], str]) -> Table:
    """Per configuration and policy, the medians over the done runs of @g
    (gates.run_gates) of gates.MECHANISM."""
    summ = _policy_order(gates.summary(g), labels)
    rows = [
        [labels[r["cfg"]], _policy_label(str(r["policy"]), int(r["numa_balancing"])),
         int(r["done"]), *[_value(m, float(r[m])) for m in gates.MECHANISM]]
        for _, r in summ.iterrows()
    ]  # fmt: skip
    return Table(
        ["configuration", "policy", "done runs", *[MECHANISM_LABELS[m] for m in gates.MECHANISM]],
        rows,
        "The mechanism per policy: medians over the done runs of each run's value for the mix "
        "(–: not measured). Run-queue wait: the mean over the programs' threads of the time "
        "each waited on a run queue (run_delay_ms_per_thread); passes that moved nothing: "
        "lb_picked_none / lb_attempts, the policy's cross-node balance passes that moved no "
        "task (all tasks of the guest); remote ratio: demand requests served by another "
        "socket's directory (gem5); cross-node balancing migrations: "
        f"{' + '.join(gates.XNODE)}; all causes: cross_node_migrations (the programs' threads "
        "across nodes, wake-up placement and NUMA balancing included)",
    )  # fmt: skip


def program_table(shown: list[tuple[str, verdict.Verdict]]) -> Table | None:
    """The primary contrast per program of the mix, per configuration."""
    rows = [
        [lab, prog, c.n, f"{verdict.pct(c.mean):+.2f} %",
         _pct_interval(c.lo, c.hi) if c.n >= 2 else "–"]
        for lab, v in shown
        for prog, c in v.programs.items()
    ]  # fmt: skip
    if not rows:
        return None
    pol, base = verdict.POLICY, verdict.BASELINE
    return Table(
        ["configuration", "program", "pairs", f"{pol} vs {base}", "95 % CI"],
        rows,
        f"Improvement of {pol} over {base} per program (exploratory): the mean over the "
        f"repeats of the program's ln(t_{base} / t_{pol}), as (exp(x) − 1) × 100 %, with its "
        "95 % t interval where 2 or more repeats pair it (no interval: the repeats are "
        "identical); not adjusted for the number of programs",
    )  # fmt: skip


def _fidelity(shown: list[tuple[str, verdict.Verdict]]) -> str | None:
    """The fidelity caveats of the gem5 configurations: the model's are in the
    report's head (backends.GEM5_CAVEAT); the ROI CPU model is said here."""
    gem5 = [v for _, v in shown if v.config.get("backend") == "gem5"]
    if not gem5:
        return None
    cpus = sorted({str(v.config.get("cpu_roi") or "timing") for v in gem5})
    names = {"timing": "the in-order TimingSimpleCPU, not the out-of-order O3 core",
             "o3": "the out-of-order O3 core"}  # fmt: skip
    return (
        "Fidelity caveats: the gem5 model's (no shared L3, L1/L2 exclusive, 3-hop owner "
        "forwarding) are stated at the head of this report and hold for every number here; "
        "the ROI ran on " + "; ".join(names.get(c, c) for c in cpus) + "."
    )


def verdict_beside(
    metrics: pd.DataFrame, runs: pd.DataFrame | None, shown: list[tuple[str, verdict.Verdict]]
) -> list[Table | str]:
    """What the report carries beside the verdict of the configurations
    @shown (label, Verdict): the gates per run counted per policy, the runs
    failing one, the mechanism per policy, the improvement per program and
    the fidelity caveats. Every run of these configurations counts."""
    labels = {_cfg_key(v): lab for lab, v in shown}
    g = gates.run_gates(metrics, runs)
    out: list[Table | str] = [
        "Beside the result: the per-run gates, the mechanism and the improvement per program "
        f"of the {len(shown)} configuration{'' if len(shown) == 1 else 's'} above."
    ]
    out += [gate_table(g, labels), failing_runs_table(g, labels), mechanism_table(g, labels)]
    prog = program_table(shown)
    if prog is not None:
        out.append(prog)
    fid = _fidelity(shown)
    if fid is not None:
        out.append(fid)
    return out


# What the guest kernel did, the headline of a QEMU report (its times are not
# architectural): in this order, those the runs have.
HEADLINE_COUNTS = (
    "cross_node_migrations",
    "migrations_balance_xnode",
    "lb_migrated",
    "task_migrations",
    "task_migrations_sampled",
    "page_faults",
    "page_migrations",
    "remote_ratio_guest",
)


def headline_counts(rmx: pd.DataFrame) -> Table | None:
    """Mean per run of HEADLINE_COUNTS per policy (a row per counter)."""
    d = rmx[rmx["metric"].isin(HEADLINE_COUNTS)]
    if d.empty:
        return None
    summ = summarize(d, ["metric", "policy"])
    pols = plots.order_policies(list(rmx["policy"].astype(str).unique()))
    rows = []
    for m in HEADLINE_COUNTS:
        sm = summ[summ["metric"] == m].set_index("policy")
        if sm.empty:
            continue
        rows.append([METRICS[m].label, *[_fmt(sm.loc[p, "mean"]) if p in sm.index else "–"
                                         for p in pols]])  # fmt: skip
    return Table(["counter (mean per run)", *pols], rows, f"Runs: {runs_note(rmx)}")


# lb_migrated and the per-program counts count different tasks (kernel-patches
# 0009 and 0013): said wherever both stand side by side.
COUNTS_NOTE = (
    "the programs' counts (kernel) are the mix's programs' threads only, every cause "
    "(load-balance detach, active balance, wake-up placement, NUMA balancing), read at each "
    "program's end; 'tasks moved across nodes by load balancing (all tasks)' (lb_migrated) "
    "counts every task a cross-node load-balance pass detached in the whole guest (kernel "
    "threads, the mix runner and its sampler too) from just before the programs start to "
    "after they exit, active balance not included: it can be 1 where the programs' count is 0"
)


def ci_promise(pairs: int) -> str:
    """What the headline's improvement column holds, given the most pairs
    any of its points has: an interval needs two."""
    if pairs >= 2:
        return "mean ± 95 % CI over the pairs"
    return "one pair per policy, so no 95 % CI (it needs at least 2 repeats)"


def headline(
    mx: pd.DataFrame,
    ref: dict[str, Any],
    rmx: pd.DataFrame,
    note: str,
    runs: pd.DataFrame | None = None,
) -> Section:
    """Improvement over the baseline in the reference configuration; on QEMU
    (host time, not architectural) the counts lead and the improvement
    follows as what it is."""
    b = baseline_name(rmx)
    per = improvement_summary(rmx, ["policy", "threads"])
    overall = improvement_summary(rmx, ["policy"])
    pairs = int(per["n"].max()) if len(per) else 0
    qemu = ref["backend"] == "qemu"
    s = Section(
        "Headline: what the kernel did per policy (counts)" if qemu
        else f"Headline: improvement over {b}"
    )  # fmt: skip
    if qemu:
        s.paras.append(
            f"Reference configuration: {cfg_label(ref)}. On QEMU the kernel's counts are "
            "the result (they are the guest kernel's own); elapsed times are host time under "
            "TCG, so the improvement below them is not a NUMA result."
        )
        counts = headline_counts(rmx)
        if counts is not None:
            s.items.append(counts)
            s.items.append("What the migration counts count: " + COUNTS_NOTE + ".")
    imp_text = (
        f"Improvement = ({b} time / policy time − 1) × 100, paired by repeat; "
        f"{ci_promise(pairs)}. Baseline: stock (the unmodified kernel) where the runs have "
        "it, else default (the patched kernel's first fit)."
    )
    if qemu:  # after the counts: items keep their order, paragraphs come first
        s.items.append(imp_text)
    else:
        s.paras.append(f"Reference configuration: {cfg_label(ref)}{note}. " + imp_text)
    rows = []
    for pol in plots.order_policies(list(overall["policy"].astype(str))):
        o = overall[overall["policy"] == pol].iloc[0]
        rows.append(
            [
                pol,
                pm(o["mean"], o["ci95"], True),
                int(o["n"]),
                ", ".join(
                    f"t{int(r.threads)}: {r.mean:+.1f}"
                    for r in per[per["policy"] == pol].sort_values("threads").itertuples()
                ),
            ]
        )
    s.items.append(
        Table(
            ["policy", "improvement (all threads)", "pairs", "by threads"],
            rows,
            f"Improvement over {b}{note}" if qemu else "",
        )
    )
    s.items.append(paper_comparison(mx, ref, runs))
    return s


# When our figure may stand beside the paper's (docs/DESIGN.md, "Comparing with
# the paper"): each condition, and how a run set fails it.
PAPER_CONDITIONS = (
    "gem5 timing (QEMU's is not architectural)",
    "the paper's NUMA factor 1.6",
    "an unmodified-kernel baseline (policy stock, kernel variant stock)",
    "real PARSEC programs only",
    "NUMA balancing on, as on the paper's Linux 3.11",
    "at least 3 repeats that vary",
)


def comparability(rows: pd.DataFrame, runs: pd.DataFrame | None) -> list[str]:
    """The paper conditions the runs behind ROWS (improvement rows) do not meet."""
    failed = []
    if set(rows["backend"].astype(str)) != {"gem5"}:
        failed.append(PAPER_CONDITIONS[0])
    if not ((rows["numa_factor"] - 1.6).abs() < 1e-9).all():
        failed.append(PAPER_CONDITIONS[1])
    if "stock" not in set(rows.get("baseline", pd.Series(["default"])).astype(str)):
        failed.append(PAPER_CONDITIONS[2])
    kinds: set[str] = set()
    if runs is not None and "program_kinds" in runs.columns:
        sel = runs[runs["run_id"].isin(set(rows["run_id"]))]["program_kinds"].dropna()
        kinds = {k for v in sel.astype(str) for k in v.split(",")}
    if kinds != {"parsec"}:
        failed.append(PAPER_CONDITIONS[3])
    if "numa_balancing" not in rows.columns or not (rows["numa_balancing"] == 1).all():
        failed.append(PAPER_CONDITIONS[4])
    if rows["repeat"].nunique() < 3 or not rows["value"].std(ddof=1) > 0:
        failed.append(PAPER_CONDITIONS[5])
    return failed


def paper_comparison(
    mx: pd.DataFrame, ref: dict[str, Any], runs: pd.DataFrame | None = None
) -> Table | str:
    at = mx[(mx["numa_factor"] - 1.6).abs() < 1e-9]
    if at.empty or not set(PAPER) & set(at["policy"].astype(str)):
        return (
            "The figures of Chiang & Su [Chiang21] (Excl +10.7 %, MB+ +11.1 % at f = 1.6) "
            "are not compared: "
            "these runs do not cover f = 1.6 with excl or mbplus."
        )
    if ref.get("numa_factor") is not None and abs(float(ref["numa_factor"]) - 1.6) < 1e-9:
        at = select(at, ref)
    rows = []
    for pol, paper in PAPER.items():
        s = improvement_summary(at[at["policy"] == pol], ["policy"])
        if s.empty:
            rows.append([pol, f"+{paper} %", "not run", ""])
            continue
        r = s.iloc[0]
        mine = at[(at["policy"] == pol) & (at["metric"] == "improvement_pct")]
        cfgs = at[at["policy"] == pol].drop_duplicates(GROUP_COLS)
        where = "; ".join(cfg_label({k: c[k] for k in GROUP_COLS}) for c in cfgs.to_dict("records"))
        failed = comparability(mine, runs)
        verdict = " — comparable" if not failed else " — NOT comparable: " + "; ".join(failed)
        rows.append([pol, f"+{paper} %", pm(r["mean"], r["ci95"], True) + verdict, where])
    return Table(
        ["policy", "paper", "ours (mean over threads and repeats)", "our configuration"],
        rows,
        "Paper vs ours at f = 1.6. Paper: " + PAPER_NOTE + " Ours is comparable only when "
        "its runs meet every condition: " + "; ".join(PAPER_CONDITIONS) + ".",
    )


def definitions() -> Section:
    s = Section("Metric definitions")
    rows = [
        [m.name, m.label, m.unit, m.better, "gem5" if m.gem5_only else "all"]
        for m in METRICS.values()
    ]
    s.items.append(
        Table(
            ["metric", "meaning", "unit", "better", "backends"],
            rows,
            "Definitions: analysis/results/metrics.py (one place for every report)",
        )
    )
    return s


def errors_section(fr: Frames, notes: list[str] | None = None) -> Section:
    s = Section("Input problems")
    s.paras.extend(f"Inputs: {n}." for n in notes or [])
    if fr.errors.empty:
        s.paras.append("None." if not notes else "No problem in the runs themselves.")
        return s
    rows = [[str(r.run_id)[:16], r.source, r.message] for r in fr.errors.head(500).itertuples()]
    s.items.append(
        Table(
            ["run", "file", "problem"],
            rows,
            f"{len(fr.errors)} problem(s) (first 500); these inputs were skipped",
        )
    )
    return s
