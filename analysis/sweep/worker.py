"""Execute one run directory: the code both executors call (`run_all.py worker DIR`).

The worker takes the run's lock, refuses to touch a ``done`` run, moves an
earlier unsuccessful attempt aside, checks free disk space, marks the run
``running`` and executes the backend in a forked child that leads its own
process group. The parent enforces the hard time limit and turns SIGTERM /
SIGINT (Ctrl-C, ``scancel``, Slurm's time limit) into ``interrupted``: it kills
the child's whole group (QEMU / gem5 included) and records the state before it
exits. Every end is recorded with exit code, timings and, unless done, the log
tail.

Exit codes: 0 done (or already done), 1 failed, 2 not a run directory,
28 not enough free disk, 75 another worker holds the run, 124 timeout,
130 interrupted.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing as mp
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .backends import HOST_TIMES_NAME, RUNNERS, Outcome
from .cost import record_run
from .rundir import FINAL, RunDir, State, host_info, now_iso

EXIT = {
    "done": 0,
    "failed": 1,
    "usage": 2,
    "disk": 28,
    "locked": 75,
    "timeout": 124,
    "interrupted": 130,
}
# Hard limit = backend timeout + grace (the backend gets the chance to stop itself).
GRACE_S = float(os.environ.get("NUMA_LB_TIMEOUT_GRACE_S", "60"))
# Test hook: "module:function" replacing the backend runner (tests/unit only).
RUNNER_ENV = "NUMA_LB_TEST_RUNNER"


def _runner(backend: str) -> Any:
    hook = os.environ.get(RUNNER_ENV)
    if hook:
        mod, _, fn = hook.partition(":")
        return getattr(importlib.import_module(mod), fn)
    return RUNNERS[backend]


FINE_CLOCK_S = 1e-6  # elapsed times need at least microsecond resolution
# Both read the TSC (rdtsc). Linux starts on tsc-early (frequency from the boot
# calibration against the PIT) and swaps in tsc about a second after boot,
# once tsc_refine_calibration_work has compared it with another timer; gem5
# restores the boot checkpoint before that (uptime ~0.8 s), and its PIT-based
# calibration is exact, so both are the simulated clock.
TSC_CLOCKSOURCES = ("tsc", "tsc-early")


def clock_problem(run_rec: dict[str, Any] | None, backend: str | None) -> str | None:
    """Why the guest's elapsed times cannot be trusted, or None.

    The mix runner records the clock at run start (clocksource, clock_getres).
    A kernel that marked the TSC unstable times with jiffies: every elapsed time
    is then a multiple of 4 ms (+-10 % on a 40 ms mix). Under gem5 the TSC is
    the simulated clock and is required; QEMU's guest clock is host time anyway
    (not architectural), so there only the resolution is checked.
    """
    clock = (run_rec or {}).get("clock")
    if not isinstance(clock, dict):
        return "clock: the guest recorded no clocksource (mix runner too old?)"
    cs, res = clock.get("clocksource"), clock.get("resolution_s")
    if backend == "gem5" and cs not in TSC_CLOCKSOURCES:
        return f"clock: the guest timed with clocksource {cs!r}, not the TSC"
    if not isinstance(res, int | float) or res > FINE_CLOCK_S:
        return f"clock: resolution {res!r} s on clocksource {cs!r} is coarser than 1 us"
    return None


def guest_verdict(
    guest: Path, backend: str | None = None
) -> tuple[bool, str | None, dict[str, Any]]:
    """(ok, error, summary) from the guest's results.jsonl run and run_end records.

    With ``backend`` given, the run record's clock is checked too (clock_problem).
    """
    p = guest / "results.jsonl"
    if not p.exists():
        return False, "no guest results (guest/results.jsonl missing)", {}
    end = None
    start = None
    n = 0
    with open(p, errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                return False, f"guest/results.jsonl line {n + 1} is not JSON (truncated?)", {}
            n += 1
            if not isinstance(rec, dict):
                return False, f"guest/results.jsonl line {n} is not a record", {}
            if rec.get("type") == "run_end":
                end = rec
            elif rec.get("type") == "run" and start is None:
                start = rec
    if end is None:
        return False, "guest results have no run_end record (guest died mid-run?)", {"records": n}
    summary = {
        "records": n,
        "status": end.get("status"),
        "elapsed_s": end.get("elapsed_s"),
        "programs_failed": end.get("programs_failed"),
        "clock": (start or {}).get("clock"),
    }
    if end.get("status") != "ok":
        errs = end.get("errors") or end.get("programs_failed")
        return False, f"guest run_end status {end.get('status')!r}: {errs}", summary
    if backend is not None and (why := clock_problem(start, backend)) is not None:
        return False, why, summary
    return True, None, summary


def checkpoint_wait_s(rd: RunDir) -> float | None:
    """Host seconds the gem5 backend spent building or waiting for the boot
    checkpoint, once that is over (the backend writes it before starting gem5);
    None before then and for runs without one. A run's time limit counts its
    own gem5 process, not a boot shared with other runs (bounded by the same
    limit on its own), so a sweep's first runs are not killed for the boot."""
    try:
        v = json.loads((rd.logs / HOST_TIMES_NAME).read_text()).get("checkpoint_wait_s")
    except (OSError, ValueError, AttributeError):
        return None
    return float(v) if isinstance(v, (int, float)) and v >= 0 else None


