"""Host and CPU seconds of every phase of one gem5 run (``phases.json``, issue 38).

A run passes through these phases, each opened by a mark that numa_run.py
(or the ROI protocol, numa_lb/roi.py) sets when it gets there:

=========  ==========================================================  ===========
phase      from                                                        set by
=========  ==========================================================  ===========
restore    the gem5 process's start (exec, Python, configuration,      process age
           instantiation incl. the checkpoint load)
startup    the simulation's start: the guest reads its job on the      numa_run.py
           boot CPU (and the first ``simulate()``'s startup/reset)
warmup     the mix runner's warm-up mark (work id 4), after the CPU    roi.py
           switch; absent when the job has no warm-up
roi        the ROI's workbegin, after the statistics reset             roi.py
handback   the ROI's workend, before the ROI dump (so the dump, the    roi.py
           post-ROI CPU switch and the result files count here)
exit       ``Simulator.run()`` returned (the guest's m5 exit, the      numa_run.py
           tick limit, a panic): result collection, the exit stats
           dump (gem5's atexit), until the last Python exit handler
=========  ==========================================================  ===========

The ``end`` mark closes the last phase; it is set by an ``atexit`` handler
registered before the first ``simulate()``, so it runs after gem5's own exit
handlers (stats dump, output cleanup): what remains unmeasured is the
interpreter's and gem5's teardown after it. Phase boundaries thus sit where
gem5's statistics are reset and dumped: the ``roi`` phase's host seconds are
the ROI dump's ``hostSeconds`` plus the counter bridge's handler time.

Clocks: ``time.monotonic()`` for host (wall) seconds and
``time.process_time()`` for CPU seconds (user + system of the gem5 process,
all its threads; gem5 simulates on one thread here, so this is that thread's
time plus the little the others use). The process's start is read from
``/proc/self/stat`` (its start time, in clock ticks since boot, against
``/proc/uptime``): ``process_start`` says ``"proc"``; elsewhere it is the
time the clock was made (``"script"``) and the restore phase misses gem5's
start-up before the configuration script. CPU seconds count from the
process's start either way.

The file is rewritten atomically at every mark (a temporary file renamed over
it), so a killed run keeps the marks it reached; its last phase then has no
end and no duration. A phase reached twice (not expected) is summed.

Pure module: no gem5 imports (the analysis reads the file with ``read_phases``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PHASES_NAME = "phases.json"
SCHEMA = 1
PHASES = ("restore", "startup", "warmup", "roi", "handback", "exit")
END = "end"
TICKS_PER_MS = 1e9  # gem5 ticks are picoseconds


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc), or None where unknown."""
    try:
        stat = Path("/proc/self/stat").read_text()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        # field 22 (starttime); the command name (field 2) may hold spaces
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        age = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return age if 0 <= age < 1e7 else None


class PhaseClock:
    """Writes ``phases.json`` in ``outdir``: ``mark(name)`` opens phase ``name``.

    ``tick`` reads the simulated tick (None before the simulation exists);
    ``host`` and ``cpu`` are the clocks (passed in for tests).
    """

    def __init__(
        self,
        outdir: Path,
        tick: Callable[[], int | None] = lambda: None,
        host: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.process_time,
        process_age: Callable[[], float | None] = process_age_s,
    ) -> None:
        self._path = Path(outdir) / PHASES_NAME
        self._tick = tick
        self._host = host
        self._cpu = cpu
        now = host()
        age = process_age()
        self._t0 = now - age if age is not None else now
        self.record: dict[str, Any] = {
            "schema": SCHEMA,
            "clocks": {"host": "time.monotonic", "cpu": "time.process_time (user + system)"},
            "process_start": "proc" if age is not None else "script",
            "marks": [],
        }
        # the restore phase opens at the process's start: CPU time 0 there
        self._append("restore", None, 0.0 if age is not None else self._cpu(), self._t0)
        self._write()

    def mark(self, name: str) -> None:
        """Phase ``name`` starts now (``END`` closes the last one)."""
        try:
            tick = self._tick()
        except Exception:  # noqa: BLE001 - timing must never stop a run
            tick = None
        self._append(name, tick, self._cpu(), self._host())
        self._write()

    def finish(self) -> None:
        """The ``end`` mark, once; never raises (it runs as an atexit handler)."""
        if self.record["marks"][-1]["mark"] == END:
            return
        try:
            self.mark(END)
        except Exception as e:  # noqa: BLE001 - the run's exit status must stay gem5's
            print(f"numa_run: phases: no end mark ({type(e).__name__}: {e})", flush=True)

    def _append(self, name: str, tick: int | None, cpu: float, host: float) -> None:
        self.record["marks"].append(
            {
                "mark": name,
                "tick": tick,
                "host_s": round(host - self._t0, 3),
                "cpu_s": round(cpu, 3),
            }  # fmt: skip
        )

    def _write(self) -> None:
        self.record["phases"] = phase_table(self.record)  # for a reader by eye
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record, indent=1) + "\n")
        tmp.replace(self._path)


