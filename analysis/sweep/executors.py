"""The local executor: a pool of worker processes on this machine.

Each run is one ``run_all.py worker <run dir>`` process in a session of its own
(so the terminal's Ctrl-C reaches only this driver, which then stops the workers
in order). The pool is sized to the cores and the available memory divided by
the per-run resources, unless ``--jobs`` says otherwise.

Ctrl-C once: no new runs start; every worker gets SIGTERM, kills its backend
and records ``interrupted``; finished runs are untouched; the sweep resumes
with the same command. Ctrl-C twice: workers are killed at once and the driver
marks what they left ``interrupted`` itself. SIGUSR1 drains the pool: no new
runs start and the running ones finish (a session that must end at a given
time loses no work); Ctrl-C still interrupts a draining pool.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..progress import interval_s
from .rundir import RunDir, State, StatusError, is_stale_running

ROOT = Path(__file__).resolve().parents[2]
WORKER_DISK_EXIT = 28


def mem_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def pool_size(cpus_per_run: int, mem_per_run: int, jobs: int | None = None) -> tuple[int, str]:
    if jobs is not None and jobs < 1:  # a pool of 0 or -1 would loop forever, running nothing
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    mem = mem_available()
    by_cpu = max(1, cores // max(1, cpus_per_run))
    by_mem = max(1, mem // max(1, mem_per_run))
    if jobs is not None:
        return jobs, f"--jobs {jobs}"
    n = min(by_cpu, by_mem)
    return n, (
        f"{n} parallel: {cores} cores / {cpus_per_run} per run = {by_cpu}, "
        f"{mem >> 20} MiB available / {mem_per_run >> 20} MiB per run = {by_mem}"
    )


def fmt_s(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def worker_cmd(run_dir: Path, executor: str) -> list[str]:
    return [
        sys.executable,
        str(ROOT / "run_all.py"),
        "worker",
        str(run_dir),
        "--executor",
        executor,
    ]


@dataclass
class Progress:
    total: int
    parallel: int
    out: TextIO = sys.stdout
    started: float = field(default_factory=time.monotonic)
    durations: list[float] = field(default_factory=list)
    finished: int = 0
    counts: Counter = field(default_factory=Counter)
    tty: bool = False
    interval: float = field(default_factory=interval_s)  # not a tty: a line this often
    last_write: float = field(default_factory=time.monotonic)

    def eta(self, running: int) -> str:
        left = self.total - self.finished
        if not self.durations:
            return "ETA ?"
        mean = sum(self.durations) / len(self.durations)
        return f"ETA {fmt_s(left * mean / max(1, min(self.parallel, left)))}"

    def line(self, running: int) -> str:
        width = 24
        done = int(width * self.finished / max(1, self.total))
        bar = "#" * done + "." * (width - done)
        states = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        return (
            f"[{bar}] {self.finished}/{self.total} {states} running={running} "
            f"elapsed {fmt_s(time.monotonic() - self.started)} {self.eta(running)}"
        )

    def event(self, text: str, running: int) -> None:
        if self.tty:
            self.out.write("\r\033[K")
        self.out.write(f"{text} | {self.line(running)}\n")
        self.out.flush()
        self.last_write = time.monotonic()

    def tick(self, running: int, details: Callable[[], list[str]] | None = None) -> None:
        """A tty: redraw the status line. Otherwise (a log file, a pipe): after
        @interval seconds without a line, one line and what each run is doing."""
        if self.tty:
            self.out.write("\r\033[K" + self.line(running))
            self.out.flush()
            return
        if time.monotonic() - self.last_write < self.interval:
            return
        self.out.write(f"still running | {self.line(running)}\n")
        for d in details() if details else []:
            self.out.write(f"  {d}\n")
        self.out.flush()
        self.last_write = time.monotonic()


# SIGUSR1 asks a local sweep to drain; the request holds for the whole `run`
# command (driver.run_sweep), so one sent while the kernel or image builds
# starts no run at all.
_drain_requests: list[float] = []


def _request_drain(_signum: int, _frame: Any) -> None:
    if not _drain_requests:
        sys.stderr.write(
            "SIGUSR1: drain requested (a local sweep starts no new run; other executors "
            "ignore it)\n"
        )
    _drain_requests.append(time.monotonic())


@contextlib.contextmanager
def drain_on_sigusr1() -> Iterator[None]:
    """SIGUSR1 requests a drain while the block runs (main thread only; nested
    uses keep the outer handler); the request is forgotten when the outermost ends."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGUSR1) is _request_drain
    ):
        yield
        return
    prev = signal.signal(signal.SIGUSR1, _request_drain)
    try:
        yield
    finally:
        signal.signal(signal.SIGUSR1, prev)
        _drain_requests.clear()


@dataclass
class LocalResult:
    counts: Counter
    interrupted: bool = False
    stopped_reason: str | None = None
    drained: int | None = None  # SIGUSR1: how many runs it left unstarted


