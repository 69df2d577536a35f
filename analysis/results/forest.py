"""Improvement over the baseline as a forest plot: one row per policy and
machine (NUMA factor, or link latency; with the thread count when the runs
have several), the mean of the paired improvements and its 95 % t interval,
a line at 0, n (pairs) beside every row, and the pre-registered contrast
marked.

The numbers are finding.improvement_by_factor's (the report's one paired
summary: metrics.summarize over the improvement_pct rows, which add_speedup
paired by repeat); this module only lays them out, so a report that states a
pre-registered endpoint (the verdict experiment) calls ``forest_figure``
with that contrast and shows exactly the numbers of the finding tables.
A point with one pair has no interval: it is drawn hollow and says so, and
its table row says "no interval (1 pair)".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from . import finding, plots
from .document import Figure, Table

MARK = "pre-registered"


@dataclass(frozen=True)
class Contrast:
    """A policy at a machine, as finding.machine_label names it ("f=1.6",
    "link 60"; a label with a mix or thread suffix matches too when
    @machine is its leading part)."""

    policy: str
    machine: str

    def matches(self, policy: str, machine: str) -> bool:
        return policy == self.policy and (
            machine == self.machine or machine.startswith(self.machine + " ")
        )


def forest_frame(mx: pd.DataFrame, marked: Sequence[Contrast] = ()) -> pd.DataFrame:
    """improvement_by_factor of the mix rows @mx (one row per policy and
    machine; per thread count too when @mx holds several: their pairs are
    never pooled), with a ``marked`` column (a contrast of @marked)."""
    threads = sorted(mx["threads"].dropna().unique()) if "threads" in mx.columns else []
    parts = []
    for t in threads if len(threads) > 1 else [None]:
        d = mx if t is None else mx[mx["threads"] == t]
        s = finding.improvement_by_factor(d)
        if t is not None and not s.empty:
            s = s.assign(machine=s["machine"].astype(str) + f" t={int(t)}")
        parts.append(s)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if out.empty:
        return out.assign(marked=pd.Series(dtype=bool))
    out["marked"] = [
        any(c.matches(str(p), str(m)) for c in marked)
        for p, m in zip(out["policy"], out["machine"], strict=True)
    ]
    return out


def _interval(r: pd.Series) -> str:
    if int(r["n"]) < 2:
        return f"no interval ({int(r['n'])} pair)"
    return f"[{r['ci95_lo']:+.2f}, {r['ci95_hi']:+.2f}]"


def forest_figure(
    mx: pd.DataFrame,
    baseline: str,
    runs: str,
    name: str = "forest",
    marked: Sequence[Contrast] = (),
    title: str = "",
) -> tuple[Figure, Table] | None:
    """The forest plot and its table for the mix rows @mx (None without an
    improvement row). @baseline names the baseline, @runs which runs the
    figure shows (for its caption); @marked are the pre-registered contrasts."""
    f = forest_frame(mx, marked)
    if f.empty:
        return None
    f = f.assign(_o=[plots.order_policies(list(f["policy"].astype(str))).index(str(p))
                     for p in f["policy"]])  # fmt: skip
    f = f.sort_values(["machine", "_o"], key=lambda c: c.map(finding.machine_order)
                      if c.name == "machine" else c, kind="stable")  # fmt: skip
    rows = [
        {"group": r.machine, "label": str(r.policy), "mean": float(r.mean),
         "lo": float(r.ci95_lo), "hi": float(r.ci95_hi), "n": int(r.n), "marked": bool(r.marked)}
        for r in f.itertuples()
    ]  # fmt: skip
    one = int(f["n"].max()) < 2
    png = plots.forest(rows, f"improvement over {baseline} (%)", title, MARK)
    caption = (
        f"Improvement of each policy's elapsed time over {baseline}, (t_{baseline} / t_policy "
        "− 1) × 100 paired by repeat: dot = mean over the pairs, bar = 95 % t interval, "
        "n = pairs; the vertical line is no difference"
        + (f"; highlighted (diamond, band): the {MARK} contrast" if f["marked"].any() else "")
        + (
            ". One pair per point: no interval can be given (hollow dots)"
            if one
            else "; a hollow dot has one pair and no interval"
            if (f["n"] < 2).any()
            else ""
        )
        + f". Runs: {runs}."
    )
    table = Table(
        ["policy", "machine", f"improvement over {baseline}", "95 % CI", "pairs", "beyond CI"],
        [
            [
                str(r["policy"]) + (f" ({MARK})" if r["marked"] else ""),
                r["machine"],
                f"{r['mean']:+.2f} %",
                _interval(r),
                int(r["n"]),
                "yes" if r["differs"] else "no",
            ]
            for _, r in f.iterrows()
        ],
        "The forest plot's numbers (finding.improvement_by_factor)",
    )
    return Figure(png, caption, name), table
