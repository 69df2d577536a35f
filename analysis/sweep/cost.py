"""Run history and the cost preview printed before a Slurm submission.

History: every run that ends (done, failed, timeout, interrupted) leaves one
small JSON file in ``<history>/<shape key>/<run>-<attempt>-<dir hash>.json``, where
``<history>`` is ``NUMA_LB_HISTORY`` or ``<artifact cache>/history`` (the
cache is on a path every node sees, so all nodes add to one history; one file
per run attempt, written atomically, needs no lock). The worker writes it; it
holds the run's host seconds (``duration_s``, the worker's wall time on its
node), its CPUs, node, machine shape, mix and threads.

A *machine shape* is what sets the cost of simulating a run: backend and its
version (gem5 24.0.0.1 / QEMU x.y), sockets x cores per socket, the machine
settings (memory, clock, links, ...) and the CPU models (boot/ROI). The
preview estimates each run by the median host time of earlier *done* runs of
the same shape with the same mix and threads, else of the same shape, else
calls it unknown. Host-hours = the sum of those estimates; core-hours =
host-hours x CPUs per run; wall time of an array = its host time / its
parallelism (the slots of the partition that fit one run, capped by
``resources.max_parallel``), never less than its longest run.

Runs of the test payload (``NUMA_LB_TEST_RUNNER``) are kept out of the user's
history unless ``NUMA_LB_HISTORY`` names one explicitly.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .point import ID_LEN_DIR, canonical_json
from .provenance import cache_root
from .rundir import write_json_atomic

HISTORY_ENV = "NUMA_LB_HISTORY"


def history_dir() -> Path:
    return Path(os.environ.get(HISTORY_ENV) or cache_root() / "history")


def shape_of(point: dict[str, Any], tool_version: str) -> dict[str, Any]:
    return {
        "backend": point.get("backend"),
        "tool": tool_version,
        "sockets": point.get("sockets"),
        "cores_per_socket": point.get("cores_per_socket"),
        "machine": point.get("machine") or {},
        "cpu": point.get("cpu") or {},
    }


def shape_key(shape: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(shape).encode()).hexdigest()[:16]


def shape_label(shape: dict[str, Any]) -> str:
    cpu = shape.get("cpu") or {}
    models = f", {cpu.get('boot')}->{cpu.get('roi')}" if cpu else ""
    return (
        f"{shape.get('sockets')}x{shape.get('cores_per_socket')} {shape.get('backend')} "
        f"({shape.get('tool')}{models})"
    )


def record_run(
    rec: dict[str, Any], status: dict[str, Any], run_dir: Path | None = None
) -> Path | None:
    """Add a finished run attempt to the history; None when not recorded.

    One file per (run, attempt, run directory): the same run id in two
    output directories is two executions."""
    if os.environ.get("NUMA_LB_TEST_RUNNER") and not os.environ.get(HISTORY_ENV):
        return None
    dur = status.get("duration_s")
    if not isinstance(dur, int | float) or dur < 0:
        return None
    point = rec.get("point") or {}
    shape = shape_of(point, (rec.get("provenance") or {}).get("tool_version", "?"))
    entry = {
        "run_id": rec.get("run_id"),
        "sweep": rec.get("sweep"),
        "label": rec.get("label"),
        "shape": shape,
        "mix": point.get("mix"),
        "threads": point.get("threads"),
        "policy": point.get("policy"),
        "state": status.get("state"),
        "duration_s": dur,
        "cpus": (rec.get("resources") or {}).get("cpus"),
        "host": status.get("host"),
        "node": (status.get("slurm") or {}).get("node"),
        "attempt": status.get("attempt"),
        "finished_at": status.get("finished_at"),
    }
    d = history_dir() / shape_key(shape)
    d.mkdir(parents=True, exist_ok=True)
    where = hashlib.sha256(str(run_dir or "").encode()).hexdigest()[:8]
    rid = str(rec.get("run_id", "x"))[:ID_LEN_DIR]
    path = d / f"{rid}-{status.get('attempt', 0)}-{where}.json"
    write_json_atomic(path, entry)
    return path


def load_history(keys: Iterable[str], base: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """shape key -> its done runs' records (unreadable files are skipped)."""
    base = base or history_dir()
    out: dict[str, list[dict[str, Any]]] = {}
    for key in set(keys):
        recs = []
        try:
            files = list((base / key).glob("*.json"))
        except OSError:
            files = []
        for f in files:
            try:
                r = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if (
                isinstance(r, dict)
                and r.get("state") == "done"
                and isinstance(r.get("duration_s"), int | float)
            ):
                recs.append(r)
        out[key] = recs
    return out


# ------------------------------------------------------------------ preview
@dataclass
class Item:
    """One run to be submitted, as the preview needs it."""

    group: int  # index of its array group
    shape: dict[str, Any]
    mix: str
    threads: int
    cpus: int


