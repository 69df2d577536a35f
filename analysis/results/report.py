"""Reports: a self-contained HTML page and a Markdown summary from any set of runs.

Views (Chiang & Su [Chiang21] Sec. 4 and what the paper could not vary):

* Fig. 11: mean elapsed time, its standard deviation and the improvement over
  default vs threads, one line per policy (reference configuration);
* Fig. 12: the enhanced selection procedure, MB vs MB+ and Excl_base vs Excl;
* Fig. 13: IPC, LLC MPKI, page faults, task migrations, page migrations (and the
  remote ratios) per policy at the reference thread count (16 as in the paper,
  else the nearest below);
* Fig. 14: per program elapsed time, stdev and speedup at that thread count;
* heatmaps of the improvement vs NUMA factor x cores per socket per policy;
* each policy's best and worst configuration; the paper's headline figures
  beside ours when the runs include f = 1.6.

The reference configuration is the (backend, sockets, cores per socket, NUMA
factor, mix) group closest to the paper (gem5, 4 x 8, f = 1.6), else the one
with most runs. Every string from the inputs is escaped (html.escape; in
report.md also Markdown's own characters, ``md_text``) and every plot is a
base64 PNG, so report.html has no external references; the Markdown file
links PNG copies in report_files/.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ..sweep.atomic import write_bytes_atomic, write_text_atomic
from ..sweep.backends import CAVEATS
from ..sweep.spec import DEFAULT_WARMUP_S
from . import finding, forest, glossary, plots, run_cost
from .daemons import daemon_section
from .document import (  # noqa: F401 - the document model, re-exported for callers
    CSS,
    IDENTICAL,
    Figure,
    Section,
    Table,
    _fmt,
    md_text,
    pm,
    to_html,
    to_markdown,
)
from .frames import Frames, build_frames, merge_frames, read_frames, read_frames_many
from .metrics import CONFIG_COLS, METRICS, summarize
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
GROUP_COLS = [c for c in CONFIG_COLS if c != "threads"]


def cfg_label(row: Any) -> str:
    f = row.get("numa_factor")
    lat = (
        f"f={f:g}"
        if isinstance(f, float) and not math.isnan(f)
        else f"link={row.get('link_latency')}"
    )
    shape = f"{row.get('sockets')}x{row.get('cores_per_socket')}"
    s = f"{row.get('backend')} {shape} {lat} {row.get('mix')}"
    if "threads" in row and row.get("threads") is not None:
        s += f" t={row.get('threads')}"
    w = row.get("warmup_s")
    if isinstance(w, int | float) and not math.isnan(w) and w != DEFAULT_WARMUP_S:
        s += f" warm-up {w:g} s"
    return s


# ------------------------------------------------------------------ analysis
def _mix(fr: Frames) -> pd.DataFrame:
    m = fr.metrics
    return m[m["entity_type"] == "mix"]


def reference_group(mx: pd.DataFrame) -> dict[str, Any] | None:
    el = mx[mx["metric"] == "elapsed_s"]
    if el.empty:
        return None
    g = el.groupby(GROUP_COLS, dropna=False, observed=True).size().reset_index(name="n")

    def score(r: Any) -> tuple:
        nf = r["numa_factor"]
        return (
            r["backend"] == "gem5",
            isinstance(nf, float) and abs(nf - 1.6) < 1e-9,
            r["sockets"] == 4,
            r["cores_per_socket"] == 8,
            r["n"],
        )

    best = max(g.to_dict("records"), key=score)
    return {k: best[k] for k in GROUP_COLS}


def select(df: pd.DataFrame, group: dict[str, Any]) -> pd.DataFrame:
    mask = pd.Series(True, index=df.index)
    for k, v in group.items():
        if v is None or (isinstance(v, float) and math.isnan(v)):
            mask &= df[k].isna()
        else:
            mask &= df[k] == v
    return df[mask]


def ref_threads(threads: list[int]) -> int:
    if 16 in threads:
        return 16
    below = [t for t in threads if t <= 16]
    return max(below) if below else min(threads)


def not_baseline(mx: pd.DataFrame) -> pd.Series:
    """Rows of a policy other than their own baseline (stock, else default)."""
    base = mx["baseline"] if "baseline" in mx.columns else pd.Series("default", index=mx.index)
    return mx["policy"].astype(str) != base.astype(str)


def baseline_name(mx: pd.DataFrame) -> str:
    """The baseline the improvement (or, given only those, speedup) rows of
    @mx are over, for titles."""
    rows = mx
    if "metric" in mx.columns and (mx["metric"] == "improvement_pct").any():
        rows = mx[mx["metric"] == "improvement_pct"]
    names = sorted(set(rows["baseline"].dropna().astype(str))) if "baseline" in rows else []
    return " / ".join(names) if names else "default"


def improvement_summary(mx: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    imp = mx[(mx["metric"] == "improvement_pct") & not_baseline(mx)]
    return summarize(imp, by)


# ------------------------------------------------------------------ sections
def build(
    fr: Frames, title: str, inputs: list[Path], notes: list[str] | None = None
) -> list[Section]:
    """The report's sections; @notes: what merging the inputs noticed (merge_frames),
    listed under Input problems."""
    secs: list[Section] = []
    runs = fr.runs
    mx = _mix(fr)
    backends = sorted(set(runs["backend"].dropna())) if not runs.empty else []

    head = Section(title)
    head.paras.append(
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} from "
        f"{len(runs)} runs: {', '.join(str(p) for p in inputs)}."
    )
    head.paras.append(f"Backend(s): {', '.join(backends) or 'none'}.")
    head.paras.append("Fig. N views and the paper's figures refer to " + PAPER_REF + ".")
    for b in backends:
        head.paras.append(("WARNING — " if b == "qemu" else "") + CAVEATS.get(b, b))
    secs.append(head)

    st = Section("Runs")
    counts = runs["state"].value_counts().to_dict() if not runs.empty else {}
    st.items.append(Table(["state", "runs"], [[k, v] for k, v in sorted(counts.items())]))
    prov_rows = []
    if not runs.empty:
        # the gem5 binary too: two builds of one source differ in it (and in run ids)
        sha = runs["gem5_sha256"].map(lambda h: str(h)[:16] if isinstance(h, str) else None)
        by = ["backend", "kernel_build_id", "image_id", "tool_version", sha.rename("gem5")]
        for (b, k, i, t, g), n in runs.groupby(by, dropna=False).size().items():
            prov_rows.append([b, k, i, t, "-" if pd.isna(g) else g, n])
    st.items.append(
        Table(
            ["backend", "kernel build", "image", "tool", "gem5 binary", "runs"],
            prov_rows,
            "Provenance (all of it enters the run ids)",
        )
    )
    bad = runs[runs["state"].isin(["failed", "timeout", "interrupted"])] if not runs.empty else runs
    if not bad.empty:
        rows = [
            [
                r["run_id"][:16],
                r["state"],
                cfg_label(r) + f" {r['policy']} r{r['repeat']}",
                r["exit_code"],
                (r["error"] or "")[:200],
            ]
            for _, r in bad.head(200).iterrows()
        ]
        st.items.append(
            Table(
                ["run", "state", "point", "exit", "error"],
                rows,
                f"Unsuccessful runs ({len(bad)}; first 200)",
            )
        )
    st.paras.extend(glossary.mix_glossary(runs))  # what tiny, lft, pft stand for
    secs.append(st)

    if mx.empty:
        secs.append(Section("Results", ["No finished run with results yet."]))
        secs.append(errors_section(fr, notes))
        return secs

    ref = reference_group(mx)
    assert ref is not None
    qemu_note = (
        " (QEMU: host time under TCG, not architectural performance)"
        if ref["backend"] == "qemu"
        else ""
    )
    rmx = select(mx, ref)
    threads = sorted(int(t) for t in rmx["threads"].unique())
    secs.append(headline(mx, ref, rmx, qemu_note, runs))
    why_not = finding_unfilled(mx)
    fs = finding_section(mx, qemu_note, fr.metrics) if why_not is None else None
    if fs:
        fs.paras[:0] = glossary.mix_glossary(runs)
        secs.append(fs)
    elif why_not is not None and why_not != NO_GATE:
        head.paras.append(
            "Not shown: the first-finding section (positive control, go/no-go gate, "
            f"improvement per NUMA factor), which these runs cannot fill: {why_not}."
        )
    secs.append(fig11(rmx, ref, qemu_note, family(mx, ref)))
    s12 = fig12(rmx, ref, qemu_note)
    if s12:
        secs.append(s12)
    t_ref = ref_threads(threads)
    secs.append(fig13(rmx, t_ref, ref))
    s14 = fig14(select(fr.metrics, ref), t_ref, ref, qemu_note)
    s14.paras[:0] = glossary.mix_glossary(runs, [str(ref["mix"])])
    secs.append(s14)
    secs.append(heatmaps(mx, ref))
    secs.append(best_worst(mx))
    ds = daemon_section(mx, runs)  # the user-level policies beside the kernel ones
    if ds is not None:
        secs.append(ds)
    ws = warmup_section(mx)
    if ws is not None:
        secs.append(ws)
    cs = cost_section(runs, mx)
    if cs is not None:
        secs.append(cs)
    secs.append(definitions())
    secs.append(errors_section(fr, notes))
    return secs


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


def runs_note(d: pd.DataFrame) -> str:
    """Which runs rows @d come from, for a caption: how many, of how many
    policies, and the repeats per point."""
    el = d[d["metric"] == "elapsed_s"] if "metric" in d.columns else d
    el = d if el.empty else el  # counters only (Fig. 13): any row names its run
    if el.empty or "run_id" not in el.columns:
        return "no runs"
    per = el.drop_duplicates("run_id").groupby(
        [c for c in ["policy", *CONFIG_COLS] if c in el.columns], dropna=False, observed=True
    ).size()  # fmt: skip
    lo, hi = int(per.min()), int(per.max())
    reps = f"{lo}" if lo == hi else f"{lo}-{hi}"
    npol = el["policy"].astype(str).nunique()
    return (
        f"{el['run_id'].nunique()} runs, {npol} polic{'y' if npol == 1 else 'ies'}, "
        f"{reps} repeat{'' if hi == 1 else 's'} per point"
    )


def shape_label(ref: dict[str, Any]) -> str:
    """cfg_label without the NUMA factor: backend, machine shape, mix."""
    shape = f"{ref.get('sockets')}x{ref.get('cores_per_socket')}"
    return f"{ref.get('backend')} {shape} {ref.get('mix')}"


def family(mx: pd.DataFrame, ref: dict[str, Any]) -> pd.DataFrame:
    """The rows of @mx in the reference configuration at every NUMA factor
    (or link latency) and thread count: what a forest plot compares."""
    return select(mx, {k: v for k, v in ref.items() if k not in ("numa_factor", "link_latency")})


FOREST_BELOW = 3  # fewer thread counts than this: the Fig. 11 view is a forest plot


def fig11(
    rmx: pd.DataFrame, ref: dict[str, Any], note: str, fam: pd.DataFrame | None = None
) -> Section:
    """Fig. 11: lines over the thread counts; with fewer than FOREST_BELOW
    of them a line has no slope to show, so the improvement is a forest plot
    of policy x NUMA factor over @fam (family()) instead."""
    threads = sorted(int(t) for t in rmx["threads"].unique())
    el = summarize(rmx[rmx["metric"] == "elapsed_s"], ["policy", "threads"])
    imp = improvement_summary(rmx, ["policy", "threads"])
    m = el.merge(
        imp[["policy", "threads", "mean", "ci95"]].rename(
            columns={"mean": "imp", "ci95": "imp_ci"}
        ),
        on=["policy", "threads"],
        how="left",
    )
    no_repeats = bool(m["std"].isna().all())
    if len(threads) < FOREST_BELOW:
        fam = rmx if fam is None else fam
        b = baseline_name(fam)
        s = Section(f"Fig. 11 view as a forest plot: improvement over {b} per policy and machine")
        s.paras.append(
            f"These runs have {len(threads)} thread count{'' if len(threads) == 1 else 's'} "
            f"({', '.join(map(str, threads))}); Fig. 11's lines over the thread counts would "
            "put every policy on one x position, so the improvement is shown per policy and "
            "NUMA factor (or link latency), with its paired 95 % interval."
        )
        ff = forest.forest_figure(
            fam[fam["metric"].isin(["elapsed_s", "improvement_pct"])],
            b,
            f"{shape_label(ref)} at every NUMA factor, {runs_note(fam)}{note}",
            "fig11_forest",
            title=f"{shape_label(ref)} t={'/'.join(map(str, threads))}{note}",
        )
        if ff is None:
            s.paras.append(f"No improvement to show: no policy run has a {b} partner run.")
        else:
            s.items.extend(ff)
    else:
        s = Section("Fig. 11 view: elapsed time, standard deviation and improvement vs threads")
        panels = [("mean", "mean elapsed (s)", "ci95")]
        if not no_repeats:
            panels.append(("std", "stdev of elapsed (s)", ""))
        panels.append(("imp", f"improvement over {baseline_name(rmx)} (%)", "imp_ci"))
        s.items.append(
            Figure(
                plots.lines_vs(m, "threads", panels, f"{cfg_label(ref)}{note}"),
                "Fig. 11 view: mean elapsed time (error bar: 95 % CI)"
                + ("" if no_repeats else ", its standard deviation")
                + f" and the improvement over {baseline_name(rmx)} per thread count, one line "
                f"per policy. Runs: {cfg_label(ref)}, {runs_note(rmx)}{note}.",
                "fig11",
            )
        )
    if no_repeats:
        s.paras.append("Standard deviation: not drawn, no repeats (one run per point).")
    pols = plots.order_policies(list(m["policy"].astype(str).unique()))
    ts = sorted(m["threads"].unique())
    rows = []
    for p in pols:  # a row per policy: a column per policy overflows the page
        row: list[Any] = [p]
        for t in ts:
            r = m[(m["policy"] == p) & (m["threads"] == t)]
            if r.empty:
                row.append("–")
                continue
            r0 = r.iloc[0]
            cell = f"{_fmt(r0['mean'])} s" + ("" if no_repeats else f" (sd {_fmt(r0['std'])})")
            if not pd.isna(r0["imp"]):
                cell += f", {r0['imp']:+.1f} %"
            row.append(cell)
        rows.append(row)
    s.items.append(
        Table(
            ["policy", *[f"{int(t)} threads" for t in ts]],
            rows,
            f"{cfg_label(ref)}: mean elapsed"
            + ("" if no_repeats else " (stdev)")
            + f", improvement over {baseline_name(rmx)}"
            + note,
        )  # fmt: skip
    )
    return s


def fig12(rmx: pd.DataFrame, ref: dict[str, Any], note: str) -> Section | None:
    pairs = [("mb", "mbplus"), ("excl_base", "excl")]
    have = set(rmx["policy"].astype(str))
    use = [p for p in pairs if set(p) <= have]
    if not use:
        return None
    s = Section("Fig. 12 view: the enhanced selection procedure (MB vs MB+, Excl_base vs Excl)")
    imp = improvement_summary(rmx, ["policy", "threads"])
    pol = [p for pair in use for p in pair]
    t = imp[imp["policy"].isin(pol)].pivot(index="threads", columns="policy", values="mean")[pol]
    e = imp[imp["policy"].isin(pol)].pivot(index="threads", columns="policy", values="ci95")[pol]
    s.items.append(
        Figure(
            plots.grouped_bars(
                t, f"improvement over {baseline_name(rmx)} (%)", f"{cfg_label(ref)}{note}", e
            ),
            f"Fig. 12 view: improvement over {baseline_name(rmx)} of each policy of the pairs "
            f"MB/MB+ and Excl_base/Excl per thread count (error bar: 95 % CI over paired "
            f"repeats). Runs: {cfg_label(ref)}, {runs_note(rmx[rmx['policy'].isin(pol)])}{note}.",
            "fig12",
        )
    )
    rows = [[int(i), *[pm(t.loc[i, p], e.loc[i, p], True) for p in pol]] for i in t.index]
    s.items.append(
        Table(["threads", *pol], rows, f"improvement over {baseline_name(rmx)}, mean ± 95 % CI")
    )
    return s


FIG13 = [
    "ipc",
    "llc_mpki",
    "page_faults",
    "task_migrations",
    "cross_node_migrations",
    "migrations_balance_xnode",
    "migrations_active_balance",
    "task_migrations_sampled",
    "page_migrations",
    "remote_ratio",
    "remote_ratio_guest",
    "lb_migrated",
    "cross_node_migrations_sampled",
]


def fig13(rmx: pd.DataFrame, t_ref: int, ref: dict[str, Any]) -> Section:
    """Fig. 13: one bar panel per counter that some policy has non-zero; a
    counter that is zero (or absent) for every policy is named in words, not
    drawn as an empty panel."""
    s = Section(f"Fig. 13 view: counters per policy at {t_ref} threads")
    d = rmx[(rmx["threads"] == t_ref) & rmx["metric"].isin(FIG13)]
    summ = summarize(d, ["metric", "policy"])
    panels: dict[str, pd.Series] = {}
    zero: list[str] = []
    rows = []
    pols = plots.order_policies(list(rmx["policy"].astype(str).unique()))
    for m in FIG13:
        sm = summ[summ["metric"] == m].set_index("policy")
        if sm.empty:
            if METRICS[m].gem5_only and ref["backend"] != "gem5":
                rows.append([METRICS[m].label, *["n/a (gem5 only)"] * len(pols)])
            continue
        means = sm["mean"].reindex([p for p in pols if p in sm.index])
        if (means.fillna(0) == 0).all():
            zero.append(METRICS[m].label)
        else:
            panels[METRICS[m].label] = means
        rows.append(
            [
                METRICS[m].label,
                *[pm(sm.loc[p, "mean"], sm.loc[p, "ci95"]) if p in sm.index else "–" for p in pols],
            ]
        )
    if panels:
        s.items.append(
            Figure(
                plots.small_multiples_bars(panels, f"{cfg_label(ref)} t={t_ref}"),
                f"Fig. 13 view: mean over repeats of each counter per policy (a policy "
                f"without a bar has no value for it). Runs: {cfg_label(ref)} t={t_ref}, "
                f"{runs_note(d)}.",
                "fig13",
            )
        )
    if zero:
        s.paras.append(f"All zero under every policy (not drawn): {', '.join(zero)}.")
    s.items.append(Table(["metric", *pols], rows, "mean ± 95 % CI over repeats"))
    return s


def fig14(rm: pd.DataFrame, t_ref: int, ref: dict[str, Any], note: str) -> Section:
    s = Section(f"Fig. 14 view: per program at {t_ref} threads")
    d = rm[(rm["entity_type"] == "program") & (rm["threads"] == t_ref)]
    if d.empty:
        s.paras.append("No per-program results.")
        return s
    el = summarize(d[d["metric"] == "elapsed_s"], ["entity", "policy"])
    sd_rows = d[d["metric"] == "speedup"]
    bname = baseline_name(sd_rows)
    sp = summarize(sd_rows[not_baseline(sd_rows)], ["entity", "policy"])
    pols = plots.order_policies(list(el["policy"].astype(str).unique()))
    t = el.pivot(index="entity", columns="policy", values="mean").reindex(columns=pols)
    sd = el.pivot(index="entity", columns="policy", values="std").reindex(columns=pols)
    s.items.append(
        Figure(
            plots.grouped_bars(t, "mean elapsed (s)", f"{cfg_label(ref)}{note}"),
            f"Fig. 14a view: mean elapsed time of each program of the mix (its own start "
            f"to exit) per policy. Runs: {cfg_label(ref)} t={t_ref}, {runs_note(d)}{note}.",
            "fig14a",
        )
    )
    if sd.isna().all().all():
        s.paras.append("Fig. 14b (standard deviation per program): not drawn, no repeats.")
    else:
        s.items.append(
            Figure(
                plots.grouped_bars(sd, "stdev of elapsed (s)", f"{cfg_label(ref)}{note}"),
                "Fig. 14b view: standard deviation of each program's elapsed time over "
                f"repeats, per policy. Runs: {cfg_label(ref)} t={t_ref}, {runs_note(d)}.",
                "fig14b",
            )
        )
    if not sp.empty:
        spt = sp.pivot(index="entity", columns="policy", values="mean")
        spt = spt.reindex(columns=[p for p in pols if p in spt.columns])
        if not spt.empty and spt.shape[1]:
            s.items.append(
                Figure(
                    plots.grouped_bars(spt - 1.0, "speedup − 1", f"{cfg_label(ref)}{note}"),
                    f"Fig. 14c view: speedup of each program over {bname} (t_{bname} / "
                    f"t_policy, paired by repeat) minus 1, per policy. Runs: {cfg_label(ref)} "
                    f"t={t_ref}, {runs_note(d)}{note}.",
                    "fig14c",
                )
            )
    no_rep = bool(sd.isna().all().all())
    rows = []
    for prog in t.index:  # a row per program and policy: a column per policy overflows
        for p in pols:
            if pd.isna(t.loc[prog, p]):
                continue
            r = sp[(sp["entity"] == prog) & (sp["policy"] == p)]
            row: list[Any] = [prog, p, f"{_fmt(t.loc[prog, p])} s"]
            if not no_rep:
                row.append(f"{_fmt(sd.loc[prog, p])} s")
            row.append(f"x{r.iloc[0]['mean']:.3f}" if not r.empty else "–")
            rows.append(row)
    s.items.append(
        Table(
            [
                "program",
                "policy",
                "mean elapsed",
                *([] if no_rep else ["stdev"]),
                f"speedup over {bname}",
            ],
            rows,
            f"{cfg_label(ref)}: per program, mean over repeats{note}",
        )  # fmt: skip
    )
    return s


def heatmaps(mx: pd.DataFrame, ref: dict[str, Any]) -> Section:
    s = Section("Improvement vs NUMA factor and cores per socket")
    base = {k: ref[k] for k in ("backend", "sockets", "mix", "kernel_variant")}
    d = select(mx[mx["metric"] == "improvement_pct"], base)
    d = d[not_baseline(d)]
    nfs = sorted(d["numa_factor"].dropna().unique())
    cps = sorted(d["cores_per_socket"].unique())
    if len(nfs) < 2 or len(cps) < 2:
        # a heatmap of one row or column is a bar chart without bars
        s.paras.append(
            "Not drawn: a heatmap needs at least 2 NUMA factors x 2 core counts per socket; "
            f"these runs have f: {', '.join(f'{x:g}' for x in nfs) or '–'} and cores/socket: "
            f"{', '.join(str(c) for c in cps) or '–'}"
            + (" (the improvement per factor is the Fig. 11 view's forest plot)." if len(nfs) > 1
               else ".")
        )  # fmt: skip
        return s
    s.paras.append(
        f"{ref['backend']}, {ref['sockets']} sockets, mix {ref['mix']}: mean improvement "
        f"over {baseline_name(d)} (%), averaged over threads and repeats."
    )
    summ = summarize(d, ["policy", "numa_factor", "cores_per_socket"])
    for pol in plots.order_policies(list(summ["policy"].astype(str).unique())):
        g = summ[summ["policy"] == pol].pivot(
            index="numa_factor", columns="cores_per_socket", values="mean"
        )
        s.items.append(
            Figure(
                plots.heatmap(g, f"{pol}: improvement %", "cores per socket", "NUMA factor"),
                f"{pol}: mean improvement over {baseline_name(d)} (%) per NUMA factor (rows) "
                f"and cores per socket (columns), over threads and repeats. Runs: "
                f"{ref['backend']} {ref['sockets']} sockets, mix {ref['mix']}, "
                f"{runs_note(d[d['policy'] == pol])}.",
                f"heat_{pol}",
            )
        )
        rows = [
            [
                f"{f:g}",
                *[("–" if pd.isna(g.loc[f, c]) else f"{g.loc[f, c]:+.1f}") for c in g.columns],
            ]
            for f in g.index
        ]
        s.items.append(Table(["f \\ cores/socket", *[str(c) for c in g.columns]], rows, pol))
    return s


def best_worst(mx: pd.DataFrame) -> Section:
    s = Section("Best and worst configuration per policy")
    summ = improvement_summary(mx, ["policy", *CONFIG_COLS])
    rows = []
    for pol in plots.order_policies(list(summ["policy"].astype(str).unique())):
        d = summ[summ["policy"] == pol].dropna(subset=["mean"])
        if d.empty:
            continue
        b, w = d.loc[d["mean"].idxmax()], d.loc[d["mean"].idxmin()]
        rows.append(
            [
                pol,
                cfg_label(b),
                pm(b["mean"], b["ci95"], True),
                cfg_label(w),
                pm(w["mean"], w["ci95"], True),
                len(d),
            ]
        )
    s.items.append(
        Table(
            [
                "policy",
                "best configuration",
                "improvement",
                "worst configuration",
                "improvement",
                "configurations",
            ],
            rows,
            f"mean improvement over {baseline_name(mx)} ± 95 % CI over repeats",
        )
    )
    return s


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


def write_report(
    dirs: list[Path],
    out: Path,
    title: str | None = None,
    run_ids: set[str] | None = None,
    kept: list[tuple[Path, set[str]]] | None = None,
) -> dict[str, Path]:
    """Frames (written to out/frames) and the report of the runs under @dirs.

    @kept: frames directories of earlier machines and the run ids to take from
    each (the runs a sweep adopted, sweep/kept.py); they come first, so a run
    also found under @dirs is reported from there.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    parts = [(str(d), read_frames(Path(d)).only(ids)) for d, ids in kept or []]
    parts.append((", ".join(map(str, dirs)), build_frames(dirs, run_ids=run_ids)))
    fr, notes = merge_frames(parts)
    fpaths = fr.write(out / "frames")
    inputs = [Path(d) for d, _ in kept or []] + [Path(d) for d in dirs]
    secs = build(fr, title or "numa-lb-study report", inputs, notes)
    return {**_write_sections(secs, out), "frame": fpaths["metrics"],
            **{f"frame_{k}": v for k, v in fpaths.items()}}  # fmt: skip


