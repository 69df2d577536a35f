"""What a sweep cost on its host: per run (wall, gem5 process, ROI, outside the ROI),
the boot checkpoints it shared, the ROI simulation speed, and the sweep's total.

Inputs are the runs frame (``duration_s``: the worker's wall time, which
includes a checkpoint boot the run had to do or wait for; ``gem5_host_s``:
the restored gem5 process, ``gem5_cpu_s`` its CPU time where recorded;
``checkpoint_key``/``checkpoint_host_s``/``checkpoint_cpu_s``: the boot it
restored) and the metrics rows ``roi_host_s`` and ``sim_speed_ips``.

Runs that recorded their phases (``m5out/phases.json``, the frame's
``phase_*``, ``nonroi_host_s`` and ``roi_host_s_per_sim_ms``: run_phases.py)
get one row per phase, the outside-ROI time measured (every phase but the
ROI) and the ROI's host seconds per simulated millisecond. Runs without it
keep the estimate: the gem5 process minus the ROI dump's hostSeconds
(``phases_note`` says which runs are which).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

# the phases, as the table names them (configs/numa_lb/phases.py PHASES)
PHASE_LABELS = {
    "restore": "phase restore (process start, checkpoint load)",
    "startup": "phase startup (job start, up to the warm-up)",
    "warmup": "phase warm-up",
    "roi": "phase ROI",
    "handback": "phase hand back (ROI dump, results, to the guest's exit)",
    "exit": "phase exit (stats and files, to the process end)",
}
NONROI_LABEL = "outside the ROI, measured (every phase but the ROI)"


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
    phased = _with_phases(done)
    roi = mx[mx["metric"] == "roi_host_s"] if not mx.empty else mx
    if not roi.empty:
        out.append(_row("ROI", roi["value"]))
        if "gem5_host_s" in done:
            by_run = roi.groupby("run_id", observed=True)["value"].sum()
            g = done[~done["run_id"].isin(phased["run_id"])].set_index("run_id")["gem5_host_s"]
            both = pd.concat([g, by_run], axis=1, join="inner").dropna()
            if not both.empty:
                what = "outside the ROI (restore, job, warm-up, hand back)"
                if not phased.empty:
                    what += ", estimated for runs without phases.json"
                out.append(_row(what, both.iloc[:, 0] - both.iloc[:, 1]))
    for name, label in PHASE_LABELS.items():
        col = f"phase_{name}_host_s"
        if col in phased:
            out.append(_row(label, phased[col]))
    if not phased.empty:
        out.append(_row(NONROI_LABEL, phased["nonroi_host_s"]))
        if "nonroi_cpu_s" in phased:
            out.append(_row(NONROI_LABEL.replace("measured", "CPU time"), phased["nonroi_cpu_s"]))
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


def _with_phases(done: pd.DataFrame) -> pd.DataFrame:
    """The done runs whose outside-ROI time was measured in phases."""
    if "nonroi_host_s" not in done:
        return done.iloc[0:0]
    return done[pd.to_numeric(done["nonroi_host_s"], errors="coerce").notna()]


def roi_rate(runs: pd.DataFrame) -> CostRow | None:
    """ROI host seconds per simulated millisecond (phases.json), over the done runs."""
    if runs.empty or "roi_host_s_per_sim_ms" not in runs or "state" not in runs:
        return None
    done = runs[runs["state"] == "done"]
    return _row("ROI host seconds per simulated ms (phases)", done["roi_host_s_per_sim_ms"])


def phases_note(runs: pd.DataFrame) -> str | None:
    """Which done runs' costs are measured in phases, and which are today's estimate."""
    if runs.empty or "state" not in runs:
        return None
    done = runs[runs["state"] == "done"]
    if done.empty:
        return None
    n = len(_with_phases(done))
    if n == len(done):
        return (f"All {n} done runs recorded their phases (m5out/phases.json): the phase "
                "rows and the outside-ROI time are measured.")  # fmt: skip
    old = ("the outside-ROI time is estimated as the gem5 process minus the ROI dump's "
           "hostSeconds; no per-phase split, no ROI seconds per simulated ms")  # fmt: skip
    if n == 0:
        return f"No run recorded its phases (m5out/phases.json, runs before issue 38): {old}."
    return (
        f"{n} of {len(done)} done runs recorded their phases; for the other {len(done) - n} {old}."
    )


def sweep_host_hours(runs: pd.DataFrame) -> float | None:
    """Sum of every finished run's wall time (done or not), in hours."""
    if runs.empty or "duration_s" not in runs:
        return None
    v = pd.to_numeric(runs["duration_s"], errors="coerce").dropna()
    return float(v.sum()) / 3600 if not v.empty else None
