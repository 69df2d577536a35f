"""The reference configuration and the baseline: which rows a report's views show.

The reference configuration is the (backend, sockets, cores per socket, NUMA
factor, mix) group closest to the paper (gem5, 4 x 8, f = 1.6), else the one
with most runs (``reference_group``); ``select`` takes a group's rows and
``ref_threads`` the thread count of the per-policy views (16 as in the paper,
else the nearest below). Improvements are over each row's own baseline (stock
where the runs have it, else default): ``not_baseline``, ``baseline_name``,
``improvement_summary``. Labels and captions: ``cfg_label``, ``shape_label``,
``runs_note``. Shared by the report's sections (``sections.py``) and figures
(``figures.py``).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..sweep.spec import DEFAULT_WARMUP_S
from .metrics import CONFIG_COLS, summarize

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
