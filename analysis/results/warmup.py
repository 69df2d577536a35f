"""The warm-up effect (issue 14 item 2): the same point run with different
``job.warmup_s`` (simulated seconds on the timing CPU before the ROI), side by
side. The reports keep such runs apart (``warmup_s`` is a spec column), and this
table says how much the warm-up changes what the ROI measures."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .metrics import CONFIG_COLS

WARMUP_METRICS = ("elapsed_s", "ipc", "llc_mpki", "remote_ratio")


@dataclass(frozen=True)
class WarmupRow:
    point: dict[str, object]  # the configuration and policy the runs share
    warmup_s: float
    runs: int
    means: dict[str, float]  # metric -> mean over the runs (NaN: not measured)
    change_pct: dict[str, float]  # metric -> % against the longest warm-up


def warmup_effect(mx: pd.DataFrame) -> list[WarmupRow]:
    """Rows for every point (configuration + policy) run with >= 2 warm-ups."""
    if "warmup_s" not in mx.columns or mx.empty:
        return []
    mx = mx[mx["metric"].isin(WARMUP_METRICS)].copy()
    mx["warmup_s"] = pd.to_numeric(mx["warmup_s"], errors="coerce")
    mx = mx[mx["warmup_s"].notna()]
    keys = [c for c in [*CONFIG_COLS, "policy", "numa_balancing"] if c != "warmup_s"]
    keys = [c for c in keys if c in mx.columns]
    out: list[WarmupRow] = []
    for key, g in mx.groupby(keys, dropna=False, observed=True):
        ws = sorted(g["warmup_s"].unique())
        if len(ws) < 2:
            continue
        point = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        means = {
            w: {m: float(g[(g["warmup_s"] == w) & (g["metric"] == m)]["value"].mean())
                for m in WARMUP_METRICS}
            for w in ws
        }  # fmt: skip
        ref = means[ws[-1]]
        for w in ws:
            change = {
                m: (means[w][m] / ref[m] - 1) * 100
                if ref[m] and not math.isnan(ref[m]) and not math.isnan(means[w][m])
                else math.nan
                for m in WARMUP_METRICS
            }
            n = int(g[g["warmup_s"] == w]["run_id"].nunique())
            out.append(WarmupRow(point, float(w), n, means[w], change))
    return out