@dataclass
class Group:
    label: str  # e.g. "1 cpu, 16384 MiB, 7-00:05:00"
    cpus: int
    mem_bytes: int
    parallelism: int | None
    parallelism_note: str
    items: list[Item] = field(default_factory=list)


def _fmt_h(seconds: float) -> str:
    h = seconds / 3600
    return f"{h:.2f}" if h < 10 else f"{h:.1f}"


def _fmt_wall(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def preview(groups: list[Group], history: dict[str, list[dict[str, Any]]], base: Path) -> str:
    """The preview text: per group and per shape, then the total."""
    n_hist = sum(len(v) for v in history.values())
    lines = [
        f"cost preview: {n_hist} earlier done run(s) of these machine shapes in {base} "
        "(host-hours = run wall time on its node; core-hours = x CPUs per run)"
    ]
    tot_s = tot_core = 0.0
    tot_unknown = tot_n = 0
    walls: list[float | None] = []
    for gi, g in enumerate(groups, 1):
        by_shape: dict[str, list[Item]] = defaultdict(list)
        for it in g.items:
            by_shape[shape_key(it.shape)].append(it)
        g_s = 0.0
        g_unknown = 0
        longest = 0.0
        sub = []
        for key, items in sorted(by_shape.items()):
            hist = history.get(key, [])
            fine: dict[tuple[Any, Any], list[float]] = defaultdict(list)
            for r in hist:
                fine[(r.get("mix"), r.get("threads"))].append(float(r["duration_s"]))
            coarse = [float(r["duration_s"]) for r in hist]
            s = 0.0
            unknown = 0
            for it in items:
                same = fine.get((it.mix, it.threads))
                est = (
                    statistics.median(same)
                    if same
                    else (statistics.median(coarse) if coarse else None)
                )
                if est is None:
                    unknown += 1
                    continue
                s += est
                longest = max(longest, est)
            label = shape_label(items[0].shape)
            if unknown == len(items):
                sub.append(f"    {label}: {len(items)} run(s), unknown (no earlier done run "
                           "of this shape)")  # fmt: skip
            else:
                per = s / (len(items) - unknown)
                sub.append(
                    f"    {label}: {len(items)} run(s), {_fmt_h(s)} host-hours"
                    + (f" + {unknown} unknown" if unknown else "")
                    + f" (mean {_fmt_wall(per)}/run; {len(hist)} earlier run(s))"
                )
            g_s += s
            g_unknown += unknown
        n = len(g.items)
        tot_n += n
        tot_s += g_s
        tot_core += g_s * g.cpus
        tot_unknown += g_unknown
        if g_unknown == n:
            hours = "unknown"
        else:
            hours = f"{_fmt_h(g_s)} host-hours ({_fmt_h(g_s * g.cpus)} core-hours)"
            if g_unknown:
                hours += f" + {g_unknown} run(s) unknown"
        wall: float | None = None
        if g.parallelism and not g_unknown:
            wall = max(g_s / g.parallelism, longest)
            wall_txt = f"wall ~ {_fmt_wall(wall)} at parallelism {g.parallelism}"
        elif g.parallelism:
            wall_txt = f"wall unknown (parallelism {g.parallelism})"
        else:
            wall_txt = "wall unknown"
        walls.append(wall)
        if g.parallelism_note:
            wall_txt += f" ({g.parallelism_note})"
        lines.append(f"  group {gi} [{g.label}]: {n} run(s), {hours}; {wall_txt}")
        lines += sub
    if tot_unknown == tot_n:
        total = "unknown"
    else:
        total = f"{_fmt_h(tot_s)} host-hours ({_fmt_h(tot_core)} core-hours)"
        if tot_unknown:
            total += f" + {tot_unknown} run(s) unknown"
    if walls and all(w is not None for w in walls):
        wall_total = f"wall ~ {_fmt_wall(sum(w or 0.0 for w in walls))}"
        if len(walls) > 1:
            wall_total += " (groups one after another; less when they fit side by side)"
    else:
        wall_total = "wall unknown"
    lines.append(f"  total: {tot_n} run(s), {total}; {wall_total}")
    return "\n".join(lines)


def slots(
    nodes: list[dict[str, Any]], cpus: int, mem_bytes: int, max_parallel: int | None
) -> tuple[int | None, str]:
    """Runs of one shape that fit side by side on the usable nodes, capped by max_parallel."""
    if not nodes:
        if max_parallel:
            return max_parallel, f"max_parallel {max_parallel}; the cluster was not asked"
        return None, "cluster nodes unknown"
    fit = 0
    for n in nodes:
        by_cpu = n["cpus"] // max(1, cpus)
        by_mem = (n["mem_mib"] << 20) // max(1, mem_bytes)
        fit += min(by_cpu, by_mem)
    note = f"{fit} slot(s) on {len(nodes)} usable node(s)"
    if max_parallel and max_parallel < fit:
        return max_parallel, f"max_parallel {max_parallel}; {note}"
    if fit == 0:
        return None, f"no usable node fits {cpus} cpu + {mem_bytes >> 20} MiB"
    return fit, note
