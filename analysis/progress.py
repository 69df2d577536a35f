"""Progress of long steps: what is being made, how long it usually takes, and a
line at least every INTERVAL_S seconds while it runs.

Used by kernel-patches/kbuild.py (make, condensed: the full output goes to a
log file), by run_all.py's prerequisites (analysis/sweep/provenance.py: the
kernel, image and PARSEC builds it starts), by the Slurm stage step's boot
checkpoints (analysis/sweep/staging.py) and by the local executor while runs
are quiet. Lines are plain (no carriage returns), so a log file or a pipe
shows them as they come. Stdlib only: kbuild.py runs before the project's
packages are installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TextIO

ENV_INTERVAL = "NUMA_LB_PROGRESS_S"


def interval_s() -> float:
    """Seconds between progress lines: $NUMA_LB_PROGRESS_S, default 60."""
    try:
        v = float(os.environ.get(ENV_INTERVAL, "60"))
    except ValueError:
        return 60.0
    return v if v > 0 else 60.0


def fmt_elapsed(s: float) -> str:
    s = int(s)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Heartbeat:
    """While the `with` block runs, write "<label>: still <doing>, <elapsed>
    elapsed[; <status()>][ (<typical>)]" every @interval seconds to @out.

    @status, if given, is called from the heartbeat thread and returns a
    short description of where the work is (e.g. make's last target).
    """

    def __init__(
        self,
        label: str,
        doing: str,
        typical: str = "",
        out: TextIO | None = None,
        interval: float | None = None,
        status: Callable[[], str] | None = None,
    ) -> None:
        self.label = label
        self.doing = doing
        self.typical = typical
        self.out = out if out is not None else sys.stderr
        self.interval = interval if interval is not None else interval_s()
        self.status = status
        self.started = time.monotonic()
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def line(self) -> str:
        text = f"{self.label}: still {self.doing}, {fmt_elapsed(self.elapsed())} elapsed"
        where = self.status() if self.status else ""
        if where:
            text += f"; {where}"
        if self.typical:
            text += f" ({self.typical})"
        return text

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.out.write(self.line() + "\n")
                self.out.flush()
            except (OSError, ValueError):  # the stream went away: stop quietly
                return
            self.beats += 1

    def __enter__(self) -> Heartbeat:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(
        self,
        et: type[BaseException] | None,
        ev: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()


# make's kbuild lines: "  CC      kernel/sched/fair.o", "  LD [M]  ...", "  AR ..."
MAKE_STEP = re.compile(r"^\s{2}([A-Z][A-Z0-9_]*(?: \[M\])?)\s+(\S.*)$")


class CondensedOutput:
    """Counts a command's output lines that are steps (MAKE_STEP by default)
    and remembers the last one and a tail, for a Heartbeat's status."""

    def __init__(self, step: re.Pattern[str] = MAKE_STEP, tail: int = 60) -> None:
        self.step = step
        self.steps = 0
        self.last = ""
        self.lines: list[str] = []
        self.keep = tail
        self._lock = threading.Lock()

    def feed(self, line: str) -> None:
        line = line.rstrip("\n")
        with self._lock:
            self.lines.append(line)
            if len(self.lines) > 2 * self.keep:
                del self.lines[: -self.keep]
            m = self.step.match(line)
            if m:
                self.steps += 1
                self.last = f"{m.group(1)} {m.group(2).strip()}"

    def status(self) -> str:
        with self._lock:
            if not self.steps:
                return ""
            return f"{self.steps} step(s) done, last: {self.last}"

    def tail(self) -> str:
        with self._lock:
            return "\n".join(self.lines[-self.keep :])


def run_condensed(
    cmd: list[str],
    label: str,
    doing: str,
    log_path: Path,
    typical: str = "",
    out: TextIO | None = None,
    interval: float | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run @cmd with its output (stdout + stderr) going to @log_path and a
    progress line every @interval seconds to @out. Returns (exit code, the
    output's last lines) so a caller can show them on failure."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cond = CondensedOutput()
    with open(log_path, "w") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert proc.stdout is not None
        with Heartbeat(label, doing, typical, out, interval, cond.status):
            for line in proc.stdout:
                log.write(line)
                cond.feed(line)
            rc = proc.wait()
    return rc, cond.tail()
