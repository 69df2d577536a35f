"""gem5 ``stats.txt`` and ``config.json`` parsers.

stats.txt holds one or more dumps, each between ``Begin Simulation Statistics``
and ``End Simulation Statistics`` markers. Inside a dump every line is

    name   value [pct cum%]   # description (unit)

Scalars and formulas give one value; vectors and distributions spell their
elements as ``name::sub`` (``::0``, ``::total``, ``::samples``, ``::mean``,
``::0-3`` buckets, ``::underflows`` ...); Ruby histograms put all buckets on one
line between ``|`` separators (``name | 10 50.00% 50.00% | 10 50.00% 100.00%``),
which become ``name::b0``, ``name::b1`` ... Values may be ``nan``, ``inf`` or
``-nan``; they become float NaN/inf. A dump without its end marker (the file
was cut short, gem5 crashed mid-dump) is returned as ``complete=False`` and
the caller records an error for the run instead of using its numbers.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
if _CONFIGS not in sys.path:
    sys.path.insert(0, _CONFIGS)

from numa_lb.roi import RoiUnknown, roi_stats_dump_index  # noqa: E402 - the ROI record's reader
from numa_lb.ruby_requests import (  # noqa: E402, F401 - shared with the counter bridge, re-exported
    REQUEST_TYPE,
    WRITEBACK_TYPE,
    find_objects,
    in_flight,
    remote_requests,
)

BEGIN = "---------- Begin Simulation Statistics ----------"
END = "---------- End Simulation Statistics   ----------"


class StatsError(ValueError):
    pass


@dataclass
class Dump:
    index: int
    values: dict[str, float] = field(default_factory=dict)
    complete: bool = False
    first_line: int = 0


def _num(tok: str) -> float | None:
    t = tok.rstrip("%")
    try:
        return float(t)
    except ValueError:
        if t.lower() in ("nan", "-nan", "+nan"):
            return math.nan
        return None


def parse_stats_text(text: str) -> list[Dump]:
    dumps: list[Dump] = []
    cur: Dump | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("----------"):
            if "Begin Simulation Statistics" in line:
                if cur is not None:  # begin without end: the previous one is cut
                    dumps.append(cur)
                cur = Dump(index=len(dumps), first_line=lineno)
            elif "End Simulation Statistics" in line and cur is not None:
                cur.complete = True
                dumps.append(cur)
                cur = None
            continue
        if cur is None:
            continue
        body = line.split("#", 1)[0]
        if "|" in body:  # Ruby histogram on one line
            name, _, rest = body.partition("|")
            name = name.strip()
            for i, cell in enumerate(c for c in rest.split("|") if c.strip()):
                toks = cell.split()
                v = _num(toks[0]) if toks else None
                if v is not None:
                    cur.values[f"{name}::b{i}"] = v
            continue
        toks = body.split()
        if len(toks) < 2:
            continue
        v = _num(toks[1])
        if v is not None:
            cur.values[toks[0]] = v
    if cur is not None:
        dumps.append(cur)
    return dumps


def parse_stats_file(path: Path) -> list[Dump]:
    with open(path, errors="replace") as f:
        return parse_stats_text(f.read())


def roi_dump(dumps: list[Dump], index: int | None = None) -> Dump:
    """The dump the metrics use: the ROI's.

    configs/numa_run.py resets the statistics at the guest's ROI workbegin, dumps
    them at its workend and records that dump's position in m5out/roi.json
    (``roi.stats_dump_index``; pass it as ``index``, from ``roi_dump_index``).
    ``index=None`` takes the last complete dump: only for ad-hoc looks, since
    gem5 dumps once more when it exits and that dump also covers the boot CPUs'
    instructions and the hand back after the ROI.
    """
    if not dumps:
        raise StatsError("no statistics dump in stats.txt")
    if index is not None:
        if index >= len(dumps):
            raise StatsError(
                f"stats.txt is truncated: it has {len(dumps)} dumps, the ROI is dump {index}"
            )
        if not dumps[index].complete:
            raise StatsError(f"stats.txt is truncated: ROI dump {index} has no end marker")
        return dumps[index]
    complete = [d for d in dumps if d.complete]
    if not complete:
        raise StatsError(f"stats.txt is truncated: dump {dumps[-1].index} has no end marker")
    return complete[-1]


def roi_dump_index(m5out: Path) -> int:
    """``roi.stats_dump_index`` from the run script's m5out/roi.json.

    Raises ``StatsError("ROI unknown: ...")`` when the file is missing, corrupt,
    or records no closed ROI: the metrics are then not computed at all, rather
    than silently taken from gem5's exit dump.
    """
    try:
        return roi_stats_dump_index(m5out)
    except RoiUnknown as e:
        raise StatsError(str(e)) from None


def nonfinite(values: dict[str, float], suffixes: tuple[str, ...]) -> list[str]:
    """Names of the statistics ending in one of ``suffixes`` whose value is nan/inf."""
    return sorted(k for k, v in values.items() if not math.isfinite(v) and k.endswith(suffixes))


# ----------------------------------------------------------------- config.json
# find_objects and the request split (remote_requests) are configs/numa_lb/
# ruby_requests.py's, imported above: the counter bridge uses them inside gem5.
def load_config(path: Path) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)


# --------------------------------------------------------------- derivations
_CPU_IDX = re.compile(r"(\d+)(?=\.core\.)")
_CACHE_IDX = re.compile(r"(?:core_caches|l1_cntrl|L1Cache_Controller)(\d+)\.")


def _per_index(values: dict[str, float], suffix: str, rx: re.Pattern[str]) -> dict[int, float]:
    """Per-index sums; an index with a nan/inf input is nan (its metrics stay empty)."""
    out: dict[int, float] = {}
    for k, v in values.items():
        if k.endswith(suffix):
            m = rx.search(k)
            if m:
                i = int(m.group(1))
                # switchable CPUs: the inactive one counts 0; nan propagates
                out[i] = out.get(i, 0.0) + (v if math.isfinite(v) else math.nan)
    return out


INSTS_STAT = ".commitStats0.numInsts"
CYCLES_STAT = ".core.numCycles"
# gem5's busy-cycle count: numCycles x the tick-weighted not-idle fraction of the
# thread (BaseSimpleCPU). numCycles alone counts halted time too, and
# TimingSimpleCPU folds a halt into numCycles only at its next activity.
BUSY_CYCLES_STAT = ".exec_context.thread_0.numBusyCycles"
# The O3 CPU has no exec_context stats. It stops ticking when its pipeline has
# nothing to do, a cache miss included, and adds the slept cycles to numCycles
# (and idleCycles) when it wakes (o3/cpu.cc tick, wakeCPU); a halt (suspend)
# goes to quiesceCycles only (activateContext). So its numCycles are the
# non-halted cycles, stalls included: the simple CPUs' busy cycles. Its cycles,
# halted ones included, are numCycles + quiesceCycles.
O3_HALTED_STAT = ".core.quiesceCycles"
LLC_MISS_STAT = ".L2cache.m_demand_misses"
CORE_STATS = (INSTS_STAT, ".numInsts", CYCLES_STAT, BUSY_CYCLES_STAT, O3_HALTED_STAT,
              LLC_MISS_STAT)  # fmt: skip


def core_counters(values: dict[str, float]) -> dict[str, dict[int, float]]:
    """Per-CPU committed instructions, all and busy cycles, LLC (= private L2) demand misses."""
    insts = _per_index(values, INSTS_STAT, _CPU_IDX)
    if not insts:
        insts = _per_index(values, ".numInsts", _CPU_IDX)
    cycles = _per_index(values, CYCLES_STAT, _CPU_IDX)
    busy = _per_index(values, BUSY_CYCLES_STAT, _CPU_IDX)
    for i, (b, halted) in o3_cycles(values).items():
        busy[i] = busy.get(i, 0.0) + b
        cycles[i] = cycles.get(i, 0.0) + halted
    l2_miss = _per_index(values, LLC_MISS_STAT, _CACHE_IDX)
    return {"insts": insts, "cycles": cycles, "busy_cycles": busy, "l2_demand_misses": l2_miss}


def o3_cycles(values: dict[str, float]) -> dict[int, tuple[float, float]]:
    """Per CPU index, (busy, halted) cycles of the cores that have no
    exec_context stats (O3): numCycles and quiesceCycles (see O3_HALTED_STAT;
    gem5 prints quiesceCycles only when it is non-zero), summed per index like
    the other counters. Checked on O3 only; the study's other ROI CPUs
    (atomic, timing) have exec_context stats."""
    out: dict[int, tuple[float, float]] = {}
    for k, cyc in values.items():
        if not k.endswith(CYCLES_STAT):
            continue
        core = k[: -len(".numCycles")]
        m = _CPU_IDX.search(k)
        if m is None or core + BUSY_CYCLES_STAT in values:
            continue  # a simple CPU: numBusyCycles counts it
        halted = values.get(core + ".quiesceCycles", 0.0)
        b0, h0 = out.get(int(m.group(1)), (0.0, 0.0))
        out[int(m.group(1))] = (b0 + cyc, h0 + halted)
    return out
