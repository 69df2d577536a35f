"""Run directories and their status.json state machine.

Layout of one run (``<out>/runs/<first 16 hex digits of the run id>/``)::

    spec.json      point, full run id, provenance, artifact paths, resources, job
    job.json       the guest job handed to the backend (mix runner schema 1)
    status.json    state + history of transitions, timings, host, pid, exit codes
    logs/          backend.log (QEMU console / gem5 stdout+stderr), worker.log
    guest/         guest result files (results.jsonl, prog-*.out/err)
    m5out/         gem5 output directory (stats.txt, config.json, ...)
    attempts/N/    earlier unsuccessful attempts, moved aside on --rerun-failed

States: pending -> running -> done | failed | timeout | interrupted. status.json
is rewritten atomically (write + rename) at every transition, under
``.status.lock`` (the worker and the Slurm reconciler both rewrite it; see
``RunDir.status_lock``). ``.lock`` is held by the run's worker for the whole
run. A ``done`` run is never modified again: the worker refuses to touch it and
the driver skips it.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import fcntl
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from analysis.sweep.atomic import write_json_atomic  # the driver and cost import it from here
from analysis.sweep.staging import _lock


class State(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


FINAL = {State.DONE, State.FAILED, State.TIMEOUT, State.INTERRUPTED}
RERUN_ON_REQUEST = {State.FAILED, State.TIMEOUT}
_ALLOWED = {
    None: {State.PENDING},
    State.PENDING: {State.PENDING, State.RUNNING, State.INTERRUPTED, State.FAILED, State.TIMEOUT},
    State.RUNNING: {State.DONE, State.FAILED, State.TIMEOUT, State.INTERRUPTED},
    State.FAILED: {State.PENDING},
    State.TIMEOUT: {State.PENDING},
    # The Slurm reconciler may correct an interrupted worker (SIGTERM at the time
    # limit) to timeout once Slurm reports TIMEOUT.
    State.INTERRUPTED: {State.PENDING, State.TIMEOUT},
    State.DONE: set(),
}


# status locks this thread holds, by run directory: status_lock is reentrant
_held = threading.local()


class StatusError(RuntimeError):
    pass


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def read_json(path: Path) -> Any:
    with open(path) as f:
        return json.load(f)


STATES = tuple(s.value for s in State)


def object_problem(obj: Any) -> str | None:
    """Why a parsed spec.json/status.json cannot be used, or None.

    Valid JSON is not enough: hand edits and other tools leave lists, null or
    strings behind, and a status whose state is not a string of the state
    machine would crash every reader that trusts it.
    """
    if not isinstance(obj, dict):
        return f"is not a JSON object (got {type(obj).__name__})"
    return None


def status_problem(st: Any) -> str | None:
    """Why a parsed status.json is unusable (not an object, bad state/history)."""
    problem = object_problem(st)
    if problem:
        return problem
    if st.get("state") not in STATES:
        return f"has state {st.get('state')!r}, not one of {', '.join(STATES)}"
    if not isinstance(st.get("history", []), list):
        return "has a history that is not a list"
    return None


def read_object(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None) or (None, problem) for a JSON file that should hold an object.

    A missing file is a problem too ("missing"); nothing here raises on bad data.
    """
    try:
        obj = read_json(path)
    except FileNotFoundError:
        return None, "missing"
    except (OSError, ValueError) as e:  # ValueError covers JSON and UTF-8 decode errors
        return None, f"unreadable: {e}"
    problem = object_problem(obj)
    return (None, problem) if problem else (obj, None)


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    # ------------------------------------------------------------ files
    @property
    def spec_file(self) -> Path:
        return self.path / "spec.json"

    @property
    def status_file(self) -> Path:
        return self.path / "status.json"

    @property
    def job_file(self) -> Path:
        return self.path / "job.json"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def guest(self) -> Path:
        return self.path / "guest"

    @property
    def m5out(self) -> Path:
        return self.path / "m5out"

    def spec(self) -> dict[str, Any]:
        spec, problem = read_object(self.spec_file)
        if spec is None:
            raise StatusError(f"{self.path}: spec.json {problem}")
        return spec

    def status(self) -> dict[str, Any] | None:
        """status.json, or None when there is none yet.

        A torn write cannot happen (rename), but a hand-edited file can: one
        that is not JSON, not an object or has no valid state reads as failed
        (kept unless --rerun-failed), with the problem as its error.
        """
        try:
            st = read_json(self.status_file)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:  # not JSON, not UTF-8, a directory, no permission
            why = e.strerror if isinstance(e, OSError) and e.strerror else "not JSON"
            return {"state": State.FAILED.value, "error": f"status.json unreadable ({why})",
                    "history": []}  # fmt: skip
        problem = status_problem(st)
        if problem:
            return {"state": State.FAILED.value, "error": f"status.json {problem}", "history": []}
        return st

    def state(self) -> State | None:
        st = self.status()
        return State(st["state"]) if st else None

    # ------------------------------------------------------------ create
    def create(self, spec_record: dict[str, Any], job: dict[str, Any]) -> bool:
        """Create a new run directory (pending). Returns False if it already exists."""
        if self.status_file.exists():
            existing = self.spec()
            if existing.get("run_id") != spec_record.get("run_id"):
                raise StatusError(
                    f"{self.path}: holds run {existing.get('run_id')}, not "
                    f"{spec_record.get('run_id')} (run id prefix collision)"
                )
            return False
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.spec_file, spec_record)
        write_json_atomic(self.job_file, job)
        self.transition(State.PENDING, created_at=now_iso())
        return True

    # ------------------------------------------------------------ state
    @contextlib.contextmanager
    def status_lock(self) -> Iterator[None]:
        """Hold while reading, deciding on and rewriting status.json.

        Two processes rewrite it: the worker and, under Slurm, the driver's
        reconciler. Each rewrite is a read-modify-write, so without this lock a
        reconciler that read ``running`` just before the worker recorded
        ``done`` writes ``running`` back, and the run is later mapped failed.
        Blocking and held for milliseconds; reentrant within a thread. A lock
        file apart from ``.lock``, which a worker holds for its whole run.
        """
        key = str(self.path)
        depth: dict[str, int] = _held.__dict__.setdefault("depth", {})
        if depth.get(key):
            depth[key] += 1
            try:
                yield
            finally:
                depth[key] -= 1
            return
        lock_path = self.path / ".status.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # staging's lock: a shared file system without locks gets a clear error
            _lock(fd, lock_path, blocking=True)
            depth[key] = 1
            try:
                yield
            finally:
                depth.pop(key, None)
        finally:
            os.close(fd)

    def transition(self, new: State, **fields: Any) -> dict[str, Any]:
        with self.status_lock():
            st = self.status() or {"history": []}
            old = State(st["state"]) if "state" in st else None
            if new not in _ALLOWED[old]:
                raise StatusError(f"{self.path.name}: {old} -> {new} is not allowed")
            st["state"] = new.value
            st.update(fields)
            st.setdefault("history", []).append(
                {"state": new.value, "at": now_iso(), "t": time.time()}
            )
            write_json_atomic(self.status_file, st)
            return st

    def update(self, **fields: Any) -> dict[str, Any]:
        """Add fields without a state change (e.g. the Slurm job id)."""
        with self.status_lock():
            st = self.status()
            if st is None:
                raise StatusError(f"{self.path}: no status.json")
            if st["state"] == State.DONE.value:
                raise StatusError(f"{self.path.name}: done runs are never modified")
            st.update(fields)
            write_json_atomic(self.status_file, st)
            return st

    def reset_for_rerun(self) -> int:
        """Move an unsuccessful attempt's outputs to attempts/N and go back to pending."""
        with self.status_lock():
            return self._reset_for_rerun()

    def _reset_for_rerun(self) -> int:
        st = self.status() or {}
        state = State(st.get("state", "pending"))
        if state == State.DONE:
            raise StatusError(f"{self.path.name}: done runs are never rerun")
        if state == State.PENDING:
            return int(st.get("attempt", 0))
        n = int(st.get("attempt", 1))
        dest = self.path / "attempts" / str(n)
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("logs", "guest", "m5out"):
            src = self.path / name
            if src.exists():
                shutil.move(str(src), str(dest / name))
        shutil.copy2(self.status_file, dest / "status.json")
        keep = {k: st[k] for k in ("history", "created_at") if k in st}
        keep["attempt"] = n
        keep["previous"] = {k: st.get(k) for k in ("state", "exit_code", "error", "finished_at")}
        keep["state"] = st["state"]
        write_json_atomic(self.status_file, keep)
        self.transition(State.PENDING)
        return n

    @contextlib.contextmanager
    def lock(self) -> Iterator[bool]:
        """Exclusive, non-blocking: yields False when another process holds it."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    yield False
                    return
                raise
            yield True
        finally:
            os.close(fd)

    def is_locked(self) -> bool:
        with self.lock() as got:
            return not got

    def log_tail(self, nbytes: int = 4000) -> str:
        parts = []
        names = sorted(p.name for p in self.logs.glob("*.log")) if self.logs.exists() else []
        names.sort(key=lambda n: n == "worker.log")  # the worker's own log last
        for name in names:
            p = self.logs / name
            if p.exists():
                with open(p, "rb") as f:
                    f.seek(0, os.SEEK_END)
                    size = f.tell()
                    f.seek(max(0, size - nbytes))
                    text = f.read().decode("utf-8", "replace")
                parts.append(f"--- {name} (last {min(size, nbytes)} of {size} bytes)\n{text}")
        return "\n".join(parts)


def host_info() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale_running(rd: RunDir) -> bool:
    """A 'running' run whose worker is gone (driver killed, machine rebooted)."""
    st = rd.status() or {}
    if st.get("state") != State.RUNNING.value:
        return False
    if rd.is_locked():
        return False  # a live worker holds the lock (on this or, via NFS locks, another host)
    if st.get("slurm", {}).get("job_id") and st.get("host") != socket.gethostname():
        return False  # decided by the Slurm reconciler from the job state
    return not (st.get("host") == socket.gethostname() and pid_alive(int(st.get("pid", 0))))
