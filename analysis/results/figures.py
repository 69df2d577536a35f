"""The report's figure sections (Chiang & Su [Chiang21] Sec. 4 and what the paper
could not vary), each a Section with its figure, the table of the numbers drawn
and a caption naming the runs behind it:

* Fig. 11: mean elapsed time, its standard deviation and the improvement over
  the baseline vs threads, one line per policy (reference configuration); with
  fewer than FOREST_BELOW thread counts a forest plot instead;
* Fig. 12: the enhanced selection procedure, MB vs MB+ and Excl_base vs Excl;
* Fig. 13: IPC, LLC MPKI, page faults, task migrations, page migrations (and the
  remote ratios) per policy at the reference thread count;
* Fig. 14: per program elapsed time, stdev and speedup at that thread count;
* heatmaps of the improvement vs NUMA factor x cores per socket per policy;
* each policy's best and worst configuration.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from . import forest, plots
from .document import Figure, Section, Table, _fmt, pm
from .metrics import CONFIG_COLS, METRICS, summarize
from .reference import (
    baseline_name,
    cfg_label,
    improvement_summary,
    not_baseline,
    runs_note,
    select,
    shape_label,
)

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