def write_report_from_frames(
    frames: Path | list[Path],
    out: Path,
    title: str | None = None,
    notes: list[str] | None = None,
) -> dict[str, Path]:
    """The report again from frames directories alone (metrics/runs/errors
    parquet, as write_report leaves them): a finding kept in the repository
    regenerates without its run directories. Several directories are reported
    as one (merge_frames: a run id found twice is taken from the later one;
    @notes receives what the merge noticed). FramesError if one is missing or
    unreadable."""
    dirs = [Path(frames)] if isinstance(frames, str | Path) else [Path(f) for f in frames]
    fr, found = read_frames_many(dirs)
    if notes is not None:
        notes.extend(found)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    secs = build(fr, title or "numa-lb-study report", dirs, found)
    return {**_write_sections(secs, out), "frame": dirs[0] / "metrics.parquet"}


def _write_sections(secs: list[Section], out: Path) -> dict[str, Path]:
    img = out / "report_files"
    img.mkdir(exist_ok=True)
    for sec in secs:
        for it in sec.items:
            if isinstance(it, Figure):
                write_bytes_atomic(img / f"{it.name}.png", it.png)
    write_text_atomic(out / "report.html", to_html(secs))  # temp + rename: never half a file
    write_text_atomic(out / "report.md", to_markdown(secs, "report_files"))
    return {"html": out / "report.html", "md": out / "report.md"}