class PhasesError(ValueError):
    """phases.json is unreadable or malformed."""


@dataclass(frozen=True)
class Phase:
    host_s: float
    cpu_s: float
    sim_ticks: int | None  # None where a bound's tick is unknown


@dataclass(frozen=True)
class Phases:
    closed: dict[str, Phase]  # every phase a later mark ended
    open: tuple[str, float, float] | None  # the last phase without an end: name, host_s, cpu_s


def phase_table(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{phase: {host_s, cpu_s, sim_ticks}} for every phase closed by a later mark."""
    return {k: vars(v) for k, v in phases_of(record).items()}


def open_phase(record: dict[str, Any]) -> tuple[str, float, float] | None:
    """(name, host_s, cpu_s at its start) of the phase still running when the file
    was last written (a killed run's, or the exit phase without its end mark)."""
    last = record["marks"][-1] if record.get("marks") else None
    if not isinstance(last, dict) or last.get("mark") == END:
        return None
    return str(last["mark"]), float(last["host_s"]), float(last["cpu_s"])


def phases_of(record: dict[str, Any]) -> dict[str, Phase]:
    """The closed phases of a phases.json record; PhasesError if it is malformed."""
    marks = record.get("marks") if isinstance(record, dict) else None
    if not isinstance(marks, list):
        raise PhasesError("no list of marks")
    for i, m in enumerate(marks):
        if not isinstance(m, dict) or not isinstance(m.get("mark"), str):
            raise PhasesError(f"mark {i}: not an object with a name")
        for k in ("host_s", "cpu_s"):
            v = m.get(k)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise PhasesError(f"mark {m['mark']!r}: {k} is not a number ({v!r})")
    out: dict[str, Phase] = {}
    for a, b in zip(marks, marks[1:], strict=False):
        host, cpu = b["host_s"] - a["host_s"], b["cpu_s"] - a["cpu_s"]
        if host < 0 or cpu < 0:
            raise PhasesError(f"mark {b['mark']!r} is earlier than {a['mark']!r}")
        ticks = None
        if _tick(a) is not None and _tick(b) is not None:
            ticks = _tick(b) - _tick(a)  # type: ignore[operator]
        name = a["mark"]
        if name == END:
            raise PhasesError("a mark after the end mark")
        if name in out:  # reached twice: summed
            p = out[name]
            both = None if ticks is None or p.sim_ticks is None else ticks + p.sim_ticks
            out[name] = Phase(p.host_s + host, p.cpu_s + cpu, both)
        else:
            out[name] = Phase(host, cpu, ticks)
    return out


def _tick(m: dict[str, Any]) -> int | None:
    t = m.get("tick")
    return t if isinstance(t, int) and not isinstance(t, bool) else None


def read_phases(outdir: Path) -> Phases | None:
    """The phases in ``outdir/phases.json``; None when the run has no such file
    (runs made before it existed); PhasesError when it is corrupt."""
    path = Path(outdir) / PHASES_NAME
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PhasesError(f"unreadable ({e})") from None
    try:
        record = json.loads(text)
    except ValueError as e:
        raise PhasesError(f"not JSON ({e})") from None
    closed = phases_of(record)  # validates every mark first
    return Phases(closed, open_phase(record))
