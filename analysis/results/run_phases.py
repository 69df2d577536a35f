"""A gem5 run's phases (``m5out/phases.json``, configs/numa_lb/phases.py) as run columns.

Per phase (restore, startup, warmup, roi, handback, exit) ``phase_<name>_host_s``
and ``phase_<name>_cpu_s``; and

* ``roi_host_s_per_sim_ms``: the ROI phase's host seconds per simulated
  millisecond (the ROI phase's own ticks);
* ``nonroi_host_s`` / ``nonroi_cpu_s``: every phase but the ROI, summed (a
  phase the run did not pass through, such as a warm-up of 0 s, counts 0).

Runs made before phases.json existed (and qemu runs) get empty columns (NaN in
the frame) and stay valid. A run whose exit phase has no end mark (gem5 ended
without running its Python exit handlers) gets the exit phase from the worker's
outside measure: the gem5 process's seconds (``logs/host_times.json``) minus
the exit phase's start. A run killed in an earlier phase has no ``nonroi``
figures (they would understate it); its closed phases stay.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

_CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
if _CONFIGS not in sys.path:
    sys.path.insert(0, _CONFIGS)

from numa_lb.phases import PHASES, PHASES_NAME, TICKS_PER_MS, PhasesError, read_phases  # noqa: E402

PHASE_COLS = [f"phase_{p}_{k}" for p in PHASES for k in ("host_s", "cpu_s")] + [
    "roi_host_s_per_sim_ms",
    "nonroi_host_s",
    "nonroi_cpu_s",
]


def phase_columns(
    m5out: Path, gem5_host_s: Any, gem5_cpu_s: Any, errors: list[tuple[str, str]]
) -> dict[str, float | None]:
    """The PHASE_COLS of one run (None where unknown); a corrupt file is an error row."""
    out: dict[str, float | None] = dict.fromkeys(PHASE_COLS)
    try:
        ph = read_phases(m5out)
    except PhasesError as e:
        errors.append((f"m5out/{PHASES_NAME}", str(e)))
        return out
    if ph is None:
        return out
    host = {k: p.host_s for k, p in ph.closed.items()}
    cpu = {k: p.cpu_s for k, p in ph.closed.items()}
    if ph.open is not None and ph.open[0] == "exit":  # the worker's outside measure
        _, h0, c0 = ph.open
        if _finite(gem5_host_s) and gem5_host_s >= h0:
            host["exit"] = float(gem5_host_s) - h0
        if _finite(gem5_cpu_s) and gem5_cpu_s >= c0:
            cpu["exit"] = float(gem5_cpu_s) - c0
    for name in PHASES:
        out[f"phase_{name}_host_s"] = host.get(name)
        out[f"phase_{name}_cpu_s"] = cpu.get(name)
    roi = ph.closed.get("roi")
    if roi is not None and roi.sim_ticks and roi.sim_ticks > 0:
        out["roi_host_s_per_sim_ms"] = roi.host_s / (roi.sim_ticks / TICKS_PER_MS)
    # complete: every phase up to the end closed (the exit phase possibly from outside)
    if "roi" in host and "exit" in host and (ph.open is None or ph.open[0] == "exit"):
        out["nonroi_host_s"] = sum(v for k, v in host.items() if k != "roi")
        if "exit" in cpu:
            out["nonroi_cpu_s"] = sum(v for k, v in cpu.items() if k != "roi")
    return out


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
