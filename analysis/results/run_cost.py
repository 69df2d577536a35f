"""What a sweep cost on its host: per run (wall, gem5 process, ROI, outside the ROI),
the boot checkpoints it shared, the ROI simulation speed, and the sweep's total.

Inputs are the runs frame (``duration_s``: the worker's wall time, which
includes a checkpoint boot the run had to do or wait for; ``gem5_host_s``:
the restored gem5 process, ``gem5_cpu_s`` its CPU time where recorded;
``checkpoint_key``/``checkpoint_host_s``/``checkpoint_cpu_s``: the boot it
restored) and the metrics rows ``roi_host_s`` and ``sim_speed_ips``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class CostRow:
    what: str
    n: int
    median: float
    max: float
    total: float


def _row(what: str, s: pd.Series) -> CostRow | None:
    v = pd.to_numeric(s, errors="coerce").dropna()
    v = v[v.map(math.isfinite)]
    if v.empty:
        return None
    return CostRow(what, len(v), float(v.median()), float(v.max()), float(v.sum()))


def summary(runs: pd.DataFrame, mx: pd.DataFrame) -> list[CostRow]:
    """Host seconds per done run and per checkpoint boot; [] when nothing is known."""
    if runs.empty or "state" not in runs:
        return []
    done = runs[runs["state"] == "done"]
    wall = done.get("duration_s", pd.Series(dtype=float))
    out: list[CostRow | None] = [_row("run wall time (worker)", wall)]
    if "gem5_host_s" in done:
        out.append(_row("gem5 process (restore to exit)", done["gem5_host_s"]))
    if "gem5_cpu_s" in done:
        # CPU below wall: the run shared the host's cores or waited for I/O
        out.append(_row("gem5 process CPU time (user + system)", done["gem5_cpu_s"]))
    roi = mx[mx["metric"] == "roi_host_s"] if not mx.empty else mx
    if not roi.empty:
        out.append(_row("ROI", roi["value"]))
        if "gem5_host_s" in done:
            by_run = roi.groupby("run_id", observed=True)["value"].sum()
            g = done.set_index("run_id")["gem5_host_s"]
            both = pd.concat([g, by_run], axis=1, join="inner").dropna()
            if not both.empty:
                out.append(
                    _row(
                        "outside the ROI (restore, job, warm-up, hand back)",
                        both.iloc[:, 0] - both.iloc[:, 1],
                    )  # fmt: skip
                )
    if "checkpoint_key" in done and "checkpoint_host_s" in done:
        ck = done.dropna(subset=["checkpoint_key"]).drop_duplicates("checkpoint_key")
        out.append(_row("boot checkpoint (shared, once per key)", ck["checkpoint_host_s"]))
        if "checkpoint_cpu_s" in ck:
            out.append(_row("boot checkpoint CPU time", ck["checkpoint_cpu_s"]))
    return [r for r in out if r is not None]


def sim_speed(mx: pd.DataFrame) -> CostRow | None:
    """ROI committed instructions per host second, over the runs that have it."""
    if mx.empty:
        return None
    return _row("ROI instructions per host second", mx[mx["metric"] == "sim_speed_ips"]["value"])


def sweep_host_hours(runs: pd.DataFrame) -> float | None:
    """Sum of every finished run's wall time (done or not), in hours."""
    if runs.empty or "duration_s" not in runs:
        return None
    v = pd.to_numeric(runs["duration_s"], errors="coerce").dropna()
    return float(v.sum()) / 3600 if not v.empty else None