def _child(backend: str, rec: dict[str, Any], run_dir: str, timeout_s: float) -> None:
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    rd = RunDir(Path(run_dir))
    fd = os.open(rd.logs / "backend.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = sys.stdout
    try:
        out = _runner(backend)(rec, rd.path, timeout_s)
        if not isinstance(out, Outcome):
            out = Outcome(**out)
        res = out.to_dict()
    except Exception as e:  # recorded, never raised: the parent decides the state
        traceback.print_exc()
        res = Outcome(exit_code=1, error=f"{type(e).__name__}: {e}").to_dict()
    tmp = rd.logs / ".outcome.json.tmp"
    tmp.write_text(json.dumps(res, default=str))
    os.replace(tmp, rd.logs / "outcome.json")
    os._exit(0)


def _kill_group(proc: Any, log: Any) -> None:
    """Stop the backend child and everything in its process group.

    SIGTERM first (QEMU/gem5 exit cleanly and flush logs), SIGKILL after 10 s;
    grandchildren left in the group (a daemonised helper) get SIGKILL at the end.
    """
    pgid = proc.pid
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if not proc.is_alive():
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        proc.join(wait)  # reaps the child; a zombie would still answer killpg(0)
        if proc.is_alive():
            log(f"backend process {pgid} still alive after {sig.name}")
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_one(run_dir: Path, executor: str = "local") -> int:
    rd = RunDir(run_dir)
    if not rd.spec_file.exists() or not rd.status_file.exists():
        print(f"worker: {run_dir} is not a run directory", file=sys.stderr)
        return EXIT["usage"]
    # A reconciler or driver probing the lock (is_locked) holds it for microseconds:
    # only a lock held across a few tries is another worker.
    for wait in (0.2, 0.5, 1.0, 0.0):
        with rd.lock() as got:
            if got:
                return _run_locked(rd, executor)
        time.sleep(wait)
    print(f"worker: {rd.path.name} is being run by another worker", file=sys.stderr)
    return EXIT["locked"]


def _run_locked(rd: RunDir, executor: str) -> int:
    state = rd.state()
    if state == State.DONE:
        print(f"worker: {rd.path.name} is done; never rerun", file=sys.stderr)
        return EXIT["done"]
    if state == State.RUNNING:  # the lock was free: its worker died
        rd.transition(State.INTERRUPTED, error="worker vanished (found running, lock free)")
        state = State.INTERRUPTED
    if state in FINAL:
        rd.reset_for_rerun()
    rec = rd.spec()
    res = rec["resources"]
    rd.logs.mkdir(parents=True, exist_ok=True)
    wlog = open(rd.logs / "worker.log", "a", buffering=1)  # noqa: SIM115

    def log(msg: str) -> None:
        wlog.write(f"{now_iso()} {msg}\n")

    st = rd.status() or {}
    attempt = int(st.get("attempt", 0)) + 1
    free = shutil.disk_usage(rd.path).free
    if free < res["min_free_disk_bytes"]:
        msg = (
            f"not enough free disk at {rd.path}: {free >> 20} MiB free, "
            f"{res['min_free_disk_bytes'] >> 20} MiB required (resources.min_free_disk)"
        )
        log(msg)
        rd.transition(
            State.FAILED,
            error=msg,
            exit_code=EXIT["disk"],
            attempt=attempt,
            finished_at=now_iso(),
            **host_info(),
        )
        return EXIT["disk"]

    slurm = {
        k: os.environ[e]
        for k, e in (
            ("raw_job_id", "SLURM_JOB_ID"),
            ("array_job_id", "SLURM_ARRAY_JOB_ID"),
            ("array_task_id", "SLURM_ARRAY_TASK_ID"),
            ("node", "SLURMD_NODENAME"),
        )
        if e in os.environ
    }
    if "array_job_id" in slurm and "array_task_id" in slurm:
        # the name squeue/scontrol use for an array task, as the submitter recorded it
        slurm["job_id"] = f"{slurm['array_job_id']}_{slurm['array_task_id']}"
    elif "raw_job_id" in slurm:
        slurm["job_id"] = slurm["raw_job_id"]
    # inside a Slurm job: merge with what the submitter recorded; the job is running
    extra: dict[str, Any] = (
        {"slurm": {**(st.get("slurm") or {}), **slurm, "state": "RUNNING"}} if slurm else {}
    )
    # Catch SIGTERM/SIGINT before recording "running": whoever sees that record
    # may signal at once (scancel), and a signal in between would kill the
    # worker with the run left running, to be mapped from Slurm's view instead.
    stop: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        stop.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    # SIGUSR1 drains the driver (executors.py); one that reaches a worker (pkill -f
    # run_all) must not kill it and orphan its backend. A handler, not SIG_IGN,
    # which the backend would inherit across exec.
    old[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, lambda _s, _f: None)
    t0 = time.time()
    backend = rec["point"]["backend"]
    rd.transition(
        State.RUNNING,
        started_at=now_iso(),
        attempt=attempt,
        executor=executor,
        backend=backend,
        **host_info(),
        **extra,
    )
    log(f"attempt {attempt}: {backend} run {rec['run_id']} ({rec.get('label', '')})")

    timeout_s = float(res["time_limit_s"])
    outcome_file = rd.logs / "outcome.json"
    outcome_file.unlink(missing_ok=True)
    (rd.logs / HOST_TIMES_NAME).unlink(missing_ok=True)  # an earlier attempt's wait
    proc = mp.get_context("fork").Process(
        target=_child, args=(backend, rec, str(rd.path), timeout_s), daemon=False
    )
    proc.start()
    rd.update(backend_pgid=proc.pid)
    deadline = time.monotonic() + timeout_s + GRACE_S
    waited: float | None = None  # the gem5 boot checkpoint wait, once it is over
    verdict: State | None = None
    error: str | None = None
    try:
        while proc.is_alive():
            if waited is None and (waited := checkpoint_wait_s(rd)) is not None:
                deadline += min(waited, timeout_s)  # the limit is the run's own time
            if stop:
                log(f"signal {signal.Signals(stop[0]).name}: killing the backend")
                _kill_group(proc, log)
                verdict, error = State.INTERRUPTED, f"interrupted by {signal.Signals(stop[0]).name}"
                break
            if time.monotonic() > deadline:
                log("hard time limit reached: killing the backend")
                _kill_group(proc, log)
                verdict, error = State.TIMEOUT, f"hard time limit {timeout_s + GRACE_S:.0f} s"
                break
            proc.join(0.25)
        proc.join(5)
        _kill_group(proc, log)  # stragglers (e.g. a daemonised QEMU)
    finally:
        for s, h in old.items():
            signal.signal(s, h)

    if verdict is None and stop:
        # The signal also reached the backend (Slurm signals the whole job), which
        # may have died before the loop saw the flag: still an interruption.
        verdict, error = State.INTERRUPTED, f"interrupted by {signal.Signals(stop[0]).name}"
    outcome: dict[str, Any] = {}
    if outcome_file.exists():
        outcome = json.loads(outcome_file.read_text())
    fields: dict[str, Any] = {
        "finished_at": now_iso(),
        "duration_s": round(time.time() - t0, 3),
        "exit_code": outcome.get("exit_code"),
        "backend_outcome": outcome.get("details") or None,
    }
    if verdict is None:
        if not outcome:
            verdict, error = State.FAILED, f"backend process died (exit {proc.exitcode})"
        elif outcome.get("timed_out"):
            verdict, error = State.TIMEOUT, outcome.get("error") or "backend timed out"
        elif outcome.get("exit_code") not in (0, None) or outcome.get("error"):
            verdict, error = State.FAILED, outcome.get("error") or "backend failed"
            if (rd.guest / "results.jsonl").exists():  # say what the guest reported
                ok, gerr, summary = guest_verdict(rd.guest)
                fields["guest"] = summary
                if gerr:
                    error = f"{error}; {gerr}"
        else:
            ok, gerr, summary = guest_verdict(rd.guest, backend)
            fields["guest"] = summary
            verdict, error = (State.DONE, None) if ok else (State.FAILED, gerr)
    if verdict != State.DONE:
        fields["error"] = error
        fields["log_tail"] = rd.log_tail()
    log(f"end: {verdict.value}{' (' + error + ')' if error else ''}")
    rd.transition(verdict, **fields)
    try:  # host time of this shape for later cost previews (cost.py)
        record_run(rec, rd.status() or {}, rd.path)
    except OSError as e:
        log(f"history not recorded: {e}")
    wlog.close()
    return EXIT[verdict.value]