class LocalExecutor:
    name = "local"

    def __init__(self, parallel: int, min_free_disk: int, out: TextIO = sys.stdout) -> None:
        if parallel < 1:
            raise ValueError(f"parallel must be >= 1, got {parallel}")
        self.parallel = parallel
        self.min_free_disk = min_free_disk
        self.out = out

    def run(
        self,
        runs: list[tuple[RunDir, str]],
        prepare: Callable[[int], str | None] | None = None,
    ) -> LocalResult:
        """runs: (run dir, label) in order, to be run.

        prepare(i), if given, is called just before runs[i] starts (it creates
        the run directory; none exist before); a problem it returns fails that
        run without starting it.
        """
        with drain_on_sigusr1():
            return self._run(runs, prepare)

    def _run(
        self,
        runs: list[tuple[RunDir, str]],
        prepare: Callable[[int], str | None] | None,
    ) -> LocalResult:
        prog = Progress(
            total=len(runs), parallel=self.parallel, out=self.out, tty=self.out.isatty()
        )
        queue = list(enumerate(runs))
        active: dict[int, tuple[subprocess.Popen[bytes], RunDir, str, float]] = {}
        sigints: list[float] = []
        prev = signal.signal(signal.SIGINT, lambda s, f: sigints.append(time.monotonic()))
        stopped: str | None = None
        drained: int | None = None
        try:
            while queue or active:
                if _drain_requests and drained is None and not stopped:
                    drained = len(queue)
                    self.out.write(
                        f"\ndraining (SIGUSR1): {len(active)} running run(s) finish, "
                        f"{drained} not started\n"
                    )
                    self.out.flush()
                if drained is not None and not active:
                    break
                if sigints and not stopped:
                    stopped = "interrupted (Ctrl-C)"
                    self.out.write(
                        f"\n{stopped}: stopping {len(active)} running run(s); "
                        "finished runs are kept\n"
                    )
                    for p, *_ in active.values():
                        _signal_group(p.pid, signal.SIGTERM)
                if len(sigints) > 1:
                    for p, rd, *_ in active.values():
                        _kill_hard(p.pid, rd)
                if not stopped and drained is None and queue and len(active) < self.parallel:
                    free = shutil.disk_usage(_existing(queue[0][1][0].path)).free
                    if free < self.min_free_disk:
                        stopped = (
                            f"disk nearly full: {free >> 20} MiB free < "
                            f"{self.min_free_disk >> 20} MiB (resources.min_free_disk)"
                        )
                        self.out.write(f"stopping: {stopped}\n")
                        continue
                    i, (rd, label) = queue.pop(0)
                    problem = prepare(i) if prepare else None
                    if problem:
                        _record_unstartable(rd, problem)
                        prog.finished += 1
                        prog.counts[State.FAILED.value] += 1
                        msg = f"{'failed':11s} {rd.path.name} {label} (not started: {problem})"
                        prog.event(msg, len(active))
                        continue
                    with open(rd.path / "worker.out", "wb") as wo:
                        p = subprocess.Popen(
                            worker_cmd(rd.path, "local"),
                            stdout=wo,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        )
                    active[p.pid] = (p, rd, label, time.monotonic())
                    continue
                for pid, (p, rd, label, t0) in list(active.items()):
                    rc = p.poll()
                    if rc is None:
                        continue
                    del active[pid]
                    state = rd.state()
                    if state == State.RUNNING or state is None:
                        # the worker died without recording its end (e.g. SIGKILL)
                        rd.transition(
                            State.INTERRUPTED if stopped else State.FAILED,
                            error=f"worker exited {rc} without a final state",
                            exit_code=rc,
                        )
                        state = rd.state()
                    assert state is not None
                    prog.finished += 1
                    prog.counts[state.value] += 1
                    if state == State.DONE:
                        prog.durations.append(time.monotonic() - t0)
                    msg = f"{state.value:11s} {rd.path.name} {label} {fmt_s(time.monotonic() - t0)}"
                    if state != State.DONE:
                        err = (rd.status() or {}).get("error") or ""
                        msg += f" ({err.splitlines()[0][:120] if err else 'see logs/'})"
                    prog.event(msg, len(active))
                    if rc == WORKER_DISK_EXIT and not stopped:
                        stopped = (
                            f"disk full in run {rd.path.name}: {(rd.status() or {}).get('error')}"
                        )
                        self.out.write(f"stopping: {stopped}\n")
                if stopped and not active:
                    break
                prog.tick(len(active), lambda: [_doing(*v) for v in active.values()])
                time.sleep(0.2)
        finally:
            signal.signal(signal.SIGINT, prev)
            for p, rd, *_ in active.values():  # only after an exception
                _kill_hard(p.pid, rd)
                if is_stale_running(rd) or rd.state() == State.RUNNING:
                    rd.transition(State.INTERRUPTED, error="driver stopped")
        if prog.tty:
            self.out.write("\n")
        return LocalResult(
            prog.counts, interrupted=bool(sigints), stopped_reason=stopped, drained=drained
        )


def _doing(p: subprocess.Popen[bytes], rd: RunDir, label: str, t0: float) -> str:
    """One running run, for the progress line: id, point, time, activity."""
    from .backends import checkpoint_activity  # noqa: PLC0415 - backends is heavier

    what = checkpoint_activity(rd.path)
    return f"{rd.path.name} {label}: {fmt_s(time.monotonic() - t0)}" + (f", {what}" if what else "")


def _existing(path: Path) -> Path:
    """path or its nearest existing parent (run directories are created late)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _record_unstartable(rd: RunDir, problem: str) -> None:
    """Mark a run that could not be prepared failed, where its status allows it."""
    try:
        rd.transition(State.FAILED, error=f"not started: {problem}")
    except (StatusError, OSError):
        pass  # no usable status.json to record it in; the progress line says it


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _kill_hard(worker_pid: int, rd: RunDir) -> None:
    """SIGKILL the worker's group and the backend group it recorded."""
    _signal_group(worker_pid, signal.SIGKILL)
    bpg = (rd.status() or {}).get("backend_pgid")
    if isinstance(bpg, int) and bpg > 1:
        _signal_group(bpg, signal.SIGKILL)


def summary_line(counts: Counter[str] | dict[str, Any]) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "nothing run"
