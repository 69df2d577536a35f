"""Guest result files: ``guest/results.jsonl`` of workloads/mixrunner.py.

One JSON object per line: ``run``, ``program`` (one per program),
``thread_group`` records, ``run_end`` (schema: workloads/README.md). A line that
is not JSON (a guest killed mid-write) ends the parse with an error; what came
before it is kept. A file without ``run_end`` is incomplete: its records are
kept, and the caller records an error for the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class GuestResults:
    run: dict[str, Any] | None = None
    programs: list[dict[str, Any]] = field(default_factory=list)
    thread_groups: list[dict[str, Any]] = field(default_factory=list)
    run_end: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.run_end is not None


def parse_results_text(text: str, where: str = "results.jsonl") -> GuestResults:
    g = GuestResults()
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            g.errors.append(
                f"{where} line {n}: not JSON (truncated or corrupt); {n - 1} line(s) before it kept"
            )
            break
        if not isinstance(rec, dict):
            g.errors.append(f"{where} line {n}: not a JSON object")
            continue
        t = rec.get("type")
        if t == "run":
            g.run = rec
        elif t == "program":
            g.programs.append(rec)
        elif t == "thread_group":
            g.thread_groups.append(rec)
        elif t == "run_end":
            g.run_end = rec
    if g.run is None and not g.errors:
        g.errors.append(f"{where}: no 'run' record")
    if g.run_end is None and not g.errors:
        g.errors.append(f"{where}: no 'run_end' record (guest stopped before the end)")
    return g


def parse_results_file(path: Path) -> GuestResults:
    with open(path, errors="replace") as f:
        return parse_results_text(f.read(), where=str(path.name))
